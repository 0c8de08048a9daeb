"""Chapter 12: multi-head latent attention (MLA, DeepSeek-AI 2024, "DeepSeek-V2"): keys
and values come out of one small latent vector per token, so the KV cache holds that
latent instead of every head's keys and values.

    psi_t = x_t W_DKV                        the latent, kv_latent_dim numbers  (d_c)
    k_t^C = psi_t W_UK,  v_t = psi_t W_UV      per head, up-projected from it
    k_t^R = RoPE(x_t W_KR)                   one rotary key shared by every head (d_R)
    q_t  = [x_t W_UQ, RoPE(x_t W_QR)]         per head: a content part and a rotary part
    score = (q^C . k^C + q^R . k^R) / sqrt(d_k + d_R)

Row vectors and a weight matrix on the right, as in the book (chapter 12 writes the
latent psi_t, ``latent`` in the code); the paper writes column vectors (``W x``) and calls
the latent c^KV.

Why the decoupled rotary part: RoPE rotates by position, and a rotation between
``q^C`` and ``psi W_UK`` would stop ``W_UK`` from being folded into the query (below); so
position rides on a separate small key ``k^R``, cached next to the latent.

Absorption (the inference path): ``q^C . (psi W_UK) = (q^C W_UK^T) . psi``, so each head's
query can be mapped into latent space once, and its scores read the cached latents
directly; likewise ``W_UV`` moves past the weighted sum of latents to the output side.
Attention then runs like MQA with one shared "head" of width ``d_c + d_R``.

Simplifications against the paper: no normalisation of the latents, no bias, queries
optionally through their own latent (``q_latent_dim``).

Shape legend: B batch, T tokens of the input, L query length, S key length, H heads,
D model width (embed_dim), E head dim (d_k), ``latent`` kv_latent_dim (d_c),
``rope`` rope_dim (d_R).
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn

from ._checks import (
    check_allocation,
    check_attn_mask,
    check_base,
    check_device,
    check_dtype,
    check_factory_dtype,
    check_float_dtype,
    check_positive_int,
    check_tensor,
    check_tensor_size,
)
from .functional import scaled_dot_product_attention
from .heads import merge_heads, split_heads
from .kv_cache import Cache, crop_length
from .positional import apply_rotary

__all__ = ["LatentKVCache", "MultiHeadLatentAttention"]


class LatentKVCache(Cache):
    """The cache of :class:`MultiHeadLatentAttention`: per token the latent ``psi``
    (``kv_latent_dim`` numbers) and the shared rotary key ``k^R`` (``rope_dim``), in one
    buffer ``(B, max_len, kv_latent_dim + rope_dim)``; no per-head keys or values.

    A :class:`~attention_core.nn.kv_cache.Cache`: ``length`` counts the positions cached
    so far (each sequence of the batch holds that many), the absolute position of the
    next token. Its ``append`` takes latents, not per-head keys and values, so it does not
    fit where a :class:`~attention_core.nn.kv_cache.HeadCache` goes (a type checker says
    so; ``isinstance`` compares names only)."""

    def __init__(self, batch_size: int, kv_latent_dim: int, rope_dim: int, max_len: int,
                 dtype=torch.float32, device=None):
        for name, value in (("batch_size", batch_size), ("kv_latent_dim", kv_latent_dim),
                            ("max_len", max_len)):
            check_positive_int(name, value)
        check_positive_int("rope_dim", rope_dim, minimum=0)
        check_float_dtype("dtype", dtype)
        self.kv_latent_dim, self.rope_dim = kv_latent_dim, rope_dim
        check_allocation("LatentKVCache(batch_size, kv_latent_dim + rope_dim, max_len)",
                         batch_size * max_len * (kv_latent_dim + rope_dim), dtype.itemsize)
        self.buffer = torch.zeros(batch_size, max_len, kv_latent_dim + rope_dim, dtype=dtype, device=device)
        self.length = 0

    @property
    def nbytes_per_token(self) -> int:
        """Bytes one token costs in one sequence, ``(kv_latent_dim + rope_dim)`` times the element size."""
        return self.buffer.size(-1) * self.buffer.element_size()

    def nbytes(self) -> int:
        """Bytes of everything cached so far (all sequences of the batch)."""
        return self.buffer.size(0) * self.length * self.nbytes_per_token

    def reset(self) -> None:
        """Empty the cache (``length`` 0, buffer zeroed) to decode a new text with it."""
        self.buffer.zero_()
        self.length = 0

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions, as :meth:`KVCache.crop
        <attention_core.nn.kv_cache.KVCache.crop>`: to time the same decoding step again."""
        crop_length(self, length)

    def append(self, latent: torch.Tensor, rope_key: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add ``latent (B, T, kv_latent_dim)`` and ``rope_key (B, T, rope_dim)``; return
        all cached latents ``(B, S, kv_latent_dim)`` and rotary keys ``(B, S, rope_dim)`` (views)."""
        for name, x in (("latent", latent), ("rope_key", rope_key)):
            check_tensor(name, x, min_dim=3)
        B, T = latent.shape[:2]
        width = (self.kv_latent_dim, self.rope_dim)
        if latent.dim() != 3 or rope_key.dim() != 3 or (B, latent.size(-1), rope_key.size(-1)) \
                != (self.buffer.size(0), *width) or rope_key.shape[:2] != (B, T):
            raise ValueError(f"latent {tuple(latent.shape)} and rope_key {tuple(rope_key.shape)} must be "
                             f"(B={self.buffer.size(0)}, T, {width[0]}) and (B, T, {width[1]})")
        if T == 0:
            raise ValueError(f"latent {tuple(latent.shape)} holds no token: append T >= 1 positions")
        for name, x in (("latent", latent), ("rope_key", rope_key)):
            check_device(name, x, self.buffer.device, "the cache")
            check_dtype(name, x, self.buffer.dtype, "the cache")
        if self.length + T > self.buffer.size(1):
            raise ValueError(f"cache full: {self.length} + {T} new positions exceed "
                             f"max_len={self.buffer.size(1)}")
        end = self.length + T
        self.buffer[:, self.length:end] = torch.cat((latent, rope_key), dim=-1)
        self.length = end
        cached = self.buffer[:, :end]  # (B, S, latent + rope)
        return cached[..., :self.kv_latent_dim], cached[..., self.kv_latent_dim:]


class MultiHeadLatentAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-AI 2024), batch first, causal self-attention
    with an optional :class:`LatentKVCache` (``new_cache``).

    ``kv_latent_dim`` is d_c; ``rope_dim`` d_R (even; 0 for no positions); ``head_dim``
    d_k defaults to ``embed_dim // num_heads``; ``q_latent_dim`` sends the queries through
    their own latent (d_c'; None: one projection). Submodules: ``q_proj`` or
    ``q_down``/``q_up`` (queries, content and rotary parts), ``kv_down`` (W_DKV),
    ``k_rope`` (W_KR), ``k_up`` (W_UK), ``v_up`` (W_UV), ``out_proj`` (W_O); no biases.
    """

    def __init__(self, embed_dim: int, num_heads: int, kv_latent_dim: int, rope_dim: int = 0,
                 head_dim: int | None = None, q_latent_dim: int | None = None,
                 rope_base: float = 10000.0, device=None, dtype=None):
        super().__init__()
        for name, value in (("embed_dim", embed_dim), ("num_heads", num_heads),
                            ("kv_latent_dim", kv_latent_dim)):
            check_positive_int(name, value)
        check_positive_int("rope_dim", rope_dim, minimum=0)
        check_tensor_size("embed_dim", (embed_dim, embed_dim + kv_latent_dim + rope_dim), dtype)
        if rope_dim % 2:
            raise ValueError(f"rope_dim must be even (RoPE rotates pairs), got {rope_dim}")
        if head_dim is None and embed_dim % num_heads:
            raise ValueError(f"num_heads={num_heads} must divide embed_dim={embed_dim} (or pass head_dim)")
        head_dim = embed_dim // num_heads if head_dim is None else head_dim
        check_positive_int("head_dim", head_dim)
        if rope_dim:
            check_base("rope_base", rope_base)
        check_factory_dtype(dtype)
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, head_dim
        self.kv_latent_dim, self.rope_dim, self.rope_base = kv_latent_dim, rope_dim, rope_base
        factory_kwargs = {"device": device, "dtype": dtype}
        linear = functools.partial(nn.Linear, bias=False, **factory_kwargs)  # MLA has no biases
        q_width = num_heads * (head_dim + rope_dim)  # per head: content, then rotary part
        if q_latent_dim is None:
            self.q_proj = linear(embed_dim, q_width)
        else:
            check_positive_int("q_latent_dim", q_latent_dim)
            self.q_proj = nn.Sequential(linear(embed_dim, q_latent_dim),  # W_DQ
                                        linear(q_latent_dim, q_width))  # W_UQ, W_QR
        self.kv_down = linear(embed_dim, kv_latent_dim)  # W_DKV
        self.k_rope = linear(embed_dim, rope_dim) if rope_dim else None  # W_KR
        self.k_up = linear(kv_latent_dim, num_heads * head_dim)  # W_UK
        self.v_up = linear(kv_latent_dim, num_heads * head_dim)  # W_UV
        self.out_proj = linear(num_heads * head_dim, embed_dim)  # W_O

    def new_cache(self, batch_size: int, max_len: int) -> LatentKVCache:
        """An empty :class:`LatentKVCache` on the parameters' device and in their dtype."""
        w = self.kv_down.weight
        return LatentKVCache(batch_size, self.kv_latent_dim, self.rope_dim, max_len,
                             dtype=w.dtype, device=w.device)

    def _rotate(self, x: torch.Tensor, start: int) -> torch.Tensor:
        """RoPE on ``x (..., T, rope)`` at absolute positions ``start .. start + T - 1``."""
        positions = torch.arange(start, start + x.size(-2), device=x.device)
        return apply_rotary(x, positions, self.rope_base)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False,
                kv_cache: LatentKVCache | None = None, absorb: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x (B, L, D)`` -> ``(output (B, L, D), weights (B, H, L, S))``.

        With ``kv_cache`` the new latents are appended and the queries (the last L of S
        positions) attend to everything cached. ``absorb=True`` takes the inference
        path (scores and values in latent space); ``False`` up-projects every cached
        latent to per-head keys and values. Both give the same result.
        """
        self._check_inputs(x, attn_mask, kv_cache)
        B, L, _ = x.shape
        H, E, R = self.num_heads, self.head_dim, self.rope_dim
        past = 0 if kv_cache is None else kv_cache.length
        q = self.q_proj(x).view(B, L, H, E + R).transpose(1, 2)  # (B, H, L, E + rope)
        q_content, q_rope = q[..., :E], q[..., E:]  # (B, H, L, E), (B, H, L, rope)
        q_rope = self._rotate(q_rope, past) if R else q_rope
        latent = self.kv_down(x)  # (B, L, latent)
        k_rope = self._rotate(self.k_rope(x), past) if R else x.new_zeros(B, L, 0)  # (B, L, rope)
        if kv_cache is not None:
            latent, k_rope = kv_cache.append(latent, k_rope)  # (B, S, latent), (B, S, rope)
        k_rope = k_rope.unsqueeze(1)  # (B, 1, S, rope): one rotary key for every head
        scale = 1.0 / math.sqrt(E + R)  # the scores' true width, whichever path
        path = self._absorbed if absorb else self._naive
        out, weights = path(q_content, q_rope, latent, k_rope, attn_mask, is_causal, scale)  # (B, H, L, E)
        return self.out_proj(merge_heads(out)), weights  # (B, L, D), (B, H, L, S)

    def _check_inputs(self, x, attn_mask, kv_cache) -> None:
        """Raise unless ``x`` is ``(B, L, embed_dim)``, ``L >= 1``, on the parameters' device
        and in their dtype, ``attn_mask`` a bool/float mask there that broadcasts to
        ``(B, H, L, S)``, and ``kv_cache`` a :class:`LatentKVCache` (or None)."""
        check_tensor("x", x, min_dim=3)
        if x.dim() != 3 or x.size(-1) != self.embed_dim:
            raise ValueError(f"x must have shape (B, T, embed_dim={self.embed_dim}), got {tuple(x.shape)}")
        if x.size(1) == 0:
            raise ValueError(f"x is an empty sequence: shape {tuple(x.shape)} needs T >= 1")
        weight = self.kv_down.weight
        check_device("x", x, weight.device, "the module's parameters")
        check_dtype("x", x, weight.dtype, "the module's parameters")
        if kv_cache is not None and not isinstance(kv_cache, LatentKVCache):
            raise TypeError(f"kv_cache must be a LatentKVCache (mla.new_cache(B, max_len)) or None, "
                            f"got {type(kv_cache).__name__}")
        if attn_mask is not None:
            S = x.size(1) + (0 if kv_cache is None else kv_cache.length)
            check_attn_mask(attn_mask, (x.size(0), self.num_heads, x.size(1), S), weight.device)

    def _naive(self, q_content, q_rope, latent, k_rope, attn_mask, is_causal, scale):
        """Up-project every latent to per-head keys and values, then plain attention."""
        H = self.num_heads
        k = split_heads(self.k_up(latent), H)  # (B, H, S, E)
        v = split_heads(self.v_up(latent), H)  # (B, H, S, E)
        k = torch.cat((k, k_rope.expand(-1, H, -1, -1)), dim=-1)  # (B, H, S, E + rope)
        q = torch.cat((q_content, q_rope), dim=-1)  # (B, H, L, E + rope)
        return scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale)

    def _absorbed(self, q_content, q_rope, latent, k_rope, attn_mask, is_causal, scale):
        """Attention in latent space: W_UK folded into the queries, W_UV applied after
        the weighted sum, so no per-head key or value is ever formed."""
        H, E, C = self.num_heads, self.head_dim, self.kv_latent_dim
        # nn.Linear stores weights as (out, in): W_UK[a] is head a's W_UK transposed, k^C = psi W_UK[a]^T
        W_UK = self.k_up.weight.view(H, E, C)  # (H, E, latent)
        W_UV = self.v_up.weight.view(H, E, C)  # (H, E, latent): likewise, v = psi W_UV[a]^T
        q_latent = q_content @ W_UK  # (B, H, L, latent): q^C W_UK^T per head, the query in latent space
        q = torch.cat((q_latent, q_rope), dim=-1)  # (B, H, L, latent + rope)
        k = torch.cat((latent.unsqueeze(1), k_rope), dim=-1)  # (B, 1, S, latent + rope): shared
        out_latent, weights = scaled_dot_product_attention(
            q, k, latent.unsqueeze(1), attn_mask, is_causal, scale)  # (B, H, L, latent)
        return out_latent @ W_UV.transpose(1, 2), weights  # (B, H, L, E): (sum_j alpha_j psi_j) W_UV per head
