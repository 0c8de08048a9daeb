"""Alignment scores by hand, masking of padded source positions, the two decoder data
flows, the synthetic task, and models that learn."""

import math

import pytest
import torch

from attention_core.models.seq2seq import (
    BOS,
    EOS,
    PAD,
    TARGET_OF,
    Seq2Seq,
    encode_batch,
    exact_match,
    random_batch,
    random_sentences,
    train_seq2seq,
    translate,
)
from attention_core.nn.scoring import SCORES, attend, make_score


@pytest.mark.parametrize("name", sorted(SCORES))
def test_every_score_has_one_signature_and_shape(name):
    score = make_score(name, 6, 6, 5)
    out = score(torch.randn(3, 6), torch.randn(3, 7, 6))
    assert out.shape == (3, 7)


def test_dot_score_by_hand():
    s = torch.tensor([[1.0, 2.0]])
    h = torch.tensor([[[3.0, 0.0], [1.0, 1.0], [0.0, -1.0]]])
    assert make_score("dot", 2, 2)(s, h).tolist() == [[3.0, 3.0, -2.0]]


def test_general_score_by_hand():
    score = make_score("general", 2, 3)
    with torch.no_grad():
        score.W.weight.copy_(torch.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]]))  # W (Dq, Dk)
    s, h = torch.tensor([[1.0, -1.0]]), torch.tensor([[[1.0, 2.0, 3.0]]])
    # s^T W h = [1, -1] . [1 + 6, 2] = 7 - 2 = 5
    assert score(s, h).item() == pytest.approx(5.0)


def test_additive_score_by_hand():
    score = make_score("additive", 1, 1, 2)
    with torch.no_grad():
        score.W_s.weight.copy_(torch.tensor([[1.0], [0.0]]))
        score.W_h.weight.copy_(torch.tensor([[0.0], [2.0]]))
        score.v.weight.copy_(torch.tensor([[1.0, -1.0]]))
    s, h = torch.tensor([[0.5]]), torch.tensor([[[0.25]]])
    # v . tanh([0.5, 0.5]) = tanh(0.5) - tanh(0.5) = 0; with h = 1: tanh(0.5) - tanh(2)
    assert score(s, h).item() == pytest.approx(0.0, abs=1e-7)
    assert score(s, torch.tensor([[[1.0]]])).item() == pytest.approx(math.tanh(0.5) - math.tanh(2.0))


def test_luong_concat_is_the_additive_score_with_split_weights():
    add, cat = make_score("additive", 4, 6, 5), make_score("concat", 4, 6, 5)
    with torch.no_grad():
        cat.W.weight.copy_(torch.cat((add.W_s.weight, add.W_h.weight), 1))
        cat.v.weight.copy_(add.v.weight)
    s, h = torch.randn(2, 4), torch.randn(2, 3, 6)
    torch.testing.assert_close(cat(s, h), add(s, h))


@pytest.mark.parametrize("name", sorted(SCORES))
def test_attend_gives_padding_zero_weight_and_ignores_its_values(name):
    score = make_score(name, 4, 4)
    s, h = torch.randn(2, 4), torch.randn(2, 5, 4)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    context, weights = attend(score, s, h, mask)
    assert weights.shape == (2, 5) and context.shape == (2, 4)
    assert (weights[1, 3:] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2))
    h2 = h.clone()
    h2[1, 3:] = 1e3  # garbage in the padding changes nothing
    torch.testing.assert_close(attend(score, s, h2, mask)[0][1], context[1])
    torch.testing.assert_close(context, (weights.unsqueeze(-1) * h).sum(1))


def test_translate_reverses_and_looks_up():
    assert translate("a b c") == [TARGET_OF["c"], TARGET_OF["b"], TARGET_OF["a"]]
    with pytest.raises(ValueError, match=r"unknown: \['z'\]"):
        translate("a z")
    with pytest.raises(ValueError, match="1 or more of the words"):
        translate("")


def test_batch_layout():
    batch = encode_batch(["a b", "c d e"])
    assert batch.src.shape == (2, 3) and batch.src[0, 2] == PAD
    assert batch.src_lengths.tolist() == [2, 3]
    assert batch.tgt_in[:, 0].tolist() == [BOS, BOS]
    assert batch.tgt_out[0, 2] == EOS and batch.tgt_out[0, 3] == PAD and batch.tgt_out[1, 3] == EOS
    assert torch.equal(batch.tgt_in[1, 1:], batch.tgt_out[1, :-1])  # shifted by one


def test_random_sentences_are_seeded_and_within_lengths():
    a = random_sentences(torch.Generator().manual_seed(0), 50, 3, 7)
    assert a == random_sentences(torch.Generator().manual_seed(0), 50, 3, 7)
    assert min(map(len, a)) >= 3 and max(map(len, a)) <= 7


def test_bahdanau_uses_previous_state_and_luong_current_state():
    """Bahdanau's first weights attend from s_0 (before any token is read), Luong's from
    s_1 (after reading BOS): compared with the chapter's one-step ``attend``."""
    for kind in ("bahdanau", "luong"):
        model = Seq2Seq(kind, "dot", hidden_size=8, embed_dim=4)
        batch = encode_batch(["a b c", "d e"])
        with torch.no_grad():
            h, mask, s0 = model.encode(batch.src, batch.src_lengths)
            _, weights = model(batch.src, batch.src_lengths, batch.tgt_in)  # (B, T, S)
            query = s0 if kind == "bahdanau" else model.cell(model.tgt_embed(batch.tgt_in[:, 0]), s0)
            _, expected = attend(model.score, query, h, mask)
        torch.testing.assert_close(weights[:, 0], expected)


@pytest.mark.parametrize("kind", ["none", "bahdanau", "luong"])
def test_training_and_translation_run_the_same_step_function(kind, monkeypatch):
    """Replace a decoder's step function in DECODERS: training (the whole target in one
    call), the teacher-forced pass and greedy decoding (one token a call) all run the new one."""
    from attention_core.models import seq2seq

    original, calls = seq2seq.DECODERS[kind], []

    def step(model, y, *rest):
        calls.append(y.size(1))
        logits, state, weights = original.step(model, y, *rest)
        return logits + 1.0, state, weights  # a visible change: logits shifted

    monkeypatch.setitem(seq2seq.DECODERS, kind, seq2seq.Decoder(original.layers, step))
    model, _ = seq2seq.train_seq2seq(kind, "general", steps=1, embed_dim=4, hidden_size=8,
                                     progress=False)
    assert calls and all(T > 1 for T in calls)  # teacher forcing: all steps in one call
    batch = encode_batch(["a b c"])
    calls.clear()
    changed, _ = model(batch.src, batch.src_lengths, batch.tgt_in)
    model.greedy_decode(batch.src, batch.src_lengths, max_len=3)
    assert calls == [4, 1, 1, 1]
    monkeypatch.setitem(seq2seq.DECODERS, kind, original)
    unchanged, _ = model(batch.src, batch.src_lengths, batch.tgt_in)
    torch.testing.assert_close(changed, unchanged + 1.0)


def test_decoder_input_sizes_follow_the_data_flow():
    assert Seq2Seq("bahdanau", hidden_size=8, embed_dim=4).cell.input_size == 4 + 8  # [y; c_t]
    assert Seq2Seq("none", hidden_size=8, embed_dim=4).cell.input_size == 4 + 8  # [y; c]
    assert Seq2Seq("luong", "general", hidden_size=8, embed_dim=4).cell.input_size == 4  # y only


def test_padding_in_a_batch_does_not_change_a_translation():
    model = Seq2Seq("luong", "general", hidden_size=16, embed_dim=8).eval()
    alone = encode_batch(["a b c"])
    padded = encode_batch(["a b c", "d e f g h i"])
    with torch.no_grad():
        l1, w1 = model(alone.src, alone.src_lengths, alone.tgt_in)
        l2, w2 = model(padded.src, padded.src_lengths, padded.tgt_in)
    torch.testing.assert_close(l2[0, :4], l1[0])
    assert (w2[0, :, 3:] == 0).all()


@pytest.mark.parametrize("attention,score", [("none", "additive"), ("bahdanau", "additive"),
                                             ("luong", "dot"), ("luong", "general")])
def test_models_learn_short_sentences(attention, score):
    """A short run: the loss falls and exact-match accuracy on new 3-word sentences is far
    above chance (1 / 14^3 for guessing the words)."""
    model, losses = train_seq2seq(attention, score, steps=150, min_len=2, max_len=4, progress=False)
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10
    new = random_sentences(torch.Generator().manual_seed(99), 100, 3, 3)
    assert exact_match(model, new) > 0.3


def test_same_seed_same_model():
    a, _ = train_seq2seq("luong", "dot", steps=5, progress=False)
    b, _ = train_seq2seq("luong", "dot", steps=5, progress=False)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)


@pytest.mark.parametrize("call,message", [
    (lambda: make_score("cosine", 4, 4), "score must be one of"),
    (lambda: make_score("dot", 4, 6), "query_dim == key_dim, got 4 and 6"),
    (lambda: make_score("additive", 0, 4), "query_dim must be >= 1, got 0"),
    (lambda: attend(make_score("dot", 4, 4), torch.randn(2, 4), torch.randn(3, 5, 4)),
     r"same B, got query \(2, 4\) and keys \(3, 5, 4\)"),
    (lambda: attend(make_score("dot", 4, 4), torch.randn(2, 4), torch.randn(2, 5, 4),
                    torch.ones(2, 4, dtype=torch.bool)), r"mask must be bool of shape \(B, S\) = \(2, 5\)"),
    (lambda: Seq2Seq("global"), "attention must be one of"),
    (lambda: Seq2Seq(hidden_size=7), "hidden_size must be even"),
    (lambda: random_sentences(torch.Generator(), 4, 5, 3), "max_len must be >= 5, got 3"),
])
def test_bad_parameters_raise_clear_errors(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()



def test_alignment_explorer_takes_typed_sentences_and_rejects_bad_ones():
    from attention_core.book.explorers import alignment_explorer

    models = {"bahdanau": Seq2Seq("bahdanau", hidden_size=8, embed_dim=4).eval(),
              "luong": Seq2Seq("luong", "dot", hidden_size=8, embed_dim=4).eval()}
    explorer = alignment_explorer(models, ["a b c", "d e f g"])
    view = explorer.widget()
    before = view.image.value
    view.text.value = "a z"
    assert "unknown: [&#x27;z&#x27;]" in view.message.value and view.image.value == before
    view.text.value = " k  l m "
    assert view.message.value == "" and view.sliders[0].value == "k l m"
    assert view.image.value != before
    with pytest.raises(ValueError, match="unknown"):
        alignment_explorer(models, ["a b", "x y"])


def test_alignment_accuracy_scores_the_reversed_diagonal():
    from attention_core.models.seq2seq import alignment_accuracy

    class Fixed(Seq2Seq):
        """Returns chosen weights: the right source word, or its left neighbour."""
        def __init__(self, shift):
            super().__init__("luong", "dot", hidden_size=8, embed_dim=4)
            self.shift = shift

        def forward(self, src, src_lengths, tgt_in):
            B, S = src.shape
            w = torch.zeros(B, tgt_in.size(1), S)
            for b, n in enumerate(src_lengths.tolist()):
                for t in range(n):
                    w[b, t, max(n - 1 - t - self.shift, 0)] = 1.0
            return None, w

    sentences = ["a b c d", "e f"]
    assert alignment_accuracy(Fixed(0), sentences) == 1.0
    assert alignment_accuracy(Fixed(1), sentences) == pytest.approx(2 / 6)  # only where clipped to 0
    with pytest.raises(ValueError, match="attention='none'"):
        alignment_accuracy(Seq2Seq("none"), sentences)


def test_unknown_decoder_names_the_allowed_ones():
    with pytest.raises(ValueError, match=r"attention must be one of \['none', 'bahdanau', 'luong'\], "
                                         r"got 'global'"):
        Seq2Seq("global")


@pytest.mark.parametrize("kind", ["none", "bahdanau", "luong"])
def test_every_decoder_step_has_one_signature(kind):
    """Each entry of DECODERS is a step ``(model, y (B, T, D), state, h, mask, c) -> (logits
    (B, T, V), last state, weights (B, T, S) or None)``; ``Seq2Seq.step`` is that function,
    and only the attending decoders have a score and give weights."""
    from attention_core.models.seq2seq import DECODERS, TARGET_VOCAB

    model = Seq2Seq(kind, "general", hidden_size=8, embed_dim=4).eval()
    batch = encode_batch(["a b c", "d e"])
    with torch.no_grad():
        h, mask, s0 = model.encode(batch.src, batch.src_lengths)
        y = model.tgt_embed(batch.tgt_in[:, :2])  # two steps: (B, 2, D)
        logits, state, weights = DECODERS[kind].step(model, y, s0, h, mask, s0)
        again = model.step(y, s0, h, mask, s0)
    assert logits.shape == (2, 2, len(TARGET_VOCAB)) and state.shape == (2, 8)
    assert (model.score is None) == (kind == "none") and (weights is None) == (kind == "none")
    if weights is not None:
        assert weights.shape == (2, 2, 3) and (weights[1, :, 2] == 0).all()  # "d e" has no third word
        torch.testing.assert_close(again[2], weights)
    torch.testing.assert_close(again[0], logits)
    torch.testing.assert_close(again[1], state)


@pytest.mark.parametrize("name", sorted(SCORES))
def test_attend_gives_a_sentence_with_no_real_token_zeros_not_nan(name):
    torch.manual_seed(0)
    score = make_score(name, 4, 4)
    query, keys = torch.randn(2, 4, requires_grad=True), torch.randn(2, 5, 4)
    mask = torch.tensor([[True, True, False, False, False], [False] * 5])
    context, weights = attend(score, query, keys, mask)
    assert torch.equal(weights[1], torch.zeros(5)) and torch.equal(context[1], torch.zeros(4))
    expected, _ = attend(score, query[:1], keys[:1], mask[:1])  # the other row is unchanged
    assert torch.equal(context[:1], expected)
    context.sum().backward()
    assert torch.isfinite(query.grad).all()


@pytest.mark.parametrize("min_len, max_len", [(3, 12), (1, 1), (5, 5), (2, 7)])
def test_random_batch_is_encode_batch_of_random_sentences(min_len, max_len):
    for seed in range(3):
        fast = random_batch(torch.Generator().manual_seed(seed), 17, min_len, max_len)
        slow = encode_batch(random_sentences(torch.Generator().manual_seed(seed), 17, min_len, max_len))
        for name in ("src", "src_lengths", "tgt_in", "tgt_out"):
            assert torch.equal(getattr(fast, name), getattr(slow, name)), name


@pytest.mark.parametrize("attention, score", [("none", "additive"), ("bahdanau", "additive"),
                                              ("bahdanau", "dot"), ("luong", "dot"),
                                              ("luong", "general"), ("luong", "additive")])
def test_forward_equals_the_step_by_step_pass_and_its_gradients(attention, score):
    """The batched teacher-forced pass against the decoder run one step at a time."""
    torch.manual_seed(0)
    model = Seq2Seq(attention, score, embed_dim=8, hidden_size=12)
    batch = encode_batch(["a b c", "n m l k j i h", "d", "e f"])
    fast, slow = (model(batch.src, batch.src_lengths, batch.tgt_in),
                  model.forward_by_steps(batch.src, batch.src_lengths, batch.tgt_in))
    torch.testing.assert_close(fast[0], slow[0])
    if attention == "none":
        assert fast[1] is None and slow[1] is None
    else:
        torch.testing.assert_close(fast[1], slow[1])
    grads = []
    for logits in (fast[0], slow[0]):
        model.zero_grad()
        logits.square().sum().backward(retain_graph=True)
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 0
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_training_leaves_the_global_generator_alone_and_a_generator_gives_the_sentences():
    torch.manual_seed(5)
    state = torch.get_rng_state()
    _, a = train_seq2seq("luong", "dot", steps=3, progress=False, embed_dim=4, hidden_size=8)
    assert torch.equal(torch.get_rng_state(), state)
    _, b = train_seq2seq("luong", "dot", steps=3, progress=False, embed_dim=4, hidden_size=8,
                         generator=torch.Generator().manual_seed(0))
    _, c = train_seq2seq("luong", "dot", steps=3, progress=False, embed_dim=4, hidden_size=8,
                         generator=torch.Generator().manual_seed(1))
    assert a == b != c  # seed 0 without a generator makes the generator seeded 0
