"""Every chapter: the machinery of the "Check yourself" questions before the exercises,
one source for the website and for a kernel (a chapter calls
:func:`~attention_core.book.quiz.quiz`).

A question is a :class:`MultipleChoice` (every choice carries the reason it is right or
wrong) or a :class:`Numeric` (an answer, a tolerance, and the wrong answers that known
mistakes give, each with what went wrong). The questions themselves live in
:mod:`~attention_core.book.questions`, where every number they quote or expect is
computed by the package when the page is built. A chapter shows its questions with
``quiz("ch05")`` (:mod:`~attention_core.book.quiz`), as the value of a cell, and gets
one of two views, chosen the way an
explorer chooses (:mod:`~attention_core.book.explorers.engine`):

* when the website is built (:func:`attention_core.book.output.view`):
  one ``text/html`` output, real form controls (a ``fieldset`` and ``legend`` per
  question, radio buttons or a text input, a submit button) and an ``aria-live`` line for
  the verdict, checked by the book's ``_static/quiz/quiz.js`` with no kernel and no
  network and styled by ``_static/quiz/quiz.css`` (the theme's colours, dark mode
  included): a change to either needs no chapter to run again;
* in a kernel (Jupyter, Colab, Binder; ipywidgets 7.7+ and 8): the same questions as
  widgets, checked in Python by :meth:`MultipleChoice.check` and :meth:`Numeric.check`,
  the very rules ``quiz.js`` applies.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass, field

import ipywidgets as widgets
from IPython.display import display

from . import output
from .explorers.live import widget_view_mimebundle

__all__ = [
    "CODE", "inline_html", "plain", "parse_number", "Verdict", "Choice", "MultipleChoice", "Numeric",
    "static_html", "feedback_html", "QuestionWidget", "question_widget", "plain_text", "Quiz",
]

CODE = re.compile(r"`([^`]+)`")


def inline_html(text: str) -> str:
    """``text`` as HTML: escaped, with ```code``` spans as ``<code>``."""
    _check_text("text", text)
    return CODE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(text))


def plain(text: str) -> str:
    """``text`` without its code marks (a radio button's label shows no HTML)."""
    _check_text("text", text)
    return CODE.sub(lambda m: m.group(1), text)


def parse_number(text) -> float | None:
    """A reader's answer as a number: ``"1,048,576"``, ``"1 048 576"``, ``"6.5e-3"`` or a
    number; ``None`` when it is not one: other than ASCII digits (``"١٢"``, full-width
    ``"１２"``), or not finite (``"1e400"``, ``10**400``). ``quiz.js`` parses the same way."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        try:
            value = float(text)
        except OverflowError:  # an int past the largest float
            return None
        return value if math.isfinite(value) else None
    if not isinstance(text, str):
        return None
    cleaned = re.sub(r"[\s,_\u00a0\u202f]", "", text).replace("\u2212", "-")
    if not re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", cleaned):
        return None
    value = float(cleaned)
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class Verdict:
    """What a reader sees after checking an answer."""

    correct: bool
    message: str


def _check_text(name: str, value) -> None:
    """Raise unless ``value`` is a str (a prompt, an explanation)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__} {value!r}")


def _check_questions(questions) -> None:
    """Raise unless ``questions`` is a list or tuple of :class:`MultipleChoice` and :class:`Numeric`."""
    if not isinstance(questions, (list, tuple)) or not all(
            isinstance(q, (MultipleChoice, Numeric)) for q in questions):
        raise TypeError(f"questions must be a tuple of MultipleChoice and Numeric questions, "
                        f"got {questions!r}")


def _check_number(name: str, value) -> None:
    """Raise unless ``value`` is a finite int or float (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")


@dataclass(frozen=True)
class Choice:
    """One choice of a multiple-choice question and why it is right or wrong."""

    text: str
    correct: bool
    why: str

    def __post_init__(self):
        _check_text("text", self.text)
        _check_text("why", self.why)
        if not isinstance(self.correct, bool):
            raise TypeError(f"correct must be True or False, got {self.correct!r}")


@dataclass(frozen=True)
class MultipleChoice:
    """A question with exactly one right choice; each choice explains itself."""

    prompt: str
    choices: tuple[Choice, ...]

    def __post_init__(self):
        _check_text("prompt", self.prompt)
        if not isinstance(self.choices, (tuple, list)) or not all(isinstance(c, Choice)
                                                                   for c in self.choices):
            raise TypeError(f"choices must be a tuple of Choice, got {self.choices!r}")
        if len(self.choices) < 2:
            raise ValueError(f"choices must hold at least 2 choices, got {len(self.choices)}")
        right = sum(c.correct for c in self.choices)
        if right != 1:
            raise ValueError(f"choices must hold exactly one right choice, got {right} for {self.prompt!r}")
        texts = [c.text for c in self.choices]
        if len(set(texts)) != len(texts):
            raise ValueError(f"choices must differ, got {texts}")
        for c in self.choices:
            if not c.text.strip() or not c.why.strip():
                raise ValueError(f"every choice needs a text and an explanation, got {c!r}")

    @property
    def answer(self) -> int:
        """The index of the right choice."""
        return next(i for i, c in enumerate(self.choices) if c.correct)

    def check(self, index) -> Verdict:
        """The verdict on choice ``index`` (``None``: nothing chosen yet)."""
        if index is None:
            return Verdict(False, "Choose one of the answers first.")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.choices):
            raise ValueError(f"index must be a choice's position 0..{len(self.choices) - 1}, got {index!r}")
        choice = self.choices[index]
        return Verdict(choice.correct, ("Correct. " if choice.correct else "Not quite. ") + choice.why)

    def data(self) -> dict:
        return {"kind": "choice",
                "choices": [{"correct": c.correct, "why": inline_html(c.why)} for c in self.choices]}


@dataclass(frozen=True)
class Numeric:
    """A question with a numeric answer: right within ``tolerance`` (absolute). A known
    mistake's answer (``mistakes``: ``(value, what went wrong)``) gets its own
    explanation; any other wrong answer gets ``hint``."""

    prompt: str
    answer: float
    tolerance: float
    why: str
    hint: str
    mistakes: tuple[tuple[float, str], ...] = field(default=())
    unit: str = ""

    def __post_init__(self):
        for name in ("prompt", "why", "hint", "unit"):
            _check_text(name, getattr(self, name))
        _check_number("answer", self.answer)
        _check_number("tolerance", self.tolerance)
        if not self.tolerance > 0:
            raise ValueError(f"tolerance must be finite and > 0, got {self.tolerance!r}")
        pairs = isinstance(self.mistakes, (tuple, list)) and all(
            isinstance(m, (tuple, list)) and len(m) == 2 and isinstance(m[1], str) for m in self.mistakes)
        if not pairs:
            raise TypeError(f"mistakes must be a tuple of (value, what went wrong) pairs, "
                            f"got {self.mistakes!r}")
        for value, _ in self.mistakes:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"mistakes must hold finite numbers, got {value!r} in {self.mistakes!r}")
        if not self.why.strip() or not self.hint.strip():
            raise ValueError(f"a numeric question needs an explanation and a hint: {self.prompt!r}")
        for value, why in self.mistakes:
            if abs(value - self.answer) < 2 * self.tolerance or not why.strip():
                raise ValueError(f"mistakes must be told apart from the answer {self.answer} "
                                 f"and explained, got {value!r}: {why!r}")

    def check(self, text) -> Verdict:
        """The verdict on ``text`` (a number, or what a reader typed)."""
        value = parse_number(text)
        if value is None:
            return Verdict(False, "That is not a number we can check: type one"
                                  f"{' in ' + self.unit if self.unit else ''}, such as 12.5.")
        if abs(value - self.answer) <= self.tolerance:
            return Verdict(True, "Correct. " + self.why)
        for mistake, why in self.mistakes:
            if abs(value - mistake) <= self.tolerance:
                return Verdict(False, "Not quite. " + why)
        return Verdict(False, "Not quite. Hint: " + self.hint)

    def data(self) -> dict:
        return {"kind": "number", "answer": self.answer, "tolerance": self.tolerance,
                "why": inline_html(self.why), "hint": inline_html(self.hint), "unit": self.unit,
                "mistakes": [[v, inline_html(w)] for v, w in self.mistakes]}


Question = MultipleChoice | Numeric


# --- the website's view ------------------------------------------------------------------

def _question_html(dom_id: str, n: int, total: int, question: Question) -> str:
    legend = (f'<legend><span class="ac-quiz-count">Question {n + 1} of {total}.</span> '
              f'{inline_html(question.prompt)}</legend>')
    if isinstance(question, MultipleChoice):
        body = "".join(f'<label class="ac-quiz-choice"><input type="radio" name="{dom_id}-q{n}" value="{i}">'
                       f'<span>{inline_html(c.text)}</span></label>' for i, c in enumerate(question.choices))
    else:
        unit = f" ({html.escape(question.unit)})" if question.unit else ""
        body = (f'<label class="ac-quiz-number">Your answer{unit}'
                f'<input type="text" inputmode="decimal" autocomplete="off" spellcheck="false"></label>')
    return (f'<form class="ac-quiz-question" data-question="{n}" novalidate>'
            f'<fieldset>{legend}{body}</fieldset>'
            f'<button type="submit">Check</button>'
            f'<p class="ac-quiz-feedback" role="status" aria-live="polite"></p></form>')


def _check_chapter(chapter) -> None:
    """Raise unless ``chapter`` is a chapter id (``"ch01"``: letters, digits, ``-``, ``_``): it
    becomes part of HTML ids and attributes."""
    if not isinstance(chapter, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", chapter):
        raise ValueError(f"chapter must be an id of letters, digits, '-' or '_' such as 'ch01', "
                         f"got {chapter!r}")


def static_html(chapter: str, questions) -> str:
    """The website's view of ``questions``: the forms and their data. The book's
    ``_static/quiz/quiz.js`` checks the answers and ``_static/quiz/quiz.css`` styles them,
    on every page that has questions."""
    _check_questions(questions)
    _check_chapter(chapter)
    dom_id = html.escape(f"ac-quiz-{chapter}")
    forms = "".join(_question_html(dom_id, n, len(questions), q) for n, q in enumerate(questions))
    payload = json.dumps([q.data() for q in questions]).replace("</", "<\\/")
    return (f'<div class="ac-quiz" id="{dom_id}" data-chapter="{html.escape(chapter)}">{forms}'
            f'<script type="application/json" class="ac-quiz-data">{payload}</script></div>')


# --- the kernel's view -------------------------------------------------------------------

def feedback_html(verdict: Verdict) -> str:
    """The verdict for the kernel's view: its first words in bold, coloured, announced."""
    if not isinstance(verdict, Verdict):
        raise TypeError(f"verdict must be a Verdict (a question's check), got {type(verdict).__name__}")
    colour = "#1a7f37" if verdict.correct else "#b42318"
    head, rest = "", verdict.message
    for verdict_word in ("Correct.", "Not quite."):
        if rest.startswith(verdict_word):
            head, rest = verdict_word, rest[len(verdict_word):].lstrip()
    return (f'<div role="status" aria-live="polite" style="color:{colour}">'
            f'<b>{html.escape(head)}</b> {inline_html(rest)}</div>')


@dataclass
class QuestionWidget:
    """One question's widgets: ``box`` holds the prompt, ``answer`` (radio buttons or a
    text box), ``button`` (Check) and ``feedback`` (an HTML widget)."""

    question: Question
    box: object
    answer: object
    button: object
    feedback: object

    def check(self) -> Verdict:
        """Check the current answer, show the verdict and return it."""
        if isinstance(self.question, MultipleChoice):
            verdict = self.question.check(self.answer.index)
        else:
            verdict = self.question.check(self.answer.value)
        self.feedback.value = feedback_html(verdict)
        return verdict


def question_widget(n: int, total: int, question: Question) -> QuestionWidget:
    if not isinstance(question, (MultipleChoice, Numeric)):
        raise TypeError(f"question must be a MultipleChoice or Numeric question, "
                        f"got {type(question).__name__}")
    for name, value in (("n", n), ("total", total)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    prompt = widgets.HTML(f"<b>Question {n + 1} of {total}.</b> {inline_html(question.prompt)}")
    if isinstance(question, MultipleChoice):
        answer = widgets.RadioButtons(options=[plain(c.text) for c in question.choices], index=None,
                                      layout=widgets.Layout(width="auto"))
    else:
        unit = f" ({question.unit})" if question.unit else ""
        answer = widgets.Text(placeholder="a number", description=f"Your answer{unit}",
                              style={"description_width": "initial"})
    button = widgets.Button(description="Check")
    feedback = widgets.HTML("")
    box = widgets.VBox([prompt, answer, button, feedback],
                       layout=widgets.Layout(border="1px solid #c9ced6", padding="0.5em", margin="0 0 1em 0"))
    item = QuestionWidget(question, box, answer, button, feedback)
    button.on_click(lambda _: item.check())
    return item


def plain_text(chapter: str, questions) -> str:
    """The questions as text: what a front end without the widgets shows."""
    _check_questions(questions)
    _check_chapter(chapter)
    lines = [f"Check yourself ({chapter}): run this cell in Jupyter to answer and check."]
    for n, q in enumerate(questions):
        lines.append(f"{n + 1}. {plain(q.prompt)}")
        if isinstance(q, MultipleChoice):
            lines += [f"   ( ) {plain(c.text)}" for c in q.choices]
    return "\n".join(lines)


class Quiz:
    """A chapter's questions, shown as the value of a cell (see the module docstring)."""

    def __init__(self, chapter: str, questions):
        _check_questions(questions)
        _check_chapter(chapter)
        self.chapter = chapter
        self.questions = tuple(questions)
        if not self.questions:
            raise ValueError(f"questions must not be empty for chapter {chapter!r}")
        self._items: list[QuestionWidget] | None = None

    def __repr__(self) -> str:
        return f"Quiz({self.chapter}, {len(self.questions)} questions)"

    def widgets(self) -> list[QuestionWidget]:
        """The live view, made once: one :class:`QuestionWidget` per question."""
        if self._items is None:
            self._items = [question_widget(n, len(self.questions), q) for n, q in enumerate(self.questions)]
        return self._items

    def widget(self):
        """The live view's box of questions (``.items``: the :class:`QuestionWidget` list)."""
        items = self.widgets()
        box = widgets.VBox([item.box for item in items])
        box.items = items
        return box

    def to_html(self) -> str:
        return static_html(self.chapter, self.questions)

    def _repr_mimebundle_(self, include=None, exclude=None):
        """On the website the static view alone (``text/html``); in a kernel the widgets
        with the questions as text for front ends without them."""
        return output.view(website=lambda: {"text/html": self.to_html()},
                           kernel=lambda: {**widget_view_mimebundle(self.widget()),
                                           "text/plain": plain_text(self.chapter, self.questions)})

    def _ipython_display_(self):
        display(self._repr_mimebundle_(), raw=True)

