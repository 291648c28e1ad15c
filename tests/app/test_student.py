"""Exercises in the workbooks and `vrs student`: student copies without solutions, scorecard checks and outputs;
`vrs workbooks DIR --students`: a seminar's two folders in one step (issue 53)."""

import ast

import nbformat
import pytest

from conftest import ROOT
from vrs_helpers.app import student
from vrs_helpers.app.cli import main

WORKBOOKS = sorted((ROOT / "notebooks").glob("0[1-7]_*.ipynb"))


def _cell(kind, source, tags=(), outputs=None):
    cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
    if tags:
        cell.metadata["tags"] = list(tags)
    if kind == "code":
        cell.execution_count = 3
        cell.outputs = outputs if outputs is not None else [nbformat.v4.new_output("stream", name="stdout", text="hi")]
    return cell


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"duration": 1.0}
    nb.cells = list(cells)
    return nb


def _toy():
    return _nb(_cell("code", "x = 1", tags=["parameters"]),
               _cell("markdown", "## Exercise 1: compute y", tags=["exercise"]),
               _cell("code", "y = 2 * x\nassert y == 2", tags=["solution"]),
               _cell("markdown", "Why is y even?", tags=["solution"]),
               _cell("markdown", "## Exercise 2", tags=["exercise"]),
               _cell("code", "assert x + 1 == 2", tags=["solution"]))


def test_student_copy_drops_solutions_and_outputs():
    nb = _toy()
    before = nbformat.writes(nb)
    copy = student.student_notebook(nb)
    assert nbformat.writes(nb) == before                      # the source node is not modified
    assert student.solution_cells(copy) == []
    assert [c.source for c in copy.cells if "exercise" in c.metadata.get("tags", [])] == [
        "## Exercise 1: compute y", "## Exercise 2"]
    tags = [c.metadata.get("tags", []) for c in copy.cells]
    assert tags == [["parameters"], ["exercise"], ["answer"], ["exercise"], ["answer"]]
    code = [c for c in copy.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert "papermill" not in copy.metadata
    nbformat.validate(copy)
    # deterministic: the same source gives the same copy (answer cell ids derive from the exercise ids)
    assert nbformat.writes(student.student_notebook(nb)) == nbformat.writes(copy)
    bare = student.student_notebook(nb, placeholder=False)
    assert [c.metadata.get("tags", []) for c in bare.cells] == [["parameters"], ["exercise"], ["exercise"]]


def test_notebooks_without_solutions_or_with_misplaced_ones_are_refused():
    with pytest.raises(student.StudentError, match="no cells tagged 'solution'"):
        student.student_notebook(_nb(_cell("markdown", "task", tags=["exercise"])), name="plain.ipynb")
    with pytest.raises(student.StudentError, match="comes before any cell tagged 'exercise'"):
        student.student_notebook(_nb(_cell("code", "1", tags=["solution"]), _cell("markdown", "t", tags=["exercise"])))
    with pytest.raises(student.StudentError, match="both 'exercise' and 'solution'"):
        student.student_notebook(_nb(_cell("markdown", "t", tags=["exercise", "solution"])))


def test_cli_writes_copies_and_never_overwrites_the_source(tmp_path, capsys):
    src = tmp_path / "nb.ipynb"
    nbformat.write(_toy(), str(src))
    original = src.read_bytes()
    out = tmp_path / "students" / "deep"
    assert main(["student", str(src), "--out", str(out)]) == 0
    copy = nbformat.read(str(out / "nb.ipynb"), as_version=4)
    assert student.solution_cells(copy) == [] and len(student.exercise_cells(copy)) == 2
    assert str(out / "nb.ipynb") in capsys.readouterr().out
    # the source folder as output would overwrite the solutions: refused, nothing changed
    assert main(["student", str(src), "--out", str(tmp_path)]) == 2
    assert "choose another output folder" in capsys.readouterr().err
    assert src.read_bytes() == original
    # a notebook without solutions: clear message, non-zero exit, and nothing written for the good one either
    plain = tmp_path / "plain.ipynb"
    nbformat.write(_nb(_cell("code", "1")), str(plain))
    assert main(["student", str(src), str(plain), "--out", str(tmp_path / "none")]) == 2
    assert "plain.ipynb has no cells tagged 'solution'" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()
    assert main(["student", str(tmp_path / "missing.ipynb"), "--out", str(tmp_path / "m")]) == 2  # bad input
    assert "No notebook at" in capsys.readouterr().err


@pytest.mark.parametrize("path", WORKBOOKS, ids=lambda p: p.stem)
def test_every_workbook_has_validated_exercises(path):
    nb = nbformat.read(str(path), as_version=4)
    exercises, solutions = student.exercise_cells(nb), student.solution_cells(nb)
    assert 2 <= len(exercises) <= 4 and len(solutions) >= 2
    student.check_exercises(nb, path.name)
    summary = max(i for i, c in enumerate(nb.cells) if "nbval-check-output" in c.metadata.get("tags", []))
    if path.name < "07":   # the book workbooks: exercises inline, after the section they practise (issue 53)
        assert exercises[0] < summary and exercises[-1] < summary
    for i in solutions:
        cell = nb.cells[i]
        assert cell.cell_type == "code", f"solution cell {i} of {path.name} is not code"
        # executed with the notebook (nbval re-executes it) and validated: it checks its result with assert
        assert cell.execution_count is not None and not any(o.get("output_type") == "error" for o in cell.outputs)
        assert any(isinstance(node, ast.Assert) for node in ast.walk(ast.parse(cell.source))), (
            f"solution cell {i} of {path.name} checks nothing")
    # every exercise has at least one solution before the next exercise
    bounds = exercises + [len(nb.cells)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        assert any(start < i < end for i in solutions), f"exercise cell {start} of {path.name} has no solution"


def test_student_copies_of_the_workbooks(tmp_path):
    written = student.write_student_copies(WORKBOOKS, tmp_path)
    assert [p.name for p in written] == [p.name for p in WORKBOOKS]
    for path, src in zip(written, WORKBOOKS, strict=True):
        copy = nbformat.read(str(path), as_version=4)
        source = nbformat.read(str(src), as_version=4)
        assert student.solution_cells(copy) == []
        assert not any(c.get("outputs") for c in copy.cells if c.cell_type == "code")
        assert len(student.exercise_cells(copy)) == len(student.exercise_cells(source))
        kept = [c.id for c in source.cells if not {"solution", "check"} & set(c.metadata.get("tags", []))]
        assert [c.id for c in copy.cells if "answer" not in c.metadata.get("tags", [])] == kept
        assert student.check_cells(copy) == [] and not any(
            "nbval-check-output" in c.metadata.get("tags", []) for c in copy.cells)


def test_vrs_student_strips_workbook_07(tmp_path, capsys):
    """Issue 22: workbook 07 has exercises too (>= 2 solution cells); `vrs student` strips them, and `vrs
    analyze` runs 07 without its exercises (student.without_exercises)."""
    src = ROOT / "notebooks" / "07_your_evaluation.ipynb"
    nb = nbformat.read(str(src), as_version=4)
    assert len(student.solution_cells(nb)) >= 2
    assert main(["student", str(src), "--out", str(tmp_path)]) == 0
    copy = nbformat.read(str(tmp_path / src.name), as_version=4)
    assert student.solution_cells(copy) == [] and len(student.exercise_cells(copy)) == len(student.exercise_cells(nb))
    assert str(tmp_path / src.name) in capsys.readouterr().out
    bare = student.without_exercises(nb)
    assert student.solution_cells(bare) == student.exercise_cells(bare) == []
    assert len(bare.cells) == len(nb.cells) - len(student.solution_cells(nb)) - len(student.exercise_cells(nb))


def _checked_toy():
    """A master workbook of issue 53's kind: scorecard bookkeeping tagged 'check', an exercise with its solution and
    its public check."""
    return _nb(_cell("code", "x = 1", tags=["parameters"]),
               _cell("code", "card = Scorecard('toy')", tags=["check"]),
               _cell("markdown", "## Scorecard", tags=["check"]),
               _cell("markdown", "**Exercise 3.1.** Compute alpha.", tags=["exercise"]),
               _cell("code", "alpha_by_hand = 0.640625\nassert alpha_by_hand > 0", tags=["solution"]),
               _cell("code", 'check("3.1", alpha_by_hand)', tags=["exercise-check", "nbval-check-output"]),
               _cell("code", "card.finish()", tags=["check", "nbval-check-output"]))


def test_student_copy_drops_check_cells_and_keeps_the_public_checks():
    copy = student.student_notebook(_checked_toy())
    assert [c.source for c in copy.cells] == [
        "x = 1", "**Exercise 3.1.** Compute alpha.",
        "alpha_by_hand = ...  # your answer: one number, nominal α of the twelve items, between -1 and 1, to 3 "
        "decimals (e.g. 0.123)", 'check("3.1", alpha_by_hand)']
    assert [c.metadata.get("tags", []) for c in copy.cells] == [["parameters"], ["exercise"], ["answer"],
                                                                ["exercise-check"]]
    assert student.without_exercises(_checked_toy()).cells[-1].source == "card.finish()"


def test_vrs_workbooks_students_makes_both_folders(tmp_path, capsys):
    """`vrs workbooks DIR --students`: DIR/students (student copies; workbooks without exercises as they are, with a
    note) and DIR/solutions (every workbook as it is, and the scorecard baseline), exit 0; never overwriting without
    --force (exit 2, nothing written)."""
    from vrs_helpers.resources import workbooks

    masters = workbooks()
    dest = tmp_path / "seminar"
    assert main(["workbooks", str(dest), "--students"]) == 0
    out = capsys.readouterr().out
    assert [p.name for p in sorted((dest / "students").glob("*.ipynb"))] == [p.name for p in masters]
    assert [p.name for p in sorted((dest / "solutions").glob("*.ipynb"))] == [p.name for p in masters]
    assert (dest / "solutions" / "scorecard_baseline.csv").is_file()
    without = []
    for src in masters:
        master = nbformat.read(str(src), as_version=4)
        copy = nbformat.read(str(dest / "students" / src.name), as_version=4)
        assert (dest / "solutions" / src.name).read_bytes() == src.read_bytes()
        assert student.solution_cells(copy) == [] and student.check_cells(copy) == [] or not student.has_exercises(
            master)
        if not student.has_exercises(master):
            without.append(src.name)
            assert (dest / "students" / src.name).read_bytes() == src.read_bytes()
            assert f"note: {src.name} has no exercises: copied to the students' folder as it is." in out
    assert without, "the test needs a workbook without exercises"
    assert "student copies in" in out and "with their solutions in" in out
    before = (dest / "students" / masters[0].name).read_bytes()
    (dest / "students" / masters[0].name).write_text("changed by a student")
    assert main(["workbooks", str(dest), "--students"]) == 2
    assert "nothing was written" in capsys.readouterr().err
    assert (dest / "students" / masters[0].name).read_text() == "changed by a student"
    assert main(["workbooks", str(dest), "--students", "--force"]) == 0
    assert (dest / "students" / masters[0].name).read_bytes() == before
    (tmp_path / "file").write_text("x")
    assert main(["workbooks", str(tmp_path / "file"), "--students"]) == 2
    assert "is not a folder" in capsys.readouterr().err
