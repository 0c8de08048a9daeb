"""Every chapter: the "Check yourself" questions, one function per chapter, shown by
:func:`~attention_core.book.quiz.quiz` before the chapter's exercises.

Every number a question quotes or expects is computed here, by the package, when the
page is built (a worked example run through ``scaled_dot_product_attention``, a cache
priced by ``kv_cache_bytes``...), never typed in. Wrong choices and known mistakes are
the misunderstandings seen in teaching code: scaling by sqrt(d_model) instead of
sqrt(d_k), fully masked rows that turn uniform instead of zero, masking rows where
columns are meant, the number of key/value heads confused with the group size, KV-cache
sizes without the factor 2 or without GQA.
"""

from __future__ import annotations

import math
import random
import zlib

import torch

from ..models import circuits, interpret, llm_probes, scaling
from ..models.smollm import SmolLMConfig
from ..nn import functional, masks, multihead, positional, sparse
from ..nn.block import TransformerBlock
from ..nn.flash import flash_attention, online_softmax
from ..nn.heads import repeat_kv, split_heads
from ..nn.kv_cache import kv_cache_bytes
from ..nn.kv_memory import KVLayout, kv_memory_bytes
from ..nn.metrics import attention_entropy
from .selfcheck import Choice, MultipleChoice, Numeric

__all__ = [
    "ch01", "ch02", "ch03", "ch04", "ch05", "ch06", "ch07", "ch08", "ch09", "ch10", "ch11", "ch12", "ch13",
    "ch14", "ch15", "QUESTIONS",
]

MiB = 2**20


def _g(x: float, digits: int = 3) -> str:
    """``x`` rounded for a question's text."""
    return f"{x:.{digits}g}"


def _mc(prompt: str, *choices: tuple[str, bool, str]) -> MultipleChoice:
    """A multiple-choice question, its choices written right one first and shown in an order
    fixed by the prompt (the same on every build, different from question to question)."""
    order = random.Random(zlib.crc32(prompt.encode())).sample(range(len(choices)), len(choices))
    return MultipleChoice(prompt, tuple(Choice(*choices[i]) for i in order))


def _tensor(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _vec(x: torch.Tensor) -> str:
    """A vector as ``(1, 0, 2)``."""
    return "(" + ", ".join(_g(v) for v in x.tolist()) + ")"


def _mat(x: torch.Tensor) -> str:
    """A matrix as ``[[0, 1], [0.5, 0.5]]``."""
    return "[" + ", ".join("[" + ", ".join(_g(v) for v in row) + "]" for row in x.tolist()) + "]"


# --- chapter 1 ---------------------------------------------------------------------------

def ch01():
    q = _tensor([[1.0, 1.0]])
    k = _tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    v = _tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    out, w = functional.scaled_dot_product_attention(q, k, v)
    unscaled = functional.softmax(q @ k.T)
    uniform = torch.full((8,), 1 / 8, dtype=torch.float64)
    ln8 = attention_entropy(uniform).item()
    return [
        Numeric(f"A query {_vec(q[0])} meets the keys {_vec(k[0])}, {_vec(k[1])} and {_vec(k[2])} "
                f"(d_k = 2). With scaled dot-product attention, what weight does the query give the "
                f"first key? Two decimals are enough.",
                answer=w[0, 0].item(), tolerance=0.006,
                why=f"The scores are {_vec((q @ k.T)[0])}, scaled by 1/√2, and the softmax gives "
                    f"{_vec(w[0])}: the first and third keys tie.",
                hint="Score each key with a dot product, divide by √d_k, then take the softmax of the row.",
                mistakes=((unscaled[0, 0].item(), f"That is the softmax of the raw scores "
                                                  f"{_vec((q @ k.T)[0])}: "
                           "divide them by √d_k = √2 first."),)),
        Numeric("In the same example, what is the first entry of the output z, the blend of the values "
                f"{_vec(v[0])}, {_vec(v[1])}, {_vec(v[2])}?",
                answer=out[0, 0].item(), tolerance=0.006,
                why=f"z = Σ α_j v_j = {_vec(out[0])}: the first entry collects the weights of the "
                    "first and third values.",
                hint="Multiply each value by its weight and add the three vectors.",
                mistakes=((w[0, 0].item(), "That is the first weight; the output is the weighted sum of "
                           "the values, so add the third value's contribution too."),)),
        Numeric("A row of weights is uniform over 8 keys. What is its entropy, in nats?",
                answer=ln8, tolerance=0.01,
                why=f"A uniform row has the largest entropy, ln 8 = {ln8:.3f} nats; one key alone would "
                    f"give 0.",
                hint="The entropy is −Σ α log α with the natural logarithm.",
                mistakes=((3.0, "3 is log₂ 8, the entropy in bits; the book measures in nats (natural "
                                "log)."),)),
        _mc("Why does a stable softmax subtract each row's maximum before exponentiating?",
            ("So that no exp overflows; the weights are exactly the same", True,
             "softmax(x) = softmax(x − c) for any c; after subtracting the maximum every exp is at most 1, "
             "so scores of 10⁴ no longer give inf/inf."),
            ("To make the weights sharper", False,
             "Subtracting a constant from every score of a row leaves the weights unchanged; only a scale "
             "(a temperature) makes them sharper."),
            ("So that the weights sum to one", False,
             "The division by the row's sum already makes them sum to one, with or without the shift."),
            ("To give the largest score a weight of exactly 1", False,
             "Its exp becomes 1, but the weight is that divided by the row's sum, which also holds the "
             "other keys' positive exps, so it stays below 1.")),
        _mc("Without a mask, can a softmax weight be exactly zero in exact arithmetic?",
            ("No: every exp is positive, so every key keeps some weight", True,
             "e^x > 0 for every finite x; only a mask (a score of −∞) removes a key (chapter 5)."),
            ("Yes, for every key whose score is negative", False,
             "A negative score gives a small weight, e^x with x < 0, but never zero."),
            ("Yes, for every key scoring below the row's mean", False,
             "Being below the mean makes a weight smaller than uniform, not zero."),
            ("Yes, once d_k is large enough", False,
             "Without the 1/√d_k scale, a large d_k makes rows peaked (chapter 2), and floating point may "
             "round tiny weights to 0, "
             "but mathematically they stay positive.")),
    ]


# --- chapter 2 ---------------------------------------------------------------------------

def ch02():
    mha = multihead.MultiHeadAttention(512, 8)
    d_model, d_k = mha.embed_dim, mha.head_dim
    q = _tensor([[2.0, 2.0, 2.0, 2.0]])
    k = _tensor([[1.0, 1.0, 1.0, 1.0]])
    big, head = 1024, 64
    samples = 20_000
    measured = scaling.score_variance(head, num_samples=samples)
    raw = (q @ k.T).item()
    scaled = raw / math.sqrt(q.shape[-1])
    return [
        _mc(f"A model of width d_model = {d_model} splits each token's query and key into "
            f"{mha.num_heads} heads of d_k = {d_k} entries each (chapter 4 builds them). By what does "
            "each head divide its scores?",
            (f"√{d_k} = {_g(math.sqrt(d_k))}, the square root of the head's width d_k", True,
             f"Each head compares vectors of d_k = {d_k} entries. If their entries are independent with "
             f"mean 0 and variance 1, their dot product has variance d_k, and dividing by its standard "
             f"deviation √d_k brings the scores back to unit variance. With another variance that does "
             f"not depend on d_k, it still removes the growth with d_k."),
            (f"√{d_model} ≈ {_g(math.sqrt(d_model))}, the square root of d_model", False,
             f"A frequent bug: the scores are dot products of {d_k}-entry vectors, not {d_model}-entry "
             f"ones; dividing by √d_model makes every head's scores {_g(math.sqrt(d_model / d_k))} times "
             f"too small and its softmax too flat."),
            (f"{d_k}, the head's width itself", False,
             f"Dividing by d_k gives the scores a variance of 1/d_k = {_g(1 / d_k)}, far below 1: "
             f"the softmax becomes nearly uniform."),
            (f"√{mha.num_heads}, the square root of the number of heads", False,
             "The number of heads does not enter a head's scores; only its width does.")),
        Numeric(f"The entries of q and k are independent, with mean 0 and variance 1, and d_k = {head}. "
                "What is the variance of the unscaled score q · k?",
                answer=float(head), tolerance=0.5,
                why=f"q · k is a sum of {head} independent products, each of variance 1: the variance is "
                    f"d_k = {head} (the package measures {measured:.1f} over {samples:,} random pairs).",
                hint="Var(Σ x_i y_i) is the sum of the variances of the products when they are independent.",
                mistakes=((math.sqrt(head), f"{math.sqrt(head):g} = √{head} is the standard deviation, "
                                            "not the variance."),
                          (1.0, "1 is the variance after dividing by √d_k; the question asks before "
                                "scaling."))),
        Numeric(f"q = {_vec(q[0])} and k = {_vec(k[0])}. What is the scaled score q · k / √d_k?",
                answer=scaled, tolerance=0.01,
                why=f"q · k = {_g(raw)} and d_k = 4, so {_g(raw)} / 2 = {_g(scaled)}.",
                hint="d_k is the number of entries of q.",
                mistakes=((raw, "That is the raw dot product; divide by √d_k = 2."),
                          (raw / 4, "That divides by d_k = 4; the scale is 1/√d_k."))),
        _mc(f"Without the 1/√d_k scale, at d_k = {big} with random unit-variance entries, the scores have a "
            f"standard deviation of √{big} = {math.sqrt(big):g}. What happens to most rows of the softmax?",
            ("They saturate: nearly all weight on one key, and almost no gradient flows back", True,
             "With scores spread that widely the largest one usually wins "
             "outright; a saturated softmax has a Jacobian close to zero."),
            ("They become uniform", False,
             "Uniform rows come from scores that are all alike (too small), the opposite of what large "
             "unscaled scores do."),
            ("They turn into NaN", False,
             "A stable softmax subtracts the maximum, so large scores do not overflow; they saturate."),
            ("Nothing: training learns to shrink the scores", False,
             "Saturation is there before any training, at initialisation; it is not learned confidence, "
             "and saturated rows pass back almost no gradient to learn from.")),
    ]


# --- chapter 3 ---------------------------------------------------------------------------

def ch03():
    L = 4096
    per = torch.empty((), dtype=torch.float32).element_size()
    mib = L * L * per / MiB
    x = _randn(5, 8, seed=0)
    wq, wk = (_randn(8, 4, seed=s) for s in (1, 2))
    scores = (x @ wq) @ (x @ wk).T
    symmetric = torch.allclose(scores, scores.T)
    assert not symmetric
    return [
        _mc("In self-attention the scores are ω_ij = (x_i W_q) · (x_j W_k). Is the score matrix symmetric?",
            ("Not in general: W_q W_kᵀ need not be symmetric, so i looking at j differs from j looking at i",
             True,
             "The score is the bilinear form x_i W_q W_kᵀ x_jᵀ, symmetric for every input only if W_q W_kᵀ "
             "is; on a random "
             "5-token example the package's scores are not symmetric."),
            ("Yes, because a dot product is symmetric", False,
             "q_i · k_j = k_j · q_i, but ω_ji = q_j · k_i uses other vectors: the query of j and the key of "
             "i."),
            ("Yes, because the same sequence gives queries and keys", False,
             "The same x, but two different projections; ω_ij and ω_ji are different numbers.")),
        _mc("You shuffle the tokens of a sequence (no positional encoding and no mask). What happens "
            "to the outputs of self-attention?",
            ("They are shuffled the same way", True,
             "Without positional encoding or a mask that depends on positions, self-attention is permutation "
             "equivariant: each output depends on its own token and the set of all tokens, not their "
             "order. Word order must be added (chapter 10)."),
            ("They stay exactly as they were, in the old order", False,
             "That would be invariance; each output follows its token to its new place."),
            ("They change unpredictably", False,
             "Nothing in the computation depends on positions, so every output is the same vector, moved.")),
        Numeric(f"How much memory do one head's float32 attention weights take for L = {L} tokens, in MiB?",
                answer=mib, tolerance=0.005 * mib, unit="MiB",
                why=f"L × L = {L * L:,} weights of {per} bytes: {_g(mib)} MiB, for one head of one "
                    "sequence in one layer.",
                hint="The weights form an L × L matrix; a float32 takes 4 bytes; 1 MiB = 2²⁰ bytes.",
                mistakes=((L * per / MiB, "That is L weights; the matrix has L × L of them."),
                          (mib / 2, "That counts 2 bytes per weight (float16); the question says float32."),
                          (L * L * per / 1e6, "That is in MB (10⁶ bytes); 1 MiB = 2²⁰ bytes."))),
        Numeric("Doubling the sequence length multiplies the memory of the score matrix by how much?",
                answer=4.0, tolerance=0.01,
                why="The score matrix is L × L: (2L)² = 4L².",
                hint="How many entries does an L × L matrix have?",
                mistakes=((2.0, "The projections' cost grows by 2; the L × L score matrix grows with the "
                                "square."),)),
        _mc("X is (T, d_model) and W_q is (d_model, d_k). What is the shape of Q = X W_q?",
            ("(T, d_k)", True, "One row per token, one column per entry of a query: row vectors, as in the "
                               "book."),
            ("(d_k, T)", False, "That is Qᵀ; the book writes tokens as rows."),
            ("(T, T)", False, "T × T is the shape of the scores Q Kᵀ, not of Q."),
            ("(d_model, d_k)", False, "That is the shape of W_q itself.")),
    ]


# --- chapter 4 ---------------------------------------------------------------------------

def ch04():
    d, h = 64, 4
    count = sum(p.numel() for p in multihead.MultiHeadAttention(d, h).parameters())
    count8 = sum(p.numel() for p in multihead.MultiHeadAttention(d, 2 * h).parameters())
    no_bias = sum(p.numel() for p in multihead.MultiHeadAttention(d, h, bias=False).parameters())
    x = torch.zeros(2, 5, 3 * 4)
    split = tuple(split_heads(x, 3).shape)
    merged = split_heads(x, 3).contiguous()  # an attention output: a fresh (B, H, T, E) tensor
    try:
        merged.transpose(1, 2).view(2, 5, 12)
        view_fails = False
    except RuntimeError:
        view_fails = True
    assert view_fails and count == count8
    return [
        Numeric(f"How many parameters does `MultiHeadAttention({d}, {h})` have (with biases)?",
                answer=float(count), tolerance=0.5,
                why=f"Four d_model × d_model matrices (W_q, W_k, W_v, W^O) and four biases: "
                    f"4·{d}² + 4·{d} = {count:,}.",
                hint="Count W_q, W_k, W_v and W^O, each d_model × d_model, and their biases.",
                mistakes=((float(no_bias), "That leaves out the four bias vectors."),
                          (float(3 * d * d + 3 * d), "That forgets the output projection W^O."),
                          (float(4 * d * (d // h) + 4 * (d // h)),
                           "The heads together are as wide as d_model: each projection is d_model × d_model, "
                           "not d_model × d_k."))),
        _mc(f"Going from {h} to {2 * h} heads at d_model = {d}, the parameter count...",
            ("stays the same", True,
             f"Each head gets narrower (d_k = d_model / h) and the concatenation stays d_model wide: "
             f"{count:,} parameters for both."),
            ("doubles", False, "The heads share the d_model columns of each projection; more heads means "
                               "narrower heads."),
            ("halves", False, "Narrower heads, but twice as many: the total is unchanged.")),
        _mc("`split_heads` turns the projections of shape (B, T, H·E) into which shape?",
            (f"(B, H, T, E), for example {split}", True,
             "A view to (B, T, H, E) then a transpose of the T and H axes, so each head is a (T, E) slab."),
            ("(B, T, H, E)", False,
             "That is the view before the transpose; attention wants the heads as a batch axis before T."),
            ("(B, H, E, T)", False, "The keys are transposed inside the score product, not when the heads "
                                    "are split.")),
        _mc("After attention, `out = weights @ v` is a fresh, contiguous (B, H, T, E) tensor with H > 1 "
            "heads and T > 1 tokens. You merge its heads with `out.transpose(1, 2).view(B, T, H * E)`. "
            "What happens?",
            ("It raises: after the transpose the tensor is not contiguous; use reshape (or contiguous) "
             "instead", True,
             "A transpose only swaps strides; view needs memory laid out in the new order, and the "
             "package's check confirms that this view raises. (Some fused kernels return memory "
             "already laid out as (B, T, H, E); do not rely on it, use reshape.)"),
            ("It works, view and reshape are the same", False,
             "reshape copies when it must; view never copies, so it refuses a non-contiguous tensor."),
            ("It works but mixes tokens of different heads", False,
             "view would keep the order if it ran; it refuses to run instead.")),
    ]


# --- chapter 5 ---------------------------------------------------------------------------

def ch05():
    L = 4
    row = masks.causal_mask(L)[2].tolist()
    inverted = [not b for b in row]
    strict = masks.causal_mask(L).tril(-1)[2].tolist()
    scores = _tensor([[[3.0, 0.0, 1.0]]])
    allowed = torch.tensor([[[False, True, True]]])
    # a one-dimensional query 1 and keys equal to the scores, unscaled: q · k_j = scores_j
    one, keys, values = scores.new_ones(1, 1, 1), scores.transpose(-1, -2), torch.eye(3)[None].double()
    _, masked = functional.scaled_dot_product_attention(one, keys, values, attn_mask=allowed, scale=1.0)
    _, unmasked = functional.scaled_dot_product_attention(one, keys, values, scale=1.0)
    S = 5
    none = torch.zeros(1, 1, S, dtype=torch.bool)
    _, empty = functional.scaled_dot_product_attention(torch.randn(1, 1, 4), torch.randn(1, S, 4),
                                                       torch.randn(1, S, 4), attn_mask=none)
    trick = functional.softmax(torch.randn(1, S).masked_fill(~none[0], -1e6))
    assert (empty == 0).all() and torch.allclose(trick, torch.full_like(trick, 1 / S))
    pad = masks.padding_mask(torch.tensor([3, 5]), 5)
    n_true = int(masks.causal_mask(6).sum())

    def fmt(bools):
        return "[" + ", ".join("T" if b else "F" for b in bools) + "]"

    return [
        _mc(f"Which is row 2 of `causal_mask({L})` (True = may attend; T/F below)?",
            (fmt(row), True, "Query 2 may attend to keys 0, 1 and 2, itself included: True where j ≤ i."),
            (fmt(inverted), False,
             "That is the mask inverted, the convention of `nn.MultiheadAttention` (True = masked out); "
             "the book and `F.scaled_dot_product_attention` use True = may attend."),
            (fmt(strict), False, "That leaves out the diagonal: a token may attend to itself."),
            (fmt([True] * L), False, "That is no mask at all: query 2 could read the future keys.")),
        _mc(f"A query has every one of its {S} keys masked (say, the first position of a left-padded "
            "sequence under a causal mask). What weights does `ac.scaled_dot_product_attention` give "
            "that row?",
            ("All zeros, and a zero output", True,
             "The package returns zero weights for a row with no allowed key, so that row contributes "
             "nothing and nothing is NaN."),
            (f"Uniform, {_g(1 / S)} each", False,
             f"That is what the −10⁶ trick gives: every score of the row is equally low, so the softmax "
             f"spreads the weight evenly ({_g(trick[0, 0].item())} each here), and that position "
             f"reads an average of the values."),
            ("NaN", False, "That is what a plain softmax over a row of −∞ gives (0/0); the package guards "
                           "against it.")),
        _mc("`padding_mask(torch.tensor([3, 5]), 5)` has shape "
            f"{tuple(pad.shape)}. What does it mask out for the first sequence (length 3)?",
            ("The key columns 3 and 4, for every query", True,
             f"Its row is {fmt(pad[0, 0].tolist())}, broadcast over the queries: no query reads the "
             "padded keys."),
            ("The query rows 3 and 4", False,
             "Masking rows where columns are meant: the real queries would still read the padded keys, "
             "and their outputs would change with the padding."),
            ("Both the rows and the columns 3 and 4", False,
             "The mask has a single row broadcast over all queries: it only removes keys. The outputs "
             "of padded queries are simply ignored later.")),
        Numeric(f"A row has the scores {_vec(scores[0, 0])} and the mask forbids the first key. What weight "
                "does the second key get?",
                answer=masked[0, 0, 1].item(), tolerance=0.006,
                why=f"Only the second and third keys remain: e⁰ / (e⁰ + e¹) = {_g(masked[0, 0, 1].item())}.",
                hint="Drop the masked score, then take the softmax of what is left.",
                mistakes=((unmasked[0, 0, 1].item(), "That is the weight without the mask; the masked "
                           "key's share goes to the allowed keys."),)),
        Numeric("How many entries of `causal_mask(6)` are True?",
                answer=float(n_true), tolerance=0.5,
                why=f"Row i has i + 1 True entries: 1 + 2 + ... + 6 = {n_true}.",
                hint="Count the allowed keys of each query row, diagonal included.",
                mistakes=((float(n_true - 6), "That leaves out the diagonal: each token attends to itself."),
                          (36.0, "That is every entry; the causal mask forbids the future keys."))),
        _mc("You pass the book's boolean mask (True = may attend) to `torch.nn.MultiheadAttention`. What "
            "must you do?",
            ("Pass `~mask`: its boolean masks mean True = masked out", True,
             "nn.MultiheadAttention reads boolean masks the other way round; F.scaled_dot_product_attention "
             "reads them as the book does."),
            ("Nothing, every PyTorch API uses the same convention", False,
             "nn.MultiheadAttention and F.scaled_dot_product_attention disagree: check each API."),
            ("Transpose it", False, "The shape is right; the meaning of True is flipped.")),
    ]


# --- chapter 6 ---------------------------------------------------------------------------

def ch06():
    d, ff = 256, 1024
    block = TransformerBlock(d, 4, ff)
    total = sum(p.numel() for p in block.parameters())
    mlp = sum(p.numel() for p in block.mlp.parameters())
    x = _tensor([[2.0, 4.0, 6.0, 8.0]])
    ln = torch.nn.functional.layer_norm(x, (4,))
    unbiased = (x - x.mean()) / x.std(unbiased=True)
    return [
        _mc("LayerNorm in a Transformer normalises over...",
            ("each token's own features", True,
             "Every token's vector gets mean 0 and standard deviation 1 over its d_model entries (before "
             "the gain and bias); tokens are never mixed, so it works for any batch size or length."),
            ("the batch, for each feature", False, "That is BatchNorm, which Transformers avoid."),
            ("the tokens of the sequence, for each feature", False,
             "That would mix tokens; in a Transformer only attention mixes tokens.")),
        Numeric(f"What fraction of the weights of `TransformerBlock({d}, 4, {ff})` sits in its "
                "feed-forward network?",
                answer=mlp / total, tolerance=0.01,
                why=f"{mlp:,} of {total:,} parameters: {_g(mlp / total)}, about two thirds (8 d_model² in "
                    f"the feed-forward network against 4 d_model² in attention).",
                hint="Count the two linear maps d_model × d_ff and d_ff × d_model, and the attention's four "
                     "d_model × d_model maps.",
                mistakes=(((4 * d * d) / total, "That is the attention's share."),)),
        Numeric(f"LayerNorm without gain and bias of the token {_vec(x[0])}: what is its first entry?",
                answer=ln[0, 0].item(), tolerance=0.006,
                why=f"Mean {_g(x.mean().item())}, variance {_g(x.var(unbiased=False).item())} (divided by "
                    f"n = 4), so the first entry is {_g(ln[0, 0].item())}.",
                hint="Subtract the token's mean, then divide by its standard deviation over the 4 entries.",
                mistakes=((unbiased[0, 0].item(), "That divides the variance by n − 1; LayerNorm divides by "
                                                  "n."),)),
        _mc("What distinguishes a pre-norm block from a post-norm one?",
            ("Pre-norm normalises only each sublayer's input; the residual stream is not normalised "
             "inside the blocks (one final norm follows the last block)", True,
             "x + f(norm(x)) adds each sublayer's output to a stream that no norm rescales inside the "
             "blocks: along one path the gradient reaches each block past no other block's weights (every "
             "path still crosses the final norm and the read-out layer). In chapter 6's runs a 6-block "
             "pre-norm stack trained at lr 0.01 without a warm-up, where post-norm stalled; at 0.02 it "
             "needed one too."),
            ("Pre-norm normalises the stream after each sublayer", False,
             "That is post-norm: norm(x + f(x))."),
            ("Pre-norm has no normalisation in the attention sublayer", False,
             "Both normalise around both sublayers; they differ in where.")),
        _mc("What does RMSNorm drop from LayerNorm, and what follows?",
            ("Subtracting the mean: it rescales each token but keeps its direction", True,
             "x / rms(x) only changes the length (the learned gain, one number per feature, can still turn "
             "it, as LayerNorm's can); LayerNorm's mean subtraction also changes the direction."),
            ("The division: it only centres each token", False, "RMSNorm divides by the root mean square; "
                                                                "it does not centre."),
            ("Nothing, it is LayerNorm computed faster", False,
             "Without the centring it is a different function, not just a faster LayerNorm.")),
    ]


# --- chapter 7 ---------------------------------------------------------------------------

def ch07():
    u = _tensor([[1.0, 2.0]])
    e = _tensor([[1.0, 0.0], [0.0, 1.0]])
    W = _tensor([[1.0, 0.0], [0.0, 2.0]])
    scores = u @ W @ e.T
    w = functional.softmax(scores)
    dot = functional.softmax(u @ e.T)
    bits = 12 * math.log2(14)  # a 12-word sentence from a 14-word vocabulary
    return [
        _mc("Which decoder state is Bahdanau attention's query?",
            ("The previous state u_{t−1}; the context then goes into the recurrent step", True,
             "Bahdanau attends before the step and feeds c_t into the recurrence with y_{t−1}."),
            ("The current state u_t; the context is combined after the step", False,
             "That is Luong's order: attend from u_t, then combine c_t with u_t."),
            ("The last encoder state", False, "The encoder states are the keys and values, not the query.")),
        Numeric(f"Luong's general score u W eᵀ with u = {_vec(u[0])}, W = diag(1, 2) and encoder states "
                f"{_vec(e[0])}, {_vec(e[1])}: what weight does the second state get?",
                answer=w[0, 1].item(), tolerance=0.006,
                why=f"The scores are {_vec(scores[0])}, and the softmax gives {_vec(w[0])}.",
                hint="Compute u W first, then its dot product with each encoder state, then the softmax.",
                mistakes=((dot[0, 1].item(), "That is the dot score u eᵀ, without W."),)),
        _mc("Why is Luong's general score u W eᵀ the ancestor of the Transformer's attention?",
            ("With W = W_q W_kᵀ it is a dot product between a projected query and a projected key", True,
             "u W_q W_kᵀ eᵀ = (u W_q) · (e W_k); scaled by 1/√d_k it is scaled dot-product attention."),
            ("Because it uses a tanh like the Transformer", False, "The additive (Bahdanau) score has the "
                                                                   "tanh; the Transformer has none."),
            ("Because it attends over the decoder's own states", False,
             "It attends over the encoder states; self-attention came later.")),
        _mc("In the context c_t = Σ_i α_{t,i} e_i, what are the keys and the values?",
            ("The encoder states e_i, both", True,
             "The decoder state is the query; the encoder states are scored (keys) and blended (values)."),
            ("The decoder states", False, "The decoder state asks; the source sentence answers."),
            ("The target words y_t", False, "Those are what the decoder predicts, not what it reads.")),
        _mc("A model without attention translates short sentences well and long ones badly. What does "
            "the chapter suggest?",
            ("Attention gives a fresh context each step, so nothing has to fit into one vector", True,
             f"Room in bits is not obviously the limit ({bits:.0f} bits for 12 words, 64 real numbers "
             "in the vector). Why the fixed vector fails is left open: that packing and unpacking a "
             "sentence is hard to learn is a hypothesis the chapter does not test."),
            ("The vector has too few bits to hold 12 words", False,
             f"Twelve words of a 14-word vocabulary carry about {bits:.0f} bits and the vector holds 64 "
             "real numbers, so room is not obviously short; the chapter does not blame capacity, "
             "though it does not rule it out."),
            ("Long sentences need more training data, nothing else", False,
             "With attention, the same data suffices: the architecture is what changes.")),
    ]


# --- chapter 8 ---------------------------------------------------------------------------

def ch08():
    T, w = 16, 4
    window = masks.sliding_window_mask(T, w, causal=True)
    layers = sparse.layers_to_reach(window, 0, T - 1)
    assert layers == math.ceil((T - 1) / (w - 1))
    allowed = int(window.sum())
    return [
        Numeric(f"A causal sliding window of width {w} (`sliding_window_mask({T}, {w}, causal=True)`): "
                f"after how "
                f"many layers can the last of {T} tokens depend on the first?",
                answer=float(layers), tolerance=0.5,
                why=f"Each layer reaches {w - 1} positions further back: ⌈({T} − 1)/({w} − 1)⌉ = {layers}.",
                hint="A query reads itself and the w − 1 tokens before it; how far does the signal move per "
                     "layer?",
                mistakes=((float(T // w), f"{T}/{w} assumes each layer moves w positions; it moves w − 1 "
                           "(the window includes the token itself)."),)),
        Numeric(f"How many (query, key) pairs does that window allow in all ({T} tokens)?",
                answer=float(allowed), tolerance=0.5,
                why=f"{allowed} of the {T * T} pairs: each query reads up to {w} keys, fewer at the start.",
                hint="Count the keys each query reads: min(i + 1, w).",
                mistakes=((float(T * w), "The first queries have fewer than w keys before them."),)),
        _mc("You apply a sliding-window mask to ordinary dense attention. What does it save?",
            ("Nothing, neither compute nor memory: the T × T scores are still computed, then masked", True,
             "Only a kernel that skips the masked entries (like the banded kernel, O(T w)) saves work."),
            ("The masked fraction of the compute", False, "The mask is applied after the scores exist."),
            ("Memory but not compute", False, "The full score matrix is still built.")),
        _mc("What does linear attention change?",
            ("It replaces e^{q·k} by φ(q)·φ(k) and reorders the products, so no T × T matrix is formed", True,
             "(φ(Q) φ(K)ᵀ) V = φ(Q) (φ(K)ᵀ V): O(T F d); causal, it is a recurrence with a fixed-size "
             "state."),
            ("It computes softmax attention exactly, only faster", False,
             "It is a different, flatter attention; Performer's random features only approximate softmax."),
            ("It keeps a window of recent keys", False, "That is sparse (windowed) attention.")),
        _mc("Which is true of Linformer?",
            ("It projects keys and values to r positions, fixes T, and has no causal form", True,
             "P_K and P_V mix all positions, future ones included, and are sized for one T."),
            ("It is exact for every input", False, "It is nearly exact on smooth or low-rank inputs and "
                                                   "lossy on peaked ones."),
            ("It works unchanged for autoregressive decoding", False, "Mixing positions leaks the future.")),
    ]


# --- chapter 9 ---------------------------------------------------------------------------

def ch09():
    layers, heads, kv_heads, head_dim, tokens = 32, 32, 8, 128, 4096
    cache = kv_cache_bytes(layers, kv_heads, head_dim, tokens) / MiB
    mha = kv_cache_bytes(layers, heads, head_dim, tokens) / MiB
    group = heads // kv_heads
    ids = repeat_kv(torch.arange(kv_heads).view(1, kv_heads, 1, 1), group)[0, :, 0, 0]
    head = 14  # 14 // 4 = 3, 14 // 8 = 1, 14 % 8 = 6: each mistake has its own answer
    reads = int(ids[head])
    return [
        Numeric(f"A model has {layers} layers, {heads} query heads, {kv_heads} key/value heads of d_k = "
                f"{head_dim}, "
                f"and stores float16. How many MiB does its KV cache take for one sequence of {tokens} "
                f"tokens?",
                answer=cache, tolerance=0.01 * cache, unit="MiB",
                why=f"2 (keys and values) × {layers} × {kv_heads} × {head_dim} × {tokens} × 2 bytes = "
                    f"{_g(cache)} MiB (`ac.kv_cache_bytes`).",
                hint="Numbers per token: 2 × n_layers × h_kv × d_k; times the tokens; times 2 bytes.",
                mistakes=((cache / 2, "That forgets the factor 2: the cache holds keys and values."),
                          (mha, f"That uses all {heads} query heads; with GQA only the {kv_heads} key/value "
                                "heads are cached."),
                          (mha / 2, "That forgets both the factor 2 (keys and values) and GQA (only the "
                                    "key/value heads are cached)."))),
        _mc(f"`MultiHeadAttention(..., num_heads={heads}, num_kv_heads={kv_heads})`: which key/value head "
            f"does query head {head} read?",
            (f"{reads}", True,
             f"The group size is G = {heads}/{kv_heads} = {group}: query head a reads head ⌊a/G⌋ = "
             f"⌊{head}/{group}⌋ = {reads} (`repeat_kv` lines them up so)."),
            (f"{head // kv_heads}", False,
             f"That divides by the number of key/value heads ({kv_heads}) instead of the group size "
             f"({group}): the two are easy to confuse."),
            (f"{head % kv_heads}", False, "That interleaves the heads; consecutive query heads share a "
                                          "key/value head."),
            (f"{head}", False, "Only MHA has a key/value head per query head.")),
        Numeric(f"By what factor does the cache shrink from MHA ({heads} key/value heads) to this GQA model?",
                answer=mha / cache, tolerance=0.01,
                why=f"The cache is proportional to h_kv: {heads}/{kv_heads} = {_g(mha / cache)}, the group "
                    f"size G.",
                hint="Only the key/value heads are cached.",
                mistakes=((float(kv_heads), f"{kv_heads} is the number of key/value heads; the factor is the "
                           "group size h/h_kv."),)),
        _mc("What is MQA in terms of `num_kv_heads`?",
            ("num_kv_heads = 1: every query head shares one key/value head", True,
             "The group size is then G = h, the largest possible."),
            ("A group size of 1", False, "A group size of 1 means one query head per key/value head: that "
                                         "is MHA."),
            ("num_kv_heads = num_heads", False, "That is ordinary multi-head attention.")),
        _mc("Why does sharing key/value heads speed up decoding?",
            ("Reading the cache is memory-bound: each step reads the whole cache, and sharing cuts the "
             "bytes read", True,
             "A step does about h/h_kv FLOPs per byte of cache at any batch size, far below what an "
             "accelerator needs; once B·S is large compared with d_model, the cache is most of the bytes, "
             "so fewer bytes means a faster step."),
            ("It cuts the FLOPs of the score product", False,
             "Each query head still scores every key; the FLOPs barely change."),
            ("It makes the softmax cheaper", False, "The softmax is a tiny part of a decoding step.")),
    ]


# --- chapter 10 --------------------------------------------------------------------------

def ch10():
    pe = positional.sinusoidal_encoding(8, 8)
    p, dim = 3, 2
    wrong = math.sin(p / 10000 ** (1 / 8))  # exponent i/d instead of 2i/d
    slopes = positional.alibi_slopes(8)
    return [
        Numeric(f"With `sinusoidal_encoding(num_positions, d_model=8)`, what is PE[{p}, {dim}]?",
                answer=pe[p, dim].item(), tolerance=0.006,
                why=f"Dimension {dim} is the sine of pair i = 1: sin({p} / 10000^(2·1/8)) = "
                    f"sin({_g(p / 10000 ** (2 / 8))}) = {_g(pe[p, dim].item())}.",
                hint="PE[p, 2i] = sin(p / 10000^(2i/d_model)).",
                mistakes=((wrong, "That uses the exponent i/d_model with i = 1; the exponent is 2i/d_model."),
                          (math.sin(p), "That forgets the frequency: only pair 0 turns at one radian per "
                                        "position."))),
        _mc("RoPE rotates queries and keys by their positions. On what does a score then depend?",
            ("On the content and the offset p − p' only", True,
             "R_pᵀ R_p' = R_{p'−p}: the absolute positions cancel in the dot product."),
            ("On the absolute positions p and p'", False, "The rotations compose into one rotation by the "
                                                          "offset."),
            ("On the positions only, not the content", False, "The rotated vectors still carry the "
                                                              "content.")),
        _mc("A model with a learned position table of 512 rows gets a sequence of 600 tokens. What happens?",
            ("It cannot run: positions 512 and beyond have no row", True,
             "A learned table is defined only where it was trained; a scheme defined at every position is "
             "needed."),
            ("It extrapolates smoothly", False, "There is no row to read past the last one."),
            ("It wraps around to position 0", False, "Nothing wraps; the look-up fails.")),
        Numeric("ALiBi with 8 heads: what is the slope λ of the first head (a = 0)?",
                answer=slopes[0].item(), tolerance=1e-3,
                why=f"λ_a = 2^(−8(a+1)/h): 2^(−1) = {_g(slopes[0].item())} for the first head.",
                hint="The slopes form a geometric sequence 2^(−8/h), 2^(−16/h), ..., 2^(−8).",
                mistakes=((slopes[-1].item(), "That is the last head's slope, 2^(−8)."),)),
        _mc("Where does ALiBi put position information?",
            ("In the scores: a penalty −λ(i − j) growing with distance", True,
             "Nothing is added to embeddings or rotated; each head's scores get a linear distance bias."),
            ("In the embeddings, like the sinusoidal encoding", False, "The sinusoidal encoding is added to "
                                                                       "the inputs; ALiBi is not."),
            ("In the queries and keys, like RoPE", False, "RoPE rotates q and k; ALiBi leaves them alone.")),
    ]


# --- chapter 11 --------------------------------------------------------------------------

def ch11():
    s = _tensor([1.0, 3.0, 2.0, 5.0])
    weights, trace = online_softmax(s, 2)
    m, l_total, l1, m1 = trace[-1]["m"], trace[-1]["l"], trace[0]["l"], float(trace[0]["m"])
    no_rescale = float(l1) + sum(math.exp(float(x) - float(m)) for x in s[2:])
    q, k, v = (_randn(1, 64, 8, seed=i) for i in range(3))
    atol = 1e-12
    exact = torch.allclose(flash_attention(q, k, v, block_q=16, block_k=16)[0],
                           functional.scaled_dot_product_attention(q, k, v)[0], atol=atol)
    assert exact and torch.allclose(weights, functional.softmax(s))
    return [
        Numeric(f"The online softmax reads the scores {_vec(s)} two at a time. What is the running sum l "
                "after both blocks (relative to the final maximum)?",
                answer=float(l_total), tolerance=0.005,
                why=f"After block 1: m = {_g(m1)}, l = {_g(float(l1))}. Block 2 raises m to {_g(float(m))}, "
                    f"so "
                    f"l is rescaled by e^({_g(m1)}−{_g(float(m))}) and the new terms added: "
                    f"{_g(float(l_total), 4)}.",
                hint="When the maximum grows from m to m', multiply l by e^(m − m') before adding the new "
                     "terms.",
                mistakes=((no_rescale, "That adds the new terms without rescaling the old sum by e^(m − "
                                       "m')."),)),
        _mc("The running maximum grows from m to m'. By what is the unnormalised output z̃ multiplied?",
            ("e^(m − m'), the same factor as l", True, "Both were computed relative to m; the factor moves "
                                                       "them to m'."),
            ("e^(m' − m)", False, "That would grow the old terms; they must shrink relative to the larger "
                                  "maximum."),
            ("1/l", False, "The division by l happens once, at the end.")),
        _mc("Is FlashAttention-style tiling an approximation of attention?",
            ("No: it gives the same output, only never storing the T × T weights", True,
             f"The package's tiled kernel equals scaled_dot_product_attention to {atol:.0e} on a "
             f"{q.shape[-2]}-token example."),
            ("Yes: it drops small weights", False, "Nothing is dropped; the rescaling keeps the sums exact."),
            ("Yes: it uses lower precision", False, "Precision is a separate choice; the algorithm is "
                                                    "exact.")),
        _mc("How does the backward pass get the attention weights it needs?",
            ("It recomputes each tile from the inputs and one logsumexp per row", True,
             "Storing one number per row instead of T per row keeps memory linear."),
            ("It stores them during the forward pass", False, "That is the T × T memory tiling avoids."),
            ("It does not need them", False, "The gradients with respect to q, k and v depend on the "
                                             "weights.")),
    ]


# --- chapter 12 --------------------------------------------------------------------------

def ch12():
    mla = KVLayout(num_layers=61, kv_latent_dim=512, rope_dim=64)
    per_token = kv_memory_bytes(mla, 1) / 1024
    full = KVLayout(num_layers=32, num_kv_heads=8, head_dim=128)
    windowed = KVLayout(num_layers=32, num_kv_heads=8, head_dim=128, window=4096)
    tokens, query_heads = 32768, 32
    ratio = kv_memory_bytes(full, tokens) / kv_memory_bytes(windowed, tokens)
    return [
        Numeric(f"MLA as in DeepSeek-V3: {mla.num_layers} layers, a latent of d_c = {mla.kv_latent_dim} and "
                f"a rotary key of d_R = {mla.rope_dim} per token and layer, float16. How many KiB of cache "
                "per token?",
                answer=per_token, tolerance=0.01 * per_token, unit="KiB",
                why=f"{mla.num_layers} × ({mla.kv_latent_dim} + {mla.rope_dim}) × 2 bytes = "
                    f"{_g(per_token, 4)} KiB (`kv_memory_bytes`): one latent, "
                    "no separate keys and values.",
                hint="Numbers per token and layer: d_c + d_R; times the layers; times 2 bytes.",
                mistakes=((2 * per_token, "MLA caches one latent from which both keys and values are "
                           "rebuilt: no factor 2."),)),
        Numeric(f"Mistral-like: {full.num_layers} layers, {query_heads} query heads and {full.num_kv_heads} "
                f"key/value heads of d_k = {full.head_dim}, a sliding window of {windowed.window}. At "
                f"{tokens:,} tokens, how many times smaller is its cache than with full attention?",
                answer=ratio, tolerance=0.01,
                why=f"The rolling buffer keeps {windowed.window} tokens instead of {tokens:,}: {_g(ratio)} "
                    "times smaller.",
                hint="A window caps the cache at w tokens per layer.",
                mistakes=((query_heads / full.num_kv_heads,
                           f"That is the GQA factor ({query_heads}/{full.num_kv_heads}); both models here "
                           f"use the same {full.num_kv_heads} key/value heads."),)),
        _mc("A model trained with full attention runs with a rolling window and breaks once the window rolls "
            "past its first tokens. Why?",
            ("It parks weight on its first tokens (sinks); once they leave the window that weight spreads "
             "over real tokens and looks like a match", True,
             "Keeping a few sink tokens in the buffer restores it (the chapter's measurement)."),
            ("The window is too small to hold the answer", False,
             "In the chapter's task (has this token appeared among the 4 before it?) the answer needs "
             "only the last 4 tokens, and the window of 8 holds them."),
            ("Positions beyond the window overflow RoPE", False, "RoPE is defined at every position.")),
        _mc("How much memory does a paged KV cache waste per sequence?",
            ("At most one partly filled block", True, "Blocks are allocated as tokens arrive, through a "
                                                      "block table."),
            ("Everything up to max_len, like a contiguous cache", False, "That is what paging avoids."),
            ("Nothing ever", False, "The last block of a sequence is usually only partly filled.")),
        _mc("What can the delta rule do that plain linear attention cannot?",
            ("Overwrite the value stored for a key, by writing a correction", True,
             "U ← U + β kᵀ (v − k U) replaces the value stored under k; linear attention only adds, "
             "U ← U + kᵀ v."),
            ("Store an unbounded number of keys", False, "Its state has a fixed size."),
            ("Compute exact softmax attention", False, "It is a different, recurrent memory.")),
    ]


# --- chapter 13 --------------------------------------------------------------------------

def ch13():
    a1 = _tensor([[[0.0, 1.0], [0.5, 0.5]]])  # (H=1, T, T)
    a2 = _tensor([[[1.0, 0.0], [1.0, 0.0]]])
    rollout = interpret.attention_rollout([a1, a2])
    no_residual = a2[0] @ a1[0]
    eye = torch.eye(2, dtype=torch.float64)
    r1, r2 = 0.5 * a1[0] + 0.5 * eye, 0.5 * a2[0] + 0.5 * eye  # each layer with its residual
    layers, heads = 6, 12
    return [
        Numeric("Attention rollout (residual weight 0.5) of two one-head layers with weights "
                f"{_mat(a1[0])} (layer 1) and {_mat(a2[0])} (layer 2): how much of token 0 "
                "reaches position 1?",
                answer=rollout[1, 0].item(), tolerance=0.006,
                why=f"Each layer becomes A = 0.5 W + 0.5 I, and R = A₂ A₁ gives {_g(rollout[1, 0].item())}.",
                hint="Add the identity for the residual (A = 0.5 W + 0.5 I), then multiply layer 2's A by "
                     "layer 1's.",
                mistakes=((no_residual[1, 0].item(), "That multiplies the raw weights; rollout adds the "
                           "residual as 0.5 I first."),
                          ((r1 @ r2)[1, 0].item(), "That multiplies in the wrong order: later layers go on "
                           "the left, R = A₂ A₁."),
                          (r2[1, 0].item(), "That is layer 2 alone; rollout composes both layers."))),
        _mc(f"all-MiniLM-L6-v2 has {layers} layers of {heads} heads. How many heads does the chapter "
            "classify?",
            (f"{layers * heads}", True, f"Each of the {layers} layers has its own {heads} heads: {layers} × "
                                        f"{heads} = {layers * heads}."),
            (f"{heads}", False, "That is one layer's heads."),
            (f"{layers + heads}", False, f"Every layer has its own {heads} heads: multiply.")),
        _mc("The most attended token in many heads is [CLS]. Replacing it barely changes the output. What "
            "follows?",
            ("Attention is not explanation: weight received is not importance; test importance "
             "directly", True,
             "Sink heads park weight on [CLS]; what matters is measured by changing the input."),
            ("[CLS] is the most important token", False, "Then replacing it would change the output a lot."),
            ("The model is broken", False, "Sinks are a normal learned behaviour, not a bug.")),
        _mc("What does attention rollout show?",
            ("Where weight flows through the layers, not what the values carry", True,
             "It multiplies head-averaged weights with the residual; the values' content is ignored."),
            ("Which tokens the prediction depends on", False, "That needs a test of importance, such as "
                                                              "changing the token."),
            ("The attention of the last layer only", False, "It composes all layers.")),
        _mc("How are the layers of all-MiniLM-L6-v2 built?",
            ("The book's MultiHeadAttention inside post-norm BERT layers", True,
             "On the real tokens, its final hidden states and attention weights match the reference "
             "implementation to 10⁻⁴."),
            ("Pre-norm blocks with RMSNorm", False, "That is today's decoder block (chapter 6), not BERT's."),
            ("Decoder blocks with a causal mask", False, "It is an encoder: every token reads every other.")),
    ]


# --- chapter 14 --------------------------------------------------------------------------

def ch14():
    c = SmolLMConfig()  # SmolLM2-135M's sizes
    tokens = c.context_length
    kv = llm_probes.kv_bytes(c, tokens) / MiB
    kv_mha = llm_probes.kv_bytes(c, tokens, num_kv_heads=c.num_heads) / MiB
    chance = llm_probes.uniform_scores(4, start=1)
    return [
        Numeric(f"SmolLM2-135M: {c.num_layers} layers, {c.num_heads} query heads sharing {c.num_kv_heads} "
                f"key/value heads of width {c.head_dim}. How many MiB does the KV cache of one "
                f"{tokens}-token sequence take in bfloat16 (2 bytes a number)?",
                answer=kv, tolerance=0.01 * kv, unit="MiB",
                why=f"2 (keys and values) × {c.num_layers} × {c.num_kv_heads} × {c.head_dim} × {tokens} "
                    f"× 2 bytes = {_g(kv, 4)} MiB (`kv_cache_bytes`).",
                hint="Numbers per token and layer: 2 × key/value heads × head width.",
                mistakes=((kv / 2, "Keys and values are both cached: a factor 2."),
                          (kv_mha, f"That counts all {c.num_heads} query heads; with GQA only the "
                                   f"{c.num_kv_heads} key/value heads are cached."))),
        _mc("A text reads [A][B] ... [A]. At the second [A], where does an induction head put its weight?",
            ("On [B], the token that followed the earlier [A]", True,
             "It finds the earlier [A] through the key of the token after it (which carries 'my previous "
             "token was A') and copies [B]: the model predicts [B] next."),
            ("On the earlier [A] itself", False, "Attending to the earlier copy would copy [A], not what "
                                                 "came after it."),
            ("On the token just before the second [A]", False, "That is a previous-token head, the circuit's "
                                                               "first step.")),
        Numeric("A head spreads each query's weight evenly over the keys it may see under the causal mask. "
                "Over queries 2, 3 and 4 (counting from 1) of a 4-token text, what is its mean weight on "
                "the first token?",
                answer=chance, tolerance=0.006,
                why=f"Query i sees i keys: (1/2 + 1/3 + 1/4) / 3 = {_g(chance)}, the chance level of the "
                    "first-token share (`uniform_scores`).",
                hint="Query 2 sees 2 keys, query 3 sees 3, query 4 sees 4.",
                mistakes=((0.25, "Not every query sees all 4 keys: the mask hides the later ones."),)),
        _mc("A model trained with full attention runs with a sliding window of 32 tokens. Its perplexity "
            "jumps once the window no longer holds the first token. What restores it?",
            ("Keeping the first few tokens in the cache next to the window (sinks)", True,
             "Many heads park their weight on the first token; with it gone, that weight lands on real "
             "tokens. The chapter measures it on SmolLM2."),
            ("A larger window", False, "A larger window only delays the eviction; the chapter's window "
                                       "of 128 still breaks without sinks."),
            ("Renumbering the positions in the cache", False, "StreamingLLM does renumber, to stay within "
                                                              "trained distances on long streams, but "
                                                              "without sinks the window still breaks.")),
        _mc("The chapter removes five heads at a time. Why remove random heads too?",
            ("As the control: any five heads might raise the loss a little", True,
             "Only a rise far above that of random heads says the chosen heads matter."),
            ("To make the model smaller", False, "Removing heads here is a measurement, not compression."),
            ("Because the induction scores are random", False, "They are far above the chance level.")),
    ]


# --- inside the circuits (chapter 15) -------------------------------------------------------

def ch15():
    c = SmolLMConfig()  # SmolLM2-135M's sizes
    random_score = 1 / math.sqrt(c.embed_dim)
    diagonal = circuits.copying_score(torch.diag(_tensor([2.0, -1.0, 1.0]))).item()
    return [
        _mc("The five strongest induction heads of SmolLM2 add little directly to the copied token's "
            "logit difference (about 0.4 of 13.6), yet resampling their output lowers it by about 11. "
            "What follows?",
            ("They act through later layers, whose heads and MLPs write the token", True,
             "Direct logit attribution sees only the path from a head straight to the LM head; the "
             "resampled run also changes what later heads and MLPs read."),
            ("They do not matter for copying", False, "Then resampling them would leave the logit "
                                                      "where it was."),
            ("Direct logit attribution is wrong for attention heads", False,
             "It is exact for the direct path: the parts sum to the logit. It just does not see "
             "the other paths.")),
        Numeric(f"Random matrices of a head's shapes in a model of width {c.embed_dim} give a "
                "composition score whose mean square is exactly 1 / width. About what score is "
                "that?", answer=random_score, tolerance=0.003,
                why=f"The square root of 1/{c.embed_dim} is {_g(random_score)}; SmolLM2's median pair "
                    "of heads scores about the same.",
                hint="Take the square root of the mean square.",
                mistakes=((1 / c.embed_dim, "That is the mean square; the score is about its square "
                                            "root."),)),
        Numeric("A head's OV circuit has the eigenvalues 2, -1 and 1. What is its copying score?",
                answer=diagonal, tolerance=0.01,
                why=f"The eigenvalues sum to 2 and their absolute values to 4: 2 / 4 = {_g(diagonal)} "
                    "(`copying_score`).",
                hint="Sum of the eigenvalues over the sum of their absolute values.",
                mistakes=((2.0, "Divide the sum by the sum of the absolute values."),
                          (1.0, "The eigenvalue -1 counts twice: it lowers the sum to 2, and its "
                                "absolute value raises the denominator to 4."))),
        _mc("Why can zero ablation overstate how much a head matters?",
            ("A zero output is a value the head never gives; later layers expect its usual output", True,
             "On the chapter's random-token texts most heads' outputs are mostly one steady vector, "
             "sink heads and others alike; removing it shocks the layers above. Mean and resample "
             "ablation keep what is usual."),
            ("Zero ablation also removes the head's attention weights", False,
             "It replaces the head's output; its weights are computed as before."),
            ("Zero ablation changes the other heads of the layer", False,
             "Only the chosen head's slice of the input of W^O is replaced.")),
        _mc("At layer 0 the logit lens mostly predicts each position's own input token. Why?",
            ("The embedding is also the LM head, so a token's row tends to score highest against itself",
             True, "With tied weights the lens at layer 0 compares the normalised embedding with every "
                   "row of the same embedding. The final norm rescales it and reweights its dimensions "
                   "by its gain, and the token's own row still scores highest at most positions."),
            ("The model copies every token", False, "No block has run yet at layer 0."),
            ("The final norm removes the position", False, "The norm rescales each position's vector "
                                                          "and reweights its dimensions; it adds or "
                                                          "removes no position.")),
    ]


QUESTIONS = {f"ch{n:02d}": fn for n, fn in enumerate(
    (ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11, ch12, ch13, ch14, ch15),
    start=1)}
"""Chapter (``"ch01"`` .. ``"ch15"``) -> the function that computes its questions."""
