"""Chapter 11: exact attention without the L x S matrix, the online softmax and tiled
attention of FlashAttention (Dao et al., 2022), here in plain PyTorch on the CPU.

The online softmax (Milakov & Gimelshein, 2018) keeps, for each row, the running
maximum ``m`` and the running sum ``l = sum exp(s - m)`` of the scores seen so far.
When a new block of scores arrives with a larger maximum ``m'``, everything summed
so far is rescaled by ``exp(m - m')``; at the end, ``output = acc / l``.

Differentiable: autograd follows the loop (the running maximum is only a shift that
cancels, so it is taken off the graph). float16 and bfloat16 inputs are computed in
float32, running statistics included, and the output is handed back in their dtype.

Shape legend: ``...`` batch dims (e.g. B, H), L query length, S key length, E query/key
dim per head (d_k), Ev value dim per head (d_v), Bq query block (tile) size, Bk key block size.
"""

from __future__ import annotations

import math

import torch

from ._checks import (
    check_attn_mask,
    check_is_causal,
    check_positive_int,
    check_qkv,
    check_scale,
    check_tensor,
)
from .functional import NEG_INF, upcast

__all__ = ["flash_attention", "flash_attention_lse", "online_softmax"]


def online_softmax(scores: torch.Tensor, block_size: int):
    """Softmax of one row ``scores (S,)`` read ``block_size`` entries at a time.

    Returns ``(weights (S,), trace)`` where ``trace`` lists, after each block, the
    running maximum ``m`` and running sum ``l`` (so a reader can follow the rescaling).
    float16/bfloat16 scores are summed in float32; the weights come back in their dtype.
    """
    check_positive_int("block_size", block_size)
    check_tensor("scores", scores)  # an integer row would give zeros, as softmax refuses it
    if scores.dim() != 1 or scores.numel() == 0:
        raise ValueError(f"scores must be one row (S,) with S >= 1, got shape {tuple(scores.shape)}")
    dtype, scores = scores.dtype, upcast(scores)
    m, l, trace = NEG_INF, 0.0, []
    for start in range(0, scores.numel(), block_size):
        block = scores[start:start + block_size]
        m_new = max(m, block.max().item())
        l = l * math.exp(m - m_new) + torch.exp(block - m_new).sum().item()  # rescale, then add
        m = m_new
        trace.append({"m": m, "l": l})
    return (torch.exp(scores - m) / l).to(dtype), trace


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attn_mask: torch.Tensor | None = None, is_causal: bool = False,
                    scale: float | None = None, block_q: int = 512,
                    block_k: int = 512) -> tuple[torch.Tensor, None]:
    """Tiled exact attention: equal to
    :func:`~attention_core.nn.functional.scaled_dot_product_attention`'s output, while
    holding at most a ``(..., block_q, block_k)`` tile of scores at a time.

    Same arguments and masking rules as ``scaled_dot_product_attention`` (bool mask,
    True = may attend, or float mask; ``is_causal`` aligned to the end; a query with
    no allowed key gets a zero output), plus the tile sizes ``block_q`` (Bq) and
    ``block_k`` (Bk).

    Returns:
        ``(output (..., L, Ev), None)``: the kernel contract of
        :data:`~attention_core.nn.attention_functions.ATTENTION_FUNCTIONS`, with no weights, since never
        forming them is the point. :func:`flash_attention_lse` also gives the logsumexp.
    """
    output, _ = flash_attention_lse(query, key, value, attn_mask, is_causal, scale, block_q, block_k)
    return output, None


def flash_attention_lse(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        attn_mask: torch.Tensor | None = None, is_causal: bool = False,
                        scale: float | None = None, block_q: int = 512,
                        block_k: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`flash_attention` that returns ``(output (..., L, Ev), logsumexp (..., L))``.

    ``logsumexp`` is ``m + log l`` per row (``-inf`` for a fully masked row), the one
    number per row FlashAttention keeps for its backward pass: the weights can be
    recomputed tile by tile as ``exp(scores - logsumexp)``. Both come back in the
    inputs' dtype.
    """
    check_qkv(query, key, value)
    check_is_causal(is_causal)
    check_positive_int("block_q", block_q)
    check_positive_int("block_k", block_k)
    check_scale(scale)
    L, S = query.size(-2), key.size(-2)
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    if attn_mask is not None:
        check_attn_mask(attn_mask, (*batch, L, S), query.device)
        attn_mask = attn_mask.expand((*batch, L, S))
    dtype = query.dtype
    query, key, value = (upcast(x) for x in (query, key, value))  # a float mask: per tile
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    out = query.new_empty((*batch, L, value.size(-1)))  # (..., L, Ev)
    lse = query.new_empty((*batch, L))  # (..., L)
    for q0 in range(0, L, block_q):
        q1 = min(q0 + block_q, L)
        mask = None if attn_mask is None else attn_mask[..., q0:q1, :]  # (..., Bq, S)
        out[..., q0:q1, :], lse[..., q0:q1] = _query_block(
            query[..., q0:q1, :] * scale, key, value, mask, is_causal, q0, L, block_k)
    return out.to(dtype), lse.to(dtype)


def _query_block(q, key, value, mask, is_causal, q0, L, block_k):
    """One block of queries ``q (..., Bq, E)`` (already scaled) against all keys:
    ``(output (..., Bq, Ev), logsumexp (..., Bq))``."""
    Bq, S = q.size(-2), key.size(-2)
    m = q.new_full((*q.shape[:-1], 1), NEG_INF)  # (..., Bq, 1) running max
    l = q.new_zeros((*q.shape[:-1], 1))  # (..., Bq, 1) running sum
    acc = q.new_zeros((*q.shape[:-1], value.size(-1)))  # (..., Bq, Ev) running output
    last_key = q0 + Bq - 1 + (S - L)  # the last key the block's last query may see
    for k0 in range(0, S, block_k):
        if is_causal and k0 > last_key:
            break  # every later tile is entirely in the future
        k1 = min(k0 + block_k, S)
        s = q @ key[..., k0:k1, :].transpose(-2, -1)  # (..., Bq, Bk)
        if is_causal:  # this tile of causal_mask(L, S) only: key j <= query i + (S - L)
            queries = torch.arange(q0, q0 + Bq, device=s.device).unsqueeze(1)  # (Bq, 1)
            keys = torch.arange(k0, k1, device=s.device)  # (Bk,)
            s.masked_fill_(keys > queries + (S - L), NEG_INF)
        if mask is not None:
            tile = mask[..., k0:k1]
            s = s.masked_fill_(~tile, NEG_INF) if tile.dtype == torch.bool else s.add_(tile)
        # the max only shifts the exponents and cancels in acc / l: no gradient through it,
        # and autograd need not keep s, which the next line overwrites
        m_new = torch.maximum(m, s.detach().amax(-1, keepdim=True))  # (..., Bq, 1)
        shift = m_new.masked_fill(m_new == NEG_INF, 0.0)  # rows with nothing yet: no NaN
        p = s.sub_(shift).exp_()  # (..., Bq, Bk) in place, exactly 0 where masked
        correction = torch.exp(m - shift)  # rescales what was summed under the old max
        l = l * correction + p.sum(-1, keepdim=True)
        acc = acc * correction + p @ value[..., k0:k1, :]
        m = m_new
    # A row with no key has acc = 0 and l = 0: divide by 1 instead, so the output is 0
    # and its gradients are finite (a tiny divisor would overflow them).
    l = torch.where(l > 0, l, 1.0)
    return acc / l, (m + l.log()).squeeze(-1)  # m = -inf for such a row: lse = -inf
