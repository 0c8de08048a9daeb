"""Every chapter: the rendering base, how the book makes a figure, draws it and
encodes it, written once for the static figures (:mod:`~attention_core.book.viz.figures`)
and the explorers (:mod:`~attention_core.book.explorers`).

* The layouts: a figure is drawn ``"wide"`` (panels side by side, for a desktop's
  content column and the live widget) or ``"narrow"`` (stacked, for a phone), each at
  the dpi and under the rcParams of :data:`LAYOUT_STYLE`, so that its text is legible
  at the size it is shown (:func:`is_narrow`, :func:`layout_rc`, :func:`layout_figsizes`).
* The figure: :func:`draw_layout` makes a figure (:func:`new_figure`, on a
  :func:`recording_canvas` that records the smallest text drawn, for the legibility
  checks) and calls a ``draw(fig, layout)`` on it (:func:`call_draw`).
* The encoding: :func:`png_bytes` from the drawn canvas (an explorer's frames),
  :func:`save_png` through ``savefig`` (a static figure, cropped like Jupyter's),
  :func:`quantised_png` for images stored in a page, :func:`data_uri` to put one there.
"""

from __future__ import annotations

import base64
import inspect
import io
import math
from collections.abc import Callable
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

LAYOUTS = ("wide", "narrow")
"""The layouts every figure and panel can draw."""

LAYOUT_STYLE = {
    # shown at about 730 CSS px (desktop content column): 720 px at 100 dpi, scale 1;
    # the smallest text (8 pt) is 11 px
    "wide": {"dpi": 100, "width": 7.2,
             "rc": {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9,
                    "xtick.labelsize": 8, "ytick.labelsize": 8, "legend.fontsize": 8,
                    "figure.titlesize": 10}},
    # shown at about 358 CSS px (a 390 px phone): 525 px at 150 dpi, scale 0.68;
    # the smallest text (7.5 pt = 15.6 px) is 10.6 CSS px there
    "narrow": {"dpi": 150, "width": 3.5,
               "rc": {"font.size": 8.5, "axes.titlesize": 8.5, "axes.labelsize": 8,
                      "xtick.labelsize": 7.5, "ytick.labelsize": 7.5, "legend.fontsize": 7.5,
                      "figure.titlesize": 9}},
}
"""The dpi, figure width (inches) and rcParams a figure draws under, for each layout."""

FIGSIZE = (7.2, 3.4)
"""The default size of a wide figure in inches; 7.2 inches make 720 px at the wide dpi."""


# --- layouts ----------------------------------------------------------------------------

def check_layout(layout: str) -> None:
    """Raise ``ValueError`` unless ``layout`` is one of :data:`LAYOUTS`."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def is_narrow(layout: str) -> bool:
    """Whether ``layout`` is the narrow (phone) layout (checked by :func:`check_layout`)."""
    check_layout(layout)
    return layout == "narrow"


def layout_rc(layout: str):
    """A context in which matplotlib draws under the rcParams of ``layout`` (text made
    inside it, ticks included, gets the layout's sizes)."""
    check_layout(layout)
    return matplotlib.rc_context(LAYOUT_STYLE[layout]["rc"])


def layout_figsizes(figsize=FIGSIZE, narrow_figsize=None) -> dict[str, tuple[float, float]]:
    """Layout -> figure size in inches: ``figsize`` for the wide one, ``narrow_figsize``
    for the narrow one (default: the wide height doubled at the narrow width)."""
    for name, size in (("figsize", figsize), ("narrow_figsize", narrow_figsize)):
        if size is not None and (len(size) != 2 or min(size) <= 0):
            raise ValueError(f"{name} must be (width, height) in inches, both > 0, got {size!r}")
    return {"wide": tuple(figsize),
            "narrow": tuple(narrow_figsize or (LAYOUT_STYLE["narrow"]["width"], 2 * figsize[1]))}


# --- figures ----------------------------------------------------------------------------

class TextRecordingCanvas(FigureCanvasAgg):
    """An Agg canvas that records the smallest text it draws: :attr:`text_px`, px at
    the figure's dpi (``points * dpi / 72``, tick labels included)."""

    text_px = math.inf
    """The size of the smallest text drawn so far, in px at the figure's dpi."""

    def get_renderer(self, *args, **kwargs):
        renderer = super().get_renderer(*args, **kwargs)
        if not getattr(renderer, "_records_text", False):
            draw_text, canvas = renderer.draw_text, self

            def recording_draw_text(gc, x, y, s, prop, *a, **k):
                if str(s).strip():
                    canvas.text_px = min(canvas.text_px, prop.get_size_in_points() * canvas.figure.dpi / 72)
                return draw_text(gc, x, y, s, prop, *a, **k)

            renderer.draw_text, renderer._records_text = recording_draw_text, True
        return renderer


def recording_canvas(figure: Figure) -> TextRecordingCanvas:
    """Attach a :class:`TextRecordingCanvas` to ``figure`` and return it."""
    return TextRecordingCanvas(figure)


def new_figure(figsize, dpi: float) -> Figure:
    """An empty figure with constrained layout, on a recording canvas."""
    figure = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    recording_canvas(figure)
    return figure


def call_draw(draw: Callable, figure: Figure, layout: str):
    """``draw(figure, layout=layout)``, or ``draw(figure)`` for a draw function that
    takes no layout (it draws both layouts the same way); returns what it returns."""
    try:
        params = inspect.signature(draw).parameters
    except (TypeError, ValueError):
        params = {}
    takes_layout = "layout" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    return draw(figure, layout=layout) if takes_layout else draw(figure)


def draw_layout(draw: Callable, layout: str, figsize, dpi: float | None = None) -> tuple[Figure, Any]:
    """A new figure of ``layout`` (``figsize`` inches at ``dpi``, default the layout's)
    with ``draw`` called on it under the layout's rcParams: ``(figure, what draw
    returned)``."""
    check_layout(layout)
    with layout_rc(layout):
        figure = new_figure(figsize, dpi or LAYOUT_STYLE[layout]["dpi"])
        return figure, call_draw(draw, figure, layout)


# --- encoding ---------------------------------------------------------------------------

def quantised_png(image: Image.Image) -> bytes:
    """``image`` as a PNG of 256 colours: about 3x smaller, for images stored in a page."""
    out = io.BytesIO()
    image.convert("RGB").quantize(256).save(out, format="PNG", optimize=True)
    return out.getvalue()


def png_bytes(fig: Figure, small: bool = False, draw: bool = True) -> bytes:
    """Draw ``fig`` on its Agg canvas (unless ``draw=False``: the canvas is current)
    and encode it as PNG. ``small`` quantises it (:func:`quantised_png`, for frames
    stored in a page); the live view skips that and compresses lightly, to stay fast."""
    if draw:
        fig.canvas.draw()
    image = Image.frombuffer("RGBA", fig.canvas.get_width_height(), fig.canvas.buffer_rgba())
    if small:
        return quantised_png(image)
    out = io.BytesIO()
    image.convert("RGB").save(out, format="PNG", compress_level=1)
    return out.getvalue()


def save_png(figure: Figure, small: bool = True, tight: bool = False) -> dict[str, Any]:
    """Save ``figure`` as PNG on a white background, recording its smallest text.
    Returns ``{"png", "width", "height", "min_text_px"}`` (``min_text_px`` is ``None``
    when it drew no text); ``small`` quantises (:func:`quantised_png`), ``tight`` crops to
    the drawn content (as Jupyter's inline backend does). The figure keeps its own canvas."""
    old = figure.canvas
    canvas = recording_canvas(figure)
    try:
        raw = io.BytesIO()
        figure.savefig(raw, format="png", dpi=figure.dpi, bbox_inches="tight" if tight else None,
                       facecolor="white")
    finally:
        figure.set_canvas(old)
    image = Image.open(io.BytesIO(raw.getvalue()))
    text_px = canvas.text_px
    return {"png": quantised_png(image) if small else raw.getvalue(),
            "width": image.size[0], "height": image.size[1],
            "min_text_px": round(text_px, 2) if math.isfinite(text_px) else None}


def data_uri(png: bytes) -> str:
    """``png`` as a ``data:image/png;base64,...`` URI: an image inside the page."""
    return "data:image/png;base64," + base64.b64encode(png).decode()
