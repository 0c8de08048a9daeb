"""Chapter 1 in the clients readers really use, not only in the book's own build.

* Colab: a venv with Colab's preinstalled packages (tests/colab_env.py, cached in
  _build/colab-venv). Installing the package with its ``book`` extra must change none
  of them, and the chapter must run top to bottom in a real kernel there, its explorer
  showing as a live widget under ipywidgets 7.7.1 / IPython 7.34, its figure an image
  output of its own that a slider move replaces.
* JupyterLab 4 in headless Chromium (network cut but for the local server): Run All,
  the explorer's widget appears, a slider moved with the keyboard changes the image,
  every slider's name and readout is shown in full; saved with Ctrl+S, its kernel shut
  down, the chapter reopened (trusted) and an unsigned copy opened (untrusted) both show
  the figure the reader left where the explorer was. Screenshots:
  _build/screenshots/jupyterlab_*.png.

Marked ``clients``; ``pytest -m clients -s`` prints what the Colab install would do.
"""

from __future__ import annotations

import base64
import hashlib
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
from conftest import ROOT, SITE, chromium, need_chromium

pytestmark = pytest.mark.clients

# what a reader opens: the chapter's reader notebook, written by `make book`
# (_ext/reader_notebooks.py), not the MyST source in chapters/
CHAPTER = SITE / "notebooks" / "chapters" / "01_attention_basics.ipynb"
MYST_LEFT = re.compile(r"\{[a-z][\w:-]*\}`|```\{|:::\{")
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
import hashlib, json
from IPython.display import display
from attention_core.book.explorers import basics_explorer
_explorer = basics_explorer(["the", "cat", "sat", "down"])
display(_explorer)  # as a chapter's cell shows it: the controls, then the figure's own output
_view = _explorer.widget()
_before = _view.image.value
_view.controls[0].value = _explorer.controls["temperature"][0]  # as a reader dragging it
print("REDRAW-PROBE " + json.dumps({"redrawn": _view.image.value != _before,
                                     "temperature": _explorer.values["temperature"],
                                     "png_sha256": hashlib.sha256(_view.image.value).hexdigest()}))
"""


def texts(output, key="text/plain") -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return str(output.get("data", {}).get(key, ""))


def problems_in(cells) -> list[str]:
    """Errors, and tracebacks written to stderr, in the outputs of ``cells``, pairs
    ``(index, cell)``; each named by its index and first line."""
    found = []
    for index, cell in cells:
        if cell.cell_type != "code":
            continue
        where = f"cell {index} ({cell.source.strip().splitlines()[0][:60]!r})"
        for out in cell.outputs:
            if out.output_type == "error":
                found.append(f"{where}: {out.ename}: {out.evalue}")
            elif out.output_type == "stream" and out.name == "stderr" and (
                    "Traceback" in out.text or "Error" in out.text):
                found.append(f"{where} wrote to stderr: {out.text[-500:]}")
    return found


def test_colab_chapter_runs_with_a_live_explorer(colab, site, monkeypatch, tmp_path):
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

    problems = problems_in(list(enumerate(nb.cells))[1:])
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
    assert texts(widget[0]).startswith("Explorer controls: temperature τ, tokens shown."), summary
    figure = [o for o in shown if "image/png" in o.data]
    assert len(figure) == 1 and WIDGET_VIEW not in figure[0].data, (
        f"the explorer's figure is not an image output of its own (what a saved notebook keeps): {summary}")
    assert "Shown: temperature τ 1.0, tokens shown 10." in texts(figure[0]), summary
    for o in shown:
        assert not DEFAULT_REPR.search(texts(o)), f"the explorer printed its default repr: {texts(o)}"

    probe_cell = nb.cells[-1]
    redraw = re.search(r"REDRAW-PROBE (.*)", "".join(texts(o) for o in probe_cell.outputs))
    assert redraw, f"the redraw probe printed nothing: {probe_cell.outputs}"
    redraw = json.loads(redraw.group(1))
    assert redraw["redrawn"] and redraw["temperature"] == 0.25, (
        "moving a slider under ipywidgets 7.7.1 did not redraw the figure")
    # the move replaced the figure's output (update_display_data by its display_id)
    figures = [o for o in probe_cell.outputs if "image/png" in o.get("data", {})]
    assert len(figures) == 1, f"a move must replace the figure, not add one: {len(figures)} images"
    shown_png = base64.b64decode(figures[0].data["image/png"])
    assert hashlib.sha256(shown_png).hexdigest() == redraw["png_sha256"], (
        "under ipywidgets 7.7.1 the figure's output still shows the frame before the move")
    assert "temperature τ 0.25" in texts(figures[0])


# ------------------------------------------------------------------------- JupyterLab


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_json(path: Path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def lab(site):
    """`jupyter lab` from this venv on a free port, over a copy of the reader notebooks, with its
    own config and settings; yields ``(base URL, the folder it serves)`` and stops the
    server whatever happens."""
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        need("jupyterlab", False, "pip install -e '.[test]'")
    home = Path(tempfile.mkdtemp(prefix="jupyterlab-test-"))
    root = home / "chapters"
    shutil.copytree(CHAPTER.parent, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
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
             "--ServerApp.disable_check_xsrf=True",  # the test shuts a kernel down through the API
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
        yield url, root
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


def lab_api(url: str, path: str, method: str = "GET"):
    request = urllib.request.Request(f"{url}/api/{path}", method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else None


# the output area of the explorer's cell: the one holding the widget's sliders
EXPLORER_JS = """
const areas = [...document.querySelectorAll('.jp-Cell .jp-OutputArea')];
return areas.find(a => a.querySelector('.widget-slider') && a.querySelector('img')) || null;
"""

# what the explorer's cell shows, output by output: the renderer's mime type, its text,
# and its image (the data URI's base64, and whether it is decoded and visible)
EXPLORER_OUTPUTS_JS = """
const cell = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')].find(
    c => (c.querySelector('.jp-InputArea-editor')?.textContent || '').includes(arguments[0]));
if (!cell) return null;
return [...cell.querySelectorAll('.jp-OutputArea-output')].map(o => {
    const img = o.querySelector('img'), box = img && img.getBoundingClientRect();
    return {mime: o.getAttribute('data-mime-type'), text: o.innerText.trim().slice(0, 300),
            png: img && img.src.startsWith('data:image/png;base64,') ? img.src.split(',')[1] : null,
            visible: !!img && img.complete && img.naturalWidth > 0 && box.width > 100 && box.height > 50};
});
"""
WIDGET_ERRORS = ("Error displaying widget", "model not found", "Loading widget", "javascript error")


def open_notebook(driver, url: str, name: str):
    """Opens notebook ``name`` alone (a fresh workspace) and waits for its kernel."""
    driver.get(f"{url}/lab/tree/{name}?reset")
    wait_for(driver, "return document.querySelectorAll('.jp-Notebook .jp-CodeCell').length > 0",
             90, f"JupyterLab to open {name}")
    # the indicator reads "idle" once before the kernel has connected: wait for the
    # server's session, then for the indicator
    deadline = time.monotonic() + 90
    while not any(s["path"].endswith(name) and s["kernel"]["execution_state"] == "idle"
                  for s in lab_api(url, "sessions")):
        assert time.monotonic() < deadline, f"the kernel of {name} did not start in 90 s"
        time.sleep(0.5)
    wait_for(driver, "return document.querySelector('.jp-Notebook-ExecutionIndicator')"
                     "?.getAttribute('data-status') === 'idle'", 60, "the kernel to be idle")
    time.sleep(1)


def explorer_cell(notebook: dict) -> dict:
    """The code cell of a notebook's JSON that shows the explorer."""
    cells = [c for c in notebook["cells"]
             if c["cell_type"] == "code" and EXPLORER_CALL in "".join(c["source"])]
    assert len(cells) == 1, f"expected one cell calling {EXPLORER_CALL}"
    return cells[0]


def reopened(driver, url: str, name: str, shot_name: str) -> list[dict]:
    """Opens a saved notebook as a reader returning to it would (its kernel new, the
    explorer's widgets gone), screenshots the explorer's cell; returns its outputs."""
    open_notebook(driver, url, name)
    deadline = time.monotonic() + 20  # the widget manager restores, then gives up on a missing model
    while True:
        outputs = driver.execute_script(EXPLORER_OUTPUTS_JS, EXPLORER_CALL) or []
        settled = outputs and not any("Loading widget" in o["text"] for o in outputs)
        if settled and any(o["visible"] for o in outputs) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    cell = driver.execute_script("""return [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')].find(
        c => (c.querySelector('.jp-InputArea-editor')?.textContent || '').includes(arguments[0]))""",
                                 EXPLORER_CALL)
    if cell is not None:
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", cell)
        time.sleep(0.5)
        shot(driver, shot_name, cell)
    print(f"[clients] {name} reopened, the explorer's outputs: "
          + json.dumps([{k: (v[:40] + "..." if k == "png" and v else v) for k, v in o.items()}
                        for o in outputs], ensure_ascii=False))
    return outputs


def test_jupyterlab_runs_the_chapter_and_a_saved_copy_keeps_the_figure_left(lab, lab_browser):
    """Run All, move a slider, save; then reopen the saved chapter (kernel shut down, so
    the widgets are gone) trusted, and an unsigned copy of it untrusted: each shows the
    figure as the reader left it where the explorer was."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    url, root = lab
    driver = lab_browser
    start = time.monotonic()
    open_notebook(driver, url, CHAPTER.name)
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

    # the prose reads like the page: no MyST left, maths typeset, citations and terms linked
    prose = driver.execute_script("""
        const md = [...document.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown')];
        return {text: md.map(m => m.innerText).join('\\n'),
                maths: md.filter(m => m.querySelector('mjx-container')).length,
                links: md.flatMap(m => [...m.querySelectorAll('a[href^="https://"]')]).length,
                details: md.flatMap(m => [...m.querySelectorAll('details')]).length};""")
    left = sorted(set(MYST_LEFT.findall(prose["text"])))
    assert not left, f"JupyterLab shows raw MyST markup in the reader notebook: {left}"
    assert prose["maths"] > 5 and prose["links"] > 10 and prose["details"] > 0, (
        f"the reader notebook's prose is not rendered as expected: {dict(prose, text='...')}")
    cited = driver.execute_script("""return [...document.querySelectorAll('.jp-MarkdownCell')].find(
        c => c.querySelector('a[href*="bibliography.html"]') && c.querySelector('mjx-container'))""")
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", cited)
    time.sleep(0.5)
    shot(driver, "jupyterlab_reader_prose")

    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", explorer)
    time.sleep(0.5)
    shot(driver, "jupyterlab_notebook")
    shot(driver, "jupyterlab_explorer_before", explorer)

    labels = driver.execute_script("""
        return [...arguments[0].querySelectorAll('.widget-slider .widget-label, .widget-readout')]
            .filter(l => l.offsetParent !== null).map(
            l => ({text: l.textContent, scroll: l.scrollWidth, client: l.clientWidth}));""", explorer)
    assert labels, "the explorer has no slider labels"
    print(f"[clients] JupyterLab slider labels and readouts: {labels}")

    # the figure is its own output (an image, no widget), under the controls
    figure_js = "return arguments[0].querySelector('[data-mime-type=\"image/png\"] img')"
    image = wait_for(driver, figure_js, 10, "the figure's image output", explorer)
    handle = explorer.find_element(By.CSS_SELECTOR, ".widget-slider .noUi-handle")
    readout = explorer.find_element(By.CSS_SELECTOR, ".widget-slider .widget-readout")
    before_src, before_value = image.get_attribute("src"), readout.text
    at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
    driver.execute_script("arguments[0].focus()", handle)
    start = time.monotonic()
    handle.send_keys(Keys.ARROW_LEFT if at_max else Keys.ARROW_RIGHT)  # as a reader would
    # the update comes from the widget's callback (a comm message), routed by display_id
    image = wait_for(driver, """const img = arguments[0].querySelector('[data-mime-type="image/png"] img');
        return img && img.src !== arguments[1] && img.complete && img.naturalWidth > 0 && img""", 30,
                     "the figure to change after the slider moved", explorer, before_src)
    timed("a slider move redrew the figure", start)
    assert readout.text != before_value, "the slider's readout did not change"
    left_png, left_value = image.get_attribute("src").split(",", 1)[1], readout.text
    shot(driver, "jupyterlab_explorer_after", explorer)

    cut = [f"{l['text']!r} ({l['scroll']} px of text in {l['client']} px)"
           for l in labels if l["scroll"] > l["client"]]
    assert not cut, f"slider names or readouts are cut short in JupyterLab: {cut}"

    # save as a reader does (Ctrl+S), and wait for the file to change
    saved_at = lab_api(url, f"contents/{CHAPTER.name}?content=0")["last_modified"]
    driver.find_element(By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell .jp-InputPrompt").click()
    ActionChains(driver).key_down(Keys.CONTROL).send_keys("s").key_up(Keys.CONTROL).perform()
    deadline = time.monotonic() + 30
    while lab_api(url, f"contents/{CHAPTER.name}?content=0")["last_modified"] == saved_at:
        assert time.monotonic() < deadline, "Ctrl+S did not save the notebook in 30 s"
        time.sleep(0.5)
    saved = lab_api(url, f"contents/{CHAPTER.name}?content=1")["content"]
    saved_outputs = explorer_cell(saved)["outputs"]
    print("[clients] the saved explorer cell's outputs: "
          + json.dumps([{"type": o["output_type"], "mime": sorted(o.get("data", {})),
                         "text/plain": str(o.get("data", {}).get("text/plain", ""))[:160]}
                        for o in saved_outputs], ensure_ascii=False))

    # the reader leaves: the kernel is shut down, and with it the widgets' models
    for session in lab_api(url, "sessions"):
        lab_api(url, f"sessions/{session['id']}", method="DELETE")
    # an unsigned copy of the saved file opens untrusted (a download, a colleague's copy)
    copy = nbformat.from_dict(saved)
    copy.metadata["copied_by"] = "tests/test_clients.py"  # not the content that was signed
    untrusted = f"untrusted_{CHAPTER.name}"
    nbformat.write(copy, root / untrusted)

    start = time.monotonic()
    trusted_outputs = reopened(driver, url, CHAPTER.name, "jupyterlab_reopened_trusted")
    untrusted_outputs = reopened(driver, url, untrusted, "jupyterlab_reopened_untrusted")
    timed("reopened the saved chapter, trusted and untrusted", start)

    figures = [o for o in saved_outputs if "image/png" in o.get("data", {})]
    assert len(figures) == 1, "the saved explorer has no figure of its own (an image output)"
    assert figures[0]["data"]["image/png"].replace("\n", "") == left_png, (
        "the saved figure is not the one the reader left")
    assert left_value in figures[0]["data"]["text/plain"], "the saved alt text names another setting"
    for trust, outputs in (("trusted", trusted_outputs), ("untrusted", untrusted_outputs)):
        shown_pngs = [o for o in outputs if o["png"]]
        assert shown_pngs and shown_pngs[0]["visible"], f"{trust}: no figure where the explorer was"
        assert shown_pngs[0]["png"] == left_png, f"{trust}: the figure is not the one the reader left"
        assert not any(e in shown_pngs[0]["text"] for e in WIDGET_ERRORS), shown_pngs[0]["text"]
    # untrusted, the controls fall back to their text; trusted, JupyterLab's widget
    # manager says the model (not saved by default) is gone
    assert any(o["text"].startswith("Explorer controls:") for o in untrusted_outputs), untrusted_outputs
