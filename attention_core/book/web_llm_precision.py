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
           "LENS_FILE"]

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


def prose_agreement(decoder: OrtDecoder, model: smollm.SmolLM, tokenizer, chunk: int = 128) -> dict:
    """The page's model against the float32 ``model`` over every token of the book's prose
    (:data:`~attention_core.models.llm_probes.BOOK_PROSE`), in chunks of ``chunk`` tokens, each
    read one token a step from an empty cache (as the page decodes), in one pass:

    * ``"top1_agreement"``: the share of positions where both rank the same next token first;
    * ``"max_abs_diff_attention"``: the largest difference of an attention weight;
    * ``"lens_top1_agreement"``: the share of positions where the page's logit lens
      (``decoder``'s lens graph on the residual streams of its steps) ranks first the token
      that the package's :func:`~attention_core.models.circuits.logit_lens` ranks first, at
      every one of the ``num_layers + 1`` layers; ``"lens_top1_agreement_pairs"``: the share
      of (position, layer) pairs where they do;
    * ``"prose_positions"``: how many positions (the package's lens holds ``num_layers + 1``
      logit tensors: 0.8 GB for 128 tokens)."""
    _check_pair(decoder, model)
    check_positive_int("chunk", chunk)
    ids = smollm.encode(tokenizer, " ".join(llm_probes.BOOK_PROSE))[0].tolist()
    agree, worst, every, pairs = 0, 0.0, 0, 0
    for start in range(0, len(ids), chunk):
        piece = torch.tensor([ids[start:start + chunk]])  # (1, T)
        with torch.no_grad():
            _, attentions = model(piece)  # per layer (1, H, T, T)
        want = torch.stack(attentions)[:, 0].numpy()  # (layers, H, T, T)
        want_lens = circuits.logit_lens(model, piece)[:, 0].argmax(-1).numpy()  # (layers + 1, T)
        decoder.reset()
        for i, token in enumerate(piece[0].tolist()):
            got, att = decoder.step([token])  # att (layers, H, 1, i + 1)
            agree += int(got.argmax() == want_lens[-1, i])  # the last layer's lens is the output
            worst = max(worst, float(np.abs(att[:, :, 0] - want[:, :, i, :i + 1]).max()))
            same = decoder.lens(decoder.streams[:, 0])[0][:, 0] == want_lens[:, i]  # (layers + 1,)
            every += int(same.all())
            pairs += int(same.sum())
    return {"top1_agreement": agree / len(ids), "max_abs_diff_attention": worst,
            "lens_top1_agreement": every / len(ids),
            "lens_top1_agreement_pairs": pairs / (len(ids) * (model.config.num_layers + 1)),
            "prose_positions": len(ids)}


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


def _check_pair(decoder, model) -> None:
    if not isinstance(decoder, OrtDecoder):
        raise TypeError(f"decoder must be an OrtDecoder, got {type(decoder).__name__}")
    if not isinstance(model, smollm.SmolLM):
        raise TypeError(f"model must be a SmolLM, got {type(model).__name__}")
