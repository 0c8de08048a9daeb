"""The instructor guide keeps up with the chapters: every chapter has its objectives row, and
the "What to grade" table names, in each chapter's row, every checker that chapter's
*implement* exercises call (the exercises `make assignments` turns into otter assignments)."""

import re
import sys

import pytest

from conftest import CHAPTERS, ROOT

sys.path.insert(0, str(ROOT / "_ext"))
import make_assignments

GUIDE = (ROOT / "instructor_guide.md").read_text()


def section(title: str) -> str:
    return GUIDE.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def table_rows(text: str) -> dict[int, str]:
    """Rows of the markdown tables in ``text`` whose first cell starts with a chapter number."""
    rows = (re.match(r"^\|\s*(\d+)\b(.*)$", line) for line in text.splitlines())
    return {int(m[1]): m[2] for m in rows if m}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_has_objectives_and_its_checkers_are_graded(chapter):
    number = int(chapter[:2])
    assert number in table_rows(section("Chapters: objectives and time")), \
        f"instructor_guide.md: no objectives row for chapter {number}"
    exercises = make_assignments.chapter_exercises(ROOT / "chapters" / f"{chapter}.ipynb")
    checkers = {ex["checker"] for ex in exercises}
    row = table_rows(section("What to grade")).get(number, "")
    missing = sorted(c for c in checkers if f"`{c}`" not in row)
    assert not missing, f"instructor_guide.md, What to grade: chapter {number}'s row lacks {missing}"
