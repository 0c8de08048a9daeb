"""Numerics of every kernel (issue 29): gradients equal eager attention's (gradcheck in
float64, with boolean and additive masks and fully masked rows), and float16/bfloat16
inputs are computed in float32 and handed back in their own dtype, long sequences
included. References are PyTorch's attention or the package's float32 result."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import attention_core as ac
from attention_core import ATTENTION_FUNCTIONS, sliding_window_mask
from attention_core.nn.flash import flash_attention, flash_attention_lse
from attention_core.nn.linear_attention import kernel_attention_weights, linear_attention
from attention_core.nn.sparse import lsh_attention, sliding_window_attention

B, H, T, E, Ev, R, WINDOW = 1, 2, 6, 3, 2, 4, 3
HALF = (torch.float16, torch.bfloat16)
MASKED = ["eager", "grouped_query", "flash", "sliding_window"]  # the kernels that take attn_mask


def options(name, dtype=torch.float64, length=T):
    """The options each kernel needs, for sequences of ``length``."""
    return {"flash": {"block_q": 4, "block_k": 4},
            "sliding_window": {"window": WINDOW, "block_size": 4},
            "linformer": {"key_projection": torch.randn(R, length, generator=torch.Generator()
                                                        .manual_seed(9), dtype=torch.float64)
                          .to(torch.float64 if dtype == torch.float64 else torch.float32)},
            "lsh": {"num_buckets": 2, "chunk_size": length // 2}}.get(name, {})


def call(name, q, k, v, **extra):
    """``ATTENTION_FUNCTIONS[name]`` with its options; lsh shares queries and keys."""
    if name == "lsh":
        k = q
    if name == "grouped_query":
        k, v = k[:, :1], v[:, :1]  # MQA: one kv head for the H query heads
    return ATTENTION_FUNCTIONS[name](q, k, v, **options(name, q.dtype, q.size(-2)), **extra)


def eager_equivalent(name, q, k, v, **extra):
    """The same computation written with eager attention (the reference for gradients)."""
    eager = ac.scaled_dot_product_attention
    if name == "grouped_query":
        return eager(q, k[:, :1].expand_as(k), v[:, :1].expand_as(v), **extra)[0]
    if name == "sliding_window":
        band = sliding_window_mask(q.size(-2), WINDOW, causal=extra.pop("is_causal", False))
        mask = extra.pop("attn_mask", None)
        if mask is not None and mask.dtype != torch.bool:
            mask = mask.masked_fill(~band, -math.inf)
        else:
            mask = band if mask is None else mask & band
        return eager(q, k, v, attn_mask=mask, **extra)[0]
    return eager(q, k, v, **extra)[0]


def masks(kind):
    """An ``(T, T)`` mask with row 2 fully masked: boolean (True = may attend) or additive."""
    keep = torch.rand(T, T, generator=torch.Generator().manual_seed(3)) > 0.4
    keep |= torch.eye(T, dtype=torch.bool)
    keep[2] = False
    if kind == "bool":
        return keep
    bias = torch.randn(T, T, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    return bias.masked_fill(~keep, -math.inf)


MASK_CASES = [{}, {"is_causal": True}, {"attn_mask": "bool"}, {"attn_mask": "float"},
              {"attn_mask": "float", "is_causal": True}]


def resolve(extra):
    return {key: masks(value) if key == "attn_mask" else value for key, value in extra.items()}


# --- 1. gradients ---------------------------------------------------------------------

def test_the_reproducer_flash_backpropagates():
    torch.manual_seed(0)
    q = torch.randn(2, 3, 5, 8, requires_grad=True)
    k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    flash_attention(q, k, v)[0].sum().backward()
    ref = q.detach().clone().requires_grad_()
    ac.scaled_dot_product_attention(ref, k, v)[0].sum().backward()
    assert_close(q.grad, ref.grad)


@pytest.mark.parametrize("name", sorted(set(ATTENTION_FUNCTIONS) - {"triton"}))
def test_every_kernel_passes_gradcheck(name, qkv):
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=0, requires_grad=True)
    if name == "lsh":  # keys are the queries: differentiate through query and value
        assert torch.autograd.gradcheck(lambda q, v: call(name, q, q, v)[0], (q, v))
    else:
        assert torch.autograd.gradcheck(lambda q, k, v: call(name, q, k, v)[0], (q, k, v))


@pytest.mark.parametrize("extra", MASK_CASES, ids=str)
@pytest.mark.parametrize("name", MASKED)
def test_masked_kernels_pass_gradcheck_with_fully_masked_rows(name, extra, qkv):
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=0, requires_grad=True)
    extra = resolve(extra)
    assert torch.autograd.gradcheck(lambda q, k, v: call(name, q, k, v, **extra)[0], (q, k, v))


@pytest.mark.parametrize("extra", MASK_CASES, ids=str)
@pytest.mark.parametrize("name", MASKED)
def test_gradients_equal_eager_attentions(name, extra, qkv):
    extra = resolve(extra)
    grads = []
    for fn in (call, eager_equivalent):
        q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=1, requires_grad=True)
        out = fn(name, q, k, v, **dict(extra))
        out = out[0] if isinstance(out, tuple) else out
        (out * torch.linspace(-1, 2, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
        grads.append((out.detach(), q.grad, k.grad, v.grad))
    for got, want in zip(*grads):
        assert torch.isfinite(got).all()
        assert_close(got, want)


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("name", MASKED)
def test_a_fully_masked_row_gives_zeros_everywhere(name, kind, qkv):
    """Output, and the gradient that flows back through that query, are exactly zero,
    whichever kind of mask removed its keys (an all -inf additive row included)."""
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=2, requires_grad=True)
    out, _ = call(name, q, k, v, attn_mask=masks(kind))
    out.sum().backward()
    assert (out[..., 2, :] == 0).all()
    assert (q.grad[..., 2, :] == 0).all()
    assert all(torch.isfinite(x.grad).all() for x in (q, k, v))


def test_an_all_minus_inf_additive_row_equals_the_boolean_row():
    grads = []
    for kind in ("bool", "float"):
        q = torch.randn(1, 1, 3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(5),
                        requires_grad=True)
        mask = torch.ones(3, 3, dtype=torch.bool)
        mask[1] = False
        if kind == "float":
            mask = torch.zeros(3, 3, dtype=torch.float64).masked_fill(~mask, -math.inf)
        ac.scaled_dot_product_attention(q, q.detach(), q.detach(), attn_mask=mask)[0].sum().backward()
        grads.append(q.grad)
    assert torch.isfinite(grads[1]).all() and (grads[1][..., 1, :] == 0).all()
    assert_close(grads[1], grads[0])


def test_flash_lse_is_differentiable_and_minus_inf_for_a_dead_row(qkv):
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=0, requires_grad=True)
    mask = masks("bool")
    out, lse = flash_attention_lse(q, k, v, attn_mask=mask, block_q=4, block_k=4)
    assert (lse[..., 2] == -math.inf).all()
    lse[..., [0, 1, 3, 4, 5]].sum().backward()
    scores = (q @ k.transpose(-2, -1) / math.sqrt(E)).masked_fill(~mask, -math.inf)
    expected = torch.autograd.grad(scores.logsumexp(-1)[..., [0, 1, 3, 4, 5]].sum(), q)[0]
    assert_close(q.grad, expected)


def test_delta_rule_passes_gradcheck_in_both_forms():
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(1, 1, 4, 2, generator=g, dtype=torch.float64, requires_grad=True)
               for _ in range(3))
    beta = torch.rand(1, 1, 4, generator=g, dtype=torch.float64, requires_grad=True)
    gate = (0.5 + 0.5 * torch.rand(1, 1, 4, generator=g, dtype=torch.float64)).requires_grad_()
    for chunk_size in (None, 2):
        def fn(q, k, v, beta, gate, chunk_size=chunk_size):
            return ac.delta_rule_attention(q, F.normalize(k, dim=-1), v, beta, gate, chunk_size)[0]
        assert torch.autograd.gradcheck(fn, (q, k, v, beta, gate))


def test_entropy_has_a_finite_gradient_where_a_weight_is_zero():
    w = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 0.0], [0.2, 0.3, 0.5]], dtype=torch.float64,
                     requires_grad=True)
    h = ac.attention_entropy(w)
    assert_close(h.detach(), torch.tensor([math.log(2), 0.0, -sum(p * math.log(p) for p in (0.2, 0.3, 0.5))],
                                          dtype=torch.float64))
    h.sum().backward()
    expected = torch.where(w == 0, 0.0, -(w.detach().log() + 1))  # d/dw -w ln w = -(ln w + 1)
    assert_close(w.grad, expected)


def test_entropy_of_masked_attention_backpropagates_to_the_queries(qkv):
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=0, requires_grad=True)
    _, w = ac.scaled_dot_product_attention(q, k, v, attn_mask=masks("float"))
    ac.attention_entropy(w).sum().backward()
    assert torch.isfinite(q.grad).all() and (q.grad[..., 2, :] == 0).all()


# --- 2. half precision ------------------------------------------------------------------

def float32_reference(name, q, k, v, **extra):
    """The kernel on the same (rounded) inputs in float32."""
    return call(name, q.float(), k.float(), v.float(), **extra)[0]


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("name", sorted(set(ATTENTION_FUNCTIONS) - {"triton"}))
def test_half_inputs_are_computed_in_float32_and_returned_in_their_dtype(name, dtype, qkv):
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, dtype=dtype, seed=7)
    out, weights = call(name, q, k, v)
    assert out.dtype == dtype and (weights is None or weights.dtype == dtype)
    assert_close(out, float32_reference(name, q, k, v).to(dtype))  # one rounding at the end


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("name", MASKED)
def test_half_inputs_with_masks(name, dtype, qkv):
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, dtype=dtype, seed=8)
    for extra in (resolve(e) for e in MASK_CASES[1:]):
        if "attn_mask" in extra and extra["attn_mask"].dtype != torch.bool:
            extra["attn_mask"] = extra["attn_mask"].to(dtype)
        out, _ = call(name, q, k, v, **extra)
        assert torch.isfinite(out).all()
        assert_close(out, float32_reference(name, q, k, v, **extra).to(dtype))


@pytest.mark.parametrize("name", ["eager", "eager_attention", "flash", "sliding_window"])
@pytest.mark.parametrize("logit", [5.5e3, 2e5])
def test_large_logits_in_float16(name, logit):
    """Scores of 5.5e3 lose their fractional bits in float16 and scores above 65504
    overflow to inf: computed in float32, both match the float32 result."""
    g = torch.Generator().manual_seed(10)
    c = math.sqrt(logit / 2)
    q = torch.full((1, 1, 8, 4), c).half()
    k = (c + 0.05 * torch.randn(1, 1, 8, 4, generator=g)).half()  # scores logit + O(1): a close race
    v = torch.randn(1, 1, 8, 4, generator=g).half()
    if name == "eager_attention":  # the maths without the public wrapper's checks
        out, ref = ac.eager_attention(q, k, v)[0], ac.eager_attention(q.float(), k.float(), v.float())[0]
    else:
        out, ref = call(name, q, k, v)[0], float32_reference(name, q, k, v)
    assert torch.isfinite(out).all()
    assert_close(out, ref.half())


def test_flash_over_70000_keys_of_a_flat_row_in_float16():
    q, k = torch.zeros(1, 1, 2, 8, dtype=torch.float16), torch.zeros(1, 1, 70_000, 8, dtype=torch.float16)
    v = torch.ones(1, 1, 70_000, 2, dtype=torch.float16)
    v[..., 1] = -2
    out, lse = flash_attention_lse(q, k, v, block_k=8192)
    assert out.dtype == lse.dtype == torch.float16
    assert_close(out, torch.tensor([1.0, -2.0], dtype=torch.float16).expand(1, 1, 2, 2))
    assert_close(lse, torch.full((1, 1, 2), math.log(70_000), dtype=torch.float16))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_softmax_over_70000_zeros(dtype):
    w = ac.softmax(torch.zeros(2, 70_000, dtype=dtype))
    assert w.dtype == dtype
    assert_close(w, torch.full((2, 70_000), 1 / 70_000).to(dtype))
    assert_close(w.float().sum(-1), torch.ones(2), atol=0, rtol=2e-2)
    inplace = torch.zeros(2, 70_000, dtype=dtype)
    assert ac.softmax(inplace, inplace=True) is inplace and torch.equal(inplace, w)


@pytest.mark.parametrize("is_causal", [False, True])
def test_linear_attention_in_float16_over_8192_keys(is_causal):
    """A normaliser sums S positive numbers: past 65504 float16 gave zeros, then NaN."""
    g = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(1, 1, 8192, 16, generator=g).half() for _ in range(3))
    if not is_causal:
        q = q[..., :4, :]
    out, _ = linear_attention(q, k, v, is_causal=is_causal, chunk_size=256)
    ref, _ = linear_attention(q.float(), k.float(), v.float(), is_causal=is_causal, chunk_size=256)
    assert out.dtype == torch.float16 and torch.isfinite(out).all()
    assert not (out == 0).all(-1).any()
    assert_close(out, ref.half())


def test_kernel_attention_weights_in_float16_over_8192_keys():
    g = torch.Generator().manual_seed(12)
    q, k = torch.randn(4, 16, generator=g).half(), torch.randn(8192, 16, generator=g).half()
    w = kernel_attention_weights(q, k)
    assert w.dtype == torch.float16
    assert_close(w, kernel_attention_weights(q.float(), k.float()).half())


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_lsh_attention_in_half_precision(dtype):
    g = torch.Generator().manual_seed(13)
    qk, v = torch.randn(2, 16, 8, generator=g), torch.randn(2, 16, 4, generator=g)
    qk, v = qk.to(dtype), v.to(dtype)
    out, _ = lsh_attention(qk, qk, v, num_buckets=2, chunk_size=8, num_hashes=2)
    ref, _ = lsh_attention(qk.float(), qk.float(), v.float(), num_buckets=2, chunk_size=8, num_hashes=2)
    assert out.dtype == dtype
    assert_close(out, ref.to(dtype))


@pytest.mark.parametrize("chunk_size", [None, 4])
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_delta_rule_in_half_precision(dtype, chunk_size):
    g = torch.Generator().manual_seed(14)
    q, k, v = (torch.randn(1, 2, 10, 8, generator=g) for _ in range(3))
    k = F.normalize(k, dim=-1)
    beta, gate = torch.rand(1, 2, 10, generator=g), 0.8 + 0.2 * torch.rand(1, 2, 10, generator=g)
    half = [x.to(dtype) for x in (q, k, v, beta, gate)]
    out, _ = ac.delta_rule_attention(*half, chunk_size=chunk_size)
    ref, _ = ac.delta_rule_attention(*(x.float() for x in half), chunk_size=chunk_size)
    assert out.dtype == dtype
    assert_close(out, ref.to(dtype))


def test_a_long_float16_sliding_window():
    g = torch.Generator().manual_seed(15)
    q, k, v = (torch.randn(1, 1, 2048, 2, generator=g).half() * 30 for _ in range(3))
    out, _ = sliding_window_attention(q, k, v, window=64, is_causal=True, block_size=256)
    ref, _ = sliding_window_attention(q.float(), k.float(), v.float(), window=64, is_causal=True,
                                      block_size=256)
    assert out.dtype == torch.float16
    assert_close(out, ref.half())


def test_float16_entropy_of_a_long_row():
    w = torch.full((70_000,), 1 / 70_000).half()
    assert_close(ac.attention_entropy(w).float(), torch.tensor(math.log(70_000)), rtol=2e-3, atol=0)


def test_online_softmax_sums_a_float16_row_in_float32():
    from attention_core.nn.flash import online_softmax

    weights, trace = online_softmax(torch.zeros(70_000, dtype=torch.float16), block_size=70_000)
    assert weights.dtype == torch.float16 and trace[-1]["l"] == 70_000
    assert_close(weights, torch.full((70_000,), 1 / 70_000).half())
