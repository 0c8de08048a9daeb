"""What chapters 13 and 14's in-browser models share on the website (``web_model.py``,
``web_llm.py``): an export kept under ``<cache>/<source_hash>/`` and made only when that
folder is missing, then copied into the site, world-readable, at the end of an HTML build.
Not an extension itself: each of the two registers its own paths and hooks."""

from __future__ import annotations

import importlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)


def cached_export(cache_root: Path, module: str, export: str,
                  done: Callable[[dict, float], str]) -> Path:
    """The folder under ``cache_root`` holding the export of ``attention_core.book.<module>``
    for its current ``source_hash()``, made by its ``export(folder, log=...)`` first if it is
    not there (older exports are removed); ``done(meta, seconds)`` says what was made."""
    web = importlib.import_module(f"attention_core.book.{module}")
    key = web.source_hash()
    folder = cache_root / key
    if all((folder / name).is_file() for name in web.FILES):
        return folder
    partial = cache_root / f"{key}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    start = time.perf_counter()
    meta = getattr(web, export)(partial, log=lambda message: logger.info(f"[{module}] {message}"))
    for old in cache_root.iterdir():
        if old != partial:
            shutil.rmtree(old, ignore_errors=True)
    partial.rename(folder)
    logger.info(f"[{module}] {done(meta, time.perf_counter() - start)}")
    return folder


def copy_into_site(app, module: str, what: str, export: Callable[[Path], Path]) -> None:
    """Copy ``attention_core.book.<module>.FILES`` from ``export(cache_root)`` into the site
    at ``app.config.<module>_path``; a failed export fails the build, naming ``what``."""
    web = importlib.import_module(f"attention_core.book.{module}")
    cache_root = Path(app.srcdir) / getattr(app.config, f"{module}_cache")
    target = Path(app.outdir) / getattr(app.config, f"{module}_path")
    try:
        cache_root.mkdir(parents=True, exist_ok=True)
        folder = export(cache_root)
    except Exception as error:
        raise ExtensionError(f"{module}: exporting {what} failed: {type(error).__name__}: {error}") from error
    target.mkdir(parents=True, exist_ok=True)
    for directory in (target, target.parent):
        directory.chmod(0o755)
    for name in web.FILES:
        shutil.copyfile(folder / name, target / name)
        (target / name).chmod(0o644)
