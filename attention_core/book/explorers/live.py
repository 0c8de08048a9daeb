"""Every chapter: the live view of an explorer, ipywidgets sliders over the image of its
figure.

Works with ipywidgets 7.7+ (Colab, classic Notebook) and 8.x (JupyterLab 4,
Notebook 7). The two versions display widgets differently (7 through
``_ipython_display_``, 8 through ``_repr_mimebundle_``), so the explorer builds the
widget-view output itself, which both front ends render the same way.
"""

from __future__ import annotations

import ipywidgets as widgets

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def widget_view_mimebundle(widget) -> dict:
    """The output that shows ``widget`` in any Jupyter front end with a widget manager."""
    model_id = getattr(widget, "model_id", None) or widget._model_id  # 8.x, 7.x
    return {WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": model_id}}


def _slider(explorer, name: str, on_change):
    values = explorer.controls[name]
    slider = widgets.SelectionSlider(
        options=[(str(v), v) for v in values], value=explorer.values[name],
        description=explorer.labels[name], continuous_update=False,  # one redraw when it settles
        style={"description_width": "initial"},  # the whole label, never "temperat..."
        layout=widgets.Layout(width="24em", max_width="100%", margin="0 1.5em 0 0"))  # wraps on phones
    slider.observe(lambda change: on_change(name, change["new"]), names="value")
    return slider


def widget_view(explorer):
    """A ``VBox`` of the sliders (wrapping on narrow screens) over the figure's image;
    moving a slider updates the figure in place and replaces the image. The box has
    ``.sliders`` (in the order of the controls) and ``.image``."""
    image = widgets.Image(value=explorer.current_png(), format="png",
                          layout=widgets.Layout(max_width="100%", height="auto"))

    updating = []  # set while dependent sliders take their new ranges

    def moved(name, value):
        if updating:
            return
        image.value = explorer.set(**{name: value})
        updating.append(True)
        try:  # a control whose range depends on this one gets its new range
            for slider, n in zip(sliders, explorer.controls):
                options = explorer.options(n)
                if explorer.dependent(n) and [v for _, v in slider.options] != options:
                    slider.options = [(str(v), v) for v in options]
                    slider.value = explorer.values[n]
        finally:
            updating.clear()

    sliders = [_slider(explorer, name, moved) for name in explorer.controls]
    box = widgets.VBox([widgets.HBox(sliders, layout=widgets.Layout(flex_flow="row wrap")), image])
    box.sliders, box.image = sliders, image
    return box
