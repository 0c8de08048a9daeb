"""Chapters 4, 6, 7, 10 and 12: the one training loop of the book: every chapter that trains a model calls
:func:`train_model`. The maths modules never import this one.

Shape legend: B batch, T sequence length, ``vocab_size`` vocabulary size.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import torch
from tqdm.std import tqdm

from ..nn._checks import check_positive_int

__all__ = ["token_loss", "train_model"]


def token_loss(model: torch.nn.Module, batch: tuple) -> torch.Tensor:
    """Cross-entropy of ``model(x)`` against ``y`` for a batch ``(x (B, T), y (B, T, ...))``;
    the model returns ``(logits (B, T, ..., vocab_size), anything)`` and has a ``vocab_size``."""
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "vocab_size"):
        raise TypeError(f"model must be a torch.nn.Module with a vocab_size, got {type(model).__name__}")
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError(f"batch must be a pair (x, y), got {type(batch).__name__} of "
                        f"{len(batch) if hasattr(batch, '__len__') else '?'}")
    x, y = batch
    logits, _ = model(x)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, model.vocab_size), y.reshape(-1))


def train_model(model: torch.nn.Module, make_batch: Callable[[torch.Generator], Any],
                steps: int, lr: float = 3e-3, seed: int = 0, progress: bool = True,
                desc: str = "training", loss_fn: Callable[[Any, Any], torch.Tensor] = token_loss,
                warmup_steps: int = 0, generator: torch.Generator | None = None):
    """Train ``model`` with AdamW on batches from ``make_batch(generator)``; ``loss_fn(model,
    batch)`` gives the loss (default :func:`token_loss`). Returns ``(model in eval mode, losses)``.

    The batches' random numbers come from ``generator``, or, without one, from a new
    generator seeded with ``seed``: the same seed gives the same batches. Nothing is drawn
    from torch's global generator and no global setting changes (a model with dropout would
    draw its masks from the global generator: seed it before the call). The thread count is
    the caller's; the book's chapters train on one thread (``torch.set_num_threads(1)`` or
    :func:`~attention_core.models.measure.one_thread`).

    ``warmup_steps`` raises the learning rate linearly over the first steps, step ``s``
    using ``lr * min(1, (s + 1) / warmup_steps)`` (the original Transformer's warm-up,
    Vaswani et al., 2017, without its later decay); 0 keeps ``lr`` from the first step.

    ``progress`` shows a tqdm bar on stdout (set ``TQDM_DISABLE=1`` in the environment to
    hide every bar) and then prints one line, ``desc: N steps, loss first -> last``;
    ``progress=False`` prints nothing.
    """
    # every check before model.train(): a refused call leaves the model's mode as it was
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    check_positive_int("steps", steps, minimum=0)
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be a function (model, batch) -> loss, got {type(loss_fn).__name__}")
    if not callable(make_batch):
        raise TypeError(f"make_batch must be a function of a Generator, got {type(make_batch).__name__}")
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise ValueError(f"warmup_steps must be an int >= 0, got {warmup_steps!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    g = torch.Generator().manual_seed(seed) if generator is None else generator
    model.train()
    # foreach=True: one call updates every parameter (PyTorch's CPU default loops over them in
    # Python, ~10 small ops each). Same kernels in the same order, so the same numbers, bit for
    # bit (tests/test_training.py); fewer, larger ops for chapter 10's 37 parameters
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, foreach=True)
    warmup = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0)
    losses = []
    # a text bar; tqdm itself reads TQDM_DISABLE, so no disable= unless progress is off
    bar = tqdm(range(steps), desc=desc, file=sys.stdout, mininterval=5.0, ncols=80, ascii=True,
               **({} if progress else {"disable": True}))
    for _ in bar:
        loss = loss_fn(model, make_batch(g))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        warmup.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    bar.close()
    if progress and losses:
        print(f"{desc}: {steps} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    return model.eval(), losses
