"""The key/value cache of autoregressive decoding and what it costs.

A decoder generating token t needs the keys and values of tokens 0..t-1 again; they
never change, so they are kept instead of recomputed. Only the new token's key and
value are projected at each step.

Shape legend: B batch, Hkv key/value heads (h_kv), T tokens appended in one step, S
cached length (the keys a new query attends to), E head dim (d_k).
"""

from __future__ import annotations

import torch

from ._checks import check_device, check_positive_int


class KVCache:
    """Pre-allocated keys and values ``(B, Hkv, max_len, E)`` for one attention layer.

    ``append`` writes the new entries in place (no copy of the past) and returns views
    of everything cached so far. ``dtype`` and ``device`` place the buffers (default:
    float32 on the CPU); what is appended must be on the same device.
    """

    def __init__(self, batch_size: int, num_kv_heads: int, head_dim: int, max_len: int,
                 dtype=torch.float32, device=None):
        for name, value in (("batch_size", batch_size), ("num_kv_heads", num_kv_heads),
                            ("head_dim", head_dim), ("max_len", max_len)):
            check_positive_int(name, value)
        shape = (batch_size, num_kv_heads, max_len, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.length = 0

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add ``k``, ``v (B, Hkv, T, E)``; return all keys and values ``(B, Hkv, S, E)``."""
        B, Hkv, T, E = k.shape
        expected = self.keys.shape[:2] + self.keys.shape[3:]
        if (B, Hkv, E) != expected or v.shape != k.shape:
            raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must be "
                             f"(B, Hkv, T, E) with (B, Hkv, E) = {tuple(expected)}")
        for name, x in (("k", k), ("v", v)):
            check_device(name, x, self.keys.device, "the cache (KVCache(..., device=...))")
        if self.length + T > self.keys.size(2):
            raise ValueError(f"cache full: {self.length} + {T} new positions exceed "
                             f"max_len={self.keys.size(2)}")
        end = self.length + T
        self.keys[:, :, self.length:end] = k
        self.values[:, :, self.length:end] = v
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]  # (B, Hkv, S, E) views

    def nbytes(self) -> int:
        """Bytes of the keys and values cached so far."""
        per_position = self.keys[:, :, :1].numel() * self.keys.element_size()
        return 2 * per_position * self.length


def kv_cache_bytes(num_layers: int, num_kv_heads: int, head_dim: int, seq_len: int,
                   batch_size: int = 1, bytes_per_element: int = 2) -> int:
    """Bytes held by a KV cache, keys and values together.

    ``2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element``;
    ``bytes_per_element=2`` is float16/bfloat16. Sharing key/value heads (MQA, GQA)
    shrinks the cache by ``num_heads / num_kv_heads`` (G, the query heads per key/value
    head). In the book's symbols: ``2 n_layers h_kv d_k`` numbers per token.
    """
    for name, value in (("num_layers", num_layers), ("num_kv_heads", num_kv_heads),
                        ("head_dim", head_dim), ("seq_len", seq_len),
                        ("batch_size", batch_size), ("bytes_per_element", bytes_per_element)):
        check_positive_int(name, value)
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
