"""The PDF edition: the built website, printed (``make pdf``; ``make pdf SOLUTIONS=hide`` for
the student edition).

The PDF is made from the website's own pages (``_build/html``), so its numbers, figures,
citations and cross-references are the site's, from the same executed notebooks. The pages
are joined in the order of ``_toc.yml`` into one HTML document (``_build/pdf/book.html``),
whose interactive parts are turned into things a page can hold:

* a figure -> its print copy (``data-print-src``: the same figure at
  ``attention_core.book.render.PRINT_SCALE`` times the website's pixels, at least 200 px an
  inch as printed), at the size the website shows it;
* an explorer -> a strip of a few of its frames (their print copies), each captioned
  with its control values; which frames is ``attention_core.book.explorers.strips.STRIPS``
  (the settings the chapter's prose points at; for a chapter not listed there, each control
  at its ends), the same table by which the explorer rendered print copies of those frames
  only; an entry that no longer matches its explorer fails the build (:class:`PrintError`);
* a self-check quiz -> its questions and choices in place, the answers and their
  explanations at the end of the chapter;
* exercises as on the page; their solutions in the full edition, none in the student edition;
* the in-browser model section -> a note with the page's address and a static figure;
* code line by line, a line too long for the column wrapping under its own indentation
  (``pdf_parts.code_lines``);
* hidden code cells shown, links to other pages turned into links inside the document,
  links out of the book followed by their address.

Each of these is one rewrite of a page (:data:`REWRITES`); the print forms of the interactive
parts are in ``_ext/pdf_parts.py``, the printing in ``_ext/pdf_chromium.py`` (both imported
as the script's neighbours; ``attention_core`` as installed, ``make setup``).

Headless Chromium prints it (``Page.printToPDF``: page numbers in the footer, the outline
from the headings; math is already SVG, typeset when the site was built) twice: the second
time with the contents' page numbers read from the first. pypdf then sets the document's
title and opens it on its outline. No TeX.
"""

from __future__ import annotations

import argparse
import copy
import html
import importlib.util
import io
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from bs4 import BeautifulSoup, Tag
from pdf_chromium import chromium, fill_contents, finish, outline_pages, overflowing, page_starts, print_pdf
from pdf_parts import (
    COLUMN_PX,
    PrintError,
    check_strips_used,
    code_lines,
    explorer_strip,
    quiz_print,
    web_note,
)

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
OUT = ROOT / "_build" / "pdf"
PDF_NAME = "learn-attention.pdf"
STUDENT_PDF_NAME = "learn-attention-student.pdf"
PRINT_CSS = Path(__file__).with_name("pdf_print.css")

WEB_MODEL_SELECTOR = "div.attention-lab, [data-web-model], [data-pdf-note]"
"""A part of a page that runs a model in the browser (chapter 13's attention lab); another
such part gets printed as a note when it carries ``data-pdf-note="what it does:"``."""

SITE_ONLY = ("script:not(.ac-frames):not(.ac-quiz-data)", "a.headerlink", "button",
             ".toggle-details__summary", "noscript", "style", ".ac-pdf-link")
"""The parts of a page that only a browser has a use for: left out of the print."""


# ---------------------------------------------------------------------------------------------
# The pages, in the book's order


def read_config(root: Path = ROOT) -> dict:
    """The book's ``_config.yml``."""
    return yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))


def toc_pages(root: Path = ROOT) -> list[tuple[str, str]]:
    """``[(docname, part caption)]`` in the order of ``_toc.yml`` (the root page first)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    pages = [(toc["root"], "")]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            pages.append((chapter["file"], part.get("caption", "")))
    return pages


def anchor(docname: str, fragment: str = "") -> str:
    """The id a page's element ``fragment`` has in the joined document."""
    base = "p-" + re.sub(r"[^A-Za-z0-9_-]", "-", docname)
    return f"{base}--{fragment}" if fragment else base


def site_url(root: Path = ROOT) -> str:
    """The website's address (the rule of ``root``'s ``_ext/site_pages.py``, loaded from its
    file: sys.path stays as it is)."""
    spec = importlib.util.spec_from_file_location("site_pages", root / "_ext" / "site_pages.py")
    site_pages = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(site_pages)
    config = read_config(root)
    return site_pages.site_url(config["repository"]["url"], (config.get("html") or {}).get("baseurl") or "")


# ---------------------------------------------------------------------------------------------
# One page of the site -> a section of the book: a rewrite for each kind of part


@dataclass(frozen=True)
class Page:
    """A built page of the site, as one section of the book prints it."""

    docname: str
    site: Path
    url: str  # the edition's website, where the note on an in-browser model sends the reader
    student: bool

    @property
    def path(self) -> Path:
        return self.site / f"{self.docname}.html"

    @property
    def chapter(self) -> str:
        return Path(self.docname).name


def drop_site_only(soup: BeautifulSoup, article: Tag, page: Page) -> None:
    """Scripts (not an explorer's or a quiz's data), buttons, permalinks: :data:`SITE_ONLY`."""
    for selector in SITE_ONLY:
        for el in article.select(selector):
            el.decompose()


def open_hidden_code(soup: BeautifulSoup, article: Tag, page: Page) -> None:
    """The website's hidden code cells (``<details>``): shown, without their summary."""
    for details in article.select("details"):
        summary = details.find("summary")
        if summary:
            summary.decompose()
        details.name = "div"
        details["class"] = [*details.get("class", []), "pdf-opened"]


def wrap_code(soup: BeautifulSoup, article: Tag, page: Page) -> None:
    """Code line by line, wrapped under its own indentation (:func:`pdf_parts.code_lines`)."""
    for pre in article.select("pre"):
        code_lines(soup, pre)


def print_explorers(soup: BeautifulSoup, article: Tag, page: Page) -> None:
    """Each explorer -> its strip of frames (:func:`pdf_parts.explorer_strip`)."""
    for explorer in article.select("div.ac-explorer"):
        explorer.replace_with(explorer_strip(soup, explorer, page.chapter))


def note_web_models(soup: BeautifulSoup, article: Tag, page: Page) -> None:
    """Each in-browser model (:data:`WEB_MODEL_SELECTOR`) -> a note with the page's address
    and the first frame of the page's explorer (:func:`pdf_parts.web_note`)."""
    for lab in article.select(WEB_MODEL_SELECTOR):
        figure = article.select_one("div.pdf-strip img")
        lab.replace_with(web_note(soup, lab, f"{page.url}{page.docname}.html", figure))


def drop_solutions(soup: BeautifulSoup, article: Tag, page: Page) -> None:
    """The student edition: no solutions."""
    if page.student:
        for sol in article.select("div.solution"):
            sol.decompose()


def print_figures(soup: BeautifulSoup, article: Tag, page: Page) -> None:
    """Each figure -> its print copy (``data-print-src``, from
    ``attention_core.book.viz.figures``) at the wide image's size, its path absolute. Raises
    :class:`PrintError` naming the chapter for a figure without one."""
    for source in article.select("picture source"):
        source.decompose()
    for img in article.select("img"):
        printed = img.attrs.pop("data-print-src", None)
        if printed:
            img["src"] = printed
        elif img.find_parent(class_="ac-figure") is not None:
            raise PrintError(f"{page.chapter}: the figure {img.get('alt', '')[:80]!r} has no print copy "
                             "(data-print-src): the website was built without it (make book)")
        src = img.get("src", "")
        if src and not src.startswith(("data:", "file:", "http")):
            img["src"] = (page.path.parent / src).resolve().as_uri()
        for attr in ("loading", "srcset", "sizes"):
            img.attrs.pop(attr, None)


def book_href(href: str, docname: str) -> str | None:
    """A link inside the book -> its anchor in the joined document; ``None`` for other links."""
    if href.startswith(("http:", "https:", "mailto:")):
        return None
    target, _, fragment = href.partition("#")
    if not target:
        return "#" + anchor(docname, fragment)
    parts: list[str] = []
    for part in (Path(docname).parent / target).as_posix().split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part != ".":
            parts.append(part)
    target = "/".join(parts)
    return "#" + anchor(target.removesuffix(".html"), fragment) if target.endswith(".html") else None


def link_inside_book(soup: BeautifulSoup, article: Tag, page: Page) -> None:
    """Ids made unique to the page (:func:`anchor`), links to other pages made links inside
    the document, links out of the book marked to print their address."""
    for el in article.find_all(id=True):
        if el.find_parent("svg") is None and el.name != "svg":
            el["id"] = anchor(page.docname, el["id"])
    for a in article.find_all("a", href=True):
        new = book_href(a["href"], page.docname)
        if new is not None:
            a["href"] = new
        elif a["href"].startswith("http") and a.get_text(strip=True) != a["href"]:
            a["class"] = [*a.get("class", []), "pdf-external"]


REWRITES = (drop_site_only, open_hidden_code, wrap_code, print_explorers, note_web_models,
            drop_solutions, print_figures, link_inside_book)
"""What :func:`page_section` does to a page's article, in this order (a web model's note
copies the explorer's printed frame; figures and links are rewritten after the notes). The
quizzes come after all of them: the parts of a question they move were rewritten with the
page, and the answers are the quiz's own HTML."""


def print_quizzes(soup: BeautifulSoup, article: Tag) -> Tag | None:
    """Each quiz -> its questions in place (:func:`pdf_parts.quiz_print`); returns the section
    of their answers, for the end of the page (``None`` for a page without a quiz)."""
    quizzes = article.select("div.ac-quiz")
    if not quizzes:
        return None
    end = soup.new_tag("section", attrs={"class": "pdf-answers"})
    heading = soup.new_tag("h2")
    heading.string = "Answers to the self-check questions"
    end.append(heading)
    for quiz in quizzes:
        questions, answers = quiz_print(soup, quiz)
        quiz.replace_with(questions)
        end.append(answers)
    return end


def page_section(docname: str, site: Path, url: str, student: bool) -> tuple[Tag, list[str]]:
    """The print form of one built page of the site (:data:`REWRITES`, then its quizzes), and
    its head's styles (MathJax's, Pygments'), for the joined document's head."""
    page = Page(docname, site, url, student)
    soup = BeautifulSoup(page.path.read_text(encoding="utf-8"), "html.parser")
    article = soup.select_one("article.bd-article")
    for rewrite in REWRITES:
        rewrite(soup, article, page)
    answers = print_quizzes(soup, article)
    styles = [str(st) for st in soup.head.find_all("style")] if soup.head else []
    section = soup.new_tag("section", attrs={"class": "pdf-page", "id": anchor(docname),
                                             "data-docname": docname})
    # MathJax's glyphs (the page's one copy sits outside its article)
    for cache in soup.select("svg#MJX-SVG-global-cache"):
        section.append(cache.extract())
    for child in list(article.contents):
        section.append(child)
    if answers is not None:
        section.append(answers)
    return section, styles


# ---------------------------------------------------------------------------------------------
# The document


def is_heading(tag: Tag) -> bool:
    """What Chromium puts in the outline: h1-h6 and elements with the role of a heading."""
    return bool(re.fullmatch(r"h[1-6]", tag.name)) or tag.get("role") == "heading"


def heading_text(tag: Tag) -> str:
    """A heading's text for the outline, an equation in it as its letters (``d_k``: dk)."""
    tag = copy.copy(tag)
    for equation in tag.select("mjx-container"):
        mml = equation.select_one("mjx-assistive-mml")
        equation.replace_with(mml.get_text("", strip=True) if mml else "")
    return " ".join(tag.get_text(" ", strip=True).split())


def page_title(section: Tag) -> str:
    h1 = section.find("h1")
    return h1.get_text(" ", strip=True) if h1 else section["data-docname"]


def title_page(config: dict, url: str, student: bool, site: Path) -> str:
    """The first page: logo, title, author, edition, the website's address, the date."""
    e = html.escape
    author = e(config.get("author", ""))
    edition = "Student edition" if student else "Full edition, with solutions"
    logo = (site / "_static" / "logo.png").resolve()
    return (f'<section class="pdf-title-page"><img class="pdf-logo" src="{logo.as_uri()}" alt="">'
            f'<p class="pdf-book-title">{e(config["title"])}</p>'
            f'<p class="pdf-book-subtitle">From the first dot product to GQA and RoPE</p>'
            f'<p class="pdf-book-author">{author}</p>'
            f'<p class="pdf-book-edition">{edition}</p>'
            f'<p class="pdf-book-url">The interactive edition: <a href="{url}">{e(url)}</a></p>'
            f'<p class="pdf-book-date">Printed {time.strftime("%Y-%m-%d", time.gmtime())} from the '
            f'website\'s build. © {e(str(config.get("copyright", "")))} {author}</p></section>')


def contents(pages: list[dict]) -> str:
    """The contents: each page under its part, its page number left empty (:func:`fill_contents`
    writes them after the first printing)."""
    items, last_part = [], None
    for page in pages:
        if page["part"] != last_part and page["part"]:
            items.append(f'<li class="pdf-toc-part">{html.escape(page["part"])}</li>')
            last_part = page["part"]
        items.append(f'<li><a href="#{anchor(page["docname"])}"><span class="pdf-toc-title">'
                     f'{html.escape(page["title"])}</span><span class="pdf-toc-page" '
                     f'data-for="{html.escape(page["docname"])}"></span></a></li>')
    return f'<nav class="pdf-toc"><p class="pdf-toc-heading">Contents</p><ol>{"".join(items)}</ol></nav>'


def shared_glyphs(sections: list[Tag]) -> str:
    """One copy of MathJax's glyphs, taken out of the sections (each page carries its own,
    with the same ids)."""
    glyphs, seen = [], set()
    for section in sections:
        for cache in section.select("svg#MJX-SVG-global-cache"):
            for path in cache.find_all(id=True):
                if path["id"] not in seen:
                    seen.add(path["id"])
                    glyphs.append(str(path))
            cache.decompose()
    return (f'<svg id="MJX-SVG-global-cache" style="display:none" aria-hidden="true"><defs>'
            f'{"".join(glyphs)}</defs></svg>')


def book_html(site: Path, student: bool, root: Path = ROOT) -> tuple[str, list[dict], list[str]]:
    """The joined document, a list of its pages (``docname``, ``title``, ``part``) and its
    headings in order (the outline's titles). Raises :class:`PrintError` for a chapter of
    :data:`STRIPS` that has no explorer (renamed?)."""
    config = read_config(root)
    url = site_url(root) + ("student/" if student else "")  # where publish.yml puts each edition
    sections, styles, pages = [], [], []
    for docname, part in toc_pages(root):
        section, head_styles = page_section(docname, site, url, student)
        sections.append(section)
        styles += head_styles
        pages.append({"docname": docname, "title": page_title(section), "part": part})
    check_strips_used({Path(s["data-docname"]).name for s in sections if s.select_one("div.pdf-strip")})
    front = title_page(config, url, student, site) + contents(pages)
    defs = shared_glyphs(sections)
    titles = [heading_text(h) for section in sections for h in section.find_all(is_heading)]
    links = "".join(f'<link rel="stylesheet" href="{p.resolve().as_uri()}">'
                    for p in sorted((site / "_static" / "styles").glob("site-*.css")))
    doc = (f'<!DOCTYPE html><html lang="en" data-theme="light"><head><meta charset="utf-8">'
           f'<title>{html.escape(config["title"])}</title>{links}{"".join(dict.fromkeys(styles))}'
           f'<style>{PRINT_CSS.read_text(encoding="utf-8")}</style></head>'
           f'<body class="pdf-edition{" pdf-student" if student else ""}">{defs}'
           f'<article class="bd-article">{front}{"".join(str(s) for s in sections)}</article></body></html>')
    return doc, pages, titles


# ---------------------------------------------------------------------------------------------
# Printing


def timed(what: str, run, *args):
    """``run(*args)``, its time written to stderr."""
    t = time.time()
    result = run(*args)
    print(f"pdf: {what} {time.time() - t:.0f} s", file=sys.stderr)
    return result


def print_twice(doc: str, html_path: Path, pages: list[dict], title: str) -> tuple[bytes, list[str]]:
    """The PDF of ``doc`` (written to ``html_path``), printed twice: the second time with the
    contents' page numbers read from the first; and what runs past the column
    (:func:`pdf_chromium.overflowing`)."""
    from pypdf import PdfReader

    html_path.write_text(doc, encoding="utf-8")
    with chromium() as driver:
        first = timed("first printing", print_pdf, driver, html_path, title)
        starts = page_starts(outline_pages(PdfReader(io.BytesIO(first))), pages)
        html_path.write_text(fill_contents(doc, starts), encoding="utf-8")  # the contents' page numbers
        second = timed("second printing", print_pdf, driver, html_path, title)
        wide = overflowing(driver, COLUMN_PX)
    return second, wide


def build(student: bool = False, site: Path = SITE, out: Path = OUT, root: Path = ROOT) -> Path:
    """The PDF of the website in ``site`` (the student edition: without solutions) in ``out``,
    with ``book[-student].html`` (what was printed) and ``book[-student].json`` (its pages, the
    page each starts on, what runs past the column)."""
    from pypdf import PdfReader

    t0 = time.time()
    if not (site / "index.html").exists():
        raise SystemExit(f"no website in {site}: run `make book` first")
    config = read_config(root)
    title = config["title"] + (" (student edition)" if student else "")
    out.mkdir(parents=True, exist_ok=True)
    stem = "book-student" if student else "book"
    pdf_path = out / (STUDENT_PDF_NAME if student else PDF_NAME)
    doc, pages, titles = book_html(site, student, root=root)
    printed, wide = print_twice(doc, out / f"{stem}.html", pages, title)
    for w in wide:
        print(f"pdf: warning: wider than the page: {w}", file=sys.stderr)
    reader = PdfReader(io.BytesIO(printed))
    entries = outline_pages(reader)
    starts = page_starts(entries, pages)
    author = config.get("author", "")
    timed("outline and information", finish, reader, entries, pdf_path, title, author, titles)
    manifest = {"pdf": pdf_path.name, "student": student, "overflowing": wide, "pages": [
        {**p, "start": starts.get(p["docname"])} for p in pages]}
    (out / f"{stem}.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False), encoding="utf-8")
    shown = pdf_path.relative_to(root) if pdf_path.is_relative_to(root) else pdf_path
    print(f"pdf: {shown}: {len(reader.pages)} pages, "
          f"{pdf_path.stat().st_size / 1e6:.1f} MB, {time.time() - t0:.0f} s")
    return pdf_path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--solutions", choices=("show", "hide"), default="show",
                        help="hide: the student edition, without solutions")
    args = parser.parse_args(argv)
    try:
        build(student=args.solutions == "hide")
    except PrintError as error:
        raise SystemExit(f"pdf: {error}") from error


if __name__ == "__main__":
    main()
