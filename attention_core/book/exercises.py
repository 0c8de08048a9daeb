"""Every chapter: checkers for the "implement" exercises, one ``check_*`` each.

Each ``check_*`` runs a student's function on several cases and compares it with the
package's reference. On a mismatch it names the case, the input shapes, what was
expected and what came back, and, when the wrong answer matches a typical mistake
(forgot the scale, softmax over the wrong axis, mask inverted...), says which.

    >>> from attention_core.book.exercises import check_softmax
    >>> check_softmax(my_softmax)   # prints the verdict; truthy when every case passes
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..models import circuits, interpret, llm_probes
from ..models.seeding import seeded
from ..nn import functional, heads, masks, positional
from ..nn.block import TransformerBlock
from ..nn.delta_rule import delta_rule_attention
from ..nn.flash import online_softmax
from ..nn.linear_attention import elu_feature_map, kernel_attention_weights, linear_attention
from ..nn.norms import rms_norm

__all__ = [
    "Feedback", "Case", "check_softmax", "check_attention", "check_self_attention", "check_causal_mask",
    "check_masked_softmax", "check_split_heads", "check_repeat_kv", "check_pre_norm_block", "check_rms_norm",
    "check_sinusoidal_encoding", "WholeRowSoftmaxError", "check_online_softmax",
    "check_causal_linear_attention", "check_general_attention", "check_attention_rollout",
    "check_delta_rule", "check_triton_tile_update", "check_induction_scores",
    "check_interleaved_to_half_split", "check_composition_score", "check_copying_score",
]


@dataclass
class Feedback:
    """The verdict of a checker: truthy when every case passed; prints its message."""

    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message


@dataclass
class Case:
    name: str
    args: tuple


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        where = "" if x.device.type == "cpu" else f", device {x.device}"
        return f"tensor of shape {tuple(x.shape)}, dtype {x.dtype}{where}"
    if isinstance(x, (tuple, list)):
        return f"{type(x).__name__} of {len(x)}: ({', '.join(_describe(y) for y in x[:4])})"
    if isinstance(x, torch.nn.Module):
        return type(x).__name__
    return repr(x)


def _error_text(error: BaseException, limit: int = 500) -> str:
    """``"Type: message"`` for an error a student's code raised, cut to ``limit`` characters
    (a Triton traceback runs to pages); never raises, even when ``str(error)`` does. An error
    raised from another (compiled Triton's ``CompilationError`` quotes the kernel's source
    first) is reported by its first cause, the reason the reader needs."""
    try:
        cause = error.__cause__
        while cause is not None and cause.__cause__ is not None:
            cause = cause.__cause__
        text = (f"{type(error).__name__}: {error}" if cause is None else
                f"{type(cause).__name__}: {cause} (raised as {type(error).__name__})")
    except Exception:  # an exception whose __str__ itself raises
        text = f"{type(error).__name__} (its message could not be printed)"
    return text if len(text) <= limit else text[:limit] + "…"


def _first_row(x: torch.Tensor) -> list:
    """The first row of ``x`` (its last axis), as a list to print; a number as a list of one."""
    return x.reshape(-1, x.shape[-1])[0].tolist() if x.dim() else [x.item()]


def _same(got: Any, expected: torch.Tensor) -> bool:
    """Whether ``got`` is a tensor equal to ``expected``: same shape, dtype and device (a tensor
    on another device is never compared, so a CUDA answer cannot raise here), close values."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape or got.dtype != expected.dtype \
            or got.device != expected.device:
        return False
    if expected.dtype == torch.bool:
        return torch.equal(got, expected)
    return torch.allclose(got, expected, atol=1e-5, rtol=1e-4, equal_nan=True)


def _right_values(got: torch.Tensor, expected: torch.Tensor) -> bool:
    """Whether ``got``, moved to ``expected``'s device and dtype, equals it (False when it
    cannot be moved, as a tensor on the ``meta`` device)."""
    try:
        return _same(got.to(device=expected.device, dtype=expected.dtype), expected)
    except Exception:  # another device that cannot be read here (meta)
        return False


def _what_differs(got: Any, expected: torch.Tensor) -> str | None:
    """What to return instead of ``got``, when it is not the kind of thing expected (a tuple,
    not a tensor, another device or dtype), or None."""
    if isinstance(got, (tuple, list)) and got and isinstance(got[0], torch.Tensor):
        right = " (its first element is right)" if _right_values(got[0], expected) else ""
        return (f"your function returned a {type(got).__name__} of {len(got)}{right}; return only the "
                f"{_describe(expected)}, e.g. output from `output, weights = ...`")
    if got is None:
        return f"your function returned None (is a `return` missing?); return the {_describe(expected)}"
    if not isinstance(got, torch.Tensor):
        return f"your function returned {type(got).__name__}; return a torch.Tensor ({_describe(expected)})"
    right = " The values are right." if _right_values(got, expected) else ""
    if got.device != expected.device:
        return (f"your tensor is on device {got.device}, the inputs on {expected.device}: create new "
                f"tensors on the inputs' device (device=x.device) or return result.to('{expected.device}')."
                f"{right}")
    if got.dtype != expected.dtype and got.shape == expected.shape:
        return (f"your tensor has dtype {got.dtype}, expected {expected.dtype}: create new tensors in "
                f"that dtype (dtype=x.dtype follows an input) and do not convert the result.{right}")
    return None


def _copies(args: tuple) -> tuple:
    """The case's arguments, tensors cloned, so a student's in-place edit cannot change them."""
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _raised(error: Exception, case: Case, expected: torch.Tensor, mistakes: dict[str, Callable]) -> Feedback:
    """The verdict when the student's function raised: the error, and a typical mistake
    that raises the same way, if any."""
    inputs = ", ".join(_describe(a) for a in case.args)
    message = (f"Case '{case.name}' failed: your function raised {_error_text(error)}"
               f"\n  input: {inputs}\n  expected: {_describe(expected)}")
    for mistake, wrong in mistakes.items():  # a typical mistake that raises the same way
        try:
            wrong(*case.args)
        except type(error):
            return Feedback(False, f"{message}\n  likely mistake: {mistake}")
        except Exception:  # raised otherwise: not this mistake
            continue
    return Feedback(False, message)


def _failed(student: Callable, got: Any, expected: torch.Tensor, case: Case, cases: Sequence[Case],
            mistakes: dict[str, Callable]) -> Feedback:
    """The verdict when the student's answer differs: what came back, what differs, and
    the typical mistake it matches, if any."""
    lines = [f"Case '{case.name}' failed.", f"  input: {', '.join(_describe(a) for a in case.args)}",
             f"  expected: {_describe(expected)}", f"  got:      {_describe(got)}"]
    differs = _what_differs(got, expected)
    if differs:
        lines.append(f"  what differs: {differs}")
    elif isinstance(got, torch.Tensor) and got.shape == expected.shape:
        lines.append(f"  expected values (first row): {_first_row(expected)}")
        lines.append(f"  your values (first row):     {_first_row(got)}")
    mistake = _diagnose(student, cases, mistakes)
    if mistake:
        lines.append(f"  likely mistake: {mistake}")
    return Feedback(False, "\n".join(lines))


def _check(student: Callable, reference: Callable, cases: Sequence[Case],
           mistakes: dict[str, Callable], what: str) -> Feedback:
    if not callable(student):
        return Feedback(False, f"check_{what} needs a function, got {_describe(student)}")
    for case in cases:
        expected = reference(*case.args)
        try:
            got = student(*_copies(case.args))
        except Exception as error:  # the student's code raised: report it, do not crash
            return _raised(error, case, expected, mistakes)
        if not _same(got, expected):
            return _failed(student, got, expected, case, cases, mistakes)
    return Feedback(True, f"All {len(cases)} cases passed: {'; '.join(c.name for c in cases)}.")


def _diagnose(student: Callable, cases: Sequence[Case], mistakes: dict[str, Callable]) -> str | None:
    """The typical mistake whose output equals the student's on every case (a single
    small case can fit several mistakes at once), or None."""
    def outputs(fn):
        results = []
        for case in cases:
            try:
                results.append(fn(*_copies(case.args)))
            except Exception:
                results.append(None)
        return results

    theirs = outputs(student)
    for mistake, wrong in mistakes.items():
        if all(g is not None and isinstance(w, torch.Tensor) and _same(g, w)
               for g, w in zip(theirs, outputs(wrong))):
            return mistake
    return None


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# --- softmax -------------------------------------------------------------------------

def check_softmax(student: Callable) -> Feedback:
    """``student(x)`` must return the softmax of ``x`` along its last dimension."""
    cases = [Case("one row", (torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64),)),
             Case("a batch of rows", (_rand(4, 5),)),
             Case("large logits (1e4)", (torch.tensor([[1e4, 1e4 - 1.0, 0.0]], dtype=torch.float64),)),
             Case("a -inf entry", (torch.tensor([[0.0, -math.inf, 1.0]], dtype=torch.float64),)),
             Case("rows of very different scale",
                  (torch.tensor([[1e4, 1e4 - 1.0, 0.0], [0.0, 1.0, 2.0]], dtype=torch.float64),)),
             Case("a 3-D batch (2, 3, 5)", (_rand(2, 3, 5, seed=7),))]
    mistakes = {
        "exp overflows: subtract the row maximum before exponentiating":
            lambda x: x.exp() / x.exp().sum(-1, keepdim=True),
        "subtract each row's own maximum, not the maximum of the whole tensor (amax(-1, keepdim=True))":
            lambda x: (x - x.max()).exp() / (x - x.max()).exp().sum(-1, keepdim=True),
        "softmax over dim=1: that is the last dimension only for 2-D input; use dim=-1":
            lambda x: torch.softmax(x, 1),
        "softmax over the wrong axis: normalise along the last dimension (dim=-1)":
            lambda x: torch.softmax(x, 0),
        "forgot to divide by the sum of the exponentials":
            lambda x: (x - x.amax(-1, keepdim=True)).exp(),
    }
    return _check(student, lambda x: functional.softmax(x), cases, mistakes, "softmax")


# --- scaled dot-product attention ------------------------------------------------------

def _attention_ref(q, k, v):
    return functional.scaled_dot_product_attention(q, k, v)[0]


def _attention_wrong(scale=None, dim=-1, weights_only=False):
    def wrong(q, k, v):
        s = q @ k.transpose(-2, -1) * (scale(q.size(-1)) if scale else 1 / math.sqrt(q.size(-1)))
        weights = torch.softmax(s, dim)
        return weights if weights_only else weights @ v
    return wrong


def check_attention(student: Callable) -> Feedback:
    """``student(q, k, v)`` must return scaled dot-product attention's output
    ``softmax(q k^T / sqrt(d_k)) v`` for ``q (..., L, d_k)``, ``k (..., S, d_k)`` and
    ``v (..., S, d_v)`` (chapters 1 and 2; masks come in chapter 5)."""
    q, k, v = _rand(2, 3, 4, seed=1), _rand(2, 5, 4, seed=2), _rand(2, 5, 6, seed=3)
    three = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)  # (L, d_k) = (3, 2)
    values = torch.tensor([[1.0, 0.0], [0.0, 10.0], [5.0, 5.0]], dtype=torch.float64)
    cases = [Case("three tokens, d_k = 2", (three, three.clone(), values)),
             Case("batch, L != S, d_v != d_k", (q, k, v)),
             Case("d_k = 64", (_rand(4, 64, seed=4), _rand(6, 64, seed=5), _rand(6, 3, seed=6)))]
    mistakes = {
        "forgot the 1/sqrt(d_k) scale": _attention_wrong(scale=lambda d: 1.0),
        "divided by d_k instead of sqrt(d_k)": _attention_wrong(scale=lambda d: 1.0 / d),
        "softmax over the wrong axis: each query's row (the keys, dim=-1) must sum to 1":
            _attention_wrong(dim=-2),
        "returned the weights: the output is the weights times the values (weights @ v)":
            _attention_wrong(weights_only=True),
    }
    return _check(student, _attention_ref, cases, mistakes, "attention")


def check_self_attention(student: Callable) -> Feedback:
    """``student(x, W_q, W_k, W_v)`` must return single-head self-attention's output
    ``softmax((x W_q)(x W_k)^T / sqrt(d_k)) (x W_v)`` for ``x (T, d_model)``."""
    x = _rand(5, 6, seed=10)
    W_q, W_k, W_v = _rand(6, 4, seed=11), _rand(6, 4, seed=12), _rand(6, 3, seed=13)
    cases = [Case("T=5, d_model=6, d_k=4, d_v=3", (x, W_q, W_k, W_v)),
             Case("one token", (x[:1], W_q, W_k, W_v))]

    def reference(x, W_q, W_k, W_v):
        return functional.scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v)[0]

    mistakes = {
        "forgot the 1/sqrt(d_k) scale": lambda x, q, k, v: torch.softmax((x @ q) @ (x @ k).T, -1) @ (x @ v),
        "used W_q for the keys as well: keys come from W_k":
            lambda x, q, k, v: reference(x, q, q, v),
        "softmax over the wrong axis: each query's row (dim=-1) must sum to 1":
            lambda x, q, k, v: torch.softmax((x @ q) @ (x @ k).T / math.sqrt(q.size(-1)), 0) @ (x @ v),
    }
    return _check(student, reference, cases, mistakes, "self_attention")


# --- masks -----------------------------------------------------------------------------

def check_causal_mask(student: Callable) -> Feedback:
    """``student(L)`` must return the boolean ``(L, L)`` causal mask, True where j <= i."""
    cases = [Case("L = 1", (1,)), Case("L = 4", (4,)), Case("L = 7", (7,))]
    mistakes = {
        "mask inverted: True must mark the keys a query MAY attend to (j <= i)":
            lambda L: torch.ones(L, L, dtype=torch.bool).triu(1),
        "the diagonal is missing: a token may attend to itself":
            lambda L: torch.ones(L, L, dtype=torch.bool).tril(-1),
        "returned numbers, not booleans: compare, or use dtype=torch.bool":
            lambda L: torch.ones(L, L).tril(),
    }
    return _check(student, lambda L: masks.causal_mask(L), cases, mistakes, "causal_mask")


def check_masked_softmax(student: Callable) -> Feedback:
    """``student(scores, mask)`` must return softmax over the last dimension with the
    keys where ``mask`` is False removed; a row with no allowed key gives zeros."""
    scores = _rand(3, 4, seed=4)
    full = torch.ones(3, 4, dtype=torch.bool)
    some = torch.tensor([[True, False, True, False], [True, True, True, True], [False, True, False, False]])
    none = some.clone()
    none[0] = False
    cases = [Case("nothing masked", (scores, full)), Case("some keys masked", (scores, some)),
             Case("a row with no allowed key", (scores, none))]

    def reference(s, m):
        w = functional.softmax(s.masked_fill(~m, -math.inf))
        return w.masked_fill(~m.any(-1, keepdim=True), 0.0)

    mistakes = {
        "mask inverted: True means 'may attend', so fill where the mask is False":
            lambda s, m: torch.softmax(s.masked_fill(m, -math.inf), -1),
        "used a large negative number (e.g. -1e6): a row with no allowed key becomes uniform":
            lambda s, m: torch.softmax(s.masked_fill(~m, -1e6), -1),
        "a row with no allowed key gives NaN: set such rows to zero":
            lambda s, m: torch.softmax(s.masked_fill(~m, -math.inf), -1),
        "masked after the softmax: the remaining weights no longer sum to 1":
            lambda s, m: torch.softmax(s, -1) * m,
    }
    return _check(student, reference, cases, mistakes, "masked_softmax")


# --- heads -----------------------------------------------------------------------------

def check_split_heads(student: Callable) -> Feedback:
    """``student(x, num_heads)`` must turn ``(B, T, D)``, ``D = H*E``, into ``(B, H, T, E)``,
    head h owning features ``h*E .. (h+1)*E``."""
    cases = [Case("B=1, T=3, 2 heads of 2", (_rand(1, 3, 4, seed=5), 2)),
             Case("B=2, T=5, 4 heads of 3", (_rand(2, 5, 12, seed=6), 4))]
    mistakes = {
        "reshaped straight to (B, H, T, E): view as (B, T, H, E) first, then transpose(1, 2)":
            lambda x, h: x.reshape(x.size(0), h, x.size(1), x.size(2) // h),
        "forgot the transpose: the result is (B, T, H, E)":
            lambda x, h: x.view(x.size(0), x.size(1), h, x.size(2) // h),
        "heads interleaved: head h must own the contiguous features h*E .. (h+1)*E - 1":
            lambda x, h: x.view(x.size(0), x.size(1), x.size(2) // h, h).permute(0, 3, 1, 2),
    }
    return _check(student, heads.split_heads, cases, mistakes, "split_heads")


def check_repeat_kv(student: Callable) -> Feedback:
    """``student(kv, num_groups)`` must repeat each kv head ``num_groups`` times:
    ``(B, Hkv, S, E)`` -> ``(B, Hkv*num_groups, S, E)``, query head h reading kv head
    ``h // num_groups``."""
    cases = [Case("2 kv heads, groups of 3", (_rand(1, 2, 4, 3, seed=7), 3)),
             Case("one kv head (MQA), 4 query heads", (_rand(2, 1, 5, 2, seed=8), 4))]
    mistakes = {
        "heads tiled instead of repeated: kv heads must stay next to their group (0,0,1,1, not 0,1,0,1)":
            lambda kv, g: kv.repeat(1, g, 1, 1),
        "repeated along the positions (dim=2) instead of the heads (dim=1)":
            lambda kv, g: kv.repeat_interleave(g, dim=2),
        "nothing repeated: the result needs Hkv * num_groups heads": lambda kv, g: kv,
    }
    return _check(student, heads.repeat_kv, cases, mistakes, "repeat_kv")


# --- the Transformer block ---------------------------------------------------------------

def _block_parts(seed: int):
    """``(norm1, attn, norm2, mlp)`` of a float64 pre-norm block whose LayerNorms are
    away from their identity start, so a misplaced norm changes the result."""
    with seeded(seed):
        block = TransformerBlock(8, 2, 16).double().eval()
    with torch.no_grad():
        for norm in (block.norm1, block.norm2):
            norm.weight.normal_()
            norm.bias.normal_()
    return block.norm1, block.attn, block.norm2, block.mlp


def _pre_norm_ref(x, norm1, attn, norm2, mlp):
    x = x + attn(norm1(x))[0]
    return x + mlp(norm2(x))


def check_pre_norm_block(student: Callable) -> Feedback:
    """``student(x, norm1, attn, norm2, mlp)`` must compute one pre-norm block on
    ``x (B, T, D)``: ``x + attn(norm1(x))``, then ``+ mlp(norm2(.))``; ``attn(h)``
    returns ``(output, weights)``."""
    cases = [Case("one sentence of 5 tokens", (_rand(1, 5, 8, seed=11), *_block_parts(0))),
             Case("a batch of 3 sentences of 4 tokens", (_rand(3, 4, 8, seed=12), *_block_parts(1)))]
    mistakes = {
        "post-norm: the norm is applied after the residual sum, norm1(x + attn(x)); pre-norm "
        "normalises the sublayer's input and adds its output to x unnormalised":
            lambda x, n1, a, n2, m: n2((h := n1(x + a(x)[0])) + m(h)),
        "no residual connection: each sublayer must add its output to x, not replace it":
            lambda x, n1, a, n2, m: m(n2(a(n1(x))[0])),
        "the residual skips the MLP: the second sublayer must add to the output of the first":
            lambda x, n1, a, n2, m: x + a(n1(x))[0] + m(n2(x)),
        "norm1 used twice: the MLP's input is normalised by norm2":
            lambda x, n1, a, n2, m: (h := x + a(n1(x))[0]) + m(n1(h)),
    }
    return _check(student, _pre_norm_ref, cases, mistakes, "pre_norm_block")


def check_rms_norm(student: Callable) -> Feedback:
    """``student(x, weight, eps)`` must return the RMSNorm of ``x (..., D)`` over its last
    axis: ``x / sqrt(mean(x**2) + eps) * weight`` (Zhang and Sennrich, 2019)."""
    spike = torch.tensor([0.0, 10.0, 0.0, 0.0], dtype=torch.float64)
    cases = [Case("one token (0, 10, 0, 0), gain 1", (spike, torch.ones(4, dtype=torch.float64), 1e-6)),
             Case("a batch of 2 x 3 tokens, D = 8, a learned gain", (_rand(2, 3, 8, seed=21) + 1.0,
                                                                     _rand(8, seed=22), 1e-6)),
             Case("small tokens and a large eps = 0.5", (0.1 * _rand(3, 8, seed=23), _rand(8, seed=24), 0.5))]
    mean_square = lambda x: x.pow(2).mean(-1, keepdim=True)
    mistakes = {
        "the mean was subtracted: that is LayerNorm; RMSNorm divides x itself by its root mean square":
            lambda x, w, e: (x - x.mean(-1, keepdim=True)) / (x.var(-1, unbiased=False, keepdim=True)
                                                              + e).sqrt() * w,
        "divided by the length (the sum of squares), not the root *mean* square":
            lambda x, w, e: x / (x.pow(2).sum(-1, keepdim=True) + e).sqrt() * w,
        "eps belongs inside the square root: sqrt(mean(x**2) + eps)":
            lambda x, w, e: x / (mean_square(x).sqrt() + e) * w,
        "forgot the gain: multiply by weight":
            lambda x, w, e: x / (mean_square(x) + e).sqrt(),
    }
    return _check(student, rms_norm, cases, mistakes, "rms_norm")


# --- positions and tiling ----------------------------------------------------------------

def check_sinusoidal_encoding(student: Callable) -> Feedback:
    """``student(num_positions, d_model)`` must return the ``(num_positions, d_model)`` encoding of
    Vaswani et al. (2017), sin in even and cos in odd dimensions, base 10000."""
    cases = [Case("4 positions, d_model = 4", (4, 4)), Case("50 positions, d_model = 16", (50, 16))]

    def variant(swap=False, exponent=lambda i, d: 2 * i / d, base=10000):
        def wrong(P, d):
            p = torch.arange(P, dtype=torch.float64).unsqueeze(1)
            i = torch.arange(d // 2, dtype=torch.float64)
            angle = p / base ** exponent(i, d)
            first, second = (angle.cos(), angle.sin()) if swap else (angle.sin(), angle.cos())
            return torch.stack((first, second), -1).flatten(-2).float()
        return wrong

    def concatenated(P, d):
        pe = positional.sinusoidal_encoding(P, d)
        return torch.cat((pe[:, 0::2], pe[:, 1::2]), dim=-1)

    mistakes = {"sin and cos swapped: even dimensions hold the sine": variant(swap=True),
                "exponent i/d_model instead of 2i/d_model for pair i": variant(exponent=lambda i, d: i / d),
                "sines and cosines concatenated (all sines, then all cosines), not interleaved":
                    concatenated,
                "base 1000 (a zero missing): the base is 10000": variant(base=1000),
                "base 100000 (a zero too many): the base is 10000": variant(base=100000)}
    return _check(student, positional.sinusoidal_encoding, cases, mistakes, "sinusoidal_encoding")


def _blockwise_softmax(new_max: Callable, rescale: Callable) -> Callable:
    """``fn(scores, block_size)``: the softmax of the row ``scores (S,)`` read block by
    block, where ``new_max(m, block_max)`` gives the next maximum and ``rescale(m, m_new)``
    the factor on the running sum (the typical mistakes of :func:`check_online_softmax`)."""
    def fn(s, b):
        m, running_sum = -math.inf, 0.0
        for start in range(0, s.numel(), b):
            block = s[start:start + b]
            m_new = new_max(m, block.max().item())
            running_sum = running_sum * rescale(m, m_new) + torch.exp(block - m_new).sum().item()
            m = m_new
        return torch.exp(s - m) / running_sum
    return fn


class WholeRowSoftmaxError(RuntimeError):
    """Raised by :func:`check_online_softmax` when a softmax ran over more than one block."""


class _SoftmaxWatch(torch.overrides.TorchFunctionMode):
    """Notes any softmax (``torch.softmax``, ``F.softmax``, ``Tensor.softmax`` ...) whose
    last axis is longer than ``limit``: an online softmax never needs one."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.whole = limit, False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        first = args[0] if args else None
        if ("softmax" in getattr(func, "__name__", "") and isinstance(first, torch.Tensor)
                and first.dim() > 0 and first.shape[-1] > self.limit):
            self.whole = True
        return func(*args, **(kwargs or {}))


def _one_block_at_a_time(fn: Callable) -> Callable:
    """``fn(scores, block_size)``, refused (:class:`WholeRowSoftmaxError`) if it takes a softmax
    over more than ``block_size`` scores at once."""
    def watched(scores, block_size):
        with _SoftmaxWatch(block_size) as watch:
            out = fn(scores, block_size)
        if watch.whole:
            raise WholeRowSoftmaxError(f"a softmax over more than block_size = {block_size} scores at once")
        return out
    return watched


def check_online_softmax(student: Callable) -> Feedback:
    """``student(scores, block_size)`` must return the softmax of the row ``scores (S,)``
    while reading it ``block_size`` entries at a time (one pass, running max and sum).
    A softmax over more than one block at once (``torch.softmax`` of the whole row) is
    refused, even though its numbers are right."""
    six = torch.tensor([1.0, 3.0, 2.0, 5.0, 0.0, 4.0], dtype=torch.float64)
    cases = [Case("6 scores, blocks of 2", (six, 2)),
             Case("7 scores, blocks of 3", (_rand(7, seed=9) * 5, 3)),
             Case("large scores", (torch.tensor([1e4, 0.0, 1e4 - 2, 5.0], dtype=torch.float64), 1))]

    mistakes = {"the running sum is not rescaled by exp(m_old - m_new) when the maximum grows":
                    _blockwise_softmax(max, lambda m, m_new: 1.0),
                "kept the latest block's maximum: m must be the running maximum of every block so far":
                    _blockwise_softmax(lambda m, m_block: m_block, lambda m, m_new: math.exp(m - m_new)),
                "rescaled by exp(m_new - m_old): the factor is exp(m_old - m_new), at most 1":
                    _blockwise_softmax(max, lambda m, m_new: math.exp(m_new - m) if m > -math.inf else 0.0),
                "took the softmax of the whole row: read it block_size entries at a time, keeping a "
                "running maximum and sum":
                    _one_block_at_a_time(lambda s, b: torch.softmax(s, -1))}
    return _check(_one_block_at_a_time(student) if callable(student) else student,
                  lambda s, b: online_softmax(s, b)[0], cases, mistakes, "online_softmax")


# --- linear attention ----------------------------------------------------------------

def check_causal_linear_attention(student: Callable) -> Feedback:
    """``student(q, k, v)`` for ``q, k (L, E)``, ``v (L, Ev)`` must return causal linear
    attention with ``phi(x) = elu(x) + 1``: ``z_i = phi(q_i) U_i / phi(q_i) . zeta_i`` where
    the state is ``U_i = sum_{j <= i} phi(k_j) v_j^T`` and the normaliser
    ``zeta_i = sum_{j <= i} phi(k_j)`` (chapter 8's notation)."""
    cases = [Case("2 tokens", (torch.tensor([[0.5, -1.0], [1.0, 0.0]], dtype=torch.float64),
                               torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64),
                               torch.tensor([[1.0], [3.0]], dtype=torch.float64))),
             Case("9 tokens", (_rand(9, 4, seed=1), _rand(9, 4, seed=2), _rand(9, 3, seed=3))),
             Case("negative inputs", (_rand(6, 4, seed=4) - 2, _rand(6, 4, seed=5) - 2, _rand(6, 2, seed=6)))]

    def weights_then(fn_weights):
        return lambda q, k, v: fn_weights(q, k) @ v

    def unnormalised(q, k, v):
        return (elu_feature_map(q) @ elu_feature_map(k).T).tril() @ v

    def exclusive(q, k, v):  # prefix sums over j < i: each token misses itself
        a = (elu_feature_map(q) @ elu_feature_map(k).T).tril(-1)
        return a @ v / a.sum(-1, keepdim=True).clamp_min(1e-6)

    mistakes = {"not causal: the sums run over every key, not just j <= i":
                    lambda q, k, v: linear_attention(q, k, v)[0],
                "no normaliser: divide by phi(q_i) . zeta_i, the sum of the row's weights": unnormalised,
                "the prefix sums stop before token i (j < i); token i must see itself": exclusive,
                "phi(x) = elu(x) without the + 1: features can be negative":
                    weights_then(lambda q, k: kernel_attention_weights(q, k, torch.nn.functional.elu,
                                                                       is_causal=True)),
                "phi(x) = relu(x) instead of elu(x) + 1":
                    weights_then(lambda q, k: kernel_attention_weights(q, k, "relu", is_causal=True))}
    return _check(student, lambda q, k, v: linear_attention(q, k, v, is_causal=True)[0], cases, mistakes,
                  "causal_linear_attention")


# --- encoder-decoder attention ------------------------------------------------------

def check_general_attention(student: Callable) -> Feedback:
    """``student(u, e, W, mask)`` for a decoder state ``u (B, Dh)``, encoder states
    ``e (B, S, Dh)``, a matrix ``W (Dh, Dh)`` and a mask ``(B, S)`` (True = real source
    word) must return Luong's "general" context vector ``(B, Dh)``: scores
    ``u W e_i^T`` (rows, as in the book), softmax over the source positions that are not
    padding, then the weighted sum of the ``e_i``."""
    def reference(s, h, W, mask):
        scores = torch.einsum("bq,qk,bsk->bs", s, W, h).masked_fill(~mask, -math.inf)
        return (torch.softmax(scores, -1).unsqueeze(-1) * h).sum(1)

    def variant(transpose=False, use_mask=True, dim=-1, normalise=True):
        def fn(s, h, W, mask):
            scores = torch.einsum("bq,qk,bsk->bs", s, W.T if transpose else W, h)
            if use_mask:
                scores = scores.masked_fill(~mask, -math.inf)
            weights = torch.softmax(scores, dim) if normalise else scores.masked_fill(~mask, 0.0)
            return (weights.unsqueeze(-1) * h).sum(1)
        return fn

    mask = torch.tensor([[True, True, True, True], [True, True, False, False], [True, False, False, False]])
    cases = [Case("one sentence, no padding", (_rand(1, 3, seed=1), _rand(1, 4, 3, seed=2),
                                               _rand(3, 3, seed=3), torch.ones(1, 4, dtype=torch.bool))),
             Case("three sentences with padding", (_rand(3, 3, seed=4), _rand(3, 4, 3, seed=5),
                                                   _rand(3, 3, seed=6), mask))]
    mistakes = {"used W transposed: the score is u W e_i^T, i.e. (u W) . e_i": variant(transpose=True),
                "padding not masked: padded positions must get weight 0": variant(use_mask=False),
                "softmax over the batch axis: normalise over the source positions": variant(dim=0),
                "no softmax: the weights must be positive and sum to 1": variant(normalise=False)}
    return _check(student, reference, cases, mistakes, "general_attention")


# --- a pretrained model ----------------------------------------------------------------------

def _row_stochastic(*shape, seed=0):
    return torch.softmax(_rand(*shape, seed=seed) * 2, dim=-1)


def check_attention_rollout(student: Callable) -> Feedback:
    """``student(attentions)`` must return the attention rollout (Abnar and Zuidema, 2020)
    of ``attentions (num_layers, H, T, T)``: per layer ``A = 0.5 * mean_over_heads(W) + 0.5 * I``,
    rows renormalised, then ``R = A_last ... A_2 A_1``, shape ``(T, T)``."""
    cases = [Case("one layer, two heads", (_row_stochastic(1, 2, 3, 3, seed=11),)),
             Case("three layers, four heads", (_row_stochastic(3, 4, 5, 5, seed=12),)),
             Case("six layers, twelve heads", (_row_stochastic(6, 12, 4, 4, seed=13),))]
    eye = lambda a: torch.eye(a.size(-1), dtype=a.dtype)

    def fold(a, later_on_left=True):
        out = a[0]
        for layer in a[1:]:
            out = layer @ out if later_on_left else out @ layer
        return out

    mistakes = {
        "no residual: add the identity, A = 0.5 W + 0.5 I, for the skip connection":
            lambda a: fold(a.mean(1)),
        "layers multiplied in the wrong order: a later layer acts on the left, R = A_2 A_1":
            lambda a: fold(0.5 * a.mean(1) + 0.5 * eye(a), later_on_left=False),
        "heads summed instead of averaged: average the heads, so each row still sums to one":
            lambda a: fold(torch.stack([(x + eye(a)) / (x + eye(a)).sum(-1, keepdim=True)
                                        for x in a.sum(1)])),
        "rolled out each head, then averaged: average the heads first, then multiply":
            lambda a: fold(0.5 * a + 0.5 * eye(a)).mean(0),
    }
    return _check(student, interpret.attention_rollout, cases, mistakes, "attention_rollout")


# --- the delta rule (chapter 12) -----------------------------------------------------

def _delta_loop(correct: bool = True, sign: float = -1.0, read_before_write: bool = False):
    """The delta rule token by token, or one of the typical mistakes."""
    def fn(q, k, v, beta):
        S = torch.zeros(v.size(-1), k.size(-1), dtype=q.dtype)  # (Ev, E)
        out = []
        for t in range(q.size(0)):
            before = S @ q[t]
            error = (S @ k[t] - v[t]) if correct else -v[t]
            S = S + sign * beta[t] * torch.outer(error, k[t])
            out.append(before if read_before_write else S @ q[t])
        return torch.stack(out)
    return fn


def check_delta_rule(student: Callable) -> Feedback:
    """``student(q, k, v, beta)`` for ``q, k (T, E)``, ``v (T, Ev)`` and ``beta (T,)`` must
    return the delta rule's outputs ``(T, Ev)``: from ``S_0 = 0``,
    ``S_t = S_{t-1} - beta_t (S_{t-1} k_t - v_t) k_t^T`` and ``o_t = S_t q_t`` (chapter 12)."""
    def reference(q, k, v, beta):
        return delta_rule_attention(q[None, None], k[None, None], v[None, None], beta[None, None])[0][0, 0]

    unit = torch.nn.functional.normalize
    cases = [Case("2 tokens, one key written twice",
                  (torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64),
                   torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64),
                   torch.tensor([[2.0], [5.0]], dtype=torch.float64),
                   torch.tensor([1.0, 1.0], dtype=torch.float64))),
             Case("8 tokens, E=4, Ev=3", (_rand(8, 4, seed=1), unit(_rand(8, 4, seed=2), dim=-1),
                                          _rand(8, 3, seed=3), torch.rand(8, dtype=torch.float64,
                                          generator=torch.Generator().manual_seed(4))))]
    mistakes = {"no correction: S + beta v k^T only adds, like linear attention; subtract what "
                "the memory already holds for k_t, S k_t, first": _delta_loop(correct=False),
                "the sign of the correction: S - beta (S k - v) k^T moves S k towards v":
                    _delta_loop(sign=1.0),
                "read before write: o_t = S_t q_t uses the state after token t's update":
                    _delta_loop(read_before_write=True)}
    return _check(student, reference, cases, mistakes, "delta_rule")


# --- chapter 11: the Triton kernel's tile step ---------------------------------------

import importlib  # noqa: E402  (the kernel module is loaded on first use: it imports triton)


def _tile_state(seed: int, Bq: int = 16, Bk: int = 16, E: int = 16, shift: float = 0.0):
    """Inputs of one tile step (float32): ``q (Bq, E)``, ``k_t (E, Bk)``, ``v (Bk, E)``, and
    the state after an earlier tile with scores lower by ``shift`` (``m``, ``l``, ``acc``)."""
    g = torch.Generator().manual_seed(seed)
    q, k_t = torch.randn(Bq, E, generator=g), torch.randn(E, Bk, generator=g)
    v = torch.randn(Bk, E, generator=g)
    m = torch.randn(Bq, generator=g) - shift  # base-2 running max of the earlier tile
    l = torch.rand(Bq, generator=g) * 3 + 1
    acc = torch.randn(Bq, E, generator=g)
    return q, k_t, v, m, l, acc


def check_triton_tile_update(student) -> Feedback:
    """``student`` must be a ``@triton.jit`` function ``(q, k_t, v, m, l, acc, allowed,
    qk_scale) -> (m, l, acc)``: one key tile of the online softmax, as
    :func:`attention_core.nn.triton_flash.tile_update` (scores ``q k_t * qk_scale`` in base 2,
    ``-inf`` where not ``allowed``; new running max, ``l`` and ``acc`` rescaled by
    ``exp2(m - m_new)``, plus the tile's row sums and ``p @ v``; a row with no allowed key
    yet stays at ``m = -inf, l = 0, acc = 0``). Each case runs it under Triton's interpreter
    on a CPU, compiled on a GPU of compute capability 8.0+ (where float32 products must be
    exact: ``triton_flash.dot``, not plain ``tl.dot``, which uses TF32): four single tiles,
    then the whole kernel."""
    triton_flash = importlib.import_module("attention_core.nn.triton_flash")  # triton on first use
    if type(student).__name__ not in ("JITFunction", "InterpretedFunction"):
        return Feedback(False, "check_triton_tile_update needs a @triton.jit function, "
                               f"got {_describe(student)}")
    scale = math.log2(math.e) / 4.0  # 1/sqrt(16) in base 2
    first = _tile_state(1)
    fresh = (*first[:3], torch.full((16,), -math.inf), torch.zeros(16), torch.zeros(16, 16))
    causal = torch.ones(16, 16, dtype=torch.bool).tril()
    cases = [("the first tile (m = -inf, l = 0, acc = 0)", fresh, torch.ones(16, 16, dtype=torch.bool)),
             ("a later tile whose scores raise the maximum", _tile_state(2, shift=4.0),
              torch.ones(16, 16, dtype=torch.bool)),
             ("a causal tile on the diagonal", _tile_state(3), causal),
             ("a first tile whose first 4 rows see no key yet (causal, L > S)", fresh,
              torch.ones(16, 16, dtype=torch.bool).tril(-4))]
    hints = {"m": "the new running max is max(m, the row max of this tile's allowed scores)",
             "l": "l must be multiplied by exp2(m - m_new) before adding the row sums of "
                  "p = exp2(s - m_new); "
                  "a row with no allowed key yet keeps m_new = -inf, so subtract 0 there instead "
                  "(exp2(-inf - -inf) is NaN)",
             "acc": "acc must be rescaled by the same exp2(m - m_new), then p @ v added"}
    device = "cpu" if triton_flash.INTERPRETED else "cuda"  # compiled, Triton reads GPU memory only
    for name, inputs, allowed in cases:
        inputs, allowed = tuple(x.to(device) for x in inputs), allowed.to(device)
        expected = triton_flash.run_tile_update(triton_flash.tile_update, *inputs, allowed, scale)
        try:
            got = triton_flash.run_tile_update(student, *inputs, allowed, scale)
        except Exception as error:  # the reader's kernel did not run: say why
            return Feedback(False, f"Case '{name}' failed: your function raised {_error_text(error)}")
        wrong = [what for what, g, e in zip(("m", "l", "acc"), got, expected) if not _same(g, e)]
        if wrong:
            lines = [f"Case '{name}' failed: {', '.join(wrong)} differ."]
            lines += [f"  {what}: expected (first row) {_first_row(e.view(16, -1))[:4]}..., got "
                      f"{_first_row(g.view(16, -1))[:4]}...; {hints[what]}"
                      for what, g, e in zip(("m", "l", "acc"), got, expected) if what in wrong]
            return Feedback(False, "\n".join(lines))
    q, k, v = (torch.randn(1, 2, n, 32, generator=torch.Generator().manual_seed(5)) for n in (40, 70, 70))
    q, k, v = q.to(device), k.to(device), v.to(device)
    try:  # the whole kernel calls the reader's step on tiles of 16 x 32, not 16 x 16
        out, _ = triton_flash.triton_attention_lse(q, k, v, is_causal=True, block_q=16, block_k=32,
                                                   update=student)
    except Exception as error:
        return Feedback(False, "Each tile step is right, but the whole kernel (40 queries, 70 keys, causal, "
                               f"tiles of 16 x 32) raised {_error_text(error)}; does your step assume "
                               "16 x 16 tiles? Take the sizes from the shapes of q, k_t and v.")
    mask = masks.causal_mask(40, 70, device)
    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if not torch.allclose(out, reference, atol=1e-5, rtol=1e-4):
        return Feedback(False, "Each tile step is right, but the whole kernel (40 queries, 70 keys, causal, "
                               f"tiles of 16 x 32) is not: largest error {(out - reference).abs().max():.2g}")
    return Feedback(True, f"All {len(cases) + 1} cases passed: {'; '.join(c[0] for c in cases)}; "
                          "the whole kernel (40 x 70, causal) equals scaled_dot_product_attention.")


# --- a real language model (chapter 14) ----------------------------------------------

def _causal_weights(N: int, B: int, H: int, T: int, seed: int) -> torch.Tensor:
    """``(num_layers, B, H, T, T)`` random causal attention weights: each row sums to one over keys
    ``j <= i``."""
    scores = _rand(N, B, H, T, T, seed=seed) * 2
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    return scores.masked_fill(~causal, -math.inf).softmax(-1)


def check_induction_scores(student: Callable) -> Feedback:
    """``student(attentions, period)`` must return the induction score of every head,
    ``(num_layers, H)``: for ``attentions (num_layers, B, H, T, T)`` of a text that repeats with ``period``,
    the mean over the batch and over queries ``i >= period`` of the weight on key
    ``i - period + 1``, the token after the earlier copy
    (:func:`attention_core.models.llm_probes.induction_scores`)."""
    cases = [Case("one layer, one sequence, period 3", (_causal_weights(1, 1, 2, 6, seed=21), 3)),
             Case("three layers, two sequences, period 5", (_causal_weights(3, 2, 4, 10, seed=22), 5)),
             Case("two layers, a batch of three, period 4, text longer than two copies",
                  (_causal_weights(2, 3, 3, 11, seed=23), 4))]

    def on_key(a, period, offset, start=None):
        T = a.size(-1)
        i = torch.arange(period if start is None else start, T)
        return a[..., i, i - period + offset].mean((1, 3))

    mistakes = {
        "you read the earlier copy of the token itself (key i - period); an induction head looks at "
        "the token that followed it, key i - period + 1": lambda a, p: on_key(a, p, 0),
        "you also averaged queries of the first copy, which have nothing to copy yet: start at "
        "query i = period": lambda a, p: on_key(a, p, 1, start=p - 1),
        "you read key i - 1, the previous token: that is the previous-token score; the induction "
        "target is key i - period + 1": lambda a, p: on_key(a, p, p - 1),
    }
    return _check(student, llm_probes.induction_scores, cases, mistakes, "induction_scores")


def check_interleaved_to_half_split(student: Callable) -> Feedback:
    """``student(weight, num_heads)`` must undo llama.cpp's permutation of a query or key
    projection ``weight (H * E, D)``: in each head, row ``2i`` goes to row ``i`` and row
    ``2i + 1`` to row ``i + E/2``
    (:func:`attention_core.models.llm_probes.interleaved_to_half_split`)."""
    cases = [Case("one head of width 4", (_rand(4, 3, seed=31), 1)),
             Case("three heads of width 8", (_rand(24, 5, seed=32), 3)),
             Case("SmolLM2's keys: 3 heads of width 64, model width 576", (_rand(192, 576, seed=33), 3))]

    mistakes = {
        "you applied llama.cpp's permutation (half-split to interleaved) instead of undoing it":
            lambda w, H: positional.rotary_layout(w, H, "interleaved"),
        "you permuted the rows of the whole matrix as one head: reshape to (num_heads, E/2, 2, D) "
        "so that each head is permuted on its own": lambda w, H: llm_probes.interleaved_to_half_split(w, 1),
        "you put each head's odd rows first; the even rows (2i) come first, at row i, the odd "
        "ones (2i + 1) at row i + E/2":
            lambda w, H: w.reshape(H, -1, 2, w.size(1)).flip(2).transpose(1, 2).reshape(w.shape),
    }
    return _check(student, llm_probes.interleaved_to_half_split, cases, mistakes, "interleaved_to_half_split")


def check_composition_score(student: Callable) -> Feedback:
    """``student(reader, writer)`` must return Elhage et al.'s composition score of
    ``reader (..., n, m)`` and ``writer (..., m, p)``: ``|reader @ writer|_F / (|reader|_F |writer|_F)``,
    one number per matrix of the batch
    (:func:`attention_core.models.circuits.composition_score`)."""
    cases = [Case("two 2 x 2 matrices", (torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.eye(2))),
             Case("a batch of three 5 x 5 pairs", (_rand(3, 5, 5, seed=41), _rand(3, 5, 5, seed=42))),
             Case("rectangular: (4, 6) reads (6, 3)", (_rand(4, 6, seed=43), _rand(6, 3, seed=44)))]

    def fro(m):
        return m.pow(2).sum((-2, -1)).sqrt()

    mistakes = {
        "you multiplied the matrices the other way round: the reader reads what the writer wrote, "
        "reader @ writer": lambda r, w: fro(w @ r) / (fro(r) * fro(w)),
        "you left out the normalisation: divide by the product of the two matrices' Frobenius norms":
            lambda r, w: fro(r @ w),
    }
    return _check(student, circuits.composition_score, cases, mistakes, "composition_score")


def check_copying_score(student: Callable) -> Feedback:
    """``student(circuit)`` must return Elhage et al.'s copying score of square matrices
    ``circuit (..., n, n)``: the sum of the eigenvalues (the trace) over the sum of their absolute
    values, one number per matrix (:func:`attention_core.models.circuits.copying_score`)."""
    cases = [Case("the 3 x 3 identity", (torch.eye(3),)),
             Case("a rotation by 90 degrees", (torch.tensor([[0.0, -1.0], [1.0, 0.0]]),)),
             Case("a batch of four random 6 x 6 matrices", (_rand(4, 6, 6, seed=45),)),
             Case("diag(2, -1, -1)", (torch.diag(torch.tensor([2.0, -1.0, -1.0])),))]

    def eig(m):
        return torch.linalg.eigvals(m)

    mistakes = {
        "you divided by the sum of the absolute values of the real parts; the denominator is the sum "
        "of the eigenvalues' absolute values |lambda| (complex moduli)":
            lambda m: eig(m).real.sum(-1) / eig(m).real.abs().sum(-1),
        "you used the singular values, which are never negative: use the eigenvalues":
            lambda m: torch.ones(m.shape[:-2]),
        "you left out the normalisation: divide the trace by the sum of |lambda|":
            lambda m: eig(m).real.sum(-1),
    }
    return _check(student, circuits.copying_score, cases, mistakes, "copying_score")
