"""Exercises a student can check: ``check("3.1", answer)`` says right or wrong, with a hint.

Every exercise of the book workbooks has an id (``"3.1"``: workbook 03, exercise 1) and an entry in
:data:`EXERCISES`: the right answer, the precision a right answer needs (stated in the exercise: "to 3 decimals"),
what a right answer looks like, a hint for a wrong one and hints for the mistakes one can recognise (α where π was
asked, a one-sided p-value where a two-sided one was). In a workbook an exercise is a Markdown cell tagged
``exercise``, its solution a code cell tagged ``solution`` (removed from the student copy, see
:mod:`vrs_helpers.app.student`) and its public check a code cell tagged ``exercise-check``: ``check("3.1",
alpha_by_hand)``. The check never raises: it shows *right*, *not yet* with the hint, or *no answer yet* while the
answer is still ``...`` (the student copy's placeholder), so that a student copy runs from top to bottom.

**Hidden tests** (``check(..., hidden=True)``, and :func:`grade` for a lecturer) ask more than the public check: the
answer to 6 significant digits (it was computed, not typed from the hint or rounded) and of the right kind (numbers,
not text). They are in this module, so a student who reads the package's source can read them; they are hidden
from the notebooks, as otter-grader's hidden tests are hidden from its student notebooks (see the lecturer's page
of the guide, ``docs/teaching.md``, for why the workbooks use this checker and not otter-grader).

Each answer was computed by the workbook's solution cell, whose ``assert`` statements check it against a closed form
or an independent computation; ``tests/app/test_exercises.py`` executes every student copy with the solutions put in
the answer cells (every public and hidden check passes) and with a wrong answer (every public check says so).
"""

from __future__ import annotations

import ast
import copy
import html
import json
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path

EXERCISE_MIME = "application/vnd.vrs.exercise+json"
CHECK_TAG = "exercise-check"   # the cell of an exercise's public check (kept in student copies)
HIDDEN_RTOL = 1e-6             # the hidden test: the answer to 6 significant digits


@dataclass(frozen=True)
class Exercise:
    """One exercise: its right ``answer`` (a number or a tuple of numbers), the absolute ``tolerance`` the public
    check allows (the precision the exercise asks for), what a right answer ``looks_like``, a ``hint`` for a wrong
    answer, and ``mistakes``: (value, hint) pairs for wrong answers one can recognise."""

    id: str
    title: str
    answer: float | tuple
    tolerance: float | tuple   # one for every number, or one per number
    looks_like: str
    hint: str
    mistakes: tuple = field(default_factory=tuple)
    hidden_tolerance: float | tuple | None = None   # the hidden test's absolute tolerance; None: 6 digits

    @property
    def size(self) -> int:
        return len(self.answer) if isinstance(self.answer, tuple) else 1


# The answers are what each workbook's solution cell computes with the default parameters (its asserts check them
# against a closed form or an independent computation); the tolerances are the precision each exercise asks for.
EXERCISES: dict[str, Exercise] = {e.id: e for e in [
    Exercise("1.1", "a correlation of two binary variables is φ", (-0.13682942734084708, 0.23200366804218248), 5e-4,
             "two numbers, (φ, share), φ between -1 and 1 and the share of entailed pairs among the hypotheses with a "
             "negation between 0 and 1, each to 3 decimals (e.g. (0.123, 0.456))",
             "tabulate hyp-has-neg (rows) against entailment (columns); φ = (n11 n00 - n10 n01) / sqrt(n1. n0. n.1 "
             "n.0), and the share is n11 / n1..",
             (((0.1368, 0.232), "the sign of φ: a negation goes *against* entailment, so n10 n01 outweighs n11 n00."),
              ((-0.1368, 0.354), "the second number is the share of entailed pairs among *all* pairs; the exercise "
                                 "asks for the share among the hypotheses with a negation."))),
    Exercise("1.2", "a number on \"substantially\", by hand", (25.7225142548101, 0.07654400243342943), (5e-3, 5e-4),
             "two numbers, (z, width): Fisher's z for cos-sim (to 2 decimals) and the width 2 z_0.975 SE of the "
             "delta-method interval (to 3 decimals)",
             "z = (artanh r1 - artanh r2) / sqrt(1/(n1 - 3) + 1/(n2 - 3)) with r1 in domain (n1 = 9,815 pairs) and r2 "
             "out of domain (n2 = 3,000); the width is 2 x 1.96 x sqrt((1 - r1^2)^2/n1 + (1 - r2^2)^2/n2)."),
    Exercise("1.3", "which transformations are permissible?", (0, 0.769), 5e-4,
             "two numbers, (changed predictions, accuracy): a whole number and an accuracy between 0 and 1 to 3 "
             "decimals",
             "fit inv.depth5_tree() on the training patients with f1 replaced by 3 f1 + 7 and count the test "
             "predictions that differ; then map every patient ID through one random permutation of the IDs (the "
             "same map for training and test patients) and score the retrained tree on the test patients.",
             (((0, 0.834), "0.834 is the accuracy with the original IDs; relabel the IDs before retraining."),)),
    Exercise("2.1", "D² is deviance explained", (0.847457627118644, 0.847457627118644), (0.03, 5e-4),
             "two numbers, (D² of your fit, D² in the population), both between 0 and 1; the first within 0.03 of the "
             "population value, the second to 3 decimals",
             "D² = 1 - RSS/TSS from the fit's residuals; in the population the model explains Var sin(2πx) = 1/2 of "
             "the total variance 1/2 + 0.3^2.",
             (((0.847457627118644, 0.5), "0.5 is the explained variance, not its share of the total 0.5 + 0.09."),
              ((0.847457627118644, 0.152542372881356), "that is the unexplained share, 1 - D².")),
             hidden_tolerance=(0.03, 1e-9)),
    Exercise("2.2", "a label made by a rule", (0.9593094140882245, 2), (0.02, 1e-9),
             "two numbers, (D² of c*, nullified features): D² between 0 and 1 to 2 decimals, and a whole number",
             "run circularity_test(patients, 'sofa', ['bili', 'albumin', 'age'], k=20): c* should be bilirubin alone; "
             "count the features outside c* whose nullification says True.",
             (((1.0, 2), "D² = 1 is the lookup table of the SOFA bands; a smooth GAM cannot jump at the thresholds, so "
                         "its D² stays below 1."),), hidden_tolerance=(0.02, 1e-9)),
    Exercise("3.1", "α by hand from the coincidence matrix", 0.640625, 5e-4,
             "one number, nominal α of the twelve items, between -1 and 1, to 3 decimals (e.g. 0.123)",
             "build o_ck from both ordered pairs of every unit (24 values), e_ck = n_c (n_k - [c = k]) / (n - 1), "
             "and α = 1 - (sum of o_ck off the diagonal) / (sum of e_ck off the diagonal).",
             ((0.625, "0.625 is Scott's π (chance drawn with replacement); α's urn draws without replacement: "
                      "e_ck = n_c (n_k - [c = k]) / (n - 1)."),
              (0.75, "0.75 is the percent agreement; α corrects it for the agreement expected by chance."))),
    Exercise("3.2", "three chance models on one table", (0.5847176079734219, 0.5931651749389747), 5e-4,
             "two numbers, (π, κ), each to 3 decimals (e.g. (0.512, 0.534))",
             "p_o is the share of items on the diagonal of the 2x2 table; π's p_e sums the squared pooled marginals "
             "((row + column) / 2), κ's p_e sums the products of each rater's own marginals.",
             (((0.5931651749389747, 0.5847176079734219), "π and κ are swapped: κ uses each rater's own marginals, π "
                                                         "the pooled ones."),)),
    Exercise("3.3", "how much disagreement can the raters afford?", (10, 2), 1e-9,
             "two whole numbers of disagreements, (at prevalence 0.5, at prevalence 0.95), e.g. (7, 1)",
             "for each prevalence, compute α for 0, 1, 2, ... disagreements (two_rater_table(100, prevalence, k)) and "
             "keep the largest k with α >= 0.8.",
             (((11, 3), "these are the first numbers of disagreements at which α falls below 0.8; the exercise asks "
                        "for the largest at which α is still at least 0.8."),
              ((90, 98), "these are percent agreements; give the numbers of disagreements."))),
    Exercise("4.1", "φ by hand", (0.7881573038311287, 0.7992659582335649), 5e-4,
             "two numbers, (φ, E ρ²), each between 0 and 1, to 3 decimals (e.g. (0.712, 0.745))",
             "divide rater, sentence:rater by n_r; instantiation, sentence:instantiation by n_i; rater:instantiation "
             "and the residual by n_r n_i. φ adds all of them to the error; E ρ² only those with 'sentence:' and the "
             "residual.",
             (((0.7992659582335649, 0.7881573038311287),
               "φ and E ρ² are swapped: the relative coefficient counts fewer error components, so it is the larger "
               "one."),)),
    Exercise("4.2", "a decision study in closed form", (3, 30), 1e-9,
             "two whole numbers of raters, (Post Edit, Marking)",
             "with one instantiation A = σ²_instantiation + σ²_sentence:instantiation, B = σ²_rater + "
             "σ²_sentence:rater + σ²_rater:instantiation + σ²_residual; φ >= 0.8 needs B / n_r <= σ²_s (1 - 0.8) / "
             "0.8 - A: round n_r up."),
    Exercise("4.3", "Algorithm 3.1 without resampling", (0.7799539321717182, 0.9502313709075009), (5e-5, 5e-4),
             "two numbers, (E[max] at B = 10, share at B = M): an accuracy to 4 decimals and a share between 0 and 1 "
             "to 3 decimals",
             "sort the M accuracies; E[max] = sum_i x_(i) [(i/M)^B - ((i-1)/M)^B]; k is the number of scores equal to "
             "the maximum."),
    Exercise("5.1", "the Z test of section 4.1 by hand", (0.04550026389635842, 96), (5e-5, 1e-9),
             "two numbers, (two-sided p-value, number of items): a p-value to 4 decimals and a whole number",
             "Z = (15 - 25) / (50 / sqrt(100)); the two-sided p is 2 Φ(-|Z|) = erfc(|Z| / sqrt 2); |Z| = 10 sqrt(n) / "
             "50 stays below 1.96 while n < (1.96 x 5)^2.",
             (((0.022750131948179212, 96), "0.0228 is the left-tailed p-value; the two-sided one doubles it."),
              ((0.04550026389635842, 97), "97 items already reach |Z| >= 1.96: the largest n that is not significant "
                                          "is one less."))),
    Exercise("5.2", "Table 4.1's averaged design by hand", (0.5170368211322549, 94.8380944902614), (5e-4, 0.05),
             "two numbers, (p-value of the F test, sentence share in %): a p-value to 3 decimals and a percentage "
             "to 1 decimal",
             "F = ((RSS0 - RSS1) / 2) / (RSS1 / (n - 3)) with n the number of sentence x system averages; the share "
             "is the 'percent' of 'sentence_id' in the mixed model's variance components."),
    Exercise("5.3", "type-I error of the averaged test under run variation", (0.6037925881542296, 0.05), (5e-4, 0.045),
             "two numbers, (closed-form rejection rate, simulated rate of the run-means test), both between 0 and 1",
             "the paired test's SE is σ_d / sqrt(n); the run offsets add 2τ²/3 to the variance of the mean difference; "
             "reject when |t| exceeds t_0.975 with n - 1 df.", hidden_tolerance=(1e-6, 0.045)),
    Exercise("6.1", "eq. 10 and 13 by hand", (0.23070876559999998, 39.099837159932676), (5e-5, 0.05),
             "two numbers, (p_R, Var^M / Var^D): a rate between 0 and 1 to 4 decimals and a factor to 1 decimal",
             "p_R = p_O precision + (1 - p_O) FOR; both variances divide by N - 1 = 23,678, so their ratio is "
             "p_R (1 - p_R) / (p_O (1 - p_O)).",
             (((0.00456, 1.0), "p_O is the observed rate; the real positive rate adds the toxic outputs the "
                               "classifier missed, (1 - p_O) FOR."),)),
    Exercise("6.2", "how good must the metric model be?", 0.011727597648993917, 5e-6,
             "one number, the largest false omission rate, a rate between 0 and 1 to 5 decimals",
             "with precision 1, r = p + (1 - p) f for each system; solve sum r (1 - r) = (N - 1) (d / 1.96)^2 for f "
             "and keep the smallest positive root."),
    Exercise("6.3", "paired outputs, eq. 20, by simulation", 4.401639735597272e-07, 2e-7,
             "one number, the simulated covariance of the two true-label means (of the order of 1e-7)",
             "draw 40,000 multinomial tables of the four cells of the joint distribution, then the true labels "
             "(binomial with P(R = 1 | O = 1) = precision, P(R = 1 | O = 0) = FOR) per cell and system; "
             "np.cov of the two means.", hidden_tolerance=2e-7),
    Exercise("6.4", "how many labels?", (792, 1035), 1e-9,
             "two whole numbers of labelled items, (with the judge, humans only)",
             "estimate σ (the SD of C's human labels) and ρ (the correlation of C's judge and human scores on the "
             "labelled items) and use judge.ppi_labels_needed(2000, σ, ρ, half_width=0.03)."),
]}


@dataclass
class Result:
    """What a check says: ``status`` is ``"right"``, ``"wrong"`` or ``"no answer"``; ``hidden`` the status of the
    hidden tests (None when they were not run)."""

    id: str
    status: str
    message: str
    hidden: str | None = None

    def __bool__(self) -> bool:
        return self.status == "right" and self.hidden in (None, "right")

    def __repr__(self) -> str:
        mark = {"right": "✓", "wrong": "✗", "no answer": "…"}[self.status]
        extra = f" Hidden tests: {self.hidden}." if self.hidden is not None else ""
        return f"{mark} Exercise {self.id}: {self.message}{extra}"

    def _repr_html_(self) -> str:
        colour = {"right": "#1a7f37", "wrong": "#cf222e", "no answer": "#57606a"}[self.status]
        return (f"<div style='border-left:4px solid {colour};padding-left:6px'>"
                f"{html.escape(repr(self))}</div>")

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": repr(self), "text/html": self._repr_html_(),
                EXERCISE_MIME: {"id": self.id, "status": self.status, "hidden": self.hidden}}


def _numbers(answer, size: int) -> list[float] | None:
    """The answer as ``size`` floats (a number, or a tuple/list/array of numbers), or None when it is not that."""
    try:
        import numpy as np

        if isinstance(answer, np.ndarray):
            answer = answer.tolist()
    except ImportError:   # pragma: no cover - numpy ships with the package
        pass
    items = list(answer) if isinstance(answer, (tuple, list)) else [answer]
    if len(items) != size:
        return None
    out = []
    for x in items:
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            return None
        out.append(float(x))
    return out


def _unanswered(answer) -> bool:
    items = answer if isinstance(answer, (tuple, list)) else [answer]
    return any(x is Ellipsis or x is None for x in items)


def _close(got: list[float], want: list[float], tol) -> bool:
    tols = list(tol) if isinstance(tol, tuple) else [tol] * len(want)
    return all(math.isfinite(g) and abs(g - w) <= t for g, w, t in zip(got, want, tols, strict=True))


def check(exercise_id: str, answer, *, hidden: bool = False) -> Result:
    """Check a student's ``answer`` to exercise ``exercise_id`` (e.g. ``"3.1"``): *right* when every number is within
    the exercise's precision of the right answer, else *not yet* with a hint (the hint of a recognised mistake
    first); ``...`` or None is *no answer yet*. ``hidden``: also the lecturer's hidden tests (6 significant digits).
    Never raises for an answer, whatever it is; an unknown id is a :class:`KeyError` naming the known ones."""
    if exercise_id not in EXERCISES:
        raise KeyError(f"no exercise {exercise_id!r}; the exercises are {', '.join(EXERCISES)}.")
    ex = EXERCISES[exercise_id]
    want = list(ex.answer) if isinstance(ex.answer, tuple) else [ex.answer]
    if _unanswered(answer):
        return Result(ex.id, "no answer", f"no answer yet. A right answer: {ex.looks_like}",
                      "no answer" if hidden else None)
    got = _numbers(answer, ex.size)
    if got is None:
        return Result(ex.id, "wrong", f"not yet: the answer should be {ex.looks_like}", "wrong" if hidden else None)
    if _close(got, want, ex.tolerance):
        secret = None
        if hidden and ex.hidden_tolerance is not None:
            secret = "right" if _close(got, want, ex.hidden_tolerance) else "wrong (hidden tolerance)"
        elif hidden:
            secret = "right" if all(math.isclose(g, w, rel_tol=HIDDEN_RTOL, abs_tol=1e-12)
                                    for g, w in zip(got, want, strict=True)) else "wrong (not to 6 digits)"
        return Result(ex.id, "right", "right.", secret)
    for value, why in ex.mistakes:
        wrong = list(value) if isinstance(value, tuple) else [value]
        if len(wrong) == len(got) and _close(got, wrong, ex.tolerance):
            return Result(ex.id, "wrong", f"not yet: {why}", "wrong" if hidden else None)
    return Result(ex.id, "wrong", f"not yet: {ex.hint}", "wrong" if hidden else None)


# --------------------------------------------------------------------------------------------- notebooks, grading

def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def check_call(source: str) -> tuple[str, list[str]] | None:
    """The exercise id and the answer's variable names of a public check cell (``check("3.1", alpha)`` or
    ``check("4.2", (phi, n))``), or None when the cell is not one such call."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return None
    call = tree.body[0].value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "check"
            and len(call.args) == 2 and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
        return None
    target = call.args[1]
    names = target.elts if isinstance(target, ast.Tuple) else [target]
    if not all(isinstance(n, ast.Name) for n in names):
        return None
    return call.args[0].value, [n.id for n in names]


def placeholder_source(check_source: str) -> str | None:
    """The answer cell a student copy puts before a public check: each answer variable set to ``...``."""
    found = check_call(check_source)
    if found is None:
        return None
    exercise_id, names = found
    ex = EXERCISES.get(exercise_id)
    what = f"  # your answer: {ex.looks_like}" if ex else "  # your answer"
    return "\n".join(f"{n} = ..." for n in names[:-1]) + ("\n" if len(names) > 1 else "") + f"{names[-1]} = ...{what}"


def graded_notebook(nb, answers: dict[str, str] | None = None):
    """A copy of ``nb`` whose public checks also run the hidden tests; ``answers`` (exercise id -> code) replaces
    the answer cell before an exercise's check (tests put the solution or a wrong value there)."""
    out = copy.deepcopy(nb)
    for i, cell in enumerate(out.cells):
        found = check_call(cell.source) if CHECK_TAG in _tags(cell) else None
        if found is None:
            continue
        exercise_id, names = found
        target = names[0] if len(names) == 1 else f"({', '.join(names)})"
        cell.source = f"check({exercise_id!r}, {target}, hidden=True)"
        if answers and exercise_id in answers and i > 0 and "answer" in _tags(out.cells[i - 1]):
            out.cells[i - 1].source = answers[exercise_id]
    return out


def results_of(nb) -> list[dict]:
    """The exercise checks an executed notebook shows, in order (``id``, ``status``, ``hidden``)."""
    found = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {}).get(EXERCISE_MIME)
            if data is not None:
                found.append(json.loads(data) if isinstance(data, str) else dict(data))
    return found


def grade(notebook: str | Path, answers: dict[str, str] | None = None, timeout: int = 900) -> list[dict]:
    """Execute a student's notebook with the hidden tests (:func:`graded_notebook`) in its own folder and return
    what every check says. A cell that fails does not stop the run (the student's error is part of the grade): its
    exercise shows the status its check reached, or none."""
    import nbformat
    from nbclient import NotebookClient

    from .kernel import KERNEL_ARGUMENTS, KERNEL_NAME, kernel_manager_class

    src = Path(notebook)
    nb = graded_notebook(nbformat.read(str(src), as_version=4), answers)
    client = NotebookClient(nb, timeout=timeout, kernel_name=KERNEL_NAME, allow_errors=True,
                            kernel_manager_class=kernel_manager_class(), extra_arguments=KERNEL_ARGUMENTS,
                            resources={"metadata": {"path": str(src.resolve().parent)}})
    return results_of(client.execute())
