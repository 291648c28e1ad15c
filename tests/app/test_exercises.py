"""Exercises students can check (issue 53): ``check("3.1", answer)`` says right, not yet (with a hint) or no answer
yet, never raises for an answer; every exercise's public check passes on its solution and fails on a wrong value,
run in the student copy itself; the closed-form answers recomputed here independently."""

import math
from fractions import Fraction

import nbformat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT, requires_data
from vrs_helpers.app import exercises, student
from vrs_helpers.app.exercises import EXERCISES, check

WORKBOOKS = sorted((ROOT / "notebooks").glob("0[1-6]_*.ipynb"))


def _tags(cell):
    return cell.metadata.get("tags", [])


def _wrong(ex):
    """A wrong answer: every number moved by 1 + 1000 tolerances (and away from every recognised mistake)."""
    want = list(ex.answer) if isinstance(ex.answer, tuple) else [ex.answer]
    tols = list(ex.tolerance) if isinstance(ex.tolerance, tuple) else [ex.tolerance] * len(want)
    moved = [w + 1 + 1000 * t for w, t in zip(want, tols, strict=True)]
    return tuple(moved) if isinstance(ex.answer, tuple) else moved[0]


# ------------------------------------------------------------------------------------------------ the checker

def test_right_wrong_and_no_answer():
    ex = EXERCISES["3.1"]
    assert check("3.1", ex.answer).status == "right" and bool(check("3.1", ex.answer))
    assert check("3.1", round(ex.answer, 3)).status == "right"           # the precision the exercise asks for
    assert check("3.1", ex.answer + 2 * ex.tolerance).status == "wrong"
    assert check("3.1", ...).status == "no answer" and not check("3.1", ...)
    assert "no answer yet" in repr(check("3.1", None)) and ex.looks_like in repr(check("3.1", None))
    wrong = check("3.1", 0.1)
    assert wrong.status == "wrong" and ex.hint in wrong.message and repr(wrong).startswith("✗ Exercise 3.1")
    # a recognised mistake gets its own hint: Scott's pi instead of alpha
    assert "Scott's π" in check("3.1", 0.625).message
    # the wrong kind of answer: text, a tuple for a number, too few numbers
    for bad in ("0.64", (0.64, 0.1), [0.5847], {"pi": 0.5}, True, float("nan")):
        assert check("3.2" if isinstance(bad, list) else "3.1", bad).status == "wrong", bad
    with pytest.raises(KeyError, match="no exercise '9.9'"):
        check("9.9", 1)


def test_hidden_tests_ask_for_more_than_the_public_check():
    ex = EXERCISES["3.1"]
    assert check("3.1", ex.answer, hidden=True).hidden == "right"
    typed = check("3.1", round(ex.answer, 3), hidden=True)   # right for the student, not computed to 6 digits
    assert typed.status == "right" and typed.hidden.startswith("wrong") and not typed
    assert check("3.1", 0.3, hidden=True).hidden == "wrong"
    assert check("3.1", ...).hidden is None                  # not run unless asked


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(EXERCISES)), st.one_of(
    st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.text(max_size=5),
    st.lists(st.floats(allow_nan=True), max_size=3), st.tuples(st.floats(), st.floats())))
def test_a_check_never_raises_for_an_answer(exercise_id, answer):
    result = check(exercise_id, answer)
    assert result.status in ("right", "wrong", "no answer")
    if result.status == "right":   # only numbers within the tolerance of the answer are right
        got = exercises._numbers(answer, EXERCISES[exercise_id].size)
        assert got is not None and all(math.isfinite(g) for g in got)


def test_the_displayed_result_carries_a_machine_readable_status():
    bundle = check("5.1", EXERCISES["5.1"].answer, hidden=True)._repr_mimebundle_()
    assert bundle[exercises.EXERCISE_MIME] == {"id": "5.1", "status": "right", "hidden": "right"}
    assert "✓ Exercise 5.1: right." in bundle["text/plain"] and "<div" in bundle["text/html"]


def test_every_exercise_states_what_a_right_answer_looks_like():
    for ex in EXERCISES.values():
        assert ex.looks_like and ex.hint, ex.id
        tols = ex.tolerance if isinstance(ex.tolerance, tuple) else (ex.tolerance,)
        assert len(tols) in (1, ex.size) and all(t > 0 for t in tols), ex.id
        for value, why in ex.mistakes:   # a recognised mistake is not itself a right answer
            assert check(ex.id, value).status == "wrong" and why in check(ex.id, value).message, ex.id


def test_check_calls_and_placeholders():
    assert exercises.check_call('check("3.2", (pi_by_hand, kappa_by_hand))') == ("3.2", ["pi_by_hand", "kappa_by_hand"])
    assert exercises.check_call('check("3.1", alpha)') == ("3.1", ["alpha"])
    for not_one in ('check("3.1", 0.5)', "x = 1", 'check("3.1")', 'print(check("3.1", a))', "check(("):
        assert exercises.check_call(not_one) is None, not_one
    source = exercises.placeholder_source('check("3.2", (pi_by_hand, kappa_by_hand))')
    assert source.startswith("pi_by_hand = ...\nkappa_by_hand = ...  # your answer: two numbers")
    namespace = {}
    exec(source, namespace)   # the placeholder runs and gives the check "no answer yet"
    assert check("3.2", (namespace["pi_by_hand"], namespace["kappa_by_hand"])).status == "no answer"


# ------------------------------------------------------------------ the answers, recomputed independently here

def test_closed_form_answers():
    # 3.1: nominal alpha of the twelve items from the coincidences, in exact rationals: o_ck counts both orders
    pairs = list(zip([0, 0, 1, 1, 2, 2, 0, 1, 2, 0, 1, 2], [0, 1, 1, 1, 2, 0, 0, 1, 2, 0, 2, 2], strict=True))
    disagree = Fraction(2 * sum(a != b for a, b in pairs))
    n_c = [sum((a == c) + (b == c) for a, b in pairs) for c in range(3)]
    n = sum(n_c)
    expected_off = Fraction(n * n - sum(x * x for x in n_c), n - 1)   # sum over c != k of n_c n_k / (n - 1)
    assert float(1 - disagree / expected_off) == pytest.approx(EXERCISES["3.1"].answer, abs=1e-15)
    # 5.1: Z = -2, two-sided p = erfc(2 / sqrt 2); n_max: 10 sqrt(n) / 50 < z_0.975 <=> n <= 96
    assert EXERCISES["5.1"].answer[0] == pytest.approx(math.erfc(math.sqrt(2)), abs=1e-15)
    assert EXERCISES["5.1"].answer[1] == max(k for k in range(1, 200) if 10 * math.sqrt(k) / 50 < 1.959963984540054)
    # 2.1: the population D2 of sin(2 pi x) + N(0, 0.3^2): Var sin = 1/2
    assert EXERCISES["2.1"].answer[1] == pytest.approx(0.5 / 0.59, abs=1e-15)
    # 6.1: eq. 10 and 13 with the paper's precision and FOR for BOLD's GPT2 (0.00456 on 23,679 prompts)
    p_r = 0.00456 * 0.8897 + (1 - 0.00456) * 0.22769
    assert EXERCISES["6.1"].answer == pytest.approx((p_r, p_r * (1 - p_r) / (0.00456 * (1 - 0.00456))), abs=1e-12)
    # 6.2: precision 1, the quadratic in FOR of Var_C + Var_T = (d / z)^2 (N - 1), its smallest positive root
    pc, pt, n_b, z = 0.00456, 0.00236, 23679, 1.959963984540054
    a = -((1 - pc) ** 2 + (1 - pt) ** 2)
    b = (1 - pc) * (1 - 2 * pc) + (1 - pt) * (1 - 2 * pt)
    c = pc * (1 - pc) + pt * (1 - pt) - (n_b - 1) * ((pt - pc) / z) ** 2
    root = min(r for r in ((-b + s * math.sqrt(b * b - 4 * a * c)) / (2 * a) for s in (1, -1)) if r > 0)
    assert EXERCISES["6.2"].answer == pytest.approx(root, abs=1e-12)


def test_decision_study_answers_from_lme4s_components():
    """4.1 and 4.2 from lme4's variance components of the same data (the book tables' reference values), not ours:
    the answers agree at the precision the exercises ask for."""
    from vrs_helpers.book.data import book_table

    lme4 = book_table("variance_tables_ch3")["lme4"]
    keys = {"sentence": "sentence", "rater": "rater", "instantiation": "instantiation", "sr": "sentence:rater",
            "si": "sentence:instantiation", "ri": "rater:instantiation", "residual": "Residual"}

    def components(table):
        v = lme4[table]["variance"]
        return {k: float(v[name]) for k, name in keys.items()}

    v = components("Table 3.2")   # Post Edit
    err_abs = v["rater"] / 2 + v["instantiation"] / 2 + v["sr"] / 2 + v["si"] / 2 + v["ri"] / 4 + v["residual"] / 4
    err_rel = v["sr"] / 2 + v["si"] / 2 + v["residual"] / 4
    phi, rho2 = v["sentence"] / (v["sentence"] + err_abs), v["sentence"] / (v["sentence"] + err_rel)
    assert check("4.1", (phi, rho2)).status == "right"

    def raters_needed(w):
        return next(k for k in range(1, 1000) if w["sentence"] / (w["sentence"] + w["instantiation"] + w["si"] + (
            w["rater"] + w["sr"] + w["ri"] + w["residual"]) / k) >= 0.8)

    assert EXERCISES["4.2"].answer == (raters_needed(v), raters_needed(components("Table 3.1")))


# ------------------------------------------------------------------------ the student copies, executed

def _exercise_runs(path):
    """The student copy of a workbook with, after each public check, the solution, the check again (with the
    hidden tests) and a wrong value with the check: one kernel tries every path of every check."""
    master = nbformat.read(str(path), as_version=4)
    copy_nb = student.student_notebook(master)
    cells, order = [], []
    for cell in copy_nb.cells:
        cells.append(cell)
        found = exercises.check_call(cell.source) if exercises.CHECK_TAG in _tags(cell) else None
        if found is None:
            continue
        exercise_id, names = found
        target = names[0] if len(names) == 1 else f"({', '.join(names)})"
        solution = _solution_of(master, exercise_id)
        wrong = _wrong(EXERCISES[exercise_id])
        cells += [nbformat.v4.new_code_cell(solution),
                  nbformat.v4.new_code_cell(f"check({exercise_id!r}, {target}, hidden=True)"),
                  nbformat.v4.new_code_cell(f"check({exercise_id!r}, {wrong!r}, hidden=True)")]
        order.append(exercise_id)
    copy_nb.cells = cells
    return copy_nb, order


def _solution_of(master, exercise_id):
    """The source of the solution cells between exercise ``exercise_id``'s task and its public check."""
    cells = master.cells
    check_at = next(i for i, c in enumerate(cells) if exercises.CHECK_TAG in _tags(c)
                    and exercises.check_call(c.source)[0] == exercise_id)
    task_at = max(i for i in range(check_at) if "exercise" in _tags(cells[i]))
    return "\n\n".join(c.source for c in cells[task_at + 1:check_at] if "solution" in _tags(c))


def test_every_exercise_of_the_book_workbooks_has_a_public_check():
    for path in WORKBOOKS:
        nb = nbformat.read(str(path), as_version=4)
        tasks = student.exercise_cells(nb)
        checks = [exercises.check_call(c.source) for c in nb.cells if exercises.CHECK_TAG in _tags(c)]
        ids = [found[0] for found in checks]
        assert len(ids) == len(tasks) >= 2 and None not in checks, path.name
        assert ids == sorted(ids) and all(i.startswith(path.name[1]) and i in EXERCISES for i in ids), path.name
        for i in tasks:   # every task says what a right answer looks like
            assert "*A right answer*" in nb.cells[i].source, f"{path.name} cell {i}"


@requires_data
@pytest.mark.parametrize("path", WORKBOOKS, ids=lambda p: p.stem)
def test_student_copy_runs_and_every_check_tells_right_from_wrong(path, tmp_path):
    """The student copy runs from top to bottom with the placeholders (every check: no answer yet); with the
    solution put in, every public and hidden check passes; with a wrong value, every public check says so. The
    simulation of workbook 05 runs with fewer simulated data sets (its exercises do not depend on them)."""
    from vrs_helpers.app.runner import run_notebook

    nb, order = _exercise_runs(path)
    work = tmp_path / path.name
    nbformat.write(nb, str(work))
    fast = {"n_sim": 20, "n_boot": 19} if path.name.startswith("05") else {}
    result = run_notebook(work, fast, out_dir=tmp_path / "out", html_dir=None)   # raises on any error
    executed = nbformat.read(str(result.output), as_version=4)
    seen = exercises.results_of(executed)
    assert [r["id"] for r in seen] == [i for i in order for _ in range(3)]
    for k, exercise_id in enumerate(order):
        placeholder, solved, wrong = seen[3 * k:3 * k + 3]
        assert placeholder["status"] == "no answer", exercise_id
        assert (solved["status"], solved["hidden"]) == ("right", "right"), exercise_id
        assert wrong["status"] == "wrong", exercise_id
    assert student.solution_cells(executed) == [] and student.check_cells(executed) == []


def test_grade_runs_the_hidden_tests(tmp_path):
    """A lecturer's grading: a student's notebook executed with the hidden tests; a failing cell does not stop it."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cells = [("parameters", "seed = 1"), ("", "from vrs_helpers.app.exercises import check"),
             ("answer", "alpha_by_hand = 0.640625"), (exercises.CHECK_TAG, 'check("3.1", alpha_by_hand)'),
             ("answer", "1 / 0"), ("answer", "at_half, at_95 = 10, 3"),
             (exercises.CHECK_TAG, 'check("3.3", (at_half, at_95))')]
    for tag, source in cells:
        cell = nbformat.v4.new_code_cell(source)
        if tag:
            cell.metadata["tags"] = [tag]
        nb.cells.append(cell)
    path = tmp_path / "submitted.ipynb"
    nbformat.write(nb, str(path))
    assert exercises.grade(path) == [{"id": "3.1", "status": "right", "hidden": "right"},
                                     {"id": "3.3", "status": "wrong", "hidden": "wrong"}]
    assert exercises.grade(path, answers={"3.3": "at_half, at_95 = 10, 2"})[1]["status"] == "right"
    assert np.isclose(EXERCISES["3.1"].answer, 41 / 64)
