"""Chapter 4 (and 9, 12): splitting a model width into heads, and attention where many
query heads share fewer key/value heads: multi-query (Shazeer, 2019) and grouped-query
attention (Ainslie et al., 2023).

These functions live apart from :mod:`~attention_core.nn.multihead` so that the kernel
registry (:mod:`~attention_core.nn.attention_functions`) can list
:func:`grouped_query_attention` while ``MultiHeadAttention`` picks its kernel from it.

Shape legend: B batch, T length of one sequence, L query length, S key length, H query
heads (h), Hkv key/value heads (h_kv), G query heads per key/value head (H / Hkv), E head
dim (d_k). A head is indexed by ``a``: query head ``a`` uses key/value head ``a // G``.

Internal, not in ``__all__``: ``check_grouped``, the checks of grouped inputs (shared with the
fused kernel of :mod:`~attention_core.nn.attention_functions`).
"""

from __future__ import annotations

import torch

from ._checks import check_allocation, check_positive_int, check_tensor
from .functional import scaled_dot_product_attention
from .masks import causal_mask

__all__ = ["grouped_query_attention", "merge_heads", "repeat_kv", "split_heads"]


def _check_rank(name: str, x, rank: int, shape: str) -> None:
    """Raise unless ``x`` is a tensor (of any dtype: these only reshape) with exactly
    ``rank`` dims (``shape``)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != rank:
        raise ValueError(f"{name} must have {rank} dims {shape}, got shape {tuple(x.shape)}")


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, T, num_heads * E)`` -> ``(B, num_heads, T, E)``."""
    _check_rank("x", x, 3, "(B, T, D)")
    check_positive_int("num_heads", num_heads)
    B, T, D = x.shape
    if D % num_heads:
        raise ValueError(f"last dim {D} of x {tuple(x.shape)} is not divisible by num_heads={num_heads}")
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)  # (B, T, H, E) -> (B, H, T, E)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, H, T, E)`` -> ``(B, T, H * E)``: the inverse of :func:`split_heads`."""
    _check_rank("x", x, 4, "(B, H, T, E)")
    B, H, T, E = x.shape
    return x.transpose(1, 2).reshape(B, T, H * E)  # (B, H, T, E) -> (B, T, D)


def repeat_kv(x: torch.Tensor, num_groups: int) -> torch.Tensor:
    """Repeat each key/value head ``num_groups`` times: ``(B, Hkv, S, E)`` -> ``(B, Hkv*num_groups, S, E)``.

    Query head ``a`` then lines up with kv head ``a // num_groups``.
    """
    _check_rank("x", x, 4, "(B, Hkv, S, E)")
    check_positive_int("num_groups", num_groups)
    if num_groups == 1:
        return x
    B, Hkv, S, E = x.shape
    check_allocation("repeat_kv(x, num_groups)", x.numel() * num_groups, x.element_size())
    x = x.unsqueeze(2).expand(B, Hkv, num_groups, S, E)  # (B, Hkv, S, E) -> (B, Hkv, G, S, E), no copy
    return x.reshape(B, Hkv * num_groups, S, E)  # (B, Hkv, G, S, E) -> (B, H, S, E)


def check_grouped(query, key, value) -> None:
    """Raise unless ``query (B, H, L, E)``, ``key (B, Hkv, S, E)`` and ``value (B, Hkv, S, Ev)``
    fit together with ``Hkv`` dividing ``H``; the rest is checked by the attention itself."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(name, x, min_dim=4)
        if x.dim() != 4:
            raise ValueError(f"{name} must have 4 dims (B, heads, length, dim), got shape {tuple(x.shape)}")
    shapes = f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
    if query.size(-1) != key.size(-1):
        raise ValueError(f"query and key must have the same last dim E, got {shapes}")
    if key.shape[:-1] != value.shape[:-1]:
        raise ValueError(f"key and value must agree on all dims but the last, got {shapes}")
    if query.size(0) != key.size(0):
        raise ValueError(f"query and key must have the same batch size B, got {shapes}")
    H, Hkv = query.size(1), key.size(1)
    if Hkv == 0 or H % Hkv:
        raise ValueError(f"key's {Hkv} heads must divide query's {H} heads (Hkv must divide H), got {shapes}")


def grouped_query_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attn_mask: torch.Tensor | None = None, is_causal: bool = False,
                            scale: float | None = None, dropout_p: float = 0.0
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention where ``H`` query heads share ``Hkv`` key/value heads.

    ``query (B, H, L, E)``, ``key (B, Hkv, S, E)``, ``value (B, Hkv, S, Ev)``; query head
    ``a`` reads kv head ``a // (H // Hkv)``. Without a custom mask, the ``G = H // Hkv``
    query heads of a group are stacked as ``G * L`` queries against their one kv head, so
    keys and values are read once per group, never copied; with a mask, kv heads are
    repeated. ``attn_mask``, ``is_causal``, ``scale`` and ``dropout_p`` as in
    :func:`~attention_core.nn.functional.scaled_dot_product_attention`; ``Hkv`` not dividing
    ``H`` is a ``ValueError``. Returns ``(output (B, H, L, Ev), weights (B, H, L, S))``.
    """
    check_grouped(query, key, value)
    B, H, L, E = query.shape
    Hkv, S, Ev = key.size(1), key.size(2), value.size(-1)
    G = H // Hkv
    if G == 1 or attn_mask is not None:
        return scaled_dot_product_attention(query, repeat_kv(key, G), repeat_kv(value, G), attn_mask,
                                            is_causal, scale, dropout_p)
    # (G*L, S); one query (decoding), aligned to the last key, sees every key: no mask
    mask = causal_mask(L, S, device=query.device).repeat(G, 1) if is_causal and L > 1 else None
    query = query.reshape(B, Hkv, G * L, E)  # (B, H, L, E) -> (B, Hkv, G*L, E): a group's heads in a row
    out, weights = scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale,
                                                dropout_p=dropout_p)
    return out.view(B, H, L, Ev), weights.view(B, H, L, S)  # (B, Hkv, G*L, ...) -> (B, H, L, ...)
