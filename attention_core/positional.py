"""Position information for attention, which by itself ignores order.

Shape legend: T positions, D model or head dim (even).
"""

from __future__ import annotations

import torch

from ._checks import check_positive_int, check_tensor


def _check_even(name: str, value: int) -> None:
    check_positive_int(name, value)
    if value % 2:
        raise ValueError(f"{name} must be even (dims come in sin/cos pairs), got {value}")


def _frequencies(dim: int, base: float) -> torch.Tensor:
    """``base ** (-2i / dim)`` for i = 0 .. dim/2 - 1, in float64: ``(dim/2,)``."""
    if not base > 1:
        raise ValueError(f"base must be > 1, got {base!r}")
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def sinusoidal_encoding(num_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """Sinusoidal position encoding of Vaswani et al. (2017): ``(num_positions, d_model)``.

    ``PE[p, 2i] = sin(p / base**(2i/d_model))`` and ``PE[p, 2i+1] = cos(...)``; the
    wavelengths grow geometrically from 2*pi to base*2*pi.
    """
    check_positive_int("num_positions", num_positions)
    _check_even("d_model", d_model)
    angles = torch.arange(num_positions, dtype=torch.float64).unsqueeze(1) * _frequencies(
        d_model, base)  # (T, D/2)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (T, D/2, 2)
    return pe.flatten(-2).float()  # (T, D): sin, cos interleaved


def apply_rotary(x: torch.Tensor, positions: torch.Tensor | None = None,
                 base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding (RoPE, Su et al. 2021) of ``x (..., T, D)``.

    Dimensions are paired as in the paper: ``(x[2i], x[2i+1])`` is rotated by the
    angle ``p * base**(-2i/D)`` at position ``p``. Because rotations compose,
    ``apply_rotary(q)[m] . apply_rotary(k)[n]`` depends on ``m - n`` only.
    ``positions`` (T,) defaults to ``0 .. T-1``.
    """
    check_tensor("x", x, min_dim=2)
    T, D = x.shape[-2:]
    _check_even("x.shape[-1]", D)
    if positions is None:
        positions = torch.arange(T, device=x.device)
    positions = torch.as_tensor(positions, device=x.device)
    if positions.shape != (T,):
        raise ValueError(f"positions must have shape ({T},) to match x {tuple(x.shape)}, "
                         f"got {tuple(positions.shape)}")
    angles = positions.to(torch.float64).unsqueeze(1) * _frequencies(D, base).to(x.device)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (T, D/2)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., T, D/2) each
    rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)
    return rotated.flatten(-2)  # (..., T, D)
