"""Sparse, linear, Linformer and Reformer (LSH) attention against dense attention, d=64,
one head: time and peak memory over N = 4096 ... 32768 (dense) and 16384 ... 131072 (the others), fitted log-log slopes, and the
banded kernel's ratios at N=16384 with a window of 256 (all from the same run)."""

from __future__ import annotations

import torch

from _timing import fitted_exponent, machine, median_seconds, peak_memory_bytes, steady_allocator
from attention_core import scaled_dot_product_attention
from attention_core.linear import linear_attention, linformer_attention, pooling_projection
from attention_core.sparse import lsh_attention, sliding_window_attention

DENSE_LENGTHS = (4096, 8192, 16384, 32768)  # up to 4 GiB of weights
LONG_LENGTHS = (16384, 32768, 65536, 131072)  # O(N) kernels: data beyond the 32 MiB L3 cache
AT = 16384  # where the targets are set
# Below ~16384 the O(N) kernels' arrays fit in the caches; fitting across that boundary
# mixes two memory regimes, so the slopes are fitted at lengths where every kernel
# streams from main memory, as N -> infinity does.


def run(D=64, window=256) -> dict:
    steady_allocator()  # time the kernels, not the page faults of fresh allocations
    torch.manual_seed(0)
    methods = {
        "banded": lambda q, k, v: sliding_window_attention(q, k, v, window),
        "linear": lambda q, k, v: linear_attention(q, k, v),
        "linear_causal": lambda q, k, v: linear_attention(q, k, v, causal=True),
        "linformer": lambda q, k, v: linformer_attention(q, k, v, pooling_projection(128, q.size(-2))),
        "lsh": lambda q, k, v: lsh_attention(q, v, num_buckets=16, chunk_size=64),
        "dense": lambda q, k, v: scaled_dot_product_attention(q, k, v),
    }
    lengths = {name: DENSE_LENGTHS if name == "dense" else LONG_LENGTHS for name in methods}
    inputs = {N: [torch.randn(1, 1, N, D) for _ in range(3)] for N in set(DENSE_LENGTHS + LONG_LENGTHS)}
    seconds, memory = {}, {}
    with torch.no_grad():  # one method at a time over all N: the dense runs' large
        for name, fn in methods.items():  # allocations do not disturb the others' timings
            seconds[name] = [median_seconds(lambda: fn(*inputs[N]), repeats=5) for N in lengths[name]]
        for name, fn in methods.items():
            memory[name] = [peak_memory_bytes(lambda: fn(*inputs[N])) for N in lengths[name]]
    at = {name: lengths[name].index(AT) for name in methods}
    return {"lengths": lengths, "d": D, "window": window, "seconds": seconds,
            "peak_bytes": memory,
            "time_slope": {name: fitted_exponent(lengths[name], s) for name, s in seconds.items()},
            "banded_speedup_at_16384": seconds["dense"][at["dense"]] / seconds["banded"][at["banded"]],
            "banded_memory_saving_at_16384": memory["dense"][at["dense"]] / memory["banded"][at["banded"]],
            "targets": {"banded_speedup_at_16384": 10.0, "banded_memory_saving_at_16384": 20.0,
                        "time_slope_banded": 1.15, "time_slope_linear": 1.15},
            "settings": "banded w=256; linear elu+1; Linformer k=128 (pooling); LSH 16 buckets, chunks of 64, 1 round",
            "machine": machine()}


if __name__ == "__main__":
    r = run()
    print(f"sparse/linear attention, d={r['d']}, window={r['window']} ({r['machine']})")
    print("  fitted time slopes: " + ", ".join(f"{n} {s:.2f}" for n, s in r["time_slope"].items()))
    print(f"  banded at N=16384: {r['banded_speedup_at_16384']:.1f}x faster (target >= 10), "
          f"{r['banded_memory_saving_at_16384']:.1f}x less memory (target >= 20)")
