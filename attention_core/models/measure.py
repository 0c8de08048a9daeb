"""Chapters 3, 8, 9, 11 and 14: measuring time and memory on this machine, the same way in
the chapters and in the benchmarks. :func:`one_thread` is for the caller to choose (a
chapter, a benchmark): no library function switches threads on its own.

Times are medians of repeats (robust to the odd slow run) or, for a trend measured while
other programs run, minima (:func:`min_seconds`); memory is the peak growth of
the process's resident memory while a call runs, sampled from ``/proc`` (Linux).
"""

from __future__ import annotations

import ctypes
import gc
import math
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import torch

from ..nn._checks import check_positive_int, check_positive_number

__all__ = ["one_thread", "median_seconds", "min_seconds", "min_cpu_seconds", "peak_memory_bytes",
           "fitted_exponent"]


@contextmanager
def one_thread():
    """Run the ``with`` block on one CPU thread, then restore PyTorch's thread count.

    A book build executes two chapters at once on two cores. With two threads each, the
    kernels' OpenMP barriers wait for a core the other chapter holds, and a small
    operation can take ten times as long; on one thread its time is steady. Chapters that
    time or train small models run under it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _check_callable(fn) -> None:
    if not callable(fn):
        raise TypeError(f"fn must be a function to call with no arguments, got {type(fn).__name__}")


def _wait_for_the_gpu() -> None:
    """Wait for queued CUDA work, where this process has used CUDA: a GPU call returns
    once its work is queued, so a timer read straight after it measures the launch only."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _run_times(fn, repeats: int, warmup: int, clock=time.perf_counter) -> list[float]:
    """Seconds of ``clock`` (wall-clock by default) for each of ``repeats`` runs of ``fn()``,
    after ``warmup`` runs; CUDA work ``fn`` queues counts (waited for before each reading)."""
    _check_callable(fn)
    check_positive_int("repeats", repeats)
    check_positive_int("warmup", warmup, minimum=0)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        _wait_for_the_gpu()
        start = clock()
        fn()
        _wait_for_the_gpu()
        times.append(clock() - start)
    return times


def median_seconds(fn, repeats: int = 5, warmup: int = 1) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs, after ``warmup`` runs."""
    return sorted(_run_times(fn, repeats, warmup))[repeats // 2]


def min_seconds(fn, repeats: int = 5, warmup: int = 1) -> float:
    """Fastest wall-clock seconds of ``fn()`` over ``repeats`` runs, after ``warmup`` runs:
    other programs on the machine only ever add time, so the fastest run is the one they
    disturbed least (the right statistic for a trend measured on a busy machine)."""
    return min(_run_times(fn, repeats, warmup))


def min_cpu_seconds(fn, repeats: int = 5, warmup: int = 1) -> float:
    """Fewest CPU seconds of the calling thread (``time.thread_time``) that ``fn()`` took over
    ``repeats`` runs, after ``warmup`` runs. Other programs add far less to a thread's CPU
    time than to its wall-clock time, though they still slow it through shared caches and
    memory, and the minimum of repeats removes most of that. So on a busy machine this is the
    steadier measure of the work a call does on one thread (run it under :func:`one_thread`:
    threads that torch starts are not counted). Memory stalls count; time spent waiting for
    a GPU does not."""
    return min(_run_times(fn, repeats, warmup, clock=time.thread_time))


def _rss_bytes() -> int:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096


def _release_free_memory() -> None:
    """Hand memory that was freed but kept by the C allocator back to the operating
    system (glibc's ``malloc_trim``), so a new allocation shows up as new RSS."""
    with suppress(OSError, AttributeError):  # not glibc: measurements may under-count reuse
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def peak_memory_bytes(fn, interval: float = 0.0005) -> int:
    """How far the resident memory rises above its starting level while ``fn()`` runs.

    A thread samples ``/proc/self/statm`` every ``interval`` seconds. Freed memory is
    first handed back to the operating system, so allocations during the call show up;
    calls shorter than a few milliseconds may be under-counted.
    """
    _check_callable(fn)
    check_positive_number("interval", interval)
    if not Path("/proc/self/statm").exists():
        raise RuntimeError("peak_memory_bytes reads /proc/self/statm, which needs Linux")
    gc.collect()
    _release_free_memory()
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


def fitted_exponent(sizes, values) -> float:
    """The exponent ``b`` of a least-squares fit ``values ~ a * sizes^b`` (the slope of
    the line on a log-log plot): about 1 for linear cost, 2 for quadratic."""
    if len(sizes) != len(values) or len(sizes) < 2:
        raise ValueError(f"need at least two (size, value) pairs of equal length, got "
                         f"{len(sizes)} sizes and {len(values)} values")
    for name, numbers in (("sizes", sizes), ("values", values)):
        if not all(math.isfinite(float(x)) and float(x) > 0 for x in numbers):
            raise ValueError(f"{name} must be finite and positive (their logarithms are fitted), got "
                             f"{list(numbers)}")
    if len(set(map(float, sizes))) < 2:
        raise ValueError(f"sizes must hold at least two different sizes (a slope needs them), "
                         f"got {list(sizes)}")
    xs, ys = [math.log(float(x)) for x in sizes], [math.log(float(y)) for y in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
