"""Every chapter's Run All as a reader runs it: a fresh kernel per chapter, one chapter at a time.

Issue 35: a reader who presses Run All in Colab (two CPU cores, IPython 7, ipywidgets 7)
should wait at most 60 s for a chapter that trains models and 30 s for one that does not.
The website build is a different measurement (bench_build: two chapters at once, in the
build's own kernel); this one starts a kernel that builds nothing, runs the chapter's
cells in order with nbclient and records the wall time from the kernel's start to the
last cell's reply, each cell's time and the slowest cell.

The kernel runs in the Colab-like venv of tests/colab_env.py when it has been built
(``_build/colab-venv``, or the venv named by ``$COLAB_VENV``), with PYTHONPATH set to this
checkout so that the chapters import this checkout's package; otherwise in this
interpreter. Which one is recorded.

    python bench_chapters.py                 # every chapter, on one core, the other one busy
    python bench_chapters.py 07 10           # chapters whose file name starts with 07 or 10
    python bench_chapters.py --both-cores 10 # with both cores free

Issue 48: a reader's budget must hold on one free core (Colab's two vCPUs are often one
hyper-threaded core, and another process may hold the second). ``--second-core-busy``
pins the kernel to the first CPU this process may use and keeps the second one busy with
a spinning process for the whole run, so a chapter that counts on a second core shows it.
Issue 56: that is the record (``make bench`` runs it so). Every chapter's budget is 60 s if
it trains models and 30 s if not, except chapter 10's, 90 s: it trains 15 models (5
position schemes x 3 seeds), an experiment the book keeps whole.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from _timing import machine

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
BUDGET_TRAINS_S, BUDGET_OTHER_S = 60.0, 30.0
BUDGET_EXCEPTIONS_S = {"10_positional_encoding": 90.0}  # 15 models trained (issue 56's decision)
# a chapter trains if one of its code cells calls a training function (train_seq2seq,
# train_every_scheme, train_model, ...) of attention_core.models
TRAINS = re.compile(r"\btrain_\w+\(")


def trains(nb) -> bool:
    return any(c.cell_type == "code" and TRAINS.search(c.source) for c in nb.cells)


def kernel_python() -> Path:
    """The Colab-like venv's python when it is built, else this interpreter."""
    venv = Path(os.environ.get("COLAB_VENV", ROOT / "_build" / "colab-venv"))
    python = venv / "bin" / "python"
    return python if python.exists() else Path(sys.executable)


def _kernelspec(directory: Path, python: Path) -> str:
    """A kernel running ``python`` with this checkout first on its path, found via JUPYTER_PATH."""
    spec = directory / "kernels" / "bench-chapters"
    spec.mkdir(parents=True)
    env = {"PYTHONPATH": str(ROOT), "PYTHONNOUSERSITE": "1",
           "MPLBACKEND": "module://matplotlib_inline.backend_inline",
           "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "bench-chapters", "language": "python", "env": env}))
    return "bench-chapters"


def _cell_seconds(cell) -> float:
    """A cell's time from the kernel's 'busy' to its reply (nbclient's record_timing)."""
    stamps = cell.metadata.get("execution", {})
    start, end = stamps.get("iopub.status.busy"), stamps.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
    return (parse(end) - parse(start)).total_seconds()


def _cpu_seconds(process) -> float | None:
    """CPU time (user + system, its finished children's too) the kernel process has used,
    from /proc (Linux); None elsewhere. On a machine shared with other work the wall time
    stretches with the load, the CPU time much less."""
    try:
        fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (AttributeError, OSError):
        return None
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])  # fields 14-17 of proc(5)
    return (utime + stime + cutime + cstime) / os.sysconf("SC_CLK_TCK")


def time_chapter(path: Path, kernel_name: str, timeout: float = 900) -> dict:
    """Runs one chapter in a fresh kernel; its wall time, its cells' times and its slowest cell."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, kernel_name=kernel_name, timeout=timeout, startup_timeout=120,
                            record_timing=True, resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.reset_execution_trackers()
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
        cpu = _cpu_seconds(getattr(getattr(client.km, "provisioner", None), "process", None))
    seconds = time.perf_counter() - start
    cells = [(i, _cell_seconds(c)) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    slowest, slowest_s = max(cells, key=lambda ic: ic[1])
    first_line = next((line for line in nb.cells[slowest].source.splitlines()
                       if line.strip() and not line.startswith("#")), "")
    budget = BUDGET_EXCEPTIONS_S.get(path.stem, BUDGET_TRAINS_S if trains(nb) else BUDGET_OTHER_S)
    return {"seconds": seconds, "cpu_s": cpu, "cells_s": sum(s for _, s in cells), "budget_s": budget,
            "trains": trains(nb), "slowest_cell": slowest, "slowest_cell_s": slowest_s,
            "slowest_cell_code": first_line[:80], "within_budget": seconds <= budget,
            "cell_seconds": {str(i): round(s, 2) for i, s in cells if s >= 0.5}}


@contextmanager
def second_core_busy():
    """Inside the block, this process (and every kernel it starts: affinity is inherited)
    runs on one CPU while a spinning process holds a second one; both are undone after.
    Yields the CPU the kernels run on and the one kept busy (Linux only)."""
    if not hasattr(os, "sched_setaffinity"):
        raise RuntimeError("--second-core-busy needs os.sched_setaffinity (Linux)")
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        raise RuntimeError(f"--second-core-busy needs two CPUs, this process may use {allowed}")
    kernel_cpu, busy_cpu = allowed[:2]
    # it says when it spins, so the block starts with the core busy (and the process exec'd)
    spinner = subprocess.Popen([sys.executable, "-c", "print('spinning', flush=True)\nwhile True: pass"],
                               stdout=subprocess.PIPE, text=True)
    try:
        spinner.stdout.readline()
        os.sched_setaffinity(spinner.pid, {busy_cpu})
        os.sched_setaffinity(0, {kernel_cpu})
        yield kernel_cpu, busy_cpu
    finally:
        os.sched_setaffinity(0, allowed)
        spinner.kill()
        spinner.wait()
        spinner.stdout.close()


def run(prefixes: tuple[str, ...] = (), busy: bool = True) -> dict:
    paths = sorted(p for p in CHAPTERS.glob("*.ipynb") if not prefixes or p.name.startswith(prefixes))
    python = kernel_python()
    previous = os.environ.get("JUPYTER_PATH")
    with tempfile.TemporaryDirectory(prefix="bench-chapters-") as tmp, \
            (second_core_busy() if busy else nullcontext()) as cpus:
        kernel = _kernelspec(Path(tmp), python)
        os.environ["JUPYTER_PATH"] = tmp + (os.pathsep + previous if previous else "")
        try:
            chapters = {}
            for path in paths:
                chapters[path.stem] = time_chapter(path, kernel)
                r = chapters[path.stem]
                cpu = "" if r["cpu_s"] is None else f", kernel CPU {r['cpu_s']:.1f} s"
                print(f"  {path.stem}: {r['seconds']:.1f} s{cpu} (budget {r['budget_s']:.0f} s); "
                      "slowest cell "
                      f"[{r['slowest_cell']}] {r['slowest_cell_s']:.1f} s: {r['slowest_cell_code']}",
                      flush=True)
        finally:
            if previous is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = previous
    colab = python != Path(sys.executable)
    return {"chapters": chapters, "kernel": "Colab-like venv" if colab else "this interpreter",
            "kernel_python": str(python), "load_average_1min": os.getloadavg()[0],
            "second_core_busy": None if cpus is None else {"kernel_cpu": cpus[0], "busy_cpu": cpus[1]},
            "targets": {"trains_s": BUDGET_TRAINS_S, "other_s": BUDGET_OTHER_S,
                        "exceptions_s": BUDGET_EXCEPTIONS_S},
            "machine": machine()}


if __name__ == "__main__":
    args = sys.argv[1:]
    busy = "--both-cores" not in args
    result = run(tuple(a for a in args if a not in ("--both-cores", "--second-core-busy")), busy=busy)
    print(json.dumps({k: v for k, v in result.items() if k != "chapters"}, indent=1))
