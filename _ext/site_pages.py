"""What each page of the website says about itself, and what it weighs.

* Every page gets a ``<meta name="description">``: the page's ``description`` metadata
  when it has one, else its first paragraph as plain text, at most 160 characters.
* ``<title>`` is plain text: math in a title becomes Unicode (``\\(\\sqrt{d_k}\\)`` ->
  ``√d_k``), because a browser tab does not typeset LaTeX.
* Math is typeset at build time: ``_ext/tex2svg.js`` runs MathJax under Node and each
  ``.math`` element ships its SVG (with MathML for screen readers), so a page loads no
  2 MB script and does not reflow when math arrives. Without Node or ``mathjax-full``
  (``make setup`` installs it into .venv/mathjax-node) the pages fall back to MathJax
  in the browser, with a warning.
* Figures get their width and height (no layout shift while they load) and, but for the
  first, ``loading="lazy"``; the theme's scripts no longer block the first paint, and the
  search index and its code are loaded by the search page only.
* ``index.html`` is the landing page itself (jupyter-book writes a bare redirect), and
  ``favicon.ico`` exists, since browsers ask for it whatever the page links.
* Every page has its article marked ``ac-lazy-sections``: ``book.css`` renders its sections
  below the screen lazily, and on every page but the two heaviest ``lazy_sections.js``
  (inlined) renders the rest in small idle tasks once the page has loaded, so that a
  settled page is all laid out. The theme's loop
  that makes scrollable boxes keyboard stops skips boxes in sections the browser has not
  rendered yet and runs again when one is rendered (``lazy_tab_stops``).
* A display equation is a box that scrolls sideways when it is wider than the column (a
  phone): it is a keyboard stop (``tabindex="0"``, ``role="group"``, an ``aria-label``), so a
  reader without a pointer can scroll it too.
* Publishing: the site's address (``html.baseurl``) follows from ``repository.url`` when
  ``_config.yml`` leaves it empty (``https://<owner>.github.io/<repository>/``, GitHub
  Pages), so a fork edits one line; a launch button never points at a placeholder host.
  When the build ends, what no page requests leaves the site (``UNUSED``: source maps, the
  Font Awesome script whose tag is dropped, MathJax when every page is typeset, explorer
  frames and sources no page names, TrueType copies of WOFF2 fonts, the theme's
  translation catalogues) and every file and folder is
  made readable by others (a web server runs as another user; ``umask`` is not trusted).
"""

from __future__ import annotations

import atexit
import html
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from urllib.parse import urlparse

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

DESCRIPTION_CHARS = 160
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NODE_MODULES = [os.environ.get("MATHJAX_NODE_MODULES", ""),
                str(ROOT / ".venv" / "mathjax-node" / "node_modules")]

GENERIC = {
    "genindex": "Index of the terms and functions in Learn Attention.",
    "py-modindex": "Index of the Python modules of attention_core, the package behind Learn Attention.",
    "search": "Search Learn Attention, an interactive book on attention in neural networks.",
}

# ---------------------------------------------------------------- TeX -> plain text
SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "zeta": "ζ", "eta": "η", "theta": "θ", "vartheta": "θ", "iota": "ι", "kappa": "κ",
    "lambda": "λ", "mu": "μ", "nu": "ν", "xi": "ξ", "pi": "π", "rho": "ρ", "sigma": "σ",
    "tau": "τ", "upsilon": "υ", "phi": "φ", "varphi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω",
    "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Xi": "Ξ", "Pi": "Π", "Sigma": "Σ",
    "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω", "cdot": "·", "times": "×", "le": "≤", "leq": "≤",
    "ge": "≥", "geq": "≥", "neq": "≠", "ne": "≠", "approx": "≈", "sim": "~", "to": "→",
    "rightarrow": "→", "leftarrow": "←", "infty": "∞", "in": "∈", "sum": "Σ", "prod": "∏",
    "ldots": "…", "dots": "…", "cdots": "⋯", "pm": "±", "log": "log", "exp": "exp",
    "max": "max", "min": "min", "softmax": "softmax", "top": "ᵀ", "partial": "∂",
    "mathbb{R}": "ℝ",
}
STRIP_COMMANDS = ("mathrm", "mathbf", "mathit", "mathcal", "text", "textrm", "operatorname",
                  "boldsymbol", "mathsf", "mathtt", "bm")


def tex_to_plain(tex: str) -> str:
    """Readable Unicode for short TeX (titles, descriptions): ``\\sqrt{d_k}`` -> ``√d_k``."""
    s = tex.strip()
    s = re.sub(r"\\(?:left|right|big|Big|bigg|Bigg)\b\s*", "", s)
    s = re.sub(r"\\[,;:!> ]|~", " ", s)
    s = re.sub(r"\\mathbb\{R\}", "ℝ", s)
    for _ in range(4):  # innermost first: \frac{\sqrt{a}}{b}
        s = re.sub(rf"\\(?:{'|'.join(STRIP_COMMANDS)})\s*\{{([^{{}}]*)\}}", r"\1", s)
        s = re.sub(r"\\sqrt\s*\{([^{}]*)\}", lambda m: "√" + (m[1] if len(m[1]) <= 3 else f"({m[1]})"), s)
        s = re.sub(r"\\d?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"\1/\2", s)
    s = re.sub(r"\\sqrt\s*(\w)", r"√\1", s)
    s = re.sub(r"\\([A-Za-z]+)", lambda m: SYMBOLS.get(m[1], m[1]), s)
    s = re.sub(r"([_^])\{([^{}]*)\}", r"\1\2", s)
    s = s.replace("^ᵀ", "ᵀ").replace("{", "").replace("}", "").replace("\\", "")
    return re.sub(r"\s+", " ", s).strip()


MATH_HTML = re.compile(r'<span class="math[^"]*">\s*\\\((.*?)\\\)\s*</span>|\\\((.*?)\\\)', re.S)


def plain_title(title: str) -> str:
    """A page title (HTML, maybe with math) as plain text."""
    text = MATH_HTML.sub(lambda m: tex_to_plain(html.unescape(m[1] or m[2])), title or "")
    return re.sub(r"<[^>]+>", "", text)


# ---------------------------------------------------------------- descriptions
def _plain(node) -> str:
    if isinstance(node, nodes.math):
        return tex_to_plain(node.astext())
    if isinstance(node, nodes.Text):
        return str(node)
    if isinstance(node, (nodes.footnote_reference, nodes.citation_reference, nodes.substitution_definition)):
        return ""
    return "".join(_plain(child) for child in node.children)


def shorten(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    cut = cut[: cut.rfind(" ")] if " " in cut[limit // 2:] else cut
    return cut.rstrip(" ,;:–—(") + "…"


def first_paragraph(doctree) -> str:
    skip = (nodes.Admonition, nodes.sidebar, nodes.table, nodes.figure, nodes.footnote,
            nodes.citation, nodes.topic, nodes.field_list, nodes.literal_block)
    for para in doctree.findall(nodes.paragraph):
        parent, inside = para.parent, False
        while parent is not None:
            if isinstance(parent, skip) or "cell_output" in parent.get("classes", []) \
                    or (parent.tagname in ("container",) and "cell" in parent.get("classes", [])):
                inside = True
                break
            parent = parent.parent
        text = _plain(para).strip()
        if not inside and len(text) >= 40:
            return text
    return ""


def page_description(app, pagename, context, doctree) -> str:
    meta = context.get("meta") or {}
    if meta.get("description"):
        return shorten(str(meta["description"]))
    if doctree is not None:
        text = first_paragraph(doctree)
        if text:
            return shorten(text)
    title = plain_title(context.get("title", ""))
    return GENERIC.get(pagename) or shorten(f"{title}: a page of {app.config.project}, an interactive "
                                            "book on attention in neural networks.")


def on_page_context(app, pagename, templatename, context, doctree):
    description = page_description(app, pagename, context, doctree)
    context["metatags"] = context.get("metatags", "") + (
        f'\n<meta name="description" content="{html.escape(description, quote=True)}" />')
    if "title" in context:
        context["title"] = plain_title(context["title"])  # the template escapes it


# ---------------------------------------------------------------- math at build time
class MathRenderer:
    """One Node process for the whole build, fed one equation a line."""

    def __init__(self):
        self.process = None
        self.failed = False
        self.css = ""

    def start(self) -> bool:
        if self.process is not None or self.failed:
            return not self.failed
        node = shutil.which("node")
        modules = next((m for m in NODE_MODULES if m and (Path(m) / "mathjax-full").is_dir()), None)
        if not node or not modules:
            logger.warning("math stays client-side: Node or mathjax-full is missing "
                           "(make setup installs it into .venv/mathjax-node)", type="site_pages")
            self.failed = True
            return False
        env = dict(os.environ, NODE_PATH=modules)
        self.process = subprocess.Popen([node, str(HERE / "tex2svg.js")], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env, bufsize=1)
        atexit.register(self.process.kill)
        self.css = self.ask({"stylesheet": True})["css"]
        return True

    def ask(self, request: dict) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def render(self, tex: str, display: bool, pagename: str) -> str:
        reply = self.ask({"tex": html.unescape(tex), "display": display})
        if "error" in reply or "data-mjx-error" in reply.get("html", ""):
            error = reply.get("error") or re.search(r'data-mjx-error="([^"]*)"', reply["html"])[1]
            logger.warning(f"{pagename}: math does not typeset ({error}): {tex[:80]}", type="site_pages")
        # data-mml-node / data-c serve MathJax's in-browser explorer only
        return re.sub(r' data-(?:mml-node|c)="[^"]*"', "", reply.get("html", html.escape(tex)))


RENDERER = MathRenderer()
INLINE = re.compile(r'(<span class="math notranslate nohighlight"[^>]*>)\s*\\\((.*?)\\\)\s*(</span>)', re.S)
DISPLAY = re.compile(r'(<div class="math notranslate nohighlight"[^>]*>)(.*?)(</div>)', re.S)
BRACKETS = re.compile(r"\\\[(.*?)\\\]", re.S)
MATHJAX_TAGS = re.compile(r'\s*<script>window\.MathJax = .*?</script>'
                          r'|\s*<script[^>]*src="[^"]*mathjax/tex-svg\.js[^"]*"[^>]*></script>')


def focusable(div: str) -> str:
    """The opening tag of a display equation's box (it scrolls sideways when the equation is
    wider than the column), made a keyboard stop with a name (axe: scrollable-region-focusable)."""
    if "tabindex=" in div:
        return div
    return div[:-1] + ' tabindex="0" role="group" aria-label="Display equation">'


def typeset(output: str, pagename: str) -> str:
    if 'class="math' not in output or not RENDERER.start():
        return MATHJAX_TAGS.sub("", output) if 'class="math' not in output else output
    RENDERER.ask({"reset": True})
    output = INLINE.sub(lambda m: m[1] + RENDERER.render(m[2], False, pagename) + m[3], output)
    output = DISPLAY.sub(lambda m: focusable(m[1]) + BRACKETS.sub(
        lambda b: RENDERER.render(b[1], True, pagename), m[2]) + m[3], output)
    output = MATHJAX_TAGS.sub("", output)
    glyphs = RENDERER.ask({"glyphs": True})["html"]  # shared by every equation of the page
    output = re.sub(r"(<body[^>]*>)", lambda m: m[1] + glyphs, output, count=1)
    return output.replace("</head>", f'<style id="mathjax-svg-css">{RENDERER.css}</style>\n</head>', 1)


# ---------------------------------------------------------------- images and scripts
IMG = re.compile(r'<img (?![^>]*\bwidth=)([^>]*?)src="((?:\.\./)*_images/[^"]+)"([^>]*?)/?>')
# The theme's 1.5 MB Font Awesome script turns each <i class="fa-..."> into an SVG; its
# stylesheet already draws the same icons from the web font, so the script is dropped.
FONTAWESOME_JS = re.compile(r'\s*<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>')


def image_size(app, name: str):
    """(width, height) of an image the builder copies to _images/<name>, or None."""
    cache = app.__dict__.setdefault("_site_pages_sizes", {})
    if name not in cache:
        from PIL import Image
        # notebook outputs live where myst-nb wrote them; other images in the source tree
        paths = [Path(app.outdir).parent / "jupyter_execute" / name, Path(app.outdir) / "_images" / name]
        paths += [Path(app.srcdir) / source for source, dest in app.builder.images.items() if dest == name]
        cache[name] = None
        for path in paths:
            try:
                with Image.open(path) as im:
                    cache[name] = im.size
                break
            except Exception:  # missing or unreadable: try the next place
                continue
    return cache[name]


def size_images(app, output: str) -> str:
    first = [True]

    def attrs(m):
        name = m[2].rsplit("_images/", 1)[1]
        size = image_size(app, name)
        extra = f' width="{size[0]}" height="{size[1]}"' if size else ""
        if not first[0]:
            extra += ' loading="lazy"'
        first[0] = False
        return f'<img {m[1]}src="{m[2]}"{extra} decoding="async"{m[3]}/>'

    return IMG.sub(attrs, output)


SYNC_SCRIPT = re.compile(r'<script((?:(?!\b(?:defer|async|type)\b)[^>])*?)\ssrc="([^"]+)"([^>]*)></script>')
UNUSED_CSS = re.compile(r'\s*<link rel="stylesheet" type="text/css" '
                        r'href="[^"]*_static/sphinx-thebe\.css[^"]*" />')


# The search index and its code: the theme's search box (search_as_you_type off) sends the
# reader to search.html, the one page that reads them; elsewhere they were 50 kB (gzip) and
# CPU time taken from the first paint for nothing.
SEARCH_SCRIPTS = re.compile(r'\s*<script[^>]*\ssrc="[^"]*(?:_static/searchtools\.js|_static/language_data\.js'
                            r'|searchindex\.js)[^"]*"[^>]*></script>')


def defer_scripts(output: str) -> str:
    """The theme's and extensions' scripts act on a parsed page: they need not block the
    first paint. documentation_options.js stays in order: an inline script extends it."""
    head, sep, body = output.partition("</head>")

    def defer(m):
        if "documentation_options.js" in m[2]:
            return m[0]
        return f'<script{m[1]} defer src="{m[2]}"{m[3]}></script>'

    return SYNC_SCRIPT.sub(defer, head) + sep + body


# axe, serious and critical: the theme's search button is named "Search" while it shows
# "Search Ctrl+K" (label-content-name-mismatch): its content names it; sphinxcontrib-bibtex's
# citation list has role="list" over children that are doc-biblioentry, not listitem
# (aria-required-children): a plain container; myst-nb names a hidden cell's toggle
# "Toggle hidden content" while it shows "Show code cell source": its content names it.
SEARCH_BUTTON_LABEL = re.compile(r'(<button class="[^"]*search-button-field[^"]*"[^>]*?) aria-label="Search"')
CITATION_LIST_ROLE = '<div role="list" class="citation-list">'
# The theme button (its script: theme_toggle) says what a click does, in a native tooltip
# that follows it; the Bootstrap one kept the build's text, and the icons' own titles
# ("Light", "System Settings") named the state instead of the action.
THEME_BUTTON = re.compile(r'(<button class="[^"]*theme-switch-button[^"]*") aria-label="Color mode" '
                          r'data-bs-title="Color mode"\s+data-bs-placement="bottom"'
                          r' data-bs-toggle="tooltip">')
THEME_ICON_TITLE = re.compile(r'(<i class="theme-switch [^"]*" data-mode="\w+")\s+title="[^"]*"')


def accessible(output: str) -> str:
    output = SEARCH_BUTTON_LABEL.sub(r"\1", output)
    output = THEME_BUTTON.sub(r'\1 aria-label="Light or dark theme" title="Light or dark theme">', output)
    output = THEME_ICON_TITLE.sub(r'\1 aria-hidden="true"', output)
    output = output.replace('<summary aria-label="Toggle hidden content">', "<summary>")
    return output.replace(CITATION_LIST_ROLE, '<div class="citation-list">')


# Every page renders its sections below the screen lazily (book.css, "ac-lazy-sections"): the
# first paint lays out the top of the page only. A page of at most RENDER_AFTER_LOAD elements
# (every page but chapter 8, 14,500 of typeset equations and highlighted code, and the API
# page, 18,900) then renders the rest in small idle tasks once it has loaded
# (lazy_sections.js, inlined after the article), so that a settled page is all laid out and
# tools that read the geometry of what is rendered (Lighthouse's contrast audit, axe-core)
# measure text on its own background.
# On the two heaviest pages (chapter 8, the API page) that rendering costs more main-thread
# time than a phone can spare while the page loads, so they stay lazy until the reader
# scrolls. Measured on a phone (Lighthouse mobile, issue 46): benchmarks/results.json,
# "lighthouse".
ARTICLE = re.compile(r'<article class="bd-article">(.*?)</article>', re.S)
LAZY_CLASS = "ac-lazy-sections"
LAZY_SCRIPT = (HERE / "lazy_sections.js").read_text(encoding="utf-8")
RENDER_AFTER_LOAD = 10_000


def lazy_sections(output: str) -> str:
    """Marks the article of a page as lazily rendered and, on a page of at most
    RENDER_AFTER_LOAD elements, adds the script that renders the rest once it has loaded."""
    article = ARTICLE.search(output)
    if not article:
        return output
    light = len(re.findall(r"<[a-zA-Z]", article[1])) <= RENDER_AFTER_LOAD
    script = f"\n<script>{LAZY_SCRIPT}</script>" if light else ""
    return (output[:article.start()] + f'<article class="bd-article {LAZY_CLASS}">'
            + article[1] + "</article>" + script + output[article.end():])


def postprocess(app, pagename: str, output: str) -> str:
    output = typeset(output, pagename)
    output = lazy_sections(output)
    output = accessible(output)
    output = size_images(app, output)
    output = FONTAWESOME_JS.sub("", output)
    output = UNUSED_CSS.sub("", output)  # thebe is not used (selfcontained.py drops its script)
    if pagename != "search":  # the search page runs its search as it loads
        output = defer_scripts(output)
        output = SEARCH_SCRIPTS.sub("", output)
    return output


def on_builder_inited(app):
    if app.builder.format != "html":
        return
    templates = app.builder.templates
    render = templates.render

    def render_and_postprocess(template, context):
        output = render(template, context)
        return postprocess(app, context.get("pagename", ""), output) if template.endswith(".html") else output

    templates.render = render_and_postprocess


# ---------------------------------------------------------------- landing page, favicon
def on_build_finished(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    root = app.config.root_doc
    landing = out / f"{root}.html"
    if root != "index" and landing.exists():
        page = landing.read_text(encoding="utf-8")
        if app.config.html_baseurl and 'rel="canonical"' not in page:
            url = app.config.html_baseurl.rstrip("/") + f"/{root}.html"
            page = page.replace("</head>", f'<link rel="canonical" href="{url}" />\n</head>', 1)
        (out / "index.html").write_text(page, encoding="utf-8")
    favicon = out / "_static" / Path(app.config.html_favicon or "").name
    if app.config.html_favicon and favicon.is_file():
        try:
            from PIL import Image
            with Image.open(favicon) as im:
                im.convert("RGBA").save(out / "favicon.ico", sizes=[(32, 32), (16, 16)])
        except Exception:  # a PNG renamed .ico is still read by browsers
            shutil.copy(favicon, out / "favicon.ico")


# ---------------------------------------------------------------- publishing
PLACEHOLDER_HOSTS = re.compile(r"(^|\.)(example\.(com|org|net|edu)|localhost|your-hub[\w.-]*)$")


def site_url(repository_url: str, baseurl: str) -> str:
    """The address the site is published at: ``baseurl`` when absolute; else GitHub Pages'
    address of the repository, followed by ``baseurl`` (``"student/"`` for the student edition)."""
    if "://" in baseurl:
        return baseurl.rstrip("/") + "/"
    parts = urlparse(repository_url)
    owner_repo = parts.path.strip("/").removesuffix(".git").split("/")
    if parts.netloc != "github.com" or len(owner_repo) != 2:
        raise ValueError(f"repository.url: a GitHub repository https://github.com/<owner>/<name> "
                         f"derives the site's address; got {repository_url!r} (set html.baseurl)")
    owner, name = owner_repo
    root = (f"https://{owner.lower()}.github.io/" if name.lower() == f"{owner.lower()}.github.io"
            else f"https://{owner.lower()}.github.io/{name}/")
    return root + baseurl.strip("/") + ("/" if baseurl.strip("/") else "")


def on_config_inited(app, config):
    options = config.html_theme_options
    config.html_baseurl = site_url(options.get("repository_url", ""), config.html_baseurl or "")
    for key, url in (options.get("launch_buttons") or {}).items():
        if key.endswith("_url") and url and PLACEHOLDER_HOSTS.search(urlparse(url).hostname or ""):
            raise ValueError(f"launch_buttons.{key} in _config.yml points at a placeholder ({url}): "
                             "set your own or leave it empty, and no button is shown")


# Never requested by a browser, or no longer by any page: left out of the site.
UNUSED = ("*.map", "_static/scripts/fontawesome.js", "_static/scripts/fontawesome.js.LICENSE.txt",
          "_static/sphinx-thebe.js", "_static/sphinx-thebe.css", "_static/locales",
          "_static/webpack-macros.html", "_static/sbt-webpack-macros.html")
MATHJAX_FILE = "_static/mathjax/tex-svg.js"


def remove_unused(out: Path) -> None:
    pages = [p.read_text(encoding="utf-8") for p in out.rglob("*.html")
             if p.relative_to(out).parts[0] != "_static"]
    for pattern in UNUSED:
        for path in out.glob(pattern if "/" in pattern else f"**/{pattern}"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    if (out / MATHJAX_FILE).exists() and not any("mathjax/tex-svg.js" in p for p in pages):
        shutil.rmtree(out / Path(MATHJAX_FILE).parent)  # every page ships its math typeset
    for font in out.glob("_static/vendor/fontawesome/webfonts/*.ttf"):
        if font.with_suffix(".woff2").exists():  # every browser that runs the theme reads WOFF2
            font.unlink()
    sources = out / "_sources"
    if sources.is_dir():  # a page's "download source" link names its source; the chapters' name
        linked = set()    # their reader notebooks (reader_notebooks.py) instead
        for page in pages:
            linked.update(re.findall(r'_sources/([^"#?]+)"', page))
        for source in [p for p in sources.rglob("*") if p.is_file()]:
            if source.relative_to(sources).as_posix() not in linked:
                source.unlink()
        for folder in sorted((p for p in sources.rglob("*") if p.is_dir()), reverse=True):
            if not any(folder.iterdir()):
                folder.rmdir()
    frames = out / "_static" / "explorer-frames"
    if frames.is_dir():  # content-addressed: a frame of an earlier build stays behind
        named = set()
        for page in pages:
            named.update(re.findall(r"explorer-frames/([0-9a-f]{16}\.\w+)", page))
        for frame in frames.iterdir():
            if frame.is_file() and frame.name not in named:
                frame.unlink()


def readable_by_all(out: Path) -> None:
    """Every file readable, every folder readable and traversable, by others."""
    for folder, _dirs, files in os.walk(out):
        for name, bits in [(folder, 0o555)] + [(os.path.join(folder, f), 0o444) for f in files]:
            mode = os.lstat(name).st_mode
            if not stat.S_ISLNK(mode) and stat.S_IMODE(mode) & bits != bits:
                os.chmod(name, stat.S_IMODE(mode) | bits)


# The theme makes every scrollable box a keyboard stop: on load, on resize and on DOM changes,
# it reads each code block's and output's scrollWidth and sets its tabIndex. Book.css renders
# sections below the screen lazily (content-visibility: auto), and a size read inside one
# forces it to be laid out: on chapter 8 the loop laid out the whole page again, 170 ms of a
# phone's main thread. The patched loop leaves a box in a skipped section alone until its
# section is rendered (the "contentvisibilityautostatechange" event runs the check again;
# lazy_sections.js sends one when it has rendered every section), so every box that scrolls
# is still a keyboard stop once a reader can see it.
THEME_SCRIPT = "_static/scripts/pydata-sphinx-theme.js"
TAB_STOPS = ".forEach(e=>{e.tabIndex=e.scrollWidth>e.clientWidth||e.scrollHeight>e.clientHeight?0:-1})"
TAB_STOPS_LAZY = (".forEach(e=>{e.checkVisibility({contentVisibilityAuto:!0})"
                  "&&(e.tabIndex=e.scrollWidth>e.clientWidth||e.scrollHeight>e.clientHeight?0:-1)})")
TAB_STOPS_EVENTS = 'window.addEventListener("resize",t),new MutationObserver(t)'
TAB_STOPS_EVENTS_LAZY = ('window.addEventListener("resize",t),'
                         'document.addEventListener("contentvisibilityautostatechange",t,!0),'
                         'new MutationObserver(t)')


def patch_theme_script(out: Path, replacements: dict[str, str], what: str) -> None:
    """Replace, in the theme's script copied to ``out``, each key of ``replacements`` (found
    exactly once) by its value; a warning (an error under ``-W``) names ``what`` changed if
    the theme's code no longer matches. Run twice, it leaves the patched script alone."""
    script = out / THEME_SCRIPT
    if not script.is_file():
        return
    text = script.read_text(encoding="utf-8")
    if all(new in text for new in replacements.values()):
        return
    if any(text.count(old) != 1 for old in replacements):
        logger.warning(f"{THEME_SCRIPT}: {what} changed; left as it is (site_pages)", type="site_pages")
        return
    script.chmod(script.stat().st_mode | 0o200)  # copied from the theme's package: maybe read-only
    for old, new in replacements.items():
        text = text.replace(old, new)
    script.write_text(text, encoding="utf-8")


def lazy_tab_stops(out: Path) -> None:
    patch_theme_script(out, {TAB_STOPS: TAB_STOPS_LAZY, TAB_STOPS_EVENTS: TAB_STOPS_EVENTS_LAZY},
                       "the theme's tab-stop loop")


# The theme button cycled auto -> dark -> light -> auto (system dark: auto -> light -> dark),
# so one click in three changed nothing on screen ("light" to "auto" on a light system), and
# its name, "Color mode", did not say what a click would do. The patched button switches to
# the other theme on every click (the reader's system decides until the first click:
# default_mode auto), and its name and tooltip say which: "Switch to the dark theme".
THEME_CYCLE = ('function f(){const e=document.documentElement.dataset.defaultMode||"auto",'
               't=localStorage.getItem("mode")||e;var n,o;p(((o=(n=m.matches?["auto","light","dark"]'
               ':["auto","dark","light"]).indexOf(t)+1)===n.length&&(o=0),n[o]))}')
THEME_TOGGLE = 'function f(){p("dark"===document.documentElement.dataset.theme?"light":"dark")}'
THEME_SET = 'localStorage.setItem("theme",n),'
THEME_SET_NAMED = ('localStorage.setItem("theme",n),document.querySelectorAll(".theme-switch-button")'
                   '.forEach(b=>{const w=`Switch to the ${"dark"===n?"light":"dark"} theme`;'
                   'b.setAttribute("aria-label",w),b.setAttribute("title",w)}),')


def theme_toggle(out: Path) -> None:
    patch_theme_script(out, {THEME_CYCLE: THEME_TOGGLE, THEME_SET: THEME_SET_NAMED},
                       "the theme button's cycle")


def on_build_finished_publish(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    lazy_tab_stops(Path(app.outdir))
    theme_toggle(Path(app.outdir))
    remove_unused(Path(app.outdir))
    readable_by_all(Path(app.outdir))


def setup(app):
    app.connect("config-inited", on_config_inited)
    app.connect("build-finished", on_build_finished_publish, priority=999)  # after every writer
    app.connect("builder-inited", on_builder_inited)
    app.connect("html-page-context", on_page_context, priority=950)
    app.connect("build-finished", on_build_finished, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
