"""Chapter 13: reading the attention of a trained model: what kind of head is it, and where does
information flow through the layers?

* :func:`head_scores`: per head, the mean weight on the previous token, the next token,
  the first token ([CLS]) and the last real token ([SEP]), and how broad its rows are
  (Clark et al., 2019, "What does BERT look at?").
* :func:`head_types`: one label per head from those scores.
* :func:`attention_rollout`: attention multiplied through the layers with the residual
  connection added as an identity (Abnar and Zuidema, 2020).

Shape legend: B batch, H heads, T tokens (queries = keys), ``num_layers`` layers.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..nn._checks import check_positive_int, check_tensor
from ..nn.metrics import attention_entropy

__all__ = ["HEAD_SCORES", "head_scores", "head_types", "attention_rollout", "top_tokens"]

HEAD_SCORES = ("previous", "next", "first", "last", "breadth")
"""The keys of :func:`head_scores`, in order."""


def _stack(attentions) -> torch.Tensor:
    """A list of ``num_layers`` tensors ``(..., T, T)`` or one tensor -> ``(num_layers, ..., T, T)``."""
    if isinstance(attentions, (list, tuple)):
        if not attentions:
            raise ValueError("attentions must hold at least one layer, got an empty list")
        attentions = torch.stack(list(attentions))
    if not isinstance(attentions, torch.Tensor) or attentions.dim() < 3 \
            or attentions.size(-1) != attentions.size(-2):
        raise ValueError(f"attentions must be a list of (..., T, T) tensors or one "
                         f"(num_layers, ..., T, T) tensor, got "
                         f"{getattr(attentions, 'shape', type(attentions).__name__)}")
    return attentions


def _masked_mean(values: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Mean of ``values (..., B, H, T)`` over B and T where ``keep (B, 1, T)`` -> ``(..., H)``
    (the last axis may be one shorter than T, as for the diagonals next to the main one)."""
    keep = keep.to(values.dtype)
    return (values * keep).sum((-3, -1)) / keep.sum().clamp(min=1)


def head_scores(attentions, attention_mask: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Per-head behaviour, averaged over the real query tokens of every sentence.

    ``attentions``: a list of ``num_layers`` tensors ``(B, H, T, T)`` (or one tensor with a
    leading layer axis); ``attention_mask (B, T)``: 1 for real tokens, padding on the right.
    Returns name -> ``(num_layers, H)``:

    * ``previous``: mean weight of query ``i`` on key ``i - 1`` (queries ``1 .. n-1``);
    * ``next``: mean weight on key ``i + 1`` (queries ``0 .. n-2``);
    * ``first``: mean weight on key 0 ([CLS] in BERT); ``last``: on the last real
      token ([SEP]);
    * ``breadth``: mean row entropy divided by ``ln n`` (1 = uniform over all n tokens,
      0 = all weight on one), ``n`` the sentence's real length.
    """
    w = _stack(attentions)  # (num_layers, B, H, T, T)
    if w.dim() != 5:
        raise ValueError(f"attentions must be (B, H, T, T) per layer, got {tuple(w.shape[1:])}")
    B, T = w.size(1), w.size(-1)
    if attention_mask is None:
        attention_mask = torch.ones(B, T, dtype=torch.long)
    if tuple(attention_mask.shape) != (B, T):
        raise ValueError(f"attention_mask must have shape (B, T) = {(B, T)}, "
                         f"got {tuple(attention_mask.shape)}")
    real = attention_mask.bool().to(w.device)  # (B, T)
    lengths = real.sum(-1)  # (B,)
    if lengths.device.type != "meta" and (lengths == 0).any():  # a meta tensor holds no values
        raise ValueError(f"attention_mask must mark at least one real token per sentence, got none in "
                         f"sentences {torch.nonzero(lengths == 0).flatten().tolist()}")
    pairs = (real[:, 1:] & real[:, :-1]).unsqueeze(1)  # (B, 1, T-1): both tokens real
    last = (lengths - 1).view(1, B, 1, 1, 1).expand(*w.shape[:-1], 1)  # index of [SEP] per sentence
    breadth = attention_entropy(w) / torch.log(lengths.clamp(min=2).to(w.dtype)).view(1, B, 1, 1)
    return {
        "previous": _masked_mean(torch.diagonal(w, -1, -2, -1), pairs),  # w[i, i-1]
        "next": _masked_mean(torch.diagonal(w, 1, -2, -1), pairs),  # w[i, i+1]
        "first": _masked_mean(w[..., 0], real.unsqueeze(1)),
        "last": _masked_mean(w.gather(-1, last).squeeze(-1), real.unsqueeze(1)),
        "breadth": _masked_mean(breadth, real.unsqueeze(1)),
    }


def head_types(scores: dict[str, torch.Tensor], threshold: float = 0.5,
               broad: float = 0.75) -> list[list[str]]:
    """One label per head from :func:`head_scores`: the first of ``previous``, ``next``,
    ``first``, ``last`` whose mean weight exceeds ``threshold``, else ``broad`` when
    ``breadth`` exceeds ``broad``, else ``mixed``. Returns ``num_layers`` lists of H labels."""
    if not 0 < threshold < 1 or not 0 < broad < 1:
        raise ValueError(f"threshold and broad must lie in (0, 1), got {threshold}, {broad}")
    kinds = ("previous", "next", "first", "last", "breadth")
    if not isinstance(scores, dict) or any(not isinstance(scores.get(k), torch.Tensor) or scores[k].dim() != 2
                                           for k in kinds):
        raise TypeError(f"scores must be head_scores(...)'s dict of (num_layers, H) tensors {kinds}, "
                        f"got {type(scores).__name__}")
    labels = []
    for layer in range(scores["breadth"].size(0)):
        row = []
        for h in range(scores["breadth"].size(1)):
            kind = next((k for k in ("previous", "next", "first", "last")
                         if scores[k][layer, h] > threshold), None)
            row.append(kind or ("broad" if scores["breadth"][layer, h] > broad else "mixed"))
        labels.append(row)
    return labels


def attention_rollout(attentions, residual_weight: float = 0.5) -> torch.Tensor:
    """Attention rollout (Abnar and Zuidema, 2020): how much each input token feeds
    each position after all layers, following attention only.

    Each layer's weights are averaged over heads, the residual connection is added as
    ``A = (1 - r) W + r I`` (``r = residual_weight``, 0.5 in the paper), rows are
    renormalised, and the layers are multiplied: ``R = A_num_layers ... A_2 A_1``.
    ``attentions``: a list of ``num_layers`` tensors ``(..., H, T, T)`` (or one tensor
    with a leading layer axis). Returns ``(..., T, T)``, rows summing to one: row ``i``
    is position ``i``'s mix of the input tokens (a row whose weights are all zero, a fully
    masked query with ``residual_weight=0``, stays zero).
    """
    w = _stack(attentions)  # (num_layers, ..., H, T, T)
    if w.dim() < 4:
        raise ValueError(f"attentions need a head axis: (..., H, T, T) per layer, got {tuple(w.shape[1:])}")
    if not 0.0 <= residual_weight <= 1.0:
        raise ValueError(f"residual_weight must lie in [0, 1], got {residual_weight!r}")
    eye = torch.eye(w.size(-1), dtype=w.dtype, device=w.device)  # (T, T)
    rollout = None
    for layer in w:  # (..., H, T, T)
        a = (1 - residual_weight) * layer.mean(-3) + residual_weight * eye  # (..., T, T)
        total = a.sum(-1, keepdim=True)  # (..., T, 1)
        a = a / torch.where(total == 0, 1.0, total)  # a fully masked row (r = 0) stays zero, not NaN
        rollout = a if rollout is None else a @ rollout  # later layers apply on the left
    return rollout


def top_tokens(weights: torch.Tensor, tokens: Sequence[str], k: int = 3) -> list[tuple[str, float]]:
    """The ``k`` largest weights of one row ``(T,)`` with their tokens, largest first."""
    check_tensor("weights", weights)
    check_positive_int("k", k)
    if weights.dim() != 1 or weights.numel() != len(tokens):
        raise ValueError(f"weights must be one row (T,) and tokens its T labels, got weights "
                         f"{tuple(weights.shape)} and {len(tokens)} tokens")
    values, index = weights.topk(min(k, len(tokens)))
    return [(tokens[i], v) for i, v in zip(index.tolist(), values.tolist())]

