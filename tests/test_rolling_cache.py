"""A rolling KV cache with attention sinks: decoding through it equals full causal
attention under the sliding-window mask with the first num_sinks positions always
visible, at every step, with and without RoPE; RoPE uses each token's original
(absolute) position; the memory stays at num_sinks + window positions."""

import pytest
import torch
from torch.testing import assert_close

from attention_core import MultiHeadAttention, RollingKVCache, apply_rotary, causal_mask, sliding_window_mask


def streaming_mask(T, window, num_sinks):
    """(T, T): the causal sliding window, plus the first num_sinks keys for every query."""
    sinks = causal_mask(T) & (torch.arange(T) < num_sinks)  # (T, T): key j < num_sinks, j <= i
    return sliding_window_mask(T, window, causal=True) | sinks


def setup(rope, num_kv_heads=2, T=17, seed=0):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads, rope=rope).double().eval()
    x = torch.randn(2, T, 16, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    return mha, x


@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("window,num_sinks", [(1, 0), (4, 0), (4, 2), (3, 1), (6, 4), (20, 2)])
def test_decoding_one_token_at_a_time_equals_the_masked_full_forward(rope, window, num_sinks):
    mha, x = setup(rope)
    T = x.size(1)
    cache = RollingKVCache(2, 2, 4, window, num_sinks, dtype=torch.float64)
    with torch.no_grad():
        full, full_w = mha(x, attn_mask=streaming_mask(T, window, num_sinks))
        for t in range(T):
            step, w = mha(x[:, t:t + 1], is_causal=True, kv_cache=cache)
            assert_close(step, full[:, t:t + 1], msg=f"step {t}")
            visible = full_w[:, :, t, :t + 1]
            assert_close(w.sum(-1), torch.ones(2, 4, 1, dtype=torch.float64))
            assert_close(w[:, :, 0], visible[..., visible[0, 0] > 0])  # same weights, same order
    assert cache.nbytes() <= 2 * 2 * 2 * 4 * 8 * (window + num_sinks)


@pytest.mark.parametrize("rope", [False, True])
def test_a_prompt_in_one_chunk_then_decoding(rope):
    window, num_sinks, T = 4, 2, 17
    mha, x = setup(rope, num_kv_heads=1)
    cache = RollingKVCache(2, 1, 4, window, num_sinks, dtype=torch.float64)
    with torch.no_grad():
        full, _ = mha(x, attn_mask=streaming_mask(T, window, num_sinks))
        for start, stop in ((0, 7), (7, 8), (8, 13), (13, 17)):  # chunks longer than the window too
            mask = cache.attn_mask(stop - start)
            out, _ = mha(x[:, start:stop], attn_mask=mask, kv_cache=cache)
            assert_close(out, full[:, start:stop], msg=f"chunk {start}:{stop}")


def test_rope_uses_original_positions_not_cache_slots():
    """Each key is rotated once, at the absolute position it had when it was appended
    (Mistral); StreamingLLM's renumbering inside the cache would give other outputs."""
    window, num_sinks, T = 3, 1, 9
    mha, x = setup(rope=True, num_kv_heads=4, T=T)
    cache = RollingKVCache(2, 4, 4, window, num_sinks, dtype=torch.float64)
    with torch.no_grad():
        for t in range(T):
            last, _ = mha(x[:, t:t + 1], kv_cache=cache)
        # the last query by hand: keys at absolute positions 0 (sink), 6, 7, 8
        kept = [0, 6, 7, 8]
        q = mha.q_proj(x).view(2, T, 4, 4).transpose(1, 2)
        k = mha.k_proj(x).view(2, T, 4, 4).transpose(1, 2)
        v = mha.v_proj(x).view(2, T, 4, 4).transpose(1, 2)

        def answer(key_positions):
            qr = apply_rotary(q[:, :, -1:], torch.tensor([key_positions[-1]]))
            kr = apply_rotary(k[:, :, kept], torch.tensor(key_positions))
            out = torch.nn.functional.scaled_dot_product_attention(qr, kr, v[:, :, kept])
            return mha.out_proj(out.transpose(1, 2).reshape(2, 1, 16))

        assert cache.cached_positions() == [0, 7, 8]  # what the next token would see, besides itself
        assert_close(last, answer(kept))  # original positions
        assert (last - answer([0, 1, 2, 3])).abs().max() > 1e-3  # renumbered: different


def test_memory_stops_growing_at_sinks_plus_window():
    cache = RollingKVCache(1, 2, 4, window=5, num_sinks=3)
    per_position = 2 * 2 * 4 * 4  # keys and values, 2 heads of 4, float32
    sizes = []
    for _ in range(20):
        cache.append(torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4))
        sizes.append(cache.nbytes() // per_position)
    assert sizes[:8] == list(range(1, 9)) and set(sizes[8:]) == {8}
    assert cache.keys.shape == (1, 2, 8, 4) and cache.length == 20
    assert cache.cached_positions() == [0, 1, 2, 16, 17, 18, 19]


def test_reset_empties_the_cache_and_a_refilled_cache_equals_a_fresh_one():
    window, num_sinks = 3, 1
    mha, x = setup(rope=True, T=9)
    used = RollingKVCache(2, 2, 4, window, num_sinks, dtype=torch.float64)
    with torch.no_grad():
        for t in range(9):  # past the window: the ring has wrapped around
            mha(x[:, t:t + 1], kv_cache=used)
        used.reset()
        assert used.length == 0 and used.nbytes() == 0 and used.cached_positions() == []
        fresh = RollingKVCache(2, 2, 4, window, num_sinks, dtype=torch.float64)
        for t in range(6):
            a, wa = mha(x[:, t:t + 1], kv_cache=used)
            b, wb = mha(x[:, t:t + 1], kv_cache=fresh)
            assert torch.equal(a, b) and torch.equal(wa, wb)
    assert torch.equal(used.keys, fresh.keys) and used.length == fresh.length == 6


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        RollingKVCache(1, 2, 4, window=0)
    with pytest.raises(ValueError, match="num_sinks must be >= 0, got -1"):
        RollingKVCache(1, 2, 4, window=2, num_sinks=-1)
    with pytest.raises(TypeError, match="window must be an int"):
        RollingKVCache(1, 2, 4, window=2.0)
    cache = RollingKVCache(1, 2, 4, window=2)
    with pytest.raises(ValueError, match=r"must be \(B, Hkv, T, E\) with \(B, Hkv, E\) = \(1, 2, 4\)"):
        cache.append(torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4))


def test_runs_on_the_meta_device():
    cache = RollingKVCache(2, 2, 4, window=3, num_sinks=1, device="meta")
    mha = MultiHeadAttention(16, 4, num_kv_heads=2, rope=True, device="meta")
    for _ in range(6):
        out, w = mha(torch.empty(2, 1, 16, device="meta"), kv_cache=cache)
    assert out.device.type == "meta" and w.shape == (2, 4, 1, 4)
    assert cache.attn_mask(3).device.type == "meta"


def test_streaming_mask_is_window_or_sink_and_causal():
    from attention_core.nn.kv_cache import streaming_mask

    for window, num_sinks in ((1, 0), (3, 2), (5, 9)):
        reference = streaming_reference(9, window, num_sinks)
        assert torch.equal(streaming_mask(9, window, num_sinks), reference)
        assert reference.diagonal().all()
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        streaming_mask(4, 0)
    assert streaming_mask(4, 2, 1, device="meta").device.type == "meta"


def streaming_reference(T, window, num_sinks):
    return torch.tensor([[j <= i and (i - j < window or j < num_sinks) for j in range(T)] for i in range(T)])


def test_seen_recently_task_by_hand():
    from attention_core.models.toy_tasks import seen_recently_batch

    x, y = seen_recently_batch(64, 12, 5, lookback=3, generator=torch.Generator().manual_seed(0))
    assert (x[:, 0] == 0).all() and x[:, 1:].min() >= 1 and x.max() <= 4
    for b in range(64):
        for t in range(12):
            assert y[b, t, 0] == int(any(x[b, t] == x[b, s] for s in range(max(0, t - 3), t)))
