"""Static figures that read well on a desktop and on a phone.

A chapter figure of several panels side by side is drawn for a desktop's content column
(about 730 CSS px); a phone shows it at about 358 px, where its text would shrink to 4-6
px. :func:`figure` draws a figure twice, like an explorer's frames: ``draw(fig,
layout)`` puts the panels side by side (``layout="wide"``, 720 px) or stacked
(``"narrow"``, 525 px shown at 358 px), each under the rcParams of
:data:`attention_core.book.viz.LAYOUT_STYLE`. What a notebook shows:

* in a live kernel (Jupyter, Colab, Binder): the wide figure, as an ordinary PNG;
* when the website is built (:func:`~attention_core.models.site_build.building_website`): a
  ``<picture>`` whose ``<source media="(max-width: 600px)">`` is the narrow rendering
  and whose ``<img>`` is the wide one, with alt text, natural sizes, and per rendering
  ``data-min-text-px`` (the smallest text drawn, px at natural size) and
  ``data-panels-across`` (panels side by side), which the site's tests read. The
  browser fetches only the rendering it shows; ``_ext/explorer_frames.py`` writes the
  PNGs to files.

Every other matplotlib figure a chapter shows (``plt.show()``) gets the same
``text/html`` view with one rendering on the website (:func:`install_website_figures`,
called when :mod:`attention_core.book.viz` is imported), so the site's tests can measure its
text and count its panels too.
"""

from __future__ import annotations

import base64
import html
import inspect
import io
import math
from typing import Any, Callable, Mapping

from ..models.site_build import building_website

NARROW_MEDIA = "(max-width: 600px)"
"""Viewports where the narrow rendering is shown (the site's phone breakpoint)."""

LIVE_PNG_MIME = "image/png"


def recording_canvas(figure):
    """Attach an Agg canvas to ``figure`` that records the smallest text it draws
    (``canvas.text_px``, px at the figure's dpi) and return it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    class TextRecordingCanvas(FigureCanvasAgg):
        text_px = math.inf

        def get_renderer(self, *args, **kwargs):
            renderer = super().get_renderer(*args, **kwargs)
            if not getattr(renderer, "_records_text", False):
                draw_text, canvas = renderer.draw_text, self

                def recording_draw_text(gc, x, y, s, prop, *a, **k):
                    if str(s).strip():
                        canvas.text_px = min(canvas.text_px,
                                             prop.get_size_in_points() * canvas.figure.dpi / 72)
                    return draw_text(gc, x, y, s, prop, *a, **k)

                renderer.draw_text, renderer._records_text = recording_draw_text, True
            return renderer

    return TextRecordingCanvas(figure)


def panels_across(figure) -> int:
    """The largest number of panels (visible axes, colorbars not counted) side by side
    in one row of ``figure``."""
    boxes = []
    for ax in figure.get_axes():
        if not ax.get_visible() or getattr(ax, "_colorbar", None) is not None:
            continue
        if ax.get_label() == "<colorbar>":
            continue
        p = ax.get_position()
        boxes.append((p.x0, p.x1, p.y0, p.y1))
    best = 0
    for _, _, y0, y1 in boxes:
        row = sorted((a, b) for a, b, c, d in boxes if min(y1, d) - max(y0, c) > 0.25 * min(y1 - y0, d - c))
        count, end = 0, -math.inf
        for a, b in row:  # greedy: disjoint x-intervals in this row
            if a >= end - 1e-3:
                count, end = count + 1, b
        best = max(best, count)
    return best


def render(figure, small: bool = True, tight: bool = False) -> dict[str, Any]:
    """Draw ``figure`` to PNG, recording its smallest text. Returns ``{"png", "width",
    "height", "min_text_px", "panels_across"}``; ``small`` quantises to 256 colours (for
    the website), ``tight`` crops to the drawn content (as Jupyter's inline backend
    does). The figure keeps its own canvas."""
    from PIL import Image

    old = figure.canvas
    canvas = recording_canvas(figure)
    try:
        raw = io.BytesIO()
        figure.savefig(raw, format="png", dpi=figure.dpi, bbox_inches="tight" if tight else None,
                       facecolor="white")
        text_px = canvas.text_px
    finally:
        figure.set_canvas(old)
    image = Image.open(io.BytesIO(raw.getvalue()))
    if small:
        out = io.BytesIO()
        image.convert("RGB").quantize(256).save(out, format="PNG", optimize=True)
        png = out.getvalue()
    else:
        png = raw.getvalue()
    return {"png": png, "width": image.size[0], "height": image.size[1],
            "min_text_px": round(text_px, 2) if math.isfinite(text_px) else None,
            "panels_across": panels_across(figure)}


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def _attrs(rendering: Mapping[str, Any], layout: str) -> str:
    text = "" if rendering["min_text_px"] is None else f' data-min-text-px="{rendering["min_text_px"]}"'
    return (f'width="{rendering["width"]}" height="{rendering["height"]}" data-layout="{layout}"'
            f'{text} data-panels-across="{rendering["panels_across"]}"')


def picture_html(renderings: Mapping[str, Mapping[str, Any]], alt: str) -> str:
    """The website's view: a ``<picture>`` with the narrow rendering (if any) for
    phones and the wide one for everything else."""
    wide = renderings["wide"]
    source = ""
    if "narrow" in renderings:
        narrow = renderings["narrow"]
        source = (f'<source media="{NARROW_MEDIA}" srcset="{_data_uri(narrow["png"])}" '
                  f'{_attrs(narrow, "narrow")}>')
    return (f'<div class="ac-figure"><picture>{source}'
            f'<img src="{_data_uri(wide["png"])}" {_attrs(wide, "wide")} loading="lazy" '
            f'style="max-width:100%;height:auto" alt="{html.escape(alt)}"></picture></div>')


def call_draw(draw: Callable, figure, layout: str):
    try:
        params = inspect.signature(draw).parameters
    except (TypeError, ValueError):
        params = {}
    takes_layout = "layout" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    return draw(figure, layout=layout) if takes_layout else draw(figure)


class StaticFigure:
    """A figure drawn in a wide and a narrow layout; see :func:`figure`."""

    def __init__(self, draw: Callable, figsize=(7.2, 3.4), narrow_figsize=None,
                 alt: str = "Figure."):
        from .viz import LAYOUT_STYLE

        if not callable(draw):
            raise TypeError(f"draw must be callable, got {type(draw).__name__}")
        for name, size in (("figsize", figsize), ("narrow_figsize", narrow_figsize)):
            if size is not None and (len(size) != 2 or min(size) <= 0):
                raise ValueError(f"{name} must be (width, height) in inches, both > 0, got {size!r}")
        self.draw, self.alt = draw, alt
        self.figsizes = {"wide": tuple(figsize),
                         "narrow": tuple(narrow_figsize or (LAYOUT_STYLE["narrow"]["width"], 2 * figsize[1]))}
        self._figures: dict[str, Any] = {}

    def layout(self, name: str):
        """The matplotlib ``Figure`` of layout ``name``, drawn on first use under the
        layout's dpi and rcParams."""
        import matplotlib
        from matplotlib.figure import Figure

        from .viz import LAYOUT_STYLE, check_layout

        check_layout(name)
        if name not in self._figures:
            style = LAYOUT_STYLE[name]
            with matplotlib.rc_context(style["rc"]):
                fig = Figure(figsize=self.figsizes[name], dpi=style["dpi"], layout="constrained")
                recording_canvas(fig)
                call_draw(self.draw, fig, name)
                fig.canvas.draw()  # ticks and layout made under the layout's rcParams
            self._figures[name] = fig
        return self._figures[name]

    def render(self, name: str, small: bool = True) -> dict[str, Any]:
        """PNG, size, smallest text and panels across of layout ``name`` (see :func:`render`)."""
        import matplotlib

        from .viz import LAYOUT_STYLE

        with matplotlib.rc_context(LAYOUT_STYLE[name]["rc"]):
            return render(self.layout(name), small=small)

    def to_html(self) -> str:
        """The website's view: both renderings in a ``<picture>``."""
        return picture_html({name: self.render(name) for name in ("wide", "narrow")}, self.alt)

    def show(self) -> None:
        """Display the figure (as ``plt.show()`` does for a pyplot figure)."""
        from IPython.display import display

        display(self)

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {"text/plain": f"Figure: {self.alt}"}
        if building_website():
            bundle["text/html"] = self.to_html()
        else:
            bundle[LIVE_PNG_MIME] = self.render("wide", small=False)["png"]
        return bundle


def figure(draw: Callable, figsize=(7.2, 3.4), narrow_figsize=None, alt: str = "Figure.") -> StaticFigure:
    """A static figure with a desktop (wide) and a phone (narrow) rendering.

    Args:
        draw: ``draw(fig, layout)`` draws onto the empty matplotlib ``Figure`` ``fig``
            (``fig.subplots(...)``, seaborn with ``ax=``), panels side by side for
            ``layout="wide"`` and stacked for ``"narrow"``; a ``draw(fig)`` without
            ``layout`` draws the same thing at both sizes. Its return value is ignored.
        figsize: size of the wide figure in inches (7.2 wide: 720 px at 100 dpi).
        narrow_figsize: size of the narrow figure (3.5 wide: 525 px at 150 dpi;
            default: twice the wide height).
        alt: what the figure shows, for screen readers.

    Show it with ``.show()`` or as a cell's last expression.
    """
    return StaticFigure(draw, figsize, narrow_figsize, alt)


def figure_alt(fig) -> str:
    """Alt text for a pyplot figure: its titles, or its axis labels."""
    parts = []
    if getattr(fig, "_suptitle", None) is not None and fig._suptitle.get_text():
        parts.append(fig._suptitle.get_text())
    for ax in fig.get_axes():
        text = ax.get_title() or " against ".join(t for t in (ax.get_ylabel(), ax.get_xlabel()) if t)
        if text and text not in parts:
            parts.append(text)
    return ("Figure: " + "; ".join(parts) + ".") if parts else "Figure."


def plain_figure_html(fig) -> str:
    """The website's view of a pyplot figure: one rendering, cropped like Jupyter's,
    with its smallest text and panels across recorded."""
    return picture_html({"wide": render(fig, small=True, tight=True)}, figure_alt(fig))


def install_website_figures() -> bool:
    """When the website is built in an IPython kernel, give every matplotlib figure a
    ``text/html`` view (:func:`plain_figure_html`); returns whether it did."""
    if not building_website():
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    # Load the backend now: Jupyter's inline backend, once loaded, clears every display
    # formatter of Figure and registers its own (image/png); ours must come after.
    getattr(plt, "_get_backend_mod", lambda: None)()
    shell.display_formatter.formatters["text/html"].for_type(Figure, plain_figure_html)
    return True
