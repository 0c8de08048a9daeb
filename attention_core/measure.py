"""Measuring time and memory on this machine, the same way in chapters and benchmarks.

Times are medians of repeats (robust to the odd slow run); memory is the peak growth of
the process's resident memory while a call runs, sampled from ``/proc`` (Linux).
"""

from __future__ import annotations

import gc
import threading
import time
from pathlib import Path


def median_seconds(fn, repeats: int = 5, warmup: int = 1) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs, after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def _rss_bytes() -> int:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096


def peak_memory_bytes(fn, interval: float = 0.0005) -> int:
    """How far the resident memory rises above its starting level while ``fn()`` runs.

    A thread samples ``/proc/self/statm`` every ``interval`` seconds. Large tensors are
    allocated and freed straight from the operating system, so this sees them; calls
    shorter than a few milliseconds may be under-counted.
    """
    if not Path("/proc/self/statm").exists():
        raise RuntimeError("peak_memory_bytes reads /proc/self/statm, which needs Linux")
    gc.collect()
    baseline = peak = _rss_bytes()
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss_bytes())
            time.sleep(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        fn()
    finally:
        done.set()
        sampler.join()
    return max(peak, _rss_bytes()) - baseline
