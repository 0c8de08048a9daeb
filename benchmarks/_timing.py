"""Shared helpers: the package's own timing and memory measurement, and the machine."""

from __future__ import annotations

import os
import platform

import torch

from attention_core.models.measure import fitted_exponent, median_seconds, peak_memory_bytes  # noqa: F401


def machine() -> str:
    return (f"{os.cpu_count()} cores, {platform.machine()}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads")


def steady_allocator() -> None:
    """Keep freed memory in the process (glibc ``mallopt``) for the rest of the run.

    By default glibc hands blocks above its mmap threshold (up to 32 MiB) back to the
    system on ``free`` and faults fresh, zeroed pages in on the next call, so an O(N)
    kernel's time per token jumps once its arrays cross that threshold (measured: the
    fitted slope of linear attention 1.3 instead of 1.0). With a 64 MiB threshold and no
    automatic trimming, repeated calls reuse their memory and the timing measures the
    computation. ``peak_memory_bytes`` still trims explicitly before each measurement.
    """
    import ctypes

    libc = ctypes.CDLL("libc.so.6")
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # from <malloc.h>
    libc.mallopt(M_MMAP_THRESHOLD, 64 * 2**20)
    libc.mallopt(M_TRIM_THRESHOLD, 2**30)
