"""Explorers: a figure driven by controls, live in a kernel and alive on the website.

One call gives an object whose notebook output carries two views:

* ``application/vnd.jupyter.widget-view+json``: ipywidgets sliders that update the
  figure's artists in place and re-render it (live kernel: Jupyter, Colab, Binder);
* ``text/html``: the same sliders in plain HTML over frames rendered once, at build
  time, for every combination of control values, with a few lines of inline
  JavaScript that swap frames. No kernel, no network.

The book sets myst-nb's ``nb_mime_priority_overrides`` so the website shows the HTML.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import json
import uuid
from typing import Any, Callable, Mapping, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

Setup = Callable[..., Callable[..., None]]
"""``setup(fig, **values)`` draws the first frame and returns ``update(**values)``,
which changes the artists in place (``set_data``, ``set_height``, titles)."""

_SCRIPT = """<script>(function () {
  var root = document.getElementById(%(id)s);
  if (!root || root.dataset.ready) return;
  root.dataset.ready = "1";
  var data = JSON.parse(root.querySelector("script.ac-frames").textContent);
  var img = root.querySelector("img"), inputs = root.querySelectorAll("input");
  function show() {
    var key = [];
    inputs.forEach(function (input, n) {
      key.push(input.value);
      root.querySelectorAll("output")[n].textContent = data.labels[n][input.value];
    });
    img.src = "data:image/png;base64," + data.images[data.index[key.join(",")]];
    root.dataset.frame = key.join(",");
  }
  inputs.forEach(function (input) { input.addEventListener("input", show); });
  show();
})();</script>"""


def _png(fig: Figure, small: bool = False) -> bytes:
    """Draw ``fig`` once on its Agg canvas and encode it as PNG. ``small`` quantises to
    a 256-colour palette (about 3x smaller, for frames stored in the page); the live
    view skips that and compresses lightly, to stay fast."""
    from PIL import Image

    fig.canvas.draw()
    image = Image.frombuffer("RGBA", fig.canvas.get_width_height(), fig.canvas.buffer_rgba())
    out = io.BytesIO()
    if small:
        image.convert("RGB").quantize(256).save(out, format="PNG", optimize=True)
    else:
        image.convert("RGB").save(out, format="PNG", compress_level=1)
    return out.getvalue()


class Explorer:
    """A figure with one slider per control.

    Args:
        setup: ``setup(fig, **values) -> update``; see :data:`Setup`.
        controls: control label -> the values it steps through (the same list
            drives the live slider and the static frames).
        initial: starting value per control (default: the first of each list).
        figsize, dpi: size of the rendered figure.
        alt: alt text of the figure image on the website.
    """

    def __init__(self, setup: Setup, controls: Mapping[str, Sequence[Any]],
                 initial: Mapping[str, Any] | None = None, figsize=(8, 3.4), dpi: int = 80,
                 alt: str = "interactive figure"):
        if not controls:
            raise ValueError("controls must name at least one control, got none")
        for name, values in controls.items():
            if len(values) == 0:
                raise ValueError(f"control {name!r} has no values")
        self.controls = {name: list(values) for name, values in controls.items()}
        self.values = {name: values[0] for name, values in self.controls.items()}
        for name, value in (initial or {}).items():
            if name not in self.controls or value not in self.controls[name]:
                raise ValueError(f"initial value {name}={value!r} is not one of "
                                 f"{self.controls.get(name)}")
            self.values[name] = value
        self.dpi, self.alt = dpi, alt
        self.figure = Figure(figsize=figsize, dpi=dpi, layout="constrained")
        FigureCanvasAgg(self.figure)
        self._update = setup(self.figure, **self.values)
        self.figure.canvas.draw()  # lay out once, at the first frame, then keep it:
        self.figure.set_layout_engine("none")  # every later frame is one plain draw
        self._widget = None

    # --- both views -------------------------------------------------------
    def set(self, small: bool = False, **values) -> bytes:
        """Move controls to ``values``, update the figure in place, return its PNG."""
        self.values.update(values)
        self._update(**self.values)
        return _png(self.figure, small)

    # --- live kernel ------------------------------------------------------
    def widget(self):
        """The ipywidgets view: sliders over the image of the figure."""
        if self._widget is None:
            import ipywidgets as w

            image = w.Image(value=_png(self.figure), format="png")
            sliders = []
            for name, values in self.controls.items():
                slider = w.SelectionSlider(options=values, value=self.values[name],
                                           description=name, continuous_update=False)
                # continuous_update=False debounces: one redraw when the slider settles.
                slider.observe(lambda change, name=name: setattr(
                    image, "value", self.set(**{name: change["new"]})), names="value")
                sliders.append(slider)
            self._widget = w.VBox([w.HBox(sliders), image])
            self._widget.sliders, self._widget.image = sliders, image
        return self._widget

    # --- static website ---------------------------------------------------
    def frames(self) -> tuple[dict[str, int], list[str]]:
        """Every combination of control indices -> index of its (deduplicated) PNG."""
        start = dict(self.values)
        index, images, seen = {}, [], {}
        ranges = [range(len(v)) for v in self.controls.values()]
        for combo in itertools.product(*ranges):
            png = self.set(small=True, **{n: self.controls[n][i] for n, i in zip(self.controls, combo)})
            index[",".join(map(str, combo))] = seen.setdefault(png, len(seen))
            if len(seen) > len(images):
                images.append(base64.b64encode(png).decode())
        self.set(**start)
        return index, images

    def to_html(self) -> str:
        index, images = self.frames()
        dom_id = f"ac-explorer-{uuid.uuid4().hex[:8]}"
        data = {"index": index, "images": images,
                "labels": [[str(v) for v in values] for values in self.controls.values()]}
        rows = []
        for name, values in self.controls.items():
            i = values.index(self.values[name])
            rows.append(
                f'<label class="ac-control" style="margin-right:1.5em;white-space:nowrap">'
                f'<span>{html.escape(name)}</span> '
                f'<input type="range" min="0" max="{len(values) - 1}" step="1" value="{i}" '
                f'aria-label="{html.escape(name)}" style="vertical-align:middle"> '
                f'<output style="display:inline-block;min-width:3em">{html.escape(str(values[i]))}</output></label>')
        payload = json.dumps(data).replace("</", "<\\/")
        return (f'<div class="ac-explorer" id="{dom_id}">'
                f'<div class="ac-controls">{"".join(rows)}</div>'
                f'<img alt="{html.escape(self.alt)}" style="max-width:100%">'
                f'<script type="application/json" class="ac-frames">{payload}</script>'
                + _SCRIPT % {"id": json.dumps(dom_id)} + "</div>")

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = self.widget()._repr_mimebundle_(include=include, exclude=exclude) or {}
        bundle["text/html"] = self.to_html()
        bundle["text/plain"] = f"Explorer({', '.join(self.controls)})"
        return bundle


def _self_attention_rows(tokens: Sequence[str], temperature: float, d_model: int):
    """Weights and row entropies of parameter-free self-attention (Q = K = V = X)."""
    import math

    from .functional import scaled_dot_product_attention
    from .metrics import attention_entropy
    from .toy_tasks import word_embeddings

    x = word_embeddings(list(tokens), d_model)  # (T, D)
    _, weights = scaled_dot_product_attention(x, x, x, scale=1 / (temperature * math.sqrt(d_model)))
    return weights, attention_entropy(weights)  # (T, T), (T,)


def basics_explorer(tokens: Sequence[str], temperatures=(0.25, 0.5, 1.0, 2.0, 4.0),
                    lengths: Sequence[int] | None = None, d_model: int = 16) -> Explorer:
    """Chapter 1: temperature and sequence length over a heatmap and its row entropies.

    The scores are divided by ``temperature * sqrt(d_model)``: low temperature
    sharpens each row towards its best key, high temperature flattens it.
    """
    import math

    import numpy as np

    from .viz import entropy_bars, heatmap, set_token_ticks

    tokens = list(tokens)
    lengths = list(lengths or range(2, len(tokens) + 1))
    T = len(tokens)

    def setup(fig, temperature, tokens_shown):
        ax_map, ax_ent = fig.subplots(1, 2, width_ratios=[1.15, 1])
        image = heatmap(np.zeros((T, T)), tokens, tokens, ax=ax_map)
        bars = entropy_bars(np.zeros(T), tokens, ax=ax_ent)
        ax_ent.set_ylim(0, math.log(T) * 1.4)  # head-room for the note above the line
        line = ax_ent.axhline(0, color="0.3", ls="--", lw=1)
        note = ax_ent.text(0.98, 0.98, "", transform=ax_ent.transAxes, ha="right", va="top",
                           fontsize=8)

        def update(temperature, tokens_shown):
            n = tokens_shown
            weights, entropy = _self_attention_rows(tokens[:n], temperature, d_model)
            image.set_data(weights.numpy())
            image.set_extent((-0.5, n - 0.5, n - 0.5, -0.5))
            set_token_ticks(ax_map, tokens[:n], tokens[:n])
            ax_map.set_title(f"τ = {temperature}: each row sums to 1")
            for i, bar in enumerate(bars):
                bar.set_height(entropy[i].item() if i < n else 0.0)
                bar.set_visible(i < n)
            ax_ent.set_xlim(-0.5, n - 0.5)
            ax_ent.set_xticks(range(n), tokens[:n], rotation=45, ha="right")
            line.set_ydata([math.log(n)] * 2)
            note.set_text(f"dashed: uniform over {n} keys,\nln {n} = {math.log(n):.3f} nats")
            ax_ent.set_title(f"mean entropy {entropy.mean():.2f} nats")

        update(temperature, tokens_shown)
        return update

    return Explorer(setup, {"temperature": list(temperatures), "tokens_shown": lengths},
                    initial={"temperature": 1.0 if 1.0 in temperatures else temperatures[0],
                             "tokens_shown": lengths[-1]},
                    alt="Attention heatmap of the sentence and entropy of each row; "
                        "the sliders change the softmax temperature and how many tokens are used.")
