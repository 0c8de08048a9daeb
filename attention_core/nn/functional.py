"""Chapter 1 (and 2, 3, 4, 5, 7, 8, 11, 12): scaled dot-product attention (Vaswani et
al., 2017) and the softmax under it.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + bias) V

where ``bias`` is 0 where the boolean mask M (True = may attend) allows a key and -inf
where it does not, or any float mask added to the scores.

As in HuggingFace's ``eager_attention_forward``, the maths lives in one short function,
:func:`eager_attention`; :func:`scaled_dot_product_attention` is the public wrapper that
checks the arguments before calling it.

Half precision: float16 overflows above 65504 and keeps 11 significant bits, so a sum
of 70,000 weights or a logit of 5e3 is already lost. Every kernel of the package
therefore computes float16/bfloat16 inputs in float32 (scores, softmax sums, running
statistics, states: :func:`upcast`) and hands the result back in the input's dtype.
``LOW_PRECISION`` and ``NEG_INF`` are the package's internal constants for it.

Shape legend: ``...`` batch dims (e.g. B, H), L query length, S key length,
E query/key dim per head (d_k), Ev value dim per head (d_v).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._checks import (
    check_attn_mask,
    check_dim,
    check_dropout_p,
    check_is_causal,
    check_qkv,
    check_scale,
    check_tensor,
    scores_shape,
)
from .masks import causal_mask

__all__ = ["apply_mask_", "compute_dtype", "eager_attention", "masked_softmax_",
           "scaled_dot_product_attention", "softmax", "upcast"]

LOW_PRECISION = (torch.float16, torch.bfloat16)
NEG_INF = float("-inf")


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a kernel computes in for inputs of ``dtype``: float32 for float16 and
    bfloat16 (their range and precision are too small for sums and statistics), else
    ``dtype`` itself."""
    return torch.float32 if dtype in LOW_PRECISION else dtype


def upcast(x: torch.Tensor | None) -> torch.Tensor | None:
    """``x`` in :func:`compute_dtype` (a float16/bfloat16 tensor as float32); any other
    tensor, a bool mask or None unchanged (no copy)."""
    if x is None or not x.is_floating_point():
        return x
    return x.to(compute_dtype(x.dtype))


def softmax(scores: torch.Tensor, dim: int = -1, inplace: bool = False) -> torch.Tensor:
    """Numerically stable softmax along ``dim``.

    Subtracting the row maximum first changes nothing mathematically
    (softmax(x) = softmax(x - c)) but keeps every ``exp`` at most 1, so logits of
    1e4 do not overflow. Rows that are entirely ``-inf`` come out as NaN; callers
    that mask decide what such a row means (:func:`masked_softmax_`).

    ``inplace=True`` reuses the memory of ``scores`` (no second buffer the size of
    the score matrix). When autograd is recording, the intermediate values are
    needed for the backward pass, so it computes out of place anyway. float16 and
    bfloat16 scores are computed in float32 (a row of 70,000 equal scores sums to
    70,000, past float16's 65504) and returned in their own dtype. ``scores`` must be
    a floating-point tensor (else a ``TypeError`` naming it).
    """
    check_tensor("scores", scores)
    check_dim("dim", dim, scores)
    if scores.size(dim) == 0:
        raise ValueError(f"scores must have at least one entry along dim={dim}, "
                         f"got shape {tuple(scores.shape)}")
    if scores.dtype in LOW_PRECISION:
        weights = softmax(scores.float(), dim)
        if inplace and not (scores.requires_grad and torch.is_grad_enabled()):
            return scores.copy_(weights)
        return weights.to(scores.dtype)
    row_max = scores.amax(dim, keepdim=True).detach()
    # A row of -inf has max -inf; -inf - -inf is NaN, so shift such rows by 0.
    row_max = row_max.masked_fill(row_max == float("-inf"), 0.0)
    if inplace and not (scores.requires_grad and torch.is_grad_enabled()):
        scores.sub_(row_max).exp_()
        return scores.div_(scores.sum(dim, keepdim=True))
    exp = (scores - row_max).exp()
    return exp / exp.sum(dim, keepdim=True)


def apply_mask_(scores: torch.Tensor, attn_mask=None, is_causal: bool = False) -> torch.Tensor:
    """Apply a boolean (True = may attend) or additive float mask to ``scores`` in place."""
    check_tensor("scores", scores, min_dim=2)
    check_is_causal(is_causal)
    L, S = scores.shape[-2:]
    if is_causal:
        scores.masked_fill_(~causal_mask(L, S, device=scores.device), float("-inf"))
    if attn_mask is None:
        return scores
    if attn_mask.dtype == torch.bool:
        return scores.masked_fill_(~attn_mask, float("-inf"))
    return scores.add_(attn_mask.to(scores.dtype))


def masked_softmax_(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of masked ``scores (..., L, S)``, in place where autograd
    allows: a row whose keys are all masked (all ``-inf``, from a boolean or an additive
    mask) gets zero weights, and zero gradients, never NaN.

    Such a row is set to 0 before the softmax, so neither pass meets ``exp(-inf) / 0``:
    its weights are uniform for a moment, then zeroed, and no gradient reaches it.
    """
    check_tensor("scores", scores, min_dim=1)
    if scores.size(-1) == 0:
        raise ValueError(f"scores must have at least one key (S >= 1), got shape {tuple(scores.shape)}")
    dead = scores.detach().amax(-1, keepdim=True) == NEG_INF  # (..., L, 1): no key left
    scores.masked_fill_(dead, 0.0)
    weights = softmax(scores, inplace=True)  # (..., L, S); no second L x S buffer
    return weights.masked_fill_(dead, 0.0)  # a query with no key: zero weights, not NaN


def eager_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The maths of scaled dot-product attention: what :func:`scaled_dot_product_attention`
    computes once it has checked its arguments. It checks only that ``query``, ``key`` and
    ``value`` fit together (a clear error instead of one from inside the matrix product).

    ``query (..., L, E)``, ``key (..., S, E)``, ``value (..., S, Ev)`` ->
    ``(output (..., L, Ev), weights (..., L, S))``, in the inputs' dtype; float16 and
    bfloat16 are computed in float32 (:func:`upcast`).
    """
    check_qkv(query, key, value)
    check_is_causal(is_causal)
    dtype = query.dtype
    query, key, value = (upcast(x) for x in (query, key, value))
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = (query * scale) @ key.transpose(-2, -1)  # (..., L, S); scaling q is cheaper
    is_causal = is_causal and query.size(-2) > 1  # one query, aligned to the last key, sees them all
    if is_causal or attn_mask is not None:
        weights = masked_softmax_(apply_mask_(scores, attn_mask, is_causal))  # dead rows: 0
    else:
        weights = softmax(scores, inplace=True)  # (..., L, S); no second L x S buffer
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)
    return (weights @ value).to(dtype), weights.to(dtype)  # (..., L, Ev), (..., L, S)


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention that also returns the weights: checks its
    arguments, then calls :func:`eager_attention`.

    Args:
        query: ``(..., L, E)``; key: ``(..., S, E)``; value: ``(..., S, Ev)``.
        attn_mask: bool, True = may attend, or float added to the scores;
            broadcasts to ``(..., L, S)`` and lies on the inputs' device (else a
            ``ValueError`` naming both devices).
        is_causal: apply :func:`~attention_core.nn.masks.causal_mask` ``(L, S)`` (queries aligned to the end
            of the keys when ``L < S``); combines with ``attn_mask`` by AND.
        scale: multiplies the scores; default ``1 / sqrt(E)``.
        dropout_p: dropout on the weights (pass 0 at evaluation time).

    Returns:
        ``(output (..., L, Ev), weights (..., L, S))``. A query whose keys are all
        masked gets zero weights and a zero output, never NaN. Otherwise the output
        equals ``torch.nn.functional.scaled_dot_product_attention``'s, with two
        differences in ``is_causal``: for ``L < S`` PyTorch aligns the queries to the
        start of the keys (top left), this function to the end (PyTorch's
        ``causal_lower_right``); and PyTorch refuses ``is_causal`` together with an
        ``attn_mask``, which this function combines. float16 and bfloat16
        inputs are computed in float32 and handed back in their own dtype.
    """
    check_qkv(query, key, value)
    if attn_mask is not None:
        check_attn_mask(attn_mask, scores_shape(query, key), query.device)
    check_is_causal(is_causal)
    check_scale(scale)
    check_dropout_p(dropout_p)
    return eager_attention(query, key, value, attn_mask, is_causal, scale, dropout_p)
