"""Scaled dot-product attention (Vaswani et al., 2017) and the softmax under it.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V

Shape legend: ``...`` batch dims (e.g. B, H), L query length, S key length,
E query/key dim (d_k), Ev value dim (d_v).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._checks import broadcast_or_raise, check_tensor
from .masks import causal_mask

LOW_PRECISION = (torch.float16, torch.bfloat16)


def softmax(scores: torch.Tensor, dim: int = -1, inplace: bool = False) -> torch.Tensor:
    """Numerically stable softmax along ``dim``.

    Subtracting the row maximum first changes nothing mathematically
    (softmax(x) = softmax(x - c)) but keeps every ``exp`` at most 1, so logits of
    1e4 do not overflow. Rows that are entirely ``-inf`` come out as NaN; callers
    that mask decide what such a row means.

    ``inplace=True`` reuses the memory of ``scores`` (no second buffer the size of
    the score matrix). When autograd is recording, the intermediate values are
    needed for the backward pass, so it computes out of place anyway.
    """
    row_max = scores.amax(dim, keepdim=True).detach()
    # A row of -inf has max -inf; -inf - -inf is NaN, so shift such rows by 0.
    row_max = row_max.masked_fill(row_max == float("-inf"), 0.0)
    if inplace and not (scores.requires_grad and torch.is_grad_enabled()):
        scores.sub_(row_max).exp_()
        return scores.div_(scores.sum(dim, keepdim=True))
    exp = (scores - row_max).exp()
    return exp / exp.sum(dim, keepdim=True)


def _check_qkv(query, key, value) -> None:
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(name, x, min_dim=2)
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(
            f"query, key and value must share a dtype, got {query.dtype}, {key.dtype}, {value.dtype}"
        )
    if query.size(-1) != key.size(-1):
        raise ValueError(
            f"query and key must have the same last dim E, got query {tuple(query.shape)} "
            f"and key {tuple(key.shape)}"
        )
    if key.shape[:-1] != value.shape[:-1]:
        raise ValueError(
            f"key and value must agree on all dims but the last, got key {tuple(key.shape)} "
            f"and value {tuple(value.shape)}"
        )
    if query.size(-2) == 0 or key.size(-2) == 0 or query.size(-1) == 0:
        raise ValueError(
            f"empty sequence: query {tuple(query.shape)}, key {tuple(key.shape)}"
        )
    try:
        torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"batch dims of query {tuple(query.shape)} and key {tuple(key.shape)} do not broadcast"
        ) from None


def _check_mask(attn_mask, scores_shape) -> None:
    if not isinstance(attn_mask, torch.Tensor):
        raise TypeError(f"attn_mask must be a torch.Tensor or None, got {type(attn_mask).__name__}")
    if attn_mask.dtype != torch.bool and not attn_mask.dtype.is_floating_point:
        raise TypeError(
            f"attn_mask must be bool (True = may attend) or float (added to the scores), "
            f"got dtype {attn_mask.dtype}"
        )
    broadcast_or_raise("attn_mask", attn_mask.shape, scores_shape, "the scores (..., L, S)")


def _check_options(scale, dropout_p) -> None:
    if scale is not None and not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number or None, got {scale!r}")
    if not (isinstance(dropout_p, (int, float)) and 0.0 <= dropout_p < 1.0):
        raise ValueError(f"dropout_p must lie in [0, 1), got {dropout_p!r}")


def apply_mask_(scores: torch.Tensor, attn_mask=None, is_causal: bool = False) -> torch.Tensor:
    """Apply a boolean (True = may attend) or additive float mask to ``scores`` in place."""
    L, S = scores.shape[-2:]
    if is_causal:
        scores.masked_fill_(~causal_mask(L, S, device=scores.device), float("-inf"))
    if attn_mask is None:
        return scores
    if attn_mask.dtype == torch.bool:
        return scores.masked_fill_(~attn_mask, float("-inf"))
    return scores.add_(attn_mask.to(scores.dtype))


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention that also returns the weights.

    Args:
        query: ``(..., L, E)``; key: ``(..., S, E)``; value: ``(..., S, Ev)``.
        attn_mask: bool, True = may attend, or float added to the scores;
            broadcasts to ``(..., L, S)``.
        is_causal: apply :func:`~attention_core.masks.causal_mask` ``(L, S)`` (queries aligned to the end
            of the keys when ``L < S``); combines with ``attn_mask`` by AND.
        scale: multiplies the scores; default ``1 / sqrt(E)``.
        dropout_p: dropout on the weights (pass 0 at evaluation time).

    Returns:
        ``(output (..., L, Ev), weights (..., L, S))``. A query whose keys are all
        masked gets zero weights and a zero output, never NaN. Otherwise equal to
        ``torch.nn.functional.scaled_dot_product_attention``.
    """
    _check_qkv(query, key, value)
    scores_shape = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]) + (
        query.size(-2), key.size(-2))
    if attn_mask is not None:
        _check_mask(attn_mask, scores_shape)
    _check_options(scale, dropout_p)
    if query.dtype in LOW_PRECISION:  # accumulate in float32, hand back the input dtype
        out, weights = scaled_dot_product_attention(
            query.float(), key.float(), value.float(),
            attn_mask if attn_mask is None or attn_mask.dtype == torch.bool else attn_mask.float(),
            is_causal, scale, dropout_p)
        return out.to(query.dtype), weights.to(query.dtype)

    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = (query * scale) @ key.transpose(-2, -1)  # (..., L, S); scaling q is cheaper
    masked = is_causal or attn_mask is not None
    if masked:
        apply_mask_(scores, attn_mask, is_causal)
        dead = scores.amax(-1, keepdim=True) == float("-inf")  # (..., L, 1): no key left
    weights = softmax(scores, inplace=True)  # no second L x S buffer at inference
    if masked:
        weights.masked_fill_(dead, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)
    return weights @ value, weights  # (..., L, Ev), (..., L, S)
