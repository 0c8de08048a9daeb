"""Chapter 14: how closely the exported in-browser model (:mod:`attention_core.book.web_llm_export`)
computes what the package's float32 ``SmolLM`` does, measured with ONNX Runtime in Python at
the export, from the shipped blocks decoded as the page decodes them: the top-1 agreement
over the book's prose, the greedy answers to :data:`PROMPTS`, the largest attention
difference. ``meta.json`` keeps the figures; the page prints them.

Shape legend: T new tokens, S keys (cached and new).
"""

from __future__ import annotations

import numpy as np
import torch

from ..models import llm_probes, smollm
from ..nn._checks import check_positive_int
from .export_files import ort_session
from .web_llm_export import OUTPUTS, empty_past, load_decoded

__all__ = ["ATTENTION_BOUND", "PROMPTS", "GREEDY_TOKENS", "OrtDecoder", "prose_agreement", "greedy_equal"]

ATTENTION_BOUND = 1e-4
"""The bound the tests hold the exported model's attention weights to, against the float32
package (written in ``tests/conftest.py`` too, and checked equal there): the page says so."""
PROMPTS = ("What is attention in a transformer?", "Write a haiku about the sea.", "Name three colours.",
           "Explain why the sky is blue.", "How do I boil an egg?", "What is 12 times 7?",
           "Translate 'good morning' to French.", "Give me a tip for learning to code.",
           "Who wrote Hamlet?", "Describe a cat in one sentence.")
"""Prompts over which greedy generation of the shipped model is compared with the package's."""
GREEDY_TOKENS = 20


class OrtDecoder:
    """The exported model ``path`` under ``onnxruntime`` (one thread), its weights decoded
    from the shipped blocks beside it (:func:`~attention_core.book.web_llm_export.load_decoded`),
    with its cache, as the page drives it: :meth:`step` feeds new tokens and returns
    ``(logits (vocab_size,), attentions (num_layers, H, T, S))``."""

    def __init__(self, path, config: smollm.SmolLMConfig | None = None):
        if config is not None and not isinstance(config, smollm.SmolLMConfig):
            raise TypeError(f"config must be a SmolLMConfig or None, got {type(config).__name__}")
        self.session = ort_session(load_decoded(path))
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


def _check_pair(decoder, model) -> None:
    if not isinstance(decoder, OrtDecoder):
        raise TypeError(f"decoder must be an OrtDecoder, got {type(decoder).__name__}")
    if not isinstance(model, smollm.SmolLM):
        raise TypeError(f"model must be a SmolLM, got {type(model).__name__}")
