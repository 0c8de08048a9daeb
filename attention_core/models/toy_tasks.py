"""Chapters 1, 3-6, 8-10 and 12: synthetic data for the book, and the small tasks the
chapters train models on: nothing is downloaded, everything is made here. The models are
in :mod:`attention_core.models.tiny_transformer`, the training loop in
:mod:`attention_core.models.training`.

Shape legend: B batch, T sequence length (tokens), D embedding dim (``d_model``),
H heads, ``vocab_size`` vocabulary size.
"""

from __future__ import annotations

import torch

from ..nn._checks import check_positive_int, check_tensor
from .seeding import seeded
from .tiny_transformer import TinyTransformer
from .training import train_model

__all__ = ["LEXICON",
    "tokenize", "word_embeddings", "reverse_and_shift_batch", "train_reverse_and_shift",
    "reverse_and_shift_accuracy", "head_roles", "copy_back_batch", "token_accuracy", "seen_recently_batch",
    "recall_with_updates",
]

#: A tiny hand-made lexicon, in which each word is a sum of a few meaning directions.
#: Words that share a direction ("cat" and "dog" are both animals) get similar vectors.
LEXICON: dict[str, tuple[str, ...]] = {
    "the": ("determiner",), "a": ("determiner",),
    "cat": ("noun", "animal"), "dog": ("noun", "animal"),
    "mat": ("noun", "thing"), "sofa": ("noun", "thing"),
    "sat": ("verb", "past"), "lay": ("verb", "past"), "was": ("verb", "past"),
    "on": ("preposition",), "under": ("preposition",),
    "because": ("conjunction",),
    "it": ("pronoun", "animal", "thing"),  # could stand for either noun
    "tired": ("adjective", "animal"), "warm": ("adjective", "thing"),
    "black": ("adjective",), "which": ("pronoun", "conjunction"),
}
FEATURES = sorted({f for feats in LEXICON.values() for f in feats} | {"unknown"})


def tokenize(sentence: str) -> list[str]:
    """Lower-case words split on spaces: ``"The cat sat" -> ["the", "cat", "sat"]``."""
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a string, got {type(sentence).__name__}")
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
    if not isinstance(tokens, (list, tuple)) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise TypeError(f"tokens must be a non-empty list of words (tokenize(sentence)), got {tokens!r}")
    check_positive_int("d_model", d_model)
    g = torch.Generator().manual_seed(seed)
    directions = torch.randn(len(FEATURES), d_model, generator=g)  # (len(FEATURES), D), unit variance
    vocab = sorted(set(LEXICON) | set(tokens))
    word_noise = {w: noise * torch.randn(d_model, generator=torch.Generator().manual_seed(
        seed * 7919 + sum(map(ord, w)) * 31 + len(w))) for w in vocab}
    rows = []
    for word in tokens:
        feats = LEXICON.get(word, ("unknown",))
        meaning = sum(directions[FEATURES.index(f)] for f in feats) / len(feats) ** 0.5
        rows.append(meaning + word_noise[word])  # about unit variance per component
    return torch.stack(rows)  # (T, D)


# --- a task where attention heads must specialise ---------------------------------


def _check_batch_args(batch_size: int, seq_len: int, vocab_size: int) -> None:
    """Raise unless a batch of ``batch_size`` sequences of ``seq_len`` tokens drawn from
    ``1 .. vocab_size - 1`` can be made (token 0 is kept for "none")."""
    check_positive_int("batch_size", batch_size)
    check_positive_int("seq_len", seq_len)
    check_positive_int("vocab_size", vocab_size, minimum=2)


def reverse_and_shift_batch(batch_size: int, seq_len: int, vocab_size: int,
                            generator: torch.Generator | None = None):
    """Random sequences ``x (B, T)`` and two targets per position ``(B, T, 2)``:
    ``y[..., 0]`` is the sequence reversed, ``x[T-1-i]``; ``y[..., 1]`` is the previous
    token, ``x[i-1]`` (token 0 for the first position).

    Solving both at once needs two different look-ups at every position: an
    anti-diagonal one and a one-step-back one. One head can do both only by splitting
    its weight between the two keys, which a width-64 model manages (chapter 4).
    """
    _check_batch_args(batch_size, seq_len, vocab_size)
    x = torch.randint(1, vocab_size, (batch_size, seq_len), generator=generator)  # (B, T)
    reverse = x.flip(-1)
    previous = torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], dim=1)
    return x, torch.stack([reverse, previous], dim=-1)  # (B, T), (B, T, 2)


def train_reverse_and_shift(num_heads: int = 2, seq_len: int = 8, vocab_size: int = 12,
                            steps: int = 400, batch_size: int = 128, embed_dim: int = 64,
                            lr: float = 3e-3, seed: int = 0, progress: bool = True,
                            model: TinyTransformer | None = None, num_kv_heads: int | None = None,
                            generator: torch.Generator | None = None):
    """Train a :class:`~attention_core.models.tiny_transformer.TinyTransformer` on
    :func:`reverse_and_shift_batch`, seeded.

    Pass ``model`` to continue training one (e.g. uptraining after a conversion).
    ``seed`` seeds a new model's weights (:func:`~attention_core.models.seeding.seeded`) and,
    without a ``generator``, the batches; torch's global generator is left as it was.
    Returns ``(model, losses)``; the model is in eval mode.
    """
    if model is None:
        with seeded(seed):
            model = TinyTransformer(vocab_size, seq_len, embed_dim, num_heads, num_kv_heads=num_kv_heads)
    return train_model(model, lambda g: reverse_and_shift_batch(batch_size, seq_len, vocab_size, g),
                       steps, lr, seed, progress, desc=f"training, {model.num_heads} head(s)",
                       generator=generator)


@torch.no_grad()
def reverse_and_shift_accuracy(model: TinyTransformer, seq_len: int, vocab_size: int,
                               num_sequences: int = 2000, seed: int = 1234) -> dict[str, float]:
    """Per-token accuracy of each target on fresh sequences (chance is 1 / (vocab_size - 1))."""
    if not isinstance(model, TinyTransformer):
        raise TypeError(f"model must be a TinyTransformer, got {type(model).__name__}")
    x, y = reverse_and_shift_batch(num_sequences, seq_len, vocab_size,
                                   torch.Generator().manual_seed(seed))
    predictions = model(x)[0].argmax(-1)  # (B, T, 2)
    correct = (predictions == y).float()
    return {"reverse": correct[..., 0].mean().item(), "previous": correct[..., 1].mean().item()}


def head_roles(weights: torch.Tensor) -> list[dict[str, float]]:
    """How much of each head's weight lies on the anti-diagonal (reverse look-up) and on
    the previous-token diagonal, averaged over queries: ``weights (B, H, T, T)``.

    Queries where the two look-ups point at the same key (i = T/2) are left out.
    """
    check_tensor("weights", weights, min_dim=4)
    square = weights.dim() == 4 and weights.size(-1) == weights.size(-2)
    if not square or weights.size(-1) < 3 or 0 in weights.shape:
        raise ValueError(f"weights must be (B, H, T, T) with B, H >= 1 and T >= 3 (a query whose reverse and "
                         f"previous keys differ), got {tuple(weights.shape)}")
    B, H, T, _ = weights.shape
    i = torch.tensor([q for q in range(1, T) if T - 1 - q != q - 1],
                     device=weights.device)  # queries with distinct targets
    anti = weights[:, :, i, T - 1 - i].mean(dim=(0, 2))  # (H,)
    prev = weights[:, :, i, i - 1].mean(dim=(0, 2))  # (H,)
    return [{"reverse": anti[h].item(), "previous": prev[h].item()} for h in range(H)]


def copy_back_batch(batch_size: int, seq_len: int, vocab_size: int, offset: int = 2,
                    generator: torch.Generator | None = None):
    """Random ``x (B, T)`` and the target ``y (B, T, 1)`` = the token ``offset`` places
    back, ``x[i - offset]`` (token 0 where there is none). The rule is *relative*:
    it reads the same at every position, so a model that learned it could in
    principle apply it to sequences longer than those it was trained on."""
    _check_batch_args(batch_size, seq_len, vocab_size)
    if isinstance(offset, bool) or not isinstance(offset, int) or not 1 <= offset < seq_len:
        raise ValueError(f"offset must be an int in [1, seq_len={seq_len}), got {offset!r}")
    x = torch.randint(1, vocab_size, (batch_size, seq_len), generator=generator)  # (B, T)
    y = torch.zeros_like(x)
    y[:, offset:] = x[:, :-offset]
    return x, y.unsqueeze(-1)  # (B, T), (B, T, 1)


@torch.no_grad()
def token_accuracy(model: TinyTransformer, x: torch.Tensor, y: torch.Tensor,
                   from_position: int = 0) -> float:
    """Fraction of target tokens ``y (B, T, num_outputs)`` the model predicts, counting
    positions ``from_position .. T-1`` only (chapter 10 skips the first ``offset``
    positions of :func:`copy_back_batch`, whose target is the filler token 0). The model
    still reads every position.

    The batch goes through the model 100 sequences at a time: each sequence's logits are
    the same as in one pass, and the attention weights of a chunk stay in the CPU's
    cache (measured on 500 sequences up to 64 tokens, chapter 10's table then: a third
    less time)."""
    if not isinstance(model, TinyTransformer):
        raise TypeError(f"model must be a TinyTransformer, got {type(model).__name__}")
    for name, ids in (("x", x), ("y", y)):
        if not isinstance(ids, torch.Tensor) or ids.is_floating_point():
            got = getattr(ids, "dtype", type(ids).__name__)
            raise TypeError(f"{name} must be a tensor of token ids, got {got}")
    if isinstance(from_position, bool) or not isinstance(from_position, int) or not (
            0 <= from_position < y.shape[1]):
        raise ValueError(f"from_position must be an int in [0, T={y.shape[1]}), "
                         f"got {from_position!r}")
    hits = [model(x_chunk)[0].argmax(-1)[:, from_position:] == y_chunk[:, from_position:]
            for x_chunk, y_chunk in zip(x.split(100), y.split(100))]
    return torch.cat(hits).float().mean().item()


def seen_recently_batch(batch_size: int, seq_len: int, vocab_size: int, lookback: int = 4,
                        generator: torch.Generator | None = None):
    """Chapter 12's sink task: ``x (B, T)`` starts with a beginning-of-sequence token 0,
    then random tokens ``1 .. vocab_size - 1``; the target ``y (B, T, 1)`` is 1 where
    ``x[t]`` also occurs among the ``lookback`` tokens before it, else 0.

    A query with no match has nothing to attend to; a trained model parks that
    attention on the first token, an *attention sink* (Xiao et al. 2023)."""
    _check_batch_args(batch_size, seq_len, vocab_size)
    check_positive_int("lookback", lookback)
    x = torch.randint(1, vocab_size, (batch_size, seq_len), generator=generator)  # (B, T)
    x[:, 0] = 0
    y = torch.zeros_like(x)
    for back in range(1, lookback + 1):
        y[:, back:] |= (x[:, back:] == x[:, :-back]).long()
    return x, y.unsqueeze(-1)  # (B, T), (B, T, 1)


def recall_with_updates(batch_size: int, num_keys: int, num_writes: int, dim: int, seed: int = 0):
    """Chapter 12's associative recall: ``num_writes`` (key, value) writes over
    ``num_keys`` unit keys of ``dim`` numbers, so keys are written again with new values.

    Every key is written once first, in random order, then keys are drawn at random.
    Returns ``keys (B, num_keys, D)``, the written ``k``, ``v (B, num_writes, D)``
    (unit vectors) and ``latest (B, num_keys)``, the write whose value each key holds last.
    """
    for name, value in (("batch_size", batch_size), ("num_keys", num_keys), ("num_writes", num_writes),
                        ("dim", dim)):
        check_positive_int(name, value)
    g = torch.Generator().manual_seed(seed)
    keys = torch.nn.functional.normalize(torch.randn(batch_size, num_keys, dim, generator=g), dim=-1)
    first = torch.rand(batch_size, num_keys, generator=g).argsort(-1)  # (B, num_keys): a permutation
    later = torch.randint(0, num_keys, (batch_size, max(num_writes - num_keys, 0)), generator=g)
    which = torch.cat((first, later), dim=1)[:, :num_writes]  # (B, num_writes): key of each write
    k = torch.gather(keys, 1, which.unsqueeze(-1).expand(-1, -1, dim))  # (B, num_writes, D)
    v = torch.nn.functional.normalize(torch.randn(batch_size, num_writes, dim, generator=g), dim=-1)
    step = torch.arange(num_writes).expand(batch_size, -1)  # (B, num_writes)
    latest = torch.zeros(batch_size, num_keys, dtype=torch.long).scatter_reduce(
        1, which, step, reduce="amax")  # (B, num_keys): the last write of each key
    return keys, k, v, latest
