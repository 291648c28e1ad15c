"""Student copies of the workbooks: the exercises without their solutions (``vrs student``, ``vrs workbooks DIR
--students``).

An exercise is a markdown cell tagged ``exercise``, placed after the section it practises; its solution is one or
more cells tagged ``solution`` after it, executed and validated with the rest of the notebook (they end with
``assert`` statements, so nbval fails when a solution is wrong), and its public check a code cell tagged
``exercise-check`` (``check("3.1", answer)``, :mod:`vrs_helpers.app.exercises`). The reproduction's bookkeeping -
scorecard checks, the numbers the prose states, ``record()`` - is in cells tagged ``check``: run by ``vrs
reproduce``, nbval and CI, collapsed on the report site, and not part of a student's reading.

A student copy (:func:`student_notebook`) drops the solution cells and the ``check`` cells, clears every output and
execution count, keeps the exercises and their public checks and puts a code cell tagged ``answer`` after each
exercise: the answer's variables set to ``...`` when a public check follows (the copy runs from top to bottom and
each check says "no answer yet"), else an empty cell. Course material is kept this way in e.g. Downey's *Think
Stats* (student and solution notebooks from one source).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from ..errors import VRSError

EXERCISE_TAG = "exercise"
SOLUTION_TAG = "solution"
ANSWER_TAG = "answer"
ANSWER_PLACEHOLDER = "# Your answer here.\n"
CHECK_TAG = "check"                 # bookkeeping of the reproduction: scorecard checks, checked prose numbers
EXERCISE_CHECK_TAG = "exercise-check"   # an exercise's public check, kept in student copies
NBVAL_TAG = "nbval-check-output"


class StudentError(VRSError, ValueError):
    """A notebook that cannot give a student copy (no solution cells, a solution without an exercise), or an
    output that would overwrite a source notebook."""


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def solution_cells(nb) -> list[int]:
    """Indices of the cells tagged ``solution``."""
    return [i for i, c in enumerate(nb.cells) if SOLUTION_TAG in _tags(c)]


def exercise_cells(nb) -> list[int]:
    """Indices of the cells tagged ``exercise``."""
    return [i for i, c in enumerate(nb.cells) if EXERCISE_TAG in _tags(c)]


def check_exercises(nb, name: str = "notebook") -> None:
    """Raise :class:`StudentError` unless ``nb`` has solution cells and each follows an exercise cell."""
    solutions, exercises = solution_cells(nb), exercise_cells(nb)
    if not solutions:
        raise StudentError(f"{name} has no cells tagged '{SOLUTION_TAG}': there is nothing to remove for a student "
                           f"copy. Tag each solution cell '{SOLUTION_TAG}' (and its task '{EXERCISE_TAG}').")
    both = set(solutions) & set(exercises)
    if both:
        raise StudentError(f"{name}: cell {min(both)} is tagged both '{EXERCISE_TAG}' and '{SOLUTION_TAG}'; the "
                           f"task would be removed with its solution.")
    if not exercises or solutions[0] < exercises[0]:
        raise StudentError(f"{name}: solution cell {solutions[0]} comes before any cell tagged '{EXERCISE_TAG}'; "
                           f"every solution follows the exercise it solves.")


def check_cells(nb) -> list[int]:
    """Indices of the cells tagged ``check`` (the reproduction's bookkeeping)."""
    return [i for i, c in enumerate(nb.cells) if CHECK_TAG in _tags(c)]


def has_exercises(nb) -> bool:
    """Whether ``nb`` has solution cells to remove (a notebook without them is copied as it is)."""
    return bool(solution_cells(nb))


def _answer_cell(exercise, index: int, source: str = ANSWER_PLACEHOLDER):
    import nbformat

    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = [ANSWER_TAG]
    base = str(exercise.get("id") or f"exercise-{index}")
    cell["id"] = f"{base[:57]}-answer"   # deterministic: the same source gives the same student copy
    return cell


def student_notebook(nb, placeholder: bool = True, name: str = "notebook"):
    """The student copy of ``nb`` (an ``nbformat`` v4 node; not modified): cells tagged ``solution`` or ``check``
    removed, outputs and execution counts cleared, exercise cells and their public checks kept, and
    (``placeholder``) a code cell tagged ``answer`` after each exercise (the answer's variables set to ``...`` when
    a public check follows, :func:`vrs_helpers.app.exercises.placeholder_source`). Raises :class:`StudentError`
    when ``nb`` has no solution cells."""
    from .exercises import placeholder_source

    check_exercises(nb, name)
    out = copy.deepcopy(nb)
    out.metadata.pop("papermill", None)
    kept = [c for c in out.cells if not {SOLUTION_TAG, CHECK_TAG} & set(_tags(c))]
    cells = []
    for i, cell in enumerate(kept):
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        for key in ("papermill", "execution"):
            cell.metadata.pop(key, None)
        if NBVAL_TAG in _tags(cell):
            cell.metadata["tags"] = [t for t in _tags(cell) if t != NBVAL_TAG]
        cells.append(cell)
        if placeholder and EXERCISE_TAG in _tags(cell):
            following = kept[i + 1] if i + 1 < len(kept) else None
            source = (placeholder_source(following.source)
                      if following is not None and EXERCISE_CHECK_TAG in _tags(following) else None)
            cells.append(_answer_cell(cell, i, source or ANSWER_PLACEHOLDER))
    out.cells = cells
    return out


def write_student_copies(notebooks, out_dir: str | os.PathLike, placeholder: bool = True) -> list[Path]:
    """Write the student copy of each notebook to ``out_dir`` (created) under the same name.

    Every notebook is read and checked before anything is written, so one bad notebook writes nothing; an output
    path that is one of the sources is refused (a student copy never replaces its solution notebook).
    """
    import nbformat

    sources = [Path(n) for n in notebooks]
    if not sources:
        raise StudentError("no notebooks given.")
    out = Path(out_dir)
    targets = [out / src.name for src in sources]
    resolved = {src.resolve() for src in sources}
    for src, dst in zip(sources, targets, strict=True):
        if not src.is_file():
            raise StudentError(f"No notebook at {src}.")
        if dst.resolve() in resolved:
            raise StudentError(f"{dst} is a source notebook; choose another output folder (--out) so that the "
                               f"solutions are not overwritten.")
    if len(set(targets)) < len(targets):
        raise StudentError("two notebooks have the same name; give them separate runs with separate --out folders.")
    copies = [student_notebook(nbformat.read(str(src), as_version=4), placeholder, src.name) for src in sources]
    out.mkdir(parents=True, exist_ok=True)
    for nb, dst in zip(copies, targets, strict=True):
        partial = dst.with_name(f".{dst.name}.partial")
        nbformat.write(nb, str(partial))
        os.replace(partial, dst)
    return targets


def without_exercises(nb):
    """A copy of ``nb`` without its exercise and solution cells (``vrs analyze``'s report on your own data: the
    workbook's analyses, not its course material)."""
    out = copy.deepcopy(nb)
    out.cells = [c for c in out.cells if not {EXERCISE_TAG, SOLUTION_TAG, EXERCISE_CHECK_TAG} & set(_tags(c))]
    return out


def report_notebook(src: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Write :func:`without_exercises` of the notebook ``src`` to ``dest`` and return ``dest``."""
    import nbformat

    nbformat.write(without_exercises(nbformat.read(str(src), as_version=4)), str(dest))
    return Path(dest)


def seminar_copies(notebooks, dest: str | os.PathLike, force: bool = False) -> tuple[list[Path], list[Path], list[str]]:
    """A seminar's two folders from the workbooks (``vrs workbooks DIR --students``): ``dest/solutions`` (each
    workbook as it is, with solutions, checks and outputs) and ``dest/students`` (the student copy of each workbook
    with exercises, :func:`student_notebook`; a workbook without exercises copied as it is). Returns the solution
    paths, the student paths and a note per workbook copied without exercises. Every notebook is read and made
    before anything is written; an existing file is never overwritten unless ``force`` (nothing is written then)."""
    import nbformat

    sources = [Path(n) for n in notebooks]
    solutions, students = Path(dest) / "solutions", Path(dest) / "students"
    for folder in (Path(dest), solutions, students):
        if folder.exists() and not folder.is_dir():
            raise StudentError(f"{folder} exists and is not a folder; name a folder for the seminar's copies.")
    clash = [d / s.name for s in sources for d in (solutions, students) if (d / s.name).exists()]
    if clash and not force:
        raise StudentError(f"{len(clash)} file(s) already there (e.g. {clash[0]}); nothing was written. Choose an "
                           f"empty folder, or pass --force to overwrite them.")
    made, notes = [], []
    for src in sources:
        nb = nbformat.read(str(src), as_version=4)
        if has_exercises(nb):
            made.append(student_notebook(nb, name=src.name))
        else:
            made.append(nb)
            notes.append(f"{src.name} has no exercises: copied to the students' folder as it is.")
    written_solutions, written_students = [], []
    for folder in (solutions, students):
        folder.mkdir(parents=True, exist_ok=True)
    for src, nb in zip(sources, made, strict=True):
        for folder, node, written in ((solutions, None, written_solutions), (students, nb, written_students)):
            dst = folder / src.name
            partial = dst.with_name(f".{dst.name}.partial")
            if node is None:
                partial.write_bytes(src.read_bytes())
            else:
                nbformat.write(node, str(partial))
            os.replace(partial, dst)
            written.append(dst)
    return written_solutions, written_students, notes


def seminar(dest: str | os.PathLike, force: bool = False) -> list[str]:
    """Write a seminar's copies of every workbook (:func:`seminar_copies`) and the scorecard baseline beside the
    solutions (their scorecard checks read it, as in a checkout); returns the lines ``vrs workbooks DIR
    --students`` prints."""
    import shutil

    from ..resources import workbooks, workbooks_dir

    solutions, students, notes = seminar_copies(workbooks(), dest, force=force)
    baseline = workbooks_dir() / "scorecard_baseline.csv"
    if baseline.is_file():
        shutil.copyfile(baseline, Path(dest) / "solutions" / baseline.name)
    root = Path(dest).resolve()
    return ([f"{len(students)} student copies in {root / 'students'} (no solutions, no scorecard checks; each "
             f"exercise has its public check, check(\"3.1\", answer))",
             f"{len(solutions)} workbooks with their solutions in {root / 'solutions'}"]
            + [f"note: {n}" for n in notes]
            + [f"Give the students the folder students/ (jupyter lab {Path(dest) / 'students'}); the lecturer's page "
               "of the guide: Teaching with the workbooks (docs/teaching.md)."])
