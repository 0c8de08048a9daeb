"""attention_core.TransformerBlock against PyTorch's nn.TransformerEncoderLayer."""

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from attention_core import TransformerBlock, TransformerDecoderBlock, padding_mask

D, H, F, B, T = 16, 4, 40, 3, 7


def torch_layer(norm_first: bool, activation: str, seed: int = 0, **kwargs) -> nn.TransformerEncoderLayer:
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(D, H, F, dropout=0.0, activation=activation, batch_first=True,
                                       norm_first=norm_first, **kwargs).eval()
    with torch.no_grad():  # LayerNorms away from their identity start, so misplacing one shows
        for norm in (layer.norm1, layer.norm2):
            norm.weight.normal_()
            norm.bias.normal_()
    return layer


def run_torch(layer, x, **kwargs):
    # requires_grad keeps PyTorch on its reference path (its fused fast path zeroes padded rows)
    return layer(x.requires_grad_(), **kwargs).detach()


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_equals_pytorch_layer(norm_first, activation):
    layer = torch_layer(norm_first, activation)
    ours = TransformerBlock.from_torch(layer)
    x = torch.randn(B, T, D)
    out, weights = ours(x)
    assert_close(out, run_torch(layer, x.clone()), rtol=1e-5, atol=1e-5)
    assert weights.shape == (B, H, T, T)
    assert ours.norm_first is norm_first and ours.activation == activation


@pytest.mark.parametrize("norm_first", [True, False])
def test_causal_mask_equals_pytorch(norm_first):
    layer = torch_layer(norm_first, "gelu", seed=1)
    ours = TransformerBlock.from_torch(layer)
    x = torch.randn(B, T, D)
    hidden = nn.Transformer.generate_square_subsequent_mask(T)  # PyTorch: -inf above the diagonal
    expected = run_torch(layer, x.clone(), src_mask=hidden, is_causal=True)
    out, weights = ours(x, is_causal=True)
    assert_close(out, expected, rtol=1e-5, atol=1e-5)
    assert (weights.triu(1) == 0).all()


@pytest.mark.parametrize("norm_first", [True, False])
def test_padding_mask_equals_pytorch_at_real_tokens(norm_first):
    layer = torch_layer(norm_first, "relu", seed=2)
    ours = TransformerBlock.from_torch(layer)
    x = torch.randn(B, T, D)
    lengths = [7, 4, 2]
    keep = padding_mask(lengths, T)  # (B, 1, T): True at real keys (the book's convention)
    expected = run_torch(layer, x.clone(), src_key_padding_mask=~keep[:, 0])  # PyTorch: True = hidden
    out, weights = ours(x, attn_mask=keep.unsqueeze(1))  # (B, 1, 1, T) over heads and queries
    for b, n in enumerate(lengths):
        assert_close(out[b, :n], expected[b, :n], rtol=1e-5, atol=1e-5)
        assert (weights[b, :, :, n:] == 0).all()


def test_boolean_attn_mask_is_the_inverse_of_pytorchs():
    layer = torch_layer(True, "gelu", seed=3)
    ours = TransformerBlock.from_torch(layer)
    x = torch.randn(B, T, D)
    hidden = torch.rand(T, T, generator=torch.Generator().manual_seed(0)) < 0.3
    hidden.fill_diagonal_(False)  # every query keeps itself
    assert_close(ours(x, attn_mask=~hidden)[0], run_torch(layer, x.clone(), src_mask=hidden),
                 rtol=1e-5, atol=1e-5)


def test_pre_norm_keeps_an_identity_path_post_norm_does_not():
    """Pre-norm: output = x + (terms that vanish with the sublayers' output weights).
    Post-norm: the output is a LayerNorm's, whatever the input's scale."""
    torch.manual_seed(4)
    x = 10 * torch.randn(B, T, D)
    for norm_first in (True, False):
        block = TransformerBlock(D, H, F, norm_first=norm_first).eval()
        with torch.no_grad():
            block.attn.out_proj.weight.zero_(), block.attn.out_proj.bias.zero_()
            block.mlp[3].weight.zero_(), block.mlp[3].bias.zero_()
            out, _ = block(x)
        if norm_first:
            assert torch.equal(out, x)
        else:
            assert_close(out.mean(-1), torch.zeros(B, T), atol=1e-5, rtol=0)
            assert_close(out.var(-1, unbiased=False), torch.ones(B, T), atol=1e-3, rtol=0)


def test_dropout_only_in_training():
    torch.manual_seed(5)
    block = TransformerBlock(D, H, F, dropout=0.5)
    x = torch.randn(B, T, D)
    assert not torch.equal(block(x)[0], block(x)[0])  # training: two different draws
    block.eval()
    assert torch.equal(block(x)[0], block(x)[0])


def test_from_torch_keeps_dtype_and_training_mode():
    layer = nn.TransformerEncoderLayer(D, H, F, batch_first=True, dtype=torch.float64)
    ours = TransformerBlock.from_torch(layer)
    assert ours.mlp[0].weight.dtype == torch.float64 and ours.training
    assert ours.mlp[2].p == layer.dropout.p and ours.dropout.p == layer.dropout1.p


def test_on_meta_device_everything_stays_there():
    block = TransformerBlock(D, H, F, device="meta")
    out, weights = block(torch.empty(B, T, D, device="meta"), is_causal=True)
    assert out.device.type == "meta" and weights.device.type == "meta"


@pytest.mark.parametrize("kwargs, message", [
    ({"ff_dim": 0}, "ff_dim"),
    ({"activation": "tanh"}, "activation"),
    ({"dropout": 1.0}, "dropout"),
    ({"norm_first": "yes"}, "norm_first"),
    ({"num_heads": 3}, "num_heads"),
    ({"num_kv_heads": 3}, "num_kv_heads"),
])
def test_bad_arguments_are_named(kwargs, message):
    args = {"embed_dim": D, "num_heads": H, "ff_dim": F, **kwargs}
    with pytest.raises((ValueError, TypeError), match=message):
        TransformerBlock(**args)


def test_from_torch_refuses_what_it_cannot_copy():
    with pytest.raises(TypeError, match="layer"):
        TransformerBlock.from_torch(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="batch_first"):
        TransformerBlock.from_torch(nn.TransformerEncoderLayer(D, H, F))
    with pytest.raises(ValueError, match="activation"):
        TransformerBlock.from_torch(nn.TransformerEncoderLayer(D, H, F, batch_first=True,
                                                               activation=torch.tanh))


# --- the decoder block against nn.TransformerDecoderLayer ---------------------------

S = 5  # encoder length (memory)


def torch_decoder_layer(norm_first: bool, activation: str, seed: int = 0) -> nn.TransformerDecoderLayer:
    torch.manual_seed(seed)
    layer = nn.TransformerDecoderLayer(D, H, F, dropout=0.0, activation=activation, batch_first=True,
                                       norm_first=norm_first).eval()
    with torch.no_grad():  # all three norms away from the identity, so swapping two shows
        for norm in (layer.norm1, layer.norm2, layer.norm3):
            norm.weight.normal_()
            norm.bias.normal_()
    return layer


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_decoder_block_equals_pytorch_layer_causal(norm_first, activation):
    layer = torch_decoder_layer(norm_first, activation)
    ours = TransformerDecoderBlock.from_torch(layer)
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    hidden = nn.Transformer.generate_square_subsequent_mask(T)
    expected = layer(x, memory, tgt_mask=hidden, tgt_is_causal=True).detach()
    out, (weights, cross) = ours(x, memory, is_causal=True)
    assert_close(out, expected, rtol=1e-5, atol=1e-5)
    assert weights.shape == (B, H, T, T) and (weights.triu(1) == 0).all()
    assert cross.shape == (B, H, T, S)
    assert_close(cross.sum(-1), torch.ones(B, H, T))


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_block_memory_padding_equals_pytorch(norm_first):
    layer = torch_decoder_layer(norm_first, "gelu", seed=6)
    ours = TransformerDecoderBlock.from_torch(layer)
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    lengths = [5, 3, 1]
    keep = padding_mask(lengths, S)  # (B, 1, S): True at the encoder's real tokens
    expected = layer(x, memory, memory_key_padding_mask=~keep[:, 0]).detach()
    out, (_, cross) = ours(x, memory, memory_mask=keep.unsqueeze(1))  # (B, 1, 1, S)
    assert_close(out, expected, rtol=1e-5, atol=1e-5)
    for b, n in enumerate(lengths):
        assert (cross[b, :, :, n:] == 0).all()


def test_decoder_block_reads_memory_only_through_cross_attention():
    """Changing the encoder's output changes the decoder's output, and with the
    cross-attention's output weights at zero it no longer does: it is then the encoder
    block with the same weights."""
    torch.manual_seed(7)
    block = TransformerDecoderBlock(D, H, F).eval()
    encoder = TransformerBlock(D, H, F).eval()
    shared = {k: v for k, v in block.state_dict().items() if not k.startswith(("cross_attn.", "norm_cross."))}
    encoder.load_state_dict(shared)  # strict: the shared sublayers have the same names
    x, m1, m2 = torch.randn(B, T, D), torch.randn(B, S, D), torch.randn(B, S, D)
    with torch.no_grad():
        assert not torch.allclose(block(x, m1)[0], block(x, m2)[0])
        block.cross_attn.out_proj.weight.zero_(), block.cross_attn.out_proj.bias.zero_()
        assert torch.equal(block(x, m1)[0], block(x, m2)[0])
        assert torch.equal(block(x, m1)[0], encoder(x)[0])


def test_decoder_block_from_torch_refuses_an_encoder_layer():
    with pytest.raises(TypeError, match="TransformerDecoderLayer"):
        TransformerDecoderBlock.from_torch(nn.TransformerEncoderLayer(D, H, F, batch_first=True))
    with pytest.raises(ValueError, match="batch_first"):
        TransformerDecoderBlock.from_torch(nn.TransformerDecoderLayer(D, H, F))


def test_decoder_block_on_meta_device():
    block = TransformerDecoderBlock(D, H, F, device="meta")
    out, (weights, cross) = block(torch.empty(B, T, D, device="meta"), torch.empty(B, S, D, device="meta"))
    assert {out.device.type, weights.device.type, cross.device.type} == {"meta"}


def test_decoder_block_names_a_bad_memory():
    block = TransformerDecoderBlock(D, H, F)
    with pytest.raises(ValueError, match=r"memory must have shape \(B, T, embed_dim=.*\), got"):
        block(torch.randn(B, T, D), torch.randn(B, S, D + 1))
    with pytest.raises(TypeError, match="memory is required"):
        block(torch.randn(B, T, D), None)
    with pytest.raises(ValueError, match="memory_mask of shape"):
        block(torch.randn(B, T, D), torch.randn(B, S, D), memory_mask=torch.ones(T, S + 1, dtype=torch.bool))


def test_decoder_block_is_a_sibling_with_the_same_sublayer_names():
    """Not a subclass (its forward takes memory), but the same names and initialisation
    order: a seeded decoder block starts with a seeded encoder block's weights."""
    assert not issubclass(TransformerDecoderBlock, TransformerBlock)
    torch.manual_seed(8)
    encoder = TransformerBlock(D, H, F)
    torch.manual_seed(8)
    decoder = TransformerDecoderBlock(D, H, F)
    names = list(decoder.state_dict())
    assert names[:len(encoder.state_dict())] == list(encoder.state_dict())
    assert {n.split(".")[0] for n in names} == {"norm1", "attn", "norm2", "mlp", "norm_cross", "cross_attn"}
    for name, value in encoder.state_dict().items():
        assert torch.equal(decoder.state_dict()[name], value)


# --- decoding token by token with a KV cache ----------------------------------------


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("rope", [False, True])
def test_cached_decoding_equals_the_causal_forward(norm_first, rope):
    torch.manual_seed(9)
    block = TransformerBlock(D, H, F, norm_first=norm_first, num_kv_heads=2, rope=rope).double().eval()
    x = torch.randn(B, T, D, dtype=torch.float64)
    cache = block.attn.new_cache(B, max_len=T)
    with torch.no_grad():
        full, full_weights = block(x, is_causal=True)
        for t in range(T):  # one token at a time: it sees itself and everything cached
            step, weights = block(x[:, t:t + 1], kv_cache=cache)
            assert_close(step, full[:, t:t + 1])
            assert_close(weights, full_weights[:, :, t:t + 1, :t + 1])
    assert cache.length == T


def test_cached_decoding_after_a_prompt():
    """A prompt of several tokens at once (causal), then one token at a time."""
    torch.manual_seed(10)
    block = TransformerBlock(D, H, F, rope=True).double().eval()
    x = torch.randn(B, T, D, dtype=torch.float64)
    cache = block.attn.new_cache(B, max_len=T)
    with torch.no_grad():
        full, _ = block(x, is_causal=True)
        steps = [block(x[:, :4], is_causal=True, kv_cache=cache)[0]]
        steps += [block(x[:, t:t + 1], kv_cache=cache)[0] for t in range(4, T)]
    assert_close(torch.cat(steps, dim=1), full)


def _sublayer_calls(block) -> list[str]:
    """Names of the block's sublayers, appended as each one runs."""
    calls = []
    for name, module in block.named_children():
        module.register_forward_pre_hook(lambda *_, name=name: calls.append(name))
    return calls


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("bad", [torch.randn(B, T, D + 2), torch.randn(B, T, D, dtype=torch.float64),
                                 torch.empty(B, T, D, device="meta")], ids=["width", "dtype", "device"])
def test_a_bad_x_is_named_before_any_sublayer_runs(norm_first, bad):
    block = TransformerBlock(D, H, F, norm_first=norm_first)
    calls = _sublayer_calls(block)
    with pytest.raises((ValueError, TypeError), match=r"^x "):
        block(bad)
    assert calls == []


def test_a_decoder_block_checks_memory_and_memory_mask_before_self_attention():
    block = TransformerDecoderBlock(D, H, F)
    calls = _sublayer_calls(block)
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    for call, name in ((lambda: block(x, memory.double()), "memory"),
                       (lambda: block(x, torch.randn(B + 1, S, D)), "memory"),
                       (lambda: block(x, memory, memory_mask=padding_mask([S, 2, 1], S)), "memory_mask")):
        with pytest.raises((ValueError, TypeError), match=f"^{name} "):
            call()
    assert calls == []
    block(x, memory, memory_mask=padding_mask([S, 2, 1], S).unsqueeze(1))  # the head axis added
    assert calls[0] == "norm1"
