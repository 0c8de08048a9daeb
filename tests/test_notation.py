"""One symbol, one meaning: ``notation.md`` against itself, the chapters and the package.

``notation.md`` has two tables. The *math symbols* table has a row per meaning, with the
chapters that use the symbol in that meaning; the *shape letters* table has a row per
letter of the package's shape tuples, with the math symbol it stands for. The tests:

* a symbol is defined in one row only, a shape letter in one row only, and a letter
  that is both a shape letter and a math symbol means the same thing in both tables;
* every symbol in a chapter's math (``$...$`` and ``$$...$$`` in its markdown cells) is
  defined in ``notation.md`` for that chapter, and no row claims a chapter that no
  longer uses the symbol;
* the shape tuples and shape legends of ``attention_core`` use letters of the table only.

How a formula is read (``symbols_in``): a symbol is a Latin letter, a Greek letter
(``\\alpha`` ... ``\\omega``, ``\\Delta`` ...), a calligraphic letter (``\\mathcal{H}``) or an
upright capitalised name (``\\mathrm{PE}``). Decorations (``\\tilde m``, ``m'``, arrows)
are dropped: a decorated symbol shares the meaning of its base. A subscript is part of
the symbol when ``notation.md`` defines the subscripted symbol (``d_k``, ``h_{kv}``,
``B_q``, ``P_K``); otherwise it is an index, stripped from the symbol and read for the
symbols it uses itself (``R_{p+\\Delta}`` is ``R`` using ``p`` and ``\\Delta``). Superscripts
are read the same way (``10000^{-2i/d_{\\text{model}}}`` uses ``i`` and ``d_{model}``),
except ``^\\top`` and a one-capital label such as ``W^O``. Ignored: ``\\text{}``,
``\\operatorname{}``, lower-case ``\\mathrm{}``, ``\\mathbb{}`` (``\\mathbb{R}``,
``\\mathbb{E}``), function names (``softmax``, ``exp``, ``ln`` ...), digits, Euler's ``e``
when raised to a power, big-O's ``O(`` (and ``\\Theta(``, ``\\Omega(``), and the index letters
in ``INDEX_LETTERS``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTATION = ROOT / "notation.md"
CHAPTER_FILES = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))

# Letters that are only ever dummy indices and are never given a meaning of their own,
# so notation.md does not list them. Keep this small: a letter with a meaning (a position
# p, a head a, a window w) belongs in the table.
INDEX_LETTERS = {
    "i": "index of a query, token or dimension pair (q_i, x_i, theta_i)",
    "j": "index of a key (k_j, alpha_ij)",
    "t": "time step of a decoder or a recurrence (u_t, c_t, alpha_{t,i})",
}

# Bases whose subscripts are labels naming the matrix, never indices or symbols:
# W_q, W_k, W_v, W^O and the score weights of chapter 7 are all "a weight matrix".
LABEL_BASES = {"W"}

# Multi-letter words that are function or operator names, not products of letters.
FUNCTION_NAMES = {
    "softmax", "exp", "ln", "log", "max", "min", "argmax", "arg", "sin", "cos", "tanh",
    "sim", "elu", "relu", "Concat", "Attention", "MultiHead", "SelfAttention", "head",
    "score", "attend", "GRU", "LSTM", "RNN", "Var", "mod", "bmod", "diag", "det", "sgn",
    "output", "bytes", "tokens", "batch", "cost", "block", "if", "otherwise", "and", "or",
}

# LaTeX commands that denote a symbol (Greek letters). \pi is a constant.
GREEK = {
    "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta",
    "vartheta", "iota", "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau",
    "upsilon", "phi", "varphi", "chi", "psi", "omega", "ell",
    "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega",
}
DECORATIONS = {"tilde", "hat", "bar", "vec", "widetilde", "widehat", "overline",
               "overrightarrow", "overleftarrow", "dot", "ddot", "mathbf", "boldsymbol", "bm"}
IGNORED_GROUPS = {"text", "textrm", "textit", "textbf", "operatorname", "mathbb", "begin",
                  "end", "label", "tag", "mathrm"}


# ---------------------------------------------------------------------------- reading math

def _group(s: str, pos: int) -> tuple[str, int]:
    """The argument starting at ``s[pos]``: a braced group, a command or one character."""
    while pos < len(s) and s[pos] == " ":
        pos += 1
    if pos >= len(s):
        return "", pos
    if s[pos] == "{":
        depth, end = 0, pos
        while end < len(s):
            depth += {"{": 1, "}": -1}.get(s[end], 0)
            if depth == 0:
                return s[pos + 1:end], end + 1
            end += 1
        return s[pos + 1:], len(s)
    if s[pos] == "\\":
        m = re.match(r"\\([A-Za-z]+|.)", s[pos:])
        return m.group(0), pos + len(m.group(0))
    return s[pos], pos + 1


@dataclass
class _Atom:
    key: str        # the symbol, e.g. "omega" is "\omega", "d_{model}", "W"
    start: int      # position in the formula, to order the symbols


def _atoms(s: str, keys: set[str] | None, offset: int = 0) -> list[_Atom]:
    """Symbols of formula ``s``; ``keys`` are the subscripted symbols notation.md defines."""
    out: list[_Atom] = []
    pos = 0
    while pos < len(s):
        c = s[pos]
        base = None
        start = pos
        if c == "\\":
            m = re.match(r"\\([A-Za-z]+|.)", s[pos:])
            name = m.group(1)
            pos += len(m.group(0))
            if name in IGNORED_GROUPS or name == "operatorname*":
                arg, pos = _group(s, pos)
                if name == "mathrm" and re.fullmatch(r"[A-Z]{2,}", arg):
                    base = arg                         # \mathrm{PE}: a named symbol
                elif name not in ("mathbb", "begin", "end", "label", "tag"):
                    continue                           # a name; its subscript is still read
                else:
                    continue
            elif name == "mathcal":
                arg, pos = _group(s, pos)
                base = f"\\mathcal{{{arg.strip()}}}"
            elif name in DECORATIONS:
                arg, pos = _group(s, pos)
                inner = _atoms(arg, keys, offset + start)
                if len(inner) == 1 and arg.strip().lstrip("\\").isalpha():
                    base = inner[0].key                # \tilde m is m; \mathbf{x} is x
                else:
                    out.extend(inner)
                    continue
            elif name in ("Theta", "Omega") and re.match(r"\s*(\\(big|Big|left)l?)?\(", s[pos:]):
                continue                               # big-Theta, big-Omega
            elif name in GREEK:
                base = "\\" + name
            else:
                continue                               # \frac, \sum, \cdot, \exp, \left ...
        elif c.isalpha():
            word = re.match(r"[A-Za-z]+", s[pos:]).group(0)
            if word in FUNCTION_NAMES:
                pos += len(word)
                continue
            pos += 1
            if c == "O" and re.match(r"\s*(\\(big|Big|left)l?)?\(", s[pos:]):
                continue                               # big-O
            if c == "e" and s[pos:pos + 1] == "^":
                continue                               # Euler's number
            base = c
        else:
            pos += 1
            continue
        # primes, then subscript and superscript in either order
        while pos < len(s) and s[pos] == "'":
            pos += 1
        sub = sup = None
        for _ in range(2):
            m = re.match(r"\s*([_^])", s[pos:])
            if not m:
                break
            arg, pos = _group(s, pos + len(m.group(0)))
            if m.group(1) == "_":
                sub = arg
            else:
                sup = arg
            while pos < len(s) and s[pos] == "'":
                pos += 1
        key, sub_atoms = base, []
        if sub is not None:
            label = re.sub(r"\\(text|mathrm|textrm|operatorname)\s*\{([^}]*)\}", r"\2", sub)
            label = label.replace("\\", "").replace(" ", "")
            if base in LABEL_BASES:
                pass                                   # W_q is "a weight matrix"
            elif (keys is None and not set(label) <= set("ijtpa0123456789,'+-")) \
                    or (keys is not None and f"{base}_{{{label}}}" in keys):
                key = f"{base}_{{{label}}}"
            else:
                sub_atoms = _atoms(sub, keys, offset + pos)
        if base is not None:
            out.append(_Atom(key, offset + start))
        out.extend(sub_atoms)
        if sup is not None:
            sup_stripped = sup.strip()
            if sup_stripped in ("\\top", "\\intercal", "T") and base is not None and base.isupper():
                pass                                   # a transpose
            elif re.fullmatch(r"[A-Z]", sup_stripped) or sup_stripped in ("\\top", "\\intercal"):
                pass                                   # W^O: a label
            else:
                out.extend(_atoms(sup, keys, offset + pos))
    return out


def symbols_in(formula: str, keys: set[str]) -> list[str]:
    """The symbols formula uses, in order, without index letters."""
    return [a.key for a in _atoms(formula, keys) if a.key not in INDEX_LETTERS]


def test_symbols_in_reads_formulas_as_documented():
    keys = {"d_{k}", "d_{model}", "h_{kv}", "B_{q}", "P_{K}"}
    assert symbols_in(r"\omega_{ij} = q_i \cdot k_j", keys) == ["\\omega", "q", "k"]
    assert symbols_in(r"\alpha_{ij} = \exp(s_{ij}) / \sum_{j'} \exp(s_{ij'})", keys) == ["\\alpha", "s", "s"]
    assert symbols_in(r"\theta_i = 10000^{-2i/d_{\text{model}}}", keys) == ["\\theta", "d_{model}"]
    assert symbols_in(r"\mathrm{PE}_{p+\Delta} = R_\Delta \mathrm{PE}_p", keys) == [
        "PE", "p", "\\Delta", "R", "\\Delta", "PE", "p"]
    assert symbols_in(r"\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V", keys) == ["Q", "K", "d_{k}", "V"]
    assert symbols_in(r"W^O \in \mathbb{R}^{h d_v \times d_{\text{model}}}", keys) == [
        "W", "h", "d", "v", "d_{model}"]
    assert symbols_in(r"\mathcal{H}_i = -\sum_j \alpha_{ij} \ln \alpha_{ij}", keys) == [
        "\\mathcal{H}", "\\alpha", "\\alpha"]
    assert symbols_in(r"l' = l\,e^{m - m'} + \tilde m \text{ if } O(L^2)", keys) == [
        "l", "l", "m", "m", "m", "L"]
    assert symbols_in(r"h / h_{kv},\ B_q \times B_k,\ P_K", keys) == [
        "h", "h_{kv}", "B_{q}", "B", "k", "P_{K}"]
    assert symbols_in(r"\Theta\bigl(T^2 d^2 / M_{\text{sram}}\bigr) + \Theta_i", keys) == [
        "T", "d", "M", "\\Theta"]


# ---------------------------------------------------------------------------- notation.md

@dataclass
class Row:
    table: str            # "math" or "shape"
    line: int
    cells: list[str]
    keys: list[str]       # what the row defines
    chapters: set[int]    # math rows: the chapters that use it
    math: list[str]       # shape rows: the math symbol(s) the letter stands for


def _split_row(line: str) -> list[str]:
    cells, depth, cur = [], 0, ""
    for ch in line.strip().strip("|"):
        if ch == "$":
            depth ^= 1
        if ch == "|" and not depth:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return cells + [cur.strip()]


def _chapters(cell: str) -> set[int]:
    out: set[int] = set()
    for part in re.split(r"[,;]", cell):
        m = re.fullmatch(r"\s*(\d+)\s*(?:[-–]\s*(\d+))?\s*", part)
        if not m:
            raise AssertionError(f"notation.md: cannot read chapters {cell!r}: use e.g. '1-3, 6'")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        out.update(range(lo, hi + 1))
    return out


def _math_segments(text: str) -> list[str]:
    return [a or b for a, b in re.findall(r"\$\$(.+?)\$\$|\$(.+?)\$", text, flags=re.S)]


def _defined_keys(cell: str) -> list[str]:
    """Symbols a table cell defines: the first symbol of each comma-separated formula
    (``$W_q, W_k, W_v$``, ``$m, l$``); a subscript made of index letters, digits and
    signs is an index and is stripped, any other subscript is part of the symbol."""
    keys = []
    for seg in _math_segments(cell):
        for part in seg.split(","):
            atoms = _atoms(part, None)
            if atoms:
                keys.append(atoms[0].key)
    return list(dict.fromkeys(keys))


def read_notation() -> list[Row]:
    rows, table = [], None
    for number, line in enumerate(NOTATION.read_text().splitlines(), 1):
        if not line.startswith("|"):
            table = None if not line.strip() else table
            continue
        cells = _split_row(line)
        header = [c.lower() for c in cells]
        if header[:2] == ["symbol", "meaning"]:
            table = "math"
            continue
        if header[:2] == ["letter", "meaning"]:
            table = "shape"
            continue
        if table is None or set(line) <= set("|-: "):
            continue
        if table == "math":
            rows.append(Row("math", number, cells, _defined_keys(cells[0]),
                            _chapters(cells[2]), []))
        else:
            letters = re.findall(r"`([A-Za-z]+)`", cells[0])
            rows.append(Row("shape", number, cells, letters, set(), _defined_keys(cells[2])))
    return rows


ROWS = read_notation()
MATH = [r for r in ROWS if r.table == "math"]
SHAPE = [r for r in ROWS if r.table == "shape"]
KEYS = {k for r in MATH for k in r.keys}


def test_notation_md_has_both_tables():
    assert len(MATH) > 20 and len(SHAPE) > 10, (
        "notation.md: tables not found (header 'symbol | meaning | chapters | in code', "
        "'letter | meaning | in math | in code')")
    assert all(r.keys for r in MATH), [r.cells[0] for r in MATH if not r.keys]


def test_one_symbol_one_row():
    problems = []
    for rows, what in ((MATH, "symbol"), (SHAPE, "shape letter")):
        seen: dict[str, int] = {}
        for r in rows:
            for k in r.keys:
                if k in seen:
                    problems.append(f"notation.md: {what} {k} has two rows (lines {seen[k]} and {r.line})")
                seen.setdefault(k, r.line)
    for k, why in INDEX_LETTERS.items():
        if k in KEYS:
            problems.append(f"notation.md defines {k}, which the test treats as an index ({why})")
    assert not problems, "\n".join(problems)


def test_a_shape_letter_and_a_math_symbol_agree():
    """A letter used both in shapes and in formulas names the same quantity in both."""
    math_row = {k: r for r in MATH for k in r.keys}
    problems = []
    for r in SHAPE:
        for m in r.math:
            if m not in math_row:
                problems.append(f"notation.md line {r.line}: shape letter {r.keys} stands for {m}, "
                                "which the math table does not define")
        for letter in r.keys:
            if letter in math_row and math_row[letter].keys[0] not in r.math:
                problems.append(f"notation.md: {letter} is a shape letter ({r.cells[1]}, line {r.line}) "
                                f"and a math symbol of another meaning ({math_row[letter].cells[1]}, "
                                f"line {math_row[letter].line})")
    stands_for: dict[str, str] = {}
    for r in SHAPE:
        for m in r.math:
            if m in stands_for:
                problems.append(f"notation.md: shape letters {stands_for[m]} and {r.keys} both stand for {m}")
            stands_for[m] = str(r.keys)
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------- chapters

CODE_DIRECTIVES = {"code-cell", "code-block", "code", "sourcecode"}


def strip_code_blocks(text: str) -> str:
    """Markdown ``text`` with its code blocks blanked, line for line. The title and body of
    a MyST directive (``{exercise}``, ``{solution}``, ``{note}`` ...) are markdown and stay,
    without its fences and ``:option:`` lines; a fenced block without a directive name, or
    a ``{code-cell}``, is code."""
    out: list[str] = []
    stack: list[tuple[str, bool]] = []          # open fences: (fence, holds code)
    for line in text.split("\n"):
        m = re.match(r"\s*(`{3,}|~{3,})\s*(?:\{([^}]*)\})?", line)
        if m:
            fence = m.group(1)
            if stack and line.strip() == fence[0] * len(fence) and fence[0] == stack[-1][0][0] \
                    and len(fence) >= len(stack[-1][0]):
                stack.pop()                      # a closing fence
                out.append("")
                continue
            if not (stack and stack[-1][1]):     # an opening fence (not inside code)
                name = m.group(2)
                code = name is None or name.strip() in CODE_DIRECTIVES
                stack.append((fence, code))
                out.append("" if code else line[m.end():])     # a directive's title stays
                continue
        inside_code = any(code for _, code in stack)
        option = bool(stack) and re.match(r"\s*:[\w-]+:", line)
        out.append("" if inside_code or option else line)
    return "\n".join(out)


def test_strip_code_blocks_keeps_directive_bodies():
    text = ("````{exercise} Two $k_j$\n:label: ex\n\nTake $q_1$.\n```python\nx = '$h$'\n```\n````\n"
            "```\n$s$\n```\nEnd $z_i$.")
    kept = strip_code_blocks(text)
    assert kept.count("\n") == text.count("\n")
    assert re.findall(r"\$(.+?)\$", kept) == ["k_j", "q_1", "z_i"]


def chapter_math(path: Path):
    """``(line, formula)`` for each formula in the chapter's markdown cells, including
    the bodies of directives such as exercises and solutions, not code blocks."""
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = strip_code_blocks("".join(cell["source"]))
        text = re.sub(r"`[^`\n]*`", "", text)
        lines = text.split("\n")
        for m in re.finditer(r"\$\$(.+?)\$\$|(?<!\\)\$(.+?)(?<!\\)\$", text, flags=re.S):
            formula = m.group(1) or m.group(2)
            if "\n\n" in formula:
                continue
            number = text.count("\n", 0, m.start())
            yield lines[number].strip(), formula


def chapter_number(path: Path) -> int:
    return int(path.name[:2])


def chapter_violations(path: Path) -> list[str]:
    ch = chapter_number(path)
    allowed = {k for r in MATH if ch in r.chapters for k in r.keys}
    problems = []
    for line, formula in chapter_math(path):
        for sym in dict.fromkeys(symbols_in(formula, KEYS)):
            if sym not in allowed:
                where = [f"ch {sorted(r.chapters)}: {r.cells[1][:50]}" for r in MATH if sym in r.keys]
                problems.append(f"{path.stem}: {sym} in ${formula.strip()[:70]}$"
                                f"  (line: {line[:90]!r}) -- notation.md "
                                + (f"defines it only for {where[0]}" if where else "does not define it"))
    return problems


@pytest.mark.parametrize("path", CHAPTER_FILES, ids=lambda p: p.stem)
def test_chapter_uses_only_symbols_notation_md_defines_for_it(path):
    problems = chapter_violations(path)
    assert not problems, (
        f"{len(problems)} symbol(s) not in notation.md for chapter {chapter_number(path)}:\n"
        + "\n".join(problems))


def test_notation_md_lists_no_chapter_that_does_not_use_the_symbol():
    used: dict[int, set[str]] = {}
    for path in CHAPTER_FILES:
        used[chapter_number(path)] = {s for _, f in chapter_math(path) for s in symbols_in(f, KEYS)}
    stale = [f"notation.md line {r.line}: {k} is listed for chapter {ch}, whose math does not use it"
             for r in MATH for ch in sorted(r.chapters) if ch in used
             for k in r.keys if k not in used[ch] and not any(x in used[ch] for x in r.keys)]
    assert not stale, "\n".join(stale)


# ---------------------------------------------------------------------------- the package

SHAPE_TUPLE = re.compile(r"(?<![\w)\]])\(([^()\n]*)\)")
SHAPE_ELEMENT = re.compile(r"\s*(\.\.\.|[A-Za-z_][A-Za-z0-9_]*|\d+)"
                           r"(\s*[-+*/]\s*([A-Za-z_][A-Za-z0-9_]*|\d+))*\s*")
LETTER = re.compile(r"\b[A-Z](?:[a-z]{1,2})?\b")


def _docs_and_comments(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every docstring and comment of a Python file."""
    import ast
    import io
    import tokenize

    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
    for parent in ast.walk(ast.parse(source)):
        body = getattr(parent, "body", None)
        if not isinstance(body, list):
            continue
        # the docstring of a module, class or function, and the string after an
        # assignment (an attribute docstring)
        for prev, node in zip([None] + body[:-1], body):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str) \
                    and (prev is None or isinstance(prev, (ast.Assign, ast.AnnAssign))):
                out.append((node.lineno, node.value.value))
    return out


def shape_letters_at(text: str) -> list[tuple[str, int]]:
    """Capital shape letters, with their offsets in ``text``, in ``(B, H, L, E)``-style
    tuples and in the first sentence after "Shape legend:". A tuple counts when it has two or more
    elements, each a name, a number or ``...`` (with ``*+-/`` between), at least one
    capitalised, and no name or closing bracket right before it (``Attention(Q, K, V)``
    is a call). A shape letter is one capital with at most two small letters (``Hkv``)."""
    found = []
    for m in SHAPE_TUPLE.finditer(text):
        elements = m.group(1).split(",")
        if len(elements) < 2 or not all(SHAPE_ELEMENT.fullmatch(e) for e in elements):
            continue
        names = list(re.finditer(r"[A-Za-z_][A-Za-z0-9_]*", m.group(1)))
        if not any(n.group(0)[0].isupper() for n in names):
            continue
        found += [(n.group(0), m.start(1) + n.start()) for n in names if LETTER.fullmatch(n.group(0))]
    legend = re.search(r"Shape legend:(.*?)(\n\s*\n|$)", text, flags=re.S)
    if legend:
        body = re.sub(r"``[^`]*``|\([^()]*\)", lambda x: " " * len(x.group(0)), legend.group(1))
        body = re.split(r"\.(?=\s|$)", body)[0]      # the legend is its first sentence
        found += [(x.group(0), legend.start(1) + x.start()) for x in LETTER.finditer(body)]
    return found


def shape_letters_in(text: str) -> list[str]:
    return [letter for letter, _ in shape_letters_at(text)]


def test_shape_letters_in_reads_tuples_and_legends():
    assert shape_letters_in("``(B, Hkv*num_groups, S, E)`` and (Q, K, V) in Attention(Q, K, V)") == [
        "B", "Hkv", "S", "E", "Q", "K", "V"]
    assert shape_letters_in("(Dao et al., 2022) (s, h) softmax(x)") == []
    assert shape_letters_in("returns ``(logits (B, T, V), weights (B, S) or None)``") == [
        "B", "T", "V", "B", "S"]                   # a tuple inside a parenthesis counts
    assert shape_letters_in("Shape legend: B batch, L query length (the paper's N), Dh hidden. A note.") == [
        "B", "L", "Dh"]


def test_package_shape_letters_are_in_notation_md():
    letters = {k for r in SHAPE for k in r.keys}
    problems = []
    for path in sorted((ROOT / "attention_core").rglob("*.py")):
        for line, text in _docs_and_comments(path.read_text()):
            for letter, offset in shape_letters_at(text):
                if letter not in letters:
                    where = line + text.count("\n", 0, offset)
                    context = text.splitlines()[text.count("\n", 0, offset)].strip()[:90]
                    problems.append(f"{path.relative_to(ROOT)}:{where}: shape letter {letter} is not in "
                                    f"notation.md ({context!r})")
    assert not problems, "\n".join(problems)
