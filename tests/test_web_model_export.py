"""Chapter 13's in-browser model (attention_core.book.web_model): the ONNX export, run by
ONNX Runtime in Python, against the package's own float32 BertEncoder.

The export runs once for the module (about 15 s on an idle core); each check then runs
the files it wrote with ``onnxruntime`` directly, not through ``attention_difference``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from attention_core.book import web_model
from attention_core.models import pretrained
from attention_core.models.measure import one_thread
from conftest import WEB_MODEL_ATTENTION_ATOL

CONTRACT_KEYS = {"precision", "bytes", "gzip_bytes", "max_abs_diff_attention", "tolerance", "num_layers",
                 "num_heads", "max_tokens", "sentences", "sentence_embeddings", "source_hash"}


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Small forward passes: on one thread a busy machine does not slow them tenfold."""
    with one_thread():
        yield


@pytest.fixture(scope="module")
def minilm():
    return pretrained.load_minilm()


@pytest.fixture(scope="module")
def exported(tmp_path_factory, minilm):
    out = tmp_path_factory.mktemp("minilm_web")
    meta = web_model.export_minilm(out, float32_path=out / "float32.onnx")
    return out, meta


def session(path):
    return web_model.ort_session(path)  # CPU, one thread


def package(model, ids, mask):
    """The package's float32 attentions (N, B, H, T, T) and sentence embeddings (B, D)."""
    with torch.no_grad():
        hidden, attentions = model(ids, mask)
    return torch.stack(attentions).numpy(), pretrained.sentence_embedding(hidden, mask).numpy()


def run(sess, ids, mask):
    return sess.run(["attentions", "embedding"], {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})


def worst_over_sentences(path, minilm) -> tuple[float, float]:
    """Largest |difference| of attentions and embeddings, one book sentence at a time."""
    model, tokenizer = minilm
    sess, worst_a, worst_e = session(path), 0.0, 0.0
    for sentence in pretrained.SENTENCES:
        ids, mask = tokenizer.encode(sentence)  # (1, T)
        (got_a, got_e), (want_a, want_e) = run(sess, ids, mask), package(model, ids, mask)
        assert got_a.shape == (6, 1, 12, ids.size(1), ids.size(1)) and got_e.shape == (1, 384)
        worst_a = max(worst_a, float(np.abs(got_a - want_a).max()))
        worst_e = max(worst_e, float(np.abs(got_e - want_e).max()))
    return worst_a, worst_e


def test_float32_export_equals_the_package(exported, minilm):
    worst_a, worst_e = worst_over_sentences(exported[0] / "float32.onnx", minilm)
    assert worst_a < 1e-4 and worst_e < 1e-4, (worst_a, worst_e)


def test_float32_export_with_padding(exported, minilm):
    """A padded batch: real tokens' attentions and the pooled embedding as without
    padding; no query attends to a pad; each row sums to 1."""
    model, tokenizer = minilm
    sentences = list(pretrained.SENTENCES[:6])
    ids, mask = tokenizer.encode(sentences)  # (6, T), padded to the longest
    ids, mask = (torch.nn.functional.pad(t, (0, 4)) for t in (ids, mask))  # and 4 pads more
    got_a, got_e = run(session(exported[0] / "float32.onnx"), ids, mask)
    want_a, want_e = package(model, ids, mask)
    real = mask.numpy().astype(bool)
    keep = real[None, :, None, :, None] & real[None, :, None, None, :]
    assert np.abs(np.where(keep, got_a - want_a, 0)).max() < 1e-4
    assert np.abs(got_e - want_e).max() < 1e-4
    assert np.all(got_a[..., ~real[0]][:, 0] == 0)  # sentence 0: its pads get no weight
    np.testing.assert_allclose(got_a.sum(-1), 1, atol=1e-5)
    for b, sentence in enumerate(sentences):  # each sentence alone, unpadded
        one_ids, one_mask = tokenizer.encode(sentence)
        T = one_ids.size(1)
        alone_a, alone_e = package(model, one_ids, one_mask)
        assert np.abs(got_a[:, b, :, :T, :T] - alone_a[:, 0]).max() < 1e-4
        assert np.abs(got_e[b] - alone_e[0]).max() < 1e-4


@pytest.mark.parametrize("length", [1, 2, web_model.MAX_TOKENS])
def test_dynamic_length(exported, minilm, length):
    model, _ = minilm
    ids = torch.randint(1000, 30000, (1, length), generator=torch.Generator().manual_seed(length))
    mask = torch.ones_like(ids)
    got_a, got_e = run(session(exported[0] / "model.onnx"), ids, mask)
    assert got_a.shape == (6, 1, 12, length, length) and got_e.shape == (1, 384)
    np.testing.assert_allclose(np.linalg.norm(got_e, axis=-1), 1, atol=1e-5)
    np.testing.assert_allclose(got_a.sum(-1), 1, atol=1e-5)


def test_shipped_model_within_its_stated_tolerance(exported, minilm):
    out, meta = exported
    worst_a, worst_e = worst_over_sentences(out / "model.onnx", minilm)
    assert worst_a == pytest.approx(meta["max_abs_diff_attention"], abs=1e-6)
    assert worst_a <= WEB_MODEL_ATTENTION_ATOL  # a bound written in conftest, not read from meta.json
    assert worst_e < 0.05, worst_e  # the nearest-sentence search stays meaningful
    assert (out / "model.onnx").stat().st_size <= web_model.MAX_BYTES == 25_000_000


def test_meta_is_consistent(exported, minilm):
    out, meta = exported
    model, tokenizer = minilm
    on_disk = json.loads((out / "meta.json").read_text())
    assert on_disk == meta and set(meta) == CONTRACT_KEYS
    data = (out / "model.onnx").read_bytes()
    assert meta["bytes"] == len(data) and meta["gzip_bytes"] == len(gzip.compress(data, 9))
    worst = meta["max_abs_diff_attention"]
    assert worst <= meta["tolerance"] == web_model.round_up(worst)
    assert (meta["num_layers"], meta["num_heads"], meta["max_tokens"]) == (6, 12, 128)
    assert meta["sentences"] == list(pretrained.SENTENCES) and "int8" in meta["precision"]
    embeddings = np.array(meta["sentence_embeddings"])
    want = pretrained.embed_sentences(model, tokenizer, list(pretrained.SENTENCES)).numpy()
    assert embeddings.shape == (40, 384) and np.abs(embeddings - want).max() <= 5e-6 + 1e-7
    assert meta["source_hash"] == web_model.source_hash()
    installed = pretrained.default_model_path() / "tokenizer.json"
    assert (out / "tokenizer.json").read_bytes() == installed.read_bytes()
    assert all((out / name).stat().st_mode & 0o777 == 0o644 for name in web_model.FILES)


@pytest.mark.parametrize("axis", [0, 1])
def test_blockwise_int8_gives_each_block_its_own_scale(axis):
    weight = np.random.default_rng(axis).normal(size=(64, 48)).astype(np.float32)
    weight[:16, :16] = 0  # 16 all-zero blocks (either axis)
    q, scale = web_model.blockwise_int8(weight, axis=axis, block=16)
    assert q.dtype == np.int8 and scale.dtype == np.float16
    assert (q.shape, scale.shape) == (((4, 16, 48), (4, 1, 48)) if axis == 0 else ((64, 3, 16), (64, 3, 1)))
    back = (q * scale.astype(np.float32)).reshape(weight.shape)
    half_step = np.broadcast_to(scale.astype(np.float32) / 2, q.shape).reshape(weight.shape)
    assert np.all(np.abs(back - weight) <= half_step * (1 + 1e-6))
    peak = np.abs(q).max(axis=1 if axis == 0 else 2)  # each block's largest |q|
    assert set(np.unique(peak)) == {0, 127} and np.sum(peak == 0) == 16  # scale 1 in zero blocks
    with pytest.raises(ValueError, match="block=10"):
        web_model.blockwise_int8(weight, axis=axis, block=10)


def test_round_up():
    values = (0.0223, 0.02201, 0.03, 0.0999, 0.09991, 3e-6, 0.0)
    assert [web_model.round_up(v) for v in values] == [0.023, 0.023, 0.03, 0.1, 0.1, 3e-6, 0.0]
    assert web_model.round_up(0.0223, digits=1) == 0.03


def test_bad_inputs():
    with pytest.raises(TypeError, match="out_dir"):
        web_model.export_minilm(3)
    with pytest.raises(TypeError, match="encoder"):
        web_model.WebMiniLM("not a model")


def sphinx_build(tmp_path, **config):
    """Build a one-page Sphinx site with _ext/web_model.py; return the output folder."""
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    src.mkdir(parents=True)
    ext = str(Path(__file__).resolve().parents[1] / "_ext")
    (src / "conf.py").write_text(f"import sys\nsys.path.insert(0, {ext!r})\nextensions = ['web_model']\n")
    (src / "index.rst").write_text("Test\n====\n")
    app = Sphinx(str(src), str(src), str(tmp_path / "html"), str(tmp_path / "doctrees"), "html",
                 confoverrides=config, status=None, warning=None, freshenv=True)
    app.build()
    return tmp_path / "html"


def test_the_build_copies_the_cached_export(exported, tmp_path):
    """A build whose cache holds the export for the current sources copies it into the
    site (world-readable) without exporting again."""
    out, _ = exported
    cache = tmp_path / "cache"
    folder = cache / web_model.source_hash()
    folder.mkdir(parents=True)
    for name in web_model.FILES:
        (folder / name).write_bytes((out / name).read_bytes())
    (cache / "0123456789abcdef").mkdir()  # an older export, left alone when nothing is exported
    html = sphinx_build(tmp_path, web_model_cache=str(cache))
    for name in web_model.FILES:
        copied = html / "_static" / "minilm" / name
        assert copied.read_bytes() == (out / name).read_bytes()
        assert copied.stat().st_mode & 0o777 == 0o644


def test_a_failed_export_fails_the_build(tmp_path):
    from sphinx.errors import ExtensionError

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    with pytest.raises(ExtensionError, match="web_model: exporting chapter 13's in-browser model"):
        sphinx_build(tmp_path, web_model_cache=str(blocker / "cache"))


def test_a_build_without_the_export_in_its_cache_exports_once(exported, tmp_path, monkeypatch):
    """On a cache miss the build exports (here: the module's export, copied) into the cache,
    drops older exports, and a second build reuses it."""
    out, meta = exported
    calls = []

    def export(folder, log):
        calls.append(folder)
        Path(folder).mkdir(parents=True)
        for name in web_model.FILES:
            (Path(folder) / name).write_bytes((out / name).read_bytes())
        return meta

    monkeypatch.setattr(web_model, "export_minilm", export)
    cache = tmp_path / "cache"
    (cache / "0123456789abcdef").mkdir(parents=True)  # an export for other sources
    for build in ("first", "second"):
        html = sphinx_build(tmp_path / build, web_model_cache=str(cache))
        assert (html / "_static" / "minilm" / "meta.json").read_bytes() == (out / "meta.json").read_bytes()
    assert len(calls) == 1 and [p.name for p in cache.iterdir()] == [web_model.source_hash()]
