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
from matplotlib.ticker import MaxNLocator
import torch

from .static_figure import StaticFigure, figure, install_website_figures  # noqa: F401 (viz.figure)

CMAP = "viridis"


def color(x: float):
    """A colour from the book's colormap, ``0 <= x <= 1``."""
    return plt.get_cmap(CMAP)(x)


MASK_CMAP = plt.matplotlib.colors.ListedColormap(["#f2f2f2", color(0.25)])
"""Two colours for masks (pale grey where masked, dark where a query may attend)."""

install_website_figures()  # on the website, every figure's text and panels are measured


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
              title: str | None = None, head_names: Sequence[str] | None = None,
              fig=None, layout: str = "wide"):
    """One heatmap per head for ``weights (H, L, S)``; returns ``(fig, images)``.

    Draws onto ``fig`` if given (the draw function of a ``viz.figure``), else on a new pyplot figure;
    ``layout="narrow"`` stacks the heads in one column (a phone)."""
    w = _to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"weights must be 3-D (H, L, S), got shape {w.shape}")
    H = w.shape[0]
    ncols = 1 if check_layout(layout) else min(ncols, H)
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
    ax.text(-0.9, 1, "query heads", ha="right", va="center", fontsize="medium")
    ax.text(-0.9, 0, "key/value heads", ha="right", va="center", fontsize="medium")
    ax.set_xlim(-0.28 * num_heads - 3, num_heads - 0.4)
    ax.set_ylim(-0.4, 1.4)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize="medium")
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
    for axis in (ax.xaxis, ax.yaxis):  # positions are whole numbers: no 2.5 ticks
        axis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    ax.set_title(title if title is not None else f"keeps {m.mean():.1%}", fontsize="medium")
    return image


_FLOWS = {
    # name: (x, y, label); edges follow. Time runs left to right; encoder states at the bottom.
    "bahdanau": ({"prev": (0.0, 1.0, "$u_{t-1}$"), "y": (0.0, 2.0, "$y_{t-1}$"),
                  "h": (1.2, -0.6, "encoder states\n$e_1 \\ldots e_S$"),
                  "attn": (1.2, 0.5, "score + softmax\n$\\alpha_t$"), "c": (2.4, 0.5, "$c_t$"),
                  "rnn": (2.4, 1.6, "GRU"), "s": (3.6, 1.6, "$u_t$"),
                  "out": (4.8, 1.0, "output\n$y_t$")},
                 [("prev", "attn"), ("h", "attn"), ("attn", "c"), ("c", "rnn"), ("prev", "rnn"),
                  ("y", "rnn"), ("rnn", "s"), ("s", "out"), ("c", "out")]),
    "luong": ({"prev": (0.0, 1.0, "$u_{t-1}$"), "y": (0.0, 2.0, "$y_{t-1}$"),
               "rnn": (1.2, 1.6, "GRU"), "s": (2.4, 1.6, "$u_t$"),
               "h": (2.4, -0.6, "encoder states\n$e_1 \\ldots e_S$"),
               "attn": (2.4, 0.5, "score + softmax\n$\\alpha_t$"), "c": (3.6, 0.5, "$c_t$"),
               "tilde": (4.8, 1.0, "$\\tilde u_t = \\tanh(W_c[c_t; u_t])$"),
               "out": (6.0, 1.0, "output\n$y_t$")},
              [("prev", "rnn"), ("y", "rnn"), ("rnn", "s"), ("s", "attn"), ("h", "attn"),
               ("attn", "c"), ("c", "tilde"), ("s", "tilde"), ("tilde", "out")]),
}


def decoder_flow(kind: str, ax=None, title: str | None = None, layout: str = "wide"):
    """Draw one decoder step of Bahdanau (``kind="bahdanau"``) or Luong
    (``"luong"``) attention as boxes and arrows: where the context comes from and
    where it goes. Time runs left to right (``layout="wide"``) or top to bottom
    (``"narrow"``, for a phone). Returns the ``Axes``."""
    if kind not in _FLOWS:
        raise ValueError(f"kind must be one of {sorted(_FLOWS)}, got {kind!r}")
    nodes, edges = _FLOWS[kind]
    if check_layout(layout):  # transpose: a step's inputs on top, the encoder states to the left
        nodes = {name: (1.5 * y, -x, label.replace("encoder states\n", "encoder\nstates\n")
                        .replace(" = \\tanh", " =$\n$\\tanh"))
                 for name, (x, y, label) in nodes.items()}
    ax = ax or plt.subplots(figsize=(7, 3))[1]
    boxes = {}
    for name, (x, y, label) in nodes.items():
        shade = 0.75 if name in ("attn", "c") else 0.45 if name in ("rnn", "tilde") else None
        boxes[name] = ax.text(x, y, label, ha="center", va="center",
                              fontsize=None if check_layout(layout) else 9,
                              bbox=dict(boxstyle="round,pad=0.4", lw=1, ec="0.3",
                                        fc=(*color(shade)[:3], 0.35) if shade else "white"))
    for a, b in edges:  # arrows from box edge to box edge
        ax.annotate("", xy=nodes[b][:2], xytext=nodes[a][:2],
                    arrowprops=dict(arrowstyle="-|>", color="0.25", lw=1.1, shrinkA=1, shrinkB=1,
                                    patchA=boxes[a].get_bbox_patch(),
                                    patchB=boxes[b].get_bbox_patch()))
    xs = [x for x, _, _ in nodes.values()]
    ys = [y for _, y, _ in nodes.values()]
    if check_layout(layout):
        ax.set_xlim(min(xs) - 0.9, max(xs) + 0.9)
        ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    else:
        ax.set_xlim(min(xs) - 0.6, max(xs) + 0.9)
        ax.set_ylim(-1.2, 2.5)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=None if check_layout(layout) else 10)
    return ax


BLOCK_KINDS = {
    # kind: (title, sublayers from bottom to top)
    "encoder": ("encoder block", ("self-attention\n(every token)", "feed-forward")),
    "decoder": ("decoder block", ("causal\nself-attention", "cross-attention", "feed-forward")),
    "decoder-only": ("decoder-only block", ("causal\nself-attention", "feed-forward")),
}
"""Each kind of Transformer block, with its title and its sublayers from bottom to top."""


def block_diagram(kind: str, ax=None, title: str | None = None):
    """Draw one pre-norm Transformer block of ``kind`` (a key of :data:`BLOCK_KINDS`)
    as its residual stream, a line running bottom to top, and its sublayers: each reads
    a normalised copy of the stream and adds its output back (+). The decoder's
    cross-attention also reads the encoder's output. Returns the ``Axes``."""
    if kind not in BLOCK_KINDS:
        raise ValueError(f"kind must be one of {sorted(BLOCK_KINDS)}, got {kind!r}")
    default_title, sublayers = BLOCK_KINDS[kind]
    ax = ax or plt.subplots(figsize=(2.4, 3.2))[1]
    n, arrow = len(sublayers), dict(arrowstyle="-|>", color="0.25", lw=1.1, shrinkA=2, shrinkB=2)
    ax.annotate("", xy=(0, n + 0.2), xytext=(0, -0.25),
                arrowprops=dict(arrowstyle="-|>", color="0.25", lw=2.2))  # the stream
    ax.text(0, -0.3, "stream in", ha="center", va="top")
    ax.text(0, n + 0.25, "stream out", ha="center", va="bottom")
    for i, label in enumerate(sublayers):
        shade = 0.75 if "attention" in label else 0.45
        box = ax.text(1.1, i + 0.35, label, ha="center", va="center",
                      bbox=dict(boxstyle="round,pad=0.35", lw=1, ec="0.3", fc=(*color(shade)[:3], 0.35)))
        plus = ax.text(0, i + 0.75, "+", ha="center", va="center", fontweight="bold",
                       bbox=dict(boxstyle="circle,pad=0.15", lw=1, ec="0.3", fc="white"))
        ax.annotate("", xy=(1.1, i + 0.35), xytext=(0, i + 0.05),
                    arrowprops={**arrow, "patchB": box.get_bbox_patch()})  # reads the stream
        ax.text(0.3, i + 0.02, "norm", ha="center", va="top", fontstyle="italic", color="0.3")
        ax.annotate("", xy=(0, i + 0.75), xytext=(1.1, i + 0.35),
                    arrowprops={**arrow, "patchA": box.get_bbox_patch(), "patchB": plus.get_bbox_patch()})
        if label == "cross-attention":
            ax.annotate("encoder\noutput", xy=(1.1, i + 0.35), xytext=(2.35, i + 0.35), ha="center",
                        va="center", arrowprops={**arrow, "patchB": box.get_bbox_patch()})
    ax.set_xlim(-0.55, 2.75)
    ax.set_ylim(-0.75, n + 0.7)
    ax.axis("off")
    ax.set_title(title if title is not None else default_title)
    return ax


# --- Panels: the figures of the explorers -----------------------------------------
# Each panel draws its fixed parts onto a figure once and returns ``update(...)``,
# which changes the artists in place (``set_data``, bar heights, titles), so an
# explorer redraws without rebuilding the figure. A chapter draws one state with
# ``panel(fig, ...)(data ...)``.
#
# Every panel takes ``layout``: ``"wide"`` (panels side by side, for a desktop's
# content column and the live widget) or ``"narrow"`` (the same panels stacked, for
# a phone). Font sizes are left to the rcParams an explorer draws under
# (:data:`LAYOUT_STYLE`), so that text is legible at the size a layout is shown.

LAYOUTS = ("wide", "narrow")
"""The layouts every panel can draw."""

LAYOUT_STYLE = {
    # shown at about 730 CSS px (desktop content column): 720 px at 100 dpi, scale 1;
    # the smallest text (8 pt) is 11 px
    "wide": {"dpi": 100, "width": 7.2,
             "rc": {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9,
                    "xtick.labelsize": 8, "ytick.labelsize": 8, "legend.fontsize": 8,
                    "figure.titlesize": 10}},
    # shown at about 358 CSS px (a 390 px phone): 525 px at 150 dpi, scale 0.68;
    # the smallest text (7.5 pt = 15.6 px) is 10.6 CSS px there
    "narrow": {"dpi": 150, "width": 3.5,
               "rc": {"font.size": 8.5, "axes.titlesize": 8.5, "axes.labelsize": 8,
                      "xtick.labelsize": 7.5, "ytick.labelsize": 7.5, "legend.fontsize": 7.5,
                      "figure.titlesize": 9}},
}
"""The dpi, figure width (inches) and rcParams an explorer draws under, for each layout."""


def check_layout(layout: str) -> bool:
    """True for the narrow layout; raises on an unknown one."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return layout == "narrow"


def _pair(fig, layout: str, ratios: Sequence[float]):
    """Two axes: side by side (wide, ``width_ratios``) or stacked (narrow, ``height_ratios``)."""
    if check_layout(layout):
        return fig.subplots(2, 1, height_ratios=ratios)
    return fig.subplots(1, 2, width_ratios=ratios)


def heatmap_entropy_panel(fig, max_tokens: int, layout: str = "wide"):
    """Attention weights of up to ``max_tokens`` tokens beside (wide) or over
    (narrow) the entropy of each row.

    Returns ``update(weights (n, n), labels, title="")``.
    """
    ax_map, ax_ent = _pair(fig, layout, [1.15, 1])
    image = heatmap(np.zeros((max_tokens, max_tokens)), ax=ax_map)
    bars = entropy_bars(np.zeros(max_tokens), ax=ax_ent)
    ax_ent.set_ylim(0, math.log(max_tokens) * 1.45)  # head-room for the note above the line
    line = ax_ent.axhline(0, color="0.3", ls="--", lw=1)
    note = ax_ent.text(0.98, 0.97, "", transform=ax_ent.transAxes, ha="right", va="top",
                       fontsize="small")

    def update(weights, labels: Sequence[str], title: str = ""):
        from .metrics import attention_entropy

        n = len(labels)
        entropy = attention_entropy(torch.as_tensor(weights))  # (n,)
        image.set_data(_to_numpy(weights))
        image.set_extent((-0.5, n - 0.5, n - 0.5, -0.5))
        set_token_ticks(ax_map, labels, labels)
        ax_map.set_title(title)
        for i, bar in enumerate(bars):
            bar.set_height(entropy[i].item() if i < n else 0.0)
            bar.set_visible(i < n)
        ax_ent.set_xlim(-0.5, n - 0.5)
        ax_ent.set_xticks(range(n), labels, rotation=45, ha="right")
        line.set_ydata([math.log(n)] * 2)
        note.set_text(f"dashed: uniform over {n} keys,\nln {n} = {math.log(n):.3f} nats")
        ax_ent.set_title(f"mean entropy {entropy.mean():.2f} nats")

    return update


def scaling_panel(fig, d_ks: Sequence[int], mean_entropy: dict, num_keys: int, bins: int = 40,
                  layout: str = "wide"):
    """Chapter 2: histogram of scores, one softmax row, and the mean row entropy
    against ``d_k`` (``mean_entropy[scaled]`` is one value per ``d_ks``); side by
    side (wide) or stacked (narrow).

    Returns ``update(d_k, scaled, scores (num_rows, S))``.
    """
    from .metrics import attention_entropy

    if check_layout(layout):
        ax_hist, ax_row, ax_ent = fig.subplots(3, 1)
    else:
        ax_hist, ax_row, ax_ent = fig.subplots(1, 3, width_ratios=[1.1, 1, 1])
    hist = ax_hist.bar(np.zeros(bins), np.zeros(bins), width=1.0, align="edge", color=color(0.3))
    ax_hist.set_xlabel("score q·k (/√d_k if scaled)")
    ax_hist.set_ylabel("density")
    row = ax_row.bar(range(num_keys), np.zeros(num_keys), color=color(0.6))
    ax_row.set_ylim(0, 1.05)
    ax_row.set_xlabel("key")
    ax_row.set_ylabel("softmax weight")
    for scaled, style in ((True, "-o"), (False, "--s")):
        ax_ent.plot(d_ks, mean_entropy[scaled], style, ms=3, color=color(0.2 if scaled else 0.75),
                    label="scaled" if scaled else "unscaled")
    ax_ent.axhline(math.log(num_keys), color="0.5", lw=0.8, ls=":")
    ax_ent.set_ylim(0, math.log(num_keys) * 1.08)
    marker, = ax_ent.plot([], [], "o", ms=10, mfc="none", mec="red", mew=2)
    ax_ent.set_xscale("log", base=2)
    ax_ent.set_xticks(list(d_ks), [str(d) for d in d_ks])  # 64, not 2^6 (and no slow mathtext)
    ax_ent.minorticks_off()
    ax_ent.set_xlabel("d_k")
    ax_ent.set_ylabel("mean row entropy (nats)")
    ax_ent.set_title(f"dotted: ln {num_keys} (uniform)")
    ax_ent.legend(loc="lower left")

    def update(d_k: int, scaled: bool, scores):
        from .functional import softmax

        values = _to_numpy(scores).ravel()
        limit = max(4.0, 4 * values.std())
        density, edges = np.histogram(values, bins=bins, range=(-limit, limit), density=True)
        for bar, height, x0 in zip(hist, density, edges[:-1]):
            bar.set_x(x0)
            bar.set_width(edges[1] - edges[0])
            bar.set_height(height)
        ax_hist.set_xlim(-limit, limit)
        ax_hist.set_ylim(0, density.max() * 1.1)
        ax_hist.set_title(f"variance {values.var():.1f} (theory {1 if scaled else d_k})")
        weights = softmax(torch.as_tensor(scores[0]))  # (S,): the first row
        for bar, w in zip(row, weights):
            bar.set_height(w.item())
        ax_row.set_title(f"one row: max {weights.max():.2f},\n"
                         f"entropy {attention_entropy(weights):.2f} nats")
        marker.set_data([d_k], [mean_entropy[scaled][list(d_ks).index(d_k)]])

    return update


def head_grid_panel(fig, max_heads: int, seq_len: int, layout: str = "wide"):
    """Chapter 4: one heatmap per head (up to ``max_heads``, two per row) and each
    head's mean row entropy, to the right (wide) or below (narrow).

    Returns ``update(weights (H, T, T), tokens, head_titles)``.
    """
    from .metrics import attention_entropy

    narrow = check_layout(layout)
    rows = math.ceil(max_heads / 2)
    if narrow:
        grid = fig.add_gridspec(rows + 1, 2, height_ratios=[1] * rows + [0.8])
        ax_bars = fig.add_subplot(grid[rows, :])
    else:
        grid = fig.add_gridspec(rows, 3, width_ratios=[1, 1, 1.05])
        ax_bars = fig.add_subplot(grid[:, 2])
    axes = [fig.add_subplot(grid[h // 2, h % 2]) for h in range(max_heads)]
    images = []
    for h, ax in enumerate(axes):
        images.append(heatmap(np.zeros((seq_len, seq_len)), ax=ax, colorbar=False))
        ax.set_xlabel("key")
        ax.set_ylabel("query" if h % 2 == 0 else "")
    bars = ax_bars.bar(range(max_heads), np.zeros(max_heads), color=color(0.35))
    ax_bars.axhline(math.log(seq_len), color="0.3", ls="--", lw=1)
    ax_bars.set_ylim(0, math.log(seq_len) * 1.1)
    ax_bars.set_xticks(range(max_heads), [f"head {h}" for h in range(max_heads)])
    ax_bars.set_ylabel("mean row entropy (nats)")
    ax_bars.set_title(f"dashed: ln {seq_len} (uniform)")

    def update(weights, tokens: Sequence[str], head_titles: Sequence[str]):
        H = len(weights)
        for h, (ax, image) in enumerate(zip(axes, images)):
            ax.set_visible(h < H)
            if h < H:
                image.set_data(_to_numpy(weights[h]))
                ax.set_xticks(range(seq_len), tokens, rotation=0, ha="center")
                ax.set_yticks(range(seq_len), tokens)
                ax.set_title(head_titles[h])
        entropy = attention_entropy(torch.as_tensor(weights)).mean(-1)  # (H,)
        for h, bar in enumerate(bars):
            bar.set_height(entropy[h].item() if h < H else 0.0)

    return update


def kv_sharing_panel(fig, num_heads: int, contexts: Sequence[int], cache_gib, layout: str = "wide"):
    """Chapter 9: which query heads share each key/value head, and the KV cache size
    against context length, side by side (wide) or stacked (narrow).
    ``cache_gib(num_kv_heads, context) -> GiB``.

    Returns ``update(num_kv_heads, context)``.
    """
    ax_diagram, ax_size = _pair(fig, layout, [1.6, 1] if layout == "wide" else [0.8, 1])
    ax_size.set_xscale("log", base=2)
    ax_size.set_yscale("log", base=2)
    ax_size.set_xlabel("context length (tokens)")
    ax_size.set_ylabel("KV cache (GiB, fp16)")
    for kv, name, va in ((num_heads, "MHA", "bottom"), (1, "MQA", "top")):
        ax_size.plot(contexts, [cache_gib(kv, c) for c in contexts], ":", color="0.6", lw=1)
        ax_size.text(contexts[-1], cache_gib(kv, contexts[-1]), name, fontsize="small", ha="right",
                     va=va, color="0.3")
    line, = ax_size.plot([], [], "-o", ms=3, color=color(0.3))
    point, = ax_size.plot([], [], "o", ms=10, mfc="none", mec="red", mew=2)

    def update(num_kv_heads: int, context: int):
        ax_diagram.clear()
        head_sharing_diagram(num_heads, num_kv_heads, ax=ax_diagram)
        if layout == "narrow":  # room for the row labels, larger beside the narrow figure
            left, right = ax_diagram.get_xlim()
            ax_diagram.set_xlim(left - 0.3 * (right - left), right)
        kind = "MHA" if num_kv_heads == num_heads else "MQA" if num_kv_heads == 1 else "GQA"
        ax_diagram.set_title(f"{kind}: {num_heads} query heads share {num_kv_heads} kv head(s)")
        line.set_data(contexts, [cache_gib(num_kv_heads, c) for c in contexts])
        size = cache_gib(num_kv_heads, context)
        point.set_data([context], [size])
        ax_size.set_title(f"{context:,} tokens: {size:.2f} GiB")

    return update


def encoding_heatmap(pe, ax=None, title: str | None = None):
    """Draw a position encoding ``(T, D)``: one row per position, one column per
    dimension, values in [-1, 1]. Returns the ``AxesImage``."""
    ax = ax or plt.subplots(figsize=(5, 3.6))[1]
    image = ax.imshow(_to_numpy(pe), cmap=CMAP, vmin=-1, vmax=1, aspect="auto",
                      interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="PE value")
    ax.set_xlabel("dimension")
    ax.set_ylabel("position p")
    if title:
        ax.set_title(title)
    return image


def sinusoidal_panel(fig, max_positions: int, max_d_model: int, layout: str = "wide"):
    """Chapter 10: the sinusoidal encoding (positions by dimensions) and the similarity
    of two encodings against their distance, side by side (wide) or stacked (narrow).

    Returns ``update(pe (T, D), similarity (T,), title)``.
    """
    ax_map, ax_sim = _pair(fig, layout, [1.3, 1])
    image = encoding_heatmap(np.zeros((max_positions, max_d_model)), ax=ax_map)
    line, = ax_sim.plot([], [], color=color(0.3))
    ax_sim.set_xlabel("distance |p − p′|")
    ax_sim.set_ylabel("PE(p)·PE(p′) / (d_model / 2)")
    ax_sim.set_ylim(-0.45, 1.05)
    ax_sim.axhline(0, color="0.6", lw=0.8)
    ax_sim.set_title("similarity falls with distance")

    def update(pe, similarity, title: str):
        T, D = pe.shape
        image.set_data(_to_numpy(pe))
        image.set_extent((-0.5, D - 0.5, T - 0.5, -0.5))
        ax_map.set_title(title)
        line.set_data(np.arange(T), _to_numpy(similarity))
        ax_sim.set_xlim(0, T - 1)

    return update


TILE_STATES = ((0, "not yet read"), (1, "earlier query blocks"), (2, "tiles done"), (3, "current tile"))
"""The states of a score tile in :func:`tiling_panel`, in the order of their codes."""


def tiling_panel(fig, max_len: int, layout: str = "wide"):
    """Chapter 11: the grid of score tiles coloured by state (codes of
    :data:`TILE_STATES`) and the running maximum and sum of one row, block by block;
    side by side (wide) or stacked (narrow).

    Returns ``update(state (L, L), block, trace, done, title_grid, title_run)`` where
    ``trace`` lists ``{"m", "l"}`` after each key block and ``done`` blocks are read.
    """
    from matplotlib.patches import Patch

    ax_grid, ax_run = _pair(fig, layout, [1.25, 1])
    image = ax_grid.imshow(np.zeros((max_len, max_len)), cmap=CMAP, vmin=0, vmax=3,
                           interpolation="nearest")
    ax_grid.set_xlabel("key position")
    ax_grid.set_ylabel("query position")
    handles = [Patch(color=image.cmap(image.norm(v)), label=name)
               for v, name in (TILE_STATES[1], TILE_STATES[2], TILE_STATES[3], TILE_STATES[0])]
    if layout == "narrow":  # above the grid, two columns
        fig.legend(handles=handles, loc="outside upper center", ncols=2, frameon=False)
    else:
        ax_grid.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    m_line, = ax_run.plot([], [], "o-", color=color(0.2), label="running max m")
    l_line, = ax_run.plot([], [], "s-", color=color(0.7), label="running sum l")
    m_final = ax_run.axhline(0, color=color(0.2), ls=":", lw=1)
    l_final = ax_run.axhline(0, color=color(0.7), ls=":", lw=1)
    ax_run.set_xlabel("key blocks read")
    ax_run.legend(loc="upper left")

    def update(state, block: int, trace, done: int, title_grid: str, title_run: str):
        L = len(state)
        image.set_data(_to_numpy(state))
        image.set_extent((-0.5, L - 0.5, L - 0.5, -0.5))
        ax_grid.set_xticks(np.arange(-0.5, L, block), minor=True)
        ax_grid.set_yticks(np.arange(-0.5, L, block), minor=True)
        ax_grid.grid(which="minor", color="white", lw=0.8)
        ax_grid.tick_params(which="minor", length=0)
        ax_grid.set_title(title_grid)
        steps = np.arange(1, done + 1)
        m_line.set_data(steps, [t["m"] for t in trace[:done]])
        l_line.set_data(steps, [t["l"] for t in trace[:done]])
        m_final.set_ydata([trace[-1]["m"]] * 2)
        l_final.set_ydata([trace[-1]["l"]] * 2)
        ax_run.set_xlim(0.5, max(len(trace), 2) + 0.5)
        ax_run.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
        top = max(max(t["m"] for t in trace), max(t["l"] for t in trace))
        ax_run.set_ylim(min(0, min(t["m"] for t in trace)) - 0.5, top * 1.3 + 0.5)
        ax_run.set_title(title_run)

    return update


def sparse_reach_panel(fig, max_len: int, layout: str = "wide"):
    """Chapter 8: a sparse mask and, per position, the layers until the last token
    depends on it (negative: never; drawn as a gap); side by side (wide) or stacked
    (narrow).

    Returns ``update(mask (L, L), layers (L,), title_mask, title_reach)``.
    """
    ax_mask, ax_reach = _pair(fig, layout, [1, 1.3] if layout == "wide" else [1.3, 1])
    image = mask_plot(np.zeros((max_len, max_len)), ax=ax_mask)
    line, = ax_reach.step([], [], where="mid", color=color(0.25))
    ax_reach.set_xlabel("position j")
    ax_reach.set_ylabel("layers until the last token\ndepends on position j")
    ax_reach.set_xlim(-0.5, max_len - 0.5)
    note = ax_reach.text(0.98, 0.97, "", transform=ax_reach.transAxes, va="top", ha="right",
                         fontsize="small")

    def update(mask, layers, title_mask: str, title_reach: str):
        L = len(mask)
        layers = _to_numpy(layers)
        image.set_data(_to_numpy(mask).astype(float))
        image.set_extent((-0.5, L - 0.5, L - 0.5, -0.5))
        ax_mask.set_title(title_mask)
        line.set_data(np.arange(L), np.where(layers < 0, np.nan, layers))  # gaps: never reached
        ax_reach.set_ylim(0, layers.max() * 1.2 + 1)
        ax_reach.set_title(title_reach)
        never, most = int((layers < 0).sum()), int(layers.max())
        note.set_text(f"{never} positions never reached" if never else
                      f"every position within {most} layer{'s' if most != 1 else ''}")

    return update


def alignment_panel(fig, max_source: int, layout: str = "wide"):
    """Chapter 7: an encoder-decoder's alignment, output words by source words (one
    panel: the layouts differ only in the figure's size).

    Returns ``update(weights (T_out, T_src), output_words, source_words, title)``.
    """
    check_layout(layout)
    ax = fig.subplots()
    image = heatmap(np.zeros((max_source + 1, max_source)), ax=ax, colorbar=True)

    def update(weights, output_words: Sequence[str], source_words: Sequence[str], title: str):
        image.set_data(_to_numpy(weights))
        image.set_extent((-0.5, len(source_words) - 0.5, len(output_words) - 0.5, -0.5))
        set_token_ticks(ax, output_words, source_words)
        ax.set_xlabel("source word")
        ax.set_ylabel("output word")
        ax.set_title(title)

    return update


# --- Chapter 13: a pretrained model's layers and heads --------------------------------------

def layer_head_map(values, ax=None, title: str | None = None, label: str = "",
                   vmin: float | None = None, vmax: float | None = None, cmap=CMAP,
                   fmt: str | None = None, cell_text=None, colorbar: bool = True):
    """One cell per head of a model: ``values (num_layers, H)``, layers as rows (1 at the
    top), heads as columns, numbered from 1 as in papers. ``fmt`` (e.g. ``"{:.1f}"``)
    writes each value in its cell, or ``cell_text`` (``num_layers`` lists of H strings)
    writes those. Returns the ``AxesImage``."""
    v = _to_numpy(values)
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
    w = _to_numpy(attentions)
    if w.ndim != 4:
        raise ValueError(f"attentions must be 4-D (num_layers, H, T, T), got shape {w.shape}")
    num_layers, H = w.shape[:2]
    if fig is None:
        fig = plt.figure(figsize=(0.62 * num_layers + 0.7, 0.62 * H + 0.9))
    fig.set_layout_engine("none")  # fixed margins instead of a layout engine: quick with 72 axes
    width, height = fig.get_size_inches()
    margins = dict(left=0.55 / width, right=1 - 0.1 / width, bottom=0.1 / height,
                   top=1 - 0.75 / height, wspace=0.08, hspace=0.08)
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


def pretrained_layer_panel(fig, num_heads: int, max_tokens: int, layout: str = "wide"):
    """Chapter 13: every head of one layer at once. Left (wide) or top (narrow): one row
    per head, the mean weight each key receives from the sentence's queries; right or
    bottom: the layer's weights averaged over its heads, queries by keys.

    Returns ``update(received (H, T), weights (T, T), tokens, title)``. Token labels are
    redrawn only when the tokens change (drawing ticks is the slow part of a frame).
    """
    narrow = check_layout(layout)
    ax_heads, ax_map = _pair(fig, layout, [1, 1.15] if narrow else [1, 1])
    heads = ax_heads.imshow(np.zeros((num_heads, max_tokens)), cmap=CMAP, vmin=0, vmax=1,
                            aspect="auto")
    ax_heads.set_ylabel("head")
    ax_heads.set_title("each head: mean weight a key receives")
    image = heatmap(np.zeros((max_tokens, max_tokens)), ax=ax_map, colorbar=False)
    fig.colorbar(heads, ax=[ax_heads, ax_map], fraction=0.04, pad=0.02, label="weight")
    shown = {"tokens": None}

    def update(received, weights, tokens: Sequence[str], title: str):
        T = len(tokens)
        heads.set_data(_to_numpy(received))
        heads.set_extent((-0.5, T - 0.5, num_heads - 0.5, -0.5))
        image.set_data(_to_numpy(weights))
        image.set_extent((-0.5, T - 0.5, T - 0.5, -0.5))
        if list(tokens) != shown["tokens"]:
            shown["tokens"] = list(tokens)
            ax_heads.set_xticks(range(T), tokens, rotation=45, ha="right")
            ax_heads.set_yticks(range(num_heads), [str(h + 1) if h % 2 == 0 or not narrow else ""
                                                   for h in range(num_heads)])
            set_token_ticks(ax_map, tokens, tokens)
        ax_map.set_xlabel("key (attended to)")
        ax_map.set_ylabel("query")
        ax_map.set_title(title)

    return update


def kv_memory_panel(fig, contexts: Sequence[int], curves, layout: str = "wide"):
    """Chapter 12: KV cache size against context length, one line per variant
    (``curves``: name -> GiB at each of ``contexts``), beside (wide) or over (narrow)
    bars of every variant at one context, in the lines' colours (the legend). Returns
    ``update(variant, context)``, which picks out one variant and one context."""
    names = list(curves)
    ax_lines, ax_bars = _pair(fig, layout, [1.25, 1] if layout == "wide" else [1, 0.9])
    lines = {}
    for i, name in enumerate(names):
        lines[name], = ax_lines.plot(contexts, curves[name], "--" if "sinks" in name else "-", lw=1.2,
                                     color=color(0.85 * i / max(len(names) - 1, 1)), label=name)
    ax_lines.set_xscale("log", base=2)
    ax_lines.set_yscale("log", base=2)
    ax_lines.set_xlabel("context length (tokens)")
    ax_lines.set_ylabel("KV cache (GiB, 16-bit)")
    marker = ax_lines.axvline(contexts[0], color="0.5", ls=":", lw=1)
    point, = ax_lines.plot([], [], "o", ms=9, mfc="none", mec="red", mew=2)
    bars = ax_bars.barh(range(len(names)), [0.0] * len(names),  # the bars are the lines' legend
                        color=[line.get_color() for line in lines.values()], lw=2.5)
    ax_bars.set_yticks(range(len(names)), names)
    ax_bars.invert_yaxis()
    ax_bars.set_xlabel("KV cache (GiB)")
    labels = [ax_bars.text(0, i, "", va="center", fontsize="small") for i in range(len(names))]

    def update(variant: str, context: int):
        at = list(contexts).index(context)
        marker.set_xdata([context, context])
        for i, name in enumerate(names):
            lines[name].set_linewidth(3.0 if name == variant else 1.2)
            size = curves[name][at]
            bars[i].set_width(size)
            bars[i].set_edgecolor("red" if name == variant else "none")
            labels[i].set_position((size, i))
            labels[i].set_text(f" {size:.2f}")
        point.set_data([context], [curves[variant][at]])
        ax_bars.set_xlim(0, 1.35 * max(c[at] for c in curves.values()))
        ax_lines.set_title(f"{variant}: {curves[variant][at]:.2f} GiB at {context:,} tokens")
        ax_bars.set_title(f"every variant at {context:,} tokens")

    return update


def block_stack_panel(fig, max_depth: int, stream_max: float, grad_max: float, layout: str = "wide"):
    """Chapter 6: the stream's size after each block and each block's gradient norm for
    one stack of blocks; side by side (wide) or stacked (narrow). Axis limits are fixed
    so frames of different depth and norm placement compare at a glance.

    Returns ``update(stream (depth + 1,), grads (depth,), name)``.
    """
    ax_stream, ax_grad = fig.subplots(2, 1) if check_layout(layout) else fig.subplots(1, 2)
    line, = ax_stream.plot([], [], "-o", ms=3, color=color(0.2))
    ax_stream.set(xlim=(-0.5, max_depth + 0.5), ylim=(0, stream_max), xlabel="after block",
                  ylabel="mean norm of a token's vector")
    bars = ax_grad.bar(range(1, max_depth + 1), np.zeros(max_depth), color=color(0.6))
    ax_grad.set(xlim=(0.3, max_depth + 0.7), ylim=(0, grad_max), xlabel="block",
                ylabel="gradient norm of its weights")

    def update(stream, grads, name: str):
        line.set_data(range(len(stream)), stream)
        for k, bar in enumerate(bars):
            bar.set_height(grads[k] if k < len(grads) else 0.0)
        ax_stream.set_title(f"{name}: the stream, {len(grads)} blocks")
        ax_grad.set_title(f"gradient per block (top: {grads[-1]:.3f})")

    return update
