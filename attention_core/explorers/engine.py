"""The explorer engine: a figure, the controls that drive it, and its current state.

An explorer is three small things:

* ``compute(**values) -> data``: the maths for one setting of the controls (calls
  ``attention_core``; knows nothing about drawing);
* ``draw(fig) -> update``: a panel from :mod:`attention_core.viz` that draws the fixed
  parts once; ``update(**data)`` changes the artists in place;
* ``controls``: name -> the values it steps through.

Its notebook output carries one of two views:

* in a live kernel (Jupyter, Colab, Binder): the ipywidgets view
  (:mod:`~attention_core.explorers.live`), which renders the one frame it shows;
* when the book's website is built: the static view
  (:mod:`~attention_core.explorers.static`), every frame rendered once and swapped by
  a small player script, when :func:`~attention_core.website.building_website` says
  the kernel builds the website; nothing needs to be set in a reader's kernel.
"""

from __future__ import annotations

import io
from typing import Any, Callable, Mapping, Sequence

from ..website import building_website

Draw = Callable[[Any], Callable[..., None]]
"""``draw(fig) -> update``: draws the fixed parts of a figure, returns ``update(**data)``."""


def png_bytes(fig, small: bool = False, draw: bool = True) -> bytes:
    """Draw ``fig`` on its Agg canvas (unless ``draw=False``: the canvas is current)
    and encode it as PNG. ``small`` quantises to a 256-colour palette (about 3x
    smaller, for frames stored in a page); the live view skips that and compresses
    lightly, to stay fast."""
    from PIL import Image

    if draw:
        fig.canvas.draw()
    image = Image.frombuffer("RGBA", fig.canvas.get_width_height(), fig.canvas.buffer_rgba())
    out = io.BytesIO()
    if small:
        image.convert("RGB").quantize(256).save(out, format="PNG", optimize=True)
    else:
        image.convert("RGB").save(out, format="PNG", compress_level=1)
    return out.getvalue()


def human_label(name: str) -> str:
    """``"tokens_shown"`` -> ``"tokens shown"``: the default label of a control."""
    return name.replace("_", " ")


class Explorer:
    """A figure with one control per entry of ``controls``.

    Args:
        draw: ``draw(fig) -> update``, usually a panel of :mod:`attention_core.viz`.
        compute: ``compute(**values) -> dict`` of keyword arguments for ``update``.
        controls: control name -> the values it steps through (the same list drives
            the live slider and the static frames).
        initial: starting value per control (default: the first of each list).
        labels: control name -> the label a reader sees (default: the name with
            spaces for underscores).
        figsize, dpi: size of the rendered figure.
        alt: what the figure shows, for screen readers; the current values are added.
    """

    def __init__(self, draw: Draw, compute: Callable[..., Mapping[str, Any]],
                 controls: Mapping[str, Sequence[Any]], initial: Mapping[str, Any] | None = None,
                 labels: Mapping[str, str] | None = None, figsize=(8, 3.4), dpi: int = 80,
                 alt: str = "Interactive figure."):
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
        self.labels = {name: (labels or {}).get(name, human_label(name)) for name in self.controls}
        self.compute, self.alt, self.dpi = compute, alt, dpi
        self.figure = _new_figure(figsize, dpi)
        self._update = draw(self.figure)
        self._update(**self.compute(**self.values))
        self.figure.canvas.draw()  # lay out once, at the first frame, then keep it:
        self.figure.set_layout_engine("none")  # every later frame is one plain draw
        self._widget, self._png = None, None

    def set(self, small: bool = False, **values) -> bytes:
        """Move controls to ``values``, update the figure in place, return its PNG."""
        for name, value in values.items():
            if name not in self.controls:
                raise ValueError(f"unknown control {name!r}; controls are {list(self.controls)}")
        self.values.update(values)
        self._update(**self.compute(**self.values))
        png = png_bytes(self.figure, small)
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
        """The live ipywidgets view (ipywidgets 7.7+ and 8), made once."""
        if self._widget is None:
            from .live import widget_view

            self._widget = widget_view(self)
        return self._widget

    def to_html(self) -> str:
        """The static view: every frame, and the player that swaps them."""
        from .static import static_html

        return static_html(self)

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {"text/plain": f"Explorer({', '.join(self.labels.values())})"}
        if building_website():
            bundle["text/html"] = self.to_html()
            return bundle
        from .live import widget_view_mimebundle
        from .static import snapshot_html

        bundle.update(widget_view_mimebundle(self.widget()))
        bundle["text/html"] = snapshot_html(self)  # for viewers without a widget manager
        return bundle


def _new_figure(figsize, dpi):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    return figure
