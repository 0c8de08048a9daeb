"""Chapter 11: FlashAttention as a GPU kernel, written in Triton (Tillet et al., 2019): the
forward pass of FlashAttention-2 by Dao (2023) and its backward pass, which recomputes the
attention weights tile by tile from the saved log-sum-exp.

:func:`~attention_core.nn.flash.flash_attention` is the same algorithm as a Python loop over
tiles. Here one *program* (a GPU thread block) owns one tile of Bq queries of one head: it
loads the tile once, walks over the key tiles keeping the running max ``m``, the running sum
``l`` and the unnormalised output ``acc`` on chip, and writes ``acc / l`` and the
log-sum-exp ``m + log l`` once. The whole grid of programs runs in parallel.

Optional: needs the ``gpu`` extra (``pip install 'attention_core[gpu]'``, Linux only) and is
imported only on first use (``ATTENTION_FUNCTIONS["triton"]``), never by ``import
attention_core``. How it runs is read, once, from
:func:`~attention_core.nn.backends.triton_mode` when this module is imported: compiled on a
CUDA GPU of compute capability 8.0+, or by Triton's CPU interpreter where the caller has set
``TRITON_INTERPRET=1`` before anything imported triton (chapter 11 and the tests do, where no
GPU compiles); nothing here sets the environment. The interpreter runs every program one
after another on the CPU with numpy. Same code, same results, no speed: it checks
correctness only. Where neither is possible the kernels refuse to run, with a
``RuntimeError`` that says what to set.
Under the interpreter, tiles are computed in float32 (its ``tl.dot`` on bfloat16 is wrong);
compiled, float16/bfloat16 tiles go to the tensor cores with float32 accumulation.

The scores are kept in base-2 units (``s * log2(e)``, so ``exp`` becomes the cheaper
``exp2``); ``exp2(x log2 e) = exp(x)`` and the log-sum-exp is handed back in natural units.

Shape legend: ``...`` batch dims, H query heads, Hkv key/value heads (dividing H; query head
``h`` reads kv head ``h // G``, G = H / Hkv), L query length, S key length, E query/key dim
per head (d_k), Ev value dim per head (d_v), B the batch dims flattened, Bq query tile (block
of rows), Bk key tile, BE/BEv E/Ev padded to a power of two.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ._checks import check_is_causal, check_positive_int, check_qkv, check_scale, check_tensor
from .backends import triton_mode

__all__ = ["INTERPRETED", "MODE", "TritonFlashAttention", "dot", "run_tile_update",
           "tile_update", "triton_attention", "triton_attention_lse"]

MODE = triton_mode()
"""How this module's kernels run: ``"compiled"``, ``"interpreted"`` or ``None`` (they cannot
run here), read when it is imported: Triton fixes its mode when it is imported."""

INTERPRETED = MODE == "interpreted"
"""True where this module's kernels run under Triton's interpreter (on the CPU)."""

if INTERPRETED and type(tl.zeros).__name__ != "InterpretedFunction":
    raise ImportError(
        "TRITON_INTERPRET=1 is set, but triton was imported before it was (something imported "
        "triton first: torch._dynamo, torch.compile, ...), so its library (tl.zeros, tl.sum...) is "
        "compiled-only and cannot run on the CPU; set os.environ['TRITON_INTERPRET'] = '1' before "
        "anything imports triton, e.g. at the top of the script or in the shell")


def _check_runs_here() -> None:
    """Raise a ``RuntimeError`` saying what to set where Triton can neither compile nor
    interpret this module's kernels."""
    if MODE is None:
        raise RuntimeError(
            "the Triton kernel cannot run here: Triton compiles only for a CUDA GPU of compute "
            "capability 8.0+ and TRITON_INTERPRET was not set when attention_core.nn.triton_flash was "
            "imported; to run it on the CPU with Triton's interpreter, set "
            "os.environ['TRITON_INTERPRET'] = '1' before anything imports triton (then restart)")


MAX_HEAD_DIM = 128
LOG2E = math.log2(math.e)
LN2 = math.log(2.0)
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


# --- forward ------------------------------------------------------------------------------

@triton.jit
def dot(a, b):
    """``a @ b`` accumulated in float32; float32 inputs multiplied exactly (IEEE), not in
    the tensor cores' TF32, so that a float32 call equals PyTorch's float32 attention."""
    if a.dtype == tl.float32:  # noqa: SIM108 (a branch Triton resolves when it compiles)
        c = tl.dot(a, b, input_precision="ieee")
    else:
        c = tl.dot(a, b)
    return c


@triton.jit
def tile_update(q, k_t, v, m, l, acc, allowed, qk_scale):
    """One key tile of the online softmax, for a tile of queries.

    ``q (Bq, BE)``, ``k_t (BE, Bk)`` (keys transposed), ``v (Bk, BEv)``; running max ``m
    (Bq,)`` and sum ``l (Bq,)`` in base-2 units, ``acc (Bq, BEv)``; ``allowed (Bq, Bk)``
    (False: masked, ragged or causal); ``qk_scale`` = scale * log2(e). Returns the new
    ``(m, l, acc)``.
    """
    s = dot(q, k_t) * qk_scale  # (Bq, Bk) scores, base 2
    s = tl.where(allowed, s, float("-inf"))
    m_new = tl.maximum(m, tl.max(s, 1))  # (Bq,) running max after this tile
    shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: no NaN
    p = tl.math.exp2(s - shift[:, None])  # (Bq, Bk), 0 where masked
    alpha = tl.math.exp2(m - shift)  # (Bq,) rescales what was summed under the old max
    l = l * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + dot(p.to(v.dtype), v)
    return m_new, l, acc


@triton.jit
def _forward_kernel(Q, K, V, O, LSE,
                    sqn, sqh, sql, sqe, skn, skh, sks, ske, svn, svh, svs, sve, son, soh, sol, soe,
                    H, L, S, E, Ev, G, qk_scale,
                    IS_CAUSAL: tl.constexpr, UPCAST: tl.constexpr, UPDATE: tl.constexpr,
                    BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                    BLOCK_E: tl.constexpr, BLOCK_EV: tl.constexpr):
    """One program: query tile ``program_id(0)`` of head ``program_id(1)`` (n * H + h)."""
    tile, nh = tl.program_id(0), tl.program_id(1)
    n, h = nh // H, nh % H
    rows = tile * BLOCK_Q + tl.arange(0, BLOCK_Q)  # (Bq,) query positions
    cols = tl.arange(0, BLOCK_K)  # (Bk,) key offsets within a tile
    e, ev = tl.arange(0, BLOCK_E), tl.arange(0, BLOCK_EV)
    # load the query tile once: (Bq, BE), zeros past L and past E
    q = tl.load(Q + n * sqn + h * sqh + rows[:, None] * sql + e[None, :] * sqe,
                mask=(rows[:, None] < L) & (e[None, :] < E), other=0.0)
    K += n * skn + (h // G) * skh  # this head's keys and values: kv head h // G
    V += n * svn + (h // G) * svh
    if UPCAST:
        q = q.to(tl.float32)
    m = tl.full([BLOCK_Q], float("-inf"), tl.float32)  # running max (base 2)
    l = tl.zeros([BLOCK_Q], tl.float32)  # running sum
    acc = tl.zeros([BLOCK_Q, BLOCK_EV], tl.float32)  # running output, unnormalised
    end = S
    if IS_CAUSAL:  # query i sees keys j <= i + (S - L): stop after the last one of this tile
        end = tl.minimum(S, (tile + 1) * BLOCK_Q + S - L)
    for start in range(0, end, BLOCK_K):
        keys = start + cols  # (Bk,)
        k_t = tl.load(K + keys[None, :] * sks + e[:, None] * ske,
                      mask=(keys[None, :] < S) & (e[:, None] < E), other=0.0)  # (BE, Bk)
        v = tl.load(V + keys[:, None] * svs + ev[None, :] * sve,
                    mask=(keys[:, None] < S) & (ev[None, :] < Ev), other=0.0)  # (Bk, BEv)
        if UPCAST:
            k_t, v = k_t.to(tl.float32), v.to(tl.float32)
        allowed = keys[None, :] < S  # (1, Bk): the last tile is ragged
        if IS_CAUSAL:
            allowed = allowed & (keys[None, :] <= rows[:, None] + S - L)  # (Bq, Bk)
        m, l, acc = UPDATE(q, k_t, v, m, l, acc, allowed, qk_scale)
    # a row with no key (causal, L > S) has l = 0: output 0 and log-sum-exp -inf
    l_safe = tl.where(l > 0, l, 1.0)
    out = acc / l_safe[:, None]
    tl.store(O + n * son + h * soh + rows[:, None] * sol + ev[None, :] * soe,
             out.to(O.dtype.element_ty), mask=(rows[:, None] < L) & (ev[None, :] < Ev))
    tl.store(LSE + nh * L + rows, m * 0.6931471805599453 + tl.log(l_safe), mask=rows < L)


@triton.jit
def _one_update_kernel(Q, KT, V, M, LSUM, ACC, ALLOWED, qk_scale, UPDATE: tl.constexpr,
                       BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                       BLOCK_E: tl.constexpr, BLOCK_EV: tl.constexpr):
    """One call of ``UPDATE`` on one tile, state read from and written back to memory."""
    r, c = tl.arange(0, BLOCK_Q), tl.arange(0, BLOCK_K)
    e, ev = tl.arange(0, BLOCK_E), tl.arange(0, BLOCK_EV)
    q = tl.load(Q + r[:, None] * BLOCK_E + e[None, :])
    k_t = tl.load(KT + e[:, None] * BLOCK_K + c[None, :])
    v = tl.load(V + c[:, None] * BLOCK_EV + ev[None, :])
    acc = tl.load(ACC + r[:, None] * BLOCK_EV + ev[None, :])
    allowed = tl.load(ALLOWED + r[:, None] * BLOCK_K + c[None, :]) != 0
    m, l, acc = UPDATE(q, k_t, v, tl.load(M + r), tl.load(LSUM + r), acc, allowed, qk_scale)
    tl.store(M + r, m)
    tl.store(LSUM + r, l)
    tl.store(ACC + r[:, None] * BLOCK_EV + ev[None, :], acc)


def run_tile_update(update, q, k_t, v, m, l, acc, allowed, qk_scale: float):
    """Run one ``update`` (a ``@triton.jit`` tile step such as :func:`tile_update`) on one
    tile, outside the kernel: float32 ``q (Bq, E)``, ``k_t (E, Bk)``, ``v (Bk, Ev)``, ``m,
    l (Bq,)``, ``acc (Bq, Ev)`` and bool ``allowed (Bq, Bk)``, every size a power of two >= 16.
    Returns the new ``(m, l, acc)`` (chapter 11's exercise checks a reader's step with it).
    Compiled, every tensor must be on the GPU; interpreted, on the CPU."""
    device = "cpu" if INTERPRETED else "cuda"
    for name, x in (("q", q), ("k_t", k_t), ("v", v), ("m", m), ("l", l), ("acc", acc), ("allowed", allowed)):
        if x.device.type != device:
            raise ValueError(f"{name} is on {x.device}, but Triton runs {MODE} here and reads tensors "
                             f"on the {device.upper()}: move them with .to({device!r})")
    m, l, acc = (x.float().contiguous().clone() for x in (m, l, acc))
    (Bq, E), (Bk, Ev) = q.shape, v.shape
    _one_update_kernel[(1,)](q.float().contiguous(), k_t.float().contiguous(), v.float().contiguous(),
                             m, l, acc, allowed.to(torch.int8).contiguous(), float(qk_scale),
                             UPDATE=update, BLOCK_Q=Bq, BLOCK_K=Bk, BLOCK_E=E, BLOCK_EV=Ev)
    return m, l, acc


# --- backward -----------------------------------------------------------------------------

@triton.jit
def _backward_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV,
                          sqn, sqh, sql, sqe, skn, skh, sks, ske, svn, svh, svs, sve,
                          sdn, sdh, sdl, sde,
                          H, L, S, E, Ev, G, scale, qk_scale,
                          IS_CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
                          BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                          BLOCK_E: tl.constexpr, BLOCK_EV: tl.constexpr):
    """One program: key tile ``program_id(0)`` of kv head ``program_id(1)`` (n * Hkv + hk),
    summing dK and dV over every query tile of its G query heads (no atomics)."""
    tile, nhk = tl.program_id(0), tl.program_id(1)
    Hkv = H // G
    n, hk = nhk // Hkv, nhk % Hkv
    keys = tile * BLOCK_K + tl.arange(0, BLOCK_K)  # (Bk,)
    r = tl.arange(0, BLOCK_Q)
    e, ev = tl.arange(0, BLOCK_E), tl.arange(0, BLOCK_EV)
    k = tl.load(K + n * skn + hk * skh + keys[:, None] * sks + e[None, :] * ske,
                mask=(keys[:, None] < S) & (e[None, :] < E), other=0.0)  # (Bk, BE)
    v = tl.load(V + n * svn + hk * svh + keys[:, None] * svs + ev[None, :] * sve,
                mask=(keys[:, None] < S) & (ev[None, :] < Ev), other=0.0)  # (Bk, BEv)
    if UPCAST:
        k, v = k.to(tl.float32), v.to(tl.float32)
    dk = tl.zeros([BLOCK_K, BLOCK_E], tl.float32)
    dv = tl.zeros([BLOCK_K, BLOCK_EV], tl.float32)
    begin = 0
    if IS_CAUSAL:  # the first query that sees key j is i = j - (S - L)
        begin = tl.maximum(tile * BLOCK_K - (S - L), 0) // BLOCK_Q * BLOCK_Q
    for g in range(0, G):
        h = hk * G + g
        for start in range(begin, L, BLOCK_Q):
            rows = start + r  # (Bq,)
            q_t = tl.load(Q + n * sqn + h * sqh + rows[None, :] * sql + e[:, None] * sqe,
                          mask=(rows[None, :] < L) & (e[:, None] < E), other=0.0)  # (BE, Bq)
            do = tl.load(DO + n * sdn + h * sdh + rows[:, None] * sdl + ev[None, :] * sde,
                         mask=(rows[:, None] < L) & (ev[None, :] < Ev), other=0.0)  # (Bq, BEv)
            if UPCAST:
                q_t, do = q_t.to(tl.float32), do.to(tl.float32)
            lse = tl.load(LSE + (n * H + h) * L + rows, mask=rows < L, other=float("inf"))
            delta = tl.load(DELTA + (n * H + h) * L + rows, mask=rows < L, other=0.0)
            lse = tl.where(lse == float("-inf"), float("inf"), lse)  # a row with no key: P = 0
            s_t = dot(k, q_t) * qk_scale  # (Bk, Bq) scores, base 2
            p_t = tl.math.exp2(s_t - lse[None, :] * 1.4426950408889634)  # P^T: the weights again
            allowed = (keys[:, None] < S) & (rows[None, :] < L)
            if IS_CAUSAL:
                allowed = allowed & (keys[:, None] <= rows[None, :] + S - L)
            p_t = tl.where(allowed, p_t, 0.0)
            dv += dot(p_t.to(do.dtype), do)  # dV = P^T dO
            dp_t = dot(v, tl.trans(do))  # (Bk, Bq) (dO V^T)^T
            ds_t = p_t * (dp_t - delta[None, :])  # dS = P * (dP - rowsum(dO * O))
            dk += dot(ds_t.to(q_t.dtype), tl.trans(q_t))  # dK = dS^T Q
    tl.store(DK + nhk * S * E + keys[:, None] * E + e[None, :], (dk * scale).to(DK.dtype.element_ty),
             mask=(keys[:, None] < S) & (e[None, :] < E))
    tl.store(DV + nhk * S * Ev + keys[:, None] * Ev + ev[None, :], dv.to(DV.dtype.element_ty),
             mask=(keys[:, None] < S) & (ev[None, :] < Ev))


@triton.jit
def _backward_dq_kernel(Q, K, V, DO, LSE, DELTA, DQ,
                        sqn, sqh, sql, sqe, skn, skh, sks, ske, svn, svh, svs, sve,
                        sdn, sdh, sdl, sde,
                        H, L, S, E, Ev, G, scale, qk_scale,
                        IS_CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
                        BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                        BLOCK_E: tl.constexpr, BLOCK_EV: tl.constexpr):
    """One program: query tile ``program_id(0)`` of head ``program_id(1)``, dQ = dS K over
    the key tiles it sees."""
    tile, nh = tl.program_id(0), tl.program_id(1)
    n, h = nh // H, nh % H
    rows = tile * BLOCK_Q + tl.arange(0, BLOCK_Q)
    cols = tl.arange(0, BLOCK_K)
    e, ev = tl.arange(0, BLOCK_E), tl.arange(0, BLOCK_EV)
    q = tl.load(Q + n * sqn + h * sqh + rows[:, None] * sql + e[None, :] * sqe,
                mask=(rows[:, None] < L) & (e[None, :] < E), other=0.0)  # (Bq, BE)
    do = tl.load(DO + n * sdn + h * sdh + rows[:, None] * sdl + ev[None, :] * sde,
                 mask=(rows[:, None] < L) & (ev[None, :] < Ev), other=0.0)  # (Bq, BEv)
    if UPCAST:
        q, do = q.to(tl.float32), do.to(tl.float32)
    lse = tl.load(LSE + nh * L + rows, mask=rows < L, other=float("inf"))
    lse = tl.where(lse == float("-inf"), float("inf"), lse) * 1.4426950408889634  # base 2
    delta = tl.load(DELTA + nh * L + rows, mask=rows < L, other=0.0)
    K += n * skn + (h // G) * skh
    V += n * svn + (h // G) * svh
    dq = tl.zeros([BLOCK_Q, BLOCK_E], tl.float32)
    end = S
    if IS_CAUSAL:
        end = tl.minimum(S, (tile + 1) * BLOCK_Q + S - L)
    for start in range(0, end, BLOCK_K):
        keys = start + cols
        k_t = tl.load(K + keys[None, :] * sks + e[:, None] * ske,
                      mask=(keys[None, :] < S) & (e[:, None] < E), other=0.0)  # (BE, Bk)
        v_t = tl.load(V + keys[None, :] * svs + ev[:, None] * sve,
                      mask=(keys[None, :] < S) & (ev[:, None] < Ev), other=0.0)  # (BEv, Bk)
        if UPCAST:
            k_t, v_t = k_t.to(tl.float32), v_t.to(tl.float32)
        p = tl.math.exp2(dot(q, k_t) * qk_scale - lse[:, None])  # (Bq, Bk)
        allowed = keys[None, :] < S
        if IS_CAUSAL:
            allowed = allowed & (keys[None, :] <= rows[:, None] + S - L)
        p = tl.where(allowed, p, 0.0)
        dp = dot(do, v_t)  # (Bq, Bk) dP = dO V^T
        ds = p * (dp - delta[:, None])
        dq += dot(ds.to(k_t.dtype), tl.trans(k_t))  # dQ = dS K
    tl.store(DQ + nh * L * E + rows[:, None] * E + e[None, :], (dq * scale).to(DQ.dtype.element_ty),
             mask=(rows[:, None] < L) & (e[None, :] < E))


# --- launching ----------------------------------------------------------------------------

def _pow2(n: int) -> int:
    """``n`` padded to a power of two of at least 16 (``tl.dot`` needs 16 or more)."""
    return max(16, triton.next_power_of_2(n))


def _launch_options(E: int) -> dict:
    """num_warps/num_stages for the compiled kernels (the interpreter ignores them)."""
    return {"num_warps": 4 if E <= 64 else 8, "num_stages": 3 if E <= 64 else 2}


def _strides(x: torch.Tensor) -> tuple[int, ...]:
    return tuple(x.stride())


def _forward(q, k, v, is_causal, scale, block_q, block_k, update):
    """``q (B, H, L, E)``, ``k (B, Hkv, S, E)``, ``v (B, Hkv, S, Ev)`` ->
    ``(output (B, H, L, Ev), log-sum-exp (B, H, L) float32)``."""
    N, H, L, E = q.shape
    Hkv, S, Ev = k.size(1), k.size(2), v.size(3)
    out = q.new_empty((N, H, L, Ev))
    lse = torch.empty((N, H, L), device=q.device, dtype=torch.float32)
    grid = (triton.cdiv(L, block_q), N * H)
    _forward_kernel[grid](
        q, k, v, out, lse, *_strides(q), *_strides(k), *_strides(v), *_strides(out),
        H, L, S, E, Ev, H // Hkv, scale * LOG2E,
        IS_CAUSAL=is_causal, UPCAST=INTERPRETED, UPDATE=update, BLOCK_Q=block_q, BLOCK_K=block_k,
        BLOCK_E=_pow2(E), BLOCK_EV=_pow2(Ev), **_launch_options(max(E, Ev)))
    return out, lse


def _backward(do, q, k, v, out, lse, is_causal, scale, block_q, block_k):
    """Gradients ``(dq, dk, dv)`` of the loss with respect to ``q, k, v`` given ``do =
    dLoss/dout (B, H, L, Ev)``: FlashAttention-2's backward, recomputing P from ``lse``."""
    N, H, L, E = q.shape
    Hkv, S, Ev = k.size(1), k.size(2), v.size(3)
    delta = (do.float() * out.float()).sum(-1).contiguous()  # (B, H, L) rowsum(dO * O)
    dq = torch.empty((N, H, L, E), device=q.device, dtype=q.dtype)
    dk = torch.empty((N, Hkv, S, E), device=q.device, dtype=k.dtype)
    dv = torch.empty((N, Hkv, S, Ev), device=q.device, dtype=v.dtype)
    # compiled, each backward program holds more tiles than a forward one (k, v, dk, dv or
    # q, dO, dq): smaller tiles, as in Triton's fused-attention tutorial; interpreted, the
    # caller's, so that tests reach ragged tiles at small sizes
    kv_tiles = (block_q, block_k) if INTERPRETED else (32, 64)  # (queries per step, keys per program)
    q_tiles = (block_q, block_k) if INTERPRETED else (64, 32)  # (queries per program, keys per step)
    common = dict(IS_CAUSAL=is_causal, UPCAST=INTERPRETED, BLOCK_E=_pow2(E), BLOCK_EV=_pow2(Ev),
                  num_warps=4, num_stages=2)
    strides = (*_strides(q), *_strides(k), *_strides(v), *_strides(do))
    sizes = (H, L, S, E, Ev, H // Hkv, scale, scale * LOG2E)
    _backward_dkdv_kernel[(triton.cdiv(S, kv_tiles[1]), N * Hkv)](
        q, k, v, do, lse, delta, dk, dv, *strides, *sizes, BLOCK_Q=kv_tiles[0], BLOCK_K=kv_tiles[1], **common)
    _backward_dq_kernel[(triton.cdiv(L, q_tiles[0]), N * H)](
        q, k, v, do, lse, delta, dq, *strides, *sizes, BLOCK_Q=q_tiles[0], BLOCK_K=q_tiles[1], **common)
    return dq, dk, dv


class TritonFlashAttention(torch.autograd.Function):
    """Forward and backward of :func:`triton_attention_lse` on ``(B, H, L, E)`` tensors.

    Saves ``q, k, v``, the output and the log-sum-exp (O(L) numbers per head, not the
    L x S weights); the log-sum-exp is not differentiable (its gradient is refused)."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal, scale, block_q, block_k, update):
        out, lse = _forward(q, k, v, is_causal, scale, block_q, block_k, update)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.options = (is_causal, scale, block_q, block_k)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = _backward(do, q, k, v, out, lse, *ctx.options)
        return dq, dk, dv, None, None, None, None, None


# --- the public functions -----------------------------------------------------------------

def _check_block(name: str, block) -> None:
    check_positive_int(name, block, minimum=16)
    if block & (block - 1):
        raise ValueError(f"{name} must be a power of two (a Triton tile), got {block}")


def _check_inputs(query, key, value, attn_mask, is_causal, scale) -> None:
    """Raise, naming the argument, for what this kernel does not take."""
    _check_runs_here()
    if attn_mask is not None:
        raise ValueError("attn_mask: the Triton kernel takes is_causal=True, not an arbitrary mask "
                         f"(got a {type(attn_mask).__name__}); use ATTENTION_FUNCTIONS['flash'] for one")
    check_is_causal(is_causal)
    check_scale(scale)
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(name, x, min_dim=2)
    heads = query.dim() > 2 and key.dim() > 2 and key.size(-3) <= query.size(-3)
    check_qkv(query[..., :key.size(-3), :, :] if heads else query, key, value)  # GQA: compare a group
    if query.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"query: the Triton kernel takes float32, float16 or bfloat16, got {query.dtype}")
    if query.dim() != key.dim() or query.shape[:-3] != key.shape[:-3]:
        raise ValueError(f"key must have the batch dims of query (no broadcasting), got query "
                         f"{tuple(query.shape)} and key {tuple(key.shape)}")
    H, Hkv = (query.size(-3), key.size(-3)) if query.dim() > 2 else (1, 1)
    if H % Hkv:
        raise ValueError(f"key: its {Hkv} heads must divide the query's {H} heads, "
                         f"got query {tuple(query.shape)} and key {tuple(key.shape)}")
    for name, width in (("query", query.size(-1)), ("value", value.size(-1))):
        if width > MAX_HEAD_DIM:
            raise ValueError(f"{name}: head width at most {MAX_HEAD_DIM}, got {width}")
    if not INTERPRETED and query.device.type != "cuda":
        raise ValueError(f"query is on {query.device}, but Triton compiles this kernel for the GPU: "
                         "move the tensors with .cuda()")


def _as_heads(x: torch.Tensor) -> torch.Tensor:
    """``(..., H, T, E)`` -> ``(B, H, T, E)`` (a view where possible); ``(T, E)`` -> ``(1, 1, T, E)``."""
    return x.reshape(1, 1, *x.shape) if x.dim() == 2 else x.reshape(-1, *x.shape[-3:])


def triton_attention_lse(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         attn_mask: None = None, is_causal: bool = False, scale: float | None = None,
                         block_q: int | None = None, block_k: int | None = None,
                         update=None) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashAttention-2 in Triton: ``(output (..., H, L, Ev), logsumexp (..., H, L))``.

    ``query (..., H, L, E)``, ``key (..., Hkv, S, E)``, ``value (..., Hkv, S, Ev)`` with Hkv
    dividing H (grouped-query attention; ``(L, E)`` inputs are one head), E, Ev <= 128,
    float32, float16 or bfloat16 (computed with float32 accumulation, output in their dtype).
    ``is_causal``: query i sees keys ``j <= i + (S - L)`` (aligned to the end, like
    :func:`~attention_core.nn.masks.causal_mask`; a query with no key gets a zero output and a
    log-sum-exp of -inf). ``scale`` defaults to 1/sqrt(E). ``attn_mask`` must be None (an
    arbitrary mask is refused: ``ATTENTION_FUNCTIONS["flash"]`` takes one). ``block_q``
    (Bq) and ``block_k`` (Bk): the forward's tile sizes, powers of two >= 16 (default 128 x 64
    compiled, 64 x 64 interpreted; compiled, the backward uses its own smaller tiles).
    ``update``: the ``@triton.jit`` function that folds one key tile into ``(m, l, acc)``
    (default :func:`tile_update`; chapter 11's exercise swaps in the reader's).
    Differentiable in query, key and value; the logsumexp is float32 and not differentiable.
    """
    _check_inputs(query, key, value, attn_mask, is_causal, scale)
    block_q = (64 if INTERPRETED else 128) if block_q is None else block_q
    block_k = 64 if block_k is None else block_k
    _check_block("block_q", block_q)
    _check_block("block_k", block_k)
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else float(scale)
    out, lse = TritonFlashAttention.apply(_as_heads(query), _as_heads(key), _as_heads(value),
                                          is_causal, scale, block_q, block_k, update or tile_update)
    return out.reshape(*query.shape[:-1], value.size(-1)), lse.reshape(query.shape[:-1])


def triton_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attn_mask: None = None, is_causal: bool = False, scale: float | None = None,
                     block_q: int | None = None, block_k: int | None = None) -> tuple[torch.Tensor, None]:
    """:func:`triton_attention_lse` under the kernel contract of
    :data:`~attention_core.nn.attention_functions.ATTENTION_FUNCTIONS`: ``(output, None)``."""
    return triton_attention_lse(query, key, value, attn_mask, is_causal, scale, block_q, block_k)[0], None
