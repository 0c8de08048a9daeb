"""Chapter 7: alignment scores of the encoder-decoder attention of Bahdanau et al.
(2014) and Luong et al. (2015): how well a decoder state ``u`` matches each encoder
state ``e_i`` (the book's notation, chapter 7; the papers write s and h).

    additive (Bahdanau)   score(u, e) = tanh(u W_s + e W_h) W_a
    dot      (Luong)      score(u, e) = u e^T
    general  (Luong)      score(u, e) = u W e^T
    concat   (Luong)      score(u, e) = tanh([u, e] W) W_a

Row vectors and a weight matrix on the right, as in chapter 7 (the papers write column
vectors, ``v^T tanh(W_s u + W_h e)``). ``W_s``, ``W_h``, ``W`` are learned matrices
(``W_s`` acts on the decoder state, ``W_h`` on the encoder states, named as the
attributes are) and ``W_a`` is a learned ``attn_dim x 1`` matrix, the attribute ``v``.

Every score is a module with one signature, ``score(query (B, query_dim), keys (B, S, key_dim))
-> (B, S)``, chosen by name from :data:`SCORES`; :func:`attend` turns scores into weights
(masking padded source positions) and a context vector. Which decoder state is the
query (``u_{t-1}`` for Bahdanau, ``u_t`` for Luong) is the decoder's business:
:mod:`attention_core.models.seq2seq`.

Shape legend: B batch, S source length, Dh hidden size of a recurrent network. In
chapter 7 the decoder state (the query) and the encoder states (the keys) are all Dh
wide; the modules take their widths separately, as ``query_dim`` and ``key_dim``, and
``attn_dim`` is the width of the hidden layer of the additive and concat scores.
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_device, check_dtype, check_positive_int, check_tensor, check_tensor_size
from .functional import softmax

__all__ = ["SCORES", "AdditiveScore", "ConcatScore", "DotScore", "GeneralScore", "attend", "make_score"]


def _check_dims(query_dim: int, key_dim: int, attn_dim: int | None) -> None:
    """Raise unless the widths of a score module are positive ints (``attn_dim`` may be None
    where the score has no hidden layer)."""
    check_positive_int("query_dim", query_dim)
    check_positive_int("key_dim", key_dim)
    if attn_dim is not None:
        check_positive_int("attn_dim", attn_dim)
    check_tensor_size("key_dim", (query_dim + key_dim, attn_dim or max(query_dim, key_dim)))  # largest weight


class AdditiveScore(nn.Module):
    """Bahdanau's ``tanh(u W_s + e W_h) W_a``: a one-hidden-layer network on the pair."""

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int):
        super().__init__()
        _check_dims(query_dim, key_dim, attn_dim)
        self.query_dim, self.key_dim = query_dim, key_dim
        self.W_s = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_h = nn.Linear(key_dim, attn_dim, bias=False)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``query (B, query_dim)``, ``keys (B, S, key_dim)`` -> scores ``(B, S)``."""
        hidden = torch.tanh(self.W_s(query).unsqueeze(1) + self.W_h(keys))  # (B, S, attn_dim)
        return self.v(hidden).squeeze(-1)  # (B, S)


class DotScore(nn.Module):
    """Luong's ``u e^T``: no parameters; needs ``query_dim == key_dim``."""

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int | None = None):
        super().__init__()
        _check_dims(query_dim, key_dim, attn_dim)
        if query_dim != key_dim:
            raise ValueError(f"the dot score needs query_dim == key_dim, got {query_dim} and {key_dim}")
        self.query_dim, self.key_dim = query_dim, key_dim

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``query (B, query_dim)``, ``keys (B, S, key_dim)`` -> scores ``(B, S)``."""
        return (keys @ query.unsqueeze(-1)).squeeze(-1)  # (B, S)


class GeneralScore(nn.Module):
    """Luong's ``u W e^T``: a learned bilinear form."""

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int | None = None):
        super().__init__()
        _check_dims(query_dim, key_dim, attn_dim)
        self.query_dim, self.key_dim = query_dim, key_dim
        self.W = nn.Linear(key_dim, query_dim, bias=False)  # e W^T, a row per key, then the dot with u

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``query (B, query_dim)``, ``keys (B, S, key_dim)`` -> scores ``(B, S)``."""
        return (self.W(keys) @ query.unsqueeze(-1)).squeeze(-1)  # (B, S)


class ConcatScore(nn.Module):
    """Luong's ``tanh([u, e] W) W_a``: one matrix on the concatenated pair. Stacking
    ``W_s`` on top of ``W_h`` to make ``W`` gives ``[u, e] W = u W_s + e W_h``: it is the
    additive score written differently."""

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int):
        super().__init__()
        _check_dims(query_dim, key_dim, attn_dim)
        self.query_dim, self.key_dim = query_dim, key_dim
        self.W = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``query (B, query_dim)``, ``keys (B, S, key_dim)`` -> scores ``(B, S)``."""
        repeated = query.unsqueeze(1).expand(-1, keys.size(1), -1)  # (B, query_dim) -> (B, S, query_dim)
        pairs = torch.cat((repeated, keys), -1)  # (B, S, query_dim + key_dim)
        return self.v(torch.tanh(self.W(pairs))).squeeze(-1)  # (B, S)


SCORES: dict[str, type[nn.Module]] = {"additive": AdditiveScore, "dot": DotScore,
                                       "general": GeneralScore, "concat": ConcatScore}
"""Score name -> module class; every class takes ``(query_dim, key_dim, attn_dim)``."""


def make_score(name: str, query_dim: int, key_dim: int, attn_dim: int | None = None) -> nn.Module:
    """The score module called ``name`` (see :data:`SCORES`); ``attn_dim`` (default
    ``query_dim``) sizes the hidden layer of the additive and concat scores."""
    if name not in SCORES:
        raise ValueError(f"name: the score must be one of {sorted(SCORES)}, got {name!r}")
    attn_dim = query_dim if attn_dim is None else attn_dim
    return SCORES[name](query_dim, key_dim, attn_dim)


def _check_attend(score, query, keys, attn_mask) -> None:
    """Raise unless ``score`` is a score module, ``query (B, query_dim)`` and ``keys (B, S,
    key_dim)`` fit it (one dtype, its parameters' too; S >= 1; one device) and ``attn_mask`` is
    None or a bool ``(B, S)`` on the device of ``keys``."""
    if not isinstance(score, nn.Module):
        raise TypeError(f"score must be a score module (make_score(name, ...)), got {type(score).__name__}")
    check_tensor("query", query, min_dim=2)
    check_tensor("keys", keys, min_dim=3)
    widths = getattr(score, "query_dim", query.size(-1)), getattr(score, "key_dim", keys.size(-1))
    if query.dim() != 2 or keys.dim() != 3 or query.size(0) != keys.size(0) \
            or (query.size(-1), keys.size(-1)) != widths:
        raise ValueError(f"query must be (B, query_dim={widths[0]}) and keys (B, S, key_dim={widths[1]}) "
                         f"with the same B, got query {tuple(query.shape)} and keys {tuple(keys.shape)}")
    if keys.size(1) == 0:
        raise ValueError(f"keys is an empty sequence: shape {tuple(keys.shape)} needs S >= 1")
    check_device("query", query, keys.device, "keys")
    check_dtype("query", query, keys.dtype, "keys")
    for name, p in score.named_parameters():
        check_device("keys", keys, p.device, f"the score's parameters ({name})")
        check_dtype("keys", keys, p.dtype, f"the score's parameters ({name})")
    if attn_mask is not None:
        if not isinstance(attn_mask, torch.Tensor) or attn_mask.dtype != torch.bool \
                or attn_mask.shape != keys.shape[:2]:
            raise ValueError(f"attn_mask must be bool of shape (B, S) = {tuple(keys.shape[:2])}, got "
                             f"{getattr(attn_mask, 'dtype', type(attn_mask).__name__)} "
                             f"{tuple(getattr(attn_mask, 'shape', ()))}")
        check_device("attn_mask", attn_mask, keys.device, "keys")


def attend(score: nn.Module, query: torch.Tensor, keys: torch.Tensor,
           attn_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of encoder-decoder attention.

    Args:
        score: a module from :func:`make_score`.
        query: decoder state ``(B, query_dim)``.
        keys: encoder states ``(B, S, key_dim)``; they are also the values.
        attn_mask: ``(B, S)`` bool, True at real source tokens (padding gets weight 0), on
            the device of ``keys``. A row with no real token gets zero weights and a zero
            context, never NaN.

    Returns:
        ``(context (B, key_dim), weights (B, S))``: weights are the softmax of the scores
        over the source, the context their weighted sum of ``keys``.
    """
    _check_attend(score, query, keys, attn_mask)
    scores = score(query, keys)  # (B, S)
    if attn_mask is not None:
        empty = ~attn_mask.any(-1, keepdim=True)  # (B, 1): rows with no real token
        scores = scores.masked_fill(~attn_mask | empty, float("-inf")).masked_fill(empty, 0.0)
        weights = softmax(scores, dim=-1).masked_fill(empty, 0.0)  # (B, S): such rows get zeros
    else:
        weights = softmax(scores, dim=-1)  # (B, S)
    return (weights.unsqueeze(1) @ keys).squeeze(1), weights  # (B, key_dim), (B, S)
