"""Every chapter: small helpers for the book's pages. Show the package's own code
instead of re-typing it, and hand a computed number to the prose."""

from __future__ import annotations

import ast
import inspect

from IPython.display import Code

__all__ = ["show_source", "PlainText", "glue"]


def show_source(obj) -> Code:
    """The source of a package function or class, syntax-highlighted in a notebook."""
    tests = (inspect.isfunction, inspect.ismethod, inspect.isclass, inspect.ismodule)
    if not any(test(obj) for test in tests):
        raise TypeError(f"obj must be a function, method, class or module, got {type(obj).__name__}")
    return Code(inspect.getsource(obj), language="python")


class PlainText(str):
    """A string glued to be shown exactly as written: ``Luong (dot)``, not ``'Luong (dot)'``.

    ``{glue:text}`` reads a value's ``repr`` back with ``ast.literal_eval`` (myst-nb), so a
    string that happens to be a Python literal would change: ``100,000`` would become the
    tuple ``(100, 0)`` and ``0.60`` the number ``0.6``. Such a string's ``repr`` is therefore
    the quoted one, which reads back as the string itself; any other string's is the string.
    """

    def __repr__(self) -> str:
        text = str(self)
        try:
            ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return text  # not a literal: shown as it is
        return repr(text)  # a literal: quoted, so that reading it back gives this text


def glue(name: str, value, display: bool = False) -> None:
    """Give ``value`` to the page's prose as ``{glue:text}`name``` (myst-nb's glue); a
    string is shown as written, without quotes, and a numpy or torch scalar as its number.

    The website's build has myst-nb; a reader's kernel (Colab, Binder) may not, and there
    nothing happens, so the same cell runs everywhere. Returns nothing, so a cell that
    ends with ``glue(...)`` shows no stray value.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str (the glue key), got {name!r}")
    try:  # an optional dependency: only the website's build has it
        from myst_nb import glue as myst_glue
    except ImportError:
        return
    if isinstance(value, str):
        value = PlainText(value)
    elif hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # numpy or torch scalar
        value = value.item()  # glued as 0.97, not np.float64(0.97), which myst-nb cannot format
    myst_glue(name, value, display=display)
