"""Lighthouse on every page of the built website (issue 46): Lighthouse's mobile preset (an
emulated phone, simulated slow 4G, 4x CPU slowdown) in headless Chromium, the site served
gzip-compressed from 127.0.0.1 as a static host serves it, each page audited RUNS times
and its median run by performance score kept (``lighthouse.py`` does the auditing; a run
Lighthouse gives up on, which a busy machine causes, is tried again, and a page it never
finishes is recorded with the error).

The scores depend on the machine's load (Lighthouse's CPU slowdown multiplies whatever the
page gets), so the record carries the load average before and after; ``make test`` asserts
nothing about them. Without Lighthouse, Chromium or a built site (``make book``) the record
says that it did not run, and why, and ``run_all.py`` keeps the last one.
``LIGHTHOUSE_RUNS=1 make bench ONLY=lighthouse`` audits each page once (the record says how
many runs its medians are of).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import lighthouse

from _timing import machine

RUNS = int(os.environ.get("LIGHTHOUSE_RUNS", 3))  # fewer on a machine with no time for three
SITE = lighthouse.ROOT / "_build" / "html"
TARGET = 95  # the book's goal for every page, mobile performance


def not_run(reason: str) -> dict:
    """The record of a benchmark that could not run here."""
    return {"ran": False, "reason": reason, "machine": machine()}


def chromium_version(chrome: str) -> str:
    try:
        return subprocess.run([chrome, "--version"], capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def run(site: Path = SITE, runs: int = RUNS) -> dict:
    binary = lighthouse.find_lighthouse()
    if binary is None:
        return not_run("Lighthouse is not installed: npm install --prefix /tmp/lh lighthouse "
                       "(or set LIGHTHOUSE to its command)")
    chrome = lighthouse.find_chrome()
    if chrome is None:
        return not_run(f"no Chromium at {os.environ.get('CHROME_PATH', '/usr/bin/chromium')} "
                       "(set CHROME_PATH)")
    if not (site / "index.html").is_file():
        return not_run(f"no built website in {site}: run make book first")
    pages = lighthouse.site_pages(site)
    load_before = os.getloadavg()
    results = lighthouse.measure(site, pages, runs=runs, compress=True, binary=binary)
    load_after = os.getloadavg()
    versions = {r["lighthouse"] for r in results.values() if "lighthouse" in r}
    return {"ran": True, "preset": "mobile", "gzip": True, "runs": runs,
            "lighthouse": ", ".join(sorted(versions)), "chromium": chromium_version(chrome),
            "pages": {page: r if "error" in r else
                      {"scores": r["scores"], "performance_runs": r["performance_runs"],
                       "performance_median": r["performance_median"], "metrics": r["metrics"],
                       "below_100": r["failed_audits"], "failed_runs": r["failed_runs"]}
                      for page, r in results.items()},
            "load_average_before": list(load_before), "load_average_after": list(load_after),
            "targets": {"performance": TARGET}, "machine": machine()}


if __name__ == "__main__":
    import json
    print(json.dumps(run(), indent=1))
