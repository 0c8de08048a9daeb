"""The PDF edition (issue #47): ``make pdf`` prints the built website into
``_build/pdf/learn-attention.pdf`` (``_ext/pdf_edition.py``); ``make pdf SOLUTIONS=hide`` the
student edition. It opens, its outline has every page of the book, no raw MyST or widget
error reached the paper, every chapter's figures are in it (an explorer as a strip of its
frames), its fonts are embedded, and the student edition has no solution text."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from conftest import CHAPTERS, ROOT, need_chromium

sys.path.insert(0, str(ROOT / "_ext"))
import pdf_edition

OUT = ROOT / "_build" / "pdf"
RAW = ("{glue", "{cite", "{term", "```{exercise}", "{exercise}", "{solution", "<Figure size",
       "Error displaying widget", "Show code cell source", "Click to show",
       "<code>", "</code>")  # a quiz explanation's HTML printed as text


def need_poppler():
    if not shutil.which("pdftotext"):
        import os
        if os.environ.get("CI"):
            raise RuntimeError("CI needs Debian's poppler-utils (.ci/run installs it)")
        pytest.skip("poppler-utils not installed (apt-get install poppler-utils)", allow_module_level=True)


need_chromium()
need_poppler()


def built(site: Path, student: bool) -> Path:
    """The PDF of the website as built now: printed again when the site is newer."""
    pdf = OUT / (pdf_edition.STUDENT_PDF_NAME if student else pdf_edition.PDF_NAME)
    manifest = OUT / ("book-student.json" if student else "book.json")
    newest = max(p.stat().st_mtime for p in site.rglob("*.html"))
    if not (pdf.exists() and manifest.exists()) or pdf.stat().st_mtime < newest:
        subprocess.run([sys.executable, str(ROOT / "_ext" / "pdf_edition.py"),
                        "--solutions", "hide" if student else "show"], cwd=ROOT, check=True)
    return pdf


@pytest.fixture(scope="module")
def pdf(site) -> Path:
    return built(site, student=False)


@pytest.fixture(scope="module")
def student_pdf(site) -> Path:
    return built(site, student=True)


@pytest.fixture(scope="module")
def manifest(pdf) -> dict:
    return json.loads((OUT / "book.json").read_text(encoding="utf-8"))


def text(pdf: Path, first: int | None = None, last: int | None = None) -> str:
    args = ["pdftotext", "-enc", "UTF-8"]
    if first:
        args += ["-f", str(first)]
    if last:
        args += ["-l", str(last)]
    return subprocess.run([*args, str(pdf), "-"], capture_output=True, text=True, check=True).stdout


def squeeze(s: str) -> str:
    return re.sub(r"\s+", "", s)


def chapter_ranges(manifest: dict, n_pages: int) -> dict[str, tuple[int, int]]:
    """Docname -> (first page, last page) in the PDF."""
    starts = [(p["docname"], p["start"]) for p in manifest["pages"]]
    out = {}
    for k, (doc, start) in enumerate(starts):
        end = starts[k + 1][1] - 1 if k + 1 < len(starts) else n_pages
        out[doc] = (start, end)
    return out


@pytest.fixture(scope="module")
def full_text(pdf) -> str:
    return text(pdf)


@pytest.fixture(scope="module")
def page_texts(full_text) -> list[str]:
    """The text of each page (pdftotext ends each with a form feed)."""
    return full_text.split("\f")


@pytest.fixture(scope="module")
def ranges(pdf, manifest) -> dict[str, tuple[int, int]]:
    from pypdf import PdfReader

    return chapter_ranges(manifest, len(PdfReader(str(pdf)).pages))


@pytest.fixture(scope="module")
def book(pdf) -> BeautifulSoup:
    """The joined document the PDF was printed from."""
    return BeautifulSoup((OUT / "book.html").read_text(encoding="utf-8"), "html.parser")


@pytest.fixture(scope="module")
def images_per_page(pdf) -> dict[int, int]:
    out = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True, check=True).stdout
    counts: dict[int, int] = {}
    for line in out.splitlines()[2:]:
        cols = line.split()
        if cols[2] == "image":
            counts[int(cols[0])] = counts.get(int(cols[0]), 0) + 1
    return counts


def pages_text(page_texts: list[str], first: int, last: int) -> str:
    return "\f".join(page_texts[first - 1:last])


# ---------------------------------------------------------------- opens, outline
def test_pdf_exists_and_opens(pdf):
    from pypdf import PdfReader

    reader = PdfReader(str(pdf))
    assert len(reader.pages) > 100
    assert reader.metadata.title == "Learn Attention"
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"Pages:\s+\d+", info)
    assert "A4" in info


def test_outline_has_every_chapter_and_reference_page(pdf, site):
    top = [title for title, level, _ in pdf_edition.outline_pages(pdf) if level == 0]
    for docname, _ in pdf_edition.toc_pages():
        soup = BeautifulSoup((site / f"{docname}.html").read_text(encoding="utf-8"), "html.parser")
        title = pdf_edition.clean_title(soup.select_one("article h1").get_text(" ", strip=True).rstrip("#"))
        assert title in top, f"outline lacks {docname} ({title!r}); it has {top}"


def test_every_page_of_the_book_has_its_start_page_in_order(manifest):
    starts = [p["start"] for p in manifest["pages"]]
    assert None not in starts, manifest["pages"]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)


def test_contents_page_gives_page_numbers(pdf, manifest):
    contents = text(pdf, 2, 2)
    for page in manifest["pages"][1:]:
        line = next((ln for ln in contents.splitlines() if ln.strip().startswith(page["title"][:25])), None)
        assert line is not None, f"contents lack {page['title']}"
    numbers = {int(n) for n in re.findall(r"(?<![\d.])(\d+)(?![\d.])", contents)}
    missing = {p["start"] for p in manifest["pages"]} - numbers
    assert not missing, f"the contents lack the page numbers {missing}"


# ---------------------------------------------------------------- nothing raw
def literal_counts(site: Path) -> dict[str, int]:
    """How often each of :data:`RAW` is on the website as code (the API reference documents
    the glue helper): those the PDF may print too."""
    counts = dict.fromkeys(RAW, 0)
    for docname, _ in pdf_edition.toc_pages():
        soup = BeautifulSoup((site / f"{docname}.html").read_text(encoding="utf-8"), "html.parser")
        article = soup.select_one("article.bd-article")
        for code in article.select("code, pre, dt.sig"):
            if code.find_parent(["code", "pre", "dt"]):
                continue
            words = code.get_text()
            for raw in RAW:
                counts[raw] += words.count(raw)
    return counts


def test_no_raw_myst_no_widget_errors(full_text, site):
    allowed = literal_counts(site)
    found = {raw: full_text.count(raw) for raw in RAW if full_text.count(raw) > allowed[raw]}
    assert not found, f"raw source or errors on paper (beyond the site's code): {found}"


def test_links_out_of_the_book_are_printed_and_the_web_model_is_a_note(full_text, page_texts, ranges):
    ch13 = pages_text(page_texts, *ranges["chapters/13_pretrained_model"])
    url = pdf_edition.site_url()
    nohyphen = str.maketrans("", "", "-")  # pdftotext takes a hyphen at a line's end for a break
    assert squeeze(f"{url}chapters/13_pretrained_model.html").translate(nohyphen) \
        in squeeze(ch13).translate(nohyphen), \
        "chapter 13's in-browser model: a note with the page's address"
    assert "Running the model needs JavaScript" not in full_text


def test_cross_references_citations_and_terms_land_inside_the_book(book):
    """Every link between pages of the website (a section, a citation, a glossary term, an
    exercise) is a link inside the PDF, to an element that is there."""
    ids = {el["id"] for el in book.find_all(id=True)}
    links = [a["href"][1:] for a in book.select('a[href^="#"]')]
    assert len(links) > 500
    missing = sorted({target for target in links if target not in ids})
    assert not missing, f"{len(missing)} links to nothing: {missing[:8]}"
    kinds = {"citation": "p-bibliography--", "term": "p-glossary--term-"}
    for kind, prefix in kinds.items():
        assert any(target.startswith(prefix) for target in links), f"no {kind} links"
    assert not [a["href"] for a in book.select("a[href]")
                if ".html" in a["href"] and not a["href"].startswith("http")]


# ---------------------------------------------------------------- figures, explorers, quizzes
def site_figures(site: Path, docname: str) -> tuple[int, int]:
    """(figures that are not explorers, explorers) on a page of the website."""
    soup = BeautifulSoup((site / f"{docname}.html").read_text(encoding="utf-8"), "html.parser")
    article = soup.select_one("article.bd-article")
    explorers = article.select("div.ac-explorer")
    for e in explorers:
        e.decompose()
    images = article.select("img")
    return len(images), len(explorers)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_figure_and_explorer_of_a_chapter_is_printed(book, ranges, images_per_page, site, chapter):
    docname = f"chapters/{chapter}"
    figures, explorers = site_figures(site, docname)
    section = book.select_one(f'section[data-docname="{docname}"]')
    strips = section.select("div.pdf-strip")
    assert len(strips) == explorers, f"{chapter}: {explorers} explorers, {len(strips)} strips"
    frames = 0
    for strip in strips:
        shown = strip.select("figure.pdf-frame")
        assert 3 <= len(shown) <= 6, f"{chapter}: a strip of {len(shown)} frames"
        assert all("=" in f.figcaption.get_text() for f in shown), "each frame labelled with its controls"
        frames += len(shown)
    notes = len(section.select(".pdf-web-figure img"))
    first, last = ranges[docname]
    printed = sum(images_per_page.get(p, 0) for p in range(first, last + 1))
    assert printed == figures + frames + notes, (
        f"{chapter}: {printed} images in the PDF; the site has {figures} figures and {explorers} "
        f"explorer(s) printed as {frames} frames, and {notes} note figure(s)")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_quiz_questions_in_place_answers_at_the_chapter_end(page_texts, ranges, site, chapter):
    words = pages_text(page_texts, *ranges[f"chapters/{chapter}"])
    soup = BeautifulSoup((site / f"chapters/{chapter}.html").read_text(encoding="utf-8"), "html.parser")
    quizzes = soup.select("div.ac-quiz")
    if not quizzes:
        pytest.skip("no self-check quiz")
    assert "Answers to the self-check questions" in words
    answers_at = words.index("Answers to the self-check questions")
    for quiz in quizzes:
        for choice in quiz.select("label.ac-quiz-choice span"):
            plain = choice.get_text(" ", strip=True)
            if not choice.select("mjx-container") and len(plain) > 12:
                assert squeeze(plain)[:40] in squeeze(words[:answers_at]), f"{chapter}: choice {plain!r}"


# ---------------------------------------------------------------- print quality
def test_nothing_runs_past_the_printed_column(manifest):
    """Code wraps, equations and figures shrink to the column (the build lays the book out
    at the column's width in print media and lists what is wider)."""
    assert manifest["overflowing"] == [], manifest["overflowing"][:10]


def test_explorer_frames_keep_their_text_at_least_7_pt():
    assert pdf_edition.strip_columns(720, 10.41) == 1
    assert pdf_edition.strip_columns(300, 12.0) == 2
    for width, text_px in ((720, 10.41), (460, 9.72), (300, 12.0)):
        columns = pdf_edition.strip_columns(width, text_px)
        shown = min(width, pdf_edition.COLUMN_PX if columns == 1 else (pdf_edition.COLUMN_PX - 19) / 2)
        assert text_px * shown / width * 0.75 >= 6.9, (width, text_px, columns)


def test_text_in_figures_is_at_least_7_pt_as_printed(book):
    """Every figure and frame whose smallest text the build recorded, at the width it is
    printed (its own, or the column's when wider; half of it for a two-column strip)."""
    small = []
    for img in book.select("img[data-min-text-px]"):
        if not img["data-min-text-px"]:
            continue
        width = float(img["width"])
        strip = img.find_parent("div", class_="pdf-strip")
        column = (pdf_edition.COLUMN_PX - 19) / 2 if strip and strip.get("data-columns") == "2" \
            else pdf_edition.COLUMN_PX
        pt = float(img["data-min-text-px"]) * min(1.0, column / width) * 0.75
        if pt < 6.9:
            small.append(f"{img.get('alt', '')[:60]}: {pt:.1f} pt")
    assert not small, small


# ---------------------------------------------------------------- fonts
def test_fonts_are_embedded(pdf):
    out = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout
    rows = out.splitlines()[2:]
    assert rows, "no fonts at all"
    missing = [r for r in rows if r.split()[-5] != "yes"]
    assert not missing, f"fonts not embedded: {missing}"


# ---------------------------------------------------------------- the student edition
def solution_snippets(site: Path) -> list[str]:
    """The longest run of plain text in each solution of each chapter."""
    snippets = []
    for chapter in CHAPTERS:
        soup = BeautifulSoup((site / f"chapters/{chapter}.html").read_text(encoding="utf-8"), "html.parser")
        for sol in soup.select("div.solution section#solution-content, div.solution"):
            for m in sol.select("mjx-container, pre, code, .pasted-text"):
                m.replace_with("\x00")
            runs = [r.strip() for r in sol.get_text(" ").split("\x00")]
            runs = [r for r in runs if len(r) >= 40 and not r.startswith("Solution to")]
            if runs:
                snippets.append(squeeze(max(runs, key=len))[:60])
    return snippets


def test_solutions_in_the_full_edition_none_in_the_student_edition(full_text, student_pdf, site):
    snippets = solution_snippets(site)
    assert len(snippets) >= len(CHAPTERS), "every chapter has solutions to look for"
    full = squeeze(full_text)
    found = [s for s in snippets if s in full]
    assert len(found) >= 0.9 * len(snippets), \
        f"solutions missing from the full edition: {set(snippets) - set(found)}"
    student = squeeze(text(student_pdf))
    leaked = [s for s in snippets if s in student]
    assert not leaked, f"solution text in the student edition: {leaked[:3]}"
    assert "Solutionto" not in student


# ---------------------------------------------------------------- the site links the PDF
def test_every_page_links_the_pdf(site):
    for name in ("index", "chapters/01_attention_basics", "glossary"):
        soup = BeautifulSoup((site / f"{name}.html").read_text(encoding="utf-8"), "html.parser")
        links = [a["href"] for a in soup.select("a[href]") if a["href"].endswith(pdf_edition.PDF_NAME)]
        assert links, f"{name}: no link to the PDF edition"
        assert links[0] == pdf_edition.site_url() + pdf_edition.PDF_NAME
