"""The one training loop: a progress bar in a kernel, one summary line on the website."""

import re

import torch

from attention_core.models import TinyTransformer
from attention_core.toy_tasks import reverse_and_shift_batch
from attention_core.training import train_model
from attention_core.website import WEBSITE_BUILD_ENV

BAR = re.compile(r"\d+/\d+ \[\d\d:\d\d<|it/s")  # what tqdm's text bar prints


def train(steps=12):
    model = TinyTransformer(vocab_size=8, max_len=6, embed_dim=16)
    return train_model(model, lambda g: reverse_and_shift_batch(16, 6, 8, g), steps, desc="tiny")


def test_a_kernel_shows_a_progress_bar(monkeypatch, capsys):
    monkeypatch.delenv(WEBSITE_BUILD_ENV, raising=False)
    train()
    out = capsys.readouterr().out
    assert BAR.search(out) and "tiny" in out


def test_the_website_gets_one_summary_line_and_the_same_training(monkeypatch, capsys):
    monkeypatch.delenv(WEBSITE_BUILD_ENV, raising=False)
    _, live_losses = train()
    capsys.readouterr()
    monkeypatch.setenv(WEBSITE_BUILD_ENV, "1")
    _, losses = train()
    out = capsys.readouterr().out
    assert not BAR.search(out)
    assert out == f"tiny: 12 steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}\n"
    assert losses == live_losses  # only the printing differs, never the training
    assert torch.tensor(losses[-3:]).mean() < torch.tensor(losses[:3]).mean()


def test_progress_false_prints_nothing_anywhere(monkeypatch, capsys):
    for building in ("0", "1"):
        monkeypatch.setenv(WEBSITE_BUILD_ENV, building)
        model = TinyTransformer(vocab_size=8, max_len=6, embed_dim=16)
        train_model(model, lambda g: reverse_and_shift_batch(16, 6, 8, g), 3, progress=False)
        assert capsys.readouterr().out == ""
