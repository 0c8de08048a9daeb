"""Sparse, linear, Linformer and Reformer (LSH) attention against dense attention, d=64,
one head: time and peak memory over N = 4096 ... 32768 (dense) and 16384 ... 131072 (the others),
fitted log-log slopes, and the banded kernel's ratios at N=16384 with a window of 256 (all from
the same run)."""

from __future__ import annotations

from functools import partial

import torch

from _timing import fitted_exponent, machine, median_seconds, peak_memory_bytes, steady_allocator
from attention_core import ATTENTION_FUNCTIONS
from attention_core.nn.linear_attention import pooling_projection

DENSE_LENGTHS = (4096, 8192, 16384, 32768)  # up to 4 GiB of weights
LONG_LENGTHS = (16384, 32768, 65536, 131072)  # O(N) kernels: data beyond the 32 MiB L3 cache
AT = 16384  # where the targets are set
# Below ~16384 the O(N) kernels' arrays fit in the caches; fitting across that boundary
# mixes two memory regimes, so the slopes are fitted at lengths where every kernel
# streams from main memory, as N -> infinity does.


def kernel(name: str, N: int, window: int):
    """The registry's kernel behind a result name, its options fixed for length N."""
    registry_name, options = {
        "banded": ("sliding_window", {"window": window}),
        "linear": ("linear", {}),
        "linear_causal": ("linear", {"is_causal": True}),
        "linformer": ("linformer", {"key_projection": pooling_projection(128, N)}),
        "lsh": ("lsh", {"num_buckets": 16, "chunk_size": 64}),
        "dense": ("eager", {}),
    }[name]
    return partial(ATTENTION_FUNCTIONS[registry_name], **options)


def run(D=64, window=256) -> dict:
    steady_allocator()  # time the kernels, not the page faults of fresh allocations
    torch.manual_seed(0)
    methods = ("banded", "linear", "linear_causal", "linformer", "lsh", "dense")
    lengths = {name: DENSE_LENGTHS if name == "dense" else LONG_LENGTHS for name in methods}
    # queries = keys (one shared tensor): Reformer's LSH needs them shared, the others don't care
    inputs = {}
    for N in sorted(set(DENSE_LENGTHS + LONG_LENGTHS)):
        qk, v = torch.randn(1, 1, N, D), torch.randn(1, 1, N, D)
        inputs[N] = (qk, qk, v)
    seconds, memory = {}, {}
    with torch.no_grad():  # one method at a time over all N: the dense runs' large
        for name in methods:  # allocations do not disturb the others' timings
            fns = {N: kernel(name, N, window) for N in lengths[name]}
            seconds[name] = [median_seconds(lambda fn=fns[N], args=inputs[N]: fn(*args), repeats=5)
                             for N in lengths[name]]
        for name in methods:
            fns = {N: kernel(name, N, window) for N in lengths[name]}
            memory[name] = [peak_memory_bytes(lambda fn=fns[N], args=inputs[N]: fn(*args))
                            for N in lengths[name]]
    at = {name: lengths[name].index(AT) for name in methods}
    return {"lengths": lengths, "d": D, "window": window, "seconds": seconds,
            "peak_bytes": memory,
            "time_slope": {name: fitted_exponent(lengths[name], s) for name, s in seconds.items()},
            "banded_speedup_at_16384": seconds["dense"][at["dense"]] / seconds["banded"][at["banded"]],
            "banded_memory_saving_at_16384": memory["dense"][at["dense"]] / memory["banded"][at["banded"]],
            "targets": {"banded_speedup_at_16384": 10.0, "banded_memory_saving_at_16384": 20.0,
                        "time_slope_banded": 1.15, "time_slope_linear": 1.15},
            "settings": "banded w=256; linear elu+1; Linformer k=128 (pooling); "
                        "LSH 16 buckets, chunks of 64, 1 round",
            "machine": machine()}


if __name__ == "__main__":
    r = run()
    print(f"sparse/linear attention, d={r['d']}, window={r['window']} ({r['machine']})")
    print("  fitted time slopes: " + ", ".join(f"{n} {s:.2f}" for n, s in r["time_slope"].items()))
    print(f"  banded at N=16384: {r['banded_speedup_at_16384']:.1f}x faster (target >= 10), "
          f"{r['banded_memory_saving_at_16384']:.1f}x less memory (target >= 20)")
