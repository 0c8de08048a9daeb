"""Every chapter: small helpers for the book's pages. Show the package's own code
instead of re-typing it, and hand a computed number to the prose."""

from __future__ import annotations

import inspect

from IPython.display import Code


def show_source(obj) -> Code:
    """The source of a package function or class, syntax-highlighted in a notebook."""
    return Code(inspect.getsource(obj), language="python")


class PlainText(str):
    """A string whose ``repr`` is the string itself: glued, it reads ``Luong (dot)``,
    not ``'Luong (dot)'`` (``{glue:text}`` shows a value's ``repr``)."""

    def __repr__(self) -> str:
        return str(self)


def glue(name: str, value, display: bool = False) -> None:
    """Give ``value`` to the page's prose as ``{glue:text}`name``` (myst-nb's glue); a
    string is shown as written, without quotes.

    The website's build has myst-nb; a reader's kernel (Colab, Binder) may not, and there
    nothing happens, so the same cell runs everywhere. Returns nothing, so a cell that
    ends with ``glue(...)`` shows no stray value.
    """
    try:  # an optional dependency: only the website's build has it
        from myst_nb import glue as myst_glue
    except ImportError:
        return
    myst_glue(name, PlainText(value) if isinstance(value, str) else value, display=display)
