"""The heaviest pages' design, measured (issue #54): every page renders the sections below the
screen lazily, and all but the heaviest then render the rest in idle tasks once loaded
(``_ext/lazy_sections.js``, added by ``_ext/site_pages.py`` to pages of at most
``RENDER_AFTER_LOAD`` elements). The two heaviest, chapter 8 and the API page, are left lazy
until the reader scrolls. This benchmark audits those two pages with Lighthouse's mobile
preset as the site builds them (``"as_built"``) and with the script added as on every other
page (``"render_after_load"``), the two variants interleaved, ``RUNS`` times each, and keeps
each variant's median performance score and median total blocking time.

Like ``bench_lighthouse``, the scores depend on the machine's load (the record carries the
load average); the comparison is of two variants on the same machine in the same minutes.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from pathlib import Path

import lighthouse
from bs4 import BeautifulSoup

from _timing import machine

RUNS = int(os.environ.get("LIGHTHOUSE_RUNS", 3))
SITE = lighthouse.ROOT / "_build" / "html"
PAGES = ("chapters/08_sparse_linear.html", "api.html")
SCRIPT = lighthouse.ROOT / "_ext" / "lazy_sections.js"


def with_render_after_load(page: Path) -> None:
    """Add the render-after-load script after the page's article, as site_pages does for
    lighter pages (the article is already marked lazily rendered)."""
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    article = soup.select_one("article.bd-article")
    if article is None or soup.find("script", string=lambda s: s and "sections-rendered" in s):
        raise ValueError(f"{page}: no article, or it already has the script")
    script = soup.new_tag("script")
    script.string = SCRIPT.read_text(encoding="utf-8")
    article.insert_after(script)
    page.write_text(str(soup), encoding="utf-8")


def run(site: Path = SITE, runs: int = RUNS) -> dict:
    binary = lighthouse.find_lighthouse()
    if binary is None or lighthouse.find_chrome() is None or not (site / "index.html").is_file():
        return {"ran": False, "reason": "needs Lighthouse (npm install --prefix /tmp/lh lighthouse), "
                                        "Chromium and a built site (make book)", "machine": machine()}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        variants = {"as_built": site, "render_after_load": Path(tmp) / "site"}
        shutil.copytree(site, variants["render_after_load"])
        for page in PAGES:
            with_render_after_load(variants["render_after_load"] / page)
        scores = {v: {p: [] for p in PAGES} for v in variants}
        blocking = {v: {p: [] for p in PAGES} for v in variants}
        for _ in range(runs):
            for variant, folder in variants.items():  # interleaved: both see the same load
                for page, result in lighthouse.measure(folder, list(PAGES), 1, binary=binary).items():
                    if "error" not in result:
                        scores[variant][page] += result["performance_runs"]
                        blocking[variant][page].append(result["metrics"]["total-blocking-time"])
    return {"ran": True, "preset": "mobile", "runs": runs, "pages": list(PAGES),
            "performance_median": _medians(scores), "total_blocking_time_ms_median": _medians(blocking),
            "load_average_before": list(load_before), "load_average_after": list(os.getloadavg()),
            "machine": machine()}


def _medians(values: dict) -> dict:
    """``{variant: {page: [runs]}}`` -> ``{variant: {page: median or None}}``."""
    return {variant: {page: statistics.median(runs) if runs else None for page, runs in pages.items()}
            for variant, pages in values.items()}


if __name__ == "__main__":
    import json
    print(json.dumps(run(), indent=1))
