"""Reading a page of the website with a parser (html.parser) and editing it at the places the
parser found, so that the rest of the page stays byte for byte as it was written
(``_ext/site_pages.py``). An edit is ``(start, end, new)``: ``text[start:end]`` becomes ``new``."""

import html
from dataclasses import dataclass
from html.parser import HTMLParser

VOID = frozenset(["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
                  "track", "wbr"])  # elements without content or end tag


@dataclass
class Element:
    """One element of a page: its tag, its attributes in the order written (name -> value,
    None for a bare attribute), and where it lies in the page's text as offsets: its start
    tag is ``text[start:open_end]``, its content ``text[open_end:close]``, its end tag
    ``text[close:end]`` (``close == end == open_end`` for a void or self-closed element)."""
    tag: str
    attrs: dict
    start: int
    open_end: int
    close: int = -1
    end: int = -1

    @property
    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()


class Page(HTMLParser):
    """A page (``text``) read: ``elements``, every element in document order (Element), and
    ``data``, the runs of text between tags (str), script and style contents included."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.text, self.elements, self.open, self.data = text, [], [], []
        self.lines = [0]
        while (newline := text.find("\n", self.lines[-1])) >= 0:
            self.lines.append(newline + 1)
        self.feed(text)
        self.close()
        for element in self.open:  # never closed: up to the end of the page
            element.close = element.end = len(text)

    def position(self) -> int:
        line, column = self.getpos()
        return self.lines[line - 1] + column

    def handle_starttag(self, tag, attrs, closed=False):
        start = self.position()
        element = Element(tag, dict(attrs), start, start + len(self.get_starttag_text()))
        self.elements.append(element)
        if closed or tag in VOID:
            element.close = element.end = element.open_end
        else:
            self.open.append(element)

    def handle_data(self, data):
        self.data.append(data)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs, closed=True)

    def handle_endtag(self, tag):
        if not any(e.tag == tag for e in self.open):
            return  # a stray end tag
        close = self.position()
        end = self.text.index(">", close) + 1
        while self.open:  # elements left open inside it end where it ends
            element = self.open.pop()
            element.close, element.end = (close, end) if element.tag == tag else (close, close)
            if element.tag == tag:
                break

    def first(self, tag: str):
        return next((e for e in self.elements if e.tag == tag), None)

    def inside(self, outer: Element) -> list[Element]:
        return [e for e in self.elements if outer.open_end <= e.start < outer.close]


def start_tag(tag: str, attrs: dict) -> str:
    """``<tag name="value" bare>``: attributes written in the order given."""
    def quoted(value: str) -> str:
        return '"' + html.escape(value, quote=False).replace('"', "&quot;") + '"'
    return f"<{tag}" + "".join(f" {name}" + (f"={quoted(value)}" if value is not None else "")
                               for name, value in attrs.items()) + ">"


def apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    """``text`` with each ``(start, end, new)`` of ``edits`` (none overlapping) done."""
    parts, done = [], 0
    for start, end, new in sorted(edits, key=lambda edit: (edit[0], edit[1])):
        assert start >= done, f"overlapping edits at {start}"
        parts += [text[done:start], new]
        done = end
    return "".join(parts + [text[done:]])


def removal(text: str, element: Element) -> tuple[int, int, str]:
    """The edit that removes ``element`` with the whitespace before it (its line)."""
    start = element.start
    while start > 0 and text[start - 1].isspace():
        start -= 1
    return start, element.end, ""


def src_path(element: Element, name: str = "src") -> str:
    """An attribute's URL without its query: ``../_static/x.js?v=1`` -> ``../_static/x.js``."""
    return (element.attrs.get(name) or "").split("?", 1)[0].split("#", 1)[0]
