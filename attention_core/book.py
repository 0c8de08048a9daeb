"""Small helpers for the book's pages: show the package's own code instead of re-typing it."""

from __future__ import annotations

import inspect


def show_source(obj):
    """The source of a package function or class, syntax-highlighted in a notebook."""
    from IPython.display import Code

    return Code(inspect.getsource(obj), language="python")
