"""MultiHeadAttention against torch.nn.MultiheadAttention, and GQA/MQA against MHA."""

from functools import partial

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from attention_core import (
    ATTENTION_FUNCTIONS,
    MultiHeadAttention,
    MultiHeadLatentAttention,
    apply_rotary,
    causal_mask,
    merge_heads,
    padding_mask,
    repeat_kv,
    scaled_dot_product_attention,
    sliding_window_mask,
    split_heads,
)
from attention_core.nn.linear_attention import linear_attention


def pair(E=16, H=4):
    ref = nn.MultiheadAttention(E, H, batch_first=True).double().eval()
    return ref, MultiHeadAttention.from_torch(ref).eval()


def test_self_attention_equals_torch():
    ref, mine = pair()
    x = torch.randn(3, 7, 16, dtype=torch.float64)
    out_ref, w_ref = ref(x, x, x, average_attn_weights=False)
    out, w = mine(x)
    assert out.shape == (3, 7, 16) and w.shape == (3, 4, 7, 7)
    assert_close(out, out_ref)
    assert_close(w, w_ref)


def test_cross_attention_with_padding_equals_torch():
    ref, mine = pair(E=12, H=3)
    x, memory = torch.randn(2, 5, 12, dtype=torch.float64), torch.randn(2, 8, 12, dtype=torch.float64)
    lengths = [8, 5]
    out_ref, w_ref = ref(x, memory, memory, key_padding_mask=~padding_mask(lengths, 8)[:, 0],
                         average_attn_weights=False)
    out, w = mine(x, memory, attn_mask=padding_mask(lengths, 8).unsqueeze(1))
    assert w.shape == (2, 3, 5, 8)
    assert_close(out, out_ref)
    assert_close(w, w_ref)
    assert (w[1, :, :, 5:] == 0).all()


def test_causal_equals_torch():
    ref, mine = pair()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    out_ref, _ = ref(x, x, x, attn_mask=~causal_mask(6))  # torch: True = blocked
    out, _ = mine(x, is_causal=True)
    assert_close(out, out_ref)


def test_from_torch_rejects_other_modules():
    with pytest.raises(TypeError, match=r"module must be an nn\.MultiheadAttention"):
        MultiHeadAttention.from_torch(nn.Linear(4, 4))


def test_parameter_count_matches_torch():
    ref, mine = pair(E=32, H=8)
    assert sum(p.numel() for p in mine.parameters()) == sum(p.numel() for p in ref.parameters())


def test_num_kv_heads_equal_num_heads_is_mha():
    a = MultiHeadAttention(16, 4).double()
    b = MultiHeadAttention(16, 4, num_kv_heads=4).double()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    assert_close(a(x)[0], b(x)[0])


@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_gqa_equals_mha_with_repeated_kv_heads(num_kv_heads):
    """GQA is MHA whose key/value projections repeat each kv head for its group."""
    H, D = 4, 3
    gqa = MultiHeadAttention(H * D, H, num_kv_heads=num_kv_heads).double()
    mha = MultiHeadAttention(H * D, H).double()
    groups = H // num_kv_heads
    with torch.no_grad():
        for name in ("q_proj", "out_proj"):
            getattr(mha, name).load_state_dict(getattr(gqa, name).state_dict())
        for name in ("k_proj", "v_proj"):
            src, dst = getattr(gqa, name), getattr(mha, name)
            w = src.weight.view(num_kv_heads, D, H * D).repeat_interleave(groups, 0)
            dst.weight.copy_(w.reshape(H * D, H * D))
            dst.bias.copy_(src.bias.view(num_kv_heads, D).repeat_interleave(groups, 0).flatten())
    x = torch.randn(2, 5, H * D, dtype=torch.float64)
    assert sum(p.numel() for p in gqa.parameters()) < sum(p.numel() for p in mha.parameters())
    assert_close(gqa(x, is_causal=True)[0], mha(x, is_causal=True)[0])
    assert_close(gqa(x)[1], mha(x)[1])


def test_split_merge_roundtrip_and_repeat_kv():
    x = torch.randn(2, 5, 12)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    assert torch.equal(heads[:, 1], x[..., 4:8])  # head h owns dims h*E .. (h+1)*E
    assert torch.equal(merge_heads(heads), x)
    kv = torch.randn(2, 2, 5, 4)
    rep = repeat_kv(kv, 3)
    assert rep.shape == (2, 6, 5, 4)
    for h in range(6):
        assert torch.equal(rep[:, h], kv[:, h // 3])


def test_rope_is_applied_to_queries_and_keys():
    mha = MultiHeadAttention(16, 2, rope=True).double()
    x = torch.randn(1, 6, 16, dtype=torch.float64)
    q = split_heads(mha.q_proj(x), 2)
    k = split_heads(mha.k_proj(x), 2)
    v = split_heads(mha.v_proj(x), 2)
    expected, w_expected = scaled_dot_product_attention(apply_rotary(q), apply_rotary(k), v)
    out, w = mha(x)
    assert_close(w, w_expected)
    assert_close(out, mha.out_proj(merge_heads(expected)))


def test_dropout_only_in_training():
    mha = MultiHeadAttention(8, 2, dropout=0.5)
    x = torch.randn(1, 4, 8)
    mha.eval()
    assert_close(mha(x)[0], mha(x)[0])
    mha.train()
    assert not torch.equal(mha(x)[1], mha(x)[1])


# --- the kernel, picked by name from ATTENTION_FUNCTIONS --------------------------------


def twins(attention, num_kv_heads=None, rope=False, seed=0):
    """An eager layer and one with ``attention``, with the same weights."""
    torch.manual_seed(seed)
    eager = MultiHeadAttention(16, 4, num_kv_heads, rope=rope).double().eval()
    other = MultiHeadAttention(16, 4, num_kv_heads, rope=rope, attention=attention).double().eval()
    other.load_state_dict(eager.state_dict())
    return eager, other


def test_default_attention_is_eager():
    assert MultiHeadAttention(8, 2).attention == "eager"


@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
def test_need_weights_false_attends_with_sdpa_and_gives_the_same_output(num_kv_heads):
    """need_weights=False: an eager layer gives the same output by the fused kernel, weights None,
    with masks, causal, and a cache (one query, then a chunk of queries, lower-right aligned)."""
    layer = MultiHeadAttention(16, 4, num_kv_heads, rope=True, dtype=torch.float64).eval()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    keep = padding_mask([9, 5], 9).unsqueeze(1)  # (B, 1, 1, S)
    for kwargs in ({}, {"is_causal": True}, {"attn_mask": keep}, {"attn_mask": keep, "is_causal": True}):
        out, weights = layer(x, **kwargs, need_weights=False)
        assert weights is None
        assert_close(out, layer(x, **kwargs)[0])
    outs = {}
    for need in (True, False):
        cache = layer.new_cache(2, 9)
        steps = [layer(x[:, :1], is_causal=True, kv_cache=cache, need_weights=need)[0],
                 layer(x[:, 1:6], is_causal=True, kv_cache=cache, need_weights=need)[0],
                 layer(x[:, 6:], is_causal=True, kv_cache=cache, need_weights=need)[0]]
        outs[need] = torch.cat(steps, dim=1)
    assert_close(outs[False], outs[True])
    assert_close(outs[False], layer(x, is_causal=True)[0])
    named = MultiHeadAttention(16, 4, num_kv_heads, attention="grouped_query", dtype=torch.float64)
    kept = named(x, need_weights=False)[1]  # only "eager" is swapped: another kernel is kept as it is
    assert kept is not None and kept.shape == (2, 4, 9, 9)
    with pytest.raises(TypeError, match="need_weights"):
        layer(x, need_weights="no")


@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
@pytest.mark.parametrize("rope", [False, True])
def test_flash_equals_eager_for_mha_gqa_and_mqa(num_kv_heads, rope):
    eager, flash = twins("flash", num_kv_heads, rope)
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    keep = padding_mask([9, 5], 9).unsqueeze(1)  # (B, 1, 1, S)
    for kwargs in ({}, {"is_causal": True}, {"attn_mask": keep}, {"attn_mask": keep, "is_causal": True}):
        out, weights = flash(x, **kwargs)
        assert weights is None  # the tiled kernel never forms them
        assert_close(out, eager(x, **kwargs)[0])


def test_flash_with_fixed_tiles_and_a_kv_cache_equals_eager():
    tiles = partial(ATTENTION_FUNCTIONS["flash"], block_q=2, block_k=3)
    eager, flash = twins(tiles, num_kv_heads=2, rope=True)
    x = torch.randn(2, 8, 16, dtype=torch.float64)
    cache = flash.new_cache(2, max_len=8)
    with torch.no_grad():
        full, _ = eager(x, is_causal=True)
        steps = [flash(x[:, :3], is_causal=True, kv_cache=cache)[0]]
        steps += [flash(x[:, t:t + 1], is_causal=True, kv_cache=cache)[0] for t in range(3, 8)]
    assert_close(torch.cat(steps, dim=1), full)


@pytest.mark.parametrize("window", [1, 3])
def test_sliding_window_with_its_window_fixed_equals_eager_under_the_band(window):
    eager, banded = twins(partial(ATTENTION_FUNCTIONS["sliding_window"], window=window), num_kv_heads=2)
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    out, weights = banded(x, is_causal=True)
    assert weights is None
    assert_close(out, eager(x, attn_mask=sliding_window_mask(7, window, causal=True))[0])


def test_grouped_query_by_name_is_the_eager_path():
    eager, grouped = twins("grouped_query", num_kv_heads=2)
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    for a, b in zip(grouped(x, is_causal=True), eager(x, is_causal=True)):
        assert torch.equal(a, b)


def test_a_kernel_that_refuses_attn_mask_serves_calls_without_one():
    """Linear attention cannot honour attn_mask and has no dropout_p: a call without them
    works, and equals the kernel on the key/value heads repeated to num_heads."""
    _, linear = twins("linear", num_kv_heads=1)
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    for is_causal in (False, True):
        out, weights = linear(x, is_causal=is_causal)
        q = split_heads(linear.q_proj(x), 4)
        k, v = repeat_kv(split_heads(linear.k_proj(x), 1), 4), repeat_kv(split_heads(linear.v_proj(x), 1), 4)
        expected, _ = linear_attention(q, k, v, is_causal=is_causal)
        assert weights is None
        assert_close(out, linear.out_proj(merge_heads(expected)))


def test_bad_attention_is_named():
    with pytest.raises(ValueError, match=r"attention must be one of \[.*'eager'.*'flash'.*\].*got 'fast'"):
        MultiHeadAttention(8, 2, attention="fast")
    with pytest.raises(TypeError, match="attention must be a name in"):
        MultiHeadAttention(8, 2, attention=lambda q, k, v: (v, None))
    with pytest.raises(ValueError, match="attention=.*flash.* has no dropout"):
        MultiHeadAttention(8, 2, dropout=0.1, attention="flash")
    with pytest.raises(TypeError, match=r"ATTENTION_FUNCTIONS\['flash'\] takes no option 'window'"):
        MultiHeadAttention(8, 2, attention=partial(ATTENTION_FUNCTIONS["flash"], window=3))
    with pytest.raises(TypeError, match=r"ATTENTION_FUNCTIONS\['sliding_window'\] needs the option window="):
        MultiHeadAttention(8, 2, attention=partial(ATTENTION_FUNCTIONS["sliding_window"], block_size=2))
    with pytest.raises(TypeError):
        MultiHeadAttention(8, 2, None, True, 0.0, False, 10000.0, None, None, "flash")  # keyword-only


def test_kernels_that_cannot_serve_the_layer_or_the_call_are_named():
    with pytest.raises(ValueError, match="attention='lsh' needs key to be query"):
        MultiHeadAttention(16, 4, attention="lsh")
    linear = MultiHeadAttention(16, 4, attention="linear")
    x = torch.randn(2, 5, 16)
    out, weights = linear(x, is_causal=True)  # what linear attention takes works
    assert out.shape == (2, 5, 16) and weights is None
    with pytest.raises(ValueError, match=r"ATTENTION_FUNCTIONS\['linear'\] cannot honour attn_mask"):
        linear(x, attn_mask=torch.ones(5, 5, dtype=torch.bool))


@pytest.mark.parametrize("B", [1, 2])  # B == 1 and B == num_heads broadcast silently as (H, L, S)
def test_a_padding_mask_without_its_head_axis_is_refused_with_the_fix(B):
    mha = MultiHeadAttention(8, 2)
    x, lengths = torch.randn(B, 3, 8), [2, 1][:B]
    with pytest.raises(ValueError, match=r"attn_mask of shape \(\d, 1, 3\) has 3 dims.*unsqueeze\(1\)"):
        mha(x, attn_mask=padding_mask(lengths, 3))
    _, weights = mha(x, attn_mask=padding_mask(lengths, 3).unsqueeze(1))  # (B, 1, 1, S)
    for b, n in enumerate(lengths):
        assert (weights[b, :, :, n:] == 0).all()


def test_inputs_in_another_dtype_are_named_before_projecting():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(TypeError, match=r"key has dtype torch.float16 but must have torch.float32"):
        mha(x, x.half())
    with pytest.raises(TypeError, match=r"x has dtype torch.float64"):
        MultiHeadLatentAttention(8, 2, 4)(x.double())
