"""Chapter 4 (and 3, 5, 8, 9, 10, 12, 13): multi-head attention (Vaswani et al., 2017)
with shared key/value heads: multi-query (Shazeer, 2019) and grouped-query attention
(Ainslie et al., 2023), attending with a kernel picked by name from
:data:`~attention_core.nn.attention_functions.ATTENTION_FUNCTIONS`.

Shape legend: B batch, T length of one sequence (self-attention, L = S = T), L query
length, S key length, H query heads (h), Hkv key/value heads (h_kv), G query heads per
key/value head (H / Hkv), E head dim (d_k), D model width (embed_dim = H * E). A head
is indexed by ``a``: query head ``a`` uses key/value head ``a // G``.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from ._checks import (
    check_attn_mask,
    check_base,
    check_bool,
    check_device,
    check_dropout,
    check_dtype,
    check_factory_dtype,
    check_positive_int,
    check_tensor,
    check_tensor_size,
)
from .attention_functions import ATTENTION_FUNCTIONS, AttentionFunction, AttentionKernel
from .heads import merge_heads, repeat_kv, split_heads
from .kv_cache import HeadCache, KVCache, is_head_cache
from .latent_attention import LatentKVCache
from .paged import PagedKVCache
from .positional import rotary_table, rotate_pairs

__all__ = ["MultiHeadAttention", "mean_pool_kv_heads"]


def _attention_kernel(attention: str | AttentionFunction) -> AttentionFunction:
    """The kernel ``MultiHeadAttention(attention=...)`` attends with: a name of
    :data:`~attention_core.nn.attention_functions.ATTENTION_FUNCTIONS` gives its kernel (the
    same one everywhere); an :class:`~attention_core.nn.attention_functions.AttentionKernel`
    (one of the dict's, or one of a library's own), or a ``functools.partial`` of one with
    options fixed (checked now), is returned as it is. ``"lsh"`` is refused: Reformer's keys are its
    queries, which two projections never give.
    """
    if isinstance(attention, str):
        if attention not in ATTENTION_FUNCTIONS:
            raise ValueError(f"attention must be one of {sorted(ATTENTION_FUNCTIONS)} (the names of "
                             f"ATTENTION_FUNCTIONS), got {attention!r}")
        attention = ATTENTION_FUNCTIONS[attention]
    kernel = attention.func if isinstance(attention, functools.partial) else attention
    if not isinstance(kernel, AttentionKernel):
        raise TypeError(f"attention must be a name in {sorted(ATTENTION_FUNCTIONS)}, an AttentionKernel "
                        f"or a functools.partial of one, got {attention!r}")
    if isinstance(attention, functools.partial):
        kernel.check_options(attention.keywords)  # a layer passes no option but dropout_p
    if kernel is ATTENTION_FUNCTIONS["lsh"]:  # Reformer's keys are its queries; W_q and W_k differ
        raise ValueError("attention='lsh' needs key to be query (Reformer shares them), which "
                         "MultiHeadAttention's separate W_q and W_k never give")
    return attention


def _check_args(embed_dim: int, num_heads: int, num_kv_heads: int, dropout: float, rope: bool,
                rope_base: float, dtype) -> None:
    """Raise unless :class:`MultiHeadAttention`'s sizes fit together (H divides D, Hkv
    divides H, an even head dim for RoPE) and its options are valid."""
    for name, value in (("embed_dim", embed_dim), ("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
        check_positive_int(name, value)
    if embed_dim % num_heads:
        raise ValueError(f"num_heads={num_heads} must divide embed_dim={embed_dim}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}")
    check_dropout("dropout", dropout)
    if rope and (embed_dim // num_heads) % 2:
        raise ValueError(f"rope=True needs an even head_dim, got {embed_dim // num_heads}")
    if rope:
        check_base("rope_base", rope_base)
    check_factory_dtype(dtype)


class MultiHeadAttention(nn.Module):
    """Batch-first multi-head attention that returns per-head weights.

    ``num_kv_heads=None`` is standard MHA; ``1`` is MQA; a divisor of ``num_heads``
    in between is GQA, where query head ``a`` uses kv head
    ``a // (num_heads // num_kv_heads)``. With ``rope=True``, rotary embeddings
    (:func:`~attention_core.nn.positional.apply_rotary`) are applied to queries and keys
    after projection. ``device`` and ``dtype`` place the parameters, as in
    ``torch.nn.MultiheadAttention`` (default: float32 on the CPU); inputs and masks must be
    on the parameters' device.

    ``attention`` picks the kernel, as HuggingFace's ``ALL_ATTENTION_FUNCTIONS`` does: a
    name of :data:`~attention_core.nn.attention_functions.ATTENTION_FUNCTIONS`, one of
    its kernels with options fixed by ``functools.partial``, or an
    :class:`~attention_core.nn.attention_functions.AttentionKernel` of your own
    (:meth:`set_attention` swaps it later)::

        window = functools.partial(ATTENTION_FUNCTIONS["sliding_window"], window=64)
        layer = MultiHeadAttention(512, 8, attention=window)

    ``"eager"`` (the default) is ``ATTENTION_FUNCTIONS["eager"]``, the same kernel as
    everywhere: for GQA and MQA it reads each key/value head once per group. A kernel that
    does not take fewer key/value heads gets them repeated to ``num_heads``
    (:func:`~attention_core.nn.heads.repeat_kv`). Every call passes ``attn_mask``,
    ``is_causal`` (and ``dropout_p`` when training with ``dropout > 0``); a kernel that cannot
    honour one refuses it with a ``ValueError`` naming it (``"linear"`` takes no
    ``attn_mask``), and a kernel that forms no weights makes ``forward`` return ``None`` for
    them. A banded kernel aligns its band to square attention, so decode with a cache under
    ``"eager"``.
    """

    def __init__(self, embed_dim: int, num_heads: int, num_kv_heads: int | None = None,
                 bias: bool = True, dropout: float = 0.0, rope: bool = False,
                 rope_base: float = 10000.0, device=None, dtype=None, *,
                 attention: str | AttentionFunction = "eager"):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        _check_args(embed_dim, num_heads, num_kv_heads, dropout, rope, rope_base, dtype)
        check_tensor_size("embed_dim", (embed_dim, embed_dim), dtype)  # W_q, and W_o
        check_bool("bias", bias)
        self.embed_dim, self.num_heads, self.num_kv_heads = embed_dim, num_heads, num_kv_heads
        self.head_dim = embed_dim // num_heads
        self.dropout, self.rope, self.rope_base = dropout, rope, rope_base
        self.set_attention(attention)
        kv_dim = num_kv_heads * self.head_dim
        factory_kwargs = {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory_kwargs)  # W_q
        self.k_proj = nn.Linear(embed_dim, kv_dim, bias=bias, **factory_kwargs)  # W_k
        self.v_proj = nn.Linear(embed_dim, kv_dim, bias=bias, **factory_kwargs)  # W_v
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory_kwargs)  # W_o

    def set_attention(self, attention: str | AttentionFunction) -> None:
        """Attend with ``attention`` from now on (what ``__init__``'s ``attention`` takes), as
        ``transformers``' ``set_attn_implementation`` does: the in-browser export
        (``attention_core.book.web_llm_export``) swaps in ONNX Runtime's fused attention this way."""
        kernel = _attention_kernel(attention)
        options = (kernel.func if isinstance(kernel, functools.partial) else kernel).options
        if self.dropout > 0 and "dropout_p" not in options:
            raise ValueError(f"attention={attention!r} has no dropout on its weights; "
                             f"pass dropout=0.0 or an attention with dropout_p such as 'eager'")
        self.attention, self.attention_fn = attention, kernel

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
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

    def new_cache(self, batch_size: int, max_len: int) -> KVCache:
        """An empty :class:`~attention_core.nn.kv_cache.KVCache` for this layer's key/value
        heads, ``(batch_size, num_kv_heads, max_len, head_dim)``, on the parameters' device
        and in their dtype."""
        w = self.k_proj.weight
        return KVCache(batch_size, self.num_kv_heads, self.head_dim, max_len, dtype=w.dtype, device=w.device)

    def forward(self, query: torch.Tensor, key: torch.Tensor | None = None,
                value: torch.Tensor | None = None, attn_mask: torch.Tensor | None = None,
                is_causal: bool = False, kv_cache: HeadCache | None = None, need_weights: bool = True
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``query (B, L, D)``, ``key``/``value (B, S, D)`` (default: ``query``).

        ``attn_mask`` broadcasts to ``(B, H, L, S)``; it and the inputs must lie on the
        parameters' device (else a ``ValueError`` naming both), the inputs in their dtype
        (else a ``TypeError``). A mask of 3 dims is refused: add the head axis to a padding
        mask, ``padding_mask(lengths, S).unsqueeze(1)`` ``(B, 1, 1, S)``. With ``kv_cache`` (incremental
        decoding, e.g. :meth:`new_cache`), the new keys and values are appended to the cache
        and the queries attend to everything cached so far. Returns ``(output (B, L, D),
        weights (B, H, L, S))``, the weights None if the kernel forms none.
        ``need_weights=False`` says nobody reads the weights (as in ``torch.nn.MultiheadAttention``):
        an ``"eager"`` layer then attends with ``ATTENTION_FUNCTIONS["sdpa"]``, the same maths
        by PyTorch's fused kernel, and returns None for them.
        """
        key = query if key is None else key
        value = key if value is None else value
        self._check_inputs(query, key, value, attn_mask, kv_cache)
        check_bool("need_weights", need_weights)
        q = split_heads(self.q_proj(query), self.num_heads)  # (B, L, D) -> (B, H, L, E)
        k = split_heads(self.k_proj(key), self.num_kv_heads)  # (B, S_new, D) -> (B, Hkv, S_new, E)
        v = split_heads(self.v_proj(value), self.num_kv_heads)  # (B, S_new, D) -> (B, Hkv, S_new, E)
        if self.rope:
            q, k = self._rotate(q, k, past=0 if kv_cache is None else kv_cache.length)
        if kv_cache is not None:
            k, v = kv_cache.append(k, v)  # (B, Hkv, S, E): all keys and values so far
        out, weights = self._attend(q, k, v, attn_mask, is_causal, need_weights)  # (B, H, L, E), (B, H, L, S)
        return self.out_proj(merge_heads(out)), weights  # (B, H, L, E) -> (B, L, D)

    def _check_input(self, name: str, x) -> None:
        """Raise unless ``x`` is ``(B, T, embed_dim)``, ``T >= 1``, on the parameters' device
        and in their dtype (blocks check their ``x`` and ``memory`` with it too)."""
        check_tensor(name, x, min_dim=3)
        if x.dim() != 3 or x.size(-1) != self.embed_dim:
            raise ValueError(f"{name} must have shape (B, T, embed_dim={self.embed_dim}), "
                             f"got {tuple(x.shape)}")
        if x.size(1) == 0:
            raise ValueError(f"{name} is an empty sequence: shape {tuple(x.shape)} needs T >= 1")
        weight = self.q_proj.weight
        check_device(name, x, weight.device, "the module's parameters")
        check_dtype(name, x, weight.dtype, "the module's parameters")

    def _check_mask(self, name: str, attn_mask, B: int, L: int, S: int | None) -> None:
        """Raise unless ``attn_mask`` is None or a bool/float mask on the parameters' device
        that broadcasts to ``(B, H, L, S)`` (``S`` None: not known before the cache is read,
        so only B, H and L are checked). A mask of 3 dims is refused: a padding mask
        ``(B, 1, S)`` would broadcast as ``(H, L, S)`` and give padded keys weight."""
        if attn_mask is None:
            return
        if isinstance(attn_mask, torch.Tensor) and attn_mask.dim() == 3:
            raise ValueError(
                f"{name} of shape {tuple(attn_mask.shape)} has 3 dims; MultiHeadAttention's masks "
                f"broadcast to (B, num_heads, L, S), so a padding mask (B, 1, S) would be read as "
                f"(num_heads, L, S). Add the head axis: {name}.unsqueeze(1) gives (B, 1, 1, S) "
                f"({name}.unsqueeze(0) for a per-head bias (num_heads, L, S))")
        if S is None and isinstance(attn_mask, torch.Tensor) and attn_mask.dim() > 0:
            S = attn_mask.size(-1)
        check_attn_mask(attn_mask, (B, self.num_heads, L, S or 1), self.q_proj.weight.device, name)

    def _check_inputs(self, query, key, value, attn_mask, kv_cache) -> None:
        """Raise unless the inputs are ``(B, L, D)``, ``(B, S, D)``, ``(B, S, D)`` on the
        parameters' device and in their dtype, the mask broadcasts to ``(B, H, L, S)`` there
        (S counting the cache), and ``kv_cache`` is a head cache."""
        self._check_input("query", query)
        for name, x, same in (("key", key, query), ("value", value, key)):
            if x is not same:  # self-attention passes one tensor three times: checked once
                self._check_input(name, x)
        if key.shape[:2] != value.shape[:2] or key.size(0) != query.size(0):
            raise ValueError(f"query {tuple(query.shape)}, key {tuple(key.shape)} and value "
                             f"{tuple(value.shape)} must share B, and key/value must share S")
        # a paged or latent cache has an append too, of other arguments ('append() missing v')
        if kv_cache is not None and (not is_head_cache(kv_cache)
                                     or isinstance(kv_cache, (PagedKVCache, LatentKVCache))):
            raise TypeError(f"kv_cache must be a head cache (KVCache, RollingKVCache: "
                            f"layer.new_cache(B, max_len)) or None, got {type(kv_cache).__name__} "
                            "(a PagedKVCache is read by paged_attention, a LatentKVCache by "
                            "MultiHeadLatentAttention)")
        S = key.size(1) if kv_cache is None else None
        self._check_mask("attn_mask", attn_mask, query.size(0), query.size(1), S)

    def _rotate(self, q: torch.Tensor, k: torch.Tensor, past: int) -> tuple[torch.Tensor, torch.Tensor]:
        """RoPE on ``q (B, H, L, E)`` and the new keys ``k (B, Hkv, S_new, E)`` at their
        absolute positions: ``past`` tokens are cached, and the queries are the last L of
        all ``S = past + S_new`` positions. Both read one kept table (``rotary_table``):
        :func:`~attention_core.nn.positional.apply_rotary`'s values, computed once."""
        S, L = past + k.size(2), q.size(2)
        cos, sin = rotary_table(S, self.head_dim, self.rope_base, q.dtype, q.device)  # (>= S, E/2)
        return rotate_pairs(q, cos[S - L:S], sin[S - L:S]), rotate_pairs(k, cos[past:S], sin[past:S])

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask, is_causal: bool,
                need_weights: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``q (B, H, L, E)`` over ``k``, ``v (B, Hkv, S, E)`` with the layer's kernel (``"sdpa"``
        for an ``"eager"`` layer when the weights are not needed) -> ``(output (B, H, L, E),
        weights (B, H, L, S) or None)``."""
        dropout_p = self.dropout if self.training else 0.0
        options = {"dropout_p": dropout_p} if dropout_p > 0 else {}  # dropout > 0 needs a kernel with it
        fn = self.attention_fn
        if not need_weights and fn is ATTENTION_FUNCTIONS["eager"]:
            fn = ATTENTION_FUNCTIONS["sdpa"]  # the same maths, no (B, H, L, S) weights formed
        if not self._kernel().shared_kv_heads and self.num_kv_heads < self.num_heads:
            G = self.num_heads // self.num_kv_heads  # (B, Hkv, S, E) -> (B, H, S, E): one per query head
            k, v = repeat_kv(k, G), repeat_kv(v, G)
        return fn(q, k, v, attn_mask, is_causal, **options)

    def _kernel(self) -> AttentionKernel:
        """The :class:`~attention_core.nn.attention_functions.AttentionKernel` under
        ``attention_fn`` (a kernel or a ``functools.partial`` of one)."""
        fn = self.attention_fn
        return fn.func if isinstance(fn, functools.partial) else fn


def mean_pool_kv_heads(mha: MultiHeadAttention, num_kv_heads: int) -> MultiHeadAttention:
    """Convert a trained MHA layer to GQA (or MQA with ``num_kv_heads=1``) by averaging
    the key and value projections of the heads in each group (Ainslie et al., 2023).

    Query and output projections are copied unchanged. The result usually needs a
    short "uptraining" to recover the original quality. The result is on ``mha``'s
    device and in its dtype.
    """
    if not isinstance(mha, MultiHeadAttention):
        raise TypeError(f"mha must be a MultiHeadAttention, got {type(mha).__name__}")
    H, E = mha.num_heads, mha.head_dim
    if mha.num_kv_heads != H:
        raise ValueError(f"mha must be plain MHA (num_kv_heads == num_heads), got "
                         f"num_kv_heads={mha.num_kv_heads}, num_heads={H}")
    gqa = MultiHeadAttention(mha.embed_dim, H, num_kv_heads, bias=mha.q_proj.bias is not None,
                             dropout=mha.dropout, rope=mha.rope, rope_base=mha.rope_base,
                             device=mha.q_proj.weight.device, dtype=mha.q_proj.weight.dtype,
                             attention=mha.attention)
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
