"""Chapter 8 (and 12): linear (kernel) attention; replace exp(q . k) by a dot product of
features, phi(q) . phi(k), and reorder the products so no L x S matrix is ever formed.

    softmax attention:  out_i = sum_j exp(q_i . k_j) v_j / sum_j exp(q_i . k_j)
    kernel attention:   out_i = phi(q_i) (sum_j phi(k_j)^T v_j) / (phi(q_i) (sum_j phi(k_j))^T)

(row vectors, as in the book: ``phi(k_j)^T v_j`` is F x Ev, ``phi(q_i)`` a row of F numbers)

The sums over j are computed once (``phi(K)^T V`` is F x Ev), so the cost is
O(L * F * Ev) instead of O(L * S * E): linear in the sequence length. With a causal
mask the sums become prefix sums, a recurrent state updated token by token
(Katharopoulos et al. 2020, "Transformers are RNNs"). Performer's FAVOR+ (Choromanski
et al. 2020) picks random features whose dot product estimates exp(q . k / sqrt(E))
without bias, so it approximates softmax attention itself.

Shape legend: ``...`` batch dims (e.g. B, H), L query length, S key length, T length of
one sequence (causal: L = S = T), E query/key dim per head (d_k), Ev value dim per head
(d_v), F number of features (phi maps E numbers to F), ``proj_len`` Linformer's
projected length (the book's r, the paper's k).

float16 and bfloat16 inputs are computed in float32, features, states and normalisers
included (a normaliser sums S positive numbers and passes float16's 65504 from a few
thousand keys on), and returned in their dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ._checks import (
    check_device,
    check_eps,
    check_is_causal,
    check_positive_int,
    check_qkv,
    check_scale,
    check_tensor,
    check_tensor_size,
)
from .functional import eager_attention, upcast

__all__ = ["FEATURE_MAPS", "elu_feature_map", "kernel_attention_weights", "linear_attention",
           "linformer_attention", "performer_feature_map", "pooling_projection", "random_features",
           "sequence_projection"]

FeatureMap = Callable[[torch.Tensor], torch.Tensor]


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """``elu(x) + 1`` (Katharopoulos et al. 2020): positive, so every weight is positive."""
    check_tensor("x", x)
    return F.elu(x) + 1


FEATURE_MAPS: dict[str, FeatureMap] = {"elu": elu_feature_map, "relu": F.relu}
"""Named feature maps; ``linear_attention`` also takes any callable ``(..., E) -> (..., F)``."""


def _resolve(feature_map) -> FeatureMap:
    if callable(feature_map):
        return feature_map
    if feature_map in FEATURE_MAPS:
        return FEATURE_MAPS[feature_map]
    raise ValueError(f"feature_map must be a callable or one of {sorted(FEATURE_MAPS)}, "
                     f"got {feature_map!r}")


def kernel_attention_weights(query: torch.Tensor, key: torch.Tensor, feature_map="elu",
                             is_causal: bool = False, eps: float = 1e-6) -> torch.Tensor:
    """The ``(..., L, S)`` weights that kernel attention implies, formed explicitly:
    ``A = phi(Q) phi(K)^T``, masked if ``is_causal``, each row divided by its sum.

    Quadratic in length: this is the *definition* (and the reference in the tests),
    not the way to compute; :func:`linear_attention` gives ``A @ V`` without A.
    """
    check_qkv(query, key, key)  # the keys stand in for values: shapes, dtype, device
    check_is_causal(is_causal)
    check_eps("eps", eps)
    phi = _resolve(feature_map)
    scores = phi(upcast(query)) @ phi(upcast(key)).transpose(-2, -1)  # (..., L, S)
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.tril(S - L)  # queries aligned to the end of the keys
    return (scores / scores.sum(-1, keepdim=True).clamp_min(eps)).to(query.dtype)


def linear_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     feature_map="elu", is_causal: bool = False, chunk_size: int = 64,
                     eps: float = 1e-6) -> tuple[torch.Tensor, None]:
    """Kernel attention in time and memory linear in the sequence length.

    Args:
        query: ``(..., L, E)``; key: ``(..., S, E)``; value: ``(..., S, Ev)``.
        feature_map: a name in :data:`FEATURE_MAPS` (default ``"elu"``: elu + 1) or a
            callable ``(..., E) -> (..., F)`` with non-negative outputs, such as
            :func:`performer_feature_map`.
        is_causal: query ``i`` sees keys ``j <= i`` (needs ``L == S``). Computed as prefix
            sums over chunks of ``chunk_size`` tokens: within a chunk the small
            quadratic form, across chunks a running state ``sum phi(k)^T v``
            ``(..., F, Ev)`` and normaliser ``sum phi(k)`` ``(..., F)``. ``chunk_size=1`` is the
            recurrent form, one token at a time.
        eps: floor of the normaliser, a finite number > 0.

    Returns:
        ``(output (..., L, Ev), None)``: output equal to
        ``kernel_attention_weights(...) @ value``; no weights, never forming them is the
        point. float16 and bfloat16 are computed in float32 and returned in their dtype.
    """
    check_qkv(query, key, value)
    check_is_causal(is_causal)
    check_positive_int("chunk_size", chunk_size)
    check_eps("eps", eps)
    phi = _resolve(feature_map)
    if is_causal and key.size(-2) != query.size(-2):
        raise ValueError(f"causal linear_attention needs as many keys as queries, got "
                         f"query {tuple(query.shape)} and key {tuple(key.shape)}")
    q, k, v = phi(upcast(query)), phi(upcast(key)), upcast(value)  # (..., L, F), (..., S, F), (..., S, Ev)
    if not is_causal:
        kv = k.transpose(-2, -1) @ v  # (..., F, Ev): the only sum over keys
        z = k.sum(-2).unsqueeze(-1)  # (..., F, 1)
        return ((q @ kv) / (q @ z).clamp_min(eps)).to(query.dtype), None  # (..., L, Ev)
    return _causal_linear(q, k, v, chunk_size, eps).to(query.dtype), None


def _causal_linear(q, k, value, chunk_size, eps):
    """Causal kernel attention of features ``q (..., T, F)``, ``k (..., T, F)`` and
    ``value (..., T, Ev)`` as prefix sums over chunks: ``(..., T, Ev)``."""
    T = q.size(-2)
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    state = q.new_zeros((*batch, q.size(-1), value.size(-1)))  # (..., F, Ev)
    z = q.new_zeros((*batch, q.size(-1), 1))  # (..., F, 1)
    outputs = []
    for c0 in range(0, T, chunk_size):
        qc, kc, vc = (x[..., c0:c0 + chunk_size, :] for x in (q, k, value))
        a = (qc @ kc.transpose(-2, -1)).tril()  # (..., c, c): j <= i inside the chunk
        numerator = a @ vc + qc @ state  # this chunk + every earlier chunk
        denominator = a.sum(-1, keepdim=True) + qc @ z
        outputs.append(numerator / denominator.clamp_min(eps))
        state = state + kc.transpose(-2, -1) @ vc  # prefix sums carried forward
        z = z + kc.sum(-2).unsqueeze(-1)
    return torch.cat(outputs, dim=-2)  # (..., T, Ev)


def random_features(num_features: int, dim: int, orthogonal: bool = True, seed: int = 0,
                    dtype=torch.float32, device=None) -> torch.Tensor:
    """Projection ``W (F, E)`` with rows ``w ~ N(0, I_E)``.

    ``orthogonal=True`` makes the rows within each block of ``E`` exactly orthogonal
    (QR of a Gaussian matrix) and gives each row the length of a Gaussian vector (a
    chi distribution), so each row is still marginally ``N(0, I)``: the estimator
    stays unbiased and its variance drops (Choromanski et al. 2021).

    Drawn in float64 on the CPU with a generator seeded by ``seed`` (so the same seed
    gives the same features on every device), then returned as ``dtype`` on
    ``device`` (default: float32 on the CPU).
    """
    check_positive_int("num_features", num_features)
    check_positive_int("dim", dim)
    check_tensor_size("num_features", (num_features, dim), torch.float64)  # drawn in float64
    check_positive_int("seed", seed, minimum=0)
    g = torch.Generator().manual_seed(seed)
    gaussian = torch.randn(num_features, dim, generator=g, dtype=torch.float64)
    if not orthogonal:
        return gaussian.to(device=device, dtype=dtype)
    blocks = []
    for start in range(0, num_features, dim):
        q, r = torch.linalg.qr(torch.randn(dim, dim, generator=g, dtype=torch.float64))
        q = q * torch.sign(torch.diagonal(r))  # fix QR's signs: a uniformly random rotation
        blocks.append(q.T[: num_features - start])  # orthonormal rows
    lengths = gaussian.norm(dim=-1, keepdim=True)  # chi(E)-distributed row lengths
    return (torch.cat(blocks) * lengths).to(device=device, dtype=dtype)


def performer_feature_map(num_features: int, dim: int, orthogonal: bool = True,
                          seed: int = 0, device=None) -> FeatureMap:
    """FAVOR+ positive random features: ``phi(x) = exp(x' W^T - |x'|^2 / 2) / sqrt(F)``
    with ``x' = x / E^(1/4)``, so that the expectation of ``phi(q) . phi(k)`` is
    ``exp(q . k / sqrt(E))``, the (scaled) softmax kernel.

    Every feature is positive, so weights are never negative and the normaliser never
    vanishes (the trigonometric features of earlier work can be negative). For
    numerical safety each call subtracts one constant from all exponents of its input
    tensor, which cancels in the attention's normalisation.

    The features are drawn on the CPU (see :func:`random_features`) and ``phi`` moves
    them to its input's device and dtype; pass ``device`` to place them there once.
    """
    projection = random_features(num_features, dim, orthogonal, seed, device=device)  # (F, E)

    def phi(x: torch.Tensor) -> torch.Tensor:
        if x.size(-1) != dim:
            raise ValueError(f"performer features were drawn for dim={dim}, got input of "
                             f"shape {tuple(x.shape)}")
        x = x / dim ** 0.25
        W = projection.to(device=x.device, dtype=x.dtype)  # (F, E), a no-op when already there
        exponent = x @ W.T - (x * x).sum(-1, keepdim=True) / 2  # (..., F)
        return torch.exp(exponent - exponent.max().detach()) / math.sqrt(num_features)

    return phi


def sequence_projection(proj_len: int, seq_len: int, seed: int = 0, dtype=torch.float32,
                        device=None) -> torch.Tensor:
    """A random ``(proj_len, S)`` projection along the sequence axis (``S = seq_len``)
    with entries ``N(0, 1/proj_len)``, the Johnson-Lindenstrauss choice behind
    Linformer's analysis (the model itself learns its projections). Drawn on the CPU with a
    generator seeded by ``seed`` (the same values on every device), returned as ``dtype`` on ``device``
    (default: float32 on the CPU)."""
    check_positive_int("proj_len", proj_len)
    check_positive_int("seq_len", seq_len)
    check_positive_int("seed", seed, minimum=0)
    check_tensor_size("seq_len", (proj_len, seq_len), dtype)
    g = torch.Generator().manual_seed(seed)
    P = torch.randn(proj_len, seq_len, generator=g, dtype=torch.float64)  # (proj_len, S)
    P = P / math.sqrt(proj_len)
    return P.to(device=device, dtype=dtype)


def linformer_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        key_projection: torch.Tensor, value_projection: torch.Tensor | None = None,
                        scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Linformer (Wang et al. 2020): project keys and values along the sequence,
    ``K' = P_K K`` and ``V' = P_V V`` with ``key_projection`` ``P_K`` and
    ``value_projection`` ``P_V`` of shape ``(proj_len, S)`` (the book's P_K and P_V in
    R^{r x S}; the paper's E and F, and k for r),
    then ordinary softmax attention over the ``proj_len`` projected positions:
    ``softmax(Q K'^T / sqrt(E)) V'``.

    Cost O(L * proj_len * E) instead of O(L * S * E). With ``proj_len = S`` and identity
    projections it is exactly dense attention. ``value_projection`` defaults to ``key_projection``
    (Linformer's shared projection).

    Returns ``(output (..., L, Ev), weights (..., L, proj_len))``: the weights are over the
    ``proj_len`` projected "positions", each a mixture of the real ones. The projections
    must lie on the inputs' device (build them with ``device=``).
    """
    check_qkv(query, key, value)
    value_projection = key_projection if value_projection is None else value_projection
    S = key.size(-2)
    for name, P in (("key_projection", key_projection), ("value_projection", value_projection)):
        if not isinstance(P, torch.Tensor) or P.dim() != 2 or P.size(1) != S:
            got = tuple(P.shape) if isinstance(P, torch.Tensor) else type(P).__name__
            raise ValueError(f"{name} must be an (R, S={S}) projection, got {got}")
        check_device(name, P, key.device, "key and value")
    if key_projection.size(0) != value_projection.size(0):
        raise ValueError(f"key_projection and value_projection must project to the same R, got "
                         f"{tuple(key_projection.shape)} and {tuple(value_projection.shape)}")
    check_scale(scale)
    dtype, key, value = query.dtype, upcast(key), upcast(value)
    projected_key = key_projection.to(key.dtype) @ key  # (..., proj_len, E)
    projected_value = value_projection.to(value.dtype) @ value  # (..., proj_len, Ev)
    out, weights = eager_attention(upcast(query), projected_key, projected_value, scale=scale)
    return out.to(dtype), weights.to(dtype)


def pooling_projection(proj_len: int, seq_len: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """A ``(proj_len, S)`` projection that averages ``proj_len`` consecutive segments of a
    sequence of ``S = seq_len`` positions (segment lengths differ by at most one).
    ``proj_len = S`` is the identity; a simple, deterministic stand-in for Linformer's learned
    ``key_projection`` and ``value_projection``. Returned as ``dtype``
    on ``device`` (default: float32 on the CPU)."""
    check_positive_int("proj_len", proj_len)
    check_positive_int("seq_len", seq_len, minimum=proj_len)
    check_tensor_size("seq_len", (proj_len, seq_len), dtype)
    starts = torch.arange(1, proj_len) * seq_len // proj_len  # first position of segments 1 .. proj_len - 1
    segment = torch.searchsorted(starts, torch.arange(seq_len), right=True)  # (S,) segment of each position
    P = F.one_hot(segment, proj_len).T.to(torch.float64)  # (proj_len, S)
    return (P / P.sum(-1, keepdim=True)).to(device=device, dtype=dtype)
