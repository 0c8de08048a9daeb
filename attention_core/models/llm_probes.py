"""Chapters 14 and 15: measuring what the heads of a real language model do (SmolLM2-135M, from
:mod:`attention_core.models.smollm`): induction and previous-token heads, attention sinks,
what removing heads costs, and StreamingLLM's perplexity test.

* :func:`repeated_random_tokens`: random tokens, then the same tokens again; a model
  that copies predicts the second copy (Olsson et al., 2022, "In-context learning and
  induction heads").
* :func:`induction_scores`, :func:`previous_token_scores`, :func:`first_token_shares`:
  one number per head, the mean weight on one key chosen by position; each has a chance
  level, :func:`uniform_scores`, the score of a head that spreads its weight evenly.
* :func:`sink_rate`: the share of heads whose mean weight on the first token exceeds a
  threshold (Gu et al., 2025, "When attention sink emerges in language models").
* :func:`token_losses`, :func:`ablated_losses`: the loss of each next token, with heads
  removed or not (``head_mask`` of :class:`~attention_core.models.smollm.SmolLM`).
* :func:`streaming_losses`: the loss of each next token under full attention, a sliding
  window, or a window with sinks (Xiao et al., 2023, StreamingLLM), in one forward pass
  through :class:`~attention_core.nn.kv_cache.RollingKVCache`.
* :data:`BOOK_PROSE`: paragraphs of this book, text the model cannot have seen.

Shape legend: B batch, H heads, T tokens (queries = keys); ``num_layers`` layers and
``vocab_size`` tokens in the vocabulary, written by their names. ``attentions`` are a
model's weights, a list of ``num_layers`` tensors ``(B, H, T, T)`` or one tensor
``(num_layers, B, H, T, T)``.
"""

from __future__ import annotations

import torch

from ..nn._checks import check_positive_int, check_tensor, check_tensor_size
from ..nn.kv_cache import kv_cache_bytes
from ..nn.positional import rotary_layout
from .smollm import SmolLM

__all__ = [
    "BOOK_PROSE", "repeated_random_tokens", "induction_scores", "previous_token_scores",
    "first_token_shares", "uniform_scores", "sink_rate", "token_losses", "head_mask_without",
    "ablated_losses", "top_heads", "random_heads", "streaming_losses", "kv_bytes",
    "interleaved_to_half_split",
]

BOOK_PROSE = (
    "A sentence is a sequence, and most of what a word means depends on other words: it in \"the cat "
    "sat on the mat because it was tired\" means the cat. A model that reads sentences needs a way for "
    "each position to look things up in the rest of the sequence. Attention is that look-up. This "
    "chapter builds it from scratch: the problem it solved, the four steps that compute it, a small "
    "example you can check by hand, and a first look at what attention weights tell us (and what they "
    "do not). In chapter 1 every token used its own embedding as query, key and value, so a word could "
    "only look for words that resemble it. Self-attention gives the model three learned linear maps "
    "instead: one to turn a token into the question it asks (its query), one into the label it offers "
    "(its key), and one into the content it hands over (its value). This chapter builds those maps, "
    "computes the score matrix for a real sentence, proves that self-attention by itself ignores word "
    "order, and measures its cost, which grows with the square of the sequence length. Chapter 3 proved "
    "that self-attention cannot tell \"the cat sat on the mat\" from \"the mat sat on the cat\": shuffle "
    "the tokens and the outputs shuffle with them. Order has to be put in from outside.",

    "Attention was not invented for the Transformer. It was invented to fix a bottleneck in recurrent "
    "translation models. The encoder-decoders of 2014 read the whole source sentence into one fixed-size "
    "vector and generated the translation from that vector alone: every word of a long sentence had to "
    "squeeze through the same few hundred numbers, and their translations got worse as sentences got "
    "longer. Bahdanau and his colleagues let the decoder look back at all the encoder's states at every "
    "step, with a learned weighting, and translation of long sentences stopped collapsing. Real "
    "translation data cannot be downloaded here, and we would not want to wait for it to train anyway. "
    "Instead, a toy language pair generated in code: a source sentence is a string of words from a "
    "14-word vocabulary, and its translation is the sentence reversed, with each word looked up in a "
    "fixed dictionary. The dictionary makes it a translation (every output word depends on one specific "
    "input word); the reversal makes the alignment non-trivial (the first output word depends on the last "
    "input word) and known exactly, so we can check whether attention finds it.",

    "A language model writes one token at a time, and each new token attends to every token before it. "
    "Recomputing the keys and values of the whole prefix at every step would be wasteful, so decoders "
    "keep them in a cache. At long contexts that cache, not the model's weights, is what fills the "
    "accelerator's memory and limits how many users it can serve at once. This chapter builds the cache, "
    "measures it, and shows the idea most recent large language models use to shrink it: let many query "
    "heads share one key and value head. It is not the only one: a sliding window bounds the cache's "
    "length, and other models cache one compressed latent vector per token instead of keys and values. "
    "The rolling cache holds exactly the keys of the window: a few fixed slots plus a ring. One detail "
    "matters with rotary embeddings: the layer rotates each key once, at its original position, before "
    "caching, so scores depend on true distances. Other designs renumber positions inside the cache, "
    "which needs keys cached before rotation.",

    "Attention lets every query see every key. Often that is wrong. A language model that predicts the "
    "next word must not see it (or any later word) while training; a batch of sentences padded to a "
    "common length must not attend to the padding. A mask removes the forbidden query-key pairs before "
    "the softmax. To see a sink form, a model needs queries that sometimes have nothing to look at. The "
    "task: a sequence starts with a fixed first token, then random tokens; at each position the model "
    "answers whether this token has appeared among the four before it. When it has, a head can attend to "
    "the earlier copy; when it has not, there is nothing to find. We train a one-layer model with full "
    "causal attention on short sequences, as real models are trained, then run it three ways on fresh "
    "sequences: full attention, a window of eight, and the same window plus one sink. The window is twice "
    "the four tokens the task needs, so the window alone loses no information.",
)
"""Four passages of this book's prose (from chapters 1, 3, 5, 7, 9, 10 and 12, lightly edited
to read without the page's markup): text written after SmolLM2 was trained."""


def _layers(attentions) -> list[torch.Tensor]:
    """A list of ``num_layers`` tensors ``(B, H, T, T)`` or one ``(num_layers, B, H, T, T)``
    -> the layers, checked (not stacked: a model's weights for a long text are large, and a
    copy would double them)."""
    if isinstance(attentions, torch.Tensor):
        check_tensor("attentions", attentions)
        if attentions.dim() != 5:
            raise ValueError(f"attentions must be (num_layers, B, H, T, T) or num_layers tensors "
                             f"(B, H, T, T), got shape {tuple(attentions.shape)}")
        attentions = list(attentions)
    if not isinstance(attentions, (list, tuple)) or not attentions:
        raise ValueError("attentions must hold at least one layer, got none")
    for a in attentions:
        check_tensor("attentions", a)
        if a.dim() != 4 or a.size(-1) != a.size(-2) or a.shape != attentions[0].shape:
            raise ValueError(f"attentions must be (num_layers, B, H, T, T) or num_layers tensors "
                             f"(B, H, T, T) of one shape, got a layer of shape {tuple(a.shape)}")
    return list(attentions)


def _check_start(start: int, T: int, minimum: int = 0, name: str = "start") -> None:
    check_positive_int(name, start, minimum=minimum)
    if start >= T:
        raise ValueError(f"{name}={start} leaves no query among T={T} tokens")


def repeated_random_tokens(batch_size: int, length: int, vocab_size: int, generator: torch.Generator,
                           low: int = 0) -> torch.Tensor:
    """``(B, 2 * length)`` token ids: ``length`` tokens drawn uniformly from
    ``[low, vocab_size)``, then the same tokens again. Position ``i >= length`` repeats
    position ``i - length``; only a model that copies from earlier in the text can predict
    the second half."""
    for name, value in (("batch_size", batch_size), ("length", length), ("vocab_size", vocab_size)):
        check_positive_int(name, value)
    check_tensor_size("length", (batch_size, 2 * length), torch.long)
    if not 0 <= low < vocab_size:
        raise ValueError(f"low must be in [0, vocab_size={vocab_size}), got {low}")
    first = torch.randint(low, vocab_size, (batch_size, length), generator=generator)  # (B, length)
    return torch.cat((first, first), dim=1)  # (B, 2 * length)


def _mean_on_key(layers: list[torch.Tensor], start: int, key_of) -> torch.Tensor:
    """``(num_layers, H)``: the weight each head gives query ``i`` on key ``key_of(i)``, averaged over
    queries ``i >= start`` and the batch."""
    T = layers[0].size(-1)
    queries = torch.arange(start, T, device=layers[0].device)  # (T - start,)
    keys = key_of(queries)  # (T - start,)
    # each layer: (B, H, T, T) -> (B, H, T - start) -> (H,); stacked: (num_layers, H)
    return torch.stack([a[..., queries, keys].mean((0, 2)) for a in layers])


def induction_scores(attentions, period: int) -> torch.Tensor:
    """``(num_layers, H)``: on text that repeats with ``period`` (:func:`repeated_random_tokens`),
    the mean weight a query in the repeat puts on the token that *followed* the earlier
    copy of its own token: key ``i - period + 1`` for query ``i >= period``. An induction
    head scores near 1 (Olsson et al., 2022, whose "prefix matching" score this is)."""
    a = _layers(attentions)
    check_positive_int("period", period, minimum=2)
    _check_start(period, a[0].size(-1), name="period")
    return _mean_on_key(a, period, lambda i: i - period + 1)


def previous_token_scores(attentions, start: int = 1) -> torch.Tensor:
    """``(num_layers, H)``: the mean weight a query ``i >= start`` puts on key ``i - 1``."""
    a = _layers(attentions)
    _check_start(start, a[0].size(-1), minimum=1)
    return _mean_on_key(a, start, lambda i: i - 1)


def first_token_shares(attentions, start: int = 1) -> torch.Tensor:
    """``(num_layers, H)``: the mean weight a query ``i >= start`` puts on the first token, key 0.
    Query 0 is left out by default: it can only attend to itself, a share of 1 that says
    nothing about the head."""
    a = _layers(attentions)
    _check_start(start, a[0].size(-1))
    return _mean_on_key(a, start, torch.zeros_like)


def uniform_scores(T: int, start: int) -> float:
    """The score of :func:`induction_scores`, :func:`previous_token_scores` or
    :func:`first_token_shares` for a head that spreads each query's weight evenly over
    the keys it may see under the causal mask: the mean of ``1 / (i + 1)`` over queries
    ``start <= i < T``. The chance level of those scores."""
    check_positive_int("T", T)
    _check_start(start, T)
    return (1.0 / torch.arange(start + 1, T + 1, dtype=torch.float64)).mean().item()


def sink_rate(shares: torch.Tensor, threshold: float = 0.3) -> float:
    """The share of heads whose :func:`first_token_shares` exceeds ``threshold``: Gu et
    al.'s (2025) sink metric, with their ``threshold`` of 0.3. ``shares (num_layers, H)``."""
    check_tensor("shares", shares)
    if shares.numel() == 0:
        raise ValueError(f"shares must hold at least one head, got shape {tuple(shares.shape)}")
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    return (shares > threshold).float().mean().item()


def token_losses(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """``logits (B, T, vocab_size)``, ``input_ids (B, T)`` -> ``(B, T - 1)``: the loss (negative
    log-probability, nats) of each next token, entry ``i`` for predicting token ``i + 1``
    from the tokens up to ``i``."""
    check_tensor("logits", logits, min_dim=3)
    if not isinstance(input_ids, torch.Tensor):
        raise TypeError(f"input_ids must be a tensor (B, T) of token ids, got {type(input_ids).__name__}")
    if logits.dim() != 3 or input_ids.shape != logits.shape[:2] or logits.size(1) < 2:
        raise ValueError(f"logits must be (B, T, vocab_size) and input_ids (B, T) with T >= 2, got "
                         f"{tuple(logits.shape)} and {tuple(input_ids.shape)}")
    losses = []
    for row, ids in zip(logits, input_ids):  # one at a time: a (T, vocab_size) copy, not (B, ...)
        log_probs = row[:-1].float().log_softmax(-1)  # (T - 1, vocab_size)
        losses.append(-log_probs.gather(-1, ids[1:, None]).squeeze(-1))  # (T - 1,)
    return torch.stack(losses)  # (B, T - 1)


def head_mask_without(heads, num_layers: int, num_heads: int) -> torch.Tensor:
    """``(num_layers, H)`` ones, with 0 at each ``(layer, head)`` of ``heads`` (counted from 0): the
    ``head_mask`` that removes those heads."""
    check_positive_int("num_layers", num_layers)
    check_positive_int("num_heads", num_heads)
    if isinstance(heads, (str, torch.Tensor)) or not all(
            isinstance(h, (tuple, list)) and len(h) == 2 for h in heads):
        raise TypeError(f"heads must be a list of (layer, head) pairs, got {heads!r}")
    mask = torch.ones(num_layers, num_heads)
    for layer, head in heads:
        if not (0 <= layer < num_layers and 0 <= head < num_heads):
            raise ValueError(f"head ({layer}, {head}) is outside {num_layers} layers x {num_heads} heads")
        mask[layer, head] = 0.0
    return mask


@torch.no_grad()
def ablated_losses(model, input_ids: torch.Tensor, heads=()) -> torch.Tensor:
    """``(B, T - 1)``: :func:`token_losses` of ``model`` (a
    :class:`~attention_core.models.smollm.SmolLM`) on ``input_ids (B, T)`` with each
    ``(layer, head)`` of ``heads`` removed: its output is set to zero before ``W_o`` mixes
    the heads."""
    if not isinstance(model, SmolLM):
        raise TypeError(f"model must be a SmolLM (load_smollm2), got {type(model).__name__}")
    c = model.config
    mask = head_mask_without(heads, c.num_layers, c.num_heads)
    logits, _ = model(input_ids, head_mask=mask, output_attentions=False)  # (B, T, vocab_size)
    return token_losses(logits, input_ids)


def top_heads(scores: torch.Tensor, k: int) -> list[tuple[int, int]]:
    """The ``k`` heads with the highest ``scores (num_layers, H)``, best first, as ``(layer, head)``
    counted from 0."""
    check_tensor("scores", scores, min_dim=2)
    if scores.dim() != 2:
        raise ValueError(f"scores must be (num_layers, H), got shape {tuple(scores.shape)}")
    check_positive_int("k", k)
    if k > scores.numel():
        raise ValueError(f"k must be at most the {scores.numel()} heads of scores, got {k}")
    order = scores.flatten().argsort(descending=True)[:k]
    return [divmod(int(i), scores.size(1)) for i in order]


def random_heads(num_layers: int, num_heads: int, k: int, generator: torch.Generator,
                 exclude=()) -> list[tuple[int, int]]:
    """``k`` distinct heads drawn uniformly, as ``(layer, head)`` from 0, none of them in
    ``exclude``: the control for removing chosen heads."""
    check_positive_int("k", k)
    for name, value in (("num_layers", num_layers), ("num_heads", num_heads)):
        check_positive_int(name, value)
    allowed = [(n, h) for n in range(num_layers) for h in range(num_heads) if (n, h) not in set(exclude)]
    if not 0 < k <= len(allowed):
        raise ValueError(f"k must be in [1, {len(allowed)}] (the heads not excluded), got {k}")
    order = torch.randperm(len(allowed), generator=generator)[:k]
    return [allowed[int(i)] for i in order]


@torch.no_grad()
def streaming_losses(model, input_ids: torch.Tensor, window: int | None = None,
                     num_sinks: int = 0) -> torch.Tensor:
    """``(B, T - 1)``: :func:`token_losses` of ``model`` on ``input_ids (B, T)`` when each
    token sees every earlier token (``window=None``), or only the last ``window`` tokens
    (itself included) and the first ``num_sinks`` (StreamingLLM; Xiao et al., 2023).

    One forward pass: the whole text goes into an empty
    :class:`~attention_core.nn.kv_cache.RollingKVCache` per layer as one chunk, whose mask
    gives every query exactly the keys it would see if the text were decoded one token at
    a time through that cache. Keys keep their original positions (RoPE rotates each key
    once, where it stands in the text); StreamingLLM renumbers them by their place in the
    cache."""
    if not isinstance(model, SmolLM):
        raise TypeError(f"model must be a SmolLM (load_smollm2), got {type(model).__name__}")
    if window is None:
        if num_sinks:
            raise ValueError("num_sinks needs a window")
        caches = None
    else:
        caches = model.new_cache(input_ids.size(0), window=window, num_sinks=num_sinks)
    logits, _ = model(input_ids, kv_caches=caches, output_attentions=False)  # (B, T, vocab_size)
    return token_losses(logits, input_ids)


def kv_bytes(config, seq_len: int, num_kv_heads: int | None = None, bytes_per_element: int = 2) -> int:
    """Bytes of the KV cache of one sequence of ``seq_len`` tokens for a model of ``config``
    (:class:`~attention_core.models.smollm.SmolLMConfig`), with its own number of key/value
    heads or ``num_kv_heads``; 2 bytes a number (bfloat16):
    :func:`~attention_core.nn.kv_cache.kv_cache_bytes`."""
    if not all(hasattr(config, name) for name in ("num_layers", "num_kv_heads", "head_dim")):
        raise TypeError(f"config must be a SmolLMConfig (num_layers, num_kv_heads, head_dim), "
                        f"got {type(config).__name__}")
    heads = config.num_kv_heads if num_kv_heads is None else num_kv_heads
    return kv_cache_bytes(config.num_layers, heads, config.head_dim, seq_len,
                          bytes_per_element=bytes_per_element)


def interleaved_to_half_split(weight: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Undo llama.cpp's permutation of a query or key projection ``weight (H * E, D)``
    (PyTorch's ``(out, in)``): within each head, GGUF's row ``2i`` (rotated with row
    ``2i + 1``, the pairing of :func:`~attention_core.nn.positional.apply_rotary`) goes
    back to row ``i`` and row ``2i + 1`` to row ``i + E/2`` (HuggingFace's pairing, which
    rotates dimension ``i`` with ``i + E/2``). Chapter 14's name for
    :func:`~attention_core.nn.positional.rotary_layout` ``(weight, num_heads, "half_split")``,
    for a weight (2 dims or more) only."""
    check_tensor("weight", weight, min_dim=2)
    return rotary_layout(weight, num_heads, "half_split")
