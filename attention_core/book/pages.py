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
    string is shown as written, without quotes, and a numpy or torch scalar as its number.

    The website's build has myst-nb; a reader's kernel (Colab, Binder) may not, and there
    nothing happens, so the same cell runs everywhere. Returns nothing, so a cell that
    ends with ``glue(...)`` shows no stray value.
    """
    try:  # an optional dependency: only the website's build has it
        from myst_nb import glue as myst_glue
    except ImportError:
        return
    if isinstance(value, str):
        value = PlainText(value)
    elif hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # numpy or torch scalar
        value = value.item()  # glued as 0.97, not np.float64(0.97), which myst-nb cannot format
    myst_glue(name, value, display=display)
