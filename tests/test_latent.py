"""Multi-head latent attention (DeepSeek-V2): the absorbed inference path equals the
naive one, cached decoding equals a full causal forward, the cache holds only the latent
and the rotary key, and the whole thing equals plain attention written out by hand."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from attention_core import LatentKVCache, MultiHeadLatentAttention, apply_rotary

D, H, C, R = 32, 4, 12, 4


def model(rope_dim=R, q_latent_dim=None, seed=0):
    torch.manual_seed(seed)
    return MultiHeadLatentAttention(D, H, C, rope_dim=rope_dim, q_latent_dim=q_latent_dim).double().eval()


def x(B=2, T=11, seed=1):
    return torch.randn(B, T, D, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def by_hand(mla, inputs):
    """MLA written out with explicit per-head keys and PyTorch's SDPA, causal."""
    B, T, _ = inputs.shape
    E = mla.head_dim
    q = mla.q_proj(inputs).view(B, T, H, E + mla.rope_dim).transpose(1, 2)
    latent = inputs @ mla.kv_down.weight.T  # (B, T, C)
    k = (latent @ mla.k_up.weight.T).view(B, T, H, E).transpose(1, 2)
    v = (latent @ mla.v_up.weight.T).view(B, T, H, E).transpose(1, 2)
    if mla.rope_dim:
        k_rope = apply_rotary(inputs @ mla.k_rope.weight.T).unsqueeze(1).expand(B, H, T, mla.rope_dim)
        q = torch.cat((q[..., :E], apply_rotary(q[..., E:])), -1)
        k = torch.cat((k, k_rope), -1)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # scale 1/sqrt(E + R)
    return mla.out_proj(out.transpose(1, 2).reshape(B, T, H * E))


@pytest.mark.parametrize("rope_dim,q_latent_dim", [(0, None), (R, None), (R, 16)])
def test_both_paths_equal_attention_written_by_hand(rope_dim, q_latent_dim):
    mla, inputs = model(rope_dim, q_latent_dim), x()
    with torch.no_grad():
        reference = by_hand(mla, inputs)
        naive, w_naive = mla(inputs, is_causal=True)
        absorbed, w_absorbed = mla(inputs, is_causal=True, absorb=True)
    assert_close(naive, reference)
    assert_close(absorbed, naive)
    assert_close(w_absorbed, w_naive)
    assert w_naive.shape == (2, H, 11, 11)
    assert_close(w_naive.sum(-1), torch.ones(2, H, 11, dtype=torch.float64))


@pytest.mark.parametrize("absorb", [False, True])
def test_cached_decoding_equals_the_full_causal_forward(absorb):
    mla, inputs = model(), x()
    cache = mla.new_cache(2, max_len=11)
    with torch.no_grad():
        full, full_w = mla(inputs, is_causal=True)
        prompt, _ = mla(inputs[:, :4], is_causal=True, kv_cache=cache, absorb=absorb)
        assert_close(prompt, full[:, :4])
        for t in range(4, 11):
            step, w = mla(inputs[:, t:t + 1], is_causal=True, kv_cache=cache, absorb=absorb)
            assert_close(step, full[:, t:t + 1])
            assert_close(w, full_w[:, :, t:t + 1, :t + 1])
    assert cache.length == 11


def test_reset_empties_the_cache_and_a_refilled_cache_equals_a_fresh_one():
    mla, inputs = model(), x()
    used, fresh = mla.new_cache(2, max_len=11), mla.new_cache(2, max_len=11)
    with torch.no_grad():
        mla(inputs[:, :9], is_causal=True, kv_cache=used)
        used.reset()
        assert used.length == 0 and used.nbytes() == 0
        for t in range(5):
            a, wa = mla(inputs[:, t:t + 1], kv_cache=used, absorb=True)
            b, wb = mla(inputs[:, t:t + 1], kv_cache=fresh, absorb=True)
            assert torch.equal(a, b) and torch.equal(wa, wb)
    assert torch.equal(used.buffer, fresh.buffer)
    assert used.nbytes() == 2 * 5 * (C + R) * 8  # B * length * (latent + rope) * float64


def test_the_cache_holds_only_latent_and_rotary_key():
    mla = model()
    cache = mla.new_cache(3, max_len=20)
    assert isinstance(cache, LatentKVCache)
    assert cache.buffer.shape == (3, 20, C + R)  # kv_latent_dim + rope_dim numbers per token
    assert cache.nbytes_per_token == (C + R) * 8  # float64
    with torch.no_grad():
        mla(x(B=3, T=5), is_causal=True, kv_cache=cache)
    assert cache.nbytes() == 3 * 5 * (C + R) * 8
    # a standard MHA cache of the same heads would hold 2 * H * head_dim numbers per token
    assert 2 * H * mla.head_dim / (C + R) == 4.0


def test_latent_cache_is_float16_when_the_module_is():
    mla = MultiHeadLatentAttention(16, 2, 8, rope_dim=2, dtype=torch.float16)
    assert mla.new_cache(1, 4).nbytes_per_token == 10 * 2


def test_absorption_scale_uses_the_true_head_width():
    """The absorbed queries are kv_latent_dim + rope_dim wide, but the scores are scaled
    by 1/sqrt(head_dim + rope_dim), the width of the keys they stand for."""
    mla, inputs = model(), x(T=3)
    with torch.no_grad():
        _, w = mla(inputs, absorb=True)
        E = mla.head_dim
        q = mla.q_proj(inputs).view(2, 3, H, E + R).transpose(1, 2)
        q = torch.cat((q[..., :E], apply_rotary(q[..., E:])), -1)
        latent = inputs @ mla.kv_down.weight.T
        k = (latent @ mla.k_up.weight.T).view(2, 3, H, E).transpose(1, 2)
        k = torch.cat((k, apply_rotary(inputs @ mla.k_rope.weight.T).unsqueeze(1).expand(2, H, 3, R)), -1)
    assert_close(w, torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(E + R), -1))


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="rope_dim must be even"):
        MultiHeadLatentAttention(32, 4, 8, rope_dim=3)
    with pytest.raises(ValueError, match="num_heads=5 must divide embed_dim=32"):
        MultiHeadLatentAttention(32, 5, 8)
    with pytest.raises(ValueError, match="kv_latent_dim must be >= 1, got 0"):
        MultiHeadLatentAttention(32, 4, 0)
    mla = model()
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, embed_dim=32\), got \(2, 3, 8\)"):
        mla(torch.zeros(2, 3, 8, dtype=torch.float64))
    cache = mla.new_cache(1, 2)
    with pytest.raises(ValueError, match=r"cache full: 0 \+ 3 new positions exceed max_len=2"):
        mla(x(B=1, T=3), kv_cache=cache)
    with pytest.raises(ValueError, match=r"latent .* and rope_key .* must be"):
        cache.append(torch.zeros(1, 1, 5, dtype=torch.float64), torch.zeros(1, 1, R, dtype=torch.float64))


def test_runs_on_the_meta_device():
    mla = MultiHeadLatentAttention(32, 4, 12, rope_dim=4, device="meta")
    cache = mla.new_cache(2, 8)
    out, w = mla(torch.empty(2, 5, 32, device="meta"), is_causal=True, kv_cache=cache, absorb=True)
    assert out.device.type == "meta" and out.shape == (2, 5, 32) and w.shape == (2, 4, 5, 5)
    assert cache.buffer.device.type == "meta"
