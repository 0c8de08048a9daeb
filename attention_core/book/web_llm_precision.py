"""Chapter 14: how closely the exported in-browser model (:mod:`attention_core.book.web_llm_export`)
computes what the package's float32 ``SmolLM`` does, measured with ONNX Runtime in Python at
the export, from the shipped blocks decoded as the page decodes them: the top-1 agreement
over the book's prose, the greedy answers to :data:`PROMPTS`, the largest attention
difference, and the logit lens the page computes (the lens graph on the decoder's residual
streams) against the package's :func:`~attention_core.models.circuits.logit_lens` on the same
prose. ``meta.json`` keeps the figures; the page prints them.

Shape legend: T new tokens, S keys (cached and new).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

from ..models import circuits, llm_probes, smollm
from ..nn._checks import check_positive_int
from .export_files import ort_session
from .web_llm_export import LENS_OUTPUTS, OUTPUTS, decode_weights, empty_past, load_decoded

__all__ = ["ATTENTION_BOUND", "PROMPTS", "GREEDY_TOKENS", "OrtDecoder", "prose_agreement", "greedy_equal",
           "lens_agreement", "LENS_FILE"]

ATTENTION_BOUND = 1e-4
"""The bound the tests hold the exported model's attention weights to, against the float32
package (written in ``tests/conftest.py`` too, and checked equal there): the page says so."""
PROMPTS = ("What is attention in a transformer?", "Write a haiku about the sea.", "Name three colours.",
           "Explain why the sky is blue.", "How do I boil an egg?", "What is 12 times 7?",
           "Translate 'good morning' to French.", "Give me a tip for learning to code.",
           "Who wrote Hamlet?", "Describe a cat in one sentence.")
"""Prompts over which greedy generation of the shipped model is compared with the package's."""
GREEDY_TOKENS = 20
LENS_FILE = "lens.onnx"
"""The lens graph's file, beside the decoder's."""


class OrtDecoder:
    """The exported model ``path`` under ``onnxruntime`` (one thread), its weights decoded
    from the shipped blocks beside it (:func:`~attention_core.book.web_llm_export.load_decoded`),
    with its cache, as the page drives it: :meth:`step` feeds new tokens and returns
    ``(logits (vocab_size,), attentions (num_layers, H, T, S))``, and keeps the new tokens'
    residual streams in ``streams (num_layers + 1, T, D)``. With ``lens`` (the lens graph
    ``lens.onnx`` beside ``path``), :meth:`lens` reads streams as the page does."""

    def __init__(self, path, config: smollm.SmolLMConfig | None = None, lens: bool = False):
        if config is not None and not isinstance(config, smollm.SmolLMConfig):
            raise TypeError(f"config must be a SmolLMConfig or None, got {type(config).__name__}")
        if not isinstance(lens, bool):
            raise TypeError(f"lens must be True or False, got {lens!r}")
        path = Path(path) if isinstance(path, (str, os.PathLike)) else path
        manifest = json.loads((path.parent / "meta.json").read_text())["weights"]
        data = decode_weights(path.parent, manifest)
        self.session = ort_session(load_decoded(path, data=data))
        self.lens_session = ort_session(load_decoded(path.parent / LENS_FILE, data=data)) if lens else None
        self.config = smollm.SmolLMConfig() if config is None else config
        self.reset()

    def reset(self) -> None:
        self.keys = self.values = empty_past(self.config).numpy()
        self.streams = None

    def step(self, ids) -> tuple[np.ndarray, np.ndarray]:
        feed = {"input_ids": np.asarray([list(ids)], dtype=np.int64), "past_keys": self.keys,
                "past_values": self.values}
        logits, self.keys, self.values, attentions, self.streams = self.session.run(list(OUTPUTS), feed)
        return logits[0], attentions

    def lens(self, streams) -> tuple[np.ndarray, np.ndarray]:
        """``streams (num_streams, D)`` -> ``(top_ids (num_streams, k), top_probs (num_streams, k))``:
        the lens graph's guesses for each stream, most likely first."""
        if self.lens_session is None:
            raise ValueError("this OrtDecoder was made with lens=False: make it with lens=True")
        feed = {"streams": np.ascontiguousarray(streams, dtype=np.float32)}
        return tuple(self.lens_session.run(list(LENS_OUTPUTS), feed))

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


def prose_agreement(decoder: OrtDecoder, model: smollm.SmolLM, tokenizer,
                    chunk: int = 256) -> tuple[float, float, int]:
    """``(top-1 agreement, max |attention difference|, positions)`` of ``decoder`` against the
    float32 ``model`` over every token of the book's prose
    (:data:`~attention_core.models.llm_probes.BOOK_PROSE`), in chunks of ``chunk`` tokens, each
    read one token a step from an empty cache (as the page decodes)."""
    _check_pair(decoder, model)
    check_positive_int("chunk", chunk)
    ids = smollm.encode(tokenizer, " ".join(llm_probes.BOOK_PROSE))[0].tolist()
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


def greedy_equal(decoder: OrtDecoder, model: smollm.SmolLM, tokenizer) -> int:
    """How many of :data:`PROMPTS` get the same :data:`GREEDY_TOKENS` greedy tokens from
    ``decoder`` as from the package's :func:`~attention_core.models.smollm.generate`."""
    _check_pair(decoder, model)
    equal = 0
    for prompt in PROMPTS:
        ids = smollm.chat_prompt(tokenizer, [{"role": "user", "content": prompt}])
        want = smollm.generate(model, ids, GREEDY_TOKENS)[0, ids.size(1):].tolist()
        equal += decoder.generate(ids[0].tolist(), GREEDY_TOKENS) == want
    return equal


def lens_agreement(decoder: OrtDecoder, model: smollm.SmolLM, tokenizer,
                   chunk: int = 128) -> tuple[float, float, int]:
    """``(share of positions, share of (position, layer) pairs, positions)`` where the page's
    logit lens (``decoder``'s lens graph on the residual streams of its steps, read one token a
    step from an empty cache, as the page reads them) ranks first the token that the package's
    :func:`~attention_core.models.circuits.logit_lens` ranks first: the first share counts the
    positions where the two agree at every one of the ``num_layers + 1`` layers. Over every
    token of the book's prose (:data:`~attention_core.models.llm_probes.BOOK_PROSE`), in chunks
    of ``chunk`` tokens (the package's lens holds ``num_layers + 1`` logit tensors: 0.8 GB for
    128 tokens)."""
    _check_pair(decoder, model)
    check_positive_int("chunk", chunk)
    ids = smollm.encode(tokenizer, " ".join(llm_probes.BOOK_PROSE))[0].tolist()
    every, pairs = 0, 0
    for start in range(0, len(ids), chunk):
        piece = ids[start:start + chunk]
        want = circuits.logit_lens(model, torch.tensor([piece]))[:, 0].argmax(-1).numpy()  # (layers + 1, T)
        decoder.reset()
        for i, token in enumerate(piece):
            decoder.step([token])
            got = decoder.lens(decoder.streams[:, 0])[0][:, 0]  # (layers + 1,): each layer's top id
            same = got == want[:, i]
            every += int(same.all())
            pairs += int(same.sum())
    return every / len(ids), pairs / (len(ids) * (model.config.num_layers + 1)), len(ids)


def _check_pair(decoder, model) -> None:
    if not isinstance(decoder, OrtDecoder):
        raise TypeError(f"decoder must be an OrtDecoder, got {type(decoder).__name__}")
    if not isinstance(model, smollm.SmolLM):
        raise TypeError(f"model must be a SmolLM, got {type(model).__name__}")
