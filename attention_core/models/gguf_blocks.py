"""Chapter 14: the GGUF's quantised blocks, decoded. One implementation, used by
:func:`~attention_core.models.smollm.load_smollm2` (the chapter's float32 model) and by the
in-browser export (``attention_core.book.web_llm``), whose page decodes the same bytes
in JavaScript (``_web/_static/llm-lab/blocks.js``, tested against :func:`decode_blocks`).

ggml stores a quantised matrix row by row, each row in blocks of 32 weights:

* ``Q4_1`` (20 bytes a block): a float16 scale ``d``, a float16 offset ``m``, then 16 bytes
  holding 32 four-bit values ``q`` in ``0..15``; weight ``j`` is in the low nibble of byte
  ``j``, weight ``j + 16`` in its high nibble; ``w = d * q + m`` (ggml's ``block_q4_1``).
* ``Q8_0`` (34 bytes a block): a float16 scale ``d``, then 32 int8 values; ``w = d * q``
  (ggml's ``block_q8_0``).

Shape legend: ``rows`` and ``cols`` a matrix's (PyTorch's ``(out, in)``), ``nblk`` blocks a
row (``cols / 32``).
"""

from __future__ import annotations

import numpy as np

from ..nn._checks import check_positive_int

__all__ = ["BLOCK", "BLOCK_BYTES", "q4_1_from_gguf", "q8_0_from_gguf", "decode_blocks"]

BLOCK = 32
"""Weights that share a scale (and, in Q4_1, an offset)."""
BLOCK_BYTES = {"Q4_1": 20, "Q8_0": 34}
"""Bytes of one block of :data:`BLOCK` weights, by quantisation type."""


def q4_1_from_gguf(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A Q4_1 tensor's bytes ``(rows, nblk * 20)`` -> ``(qs uint8 (rows, nblk, 16),
    d float16 (rows, nblk, 1), m float16 (rows, nblk, 1))``."""
    _check_raw(raw, "Q4_1")
    rows = raw.shape[0]
    blocks = np.ascontiguousarray(raw).reshape(rows, -1, 20)  # (rows, nblk, 20)
    d = blocks[..., 0:2].copy().view(np.float16)  # (rows, nblk, 1)
    m = blocks[..., 2:4].copy().view(np.float16)
    return blocks[..., 4:].copy(), d, m


def q8_0_from_gguf(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A Q8_0 tensor's bytes ``(rows, nblk * 34)`` -> ``(qs int8 (rows, nblk, 32),
    d float16 (rows, nblk, 1))``."""
    _check_raw(raw, "Q8_0")
    rows = raw.shape[0]
    blocks = np.ascontiguousarray(raw).reshape(rows, -1, 34)  # (rows, nblk, 34)
    return blocks[..., 2:].copy().view(np.int8), blocks[..., 0:2].copy().view(np.float16)


def decode_blocks(kind: str, raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """The float32 weights ``(rows, cols)`` of ``raw``, a tensor's blocks of type ``kind``
    (``"Q4_1"`` or ``"Q8_0"``): bit for bit what ``gguf.quants.dequantize`` gives (tested)."""
    if kind not in BLOCK_BYTES:
        raise ValueError(f"kind must be one of {sorted(BLOCK_BYTES)}, got {kind!r}")
    check_positive_int("rows", rows)
    check_positive_int("cols", cols)
    if not isinstance(raw, np.ndarray):
        raise TypeError(f"raw must be a numpy array of bytes, got {type(raw).__name__}")
    if cols % BLOCK or raw.size != rows * cols // BLOCK * BLOCK_BYTES[kind]:
        raise ValueError(f"raw holds {raw.size} bytes, not a {kind} tensor of shape ({rows}, {cols})")
    raw = np.asarray(raw, np.uint8).reshape(rows, -1)
    if kind == "Q8_0":
        qs, d = q8_0_from_gguf(raw)  # (rows, nblk, 32), (rows, nblk, 1)
        return (qs.astype(np.float32) * d.astype(np.float32)).reshape(rows, cols)
    qs, d, m = q4_1_from_gguf(raw)  # (rows, nblk, 16), (rows, nblk, 1) x 2
    q = np.concatenate((qs & 15, qs >> 4), axis=-1).astype(np.float32)  # (rows, nblk, 32)
    return (q * d.astype(np.float32) + m.astype(np.float32)).reshape(rows, cols)


def _check_raw(raw, kind: str) -> None:
    """Raise unless ``raw`` is a 2-dim uint8 array of whole ``kind`` blocks a row."""
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or raw.ndim != 2:
        raise TypeError(f"raw must be a 2-dim uint8 array (rows, blocks * bytes), got "
                        f"{getattr(raw, 'dtype', type(raw).__name__)} {getattr(raw, 'shape', '')}")
    if raw.shape[1] == 0 or raw.shape[1] % BLOCK_BYTES[kind]:
        raise ValueError(f"raw's rows must hold whole {kind} blocks of {BLOCK_BYTES[kind]} bytes, "
                         f"got shape {raw.shape}")
