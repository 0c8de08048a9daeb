"""Invariants that hold for every input, checked with hypothesis."""

import math
from functools import partial

import pytest
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


# --- every kernel against eager attention, over shapes, dtypes and value widths (#29) ---

TOLERANCE = {torch.float64: {}, torch.float32: {"atol": 1e-5, "rtol": 1e-5},
             torch.float16: {"atol": 2e-3, "rtol": 2e-3}, torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2}}
"""How close a kernel's output must be to the float64 reference: about one rounding of the
output to the dtype (so half precision must have been computed in float32)."""
dtypes = st.sampled_from(list(TOLERANCE))


def _eager64(q, k, v, **options):
    """Eager attention in float64: the reference every kernel is held to."""
    return scaled_dot_product_attention(q.double(), k.double(), v.double(), **options)[0]


def _case(name, B, H, L, S, E, Ev, Hkv, block, causal, dtype, seed):
    """``(output, reference)`` of ``ATTENTION_FUNCTIONS[name]`` on random inputs of ``dtype``;
    the reference is eager attention (or, for the approximations, the attention they are
    defined to compute) in float64 on the same rounded inputs."""
    g = torch.Generator().manual_seed(seed)
    S = S if name in ("eager", "grouped_query", "flash", "sdpa") else L  # the others: self-attention
    q = torch.randn(B, H, L, E, generator=g).to(dtype)
    k, v = torch.randn(B, H, S, E, generator=g).to(dtype), torch.randn(B, H, S, Ev, generator=g).to(dtype)
    fn = ATTENTION_FUNCTIONS[name]
    if name == "eager":
        return fn(q, k, v, is_causal=causal)[0], _eager64(q, k, v, is_causal=causal)
    if name in ("grouped_query", "sdpa"):  # sdpa: fewer kv heads too (Hkv = H is plain MHA)
        k, v = k[:, :Hkv], v[:, :Hkv]
        G = H // Hkv
        return (fn(q, k, v, is_causal=causal)[0],
                _eager64(q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1), is_causal=causal))
    if name == "flash":
        return (fn(q, k, v, is_causal=causal, block_q=block, block_k=block + 1)[0],
                _eager64(q, k, v, is_causal=causal))
    if name == "sliding_window":
        band = sliding_window_mask(L, block, causal=causal)
        return fn(q, k, v, window=block, is_causal=causal)[0], _eager64(q, k, v, attn_mask=band)
    if name == "linear":
        from attention_core.nn.linear_attention import kernel_attention_weights
        return (fn(q, k, v, is_causal=causal, chunk_size=block)[0],
                kernel_attention_weights(q.double(), k.double(), is_causal=causal) @ v.double())
    if name == "linformer":
        P = torch.rand(block, L, generator=g, dtype=torch.float64) / L  # (proj_len, S)
        return fn(q, k, v, key_projection=P)[0], _eager64(q, P @ k.double(), P @ v.double())
    if name == "lsh":  # one bucket, one chunk: dense, unit keys, itself only as a last resort
        unit = q.double() / q.double().norm(dim=-1, keepdim=True).clamp_min(1e-6)
        alone = ~torch.eye(L, dtype=torch.bool) if L > 1 else torch.ones(1, 1, dtype=torch.bool)
        return fn(q, q, v, num_buckets=1, chunk_size=L)[0], _eager64(q, unit, v, attn_mask=alone)
    raise KeyError(name)


KERNELS = sorted(set(ATTENTION_FUNCTIONS) - {"triton"})  # triton needs a GPU


def test_every_kernel_has_a_property_case():
    assert set(KERNELS) == {"eager", "grouped_query", "sdpa", "flash", "sliding_window", "linear",
                            "linformer", "lsh"}


@pytest.mark.parametrize("name", KERNELS)
@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 2), H=st.sampled_from([1, 2, 4]), Hkv_index=st.integers(0, 2),
       L=dims, S=dims, E=dims, Ev=dims, block=st.integers(1, 4), causal=st.booleans(),
       dtype=dtypes, seed=st.integers(0, 2**16))
def test_every_kernel_equals_eager_attention(name, B, H, Hkv_index, L, S, E, Ev, block, causal,
                                             dtype, seed):
    """Any shapes, E != Ev, any dtype: the output has the input's dtype and equals the
    float64 reference to about one rounding."""
    Hkv = [d for d in (1, 2, 4) if H % d == 0][Hkv_index % len([d for d in (1, 2, 4) if H % d == 0])]
    causal = causal and name not in ("linformer", "lsh")
    block = min(block, L) if name == "linformer" else block
    out, ref = _case(name, B, H, L, S, E, Ev, Hkv, block, causal, dtype, seed)
    assert out.dtype == dtype and out.shape == ref.shape
    assert torch.isfinite(out).all()
    assert_close(out.double(), ref, **TOLERANCE[dtype])


@pytest.mark.parametrize("name", ["eager", "grouped_query", "sdpa", "flash", "sliding_window"])
@settings(max_examples=20, deadline=None)
@given(L=dims, E=dims, Ev=dims, kind=st.sampled_from(["bool", "float"]), causal=st.booleans(),
       seed=st.integers(0, 2**16))
def test_masked_kernels_give_eager_gradients_and_zeros_for_dead_rows(name, L, E, Ev, kind, causal, seed):
    """A random mask, some rows with no key at all, boolean or additive (-inf): output and
    gradients equal eager attention's, and a dead row gives zeros everywhere."""
    g = torch.Generator().manual_seed(seed)
    keep = torch.rand(L, L, generator=g) > 0.5
    keep[torch.rand(L, generator=g) > 0.7] = False  # dead rows
    band = sliding_window_mask(L, 2, causal=causal) if name == "sliding_window" else None
    mask = keep if kind == "bool" else torch.randn(L, L, generator=g, dtype=torch.float64).masked_fill(
        ~keep, float("-inf"))
    inputs = [torch.randn(2, 2, L, n, generator=g, dtype=torch.float64) for n in (E, E, Ev)]
    grads = []
    for fn in ("kernel", "eager"):
        q, k, v = (x.clone().requires_grad_() for x in inputs)
        if fn == "eager":
            full = keep if band is None else keep & band
            ref_mask = full if kind == "bool" else mask.masked_fill(~full, float("-inf"))
            out = scaled_dot_product_attention(q, k, v, attn_mask=ref_mask,
                                               is_causal=causal and band is None)[0]
        else:
            extra = {"window": 2} if name == "sliding_window" else {}
            out = ATTENTION_FUNCTIONS[name](q, k, v, attn_mask=mask, is_causal=causal, **extra)[0]
        (out * torch.arange(out.numel(), dtype=out.dtype).view_as(out).cos()).sum().backward()
        grads.append([out.detach(), q.grad, k.grad, v.grad])
    for got, want in zip(*grads):
        assert torch.isfinite(got).all()
        assert_close(got, want)
    dead = ~keep.any(-1)
    assert (grads[0][0][..., dead, :] == 0).all() and (grads[0][1][..., dead, :] == 0).all()


@given(L=dims, S=dims, dtype=st.sampled_from([torch.float16, torch.bfloat16]),
       big=st.floats(1.0, 1e4), seed=st.integers(0, 2**16))
def test_half_precision_softmax_equals_float32(L, S, dtype, big, seed):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(L, S, generator=g) * big).to(dtype)
    w = softmax(x)
    assert w.dtype == dtype
    assert_close(w, torch.softmax(x.float(), -1).to(dtype))
