"""Binder (repo2docker) can build the readers' environment from ``binder/``.

repo2docker takes the Python named in ``binder/runtime.txt`` (``python-X.Y``; without it,
its default 3.10, where numpy 2.4 does not exist), installs its own Jupyter (JupyterLab 4,
Notebook 7) and runs ``pip install -r binder/requirements.txt`` on Ubuntu 24.04, x86_64,
glibc 2.39, then ``binder/postBuild``. The tests here ask pip, from this machine, for the
resolution that install would make: ``pip install --dry-run`` for that Python and platform,
wheels only (pip takes ``--python-version`` only with ``--only-binary=:all:``), against PyPI
with this machine's pip configuration switched off (``PIP_CONFIG_FILE=/dev/null``: no local
wheelhouse, index or constraints).

What is checked, and what is not:

* Every requirement but torch resolves on PyPI for that Python, with all its dependencies,
  the newest versions that fit, as a fresh build picks them. A failure names the package
  and the Python version.
* torch: the file takes ``torch==<v>+cpu`` from its ``--extra-index-url``
  (download.pytorch.org), which the machines this test was written on cannot reach (only
  the package registries are). So ``torch==<v>`` is looked up on PyPI instead: a CPython
  X.Y manylinux x86_64 wheel of that version must exist, and its requirements, less the
  CUDA ones (``nvidia-*``, ``cuda-*``, ``triton``: the CPU build has none of them), are
  resolved together with the rest of the file.
* That the ``+cpu`` wheel itself exists for X.Y is checked only where download.pytorch.org
  resolves (test_cpu_torch_wheel_exists); elsewhere that test is skipped, saying why.
* Not checked: the packages repo2docker installs before the file (pip keeps those that
  already satisfy it, so Binder may end with older unpinned dependencies than the dry
  run picks), and postBuild's two ``--no-deps`` installs (the book's package and the
  pretrained weights).

The pins binder/requirements.txt shares with the top-level requirements.txt (numpy,
matplotlib, seaborn, ipywidgets, safetensors, tokenizers, torch less its ``+cpu``) must be
equal: the book is built and tested with one set of versions, and Binder runs it with them.
Needs PyPI: skipped without it on a developer's machine, an error in CI.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from conftest import ROOT

pytestmark = pytest.mark.clients  # Binder's environment, resolved by pip

BINDER = ROOT / "binder"
RUNTIME = BINDER / "runtime.txt"
REQUIREMENTS = BINDER / "requirements.txt"
PYPI = "https://pypi.org/simple"
# repo2docker's buildpacks/conda/supported_python_version.py (2026.04), less the 3.8 and
# 3.9 that the book's package does not support (pyproject.toml: requires-python >=3.10)
REPO2DOCKER_PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")
# Binder's image is Ubuntu 24.04 (glibc 2.39): pip there takes any manylinux wheel up to
# glibc 2.39. Named one by one: pip does not widen --platform manylinux_2_28 to older tags.
PLATFORMS = ([f"manylinux_2_{minor}_x86_64" for minor in range(39, 4, -1)]
             + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"])
# torch's requirements that only its CUDA build has (the CPU build on download.pytorch.org has none)
CUDA_ONLY = re.compile(r"^(nvidia-|cuda-|triton$)")
# pinned in both files; the test fails if either stops pinning one, so the check cannot vanish
SHARED_PINS = ("numpy", "matplotlib", "seaborn", "ipywidgets", "safetensors", "tokenizers", "torch")
# pip settings that only say how to connect (certificates, proxy, timeouts), kept from the caller
PIP_CONNECTION = {"PIP_CERT", "PIP_CLIENT_CERT", "PIP_PROXY", "PIP_TRUSTED_HOST", "PIP_DEFAULT_TIMEOUT",
                  "PIP_RETRIES", "PIP_CACHE_DIR", "PIP_NO_CACHE_DIR"}


def runtime_python() -> str:
    """``X.Y`` from binder/runtime.txt."""
    assert RUNTIME.exists(), "binder/runtime.txt is missing: repo2docker would use its default Python 3.10"
    text = RUNTIME.read_text()
    match = re.fullmatch(r"python-(3\.\d+)\n?", text)
    assert match, f"binder/runtime.txt must be one line 'python-X.Y' (repo2docker's format), not {text!r}"
    return match.group(1)


def requirement_lines(path: Path) -> list[str]:
    """The file's lines without comments and blank lines (options such as --extra-index-url kept)."""
    lines = (re.sub(r"(^|\s)#.*", "", line).strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def pins(path: Path) -> dict[str, Version]:
    """{canonical name: version} of every ``name==version`` requirement in a requirements file."""
    found = {}
    for line in requirement_lines(path):
        if line.startswith("-"):
            continue
        req = Requirement(line)
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator == "==":
            found[canonicalize_name(req.name)] = Version(specs[0].version)
    return found


def binder_file() -> tuple[str, Requirement, list[str]]:
    """The Binder file split: (torch's extra index, torch's requirement, every other line)."""
    index, torch, rest = None, None, []
    for line in requirement_lines(REQUIREMENTS):
        if line.startswith("--extra-index-url"):
            assert index is None, "binder/requirements.txt names more than one extra index"
            index = line.split(maxsplit=1)[1].strip()
        elif not line.startswith("-") and canonicalize_name(Requirement(line).name) == "torch":
            torch = Requirement(line)
        else:
            rest.append(line)
    assert index and "download.pytorch.org" in index, "binder/requirements.txt: no CPU torch index"
    assert torch is not None, "binder/requirements.txt does not pin torch"
    return index, torch, rest


def torch_version(torch: Requirement) -> Version:
    (spec,) = torch.specifier
    version = Version(spec.version)
    assert spec.operator == "==" and version.local == "cpu", \
        f"Binder's torch must be pinned '==<v>+cpu', not {torch}"
    return version


def need_pypi():
    """PyPI reachable, else a skip on a developer's machine and an error in CI."""
    try:
        socket.create_connection((urlparse(PYPI).hostname, 443), timeout=15).close()
    except OSError as err:
        if os.environ.get("CI"):
            raise RuntimeError(f"CI needs PyPI to resolve binder/requirements.txt ({err})") from err
        pytest.skip(f"PyPI unreachable ({err}): binder/requirements.txt not resolved")


def pip_env() -> dict[str, str]:
    """The caller's environment with pip's configuration switched off but how to connect."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in PIP_CONNECTION}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def resolve(python: str, requirements: list[str], *options: str) -> list[dict]:
    """What ``pip install -r`` would install on Binder (CPython ``python``, Linux x86_64),
    from PyPI alone: the ``install`` items of pip's report."""
    with tempfile.TemporaryDirectory(prefix="binder-resolve-") as tmp:
        req, report = Path(tmp) / "requirements.txt", Path(tmp) / "report.json"
        req.write_text("\n".join(requirements) + "\n")
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--report", str(report), "--index-url", PYPI, "--python-version", python,
               "--implementation", "cp", "--only-binary=:all:",
               *(f"--platform={p}" for p in PLATFORMS), *options, "-r", str(req)]
        proc = subprocess.run(cmd, env=pip_env(), capture_output=True, text=True, timeout=300)
        if proc.returncode:
            out = proc.stdout + proc.stderr
            errors = [line for line in out.splitlines() if line.startswith("ERROR")] or [out[-3000:]]
            pytest.fail(f"Python {python} (Linux x86_64, PyPI): binder/requirements.txt does not resolve:\n  "
                        + "\n  ".join(errors) + "\nrequirements resolved:\n  " + "\n  ".join(requirements))
        return json.loads(report.read_text())["install"]


def torch_cpu_requirements(python: str, version: Version) -> list[str]:
    """torch ``version`` on PyPI has a wheel for CPython ``python`` on Linux x86_64; returns
    its requirements less the CUDA ones, as the CPU build states them."""
    (item,) = resolve(python, [f"torch=={version.public}"], "--no-deps")
    requirements = []
    for text in item["metadata"].get("requires_dist", []):
        req = Requirement(text)
        if CUDA_ONLY.match(canonicalize_name(req.name)) or (req.marker and "extra" in str(req.marker)):
            continue
        requirements.append(text)
    return requirements


def test_runtime_txt_names_a_python_repo2docker_supports():
    python = runtime_python()
    assert python in REPO2DOCKER_PYTHONS, (f"binder/runtime.txt: Python {python} is not one repo2docker "
                                           f"builds for this book ({', '.join(REPO2DOCKER_PYTHONS)})")


def test_binder_pins_equal_the_books():
    binder, book = pins(REQUIREMENTS), pins(ROOT / "requirements.txt")
    for name in SHARED_PINS:
        assert name in binder, f"binder/requirements.txt no longer pins {name} with =="
        assert name in book, f"requirements.txt no longer pins {name} with =="
    differ = [f"{name}: binder/requirements.txt {binder[name]}, requirements.txt {book[name]}"
              for name in sorted(binder.keys() & book.keys()) if binder[name].public != book[name].public]
    assert not differ, "Binder must run the versions the book is built with:\n  " + "\n  ".join(differ)


def test_binder_requirements_resolve():
    python = runtime_python()
    _, torch, rest = binder_file()
    need_pypi()
    cpu_requirements = torch_cpu_requirements(python, torch_version(torch))
    installed = {canonicalize_name(i["metadata"]["name"]): Version(i["metadata"]["version"])
                 for i in resolve(python, rest + cpu_requirements)}
    wrong = [f"{name}=={version}: resolved to {installed.get(name, 'nothing')}"
             for name, version in pins(REQUIREMENTS).items()
             if name != "torch" and installed.get(name) != version]
    assert not wrong, (f"Python {python}: pip's report does not hold the pinned versions:\n  "
                       + "\n  ".join(wrong))
    assert "nbgitpuller" in installed, "the launch buttons need nbgitpuller in Binder's image"


def test_cpu_torch_wheel_exists():
    python = runtime_python()
    index, torch, _ = binder_file()
    version = torch_version(torch)
    host = urlparse(index).hostname
    try:
        socket.getaddrinfo(host, 443)
    except OSError as err:
        pytest.skip(f"{host} unreachable here ({err}): torch=={version} for Python {python} not checked; "
                    f"test_binder_requirements_resolve checked torch=={version.public} on PyPI instead")
    with urllib.request.urlopen(f"{index.rstrip('/')}/torch/", timeout=60) as page:
        hrefs = re.findall(r'href="([^"#]+)', page.read().decode())
    files = {unquote(href.rsplit("/", 1)[-1]) for href in hrefs}
    tag = "cp" + python.replace(".", "")
    wheel = re.compile(rf"torch-{re.escape(str(version))}-{tag}-{tag}-manylinux[\w.]*_x86_64\.whl")
    assert any(wheel.fullmatch(f) for f in files), \
        f"{index}: no torch {version} wheel for Python {python}, Linux x86_64"
