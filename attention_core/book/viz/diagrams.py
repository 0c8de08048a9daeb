"""Chapters 6, 7 and 9: diagrams of boxes and arrows: a Transformer block and its
residual stream (chapter 6), a decoder step of Bahdanau and Luong attention (chapter 7),
and which query heads share each key/value head (chapter 9).

Each draws onto an ``Axes`` (made if not given) and returns it.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from ..render import is_narrow
from .plots import color

__all__ = ["head_sharing_diagram", "decoder_flow", "BLOCK_KINDS", "block_diagram"]


def head_sharing_diagram(num_heads: int, num_kv_heads: int, ax=None, title: str | None = None):
    """Query heads (top row) joined to the key/value head each one reads (bottom row):
    query head ``h`` uses kv head ``h // (num_heads // num_kv_heads)``."""
    for name, value in (("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}")
    ax = ax or plt.subplots(figsize=(5, 2))[1]
    group = num_heads // num_kv_heads
    size = min(1.0, 16 / num_heads)  # smaller markers when there are many heads
    kv_x = [(g * group + (group - 1) / 2) for g in range(num_kv_heads)]  # centred under its group
    for h in range(num_heads):
        g = h // group
        shade = color(g / max(num_kv_heads - 1, 1) * 0.85)
        ax.plot([h, kv_x[g]], [1, 0], color=shade, lw=1.5 * size)
        ax.scatter([h], [1], s=160 * size, marker="s", color=shade, zorder=3)
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


def _transposed(nodes):
    """The nodes of a decoder step for the narrow layout: time runs top to bottom (a
    step's inputs on top), the encoder states to the left, long labels on two lines."""
    return {name: (1.5 * y, -x, label.replace("encoder states\n", "encoder\nstates\n")
                   .replace(" = \\tanh", " =$\n$\\tanh"))
            for name, (x, y, label) in nodes.items()}


def _flow_boxes(ax, nodes, fontsize) -> dict:
    """A box per node, shaded by its part (attention, recurrent cell); name -> its ``Text``."""
    boxes = {}
    for name, (x, y, label) in nodes.items():
        shade = 0.75 if name in ("attn", "c") else 0.45 if name in ("rnn", "tilde") else None
        boxes[name] = ax.text(x, y, label, ha="center", va="center", fontsize=fontsize,
                              bbox={"boxstyle": "round,pad=0.4", "lw": 1, "ec": "0.3",
                                    "fc": (*color(shade)[:3], 0.35) if shade else "white"})
    return boxes


def decoder_flow(kind: str, ax=None, title: str | None = None, layout: str = "wide"):
    """Draw one decoder step of Bahdanau (``kind="bahdanau"``) or Luong
    (``"luong"``) attention as boxes and arrows: where the context comes from and
    where it goes. Time runs left to right (``layout="wide"``) or top to bottom
    (``"narrow"``, for a phone). Returns the ``Axes``."""
    if kind not in _FLOWS:
        raise ValueError(f"kind must be one of {sorted(_FLOWS)}, got {kind!r}")
    narrow = is_narrow(layout)
    nodes, edges = _FLOWS[kind]
    nodes = _transposed(nodes) if narrow else nodes
    ax = ax or plt.subplots(figsize=(7, 3))[1]
    boxes = _flow_boxes(ax, nodes, None if narrow else 9)
    for a, b in edges:  # arrows from box edge to box edge
        ax.annotate("", xy=nodes[b][:2], xytext=nodes[a][:2],
                    arrowprops={"arrowstyle": "-|>", "color": "0.25", "lw": 1.1, "shrinkA": 1, "shrinkB": 1,
                                "patchA": boxes[a].get_bbox_patch(), "patchB": boxes[b].get_bbox_patch()})
    xs = [x for x, _, _ in nodes.values()]
    ys = [y for _, y, _ in nodes.values()]
    if narrow:
        ax.set_xlim(min(xs) - 0.9, max(xs) + 0.9)
        ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    else:
        ax.set_xlim(min(xs) - 0.6, max(xs) + 0.9)
        ax.set_ylim(-1.2, 2.5)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=None if narrow else 10)
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
    n, arrow = len(sublayers), {"arrowstyle": "-|>", "color": "0.25", "lw": 1.1, "shrinkA": 2, "shrinkB": 2}
    ax.annotate("", xy=(0, n + 0.2), xytext=(0, -0.25),
                arrowprops={"arrowstyle": "-|>", "color": "0.25", "lw": 2.2})  # the stream
    ax.text(0, -0.3, "stream in", ha="center", va="top")
    ax.text(0, n + 0.25, "stream out", ha="center", va="bottom")
    for i, label in enumerate(sublayers):
        shade = 0.75 if "attention" in label else 0.45
        box = ax.text(1.1, i + 0.35, label, ha="center", va="center",
                      bbox={"boxstyle": "round,pad=0.35", "lw": 1, "ec": "0.3",
                            "fc": (*color(shade)[:3], 0.35)})
        plus = ax.text(0, i + 0.75, "+", ha="center", va="center", fontweight="bold",
                       bbox={"boxstyle": "circle,pad=0.15", "lw": 1, "ec": "0.3", "fc": "white"})
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
