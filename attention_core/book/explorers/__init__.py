"""Every chapter: explorers, a figure driven by controls, live in a kernel and alive
on the website.

* :mod:`~attention_core.book.explorers.engine`:
  :class:`~attention_core.book.explorers.engine.Explorer` (state, figure, the choice of view);
* :mod:`~attention_core.book.explorers.live`: the ipywidgets view (ipywidgets 7.7+ and 8);
* :mod:`~attention_core.book.explorers.static`: the website's view, frames rendered at
  build time and swapped by ``player.js``;
* :mod:`~attention_core.book.explorers.chapters`: the book's explorers, one per chapter,
  each a ``compute`` over a panel of :mod:`attention_core.book.viz.panels`.
"""

from .chapters import (
    SPARSE_PATTERNS,
    AlignmentExplorer,
    alignment_explorer,
    basics_explorer,
    block_explorer,
    heads_explorer,
    kv_memory_explorer,
    kv_sharing_explorer,
    masking_explorer,
    positional_explorer,
    pretrained_explorer,
    scaling_explorer,
    self_attention_explorer,
    sparse_mask_explorer,
    tiling_explorer,
)
from .engine import Explorer

__all__ = [
    "SPARSE_PATTERNS",
    "AlignmentExplorer",
    "Explorer",
    "alignment_explorer",
    "basics_explorer",
    "block_explorer",
    "heads_explorer",
    "kv_memory_explorer",
    "kv_sharing_explorer",
    "masking_explorer",
    "positional_explorer",
    "pretrained_explorer",
    "scaling_explorer",
    "self_attention_explorer",
    "sparse_mask_explorer",
    "tiling_explorer",
]
