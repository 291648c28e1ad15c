"""Conformance of every test outcome type and every registered significance test (issue 27; scikit-learn's
``check_estimator`` is the model): the suite is generated from ``vrs_helpers.registry.TESTS`` and from the
subclasses of ``vrs_helpers.outcomes.TestOutcome``, so a new test or outcome type is checked without editing it.

For each registered test and each score family, on a small seeded log (2 systems x 3 seeds x items, with run-to-run
variation): where the test applies, its outcome keeps the outcome contract (``outcomes.check_outcome``: p in (0, 1],
``as_dict()`` JSON round trip, ``sentence()`` naming the method, ...), is of the outcome type the registry names,
and the same seed gives the same p on this machine; where it does not apply, the registry and ``compare_systems``
refuse it with a ``VRSError`` (exit code 2) that names the tests that apply. Every outcome class of the package is
checked on at least one instance made by the package's own functions.
"""

import importlib
import json
import pkgutil
import warnings
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest

import vrs_helpers
from vrs_helpers import mixed, registry
from vrs_helpers.book import glrt
from vrs_helpers.book import significance as sg
from vrs_helpers.errors import VRSError
from vrs_helpers.outcomes import OUTCOME_TYPES, TestOutcome, check_outcome

N_SIM = 19  # simulations of the parametric bootstrap: enough for a p in (0, 1], cheap


def _log(family: str, seed: int = 0, items: int = 40) -> pd.DataFrame:
    """2 systems x 3 seeds x ``items``: item effects, a run effect per (system, seed), a small system difference;
    binomial scores are Bernoulli draws of the logistic of the same linear predictor."""
    rng = np.random.default_rng(seed)
    item = rng.normal(0, 0.5 if family == "binomial" else 0.1, items)
    rows = []
    for s, shift in (("base", 0.0), ("new", 0.3 if family == "binomial" else 0.03)):
        for r in range(3):
            eta = shift + rng.normal(0, 0.3 if family == "binomial" else 0.02) + item
            y = (rng.random(items) < 1 / (1 + np.exp(-eta))).astype(float) if family == "binomial" else \
                0.5 + eta + rng.normal(0, 0.05, items)
            rows += [{"system": s, "seed": str(r), "item": f"i{i:02d}", "y": float(v)} for i, v in enumerate(y)]
    return pd.DataFrame(rows)


LOGS = {f: _log(f) for f in registry.FAMILIES}


@contextmanager
def _quiet():
    """Fit warnings (a boundary run variance in a small log) are not what this suite checks."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _run(name: str, family: str):
    with _quiet():
        return glrt.compare_systems(LOGS[family], "y", "system", "item", replications=["seed"], test=name,
                                    family=family, n_sim=N_SIM, seed=3).test


CASES = [(t.name, f) for t in registry.TESTS for f in registry.FAMILIES]


@pytest.mark.parametrize("name, family", CASES, ids=[f"{n}-{f}" for n, f in CASES])
def test_registered_test_conforms_or_refuses(name, family):
    entry = registry.get(name)
    if entry.applies(family):
        outcome = _run(name, family)
        check_outcome(outcome)
        assert isinstance(outcome, OUTCOME_TYPES[entry.outcome]), (name, type(outcome))
        # the outcome names the registered method (a GLMM's GLRT adds how it was made)
        assert outcome.method.startswith(entry.method.rstrip(")")), (outcome.method, entry.method)
        again = _run(name, family)   # seeded: the same p on this machine
        assert again.p_value == outcome.p_value and again.statistic == outcome.statistic
        return
    ok = [t.name for t in registry.applicable(family)]
    assert ok, family
    with pytest.raises(VRSError) as info:
        registry.choose(name, family)
    assert info.value.exit_code == 2 and all(t in str(info.value) for t in ok) and name in str(info.value)
    with pytest.raises(registry.TestChoiceError, match="tests that apply"):
        glrt.compare_systems(LOGS[family], "y", "system", "item", replications=["seed"], test=name, family=family)


def test_a_test_without_a_runs_random_reading_is_refused():
    with pytest.raises(registry.TestChoiceError, match="runs-random reading"):
        glrt.compare_systems(LOGS["gaussian"], "y", "system", "item", test="satterthwaite")


def test_the_registry_is_complete():
    """Every registered test is implemented and has a known outcome type; names and aliases are unambiguous; each
    family has one default, and it applies to the family."""
    keys = []
    for t in registry.TESTS:
        assert callable(t.implementation) and t.outcome in OUTCOME_TYPES and t.description and t.families
        keys += [t.name, *t.aliases]
        for a in t.aliases:
            assert registry.canonical(a.upper()) == t.name
    assert len(keys) == len(set(keys))
    for f in registry.FAMILIES:
        assert registry.default_test(f).applies(f)
    assert registry.ddf_default() == registry.default_test("gaussian").name
    with pytest.raises(registry.TestChoiceError, match="registered tests"):
        registry.get("wald")


def _package_modules():
    for m in pkgutil.walk_packages(vrs_helpers.__path__, "vrs_helpers."):
        importlib.import_module(m.name)


def _outcome_classes():
    _package_modules()
    out, todo = set(), [TestOutcome]
    while todo:
        for c in todo.pop().__subclasses__():
            if c.__module__.startswith("vrs_helpers") and c not in out:
                out.add(c)
                todo.append(c)
    return out


def _examples():
    """Outcomes made by the package's own functions (and each rebuilt as its outcome type)."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(0, 1, 30), rng.normal(0.3, 1, 30)
    ex = [sg.z_test(a), sg.t_test(a), sg.paired_t_test(a, b), sg.paired_z_test(a, b),
          sg.permutation_test(a, b, n_resamples=199, seed=1), sg.bootstrap_test(a, b, n_resamples=199, seed=1),
          sg.permutation_test_exact(a[:8], b[:8])]
    ex += [_run(t.name, f) for t in registry.TESTS for f in t.families]
    with _quiet():
        m = mixed.fit("y ~ system + (1|item) + (1|system:seed)", LOGS["gaussian"])
        from vrs_helpers.mixed.inference import kenward_roger

        ex.append(kenward_roger.f_test(kenward_roger.adjustment(m), glrt.system_contrast(m)))
    from vrs_helpers.evaluate.logs import harness_stats as hs

    x, y = (rng.random(40) < 0.7).astype(float), (rng.random(40) < 0.5).astype(float)
    long = pd.DataFrame({"system": ["a"] * 40 + ["b"] * 40, "item": [f"i{i}" for i in range(40)] * 2,
                         "task": "t", "run": "0", "repeat": "0", "score": np.r_[x, y]})
    ex += [hs.mcnemar(x, y), hs.paired_difference(long, "a", "b")]
    ex += [type(e).from_dict(e.as_dict()) for e in list(ex)]
    return ex


def test_every_outcome_class_is_checked():
    examples = _examples()
    for e in examples:
        check_outcome(e)
    seen = {type(e) for e in examples}
    classes = _outcome_classes()
    missing = sorted(c.__qualname__ for c in classes if c not in seen and not c.__name__.startswith("_")
                     and not (c.__subclasses__() and all(s in seen for s in c.__subclasses__())))
    assert missing == [], f"outcome classes without an instance in the conformance suite: {missing}"
    # the summary layout of each kind: the keys users' scripts read
    layouts = {type(e).outcome_type(): set(e.as_dict()) for e in examples}
    assert layouts[OUTCOME_TYPES["chisq"]] == {"chi2", "df", "p_value"}
    assert layouts[OUTCOME_TYPES["F"]] == {"F", "num_df", "den_df", "p_value"}
    assert {"chi2", "df", "p_value", "n_sim", "seed"} <= layouts[OUTCOME_TYPES["monte-carlo"]]


def test_seeded_resampling_tests_reproduce():
    rng = np.random.default_rng(2)
    a, b = rng.normal(0, 1, 25), rng.normal(0.2, 1, 25)
    for fn in (sg.permutation_test, sg.bootstrap_test):
        assert fn(a, b, n_resamples=99, seed=4).p_value == fn(a, b, n_resamples=99, seed=4).p_value


def test_json_round_trip_of_a_summary_row():
    """The F test's row in summary.json states p and den_df at 4 significant digits (their precision)."""
    f = _run("kenward-roger", "gaussian")
    d = json.loads(json.dumps(f.as_dict()))
    assert d["p_value"] == float(f"{f.p_value:.4g}") and d["den_df"] == float(f"{f.den_df:.4g}")
