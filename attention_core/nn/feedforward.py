"""Chapter 6: the Transformer block's position-wise feed-forward network, plain (Vaswani et
al., 2017) and gated (GLU variants, Shazeer 2020: SwiGLU in Llama, Qwen and DeepSeek,
GeGLU in Gemma).

Shape legend: B batch, T sequence length, D model width (``embed_dim``), F hidden width
(``ff_dim``, d_ff).

With row vectors, as everywhere in the book, the plain network is
``FFN(x) = act(x W_1 + b_1) W_2 + b_2`` and the gated one
``FFN(x) = (act(x W_gate) * (x W_up)) W_down``: a second projection of the input, ``x
W_up``, multiplies the activation elementwise (the gate). It has three matrices of ``D x
F`` where the plain one has two, so at ``F = 8/3 D`` it has the plain network's weights at
``F = 4 D`` (Shazeer's comparison; Llama rounds ``8/3 D`` up, and scales it in larger models).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ._checks import (
    check_bool,
    check_device,
    check_dropout,
    check_dtype,
    check_positive_int,
    check_tensor,
    check_tensor_size,
)

__all__ = ["ACTIVATIONS", "FEED_FORWARDS", "GATES", "GatedFeedForward", "feed_forward"]

ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}
"""The plain feed-forward network's nonlinearity, by name."""

GATES = {"swiglu": F.silu, "geglu": F.gelu}
"""The gated feed-forward network's nonlinearity on the gate, by name. Swish with beta 1
(SiLU, ``x * sigmoid(x)``) for SwiGLU, the exact GELU for GeGLU (Gemma uses its tanh
approximation)."""

FEED_FORWARDS = (*ACTIVATIONS, *GATES)
"""Every name ``TransformerBlock(activation=...)`` takes, the plain ones first."""


def feed_forward(embed_dim: int, ff_dim: int, activation: str = "gelu", dropout: float = 0.0,
                 bias: bool = True, device=None, dtype=None) -> nn.Module:
    """The block's feed-forward network by ``activation`` name: ``"relu"`` or ``"gelu"``
    give the plain ``nn.Sequential(Linear(D, F), act, Dropout, Linear(F, D))`` (the
    original Transformer's and ``nn.TransformerEncoderLayer``'s), ``"swiglu"`` or
    ``"geglu"`` a :class:`GatedFeedForward`, whose dropout acts on the gated hidden layer as the
    plain one's acts after its activation."""
    check_positive_int("embed_dim", embed_dim)
    check_positive_int("ff_dim", ff_dim)
    check_dropout("dropout", dropout)
    check_bool("bias", bias)
    check_tensor_size("ff_dim", (ff_dim, embed_dim), dtype)
    factory_kwargs = {"device": device, "dtype": dtype}
    if activation in GATES:
        return GatedFeedForward(embed_dim, ff_dim, activation, bias=bias, dropout=dropout, **factory_kwargs)
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {list(FEED_FORWARDS)}, got {activation!r}")
    return nn.Sequential(nn.Linear(embed_dim, ff_dim, bias=bias, **factory_kwargs), ACTIVATIONS[activation](),
                         nn.Dropout(dropout), nn.Linear(ff_dim, embed_dim, bias=bias, **factory_kwargs))


class GatedFeedForward(nn.Module):
    """A GLU-variant feed-forward network (Shazeer, 2020) on ``x (B, T, D)``::

        down_proj(gate(gate_proj(x)) * up_proj(x))

    ``gate`` is SiLU for ``"swiglu"`` and GELU for ``"geglu"`` (:data:`GATES`). The
    submodules carry HuggingFace's names (``gate_proj``, ``up_proj``: ``Linear(D, F)``;
    ``down_proj``: ``Linear(F, D)``), so a Llama MLP's weights load by name. ``bias=False``
    is the paper's and Llama's choice. ``dropout`` acts on the gated hidden layer ``(B, T, F)``,
    where the plain feed-forward network has its own (Llama has none: 0).
    """

    def __init__(self, embed_dim: int, ff_dim: int, activation: str = "swiglu", bias: bool = False,
                 device=None, dtype=None, dropout: float = 0.0):
        super().__init__()
        check_positive_int("embed_dim", embed_dim)
        check_positive_int("ff_dim", ff_dim)
        check_bool("bias", bias)
        check_dropout("dropout", dropout)
        check_tensor_size("ff_dim", (ff_dim, embed_dim), dtype)
        if activation not in GATES:
            raise ValueError(f"activation must be one of {sorted(GATES)}, got {activation!r}")
        self.activation = activation
        factory_kwargs = {"device": device, "dtype": dtype}
        self.gate_proj = nn.Linear(embed_dim, ff_dim, bias=bias, **factory_kwargs)  # W_gate
        self.up_proj = nn.Linear(embed_dim, ff_dim, bias=bias, **factory_kwargs)  # W_up
        self.down_proj = nn.Linear(ff_dim, embed_dim, bias=bias, **factory_kwargs)  # W_down
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x (B, T, D)`` -> ``(B, T, D)``, each position alone."""
        weight = self.gate_proj.weight
        check_tensor("x", x)
        if x.size(-1) != weight.size(1):
            raise ValueError(f"x must end in embed_dim={weight.size(1)}, got shape {tuple(x.shape)}")
        check_dtype("x", x, weight.dtype, "the module's weights")
        check_device("x", x, weight.device, "the module's weights")
        hidden = GATES[self.activation](self.gate_proj(x)) * self.up_proj(x)  # (B, T, F): gated
        return self.down_proj(self.dropout(hidden))  # (B, T, F) -> (B, T, D)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"
