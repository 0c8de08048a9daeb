"""A probe of the whole public API (issue #44): every function and class of
``attention_core.__all__`` and of the ``nn`` modules below is called with a few bad or
edge-case first arguments (a string, an empty tensor, a one-element tensor, a float64
tensor), its other required arguments filled from :data:`FILL` by name.

Each call must end in one of three ways: it returns (an edge case the function handles),
or it raises a ``ValueError``/``TypeError`` whose message names one of the function's
arguments (DESIGN.md: "Bad input gets a ValueError (or TypeError) that names the
argument"). An ``AttributeError``, ``IndexError`` or ``RuntimeError`` from inside torch, or
an error that names no argument, fails the test, unless the name is in :data:`ALLOWED`
with the reason. :data:`NOT_PROBED` lists the names whose required arguments the table
cannot fill, so a new public name is probed or listed. Runs in a few seconds.

``tests/test_bad_inputs.py`` holds the chosen bad input per name, with the message
expected; this probe is the net under it.
"""

from __future__ import annotations

import inspect
import re
import warnings

import pytest
import torch

import attention_core as ac
from attention_core.nn import (
    block,
    delta_rule,
    feedforward,
    flash,
    functional,
    heads,
    kv_cache,
    kv_memory,
    latent_attention,
    linear_attention,
    masks,
    metrics,
    multihead,
    norms,
    paged,
    positional,
    scoring,
    sparse,
)

MODULES = (functional, heads, masks, metrics, norms, feedforward, positional, kv_cache, paged, flash,
           sparse, linear_attention, delta_rule, kv_memory, scoring, block, multihead, latent_attention)


def _t4():
    return torch.randn(1, 2, 4, 4)


FILL = {  # a valid value for a required argument, by its name
    "query": _t4, "key": _t4, "value": _t4, "x": lambda: torch.randn(1, 3, 8),
    "scores": lambda: torch.randn(2, 4, 4), "weights": lambda: torch.rand(1, 2, 4, 4),
    "mask": lambda: masks.causal_mask(4), "beta": lambda: torch.rand(1, 2, 4),
    "qk": lambda: torch.randn(4, 4), "keys": lambda: torch.randn(2, 5, 4),
    "L": lambda: 4, "S": lambda: 4, "window": lambda: 2, "num_heads": lambda: 2, "embed_dim": lambda: 8,
    "ff_dim": lambda: 16, "d_model": lambda: 8, "num_positions": lambda: 4, "stride": lambda: 2,
    "batch_size": lambda: 1, "num_kv_heads": lambda: 2, "head_dim": lambda: 4, "max_len": lambda: 8,
    "dim": lambda: 8, "num_groups": lambda: 2, "lengths": lambda: [3, 2], "seq_len": lambda: 4,
    "k": lambda: 1, "num_layers": lambda: 1, "block_size": lambda: 2, "num_blocks": lambda: 4,
    "kv_latent_dim": lambda: 4, "rope_dim": lambda: 2, "num_buckets": lambda: 2, "num_features": lambda: 4,
    "proj_len": lambda: 2, "in_features": lambda: 8, "num_global": lambda: 1, "num_random": lambda: 1,
    "dilation": lambda: 1, "query_dim": lambda: 4, "key_dim": lambda: 4, "attn_dim": lambda: 4,
    "score": lambda: "dot", "num_sinks": lambda: 0, "layout": lambda: ac.KVLayout(4),
    "cache": lambda: ac.KVCache(1, 2, 4, 8), "seqs": lambda: [0], "bytes_per_element": lambda: 2,
}

BAD_FIRST = {
    "a string": lambda: "x",
    "an empty tensor": lambda: torch.empty(0),
    "a one-element tensor": lambda: torch.ones(1, 1, 1, 1),
    "a float64 tensor": lambda: torch.ones(1, 2, 4, 4, dtype=torch.float64),
}

ALLOWED = {
    "upcast": "maps any tensor or None; internal to the kernels (NO_ROW in test_bad_inputs.py)",
}

NOT_PROBED = {
    "AttentionKernel": "wraps a kernel function; every instance is an entry of ATTENTION_FUNCTIONS",
    "Cache": "a Protocol: no code of its own",
    "HeadCache": "a Protocol: no code of its own",
    "check_new_entries": "a check called by the caches with their own buffers",
    "crop_length": "needs a length that fits the cache; rows in test_bad_inputs.py",
    "linformer_attention": "needs projections that fit the keys; rows in test_bad_inputs.py",
    "ntk_aware_base": "takes numbers, not tensors; rows in test_bad_inputs.py and test_positional_metrics.py",
    "rotate_pairs": "needs cos and sin tables that fit x; rows in test_bad_inputs.py",
    "triton_compiles_here": "takes no argument",
    "triton_mode": "takes no argument",
}


def _targets() -> dict:
    found = {name: getattr(ac, name) for name in ac.__all__
             if inspect.isfunction(getattr(ac, name)) or inspect.isclass(getattr(ac, name))}
    for module in MODULES:
        for name, obj in vars(module).items():
            if (not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
                    and obj.__module__ == module.__name__):
                found.setdefault(name, obj)
    return dict(sorted(found.items()))


TARGETS = _targets()


def _plan(obj):
    """``(signature, names of the required arguments after the first)``, or None when the
    function takes no positional argument or one the table cannot fill."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = [p for p in signature.parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    rest = [p.name for p in params[1:] if p.default is p.empty]
    if not params or any(name not in FILL for name in rest):
        return None
    return signature, rest


def outcome(obj, first) -> tuple[str, str]:
    """``("returned" | "named" | "unnamed" | "crash: Type", message)`` of one call."""
    signature, rest = _plan(obj)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj(first, *(FILL[name]() for name in rest))
    except (ValueError, TypeError) as error:
        message = str(error)
        named = any(re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", message) for n in signature.parameters)
        return ("named" if named else "unnamed"), message
    except Exception as error:  # the probe reports any other kind
        return f"crash: {type(error).__name__}", str(error)
    return "returned", ""


def test_every_public_name_is_probed_or_listed():
    unplanned = {name for name, obj in TARGETS.items() if _plan(obj) is None}
    assert unplanned == set(NOT_PROBED), (
        f"not probed and not listed: {sorted(unplanned - set(NOT_PROBED))}; "
        f"listed but probed or gone: {sorted(set(NOT_PROBED) - unplanned)}")
    assert set(ALLOWED) <= set(TARGETS)


CASES = [(name, what) for name, obj in TARGETS.items() if _plan(obj) is not None for what in BAD_FIRST]


@pytest.mark.parametrize("name, what", CASES, ids=[f"{n}: {w}" for n, w in CASES])
def test_a_bad_first_argument_returns_or_is_named(name, what):
    if name in ALLOWED:
        pytest.skip(ALLOWED[name])
    kind, message = outcome(TARGETS[name], BAD_FIRST[what]())
    assert kind in ("returned", "named"), f"{name}({what}, ...): {kind}: {message[:300]}"
