"""The built website can be published as it is (issue #34): any web server can serve
``_build/html`` (every file readable by others, every folder traversable), one workflow
publishes it to GitHub Pages with ``make book``, no launch button points at a placeholder,
what no page requests is left out, print() output wraps in the desktop column, the
chapters' code fits that column, and a display equation that scrolls sideways on a
phone is reached and scrolled with the keyboard."""

from __future__ import annotations

import functools
import http.server
import os
import re
import stat
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from conftest import CHAPTERS, ROOT, chromium, emulate_phone, need_chromium

sys.path.insert(0, str(ROOT / "_ext"))
import explorer_frames
import site_css
import site_pages
from fontTools.ttLib import TTFont

WORKFLOW = ROOT / ".github" / "workflows" / "publish.yml"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
NOTEBOOK_RUFF = ROOT / "chapters" / "ruff.toml"  # `ruff format` settings of the chapters


def pages(site: Path) -> list[Path]:
    return [p for p in site.rglob("*.html") if p.relative_to(site).parts[0] != "_static"]


# ---------------------------------------------------------------- file modes
def test_every_file_is_readable_and_every_folder_traversable_by_others(site):
    wrong = []
    for path in [site, *site.rglob("*")]:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            continue
        need = 0o005 if stat.S_ISDIR(mode) else 0o004
        if mode & need != need:
            wrong.append(f"{stat.filemode(mode)} {path.relative_to(site)}")
    assert not wrong, f"{len(wrong)} paths a web server running as another user cannot read: {wrong[:5]}"


def test_frames_are_written_readable_whatever_the_umask(tmp_path):
    old = os.umask(0o077)  # the strictest umask: mkstemp's 0600 must not survive
    try:
        relative = explorer_frames.frame_file(b"\x89PNG frame", "png", str(tmp_path))
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / relative).stat().st_mode)
    assert mode & 0o044 == 0o044, oct(mode)


def test_the_last_pass_makes_what_any_writer_left_readable(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    private = tmp_path / "a" / "b" / "frame.png"
    private.write_bytes(b"x")
    private.chmod(0o600)
    (tmp_path / "a").chmod(0o700)
    site_pages.readable_by_all(tmp_path)
    assert stat.S_IMODE(private.stat().st_mode) & 0o444 == 0o444
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) & 0o555 == 0o555


# ---------------------------------------------------------------- where the site lives
def test_site_address_follows_from_the_repository():
    assert site_pages.site_url("https://github.com/Ada/learn-attention", "") == \
        "https://ada.github.io/learn-attention/"
    assert site_pages.site_url("https://github.com/Ada/learn-attention.git", "student/") == \
        "https://ada.github.io/learn-attention/student/"
    assert site_pages.site_url("https://github.com/ada/ada.github.io", "") == "https://ada.github.io/"
    assert site_pages.site_url("https://github.com/a/b", "https://book.example.org/x") == \
        "https://book.example.org/x/"
    with pytest.raises(ValueError, match="repository.url"):
        site_pages.site_url("https://gitlab.com/a/b", "")


def test_no_launch_link_points_at_a_placeholder(site):
    launch = CONFIG["launch_buttons"]
    for key, url in launch.items():
        if key.endswith("_url") and url:
            assert not site_pages.PLACEHOLDER_HOSTS.search(urlparse(url).hostname or ""), f"{key}: {url}"
    repo = CONFIG["repository"]["url"].rstrip("/")
    expected = site_pages.site_url(repo, CONFIG["html"].get("baseurl") or "")
    for path in pages(site):
        text = path.read_text(encoding="utf-8")
        for href in re.findall(r'<a [^>]*href="([^"]+)"', text):
            host = urlparse(href).hostname or ""
            assert not site_pages.PLACEHOLDER_HOSTS.search(host), f"{path.name}: {href}"
            if not launch.get("jupyterhub_url"):
                assert "user-redirect/git-pull" not in href, f"{path.name}: a JupyterHub link, no hub set"
        canonical = re.search(r'<link rel="canonical" href="([^"]+)"', text)
        if canonical:
            assert canonical[1].startswith(expected), (path.name, canonical[1], expected)


def test_publish_workflow_builds_with_make_book_and_pushes_gh_pages():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "main" in triggers["push"]["branches"] and "workflow_dispatch" in triggers
    assert workflow["permissions"]["contents"] == "write"
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    assert all(s.get("name") for s in steps), "every step is named"
    runs = [line.strip() for s in steps for line in s.get("run", "").splitlines()]
    assert "make book" in runs and "make book SOLUTIONS=hide" in runs, runs
    assert any(".nojekyll" in r for r in runs), "GitHub Pages must not drop _static/ (Jekyll)"
    assert any("_build/student/_build/html" in r and "/student" in r for r in runs)
    for step in steps:
        if "uses" in step:
            assert re.fullmatch(r"[\w-]+/[\w-]+@v\d+(\.\d+)*", step["uses"]), f"not pinned: {step['uses']}"
    publish = next(s for s in steps if "gh-pages" in s.get("uses", "") or "gh-pages" in str(s.get("with")))
    branch = CONFIG["sphinx"]["config"]["reader_notebooks_branch"]
    assert publish["with"]["publish_branch"] == branch, "the launch buttons open notebooks from this branch"


# ---------------------------------------------------------------- what the site leaves out
def test_files_no_page_requests_are_left_out(site):
    texts = [p.read_text(encoding="utf-8") for p in pages(site)]
    assert not list(site.rglob("*.map")), "source maps"
    assert not (site / "_static" / "scripts" / "fontawesome.js").exists()
    assert not (site / "_static" / "locales").exists()
    assert not [f for f in site.glob("_static/vendor/fontawesome/webfonts/*.ttf")
                if f.with_suffix(".woff2").exists()]
    if not any("mathjax/tex-svg.js" in t for t in texts):
        assert not (site / "_static" / "mathjax").exists(), "a MathJax bundle no page loads"
    named = {m for t in texts for m in re.findall(r"explorer-frames/([0-9a-f]{16}\.\w+)", t)}
    frames = {f.name for f in (site / "_static" / "explorer-frames").iterdir()}
    assert frames == named, f"{len(frames - named)} frames no page names, {len(named - frames)} missing"
    for name, text in zip(pages(site), texts, strict=True):
        loads_index = "searchindex.js" in text
        assert loads_index == (name.name == "search.html"), f"{name.name}: search index {loads_index}"


# ---------------------------------------------------------------- one stylesheet a page
def test_every_page_links_one_stylesheet_and_no_script_blocks_it(site):
    """A phone's first paint waits for every stylesheet in the head and every script that is
    neither deferred nor inline: one of each kind at most (site_css.py)."""
    sheets = set()
    for page in pages(site):
        head = page.read_text(encoding="utf-8").partition("</head>")[0]
        links = site_css.STYLESHEET.findall(head)
        assert len(links) == 1, f"{page.relative_to(site)}: {len(links)} stylesheets"
        sheets.add(site_css.site_path(page.relative_to(site).as_posix(), links[0]))
        blocking = re.findall(r'<script(?![^>]*\b(?:defer|async|type="module"))[^>]*\bsrc="([^"]+)"', head)
        if page.name != "search.html":  # the search page runs its search as it loads
            assert not blocking, f"{page.relative_to(site)}: {blocking}"
    assert all((site / s).is_file() for s in sheets), sheets
    # the in-browser model's page loads its own stylesheet when the reader starts it
    others = {p.relative_to(site).as_posix() for p in site.rglob("*.css")} - sheets
    assert others <= {"_static/attention-lab/style.css"}, f"stylesheets no page links: {others}"


def test_every_icon_a_page_shows_has_its_rule_and_its_glyph(site):
    """The purge keeps the rule of every Font Awesome icon a page names, and the cut fonts
    keep its glyph: an icon whose glyph was cut away shows as an empty box."""
    css = next((site / "_static" / "styles").glob("site-*.css")).read_text(encoding="utf-8")
    face = r'@font-face\{[^}]*font-family:"([^"]+)"[^}]*font-weight:(\d+)[^}]*url\(([^)]+)\)'
    faces = re.findall(face, css)
    cmaps = {(family, weight): set(TTFont(site / "_static" / "styles" / url).getBestCmap())
             for family, weight, url in faces}
    fonts = {f.stat().st_size for f in (site / "_static" / "vendor" / "fontawesome" / "webfonts").iterdir()}
    assert sum(fonts) < 30_000, f"icon fonts {sorted(fonts)} bytes: not cut to the icons the site uses"
    icons = set()
    for page in pages(site):
        for classes in re.findall(r'<i class="([^"]*\bfa-[^"]*)"', page.read_text(encoding="utf-8")):
            names = classes.split()
            style = ("brands" if {"fa-brands", "fab"} & set(names) else
                     "regular" if {"fa-regular", "far"} & set(names) else "solid")
            icons.update((style, n) for n in names if n.startswith("fa-") and n not in
                         {"fa-solid", "fa-brands", "fa-regular", "fa-lg", "fa-fw", "fa-sm"})
    assert len(icons) >= 10, icons
    families = {"solid": ("Font Awesome 6 Free", "900"), "regular": ("Font Awesome 6 Free", "400"),
                "brands": ("Font Awesome 6 Brands", "400")}
    glyphs = {}  # icon class -> its character, from rules such as .fa-bars:before{content:"..."}
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        char = re.search(r'(?:content|--fa):"(.)"', body)
        for selector in selectors.split(",") if char else []:
            glyphs[selector.strip().removesuffix(":before")] = char[1]
    missing = []
    for style, name in sorted(icons):
        char = glyphs.get(f".{name}")
        if char is None or ord(char) not in cmaps[families[style]]:
            missing.append(f"{style} {name}: {'no rule' if char is None else 'no glyph'}")
    assert not missing, missing


MATH_BOX = re.compile(r'<div class="math notranslate nohighlight"[^>]*>')


def test_display_equations_are_keyboard_stops(site):
    count = 0
    for chapter in CHAPTERS:
        for box in MATH_BOX.findall((site / "chapters" / f"{chapter}.html").read_text()):
            count += 1
            assert 'tabindex="0"' in box and "role=" in box and "aria-label=" in box, f"{chapter}: {box}"
    assert count > 20, count


# ---------------------------------------------------------------- in Chromium
class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(site):
    need_chromium()
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


DESKTOP = r"""
const main = document.querySelector('main');
const outs = [...main.querySelectorAll('div.cell_output .output.stream pre, '
                                       + 'div.cell_output .output.text_plain pre')]
  .filter(e => e.offsetParent);
const wide = outs.filter(e => e.scrollWidth > e.clientWidth + 1
                          || e.getBoundingClientRect().width > e.parentElement.clientWidth + 1)
  .map(e => e.textContent.trim().slice(0, 60));
const code = [...main.querySelectorAll('div.cell_input pre')].filter(e => e.offsetParent);
let chars = null;
if (code.length) {
  const probe = document.createElement('span');
  probe.textContent = 'x'.repeat(100);
  code[0].appendChild(probe);
  const each = probe.getBoundingClientRect().width / 100;
  probe.remove();
  const cs = getComputedStyle(code[0]);
  chars = (code[0].clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight)) / each;
}
return {outputs: outs.length, wide, chars};
"""


@pytest.mark.browser
def test_print_output_wraps_and_code_fits_the_desktop_column(server):
    line_length = int(re.search(r"^line-length\s*=\s*(\d+)", NOTEBOOK_RUFF.read_text(), re.M)[1])
    wide, columns, outputs = [], [], 0
    with chromium(window="1280,900") as driver:
        for chapter in CHAPTERS:
            driver.get(f"{server}/chapters/{chapter}.html")
            page = driver.execute_script(DESKTOP)
            outputs += page["outputs"]
            wide += [f"{chapter}: {w}" for w in page["wide"]]
            if page["chars"]:
                columns.append(page["chars"])
    assert outputs > 50, outputs
    assert not wide, f"text outputs wider than the column at 1280 px: {wide[:5]}"
    assert columns and min(columns) >= line_length, (
        f"the code column holds {min(columns):.1f} characters at 1280 px; chapters/ruff.toml formats "
        f"the chapters' code to {line_length}")


PHONE = r"""
const scrolls = e => e.scrollWidth > e.clientWidth + 1;
const boxes = [...document.querySelectorAll('main div.math')].filter(scrolls);
const code = [...document.querySelectorAll('main div.cell_input pre')].filter(scrolls);
const shadow = code.length ? getComputedStyle(code[0]).backgroundImage : '';
return {boxes: boxes.map(b => [b.tabIndex, b.getAttribute('aria-label')]), code: code.length, shadow};
"""


SCROLLS = "return arguments[0].scrollWidth > arguments[0].clientWidth + 1"


@pytest.mark.browser
def test_a_phone_reader_scrolls_equations_with_the_keyboard_and_sees_code_scroll(server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    scrolled = shadowed = False
    with chromium(window="500,844") as driver:
        emulate_phone(driver)  # a 390 x 844 phone: a headless window of 390 px shows 485 px
        for chapter in CHAPTERS:  # until both are seen: display_equations_are_keyboard_stops checks all
            if scrolled and shadowed:
                break
            driver.get(f"{server}/chapters/{chapter}.html")
            page = driver.execute_script(PHONE)
            assert all(tab == 0 and label for tab, label in page["boxes"]), f"{chapter}: {page['boxes']}"
            if page["code"]:
                assert page["shadow"].count("gradient") >= 4, f"{chapter}: no scroll shadow on code"
                shadowed = True
            if page["boxes"] and not scrolled:  # one is enough to show the keyboard reaches it
                box = next(b for b in driver.find_elements(By.CSS_SELECTOR, "main div.math")
                           if driver.execute_script(SCROLLS, b))
                driver.execute_script("arguments[0].scrollIntoView({block: 'center'});"
                                      "arguments[0].focus()", box)
                assert driver.switch_to.active_element == box
                box.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
                WebDriverWait(driver, 5).until(  # the theme scrolls smoothly
                    lambda d, box=box: d.execute_script("return arguments[0].scrollLeft", box) > 0)
                scrolled = True
    assert scrolled and shadowed, "no display equation or code scrolls at 390 px: nothing to check"
