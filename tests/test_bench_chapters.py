"""benchmarks/bench_chapters.py (issue 35): which chapters count as training ones, and that a
timed run finds a notebook's slowest cell and measures it against the clock."""

import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_chapters

CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"


@pytest.mark.parametrize("chapter, trains", [("07_bahdanau_luong", True), ("10_positional_encoding", True),
                                             ("01_attention_basics", False), ("13_pretrained_model", False)])
def test_training_chapters_get_the_longer_budget(chapter, trains):
    assert bench_chapters.trains(nbformat.read(CHAPTERS / f"{chapter}.ipynb", as_version=4)) is trains


def test_a_timed_run_finds_the_slowest_cell(tmp_path, monkeypatch):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# a page"),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("import time\ntime.sleep(0.8)"),
        nbformat.v4.new_code_cell("y = x + 1")])
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, path)
    monkeypatch.setenv("COLAB_VENV", str(tmp_path / "none"))  # no such venv: this interpreter
    assert bench_chapters.kernel_python() == Path(sys.executable)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    kernel = bench_chapters._kernelspec(tmp_path, Path(sys.executable))
    result = bench_chapters.time_chapter(path, kernel)
    assert result["slowest_cell"] == 2 and result["slowest_cell_code"] == "import time"
    assert 0.8 <= result["slowest_cell_s"] <= result["cells_s"] <= result["seconds"]
    assert result["budget_s"] == bench_chapters.BUDGET_OTHER_S and result["trains"] is False
    if sys.platform == "linux":  # the kernel's CPU time, from /proc
        assert 0 < result["cpu_s"] < result["seconds"] + 5


@pytest.mark.skipif(not hasattr(bench_chapters.os, "sched_setaffinity")
                    or len(bench_chapters.os.sched_getaffinity(0)) < 2, reason="needs Linux and two CPUs")
def test_second_core_busy_pins_this_process_and_spins_on_another_cpu_then_undoes_both():
    import os

    before = os.sched_getaffinity(0)
    with bench_chapters.second_core_busy() as (kernel_cpu, busy_cpu):
        assert os.sched_getaffinity(0) == {kernel_cpu} and busy_cpu != kernel_cpu
        spinners = [p for p in Path("/proc").glob("[0-9]*")
                    if (p / "cmdline").exists() and b"while True: pass" in (p / "cmdline").read_bytes()
                    and int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid()]
        assert len(spinners) == 1 and os.sched_getaffinity(int(spinners[0].name)) == {busy_cpu}
    assert os.sched_getaffinity(0) == before
    assert not (spinners[0] / "cmdline").exists() or not (spinners[0] / "cmdline").read_bytes()
