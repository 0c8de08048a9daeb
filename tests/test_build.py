"""The book's build is its integration test: deterministic, and loud about failures."""

import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
import yaml
from jupyter_cache import get_cache
from nbclient import NotebookClient

from conftest import ROOT, SITE

sys.path.insert(0, str(ROOT / "_ext"))
import website_kernel  # the build's kernel map: the cache is keyed by it

pytestmark = pytest.mark.book  # builds books: the real one, and tiny ones with its configuration

JB = Path(sys.executable).with_name("jupyter-book")
HANG_GUARD_S = yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]["timeout"]
"""The build's per-cell timeout (``_config.yml``): a guard against a hung cell, not a speed
test (a busy machine must not fail a fresh run either; speed is ``bench_chapters``')."""


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def shows_an_explorer(outputs) -> bool:
    """An explorer is its static view in the build (text/plain ``Explorer(...)``) and,
    in a fresh kernel, live controls (a widget) over its figure: different texts by design."""
    return any(WIDGET_VIEW in o.get("data", {}) or "Explorer(" in o.get("data", {}).get("text/plain", "")
               for o in outputs)


def text_outputs(nb):
    """Every printed or displayed text of a notebook, by cell id, except cells tagged
    ``timing``, whose measured seconds differ from run to run by nature, and what an
    explorer displays (:func:`shows_an_explorer`; what the cell prints still counts)."""
    out = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or "timing" in cell.metadata.get("tags", []):
            continue
        outputs = cell.get("outputs", [])
        explorer = shows_an_explorer(outputs)
        texts = []
        for o in outputs:
            if o.get("output_type") == "stream":
                texts.append(o["text"])
            elif "text/plain" in o.get("data", {}) and not explorer:
                texts.append(o["data"]["text/plain"])
        out[cell.id] = "".join(texts)
    return out


def run_fresh(chapter: str):
    """Execute a chapter's reader notebook (what Colab and Binder open, written by the
    build: _ext/reader_notebooks.py) from scratch in its own kernel (a separate process)."""
    fresh = nbformat.read(SITE / "notebooks" / "chapters" / f"{chapter}.ipynb", 4)
    NotebookClient(fresh, timeout=HANG_GUARD_S,
                   resources={"metadata": {"path": str(ROOT / "chapters")}}).execute()
    return fresh


FRESH = ("01_attention_basics", "04_multi_head", "13_pretrained_model")
"""The reader notebooks run afresh here: the build already executes every chapter, and
every reader notebook's code cells are checked equal to its chapter's
(``test_reader_notebooks.py``), so a fresh run tests what the conversion and a reader's
kernel change. These three cover each kind of chapter: explorers and glued numbers (1), a
model trained on the page with a progress display (4), and pretrained weights read from an
installed package (13)."""


@pytest.fixture(scope="module")
def fresh_runs(site):
    """The :data:`FRESH` chapters executed afresh, two at a time, each in its own kernel."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return {chapter: pool.submit(run_fresh, chapter) for chapter in FRESH}


@pytest.mark.parametrize("chapter", FRESH)
def test_a_fresh_run_of_the_reader_notebook_prints_the_same_numbers_as_the_build(fresh_runs, chapter):
    cache = get_cache(ROOT / "_build" / ".jupyter_cache")  # what the build executed, in its kernel
    source = nbformat.read(ROOT / "chapters" / f"{chapter}.ipynb", 4)
    source = website_kernel.map_kernel(source, website_kernel.kernel_aliases(ROOT))
    _, built = cache.merge_match_into_notebook(source)
    fresh = fresh_runs[chapter].result()  # raises the chapter's error if its fresh run failed
    fresh_text, built_text = text_outputs(fresh), text_outputs(built)
    assert set(fresh_text) == set(built_text), "the reader notebook's code cells are not the chapter's"
    for cell_id, text in built_text.items():
        assert fresh_text[cell_id] == text, f"cell {cell_id} printed something else on a fresh run"
    assert any(built_text.values()), "the chapter prints numbers"


def build_tiny_book(tmp_path, markdown: str, code: str):
    """A one-chapter book with the real configuration; returns (exit code, log)."""
    book = tmp_path / "book"
    book.mkdir()
    shutil.copy(ROOT / "_config.yml", book / "_config.yml")
    shutil.copy(ROOT / "references.bib", book / "references.bib")
    shutil.copytree(ROOT / "_ext", book / "_ext")
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: broken_chapter\n")
    (book / "intro.md").write_text("# Intro\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown),
                                         nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, book / "broken_chapter.ipynb")
    config = ((book / "_config.yml").read_text()
              .replace("logo: ", "# logo: ").replace("favicon: ", "# favicon: "))
    (book / "_config.yml").write_text(config)
    result = subprocess.run([str(JB), "build", "--all", "-W", "-n", "--keep-going", str(book)],
                            capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout + result.stderr


def test_a_failing_cell_fails_the_build_and_names_the_chapter(tmp_path):
    code, log = build_tiny_book(tmp_path, "# Broken", "1 / 0")
    assert code != 0
    assert "broken_chapter" in log and "ZeroDivisionError" in log


def test_an_unknown_citation_fails_the_build(tmp_path):
    code, log = build_tiny_book(tmp_path, "# Cites\n\nAs shown by {cite:p}`nobody1999`.", "1 + 1")
    assert code != 0
    assert "nobody1999" in log
