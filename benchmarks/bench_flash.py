"""Tiled (FlashAttention-style) attention at L=8192 against naive attention and PyTorch's
fused kernel: peak memory growth and median time, as ratios from the same run."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from _timing import machine, median_seconds, peak_memory_bytes
from attention_core import ATTENTION_FUNCTIONS


def run(B=1, H=4, L=8192, D=64, block=512) -> dict:
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, L, D) for _ in range(3))
    kernels = {"tiled": partial(ATTENTION_FUNCTIONS["flash"], block_q=block, block_k=block),
               "naive": ATTENTION_FUNCTIONS["eager"],
               "fused": F.scaled_dot_product_attention}  # PyTorch's own, the yardstick
    calls = {name: partial(fn, q, k, v) for name, fn in kernels.items()}
    with torch.no_grad():
        memory = {name: peak_memory_bytes(fn) for name, fn in calls.items()}
        seconds = {name: median_seconds(fn, repeats=5) for name, fn in calls.items()}
    return {"shape": [B, H, L, D], "block": block, "seconds": seconds, "peak_bytes": memory,
            "memory_ratio_vs_naive": memory["tiled"] / memory["naive"],
            "time_ratio_vs_naive": seconds["tiled"] / seconds["naive"],
            "time_ratio_vs_fused": seconds["tiled"] / seconds["fused"],
            "targets": {"memory_ratio_vs_naive": 0.1, "time_ratio_vs_naive": 1.0,
                        "time_ratio_vs_fused": 3.0},
            "machine": machine()}


if __name__ == "__main__":
    r = run()
    print(f"tiled attention, B,H,L,D={r['shape']}, {r['block']}x{r['block']} tiles ({r['machine']})")
    print(f"  peak memory vs naive: {r['memory_ratio_vs_naive']:.3f} (target <= 0.1)")
    print(f"  time vs naive:        {r['time_ratio_vs_naive']:.2f} (target <= 1)")
    print(f"  time vs fused:        {r['time_ratio_vs_fused']:.2f} (target <= 3)")
