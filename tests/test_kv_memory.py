"""One KV-memory calculator for every variant, checked by hand against published
configurations (Llama 3 8B, Mistral 7B, Gemma 3 27B, DeepSeek-V3) and against the
chapter-9 formula, kv_cache_bytes, which it reuses."""

import pytest

from attention_core import KVLayout, kv_cache_bytes, kv_memory_bytes
from attention_core.models.serving import PUBLISHED, variants

GiB = 2**30


def test_llama3_8b_is_128_kib_per_token():
    # 2 (K, V) * 32 layers * 8 kv heads * 128 dims * 2 bytes
    assert kv_memory_bytes(PUBLISHED["Llama 3 8B"], 1) == 131_072
    assert kv_memory_bytes(PUBLISHED["Llama 3 8B"], 8192) == 1 * GiB


def test_mistral_window_caps_the_cache_eightfold_at_32k():
    mistral = PUBLISHED["Mistral 7B"]
    assert kv_memory_bytes(mistral, 4096) == 131_072 * 4096
    assert kv_memory_bytes(mistral, 32_768) == kv_memory_bytes(mistral, 4096)  # the rolling buffer
    full = kv_memory_bytes(KVLayout(32, 8, 128), 32_768)
    assert full / kv_memory_bytes(mistral, 32_768) == 8  # Jiang et al. 2023: 8x at 32k


def test_gemma3_27b_five_local_to_one_global():
    gemma = PUBLISHED["Gemma 3 27B"]
    assert gemma.layer_counts() == (10, 52)  # 62 layers: 62 // 6 global
    per_layer_token = 2 * 16 * 128 * 2
    expected = per_layer_token * (10 * 32_768 + 52 * 1024)
    assert kv_memory_bytes(gemma, 32_768) == expected
    all_global = kv_memory_bytes(KVLayout(62, 16, 128), 32_768)
    assert 5 < all_global / expected < 6


def test_deepseek_v3_caches_576_numbers_per_token_and_layer():
    v3 = PUBLISHED["DeepSeek-V3"]
    assert v3.bytes_per_token_and_layer() == (512 + 64) * 2
    assert kv_memory_bytes(v3, 1) == 61 * 576 * 2 == 70_272
    assert kv_memory_bytes(v3, 1000, batch_size=3) == 3 * 1000 * 70_272


def test_mla_is_four_and_a_half_head_dims_per_layer():
    """DeepSeek-V2 (Table 1): MLA's cache is (d_c + d_R) l = 9/2 d_h l numbers, like GQA
    with 2.25 groups."""
    v = variants()
    mla, mha = v["MLA"].bytes_per_token_and_layer(), v["MHA"].bytes_per_token_and_layer()
    assert mla == 4.5 * 128 * 2
    assert mla == KVLayout(32, 1, 128).bytes_per_token_and_layer() * 2.25
    assert mha / mla == 2 * 32 / 4.5


def test_reuses_kv_cache_bytes_for_standard_layers():
    for layout in (KVLayout(32, 32, 128), KVLayout(80, 8, 128), KVLayout(32, 1, 64)):
        for n in (1, 999, 4096):
            assert kv_memory_bytes(layout, n, batch_size=2) == kv_cache_bytes(
                layout.num_layers, layout.num_kv_heads, layout.head_dim, n, batch_size=2)


def test_sinks_and_cross_layer_sharing():
    v = variants(window=4096, num_sinks=4)
    n = 100_000
    assert kv_memory_bytes(v["GQA-8 + window + sinks"], n) == 131_072 * 4100
    assert kv_memory_bytes(v["GQA-8 + window + sinks"], 100) == kv_memory_bytes(v["GQA-8"], 100)
    assert kv_memory_bytes(v["GQA-8 + CLA2"], n) * 2 == kv_memory_bytes(v["GQA-8"], n)
    assert KVLayout(3, 8, 128, share_every=2).layer_counts() == (2, 0)  # an odd layer keeps its own
    assert kv_memory_bytes(v["MQA"], n) * 32 == kv_memory_bytes(v["MHA"], n)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="need a window, got window=None"):
        KVLayout(4, num_sinks=4)
    with pytest.raises(ValueError, match="share_every must be >= 1, got 0"):
        KVLayout(4, share_every=0)
    with pytest.raises(TypeError, match="layout must be a KVLayout, got dict"):
        kv_memory_bytes({"num_layers": 4}, 10)
    with pytest.raises(ValueError, match="seq_len must be >= 1, got 0"):
        kv_memory_bytes(KVLayout(4), 0)
