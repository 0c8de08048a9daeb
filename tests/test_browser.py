"""The built site in headless Chromium with every host but the local server blocked:
pages load without console errors or outside requests, math is typeset, images load,
and explorer controls change the figure. Screenshots land in _build/screenshots/."""

import functools
import http.server
import json
import threading
import time

import pytest

from conftest import CHAPTERS, ROOT, chromium, need_chromium

need_chromium()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

PAGES = (["intro"] + [f"chapters/{c}" for c in CHAPTERS]
         + ["notation", "glossary", "api", "instructor_guide", "performance", "bibliography"])
SHOTS = ROOT / "_build" / "screenshots"


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


@pytest.mark.parametrize("name", PAGES)
def test_page_is_self_contained_and_renders(server, browser, name):
    load(browser, f"{server}/{name}.html")
    has_math = browser.execute_script("return document.querySelectorAll('.math').length") > 0
    if has_math:  # MathJax replaces every .math span with an <mjx-container> holding SVG
        WebDriverWait(browser, 30).until(lambda d: d.execute_script(
            "return document.querySelectorAll('mjx-container svg').length > 0"))
        untypeset = browser.execute_script(
            "return [...document.querySelectorAll('.math')].filter(e => !e.querySelector('mjx-container')).length")
        assert untypeset == 0, f"{untypeset} math elements were not typeset"
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(
        "return [...document.images].every(i => i.complete)"))
    broken = browser.execute_script(
        "return [...document.images].filter(i => !(i.naturalWidth > 0)).map(i => i.src.slice(0, 80))")
    assert not broken, f"images that did not load: {broken}"
    time.sleep(0.3)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    # chrome:// URLs are the browser's own pages (its new tab), not network requests
    outside = [u for u in requested_urls(browser) if not u.startswith(
        (server, "data:", "blob:", "about:", "chrome:", "chrome-extension:"))]
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
        key = Keys.ARROW_LEFT if before_value == control.get_attribute("max") else Keys.ARROW_RIGHT
        control.send_keys(key)  # as a reader would, with the keyboard
        assert control.get_attribute("value") != before_value
        assert image.get_attribute("src") != before_src, "the figure did not change"
        assert browser.execute_script("return arguments[0].naturalWidth", image) > 0
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    browser.execute_script("arguments[0].scrollIntoView()", explorer)
    SHOTS.mkdir(parents=True, exist_ok=True)
    explorer.screenshot(str(SHOTS / f"{chapter}_explorer.png"))
