"""Today's block: RMSNorm against torch.nn.RMSNorm, the gated feed-forward networks against a
hand-written reference (Shazeer 2020), QK-norm, bias on or off, and TransformerBlock.from_llama
against transformers' LlamaDecoderLayer."""

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.testing import assert_close

from attention_core import TransformerBlock
from attention_core.book.exercises import check_rms_norm
from attention_core.nn.feedforward import GatedFeedForward, feed_forward
from attention_core.nn.norms import QKNormLinear, RMSNorm, rms_norm

D, H, F_DIM, B, T = 16, 4, 40, 3, 7


@pytest.mark.parametrize("eps", [1e-6, 1e-5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rms_norm_equals_torch(eps, dtype):
    torch.manual_seed(0)
    ours, theirs = RMSNorm(D, eps, dtype=dtype), nn.RMSNorm(D, eps, dtype=dtype)
    with torch.no_grad():
        ours.weight.normal_()
        theirs.weight.copy_(ours.weight)
    x = 3 * torch.randn(B, T, D, dtype=dtype)
    assert_close(ours(x), theirs(x))


def test_rms_norm_keeps_direction_and_layer_norm_does_not():
    x = torch.tensor([0.0, 10.0, 0.0, 0.0])
    rms, layer = rms_norm(x), F.layer_norm(x, (4,))
    assert_close(F.cosine_similarity(rms, x, dim=0), torch.tensor(1.0))
    assert_close(layer, torch.tensor([-0.57735, 1.7320, -0.57735, -0.57735]), atol=1e-4, rtol=0)
    assert F.cosine_similarity(layer, x, dim=0) < 0.9
    assert_close(rms_norm(x) * 2, rms_norm(x) + rms_norm(5 * x))  # scale-free: only the direction counts


def test_rms_norm_half_precision_does_not_overflow():
    x = torch.full((4,), 300.0, dtype=torch.float16)  # 300**2 overflows float16
    assert_close(rms_norm(x), torch.ones(4, dtype=torch.float16))


def test_rms_norm_bad_inputs():
    with pytest.raises(ValueError, match="dim"):
        RMSNorm(0)
    with pytest.raises(ValueError, match="end in dim=16"):
        RMSNorm(D)(torch.randn(2, 8))


def reference_glu(x, w_gate, w_up, w_down, gate):
    """Shazeer (2020), row vectors: FFN(x) = (gate(x W) * (x V)) W_2, written out."""
    return (gate(x @ w_gate) * (x @ w_up)) @ w_down


@pytest.mark.parametrize("activation, gate", [("swiglu", lambda z: z * torch.sigmoid(z)),
                                              ("geglu", lambda z: 0.5 * z * (1 + torch.erf(z / 2 ** 0.5)))])
def test_gated_ffn_equals_hand_written_reference(activation, gate):
    torch.manual_seed(0)
    ffn = GatedFeedForward(D, F_DIM, activation)
    x = torch.randn(B, T, D)
    expected = reference_glu(x, ffn.gate_proj.weight.T, ffn.up_proj.weight.T, ffn.down_proj.weight.T, gate)
    assert_close(ffn(x), expected)
    assert all(m.bias is None for m in (ffn.gate_proj, ffn.up_proj, ffn.down_proj))


def test_gated_ffn_with_bias():
    torch.manual_seed(0)
    ffn = GatedFeedForward(D, F_DIM, "swiglu", bias=True)
    x = torch.randn(B, T, D)
    gate, up = ffn.gate_proj, ffn.up_proj
    hidden = F.silu(x @ gate.weight.T + gate.bias) * (x @ up.weight.T + up.bias)
    assert_close(ffn(x), hidden @ ffn.down_proj.weight.T + ffn.down_proj.bias)


def test_gated_ffn_at_eight_thirds_has_the_plain_ffns_weights():
    d = 96
    plain = sum(p.numel() for p in feed_forward(d, 4 * d, "gelu", bias=False).parameters())
    gated = sum(p.numel() for p in feed_forward(d, 8 * d // 3, "swiglu", bias=False).parameters())
    assert plain == gated == 8 * d * d


def test_feed_forward_bad_name():
    with pytest.raises(ValueError, match="swiglu"):
        feed_forward(D, F_DIM, "tanh")
    with pytest.raises(ValueError, match="swiglu"):
        TransformerBlock(D, H, F_DIM, activation="tanh")
    with pytest.raises(ValueError, match="rms"):
        TransformerBlock(D, H, F_DIM, norm="batch")
    with pytest.raises(TypeError, match="qk_norm"):
        TransformerBlock(D, H, F_DIM, qk_norm=1)


def test_defaults_unchanged_by_the_new_options():
    """The same seed gives the same block and outputs with the options at their defaults."""
    x = torch.randn(B, T, D)
    torch.manual_seed(1)
    old = TransformerBlock(D, H, F_DIM)
    torch.manual_seed(1)
    new = TransformerBlock(D, H, F_DIM, norm="layer", qk_norm=False, bias=True)
    assert isinstance(old.norm1, nn.LayerNorm) and isinstance(old.mlp, nn.Sequential)
    assert [n for n, _ in old.named_parameters()] == [n for n, _ in new.named_parameters()]
    assert_close(old(x)[0], new(x)[0], rtol=0, atol=0)


def test_modern_options_build_what_they_name():
    block = TransformerBlock(D, H, F_DIM, norm="rms", activation="geglu", qk_norm=True, bias=False)
    assert isinstance(block.norm1, RMSNorm) and isinstance(block.norm2, RMSNorm)
    assert isinstance(block.mlp, GatedFeedForward) and block.mlp.activation == "geglu"
    assert isinstance(block.attn.q_proj, QKNormLinear) and isinstance(block.attn.k_proj, QKNormLinear)
    assert not any(name.endswith("bias") for name, _ in block.named_parameters())
    out, weights = block(torch.randn(B, T, D), is_causal=True)
    assert out.shape == (B, T, D) and weights.shape == (B, H, T, T)


def test_qk_norm_draws_no_random_numbers_and_normalises_each_head():
    torch.manual_seed(2)
    plain = TransformerBlock(D, H, F_DIM)
    torch.manual_seed(2)
    normed = TransformerBlock(D, H, F_DIM, qk_norm=True)
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        assert torch.equal(getattr(plain.attn, name).weight, getattr(normed.attn, name).weight)
    assert torch.equal(plain.mlp[0].weight, normed.mlp[0].weight)
    x = 5 * torch.randn(B, T, D)
    q = normed.attn.q_proj(x).unflatten(-1, (H, D // H))  # (B, T, H, E)
    assert_close(q.pow(2).mean(-1), torch.ones(B, T, H), atol=1e-4, rtol=0)  # every head: rms 1
    # a query scaled up by 100 gives the same scores: the logits cannot grow with the weights
    with torch.no_grad():
        before = normed(x)[1]
        for proj in (normed.attn.q_proj, normed.attn.k_proj):
            proj.weight.mul_(100)
            proj.bias.mul_(100)
        after = normed(x)[1]
    assert_close(before, after, atol=1e-4, rtol=0)


def test_qk_norm_logits_are_bounded():
    """With unit gains, |q . k| / sqrt(E) <= sqrt(E) however large the inputs."""
    block = TransformerBlock(D, H, F_DIM, qk_norm=True)
    E = D // H
    x = 1e3 * torch.randn(B, T, D)
    q = block.attn.q_proj(x).unflatten(-1, (H, E)).transpose(1, 2)  # (B, H, T, E)
    k = block.attn.k_proj(x).unflatten(-1, (H, E)).transpose(1, 2)
    assert (q @ k.transpose(-1, -2) / E ** 0.5).abs().max() <= E ** 0.5 + 1e-4


llama = pytest.importorskip("transformers.models.llama.modeling_llama")


def llama_layer(num_kv_heads=2, bias=False, seed=0, rope_theta=500000.0):
    config = llama.LlamaConfig(hidden_size=32, intermediate_size=88, num_attention_heads=4,
                                      num_key_value_heads=num_kv_heads, attention_bias=bias, mlp_bias=bias,
                                      rope_theta=rope_theta, rms_norm_eps=1e-6, max_position_embeddings=64)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    layer = llama.LlamaDecoderLayer(config, layer_idx=0).eval()
    with torch.no_grad():  # HF initialises the linears to PyTorch's default; move the norms off 1
        for norm in (layer.input_layernorm, layer.post_attention_layernorm):
            norm.weight.normal_(1.0, 0.3)
        if bias:
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                getattr(layer.self_attn, name).bias.normal_()
    return layer, llama.LlamaRotaryEmbedding(config)


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
@pytest.mark.parametrize("bias", [False, True])
def test_from_llama_equals_llama_decoder_layer(num_kv_heads, bias):
    layer, rotary = llama_layer(num_kv_heads, bias)
    x = torch.randn(2, 11, 32)
    positions = torch.arange(11).expand(2, -1)
    causal = torch.full((11, 11), float("-inf")).triu(1)[None, None]  # HF: an additive mask
    with torch.no_grad():
        expected = layer(x, attention_mask=causal, position_ids=positions,
                         position_embeddings=rotary(x, positions))
        ours = TransformerBlock.from_llama(layer)
        got, weights = ours(x, is_causal=True)
    assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert ours.attn.num_kv_heads == num_kv_heads and ours.attn.rope_base == 500000.0
    assert isinstance(ours.norm1, RMSNorm) and isinstance(ours.mlp, GatedFeedForward)
    assert weights.shape == (2, 4, 11, 11) and (weights[..., 0, 1:] == 0).all()


def test_from_llama_decodes_with_a_cache():
    """Token by token with the block's KV cache, the RoPE positions continue: same outputs."""
    layer, rotary = llama_layer()
    ours = TransformerBlock.from_llama(layer)
    x = torch.randn(1, 6, 32)
    positions = torch.arange(6)[None]
    causal = torch.full((6, 6), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        expected = layer(x, attention_mask=causal, position_ids=positions,
                         position_embeddings=rotary(x, positions))
        cache = ours.attn.new_cache(1, 6)
        steps = [ours(x[:, t:t + 1], kv_cache=cache)[0] for t in range(6)]
    assert_close(torch.cat(steps, 1), expected, atol=1e-5, rtol=1e-5)


def test_from_llama_refuses_what_it_cannot_copy():
    layer, _ = llama_layer()
    layer.self_attn.config.hidden_act = "gelu"
    with pytest.raises(ValueError, match="silu"):
        TransformerBlock.from_llama(layer)
    with pytest.raises(TypeError, match="LlamaDecoderLayer"):
        TransformerBlock.from_llama(nn.Linear(2, 2))


def test_check_rms_norm_accepts_rms_norm_and_names_typical_mistakes():
    assert check_rms_norm(lambda x, w, e: F.rms_norm(x, (x.size(-1),), w, e))
    wrongs = [(lambda x, w, e: F.layer_norm(x, (x.size(-1),), w, eps=e), "LayerNorm"),
              (lambda x, w, e: x / (x.pow(2).sum(-1, keepdim=True) + e).sqrt() * w, "root *mean* square"),
              (lambda x, w, e: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + e) * w, "inside the"),
              (lambda x, w, e: x / (x.pow(2).mean(-1, keepdim=True) + e).sqrt(), "forgot the gain")]
    for wrong, named in wrongs:
        verdict = check_rms_norm(wrong)
        assert not verdict and named in verdict.message, verdict.message
