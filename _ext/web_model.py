"""Chapter 13's in-browser model on the website: ``_static/minilm/`` holds the book's
all-MiniLM-L6-v2 as ONNX, its tokenizer and its measured precision
(``attention_core.book.web_model.export_minilm``: ``model.onnx``, ``tokenizer.json``,
``meta.json``), which the chapter's page loads when a reader asks for it.

The export (about 15 s, more on a busy machine) runs once per change of what it depends
on: the files are kept under ``_build/web_model/<source_hash>/``, the hash of the model's
weights and tokenizer, the code that builds and exports it, and the versions of torch,
onnx, onnxscript, onnxruntime and numpy (``web_model.source_hash``). A rebuild with none
of them changed copies the cached files. If the export fails, the build fails, saying why.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)


def cached_export(cache_root: Path) -> Path:
    """The folder under ``cache_root`` holding the export for the current sources,
    exported first if it is not there (older exports are removed)."""
    from attention_core.book import web_model

    key = web_model.source_hash()
    folder = cache_root / key
    if all((folder / name).is_file() for name in web_model.FILES):
        return folder
    partial = cache_root / f"{key}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    start = time.perf_counter()
    meta = web_model.export_minilm(partial, log=lambda message: logger.info(f"[web_model] {message}"))
    for old in cache_root.iterdir():
        if old != partial:
            shutil.rmtree(old, ignore_errors=True)
    partial.rename(folder)
    logger.info(f"[web_model] exported chapter 13's MiniLM in {time.perf_counter() - start:.0f} s: "
                f"{meta['bytes']} bytes ({meta['gzip_bytes']} gzipped), max |attention difference| "
                f"{meta['max_abs_diff_attention']:.3g}")
    return folder


def on_build_finished(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    from attention_core.book import web_model

    cache_root = Path(app.srcdir) / app.config.web_model_cache
    target = Path(app.outdir) / app.config.web_model_path
    try:
        cache_root.mkdir(parents=True, exist_ok=True)
        folder = cached_export(cache_root)
    except Exception as error:
        raise ExtensionError(f"web_model: exporting chapter 13's in-browser model "
                             f"(attention_core.book.web_model.export_minilm) failed: "
                             f"{type(error).__name__}: {error}") from error
    target.mkdir(parents=True, exist_ok=True)
    for directory in (target, target.parent):
        directory.chmod(0o755)
    for name in web_model.FILES:
        shutil.copyfile(folder / name, target / name)
        (target / name).chmod(0o644)


def setup(app):
    app.add_config_value("web_model_path", "_static/minilm", "html")  # in the site
    app.add_config_value("web_model_cache", "_build/web_model", "html")  # under the book's root
    app.connect("build-finished", on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
