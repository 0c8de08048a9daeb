"""The built website: every chapter is there with its figures, and nothing failed."""

import json
import re
import subprocess
import sys

import pytest
import yaml
from bs4 import BeautifulSoup

from attention_core.book.render import COLUMN_CSS_PX
from conftest import CHAPTERS, ROOT

TOC_FILES = [f for f in re.findall(r"file:\s*(\S+)", (ROOT / "_toc.yml").read_text())
             if f.startswith("chapters/")]
BUDGET_BYTES = 3 * 1024 * 1024


def page(site, name):
    return BeautifulSoup((site / f"{name}.html").read_text(), "html.parser")


def test_every_chapter_is_in_the_toc_in_order():
    assert TOC_FILES == [f"chapters/{c}" for c in CHAPTERS], "every chapter notebook is in the toc, in order"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_title_carries_its_number(chapter):
    """``chapters/07_x.ipynb`` opens with ``# 7. ...``: the number in the title is the one
    the prose, the exercises ("Exercise 7.2") and the file name use."""
    cells = json.loads((ROOT / "chapters" / f"{chapter}.ipynb").read_text())["cells"]
    first = next("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    title = next(line for line in first.splitlines() if line.startswith("# "))  # after any (label)=
    assert title.startswith(f"# {int(chapter[:2])}. "), f"{chapter}: title {title!r}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_page_has_figures_and_no_errors(site, chapter):
    html = (site / "chapters" / f"{chapter}.html").read_text()
    soup = BeautifulSoup(html, "html.parser")
    main = soup.select_one("main") or soup
    text = main.get_text()
    assert "Traceback" not in text and "Error" not in "".join(
        o.get_text() for o in main.select(".output.stderr, .output.traceback"))
    assert not main.select(".output.traceback, .output.error")
    assert "$$" not in text, "raw display math reached the page"
    images = main.select("img")
    assert len(images) >= 2, "a chapter shows figures"
    for img in images:
        if img.get("src"):
            assert img["src"].startswith("data:") or (site / "chapters" / img["src"]).resolve().exists()
        assert img.get("alt"), f"image without alt text: {str(img)[:80]}"
    assert main.select(".ac-explorer"), "each chapter has an explorer"
    assert "Explorer(" not in text, "an explorer fell back to its text view"


COLUMN_PX = {"wide": COLUMN_CSS_PX["desktop"], "narrow": COLUMN_CSS_PX["phone"]}  # the content columns
FIGURE_FLOOR_PX = 9
SINGLE_PHONE_FLOOR_PX = 7  # a one-panel figure drawn once, on a phone


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_figures_are_legible_on_a_desktop_and_a_phone(site, chapter):
    """Every image in a cell output carries the size of its smallest text (drawn by
    attention_core.book.viz.figure, a pyplot figure on the website, or an explorer); a figure
    of panels side by side has a narrow rendering for phones; at the size each rendering
    is shown, text is at least 9 CSS px (7 on a phone for a one-panel figure drawn once)."""
    soup = BeautifulSoup((site / "chapters" / f"{chapter}.html").read_text(), "html.parser")
    main = soup.select_one("main") or soup
    unmeasured = [str(img)[:100] for img in main.select("div.cell_output img")
                  if not img.find_parent(class_=["ac-figure", "ac-explorer"])]
    assert not unmeasured, f"{chapter}: images whose text was not measured: {unmeasured[:3]}"
    for box in main.select(".ac-figure"):
        img, source = box.select_one("img"), box.select_one("source")
        assert img.get("alt"), f"{chapter}: figure without alt text"
        panels = int(img["data-panels-across"])
        assert panels < 2 or source is not None, (
            f"{chapter}: a figure of {panels} panels side by side has no narrow rendering: {img['alt']}")
        renderings = {"wide": img, "narrow": source} if source is not None else {"wide": img}
        for column, shown_by in (("wide", "wide"), ("narrow", "narrow" if source is not None else "wide")):
            tag = renderings[shown_by]
            shown = float(tag["data-min-text-px"]) * min(1.0, COLUMN_PX[column] / int(tag["width"]))
            floor = SINGLE_PHONE_FLOOR_PX if column == "narrow" and source is None else FIGURE_FLOOR_PX
            assert shown >= floor, (f"{chapter}: figure text {shown:.1f} CSS px < {floor} in a "
                                    f"{COLUMN_PX[column]} px column ({shown_by} rendering): {img['alt']}")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_progress_bar_text_in_a_page(site, chapter):
    text = (site / "chapters" / f"{chapter}.html").read_text()
    bars = re.findall(r".{0,40}(?:\d+/\d+ \[\d\d:\d\d(?:<|&lt;)|it/s[\],]).{0,20}", text)
    assert not bars, (
        f"progress-bar text in the page (training prints one summary line on the site): {bars[:3]}")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_page_weight_within_budget(site, chapter):
    path = site / "chapters" / f"{chapter}.html"
    soup = BeautifulSoup(path.read_text(), "html.parser")
    weight = path.stat().st_size + sum(
        (path.parent / img["src"]).stat().st_size for img in soup.select("img[src]")
        if not img["src"].startswith("data:") and (path.parent / img["src"]).exists())
    assert weight <= BUDGET_BYTES, f"{chapter}: {weight / 1e6:.2f} MB > 3 MB"


def test_performance_page_draws_the_benchmarks(site):
    soup = page(site, "performance")
    text = soup.get_text()
    assert "target" in text and "Traceback" not in text
    assert len(soup.select("main img")) >= 2


def test_no_external_scripts_or_styles(site):
    for path in site.rglob("*.html"):
        soup = BeautifulSoup(path.read_text(), "html.parser")
        for tag in soup.select("script[src], link[rel=stylesheet], link[rel=preload]"):
            url = tag.get("src") or tag.get("href")
            assert "://" not in url and not url.startswith("//"), f"{path.name} loads {url}"


def test_math_is_typeset_without_a_cdn(site):
    """Math is typeset into SVG at build time (_ext/site_pages.py); a build without Node
    falls back to MathJax served from the site itself."""
    soup = page(site, "chapters/01_attention_basics")
    srcs = [s["src"] for s in soup.select("script[src]")]
    untypeset = [m for m in soup.select(".math") if not m.select_one("mjx-container svg")]
    if untypeset:
        assert any(s.split("?")[0].endswith("_static/mathjax/tex-svg.js") for s in srcs), srcs
        assert (site / "_static" / "mathjax" / "tex-svg.js").stat().st_size > 1_000_000
    else:
        assert soup.select("mjx-container svg") and soup.select("mjx-assistive-mml"), \
            "equations ship as SVG with MathML for screen readers"
        assert not any("tex-svg.js" in s for s in srcs), "typeset pages load no MathJax"


def html_pages(site):
    return [p for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith("_")]


def test_every_page_has_a_description_and_a_plain_title(site):
    for path in html_pages(site):
        soup = BeautifulSoup(path.read_text(), "html.parser")
        meta = soup.select_one('meta[name="description"]')
        assert meta and meta.get("content", "").strip(), f"{path.name}: no meta description"
        assert len(meta["content"]) <= 160, f"{path.name}: description over 160 characters"
        title = soup.title.get_text() if soup.title else ""
        assert title.strip() and "\\" not in title and "$" not in title, f"{path.name}: title {title!r}"


def test_index_is_the_landing_page_and_its_links_resolve(site):
    soup = page(site, "index")
    assert soup.title and "Learn Attention" in soup.title.get_text()
    assert not soup.select('meta[http-equiv="Refresh"]'), "index.html is a page, not a redirect"
    assert soup.select("main h1"), "the landing page has content"
    for tag in soup.select("a[href], link[href], script[src], img[src]"):
        url = tag.get("href") or tag.get("src")
        if "://" in url or url.startswith(("#", "mailto:", "data:", "//")):
            continue
        target = (site / url.split("#")[0].split("?")[0]).resolve()
        assert target.exists(), f"index.html links to a missing {url}"


def test_favicon_resolves(site):
    assert (site / "favicon.ico").stat().st_size > 0, "browsers ask for /favicon.ico"
    for name in ("index", "chapters/02_scaling"):
        icon = page(site, name).select_one('link[rel="icon"]')
        assert icon, f"{name}: no favicon link"
        assert ((site / name).parent / icon["href"]).resolve().is_file(), icon["href"]


def test_launch_buttons_are_links(site):
    soup = page(site, "chapters/01_attention_basics")
    hrefs = [a.get("href", "") for a in soup.select("a")]
    assert any("colab.research.google.com" in h for h in hrefs)
    assert any("mybinder.org" in h for h in hrefs)
    assert any("git-pull" in h for h in hrefs), "JupyterHub button goes through nbgitpuller"


@pytest.mark.parametrize("notebook", [f"chapters/{c}" for c in CHAPTERS] + ["performance"])
def test_notebook_stored_without_outputs_and_starts_with_setup(notebook):
    nb = json.loads((ROOT / f"{notebook}.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c["outputs"] and c["execution_count"] is None for c in code)
    first = code[0]
    assert "remove-cell" in first["metadata"].get("tags", [])
    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    source = "".join(first["source"])
    assert "import attention_core" in source and f"git+{repo}" in source


@pytest.fixture(scope="module")
def student_site(site):
    """`make book SOLUTIONS=hide`, reusing the full build's executed notebooks."""
    subprocess.run(["make", "-s", "book", "SOLUTIONS=hide"], cwd=ROOT, check=True,
                   capture_output=True, timeout=600)
    return ROOT / "_build" / "student" / "_build" / "html"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_cites_papers_and_links_the_glossary(site, chapter):
    soup = BeautifulSoup((site / "chapters" / f"{chapter}.html").read_text(), "html.parser")
    hrefs = [a.get("href", "") for a in soup.select("main a")]
    assert any("bibliography.html#" in h for h in hrefs), "cites at least one paper"
    assert any("glossary.html#term-" in h for h in hrefs), "links at least one glossary term"


def test_reference_pages_exist(site):
    for name, must in (("notation", "d_{\\text{model}}"), ("glossary", "KV cache"),
                       ("api", "scaled_dot_product_attention"), ("instructor_guide", "nbgitpuller"),
                       ("bibliography", "Attention Is All You Need")):
        text = (site / f"{name}.html").read_text()
        if name == "notation" and "<mjx-assistive-mml" in text:  # math typeset at build time
            must = "<mi>model</mi>" if "<mi>model</mi>" in text else "<mtext>model</mtext>"
        assert must.lower() in text.lower(), f"{name}.html lacks {must!r}"
    api = BeautifulSoup((site / "api.html").read_text(), "html.parser")
    documented = {dt.get("id") for dt in api.select("dt[id]")}
    for name in ("attention_core.nn.functional.scaled_dot_product_attention",
                 "attention_core.nn.masks.causal_mask",
                 "attention_core.nn.multihead.MultiHeadAttention",
                 "attention_core.nn.flash.flash_attention",
                 "attention_core.book.exercises.check_softmax"):
        assert name in documented, name


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_has_exercises_with_solutions(site, chapter):
    soup = BeautifulSoup((site / "chapters" / f"{chapter}.html").read_text(), "html.parser")
    exercises = soup.select(".exercise")
    assert len(exercises) >= 3, f"{chapter}: {len(exercises)} exercises"
    assert len(soup.select(".solution.dropdown")) == len(exercises), (
        "one solution per exercise, in a dropdown")
    titles = " ".join(e.get_text() for e in exercises)
    assert "By hand" in titles and "Implement" in titles and "Investigate" in titles


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_student_edition_has_exercises_but_no_solution_text(site, student_site, chapter):
    full = BeautifulSoup((site / "chapters" / f"{chapter}.html").read_text(), "html.parser")
    student_html = (student_site / "chapters" / f"{chapter}.html").read_text()
    student = BeautifulSoup(student_html, "html.parser")
    assert len(student.select(".exercise")) == len(full.select(".exercise"))
    assert not student.select(".solution")
    student_text = " ".join(student.get_text().split())
    for solution in full.select(".solution"):
        body = " ".join(solution.get_text().split())
        snippet = body[len(body) // 3: len(body) // 3 + 60]  # from the middle, past the title
        assert snippet not in student_text, f"{chapter}: solution text leaked: {snippet!r}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_headings_do_not_skip_levels(site, chapter):
    soup = BeautifulSoup((site / "chapters" / f"{chapter}.html").read_text(), "html.parser")
    levels = [int(h.name[1]) for h in (soup.select_one("main") or soup).find_all(["h1", "h2", "h3", "h4"])]
    assert levels and levels[0] == 1
    for before, after in zip(levels, levels[1:]):
        assert after <= before + 1, f"{chapter}: heading h{before} followed by h{after}"


def test_every_page_renders_its_sections_lazily_then_all_but_the_heaviest(site):
    """Issue 46: every page's article renders its sections below the screen lazily (book.css,
    class ac-lazy-sections); once the page has loaded, the script inlined right after the
    article (_ext/lazy_sections.js) renders the rest, on every page but the two heaviest:
    there, rendering all of it cost a phone more main-thread time than it saved. Read from the
    built pages, not from the build's rule: the pages without the script are the two whose
    articles hold the most elements, chapter 8 and the API page, and each of those holds at
    least 1.5 times the elements of any page that carries it (tests/test_browser.py checks
    both kinds of page in a browser)."""
    script = (ROOT / "_ext" / "lazy_sections.js").read_text()
    weight, carries = {}, {}
    for path in site.rglob("*.html"):
        name = path.relative_to(site).with_suffix("").as_posix()
        soup = BeautifulSoup(path.read_text(), "html.parser")
        article = soup.find("article", class_="bd-article")
        if name.startswith("_static/") or article is None:
            continue
        assert "ac-lazy-sections" in article["class"], name
        weight[name] = len(article.find_all(True))
        inline = [s for s in soup.find_all("script") if s.string == script]
        assert len(inline) <= 1, f"{name}: the script {len(inline)} times"
        assert not inline or article.find_next_sibling("script") is inline[0], name
        carries[name] = bool(inline)
    lazy_only = sorted(name for name, has in carries.items() if not has)
    assert lazy_only == ["api", "chapters/08_sparse_linear"], lazy_only
    assert len(carries) > 20
    lightest_heavy = min(weight[name] for name in lazy_only)
    heaviest_light = max(weight[name] for name, has in carries.items() if has)
    assert lightest_heavy >= 1.5 * heaviest_light, (lightest_heavy, heaviest_light)


def test_lazy_sections_tell_our_own_script_through_our_own_event():
    """Issue 54: lazy_sections.js tells the book's script for the theme's keyboard stops
    (_static/theme_behaviour.js) that every section is rendered through an event of the
    book's own, named at both ends, and sends no event that the browser itself sends."""
    sender = (ROOT / "_ext" / "lazy_sections.js").read_text()
    listener = (ROOT / "_static" / "theme_behaviour.js").read_text()
    assert 'document.dispatchEvent(new CustomEvent("attention:sections-rendered"))' in sender
    assert 'document.addEventListener("attention:sections-rendered"' in listener
    assert sender.count("dispatchEvent") == 1


def test_performance_page_has_the_lighthouse_table(site):
    """Issue 46: the performance page prints every page's Lighthouse scores from
    results.json, or why Lighthouse did not run."""
    record = json.loads((ROOT / "benchmarks" / "results.json").read_text()).get("lighthouse")
    text = page(site, "performance").get_text()
    assert "Lighthouse on a phone" in text
    if record is None or not record["ran"]:
        assert "Lighthouse did not run" in text
    else:
        for name in record["pages"]:
            assert name.removeprefix("chapters/").removesuffix(".html") in text, name


def test_the_lighthouse_benchmark_says_why_it_did_not_run(tmp_path, monkeypatch):
    """make bench without Lighthouse or a built site records that it did not run, and why
    (run_all.py then keeps the last record)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_lighthouse
    import lighthouse

    record = bench_lighthouse.run(site=tmp_path)
    if lighthouse.find_lighthouse() and lighthouse.find_chrome():
        assert record["ran"] is False and "make book" in record["reason"]
    monkeypatch.setattr(lighthouse, "find_lighthouse", lambda: None)
    record = bench_lighthouse.run(site=tmp_path)
    assert record["ran"] is False and "Lighthouse is not installed" in record["reason"]
