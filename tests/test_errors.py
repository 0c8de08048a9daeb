"""Every documented bad input raises before computing, naming the argument and what it got."""

import pytest
import torch

from attention_core import (
    MultiHeadAttention,
    TransformerBlock,
    TransformerDecoderBlock,
    apply_rotary,
    attention_entropy,
    causal_mask,
    grouped_query_attention,
    kv_cache_bytes,
    padding_mask,
    scaled_dot_product_attention,
    sinusoidal_encoding,
    sliding_window_mask,
)

q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
sdpa = scaled_dot_product_attention

CASES = [
    ("query not a tensor", lambda: sdpa([[1.0]], k, v),
     TypeError, "query must be a torch.Tensor"),
    ("integer query", lambda: sdpa(q.long(), k, v),
     TypeError, "query must be a floating-point"),
    ("1-D query", lambda: sdpa(torch.randn(4), k, v),
     ValueError, r"query must have at least 2 dims, got shape \(4,\)"),
    ("mixed dtypes", lambda: sdpa(q.double(), k, v),
     TypeError, "share a dtype"),
    ("E mismatch", lambda: sdpa(q, torch.randn(2, 5, 3), v),
     ValueError, r"same last dim E, got query \(2, 3, 4\) and key \(2, 5, 3\)"),
    ("S mismatch", lambda: sdpa(q, k, torch.randn(2, 4, 6)),
     ValueError, r"key \(2, 5, 4\) and value \(2, 4, 6\)"),
    ("empty sequence", lambda: sdpa(torch.randn(2, 0, 4), k, v),
     ValueError, r"empty sequence: query \(2, 0, 4\)"),
    ("batch mismatch", lambda: sdpa(torch.randn(3, 3, 4), k, v),
     ValueError, "do not broadcast"),
    ("mask wrong shape", lambda: sdpa(q, k, v, attn_mask=torch.ones(3, 4, dtype=torch.bool)),
     ValueError, r"attn_mask of shape \(3, 4\) does not broadcast to the scores .* \(2, 3, 5\)"),
    ("integer mask", lambda: sdpa(q, k, v, attn_mask=torch.ones(3, 5, dtype=torch.long)),
     TypeError, "attn_mask must be bool .* got dtype torch.int64"),
    ("mask not a tensor", lambda: sdpa(q, k, v, attn_mask=[[True]]),
     TypeError, "attn_mask must be a torch.Tensor"),
    ("negative scale", lambda: sdpa(q, k, v, scale=-1.0),
     ValueError, "scale must be a positive finite number or None, got -1.0"),
    ("dropout out of range", lambda: sdpa(q, k, v, dropout_p=1.5),
     ValueError, r"dropout_p must lie in \[0, 1\), got 1.5"),
    ("heads do not divide", lambda: MultiHeadAttention(10, 3),
     ValueError, "num_heads=3 must divide embed_dim=10"),
    ("kv heads do not divide", lambda: MultiHeadAttention(12, 4, num_kv_heads=3),
     ValueError, "num_kv_heads=3 must divide num_heads=4"),
    ("zero heads", lambda: MultiHeadAttention(12, 0),
     ValueError, "num_heads must be >= 1, got 0"),
    ("float heads", lambda: MultiHeadAttention(12, 2.0),
     TypeError, "num_heads must be an int, got float"),
    ("MHA wrong width", lambda: MultiHeadAttention(8, 2)(torch.randn(2, 3, 6)),
     ValueError, r"query must have shape \(B, T, embed_dim=8\), got \(2, 3, 6\)"),
    ("MHA 2-D input", lambda: MultiHeadAttention(8, 2)(torch.randn(3, 8)),
     ValueError, r"query must have at least 3 dims, got shape \(3, 8\)"),
    ("MHA key batch", lambda: MultiHeadAttention(8, 2)(torch.randn(2, 3, 8), torch.randn(1, 3, 8)),
     ValueError, "must share B"),
    ("MHA rope odd head dim", lambda: MultiHeadAttention(6, 2, rope=True),
     ValueError, "even head_dim, got 3"),
    ("MHA mask shape",
     lambda: MultiHeadAttention(8, 2)(torch.randn(2, 3, 8), attn_mask=torch.ones(4, 4, dtype=torch.bool)),
     ValueError, r"attn_mask of shape \(4, 4\)"),
    ("GQA kv heads do not divide",
     lambda: grouped_query_attention(torch.randn(1, 6, 3, 4), torch.randn(1, 4, 5, 4),
                                     torch.randn(1, 4, 5, 4)),
     ValueError, r"key's 4 heads must divide query's 6 heads .*query \(1, 6, 3, 4\), key \(1, 4, 5, 4\)"),
    ("GQA 3-D query", lambda: grouped_query_attention(q, k, v),
     ValueError, r"query must have at least 4 dims, got shape \(2, 3, 4\)"),
    ("MHA padding mask without head axis",
     lambda: MultiHeadAttention(8, 2)(torch.randn(2, 3, 8), attn_mask=padding_mask([3, 1], 3)),
     ValueError, r"attn_mask of shape \(2, 1, 3\) has 3 dims.*attn_mask.unsqueeze\(1\)"),
    ("MHA query dtype", lambda: MultiHeadAttention(8, 2)(torch.randn(2, 3, 8, dtype=torch.float64)),
     TypeError, "query has dtype torch.float64 but must have torch.float32"),
    ("decoder block without memory", lambda: TransformerDecoderBlock(8, 2, 16)(torch.randn(2, 3, 8), None),
     TypeError, "memory is required"),
    ("block x width", lambda: TransformerBlock(8, 2, 16)(torch.randn(2, 3, 6)),
     ValueError, r"x must have shape \(B, T, embed_dim=8\), got \(2, 3, 6\)"),
    ("MHA unknown attention", lambda: MultiHeadAttention(8, 2, attention="fast"),
     ValueError, r"attention must be one of \[.*'flash'.*\].*got 'fast'"),
    ("MHA attention not a kernel", lambda: MultiHeadAttention(8, 2, attention=print),
     TypeError, "attention must be a name in"),
    ("causal L zero", lambda: causal_mask(0),
     ValueError, "L must be >= 1, got 0"),
    ("padding lengths too long", lambda: padding_mask([3, 9], 5),
     ValueError, r"lengths must lie in \[0, S=5\], got \[3, 9\]"),
    ("padding lengths 2-D", lambda: padding_mask([[1]], 5),
     ValueError, r"lengths must be a 1-D integer sequence, got shape \(1, 1\)"),
    ("window zero", lambda: sliding_window_mask(5, 0),
     ValueError, "window must be >= 1, got 0"),
    ("odd d_model", lambda: sinusoidal_encoding(10, 7),
     ValueError, "d_model must be even .* got 7"),
    ("rope odd dim", lambda: apply_rotary(torch.randn(4, 5)),
     ValueError, r"x.shape\[-1\] must be even .* got 5"),
    ("rope positions", lambda: apply_rotary(torch.randn(4, 6), torch.arange(3)),
     ValueError, r"positions must have shape \(4,\)"),
    ("entropy of ints", lambda: attention_entropy(torch.ones(3, dtype=torch.long)),
     TypeError, "weights must be a floating-point"),
    ("cache zero layers", lambda: kv_cache_bytes(0, 8, 128, 4096),
     ValueError, "num_layers must be >= 1, got 0"),
    ("cache float seq_len", lambda: kv_cache_bytes(32, 8, 128, 4096.0),
     TypeError, "seq_len must be an int, got float"),
]


@pytest.mark.parametrize("what,call,error,message", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_clear_error(what, call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_at_least_twelve_distinct_cases():
    assert len({c[0] for c in CASES}) >= 12
