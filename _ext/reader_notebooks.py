"""The reader notebooks: what Colab, Binder, a JupyterHub and the download button open.

The chapters are written for the website, in MyST: numbers glued from the page's own
cells, citations, glossary terms, cross-references, exercise and solution directives.
Plain Jupyter shows all of that as raw markup. At the end of each build every notebook
page is written again, for plain Jupyter, into ``<site>/notebooks/<page>.ipynb``:

* ``{glue:text}`key:fmt``` becomes the number the build computed (formatted as on the
  page), and a note under the title says which numbers a reader's own run may change;
* ``{cite:t}``/``{cite:p}`` become author-year text linked to the website's bibliography,
  ``{term}`` and ``{doc}`` links to the website's glossary and pages;
* an exercise becomes a heading ("### Exercise 6.2 (title)"), a solution a folded
  ``<details>`` block, and a gated solution (``solution-start`` ... ``solution-end``,
  with code cells) a heading that JupyterLab opens collapsed; the student edition
  (``make book SOLUTIONS=hide``) leaves solutions out;
* admonitions become block quotes, a ``{raw} html`` block (a page's own script, such as
  chapter 13's in-browser model) a note linking to the page; code cells are the
  chapter's own, unchanged, with the page's hidden inputs collapsed.

A role or directive this module does not know fails the build, naming the page, so no
markup reaches a reader. The launch buttons (Colab, Binder, JupyterHub) and the
download button point to the reader notebook of the page. They are served from the
branch the website is published to (``reader_notebooks_branch``); Binder builds its
environment from the repository's own branch and pulls the notebook with nbgitpuller.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from urllib.parse import quote, urlencode

import nbformat

NOTEBOOKS = "notebooks"  # folder of the reader notebooks in the site
ROLE = re.compile(r"\{([a-z][\w:-]*)\}`([^`]*)`")
FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\s*\{(?P<name>[\w-]+)\}\s*(?P<arg>.*)$")
OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*)$")
TARGET = re.compile(r"^\((?P<label>[\w-]+)\)=\s*$")
ADMONITIONS = {"note": "Note", "warning": "Warning", "tip": "Tip", "important": "Important",
               "caution": "Caution", "attention": "Attention", "hint": "Hint", "seealso": "See also"}
SOURCE_HIDDEN = {"hide-input", "remove-input", "remove-cell"}  # collapsed, as the page hides them
RUN_NOTE = (
    "> **This is the notebook of [{title}]({url}).** The numbers its text quotes from the"
    " cells below are those of the website's build (on a CPU, with the versions the book"
    " pins, torch {torch}). Run it and the cells compute them again: training and random"
    " draws are seeded, so with those versions you get the same numbers. Numbers marked"
    " {mark} are timings or memory measurements, which depend on your machine; other"
    " library versions or a GPU can also change the last digits of trained results."
)
# The performance page measures nothing itself: its cells redraw the figures from the
# benchmark results that `make bench` wrote, so its note says so.
REDRAW_NOTE = (
    "> **This is the notebook of [{title}]({url}).** Its cells measure nothing: they redraw"
    " the figures from `benchmarks/results.json`, the results `make bench` recorded on the"
    " machine each figure names. Run it and you get the same figures; to measure your own"
    " machine, run `make bench` in a checkout of the book and run this notebook there."
)
PAGE_NOTES = {"performance": REDRAW_NOTE}
MEASURED = "<sup>†</sup>"  # after a number glued by a cell tagged ``timing``


class ReaderNotebookError(ValueError):
    """Markup the converter does not know: the build fails, naming the page."""


@dataclass
class Site:
    """What a conversion needs to know about the built website.

    ``glue``: the page's glued outputs (key -> ``text/plain``); ``citations``: bib key ->
    (author-year label, URL); ``terms``: lower-cased glossary term -> URL; ``docs``: page
    name -> (title, URL); ``student``: leave solutions out; ``torch``: the build's version."""

    base_url: str
    glue: dict[str, str] = field(default_factory=dict)
    measured: set[str] = field(default_factory=set)  # glue keys of cells tagged ``timing``
    citations: dict[str, tuple[str, str]] = field(default_factory=dict)
    terms: dict[str, str] = field(default_factory=dict)
    docs: dict[str, tuple[str, str]] = field(default_factory=dict)
    student: bool = False
    torch: str = ""


# ------------------------------------------------------------------ roles
def format_glue(text_plain: str, fmt: str) -> str:
    """``{glue:text}`` formatting, as myst-nb does it: the value of ``text/plain`` with
    ``fmt`` (``"0.9615"`` with ``".2f"`` -> ``"0.96"``)."""
    from myst_nb.core.variables import format_plain_text

    return format_plain_text(text_plain, fmt)


def _split_target(content: str) -> tuple[str | None, str]:
    """``text <target>`` -> (text, target); ``target`` -> (None, target)."""
    match = re.fullmatch(r"(?s)(.*?)\s*<([^<>]+)>", content.strip())
    return (match[1].strip() or None, match[2].strip()) if match else (None, content.strip())


def _resolve_doc(target: str, docname: str) -> str:
    if target.startswith("/"):
        return target.lstrip("/")
    parts = docname.split("/")[:-1] + target.split("/")
    out: list[str] = []
    for part in parts:
        if part == "..":
            out.pop()
        elif part not in ("", "."):
            out.append(part)
    return "/".join(out)


def convert_role(name: str, content: str, site: Site, docname: str) -> str:
    """One MyST role as plain markdown."""
    if name == "glue:text":
        key, _, fmt = content.partition(":")
        if key not in site.glue:
            raise ReaderNotebookError(f"{docname}: nothing was glued as {key!r}")
        return format_glue(site.glue[key], fmt) + (MEASURED if key in site.measured else "")
    if name in ("cite:t", "cite:p", "cite"):
        keys = [k.strip() for k in content.split(",")]
        keys.sort(key=lambda k: site.citations.get(k, ("",))[0])  # the website's order
        missing = [k for k in keys if k not in site.citations]
        if missing:
            raise ReaderNotebookError(f"{docname}: unknown citation(s) {missing}")
        if name == "cite:t":  # Vaswani et al. (2017)
            return "; ".join(f"[{au} ({year})]({url})" for au, year, url in
                             (_author_year(site.citations[k]) for k in keys))
        return "(" + "; ".join(f"[{au}, {year}]({url})" for au, year, url in
                               (_author_year(site.citations[k]) for k in keys)) + ")"
    if name == "term":
        text, target = _split_target(content)
        url = site.terms.get(target.lower())
        if url is None:
            raise ReaderNotebookError(f"{docname}: {target!r} is not a glossary term")
        return f"[{text or target}]({url})"
    if name == "doc":
        text, target = _split_target(content)
        page = _resolve_doc(target, docname)
        if page not in site.docs:
            raise ReaderNotebookError(f"{docname}: no page {page!r} (from {{doc}}`{content}`)")
        title, url = site.docs[page]
        return f"[{text or title}]({url})"
    raise ReaderNotebookError(f"{docname}: the role {{{name}}} has no plain-Jupyter form")


def _author_year(citation: tuple[str, str]) -> tuple[str, str, str]:
    label, url = citation
    authors, _, year = label.rpartition(", ")
    return authors, year, url


def convert_roles(text: str, site: Site, docname: str) -> str:
    return ROLE.sub(lambda m: convert_role(m[1], m[2], site, docname), text)


# ------------------------------------------------------------------ directives
@dataclass
class Directive:
    name: str
    argument: str
    options: dict[str, str]
    body: str


def parse_directive(lines: list[str], start: int) -> tuple[Directive, int]:
    """The directive whose opening fence is ``lines[start]``; returns it and the index
    of the line after its closing fence. Nested fences (code blocks, directives with
    fewer backticks) stay in the body."""
    match = FENCE.match(lines[start])
    fence = match["fence"]
    options, i = {}, start + 1
    while i < len(lines) and (option := OPTION.match(lines[i])):
        options[option["key"]] = option["value"].strip()
        i += 1
    body = []
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped == fence:
            return Directive(match["name"], match["arg"].strip(), options, "\n".join(body).strip()), i + 1
        body.append(lines[i])
        i += 1
    raise ReaderNotebookError(f"the {{{match['name']}}} directive opened by {lines[start]!r} is never closed")


@dataclass
class Exercises:
    """Exercise numbers in a chapter: "6.2" is the chapter's second, as on the website."""

    chapter: int | None
    by_label: dict[str, tuple[str, str]] = field(default_factory=dict)  # label -> (number, title)

    def add(self, directive: Directive) -> tuple[str, str]:
        number = len(self.by_label) + 1
        number_text = f"{self.chapter}.{number}" if self.chapter is not None else str(number)
        entry = (number_text, directive.argument)
        self.by_label[directive.options.get("label", f"#{number}")] = entry
        return entry

    def name(self, label: str, docname: str) -> str:
        if label not in self.by_label:
            raise ReaderNotebookError(f"{docname}: a solution refers to the unknown exercise {label!r}")
        number, title = self.by_label[label]
        return f"Exercise {number}" + (f" ({title})" if title else "")


def convert_markdown(text: str, site: Site, docname: str, exercises: Exercises) -> str:
    """A markdown cell's MyST source as markdown that plain Jupyter renders."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        line = lines[i]
        if TARGET.match(line.strip()):
            i += 1
            continue
        if not FENCE.match(line):
            out.append(line)
            i += 1
            continue
        directive, i = parse_directive(lines, i)
        body = convert_markdown(directive.body, site, docname, exercises)
        if directive.name == "exercise":
            directive.argument = convert_roles(directive.argument, site, docname)
            number, title = exercises.add(directive)
            out += [f"### Exercise {number}" + (f" ({title})" if title else ""), "", body]
        elif directive.name == "solution":
            if not site.student:
                summary = exercises.name(directive.argument, docname)
                out += [f"<details><summary><b>Solution to {summary}</b></summary>", "", body, "",
                        "</details>"]
        elif directive.name in ADMONITIONS or directive.name == "admonition":
            title = (convert_roles(directive.argument, site, docname)
                     or ADMONITIONS.get(directive.name, "Note"))
            # a body that opens with a block (a list, a table, a heading) starts on its own line
            opens_block = re.match(r"\s*([-*+] |\d+[.)] |\||#)", body)
            text = f"**{title}.**\n\n{body}" if opens_block else f"**{title}.** {body}"
            quoted = [f"> {row}" if row else ">" for row in text.split("\n")]
            out += quoted
        elif directive.name == "raw" and directive.argument == "html":
            # a page's own script (chapter 13's in-browser model) runs on the website only
            title, url = site.docs.get(docname, ("this page", site.base_url))
            out += [f"> **On the website.** Here [{title}]({url}) runs an interactive part in the"
                    " browser (no kernel needed); open the page to use it."]
        else:
            raise ReaderNotebookError(
                f"{docname}: the directive {{{directive.name}}} has no plain-Jupyter form")
    return convert_roles("\n".join(out), site, docname)


# ------------------------------------------------------------------ notebooks
def _gate(source: str) -> Directive | None:
    """The gated-solution marker a markdown cell is (``solution-start``/``-end``), if any."""
    lines = source.strip().split("\n")
    match = FENCE.match(lines[0]) if lines else None
    if match and match["name"] in ("solution-start", "solution-end"):
        directive, end = parse_directive(lines, 0)
        if end != len(lines):
            raise ReaderNotebookError(f"a {directive.name} cell holds more than its marker")
        return directive
    return None


def _chapter_number(docname: str) -> int | None:
    match = re.match(r"chapters/(\d+)_", docname)
    return int(match[1]) if match else None


def convert_notebook(nb, site: Site, docname: str):
    """The reader notebook of page ``docname`` (an nbformat notebook, converted in a copy)."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    exercises = Exercises(_chapter_number(docname))
    cells, in_solution, collapsed = [], False, []
    for cell in nb.cells:
        if cell.cell_type == "markdown" and (gate := _gate(cell.source)):
            if gate.name == "solution-start":
                in_solution = True
                if not site.student:  # collapsed in JupyterLab (cell) and in Colab (notebook)
                    heading = f"#### Solution to {exercises.name(gate.argument, docname)}"
                    cells.append(nbformat.v4.new_markdown_cell(heading, id=cell.get("id"), metadata={
                        "jp-MarkdownHeadingCollapsed": True, "id": cell.get("id")}))
                    collapsed.append(cell.get("id"))
            else:
                in_solution = False
            continue
        if in_solution and site.student:
            continue
        if cell.cell_type == "markdown":
            cell.source = convert_markdown(cell.source, site, docname, exercises)
            if not cell.source.strip():  # a solution the student edition leaves out
                continue
        elif cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            if SOURCE_HIDDEN & set(cell.metadata.get("tags", [])):
                cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
        cells.append(cell)
    if in_solution:
        raise ReaderNotebookError(f"{docname}: a solution-start has no solution-end")
    title_at = next((k for k, c in enumerate(cells) if c.cell_type == "markdown"
                     and c.source.lstrip().startswith("# ")), None)
    if title_at is not None:
        title, url = site.docs.get(docname, ("this page", site.base_url))
        note = nbformat.v4.new_markdown_cell(
            PAGE_NOTES.get(docname, RUN_NOTE).format(title=title, url=url, torch=site.torch,
                                                     mark=MEASURED), id="reader-note")
        cells.insert(title_at + 1, note)
    nb.cells = cells
    nb.metadata.pop("mystnb", None)
    if collapsed:
        nb.metadata["colab"] = {"collapsed_sections": collapsed}
    return nb


# ------------------------------------------------------------------ the Sphinx side
def _site(app) -> Site:
    env, base = app.env, app.config.html_baseurl.rstrip("/") + "/"
    docs = {name: (env.titles[name].astext(), f"{base}{name}.html") for name in env.found_docs
            if name in env.titles}
    std = env.get_domain("std")
    terms = {term.lower(): f"{base}{doc}.html#{anchor}"
             for (kind, term), (doc, anchor) in std.objects.items() if kind == "term"}
    citations = {}
    for citation in env.get_domain("cite").citations:
        persons = citation.entry.persons.get("author", [])
        last = [_plain_name(p) for p in persons]
        authors = (last[0] if len(last) == 1 else " and ".join(last) if len(last) == 2
                   else f"{last[0]} et al.")
        year = citation.entry.fields.get("year", "")
        citations[citation.key] = (f"{authors}, {year}",
                                   f"{base}{citation.bibliography_key.docname}.html#{citation.citation_id}")
    return Site(base_url=base, citations=citations, terms=terms, docs=docs,
                student=bool(getattr(app.config, "student_edition", False)),
                torch=version("torch").split("+")[0])


def measured_keys(nb) -> set[str]:
    """The glue keys of the cells tagged ``timing`` (``glue("key", ...)`` in their code)."""
    return {key for cell in nb.cells if cell.cell_type == "code"
            and "timing" in cell.metadata.get("tags", [])
            for key in re.findall(r"""glue\(\s*["'](\w+)["']""", cell.source)}


def _plain_name(person) -> str:
    text = " ".join(person.prelast_names + person.last_names)
    text = re.sub(r"\\[\"'`^~]\{?(\w)\}?", r"\1", text)  # {\"e} -> e: close enough for a label
    text = re.sub(r"\\L\b\s*", "Ł", text)
    return text.replace("{", "").replace("}", "")


def notebook_pages(app) -> list[str]:
    env = app.env
    return sorted(name for name in env.found_docs if str(env.doc2path(name)).endswith(".ipynb"))


def write_reader_notebooks(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    site = _site(app)
    glue_dir = Path(app.outdir).parent / "jupyter_execute"
    for docname in notebook_pages(app):
        glue_file = glue_dir / f"{docname}.glue.json"
        site.glue = ({key: out["data"].get("text/plain", "") for key, out in
                      json.loads(glue_file.read_text()).items()} if glue_file.exists() else {})
        nb = nbformat.read(app.env.doc2path(docname), as_version=4)
        site.measured = measured_keys(nb)
        try:
            reader = convert_notebook(nb, site, docname)
        except ReaderNotebookError as error:
            raise ReaderNotebookError(f"reader notebook of {docname}: {error}") from None
        target = Path(app.outdir) / NOTEBOOKS / f"{docname}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(reader, target)


# ------------------------------------------------------------------ launch buttons
def launch_urls(app, pagename: str) -> dict[str, str]:
    """The reader notebook of ``pagename`` in each place a launch button opens."""
    repo_url = app.config.html_theme_options.get("repository_url", "").rstrip("/")
    org, repo = repo_url.split("/")[-2:]
    branch = app.config.html_theme_options.get("repository_branch", "main")
    pages = app.config.reader_notebooks_branch
    launch = app.config.html_theme_options.get("launch_buttons", {})
    ui = {"classic": "tree", "jupyterlab": "lab/tree"}[launch.get("notebook_interface", "classic")]
    path = f"{app.config.reader_notebooks_prefix}{NOTEBOOKS}/{pagename}.ipynb"
    pull = urlencode({"repo": repo_url, "branch": pages, "urlpath": f"{ui}/{repo}/{path}"}, safe="/")
    urls = {"download": f"{NOTEBOOKS}/{pagename}.ipynb"}
    if launch.get("colab_url"):
        urls["Colab"] = f"{launch['colab_url'].rstrip('/')}/github/{org}/{repo}/blob/{pages}/{path}"
    if launch.get("binderhub_url"):
        urls["Binder"] = (f"{launch['binderhub_url'].rstrip('/')}/v2/gh/{org}/{repo}/{branch}"
                          f"?urlpath={quote('git-pull?' + pull, safe='')}")
    if launch.get("jupyterhub_url"):
        urls["JupyterHub"] = f"{launch['jupyterhub_url'].rstrip('/')}/hub/user-redirect/git-pull?{pull}"
    return urls


def point_buttons_at_reader_notebooks(app, pagename, templatename, context, doctree) -> None:
    if context.get("page_source_suffix") != ".ipynb":
        return
    urls = launch_urls(app, pagename)
    urls["download"] = context["pathto"](urls["download"], 1)

    def visit(buttons):
        for button in buttons:
            visit(button.get("buttons", []))
            if button.get("text") in urls and button.get("url"):
                button["url"] = urls[button["text"]]
            elif button.get("label") == "download-source-button":
                button["url"] = urls["download"]
                button["tooltip"] = "Download the notebook"

    visit(context.get("header_buttons", []))


def setup(app):
    app.add_config_value("reader_notebooks_branch", "gh-pages", "html")
    # where the site sits in that branch: "" for the book, "student/" for the student edition
    app.add_config_value("reader_notebooks_prefix", "", "html")
    app.connect("html-page-context", point_buttons_at_reader_notebooks, priority=900)
    app.connect("build-finished", write_reader_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
