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

import math

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .flash import online_softmax
from .functional import scaled_dot_product_attention, softmax
from .kv_cache import kv_cache_bytes
from .masks import causal_mask, padding_mask, sliding_window_mask
from .metrics import attention_entropy
from .multihead import MultiHeadAttention
from .positional import sinusoidal_encoding
from .scaling import random_scores, softmax_saturation
from .seq2seq import TARGET_VOCAB, encode_batch, translate
from .sparse import (density, dilated_window_mask, fixed_mask, global_mask, layers_from,
                     random_mask, strided_mask)
from .toy_tasks import head_roles, reverse_and_shift_batch, word_embeddings
from .viz import (color, entropy_bars, head_sharing_diagram, heatmap, mask_plot,
                  set_token_ticks)

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


def heatmap_entropy_explorer(tokens: Sequence[str], compute: Callable[..., Any],
                             controls: Mapping[str, Sequence[Any]], initial=None,
                             title: Callable[..., str] = lambda **v: "", alt: str = "") -> Explorer:
    """A heatmap of weights next to the entropy of each row, driven by ``controls``.

    ``compute(**values)`` returns ``(weights (n, n), labels)`` for the first ``n``
    tokens shown; the figure is sized for ``len(tokens)`` and updated in place.
    """



    tokens, T = list(tokens), len(tokens)

    def setup(fig, **values):
        ax_map, ax_ent = fig.subplots(1, 2, width_ratios=[1.15, 1])
        image = heatmap(np.zeros((T, T)), tokens, tokens, ax=ax_map)
        bars = entropy_bars(np.zeros(T), tokens, ax=ax_ent)
        ax_ent.set_ylim(0, math.log(T) * 1.4)  # head-room for the note above the line
        line = ax_ent.axhline(0, color="0.3", ls="--", lw=1)
        note = ax_ent.text(0.98, 0.98, "", transform=ax_ent.transAxes, ha="right", va="top",
                           fontsize=8)

        def update(**values):
            weights, labels = compute(**values)
            n = len(labels)
            entropy = attention_entropy(weights)
            image.set_data(weights.numpy())
            image.set_extent((-0.5, n - 0.5, n - 0.5, -0.5))
            set_token_ticks(ax_map, labels, labels)
            ax_map.set_title(title(**values))
            for i, bar in enumerate(bars):
                bar.set_height(entropy[i].item() if i < n else 0.0)
                bar.set_visible(i < n)
            ax_ent.set_xlim(-0.5, n - 0.5)
            ax_ent.set_xticks(range(n), labels, rotation=45, ha="right")
            line.set_ydata([math.log(n)] * 2)
            note.set_text(f"dashed: uniform over {n} keys,\nln {n} = {math.log(n):.3f} nats")
            ax_ent.set_title(f"mean entropy {entropy.mean():.2f} nats")

        update(**values)
        return update

    return Explorer(setup, controls, initial=initial, alt=alt)


def basics_explorer(tokens: Sequence[str], temperatures=(0.25, 0.5, 1.0, 2.0, 4.0),
                    d_model: int = 16) -> Explorer:
    """Chapter 1: temperature and sequence length over a heatmap and its row entropies.

    Parameter-free self-attention (Q = K = V = X) with the scores divided by
    ``temperature * sqrt(d_model)``: low temperature sharpens each row towards its
    best key, high temperature flattens it.
    """


    tokens = list(tokens)

    def compute(temperature, tokens_shown):
        x = word_embeddings(tokens[:tokens_shown], d_model)  # (n, D)
        _, weights = scaled_dot_product_attention(
            x, x, x, scale=1 / (temperature * math.sqrt(d_model)))
        return weights, tokens[:tokens_shown]

    return heatmap_entropy_explorer(
        tokens, compute, {"temperature": list(temperatures),
                          "tokens_shown": list(range(2, len(tokens) + 1))},
        initial={"temperature": 1.0 if 1.0 in temperatures else temperatures[0],
                 "tokens_shown": len(tokens)},
        title=lambda temperature, tokens_shown: f"τ = {temperature}: each row sums to 1",
        alt="Attention heatmap of the sentence and entropy of each row; the sliders change "
            "the softmax temperature and how many tokens are used.")


def scaling_explorer(d_ks=(1, 4, 16, 64, 256, 1024), num_keys: int = 16) -> Explorer:
    """Chapter 2: d_k and scaling on/off over the score histogram, one softmax row,
    and the mean row entropy against d_k."""



    d_ks = list(d_ks)
    curves = {s: [softmax_saturation(d, s, num_keys)["entropy"] for d in d_ks] for s in (True, False)}
    nbins = 40

    def setup(fig, d_k, scaling):
        ax_hist, ax_row, ax_ent = fig.subplots(1, 3, width_ratios=[1.1, 1, 1])
        hist = ax_hist.bar(np.zeros(nbins), np.zeros(nbins), width=1.0, align="edge",
                           color=color(0.3))
        ax_hist.set_xlabel("score q·k (/√d_k if scaled)")
        ax_hist.set_ylabel("density")
        row = ax_row.bar(range(num_keys), np.zeros(num_keys), color=color(0.6))
        ax_row.set_ylim(0, 1.05)
        ax_row.set_xlabel("key")
        ax_row.set_ylabel("softmax weight")
        for s, style in ((True, "-o"), (False, "--s")):
            ax_ent.plot(d_ks, curves[s], style, ms=3, color=color(0.2 if s else 0.75),
                        label="scaled" if s else "unscaled")
        ax_ent.axhline(math.log(num_keys), color="0.5", lw=0.8, ls=":")
        ax_ent.set_ylim(0, math.log(num_keys) * 1.08)
        marker, = ax_ent.plot([], [], "o", ms=10, mfc="none", mec="red", mew=2)
        ax_ent.set_xscale("log", base=2)
        ax_ent.set_xlabel("d_k")
        ax_ent.set_ylabel("mean row entropy (nats)")
        ax_ent.set_title(f"dotted: ln {num_keys} (uniform)", fontsize=9)
        ax_ent.legend(fontsize=8, loc="lower left")

        def update(d_k, scaling):
            scaled = scaling == "on"
            scores = random_scores(d_k, 2000, num_keys, scaled)  # (N, S)
            values = scores.flatten().numpy()
            limit = max(4.0, 4 * values.std())
            density, edges = np.histogram(values, bins=nbins, range=(-limit, limit), density=True)
            for bar, h, x0 in zip(hist, density, edges[:-1]):
                bar.set_x(x0)
                bar.set_width(edges[1] - edges[0])
                bar.set_height(h)
            ax_hist.set_xlim(-limit, limit)
            ax_hist.set_ylim(0, density.max() * 1.1)
            ax_hist.set_title(f"variance {values.var():.1f} (theory {1 if scaled else d_k})", fontsize=10)
            weights = softmax(scores[0])
            for bar, w in zip(row, weights):
                bar.set_height(w.item())
            ax_row.set_title(f"one row: max {weights.max():.2f}, "
                             f"H = {attention_entropy(weights):.2f} nats", fontsize=10)
            marker.set_data([d_k], [curves[scaled][d_ks.index(d_k)]])

        update(d_k, scaling)
        return update

    return Explorer(setup, {"d_k": d_ks, "scaling": ["on", "off"]}, initial={"d_k": 64},
                    figsize=(10, 3.2),
                    alt="Histogram of dot-product scores, one softmax row, and mean row entropy "
                        "against d_k; the sliders set d_k and switch the 1/sqrt(d_k) scaling.")


def self_attention_explorer(tokens: Sequence[str], d_models=(4, 8, 16, 32, 64), seed: int = 0) -> Explorer:
    """Chapter 3: sequence length and d_model over the heatmap of self-attention with
    random (untrained, seeded) projections W_q, W_k, W_v."""

    tokens = list(tokens)

    def compute(d_model, tokens_shown):
        torch.manual_seed(seed)
        attention = MultiHeadAttention(d_model, num_heads=1, bias=False)
        x = word_embeddings(tokens[:tokens_shown], d_model).unsqueeze(0)  # (1, n, D)
        with torch.no_grad():
            _, weights = attention(x)  # (1, 1, n, n)
        return weights[0, 0], tokens[:tokens_shown]


    return heatmap_entropy_explorer(
        tokens, compute, {"d_model": list(d_models), "tokens_shown": list(range(2, len(tokens) + 1))},
        initial={"d_model": 16 if 16 in d_models else d_models[0], "tokens_shown": len(tokens)},
        title=lambda d_model, tokens_shown: f"d_model = {d_model}, random W_q, W_k",
        alt="Self-attention heatmap with random projections and the entropy of each row; "
            "the sliders set d_model and the number of tokens.")


def masking_explorer(tokens: Sequence[str], d_model: int = 16) -> Explorer:
    """Chapter 5: sequence length, padding length and causal on/off over the weights of
    parameter-free self-attention with the combined mask."""

    tokens = list(tokens)
    T = len(tokens)

    def compute(tokens_shown, padding, causal):
        n = tokens_shown
        labels = tokens[:n - padding] + ["<pad>"] * padding if padding < n else ["<pad>"] * n
        x = word_embeddings(labels, d_model)  # (n, D)
        mask = padding_mask([max(n - padding, 0)], n)[0]  # (1, n): keys that are real
        if causal == "on":
            mask = mask & causal_mask(n)  # (n, n)
        _, weights = scaled_dot_product_attention(x, x, x, attn_mask=mask)
        return weights, labels

    return heatmap_entropy_explorer(
        tokens, compute,
        {"tokens_shown": list(range(4, T + 1)), "padding": [0, 1, 2, 3], "causal": ["off", "on"]},
        initial={"tokens_shown": T, "padding": 2, "causal": "on"},
        title=lambda tokens_shown, padding, causal: f"causal {causal}, {padding} padded key(s)",
        alt="Attention weights under a padding mask and an optional causal mask, and the "
            "entropy of each row; masked entries are exactly zero.")


def heads_explorer(models: Mapping[int, Any], seq_len: int, vocab_size: int,
                   num_examples: int = 4, seed: int = 7) -> Explorer:
    """Chapter 4: the number of heads of a trained :class:`~attention_core.toy_tasks.TinyTransformer`
    (one model per head count in ``models``) and a test example, over the per-head grid
    and the mean row entropy of each head."""



    x, _ = reverse_and_shift_batch(num_examples, seq_len, vocab_size,
                                   torch.Generator().manual_seed(seed))  # (N, T)
    with torch.no_grad():
        weights = {h: m(x)[1][0] for h, m in models.items()}  # (N, H, T, T) per model
    max_heads = max(models)

    def setup(fig, num_heads, example):
        axes = fig.subplots(1, max_heads + 1, width_ratios=[1] * max_heads + [0.9])
        images = [heatmap(np.zeros((seq_len, seq_len)), ax=ax, colorbar=False) for ax in axes[:-1]]
        for ax in axes[1:-1]:
            ax.set_ylabel("")
        bars = axes[-1].bar(range(max_heads), np.zeros(max_heads), color=color(0.35))
        axes[-1].axhline(math.log(seq_len), color="0.3", ls="--", lw=1)
        axes[-1].set_ylim(0, math.log(seq_len) * 1.1)
        axes[-1].set_xticks(range(max_heads), [f"h{h}" for h in range(max_heads)])
        axes[-1].set_ylabel("mean row entropy (nats)")
        axes[-1].set_title(f"dashed: ln {seq_len}", fontsize=9)

        def update(num_heads, example):
            w = weights[num_heads][example]  # (H, T, T)
            roles = head_roles(weights[num_heads])
            tokens = [str(t) for t in x[example].tolist()]
            for h, (ax, image) in enumerate(zip(axes, images)):
                ax.set_visible(h < num_heads)
                if h < num_heads:
                    image.set_data(w[h].numpy())
                    ax.set_xticks(range(seq_len), tokens, rotation=0)
                    ax.set_yticks(range(seq_len), tokens)
                    role = max(roles[h], key=roles[h].get)
                    ax.set_title(f"head {h}: {role} {roles[h][role]:.2f}", fontsize=9)
            entropy = attention_entropy(w).mean(-1)  # (H,)
            for h, bar in enumerate(bars):
                bar.set_height(entropy[h].item() if h < num_heads else 0.0)

        update(num_heads, example)
        return update

    return Explorer(setup, {"num_heads": sorted(models), "example": list(range(num_examples))},
                    initial={"num_heads": sorted(models)[-1]}, figsize=(11, 2.9),
                    alt="One attention heatmap per head of the trained tiny transformer on a test "
                        "sequence, and each head's mean row entropy; the sliders pick the number "
                        "of heads and the example.")


def kv_sharing_explorer(num_heads: int = 32, head_dim: int = 128, num_layers: int = 32,
                        contexts=(1024, 4096, 8192, 32768, 131072)) -> Explorer:
    """Chapter 8: number of key/value heads and context length over the head-sharing
    diagram and the KV cache size (fp16, batch 1) of a model of the given shape."""


    kv_options = [d for d in range(1, num_heads + 1) if num_heads % d == 0]
    contexts = list(contexts)
    gib = 2**30

    def setup(fig, num_kv_heads, context):
        ax_diagram, ax_size = fig.subplots(1, 2, width_ratios=[1.6, 1])
        ax_size.set_xscale("log", base=2)
        ax_size.set_yscale("log", base=2)
        ax_size.set_xlabel("context length (tokens)")
        ax_size.set_ylabel("KV cache (GiB, fp16)")
        for kv in (num_heads, 1):
            ax_size.plot(contexts, [kv_cache_bytes(num_layers, kv, head_dim, c) / gib for c in contexts],
                         ":", color="0.6", lw=1)
        ax_size.text(contexts[-1], kv_cache_bytes(num_layers, num_heads, head_dim, contexts[-1]) / gib,
                     "MHA", fontsize=8, ha="right", va="bottom", color="0.4")
        ax_size.text(contexts[-1], kv_cache_bytes(num_layers, 1, head_dim, contexts[-1]) / gib,
                     "MQA", fontsize=8, ha="right", va="top", color="0.4")
        line, = ax_size.plot([], [], "-o", ms=3, color=color(0.3))
        point, = ax_size.plot([], [], "o", ms=10, mfc="none", mec="red", mew=2)

        def update(num_kv_heads, context):
            ax_diagram.clear()
            head_sharing_diagram(num_heads, num_kv_heads, ax=ax_diagram)
            kind = "MHA" if num_kv_heads == num_heads else "MQA" if num_kv_heads == 1 else "GQA"
            ax_diagram.set_title(f"{kind}: {num_heads} query heads share {num_kv_heads} kv head(s)",
                                 fontsize=10)
            sizes = np.array([kv_cache_bytes(num_layers, num_kv_heads, head_dim, c) for c in contexts]) / gib
            line.set_data(contexts, sizes)
            size = kv_cache_bytes(num_layers, num_kv_heads, head_dim, context) / gib
            point.set_data([context], [size])
            ax_size.set_title(f"{context:,} tokens: {size:.2f} GiB", fontsize=10)

        update(num_kv_heads, context)
        return update

    return Explorer(setup, {"num_kv_heads": kv_options, "context": contexts},
                    initial={"num_kv_heads": 8 if 8 in kv_options else kv_options[0], "context": 4096},
                    figsize=(10, 3),
                    alt="Diagram of which query heads share each key/value head, and the KV cache "
                        "size against context length; the sliders set the number of kv heads and "
                        "the context.")


def positional_explorer(d_models=(16, 32, 64, 128), bases=(100.0, 1000.0, 10000.0),
                        positions=(32, 64, 128)) -> Explorer:
    """Chapter 9: d_model, base and number of positions over the sinusoidal encoding
    heatmap and the similarity PE(p) . PE(q) against the distance ``|p - q|``."""


    max_p, max_d = max(positions), max(d_models)

    def setup(fig, d_model, base, positions):
        ax_map, ax_sim = fig.subplots(1, 2, width_ratios=[1.3, 1])
        image = ax_map.imshow(np.zeros((max_p, max_d)), cmap="viridis", vmin=-1, vmax=1,
                              aspect="auto", interpolation="nearest")
        fig.colorbar(image, ax=ax_map, fraction=0.046, pad=0.04, label="PE value")
        ax_map.set_xlabel("dimension")
        ax_map.set_ylabel("position")
        line, = ax_sim.plot([], [], color=color(0.3))
        ax_sim.set_xlabel("distance |p - q|")
        ax_sim.set_ylabel("PE(p)·PE(q) / (d_model / 2)")
        ax_sim.set_ylim(-0.45, 1.05)
        ax_sim.axhline(0, color="0.6", lw=0.8)

        def update(d_model, base, positions):
            num_positions = positions
            pe = sinusoidal_encoding(num_positions, d_model, base)  # (P, D)
            image.set_data(pe.numpy())
            image.set_extent((-0.5, d_model - 0.5, num_positions - 0.5, -0.5))
            ax_map.set_title(f"PE, d_model = {d_model}, base = {base:g}", fontsize=10)
            similarity = (pe @ pe[0]) / (d_model / 2)  # (P,): depends on distance only
            line.set_data(np.arange(num_positions), similarity.numpy())
            ax_sim.set_xlim(0, num_positions - 1)
            ax_sim.set_title("similarity falls with distance", fontsize=10)

        update(d_model, base, positions)
        return update

    return Explorer(setup, {"d_model": list(d_models), "base": list(bases),
                            "positions": list(positions)},
                    initial={"d_model": 64 if 64 in d_models else d_models[0],
                             "base": bases[-1], "positions": positions[-1]},
                    figsize=(10, 3.4),
                    alt="Heatmap of the sinusoidal position encoding (positions by dimensions) and "
                        "the dot product of two encodings against their distance; the sliders "
                        "set d_model, the base and the number of positions.")


def tiling_explorer(seq_lens=(8, 16, 32), blocks=(2, 4, 8), seed: int = 0) -> Explorer:
    """Chapter 10: sequence length, block size and how many key blocks the tracked
    query block has processed, over the grid of tiles and the running max and sum of
    the tracked row (the online softmax)."""


    g = torch.Generator().manual_seed(seed)
    max_L = max(seq_lens)
    scores_all = torch.randn(max_L, max_L, generator=g, dtype=torch.float64) * 2  # (L, S)
    max_steps = max(L // b for L in seq_lens for b in blocks)

    def setup(fig, seq_len, block, key_blocks_done):
        ax_grid, ax_run = fig.subplots(1, 2, width_ratios=[1.25, 1])
        image = ax_grid.imshow(np.zeros((max_L, max_L)), cmap="viridis", vmin=0, vmax=3,
                               interpolation="nearest")
        ax_grid.set_xlabel("key position")
        ax_grid.set_ylabel("query position")
        ax_grid.legend(handles=[Patch(color=image.cmap(image.norm(v)), label=name) for v, name in
                                ((1, "earlier query blocks"), (2, "tiles done"), (3, "current tile"),
                                 (0, "not yet read"))],
                       fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
        m_line, = ax_run.plot([], [], "o-", color=color(0.2), label="running max m")
        l_line, = ax_run.plot([], [], "s-", color=color(0.7), label="running sum l")
        m_true = ax_run.axhline(0, color=color(0.2), ls=":", lw=1)
        l_true = ax_run.axhline(0, color=color(0.7), ls=":", lw=1)
        ax_run.set_xlabel("key blocks read")
        ax_run.legend(fontsize=8, loc="upper left")

        def update(seq_len, block, key_blocks_done):
            L, n_blocks = seq_len, seq_len // block
            done = min(key_blocks_done, n_blocks)
            tracked = (n_blocks // 2) * block  # first row of a query block in the middle
            state = np.zeros((L, L))  # 0 pending, 1 earlier query blocks, 2 done, 3 current
            state[:tracked] = 1
            state[tracked:tracked + block, :done * block] = 2
            state[tracked:tracked + block, (done - 1) * block:done * block] = 3
            image.set_data(state)
            image.set_extent((-0.5, L - 0.5, L - 0.5, -0.5))
            ax_grid.set_xticks(np.arange(-0.5, L, block), minor=True)
            ax_grid.set_yticks(np.arange(-0.5, L, block), minor=True)
            ax_grid.grid(which="minor", color="white", lw=0.8)
            ax_grid.tick_params(which="minor", length=0)
            ax_grid.set_title(f"L = {L}, {block}x{block} tiles: query block at rows "
                              f"{tracked}-{tracked + block - 1}, key block {done} of {n_blocks}",
                              fontsize=9)
            row = scores_all[tracked, :L]
            _, trace = online_softmax(row, block)
            steps = np.arange(1, done + 1)
            m_line.set_data(steps, [t["m"] for t in trace[:done]])
            l_line.set_data(steps, [t["l"] for t in trace[:done]])
            m_true.set_ydata([trace[-1]["m"]] * 2)
            l_true.set_ydata([trace[-1]["l"]] * 2)
            ax_run.set_xlim(0.5, max(n_blocks, 2) + 0.5)
            top = max(max(t["m"] for t in trace), max(t["l"] for t in trace))
            ax_run.set_ylim(min(0, min(t["m"] for t in trace)) - 0.5, top * 1.15 + 0.5)
            ax_run.set_title(f"row {tracked}: dotted = final values (m = {trace[-1]['m']:.2f}, "
                             f"l = {trace[-1]['l']:.2f})", fontsize=9)

        update(seq_len, block, key_blocks_done)
        return update

    return Explorer(setup, {"seq_len": list(seq_lens), "block": list(blocks),
                            "key_blocks_done": list(range(1, max_steps + 1))},
                    initial={"seq_len": 16, "block": 4, "key_blocks_done": 2}, figsize=(10, 3.8),
                    alt="Grid of score tiles coloured by state (done, current, pending) for one query "
                        "block, and the running maximum and running sum of one row after each key "
                        "block; the sliders set the sequence length, the block size and the step.")


SPARSE_PATTERNS = {
    "sliding window": lambda L, size: sliding_window_mask(L, size),
    "dilated window (r = 2)": lambda L, size: dilated_window_mask(L, size, 2),
    "strided (causal)": lambda L, size: strided_mask(L, size),
    "fixed (causal)": lambda L, size: fixed_mask(L, size),
}
"""The base patterns of chapter 7 by name, each ``(L, size) -> mask`` with size the window or stride."""


def sparse_mask_explorer(lengths=(32, 64), sizes=(2, 4, 8), num_globals=(0, 2),
                         num_randoms=(0, 2), seed: int = 0) -> Explorer:
    """Chapter 7: a base pattern (window or Sparse Transformer) united with global
    tokens and random keys; the mask with the fraction it keeps, and how many layers
    the last token needs before it depends on each position."""
    max_L = max(lengths)

    def build(pattern, L, size, num_global, num_random):
        mask = SPARSE_PATTERNS[pattern](L, size) | global_mask(L, num_global)
        return mask | random_mask(L, num_random, seed) if num_random else mask

    def setup(fig, **values):
        ax_mask, ax_reach = fig.subplots(1, 2, width_ratios=[1, 1.3])
        image = mask_plot(torch.zeros(max_L, max_L), ax=ax_mask)
        line, = ax_reach.step([], [], where="mid", color=color(0.25))
        ax_reach.set_xlabel("position j")
        ax_reach.set_ylabel("layers until the last token\ndepends on position j")
        note = ax_reach.text(0.98, 0.97, "", transform=ax_reach.transAxes, va="top", ha="right",
                             fontsize=8)

        def update(pattern, L, size, num_global, num_random):
            mask = build(pattern, L, size, num_global, num_random)
            image.set_data(mask.float().numpy())
            image.set_extent((-0.5, L - 0.5, L - 0.5, -0.5))
            ax_mask.set_title(f"{pattern}, size {size}: keeps {density(mask):.1%} "
                              f"of {L}x{L}", fontsize=9)
            # information flows from key j to query i: search backwards from the last token
            layers = layers_from(mask.T.contiguous(), L - 1).numpy()
            line.set_data(np.arange(L), np.where(layers < 0, np.nan, layers))  # gaps: never
            ax_reach.set_xlim(-0.5, max_L - 0.5)
            ax_reach.set_ylim(0, layers.max() * 1.15 + 1)
            ax_reach.set_title(f"+ {num_global} global tokens, {num_random} random keys per query",
                               fontsize=9)
            never = int((layers < 0).sum())
            note.set_text(f"{never} positions never reached" if never else
                          f"every position within {layers.max()} layer"
                          f"{'s' if layers.max() != 1 else ''}")

        update(**values)
        return update

    return Explorer(setup, {"pattern": list(SPARSE_PATTERNS), "L": list(lengths),
                            "size": list(sizes), "num_global": list(num_globals),
                            "num_random": list(num_randoms)},
                    initial={"L": max_L, "size": sizes[len(sizes) // 2]}, figsize=(9, 3.4),
                    alt="A sparse attention mask (query by key positions) and, for each position, "
                        "the number of layers until the last token depends on it; the sliders "
                        "choose the pattern, the length, the window or stride, and how many "
                        "global tokens and random keys are added.")


class AlignmentExplorer(Explorer):
    """An :class:`Explorer` whose live view also has a text box: type a source sentence,
    press Enter, and it joins the examples (bad input gets a message naming the
    allowed words instead of a traceback)."""

    def widget(self):
        if self._widget is None:
            import ipywidgets as w

            box = super().widget()
            slider = box.sliders[list(self.controls).index("sentence")]
            text = w.Text(placeholder="type a sentence, e.g. a b c d, then Enter",
                          description="sentence", continuous_update=False)
            message = w.HTML()

            def typed(change):
                sentence = " ".join(change["new"].split())
                try:
                    translate(sentence)  # validates: raises naming the allowed words
                except ValueError as error:
                    message.value = f"<span style='color:#b00'>{html.escape(str(error))}</span>"
                    return
                message.value = ""
                if sentence not in self.controls["sentence"]:
                    self.controls["sentence"].append(sentence)
                    slider.options = self.controls["sentence"]
                slider.value = sentence

            text.observe(typed, names="value")
            self._widget = w.VBox([w.HBox([text, message]), *box.children])
            self._widget.sliders, self._widget.image = box.sliders, box.image
            self._widget.text, self._widget.message = text, message
        return self._widget


def alignment_explorer(models: Mapping[str, Any], sentences: Sequence[str]) -> AlignmentExplorer:
    """Chapter 6: pick a source sentence and a trained attention model (name ->
    :class:`~attention_core.seq2seq.Seq2Seq`); see its alignment, output words by
    source words, and whether its translation is right. In a live kernel a text box
    takes new sentences."""
    for s in sentences:
        translate(s)  # every example must be a valid sentence
    longest = max(len(s.split()) for s in sentences)

    def setup(fig, sentence, model):
        ax = fig.subplots()
        image = heatmap(np.zeros((longest + 1, longest)), ax=ax, colorbar=True)

        def update(sentence, model):
            net = models[model]
            batch = encode_batch([sentence])
            tokens, weights = net.greedy_decode(batch.src, batch.src_lengths)
            words = sentence.split()
            out = [TARGET_VOCAB[i] for i in tokens[0].tolist()]
            image.set_data(weights[0].numpy())
            image.set_extent((-0.5, len(words) - 0.5, len(out) - 0.5, -0.5))
            set_token_ticks(ax, out, words)
            ax.set_xlabel("source word")
            ax.set_ylabel("output word")
            right = out[:-1] == translate(sentence) and out[-1] == "</s>"
            ax.set_title(f"{model}: {' '.join(w for w in out if w != '</s>')} "
                         f"({'right' if right else 'WRONG, expected ' + ' '.join(translate(sentence))})",
                         fontsize=9)

        update(sentence, model)
        return update

    return AlignmentExplorer(setup, {"sentence": list(sentences), "model": list(models)},
                             figsize=(5.6, 4.6),
                             alt="Alignment heatmap of a trained encoder-decoder: output words by "
                                 "source words, weight of each source word when producing each "
                                 "output word; the sliders choose the sentence and the model.")
