"""Incremental decoding with a KV cache equals full recomputation, for MHA, GQA and MQA;
every cache of the package follows one interface (length, nbytes, reset; append for head
caches)."""

import pytest
import torch
from torch.testing import assert_close

from attention_core import (
    KVCache,
    LatentKVCache,
    MultiHeadAttention,
    MultiHeadLatentAttention,
    PagedKVCache,
    RollingKVCache,
    grouped_query_attention,
    kv_cache_bytes,
    repeat_kv,
    scaled_dot_product_attention,
)
from attention_core.nn.kv_cache import Cache, HeadCache
from attention_core.nn.multihead import mean_pool_kv_heads


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
@pytest.mark.parametrize("rope", [False, True])
def test_cached_decoding_equals_recompute_at_every_step(num_kv_heads, rope):
    mha = MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads, rope=rope).double().eval()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    cache = KVCache(2, num_kv_heads, 4, max_len=9, dtype=torch.float64)
    with torch.no_grad():
        full, full_w = mha(x, is_causal=True)
        prompt, _ = mha(x[:, :3], is_causal=True, kv_cache=cache)  # pre-fill 3 tokens at once
        assert_close(prompt, full[:, :3])
        for t in range(3, 9):  # then one token at a time
            step, w = mha(x[:, t:t + 1], is_causal=True, kv_cache=cache)
            assert_close(step, full[:, t:t + 1])
            assert_close(w[..., :t + 1], full_w[:, :, t:t + 1, :t + 1])
    assert cache.length == 9
    assert cache.nbytes() == kv_cache_bytes(1, num_kv_heads, 4, 9, batch_size=2, bytes_per_element=8)


def test_cache_errors():
    cache = KVCache(1, 2, 4, max_len=3)
    with pytest.raises(ValueError, match=r"cache full: 0 \+ 4 new positions exceed max_len=3"):
        cache.append(torch.zeros(1, 2, 4, 4), torch.zeros(1, 2, 4, 4))
    with pytest.raises(ValueError, match=r"must be \(B, Hkv, T, E\) with \(B, Hkv, E\) = \(1, 2, 4\)"):
        cache.append(torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4))
    with pytest.raises(ValueError, match="max_len must be >= 1, got 0"):
        KVCache(1, 2, 4, max_len=0)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("L,S", [(5, 5), (1, 7), (3, 8)])
def test_grouped_path_equals_repeated_kv(causal, L, S):
    q = torch.randn(2, 6, L, 8, dtype=torch.float64)
    k, v = torch.randn(2, 3, S, 8, dtype=torch.float64), torch.randn(2, 3, S, 8, dtype=torch.float64)
    out, w = grouped_query_attention(q, k, v, is_causal=causal)
    ref_out, ref_w = scaled_dot_product_attention(q, repeat_kv(k, 2), repeat_kv(v, 2), is_causal=causal)
    assert_close(out, ref_out)
    assert_close(w, ref_w)


def test_grouped_query_attention_takes_a_scale_and_pytorchs_names():
    q = torch.randn(2, 6, 4, 8, dtype=torch.float64)
    k, v = torch.randn(2, 2, 7, 8, dtype=torch.float64), torch.randn(2, 2, 7, 5, dtype=torch.float64)
    out, w = grouped_query_attention(query=q, key=k, value=v, is_causal=True, scale=0.3)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q, repeat_kv(k, 3), repeat_kv(v, 3), scale=0.3,
        attn_mask=torch.ones(4, 7, dtype=torch.bool).tril(3))  # queries aligned to the end
    assert out.shape == (2, 6, 4, 5) and w.shape == (2, 6, 4, 7)
    assert_close(out, ref)


@pytest.mark.parametrize("q_shape,k_shape,v_shape,message", [
    ((2, 6, 4, 8), (2, 4, 7, 8), (2, 4, 7, 8), r"key's 4 heads must divide query's 6 heads"),
    ((2, 6, 4, 8), (2, 3, 7, 5), (2, 3, 7, 8), "query and key must have the same last dim E"),
    ((2, 6, 4, 8), (2, 3, 7, 8), (2, 3, 6, 8), "key and value must agree on all dims but the last"),
    ((2, 6, 4, 8), (1, 3, 7, 8), (1, 3, 7, 8), "same batch size B"),
    ((6, 4, 8), (3, 7, 8), (3, 7, 8), r"query must have at least 4 dims, got shape \(6, 4, 8\)"),
])
def test_grouped_query_attention_names_bad_input(q_shape, k_shape, v_shape, message):
    with pytest.raises(ValueError, match=message):
        grouped_query_attention(torch.randn(q_shape), torch.randn(k_shape), torch.randn(v_shape))


def test_mean_pooling_conversion():
    mha = MultiHeadAttention(8, 4).double()
    gqa = mean_pool_kv_heads(mha, 2)
    assert gqa.num_kv_heads == 2 and gqa.k_proj.weight.shape == (4, 8)
    # kv head 1 of the GQA layer is the mean of MHA heads 2 and 3
    assert_close(gqa.k_proj.weight[2:4], (mha.k_proj.weight[4:6] + mha.k_proj.weight[6:8]) / 2)
    assert_close(gqa.v_proj.bias[0:2], (mha.v_proj.bias[0:2] + mha.v_proj.bias[2:4]) / 2)
    same = mean_pool_kv_heads(mha, 4)  # groups of one: an exact copy
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    assert_close(same(x)[0], mha(x)[0])
    with pytest.raises(ValueError, match="mha must be plain MHA"):
        mean_pool_kv_heads(gqa, 1)


@pytest.mark.parametrize("config,per_token", [
    ((32, 32, 128), 524_288),   # Llama 2 7B: 2 * 32 layers * 32 kv heads * 128 * 2 bytes
    ((40, 40, 128), 819_200),   # Llama 2 13B
    ((80, 8, 128), 327_680),    # Llama 2 70B, GQA with 8 kv heads
    ((32, 8, 128), 131_072),    # Mistral 7B, GQA with 8 kv heads
    ((32, 1, 64), 8_192),       # Falcon 7B, MQA
])
def test_kv_cache_bytes_of_published_models(config, per_token):
    layers, kv_heads, head_dim = config
    assert kv_cache_bytes(layers, kv_heads, head_dim, 1) == per_token
    assert kv_cache_bytes(layers, kv_heads, head_dim, 4096, batch_size=3) == per_token * 4096 * 3


def test_num_kv_heads_must_divide_num_heads():
    with pytest.raises(ValueError, match="num_kv_heads=3 must divide num_heads=8"):
        MultiHeadAttention(64, 8, num_kv_heads=3)


# --- one cache interface ---------------------------------------------------------------


def test_every_cache_follows_the_cache_protocol():
    head_caches = [KVCache(1, 2, 4, 5), RollingKVCache(1, 2, 4, window=3, num_sinks=1),
                   MultiHeadAttention(8, 2).new_cache(1, 5)]
    for cache in head_caches:
        assert isinstance(cache, HeadCache) and isinstance(cache, Cache)
    for cache in (LatentKVCache(1, 8, 2, 5), MultiHeadLatentAttention(8, 2, 4).new_cache(1, 5),
                  PagedKVCache(4, 2, 2, 4)):
        assert isinstance(cache, Cache)
    for cache in [*head_caches, LatentKVCache(1, 8, 2, 5), PagedKVCache(4, 2, 2, 4)]:
        assert cache.length == 0 and cache.nbytes() == 0  # a new cache is empty
    # each implements the interface itself (isinstance only checks that the names exist)
    for cls, members in ((KVCache, ("nbytes", "reset", "append")),
                         (RollingKVCache, ("nbytes", "reset", "append")),
                         (LatentKVCache, ("nbytes", "reset")), (PagedKVCache, ("nbytes", "reset"))):
        for name in members:
            assert getattr(cls, name) is not getattr(HeadCache, name), f"{cls.__name__}.{name}"
    assert not isinstance(object(), Cache) and not isinstance(torch.zeros(1), Cache)


def test_new_cache_is_a_kv_cache_on_the_parameters_device_and_dtype():
    mha = MultiHeadAttention(16, 4, num_kv_heads=2, dtype=torch.float64)
    cache = mha.new_cache(3, max_len=7)
    assert isinstance(cache, KVCache) and cache.length == 0
    assert cache.keys.shape == cache.values.shape == (3, 2, 7, 4)  # (B, Hkv, max_len, E)
    assert cache.keys.dtype == torch.float64 and cache.keys.device == mha.k_proj.weight.device
    on_meta = MultiHeadAttention(16, 4, device="meta").new_cache(1, 2)
    assert on_meta.keys.device.type == "meta" and on_meta.keys.shape == (1, 4, 2, 4)


def decode(mha, x, cache):
    """Feed ``x (B, T, D)`` through ``mha`` one token at a time; return the outputs."""
    with torch.no_grad():
        return [mha(x[:, t:t + 1], is_causal=True, kv_cache=cache) for t in range(x.size(1))]


@pytest.mark.parametrize("num_kv_heads", [4, 1])
def test_reset_empties_the_cache_and_a_refilled_cache_equals_a_fresh_one(num_kv_heads):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads, rope=True).double().eval()
    first, second = torch.randn(2, 6, 16, dtype=torch.float64), torch.randn(2, 5, 16, dtype=torch.float64)
    used = mha.new_cache(2, max_len=6)
    decode(mha, first, used)
    assert used.length == 6
    used.reset()
    assert used.length == 0 and used.nbytes() == 0
    fresh = mha.new_cache(2, max_len=6)
    for (a, wa), (b, wb) in zip(decode(mha, second, used), decode(mha, second, fresh)):
        assert torch.equal(a, b) and torch.equal(wa, wb)
    assert torch.equal(used.keys, fresh.keys) and torch.equal(used.values, fresh.values)


def test_nbytes_counts_the_positions_cached():
    cache = KVCache(2, 3, 4, max_len=10, dtype=torch.float16)
    for T, total in ((4, 4), (1, 5), (5, 10)):
        new = torch.zeros(2, 3, T, 4, dtype=torch.float16)
        cache.append(new, new)
        assert cache.length == total
        assert cache.nbytes() == kv_cache_bytes(1, 3, 4, total, batch_size=2, bytes_per_element=2)


def test_crop_rewinds_and_the_next_step_equals_a_fresh_decode():
    """Decoding token S again after crop(S) gives what a cache that never saw the dropped
    tokens gives (the rewind of chapter 9's timing loop, and of speculative decoding)."""
    mha = MultiHeadAttention(16, 4, num_kv_heads=2).eval()
    x = torch.randn(2, 6, 16)
    with torch.no_grad():
        cache = mha.new_cache(2, max_len=8)
        mha(x[:, :4], is_causal=True, kv_cache=cache)
        draft, _ = mha(torch.randn(2, 2, 16), is_causal=True, kv_cache=cache)  # rejected
        cache.crop(4)
        assert cache.length == 4 and cache.nbytes() == 2 * 2 * 2 * 4 * 4 * 4  # k and v, B, Hkv, S, E, float32
        again, _ = mha(x[:, 4:], is_causal=True, kv_cache=cache)
        fresh = mha.new_cache(2, max_len=8)
        mha(x[:, :4], is_causal=True, kv_cache=fresh)
        expected, _ = mha(x[:, 4:], is_causal=True, kv_cache=fresh)
    torch.testing.assert_close(again, expected, rtol=0, atol=0)
    for bad in (7, -1, 2.0, True):
        with pytest.raises(ValueError, match="length must be an int in \\[0, 6\\]"):
            cache.crop(bad)


def test_latent_cache_crop_rewinds_like_the_kv_cache():
    mla = MultiHeadLatentAttention(16, 2, 8, rope_dim=4).eval()
    x = torch.randn(1, 5, 16)
    with torch.no_grad():
        cache = mla.new_cache(1, max_len=8)
        mla(x[:, :4], is_causal=True, kv_cache=cache)
        mla(torch.randn(1, 3, 16), is_causal=True, kv_cache=cache)  # rejected draft tokens
        cache.crop(4)
        assert cache.length == 4 and cache.nbytes() == 4 * (8 + 4) * 4  # S (latent + rope) float32
        again, _ = mla(x[:, 4:], is_causal=True, kv_cache=cache)
        fresh = mla.new_cache(1, max_len=8)
        mla(x[:, :4], is_causal=True, kv_cache=fresh)
        expected, _ = mla(x[:, 4:], is_causal=True, kv_cache=fresh)
    torch.testing.assert_close(again, expected, rtol=0, atol=0)
    with pytest.raises(ValueError, match="length must be an int in \\[0, 5\\]"):
        cache.crop(6)


def test_a_refused_append_writes_nothing():
    cache = KVCache(1, 2, 4, 8)
    for k, error in ((torch.randn(1, 2, 1, 4, dtype=torch.float64), TypeError),  # another dtype
                     (torch.randn(1, 2, 0, 4), ValueError),  # no token
                     (torch.randn(2, 1, 4), ValueError)):  # no batch axis
        with pytest.raises(error, match=r"^k "):
            cache.append(k, k)
    assert cache.length == 0 and not cache.keys.any()
