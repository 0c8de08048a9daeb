"""Every checker accepts a correct solution and rejects typical wrong ones by name."""

import math

import pytest
import torch

from attention_core import sinusoidal_encoding
from attention_core.book import exercises as ex
from attention_core.models import llm_probes


def correct_softmax(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def attention(scale=lambda d: 1 / math.sqrt(d), dim=-1, weights_only=False):
    def fn(q, k, v):
        w = torch.softmax(q @ k.transpose(-2, -1) * scale(q.size(-1)), dim)
        return w if weights_only else w @ v
    return fn


def masked_softmax(fill=-math.inf, invert=False, zero_dead=True, after=False):
    def fn(s, m):
        if after:
            return torch.softmax(s, -1) * m
        w = torch.softmax(s.masked_fill(m if invert else ~m, fill), -1)
        return w.masked_fill(~m.any(-1, keepdim=True), 0.0) if zero_dead else w
    return fn


def sinusoidal(swap=False, half=False):
    def fn(P, d):
        p = torch.arange(P, dtype=torch.float64).unsqueeze(1)
        i = torch.arange(d // 2, dtype=torch.float64)
        angle = p / 10000 ** ((i if half else 2 * i) / d)
        a, b = (angle.cos(), angle.sin()) if swap else (angle.sin(), angle.cos())
        return torch.stack((a, b), -1).flatten(-2).float()
    return fn


def online(rescale=True, running_max=True, inverted=False):
    def fn(s, b):
        m, running_sum = -math.inf, 0.0
        for start in range(0, s.numel(), b):
            block = s[start:start + b]
            new = max(m, block.max().item()) if running_max else block.max().item()
            if not rescale:
                factor = 1.0
            elif inverted:
                factor = math.exp(new - m) if m > -math.inf else 0.0
            else:
                factor = math.exp(m - new)
            running_sum = running_sum * factor + torch.exp(block - new).sum().item()
            m = new
        return torch.exp(s - m) / running_sum
    return fn



def causal_linear(phi=lambda x: torch.nn.functional.elu(x) + 1, normalise=True, causal=True,
                  include_self=True):
    """A loop over tokens with running sums, written independently of the package."""
    def fn(q, k, v):
        S = torch.zeros(q.size(-1), v.size(-1), dtype=q.dtype)
        z = torch.zeros(q.size(-1), dtype=q.dtype)
        if not causal:
            S, z = phi(k).T @ v, phi(k).sum(0)
        out = []
        for i in range(q.size(0)):
            if causal and include_self:
                S, z = S + torch.outer(phi(k[i]), v[i]), z + phi(k[i])
            num, den = phi(q[i]) @ S, phi(q[i]) @ z
            out.append(num / den.clamp_min(1e-6) if normalise else num)
            if causal and not include_self:
                S, z = S + torch.outer(phi(k[i]), v[i]), z + phi(k[i])
        return torch.stack(out)
    return fn


def delta_rule(correct=True, sign=-1.0, read_before_write=False):
    """The delta rule with one (E,) key at a time, written independently of the package."""
    def fn(q, k, v, beta):
        S = torch.zeros(v.size(-1), k.size(-1), dtype=q.dtype)
        out = []
        for t in range(q.size(0)):
            old = S @ q[t]
            remembered = S @ k[t] if correct else torch.zeros_like(v[t])
            S = S + sign * beta[t] * (remembered - v[t]).unsqueeze(1) * k[t].unsqueeze(0)
            out.append(old if read_before_write else S @ q[t])
        return torch.stack(out)
    return fn


def general_attention(transpose=False, mask=True, dim=-1, softmax=True):
    """Luong's general score with a loop over sentences, written independently."""
    def fn(s, h, W, m):
        out = []
        for b in range(s.size(0)):
            scores = h[b] @ ((W.T if transpose else W).T @ s[b])  # (S,): h_i . W^T s = s^T W h_i
            if mask:
                scores = torch.where(m[b], scores, torch.tensor(-math.inf, dtype=scores.dtype))
            out.append(scores)
        scores = torch.stack(out)
        weights = torch.softmax(scores, dim) if softmax else torch.where(m, scores, 0.0)
        return torch.einsum("bs,bsk->bk", weights, h)
    return fn

def rollout(residual=True, order="right", heads="mean"):
    def fn(a):
        eye = torch.eye(a.size(-1), dtype=a.dtype)
        if heads == "per head":
            layers = [0.5 * x + 0.5 * eye for x in a]  # (H, T, T) each
        else:
            w = a.sum(1) if heads == "sum" else a.mean(1)
            layers = [(x + eye) / (x + eye).sum(-1, keepdim=True) if residual else x for x in w]
        out = layers[0]
        for layer in layers[1:]:
            out = layer @ out if order == "right" else out @ layer
        return out.mean(0) if heads == "per head" else out
    return fn



def _on_key(a, period, offset, start=None):
    """Chapter 14's induction score with the key offset or the first query changed."""
    i = torch.arange(period if start is None else start, a.size(-1))
    return a[..., i, i - period + offset].mean((1, 3))


CHECKS = [
    (ex.check_softmax, correct_softmax, [
        (lambda x: x.exp() / x.exp().sum(-1, keepdim=True), "subtract the row maximum"),
        (lambda x: torch.softmax(x, 0), "wrong axis"),
        (lambda x: (x - x.amax(-1, keepdim=True)).exp(), "divide by the sum"),
        (lambda x: (x - x.max()).exp() / (x - x.max()).exp().sum(-1, keepdim=True), "own maximum"),
        (lambda x: torch.softmax(x, 1), "dim=1"),
    ]),
    (ex.check_attention, attention(), [
        (attention(scale=lambda d: 1.0), "forgot the 1/sqrt(d_k) scale"),
        (attention(scale=lambda d: 1.0 / d), "divided by d_k instead of sqrt(d_k)"),
        (attention(dim=-2), "wrong axis"),
        (attention(weights_only=True), "returned the weights"),
    ]),
    (ex.check_self_attention,
     lambda x, q, k, v: torch.softmax((x @ q) @ (x @ k).T / math.sqrt(q.size(-1)), -1) @ (x @ v), [
         (lambda x, q, k, v: torch.softmax((x @ q) @ (x @ k).T, -1) @ (x @ v),
          "forgot the 1/sqrt(d_k) scale"),
         (lambda x, q, k, v: torch.softmax((x @ q) @ (x @ q).T / 2, -1) @ (x @ v),
          "used W_q for the keys"),
         (lambda x, q, k, v: torch.softmax((x @ q) @ (x @ k).T / 2, 0) @ (x @ v), "wrong axis"),
     ]),
    (ex.check_causal_mask, lambda L: torch.ones(L, L, dtype=torch.bool).tril(), [
        (lambda L: torch.ones(L, L, dtype=torch.bool).triu(1), "mask inverted"),
        (lambda L: torch.ones(L, L, dtype=torch.bool).tril(-1), "diagonal is missing"),
        (lambda L: torch.ones(L, L).tril(), "not booleans"),
    ]),
    (ex.check_masked_softmax, masked_softmax(), [
        (masked_softmax(invert=True, zero_dead=False), "mask inverted"),
        (masked_softmax(fill=-1e6, zero_dead=False), "uniform"),
        (masked_softmax(zero_dead=False), "gives NaN"),
        (masked_softmax(after=True), "masked after the softmax"),
    ]),
    (ex.check_split_heads, lambda x, h: x.view(x.size(0), x.size(1), h, -1).transpose(1, 2), [
        (lambda x, h: x.reshape(x.size(0), h, x.size(1), -1), "then transpose(1, 2)"),
        (lambda x, h: x.view(x.size(0), x.size(1), h, -1), "forgot the transpose"),
        (lambda x, h: x.view(x.size(0), x.size(1), -1, h).permute(0, 3, 1, 2), "heads interleaved"),
    ]),
    (ex.check_repeat_kv, lambda kv, g: kv.repeat_interleave(g, dim=1), [
        (lambda kv, g: kv.repeat(1, g, 1, 1), "tiled instead of repeated"),
        (lambda kv, g: kv.repeat_interleave(g, dim=2), "along the positions"),
        (lambda kv, g: kv, "nothing repeated"),
    ]),
    (ex.check_pre_norm_block, lambda x, n1, a, n2, m: (h := x + a(n1(x))[0]) + m(n2(h)), [
        (lambda x, n1, a, n2, m: n2((h := n1(x + a(x)[0])) + m(h)), "post-norm"),
        (lambda x, n1, a, n2, m: m(n2(a(n1(x))[0])), "no residual"),
        (lambda x, n1, a, n2, m: (h := x + a(n1(x))[0]) + m(n1(h)), "norm1 used twice"),
    ]),
    (ex.check_sinusoidal_encoding, sinusoidal(), [
        (sinusoidal(swap=True), "swapped"),
        (sinusoidal(half=True), "exponent i/d_model"),
        (lambda P, d: torch.cat((sinusoidal()(P, d)[:, 0::2], sinusoidal()(P, d)[:, 1::2]), -1),
         "concatenated"),
        (lambda P, d: sinusoidal_encoding(P, d, base=1000.0), "base 1000"),
    ]),
    (ex.check_online_softmax, online(), [
        (online(rescale=False), "not rescaled"),
        (online(running_max=False), "running maximum"),
        (online(inverted=True), "exp(m_old - m_new), at most 1"),
        (lambda s, b: torch.softmax(s, -1), "softmax of the whole row"),
        (lambda s, b: torch.nn.functional.softmax(s.unsqueeze(0), dim=-1)[0], "softmax of the whole row"),
    ]),
    (ex.check_general_attention, general_attention(), [
        (general_attention(transpose=True), "W transposed"),
        (general_attention(mask=False), "padding not masked"),
        (general_attention(dim=0), "batch axis"),
        (general_attention(softmax=False), "no softmax"),
    ]),
    (ex.check_causal_linear_attention, causal_linear(), [
        (causal_linear(causal=False), "not causal"),
        (causal_linear(normalise=False), "no normaliser"),
        (causal_linear(include_self=False), "stop before token i"),
        (causal_linear(phi=torch.nn.functional.elu), "without the + 1"),
        (causal_linear(phi=torch.relu), "relu"),
    ]),
    (ex.check_delta_rule, delta_rule(), [
        (delta_rule(correct=False), "no correction"),
        (delta_rule(sign=1.0), "the sign of the correction"),
        (delta_rule(read_before_write=True), "read before write"),
    ]),
    (ex.check_attention_rollout, rollout(), [
        (rollout(residual=False), "no residual"),
        (rollout(order="wrong"), "wrong order"),
        (rollout(heads="sum"), "heads summed"),
        (rollout(heads="per head"), "then averaged"),
    ]),
    (ex.check_induction_scores, llm_probes.induction_scores, [
        (lambda a, p: _on_key(a, p, 0), "the earlier copy of the token itself"),
        (lambda a, p: _on_key(a, p, 1, start=p - 1), "start at query i = period"),
        (lambda a, p: _on_key(a, p, p - 1), "the previous-token score"),
    ]),
    (ex.check_interleaved_to_half_split, llm_probes.interleaved_to_half_split, [
        (lambda w, H: w.reshape(H, 2, w.size(0) // H // 2, -1).transpose(1, 2).reshape(w.shape),
         "instead of undoing it"),
        (lambda w, H: llm_probes.interleaved_to_half_split(w, 1), "as one head"),
        (lambda w, H: w.reshape(H, -1, 2, w.size(1)).flip(2).transpose(1, 2).reshape(w.shape),
         "odd rows first"),
    ]),

]


@pytest.mark.parametrize("checker,correct,wrongs", CHECKS, ids=[c[0].__name__ for c in CHECKS])
def test_checker_accepts_correct_and_names_each_mistake(checker, correct, wrongs):
    verdict = checker(correct)
    assert verdict and verdict.passed, verdict.message
    assert verdict.message.startswith("All ")
    for wrong, hint in wrongs:
        verdict = checker(wrong)
        assert not verdict, f"{checker.__name__} accepted a wrong solution ({hint})"
        assert "Case '" in verdict.message and "expected:" in verdict.message
        assert hint in verdict.message, verdict.message


def test_checker_reports_exceptions_and_non_functions():
    def broken(x):
        raise RuntimeError("not written yet")
    verdict = ex.check_softmax(broken)
    assert not verdict and "raised RuntimeError: not written yet" in verdict.message
    assert "expected: tensor of shape (3,)" in verdict.message
    assert "needs a function" in ex.check_softmax(42).message


class UnprintableError(Exception):
    def __str__(self):
        raise RuntimeError("cannot print me")


def test_any_exception_becomes_feedback_of_a_readable_length():
    """Issue #44: an exception whose str() raises, or whose message runs to pages (a Triton
    traceback), is feedback, not a crash or a wall of text."""
    def odd(x):
        raise UnprintableError()

    def long(x):
        raise ValueError("x" * 5000)
    verdict = ex.check_softmax(odd)
    assert not verdict and "raised UnprintableError (its message could not be printed)" in verdict.message
    verdict = ex.check_softmax(long)
    assert not verdict and "x" * 400 + "…" in verdict.message and len(verdict.message) < 1000


def test_every_checker_knows_at_least_three_typical_mistakes():
    for checker, _, wrongs in CHECKS:
        assert len(wrongs) >= 3, checker.__name__


def _on_meta(fn):
    """A right answer returned on another device (the ``meta`` device stands for a Colab
    student's CUDA tensor on this CPU-only machine)."""
    return lambda *args: fn(*args).to("meta")


@pytest.mark.parametrize("checker,correct,wrongs", CHECKS, ids=[c[0].__name__ for c in CHECKS])
def test_checker_explains_another_device_dtype_tuple_or_type_without_a_traceback(checker, correct, wrongs):
    answers = {
        "device": (_on_meta(correct), "is on device meta"),
        "tuple": (lambda *a: (correct(*a), None), "return only the"),
        "list": (lambda *a: correct(*a).tolist(), "return a torch.Tensor"),
        "none": (lambda *a: None, "is a `return` missing?"),
        "dtype": (lambda *a: correct(*a).to(torch.float16), "dtype torch.float16, expected"),
    }
    for kind, (answer, hint) in answers.items():
        verdict = checker(answer)
        assert isinstance(verdict, ex.Feedback) and not verdict, (kind, verdict)
        assert "what differs: " in verdict.message and hint in verdict.message, (kind, verdict.message)


def test_a_right_answer_in_a_tuple_or_another_dtype_is_told_its_values_are_right():
    verdict = ex.check_attention(lambda q, k, v: (attention()(q, k, v), None))
    assert "(its first element is right)" in verdict.message
    verdict = ex.check_causal_mask(lambda L: torch.ones(L, L).tril())
    assert "The values are right." in verdict.message and "expected torch.bool" in verdict.message


def test_a_cuda_answer_is_explained(monkeypatch):
    """A CUDA tensor cannot be built here; one whose device reads as cuda and whose values
    cannot be read takes the same path as on a Colab GPU."""
    class Elsewhere(torch.Tensor):
        @property
        def device(self):
            return torch.device("cuda", 0)

    def student(x):
        return correct_softmax(x).as_subclass(Elsewhere)

    monkeypatch.setattr(ex, "_right_values", lambda got, expected: False)
    verdict = ex.check_softmax(student)
    assert not verdict and "on device cuda:0, the inputs on cpu" in verdict.message
    assert "result.to('cpu')" in verdict.message
