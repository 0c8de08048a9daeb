"""What each page of the website says about itself, and what it weighs.

* Every page gets a ``<meta name="description">`` (its ``description`` metadata, else its first
  paragraph as plain text, at most 160 characters); ``<title>`` is plain text, math as Unicode
  (``\\(\\sqrt{d_k}\\)`` -> ``√d_k``): a browser tab does not typeset LaTeX.
* Math is typeset at build time: ``_ext/tex2svg.js`` runs MathJax under Node and each ``.math``
  element ships its SVG (with MathML for screen readers), so a page loads no 2 MB script and
  does not reflow when math arrives. Without Node or ``mathjax-full`` (``make setup``) the pages
  fall back to MathJax in the browser, with a warning. A display equation is a box that scrolls
  sideways when wider than the column: a keyboard stop with a name.
* Figures get their width and height and, but for the first, ``loading="lazy"``; the head's
  scripts no longer block the first paint; the search index is loaded by the search page only.
* Every article is marked ``ac-lazy-sections`` (``book.css`` renders its sections below the
  screen lazily) and on every page but the two heaviest ``lazy_sections.js`` (inlined) renders
  the rest in idle tasks once the page has loaded.
* ``index.html`` is the landing page itself (jupyter-book writes a bare redirect), and
  ``favicon.ico`` exists, since browsers ask for it whatever the page links.
* Publishing: the site's address (``html.baseurl``) follows from ``repository.url`` when
  ``_config.yml`` leaves it empty (GitHub Pages), so a fork edits one line; a launch button
  never points at a placeholder host. When the build ends, what no page requests leaves the
  site (``UNUSED``, and MathJax, explorer frames and sources no page names) and every file is
  made readable by others (a web server runs as another user; ``umask`` is not trusted).

Pages are read with a parser (``Page``: html.parser) and edited at the places it found, so the
rest of a page stays byte for byte as the theme wrote it. The theme's button and keyboard stops
change through ``_static/theme_behaviour.js``, but for one patch of the theme's script
(``lazy_tab_stops``: why there).
"""

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
from html_edits import Element, Page, apply, removal, src_path, start_tag
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


def plain_title(title: str) -> str:
    """A page title (HTML, maybe with math) as plain text, its math as Unicode."""
    parts = []
    for data in Page(title or "").data:  # the text between tags; an inline equation is \\(tex\\)
        while (start := data.find("\\(")) >= 0 and (end := data.find("\\)", start)) >= 0:
            parts += [data[:start], tex_to_plain(data[start + 2:end])]
            data = data[end + 2:]
        parts.append(data)
    return "".join(parts)


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
    if doctree is not None and (text := first_paragraph(doctree)):
        return shorten(text)
    title = plain_title(context.get("title", ""))
    return GENERIC.get(pagename) or shorten(f"{title}: a page of {app.config.project}, an interactive "
                                            "book on attention in neural networks.")


def describe_page(app, pagename, templatename, context, doctree):
    """The page's description in its meta tags; its title as plain text."""
    description = page_description(app, pagename, context, doctree)
    context["metatags"] = context.get("metatags", "") + (
        f'\n<meta name="description" content="{html.escape(description, quote=True)}" />')
    if "title" in context:
        context["title"] = plain_title(context["title"])  # the template escapes it


# ---------------------------------------------------------------- math at build time
class MathRenderer:
    """One Node process for the whole build, fed one equation a line."""

    def __init__(self):
        self.process, self.failed, self.css = None, False, ""

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
        errors = [e.attrs["data-mjx-error"] for e in Page(reply.get("html", "")).elements
                  if "data-mjx-error" in e.attrs] if "data-mjx-error" in reply.get("html", "") else []
        if "error" in reply or errors:
            error = reply.get("error") or errors[0]
            logger.warning(f"{pagename}: math does not typeset ({error}): {tex[:80]}", type="site_pages")
        return reply.get("html", html.escape(tex))


RENDERER = MathRenderer()
MATH_CLASSES = ["math", "notranslate", "nohighlight"]  # Sphinx's inline span and display div


def is_mathjax_tag(page: Page, element: Element) -> bool:
    """The MathJax configuration script or the MathJax script itself."""
    return element.tag == "script" and (src_path(element).endswith("mathjax/tex-svg.js")
            or page.text[element.open_end:element.close].lstrip().startswith("window.MathJax = "))


def display_tex(content: str) -> list[tuple[int, int, str]]:
    """Each ``\\[ tex \\]`` of a display equation's content: (start, end, tex), offsets into it."""
    found, at = [], 0
    while (start := content.find("\\[", at)) >= 0 and (end := content.find("\\]", start)) >= 0:
        found.append((start, end + 2, content[start + 2:end]))
        at = end + 2
    return found


def math_edits(page: Page, pagename: str) -> list[tuple[int, int, str]]:
    """The edits that typeset a page's math: inline equations, then display ones (in that
    order, as MathJax numbers the glyphs it shares), a display equation's box a keyboard stop
    (it scrolls sideways when wider than the column; axe: scrollable-region-focusable)."""
    text, edits = page.text, []
    math = [e for e in page.elements if e.classes == MATH_CLASSES]
    for span in (e for e in math if e.tag == "span"):
        tex = text[span.open_end:span.close].strip()
        if tex.startswith("\\(") and tex.endswith("\\)"):
            edits.append((span.open_end, span.close, RENDERER.render(tex[2:-2], False, pagename)))
    for div in (e for e in math if e.tag == "div"):
        if "tabindex" not in div.attrs:
            keyboard = {"tabindex": "0", "role": "group", "aria-label": "Display equation"}
            edits.append((div.start, div.open_end, start_tag("div", div.attrs | keyboard)))
        edits += [(div.open_end + start, div.open_end + end, RENDERER.render(tex, True, pagename))
                  for start, end, tex in display_tex(text[div.open_end:div.close])]
    return edits


def typeset(output: str, pagename: str) -> str:
    """The page with its math typeset (SVG, the glyphs it shares after ``<body>``, MathJax's
    stylesheet in the head) and MathJax's scripts left out; as it was if Node is missing."""
    page = Page(output)
    has_math = any(e.classes[:1] == ["math"] for e in page.elements)
    if has_math and not RENDERER.start():
        return output
    edits = [removal(output, e) for e in page.elements if is_mathjax_tag(page, e)]
    if has_math:
        RENDERER.ask({"reset": True})
        edits += math_edits(page, pagename)
        glyphs = RENDERER.ask({"glyphs": True})["html"]  # shared by every equation of the page
        body, head = page.first("body"), page.first("head")  # a theme component has neither
        edits += [(body.open_end, body.open_end, glyphs)] if body else []
        css = f'<style id="mathjax-svg-css">{RENDERER.css}</style>\n'
        edits += [(head.close, head.close, css)] if head else []
    return apply(output, edits)


# ---------------------------------------------------------------- images and scripts
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


def image_edit(app, page: Page, image: Element, first: bool):
    """An ``<img>`` of ``_images/`` without a width gets its size (no layout shift while it
    loads), ``decoding="async"`` and, but for the page's first, ``loading="lazy"``."""
    attrs = list(image.attrs.items())
    at = [name for name, _ in attrs].index("src") + 1
    size = image_size(app, image.attrs["src"].rsplit("_images/", 1)[1])
    extra = {"width": str(size[0]), "height": str(size[1])} if size else {}
    extra |= {} if first else {"loading": "lazy"}
    attrs[at:at] = list((extra | {"decoding": "async"}).items())
    tail = " />" if page.text[image.start:image.open_end].endswith(" />") else "/>"
    return image.start, image.open_end, start_tag("img", dict(attrs))[:-1] + tail


def image_edits(app, page: Page) -> list[tuple[int, int, str]]:
    images = [e for e in page.elements if e.tag == "img" and "width" not in e.attrs
              and (e.attrs.get("src") or "").lstrip("./").startswith("_images/")]
    return [image_edit(app, page, image, first=n == 0) for n, image in enumerate(images)]


# The theme's 1.5 MB Font Awesome script turns each <i class="fa-..."> into an SVG; its
# stylesheet already draws the same icons from the web font, so the script is dropped.
# Thebe is not used (selfcontained.py drops its script): its stylesheet goes too.
# The search index and its code: the theme's search box (search_as_you_type off) sends the
# reader to search.html, the one page that reads them; elsewhere they were 50 kB (gzip) and
# CPU time taken from the first paint for nothing.
UNUSED_TAGS = ("_static/scripts/fontawesome.js", "_static/sphinx-thebe.css")
SEARCH_TAGS = ("_static/searchtools.js", "_static/language_data.js", "searchindex.js")


def script_edits(page: Page, pagename: str) -> list[tuple[int, int, str]]:
    """Unused scripts and stylesheets left out; the head's scripts deferred (the theme's and
    extensions' scripts act on a parsed page: they need not block the first paint), but for
    documentation_options.js, which an inline script extends, and on the search page, which
    runs its search as it loads."""
    unused = UNUSED_TAGS + (SEARCH_TAGS if pagename != "search" else ())
    head = page.first("head")  # a theme component's template renders no head: all of it counts
    head_end = head.close if head else len(page.text)
    edits = []
    for tag in (e for e in page.elements if e.tag in ("script", "link")):
        url = src_path(tag, "src" if tag.tag == "script" else "href")
        if url and url.endswith(unused):
            edits.append(removal(page.text, tag))
        elif (tag.tag == "script" and url and tag.start < head_end and pagename != "search"
              and not {"defer", "async", "type"} & set(tag.attrs)
              and not url.endswith("documentation_options.js")):
            attrs = list(tag.attrs.items())
            attrs.insert([name for name, _ in attrs].index("src"), ("defer", None))
            edits.append((tag.start, tag.open_end, start_tag("script", dict(attrs))))
    return edits


# axe, serious and critical: the theme's search button is named "Search" while it shows
# "Search Ctrl+K" (label-content-name-mismatch): its content names it; sphinxcontrib-bibtex's
# citation list has role="list" over children that are doc-biblioentry, not listitem
# (aria-required-children): a plain container; myst-nb names a hidden cell's toggle
# "Toggle hidden content" while it shows "Show code cell source": its content names it.
# The theme button says what a click does (_static/theme_behaviour.js), in a native tooltip that
# follows it: the Bootstrap one kept the build's text, and the icons' own titles ("Light",
# "System Settings") named the state instead of the action.
THEME_BUTTON_NAME = {"aria-label": "Light or dark theme", "title": "Light or dark theme"}
# (tag, a class it has or None, (an attribute it has, its value or None for any)) ->
# (its attributes left out, attributes added)
ACCESSIBLE = {
    ("button", "search-button-field", ("aria-label", "Search")): ({"aria-label"}, {}),
    ("button", "theme-switch-button", ("aria-label", "Color mode")):
        ({"aria-label", "data-bs-title", "data-bs-placement", "data-bs-toggle"}, THEME_BUTTON_NAME),
    ("i", "theme-switch", ("title", None)): ({"title"}, {"aria-hidden": "true"}),
    ("summary", None, ("aria-label", "Toggle hidden content")): ({"aria-label"}, {}),
    ("div", "citation-list", ("role", "list")): ({"role"}, {}),
}


def accessible_attrs(element: Element):
    """The attributes ``element`` gets for the audits above, or None to leave it."""
    for (tag, cls, (name, value)), (dropped, added) in ACCESSIBLE.items():
        if (element.tag == tag and (cls is None or cls in element.classes) and name in element.attrs
                and value in (None, element.attrs[name])):
            return {n: v for n, v in element.attrs.items() if n not in dropped} | added
    return None


def accessible_edits(page: Page) -> list[tuple[int, int, str]]:
    return [(e.start, e.open_end, start_tag(e.tag, attrs)) for e in page.elements
            if (attrs := accessible_attrs(e)) is not None]


# Every page renders its sections below the screen lazily (book.css): the first paint lays out
# the top of the page only. A page of at most RENDER_AFTER_LOAD elements (all but chapter 8,
# 14,500 of typeset equations and highlighted code, and the API page, 18,900) then renders the
# rest in idle tasks once it has loaded (lazy_sections.js, inlined after the article), so that
# a settled page is all laid out and tools that read its geometry (Lighthouse's contrast audit,
# axe-core) measure text on its own background. On the two heaviest that costs more main-thread
# time than a phone can spare while the page loads: they stay lazy until the reader scrolls
# (benchmarks/results.json, "lazy_pages": Lighthouse mobile on the two pages as built and with
# the script, interleaved).
LAZY_CLASS = "ac-lazy-sections"
LAZY_SCRIPT = (HERE / "lazy_sections.js").read_text(encoding="utf-8")
RENDER_AFTER_LOAD = 10_000


def lazy_edits(page: Page) -> list[tuple[int, int, str]]:
    """The article (``<article class="bd-article">``) marked as lazily rendered and, on a page
    of at most RENDER_AFTER_LOAD elements, followed by the script that renders the rest."""
    article = next((e for e in page.elements if e.tag == "article" and e.classes == ["bd-article"]), None)
    if article is None:
        return []
    marked = start_tag("article", article.attrs | {"class": f"bd-article {LAZY_CLASS}"})
    edits = [(article.start, article.open_end, marked)]
    if len(page.inside(article)) <= RENDER_AFTER_LOAD:
        edits.append((article.end, article.end, f"\n<script>{LAZY_SCRIPT}</script>"))
    return edits


def math_explorer_edits(page: Page) -> list[tuple[int, int, str]]:
    """``data-mml-node`` and ``data-c`` of the typeset math left out: they serve MathJax's
    in-browser explorer only."""
    edits = []
    for element in (e for e in page.elements if "data-c" in e.attrs or "data-mml-node" in e.attrs):
        tag = page.text[element.start:element.open_end]
        for name in ("data-c", "data-mml-node"):
            if name in element.attrs:
                tag = tag.replace(f' {name}="{element.attrs[name]}"', "", 1)
        edits.append((element.start, element.open_end, tag))
    return edits


def postprocess(app, pagename: str, output: str) -> str:
    """A page as the theme rendered it -> the page as the site serves it."""
    page = Page(typeset(output, pagename))
    edits = (lazy_edits(page) + accessible_edits(page) + image_edits(app, page)
             + script_edits(page, pagename) + math_explorer_edits(page))
    return apply(page.text, edits)


def postprocess_every_page(app):
    """Every HTML page the builder renders goes through ``postprocess`` on its way out."""
    if app.builder.format != "html":
        return
    templates = app.builder.templates
    render = templates.render

    def render_and_postprocess(template, context):
        output = render(template, context)
        return postprocess(app, context.get("pagename", ""), output) if template.endswith(".html") else output

    templates.render = render_and_postprocess


# ---------------------------------------------------------------- landing page, favicon
def write_landing_page_and_favicon(app, exception):
    """``index.html`` is the landing page itself (with its canonical address), not
    jupyter-book's redirect; ``favicon.ico`` is the site's favicon."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    root = app.config.root_doc
    landing = out / f"{root}.html"
    if root != "index" and landing.exists():
        page = Page(landing.read_text(encoding="utf-8"))
        url = html.escape(app.config.html_baseurl.rstrip("/") + f"/{root}.html")
        link = f'<link rel="canonical" href="{url}" />\n'
        head_end = page.first("head").close
        canonical = any(e.tag == "link" and e.attrs.get("rel") == "canonical" for e in page.elements)
        edits = [(head_end, head_end, link)] if app.config.html_baseurl and not canonical else []
        (out / "index.html").write_text(apply(page.text, edits), encoding="utf-8")
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


def derive_site_url(app, config):
    """``html_baseurl`` from the repository's address; launch buttons checked."""
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


def page_urls(text: str) -> list[str]:
    """What a page names: its tags' attribute values and its scripts' text (explorer frames
    are listed in JSON)."""
    page = Page(text)
    return [v for e in page.elements for v in e.attrs.values() if v] + \
        [text[e.open_end:e.close] for e in page.elements if e.tag == "script"]


def named_files(pages: list[list[str]], folder: str) -> set[str]:
    """The files under ``folder/`` that the pages (each a list of ``page_urls``) name, as
    paths relative to it."""
    names = set()
    for urls in pages:
        for url in urls:
            for part in url.split(f"{folder}/")[1:]:  # a srcset names several
                names.add(re.split(r"[\"'#?,\s]", part, maxsplit=1)[0])
    return names


def remove_unused(out: Path) -> None:
    pages = [page_urls(p.read_text(encoding="utf-8")) for p in out.rglob("*.html")
             if p.relative_to(out).parts[0] != "_static"]
    for pattern in UNUSED:
        for path in out.glob(pattern if "/" in pattern else f"**/{pattern}"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    if (out / MATHJAX_FILE).exists() and "tex-svg.js" not in named_files(pages, "mathjax"):
        shutil.rmtree(out / Path(MATHJAX_FILE).parent)  # every page ships its math typeset
    for font in out.glob("_static/vendor/fontawesome/webfonts/*.ttf"):
        if font.with_suffix(".woff2").exists():  # every browser that runs the theme reads WOFF2
            font.unlink()
    sources = out / "_sources"
    if sources.is_dir():  # a page's "download source" link names its source; the chapters' name
        linked = named_files(pages, "_sources")  # their reader notebooks (reader_notebooks.py) instead
        for source in [p for p in sources.rglob("*") if p.is_file()]:
            if source.relative_to(sources).as_posix() not in linked:
                source.unlink()
        for folder in sorted((p for p in sources.rglob("*") if p.is_dir()), reverse=True):
            if not any(folder.iterdir()):
                folder.rmdir()
    frames = out / "_static" / "explorer-frames"
    if frames.is_dir():  # content-addressed: a frame of an earlier build stays behind
        named = named_files(pages, "explorer-frames")
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


# The theme makes every scrollable box a keyboard stop: on load, on resize and on DOM changes
# it reads each code block's and output's scrollWidth. A size read in a section that book.css
# renders lazily (content-visibility: auto) forces the section's layout: on the two heaviest
# pages, which stay lazy (RENDER_AFTER_LOAD), the loop lays the skipped sections out on the main
# thread as the page finishes loading. benchmarks/results.json, "lazy_pages" (Lighthouse mobile,
# the theme's script as shipped and as patched here, interleaved, medians of three runs on
# 2026-12-08): performance 78 against 94 on chapter 8 and 79 against 96 on the API page, total
# blocking time 968 against 238 ms and 403 against 225 ms. No setting of the theme and no
# script of our own keeps its loop (run by the theme's own "load" listener) from reading those
# sizes, so this is the one change made in the theme's script: its loop leaves a box in a
# skipped section alone, and runs again on the browser's own "contentvisibilityautostatechange"
# (a section the reader scrolls to); when lazy_sections.js has rendered them all,
# _static/theme_behaviour.js checks every box.
THEME_SCRIPT = "_static/scripts/pydata-sphinx-theme.js"
TAB_STOPS = ".forEach(e=>{e.tabIndex=e.scrollWidth>e.clientWidth||e.scrollHeight>e.clientHeight?0:-1})"
TAB_STOPS_LAZY = (".forEach(e=>{e.checkVisibility({contentVisibilityAuto:!0})"
                  "&&(e.tabIndex=e.scrollWidth>e.clientWidth||e.scrollHeight>e.clientHeight?0:-1)})")
TAB_STOPS_EVENTS = 'window.addEventListener("resize",t),new MutationObserver(t)'
TAB_STOPS_EVENTS_LAZY = ('window.addEventListener("resize",t),'
                         'document.addEventListener("contentvisibilityautostatechange",t,!0),'
                         'new MutationObserver(t)')


def lazy_tab_stops(out: Path) -> None:
    """The theme's tab-stop loop, copied to ``out``, patched as above; a warning (an error under
    ``-W``) if the theme's code no longer matches. Run twice, it leaves the patched script alone."""
    script = out / THEME_SCRIPT
    if not script.is_file():
        return
    text = script.read_text(encoding="utf-8")
    if TAB_STOPS_LAZY in text and TAB_STOPS_EVENTS_LAZY in text:
        return
    if text.count(TAB_STOPS) != 1 or text.count(TAB_STOPS_EVENTS) != 1:
        logger.warning(f"{THEME_SCRIPT}: the theme's tab-stop loop changed; left as it is (site_pages)",
                       type="site_pages")
        return
    script.chmod(script.stat().st_mode | 0o200)  # copied from the theme's package: maybe read-only
    text = text.replace(TAB_STOPS, TAB_STOPS_LAZY).replace(TAB_STOPS_EVENTS, TAB_STOPS_EVENTS_LAZY)
    script.write_text(text, encoding="utf-8")


def prune_and_share_site_files(app, exception):
    """When every writer is done: the theme's tab-stop loop patched, what no page requests
    left out, every file readable by others."""
    if exception is not None or app.builder.format != "html":
        return
    lazy_tab_stops(Path(app.outdir))
    remove_unused(Path(app.outdir))
    readable_by_all(Path(app.outdir))


def setup(app):
    app.connect("config-inited", derive_site_url)
    app.connect("builder-inited", postprocess_every_page)
    app.connect("html-page-context", describe_page, priority=950)
    app.connect("build-finished", write_landing_page_and_favicon, priority=900)
    app.connect("build-finished", prune_and_share_site_files, priority=999)  # after every writer
    return {"parallel_read_safe": True, "parallel_write_safe": True}
