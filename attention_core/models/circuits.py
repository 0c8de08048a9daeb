"""Chapter 15: the circuits of a real language model (SmolLM2-135M, a
:class:`~attention_core.models.smollm.SmolLM`): what the residual stream predicts after each
block, which heads write a logit, what changes when one head's activations are replaced, and
what the weights alone say about how heads compose and whether they copy.

* :func:`logit_lens`: the residual stream after the embedding and after every block, read
  through the final norm and the LM head (nostalgebraist, 2020, "interpreting GPT: the logit
  lens").
* :func:`direct_logit_attribution`: how much the embedding, each head and each MLP add
  directly to one logit, the final norm's scale frozen (Elhage et al., 2021, "A Mathematical
  Framework for Transformer Circuits").
* :func:`head_activations`, :func:`patching`, :func:`patch_heads`: activation patching of
  heads' outputs, queries, keys or values (Wang et al., 2022, "Interpretability in the wild";
  Heimersheim & Nanda, 2024, "How to use and interpret activation patching"), with zero, mean
  or resample ablation (Zhang & Nanda, 2023, "Towards best practices of activation
  patching").
* :func:`last_position_patching`: every head patched in turn at the last position only, the
  patching map of a task whose answer is the next token (Wang et al., 2022), one forward pass
  a layer through a KV cache.
* :func:`composition_score`, :func:`composition_scores`, :func:`random_composition_scores`:
  Elhage et al.'s Q-, K- and V-composition between heads of different layers, and what
  random matrices of the same shapes score.
* :func:`copying_score`, :func:`ov_copying_scores`, :func:`random_ov_copying_scores`: the
  eigenvalues of each head's OV circuit from token to logit, positive for a head that copies
  (Elhage et al., 2021; Olsson et al., 2022, "In-context learning and induction heads"), and
  what random head weights read through the same embeddings score.

Shape legend: B batch, T tokens, D model width, H query heads, Hkv key/value heads, G query
heads per key/value head (H / Hkv), E head dim; ``num_layers`` layers and ``vocab_size``
tokens, written by their names. A head is named by ``(layer, head)``, both counted from 0
(SmolLM2's "layer 19, head 7" counted from 1 is ``(18, 6)``).

The matrices follow Elhage et al. with column vectors: a head reads the normalised stream
``x`` and writes ``W_O W_V x`` (its OV circuit, ``D x D``); query ``x_q`` scores key ``x_k``
by ``x_q^T W_Q^T W_K x_k`` (its QK circuit ``W_QK = W_Q^T W_K``). RMSNorm is handled the
same way everywhere: its gain is folded into the matrices that read the normalised stream
(``W_Q diag(g)``, ``W_K diag(g)``, ``W_V diag(g)``, and the final norm's into the LM head),
and its ``1/rms``, one positive number per position, is left out of the weight-only scores.
"""

from __future__ import annotations

import contextlib

import torch

from ..nn._checks import broadcasts_to, check_positive_int, check_tensor, check_tensor_size, check_token_ids
from .smollm import SmolLM

__all__ = [
    "SITES", "COMPOSITIONS", "logit_lens", "direct_logit_attribution", "head_activations", "patching",
    "patch_heads", "last_position_patching", "composition_score", "composition_scores",
    "random_composition_scores", "copying_score",
    "ov_copying_scores", "random_ov_copying_scores",
]

SITES = ("output", "query", "key", "value")
"""Where :func:`patching` replaces a head's activations: its output (its slice of the input of
``out_proj``, before ``W_O`` mixes the heads), or its query, key or value as projected (before
RoPE rotates queries and keys; the rotation depends only on the position, which patching keeps)."""

COMPOSITIONS = ("q", "k", "v")
"""The kinds of composition of :func:`composition_scores`: a later head's queries (Q), keys (K)
or values (V) read what an earlier head wrote."""


# --- checks -----------------------------------------------------------------------------------

def _check_model(model) -> None:
    if not isinstance(model, SmolLM):
        raise TypeError(f"model must be a SmolLM (load_smollm2 or SmolLM.from_llama), "
                        f"got {type(model).__name__}")


def _check_ids(model: SmolLM, name: str, ids, like: torch.Tensor | None = None) -> None:
    """Raise unless ``ids`` are token ids ``(B, T)`` for ``model`` (the shape of ``like`` if given)."""
    c = model.config
    check_token_ids(name, ids, c.vocab_size, model.embed_tokens.weight.device, c.context_length)
    if like is not None and ids.shape != like.shape:
        raise ValueError(f"{name} must have the shape of input_ids {tuple(like.shape)}, "
                         f"got {tuple(ids.shape)}")


def _check_heads(heads, num_layers: int, num_heads: int) -> dict[int, list[int]]:
    """``heads``, a non-empty list of ``(layer, head)`` pairs, as ``{layer: [heads]}``."""
    pairs = isinstance(heads, (list, tuple)) and all(
        isinstance(h, (list, tuple)) and len(h) == 2
        and all(isinstance(i, int) and not isinstance(i, bool) for i in h) for h in heads)
    if not pairs:
        raise TypeError(f"heads must be a list of (layer, head) pairs of ints, got {heads!r}")
    if not heads:
        raise ValueError("heads must name at least one (layer, head), got none")
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        if not (0 <= layer < num_layers and 0 <= head < num_heads):
            raise ValueError(f"heads: ({layer}, {head}) is outside {num_layers} layers x {num_heads} heads")
        by_layer.setdefault(layer, []).append(head)
    return by_layer


def _site_heads(model: SmolLM, site: str) -> int:
    """The number of heads at ``site``: H for outputs and queries, Hkv for keys and values."""
    if site not in SITES:
        raise ValueError(f"site must be one of {list(SITES)}, got {site!r}")
    return model.config.num_kv_heads if site in ("key", "value") else model.config.num_heads


def _check_source(model: SmolLM, source, site: str, input_ids: torch.Tensor | None = None) -> None:
    """Raise unless ``source`` is ``"zero"``, ``"mean"`` or a tensor ``(num_layers, B, H or Hkv, T, E)``
    whose B and T are 1 or those of ``input_ids``."""
    if isinstance(source, str):
        if source not in ("zero", "mean"):
            raise ValueError(f"source must be 'zero', 'mean' or a tensor of activations, got {source!r}")
        return
    check_tensor("source", source, min_dim=5)
    c = model.config
    heads = _site_heads(model, site)
    B, T = (None, None) if input_ids is None else input_ids.shape
    shape = (c.num_layers, B or source.size(1), heads, T or source.size(3), c.head_dim)
    if source.dim() != 5 or not broadcasts_to(source.shape, shape) or source.size(0) != c.num_layers \
            or source.size(2) != heads:
        raise ValueError(f"source must be (num_layers, B, {'Hkv' if heads != c.num_heads else 'H'}, T, E) "
                         f"= {shape} for site {site!r} (B and T may be 1), as head_activations gives; "
                         f"got {tuple(source.shape)}")
    if source.device != model.embed_tokens.weight.device:
        raise ValueError(f"source is on {source.device}, the model on {model.embed_tokens.weight.device}")


# --- one forward pass, recorded -----------------------------------------------------------------

@contextlib.contextmanager
def _hooked(hooks):
    """Within the block, each ``(module, pre, fn)`` of ``hooks`` sees the module's input (``pre``)
    or output as a tensor, and may return a tensor to replace it (None keeps it)."""
    def pre_hook(fn):
        return lambda module, args: None if (y := fn(args[0])) is None else (y, *args[1:])

    def post_hook(fn):
        return lambda module, args, out: fn(out)

    handles = [module.register_forward_pre_hook(pre_hook(fn)) if pre else module.register_forward_hook(
        post_hook(fn)) for module, pre, fn in hooks]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _trace(model: SmolLM, input_ids: torch.Tensor) -> dict[str, list[torch.Tensor]]:
    """One forward pass, recording ``"stream"``: the residual stream after the embedding and after
    each block, ``num_layers + 1`` tensors ``(B, T, D)``; ``"heads"``: each layer's heads' outputs
    side by side, the input of ``out_proj`` ``(B, T, H * E)``; ``"mlp"``: each MLP's output ``(B, T, D)``."""
    record: dict[str, list[torch.Tensor]] = {"stream": [], "heads": [], "mlp": []}
    hooks = [(model.embed_tokens, False, record["stream"].append)]
    for layer in model.layers:
        hooks += [(layer.attn.out_proj, True, record["heads"].append),
                  (layer.mlp, False, record["mlp"].append),
                  (layer, False, lambda out: record["stream"].append(out[0]))]  # a block returns (x, weights)
    with _hooked(hooks):
        model(input_ids, output_attentions=False)
    return record


# --- reading the residual stream ------------------------------------------------------------

@torch.no_grad()
def logit_lens(model: SmolLM, input_ids: torch.Tensor) -> torch.Tensor:
    """``input_ids (B, T)`` -> ``(num_layers + 1, B, T, vocab_size)``: the residual stream after the
    embedding (index 0) and after block ``i`` (index ``i``), each through the final RMSNorm and
    the LM head, as if the model ended there (nostalgebraist, 2020). Index ``num_layers`` is the
    model's logits. Holds ``num_layers + 1`` logit tensors: for SmolLM2, 6 MB a token."""
    _check_model(model)
    _check_ids(model, "input_ids", input_ids)
    c = model.config
    check_tensor_size("input_ids", (c.num_layers + 1, *input_ids.shape, c.vocab_size),
                      model.embed_tokens.weight.dtype)
    stream = torch.stack(_trace(model, input_ids)["stream"])  # (num_layers + 1, B, T, D)
    return model.lm_head(model.norm(stream))  # (num_layers + 1, B, T, D) -> (..., vocab_size)


def _unembedding(model: SmolLM, final: torch.Tensor, target_ids: torch.Tensor) -> torch.Tensor:
    """``(B, T, D)``: the direction whose dot product with the stream gives each target's logit, the
    final norm's ``1 / rms`` of ``final (B, T, D)`` (the stream it normalised) frozen, its gain folded in."""
    dtype = torch.promote_types(final.dtype, torch.float32)  # as RMSNorm computes
    h = final.to(dtype)
    inverse_rms = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + model.norm.eps)  # (B, T, 1): frozen
    rows = model.lm_head.weight[target_ids].to(dtype)  # (B, T, D): the targets' rows of W_U
    return rows * model.norm.weight.to(dtype) * inverse_rms  # (B, T, D)


@torch.no_grad()
def direct_logit_attribution(model: SmolLM, input_ids: torch.Tensor, target_ids: torch.Tensor
                             ) -> dict[str, torch.Tensor]:
    """Each part's direct contribution to the logit of ``target_ids (B, T)`` (the token scored at
    each position, e.g. the next token) on ``input_ids (B, T)`` (Elhage et al., 2021):

    * ``"embed" (B, T)``: the token embedding;
    * ``"attn" (num_layers, H, B, T)``: head ``a`` of layer ``n``, its output (its slice of the
      value-weighted sum, ``(B, T, E)``) through its ``E`` columns of ``out_proj``;
    * ``"mlp" (num_layers, B, T)``: each MLP's output.

    Each part is its vector in the residual stream dotted with the target's row of the LM head
    times the final norm's gain, divided by the final norm's root mean square *as it was in
    this forward pass* (frozen: the norm is then linear, so the parts add up). They sum to the
    model's logit of the target. The result is in float32 (at least). A model whose
    ``out_proj`` has a bias is refused: the bias belongs to no head."""
    _check_model(model)
    _check_ids(model, "input_ids", input_ids)
    _check_ids(model, "target_ids", target_ids, like=input_ids)
    if any(layer.attn.out_proj.bias is not None for layer in model.layers):
        raise ValueError("model's out_proj has a bias, which no head's part would hold (SmolLM2 has none)")
    record = _trace(model, input_ids)
    u = _unembedding(model, record["stream"][-1], target_ids)  # (B, T, D)
    E = model.config.head_dim
    attn = []
    for layer, heads in zip(model.layers, record["heads"]):
        back = u @ layer.attn.out_proj.weight.to(u.dtype)  # (B, T, D) @ (D, H * E) -> (B, T, H * E)
        parts = (back.unflatten(-1, (-1, E)) * heads.unflatten(-1, (-1, E)).to(u.dtype)).sum(-1)  # (B, T, H)
        attn.append(parts.permute(2, 0, 1))  # (B, T, H) -> (H, B, T)
    return {"embed": (u * record["stream"][0].to(u.dtype)).sum(-1),  # (B, T)
            "attn": torch.stack(attn),  # (num_layers, H, B, T)
            "mlp": torch.stack([(u * m.to(u.dtype)).sum(-1) for m in record["mlp"]])}  # (num_layers, B, T)


# --- activation patching ------------------------------------------------------------------------

def _site_module(layer, site: str) -> tuple[torch.nn.Module, bool]:
    """``(module, pre)``: the head output is the *input* of ``out_proj``; a query, key or value is
    the *output* of its projection."""
    attn = layer.attn
    return {"output": (attn.out_proj, True), "query": (attn.q_proj, False), "key": (attn.k_proj, False),
            "value": (attn.v_proj, False)}[site]


@torch.no_grad()
def head_activations(model: SmolLM, input_ids: torch.Tensor, site: str = "output") -> torch.Tensor:
    """``input_ids (B, T)`` -> ``(num_layers, B, H, T, E)`` for ``site`` ``"output"`` or ``"query"``,
    ``(num_layers, B, Hkv, T, E)`` for ``"key"`` or ``"value"``: every head's activation at
    ``site`` (:data:`SITES`) in one forward pass. Run on a corrupted input, it is the ``source``
    of resample ablation in :func:`patch_heads`; its mean over a reference set,
    ``.mean((1, 3), keepdim=True)``, the source of mean ablation over that set."""
    _check_model(model)
    _check_ids(model, "input_ids", input_ids)
    _site_heads(model, site)
    found: list[torch.Tensor] = []
    with _hooked([(*_site_module(layer, site), found.append) for layer in model.layers]):
        model(input_ids, output_attentions=False)
    E = model.config.head_dim
    # each (B, T, heads * E) -> (B, T, heads, E) -> (B, heads, T, E); stacked over the layers
    return torch.stack([x.unflatten(-1, (-1, E)).transpose(1, 2) for x in found])


def _replace(x: torch.Tensor, index: list[int], source, E: int) -> torch.Tensor:
    """``x (B, T, heads * E)`` with the heads in ``index`` replaced: by zero, by their mean over
    the batch and positions, or by ``source (B, heads, T, E)`` (B and T may be 1)."""
    heads = x.unflatten(-1, (-1, E)).transpose(1, 2).clone()  # (B, T, heads * E) -> (B, heads, T, E)
    if isinstance(source, str):
        chosen = heads[:, index]  # (B, len(index), T, E)
        heads[:, index] = 0.0 if source == "zero" else chosen.mean((0, 2), keepdim=True).expand_as(chosen)
    else:
        if not broadcasts_to(source.shape, heads.shape):
            raise ValueError(f"source {tuple(source.shape)} does not broadcast to this run's "
                             f"(B, heads, T, E) = {tuple(heads.shape)}")
        heads[:, index] = source[:, index].to(heads.dtype).expand(heads.size(0), -1, heads.size(2), -1)
    return heads.transpose(1, 2).flatten(-2)  # (B, heads, T, E) -> (B, T, heads * E)


@contextlib.contextmanager
def patching(model: SmolLM, heads, site: str = "output", source="zero"):
    """Within the block, every forward pass of ``model`` has the activations of ``heads`` (a list
    of ``(layer, head)`` pairs, counted from 0) at ``site`` (:data:`SITES`) replaced, by forward
    hooks on the layers' projections (as :func:`~attention_core.models.smollm.ablate_heads` does):

    * ``source="zero"``: zero ablation (for ``"output"``, what ``ablate_heads`` does with a 0);
    * ``source="mean"``: mean ablation, each head's mean over the batch and the positions of the
      run itself (positions are mixed: pass a tensor for a mean over a reference set);
    * a tensor ``(num_layers, B, H, T, E)`` (``Hkv`` for keys and values), as
      :func:`head_activations` gives: resample ablation with the activations of another run
      (a corrupted prompt), or, with B and T of 1, a mean over a reference set.

    With grouped-query attention a key/value head is shared: patching the key or value of query
    head ``a`` patches key/value head ``a // G``, which all G query heads of its group read.
    Queries and outputs are the query head's own."""
    _check_model(model)
    c = model.config
    by_layer = _check_heads(heads, c.num_layers, c.num_heads)
    _site_heads(model, site)
    _check_source(model, source, site)
    G, E = c.num_heads // c.num_kv_heads, c.head_dim
    hooks = []
    for n, chosen in sorted(by_layer.items()):
        index = sorted({a // G for a in chosen} if site in ("key", "value") else set(chosen))
        layer_source = source if isinstance(source, str) else source[n]

        def replace(x, index=index, layer_source=layer_source):
            return _replace(x, index, layer_source, E)
        hooks.append((*_site_module(model.layers[n], site), replace))
    with _hooked(hooks):
        yield


@torch.no_grad()
def patch_heads(model: SmolLM, input_ids: torch.Tensor, heads, site: str = "output", source="zero"
                ) -> torch.Tensor:
    """``input_ids (B, T)`` -> ``logits (B, T, vocab_size)`` with the activations of ``heads`` (a list
    of ``(layer, head)`` pairs) at ``site`` replaced by ``source``, as :func:`patching` says::

        corrupted = head_activations(model, corrupted_ids, "value")  # (num_layers, B, Hkv, T, E)
        logits = patch_heads(model, clean_ids, [(18, 6)], "value", corrupted)

    A source tensor's B and T must be 1 or those of ``input_ids``."""
    _check_model(model)
    _check_ids(model, "input_ids", input_ids)
    _site_heads(model, site)
    _check_source(model, source, site, input_ids)
    with patching(model, heads, site, source):
        logits, _ = model(input_ids, output_attentions=False)  # (B, T, vocab_size)
    return logits


@torch.no_grad()
def last_position_patching(model: SmolLM, input_ids: torch.Tensor, source_ids: torch.Tensor,
                           target_ids: torch.Tensor) -> torch.Tensor:
    """The patching map at the last position: ``input_ids (B, T)``, ``source_ids (B, T)``,
    ``target_ids (B, num_targets)`` -> ``(num_layers, H, B, num_targets)``. Entry ``[n, a, b, k]``
    is the logit of token ``target_ids[b, k]`` at the last position of ``input_ids[b]`` when head
    ``a`` of layer ``n`` writes, at that position only, its output on ``source_ids[b]`` (its slice
    of the input of ``out_proj``, as :func:`patch_heads` with site ``"output"``). Every other head
    and position runs as on ``input_ids``: a task whose answer is the next token (an indirect
    object, say) then shows which heads carry it to the last position (Wang et al., 2022,
    "Interpretability in the wild").

    Equal to one :func:`patch_heads` call a head whose source is the run of ``input_ids`` with
    its last position taken from ``source_ids``, and cheaper: the first ``T - 1`` positions are
    read once into a KV cache, and each layer's H heads are patched side by side in one batch of
    ``H * B`` one-token steps. Only the target tokens' rows of the LM head are computed."""
    _check_model(model)
    _check_ids(model, "input_ids", input_ids)
    _check_ids(model, "source_ids", source_ids, like=input_ids)
    if not isinstance(target_ids, torch.Tensor) or target_ids.dim() != 2 \
            or target_ids.size(0) != input_ids.size(0):
        raise ValueError(f"target_ids must be token ids (B, num_targets) with B = {input_ids.size(0)} as "
                         f"input_ids, got {getattr(target_ids, 'shape', type(target_ids).__name__)!r}")
    check_token_ids("target_ids", target_ids, model.config.vocab_size, model.embed_tokens.weight.device)
    if input_ids.size(1) < 2:
        raise ValueError(f"input_ids must hold at least 2 tokens (a context and a last position), "
                         f"got {input_ids.size(1)}")
    c = model.config
    B, T, H, E = *input_ids.shape, c.num_heads, c.head_dim
    check_tensor_size("input_ids", (c.num_layers, 2, H * B, c.num_kv_heads, T, E),
                      model.embed_tokens.weight.dtype)
    small = model.new_cache(B, T)
    model(input_ids[:, :-1], kv_caches=small, output_attentions=False)  # the context, once
    last = input_ids[:, -1:]  # (B, 1)
    # each head's output at the last position, unpatched and on source_ids: (num_layers, B, H, 1, E)
    ours = _last_outputs(model, small, last)
    theirs = head_activations(model, source_ids, "output")[..., -1:, :]
    rows = model.lm_head.weight[target_ids].to(torch.promote_types(model.lm_head.weight.dtype, torch.float32))
    out = rows.new_zeros(c.num_layers, H, B, target_ids.size(1))
    big = model.new_cache(H * B, T)
    for cache, part in zip(big, small):
        cache.append(part.keys[:, :, :T - 1].repeat(H, 1, 1, 1), part.values[:, :, :T - 1].repeat(H, 1, 1, 1))
    eye = torch.eye(H, dtype=torch.bool)[:, None, :, None, None]  # (H, 1, H, 1, 1): head a in batch slice a
    for n in range(c.num_layers):
        # (H, B, H, 1, E): in slice a, head a from source_ids, the others as unpatched
        source = torch.where(eye, theirs[n][None], ours[n][None]).flatten(0, 1)
        sources = source.new_zeros(c.num_layers, *source.shape)
        sources[n] = source
        with patching(model, [(n, a) for a in range(H)], "output", sources):
            hidden, _ = model.hidden_states(last.repeat(H, 1), kv_caches=big, output_attentions=False)
        for cache in big:
            cache.crop(T - 1)
        out[n] = (hidden[:, -1].to(rows.dtype).view(H, B, 1, -1) * rows).sum(-1)  # (H, B, num_targets)
    if model.lm_head.bias is not None:
        out += model.lm_head.bias[target_ids].to(out.dtype)
    return out


def _last_outputs(model: SmolLM, caches, last: torch.Tensor) -> torch.Tensor:
    """``(num_layers, B, H, 1, E)``: every head's output for the one token ``last (B, 1)`` after the
    context in ``caches``, which are left as they were."""
    found: list[torch.Tensor] = []
    with _hooked([(layer.attn.out_proj, True, found.append) for layer in model.layers]):
        model(last, kv_caches=caches, output_attentions=False)
    length = caches[0].length - 1
    for cache in caches:
        cache.crop(length)
    E = model.config.head_dim
    return torch.stack([x.unflatten(-1, (-1, E)).transpose(1, 2) for x in found])


# --- the weights' circuits: composition ------------------------------------------------------

def composition_score(reader: torch.Tensor, writer: torch.Tensor) -> torch.Tensor:
    """``reader (..., D, D)``, ``writer (..., D, D)`` -> ``(...)``: Elhage et al.'s (2021) composition
    score ``|reader @ writer|_F / (|reader|_F |writer|_F)``, between 0 (the reader ignores all
    the writer writes) and 1. 0 where either matrix is zero. The matrices need not be square:
    ``(..., n, m)`` and ``(..., m, p)``."""
    check_tensor("reader", reader, min_dim=2)
    check_tensor("writer", writer, min_dim=2)
    if reader.dtype != writer.dtype or reader.device != writer.device:
        raise TypeError(f"reader and writer must share a dtype and a device, got {reader.dtype} on "
                        f"{reader.device} and {writer.dtype} on {writer.device}")
    if reader.size(-1) != writer.size(-2):
        raise ValueError(f"reader (..., n, m) and writer (..., m, p) must share m, got {tuple(reader.shape)} "
                         f"and {tuple(writer.shape)}")
    product = torch.linalg.matrix_norm(reader @ writer)
    norms = torch.linalg.matrix_norm(reader) * torch.linalg.matrix_norm(writer)
    return torch.where(norms > 0, product / norms.clamp_min(torch.finfo(norms.dtype).tiny), 0.0)


def _head_matrices(model: SmolLM, n: int) -> dict[str, torch.Tensor]:
    """Layer ``n``'s per-head matrices, each ``(H, D, E)`` in float32 (at least): ``"query"`` and
    ``"key"`` are ``(W_Q diag(g))^T`` and ``(W_K diag(g))^T``, ``"value"`` is ``(W_V diag(g))^T``
    (the key/value head each query head reads, repeated over its group), ``"output"`` is ``W_O``'s
    E columns; ``g`` is the gain of the norm the layer reads through. Biases are left out."""
    layer, c = model.layers[n], model.config
    attn, H, E, D = layer.attn, c.num_heads, c.head_dim, c.embed_dim
    dtype = torch.promote_types(attn.q_proj.weight.dtype, torch.float32)
    g = layer.norm1.weight.to(dtype)

    def per_head(weight, heads):  # (heads * E, D) -> (heads, D, E) -> (H, D, E)
        rows = (weight.to(dtype) * g).view(heads, E, D).transpose(1, 2)
        return rows.repeat_interleave(H // heads, dim=0)

    output = attn.out_proj.weight.to(dtype).view(D, H, E).permute(1, 0, 2)  # (D, H * E) -> (H, D, E)
    return {"query": per_head(attn.q_proj.weight, H), "key": per_head(attn.k_proj.weight, c.num_kv_heads),
            "value": per_head(attn.v_proj.weight, c.num_kv_heads), "output": output}


def _reduced(outer: torch.Tensor, inner: torch.Tensor) -> torch.Tensor:
    """For a matrix ``outer @ inner^T`` (each ``(..., D, E)``), ``inner @ R^T (..., D, E)`` with ``outer =
    Q R`` (thin QR): ``Q`` has orthonormal columns, so Frobenius norms of products through ``outer``
    are those through ``R``, an ``E x E`` matrix, and no ``D x D`` matrix is formed."""
    return inner @ torch.linalg.qr(outer).R.transpose(-1, -2)


def _factored_scores(reader: torch.Tensor, writer: torch.Tensor) -> torch.Tensor:
    """``reader (readers, D, E)``, ``writer (writers, D, E)`` -> ``(readers, writers)``:
    :func:`composition_score` of the matrices ``A B^T`` and ``C F^T`` given reduced as ``B R_A^T``
    and ``C R_F^T`` by :func:`_reduced`: then ``|A B^T C F^T|_F = |(B R_A^T)^T (C R_F^T)|_F`` and
    each norm is its reduced factor's."""
    E = reader.size(-1)
    # (readers * E, D) @ (D, writers * E) -> (readers, E, writers, E)
    product = reader.transpose(1, 2).reshape(-1, reader.size(1)) @ writer.permute(1, 0, 2).flatten(1)
    product = product.view(reader.size(0), E, writer.size(0), E)
    norms = reader.flatten(1).norm(dim=1)[:, None] * writer.flatten(1).norm(dim=1)  # (readers, writers)
    return torch.where(norms > 0, product.pow(2).sum((1, 3)).sqrt() / norms.clamp_min(1e-30), 0.0)


@torch.no_grad()
def composition_scores(model: SmolLM, kind: str) -> torch.Tensor:
    """``(num_layers, H, num_layers, H)``: entry ``[n, a, m, b]`` is the ``kind`` composition
    (:data:`COMPOSITIONS`) of head ``a`` of layer ``n`` reading what head ``b`` of an earlier
    layer ``m < n`` wrote: :func:`composition_score` of the reader's matrix and the writer's OV
    circuit ``W_O W_V`` (Elhage et al., 2021). The reader's matrix is ``W_QK^T = W_K^T W_Q`` for
    ``"q"`` (its queries read the writer), ``W_QK = W_Q^T W_K`` for ``"k"`` (its keys do), its own
    ``W_O W_V`` for ``"v"``. Entries with ``m >= n`` are 0: a head reads only earlier layers.

    The norms' gains are folded into ``W_Q``, ``W_K``, ``W_V`` (the module docstring); RoPE is
    left out (the scores of a query and a key at one position), as is the ``1/rms`` scale. Compare
    with :func:`random_composition_scores`, about ``1 / sqrt(D)``."""
    _check_model(model)
    if kind not in COMPOSITIONS:
        raise ValueError(f"kind must be one of {list(COMPOSITIONS)}, got {kind!r}")
    c = model.config
    heads = [_head_matrices(model, n) for n in range(c.num_layers)]
    writers = torch.stack([_reduced(h["value"], h["output"]) for h in heads])  # (num_layers, H, D, E)
    outer, inner = {"q": ("key", "query"), "k": ("query", "key"), "v": ("output", "value")}[kind]
    scores = writers.new_zeros(c.num_layers, c.num_heads, c.num_layers, c.num_heads)
    for n in range(1, c.num_layers):
        reader = _reduced(heads[n][outer], heads[n][inner])  # (H, D, E)
        scores[n, :, :n] = _factored_scores(reader, writers[:n].flatten(0, 1)).view(c.num_heads, n, -1)
    return scores


def random_composition_scores(embed_dim: int, head_dim: int, num_samples: int,
                              generator: torch.Generator) -> torch.Tensor:
    """``(num_samples,)``: :func:`composition_score` of random matrices of a head's shapes, the
    baseline of :func:`composition_scores`: reader ``A B^T`` and writer ``C F^T``, each factor
    ``(D, E)`` (``D = embed_dim``, ``E = head_dim``) of independent standard normal entries.

    Closed form: for any reader ``M`` and a writer ``W`` whose distribution does not change when
    rotated (``U W`` for an orthogonal ``U``; Gaussian factors are so), ``E[|M U W|_F^2] =
    |M|_F^2 |W|_F^2 / D``, since ``E[U W W^T U^T] = |W|_F^2 I / D``. So the mean of the squared
    scores is exactly ``1 / D``, whatever ``E``, and the scores lie near ``1 / sqrt(D)``
    (0.042 for SmolLM2's D = 576). The numbers are drawn on ``generator``'s device."""
    for name, value in (("embed_dim", embed_dim), ("head_dim", head_dim), ("num_samples", num_samples)):
        check_positive_int(name, value)
    if head_dim > embed_dim:
        raise ValueError(f"head_dim={head_dim} must be at most embed_dim={embed_dim}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    check_tensor_size("num_samples", (4, num_samples, embed_dim, head_dim))
    shape = (4, num_samples, embed_dim, head_dim)
    A, B, C, F = torch.randn(shape, generator=generator, device=generator.device)  # each (n, D, E)
    reader, writer = _reduced(A, B), _reduced(F, C)  # (n, D, E): B R_A^T and C R_F^T
    product = torch.linalg.matrix_norm(reader.transpose(1, 2) @ writer)  # (n,)
    return product / (reader.flatten(1).norm(dim=1) * writer.flatten(1).norm(dim=1))


# --- the weights' circuits: copying -----------------------------------------------------------

def copying_score(circuit: torch.Tensor) -> torch.Tensor:
    """``circuit (..., n, n)`` -> ``(...)``: Elhage et al.'s (2021) eigenvalue measure of copying,
    ``sum(lambda) / sum(|lambda|)`` over the eigenvalues ``lambda`` of the matrix (complex in
    general; their sum, the trace, is real). 1 when every eigenvalue is positive (the identity:
    each token raises its own logit), -1 when every one is negative (suppressing the token),
    near 0 for a random matrix or a rotation. 0 for the zero matrix."""
    check_tensor("circuit", circuit, min_dim=2)
    if circuit.size(-1) != circuit.size(-2) or circuit.size(-1) == 0:
        raise ValueError(f"circuit must be square (..., n, n) with n >= 1, got {tuple(circuit.shape)}")
    eigenvalues = torch.linalg.eigvals(circuit)  # (..., n), complex
    mass = eigenvalues.abs().sum(-1)  # (...)
    trace = eigenvalues.real.sum(-1)
    return torch.where(mass > 0, trace / mass.clamp_min(torch.finfo(mass.dtype).tiny), 0.0)


@torch.no_grad()
def ov_copying_scores(model: SmolLM, token_ids: torch.Tensor | None = None) -> torch.Tensor:
    """``(num_layers, H)``: :func:`copying_score` of each head's OV circuit from token to logit,
    the ``vocab_size x vocab_size`` matrix ``(W_U - mean) diag(g_final) W_O W_V diag(g) N(W_E)^T``
    (the LM head's rows centred on their mean, which changes no prediction: see below): a
    token's embedding, normalised (``N``: each row over its root mean square, with the layer's
    eps) and read through the layer's gain ``g``, moved by the head, read by the LM head through
    the final norm's gain (Elhage et al., 2021: the direct path, as in a one-layer model; a
    later layer's real input is the stream, not the bare embedding). Entry ``(m, t)`` is how
    much attending to token ``t`` raises the logit of token ``m``. ``token_ids`` (a 1-D tensor of
    distinct ids) restricts both to those tokens (e.g. the ones a text uses); default: the
    whole vocabulary. The final norm's ``1/rms`` is left out. The mean row of ``W_U`` adds one
    number to every logit, which changes no prediction but would count in full in the
    eigenvalues, so it is removed first.

    Computed without the large matrix: its nonzero eigenvalues are those of the ``E x E``
    matrix ``W_V diag(g) N(W_E)^T (W_U - mean) diag(g_final) W_O`` (``XY`` and ``YX`` share them)."""
    _check_model(model)
    c = model.config
    weight = model.embed_tokens.weight
    if token_ids is not None:
        if not isinstance(token_ids, torch.Tensor) or token_ids.dim() != 1:
            raise TypeError(f"token_ids must be None or a 1-D tensor of token ids, got "
                            f"{getattr(token_ids, 'shape', type(token_ids).__name__)!r}")
        check_token_ids("token_ids", token_ids[None], c.vocab_size, weight.device)
        if token_ids.unique().numel() != token_ids.numel():
            raise ValueError("token_ids must be distinct (each token one row and column of the circuit)")
    through = _token_to_logit(model, slice(None) if token_ids is None else token_ids)  # (D, D)
    scores = []
    for n in range(c.num_layers):
        h = _head_matrices(model, n)  # value (H, D, E): (W_V diag(g))^T; output (H, D, E): W_O
        # (H, E, D) @ (D, D) @ (H, D, E) -> (H, E, E)
        small = h["value"].transpose(1, 2) @ through @ h["output"]
        scores.append(copying_score(small.double()).to(through.dtype))  # (H,)
    return torch.stack(scores)  # (num_layers, H)


def _token_to_logit(model: SmolLM, tokens) -> torch.Tensor:
    """``(D, D)``: ``N(W_E)^T (W_U - mean) diag(g_final)`` over ``tokens`` (a slice or ids), the
    part of every OV circuit from token to logit that no head owns (:func:`ov_copying_scores`).
    The LM head's rows are centred on their mean over the whole vocabulary: that mean row adds
    the same to every logit, which changes no prediction (softmax ignores it; TransformerLens
    centres the unembedding by default for the same reason), yet would count in full in the
    eigenvalues."""
    weight = model.embed_tokens.weight
    dtype = torch.promote_types(weight.dtype, torch.float32)
    embed = weight[tokens].to(dtype)  # (n, D)
    embed = embed * torch.rsqrt(embed.pow(2).mean(-1, keepdim=True) + model.layers[0].norm1.eps)
    rows = model.lm_head.weight.to(dtype)  # (vocab_size, D)
    unembed = (rows[tokens] - rows.mean(0)) * model.norm.weight.to(dtype)  # (n, D)
    return embed.T @ unembed  # (D, n) @ (n, D) -> (D, D): token in, logit out


@torch.no_grad()
def random_ov_copying_scores(model: SmolLM, num_samples: int, generator: torch.Generator) -> torch.Tensor:
    """``(num_samples,)``: :func:`copying_score` of random heads read through ``model``'s own
    embedding and LM head, the chance level of :func:`ov_copying_scores`: each head's value and
    output weights (``(D, E)`` each) of independent standard normal entries in place of ``W_V
    diag(g)`` and ``W_O``. The numbers are drawn on ``generator``'s device."""
    _check_model(model)
    check_positive_int("num_samples", num_samples)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    c = model.config
    check_tensor_size("num_samples", (2, num_samples, c.embed_dim, c.head_dim))
    through = _token_to_logit(model, slice(None))  # (D, D)
    value, output = torch.randn((2, num_samples, c.embed_dim, c.head_dim), generator=generator,
                                device=generator.device, dtype=through.dtype)  # each (n, D, E)
    small = value.transpose(1, 2) @ through.to(value.device) @ output  # (n, E, E)
    return copying_score(small.double()).to(through.dtype)  # (n,)
