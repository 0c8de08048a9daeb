"""The package's layers: the maths loads no drawing or widget library, and the import
contracts in pyproject.toml (import-linter) hold."""

import subprocess
import sys
from pathlib import Path

from conftest import ROOT

BOOK_LIBRARIES = ("matplotlib", "ipywidgets", "IPython", "PIL", "seaborn")


def loaded_after(statement: str) -> list[str]:
    """The book libraries in ``sys.modules`` after running ``statement`` in a fresh interpreter."""
    code = f"import sys; {statement}; print(' '.join(m for m in {BOOK_LIBRARIES!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return result.stdout.split()


def test_import_attention_core_loads_no_plotting_or_widgets():
    assert loaded_after("import attention_core as ac; ac.ATTENTION_FUNCTIONS") == []


def test_the_book_machinery_loads_them_when_used():
    assert "matplotlib" in loaded_after("import attention_core.book.viz")


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and "KEPT" in result.stdout
