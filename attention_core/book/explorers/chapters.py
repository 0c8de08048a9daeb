"""Every chapter: the book's explorers, one per chapter, each docstring naming its
chapter. Each is a ``compute`` (the maths, from :mod:`attention_core.nn` and
:mod:`attention_core.models`), a panel from :mod:`attention_core.book.viz.panels` (the
drawing) and its controls; :class:`~attention_core.book.explorers.engine.Explorer` does
the rest.
"""

from __future__ import annotations

import functools
import html
import math
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import ipywidgets as widgets
import numpy as np
import torch

from ...models.circuits import logit_lens
from ...models.measure import one_thread
from ...models.scaling import random_scores, softmax_saturation
from ...models.seeding import seeded
from ...models.seq2seq import TARGET_VOCAB, encode_batch, translate
from ...models.serving import variants
from ...models.smollm import encode
from ...models.stack_statistics import stack_statistics
from ...models.toy_tasks import head_roles, reverse_and_shift_batch, word_embeddings
from ...nn.flash import online_softmax
from ...nn.functional import scaled_dot_product_attention
from ...nn.kv_cache import kv_cache_bytes
from ...nn.kv_memory import kv_memory_bytes
from ...nn.masks import causal_mask, padding_mask, sliding_window_mask
from ...nn.multihead import MultiHeadAttention
from ...nn.positional import sinusoidal_encoding
from ...nn.sparse import (
    density,
    dilated_window_mask,
    fixed_mask,
    global_mask,
    layers_from,
    random_mask,
    strided_mask,
)
from ..viz import panels
from .engine import Explorer, check_values, preferred

__all__ = [
    "basics_explorer", "scaling_explorer", "self_attention_explorer", "masking_explorer", "heads_explorer",
    "block_statistics", "block_explorer", "kv_sharing_explorer", "kv_memory_explorer", "positional_explorer",
    "tile_states", "tiling_explorer", "SPARSE_PATTERNS", "sparse_mask_explorer", "AlignmentExplorer",
    "alignment_explorer", "pretrained_explorer", "smollm_explorer", "lens_explorer",
]


def _check_nonempty(name: str, values) -> None:
    """Raise unless ``values`` is a non-empty collection (a dict of models, a list of prompts)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, Mapping)) or len(values) == 0:
        raise ValueError(f"{name} must be a non-empty list or dict, got {values!r}")


def _check_tokens(tokens: list, at_least: int) -> None:
    if len(tokens) < at_least:
        raise ValueError(f"tokens must hold at least {at_least} tokens, got {len(tokens)}: {tokens}")


def basics_explorer(tokens: Sequence[str], temperatures=(0.25, 0.5, 1.0, 2.0, 4.0),
                    d_model: int = 16) -> Explorer:
    """Chapter 1: temperature and sequence length over a heatmap and its row entropies.

    Parameter-free self-attention (Q = K = V = X) with the scores divided by
    ``temperature * sqrt(d_model)``: low temperature sharpens each row towards its
    best key, high temperature flattens it.
    """
    tokens = list(tokens)
    temperatures = check_values("temperatures", temperatures)
    _check_tokens(tokens, 2)

    def compute(temperature, tokens_shown):
        x = word_embeddings(tokens[:tokens_shown], d_model)  # (T, D)
        _, weights = scaled_dot_product_attention(x, x, x, scale=1 / (temperature * math.sqrt(d_model)))
        return {"weights": weights, "labels": tokens[:tokens_shown],
                "title": f"τ = {temperature}: each row sums to 1"}

    return Explorer(
        partial(panels.heatmap_entropy_panel, max_tokens=len(tokens)), compute,
        {"temperature": temperatures, "tokens_shown": list(range(2, len(tokens) + 1))},
        initial={"temperature": preferred(temperatures, 1.0), "tokens_shown": len(tokens)},
        labels={"temperature": "temperature τ"}, figsize=(7.2, 3.4), narrow_figsize=(3.5, 6.4),
        chapter="01_attention_basics",
        alt="Attention heatmap of the sentence and the entropy of each row.")


def scaling_explorer(d_ks=(1, 4, 16, 64, 256, 1024), num_keys: int = 16) -> Explorer:
    """Chapter 2: d_k and scaling on/off over the score histogram, one softmax row,
    and the mean row entropy against d_k (over 200 random rows: enough for the curve,
    and quick to show in a live kernel)."""
    d_ks = check_values("d_ks", d_ks, integer=True)
    mean_entropy = {s: [softmax_saturation(d, s, num_keys, num_rows=200)["entropy"] for d in d_ks]
                    for s in (True, False)}

    def compute(d_k, scaling):
        scaled = scaling == "on"
        return {"d_k": d_k, "scaled": scaled, "scores": random_scores(d_k, 2000, num_keys, scaled)}

    return Explorer(
        partial(panels.scaling_panel, d_ks=d_ks, mean_entropy=mean_entropy, num_keys=num_keys),
        compute, {"d_k": d_ks, "scaling": ["on", "off"]}, initial={"d_k": preferred(d_ks, 64)},
        labels={"d_k": "key width d_k", "scaling": "divide by √d_k"},
        figsize=(7.2, 3.1), narrow_figsize=(3.5, 7.0),  # with its controls, within a 844 px tall phone
        chapter="02_scaling",
        alt="Histogram of dot-product scores, one softmax row, and the mean row entropy "
            "against d_k, with and without the 1/sqrt(d_k) scaling.")


def self_attention_explorer(tokens: Sequence[str], d_models=(4, 8, 16, 32, 64), seed: int = 0) -> Explorer:
    """Chapter 3: sequence length and d_model over the heatmap of self-attention with
    random (untrained, seeded) projections W_q, W_k, W_v."""
    tokens = list(tokens)
    d_models = check_values("d_models", d_models, integer=True)
    _check_tokens(tokens, 2)

    def compute(d_model, tokens_shown):
        with seeded(seed):
            attention = MultiHeadAttention(d_model, num_heads=1, bias=False)
        x = word_embeddings(tokens[:tokens_shown], d_model).unsqueeze(0)  # (1, T, D)
        with torch.no_grad():
            _, weights = attention(x)  # (1, 1, T, T)
        return {"weights": weights[0, 0], "labels": tokens[:tokens_shown],
                "title": f"d_model = {d_model}, random W_q, W_k"}

    return Explorer(
        partial(panels.heatmap_entropy_panel, max_tokens=len(tokens)), compute,
        {"d_model": d_models, "tokens_shown": list(range(2, len(tokens) + 1))},
        initial={"d_model": preferred(d_models, 16), "tokens_shown": len(tokens)},
        figsize=(7.2, 3.4), narrow_figsize=(3.5, 6.4),
        chapter="03_self_attention",
        alt="Self-attention heatmap with random projections and the entropy of each row.")


def masking_explorer(tokens: Sequence[str], d_model: int = 16) -> Explorer:
    """Chapter 5: sequence length, padding length and causal on/off over the weights of
    parameter-free self-attention with the combined mask."""
    tokens = list(tokens)
    _check_tokens(tokens, 4)

    def compute(tokens_shown, padding, causal):
        T, real = tokens_shown, max(tokens_shown - padding, 0)
        labels = tokens[:real] + ["<pad>"] * (T - real)
        x = word_embeddings(labels, d_model)  # (T, D)
        attn_mask = padding_mask([real], T)[0]  # (1, T): keys that are real tokens
        if causal == "on":
            attn_mask = attn_mask & causal_mask(T)  # (T, T)
        _, weights = scaled_dot_product_attention(x, x, x, attn_mask=attn_mask)
        return {"weights": weights, "labels": labels,
                "title": f"causal {causal}, {padding} padded key(s)"}

    return Explorer(
        partial(panels.heatmap_entropy_panel, max_tokens=len(tokens)), compute,
        {"tokens_shown": list(range(4, len(tokens) + 1)), "padding": [0, 1, 2, 3],
         "causal": ["off", "on"]},
        initial={"tokens_shown": len(tokens), "padding": 2, "causal": "on"},
        labels={"padding": "padded keys", "causal": "causal mask"},
        figsize=(7.2, 3.4), narrow_figsize=(3.5, 6.4),
        chapter="05_masking",
        alt="Attention weights under a padding mask and an optional causal mask, and the "
            "entropy of each row; masked entries are exactly zero.")


def heads_explorer(models: Mapping[int, Any], seq_len: int, vocab_size: int,
                   num_examples: int = 4, seed: int = 7) -> Explorer:
    """Chapter 4: the number of heads of a trained tiny transformer (one model per head
    count in ``models``) and a test example, over the per-head grid and the mean row
    entropy of each head."""
    _check_nonempty("models", models)
    x, _ = reverse_and_shift_batch(num_examples, seq_len, vocab_size,
                                   torch.Generator().manual_seed(seed))  # (num_examples, T)
    with torch.no_grad():
        weights = {h: m(x)[1][0] for h, m in models.items()}  # (num_examples, H, T, T) per model
    roles = {h: head_roles(w) for h, w in weights.items()}

    def compute(num_heads, example):
        titles = []
        for h, role in enumerate(roles[num_heads]):
            best = max(role, key=role.get)
            titles.append(f"head {h}: {best} {role[best]:.2f}")
        return {"weights": weights[num_heads][example], "head_titles": titles,
                "tokens": [str(t) for t in x[example].tolist()]}

    return Explorer(
        partial(panels.head_grid_panel, max_heads=max(models), seq_len=seq_len), compute,
        {"num_heads": sorted(models), "example": list(range(num_examples))},
        initial={"num_heads": sorted(models)[-1]}, labels={"num_heads": "heads",
                                                           "example": "test example"},
        figsize=(7.2, 4.6), narrow_figsize=(3.5, 6.6),
        chapter="04_multi_head",
        alt="One attention heatmap per head of the trained tiny transformer on a test "
            "sequence, and each head's mean row entropy.")


@functools.cache
def block_statistics(depths: tuple[int, ...], seed: int) -> dict[tuple[str, int], tuple[list, list]]:
    """``(norm, depth) -> (stream, grads)`` of
    :func:`~attention_core.models.stack_statistics.stack_statistics` for every depth and
    both norm placements, computed once per process (a re-run cell shows at once)."""
    with one_thread():
        return {(norm, d): stack_statistics(norm == "pre-norm", d, seed=seed)
                for norm in ("pre-norm", "post-norm") for d in depths}


def block_explorer(depths=(2, 4, 8, 16, 32), seed: int = 0) -> Explorer:
    """Chapter 6: norm placement and depth over the residual stream's size after each
    block and each block's gradient norm, in an untrained stack
    (:func:`~attention_core.models.stack_statistics.stack_statistics`, one seed)."""
    depths = check_values("depths", depths, integer=True)
    stats = block_statistics(tuple(depths), seed)
    stream_max = 1.1 * max(max(s) for s, _ in stats.values())
    grad_max = 1.15 * max(max(g) for _, g in stats.values())

    def compute(norm, depth):
        stream, grads = stats[norm, depth]
        return {"stream": stream, "grads": grads, "name": norm}

    return Explorer(
        partial(panels.block_stack_panel, max_depth=max(depths), stream_max=stream_max, grad_max=grad_max),
        compute, {"norm": ["pre-norm", "post-norm"], "depth": depths},
        initial={"depth": preferred(depths, 16)},
        labels={"norm": "norm placement", "depth": "blocks"}, figsize=(7.2, 3.2), narrow_figsize=(3.5, 6.2),
        chapter="06_transformer_block",
        alt="The size of the residual stream after each block and the gradient norm of each "
            "block's weights, for a pre-norm or post-norm stack of the chosen depth.")


def kv_sharing_explorer(num_heads: int = 32, head_dim: int = 128, num_layers: int = 32,
                        contexts=(1024, 4096, 8192, 32768, 131072)) -> Explorer:
    """Chapter 9: number of key/value heads and context length over the head-sharing
    diagram and the KV cache size (fp16, batch 1) of a model of the given shape."""
    contexts = check_values("contexts", contexts, integer=True)
    for name, value in (("num_heads", num_heads), ("head_dim", head_dim), ("num_layers", num_layers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    kv_options = [d for d in range(1, num_heads + 1) if num_heads % d == 0]

    def cache_gib(num_kv_heads, context):
        return kv_cache_bytes(num_layers, num_kv_heads, head_dim, context) / 2**30

    return Explorer(
        partial(panels.kv_sharing_panel, num_heads=num_heads, contexts=contexts, cache_gib=cache_gib),
        lambda num_kv_heads, context: {"num_kv_heads": num_kv_heads, "context": context},
        {"num_kv_heads": kv_options, "context": contexts},
        initial={"num_kv_heads": preferred(kv_options, 8), "context": preferred(contexts, 4096)},
        labels={"num_kv_heads": "key/value heads", "context": "context (tokens)"},
        figsize=(7.2, 3.0), narrow_figsize=(3.5, 5.2),
        chapter="09_mqa_gqa",
        alt="Diagram of which query heads share each key/value head, and the KV cache size "
            "against context length.")


def kv_memory_explorer(contexts=(1024, 8192, 65536, 262144), **shape) -> Explorer:
    """Chapter 12: the KV cache of every variant of :func:`~attention_core.models.serving.variants`
    (a model of the given ``shape``, 16-bit, batch 1) against context length; pick a
    variant and a context."""
    contexts = check_values("contexts", contexts, integer=True)
    layouts = variants(**shape)
    curves = {name: [kv_memory_bytes(layout, n) / 2**30 for n in contexts]
              for name, layout in layouts.items()}
    return Explorer(
        partial(panels.kv_memory_panel, contexts=contexts, curves=curves),
        lambda variant, context: {"variant": variant, "context": context},
        {"variant": list(layouts), "context": contexts},
        initial={"variant": preferred(list(layouts), "MLA"), "context": preferred(contexts, 65536)},
        labels={"variant": "variant", "context": "context (tokens)"},
        figsize=(7.2, 3.4), narrow_figsize=(3.5, 6.2),
        chapter="12_modern_llms",
        alt="KV cache size in GiB against context length for MHA, GQA, MQA, MLA, sliding "
            "window, sinks and cross-layer sharing, and a bar per variant at one context.")


def positional_explorer(d_models=(16, 32, 64, 128), bases=(100.0, 1000.0, 10000.0),
                        positions=(32, 64, 128)) -> Explorer:
    """Chapter 10: d_model, base and number of positions over the sinusoidal encoding
    heatmap and the similarity PE(p) . PE(p') against the distance ``|p - p'|``."""
    d_models = check_values("d_models", d_models, integer=True)
    if any(d % 2 for d in d_models):
        raise ValueError(f"d_models must be even (sin and cos pairs), got {d_models}")
    bases = check_values("bases", bases, minimum=1.0)
    positions = check_values("positions", positions, integer=True)

    def compute(d_model, base, positions):
        pe = sinusoidal_encoding(positions, d_model, base)  # (T, D)
        return {"pe": pe, "similarity": (pe @ pe[0]) / (d_model / 2),  # (T,): a function of distance
                "title": f"PE, d_model = {d_model}, base = {base:g}"}

    return Explorer(
        partial(panels.sinusoidal_panel, max_positions=max(positions), max_d_model=max(d_models)),
        compute, {"d_model": d_models, "base": bases, "positions": positions},
        initial={"d_model": preferred(d_models, 64), "base": bases[-1], "positions": positions[-1]},
        figsize=(7.2, 3.2), narrow_figsize=(3.5, 6.0),
        chapter="10_positional_encoding",
        alt="Heatmap of the sinusoidal position encoding (positions by dimensions) and the "
            "dot product of two encodings against their distance.")


def tile_states(seq_len: int, block: int, done: int) -> tuple[np.ndarray, int]:
    """Chapter 11's picture of one query block: ``(state (L, L), tracked row)`` with the
    codes of :data:`attention_core.book.viz.panels.TILE_STATES`; the tracked query block is the
    middle one and ``done`` of its key blocks have been read."""
    for name, value in (("seq_len", seq_len), ("block", block), ("done", done)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    tracked = (seq_len // block // 2) * block  # first row of a query block in the middle
    state = np.zeros((seq_len, seq_len))
    state[:tracked] = 1
    state[tracked:tracked + block, :done * block] = 2
    state[tracked:tracked + block, (done - 1) * block:done * block] = 3
    return state, tracked


def tiling_explorer(seq_lens=(8, 16, 32), blocks=(2, 4, 8), seed: int = 0) -> Explorer:
    """Chapter 11: sequence length, block size and how many key blocks the tracked
    query block has processed, over the grid of tiles and the running max and sum of
    the tracked row (the online softmax)."""
    seq_lens = check_values("seq_lens", seq_lens, integer=True)
    blocks = check_values("blocks", blocks, integer=True)
    if max(blocks) > min(seq_lens):
        raise ValueError(f"blocks must be no longer than the shortest of seq_lens ({min(seq_lens)}), "
                         f"got {blocks}")
    seq_len, block = preferred(seq_lens, 16), preferred(blocks, 4)  # where the controls start
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(max(seq_lens), max(seq_lens), generator=g, dtype=torch.float64) * 2  # (L, S)
    traces = [online_softmax(scores[tile_states(L, b, 1)[1], :L], b)[1] for L in seq_lens for b in blocks]
    values = [v for trace in traces for t in trace for v in (t["m"], t["l"])]
    run_limits = (min(0.0, min(values)) - 0.5, 1.15 * max(values) + 0.5)  # every frame's y range

    def compute(seq_len, block, key_blocks_done):
        n_blocks, done = seq_len // block, key_blocks_done
        state, tracked = tile_states(seq_len, block, done)
        _, trace = online_softmax(scores[tracked, :seq_len], block)
        return {"state": state, "block": block, "trace": trace, "done": done,
                "title_grid": f"L = {seq_len}, {block}x{block} tiles: query rows "
                              f"{tracked}-{tracked + block - 1},\nkey block {done} of {n_blocks}",
                "title_run": f"row {tracked}; dotted: final values\n"
                             f"m = {trace[-1]['m']:.2f}, l = {trace[-1]['l']:.2f}"}

    return Explorer(
        partial(panels.tiling_panel, max_len=max(seq_lens), run_limits=run_limits), compute,
        {"seq_len": seq_lens, "block": blocks,
         # one position per key block of the chosen length and block size: 1 .. L / block
         "key_blocks_done": lambda seq_len, block: range(1, seq_len // block + 1)},
        initial={"seq_len": seq_len, "block": block,
                 "key_blocks_done": preferred(range(1, seq_len // block + 1), 2)},
        labels={"seq_len": "sequence length L", "block": "block size", "key_blocks_done": "key blocks read"},
        figsize=(7.2, 3.6), narrow_figsize=(3.5, 6.6),
        chapter="11_flash_attention",
        alt="Grid of score tiles coloured by state (done, current, pending) for one query "
            "block, and the running maximum and running sum of one row after each key block.")


SPARSE_PATTERNS = {
    "sliding window": lambda L, size: sliding_window_mask(L, size),
    "dilated window (dilation 2)": lambda L, size: dilated_window_mask(L, size, 2),
    "strided (causal)": lambda L, size: strided_mask(L, size),
    "fixed (causal)": lambda L, size: fixed_mask(L, size),
}
"""The base patterns of chapter 8 by name, each ``(L, size) -> mask`` with size the window or stride."""


def sparse_mask_explorer(lengths=(32, 64), sizes=(2, 4, 8), num_globals=(0, 2),
                         num_randoms=(0, 2), seed: int = 0) -> Explorer:
    """Chapter 8: a base pattern (window or Sparse Transformer) united with global
    tokens and random keys; the mask with the fraction it keeps, and how many layers
    the last token needs before it depends on each position."""
    lengths = check_values("lengths", lengths, integer=True)
    sizes = check_values("sizes", sizes, integer=True)
    num_globals = check_values("num_globals", num_globals, integer=True, strict=False)
    num_randoms = check_values("num_randoms", num_randoms, integer=True, strict=False)

    def compute(pattern, L, size, num_global, num_random):
        mask = SPARSE_PATTERNS[pattern](L, size) | global_mask(L, num_global)  # (L, L)
        if num_random:
            mask = mask | random_mask(L, num_random, seed)
        # information flows from key j to query i: search backwards from the last token
        return {"mask": mask, "layers": layers_from(mask.T.contiguous(), L - 1),
                "title_mask": f"{pattern}, size {size}:\nkeeps {density(mask):.1%} of {L}x{L}",
                "title_reach": f"+ {num_global} global tokens, {num_random} random keys per query"}

    return Explorer(
        partial(panels.sparse_reach_panel, max_len=max(lengths)), compute,
        {"pattern": list(SPARSE_PATTERNS), "L": lengths, "size": sizes,
         "num_global": num_globals, "num_random": num_randoms},
        initial={"L": max(lengths), "size": sizes[len(sizes) // 2]},
        labels={"L": "length L", "size": "window or stride", "num_global": "global tokens",
                "num_random": "random keys"},
        figsize=(7.2, 3.4), narrow_figsize=(3.5, 5.8),  # with its five controls, within a 844 px tall phone
        chapter="08_sparse_linear",
        alt="A sparse attention mask (query by key positions) and, for each position, the "
            "number of layers until the last token depends on it.")


class AlignmentExplorer(Explorer):
    """Chapter 7: an :class:`~attention_core.book.explorers.engine.Explorer` whose live
    view also has a text box: type a source sentence, press Enter, and it joins the
    examples (bad input gets a message naming the allowed words instead of a traceback)."""

    def widget(self):
        if self._widget is None:
            box = super().widget()
            choice = box.controls[list(self.controls).index("sentence")]
            text = widgets.Text(placeholder="type a sentence, e.g. a b c d, then Enter",
                                description="sentence", continuous_update=False)
            message = widgets.HTML()

            def typed(change):
                sentence = " ".join(change["new"].split())
                try:
                    translate(sentence)  # validates: raises naming the allowed words
                except ValueError as error:
                    message.value = f"<span style='color:#b00'>{html.escape(str(error))}</span>"
                    return
                message.value = ""
                if sentence not in self.controls["sentence"]:
                    self.controls["sentence"].append(sentence)
                    choice.options = [(s, s) for s in self.controls["sentence"]]
                choice.value = sentence

            text.observe(typed, names="value")
            self._widget = widgets.VBox([widgets.HBox([text, message]), box])
            self._widget.controls = self._widget.sliders = box.controls
            self._widget.image = box.image
            self._widget.text, self._widget.message = text, message
        return self._widget


def alignment_explorer(models: Mapping[str, Any], sentences: Sequence[str]) -> AlignmentExplorer:
    """Chapter 7: pick a source sentence and a trained attention model (name ->
    :class:`~attention_core.models.seq2seq.Seq2Seq`); see its alignment, output words by
    source words, and whether its translation is right. In a live kernel a text box
    takes new sentences."""
    _check_nonempty("models", models)
    _check_nonempty("sentences", sentences)
    for s in sentences:
        translate(s)  # every example must be a valid sentence

    def compute(sentence, model):
        batch = encode_batch([sentence])
        tokens, weights = models[model].greedy_decode(batch.src, batch.src_lengths)
        out = [TARGET_VOCAB[i] for i in tokens[0].tolist()]
        right = out[:-1] == translate(sentence) and out[-1] == "</s>"
        verdict = "right" if right else "WRONG, expected " + " ".join(translate(sentence))
        return {"weights": weights[0], "output_words": out, "source_words": sentence.split(),
                "title": f"{model}: {' '.join(w for w in out if w != '</s>')}\n({verdict})"}

    return AlignmentExplorer(
        partial(panels.alignment_panel, max_source=max(len(s.split()) for s in sentences)), compute,
        {"sentence": list(sentences), "model": list(models)}, figsize=(5.6, 4.6),
        narrow_figsize=(3.5, 3.8),
        labels={"sentence": "source sentence"},
        chapter="07_bahdanau_luong",
        alt="Alignment heatmap of a trained encoder-decoder: the weight of each source word "
            "when producing each output word.")


def pretrained_explorer(model, tokenizer, sentences: Sequence[str]) -> Explorer:
    """Chapter 13: a sentence and a layer of a pretrained encoder
    (:func:`attention_core.models.pretrained.load_minilm`) over all the layer's heads (the mean
    weight each key receives, one row per head) and the layer's weights averaged over
    heads. The model runs once per sentence, here; a frame only picks a layer.

    Every head of every layer is in some frame, with sentences x layers frames in all
    (the website stores each one, so a head control, 12 times as many, would not fit)."""
    _check_nonempty("sentences", sentences)
    runs = {}
    for sentence in sentences:
        input_ids, _ = tokenizer.encode(sentence)
        with torch.no_grad():
            _, attentions = model(input_ids)  # num_layers x (1, H, T, T)
        runs[sentence] = (torch.stack(attentions)[:, 0], tokenizer.tokens(sentence))  # (num_layers, H, T, T)
    num_layers, num_heads = next(iter(runs.values()))[0].shape[:2]

    def compute(sentence, layer):
        weights, tokens = runs[sentence]
        w = weights[layer - 1]  # (H, T, T)
        mean = w.mean(0)  # (T, T): the layer, averaged over heads
        top = int(mean.mean(0).argmax())
        return {"received": w.mean(1), "weights": mean, "tokens": tokens,
                "title": f"layer {layer}, mean of {num_heads} heads:\n"
                         f"{mean.mean(0)[top]:.0%} of a row goes to {tokens[top]}"}

    # the layouts are made for the sentence with the longest token: every sentence's
    # labels then fit ("instrument" would run over the next panel)
    longest = max(sentences, key=lambda s: max(len(t) for t in runs[s][1]))
    return Explorer(
        partial(panels.pretrained_layer_panel, num_heads=num_heads,
                max_tokens=max(len(r[1]) for r in runs.values())), compute,
        {"sentence": list(sentences), "layer": list(range(1, num_layers + 1))},
        layout_at={"sentence": longest},
        figsize=(7.2, 3.7), narrow_figsize=(3.5, 7.0),  # with its controls, within a 844 px tall phone
        chapter="13_pretrained_model",
        alt="For one layer of a pretrained BERT encoder: the mean weight each token receives "
            "in each of the 12 heads, and the layer's attention weights averaged over heads.")


def smollm_explorer(model, tokenizer, prompts: Sequence[str], heads: Sequence[int] | None = None,
                    notes: Sequence[str] | None = None, initial_layer: int = 1) -> Explorer:
    """Chapter 14: a prompt and a layer of SmolLM2
    (:func:`attention_core.models.smollm.load_smollm2`) over all the layer's heads (the mean
    weight each key receives, one row per head, as in chapter 13's explorer) and the map of
    one head of that layer: ``heads[layer - 1]`` (from 0), with ``notes[layer - 1]`` under
    its title, or by default the head that gives the first token least. The model runs once
    per prompt, here; a frame only picks a layer (and a prompt, when there are several),
    starting at ``initial_layer``. In a notebook, pass your own prompts."""
    _check_nonempty("prompts", prompts)
    runs = {}
    for prompt in prompts:
        input_ids = encode(tokenizer, prompt)  # (1, T)
        with torch.no_grad():
            _, attentions = model(input_ids)  # num_layers x (1, H, T, T)
        tokens = [tokenizer.decode([i]).replace("\n", "\\n") or "?" for i in input_ids[0].tolist()]
        runs[prompt] = (torch.stack(attentions)[:, 0], tokens)  # (num_layers, H, T, T)
    num_layers, num_heads = next(iter(runs.values()))[0].shape[:2]
    if heads is not None and len(heads) != num_layers or notes is not None and len(notes) != num_layers:
        raise ValueError(f"heads and notes must give one entry per layer ({num_layers})")

    def compute(layer, prompt=prompts[0]):
        weights, tokens = runs[prompt]
        w = weights[layer - 1]  # (H, T, T)
        first = w[:, 1:, 0].mean(1)  # (H,): mean weight on the first token, queries 2..T
        head = int(first.argmin()) if heads is None else int(heads[layer - 1])
        note = f"{first[head]:.0%} on the first token" if notes is None else notes[layer - 1]
        return {"received": w.mean(1), "weights": w[head], "tokens": tokens,
                "title": f"layer {layer}, head {head + 1}:\n{note}"}

    controls = {"layer": list(range(1, num_layers + 1))}
    if len(prompts) > 1:
        controls = {"prompt": list(prompts), **controls}
    longest = max(prompts, key=lambda p: max(len(t) for t in runs[p][1]))
    return Explorer(
        partial(panels.pretrained_layer_panel, num_heads=num_heads,
                max_tokens=max(len(r[1]) for r in runs.values())), compute, controls,
        initial={"layer": initial_layer}, layout_at={"prompt": longest} if len(prompts) > 1 else None,
        figsize=(7.2, 3.7), narrow_figsize=(3.5, 7.0),
        chapter="14_real_llm",
        alt="For one layer of SmolLM2: the mean weight each token receives in each of the 9 "
            "heads, and the attention map of one head of the layer.")


def lens_explorer(model, tokenizer, prompts: Sequence[str], initial_layer: int | None = None) -> Explorer:
    """Chapter 15: the logit lens (:func:`attention_core.models.circuits.logit_lens`) of
    SmolLM2 over a prompt, one layer at a time: for every position, the probability that the
    lens after each layer gives the model's final guess, and the chosen layer's own top guess.
    The lens runs once per prompt, here; a frame only picks a layer (0 is the embedding) and a
    prompt, when there are several, starting at ``initial_layer`` (default: the last). In a
    notebook, pass your own prompts."""
    _check_nonempty("prompts", prompts)

    def name(i):  # a token as text; its repr() shows spaces and newlines
        return tokenizer.decode([i])

    runs = {}
    for prompt in prompts:
        input_ids = encode(tokenizer, prompt)  # (1, T)
        with torch.no_grad():
            probs = logit_lens(model, input_ids)[:, 0].softmax(-1)  # (num_layers + 1, T, vocab)
        final = probs[-1].argmax(-1)  # (T,): the model's own top guess at each position
        top_p, top = probs.max(-1)  # (num_layers + 1, T)
        p_final = probs.gather(-1, final.expand(len(probs), -1)[..., None])[..., 0]  # (num_layers + 1, T)
        runs[prompt] = {"p_final": p_final.T, "top": top, "top_p": top_p, "final": final,
                        "tokens": [name(i).replace("\n", "\\n") or "?" for i in input_ids[0].tolist()],
                        "names": {i: name(i) for i in set(top.flatten().tolist())}}
    num_layers = len(next(iter(runs.values()))["top"]) - 1

    def compute(layer, prompt=prompts[0]):
        run = runs[prompt]
        top, top_p = run["top"][layer], run["top_p"][layer]  # (T,), (T,)
        hits = (top == run["final"]).tolist()
        where = "the embedding" if layer == 0 else f"layer {layer}"
        return {"p_final": run["p_final"], "layer": layer, "hits": hits, "tokens": run["tokens"],
                "guesses": [f"{run['names'][i]!r} {p:.0%}" for i, p in zip(top.tolist(), top_p.tolist())],
                "title": f"after {where}: final guess on top\nat {sum(hits)} of {len(hits)} positions"}

    controls = {"layer": list(range(num_layers + 1))}
    if len(prompts) > 1:
        controls = {"prompt": list(prompts), **controls}
    return Explorer(
        partial(panels.lens_panel, num_layers=num_layers,
                max_tokens=max(len(r["tokens"]) for r in runs.values())), compute, controls,
        initial={"layer": num_layers if initial_layer is None else initial_layer},
        figsize=(7.2, 4.2), narrow_figsize=(3.5, 7.0),
        chapter="15_circuits",
        alt="The logit lens of SmolLM2 over a prompt: for each position and each layer, the "
            "probability the lens gives the model's final guess, and one layer's top guesses.")
