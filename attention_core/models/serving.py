"""Chapter 12: what a KV cache costs when a model serves requests: published attention
layouts, the book's variants on one model shape, synthetic request lengths, and the slots
a batch reserves with and without paging.

The maths is in :mod:`attention_core.nn.kv_memory` and :mod:`attention_core.nn.paged`;
this module holds the data and the experiments of the chapter.
"""

from __future__ import annotations

import math
import operator

import torch

from ..nn._checks import check_positive_int, check_tensor_size
from ..nn.kv_memory import KVLayout

__all__ = ["PUBLISHED", "variants", "slot_usage", "request_lengths"]

PUBLISHED: dict[str, KVLayout] = {
    # Llama 3 8B (Meta 2024): 32 layers, GQA with 8 kv heads of 128.
    "Llama 3 8B": KVLayout(num_layers=32, num_kv_heads=8, head_dim=128),
    # Mistral 7B (Jiang et al. 2023): as Llama's shape, every layer a 4096-token window.
    "Mistral 7B": KVLayout(num_layers=32, num_kv_heads=8, head_dim=128, window=4096),
    # Gemma 3 27B (Gemma 3 team 2025): 62 layers, 16 kv heads of 128, 5 local (window 1024) : 1 global.
    "Gemma 3 27B": KVLayout(num_layers=62, num_kv_heads=16, head_dim=128, window=1024, global_every=6),
    # DeepSeek-V3 (DeepSeek-AI 2024): 61 MLA layers, kv_lora_rank 512 + rope 64.
    "DeepSeek-V3": KVLayout(num_layers=61, kv_latent_dim=512, rope_dim=64),
}
"""Published attention configurations, as their model cards give them."""


def variants(num_layers: int = 32, num_heads: int = 32, head_dim: int = 128,
             window: int = 4096, num_sinks: int = 4) -> dict[str, KVLayout]:
    """The book's variants on one model shape (default: a 7-8B model): MHA, GQA (8 kv
    heads), MQA, MLA (DeepSeek-V2's ratio: ``d_c = 4 d_k``, ``d_R = d_k / 2``), GQA with a
    sliding window, with sinks, and GQA with cross-layer sharing in pairs (CLA2)."""
    gqa = {"num_layers": num_layers, "num_kv_heads": 8, "head_dim": head_dim}
    return {
        "MHA": KVLayout(num_layers, num_heads, head_dim),
        "GQA-8": KVLayout(**gqa),
        "MQA": KVLayout(num_layers, 1, head_dim),
        "MLA": KVLayout(num_layers, kv_latent_dim=4 * head_dim, rope_dim=head_dim // 2),
        "GQA-8 + window": KVLayout(**gqa, window=window),
        "GQA-8 + window + sinks": KVLayout(**gqa, window=window, num_sinks=num_sinks),
        "GQA-8 + CLA2": KVLayout(**gqa, share_every=2),
    }


def slot_usage(lengths, max_len: int, block_size: int) -> dict[str, float]:
    """Memory of a batch of sequences ``lengths`` under two policies, in token slots:
    pre-allocating ``max_len`` per sequence, or paging in blocks of ``block_size``.

    Returns ``used`` (tokens), ``reserved_contiguous``, ``reserved_paged``, and
    ``waste_contiguous`` / ``waste_paged``, the fraction of reserved slots holding no token.
    """
    check_positive_int("max_len", max_len)
    check_positive_int("block_size", block_size)
    try:  # whole token counts: int() would truncate 2.7 to 2
        lengths = [operator.index(n) for n in lengths]
    except TypeError:
        raise TypeError(f"lengths must be whole token counts (ints), got {list(lengths)[:8]!r}") from None
    if not lengths or min(lengths) < 1 or max(lengths) > max_len:
        raise ValueError(f"lengths must be non-empty and lie in [1, max_len={max_len}], got "
                         f"{min(lengths, default=None)} .. {max(lengths, default=None)}")
    used = sum(lengths)
    contiguous = max_len * len(lengths)
    paged = block_size * sum(math.ceil(n / block_size) for n in lengths)
    return {"used": used, "reserved_contiguous": contiguous, "reserved_paged": paged,
            "waste_contiguous": 1 - used / contiguous, "waste_paged": 1 - used / paged}


def request_lengths(num_requests: int, max_len: int = 2048, median: float = 300.0,
                    spread: float = 1.0, seed: int = 0) -> torch.Tensor:
    """Synthetic request lengths (prompt plus answer, in tokens) for measuring cache
    policies: log-normal with the given ``median`` and log-space standard deviation
    ``spread``, clipped to ``[1, max_len]``; most chat requests are short and a few are
    long (a long right tail, as in public chat logs). Seeded: ``(num_requests,)`` int64."""
    check_positive_int("num_requests", num_requests)
    check_tensor_size("num_requests", (num_requests,), torch.float64)
    check_positive_int("max_len", max_len)
    for name, value in (("median", median), ("spread", spread)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
    if median <= 0 or spread < 0:
        raise ValueError(f"median must be > 0 and spread >= 0, got median={median!r}, spread={spread!r}")
    g = torch.Generator().manual_seed(seed)
    logs = math.log(median) + spread * torch.randn(num_requests, generator=g, dtype=torch.float64)
    return logs.exp().round().clamp(1, max_len).long()
