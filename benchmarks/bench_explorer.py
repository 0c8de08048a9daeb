"""Explorers in a live kernel: the first display of every chapter's explorer (build the
figure, draw the first frame, make the widget) and one update of chapter 1's (compute,
update the artists, draw the canvas, encode PNG). Website frames are not rendered in a
kernel; their size is measured with the static view asked for explicitly (both
layouts: wide for a desktop, narrow for a phone)."""

from __future__ import annotations

import base64
import functools
import re
import time

from _timing import machine, median_seconds
from attention_core.book import explorers
from attention_core.models.seq2seq import Seq2Seq
from attention_core.models.tiny_transformer import TinyTransformer
from attention_core.models.toy_tasks import tokenize

SENTENCE = tokenize("the cat sat on the mat because it was tired")


def _untrained_heads():
    # display time does not depend on the weights: untrained models of chapter 4's shape
    return {h: TinyTransformer(vocab_size=12, max_len=8, num_heads=h).eval() for h in (1, 2, 4)}


EXPLORERS = {
    "basics": lambda: explorers.basics_explorer(SENTENCE),
    "scaling": explorers.scaling_explorer,
    "self_attention": lambda: explorers.self_attention_explorer(SENTENCE),
    "heads": lambda: explorers.heads_explorer(_untrained_heads(), seq_len=8, vocab_size=12),
    "masking": lambda: explorers.masking_explorer(SENTENCE),
    "alignment": lambda: explorers.alignment_explorer(
        {"Bahdanau": Seq2Seq("bahdanau").eval(), "Luong": Seq2Seq("luong", "dot").eval()},
        ["a b c", "d e f g h i"]),
    "sparse": explorers.sparse_mask_explorer,
    "kv_sharing": explorers.kv_sharing_explorer,
    "block": explorers.block_explorer,
    "positional": explorers.positional_explorer,
    "tiling": explorers.tiling_explorer,
    "kv_memory": explorers.kv_memory_explorer,
    "pretrained": lambda: explorers.pretrained_explorer(
        *_minilm(), ["the cat sat on the mat", "the dog that chased the cat barked"]),
}


@functools.cache
def _minilm():
    # loading the weights is chapter 13's own cell, not the explorer's first display
    from attention_core.models.pretrained import load_minilm

    return load_minilm()


def first_display_seconds(make) -> float:
    """Seconds from the call to the widget output a live front end receives."""
    start = time.perf_counter()
    make()._repr_mimebundle_()
    return time.perf_counter() - start


def run() -> dict:
    import ipywidgets  # noqa: F401  loaded once by any notebook that shows widgets

    first_display_seconds(EXPLORERS["basics"])  # warm matplotlib's font cache
    _minilm()
    display = {name: first_display_seconds(make) for name, make in EXPLORERS.items()}
    explorer = EXPLORERS["basics"]()
    temperatures = iter([0.5, 2.0] * 100)
    seconds = median_seconds(lambda: explorer.set(temperature=next(temperatures)), repeats=21)
    page = explorer.to_html()  # both layouts, frames as data URIs (a notebook's output)
    html_bytes = len(page.encode())
    frames = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    frame_bytes = sum(len(base64.b64decode(f)) for f in set(frames))  # the site's frame files
    return {"update_s": seconds, "target_s": 0.1, "first_display_s": display,
            "first_display_target_s": 1.0, "static_html_bytes": html_bytes,
            "frame_file_bytes": frame_bytes, "machine": machine()}


if __name__ == "__main__":
    r = run()
    print(f"explorer update (chapter 1, default sizes): {r['update_s'] * 1e3:.1f} ms median "
          f"(target < {r['target_s'] * 1e3:.0f} ms); static view {r['static_html_bytes'] / 1e6:.2f} MB "
          f"in a notebook, {r['frame_file_bytes'] / 1e6:.2f} MB of frame files on the site")
    for name, s in r["first_display_s"].items():
        print(f"first display, {name}: {s:.2f} s (target < {r['first_display_target_s']:.0f} s)")
