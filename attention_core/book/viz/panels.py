"""Every chapter: the explorers' figures, one panel per explorer of
:mod:`~attention_core.book.explorers.chapters`, which drives them.

Each panel draws its fixed parts onto a figure once and returns ``update(...)``, which
changes the artists in place (``set_data``, bar heights, titles), so an explorer
redraws without rebuilding the figure. A chapter draws one state with
``panel(fig, ...)(data ...)``.

Every panel takes ``layout``: ``"wide"`` (panels side by side, for a desktop's content
column and the live widget) or ``"narrow"`` (the same panels stacked, for a phone). Font
sizes are left to the rcParams an explorer draws under
(:data:`attention_core.book.render.LAYOUT_STYLE`), so that text is legible at the size a
layout is shown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FormatStrFormatter, MaxNLocator

from ...nn.functional import softmax
from ...nn.metrics import attention_entropy
from ..render import check_figure, check_layout, is_narrow
from .diagrams import head_sharing_diagram
from .plots import CMAP, color, encoding_heatmap, entropy_bars, heatmap, mask_plot, set_token_ticks, to_numpy

__all__ = [
    "heatmap_entropy_panel", "scaling_panel", "head_grid_panel", "kv_sharing_panel", "sinusoidal_panel",
    "TILE_STATES", "tiling_panel", "sparse_reach_panel", "alignment_panel", "pretrained_layer_panel",
    "kv_memory_panel", "block_stack_panel", "lens_panel",
]


def _pair(fig, layout: str, ratios: Sequence[float]):
    """Two axes: side by side (wide, ``width_ratios``) or stacked (narrow, ``height_ratios``)."""
    if is_narrow(layout):
        return fig.subplots(2, 1, height_ratios=ratios)
    return fig.subplots(1, 2, width_ratios=ratios)



def _check_sizes(**sizes) -> None:
    """Raise unless each keyword is what a panel's size must be, by its kind: an int >= 1
    (``max_tokens``), a finite number > 0 (``stream_max``), a non-empty list (``contexts``), a
    dict (``curves``) or a function (``cache_gib``). Panels are drawn once, so a bad size fails here."""
    for name, value in sizes.items():
        if name.endswith("_max"):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf
            kind = "a finite number > 0"
        elif name in ("d_ks", "contexts"):
            ok, kind = isinstance(value, (list, tuple)) and len(value) > 0, "a non-empty list"
        elif name in ("mean_entropy", "curves"):
            ok, kind = isinstance(value, dict), "a dict"
        elif name == "cache_gib":
            ok, kind = callable(value), "a function"
        else:
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
            kind = "an int >= 1"
        if not ok:
            raise ValueError(f"{name} must be {kind}, got {value!r}")

def heatmap_entropy_panel(fig, max_tokens: int, layout: str = "wide"):
    """Chapters 1, 3 and 5: attention weights of up to ``max_tokens`` tokens beside
    (wide) or over (narrow) the entropy of each row.

    Returns ``update(weights (n, n), labels, title="")``.
    """
    _check_sizes(max_tokens=max_tokens)
    check_figure("fig", fig)
    ax_map, ax_ent = _pair(fig, layout, [1.15, 1])
    image = heatmap(np.zeros((max_tokens, max_tokens)), ax=ax_map)
    bars = entropy_bars(np.zeros(max_tokens), ax=ax_ent)
    ax_ent.set_ylim(0, math.log(max_tokens) * 1.45)  # head-room for the note above the line
    line = ax_ent.axhline(0, color="0.3", ls="--", lw=1)
    note = ax_ent.text(0.98, 0.97, "", transform=ax_ent.transAxes, ha="right", va="top",
                       fontsize="small")

    def update(weights, labels: Sequence[str], title: str = ""):
        n = len(labels)
        entropy = attention_entropy(torch.as_tensor(weights))  # (n,)
        image.set_data(to_numpy(weights))
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
    _check_sizes(d_ks=d_ks, mean_entropy=mean_entropy, num_keys=num_keys)
    check_figure("fig", fig)
    if is_narrow(layout):
        ax_hist, ax_row, ax_ent = fig.subplots(3, 1)
    else:
        ax_hist, ax_row, ax_ent = fig.subplots(1, 3, width_ratios=[1.1, 1, 1])
    hist = ax_hist.bar(np.zeros(bins), np.zeros(bins), width=1.0, align="edge", color=color(0.3))
    ax_hist.set_xlabel("score q·k (/√d_k if scaled)")
    ax_hist.set_ylabel("density")
    # tick labels of one width in every frame ("0.002" to "0.400"): the layout, made for the
    # first frame, fits them all
    ax_hist.yaxis.set_major_locator(MaxNLocator(4, steps=[1, 2, 5, 10]))
    ax_hist.yaxis.set_major_formatter(FormatStrFormatter("%.3f"))
    row = ax_row.bar(range(num_keys), np.zeros(num_keys), color=color(0.6))
    ax_row.set_ylim(0, 1.05)
    ax_row.set_xlabel("key")
    ax_row.set_ylabel("softmax weight")
    marker = _entropy_against_d_k(ax_ent, d_ks, mean_entropy, num_keys)

    def update(d_k: int, scaled: bool, scores):
        values = to_numpy(scores).ravel()
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


def _entropy_against_d_k(ax, d_ks: Sequence[int], mean_entropy: dict, num_keys: int):
    """Chapter 2's mean row entropy against ``d_k``, scaled and unscaled, on a log axis;
    returns the marker of the current setting (``set_data`` moves it)."""
    for scaled, style in ((True, "-o"), (False, "--s")):
        ax.plot(d_ks, mean_entropy[scaled], style, ms=3, color=color(0.2 if scaled else 0.75),
                label="scaled" if scaled else "unscaled")
    ax.axhline(math.log(num_keys), color="0.5", lw=0.8, ls=":")
    ax.set_ylim(0, math.log(num_keys) * 1.08)
    marker, = ax.plot([], [], "o", ms=10, mfc="none", mec="red", mew=2)
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(d_ks), [str(d) for d in d_ks])  # 64, not 2^6 (and no slow mathtext)
    ax.minorticks_off()
    ax.set_xlabel("d_k")
    ax.set_ylabel("mean row entropy (nats)")
    ax.set_title(f"dotted: ln {num_keys} (uniform)")
    ax.legend(loc="lower left")
    return marker


def _head_axes(fig, max_heads: int, narrow: bool):
    """Chapter 4's axes: ``(heads, bars)``, one axes per head, two per row, and the
    entropy bars to the right (wide) or below (narrow)."""
    rows = math.ceil(max_heads / 2)
    if narrow:
        grid = fig.add_gridspec(rows + 1, 2, height_ratios=[1] * rows + [0.8])
        ax_bars = fig.add_subplot(grid[rows, :])
    else:
        grid = fig.add_gridspec(rows, 3, width_ratios=[1, 1, 1.05])
        ax_bars = fig.add_subplot(grid[:, 2])
    return [fig.add_subplot(grid[h // 2, h % 2]) for h in range(max_heads)], ax_bars


def head_grid_panel(fig, max_heads: int, seq_len: int, layout: str = "wide"):
    """Chapter 4: one heatmap per head (up to ``max_heads``, two per row) and each
    head's mean row entropy, to the right (wide) or below (narrow).

    Returns ``update(weights (H, T, T), tokens, head_titles)``.
    """
    _check_sizes(max_heads=max_heads, seq_len=seq_len)
    check_figure("fig", fig)
    axes, ax_bars = _head_axes(fig, max_heads, is_narrow(layout))
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
                image.set_data(to_numpy(weights[h]))
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
    _check_sizes(num_heads=num_heads, contexts=contexts, cache_gib=cache_gib)
    check_figure("fig", fig)
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


def sinusoidal_panel(fig, max_positions: int, max_d_model: int, layout: str = "wide"):
    """Chapter 10: the sinusoidal encoding (positions by dimensions) and the similarity
    of two encodings against their distance, side by side (wide) or stacked (narrow).

    Returns ``update(pe (T, D), similarity (T,), title)``.
    """
    _check_sizes(max_positions=max_positions, max_d_model=max_d_model)
    check_figure("fig", fig)
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
        image.set_data(to_numpy(pe))
        image.set_extent((-0.5, D - 0.5, T - 0.5, -0.5))
        ax_map.set_title(title)
        line.set_data(np.arange(T), to_numpy(similarity))
        ax_sim.set_xlim(0, T - 1)

    return update


TILE_STATES = ((0, "not yet read"), (1, "earlier query blocks"), (2, "tiles done"), (3, "current tile"))
"""The states of a score tile in :func:`tiling_panel`, in the order of their codes."""


def _tile_legend(fig, ax_grid, image, layout: str) -> None:
    """The legend of the tile states, in the colours of ``image``: above the grid in two
    columns (narrow) or to its right (wide)."""
    handles = [Patch(color=image.cmap(image.norm(v)), label=name)
               for v, name in (TILE_STATES[1], TILE_STATES[2], TILE_STATES[3], TILE_STATES[0])]
    if layout == "narrow":
        fig.legend(handles=handles, loc="outside upper center", ncols=2, frameon=False)
    else:
        ax_grid.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)


def _show_tiles(ax_grid, image, state, block: int, title: str) -> None:
    """Chapter 11's grid at ``state (L, L)``, with white lines between ``block`` x ``block`` tiles."""
    L = len(state)
    image.set_data(to_numpy(state))
    image.set_extent((-0.5, L - 0.5, L - 0.5, -0.5))
    ax_grid.set_xticks(np.arange(-0.5, L, block), minor=True)
    ax_grid.set_yticks(np.arange(-0.5, L, block), minor=True)
    ax_grid.grid(which="minor", color="white", lw=0.8)
    ax_grid.tick_params(which="minor", length=0)
    ax_grid.set_title(title)


def tiling_panel(fig, max_len: int, run_limits: tuple[float, float] | None = None, layout: str = "wide"):
    """Chapter 11: the grid of score tiles coloured by state (codes of
    :data:`TILE_STATES`) and the running maximum and sum of one row, block by block;
    side by side (wide) or stacked (narrow). ``run_limits``: the y range of the running
    values, the same in every frame (so frames compare at a glance, and their tick
    labels keep the width the layout was made for); default: each frame's own.

    Returns ``update(state (L, L), block, trace, done, title_grid, title_run)`` where
    ``trace`` lists ``{"m", "l"}`` after each key block and ``done`` blocks are read.
    """
    _check_sizes(max_len=max_len)
    check_figure("fig", fig)
    ax_grid, ax_run = _pair(fig, layout, [1.25, 1])
    image = ax_grid.imshow(np.zeros((max_len, max_len)), cmap=CMAP, vmin=0, vmax=3,
                           interpolation="nearest")
    ax_grid.set_xlabel("key position")
    ax_grid.set_ylabel("query position")
    _tile_legend(fig, ax_grid, image, layout)
    m_line, = ax_run.plot([], [], "o-", color=color(0.2), label="running max m")
    l_line, = ax_run.plot([], [], "s-", color=color(0.7), label="running sum l")
    m_final = ax_run.axhline(0, color=color(0.2), ls=":", lw=1)
    l_final = ax_run.axhline(0, color=color(0.7), ls=":", lw=1)
    ax_run.set_xlabel("key blocks read")
    ax_run.legend(loc="upper left")

    def update(state, block: int, trace, done: int, title_grid: str, title_run: str):
        _show_tiles(ax_grid, image, state, block, title_grid)
        steps = np.arange(1, done + 1)
        m_line.set_data(steps, [t["m"] for t in trace[:done]])
        l_line.set_data(steps, [t["l"] for t in trace[:done]])
        m_final.set_ydata([trace[-1]["m"]] * 2)
        l_final.set_ydata([trace[-1]["l"]] * 2)
        ax_run.set_xlim(0.5, max(len(trace), 2) + 0.5)
        ax_run.xaxis.set_major_locator(MaxNLocator(integer=True))
        if run_limits is None:
            top = max(max(t["m"] for t in trace), max(t["l"] for t in trace))
            ax_run.set_ylim(min(0, min(t["m"] for t in trace)) - 0.5, top * 1.3 + 0.5)
        else:
            ax_run.set_ylim(*run_limits)
        ax_run.set_title(title_run)

    return update


def sparse_reach_panel(fig, max_len: int, layout: str = "wide"):
    """Chapter 8: a sparse mask and, per position, the layers until the last token
    depends on it (negative: never; drawn as a gap); side by side (wide) or stacked
    (narrow).

    Returns ``update(mask (L, L), layers (L,), title_mask, title_reach)``.
    """
    _check_sizes(max_len=max_len)
    check_figure("fig", fig)
    ax_mask, ax_reach = _pair(fig, layout, [1, 1.3] if layout == "wide" else [1.3, 1])
    if fig.get_layout_engine() is not None:  # room above the two-line titles
        fig.get_layout_engine().set(h_pad=0.1)
    image = mask_plot(np.zeros((max_len, max_len)), ax=ax_mask)
    line, = ax_reach.step([], [], where="mid", color=color(0.25))
    ax_reach.set_xlabel("position j")
    ax_reach.set_ylabel("layers until the last token\ndepends on position j")
    ax_reach.set_xlim(-0.5, max_len - 0.5)
    ax_reach.yaxis.set_major_locator(MaxNLocator(integer=True))  # whole layers: never "2.5" (wider)
    note = ax_reach.text(0.98, 0.97, "", transform=ax_reach.transAxes, va="top", ha="right",
                         fontsize="small")

    def update(mask, layers, title_mask: str, title_reach: str):
        L = len(mask)
        layers = to_numpy(layers)
        image.set_data(to_numpy(mask).astype(float))
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
    _check_sizes(max_source=max_source)
    check_figure("fig", fig)
    check_layout(layout)
    ax = fig.subplots()
    image = heatmap(np.zeros((max_source + 1, max_source)), ax=ax, colorbar=True)

    def update(weights, output_words: Sequence[str], source_words: Sequence[str], title: str):
        image.set_data(to_numpy(weights))
        image.set_extent((-0.5, len(source_words) - 0.5, len(output_words) - 0.5, -0.5))
        set_token_ticks(ax, output_words, source_words)
        ax.set_xlabel("source word")
        ax.set_ylabel("output word")
        ax.set_title(title)

    return update


def pretrained_layer_panel(fig, num_heads: int, max_tokens: int, layout: str = "wide"):
    """Chapter 13: every head of one layer at once. Left (wide) or top (narrow): one row
    per head, the mean weight each key receives from the sentence's queries; right or
    bottom: the layer's weights averaged over its heads, queries by keys.

    Returns ``update(received (H, T), weights (T, T), tokens, title)``. Token labels are
    redrawn only when the tokens change (drawing ticks is the slow part of a frame).
    """
    _check_sizes(num_heads=num_heads, max_tokens=max_tokens)
    check_figure("fig", fig)
    narrow = is_narrow(layout)
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
        heads.set_data(to_numpy(received))
        heads.set_extent((-0.5, T - 0.5, num_heads - 0.5, -0.5))
        image.set_data(to_numpy(weights))
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


def _variant_bars(ax, names: Sequence[str], colors):
    """One horizontal bar per variant, first at the top, in the colours of its line (the
    bars are the lines' legend); returns ``(bars, labels)``, a value label per bar."""
    bars = ax.barh(range(len(names)), [0.0] * len(names), color=colors, lw=2.5)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel("KV cache (GiB)")
    return bars, [ax.text(0, i, "", va="center", fontsize="small") for i in range(len(names))]


def kv_memory_panel(fig, contexts: Sequence[int], curves, layout: str = "wide"):
    """Chapter 12: KV cache size against context length, one line per variant
    (``curves``: name -> GiB at each of ``contexts``), beside (wide) or over (narrow)
    bars of every variant at one context, in the lines' colours (the legend). Returns
    ``update(variant, context)``, which picks out one variant and one context."""
    _check_sizes(contexts=contexts, curves=curves)
    check_figure("fig", fig)
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
    bars, labels = _variant_bars(ax_bars, names, [line.get_color() for line in lines.values()])

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
        where = "\n" if is_narrow(layout) else " "  # a phone's panel is too narrow for one line
        ax_lines.set_title(f"{variant}:{where}{curves[variant][at]:.2f} GiB at {context:,} tokens")
        ax_bars.set_title(f"every variant at {context:,} tokens")

    return update


def block_stack_panel(fig, max_depth: int, stream_max: float, grad_max: float, layout: str = "wide"):
    """Chapter 6: the stream's size after each block and each block's gradient norm for
    one stack of blocks; side by side (wide) or stacked (narrow). Axis limits are fixed
    so frames of different depth and norm placement compare at a glance.

    Returns ``update(stream (depth + 1,), grads (depth,), name)``.
    """
    _check_sizes(max_depth=max_depth, stream_max=stream_max, grad_max=grad_max)
    check_figure("fig", fig)
    ax_stream, ax_grad = fig.subplots(2, 1) if is_narrow(layout) else fig.subplots(1, 2)
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


def lens_panel(fig, num_layers: int, max_tokens: int, layout: str = "wide"):
    """Chapter 15: the logit lens over one prompt. Left (wide) or top (narrow): one row per
    position, one column per layer (0 is the embedding), the probability the lens at that
    layer gives the model's own final guess; a box marks the chosen layer. Right or bottom:
    the lens's top guess at the chosen layer for each position (narrow: after its token), in
    black where it is already the final guess and grey where not.

    Returns ``update(p_final (T, num_layers + 1), layer, guesses (T strings: the guess and its
    probability), hits (T bools), tokens (T strings), title)``.
    """
    _check_sizes(num_layers=num_layers, max_tokens=max_tokens)
    check_figure("fig", fig)
    narrow = is_narrow(layout)
    if narrow:
        ax_map, ax_text = fig.subplots(2, 1, height_ratios=[1.2, 1])
    else:
        ax_map, ax_text = fig.subplots(1, 2, width_ratios=[2.2, 1], sharey=True)
    image = ax_map.imshow(np.zeros((max_tokens, num_layers + 1)), cmap=CMAP, vmin=0, vmax=1,
                          aspect="auto")
    fig.colorbar(image, ax=ax_map, fraction=0.06, pad=0.02, label="p(final guess)")
    box = ax_map.add_patch(Rectangle((-0.5, -0.5), 1, max_tokens, fill=False, lw=2, ec="red"))
    ax_map.set_xlabel("layer (0: the embedding)")
    ax_text.axis("off")
    ax_text.set_ylim(max_tokens - 0.5, -0.5)
    texts = [ax_text.text(0.02, t, "", va="center", ha="left") for t in range(max_tokens)]
    shown = {"tokens": None}

    def update(p_final, layer: int, guesses: Sequence[str], hits: Sequence[bool],
               tokens: Sequence[str], title: str):
        T = len(tokens)
        image.set_data(to_numpy(p_final))
        image.set_extent((-0.5, num_layers + 0.5, T - 0.5, -0.5))
        box.set_xy((layer - 0.5, -0.5))
        box.set_height(T)
        if list(tokens) != shown["tokens"]:
            shown["tokens"] = list(tokens)
            ax_map.set_yticks(range(T), tokens)
            ax_map.set_ylim(T - 0.5, -0.5)
        for t, text in enumerate(texts):
            if t >= T:
                text.set_text("")
                continue
            text.set_text(f"{tokens[t].strip()} → {guesses[t]}" if narrow else guesses[t])
            text.set_color("black" if hits[t] else "0.55")
        ax_map.set_title(title)
        ax_text.set_title(f"top guess at layer {layer}")

    return update
