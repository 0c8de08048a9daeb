"""Every chapter: the argument checks shared by the package; each raises before any
computation and names the argument and what it got."""

from __future__ import annotations

import math

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


def check_token_ids(name: str, ids, vocab_size: int, device, max_len: int | None = None) -> None:
    """Raise unless ``ids`` is an integer tensor ``(B, T)``, ``1 <= T`` (``<= max_len`` if
    given), of token ids in ``[0, vocab_size)`` on ``device``: an id out of range would index
    past an embedding table (a raw IndexError, or garbage on a GPU)."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a tensor of token ids, got {type(ids).__name__}")
    if ids.dim() != 2 or 0 in ids.shape or (max_len is not None and ids.size(1) > max_len):
        limit = "" if max_len is None else f" <= {max_len}"
        raise ValueError(f"{name} must have shape (B, T) with B >= 1 and 1 <= T{limit}, "
                         f"got {tuple(ids.shape)}")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    check_device(name, ids, device, "the model's parameters")
    low, high = (0, 0) if ids.device.type == "meta" else (ids.min().item(), ids.max().item())
    if low < 0 or high >= vocab_size:
        raise ValueError(f"{name} must lie in [0, vocab_size={vocab_size}), got ids from {low} to {high}")


def check_float_dtype(name: str, dtype) -> None:
    """Raise unless ``dtype`` is one of the floating-point dtypes in :data:`FLOAT_DTYPES`."""
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be a floating-point torch.dtype {FLOAT_DTYPES}, got {dtype!r}")


def check_positive_int(name: str, value, minimum: int = 1) -> None:
    """Raise unless ``value`` is an int (not bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def check_dropout(name: str, value) -> None:
    """Raise unless ``value`` is a number (not a bool) in ``[0, 1)``: a dropout probability."""
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and 0.0 <= value < 1.0):
        raise ValueError(f"{name} must lie in [0, 1), got {value!r}")


def check_base(name: str, base) -> None:
    """Raise unless ``base`` is a number > 1: the base of sinusoidal and rotary frequencies."""
    if isinstance(base, bool) or not (isinstance(base, (int, float)) and base > 1):
        raise ValueError(f"{name} must be > 1, got {base!r}")


def check_factory_dtype(dtype) -> None:
    """Raise unless the ``dtype`` given for a module's parameters is None or floating-point."""
    if dtype is not None:
        check_float_dtype("dtype", dtype)


def broadcasts_to(shape, target) -> bool:
    """Whether ``shape`` broadcasts to exactly ``target``: aligned from the right, each of
    its dims is 1 or the target's, and it has no more dims (``torch.broadcast_to``'s rule,
    without building a tensor or calling ``torch.broadcast_shapes``, which is slow)."""
    shape, target = tuple(shape), tuple(target)
    return len(shape) <= len(target) and all(s in (1, t) for s, t in zip(reversed(shape), reversed(target)))


def broadcast_or_raise(name: str, shape, target, what: str) -> None:
    """Raise unless ``shape`` broadcasts to exactly ``target``."""
    if not broadcasts_to(shape, target):
        raise ValueError(
            f"{name} of shape {tuple(shape)} does not broadcast to {what} {tuple(target)}"
        )


def check_device(name: str, x: torch.Tensor, device, what: str = "the inputs") -> None:
    """Raise unless tensor ``x`` lies on ``device`` (the device of ``what``).

    PyTorch's own error for mixed devices comes from deep inside an operation and
    does not say which argument is on the wrong one; this one does, before any work.
    """
    device = torch.device(device)
    if x.device != device:
        raise ValueError(
            f"{name} is on device {x.device} but must be on {device}, the device of {what}; "
            f"move it with {name}.to({str(device)!r})"
        )


def check_dtype(name: str, x: torch.Tensor, dtype, what: str) -> None:
    """Raise unless tensor ``x`` has ``dtype`` (the dtype of ``what``).

    PyTorch's own error for mixed dtypes ("mat1 and mat2 must have the same dtype") names
    no argument; this one does, before any work, and says how to convert.
    """
    if x.dtype != dtype:
        raise TypeError(f"{name} has dtype {x.dtype} but must have {dtype}, the dtype of {what}; "
                        f"convert it with {name}.to({dtype})")


def check_qkv(query, key, value) -> None:
    """Raise unless ``query (..., L, E)``, ``key (..., S, E)`` and ``value (..., S, Ev)``
    are floating-point tensors of one dtype on one device with non-empty, compatible shapes."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(name, x, min_dim=2)
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(
            f"query, key and value must share a dtype, got {query.dtype}, {key.dtype}, {value.dtype}"
        )
    if not (query.device == key.device == value.device):
        raise ValueError(
            f"query, key and value must be on one device, got {query.device}, {key.device}, "
            f"{value.device}"
        )
    if query.size(-1) != key.size(-1):
        raise ValueError(
            f"query and key must have the same last dim E, got query {tuple(query.shape)} "
            f"and key {tuple(key.shape)}"
        )
    if key.shape[:-1] != value.shape[:-1]:
        raise ValueError(
            f"key and value must agree on all dims but the last, got key {tuple(key.shape)} "
            f"and value {tuple(value.shape)}"
        )
    if query.size(-2) == 0 or key.size(-2) == 0 or query.size(-1) == 0:
        raise ValueError(
            f"empty sequence: query {tuple(query.shape)}, key {tuple(key.shape)}"
        )
    if query.shape[:-2] != key.shape[:-2]:  # the usual case, equal batch dims, needs no more
        try:
            torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
        except RuntimeError:
            raise ValueError(
                f"batch dims of query {tuple(query.shape)} and key {tuple(key.shape)} do not broadcast"
            ) from None


def scores_shape(query: torch.Tensor, key: torch.Tensor) -> torch.Size:
    """``(..., L, S)``: the shape of the scores of ``query (..., L, E)`` against ``key (..., S, E)``."""
    batch = query.shape[:-2]
    if batch != key.shape[:-2]:
        batch = torch.broadcast_shapes(batch, key.shape[:-2])
    return (*batch, query.size(-2), key.size(-2))


def check_attn_mask(attn_mask, shape, device=None, name: str = "attn_mask") -> None:
    """Raise unless ``attn_mask`` is a bool (True = may attend) or float tensor that
    broadcasts to the scores' ``shape (..., L, S)`` (and lies on ``device``, if given);
    ``name`` is the argument's name in the error (a decoder's ``memory_mask``)."""
    if not isinstance(attn_mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(attn_mask).__name__}")
    if attn_mask.dtype != torch.bool and not attn_mask.dtype.is_floating_point:
        raise TypeError(
            f"{name} must be bool (True = may attend) or float (added to the scores), "
            f"got dtype {attn_mask.dtype}"
        )
    broadcast_or_raise(name, attn_mask.shape, shape, "the scores (..., L, S)")
    if device is not None:
        check_device(name, attn_mask, device)


def check_scale(scale) -> None:
    """Raise unless ``scale`` is None or a positive finite number."""
    if scale is not None and not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number or None, got {scale!r}")


def check_is_causal(is_causal) -> None:
    """Raise unless ``is_causal`` is a bool (``"yes"`` would be truthy, silently)."""
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be True or False, got {is_causal!r}")


def check_dim(name: str, dim, x: torch.Tensor) -> None:
    """Raise unless ``dim`` is an int naming one of the dims of ``x``."""
    if isinstance(dim, bool) or not isinstance(dim, int) or not -x.dim() <= dim < x.dim():
        raise ValueError(f"{name} must be an int in [{-x.dim()}, {x.dim() - 1}] for a tensor of "
                         f"shape {tuple(x.shape)}, got {dim!r}")


def check_dropout_p(dropout_p) -> None:
    """Raise unless ``dropout_p`` lies in ``[0, 1)``."""
    if not (isinstance(dropout_p, (int, float)) and 0.0 <= dropout_p < 1.0):
        raise ValueError(f"dropout_p must lie in [0, 1), got {dropout_p!r}")


def check_bool(name: str, value) -> None:
    """Raise unless ``value`` is True or False (``"no"`` would be truthy, silently)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")


def check_positive_number(name: str, value) -> None:
    """Raise unless ``value`` is a finite number (int or float, not bool) > 0."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def check_eps(name: str, eps) -> None:
    """Raise unless ``eps`` is a finite number > 0: the one rule for an epsilon (a norm's:
    :func:`~attention_core.nn.norms.rms_norm`, ``RMSNorm``, a block's ``LayerNorm``; the floor of
    linear attention's normaliser); a negative one turns a row of small values into NaN, and
    0 lets a normaliser of 0 divide."""
    check_positive_number(name, eps)


MAX_ALLOCATION_BYTES = 8 * 2**30
"""The largest tensor a function of the package builds on request: 8 GiB. A request past it
(``causal_mask(10**7)``, ``KVCache(1000, 1000, 1000, 1000)``) is a typo far more often than
a plan, and would otherwise stall the machine or die with an out-of-memory error that names
no argument."""


def check_allocation(name: str, numel: int, element_size: int, limit: int = MAX_ALLOCATION_BYTES) -> None:
    """Raise unless ``numel`` elements of ``element_size`` bytes fit in ``limit`` bytes
    (:data:`MAX_ALLOCATION_BYTES`), saying how much the request ``name`` would need."""
    needed = int(numel) * int(element_size)
    if needed > limit:
        raise ValueError(f"{name} asks for {numel:,} elements ({needed / 2**30:,.1f} GiB), past the "
                         f"limit of {limit / 2**30:g} GiB a tensor of this package may take; "
                         "pass smaller sizes")


def check_tensor_size(name: str, shape, dtype=None, limit: int = MAX_ALLOCATION_BYTES) -> None:
    """Raise unless a tensor of ``shape`` and ``dtype`` (None: torch's default dtype) fits in
    ``limit`` bytes (:data:`MAX_ALLOCATION_BYTES`): the check a function runs before it builds a
    tensor, or a module its parameters, whose size comes from its arguments (``RMSNorm(10**12)``);
    ``name`` is the argument that sets the size."""
    dtype = torch.get_default_dtype() if dtype is None else dtype
    element_size = torch.empty((), dtype=dtype).element_size()
    check_allocation(name, math.prod(int(n) for n in shape), element_size, limit)
