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
  :func:`print_png` the print copy of a figure or frame (:data:`PRINT_SCALE`),
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
from matplotlib.figure import Figure, FigureBase
from matplotlib.legend import Legend
from matplotlib.text import Text
from matplotlib.transforms import Affine2D, Bbox
from PIL import Image

__all__ = [
    "LAYOUTS", "LAYOUT_STYLE", "PRINT_SCALE", "FIGSIZE", "check_layout", "is_narrow", "layout_rc",
    "layout_figsizes", "TextRecordingCanvas", "recording_canvas", "new_figure", "call_draw", "draw_layout",
    "quantised_png", "png_bytes", "save_png", "print_png", "data_uri", "COLUMN_CSS_PX", "TEXT_FLOOR_CSS_PX",
    "FigureTextError", "shown_text_px", "text_problems", "tight_bbox", "check_text", "check_shown_size",
    "check_figure",
]

def check_figure(name: str, figure) -> None:
    """Raise unless ``figure`` is a matplotlib figure (a ``Figure``, or a ``SubFigure`` of one):
    the argument ``name`` of a function that draws on it or saves it."""
    if not isinstance(figure, FigureBase):
        raise TypeError(f"{name} must be a matplotlib Figure, got {type(figure).__name__}")


LAYOUTS = ("wide", "narrow")
"""The layouts every figure and panel can draw."""

LAYOUT_STYLE = {
    # shown in a desktop's 676 CSS px column (COLUMN_CSS_PX): 720 px at 100 dpi, scale
    # 0.94; the smallest text (8 pt = 11.1 px) is 10.4 CSS px there
    "wide": {"dpi": 100, "width": 7.2,
             "rc": {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9,
                    "xtick.labelsize": 8, "ytick.labelsize": 8, "legend.fontsize": 8,
                    "figure.titlesize": 10}},
    # shown at 343 CSS px (a 390 px phone's column, COLUMN_CSS_PX): 525 px at 150 dpi,
    # scale 0.65; the smallest text (7.5 pt = 15.6 px) is 10.2 CSS px there
    "narrow": {"dpi": 150, "width": 3.5,
               "rc": {"font.size": 8.5, "axes.titlesize": 8.5, "axes.labelsize": 8,
                      "xtick.labelsize": 7.5, "ytick.labelsize": 7.5, "legend.fontsize": 7.5,
                      "figure.titlesize": 9}},
}
"""The dpi, figure width (inches) and rcParams a figure draws under, for each layout."""

PRINT_SCALE = 2.5
"""The print copy of a wide rendering (what the PDF edition prints, ``_ext/pdf_edition.py``)
has this many times its pixels each way: the same figure saved at 2.5 times its dpi, same
layout, same text in points. The PDF shows it at the wide rendering's CSS size or smaller
(96 CSS px an inch), so it prints at 240 px an inch or more (the print floor is 200). The
website's pages never load it (``data-print-src``, an explorer's ``print_images``)."""

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

    def __init__(self, figure=None):
        if figure is not None:
            check_figure("figure", figure)
        super().__init__(figure)

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
    check_figure("figure", figure)
    return TextRecordingCanvas(figure)


def new_figure(figsize, dpi: float) -> Figure:
    """An empty figure with constrained layout, on a recording canvas."""
    if isinstance(dpi, bool) or not isinstance(dpi, (int, float)) or not 0 < dpi < math.inf:
        raise ValueError(f"dpi must be a finite number > 0, got {dpi!r}")
    figure = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    recording_canvas(figure)
    return figure


def call_draw(draw: Callable, figure: Figure, layout: str):
    """``draw(figure, layout=layout)``, or ``draw(figure)`` for a draw function that
    takes no layout (it draws both layouts the same way); returns what it returns."""
    if not callable(draw):
        raise TypeError(f"draw must be a function draw(fig, layout), got {type(draw).__name__}")
    check_figure("figure", figure)
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
    if not callable(draw):
        raise TypeError(f"draw must be a function draw(fig, layout), got {type(draw).__name__}")
    check_layout(layout)
    with layout_rc(layout):
        figure = new_figure(figsize, dpi or LAYOUT_STYLE[layout]["dpi"])
        return figure, call_draw(draw, figure, layout)


# --- encoding ---------------------------------------------------------------------------

def quantised_png(image: Image.Image) -> bytes:
    """``image`` as a PNG of 256 colours: about 3x smaller, for images stored in a page."""
    if not isinstance(image, Image.Image):
        raise TypeError(f"image must be a PIL Image, got {type(image).__name__}")
    out = io.BytesIO()
    image.convert("RGB").quantize(256).save(out, format="PNG", optimize=True)
    return out.getvalue()


def png_bytes(fig: Figure, small: bool = False, draw: bool = True) -> bytes:
    """Draw ``fig`` on its Agg canvas (unless ``draw=False``: the canvas is current)
    and encode it as PNG. ``small`` quantises it (:func:`quantised_png`, for frames
    stored in a page); the live view skips that and compresses lightly, to stay fast."""
    check_figure("fig", fig)
    if draw:
        fig.canvas.draw()
    image = Image.frombuffer("RGBA", fig.canvas.get_width_height(), fig.canvas.buffer_rgba())
    if small:
        return quantised_png(image)
    out = io.BytesIO()
    image.convert("RGB").save(out, format="PNG", compress_level=1)
    return out.getvalue()


def _savefig(figure: Figure, tight: bool, scale: float,
             compress_level: int | None = None) -> tuple[bytes, float]:
    """``figure`` saved as PNG (``savefig``; zlib's ``compress_level``, default 6) on a white
    background at ``scale`` times its dpi, on a canvas of its own that records the smallest
    text (px of the saved image); the figure keeps its own canvas, drawn as it was. Returns
    the PNG and that text size."""
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")
    old = figure.canvas
    canvas = recording_canvas(figure)
    try:
        raw = io.BytesIO()
        figure.savefig(raw, format="png", dpi=figure.dpi * scale, bbox_inches="tight" if tight else None,
                       facecolor="white",
                       pil_kwargs=None if compress_level is None else {"compress_level": compress_level})
    finally:
        figure.set_canvas(old)
    return raw.getvalue(), canvas.text_px


def save_png(figure: Figure, small: bool = True, tight: bool = False, scale: float = 1.0) -> dict[str, Any]:
    """Save ``figure`` as PNG on a white background, recording its smallest text.
    Returns ``{"png", "width", "height", "min_text_px"}`` (``min_text_px`` is ``None``
    when it drew no text; px of the saved image); ``small`` quantises (:func:`quantised_png`),
    ``tight`` crops to the drawn content (as Jupyter's inline backend does), ``scale`` (> 0)
    saves at that many times the figure's dpi. The figure keeps its own canvas, drawn as
    it was."""
    check_figure("figure", figure)
    raw, text_px = _savefig(figure, tight, scale)
    image = Image.open(io.BytesIO(raw))
    return {"png": quantised_png(image) if small else raw,
            "width": image.size[0], "height": image.size[1],
            "min_text_px": round(text_px, 2) if math.isfinite(text_px) else None}


def print_png(figure: Figure, tight: bool = False) -> bytes:
    """The print copy of the wide rendering of ``figure`` (a static figure's or an
    explorer's frame, as drawn now): the figure saved at :data:`PRINT_SCALE` times its dpi,
    ``tight`` as its rendering was, as a PNG of 256 colours (median cut, as
    :func:`quantised_png`: a fast octree palette would be 0.1 s quicker but bands a colour
    bar into about 40 steps). Encoded for speed: an uncompressed PNG in between and plain
    compression, not an optimised one (0.4 s a copy, not :func:`save_png`'s 0.55 s, for a
    file a few per cent larger)."""
    check_figure("figure", figure)
    raw, _ = _savefig(figure, tight, PRINT_SCALE, compress_level=0)
    out = io.BytesIO()
    Image.open(io.BytesIO(raw)).convert("RGB").quantize(256).save(out, format="PNG")
    return out.getvalue()


def data_uri(png: bytes) -> str:
    """``png`` as a ``data:image/png;base64,...`` URI: an image inside the page."""
    if not isinstance(png, bytes):
        raise TypeError(f"png must be bytes, got {type(png).__name__}")
    return "data:image/png;base64," + base64.b64encode(png).decode()


# --- text checks: nothing cut at an edge or over another panel, nothing too small -------

COLUMN_CSS_PX = {"phone": 343, "desktop": 676}
"""Width in CSS px of the content column a figure is shown in (a 390 px phone, whose page
leaves 343 px once its side margins and a 15 px vertical scrollbar are taken, and a
1280 px desktop). The one place these widths are set; the build's checks and the tests
read them here."""

TEXT_FLOOR_CSS_PX = 9.0
"""The smallest text a figure may show, CSS px as displayed (:func:`shown_text_px`)."""

_EDGE_SLACK_PX = 1.0  # antialiasing: a glyph's box may touch the edge by a pixel
_OVERLAP_PX = 1.5  # two boxes that share less than this in x or y do not overlap


class FigureTextError(ValueError):
    """A figure whose text is cut at its edge, overlaps another panel, or is too small
    where it is shown; the message names the figure and each problem."""


def shown_text_px(text_px: float, natural_width: float, column_px: float) -> float:
    """Text of ``text_px`` (px at an image's natural size, ``points * dpi / 72``) in CSS
    px as displayed in a column ``column_px`` wide: images are scaled down to fit the
    column, never up."""
    for name, value in (("text_px", text_px), ("natural_width", natural_width), ("column_px", column_px)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if natural_width <= 0:
        raise ValueError(f"natural_width must be > 0, got {natural_width!r}")
    return text_px * min(1.0, column_px / natural_width)


def _drawn_texts(figure: Figure) -> list[tuple[Any, Any]]:
    """``(text, owner)`` for every text artist a draw of ``figure`` shows: titles, axis
    labels, the tick labels of drawn ticks, annotations, legends; ``owner`` is the
    axes it belongs to, or the figure."""
    out, tick_texts = [], set()
    for ax in figure.get_axes():
        for axis in ax._axis_map.values():
            for tick in axis.majorTicks + axis.minorTicks:
                tick_texts.update((id(tick.label1), id(tick.label2)))
            if ax.get_visible() and axis.get_visible() and ax.axison:
                out += [(label, ax) for tick in axis._update_ticks() if tick.get_visible()
                        for label in (tick.label1, tick.label2) if label.get_visible()]
    hidden = {id(t) for legend in figure.findobj(Legend) if not legend.get_visible()
              for t in (*legend.get_texts(), legend.get_title())}
    labels = {id(text): ax for ax in figure.get_axes() for axis in ax._axis_map.values()
              for text in (axis.label, axis.offsetText)}  # an axis label knows no axes
    for artist in figure.findobj(Text, include_self=False):
        if id(artist) in tick_texts or id(artist) in hidden or not artist.get_visible():
            continue
        owner = artist.axes or labels.get(id(artist), figure)
        if owner is not figure and not owner.get_visible():
            continue
        out.append((artist, owner))
    return [(t, o) for t, o in out if t.get_text().strip()]


def _panel_area(ax, renderer):
    """The area of ``ax`` that text must not run over: its frame where it has axes
    drawn, else the union of what it draws (a diagram drawn with its axis off)."""
    if ax.axison and ax.get_frame_on():
        return ax.bbox
    boxes = [a.get_window_extent(renderer) for a in (*ax.images, *ax.patches, *ax.collections, *ax.lines)
             if a.get_visible()]
    boxes = [b for b in boxes if b.width > 0 and b.height > 0 and _finite(b)]
    if not boxes:
        return None
    union = Bbox.union(boxes)
    return Bbox.intersection(union, ax.bbox)


def _finite(box) -> bool:
    return all(math.isfinite(v) for v in (box.x0, box.y0, box.x1, box.y1))


def _overlap(a, b) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > _OVERLAP_PX
            and min(a.y1, b.y1) - max(a.y0, b.y0) > _OVERLAP_PX)


def _related(a, b) -> bool:
    """Panels that share their place on purpose: twins, insets, a colorbar of the other."""
    if a is b:
        return True
    if any(y in getattr(x, "child_axes", []) for x, y in ((a, b), (b, a))):
        return True
    is_axes = all(hasattr(x, "get_shared_x_axes") for x in (a, b))
    return is_axes and tuple(a.bbox.bounds) == tuple(b.bbox.bounds)  # twinx, twiny


def _describe(text, owner, figure: Figure) -> str:
    axes = figure.get_axes()
    where = f"panel {axes.index(owner) + 1}" if owner in axes else "the figure"
    return f"{text.get_text()!r} ({where})"


def text_problems(figure: Figure, saved=None) -> list[str]:
    """What is wrong with the text of a drawn ``figure`` (its canvas drawn since its last
    change): each text cut at the edge of the saved image ``saved`` (a ``Bbox`` in
    display px; default the whole figure, as an explorer's frames and ``savefig``
    without ``bbox_inches`` save it), each text running over another panel's area, and
    each pair of texts of different panels that overlap. ``[]`` when all is well."""
    check_figure("figure", figure)
    renderer = figure.canvas.get_renderer()
    saved = saved or figure.bbox
    texts = []
    for text, owner in _drawn_texts(figure):
        box = text.get_window_extent(renderer)
        if text.get_clip_on() and text.get_clip_box() is not None:
            clipped = Bbox.intersection(box, text.get_clip_box())
            if clipped is None:
                continue  # clipped away entirely: not drawn
            box = clipped
        if box.width <= 0 or box.height <= 0:
            continue
        texts.append((text, owner, box))
    problems = []
    for text, owner, box in texts:
        cut = {"left": saved.x0 - box.x0, "right": box.x1 - saved.x1,
               "bottom": saved.y0 - box.y0, "top": box.y1 - saved.y1}
        for side, px in cut.items():
            if px > _EDGE_SLACK_PX:
                problems.append(f"{_describe(text, owner, figure)} cut at the {side} edge by {px:.0f} px")
    axes = [ax for ax in figure.get_axes() if ax.get_visible()]
    areas = {id(ax): _panel_area(ax, renderer) for ax in axes}
    for text, owner, box in texts:
        for ax in axes:
            area = areas[id(ax)]
            if area is not None and not _related(owner, ax) and _overlap(box, area):
                problems.append(f"{_describe(text, owner, figure)} runs over panel "
                                f"{figure.get_axes().index(ax) + 1}")
    for i, (t1, o1, b1) in enumerate(texts):
        for t2, o2, b2 in texts[i + 1:]:
            if not _related(o1, o2) and _overlap(b1, b2):
                problems.append(f"{_describe(t1, o1, figure)} overlaps {_describe(t2, o2, figure)}")
    return problems


def tight_bbox(figure: Figure, pad_inches: float | None = None):
    """The area ``savefig(bbox_inches="tight")`` saves of the drawn ``figure``, in display px."""
    check_figure("figure", figure)
    renderer = figure.canvas.get_renderer()
    pad = matplotlib.rcParams["savefig.pad_inches"] if pad_inches is None else pad_inches
    box = figure.get_tightbbox(renderer).padded(pad)  # inches
    return box.transformed(Affine2D().scale(figure.dpi))


def check_text(figure: Figure, name: str, saved=None) -> None:
    """Raise :class:`FigureTextError` naming ``name`` and every problem
    :func:`text_problems` finds in the drawn ``figure``."""
    check_figure("figure", figure)
    problems = text_problems(figure, saved)
    if problems:
        raise FigureTextError(f"{name}: text cut or overlapping: " + "; ".join(problems))


def check_shown_size(min_text_px: float | None, natural_width: int, name: str,
                     columns=("phone", "desktop")) -> None:
    """Raise :class:`FigureTextError` when text of ``min_text_px`` (px at natural size)
    in an image ``natural_width`` px wide falls under :data:`TEXT_FLOOR_CSS_PX` as
    shown in any of ``columns`` (keys of :data:`COLUMN_CSS_PX`)."""
    if min_text_px is None:
        return
    if isinstance(min_text_px, bool) or not isinstance(min_text_px, (int, float)) or not min_text_px > 0:
        raise ValueError(f"min_text_px must be a number > 0 or None, got {min_text_px!r}")
    for column in columns:
        shown = shown_text_px(min_text_px, natural_width, COLUMN_CSS_PX[column])
        if shown < TEXT_FLOOR_CSS_PX:
            raise FigureTextError(f"{name}: smallest text {shown:.1f} CSS px on a {column} "
                                  f"({COLUMN_CSS_PX[column]} px column), under {TEXT_FLOOR_CSS_PX:g}")
