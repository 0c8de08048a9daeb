"""Chapter 14's in-browser LLM on the website: ``_static/smollm2/`` holds the book's
SmolLM2-135M-Instruct as ONNX with its KV cache (``model.onnx``, the graph, and the GGUF's
own 4- and 8-bit blocks of its matrices, ``blocks-q4_1.bin`` and ``embedding-q8_0.bin``, which
the page decodes to float32 once; ``lens.onnx``, the small graph of the logit lens, reads the
same decoded embedding), its tokenizer and its measured precision
(``attention_core.book.web_llm.export_smollm2``), which the chapter's page loads only when a
reader asks for it (``_web/_static/llm-lab/llm.js``).

The export (a few minutes on a busy machine, most of it ``torch.export`` and measuring
the precision over 1,024 positions of the book's prose) runs once per change of what it
depends on: the files are kept under ``_build/web_llm/<source_hash>/``, the hash of the
GGUF, the code that builds and exports the model and the library versions, not the
chapters' prose (``web_llm.source_hash``). A rebuild with none of them changed copies the cached
files. If the export fails, the build fails, saying why.
"""

from __future__ import annotations

from pathlib import Path

from site_export import cached_export as _cached_export
from site_export import copy_into_site


def cached_export(cache_root: Path) -> Path:
    """The folder under ``cache_root`` holding the export for the current sources,
    exported first if it is not there (older exports are removed)."""
    return _cached_export(cache_root, "web_llm", "export_smollm2", lambda meta, seconds: (
        f"exported chapter 14's SmolLM2 in {seconds:.0f} s: {meta['total_bytes']} bytes, top-1 "
        f"agreement {meta['top1_agreement']:.4f}, max |attention difference| "
        f"{meta['max_abs_diff_attention']:.3g}"))


def on_build_finished(app, exception):
    if exception is None and app.builder.format == "html":
        copy_into_site(app, "web_llm", "chapter 14's in-browser model (attention_core.book.web_llm."
                       "export_smollm2)", cached_export)


def setup(app):
    app.add_config_value("web_llm_path", "_static/smollm2", "html")  # in the site
    app.add_config_value("web_llm_cache", "_build/web_llm", "html")  # under the book's root
    app.connect("build-finished", on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
