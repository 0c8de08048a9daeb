"""A probe of the whole public API (issues #44, #54): every function and class of
``attention_core.__all__``, of the ``nn`` modules and of the ``__all__`` of every module of
``models/`` and ``book/`` is called with inputs whose validity the probe knows.

Each probe is a :class:`Probe`: a call, and either ``bad=None`` (the input is valid) or
``bad="name"``, the argument that is wrong. The calls come from four places:

- the **valid fill**: the required arguments filled from :data:`FILL` by name (or from
  :data:`FILL_FOR` where a name means something else in one module); valid by construction
  (left out for the names of :data:`NO_VALID_FILL`);
- the **bad first argument**: the first argument replaced by each of :data:`BAD_FIRST`
  (a string, an empty tensor, a one-element tensor, a float64 tensor), the others filled;
  bad, unless :data:`VALID_EDGE` says why that edge case is a valid input;
- the **bad other argument**: each other required argument that takes no string replaced by
  one (``"x"``), the rest of the valid fill kept; bad, unless :data:`VALID_EDGE` says why;
- :data:`EXTRA`: bad values for other arguments, chosen by hand (issue #54's list among them).

The outcome of a probe (:func:`outcome`) is one of:

- ``ok``: a valid input returned finite values (or NaN/inf with a warning), or a bad input
  raised a ``ValueError``/``TypeError`` (``FileNotFoundError`` for a path) whose message names
  the wrong argument as a word, or was answered with feedback (a checker's ``passed=False``);
  a ``@contextmanager`` is entered, since it checks its arguments there;
- ``unclear``: a bad input raised a ``ValueError``/``TypeError`` that does not name it;
- ``bad input accepted``: a bad input returned;
- ``silent wrong``: a valid input of finite values returned NaN or inf, with no warning;
- ``valid input refused``: a valid input raised (the probe's table is wrong, or the code);
- ``crash: Type``: any other exception (``IndexError``, ``StopIteration``, ``KeyError``...).

DESIGN.md: "Bad input gets a ValueError (or TypeError) that names the argument"; "NaN out of
finite input is a bug". Only ``unclear`` may be excused, in :data:`UNCLEAR` with the reason (at
most 10); a failure not fixed yet is a strict xfail in :data:`KNOWN`, with the reason.
:data:`NOT_PROBED` lists the names the probe cannot call cheaply (loading the 135M model, a
browser, an ONNX export), so every public name is probed or listed. ``python
tests/test_api_probe.py`` prints the counts. ``tests/test_bad_inputs.py`` holds the chosen bad
input per name, with the message expected; this probe is the net under it.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import importlib
import inspect
import math
import pkgutil
import re
import warnings
from collections.abc import Callable
from typing import NamedTuple

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

import attention_core as ac
from attention_core.models import seq2seq, smollm, tiny_transformer
from attention_core.nn import masks

NN_MODULES = ("functional", "heads", "masks", "metrics", "norms", "feedforward", "positional", "kv_cache",
              "paged", "flash", "sparse", "linear_attention", "delta_rule", "kv_memory", "scoring", "block",
              "multihead", "latent_attention")
def _modules_with_all(package: str) -> tuple[str, ...]:
    """Every module under ``attention_core.<package>`` (subpackages too) that declares ``__all__``,
    found by walking the package: a new module is probed, or must be listed, without editing here."""
    root = importlib.import_module(f"attention_core.{package}")
    names = [package] + [info.name.removeprefix("attention_core.")
                         for info in pkgutil.walk_packages(root.__path__, f"{root.__name__}.")]
    return tuple(n for n in names if hasattr(importlib.import_module(f"attention_core.{n}"), "__all__"))


MODELS_MODULES = _modules_with_all("models")
BOOK_MODULES = _modules_with_all("book")


def _module(name: str):
    return importlib.import_module(f"attention_core.{name}")


def _key(obj) -> str:
    """``"nn.masks.causal_mask"``: a public name by where it is defined."""
    return f"{obj.__module__.removeprefix('attention_core.')}.{obj.__qualname__}"


def _targets() -> dict:
    found = {}
    for name in ac.__all__:
        obj = getattr(ac, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            found.setdefault(_key(obj), obj)
    for module in [_module(f"nn.{m}") for m in NN_MODULES]:
        for name, obj in vars(module).items():
            if (not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
                    and obj.__module__ == module.__name__):
                found.setdefault(_key(obj), obj)
    for module in [_module(m) for m in MODELS_MODULES + BOOK_MODULES]:
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                found.setdefault(_key(obj), obj)
    return dict(sorted(found.items()))


TARGETS = _targets()


# --- valid arguments, by name -------------------------------------------------------------------

def _t4():
    return torch.randn(1, 2, 4, 4)


@functools.cache
def _smol():
    torch.manual_seed(0)
    config = smollm.SmolLMConfig(vocab_size=64, embed_dim=32, num_layers=2, num_heads=4, num_kv_heads=2,
                                 ff_dim=48, context_length=64)
    return smollm.SmolLM(config).eval()


@functools.cache
def _tiny():
    torch.manual_seed(0)
    return tiny_transformer.TinyTransformer(12, 8, embed_dim=8)


@functools.cache
def _translator():
    torch.manual_seed(0)
    return seq2seq.Seq2Seq(embed_dim=4, hidden_size=4)


@functools.cache
def _bert(vocab_size=20):
    from attention_core.models.pretrained import BertEncoder
    torch.manual_seed(0)
    return BertEncoder(vocab_size=vocab_size, embed_dim=8, num_heads=2, num_layers=1, ff_dim=16,
                       max_positions=8).eval()


def _paged():
    cache = ac.PagedKVCache(4, 2, 2, 4)
    seq = cache.add_sequence()
    cache.append(seq, torch.randn(2, 3, 4), torch.randn(2, 3, 4))
    return cache, seq


def _figure():
    fig = Figure(figsize=(2, 1.5), dpi=40)
    FigureCanvasAgg(fig)  # as pyplot's figures have
    return fig


def _texted_figure():
    fig = Figure(figsize=(4, 3), dpi=100)
    FigureCanvasAgg(fig)
    fig.subplots().set_title("A title", fontsize=12)
    return fig


def _axes():
    return _figure().subplots()


def _attentions():
    return [torch.rand(1, 2, 6, 6).softmax(-1) for _ in range(2)]


def _draw_update(fig, layout="wide"):
    line, = fig.subplots().plot([0, 1], [0, 1])
    return lambda **data: None


def _explorer():
    from attention_core.book.explorers.engine import Explorer

    def draw(fig, layout="wide"):
        ax = fig.subplots()
        line, = ax.plot([0, 1], [0, 1])
        return lambda y: line.set_ydata([0, y])
    return Explorer(draw, lambda a: {"y": a}, {"a": [1, 2]}, figsize=(2, 1.5))


def _numeric():
    from attention_core.book.selfcheck import Numeric
    return Numeric("How many?", 2.0, 0.1, "Because.", "Count.")


FILL: dict[str, Callable] = {  # a valid value for a required argument, by its name
    # nn
    "query": _t4, "key": _t4, "value": _t4, "x": lambda: torch.randn(1, 3, 8),
    "scores": lambda: torch.randn(2, 4, 4), "weights": lambda: torch.rand(1, 2, 4, 4),
    "mask": lambda: masks.causal_mask(4), "beta": lambda: torch.rand(1, 2, 4),
    "qk": lambda: torch.randn(4, 4), "keys": lambda: torch.randn(2, 5, 4),
    "L": lambda: 4, "S": lambda: 4, "window": lambda: 2, "num_heads": lambda: 2, "embed_dim": lambda: 8,
    "ff_dim": lambda: 16, "d_model": lambda: 8, "num_positions": lambda: 4, "stride": lambda: 2,
    "batch_size": lambda: 1, "num_kv_heads": lambda: 2, "head_dim": lambda: 4, "max_len": lambda: 8,
    "dim": lambda: 8, "num_groups": lambda: 2, "lengths": lambda: [3, 2], "seq_len": lambda: 4,
    "k": lambda: 1, "num_layers": lambda: 1, "block_size": lambda: 2, "num_blocks": lambda: 4,
    "kv_latent_dim": lambda: 4, "rope_dim": lambda: 2, "num_buckets": lambda: 2, "num_features": lambda: 4,
    "proj_len": lambda: 2, "in_features": lambda: 8, "num_global": lambda: 1, "num_random": lambda: 1,
    "dilation": lambda: 1, "query_dim": lambda: 4, "key_dim": lambda: 4, "attn_dim": lambda: 4,
    "score": lambda: "dot", "num_sinks": lambda: 0, "layout": lambda: ac.KVLayout(4),
    "cache": lambda: ac.KVCache(1, 2, 4, 8), "seqs": lambda: [0], "bytes_per_element": lambda: 2,
    # models
    "attentions": _attentions, "period": lambda: 3, "T": lambda: 6, "start": lambda: 1,
    "shares": lambda: torch.rand(2, 4), "logits": lambda: torch.randn(1, 6, 64),
    "input_ids": lambda: torch.randint(0, 20, (1, 6), generator=torch.Generator().manual_seed(0)),
    "heads": lambda: [(0, 1)], "model": _smol, "generator": lambda: torch.Generator().manual_seed(0),
    "length": lambda: 6, "vocab_size": lambda: 12, "config": smollm.SmolLMConfig,
    "weight": lambda: torch.randn(8, 4), "fn": lambda: (lambda: None), "sizes": lambda: [1, 2, 4],
    "values": lambda: [1.0, 2.0, 4.0], "last_hidden_state": lambda: torch.randn(2, 3, 8),
    "d_k": lambda: 4, "num_rows": lambda: 3, "num_keys": lambda: 5, "scaled": lambda: True, "seed": lambda: 0,
    "words": lambda: ["a", "b"], "sentences": lambda: ["a b", "c"], "min_len": lambda: 2,
    "num_requests": lambda: 4, "head_mask": lambda: torch.ones(2, 4), "max_new_tokens": lambda: 2,
    "messages": lambda: [{"role": "user", "content": "hi"}], "norm_first": lambda: True, "depth": lambda: 2,
    "sentence": lambda: "the cat sat", "tokens": lambda: ["the", "cat", "sat"], "num_writes": lambda: 2,
    "make_batch": lambda: (lambda g: (torch.randint(0, 12, (2, 8), generator=g),
                                      torch.randint(0, 2, (2, 8), generator=g))),
    "steps": lambda: 1, "scores_dict": lambda: None,
    # book
    "name": lambda: "a_name", "obj": lambda: ac.softmax, "student": lambda: (lambda *a, **k: None),
    "passed": lambda: True, "message": lambda: "m", "args": lambda: (), "mode": lambda: "kernel",
    "fig": _figure, "figure": _figure, "ax": _axes, "figsize": lambda: (2, 1.5), "dpi": lambda: 40,
    "draw": lambda: (lambda fig, layout="wide": fig.subplots()), "text": lambda: "some *text*",
    "text_px": lambda: 10.0, "natural_width": lambda: 700, "column_px": lambda: 400.0,
    "min_text_px": lambda: 10.0, "prompt": lambda: "Which?", "correct": lambda: True, "why": lambda: "w",
    "answer": lambda: 2.0, "tolerance": lambda: 0.1, "hint": lambda: "h", "chapter": lambda: "ch01",
    "question": _numeric, "questions": lambda: (_numeric(),), "n": lambda: 1, "total": lambda: 2,
    "block": lambda: 2, "done": lambda: 1, "explorer": _explorer, "pe": lambda: torch.randn(4, 8),
    "entropy": lambda: torch.rand(4), "query_labels": lambda: ["a", "b"], "key_labels": lambda: ["a", "b"],
    "column": lambda: "phone", "alt": lambda: "A figure.", "max_tokens": lambda: 4, "max_heads": lambda: 2,
    "max_positions": lambda: 8, "max_d_model": lambda: 8, "max_source": lambda: 3, "max_depth": lambda: 4,
    "stream_max": lambda: 1.0, "grad_max": lambda: 1.0, "d_ks": lambda: [1, 4], "num_keys_": lambda: 4,
    "contexts": lambda: [16, 32], "labels": lambda: [["a", "b"]], "names": lambda: ["a"],
    "indices": lambda: [], "index": lambda: {"0": 0}, "png": lambda: b"\x89PNG\r\n\x1a\n",
}

FILL_FOR: dict[str, dict[str, Callable]] = {  # where a name means something else in one place
    "models.interpret.top_tokens": {"weights": lambda: torch.rand(3).softmax(0), "tokens": lambda: ["a", "b",
                                                                                                    "c"]},
    "models.llm_probes.head_mask_without": {"num_heads": lambda: 2, "num_layers": lambda: 1},
    "models.llm_probes.top_heads": {"scores": lambda: torch.rand(2, 4)},
    "models.llm_probes.random_heads": {"k": lambda: 2},
    "models.llm_probes.token_losses": {"logits": lambda: torch.randn(1, 6, 64)},
    "models.serving.slot_usage": {"lengths": lambda: [3, 5]},
    "models.seq2seq.random_sentences": {"batch_size": lambda: 2, "min_len": lambda: 2, "max_len": lambda: 4},
    "models.seq2seq.random_batch": {"batch_size": lambda: 2, "min_len": lambda: 2, "max_len": lambda: 4},
    "models.seq2seq.gru_steps": {"cell": lambda: torch.nn.GRUCell(4, 3), "inputs": lambda: torch.randn(2, 5,
                                                                                                       4),
                                 "state": lambda: torch.zeros(2, 3)},
    "models.seq2seq.source_attention": {"score": lambda: ac.make_score("dot", 4, 4) if hasattr(ac,
                                                                                               "make_score")
                                        else _module("nn.scoring").make_score("dot", 4, 4),
                                        "h": lambda: torch.randn(2, 5, 4), "mask": lambda: torch.ones(2,
                                                                                                      5) > 0},
    "models.seq2seq.seq2seq_loss": {"model": _translator,
                                    "batch": lambda: seq2seq.random_batch(torch.Generator(), 2, 2, 4)},
    "models.seq2seq.exact_match": {"model": _translator},
    "models.seq2seq.alignment_accuracy": {"model": _translator},
    "models.toy_tasks.reverse_and_shift_accuracy": {"model": _tiny, "seq_len": lambda: 8,
                                                    "vocab_size": lambda: 10},
    "models.toy_tasks.head_roles": {"weights": lambda: torch.rand(2, 2, 4, 4).softmax(-1)},
    "models.toy_tasks.token_accuracy": {"model": _tiny, "x": lambda: torch.randint(0, 12, (2, 8)),
                                        "y": lambda: torch.randint(0, 12, (2, 8, 2))},
    "models.toy_tasks.word_embeddings": {"tokens": lambda: ["the", "cat"]},
    "models.training.token_loss": {"model": _tiny, "batch": lambda: (torch.randint(0, 12, (2, 8)),
                                                                   torch.randint(0, 12, (2, 8, 2)))},
    "models.training.train_model": {"model": _tiny, "make_batch": lambda: (
        lambda g: (torch.randint(0, 12, (2, 8), generator=g), torch.randint(0, 12, (2, 8, 2), generator=g)))},
    "models.stack_statistics.stack_statistics": {"depth": lambda: 1},
    "models.tiny_transformer.LearnedPositions": {"max_len": lambda: 8, "embed_dim": lambda: 8},
    "models.tiny_transformer.TinyTransformer": {"vocab_size": lambda: 12, "max_len": lambda: 8},
    "book.explorers.chapters.heads_explorer": {"models": lambda: {2: _tiny()}, "seq_len": lambda: 8,
                                               "vocab_size": lambda: 10},
    "book.explorers.chapters.alignment_explorer": {"models": lambda: {"bahdanau": _translator()},
                                                   "sentences": lambda: ["a b", "c"]},
    "book.explorers.chapters.tile_states": {"seq_len": lambda: 8},
    "book.explorers.engine.Explorer": {"draw": lambda: _draw_update, "compute": lambda: (lambda a: {}),
                                       "controls": lambda: {"a": [1, 2]}},
    "book.explorers.engine.Layout": {"name": lambda: "wide"},
    "book.explorers.chapters.AlignmentExplorer": {"draw": lambda: _draw_update,
                                                  "compute": lambda: (lambda a: {}),
                                                  "controls": lambda: {"a": [1, 2]}},
    "book.explorers.engine.check_values": {"name": lambda: "values"},
    "book.explorers.live.show": {"view": lambda: "plain"},
    "book.explorers.strips.labels_at": {"labels": lambda: ["a", "b"]},
    "book.viz.plots.color": {"x": lambda: 0.5},
    "book.viz.plots.heatmap": {"weights": lambda: torch.rand(3, 3)},
    "book.viz.plots.head_grid": {"weights": lambda: torch.rand(2, 3, 3)},
    "book.viz.plots.layer_head_map": {"values": lambda: torch.rand(2, 3)},
    "book.viz.plots.mask_plot": {"mask": lambda: masks.causal_mask(3)},
    "book.viz.plots.to_numpy": {"x": lambda: torch.ones(2)},
    "book.viz.plots.set_token_ticks": {"ax": _axes},
    "book.viz.diagrams.block_diagram": {"kind": lambda: "encoder"},
    "book.viz.diagrams.decoder_flow": {"kind": lambda: "bahdanau"},
    "book.viz.figures.checked_rendering": {"name": lambda: "fig", "column": lambda: "wide"},
    "book.viz.figures.narrow_rendering": {
        "name": lambda: "fig", "fig": lambda: _texted_figure(),
        "wide": lambda: _module("book.viz.figures").rendering(_texted_figure())},
    "book.viz.panels.kv_sharing_panel": {"cache_gib": lambda: (lambda *a: 1.0)},
    "book.viz.panels.kv_memory_panel": {"curves": lambda: {"a": [1.0, 2.0]}},
    "book.viz.panels.tiling_panel": {"max_len": lambda: 8},
    "book.viz.panels.sparse_reach_panel": {"max_len": lambda: 8},
    "book.render.check_layout": {"layout": lambda: "wide"},
    "book.render.is_narrow": {"layout": lambda: "narrow"},
    "book.render.layout_rc": {"layout": lambda: "wide"},
    "book.render.call_draw": {"layout": lambda: "wide"},
    "book.render.draw_layout": {"layout": lambda: "wide"},
    "book.render.check_text": {"name": lambda: "fig"},
    "book.render.check_shown_size": {"name": lambda: "fig", "min_text_px": lambda: 30.0},
    "book.output.use": {"mode": lambda: "kernel"},
    "book.output.using": {"mode": lambda: "kernel"},
    "book.pages.glue": {"value": lambda: 1},
    "book.selfcheck.feedback_html": {"verdict": lambda: _module("book.selfcheck").Verdict(True, "ok")},
    "book.selfcheck.MultipleChoice": {"choices": lambda: (_module("book.selfcheck").Choice("a", True, "w"),
                                                          _module("book.selfcheck").Choice("b", False, "w"))},
    "book.selfcheck.parse_number": {"text": lambda: "1.5"},
    "book.quiz.quiz": {"chapter": lambda: "ch01"},
    "models.smollm.next_token": {"logits": lambda: torch.randn(1, 64)},
    "models.circuits.composition_score": {"reader": lambda: torch.randn(4, 4),
                                          "writer": lambda: torch.randn(4, 4)},
    "models.circuits.composition_scores": {"kind": lambda: "q"},
    "models.circuits.direct_logit_attribution": {"target_ids": lambda: torch.randint(0, 20, (1, 6))},
    "models.circuits.last_position_patching": {"source_ids": lambda: torch.randint(0, 20, (1, 6)),
                                               "target_ids": lambda: torch.randint(0, 20, (1, 2))},
    "models.circuits.random_ov_copying_scores": {"num_samples": lambda: 3},
    "models.circuits.random_composition_scores": {"embed_dim": lambda: 8, "head_dim": lambda: 4,
                                                  "num_samples": lambda: 3},
    "book.explorers.chapters.masking_explorer": {"tokens": lambda: ["a", "b", "c", "d"]},
    "book.explorers.strips.default_settings": {"labels": lambda: [["a", "b"]], "start": lambda: [0]},
    "book.explorers.strips.strip_keys": {"chapter": lambda: None, "start": lambda: [0]},
    "book.explorers.strips.strip_frames": {"chapter": lambda: None, "start": lambda: [0],
                                           "index": lambda: {"0": 0, "1": 1}},
    "book.viz.panels.scaling_panel": {"d_ks": lambda: [1, 4], "mean_entropy": lambda: {True: [1.0, 1.0],
                                                                                              False: [1.0,
                                                                                                      0.5]},
                                      "num_keys": lambda: 4},
    "book.viz.plots.all_heads_grid": {"attentions": lambda: torch.rand(1, 2, 3, 3)},
    "models.interpret.head_types": {"scores": lambda: {k: torch.rand(1, 2) for k in
                                                       ("previous", "next", "first", "last", "breadth")}},
    "models.pretrained.occlusion_change": {"model": lambda: _bert(vocab_size=120)},
    "nn.flash.online_softmax": {"scores": lambda: torch.randn(5)},
    "nn.heads.merge_heads": {"x": lambda: torch.randn(1, 2, 3, 4)},
    "nn.heads.repeat_kv": {"x": lambda: torch.randn(1, 2, 3, 4)},
    "nn.kv_cache.crop_length": {"length": lambda: 0},
    "nn.positional.rotary_layout": {"to": lambda: "interleaved"},
    "nn.paged.paged_attention": {"query": lambda: torch.randn(1, 2, 1, 4), "cache": lambda: _paged()[0],
                                 "seqs": lambda: [_paged()[1]]},
    "nn.scoring.attend": {"score": lambda: _module("nn.scoring").make_score("dot", 4, 4),
                          "query": lambda: torch.randn(2, 4)},
    "nn.scoring.make_score": {"name": lambda: "dot"},
    "nn.sparse.lsh_attention": {"key": None},
}

NO_VALID_FILL = {  # no valid call from the table: too slow, or needs what it cannot build
    "models.seq2seq.train_seq2seq": "600 training steps; tests/test_seq2seq.py",
    "models.toy_tasks.train_reverse_and_shift": "400 training steps; tests/test_scaling_toy.py",
    "book.explorers.chapters.block_explorer": "trains 10 stacks; tests/test_explorer_kernel.py",
    "book.explorers.static.render_frames": "renders every frame; tests/test_explorer_static.py",
    "book.explorers.static.static_html": "renders every frame; tests/test_explorer_static.py",
    "book.explorers.static.strip_of": "renders frames; tests/test_explorer_static.py",
    "book.questions": "each chapter's questions compute their answers; tests/test_quiz.py",
    "models.pretrained.bert_state_dict": "needs a BertModel's state dict; tests/test_pretrained.py",
    "book.explorers.live.show": "shows ipywidgets in an IPython kernel; tests/test_explorer_kernel.py",
}


def _fill(target: str, name: str):
    return FILL_FOR.get(target, {}).get(name, FILL.get(name))


# --- the probes ---------------------------------------------------------------------------------

class Probe(NamedTuple):
    target: str  # the public name, as in TARGETS
    what: str
    call: Callable
    bad: str | None  # None: a valid input; else the argument that is wrong, which the message names


BAD_FIRST = {
    "a string": lambda: "x",
    "an empty tensor": lambda: torch.empty(0),
    "a one-element tensor": lambda: torch.ones(1, 1, 1, 1),
    "a float64 tensor": lambda: torch.ones(1, 2, 4, 4, dtype=torch.float64),
}


def _plan(target: str, obj):
    """``(first parameter, names of the other required parameters)``, or None when the
    callable takes no positional argument or one the tables cannot fill."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = [p for p in signature.parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    rest = [p.name for p in params[1:] if p.default is p.empty]
    if not params or any(_fill(target, name) is None for name in rest):
        return None
    return params[0], rest


def _call(obj, target, first, rest):
    return lambda: obj(first(), *(_fill(target, name)() for name in rest))


def _generated() -> list[Probe]:
    probes = []
    for target, obj in TARGETS.items():
        plan = _plan(target, obj)
        if plan is None or target in NOT_PROBED:
            continue
        first, rest = plan
        fill_first = _fill(target, first.name)
        has_valid_fill = fill_first is not None and not any(target.startswith(s) for s in NO_VALID_FILL)
        if has_valid_fill:
            probes.append(Probe(target, "valid fill", _call(obj, target, fill_first, rest), None))
        for what, bad in BAD_FIRST.items():
            valid = (target, what) in VALID_EDGE
            probes.append(Probe(target, what, _call(obj, target, bad, rest), None if valid else first.name))
        if not has_valid_fill:
            continue
        for i, name in enumerate(rest):  # each other required argument a string, where it takes none
            what = f"{name} a string"
            if isinstance(_fill(target, name)(), str) or (target, what) in VALID_EDGE:
                continue
            probes.append(Probe(target, what, _call_with(obj, target, fill_first, rest, i, "x"), name))
    return probes


def _call_with(obj, target, first, rest, i, bad):
    """The valid fill with its ``i``-th other required argument replaced by ``bad``."""
    def call():
        args = [_fill(target, name)() for name in rest]
        args[i] = bad
        return obj(first(), *args)
    return call


def _finite(result) -> bool:
    """Whether every number in ``result`` (tensors, arrays, floats, in tuples, lists, dicts) is finite."""
    if isinstance(result, torch.Tensor):
        return not (result.is_floating_point() or result.is_complex()) or bool(torch.isfinite(result).all())
    if isinstance(result, np.ndarray):
        return result.dtype.kind not in "fc" or bool(np.isfinite(result).all())
    if isinstance(result, float):
        return math.isfinite(result)
    if isinstance(result, (tuple, list)):
        return all(_finite(r) for r in result)
    if isinstance(result, dict):
        return all(_finite(r) for r in result.values())
    return True


def _names(arg: str, message: str) -> bool:
    """Whether ``message`` names ``arg`` as a word (``x`` in "x must be ...", not in "max")."""
    return re.search(rf"(?<![\w.]){re.escape(arg)}(?!\w)", message) is not None


def outcome(probe: Probe) -> tuple[str, str]:
    """``(kind, message)`` of one probe; ``kind`` is ``"ok"`` or one of the failures above."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = probe.call()
            if isinstance(result, contextlib.AbstractContextManager) and inspect.isgenerator(
                    getattr(result, "gen", None)):  # a @contextmanager checks on entering
                with result:
                    pass
        except (ValueError, TypeError, FileNotFoundError) as error:  # a path that is not there
            message = f"{type(error).__name__}: {error}"
            if probe.bad is None:
                return "valid input refused", message
            return ("ok" if _names(probe.bad, str(error)) else "unclear"), message
        except Exception as error:  # the probe reports any other kind
            return f"crash: {type(error).__name__}", str(error)
    if probe.bad is not None and getattr(result, "passed", None) is False:
        return "ok", ""  # a checker answers a student's bad input with feedback, by design
    if probe.bad is not None:
        return "bad input accepted", repr(result)[:200]
    if not _finite(result) and not caught:
        return "silent wrong", repr(result)[:200]
    return "ok", ""


# --- what the probe leaves out, and why -----------------------------------------------------------

NOT_PROBED = {
    "nn.attention_functions.AttentionKernel": "wraps a kernel function; every instance is an entry of "
                                              "ATTENTION_FUNCTIONS",
    "nn.kv_cache.Cache": "a Protocol: no code of its own",
    "nn.kv_cache.HeadCache": "a Protocol: no code of its own",
    "nn.kv_cache.check_new_entries": "a check called by the caches with their own buffers",
    "nn.backends.triton_compiles_here": "takes no argument",
    "nn.backends.triton_mode": "takes no argument",
    "models.pretrained.load_minilm": "loads the MiniLM weights package; its bad path and config are in EXTRA",
    "models.smollm.load_smollm2": "loads the 135M model's GGUF; its bad path is in EXTRA",
    "models.smollm.gguf_state_dict": "needs a GGUF reader of the real file",
    "models.smollm.build_tokenizer": "builds a tokenizers.Tokenizer from the GGUF's vocabulary",
    "models.pretrained.MiniLMTokenizer": "wraps the tokenizer file of the MiniLM weights package",
    "models.seq2seq.Batch": "a record of tensors built by encode_batch, which is probed",
    "models.seq2seq.Decoder": "a record of a decoder's layers and step, reached through Seq2Seq",
    "models.seq2seq.fixed_context_step": "a decoder step called by Seq2Seq.forward with its own tensors",
    "models.seq2seq.bahdanau_step": "a decoder step called by Seq2Seq.forward with its own tensors",
    "models.seq2seq.luong_step": "a decoder step called by Seq2Seq.forward with its own tensors",
    "models.tiny_transformer.Positional": "a record of where a positional scheme acts, reached through "
                                          "TinyTransformer",
    "book.selfcheck.QuestionWidget": "a record of ipywidgets, built by question_widget, which is probed",
    "book.output.view": "takes keyword-only callables; tests/test_output.py",
    "nn.linear_attention.linformer_attention": "needs projections that fit the keys; rows in "
                                               "test_bad_inputs.py",
    "nn.positional.ntk_aware_base": "takes numbers, not tensors; rows in test_bad_inputs.py and "
                                    "test_positional_metrics.py",
    "nn.positional.rotate_pairs": "needs cos and sin tables that fit x; rows in test_bad_inputs.py",
    "models.pretrained.embed_sentences": "needs the MiniLM tokenizer file; tests/test_pretrained.py",
    "book.pages.PlainText": "a str subclass; no code of its own",
    **dict.fromkeys(("book.exercises.WholeRowSoftmaxError", "book.render.FigureTextError",
                     "book.explorers.strips.StripError"), "an exception class"),
    **dict.fromkeys(("book.explorers.static.player_js", "book.output.current",
                     "book.viz.figures.install_website_figures", "models.measure.one_thread",
                     "models.pretrained.default_model_path", "models.smollm.default_gguf_path",
                     *(f"book.questions.ch{n:02d}" for n in range(1, 16))), "takes no argument"),
    "book.exercises.Feedback": "a record the checkers return; no code of its own",
    "book.exercises.Case": "a record of a checker's inputs; no code of its own",
    "book.selfcheck.Verdict": "a record a question's check returns; no code of its own",
    "book.render.check_figure": "a check the book calls with its own argument names; probed through them",
    "book.explorers.static.check_explorer": "a check the book calls on its explorers; probed through them",
    "nn.functional.upcast": "maps any tensor or None; internal to the kernels (NO_ROW in test_bad_inputs.py)",
    "nn.functional.compute_dtype": "maps any dtype; internal to the kernels (NO_ROW in test_bad_inputs.py)",
}
for _name in TARGETS:  # the in-browser models (another engineer's files): export, onnxruntime, a browser
    if _name.startswith(("book.web_", "models.gguf", "book.export_files.")):
        NOT_PROBED[_name] = "exports or runs the in-browser model (ONNX, onnxruntime, the real weights)"

_ANY_FLOAT = "takes any floating-point tensor (..., D)"
VALID_EDGE: dict[tuple[str, str], str] = {
    **{(t, w): _ANY_FLOAT for t in ("nn.functional.softmax", "nn.functional.masked_softmax_",
                                    "nn.functional.apply_mask_", "nn.positional.apply_rotary",
                                    "nn.sparse.lsh_buckets", "nn.norms.rms_norm", "nn.heads.merge_heads",
                                    "nn.heads.repeat_kv", "nn.linear_attention.elu_feature_map",
                                    "nn.metrics.attention_entropy", "models.llm_probes.sink_rate",
                                    "book.viz.plots.all_heads_grid",
                                    "models.interpret.attention_rollout")
       for w in ("a one-element tensor", "a float64 tensor")
       if (t, w) != ("nn.positional.apply_rotary", "a one-element tensor")},
    **{("book.viz.plots.color", w): "maps a number, or an array of them, through the colormap"
       for w in ("an empty tensor", "a one-element tensor", "a float64 tensor")},
    **{("book.selfcheck.parse_number", w): "answers None for what is not a number (a reader's input)"
       for w in ("an empty tensor", "a one-element tensor", "a float64 tensor")},
    ("models.toy_tasks.head_roles", "a float64 tensor"): "weights (B, H, T, T) of any float dtype",
    ("nn.norms.rms_norm", "an empty tensor"): "elementwise over rows: no row, an empty result",
    ("nn.linear_attention.elu_feature_map", "an empty tensor"): "elementwise: an empty result",
    ("nn.positional.rotary_cos_sin", "an empty tensor"): "no position: empty tables",
    **{(t, "a string"): "free text" for t in ("models.toy_tasks.tokenize", "book.selfcheck.inline_html",
                                              "book.selfcheck.plain", "book.selfcheck.parse_number",
                                              "book.explorers.engine.human_label", "book.pages.glue",
                                              "book.explorers.engine.check_values", "book.selfcheck.Numeric",
                                              "book.selfcheck.MultipleChoice", "book.selfcheck.Choice")},
    **{(t, "a string"): "'x' is a chapter id (letters, digits, - and _)"
       for t in ("book.selfcheck.Quiz", "book.selfcheck.static_html", "book.selfcheck.plain_text")},
    ("book.explorers.strips.labels_at", "a string"): "a str is a sequence of labels",
    **{(t, "a string"): "a chapter outside STRIPS gets the default strip"
       for t in ("book.explorers.strips.strip_keys", "book.explorers.strips.strip_frames")},
    ("book.pages.glue", "value a string"): "a string is glued as written",
    **{("models.circuits.copying_score", w): "circuit (..., n, n): any batch of square matrices"
       for w in ("a one-element tensor", "a float64 tensor")},
    ("nn.heads.check_grouped", "a float64 tensor"): "checks shapes only; the kernel then checks dtypes",
    ("nn.paged.paged_attention",
     "a float64 tensor"): "the pool's keys and values are cast to the query's dtype",
    **{("book.viz.plots.to_numpy", w): "converts whatever numpy.asarray converts" for w in BAD_FIRST},
    **{(t, w): "a predicate: answers for any values" for t in ("book.explorers.live.is_numeric",
                                                                "book.explorers.static.control_kind")
       for w in BAD_FIRST},
    **{("nn.kv_cache.is_head_cache",
        w): "answers isinstance(x, HeadCache) for any object" for w in BAD_FIRST},
}
"""``(target, BAD_FIRST case)``: an edge case that is a valid input to that target, and why."""

def _q():
    return torch.randn(1, 2, 3, 4)


def _rolling(appended: int):
    cache = ac.RollingKVCache(1, 1, 2, 3)
    cache.append(torch.randn(1, 1, appended, 2), torch.randn(1, 1, appended, 2))
    return cache


def _masked_row_attentions():
    a = torch.rand(1, 1, 2, 3, 3).softmax(-1)  # (num_layers, B, H, T, T)
    a[..., 1, :] = 0  # query 1 masked out entirely
    return a


def _swiglu_dropout_applied():
    """``feed_forward("swiglu", dropout=0.5)`` in training drops (outputs vary), in eval does not."""
    torch.manual_seed(0)
    mlp, x = ac.feed_forward(8, 16, "swiglu", dropout=0.5), torch.randn(2, 3, 8)
    if torch.equal(mlp(x), mlp(x)):
        raise ValueError("dropout: feed_forward('swiglu', dropout=0.5) ignored its dropout")
    return mlp.eval()(x)


def _bad_minilm_dir():
    import json
    import tempfile
    from pathlib import Path
    path = Path(tempfile.mkdtemp())
    (path / "config.json").write_text(json.dumps({"hidden_act": "gelu"}))
    for name in ("model.safetensors", "tokenizer.json"):
        (path / name).write_bytes(b"")
    return path


def _extra(target: str, what: str, call: Callable, bad: str | None) -> Probe:
    return Probe(target, what, call, bad)


def _mod(name: str):
    return _module(name)


EXTRA: list[Probe] = [
    # issue #54's list
    _extra("nn.heads.grouped_query_attention", "is_causal 'no'",
           lambda: ac.grouped_query_attention(_q(), _q(), _q(), is_causal="no"), "is_causal"),
    _extra("nn.attention_functions.AttentionKernel", "gqa kernel, is_causal 'no'",
           lambda: ac.ATTENTION_FUNCTIONS["grouped_query"](_q(), _q(), _q(), is_causal="no"), "is_causal"),
    _extra("nn.linear_attention.linear_attention", "eps 0",
           lambda: ac.linear_attention(_q(), _q(), _q(), eps=0.0), "eps"),
    _extra("nn.linear_attention.linear_attention", "eps < 0",
           lambda: ac.linear_attention(_q(), _q(), _q(), eps=-1.0), "eps"),
    _extra("nn.linear_attention.linear_attention", "causal, eps < 0",
           lambda: ac.linear_attention(_q(), _q(), _q(), is_causal=True, eps=-1.0), "eps"),
    _extra("nn.linear_attention.kernel_attention_weights", "eps 0",
           lambda: ac.kernel_attention_weights(torch.randn(3, 4), torch.randn(3, 4), eps=0.0), "eps"),
    _extra("nn.feedforward.feed_forward", "swiglu with dropout, applied",
           lambda: _swiglu_dropout_applied(), None),
    _extra("nn.feedforward.GatedFeedForward", "dropout 1", lambda: ac.GatedFeedForward(8, 16, dropout=1.0),
           "dropout"),
    _extra("nn.feedforward.feed_forward", "swiglu without dropout", lambda: ac.feed_forward(8, 16, "swiglu"),
           None),
    _extra("nn.kv_memory.KVLayout", "rope_dim without kv_latent_dim", lambda: ac.KVLayout(4, rope_dim=64),
           "rope_dim"),
    _extra("nn.kv_memory.KVLayout", "rope_dim with kv_latent_dim",
           lambda: ac.KVLayout(4, kv_latent_dim=512, rope_dim=64), None),
    _extra("nn.kv_cache.crop_length", "a RollingKVCache that has not wrapped",
           lambda: ac.crop_length(_rolling(2), 1),
           None) if hasattr(ac, "crop_length") else
    _extra("nn.kv_cache.crop_length", "a RollingKVCache that has not wrapped",
           lambda: _mod("nn.kv_cache").crop_length(_rolling(2), 1), None),
    _extra("nn.kv_cache.crop_length", "a RollingKVCache that has wrapped",
           lambda: _mod("nn.kv_cache").crop_length(_rolling(5), 2), "cache"),
    _extra("nn.kv_cache.crop_length", "a RollingKVCache that is full",
           lambda: _mod("nn.kv_cache").crop_length(_rolling(3), 2), None),
    _extra("nn.kv_cache.crop_length", "not a cache", lambda: _mod("nn.kv_cache").crop_length("x", 0),
           "cache"),
    _extra("nn.kv_cache.crop_length", "a paged cache",
           lambda: _mod("nn.kv_cache").crop_length(ac.PagedKVCache(4, 2, 2, 4), 0), "cache"),
    _extra("nn.metrics.attention_entropy", "negative weights",
           lambda: ac.attention_entropy(-torch.rand(2, 3, 3)), "weights"),
    _extra("nn.metrics.attention_entropy", "a fully masked row",
           lambda: ac.attention_entropy(torch.tensor([[0.0, 0.0], [0.5, 0.5]])), None),
    _extra("models.scaling.softmax_saturation", "threshold 2",
           lambda: _mod("models.scaling").softmax_saturation(4, True, threshold=2), "threshold"),
    _extra("models.scaling.softmax_saturation", "threshold NaN",
           lambda: _mod("models.scaling").softmax_saturation(4, True, threshold=float("nan")), "threshold"),
    _extra("models.measure.peak_memory_bytes", "interval -1",
           lambda: _mod("models.measure").peak_memory_bytes(lambda: None, interval=-1), "interval"),
    _extra("models.measure.fitted_exponent", "a NaN value",
           lambda: _mod("models.measure").fitted_exponent([1, 2, 4], [1.0, float("nan"), 4.0]), "values"),
    _extra("models.measure.fitted_exponent", "an infinite size",
           lambda: _mod("models.measure").fitted_exponent([1, 2, math.inf], [1.0, 2.0, 4.0]), "sizes"),
    _extra("models.interpret.attention_rollout", "a fully masked row, residual_weight 0",
           lambda: _mod("models.interpret").attention_rollout(_masked_row_attentions(),
                                                              residual_weight=0.0), None),
    _extra("models.interpret.attention_rollout", "residual_weight NaN",
           lambda: _mod("models.interpret").attention_rollout(_attentions(), residual_weight=float("nan")),
           "residual_weight"),
    _extra("nn.delta_rule.delta_rule_attention", "keys not normalised",
           lambda: ac.delta_rule_attention(torch.randn(1, 1, 64, 8) * 10, torch.randn(1, 1, 64, 8) * 10,
                                           torch.randn(1, 1, 64, 8), torch.ones(1, 1, 64)), None),
    _extra("book.selfcheck.Numeric", "a NaN mistake",
           lambda: _mod("book.selfcheck").Numeric("p", 2.0, 0.1, "w", "h", mistakes=((float("nan"), "x"),)),
           "mistakes"),
    _extra("book.selfcheck.Numeric", "mistakes a string",
           lambda: _mod("book.selfcheck").Numeric("p", 2.0, 0.1, "w", "h", mistakes="x"), "mistakes"),
    _extra("book.explorers.chapters.heads_explorer", "no model",
           lambda: _mod("book.explorers.chapters").heads_explorer({}, 8, 10), "models"),
    _extra("book.explorers.chapters.alignment_explorer", "no model",
           lambda: _mod("book.explorers.chapters").alignment_explorer({}, ["a b"]), "models"),
    _extra("book.explorers.chapters.alignment_explorer", "no sentence",
           lambda: _mod("book.explorers.chapters").alignment_explorer({"b": _translator()}, []), "sentences"),
    _extra("book.explorers.chapters.pretrained_explorer", "no sentence",
           lambda: _mod("book.explorers.chapters").pretrained_explorer(_bert(), None, []), "sentences"),
    _extra("book.explorers.chapters.smollm_explorer", "no prompt",
           lambda: _mod("book.explorers.chapters").smollm_explorer(_smol(), None, []), "prompts"),
    _extra("book.explorers.chapters.lens_explorer", "no prompt",
           lambda: _mod("book.explorers.chapters").lens_explorer(_smol(), None, []), "prompts"),
    _extra("book.explorers.chapters.kv_sharing_explorer", "num_heads 0",
           lambda: _mod("book.explorers.chapters").kv_sharing_explorer(num_heads=0), "num_heads"),
    _extra("book.explorers.chapters.block_explorer", "no depth",
           lambda: _mod("book.explorers.chapters").block_explorer(depths=()), "depths"),
    _extra("book.explorers.chapters.basics_explorer", "no token",
           lambda: _mod("book.explorers.chapters").basics_explorer([]), "tokens"),
    _extra("book.explorers.chapters.tiling_explorer", "no seq_lens",
           lambda: _mod("book.explorers.chapters").tiling_explorer(seq_lens=()), "seq_lens"),
    _extra("book.explorers.chapters.masking_explorer", "d_model 0",
           lambda: _mod("book.explorers.chapters").masking_explorer(["a", "b", "c", "d"],
                                                                    d_model=0), "d_model"),
    _extra("book.explorers.chapters.self_attention_explorer", "no token",
           lambda: _mod("book.explorers.chapters").self_attention_explorer([]), "tokens"),
    _extra("book.explorers.chapters.kv_memory_explorer", "no context",
           lambda: _mod("book.explorers.chapters").kv_memory_explorer(contexts=()), "contexts"),
    _extra("book.explorers.chapters.positional_explorer", "no base",
           lambda: _mod("book.explorers.chapters").positional_explorer(bases=()), "bases"),
    _extra("book.explorers.chapters.sparse_mask_explorer", "no length",
           lambda: _mod("book.explorers.chapters").sparse_mask_explorer(lengths=()), "lengths"),
    _extra("book.explorers.chapters.scaling_explorer", "num_keys 0",
           lambda: _mod("book.explorers.chapters").scaling_explorer(num_keys=0), "num_keys"),
    _extra("nn.norms.RMSNorm", "terabytes", lambda: ac.RMSNorm(10**12), "dim"),
    _extra("nn.multihead.MultiHeadAttention", "terabytes", lambda: ac.MultiHeadAttention(10**6, 1),
           "embed_dim"),
    _extra("nn.positional.alibi_bias", "terabytes", lambda: ac.alibi_bias(8, 10**6), "L"),
    _extra("nn.positional.rotary_layout", "to 'pairs'",
           lambda: ac.rotary_layout(torch.randn(8, 4), 2, "pairs"), "to"),
    _extra("nn.positional.rotary_layout", "odd head width",
           lambda: ac.rotary_layout(torch.randn(6, 4), 2, "half_split"), "weight"),
    _extra("nn.positional.rotary_layout", "a bias (H * E,)",
           lambda: ac.rotary_layout(torch.randn(8), 2, "half_split"), None),
    _extra("nn.feedforward.feed_forward", "terabytes", lambda: ac.feed_forward(8, 10**12), "ff_dim"),
    _extra("nn.norms.QKNormLinear", "terabytes", lambda: ac.QKNormLinear(10**6, 1, 10**6), "in_features"),
    *(_extra(target, "terabytes", call, arg) for target, call, arg in (
        ("nn.latent_attention.MultiHeadLatentAttention", lambda: ac.MultiHeadLatentAttention(10**6, 1, 10**6),
         "embed_dim"),
        ("nn.scoring.AdditiveScore", lambda: _mod("nn.scoring").AdditiveScore(10**6, 10**6, 10**6),
         "key_dim"),
        ("nn.scoring.GeneralScore", lambda: _mod("nn.scoring").GeneralScore(10**6, 10**6), "key_dim"),
        ("nn.linear_attention.random_features", lambda: ac.random_features(10**6, 10**6), "num_features"),
        ("nn.linear_attention.sequence_projection", lambda: ac.sequence_projection(10**6, 10**6), "seq_len"),
        ("nn.linear_attention.pooling_projection", lambda: ac.pooling_projection(10**6, 10**6), "seq_len"),
        ("nn.sparse.global_mask", lambda: ac.global_mask(10**6, 1), "L"),
        ("nn.sparse.strided_mask", lambda: ac.strided_mask(10**6, 2), "L"),
        ("nn.masks.padding_mask", lambda: ac.padding_mask([1] * 10**4, 10**7), "S"),
        ("models.tiny_transformer.TinyTransformer", lambda: tiny_transformer.TinyTransformer(10**9, 8),
         "vocab_size"),
        ("models.pretrained.BertEncoder", lambda: _mod("models.pretrained").BertEncoder(vocab_size=10**9),
         "vocab_size"),
        ("models.seq2seq.Seq2Seq", lambda: seq2seq.Seq2Seq(embed_dim=10**6, hidden_size=10**6),
         "hidden_size"),
        ("models.llm_probes.repeated_random_tokens",
         lambda: _mod("models.llm_probes").repeated_random_tokens(10**6, 10**6, 10,
                                                                  torch.Generator()), "length"),
        ("models.serving.request_lengths", lambda: _mod("models.serving").request_lengths(10**12),
         "num_requests"),
        ("nn.positional.sinusoidal_shift_matrix", lambda: ac.sinusoidal_shift_matrix(1, 10**7), "d_model"),
    )),
    _extra("models.pretrained.load_minilm", "a config without hidden_size",
           lambda: _mod("models.pretrained").load_minilm(_bad_minilm_dir()), "path"),
    _extra("models.pretrained.load_minilm", "path an int", lambda: _mod("models.pretrained").load_minilm(3),
           "path"),
    _extra("models.smollm.load_smollm2", "path an int", lambda: _mod("models.smollm").load_smollm2(3),
           "path"),
    _extra("book.quiz.quiz", "a list", lambda: _mod("book.quiz").quiz(["ch01"]), "chapter"),
    _extra("book.quiz.quiz", "no such chapter", lambda: _mod("book.quiz").quiz("ch99"), "chapter"),
    # smollm and llm_probes beyond the first argument
    _extra("models.smollm.generate", "kv_caches with use_cache=False",
           lambda: smollm.generate(_smol(), torch.ones(1, 3, dtype=torch.long), 1, use_cache=False,
                                   kv_caches=_smol().new_cache(1)), "kv_caches"),
    _extra("models.smollm.generate", "temperature -1",
           lambda: smollm.generate(_smol(), torch.ones(1, 3, dtype=torch.long), 1,
                                   temperature=-1.0), "temperature"),
    _extra("models.smollm.generate", "top_k 0",
           lambda: smollm.generate(_smol(), torch.ones(1, 3, dtype=torch.long), 1, temperature=1.0, top_k=0),
           "top_k"),
    _extra("models.smollm.generate", "max_new_tokens -1",
           lambda: smollm.generate(_smol(), torch.ones(1, 3, dtype=torch.long), -1), "max_new_tokens"),
    _extra("models.smollm.next_token", "temperature NaN",
           lambda: smollm.next_token(torch.randn(1, 5), temperature=float("nan")), "temperature"),
    _extra("models.smollm.next_token", "top_k 0", lambda: smollm.next_token(torch.randn(1, 5), 1.0, top_k=0),
           "top_k"),
    _extra("models.smollm.next_token", "generator a seed",
           lambda: smollm.next_token(torch.randn(1, 5), 1.0, generator=0), "generator"),
    _extra("models.smollm.SmolLMConfig", "num_heads not dividing embed_dim",
           lambda: smollm.SmolLMConfig(embed_dim=10, num_heads=3), "num_heads"),
    _extra("models.smollm.SmolLMConfig", "rms_norm_eps 0", lambda: smollm.SmolLMConfig(rms_norm_eps=0.0),
           "rms_norm_eps"),
    _extra("models.smollm.ablate_heads", "a head_mask of the wrong shape",
           lambda: smollm.ablate_heads(_smol(), torch.ones(3, 3)).__enter__(), "head_mask"),
    _extra("models.smollm.chat_text", "no message", lambda: smollm.chat_text([]), "messages"),
    _extra("models.smollm.chat_text", "a message without content",
           lambda: smollm.chat_text([{"role": "user"}]), "messages"),
    _extra("models.llm_probes.induction_scores", "period 0",
           lambda: _mod("models.llm_probes").induction_scores(_attentions(), 0), "period"),
    _extra("models.llm_probes.induction_scores", "period past T",
           lambda: _mod("models.llm_probes").induction_scores(_attentions(), 6), "period"),
    _extra("models.llm_probes.previous_token_scores", "start past T",
           lambda: _mod("models.llm_probes").previous_token_scores(_attentions(), start=6), "start"),
    _extra("models.llm_probes.sink_rate", "threshold 1", lambda: _mod("models.llm_probes").sink_rate(
        torch.rand(2, 4), threshold=1.0), "threshold"),
    _extra("models.llm_probes.top_heads", "k past the heads",
           lambda: _mod("models.llm_probes").top_heads(torch.rand(2, 4), 9), "k"),
    _extra("models.llm_probes.top_heads", "k 0",
           lambda: _mod("models.llm_probes").top_heads(torch.rand(2, 4), 0), "k"),
    _extra("models.llm_probes.random_heads", "generator a seed",
           lambda: _mod("models.llm_probes").random_heads(2, 4, 1, 0), "generator"),
    _extra("models.llm_probes.repeated_random_tokens", "length 0",
           lambda: _mod("models.llm_probes").repeated_random_tokens(1, 0, 12, torch.Generator()), "length"),
    _extra("models.llm_probes.head_mask_without", "a head outside",
           lambda: _mod("models.llm_probes").head_mask_without([(5, 0)], 1, 2), "heads"),
    _extra("models.llm_probes.streaming_losses", "window 0",
           lambda: _mod("models.llm_probes").streaming_losses(_smol(), torch.ones(1, 6, dtype=torch.long),
                                                              window=0),
           "window"),
    _extra("models.llm_probes.streaming_losses", "num_sinks without window",
           lambda: _mod("models.llm_probes").streaming_losses(_smol(), torch.ones(1, 6, dtype=torch.long),
                                                              num_sinks=1), "num_sinks"),
    _extra("models.llm_probes.ablated_losses", "a head outside",
           lambda: _mod("models.llm_probes").ablated_losses(_smol(), torch.ones(1, 6, dtype=torch.long), [(9,
                                                                                                           9)]),
           "heads"),
    _extra("models.llm_probes.kv_bytes", "seq_len 0", lambda: _mod("models.llm_probes").kv_bytes(
        smollm.SmolLMConfig(), 0), "seq_len"),
    _extra("models.llm_probes.kv_bytes", "config a dict", lambda: _mod("models.llm_probes").kv_bytes({}, 4),
           "config"),
    _extra("models.llm_probes.interleaved_to_half_split", "odd head width",
           lambda: _mod("models.llm_probes").interleaved_to_half_split(torch.randn(6, 4), 2), "weight"),
    _extra("models.llm_probes.token_losses", "T of 1", lambda: _mod("models.llm_probes").token_losses(
        torch.randn(1, 1, 64), torch.ones(1, 1, dtype=torch.long)), "logits"),
    _extra("models.llm_probes.uniform_scores", "start past T",
           lambda: _mod("models.llm_probes").uniform_scores(4, 4), "start"),
    _extra("nn.sparse.lsh_attention", "valid, key is query",
           lambda: (lambda q: ac.lsh_attention(q, q, torch.randn(1, 2, 4, 4), 2,
                                               chunk_size=2))(torch.randn(1, 2, 4, 4)), None),
    _extra("nn.sparse.lsh_attention", "key not query",
           lambda: ac.lsh_attention(torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4), 2), "key"),
    _extra("nn.sparse.lsh_attention", "a string query", lambda: ac.lsh_attention("x", "x", torch.randn(4, 4),
                                                                                 2),
           "query"),
]

UNCLEAR: dict[tuple[str, str], str] = {}
"""``(target, what)``: a probe whose message may name something other than the wrong argument."""

KNOWN: dict[tuple[str, str], str] = {}
"""``(target, what)``: a failure the probe finds that is not fixed yet, and why (strict xfail: a
fix makes the test fail until its line here is removed)."""

PROBES = _generated() + EXTRA


def _id(p: Probe) -> str:
    return f"{p.target}: {p.what}"


def test_every_public_name_is_probed_or_listed():
    """Every public name is probed or in NOT_PROBED with a reason; a name there may still have
    hand-made probes of its cheap checks in EXTRA, never generated ones."""
    generated = {p.target for p in PROBES if p not in EXTRA}
    unlisted = set(TARGETS) - generated - {p.target for p in EXTRA} - set(NOT_PROBED)
    assert not unlisted, f"not probed and not listed: {sorted(unlisted)}"
    assert set(NOT_PROBED) <= set(TARGETS) - generated, (
        f"listed but probed or gone: {sorted(set(NOT_PROBED) - (set(TARGETS) - generated))}")
    assert {p.target for p in EXTRA} <= set(TARGETS)
    assert len(UNCLEAR) <= 10
    assert set(KNOWN) <= {(p.target, p.what) for p in PROBES}


def _marks(probe: Probe) -> list:
    reason = KNOWN.get((probe.target, probe.what))
    return [pytest.mark.xfail(reason=reason, strict=True)] if reason else []


@pytest.mark.parametrize("probe", [pytest.param(p, id=_id(p), marks=_marks(p)) for p in PROBES])
def test_probe(probe):
    kind, message = outcome(probe)
    if kind == "unclear" and (probe.target, probe.what) in UNCLEAR:
        return
    assert kind == "ok", f"{_id(probe)} (bad: {probe.bad}): {kind}: {message[:300]}"


def report() -> collections.Counter:
    counts = collections.Counter()
    for probe in PROBES:
        kind, message = outcome(probe)
        counts[kind] += 1
        if kind != "ok":
            print(f"{kind:22} {_id(probe)} (bad: {probe.bad}): {message[:160]!r}")
    return counts


if __name__ == "__main__":
    counts = report()
    print(f"{len(PROBES)} calls:", dict(counts))
