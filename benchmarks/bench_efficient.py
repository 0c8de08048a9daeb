"""Sparse and linear attention against dense attention, d=64, one head: time and peak
memory over N = 4096 ... 32768, fitted log-log slopes, and the ratios at N=16384 with a
window of 256 (all from the same run)."""

from __future__ import annotations

import numpy as np
import torch

from _timing import machine, median_seconds, peak_memory_bytes
from attention_core import scaled_dot_product_attention
from attention_core.linear import linear_attention
from attention_core.sparse import sliding_window_attention

LENGTHS = (4096, 8192, 16384, 32768)  # all beyond the L2 cache: one memory regime
AT = LENGTHS.index(16384)  # where the targets are set


def slope(lengths, values) -> float:
    """Exponent b of a least-squares fit values ~ a * N^b."""
    return float(np.polyfit(np.log(lengths), np.log(values), 1)[0])


def run(D=64, window=256) -> dict:
    torch.manual_seed(0)
    methods = {
        "banded": lambda q, k, v: sliding_window_attention(q, k, v, window),
        "linear": lambda q, k, v: linear_attention(q, k, v),
        "linear_causal": lambda q, k, v: linear_attention(q, k, v, causal=True),
        "dense": lambda q, k, v: scaled_dot_product_attention(q, k, v),
    }
    inputs = {N: [torch.randn(1, 1, N, D) for _ in range(3)] for N in LENGTHS}
    seconds, memory = {}, {}
    with torch.no_grad():  # one method at a time over all N: the dense runs' large
        for name, fn in methods.items():  # allocations do not disturb the others' timings
            seconds[name] = [median_seconds(lambda: fn(*inputs[N]), repeats=5) for N in LENGTHS]
        for name, fn in methods.items():
            memory[name] = [peak_memory_bytes(lambda: fn(*inputs[N])) for N in LENGTHS]
    return {"lengths": list(LENGTHS), "d": D, "window": window, "seconds": seconds,
            "peak_bytes": memory,
            "time_slope": {name: slope(LENGTHS, s) for name, s in seconds.items()},
            "banded_speedup_at_16384": seconds["dense"][AT] / seconds["banded"][AT],
            "banded_memory_saving_at_16384": memory["dense"][AT] / memory["banded"][AT],
            "targets": {"banded_speedup_at_16384": 10.0, "banded_memory_saving_at_16384": 20.0,
                        "time_slope_banded": 1.15, "time_slope_linear": 1.15},
            "machine": machine()}


if __name__ == "__main__":
    r = run()
    print(f"sparse/linear attention, d={r['d']}, window={r['window']} ({r['machine']})")
    print("  fitted time slopes: " + ", ".join(f"{n} {s:.2f}" for n, s in r["time_slope"].items()))
    print(f"  banded at N=16384: {r['banded_speedup_at_16384']:.1f}x faster (target >= 10), "
          f"{r['banded_memory_saving_at_16384']:.1f}x less memory (target >= 20)")
