"""Sparse masks by their definitions, receptive fields against matrix powers, and the
banded attention against dense attention with the same mask."""

import math

import pytest
import torch

from attention_core import scaled_dot_product_attention, sliding_window_mask
from attention_core.nn.sparse import (
    bigbird_mask,
    density,
    dilated_window_mask,
    fixed_mask,
    global_mask,
    layers_to_reach,
    lsh_attention,
    lsh_buckets,
    lsh_candidates,
    random_mask,
    reach,
    sliding_window_attention,
    strided_mask,
)

L = 13


def by_definition(rule):
    return torch.tensor([[rule(i, j) for j in range(L)] for i in range(L)])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window,dilation", [(1, 1), (3, 1), (3, 2), (2, 4)])
def test_dilated_window_by_definition(window, dilation, causal):
    expected = by_definition(lambda i, j: (i - j) % dilation == 0 and abs(i - j) // dilation < window
                             and (i >= j or not causal))
    assert torch.equal(dilated_window_mask(L, window, dilation, causal), expected)


def test_dilation_one_is_the_sliding_window():
    assert torch.equal(dilated_window_mask(L, 4, 1), sliding_window_mask(L, 4))
    assert torch.equal(dilated_window_mask(L, 4, 1, causal=True), sliding_window_mask(L, 4, causal=True))


@pytest.mark.parametrize("causal", [False, True])
def test_strided_by_definition(causal):
    s = 4
    expected = by_definition(lambda i, j: (abs(i - j) < s or (i - j) % s == 0) and (i >= j or not causal))
    assert torch.equal(strided_mask(L, s, causal=causal), expected)


@pytest.mark.parametrize("causal", [False, True])
def test_fixed_by_definition(causal):
    s, c = 4, 2
    expected = by_definition(lambda i, j: (i // s == j // s or j % s >= s - c) and (i >= j or not causal))
    assert torch.equal(fixed_mask(L, s, c, causal=causal), expected)


def test_global_tokens_are_full_rows_and_columns():
    m = global_mask(L, 2)
    assert m[:2].all() and m[:, :2].all() and not m[2:, 2:].any()
    assert not global_mask(L, 0).any()


def test_random_mask_is_seeded_and_has_r_keys_per_row():
    a, b, c = random_mask(50, 3, seed=1), random_mask(50, 3, seed=1), random_mask(50, 3, seed=2)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert (a.sum(-1) == 3).all()
    # every key is about equally likely: over many rows, no key column is empty
    assert (random_mask(400, 20, seed=3).sum(0) > 0).all()


def test_bigbird_is_the_union():
    m = bigbird_mask(L, 2, 1, 2, seed=5)
    assert torch.equal(m, sliding_window_mask(L, 2) | global_mask(L, 1) | random_mask(L, 2, seed=5))


def test_density_of_a_window_counts_the_band():
    n, w = 100, 5
    assert density(sliding_window_mask(n, w)) == pytest.approx((n * (2 * w - 1) - w * (w - 1)) / n**2)


def test_reach_is_the_boolean_matrix_power():
    m = strided_mask(L, 3) | random_mask(L, 1, seed=0)
    step = (m | torch.eye(L, dtype=torch.bool)).long()
    for layers in range(4):
        assert torch.equal(reach(m, layers), torch.linalg.matrix_power(step, layers) > 0)


@pytest.mark.parametrize("n,w", [(10, 2), (64, 5), (100, 16)])
def test_window_needs_distance_over_step_layers(n, w):
    mask = sliding_window_mask(n, w)
    assert layers_to_reach(mask, 0, n - 1) == math.ceil((n - 1) / (w - 1))
    assert layers_to_reach(mask | global_mask(n, 1), 0, n - 1) == 1  # token 0 is global
    assert layers_to_reach(mask | global_mask(n, 1), 1, n - 1) == 2  # via the global token


def test_unreachable_is_none():
    assert layers_to_reach(sliding_window_mask(5, 1), 0, 4) is None
    assert layers_to_reach(sliding_window_mask(5, 3, causal=True), 4, 0) is None  # no future


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n,window,block", [(1, 1, None), (17, 3, None), (17, 3, 5), (40, 7, 16),
                                            (9, 20, None), (33, 1, 4)])
def test_banded_equals_dense_with_the_same_mask(n, window, block, causal, qkv):
    q, k, v = qkv((2, 3), n, Ev=6)
    banded, weights = sliding_window_attention(q, k, v, window, is_causal=causal, block_size=block)
    dense, _ = scaled_dot_product_attention(q, k, v, attn_mask=sliding_window_mask(n, window, causal))
    assert weights is None
    torch.testing.assert_close(banded, dense)


@pytest.mark.parametrize("kind", ["padding", "float"])
@pytest.mark.parametrize("causal", [False, True])
def test_banded_with_an_attn_mask_equals_torch_with_the_combined_mask(kind, causal, qkv):
    """Inside the band, ``attn_mask`` applies as in dense attention; reference: PyTorch's
    own attention with band & mask. A query with no key left must get zeros (PyTorch
    versions differ there, NaN or zeros, so those rows are checked on their own)."""
    q, k, v = qkv((2, 3), 23, Ev=6)
    band = sliding_window_mask(23, 4, causal)
    if kind == "padding":
        mask = (torch.arange(23) < torch.tensor([23, 15]).view(2, 1, 1, 1))  # (B, 1, 1, S)
        mask = mask & (torch.arange(23) != 5).view(1, 1, 23, 1)  # query 5 sees no key
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=band & mask)
    else:
        mask = torch.randn(3, 23, 23, dtype=torch.float64)
        ref = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask.masked_fill(~band, -math.inf))
    out, _ = sliding_window_attention(q, k, v, 4, attn_mask=mask, is_causal=causal, block_size=5)
    dead = torch.zeros(2, 3, 23, dtype=torch.bool)  # (B, H, T): queries with no key left
    if kind == "padding":
        dead = ~(band & mask).any(-1).expand(2, 3, 23)
        assert dead.any() and (out[dead] == 0).all()
    torch.testing.assert_close(out[~dead], ref[~dead])


def test_banded_gradients_and_scale_match_dense(qkv):
    q, k, v = qkv((2,), 20, Ev=6, requires_grad=True)
    banded, _ = sliding_window_attention(q, k, v, 4, scale=0.3)
    grads = torch.autograd.grad(banded.square().sum(), (q, k, v))
    dense, _ = scaled_dot_product_attention(q, k, v, attn_mask=sliding_window_mask(20, 4), scale=0.3)
    for mine, ref in zip(grads, torch.autograd.grad(dense.square().sum(), (q, k, v))):
        torch.testing.assert_close(mine, ref)


@pytest.mark.parametrize("n", [64, 256, 1024])
def test_banded_memory_grows_with_the_band_not_the_square(n, largest_tensor):
    B, H, D, w = 1, 2, 8, 8
    q, k, v = (torch.randn(B, H, n, D) for _ in range(3))
    with largest_tensor() as banded:
        sliding_window_attention(q, k, v, w)
    assert banded.largest <= max(B * H * w * (3 * w - 2), B * H * n * D)


@pytest.mark.parametrize("call,message", [
    (lambda _: strided_mask(8, 0), "stride must be >= 1, got 0"),
    (lambda _: fixed_mask(8, 4, 5), "num_summary must be at most stride=4, got 5"),
    (lambda _: global_mask(8, 9), "num_global must be at most L=8, got 9"),
    (lambda _: random_mask(8, -1), "num_random must be >= 0, got -1"),
    (lambda _: random_mask(0, 1), "L must be >= 1, got 0"),
    (lambda _: dilated_window_mask(8, 2, 0), "dilation must be >= 1, got 0"),
    (lambda _: bigbird_mask(8, 0, 1, 1), "window must be >= 1, got 0"),
    (lambda _: reach(torch.ones(3, 4, dtype=torch.bool), 1),
     r"square \(L, L\) bool tensor, got shape \(3, 4\)"),
    (lambda _: layers_to_reach(sliding_window_mask(4, 2), 7), r"source must lie in \[0, L=4\), got 7"),
    (lambda qkv: sliding_window_attention(*qkv((), 5), 0), "window must be >= 1, got 0"),
    (lambda qkv: sliding_window_attention(*qkv((), 5), 2, block_size=0), "block_size must be >= 1, got 0"),
    (lambda _: sliding_window_attention(torch.randn(4, 8), torch.randn(5, 8), torch.randn(5, 2), 2),
     r"as many keys as queries, got query \(4, 8\) and key \(5, 8\)"),
    (lambda qkv: sliding_window_attention(*qkv((), 5), 2, attn_mask=torch.ones(4, 5, dtype=torch.bool)),
     r"attn_mask of shape \(4, 5\) does not broadcast to the scores \(..., L, S\) \(5, 5\)"),
    (lambda qkv: sliding_window_attention(*qkv((), 5), 2, attn_mask=torch.ones(5, 5, dtype=torch.long)),
     "attn_mask must be bool"),
    (lambda qkv: sliding_window_attention(*qkv((), 5), 2, scale=-1.0),
     "scale must be a positive finite number"),
])
def test_bad_parameters_raise_clear_errors(call, message, qkv):
    with pytest.raises((ValueError, TypeError), match=message):
        call(qkv)


# --- Reformer's LSH attention -------------------------------------------------------------

def test_lsh_with_one_bucket_and_one_chunk_is_dense_shared_qk_attention():
    qk, v = torch.randn(2, 3, 32, 8, dtype=torch.float64), torch.randn(2, 3, 32, 5, dtype=torch.float64)
    keys = qk / qk.norm(dim=-1, keepdim=True)
    dense, _ = scaled_dot_product_attention(qk, keys, v, attn_mask=~torch.eye(32, dtype=torch.bool))
    out, weights = lsh_attention(qk, qk, v, num_buckets=1, chunk_size=32)
    assert weights is None
    torch.testing.assert_close(out, dense)


def test_lsh_within_buckets_equals_dense_attention_restricted_to_buckets():
    """With one chunk, each query attends exactly to its bucket-mates (self excluded)."""
    qk, v = torch.randn(40, 6, dtype=torch.float64), torch.randn(40, 3, dtype=torch.float64)
    buckets = lsh_buckets(qk, 4, seed=3)[0]
    allowed = (buckets.unsqueeze(1) == buckets.unsqueeze(0)) & ~torch.eye(40, dtype=torch.bool)
    allowed |= ~allowed.any(-1, keepdim=True) & torch.eye(40, dtype=torch.bool)  # alone: itself
    keys = qk / qk.norm(dim=-1, keepdim=True)
    dense, _ = scaled_dot_product_attention(qk, keys, v, attn_mask=allowed)
    torch.testing.assert_close(lsh_attention(qk, qk, v, num_buckets=4, chunk_size=40, seed=3)[0], dense)


def test_lsh_is_seeded_and_shapes_hold():
    x = torch.randn(2, 64, 8)
    assert lsh_buckets(x, 8, num_hashes=3).shape == (3, 2, 64)
    assert torch.equal(lsh_buckets(x, 8, seed=1), lsh_buckets(x, 8, seed=1))
    assert not torch.equal(lsh_buckets(x, 8, seed=1), lsh_buckets(x, 8, seed=2))
    assert lsh_buckets(x, 8).max() < 8
    v = torch.randn(2, 64, 5)
    out, _ = lsh_attention(x, x, v, 8, chunk_size=16, num_hashes=2, seed=4)
    assert out.shape == (2, 64, 5)
    torch.testing.assert_close(out, lsh_attention(x, x, v, 8, chunk_size=16, num_hashes=2, seed=4)[0])
    # a key equal in value to the query is the same shared query/key
    torch.testing.assert_close(out, lsh_attention(x, x.clone(), v, 8, chunk_size=16, num_hashes=2, seed=4)[0])


def test_more_hashes_recover_more_of_the_true_top_keys():
    qk = torch.randn(256, 16)
    keys = qk / qk.norm(dim=-1, keepdim=True)
    scores = (qk @ keys.T).fill_diagonal_(-1e9)
    top = scores.topk(8, dim=-1).indices
    recovered = [lsh_candidates(qk, 16, h, seed=0).gather(1, top).float().mean().item() for h in (1, 4, 16)]
    assert recovered[0] < recovered[1] < recovered[2] and recovered[2] > 0.9


@pytest.mark.parametrize("call,message", [
    (lambda: lsh_buckets(torch.randn(4, 2), 3), "num_buckets must be 1 or even, got 3"),
    (lambda: lsh_buckets(torch.randn(4, 2), 4, 0), "num_hashes must be >= 1, got 0"),
    (lambda: lsh_attention(*[torch.randn(10, 4)] * 2, torch.randn(10, 2), 2, chunk_size=4),
     "T=10 must be a multiple of chunk_size=4"),
    (lambda: lsh_attention(torch.randn(8, 4), torch.randn(8, 4), torch.randn(8, 2), 2, chunk_size=4),
     r"shares queries and keys \(Reformer\): key must be query itself, got a different key of "
     r"shape \(8, 4\) for query \(8, 4\)"),
    (lambda: lsh_attention(torch.randn(8, 4), torch.randn(6, 4), torch.randn(6, 2), 2, chunk_size=2),
     "key must be query itself"),
    (lambda: lsh_candidates(torch.randn(2, 10, 4), 2), r"qk must be \(T, E\)"),
])
def test_lsh_bad_parameters(call, message):
    with pytest.raises(ValueError, match=message):
        call()
