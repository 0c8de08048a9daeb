"""Every chapter: the book's machinery. The rendering base
(:mod:`~attention_core.book.render`), figures (:mod:`~attention_core.book.viz`), explorers
(:mod:`~attention_core.book.explorers`), the exercises' checkers
(:mod:`~attention_core.book.exercises`) and the helpers a page calls
(:mod:`~attention_core.book.pages`: ``show_source``, ``glue``).

The top layer: imports :mod:`attention_core.models` and :mod:`attention_core.nn`, and is
the only layer that draws (matplotlib, Pillow) or shows widgets (ipywidgets, IPython).
"""

from .pages import PlainText, glue, show_source

__all__ = ["PlainText", "glue", "show_source"]
