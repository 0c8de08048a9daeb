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
  (:func:`code_lines`);
* hidden code cells shown, links to other pages turned into links inside the document,
  links out of the book followed by their address.

Headless Chromium prints it (``Page.printToPDF``: page numbers in the footer, the outline
from the headings; math is already SVG, typeset when the site was built) twice: the second
time with the contents' page numbers read from the first. pypdf then sets the document's
title and opens it on its outline. No TeX.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import html
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml
from bs4 import BeautifulSoup, NavigableString, Tag

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, whatever the environment has installed
from attention_core.book.explorers.strips import STRIPS, StripError, strip_frames  # noqa: E402

SITE = ROOT / "_build" / "html"
OUT = ROOT / "_build" / "pdf"
PDF_NAME = "learn-attention.pdf"
STUDENT_PDF_NAME = "learn-attention-student.pdf"
PRINT_CSS = Path(__file__).with_name("pdf_print.css")

CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-dev-shm-usage",
                  "--host-resolver-rules=MAP * ~NOTFOUND")


class PrintError(RuntimeError):
    """Something the PDF cannot print as the book means it (a strip of :data:`STRIPS` that
    no longer matches its explorer, a figure without its print copy); the message names the
    chapter, and ``make pdf`` fails on it."""


WEB_MODEL_SELECTOR = "div.attention-lab, [data-web-model], [data-pdf-note]"
"""A part of a page that runs a model in the browser (chapter 13's attention lab); another
such part gets printed as a note when it carries ``data-pdf-note="what it does:"``."""


# ---------------------------------------------------------------------------------------------
# The pages, in the book's order


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
    """The website's address (``_ext/site_pages.py``'s rule)."""
    sys.path.insert(0, str(root / "_ext"))
    try:
        from site_pages import site_url as rule
    finally:
        sys.path.pop(0)
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    return rule(config["repository"]["url"], (config.get("html") or {}).get("baseurl") or "")


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


def explorer_strip(soup: BeautifulSoup, explorer: Tag, chapter: str) -> Tag:
    """The printed explorer: a grid of the frames of ``chapter``'s strip
    (:func:`attention_core.book.explorers.strips.strip_frames`), each captioned with its control
    values, each the frame's print copy (``print_images``,
    :data:`attention_core.book.render.PRINT_SCALE`) shown at the size of its wide rendering.
    Raises :class:`PrintError` naming the chapter when its :data:`STRIPS` entry no longer
    matches the explorer, or when a frame it prints has no print copy."""
    data = json.loads(explorer.select_one("script.ac-frames").string)
    wide = data["layouts"]["wide"]
    try:
        chosen = strip_frames(chapter, data["names"], data["labels"], data["start"], wide["index"])
    except StripError as error:
        raise PrintError(str(error)) from error
    printed = wide.get("print_images") or {}
    missing = [shown for frame, shown in chosen if str(frame) not in printed]
    if missing:
        made_for = data.get("chapter") or "no chapter"
        raise PrintError(f"{chapter}: the explorer ({data['alt']}) has no print copy of the frame(s) "
                         f"{missing}: it was rendered for the strip of {made_for} (Explorer(chapter=...)), "
                         "or the website was built without print copies (make book)")
    frames = [(printed[str(frame)], shown) for frame, shown in chosen]
    strip = soup.new_tag("div", attrs={"class": "pdf-strip", "data-frames": str(len(frames))})
    intro = soup.new_tag("p", attrs={"class": "pdf-strip-note"})
    intro.string = (f"Explorer, {len(frames)} of its settings (on the website: controls for "
                    + ", ".join(data["names"]) + ").")
    strip.append(intro)
    grid = soup.new_tag("div", attrs={"class": "pdf-strip-frames"})
    for src, shown in frames:
        figure = soup.new_tag("figure", attrs={"class": "pdf-frame"})
        figure.append(soup.new_tag("img", attrs={
            "src": src, "width": str(wide["width"]), "height": str(wide["height"]),
            "alt": f"{data['alt']} Shown: " + ", ".join(f"{a} {b}" for a, b in zip(data["names"], shown)),
            "data-min-text-px": str(wide.get("min_text_px") or ""),
            "data-print-scale": str(wide.get("print_scale") or "")}))
        caption = soup.new_tag("figcaption")
        caption.string = ", ".join(f"{a} = {b}" for a, b in zip(data["names"], shown))
        figure.append(caption)
        grid.append(figure)
    strip.append(grid)
    strip["data-columns"] = str(strip_columns(wide["width"], wide.get("min_text_px") or 0.0))
    return strip


# ---------------------------------------------------------------------------------------------
# Self-check quizzes -> questions here, answers at the chapter's end


def _number(value: float, tolerance: float) -> str:
    decimals = max(0, min(6, math.ceil(-math.log10(tolerance)) if tolerance > 0 else 3))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def quiz_print(soup: BeautifulSoup, quiz: Tag, number: str) -> tuple[Tag, Tag]:
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
        text = soup.new_tag("p")
        for child in list(legend.contents):
            text.append(child)
        li.append(text)
        answer = soup.new_tag("li")
        if item["kind"] == "choice":
            choices = soup.new_tag("ol", attrs={"class": "pdf-choices", "type": "a"})
            for label in form.select("label.ac-quiz-choice"):
                c = soup.new_tag("li")
                span = label.select_one("span")
                for child in list((span or label).contents):
                    c.append(child)
                choices.append(c)
            li.append(choices)
            right = [k for k, ch in enumerate(item["choices"]) if ch["correct"]]
            letters = ", ".join(f"({chr(97 + k)})" for k in right)
            # the explanations are the quiz's own inline HTML (selfcheck.inline_html: escaped
            # text and <code>), as the site shows them
            why = " ".join(item["choices"][k]["why"] for k in right)
            answer.append(BeautifulSoup(f"<strong>{letters}</strong> \u2014 {why}", "html.parser"))
        else:
            blank = soup.new_tag("p", attrs={"class": "pdf-blank"})
            blank.string = "Your answer: " + "_" * 16 + (f" {item.get('unit')}" if item.get("unit") else "")
            li.append(blank)
            value = _number(item["answer"], item.get("tolerance", 0.0))
            unit = f" {item['unit']}" if item.get("unit") else ""
            answer.append(BeautifulSoup(f"<strong>{html.escape(value)}{html.escape(unit)}</strong> \u2014 "
                                        f"{item.get('why', '')}", "html.parser"))
        questions.append(li)
        answers.append(answer)
    return questions, answers


# ---------------------------------------------------------------------------------------------
# Code: each line a block, so that a line too long for the column wraps under its own indent

HANG_CH = 4
"""A wrapped line of code continues this many characters right of the line's indentation
(as Python's own continuation lines do), so that it reads as one line."""
MAX_HANG_CH = 40
"""Deeply indented code hangs no further than this (the rest of the column stays for text)."""


def code_lines(soup: BeautifulSoup, pre: Tag) -> None:
    """Each line of ``pre`` -> ``<span class="pdf-code-line" style="--hang: Nch">``, its
    highlighting kept (a token that spans lines, a docstring, is cut at each line's end);
    the print CSS shows each as a block whose wrapped part hangs at the line's indentation
    plus :data:`HANG_CH`. The text is unchanged: the leading spaces stay characters and each
    line keeps its newline, so what is copied from the PDF is what the site shows."""
    lines: list[list[tuple[str, list[Tag]]]] = [[]]

    def walk(node, chain: list[Tag]) -> None:
        for child in list(node.children):
            if isinstance(child, NavigableString):
                parts = str(child).split("\n")
                for k, part in enumerate(parts):
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
    pre.clear()
    for line in lines:
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
        pre.append(block)


# ---------------------------------------------------------------------------------------------
# One page of the site -> a section of the book


def _rewrite_href(href: str, docname: str) -> str | None:
    """A link inside the book -> its anchor in the joined document; ``None`` for other links."""
    if href.startswith(("http:", "https:", "mailto:")):
        return None
    page, _, fragment = href.partition("#")
    if not page:
        return "#" + anchor(docname, fragment) if fragment else "#" + anchor(docname)
    base = Path(docname).parent
    target = (base / page).as_posix()
    parts = []
    for part in target.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part != ".":
            parts.append(part)
    target = "/".join(parts)
    if not target.endswith(".html"):
        return None
    target_doc = target[:-5]
    return "#" + anchor(target_doc, fragment)


def page_section(docname: str, site: Path, url: str, student: bool) -> Tag:
    """The print form of one built page of the site."""
    path = site / f"{docname}.html"
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    article = soup.select_one("article.bd-article")
    chapter = Path(docname).name
    page_dir = path.parent

    for sel in ("script:not(.ac-frames):not(.ac-quiz-data)", "a.headerlink", "button",
                ".toggle-details__summary", "noscript", "style", ".ac-pdf-link"):
        for el in article.select(sel):
            el.decompose()
    # the website's hidden code cells: shown
    for details in article.select("details"):
        summary = details.find("summary")
        if summary:
            summary.decompose()
        details.name = "div"
        details["class"] = [*details.get("class", []), "pdf-opened"]
    # code: wrapped lines under their own indentation
    for pre in article.select("pre"):
        code_lines(soup, pre)
    # explorers
    for explorer in article.select("div.ac-explorer"):
        explorer.replace_with(explorer_strip(soup, explorer, chapter))
    # the in-browser model: a note with the page's address and a static figure
    for lab in article.select(WEB_MODEL_SELECTOR):
        note = soup.new_tag("div", attrs={"class": "admonition note pdf-web-note"})
        title = soup.new_tag("p", attrs={"class": "admonition-title"})
        title.string = "On the website"
        note.append(title)
        body = soup.new_tag("p")
        page_url = f"{url}{docname}.html"
        body.append(NavigableString(lab.get("data-pdf-note") or "This section runs the model in your "
                                    "browser, on any sentence you type:"))
        body.append(NavigableString(" "))
        link = soup.new_tag("a", attrs={"href": page_url, "class": "pdf-url"})
        link.string = page_url
        body.append(link)
        body.append(NavigableString(". The figure is the same model on one of the book's sentences, as the "
                                    "explorer above computed it when the book was built."))
        note.append(body)
        strip = article.select_one("div.pdf-strip img")
        if strip is not None:
            fig = soup.new_tag("figure", attrs={"class": "pdf-web-figure"})
            fig.append(copy.copy(strip))
            note.append(fig)
        lab.replace_with(note)
    # quizzes: questions here, answers at the chapter's end
    answer_lists = []
    for quiz in article.select("div.ac-quiz"):
        questions, answers = quiz_print(soup, quiz, chapter)
        quiz.replace_with(questions)
        answer_lists.append(answers)
    # student edition: no solutions
    if student:
        for sol in article.select("div.solution"):
            sol.decompose()
    # figures: the wide image's print copy (attention_core.book.viz.figures' data-print-src),
    # shown at the wide image's size; its path absolute
    for source in article.select("picture source"):
        source.decompose()
    for img in article.select("img"):
        printed = img.attrs.pop("data-print-src", None)
        if printed:
            img["src"] = printed
        elif img.find_parent(class_="ac-figure") is not None:
            raise PrintError(f"{chapter}: the figure {img.get('alt', '')[:80]!r} has no print copy "
                             "(data-print-src): the website was built without it (make book)")
        src = img.get("src", "")
        if src and not src.startswith(("data:", "file:", "http")):
            img["src"] = (page_dir / src).resolve().as_uri()
        for attr in ("loading", "srcset", "sizes"):
            img.attrs.pop(attr, None)
    # ids and links inside the book
    for el in article.find_all(id=True):
        if el.find_parent("svg") is None and el.name != "svg":
            el["id"] = anchor(docname, el["id"])
    for a in article.find_all("a", href=True):
        new = _rewrite_href(a["href"], docname)
        if new is not None:
            a["href"] = new
        elif a["href"].startswith("http") and a.get_text(strip=True) != a["href"]:
            a["class"] = [*a.get("class", []), "pdf-external"]
    # the head's own styles (MathJax's, Pygments'), collected once by book_html
    section_styles = [str(st) for st in soup.head.find_all("style")] if soup.head else []
    section = soup.new_tag("section", attrs={"class": "pdf-page", "id": anchor(docname),
                                             "data-docname": docname})
    # MathJax's glyphs (the page's one copy sits outside its article)
    for cache in soup.select("svg#MJX-SVG-global-cache"):
        section.append(cache.extract())
    for child in list(article.contents):
        section.append(child)
    section.head_styles = section_styles
    if answer_lists:
        end = soup.new_tag("section", attrs={"class": "pdf-answers"})
        h = soup.new_tag("h2")
        h.string = "Answers to the self-check questions"
        end.append(h)
        for answers in answer_lists:
            end.append(answers)
        section.append(end)
    return section


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


def book_html(site: Path, student: bool, page_numbers: dict[str, int] | None = None,
              root: Path = ROOT) -> tuple[str, list[dict], list[str], list[str]]:
    """The joined document, a list of its pages (``docname``, ``title``, ``part``) and its
    headings in order (the outline's titles). Raises :class:`PrintError` for a chapter of
    :data:`STRIPS` that has no explorer (renamed?)."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    url = site_url(root) + ("student/" if student else "")  # where publish.yml puts each edition
    sections, pages = [], []
    for docname, part in toc_pages(root):
        section = page_section(docname, site, url, student)
        sections.append(section)
        pages.append({"docname": docname, "title": page_title(section), "part": part})
    check_strips_used({Path(s["data-docname"]).name for s in sections if s.select_one("div.pdf-strip")})
    css = sorted((site / "_static" / "styles").glob("site-*.css"))
    links = "".join(f'<link rel="stylesheet" href="{p.resolve().as_uri()}">' for p in css)
    title = config["title"]
    edition = "Student edition" if student else "Full edition, with solutions"
    logo = (site / "_static" / "logo.png").resolve()
    numbers = page_numbers or {}
    toc, last_part = [], None
    for page in pages:
        if page["part"] != last_part and page["part"]:
            toc.append(f'<li class="pdf-toc-part">{html.escape(page["part"])}</li>')
            last_part = page["part"]
        n = numbers.get(page["docname"], "")
        toc.append(f'<li><a href="#{anchor(page["docname"])}"><span class="pdf-toc-title">'
                   f'{html.escape(page["title"])}</span><span class="pdf-toc-page" '
                   f'data-for="{html.escape(page["docname"])}">{n}</span></a></li>')
    front = (f'<section class="pdf-title-page"><img class="pdf-logo" src="{logo.as_uri()}" alt="">'
             f'<p class="pdf-book-title">{html.escape(title)}</p>'
             f'<p class="pdf-book-subtitle">From the first dot product to GQA and RoPE</p>'
             f'<p class="pdf-book-author">{html.escape(config.get("author", ""))}</p>'
             f'<p class="pdf-book-edition">{edition}</p>'
             f'<p class="pdf-book-url">The interactive edition: <a href="{url}">{html.escape(url)}</a></p>'
             f'<p class="pdf-book-date">Printed {time.strftime("%Y-%m-%d", time.gmtime())} from the '
             f'website\'s build. © {html.escape(str(config.get("copyright", "")))} '
             f'{html.escape(config.get("author", ""))}</p></section>'
             f'<nav class="pdf-toc"><p class="pdf-toc-heading">Contents</p><ol>{"".join(toc)}</ol></nav>')
    # one copy of MathJax's glyphs (each page carries its own, with the same ids)
    glyphs, seen = [], set()
    for section in sections:
        for cache in section.select("svg#MJX-SVG-global-cache"):
            for path in cache.find_all(id=True):
                if path["id"] not in seen:
                    seen.add(path["id"])
                    glyphs.append(str(path))
            cache.decompose()
    defs = (f'<svg id="MJX-SVG-global-cache" style="display:none" aria-hidden="true"><defs>'
            f'{"".join(glyphs)}</defs></svg>')
    styles = list(dict.fromkeys(st for section in sections for st in section.head_styles))
    titles = [heading_text(h) for section in sections for h in section.find_all(is_heading)]
    body = "".join(str(s) for s in sections)
    doc = (f'<!DOCTYPE html><html lang="en" data-theme="light"><head><meta charset="utf-8">'
           f'<title>{html.escape(title)}</title>{links}{"".join(styles)}'
           f'<style>{PRINT_CSS.read_text(encoding="utf-8")}</style></head>'
           f'<body class="pdf-edition{" pdf-student" if student else ""}">{defs}'
           f'<article class="bd-article">{front}{body}</article></body></html>')
    return doc, pages, titles


# ---------------------------------------------------------------------------------------------
# Printing


def browser_paths() -> tuple[str | None, str | None]:
    """Chromium and its driver: Debian's (``.ci/run``), or Chrome and the driver a GitHub
    runner comes with (``$CHROMEWEBDRIVER``); ``$PDF_CHROME`` and ``$PDF_CHROMEDRIVER`` win."""
    binary = os.environ.get("PDF_CHROME") or next(
        (shutil.which(n) for n in ("chromium", "google-chrome", "chromium-browser") if shutil.which(n)), None)
    driver = os.environ.get("PDF_CHROMEDRIVER") or shutil.which("chromedriver")
    if not driver and os.environ.get("CHROMEWEBDRIVER"):
        driver = str(Path(os.environ["CHROMEWEBDRIVER"]) / "chromedriver")
    return binary, driver


@contextlib.contextmanager
def chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = browser_paths()
    if not binary:
        raise SystemExit("make pdf needs Chromium (Debian: apt-get install chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="pdf-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for flag in (*CHROMIUM_FLAGS, "--window-size=1000,1400", f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    driver = None
    try:
        driver = webdriver.Chrome(service=Service(driver_path), options=opts)
        yield driver
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


FOOTER = ('<div style="font-size:8pt;width:100%;padding:0 14mm;color:#555;display:flex;'
          'justify-content:space-between;font-family:sans-serif">'
          '<span>{title}</span><span class="pageNumber"></span></div>')


OVERFLOW_JS = """
const out = [];
for (const el of document.querySelectorAll('pre, div.math, mjx-container, table, img, .pdf-strip, dl, p')) {
  if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible'
      || el.getBoundingClientRect().right > document.body.getBoundingClientRect().right + 1) {
    const page = el.closest('section.pdf-page');
    out.push((page ? page.dataset.docname : '') + ': ' + el.tagName.toLowerCase() + ' '
             + (el.textContent || el.getAttribute('alt') || '').trim().slice(0, 60));
  }
}
return out;
"""


def overflowing(driver) -> list[str]:
    """What would run past the printed column: laid out at the column's width in print
    media, every code block, equation, table and image that is wider than its box or
    reaches past the page's right edge."""
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": COLUMN_PX, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
    try:
        return driver.execute_script(OVERFLOW_JS)
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})


def print_pdf(driver, html_path: Path, title: str) -> bytes:
    driver.get(html_path.resolve().as_uri())
    driver.execute_script("return document.fonts.ready.then(() => true)")
    # every image decoded before printing
    driver.execute_async_script(
        "const done = arguments[0];"
        "Promise.all([...document.images].map(i => i.complete ? 0"
        " : new Promise(r => {i.onload = i.onerror = r;}))).then(() => done(true));")
    result = driver.execute_cdp_cmd("Page.printToPDF", {
        "printBackground": True, "preferCSSPageSize": True, "displayHeaderFooter": True,
        "headerTemplate": "<span></span>",
        "footerTemplate": FOOTER.format(title=html.escape(title)),
        "generateDocumentOutline": True, "generateTaggedPDF": True,
    })
    return base64.b64decode(result["data"])


def clean_title(title: str) -> str:
    """Chromium's outline repeats some headings' text ("1. Basics1. Basics"): once."""
    title = " ".join(title.split())
    half = len(title) // 2
    if len(title) % 2 == 0 and title[:half] == title[half:]:
        return title[:half]
    return title


def outline_pages(pdf) -> list[tuple[str, int, int]]:
    """``[(title, level, page number from 1)]`` of the outline of ``pdf`` (a path or a
    ``PdfReader``), in order."""
    from pypdf import PdfReader

    reader = pdf if isinstance(pdf, PdfReader) else PdfReader(str(pdf))
    out = []

    def walk(items, level):
        for item in items:
            if isinstance(item, list):
                walk(item, level + 1)
            else:
                out.append((clean_title(item.title), level, reader.get_destination_page_number(item) + 1))

    walk(reader.outline, 0)
    return out


def fill_contents(doc: str, starts: dict[str, int]) -> str:
    """The page numbers in the contents, from the first printing (the contents are one
    line a page, so numbers move nothing)."""
    def number(match: re.Match) -> str:
        return f'{match.group(1)}{starts.get(html.unescape(match.group(2)), "")}</span>'
    return re.sub(r'(<span class="pdf-toc-page" data-for="([^"]*)">)[^<]*</span>', number, doc)


def page_starts(entries: list[tuple[str, int, int]], pages: list[dict]) -> dict[str, int]:
    """Docname -> the page it starts on: the outline's first-level entries are the pages'
    titles (their h1), in order."""
    top = [p for _, level, p in entries if level == 0]
    if len(top) != len(pages):
        raise RuntimeError(f"the PDF's outline has {len(top)} first-level entries for {len(pages)} pages")
    return {page["docname"]: start for page, start in zip(pages, top)}


def finish(reader, entries, pdf_path: Path, title: str, author: str, titles: list[str]) -> None:
    """The outline rebuilt with the headings' own text (Chromium's repeats or cuts some),
    a first entry for the contents, the title and author in the PDF's information, and a
    viewer opens it on the outline."""
    from pypdf import PdfWriter

    if len(entries) == len(titles):
        entries = [(name, level, page) for name, (_, level, page) in zip(titles, entries)]
    else:
        print(f"pdf: warning: {len(entries)} outline entries for {len(titles)} headings: "
              "Chromium's titles kept", file=sys.stderr)
    writer = PdfWriter(clone_from=reader)
    writer._root_object.pop("/Outlines", None)
    writer.add_outline_item(title="Contents", page_number=1)
    parents: list = []
    for name, level, page in entries:
        parents = parents[:level]
        item = writer.add_outline_item(title=name, page_number=page - 1,
                                       parent=parents[-1] if parents else None)
        parents.append(item)
    writer.add_metadata({"/Title": title, "/Author": author, "/Creator": "Learn Attention: make pdf"})
    writer.page_mode = "/UseOutlines"
    with open(pdf_path, "wb") as f:
        writer.write(f)


def build(student: bool = False, site: Path = SITE, out: Path = OUT, root: Path = ROOT) -> Path:
    t0 = time.time()
    if not (site / "index.html").exists():
        raise SystemExit(f"no website in {site}: run `make book` first")
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    title = config["title"] + (" (student edition)" if student else "")
    out.mkdir(parents=True, exist_ok=True)
    stem = "book-student" if student else "book"
    html_path = out / f"{stem}.html"
    pdf_path = out / (STUDENT_PDF_NAME if student else PDF_NAME)
    doc, pages, titles = book_html(site, student, root=root)
    html_path.write_text(doc, encoding="utf-8")
    from pypdf import PdfReader

    with chromium() as driver:
        t1 = time.time()
        first = print_pdf(driver, html_path, title)
        print(f"pdf: first printing {time.time() - t1:.0f} s", file=sys.stderr)
        starts = page_starts(outline_pages(PdfReader(io.BytesIO(first))), pages)
        doc = fill_contents(doc, starts)  # the contents' page numbers
        html_path.write_text(doc, encoding="utf-8")
        t1 = time.time()
        second = print_pdf(driver, html_path, title)
        print(f"pdf: second printing {time.time() - t1:.0f} s", file=sys.stderr)
        wide = overflowing(driver)
    for w in wide:
        print(f"pdf: warning: wider than the page: {w}", file=sys.stderr)
    t1 = time.time()
    reader = PdfReader(io.BytesIO(second))
    entries = outline_pages(reader)
    starts = page_starts(entries, pages)
    finish(reader, entries, pdf_path, title, config.get("author", ""), titles)
    print(f"pdf: outline and information {time.time() - t1:.0f} s", file=sys.stderr)
    manifest = {"pdf": pdf_path.name, "student": student, "overflowing": wide, "pages": [
        {**p, "start": starts.get(p["docname"])} for p in pages]}
    (out / f"{stem}.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"pdf: {pdf_path.relative_to(root)}: {len(reader.pages)} pages, "
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
