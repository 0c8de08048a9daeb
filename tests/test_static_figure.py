"""Static figures for a desktop and a phone (attention_core.book.viz.figures), without a
book build: a figure drawn side by side and stacked, text legible at the size each
rendering is shown, the right view in a live kernel and on the website, pyplot figures
measured on the website, and frames written as files by the site's extension."""

import base64
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from attention_core.book import output, render, viz
from attention_core.book.viz import figures

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "_ext"))
import explorer_frames  # noqa: E402

COLUMN_PX = {"wide": render.COLUMN_CSS_PX["desktop"], "narrow": render.COLUMN_CSS_PX["phone"]}
FLOOR_PX = 9


def two_panels(fig, layout):
    ax1, ax2 = fig.subplots(1, 2) if layout == "wide" else fig.subplots(2, 1)
    for ax in (ax1, ax2):
        ax.plot(np.arange(8), np.arange(8) ** 2, "o-", label="squares")
        ax.set(xlabel="x", ylabel="x squared", title="a panel")
        ax.legend()


@pytest.fixture(scope="module")
def figure():
    return viz.figure(two_panels, figsize=(7.2, 3), narrow_figsize=(3.5, 5.5), alt="Two panels of squares.")


def test_wide_side_by_side_narrow_stacked_and_legible(figure):
    wide, narrow = figure.render("wide"), figure.render("narrow")
    assert (wide["width"], wide["height"]) == (720, 300)
    assert (narrow["width"], narrow["height"]) == (525, 825)
    assert wide["panels_across"] == 2 and narrow["panels_across"] == 1
    for name, rendering in (("wide", wide), ("narrow", narrow)):
        shown = rendering["min_text_px"] * min(1.0, COLUMN_PX[name] / rendering["width"])
        assert shown >= FLOOR_PX, f"{name}: {shown:.1f} CSS px"
    # the wide figure alone on a phone would be illegible: the reason for the narrow one
    assert wide["min_text_px"] * COLUMN_PX["narrow"] / wide["width"] < 7


def test_a_draw_without_layout_draws_both_sizes():
    fig = viz.figure(lambda fig: fig.subplots().plot([0, 1]), figsize=(5, 3))
    assert fig.figsizes["narrow"] == (3.5, 6)
    assert fig.render("narrow")["width"] == 525 and fig.render("wide")["width"] == 500


def test_live_kernel_gets_a_plain_png(monkeypatch, figure):
    bundle = figure._repr_mimebundle_()
    assert set(bundle) == {"image/png", "text/plain"}
    assert bundle["image/png"].startswith(b"\x89PNG")


def test_website_gets_a_picture_with_both_renderings(website, figure):
    bundle = figure._repr_mimebundle_()
    assert "image/png" not in bundle
    page = bundle["text/html"]
    assert page.startswith('<div class="ac-figure"><picture>')
    source = re.search(r"<source [^>]*>", page).group(0)
    img = re.search(r"<img [^>]*>", page).group(0)
    assert f'media="{figures.NARROW_MEDIA}"' in source and 'data-layout="narrow"' in source
    assert 'width="525"' in source and 'data-panels-across="1"' in source
    assert 'width="720"' in img and 'height="300"' in img and 'data-panels-across="2"' in img
    assert 'alt="Two panels of squares."' in img and 'loading="lazy"' in img
    assert float(re.search(r'data-min-text-px="([\d.]+)"', img).group(1)) >= FLOOR_PX


def test_the_site_extension_writes_figure_renderings_as_files(tmp_path, figure):
    page = figure.to_html()
    uris = re.findall(r"data:image/png;base64,[A-Za-z0-9+/=]+", page)
    assert len(uris) == 3  # the wide and narrow renderings, the wide one's print copy (the PDF's)
    out = explorer_frames.externalise(page, str(tmp_path), "chapters")
    assert "data:image" not in out
    files = sorted((tmp_path / "_static" / "explorer-frames").iterdir())
    assert {f.read_bytes() for f in files} == {base64.b64decode(u.split(",", 1)[1]) for u in uris}
    assert re.search(r'srcset="\.\./_static/explorer-frames/[0-9a-f]{16}\.png"', out)
    assert re.search(r'<img src="\.\./_static/explorer-frames/[0-9a-f]{16}\.png"', out)
    assert re.search(r'data-print-src="\.\./_static/explorer-frames/[0-9a-f]{16}\.png"', out)


def test_pyplot_figures_are_measured_on_the_website():
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(9, 3))
    for ax in axes:
        ax.imshow(np.eye(4))
        ax.set_title("identity", fontsize=6)
    fig.colorbar(axes[0].images[0], ax=axes[-1])  # a colorbar is not a panel
    wide = figures.rendering(fig, small=True, tight=True)
    img = re.search(r"<img [^>]*>", figures.picture_html({"wide": wide}, figures.figure_alt(fig))).group(0)
    assert 'data-panels-across="3"' in img
    min_text_px = float(re.search(r'data-min-text-px="([\d.]+)"', img).group(1))
    assert min_text_px == pytest.approx(6 * 100 / 72, abs=0.01)
    assert 'alt="Figure: identity."' in img
    # 6 pt text in a 9 inch figure is under 9 CSS px on a desktop: the website's build stops, naming it
    too_small = r"figure 'Figure: identity.': smallest text \d\.\d CSS px on a desktop"
    with pytest.raises(render.FigureTextError, match=too_small):
        figures.plain_figure_html(fig)
    plt.close(fig)


def test_panels_across_counts_rows_not_grid_cells():
    from matplotlib.figure import Figure

    for shape, across in (((2, 2), 2), ((4, 1), 1), ((1, 3), 3), ((3, 3), 3)):
        fig = Figure(layout="constrained")
        fig.subplots(*shape)
        assert figures.panels_across(fig) == across, shape


def test_outside_a_kernel_nothing_is_installed(website):
    assert figures.install_website_figures() is False  # no IPython shell here


def test_a_kernel_shows_pyplot_figures_as_png_and_the_website_as_html():
    import matplotlib.pyplot as plt
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        assert figures.install_website_figures() is True
        fig = plt.figure(figsize=(3, 2))
        fig.subplots().plot([0, 1])
        html_of = shell.display_formatter.formatters["text/html"]
        assert html_of(fig) is None, "a reader's kernel keeps the PNG alone"
        with output.using("website"):
            assert html_of(fig).startswith('<div class="ac-figure"><picture>')
        plt.close(fig)
    finally:
        InteractiveShell.clear_instance()


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="draw must be callable"):
        viz.figure("not a function")
    with pytest.raises(ValueError, match="figsize must be"):
        viz.figure(two_panels, figsize=(7.2, 0))
    with pytest.raises(ValueError, match="layout must be one of"):
        viz.figure(two_panels).layout("tall")


@pytest.mark.parametrize("kind", ["encoder", "decoder", "decoder-only"])
def test_block_diagram_draws_each_sublayer_once_with_its_residual_add(kind):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    viz.block_diagram(kind, ax)
    texts = [t.get_text() for t in ax.texts]
    sublayers = viz.BLOCK_KINDS[kind][1]
    assert [t for t in texts if t in sublayers] == list(sublayers)
    assert texts.count("+") == texts.count("norm") == len(sublayers)
    assert ("encoder\noutput" in [a.get_text() for a in ax.texts]) == (kind == "decoder")
    plt.close(fig)


def test_block_diagram_names_an_unknown_kind():
    with pytest.raises(ValueError, match="kind"):
        viz.block_diagram("encoder-decoder")


def test_layouts_are_checked_by_name():
    assert render.is_narrow("narrow") and not render.is_narrow("wide")
    for bad in ("tall", "Narrow", None):
        with pytest.raises(ValueError, match="layout must be one of"):
            render.check_layout(bad)
        with pytest.raises(ValueError, match="layout must be one of"):
            render.is_narrow(bad)
    with pytest.raises(ValueError, match="layout must be one of"):
        viz.figure(lambda fig, layout: None).render("tall")
