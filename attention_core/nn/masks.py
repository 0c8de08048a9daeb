"""Chapter 5 (and 8, 9, 10, 11): boolean attention masks. One convention everywhere:
**True = may attend** (PyTorch's ``F.scaled_dot_product_attention``). Combine masks with
``&``.

Every builder takes ``device=`` (default: the CPU, or for :func:`padding_mask` the
device of ``lengths``): build the mask where the scores live, since a kernel refuses a
mask on another device than its inputs.

Shape legend: B batch, L query length, S key length. A mask is the book's M:
``M[i, j]`` is True where query ``i`` may attend to key ``j``.
"""

from __future__ import annotations

import torch

from ._checks import check_allocation, check_positive_int, check_tensor_size

__all__ = ["causal_mask", "padding_mask", "sliding_window_mask"]


def causal_mask(L: int, S: int | None = None, device=None) -> torch.Tensor:
    """Causal mask ``(L, S)``: query ``i`` may attend to key ``j`` when ``j <= i + (S - L)``.

    With ``S == L`` (the default) that is ``j <= i``: no token sees the future. With
    ``S > L`` the queries are the *last* ``L`` positions of the ``S`` keys, as when
    decoding with a KV cache (PyTorch calls this alignment ``causal_lower_right``).
    ``device``: where to build it (default: the CPU).
    """
    check_positive_int("L", L)
    S = L if S is None else S
    check_positive_int("S", S)
    check_allocation("causal_mask(L, S)", L * S, 1)
    i = torch.arange(L, device=device).unsqueeze(1)  # (L, 1)
    j = torch.arange(S, device=device).unsqueeze(0)  # (1, S)
    return j <= i + (S - L)  # (L, S)


def padding_mask(lengths, S: int, device=None) -> torch.Tensor:
    """Padding mask ``(B, 1, S)``: True where key ``j < lengths[b]`` (a real token).

    The middle axis broadcasts over queries; add a head axis with ``unsqueeze(1)``
    to use it with multi-head attention, ``(B, 1, 1, S)``. ``device`` defaults to the
    device of ``lengths`` (the CPU for a list).
    """
    check_positive_int("S", S)
    try:
        lengths = torch.as_tensor(lengths)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"lengths must be a 1-D integer sequence, got {type(lengths).__name__}") from None
    check_tensor_size("S", (lengths.numel(), S), torch.bool)
    if lengths.dim() != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(
            f"lengths must be a 1-D integer sequence, got shape {tuple(lengths.shape)} "
            f"and dtype {lengths.dtype}"
        )
    # A meta tensor has no values to check (it only carries shapes and dtypes).
    if len(lengths) and lengths.device.type != "meta" and (lengths.min() < 0 or lengths.max() > S):
        raise ValueError(f"lengths must lie in [0, S={S}], got {lengths.tolist()}")
    if device is not None:
        lengths = lengths.to(device)
    j = torch.arange(S, device=lengths.device)  # (S,)
    return (j < lengths.unsqueeze(1)).unsqueeze(1)  # (B, 1, S)


def sliding_window_mask(L: int, window: int, causal: bool = False, device=None) -> torch.Tensor:
    """Local (banded) mask ``(L, L)``: True where ``|i - j| < window``.

    With ``causal=True`` only the past part of the band: ``0 <= i - j < window``.
    ``window=1`` is the diagonal: each token sees only itself. ``device``: where to
    build it (default: the CPU).
    """
    check_positive_int("L", L)
    check_positive_int("window", window)
    check_allocation("sliding_window_mask(L)", L * L, 1)
    i = torch.arange(L, device=device).unsqueeze(1)  # (L, 1)
    j = torch.arange(L, device=device).unsqueeze(0)  # (1, L)
    offset = i - j  # (L, L): how far key j lies behind query i
    if causal:
        return (offset >= 0) & (offset < window)
    return offset.abs() < window
