"""The static view of an explorer, for the website: every combination of control
values rendered once at build time, range inputs, and a small player script
(``player.js``, shipped with the package) that swaps the frames. No kernel, no network.
"""

from __future__ import annotations

import base64
import html
import itertools
import json
import uuid
from importlib.resources import files


def player_js() -> str:
    """The player: a JavaScript function expression taking the explorer's root element."""
    return files(__package__).joinpath("player.js").read_text(encoding="utf-8")


def frames(explorer) -> tuple[dict[str, int], list[str]]:
    """Every combination of control indices (``"i,j,.."``) -> index of its PNG in the
    list of distinct frames (base64); the explorer is left where it was."""
    start = dict(explorer.values)
    index, images, seen = {}, [], {}
    names = list(explorer.controls)
    for combo in itertools.product(*(range(len(v)) for v in explorer.controls.values())):
        png = explorer.set(small=True, **{n: explorer.controls[n][i] for n, i in zip(names, combo)})
        index[",".join(map(str, combo))] = seen.setdefault(png, len(seen))
        if len(seen) > len(images):
            images.append(base64.b64encode(png).decode())
    explorer.set(**start)
    return index, images


def _control(label: str, values, current) -> str:
    i, shown = values.index(current), html.escape(str(current))
    return (f'<label class="ac-control" style="margin-right:1.5em;white-space:nowrap">'
            f'<span>{html.escape(label)}</span> '
            f'<input type="range" min="0" max="{len(values) - 1}" step="1" value="{i}" '
            f'aria-label="{html.escape(label)}" aria-valuetext="{shown}" '
            f'style="vertical-align:middle"> '
            f'<output style="display:inline-block;min-width:3em">{shown}</output></label>')


def static_html(explorer) -> str:
    """The website's view: controls, the image, every frame, and the player."""
    index, images = frames(explorer)
    dom_id = f"ac-explorer-{uuid.uuid4().hex[:8]}"
    data = {"index": index, "images": images, "alt": explorer.alt,
            "names": list(explorer.labels.values()),
            "labels": [[str(v) for v in values] for values in explorer.controls.values()]}
    controls = "".join(_control(explorer.labels[n], explorer.controls[n], explorer.values[n])
                       for n in explorer.controls)
    payload = json.dumps(data).replace("</", "<\\/")
    return (f'<div class="ac-explorer" id="{dom_id}">'
            f'<div class="ac-controls">{controls}</div>'
            f'<img alt="{html.escape(explorer.describe())}" style="max-width:100%">'
            f'<script type="application/json" class="ac-frames">{payload}</script>'
            f'<script>{player_js()}(document.getElementById({json.dumps(dom_id)}));</script>'
            f'</div>')


def snapshot_html(explorer) -> str:
    """One frame, as it is now: what a notebook viewer without widgets shows."""
    png = base64.b64encode(explorer.current_png()).decode()
    return (f'<img class="ac-snapshot" alt="{html.escape(explorer.describe())}" '
            f'style="max-width:100%" src="data:image/png;base64,{png}">')
