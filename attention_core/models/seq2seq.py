"""Chapter 7: a GRU encoder-decoder with no attention, Bahdanau attention or Luong attention, and
the synthetic task chapter 7 trains it on.

The three decoders differ only in where the context vector comes from and where it
goes. Notation as in the book: ``e_i`` the encoder state of source word ``i`` (all of
them together are the argument ``h``, ``(B, S, Dh)``), ``u_t`` the decoder state at step
``t`` (the argument ``state``), ``c_t`` the context, ``y`` the previous output token's
embedding, ``d_h`` the hidden size (shape letter ``Dh``):

* none (Cho et al. 2014, Sutskever et al. 2014): one fixed context ``c`` summarises
  the whole source; ``u_t = GRU([y; c], u_{t-1})``, output from ``[u_t; c; y]``.
* Bahdanau et al. (2015): the context is computed from the **previous** state and goes
  **into** the recurrence: ``c_t = attend(u_{t-1}, e)``, ``u_t = GRU([y; c_t], u_{t-1})``,
  output from ``[u_t; c_t; y]``.
* Luong et al. (2015): the recurrence runs first and the context is computed from the
  **current** state, then combined **after** it: ``u_t = GRU(y, u_{t-1})``,
  ``c_t = attend(u_t, e)``, attentional state ``u~_t = tanh(W_c [c_t; u_t])``, output
  from ``u~_t``. (Luong's optional "input feeding" is not used.)

The first decoder state is ``u_0 = tanh(W [e_S->; e_1<-])``, from both encoder
directions' final states: the book's choice (Bahdanau et al. use ``tanh(W_s e_1<-)``,
the backward direction only).

Each decoder is a step function with one signature, chosen by name from
:data:`DECODERS` together with the layers it needs. Training and translation call the same
step functions: teacher forcing runs all target steps in one call, generation one step a call.

Shape legend: B batch, S source length, T target length, D embedding dim
(``embed_dim``), Dh hidden size ``d_h`` of the GRUs (``hidden_size``; encoder states
``e_i`` are Dh wide, Dh/2 per direction), ``vocab_size`` vocabulary size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..nn._checks import check_positive_int, check_tensor, check_tensor_size, check_token_ids
from ..nn.scoring import AdditiveScore, DotScore, GeneralScore, make_score
from .seeding import seeded
from .training import train_model

__all__ = [
    "SOURCE_WORDS", "TARGET_OF", "TARGET_VOCAB", "Batch", "translate", "encode_batch", "random_sentences",
    "random_batch", "fixed_context_step", "bahdanau_step", "luong_step", "gru_steps", "source_attention",
    "Decoder", "DECODERS", "Seq2Seq", "seq2seq_loss", "train_seq2seq", "exact_match", "alignment_accuracy",
]

PAD, BOS, EOS = 0, 1, 2
SPECIALS = ["<pad>", "<s>", "</s>"]
SOURCE_WORDS = list("abcdefghijklmn")
"""The 14 words of the source language, the letters a to n."""
TARGET_OF = dict(zip(SOURCE_WORDS, "GLBNEKAIMCFHDJ"))
"""The fixed dictionary, source word -> target word (a permutation onto capitals)."""
SOURCE_VOCAB = SPECIALS + SOURCE_WORDS
TARGET_VOCAB = SPECIALS + sorted(TARGET_OF.values())


@dataclass
class Batch:
    """Source ``src (B, S)`` padded with PAD, ``src_lengths (B,)``, decoder input
    ``tgt_in (B, T)`` (BOS then the target) and ``tgt_out (B, T)`` (the target then EOS,
    padded with PAD)."""

    src: torch.Tensor
    src_lengths: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor


def translate(words) -> list[str]:
    """The task's reference: reverse the sentence and look up each word in
    :data:`TARGET_OF`. ``"a b c"`` becomes ``["B", "L", "G"]``."""
    words = words.split() if isinstance(words, str) else list(words)
    unknown = [w for w in words if w not in TARGET_OF]
    if not words or unknown:
        raise ValueError(f"a source sentence is 1 or more of the words {' '.join(SOURCE_WORDS)}, "
                         f"separated by spaces; got {' '.join(map(str, words))!r}"
                         + (f" (unknown: {unknown})" if unknown else ""))
    return [TARGET_OF[w] for w in reversed(words)]


def encode_batch(sentences, device=None) -> Batch:
    """Turn source sentences (strings or word lists) into a padded :class:`Batch`, its
    tensors on ``device`` (default: the CPU; pass the model's device)."""
    if isinstance(sentences, str) or not isinstance(sentences, (list, tuple)) or not sentences:
        raise TypeError(f"sentences must be a non-empty list of sentences (strings or word lists), "
                        f"got {sentences!r}")
    sources = [s.split() if isinstance(s, str) else list(s) for s in sentences]
    targets = [translate(s) for s in sources]  # validates every word
    S = max(len(s) for s in sources)
    src = torch.full((len(sources), S), PAD)
    tgt_in = torch.full((len(sources), S + 1), PAD)
    tgt_out = torch.full((len(sources), S + 1), PAD)
    for b, (source, target) in enumerate(zip(sources, targets)):
        src[b, :len(source)] = torch.tensor([SOURCE_VOCAB.index(w) for w in source])
        ids = [TARGET_VOCAB.index(w) for w in target]
        tgt_in[b, :len(ids) + 1] = torch.tensor([BOS] + ids)
        tgt_out[b, :len(ids) + 1] = torch.tensor(ids + [EOS])
    lengths = torch.tensor([len(s) for s in sources])  # (B,)
    return Batch(*(t.to(device) for t in (src, lengths, tgt_in, tgt_out)))


def random_sentences(generator: torch.Generator, batch_size: int, min_len: int, max_len: int):
    """``batch_size`` random source sentences (word lists), lengths uniform in
    ``[min_len, max_len]``."""
    check_positive_int("batch_size", batch_size)
    check_positive_int("min_len", min_len)
    check_positive_int("max_len", max_len, minimum=min_len)
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)
    words = torch.randint(0, len(SOURCE_WORDS), (batch_size, max_len), generator=generator)
    return [[SOURCE_WORDS[i] for i in row[:n]] for row, n in zip(words.tolist(), lengths.tolist())]


def random_batch(generator: torch.Generator, batch_size: int, min_len: int, max_len: int) -> Batch:
    """``encode_batch(random_sentences(generator, batch_size, min_len, max_len))``, the same
    batch from the same draws, built with tensor operations instead of word lists (it is
    made once per training step)."""
    check_positive_int("batch_size", batch_size)
    check_positive_int("min_len", min_len)
    check_positive_int("max_len", max_len, minimum=min_len)
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)  # (B,)
    words = torch.randint(0, len(SOURCE_WORDS), (batch_size, max_len), generator=generator)
    S = int(lengths.max())
    positions = torch.arange(S + 1)  # (S + 1,)
    real = positions[:S] < lengths.unsqueeze(1)  # (B, S)
    src = (words[:, :S] + len(SPECIALS)).masked_fill(~real, PAD)
    # target word j translates source word n - 1 - j
    backwards = (lengths.unsqueeze(1) - 1 - positions[:S]).clamp(min=0)  # (B, S)
    target = _TARGET_ID_OF_WORD[words.gather(1, backwards)].masked_fill(~real, PAD)  # (B, S)
    tgt_out = torch.cat((target, torch.full((batch_size, 1), PAD)), 1)  # (B, S + 1)
    tgt_out[torch.arange(batch_size), lengths] = EOS
    tgt_in = torch.cat((torch.full((batch_size, 1), BOS), target), 1)
    return Batch(src, lengths, tgt_in, tgt_out)


_TARGET_ID_OF_WORD = torch.tensor([TARGET_VOCAB.index(TARGET_OF[w]) for w in SOURCE_WORDS])
"""Source word index (0 for ``a``) -> the target vocabulary id of its translation."""


# --- the three decoders: layers and one step function each ---------------------------
#
# A step function runs the decoder over T steps whose inputs are known in advance. It takes
# the model (for its layers), the previous output tokens' embeddings ``y (B, T, D)``, the
# state before the first of them ``u_{t-1} (B, Dh)`` (argument ``state``), the encoder
# states ``e_1 ... e_S`` (argument ``h``, ``(B, S, Dh)``), their padding mask ``(B, S)`` and
# the fixed context ``c (B, Dh)``; it returns ``(logits (B, T, vocab_size), the last state
# (B, Dh), weights (B, T, S) or None)``. Generation knows one input at a time and calls it
# with T = 1; training (teacher forcing) knows them all and calls it once with the whole
# target, so the same functions train and translate. Where a step does not need the step
# before it, the T steps run as one batched operation.


def fixed_context_step(model, y, state, h, mask, fixed_context):
    """No attention (Cho et al. 2014): the same context ``c = u_0`` at every step, fed into the GRU."""
    c = fixed_context.unsqueeze(1).expand(-1, y.size(1), -1)  # (B, Dh) -> (B, T, Dh)
    states = gru_steps(model.cell, torch.cat((y, c), -1), state)  # u_t for every step: (B, T, Dh)
    return model.readout(torch.cat((states, c, y), -1)), states[:, -1], None


def bahdanau_step(model, y, state, h, mask, fixed_context):
    """Bahdanau et al. (2015): attend from the previous state, then feed the context into the GRU."""
    attend_all = source_attention(model.score, h, mask)  # the source's part computed once
    states, contexts, weights = [], [], []
    for t in range(y.size(1)):  # step t's context enters step t's GRU: the steps run in order
        context, w = attend_all(state.unsqueeze(1))  # from u_{t-1}: (B, 1, Dh), (B, 1, S)
        state = model.cell(torch.cat((y[:, t], context[:, 0]), -1), state)  # the context goes in
        states.append(state)
        contexts.append(context)
        weights.append(w)
    states, contexts = torch.stack(states, 1), torch.cat(contexts, 1)  # (B, T, Dh) each
    return model.readout(torch.cat((states, contexts, y), -1)), state, torch.cat(weights, 1)


def luong_step(model, y, state, h, mask, fixed_context):
    """Luong et al. (2015): run the GRU first, attend from the new state, combine after."""
    states = gru_steps(model.cell, y, state)  # u_t first, from y alone: (B, T, Dh)
    context, weights = source_attention(model.score, h, mask)(states)  # from u_t: (B, T, Dh), (B, T, S)
    attentional = torch.tanh(model.combine(torch.cat((context, states), -1)))  # u~_t: (B, T, Dh)
    return model.readout(attentional), states[:, -1], weights


def gru_steps(cell: nn.GRUCell, inputs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """``cell`` applied along the time axis of ``inputs (B, T, in)`` from ``state (B, Dh)``,
    in one call: the states ``u_1 ... u_T`` as ``(B, T, Dh)``."""
    if not isinstance(cell, nn.GRUCell):
        raise TypeError(f"cell must be a torch.nn.GRUCell, got {type(cell).__name__}")
    check_tensor("inputs", inputs, min_dim=3)
    if inputs.dim() != 3 or inputs.shape[-1] != cell.input_size:
        raise ValueError(f"inputs must be (B, T, {cell.input_size}) for this cell, got {tuple(inputs.shape)}")
    check_tensor("state", state, min_dim=2)
    if tuple(state.shape) != (inputs.size(0), cell.hidden_size):
        raise ValueError(f"state must be (B, Dh) = ({inputs.size(0)}, {cell.hidden_size}), "
                         f"got {tuple(state.shape)}")
    weights = [cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh]
    out, _ = torch.gru(inputs, state.unsqueeze(0), weights, True, 1, 0.0, False, False, True)
    return out


def source_attention(score: nn.Module, h: torch.Tensor, mask: torch.Tensor):
    """:func:`~attention_core.nn.scoring.attend` over the encoder states ``h (B, S, Dh)`` for
    many queries at once: a function ``queries (B, T, Dh) -> (contexts (B, T, Dh), weights
    (B, T, S))``, row ``t`` as ``attend(score, queries[:, t], h, mask)``. What depends on the
    source alone is computed once: the padding mask as a bias, and the keys' half of the
    additive (``e W_h``) and general (``e W^T``) scores. The dot, general and additive scores
    of all T queries are one batched operation; any other score sees one query at a time."""
    if not isinstance(score, nn.Module):
        raise TypeError(f"score must be a score module (nn.scoring), got {type(score).__name__}")
    check_tensor("h", h, min_dim=3)
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != h.shape[:2]:
        got = f"{getattr(mask, 'dtype', type(mask).__name__)} {tuple(getattr(mask, 'shape', ()))}"
        raise TypeError(f"mask must be a bool tensor (B, S) = {tuple(h.shape[:2])} (True: a real source "
                        f"word), got {got}")
    bias, empty = _mask_bias(mask, h.dtype)
    if isinstance(score, DotScore):
        scores = lambda queries: queries @ h.transpose(1, 2)  # u e^T: (B, T, S)
    elif isinstance(score, GeneralScore):
        keys = score.W(h).transpose(1, 2)  # (e W^T)^T: (B, Dh, S)
        scores = lambda queries: queries @ keys  # (B, T, S)
    elif isinstance(score, AdditiveScore):
        keys = score.W_h(h).unsqueeze(1)  # e W_h: (B, S, attn_dim) -> (B, 1, S, attn_dim)
        scores = lambda queries: score.v(torch.tanh(score.W_s(queries).unsqueeze(2) + keys)).squeeze(-1)
    else:
        scores = lambda queries: torch.stack([score(queries[:, t], h) for t in range(queries.size(1))], 1)
    return lambda queries: _weights_and_context(scores(queries), h, bias, empty)


def _mask_bias(mask: torch.Tensor, dtype: torch.dtype):
    """``(bias (B, 1, S), empty (B, 1, 1) or None)``: ``bias`` is 0 at real source tokens and
    -inf at padding, added to the scores before the softmax (the same weights as
    ``masked_fill``); ``empty`` marks the rows with no real token (all-zero bias instead:
    their weights are zeroed after the softmax), None when there is none."""
    empty = ~mask.any(-1, keepdim=True).unsqueeze(1)  # (B, 1, 1)
    bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))
    bias = bias.unsqueeze(1).masked_fill(empty, 0.0)  # (B, 1, S)
    return bias, (empty if bool(empty.any()) else None)


def _weights_and_context(scores, h, bias, empty):
    """Softmax of ``scores (B, T, S) + bias`` over the source, zeroed on ``empty`` rows, and
    the contexts ``(B, T, Dh)``."""
    weights = torch.softmax(scores + bias, dim=-1)  # (B, T, S)
    if empty is not None:
        weights = weights.masked_fill(empty, 0.0)
    return weights @ h, weights


def _context_into_cell_layers(D: int, Dh: int, V: int) -> dict[str, nn.Module]:
    """The GRU reads ``[y; c]`` (D + Dh); the output is read from ``[u_t; c; y]``."""
    return {"cell": nn.GRUCell(D + Dh, Dh),
            "readout": nn.Sequential(nn.Linear(2 * Dh + D, Dh), nn.Tanh(), nn.Linear(Dh, V))}


def _fixed_context_layers(score: str, D: int, Dh: int, V: int) -> dict[str, nn.Module]:
    return _context_into_cell_layers(D, Dh, V)  # no score: the context never changes


def _bahdanau_layers(score: str, D: int, Dh: int, V: int) -> dict[str, nn.Module]:
    return {"score": make_score(score, Dh, Dh), **_context_into_cell_layers(D, Dh, V)}


def _luong_layers(score: str, D: int, Dh: int, V: int) -> dict[str, nn.Module]:
    return {"score": make_score(score, Dh, Dh),
            "cell": nn.GRUCell(D, Dh),  # reads y only
            "combine": nn.Linear(2 * Dh, Dh, bias=False),  # W_c [c_t; u_t]
            "readout": nn.Linear(Dh, V)}


@dataclass(frozen=True)
class Decoder:
    """One decoder: ``layers(score, D, Dh, V)`` builds its layers by name, in creation
    order (``score`` only where it attends); ``step`` is its decoder step (above)."""

    layers: Callable[[str, int, int, int], dict[str, nn.Module]]
    step: Callable[..., tuple]


DECODERS: dict[str, Decoder] = {
    "none": Decoder(_fixed_context_layers, fixed_context_step),
    "bahdanau": Decoder(_bahdanau_layers, bahdanau_step),
    "luong": Decoder(_luong_layers, luong_step),
}
"""Decoder kind (the ``attention`` argument of :class:`Seq2Seq`) -> its layers and step."""
ATTENTIONS = tuple(DECODERS)


class Seq2Seq(nn.Module):
    """Bidirectional GRU encoder and a GRU decoder with the chosen attention.

    Args:
        attention: the decoder, a name in :data:`DECODERS`: ``"none"``, ``"bahdanau"``
            or ``"luong"``.
        score: a name in :data:`~attention_core.nn.scoring.SCORES` (ignored for ``"none"``).
        embed_dim, hidden_size: sizes D and d_h (Dh even: Dh/2 per encoder direction).
    """

    def __init__(self, attention: str = "bahdanau", score: str = "additive", embed_dim: int = 32,
                 hidden_size: int = 64):
        super().__init__()
        if attention not in DECODERS:
            raise ValueError(f"attention must be one of {list(DECODERS)}, got {attention!r}")
        check_positive_int("embed_dim", embed_dim)
        check_positive_int("hidden_size", hidden_size, minimum=2)
        check_tensor_size("hidden_size", (3 * hidden_size, hidden_size + embed_dim))  # a GRU cell's weights
        if hidden_size % 2:
            raise ValueError(f"hidden_size must be even (half per encoder direction), got {hidden_size}")
        D, Dh = embed_dim, hidden_size
        self.attention = attention
        self.src_embed = nn.Embedding(len(SOURCE_VOCAB), D, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(len(TARGET_VOCAB), D, padding_idx=PAD)
        self.encoder = nn.GRU(D, Dh // 2, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(Dh, Dh)  # final encoder states -> u_0 (and c for "none")
        self.score = None  # the attending decoders replace it
        for name, layer in DECODERS[attention].layers(score, D, Dh, len(TARGET_VOCAB)).items():
            setattr(self, name, layer)
        self.score_name = None if self.score is None else score

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor):
        """Encoder states ``e_1 ... e_S`` as ``h (B, S, Dh)``, the padding mask ``(B, S)`` and
        the first decoder state ``u_0 (B, Dh)``."""
        packed = pack_padded_sequence(self.src_embed(src), src_lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        out, last = self.encoder(packed)  # last: (2, B, Dh/2), forward and backward
        h, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        # u_0 from both directions' final states: the book's choice (Bahdanau uses the backward one only)
        u0 = torch.tanh(self.bridge(torch.cat((last[0], last[1]), -1)))  # (B, Dh)
        return h, src != PAD, u0

    def step(self, y: torch.Tensor, state: torch.Tensor, h, mask, fixed_context):
        """Decoder steps from the previous tokens' embeddings ``y (B, T, D)``:
        ``(logits (B, T, vocab_size), last state (B, Dh), weights (B, T, S) or None)``; the
        decoder's step function from :data:`DECODERS` does the work."""
        return DECODERS[self.attention].step(self, y, state, h, mask, fixed_context)

    def forward(self, src, src_lengths, tgt_in):
        """Teacher-forced pass: ``(logits (B, T, vocab_size), weights (B, T, S) or None)``,
        one call of the decoder's step function over the whole target ``tgt_in``."""
        device = self.src_embed.weight.device
        check_token_ids("src", src, len(SOURCE_VOCAB), device)
        check_token_ids("tgt_in", tgt_in, len(TARGET_VOCAB), device)
        h, mask, state = self.encode(src, src_lengths)
        logits, _, weights = self.step(self.tgt_embed(tgt_in), state, h, mask, state)
        return logits, weights

    def forward_by_steps(self, src, src_lengths, tgt_in):
        """The teacher-forced pass one token at a time, as the decoder runs when it
        generates: the reference that :meth:`forward` must equal."""
        device = self.src_embed.weight.device
        check_token_ids("src", src, len(SOURCE_VOCAB), device)
        check_token_ids("tgt_in", tgt_in, len(TARGET_VOCAB), device)
        h, mask, state = self.encode(src, src_lengths)
        fixed = state  # the "none" decoder's context c: the encoder's summary, u_0
        logits, weights = [], []
        for t in range(tgt_in.size(1)):
            out, state, w = self.step(self.tgt_embed(tgt_in[:, t:t + 1]), state, h, mask, fixed)
            logits.append(out)
            weights.append(w)
        return torch.cat(logits, 1), (None if weights[0] is None else torch.cat(weights, 1))

    @torch.no_grad()
    def greedy_decode(self, src, src_lengths, max_len: int | None = None):
        """Decode by taking the most likely token at each step, up to EOS or ``max_len``
        (default: source length + 1). Returns ``(tokens (B, T), weights (B, T, S) or
        None)``; positions after a sequence's EOS hold PAD."""
        h, mask, state = self.encode(src, src_lengths)
        fixed = state
        max_len = src.size(1) + 1 if max_len is None else max_len
        y = torch.full((src.size(0),), BOS, device=src.device)
        tokens, weights = [], []
        done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        for _ in range(max_len):
            out, state, w = self.step(self.tgt_embed(y).unsqueeze(1), state, h, mask, fixed)  # one step
            y = out[:, 0].argmax(-1).masked_fill(done, PAD)
            tokens.append(y)
            weights.append(w)
            done |= y == EOS
            if done.all():
                break
        return torch.stack(tokens, 1), (None if weights[0] is None else torch.cat(weights, 1))

    def translate(self, sentences) -> list[list[str]]:
        """Greedy translations of source sentences, as target words (EOS removed)."""
        batch = encode_batch(sentences, self.src_embed.weight.device)  # on the model's device
        tokens, _ = self.greedy_decode(batch.src, batch.src_lengths)
        return [_words(row) for row in tokens.tolist()]


def _words(ids) -> list[str]:
    words = []
    for i in ids:
        if i in (EOS, PAD):
            break
        words.append(TARGET_VOCAB[i])
    return words


def seq2seq_loss(model: Seq2Seq, batch: Batch) -> torch.Tensor:
    """Mean cross-entropy of the teacher-forced outputs over real target tokens (PAD ignored)."""
    if not isinstance(model, Seq2Seq):
        raise TypeError(f"model must be a Seq2Seq, got {type(model).__name__}")
    if not isinstance(batch, Batch):
        raise TypeError(f"batch must be a Batch (encode_batch(sentences)), got {type(batch).__name__}")
    logits, _ = model(batch.src, batch.src_lengths, batch.tgt_in)
    return nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), batch.tgt_out.reshape(-1),
                                       ignore_index=PAD)


def train_seq2seq(attention: str = "bahdanau", score: str = "additive", steps: int = 600,
                  batch_size: int = 64, min_len: int = 3, max_len: int = 12, lr: float = 5e-3,
                  seed: int = 0, progress: bool = True, generator: torch.Generator | None = None,
                  **sizes):
    """Train a :class:`Seq2Seq` on random sentences of ``min_len``-``max_len`` words,
    seeded (the same seed gives the same model); ``sizes`` are ``embed_dim`` and
    ``hidden_size``. Returns ``(model, losses)``.

    ``seed`` seeds the initial weights (:func:`~attention_core.models.seeding.seeded`) and,
    without a ``generator``, the sentences; torch's global generator is left as it was."""
    with seeded(seed):
        model = Seq2Seq(attention, score, **sizes)
    make_batch = lambda g: random_batch(g, batch_size, min_len, max_len)
    name = attention if model.score_name is None else f"{attention}-{score}"
    return train_model(model, make_batch, steps, lr=lr, seed=seed, progress=progress, desc=name,
                       loss_fn=seq2seq_loss, generator=generator)


def exact_match(model: Seq2Seq, sentences) -> float:
    """Fraction of ``sentences`` whose greedy translation is exactly right."""
    if not isinstance(model, Seq2Seq):
        raise TypeError(f"model must be a Seq2Seq, got {type(model).__name__}")
    batch = encode_batch(sentences, model.src_embed.weight.device)  # on the model's device
    tokens, _ = model.greedy_decode(batch.src, batch.src_lengths)
    return sum(_words(row) == translate(s) for row, s in zip(tokens.tolist(), sentences)) / len(sentences)


@torch.no_grad()
def alignment_accuracy(model: Seq2Seq, sentences) -> float:
    """Fraction of output words whose largest attention weight lies on the source word
    they translate. The task reverses the sentence, so output ``t`` of an ``S``-word
    sentence translates source word ``S - 1 - t``; weights come from the teacher-forced
    pass, so every sentence is scored on its reference outputs."""
    if not isinstance(model, Seq2Seq):
        raise TypeError(f"model must be a Seq2Seq, got {type(model).__name__}")
    if model.score is None:
        raise ValueError(f"alignment_accuracy needs an attention model, got attention={model.attention!r}")
    batch = encode_batch(sentences, model.src_embed.weight.device)  # on the model's device
    _, weights = model(batch.src, batch.src_lengths, batch.tgt_in)  # (B, T, S)
    hits = total = 0
    for b, n in enumerate(batch.src_lengths.tolist()):
        reversed_positions = torch.arange(n - 1, -1, -1, device=weights.device)  # (n,)
        hits += (weights[b, :n].argmax(-1) == reversed_positions).sum().item()
        total += n
    return hits / total
