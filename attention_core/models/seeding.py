"""Chapters 3, 4, 6, 7 and 9: building a model from a seed without touching the caller's
random numbers.

PyTorch's layers draw their initial weights from the global generator and take no
``generator`` argument, so a library function that builds a seeded model seeds that
generator only inside :func:`seeded`, which puts it back as it was afterwards.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

__all__ = ["seeded"]


@contextmanager
def seeded(seed: int):
    """Run the ``with`` block with torch's global CPU generator as ``torch.manual_seed(seed)``
    leaves it, then restore the generator's earlier state: layers built inside get the same
    weights as in a script that seeded, and the caller's random stream is left alone.

    The generator is shared by the whole process: don't draw from it in another thread
    while the block runs."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__} {seed!r}")
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        yield
