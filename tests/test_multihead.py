"""MultiHeadAttention against torch.nn.MultiheadAttention, and GQA/MQA against MHA."""

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from attention_core import (MultiHeadAttention, apply_rotary, causal_mask, merge_heads,
                            padding_mask, repeat_kv, scaled_dot_product_attention, split_heads)


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
    with pytest.raises(TypeError, match="module must be an nn.MultiheadAttention"):
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
