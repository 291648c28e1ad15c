"""compare_systems' runs-random reading (issue 28): the system-by-item term by default (Barr et al. 2013), the
choice items="random"|"fixed", the registered test per family.

- The book's MT data (data_ter.rds: Marking vs PostEdit, 3 replications, 1,041 sentences): the default test is
  Kenward-Roger's F on ``ter ~ system + (1|sentence_id) + (1|system:sentence_id) + (1|system:replication)`` and
  equals pbkrtest 0.5.2 (tests/reference/mt_ter.R) to 1e-4 relative in F, both df and p; ``items="fixed"`` equals
  pbkrtest on the model without the term.
- The term is added only where it is identifiable (some system x item cell with more than one run).
- Binary scores: the default test is the GLMM parametric-bootstrap LRT, its statistic the GLRT's chi-square
  (the same two Laplace fits), seeded; a test that does not apply is refused naming those that do.
"""

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import MT_LMERTEST, requires_data
from vrs_helpers import registry
from vrs_helpers.book.glrt import compare_systems
from vrs_helpers.book.significance import SignificanceError

MT = MT_LMERTEST


@requires_data
@pytest.mark.parametrize("items, model", [("random", "with_system_sentence"), ("fixed", "without_system_sentence")])
def test_mt_default_test_equals_pbkrtest(mt_data, items, model):
    """Kenward-Roger's F equals pbkrtest's. Without the system x item term the REML run variance is 0 in this
    balanced design, so the default test is the t test on the run means (issue 39), checked against scipy's
    two-sample t on the per-run means; ``test="kenward-roger"`` still gives pbkrtest's F."""
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compare_systems(mt_data, "ter", "system", "sentence_id", replications=["replication"], items=items,
                            runs="nested")   # the reference's model: each system's replications its own
        if items == "fixed":
            m = mt_data.groupby(["system", "replication"], observed=True)["ter"].mean().reset_index()
            a, b = (m.loc[m["system"] == s, "ter"] for s in sorted(m["system"].unique()))
            want = stats.ttest_ind(b, a)
            assert c.test.method == "t test on run means"
            assert (c.test.F, c.test.den_df, c.test.p_value) == pytest.approx(
                (want.statistic ** 2, len(a) + len(b) - 2, want.pvalue), rel=1e-8)
            c = compare_systems(mt_data, "ter", "system", "sentence_id", replications=["replication"], items=items,
                                test="kenward-roger", runs="nested")
    ref = MT["models"][model]
    assert c.formula.replace(" ", "") == ref["formula"].replace(" ", "")
    assert c.system_item == (items == "random")
    t, k = c.test, ref["Kenward-Roger"]
    assert t.method == registry.get("kenward-roger").method
    assert t.num_df == k["NumDF"]
    assert t.statistic == pytest.approx(k["F"], rel=1e-4)
    assert t.den_df == pytest.approx(k["DenDF"], rel=1e-4)
    assert t.p_value == pytest.approx(k["p"], rel=1e-4)


def _log(cells_replicated: bool = True, binary: bool = False, seed: int = 0, run_sd: float = 0.0) -> pd.DataFrame:
    """2 systems x 3 seeds x 30 items; with ``cells_replicated=False`` each seed scores its own 10 items, so every
    system x item cell has one row. ``run_sd``: the SD of a shift per system and seed."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in ("base", "new"):
        for r in range(3):
            items = range(30) if cells_replicated else range(10 * r, 10 * r + 10)
            shift = rng.normal(0, run_sd) if run_sd else 0.0
            for i in items:
                eta = rng.normal(0, 0.5) + shift
                y = float(rng.random() < 1 / (1 + np.exp(-eta))) if binary else eta
                rows.append({"system": s, "seed": f"s{r}", "item": f"i{i}", "y": y})
    return pd.DataFrame(rows)


def test_the_system_by_item_term_only_where_identifiable():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        crossed = compare_systems(_log(), "y", "system", "item", replications=["seed"])
        single = compare_systems(_log(False), "y", "system", "item", replications=["seed"])
        fixed = compare_systems(_log(), "y", "system", "item", replications=["seed"], items="fixed")
        book = compare_systems(_log(), "y", "system", "item")
    assert "(1|system:item)" in crossed.formula and "(1|system:item)" in crossed.null_formula
    for c in (single, fixed, book):
        assert "(1|system:item)" not in c.formula and not c.system_item
    with pytest.raises(SignificanceError, match="random, fixed"):
        compare_systems(_log(), "y", "system", "item", replications=["seed"], items="these")


def test_binary_default_is_the_linear_model_and_the_bootstrap_runs_when_named():
    """The default runs-random reading of 0/1 scores is the linear mixed model of the scores (with or without a run
    shift); the GLMM's parametric bootstrap runs when it is named, seeded, and it is the registered test of the
    binomial family (the GLMM paths: a separated system, successes out of trials, harness logs per task)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shifted = compare_systems(_log(binary=True, run_sd=1.5), "y", "system", "item", replications=["seed"],
                                  family="binomial", n_sim=19, seed=5)
        flat = compare_systems(_log(binary=True), "y", "system", "item", replications=["seed"], family="binomial",
                               n_sim=19, seed=5)
        c = compare_systems(_log(binary=True), "y", "system", "item", replications=["seed"], family="binomial",
                            n_sim=19, seed=5, test="bootstrap")
        again = compare_systems(_log(binary=True), "y", "system", "item", replications=["seed"],
                                family="binomial", n_sim=19, seed=5, test="bootstrap")
    for d in (shifted, flat):
        assert "linear model of the 0/1 scores" in d.test.method and d.family == "gaussian"
        assert any(n.startswith("0/1 scores with runs random: the runs-random reading is the linear") for n in d.notes)
    # the linear model's estimates are the accuracies (balanced: the raw means)
    acc = _log(binary=True).groupby("system")["y"].mean()
    assert flat.means.set_index("system")["emmean"].to_dict() == pytest.approx(acc.to_dict(), abs=1e-8)
    assert registry.default_test("binomial").name == "bootstrap"
    t = c.test
    assert t.n_sim + t.n_failed == 19 and t.seed == 5 and t.p_value == again.test.p_value
    # the observed statistic is the GLRT's: 2 (logLik m1 - logLik m0) of the same Laplace fits
    assert t.chi2 == pytest.approx(c.glrt.chi2, abs=1e-9)
    assert t.method.startswith(registry.get("bootstrap").method)
    with pytest.raises(registry.TestChoiceError, match="bootstrap.*chisq|chisq.*bootstrap"):
        compare_systems(_log(binary=True), "y", "system", "item", replications=["seed"], family="binomial",
                        test="kenward-roger")


PAIRWISE = json.loads((Path(__file__).parent.parent / "reference" / "pairwise_df_emmeans.json").read_text())


@pytest.mark.parametrize("test", ["kenward-roger", "satterthwaite"])
def test_runs_random_pairwise_contrasts_equal_emmeans(test):
    """Three systems (tests/reference/pairwise_df.R: emmeans 1.8.4, lmer.df = "kenward-roger" / "satterthwaite"):
    the runs-random reading's contrasts (with the system-by-item term, the default) have emmeans' estimate, SE,
    df, t and Tukey-adjusted p to 1e-4 relative; the runs-as-replications reading keeps the z tests."""
    d = pd.read_csv(Path(__file__).parent.parent / "reference" / "pairwise_three_systems.csv.gz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compare_systems(d, "score", "system", "item", replications=["run"], test=test, runs="nested")
        book = compare_systems(d, "score", "system", "item")
    ref = pd.DataFrame(PAIRWISE["models"]["system_item"][test]["tukey"])
    assert c.formula.replace(" ", "") == PAIRWISE["models"]["system_item"]["formula"].replace(" ", "")
    got = c.contrasts.set_index("contrast").loc[ref["contrast"]]
    for ours, theirs in [("estimate", "estimate"), ("SE", "SE"), ("df", "df"), ("t", "t.ratio"),
                         ("p_value", "p.value")]:
        np.testing.assert_allclose(got[ours].to_numpy(), ref[theirs].to_numpy(), rtol=1e-4)
    assert "z" in book.contrasts and "df" not in book.contrasts


def _route_data(binary: bool, separated: bool = False, systems: int = 3, seed: int = 5):
    """Systems x 3 seeds (labels 0..2 reused by every system) x 40 items; 0/1 or continuous scores."""
    rng = np.random.default_rng(seed)
    rows = [(f"s{k}", r, i) for k in range(systems) for r in range(3) for i in range(40)]
    d = pd.DataFrame(rows, columns=["system", "seed", "item"])
    x = rng.normal(size=len(d)) + 0.3 * (d["item"] % 5)
    d["score"] = (x > 0).astype(int) if binary else x
    if separated:
        d.loc[d["system"] == "s0", "score"] = 1
    return d


@pytest.mark.parametrize("binary,separated,systems,route", [
    (True, False, 3, "linear-probability"), (True, True, 3, "glmm"), (False, False, 2, "both-runs-models"),
    (False, False, 3, "lmm")])
def test_the_route_in_the_registry_is_what_compare_systems_fits(binary, separated, systems, route):
    """registry.comparison_route, the default-test rule in one place, names what compare_systems does: the linear
    model of 0/1 scores (its test says so), the GLMM for a separated system (a binomial comparison), both runs models
    for two systems on shared labels, the LMM otherwise."""
    import warnings

    d = _route_data(binary, separated, systems)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compare_systems(d, "score", "system", "item", replications=["seed"], n_sim=19, contrasts=False,
                            family="binomial" if binary else "gaussian")
    layout = "crossed"
    models = registry.runs_models("auto", True, systems)
    assert registry.comparison_route("binomial" if binary else "gaussian", True, False, True, models,
                                     separated=separated) == route
    fitted = {"linear-probability": lambda: c.test.method.endswith("(linear model of the 0/1 scores)"),
              "glmm": lambda: c.family == "binomial",
              "both-runs-models": lambda: getattr(c, "runs_models", None) == ("crossed", "nested"),
              "lmm": lambda: c.family == "gaussian" and c.runs == layout and getattr(c, "runs_models", None)
              != ("crossed", "nested")}
    assert fitted[route](), (route, c.test.method, c.family)
