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

from pathlib import Path

from site_export import cached_export as _cached_export
from site_export import copy_into_site


def cached_export(cache_root: Path) -> Path:
    """The folder under ``cache_root`` holding the export for the current sources,
    exported first if it is not there (older exports are removed)."""
    return _cached_export(cache_root, "web_model", "export_minilm", lambda meta, seconds: (
        f"exported chapter 13's MiniLM in {seconds:.0f} s: {meta['bytes']} bytes "
        f"({meta['gzip_bytes']} gzipped), max |attention difference| {meta['max_abs_diff_attention']:.3g}"))


def on_build_finished(app, exception):
    if exception is None and app.builder.format == "html":
        copy_into_site(app, "web_model", "chapter 13's in-browser model (attention_core.book.web_model."
                       "export_minilm)", cached_export)


def setup(app):
    app.add_config_value("web_model_path", "_static/minilm", "html")  # in the site
    app.add_config_value("web_model_cache", "_build/web_model", "html")  # under the book's root
    app.connect("build-finished", on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
