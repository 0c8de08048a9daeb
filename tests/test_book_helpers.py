"""The page helpers of ``attention_core.book`` (``attention_core.book.pages``)."""

from IPython.core.formatters import PlainTextFormatter

from attention_core.book import PlainText


def test_a_glued_string_reads_as_written():
    # {glue:text} shows the value's text/plain, which IPython makes from repr: no quotes
    text = PlainText("Luong (dot)")
    assert PlainTextFormatter()(text) == "Luong (dot)"
    assert PlainTextFormatter()("Luong (dot)") == "'Luong (dot)'"  # what a plain str would show
    assert text == "Luong (dot)" and isinstance(text, str)
