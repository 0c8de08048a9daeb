"""The Triton FlashAttention kernel (attention_core.nn.triton_flash): output equal to
``torch.nn.functional.scaled_dot_product_attention``, log-sum-exp equal to
``torch.logsumexp`` of the scaled scores, gradients equal to those of the package's eager
attention, over random and ragged shapes, causal masks (square and lower-right aligned), GQA,
head widths 16 to 128 and every dtype.

Without a CUDA GPU of compute capability 8.0+ these tests opt into Triton's interpreter
(``TRITON_INTERPRET=1``, on the CPU) before triton is imported, as chapter 11 does, so they
check the kernel's logic, not its speed; with one, the same tests run compiled, and the
CUDA-only tests at the end too. Shapes are small: the interpreter runs each program in
Python. ``pytest -s`` prints the largest error against SDPA per dtype
(``test_largest_errors_per_dtype``).
"""

import importlib.util
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import attention_core as ac
from attention_core.nn.multihead import MultiHeadAttention
from conftest import make_qkv


def opt_into_the_interpreter() -> None:
    """Set ``TRITON_INTERPRET=1`` where Triton cannot compile, before triton is imported
    (``import attention_core`` never sets it). Triton fixes its mode at its first import, so
    if something imported it first (transformers' models import torch._dynamo, which imports
    triton), the tests cannot switch it: they are skipped, saying what to set."""
    if ac.triton_compiles_here() or ac.triton_mode() == "interpreted":
        return
    if "triton" in sys.modules:  # a skip, not a failure: a collection error would stop the whole run
        pytest.skip("tests/test_triton.py needs Triton's CPU interpreter (no CUDA GPU of compute capability "
                    "8.0+ here), but triton was imported before this module could set TRITON_INTERPRET=1 "
                    "(transformers and torch._dynamo import it); run pytest with TRITON_INTERPRET=1 in the "
                    "environment, e.g. TRITON_INTERPRET=1 pytest tests/", allow_module_level=True)
    os.environ["TRITON_INTERPRET"] = "1"


if importlib.util.find_spec("triton") is not None:
    opt_into_the_interpreter()
triton = pytest.importorskip("triton", reason="not installed (the gpu extra; requirements.txt pins it)")
tl = triton.language
tf = importlib.import_module("attention_core.nn.triton_flash")

DEVICE = "cpu" if tf.INTERPRETED else "cuda"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# Interpreted, tiles are float32 and only the stored results are rounded to float16/bfloat16;
# compiled, P is rounded to the input dtype before P V (as in FlashAttention-2): looser.
TOLERANCE = {torch.float32: (2e-5, 1e-4),
             torch.float16: (1e-3, 1e-3) if tf.INTERPRETED else (4e-3, 4e-3),
             torch.bfloat16: (8e-3, 1.6e-2) if tf.INTERPRETED else (3e-2, 3e-2)}
GRADIENT_TOLERANCE = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}  # of max |grad|


def expand_kv(x, H):
    """``(B, Hkv, S, E)`` -> ``(B, H, S, E)``: query head h reads kv head h // G."""
    return x.repeat_interleave(H // x.size(1), dim=1)


def mask_for(L, S, is_causal, device=DEVICE):
    return ac.causal_mask(L, S, device=device) if is_causal else None


def largest_error(got, expected) -> float:
    return (got.float() - expected.float()).abs().max().item()


def close(dtype, what, got, expected):
    atol, rtol = TOLERANCE[dtype]
    assert_close(got, expected.to(got.dtype), atol=atol, rtol=rtol, msg=lambda m: f"{what} {dtype}: {m}")


def check_forward(B, H, Hkv, L, S, E, Ev, dtype, is_causal, block_q, block_k, seed=0) -> dict:
    """Assert the kernel's output and log-sum-exp equal PyTorch's; return the largest
    errors, ``{"output": ..., "lse": ...}``."""
    q, k, v = make_qkv((B, H), L, S, E, Ev, kv_batch=(B, Hkv), dtype=dtype, device=DEVICE, seed=seed)
    out, lse = tf.triton_attention_lse(q, k, v, is_causal=is_causal, block_q=block_q, block_k=block_k)
    assert out.shape == (B, H, L, Ev) and out.dtype == dtype and lse.shape == (B, H, L)
    qf, kf, vf = q.float(), expand_kv(k.float(), H), expand_kv(v.float(), H)
    # PyTorch's own attention on the same (rounded) inputs, in float32; the lower-right
    # causal mask is passed as a mask (its is_causal is aligned top-left when L != S)
    mask = mask_for(L, S, is_causal)
    expected = F.scaled_dot_product_attention(qf, kf, vf, attn_mask=mask)
    if mask is not None:  # PyTorch gives NaN for a query with no key (L > S), the package 0
        expected = torch.where(mask.any(-1, keepdim=True), expected, 0.0)
    close(dtype, "output", out, expected)
    scores = qf @ kf.transpose(-2, -1) / math.sqrt(E)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    assert_close(lse, torch.logsumexp(scores, -1), atol=1e-5, rtol=1e-5)
    return {"output": largest_error(out, expected), "lse": largest_error(lse, torch.logsumexp(scores, -1))}


# --- forward ------------------------------------------------------------------------------

def random_shapes(n, seed=1):
    """``n`` random problems: (B, H, Hkv, L, S, E, Ev, is_causal), with ragged lengths."""
    g = torch.Generator().manual_seed(seed)
    pick = lambda *options: options[torch.randint(len(options), (1,), generator=g).item()]
    for _ in range(n):
        H = pick(1, 2, 4)
        L, S = (int(torch.randint(1, 70, (1,), generator=g)) for _ in range(2))
        yield (pick(1, 2), H, pick(*[d for d in (1, 2, 4) if H % d == 0]), L, S,
               pick(16, 24, 32, 64), pick(16, 40, 64), bool(pick(True, False)))


@pytest.mark.parametrize("shape", list(random_shapes(4)), ids=str)
def test_random_shapes_equal_sdpa(shape):
    check_forward(*shape[:7], torch.float32, shape[7], 16, 32)


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("L, S", [(33, 33), (20, 45), (45, 20)], ids=["square", "L<S", "L>S"])
def test_ragged_and_causal_lengths(L, S, is_causal):
    """L, S not multiples of the 16 x 16 tiles; causal aligned to the end (lower right), so
    for L > S the first L - S queries see no key: output 0, log-sum-exp -inf."""
    check_forward(1, 2, 1, L, S, 32, 32, torch.float32, is_causal, 16, 16)


@pytest.mark.parametrize("E", [16, 64, 128])
def test_head_widths(E):
    check_forward(1, 2, 2, 40, 40, E, E, torch.float32, True, 32, 32)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_equals_sdpa_in_float32(dtype):
    check_forward(1, 4, 2, 50, 70, 64, 64, dtype, True, 32, 32, seed=3)


def test_a_query_with_no_key_gets_zero_and_minus_infinity(qkv):
    q, k, v = qkv((1, 1), 6, 3, 16, dtype=torch.float32, device=DEVICE, seed=0)
    out, lse = tf.triton_attention_lse(q, k, v, is_causal=True)
    assert (out[..., :3, :] == 0).all() and (lse[..., :3] == -math.inf).all()
    assert lse[..., 3:].isfinite().all()


def test_scale_and_two_dim_inputs(qkv):
    q, k, v = qkv((), 20, 30, 16, 24, dtype=torch.float32, device=DEVICE, seed=0)  # (L, E): one head
    out, _ = ac.ATTENTION_FUNCTIONS["triton"](q, k, v, scale=0.3)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=0.3), atol=1e-5, rtol=1e-5)


def test_non_contiguous_inputs(qkv):
    q, k, v = (x.transpose(1, 2).contiguous().transpose(1, 2)
               for x in qkv((2, 2), 24, E=32, dtype=torch.float32, device=DEVICE, seed=0))
    assert not q.is_contiguous()
    out, _ = tf.triton_attention(q, k, v, block_q=16, block_k=16)
    assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5)


# --- backward -----------------------------------------------------------------------------

GRADIENT_CASES = [(torch.float32, False, 37, 53), (torch.float32, True, 40, 40),
                  (torch.float32, True, 45, 29), (torch.float16, True, 37, 53),
                  (torch.bfloat16, True, 37, 53)]


def check_gradients(dtype, is_causal, L, S) -> dict:
    """dq, dk, dv (GQA: each kv head summed over its group) equal the autograd of the
    package's eager attention in float32 on the same rounded inputs, up to a fraction of
    the gradient's size: the kernel, as FlashAttention-2, reads the output rounded to
    ``dtype`` (in rowsum(dO * O)), where the reference keeps it in float32."""
    H = 4
    q, k, v = make_qkv((1, H), L, S, 32, 48, kv_batch=(1, 2), dtype=dtype, device=DEVICE, seed=5,
                       requires_grad=True)
    g = torch.Generator().manual_seed(6)
    weight = torch.randn(1, H, L, 48, generator=g).to(DEVICE, dtype).float()  # dLoss/dout
    out, _ = tf.triton_attention_lse(q, k, v, is_causal=is_causal, block_q=16, block_k=32)
    (out.float() * weight).sum().backward()
    ref = [x.detach().float().requires_grad_() for x in (q, k, v)]
    expected, _ = ac.scaled_dot_product_attention(ref[0], expand_kv(ref[1], H), expand_kv(ref[2], H),
                                                  attn_mask=mask_for(L, S, is_causal))
    (expected * weight).sum().backward()
    errors = {}
    for name, x, r in zip(("dq", "dk", "dv"), (q, k, v), ref):
        assert x.grad.dtype == dtype and x.grad.isfinite().all()
        errors[name] = largest_error(x.grad, r.grad)
        error = (x.grad.float() - r.grad).abs().max() / r.grad.abs().max()
        assert error < GRADIENT_TOLERANCE[dtype], f"{name} {dtype}: relative error {error:.3g}"
    return errors


@pytest.mark.parametrize("dtype, is_causal, L, S", GRADIENT_CASES, ids=str)
def test_gradients_equal_eager_attention(dtype, is_causal, L, S):
    check_gradients(dtype, is_causal, L, S)


def test_a_layer_trains_with_it():
    """MultiHeadAttention(attention="triton"): the same loss and parameter gradients as eager."""
    torch.manual_seed(0)
    eager = MultiHeadAttention(64, 4, num_kv_heads=2).to(DEVICE)
    fused = MultiHeadAttention(64, 4, num_kv_heads=2, attention="triton").to(DEVICE)
    fused.load_state_dict(eager.state_dict())
    x = torch.randn(2, 30, 64, generator=torch.Generator().manual_seed(1)).to(DEVICE)
    for layer in (eager, fused):
        layer(x, is_causal=True)[0].square().mean().backward()
    for (name, p), p2 in zip(eager.named_parameters(), fused.parameters()):
        assert_close(p2.grad, p.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_the_log_sum_exp_is_not_differentiable(qkv):
    q, k, v = qkv((1, 1), 8, E=16, dtype=torch.float32, device=DEVICE, seed=0, requires_grad=True)
    _, lse = tf.triton_attention_lse(q, k, v)
    assert not lse.requires_grad


def test_a_custom_update_is_used(qkv):
    """``update`` swaps the tile step (chapter 11's exercise): the default passed explicitly
    gives the same output; a step that forgets to rescale gives a different one."""
    q, k, v = qkv((1, 1), 16, 64, 16, dtype=torch.float32, device=DEVICE, seed=0)
    out, _ = tf.triton_attention_lse(q, k, v, block_q=16, block_k=16)
    same, _ = tf.triton_attention_lse(q, k, v, block_q=16, block_k=16, update=tf.tile_update)
    assert torch.equal(out, same)
    wrong, _ = tf.triton_attention_lse(q, k, v, block_q=16, block_k=16, update=no_rescale)
    assert not torch.allclose(wrong, out, atol=1e-3)


@triton.jit
def no_rescale(q, k_t, v, m, l, acc, allowed, qk_scale):
    """The tile step without the rescaling by exp2(m - m_new): wrong once the max grows.
    (Products by ``tf.dot``, exact in float32 compiled too, so each broken step fails only
    for its own mistake, not for TF32 rounding.)"""
    s = tl.where(allowed, tf.dot(q, k_t) * qk_scale, float("-inf"))
    m_new = tl.maximum(m, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    return m_new, l + tl.sum(p, 1), acc + tf.dot(p.to(v.dtype), v)


@triton.jit
def no_guard(q, k_t, v, m, l, acc, allowed, qk_scale):
    """The tile step without the guard for rows that have seen no key: NaN there."""
    s = tl.where(allowed, tf.dot(q, k_t) * qk_scale, float("-inf"))
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.math.exp2(m - m_new)
    p = tl.math.exp2(s - m_new[:, None])
    return m_new, l * alpha + tl.sum(p, 1), acc * alpha[:, None] + tf.dot(p.to(v.dtype), v)


@triton.jit
def square_tiles_only(q, k_t, v, m, l, acc, allowed, qk_scale):
    """The right step, but for 16 x 16 tiles only: a constant of that shape is added to the
    scores, so the whole kernel's 16 x 32 tiles fail inside Triton."""
    s = tl.where(allowed, tf.dot(q, k_t) * qk_scale, float("-inf")) + tl.zeros((16, 16), tl.float32)
    m_new = tl.maximum(m, tl.max(s, 1))
    shift = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.math.exp2(s - shift[:, None])
    alpha = tl.math.exp2(m - shift)
    return m_new, l * alpha + tl.sum(p, 1), acc * alpha[:, None] + tf.dot(p.to(v.dtype), v)


# --- the registry and bad input -----------------------------------------------------------

def test_import_attention_core_does_not_import_triton_or_set_its_mode():
    code = ("import os, sys, attention_core as ac; ac.ATTENTION_FUNCTIONS['triton']; "
            "print('triton' in sys.modules, 'attention_core.nn.triton_flash' in sys.modules, "
            "os.environ.get('TRITON_INTERPRET'))")
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert result.stdout.split() == ["False", "False", "None"]


def test_the_mode_is_read_from_the_environment_never_set(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert ac.triton_mode() == "interpreted"
    monkeypatch.delenv("TRITON_INTERPRET")
    assert ac.triton_mode() == ("compiled" if ac.triton_compiles_here() else None)
    assert "TRITON_INTERPRET" not in os.environ


def test_where_triton_cannot_run_the_kernel_says_what_to_set(monkeypatch, qkv):
    monkeypatch.setattr(tf, "MODE", None)
    q, k, v = qkv((1, 1), 4, E=16, dtype=torch.float32, device=DEVICE, seed=0)
    with pytest.raises(RuntimeError, match=r"TRITON_INTERPRET'\] = '1' before anything imports triton"):
        ac.ATTENTION_FUNCTIONS["triton"](q, k, v)


def test_registered_under_the_kernel_contract(qkv):
    q, k, v = qkv((1, 2), 10, 12, 16, kv_batch=(1, 1), dtype=torch.float32, device=DEVICE, seed=0)
    output, weights = ac.ATTENTION_FUNCTIONS["triton"](q, k, v, is_causal=True)
    assert weights is None
    assert_close(output, tf.triton_attention(q, k, v, is_causal=True)[0])


@pytest.mark.parametrize("kwargs, error, names", [
    ({"attn_mask": torch.ones(4, 4, dtype=torch.bool)}, ValueError, "attn_mask"),
    ({"is_causal": 1}, TypeError, "is_causal"),
    ({"scale": -1.0}, ValueError, "scale"),
    ({"block_q": 24}, ValueError, "block_q"),
    ({"block_k": 8}, ValueError, "block_k"),
])
def test_bad_options_are_named(kwargs, error, names, qkv):
    q, k, v = qkv((1, 1), 4, E=16, dtype=torch.float32, device=DEVICE, seed=0)
    with pytest.raises(error, match=names):
        tf.triton_attention(q, k, v, **kwargs)


def test_bad_inputs_are_named(qkv):
    q, k, v = qkv((1, 4), 4, E=16, dtype=torch.float32, device=DEVICE, seed=0)
    with pytest.raises(TypeError, match="query"):
        tf.triton_attention(q.double(), k.double(), v.double())
    with pytest.raises(ValueError, match="key"):
        tf.triton_attention(q, k[:, :3], v[:, :3])  # 3 kv heads for 4 query heads
    with pytest.raises(ValueError, match="query"):
        tf.triton_attention(q.new_zeros(1, 1, 4, 256), k.new_zeros(1, 1, 4, 256), v.new_zeros(1, 1, 4, 16))
    with pytest.raises(ValueError, match="key"):
        tf.triton_attention(q, k[None], v[None])  # batch dims differ


# --- chapter 11's exercise ----------------------------------------------------------------

def test_one_tile_step_refuses_tensors_on_the_wrong_device():
    """Compiled, Triton reads GPU memory only, interpreted the CPU's: a tensor elsewhere (here
    a meta tensor, which is neither) is named, not passed to Triton to fail unreadably."""
    tile = [torch.zeros(16, 16, device=DEVICE) for _ in range(3)]
    m, l, acc = torch.zeros(16, device=DEVICE), torch.ones(16, device=DEVICE), tile[0]
    allowed = torch.ones(16, 16, dtype=torch.bool, device=DEVICE)
    got = tf.run_tile_update(tf.tile_update, *tile, m, l, acc, allowed, 1.0)
    assert all(x.device.type == DEVICE for x in got)
    with pytest.raises(ValueError, match=r"^l is on meta.*move them with \.to"):
        tf.run_tile_update(tf.tile_update, *tile, m, l.to("meta"), acc, allowed, 1.0)


def test_the_exercise_checker_accepts_the_step_and_names_what_is_wrong():
    from attention_core.book.exercises import check_triton_tile_update
    passed = check_triton_tile_update(tf.tile_update)
    assert passed, passed.message
    failed = check_triton_tile_update(no_rescale)
    assert not failed and "l, acc differ" in failed.message and "exp2(m - m_new)" in failed.message
    assert not check_triton_tile_update(lambda *args: args)  # not a @triton.jit function
    unguarded = check_triton_tile_update(no_guard)
    assert not unguarded and "see no key yet" in unguarded.message and "NaN" in unguarded.message


def test_the_exercise_checker_reports_a_step_that_fails_in_the_whole_kernel():
    """Issue #44: a step right on 16 x 16 tiles only passes the single tiles; the whole
    kernel's 16 x 32 tiles raise inside Triton, which becomes feedback of a readable length."""
    from attention_core.book.exercises import check_triton_tile_update
    feedback = check_triton_tile_update(square_tiles_only)
    assert not feedback and "whole kernel" in feedback.message and "16 x 16" in feedback.message
    assert "make_shape_compatible" in feedback.message  # the cause Triton gives, not its source listing
    assert len(feedback.message) < 900, feedback.message


# --- compiled, on a GPU -------------------------------------------------------------------

needs_gpu = pytest.mark.skipif(
    tf.MODE != "compiled",
    reason="needs a CUDA GPU of compute capability 8.0+ for Triton to compile the kernel; "
           + ("this GPU is older" if torch.cuda.is_available() else "torch sees no CUDA device")
           + " (the tests above ran it under Triton's CPU interpreter)")


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("is_causal", [False, True])
def test_compiled_kernel_equals_pytorch_flash_attention(dtype, is_causal, qkv):
    """At a real size, with the default tiles: forward and gradients against PyTorch's fused
    attention on the same inputs (its float16/bfloat16 kernel)."""
    q, k, v = qkv((2, 8), 1000, E=128, kv_batch=(2, 2), dtype=dtype, device=DEVICE, seed=11,
                   requires_grad=True)
    out, _ = tf.triton_attention(q, k, v, is_causal=is_causal)
    weight = torch.randn_like(out)
    (out * weight).sum().backward()
    ref = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    expected = F.scaled_dot_product_attention(ref[0], ref[1], ref[2], is_causal=is_causal, enable_gqa=True)
    (expected * weight).sum().backward()
    atol = 2e-2 if dtype == torch.float16 else 6e-2
    assert_close(out, expected, atol=atol, rtol=atol)
    for x, r in zip((q, k, v), ref):
        assert_close(x.grad, r.grad, atol=5 * atol, rtol=5 * atol)


@needs_gpu
def test_compiled_kernel_refuses_cpu_tensors():
    q = torch.randn(1, 1, 8, 16)
    with pytest.raises(ValueError, match="query"):
        tf.triton_attention(q, q, q)


def test_largest_errors_per_dtype():
    """Self-contained: one causal GQA problem forward and backward per dtype, asserted as
    above, and the largest error against SDPA (output, lse) and against eager's autograd (dq,
    dk, dv) printed per dtype (run with ``-s`` to see it); every one is finite."""
    for dtype in DTYPES:
        errors = check_forward(1, 4, 2, 37, 53, 32, 48, dtype, True, 16, 32, seed=3)
        errors |= check_gradients(dtype, True, 37, 53)
        assert set(errors) == {"output", "lse", "dq", "dk", "dv"}
        for what, value in errors.items():
            assert math.isfinite(value), f"{what} {dtype}"
            print(f"largest |error| {str(dtype):15} {what:6} {value:.3g}")
