"""Student copies of the workbooks: the exercises without their solutions (``vrs student``).

Every workbook ends with exercises. An exercise is a markdown cell tagged ``exercise``; its solution is one or more
cells tagged ``solution`` after it, executed and validated with the rest of the notebook (they end with ``assert``
statements, so nbval fails when a solution is wrong). A student copy (:func:`student_notebook`) drops the solution
cells, clears every output and execution count, keeps the exercise cells and puts an empty code cell tagged
``answer`` after each exercise. Course material is kept this way in e.g. Downey's *Think Stats* (student and
solution notebooks from one source).
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


def _answer_cell(exercise, index: int):
    import nbformat

    cell = nbformat.v4.new_code_cell(ANSWER_PLACEHOLDER)
    cell.metadata["tags"] = [ANSWER_TAG]
    base = str(exercise.get("id") or f"exercise-{index}")
    cell["id"] = f"{base[:57]}-answer"   # deterministic: the same source gives the same student copy
    return cell


def student_notebook(nb, placeholder: bool = True, name: str = "notebook"):
    """The student copy of ``nb`` (an ``nbformat`` v4 node; not modified): cells tagged ``solution`` removed,
    outputs and execution counts cleared, exercise cells kept, and (``placeholder``) an empty code cell tagged
    ``answer`` after each exercise. Raises :class:`StudentError` when ``nb`` has no solution cells."""
    check_exercises(nb, name)
    out = copy.deepcopy(nb)
    out.metadata.pop("papermill", None)
    cells = []
    for i, cell in enumerate(out.cells):
        if SOLUTION_TAG in _tags(cell):
            continue
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        for key in ("papermill", "execution"):
            cell.metadata.pop(key, None)
        cells.append(cell)
        if placeholder and EXERCISE_TAG in _tags(cell):
            cells.append(_answer_cell(cell, i))
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
