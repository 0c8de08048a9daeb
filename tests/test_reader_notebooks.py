"""The reader notebooks (_ext/reader_notebooks.py): what Colab, Binder, a JupyterHub and a
download open reads like the page, with no MyST markup left.

The conversion is tested on hand-made MyST against hand-written markdown; the built
site's notebooks are checked for any surviving role or directive, for code equal to the
chapters', for links that land on an existing page and anchor, and for launch buttons
that open them. That each still runs: tests/test_build.py runs every reader notebook in a
fresh kernel and compares what it prints with the build.
"""

from __future__ import annotations

import re
import sys
import urllib.parse
from pathlib import Path

import nbformat
import pytest
import yaml
from bs4 import BeautifulSoup

from conftest import CHAPTERS, ROOT

sys.path.insert(0, str(ROOT / "_ext"))
import reader_notebooks as rn

BASE = "https://example.org/book/"
SITE = rn.Site(
    base_url=BASE,
    glue={"acc": "0.87654", "n": "12", "word": "'sink'", "speedup": "3.21"},
    measured={"speedup"},
    citations={"vaswani2017": ("Vaswani et al., 2017", BASE + "bibliography.html#id1"),
               "ba2016": ("Ba and Kiros, 2016", BASE + "bibliography.html#id2")},
    terms={"layernorm": BASE + "glossary.html#term-LayerNorm"},
    docs={"chapters/05_masking": ("5. Masking", BASE + "chapters/05_masking.html"),
          "chapters/06_block": ("6. The block", BASE + "chapters/06_block.html"),
          "glossary": ("Glossary", BASE + "glossary.html")},
)
DOC = "chapters/06_block"
MYST = re.compile(r"\{[a-z][\w:-]*\}`|^\s*(`{3,}|:{3,})\s*\{|^\([\w-]+\)=\s*$", re.M)


def md(text, site=SITE, exercises=None):
    return rn.convert_markdown(text, site, DOC, exercises or rn.Exercises(6))


# ------------------------------------------------------------------ roles
def test_glue_is_the_number_formatted_as_on_the_page():
    assert md("{glue:text}`acc:.1%` right, {glue:text}`n` heads, {glue:text}`word`") == \
        "87.7% right, 12 heads, sink"
    assert md("{glue:text}`acc:.2f`") == "0.88"
    assert md("{glue:text}`speedup:.1f` times faster") == f"3.2{rn.MEASURED} times faster", (
        "a number measured by a timing cell is marked")


def test_citations_are_linked_author_year_text():
    assert md("as {cite:t}`vaswani2017` showed") == \
        f"as [Vaswani et al. (2017)]({BASE}bibliography.html#id1) showed"
    assert md("a norm {cite:p}`vaswani2017,ba2016`.") == (  # in the website's order
        f"a norm ([Ba and Kiros, 2016]({BASE}bibliography.html#id2); "
        f"[Vaswani et al., 2017]({BASE}bibliography.html#id1)).")


def test_terms_and_pages_link_to_the_website():
    assert md("the {term}`LayerNorm`") == f"the [LayerNorm]({BASE}glossary.html#term-LayerNorm)"
    assert md("{term}`norms <LayerNorm>`") == f"[norms]({BASE}glossary.html#term-LayerNorm)"
    assert md("see {doc}`05_masking`") == f"see [5. Masking]({BASE}chapters/05_masking.html)"
    assert md("the {doc}`terms <../glossary>`") == f"the [terms]({BASE}glossary.html)"


def test_unknown_markup_fails_naming_the_page():
    for text, said in [("{glue:text}`nothing`", "nothing"), ("{cite:t}`nobody2020`", "nobody2020"),
                       ("{term}`flux capacitor`", "flux capacitor"), ("{doc}`99_none`", "99_none"),
                       ("{numref}`fig-x`", "{numref}"), ("```{figure} x.png\n```", "{figure}"),
                       ("```{exercise} open\nnever closed", "never closed")]:
        with pytest.raises(rn.ReaderNotebookError, match=re.escape(said)) as error:
            md(text)
        assert DOC in str(error.value) or "never closed" in said


# ------------------------------------------------------------------ directives
EXERCISES = """\
## Exercises

````{exercise} By hand: the third row
:label: ex-hand

Compute $\\alpha_{2j}$ with {term}`LayerNorm`.

```python
x = 1
```
````

````{solution} ex-hand
:class: dropdown

It is {glue:text}`acc:.2f`.
````

```{exercise}
:label: ex-two

No title.
```"""


def test_exercises_are_numbered_headings_and_solutions_fold():
    out = md(EXERCISES)
    assert out == f"""\
## Exercises

### Exercise 6.1 (By hand: the third row)

Compute $\\alpha_{{2j}}$ with [LayerNorm]({BASE}glossary.html#term-LayerNorm).

```python
x = 1
```

<details><summary><b>Solution to Exercise 6.1 (By hand: the third row)</b></summary>

It is 0.88.

</details>

### Exercise 6.2

No title."""


def test_the_student_edition_leaves_solutions_out():
    student = rn.Site(**{**SITE.__dict__, "student": True})
    out = md(EXERCISES, site=student)
    assert "Solution" not in out and "0.88" not in out
    assert "### Exercise 6.1" in out and "### Exercise 6.2" in out


def test_admonitions_are_quotes_and_targets_go():
    assert md("(sec-x)=\n```{warning}\n**Two** rules.\n\n- one\n```") == \
        "> **Warning.** **Two** rules.\n>\n> - one"
    assert md("```{admonition} Why {term}`LayerNorm`\nBecause.\n```") == \
        f"> **Why [LayerNorm]({BASE}glossary.html#term-LayerNorm).** Because."
    # a box that opens with a list: the title stands on its own line, the list renders as one
    assert md("```{admonition} How far this goes\n:class: dropdown\n- one\n- two\n```") == \
        "> **How far this goes.**\n>\n> - one\n> - two"


def notebook(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(c) if isinstance(c, str) else c for c in cells]
    return nb


def test_gated_solutions_become_a_collapsed_heading_and_code_is_kept():
    code = nbformat.v4.new_code_cell("print(1)", metadata={"tags": ["hide-input"]})
    code.outputs = [nbformat.v4.new_output("stream", text="1\n")]
    solution_code = nbformat.v4.new_code_cell("answer = 42")
    nb = notebook("# 6. The block", code, "```{exercise} Implement\n:label: ex-a\n\nDo it.\n```",
                  "```{solution-start} ex-a\n:class: dropdown\n```", "Here:", solution_code,
                  "```{solution-end}\n```", "## Next")
    out = rn.convert_notebook(nb, SITE, DOC)
    kinds = [(c.cell_type, c.source.split("\n")[0]) for c in out.cells]
    assert kinds == [("markdown", "# 6. The block"), ("markdown", rn.RUN_NOTE.split("\n")[0].format(
        title="6. The block", url=BASE + "chapters/06_block.html", torch="", mark=rn.MEASURED)),
        ("code", "print(1)"),
        ("markdown", "### Exercise 6.1 (Implement)"),
        ("markdown", "#### Solution to Exercise 6.1 (Implement)"),
        ("markdown", "Here:"), ("code", "answer = 42"), ("markdown", "## Next")]
    assert out.cells[4].metadata["jp-MarkdownHeadingCollapsed"] is True
    assert out.metadata["colab"]["collapsed_sections"] == [out.cells[4].metadata["id"]]
    assert out.cells[2].outputs == [] and out.cells[2].metadata["jupyter"]["source_hidden"] is True
    assert nb.cells[1].outputs, "the conversion must not change its input"
    student = rn.convert_notebook(nb, rn.Site(**{**SITE.__dict__, "student": True}), DOC)
    assert [c.source for c in student.cells if c.cell_type == "code"] == ["print(1)"]
    assert not any("Solution" in c.source or c.source == "Here:" for c in student.cells)
    dropdown = rn.convert_notebook(notebook("```{exercise}\n:label: ex-a\n\nDo.\n```",
                                            "```{solution} ex-a\nDone.\n```"),
                                   rn.Site(**{**SITE.__dict__, "student": True}), DOC)
    assert [c.source for c in dropdown.cells] == ["### Exercise 6.1\n\nDo."], "no empty cell is left"


# ------------------------------------------------------------------ the built site
def reader(site: Path, page: str):
    path = site / rn.NOTEBOOKS / f"{page}.ipynb"
    assert path.exists(), f"the build wrote no reader notebook for {page}"
    return nbformat.read(path, as_version=4)


@pytest.mark.book
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_reader_notebook_has_no_myst_and_the_chapters_code(site, chapter):
    nb = reader(site, f"chapters/{chapter}")
    nbformat.validate(nb)
    source = nbformat.read(ROOT / "chapters" / f"{chapter}.ipynb", as_version=4)
    left = [(i, m[0]) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
            for m in MYST.finditer(c.source)]
    assert not left, f"MyST markup left in the reader notebook of {chapter}: {left[:5]}"
    code = [(c.id, c.source) for c in nb.cells if c.cell_type == "code"]
    assert code == [(c.id, c.source) for c in source.cells if c.cell_type == "code"], (
        "the reader notebook's code differs from the chapter's")
    text = "\n".join(c.source for c in source.cells if c.cell_type == "markdown")
    headings = [c.source for c in nb.cells if c.cell_type == "markdown" and "### Exercise " in c.source]
    assert len(headings) == text.count("{exercise}"), "an exercise lost its heading"
    solutions = "\n".join(c.source for c in nb.cells).count("Solution to Exercise")
    assert solutions == text.count("{solution}") + text.count("{solution-start}")
    assert nb.cells[2].id == "reader-note" and "depend on your machine" in nb.cells[2].source


@pytest.mark.book
def test_reader_notebooks_show_the_glued_numbers(site):
    """Every ``{glue:text}`` of chapter 2 is the number of the page."""
    glue = rn.json.loads((site.parent / "jupyter_execute" / "chapters" / "02_scaling.glue.json").read_text())
    source = nbformat.read(ROOT / "chapters" / "02_scaling.ipynb", as_version=4)
    nb = reader(site, "chapters/02_scaling")
    src = [c.source for c in source.cells if c.cell_type == "markdown" and "{glue:text}" in c.source]
    out = {c.id: c.source for c in nb.cells}
    ids = [c.id for c in source.cells if c.cell_type == "markdown" and "{glue:text}" in c.source]
    assert src, "chapter 2 glues no numbers: pick another chapter"
    for cell_id, text in zip(ids, src):
        for key, fmt in re.findall(r"\{glue:text\}`([\w]+):?([^`]*)`", text):
            value = rn.format_glue(glue[key]["data"]["text/plain"], fmt)
            assert value in out[cell_id], f"{key} ({value}) is not in the reader notebook's text"


@pytest.mark.book
def test_measured_numbers_are_marked(site):
    """Chapter 9 glues speed-ups from timing cells: its reader notebook marks them, and
    chapter 2 (no timing cell) marks nothing."""
    text = "\n".join(c.source for c in reader(site, "chapters/09_mqa_gqa").cells)
    assert text.count(rn.MEASURED) >= 2, "chapter 9's timings are not marked"
    assert rn.MEASURED not in "\n".join(c.source for c in reader(site, "chapters/02_scaling").cells[3:])


def test_numbers_glued_by_timing_cells_are_the_measured_ones():
    timing = nbformat.v4.new_code_cell('t = 1\nglue("ch9_speedup", t)\nglue( \'ch9_gib\', 2)',
                                       metadata={"tags": ["timing"]})
    other = nbformat.v4.new_code_cell('glue("ch9_heads", 8)')
    assert rn.measured_keys(notebook(timing, other)) == {"ch9_speedup", "ch9_gib"}


def test_the_student_edition_opens_its_own_notebooks():
    from types import SimpleNamespace

    def app(prefix):
        options = {"repository_url": "https://github.com/o/r", "repository_branch": "main",
                   "launch_buttons": {"colab_url": "https://colab", "notebook_interface": "jupyterlab"}}
        config = SimpleNamespace(html_theme_options=options, reader_notebooks_branch="pages",
                                 reader_notebooks_prefix=prefix)
        return SimpleNamespace(config=config)

    assert rn.launch_urls(app(""), "chapters/x")["Colab"] == \
        "https://colab/github/o/r/blob/pages/notebooks/chapters/x.ipynb"
    assert rn.launch_urls(app("student/"), "chapters/x")["Colab"] == \
        "https://colab/github/o/r/blob/pages/student/notebooks/chapters/x.ipynb"


@pytest.mark.book
def test_every_link_in_a_reader_notebook_lands_on_the_website(site):
    # the site's address, as the build set it (html.baseurl, or derived from repository.url)
    intro = BeautifulSoup((site / "intro.html").read_text(), "html.parser")
    canonical = intro.select_one("link[rel=canonical]")
    base_url = canonical["href"].rsplit("/", 1)[0] + "/"
    missing, count = [], 0
    for page in [f"chapters/{c}" for c in CHAPTERS] + ["performance"]:
        nb = reader(site, page)
        for cell in nb.cells:
            for url in re.findall(r"\]\((" + re.escape(base_url) + r"[^)\s]*)\)", cell.source):
                count += 1
                path, _, anchor = url[len(base_url):].partition("#")
                html = site / path
                if not html.exists() or (anchor and f'id="{anchor}"' not in html.read_text()):
                    missing.append(f"{page}: {url}")
    assert count > 200, f"only {count} links to the website: are roles still converted?"
    assert not missing, "links to nothing:\n  " + "\n  ".join(sorted(set(missing))[:20])


@pytest.mark.book
def test_launch_and_download_buttons_open_the_reader_notebook(site):
    page = "chapters/06_transformer_block"
    soup = BeautifulSoup((site / f"{page}.html").read_text(), "html.parser")
    links = {a.get_text(strip=True): a["href"] for a in soup.select(".dropdown-launch-buttons a, "
                                                                   ".dropdown-download-buttons a")}
    path = f"notebooks/{page}.ipynb"
    assert links["Colab"].endswith(f"/blob/gh-pages/{path}"), links["Colab"]
    binder = urllib.parse.unquote(links["Binder"])
    assert "/v2/gh/learn-attention/learn-attention/main?urlpath=git-pull?" in binder, binder
    assert "branch=gh-pages" in binder and binder.endswith(f"lab/tree/learn-attention/{path}"), binder
    hub = yaml.safe_load((ROOT / "_config.yml").read_text())["launch_buttons"].get("jupyterhub_url")
    if hub:  # optional: no button without a hub of one's own (never a placeholder)
        assert "branch=gh-pages" in links["JupyterHub"] and links["JupyterHub"].endswith(path)
    else:
        assert "JupyterHub" not in links, links
    download = links[".ipynb"]
    assert (site / page).parent.joinpath(download).resolve() == (site / path).resolve(), download


def test_the_performance_page_says_its_cells_only_redraw():
    """The performance page's cells draw from benchmarks/results.json and measure nothing:
    its note must not promise that running them computes the numbers again."""
    out = rn.convert_notebook(notebook("# Performance", "Text."), SITE, "performance")
    note = out.cells[1].source
    assert out.cells[1].metadata.get("id", out.cells[1].get("id")) == "reader-note"
    assert "redraw" in note and "make bench" in note and "compute them again" not in note
    chapter = rn.convert_notebook(notebook("# 6. The block", "Text."), SITE, DOC)
    assert "compute them again" in chapter.cells[1].source
