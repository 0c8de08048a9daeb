"""The chapters' prose is checked the way ruff checks their code (WRITING.md).

A sentence of more than MAX_WORDS words in a chapter's markdown fails the test, which names
the chapter and the sentence. Boxes ("How far this goes", notes), exercises and solutions
are prose too and are counted. Counting follows the gauge the book's readability targets
were set with (``../shared/tools/prose_metrics.py``): a piece of math, a code span, a
citation, a glued number or a cross-reference counts as one word; code blocks, headings,
tables and directive options are not prose.
"""

import json
import re

import pytest

from conftest import ROOT

MAX_WORDS = 45
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))

# directives whose body is prose; any other fenced block (code, math, raw html) is not
PROSE_DIRECTIVES = {"admonition", "note", "tip", "warning", "important", "hint", "caution",
                    "attention", "seealso", "dropdown", "margin", "sidebar", "exercise",
                    "solution", "topic", "epigraph"}
FENCE = re.compile(r"^(`{3,}|:{3,})\s*(?:\{([\w-]+)\})?.*$")
ABBREVIATIONS = ("e.g.", "i.e.", "et al.", "etc.", "vs.", "Fig.", "Eq.", "cf.", "approx.")
WORD = re.compile(r"[\w\u00C0-\u024F\u0370-\u03FF][\w\u00C0-\u024F\u0370-\u03FF'’.,-]*")


def markdown_of(notebook) -> str:
    """The markdown cells of a notebook, one after the other."""
    cells = json.loads(notebook.read_text())["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def strip_blocks(markdown: str) -> str:
    """Drop code and other non-prose blocks and their fences; keep the bodies of prose
    directives without their fence and option lines."""
    out, stack = [], []  # stack of (fence, keeps its body)
    for line in markdown.splitlines():
        stripped = line.strip()
        match = FENCE.match(stripped)
        if match and stack and stripped == stack[-1][0]:
            stack.pop()
            continue
        if match and (match[2] or not stack or stack[-1][1]):
            inside_prose = all(keep for _, keep in stack)
            stack.append((match[1], inside_prose and match[2] in PROSE_DIRECTIVES))
            continue
        if stack and not stack[-1][1]:
            continue
        if stack and re.match(r"^:[\w-]+:", stripped):  # a directive's option
            continue
        out.append(line)
    return "\n".join(out)


def clean(markdown: str) -> str:
    """Prose with every piece of math, code, citation, glued value and reference as one word."""
    text = strip_blocks(markdown)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"^\s*\([\w:-]+\)=\s*$", "", text, flags=re.M)  # MyST labels
    text = re.sub(r"\$\$.*?\$\$", " MATH ", text, flags=re.S)
    text = re.sub(r"(?<![\\$])\$(?!\s)[^$\n]+?(?<!\s)\$", " MATH ", text)
    text = re.sub(r"\{cite(?::\w+)?\}`[^`]*`", "CITE", text)
    text = re.sub(r"\{glue(?::\w+)?\}`[^`]*`", "NUM", text)
    text = re.sub(r"\{(?:term|ref|doc|numref)\}`([^`<]*?)\s*<[^`]*>`", r"\1", text)
    text = re.sub(r"\{term\}`([^`]*)`", r"\1", text)
    text = re.sub(r"\{(?:ref|doc|numref|eq|download)\}`[^`]*`", "REF", text)
    text = re.sub(r"\{[\w:-]+\}`([^`]*)`", r"\1", text)  # any other role: its text
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)  # images
    text = re.sub(r"\[([^\[\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = re.sub(r"``[^`]+``|`[^`\n]+`", "CODE", text)
    text = re.sub(r"<[^>\n]+>", " ", text)  # html tags
    return text


def paragraphs(text: str) -> list[str]:
    """Paragraphs of running prose; every list item is one, headings and tables are none."""
    paras, current = [], []
    for line in text.splitlines() + [""]:
        stripped = re.sub(r"^(>\s*)+", "", line.strip())
        item = re.match(r"^([-*+]|\d+[.)])\s+", stripped)
        if not stripped or stripped.startswith(("#", "|")) or item:
            if current:
                paras.append(" ".join(current))
            current = [stripped[item.end():]] if item else []
            continue
        current.append(stripped)
    return [p for p in paras if p.strip()]


def sentences(paragraph: str) -> list[str]:
    """Split at a full stop, question or exclamation mark followed by a space and a capital,
    a digit or an opening quote or bracket; abbreviations do not end a sentence."""
    protected = paragraph
    for abbreviation in ABBREVIATIONS:
        protected = protected.replace(abbreviation, abbreviation.replace(".", "\0"))
    parts = re.split(r"(?<=[.!?])[)\"'”’]?\s+(?=[A-Z0-9\"'“‘(\[])", protected)
    return [part.replace("\0", ".").strip() for part in parts if part.strip()]


def words(sentence: str) -> int:
    return len(WORD.findall(sentence))


def long_sentences(markdown: str, limit: int = MAX_WORDS) -> list[tuple[int, str]]:
    return [(words(s), s) for p in paragraphs(clean(markdown)) for s in sentences(p)
            if words(s) > limit]


def test_counting_follows_the_gauge():
    """Math, code, citations and glue are one word each; boxes are prose; code blocks are
    not; sentences end at a full stop before a capital, not at 'e.g.'."""
    body = " ".join(["word"] * 40)
    assert long_sentences(f"{body} $a + b = c$ `x.view(1, 2)` {{cite:p}}`vaswani2017`"
                          " {glue:text}`gap:.2f` end.") == []  # 45 words
    assert len(long_sentences(f"{body} one two three four five six.")) == 1  # 46 words
    assert long_sentences(f"{body}. Then {body} e.g. three.") == []
    box = f"```{{admonition}} How far this goes\n:class: dropdown\n- {body} a b c d e f.\n```"
    assert [n for n, _ in long_sentences(box)] == [46]
    assert long_sentences(f"```python\n{body} a b c d e f g h\n```") == []
    assert [n for n, _ in long_sentences(f":::{{note}}\n{body} a b c d e f.\n:::")] == [46]
    assert sentences("It is 2.5 times e.g. larger. Then (a) new one.") == [
        "It is 2.5 times e.g. larger.", "Then (a) new one."]


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.stem)
def test_no_sentence_over_the_limit(notebook):
    found = long_sentences(markdown_of(notebook))
    assert not found, (f"{notebook.name}: {len(found)} sentences over {MAX_WORDS} words (WRITING.md):\n"
                       + "\n".join(f"  ({n} words) {s}" for n, s in found))
