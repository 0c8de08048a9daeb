"""Chapter 1 (and 3, 4, 8, 13): summaries of attention weights.

Shape legend: ``...`` batch dims, L queries, S keys.
"""

from __future__ import annotations

import torch

from ._checks import check_tensor
from .functional import upcast

__all__ = ["attention_entropy"]


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Shannon entropy of each row of ``weights (..., L, S)`` in nats: ``(..., L)``,
    the book's calligraphic H_i = -sum_j alpha_ij ln alpha_ij.

    ``0`` means all weight on one key; ``ln S`` means spread evenly over all S keys.
    Zero weights contribute nothing (0 ln 0 = 0), so a fully masked row has entropy 0,
    and the gradient there is 0 rather than NaN (the log is taken of 1 in their place).
    float16/bfloat16 weights are summed in float32 and the entropy returned in their dtype.
    Weights must be non-negative (probabilities; NaN passes: NaN in, NaN out) with at least one
    key per row.
    """
    check_tensor("weights", weights)
    if weights.size(-1) == 0:
        raise ValueError(f"weights must have at least one key per row, got shape {tuple(weights.shape)}")
    if weights.device.type != "meta" and bool((weights < 0).any()):
        raise ValueError(f"weights must be non-negative (attention probabilities), got a minimum of "
                         f"{weights.min().item():g}")
    w = upcast(weights)
    safe = torch.where(w == 0, 1.0, w)  # ln 1 = 0: no 0 / 0 in the backward pass
    return -torch.special.xlogy(w, safe).sum(-1).to(weights.dtype)
