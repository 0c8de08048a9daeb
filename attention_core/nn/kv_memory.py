"""Chapter 12: one KV-memory calculator for every attention variant of the book.

A model's cache is a sum over its layers of (numbers cached per token) x (tokens held).
The variants change one factor or the other:

- MHA, GQA, MQA: ``2 h_kv d_k`` numbers per token and layer (keys and values);
- MLA (DeepSeek-AI 2024): ``d_c + d_R``, the latent and the shared rotary key;
- sliding window (Jiang et al. 2023), optionally with sinks (Xiao et al. 2023): a local
  layer holds at most ``window + num_sinks`` tokens, however long the context;
- interleaved local and global layers (Gemma 3 team 2025): every ``global_every``-th
  layer is global, the rest local;
- cross-layer attention (Brandon et al. 2024): groups of ``share_every`` adjacent
  layers read one cache, so only one layer in each group stores it.

Standard layers are counted by :func:`~attention_core.nn.kv_cache.kv_cache_bytes`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._checks import check_positive_int
from .kv_cache import kv_cache_bytes

__all__ = ["KVLayout", "kv_memory_bytes"]


@dataclass(frozen=True)
class KVLayout:
    """What one model caches. ``window`` None: every layer global. ``global_every``
    (with a window): layers ``global_every - 1, 2 global_every - 1, ...`` are global, the
    others local (Gemma 3: 6, five local to one global). ``kv_latent_dim`` set: MLA,
    caching ``kv_latent_dim + rope_dim`` numbers per token and layer (``num_kv_heads`` and
    ``head_dim`` unused). ``share_every``: layers per shared cache (1: no sharing)."""

    num_layers: int
    num_kv_heads: int = 1
    head_dim: int = 128
    window: int | None = None
    num_sinks: int = 0
    global_every: int | None = None
    kv_latent_dim: int | None = None
    rope_dim: int = 0
    share_every: int = 1

    def __post_init__(self):
        for name in ("num_layers", "num_kv_heads", "head_dim", "share_every"):
            check_positive_int(name, getattr(self, name))
        for name in ("num_sinks", "rope_dim"):
            check_positive_int(name, getattr(self, name), minimum=0)
        for name in ("window", "global_every", "kv_latent_dim"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))
        if self.window is None and (self.num_sinks or self.global_every):
            raise ValueError(f"num_sinks={self.num_sinks} and global_every={self.global_every} "
                             f"need a window, got window=None")
        if self.rope_dim and self.kv_latent_dim is None:
            raise ValueError(f"rope_dim={self.rope_dim} is MLA's decoupled RoPE key and needs kv_latent_dim, "
                             "got kv_latent_dim=None")

    def layer_counts(self) -> tuple[int, int]:
        """``(global layers, local layers)`` that store a cache, after cross-layer sharing."""
        if self.window is None:
            num_global = self.num_layers
        elif self.global_every is None:
            num_global = 0
        else:
            num_global = self.num_layers // self.global_every
        num_local = self.num_layers - num_global
        share = self.share_every
        return math.ceil(num_global / share), math.ceil(num_local / share)

    def bytes_per_token_and_layer(self, bytes_per_element: int = 2) -> int:
        """Bytes one token costs in one layer that stores a cache."""
        if self.kv_latent_dim is not None:
            return (self.kv_latent_dim + self.rope_dim) * bytes_per_element
        return kv_cache_bytes(1, self.num_kv_heads, self.head_dim, 1, 1, bytes_per_element)


def kv_memory_bytes(layout: KVLayout, seq_len: int, batch_size: int = 1,
                    bytes_per_element: int = 2) -> int:
    """Bytes of the whole KV cache of a model with ``layout`` after ``seq_len`` tokens,
    for ``batch_size`` sequences (``bytes_per_element=2``: float16/bfloat16)."""
    if not isinstance(layout, KVLayout):
        raise TypeError(f"layout must be a KVLayout, got {type(layout).__name__}")
    check_positive_int("seq_len", seq_len)
    check_positive_int("batch_size", batch_size)
    check_positive_int("bytes_per_element", bytes_per_element)
    num_global, num_local = layout.layer_counts()
    held_local = seq_len if layout.window is None else min(seq_len, layout.window + layout.num_sinks)
    if layout.kv_latent_dim is None:  # keys and values: the chapter-9 formula, layer type by type
        return sum(kv_cache_bytes(layers, layout.num_kv_heads, layout.head_dim, held,
                                  batch_size, bytes_per_element)
                   for layers, held in ((num_global, seq_len), (num_local, held_local)) if layers)
    per_token = layout.bytes_per_token_and_layer(bytes_per_element)
    return batch_size * per_token * (num_global * seq_len + num_local * held_local)
