"""Invariants that hold for every input, checked with hypothesis."""

import math
from functools import partial

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from attention_core import (
    ATTENTION_FUNCTIONS,
    MultiHeadAttention,
    attention_entropy,
    causal_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
    softmax,
)

dims = st.integers(min_value=1, max_value=9)
settings.register_profile("book", max_examples=40, deadline=None)
settings.load_profile("book")


@given(L=dims, S=dims, E=dims, seed=st.integers(0, 2**16), temp=st.floats(0.01, 100))
def test_weights_are_probability_rows(L, S, E, seed, temp):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, n, E, generator=g, dtype=torch.float64) for n in (L, S, S))
    _, w = scaled_dot_product_attention(q * temp, k, v)
    assert (w >= 0).all()
    assert_close(w.sum(-1), torch.ones(2, L, dtype=torch.float64))


@given(L=st.integers(2, 9), seed=st.integers(0, 2**16))
def test_self_attention_is_permutation_equivariant(L, seed):
    """Shuffle the tokens and the outputs shuffle the same way: no notion of order."""
    torch.manual_seed(seed)
    mha = MultiHeadAttention(8, 2).double()
    x = torch.randn(1, L, 8, dtype=torch.float64)
    perm = torch.randperm(L)
    out, w = mha(x)
    out_p, w_p = mha(x[:, perm])
    assert_close(out_p, out[:, perm])
    assert_close(w_p, w[:, :, perm][:, :, :, perm])


@given(L=st.integers(2, 9), t=st.integers(0, 8), seed=st.integers(0, 2**16))
def test_causal_mask_hides_the_future(L, t, seed):
    t = t % (L - 1)
    torch.manual_seed(seed)
    mha = MultiHeadAttention(8, 2).double()
    x = torch.randn(1, L, 8, dtype=torch.float64)
    y = x.clone()
    y[:, t + 1:] = torch.randn(1, L - t - 1, 8, dtype=torch.float64) * 10
    assert_close(mha(x, is_causal=True)[0][:, :t + 1], mha(y, is_causal=True)[0][:, :t + 1])


@given(H=st.sampled_from([1, 2, 4, 8]), kv_index=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_gqa_head_mapping(H, kv_index, seed):
    """Query head h reads kv head h // (H // Hkv): change one kv head's input weights
    and exactly that group's weights change."""
    divisors = [d for d in (1, 2, 4, 8) if H % d == 0]
    Hkv = divisors[kv_index % len(divisors)]
    torch.manual_seed(seed)
    mha = MultiHeadAttention(H * 2, H, num_kv_heads=Hkv).double()
    x = torch.randn(1, 5, H * 2, dtype=torch.float64)
    _, before = mha(x)
    changed = seed % Hkv
    with torch.no_grad():
        mha.k_proj.weight[changed * 2:(changed + 1) * 2] += 1.0
    _, after = mha(x)
    moved = [(before[0, h] - after[0, h]).abs().max().item() > 1e-9 for h in range(H)]
    assert moved == [h // (H // Hkv) == changed for h in range(H)]


@given(H=st.sampled_from([1, 2, 4]), kv_index=st.integers(0, 2), L=dims, causal=st.booleans(),
       window=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_every_exact_kernel_gives_the_layer_the_same_output(H, kv_index, L, causal, window, seed):
    """MultiHeadAttention(attention=...) with the tiled kernel equals the eager layer of the
    same weights, and with the banded kernel equals the eager layer under the band's mask,
    for MHA, GQA and MQA, any length and window, causal or not."""
    divisors = [d for d in (1, 2, 4) if H % d == 0]
    Hkv = divisors[kv_index % len(divisors)]
    torch.manual_seed(seed)
    eager = MultiHeadAttention(H * 2, H, num_kv_heads=Hkv).double()
    band = partial(ATTENTION_FUNCTIONS["sliding_window"], window=window)
    x = torch.randn(2, L, H * 2, dtype=torch.float64)
    for attention, mask in (("flash", None), (band, sliding_window_mask(L, window, causal=causal))):
        layer = MultiHeadAttention(H * 2, H, num_kv_heads=Hkv, attention=attention).double()
        layer.load_state_dict(eager.state_dict())
        expected = eager(x, attn_mask=mask, is_causal=causal and mask is None)[0]
        assert_close(layer(x, is_causal=causal)[0], expected)


@given(n=st.integers(1, 64))
def test_uniform_row_has_entropy_ln_n(n):
    w = torch.full((3, n), 1.0 / n, dtype=torch.float64)
    assert_close(attention_entropy(w), torch.full((3,), math.log(n), dtype=torch.float64))


@given(S=dims, seed=st.integers(0, 2**16))
def test_entropy_bounds(S, seed):
    g = torch.Generator().manual_seed(seed)
    w = softmax(torch.randn(4, S, generator=g, dtype=torch.float64) * 3)
    h = attention_entropy(w)
    assert (h >= -1e-12).all() and (h <= math.log(S) + 1e-12).all()


def test_one_hot_row_has_zero_entropy_and_masked_row_too():
    assert attention_entropy(torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])).tolist() == [0.0, 0.0]


@given(L=st.integers(1, 8), S=st.integers(1, 8))
def test_causal_mask_definition(L, S):
    m = causal_mask(L, S)
    for i in range(L):
        for j in range(S):
            assert m[i, j].item() == (j <= i + S - L)
