"""pyproject.toml and environment.yml list the same packages; the README lists every notebook and the scorecard's
counts (the guide's tables: tests/test_docs.py)."""

import re
from pathlib import Path

import yaml

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def _name(req: str) -> str:
    return re.split(r"[<>=!~ \[;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_matches_pyproject():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in py["dependencies"]} | {_name(r) for r in py["optional-dependencies"]["dev"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = {_name(d) for d in env["dependencies"] if isinstance(d, str)} - {"python", "pip"}
    conda |= {_name(d) for entry in env["dependencies"] if isinstance(entry, dict) for d in entry.get("pip", [])}
    assert conda == wanted, f"only in pyproject: {wanted - conda}; only in environment.yml: {conda - wanted}"


def test_readme_lists_every_notebook_and_two_commands():
    readme = (ROOT / "README.md").read_text()
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        assert nb.name in readme, f"README does not list {nb.name}"
    assert "make reproduce" in readme and "make test" in readme


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_every_notebook_has_a_parameters_cell():
    import nbformat

    for nb_path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(str(nb_path), as_version=4)
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{nb_path.name} needs exactly one cell tagged 'parameters'"


def test_papermill_parses_every_parameter():
    """Every assignment in a parameters cell must be visible to papermill (a comment it cannot parse hides the
    parameter: `vrs run -p` would then warn about an unknown parameter)."""
    import ast

    import nbformat
    import papermill as pm

    for nb_path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(str(nb_path), as_version=4)
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        assigned = [t.id for node in ast.parse(cell.source).body if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)]
        assert list(pm.inspect_notebook(str(nb_path))) == assigned, nb_path.name


def test_readme_scorecard_counts_are_the_baseline():
    """The README's scorecard counts are those of the committed statuses, book rows apart from reference rows
    (issue 23: reference rows check the implementation, not the book)."""
    import pandas as pd

    base = pd.read_csv(ROOT / "notebooks" / "scorecard_baseline.csv", dtype=str, keep_default_na=False)
    readme = (ROOT / "README.md").read_text()
    book, ref = base[base["kind"] == "book"], base[base["kind"] == "reference"]
    assert len(book) + len(ref) == len(base)

    def counts(rows, statuses):
        c = rows["match"].value_counts()
        return ", ".join(f"{int(c.get(s, 0))} {s}" for s in statuses)

    assert f"{len(book)} book rows: {counts(book, ('true', 'explained', 'false'))}" in readme
    assert f"{len(ref)} reference rows: {counts(ref, ('true', 'false'))}" in readme
    assert set(ref["match"]) <= {"true", "false"}   # nothing explains a reference row


def test_every_subpackage_ships_in_the_wheel():
    """Every folder of vrs_helpers with an __init__.py is a package pyproject.toml lists (an explicit list, because
    the workbooks, book tables and guide are mapped in from other folders): a new subpackage left out of it would be
    missing from the wheel."""
    try:
        import tomllib
    except ModuleNotFoundError:   # Python 3.10
        import tomli as tomllib
    root = Path(__file__).resolve().parent.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(root).parts) for p in (root / "vrs_helpers").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)
