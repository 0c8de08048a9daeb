import pytest
import torch

from attention_core import causal_mask, padding_mask, sliding_window_mask


def test_causal_mask_square_is_lower_triangle():
    assert torch.equal(causal_mask(4), torch.ones(4, 4, dtype=torch.bool).tril())


def test_causal_mask_with_cache_aligns_to_end():
    m = causal_mask(2, 5)
    assert m.tolist() == [[True, True, True, True, False], [True] * 5]


def test_padding_mask():
    m = padding_mask([3, 1], 4)
    assert m.shape == (2, 1, 4)
    assert m[:, 0].tolist() == [[True, True, True, False], [True, False, False, False]]


@pytest.mark.parametrize("causal", [False, True])
def test_sliding_window_by_definition(causal):
    L, w = 7, 3
    m = sliding_window_mask(L, w, causal=causal)
    for i in range(L):
        for j in range(L):
            expected = (0 <= i - j < w) if causal else abs(i - j) < w
            assert m[i, j].item() == expected


def test_window_one_is_diagonal_and_large_window_is_full():
    assert torch.equal(sliding_window_mask(5, 1), torch.eye(5, dtype=torch.bool))
    assert sliding_window_mask(5, 5).all()
    assert torch.equal(sliding_window_mask(5, 5, causal=True), causal_mask(5))


def test_masks_combine_with_and():
    m = causal_mask(4) & padding_mask([2], 4)  # (1, 4, 4)
    assert m.shape == (1, 4, 4) and not m[0, :, 2:].any() and m[0, 3, :2].all()
