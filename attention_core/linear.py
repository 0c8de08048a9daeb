"""Linear (kernel) attention: replace exp(q . k) by a dot product of features,
phi(q) . phi(k), and reorder the products so no L x S matrix is ever formed.

    softmax attention:  out_i = sum_j exp(q_i . k_j) v_j / sum_j exp(q_i . k_j)
    kernel attention:   out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / phi(q_i)^T (sum_j phi(k_j))

The sums over j are computed once (``phi(K)^T V`` is M x Ev), so the cost is
O(L * M * Ev) instead of O(L * S * E): linear in the sequence length. With a causal
mask the sums become prefix sums, a recurrent state updated token by token
(Katharopoulos et al. 2020, "Transformers are RNNs"). Performer's FAVOR+ (Choromanski
et al. 2020) picks random features whose dot product estimates exp(q . k / sqrt(E))
without bias, so it approximates softmax attention itself.

Shape legend: ``...`` batch dims, L queries, S keys, E query/key dim, Ev value dim,
M number of features.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F

from ._checks import check_positive_int
from .functional import _check_qkv

FeatureMap = Callable[[torch.Tensor], torch.Tensor]


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """``elu(x) + 1`` (Katharopoulos et al. 2020): positive, so every weight is positive."""
    return F.elu(x) + 1


FEATURE_MAPS: dict[str, FeatureMap] = {"elu": elu_feature_map, "relu": F.relu}
"""Named feature maps; ``linear_attention`` also takes any callable ``(..., E) -> (..., M)``."""


def _resolve(feature_map) -> FeatureMap:
    if callable(feature_map):
        return feature_map
    if feature_map in FEATURE_MAPS:
        return FEATURE_MAPS[feature_map]
    raise ValueError(f"feature_map must be a callable or one of {sorted(FEATURE_MAPS)}, "
                     f"got {feature_map!r}")


def kernel_attention_weights(query: torch.Tensor, key: torch.Tensor, feature_map="elu",
                             causal: bool = False, eps: float = 1e-6) -> torch.Tensor:
    """The ``(..., L, S)`` weights that kernel attention implies, formed explicitly:
    ``A = phi(Q) phi(K)^T``, masked if ``causal``, each row divided by its sum.

    Quadratic in length: this is the *definition* (and the reference in the tests),
    not the way to compute; :func:`linear_attention` gives ``A @ V`` without A.
    """
    phi = _resolve(feature_map)
    scores = phi(query) @ phi(key).transpose(-2, -1)  # (..., L, S)
    if causal:
        L, S = scores.shape[-2:]
        scores = scores.tril(S - L)  # queries aligned to the end of the keys
    return scores / scores.sum(-1, keepdim=True).clamp_min(eps)


def linear_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     feature_map="elu", causal: bool = False, chunk_size: int = 64,
                     eps: float = 1e-6) -> torch.Tensor:
    """Kernel attention in time and memory linear in the sequence length.

    Args:
        query: ``(..., L, E)``; key: ``(..., S, E)``; value: ``(..., S, Ev)``.
        feature_map: a name in :data:`FEATURE_MAPS` (default ``"elu"``: elu + 1) or a
            callable ``(..., E) -> (..., M)`` with non-negative outputs, such as
            :func:`performer_feature_map`.
        causal: query ``i`` sees keys ``j <= i`` (needs ``L == S``). Computed as prefix
            sums over chunks of ``chunk_size`` tokens: within a chunk the small
            quadratic form, across chunks a running state ``S = sum phi(k) v^T``
            ``(..., M, Ev)`` and ``z = sum phi(k)`` ``(..., M)``. ``chunk_size=1`` is the
            recurrent form, one token at a time.
        eps: floor of the normaliser.

    Returns:
        ``(..., L, Ev)``, equal to ``kernel_attention_weights(...) @ value``.
    """
    _check_qkv(query, key, value)
    check_positive_int("chunk_size", chunk_size)
    phi = _resolve(feature_map)
    q, k = phi(query), phi(key)  # (..., L, M), (..., S, M)
    if not causal:
        kv = k.transpose(-2, -1) @ value  # (..., M, Ev): the only sum over keys
        z = k.sum(-2).unsqueeze(-1)  # (..., M, 1)
        return (q @ kv) / (q @ z).clamp_min(eps)
    L = q.size(-2)
    if k.size(-2) != L:
        raise ValueError(f"causal linear_attention needs as many keys as queries, got "
                         f"query {tuple(query.shape)} and key {tuple(key.shape)}")
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    state = q.new_zeros(batch + (q.size(-1), value.size(-1)))  # (..., M, Ev)
    z = q.new_zeros(batch + (q.size(-1), 1))  # (..., M, 1)
    outputs = []
    for c0 in range(0, L, chunk_size):
        qc, kc, vc = (x[..., c0:c0 + chunk_size, :] for x in (q, k, value))
        a = (qc @ kc.transpose(-2, -1)).tril()  # (..., c, c): j <= i inside the chunk
        numerator = a @ vc + qc @ state  # this chunk + every earlier chunk
        denominator = a.sum(-1, keepdim=True) + qc @ z
        outputs.append(numerator / denominator.clamp_min(eps))
        state = state + kc.transpose(-2, -1) @ vc  # prefix sums carried forward
        z = z + kc.sum(-2).unsqueeze(-1)
    return torch.cat(outputs, dim=-2)


def random_features(num_features: int, dim: int, orthogonal: bool = True, seed: int = 0,
                    dtype=torch.float32) -> torch.Tensor:
    """Projection ``W (M, E)`` with rows ``w ~ N(0, I_E)``.

    ``orthogonal=True`` makes the rows within each block of ``E`` exactly orthogonal
    (QR of a Gaussian matrix) and gives each row the length of a Gaussian vector (a
    chi distribution), so each row is still marginally ``N(0, I)``: the estimator
    stays unbiased and its variance drops (Choromanski et al. 2020).
    """
    check_positive_int("num_features", num_features)
    check_positive_int("dim", dim)
    check_positive_int("seed", seed, minimum=0)
    g = torch.Generator().manual_seed(seed)
    gaussian = torch.randn(num_features, dim, generator=g, dtype=torch.float64)
    if not orthogonal:
        return gaussian.to(dtype)
    blocks = []
    for start in range(0, num_features, dim):
        q, r = torch.linalg.qr(torch.randn(dim, dim, generator=g, dtype=torch.float64))
        q = q * torch.sign(torch.diagonal(r))  # fix QR's signs: a uniformly random rotation
        blocks.append(q.T[: num_features - start])  # orthonormal rows
    lengths = gaussian.norm(dim=-1, keepdim=True)  # chi(E)-distributed row lengths
    return (torch.cat(blocks) * lengths).to(dtype)


def performer_feature_map(num_features: int, dim: int, orthogonal: bool = True,
                          seed: int = 0) -> FeatureMap:
    """FAVOR+ positive random features: ``phi(x) = exp(W x' - |x'|^2 / 2) / sqrt(M)``
    with ``x' = x / E^(1/4)``, so that ``E[phi(q) . phi(k)] = exp(q . k / sqrt(E))``,
    the (scaled) softmax kernel.

    Every feature is positive, so weights are never negative and the normaliser never
    vanishes (the trigonometric features of earlier work can be negative). For
    numerical safety each call subtracts one constant from all exponents of its input
    tensor, which cancels in the attention's normalisation.
    """
    projection = random_features(num_features, dim, orthogonal, seed)  # (M, E)

    def phi(x: torch.Tensor) -> torch.Tensor:
        if x.size(-1) != dim:
            raise ValueError(f"performer features were drawn for dim={dim}, got input of "
                             f"shape {tuple(x.shape)}")
        x = x / dim ** 0.25
        exponent = x @ projection.to(x.dtype).T - (x * x).sum(-1, keepdim=True) / 2  # (..., M)
        return torch.exp(exponent - exponent.max().detach()) / math.sqrt(num_features)

    return phi


def sequence_projection(k: int, N: int, seed: int = 0, dtype=torch.float32) -> torch.Tensor:
    """A random ``(k, N)`` projection along the sequence axis with entries
    ``N(0, 1/k)``, the Johnson-Lindenstrauss choice behind Linformer's analysis (the
    model itself learns its projections)."""
    check_positive_int("k", k)
    check_positive_int("N", N)
    check_positive_int("seed", seed, minimum=0)
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(k, N, generator=g, dtype=torch.float64) / math.sqrt(k)).to(dtype)


def linformer_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        E: torch.Tensor, F: torch.Tensor | None = None,
                        scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Linformer (Wang et al. 2020): project keys and values along the sequence,
    ``K' = E K`` and ``V' = F V`` with ``E, F (k, N)``, then ordinary softmax attention
    over the ``k`` projected positions: ``softmax(Q K'^T / sqrt(E_dim)) V'``.

    Cost O(N k d) instead of O(N^2 d). With ``k = N`` and ``E = F = I`` it is exactly
    dense attention. ``F`` defaults to ``E`` (Linformer's shared projection).

    Returns ``(output (..., L, Ev), weights (..., L, k))``: the weights are over the k
    projected "positions", each a mixture of the real ones.
    """
    from .functional import scaled_dot_product_attention

    _check_qkv(query, key, value)
    F = E if F is None else F
    N = key.size(-2)
    for name, P in (("E", E), ("F", F)):
        if not isinstance(P, torch.Tensor) or P.dim() != 2 or P.size(1) != N:
            got = tuple(P.shape) if isinstance(P, torch.Tensor) else type(P).__name__
            raise ValueError(f"{name} must be a (k, N={N}) projection, got {got}")
    if E.size(0) != F.size(0):
        raise ValueError(f"E and F must project to the same k, got {E.size(0)} and {F.size(0)}")
    projected_key = E.to(key.dtype) @ key  # (..., k, E_dim)
    projected_value = F.to(value.dtype) @ value  # (..., k, Ev)
    return scaled_dot_product_attention(query, projected_key, projected_value, scale=scale)


def pooling_projection(k: int, N: int, dtype=torch.float32) -> torch.Tensor:
    """A ``(k, N)`` projection that averages ``k`` consecutive segments of the sequence
    (segment lengths differ by at most one). ``k = N`` is the identity; a simple,
    deterministic stand-in for Linformer's learned ``E`` and ``F``."""
    check_positive_int("k", k)
    check_positive_int("N", N, minimum=k)
    starts = torch.arange(1, k) * N // k  # first position of segments 1 .. k-1
    segment = torch.searchsorted(starts, torch.arange(N), right=True)  # (N,) segment of each position
    P = torch.nn.functional.one_hot(segment, k).T.to(dtype)  # (k, N)
    return P / P.sum(-1, keepdim=True)
