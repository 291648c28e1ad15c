"""The workbooks read like the book (issue 27): no function or class defined in a notebook cell (helpers live in the
package, with tests), no code cell over 40 lines, each section's prose before its code, and the committed outputs
hold no warning a reader cannot act on (no stderr, no error, no Python warning, nothing from tqdm).

Every notebook in notebooks/ is checked, the committed file as it is (its outputs are those of the published
pages: ``vrs run --inplace`` writes them)."""

import ast
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAX_LINES = 40
#: the text Python's warnings module writes ("UserWarning: ...", "TqdmWarning: IProgress not found ...")
WARNING_TEXT = re.compile(r"\b[A-Z]\w*Warning\b:")


def _code_cells(path):
    nb = nbformat.read(str(path), as_version=4)
    return [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def _definitions(source: str) -> list[str]:
    """def, class, and a lambda bound to a name (``f = lambda ...``, ``f: T = lambda ...``, ``(f := lambda ...)``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(f"def {node.name}")
        elif isinstance(node, ast.ClassDef):
            found.append(f"class {node.name}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and isinstance(node.value, ast.Lambda):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [f"{ast.unparse(t)} = lambda" for t in targets]
    return found


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 7, NOTEBOOKS


@pytest.mark.parametrize("source, expected", [
    ("def f(x):\n    return x", ["def f"]),
    ("class A:\n    pass", ["class A"]),
    ("f = lambda x: x  # noqa: E731", ["f = lambda"]),
    ("g: object = lambda: 0", ["g = lambda"]),
    ("print((h := lambda: 1)())", ["h = lambda"]),
    ("d = {}\nd['k'] = lambda: 0", ["d['k'] = lambda"]),
    ("sorted(xs, key=lambda x: -x)\ntree = partial(max, 0)", []),
    ("with notes():\n    fit = model.fit()\nfor k in range(3):\n    print(k)", []),
])
def test_the_definition_check_sees_definitions(source, expected):
    """Control: the check finds what it looks for and nothing else (a lambda passed as an argument is an
    expression, not a helper defined in the notebook)."""
    assert _definitions(source) == expected


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_function_or_class_in_a_code_cell(path):
    found = [f"cell {i}: {d}" for i, c in _code_cells(path) for d in _definitions(c.source)]
    assert not found, f"{path.name} defines helpers in its cells (move them to the package, with a test): {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_code_cell_over_40_lines(path):
    long = {i: n for i, c in _code_cells(path) if (n := len(c.source.splitlines())) > MAX_LINES}
    assert not long, f"{path.name}: code cells over {MAX_LINES} lines (cell: lines): {long}"


def _stderr_like(output) -> str:
    """What of an output a reader would see as a warning or an error ("" for a clean output)."""
    kind = output.get("output_type")
    if kind == "error":
        return f"error {output.get('ename')}: {output.get('evalue')}"
    if kind == "stream" and output.get("name") == "stderr":
        return f"stderr: {output.get('text', '')[:200]!r}"
    texts = [output.get("text", "")] + [v for k, v in output.get("data", {}).items()
                                        if k.startswith("text/") and isinstance(v, str)]
    for text in texts:
        if WARNING_TEXT.search(text) or "tqdm" in text.lower():
            return f"{kind}: {text[:200]!r}"
    return ""


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_outputs_hold_no_warning(path):
    """The committed outputs are executed (every code cell that is not a solution has run) and show no stderr box,
    no error, no Python warning and no progress bar: what the published page shows a reader."""
    cells = _code_cells(path)
    bad = [f"cell {i}: {why}" for i, c in cells for o in c.get("outputs", []) if (why := _stderr_like(o))]
    assert not bad, f"{path.name}: {bad}"
    assert any(c.get("outputs") for _, c in cells), f"{path.name} has no outputs: run `vrs run {path.stem} --inplace`"


def test_the_output_check_sees_warnings():
    """Control: the warning the workbooks showed before issue 27 (tqdm.auto in a kernel without ipywidgets) and
    other stderr output are found; a plain note is not a warning."""
    tqdm_box = nbformat.v4.new_output("stream", name="stderr", text="auto.py:21: TqdmWarning: IProgress not found.")
    assert _stderr_like(tqdm_box)
    assert _stderr_like(nbformat.v4.new_output("stream", name="stdout", text="x.py:3: UserWarning: careful"))
    assert _stderr_like(nbformat.v4.new_output("error", ename="ValueError", evalue="bad", traceback=[]))
    note = nbformat.v4.new_output("display_data", data={"text/plain": "note: boundary (singular) fit: ..."})
    assert not _stderr_like(note)


def test_nothing_imports_the_notebook_progress_bar():
    """tqdm.auto (and tqdm.notebook) warn in a kernel without ipywidgets; the package and the workbooks use tqdm's
    text bar, which the runner strips from executed notebooks."""
    pattern = re.compile(r"(from|import)\s+tqdm\.(auto|notebook|autonotebook)\b")
    sources = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in (ROOT / "vrs_helpers").rglob("*.py")}
    sources.update({f"{p.name} cell {i}": c.source for p in NOTEBOOKS for i, c in _code_cells(p)})
    assert not [name for name, text in sources.items() if pattern.search(text)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_section_opens_with_prose(path):
    """A section (a ``##`` heading) that goes on with code says in words, before the code, what it computes."""
    nb = nbformat.read(str(path), as_version=4)
    bare = []
    for i, cell in enumerate(nb.cells[:-1]):
        lines = [line for line in cell.source.splitlines() if line.strip()]
        if cell.cell_type == "markdown" and lines and lines[0].startswith("## ") and len(lines) == 1 \
                and nb.cells[i + 1].cell_type == "code":
            bare.append(lines[0])
    assert not bare, f"{path.name}: sections whose code comes before any prose: {bare}"


# ------------------------------------------------------------------ issue 53: a companion a seminar can teach from

BOOK_WORKBOOKS = sorted((ROOT / "notebooks").glob("0[1-6]_*.ipynb"))
CHECK_TAG = "check"   # the reproduction's bookkeeping (vrs_helpers.app.student.CHECK_TAG)


def prose_and_code(nb) -> tuple[int, int]:
    """Characters of Markdown and of code, not counting the cells tagged ``check`` (the scorecard's checks, the
    numbers the prose states, ``record()``: collapsed on the site, not in a student's copy)."""
    counted = [c for c in nb.cells if CHECK_TAG not in c.metadata.get("tags", [])]
    return (sum(len(c.source) for c in counted if c.cell_type == "markdown"),
            sum(len(c.source) for c in counted if c.cell_type == "code"))


def _calls_a_helper(source: str) -> bool:
    """Whether code calls a name it imports from vrs_helpers (``load(...)``, ``v.hans_style_pairs(...)``)."""
    tree = ast.parse(source)
    helpers = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
               and (node.module or "").startswith("vrs_helpers") for alias in node.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            root = node.func
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in helpers:
                return True
    return False


def test_the_ratio_check_counts_what_it_says():
    """Control: check cells are not counted; the helper check sees a vrs_helpers call, not numpy's."""
    nb = nbformat.v4.new_notebook()
    md, code, bookkeeping = (nbformat.v4.new_markdown_cell("a" * 10), nbformat.v4.new_code_cell("b" * 4),
                             nbformat.v4.new_code_cell("c" * 100))
    bookkeeping.metadata["tags"] = [CHECK_TAG]
    nb.cells = [md, code, bookkeeping]
    assert prose_and_code(nb) == (10, 4)
    assert _calls_a_helper("from vrs_helpers.book.data import load\nx = load('mnli')")
    assert _calls_a_helper("from vrs_helpers.book import validity as v\nh = v.hans_style_pairs(5)")
    assert not _calls_a_helper("import numpy as np\nx = np.zeros(3)")
    assert not _calls_a_helper("from vrs_helpers.book import plots")


@pytest.mark.parametrize("path", BOOK_WORKBOOKS, ids=lambda p: p.stem)
def test_a_book_workbook_reads_as_prose_with_short_code(path):
    """Issue 53: at least as many Markdown characters as code characters (check cells not counted); no
    interpretation written by code (``display(Markdown(f"...``); the first code cell after the introduction (the
    parameters and check cells aside) loads data or calls a helper."""
    nb = nbformat.read(str(path), as_version=4)
    prose, code = prose_and_code(nb)
    assert prose >= code, f"{path.name}: {prose} Markdown characters < {code} code characters"
    f_markdown = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                  and re.search(r"display\(\s*Markdown\(\s*f[\"']", c.source)]
    assert not f_markdown, f"{path.name}: interpretation written by f-strings in cells {f_markdown}"
    first = next(c for c in nb.cells if c.cell_type == "code"
                 and not {"parameters", CHECK_TAG} & set(c.metadata.get("tags", [])))
    assert _calls_a_helper(first.source), f"{path.name}: the first code cell neither loads data nor calls a helper"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


@pytest.mark.parametrize("path", BOOK_WORKBOOKS, ids=lambda p: p.stem)
def test_check_cells_are_collapsed_in_jupyterlab_too(path):
    """The check cells of the book workbooks open collapsed in JupyterLab (``jupyter.source_hidden``, and for code
    ``outputs_hidden``: JupyterLab's own cell metadata), as on the report site; every workbook has some."""
    nb = nbformat.read(str(path), as_version=4)
    checks = [c for c in nb.cells if CHECK_TAG in c.metadata.get("tags", [])]
    assert len(checks) >= 5, path.name
    for c in checks:
        hidden = c.metadata.get("jupyter", {})
        assert hidden.get("source_hidden") is True, (path.name, c.source[:60])
        assert c.cell_type == "markdown" or hidden.get("outputs_hidden") is True, (path.name, c.source[:60])
