"""Every chapter: is this kernel executing a chapter for the book's website?

The website is built from the same notebooks a reader runs, but some output is for one
of the two only: explorers render every frame for the site (a live kernel shows just
one), and training prints a progress bar in a kernel but a one-line summary on the
site. The build says which it is by setting :data:`WEBSITE_BUILD_ENV` in the process
that executes the chapters (the book's ``_ext/selfcontained.py`` does, in Sphinx's
``setup``; the kernels inherit it). A reader's kernel never has it: nothing to set.
"""

from __future__ import annotations

import os

WEBSITE_BUILD_ENV = "ATTENTION_CORE_WEBSITE_BUILD"
"""The environment variable that, set to ``"1"``, marks a kernel that builds the website."""


def building_website() -> bool:
    """True while the book's website is being built (see :data:`WEBSITE_BUILD_ENV`)."""
    return os.environ.get(WEBSITE_BUILD_ENV) == "1"
