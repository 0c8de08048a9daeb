"""Chapter 8: sparse attention, masks that keep a fraction of the L x L matrix, how
information spreads through them over layers, and a sliding-window attention whose cost
really grows as O(L * window).

Patterns: the sliding window (:func:`~attention_core.nn.masks.sliding_window_mask`),
its dilated version (Longformer, Beltagy et al. 2020), global tokens and random keys
(BigBird, Zaheer et al. 2020), and the strided and fixed patterns of the Sparse
Transformer (Child et al. 2019). Every mask is ``(L, L)`` bool, **True = may
attend**, and masks combine with ``|`` (union) and ``&``. Every mask builder takes
``device=`` (default: the CPU); the seeded :func:`random_mask` draws on the CPU and
then moves, so a seed gives the same mask on every device.

Shape legend: ``...`` batch dims (e.g. B, H), L query length and S key length (a mask
is ``(L, L)``: self-attention, L = S), T length of one token sequence (the kernels here
are self-attention, L = S = T), E query/key dim per head (d_k), Ev value dim per head (d_v).
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
    check_tensor_size,
)
from .functional import NEG_INF, apply_mask_, masked_softmax_, softmax, upcast
from .masks import sliding_window_mask

__all__ = ["bigbird_mask", "density", "dilated_window_mask", "fixed_mask", "global_mask", "layers_from",
           "layers_to_reach", "lsh_attention", "lsh_buckets", "lsh_candidates", "random_mask", "reach",
           "sliding_window_attention", "strided_mask"]


def _offsets(L: int, device=None) -> torch.Tensor:
    """``(L, L)`` matrix of ``i - j``: how far key ``j`` lies behind query ``i``."""
    positions = torch.arange(L, device=device)
    return positions.unsqueeze(1) - positions.unsqueeze(0)


def _check_count(name: str, value, L: int) -> None:
    check_positive_int(name, value, minimum=0)
    if value > L:
        raise ValueError(f"{name} must be at most L={L}, got {value}")


def dilated_window_mask(L: int, window: int, dilation: int, causal: bool = False,
                        device=None) -> torch.Tensor:
    """Dilated sliding window ``(L, L)``: key ``j`` is kept when ``i - j`` is a multiple
    of ``dilation`` and at most ``window - 1`` such steps away.

    Each query still sees ``window`` keys on each side (``2 * window - 1`` in all), but
    spread over ``dilation`` times the distance (Longformer's dilated heads).
    ``dilation=1`` is :func:`~attention_core.nn.masks.sliding_window_mask`.
    """
    check_positive_int("L", L)
    check_tensor_size("L", (L, L), torch.bool)
    check_positive_int("window", window)
    check_positive_int("dilation", dilation)
    offset = _offsets(L, device)
    steps = offset // dilation  # whole steps of the dilated window
    keep = (offset % dilation == 0) & (steps.abs() < window)
    return keep & (offset >= 0) if causal else keep


def global_mask(L: int, num_global: int, device=None) -> torch.Tensor:
    """Global tokens ``(L, L)``: the first ``num_global`` positions attend to every key
    and every query attends to them (rows and columns ``< num_global`` are True).

    On its own it is mostly False; union it with a local pattern: ``window | global``.
    """
    check_positive_int("L", L)
    check_tensor_size("L", (L, L), torch.bool)
    _check_count("num_global", num_global, L)
    is_global = torch.arange(L, device=device) < num_global
    return is_global.unsqueeze(1) | is_global.unsqueeze(0)


def random_mask(L: int, num_random: int, seed: int = 0, device=None) -> torch.Tensor:
    """Random keys ``(L, L)``: each query attends to ``num_random`` distinct keys drawn
    uniformly (BigBird's random attention). The same ``seed`` gives the same mask."""
    check_positive_int("L", L)
    check_tensor_size("L", (L, L), torch.bool)
    _check_count("num_random", num_random, L)
    check_positive_int("seed", seed, minimum=0)
    g = torch.Generator().manual_seed(seed)
    chosen = torch.rand(L, L, generator=g).topk(num_random, dim=-1).indices  # (L, num_random)
    mask = torch.zeros(L, L, dtype=torch.bool)
    mask.scatter_(1, chosen, True)
    return mask.to(device)


def strided_mask(L: int, stride: int, causal: bool = True, device=None) -> torch.Tensor:
    """The Sparse Transformer's strided pattern ``(L, L)`` (Child et al. 2019).

    The union of its two heads: the previous ``stride`` positions (``i - j < stride``)
    and every ``stride``-th position before them (``(i - j) % stride == 0``). With
    ``stride`` near ``sqrt(L)`` each row keeps about ``2 sqrt(L)`` keys. Causal by
    default, as in the paper; ``causal=False`` mirrors it into the future.
    """
    check_positive_int("L", L)
    check_tensor_size("L", (L, L), torch.bool)
    check_positive_int("stride", stride)
    offset = _offsets(L, device)
    keep = (offset.abs() < stride) | (offset % stride == 0)
    return keep & (offset >= 0) if causal else keep


def fixed_mask(L: int, stride: int, num_summary: int = 1, causal: bool = True,
               device=None) -> torch.Tensor:
    """The Sparse Transformer's fixed pattern ``(L, L)`` (Child et al. 2019).

    The union of its two heads: keys in the query's own block of ``stride`` positions
    (``j // stride == i // stride``), and the last ``num_summary`` positions of every
    block (``j % stride >= stride - num_summary``), which act as summaries that all
    later queries can read.
    """
    check_positive_int("L", L)
    check_tensor_size("L", (L, L), torch.bool)
    check_positive_int("stride", stride)
    check_positive_int("num_summary", num_summary)
    if num_summary > stride:
        raise ValueError(f"num_summary must be at most stride={stride}, got {num_summary}")
    i = torch.arange(L, device=device).unsqueeze(1)  # (L, 1)
    j = torch.arange(L, device=device).unsqueeze(0)  # (1, L)
    keep = (j // stride == i // stride) | (j % stride >= stride - num_summary)
    return keep & (j <= i) if causal else keep


def bigbird_mask(L: int, window: int, num_global: int, num_random: int, seed: int = 0,
                 device=None) -> torch.Tensor:
    """BigBird-style union ``(L, L)`` (Zaheer et al. 2020): a sliding window, global
    tokens and random keys (here per token; BigBird draws them per block)."""
    return (sliding_window_mask(L, window, device=device) | global_mask(L, num_global, device)
            | random_mask(L, num_random, seed, device))


def density(mask: torch.Tensor) -> float:
    """Fraction of the ``(L, S)`` matrix a mask keeps (True entries)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean torch.Tensor, got "
                        f"{mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__}")
    return mask.float().mean().item()


def reach(mask: torch.Tensor, num_layers: int) -> torch.Tensor:
    """Which inputs each position can depend on after ``num_layers`` layers ``(L, L)``.

    One layer lets query ``i`` read key ``j`` where ``mask[i, j]``; with the residual
    connection it also keeps what it had. Composing layers is a boolean matrix
    product: ``R_{l+1} = R_l | (mask @ R_l)``, starting from the identity.
    """
    check_positive_int("num_layers", num_layers, minimum=0)
    _check_square_bool(mask)
    step = mask.float()
    r = torch.eye(mask.size(0), dtype=torch.bool, device=mask.device)
    for _ in range(num_layers):
        r = r | ((step @ r.float()) > 0)
    return r


def layers_from(mask: torch.Tensor, source: int = 0) -> torch.Tensor:
    """For every position, the fewest layers after which it depends on position
    ``source`` (same rules as :func:`reach`): ``(L,)`` long, ``-1`` where it never does.

    A breadth-first search over the graph "query i reads key j": each layer adds the
    positions that read one already reached.
    """
    _check_square_bool(mask)
    L = mask.size(0)
    if isinstance(source, bool) or not isinstance(source, int) or not 0 <= source < L:
        raise ValueError(f"source must lie in [0, L={L}), got {source!r}")
    layers = torch.full((L,), -1, dtype=torch.long, device=mask.device)
    seen = torch.zeros(L, dtype=torch.bool, device=mask.device)
    seen[source], layers[source] = True, 0
    step = mask.float()
    for depth in range(1, L + 1):
        grown = seen | ((step @ seen.float()) > 0)
        if torch.equal(grown, seen):
            break  # nothing new reached: nothing ever will be
        layers[grown & ~seen] = depth
        seen = grown
    return layers


def layers_to_reach(mask: torch.Tensor, source: int = 0, target: int = -1) -> int | None:
    """The fewest layers after which position ``target`` depends on position ``source``,
    or ``None`` if it never does (see :func:`layers_from`)."""
    layers = layers_from(mask, source)[target].item()
    return None if layers < 0 else layers


def _check_square_bool(mask) -> None:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.dim() != 2 \
            or mask.size(0) != mask.size(1):
        got = f"shape {tuple(mask.shape)} and dtype {mask.dtype}" if isinstance(mask, torch.Tensor) \
            else type(mask).__name__
        raise ValueError(f"mask must be a square (L, L) bool tensor, got {got}")


def sliding_window_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             window: int, attn_mask: torch.Tensor | None = None,
                             is_causal: bool = False, scale: float | None = None,
                             block_size: int | None = None) -> tuple[torch.Tensor, None]:
    """Attention restricted to a band, computing only the band: ``O(T * window)`` time
    and memory instead of ``O(T^2)``.

    Equal to ``scaled_dot_product_attention(query, key, value, attn_mask=
    sliding_window_mask(T, window, causal=is_causal) & attn_mask)``'s output. Queries
    are taken in blocks of ``block_size`` (default ``window``); a block only ever meets
    the keys within ``window - 1`` of it, so each score tile is
    ``block_size x (block_size + 2 window - 2)`` at most, whatever T is.

    Args:
        query: ``(..., T, E)``; key: ``(..., T, E)``; value: ``(..., T, Ev)``
            (self-attention: as many keys as queries).
        window: keys with ``|i - j| < window`` are kept (``0 <= i - j < window`` when
            ``is_causal``).
        attn_mask: optional, applied inside the band: bool (True = may attend) or float
            added to the scores; broadcasts to ``(..., T, T)``. A query left with no key
            gets a zero output.
        scale: multiplies the scores; default ``1 / sqrt(E)``.

    Returns:
        ``(output (..., T, Ev), None)``: the weights are never formed as a T x T matrix.
        float16 and bfloat16 inputs are computed in float32, output in their dtype.
    """
    check_qkv(query, key, value)
    check_is_causal(is_causal)
    check_positive_int("window", window)
    check_scale(scale)
    T = query.size(-2)
    if key.size(-2) != T:
        raise ValueError(f"sliding_window_attention needs as many keys as queries, got "
                         f"query {tuple(query.shape)} and key {tuple(key.shape)}")
    block = window if block_size is None else block_size
    check_positive_int("block_size", block)
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    if attn_mask is not None:
        check_attn_mask(attn_mask, (*batch, T, T), query.device)
        attn_mask = attn_mask.expand((*batch, T, T))  # a view, sliced per block below
    dtype = query.dtype
    query, key, value = (upcast(x) for x in (query, key, value))  # a float mask: per tile
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    out = query.new_empty((*batch, T, value.size(-1)))  # (..., T, Ev)
    for q0 in range(0, T, block):
        q1 = min(q0 + block, T)
        k0, k1 = max(0, q0 - window + 1), (q1 if is_causal else min(T, q1 + window - 1))
        s = (query[..., q0:q1, :] * scale) @ key[..., k0:k1, :].transpose(-2, -1)  # (..., q1 - q0, k1 - k0)
        s.masked_fill_(~_band(q0, q1, k0, k1, window, is_causal, s.device), NEG_INF)
        if attn_mask is None:  # the band always keeps a key
            weights = softmax(s, inplace=True)  # (..., q1 - q0, k1 - k0)
        else:  # a mask may remove them all: zero weights and output, not NaN
            weights = masked_softmax_(apply_mask_(s, attn_mask[..., q0:q1, k0:k1]))
        out[..., q0:q1, :] = weights @ value[..., k0:k1, :]
    return out.to(dtype), None


def _band(q0, q1, k0, k1, window, is_causal, device) -> torch.Tensor:
    """``(q1 - q0, k1 - k0)`` bool: True where query ``i`` in ``[q0, q1)`` may see key ``j``
    in ``[k0, k1)``, ``|i - j| < window`` (causal: ``0 <= i - j < window``)."""
    offset = (torch.arange(q0, q1, device=device).unsqueeze(1)
              - torch.arange(k0, k1, device=device).unsqueeze(0))  # (q1 - q0, k1 - k0)
    return (offset >= 0) & (offset < window) if is_causal else offset.abs() < window


# --- Reformer: locality-sensitive hashing ---------------------------------------------

def lsh_buckets(x: torch.Tensor, num_buckets: int, num_hashes: int = 1, seed: int = 0) -> torch.Tensor:
    """Angular LSH of Reformer (Kitaev et al. 2020): bucket ids ``(num_hashes, ..., T)``
    for ``x (..., T, E)``.

    Each round draws a random rotation ``W (E, num_buckets / 2)`` and hashes ``x`` to
    ``argmax([x W; -x W])``: vectors pointing in similar directions tend to share a
    bucket, so a query's largest dot products are likely among its bucket-mates.
    The rotations are drawn on the CPU from ``seed`` (the same on every device) and
    applied on ``x``'s device; the ids lie there too.
    """
    check_tensor("x", x, min_dim=2)
    check_positive_int("num_buckets", num_buckets)
    if num_buckets % 2 and num_buckets != 1:
        raise ValueError(f"num_buckets must be 1 or even, got {num_buckets}")
    check_positive_int("num_hashes", num_hashes)
    check_positive_int("seed", seed, minimum=0)
    if num_buckets == 1:  # the exact limit: everyone shares the one bucket
        return torch.zeros((num_hashes, *x.shape[:-1]), dtype=torch.long, device=x.device)
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(num_hashes, x.size(-1), num_buckets // 2, generator=g, dtype=torch.float64)
    W = W.to(x.device)  # drawn on the CPU (the same rotations on every device), used on x's
    rotated = torch.einsum("...ne,hef->h...nf", x.to(torch.float64), W)  # (hashes, ..., T, num_buckets / 2)
    return torch.cat((rotated, -rotated), -1).argmax(-1)


def lsh_candidates(qk: torch.Tensor, num_buckets: int, num_hashes: int = 1, seed: int = 0) -> torch.Tensor:
    """``(T, T)`` bool: True where positions ``i`` and ``j`` share a bucket in at least
    one hashing round, the pairs Reformer may compare (before chunking). ``qk (T, E)``."""
    check_tensor("qk", qk)
    if qk.dim() != 2:
        raise ValueError(f"qk must be (T, E), got shape {tuple(qk.shape)}")
    buckets = lsh_buckets(qk, num_buckets, num_hashes, seed)  # (hashes, T)
    return (buckets.unsqueeze(-1) == buckets.unsqueeze(-2)).any(0)


def _rows(x: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """``x (..., T, width)`` with its rows taken in ``order (..., T)``."""
    return x.gather(-2, order.unsqueeze(-1).expand(*order.shape, x.size(-1)))


def lsh_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, num_buckets: int,
                  chunk_size: int = 64, num_hashes: int = 1, seed: int = 0) -> tuple[torch.Tensor, None]:
    """Reformer's LSH attention with shared queries and keys (Kitaev et al. 2020).

    Reformer uses one projection for queries and keys, so that a query and the keys it
    should meet land in the same bucket and the same sorted chunk. Here that means
    ``key`` must be ``query`` itself (call ``lsh_attention(qk, qk, value, ...)``; a
    different tensor raises ``ValueError``); the keys actually used are the queries
    normalised to unit length, as in the paper. Per hashing round: sort the positions by
    bucket (then by position), cut the sorted sequence into chunks of ``chunk_size``, and
    let each chunk attend to itself and the chunk before it, only to keys in the same
    bucket, and never to its own position unless nothing else is allowed. Rounds are
    combined by their softmax normalisers (the paper also corrects for a pair found in
    several rounds; omitted here). With one bucket and one chunk this is dense attention
    of ``query`` against normalised ``query`` with the diagonal masked; the cost is
    O(T log T) for the sort plus O(T * chunk_size) for attention.

    Args:
        query: ``(..., T, E)`` shared queries/keys; key: ``query`` again;
            value: ``(..., T, Ev)``.
        num_buckets: buckets per round, even (each random rotation gives a pair of
            opposite directions) or 1 (no hashing: the exact limit).
        chunk_size: must divide T.

    Returns:
        ``(output (..., T, Ev), None)``. float16 and bfloat16 inputs are computed in
        float32 (the hashing in float64), output in their dtype.
    """
    check_qkv(query, key, value)
    if key is not query and not (key.shape == query.shape and torch.equal(key, query)):
        raise ValueError(f"lsh_attention shares queries and keys (Reformer): key must be query "
                         f"itself, got a different key of shape {tuple(key.shape)} for query "
                         f"{tuple(query.shape)}")
    check_positive_int("chunk_size", chunk_size)
    T, scale = query.size(-2), 1.0 / math.sqrt(query.size(-1))
    if T % chunk_size:
        raise ValueError(f"the length T={T} must be a multiple of chunk_size={chunk_size}")
    dtype = query.dtype
    query, value = upcast(query), upcast(value)
    key = query / query.norm(dim=-1, keepdim=True).clamp_min(1e-6)  # (..., T, E) unit keys
    chunks = T // chunk_size
    outs, lses = [], []
    for buckets in lsh_buckets(query.detach(), num_buckets, num_hashes, seed):  # (..., T) per round
        order = (buckets * T + torch.arange(T, device=query.device)).argsort(-1)  # bucket, then position
        q_c, k_c, v_c = (_rows(x, order).unflatten(-2, (chunks, chunk_size)) for x in (query, key, value))
        pos_c = order.unflatten(-1, (chunks, chunk_size))  # (..., chunks, chunk_size) original positions
        bkt_c = buckets.gather(-1, order).unflatten(-1, (chunks, chunk_size))
        kpos, kbkt = pos_c, bkt_c
        if chunks > 1:  # each chunk also sees the chunk before it (the first, the last)
            k_c, v_c = (torch.cat((x, x.roll(1, dims=-3)), -2) for x in (k_c, v_c))
            kpos, kbkt = (torch.cat((x, x.roll(1, dims=-2)), -1) for x in (pos_c, bkt_c))
        scores = (q_c * scale) @ k_c.transpose(-2, -1)  # (..., chunks, chunk_size, chunk_size or twice)
        scores = scores.masked_fill(bkt_c.unsqueeze(-1) != kbkt.unsqueeze(-2), NEG_INF)
        scores = scores.masked_fill(pos_c.unsqueeze(-1) == kpos.unsqueeze(-2), -1e5)  # self: last resort
        lse = scores.logsumexp(-1, keepdim=True)  # (..., chunks, chunk_size, 1)
        out = torch.exp(scores - lse) @ v_c  # (..., chunks, chunk_size, Ev)
        unsort = order.argsort(-1)
        outs.append(_rows(out.flatten(-3, -2), unsort))  # (..., T, Ev), back to the original order
        lses.append(_rows(lse.flatten(-3, -2), unsort))  # (..., T, 1)
    lse = torch.stack(lses)  # (hashes, ..., T, 1)
    out = (torch.softmax(lse, dim=0) * torch.stack(outs)).sum(0)  # (..., T, Ev)
    return out.to(dtype), None
