"""Every chapter: the explorer engine, a figure, the controls that drive
it, and its current state.

An explorer is three small things:

* ``compute(**values) -> data``: the maths for one setting of the controls (calls
  ``attention_core``; knows nothing about drawing);
* ``draw(fig, layout) -> update``: a panel from :mod:`attention_core.book.viz.panels` that draws
  the fixed parts once, side by side (``layout="wide"``) or stacked for a phone
  (``"narrow"``); ``update(**data)`` changes the artists in place;
* ``controls``: name -> the values it steps through, or a function of the controls
  before it giving those values (a range that depends on another control, like the
  number of key blocks for a block size).

A chapter shows an explorer one way, as the value of its cell; IPython then calls
``Explorer._ipython_display_``, which gives one of two views:

* in a live kernel (Jupyter, Colab, Binder): the live view
  (:mod:`~attention_core.book.explorers.live`), the ipywidgets controls and under them
  the figure as a plain image output that each move replaces, so a saved notebook
  keeps the figure the reader left; it renders only the frame it shows, in the wide
  layout;
* when the book's website is built: the static view
  (:mod:`~attention_core.book.explorers.static`), one ``text/html`` output with every
  frame rendered once in both layouts and swapped by a small player script.

Which of the two is chosen in one place, :func:`attention_core.book.output.view`: the build's
kernels start in the website's mode; nothing needs to be set in a reader's kernel.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Callable  # noqa: UP035 (Sphinx resolves typing.Callable in the Draw alias)

from IPython.display import display

from .. import output
from ..render import (
    FIGSIZE,
    LAYOUT_STYLE,
    check_layout,
    draw_layout,
    layout_figsizes,
    layout_rc,
    png_bytes,
    text_problems,
)
from . import live
from .static import static_html

__all__ = ["check_values", "preferred", "human_label", "Layout", "Explorer"]

Draw = Callable[..., Callable[..., None]]
"""``draw(fig, layout="wide") -> update``: draws the fixed parts of a figure, returns
``update(**data)``."""


def check_values(name: str, values, *, integer: bool = False, minimum: float = 0.0,
                 strict: bool = True) -> list:
    """The values a control steps through, as a list, after checking them: a non-empty
    sequence of finite numbers above ``minimum`` (or at least it, ``strict=False``),
    ints where ``integer``. Raises ``ValueError`` naming the argument and what it got,
    so a bad value fails when the explorer is built, not when a control reaches it."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    values = list(values) if isinstance(values, (Sequence, range)) and not isinstance(values, str) else None
    kind = "int" if integer else "number"
    bound = f"{'>' if strict else '>='} {minimum:g}"
    if not values:
        raise ValueError(f"{name} must be a non-empty sequence of {kind}s {bound}, got {values!r}")
    for v in values:
        number = isinstance(v, int) if integer else isinstance(v, (int, float))
        if isinstance(v, bool) or not number or not math.isfinite(v) or \
                (v <= minimum if strict else v < minimum):
            raise ValueError(f"{name} must hold {kind}s {bound}, got {v!r} in {values}")
    return values


def preferred(values: Sequence, *choices):
    """The first of ``choices`` that is one of ``values``, else the middle value: a
    control's starting value taken from the list it was given."""
    if isinstance(values, str) or not isinstance(values, (Sequence, range)) or len(values) == 0:
        raise ValueError(f"values must be a non-empty sequence, got {values!r}")
    return next((c for c in choices if c in values), values[len(values) // 2])


def human_label(name: str) -> str:
    """``"tokens_shown"`` -> ``"tokens shown"``: the default label of a control."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    return name.replace("_", " ")


class Layout:
    """One layout of an explorer's figure: the figure (drawn under the layout's
    rcParams), its ``update``, and the smallest text drawn on it so far
    (:attr:`min_text_px`, pixels at the image's natural size)."""

    def __init__(self, draw: Draw, name: str, figsize, dpi: int | None = None):
        self.name = name
        self.figure, self._update = draw_layout(draw, name, figsize, dpi)

    @property
    def min_text_px(self) -> float:
        """Smallest font size (px at natural size, ``points * dpi / 72``, tick labels
        included) of any text drawn since the last call of ``reset_text_px``."""
        return self.figure.canvas.text_px

    def reset_text_px(self) -> None:
        self.figure.canvas.text_px = math.inf

    def show(self, data: Mapping[str, Any], draw: bool = True) -> None:
        """Update the artists to ``data`` and draw the canvas."""
        with layout_rc(self.name):  # ticks made while drawing get the layout's sizes
            self._update(**data)
            if draw:
                self.figure.canvas.draw()

    def text_problems(self) -> list[str]:
        """:func:`~attention_core.book.render.text_problems` of the frame drawn now,
        under the layout's rcParams (the tick locators read the tick label size)."""
        with layout_rc(self.name):
            return text_problems(self.figure)

    def freeze(self) -> None:
        """Lay out once, at the frame drawn now, then keep it: every later frame is
        one plain draw, and frames do not jump."""
        self.figure.set_layout_engine("none")

    @property
    def size(self) -> tuple[int, int]:
        """``(width, height)`` of the rendered image in pixels."""
        return tuple(int(v) for v in self.figure.canvas.get_width_height())


class Explorer:
    """A figure with one control per entry of ``controls``.

    Args:
        draw: ``draw(fig, layout="wide") -> update``, usually a panel of
            :mod:`attention_core.book.viz.panels` (a ``draw(fig)`` without ``layout`` draws both
            layouts the same way, at their sizes).
        compute: ``compute(**values) -> dict`` of keyword arguments for ``update``.
        controls: control name -> the values it steps through (the same list drives
            the live slider and the static frames), or a function of controls named
            before it (by parameter name) returning its values.
        initial: starting value per control (default: the first of each list).
        labels: control name -> the label a reader sees (default: the name with
            spaces for underscores).
        figsize: size of the wide figure (inches; the live view and a desktop).
        narrow_figsize: size of the narrow figure (a phone; default: the wide one's
            height doubled at :data:`attention_core.book.render.LAYOUT_STYLE`'s narrow width).
        dpi: resolution of the wide figure (default: that of
            :data:`attention_core.book.render.LAYOUT_STYLE`).
        alt: what the figure shows, for screen readers; the current values are added.
        layout_at: the control values at which each layout is laid out, once (default:
            ``initial``): the state with the longest labels, so that every frame's text
            fits the room the layout left for it.
        chapter: the book's chapter that shows it (its notebook's name): which of its
            frames the PDF edition prints (:data:`~attention_core.book.explorers.strips.STRIPS`;
            ``None``, an explorer outside the book: each control at its ends).
    """

    def __init__(self, draw: Draw, compute: Callable[..., Mapping[str, Any]],
                 controls: Mapping[str, Sequence[Any] | Callable[..., Sequence[Any]]],
                 initial: Mapping[str, Any] | None = None,
                 labels: Mapping[str, str] | None = None, figsize=FIGSIZE,
                 narrow_figsize=None, dpi: int | None = None, alt: str = "Interactive figure.",
                 layout_at: Mapping[str, Any] | None = None, chapter: str | None = None):
        if not callable(draw) or not callable(compute):
            raise TypeError(f"draw and compute must be functions, got {type(draw).__name__} and "
                            f"{type(compute).__name__}")
        if not isinstance(controls, Mapping):
            raise TypeError(f"controls must be a dict of a name to its values, got {type(controls).__name__}")
        if not controls:
            raise ValueError("controls must name at least one control, got none")
        self._specs = {name: spec if callable(spec) else list(spec) for name, spec in controls.items()}
        self.values: dict[str, Any] = {}
        for name in self._specs:
            values = self.options(name)
            if len(values) == 0:
                raise ValueError(f"control {name!r} has no values")
            value = (initial or {}).get(name, values[0])
            if value not in values:
                raise ValueError(f"initial value {name}={value!r} is not one of {values}")
            self.values[name] = value
        for name in initial or {}:
            if name not in self._specs:
                raise ValueError(f"initial value {name}={initial[name]!r} is not one of None")
        self.labels = {name: (labels or {}).get(name, human_label(name)) for name in self._specs}
        self._layout_at = dict(self.values)
        for name, value in (layout_at or {}).items():
            if name not in self._specs or value not in self.options(name, {**self.values, **layout_at}):
                raise ValueError(f"layout_at: {name}={value!r} is not a control's value")
            self._layout_at[name] = value
        self.compute, self.alt, self.draw, self.chapter = compute, alt, draw, chapter
        self.figsizes = layout_figsizes(figsize, narrow_figsize)
        self.dpi = dpi or LAYOUT_STYLE["wide"]["dpi"]
        self._layouts: dict[str, Layout] = {}
        self.layout("wide")  # the live view's figure, drawn at the first frame
        self._widget, self._png = None, None

    # -- controls ------------------------------------------------------------------

    @property
    def controls(self) -> dict[str, list]:
        """Control name -> the values it steps through now (a dependent control's
        values for the current values of the controls it depends on)."""
        return {name: self.options(name) for name in self._specs}

    def dependent(self, name: str) -> bool:
        """Whether the values of control ``name`` depend on other controls."""
        return callable(self._specs[name])

    def options(self, name: str, values: Mapping[str, Any] | None = None) -> list:
        """The values of control ``name`` given the ``values`` of the controls before
        it (default: the current ones)."""
        spec = self._specs[name]
        if not callable(spec):
            return spec
        values = self.values if values is None else values
        params = inspect.signature(spec).parameters
        return list(spec(**{n: values[n] for n in params if n in values}))

    def combinations(self) -> Iterator[tuple[tuple[int, ...], dict[str, Any]]]:
        """Every setting of the controls: ``(indices, values)``, in the order of the
        controls (a dependent control runs over its own range for each setting of the
        ones before it)."""
        names = list(self._specs)

        def walk(k, indices, values):
            if k == len(names):
                yield tuple(indices), dict(values)
                return
            for i, v in enumerate(self.options(names[k], values)):
                yield from walk(k + 1, [*indices, i], {**values, names[k]: v})

        yield from walk(0, [], {})

    def _clamped(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``self.values`` updated with ``values``, with each dependent control kept
        at the same position in its new range (or its last value, if shorter)."""
        new = dict(self.values)
        for name in self._specs:
            if name in values:
                new[name] = values[name]
            elif self.dependent(name):
                before, after = self.options(name), self.options(name, new)
                i = before.index(new[name]) if new[name] in before else 0
                new[name] = after[min(i, len(after) - 1)]
        return new

    # -- drawing -------------------------------------------------------------------

    def layout(self, name: str) -> Layout:
        """The figure of layout ``name`` (``"wide"`` or ``"narrow"``), made on first use
        and laid out at the current values."""
        check_layout(name)
        if name not in self._layouts:
            layout = Layout(self.draw, name, self.figsizes[name], self.dpi if name == "wide" else None)
            layout.show(self.compute(**self._layout_at))  # laid out where labels are longest
            layout.freeze()
            if self._layout_at != self.values:
                layout.show(self.compute(**self.values))
            self._layouts[name] = layout
        return self._layouts[name]

    @property
    def figure(self):
        """The wide figure, the one the live view shows."""
        return self.layout("wide").figure

    def set(self, small: bool = False, **values) -> bytes:
        """Move controls to ``values``, update the wide figure in place, return its PNG."""
        for name in values:
            if name not in self._specs:
                raise ValueError(f"unknown control {name!r}; controls are {list(self._specs)}")
        new = self._clamped(values)
        for name, value in values.items():  # a value off the control would draw a frame no reader sees
            if value not in self.options(name, new):
                raise ValueError(f"{name} must be one of the control's values {self.options(name, new)}, "
                                 f"got {value!r}")
        self.values = new
        self.layout("wide").show(self.compute(**self.values))
        png = png_bytes(self.figure, small, draw=False)
        self._png = None if small else png
        return png

    def current_png(self) -> bytes:
        """The PNG of the figure as it is now, encoded once and reused. Every change
        goes through :meth:`set`, which draws, so the canvas is always current: the
        first frame is the one drawn for the layout."""
        if self._png is None:
            self._png = png_bytes(self.figure, draw=False)
        return self._png

    def describe(self) -> str:
        """Alt text of the current frame: what the figure shows and the values set."""
        state = ", ".join(f"{self.labels[n]} {v}" for n, v in self.values.items())
        return f"{self.alt} Shown: {state}."

    def widget(self):
        """The live view's controls (ipywidgets 7.7+ and 8), made once; its ``.image`` is
        the figure's output (:class:`~attention_core.book.explorers.live.FigureOutput`)."""
        if self._widget is None:
            self._widget = live.widget_view(self)
        return self._widget

    def to_html(self) -> str:
        """The static view: every frame in both layouts, and the player that swaps them."""
        return static_html(self)

    def __repr__(self) -> str:
        return f"Explorer({', '.join(self.labels.values())})"

    def _repr_mimebundle_(self, include=None, exclude=None):
        """One output: on the website the static view (``text/html``; frames whose text is
        cut raise a :class:`~attention_core.book.render.FigureTextError`, named), in a kernel
        the figure as it is now (``image/png`` and its alt text)."""
        return output.view(website=lambda: {"text/plain": repr(self), "text/html": self.to_html()},
                           kernel=lambda: self.widget().image.bundle())

    def _ipython_display_(self):
        """How IPython shows an explorer (a cell's value, or ``display``): the website's
        static view as one output, or in a kernel the controls and, in an output of its
        own, the figure (:func:`~attention_core.book.explorers.live.show`)."""
        output.view(website=lambda: display(self._repr_mimebundle_(), raw=True),
                    kernel=lambda: live.show(self, self.widget()))
