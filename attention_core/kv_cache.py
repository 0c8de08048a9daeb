"""The key/value cache of autoregressive decoding and what it costs."""

from __future__ import annotations

from ._checks import check_positive_int


def kv_cache_bytes(num_layers: int, num_kv_heads: int, head_dim: int, seq_len: int,
                   batch_size: int = 1, bytes_per_element: int = 2) -> int:
    """Bytes held by a KV cache, keys and values together.

    ``2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element``;
    ``bytes_per_element=2`` is float16/bfloat16. Sharing key/value heads (MQA, GQA)
    shrinks the cache by ``num_heads / num_kv_heads``.
    """
    for name, value in (("num_layers", num_layers), ("num_kv_heads", num_kv_heads),
                        ("head_dim", head_dim), ("seq_len", seq_len),
                        ("batch_size", batch_size), ("bytes_per_element", bytes_per_element)):
        check_positive_int(name, value)
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
