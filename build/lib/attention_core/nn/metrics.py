"""Chapter 1 (and 3, 4, 8, 13): summaries of attention weights.

Shape legend: ``...`` batch dims, L queries, S keys.
"""

from __future__ import annotations

import torch

from ._checks import check_tensor


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Shannon entropy of each row of ``weights (..., L, S)`` in nats: ``(..., L)``,
    the book's calligraphic H_i = -sum_j alpha_ij ln alpha_ij.

    ``0`` means all weight on one key; ``ln S`` means spread evenly over all S keys.
    Zero weights contribute nothing (0 ln 0 = 0), so a fully masked row has entropy 0.
    """
    check_tensor("weights", weights)
    return -torch.special.xlogy(weights, weights).sum(-1)
