"""Chapter 12: the delta rule, a linear-attention memory that corrects itself instead of
only adding (Schlag et al. 2021; Yang et al. 2024, DeltaNet; Yang et al. 2024, Gated
DeltaNet).

Causal linear attention keeps a state ``S (Ev x E)`` and writes every pair by adding
``v_t k_t^T``; reading with a key that was stored returns its value *plus* crosstalk
from every other stored pair, and writing a key twice sums the two values. The delta
rule first reads what the memory holds for ``k_t``, then writes only the correction:

    S_t = S_{t-1} - beta_t (S_{t-1} k_t - v_t) k_t^T,      o_t = S_t q_t

With a unit key and ``beta_t = 1``, ``S_t k_t = v_t`` exactly: the old value is
replaced. Gated DeltaNet multiplies ``S_{t-1}`` by a gate ``alpha_t`` in (0, 1] first
(forgetting), then applies the same correction.

The chunked form (Yang et al. 2024, "Parallelizing linear transformers with the delta
rule over sequence length") writes the state after the first t tokens of a chunk as
``S_t = S_0 + sum_{i <= t} u_i k_i^T``; the corrections ``u_i`` solve one
unit-lower-triangular system per chunk (the UT transform), so a chunk is a few matrix
products instead of C rank-one updates one after another.

Shape legend: B batch, H heads, T tokens, E key/query dim per head (d_k), Ev value dim
per head (d_v); ``chunk`` tokens per chunk, ``num_chunks`` chunks; the state is ``(B, H, Ev, E)``.
"""

from __future__ import annotations

import warnings

import torch

from ._checks import check_device, check_positive_int, check_qkv, check_tensor
from .functional import upcast

__all__ = ["delta_rule_attention"]


def _check(query, key, value, beta, gate, chunk_size) -> None:
    check_qkv(query, key, value)
    if query.dim() != 4 or key.shape != query.shape:
        raise ValueError(f"query and key must both be (B, H, T, E), got query {tuple(query.shape)} "
                         f"and key {tuple(key.shape)}")
    _check_rate("beta", beta, query, 2.0, "[0, 2]")
    if gate is not None:
        _check_rate("gate", gate, query, 1.0, "[0, 1]")
    if chunk_size is not None:
        check_positive_int("chunk_size", chunk_size)
    _warn_unstable(key, beta)


def _warn_unstable(key: torch.Tensor, beta: torch.Tensor) -> None:
    """Warn where ``beta_t * |k_t|^2 > 2``: the update ``S (I - beta k k^T)`` then stretches the
    state along ``k_t``, and un-normalised keys can grow it to inf or NaN."""
    if key.device.type == "meta":
        return
    stretch = upcast(beta) * upcast(key).pow(2).sum(-1)  # (B, H, T): the eigenvalue is 1 - this
    if bool((stretch > 2 * (1 + 1e-4)).any()):
        warnings.warn(f"delta_rule_attention: beta * |key|^2 reaches {stretch.max().item():.3g} > 2, so the "
                      "state can grow without bound (inf or NaN); L2-normalise the keys as the papers do",
                      RuntimeWarning, stacklevel=3)


def _check_rate(name: str, x, query: torch.Tensor, high: float, interval: str) -> None:
    """Raise unless ``x`` is a ``(B, H, T)`` tensor of ``query``'s dtype and device with
    values in ``[0, high]`` (NaN passes: NaN in, NaN out; a meta tensor has no values)."""
    check_tensor(name, x)
    if x.shape != query.shape[:-1]:
        raise ValueError(f"{name} must be (B, H, T) = {tuple(query.shape[:-1])}, got {tuple(x.shape)}")
    if x.dtype != query.dtype:
        raise TypeError(f"{name} must have query's dtype {query.dtype}, got {x.dtype}")
    check_device(name, x, query.device, "query")
    if x.device.type != "meta" and ((x < 0) | (x > high)).any():
        raise ValueError(f"{name} must lie in {interval}, got values from "
                         f"{x.min().item():g} to {x.max().item():g}")


def delta_rule_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         beta: torch.Tensor, gate: torch.Tensor | None = None,
                         chunk_size: int | None = None) -> tuple[torch.Tensor, None]:
    """Causal (gated) delta-rule attention.

    ``beta`` and ``gate`` share the dtype and device of ``query``; every argument is
    checked (``ValueError``/``TypeError`` naming it) before any computation.

    Args:
        query, key: ``(B, H, T, E)``; value: ``(B, H, T, Ev)``. Keys are used as given:
            the papers L2-normalise them, which keeps ``beta`` in (0, 2) stable.
        beta: ``(B, H, T)`` in [0, 2], the writing strength of each token (0: no write;
            1 with a unit key: replace; up to 2 the memory stays stable for unit keys).
        gate: ``(B, H, T)`` in [0, 1], the decay ``alpha_t`` of the old state (Gated
            DeltaNet; 0 forgets everything); None for no decay.
        chunk_size: None for the recurrent form, one token at a time (the definition);
            C for the chunked form, equal up to rounding.

    Returns:
        ``(output (B, H, T, Ev), None)``: ``o_t = S_t q_t``, no weights. float16 and
        bfloat16 inputs are computed in float32, the state included, and returned in
        their dtype.
    """
    _check(query, key, value, beta, gate, chunk_size)
    dtype = query.dtype
    query, key, value, beta, gate = (upcast(x) for x in (query, key, value, beta, gate))
    if chunk_size is None:
        return _recurrent(query, key, value, beta, gate).to(dtype), None
    return _chunked(query, key, value, beta, gate, chunk_size).to(dtype), None


def _recurrent(query, key, value, beta, gate):
    """The delta rule token by token: ``(B, H, T, Ev)``."""
    B, H, T, E = key.shape
    state = key.new_zeros(B, H, value.size(-1), E)  # (B, H, Ev, E): S_0 = 0
    outputs = []
    for t in range(T):
        k, v, q = key[:, :, t], value[:, :, t], query[:, :, t]  # (B, H, E), (B, H, Ev), (B, H, E)
        if gate is not None:
            state = state * gate[:, :, t, None, None]  # forget first: alpha_t S_{t-1}
        error = state @ k.unsqueeze(-1) - v.unsqueeze(-1)  # (B, H, Ev, 1): S k_t - v_t
        state = state - beta[:, :, t, None, None] * error @ k.unsqueeze(-2)  # rank-one correction
        outputs.append((state @ q.unsqueeze(-1)).squeeze(-1))  # (B, H, Ev): S_t q_t
    return torch.stack(outputs, dim=2)  # (B, H, T, Ev)


def _pad_chunks(x: torch.Tensor, T: int, C: int, fill: float) -> torch.Tensor:
    """``x (B, H, T, ...)`` padded along T to a multiple of ``C = chunk`` and split:
    ``(B, H, num_chunks, chunk, ...)``."""
    pad = -T % C
    if pad:
        x = torch.cat((x, x.new_full((*x.shape[:2], pad, *x.shape[3:]), fill)), dim=2)
    return x.view((*x.shape[:2], x.size(2) // C, C, *x.shape[3:]))


def _chunked(query, key, value, beta, gate, C):
    """The delta rule a chunk of C tokens at a time (UT transform): ``(B, H, T, Ev)``."""
    B, H, T, E = key.shape
    gate = torch.ones_like(beta) if gate is None else gate
    q, k, v = (_pad_chunks(x, T, C, 0.0) for x in (query, key, value))  # (B, H, num_chunks, chunk, E or Ev)
    b = _pad_chunks(beta, T, C, 0.0)  # (B, H, num_chunks, chunk): padding writes nothing
    log_decay = _pad_chunks(gate, T, C, 1.0).clamp_min(torch.finfo(gate.dtype).tiny).log().cumsum(-1)
    decay = log_decay.exp()  # (B, H, num_chunks, chunk): gamma_t, the gates' product since the chunk began
    causal = torch.ones(C, C, dtype=torch.bool, device=key.device).tril()  # i <= t
    ratio = (log_decay.unsqueeze(-1) - log_decay.unsqueeze(-2)).masked_fill(~causal, float("-inf")).exp()
    # ratio[t, i] = gamma_t / gamma_i for i <= t, else 0: (B, H, num_chunks, chunk, chunk)
    strictly = (k @ k.transpose(-2, -1)) * ratio * b.unsqueeze(-1)  # beta_t gamma_t/gamma_i k_t.k_i
    system = torch.eye(C, dtype=key.dtype, device=key.device) + strictly.tril(-1)  # I + A

    def solve(rhs):  # (I + A)^{-1} rhs by substitution: the UT transform
        return torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)

    u_values = solve(b.unsqueeze(-1) * v)  # (B, H, num_chunks, chunk, Ev): corrections if S_0 = 0
    w_keys = solve((b * decay).unsqueeze(-1) * k)  # (B, H, num_chunks, chunk, E): how S_0 enters them
    # (B, H, num_chunks, chunk, chunk): gamma_t / gamma_i q_t.k_i, for i <= t
    scores = (q @ k.transpose(-2, -1)) * ratio
    state = key.new_zeros(B, H, value.size(-1), E)  # (B, H, Ev, E)
    outputs = []
    for n in range(q.size(2)):  # only this loop is sequential: one step per chunk
        u = u_values[:, :, n] - w_keys[:, :, n] @ state.transpose(-2, -1)  # (B, H, chunk, Ev)
        gamma = decay[:, :, n].unsqueeze(-1)  # (B, H, chunk, 1)
        outputs.append(gamma * (q[:, :, n] @ state.transpose(-2, -1)) + scores[:, :, n] @ u)
        last = ratio[:, :, n, -1].unsqueeze(-1)  # (B, H, chunk, 1): gamma_C / gamma_i
        state = gamma[:, :, -1:] * state + (last * u).transpose(-2, -1) @ k[:, :, n]  # S at chunk end
    return torch.cat(outputs, dim=2)[:, :, :T]  # (B, H, T, Ev)
