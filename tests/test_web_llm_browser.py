"""Chapter 14's LLM computed in the browser (issue 45).

The page is chapter 14's own section (the raw HTML block of ``chapters/14_real_llm.ipynb``)
served with the site's scripts (``_web/_static/llm-lab``, the vendored onnxruntime-web and
@huggingface/tokenizers) and the build's cached export, in a folder laid out as the site is,
so these tests need the export but not the whole book.

* Node: the page's tokenizer (the vendored library over the exported tokenizer.json) gives
  the package's ids on the book's test strings and on the chat-wrapped prompts.
* Headless Chromium, every host but the local server unreachable: nothing heavy loads
  before the click and the button states the size, the text under it the memory of the
  decoded weights; after the click the page fetches the shipped blocks once and decodes
  them itself (``llm-lab/blocks.js``; the float32 file is never asked for); the first
  prompt's ids equal Python's ``chat_prompt``; two prompts the book does not contain each generate 20
  tokens equal to the package's greedy ``generate``, and the attention the page holds equals
  the package's float32 weights within ``meta.json``'s tolerance, rows summing to 1; a clicked
  token's logit lens (the lens graph on the streams the page keeps) ranks first, at every
  layer, what the package's ``circuits.logit_lens`` does, wherever its top two are clearly
  apart, for tokens of a prompt the book does not contain and of its answer; hostile
  prompts (markup, 5,000 characters, emoji only, empty) give text or a message and no
  console error; without WebAssembly, or opened as a file, the page says so.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

from conftest import ROOT, WEB_LLM_ATTENTION_ATOL, chromium, need_chromium

pytestmark = [pytest.mark.book, pytest.mark.browser]

PAGE = "chapters/14_real_llm.html"
PROMPTS = ["Give me two tips for a rainy weekend.", "Why is the ocean salty?"]  # not in the book
LENS_PROMPT = "Name three animals that live in the sea."  # not in the book
TEXTS = ["What is attention in a transformer?", "Café, naïve résumé — São Paulo! 3.14159 and 2026-11-25",
         "I love 🍕 and 😀🎉", "<img src=x onerror=alert(1)>", "tab\tseparated\nnew line", "日本語のテキスト",
         "<|im_start|>user\nhi<|im_end|>", "   ", "x" * 300, "don't won't it's O'Neill"]


def section_html() -> str:
    """The raw HTML block of chapter 14's in-browser section."""
    cells = json.loads((ROOT / "chapters" / "14_real_llm.ipynb").read_text(encoding="utf-8"))["cells"]
    text = next("".join(c["source"]) for c in cells if 'id="llm-lab"' in "".join(c["source"]))
    return re.search(r"```\{raw\} html\n(.*?)```", text, re.S).group(1)


@pytest.fixture(scope="module")
def export_dir():
    sys.path.insert(0, str(ROOT / "_ext"))
    from web_llm import cached_export

    root = ROOT / "_build" / "web_llm"
    root.mkdir(parents=True, exist_ok=True)
    return cached_export(root)


@pytest.fixture(scope="module")
def meta(export_dir):
    return json.loads((export_dir / "meta.json").read_text())


@pytest.fixture(scope="module")
def mini_site(tmp_path_factory, export_dir):
    site = tmp_path_factory.mktemp("llm_site")
    static = site / "_static"
    static.mkdir()
    for name in ("onnxruntime-web", "tokenizers"):
        source = ROOT / "_vendor" / "_static" / name
        if not source.is_dir():
            pytest.skip(f"{source} missing: run make setup (it vendors the JavaScript)")
        (static / name).symlink_to(source)
    (static / "llm-lab").symlink_to(ROOT / "_web" / "_static" / "llm-lab")
    (static / "smollm2").symlink_to(export_dir)
    (site / "chapters").mkdir()
    (site / PAGE).write_text('<!doctype html><html><head><meta charset="utf-8"><title>Chapter 14</title>'
                             '<link rel="icon" href="data:,">'
                             f"</head><body>{section_html()}</body></html>", encoding="utf-8")
    return site


@pytest.fixture(scope="module")
def reference():
    from attention_core.models import smollm

    return smollm.load_smollm2()


def test_tokenizer_ids_equal_python(export_dir, reference, tmp_path):
    from attention_core.models import smollm

    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            raise RuntimeError("CI needs node")
        pytest.skip("node not installed")
    _, tokenizer = reference
    shutil.copytree(ROOT / "_vendor" / "_static" / "tokenizers", tmp_path / "tokenizers")
    (tmp_path / "package.json").write_text('{"type": "module"}')
    texts = TEXTS + [smollm.chat_text([{"role": "user", "content": t}]) for t in TEXTS]
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    (tmp_path / "run.js").write_text(
        'import { Tokenizer } from "./tokenizers/tokenizers.min.js";\n'
        'import fs from "fs";\n'
        'const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));\n'
        'const tokenizer = new Tokenizer({ ...spec, padding: null, truncation: null }, {});\n'
        'const texts = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));\n'
        'console.log(JSON.stringify(texts.map((t) => Array.from(tokenizer.encode(t).ids, Number))));\n')
    out = subprocess.run([node, str(tmp_path / "run.js"), str(export_dir / "tokenizer.json"),
                          str(tmp_path / "texts.json")],
                         capture_output=True, text=True, check=True, timeout=120)
    got = json.loads(out.stdout)
    want = [tokenizer.encode(t).ids for t in texts]
    mismatched = [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
    assert not mismatched, mismatched[:2]


# ---------------------------------------------------------------- the page in Chromium
class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(mini_site):
    handler = functools.partial(QuietHandler, directory=str(mini_site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


LOGS = {"goog:loggingPrefs": {"browser": "ALL"}}


def wait_status(driver, statuses, timeout=900):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    # while a step runs, WebAssembly holds the page's thread: a script waits for it
    driver.set_script_timeout(120)
    WebDriverWait(driver, timeout, poll_frequency=0.5, ignored_exceptions=(TimeoutException,)).until(
        lambda d: d.execute_script("return window.llmLab && window.llmLab.status") in statuses)
    return driver.execute_script("return window.llmLab.status")


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def submit(driver, prompt, max_new="20"):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, "llm-max-new")).select_by_value(max_new)
    runs = driver.execute_script("return window.llmLab.runs")
    message = driver.execute_script("window.llmLab.message = ''; return ''")
    driver.execute_script("document.getElementById('llm-prompt').value = arguments[0];", prompt)
    driver.find_element(By.CSS_SELECTOR, "#llm-lab .llm-generate").click()
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30, poll_frequency=0.1).until(lambda d: d.execute_script(
        "return window.llmLab.runs") > runs or d.execute_script("return window.llmLab.message") != message)
    if driver.execute_script("return window.llmLab.runs") > runs:
        wait_status(driver, ("done", "error"))


@pytest.fixture(scope="module")
def page(server):
    need_chromium()
    from selenium.webdriver.common.by import By

    with chromium(capabilities=LOGS) as driver:
        driver.get(f"{server}/{PAGE}")
        wait_status(driver, ("idle",), 60)
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(driver, 30).until(lambda d: d.execute_script("return window.llmLab.downloadBytes > 0"))
        before = driver.execute_script(
            "return performance.getEntriesByType('resource').map((e) => [e.name, e.encodedBodySize])")
        button = driver.find_element(By.CSS_SELECTOR, "#llm-lab .llm-start").text
        cost = driver.find_element(By.CSS_SELECTOR, "#llm-lab .llm-cost").text
        driver.find_element(By.CSS_SELECTOR, "#llm-lab .llm-start").click()
        status = wait_status(driver, ("done", "error"))
        assert status == "done", driver.execute_script("return window.llmLab.message")
        yield {"driver": driver, "before": before, "button": button, "cost": cost}


def test_nothing_heavy_before_the_click_and_the_button_states_the_size(page, meta):
    assert sum(size for _, size in page["before"]) < 200_000, page["before"]
    assert not any("smollm2/model.onnx" in name and size for name, size in page["before"])
    assert re.search(r"\(\d+ MB\)", page["button"]), page["button"]
    # the memory the decoded weights take, from meta.json, and what the logit lens keeps
    assert f"{meta['weights']['bytes'] / 1e6:.0f} MB of memory" in page["cost"], page["cost"]
    lens_bytes = sum(t["length"] for t in meta["lens"]["tensors"])
    assert f"embedding ({lens_bytes / 1e6:.0f} MB)" in page["cost"], page["cost"]


def test_the_blocks_are_decoded_once_on_the_page(page, meta):
    """The page fetched the shipped blocks, decoded them itself (never asking the server for
    the float32 file) and then generated."""
    driver = page["driver"]
    entries = driver.execute_script(
        "return performance.getEntriesByType('resource').map((e) => [e.name, e.encodedBodySize])")
    for name in ("blocks-q4_1.bin", "embedding-q8_0.bin"):  # one download each (and a HEAD request)
        got = [size for n, size in entries if n.endswith(f"smollm2/{name}") and size]
        assert got == [meta["bytes"][name]], (name, got)
    assert not any(meta["weights"]["file"] in n for n, _ in entries)
    phases = driver.execute_script("return window.llmLab.timings.phases")
    assert phases["decode"] > 0 and phases["session"] > 0


def test_first_prompt_ids_equal_chat_prompt(page, reference):
    from attention_core.models import smollm

    driver = page["driver"]
    _, tokenizer = reference
    state = driver.execute_script("return {prompt: document.getElementById('llm-prompt').value, "
                                  "ids: window.llmLab.ids.slice(0, window.llmLab.promptLength)}")
    want = smollm.chat_prompt(tokenizer, [{"role": "user", "content": state["prompt"]}])[0].tolist()
    assert state["ids"] == want


@pytest.mark.parametrize("prompt", PROMPTS)
def test_generation_and_attention_equal_the_package(page, reference, meta, prompt):
    from attention_core.models import smollm

    driver = page["driver"]
    model, tokenizer = reference
    submit(driver, prompt)
    ids = smollm.chat_prompt(tokenizer, [{"role": "user", "content": prompt}])
    T = ids.size(1)
    got = driver.execute_script("return {ids: window.llmLab.ids, promptLength: window.llmLab.promptLength, "
                                "generated: window.llmLab.generated, status: window.llmLab.status}")
    assert got["status"] == "done" and got["promptLength"] == T and got["ids"][:T] == ids[0].tolist()
    want = smollm.generate(model, ids, 20)[0, T:].tolist()
    end = meta["im_end_id"]
    cut = want.index(end) + 1 if end in want else len(want)
    assert got["generated"] == want[:cut], (tokenizer.decode(got["generated"]), tokenizer.decode(want))
    full = torch.tensor([got["ids"]])
    with torch.no_grad():
        _, attentions = model(full)
    want_att = torch.stack(attentions)[:, 0].numpy()  # (layers, H, S, S)
    count = driver.execute_script("return window.llmLab.rows.length")
    for i in sorted({0, T - 1, T, count - 1}):
        row = np.array(driver.execute_script(f"return Array.from(window.llmLab.rows[{i}])"), dtype=np.float32)
        row = row.reshape(meta["num_layers"], meta["num_heads"], i + 1)
        np.testing.assert_allclose(row, want_att[:, :, i, :i + 1], atol=WEB_LLM_ATTENTION_ATOL, rtol=0)
    worst = driver.execute_script(
        "return import('../_static/llm-lab/analysis.js').then((m) => "
        "m.worstRowSum(window.llmLab.rows, window.llmLab.numLayers, window.llmLab.numHeads))")
    assert worst < 1e-4
    assert not console_errors(driver)


def click_token(driver, index: int) -> dict:
    """Click token ``index`` of the page's text; wait for its logit lens on screen and return it
    (``window.llmLab.lens``: ``{index, layers: [{ids, probs}] * 31, ms}``)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    span = driver.find_elements(By.CSS_SELECTOR, "#llm-lab .llm-text .llm-token")[index]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", span)
    span.click()
    WebDriverWait(driver, 60, poll_frequency=0.05).until(lambda d: d.execute_script(
        "const lens = window.llmLab.lens; return lens && lens.index === arguments[0] && lens.ms != null",
        index))
    return driver.execute_script("return window.llmLab.lens")


def test_a_clicked_tokens_logit_lens_equals_the_package(page, reference, meta):
    """Tokens of a prompt the book does not contain and of its answer, clicked: the page's lens
    (31 rows: after the embedding and after each block) ranks first what circuits.logit_lens
    ranks first on the same ids, wherever the package's top two differ by more than 1e-3."""
    from selenium.webdriver.common.by import By

    from attention_core.models import circuits, smollm

    driver = page["driver"]
    model, tokenizer = reference
    submit(driver, LENS_PROMPT)
    ids = driver.execute_script("return window.llmLab.ids")
    T = smollm.chat_prompt(tokenizer, [{"role": "user", "content": LENS_PROMPT}]).size(1)
    assert len(ids) > T + 3
    lens = circuits.logit_lens(model, torch.tensor([ids]))[:, 0]  # (31, S, vocab_size)
    top2 = lens.topk(2, dim=-1)
    top1 = top2.indices[..., 0].numpy()
    clear = ((top2.values[..., 0] - top2.values[..., 1]) > 1e-3).numpy()  # (31, S)
    compared = 0
    last = driver.execute_script("return window.llmLab.rows.length") - 1  # a closing <|im_end|> is not read
    for index in (T - 1, 5, T + 2, last):
        got = click_token(driver, index)
        layers = got["layers"]
        assert len(layers) == meta["num_layers"] + 1
        assert all(len(x["ids"]) == meta["lens_top_k"] for x in layers)
        page_top1 = np.array([x["ids"][0] for x in layers])
        mask = clear[:, index]
        assert np.array_equal(page_top1[mask], top1[mask, index]), (index, page_top1, top1[:, index])
        compared += int(mask.sum())
        probs = np.array([x["probs"] for x in layers])
        assert ((probs >= 0) & (probs <= 1)).all() and (np.diff(probs, axis=1) <= 1e-7).all()
    assert compared >= 0.9 * 4 * (meta["num_layers"] + 1)
    rows = driver.find_elements(By.CSS_SELECTOR, "#llm-lab .llm-lens tbody tr")
    assert len(rows) == meta["num_layers"] + 1 and rows[0].text.startswith("embedding")
    assert "Logit lens of token" in driver.find_element(By.CSS_SELECTOR, "#llm-lab .llm-lens figcaption").text
    assert len(driver.execute_script("return window.llmLab.timings.lensMs")) >= 4
    assert not console_errors(driver)


def test_hostile_prompts_are_text_or_a_message(page):
    from selenium.webdriver.common.by import By

    driver = page["driver"]
    hostile = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script><b>bold</b>'
    submit(driver, hostile, "20")
    assert driver.execute_script("return window.pwned") is None
    lab = driver.find_element(By.ID, "llm-lab")
    assert not lab.find_elements(By.CSS_SELECTOR, ".llm-text img, .llm-text script, .llm-text b")
    assert "<img" in driver.find_element(By.CSS_SELECTOR, "#llm-lab .llm-text").text
    for prompt, expect in (("a" * 5000, "tokens"), ("", "Type a prompt"), ("   ", "Type a prompt")):
        submit(driver, prompt)
        assert expect in driver.execute_script("return window.llmLab.message"), prompt[:20]
    submit(driver, "🙂🎉🍕", "20")
    assert driver.execute_script("return window.llmLab.status") == "done"
    assert not console_errors(driver)


def test_repeated_random_tokens_show_induction_heads(page):
    from selenium.webdriver.common.by import By

    driver = page["driver"]
    runs = driver.execute_script("return window.llmLab.runs")
    driver.find_element(By.CSS_SELECTOR, "#llm-lab .llm-random").click()
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return window.llmLab.runs") > runs)
    wait_status(driver, ("done",))
    induction = driver.execute_script("return window.llmLab.induction")
    assert induction["count"] >= 39 and max(induction["scores"]) > 0.5


def test_without_webassembly_the_page_says_so(server):
    need_chromium()
    with chromium() as driver:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument",
                               {"source": "delete window.WebAssembly;"})
        driver.get(f"{server}/{PAGE}")
        wait_status(driver, ("unavailable",), 60)
        assert "WebAssembly" in driver.execute_script("return window.llmLab.message")


def test_opened_as_a_file_the_page_says_how_to_serve_it(mini_site):
    need_chromium()
    with chromium() as driver:
        driver.get((mini_site / PAGE).as_uri())
        text = driver.execute_script("return document.querySelector('#llm-lab .llm-message').textContent")
        assert "python -m http.server" in text
