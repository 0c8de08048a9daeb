"""The one training loop: a progress bar in a kernel, one summary line on the website."""

import re

import pytest
import torch

from attention_core.models.site_build import WEBSITE_BUILD_ENV
from attention_core.models.tiny_transformer import TinyTransformer
from attention_core.models.toy_tasks import reverse_and_shift_batch
from attention_core.models.training import train_model

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


class Scalar(torch.nn.Module):
    """One parameter whose loss is the parameter itself: a constant gradient of 1, so
    each of Adam's steps moves it by exactly the learning rate of that step."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(()))


def adam_steps(warmup_steps, steps=8, lr=0.1):
    model, seen = Scalar(), []

    def loss_fn(model, batch):
        seen.append(model.w.item())
        return model.w

    train_model(model, lambda g: None, steps, lr=lr, progress=False, loss_fn=loss_fn,
                warmup_steps=warmup_steps)
    seen.append(model.w.item())
    return -torch.tensor(seen).diff()  # (steps,): the size of each step


def test_warmup_raises_the_learning_rate_linearly_then_holds_it():
    steps = adam_steps(warmup_steps=4)
    expected = 0.1 * torch.tensor([0.25, 0.5, 0.75, 1, 1, 1, 1, 1])
    torch.testing.assert_close(steps, expected, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(adam_steps(warmup_steps=0), torch.full((8,), 0.1), rtol=1e-4, atol=1e-6)


def test_warmup_steps_must_be_a_count():
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="warmup_steps"):
            train_model(Scalar(), lambda g: None, 2, progress=False, loss_fn=lambda m, b: m.w,
                        warmup_steps=bad)


def test_one_thread_runs_the_block_on_one_thread_and_restores_the_count():
    from attention_core.models.measure import one_thread

    before = torch.get_num_threads()
    with one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), one_thread():
        raise RuntimeError("a failing block still gets its threads back")
    assert torch.get_num_threads() == before
