"""One kernel contract: every entry of ATTENTION_FUNCTIONS is called as
fn(query, key, value, attn_mask=None, is_causal=False, scale=None, **options), returns
(output, weights or None), refuses what it cannot honour or does not know, and equals an
independent reference."""

import inspect
import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import attention_core as ac
from attention_core import ATTENTION_FUNCTIONS, sliding_window_mask
from attention_core.nn.attention_functions import AttentionKernel
from attention_core.nn.linear_attention import kernel_attention_weights, pooling_projection

B, H, T, E, Ev, R = 2, 3, 24, 8, 5, 6

# The options each kernel needs (or that make it testable here); shared by the tests below.
OPTIONS = {
    "eager": {},
    "grouped_query": {},
    "flash": {"block_q": 5, "block_k": 7},
    "sliding_window": {"window": 4, "block_size": 5},
    "linear": {},
    "linformer": {"key_projection": pooling_projection(R, T, dtype=torch.float64)},
    "lsh": {"num_buckets": 1, "chunk_size": T},
}


def call(name, query, key, value, **extra):
    fn = ATTENTION_FUNCTIONS[name]
    if name == "lsh":
        key = query  # Reformer shares queries and keys
    return fn(query, key, value, **OPTIONS.get(name, {}), **extra)


def test_the_registry_is_exported_and_names_the_kernels():
    assert "ATTENTION_FUNCTIONS" in ac.__all__ and "eager_attention" in ac.__all__
    assert set(OPTIONS) <= set(ATTENTION_FUNCTIONS)
    for name, fn in ATTENTION_FUNCTIONS.items():
        assert isinstance(fn, ac.AttentionKernel) and fn.name == name


def test_eager_is_one_kernel_everywhere(qkv):
    """The registry's "eager" is what MultiHeadAttention(attention="eager") attends with, for
    MHA and GQA alike: SDPA for as many kv heads as query heads, grouped_query otherwise."""
    assert ac.MultiHeadAttention(8, 2).attention_fn is ATTENTION_FUNCTIONS["eager"]
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=0)
    for a, b in zip(ATTENTION_FUNCTIONS["eager"](q, k, v, is_causal=True),
                    ac.scaled_dot_product_attention(q, k, v, is_causal=True)):
        assert torch.equal(a, b)
    k1, v1 = k[:, :1], v[:, :1]  # one kv head for the H query heads (MQA)
    for a, b in zip(ATTENTION_FUNCTIONS["eager"](q, k1, v1), ac.grouped_query_attention(q, k1, v1)):
        assert torch.equal(a, b)


UNIFORM = ["query", "key", "value", "attn_mask", "is_causal", "scale", "options"]


def test_every_kernel_is_called_with_the_one_signature():
    """Every entry is an AttentionKernel, so every entry is called the same way."""
    assert all(isinstance(kernel, AttentionKernel) for kernel in ATTENTION_FUNCTIONS.values())
    parameters = inspect.signature(AttentionKernel.__call__).parameters
    assert list(parameters) == ["self", *UNIFORM]
    assert [p.default for p in parameters.values()][4:7] == [None, False, None]
    assert parameters["options"].kind is inspect.Parameter.VAR_KEYWORD


@pytest.mark.parametrize("name", sorted(ATTENTION_FUNCTIONS))
def test_every_kernels_function_takes_what_its_entry_passes(name):
    """The function behind each entry takes (query, key, value), every option the entry
    declares and each of attn_mask, is_causal, scale it does not refuse, and requires nothing
    else: what AttentionKernel.__call__ passes it."""
    kernel = ATTENTION_FUNCTIONS[name]
    parameters = inspect.signature(kernel.fn).parameters
    assert list(parameters)[:3] == ["query", "key", "value"]
    refused = {argument for argument, _ in kernel.refuses}
    passed = {"attn_mask", "is_causal", "scale"} - refused | set(kernel.options)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    assert takes_any or passed <= set(parameters), f"{name}: the function lacks {passed - set(parameters)}"
    required = {n for n, p in list(parameters.items())[3:]
                if p.default is inspect.Parameter.empty and p.kind is not inspect.Parameter.VAR_KEYWORD}
    assert required <= set(kernel.required), f"{name}: it requires {required - set(kernel.required)}"


@pytest.mark.parametrize("name", sorted(ATTENTION_FUNCTIONS))
def test_every_kernel_refuses_an_option_it_does_not_know(name):
    """A TypeError naming the kernel and the option and listing the options it knows, before
    any computation (the inputs are not even tensors)."""
    kernel = ATTENTION_FUNCTIONS[name]
    with pytest.raises(TypeError, match=rf"ATTENTION_FUNCTIONS\['{name}'\] takes no option 'windw'") as error:
        kernel(None, None, None, windw=3)
    assert all(option in str(error.value) for option in kernel.options)


@pytest.mark.parametrize("name, missing", [("sliding_window", "window"), ("linformer", "key_projection"),
                                           ("lsh", "num_buckets")])
def test_a_missing_required_option_is_named(name, missing, qkv):
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=0)
    with pytest.raises(TypeError, match=rf"ATTENTION_FUNCTIONS\['{name}'\] needs the option {missing}="):
        ATTENTION_FUNCTIONS[name](q, q, v)


REFUSED = [(name, argument) for name in sorted(ATTENTION_FUNCTIONS)
           for argument, _ in ATTENTION_FUNCTIONS[name].refuses]


def test_the_approximate_kernels_say_what_they_cannot_honour():
    assert {(n, a) for n, a in REFUSED if n != "triton"} == {
        ("linear", "attn_mask"), ("linear", "scale"), ("linformer", "attn_mask"),
        ("linformer", "is_causal"), ("lsh", "attn_mask"), ("lsh", "is_causal"), ("lsh", "scale")}


@pytest.mark.parametrize("name, argument", REFUSED, ids=[f"{n}-{a}" for n, a in REFUSED])
def test_a_kernel_refuses_what_it_cannot_honour(name, argument, qkv):
    """attn_mask, is_causal or scale given to a kernel that cannot honour it: a ValueError
    naming both, never silently ignored."""
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=0)
    value = {"attn_mask": torch.ones(T, T, dtype=torch.bool), "is_causal": True, "scale": 0.5}[argument]
    with pytest.raises(ValueError, match=rf"ATTENTION_FUNCTIONS\['{name}'\] cannot honour {argument}"):
        call(name, q, k, v, **{argument: value})


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_every_kernel_takes_the_three_arguments_by_position(name, qkv):
    """``fn(q, k, v, attn_mask, is_causal, scale)`` by position: the same as by keyword."""
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=0)
    k = q if name == "lsh" else k
    args = (None, False, None) if name == "lsh" else (None, name != "linformer", None)
    by_position = ATTENTION_FUNCTIONS[name](q, k, v, *args, **OPTIONS[name])[0]
    by_keyword = ATTENTION_FUNCTIONS[name](q, k, v, attn_mask=args[0], is_causal=args[1], scale=args[2],
                                           **OPTIONS[name])[0]
    assert torch.equal(by_position, by_keyword)


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_every_kernel_obeys_the_contract(name, qkv):
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=0)
    result = call(name, q, k, v)
    assert isinstance(result, tuple) and len(result) == 2
    output, weights = result
    assert output.shape == (B, H, T, Ev) and output.dtype == q.dtype
    if weights is not None:
        S = R if name == "linformer" else T  # Linformer attends over its R projected positions
        assert weights.shape == (B, H, T, S)
        torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T, dtype=q.dtype))


def reference(name, q, k, v):
    """Each kernel's output computed independently of the package's kernels."""
    if name in ("eager", "grouped_query", "flash"):
        return F.scaled_dot_product_attention(q, k, v)
    if name == "sliding_window":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=sliding_window_mask(T, 4))
    if name == "linear":
        return kernel_attention_weights(q, k, "elu") @ v
    if name == "linformer":
        P = OPTIONS["linformer"]["key_projection"]  # (R, S)
        return F.scaled_dot_product_attention(q, P @ k, P @ v)
    if name == "lsh":  # one bucket, one chunk: dense, unit keys, self only as a last resort
        unit = q / q.norm(dim=-1, keepdim=True)
        return F.scaled_dot_product_attention(q, unit, v, attn_mask=~torch.eye(T, dtype=torch.bool))
    raise KeyError(name)


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_every_kernel_equals_its_reference(name, qkv):
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=0)
    output, _ = call(name, q, k, v)
    assert_close(output, reference(name, q, k, v))


@pytest.mark.parametrize("name", ["eager", "grouped_query", "flash", "sliding_window", "linear"])
def test_causal_kernels_see_no_future(name, qkv):
    """is_causal: changing keys and values after position 10 leaves outputs 0..10 alone."""
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=0)
    out, _ = call(name, q, k, v, is_causal=True)
    k2, v2 = k.clone(), v.clone()
    k2[..., 11:, :], v2[..., 11:, :] = 50.0, -50.0
    assert_close(call(name, q, k2, v2, is_causal=True)[0][..., :11, :], out[..., :11, :])


@pytest.mark.parametrize("name", ["eager", "grouped_query", "flash", "sliding_window"])
def test_exact_kernels_take_an_attn_mask_like_torch(name, qkv):
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=0)
    mask = torch.rand(B, 1, T, T, generator=torch.Generator().manual_seed(1)) > 0.3
    mask |= torch.eye(T, dtype=torch.bool)  # every query keeps a key (PyTorch gives NaN otherwise)
    out, _ = call(name, q, k, v, attn_mask=mask)
    band = sliding_window_mask(T, 4) if name == "sliding_window" else torch.ones(T, T, dtype=torch.bool)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask & band))


@pytest.mark.parametrize("num_kv_heads", [1, 3])
@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"scale": 0.2}, {"attn_mask": "padding"}])
def test_grouped_query_shares_each_kv_head_with_its_group(num_kv_heads, kwargs, qkv):
    """Query head a reads kv head a // G: PyTorch's attention on kv heads repeated in place."""
    q, k, v = qkv((B, 6), T, E=E, Ev=Ev, kv_batch=(B, num_kv_heads), seed=2)
    if kwargs.get("attn_mask") == "padding":
        kwargs = {"attn_mask": ac.padding_mask([T, 5], T).unsqueeze(1)}  # (B, 1, 1, S)
    G = 6 // num_kv_heads
    out, weights = ATTENTION_FUNCTIONS["grouped_query"](q, k, v, **kwargs)
    expected = F.scaled_dot_product_attention(q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1),
                                              **kwargs)
    assert out.shape == (B, 6, T, Ev) and weights.shape == (B, 6, T, T)
    assert_close(out, expected)


def test_eager_attention_is_the_maths_of_the_public_function(qkv):
    q, k, v = qkv((B, H), 7, 11, E=E, Ev=Ev, seed=0)
    mask = torch.rand(7, 11) > 0.5
    mask[2] = False  # a query with no key
    bias = torch.randn(7, 11, dtype=torch.float64)
    for kwargs in ({}, {"attn_mask": mask}, {"attn_mask": bias}, {"is_causal": True}, {"scale": 0.2}):
        maths = ac.eager_attention(q, k, v, **kwargs)
        public = ac.scaled_dot_product_attention(q, k, v, **kwargs)
        for a, b in zip(maths, public):
            assert_close(a, b)
    out, weights = ac.eager_attention(q, k, v, attn_mask=mask)
    assert (weights[..., 2, :] == 0).all() and (out[..., 2, :] == 0).all()  # zeros, not NaN
    assert_close(ac.eager_attention(q, k, v, scale=0.2)[0],
                 F.scaled_dot_product_attention(q, k, v, scale=0.2))


def test_flash_lse_is_the_logsumexp_of_the_scores(qkv):
    from attention_core.nn.flash import flash_attention_lse

    q, k, v = qkv((B, H), 9, 13, E=E, Ev=Ev, seed=0)
    out, lse = flash_attention_lse(q, k, v, block_q=4, block_k=5)
    assert_close(out, F.scaled_dot_product_attention(q, k, v))
    assert_close(lse, torch.logsumexp(q @ k.transpose(-2, -1) / math.sqrt(E), -1))


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_every_kernel_rejects_mismatched_inputs(name, qkv):
    q, k, v = qkv((B, H), T, E=E, Ev=Ev, seed=0)
    with pytest.raises(ValueError, match="query and key must have the same last dim E"):
        ATTENTION_FUNCTIONS[name](q, k[..., :3], v, **OPTIONS[name])


@pytest.mark.parametrize("call_, error, message", [
    (lambda: ac.repeat_kv(torch.randn(1, 2, 3, 4), 0), ValueError, "num_groups must be >= 1, got 0"),
    (lambda: ac.repeat_kv(torch.randn(1, 2, 3, 4), 1.5), TypeError, "num_groups must be an int, got float"),
    (lambda: ac.repeat_kv(torch.randn(2, 3, 4), 2), ValueError,
     r"x must have 4 dims \(B, Hkv, S, E\), got shape \(2, 3, 4\)"),
    (lambda: ac.repeat_kv([1.0], 2), TypeError, "x must be a torch.Tensor, got list"),
    (lambda: ac.split_heads(torch.randn(2, 3, 4), 0), ValueError, "num_heads must be >= 1, got 0"),
    (lambda: ac.split_heads(torch.randn(2, 3, 4), True), TypeError, "num_heads must be an int, got bool"),
    (lambda: ac.split_heads(torch.randn(2, 3, 4), 3), ValueError, "not divisible by num_heads=3"),
    (lambda: ac.split_heads(torch.randn(3, 4), 2), ValueError,
     r"x must have 3 dims \(B, T, D\), got shape \(3, 4\)"),
    (lambda: ac.merge_heads(torch.randn(2, 3, 4)), ValueError,
     r"x must have 4 dims \(B, H, T, E\), got shape \(2, 3, 4\)"),
    (lambda: ac.merge_heads(None), TypeError, "x must be a torch.Tensor, got NoneType"),
], ids=["repeat_kv-0", "repeat_kv-float", "repeat_kv-rank", "repeat_kv-list", "split-0", "split-bool",
        "split-divide", "split-rank", "merge-rank", "merge-none"])
def test_head_helpers_name_bad_ranks_and_counts(call_, error, message):
    with pytest.raises(error, match=message):
        call_()


def test_head_helpers_reshape_any_dtype():
    x = torch.arange(24).view(1, 2, 12)
    assert torch.equal(ac.merge_heads(ac.split_heads(x, 3)), x)
    assert ac.repeat_kv(x.view(1, 2, 3, 4), 2).shape == (1, 4, 3, 4)


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_grouped_query_with_a_value_width_other_than_the_key_width(num_kv_heads, masked):
    """E != Ev on both paths: the stacked-groups one (no mask) and the repeated one (mask)."""
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 4, 3, 8, generator=g, dtype=torch.float64)
    k = torch.randn(2, num_kv_heads, 6, 8, generator=g, dtype=torch.float64)
    v = torch.randn(2, num_kv_heads, 6, 3, generator=g, dtype=torch.float64)
    mask = torch.rand(3, 6, generator=g) > 0.3 if masked else None
    out, weights = ATTENTION_FUNCTIONS["grouped_query"](q, k, v, attn_mask=mask, is_causal=True)
    G = 4 // num_kv_heads
    full = ac.causal_mask(3, 6) if mask is None else mask & ac.causal_mask(3, 6)
    expected = F.scaled_dot_product_attention(q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1),
                                              attn_mask=full)
    assert out.shape == (2, 4, 3, 3) and weights.shape == (2, 4, 3, 6)
    assert_close(out, expected.nan_to_num())  # PyTorch gives NaN for a row with no key
