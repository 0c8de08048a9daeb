import math

import pytest
import torch
from torch.testing import assert_close

from attention_core import (
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    kv_cache_bytes,
    ntk_aware_base,
    rotary_layout,
    sinusoidal_encoding,
    sinusoidal_shift_matrix,
)
from attention_core.nn.positional import _frequencies


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
    assert (kv_cache_bytes(80, 8, 128, 4096, batch_size=2, bytes_per_element=4)
            == 2 * 80 * 8 * 128 * 4096 * 2 * 4)


def test_sinusoidal_shift_is_a_fixed_rotation_for_every_position():
    pe = sinusoidal_encoding(200, 16).double()
    for k in (1, 5, 37):
        M = sinusoidal_shift_matrix(k, 16).double()
        assert_close(pe[k:], pe[:-k] @ M.T, atol=1e-5, rtol=0)  # float32 encoding
        assert_close(M @ M.T, torch.eye(16, dtype=torch.float64), atol=1e-6, rtol=0)


def test_sinusoidal_dot_product_depends_only_on_distance():
    pe = sinusoidal_encoding(100, 32).double()
    gram = pe @ pe.T
    for d in (0, 1, 7, 40):
        diagonal = torch.diagonal(gram, offset=d)
        assert_close(diagonal, torch.full_like(diagonal, diagonal[0].item()), atol=1e-5, rtol=0)
    assert_close(gram, gram.T)


def test_sinusoidal_wavelengths_run_from_2pi_to_base_times_2pi():
    frequencies = _frequencies(512, 10000.0)
    wavelengths = 2 * math.pi / frequencies
    assert abs(wavelengths[0] - 2 * math.pi) < 1e-9
    # the last pair, i = d/2 - 1, has wavelength 2 pi base^((d-2)/d): just short of base * 2 pi
    assert abs(wavelengths[-1] - 2 * math.pi * 10000 ** (510 / 512)) < 1e-6
    assert wavelengths[-1] < 10000 * 2 * math.pi
    ratios = wavelengths[1:] / wavelengths[:-1]
    assert_close(ratios, torch.full_like(ratios, ratios[0].item()))  # geometric


def test_ntk_aware_base_keeps_the_fastest_pair_and_slows_the_slowest():
    """YaRN's (Peng et al. 2023, sec. 3.1) NTK-aware base b' = b * s**(D/(D-2)): pair 0
    still turns 1 radian a position, the last pair s times slower; so rotating position
    s*p with the new base equals rotating p with the old one in the last pair, while
    position interpolation (positions / s) equals it in every pair."""
    D, s, base = 64, 4.0, 10000.0
    new = ntk_aware_base(base, s, D)
    assert new == pytest.approx(10000.0 * 4.0 ** (64 / 62))
    old_theta, new_theta = _frequencies(D, base), _frequencies(D, new)
    assert new_theta[0].item() == 1.0 and old_theta[0].item() == 1.0
    assert (old_theta[-1] / new_theta[-1]).item() == pytest.approx(s, rel=1e-12)
    assert torch.all(new_theta <= old_theta)  # every pair turns slower or the same
    x = torch.randn(3, 8, D, dtype=torch.float64)
    p = torch.arange(8, dtype=torch.float64)
    last = slice(D - 2, D)
    assert_close(apply_rotary(x, s * p, base=new)[..., last], apply_rotary(x, p)[..., last])
    assert_close(apply_rotary(x, s * p / s), apply_rotary(x, p))  # interpolation, every pair
    assert ntk_aware_base(base, 1, D) == base  # no stretch, no change
    for bad, name in (((base, 0.5, D), "scale"), ((base, 2.0, 7), "dim"), ((1.0, 2.0, D), "base"),
                      ((base, 2.0, 2), "dim")):
        with pytest.raises(ValueError, match=name):
            ntk_aware_base(*bad)


def test_alibi_slopes_follow_the_paper():
    assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(h + 1) for h in range(8)]))
    # 6 heads: the 4-head slopes, then every other 8-head slope
    assert_close(alibi_slopes(6), torch.tensor([2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]))
    bias = alibi_bias(2, 3)
    assert bias.shape == (2, 3, 3)
    assert_close(bias[0], -0.0625 * torch.tensor([[0.0, 1, 2], [1, 0, 1], [2, 1, 0]]))


def test_tiny_transformer_positional_options():
    import pytest

    from attention_core.models.tiny_transformer import POSITIONAL, TinyTransformer

    x = torch.randint(1, 10, (2, 12))
    for positional in POSITIONAL:
        model = TinyTransformer(10, max_len=8, positional=positional, is_causal=True, num_outputs=1)
        if positional == "learned":
            with pytest.raises(ValueError, match="learned positions stop at max_len=8; got a sequence of 12"):
                model(x)
        else:
            logits, (weights,) = model(x)  # longer than max_len: fine without a position table
            assert logits.shape == (2, 12, 1, 10) and (weights.triu(1) == 0).all()
    with pytest.raises(ValueError, match="positional must be one of"):
        TinyTransformer(10, 8, positional="relative")


def test_rotate_pairs_by_complex_product_equals_the_pairwise_formula():
    """rotate_pairs turns pairs as complex numbers where it can (float32/64, pairs side by
    side): it equals the written-out rotation to rounding, in every layout it meets, and an
    odd offset or half precision takes the written-out path."""
    from attention_core.nn.positional import _as_complex_ok, rotary_cos_sin, rotate_pairs

    def by_hand(x, cos, sin):
        even, odd = x[..., 0::2].double(), x[..., 1::2].double()
        c, s = cos.double(), sin.double()
        return torch.stack((even * c - odd * s, even * s + odd * c), -1).flatten(-2)

    g = torch.Generator().manual_seed(0)
    base = torch.randn(2, 12, 3, 10, generator=g)  # (B, T, H, E + 2)
    layouts = {"contiguous": base[..., :8].contiguous().transpose(1, 2),
               "heads split": base[..., :8].transpose(1, 2),  # (B, H, T, E) view, as split_heads
               "odd offset": base[..., 1:9].transpose(1, 2)}
    cos, sin = rotary_cos_sin(torch.arange(5, 17), 8, 100.0)  # (T, E/2)
    for name, x in layouts.items():
        assert _as_complex_ok(x, cos) == (name != "odd offset"), name
        assert_close(rotate_pairs(x, cos, sin).double(), by_hand(x, cos, sin), atol=1e-6, rtol=1e-6)
    half = layouts["contiguous"].half()
    assert not _as_complex_ok(half, cos.half())
    assert_close(rotate_pairs(half, cos.half(), sin.half()).double(), by_hand(half, cos, sin), atol=2e-2,
                 rtol=1e-2)


def test_rotary_layout_reorders_each_head_and_its_two_directions_are_inverses():
    """rotary_layout moves the rows of each head between HuggingFace's pairing (i with
    i + E/2) and the book's (2i with 2i + 1): by hand on tiny heads, equal to the reshape
    llm_probes and TransformerBlock.from_llama each wrote before it, and each direction
    undoes the other on a weight (H * E, D) and on a bias (H * E,)."""
    rows = torch.arange(6.0)  # one head of width 6: rows 0 .. 5
    assert rotary_layout(rows, 1, "half_split").tolist() == [0, 2, 4, 1, 3, 5]  # evens, then odds
    assert rotary_layout(rows, 1, "interleaved").tolist() == [0, 3, 1, 4, 2, 5]  # i, then i + 3
    two_heads = torch.arange(8.0)  # two heads of width 4: each reordered on its own
    assert rotary_layout(two_heads, 2, "half_split").tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    assert rotary_layout(two_heads, 2, "interleaved").tolist() == [0, 2, 1, 3, 4, 6, 5, 7]

    g = torch.Generator().manual_seed(0)
    H, E, D = 3, 8, 5
    weight, bias = torch.randn(H * E, D, generator=g), torch.randn(H * E, generator=g)
    old_half_split = weight.reshape(H, E // 2, 2, D).transpose(1, 2).reshape(H * E, D)  # llm_probes'
    old_interleaved = weight.reshape(H, 2, E // 2, D).transpose(1, 2).reshape(H * E, D)  # from_llama's
    assert torch.equal(rotary_layout(weight, H, "half_split"), old_half_split)
    assert torch.equal(rotary_layout(weight, H, "interleaved"), old_interleaved)
    for x in (weight, bias, weight.double()):
        for there, back in (("interleaved", "half_split"), ("half_split", "interleaved")):
            moved = rotary_layout(x, H, there)
            assert moved.shape == x.shape and moved.dtype == x.dtype and not torch.equal(moved, x)
            assert torch.equal(rotary_layout(moved, H, back), x)


@pytest.mark.parametrize("call, error, match", [
    (lambda: rotary_layout(torch.randn(6, 4), 2, "half_split"), ValueError, "weight's 6 rows"),  # width 3
    (lambda: rotary_layout(torch.randn(0, 4), 1, "interleaved"), ValueError, "weight's 0 rows"),
    (lambda: rotary_layout(torch.randn(8, 4), 2, "pairs"), ValueError, "to must be 'interleaved'"),
    (lambda: rotary_layout(torch.randn(8, 4), 2, None), ValueError, "to must be"),
    (lambda: rotary_layout(torch.randn(8, 4), 0, "half_split"), ValueError, "num_heads"),
    (lambda: rotary_layout(torch.arange(8), 2, "half_split"), TypeError, "weight"),
])
def test_rotary_layout_refuses_bad_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call()
