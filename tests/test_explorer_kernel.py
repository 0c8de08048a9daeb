"""Explorers in a live kernel and on the website: moving a control changes the figure's
data in place; a live kernel renders only the frame it shows; the website build gets
every frame and the player."""

import json
import re
from importlib.resources import files

import numpy as np
import pytest

from attention_core.book.explorers import Explorer, basics_explorer, engine
from attention_core.models.site_build import WEBSITE_BUILD_ENV
from attention_core.models.toy_tasks import tokenize

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def explorer():
    return basics_explorer(tokenize("the cat sat on the mat because it was tired"))


def heatmap_data(explorer):
    return np.array(explorer.figure.axes[0].images[0].get_array())


def test_moving_a_slider_updates_the_same_figure(explorer):
    widget = explorer.widget()
    figure, image_artist = explorer.figure, explorer.figure.axes[0].images[0]
    temperature, length = widget.sliders
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
    sliders = explorer.widget().sliders
    assert [s.description for s in sliders] == ["temperature τ", "tokens shown"]
    assert all(s.style.description_width == "initial" for s in sliders)  # never cut to "temperat..."


def test_a_live_kernel_renders_only_the_frame_it_shows(monkeypatch):
    monkeypatch.delenv(WEBSITE_BUILD_ENV, raising=False)
    encoded = []
    real = engine.png_bytes
    monkeypatch.setattr(engine, "png_bytes", lambda fig, small=False, draw=True:
                        encoded.append((small, draw)) or real(fig, small, draw))
    live = basics_explorer(tokenize("the cat sat on the mat"))
    bundle = live._repr_mimebundle_()
    # one frame for the widget, from the canvas already drawn for the layout; none for the website
    assert encoded == [(False, False)]
    assert bundle[WIDGET_VIEW]["model_id"] == live.widget().model_id
    assert "ac-frames" not in bundle["text/html"] and bundle["text/html"].count("<img") == 1
    assert bundle["text/plain"] == "Explorer(temperature τ, tokens shown)"


def test_the_website_build_gets_every_frame_and_the_player(monkeypatch, explorer):
    monkeypatch.setenv(WEBSITE_BUILD_ENV, "1")
    bundle = explorer._repr_mimebundle_()
    assert WIDGET_VIEW not in bundle, "the website has no widget manager"
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
