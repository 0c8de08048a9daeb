"""Synthetic data for the book: nothing is downloaded, everything is made here.

Shape legend: T tokens, D embedding dim.
"""

from __future__ import annotations

import torch

# A tiny hand-made lexicon: each word is a sum of a few meaning directions.
# Words that share a direction ("cat" and "dog" are both animals) get similar vectors.
LEXICON: dict[str, tuple[str, ...]] = {
    "the": ("determiner",), "a": ("determiner",),
    "cat": ("noun", "animal"), "dog": ("noun", "animal"),
    "mat": ("noun", "thing"), "sofa": ("noun", "thing"),
    "sat": ("verb", "past"), "lay": ("verb", "past"), "was": ("verb", "past"),
    "on": ("preposition",), "under": ("preposition",),
    "because": ("conjunction",),
    "it": ("pronoun", "animal", "thing"),  # could stand for either noun
    "tired": ("adjective", "animal"), "warm": ("adjective", "thing"),
}
FEATURES = sorted({f for feats in LEXICON.values() for f in feats} | {"unknown"})


def tokenize(sentence: str) -> list[str]:
    """Lower-case words split on spaces: ``"The cat sat" -> ["the", "cat", "sat"]``."""
    tokens = sentence.lower().replace(",", " ").replace(".", " ").split()
    if not tokens:
        raise ValueError(f"sentence must contain at least one word, got {sentence!r}")
    return tokens


def word_embeddings(tokens: list[str], d_model: int = 16, noise: float = 0.3,
                    seed: int = 0) -> torch.Tensor:
    """Embeddings ``(T, d_model)`` built from :data:`LEXICON` meaning directions.

    Each meaning is a fixed random vector with unit-variance entries (seeded); a word
    is the normalised sum of its meanings plus a little word-specific noise, so
    repeated words get equal vectors and related words similar ones.
    Words outside the lexicon get the ``unknown`` direction.
    """
    g = torch.Generator().manual_seed(seed)
    directions = torch.randn(len(FEATURES), d_model, generator=g)  # (F, D), unit variance
    vocab = sorted(set(LEXICON) | set(tokens))
    word_noise = {w: noise * torch.randn(d_model, generator=torch.Generator().manual_seed(
        seed * 7919 + sum(map(ord, w)) * 31 + len(w))) for w in vocab}
    rows = []
    for word in tokens:
        feats = LEXICON.get(word, ("unknown",))
        meaning = sum(directions[FEATURES.index(f)] for f in feats) / len(feats) ** 0.5
        rows.append(meaning + word_noise[word])  # about unit variance per component
    return torch.stack(rows)  # (T, D)
