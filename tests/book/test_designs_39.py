"""Issue 39's designs: crossed runs (shared seeds), unequal variances, a run variance at zero. Every number is
R's (tests/reference/designs_39.R: pbkrtest's KRmodcomp, lmerTest, stats::t.test and the run-means formula written
anew in R) or a closed form."""

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from vrs_helpers.book.glrt import compare_systems, runs_layout, runs_shared
from vrs_helpers.book.run_means import (
    HETERO_RATIO,
    behrens_fisher_p,
    heteroscedastic,
    residual_mean_squares,
    run_means_test,
)
from vrs_helpers.book.significance import SignificanceError
from vrs_helpers.book.simulation import evaluation_log
from vrs_helpers.mixed.inference.ddf import contrast_test

REF = Path(__file__).resolve().parents[1] / "reference"
R = json.loads((REF / "designs_39.json").read_text())


def _data(name: str) -> pd.DataFrame:
    return pd.read_csv(REF / f"{name}.csv.gz", dtype={"system": str, "seed": str, "item": str})


def _compare(d, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compare_systems(d, "score", "system", "item", replications=["seed"], **kw)


@pytest.mark.parametrize("name", ["shared_seeds", "shared_seeds3"])
@pytest.mark.parametrize("runs", ["crossed", "nested"])
def test_crossed_runs_kenward_roger_equals_pbkrtest(name, runs):
    """KR F, df and p of the crossed (and nested) runs model equal pbkrtest's KRmodcomp to 1e-5; Satterthwaite's
    equal lmerTest's anova."""
    ref = R[name][runs]
    c = _compare(_data(name), runs=runs)
    assert c.runs == runs
    assert c.formula.split(" ~ ")[1] == "system + " + ref["random"]
    t = c.test
    assert t.method == "F test, Kenward-Roger df"
    assert (t.F, t.num_df, t.den_df, t.p_value) == pytest.approx(
        (ref["F"], ref["num_df"], ref["den_df"], ref["p_value"]), rel=1e-5)
    vc = c.model.variance_components["variance"]
    for k, v in ref["variances"].items():
        assert vc[k] == pytest.approx(v, rel=1e-4, abs=1e-9)
    s = _compare(_data(name), runs=runs, test="satterthwaite").test
    assert (s.F, s.den_df, s.p_value) == pytest.approx(
        (ref["satterthwaite"]["F"], ref["satterthwaite"]["den_df"], ref["satterthwaite"]["p_value"]), rel=1e-5)


def test_runs_auto_is_decided_by_the_labels():
    """auto: crossed when every run label is used by two or more systems, else nested; the answer's model."""
    d = _data("shared_seeds")
    assert runs_shared(d, "system", "seed") and runs_layout(d, "system", ["seed"], "auto") == "crossed"
    assert _compare(d, runs="auto").runs == "crossed"
    own = d.assign(seed=d["system"] + "-" + d["seed"])
    assert not runs_shared(own, "system", "seed") and runs_layout(own, "system", ["seed"], "auto") == "nested"
    partly = d[~((d["system"] == "S1") & (d["seed"] == "4"))]  # seed 4 run by S0 only
    assert runs_layout(partly, "system", ["seed"], "auto") == "nested"
    assert runs_layout(d, "system", [], "auto") == ""
    with pytest.raises(SignificanceError, match="runs must be one of"):
        runs_layout(d, "system", ["seed"], "shared")


def test_shared_run_effect_cancels_between_systems():
    """evaluation_log(shared_run_sd=...): the shared effect shifts every system of a run alike (closed form: with
    no other variation the systems' scores in one run differ by delta exactly), run_labels="own" names each
    system's runs apart, and the default arguments still draw the first version's logs."""
    d = evaluation_log(1, runs=4, items=5, delta=0.25, run_sd=0.0, item_sd=0.0, residual_sd=0.0, shared_run_sd=1.0)
    w = d.pivot_table(index=["run", "item"], columns="system", values="score", observed=True)
    assert np.allclose(w["S1"] - w["S0"], 0.25) and w["S0"].groupby("run").first().std() > 0.1
    own = evaluation_log(1, runs=2, items=2, run_labels="own")
    assert sorted(own["run"].unique()) == ["S0-0", "S0-1", "S1-0", "S1-1"]
    assert evaluation_log(5).equals(evaluation_log(5, shared_run_sd=0.0, run_labels="shared"))
    u = evaluation_log(2, runs=[6, 3], items=10)
    assert u.groupby("system", observed=True)["run"].nunique().tolist() == [6, 3]


def test_welch_run_means_equals_r():
    """Unequal residual variances (ratio above HETERO_RATIO), 6 and 3 runs: Welch's t on the run means equals
    stats::t.test(var.equal = FALSE) to 1e-8; with the system x item part it equals the formula computed in R. With
    unequal run counts compare_systems' default test is the same statistic with the Behrens-Fisher p-value: checked
    against a Monte-Carlo draw of sqrt(w_1) T_2 + sqrt(w_2) T_5 written here (2e6 draws, 4 SE), the shares w_s from
    the run means computed here; the model's KR test is in the note."""
    d, ref = _data("unequal_variances"), R["unequal_variances"]
    ms = residual_mean_squares(d, "score", "system", "item", ["seed"])
    assert ms.to_dict() == pytest.approx(ref["welch_system_item"]["residual_ms"], rel=1e-8)
    assert heteroscedastic(ms) and ms.max() / ms.min() > HETERO_RATIO
    w = run_means_test(d, "score", "system", "item", ["seed"], ["S0", "S1"], welch=True)
    assert (w.F, w.den_df, w.p_value) == pytest.approx(
        (ref["welch_t_test"]["F"], ref["welch_t_test"]["den_df"], ref["welch_t_test"]["p_value"]), rel=1e-8)
    c = _compare(d)
    hand = ref["welch_system_item"]
    assert c.test.method.startswith("Behrens-Fisher test on run means")
    assert (c.test.F, c.test.den_df) == pytest.approx((hand["F"], hand["den_df"]), rel=1e-6)
    m = d.groupby(["system", "seed"])["score"].mean()
    a = [m[s].var(ddof=1) / len(m[s]) for s in ("S0", "S1")]
    share = np.array(a) / sum(a)
    dfs = [len(m[s]) - 1 for s in ("S0", "S1")]
    rng = np.random.default_rng(39)
    draw = sum(np.sqrt(share[j]) * rng.standard_t(dfs[j], 2_000_000) for j in range(2))
    mc = float(np.mean(np.abs(draw) >= np.sqrt(hand["F"])))
    assert abs(c.test.p_value - mc) < 4 * np.sqrt(mc * (1 - mc) / 2_000_000)
    kr = ref["kenward_roger"]
    assert any(f"gives p = {kr['p_value']:.3g}" in n for n in c.notes)
    assert _compare(d, test="kenward-roger").test.p_value == pytest.approx(kr["p_value"], rel=1e-5)
    # balanced: Welch's p (3 and 3 runs of the same log; nested runs, as simulated: under the default auto the three
    # shared seed labels would make them crossed, the paired t)
    b = _compare(d[d["seed"].isin(sorted(d["seed"].unique())[:3])], runs="nested")
    assert b.test.method.startswith("Welch's t on run means")


def test_behrens_fisher_p():
    """One term: Student's t (closed form, 1e-12); two and three terms: a Monte-Carlo draw of sum_j sqrt(w_j) T_j
    written here (4e6 draws, within 4 SE); bad weights: a ValueError."""
    assert behrens_fisher_p(2.5, [1.0, 0.0], [3, 5]) == pytest.approx(2 * stats.t.sf(2.5, 3), rel=1e-12)
    rng = np.random.default_rng(7)
    n = 4_000_000
    for w, f in (([0.3, 0.7], [5, 2]), ([0.3, 0.6, 0.1], [5, 2, 300])):
        draw = sum(np.sqrt(wj) * rng.standard_t(fj, n) for wj, fj in zip(w, f, strict=True))
        mc = float(np.mean(np.abs(draw) >= 2.5))
        assert abs(behrens_fisher_p(-2.5, w, f) - mc) < 4 * np.sqrt(mc * (1 - mc) / n)
    with pytest.raises(ValueError, match="summing to 1"):
        behrens_fisher_p(1.0, [0.5, 0.6], [2, 3])


@pytest.mark.parametrize("name", ["boundary", "boundary_si"])
def test_run_variance_at_zero_uses_the_run_means(name):
    """Balanced, REML run variance 0 (in R too): the default test is Student's t on the run means (= t.test
    var.equal = TRUE, exact) or, when the system x item variance is positive, with that part (the formula in R)."""
    d, ref = _data(name), R[name]
    assert ref["kenward_roger"]["variances"]["system:seed"] == pytest.approx(0, abs=1e-12)
    c = _compare(d, runs="nested")   # the reference's nested model
    si = ref["kenward_roger"]["variances"]["system:item"] > 1e-10
    want = ref["student_system_item"] if si else ref["student_t_test"]
    assert c.test.method.startswith("t test on run means")
    assert (c.test.F, c.test.den_df, c.test.p_value) == pytest.approx(
        (want["F"], want["den_df"], want["p_value"]), rel=1e-6)
    assert any("run variance at zero" in n for n in c.notes)


def test_interior_balanced_kenward_roger_is_the_run_means_f():
    """Closed form: in a balanced complete design without a system x item term, the KR F test of an interior fit
    is the F test of the run means (so using the latter at the boundary is the same test throughout)."""
    for seed, systems in ((3904, 2), (3905, 3)):
        d = evaluation_log(np.random.default_rng(seed), systems=systems, runs=4, items=100, delta=0.02)
        c = compare_systems(d, "score", "system", "item", replications=["run"], items="fixed", runs="nested")
        assert c.test.method == "F test, Kenward-Roger df"
        f = run_means_test(d, "score", "system", "item", ["run"], noise_floor=False)
        assert (c.test.F, c.test.den_df, c.test.p_value) == pytest.approx((f.F, f.den_df, f.p_value), rel=1e-5)


def test_satterthwaite_uses_the_anova_basis():
    """--test satterthwaite with 3 systems: the type-III basis of anova(m) (lmerTest, unbalanced data), not the
    dummy columns (contestMD's df differ in the 4th digit)."""
    ref = R["satterthwaite_basis"]
    s3 = _data("shared_seeds3")
    drop = np.r_[np.flatnonzero(s3["system"] == "S2")[:30], np.arange(0, len(s3), 7)]
    u = s3.drop(index=np.unique(drop)).reset_index(drop=True)
    t = _compare(u, runs="nested", test="satterthwaite").test
    assert (t.F, t.den_df, t.p_value) == pytest.approx(
        (ref["anova"]["F"], ref["anova"]["den_df"], ref["anova"]["p_value"]), rel=1e-5)
    assert abs(t.den_df - ref["contestMD_dummies"]["den_df"]) > 1e-4  # the two bases do differ here
    c = _compare(u, runs="nested")
    dummies = np.c_[np.zeros((2, 1)), np.eye(2)]
    kr = contrast_test(c.model, dummies, "system", ddf="kenward-roger")  # KR's F and df do not depend on the basis
    assert (c.test.F, c.test.den_df) == pytest.approx((kr.F, kr.den_df), rel=1e-8)


def test_crossed_runs_interior_kenward_roger_is_the_paired_run_means_t():
    """Closed form: crossed runs, balanced, no system x item term, interior fit: KR's F is the paired t^2 on the
    per-run differences of the run means (2 systems; n - 1 df) and the system x run ANOVA F (3 systems); at the
    boundary of the system x run variance the default test is that run-means test."""
    for systems in (2, 3):
        found = {"interior": False, "boundary": False}
        for seed in range(3920, 3960):
            d = evaluation_log(np.random.default_rng(seed), systems=systems, runs=4, items=100, run_sd=0.006,
                               shared_run_sd=0.05)
            c = compare_systems(d, "score", "system", "item", replications=["run"], items="fixed", runs="crossed")
            f = run_means_test(d, "score", "system", "item", ["run"], [f"S{s}" for s in range(systems)],
                               crossed=True, noise_floor=False)
            assert f.den_df == (systems - 1) * 3
            kind = "interior" if c.test.method == "F test, Kenward-Roger df" else "boundary"
            if kind == "boundary":
                assert c.test.method.startswith(("paired t on run means", "F test on run means (system x run)"))
                assert any("run variance at zero" in n for n in c.notes)
                # issue 56: at the boundary the p-value is at least that of the run-means test
                assert c.test.p_value >= f.p_value - 1e-12
            else:
                assert (c.test.F, c.test.den_df, c.test.p_value) == pytest.approx((f.F, f.den_df, f.p_value),
                                                                                  rel=1e-5)
            found[kind] = True
            if all(found.values()):
                break
        assert all(found.values())
    # by hand: the paired t of the per-run differences (scipy's ttest_rel on the run means)
    from scipy import stats as st

    d = evaluation_log(np.random.default_rng(3921), runs=5, items=50, shared_run_sd=0.05)
    m = d.groupby(["run", "system"], observed=True)["score"].mean().unstack()
    ref = st.ttest_rel(m["S1"], m["S0"])
    f = run_means_test(d, "score", "system", "item", ["run"], ["S0", "S1"], crossed=True, noise_floor=False)
    assert (f.F, f.den_df, f.p_value) == pytest.approx((ref.statistic ** 2, 4, ref.pvalue), rel=1e-10)


def _separated_log(systems: int, runs: int, items: int = 80) -> pd.DataFrame:
    """0/1 scores of ``systems`` systems, the last all correct, the others near 60 % with easier and harder items."""
    rng = np.random.default_rng(7)
    return pd.DataFrame([{"system": f"S{s}", "run": r, "item": i,
                          "score": 1 if s == systems - 1 else int(rng.random() < 0.45 + 0.3 * (i % 2))}
                         for s in range(systems) for r in range(runs) for i in range(items)])


def _quiet_compare(d, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compare_systems(d, "score", "system", "item", family="binomial", **kw)


def test_a_separated_systems_pairs_leave_the_family_and_the_rest_are_tukey_over_themselves():
    """Issue 39 (4): S3 all correct among four systems, no runs. Its three pairs are not decisions (p NaN); the
    other three are Tukey-adjusted as a family of 3 means: P(studentized range of 3 means on infinite df > |z|
    sqrt 2), Tukey's closed form, not a family of 4 that counts comparisons never made."""
    c = _quiet_compare(_separated_log(4, 1)).contrasts.set_index("contrast")
    rest = c.loc[["S0 - S1", "S0 - S2", "S1 - S2"]]
    expected = stats.studentized_range.sf(np.abs(rest["z"].to_numpy()) * np.sqrt(2), 3, np.inf)
    np.testing.assert_allclose(rest["p_value"].to_numpy(), expected, rtol=1e-4)  # scipy's quadrature tolerance
    assert c.loc[["S0 - S3", "S1 - S3", "S2 - S3"], ["p_value", "lower", "upper"]].isna().all().all()


def test_max_t_with_a_separated_system_is_the_z_test_of_the_pair_left():
    """Three systems with runs, S2 all correct, ``test="max-t"``: the family is S0 - S1 alone, so its single-step
    p is the two-sided normal p of its z, and the test's p is that pair's."""
    c = _quiet_compare(_separated_log(3, 3), replications=["run"], test="max-t")
    r = c.contrasts.set_index("contrast").loc["S0 - S1"]
    assert r["p_value"] == pytest.approx(2 * stats.norm.sf(abs(r["z"])), rel=1e-6)
    assert c.test.p_value == pytest.approx(r["p_value"], rel=1e-9)


def test_bootstrap_with_a_separated_system_compares_the_others_without_it():
    """The bootstrap (runs random) with S2 all correct: the pair S0 - S1 is the bootstrap LRT of S0 and S1 on the
    data without S2 (same simulations, same seed), not a max-|z| over a null that pools S2 into their mean."""
    d = _separated_log(3, 3, items=60)
    c = _quiet_compare(d, replications=["run"], test="bootstrap", n_sim=39, seed=5)
    alone = _quiet_compare(d[d["system"] != "S2"], replications=["run"], test="bootstrap", n_sim=39, seed=5)
    assert c.contrasts.set_index("contrast").loc["S0 - S1", "p_value"] == pytest.approx(alone.test.p_value)
    assert any("compared without S2" in n for n in c.notes)


def test_successes_of_trials_with_a_separated_system_and_runs_do_not_break_the_bootstrap_pairs():
    """Successes out of trials keep every pair in the bootstrap (no separation rule there): its pairwise p maps
    onto the contrasts one to one, a p per pair or NaN, and no error."""
    d = _separated_log(3, 3, items=30).assign(n=1).rename(columns={"score": "hits"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compare_systems(d, "hits", "system", "item", replications=["run"], family="binomial", trials="n",
                            n_sim=19, seed=2)
    assert len(c.contrasts) == 3 and c.contrasts["p_value"].notna().any()


def test_the_pairs_left_by_a_separated_system_get_intervals_in_their_own_family():
    """No runs, 4 systems, S3 all correct: the ranking's pair intervals are Tukey's for the 3 systems left, so that
    an interval excludes 0 exactly when its adjusted p < alpha (issue 39's review: they used k = 4)."""
    from vrs_helpers.evaluate.tables.ranking import decision_intervals

    c = _quiet_compare(_separated_log(4, 1))
    decision_intervals(c, "binomial", 0.05)
    rows = c.contrasts.set_index("contrast").loc[["S0 - S1", "S0 - S2", "S1 - S2"]]
    crit = stats.studentized_range.isf(0.05, 3, np.inf) / np.sqrt(2)
    np.testing.assert_allclose((rows["upper"] - rows["estimate"]) / rows["SE"], crit, rtol=1e-4)
    excludes = (rows["lower"] > 0) | (rows["upper"] < 0)
    assert (excludes == (rows["p_value"] < 0.05)).all()


def test_bootstrap_pairs_without_the_separated_system_keep_their_intervals():
    """Runs, the bootstrap, 4 systems with S3 all correct: the three pairs left are compared without S3 by the
    bootstrap's max-|z|, and their intervals use that bootstrap's critical value (finite), not the outer test's."""
    from vrs_helpers.evaluate.tables.ranking import decision_intervals

    c = _quiet_compare(_separated_log(4, 3, items=40), replications=["run"], test="bootstrap", n_sim=39, seed=3)
    assert c.adjust == "bootstrap max-|z|" and c.pairs_test is not None
    decision_intervals(c, "binomial", 0.05)
    rows = c.contrasts.set_index("contrast")
    assert rows.loc[["S0 - S1", "S0 - S2", "S1 - S2"], ["lower", "upper", "SE_given_theta"]].notna().all().all()
    assert rows.loc[["S0 - S3", "S1 - S3", "S2 - S3"], "p_value"].isna().all()
