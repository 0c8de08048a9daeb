"""Chapter 2's gradient claims: what reaches the queries, row by row, with and without
the 1/sqrt(d_k) scale (attention_core.models.scaling.query_gradient_norms)."""

import math

import torch

from attention_core.models.scaling import (
    query_gradient_norms,
    random_queries_keys,
    random_scores,
    softmax_gradient,
    softmax_saturation,
)
from attention_core.nn.functional import softmax


def test_query_gradient_matches_the_chain_rule_by_hand():
    """dL/dq = c * sum_j J^T u_j k_j, with J the softmax Jacobian: an independent reference."""
    for scaled in (False, True):
        q, k = random_queries_keys(8, 5, 4, seed=3)
        c = 1 / math.sqrt(8) if scaled else 1.0
        w = softmax((q @ k.transpose(-2, -1)).squeeze(-2) * c)                      # (N, S)
        u = torch.randn(5, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
        jacobian = torch.diag_embed(w) - w.unsqueeze(-1) * w.unsqueeze(-2)          # (N, S, S)
        grad_scores = (jacobian.transpose(-2, -1) @ u.unsqueeze(-1)).squeeze(-1)   # (N, S)
        expected = (c * (grad_scores.unsqueeze(-1) * k).sum(-2)).norm(dim=-1)      # (N,)
        torch.testing.assert_close(query_gradient_norms(8, scaled, num_keys=4, num_rows=5, seed=3), expected)


def test_random_scores_unchanged_by_the_refactor():
    q, k = random_queries_keys(4, 3, 2, seed=0)
    torch.testing.assert_close(random_scores(4, 3, 2, scaled=True), (q @ k.transpose(-2, -1)).squeeze(-2) / 2)


def test_unscaled_typical_row_starves_while_the_mean_does_not():
    """The chapter's claims at d_k = 1024: the median row's query gradient collapses
    without scaling, most rows saturate, yet the mean over rows is larger unscaled."""
    raw, scaled = query_gradient_norms(1024, False), query_gradient_norms(1024, True)
    assert raw.median() < 1e-2 * scaled.median()
    assert raw.mean() > scaled.mean()
    assert softmax_saturation(1024, scaled=False)["saturated"] > 0.5
    assert softmax_saturation(1024, scaled=True)["saturated"] == 0.0
    assert softmax_gradient(1024, scaled=False) < 0.1 * softmax_gradient(1024, scaled=True)


def test_scaled_query_gradient_does_not_depend_on_d_k():
    medians = [query_gradient_norms(d, True).median().item() for d in (4, 64, 1024)]
    assert max(medians) < 1.5 * min(medians), medians
