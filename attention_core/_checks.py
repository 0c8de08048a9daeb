"""Argument checks shared by the package: each raises before any computation and
names the argument and what it got."""

from __future__ import annotations

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_tensor(name: str, x, min_dim: int = 1) -> None:
    """Raise unless ``x`` is a floating-point tensor with at least ``min_dim`` dims."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.dim() < min_dim:
        raise ValueError(
            f"{name} must have at least {min_dim} dims, got shape {tuple(x.shape)}"
        )


def check_positive_int(name: str, value, minimum: int = 1) -> None:
    """Raise unless ``value`` is an int (not bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def broadcast_or_raise(name: str, shape, target, what: str) -> None:
    """Raise unless ``shape`` broadcasts to exactly ``target``."""
    try:
        ok = torch.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"{name} of shape {tuple(shape)} does not broadcast to {what} {tuple(target)}"
        )
