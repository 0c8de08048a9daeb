"""One stylesheet a page, holding only the rules the site can use (issue 34: a phone's first paint).

Sphinx links twelve stylesheets into every page: the theme's 397 kB (66 kB gzipped, Bootstrap
and every Font Awesome icon, of which a page uses about a tenth), then eleven small ones, one
of them importing a thirteenth. Each blocks the first paint and, on a phone's network, costs
a round trip (Lighthouse's mobile run: first paint 3.8 s on chapter 2, 2.1 s of it these).
When the build ends this extension

* concatenates a page's stylesheets in the page's order into ``_static/styles/site-<hash>.css``
  (``@import`` inlined where it stood, ``url(...)`` rebased to the new file's folder);
* drops the rules that no page and no script of the site can match (PurgeCSS, run by
  ``_ext/purge_css.mjs`` over every built page and script, so classes the theme's scripts
  switch on, such as bootstrap's ``show`` or ``data-theme="dark"``, keep their rules);
* links that one file in place of the twelve, and leaves out the originals no page links;
* inlines ``documentation_options.js``, the one script that runs before the page is parsed.

Without Node or PurgeCSS (``make setup`` installs it into .venv/site-tools) it warns, which
fails the ``-W`` build, and leaves the pages as Sphinx wrote them.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shutil
import subprocess
from pathlib import Path

from fontTools import subset
from sphinx.util import logging

logger = logging.getLogger(__name__)
HERE = Path(__file__).resolve().parent
SITE_TOOLS = Path(os.environ.get("SITE_TOOLS_NODE_MODULES",
                                 HERE.parent / ".venv" / "site-tools" / "node_modules"))
BUNDLE_DIR = "_static/styles"

STYLESHEET = re.compile(r'[ \t]*<link (?=[^>]*\brel="stylesheet")[^>]*\bhref="([^"]+)"[^>]*>\n?')
IMPORT = re.compile(r'@import\s+(?:url\()?\s*["\']?([^"\')\s]+)["\']?\s*\)?\s*;')
URL = re.compile(r'url\(\s*(["\']?)([^"\')]+)\1\s*\)')
FONT_FACE = re.compile(r"@font-face\{[^}]*\}")
FONT_SRC = re.compile(r"src:url\(([^)]+\.woff2)\)[^;}]*")
ICON = re.compile(r"[\ue000-\uf8ff]|\\(e[0-9a-f]{3}|f[0-9a-f]{3})\b", re.IGNORECASE)
OPTIONS_SCRIPT = re.compile(r'<script src="([^"]*_static/documentation_options\.js)[^"]*"></script>')


def site_path(page: str, href: str) -> str:
    """``href`` of a page at site path ``page``, as a path from the site's root."""
    return posixpath.normpath(posixpath.join(posixpath.dirname(page), href.split("?")[0].split("#")[0]))


def relative(path: str, start_dir: str) -> str:
    return posixpath.relpath(path, start_dir or ".")


def inlined(out: Path, path: str, seen: set[str]) -> str:
    """The stylesheet at site path ``path``, its imports inlined and its urls from BUNDLE_DIR."""
    if path in seen:  # an import cycle would never end
        return ""
    seen.add(path)
    text = (out / path).read_text(encoding="utf-8")

    def rebase(m):
        url = m[2]
        if re.match(r"^(?:[a-z]+:|/|#)", url):  # data:, http:, absolute, a fragment
            return m[0]
        return f'url("{relative(site_path(path, url), BUNDLE_DIR)}")'

    text = IMPORT.sub(lambda m: inlined(out, site_path(path, m[1]), seen), text)
    return URL.sub(rebase, text) + "\n"


def purge(out: Path, css: str) -> str:
    node = shutil.which("node")
    if not node or not all((SITE_TOOLS / name).is_dir() for name in ("purgecss", "lightningcss")):
        raise FileNotFoundError(f"Node, PurgeCSS or Lightning CSS is missing "
                                f"(make setup installs them into {SITE_TOOLS.parent})")
    env = dict(os.environ, SITE_TOOLS=str(SITE_TOOLS))
    result = subprocess.run([node, str(HERE / "purge_css.mjs"), str(out)], input=css, capture_output=True,
                            text=True, env=env, check=False)
    if result.returncode != 0 or not result.stdout.strip():
        raise RuntimeError(f"PurgeCSS failed: {result.stderr.strip()[-500:]}")
    return result.stdout


def subset_fonts(out: Path, css: str) -> str:
    """Each icon font of ``css`` cut to the icons ``css`` still draws (the purge kept the
    rules of the icons some page or script uses): Font Awesome's 274 kB of WOFF2 become a
    few kB. The cut font gets a name of its own (its content's hash); the whole font and its
    TrueType copy leave the site."""
    icons = {ord(m[0]) if not m[1] else int(m[1], 16) for m in ICON.finditer(css)}

    def cut(face):
        src = FONT_SRC.search(face[0])
        if not src:
            return face[0]
        path = site_path(f"{BUNDLE_DIR}/x.css", src[1])
        font = out / path
        if not font.exists() or re.search(r"-[0-9a-f]{10}$", font.stem):  # already cut
            return face[0]
        options = subset.Options(flavor="woff2", layout_features=["*"], notdef_outline=True)
        loaded = subset.load_font(str(font), options)
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=icons & set(loaded.getBestCmap() or {}))
        subsetter.subset(loaded)
        subset.save_font(loaded, str(font), options)
        name = f"{font.stem}-{hashlib.sha256(font.read_bytes()).hexdigest()[:10]}.woff2"
        font.rename(font.with_name(name))
        font.with_suffix(".ttf").unlink(missing_ok=True)
        new = relative(posixpath.join(posixpath.dirname(path), name), BUNDLE_DIR)
        return face[0].replace(src[0], f'src:url({new})format("woff2")')

    return FONT_FACE.sub(cut, css)


def bundle_stylesheets(out: Path) -> dict[str, int]:
    """Rewrite every page to link one purged stylesheet; returns {bundle path: bytes}."""
    pages = [p for p in out.rglob("*.html") if p.relative_to(out).parts[0] != "_static"]
    heads = {}
    for page in pages:
        text = page.read_text(encoding="utf-8")
        head = text.partition("</head>")[0]
        name = page.relative_to(out).as_posix()
        heads[page] = [site_path(name, href) for href in STYLESHEET.findall(head)]
    bundles, imported = {}, set()
    for sheets in {tuple(s) for s in heads.values() if s}:
        seen = set()
        css = "".join(inlined(out, path, seen) for path in sheets)
        imported |= seen
        css = subset_fonts(out, purge(out, css))
        path = f"{BUNDLE_DIR}/site-{hashlib.sha256(css.encode()).hexdigest()[:12]}.css"
        (out / path).write_text(css, encoding="utf-8")
        bundles[sheets] = path
    options = out / "_static" / "documentation_options.js"
    options_js = options.read_text(encoding="utf-8").strip() if options.exists() else None
    for page, sheets in heads.items():
        text = page.read_text(encoding="utf-8")
        head, sep, body = text.partition("</head>")
        folder = posixpath.dirname(page.relative_to(out).as_posix())
        if sheets:
            link = f'<link rel="stylesheet" href="{relative(bundles[tuple(sheets)], folder)}" />\n'
            first = STYLESHEET.search(head)  # the bundle stands where the first sheet stood
            head = head[: first.start()] + link + STYLESHEET.sub("", head[first.end() :])
        if options_js is not None:
            head = OPTIONS_SCRIPT.sub(lambda m: f"<script>{options_js}</script>", head)
        page.write_text(head + sep + body, encoding="utf-8")
    linked = {path for sheets in bundles for path in sheets} | imported
    still = {site_path(p.relative_to(out).as_posix(), h) for p in pages
             for h in STYLESHEET.findall(p.read_text(encoding="utf-8"))}
    for path in linked - still:
        (out / path).unlink(missing_ok=True)
    if options_js is not None and not any("documentation_options.js" in p.read_text(encoding="utf-8")
                                          for p in pages):
        options.unlink()
    remove_stale(out, set(bundles.values()))
    return {path: (out / path).stat().st_size for path in bundles.values()}


def remove_stale(out: Path, current: set[str]) -> None:
    """A rebuild into the same folder keeps what an earlier build wrote: its bundle and cut
    fonts go when no current bundle names them."""
    named = "".join((out / path).read_text(encoding="utf-8") for path in current)
    for old in (out / BUNDLE_DIR).glob("site-*.css"):
        if old.relative_to(out).as_posix() not in current:
            old.unlink()
    for font in out.glob("_static/**/*.woff2"):
        if re.search(r"-[0-9a-f]{10}$", font.stem) and font.name not in named:
            font.unlink()


def on_build_finished(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    try:
        sizes = bundle_stylesheets(Path(app.outdir))
    except (FileNotFoundError, RuntimeError) as error:
        logger.warning(f"stylesheets left as Sphinx wrote them: {error}", type="site_css")
        return
    for path, size in sizes.items():
        logger.info(f"site_css: {path}, {size:,} bytes")


def setup(app):
    # after every writer of pages (reader notebooks, explorer frames), before site_pages'
    # last pass (priority 999) leaves out unused files and makes everything readable
    app.connect("build-finished", on_build_finished, priority=990)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
