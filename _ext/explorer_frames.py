"""Explorer frames as files on the website, not base64 in the page.

An explorer's static view (``attention_core.book.explorers.static``) carries every frame as
a data URI, so that a notebook's output stands alone in Jupyter, Colab or nbviewer. On
the website that would make a chapter's HTML megabytes heavy, every frame downloaded
before the first paint. When a page is written, this extension takes each explorer's
raw HTML (the ``text/html`` output myst-nb puts in the doctree, from a fresh run or
from jupyter-cache alike), writes each distinct frame once to
``_static/explorer-frames/<sha256[:16]>.<ext>`` (content-addressed: frames shared by
pages or layouts are stored once) and puts the file's URL, relative to the page, in
place of the data URI. The player (``player.js``) takes either form; the first frame
is an ordinary ``<img src>`` and the rest are fetched when a control moves. Static
figures (``attention_core.book.viz.figures``: a ``<picture>`` with a wide and a narrow
rendering) go the same way, so a phone fetches only the narrow PNG.
"""

from __future__ import annotations

import base64
import hashlib
import os
import posixpath
import re
import tempfile

from docutils import nodes

FRAMES_DIR = "_static/explorer-frames"
DATA_URI = re.compile(r"data:image/(png|webp);base64,([A-Za-z0-9+/]+=*)")
FILE_MODE = 0o644  # every file of the site is readable by the web server's user
MARKS = ('class="ac-explorer"', 'class="ac-figure"')  # explorers; static figures (book.viz.figures)


def frame_file(data: bytes, ext: str, outdir: str) -> str:
    """Write ``data`` once under ``outdir/_static/explorer-frames`` (named by its
    hash); return its path relative to ``outdir``."""
    name = f"{hashlib.sha256(data).hexdigest()[:16]}.{ext}"
    folder = os.path.join(outdir, *FRAMES_DIR.split("/"))
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".part")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        # mkstemp creates 0600: a web server running as another user could not read it
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)  # atomic: parallel writers of one frame agree
    return f"{FRAMES_DIR}/{name}"


def externalise(html: str, outdir: str, page_dir: str) -> str:
    """Every frame data URI in an explorer's ``html`` -> the URL of its file, relative
    to a page in folder ``page_dir`` (``""`` at the root, ``"chapters"``, ...)."""
    if not any(mark in html for mark in MARKS):
        return html

    def replace(match: re.Match) -> str:
        ext, data = match.group(1), base64.b64decode(match.group(2))
        return posixpath.relpath(frame_file(data, ext, outdir), page_dir or ".")

    return DATA_URI.sub(replace, html)


def externalise_frames(app, doctree, docname):
    if app.builder.format != "html":
        return
    page_dir = posixpath.dirname(app.builder.get_target_uri(docname))
    for node in list(doctree.findall(nodes.raw)):
        if "html" not in node.get("format", "").split():
            continue
        html = node.astext()
        if any(mark in html for mark in MARKS) and "data:image/" in html:
            new = nodes.raw("", externalise(html, str(app.outdir), page_dir), format=node["format"])
            node.replace_self(new)


def setup(app):
    app.connect("doctree-resolved", externalise_frames)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
