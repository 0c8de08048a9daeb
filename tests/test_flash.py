"""Tiled attention is exact, and never holds more than one tile of scores."""

import math
import time

import pytest
import torch
from torch.testing import assert_close

from attention_core import causal_mask, scaled_dot_product_attention
from attention_core.nn.flash import flash_attention, flash_attention_lse, online_softmax


@pytest.mark.parametrize("L,S,block_q,block_k",
                         [(16, 16, 4, 4), (37, 23, 5, 7), (5, 40, 8, 3), (9, 9, 64, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_equals_naive_attention(L, S, block_q, block_k, causal, qkv):
    q, k, v = qkv((2, 3), L, S, Ev=6)
    out, lse = flash_attention_lse(q, k, v, is_causal=causal, block_q=block_q, block_k=block_k)
    ref, weights = scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert_close(out, ref)
    assert_close(flash_attention(q, k, v, is_causal=causal, block_q=block_q, block_k=block_k)[0], out)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        scores = scores.masked_fill(~causal_mask(L, S), -math.inf)
    alive = scores.amax(-1) > -math.inf
    assert_close(lse[alive], torch.logsumexp(scores, -1)[alive])


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_equals_naive_with_masks(kind, qkv):
    q, k, v = qkv((2,), 13, 11, Ev=6)
    if kind == "bool":
        mask = torch.rand(2, 13, 11) > 0.4
        mask[:, 3] = False  # a query with no key at all
    else:
        mask = torch.randn(13, 11, dtype=torch.float64)
    out, weights = flash_attention(q, k, v, attn_mask=mask, block_q=4, block_k=3)
    ref, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert weights is None
    assert_close(out, ref)
    assert torch.isfinite(out).all()


def test_custom_scale_and_float32(qkv):
    q, k, v = qkv((4,), 50, Ev=6, dtype=torch.float32)
    out, _ = flash_attention(q, k, v, scale=0.3, block_q=16, block_k=16)
    assert_close(out, scaled_dot_product_attention(q, k, v, scale=0.3)[0], atol=1e-5, rtol=1e-5)


def test_online_softmax_matches_softmax_and_traces_the_running_values():
    scores = torch.tensor([1.0, 3.0, 2.0, 5.0, 0.0, 4.0], dtype=torch.float64)
    weights, trace = online_softmax(scores, block_size=2)
    assert_close(weights, torch.softmax(scores, -1))
    assert [t["m"] for t in trace] == [3.0, 5.0, 5.0]
    # after the first block l = e^(1-3) + e^0; the second block rescales it by e^(3-5)
    l1 = math.exp(-2) + 1
    assert abs(trace[0]["l"] - l1) < 1e-12
    assert abs(trace[1]["l"] - (l1 * math.exp(-2) + math.exp(-3) + 1)) < 1e-12
    assert abs(trace[-1]["l"] - torch.exp(scores - 5).sum().item()) < 1e-12


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("L", [64, 256, 512])
def test_memory_is_one_tile_not_the_score_matrix(L, is_causal, largest_tensor):
    """The largest intermediate is a (B, H, block_q, block_k) tile or the output, however
    long the sequence, causal too (each tile builds its own piece of the mask); naive
    attention's grows as L * L."""
    B, H, D, block = 1, 2, 8, 32
    q, k, v = (torch.randn(B, H, L, D) for _ in range(3))
    with largest_tensor() as tiled:
        flash_attention(q, k, v, block_q=block, block_k=block, is_causal=is_causal)
    with largest_tensor() as naive:
        scaled_dot_product_attention(q, k, v)
    assert tiled.largest <= max(B * H * block * block, B * H * L * D)
    assert naive.largest == B * H * L * L


def test_bad_blocks_raise(qkv):
    q, k, v = qkv((), 4, Ev=6)
    with pytest.raises(ValueError, match="block_q must be >= 1, got 0"):
        flash_attention(q, k, v, block_q=0)
    with pytest.raises(ValueError, match="scores must be one row"):
        online_softmax(torch.zeros(2, 2), 2)


def test_fitted_exponent_recovers_a_power_law():
    from attention_core.models.measure import fitted_exponent

    sizes = [256, 512, 1024, 2048]
    assert abs(fitted_exponent(sizes, [3e-6 * n**2 for n in sizes]) - 2) < 1e-9
    assert abs(fitted_exponent(sizes, [5 * n**1.5 for n in sizes]) - 1.5) < 1e-9
    with pytest.raises(ValueError, match="at least two"):
        fitted_exponent([1], [1])


def test_timings_wait_for_queued_gpu_work(monkeypatch):
    """A CUDA call returns once its work is queued: median_seconds and min_seconds wait for
    the GPU before each timer is read (here a stand-in GPU whose work takes 20 ms and is
    only waited for by ``torch.cuda.synchronize``), and touch nothing where CUDA is unused."""
    from attention_core.models.measure import median_seconds, min_seconds

    queued = []

    def synchronize():
        for seconds in queued:
            time.sleep(seconds)
        queued.clear()

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    for timer in (median_seconds, min_seconds):
        assert timer(lambda: queued.append(0.02), repeats=3, warmup=0) >= 0.02
        assert not queued
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # CUDA never used here
    median_seconds(lambda: queued.append(0.02), repeats=3, warmup=0)
    assert len(queued) == 3  # never waited for
