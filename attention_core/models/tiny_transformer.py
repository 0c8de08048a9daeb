"""Chapters 4, 6, 10 and 12: small transformers built from the package's attention,
for the chapters to train.

:class:`TinyTransformer` stacks pre-norm (or post-norm) blocks
(:class:`~attention_core.nn.block.TransformerBlock`) over token embeddings and picks how
token order enters from :data:`POSITIONAL`. The maths modules never import this one:
models use attention, not the other way round.

Shape legend: B batch, T sequence length, D model width (``embed_dim``), H heads,
``vocab_size`` vocabulary size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..nn._checks import check_is_causal, check_positive_int, check_tensor_size, check_token_ids
from ..nn.attention_functions import AttentionFunction
from ..nn.block import TransformerBlock
from ..nn.positional import alibi_bias, sinusoidal_encoding

__all__ = ["LearnedPositions", "SinusoidalPositions", "Positional", "POSITIONAL", "TinyTransformer"]

# --- how token order enters ------------------------------------------------------


class LearnedPositions(nn.Module):
    """A learned vector for each of ``max_len`` positions, added to the input (GPT-2).
    It knows nothing about positions it never saw, so longer inputs are refused."""

    def __init__(self, max_len: int, embed_dim: int):
        super().__init__()
        check_positive_int("max_len", max_len)
        check_positive_int("embed_dim", embed_dim)
        check_tensor_size("max_len", (max_len, embed_dim))
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, embed_dim)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """``h (B, T, D)`` -> ``h`` plus the first T position vectors, ``(B, T, D)``."""
        T = h.size(1)
        if T > self.max_len:
            raise ValueError(f"learned positions stop at max_len={self.max_len}; "
                             f"got a sequence of {T} tokens")
        return h + self.embedding(torch.arange(T, device=h.device))


class SinusoidalPositions(nn.Module):
    """Vaswani et al.'s (2017) fixed sinusoids added to the input. No parameters, and no
    length limit: ``max_len`` is accepted for the common signature and ignored."""

    def __init__(self, max_len: int, embed_dim: int):
        super().__init__()
        check_positive_int("max_len", max_len)  # unused, but a wrong one is still a mistake
        check_positive_int("embed_dim", embed_dim)
        if embed_dim % 2:  # checked here, not first in forward under another name
            raise ValueError(f"embed_dim must be even for sinusoidal positions (the d_model of "
                             f"sinusoidal_encoding: sine and cosine pairs), got {embed_dim}")

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """``h (B, T, D)`` -> ``h + PE[:T]``, ``(B, T, D)``."""
        return h + sinusoidal_encoding(h.size(1), h.size(-1), device=h.device, dtype=h.dtype)


@dataclass(frozen=True)
class Positional:
    """Where one positional scheme puts order into the model. There are three places,
    and each scheme uses at most one:

    * ``add_to_input(max_len, embed_dim)`` builds a module ``h (B, T, D) -> (B, T, D)``
      that adds position vectors to the token embeddings;
    * ``rotary``: RoPE rotates queries and keys inside every attention layer;
    * ``score_bias(num_heads, T, device=, dtype=)`` gives a bias ``(H, T, T)`` added to
      the attention scores.
    """

    add_to_input: Callable[[int, int], nn.Module] | None = None
    rotary: bool = False
    score_bias: Callable[..., torch.Tensor] | None = None


POSITIONAL: dict[str, Positional] = {
    "learned": Positional(add_to_input=LearnedPositions),
    "sinusoidal": Positional(add_to_input=SinusoidalPositions),
    "rope": Positional(rotary=True),
    "alibi": Positional(score_bias=alibi_bias),
    "none": Positional(),
}
"""The ways :class:`TinyTransformer` can put position information in, by name."""


class TinyTransformer(nn.Module):
    """Pre-norm transformer blocks (:class:`~attention_core.nn.block.TransformerBlock`, GELU MLP
    of width 4D) reading a token sequence and
    predicting ``num_outputs`` tokens at each position. Every attention layer returns
    its weights, so chapters can draw them.

    ``positional`` picks how order enters (a name in :data:`POSITIONAL`): learned
    absolute embeddings for ``max_len`` positions, sinusoidal ones added to the input,
    RoPE on queries and keys, ALiBi biases on the scores, or none. ``is_causal`` masks
    the future. ``norm_first=False`` builds post-norm blocks (Vaswani et al., 2017), whose
    stream leaves every block normalised, so the model has no final LayerNorm.
    ``attention`` picks every layer's kernel from
    :data:`~attention_core.nn.attention_functions.ATTENTION_FUNCTIONS` (a name, or a
    kernel with options fixed by ``functools.partial``), as in
    :class:`~attention_core.nn.multihead.MultiHeadAttention`.
    """

    def __init__(self, vocab_size: int, max_len: int, embed_dim: int = 64, num_heads: int = 2,
                 num_layers: int = 1, num_outputs: int = 2, num_kv_heads: int | None = None,
                 positional: str = "learned", is_causal: bool = False, norm_first: bool = True,
                 *, attention: str | AttentionFunction = "eager"):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("max_len", max_len), ("embed_dim", embed_dim),
                            ("num_layers", num_layers), ("num_outputs", num_outputs)):
            check_positive_int(name, value)
        check_tensor_size("vocab_size", (vocab_size, embed_dim))  # the token embedding
        if positional not in POSITIONAL:
            raise ValueError(f"positional must be one of {list(POSITIONAL)}, got {positional!r}")
        check_is_causal(is_causal)
        scheme = POSITIONAL[positional]
        self.vocab_size, self.num_outputs, self.num_heads = vocab_size, num_outputs, num_heads
        self.positional, self.is_causal, self.max_len = positional, is_causal, max_len
        self.token = nn.Embedding(vocab_size, embed_dim)
        self.position = None if scheme.add_to_input is None else scheme.add_to_input(max_len, embed_dim)
        self.blocks = nn.ModuleList(TransformerBlock(embed_dim, num_heads, 4 * embed_dim,
                                                     num_kv_heads=num_kv_heads, rope=scheme.rotary,
                                                     norm_first=norm_first, attention=attention)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(embed_dim) if norm_first else nn.Identity()
        self.head = nn.Linear(embed_dim, num_outputs * vocab_size)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Token embeddings plus absolute positions, if any: ``(B, T)`` -> ``(B, T, D)``."""
        h = self.token(x)  # (B, T, D)
        return h if self.position is None else self.position(h)

    def score_bias(self, T: int, like: torch.Tensor) -> torch.Tensor | None:
        """The scheme's bias on the scores, ``(1, H, T, T)`` on ``like``'s device, or None
        (the batch axis first: attention refuses a mask of 3 dims as ambiguous)."""
        bias = POSITIONAL[self.positional].score_bias
        if bias is None:
            return None
        bias = bias(self.num_heads, T, device=like.device, dtype=like.dtype)  # (H, T, T)
        return bias.unsqueeze(0)  # (H, T, T) -> (1, H, T, T)

    def forward(self, x: torch.Tensor):
        """``x (B, T)`` -> ``(logits (B, T, num_outputs, vocab_size), [weights (B, H, T, T) per layer])``;
        ``T <= max_len`` where positions are learned (:class:`LearnedPositions` says so)."""
        check_token_ids("x", x, self.vocab_size, self.token.weight.device)
        B, T = x.shape
        h = self.embed(x)  # (B, T, D)
        bias = self.score_bias(T, h)  # (1, H, T, T) or None
        all_weights = []
        for block in self.blocks:
            h, weights = block(h, attn_mask=bias, is_causal=self.is_causal)
            all_weights.append(weights)
        logits = self.head(self.norm(h)).view(B, T, self.num_outputs, self.vocab_size)
        return logits, all_weights
