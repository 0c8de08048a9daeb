"""The page helpers of ``attention_core.book`` (``attention_core.book.pages``)."""

from IPython.core.formatters import PlainTextFormatter

from attention_core.book import PlainText


def test_a_glued_string_reads_as_written():
    # {glue:text} shows the value's text/plain, which IPython makes from repr: no quotes
    text = PlainText("Luong (dot)")
    assert PlainTextFormatter()(text) == "Luong (dot)"
    assert PlainTextFormatter()("Luong (dot)") == "'Luong (dot)'"  # what a plain str would show
    assert text == "Luong (dot)" and isinstance(text, str)


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
