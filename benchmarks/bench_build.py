"""Clean build of the whole book, a rebuild with nothing changed, and the heaviest page.

A build is what ``make book`` runs: the notebooks executed two at a time into the
cache (``_ext/execute_chapters.py``), then ``jupyter-book build``. Runs on a copy of the
repository so the working tree's _build is left alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import machine

ROOT = Path(__file__).resolve().parents[1]
JB = Path(sys.executable).with_name("jupyter-book")
FLAGS = ["--all", "-W", "-n", "--keep-going"]
# The copy has no .venv: the build typesets maths with this checkout's MathJax for Node and
# trims the stylesheets with its site tools (without them _ext/site_css.py warns, and -W fails).
ENV = dict(os.environ, MATHJAX_NODE_MODULES=str(ROOT / ".venv" / "mathjax-node" / "node_modules"),
           SITE_TOOLS_NODE_MODULES=str(ROOT / ".venv" / "site-tools" / "node_modules"))


def _build(book: Path) -> float:
    start = time.perf_counter()
    for command in ([sys.executable, str(book / "_ext" / "execute_chapters.py")],
                    [str(JB), "build", *FLAGS, str(book)]):
        result = subprocess.run(command, capture_output=True, text=True, cwd=book, env=ENV)
        if result.returncode:
            raise RuntimeError(f"{command[-1]} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    return time.perf_counter() - start


def run() -> dict:
    load_at_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        book = Path(tmp) / "book"
        shutil.copytree(ROOT, book, ignore=shutil.ignore_patterns(".venv", "_build", ".git",
                                                                  ".pytest_cache", ".hypothesis"))
        # The whole book, reference pages included: chapters cite the bibliography, link
        # the glossary and the performance page, so none can be left out of a -W build.
        clean, rebuild = _build(book), _build(book)
        from jupyter_cache import get_cache

        execution = {Path(r.uri).stem: r.data.get("execution_seconds")
                     for r in get_cache(book / "_build" / ".jupyter_cache").list_cache_records()}
        sizes = {p.name: p.stat().st_size
                 for p in (book / "_build" / "html" / "chapters").glob("*.html")}
    largest = max(sizes, key=sizes.get)
    return {"clean_build_s": clean, "rebuild_s": rebuild, "chapters": len(sizes),
            "largest_page": largest, "largest_page_bytes": sizes[largest],
            "chapter_execution_s": execution, "page_bytes": sizes,
            "targets": {"clean_build_s": 600, "rebuild_s": 30, "page_bytes": 3 * 1024 * 1024},
            "machine": machine(),
            # a build on a busy machine takes longer: the 1-minute load before and after
            "load_average_1min": [round(load_at_start, 1), round(os.getloadavg()[0], 1)]}


if __name__ == "__main__":
    r = run()
    print(f"book: clean build {r['clean_build_s']:.0f} s for {r['chapters']} chapter(s) "
          f"(target < 600 s), rebuild {r['rebuild_s']:.1f} s (target < 30 s); "
          f"largest page {r['largest_page']} {r['largest_page_bytes'] / 1e6:.2f} MB (target <= 3 MB)")
    for name, seconds in sorted(r["chapter_execution_s"].items()):
        print(f"  {name}: executes in {seconds:.1f} s (target < 120 s)")
