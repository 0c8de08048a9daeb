"""Chapters 4, 6, 7, 10 and 12: the one training loop of the book: every chapter that trains a model calls
:func:`train_model`. The maths modules never import this one.

Shape legend: B batch, T sequence length, ``vocab_size`` vocabulary size.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
from tqdm.std import tqdm

from ..nn._checks import check_positive_int
from .measure import one_thread
from .site_build import building_website


def token_loss(model: torch.nn.Module, batch: tuple) -> torch.Tensor:
    """Cross-entropy of ``model(x)`` against ``y`` for a batch ``(x (B, T), y (B, T, ...))``;
    the model returns ``(logits (B, T, ..., vocab_size), anything)`` and has a ``vocab_size``."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError(f"batch must be a pair (x, y), got {type(batch).__name__} of "
                        f"{len(batch) if hasattr(batch, '__len__') else '?'}")
    x, y = batch
    logits, _ = model(x)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, model.vocab_size), y.reshape(-1))


def train_model(model: torch.nn.Module, make_batch: Callable[[torch.Generator], Any],
                steps: int, lr: float = 3e-3, seed: int = 0, progress: bool = True,
                desc: str = "training", loss_fn: Callable[[Any, Any], torch.Tensor] = token_loss,
                warmup_steps: int = 0):
    """Train ``model`` with AdamW on batches from ``make_batch(generator)``, seeded;
    ``loss_fn(model, batch)`` gives the loss (default :func:`token_loss`). Returns
    ``(model in eval mode, losses)``.

    ``warmup_steps`` raises the learning rate linearly over the first steps, step ``s``
    using ``lr * min(1, (s + 1) / warmup_steps)`` (the original Transformer's warm-up,
    Vaswani et al., 2017, without its later decay); 0 keeps ``lr`` from the first step.

    ``progress`` shows a text tqdm bar on stdout in a kernel or a terminal; while the
    website is built (:func:`~attention_core.models.site_build.building_website`) it prints one
    summary line instead, ``desc: N steps, loss first -> last``, since a page is read
    after the run and a bar's intermediate states would only clutter it.
    """
    check_positive_int("steps", steps, minimum=0)
    if not callable(make_batch):
        raise TypeError(f"make_batch must be a function of a Generator, got {type(make_batch).__name__}")
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model.train()
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise ValueError(f"warmup_steps must be an int >= 0, got {warmup_steps!r}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    warmup = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0)
    losses = []
    tqdm.monitor_interval = 0  # no monitor thread inside a notebook kernel
    bar = tqdm(range(steps), desc=desc, file=sys.stdout, disable=not progress or building_website(),
               mininterval=5.0, ncols=80, ascii=True)
    with one_thread():  # tiny matrices gain nothing from a second thread
        for _ in bar:
            loss = loss_fn(model, make_batch(g))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            warmup.step()
            losses.append(loss.item())
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    bar.close()
    if progress and building_website() and losses:
        print(f"{desc}: {steps} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    return model.eval(), losses
