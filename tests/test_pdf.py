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
from PIL import Image

from conftest import CHAPTERS, ROOT, need_chromium

sys.path.insert(0, str(ROOT / "_ext"))
import pdf_chromium
import pdf_edition
import pdf_parts

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
    top = [title for title, level, _ in pdf_chromium.outline_pages(pdf) if level == 0]
    for docname, _ in pdf_edition.toc_pages():
        soup = BeautifulSoup((site / f"{docname}.html").read_text(encoding="utf-8"), "html.parser")
        title = pdf_chromium.clean_title(soup.select_one("article h1").get_text(" ", strip=True).rstrip("#"))
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
    assert pdf_parts.strip_columns(720, 10.41) == 1
    assert pdf_parts.strip_columns(300, 12.0) == 2
    for width, text_px in ((720, 10.41), (460, 9.72), (300, 12.0)):
        columns = pdf_parts.strip_columns(width, text_px)
        shown = min(width, pdf_parts.COLUMN_PX if columns == 1 else (pdf_parts.COLUMN_PX - 19) / 2)
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
        column = (pdf_parts.COLUMN_PX - 19) / 2 if strip and strip.get("data-columns") == "2" \
            else pdf_parts.COLUMN_PX
        pt = float(img["data-min-text-px"]) * min(1.0, column / width) * 0.75
        if pt < 6.9:
            small.append(f"{img.get('alt', '')[:60]}: {pt:.1f} pt")
    assert not small, small


def pdf_images(pdf: Path) -> list[dict]:
    """``pdfimages -list`` of ``pdf``: page, size in px and effective resolution (px an inch
    as placed on the page) of each image (soft masks left out: they follow their image)."""
    out = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines()[2:]:
        cols = line.split()
        if cols[2] == "image":
            rows.append({"page": int(cols[0]), "width": int(cols[3]), "height": int(cols[4]),
                         "x_ppi": int(cols[12]), "y_ppi": int(cols[13])})
    return rows


def test_figures_and_frames_print_at_200_dpi_or_more(pdf):
    """Every image in the PDF (figures, explorer frames, the title page's logo) has at least
    200 px an inch at the size it is printed: the figures are their print copies
    (attention_core.book.render.PRINT_SCALE), not the website's screen-resolution PNGs."""
    images = pdf_images(pdf)
    assert len(images) > 100
    low = [f"page {i['page']}: {i['width']}x{i['height']} px at {i['x_ppi']}x{i['y_ppi']} ppi"
           for i in images if min(i["x_ppi"], i["y_ppi"]) < 200]
    assert not low, f"{len(low)} of {len(images)} images under 200 ppi as printed: {low[:8]}"


def test_every_figure_and_frame_is_its_print_copy(book):
    """The printed document shows each figure's and frame's print copy (several times the
    website's pixels) at the size of the website's rendering, so text keeps its printed size."""
    imgs = book.select("section.pdf-page img")
    assert imgs
    for img in imgs:
        path = Path(img["src"].removeprefix("file://"))
        with Image.open(path) as im:
            natural = im.size[0]
        assert natural >= 2 * int(img["width"]), (
            f"{img.get('alt', '')[:60]}: {natural} px printed at {img['width']} CSS px")


def _explorer(frames: int = 3, print_copies: bool = True, label: str = "temperature τ",
              control: str = "temperature") -> BeautifulSoup:
    """A built explorer of one control, labelled ``label``, as a page of the site has it
    (``control``: the control's Python name, in its data as ``"controls"``)."""
    values = ["0.25", "1.0", "4.0", "8.0"][:frames]
    wide = {"index": {str(k): k for k in range(frames)}, "images": [f"w{k}.png" for k in range(frames)],
            "width": 720, "height": 340, "min_text_px": 10.41}
    if print_copies:  # the frames of chapter 1's strip (attention_core.book.explorers.strips)
        wide.update(print_images={str(k): f"p{k}.png" for k in range(frames)}, print_scale=2.5)
    data = {"layouts": {"wide": wide}, "names": [label], "labels": [values], "alt": "Weights.",
            "start": [1], "chapter": "01_attention_basics"}
    data["controls"] = [control]
    return BeautifulSoup(
        '<div class="ac-explorer"><img class="ac-frame" src="w1.png" '
        'alt="Weights. Shown: temperature τ 1.0.">'
        f'<script type="application/json" class="ac-frames">{json.dumps(data)}</script></div>', "html.parser")


def test_a_strip_prints_the_print_copies_of_its_frames(monkeypatch):
    monkeypatch.setitem(pdf_parts.STRIPS, "01_attention_basics",
                        [{"temperature": v} for v in ("0.25", "1.0", "4.0")])
    soup = _explorer()
    strip = pdf_parts.explorer_strip(soup, soup.select_one("div.ac-explorer"), "01_attention_basics")
    assert [img["src"] for img in strip.select("img")] == ["p0.png", "p1.png", "p2.png"]
    assert {img["width"] for img in strip.select("img")} == {"720"}  # printed at the website's size


@pytest.mark.parametrize("label", ["temperature τ", "temperature T"])
def test_a_strip_matches_its_explorer_by_control_names_not_labels(monkeypatch, label):
    """An explorer whose data names its controls (``"controls"``: their Python names) is
    matched to :data:`STRIPS` by those names: a label renamed on the page changes no strip;
    the captions show the labels the reader sees."""
    monkeypatch.setitem(pdf_parts.STRIPS, "01_attention_basics",
                        [{"temperature": v} for v in ("0.25", "1.0", "4.0")])
    soup = _explorer(label=label, control="temperature")
    strip = pdf_parts.explorer_strip(soup, soup.select_one("div.ac-explorer"), "01_attention_basics")
    assert [img["src"] for img in strip.select("img")] == ["p0.png", "p1.png", "p2.png"]
    captions = [c.get_text() for c in strip.select("figcaption")]
    assert captions == [f"{label} = {v}" for v in ("0.25", "1.0", "4.0")]


def test_importing_the_pdf_edition_leaves_sys_path_alone():
    """The PDF edition imports attention_core as installed (``make setup``: editable) and its
    siblings from ``_ext`` (the script's folder); neither importing it nor its site address
    edits sys.path."""
    code = ("import sys; sys.path.insert(0, '_ext'); before = list(sys.path); import pdf_edition; "
            "pdf_edition.site_url(); assert sys.path == before, set(sys.path) ^ set(before)")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


@pytest.mark.parametrize("setting, says", [
    ({"tau": "1.0"}, "STRIPS names the control(s) ['tau']"),  # a control renamed
    ({"temperature": "1.5"}, "is not one of the explorer's values"),  # a value gone
    ({"temperature": "0.25"}, "shows the same frame as another one"),  # a frame twice
])
def test_a_strip_that_no_longer_matches_its_explorer_fails_naming_the_chapter(monkeypatch, setting, says):
    monkeypatch.setitem(pdf_parts.STRIPS, "01_attention_basics", [{"temperature": "0.25"}, setting])
    soup = _explorer()
    with pytest.raises(pdf_parts.PrintError, match=re.escape(says)) as error:
        pdf_parts.explorer_strip(soup, soup.select_one("div.ac-explorer"), "01_attention_basics")
    assert str(error.value).startswith("01_attention_basics: ")


def test_a_strip_of_a_renamed_chapter_or_without_print_copies_fails(monkeypatch):
    with pytest.raises(pdf_parts.PrintError, match="^01_attention_basics: STRIPS lists frames"):
        pdf_parts.check_strips_used(set(pdf_parts.STRIPS) - {"01_attention_basics"})
    pdf_parts.check_strips_used(set(pdf_parts.STRIPS))
    soup = _explorer(print_copies=False)
    with pytest.raises(pdf_parts.PrintError, match="^01_attention_basics: the explorer .* no print copy"):
        pdf_parts.explorer_strip(soup, soup.select_one("div.ac-explorer"), "01_attention_basics")


def test_a_strip_of_another_chapter_than_the_explorer_was_rendered_for_fails(monkeypatch):
    """The explorer rendered print copies for its own chapter's strip only: printed on a page
    whose strip picks other frames, the build fails naming the page's chapter."""
    monkeypatch.setitem(pdf_parts.STRIPS, "02_scaling",
                        [{"temperature": v} for v in ("0.25", "4.0", "8.0")])
    soup = _explorer(frames=4)
    data = json.loads(soup.select_one("script").string)
    del data["layouts"]["wide"]["print_images"]["3"]
    soup.select_one("script").string = json.dumps(data)
    with pytest.raises(pdf_parts.PrintError, match=r"^02_scaling: .* \[\['8.0'\]\]: it was rendered for "
                                                     "the strip of 01_attention_basics"):
        pdf_parts.explorer_strip(soup, soup.select_one("div.ac-explorer"), "02_scaling")


def test_a_figure_without_its_print_copy_fails_naming_the_chapter(tmp_path):
    page = tmp_path / "chapters" / "02_scaling.html"
    page.parent.mkdir()
    page.write_text('<html><head></head><body><article class="bd-article"><h1>Scaling</h1>'
                    '<div class="ac-figure"><picture><img src="f.png" width="720" alt="Logits."></picture>'
                    '</div></article></body></html>', encoding="utf-8")
    with pytest.raises(pdf_parts.PrintError, match="^02_scaling: the figure 'Logits.' has no print copy"):
        pdf_edition.page_section("chapters/02_scaling", tmp_path, "https://example.org/", False)
    page.write_text(page.read_text().replace('src="f.png"', 'src="f.png" data-print-src="f-print.png"'))
    section, _ = pdf_edition.page_section("chapters/02_scaling", tmp_path, "https://example.org/", False)
    assert section.select_one("img")["src"].endswith("/chapters/f-print.png")


# ---------------------------------------------------------------- code
def test_code_lines_keep_text_highlighting_and_hang_under_their_indent():
    soup = BeautifulSoup('<pre><span></span><span class="k">def</span> <span class="nf">f</span>():\n'
                         '    <span class="sd">"""One.\n\n    Two."""</span>\n'
                         '    <span class="k">return</span> <a href="#x">g</a>(1)\n</pre>', "html.parser")
    pre = soup.pre
    before = pre.get_text()
    pdf_parts.code_lines(soup, pre)
    lines = pre.select(":scope > span.pdf-code-line")
    assert pre.get_text() == before  # the same characters, leading spaces and newlines included
    assert [line.get_text() for line in lines] == ['def f():\n', '    """One.\n', '\n', '    Two."""\n',
                                                   '    return g(1)\n']
    assert [line["style"] for line in lines] == ["--hang:4ch", "--hang:8ch", "--hang:4ch", "--hang:8ch",
                                                 "--hang:8ch"]
    assert lines[3].select_one("span.sd").get_text() == '    Two."""'  # a docstring cut at each line
    assert lines[4].select_one('a[href="#x"]').get_text() == "g"


def test_printed_code_is_the_websites_code(book, site):
    """Every code block of a chapter is printed line by line (wrapped lines hang under their
    indentation) with the website's characters: nothing lost, nothing added."""
    for chapter in ("01_attention_basics", "10_positional_encoding"):
        soup = BeautifulSoup((site / f"chapters/{chapter}.html").read_text(encoding="utf-8"), "html.parser")
        on_site = [pre.get_text() for pre in soup.select("article.bd-article pre")]
        section = book.select_one(f'section[data-docname="chapters/{chapter}"]')
        printed = section.select("pre")
        assert [pre.get_text() for pre in printed] == on_site, chapter
        assert all(child.name == "span" and "pdf-code-line" in child["class"]
                   for pre in printed for child in pre.children), chapter


# ---------------------------------------------------------------- the bibliography
def test_bibliography_labels_line_up(pdf, ranges):
    """Every label [n] of the bibliography starts at the same x (a one-line entry no longer
    lets the next label float beside its own)."""
    first, last = ranges["bibliography"]
    out = subprocess.run(["pdftotext", "-bbox", "-f", str(first), "-l", str(last), str(pdf), "-"],
                         capture_output=True, text=True, check=True).stdout
    labels = [(w, float(x)) for x, w in re.findall(r'<word xMin="([\d.]+)"[^>]*>(\[\d+\])</word>', out)]
    assert len(labels) >= 70, labels[:5]
    xs = {round(x) for _, x in labels}
    assert max(xs) - min(xs) <= 1, [lab for lab in labels if round(lab[1]) != min(xs)][:8]


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
