"""Chapter 14: the book's SmolLM2-135M-Instruct as an ONNX graph, with its weights shipped as
the GGUF's own blocks (:mod:`attention_core.book.web_llm` puts the files together).

**One forward.** The graph is traced from the package's own code:
:meth:`SmolLM.run_blocks <attention_core.models.smollm.SmolLM.run_blocks>`, so every
:class:`~attention_core.nn.block.TransformerBlock` and
:class:`~attention_core.nn.multihead.MultiHeadAttention` forward, RoPE included
(``MultiHeadAttention``'s rotation, its tables built in the graph). Two pieces enter as
implementations the blocks take, each a custom op whose PyTorch code is the package's:

* the attention kernel, :data:`ORT_ATTENTION` (set by ``MultiHeadAttention.set_attention``):
  in PyTorch :func:`~attention_core.nn.heads.grouped_query_attention`, causal; in ONNX one
  ONNX Runtime ``GroupQueryAttention`` node (its rotation off: the keys come rotated);
* the norms, RMSNorm modules whose forward is the op ``rms_norm``: in PyTorch
  :func:`~attention_core.nn.norms.rms_norm`; in ONNX one ``SimplifiedLayerNormalization``.

The cache is the graph's input and output: :class:`TensorKVCache` is a head cache whose past
is a tensor and whose ``append`` concatenates. Only the ends are the export's own: the
embedding is kept once, transposed ``(D, vocab_size)``, so a token's embedding is a column
and the LM head one ``MatMul`` on the last position.

**The logit lens** is a second, small graph (:class:`WebLogitLens`): the model's own head
(:meth:`WebSmolLM.head`: the final norm, then the transposed embedding) applied to the
residual streams the first graph returns at every step, with the top guesses taken in the
graph. Its embedding is the first graph's, in the same place of ``weights.f32``
(:func:`externalise_lens`), so the page hands both graphs the same decoded bytes.

The graph computes in float32 with float32 weights; :func:`externalise_weights` points each
matrix at ``weights.f32`` (never shipped) and writes the GGUF's blocks beside the graph,
which the page decodes to float32 once (``llm-lab/blocks.js``, as :func:`decode_weights`).

Shape legend: T new tokens, S keys (the S - T cached ones and the T new ones), D 576, H 9,
Hkv 3, E 64.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
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
    import onnxscript
    from onnx.defs import OpSchema
    from onnxscript import opset20
except ImportError:  # Colab and Binder have no onnx: only the export refuses to run
    onnx = onnxscript = OpSchema = opset20 = None

from ..models import smollm
from ..models.gguf_blocks import BLOCK, BLOCK_BYTES, decode_blocks
from ..nn import heads, norms
from ..nn._checks import check_tensor
from ..nn.attention_functions import AttentionKernel
from ..nn.kv_cache import HeadCache
from .export_files import write_readable

__all__ = [
    "INPUTS", "OUTPUTS", "ORT_ATTENTION", "TensorKVCache", "WebSmolLM", "empty_past", "export_onnx",
    "LENS_INPUTS", "LENS_OUTPUTS", "LENS_TOP_K", "WebLogitLens", "export_lens",
    "WEIGHTS", "BLOCK_FILES", "shipped_matrices", "externalise_weights", "externalise_lens",
    "decode_weights", "load_decoded",
]

INPUTS = ("input_ids", "past_keys", "past_values")
OUTPUTS = ("logits", "present_keys", "present_values", "attentions", "streams")
LENS_INPUTS = ("streams",)
LENS_OUTPUTS = ("top_ids", "top_probs")
LENS_TOP_K = 5
"""How many guesses the lens graph returns for each stream."""


# -- two custom ops: the package's code in PyTorch, one ONNX Runtime node each in ONNX -------

def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return norms.rms_norm(x, weight, eps)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int,
               num_kv_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    out, weights = heads.grouped_query_attention(q, k, v, is_causal=True)  # (1, H, T, E), (1, H, T, S)
    return out.contiguous(), weights.contiguous()


@functools.cache
def _ops():
    """``torch.ops.web_llm``, its two ops defined on the first call (not at import; a second
    import of this module finds them defined)."""
    namespace = torch.ops.web_llm
    if not hasattr(namespace, "attention"):
        norm = torch.library.custom_op("web_llm::rms_norm", _rms_norm, mutates_args=())
        norm.register_fake(lambda x, weight, eps: torch.empty_like(x))
        attention = torch.library.custom_op("web_llm::attention", _attention, mutates_args=())
        attention.register_fake(lambda q, k, v, num_heads, num_kv_heads: (
            torch.empty_like(q), q.new_empty(q.size(0), q.size(1), q.size(2), k.size(2))))
    return namespace


def _ort_attention(query, key, value, is_causal=False) -> tuple[torch.Tensor, torch.Tensor]:
    """``query (1, H, T, E)`` over ``key``, ``value (1, Hkv, S, E)`` (rotated, the cache's
    keys first), causal -> ``(output (1, H, T, E), weights (1, H, T, S))``."""
    if is_causal is not True:
        raise ValueError(f"ORT_ATTENTION is a decoder's: is_causal must be True, got {is_causal!r}")
    return _ops().attention(query, key, value, query.size(1), key.size(1))


ORT_ATTENTION = AttentionKernel(
    "onnxruntime_gqa", _ort_attention, shared_kv_heads=True,
    refuses=(("attn_mask", "GroupQueryAttention masks by causality and the lengths it is given"),
             ("scale", "GroupQueryAttention scales by 1/sqrt(E), as SmolLM does")))
"""The attention kernel of the exported graph: the package's causal
:func:`~attention_core.nn.heads.grouped_query_attention` in PyTorch, ONNX Runtime's
``GroupQueryAttention`` in ONNX (returning the weights, ``qk_output=2``)."""


class _FusedRMSNorm(norms.RMSNorm):
    """An :class:`~attention_core.nn.norms.RMSNorm` (the same weight) computed by the op
    ``rms_norm``: one ``SimplifiedLayerNormalization`` node in ONNX."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ops().rms_norm(x, self.weight, self.eps)

    @classmethod
    def of(cls, norm: norms.RMSNorm) -> _FusedRMSNorm:
        fused = cls(norm.weight.numel(), norm.eps, device="meta")
        fused.weight = norm.weight
        return fused


def _contrib_op(name: str, inputs: list[str], outputs: list[str], attributes: dict):
    """An ``onnxscript`` op of ONNX Runtime's ``com.microsoft`` domain, described by a schema of
    its own (onnx's registry is left alone); inputs ending ``:i`` are int32, those after the
    second optional."""
    attr, option = OpSchema.AttrType, OpSchema.FormalParameterOption
    schema = OpSchema(
        name, "com.microsoft", 1,
        inputs=[OpSchema.FormalParameter(n.split(":")[0], "tensor(int32)" if n.endswith(":i") else "T",
                                         param_option=option.Single if i < 2 else option.Optional)
                for i, n in enumerate(inputs)],
        outputs=[OpSchema.FormalParameter(n, "T") for n in outputs],
        type_constraints=[("T", ["tensor(float)"], "float32")],
        attributes=[OpSchema.Attribute(a, getattr(attr, t), "") for a, t in attributes.items()])
    return onnxscript.values.Op(onnxscript.values.Opset("com.microsoft", 1), name, schema)


def _translations() -> dict:
    """The custom ops' ONNX: ONNX Runtime's contrib ops (``SimplifiedLayerNormalization`` is
    written in ``com.microsoft`` and moved to ONNX's domain, where ONNX Runtime registers it,
    by :func:`export_onnx`)."""
    op = opset20
    simplified_norm = _contrib_op("SimplifiedLayerNormalization", ["X", "scale"], ["Y"],
                                  {"axis": "INT", "epsilon": "FLOAT", "stash_type": "INT"})
    gqa = _contrib_op("GroupQueryAttention", ["query", "key", "value", "past_key", "past_value",
                                              "seqlens_k:i", "total_sequence_length:i"],
                      ["output", "present_key", "present_value", "output_qk"],
                      {"num_heads": "INT", "kv_num_heads": "INT", "qk_output": "INT"})

    def rms_norm(x, weight, eps: float):
        return simplified_norm(x, weight, axis=-1, epsilon=eps, stash_type=1)

    def attention(q, k, v, num_heads: int, num_kv_heads: int):
        T, S = op.Shape(q, start=2, end=3), op.Shape(k, start=2, end=3)  # (1,) int64 each
        P, axis = op.Sub(S, T), op.Constant(value_ints=[2])  # P = S - T cached keys

        def tokens(x):  # (1, h, T, E) -> (1, T, h * E): GroupQueryAttention's layout
            return op.Reshape(op.Transpose(x, perm=[0, 2, 1, 3]), op.Constant(value_ints=[0, 0, -1]))

        start = op.Constant(value_ints=[0])
        out, _, _, weights = gqa(
            tokens(q), tokens(op.Slice(k, P, S, axis)), tokens(op.Slice(v, P, S, axis)),
            op.Slice(k, start, P, axis), op.Slice(v, start, P, axis),
            op.Cast(op.Sub(S, op.Constant(value_ints=[1])), to=onnx.TensorProto.INT32),  # seqlens_k
            op.Cast(op.Squeeze(S), to=onnx.TensorProto.INT32),  # total_sequence_length
            num_heads=num_heads, kv_num_heads=num_kv_heads, qk_output=2, _outputs=4)
        shape = op.Concat(op.Constant(value_ints=[1]), T, op.Constant(value_ints=[num_heads, -1]), axis=0)
        return op.Transpose(op.Reshape(out, shape), perm=[0, 2, 1, 3]), weights  # (1, H, T, E), (1, H, T, S)

    ops = _ops()
    return {ops.rms_norm.default: rms_norm, ops.attention.default: attention}


class TensorKVCache(HeadCache):
    """A head cache whose past is a tensor, ``keys``, ``values (B, Hkv, S - T, E)`` (an input of the
    exported graph): :meth:`append` concatenates, so afterwards ``keys`` and ``values`` are
    the present ``(B, Hkv, S, E)`` (the graph's outputs)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor):
        check_tensor("keys", keys, min_dim=4)
        check_tensor("values", values, min_dim=4)
        if keys.dim() != 4 or values.shape != keys.shape:
            raise ValueError(f"keys and values must be (B, Hkv, S - T, E) of one shape, got "
                             f"{tuple(keys.shape)} and {tuple(values.shape)}")
        self.keys, self.values = keys, values

    @property
    def length(self) -> int:
        return self.keys.size(2)

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.keys, self.values = torch.cat((self.keys, k), 2), torch.cat((self.values, v), 2)
        return self.keys, self.values

    def nbytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes

    def reset(self) -> None:
        self.keys, self.values = self.keys[:, :, :0], self.values[:, :, :0]


class WebSmolLM(nn.Module):
    """The decoder as the page runs it: ``forward(input_ids (1, T), past_keys, past_values
    (num_layers, 1, Hkv, S - T, E))`` -> ``(logits (1, vocab_size) of the last position,
    present_keys, present_values (num_layers, 1, Hkv, S, E), attentions (num_layers, H, T, S),
    streams (num_layers + 1, T, D))``. ``streams`` is the residual stream of the new positions
    after the embedding (index 0) and after block ``i`` (index ``i``), before the final norm
    (:meth:`SmolLM.run_blocks <attention_core.models.smollm.SmolLM.run_blocks>`'s
    ``output_streams``): what the logit lens reads (:class:`WebLogitLens`).

    ``model``'s own blocks run it (:meth:`SmolLM.run_blocks
    <attention_core.models.smollm.SmolLM.run_blocks>`), on a copy of the module tree that
    shares ``model``'s weights, with :data:`ORT_ATTENTION` as the attention and the norms as
    the op ``rms_norm``; ``model`` itself is left as it is. ``SmolLM``'s id checks read the
    ids' values, which a traced graph cannot: the page checks its input itself."""

    def __init__(self, model: smollm.SmolLM):
        super().__init__()
        if not isinstance(model, smollm.SmolLM):
            raise TypeError(f"model must be a SmolLM (load_smollm2), got {type(model).__name__}")
        with torch.device("meta"):
            self.model = smollm.SmolLM(model.config)
        self.model.load_state_dict(model.state_dict(), assign=True)  # the same tensors: no copy
        for layer in self.model.layers:
            layer.norm1, layer.norm2 = _FusedRMSNorm.of(layer.norm1), _FusedRMSNorm.of(layer.norm2)
            layer.attn.set_attention(ORT_ATTENTION)
        self.model.norm = _FusedRMSNorm.of(self.model.norm)
        embedding_t = model.embed_tokens.weight.detach().T.contiguous()  # (D, vocab_size)
        self.embedding_t = nn.Parameter(embedding_t, requires_grad=False)
        self.train(model.training)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """``x (..., D)`` -> ``(..., vocab_size)``: the final norm, then the tied LM head (one
        ``MatMul`` by the transposed embedding)."""
        return self.model.norm(x) @ self.embedding_t

    def forward(self, input_ids, past_keys, past_values):
        x = torch.index_select(self.embedding_t, 1, input_ids[0]).T[None]  # (1, T, D): columns
        caches = [TensorKVCache(k, v) for k, v in zip(past_keys, past_values)]
        # (1, T, D), per layer (1, H, T, S), num_layers + 1 streams (1, T, D)
        x, attentions, streams = self.model.run_blocks(x, caches, output_streams=True)
        logits = self.head(x[:, -1])  # (1, D) -> (1, vocab_size)
        return (logits, torch.stack([c.keys for c in caches]), torch.stack([c.values for c in caches]),
                torch.stack(attentions)[:, 0], torch.stack(streams)[:, 0])


class WebLogitLens(nn.Module):
    """The logit lens as the page runs it (nostalgebraist, 2020): ``forward(streams
    (num_streams, D))`` -> ``(top_ids (num_streams, k) int64, top_probs (num_streams, k))``,
    each stream read as if the model ended there.
    Each row goes through ``web``'s own head (:meth:`WebSmolLM.head`: the final RMSNorm, then
    the tied embedding); the softmax over the vocabulary gives the ``k`` most likely next
    tokens, most likely first, with their probabilities. On one position's
    ``num_layers + 1`` streams (:class:`WebSmolLM`'s ``streams``) its top ids are the top ids of
    :func:`~attention_core.models.circuits.logit_lens` at that position. Shares ``web``'s
    weights."""

    def __init__(self, web: WebSmolLM, k: int = LENS_TOP_K):
        super().__init__()
        if not isinstance(web, WebSmolLM):
            raise TypeError(f"web must be a WebSmolLM, got {type(web).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= web.model.config.vocab_size:
            raise ValueError(f"k must be an int from 1 to the vocabulary size, got {k!r}")
        self.web, self.k = web, k

    def forward(self, streams: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.web.head(streams)  # (num_streams, D) -> (num_streams, vocab_size)
        top, ids = torch.topk(logits, self.k, dim=-1)  # (num_streams, k) each, the largest first
        return ids, torch.exp(top - torch.logsumexp(logits, dim=-1, keepdim=True))


def empty_past(config: smollm.SmolLMConfig | None = None) -> torch.Tensor:
    """The cache before the prompt: ``(num_layers, 1, Hkv, 0, E)`` (default: SmolLM2-135M's sizes)."""
    config = smollm.SmolLMConfig() if config is None else config
    if not isinstance(config, smollm.SmolLMConfig):
        raise TypeError(f"config must be a SmolLMConfig or None, got {type(config).__name__}")
    return torch.zeros(config.num_layers, 1, config.num_kv_heads, 0, config.head_dim)


def export_onnx(path, web: WebSmolLM) -> Path:
    """Export ``web`` to the ONNX file ``path`` (its weights in ``path`` + ``.data``), with
    T and the cache's length dynamic."""
    if not isinstance(web, WebSmolLM):
        raise TypeError(f"web must be a WebSmolLM, got {type(web).__name__}")
    path = Path(_check_path("path", path))
    c = web.model.config
    ids = torch.tensor([[1, 2, 3]])
    past = torch.zeros(c.num_layers, 1, c.num_kv_heads, 2, c.head_dim)
    T = torch.export.Dim("T", min=1, max=c.context_length)
    P = torch.export.Dim("P", min=0, max=c.context_length)
    dims = {"input_ids": {1: T}, "past_keys": {3: P}, "past_values": {3: P}}
    with warnings.catch_warnings():  # the exporter warns of what it does not need (torchvision)
        warnings.simplefilter("ignore")
        program = torch.onnx.export(web.eval(), (ids, past, past.clone()), dynamo=True, verbose=False,
                                    input_names=list(INPUTS), output_names=list(OUTPUTS),
                                    dynamic_shapes=dims, optimize=True, external_data=True,
                                    custom_translation_table=_translations())
    _save(program, path, OUTPUTS)
    return path


def export_lens(path, web: WebSmolLM) -> Path:
    """Export :class:`WebLogitLens` of ``web`` to the ONNX file ``path`` (its weights in
    ``path`` + ``.data``), with the number of streams dynamic: ``streams (num_streams, D)`` ->
    ``top_ids (num_streams, LENS_TOP_K)`` int64, ``top_probs (num_streams, LENS_TOP_K)``."""
    if not isinstance(web, WebSmolLM):
        raise TypeError(f"web must be a WebSmolLM, got {type(web).__name__}")
    path = Path(_check_path("path", path))
    c = web.model.config
    N = torch.export.Dim("N", min=1, max=4096)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(WebLogitLens(web.eval()).eval(), (torch.zeros(3, c.embed_dim),),
                                    dynamo=True, verbose=False, input_names=list(LENS_INPUTS),
                                    output_names=list(LENS_OUTPUTS), dynamic_shapes={"streams": {0: N}},
                                    optimize=True, external_data=True,
                                    custom_translation_table=_translations())
    _save(program, path, LENS_OUTPUTS)
    return path


def _save(program, path: Path, outputs) -> None:
    """Save an exported ``program`` to ``path``, its weights in ``path`` + ``.data``, with the
    norm in ONNX's domain and the names ``outputs`` free for the graph's outputs."""
    _free_output_names(program.model.graph, outputs)
    for node in program.model.graph:  # ONNX Runtime has SimplifiedLayerNormalization in ONNX's domain
        if node.op_type == "SimplifiedLayerNormalization":
            node.domain = ""
    program.save(str(path), external_data=True)


def _free_output_names(graph, names) -> None:
    outputs = {id(value) for value in graph.outputs}
    for node in graph:
        for value in node.outputs:
            if value.name in names and id(value) not in outputs:
                value.name = f"{value.name}_inner"


# -- the weights: the GGUF's blocks shipped, float32 made on the page --------------------------

WEIGHTS = "weights.f32"
"""The float32 weights ``model.onnx`` names as its external data. Never shipped: the page
builds it in memory from the blocks after the download (``llm-lab/blocks.js``), as
:func:`decode_weights` does in Python."""
BLOCK_FILES = {"Q4_1": "blocks-q4_1.bin", "Q8_0": "embedding-q8_0.bin"}
"""The shipped blocks, byte for byte the GGUF's: the 30 blocks' matrices (Q4_1) and the tied
embedding (Q8_0)."""


def shipped_matrices(names) -> list[str]:
    """The GGUF tensors among ``names`` that :data:`BLOCK_FILES` ship: the 30 blocks' seven
    matrices and the embedding (the norms are small and stay inside ``model.onnx``)."""
    if isinstance(names, (str, bytes)) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"names must be a collection of tensor names (str), got {names!r}")
    kinds = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
    pattern = rf"blk\.\d+\.({'|'.join(kinds)})\.weight"
    return [n for n in names if n == "token_embd.weight" or re.fullmatch(pattern, n)]


def _gguf_blocks(tensor) -> tuple[str, np.ndarray, int, int]:
    """``(kind, raw bytes (rows, nblk * block bytes), rows, cols)`` of a GGUF tensor."""
    kind = tensor.tensor_type.name
    if kind not in BLOCK_FILES:
        raise ValueError(f"{tensor.name} is {kind}: expected {' or '.join(BLOCK_FILES)}")
    raw = np.ascontiguousarray(tensor.data, dtype=np.uint8)
    return kind, raw, raw.shape[0], raw.shape[1] // BLOCK_BYTES[kind] * BLOCK


def externalise_weights(path, gguf_path=None) -> dict:
    """Rewrite the exported ONNX file ``path`` so that every matrix of the GGUF
    (:func:`shipped_matrices`) is external data in :data:`WEIGHTS`, and write the GGUF's
    blocks of those matrices beside it (:data:`BLOCK_FILES`, each tensor once). The exporter
    names few initializers after the module, so each is found by its content: it must equal,
    bit for bit, a GGUF matrix decoded (:func:`~attention_core.models.gguf_blocks.decode_blocks`)
    or its transpose, and every GGUF matrix must be found. Returns the manifest ``meta.json``
    keeps as ``"weights"``: ``{"file", "bytes", "tensors": [{"name", "source", "file", "type",
    "offset", "length", "rows", "cols", "transposed", "f32_offset"}]}``; ``rows`` and ``cols``
    are the GGUF's (blocks along a row), the initializer is ``(cols, rows)`` when ``transposed``."""
    path = Path(_check_path("path", path))
    gguf_file = smollm.gguf_file(smollm.default_gguf_path() if gguf_path is None else gguf_path)
    tensors = {t.name: t for t in gguf.GGUFReader(gguf_file).tensors}
    by_content: dict[bytes, tuple[str, bool]] = {}  # sha256 of float32 bytes -> (source, transposed)
    for name in shipped_matrices(tensors):
        weight = decode_blocks(*_gguf_blocks(tensors[name]))
        for transposed, array in ((False, weight), (True, weight.T)):
            by_content[hashlib.sha256(np.ascontiguousarray(array).tobytes()).digest()] = (name, transposed)
    model = onnx.load(str(path))  # with its external data
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
        kind, raw, rows, cols = _gguf_blocks(tensors[source])
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
    _write_graph(path, model)
    for kind, name in BLOCK_FILES.items():
        write_readable(path.parent / name, bytes(blobs[kind]))
    return {"file": WEIGHTS, "bytes": f32_offset, "tensors": entries}


def externalise_lens(path, manifest: dict, gguf_path=None) -> dict:
    """Rewrite the exported lens graph ``path`` (:func:`export_lens`) so that its embedding
    (the transposed ``token_embd.weight``, found by its content as :func:`externalise_weights`
    finds it) is external data at the place ``manifest`` (``meta.json``'s ``"weights"``) gives
    it in :data:`WEIGHTS`: the page hands both graphs the same decoded bytes. Returns
    ``{"file", "tensors": [{"name", "source", "f32_offset", "length"}]}``."""
    path = Path(_check_path("path", path))
    _check_manifest(manifest)
    gguf_file = smollm.gguf_file(smollm.default_gguf_path() if gguf_path is None else gguf_path)
    tensors = {t.name: t for t in gguf.GGUFReader(gguf_file).tensors}
    source = "token_embd.weight"
    entry = next((t for t in manifest["tensors"] if t["source"] == source and t["transposed"]), None)
    if entry is None:
        raise ValueError(f"manifest has no transposed {source}: export the decoder first")
    want = decode_blocks(*_gguf_blocks(tensors[source])).T  # (D, vocab_size), as the graphs hold it
    model = onnx.load(str(path))
    found = []
    for init in model.graph.initializer:
        if init.data_type != onnx.TensorProto.FLOAT or len(init.dims) != 2:
            continue
        if not np.array_equal(onnx.numpy_helper.to_array(init), want):
            raise ValueError(f"initializer {init.name} {tuple(init.dims)} is not the transposed {source}")
        length = want.size * 4
        onnx.external_data_helper.set_external_data(init, WEIGHTS, offset=entry["f32_offset"], length=length)
        init.ClearField("raw_data")
        init.data_location = onnx.TensorProto.EXTERNAL
        found.append({"name": init.name, "source": source, "f32_offset": entry["f32_offset"],
                      "length": length})
    if len(found) != 1:
        raise ValueError(f"the lens graph should hold the embedding once, found {len(found)} matrices")
    _write_graph(path, model)
    return {"file": WEIGHTS, "tensors": found}


def _write_graph(path: Path, model) -> None:
    """Write ``model`` to ``path`` without the exporter's notes (stack traces: megabytes; the
    exported program's signature) or its shape annotations, and remove the float32 external
    data it was exported with."""
    for node in model.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    del model.graph.value_info[:]
    del model.graph.metadata_props[:]
    for stale in path.parent.glob(path.name + ".data"):
        stale.unlink()
    write_readable(path, model.SerializeToString())


def decode_weights(folder, manifest: dict) -> np.ndarray:
    """The bytes of :data:`WEIGHTS` (uint8), decoded from the blocks files in ``folder`` as
    the page decodes them, following ``manifest`` (``meta.json``'s ``"weights"``)."""
    folder = Path(_check_path("folder", folder))
    _check_manifest(manifest)
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


def load_decoded(path, manifest: dict | None = None, data: np.ndarray | None = None) -> bytes:
    """The ONNX file ``path`` (the decoder or the lens) with its :data:`WEIGHTS` decoded from
    the blocks beside it and put back inside: a serialized model ONNX Runtime opens from
    memory. ``manifest`` defaults to the ``meta.json`` beside ``path``; ``data``, the bytes of
    :data:`WEIGHTS` (uint8, :func:`decode_weights`), are decoded here if not given."""
    path = Path(_check_path("path", path))
    if data is None:
        if manifest is None:
            manifest = json.loads((path.parent / "meta.json").read_text())["weights"]
        data = decode_weights(path.parent, manifest)
    elif not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 1:
        raise TypeError(f"data must be the bytes of {WEIGHTS} as a 1-D uint8 array, "
                        f"got {type(data).__name__}")
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


def _check_path(name: str, path):
    """``path`` if it is a str or a path, else a ``TypeError`` naming ``name``."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or Path), got {type(path).__name__}")
    return path


def _check_manifest(manifest) -> None:
    """Raise unless ``manifest`` looks like ``meta.json``'s ``"weights"``."""
    if not isinstance(manifest, dict) or not {"bytes", "tensors"} <= set(manifest):
        raise TypeError(f"manifest must be meta.json's \"weights\" dict (with \"bytes\" and \"tensors\"), "
                        f"got {type(manifest).__name__}")
