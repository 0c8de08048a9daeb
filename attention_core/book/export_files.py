"""Chapters 13 and 14: what their in-browser exports share (MiniLM's ``web_model``, SmolLM2's
``web_llm``): the hash of their sources under which the build caches an export, files written
readable by the static server, an ONNX Runtime session on one thread, and a measured bound
rounded up for ``meta.json``.

``onnx``, ``onnxscript`` and ``onnxruntime`` are optional: :func:`files_hash` and
:func:`ort_session` need them, the rest does not.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import numpy as np
import torch

try:
    import onnx
    import onnxruntime
    import onnxscript
except ImportError:  # Colab and Binder have no onnx: only the exports need it
    onnx = onnxruntime = onnxscript = None

__all__ = ["files_hash", "write_readable", "ort_session", "round_up"]


def files_hash(files) -> str:
    """16 hex digits of SHA-256 over the versions of torch, onnx, onnxscript, onnxruntime and
    numpy, then each of ``files``' name and bytes: the key under which an export is cached."""
    if isinstance(files, (str, bytes, os.PathLike)) or not hasattr(files, "__iter__"):
        raise TypeError(f"files must be a list of file paths, got {files!r}")
    digest = hashlib.sha256()
    for module in (torch, onnx, onnxscript, onnxruntime, np):
        digest.update(f"{module.__name__}=={module.__version__}\n".encode())
    for path in files:
        path = Path(path)
        digest.update(path.name.encode())
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def write_readable(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, readable by everyone (the static server's user too)."""
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    path = Path(path)
    path.write_bytes(data)
    path.chmod(0o644)


def ort_session(model) -> onnxruntime.InferenceSession:
    """An ONNX Runtime CPU session on ``model`` (a file's path, or a serialized model's
    bytes), on one thread: the pages run one sentence or one token at a time, and idle worker
    threads that spin would slow a busy machine down."""
    if not isinstance(model, (bytes, str, os.PathLike)):
        raise TypeError(f"model must be a path or a serialized model's bytes, got {type(model).__name__}")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    source = model if isinstance(model, bytes) else str(model)
    return onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def round_up(value: float, digits: int = 2) -> float:
    """``value`` rounded up to ``digits`` significant digits: 0.0223 -> 0.023, 0.03 -> 0.03."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"value must be a finite number, got {value!r}")
    if isinstance(digits, bool) or not isinstance(digits, int) or digits < 1:
        raise ValueError(f"digits must be an int >= 1, got {digits!r}")
    if not value > 0:
        return 0.0
    unit = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return float(f"{math.ceil(round(value / unit, 9)) * unit:.{digits}g}")
