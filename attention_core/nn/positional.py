"""Chapter 10 (and 11): position information for attention, which by itself ignores order.

Every function that makes a tensor takes ``device=`` and ``dtype=`` (default: float32 on
the CPU); tables are computed in float64 on the CPU, so every device gets the same
values, then moved. :func:`apply_rotary` follows its input ``x``.

Notation (the book's): position ``p``, offset ``Delta``, frequency of dimension pair
``i`` ``theta_i = base**(-2i/D)`` (D = d_model for the sinusoidal encoding, d_k for RoPE;
base 10000 in the papers), RoPE rotation ``R_p``,
ALiBi slope ``lambda_a`` of head ``a``.

Shape legend: T positions, D model width d_model (or head dim d_k for RoPE; even),
H heads, L query length, S key length.

Internal, not re-exported: ``rotary_cos_sin``, RoPE's cos/sin tables, ``rotary_table``, the
same tables at positions ``0 ..`` computed once and kept (what a layer rotates by at every
step), and ``rotate_pairs``, the rotation by given tables. :func:`apply_rotary` is a table
and the rotation together; the in-browser model's export feeds the same tables to ONNX
Runtime and rotates by them in PyTorch (one copy of the angle formula and of the pairing).
"""

from __future__ import annotations

import functools
import math

import torch

from ._checks import (
    check_allocation,
    check_base,
    check_float_dtype,
    check_positive_int,
    check_tensor,
    check_tensor_size,
)

__all__ = ["alibi_bias", "alibi_slopes", "apply_rotary", "ntk_aware_base", "rotary_layout",
           "sinusoidal_encoding", "sinusoidal_shift_matrix"]


def _check_even(name: str, value: int) -> None:
    check_positive_int(name, value)
    if value % 2:
        raise ValueError(f"{name} must be even (dims come in sin/cos pairs), got {value}")


def _frequencies(dim: int, base: float) -> torch.Tensor:
    """The frequencies ``theta_i = base ** (-2i / dim)`` for i = 0 .. dim/2 - 1, in
    float64: ``(dim/2,)``. Shared by the sinusoidal encoding and RoPE."""
    check_base("base", base)
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def sinusoidal_encoding(num_positions: int, d_model: int, base: float = 10000.0, device=None,
                        dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Sinusoidal position encoding of Vaswani et al. (2017): ``(num_positions, d_model)``.

    ``PE[p, 2i] = sin(p * theta_i)`` and ``PE[p, 2i+1] = cos(p * theta_i)``, with
    ``theta_i = base**(-2i/d_model)``: pair ``i`` turns at angular speed ``theta_i``, so
    the wavelengths ``2*pi / theta_i`` grow geometrically from 2*pi towards base*2*pi.
    Returned as ``dtype`` on ``device`` (default: float32 on the CPU).
    """
    check_positive_int("num_positions", num_positions)
    _check_even("d_model", d_model)
    check_float_dtype("dtype", dtype)
    check_allocation("sinusoidal_encoding(num_positions, d_model)", num_positions * d_model, 8)  # in float64
    angles = torch.arange(num_positions, dtype=torch.float64).unsqueeze(1) * _frequencies(
        d_model, base)  # (T, D/2)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (T, D/2, 2)
    return pe.flatten(-2).to(device=device, dtype=dtype)  # (T, D): sin, cos interleaved


def sinusoidal_shift_matrix(k: int, d_model: int, base: float = 10000.0, device=None,
                            dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The rotation ``R_Delta (d_model, d_model)`` for the offset ``Delta = k``, with
    ``PE[p + Delta] = PE[p] @ R_Delta.T`` for every position ``p`` (rows): block-diagonal, one 2x2
    rotation by the angle ``Delta * theta_i`` per (sin, cos) pair ``i``. It is the same
    kind of rotation that RoPE applies (``R_p``), and it is why a model can attend by
    *relative* offset with a linear map of the sinusoidal encoding (Vaswani et al.,
    2017, section 3.5). Returned as ``dtype`` on ``device`` (default: float32 on the CPU).
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k (the offset Delta) must be an int, got {type(k).__name__} {k!r}")
    _check_even("d_model", d_model)
    check_float_dtype("dtype", dtype)
    check_tensor_size("d_model", (d_model, d_model), dtype)  # the (D, D) matrix
    angles = k * _frequencies(d_model, base)  # (D/2,): Delta * theta_i
    cos, sin = angles.cos(), angles.sin()
    blocks = torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2)  # (D/2, 2, 2)
    return torch.block_diag(*blocks).to(device=device, dtype=dtype)  # (D, D)


def _shape_or_type(x) -> str:
    return f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__


def _as_positions(positions, device) -> torch.Tensor:
    """``positions`` (a tensor or a sequence of numbers) as a tensor on ``device``."""
    try:
        positions = torch.as_tensor(positions, device=device)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"positions must be a tensor or a sequence of numbers, got {positions!r}") from None
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"positions must hold numbers, got dtype {positions.dtype}")
    return positions


def rotary_cos_sin(positions: torch.Tensor, dim: int, base: float = 10000.0,
                   dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos``, ``sin (T, dim/2)`` of RoPE's angles ``p * theta_i`` at ``positions (T,)``
    (integers), computed in float64 and rounded to ``dtype``: the tables
    :func:`apply_rotary` rotates by (ONNX Runtime's rotary attention reads the same tables,
    :mod:`attention_core.book.web_llm`)."""
    if not isinstance(positions, torch.Tensor) or positions.dim() != 1:
        raise TypeError(f"positions must be a 1-D tensor (T,), got {_shape_or_type(positions)}")
    _check_even("dim", dim)
    theta = _frequencies(dim, base).to(positions.device)  # (dim/2,): theta_i
    angles = positions.to(torch.float64).unsqueeze(1) * theta  # (T, dim/2): p * theta_i
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotary_table(length: int, dim: int, base: float = 10000.0, dtype: torch.dtype = torch.float32,
                 device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos``, ``sin (T, dim/2)`` at positions ``0 .. T - 1`` for some ``T >= length``:
    :func:`rotary_cos_sin`'s values (each entry is computed alone, so a slice equals the
    tables of its positions), built once per ``(T, dim, base, dtype, device)`` and kept.
    ``T`` is ``length`` rounded up to a power of two (at least 64), so a decoder that grows
    by one token a step rebuilds it only when it doubles. Slice rows ``p0:p1`` for
    positions ``p0 .. p1 - 1``. Under ``torch.export`` or ``torch.compile`` (a symbolic
    ``length``) the table is built in the graph, ``T = length``, and not kept."""
    if torch.compiler.is_compiling():
        return rotary_cos_sin(torch.arange(length, device=device), dim, base, dtype)
    check_positive_int("length", length)
    check_float_dtype("dtype", dtype)
    return _cached_table(max(64, 1 << (length - 1).bit_length()), dim, float(base), dtype,
                         torch.device("cpu") if device is None else torch.device(device))


@functools.lru_cache(maxsize=32)
def _cached_table(length: int, dim: int, base: float, dtype: torch.dtype,
                  device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    # ordinary tensors even when first asked for under inference_mode (training reuses them)
    with torch.inference_mode(False), torch.no_grad():
        return rotary_cos_sin(torch.arange(length, device=device), dim, base, dtype)


def apply_rotary(x: torch.Tensor, positions: torch.Tensor | None = None,
                 base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding (RoPE, Su et al. 2021) of ``x (..., T, D)``.

    Dimensions are paired as in the paper: at position ``p``, ``R_p`` rotates
    ``(x[2i], x[2i+1])`` by the angle ``p * theta_i``, ``theta_i = base**(-2i/D)``.
    Because rotations compose, the score ``apply_rotary(q)[p] . apply_rotary(k)[p']``
    depends on the offset ``p - p'`` only.
    ``positions`` (T,) defaults to ``0 .. T-1``. The result has ``x``'s device and
    dtype; ``positions`` are moved to ``x``'s device.
    """
    check_tensor("x", x, min_dim=2)
    T, D = x.shape[-2:]
    _check_even("x.shape[-1]", D)
    if positions is None:  # 0 .. T-1: rows of the kept table
        cos, sin = rotary_table(T, D, base, x.dtype, x.device)
        return rotate_pairs(x, cos[:T], sin[:T])
    positions = _as_positions(positions, x.device)
    if positions.shape != (T,):
        raise ValueError(f"positions must have shape ({T},) to match x {tuple(x.shape)}, "
                         f"got {tuple(positions.shape)}")
    return rotate_pairs(x, *rotary_cos_sin(positions, D, base, x.dtype))


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x (..., T, D)`` with each pair ``(x[2i], x[2i+1])`` of row ``t`` rotated by the angle
    whose cosine and sine are ``cos[t, i]``, ``sin[t, i]`` (``(T, D/2)`` each, from
    :func:`rotary_cos_sin`): RoPE given its tables."""
    check_tensor("x", x, min_dim=2)
    half = (x.size(-2), x.size(-1) // 2)
    for name, table in (("cos", cos), ("sin", sin)):
        if not isinstance(table, torch.Tensor) or tuple(table.shape) != half:
            raise ValueError(f"{name} must be a tensor of shape {half} (T, D/2) to rotate x "
                             f"{tuple(x.shape)}, got {_shape_or_type(table)}")
    if _as_complex_ok(x, cos):
        # a pair is a complex number x[2i] + i x[2i+1]; turning it is one product with
        # cos + i sin: the two lines below in one pass (bit for bit but where the product
        # rounds a multiply-add once, a few units in the last place)
        turned = torch.view_as_complex(x.unflatten(-1, (-1, 2))) * torch.complex(cos, sin)  # (..., T, D/2)
        return torch.view_as_real(turned).flatten(-2)  # (..., T, D)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., T, D/2) each
    rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)
    return rotated.flatten(-2)  # (..., T, D)


def _as_complex_ok(x: torch.Tensor, table: torch.Tensor) -> bool:
    """Whether ``x``'s pairs can be read as complex numbers without a copy: float32 or
    float64 (half-precision complex is barely supported), tables of the same dtype, and
    each pair side by side in memory at an even offset (``torch.view_as_complex``'s rule)."""
    return (x.dtype in (torch.float32, torch.float64) and table.dtype == x.dtype
            and x.stride(-1) == 1 and x.storage_offset() % 2 == 0
            and all(stride % 2 == 0 for stride in x.stride()[:-1]))


def rotary_layout(weight: torch.Tensor, num_heads: int, to: str) -> torch.Tensor:
    """The rows of a query or key projection ``weight (H * d_k, ...)`` (PyTorch's
    ``(out, in)``, or its bias ``(H * d_k,)``) reordered within each of the ``num_heads``
    heads from one pairing of RoPE's dimensions to the other; same shape, device and dtype.

    ``to="interleaved"``: from HuggingFace's layout, which rotates row ``i`` of a head with
    row ``i + d_k/2``, to the book's, which rotates row ``2i`` with ``2i + 1`` (the pairing
    of :func:`apply_rotary`, and of llama.cpp's GGUF files): row ``i`` goes to ``2i`` and
    row ``i + d_k/2`` to ``2i + 1``. ``to="half_split"`` is the inverse. Queries and keys
    made with the reordered rows and rotated the new way give the same scores ``q . k`` as
    the original rows rotated the old way.
    """
    check_tensor("weight", weight)
    check_positive_int("num_heads", num_heads)
    if not isinstance(to, str) or to not in ("interleaved", "half_split"):
        raise ValueError(f"to must be 'interleaved' or 'half_split', got {to!r}")
    rows = weight.size(0)
    if rows == 0 or rows % (2 * num_heads):
        raise ValueError(f"weight's {rows} rows must split into {num_heads} heads of even width")
    half = rows // num_heads // 2  # d_k / 2
    split = (2, half) if to == "interleaved" else (half, 2)  # the layout it comes from
    w = weight.reshape(num_heads, *split, *weight.shape[1:])  # (H, 2, d_k/2, ...) or (H, d_k/2, 2, ...)
    return w.transpose(1, 2).reshape(weight.shape)  # the other one, (H * d_k, ...)


def ntk_aware_base(base: float, scale: float, dim: int) -> float:
    """The RoPE base for a context ``scale`` times longer by "NTK-aware" scaling:
    ``base * scale ** (dim / (dim - 2))`` (bloc97, 2023; written out by Peng et al., 2023,
    YaRN, section 3.1). With it the fastest pair still turns by 1 radian a position,
    ``theta_0 = 1``, and the slowest turns ``scale`` times slower, so the longest new
    sequence sweeps the slowest pair through the angles it swept in training.
    Position interpolation (Chen et al., 2023) instead keeps the base and divides every
    position by ``scale``: ``apply_rotary(x, positions / scale)``.
    """
    check_base("base", base)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not (
            math.isfinite(scale) and scale >= 1):
        raise ValueError(f"scale must be a finite number >= 1 (how many times longer), got {scale!r}")
    _check_even("dim", dim)
    if dim < 4:
        raise ValueError(f"dim must be at least 4 (two rotated pairs), got {dim}")
    return base * scale ** (dim / (dim - 2))


def alibi_slopes(num_heads: int, device=None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """ALiBi's per-head slopes (Press et al., 2021): ``(num_heads,)``.

    For ``h`` heads, a power of two, the slope of head ``a = 0 .. h-1`` is
    ``lambda_a = 2**(-8(a+1)/h)``: the geometric sequence ``2**(-8/h), 2**(-16/h), ...,
    2**-8``. Otherwise the paper takes the slopes of the nearest smaller power of two
    and adds every other slope of the next one.
    Returned as ``dtype`` on ``device`` (default: float32 on the CPU).
    """
    check_positive_int("num_heads", num_heads)
    check_float_dtype("dtype", dtype)

    def power_of_two(n: int) -> list[float]:
        return [2 ** (-8 * (a + 1) / n) for a in range(n)]  # lambda_a, head a

    closest = 2 ** (num_heads.bit_length() - 1)
    slopes = power_of_two(closest)
    if closest < num_heads:
        slopes += power_of_two(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=dtype, device=device)


def alibi_bias(num_heads: int, L: int, S: int | None = None, device=None,
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """ALiBi's additive bias ``(num_heads, L, S)``: ``-lambda_a * |i - j|`` for head ``a``,
    a penalty growing linearly with the distance between query ``i`` and key ``j``
    (queries aligned to the end when S > L). Pass it as a float ``attn_mask``.

    The paper uses it with a causal mask, where only ``j <= i`` survives and the bias
    is ``-lambda_a * (i - j)``; the absolute value makes it usable without one too.

    Built on ``device`` (default: the CPU; pass the scores' device, a kernel refuses a
    mask on another one) and returned as ``dtype`` (default float32; the product is
    taken in float32 so float16/bfloat16 round only once).
    """
    check_positive_int("L", L)
    S = L if S is None else S
    check_positive_int("S", S)
    check_float_dtype("dtype", dtype)
    check_positive_int("num_heads", num_heads)
    check_tensor_size("L" if L >= S else "S", (num_heads, L, S))  # the (H, L, S) bias
    i = torch.arange(S - L, S, device=device).unsqueeze(1)  # (L, 1): absolute query positions
    j = torch.arange(S, device=device).unsqueeze(0)  # (1, S)
    distance = (i - j).abs().float()  # (L, S)
    slopes = alibi_slopes(num_heads, device=device).view(-1, 1, 1)  # (H, 1, 1): lambda_a, float32
    return (-slopes * distance).to(dtype)  # (H, L, S)
