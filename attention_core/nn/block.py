"""Chapter 6 (and 4, 13): the Transformer block: attention and a position-wise
feed-forward network, each adding to a residual stream, with LayerNorm before (pre-norm)
or after (post-norm).

Shape legend: B batch, T sequence length, S memory length (the encoder's output that a
decoder block reads), D model width (``embed_dim``), H heads, F the feed-forward width
(``ff_dim``).

Post-norm is the original Transformer's (Vaswani et al., 2017), ``x = norm(x +
sublayer(x))``; pre-norm, ``x = x + sublayer(norm(x))`` (Xiong et al., 2020; GPT-2),
leaves the residual path an identity from input to output. PyTorch's
``nn.TransformerEncoderLayer`` is the same block: :meth:`TransformerBlock.from_torch`
copies one, and :meth:`TransformerDecoderBlock.from_torch` an ``nn.TransformerDecoderLayer``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ._checks import check_positive_int
from .attention_functions import AttentionFunction
from .kv_cache import HeadCache
from .multihead import MultiHeadAttention

ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}
"""The feed-forward network's nonlinearity, by name."""


def _check_block_args(ff_dim: int, dropout: float, norm_first: bool, activation: str) -> None:
    """Raise unless the block's own arguments are valid (attention checks the rest)."""
    check_positive_int("ff_dim", ff_dim)
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    if isinstance(dropout, bool) or not (isinstance(dropout, (int, float)) and 0.0 <= dropout < 1.0):
        raise ValueError(f"dropout must lie in [0, 1), got {dropout!r}")
    if not isinstance(norm_first, bool):
        raise TypeError(f"norm_first must be a bool, got {type(norm_first).__name__} {norm_first!r}")


def _sublayers(embed_dim: int, num_heads: int, ff_dim: int, dropout: float, activation: str,
               num_kv_heads: int | None, *, rope: bool, attention: str | AttentionFunction,
               layer_norm_eps: float, bias: bool, factory_kwargs: dict
               ) -> tuple[nn.LayerNorm, MultiHeadAttention, nn.LayerNorm, nn.Sequential, nn.Dropout]:
    """The sublayers every block has, ``(norm1, attn, norm2, mlp, dropout)``, built in that
    order (the order in which a seeded initialisation draws their weights).

    ``mlp`` is ``Linear(D, F) -> activation -> Dropout -> Linear(F, D)``; ``dropout`` acts
    on each sublayer's output before it joins the stream.
    """
    norm1 = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias, **factory_kwargs)
    attn = MultiHeadAttention(embed_dim, num_heads, num_kv_heads, bias=bias, dropout=dropout, rope=rope,
                              attention=attention, **factory_kwargs)
    norm2 = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias, **factory_kwargs)
    mlp = nn.Sequential(nn.Linear(embed_dim, ff_dim, bias=bias, **factory_kwargs), ACTIVATIONS[activation](),
                        nn.Dropout(dropout), nn.Linear(ff_dim, embed_dim, bias=bias, **factory_kwargs))
    return norm1, attn, norm2, mlp, nn.Dropout(dropout)


def _block_args(layer: nn.Module, kind: type) -> dict:
    """Raise unless ``layer`` is a batch-first PyTorch ``kind``; return the arguments of a
    block of its shape, on its device and in its dtype."""
    if not isinstance(layer, kind):
        raise TypeError(f"layer must be an nn.{kind.__name__}, got {type(layer).__name__}")
    if not layer.self_attn.batch_first:
        raise ValueError("layer must be built with batch_first=True (the book's (B, T, D) layout)")
    weight = layer.linear1.weight
    return {"embed_dim": layer.self_attn.embed_dim, "num_heads": layer.self_attn.num_heads,
            "ff_dim": layer.linear1.out_features, "dropout": layer.dropout.p,
            "norm_first": layer.norm_first, "activation": _activation_name(layer.activation),
            "layer_norm_eps": layer.norm1.eps, "bias": layer.linear1.bias is not None,
            "device": weight.device, "dtype": weight.dtype}


def _copy_weights(pairs) -> None:
    """Load each PyTorch module's weights into the block's module paired with it."""
    with torch.no_grad():
        for mine, theirs in pairs:
            mine.load_state_dict(theirs.state_dict())


class TransformerBlock(nn.Module):
    """One Transformer block over a residual stream ``x (B, T, D)``.

    Pre-norm (``norm_first=True``)::

        x = x + dropout(attn(norm1(x)))
        x = x + dropout(mlp(norm2(x)))

    post-norm (``norm_first=False``)::

        x = norm1(x + dropout(attn(x)))
        x = norm2(x + dropout(mlp(x)))

    ``mlp`` is ``Linear(D, ff_dim) -> activation -> Dropout -> Linear(ff_dim, D)``,
    applied to every position alone; ``dropout`` also drops attention weights, as in
    ``nn.TransformerEncoderLayer``. ``num_kv_heads`` (GQA/MQA), ``rope`` and ``attention``
    (the kernel, a name of :data:`~attention_core.nn.attention_functions.ATTENTION_FUNCTIONS`)
    go to :class:`~attention_core.nn.multihead.MultiHeadAttention`; ``layer_norm_eps`` to
    both LayerNorms (BERT uses 1e-12). Since ``dropout`` drops attention weights too, a
    kernel that forms none (``"flash"``, ``"sliding_window"``) trains with ``dropout=0``.
    """

    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int, dropout: float = 0.0,
                 norm_first: bool = True, activation: str = "gelu", num_kv_heads: int | None = None,
                 *, rope: bool = False, attention: str | AttentionFunction = "eager",
                 layer_norm_eps: float = 1e-5, bias: bool = True, device=None, dtype=None):
        super().__init__()
        _check_block_args(ff_dim, dropout, norm_first, activation)
        self.norm_first, self.activation = norm_first, activation
        self.norm1, self.attn, self.norm2, self.mlp, self.dropout = _sublayers(
            embed_dim, num_heads, ff_dim, dropout, activation, num_kv_heads, rope=rope, attention=attention,
            layer_norm_eps=layer_norm_eps, bias=bias, factory_kwargs={"device": device, "dtype": dtype})

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False,
                kv_cache: HeadCache | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x (B, T, D)`` -> ``(output (B, T, D), weights (B, H, T, S))``; ``attn_mask``
        (True = may attend, or a float bias) and ``is_causal`` as in
        :func:`~attention_core.nn.functional.scaled_dot_product_attention`. With ``kv_cache``
        (``block.attn.new_cache(B, max_len)``), ``x`` holds only the new tokens, and they
        attend to all ``S`` tokens cached so far: decoding one token at a time."""
        if self.norm_first:
            attended, weights = self.attn(self.norm1(x), attn_mask=attn_mask, is_causal=is_causal,
                                          kv_cache=kv_cache)
            x = x + self.dropout(attended)  # (B, T, D): attention adds to the stream
            x = x + self.dropout(self.mlp(self.norm2(x)))  # (B, T, D): so does the MLP
        else:
            attended, weights = self.attn(x, attn_mask=attn_mask, is_causal=is_causal, kv_cache=kv_cache)
            x = self.norm1(x + self.dropout(attended))  # (B, T, D): normalise the sum
            x = self.norm2(x + self.dropout(self.mlp(x)))
        return x, weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> TransformerBlock:
        """A copy of PyTorch's ``nn.TransformerEncoderLayer`` (``batch_first=True``,
        either ``norm_first``, ReLU or GELU): same weights, so the same outputs, on the
        layer's device and in its dtype. PyTorch's boolean masks are True where a key is
        *hidden*; pass ``~mask`` (or a padding mask of the book's kind) to this block."""
        ours = cls(**_block_args(layer, nn.TransformerEncoderLayer))
        ours.attn = MultiHeadAttention.from_torch(layer.self_attn)
        _copy_weights(((ours.norm1, layer.norm1), (ours.norm2, layer.norm2),
                       (ours.mlp[0], layer.linear1), (ours.mlp[3], layer.linear2)))
        return ours.train(layer.training)


class TransformerDecoderBlock(nn.Module):
    """The original Transformer's decoder block over a stream ``x (B, T, D)`` that reads
    an encoder's output ``memory (B, S, D)``: causal self-attention, then
    cross-attention (queries from the stream, keys and values from ``memory``), then the
    feed-forward network, each adding to the stream. It has :class:`TransformerBlock`'s
    sublayers, under the same names, plus a third between its two: ``cross_attn`` with
    its norm ``norm_cross``.

    Pre-norm (``norm_first=True``)::

        x = x + dropout(attn(norm1(x)))
        x = x + dropout(cross_attn(norm_cross(x), memory))
        x = x + dropout(mlp(norm2(x)))

    and post-norm normalises each sum instead, as in :class:`TransformerBlock`.
    ``memory`` is used as it comes: with pre-norm the encoder normalises it (its final
    LayerNorm), as in ``nn.Transformer``.
    """

    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int, dropout: float = 0.0,
                 norm_first: bool = True, activation: str = "gelu", num_kv_heads: int | None = None,
                 *, layer_norm_eps: float = 1e-5, bias: bool = True, device=None, dtype=None):
        super().__init__()
        _check_block_args(ff_dim, dropout, norm_first, activation)
        self.norm_first, self.activation = norm_first, activation
        factory_kwargs = {"device": device, "dtype": dtype}
        self.norm1, self.attn, self.norm2, self.mlp, self.dropout = _sublayers(
            embed_dim, num_heads, ff_dim, dropout, activation, num_kv_heads, rope=False, attention="eager",
            layer_norm_eps=layer_norm_eps, bias=bias, factory_kwargs=factory_kwargs)
        self.norm_cross = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.cross_attn = MultiHeadAttention(embed_dim, num_heads, num_kv_heads, bias=bias,
                                             dropout=dropout, **factory_kwargs)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, attn_mask: torch.Tensor | None = None,
                is_causal: bool = False, memory_mask: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """``x (B, T, D)``, ``memory (B, S, D)`` -> ``(output (B, T, D), (self_weights
        (B, H, T, T), cross_weights (B, H, T, S)))``: the weights come as one pair, so the
        call returns ``(output, weights)`` like every block. ``attn_mask`` and
        ``is_causal`` mask the self-attention (a decoder that generates passes
        ``is_causal=True``: no token sees its future); ``memory_mask`` (True = may
        attend, e.g. an encoder padding mask ``(B, 1, 1, S)``) masks the cross-attention."""
        if self.norm_first:
            attended, weights = self.attn(self.norm1(x), attn_mask=attn_mask, is_causal=is_causal)
            x = x + self.dropout(attended)  # (B, T, D)
            read, cross = self.cross_attn(self.norm_cross(x), memory, memory, attn_mask=memory_mask)
            x = x + self.dropout(read)  # (B, T, D): what the decoder read from the encoder
            x = x + self.dropout(self.mlp(self.norm2(x)))
        else:
            attended, weights = self.attn(x, attn_mask=attn_mask, is_causal=is_causal)
            x = self.norm1(x + self.dropout(attended))
            read, cross = self.cross_attn(x, memory, memory, attn_mask=memory_mask)
            x = self.norm_cross(x + self.dropout(read))
            x = self.norm2(x + self.dropout(self.mlp(x)))
        return x, (weights, cross)

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> TransformerDecoderBlock:
        """A copy of PyTorch's ``nn.TransformerDecoderLayer`` (``batch_first=True``, either
        ``norm_first``, ReLU or GELU). PyTorch's ``norm1, norm2, norm3`` are this block's
        ``norm1, norm_cross, norm2``; its boolean masks are True where a key is *hidden*."""
        ours = cls(**_block_args(layer, nn.TransformerDecoderLayer))
        ours.attn = MultiHeadAttention.from_torch(layer.self_attn)
        ours.cross_attn = MultiHeadAttention.from_torch(layer.multihead_attn)
        _copy_weights(((ours.norm1, layer.norm1), (ours.norm_cross, layer.norm2), (ours.norm2, layer.norm3),
                       (ours.mlp[0], layer.linear1), (ours.mlp[3], layer.linear2)))
        return ours.train(layer.training)


def _activation_name(activation) -> str:
    """``"relu"`` or ``"gelu"`` for PyTorch's activation (a function or a module)."""
    for name, module in ACTIVATIONS.items():
        function = getattr(F, name)
        if activation is function or (isinstance(activation, module) and
                                      getattr(activation, "approximate", "none") == "none"):
            return name
    raise ValueError(f"the layer's activation must be relu or gelu (exact), got {activation!r}")
