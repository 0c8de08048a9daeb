"""The page helpers of ``attention_core.book`` (``attention_core.book.pages``)."""

from IPython.core.formatters import PlainTextFormatter

from attention_core.book import PlainText


def test_a_glued_string_reads_as_written():
    # {glue:text} shows the value's text/plain, which IPython makes from repr: no quotes
    text = PlainText("Luong (dot)")
    assert PlainTextFormatter()(text) == "Luong (dot)"
    assert PlainTextFormatter()("Luong (dot)") == "'Luong (dot)'"  # what a plain str would show
    assert text == "Luong (dot)" and isinstance(text, str)


def test_a_glued_string_that_looks_like_a_literal_reads_back_as_written():
    """myst-nb's {glue:text} reads text/plain back with ast.literal_eval: "100,000" came out
    as "(100, 0)" on chapter 14's page, and "0.60" would come out as "0.6"."""
    from myst_nb.core.variables import format_plain_text

    for written in ("100,000", "0.60", "0.90, 0.76, 0.72", "('A', ' the')", "Luong (dot)", "1e-4",
                    "[1, 2]", "None", "12"):
        text_plain = PlainTextFormatter()(PlainText(written))
        assert format_plain_text(text_plain, "") == written, (written, text_plain)
        assert format_plain_text(text_plain, "s") == written


def test_a_glued_numpy_or_torch_scalar_is_its_number(monkeypatch):
    # myst-nb formats {glue:text}`key:.2f` from text/plain: np.float64(0.97) would not parse
    import myst_nb
    import numpy as np
    import torch

    from attention_core.book import glue

    seen = {}
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display: seen.update({name: value}))
    glue("a", np.float64(0.97))
    glue("b", torch.tensor(3))
    glue("c", np.array([1.0, 2.0]))
    assert seen["a"] == 0.97 and type(seen["a"]) is float
    assert seen["b"] == 3 and type(seen["b"]) is int
    assert isinstance(seen["c"], np.ndarray), "an array is glued as it is"
    assert PlainTextFormatter()(seen["a"]) == "0.97"
