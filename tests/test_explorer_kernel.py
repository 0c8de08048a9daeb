"""Explorers in a live kernel: moving a control changes the figure's data in place."""

import numpy as np
import pytest

from attention_core.explorers import Explorer, basics_explorer
from attention_core.toy_tasks import tokenize


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


def test_static_view_has_every_frame_and_same_controls(explorer):
    index, images = explorer.frames()
    assert len(index) == 5 * 9  # every combination of the two controls
    assert len(images) == len(set(images)) and len(images) <= len(index)
    html = explorer.to_html()
    for name in explorer.controls:
        assert f"<span>{name}</span>" in html
    bundle = explorer._repr_mimebundle_()
    assert {"text/html", "text/plain", "application/vnd.jupyter.widget-view+json"} <= set(bundle)


def test_bad_controls_are_rejected():
    with pytest.raises(ValueError, match="controls must name at least one control"):
        Explorer(lambda fig: (lambda: None), {})
    with pytest.raises(ValueError, match="control 'x' has no values"):
        Explorer(lambda fig, x: (lambda x: None), {"x": []})
    with pytest.raises(ValueError, match=r"initial value x=5 is not one of \[1, 2\]"):
        Explorer(lambda fig, x: (lambda x: None), {"x": [1, 2]}, initial={"x": 5})
