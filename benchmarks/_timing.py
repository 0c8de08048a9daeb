"""Shared timing helpers: median of repeats, and the machine a figure was measured on."""

from __future__ import annotations

import os
import platform
import time

import torch


def median_seconds(fn, repeats: int = 15, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def machine() -> str:
    return (f"{os.cpu_count()} cores, {platform.machine()}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads")
