"""Chapter 2's measurements against theory, and the tiny transformer actually learning."""


import pytest
import torch

from attention_core.models.scaling import score_variance, softmax_gradient, softmax_saturation
from attention_core.models.toy_tasks import (
    head_roles,
    reverse_and_shift_accuracy,
    reverse_and_shift_batch,
    tokenize,
    train_reverse_and_shift,
    word_embeddings,
)


@pytest.mark.parametrize("d_k", [1, 16, 256, 1024])
def test_score_variance_matches_theory(d_k):
    """Var(q.k) = d_k for unit-variance entries; 1 after dividing by sqrt(d_k).
    With 20000 samples the relative standard error of a variance is about 1-2 %,
    so 6 % is a generous bound."""
    assert abs(score_variance(d_k) / d_k - 1) < 0.06
    assert abs(score_variance(d_k, scaled=True) - 1) < 0.06


def test_unscaled_softmax_saturates_and_its_gradient_vanishes():
    small, large = softmax_saturation(1, scaled=False), softmax_saturation(1024, scaled=False)
    assert large["max_weight"] > 0.9 and large["entropy"] < 0.3 < small["entropy"]
    scaled = [softmax_saturation(d, scaled=True)["entropy"] for d in (1, 64, 1024)]
    assert max(scaled) - min(scaled) < 0.1, "scaling keeps the entropy independent of d_k"
    assert softmax_gradient(1024, scaled=False) < 0.1 * softmax_gradient(1024, scaled=True)


def test_reverse_and_shift_targets():
    x, y = reverse_and_shift_batch(3, 5, 10, torch.Generator().manual_seed(0))
    assert torch.equal(y[..., 0], x.flip(-1))
    assert torch.equal(y[:, 1:, 1], x[:, :-1]) and (y[:, 0, 1] == 0).all()


def test_tiny_transformer_learns_and_heads_specialise():
    """A short run (the chapter trains longer): loss falls far, accuracy is far above
    chance (1/11), and with two heads one reverses while the other looks back."""
    model, losses = train_reverse_and_shift(num_heads=2, steps=250, progress=False)
    assert losses[-1] < 0.1 * losses[0]
    accuracy = reverse_and_shift_accuracy(model, 8, 12)
    assert accuracy["reverse"] > 0.95 and accuracy["previous"] > 0.95
    x, _ = reverse_and_shift_batch(64, 8, 12, torch.Generator().manual_seed(5))
    roles = head_roles(model(x)[1][0])
    assert sorted(max(r, key=r.get) for r in roles) == ["previous", "reverse"]
    assert all(max(r.values()) > 0.8 for r in roles)


def test_training_is_deterministic():
    a = train_reverse_and_shift(num_heads=1, steps=5, progress=False)[1]
    b = train_reverse_and_shift(num_heads=1, steps=5, progress=False)[1]
    assert a == b


def test_word_embeddings_are_repeatable_and_reflect_meaning():
    tokens = tokenize("The cat, the dog and the mat.")
    x = word_embeddings(tokens)
    assert torch.equal(x[0], x[2]) and torch.equal(x, word_embeddings(tokens))
    cos = torch.nn.functional.cosine_similarity
    cat, dog, mat = x[1], x[3], x[6]
    assert cos(cat, dog, dim=0) > cos(cat, mat, dim=0)
    with pytest.raises(ValueError, match="at least one word"):
        tokenize(" , . ")
