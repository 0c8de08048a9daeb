"""Exercises numbered within their chapter: "Exercise 7.2", not the 26th of the book.

sphinx-exercise numbers exercises with Sphinx's figure numbers, which run across the
whole book when the table of contents is not numbered (our chapter numbers are in the
titles). After Sphinx assigns them, each exercise of ``chapters/NN_*`` gets ``(NN, k)``,
``k`` its place in the chapter; solutions and references read the same numbers.
"""

from __future__ import annotations

import re

CHAPTER = re.compile(r"^chapters/(\d+)_")


def renumber_exercises(app, env) -> list[str]:
    for docname, numbers in env.toc_fignumbers.items():
        match = CHAPTER.match(docname)
        exercises = numbers.get("exercise")
        if match and exercises:
            in_order = sorted(exercises, key=exercises.get)
            numbers["exercise"] = {ids: (int(match[1]), k) for k, ids in enumerate(in_order, 1)}
    return []


def setup(app):
    # after Sphinx's TocTreeCollector (priority 500) has assigned the book-wide numbers
    app.connect("env-get-updated", renumber_exercises, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
