"""Chapter 14: the book's SmolLM2-135M-Instruct as files that the chapter's web page runs in
the browser (onnxruntime-web), generating from the reader's own prompt, offline.

:func:`export_smollm2` writes them, in three steps, each in its own module:

1. the graph, traced from the package's own blocks with ONNX Runtime's fused attention and
   norm as the implementations they take (:mod:`~attention_core.book.web_llm_export`), the
   KV cache an input and an output, so the page reads the prompt once (``past`` of length
   0) and then feeds one token a step;
2. the weights as the GGUF stores them, byte for byte
   (:func:`~attention_core.book.web_llm_export.externalise_weights`): every matrix of the 30
   blocks as its Q4_1 blocks, the tied embedding (also the LM head) as its Q8_0 blocks
   (:mod:`~attention_core.models.gguf_blocks`). After the download the page decodes them to
   float32 once (``llm-lab/blocks.js``) and hands them to ONNX Runtime as the graph's
   external data (``weights.f32``, never on the server), so each step runs plain float32
   ``MatMul``s on the package's own float32 weights. A second, small graph, the logit lens
   (:class:`~attention_core.book.web_llm_export.WebLogitLens`: the model's own final norm and
   tied head on each residual stream the first graph returns), reads its embedding from the
   same decoded bytes, so it adds nothing to the download but its few kilobytes;
3. the precision, measured with ONNX Runtime in Python against the float32 package
   (:mod:`~attention_core.book.web_llm_precision`), into ``meta.json``.

Files written (the contract with the page's script ``_web/_static/llm-lab/llm.js``)::

    <out_dir>/model.onnx      the graph; its matrices are external data in weights.f32
                              inputs : input_ids int64 (1, T), past_keys float32 (30, 1, 3, S - T, 64),
                                       past_values float32 (30, 1, 3, S - T, 64); T >= 1, S >= T
                              outputs: logits float32 (1, 49152)  the last position's
                                       present_keys, present_values float32 (30, 1, 3, S, 64)
                                       attentions float32 (30, 9, T, S) [layer, head, query, key]
                                       streams float32 (31, T, 576) the residual stream of the new
                                         positions after the embedding (0) and after block i (i),
                                         before the final norm
    <out_dir>/lens.onnx       the logit lens; its embedding is the same bytes of weights.f32
                              inputs : streams float32 (num_streams, 576), num_streams >= 1
                                       (the page gives a position's 31 streams)
                              outputs: top_ids int64 (num_streams, 5), top_probs float32
                                       (num_streams, 5): each stream through the final norm
                                       and the tied head, the softmax's five most likely
                                       tokens, the most likely first
    <out_dir>/blocks-q4_1.bin the 210 matrices' Q4_1 blocks, one after another
    <out_dir>/embedding-q8_0.bin  the embedding's Q8_0 blocks
    <out_dir>/tokenizer.json  the package's tokenizer (built from the GGUF's vocabulary)
    <out_dir>/meta.json       sizes, precision (top-1 agreement with the float32 package over
                              the book's prose, greedy answers, largest attention difference,
                              the bound the tests hold; the lens' top-1 agreement with the
                              package's logit_lens over the same prose, at every layer of a
                              position and over (position, layer) pairs), chat template pieces,
                              rms_norm_eps, source_hash, "weights": where each initializer's
                              blocks are and where its float32 goes in weights.f32, and "lens":
                              where the lens graph's embedding is in weights.f32

Command line: ``python -m attention_core.book.web_llm OUT_DIR``. Needs ``onnx``,
``onnxscript`` and ``onnxruntime`` (nothing else in the package imports this module).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
from pathlib import Path

from ..models import smollm
from ..models.measure import one_thread
from . import web_llm_export as export
from . import web_llm_precision as precision
from .export_files import files_hash, write_readable

__all__ = ["MAX_BYTES", "MAX_TOTAL_BYTES", "SHIPPED", "FILES", "PRECISION", "source_hash", "export_smollm2",
           "main"]

MAX_BYTES = 95_000_000
"""The most one file may weigh (GitHub Pages refuses files over 100 MB)."""
MAX_TOTAL_BYTES = 100_000_000
"""The most the page may download in all."""
SHIPPED = ("model.onnx", precision.LENS_FILE, *export.BLOCK_FILES.values(), "tokenizer.json")
"""What the page downloads (and ``meta.json``)."""
FILES = (*SHIPPED, "meta.json")
"""What :func:`export_smollm2` writes."""
PRECISION = ("the GGUF's own weights, byte for byte: 4-bit blocks (Q4_1) in the 30 blocks, 8-bit "
             "blocks (Q8_0) in the tied embedding, turned into float32 once in your browser after "
             "the download; float32 activations and KV cache")


def source_hash(gguf_path=None) -> str:
    """A hash of everything the exported files depend on: the GGUF, the modules that build,
    export and measure the model (``book/web_llm*.py``, ``book/export_files.py``,
    ``models/smollm.py``, ``models/gguf_blocks.py``, ``models/llm_probes.py`` for the prose,
    ``models/circuits.py`` for the logit lens, ``nn/``) and the versions of the libraries."""
    path = smollm.gguf_file(smollm.default_gguf_path() if gguf_path is None else gguf_path)
    package = Path(__file__).resolve().parents[1]
    files = [path, *sorted((package / "book").glob("web_llm*.py")), package / "book" / "export_files.py",
             *(package / "models" / name
               for name in ("smollm.py", "gguf_blocks.py", "llm_probes.py", "circuits.py")),
             *sorted((package / "nn").glob("*.py"))]
    return files_hash(files)


def export_smollm2(out_dir, gguf_path=None, log=None) -> dict:
    """Write ``model.onnx``, the blocks, ``tokenizer.json`` and ``meta.json`` (the module
    docstring's contract) into ``out_dir``; return the meta dict. ``log(str)`` is told each
    step (default: nothing). Raises ``ValueError`` if a file exceeds :data:`MAX_BYTES` or all
    of them :data:`MAX_TOTAL_BYTES`."""
    if export.onnx is None:
        raise ImportError("attention_core.book.web_llm needs onnx, onnxscript and onnxruntime")
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a directory path (str or Path), got {out_dir!r}")
    log = log or (lambda message: None)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with one_thread():
        start = time.perf_counter()
        model, tokenizer = smollm.load_smollm2(gguf_path)
        web = export.WebSmolLM(model)
        export.export_onnx(out_dir / "model.onnx", web)
        export.export_lens(out_dir / precision.LENS_FILE, web)
        weights = export.externalise_weights(out_dir / "model.onnx", gguf_path)
        lens = export.externalise_lens(out_dir / precision.LENS_FILE, weights, gguf_path)
        write_readable(out_dir / "meta.json", json.dumps({"weights": weights}).encode())  # read by OrtDecoder
        log(f"exported in {time.perf_counter() - start:.0f} s")
        sizes = _write_tokenizer_and_check_sizes(out_dir, tokenizer)
        meta = _measure(out_dir, model, tokenizer, log)
    meta.update(_model_facts(model.config, tokenizer), bytes=sizes, total_bytes=sum(sizes.values()),
                gzip_bytes={name: len(gzip.compress((out_dir / name).read_bytes(), 6)) for name in sizes},
                source_hash=source_hash(gguf_path), weights=weights, lens=lens)
    write_readable(out_dir / "meta.json", json.dumps(meta, indent=1).encode())
    return meta


def _write_tokenizer_and_check_sizes(out_dir: Path, tokenizer) -> dict[str, int]:
    """Write ``tokenizer.json``; the shipped files' sizes, checked against the budgets."""
    write_readable(out_dir / "tokenizer.json", tokenizer.to_str().encode())
    sizes = {name: (out_dir / name).stat().st_size for name in SHIPPED}
    if max(sizes.values()) > MAX_BYTES or sum(sizes.values()) > MAX_TOTAL_BYTES:
        raise ValueError(f"the files weigh {sizes}: over {MAX_BYTES} each or {MAX_TOTAL_BYTES} in all")
    return sizes


def _measure(out_dir: Path, model: smollm.SmolLM, tokenizer, log) -> dict:
    """The precision figures of ``meta.json``, measured on the files in ``out_dir``."""
    decoder = precision.OrtDecoder(out_dir / "model.onnx", model.config, lens=True)
    start = time.perf_counter()
    prose = precision.prose_agreement(decoder, model, tokenizer)
    log(f"prose: top-1 agreement {prose['top1_agreement']:.4f} over {prose['prose_positions']} positions, "
        f"max |attention difference| {prose['max_abs_diff_attention']:.3g}; logit lens top-1 equal at "
        f"every layer at {prose['lens_top1_agreement']:.4f} of them, "
        f"{prose['lens_top1_agreement_pairs']:.5f} of (position, layer) pairs "
        f"({time.perf_counter() - start:.0f} s)")
    return {"precision": PRECISION, **prose, "lens_positions": prose["prose_positions"],
            "lens_top_k": export.LENS_TOP_K, "tolerance": precision.ATTENTION_BOUND,
            "greedy_equal": precision.greedy_equal(decoder, model, tokenizer),
            "greedy_prompts": len(precision.PROMPTS), "greedy_tokens": precision.GREEDY_TOKENS}


def _model_facts(c: smollm.SmolLMConfig, tokenizer) -> dict:
    """The sizes, special ids and chat pieces the page needs."""
    return {"num_layers": c.num_layers, "num_heads": c.num_heads, "embed_dim": c.embed_dim,
            "rms_norm_eps": c.rms_norm_eps, "num_kv_heads": c.num_kv_heads,
            "head_dim": c.head_dim, "vocab_size": c.vocab_size, "bos_token_id": c.bos_token_id,
            "eos_token_id": c.eos_token_id, "im_end_id": tokenizer.token_to_id("<|im_end|>"),
            "system_prompt": c.system_prompt, "chat_example": smollm.chat_text(
                [{"role": "user", "content": "PROMPT"}], system_prompt=c.system_prompt)}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m attention_core.book.web_llm OUT_DIR", file=sys.stderr)
        return 2
    meta = export_smollm2(argv[0], log=print)
    skip = ("system_prompt", "chat_example", "weights")
    print(json.dumps({k: v for k, v in meta.items() if k not in skip}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
