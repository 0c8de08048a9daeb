"""The PDF edition (``_ext/pdf_edition.py``): printing the joined document with headless
Chromium (``Page.printToPDF``), and the PDF's outline and information with pypdf."""

from __future__ import annotations

import base64
import contextlib
import html
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-dev-shm-usage",
                  "--host-resolver-rules=MAP * ~NOTFOUND")


def browser_paths() -> tuple[str | None, str | None]:
    """Chromium and its driver: Debian's (``.ci/run``), or Chrome and the driver a GitHub
    runner comes with (``$CHROMEWEBDRIVER``); ``$PDF_CHROME`` and ``$PDF_CHROMEDRIVER`` win."""
    binary = os.environ.get("PDF_CHROME") or next(
        (shutil.which(n) for n in ("chromium", "google-chrome", "chromium-browser") if shutil.which(n)), None)
    driver = os.environ.get("PDF_CHROMEDRIVER") or shutil.which("chromedriver")
    if not driver and os.environ.get("CHROMEWEBDRIVER"):
        driver = str(Path(os.environ["CHROMEWEBDRIVER"]) / "chromedriver")
    return binary, driver


@contextlib.contextmanager
def chromium():
    """A headless Chromium driven by Selenium, with a profile of its own (removed after)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = browser_paths()
    if not binary:
        raise SystemExit("make pdf needs Chromium (Debian: apt-get install chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="pdf-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for flag in (*CHROMIUM_FLAGS, "--window-size=1000,1400", f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    driver = None
    try:
        driver = webdriver.Chrome(service=Service(driver_path), options=opts)
        yield driver
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


FOOTER = ('<div style="font-size:8pt;width:100%;padding:0 14mm;color:#555;display:flex;'
          'justify-content:space-between;font-family:sans-serif">'
          '<span>{title}</span><span class="pageNumber"></span></div>')


OVERFLOW_JS = """
const out = [];
for (const el of document.querySelectorAll('pre, div.math, mjx-container, table, img, .pdf-strip, dl, p')) {
  if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible'
      || el.getBoundingClientRect().right > document.body.getBoundingClientRect().right + 1) {
    const page = el.closest('section.pdf-page');
    out.push((page ? page.dataset.docname : '') + ': ' + el.tagName.toLowerCase() + ' '
             + (el.textContent || el.getAttribute('alt') || '').trim().slice(0, 60));
  }
}
return out;
"""


def overflowing(driver, column_px: int) -> list[str]:
    """What would run past the printed column: laid out at the column's width (``column_px``)
    in print media, every code block, equation, table and image that is wider than its box
    or reaches past the page's right edge."""
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": column_px, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
    try:
        return driver.execute_script(OVERFLOW_JS)
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})


def print_pdf(driver, html_path: Path, title: str) -> bytes:
    """The PDF of ``html_path``, once its fonts and images are loaded, ``title`` in the footer."""
    driver.get(html_path.resolve().as_uri())
    driver.execute_script("return document.fonts.ready.then(() => true)")
    # every image decoded before printing
    driver.execute_async_script(
        "const done = arguments[0];"
        "Promise.all([...document.images].map(i => i.complete ? 0"
        " : new Promise(r => {i.onload = i.onerror = r;}))).then(() => done(true));")
    result = driver.execute_cdp_cmd("Page.printToPDF", {
        "printBackground": True, "preferCSSPageSize": True, "displayHeaderFooter": True,
        "headerTemplate": "<span></span>",
        "footerTemplate": FOOTER.format(title=html.escape(title)),
        "generateDocumentOutline": True, "generateTaggedPDF": True,
    })
    return base64.b64decode(result["data"])


# ---------------------------------------------------------------------------------------------
# The outline and the contents' page numbers


def clean_title(title: str) -> str:
    """Chromium's outline repeats some headings' text ("1. Basics1. Basics"): once."""
    title = " ".join(title.split())
    half = len(title) // 2
    if len(title) % 2 == 0 and title[:half] == title[half:]:
        return title[:half]
    return title


def outline_pages(pdf) -> list[tuple[str, int, int]]:
    """``[(title, level, page number from 1)]`` of the outline of ``pdf`` (a path or a
    ``PdfReader``), in order."""
    from pypdf import PdfReader

    reader = pdf if isinstance(pdf, PdfReader) else PdfReader(str(pdf))
    out = []

    def walk(items, level):
        for item in items:
            if isinstance(item, list):
                walk(item, level + 1)
            else:
                out.append((clean_title(item.title), level, reader.get_destination_page_number(item) + 1))

    walk(reader.outline, 0)
    return out


def fill_contents(doc: str, starts: dict[str, int]) -> str:
    """The page numbers in the contents, from the first printing (the contents are one
    line a page, so numbers move nothing)."""
    def number(match: re.Match) -> str:
        return f'{match.group(1)}{starts.get(html.unescape(match.group(2)), "")}</span>'
    return re.sub(r'(<span class="pdf-toc-page" data-for="([^"]*)">)[^<]*</span>', number, doc)


def page_starts(entries: list[tuple[str, int, int]], pages: list[dict]) -> dict[str, int]:
    """Docname -> the page it starts on: the outline's first-level entries are the pages'
    titles (their h1), in order."""
    top = [p for _, level, p in entries if level == 0]
    if len(top) != len(pages):
        raise RuntimeError(f"the PDF's outline has {len(top)} first-level entries for {len(pages)} pages")
    return {page["docname"]: start for page, start in zip(pages, top)}


def finish(reader, entries, pdf_path: Path, title: str, author: str, titles: list[str]) -> None:
    """The outline rebuilt with the headings' own text (Chromium's repeats or cuts some),
    a first entry for the contents, the title and author in the PDF's information, and a
    viewer opens it on the outline."""
    from pypdf import PdfWriter

    if len(entries) == len(titles):
        entries = [(name, level, page) for name, (_, level, page) in zip(titles, entries)]
    else:
        print(f"pdf: warning: {len(entries)} outline entries for {len(titles)} headings: "
              "Chromium's titles kept", file=sys.stderr)
    writer = PdfWriter(clone_from=reader)
    writer._root_object.pop("/Outlines", None)
    writer.add_outline_item(title="Contents", page_number=1)
    parents: list = []
    for name, level, page in entries:
        parents = parents[:level]
        item = writer.add_outline_item(title=name, page_number=page - 1,
                                       parent=parents[-1] if parents else None)
        parents.append(item)
    writer.add_metadata({"/Title": title, "/Author": author, "/Creator": "Learn Attention: make pdf"})
    writer.page_mode = "/UseOutlines"
    with open(pdf_path, "wb") as f:
        writer.write(f)
