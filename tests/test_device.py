"""Tensors follow their inputs (issue #15): helpers that make tensors take ``device=``
(and ``dtype=``), kernels build their internal tensors on the inputs' device, and a
mask on another device is refused with a ``ValueError`` that names it.

Without a GPU, the ``meta`` device stands in for one: a meta tensor has a shape, a
dtype and a device but no data, so the kernels run on it in no time. A tensor made on
the CPU inside a kernel then meets meta tensors; some PyTorch operations refuse that
(``Tensor on device cpu is not on the expected device meta``) but others (``@``,
in-place ``masked_fill_``) quietly accept it, so :class:`OneDevice` watches every
operation and records any that mixes devices. Explicit moves (``.to(device)``) are
allowed: they are how a seeded helper draws on the CPU and hands the result over.

The CUDA tests at the end run only where a GPU is present (Colab's GPU runtime, CI
with a GPU); they compare the kernels with PyTorch's on the GPU.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import attention_core as ac
from attention_core.models.tiny_transformer import TinyTransformer
from attention_core.nn import flash, heads, kv_cache, masks, multihead, positional, sparse
from attention_core.nn import linear_attention as linear

META = torch.device("meta")
CPU = torch.device("cpu")
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# Operations that move a tensor from one device to another on purpose.
TRANSFERS = {"aten::_to_copy", "aten::copy_", "aten::to", "aten::_copy_from",
             "aten::_copy_from_and_resize", "aten::lift_fresh"}


class OneDevice(TorchDispatchMode):
    """Records every operation whose tensors lie on more than one device (CPU scalars,
    0-dim tensors that PyTorch lets meet any device, excepted)."""

    def __init__(self):
        super().__init__()
        self.mixed: list[tuple[str, set]] = []
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func._schema.name
        self.ops.append(name)
        if name not in TRANSFERS:
            devices = {t.device for t in tree_flatten((args, kwargs, out))[0]
                       if isinstance(t, torch.Tensor) and not (t.dim() == 0 and t.device == CPU)}
            if len(devices) > 1:
                self.mixed.append((name, devices))
        return out


def tensors(result) -> list[torch.Tensor]:
    """Every tensor in a result (a tensor, a tuple, a list; None entries skipped)."""
    return [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)]


def run_on(device, fn, *args, **kwargs):
    """Run ``fn``; fail if an operation mixed devices or a result is elsewhere."""
    with OneDevice() as watch:
        result = fn(*args, **kwargs)
    assert watch.mixed == [], f"operations that mixed devices: {watch.mixed}"
    found = tensors(result)
    assert found, "the function returned no tensor"
    for t in found:
        assert t.device == torch.device(device), f"a result is on {t.device}, not {device}"
    return result


def causal_kw(fn) -> str:
    """``is_causal`` (the house name for kernels) or ``causal`` (before the rename)."""
    return "is_causal" if "is_causal" in inspect.signature(fn).parameters else "causal"


def first(result) -> torch.Tensor:
    """The output of a kernel, whether it returns ``output`` or ``(output, weights)``."""
    return result[0] if isinstance(result, tuple) else result


def test_one_device_catches_a_cpu_tensor_inside_a_meta_computation():
    # The watch itself: "@" with a CPU operand raises nothing on meta, but is recorded.
    with OneDevice() as watch:
        torch.randn(3, 3, device="meta") @ torch.randn(3, 3)
    assert watch.mixed and watch.mixed[0][1] == {META, CPU}


# --- helpers that make tensors: device= ----------------------------------------------

HELPERS = {
    "causal_mask": lambda d: masks.causal_mask(5, 7, device=d),
    "padding_mask": lambda d: masks.padding_mask([2, 5], 5, device=d),
    "sliding_window_mask": lambda d: masks.sliding_window_mask(6, 2, causal=True, device=d),
    "dilated_window_mask": lambda d: sparse.dilated_window_mask(8, 2, 2, device=d),
    "global_mask": lambda d: sparse.global_mask(8, 2, device=d),
    "random_mask": lambda d: sparse.random_mask(8, 3, seed=1, device=d),
    "strided_mask": lambda d: sparse.strided_mask(8, 3, device=d),
    "fixed_mask": lambda d: sparse.fixed_mask(8, 4, device=d),
    "bigbird_mask": lambda d: sparse.bigbird_mask(8, 2, 1, 2, device=d),
    "alibi_slopes": lambda d: positional.alibi_slopes(6, device=d),
    "alibi_bias": lambda d: positional.alibi_bias(4, 3, 5, device=d),
    "sinusoidal_encoding": lambda d: positional.sinusoidal_encoding(6, 8, device=d),
    "sinusoidal_shift_matrix": lambda d: positional.sinusoidal_shift_matrix(2, 8, device=d),
    "random_features": lambda d: linear.random_features(6, 4, device=d),
    "random_features, iid": lambda d: linear.random_features(6, 4, orthogonal=False, device=d),
    "sequence_projection": lambda d: linear.sequence_projection(3, 8, device=d),
    "pooling_projection": lambda d: linear.pooling_projection(3, 8, device=d),
    "KVCache": lambda d: (lambda c: (c.keys, c.values))(kv_cache.KVCache(1, 2, 4, 8, device=d)),
    "MultiHeadAttention": lambda d: list(multihead.MultiHeadAttention(8, 2, 1, device=d).parameters()),
}


@pytest.mark.parametrize("name", sorted(HELPERS))
def test_helper_builds_on_the_device_it_is_given(name):
    run_on(META, HELPERS[name], "meta")


@pytest.mark.parametrize("name", sorted(HELPERS))
def test_helper_defaults_to_the_cpu(name):
    for t in tensors(HELPERS[name](None)):
        assert t.device == CPU


def test_padding_mask_defaults_to_the_device_of_lengths():
    lengths = torch.tensor([1, 4], device="meta")
    mask = run_on(META, masks.padding_mask, lengths, 4)
    assert mask.shape == (2, 1, 4) and mask.dtype == torch.bool
    # and device= still wins over the lengths' device
    assert masks.padding_mask(torch.tensor([1, 4]), 4, device="meta").device == META


def test_seeded_helpers_draw_the_same_values_whatever_the_device_asked():
    # Drawn on the CPU and then moved: asking for float64 gives the same numbers as
    # float32, rounded; the same seed gives the same mask.
    assert torch.allclose(linear.random_features(6, 4, seed=3, dtype=torch.float64).float(),
                          linear.random_features(6, 4, seed=3))
    assert torch.equal(sparse.random_mask(8, 3, seed=5, device="cpu"), sparse.random_mask(8, 3, seed=5))
    assert not torch.equal(sparse.random_mask(8, 3, seed=5), sparse.random_mask(8, 3, seed=6))


# --- helpers that make float tensors: dtype= -----------------------------------------

FLOAT_HELPERS = {
    "alibi_slopes": lambda dt: positional.alibi_slopes(6, dtype=dt),
    "alibi_bias": lambda dt: positional.alibi_bias(4, 3, 5, dtype=dt),
    "sinusoidal_encoding": lambda dt: positional.sinusoidal_encoding(6, 8, dtype=dt),
    "sinusoidal_shift_matrix": lambda dt: positional.sinusoidal_shift_matrix(2, 8, dtype=dt),
    "random_features": lambda dt: linear.random_features(6, 4, dtype=dt),
    "sequence_projection": lambda dt: linear.sequence_projection(3, 8, dtype=dt),
    "pooling_projection": lambda dt: linear.pooling_projection(3, 8, dtype=dt),
    "KVCache": lambda dt: kv_cache.KVCache(1, 2, 4, 8, dtype=dt).keys,
    "MultiHeadAttention": lambda dt: multihead.MultiHeadAttention(8, 2, dtype=dt).q_proj.weight,
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", sorted(FLOAT_HELPERS))
def test_helper_returns_the_dtype_it_is_given(name, dtype):
    assert FLOAT_HELPERS[name](dtype).dtype == dtype


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", ["alibi_slopes", "alibi_bias", "sinusoidal_encoding",
                                  "sinusoidal_shift_matrix", "random_features",
                                  "sequence_projection", "pooling_projection"])
def test_helper_values_do_not_depend_on_the_dtype_beyond_rounding(name, dtype):
    reference = FLOAT_HELPERS[name](torch.float64)
    tol = {torch.float64: 1e-12, torch.bfloat16: 1e-2}[dtype]
    got = FLOAT_HELPERS[name](dtype).double()
    assert torch.allclose(got, reference, rtol=tol, atol=tol)
    assert torch.allclose(FLOAT_HELPERS[name](torch.float32).double(), reference, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("call", [
    lambda: positional.sinusoidal_encoding(4, 4, dtype=torch.int64),
    lambda: positional.sinusoidal_shift_matrix(1, 4, dtype=torch.bool),
    lambda: positional.alibi_slopes(4, dtype=torch.int32),
    lambda: positional.alibi_bias(4, 3, dtype=torch.long),
])
def test_helper_refuses_a_dtype_that_is_not_floating_point(call):
    with pytest.raises(TypeError, match="dtype"):
        call()


# --- kernels on the meta device ------------------------------------------------------

def _lsh(qk, value):
    """Reformer's LSH attention, shared queries and keys: ``(qk, qk, value)`` in the
    kernel contract, ``(qk, value)`` before it."""
    shared = "qk" in inspect.signature(sparse.lsh_attention).parameters
    args = (qk, value) if shared else (qk, qk, value)
    return sparse.lsh_attention(*args, 4, chunk_size=4, num_hashes=2)


def _kernels():
    swa = sparse.sliding_window_attention
    lin = linear.linear_attention
    return {
        "sdpa": lambda q, k, v: ac.scaled_dot_product_attention(q, k, v),
        "sdpa, is_causal": lambda q, k, v: ac.scaled_dot_product_attention(q, k, v, is_causal=True),
        "sdpa, is_causal, fewer queries": lambda q, k, v: ac.scaled_dot_product_attention(
            q[..., 5:, :], k, v, is_causal=True),
        "sdpa, bool mask": lambda q, k, v: ac.scaled_dot_product_attention(
            q, k, v, attn_mask=masks.sliding_window_mask(8, 3, device=q.device)),
        "sdpa, padding mask": lambda q, k, v: ac.scaled_dot_product_attention(
            q, k, v, attn_mask=masks.padding_mask([3, 8], 8, device=q.device).unsqueeze(1)),
        "sdpa, alibi": lambda q, k, v: ac.scaled_dot_product_attention(
            q, k, v, attn_mask=positional.alibi_bias(3, 8, device=q.device, dtype=q.dtype),
            is_causal=True),
        "flash": lambda q, k, v: flash.flash_attention(q, k, v, block_q=3, block_k=3),
        "flash, is_causal": lambda q, k, v: flash.flash_attention(q, k, v, is_causal=True,
                                                                  block_q=3, block_k=3),
        "flash, mask": lambda q, k, v: flash.flash_attention(
            q, k, v, attn_mask=masks.causal_mask(8, device=q.device), block_q=3, block_k=3),
        "sliding window": lambda q, k, v: swa(q, k, v, 3),
        "sliding window, causal": lambda q, k, v: swa(q, k, v, 3, **{causal_kw(swa): True}),
        "linear": lambda q, k, v: lin(q, k, v),
        "linear, causal": lambda q, k, v: lin(q, k, v, chunk_size=3, **{causal_kw(lin): True}),
        "linear, performer": lambda q, k, v: lin(q, k, v,
                                                 feature_map=linear.performer_feature_map(6, 4)),
        "kernel weights, causal": lambda q, k, v: linear.kernel_attention_weights(
            q, k, **{causal_kw(linear.kernel_attention_weights): True}),
        "linformer": lambda q, k, v: linear.linformer_attention(
            q, k, v, linear.sequence_projection(3, 8, device=q.device)),
        "lsh buckets": lambda q, k, v: sparse.lsh_buckets(q, 4, num_hashes=2),
        "lsh": lambda q, k, v: _lsh(q, v),
        "grouped query": lambda q, k, v: heads.grouped_query_attention(
            q.repeat(1, 2, 1, 1), k, v, is_causal=True),
        "apply_rotary": lambda q, k, v: positional.apply_rotary(q),
        "apply_rotary, positions": lambda q, k, v: positional.apply_rotary(
            q, torch.arange(4, 12, device=q.device)),
    }


KERNELS = _kernels()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_runs_on_the_inputs_device(name, qkv):
    q, k, v = qkv((2, 3), 8, E=4, dtype=torch.float32, device="meta", seed=0)
    run_on(META, KERNELS[name], q, k, v)


@pytest.mark.parametrize("name", ["sdpa, is_causal", "sdpa, alibi", "flash, is_causal"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_kernel_runs_on_meta_in_low_precision(name, dtype, qkv):
    q, k, v = qkv((2, 3), 8, E=4, dtype=dtype, device="meta", seed=0)
    out = first(run_on(META, KERNELS[name], q, k, v))
    assert out.dtype == dtype


def test_kernels_on_the_cpu_agree_with_pytorch_so_the_meta_runs_test_real_code(qkv):
    # The same lambdas on CPU tensors give PyTorch's answer: the meta runs above
    # exercised the code paths that compute, not some shortcut.
    q, k, v = qkv((2, 3), 8, E=4, dtype=torch.float32, seed=0)
    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    for name in ("sdpa, is_causal", "flash, is_causal"):
        assert torch.allclose(first(KERNELS[name](q, k, v)), reference, atol=1e-5), name


def test_online_softmax_skipped_on_meta():
    # online_softmax walks a row with Python floats (``.item()``): data-dependent
    # control flow that a meta tensor, which has no values, cannot run. Its result
    # still follows the input on a real device.
    with pytest.raises((RuntimeError, NotImplementedError)):
        flash.online_softmax(torch.randn(6, device="meta"), 2)
    weights, _ = flash.online_softmax(torch.randn(6), 2)
    assert weights.device == CPU


def test_multihead_attention_runs_on_meta():
    for mha in (multihead.MultiHeadAttention(12, 3, 1, rope=True).to("meta"),
                multihead.MultiHeadAttention(12, 4, 2, device="meta")):
        x = torch.randn(2, 5, 12, device="meta")
        out, weights = run_on(META, mha, x, is_causal=True)
        assert out.shape == (2, 5, 12) and weights.shape == (2, mha.num_heads, 5, 5)
        mask = masks.padding_mask([3, 5], 5, device="meta").unsqueeze(1)  # (B, 1, 1, S)
        run_on(META, mha, x, attn_mask=mask)


def test_multihead_attention_with_a_kv_cache_on_meta():
    mha = multihead.MultiHeadAttention(16, 4, 2, rope=True, device="meta")
    cache = kv_cache.KVCache(2, 2, 4, 8, device="meta")
    run_on(META, mha, torch.randn(2, 5, 16, device="meta"), is_causal=True, kv_cache=cache)
    _, weights = run_on(META, mha, torch.randn(2, 1, 16, device="meta"), is_causal=True,
                        kv_cache=cache)
    assert weights.shape == (2, 4, 1, 6)


def test_new_cache_and_a_flash_layer_run_on_meta():
    for attention in ("eager", "flash"):
        mha = multihead.MultiHeadAttention(16, 4, 2, rope=True, device="meta", attention=attention)
        cache = mha.new_cache(2, 8)
        assert cache.keys.device == META and cache.keys.dtype == mha.k_proj.weight.dtype
        run_on(META, mha, torch.randn(2, 5, 16, device="meta"), is_causal=True, kv_cache=cache)
        out, _ = run_on(META, mha, torch.randn(2, 1, 16, device="meta"), is_causal=True, kv_cache=cache)
        assert out.shape == (2, 1, 16) and cache.length == 6
        cache.reset()
        assert cache.length == 0 and cache.keys.device == META


def test_from_torch_and_mean_pool_keep_the_device_and_dtype():
    ref = torch.nn.MultiheadAttention(8, 2, batch_first=True, device="meta", dtype=torch.float64)
    ours = multihead.MultiHeadAttention.from_torch(ref)
    for p in ours.parameters():
        assert p.device == META and p.dtype == torch.float64
    gqa = multihead.mean_pool_kv_heads(ours, 1)
    for p in gqa.parameters():
        assert p.device == META and p.dtype == torch.float64


@pytest.mark.parametrize("positional_kind", ["learned", "sinusoidal", "rope", "alibi", "none"])
def test_tiny_transformer_runs_on_meta(positional_kind):
    model = TinyTransformer(12, 8, 16, 2, positional=positional_kind).to("meta")
    x = torch.randint(1, 12, (3, 8), device="meta")
    logits, weights = run_on(META, model, x)
    assert logits.shape[:2] == (3, 8) and weights[0].shape == (3, 2, 8, 8)


# --- a mask (or input) on another device: a clear ValueError, before any work --------

@pytest.mark.parametrize("kernel", [
    lambda q, k, v, m: ac.scaled_dot_product_attention(q, k, v, attn_mask=m),
    lambda q, k, v, m: ac.scaled_dot_product_attention(q.half(), k.half(), v.half(), attn_mask=m),
    lambda q, k, v, m: flash.flash_attention(q, k, v, attn_mask=m),
    lambda q, k, v, m: heads.grouped_query_attention(q, k, v, attn_mask=m),
], ids=["sdpa", "sdpa float16", "flash", "grouped query"])
@pytest.mark.parametrize("mask", [lambda: masks.causal_mask(8, device="meta"),
                                  lambda: positional.alibi_bias(3, 8, device="meta")],
                         ids=["bool", "float"])
def test_mask_on_another_device_is_refused(kernel, mask, qkv):
    q, k, v = qkv((2, 3), 8, E=4, dtype=torch.float32, seed=0)
    with pytest.raises(ValueError, match="attn_mask") as error:
        kernel(q, k, v, mask())
    assert "meta" in str(error.value) and "cpu" in str(error.value)


def test_multihead_attention_refuses_a_mask_or_input_on_another_device_before_projecting():
    mha = multihead.MultiHeadAttention(8, 2)
    x = torch.randn(2, 5, 8)
    with OneDevice() as watch, pytest.raises(ValueError, match="attn_mask") as error:
        mha(x, attn_mask=masks.causal_mask(5, device="meta"))
    assert "meta" in str(error.value) and "cpu" in str(error.value)
    assert not [op for op in watch.ops if "mm" in op or "linear" in op], watch.ops  # no projection
    with pytest.raises(ValueError, match="query") as error:
        mha.to("meta")(x)
    assert "meta" in str(error.value) and "cpu" in str(error.value)


def test_query_key_value_on_different_devices_are_refused(qkv):
    q, k, v = qkv((2, 3), 8, E=4, dtype=torch.float32, seed=0)
    with pytest.raises(ValueError, match="one device") as error:
        ac.scaled_dot_product_attention(q, k.to("meta"), v)
    assert "meta" in str(error.value) and "cpu" in str(error.value)


def test_kv_cache_refuses_keys_on_another_device():
    cache = kv_cache.KVCache(1, 2, 4, 8)  # on the CPU
    k = torch.randn(1, 2, 3, 4, device="meta")
    with pytest.raises(ValueError, match="k is on device meta") as error:
        cache.append(k, k)
    assert "cpu" in str(error.value)
    assert cache.length == 0  # nothing was written


def test_linformer_refuses_a_projection_on_another_device(qkv):
    q, k, v = qkv((2, 3), 8, E=4, dtype=torch.float32, seed=0)
    projection = linear.sequence_projection(3, 8, device="meta")
    with pytest.raises(ValueError, match=r"key_projection|E ") as error:
        linear.linformer_attention(q, k, v, projection)
    assert "meta" in str(error.value) and "cpu" in str(error.value)


def test_encoder_decoder_attention_refuses_a_mask_on_another_device():
    from attention_core.nn import scoring

    score = scoring.make_score("dot", 4, 4)
    query, keys = torch.randn(2, 4), torch.randn(2, 5, 4)
    with pytest.raises(ValueError, match="mask is on device meta") as error:
        scoring.attend(score, query, keys, torch.ones(2, 5, dtype=torch.bool, device="meta"))
    assert "cpu" in str(error.value)


def test_seq2seq_batches_go_where_they_are_asked():
    from attention_core.models import seq2seq

    batch = seq2seq.encode_batch(["a b c", "d e"], device="meta")
    for t in (batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out):
        assert t.device == META
    cpu_batch = seq2seq.encode_batch(["a b c", "d e"])
    assert cpu_batch.src.device == CPU and cpu_batch.src.shape == batch.src.shape


def test_performer_features_can_be_placed_once():
    phi = linear.performer_feature_map(6, 4, device="meta")
    q = torch.randn(2, 8, 4, device="meta")
    features = run_on(META, phi, q)
    assert features.shape == (2, 8, 6)


# --- on a GPU -------------------------------------------------------------------------

TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}
LOW_PRECISION_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@cuda
@pytest.mark.parametrize("dtype", LOW_PRECISION_DTYPES)
@pytest.mark.parametrize("name", ["sdpa", "sdpa, is_causal", "sdpa, is_causal, fewer queries",
                                  "sdpa, bool mask", "sdpa, alibi", "flash", "flash, is_causal",
                                  "flash, mask", "sliding window", "sliding window, causal"])
def test_kernels_match_pytorch_on_cuda(name, dtype, qkv):
    q_all, k, v = qkv((2, 3), 8, E=4, dtype=dtype, device="cuda", seed=0)
    L, S = (3 if "fewer" in name else 8), 8
    q = q_all[..., -L:, :]  # "fewer queries" drops the first 5 (S - L) itself
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if "alibi" in name:
        bias = positional.alibi_bias(3, L, S, device="cuda", dtype=dtype)
        expected = sdpa(q, k, v, attn_mask=bias + torch.where(
            masks.causal_mask(L, S, device="cuda"), 0.0, float("-inf")).to(dtype))
    elif "bool mask" in name:
        expected = sdpa(q, k, v, attn_mask=masks.sliding_window_mask(8, 3, device="cuda"))
    elif "sliding window" in name:
        expected = sdpa(q, k, v, attn_mask=masks.sliding_window_mask(8, 3, causal="causal" in name,
                                                                     device="cuda"))
    elif "mask" in name or "is_causal" in name:  # every causal case here has L == S or
        # queries aligned to the end, which PyTorch's is_causal does not do for L < S
        expected = sdpa(q, k, v, attn_mask=masks.causal_mask(L, S, device="cuda"))
    else:
        expected = sdpa(q, k, v)
    got = first(run_on(q.device, KERNELS[name], q_all, k, v))
    assert got.dtype == dtype
    tol = TOLERANCE[dtype]
    assert torch.allclose(got.float(), expected.float(), atol=tol, rtol=tol)


@cuda
@pytest.mark.parametrize("dtype", LOW_PRECISION_DTYPES)
def test_multihead_attention_from_torch_matches_on_cuda(dtype):
    ref = torch.nn.MultiheadAttention(16, 4, batch_first=True).to(device="cuda", dtype=dtype).eval()
    ours = multihead.MultiHeadAttention.from_torch(ref).eval()
    for p in ours.parameters():
        assert p.is_cuda and p.dtype == dtype
    x = torch.randn(2, 6, 16, device="cuda", dtype=dtype)
    mask = masks.causal_mask(6, device="cuda")
    with torch.no_grad():
        expected, _ = ref(x, x, x, attn_mask=~mask, need_weights=False)  # PyTorch: True = blocked
        got, weights = ours(x, attn_mask=mask)
    assert got.is_cuda and weights.is_cuda
    tol = TOLERANCE[dtype]
    assert torch.allclose(got.float(), expected.float(), atol=tol, rtol=tol)


@cuda
@pytest.mark.parametrize("dtype", LOW_PRECISION_DTYPES)
def test_cached_decoding_with_flash_matches_eager_on_cuda(dtype):
    torch.manual_seed(0)
    eager = multihead.MultiHeadAttention(16, 4, 2, rope=True, device="cuda", dtype=dtype).eval()
    flash_layer = multihead.MultiHeadAttention(16, 4, 2, rope=True, device="cuda", dtype=dtype,
                                               attention="flash").eval()
    flash_layer.load_state_dict(eager.state_dict())
    cache = flash_layer.new_cache(2, 6)
    assert cache.keys.is_cuda and cache.keys.dtype == dtype
    x = torch.randn(2, 6, 16, device="cuda", dtype=dtype)
    with torch.no_grad():
        full, _ = eager(x, is_causal=True)
        steps = [flash_layer(x[:, t:t + 1], is_causal=True, kv_cache=cache)[0] for t in range(6)]
        steps = torch.cat(steps, dim=1)
    tol = TOLERANCE[dtype]
    assert steps.is_cuda and torch.allclose(steps.float(), full.float(), atol=tol, rtol=tol)


@cuda
def test_helpers_follow_cuda_inputs():
    x = torch.randn(2, 3, 8, 4, device="cuda")
    assert masks.padding_mask(torch.tensor([2, 8], device="cuda"), 8).is_cuda
    assert positional.apply_rotary(x).is_cuda
    assert linear.performer_feature_map(6, 4)(x).is_cuda
    assert sparse.lsh_buckets(x, 4).is_cuda
    assert positional.alibi_bias(3, 8, device="cuda").is_cuda
    assert positional.sinusoidal_encoding(8, 4, device="cuda").is_cuda


@cuda
def test_seeded_helpers_give_the_same_values_on_cuda():
    assert torch.equal(linear.random_features(8, 4, seed=2, device="cuda").cpu(),
                       linear.random_features(8, 4, seed=2))
    assert torch.equal(linear.sequence_projection(3, 8, seed=2, device="cuda").cpu(),
                       linear.sequence_projection(3, 8, seed=2))
    assert torch.equal(sparse.random_mask(8, 3, seed=2, device="cuda").cpu(),
                       sparse.random_mask(8, 3, seed=2))
    x = torch.randn(2, 8, 4)
    assert torch.equal(sparse.lsh_buckets(x.cuda(), 4, seed=2).cpu(), sparse.lsh_buckets(x, 4, seed=2))


@cuda
def test_models_run_on_cuda():
    from attention_core.models import seq2seq

    model = seq2seq.Seq2Seq("luong", "general").cuda().eval()
    assert len(model.translate(["a b c"])[0]) <= 4  # greedy decoding on the GPU
    assert 0.0 <= seq2seq.alignment_accuracy(model, ["a b c", "d e"]) <= 1.0
    for kind in ("learned", "sinusoidal", "rope", "alibi"):
        tiny = TinyTransformer(12, 8, 16, 2, positional=kind).cuda()
        logits, _ = run_on(torch.device("cuda", torch.cuda.current_device()), tiny,
                           torch.randint(1, 12, (3, 8), device="cuda"))
        assert torch.isfinite(logits).all()


@cuda
def test_a_cpu_mask_with_cuda_inputs_is_a_clear_error(qkv):
    q, k, v = qkv((2, 3), 8, E=4, dtype=torch.float32, device="cuda", seed=0)
    with pytest.raises(ValueError, match="attn_mask") as error:
        ac.scaled_dot_product_attention(q, k, v, attn_mask=masks.causal_mask(8))
    assert "cuda" in str(error.value) and "cpu" in str(error.value)
