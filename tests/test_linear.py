"""Linear attention against its quadratic definition, and FAVOR+ against softmax."""

import math

import pytest
import torch

from attention_core import scaled_dot_product_attention
from attention_core.nn.linear_attention import (
    elu_feature_map,
    kernel_attention_weights,
    linear_attention,
    linformer_attention,
    performer_feature_map,
    random_features,
    sequence_projection,
)


@pytest.mark.parametrize("feature_map", ["elu", "relu", lambda x: x.square()])
def test_noncausal_equals_the_quadratic_form(feature_map, qkv):
    q, k, v = qkv((2, 3), 11, 7, Ev=5)
    expected = kernel_attention_weights(q, k, feature_map) @ v
    out, weights = linear_attention(q, k, v, feature_map)
    assert weights is None
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("chunk_size", [1, 3, 8, 64])
def test_causal_prefix_sums_equal_the_masked_quadratic_form(chunk_size, qkv):
    q, k, v = qkv((2,), 19, Ev=5)
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)
    scores = (phi_q @ phi_k.transpose(-2, -1)) * torch.ones(19, 19, dtype=torch.bool).tril()
    expected = (scores / scores.sum(-1, keepdim=True)) @ v  # written out, independently
    torch.testing.assert_close(linear_attention(q, k, v, is_causal=True, chunk_size=chunk_size)[0], expected)
    torch.testing.assert_close(kernel_attention_weights(q, k, is_causal=True) @ v, expected)


def test_causal_output_ignores_the_future(qkv):
    q, k, v = qkv((), 12, Ev=5)
    out, _ = linear_attention(q, k, v, is_causal=True, chunk_size=5)
    k2, v2 = k.clone(), v.clone()
    k2[8:], v2[8:] = 100.0, -100.0
    torch.testing.assert_close(linear_attention(q, k2, v2, is_causal=True, chunk_size=5)[0][:8], out[:8])


def test_elu_weights_are_positive_rows_summing_to_one(qkv):
    q, k, _ = qkv((), 6, Ev=5)
    w = kernel_attention_weights(q, k)
    assert (w > 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(6, dtype=torch.float64))


def test_orthogonal_features_are_orthogonal_within_a_block():
    W = random_features(12, 8, orthogonal=True, seed=0, dtype=torch.float64)
    block = W[:8] / W[:8].norm(dim=-1, keepdim=True)
    torch.testing.assert_close(block @ block.T, torch.eye(8, dtype=torch.float64))
    assert torch.equal(W, random_features(12, 8, seed=0, dtype=torch.float64))
    assert not torch.equal(W, random_features(12, 8, seed=1, dtype=torch.float64))


@pytest.mark.parametrize("orthogonal", [False, True])
def test_favor_estimates_the_softmax_kernel_without_bias(orthogonal):
    """Mean over many seeds of phi(q).phi(k) approaches exp(q.k / sqrt(E))."""
    E = 4
    q, k = torch.randn(E, dtype=torch.float64) * 0.5, torch.randn(E, dtype=torch.float64) * 0.5
    estimates = []
    for seed in range(300):
        W = random_features(64, E, orthogonal, seed, dtype=torch.float64)
        phi = lambda x, W=W: (torch.exp(W @ (x / E**0.25) - (x / E**0.25).square().sum() / 2)
                              / math.sqrt(64))
        estimates.append(phi(q) @ phi(k))
    exact = math.exp(q @ k / math.sqrt(E))
    assert torch.stack(estimates).mean().item() == pytest.approx(exact, rel=0.02)


def test_performer_attention_approaches_softmax_attention_as_features_grow():
    """The error falls as 1/sqrt(M) (here x16 features: about /4). Its constant grows as
    exp(|q|^2 + |k|^2)/sqrt(E)-ish, so the test uses queries and keys of modest norm."""
    q, k, v = torch.randn(2, 64, 16) * 0.5, torch.randn(2, 64, 16) * 0.5, torch.randn(2, 64, 16)
    exact, _ = scaled_dot_product_attention(q, k, v)

    def error(m):
        errs = [(linear_attention(q, k, v, performer_feature_map(m, 16, seed=s))[0] - exact).norm()
                / exact.norm() for s in range(8)]
        return sum(errs) / len(errs)

    small, large = error(16), error(1024)
    assert large < 0.3 * small and large < 0.12


def test_performer_features_are_positive_and_check_their_dim():
    phi = performer_feature_map(32, 8, seed=0)
    assert (phi(torch.randn(5, 8) * 3) > 0).all()
    with pytest.raises(ValueError, match=r"drawn for dim=8, got input of shape \(5, 6\)"):
        phi(torch.randn(5, 6))


@pytest.mark.parametrize("call,message", [
    (lambda qkv: linear_attention(*qkv((), 4), feature_map="softmax"),
     "feature_map must be a callable or one of"),
    (lambda qkv: linear_attention(*qkv((), 4), chunk_size=0), "chunk_size must be >= 1, got 0"),
    (lambda qkv: linear_attention(*qkv((), 4, 6), is_causal=True),
     r"as many keys as queries, got query \(4, 8\) and key \(6, 8\)"),
    (lambda _: random_features(0, 4), "num_features must be >= 1, got 0"),
    (lambda _: performer_feature_map(8, 4, seed=-1), "seed must be >= 0, got -1"),
])
def test_bad_parameters_raise_clear_errors(call, message, qkv):
    with pytest.raises((ValueError, TypeError), match=message):
        call(qkv)


# --- Linformer ------------------------------------------------------------------------------

def test_linformer_with_identity_projections_is_dense_attention(qkv):
    q, k, v = qkv((2, 3), 16, Ev=5)
    out, weights = linformer_attention(q, k, v, torch.eye(16, dtype=torch.float64))
    dense, dense_weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, dense)
    torch.testing.assert_close(weights, dense_weights)


def test_linformer_attends_over_projected_positions(qkv):
    q, k, v = qkv((2,), 50, Ev=5)
    P_K = sequence_projection(8, 50, seed=0, dtype=torch.float64)  # (R, S)
    P_V = sequence_projection(8, 50, seed=1, dtype=torch.float64)
    out, weights = linformer_attention(q, k, v, key_projection=P_K, value_projection=P_V)
    expected, _ = scaled_dot_product_attention(q, P_K @ k, P_V @ v)
    assert weights.shape == (2, 50, 8)
    torch.testing.assert_close(out, expected)


def test_projection_is_seeded_and_scaled():
    P = sequence_projection(64, 4000, seed=0, dtype=torch.float64)
    assert torch.equal(P, sequence_projection(64, 4000, seed=0, dtype=torch.float64))
    assert P.var().item() == pytest.approx(1 / 64, rel=0.05)  # entries N(0, 1/R)


def test_linformer_error_falls_as_k_grows(qkv):
    q, k, v = qkv((), 256, E=16, Ev=5)
    dense, _ = scaled_dot_product_attention(q, k, v)

    def error(m, s):
        P = sequence_projection(m, 256, seed=s, dtype=torch.float64)
        return (linformer_attention(q, k, v, P)[0] - dense).norm() / dense.norm()

    errors = [torch.stack([error(m, s) for s in range(4)]).mean() for m in (8, 64, 1024)]
    assert errors[0] > errors[1] > errors[2]


@pytest.mark.parametrize("call,message", [
    (lambda qkv: linformer_attention(*qkv((), 6), torch.eye(5, dtype=torch.float64)),
     r"key_projection must be an \(R, S=6\) projection, got \(5, 5\)"),
    (lambda qkv: linformer_attention(*qkv((), 6), torch.eye(6, dtype=torch.float64),
                                 torch.eye(5, dtype=torch.float64)),
     r"value_projection must be an \(R, S=6\) projection, got \(5, 5\)"),
    (lambda qkv: linformer_attention(*qkv((), 6), torch.ones(3, 6, dtype=torch.float64),
                                 torch.ones(2, 6, dtype=torch.float64)),
     r"the same R, got \(3, 6\) and \(2, 6\)"),
    (lambda _: sequence_projection(0, 8), "proj_len must be >= 1, got 0"),
    (lambda _: sequence_projection(4, 0), "seq_len must be >= 1, got 0"),
])
def test_linformer_bad_parameters(call, message, qkv):
    with pytest.raises(ValueError, match=message):
        call(qkv)


def test_pooling_projection_averages_segments():
    from attention_core.nn.linear_attention import pooling_projection

    assert torch.equal(pooling_projection(5, 5), torch.eye(5))
    P = pooling_projection(3, 10)
    torch.testing.assert_close(P.sum(-1), torch.ones(3))
    assert ((P > 0).sum(-1).tolist() == [3, 3, 4]
            and torch.equal((P > 0).sum(0), torch.ones(10, dtype=torch.long)))
    with pytest.raises(ValueError, match="seq_len must be >= 4, got 3"):
        pooling_projection(4, 3)
