"""attention_core.models.llm_probes (chapter 14): each score against a hand-worked example,
the streaming losses of a tiny random SmolLM against decoding one token at a time through
the rolling cache, the Q/K reordering against RoPE itself, and bad inputs."""

import math

import pytest
import torch

from attention_core.book.explorers.chapters import smollm_explorer
from attention_core.models import llm_probes as lp
from attention_core.models.measure import one_thread
from attention_core.models.smollm import SmolLM, SmolLMConfig, next_token
from attention_core.nn.positional import apply_rotary


@pytest.fixture(scope="module", autouse=True)
def steady_threads():
    with one_thread():
        yield


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    config = SmolLMConfig(vocab_size=64, embed_dim=32, num_layers=2, num_heads=4, num_kv_heads=2,
                          ff_dim=48, context_length=64)
    return SmolLM(config).double().eval()


def hand_attention():
    """(N=1, B=1, H=2, T=6, T=6): head 0 a perfect induction head for period 3 (queries 3..5
    on keys 1..3), uniform elsewhere; head 1 a perfect previous-token head."""
    a = torch.zeros(1, 1, 2, 6, 6, dtype=torch.float64)
    for i in range(6):
        a[0, 0, 0, i, : i + 1] = 1 / (i + 1)
        a[0, 0, 1, i, max(i - 1, 0)] = 1.0
    for i in (3, 4, 5):
        a[0, 0, 0, i] = 0
        a[0, 0, 0, i, i - 2] = 1.0
    return a


def test_scores_of_a_hand_built_attention():
    a = hand_attention()
    torch.testing.assert_close(lp.induction_scores(a, period=3), torch.tensor([[1.0, 0.0]], dtype=a.dtype))
    torch.testing.assert_close(lp.previous_token_scores(a), torch.tensor([[(1/2 + 1/3 + 0 + 0 + 0) / 5, 1.0]],
                                                                          dtype=a.dtype))
    # first token: head 0 gives 1/2, 1/3 at queries 1, 2 and 0 later; head 1 gives 1 at query 1
    expected = torch.tensor([[(1 / 2 + 1 / 3) / 5, 1 / 5]], dtype=a.dtype)
    torch.testing.assert_close(lp.first_token_shares(a), expected)
    # a list of layers is the same as the stacked tensor
    torch.testing.assert_close(lp.induction_scores([a[0], a[0]], 3), lp.induction_scores(a, 3).expand(2, 2))


def test_a_uniform_head_scores_the_chance_level():
    T = 10
    uniform = torch.ones(T, T, dtype=torch.float64).tril()
    uniform = (uniform / uniform.sum(-1, keepdim=True))[None, None, None]  # (1, 1, 1, T, T)
    assert lp.uniform_scores(T, 1) == pytest.approx(sum(1 / (i + 1) for i in range(1, T)) / (T - 1))
    for score, start in ((lp.previous_token_scores(uniform), 1), (lp.first_token_shares(uniform), 1),
                         (lp.induction_scores(uniform, 4), 4)):
        assert score.item() == pytest.approx(lp.uniform_scores(T, start))


def test_sink_rate_counts_heads_over_the_threshold():
    shares = torch.tensor([[0.1, 0.31, 0.9], [0.3, 0.0, 0.5]])
    assert lp.sink_rate(shares) == pytest.approx(3 / 6)
    assert lp.sink_rate(shares, threshold=0.05) == pytest.approx(5 / 6)


def test_token_losses_equal_cross_entropy():
    g = torch.Generator().manual_seed(0)
    logits, ids = torch.randn(2, 5, 7, generator=g), torch.randint(0, 7, (2, 5), generator=g)
    expected = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 7), ids[:, 1:].reshape(-1),
                                                 reduction="none").view(2, 4)
    torch.testing.assert_close(lp.token_losses(logits, ids), expected)


def test_repeated_random_tokens_repeat():
    ids = lp.repeated_random_tokens(3, 8, 50, torch.Generator().manual_seed(1), low=10)
    assert ids.shape == (3, 16) and torch.equal(ids[:, :8], ids[:, 8:])
    assert ids.min() >= 10 and ids.max() < 50
    again = lp.repeated_random_tokens(3, 8, 50, torch.Generator().manual_seed(1), low=10)
    assert torch.equal(ids, again)


def test_heads_chosen_and_drawn():
    scores = torch.tensor([[0.1, 0.9], [0.5, 0.2]])
    assert lp.top_heads(scores, 2) == [(0, 1), (1, 0)]
    mask = lp.head_mask_without([(0, 1), (1, 0)], 2, 2)
    assert torch.equal(mask, torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    drawn = lp.random_heads(3, 4, 5, torch.Generator().manual_seed(0), exclude=[(0, 0), (2, 3)])
    assert len(set(drawn)) == 5 and not {(0, 0), (2, 3)} & set(drawn)
    assert drawn == lp.random_heads(3, 4, 5, torch.Generator().manual_seed(0), exclude=[(0, 0), (2, 3)])


def test_streaming_losses_equal_decoding_token_by_token(tiny):
    """One pass through a RollingKVCache = the text fed one token at a time through it."""
    ids = torch.randint(0, 64, (2, 20), generator=torch.Generator().manual_seed(2))
    window, sinks = 5, 2
    caches = tiny.new_cache(2, window=window, num_sinks=sinks)
    with torch.no_grad():
        steps = [tiny(ids[:, t: t + 1], kv_caches=caches, output_attentions=False)[0] for t in range(20)]
    expected = lp.token_losses(torch.cat(steps, dim=1), ids)
    torch.testing.assert_close(lp.streaming_losses(tiny, ids, window, sinks), expected)


def test_streaming_losses_full_and_wide_windows_agree(tiny):
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = lp.token_losses(tiny(ids)[0], ids)
    torch.testing.assert_close(lp.streaming_losses(tiny, ids), full)
    torch.testing.assert_close(lp.streaming_losses(tiny, ids, window=12), full)  # nothing evicted
    torch.testing.assert_close(lp.ablated_losses(tiny, ids), full)
    assert not torch.allclose(lp.streaming_losses(tiny, ids, window=3), full)
    assert not torch.allclose(lp.ablated_losses(tiny, ids, [(1, 2)]), full)


def test_ablated_losses_equal_zeroing_the_heads_columns_of_w_o(tiny):
    ids = torch.randint(0, 64, (1, 10), generator=torch.Generator().manual_seed(4))
    E = tiny.config.head_dim
    removed = lp.ablated_losses(tiny, ids, [(0, 1), (1, 3)])
    saved = [layer.attn.out_proj.weight.detach().clone() for layer in tiny.layers]
    with torch.no_grad():
        tiny.layers[0].attn.out_proj.weight[:, E: 2 * E] = 0
        tiny.layers[1].attn.out_proj.weight[:, 3 * E: 4 * E] = 0
        expected = lp.token_losses(tiny(ids)[0], ids)
        for layer, w in zip(tiny.layers, saved):
            layer.attn.out_proj.weight.copy_(w)
    torch.testing.assert_close(removed, expected)


def test_interleaved_to_half_split_undoes_llama_cpp_and_keeps_the_scores():
    g = torch.Generator().manual_seed(5)
    H, E, D, T = 3, 8, 10, 6
    hf = torch.randn(H * E, D, generator=g, dtype=torch.float64)  # HuggingFace's layout
    stored = hf.view(H, 2, E // 2, D).transpose(1, 2).reshape(H * E, D)  # llama.cpp's permute
    torch.testing.assert_close(lp.interleaved_to_half_split(stored, H), hf)

    def rotate_half_rope(x, base=10000.0):  # HF: dimension i with i + E/2
        angle = torch.arange(T, dtype=x.dtype)[:, None] * base ** (-torch.arange(0, E, 2, dtype=x.dtype) / E)
        cos, sin = angle.cos().repeat(1, 2), angle.sin().repeat(1, 2)
        return x * cos + torch.cat((-x[:, E // 2:], x[:, : E // 2]), -1) * sin

    x = torch.randn(T, D, generator=g, dtype=torch.float64)
    for h in range(H):
        ours = apply_rotary((x @ stored.T)[:, h * E: (h + 1) * E])
        theirs = rotate_half_rope((x @ hf.T)[:, h * E: (h + 1) * E])
        torch.testing.assert_close(ours @ ours.T, theirs @ theirs.T)


def test_kv_bytes_of_smollm2():
    c = SmolLMConfig()
    assert lp.kv_bytes(c, 8192) == 2 * 30 * 3 * 64 * 8192 * 2
    assert lp.kv_bytes(c, 8192, num_kv_heads=9) == 3 * lp.kv_bytes(c, 8192)


def test_book_prose_is_plain_text():
    assert len(lp.BOOK_PROSE) == 4
    assert all(len(p.split()) > 150 and not set("$`{}|") & set(p) for p in lp.BOOK_PROSE)


@pytest.mark.parametrize("call, error", [
    (lambda: lp.induction_scores(torch.zeros(2, 3, 4), 2), ValueError),
    (lambda: lp.induction_scores(hand_attention(), 6), ValueError),
    (lambda: lp.induction_scores(hand_attention(), 1), ValueError),
    (lambda: lp.previous_token_scores([]), ValueError),
    (lambda: lp.first_token_shares(hand_attention(), start=6), ValueError),
    (lambda: lp.uniform_scores(5, 5), ValueError),
    (lambda: lp.sink_rate(torch.zeros(2, 2), threshold=1.5), ValueError),
    (lambda: lp.token_losses(torch.zeros(1, 3, 4), torch.zeros(1, 2, dtype=torch.long)), ValueError),
    (lambda: lp.head_mask_without([(3, 0)], 2, 2), ValueError),
    (lambda: lp.random_heads(2, 2, 5, torch.Generator()), ValueError),
    (lambda: lp.repeated_random_tokens(1, 4, 10, torch.Generator(), low=10), ValueError),
    (lambda: lp.interleaved_to_half_split(torch.zeros(6, 2), 2), ValueError),
    (lambda: lp.induction_scores(torch.zeros(1, 1, 1, 4, 4, dtype=torch.long), 2), TypeError),
])
def test_bad_inputs(call, error):
    with pytest.raises(error):
        call()


def test_next_token_is_what_the_losses_score(tiny):
    """The loss of the greedy next token is the smallest of all tokens (sanity of the shift)."""
    ids = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        logits = tiny(ids)[0]
    best = next_token(logits[:, -2])  # (1, 1): the greedy guess for the last token
    forced = torch.cat((ids[:, :-1], best), dim=1)
    assert lp.token_losses(logits, forced)[0, -1] <= lp.token_losses(logits, ids)[0, -1] + 1e-12
    assert math.isfinite(lp.token_losses(logits, ids).sum().item())


class _Tokens:
    """A stand-in for SmolLM2's tokenizer: one token a character (ids 0..63)."""

    def encode(self, text):
        return type("Encoding", (), {"ids": [ord(ch) % 64 for ch in text]})()

    def decode(self, ids):
        return "".join(chr(97 + i % 26) for i in ids)


def test_smollm_explorer_shows_the_chosen_head_of_each_layer(tiny):
    one = smollm_explorer(tiny, _Tokens(), ["abcabc"], heads=[1, 3], notes=["x", "y"])
    assert list(one.controls) == ["layer"] and one.controls["layer"] == [1, 2]
    frame = one.compute(layer=2)
    with torch.no_grad():
        _, attentions = tiny(torch.tensor([[ord(ch) % 64 for ch in "abcabc"]]))
    torch.testing.assert_close(frame["weights"], attentions[1][0, 3])
    assert frame["title"].endswith("head 4:\ny") and frame["received"].shape == (4, 6)
    two = smollm_explorer(tiny, _Tokens(), ["abcabc", "hello"])
    assert list(two.controls) == ["prompt", "layer"]
    assert "on the first token" in two.compute(layer=1, prompt="hello")["title"]
    with pytest.raises(ValueError, match="one entry per layer"):
        smollm_explorer(tiny, _Tokens(), ["abc"], heads=[0])
    assert smollm_explorer(tiny, _Tokens(), ["abc"], initial_layer=2).values["layer"] == 2
