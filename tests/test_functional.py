"""scaled_dot_product_attention against PyTorch's own attention and a hand-worked example."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import attention_core as ac
from attention_core import causal_mask, scaled_dot_product_attention, softmax

SHAPES = [  # (batch dims, L, S, E, Ev)
    ((), 1, 1, 1, 1),
    ((), 3, 3, 4, 4),
    ((2,), 5, 7, 8, 3),
    ((2, 3), 4, 4, 16, 16),
    ((2, 3), 6, 2, 8, 5),
    ((1, 2, 3), 3, 9, 4, 6),
]


def reference_weights(q, k, mask=None, scale=None):
    """Weights computed the long way, independent of the package."""
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask
    return torch.softmax(scores, -1)


@pytest.mark.parametrize("batch,L,S,E,Ev", SHAPES)
def test_matches_torch_without_mask(batch, L, S, E, Ev, qkv):
    q, k, v = qkv(batch, L, S, E, Ev)
    out, w = scaled_dot_product_attention(q, k, v)
    assert out.shape == (*batch, L, Ev) and w.shape == (*batch, L, S)
    assert_close(out, F.scaled_dot_product_attention(q, k, v))
    assert_close(w, reference_weights(q, k))


@pytest.mark.parametrize("batch,L,S,E,Ev", SHAPES)
def test_matches_torch_with_bool_mask(batch, L, S, E, Ev, qkv):
    q, k, v = qkv(batch, L, S, E, Ev)
    mask = torch.rand(*batch, L, S) > 0.3
    mask[..., 0] = True  # every query keeps a key, so torch has no NaN rows
    out, w = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert_close(w, reference_weights(q, k, mask))
    assert (w[~mask] == 0).all()


@pytest.mark.parametrize("batch,L,S,E,Ev", SHAPES)
def test_matches_torch_with_float_mask(batch, L, S, E, Ev, qkv):
    q, k, v = qkv(batch, L, S, E, Ev)
    bias = torch.randn(L, S, dtype=torch.float64)  # broadcasts over the batch dims
    out, w = scaled_dot_product_attention(q, k, v, attn_mask=bias)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    assert_close(w, reference_weights(q, k, bias))


def test_broadcast_mask_over_heads(qkv):
    q, k, v = qkv((2, 4), 5, 6)
    mask = torch.rand(2, 1, 5, 6) > 0.2
    mask[..., 0] = True
    out, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


@pytest.mark.parametrize("batch,L,E", [((), 1, 4), ((2,), 6, 8), ((2, 3), 9, 16)])
def test_causal_matches_torch(batch, L, E, qkv):
    q, k, v = qkv(batch, L, E=E)
    out, w = scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert (w.triu(1) == 0).all()


def test_causal_with_cache_is_lower_right(qkv):
    """L < S: the queries are the last L positions, as in PyTorch's causal_lower_right."""
    q, k, v = qkv((2,), 3, 7)
    lower_right = torch.ones(3, 7, dtype=torch.bool).tril(diagonal=7 - 3)
    out, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=lower_right))
    assert_close(causal_mask(3, 7), lower_right)


def test_causal_combines_with_mask(qkv):
    q, k, v = qkv((2,), 5, E=4)
    pad = torch.tensor([True, True, True, False, False])
    out, _ = scaled_dot_product_attention(q, k, v, attn_mask=pad, is_causal=True)
    both = causal_mask(5) & pad
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=both))


@pytest.mark.parametrize("scale", [0.01, 0.5, 1.0, 3.0])
def test_custom_scale(scale, qkv):
    q, k, v = qkv((2,), 4, 6, Ev=5)
    out, w = scaled_dot_product_attention(q, k, v, scale=scale)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=scale))
    assert_close(w, reference_weights(q, k, scale=scale))


def test_float32_matches_torch(qkv):
    q, k, v = qkv((2, 4), 33, 17, 16, 8, dtype=torch.float32)
    out, _ = scaled_dot_product_attention(q, k, v)
    assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_hand_worked_three_tokens():
    """Three tokens, d_k = 2: every number below can be checked on paper."""
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    k = q.clone()
    v = torch.tensor([[1.0, 0.0], [0.0, 10.0], [5.0, 5.0]], dtype=torch.float64)
    out, w = scaled_dot_product_attention(q, k, v)
    # Scores q.k: row 0 = [1, 0, 1], row 1 = [0, 1, 1], row 2 = [1, 1, 2]; divide by sqrt(2).
    a, b = math.exp(1 / math.sqrt(2)), 1.0
    row0 = torch.tensor([a, b, a], dtype=torch.float64) / (2 * a + b)
    c = math.exp(2 / math.sqrt(2))
    row2 = torch.tensor([a, a, c], dtype=torch.float64) / (2 * a + c)
    assert_close(w[0], row0)
    assert_close(w[2], row2)
    # Output 0 = w00 * [1, 0] + w01 * [0, 10] + w02 * [5, 5]
    assert_close(out[0], row0[0] * v[0] + row0[1] * v[1] + row0[2] * v[2])
    assert abs(w[0, 0].item() - 0.4011) < 1e-4  # e^0.7071 = 2.0281; 2.0281 / 5.0562


def test_fully_masked_row_gives_zeros_not_nan(qkv):
    q, k, v = qkv((2,), 3, 4)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False  # query 1 may attend to nothing
    out, w = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert (w[:, 1] == 0).all() and (out[:, 1] == 0).all()
    assert_close(w[:, 0].sum(-1), torch.ones(2, dtype=torch.float64))
    bias = torch.zeros(3, 4, dtype=torch.float64)
    bias[2] = -math.inf
    out, w = scaled_dot_product_attention(q, k, v, attn_mask=bias)
    assert (w[:, 2] == 0).all() and (out[:, 2] == 0).all() and torch.isfinite(out).all()


def test_nan_input_is_not_hidden(qkv):
    q, k, v = qkv((), 3, E=4)
    q[1, 0] = math.nan
    out, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.isnan(out[1]).all() and torch.isfinite(out[0]).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_large_logits_and_low_precision_stay_finite(dtype):
    q = torch.full((2, 4, 8), 100.0)
    q[:, 1] = -100.0
    k = torch.randn(2, 5, 8).sign() * 100.0  # scores of order 1e4 after scaling
    v = torch.randn(2, 5, 8)
    out, w = scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype))
    assert out.dtype == dtype and w.dtype == dtype
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert_close(w.float().sum(-1), torch.ones(2, 4), atol=1e-2, rtol=0)
    ref = F.scaled_dot_product_attention(q, k, v)
    assert_close(out.float(), ref, atol=0.05, rtol=0.05)


def test_softmax_stable_and_pure():
    x = torch.tensor([[1e4, 1e4 - 1.0, 0.0], [-1e4, 0.0, 1e4]])
    before = x.clone()
    p = softmax(x)
    assert_close(p, torch.softmax(x.double(), -1).float())
    assert torch.equal(x, before)  # softmax leaves its input alone
    y = x.clone()
    assert softmax(y, inplace=True) is y  # reuses its argument's memory
    assert_close(y, p)


def test_gradients_match_torch(qkv):
    """Training goes through the package: its gradients equal PyTorch's."""
    q, k, v = qkv((2,), 5, 6, Ev=4, requires_grad=True)
    mask = torch.rand(5, 6) > 0.3
    mask[:, 0] = True
    out, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    grads = torch.autograd.grad(out.square().sum(), (q, k, v))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ref_grads = torch.autograd.grad(ref.square().sum(), (q, k, v))
    for g, r in zip(grads, ref_grads):
        assert_close(g, r)
    logits = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: softmax(x, inplace=True), (logits,))


def test_dropout_keeps_expectation(qkv):
    q, k, v = qkv((64,), 4)
    _, w = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert ((w == 0) | (w > 0)).all()
    assert 0.4 < (w == 0).float().mean() < 0.6  # about half the weights dropped
    assert abs(w.sum(-1).mean().item() - 1.0) < 0.1  # survivors are scaled by 2


def test_softmax_and_eager_attention_name_bad_arguments():
    with pytest.raises(TypeError, match="scores must be a floating-point tensor, got dtype torch.int64"):
        ac.softmax(torch.ones(3, dtype=torch.long))
    with pytest.raises(TypeError, match="scores must be a torch.Tensor, got list"):
        ac.softmax([1.0, 2.0])
    with pytest.raises(ValueError, match="query and key must have the same last dim E"):
        ac.eager_attention(torch.randn(3, 4), torch.randn(5, 3), torch.randn(5, 3))
