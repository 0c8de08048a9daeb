"""Every chapter: plots of attention, heatmaps of weights, per-head grids, entropy
bars, masks, position encodings, and a pretrained model's layers and heads (chapter 13).

Every function draws onto an ``Axes`` (made if not given) and returns the artist a
caller may update in place (``AxesImage.set_data``, bar heights), so explorers can
redraw without rebuilding the figure. Colormaps are perceptually uniform (viridis).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.ticker import MaxNLocator

from ..render import is_narrow

__all__ = [
    "CMAP", "color", "to_numpy", "heatmap", "set_token_ticks", "head_grid", "entropy_bars", "mask_plot",
    "encoding_heatmap", "layer_head_map", "all_heads_grid",
]

CMAP = "viridis"
"""The book's colormap (perceptually uniform)."""


def color(x: float):
    """A colour from the book's colormap, ``0 <= x <= 1``."""
    if isinstance(x, (str, bytes)):
        raise TypeError(f"x must be a number in [0, 1] (or an array of them), got {x!r}")
    return plt.get_cmap(CMAP)(x)


MASK_CMAP = ListedColormap(["#f2f2f2", color(0.25)])
"""Two colours for masks (pale grey where masked, dark where a query may attend)."""

def to_numpy(x) -> np.ndarray:
    """A tensor (any device, any float dtype) or array-like as a NumPy array, to draw."""
    return x.detach().cpu().float().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def heatmap(weights, query_labels: Sequence[str] | None = None,
            key_labels: Sequence[str] | None = None, ax=None, title: str | None = None,
            colorbar: bool = True, annotate: bool = False, vmax: float = 1.0):
    """Draw attention weights ``(L, S)``: one row per query, one column per key.

    Returns the ``AxesImage``; update it with ``image.set_data(new_weights)``.
    """
    w = to_numpy(weights)
    if w.ndim != 2:
        raise ValueError(f"weights must be 2-D (L, S), got shape {w.shape}")
    ax = ax or plt.subplots(figsize=(4, 3.6))[1]
    image = ax.imshow(w, cmap=CMAP, vmin=0.0, vmax=vmax, aspect="auto")
    L, S = w.shape
    set_token_ticks(ax, query_labels or [str(i) for i in range(L)],
                    key_labels or [str(j) for j in range(S)])
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="weight")
    if annotate:
        for i in range(L):
            for j in range(S):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if w[i, j] < 0.6 * vmax else "black")
    return image


def set_token_ticks(ax, query_labels: Sequence[str], key_labels: Sequence[str]) -> None:
    """Put token labels on both axes of a heatmap (keys rotated to stay legible)."""
    for name, labels in (("query_labels", query_labels), ("key_labels", key_labels)):
        if isinstance(labels, str) or not isinstance(labels, Sequence):
            raise TypeError(f"{name} must be a list of labels, got {labels!r}")
    if not hasattr(ax, "set_xticks"):
        raise TypeError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
    ax.set_xticks(range(len(key_labels)), key_labels, rotation=45, ha="right")
    ax.set_yticks(range(len(query_labels)), query_labels)


def head_grid(weights, tokens: Sequence[str] | None = None, ncols: int = 4,
              title: str | None = None, head_names: Sequence[str] | None = None,
              fig=None, layout: str = "wide"):
    """One heatmap per head for ``weights (H, L, S)``; returns ``(fig, images)``.

    Draws onto ``fig`` if given (the draw function of a ``viz.figure``), else on a new pyplot figure;
    ``layout="narrow"`` stacks the heads in one column (a phone)."""
    w = to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"weights must be 3-D (H, L, S), got shape {w.shape}")
    H = w.shape[0]
    ncols = 1 if is_narrow(layout) else min(ncols, H)
    nrows = math.ceil(H / ncols)
    if fig is None:
        fig, axes = plt.subplots(nrows, ncols, figsize=(2.6 * ncols, 2.5 * nrows), squeeze=False,
                                 constrained_layout=True)
    else:
        axes = fig.subplots(nrows, ncols, squeeze=False)
    images = []
    for h, ax in enumerate(axes.flat):
        if h >= H:
            ax.axis("off")
            continue
        images.append(heatmap(w[h], tokens, tokens, ax=ax, colorbar=False))
        ax.set_title(head_names[h] if head_names else f"head {h}", fontsize=9)
        if h % ncols:
            ax.set_ylabel("")
    fig.colorbar(images[0], ax=axes, shrink=0.8, label="weight")
    if title:
        fig.suptitle(title)
    return fig, images


def entropy_bars(entropy, labels: Sequence[str] | None = None, max_entropy: float | None = None,
                 ax=None, title: str | None = None):
    """Bar per query of the entropy (nats) of its attention row; a dashed line at ``ln S``.

    Returns the ``BarContainer``; update with ``bar.set_height``.
    """
    e = to_numpy(entropy)
    if e.ndim != 1 or e.size == 0:
        raise ValueError(f"entropy must be one value per query (T,), T >= 1, got shape {e.shape}")
    ax = ax or plt.subplots(figsize=(4, 3))[1]
    bars = ax.bar(range(len(e)), e, color=color(0.35))
    ax.set_xticks(range(len(e)), labels or [str(i) for i in range(len(e))], rotation=45, ha="right")
    ax.set_ylabel("entropy (nats)")
    ax.set_xlabel("query")
    if max_entropy is not None:
        ax.axhline(max_entropy, color="0.3", ls="--", lw=1)
        ax.text(len(e) - 0.5, max_entropy, f"uniform: ln {round(math.exp(max_entropy))} = "
                f"{max_entropy:.3f}", ha="right", va="bottom", fontsize=8)
        ax.set_ylim(0, max_entropy * 1.15)
    if title:
        ax.set_title(title)
    return bars


def mask_plot(mask, ax=None, title: str | None = None):
    """Draw a boolean mask ``(L, S)``: dark where a query may attend, pale elsewhere.

    Returns the ``AxesImage`` (update with ``set_data``); the title, if not given,
    states the fraction of the matrix the mask keeps.
    """
    m = to_numpy(mask)
    if m.ndim != 2 or m.size == 0 or m.dtype.kind not in "biuf":
        raise ValueError(f"mask must be a boolean matrix (L, S), got {m.dtype} of shape {m.shape}")
    m = m.astype(float)
    if m.ndim != 2:
        raise ValueError(f"mask must be 2-D (L, S), got shape {m.shape}")
    ax = ax or plt.subplots(figsize=(3.2, 3.2))[1]
    image = ax.imshow(m, cmap=MASK_CMAP, vmin=0, vmax=1, interpolation="nearest")
    for axis in (ax.xaxis, ax.yaxis):  # positions are whole numbers: no 2.5 ticks
        axis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    ax.set_title(title if title is not None else f"keeps {m.mean():.1%}", fontsize="medium")
    return image


def encoding_heatmap(pe, ax=None, title: str | None = None):
    """Draw a position encoding ``(T, D)``: one row per position, one column per
    dimension, values in [-1, 1]. Returns the ``AxesImage``."""
    if to_numpy(pe).ndim != 2 or to_numpy(pe).size == 0 or to_numpy(pe).dtype.kind not in "biuf":
        raise ValueError(f"pe must be a matrix (T, D) of numbers, got {getattr(pe, 'shape', pe)!r}")
    ax = ax or plt.subplots(figsize=(5, 3.6))[1]
    image = ax.imshow(to_numpy(pe), cmap=CMAP, vmin=-1, vmax=1, aspect="auto",
                      interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="PE value")
    ax.set_xlabel("dimension")
    ax.set_ylabel("position p")
    if title:
        ax.set_title(title)
    return image


def layer_head_map(values, ax=None, title: str | None = None, label: str = "",
                   vmin: float | None = None, vmax: float | None = None, cmap=CMAP,
                   fmt: str | None = None, cell_text=None, colorbar: bool = True):
    """One cell per head of a model: ``values (num_layers, H)``, layers as rows (1 at the
    top), heads as columns, numbered from 1 as in papers. ``fmt`` (e.g. ``"{:.1f}"``)
    writes each value in its cell, or ``cell_text`` (``num_layers`` lists of H strings)
    writes those. Returns the ``AxesImage``."""
    v = to_numpy(values)
    if v.ndim != 2:
        raise ValueError(f"values must be 2-D (num_layers, H), got shape {v.shape}")
    num_layers, H = v.shape
    ax = ax or plt.subplots(figsize=(5.2, 2.9), constrained_layout=True)[1]
    image = ax.imshow(v, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(H), [str(h + 1) for h in range(H)])
    ax.set_yticks(range(num_layers), [str(n + 1) for n in range(num_layers)])
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    if fmt or cell_text:
        lo, hi = image.get_clim()
        for n in range(num_layers):
            for h in range(H):
                dark = (v[n, h] - lo) < 0.6 * (hi - lo)
                text = cell_text[n][h] if cell_text else fmt.format(v[n, h])
                ax.text(h, n, text, ha="center", va="center", fontsize=8.5,
                        color="white" if dark else "black")
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.04, pad=0.02, label=label)
    return image


def all_heads_grid(attentions, title: str | None = None, fig=None):
    """Every head of every layer as a thumbnail: ``attentions (num_layers, H, T, T)``,
    one column per layer and one row per head (a tall figure that stays legible on a
    phone). The shape of a thumbnail tells the head's kind: a vertical stripe is a
    head parking its weight on one token, a line just below the diagonal a
    previous-token head. Draws onto ``fig`` (e.g. in a ``viz.figure``'s ``draw``) or a
    new figure; returns the figure."""
    w = to_numpy(attentions)
    if w.ndim != 4:
        raise ValueError(f"attentions must be 4-D (num_layers, H, T, T), got shape {w.shape}")
    num_layers, H = w.shape[:2]
    if fig is None:
        fig = plt.figure(figsize=(0.62 * num_layers + 0.7, 0.62 * H + 0.9))
    fig.set_layout_engine("none")  # fixed margins instead of a layout engine: quick with 72 axes
    width, height = fig.get_size_inches()
    margins = {"left": 0.55 / width, "right": 1 - 0.1 / width, "bottom": 0.1 / height,
                   "top": 1 - 0.75 / height, "wspace": 0.08, "hspace": 0.08}
    axes = fig.subplots(H, num_layers, squeeze=False, gridspec_kw=margins)  # no subplots_adjust
    for h in range(H):
        for n in range(num_layers):
            ax = axes[h, n]
            ax.imshow(w[n, h], cmap=CMAP, vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if h == 0:
                ax.set_title(f"L{n + 1}", fontsize=10)
            if n == 0:
                ax.set_ylabel(f"H{h + 1}", rotation=0, ha="right", va="center", fontsize=10)
    if title:
        fig.suptitle(title, fontsize=10, y=1 - 0.08 / height, va="top")
    return fig
