"""The one training loop: a tqdm bar (hidden by TQDM_DISABLE) and one summary line in
every kernel; it leaves torch's global generator and thread count alone."""

import re

import pytest
import torch

from attention_core.models.tiny_transformer import TinyTransformer
from attention_core.models.toy_tasks import reverse_and_shift_batch
from attention_core.models.training import train_model

BAR = re.compile(r"\d+/\d+ \[\d\d:\d\d<|it/s")  # what tqdm's text bar prints


def train(steps=12, **options):
    model = TinyTransformer(vocab_size=8, max_len=6, embed_dim=16)
    return train_model(model, lambda g: reverse_and_shift_batch(16, 6, 8, g), steps, desc="tiny",
                       **options)


@pytest.mark.skipif(bool(__import__("os").environ.get("TQDM_DISABLE")), reason="bars are off here")
def test_a_kernel_shows_a_progress_bar_then_the_summary_line(capsys):
    _, losses = train()
    out = capsys.readouterr().out
    assert BAR.search(out)
    assert out.endswith(f"tiny: 12 steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}\n")


SCRIPT = """
import torch
from attention_core.models.tiny_transformer import TinyTransformer
from attention_core.models.toy_tasks import reverse_and_shift_batch
from attention_core.models.training import train_model
torch.manual_seed(0)
model = TinyTransformer(vocab_size=8, max_len=6, embed_dim=16)
_, losses = train_model(model, lambda g: reverse_and_shift_batch(16, 6, 8, g), 6, desc="tiny")
print(repr(losses))
"""


def test_tqdm_disable_leaves_only_the_summary_line_and_the_same_training():
    """The website's kernels start with TQDM_DISABLE=1 (tqdm reads it when it is imported):
    they print the same summary line as a reader's kernel, and train the same."""
    import os
    import subprocess
    import sys

    outputs = {}
    for disable in ("", "1"):
        env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
        if disable:
            env["TQDM_DISABLE"] = disable
        run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                             check=True)
        *printed, losses = run.stdout.splitlines()
        outputs[disable] = (printed, eval(losses))
    (live, live_losses), (built, losses) = outputs[""], outputs["1"]
    assert built == [f"tiny: 6 steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}"]
    assert BAR.search("\n".join(live)) and live[-1] == built[0]
    assert losses == live_losses  # only the printing differs, never the training


def test_progress_false_prints_nothing(capsys):
    train(3, progress=False)
    assert capsys.readouterr().out == ""


def test_training_leaves_the_global_generator_and_the_thread_count_alone():
    torch.manual_seed(123)
    state, threads = torch.get_rng_state(), torch.get_num_threads()
    model = TinyTransformer(vocab_size=8, max_len=6, embed_dim=16)
    state = torch.get_rng_state()  # after the weights were drawn
    train_model(model, lambda g: reverse_and_shift_batch(16, 6, 8, g), 3, seed=7, progress=False)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.get_num_threads() == threads


def test_a_generator_gives_the_batches_and_the_same_one_the_same_training():
    def run(**options):
        torch.manual_seed(0)  # the same initial weights each time
        return train(5, progress=False, **options)[1]

    first = run(generator=torch.Generator().manual_seed(5))
    assert run(generator=torch.Generator().manual_seed(5)) == first
    assert run(seed=5) == first  # seed makes the same generator
    assert run(seed=0, generator=torch.Generator().manual_seed(5)) == first  # the generator wins
    assert run(generator=torch.Generator().manual_seed(6)) != first
    with pytest.raises(TypeError, match="generator"):
        run(generator=5)


def test_seeded_builds_the_same_weights_as_manual_seed_and_restores_the_generator():
    from attention_core.models.seeding import seeded

    torch.manual_seed(3)
    expected = torch.nn.Linear(4, 4).weight
    torch.manual_seed(99)
    state = torch.get_rng_state()
    with seeded(3):
        weight = torch.nn.Linear(4, 4).weight
    assert torch.equal(weight, expected)
    assert torch.equal(torch.get_rng_state(), state)


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


@pytest.mark.parametrize("options", [{"lr": -1.0}, {"lr": float("nan")}, {"lr": "0.1"},
                                     {"loss_fn": None}, {"make_batch": 3}, {"warmup_steps": -1},
                                     {"generator": 0}, {"steps": -1}])
def test_a_refused_call_leaves_the_model_in_eval_mode(options):
    """Issue #44: every argument is checked before model.train()."""
    model = TinyTransformer(vocab_size=8, max_len=6, embed_dim=16).eval()
    arguments = {"make_batch": lambda g: reverse_and_shift_batch(16, 6, 8, g), "steps": 2,
                 "progress": False} | options
    name = next(iter(options))
    with pytest.raises((ValueError, TypeError), match=name):
        train_model(model, **arguments)
    assert not model.training


def test_model_must_be_a_module():
    with pytest.raises(TypeError, match="model"):
        train_model("gpt", lambda g: None, 1, progress=False)


def test_one_thread_runs_the_block_on_one_thread_and_restores_the_count():
    from attention_core.models.measure import one_thread

    before = torch.get_num_threads()
    with one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), one_thread():
        raise RuntimeError("a failing block still gets its threads back")
    assert torch.get_num_threads() == before


def test_the_optimizer_trains_bit_for_bit_as_adamws_per_parameter_loop():
    """train_model updates every parameter in one foreach call (faster on the CPU); the
    chapters' glued numbers hold only if that changes no bit of the training: the same
    losses and weights as AdamW's per-parameter loop (PyTorch's CPU default), RoPE and
    warm-up included."""
    from attention_core.models.training import token_loss

    def tiny():
        torch.manual_seed(0)
        return TinyTransformer(vocab_size=8, max_len=6, embed_dim=16, num_layers=2, positional="rope")

    model, losses = train_model(tiny(), lambda g: reverse_and_shift_batch(16, 6, 8, g), 10, lr=1e-2,
                                progress=False, warmup_steps=3)
    reference, g = tiny().train(), torch.Generator().manual_seed(0)
    optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-2, weight_decay=0.0, foreach=False)
    warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 3))
    expected = []
    for _ in range(10):
        loss = token_loss(reference, reverse_and_shift_batch(16, 6, 8, g))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        warmup.step()
        expected.append(loss.item())
    assert losses == expected
    for (name, weight), want in zip(model.state_dict().items(), reference.state_dict().values()):
        assert torch.equal(weight, want), name
