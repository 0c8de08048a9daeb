"""Synthetic data for the book: nothing is downloaded, everything is made here.

Shape legend: T tokens, D embedding dim.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

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


# --- a task where attention heads must specialise ---------------------------------
#
# Shape legend: B batch, T sequence length, V vocabulary size, E embed dim.


def reverse_and_shift_batch(batch_size: int, seq_len: int, vocab_size: int,
                            generator: torch.Generator | None = None):
    """Random sequences ``x (B, T)`` and two targets per position ``(B, T, 2)``:
    ``y[..., 0]`` is the sequence reversed, ``x[T-1-i]``; ``y[..., 1]`` is the previous
    token, ``x[i-1]`` (token 0 for the first position).

    Solving both at once needs two different look-ups at every position: an
    anti-diagonal one and a one-step-back one. One head cannot do both well.
    """
    x = torch.randint(1, vocab_size, (batch_size, seq_len), generator=generator)  # (B, T)
    reverse = x.flip(-1)
    previous = torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], dim=1)
    return x, torch.stack([reverse, previous], dim=-1)  # (B, T), (B, T, 2)


#: The ways :class:`TinyTransformer` can put position information in.
POSITIONAL = ("learned", "sinusoidal", "rope", "alibi", "none")


class TinyTransformer(torch.nn.Module):
    """Transformer blocks (pre-norm, as in GPT-2) reading a token sequence and
    predicting ``num_outputs`` tokens at each position. Every attention layer returns
    its weights, so chapters can draw them.

    ``positional`` picks how order enters (see :data:`POSITIONAL`): learned absolute
    embeddings for ``max_len`` positions, sinusoidal ones added to the input, RoPE on
    queries and keys, ALiBi biases on the scores, or none. ``causal`` masks the future.
    """

    def __init__(self, vocab_size: int, max_len: int, embed_dim: int = 64, num_heads: int = 2,
                 num_layers: int = 1, num_outputs: int = 2, num_kv_heads: int | None = None,
                 positional: str = "learned", causal: bool = False):
        super().__init__()
        from .multihead import MultiHeadAttention

        if positional not in POSITIONAL:
            raise ValueError(f"positional must be one of {POSITIONAL}, got {positional!r}")
        self.vocab_size, self.num_outputs, self.num_heads = vocab_size, num_outputs, num_heads
        self.positional, self.causal, self.max_len = positional, causal, max_len
        self.token = torch.nn.Embedding(vocab_size, embed_dim)
        self.position = torch.nn.Embedding(max_len, embed_dim) if positional == "learned" else None
        self.blocks = torch.nn.ModuleList()
        for _ in range(num_layers):
            self.blocks.append(torch.nn.ModuleDict({
                "norm1": torch.nn.LayerNorm(embed_dim),
                "attn": MultiHeadAttention(embed_dim, num_heads, num_kv_heads,
                                           rope=positional == "rope"),
                "norm2": torch.nn.LayerNorm(embed_dim),
                "mlp": torch.nn.Sequential(torch.nn.Linear(embed_dim, 4 * embed_dim), torch.nn.GELU(),
                                           torch.nn.Linear(4 * embed_dim, embed_dim)),
            }))
        self.norm = torch.nn.LayerNorm(embed_dim)
        self.head = torch.nn.Linear(embed_dim, num_outputs * vocab_size)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Token embeddings plus absolute positions, if any: ``(B, T)`` -> ``(B, T, E)``."""
        from .positional import sinusoidal_encoding

        T = x.size(1)
        h = self.token(x)  # (B, T, E)
        if self.positional == "learned":
            if T > self.max_len:
                raise ValueError(f"learned positions stop at max_len={self.max_len}; "
                                 f"got a sequence of {T} tokens")
            h = h + self.position(torch.arange(T, device=x.device))
        elif self.positional == "sinusoidal":
            h = h + sinusoidal_encoding(T, h.size(-1)).to(h.device)
        return h

    def forward(self, x: torch.Tensor):
        """``x (B, T)`` -> ``(logits (B, T, num_outputs, V), [weights (B, H, T, T) per layer])``."""
        from .positional import alibi_bias

        B, T = x.shape
        h = self.embed(x)  # (B, T, E)
        bias = alibi_bias(self.num_heads, T).to(h.device) if self.positional == "alibi" else None
        all_weights = []
        for block in self.blocks:
            attended, weights = block["attn"](block["norm1"](h), attn_mask=bias, is_causal=self.causal)
            h = h + attended
            h = h + block["mlp"](block["norm2"](h))
            all_weights.append(weights)
        logits = self.head(self.norm(h)).view(B, T, self.num_outputs, self.vocab_size)
        return logits, all_weights


def token_loss(model: TinyTransformer, batch: tuple) -> torch.Tensor:
    """Cross-entropy of ``model(x)`` against ``y`` for a batch ``(x (B, T), y (B, T, ...))``."""
    x, y = batch
    logits, _ = model(x)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, model.vocab_size), y.reshape(-1))


def train_model(model: torch.nn.Module, make_batch: Callable[[torch.Generator], Any],
                steps: int, lr: float = 3e-3, seed: int = 0, progress: bool = True,
                desc: str = "training", loss_fn: Callable[[Any, Any], torch.Tensor] = token_loss):
    """Train ``model`` with AdamW on batches from ``make_batch(generator)``, seeded;
    ``loss_fn(model, batch)`` gives the loss (default :func:`token_loss`). Returns
    ``(model in eval mode, losses)``.

    ``progress`` shows a text tqdm bar on stdout (it renders in notebooks, terminals
    and the built website).
    """
    import sys

    from tqdm.std import tqdm

    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    tqdm.monitor_interval = 0  # no monitor thread inside a notebook kernel
    bar = tqdm(range(steps), desc=desc, file=sys.stdout, disable=not progress,
               mininterval=5.0, ncols=80, ascii=True)
    threads = torch.get_num_threads()
    # Tiny matrices gain nothing from a second thread, and OpenMP's barriers between
    # threads make each step up to 10x slower when another process shares the cores.
    torch.set_num_threads(1)
    try:
        for _ in bar:
            loss = loss_fn(model, make_batch(g))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    finally:
        torch.set_num_threads(threads)
    bar.close()
    return model.eval(), losses


def train_reverse_and_shift(num_heads: int = 2, seq_len: int = 8, vocab_size: int = 12,
                            steps: int = 400, batch_size: int = 128, embed_dim: int = 64,
                            lr: float = 3e-3, seed: int = 0, progress: bool = True,
                            model: TinyTransformer | None = None, num_kv_heads: int | None = None):
    """Train a :class:`TinyTransformer` on :func:`reverse_and_shift_batch`, seeded.

    Pass ``model`` to continue training one (e.g. uptraining after a conversion).
    Returns ``(model, losses)``; the model is in eval mode.
    """
    if model is None:
        torch.manual_seed(seed)
        model = TinyTransformer(vocab_size, seq_len, embed_dim, num_heads, num_kv_heads=num_kv_heads)
    return train_model(model, lambda g: reverse_and_shift_batch(batch_size, seq_len, vocab_size, g),
                       steps, lr, seed, progress, desc=f"training, {model.num_heads} head(s)")


@torch.no_grad()
def reverse_and_shift_accuracy(model: TinyTransformer, seq_len: int, vocab_size: int,
                               num_sequences: int = 2000, seed: int = 1234) -> dict[str, float]:
    """Per-token accuracy of each target on fresh sequences (chance is 1 / (V - 1))."""
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
    B, H, T, _ = weights.shape
    i = torch.tensor([q for q in range(1, T) if T - 1 - q != q - 1])  # queries with distinct targets
    anti = weights[:, :, i, T - 1 - i].mean(dim=(0, 2))  # (H,)
    prev = weights[:, :, i, i - 1].mean(dim=(0, 2))  # (H,)
    return [{"reverse": anti[h].item(), "previous": prev[h].item()} for h in range(H)]


def copy_back_batch(batch_size: int, seq_len: int, vocab_size: int, offset: int = 2,
                    generator: torch.Generator | None = None):
    """Random ``x (B, T)`` and the target ``y (B, T, 1)`` = the token ``offset`` places
    back, ``x[i - offset]`` (token 0 where there is none). The rule is *relative*:
    it reads the same at every position, so a model that learned it could in
    principle apply it to sequences longer than those it was trained on."""
    x = torch.randint(1, vocab_size, (batch_size, seq_len), generator=generator)  # (B, T)
    y = torch.zeros_like(x)
    y[:, offset:] = x[:, :-offset]
    return x, y.unsqueeze(-1)  # (B, T), (B, T, 1)


@torch.no_grad()
def token_accuracy(model: TinyTransformer, x: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of target tokens ``y (B, T, num_outputs)`` the model predicts."""
    return (model(x)[0].argmax(-1) == y).float().mean().item()
