"""Why attention divides by sqrt(d_k): measurements on random queries and keys.

If the entries of q and k are independent with mean 0 and variance 1, then
q . k = sum_i q_i k_i is a sum of d_k terms of variance 1, so Var(q . k) = d_k.
Dividing by sqrt(d_k) brings the variance back to 1 whatever the dimension
(Vaswani et al., 2017, footnote 4).

Shape legend: N samples (rows), S keys, d_k query/key dim (E elsewhere in the book).
"""

from __future__ import annotations

import math

import torch

from ._checks import check_positive_int
from .functional import softmax
from .metrics import attention_entropy


def random_scores(d_k: int, num_rows: int, num_keys: int, scaled: bool, seed: int = 0) -> torch.Tensor:
    """Scores ``q . k`` (divided by sqrt(d_k) if ``scaled``) of unit-variance random
    vectors: ``(num_rows, num_keys)``, float64."""
    for name, value in (("d_k", d_k), ("num_rows", num_rows), ("num_keys", num_keys)):
        check_positive_int(name, value)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(num_rows, 1, d_k, generator=g, dtype=torch.float64)  # (N, 1, d_k)
    k = torch.randn(num_rows, num_keys, d_k, generator=g, dtype=torch.float64)  # (N, S, d_k)
    scores = (q @ k.transpose(-2, -1)).squeeze(-2)  # (N, 1, d_k) @ (N, d_k, S) -> (N, S)
    return scores / math.sqrt(d_k) if scaled else scores


def score_variance(d_k: int, scaled: bool = False, num_samples: int = 20000, seed: int = 0) -> float:
    """Sample variance of ``q . k`` (theory: ``d_k`` unscaled, ``1`` scaled)."""
    return random_scores(d_k, num_samples, 1, scaled, seed).var().item()


def softmax_saturation(d_k: int, scaled: bool, num_keys: int = 16, num_rows: int = 2000,
                       seed: int = 0) -> dict[str, float]:
    """How peaked the softmax of random scores gets: mean largest weight and mean
    entropy (nats) over ``num_rows`` rows of ``num_keys`` keys."""
    weights = softmax(random_scores(d_k, num_rows, num_keys, scaled, seed))  # (N, S)
    return {"max_weight": weights.amax(-1).mean().item(),
            "entropy": attention_entropy(weights).mean().item()}


def softmax_gradient(d_k: int, scaled: bool, num_keys: int = 16, num_rows: int = 2000,
                     seed: int = 0) -> float:
    """Mean absolute gradient that reaches the scores through the softmax, by autograd.

    The loss is a fixed random linear read-out of the weights, so the gradient is
    ``J^T u`` with ``J`` the softmax Jacobian. When the softmax saturates, J -> 0 and
    learning through attention stalls.
    """
    scores = random_scores(d_k, num_rows, num_keys, scaled, seed).requires_grad_()
    upstream = torch.randn(num_rows, num_keys, generator=torch.Generator().manual_seed(seed + 1),
                           dtype=torch.float64)
    (softmax(scores) * upstream).sum().backward()
    return scores.grad.abs().mean().item()
