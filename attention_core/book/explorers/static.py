"""Every chapter: the static view of an explorer, for the website. Every combination of
control values rendered once at build time in two layouts (``wide`` for a desktop,
``narrow`` for a phone), range inputs, and a small player script (``player.js``, shipped
with the package) that picks the layout by the explorer's width and swaps the frames. No
kernel, no network.

The frames are data URIs, so a notebook's output stands alone (Jupyter, Colab,
nbviewer). The website's build (``_ext/explorer_frames.py``) writes each distinct
frame to a file once and puts its URL in place of the data URI; the player takes
either.
"""

from __future__ import annotations

import hashlib
import html
import json
import uuid
from importlib.resources import files

from ..render import LAYOUTS, data_uri, png_bytes

BREAKPOINT_PX = 560
"""An explorer shown narrower than this (CSS px) uses the narrow layout."""

STYLE = """<style>
.ac-explorer .ac-controls{display:flex;flex-wrap:wrap;align-items:center;gap:0 1.5em}
.ac-explorer .ac-control{display:inline-flex;align-items:center;gap:.4em;white-space:nowrap}
.ac-explorer .ac-control output{display:inline-block;min-width:3em}
.ac-explorer img.ac-frame{display:block;max-width:100%;height:auto}
@media (max-width:600px){
.ac-explorer .ac-control{flex:1 1 100%;white-space:normal}
.ac-explorer .ac-control input[type=range]{flex:1 1 auto;min-width:0;height:44px;margin:0}
}
</style>"""
"""The explorer's own styles, scoped by its class. Controls wrap; on a phone each
control takes a line and its slider a 44 px tall touch target.

:meta hide-value:
"""


def player_js() -> str:
    """The player: a JavaScript function expression taking the explorer's root element."""
    return files(__package__).joinpath("player.js").read_text(encoding="utf-8")


def render_frames(explorer, layouts=LAYOUTS, encode: bool = True) -> dict[str, dict]:
    """Every setting of the controls in every layout, computed once per setting.

    Returns layout -> ``{"index": {"i,j,..": frame}, "images": [data URI],
    "width", "height", "min_text_px"}`` where ``images`` holds the distinct frames
    and ``min_text_px`` is the smallest text drawn on any of them (px at the image's
    natural size). ``encode=False`` skips the PNGs: ``images`` then holds a hash of
    each distinct frame's pixels (quicker, for checks). The explorer is left where it was.
    """
    figures = {name: explorer.layout(name) for name in layouts}
    out = {name: {"index": {}, "images": [], "_seen": {}} for name in layouts}
    for layout in figures.values():
        layout.reset_text_px()
    for indices, values in explorer.combinations():
        data = explorer.compute(**values)
        key = ",".join(map(str, indices))
        for name, layout in figures.items():
            layout.show(data)
            if encode:
                frame = png_bytes(layout.figure, small=True, draw=False)
            else:
                frame = hashlib.sha256(bytes(layout.figure.canvas.buffer_rgba())).hexdigest()
            seen = out[name]["_seen"]
            if frame not in seen:
                seen[frame] = len(seen)
                out[name]["images"].append(data_uri(frame) if encode else frame)
            out[name]["index"][key] = seen[frame]
    start = explorer.compute(**explorer.values)
    for name, layout in figures.items():
        del out[name]["_seen"]
        width, height = layout.size
        out[name].update(width=width, height=height, min_text_px=round(layout.min_text_px, 2))
        layout.show(start)  # back to where it was (the live view's figure is one of them)
    return out


def frames(explorer, layout: str = "wide") -> tuple[dict[str, int], list[str]]:
    """Every combination of control indices (``"i,j,.."``) -> index of its frame in
    the list of distinct frames (data URIs) of one layout."""
    rendered = render_frames(explorer, (layout,))[layout]
    return rendered["index"], rendered["images"]


def _labels(explorer, name: str):
    """The values shown for control ``name``: a list, or for a dependent control a
    dict from the indices of the controls before it (``"i,j"``) to a list."""
    if not explorer.dependent(name):
        return [str(v) for v in explorer.options(name)]
    names = list(explorer.controls)
    k = names.index(name)
    table = {}
    for indices, values in explorer.combinations():
        table.setdefault(",".join(map(str, indices[:k])), [str(v) for v in explorer.options(name, values)])
    return table


def _control(label: str, values, current) -> str:
    i, shown = values.index(current), html.escape(str(current))
    return (f'<label class="ac-control">'
            f'<span>{html.escape(label)}</span> '
            f'<input type="range" min="0" max="{len(values) - 1}" step="1" value="{i}" '
            f'aria-label="{html.escape(label)}" aria-valuetext="{shown}"> '
            f'<output>{shown}</output></label>')


def static_html(explorer) -> str:
    """The website's view: controls, the image (the wide first frame), every frame of
    both layouts, and the player."""
    layouts = render_frames(explorer)
    dom_id = f"ac-explorer-{uuid.uuid4().hex[:8]}"
    data = {"layouts": layouts, "breakpoint": BREAKPOINT_PX, "alt": explorer.alt,
            "names": list(explorer.labels.values()),
            "labels": [_labels(explorer, n) for n in explorer.controls]}
    controls = "".join(_control(explorer.labels[n], explorer.controls[n], explorer.values[n])
                       for n in explorer.controls)
    wide = layouts["wide"]
    key = ",".join(str(explorer.controls[n].index(v)) for n, v in explorer.values.items())
    first = wide["images"][wide["index"][key]]
    payload = json.dumps(data).replace("</", "<\\/")
    return (f'<div class="ac-explorer" id="{dom_id}">{STYLE}'
            f'<div class="ac-controls">{controls}</div>'
            f'<img class="ac-frame" src="{first}" width="{wide["width"]}" height="{wide["height"]}" '
            f'data-layout="wide" data-min-text-px="{wide["min_text_px"]}" loading="lazy" '
            f'alt="{html.escape(explorer.describe())}">'
            f'<script type="application/json" class="ac-frames">{payload}</script>'
            f'<script>{player_js()}(document.getElementById({json.dumps(dom_id)}));</script>'
            f'</div>')

