"""The delta rule: the recurrent form equals a naive loop written from the formula, the
chunked (UT-transform) form equals the recurrent one for any chunk size, with and
without the gate; identities: beta = 0 is silence, a unit key written with beta = 1 is
recalled exactly, and with orthogonal keys the delta rule equals linear attention."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from attention_core import delta_rule_attention

B, H, T, E, Ev = 2, 3, 19, 6, 5


def inputs(seed=0, gated=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, E, generator=g, dtype=torch.float64)
    k = F.normalize(torch.randn(B, H, T, E, generator=g, dtype=torch.float64), dim=-1)
    v = torch.randn(B, H, T, Ev, generator=g, dtype=torch.float64)
    beta = torch.rand(B, H, T, generator=g, dtype=torch.float64)
    gate = 0.5 + 0.5 * torch.rand(B, H, T, generator=g, dtype=torch.float64) if gated else None
    return q, k, v, beta, gate


def naive(q, k, v, beta, gate):
    """The formula, one (b, h) and one token at a time, with explicit outer products."""
    out = torch.zeros(B, H, T, Ev, dtype=q.dtype)
    for b in range(B):
        for h in range(H):
            S = torch.zeros(Ev, E, dtype=q.dtype)
            for t in range(T):
                if gate is not None:
                    S = gate[b, h, t] * S
                S = S - beta[b, h, t] * torch.outer(S @ k[b, h, t] - v[b, h, t], k[b, h, t])
                out[b, h, t] = S @ q[b, h, t]
    return out


@pytest.mark.parametrize("gated", [False, True])
def test_recurrent_form_is_the_formula(gated):
    q, k, v, beta, gate = inputs(gated=gated)
    out, weights = delta_rule_attention(q, k, v, beta, gate)
    assert weights is None and out.shape == (B, H, T, Ev)
    assert_close(out, naive(q, k, v, beta, gate))


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("chunk_size", [1, 4, 7, T, 32])
def test_chunked_form_equals_recurrent(gated, chunk_size):
    q, k, v, beta, gate = inputs(seed=1, gated=gated)
    recurrent, _ = delta_rule_attention(q, k, v, beta, gate)
    chunked, _ = delta_rule_attention(q, k, v, beta, gate, chunk_size=chunk_size)
    assert_close(chunked, recurrent)


def test_chunked_form_with_strong_forgetting_stays_finite():
    q, k, v, beta, _ = inputs(seed=2)
    gate = torch.full((B, H, T), 1e-3, dtype=torch.float64)
    assert_close(delta_rule_attention(q, k, v, beta, gate, chunk_size=T)[0],
                 delta_rule_attention(q, k, v, beta, gate)[0])


def test_identities():
    q, k, v, beta, _ = inputs(seed=3)
    silent, _ = delta_rule_attention(q, k, v, torch.zeros_like(beta))
    assert (silent == 0).all()  # beta = 0 writes nothing
    one = torch.ones_like(beta)
    out, _ = delta_rule_attention(k, k, v, one)  # query with the key just written
    assert_close(out, v)  # beta = 1, unit key: S_t k_t = v_t exactly
    # orthogonal keys: no correction ever interferes, so it is linear attention S = sum v k^T
    eye = torch.eye(E, dtype=torch.float64).expand(B, H, E, E)
    vq = v[:, :, :E]
    out, _ = delta_rule_attention(q[:, :, :E], eye, vq, one[:, :, :E])
    linear = (q[:, :, :E] @ eye.transpose(-2, -1)).tril() @ vq  # causal, unnormalised
    assert_close(out, linear)


def test_errors_name_the_argument():
    q, k, v, beta, _ = inputs()
    with pytest.raises(ValueError, match=r"beta must be \(B, H, T\) = \(2, 3, 19\), got \(2, 3, 18\)"):
        delta_rule_attention(q, k, v, beta[..., :-1])
    with pytest.raises(ValueError, match=r"gate must be \(B, H, T\)"):
        delta_rule_attention(q, k, v, beta, gate=beta[:1])
    with pytest.raises(ValueError, match="query and key must have the same last dim E"):
        delta_rule_attention(q, k[..., :3], v, beta)
    with pytest.raises(ValueError, match="query and key must both be"):
        delta_rule_attention(q[:, :, :5], k, v, beta)  # fewer queries than keys: not causal
    with pytest.raises(ValueError, match="chunk_size must be >= 1, got 0"):
        delta_rule_attention(q, k, v, beta, chunk_size=0)
    with pytest.raises(TypeError, match="beta must be a torch.Tensor"):
        delta_rule_attention(q, k, v, 0.5)


@pytest.mark.parametrize("chunk_size", [None, 4])
def test_runs_on_the_meta_device(chunk_size):
    q, k, v, beta, gate = (x.to("meta") for x in inputs(gated=True))
    out, _ = delta_rule_attention(q, k, v, beta, gate, chunk_size=chunk_size)
    assert out.device.type == "meta" and out.shape == (B, H, T, Ev)


def test_recall_with_updates_marks_the_last_write_of_each_key():
    from attention_core.models.toy_tasks import recall_with_updates

    keys, k, v, latest = recall_with_updates(5, num_keys=4, num_writes=11, dim=8, seed=3)
    assert keys.shape == (5, 4, 8) and k.shape == v.shape == (5, 11, 8)
    assert_close(keys.norm(dim=-1), torch.ones(5, 4))
    for b in range(5):
        for key in range(4):
            writes = [t for t in range(11) if torch.equal(k[b, t], keys[b, key])]
            assert writes and latest[b, key] == writes[-1]  # every key written, the last one kept


def test_beta_and_gate_are_checked_before_any_computation():
    q, k, v, beta, gate = inputs(gated=True)
    with pytest.raises(ValueError, match=r"beta must lie in \[0, 2\], got values from -0.4"):
        delta_rule_attention(q, k, v, beta - 0.5)
    with pytest.raises(ValueError, match=r"beta must lie in \[0, 2\], got values from .* to 3"):
        delta_rule_attention(q, k, v, beta.clamp_min(0) + torch.arange(T, dtype=beta.dtype) / 6)
    with pytest.raises(ValueError, match=r"gate must lie in \[0, 1\]"):
        delta_rule_attention(q, k, v, beta, gate + 1)
    with pytest.raises(TypeError, match=r"beta must have query's dtype torch.float64, got torch.float32"):
        delta_rule_attention(q, k, v, beta.float())
    with pytest.raises(TypeError, match="gate must be a floating-point tensor, got dtype torch.int64"):
        delta_rule_attention(q, k, v, beta, torch.ones_like(beta, dtype=torch.long))
    with pytest.raises(ValueError, match="gate is on device meta but must be on cpu, the device of query"):
        delta_rule_attention(q, k, v, beta, gate.to("meta"))
    with pytest.raises(TypeError, match="gate must be a torch.Tensor, got float"):
        delta_rule_attention(q, k, v, beta, 0.9)


def test_the_edges_of_beta_and_gate_are_allowed_and_nan_passes_through():
    q, k, v, beta, gate = inputs(gated=True)
    for chunk_size in (None, 5):
        out, _ = delta_rule_attention(q, k, v, 2 * torch.ones_like(beta), torch.zeros_like(gate),
                                      chunk_size=chunk_size)
        assert torch.isfinite(out).all()
    beta[0, 0, 3] = float("nan")
    out, _ = delta_rule_attention(q, k, v, beta)  # NaN in, NaN out: not a range error
    assert out[0, 0, 3:].isnan().all() and torch.isfinite(out[1]).all()
