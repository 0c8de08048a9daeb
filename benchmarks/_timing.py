"""Shared helpers: the package's own timing and memory measurement, and the machine."""

from __future__ import annotations

import os
import platform

import torch

from attention_core.measure import median_seconds, peak_memory_bytes  # noqa: F401


def machine() -> str:
    return (f"{os.cpu_count()} cores, {platform.machine()}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads")
