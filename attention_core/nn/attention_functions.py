"""Chapter 8 (and 11): one contract for every attention kernel, and a dict to pick
one by name.

Every kernel is called as ``fn(query, key, value, **options)`` and returns
``(output, weights or None)``, as HuggingFace's attention functions do
(``ALL_ATTENTION_FUNCTIONS``): ``output`` is ``(..., L, Ev)``; ``weights`` is
``(..., L, S)`` for a kernel that forms them and ``None`` for one whose point is not to.
A model or a benchmark picks a variant from :data:`ATTENTION_FUNCTIONS` instead of
growing a flag for each, and fixes a kernel's options with ``functools.partial``::

    fn = functools.partial(ATTENTION_FUNCTIONS["sliding_window"], window=64)
    output, _ = fn(query, key, value)

Shape legend: ``...`` batch dims (e.g. B batch, H heads), Hkv key/value heads (shared by
the H query heads), L query length, S key length, T length of one token sequence
(self-attention, L = S = T), E query/key dim per head (d_k), Ev value dim per head (d_v),
``proj_len`` Linformer's projected length.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable

import torch

from .flash import flash_attention
from .functional import scaled_dot_product_attention
from .heads import grouped_query_attention
from .linear_attention import linear_attention, linformer_attention
from .sparse import lsh_attention, sliding_window_attention

AttentionFunction = Callable[..., tuple]


def triton_attention(query, key, value, attn_mask=None, is_causal=False, scale=None,
                     block_m=None, block_n=None) -> tuple:
    """:func:`attention_core.nn.triton_flash.triton_attention`, the Triton kernel of chapter 11,
    imported on the first call: Triton is an optional dependency (the ``gpu`` extra), and
    importing it takes seconds and may switch it to its CPU interpreter, so ``import
    attention_core`` never does."""
    kernel = importlib.import_module(".triton_flash", __package__).triton_attention
    return kernel(query, key, value, attn_mask, is_causal, scale, block_m, block_n)


ATTENTION_FUNCTIONS: dict[str, AttentionFunction] = {
    "eager": scaled_dot_product_attention,
    "grouped_query": grouped_query_attention,
    "flash": flash_attention,
    "sliding_window": sliding_window_attention,
    "linear": linear_attention,
    "linformer": linformer_attention,
    "lsh": lsh_attention,
}
"""Name -> kernel ``fn(query, key, value, **options) -> (output, weights or None)``.

- ``"eager"``: :func:`~attention_core.nn.functional.scaled_dot_product_attention`; options
  ``attn_mask``, ``is_causal``, ``scale``, ``dropout_p``; weights ``(..., L, S)``.
- ``"grouped_query"``: :func:`~attention_core.nn.heads.grouped_query_attention`; ``query
  (B, H, L, E)`` against ``key``/``value (B, Hkv, S, E)`` with ``Hkv`` dividing ``H``
  (GQA, MQA), each kv head read once by its group; options as ``"eager"``; weights
  ``(B, H, L, S)``. ``MultiHeadAttention(attention="eager")`` attends with it.
- ``"flash"``: :func:`~attention_core.nn.flash.flash_attention`; options ``attn_mask``,
  ``is_causal``, ``scale``, ``block_q``, ``block_k``; weights None.
- ``"sliding_window"``: :func:`~attention_core.nn.sparse.sliding_window_attention`; needs
  ``window``; options ``attn_mask``, ``is_causal``, ``scale``, ``block_size``; weights None.
- ``"linear"``: :func:`~attention_core.nn.linear_attention.linear_attention`; options
  ``feature_map``, ``is_causal``, ``chunk_size``, ``eps``; weights None.
- ``"linformer"``: :func:`~attention_core.nn.linear_attention.linformer_attention`; needs
  ``key_projection (proj_len, S)``; options ``value_projection``, ``scale``; weights
  ``(..., L, proj_len)``, over the ``proj_len`` projected positions rather than the S keys.
- ``"lsh"``: :func:`~attention_core.nn.sparse.lsh_attention`; needs ``num_buckets``;
  options ``chunk_size``, ``num_hashes``, ``seed``; ``key`` must be ``query`` (Reformer
  shares them); weights None.
- ``"triton"`` (only where Triton is installed): ``triton_attention``, FlashAttention-2
  as a Triton kernel (``attention_core.nn.triton_flash``: compiled on a CUDA GPU of
  compute capability 8.0+, else run by Triton's CPU interpreter); ``query (..., H, L, E)``
  against ``key``/``value (..., Hkv, S, E)`` with Hkv dividing H; options ``is_causal``,
  ``scale``, ``block_m``, ``block_n``; an ``attn_mask`` is refused (ValueError); weights None.

The exact kernels (``eager``, ``flash``, ``triton``, and ``sliding_window`` with its band as the
mask) equal ``torch.nn.functional.scaled_dot_product_attention``; the others are
different attentions (chapter 8).
"""
if importlib.util.find_spec("triton") is not None:  # the `gpu` extra (Linux)
    ATTENTION_FUNCTIONS["triton"] = triton_attention
    if not torch.cuda.is_available():
        # Without a GPU, Triton can only interpret. Its library (tl.zeros, tl.sum...) is built
        # for one mode when triton is first imported, by whatever imports it (torch._dynamo
        # does): say "interpret" now, before anything can, without importing triton.
        os.environ.setdefault("TRITON_INTERPRET", "1")
