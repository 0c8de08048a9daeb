"""Chapter 1 in the clients readers really use, not only in the book's own build.

* Colab: a venv with Colab's preinstalled packages (tests/colab_env.py, cached in
  _build/colab-venv). Installing the package with its ``book`` extra must change none
  of them, and the chapter must run top to bottom in a real kernel there, its explorer
  showing as a live widget under ipywidgets 7.7.1 / IPython 7.34.
* JupyterLab 4 in headless Chromium (network cut but for the local server): Run All,
  the explorer's widget appears, a slider moved with the keyboard changes the image,
  every slider's name is shown in full. Screenshots: _build/screenshots/jupyterlab_*.png.

Marked ``clients``; ``pytest -m clients -s`` prints what the Colab install would do.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

import colab_env
from conftest import ROOT, chromium, need_chromium

pytestmark = pytest.mark.clients

CHAPTER = ROOT / "chapters" / "01_attention_basics.ipynb"
EXPLORER_CALL = "basics_explorer("
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SHOTS = ROOT / "_build" / "screenshots"
LAB_LOG = ROOT / "_build" / "jupyterlab-server.log"
DEFAULT_REPR = re.compile(r"<attention_core\.[\w.]+ object at 0x[0-9a-f]+>")


def need(what: str, found: bool, hint: str):
    """Skips when a tool is missing on a developer's machine; CI must have it."""
    if not found:
        if os.environ.get("CI"):
            raise RuntimeError(f"CI needs {what} ({hint})")
        pytest.skip(f"{what} not installed ({hint})")


def timed(label: str, start: float):
    print(f"[clients] {label}: {time.monotonic() - start:.1f} s")


# --------------------------------------------------------------------------- Colab


@pytest.fixture(scope="module")
def colab():
    """The Colab-like venv, its packages before our install: {name: version}."""
    start = time.monotonic()
    with colab_env.locked():  # a test run beside this one waits for it
        timed("waited for the colab venv's lock", start)
        start = time.monotonic()
        built = colab_env.ensure_colab_venv(log=lambda m: print(f"[clients] {m}"))
        timed(f"colab venv {'built' if built else 'from cache'}", start)
        yield colab_env.installed()


def changes(before: dict[str, str], items) -> list[str]:
    """Every package other than ours in ``items`` (name, version), as 'name old -> new'."""
    return [f"{name}: {before.get(colab_env.canonical(name), 'not installed')} -> {version}"
            for name, version in items if colab_env.canonical(name) != colab_env.PACKAGE]


def test_colab_install_changes_no_preinstalled_package(colab):
    start = time.monotonic()
    report = colab_env.install_book_package(dry_run=True)
    would = [(i["metadata"]["name"], i["metadata"]["version"]) for i in report]
    print("[clients] in the Colab-like venv, pip install '<package>[book]' would install: "
          + (", ".join(f"{n} {v}" for n, v in would) or "nothing"))
    timed("dry run", start)
    changed = changes(colab, would)
    assert not changed, ("installing the package into Colab would change its preinstalled packages:\n  "
                         + "\n  ".join(changed))
    assert [colab_env.canonical(n) for n, _ in would] == [colab_env.PACKAGE]


PROBE = """\
import importlib.util, json, sys
import IPython, ipywidgets
print("CLIENT-PROBE " + json.dumps({
    "python": sys.executable, "IPython": IPython.__version__,
    "ipywidgets": ipywidgets.__version__,
    "attention_core": importlib.util.find_spec("attention_core").origin}))
"""


REDRAW_PROBE = """\
import json
from attention_core.book.explorers import basics_explorer
_explorer = basics_explorer(["the", "cat", "sat", "down"])
_view = _explorer.widget()
_before = _view.image.value
_view.sliders[0].value = _explorer.controls["temperature"][0]  # as a reader dragging it
print("REDRAW-PROBE " + json.dumps({"redrawn": _view.image.value != _before,
                                     "temperature": _explorer.values["temperature"]}))
"""


def texts(output, key="text/plain") -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return str(output.get("data", {}).get(key, ""))


def test_colab_chapter_runs_with_a_live_explorer(colab, monkeypatch, tmp_path):
    from nbclient import NotebookClient

    start = time.monotonic()
    report = colab_env.install_book_package(dry_run=False)
    after = colab_env.installed()
    changed = [f"{name}: {colab.get(name, 'not installed')} -> {version}"
               for name, version in after.items()
               if name != colab_env.PACKAGE and colab.get(name) != version]
    changed += [f"{name}: {version} -> removed" for name, version in colab.items() if name not in after]
    assert not changed, "installing the package changed Colab's packages:\n  " + "\n  ".join(changed)
    assert colab_env.PACKAGE in after, f"the package was not installed: {report}"
    timed("install", start)

    # Colab's working directory holds nothing of the book: run the chapter in an empty one
    nb = nbformat.read(CHAPTER, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(PROBE))
    nb.cells.append(nbformat.v4.new_code_cell(REDRAW_PROBE))
    monkeypatch.setenv("JUPYTER_PATH", colab_env.kernel_path())
    start = time.monotonic()
    NotebookClient(nb, kernel_name=colab_env.KERNEL_NAME, timeout=300, startup_timeout=120,
                   allow_errors=True, resources={"metadata": {"path": str(tmp_path)}}).execute()
    timed("chapter 1 in the Colab-like kernel", start)

    probe_out = "".join(texts(o) for o in nb.cells[0].outputs)
    match = re.search(r"CLIENT-PROBE (.*)", probe_out)
    assert match, f"the probe cell printed no versions: {nb.cells[0].outputs}"
    probe = json.loads(match.group(1))
    print(f"[clients] kernel: {probe}")
    assert probe["python"].startswith(str(colab_env.VENV)), probe
    assert probe["IPython"] == "7.34.0" and probe["ipywidgets"] == "7.7.1", probe
    assert probe["attention_core"].startswith(str(colab_env.VENV)), (
        f"the kernel imported the package from {probe['attention_core']}, not the installed copy")

    problems = []
    for index, cell in enumerate(nb.cells[1:], start=1):
        if cell.cell_type != "code":
            continue
        where = f"cell {index} ({cell.source.strip().splitlines()[0][:60]!r})"
        for out in cell.outputs:
            if out.output_type == "error":
                problems.append(f"{where}: {out.ename}: {out.evalue}")
            elif out.output_type == "stream" and out.name == "stderr" and (
                    "Traceback" in out.text or "Error" in out.text):
                problems.append(f"{where} wrote to stderr: {out.text[-500:]}")
    assert not problems, "chapter 1 failed in the Colab-like kernel:\n  " + "\n  ".join(problems)

    chapter_cells = nb.cells[1:-1]  # without the probes
    explorer = [c for c in chapter_cells if c.cell_type == "code" and EXPLORER_CALL in c.source]
    assert len(explorer) == 1, f"expected one cell calling {EXPLORER_CALL}"
    shown = [o for o in explorer[0].outputs if o.output_type in ("execute_result", "display_data")]
    summary = [{"type": o.output_type, "mime": sorted(o.get("data", {})),
                "text/plain": texts(o)[:120]} for o in shown]
    print(f"[clients] explorer cell outputs: {summary}")
    widget = [o for o in shown if WIDGET_VIEW in o.data and o.data[WIDGET_VIEW].get("model_id")]
    assert widget, f"the explorer shows no live widget (no {WIDGET_VIEW} with a model_id): {summary}"
    for o in shown:
        assert not DEFAULT_REPR.search(texts(o)), f"the explorer printed its default repr: {texts(o)}"

    redraw = re.search(r"REDRAW-PROBE (.*)", "".join(texts(o) for o in nb.cells[-1].outputs))
    assert redraw, f"the redraw probe printed nothing: {nb.cells[-1].outputs}"
    assert json.loads(redraw.group(1)) == {"redrawn": True, "temperature": 0.25}, (
        "moving a slider under ipywidgets 7.7.1 did not redraw the figure")


# ------------------------------------------------------------------------- JupyterLab


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_json(path: Path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def lab():
    """`jupyter lab` from this venv on a free port, over a copy of chapters/, with its
    own config and settings; yields the base URL and stops the server whatever happens."""
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        need("jupyterlab", False, "pip install -e '.[test]'")
    home = Path(tempfile.mkdtemp(prefix="jupyterlab-test-"))
    root = home / "chapters"
    shutil.copytree(ROOT / "chapters", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    settings = home / "settings"
    # every cell in the DOM (no windowing), and no news or update checks (no network)
    write_json(settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings",
               {"windowingMode": "none", "autoStartDefaultKernel": True})  # no "Select Kernel" dialog
    write_json(settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings",
               {"fetchNews": "false", "checkForUpdates": False})
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_PATH", "PYTHONPATH")}
    env.update(JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"),
               JUPYTERLAB_SETTINGS_DIR=str(settings), JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"))
    port = free_port()
    with open(home / "server.log", "w") as log:  # the server writes to its own copy of the handle
        server = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
             "--allow-root",  # CI containers run as root
             "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
             "--ServerApp.terminals_enabled=False", "--LabApp.extension_manager=readonly",
             f"--ServerApp.root_dir={root}", "--LabApp.news_url=None",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("jupyter lab did not start:\n" + (home / "server.log").read_text()[-4000:])
            time.sleep(0.5)
        yield url
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)  # the server and the kernels it started
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=10)
        shutil.copy2(home / "server.log", LAB_LOG)
        print(f"[clients] jupyter lab log: {LAB_LOG}")
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def lab_browser():
    need_chromium()
    with chromium(window="1280,1000") as driver:
        driver.set_page_load_timeout(60)
        driver.set_script_timeout(30)
        yield driver


def wait_for(driver, script: str, timeout: float, what: str, *args):
    """Polls a JavaScript expression until it is truthy; returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script, *args)
        if value:
            return value
        if time.monotonic() > deadline:
            shot(driver, "jupyterlab_timeout")
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


def shot(driver, name: str, element=None):
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    if element is not None:
        element.screenshot(str(path))
    else:
        driver.save_screenshot(str(path))
    return path


def lab_api(url: str, path: str):
    with urllib.request.urlopen(f"{url}/api/{path}", timeout=10) as response:
        return json.loads(response.read())


# the output area of the explorer's cell: the one holding the widget's sliders
EXPLORER_JS = """
const areas = [...document.querySelectorAll('.jp-Cell .jp-OutputArea')];
return areas.find(a => a.querySelector('.widget-slider') && a.querySelector('img')) || null;
"""


def test_jupyterlab_runs_the_chapter_and_the_explorer_responds(lab, lab_browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver = lab_browser
    start = time.monotonic()
    driver.get(f"{lab}/lab/tree/{CHAPTER.name}")
    wait_for(driver, "return document.querySelectorAll('.jp-Notebook .jp-CodeCell').length > 0",
             90, "JupyterLab to open the notebook")
    # the indicator reads "idle" once before the kernel has connected: wait for the
    # server's session, then for the indicator
    deadline = time.monotonic() + 90
    while not any(s["kernel"]["execution_state"] == "idle" for s in lab_api(lab, "sessions")):
        assert time.monotonic() < deadline, "the notebook's kernel did not start in 90 s"
        time.sleep(0.5)
    wait_for(driver, "return document.querySelector('.jp-Notebook-ExecutionIndicator')"
                     "?.getAttribute('data-status') === 'idle'", 60, "the kernel to be idle")
    time.sleep(1)
    timed("JupyterLab opened the chapter", start)

    start = time.monotonic()  # Run > Run All Cells, as a reader does
    driver.find_element(By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell .jp-InputPrompt").click()
    run_menu = next(e for e in driver.find_elements(By.CSS_SELECTOR, "#jp-MainMenu .lm-MenuBar-item")
                    if e.text.strip() == "Run")
    run_menu.click()
    run_all = wait_for(driver, """return [...document.querySelectorAll('.lm-Menu-item')].find(
        e => e.querySelector('.lm-Menu-itemLabel')?.textContent.trim() === 'Run All Cells')""",
                       10, "the Run menu's 'Run All Cells'")
    run_all.click()
    wait_for(driver, """
        const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];
        return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        """, 240, "every cell to run")
    explorer = wait_for(driver, EXPLORER_JS, 60, "the explorer's widget to render")
    timed("Run All Cells", start)

    errors = driver.execute_script("""
        const stderr = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]';
        return [...document.querySelectorAll(stderr)]
            .map(e => e.textContent).filter(t => /Traceback|Error/.test(t)).map(t => t.slice(0, 300));""")
    assert not errors, f"cells failed in JupyterLab: {errors}"

    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", explorer)
    time.sleep(0.5)
    shot(driver, "jupyterlab_notebook")
    shot(driver, "jupyterlab_explorer_before", explorer)

    labels = driver.execute_script("""
        return [...arguments[0].querySelectorAll('.widget-slider .widget-label')].map(
            l => ({text: l.textContent, scroll: l.scrollWidth, client: l.clientWidth}));""", explorer)
    assert labels, "the explorer has no slider labels"
    print(f"[clients] JupyterLab slider labels: {labels}")

    image = explorer.find_element(By.CSS_SELECTOR, "img")
    handle = explorer.find_element(By.CSS_SELECTOR, ".widget-slider .noUi-handle")
    readout = explorer.find_element(By.CSS_SELECTOR, ".widget-slider .widget-readout")
    before_src, before_value = image.get_attribute("src"), readout.text
    at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
    driver.execute_script("arguments[0].focus()", handle)
    handle.send_keys(Keys.ARROW_LEFT if at_max else Keys.ARROW_RIGHT)  # as a reader would
    wait_for(driver, "return arguments[0].src !== arguments[1]", 30,
             "the figure to change after the slider moved", image, before_src)
    assert readout.text != before_value, "the slider's readout did not change"
    wait_for(driver, "return arguments[0].complete && arguments[0].naturalWidth > 0", 10,
             "the new image to load", image)
    shot(driver, "jupyterlab_explorer_after", explorer)

    cut = [f"{l['text']!r} ({l['scroll']} px of text in {l['client']} px)"
           for l in labels if l["scroll"] > l["client"]]
    assert not cut, f"slider names are cut short in JupyterLab: {cut}"
