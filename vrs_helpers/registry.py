"""The significance tests of the package, each registered once: the test of the runs-random reading of ``vrs
analyze`` (``--test``), of :func:`vrs_helpers.book.glrt.compare_systems` (``test=``), of the power planner
(:func:`vrs_helpers.evaluate.tables.power.simulated_power`) and the engine's denominator-df default
(:func:`vrs_helpers.mixed.inference.ddf.contrast_test`).

A :class:`RegisteredTest` says what a test is (name, aliases, a one-line description, the method label and the kind
of :mod:`~vrs_helpers.outcomes` type its outcome has), where it applies (score families, designs: the runs-random
reading, the fewest systems; whether the planner can simulate it from a REML fit alone) and for which families it
is the default. Every CLI choice and help text, every validator and the planner read :data:`TESTS`; a request for
a test that does not apply is a :class:`TestChoiceError` (``vrs`` exits 2) naming the tests that do.

Design. The registry is a shared top-level module (below ``mixed/``), so every layer may read it: the engine takes
its default ddf from it, ``book/`` and ``evaluate/`` their validators, ``app/`` its choices. It holds no code of
the tests: an implementation is a function ``(Hypothesis) -> TestOutcome`` registered with :func:`implements` by
the layer that implements it (``book/glrt.py``, on the engine's functions), so no import goes upwards and the
registry stays importable without numpy-heavy modules. Adding a test is one :class:`RegisteredTest` entry here and
one ``@implements(name)`` function; the CLI, the validators, ``summary.json`` (through the outcome's
``as_dict()``), the report and the conformance suite (tests/test_conformance.py) pick it up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import VRSError

FAMILIES = ("gaussian", "binomial")  # score families (``family="auto"`` resolves to one of them from the data)
RUNS_RANDOM = "runs-random"          # the design of the reading a --test chooses: runs as a random effect


class TestChoiceError(VRSError, ValueError):
    """A test that is not registered, or that does not apply to the family or design (the message names the tests
    that apply)."""

    __test__ = False


@dataclass(frozen=True)
class RegisteredTest:
    """One significance test: what it is, where it applies, whether it is a default (module docstring)."""

    __test__ = False

    name: str
    description: str                   # one line: the CLI help and the user guide
    method: str                        # the outcome's ``method`` (how summaries and sentences name it)
    outcome: str                       # its outcome kind: a key of vrs_helpers.outcomes.OUTCOME_TYPES
    families: tuple = ("gaussian",)    # the score families it applies to
    designs: tuple = (RUNS_RANDOM,)    # the readings it can test
    min_systems: int = 2
    aliases: tuple = ()
    default_for: tuple = ()            # the families whose default test it is
    planning: bool = False             # the power planner can simulate it: it needs only a REML fit and L

    def applies(self, family: str, design: str = RUNS_RANDOM, systems: int = 2) -> bool:
        return family in self.families and design in self.designs and systems >= self.min_systems

    @property
    def implementation(self) -> Callable:
        """The registered function (Hypothesis) -> TestOutcome (:func:`implements`)."""
        fn = _IMPLEMENTATIONS.get(self.name)
        if fn is None:
            raise TestChoiceError(f"the test {self.name!r} has no implementation loaded; import the module that "
                                  "registers it (vrs_helpers.book.glrt).")
        return fn

    def run(self, hypothesis: Hypothesis):
        """The test's outcome on ``hypothesis``."""
        return self.implementation(hypothesis)


#: every test, in the order the CLI lists them
TESTS: tuple[RegisteredTest, ...] = (
    RegisteredTest(
        "kenward-roger", "F test of the system terms with Kenward & Roger's (1997) adjusted covariance and "
        "denominator df (pbkrtest); exact in balanced designs", "F test, Kenward-Roger df", "F",
        aliases=("kr", "kenwardroger", "kenward_roger"), default_for=("gaussian",), planning=True),
    RegisteredTest(
        "satterthwaite", "F test with Satterthwaite's denominator df (lmerTest's default)",
        "F test, Satterthwaite df", "F", aliases=("sat", "satterth"), planning=True),
    RegisteredTest(
        "bootstrap", "parametric-bootstrap likelihood ratio test: n_sim simulations from the null fit, seeded "
        "(pbkrtest's PBmodcomp; for binary scores on the logistic GLMMs)", "parametric bootstrap LRT",
        "monte-carlo", families=FAMILIES, aliases=("pb", "parametric-bootstrap", "pbmodcomp"),
        default_for=("binomial",)),
    RegisteredTest(
        "max-t", "single-step max-|z| test over all pairwise contrasts of the GLMM's Wald z from their joint normal "
        "distribution (multcomp::glht; no refits; liberal with few runs per system: the GLMM's ML run variance is "
        "biased down, 0.300 of 12-system global nulls rejected with 3 runs each)", "single-step max-|z| "
        "(multcomp::glht)", "z", families=("binomial",), aliases=("glht", "single-step", "maxt", "max-z")),
    RegisteredTest(
        "chisq", "large-sample chi-square GLRT (rejects too often with 3-5 runs per system; kept for comparison)",
        "GLRT (chi-square)", "chisq", families=FAMILIES, aliases=("chi2", "chisquare", "chi-square", "lrt", "glrt")),
)

_IMPLEMENTATIONS: dict[str, Callable] = {}


@dataclass
class Hypothesis:
    """What a registered test gets: H0 drops the system terms (rows of ``L``) from ``formula``.

    ``full``: the fit of ``formula`` (REML for an LMM, the Laplace fit for a GLMM); ``glrt``: the chi-square
    likelihood ratio test of ``null_formula`` against ``formula`` (ML); ``data``: the rows both were fitted to
    (None where a test needs only ``full`` and ``L``, as in the power planner's simulations)."""

    formula: str
    null_formula: str
    full: object
    L: object
    term: str = "system"
    data: object = None
    glrt: object = None
    family: str = "gaussian"
    n_sim: int = 1000
    seed: int = 0
    extra: dict = field(default_factory=dict)


def implements(name: str) -> Callable:
    """Decorator: register ``fn(Hypothesis) -> TestOutcome`` as the implementation of the registered test
    ``name`` (once)."""
    get(name)

    def register(fn: Callable) -> Callable:
        if _IMPLEMENTATIONS.get(name, fn) is not fn:
            raise ValueError(f"the test {name!r} is implemented twice")
        _IMPLEMENTATIONS[name] = fn
        return fn

    return register


def names() -> list[str]:
    """The registered tests' names (the CLI's choices)."""
    return [t.name for t in TESTS]


def _key(name) -> str:
    return str(name).strip().lower().replace("_", "-").replace(" ", "-")


def canonical(name) -> str:
    """The registered name of ``name`` or one of its aliases (case, ``_`` and spaces ignored)."""
    key = _key(name)
    for t in TESTS:
        if key == t.name or key in {_key(a) for a in t.aliases}:
            return t.name
    raise TestChoiceError(f"unknown test {name!r}; registered tests: {', '.join(names())}.")


def get(name) -> RegisteredTest:
    """The registered test ``name`` (or an alias)."""
    key = canonical(name)
    return next(t for t in TESTS if t.name == key)


def applicable(family: str, design: str = RUNS_RANDOM, systems: int = 2, planning: bool = False) -> list:
    """The tests that apply to ``family`` and ``design`` with ``systems`` systems (``planning``: only those the
    power planner can simulate)."""
    return [t for t in TESTS if t.applies(family, design, systems) and (t.planning or not planning)]


def default_test(family: str) -> RegisteredTest:
    """The default test of ``family`` (one per family)."""
    found = [t for t in TESTS if family in t.default_for]
    if len(found) != 1:
        raise TestChoiceError(f"no default test for the family {family!r}; families: {', '.join(FAMILIES)}.")
    return found[0]


def _listing(tests, family: str) -> str:
    return ", ".join(t.name + (" (default)" if family in t.default_for else "") for t in tests)


def choose(name, family: str, design: str = RUNS_RANDOM, systems: int = 2, planning: bool = False) -> RegisteredTest:
    """The registered test to run: ``name`` (None or "": the family's default) if it applies to ``family``,
    ``design`` and ``systems``; else a :class:`TestChoiceError` naming the tests that apply."""
    if family not in FAMILIES:
        raise TestChoiceError(f"family must be one of {', '.join(FAMILIES)}; got {family!r}.")
    test = default_test(family) if name is None or str(name).strip() == "" else get(name)
    ok = applicable(family, design, systems, planning)
    if test not in ok:
        what = f"{family} scores" + ("" if design == RUNS_RANDOM else f", the {design} reading") + (
            f" with {systems} system(s)" if systems < test.min_systems else "") + (
            " in power planning" if planning else "")
        raise TestChoiceError(f"the test {test.name!r} does not apply to {what}; tests that apply: "
                              f"{_listing(ok, family) or 'none'}.")
    return test


def ddf_default() -> str:
    """The engine's default denominator-df method: the default gaussian test (an F test)."""
    test = default_test("gaussian")
    if test.outcome != "F":
        raise TestChoiceError(f"the default gaussian test {test.name!r} is not an F test; name the ddf method.")
    return test.name


def help_text() -> str:
    """The CLI's ``--test`` help: each test with its description and families, and the defaults."""
    parts = [f"{t.name}: {t.description} [{', '.join(t.families)}]" for t in TESTS]
    defaults = ", ".join(f"{default_test(f).name} for {f}" for f in FAMILIES)
    return ("the test of the runs-random reading; " + "; ".join(parts) + f". Default: {defaults} scores; 0/1 "
            "scores with runs and no --test: the linear mixed model of the scores, the continuous scores' tests "
            "(valid whatever the run variance)")


# ------------------------------------------------------------------------------------------- the default rule
# Which test decides, for a score table and for harness logs alike (issue 56: the same rows gave a sign-flip test
# as logs and the linear model as a table). One declarative place, read by vrs_helpers.evaluate.tables.steps (tables),
# vrs_helpers.evaluate.logs.tasks (logs, per task and pooled) and vrs_helpers.book.glrt / run_means (the runs-random
# reading's test); the measurements behind each branch are in docs/error-rates.md.

#: fewer items than this and no runs: the chi-square reference of the LRT does not hold (3 items and one run gave
#: p = 0.0105 where McNemar's exact test gives 1), an exact or permutation test on the items decides (issue 40)
SMALL_ITEMS = 30


def verdict_reading(runs: bool, n_items: int, test: str | None = None) -> str:
    """The reading whose test answers "do the systems differ?" for one comparison (a table's or a task's):

    - ``"named"``: a ``--test`` was given: that test (of the runs-random reading where there are runs);
    - ``"runs-random"``: some system has 2 or more runs: the runs-random reading's default test
      (:func:`vrs_helpers.book.glrt.compare_systems` with ``replications``: Kenward-Roger's F, the tests on run
      means of :func:`run_means_rule`, the linear model of 0/1 scores), whatever the number of items - the runs
      carry the replication, and a test on per-item means would ignore them (0.089 of true nulls with 20 items x
      3 runs of 0/1 scores where this reading rejects 0.025);
    - ``"exact"``: one run and fewer than :data:`SMALL_ITEMS` items: the exact or permutation test on the items
      (:func:`vrs_helpers.evaluate.tables.small_data.small_test`);
    - ``"glrt"``: one run and enough items: the chi-square GLRT of the runs-as-replications model."""
    if test is not None and str(test).strip():
        return "named"
    if runs:
        return "runs-random"
    return "exact" if n_items < SMALL_ITEMS else "glrt"


# the fits compare_systems makes for one question (its route, :func:`comparison_route`)
ROUTES = ("both-runs-models", "linear-probability", "glmm", "lmm")


def comparison_route(family: str, runs_random: bool, test_named: bool, f_test: bool, runs_models_: tuple,
                     trials: bool = False, separated: bool = False) -> str:
    """Which models :func:`vrs_helpers.book.glrt.compare_systems` fits, the default-test rule in one place (with
    :func:`verdict_reading`, :func:`runs_models` and :func:`vrs_helpers.book.run_means.choose`, which may put a
    test on the run means in place of the fitted model's F test):

    - ``"both-runs-models"``: continuous scores (or 0/1 scores' linear model), the runs-random reading (runs, no
      data property) tested by an F test where :func:`runs_models` gives two models: crossed and nested both fitted,
      the smaller p adjusted for taking the smaller;
    - ``"linear-probability"``: 0/1 scores, the runs-random reading, no test named, no ``trials`` and no separated
      system: the linear mixed model of the 0/1 scores with the continuous scores' default test (issue 39: the
      GLMM's parametric bootstrap rejected 0.127 of true nulls with 3 runs and extreme items);
    - ``"glmm"``: any other binomial comparison: the logistic GLMM (Laplace), its GLRT or the named test;
    - ``"lmm"``: any other continuous comparison: the linear mixed model, REML for the contrasts, ML for the GLRT."""
    if family == "gaussian" and runs_random and f_test and len(runs_models_) == 2:
        return "both-runs-models"
    if family == "binomial":
        return "linear-probability" if runs_random and not test_named and not trials and not separated else "glmm"
    return "lmm"


def runs_models(option: str, shared: bool, systems: int, f_test: bool = True) -> tuple:
    """The runs model(s) the runs-random reading fits (``--runs``; issue 56: ``auto`` decided by the labels alone
    fitted crossed runs to independently trained seeds named 0, 1, 2, and the test lost half its df):

    - ``"crossed"`` or ``"nested"`` as asked; ``auto`` with run labels not all shared by the systems: nested;
    - ``auto``, every label shared, two systems, an F test (continuous scores, 0/1 scores' linear model): both,
      ``("crossed", "nested")``: the verdict's p is the smaller of the two adjusted for taking the smaller
      (:func:`vrs_helpers.book.run_means.two_models_p`, exact in the balanced design without a shared run effect,
      conservative with one). Shared labels say nothing about whether the runs share an effect: with independent
      runs (no shared effect) the crossed model's test has (n - 1) df instead of 2 (n - 1) (power 0.53 against the
      nested model's 0.80 with 3 runs), with a shared seed effect the nested model has almost none (0.04 against
      0.89); the adjusted smaller p gives up 0.070 of power to the nested model without a shared effect and 0.050 to
      the crossed one with it (docs/error-rates.md, 2 systems, 3 and 5 runs);
    - ``auto``, every label shared, three or more systems (or a test that is not an F test): crossed. The crossed
      model then costs less ((k - 1)(n - 1) against k (n - 1) df: power 0.73 against 0.85 with 3 systems x 3 runs,
      0.81 against 0.85 with 5) than taking the smaller p would (its pairs and rank intervals would need the same
      adjustment)."""
    option = str(option or "auto").strip().lower()
    if option in ("crossed", "nested"):
        return (option,)
    if not shared:
        return ("nested",)
    return ("crossed", "nested") if systems == 2 and f_test else ("crossed",)
