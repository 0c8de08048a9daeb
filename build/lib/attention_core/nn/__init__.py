"""Every chapter: the maths of the book, attention and everything it is built from, in
PyTorch only.

Flat, one topic a module, like ``torch.nn.functional``; no drawing, widget or notebook
library, and nothing from :mod:`attention_core.models` or :mod:`attention_core.book`.
``import attention_core as ac`` re-exports the public names (``ac.__all__``).
"""
