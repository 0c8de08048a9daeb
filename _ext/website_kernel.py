"""The kernel that executes the chapters for the website, and the rule that a chapter
whose output holds an error fails the build.

A chapter's explorers, figures and quizzes show a static view on the website and live
widgets in a reader's kernel (:mod:`attention_core.book.output`). Nothing in the
environment decides which: the build runs every notebook in a kernel of its own,
``attention-core-website``, whose start-up line is ``output.use("website")`` and which sets
``TQDM_DISABLE=1`` for tqdm (a progress bar's intermediate states would only clutter a page
read after the run; training still prints its one summary line). ``_config.yml`` maps the
notebooks' ``python3`` kernel to it (``nb_kernel_rgx_aliases``), and
``_ext/execute_chapters.py`` applies the same map, so both find the same cache entries.

IPython's display formatters print an exception instead of raising it, so a figure whose
text is cut would leave only a traceback in the page. Every such output is an error of
the build here, naming the page and the error.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError

KERNEL_NAME = "attention-core-website"
START_UP = "from attention_core.book import output; output.use('website')"


def kernelspec() -> dict:
    """The website kernel's ``kernel.json``: this Python's ipykernel, started in the
    website's output mode."""
    return {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                 f"--IPKernelApp.exec_lines={START_UP}"],
        "display_name": "Python 3 (Learn Attention: website build)",
        "language": "python",
        "env": {"TQDM_DISABLE": "1"},
        "metadata": {"debugger": False},
    }


def install_kernelspec(prefix: str = sys.prefix) -> Path:
    """Write the website kernel's spec into ``prefix``'s Jupyter data (the build's virtual
    environment, where jupyter-client looks); rewritten only when it changed."""
    path = Path(prefix) / "share" / "jupyter" / "kernels" / KERNEL_NAME / "kernel.json"
    text = json.dumps(kernelspec(), indent=1)
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


def website_kernel_name(kernel_name: str, aliases: dict[str, str]) -> str:
    """The kernel a notebook asking for ``kernel_name`` runs in, by the first of
    ``aliases`` (regex -> name) that matches it whole, as myst-nb maps it."""
    for pattern, alias in aliases.items():
        if re.fullmatch(pattern, kernel_name):
            return alias
    return kernel_name


def map_kernel(nb, aliases: dict[str, str]):
    """``nb`` with its kernelspec mapped by ``aliases`` (:func:`website_kernel_name`), in
    place, as myst-nb maps it before it looks in the cache; returns ``nb``."""
    spec = nb.metadata.get("kernelspec", {})
    if "name" in spec:
        spec["name"] = website_kernel_name(spec["name"], aliases)
    return nb


def kernel_aliases(root: Path) -> dict[str, str]:
    """The book's kernel map, ``nb_kernel_rgx_aliases`` in ``root/_config.yml``."""
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text())
    return config["sphinx"]["config"].get("nb_kernel_rgx_aliases", {})


def error_outputs_of_notebook(nb) -> list[str]:
    """``"name: value"`` of every error output of an executed notebook ``nb``."""
    return [f"{out.get('ename')}: {out.get('evalue')}" for cell in nb.cells
            for out in cell.get("outputs", []) if out.get("output_type") == "error"]


def error_outputs(doctree) -> list[str]:
    """The first line of every error output (a traceback) myst-nb put in ``doctree``."""
    found = []
    for node in doctree.findall(nodes.literal_block):
        if "traceback" in node.get("classes", []):
            lines = [line for line in node.astext().splitlines() if line.strip()]
            found.append(lines[-1] if lines else "(empty traceback)")
    return found


def fail_on_error_outputs(app, doctree) -> None:
    """A page whose executed output holds an error (a display formatter's exception, which
    IPython prints instead of raising) stops the build, naming the page and the error."""
    errors = error_outputs(doctree)
    if errors:
        raise ExtensionError(f"{app.env.docname}: a cell's output is an error: " + "; ".join(errors))


def _install(app, config) -> None:
    install_kernelspec()


def setup(app):
    app.connect("config-inited", _install)
    app.connect("doctree-read", fail_on_error_outputs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
