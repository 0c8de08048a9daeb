"""Every chapter: figures of attention, what a chapter calls as ``viz.X`` after
``from attention_core.book import viz``.

* :mod:`~attention_core.book.viz.plots`: heatmaps, per-head grids, entropy bars, masks,
  position encodings, a model's layers and heads; the book's colours;
* :mod:`~attention_core.book.viz.diagrams`: a Transformer block, a decoder step, heads
  sharing keys and values, as boxes and arrows;
* :mod:`~attention_core.book.viz.figures`: :func:`~attention_core.book.viz.figures.figure`,
  a static figure drawn for a desktop and for a phone;
* :mod:`~attention_core.book.viz.panels`: the explorers' figures (not re-exported: the
  explorers import them).

Importing it gives, on the website, every matplotlib figure a measured ``text/html`` view
(:func:`~attention_core.book.viz.figures.install_website_figures`).
"""

from .diagrams import BLOCK_KINDS, block_diagram, decoder_flow, head_sharing_diagram
from .figures import figure, install_website_figures
from .plots import (
    all_heads_grid,
    color,
    encoding_heatmap,
    entropy_bars,
    head_grid,
    heatmap,
    layer_head_map,
    mask_plot,
    set_token_ticks,
)

install_website_figures()  # on the website, every figure's text and panels are measured

__all__ = [
    "BLOCK_KINDS",
    "all_heads_grid",
    "block_diagram",
    "color",
    "decoder_flow",
    "encoding_heatmap",
    "entropy_bars",
    "figure",
    "head_grid",
    "head_sharing_diagram",
    "heatmap",
    "layer_head_map",
    "mask_plot",
    "set_token_ticks",
]
