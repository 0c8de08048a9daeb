"""The heaviest pages' design, measured (issue #54): every page renders the sections below the
screen lazily, and all but the heaviest then render the rest in idle tasks once loaded
(``_ext/lazy_sections.js``, added by ``_ext/site_pages.py`` to pages of at most
``RENDER_AFTER_LOAD`` elements). The two heaviest, chapter 8 and the API page, are left lazy
until the reader scrolls. This benchmark audits those two pages with Lighthouse's mobile
preset in four variants of the site, interleaved, ``RUNS`` times each, and keeps each
variant's median performance score and median total blocking time (and every run's):

* ``"as_built"``: the site as the build writes it;
* ``"render_after_load"``: the two pages with the script added as on every other page;
* ``"theme_script_original"``: the theme's script (``_static/scripts/pydata-sphinx-theme.js``)
  as the installed pydata-sphinx-theme ships it. Its loop that makes every scrollable box a
  keyboard stop reads each box's scrollWidth once the page has loaded, and a size read in a
  section still skipped (content-visibility: auto) lays that section out;
* ``"tab_stops_patched"``: that script with the build's one change to it
  (``site_pages.lazy_tab_stops``: the loop leaves a box in a skipped section alone).

``"as_built_theme_script"`` says which of the last two the site ships: ``"as_built"`` is the
same files as that one, so the distance between the two shows the noise.

Like ``bench_lighthouse``, the scores depend on the machine's load (the record carries the
load average); the comparison is of variants on the same machine in the same minutes. The
site is ``_build/html`` or ``$LAZY_PAGES_SITE`` (a copy elsewhere,
``LAZY_PAGES_SITE=/tmp/site make bench ONLY=lazy_pages``); it is only read: each variant is a
copy in a temporary folder (hard links where it can, a changed file written anew).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import lighthouse
from bs4 import BeautifulSoup

from _timing import machine

sys.path.insert(0, str(lighthouse.ROOT / "_ext"))
import site_pages  # the build's extension: its patch of the theme's script

RUNS = int(os.environ.get("LIGHTHOUSE_RUNS", 3))
SITE = Path(os.environ.get("LAZY_PAGES_SITE", lighthouse.ROOT / "_build" / "html"))
PAGES = ("chapters/08_sparse_linear.html", "api.html")
SCRIPT = lighthouse.ROOT / "_ext" / "lazy_sections.js"
THEME_SCRIPT = site_pages.THEME_SCRIPT


def theme_script() -> str | None:
    """The theme's script as the installed pydata-sphinx-theme ships it, or None."""
    try:
        import pydata_sphinx_theme
    except ImportError:
        return None
    path = (Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static"
            / "scripts" / "pydata-sphinx-theme.js")
    return path.read_text(encoding="utf-8") if path.is_file() else None


def patched(script: str) -> str:
    """``script`` with the build's tab-stop patch; ValueError if the theme's code no longer
    matches it (the build then leaves the script as it is, with a warning)."""
    for before in (site_pages.TAB_STOPS, site_pages.TAB_STOPS_EVENTS):
        if script.count(before) != 1:
            raise ValueError(f"the theme's script no longer has {before!r} once")
    return (script.replace(site_pages.TAB_STOPS, site_pages.TAB_STOPS_LAZY)
            .replace(site_pages.TAB_STOPS_EVENTS, site_pages.TAB_STOPS_EVENTS_LAZY))


def which_script(site: Path, original: str) -> str:
    """Which of the two the site ships: "theme_script_original", "tab_stops_patched" or "other"."""
    shipped = (site / THEME_SCRIPT).read_text(encoding="utf-8")
    return ("theme_script_original" if shipped == original
            else "tab_stops_patched" if shipped == patched(original) else "other")


def copy_site(site: Path, to: Path) -> None:
    """A copy of the site: hard links where the file system allows (``rewrite`` replaces a
    file rather than writing through the link, so the site itself is never changed)."""
    def link(src, dst):
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
    shutil.copytree(site, to, copy_function=link)


def rewrite(path: Path, text: str) -> None:
    path.unlink()
    path.write_text(text, encoding="utf-8")


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
    rewrite(page, str(soup))


def run(site: Path = SITE, runs: int = RUNS) -> dict:
    binary = lighthouse.find_lighthouse()
    original = theme_script()
    if binary is None or lighthouse.find_chrome() is None or not (site / "index.html").is_file() \
            or original is None:
        return {"ran": False, "reason": "needs Lighthouse (npm install --prefix /tmp/lh lighthouse), "
                                        "Chromium, pydata-sphinx-theme and a built site (make book)",
                "machine": machine()}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        variants = {"as_built": site}
        for name in ("render_after_load", "theme_script_original", "tab_stops_patched"):
            variants[name] = Path(tmp) / name
            copy_site(site, variants[name])
        for page in PAGES:
            with_render_after_load(variants["render_after_load"] / page)
        rewrite(variants["theme_script_original"] / THEME_SCRIPT, original)
        rewrite(variants["tab_stops_patched"] / THEME_SCRIPT, patched(original))
        scores = {v: {p: [] for p in PAGES} for v in variants}
        blocking = {v: {p: [] for p in PAGES} for v in variants}
        for _ in range(runs):
            for variant, folder in variants.items():  # interleaved: every variant sees the same load
                for page, result in lighthouse.measure(folder, list(PAGES), 1, binary=binary).items():
                    if "error" not in result:
                        scores[variant][page] += result["performance_runs"]
                        blocking[variant][page].append(round(result["metrics"]["total-blocking-time"], 1))
    return {"ran": True, "preset": "mobile", "runs": runs, "pages": list(PAGES),
            "as_built_theme_script": which_script(site, original),
            "performance_median": _medians(scores), "total_blocking_time_ms_median": _medians(blocking),
            "performance_runs": scores, "total_blocking_time_ms_runs": blocking,
            "load_average_before": list(load_before), "load_average_after": list(os.getloadavg()),
            "machine": machine()}


def _medians(values: dict) -> dict:
    """``{variant: {page: [runs]}}`` -> ``{variant: {page: median or None}}``."""
    return {variant: {page: statistics.median(runs) if runs else None for page, runs in pages.items()}
            for variant, pages in values.items()}


if __name__ == "__main__":
    import json
    print(json.dumps(run(), indent=1))
