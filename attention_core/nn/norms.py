"""Chapter 6: the normalisations of today's blocks: RMSNorm (Zhang and Sennrich, 2019) and
QK-norm, RMSNorm over each head's queries and keys before the scores (Dehghani et al.,
2023; used by OLMo 2, Gemma 3 and Qwen3).

Shape legend: B batch, T sequence length, D model width (``embed_dim``), H heads, E head
dim (``head_dim``, d_k).

LayerNorm subtracts each token's mean, divides by its standard deviation, then applies a
gain and a bias. RMSNorm skips the mean and the bias: it divides by the root mean square,
``x / sqrt(mean(x**2) + eps) * weight``, so it only rescales a token's vector and, with
the gain at 1, keeps its direction. :class:`RMSNorm` equals ``torch.nn.RMSNorm`` and
Llama's ``LlamaRMSNorm`` in float32 (in bfloat16 they can differ by one rounding: Llama
casts back before multiplying by the gain, this multiplies first).
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_bool, check_device, check_eps, check_positive_int, check_tensor, check_tensor_size

__all__ = ["QKNormLinear", "RMSNorm", "rms_norm"]


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    """``x (..., D)`` divided by its root mean square over the last axis, times ``weight
    (D,)``: ``x / sqrt(mean(x**2) + eps) * weight``. Computed in float32 (at least) and
    returned in ``x``'s dtype, so half-precision inputs do not overflow in ``x**2``."""
    check_tensor("x", x)
    check_eps("eps", eps)
    return _rms_norm(x, weight, eps)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """:func:`rms_norm`'s maths, on arguments already checked (:class:`RMSNorm` checks its
    input once, not twice, on every call of a decoder's step)."""
    dtype = torch.promote_types(x.dtype, torch.float32)
    h = x.to(dtype)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)  # (..., D): root mean square 1
    return (h if weight is None else h * weight.to(dtype)).to(x.dtype)


class RMSNorm(nn.Module):
    """RMSNorm over the last axis, of width ``dim``, with a learned gain ``weight (dim,)``
    (ones at the start) and no bias: :func:`rms_norm`. The same as ``torch.nn.RMSNorm(dim,
    eps)``; ``eps`` defaults to Llama's 1e-6."""

    def __init__(self, dim: int, eps: float = 1e-6, device=None, dtype=None):
        super().__init__()
        check_positive_int("dim", dim)
        check_eps("eps", eps)
        check_tensor_size("dim", (dim,), dtype)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x (..., dim)`` -> ``(..., dim)``."""
        check_tensor("x", x)
        check_device("x", x, self.weight.device, "the module's weight")
        if x.size(-1) != self.weight.numel():
            raise ValueError(f"x must end in dim={self.weight.numel()}, got shape {tuple(x.shape)}")
        return _rms_norm(x, self.weight, self.eps)  # eps was checked when the module was built

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps}"


class QKNormLinear(nn.Linear):
    """QK-norm's projection: ``nn.Linear(in_features, num_heads * head_dim)``, then
    :class:`RMSNorm` over each head's ``head_dim`` features (one gain ``norm.weight
    (head_dim,)`` shared by the heads, as in Gemma 3 and Qwen3; OLMo 2 normalises the whole
    projection instead).

    Built as ``attn.q_proj`` and ``attn.k_proj`` of a
    :class:`~attention_core.nn.multihead.MultiHeadAttention` (by ``TransformerBlock(...,
    qk_norm=True)``), it normalises every query and key before RoPE and the scores: each
    head's ``|q| |k|`` is then at most ``head_dim`` times its gains, so the attention logits
    cannot grow with ``W_q`` and ``W_k``: only the gains can raise them.
    """

    def __init__(self, in_features: int, num_heads: int, head_dim: int, bias: bool = True,
                 eps: float = 1e-6, device=None, dtype=None):
        check_positive_int("in_features", in_features)
        check_positive_int("num_heads", num_heads)
        check_positive_int("head_dim", head_dim)
        check_bool("bias", bias)
        check_tensor_size("in_features", (num_heads * head_dim, in_features), dtype)
        super().__init__(in_features, num_heads * head_dim, bias=bias, device=device, dtype=dtype)
        self.head_dim = head_dim
        self.norm = RMSNorm(head_dim, eps, device=device, dtype=dtype)

    @classmethod
    def from_linear(cls, linear: nn.Linear, head_dim: int, eps: float = 1e-6) -> QKNormLinear:
        """``linear``'s own weight and bias (the same tensors), followed by a fresh norm:
        built on the meta device first, so it draws no random numbers."""
        if linear.out_features % head_dim:
            raise ValueError(f"head_dim={head_dim} must divide out_features={linear.out_features}")
        ours = cls(linear.in_features, linear.out_features // head_dim, head_dim, linear.bias is not None,
                   eps, device="meta")
        ours.weight, ours.bias = linear.weight, linear.bias
        ours.norm = RMSNorm(head_dim, eps, device=linear.weight.device, dtype=linear.weight.dtype)
        return ours

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x (B, T, in_features)`` -> ``(B, T, H * E)``, each head's ``E`` features with
        root mean square 1 (times the gain)."""
        y = super().forward(x).unflatten(-1, (-1, self.head_dim))  # (B, T, H * E) -> (B, T, H, E)
        return self.norm(y).flatten(-2)  # (B, T, H, E) -> (B, T, H * E)
