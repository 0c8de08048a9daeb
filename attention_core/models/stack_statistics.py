"""Chapter 6: how the residual stream and the gradients of an untrained stack of blocks
grow with depth, pre-norm against post-norm (the setting of Xiong et al., 2020, at
initialisation).

Shape legend: B batch, T sequence length, D model width (``embed_dim``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..nn._checks import check_positive_int
from ..nn.block import TransformerBlock
from .seeding import seeded

__all__ = ["stack_statistics"]


def stack_statistics(norm_first: bool, depth: int, embed_dim: int = 64, num_heads: int = 4,
                     vocab_size: int = 16, seq_len: int = 16, batch_size: int = 16,
                     seed: int = 0) -> tuple[list[float], list[float]]:
    """An untrained stack of ``depth`` causal blocks (with one final LayerNorm if
    pre-norm) under a next-token-style cross-entropy on random tokens (Xiong et al.,
    2020's setting at initialisation). Returns ``(stream, grads)``: the mean norm of a
    token's vector after the embedding and after each block (``depth + 1`` numbers),
    and the gradient norm of each block's weights (``depth`` numbers)."""
    check_positive_int("depth", depth)
    with seeded(seed):  # the initial weights, without touching the caller's generator
        embed = nn.Embedding(vocab_size, embed_dim)
        blocks = nn.ModuleList(TransformerBlock(embed_dim, num_heads, 4 * embed_dim, norm_first=norm_first)
                               for _ in range(depth))
        final = nn.LayerNorm(embed_dim) if norm_first else nn.Identity()  # pre-norm ends with one norm
        head = nn.Linear(embed_dim, vocab_size)
    g = torch.Generator().manual_seed(seed + 100)
    x, y = torch.randint(0, vocab_size, (2, batch_size, seq_len), generator=g)  # (B, T) each
    h = embed(x)  # (B, T, D)
    stream = [h.norm(dim=-1).mean().item()]
    for block in blocks:
        h, _ = block(h, is_causal=True)
        stream.append(h.norm(dim=-1).mean().item())
    F.cross_entropy(head(final(h)).flatten(0, 1), y.flatten()).backward()
    grads = [torch.cat([p.grad.flatten() for p in b.parameters()]).norm().item() for b in blocks]
    return stream, grads
