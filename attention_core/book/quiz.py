"""Every chapter: ``quiz("chNN")``, the chapter's "Check yourself" questions, shown as
the value of the cell before its exercises. The questions are in
:mod:`~attention_core.book.questions`, the forms and widgets that show and check them in
:mod:`~attention_core.book.selfcheck`.
"""

from __future__ import annotations

from .questions import QUESTIONS
from .selfcheck import Quiz

__all__ = ["quiz"]


def quiz(chapter: str) -> Quiz:
    """Chapter ``chapter``'s questions (``"ch01"`` .. ``"ch13"``), computed now."""
    if not isinstance(chapter, str) or chapter not in QUESTIONS:
        raise ValueError(f"chapter must be one of {sorted(QUESTIONS)}, got {chapter!r}")
    return Quiz(chapter, QUESTIONS[chapter]())
