"""Every chapter: the live view of an explorer, in a kernel (Jupyter, Colab, Binder).

Two outputs, one under the other:

* **the controls**, an ipywidgets view (ipywidgets 7.7+ and 8): a slider for numbers,
  a checkbox for an on/off control, a drop-down for named choices (a slider's readout
  cuts long names short), each showing its current value in full; the same kinds as
  on the website (:func:`~attention_core.book.explorers.static.control_kind`). Its
  ``text/plain`` names the controls and says to run the cell to move them: what a
  viewer without the kernel's widgets shows.
* **the figure**, an ordinary ``display_data`` (``image/png`` and its alt text as
  ``text/plain``) with a ``display_id``, replaced by ``update_display_data`` when a
  control moves. Being no widget, it is saved with the notebook as the reader left
  it, and a reopened notebook shows it, trusted or not, in any front end, whether or
  not the widgets' state was saved (JupyterLab saves none by default).

An update sent from a widget's callback (a comm message, not a cell's execution)
reaches the output by its ``display_id``: JupyterLab 4 and Notebook 7 route it through
the future of the cell that displayed it, classic Notebook through that cell's
callbacks; both keep them until the cell runs again.

The two versions of ipywidgets display widgets differently (7 through
``_ipython_display_``, 8 through ``_repr_mimebundle_``), so the view builds its
widget-view output itself, which both render the same way.
"""

from __future__ import annotations

import base64
import numbers
import uuid

import ipywidgets as widgets
from IPython.display import display, update_display

from .static import check_explorer, control_kind

__all__ = [
    "WIDGET_VIEW", "widget_view_mimebundle", "is_numeric", "FigureOutput", "widget_view", "controls_text",
    "show",
]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def widget_view_mimebundle(widget) -> dict:
    """The output that shows ``widget`` in any Jupyter front end with a widget manager."""
    if not hasattr(widget, "model_id") and not hasattr(widget, "_model_id"):
        raise TypeError(f"widget must be an ipywidgets widget, got {type(widget).__name__}")
    model_id = getattr(widget, "model_id", None) or widget._model_id  # 8.x, 7.x
    return {WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": model_id}}


def is_numeric(values) -> bool:
    """Whether a control's values are all numbers (a slider) rather than names (a drop-down)."""
    return all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in values)


def _options(values) -> list[tuple[str, object]]:
    return [(str(v), v) for v in values]


def _control(explorer, name: str, on_change):
    """The widget of control ``name``: a slider over numbers (its readout fits any
    number of the book), a checkbox for on/off, a drop-down as wide as its longest name
    over other names."""
    values = explorer.controls[name]
    if control_kind(values) == "toggle":
        control = widgets.Checkbox(value=explorer.values[name] == "on", description=explorer.labels[name],
                                   indent=False, layout=widgets.Layout(width="auto", margin="0 1.5em 0 0"))
        control.observe(lambda change: on_change(name, "on" if change["new"] else "off"), names="value")
        return control
    common = dict(options=_options(values), value=explorer.values[name], description=explorer.labels[name],
                  style={"description_width": "initial"})  # the whole label, never "temperat..."
    if is_numeric(values):
        control = widgets.SelectionSlider(
            continuous_update=False,  # one redraw when it settles
            layout=widgets.Layout(width="24em", max_width="100%", margin="0 1.5em 0 0"), **common)
    else:  # a name is shown whole: the drop-down takes the width of the longest (wraps on phones)
        control = widgets.Dropdown(
            layout=widgets.Layout(width="max-content", max_width="100%", margin="0 1.5em 0 0"), **common)
    control.observe(lambda change: on_change(name, change["new"]), names="value")
    return control


class FigureOutput:
    """The figure's own output: shown once with a ``display_id``, replaced on every
    move. ``value`` is the PNG shown now."""

    def __init__(self, explorer):
        check_explorer(explorer)
        self.explorer = explorer
        self.display_id: str | None = None  # set when shown

    @property
    def value(self) -> bytes:
        return self.explorer.current_png()

    def bundle(self) -> tuple[dict, dict]:
        """``(data, metadata)``: the PNG, its alt text, and its size in CSS px (so a
        front end keeps the space while a new frame decodes: nothing jumps)."""
        width, height = self.explorer.layout("wide").size
        data = {"image/png": base64.b64encode(self.value).decode("ascii"),
                "text/plain": self.explorer.describe()}
        return data, {"image/png": {"width": width, "height": height}}

    def show(self) -> None:
        self.display_id = self.display_id or uuid.uuid4().hex
        data, metadata = self.bundle()
        display(data, metadata=metadata, raw=True, display_id=self.display_id)

    def update(self) -> None:
        """Replace every output of this figure (no-op before it is shown)."""
        if self.display_id is None:
            return
        data, metadata = self.bundle()
        update_display(data, metadata=metadata, raw=True, display_id=self.display_id)


def widget_view(explorer):
    """The controls, in a row that wraps on narrow screens. Moving one updates the
    explorer's figure in place and replaces the figure's output. The box has
    ``.controls`` (in the order of the explorer's controls; ``.sliders`` is the same
    list) and ``.image`` (the :class:`FigureOutput`, its ``.value`` the PNG shown)."""
    check_explorer(explorer)
    figure = FigureOutput(explorer)
    updating = []  # set while dependent controls take their new ranges

    def moved(name, value):
        if updating:
            return
        explorer.set(**{name: value})
        updating.append(True)
        try:  # a control whose range depends on this one gets its new range
            for control, n in zip(controls, explorer.controls):
                options = explorer.options(n)
                if explorer.dependent(n) and [v for _, v in control.options] != options:
                    control.options = _options(options)
                    control.value = explorer.values[n]
        finally:
            updating.clear()
        figure.update()

    controls = [_control(explorer, name, moved) for name in explorer.controls]
    box = widgets.HBox(controls, layout=widgets.Layout(flex_flow="row wrap", align_items="center"))
    box.controls = box.sliders = controls
    box.image = figure
    return box


def controls_text(explorer) -> str:
    """What the controls' output says without a widget manager (a saved notebook, a
    viewer): which controls drive the figure below, and how to move them."""
    check_explorer(explorer)
    return (f"Explorer controls: {', '.join(explorer.labels.values())}. "
            "Run the cell to move them; the figure below shows the setting last chosen.")


def show(explorer, view) -> None:
    """Display the live view: the controls' widget, then the figure's own output."""
    check_explorer(explorer)
    display({**widget_view_mimebundle(view), "text/plain": controls_text(explorer)}, raw=True)
    view.image.show()
