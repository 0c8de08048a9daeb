"""Explorers in a live kernel and on the website: moving a control changes the figure's
data in place and replaces the figure's own output (so a saved notebook keeps the
figure the reader left); named choices are drop-downs that show a name whole; a live
kernel renders only the frame it shows; the website build gets every frame and the
player, and nothing else."""

import base64
import json
import re
from importlib.resources import files

import ipywidgets as widgets
import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from IPython.utils.capture import capture_output

from attention_core.book import explorers
from attention_core.book.explorers import (
    Explorer,
    basics_explorer,
    engine,
    kv_memory_explorer,
    kv_sharing_explorer,
    positional_explorer,
    scaling_explorer,
    sparse_mask_explorer,
    tiling_explorer,
)
from attention_core.models.toy_tasks import tokenize

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def explorer():
    return basics_explorer(tokenize("the cat sat on the mat because it was tired"))


@pytest.fixture
def kernel(monkeypatch):
    """An IPython shell, so that ``display`` publishes outputs (captured by
    ``capture_output``) as in a reader's kernel."""
    yield InteractiveShell.instance()
    InteractiveShell.clear_instance()  # the rest of the session runs with no kernel, as pytest does


def shown(explorer) -> list:
    """The outputs a cell ending in ``explorer`` gives (IPython's display of its value)."""
    with capture_output() as captured:
        display(explorer)
    return captured.outputs


def png(output) -> bytes:
    return base64.b64decode(output.data["image/png"])


def heatmap_data(explorer):
    return np.array(explorer.figure.axes[0].images[0].get_array())


def test_moving_a_slider_updates_the_same_figure(explorer):
    widget = explorer.widget()
    figure, image_artist = explorer.figure, explorer.figure.axes[0].images[0]
    temperature, length = widget.controls
    before_png, before_data = widget.image.value, heatmap_data(explorer)
    temperature.value = 0.25  # as a reader dragging the slider would
    assert explorer.figure is figure and explorer.figure.axes[0].images[0] is image_artist
    after = heatmap_data(explorer)
    assert after.shape == before_data.shape and not np.allclose(after, before_data)
    assert after.max() > before_data.max(), "lower temperature sharpens the rows"
    assert widget.image.value != before_png
    length.value = 4
    assert heatmap_data(explorer).shape == (4, 4)
    np.testing.assert_allclose(heatmap_data(explorer).sum(-1), 1.0, rtol=1e-5)
    temperature.value, length.value = 1.0, 10


def test_sliders_show_human_labels_in_full(explorer):
    controls = explorer.widget().controls
    assert [c.description for c in controls] == ["temperature τ", "tokens shown"]
    assert all(c.style.description_width == "initial" for c in controls)  # never cut to "temperat..."


def test_a_live_kernel_shows_the_controls_and_the_figure_as_its_own_output(kernel, monkeypatch):
    encoded = []
    real = engine.png_bytes
    monkeypatch.setattr(engine, "png_bytes", lambda fig, small=False, draw=True:
                        encoded.append((small, draw)) or real(fig, small, draw))
    live = basics_explorer(tokenize("the cat sat on the mat"))
    controls, figure = shown(live)
    # one frame, from the canvas already drawn for the layout; none for the website
    assert encoded == [(False, False)]
    # the controls: a widget view, and without a widget manager a sentence saying what they are
    assert set(controls.data) == {WIDGET_VIEW, "text/plain"}
    assert controls.data[WIDGET_VIEW]["model_id"] == live.widget().model_id
    assert controls.data["text/plain"].startswith("Explorer controls: temperature τ, tokens shown. "
                                                  "Run the cell to move them")
    # the figure: a plain image (no widget: a saved notebook keeps it), its alt text, its size
    assert set(figure.data) == {"image/png", "text/plain"}
    assert png(figure) == live.current_png() and png(figure).startswith(b"\x89PNG")
    assert figure.data["text/plain"] == live.describe()
    assert "temperature τ 1.0, tokens shown 6" in figure.data["text/plain"]
    assert figure.metadata == {"image/png": {"width": 720, "height": 340}}
    assert figure.transient["display_id"] and not figure.update
    assert "Explorer(" not in controls.data["text/plain"] + figure.data["text/plain"]


def test_moving_a_control_replaces_the_figure_output(kernel):
    live = basics_explorer(tokenize("the cat sat on the mat"))
    with capture_output() as captured:
        display(live)
        first = live.current_png()
        live.widget().controls[0].value = 0.25  # as a reader dragging the slider
        live.widget().controls[1].value = 3
    _, figure, *updates = captured.outputs
    assert len(updates) == 2, "one update per move, nothing else"
    for update in updates:  # the same output, replaced (update_display_data), not a new one
        assert update.update and update.transient == figure.transient
        assert set(update.data) == {"image/png", "text/plain"} and update.metadata == figure.metadata
    assert png(updates[0]) != first and png(updates[1]) != png(updates[0])
    assert png(updates[-1]) == live.current_png() == live.widget().image.value
    assert "temperature τ 0.25, tokens shown 3" in updates[-1].data["text/plain"]


def test_a_dependent_control_moves_once(kernel):
    live = tiling_explorer()
    with capture_output() as captured:
        display(live)
        seq_len, block, done = live.widget().controls
        block.value = 8  # key blocks read: 1 .. 2 now
    updates = captured.outputs[2:]
    assert len(updates) == 1 and list(done.options) == [("1", 1), ("2", 2)] and done.value == 2
    assert png(updates[0]) == live.current_png()


def test_an_explorer_not_yet_shown_sends_nothing(kernel, explorer):
    with capture_output() as captured:
        explorer.widget().controls[0].value = 2.0
        explorer.widget().controls[0].value = 1.0
    assert captured.outputs == [] and captured.stdout == ""


@pytest.mark.parametrize("make", [kv_memory_explorer, sparse_mask_explorer, scaling_explorer],
                         ids=["ch12", "ch8", "ch2"])
def test_named_choices_are_dropdowns_that_show_the_whole_name(make):
    """A slider's readout cuts a long name ("GQA-8 + window + sinks") in JupyterLab; a
    drop-down as wide as its longest name shows it whole, in ipywidgets 7 and 8. An
    on/off control (chapter 2's scaling) is a checkbox."""
    live = make()
    for name, control in zip(live.controls, live.widget().controls):
        values = live.controls[name]
        if set(values) == {"on", "off"}:  # on/off: a checkbox, as on the website
            assert isinstance(control, widgets.Checkbox), name
            assert control.value == (live.values[name] == "on") and control.description == live.labels[name]
            control.value = not control.value
            assert live.values[name] == ("on" if control.value else "off"), "the explorer follows"
        elif all(isinstance(v, str) for v in values):
            assert isinstance(control, widgets.Dropdown), name
            assert [label for label, _ in control.options] == values
            assert control.layout.width == "max-content" and control.layout.max_width == "100%"
        else:
            assert isinstance(control, widgets.SelectionSlider), name


@pytest.mark.parametrize("make", [lambda: basics_explorer(tokenize("the cat sat on the mat")),
                                  scaling_explorer, positional_explorer, kv_sharing_explorer,
                                  kv_memory_explorer, tiling_explorer, sparse_mask_explorer])
def test_slider_readouts_fit(make):
    """Numbers stay sliders; their longest readout ("10000.0", "262144") fits the
    readout's box (a tiny width to half an input's, about 10 characters at 13 px)."""
    live = make()
    for control in live.widget().controls:
        if isinstance(control, widgets.SelectionSlider):
            assert control.readout and max(len(label) for label, _ in control.options) <= 8, control.options


def test_the_kernel_repr_is_the_figure(kernel, explorer):
    data, metadata = explorer._repr_mimebundle_()
    assert base64.b64decode(data["image/png"]) == explorer.current_png()
    assert data["text/plain"] == explorer.describe()
    assert repr(explorer) == "Explorer(temperature τ, tokens shown)"


def test_the_website_build_gets_every_frame_and_the_player(website, explorer, kernel):
    outputs = shown(explorer)
    assert len(outputs) == 1, "the website gets the static explorer and no image or widget output"
    bundle = outputs[0].data
    assert set(bundle) == {"text/html", "text/plain"}, "the website has no widget manager"
    assert bundle["text/plain"] == "Explorer(temperature τ, tokens shown)"
    page = bundle["text/html"]
    data = json.loads(re.search(r'class="ac-frames">(.*?)</script>', page).group(1))
    assert set(data["layouts"]) == {"wide", "narrow"}  # a desktop's and a phone's
    for layout in data["layouts"].values():
        assert len(layout["index"]) == 5 * 9  # every combination of the two controls
        assert len(layout["images"]) == len(set(layout["images"])) <= len(layout["index"])
        assert all(i.startswith("data:image/png;base64,") for i in layout["images"])
    assert data["names"] == ["temperature τ", "tokens shown"]
    player = files("attention_core.book.explorers").joinpath("player.js").read_text()
    assert player.strip() in page  # shipped as package data, inlined once per explorer
    for label in data["names"]:
        assert f"<span>{label}</span>" in page
    assert 'aria-valuetext="1.0"' in page  # the value shown, not the slider position


def test_bad_controls_are_rejected():
    draw, compute = (lambda fig: (lambda: None)), (lambda **v: {})
    with pytest.raises(ValueError, match="controls must name at least one control"):
        Explorer(draw, compute, {})
    with pytest.raises(ValueError, match="control 'x' has no values"):
        Explorer(draw, compute, {"x": []})
    with pytest.raises(ValueError, match=r"initial value x=5 is not one of \[1, 2\]"):
        Explorer(draw, compute, {"x": [1, 2]}, initial={"x": 5})


def test_unknown_control_is_named(explorer):
    with pytest.raises(ValueError, match="unknown control 'temp'"):
        explorer.set(temp=1.0)


def test_a_value_off_the_control_is_refused(explorer):
    """Issue #44: set() takes only the values the control offers (the website has no others)."""
    before = dict(explorer.values)
    with pytest.raises(ValueError, match=r"temperature must be one of the control's values .*got 99"):
        explorer.set(temperature=99)
    assert explorer.values == before


# ------------------------------------------------------------ control values, checked when built

BAD_CONTROL_VALUES = [
    (lambda: explorers.basics_explorer(["a", "b", "c"], temperatures=(0.0, 1.0)), "temperatures"),
    (lambda: explorers.basics_explorer(["a", "b", "c"], temperatures=()), "temperatures"),
    (lambda: explorers.basics_explorer(["a"]), "tokens"),
    (lambda: explorers.scaling_explorer(d_ks=(4, 0)), "d_ks"),
    (lambda: explorers.scaling_explorer(d_ks=(4, 2.5)), "d_ks"),
    (lambda: explorers.tiling_explorer(seq_lens=(8, 16), blocks=(0, 2)), "blocks"),
    (lambda: explorers.tiling_explorer(seq_lens=(8, 16), blocks=(2, 16)), "blocks"),
    (lambda: explorers.block_explorer(depths=(2, -1)), "depths"),
    (lambda: explorers.positional_explorer(d_models=(16, 33)), "d_models"),
    (lambda: explorers.positional_explorer(bases=(0.5,)), "bases"),
    (lambda: explorers.sparse_mask_explorer(num_globals=(-1,)), "num_globals"),
    (lambda: explorers.kv_sharing_explorer(contexts=("long",)), "contexts"),
]


@pytest.mark.parametrize("build, argument", BAD_CONTROL_VALUES)
def test_an_explorer_refuses_bad_control_values_when_built(build, argument):
    with pytest.raises(ValueError, match=argument):
        build()


def test_an_explorer_starts_from_the_values_it_is_given():
    """Lists without the book's usual starting values (d_k = 64, depth 16, L = 16,
    block 4) are valid: each control starts at a value of its own list."""
    built = {
        "scaling": explorers.scaling_explorer(d_ks=(1, 4)),
        "basics": explorers.basics_explorer(["a", "b", "c"], temperatures=(0.5, 3.0)),
        "tiling": explorers.tiling_explorer(seq_lens=(6, 12), blocks=(3,)),
        "block": explorers.block_explorer(depths=(2, 3)),
        "kv": explorers.kv_sharing_explorer(contexts=(100, 200)),
        "positional": explorers.positional_explorer(d_models=(8,), bases=(50.0,), positions=(16,)),
    }
    for name, explorer in built.items():
        for control, values in explorer.controls.items():
            assert explorer.values[control] in values, (name, control, explorer.values[control], values)
    assert built["scaling"].values["d_k"] == 4  # the middle of (1, 4)
    assert built["basics"].values["temperature"] == 3.0
    assert explorers.scaling_explorer().values["d_k"] == 64, "the book's default list starts where it did"
    # every setting of a dependent control draws without error
    tiling = built["tiling"]
    for _, values in tiling.combinations():
        tiling.set(**values)
