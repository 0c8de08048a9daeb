"""Chapter 14's in-browser LLM (attention_core.book.web_llm): the 4-bit blocks against
gguf's own dequantisation, and the ONNX export run by ONNX Runtime in Python against the
package's float32 SmolLM, for the prompt (past of length 0) and decode steps.

The export takes minutes, so the export tests read the build's cached export
(``_build/web_llm/<source_hash>/``, exported first if missing: ``_ext/web_llm.cached_export``)
and are ``book`` tests; the block tests are quick.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import torch

from conftest import ROOT

gguf = pytest.importorskip("gguf")
pytest.importorskip("onnxruntime")

from attention_core.book import web_llm  # noqa: E402
from attention_core.models import smollm  # noqa: E402
from attention_core.models.measure import one_thread  # noqa: E402

TEXTS = ["What is attention in a transformer?", "Café, naïve résumé — São Paulo! 3.14159 and 2026-11-25",
         "I love 🍕 and 😀🎉", "<img src=x onerror=alert(1)>", "tab\tseparated\nnew line", "日本語のテキスト",
         "<|im_start|>user\nhi<|im_end|>", "   ", "x" * 300]


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    with one_thread():
        yield


@pytest.fixture(scope="module")
def reader():
    return gguf.GGUFReader(smollm.default_gguf_path())


def test_q4_1_blocks_equal_gguf_dequantisation(reader):
    tensor = next(t for t in reader.tensors if t.name == "blk.3.attn_q.weight")
    qs, d, m = web_llm.q4_1_from_gguf(np.asarray(tensor.data))
    got = web_llm.q4_1_dequantise(torch.from_numpy(qs), torch.from_numpy(d), torch.from_numpy(m))
    want = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    assert got.shape == want.shape and torch.equal(got, torch.from_numpy(np.asarray(want, np.float32)))


def test_q8_0_embedding_equals_gguf_dequantisation(reader):
    tensor = next(t for t in reader.tensors if t.name == "token_embd.weight")
    embedding = web_llm.Q8Embedding(*web_llm.q8_0_from_gguf(np.asarray(tensor.data)))
    ids = torch.tensor([[0, 1, 2, 500, 49151]])
    want = torch.from_numpy(np.asarray(gguf.quants.dequantize(tensor.data, tensor.tensor_type)))
    assert torch.equal(embedding.lookup(ids)[0], want[ids[0]])


def test_q4_1_quantise_round_trip_error_is_half_a_step():
    weight = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    qs, d, m = web_llm.q4_1_quantise(weight)
    back = web_llm.q4_1_dequantise(*(torch.from_numpy(a) for a in (qs, d, m))).numpy()
    step = np.repeat(d.astype(np.float32)[..., 0], 32, axis=1)
    assert np.all(np.abs(back - weight) <= 0.5 * step + 2e-3)


# ---------------------------------------------------------------- the export (book tests)
@pytest.fixture(scope="module")
def export_dir():
    sys.path.insert(0, str(ROOT / "_ext"))
    from web_llm import cached_export

    root = ROOT / "_build" / "web_llm"
    root.mkdir(parents=True, exist_ok=True)
    return cached_export(root)


@pytest.fixture(scope="module")
def meta(export_dir):
    return json.loads((export_dir / "meta.json").read_text())


@pytest.fixture(scope="module")
def reference():
    return smollm.load_smollm2()


@pytest.fixture(scope="module")
def decoder(export_dir):
    return web_llm.OrtDecoder(export_dir / "model.onnx")


@pytest.mark.book
def test_files_fit_the_budget_and_meta_states_the_precision(export_dir, meta):
    names = ("model.onnx", web_llm.EXTERNAL, "tokenizer.json")
    sizes = {name: (export_dir / name).stat().st_size for name in names}
    assert sizes == meta["bytes"]
    assert max(sizes.values()) <= web_llm.MAX_BYTES and sum(sizes.values()) <= web_llm.MAX_TOTAL_BYTES
    assert meta["prose_positions"] >= 1000 and meta["top1_agreement"] >= 0.99
    assert meta["greedy_equal"] >= 0.8 * meta["greedy_prompts"]
    assert meta["max_abs_diff_attention"] <= meta["tolerance"]


@pytest.mark.book
def test_prefill_and_decode_steps_match_the_float32_package(decoder, reference, meta):
    model, tokenizer = reference
    ids = smollm.chat_prompt(tokenizer, [{"role": "user", "content": "Why do cats purr at night?"}])
    full = torch.cat([ids, torch.tensor([[504, 2365, 314, 253, 1345]])], dim=1)  # prompt, then 5 tokens
    with torch.no_grad():
        want_logits, want_att = model(full)
    want_att = torch.stack(want_att)[:, 0].numpy()  # (layers, H, T, T)
    T = ids.size(1)
    decoder.reset()
    logits, att = decoder.step(ids[0].tolist())  # the prompt: every row of it
    assert att.shape == (30, 9, T, T)
    np.testing.assert_allclose(att, want_att[:, :, :T, :T], atol=meta["tolerance"], rtol=0)
    np.testing.assert_allclose(logits, want_logits[0, T - 1].numpy(), atol=2e-3, rtol=0)
    for i in range(T, full.size(1)):
        logits, att = decoder.step([int(full[0, i])])
        assert att.shape == (30, 9, 1, i + 1)
        np.testing.assert_allclose(att[:, :, 0], want_att[:, :, i, :i + 1], atol=meta["tolerance"], rtol=0)
        np.testing.assert_allclose(logits, want_logits[0, i].numpy(), atol=2e-3, rtol=0)
        np.testing.assert_allclose(att.sum(-1), 1, atol=1e-5)


@pytest.mark.book
def test_greedy_generation_equals_the_package(decoder, reference):
    model, tokenizer = reference
    for prompt in ("Tell me about owls.", "What is 7 plus 5?"):  # not among web_llm.PROMPTS
        ids = smollm.chat_prompt(tokenizer, [{"role": "user", "content": prompt}])
        want = smollm.generate(model, ids, 20)[0, ids.size(1):].tolist()
        assert decoder.generate(ids[0].tolist(), 20) == want, prompt


@pytest.mark.book
def test_tokenizer_json_gives_the_package_ids(export_dir, reference):
    from tokenizers import Tokenizer

    _, tokenizer = reference
    shipped = Tokenizer.from_file(str(export_dir / "tokenizer.json"))
    for text in TEXTS:
        assert shipped.encode(text).ids == tokenizer.encode(text).ids, text
