"""Execute the book's notebooks two at a time into the build's jupyter-cache.

``jupyter-book build`` executes notebooks one after another; on a two-core machine the
chapters that train models leave a core idle. ``make book`` runs this first: each
notebook whose code is not in the cache yet runs in its own kernel (two at a time,
slowest first), and a successful run is stored exactly as myst-nb stores it (same cache,
same working directory, same timeout, same website kernel, ``_ext/website_kernel.py``, that
starts the chapters in the website's output mode), so the build then finds it there. A notebook
that fails is left out of the cache: the build executes it again and fails, naming it.

Usage: ``python _ext/execute_chapters.py`` from the book's root.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat
import yaml
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from jupyter_cache.executors.utils import single_nb_execution

ROOT = Path(__file__).resolve().parents[1]
from website_kernel import (  # noqa: E402  (_ext/, beside this file)
    error_outputs_of_notebook,
    install_kernelspec,
    kernel_aliases,
    map_kernel,
)


def notebooks() -> list[Path]:
    """Every notebook of the book, largest (slowest, as a rule) first."""
    found = sorted(ROOT.glob("chapters/*.ipynb")) + sorted(ROOT.glob("*.ipynb"))
    return sorted(found, key=lambda p: -p.stat().st_size)


def main() -> int:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    timeout = config["execute"]["timeout"]  # the hang guard of _config.yml, as myst-nb uses it
    aliases = kernel_aliases(ROOT)
    install_kernelspec()
    cache = get_cache(ROOT / "_build" / ".jupyter_cache")
    todo = []
    for path in notebooks():  # myst-nb maps the kernel before it looks in the cache
        nb = map_kernel(nbformat.read(path, nbformat.NO_CONVERT), aliases)
        try:
            cache.match_cache_notebook(nb)
        except KeyError:
            todo.append((path, nb))
    if not todo:
        return 0
    print(f"executing {len(todo)} notebooks, two at a time", flush=True)

    def run(item):
        path, nb = item
        return path, nb, single_nb_execution(nb, cwd=str(path.parent), timeout=timeout,
                                             allow_errors=False, meta_override=True)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:
        for future in as_completed([pool.submit(run, item) for item in todo]):
            path, nb, result = future.result()
            name = path.relative_to(ROOT)
            errors = error_outputs_of_notebook(nb) if result.err is None else []
            if result.err is not None or errors:  # the build re-runs it and reports the error
                why = (f"{type(result.err).__name__}: {str(result.err)[-1500:]}" if result.err is not None
                       else "; ".join(errors))
                print(f"  {name}: failed ({why}); the build will report it", flush=True)
                continue
            uri = str(cache.add_nb_to_project(str(path)).uri)
            cache.cache_notebook_bundle(CacheBundleIn(nb, uri, data={"execution_seconds": result.time}),
                                        check_validity=False, overwrite=True)
            print(f"  {name}: {result.time:.0f} s", flush=True)
    print(f"executed in {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
