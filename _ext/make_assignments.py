"""Every chapter: one auto-graded assignment per chapter, in otter-grader's format.

``make assignments`` runs this script. From each chapter's "Implement" exercises that have
a checker (``attention_core.book.exercises``; the reference solution sits between the
chapter's ``solution-start`` and ``solution-end`` cells and ends by calling ``check_*``),
it writes an otter-grader master notebook (``_build/assignments/master/chNN.ipynb``) and
runs ``otter assign`` on it, which gives, in ``_build/assignments/chNN/``:

* ``student/chNN.ipynb``: the notebook to hand out, each function's body replaced by
  ``...``, with ``grader.check("qN")`` cells that run the checker;
* ``autograder/chNN.ipynb`` and ``autograder/chNN-autograder_*.zip``: the solutions and the
  autograder, for Gradescope (upload the zip) or local grading (``otter run``).

One question per exercise, one point each. Its test prints the checker's verdict: the
reference solution's verdict ("All 3 cases passed: ...") is the expected output, so a
wrong answer's grade report shows the checker's message (which case failed, what was
expected, and the typical mistake when it recognises one). The expected verdict is
computed here by running the reference solution, which must pass.

Usage: ``python _ext/make_assignments.py [--out DIR] [--no-run-tests] [chNN ...]``
from the book's root (``--no-run-tests`` skips otter's own run of the solutions).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REPOSITORY = "https://github.com/learn-attention/learn-attention"
SITE = "https://learn-attention.github.io/learn-attention/"
FENCE = re.compile(r"^(`{3,})\{exercise\}\s*(?P<title>.*)$")
ROLE = re.compile(r"\{(?P<name>[a-z][\w:-]*)\}`(?P<content>[^`]*)`")
SETUP = "import math\n\nimport torch\n\ntorch.manual_seed(0)"


class AssignmentError(ValueError):
    """A chapter's exercise this script cannot turn into a question."""


def plain_roles(text: str, where: str) -> str:
    """MyST roles in an exercise's text as plain Jupyter markdown: ``{term}``, ``{doc}``
    and ``{ref}`` keep their text, ``{cite:t}``/``{cite:p}`` their key; others fail."""
    def replace(match: re.Match) -> str:
        name, content = match["name"], match["content"]
        shown = re.sub(r"\s*<[^>]*>$", "", content)
        if name in ("term", "doc", "ref", "numref"):
            return shown
        if name.startswith("cite"):
            return f"({content})"
        raise AssignmentError(f"{where}: the role {{{name}}} has no plain form in an assignment")
    return ROLE.sub(replace, text)


def exercise_text(source: str, where: str) -> tuple[str, str, str]:
    """``(label, title, markdown)`` of an ``{exercise}`` directive cell."""
    lines = source.strip().split("\n")
    match = FENCE.match(lines[0])
    if not match or not lines[-1].startswith(match.group(1)):
        raise AssignmentError(f"{where}: not an exercise directive: {lines[0]!r}")
    label, body = None, []
    for line in lines[1:-1]:
        option = re.match(r"^:(\w[\w-]*):\s*(.*)$", line)
        if option and not body:
            if option.group(1) == "label":
                label = option.group(2).strip()
            continue
        body.append(line)
    if label is None:
        raise AssignmentError(f"{where}: exercise {match['title']!r} has no label")
    return label, match["title"].strip(), plain_roles("\n".join(body).strip(), where)


def split_solution(code: str, where: str) -> dict:
    """A reference solution cell -> its parts: ``imports`` (kept for the student), the
    function ``name`` and its source with the body between ``# BEGIN SOLUTION`` and
    ``# END SOLUTION`` (otter replaces it by ``...``), and the ``checker`` it calls."""
    tree = ast.parse(code)
    lines = code.split("\n")
    checks = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Name) and node.func.id.startswith("check_")]
    if len(checks) != 1 or not isinstance(checks[0].args[0], ast.Name):
        raise AssignmentError(f"{where}: expected one call check_*(my_function), found {len(checks)}")
    checker, name = checks[0].func.id, checks[0].args[0].id
    imports = [ast.get_source_segment(code, n) for n in tree.body
               if isinstance(n, (ast.Import, ast.ImportFrom))]
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if [f.name for f in functions] != [name]:
        raise AssignmentError(f"{where}: expected one function {name}, found {[f.name for f in functions]}")
    fn = functions[0]
    first = fn.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(fn.body) > 1:
        first = fn.body[1]  # a docstring stays with the prompt
    start = min((d.lineno for d in fn.decorator_list), default=fn.lineno)  # @triton.jit stays
    header = lines[start - 1:first.lineno - 1]
    body = lines[first.lineno - 1:fn.end_lineno]
    indent = re.match(r"\s*", body[0]).group(0)
    source = "\n".join(header + [indent + "# BEGIN SOLUTION", *body, indent + "# END SOLUTION"])
    return {"imports": imports, "name": name, "function": source, "checker": checker,
            "reference": "\n".join(lines[start - 1:fn.end_lineno])}


def chapter_exercises(path: Path) -> list[dict]:
    """The checked "Implement" exercises of one chapter, in order: statement and solution."""
    nb = nbformat.read(path, 4)
    statements, found, gate = {}, [], None
    for cell in nb.cells:
        source = cell.source
        if cell.cell_type == "markdown" and FENCE.match(source.strip().split("\n")[0]):
            label = re.search(r"^:label:\s*(\S+)", source, flags=re.MULTILINE)
            statements[label.group(1) if label else None] = source  # converted if it has a checker
        elif cell.cell_type == "markdown" and "{solution-start}" in source:
            gate = re.search(r"\{solution-start\}\s*(\S+)", source).group(1)
        elif cell.cell_type == "markdown" and "{solution-end}" in source:
            gate = None
        elif cell.cell_type == "code" and gate and "check_" in source:
            _, title, text = exercise_text(statements[gate], path.name)
            found.append({"label": gate, "title": title, "text": text,
                          **split_solution(source, f"{path.name} ({gate})")})
    return found


def verdict(exercise: dict) -> str:
    """What the checker says about the reference solution (it must pass)."""
    from attention_core.book import exercises as checkers

    scope: dict = {}
    exec(SETUP + "\n" + "\n".join(exercise["imports"]) + "\n" + exercise["reference"], scope)
    result = getattr(checkers, exercise["checker"])(scope[exercise["name"]])
    if not result:
        raise AssignmentError(f"the reference solution of {exercise['label']} fails its checker:\n{result}")
    return str(result)


def chapter_title(path: Path) -> str:
    nb = nbformat.read(path, 4)
    return next(line[2:].strip() for c in nb.cells if c.cell_type == "markdown"
                for line in c.source.split("\n") if line.startswith("# "))


def raw(text: str):
    return nbformat.v4.new_raw_cell(text)


def master_notebook(path: Path, name: str, exercises: list[dict]) -> nbformat.NotebookNode:
    """The otter-grader master notebook of one chapter (otter assign's v1 format)."""
    title = chapter_title(path)
    page = f"{SITE}chapters/{path.stem}.html"
    config = "\n".join([
        "# ASSIGNMENT CONFIG",
        f"name: {name}",
        "requirements: requirements.txt",
        "overwrite_requirements: false",
        "export_cell: false",
        "check_all_cell: true",
        "init_cell: true",
        "generate:",
        "  pdf: false",
        "  zips: false",
        "  show_stdout: true",
        "tests:",
        "  ok_format: true",
    ])
    cells = [raw(config), nbformat.v4.new_markdown_cell(
        f"# Assignment: {title}\n\n"
        f"Read the chapter first: [{title}]({page}). Fill in each function where it says `...`, "
        "run its `grader.check` cell to see whether it passes (it prints the checker's verdict, "
        "with what went wrong), then save the notebook and hand it in as your instructor "
        f"asks. Each question is worth {1} point."),
        nbformat.v4.new_code_cell(SETUP)]
    for n, ex in enumerate(exercises, start=1):
        cells += [
            raw(f"# BEGIN QUESTION\nname: q{n}\npoints: 1"),
            nbformat.v4.new_markdown_cell(f"**Question {n}. {ex['title']}**\n\n{ex['text']}"),
            raw("# BEGIN SOLUTION"),
            nbformat.v4.new_code_cell("\n".join(ex["imports"]) + "\n\n\n" + ex["function"]),
            raw("# END SOLUTION"),
            raw("# BEGIN TESTS"),
            nbformat.v4.new_code_cell(f"print({ex['checker']}({ex['name']}))", outputs=[
                nbformat.v4.new_output("stream", name="stdout", text=verdict(ex) + "\n")]),
            raw("# END TESTS"),
            raw("# END QUESTION"),
        ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nb


def requirements() -> str:
    """What the autograder (Gradescope's image) installs: torch (CPU) and the book's package."""
    torch = next(line for line in (ROOT / "requirements.txt").read_text().splitlines()
                 if line.startswith("torch=="))
    return f"{torch}\nattention-core @ git+{REPOSITORY}@main\n"


def build(chapter: Path, out: Path, run_tests: bool) -> Path | None:
    """The assignment of ``chapter`` under ``out/chNN`` (None: the chapter has no checked exercise)."""
    exercises = chapter_exercises(chapter)
    if not exercises:
        return None
    name = f"ch{chapter.stem[:2]}"
    masters = out / "master"
    masters.mkdir(parents=True, exist_ok=True)
    master = masters / f"{name}.ipynb"
    nbformat.write(master_notebook(chapter, name, exercises), master)
    (masters / "requirements.txt").write_text(requirements())
    dist = out / name
    shutil.rmtree(dist, ignore_errors=True)
    command = [sys.executable, "-m", "otter", "assign", str(master), str(dist)]
    if not run_tests:
        command.append("--no-run-tests")
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}  # otter assign imports this copy of the package
    result = subprocess.run(command, cwd=masters, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise AssignmentError(f"otter assign failed for {name}:\n{result.stdout}\n{result.stderr}")
    return dist


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chapters", nargs="*", help="chNN to build (default: every chapter)")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "assignments")
    parser.add_argument("--no-run-tests", action="store_true", help="do not let otter run the solutions")
    args = parser.parse_args(argv)
    paths = sorted((ROOT / "chapters").glob("*.ipynb"))
    if args.chapters:
        paths = [p for p in paths if f"ch{p.stem[:2]}" in args.chapters]
    for path in paths:
        dist = build(path, args.out, run_tests=not args.no_run_tests)
        print(f"{path.stem}: {dist or 'no checked exercise'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
