"""Every chapter: the static view of an explorer, for the website. Every combination of
control values rendered once at build time in two layouts (``wide`` for a desktop,
``narrow`` for a phone), the controls (a range input for numbers, a checkbox for on/off,
a drop-down for named choices: :func:`control_kind`), and a small player script (``player.js``, shipped
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
import numbers
import uuid
from importlib.resources import files

from ..render import (
    LAYOUTS,
    PRINT_SCALE,
    FigureTextError,
    check_shown_size,
    data_uri,
    png_bytes,
    print_png,
)
from .strips import strip_frames, strip_keys

__all__ = ["BREAKPOINT_PX", "check_explorer", "control_kind", "player_js", "render_frames", "frames",
           "strip_of", "static_html"]

BREAKPOINT_PX = 560
"""An explorer shown narrower than this (CSS px) uses the narrow layout."""


def check_explorer(explorer) -> None:
    """Raise unless ``explorer`` is an explorer (:class:`~attention_core.book.explorers.engine.Explorer`:
    its ``controls``, ``values`` and ``describe``), the argument of the functions that show one."""
    if not all(hasattr(explorer, name) for name in ("controls", "values", "describe")):
        raise TypeError(f"explorer must be an Explorer (an explorer function's result), "
                        f"got {type(explorer).__name__}")


STYLE = """<style>
.ac-explorer .ac-controls{display:flex;flex-wrap:wrap;align-items:center;gap:0 1.5em}
.ac-explorer .ac-control{display:inline-flex;align-items:center;gap:.4em;white-space:nowrap;min-height:2.2em}
.ac-explorer .ac-control output{display:inline-block;flex:none;text-align:left}
.ac-explorer .ac-control select{max-width:100%;min-width:0;font:inherit}
.ac-explorer .ac-toggle input{width:1.1em;height:1.1em;margin:0}
.ac-explorer img.ac-frame{display:block;max-width:100%;height:auto}
@media (max-width:600px){
.ac-explorer .ac-controls{gap:0 1em}
.ac-explorer .ac-slider,.ac-explorer .ac-choice{flex:1 1 100%;white-space:normal;min-width:0}
.ac-explorer .ac-toggle{flex:0 1 auto;min-height:44px}
.ac-explorer .ac-slider input[type=range]{flex:1 1 auto;min-width:0;height:44px;margin:0}
.ac-explorer .ac-choice select{flex:1 1 auto;min-height:36px;margin:4px 0}
}
</style>"""
"""The explorer's own styles, scoped by its class. Controls wrap; on a phone each
slider and drop-down takes a line and its input a 44 px tall touch target (a slider's
readout has a fixed width, so its track keeps its length as the value changes), and
toggles share a line.

:meta hide-value:
"""

TOGGLE_VALUES = ("off", "on")
"""The values of an on/off control, shown as a toggle (a checkbox)."""


def control_kind(values) -> str:
    """How a control with ``values`` is shown, live and on the website: ``"toggle"`` (a
    checkbox) for exactly ``"off"`` and ``"on"``, ``"slider"`` for numbers, ``"choice"``
    (a drop-down) for other names."""
    values = list(values)
    if len(values) == 2 and set(values) == set(TOGGLE_VALUES):
        return "toggle"
    if all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in values):
        return "slider"
    return "choice"


def player_js() -> str:
    """The player: a JavaScript function expression taking the explorer's root element."""
    return files(__package__).joinpath("player.js").read_text(encoding="utf-8")


LAYOUT_COLUMN = {"wide": "desktop", "narrow": "phone"}
"""Where each layout of an explorer is shown (a key of :data:`~attention_core.book.render.COLUMN_CSS_PX`)."""


def render_frames(explorer, layouts=LAYOUTS, encode: bool = True, check: bool = True) -> dict[str, dict]:
    """Every setting of the controls in every layout, computed once per setting.

    Returns layout -> ``{"index": {"i,j,..": frame}, "images": [data URI],
    "width", "height", "min_text_px"}`` where ``images`` holds the distinct frames
    and ``min_text_px`` is the smallest text drawn on any of them (px at the image's
    natural size). The wide layout also has ``"print_images"``, the print copies
    (:data:`~attention_core.book.render.PRINT_SCALE` times the pixels each way, for the PDF
    edition; the player never loads them) of the frames the explorer's chapter prints
    (:mod:`~attention_core.book.explorers.strips`, 3 to 6 of them; a
    :class:`~attention_core.book.explorers.strips.StripError` names the chapter whose strip no
    longer matches the explorer): distinct frame (as a string) -> data URI, and
    ``"print_scale"``. ``encode=False`` skips the PNGs: ``images`` then holds a hash of
    each distinct frame's pixels (quicker, for checks), and there are no print copies.
    The explorer is left where it was.

    ``check`` (the website's build): every frame's text is checked
    (:func:`~attention_core.book.render.text_problems`: nothing cut at the image's edge,
    nothing over another panel) and its smallest text as shown (at least
    :data:`~attention_core.book.render.TEXT_FLOOR_CSS_PX` where the layout is shown);
    a :class:`~attention_core.book.render.FigureTextError` names the explorer, the
    layout and the control values of each frame at fault.
    """
    check_explorer(explorer)
    problems = []
    printing = encode and "wide" in layouts
    strip = strip_of(explorer) if printing else None
    wanted = {key for key, _ in strip_keys(explorer.chapter, *strip)} if printing else set()
    figures = {name: explorer.layout(name) for name in layouts}
    out = {name: {"index": {}, "images": [], "_seen": {}} for name in layouts}
    for layout in figures.values():
        layout.reset_text_px()
    for indices, values in explorer.combinations():
        data = explorer.compute(**values)
        key = ",".join(map(str, indices))
        for name, layout in figures.items():
            layout.show(data)
            if check:
                state = ", ".join(f"{explorer.labels[n]} {v}" for n, v in values.items())
                problems += [f"{name} layout, {state}: {p}" for p in layout.text_problems()]
            if encode:
                frame = png_bytes(layout.figure, small=True, draw=False)
            else:
                frame = hashlib.sha256(bytes(layout.figure.canvas.buffer_rgba())).hexdigest()
            seen = out[name]["_seen"]
            if frame not in seen:
                seen[frame] = len(seen)
                out[name]["images"].append(data_uri(frame) if encode else frame)
            out[name]["index"][key] = seen[frame]
            printed = out[name].setdefault("print_images", {}) if printing and name == "wide" else None
            if printed is not None and key in wanted and str(seen[frame]) not in printed:
                printed[str(seen[frame])] = data_uri(print_png(layout.figure))  # as drawn now
    if printing:
        strip_frames(explorer.chapter, *strip, out["wide"]["index"])  # a frame printed twice
    start = explorer.compute(**explorer.values)
    for name, layout in figures.items():
        del out[name]["_seen"]
        width, height = layout.size
        out[name].update(width=width, height=height, min_text_px=round(layout.min_text_px, 2))
        if "print_images" in out[name]:
            out[name]["print_scale"] = PRINT_SCALE
        layout.show(start)  # back to where it was (the live view's figure is one of them)
        if check:
            try:
                check_shown_size(layout.min_text_px, width, f"{name} layout", (LAYOUT_COLUMN[name],))
            except FigureTextError as error:
                problems.append(str(error))
    if problems:
        raise FigureTextError(f"explorer {explorer!r} ({explorer.alt}): {len(problems)} problem(s): "
                              + "; ".join(problems[:12]) + ("; ..." if len(problems) > 12 else ""))
    return out


def frames(explorer, layout: str = "wide") -> tuple[dict[str, int], list[str]]:
    """Every combination of control indices (``"i,j,.."``) -> index of its frame in
    the list of distinct frames (data URIs) of one layout."""
    check_explorer(explorer)
    rendered = render_frames(explorer, (layout,))[layout]
    return rendered["index"], rendered["images"]


def strip_of(explorer) -> tuple[list[str], list, list[int]]:
    """What :mod:`~attention_core.book.explorers.strips` reads of an explorer: its controls'
    names, each control's shown values (``_labels``) and the indices it starts at."""
    check_explorer(explorer)
    return (list(explorer.controls), [_labels(explorer, n) for n in explorer.controls],
            [explorer.controls[n].index(v) for n, v in explorer.values.items()])


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


def _widest(labels) -> int:
    """The most characters of any value a control shows (over every range of a
    dependent control): the width of its readout."""
    lists = labels.values() if isinstance(labels, dict) else [labels]
    return max(len(label) for values in lists for label in values)


def _control(label: str, values, current, labels) -> str:
    """One control's HTML: a slider with a fixed-width readout, a checkbox (on/off) or a
    drop-down (named choices); see :func:`control_kind`."""
    i, shown, name = values.index(current), html.escape(str(current)), html.escape(label)
    kind = control_kind(values)
    if kind == "toggle":
        on, off = values.index("on"), values.index("off")
        checked = " checked" if current == "on" else ""
        return (f'<label class="ac-control ac-toggle">'
                f'<input type="checkbox" data-on="{on}" data-off="{off}"{checked}> '
                f'<span>{name}</span></label>')
    if kind == "choice":
        options = "".join(f'<option value="{k}"{" selected" if k == i else ""}>{html.escape(str(v))}</option>'
                          for k, v in enumerate(values))
        return (f'<label class="ac-control ac-choice"><span>{name}</span> '
                f'<select>{options}</select></label>')
    return (f'<label class="ac-control ac-slider">'
            f'<span>{name}</span> '
            f'<input type="range" min="0" max="{len(values) - 1}" step="1" value="{i}" '
            f'aria-label="{name}" aria-valuetext="{shown}"> '
            f'<output style="width:{_widest(labels) + 0.5:g}ch">{shown}</output></label>')


def static_html(explorer) -> str:
    """The website's view: controls, the image (the wide first frame), every frame of
    both layouts, and the player."""
    check_explorer(explorer)
    layouts = render_frames(explorer)
    dom_id = f"ac-explorer-{uuid.uuid4().hex[:8]}"
    names, labels, start = strip_of(explorer)
    data = {"layouts": layouts, "breakpoint": BREAKPOINT_PX, "alt": explorer.alt, "controls": names,
            "names": [explorer.labels[n] for n in names], "labels": labels, "start": start,
            "chapter": explorer.chapter}  # names: the labels the player shows
    controls = "".join(_control(explorer.labels[n], explorer.controls[n], explorer.values[n], labels)
                       for n, labels in zip(explorer.controls, data["labels"]))
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

