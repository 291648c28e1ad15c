"""Issue 56: the verdict's second audit. Every expected number is a closed form written here (scipy's t and normal
distributions, the two-way ANOVA mean squares by numpy) or R's (tests/reference/designs_56.R)."""

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from vrs_helpers.book.glrt import compare_systems
from vrs_helpers.book.run_means import run_means_test

REF = Path(__file__).resolve().parents[1] / "reference"
R = json.loads((REF / "designs_56.json").read_text())


def _ref(name: str) -> pd.DataFrame:
    return pd.read_csv(REF / f"{name}.csv.gz", dtype={"system": str, "seed": str, "item": str})


def _log(spec: dict, items: int = 20) -> pd.DataFrame:
    """0/1 scores: per system a list of runs (start, count): the run is correct on items start .. start + count - 1
    (labels 0, 1, ... shared by the systems, as users write seeds)."""
    return pd.DataFrame([{"system": s, "run": str(r), "item": f"i{i:03d}", "score": int(a <= i < a + c)}
                         for s, runs in spec.items() for r, (a, c) in enumerate(runs) for i in range(items)])


def _compare(d, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compare_systems(d, "score", "system", "item", replications=["run"], family="binomial", **kw)


def _run_item_ms(d: pd.DataFrame, s: str) -> tuple[float, int]:
    """System s's run x item mean square of the two-way table (runs x items), and its df."""
    y = d[d["system"] == s].pivot(index="run", columns="item", values="score").to_numpy(dtype=float)
    r = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()
    df = (y.shape[0] - 1) * (y.shape[1] - 1)
    return float((r ** 2).sum() / df), df


# --- 1. a zero spread of the run accuracies: a finite F, never a crash -----------------------------------------

#: the issue's null log: per-run accuracies 0.60/0.60/0.55 against 0.80/0.80/0.75, three identical differences
IDENTICAL = {"S0": [(0, 12), (2, 12), (4, 11)], "S1": [(0, 16), (3, 16), (5, 15)]}


def test_identical_per_run_differences_give_the_test_against_the_within_run_noise():
    """The paired t on the per-run differences has a spread of 0 (F = 2.8e31 on main, the spread 1e-33 of
    rounding); the test is then the z-type test of the same difference against the within-run noise, sum_s MS_s /
    (n I) with Satterthwaite's df - computed here from the two-way mean squares."""
    d = _log(IDENTICAL)
    acc = d.groupby(["system", "run"])["score"].mean().unstack()
    assert np.allclose(acc.loc["S1"] - acc.loc["S0"], 0.2)
    c = _compare(d, items="fixed", runs="crossed")
    (m0, f0), (m1, f1) = _run_item_ms(d, "S0"), _run_item_ms(d, "S1")
    v = (m0 + m1) / (3 * 20)
    df = v ** 2 / ((m0 / 60) ** 2 / f0 + (m1 / 60) ** 2 / f1)
    t = -0.2 / np.sqrt(v)
    assert c.test.method.startswith("paired t on run means (crossed runs) (zero spread: against the within-run noise)")
    assert (c.test.F, c.test.den_df, c.test.p_value) == pytest.approx((t * t, df, 2 * stats.t.sf(abs(t), df)),
                                                                      rel=1e-10)
    assert np.isfinite(c.test.F) and c.test.F < 100


@pytest.mark.parametrize("runs", ["auto", "crossed", "nested"])
@pytest.mark.parametrize("items", ["random", "fixed"])
def test_six_equal_run_accuracies_give_p_1_not_a_zero_division(runs, items):
    """All six run accuracies 0.97 (100 items): the difference is 0, so F = 0 and p = 1 (a ZeroDivisionError on
    main with crossed runs)."""
    d = _log({"S0": [(0, 97), (1, 97), (2, 97)], "S1": [(3, 97), (0, 97), (1, 97)]}, items=100)
    c = _compare(d, runs=runs, items=items)
    assert c.test.F == pytest.approx(0, abs=1e-12) and c.test.p_value == pytest.approx(1)


def test_the_zero_spread_rule_changes_nothing_else():
    """On random small 0/1 logs (20 items, 3 runs, labels shared), where the run-means test decides, the default
    test is the run-means test itself (noise_floor=False) unless its spread is zero; its F is always finite."""
    rng = np.random.default_rng(56)
    seen = 0
    for _ in range(25):
        d = pd.DataFrame([{"system": f"S{s}", "run": str(r), "item": f"i{i}", "score": int(rng.random() < 0.7)}
                          for s in range(2) for r in range(3) for i in range(20)])
        c = _compare(d, items="fixed", runs="crossed")
        if "run means" not in c.test.method:
            continue
        seen += 1
        plain = run_means_test(d.assign(score=d["score"].astype(float)), "score", "system", "item", ["run"],
                               ["S0", "S1"], crossed=True, noise_floor=False)
        assert np.isfinite(c.test.F)
        if "zero spread" in c.test.method:
            assert plain is None
        else:
            assert (c.test.F, c.test.p_value) == pytest.approx((plain.F, plain.p_value), rel=1e-12)
    assert seen >= 5


# --- 2. unequal variances among 3+ systems: every pair its own SE, adjusted together ------------------------------

def test_unequal_variances_among_five_systems_give_each_pair_its_own_se():
    """5 systems x 3 runs (each its own labels: nested), S0 with 9 times the variance: the model's pooled Tukey
    contrast says S0 - S2 differ (p = 0.035) where Welch's unadjusted t on the run means says p = 0.12. Now each
    pair's SE is its own, sqrt(v_a / 3 + v_b / 3) with v_s the spread of the run means (written out here), the p
    adjusted by the bootstrap max-|t| is at least 0.12, and every interval excludes 0 exactly when p < 0.05."""
    from vrs_helpers.book.simulation import evaluation_log

    d = evaluation_log(15, systems=5, items=100, run_sd=[0.15] + [0.05] * 4, residual_sd=[0.3] + [0.1] * 4,
                       run_labels="own")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pooled = compare_systems(d, "score", "system", "item", replications=["run"], items="fixed",
                                 test="kenward-roger")
        c = compare_systems(d, "score", "system", "item", replications=["run"], items="fixed")
    row = lambda t: t.contrasts.set_index("contrast").loc["S0 - S2"]  # noqa: E731
    assert row(pooled)["p_value"] < 0.05
    m = d.groupby(["system", "run"], observed=True)["score"].mean()
    welch = stats.ttest_ind(m["S0"], m["S2"], equal_var=False)
    assert welch.pvalue > 0.1
    assert c.adjust == "bootstrap max-|t|, own SEs" and c.test.method.startswith("max-|t| of the pairs")
    se = np.sqrt(m["S0"].var(ddof=1) / 3 + m["S2"].var(ddof=1) / 3)
    assert row(c)["SE"] == pytest.approx(se, rel=1e-10)
    assert row(c)["estimate"] == pytest.approx(m["S0"].mean() - m["S2"].mean(), rel=1e-10)
    assert row(c)["p_value"] >= welch.pvalue
    excludes = (c.contrasts["lower"] > 0) | (c.contrasts["upper"] < 0)
    assert (excludes == (c.contrasts["p_value"] < 0.05)).all()
    assert c.test.p_value == pytest.approx(c.contrasts["p_value"].min())


# --- 5. run labels shared by two systems: both runs models, the smaller p adjusted --------------------------------

@pytest.mark.parametrize("systems,runs", [(2, 3), (2, 5), (3, 3)])
def test_two_models_p_is_the_null_distribution_of_the_smaller_p(systems, runs):
    """two_models_p (a quadrature) against a simulation of the two F tests of the run means under the null without
    a shared run effect (400,000 draws written here): P(min(P_c, P_n) <= m) within 4 Monte-Carlo SE."""
    from vrs_helpers.book.run_means import two_models_p

    rng = np.random.default_rng(56)
    k, n, draws = systems, runs, 400_000
    m = rng.normal(size=(draws, n, k))                          # run means, one run variance, no shared effect
    sys_means, run_means = m.mean(axis=1), m.mean(axis=2)
    num = n * sys_means.var(axis=1, ddof=1)                     # SS_sys / (k - 1)
    resid = m - sys_means[:, None, :] - run_means[:, :, None] + m.mean(axis=(1, 2))[:, None, None]
    ss_sr = (resid ** 2).sum(axis=(1, 2))
    ss_r = k * ((run_means - m.mean(axis=(1, 2))[:, None]) ** 2).sum(axis=1)
    p_c = stats.f.sf(num / (ss_sr / ((k - 1) * (n - 1))), k - 1, (k - 1) * (n - 1))
    p_n = stats.f.sf(num / ((ss_sr + ss_r) / (k * (n - 1))), k - 1, k * (n - 1))
    low = np.minimum(p_c, p_n)
    for q in (0.01, 0.03, 0.1):
        sim = float(np.mean(low <= q))
        assert two_models_p(q, n, k) == pytest.approx(sim, abs=4 * np.sqrt(sim * (1 - sim) / draws))
    assert two_models_p(0.0, n, k) == 0.0 and two_models_p(1.0, n, k) == 1.0


# --- R: tests/reference/designs_56.R --------------------------------------------------------------------------

def test_own_se_pairs_are_welchs_t_as_r():
    """hetero5.csv.gz (5 systems x 3 runs, S0 with 9 times the variance; items fixed: no system x item part): every
    pair's t and df are R's t.test(var.equal = FALSE) on the run means (1e-8), with each system's own run labels
    (nested) and with the labels 0-2 shared by the systems (crossed runs: the spreads are still each system's own)."""
    d = _ref("hetero5")
    for labels in (d["seed"], d["seed"].str.split("-").str[-1]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = compare_systems(d.assign(seed=labels), "score", "system", "item", replications=["seed"],
                                items="fixed")
        assert c.adjust == "bootstrap max-|t|, own SEs"
        got = c.contrasts.set_index("contrast")
        for pair, ref in R["hetero5"]["welch"].items():
            assert (got.loc[pair, "t"], got.loc[pair, "df"]) == pytest.approx((ref["t"], ref["df"]), rel=1e-8)
            assert got.loc[pair, "p_value"] >= ref["p_value"] - 1e-12   # adjusted for the 10 pairs
    assert c.runs == "crossed"


def test_zero_spread_test_is_rs_test_against_the_within_run_noise():
    """identical.csv.gz: the test against the within-run noise written anew in R (each system's run x item mean
    square from lm(score ~ seed + item)) equals ours (1e-8, crossed runs, items fixed); the contrast of the items-
    random crossed model is emmeans' Kenward-Roger contrast (1e-4)."""
    d = _ref("identical").rename(columns={"seed": "run"})
    ref = R["identical"]
    assert ref["per_run_differences"] == pytest.approx([0.2, 0.2, 0.2])
    t = _compare(d, items="fixed", runs="crossed").test
    assert (t.F, t.den_df, t.p_value) == pytest.approx(
        (ref["noise"]["F"], ref["noise"]["den_df"], ref["noise"]["p_value"]), rel=1e-8)
    c = _compare(d, runs="crossed")
    assert c.contrasts["p_value"].iloc[0] == pytest.approx(ref["emmeans_kr"]["p_value"], rel=1e-4)
    assert abs(c.contrasts["estimate"].iloc[0]) == pytest.approx(abs(ref["emmeans_kr"]["estimate"]), rel=1e-8)


def test_three_seeds_both_runs_models_are_pbkrtests():
    """small_sample_three_seeds.csv.gz (seeds s0-s2 in both systems): the crossed and the nested model's Kenward-Roger
    F tests equal pbkrtest's KRmodcomp (1e-5), and --runs auto gives their smaller p adjusted (two_models_p)."""
    from vrs_helpers.book.run_means import two_models_p

    d = pd.read_csv(REF / "small_sample_three_seeds.csv.gz", dtype={"seed": str})
    p = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for runs in ("crossed", "nested"):
            ref = R["three_seeds"][runs]
            t = compare_systems(d, "score", "system", "item", replications=["seed"], runs=runs,
                                test="kenward-roger").test
            assert (t.F, t.den_df, t.p_value) == pytest.approx((ref["F"], ref["den_df"], ref["p_value"]), rel=1e-5)
            p[runs] = compare_systems(d, "score", "system", "item", replications=["seed"], runs=runs).test.p_value
        auto = compare_systems(d, "score", "system", "item", replications=["seed"])
    assert auto.runs_models == ("crossed", "nested")
    assert auto.test.p_value == pytest.approx(two_models_p(min(p.values()), 3, 2), rel=1e-12)


@pytest.mark.parametrize("spec,items", [(IDENTICAL, 20),
                                        ({"S0": [(0, 97), (1, 97), (2, 97)], "S1": [(3, 97), (0, 97), (1, 97)]}, 100)])
def test_zero_spread_logs_get_an_answer(spec, items):
    """vrs analyze's steps on the zero-spread logs (identical per-run differences; six equal accuracies, a
    ZeroDivisionError on main): an answer with a finite F, never a crash."""
    import re

    from vrs_helpers.evaluate.analysis import analyze

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = analyze(_log(spec, items), "score", "system", "item", replications=["run"], n_resamples=99)
    found = re.search(r"F = ([0-9.e+-]+) on", a.answer)
    assert found and np.isfinite(float(found.group(1))) and float(found.group(1)) < 1e3
