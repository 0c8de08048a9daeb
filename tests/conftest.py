import os
import subprocess
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
CHAPTERS = sorted(p.stem for p in (ROOT / "chapters").glob("*.ipynb"))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def site() -> Path:
    """The built website; built once per session if `make book` has not run."""
    if not (SITE / "index.html").exists():
        subprocess.run(["make", "-s", "book"], cwd=ROOT, check=True)
    return SITE
