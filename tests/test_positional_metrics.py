import math

import torch
from torch.testing import assert_close

from attention_core import apply_rotary, kv_cache_bytes, sinusoidal_encoding


def test_sinusoidal_known_values():
    pe = sinusoidal_encoding(50, 8)
    assert pe.shape == (50, 8)
    assert abs(pe[1, 0].item() - math.sin(1)) < 1e-7 and abs(pe[1, 1].item() - math.cos(1)) < 1e-7
    assert abs(pe[3, 2].item() - math.sin(3 / 10000 ** (2 / 8))) < 1e-7
    assert_close(pe[0], torch.tensor([0.0, 1.0] * 4))


def test_rope_dot_product_depends_only_on_offset():
    q, k = torch.randn(1, 16, dtype=torch.float64), torch.randn(1, 16, dtype=torch.float64)
    def score(m, n):
        qm = apply_rotary(q, torch.tensor([m]))
        kn = apply_rotary(k, torch.tensor([n]))
        return (qm * kn).sum().item()
    assert abs(score(5, 2) - score(13, 10)) < 1e-9
    assert abs(score(0, 0) - (q * k).sum().item()) < 1e-12  # position 0: no rotation


def test_rope_pairs_adjacent_dims_and_keeps_norms():
    x = torch.zeros(2, 4, dtype=torch.float64)
    x[:, 0] = 1.0  # all in dim 0: rotating moves it into dim 1 only
    out = apply_rotary(x, torch.tensor([0, 1]))
    assert_close(out[1], torch.tensor([math.cos(1), math.sin(1), 0, 0], dtype=torch.float64))
    y = torch.randn(3, 7, 8)
    assert_close(apply_rotary(y).norm(dim=-1), y.norm(dim=-1))


def test_kv_cache_bytes_hand_computed():
    # Llama 2 7B: 32 layers, 32 kv heads of 128 dims, fp16: 0.5 MiB per token.
    assert kv_cache_bytes(32, 32, 128, 1) == 2 * 32 * 32 * 128 * 2 == 524288
    assert kv_cache_bytes(32, 32, 128, 4096) == 2 * 1024**3  # 2 GiB at 4k context
    assert kv_cache_bytes(80, 8, 128, 4096, batch_size=2, bytes_per_element=4) == 2 * 80 * 8 * 128 * 4096 * 2 * 4
