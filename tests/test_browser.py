"""The built site in headless Chromium with every host but the local server blocked:
pages load without console errors or outside requests, math is typeset, images load,
and explorer controls change the figure.

Every built page is also read at a desktop width (1280 px) and on a phone (390 x 844 CSS px,
emulated: conftest.emulate_phone):
explorer frames and multi-panel figures keep their text at 9 CSS px or more (a figure of
panels side by side shows its narrow, stacked rendering on the phone; a one-panel figure
drawn once keeps 7 px there), no progress-bar text, no text output
or display equation wider than its box without a way to scroll it, every slider's
``aria-valuetext`` equals its readout (also after it moves), and each page has a meta
description and a plain-text title. Screenshots of every page at both widths land in
_build/screenshots/ (``<page>_1280.png``, ``<page>_390.png``).

The phone (issue 46) also checks that no page is wider than the screen and that a tap on
every explorer slider's track moves it. In dark mode, explorers
sit on the dark page in text of 4.5:1 contrast or more, their figures undimmed on a white
card; the theme button says what a click does, and every click shows the other theme."""

import contextlib
import functools
import http.server
import json
import threading
import time

import pytest

from conftest import (
    BROWSER_OWN_URLS,
    CHAPTERS,
    PHONE,
    ROOT,
    chromium,
    emulate_phone,
    need_chromium,
)

need_chromium()

from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = [pytest.mark.book, pytest.mark.browser]

PAGES = (["intro"] + [f"chapters/{c}" for c in CHAPTERS]
         + ["notation", "glossary", "api", "instructor_guide", "performance", "bibliography"])
SHOTS = ROOT / "_build" / "screenshots"
SITE = ROOT / "_build" / "html"
# every page the build wrote (the landing page, indexes and search included)
BUILT = sorted({str(p.relative_to(SITE).with_suffix("")) for p in SITE.rglob("*.html")
                if not p.relative_to(SITE).parts[0].startswith("_")} | set(PAGES) | {"index"}) \
    if SITE.is_dir() else PAGES + ["index"]
WIDTHS = {"desktop": 1280, "phone": 390}
MIN_TEXT_PX = 9
SINGLE_PHONE_MIN_TEXT_PX = 7  # a one-panel figure with no narrow rendering, on a phone
PHONE_SCREEN_PX = PHONE["height"]  # a 390 px wide phone's screen (iPhone 12 to 14)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(site):
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    with chromium(capabilities={"goog:loggingPrefs": {"browser": "ALL", "performance": "ALL"}}) as driver:
        yield driver


def requested_urls(driver):
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def load(driver, url):
    driver.get_log("browser"), driver.get_log("performance")  # drop earlier entries
    driver.get(url)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")


def screenshot(driver, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1280, min(height + 100, 12000))
    driver.save_screenshot(str(SHOTS / f"{name.replace('/', '_')}.png"))
    driver.set_window_size(1280, 900)


@pytest.mark.parametrize("name", ["index"] + PAGES)
def test_page_is_self_contained_and_renders(server, browser, name):
    load(browser, f"{server}/{name}.html")
    has_math = browser.execute_script("return document.querySelectorAll('.math').length") > 0
    if has_math:  # MathJax replaces every .math span with an <mjx-container> holding SVG
        WebDriverWait(browser, 30).until(lambda d: d.execute_script(
            "return document.querySelectorAll('mjx-container svg').length > 0"))
        untypeset = browser.execute_script(
            "return [...document.querySelectorAll('.math')]"
            ".filter(e => !e.querySelector('mjx-container')).length")
        assert untypeset == 0, f"{untypeset} math elements were not typeset"
    # figures below the fold load lazily: ask for all of them, then wait
    browser.execute_script("document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')")
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(
        "return [...document.images].every(i => i.complete)"))
    broken = browser.execute_script(
        "return [...document.images].filter(i => !(i.naturalWidth > 0)).map(i => i.src.slice(0, 80))")
    assert not broken, f"images that did not load: {broken}"
    time.sleep(0.3)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    # chrome:// URLs are the browser's own pages (its new tab), not network requests
    outside = [u for u in requested_urls(browser) if not u.startswith((server, *BROWSER_OWN_URLS))]
    assert not outside, f"requests that left the site: {outside}"
    screenshot(browser, name)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_explorer_controls_change_the_figure(server, browser, chapter):
    load(browser, f"{server}/chapters/{chapter}.html")
    explorer = browser.find_element(By.CSS_SELECTOR, ".ac-explorer")
    image = explorer.find_element(By.TAG_NAME, "img")
    for control in explorer.find_elements(By.CSS_SELECTOR, "input[type=range]"):
        before_src, before_value = image.get_attribute("src"), control.get_attribute("value")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", control)
        # as on a reader's screen: the section is rendered (sections below the screen render
        # lazily, book.css) before a key is pressed
        WebDriverWait(browser, 10).until(lambda d: d.execute_script(
            "return arguments[0].checkVisibility({contentVisibilityAuto: true})"
            " && arguments[0].complete && arguments[0].naturalWidth > 0", image))
        key = Keys.ARROW_LEFT if before_value == control.get_attribute("max") else Keys.ARROW_RIGHT
        control.send_keys(key)  # as a reader would, with the keyboard
        assert control.get_attribute("value") != before_value
        assert image.get_attribute("src") != before_src, "the figure did not change"
        # the new frame loads (right after the key its naturalWidth is 0 until it arrives: a
        # check at that instant raced the local server, with or without lazy sections)
        WebDriverWait(browser, 10).until(lambda d: d.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth > 0", image),
            "the new frame did not load")
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    browser.execute_script("arguments[0].scrollIntoView()", explorer)
    SHOTS.mkdir(parents=True, exist_ok=True)
    explorer.screenshot(str(SHOTS / f"{chapter}_explorer.png"))


# ---------------------------------------------------------------- reading at two widths
@pytest.fixture(scope="module", params=list(WIDTHS))
def reader(request):
    """A browser at a desktop width and an emulated phone (a headless window is at least
    500 px wide: a 390 px window would show 485 px)."""
    width = WIDTHS[request.param]
    if width == PHONE["width"]:
        with chromium(window=f"500,{PHONE_SCREEN_PX}") as driver:
            emulate_phone(driver)
            yield width, driver
    else:
        with chromium(window=f"{width},900") as driver:
            yield width, driver


MEASURE = r"""
const done = arguments[arguments.length - 1];
(async () => {
  const main = document.querySelector('main') || document.body;
  const out = {};
  const meta = document.querySelector('meta[name="description"]');
  out.description = meta ? meta.getAttribute('content') || '' : '';
  out.title = document.title;
  // (b) progress bars: tqdm's rate, bar and percentage fragments
  const text = main.textContent;
  out.progress = (text.match(/.{0,30}(?:it\/s\]|s\/it\]|\|█|100%\|).{0,10}/g) || []).slice(0, 3);
  // (a) explorer frames: smallest text in CSS px as shown
  const imgs = [...document.querySelectorAll('.ac-explorer img')];
  for (const img of imgs) {
    img.loading = 'eager';
    img.scrollIntoView({block: 'center'});
    if (!img.complete) await new Promise(r => { img.onload = img.onerror = r; setTimeout(r, 10000); });
  }
  out.frames = imgs.map(img => {
    const min = parseFloat(img.getAttribute('data-min-text-px'));
    return {src: (img.getAttribute('src') || '').slice(-50), min: min,
            shown: img.naturalWidth ? min * img.clientWidth / img.naturalWidth : null,
            natural: img.naturalWidth, client: img.clientWidth};
  });
  // (a'') each explorer's height, its controls and its figure together, in CSS px
  out.explorerHeights = [...document.querySelectorAll('.ac-explorer')]
    .map(e => Math.ceil(e.getBoundingClientRect().height));
  // (a') static figures (attention_core.book.viz.figures): the rendering the browser picked,
  // its smallest text in CSS px as shown, and how many panels it puts side by side
  const figs = [...document.querySelectorAll('.ac-figure img')];
  for (const img of figs) {
    img.loading = 'eager';
    img.scrollIntoView({block: 'center'});
    if (!img.complete) await new Promise(r => { img.onload = img.onerror = r; setTimeout(r, 10000); });
  }
  out.figures = figs.map(img => {
    const source = img.closest('picture') && img.closest('picture').querySelector('source');
    const narrowUrl = source ? new URL(source.getAttribute('srcset'), document.baseURI).href : null;
    const shownEl = source && img.currentSrc === narrowUrl ? source : img;
    const min = parseFloat(shownEl.getAttribute('data-min-text-px'));
    return {src: (img.currentSrc || '').slice(-40), layout: shownEl.getAttribute('data-layout'),
            hasNarrow: !!source, min: isNaN(min) ? null : min,
            panels: parseInt(img.getAttribute('data-panels-across') || '0'),
            shown: img.naturalWidth && !isNaN(min) ? min * img.clientWidth / img.naturalWidth : null,
            natural: img.naturalWidth, client: img.clientWidth};
  });
  // images in cell outputs that neither a figure nor an explorer measured
  out.unmeasured = [...main.querySelectorAll('div.cell_output img')]
    .filter(img => !img.closest('.ac-figure, .ac-explorer'))
    .map(img => (img.getAttribute('src') || '').slice(-50));
  // (c) text outputs and display equations wider than their box without a scroller
  const scrolls = el => {
    for (let e = el; e && !e.matches('section, article, main, body'); e = e.parentElement) {
      const o = getComputedStyle(e).overflowX;
      if (o === 'auto' || o === 'scroll') return true;
    }
    return false;
  };
  out.clipped = [];
  const blocks = 'div.cell_output pre, .output pre, mjx-container[display], div.math';
  for (const el of main.querySelectorAll(blocks)) {
    if (!el.offsetParent || getComputedStyle(el).display === 'inline') continue;  // hidden, or inline
    const parent = el.parentElement;
    const wider = el.scrollWidth > el.clientWidth + 1
      || (parent && el.getBoundingClientRect().width > parent.clientWidth + 1 && el.clientWidth > 0);
    if (wider && !scrolls(el))
      out.clipped.push(el.tagName.toLowerCase() + '.' + [...el.classList].join('.') + ': '
                       + el.textContent.trim().slice(0, 60));
  }
  // (c') prose, notes and API entries: a long word of inline code, or an inline formula,
  // running past its block (a box that clips it, such as an admonition, leaves no way
  // to read it)
  for (const el of main.querySelectorAll('p, li, div.admonition, dl.py > dt')) {
    if (!el.offsetParent || scrolls(el)) continue;
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible')
      out.clipped.push(el.tagName.toLowerCase() + ' (clips): ' + el.textContent.trim().slice(0, 60));
    const right = el.getBoundingClientRect().right;
    for (const inner of el.querySelectorAll(':scope > code, :scope > span.math, :scope > a > code')) {
      if (inner.getBoundingClientRect().right > right + 1 && !scrolls(inner))
        out.clipped.push(el.tagName.toLowerCase() + ' > ' + inner.tagName.toLowerCase() + ': '
                         + inner.textContent.trim().slice(0, 60));
    }
  }
  // (d) sliders: aria-valuetext equals the readout, before and after a move
  out.sliders = [];
  for (const input of document.querySelectorAll('.ac-explorer input[type=range]')) {
    const box = input.closest('label') || input.closest('.ac-control') || input.parentElement;
    const output = box && box.querySelector('output');
    const check = when => {
      const said = input.getAttribute('aria-valuetext');
      const shown = output ? output.textContent.trim() : null;
      if (said === null || shown === null || said.trim() !== shown) {
        const label = input.getAttribute('aria-label') || input.name;
        out.sliders.push(`${label} ${when}: aria-valuetext=${said} readout=${shown}`);
      }
    };
    check('at load');
    const before = input.value;
    input.value = before === input.max ? input.min : input.max;
    input.dispatchEvent(new Event('input', {bubbles: true}));
    input.dispatchEvent(new Event('change', {bubbles: true}));
    check('after moving');
    input.value = before;
    input.dispatchEvent(new Event('input', {bubbles: true}));
  }
  window.scrollTo(0, 0);
  done(out);
})().catch(e => done({error: String(e)}));
"""

_measured = {}


def measure(server, reader, name) -> dict:
    """Load a page once per width, wait for math and images, measure it, screenshot it."""
    width, driver = reader
    key = (width, name)
    if key not in _measured:
        driver.get(f"{server}/{name}.html")
        WebDriverWait(driver, 30).until(
            lambda d: d.execute_script("return document.readyState") == "complete")
        if driver.execute_script("return document.querySelectorAll('.math').length") > 0:
            WebDriverWait(driver, 30).until(lambda d: d.execute_script(
                "return [...document.querySelectorAll('.math')]"
                ".every(e => e.querySelector('mjx-container'))"))
        driver.set_script_timeout(120)
        result = driver.execute_async_script(MEASURE)
        assert "error" not in result, result
        SHOTS.mkdir(parents=True, exist_ok=True)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        if width == PHONE["width"]:  # the whole page on one phone screen, at 1 px a CSS px
            emulate_phone(driver, height=min(height + 100, 16000), scale=1)
        else:
            driver.set_window_size(width, min(height + 100, 16000))
        time.sleep(0.2)
        driver.save_screenshot(str(SHOTS / f"{name.replace('/', '_')}_{width}.png"))
        if width == PHONE["width"]:
            emulate_phone(driver)
        else:
            driver.set_window_size(width, 900)
        _measured[key] = result
    return _measured[key]


@pytest.mark.parametrize("name", BUILT)
def test_page_has_description_and_plain_title(server, reader, name):
    page = measure(server, reader, name)
    assert page["description"].strip(), f"{name}: no meta description"
    assert len(page["description"]) <= 160, f"{name}: description longer than 160 characters"
    assert page["title"].strip() and "\\" not in page["title"], f"{name}: title {page['title']!r}"


@pytest.mark.parametrize("name", BUILT)
def test_explorer_text_is_legible(server, reader, name):
    page = measure(server, reader, name)
    for frame in page["frames"]:
        assert frame["min"] is not None, f"{name}: explorer image without data-min-text-px: {frame}"
        assert frame["shown"] is not None and frame["shown"] >= MIN_TEXT_PX, (
            f"{name} at {reader[0]} px: explorer text {frame['shown']} CSS px < {MIN_TEXT_PX}: {frame}")


@pytest.mark.parametrize("name", BUILT)
def test_explorers_fit_a_phone_screen(server, reader, name):
    """On a phone (390 x 844), an explorer, its controls and its figure, is no taller than
    the screen, so the figure stays in sight while the reader drags a control."""
    width, _ = reader
    if width >= 600:
        pytest.skip("a desktop's screen shows the wide figure beside nothing but text")
    page = measure(server, reader, name)
    for height in page["explorerHeights"]:
        assert height <= PHONE_SCREEN_PX, (
            f"{name} at {width} px: an explorer {height} px tall, taller than a {PHONE_SCREEN_PX} px screen")


@pytest.mark.parametrize("name", BUILT)
def test_static_figures_are_legible(server, reader, name):
    """Figures: text at least MIN_TEXT_PX as shown; a figure of panels side by side has a
    narrow (stacked) rendering, which a phone shows; a figure drawn once (one panel)
    may go down to SINGLE_PHONE_MIN_TEXT_PX on a phone; every image in a cell output was
    measured (drawn by attention_core.book.viz.figure, a pyplot figure on the website, or an
    explorer)."""
    width, _ = reader
    page = measure(server, reader, name)
    assert not page["unmeasured"], f"{name}: images whose text was not measured: {page['unmeasured'][:3]}"
    for figure in page["figures"]:
        assert figure["min"] is not None and figure["shown"] is not None, f"{name}: {figure}"
        if figure["panels"] >= 2:
            assert figure["hasNarrow"], (
                f"{name}: a figure of {figure['panels']} panels side by side without a narrow "
                f"rendering (use attention_core.book.viz.figure): {figure}")
        phone = width < 600
        if phone and figure["hasNarrow"]:
            assert figure["layout"] == "narrow", (
                f"{name} at {width} px: the phone got the wide rendering: {figure}")
        floor = SINGLE_PHONE_MIN_TEXT_PX if phone and not figure["hasNarrow"] else MIN_TEXT_PX
        assert figure["shown"] >= floor, (
            f"{name} at {width} px: figure text {figure['shown']:.1f} CSS px < {floor}: {figure}")


@pytest.mark.parametrize("name", BUILT)
def test_no_progress_bar_text(server, reader, name):
    page = measure(server, reader, name)
    assert not page["progress"], f"{name}: progress-bar text in the page: {page['progress']}"


@pytest.mark.parametrize("name", BUILT)
def test_nothing_wider_than_its_box_without_a_scroller(server, reader, name):
    page = measure(server, reader, name)
    assert not page["clipped"], f"{name} at {reader[0]} px: cut at the column edge: {page['clipped'][:5]}"


@pytest.mark.parametrize("name", BUILT)
def test_slider_valuetext_matches_readout(server, reader, name):
    page = measure(server, reader, name)
    assert not page["sliders"], f"{name}: {page['sliders'][:5]}"


# ---------------------------------------------------------------- a phone, emulated exactly
# conftest.emulate_phone: the phone's 390 x 844 CSS px, a touch screen, and a layout viewport
# that grows (and the page zooms out) when something is wider than the screen.
RENDER_ALL = ("const s = document.createElement('style');"
              "s.textContent = 'article.bd-article section { content-visibility: visible !important }';"
              "document.head.append(s);")
WIDEST = r"""
const limit = arguments[0];
return [...document.querySelectorAll('body *')]
  .map(e => [e, e.getBoundingClientRect()])
  .filter(([e, r]) => r.right > limit + 1 && r.width > 0)
  .sort((a, b) => b[1].right - a[1].right).slice(0, 5)
  .map(([e, r]) => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')}`
                   + ` ends at ${Math.round(r.right)} px: ` + (e.textContent || '').trim().slice(0, 50));
"""


@pytest.fixture(scope="module")
def phone():
    """Chromium emulating a 390 x 844 phone with a touch screen."""
    with chromium(window=f"500,{PHONE_SCREEN_PX}",
                  capabilities={"goog:loggingPrefs": {"browser": "ALL", "performance": "ALL"}}) as driver:
        emulate_phone(driver)
        yield driver


@pytest.mark.parametrize("name", BUILT)
def test_no_page_is_wider_than_a_phone(server, phone, name):
    """Issue 46: at 390 x 844 the document is no wider than the screen, every section laid out
    (the site renders sections below the screen lazily; here all of them are rendered)."""
    load(phone, f"{server}/{name}.html")
    phone.execute_script(RENDER_ALL)
    width = phone.execute_script("return document.documentElement.scrollWidth")
    widest = phone.execute_script(WIDEST, PHONE["width"]) if width > PHONE["width"] else []
    assert width <= PHONE["width"], f"{name}: {width} px wide on a {PHONE['width']} px phone: {widest}"


def tap(driver, x, y):
    driver.execute_cdp_cmd("Input.dispatchTouchEvent",
                           {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]})
    driver.execute_cdp_cmd("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})


def tap_track(driver, slider, image, fraction):
    """Taps ``slider`` at ``fraction`` of its track; returns (element hit, value before, after)
    once the value (and then the figure) has had time to follow."""
    box = driver.execute_script("const r = arguments[0].getBoundingClientRect();"
                                " return [r.left, r.top, r.width, r.height]", slider)
    x, y = box[0] + fraction * box[2], box[1] + box[3] / 2
    hit = driver.execute_script("return document.elementFromPoint(arguments[0], arguments[1])", x, y)
    before_src, before = image.get_attribute("src"), float(slider.get_attribute("value"))
    tap(driver, x, y)
    with contextlib.suppress(TimeoutException):  # it stays put when tapped where it already is
        WebDriverWait(driver, 1).until(lambda d: float(slider.get_attribute("value")) != before)
    after = float(slider.get_attribute("value"))
    if after != before:
        WebDriverWait(driver, 5).until(lambda d: image.get_attribute("src") != before_src)
    return hit, before, after


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_explorer_sliders_move_by_a_tap(server, phone, chapter):
    """Issue 46: on a 390 px touch screen, a tap at 10 %, 50 % and 90 % of each explorer
    slider's track lands on the slider and moves it there (within one step), and the figure
    follows."""
    load(phone, f"{server}/chapters/{chapter}.html")
    for slider in phone.find_elements(By.CSS_SELECTOR, ".ac-explorer input[type=range]"):
        explorer = slider.find_element(By.XPATH, "./ancestor::*[contains(@class, 'ac-explorer')][1]")
        image = explorer.find_element(By.TAG_NAME, "img")
        phone.execute_script("arguments[0].scrollIntoView({block: 'center'})", slider)
        time.sleep(0.2)
        label = slider.get_attribute("aria-label") or slider.get_attribute("name")
        lo, hi, step = (float(slider.get_attribute(name) or default)
                        for name, default in (("min", 0), ("max", 100), ("step", 1)))
        values = []
        for fraction in (0.1, 0.5, 0.9):
            hit, _, value = tap_track(phone, slider, image, fraction)
            assert hit == slider, f"{chapter}: a tap on {label!r} at {fraction:.0%} lands on {hit.tag_name}"
            want = lo + fraction * (hi - lo)
            assert abs(value - want) <= step + 1e-9, (
                f"{chapter}: a tap at {fraction:.0%} of {label!r} ({lo:g} to {hi:g}) gave {value:g}, "
                f"not about {want:g}")
            values.append(value)
        assert values[0] < values[-1] or hi - lo <= step, f"{chapter}: {label!r} did not move: {values}"
    assert not [e for e in phone.get_log("browser") if e["level"] == "SEVERE"]


# ---------------------------------------------------------------- dark mode
def wcag_ratio(a, b) -> float:
    """WCAG 2 contrast ratio of two sRGB colours given as (r, g, b) in 0..255."""
    def luminance(rgb):
        c = [v / 255 for v in rgb[:3]]
        c = [v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


DARK_LOOK = r"""
const rgb = s => (s.match(/[\d.]+/g) || []).map(Number);
const background = e => {
  for (; e; e = e.parentElement) {
    const c = rgb(getComputedStyle(e).backgroundColor);
    if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
  }
  return [255, 255, 255];
};
const page = background(document.querySelector('article.bd-article'));
return [...document.querySelectorAll('.ac-explorer')].map(x => {
  const label = x.querySelector('.ac-control') || x;
  const img = x.querySelector('img');
  const s = getComputedStyle(img);
  return {text: rgb(getComputedStyle(label).color).slice(0, 3), under: background(label), page,
          filter: s.filter, card: rgb(s.backgroundColor), padding: parseFloat(s.paddingLeft)};
});
"""


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_dark_mode_explorers_belong_to_the_page(server, browser, chapter):
    """Issue 46: in dark mode an explorer's controls sit on the dark page (no light-grey panel)
    in text of WCAG AA contrast (4.5:1) or more, and its figure is not dimmed by a filter: it
    shows as drawn (black text on white), on a white card with padding."""
    # a reader whose system is dark, on a first visit (the site follows the system)
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia",
                            {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    try:
        load(browser, f"{server}/chapters/{chapter}.html")
        browser.execute_script("localStorage.removeItem('mode')")
        load(browser, f"{server}/chapters/{chapter}.html")
        assert browser.execute_script("return document.documentElement.dataset.theme") == "dark"
        for look in browser.execute_script(DARK_LOOK):
            assert look["under"] == look["page"], f"{chapter}: the controls sit on a panel {look}"
            ratio = wcag_ratio(look["text"], look["under"])
            assert ratio >= 4.5, f"{chapter}: controls' text at {ratio:.1f}:1 {look}"
            assert look["filter"] == "none", f"{chapter}: the figure is filtered: {look['filter']}"
            assert look["card"][:3] == [255, 255, 255] and look["padding"] >= 4, look
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


@pytest.mark.parametrize("system", ["light", "dark"])
def test_theme_button_says_what_it_does_and_every_click_does_it(server, system):
    """Issue 46: a first visit follows the reader's system; the theme button is named for what
    a click does ("Switch to the dark theme", its name and its tooltip) and every click shows
    the other theme (the theme's cycle of light, dark and auto had one click in three change
    nothing on screen: light to auto on a light system); the choice holds on the next page."""
    theme = "return document.documentElement.dataset.theme"
    with chromium() as driver:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                               {"features": [{"name": "prefers-color-scheme", "value": system}]})
        driver.get(f"{server}/chapters/01_attention_basics.html")
        WebDriverWait(driver, 30).until(
            lambda d: d.execute_script("return document.readyState") == "complete")
        assert driver.execute_script(theme) == system
        button = next(b for b in driver.find_elements(By.CSS_SELECTOR, ".theme-switch-button")
                      if b.is_displayed())
        for click in range(4):
            shown = driver.execute_script(theme)
            other = "light" if shown == "dark" else "dark"
            name = f"Switch to the {other} theme"
            said = button.get_attribute("aria-label")
            assert said == name, f"click {click + 1}: {shown} on screen, the button says {said!r}"
            assert button.get_attribute("title") == name
            button.click()
            assert driver.execute_script(theme) == other, (
                f"click {click + 1} left the {shown} theme on screen")
        driver.get(f"{server}/chapters/02_scaling.html")
        WebDriverWait(driver, 30).until(
            lambda d: d.execute_script("return document.readyState") == "complete")
        assert driver.execute_script(theme) == system  # four clicks: back where it started
        assert driver.execute_script("return localStorage.getItem('mode')") == system


# ---------------------------------------------------------------- lazy sections, then all
# book.css renders sections below the screen lazily (content-visibility: auto) and, once the
# page has loaded, _ext/lazy_sections.js renders the rest in idle tasks. HOLD_IDLE keeps those
# tasks waiting until the test calls releaseIdle(), so a test sees the page as a reader does
# in the first moments (placeholders below the screen) and then as it settles.
HOLD_IDLE = """
const original = window.requestIdleCallback.bind(window);
let held = [];
window.requestIdleCallback = (task, options) => held ? held.push(task) : original(task, options);
window.releaseIdle = () => { const tasks = held; held = null; tasks.forEach(t => original(t)); };
"""
# What of the article is not (yet) rendered: elements whose computed content-visibility is not
# "visible", and elements with a box whose content the browser skips.
UNRENDERED = """
const all = [...document.querySelectorAll('article.bd-article *')];
const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '');
const waiting = all.filter(e => getComputedStyle(e).contentVisibility !== 'visible');
const skipped = all.filter(e => e.checkVisibility() && !e.checkVisibility({contentVisibilityAuto: true}));
return {lazy: document.querySelector('article.bd-article.ac-lazy-sections') !== null,
        waiting: waiting.length, skipped: skipped.length,
        examples: waiting.concat(skipped).slice(0, 5).map(name)};
"""
LAZY_PAGES = ["chapters/02_scaling", "chapters/10_positional_encoding", "chapters/13_pretrained_model",
              "chapters/14_real_llm"]
HEAVY_PAGES = ["chapters/08_sparse_linear", "api"]  # over site_pages.RENDER_AFTER_LOAD elements


def settled(driver, timeout=30):
    """Waits until nothing of the article is left unrendered; returns the last look."""
    look = {}

    def done(d):
        look.update(d.execute_script(UNRENDERED))
        return look["waiting"] == 0 and look["skipped"] == 0

    with contextlib.suppress(TimeoutException):
        WebDriverWait(driver, timeout, poll_frequency=0.5).until(done)
    return look


@contextlib.contextmanager
def phone_with_idle_held():
    """A fresh emulated phone whose pages' idle tasks wait for ``releaseIdle()``."""
    with chromium(window=f"500,{PHONE_SCREEN_PX}",
                  capabilities={"goog:loggingPrefs": {"browser": "ALL", "performance": "ALL"}}) as driver:
        emulate_phone(driver)
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HOLD_IDLE})
        yield driver


@pytest.mark.parametrize("name", LAZY_PAGES)
def test_lazy_sections_are_all_rendered_once_the_page_settles(server, phone, name):
    """Issue 46: the page renders its sections below the screen lazily (a first paint that lays
    out the top of the page only), and once it has loaded renders the rest: after a few seconds
    no element of the article has content-visibility other than visible and none is skipped,
    so a contrast checker (axe-core, Lighthouse) reads every text on its real background."""
    load(phone, f"{server}/{name}.html")
    look = settled(phone)
    assert look["lazy"], f"{name}: its sections are not rendered lazily"
    assert look["waiting"] == 0 and look["skipped"] == 0, f"{name}: not all rendered: {look}"


@pytest.mark.parametrize("name", ["glossary", "bibliography", "genindex", "chapters/05_masking"])
def test_rendering_after_load_logs_no_error(server, browser, name):
    """The script that renders the sections after load (site_pages.lazy_sections) runs on
    pages without any section to render too (the glossary, the bibliography, the index): no
    error in the console once it is done (Lighthouse's best-practices audit counts one)."""
    browser.get_log("browser")  # drop earlier entries
    load(browser, f"{server}/{name}.html")
    time.sleep(2)  # the idle tasks after load
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


@pytest.mark.parametrize("name", HEAVY_PAGES)
def test_the_heaviest_pages_stay_lazy_until_the_reader_scrolls(server, phone, name):
    """Issue 46: on the two heaviest pages, rendering every section after load cost a phone more
    main-thread time than it saved (site_pages.RENDER_AFTER_LOAD): their sections below the
    screen stay placeholders after the page has settled, and render when the reader scrolls to
    them."""
    load(phone, f"{server}/{name}.html")
    time.sleep(3)  # a page that renders after load would have started by now
    look = phone.execute_script(UNRENDERED)
    assert look["lazy"] and look["skipped"] > 1000, f"{name}: {look}"
    last = phone.find_elements(By.CSS_SELECTOR, "article.bd-article > section > section")[-1]
    phone.execute_script("arguments[0].scrollIntoView()", last)
    WebDriverWait(phone, 10).until(lambda d: d.execute_script(
        "return arguments[0].firstElementChild.checkVisibility({contentVisibilityAuto: true})", last))


def test_scroll_position_holds_while_sections_render(server):
    """Issue 46: a reader deep in chapter 10 (on a phone, with the sections above still 900 px
    placeholders) sees the same text at the same height while those sections render and take
    their real heights (the browser's scroll anchoring), and the page settles fully rendered."""
    with phone_with_idle_held() as driver:
        load(driver, f"{server}/chapters/10_positional_encoding.html")
        sections = driver.find_elements(By.CSS_SELECTOR, "article.bd-article > section > section")
        target = sections[-4].find_element(By.CSS_SELECTOR, "h2")
        driver.execute_script("arguments[0].scrollIntoView()", target)
        time.sleep(0.5)  # the sections near the screen render (content-visibility: auto)
        before = driver.execute_script(UNRENDERED)
        assert before["skipped"] > 1000, f"the sections above are not placeholders: {before}"
        top = driver.execute_script("return arguments[0].getBoundingClientRect().top", target)
        scroll = driver.execute_script("return scrollY")
        tops = []
        driver.execute_script("releaseIdle()")
        for _ in range(20):  # while they render
            tops.append(driver.execute_script("return arguments[0].getBoundingClientRect().top", target))
            time.sleep(0.05)
        look = settled(driver)
        assert look["waiting"] == 0 and look["skipped"] == 0, look
        tops.append(driver.execute_script("return arguments[0].getBoundingClientRect().top", target))
        moved = max(abs(t - top) for t in tops)
        assert moved <= 1, f"the text moved while sections rendered: {top} -> {tops}"
        assert driver.execute_script("return scrollY") != scroll, "nothing above changed height"


def test_scrolling_boxes_in_lazily_rendered_sections_become_keyboard_stops(server):
    """Sections below the screen render lazily (book.css) and the theme's loop that makes
    scrollable boxes keyboard stops skips them until then (site_pages.lazy_tab_stops): once
    the reader scrolls to one, a code block that scrolls sideways there is a keyboard stop;
    once the page has rendered every section, every such block is one."""
    script = (ROOT / "_build" / "html" / "_static" / "scripts" / "pydata-sphinx-theme.js").read_text()
    assert "contentvisibilityautostatechange" in script
    boxes = ("return [...arguments[0].querySelectorAll('div.cell_input pre')]"
             "  .filter(p => p.checkVisibility() && p.scrollWidth > p.clientWidth)"
             "  .map(p => p.tabIndex)")
    with phone_with_idle_held() as driver:
        load(driver, f"{server}/chapters/10_positional_encoding.html")
        last = driver.find_elements(By.CSS_SELECTOR, "article.bd-article > section > section")[-2]
        style = driver.execute_script("return getComputedStyle(arguments[0]).contentVisibility", last)
        assert style == "auto"
        driver.execute_script("arguments[0].scrollIntoView()", last)
        WebDriverWait(driver, 10).until(lambda d: (lambda s: s and all(i == 0 for i in s))(
            d.execute_script(boxes, last)))
        driver.execute_script("scrollTo(0, 0); releaseIdle()")
        look = settled(driver)
        assert look["waiting"] == 0 and look["skipped"] == 0, look
        article = driver.find_element(By.CSS_SELECTOR, "article.bd-article")
        WebDriverWait(driver, 10).until(lambda d: (lambda s: len(s) > 5 and all(i == 0 for i in s))(
            d.execute_script(boxes, article)), "a code block that scrolls is not a keyboard stop")
