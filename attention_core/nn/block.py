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
Today's block (RMSNorm, a gated feed-forward network, QK-norm, no biases) is a set of
options, and :meth:`TransformerBlock.from_llama` copies ``transformers``' ``LlamaDecoderLayer``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ._checks import check_bool, check_dropout, check_eps, check_positive_int
from .attention_functions import AttentionFunction
from .feedforward import ACTIVATIONS, FEED_FORWARDS, feed_forward
from .kv_cache import HeadCache, is_head_cache
from .latent_attention import LatentKVCache
from .multihead import MultiHeadAttention
from .norms import QKNormLinear, RMSNorm
from .paged import PagedKVCache
from .positional import rotary_layout

__all__ = ["NORMS", "TransformerBlock", "TransformerDecoderBlock"]

NORMS = ("layer", "rms")
"""Names of the block's normalisations, LayerNorm (``nn.LayerNorm``) and
:class:`~attention_core.nn.norms.RMSNorm`."""


def _check_block_args(ff_dim: int, dropout: float, norm_first: bool, activation: str) -> None:
    """Raise unless the block's own arguments are valid (attention checks the rest)."""
    check_positive_int("ff_dim", ff_dim)
    if activation not in FEED_FORWARDS:
        raise ValueError(f"activation must be one of {list(FEED_FORWARDS)}, got {activation!r}")
    check_dropout("dropout", dropout)
    if not isinstance(norm_first, bool):
        raise TypeError(f"norm_first must be a bool, got {type(norm_first).__name__} {norm_first!r}")


def _norm(norm: str, embed_dim: int, eps: float, bias: bool, factory_kwargs: dict) -> nn.Module:
    """A LayerNorm (with a bias if ``bias``) or an RMSNorm (never a bias) of width D."""
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {list(NORMS)}, got {norm!r}")
    if norm == "rms":
        return RMSNorm(embed_dim, eps, **factory_kwargs)
    return nn.LayerNorm(embed_dim, eps=eps, bias=bias, **factory_kwargs)


def _sublayers(embed_dim: int, num_heads: int, ff_dim: int, dropout: float, activation: str,
               num_kv_heads: int | None, *, rope: bool, attention: str | AttentionFunction,
               layer_norm_eps: float, bias: bool, factory_kwargs: dict, norm: str = "layer",
               qk_norm: bool = False, rope_base: float = 10000.0
               ) -> tuple[nn.Module, MultiHeadAttention, nn.Module, nn.Module, nn.Dropout]:
    """The sublayers every block has, ``(norm1, attn, norm2, mlp, dropout)``, built in that
    order (the order in which a seeded initialisation draws their weights).

    ``mlp`` is :func:`~attention_core.nn.feedforward.feed_forward`'s: ``Linear(D, F) ->
    activation -> Dropout -> Linear(F, D)``, or a gated network for ``"swiglu"`` and
    ``"geglu"``; ``dropout`` acts on each sublayer's output before it joins the stream.
    ``qk_norm`` makes ``attn.q_proj`` and ``attn.k_proj``
    :class:`~attention_core.nn.norms.QKNormLinear` around the same weights (no random
    numbers drawn, so a seed gives the same weights with and without it).
    """
    check_positive_int("embed_dim", embed_dim)  # before the first norm is built from it
    check_eps("layer_norm_eps", layer_norm_eps)
    check_bool("bias", bias)
    norm1 = _norm(norm, embed_dim, layer_norm_eps, bias, factory_kwargs)
    attn = MultiHeadAttention(embed_dim, num_heads, num_kv_heads, bias=bias, dropout=dropout, rope=rope,
                              rope_base=rope_base, attention=attention, **factory_kwargs)
    if qk_norm:  # RMSNorm over each head's queries and keys, before RoPE and the scores
        attn.q_proj = QKNormLinear.from_linear(attn.q_proj, attn.head_dim, layer_norm_eps)
        attn.k_proj = QKNormLinear.from_linear(attn.k_proj, attn.head_dim, layer_norm_eps)
    norm2 = _norm(norm, embed_dim, layer_norm_eps, bias, factory_kwargs)
    mlp = feed_forward(embed_dim, ff_dim, activation, dropout, bias, **factory_kwargs)
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


def _check_stream(attn: MultiHeadAttention, x, attn_mask, kv_cache: HeadCache | None = None) -> None:
    """Raise unless the stream ``x (B, T, D)`` and its self-attention ``attn_mask`` fit
    ``attn``, before any sublayer (a pre-norm block's LayerNorm comes first) runs."""
    attn._check_input("x", x)
    if kv_cache is not None and (not is_head_cache(kv_cache)
                                 or isinstance(kv_cache, (PagedKVCache, LatentKVCache))):
        raise TypeError(f"kv_cache must be a head cache (block.attn.new_cache(B, max_len)) or None, "
                        f"got {type(kv_cache).__name__} (a PagedKVCache is read by paged_attention, "
                        "a LatentKVCache by MultiHeadLatentAttention)")
    S = x.size(1) if kv_cache is None else None  # with a cache, S counts the cached tokens too
    attn._check_mask("attn_mask", attn_mask, x.size(0), x.size(1), S)


def _check_memory(cross_attn: MultiHeadAttention, x: torch.Tensor, memory, memory_mask) -> None:
    """Raise unless ``memory (B, S, D)`` is an encoder output for the stream ``x (B, T, D)``
    and ``memory_mask`` broadcasts to the cross-attention's ``(B, H, T, S)``."""
    if memory is None:
        raise TypeError("memory is required: a decoder block reads the encoder's output memory "
                        "(B, S, D) (got None); a block without one is a TransformerBlock")
    cross_attn._check_input("memory", memory)
    if memory.size(0) != x.size(0):
        raise ValueError(f"memory {tuple(memory.shape)} and x {tuple(x.shape)} must share the batch size B")
    cross_attn._check_mask("memory_mask", memory_mask, x.size(0), x.size(1), memory.size(1))


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
    ``nn.TransformerEncoderLayer``. ``num_kv_heads`` (GQA/MQA), ``rope``, ``rope_base`` and
    ``attention`` (the kernel, a name of
    :data:`~attention_core.nn.attention_functions.ATTENTION_FUNCTIONS`) go to
    :class:`~attention_core.nn.multihead.MultiHeadAttention`; ``layer_norm_eps`` to both
    norms (BERT uses 1e-12). Since ``dropout`` drops attention weights too, a kernel that
    forms none (``"flash"``, ``"sliding_window"``) trains with ``dropout=0``.

    Today's block, by option (the defaults are the 2017/GPT-2 block): ``norm="rms"``
    (:class:`~attention_core.nn.norms.RMSNorm` in both places), ``activation="swiglu"`` or
    ``"geglu"`` (:class:`~attention_core.nn.feedforward.GatedFeedForward`), ``qk_norm=True``
    (RMSNorm over each head's queries and keys, :class:`~attention_core.nn.norms.QKNormLinear`)
    and ``bias=False`` (no bias in any linear map or LayerNorm). :meth:`from_llama` builds
    one from a ``transformers`` ``LlamaDecoderLayer``.
    """

    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int, dropout: float = 0.0,
                 norm_first: bool = True, activation: str = "gelu", num_kv_heads: int | None = None,
                 *, rope: bool = False, attention: str | AttentionFunction = "eager",
                 layer_norm_eps: float = 1e-5, bias: bool = True, norm: str = "layer",
                 qk_norm: bool = False, rope_base: float = 10000.0, device=None, dtype=None):
        super().__init__()
        _check_block_args(ff_dim, dropout, norm_first, activation)
        if not isinstance(qk_norm, bool):
            raise TypeError(f"qk_norm must be a bool, got {type(qk_norm).__name__} {qk_norm!r}")
        self.norm_first, self.activation = norm_first, activation
        self.norm1, self.attn, self.norm2, self.mlp, self.dropout = _sublayers(
            embed_dim, num_heads, ff_dim, dropout, activation, num_kv_heads, rope=rope, attention=attention,
            layer_norm_eps=layer_norm_eps, bias=bias, factory_kwargs={"device": device, "dtype": dtype},
            norm=norm, qk_norm=qk_norm, rope_base=rope_base)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False,
                kv_cache: HeadCache | None = None, need_weights: bool = True
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x (B, T, D)`` -> ``(output (B, T, D), weights (B, H, T, S))``; ``attn_mask``
        (True = may attend, or a float bias) and ``is_causal`` as in
        :func:`~attention_core.nn.functional.scaled_dot_product_attention`. With ``kv_cache``
        (``block.attn.new_cache(B, max_len)``), ``x`` holds only the new tokens, and they
        attend to all ``S`` tokens cached so far: decoding one token at a time.
        ``need_weights=False``: the weights are not formed (None), as in
        :meth:`MultiHeadAttention.forward <attention_core.nn.multihead.MultiHeadAttention.forward>`."""
        _check_stream(self.attn, x, attn_mask, kv_cache)
        if self.norm_first:
            attended, weights = self.attn(self.norm1(x), attn_mask=attn_mask, is_causal=is_causal,
                                          kv_cache=kv_cache, need_weights=need_weights)
            x = x + self.dropout(attended)  # (B, T, D): attention adds to the stream
            x = x + self.dropout(self.mlp(self.norm2(x)))  # (B, T, D): so does the MLP
        else:
            attended, weights = self.attn(x, attn_mask=attn_mask, is_causal=is_causal, kv_cache=kv_cache,
                                          need_weights=need_weights)
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

    @classmethod
    def from_llama(cls, layer: nn.Module) -> TransformerBlock:
        """A copy of ``transformers``' ``LlamaDecoderLayer`` (Llama 2 and 3's block, without
        Llama 3.1's RoPE scaling): pre-norm with RMSNorm, SwiGLU, RoPE and GQA, same weights,
        on the layer's device and in its dtype. Call it with ``is_causal=True``; it gives the
        layer's output for positions ``0 .. T-1``.

        HuggingFace's RoPE pairs dimension ``i`` of a head with ``i + E/2``, the book's
        :func:`~attention_core.nn.positional.apply_rotary` pairs ``2i`` with ``2i + 1``: the
        rows of ``q_proj`` and ``k_proj`` are reordered within each head to match
        (:func:`~attention_core.nn.positional.rotary_layout`), which leaves every score
        ``q . k`` unchanged.
        """
        ours = cls(**_llama_args(layer))
        attn, mine = layer.self_attn, ours.attn
        with torch.no_grad():
            for proj, heads in (("q_proj", mine.num_heads), ("k_proj", mine.num_kv_heads)):
                theirs = getattr(attn, proj)
                getattr(mine, proj).weight.copy_(rotary_layout(theirs.weight, heads, "interleaved"))
                if theirs.bias is not None:
                    getattr(mine, proj).bias.copy_(rotary_layout(theirs.bias, heads, "interleaved"))
        _copy_weights(((mine.v_proj, attn.v_proj), (mine.out_proj, attn.o_proj), (ours.mlp, layer.mlp),
                       (ours.norm1, layer.input_layernorm), (ours.norm2, layer.post_attention_layernorm)))
        return ours.train(layer.training)


def _llama_args(layer: nn.Module) -> dict:
    """The arguments of a block shaped like a ``LlamaDecoderLayer``; raise for what the
    block cannot copy (another activation, RoPE scaling, a head_dim other than D / H,
    attention dropout, biases on only some linear maps)."""
    config = getattr(getattr(layer, "self_attn", None), "config", None)
    if config is None or not hasattr(layer, "post_attention_layernorm"):
        raise TypeError(f"layer must be a transformers LlamaDecoderLayer, got {type(layer).__name__}")
    rope = getattr(config, "rope_parameters", None) or {"rope_theta": config.rope_theta,
                                                        "rope_type": "default"}
    heads = config.num_attention_heads
    problems = {"hidden_act must be 'silu'": config.hidden_act != "silu",
                "rope_type must be 'default' (no RoPE scaling)":
                    rope.get("rope_type", "default") != "default",
                "head_dim must be hidden_size / num_attention_heads":
                    layer.self_attn.head_dim * heads != config.hidden_size,
                "attention_dropout must be 0": config.attention_dropout != 0,
                "attention_bias and mlp_bias must agree": config.attention_bias != config.mlp_bias}
    if any(problems.values()):
        raise ValueError("cannot copy this LlamaDecoderLayer: "
                         + "; ".join(p for p, bad in problems.items() if bad))
    weight = layer.self_attn.q_proj.weight
    return {"embed_dim": config.hidden_size, "num_heads": heads, "ff_dim": config.intermediate_size,
            "activation": "swiglu", "num_kv_heads": config.num_key_value_heads, "rope": True,
            "rope_base": float(rope["rope_theta"]), "norm": "rms", "layer_norm_eps": config.rms_norm_eps,
            "bias": bool(config.attention_bias), "device": weight.device, "dtype": weight.dtype}


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
        attend, e.g. an encoder padding mask ``(B, 1, 1, S)``) masks the cross-attention.
        ``memory`` is required (``None`` is refused): a block without it is a
        :class:`TransformerBlock`."""
        _check_stream(self.attn, x, attn_mask)
        _check_memory(self.cross_attn, x, memory, memory_mask)
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
