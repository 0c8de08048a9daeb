"""The code is clean under ruff, configured in pyproject.toml (a fixed line length,
imports sorted, pyflakes, bugbear, pyupgrade), over the package, tests, benchmarks,
figures and _ext/."""

import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_ruff_is_clean():
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All checks passed" in result.stdout
