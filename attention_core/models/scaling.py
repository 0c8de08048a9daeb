"""Chapter 2: why attention divides by sqrt(d_k): measurements on random queries and keys.

If the entries of q and k are independent with mean 0 and variance 1, then
q . k = sum_i q_i k_i is a sum of d_k terms of variance 1, so Var(q . k) = d_k.
Dividing by sqrt(d_k) brings the variance back to 1 whatever the dimension
(Vaswani et al., 2017, footnote 4).

Scaling matters for learning because of what a saturated softmax does to the gradient.
``softmax_gradient`` measures it at the softmax input (the scores); ``query_gradient_norms``
follows it one step further, to the queries (and so to ``W_q``), where the
``1/sqrt(d_k)`` factor itself shrinks it again: the mean over rows hides the effect, the
distribution over rows shows it.

Shape legend: ``num_rows`` samples (rows), S keys, d_k query/key dim (E elsewhere in the book).
"""

from __future__ import annotations

import math

import torch

from ..nn._checks import check_bool, check_positive_int
from ..nn.functional import softmax
from ..nn.metrics import attention_entropy

__all__ = [
    "random_queries_keys", "random_scores", "score_variance", "softmax_saturation", "softmax_gradient",
    "query_gradient_norms",
]


def random_queries_keys(d_k: int, num_rows: int, num_keys: int, seed: int = 0
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """One unit-variance random query per row, ``(num_rows, 1, d_k)``, and ``num_keys`` keys per
    row, ``(num_rows, S, d_k)``, float64."""
    for name, value in (("d_k", d_k), ("num_rows", num_rows), ("num_keys", num_keys)):
        check_positive_int(name, value)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(num_rows, 1, d_k, generator=g, dtype=torch.float64)  # (num_rows, 1, d_k)
    k = torch.randn(num_rows, num_keys, d_k, generator=g, dtype=torch.float64)  # (num_rows, S, d_k)
    return q, k


def _scores(q: torch.Tensor, k: torch.Tensor, scaled: bool) -> torch.Tensor:
    check_bool("scaled", scaled)
    scores = (q @ k.transpose(-2, -1)).squeeze(-2)  # (num_rows, 1, d_k) @ (num_rows, d_k, S) -> (num_rows, S)
    return scores / math.sqrt(q.size(-1)) if scaled else scores


def random_scores(d_k: int, num_rows: int, num_keys: int, scaled: bool, seed: int = 0) -> torch.Tensor:
    """Scores ``q . k`` (divided by sqrt(d_k) if ``scaled``) of unit-variance random
    vectors: ``(num_rows, num_keys)``, float64."""
    return _scores(*random_queries_keys(d_k, num_rows, num_keys, seed), scaled)


def score_variance(d_k: int, scaled: bool = False, num_samples: int = 20000, seed: int = 0) -> float:
    """Sample variance of ``q . k`` (theory: ``d_k`` unscaled, ``1`` scaled), over
    ``num_samples >= 2`` pairs (one sample has no variance: NaN)."""
    check_positive_int("num_samples", num_samples, minimum=2)
    return random_scores(d_k, num_samples, 1, scaled, seed).var().item()


def softmax_saturation(d_k: int, scaled: bool, num_keys: int = 16, num_rows: int = 2000,
                       seed: int = 0, threshold: float = 0.99) -> dict[str, float]:
    """How peaked the softmax of random scores gets, over ``num_rows`` rows of
    ``num_keys`` keys: mean largest weight, mean entropy (nats), and the fraction of
    ``saturated`` rows, whose largest weight exceeds ``threshold`` (a number in (0, 1))."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold < 1:
        raise ValueError(f"threshold must be a number in (0, 1) (a softmax weight), got {threshold!r}")
    weights = softmax(random_scores(d_k, num_rows, num_keys, scaled, seed))  # (num_rows, S)
    largest = weights.amax(-1)  # (num_rows,)
    return {"max_weight": largest.mean().item(),
            "entropy": attention_entropy(weights).mean().item(),
            "saturated": (largest > threshold).double().mean().item()}


def softmax_gradient(d_k: int, scaled: bool, num_keys: int = 16, num_rows: int = 2000,
                     seed: int = 0) -> float:
    """Mean absolute gradient that reaches the softmax input (the scores), by autograd.

    The loss is a fixed random linear read-out of the weights, so the gradient is
    ``J^T u`` with ``J`` the softmax Jacobian; in a saturated row J -> 0. This is the
    gradient *before* the ``1/sqrt(d_k)`` factor and the keys carry it back to the
    queries: see ``query_gradient_norms`` for what reaches them.
    """
    check_bool("scaled", scaled)
    scores = random_scores(d_k, num_rows, num_keys, scaled, seed).requires_grad_()
    upstream = torch.randn(num_rows, num_keys, generator=torch.Generator().manual_seed(seed + 1),
                           dtype=torch.float64)
    (softmax(scores) * upstream).sum().backward()
    return scores.grad.abs().mean().item()


def query_gradient_norms(d_k: int, scaled: bool, num_keys: int = 16, num_rows: int = 2000,
                         seed: int = 0) -> torch.Tensor:
    """Norm of the gradient that reaches each row's query, by autograd: ``(num_rows,)``.

    Same rows and the same random read-out loss as ``softmax_gradient``, but followed
    through the scores to ``q``: ``dL/dq = c * sum_j (dL/ds_j) k_j`` with ``c = 1/sqrt(d_k)``
    when ``scaled`` (else 1). Unscaled, most rows saturate and get almost nothing, while
    the few rows whose top two scores nearly tie get large gradients, so the mean over
    rows can exceed the scaled one although the typical (median) row starves.
    """
    check_bool("scaled", scaled)
    q, k = random_queries_keys(d_k, num_rows, num_keys, seed)
    q.requires_grad_()
    upstream = torch.randn(num_rows, num_keys, generator=torch.Generator().manual_seed(seed + 1),
                           dtype=torch.float64)
    (softmax(_scores(q, k, scaled)) * upstream).sum().backward()
    return q.grad.squeeze(-2).norm(dim=-1)  # (num_rows, 1, d_k) -> (num_rows,)
