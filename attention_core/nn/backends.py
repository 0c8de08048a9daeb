"""Chapter 11: which way this machine can run a Triton kernel, decided in one place.

:func:`triton_mode` reads the environment and the hardware and changes nothing, like
HuggingFace's ``is_flash_attn_2_available()``: importing ``attention_core`` never sets
``TRITON_INTERPRET``, which would switch every other Triton user in the process to the
interpreter. Whoever wants the interpreter opts in *before anything imports triton*
(chapter 11's setup cell and ``tests/test_triton.py`` do, where no GPU compiles)::

    os.environ["TRITON_INTERPRET"] = "1"
"""

from __future__ import annotations

import importlib.util
import os

import torch

__all__ = ["triton_compiles_here", "triton_mode"]


def triton_compiles_here() -> bool:
    """Whether Triton can compile for this machine: a CUDA GPU of compute capability 8.0 or
    more (Ampere and later; Triton 3.3 dropped Turing, e.g. the T4)."""
    return torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)


def triton_mode() -> str | None:
    """``"interpreted"``, ``"compiled"`` or ``None``: how Triton kernels run here.

    ``None`` where Triton is not installed (the ``gpu`` extra), or where it is but cannot
    compile for this machine (:func:`triton_compiles_here`) and ``TRITON_INTERPRET=1`` is
    not set; ``"interpreted"`` where ``TRITON_INTERPRET`` is set (``1``, ``true``, ``on``,
    ``yes``), GPU or not; ``"compiled"`` otherwise. Reads, never sets, the environment.
    """
    if importlib.util.find_spec("triton") is None:
        return None
    if os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes"):
        return "interpreted"
    return "compiled" if triton_compiles_here() else None
