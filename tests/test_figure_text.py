"""Every figure's text: nothing cut at the image's edge, nothing running over another
panel, and nothing under 9 CSS px where it is shown (a phone's column, a
desktop's one: render.COLUMN_CSS_PX). The checks themselves (attention_core.book.render.text_problems,
check_shown_size) on figures made to fail them; the static figures' renderings
(viz.figure, pyplot figures on the website, with a phone rendering where their text
would be too small); and every chapter's explorer at a sample of its states, in both
layouts. The website's build checks every frame of every explorer and every figure
itself (the same functions), and stops naming the figure."""

import math
import types
from pathlib import Path

import matplotlib
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

matplotlib.use("Agg")

from attention_core.book import explorers, viz
from attention_core.book.explorers.static import render_frames
from attention_core.book.render import (
    COLUMN_CSS_PX,
    TEXT_FLOOR_CSS_PX,
    FigureTextError,
    check_shown_size,
    new_figure,
    shown_text_px,
    text_problems,
)
from attention_core.book.viz import figures

TOKENS = ["the", "cat", "sat", "on", "the", "mat", "because", "it", "was", "tired"]


def drawn(fig: Figure) -> Figure:
    fig.canvas.draw()
    return fig


def plain_figure(figsize) -> Figure:
    """A figure without a layout engine, on an Agg canvas (what is drawn stays put)."""
    fig = Figure(figsize=figsize, dpi=100)
    FigureCanvasAgg(fig)
    return fig


# ------------------------------------------------------------------ the check itself
def test_a_title_running_off_both_edges_is_cut():
    fig = new_figure((3.5, 2.5), 150)
    ax = fig.subplots()
    ax.set_title("a title far too long for a figure three and a half inches wide, surely")
    problems = text_problems(drawn(fig))
    assert len(problems) == 2 and all("(panel 1) cut at the" in p for p in problems), problems
    assert "left edge" in problems[0] and "right edge" in problems[1]


def test_an_x_label_cut_at_the_bottom_without_a_layout():
    fig = plain_figure((4, 2))
    ax = fig.add_axes((0.1, 0.02, 0.85, 0.9))
    ax.set_xlabel("steps")
    assert any("'steps'" in p and "bottom edge" in p for p in text_problems(drawn(fig)))


def test_a_tick_label_over_the_next_panel():
    fig = plain_figure((6, 2.5))
    left, right = fig.add_axes((0.1, 0.3, 0.35, 0.6)), fig.add_axes((0.5, 0.05, 0.4, 0.85))
    left.set_xticks([1.0], ["instrument of great length"])
    left.set_xlim(0, 1.05)
    right.plot([0, 1])
    right.set_xticks([])
    right.set_yticks([])
    problems = text_problems(drawn(fig))
    assert problems == ["'instrument of great length' (panel 1) runs over panel 2"], problems


def test_texts_of_two_panels_that_overlap():
    fig = plain_figure((6, 3))
    top, bottom = fig.add_axes((0.1, 0.55, 0.8, 0.4)), fig.add_axes((0.1, 0.1, 0.8, 0.3))
    top.set_xlabel("the top panel's label")
    bottom.set_title("the bottom panel's title")
    problems = text_problems(drawn(fig))
    assert any("overlaps" in p for p in problems), problems


def test_a_clean_figure_and_a_colorbar_and_a_twin_have_no_problems():
    fig = new_figure((7.2, 3.4), 100)
    ax1, ax2 = fig.subplots(1, 2)
    image = ax1.imshow(torch.rand(6, 6).numpy())
    fig.colorbar(image, ax=ax1, label="weight")
    ax1.set(title="weights", xlabel="key", ylabel="query")
    ax2.plot([1, 2, 3], label="a line")
    ax2.twinx().plot([3, 2, 1], color="C1")
    ax2.legend()
    ax2.annotate("a note", (1, 2))
    assert text_problems(drawn(fig)) == []


def test_text_clipped_to_its_axes_is_measured_as_drawn():
    fig = new_figure((4, 3), 100)
    ax = fig.subplots()
    ax.text(0.5, 0.5, "inside", clip_on=True)
    ax.text(50, 50, "outside the view, clipped away", clip_on=True)
    assert text_problems(drawn(fig)) == []


def test_shown_size_in_css_px():
    phone = COLUMN_CSS_PX["phone"]
    assert phone == 343, "a 390 px phone's column, its vertical scrollbar taken"
    assert shown_text_px(12, 551, phone) == pytest.approx(12 * 343 / 551)
    assert shown_text_px(12, 300, phone) == 12, "never scaled up"
    check_shown_size(15.6, 525, "narrow", ("phone",))
    with pytest.raises(FigureTextError, match=r"ch13: smallest text 7\.5 CSS px on a phone \(343 px"):
        check_shown_size(12, 551, "ch13")
    with pytest.raises(FigureTextError, match=r"smallest text 8\.9 CSS px on a phone"):
        check_shown_size(13.6, 525, "just under at 343 px, over at 358 px")
    with pytest.raises(ValueError, match="natural_width"):
        shown_text_px(12, 0, phone)


def test_a_formatter_error_fails_the_build_naming_page_and_figure():
    """IPython's display formatters print an exception instead of raising it: the check's
    error is an ordinary exception, and the build fails on the error output it leaves."""
    import sys

    from docutils import nodes
    from sphinx.errors import ExtensionError

    assert issubclass(FigureTextError, Exception)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_ext"))
    try:
        import website_kernel
    finally:
        sys.path.pop(0)
    doctree = nodes.document(None, None)
    traceback = nodes.literal_block(text="Traceback...\nFigureTextError: figure 'x': 'title' cut")
    traceback["classes"] += ["output", "traceback"]
    doctree += traceback
    app = types.SimpleNamespace(env=types.SimpleNamespace(docname="chapters/02_scaling"))
    with pytest.raises(ExtensionError, match=r"chapters/02_scaling: .*FigureTextError: figure 'x'"):
        website_kernel.fail_on_error_outputs(app, doctree)
    doctree.remove(traceback)
    website_kernel.fail_on_error_outputs(app, doctree)  # no error output: nothing raised


# ------------------------------------------------------------------ static figures
def test_a_static_figure_with_a_title_cut_on_a_phone_fails_naming_it():
    def draw(fig, layout):
        ax = fig.subplots()
        ax.barh(["a", "b"], [1, 2])
        ax.set_xlabel("seconds to execute, two pages at a time (dashed: a cell's limit, 120 s)")

    cut = r"figure 'bars', narrow layout: .* cut at the (left|right) edge"
    with pytest.raises(FigureTextError, match=cut):
        viz.figure(draw, figsize=(7.2, 3.0), narrow_figsize=(3.5, 3.0), alt="bars").to_html()


def test_a_static_figure_with_text_too_small_on_a_desktop_fails():
    def draw(fig):
        fig.subplots().set_title("tiny", fontsize=5)

    with pytest.raises(FigureTextError, match="wide layout: smallest text .* on a desktop"):
        viz.figure(draw, alt="tiny").to_html()


def ch13_like_entropy_map(**kwargs) -> Figure:
    """Chapter 13's "mean row entropy" figure: a 6 x 12 map with a colour bar, drawn once
    (a pyplot figure, 5.4 inches wide): its smallest text is 7.7 CSS px on a phone."""
    fig = new_figure((5.4, 3.0), 100)
    viz.layer_head_map(torch.rand(6, 12) * 2.5, ax=fig.subplots(), vmin=0, vmax=2.5, fmt="{:.1f}",
                       label="mean row entropy (nats)", title="mean row entropy of every head (nats)",
                       **kwargs)
    return fig


def test_a_pyplot_figure_too_small_on_a_phone_gets_a_phone_rendering():
    fig = ch13_like_entropy_map()
    size = tuple(fig.get_size_inches())
    renderings = figures.plain_figure_renderings(fig)
    wide, narrow = renderings["wide"], renderings["narrow"]
    assert shown_text_px(wide["min_text_px"], wide["width"], COLUMN_CSS_PX["phone"]) < TEXT_FLOOR_CSS_PX
    assert shown_text_px(narrow["min_text_px"], narrow["width"], COLUMN_CSS_PX["phone"]) >= TEXT_FLOOR_CSS_PX
    assert shown_text_px(wide["min_text_px"], wide["width"], COLUMN_CSS_PX["desktop"]) >= TEXT_FLOOR_CSS_PX
    assert tuple(fig.get_size_inches()) == size and fig.dpi == 100, "the figure is left as it was"
    html = figures.plain_figure_html(fig)
    assert html.count("<source") == 1 and 'data-layout="narrow"' in html


def test_a_title_too_wide_for_the_phone_rendering_is_broken_into_lines():
    """Chapter 1's entropy bars (4.6 inches wide): its title runs past the narrower phone
    figure, which would widen the cropped image and leave its text at 8.8 CSS px on a
    phone; the phone rendering breaks the title into balanced lines instead."""
    fig = new_figure((4.6, 3.0), 100)
    ax = fig.subplots()
    ax.bar(range(10), torch.rand(10).tolist())
    tokens = ["the", "cat", "sat", "on", "the", "mat", "because", "it", "was", "tired"]
    ax.set_xticks(range(10), tokens, rotation=45, ha="right")
    ax.tick_params(labelsize=8)  # 8.3 CSS px on a phone, drawn once
    title = "Entropy per query, against the uniform maximum"
    ax.set(title=title, xlabel="query", ylabel="entropy (nats)")
    renderings = figures.plain_figure_renderings(fig)
    narrow = renderings["narrow"]
    assert shown_text_px(narrow["min_text_px"], narrow["width"], COLUMN_CSS_PX["phone"]) >= TEXT_FLOOR_CSS_PX
    assert ax.get_title() == title, "the figure is left as it was"
    captured = {}
    original = figures.rendering

    def spy(figure, small=True, tight=False):
        captured.setdefault("titles", []).append(ax.get_title())
        return original(figure, small, tight)

    figures.rendering = spy
    try:
        figures.narrow_rendering(fig, "entropy bars", renderings["wide"])
    finally:
        figures.rendering = original
    lines = captured["titles"][-1].split("\n")
    assert len(lines) >= 2 and " ".join(lines) == title, lines
    assert min(len(line) for line in lines) >= len(title) / (len(lines) + 1), f"balanced lines: {lines}"


def test_a_pyplot_figure_legible_on_a_phone_keeps_one_rendering():
    fig = new_figure((3.4, 2.4), 100)
    fig.subplots().plot([1, 2, 3])
    assert list(figures.plain_figure_renderings(fig)) == ["wide"]


# ------------------------------------------------------------------ explorers
def sample_states(explorer):
    """Every value of each control with the others where they start, and two corners
    of the controls' grid (every control at its first value, every one at its last):
    the states where titles and tick labels are longest and shortest. (The website's
    build checks every frame.)"""
    names = list(explorer.controls)
    states = []
    for name in names:
        for value in explorer.options(name):
            states.append(explorer._clamped({name: value}))
    for corner in ((0,) * len(names), (-1,) * len(names)):
        values = {}
        for name, end in zip(names, corner):
            values[name] = explorer.options(name, values)[end]
        states.append(values)
    unique = []
    for state in states:
        if state not in unique:
            unique.append(state)
    return unique


def _heads_models():
    from attention_core.models.tiny_transformer import TinyTransformer

    torch.manual_seed(0)
    return {h: TinyTransformer(vocab_size=12, max_len=8, embed_dim=16, num_heads=h).eval() for h in (1, 2, 4)}


def _alignment_models():
    from attention_core.models.seq2seq import Seq2Seq

    torch.manual_seed(0)
    return {"bahdanau": Seq2Seq("bahdanau", hidden_size=8, embed_dim=4).eval(),
            "luong dot": Seq2Seq("luong", "dot", hidden_size=8, embed_dim=4).eval()}


EXPLORERS = {
    "ch1": lambda: explorers.basics_explorer(TOKENS),
    "ch2": explorers.scaling_explorer,
    "ch3": lambda: explorers.self_attention_explorer(TOKENS),
    "ch4": lambda: explorers.heads_explorer(_heads_models(), seq_len=8, vocab_size=12),
    "ch5": lambda: explorers.masking_explorer(TOKENS),
    "ch6": explorers.block_explorer,
    "ch7": lambda: explorers.alignment_explorer(_alignment_models(), ["a b c", "d e f g h i", "k l"]),
    "ch8": explorers.sparse_mask_explorer,
    "ch9": explorers.kv_sharing_explorer,
    "ch10": explorers.positional_explorer,
    "ch11": explorers.tiling_explorer,
    "ch12": explorers.kv_memory_explorer,
}


def explorer_text_problems(explorer) -> list[str]:
    """Text cut or overlapping in the sample states of ``explorer``, in both layouts."""
    layouts = {name: explorer.layout(name) for name in ("wide", "narrow")}
    problems = []
    for values in sample_states(explorer):
        data = explorer.compute(**values)
        for name, layout in layouts.items():
            layout.show(data)
            problems += [f"{name} {values}: {p}" for p in layout.text_problems()]
    return problems


@pytest.mark.parametrize("chapter", list(EXPLORERS))
def test_explorer_text_is_neither_cut_nor_overlapping(chapter):
    """The states of :func:`sample_states` in both layouts: no text cut at a frame's
    edge or running over another panel (the build checks every frame)."""
    problems = explorer_text_problems(EXPLORERS[chapter]())
    assert not problems, f"{chapter}: {len(problems)} problems: {problems[:6]}"


def test_the_chapter_13_explorer_text_is_neither_cut_nor_overlapping():
    from attention_core.models.pretrained import SENTENCES, load_minilm

    model, tokenizer = load_minilm()
    sentences = ["The cat sat on the mat", "The cat, which was black, sat on the mat", SENTENCES[18]]
    problems = explorer_text_problems(explorers.pretrained_explorer(model, tokenizer, sentences))
    assert not problems, problems[:6]


def test_render_frames_checks_every_frame_and_names_the_state():
    """The build's path: a frame whose title runs off the narrow figure fails, naming
    the explorer, the layout and the controls' values."""
    from attention_core.book.explorers.engine import Explorer

    def draw(fig, layout="wide"):
        ax = fig.subplots()

        def update(title):
            ax.set_title(title)
        return update

    explorer = Explorer(draw, lambda n: {"title": "x" * n}, {"n": [5, 80]}, figsize=(7.2, 3),
                        narrow_figsize=(3.5, 3), alt="Titles.")
    with pytest.raises(FigureTextError, match=r"narrow layout, n 80: 'x+' \(panel 1\) cut at the right"):
        render_frames(explorer, encode=False)
    assert math.isfinite(render_frames(explorer, encode=False, check=False)["wide"]["min_text_px"])


def test_an_explorer_is_laid_out_where_its_labels_are_longest():
    """``layout_at``: the layouts are made at that state (its long title gets room), and
    the explorer then shows its initial values; a value no control takes is refused."""
    from attention_core.book.explorers.engine import Explorer

    def draw(fig, layout="wide"):
        ax = fig.subplots()

        def update(title):
            ax.set_title(title)
        return update

    compute = lambda lines: {"title": "\n".join(["a line of the title"] * lines)}
    explorer = Explorer(draw, compute, {"lines": [1, 4]}, figsize=(7.2, 3), narrow_figsize=(3.5, 3),
                        layout_at={"lines": 4}, alt="Titles.")
    assert explorer.values == {"lines": 1}
    assert explorer.layout("wide").figure.axes[0].get_title().count("\n") == 0
    render_frames(explorer, encode=False)  # both states checked: the four-line title fits
    with pytest.raises(ValueError, match="layout_at: lines=7"):
        Explorer(draw, compute, {"lines": [1, 4]}, layout_at={"lines": 7})
