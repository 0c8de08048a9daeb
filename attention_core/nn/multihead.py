"""Multi-head attention (Vaswani et al., 2017) with shared key/value heads:
multi-query (Shazeer, 2019) and grouped-query attention (Ainslie et al., 2023).

Shape legend: B batch, T length of one sequence (self-attention, L = S = T), L query
length, S key length, H query heads (h), Hkv key/value heads (h_kv), G query heads per
key/value head (H / Hkv), E head dim (d_k), D model width (embed_dim = H * E). A head
is indexed by ``a``: query head ``a`` uses key/value head ``a // G``.
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_device, check_positive_int, check_tensor
from .functional import scaled_dot_product_attention
from .kv_cache import KVCache
from .masks import causal_mask
from .positional import apply_rotary


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, T, num_heads * E)`` -> ``(B, num_heads, T, E)``."""
    B, T, D = x.shape
    if D % num_heads:
        raise ValueError(f"last dim {D} of x {tuple(x.shape)} is not divisible by num_heads={num_heads}")
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)  # (B, H, T, E)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, H, T, E)`` -> ``(B, T, H * E)``: the inverse of :func:`split_heads`."""
    B, H, T, E = x.shape
    return x.transpose(1, 2).reshape(B, T, H * E)  # (B, T, D)


def repeat_kv(x: torch.Tensor, num_groups: int) -> torch.Tensor:
    """Repeat each key/value head ``num_groups`` times: ``(B, Hkv, S, E)`` -> ``(B, Hkv*num_groups, S, E)``.

    Query head ``a`` then lines up with kv head ``a // num_groups``.
    """
    if num_groups == 1:
        return x
    B, Hkv, S, E = x.shape
    x = x.unsqueeze(2).expand(B, Hkv, num_groups, S, E)  # (B, Hkv, G, S, E), no copy
    return x.reshape(B, Hkv * num_groups, S, E)  # (B, H, S, E)


class MultiHeadAttention(nn.Module):
    """Batch-first multi-head attention that returns per-head weights.

    ``num_kv_heads=None`` is standard MHA; ``1`` is MQA; a divisor of ``num_heads``
    in between is GQA, where query head ``a`` uses kv head
    ``a // (num_heads // num_kv_heads)``. With ``rope=True``, rotary embeddings
    (:func:`~attention_core.nn.positional.apply_rotary`) are applied to queries and keys after projection.
    ``device`` and ``dtype`` place the parameters, as in ``torch.nn.MultiheadAttention``
    (default: float32 on the CPU); inputs and masks must be on the parameters' device.
    """

    def __init__(self, embed_dim: int, num_heads: int, num_kv_heads: int | None = None,
                 bias: bool = True, dropout: float = 0.0, rope: bool = False,
                 rope_base: float = 10000.0, device=None, dtype=None):
        super().__init__()
        check_positive_int("embed_dim", embed_dim)
        check_positive_int("num_heads", num_heads)
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        check_positive_int("num_kv_heads", num_kv_heads)
        if embed_dim % num_heads:
            raise ValueError(f"num_heads={num_heads} must divide embed_dim={embed_dim}")
        if num_heads % num_kv_heads:
            raise ValueError(f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout!r}")
        self.embed_dim, self.num_heads, self.num_kv_heads = embed_dim, num_heads, num_kv_heads
        self.head_dim = embed_dim // num_heads
        if rope and self.head_dim % 2:
            raise ValueError(f"rope=True needs an even head_dim, got {self.head_dim}")
        self.dropout, self.rope, self.rope_base = dropout, rope, rope_base
        kv_dim = num_kv_heads * self.head_dim
        where = {"device": device, "dtype": dtype}  # PyTorch's factory_kwargs
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **where)  # W_q
        self.k_proj = nn.Linear(embed_dim, kv_dim, bias=bias, **where)  # W_k
        self.v_proj = nn.Linear(embed_dim, kv_dim, bias=bias, **where)  # W_v
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **where)  # W_o

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> "MultiHeadAttention":
        """A copy of ``torch.nn.MultiheadAttention`` (same weights, so same outputs), on
        the same device and in the same dtype as ``module``.

        PyTorch stores W_q, W_k, W_v stacked in one ``in_proj_weight (3D, D)``.
        """
        if not isinstance(module, nn.MultiheadAttention) or not module._qkv_same_embed_dim:
            raise TypeError(f"module must be an nn.MultiheadAttention with kdim = vdim = "
                            f"embed_dim, got {module!r}")
        D, has_bias = module.embed_dim, module.in_proj_bias is not None
        weight = module.in_proj_weight
        ours = cls(D, module.num_heads, bias=has_bias, dropout=module.dropout,
                   device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            for i, proj in enumerate((ours.q_proj, ours.k_proj, ours.v_proj)):
                proj.weight.copy_(module.in_proj_weight[i * D:(i + 1) * D])
                if has_bias:
                    proj.bias.copy_(module.in_proj_bias[i * D:(i + 1) * D])
            ours.out_proj.load_state_dict(module.out_proj.state_dict())
        return ours

    def _check_input(self, name: str, x) -> None:
        check_tensor(name, x, min_dim=3)
        if x.dim() != 3 or x.size(-1) != self.embed_dim:
            raise ValueError(f"{name} must have shape (B, T, embed_dim={self.embed_dim}), "
                             f"got {tuple(x.shape)}")

    def forward(self, query: torch.Tensor, key: torch.Tensor | None = None,
                value: torch.Tensor | None = None, attn_mask: torch.Tensor | None = None,
                is_causal: bool = False, kv_cache: "KVCache | None" = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """``query (B, L, D)``, ``key``/``value (B, S, D)`` (default: ``query``).

        ``attn_mask`` broadcasts to ``(B, H, L, S)``; it and the inputs must lie on the
        parameters' device (else a ``ValueError`` naming both). With ``kv_cache`` (incremental
        decoding), the new keys and values are appended to the cache and the queries
        attend to everything cached so far. Returns ``(output (B, L, D), weights
        (B, H, L, S))``.
        """
        key = query if key is None else key
        value = key if value is None else value
        for name, x in (("query", query), ("key", key), ("value", value)):
            self._check_input(name, x)
        if key.shape[:2] != value.shape[:2] or key.size(0) != query.size(0):
            raise ValueError(f"query {tuple(query.shape)}, key {tuple(key.shape)} and value "
                             f"{tuple(value.shape)} must share B, and key/value must share S")
        device = self.q_proj.weight.device
        for name, x in (("query", query), ("key", key), ("value", value)):
            check_device(name, x, device, "the module's parameters")
        if isinstance(attn_mask, torch.Tensor):
            check_device("attn_mask", attn_mask, device, "the inputs")
        q = split_heads(self.q_proj(query), self.num_heads)  # (B, H, L, E)
        k = split_heads(self.k_proj(key), self.num_kv_heads)  # (B, Hkv, S_new, E)
        v = split_heads(self.v_proj(value), self.num_kv_heads)  # (B, Hkv, S_new, E)
        past = 0 if kv_cache is None else kv_cache.length
        if self.rope:  # absolute positions; queries are the last L of all S positions
            k = apply_rotary(k, torch.arange(past, past + k.size(2), device=k.device), self.rope_base)
            S = past + k.size(2)
            q = apply_rotary(q, torch.arange(S - q.size(2), S, device=q.device), self.rope_base)
        if kv_cache is not None:
            k, v = kv_cache.append(k, v)  # (B, Hkv, S, E): all keys and values so far
        out, weights = grouped_query_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal,
            dropout_p=self.dropout if self.training else 0.0)  # (B, H, L, E), (B, H, L, S)
        return self.out_proj(merge_heads(out)), weights  # (B, L, D), (B, H, L, S)


def mean_pool_kv_heads(mha: MultiHeadAttention, num_kv_heads: int) -> MultiHeadAttention:
    """Convert a trained MHA layer to GQA (or MQA with ``num_kv_heads=1``) by averaging
    the key and value projections of the heads in each group (Ainslie et al., 2023).

    Query and output projections are copied unchanged. The result usually needs a
    short "uptraining" to recover the original quality. The result is on ``mha``'s
    device and in its dtype.
    """
    H, E = mha.num_heads, mha.head_dim
    if mha.num_kv_heads != H:
        raise ValueError(f"mha must be plain MHA (num_kv_heads == num_heads), got "
                         f"num_kv_heads={mha.num_kv_heads}, num_heads={H}")
    gqa = MultiHeadAttention(mha.embed_dim, H, num_kv_heads, bias=mha.q_proj.bias is not None,
                             dropout=mha.dropout, rope=mha.rope, rope_base=mha.rope_base,
                             device=mha.q_proj.weight.device, dtype=mha.q_proj.weight.dtype)
    G = H // num_kv_heads
    with torch.no_grad():
        gqa.q_proj.load_state_dict(mha.q_proj.state_dict())
        gqa.out_proj.load_state_dict(mha.out_proj.state_dict())
        for name in ("k_proj", "v_proj"):
            src, dst = getattr(mha, name), getattr(gqa, name)
            w = src.weight.view(num_kv_heads, G, E, mha.embed_dim)  # (Hkv, G, E, D): heads of a group
            dst.weight.copy_(w.mean(1).reshape(num_kv_heads * E, mha.embed_dim))
            if src.bias is not None:
                dst.bias.copy_(src.bias.view(num_kv_heads, G, E).mean(1).flatten())
    return gqa


def grouped_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                            attn_mask: torch.Tensor | None = None, is_causal: bool = False,
                            dropout_p: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention where ``H`` query heads share ``Hkv`` key/value heads.

    ``q (B, H, L, E)``, ``k``/``v (B, Hkv, S, E)``; query head ``a`` reads kv head
    ``a // (H // Hkv)``. Without a custom mask, the ``G = H // Hkv`` query heads of a
    group are stacked as ``G * L`` queries against their one kv head, so keys and
    values are read once per group, never copied; with a mask, kv heads are repeated.
    Returns ``(output (B, H, L, E), weights (B, H, L, S))``.
    """
    B, H, L, E = q.shape
    Hkv, S = k.size(1), k.size(2)
    if H % Hkv:
        raise ValueError(f"{Hkv} key/value heads must divide {H} query heads")
    G = H // Hkv
    if G == 1 or attn_mask is not None:
        return scaled_dot_product_attention(q, repeat_kv(k, G), repeat_kv(v, G), attn_mask,
                                            is_causal, dropout_p=dropout_p)
    mask = causal_mask(L, S, device=q.device).repeat(G, 1) if is_causal else None  # (G*L, S)
    q = q.reshape(B, Hkv, G * L, E)  # (B, Hkv, G*L, E): the group's heads, one after another
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    return out.view(B, H, L, E), weights.view(B, H, L, S)  # (B, H, L, E), (B, H, L, S)
