"""Every chapter: static figures that read well on a desktop and on a phone.

A chapter figure of several panels side by side is drawn for a desktop's content column
(676 CSS px, :data:`~attention_core.book.render.COLUMN_CSS_PX`); a phone shows it in its
343 px column, where its text would shrink to 4-6 px. :func:`figure` draws a figure
twice, like an explorer's frames: ``draw(fig, layout)`` puts the panels side by side
(``layout="wide"``, 720 px) or stacked (``"narrow"``, 525 px shown at the phone's
343 px), each under the rcParams of :data:`attention_core.book.render.LAYOUT_STYLE`.
What a notebook shows:

* in a live kernel (Jupyter, Colab, Binder): the wide figure, as an ordinary PNG;
* when the website is built (:func:`attention_core.book.output.view`): a
  ``<picture>`` whose ``<source media="(max-width: 600px)">`` is the narrow rendering
  and whose ``<img>`` is the wide one, with alt text, natural sizes, and per rendering
  ``data-min-text-px`` (the smallest text drawn, px at natural size) and
  ``data-panels-across`` (panels side by side), which the site's tests read, and
  ``data-print-src``, the wide rendering's print copy
  (:data:`~attention_core.book.render.PRINT_SCALE`), which only the PDF edition loads. The
  browser fetches only the rendering it shows; ``_ext/explorer_frames.py`` writes the
  PNGs to files.

Every other matplotlib figure a chapter shows (``plt.show()``) gets the same
``text/html`` view with one rendering on the website (:func:`install_website_figures`,
called when :mod:`attention_core.book.viz` is imported), so the site's tests can measure its
text and count its panels too.
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

import matplotlib.pyplot as plt
from IPython import get_ipython
from IPython.display import display
from matplotlib.figure import Figure
from matplotlib.text import Text

from .. import output
from ..render import (
    COLUMN_CSS_PX,
    FIGSIZE,
    LAYOUT_STYLE,
    LAYOUTS,
    TEXT_FLOOR_CSS_PX,
    FigureTextError,
    check_figure,
    check_layout,
    check_shown_size,
    data_uri,
    draw_layout,
    layout_figsizes,
    layout_rc,
    print_png,
    save_png,
    shown_text_px,
    text_problems,
    tight_bbox,
)

__all__ = [
    "NARROW_MEDIA", "panels_across", "rendering", "checked_rendering", "picture_html", "StaticFigure",
    "figure", "figure_alt", "narrow_rendering", "plain_figure_renderings", "plain_figure_html",
    "install_website_figures",
]

NARROW_MEDIA = "(max-width: 600px)"
"""Viewports where the narrow rendering is shown (the site's phone breakpoint)."""

LIVE_PNG_MIME = "image/png"


def panels_across(figure: Figure) -> int:
    """The largest number of panels (visible axes, colorbars not counted) side by side
    in one row of ``figure``."""
    check_figure("figure", figure)
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


def rendering(figure: Figure, small: bool = True, tight: bool = False) -> dict[str, Any]:
    """One rendering of ``figure``: ``{"png", "width", "height", "min_text_px",
    "panels_across"}`` (see :func:`~attention_core.book.render.save_png`)."""
    check_figure("figure", figure)
    return {**save_png(figure, small, tight), "panels_across": panels_across(figure)}


def checked_rendering(figure: Figure, name: str, column: str, tight: bool = False) -> dict[str, Any]:
    """:func:`rendering` of ``figure`` (``small``), after checking it: no text cut at
    the saved image's edge or over another panel
    (:func:`~attention_core.book.render.text_problems`), and its smallest text at least
    :data:`~attention_core.book.render.TEXT_FLOOR_CSS_PX` where it is shown (``column``,
    ``"phone"`` or ``"desktop"``). Raises
    :class:`~attention_core.book.render.FigureTextError` naming ``name``."""
    check_figure("figure", figure)
    out = rendering(figure, small=True, tight=tight)
    figure.canvas.draw()  # the layout as saved, on the figure's own canvas
    problems = text_problems(figure, tight_bbox(figure) if tight else None)
    if problems:
        raise FigureTextError(f"{name}: " + "; ".join(problems))
    check_shown_size(out["min_text_px"], out["width"], name, (column,))
    return out


def _attrs(rendering: Mapping[str, Any], layout: str) -> str:
    text = "" if rendering["min_text_px"] is None else f' data-min-text-px="{rendering["min_text_px"]}"'
    return (f'width="{rendering["width"]}" height="{rendering["height"]}" data-layout="{layout}"'
            f'{text} data-panels-across="{rendering["panels_across"]}"')


def picture_html(renderings: Mapping[str, Mapping[str, Any]], alt: str,
                 print_copy: bytes | None = None) -> str:
    """The website's view: a ``<picture>`` with the narrow rendering (if any) for
    phones and the wide one for everything else; ``print_copy``, the wide one's print
    copy (:func:`~attention_core.book.render.print_png`), goes in ``data-print-src``,
    which no browser loads on its own."""
    if not isinstance(renderings, Mapping) or not all(isinstance(r, Mapping) for r in renderings.values()):
        raise TypeError(f"renderings must map a layout to a rendering (save_png), "
                        f"got {type(renderings).__name__}")
    wide = renderings["wide"]
    printed = "" if print_copy is None else f' data-print-src="{data_uri(print_copy)}"'
    source = ""
    if "narrow" in renderings:
        narrow = renderings["narrow"]
        source = (f'<source media="{NARROW_MEDIA}" srcset="{data_uri(narrow["png"])}" '
                  f'{_attrs(narrow, "narrow")}>')
    return (f'<div class="ac-figure"><picture>{source}'
            f'<img src="{data_uri(wide["png"])}" {_attrs(wide, "wide")}{printed} loading="lazy" '
            f'style="max-width:100%;height:auto" alt="{html.escape(alt)}"></picture></div>')


class StaticFigure:
    """A figure drawn in a wide and a narrow layout; see :func:`figure`."""

    def __init__(self, draw: Callable, figsize=FIGSIZE, narrow_figsize=None, alt: str = "Figure."):
        if not callable(draw):
            raise TypeError(f"draw must be callable, got {type(draw).__name__}")
        self.draw, self.alt = draw, alt
        self.figsizes = layout_figsizes(figsize, narrow_figsize)
        self._figures: dict[str, Figure] = {}

    def layout(self, name: str) -> Figure:
        """The matplotlib ``Figure`` of layout ``name``, drawn on first use under the
        layout's dpi and rcParams."""
        check_layout(name)
        if name not in self._figures:
            fig, _ = draw_layout(self.draw, name, self.figsizes[name])
            engine = fig.get_layout_engine()
            if engine is not None and hasattr(engine, "set") and "w_pad" in engine.get():
                # constrained layout leaves 3 pt at the edges and can miss by a pixel or two
                # (a colour bar beside one panel): 5 pt keeps every label inside the image
                engine.set(w_pad=5 / 72, h_pad=5 / 72)
            with layout_rc(name):
                fig.canvas.draw()  # ticks and layout made under the layout's rcParams
            self._figures[name] = fig
        return self._figures[name]

    def render(self, name: str, small: bool = True) -> dict[str, Any]:
        """PNG, size, smallest text and panels across of layout ``name`` (see :func:`rendering`)."""
        with layout_rc(name):
            return rendering(self.layout(name), small=small)

    def checked_render(self, name: str) -> dict[str, Any]:
        """:meth:`render` of layout ``name``, checked where it is shown
        (:func:`checked_rendering`: the wide layout on a desktop, the narrow on a phone)."""
        column = "phone" if name == "narrow" else "desktop"
        with layout_rc(name):
            return checked_rendering(self.layout(name), f"figure {self.alt!r}, {name} layout", column)

    def to_html(self) -> str:
        """The website's view: both renderings in a ``<picture>``, each checked
        (:meth:`checked_render`; a :class:`~attention_core.book.render.FigureTextError`
        names the figure and what is wrong), and the wide one's print copy."""
        renderings = {name: self.checked_render(name) for name in LAYOUTS}
        with layout_rc("wide"):
            printed = print_png(self.layout("wide"))
        return picture_html(renderings, self.alt, printed)

    def show(self) -> None:
        """Display the figure (as ``plt.show()`` does for a pyplot figure)."""
        display(self)

    def _repr_mimebundle_(self, include=None, exclude=None):
        shown = output.view(website=lambda: {"text/html": self.to_html()},
                            kernel=lambda: {LIVE_PNG_MIME: self.render("wide", small=False)["png"]})
        return {"text/plain": f"Figure: {self.alt}", **shown}


def figure(draw: Callable, figsize=FIGSIZE, narrow_figsize=None, alt: str = "Figure.") -> StaticFigure:
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


def figure_alt(fig: Figure) -> str:
    """Alt text for a pyplot figure: its titles, or its axis labels."""
    check_figure("fig", fig)
    parts = []
    if getattr(fig, "_suptitle", None) is not None and fig._suptitle.get_text():
        parts.append(fig._suptitle.get_text())
    for ax in fig.get_axes():
        text = ax.get_title() or " against ".join(t for t in (ax.get_ylabel(), ax.get_xlabel()) if t)
        if text and text not in parts:
            parts.append(text)
    return ("Figure: " + "; ".join(parts) + ".") if parts else "Figure."


def _phone_px(rendering: Mapping[str, Any]) -> float:
    """The smallest text of ``rendering`` in CSS px on a phone."""
    return shown_text_px(rendering["min_text_px"], rendering["width"], COLUMN_CSS_PX["phone"])


def _headings(fig: Figure) -> list[Text]:
    """The texts of ``fig`` that run across it: its suptitle, and each axes' titles and
    x label."""
    texts = [fig._suptitle] if getattr(fig, "_suptitle", None) is not None else []
    for ax in fig.get_axes():
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label]
    return [t for t in texts if t.get_visible() and " " in t.get_text()]


def _balanced_lines(words: str, lines: int) -> str:
    """``words`` broken into at most ``lines`` lines, the longest as short as can be."""
    for width in range(math.ceil(len(words) / lines), len(words) + 1):
        wrapped = textwrap.wrap(words, width)
        if len(wrapped) <= lines:
            return "\n".join(wrapped)
    return words


def _wrap_headings(fig: Figure, originals: dict[int, tuple[Text, str]]) -> None:
    """Break each heading (:func:`_headings`) wider than ``fig`` into lines that fit it,
    from its text as it was (kept in ``originals``, to be put back): a phone rendering
    is narrower than the title a wide figure had room for, and a title running past the
    figure would widen the cropped image and shrink all its text on a phone. Lines are
    balanced (no last word alone on a line) where they fit."""
    renderer = fig.canvas.get_renderer()
    room = 0.92 * fig.bbox.width
    for text in _headings(fig):
        original = originals.setdefault(id(text), (text, text.get_text()))[1]
        text.set_text(original)
        width = text.get_window_extent(renderer).width
        if width <= room:
            continue
        words, fewest = " ".join(original.split()), math.ceil(width / room)
        for lines in range(fewest, fewest + 4):  # the fewest lines of even length that fit
            text.set_text(_balanced_lines(words, lines))
            if text.get_window_extent(renderer).width <= room:
                break


def narrow_rendering(fig: Figure, name: str, wide: Mapping[str, Any], tries: int = 3) -> dict[str, Any]:
    """A phone rendering of a pyplot figure drawn once: the same figure made narrower
    (same height, same text in points, at the narrow layout's dpi, titles too wide for
    it broken into lines, laid out again by constrained layout), so that its text is at
    least :data:`~attention_core.book.render.TEXT_FLOOR_CSS_PX` in a phone's column;
    checked like the wide one. The figure is left as it was."""
    if not isinstance(wide, Mapping) or "min_text_px" not in wide:
        raise TypeError(f"wide must be the wide rendering (rendering(fig)), got {type(wide).__name__}")
    check_figure("fig", fig)
    size, dpi, engine = fig.get_size_inches().copy(), fig.dpi, fig.get_layout_engine()
    width_in, originals = size[0], {}
    try:
        if engine is None:
            fig.set_layout_engine("constrained")
        fig.set_dpi(LAYOUT_STYLE["narrow"]["dpi"])
        shown = _phone_px(wide)
        for _ in range(tries):
            width_in *= min(0.97, shown / (TEXT_FLOOR_CSS_PX * 1.03))
            fig.set_size_inches(width_in, size[1])
            _wrap_headings(fig, originals)
            shown = _phone_px(rendering(fig, small=True, tight=True))
            if shown >= TEXT_FLOOR_CSS_PX:
                break
        return checked_rendering(fig, f"{name}, phone rendering", "phone", tight=True)
    finally:
        for text, original in originals.values():
            text.set_text(original)
        fig.set_dpi(dpi)
        fig.set_size_inches(*size)
        fig.set_layout_engine(engine)


def plain_figure_renderings(fig: Figure) -> dict[str, dict[str, Any]]:
    """The renderings of a pyplot figure on the website, each checked
    (:func:`checked_rendering`): ``"wide"``, cropped like Jupyter's, and where its text
    would fall under :data:`~attention_core.book.render.TEXT_FLOOR_CSS_PX` on a phone,
    ``"narrow"`` (:func:`narrow_rendering`)."""
    check_figure("fig", fig)
    name = f"figure {figure_alt(fig)!r}"
    wide = checked_rendering(fig, name, "desktop", tight=True)
    if wide["min_text_px"] is None or _phone_px(wide) >= TEXT_FLOOR_CSS_PX:
        return {"wide": wide}
    return {"wide": wide, "narrow": narrow_rendering(fig, name, wide)}


def plain_figure_html(fig: Figure) -> str:
    """The website's view of a pyplot figure (:func:`plain_figure_renderings`), with
    its smallest text and panels across recorded; a figure whose text is cut, overlaps
    another panel or is too small raises a :class:`~attention_core.book.render.FigureTextError`
    naming it, which fails the build (``_ext/website_kernel.py``); with the wide rendering's
    print copy."""
    check_figure("fig", fig)
    return picture_html(plain_figure_renderings(fig), figure_alt(fig), print_png(fig, tight=True))


def install_website_figures() -> bool:
    """In an IPython kernel, give every matplotlib figure a ``text/html`` view that the
    website shows (:func:`plain_figure_html`) and a reader's kernel does not (it keeps the
    inline backend's PNG); returns whether there was a kernel to install it in."""
    shell = get_ipython()
    if shell is None:
        return False
    # Load the backend now: Jupyter's inline backend, once loaded, clears every display
    # formatter of Figure and registers its own (image/png); ours must come after.
    getattr(plt, "_get_backend_mod", lambda: None)()
    shell.display_formatter.formatters["text/html"].for_type(Figure, _website_figure_html)
    return True


def _website_figure_html(fig: Figure) -> str | None:
    """A pyplot figure's ``text/html``: on the website :func:`plain_figure_html`; in a
    kernel none (IPython then shows the PNG alone)."""
    return output.view(website=lambda: plain_figure_html(fig), kernel=lambda: None)
