"""Chapter 13's model in the browser (website): headless Chromium on the built site, served
by a local HTTP server with a cold browser cache, the network cut but for that server.

``click_to_first_map_s``: from the click on "Run the model in your browser" to the first
map drawn: the runtime, the WebAssembly binary, the tokenizer, meta.json and the model
fetched from the local server, the session created, the first sentence tokenised, run
and drawn (the page's own ``performance.now()`` around it). ``per_sentence_s``: the
median over new sentences, typed after loading, from the Enter key to the maps redrawn
(72 thumbnails, heatmap, lines, text version). Goals on the CI machine: 5 s and 0.3 s.
A real network adds the download (the button states its size) to the first figure.
"""

from __future__ import annotations

import functools
import http.server
import json
import statistics
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
PAGE = "chapters/13_pretrained_model.html"
SENTENCES = [
    "The keys that the man left on the table are gone.",
    "The trophy did not fit in the suitcase because it was too small.",
    "Naïve readers, surprisingly, loved the café's crème brûlée!",
    "A very long sentence with many words keeps going and going so that the model has "
    "more tokens to read and every head has a larger map to draw in the browser.",
    "The dog that the children fed every morning barked at the postman.",
]
GOALS = {"click_to_first_map_target_s": 5.0, "per_sentence_target_s": 0.3}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _serve(site: Path):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def _wait(driver, script, timeout=120):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: d.execute_script(script))


def run(site: Path = SITE) -> dict:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import chromium  # the tests' headless Chromium: fresh profile, network cut

    if not (site / PAGE).exists():
        raise FileNotFoundError(f"{site / PAGE} is missing: build the book first (make book)")
    meta = json.loads((site / "_static" / "minilm" / "meta.json").read_text())
    wasm = site / "_static" / "onnxruntime-web" / "ort-wasm-simd-threaded.wasm"
    httpd, base = _serve(site)
    try:
        with chromium() as driver:
            driver.get(f"{base}/{PAGE}")
            _wait(driver, "return document.getElementById('attention-lab').dataset.state === 'idle'")
            driver.find_element(By.CSS_SELECTOR, "#attention-lab .lab-start").click()
            _wait(driver, "return ['ready', 'error'].includes("
                          "document.getElementById('attention-lab').dataset.state)")
            state = driver.execute_script("return window.attentionLab")
            if state["status"] != "ready":
                raise RuntimeError(f"the page did not load the model: {state['message']}")
            first = state["timings"]["clickToFirstMap"] / 1000
            phases = {name: ms / 1000 for name, ms in state["timings"]["phases"].items()}
            per_sentence = []
            for sentence in SENTENCES:
                runs = driver.execute_script("return window.attentionLab.runs")
                box = driver.find_element(By.ID, "lab-text")
                box.clear()
                box.send_keys(sentence + Keys.ENTER)
                _wait(driver, f"return window.attentionLab.runs > {runs}")
                ms = driver.execute_script("return window.attentionLab.timings.lastSentence")
                per_sentence.append(ms / 1000)
            tokens = driver.execute_script("return window.attentionLab.L")
    finally:
        httpd.shutdown()
    return {"click_to_first_map_s": first, "first_map_phases_s": phases,
            "per_sentence_s": statistics.median(per_sentence),
            "per_sentence_max_s": max(per_sentence), "longest_sentence_tokens": tokens, **GOALS,
            "model_bytes": meta["bytes"], "model_gzip_bytes": meta["gzip_bytes"],
            "runtime_wasm_bytes": wasm.stat().st_size, "precision": meta["precision"],
            "max_abs_diff_attention": meta["max_abs_diff_attention"],
            "machine": "headless Chromium, single-threaded WebAssembly, local HTTP server"}


if __name__ == "__main__":
    for key, value in run().items():
        print(f"{key}: {value}")
