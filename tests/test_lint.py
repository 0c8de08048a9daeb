"""The code is clean under ruff, configured in pyproject.toml (a fixed line length,
imports sorted, pyflakes, bugbear, pyupgrade), over the package, tests, benchmarks,
figures and _ext/; the chapters' code cells are formatted (chapters/ruff.toml) to the
width of a chapter page's code column."""

import json
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_ruff_is_clean():
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All checks passed" in result.stdout


def notebook_line_length() -> int:
    """The width the chapters' code is formatted to (chapters/ruff.toml): what the code
    column of a chapter page holds at 1280 px (tests/test_publish.py measures it)."""
    text = (ROOT / "chapters" / "ruff.toml").read_text()
    return int(re.search(r"^line-length\s*=\s*(\d+)", text, re.M)[1])


def test_chapter_code_fits_the_desktop_column():
    """Every line of every code cell fits the page's code column, so a desktop reader never
    scrolls code sideways; `make format` (ruff format) keeps the chapters so."""
    limit = notebook_line_length()
    long = [f"{path.name}: {line.strip()[:50]}... ({len(line)})"
            for path in sorted((ROOT / "chapters").glob("*.ipynb"))
            for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"
            for line in "".join(cell["source"]).splitlines() if len(line) > limit]
    assert not long, f"{len(long)} lines longer than {limit} characters:\n  " + "\n  ".join(long[:10])


def test_chapters_are_formatted():
    ruff = Path(sys.executable).with_name("ruff")
    notebooks = sorted(str(p) for p in (ROOT / "chapters").glob("*.ipynb"))
    result = subprocess.run([str(ruff), "format", "--check", "--no-cache", *notebooks], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, "run `make format`:\n" + result.stdout + result.stderr
