"""The PDF edition (``_ext/pdf_edition.py``): the print form of a page's interactive parts.

* an explorer -> a strip of a few of its frames (:func:`explorer_strip`);
* a self-check quiz -> its questions, and its answers for the chapter's end (:func:`quiz_print`);
* code -> each line a block that wraps under its own indentation (:func:`code_lines`);
* the in-browser model -> a note with the page's address and a static figure (:func:`web_note`).

Each takes the page's ``soup`` (to make tags) and returns or rewrites tags; none reads a file.
"""

from __future__ import annotations

import copy
import html
import json
import math

from bs4 import BeautifulSoup, NavigableString, Tag

from attention_core.book.explorers.strips import STRIPS, StripError, strip_frames


class PrintError(RuntimeError):
    """Something the PDF cannot print as the book means it (a strip of :data:`STRIPS` that
    no longer matches its explorer, a figure without its print copy); the message names the
    chapter, and ``make pdf`` fails on it."""


# ---------------------------------------------------------------------------------------------
# Explorers -> strips of frames


COLUMN_PX = 687
"""The printed text column in CSS px (A4 less the margins of ``pdf_print.css``: 182 mm)."""
MIN_TEXT_PX = 9.35
"""The smallest text a printed frame may show, in CSS px at print size (7 pt)."""


def strip_columns(width: int, min_text_px: float) -> int:
    """Two frames a row when their smallest text stays at least 7 pt at half the column,
    else one (a frame never printed larger than the site shows it)."""
    half = (COLUMN_PX - 19) / 2  # a 5 mm gap
    return 2 if min_text_px * min(1.0, half / width) >= MIN_TEXT_PX else 1


def check_strips_used(chapters: set[str]) -> None:
    """Raise :class:`PrintError` for each chapter of :data:`STRIPS` not among ``chapters``
    (the names of the pages that have an explorer): a renamed chapter would otherwise get
    the default frames without a word."""
    unused = sorted(set(STRIPS) - chapters)
    if unused:
        raise PrintError(f"{', '.join(unused)}: STRIPS lists frames for it, but no page of the book by "
                         "that name has an explorer (renamed?)")


def control_names(data: dict) -> list[str]:
    """The explorer's controls as :data:`STRIPS` names them: their Python names (``"controls"``
    in the explorer's data, ``script.ac-frames``), so that a label reworded on the page
    changes no strip (``"names"`` holds the labels, for the caption)."""
    return list(data["controls"])


def strip_print_copies(data: dict, chapter: str) -> list[tuple[str, list[str]]]:
    """``[(the print copy's src, the controls' shown values)]`` of ``chapter``'s strip of the
    explorer whose data is ``data``. Raises :class:`PrintError` naming the chapter when its
    :data:`STRIPS` entry no longer matches the explorer, or a frame has no print copy."""
    wide = data["layouts"]["wide"]
    try:
        chosen = strip_frames(chapter, control_names(data), data["labels"], data["start"], wide["index"])
    except StripError as error:
        raise PrintError(str(error)) from error
    printed = wide.get("print_images") or {}
    missing = [shown for frame, shown in chosen if str(frame) not in printed]
    if missing:
        made_for = data.get("chapter") or "no chapter"
        raise PrintError(f"{chapter}: the explorer ({data['alt']}) has no print copy of the frame(s) "
                         f"{missing}: it was rendered for the strip of {made_for} (Explorer(chapter=...)), "
                         "or the website was built without print copies (make book)")
    return [(printed[str(frame)], shown) for frame, shown in chosen]


def strip_frame(soup: BeautifulSoup, data: dict, src: str, shown: list[str]) -> Tag:
    """One printed frame: its print copy at the size of the wide rendering, captioned with
    the controls' labels and values."""
    wide, labels = data["layouts"]["wide"], data["names"]
    figure = soup.new_tag("figure", attrs={"class": "pdf-frame"})
    figure.append(soup.new_tag("img", attrs={
        "src": src, "width": str(wide["width"]), "height": str(wide["height"]),
        "alt": f"{data['alt']} Shown: " + ", ".join(f"{a} {b}" for a, b in zip(labels, shown)),
        "data-min-text-px": str(wide.get("min_text_px") or ""),
        "data-print-scale": str(wide.get("print_scale") or "")}))
    caption = soup.new_tag("figcaption")
    caption.string = ", ".join(f"{a} = {b}" for a, b in zip(labels, shown))
    figure.append(caption)
    return figure


def explorer_strip(soup: BeautifulSoup, explorer: Tag, chapter: str) -> Tag:
    """The printed explorer: a grid of the frames of ``chapter``'s strip
    (:func:`attention_core.book.explorers.strips.strip_frames`), each captioned with its control
    values, each the frame's print copy (``print_images``,
    :data:`attention_core.book.render.PRINT_SCALE`) shown at the size of its wide rendering.
    Raises :class:`PrintError` as :func:`strip_print_copies` does."""
    data = json.loads(explorer.select_one("script.ac-frames").string)
    wide = data["layouts"]["wide"]
    frames = strip_print_copies(data, chapter)
    strip = soup.new_tag("div", attrs={"class": "pdf-strip", "data-frames": str(len(frames))})
    intro = soup.new_tag("p", attrs={"class": "pdf-strip-note"})
    intro.string = (f"Explorer, {len(frames)} of its settings (on the website: controls for "
                    + ", ".join(data["names"]) + ").")
    strip.append(intro)
    grid = soup.new_tag("div", attrs={"class": "pdf-strip-frames"})
    for src, shown in frames:
        grid.append(strip_frame(soup, data, src, shown))
    strip.append(grid)
    strip["data-columns"] = str(strip_columns(wide["width"], wide.get("min_text_px") or 0.0))
    return strip


# ---------------------------------------------------------------------------------------------
# Self-check quizzes -> questions here, answers at the chapter's end


def _number(value: float, tolerance: float) -> str:
    decimals = max(0, min(6, math.ceil(-math.log10(tolerance)) if tolerance > 0 else 3))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _moved(soup: BeautifulSoup, name: str, source: Tag, **attrs) -> Tag:
    """A new ``name`` tag holding ``source``'s children (moved, not copied)."""
    tag = soup.new_tag(name, attrs=attrs)
    for child in list(source.contents):
        tag.append(child)
    return tag


def _choice_question(soup: BeautifulSoup, form: Tag, item: dict) -> tuple[Tag, Tag]:
    """(the choices, lettered; the answer: the right letters and why)."""
    choices = soup.new_tag("ol", attrs={"class": "pdf-choices", "type": "a"})
    for label in form.select("label.ac-quiz-choice"):
        choices.append(_moved(soup, "li", label.select_one("span") or label))
    right = [k for k, ch in enumerate(item["choices"]) if ch["correct"]]
    letters = ", ".join(f"({chr(97 + k)})" for k in right)
    # the explanations are the quiz's own inline HTML (selfcheck.inline_html: escaped
    # text and <code>), as the site shows them
    why = " ".join(item["choices"][k]["why"] for k in right)
    return choices, BeautifulSoup(f"<strong>{letters}</strong> \u2014 {why}", "html.parser")


def _number_question(soup: BeautifulSoup, item: dict) -> tuple[Tag, Tag]:
    """(a blank to write the number on; the answer: the number, its unit and why)."""
    unit = f" {item['unit']}" if item.get("unit") else ""
    blank = soup.new_tag("p", attrs={"class": "pdf-blank"})
    blank.string = "Your answer: " + "_" * 16 + unit
    value = _number(item["answer"], item.get("tolerance", 0.0))
    return blank, BeautifulSoup(f"<strong>{html.escape(value)}{html.escape(unit)}</strong> \u2014 "
                                f"{item.get('why', '')}", "html.parser")


def quiz_print(soup: BeautifulSoup, quiz: Tag) -> tuple[Tag, Tag]:
    """(the questions, for the quiz's place; the answers, for the end of the chapter)."""
    data = json.loads(quiz.select_one("script.ac-quiz-data").string)
    questions = soup.new_tag("ol", attrs={"class": "pdf-quiz"})
    answers = soup.new_tag("ol", attrs={"class": "pdf-quiz-answers"})
    for form, item in zip(quiz.select("form.ac-quiz-question"), data):
        legend = form.select_one("legend")
        count = legend.select_one(".ac-quiz-count")
        if count:
            count.decompose()
        li = soup.new_tag("li")
        li.append(_moved(soup, "p", legend))
        if item["kind"] == "choice":
            asked, answer = _choice_question(soup, form, item)
        else:
            asked, answer = _number_question(soup, item)
        li.append(asked)
        answer_li = soup.new_tag("li")
        answer_li.append(answer)
        questions.append(li)
        answers.append(answer_li)
    return questions, answers


# ---------------------------------------------------------------------------------------------
# Code: each line a block, so that a line too long for the column wraps under its own indent

HANG_CH = 4
"""A wrapped line of code continues this many characters right of the line's indentation
(as Python's own continuation lines do), so that it reads as one line."""
MAX_HANG_CH = 40
"""Deeply indented code hangs no further than this (the rest of the column stays for text)."""

Line = list[tuple[str, list[Tag]]]
"""A line of code: its pieces of text, each with the tags it sits in (outermost first)."""


def split_lines(pre: Tag) -> list[Line]:
    """The lines of ``pre``, each piece of text with its chain of tags; a line's newline is a
    piece of its own, in no tag."""
    lines: list[Line] = [[]]

    def walk(node, chain: list[Tag]) -> None:
        for child in list(node.children):
            if isinstance(child, NavigableString):
                for k, part in enumerate(str(child).split("\n")):
                    if k:
                        lines[-1].append(("\n", []))
                        lines.append([])
                    if part:
                        lines[-1].append((part, chain))
            elif isinstance(child, Tag):
                walk(child, [*chain, child])

    walk(pre, [])
    if not lines[-1]:
        lines.pop()
    return lines


def line_block(soup: BeautifulSoup, line: Line) -> Tag:
    """``<span class="pdf-code-line" style="--hang: Nch">`` holding ``line``, each piece in
    copies of its tags."""
    text = "".join(part for part, _ in line)
    indent = len(text) - len(text.lstrip(" "))
    hang = min(indent + HANG_CH, MAX_HANG_CH)
    block = soup.new_tag("span", attrs={"class": "pdf-code-line", "style": f"--hang:{hang}ch"})
    for part, chain in line:
        node = NavigableString(part)
        for tag in reversed(chain):  # rebuilt innermost first
            wrapper = soup.new_tag(tag.name, attrs=dict(tag.attrs))
            wrapper.append(node)
            node = wrapper
        block.append(node)
    return block


def code_lines(soup: BeautifulSoup, pre: Tag) -> None:
    """Each line of ``pre`` -> :func:`line_block`, its highlighting kept (a token that spans
    lines, a docstring, is cut at each line's end); the print CSS shows each as a block whose
    wrapped part hangs at the line's indentation plus :data:`HANG_CH`. The text is unchanged:
    the leading spaces stay characters and each line keeps its newline, so what is copied
    from the PDF is what the site shows."""
    lines = split_lines(pre)
    pre.clear()
    for line in lines:
        pre.append(line_block(soup, line))


# ---------------------------------------------------------------------------------------------
# The in-browser model -> a note


def web_note(soup: BeautifulSoup, lab: Tag, page_url: str, figure: Tag | None) -> Tag:
    """The note that replaces a part of the page that runs a model in the browser: what it
    does (``data-pdf-note``), the page's address, and ``figure`` (a copy of the page's first
    explorer frame) when there is one."""
    note = soup.new_tag("div", attrs={"class": "admonition note pdf-web-note"})
    title = soup.new_tag("p", attrs={"class": "admonition-title"})
    title.string = "On the website"
    note.append(title)
    body = soup.new_tag("p")
    body.append(NavigableString(lab.get("data-pdf-note") or "This section runs the model in your "
                                "browser, on any sentence you type:"))
    body.append(NavigableString(" "))
    link = soup.new_tag("a", attrs={"href": page_url, "class": "pdf-url"})
    link.string = page_url
    body.append(link)
    body.append(NavigableString(". The figure is the same model on one of the book's sentences, as the "
                                "explorer above computed it when the book was built."))
    note.append(body)
    if figure is not None:
        fig = soup.new_tag("figure", attrs={"class": "pdf-web-figure"})
        fig.append(copy.copy(figure))
        note.append(fig)
    return note
