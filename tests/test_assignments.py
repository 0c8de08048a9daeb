"""Auto-graded assignments (``make assignments``, _ext/make_assignments.py): every chapter's
checked exercises become an otter-grader master notebook whose reference solutions pass
their checkers; for chapter 5, ``otter assign`` writes a student notebook without the
solutions and an autograder, and ``otter run`` (no Docker) gives the reference solutions
full marks and a faulty submission partial marks with the checker's message."""

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import CHAPTERS, ROOT

sys.path.insert(0, str(ROOT / "_ext"))
import make_assignments

pytestmark = pytest.mark.book  # otter assign over the chapters (make assignments)

OTTER = [sys.executable, "-m", "otter"]
CHAPTER = "ch05"
FAULTY = {  # question -> a student's wrong body (the upper triangle: the future, not the past)
    "my_causal_mask": "    return torch.ones(L, L, dtype=torch.bool).triu()",
}


def test_every_chapter_with_a_checker_becomes_an_assignment():
    built = {}
    for chapter in CHAPTERS:
        path = ROOT / "chapters" / f"{chapter}.ipynb"
        exercises = make_assignments.chapter_exercises(path)
        nb = make_assignments.master_notebook(path, f"ch{chapter[:2]}", exercises)  # runs every reference
        questions = [c for c in nb.cells if c.cell_type == "raw" and c.source.startswith("# BEGIN QUESTION")]
        assert len(questions) == len(exercises)
        built[chapter] = len(exercises)
        for ex in exercises:
            undecorated = "\n".join(line for line in ex["function"].split("\n") if not line.startswith("@"))
            assert "# BEGIN SOLUTION" in ex["function"] and undecorated.startswith(f"def {ex['name']}(")
    assert all(built.values()), f"a chapter has no checked exercise: {built}"
    source = nbformat.read(ROOT / "chapters" / "05_masking.ipynb", 4)
    assert sum("check_" in c.source for c in source.cells if c.cell_type == "code") >= built["05_masking"]


def test_an_exercise_without_a_checker_call_is_refused():
    with pytest.raises(make_assignments.AssignmentError, match="check_"):
        make_assignments.split_solution("def f(x):\n    return x\n", "test")
    with pytest.raises(make_assignments.AssignmentError, match="role"):
        make_assignments.plain_roles("see {glue:text}`key`", "test")


@pytest.fixture(scope="module")
def assignment(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("assignments")
    make_assignments.main(["--out", str(out), "--no-run-tests", CHAPTER])
    return out / CHAPTER


def grade(assignment: Path, submission: Path) -> dict:
    (zipfile,) = (assignment / "autograder").glob("*-autograder_*.zip")
    out = submission.parent / f"{submission.stem}-results"
    out.mkdir()
    subprocess.run([*OTTER, "run", "-a", str(zipfile), "-o", str(out), str(submission)],
                   check=True, capture_output=True, text=True, cwd=submission.parent)
    results = json.loads((out / "results.json").read_text())
    return {t["name"]: t for t in results["tests"]}


def test_the_student_notebook_has_no_solutions(assignment):
    student = nbformat.read(assignment / "student" / f"{CHAPTER}.ipynb", 4)
    answers = [c for c in student.cells if "def my_" in c.source]
    assert len(answers) == 2 and all(c.source.rstrip().endswith("...") for c in answers)
    assert not any("BEGIN SOLUTION" in c.source or "j <= i" in c.source for c in student.cells)
    assert sum('grader.check("q' in c.source for c in student.cells) == 2


def test_otter_grades_the_reference_and_a_faulty_submission(assignment, tmp_path):
    reference = tmp_path / "reference.ipynb"
    nbformat.write(nbformat.read(assignment / "autograder" / f"{CHAPTER}.ipynb", 4), reference)
    scores = grade(assignment, reference)
    assert scores["q1"]["score"] == scores["q1"]["max_score"] == 1
    assert scores["q2"]["score"] == scores["q2"]["max_score"] == 1

    # the student notebook, with the second answer right and the first one wrong
    student = nbformat.read(assignment / "student" / f"{CHAPTER}.ipynb", 4)
    solutions = {ex["name"]: ex["reference"] for ex in
                 make_assignments.chapter_exercises(ROOT / "chapters" / "05_masking.ipynb")}
    for cell in student.cells:
        for name, body in FAULTY.items():
            if f"def {name}(" in cell.source:
                cell.source = cell.source.replace("    ...", body)
        if "def my_masked_softmax(" in cell.source:
            cell.source = cell.source.split("def my_masked_softmax(")[0] + solutions["my_masked_softmax"]
    faulty = tmp_path / "faulty.ipynb"
    nbformat.write(student, faulty)
    scores = grade(assignment, faulty)
    assert scores["q1"]["score"] == 0 and scores["q2"]["score"] == 1, "expected partial marks: 1 of 2"
    report = scores["q1"]["output"]
    message = "expected values (first row): [True, False, False, False]"
    assert "Case 'L = 4' failed." in report and message in report, \
        f"the grade report must carry the checker's message:\n{report}"
