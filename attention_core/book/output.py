"""Every chapter: where a notebook's output is read, a reader's kernel or the website, and
the one place that chooses between them.

The website is built from the same notebooks a reader runs, but an explorer, a figure and
a self-check quiz each show one of two views:

* ``"kernel"`` (the default; Jupyter, Colab, Binder): live widgets and plain PNGs, rendering
  only what is shown;
* ``"website"``: static HTML, every explorer frame rendered in both layouts, every figure
  checked for cut or too-small text (a figure that fails stops the build, naming it).

Nothing reads the environment to decide. Whoever starts the kernel says which it is: the
book's build starts its kernels from a kernelspec of its own (``_ext/website_kernel.py``)
whose start-up line is ``attention_core.book.output.use("website")``; a reader's kernel
never calls it. :func:`view` is the single dispatch point every view goes through.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TypeVar

__all__ = ["use", "current", "using", "view"]

MODES = ("kernel", "website")
"""The two places a notebook's output is read."""

_mode = "kernel"
T = TypeVar("T")


def _check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def use(mode: str) -> None:
    """Show every later output for ``mode`` (``"kernel"`` or ``"website"``); the build's
    kernel start-up calls ``use("website")``."""
    global _mode
    _mode = _check_mode(mode)


def current() -> str:
    """The mode outputs are shown for now: ``"kernel"`` unless :func:`use` said otherwise."""
    return _mode


@contextlib.contextmanager
def using(mode: str) -> Iterator[None]:
    """``with using("website"):`` shows outputs for ``mode`` inside the block only (tests,
    benchmarks); the mode before it comes back on leaving."""
    global _mode
    before, _mode = _mode, _check_mode(mode)
    try:
        yield
    finally:
        _mode = before


def view(*, kernel: Callable[[], T], website: Callable[[], T]) -> T:
    """The one dispatch point: call ``website()`` while the website is built, else
    ``kernel()``, and return what it gives."""
    return website() if _mode == "website" else kernel()
