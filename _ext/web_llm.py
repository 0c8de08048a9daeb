"""Chapter 14's in-browser LLM on the website: ``_static/smollm2/`` holds the book's
SmolLM2-135M-Instruct as ONNX with its KV cache (``model.onnx`` and its external data
``embedding.data``), its tokenizer and its measured precision
(``attention_core.book.web_llm.export_smollm2``), which the chapter's page loads only when a
reader asks for it (``_web/_static/llm-lab/llm.js``).

The export (about ten minutes on a busy machine, most of it ``torch.export`` and measuring
the precision over 1,024 positions of the book's prose) runs once per change of what it
depends on: the files are kept under ``_build/web_llm/<source_hash>/``, the hash of the
GGUF, the code that builds and exports the model, the chapters' prose and the library
versions (``web_llm.source_hash``). A rebuild with none of them changed copies the cached
files. If the export fails, the build fails, saying why.
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
    from attention_core.book import web_llm

    key = web_llm.source_hash()
    folder = cache_root / key
    if all((folder / name).is_file() for name in web_llm.FILES):
        return folder
    partial = cache_root / f"{key}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    start = time.perf_counter()
    meta = web_llm.export_smollm2(partial, log=lambda message: logger.info(f"[web_llm] {message}"))
    for old in cache_root.iterdir():
        if old != partial:
            shutil.rmtree(old, ignore_errors=True)
    partial.rename(folder)
    logger.info(f"[web_llm] exported chapter 14's SmolLM2 in {time.perf_counter() - start:.0f} s: "
                f"{meta['total_bytes']} bytes, top-1 agreement {meta['top1_agreement']:.4f}, "
                f"max |attention difference| {meta['max_abs_diff_attention']:.3g}")
    return folder


def on_build_finished(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    from attention_core.book import web_llm

    cache_root = Path(app.srcdir) / app.config.web_llm_cache
    target = Path(app.outdir) / app.config.web_llm_path
    try:
        cache_root.mkdir(parents=True, exist_ok=True)
        folder = cached_export(cache_root)
    except Exception as error:
        raise ExtensionError(f"web_llm: exporting chapter 14's in-browser model "
                             f"(attention_core.book.web_llm.export_smollm2) failed: "
                             f"{type(error).__name__}: {error}") from error
    target.mkdir(parents=True, exist_ok=True)
    for directory in (target, target.parent):
        directory.chmod(0o755)
    for name in web_llm.FILES:
        shutil.copyfile(folder / name, target / name)
        (target / name).chmod(0o644)


def setup(app):
    app.add_config_value("web_llm_path", "_static/smollm2", "html")  # in the site
    app.add_config_value("web_llm_cache", "_build/web_llm", "html")  # under the book's root
    app.connect("build-finished", on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
