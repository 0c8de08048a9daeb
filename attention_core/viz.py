"""Figures of attention: heatmaps, per-head grids, entropy bars.

Every function draws onto an ``Axes`` (made if not given) and returns the artist a
caller may update in place (``AxesImage.set_data``, bar heights), so explorers can
redraw without rebuilding the figure. Colormaps are perceptually uniform (viridis).
"""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

CMAP = "viridis"


def color(x: float):
    """A colour from the book's colormap, ``0 <= x <= 1``."""
    return plt.get_cmap(CMAP)(x)


MASK_CMAP = plt.matplotlib.colors.ListedColormap(["#f2f2f2", color(0.25)])
"""Two colours for masks (pale grey where masked, dark where a query may attend)."""


def _to_numpy(x) -> np.ndarray:
    return x.detach().cpu().float().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def heatmap(weights, query_labels: Sequence[str] | None = None,
            key_labels: Sequence[str] | None = None, ax=None, title: str | None = None,
            colorbar: bool = True, annotate: bool = False, vmax: float = 1.0):
    """Draw attention weights ``(L, S)``: one row per query, one column per key.

    Returns the ``AxesImage``; update it with ``image.set_data(new_weights)``.
    """
    w = _to_numpy(weights)
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
    ax.set_xticks(range(len(key_labels)), key_labels, rotation=45, ha="right")
    ax.set_yticks(range(len(query_labels)), query_labels)


def head_grid(weights, tokens: Sequence[str] | None = None, ncols: int = 4,
              title: str | None = None, head_names: Sequence[str] | None = None):
    """One heatmap per head for ``weights (H, L, S)``; returns ``(fig, images)``."""
    w = _to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"weights must be 3-D (H, L, S), got shape {w.shape}")
    H = w.shape[0]
    ncols = min(ncols, H)
    nrows = math.ceil(H / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.6 * ncols, 2.5 * nrows), squeeze=False,
                             constrained_layout=True)
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
    e = _to_numpy(entropy)
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


def head_sharing_diagram(num_heads: int, num_kv_heads: int, ax=None, title: str | None = None):
    """Query heads (top row) joined to the key/value head each one reads (bottom row):
    query head ``h`` uses kv head ``h // (num_heads // num_kv_heads)``."""
    ax = ax or plt.subplots(figsize=(5, 2))[1]
    group = num_heads // num_kv_heads
    size = min(1.0, 16 / num_heads)  # smaller markers when there are many heads
    kv_x = [(g * group + (group - 1) / 2) for g in range(num_kv_heads)]  # centred under its group
    for h in range(num_heads):
        g = h // group
        ax.plot([h, kv_x[g]], [1, 0], color=color(g / max(num_kv_heads - 1, 1) * 0.85), lw=1.5 * size)
        ax.scatter([h], [1], s=160 * size, marker="s", color=color(g / max(num_kv_heads - 1, 1) * 0.85), zorder=3)
    ax.scatter(kv_x, [0] * num_kv_heads, s=260 * size, marker="o", zorder=3,
               color=[color(g / max(num_kv_heads - 1, 1) * 0.85) for g in range(num_kv_heads)])
    ax.text(-0.9, 1, "query heads", ha="right", va="center", fontsize=9)
    ax.text(-0.9, 0, "key/value heads", ha="right", va="center", fontsize=9)
    ax.set_xlim(-0.28 * num_heads - 3, num_heads - 0.4)
    ax.set_ylim(-0.4, 1.4)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def mask_plot(mask, ax=None, title: str | None = None):
    """Draw a boolean mask ``(L, S)``: dark where a query may attend, pale elsewhere.

    Returns the ``AxesImage`` (update with ``set_data``); the title, if not given,
    states the fraction of the matrix the mask keeps.
    """
    m = _to_numpy(mask).astype(float)
    if m.ndim != 2:
        raise ValueError(f"mask must be 2-D (L, S), got shape {m.shape}")
    ax = ax or plt.subplots(figsize=(3.2, 3.2))[1]
    image = ax.imshow(m, cmap=MASK_CMAP, vmin=0, vmax=1, interpolation="nearest")
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    ax.set_title(title if title is not None else f"keeps {m.mean():.1%}", fontsize=9)
    return image


_FLOWS = {
    # name: (x, y, label); edges follow. Time runs left to right; encoder states at the bottom.
    "bahdanau": ({"prev": (0.0, 1.0, "$s_{t-1}$"), "y": (0.0, 2.0, "$y_{t-1}$"),
                  "h": (1.2, -0.6, "encoder states\n$h_1 \\ldots h_S$"),
                  "attn": (1.2, 0.5, "score + softmax\n$\\alpha_t$"), "c": (2.4, 0.5, "$c_t$"),
                  "rnn": (2.4, 1.6, "GRU"), "s": (3.6, 1.6, "$s_t$"),
                  "out": (4.8, 1.0, "output\n$y_t$")},
                 [("prev", "attn"), ("h", "attn"), ("attn", "c"), ("c", "rnn"), ("prev", "rnn"),
                  ("y", "rnn"), ("rnn", "s"), ("s", "out"), ("c", "out")]),
    "luong": ({"prev": (0.0, 1.0, "$s_{t-1}$"), "y": (0.0, 2.0, "$y_{t-1}$"),
               "rnn": (1.2, 1.6, "GRU"), "s": (2.4, 1.6, "$s_t$"),
               "h": (2.4, -0.6, "encoder states\n$h_1 \\ldots h_S$"),
               "attn": (2.4, 0.5, "score + softmax\n$\\alpha_t$"), "c": (3.6, 0.5, "$c_t$"),
               "tilde": (4.8, 1.0, "$\\tilde h_t = \\tanh(W_c[c_t; s_t])$"),
               "out": (6.0, 1.0, "output\n$y_t$")},
              [("prev", "rnn"), ("y", "rnn"), ("rnn", "s"), ("s", "attn"), ("h", "attn"),
               ("attn", "c"), ("c", "tilde"), ("s", "tilde"), ("tilde", "out")]),
}


def decoder_flow(kind: str, ax=None, title: str | None = None):
    """Draw one decoder step of Bahdanau (``kind="bahdanau"``) or Luong
    (``"luong"``) attention as boxes and arrows: where the context comes from and
    where it goes. Returns the ``Axes``."""
    if kind not in _FLOWS:
        raise ValueError(f"kind must be one of {sorted(_FLOWS)}, got {kind!r}")
    nodes, edges = _FLOWS[kind]
    ax = ax or plt.subplots(figsize=(7, 3))[1]
    boxes = {}
    for name, (x, y, label) in nodes.items():
        shade = 0.75 if name in ("attn", "c") else 0.45 if name in ("rnn", "tilde") else None
        boxes[name] = ax.text(x, y, label, ha="center", va="center", fontsize=9,
                              bbox=dict(boxstyle="round,pad=0.4", lw=1, ec="0.3",
                                        fc=(*color(shade)[:3], 0.35) if shade else "white"))
    for a, b in edges:  # arrows from box edge to box edge
        ax.annotate("", xy=nodes[b][:2], xytext=nodes[a][:2],
                    arrowprops=dict(arrowstyle="-|>", color="0.25", lw=1.1, shrinkA=1, shrinkB=1,
                                    patchA=boxes[a].get_bbox_patch(),
                                    patchB=boxes[b].get_bbox_patch()))
    xs = [x for x, _, _ in nodes.values()]
    ax.set_xlim(min(xs) - 0.6, max(xs) + 0.9)
    ax.set_ylim(-1.2, 2.5)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    return ax
