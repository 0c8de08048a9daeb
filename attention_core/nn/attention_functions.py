"""Chapter 8 (and 11): one signature for every attention kernel, and a dict to pick one by
name.

Every kernel of :data:`ATTENTION_FUNCTIONS` is called as::

    output, weights = fn(query, key, value, attn_mask=None, is_causal=False, scale=None, **options)

and returns ``(output, weights or None)``, as HuggingFace's attention functions do
(``ALL_ATTENTION_FUNCTIONS``): ``output`` is ``(..., L, Ev)``; ``weights`` is ``(..., L, S)``
for a kernel that forms them and ``None`` for one whose point is not to. ``attn_mask``,
``is_causal`` and ``scale`` mean what they mean for
:func:`~attention_core.nn.functional.scaled_dot_product_attention`; a kernel that cannot
honour one of them refuses it (``ValueError``) rather than ignore it, and a kernel refuses an
option it does not know (``TypeError`` naming the kernel and the option, listing those it
knows). A model or a benchmark picks a variant by name instead of growing a flag for each,
and fixes a kernel's options with ``functools.partial``::

    fn = functools.partial(ATTENTION_FUNCTIONS["sliding_window"], window=64)
    output, _ = fn(query, key, value)

Each entry is an :class:`AttentionKernel`: the package's function that computes it, under the
one signature. A name means one kernel everywhere: ``MultiHeadAttention(attention="eager")``
attends with ``ATTENTION_FUNCTIONS["eager"]``.

Shape legend: ``...`` batch dims (e.g. B batch, H heads), Hkv key/value heads (shared by
the H query heads), L query length, S key length, T length of one token sequence
(self-attention, L = S = T), E query/key dim per head (d_k), Ev value dim per head (d_v),
``proj_len`` Linformer's projected length.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ._checks import check_attn_mask, check_dropout_p, check_is_causal, check_qkv, check_scale, scores_shape
from .flash import flash_attention
from .functional import NEG_INF, compute_dtype, scaled_dot_product_attention
from .heads import check_grouped, grouped_query_attention
from .linear_attention import linear_attention, linformer_attention
from .masks import causal_mask
from .sparse import lsh_attention, sliding_window_attention

__all__ = ["ATTENTION_FUNCTIONS", "AttentionFunction", "AttentionKernel"]

AttentionFunction = Callable[..., tuple]
"""Any kernel, as a type: an entry of :data:`ATTENTION_FUNCTIONS` (an :class:`AttentionKernel`)
or a ``functools.partial`` of one with options fixed."""


def _eager_attention(query, key, value, attn_mask=None, is_causal=False, scale=None,
                     dropout_p=0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention with its weights, for any number of key/value heads:
    :func:`~attention_core.nn.heads.grouped_query_attention` when ``key (B, Hkv, S, E)`` has
    fewer heads than ``query (B, H, L, E)`` (each kv head read once by its group), else
    :func:`~attention_core.nn.functional.scaled_dot_product_attention` on ``(..., L, E)``."""
    shared = (isinstance(query, torch.Tensor) and isinstance(key, torch.Tensor)
              and query.dim() == 4 == key.dim() and key.size(1) < query.size(1))
    attend = grouped_query_attention if shared else scaled_dot_product_attention
    return attend(query, key, value, attn_mask, is_causal, scale, dropout_p)


def _sdpa_attention(query, key, value, attn_mask=None, is_causal=False, scale=None,
                    dropout_p=0.0) -> tuple[torch.Tensor, None]:
    """What ``"eager"`` computes, without forming the weights: PyTorch's fused kernel,
    ``torch.nn.functional.scaled_dot_product_attention``, under the package's conventions.
    ``is_causal`` aligns the queries to the end of the keys and combines with ``attn_mask``
    by AND; a query with no key left gets a zero output (and zero gradients); ``key``/``value (B, Hkv,
    S, E)`` may have fewer heads than ``query (B, H, L, E)``; float16/bfloat16 are computed
    in float32. Returns ``(output (..., L, Ev), None)``."""
    shared = (isinstance(query, torch.Tensor) and isinstance(key, torch.Tensor)
              and query.dim() == 4 == key.dim() and key.size(1) < query.size(1))
    if shared:
        check_grouped(query, key, value)
    else:
        check_qkv(query, key, value)
    L, S = query.size(-2), key.size(-2)
    if attn_mask is not None:
        shape = (*query.shape[:-1], S) if shared else scores_shape(query, key)  # (..., L, S)
        check_attn_mask(attn_mask, shape, query.device)
    check_is_causal(is_causal)
    check_scale(scale)
    check_dropout_p(dropout_p)
    mask, causal = attn_mask, is_causal and L > 1  # one query, aligned to the last key, sees them all
    if causal and (L != S or mask is not None):  # PyTorch aligns is_causal to the start: build ours
        allowed = causal_mask(L, S, device=query.device)  # (L, S)
        mask = allowed if mask is None else (
            allowed & mask if mask.dtype == torch.bool else mask.masked_fill(~allowed, NEG_INF))
        causal = False
    dtype = query.dtype
    if compute_dtype(dtype) != dtype:  # float16/bfloat16: computed in float32
        query, key, value = (x.to(compute_dtype(dtype)) for x in (query, key, value))
    if mask is not None and mask.is_floating_point():
        mask = mask.to(query.dtype)
    # a query whose keys are all masked gets zeros from PyTorch 2.13 (tests/test_properties.py)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p,
                                         is_causal=causal, scale=scale, enable_gqa=shared)  # (..., L, Ev)
    return out.to(dtype), None


def _triton_attention(query, key, value, attn_mask=None, is_causal=False, scale=None,
                     block_q=None, block_k=None) -> tuple:
    """:func:`attention_core.nn.triton_flash.triton_attention`, the Triton kernel of chapter 11,
    imported on the first call: Triton is an optional dependency (the ``gpu`` extra) and
    importing it takes seconds, so ``import attention_core`` never does."""
    kernel = importlib.import_module(".triton_flash", __package__).triton_attention
    return kernel(query, key, value, attn_mask, is_causal, scale, block_q, block_k)


@dataclasses.dataclass(frozen=True, repr=False)
class AttentionKernel:
    """One entry of :data:`ATTENTION_FUNCTIONS`: the function ``fn`` that computes it, called
    as ``kernel(query, key, value, attn_mask=None, is_causal=False, scale=None, **options)``.

    ``options``: the keyword options ``fn`` takes besides those three (``required``: those it
    cannot run without); ``refuses``: ``(argument, why)`` for each of ``attn_mask``,
    ``is_causal``, ``scale`` that it cannot honour, refused when given (not None, not False);
    ``shared_kv_heads``: whether ``key``/``value`` may have fewer heads than ``query`` (Hkv
    dividing H) without :func:`~attention_core.nn.heads.repeat_kv`.
    """

    name: str
    fn: AttentionFunction
    options: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    refuses: tuple[tuple[str, str], ...] = ()
    shared_kv_heads: bool = False

    def __call__(self, query, key, value, attn_mask=None, is_causal=False, scale=None, **options):
        self.check_options(options)
        given = {"attn_mask": attn_mask, "is_causal": is_causal, "scale": scale}
        for argument, why in self.refuses:
            if argument == "is_causal":
                check_is_causal(is_causal)
            got = given.pop(argument)
            if got is not None and got is not False:
                raise ValueError(f"ATTENTION_FUNCTIONS[{self.name!r}] cannot honour {argument}: {why}")
        return self.fn(query, key, value, **given, **options)

    def __repr__(self) -> str:
        return f"ATTENTION_FUNCTIONS[{self.name!r}]"

    def check_options(self, options) -> None:
        """Raise a ``TypeError`` naming this kernel for an option it does not know or a
        required one that is missing, listing the options it knows."""
        unknown = sorted(set(options) - set(self.options))
        missing = [name for name in self.required if name not in options]
        known = ", ".join(self.options) or "none"
        if unknown:
            raise TypeError(f"ATTENTION_FUNCTIONS[{self.name!r}] takes no option {unknown[0]!r}; its "
                            f"options (besides attn_mask, is_causal, scale) are: {known}")
        if missing:
            raise TypeError(f"ATTENTION_FUNCTIONS[{self.name!r}] needs the option {missing[0]}=...; its "
                            f"options (besides attn_mask, is_causal, scale) are: {known}")


_NO_SCORES = "it never forms the L x S scores that a mask or a scale acts on"

ATTENTION_FUNCTIONS: dict[str, AttentionKernel] = {
    "eager": AttentionKernel("eager", _eager_attention, ("dropout_p",), shared_kv_heads=True),
    "grouped_query": AttentionKernel("grouped_query", grouped_query_attention, ("dropout_p",),
                                     shared_kv_heads=True),
    "sdpa": AttentionKernel("sdpa", _sdpa_attention, ("dropout_p",), shared_kv_heads=True),
    "flash": AttentionKernel("flash", flash_attention, ("block_q", "block_k")),
    "sliding_window": AttentionKernel("sliding_window", sliding_window_attention,
                                      ("window", "block_size"), required=("window",)),
    "linear": AttentionKernel("linear", linear_attention, ("feature_map", "chunk_size", "eps"),
                              refuses=(("attn_mask", _NO_SCORES), ("scale", _NO_SCORES))),
    "linformer": AttentionKernel(
        "linformer", linformer_attention, ("key_projection", "value_projection"),
        required=("key_projection",),
        refuses=(("attn_mask", "its scores are over the proj_len projected positions, not the S keys"),
                 ("is_causal", "projecting along the sequence mixes future keys into every position"))),
    "lsh": AttentionKernel(
        "lsh", lsh_attention, ("num_buckets", "chunk_size", "num_hashes", "seed"),
        required=("num_buckets",),
        refuses=(("attn_mask", "its buckets, not a mask, choose the keys"),
                 ("is_causal", "Reformer's causal masking is not implemented here"),
                 ("scale", "it scales by 1/sqrt(E) against unit-length keys, as Reformer does"))),
}
"""Name -> :class:`AttentionKernel`, each ``fn(query, key, value, attn_mask=None,
is_causal=False, scale=None, **options) -> (output, weights or None)``.

- ``"eager"``: scaled dot-product attention with its weights ``(..., L, S)``:
  :func:`~attention_core.nn.functional.scaled_dot_product_attention`, or, for ``key``/``value
  (B, Hkv, S, E)`` with fewer heads than ``query (B, H, L, E)``,
  :func:`~attention_core.nn.heads.grouped_query_attention`; option ``dropout_p``.
  ``MultiHeadAttention``'s default.
- ``"grouped_query"``: :func:`~attention_core.nn.heads.grouped_query_attention` alone (4-dim
  inputs, Hkv dividing H; GQA, MQA); option ``dropout_p``; weights ``(B, H, L, S)``.
- ``"sdpa"``: what ``"eager"`` computes, by PyTorch's fused
  ``torch.nn.functional.scaled_dot_product_attention`` (FlashAttention-style on the CPU,
  chapter 11), with the package's conventions (causal aligned to the end, masked-out rows
  zero, fewer key/value heads allowed); option ``dropout_p``; weights None. What a
  ``MultiHeadAttention(attention="eager")`` attends with when called with
  ``need_weights=False``, as ``torch.nn.MultiheadAttention`` does.
- ``"flash"``: :func:`~attention_core.nn.flash.flash_attention`; options ``block_q``,
  ``block_k``; weights None.
- ``"sliding_window"``: :func:`~attention_core.nn.sparse.sliding_window_attention`; needs
  ``window``; option ``block_size``; weights None.
- ``"linear"``: :func:`~attention_core.nn.linear_attention.linear_attention`; options
  ``feature_map``, ``chunk_size``, ``eps``; takes ``is_causal``, refuses ``attn_mask`` and
  ``scale``; weights None.
- ``"linformer"``: :func:`~attention_core.nn.linear_attention.linformer_attention`; needs
  ``key_projection (proj_len, S)``; option ``value_projection``; takes ``scale``, refuses
  ``attn_mask`` and ``is_causal``; weights ``(..., L, proj_len)``, over the ``proj_len``
  projected positions rather than the S keys.
- ``"lsh"``: :func:`~attention_core.nn.sparse.lsh_attention`; needs ``num_buckets``; options
  ``chunk_size``, ``num_hashes``, ``seed``; ``key`` must be ``query`` (Reformer shares them);
  refuses ``attn_mask``, ``is_causal`` and ``scale``; weights None.
- ``"triton"`` (only where Triton is installed, the ``gpu`` extra): FlashAttention-2 as a
  Triton kernel (``attention_core.nn.triton_flash``, run as
  :func:`~attention_core.nn.backends.triton_mode` says); ``query (..., H, L, E)`` against
  ``key``/``value (..., Hkv, S, E)`` with Hkv dividing H; options ``block_q``, ``block_k``;
  takes ``is_causal`` and ``scale``, refuses ``attn_mask``; weights None.

The exact kernels (``eager``, ``grouped_query``, ``flash``, ``triton``, and ``sliding_window``
with its band as the mask) equal ``torch.nn.functional.scaled_dot_product_attention``; the
others are different attentions (chapter 8).
"""
if importlib.util.find_spec("triton") is not None:  # the `gpu` extra (Linux); not imported here
    ATTENTION_FUNCTIONS["triton"] = AttentionKernel(
        "triton", _triton_attention, ("block_q", "block_k"), shared_kv_heads=True,
        refuses=(("attn_mask", "it takes is_causal=True, not an arbitrary mask; "
                               "ATTENTION_FUNCTIONS['flash'] takes one"),))
