"""Power and sample-size planning (vrs_helpers.evaluate.tables.power) and `vrs plan`.

References: the noncentral F distribution of scipy with the noncentrality written out here; lmerTest's F test on the
issue-20 three-seeds log (tests/reference/small_sample_lmertest.json) for the claim that in a balanced design the
small-sample F test is MS_system / MS_run(system); brute-force searches over the closed form; the engine's
simulation for the simulated power."""

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from vrs_helpers import mixed
from vrs_helpers.app.cli import main
from vrs_helpers.evaluate.tables import power as pw

REF_DIR = Path(__file__).parent.parent / "reference"
REF = json.loads((REF_DIR / "small_sample_lmertest.json").read_text())


def _closed_form(delta, n, m, run_sd, residual_sd, k=2, alpha=0.05):
    """Independent of the module: lambda = n m sum (d - dbar)^2 / (s_e^2 + m s_run^2), F'(k - 1, k (n - 1))."""
    d = np.r_[0.0, np.full(k - 1, delta)] if np.ndim(delta) == 0 else np.asarray(delta, float)
    n = np.asarray(n)
    lam = n * m * np.sum((d - d.mean()) ** 2) / (residual_sd ** 2 + m * run_sd ** 2)
    d1, d2 = k - 1, k * (n - 1)
    return stats.ncf.sf(stats.f.ppf(1 - alpha, d1, d2), d1, d2, lam)


@settings(max_examples=60, deadline=None)
@given(delta=st.floats(0.001, 1.0), n=st.integers(2, 60), m=st.integers(1, 5000), run_sd=st.floats(0.001, 1.0),
       residual_sd=st.floats(0.0, 2.0), k=st.integers(2, 5), alpha=st.sampled_from([0.01, 0.05, 0.1]))
def test_closed_form_power_equals_noncentral_f(delta, n, m, run_sd, residual_sd, k, alpha):
    ours = pw.f_test_power(delta, n, m, run_sd, residual_sd, systems=k, alpha=alpha)
    assert ours == pytest.approx(_closed_form(delta, n, m, run_sd, residual_sd, k, alpha), rel=1e-9, abs=1e-12)
    assert alpha - 1e-12 <= ours <= 1.0


def test_per_system_deltas_use_the_spread_around_their_mean():
    assert pw.noncentrality([0.0, 0.1, -0.1], 4, 100, 0.05, 0.1, systems=3) == pytest.approx(
        4 * 100 * 0.02 / (0.01 + 100 * 0.0025))
    assert pw.f_test_power([0.2, 0.2, 0.2], 4, 100, 0.05, 0.1, systems=3) == pytest.approx(0.05)  # no difference


def test_balanced_f_test_is_the_anova_of_run_means():
    """The derivation's key step, checked against lmerTest: on the balanced three-seeds log (2 systems x 3 seeds x
    400 items) the F of the run means' one-way ANOVA equals lmerTest's Satterthwaite F, on k (n - 1) = 4 df."""
    d = pd.read_csv(REF_DIR / "small_sample_three_seeds.csv.gz")
    z = d.groupby(["system", "seed"])["score"].mean()
    sys_means = z.groupby(level=0).mean()
    n, k = 3, 2
    ms_sys = n * ((sys_means - z.mean()) ** 2).sum() / (k - 1)
    ms_run = ((z - z.groupby(level=0).transform("mean")) ** 2).sum() / (k * (n - 1))
    ref = REF["models"]["three_seeds"]["Satterthwaite"]["system"]
    # lme4 stops its REML optimizer at a relative tolerance that leaves ~1e-6 in F (its Satterthwaite and KR F
    # differ from each other in the 12th digit, from the exact ANOVA F by 3e-6): 1e-5 relative
    assert ms_sys / ms_run == pytest.approx(ref["F"], rel=1e-5)
    assert ref["DenDF"] == pytest.approx(k * (n - 1), rel=1e-4)


def test_simulated_power_agrees_with_the_closed_form():
    """2 systems x 3 runs x 20 items, lambda = 7.2 (power 0.530): the engine's Satterthwaite test on 200 simulated
    logs rejects at a rate within 3 Monte-Carlo SEs, sqrt(p (1 - p) / 200), of the closed form. (The run variance
    is large against the residual's share, so REML estimates on the boundary, where the tests differ, are rare.)"""
    comps = pw.VarianceComponents(run_sd=0.05, item_sd=0.1, residual_sd=0.1)
    exact = _closed_form(0.12, 3, 20, 0.05, 0.1)
    sim = pw.simulated_power(0.12, comps, runs=3, items=20, n_sim=200, seed=1)
    assert sim.n_sim == 200 and sim.n_failed == 0
    assert sim.mc_se == pytest.approx(math.sqrt(sim.power * (1 - sim.power) / 200))
    assert abs(sim.power - exact) <= 3 * math.sqrt(exact * (1 - exact) / 200)
    a, b = (pw.simulated_power(0.12, comps, runs=3, items=20, n_sim=10, seed=7) for _ in range(2))
    np.testing.assert_array_equal(a.p_values, b.p_values)   # seeded


def test_simulated_power_on_a_given_unbalanced_design_and_a_custom_test():
    """An unbalanced design (3 and 4 runs, rows missing) runs through the engine; the test is a parameter (here a
    function returning the Satterthwaite test, as Kenward-Roger will plug in); under delta = 0 the p-values of an
    F test are roughly uniform (rejection rate within 4 SEs of alpha)."""
    rows = [(s, f"r{r}", f"i{i}") for s, n in (("a", 3), ("b", 4)) for r in range(n) for i in range(15)]
    design = pd.DataFrame(rows, columns=["system", "run", "item"]).sample(frac=0.9, random_state=1)
    calls = []

    def custom(result, L):
        calls.append(L.shape)
        return pw.TESTS["satterthwaite"](result, L)

    sim = pw.simulated_power(0.0, pw.VarianceComponents(0.05, 0.1, 0.1), design=design, n_sim=60, seed=2,
                             test=custom)
    assert calls and calls[0] == (1, 2) and sim.test == "custom"
    assert abs(sim.power - 0.05) <= 4 * math.sqrt(0.05 * 0.95 / 60)


def _brute_runs(delta, m, run_sd, residual_sd, k=2, alpha=0.05, target=0.8, limit=3000):
    """Every n from 2 to limit - 1 (scipy evaluates the closed form for all at once); the first reaching target."""
    n = np.arange(2, limit)
    reach = np.flatnonzero(_closed_form(delta, n, m, run_sd, residual_sd, k, alpha) >= target)
    return int(n[reach[0]]) if len(reach) else None


@settings(max_examples=15, deadline=None)
@given(delta=st.floats(0.01, 0.3), m=st.integers(5, 2000), run_sd=st.floats(0.01, 0.2),
       residual_sd=st.floats(0.01, 0.5), k=st.integers(2, 4), target=st.sampled_from([0.5, 0.8, 0.9]))
def test_runs_needed_equals_brute_force(delta, m, run_sd, residual_sd, k, target):
    expected = _brute_runs(delta, m, run_sd, residual_sd, k, 0.05, target)
    got = pw.runs_needed(delta, m, run_sd, residual_sd, systems=k, target=target, max_runs=2999)
    assert got == expected


def test_items_needed_and_the_limit_over_items():
    """Items needed equals the brute-force search; with too few runs no number of items reaches the target: the
    power tends to that of lambda = n sum (d - dbar)^2 / s_run^2 (checked at 10^9 items)."""
    got = pw.items_needed(0.05, 10, 0.03, 0.3, target=0.8)
    brute = next(m for m in range(1, 5000) if _closed_form(0.05, 10, m, 0.03, 0.3) >= 0.8)
    assert got == brute
    lim = pw.power_limit(0.05, 3, 0.05)
    assert lim == pytest.approx(_closed_form(0.05, 3, 10**9, 0.05, 0.1), rel=1e-6)
    assert lim < 0.8 and pw.items_needed(0.05, 3, 0.05, 0.1) is None


def test_power_table_and_components_from_a_fit():
    d = pd.read_csv(REF_DIR / "small_sample_three_seeds.csv.gz", dtype={"seed": str, "item": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = mixed.fit("score ~ system + (1|item) + (1|system:seed)", d)
    c = pw.VarianceComponents.from_fit(m, run="system:seed")
    vc = m.variance_components["variance"]
    assert (c.run_sd, c.item_sd, c.residual_sd) == pytest.approx(
        (math.sqrt(vc["system:seed"]), math.sqrt(vc["item"]), math.sqrt(vc["Residual"])))
    per_system = {"base": pd.DataFrame({"variance": [0.01, 0.002, 0.01]}, index=["item", "seed", "Residual"]),
                  "new": pd.DataFrame({"variance": [0.01, 0.004, 0.01]}, index=["item", "seed", "Residual"])}
    pooled = pw.VarianceComponents.from_fit(per_system, run="seed")
    assert pooled.run_sd == pytest.approx(math.sqrt(0.003))
    with pytest.raises(pw.PlanningError, match="run="):
        pw.VarianceComponents.from_fit(m, run="seed")
    t = pw.power_table([3, 5], [100, 400], 0.05, c)
    assert list(t.to_frame()["power"]) == pytest.approx(
        [_closed_form(0.05, n, mm, c.run_sd, c.residual_sd) for mm in (100, 400) for n in (3, 5)], rel=1e-9)
    assert list(t.needed["runs_needed"]) == [_brute_runs(0.05, mm, c.run_sd, c.residual_sd) for mm in (100, 400)]
    assert t.wide().shape == (2, 2) and "runs needed" in repr(t)


@pytest.mark.parametrize("kwargs, match", [
    ({"delta": 0.0}, "no difference"), ({"runs": 1}, "integer >= 2"), ({"alpha": 1.5}, "alpha"),
    ({"target": 1.0}, "target"), ({"systems": 1}, "systems"), ({"items": 0}, "items"), ({"delta": "x"}, "delta"),
])
def test_bad_values_are_refused(kwargs, match):
    args = {"runs": 3, "items": 100, "delta": 0.05, "alpha": 0.05, "target": 0.8, "systems": 2, **kwargs}
    with pytest.raises(pw.PlanningError, match=match):
        pw.power_table(args["runs"], args["items"], args["delta"], pw.VarianceComponents(0.05, 0.1, 0.1),
                       systems=args["systems"], alpha=args["alpha"], target=args["target"])


def test_bad_components_are_refused():
    with pytest.raises(pw.PlanningError, match="run SD"):
        pw.VarianceComponents(-0.1, 0.1, 0.1)
    with pytest.raises(pw.PlanningError, match="both 0"):
        pw.VarianceComponents(0.0, 0.1, 0.0)
    with pytest.raises(pw.PlanningError, match="test must be"):
        pw.simulated_power(0.1, pw.VarianceComponents(0.1, 0.1, 0.1), test="wald")


def test_vrs_plan_prints_the_closed_form(capsys):
    code = main(["plan", "--runs", "3", "5", "10", "--items", "500", "2000", "--delta", "0.02", "--run-sd", "0.05",
                 "--item-sd", "0.1", "--residual-sd", "0.1"])
    out = capsys.readouterr().out
    assert code == 0
    for n in (3, 5, 10):
        line = next(ln for ln in out.splitlines() if ln.split()[:1] == [str(n)])
        values = [float(v) for v in line.split()[1:]]
        assert values[:2] == pytest.approx([_closed_form(0.02, n, m, 0.05, 0.1) for m in (500, 2000)], abs=5e-4)
    for m in (500, 2000):
        assert f"with {m} items: {_brute_runs(0.02, m, 0.05, 0.1)}" in out


@pytest.mark.parametrize("extra, match", [
    (["--delta", "abc"], "delta must be a number"), (["--run-sd", "-1"], "run SD must be >= 0"),
    (["--runs", "1"], "runs per system must be an integer >= 2"), (["--alpha", "0"], "alpha"),
    (["--delta", "0"], "no difference"),
])
def test_vrs_plan_bad_values_exit_2(capsys, extra, match):
    args = {"--items": "500", "--delta": "0.02", "--run-sd": "0.05", "--residual-sd": "0.1"}
    for i in range(0, len(extra), 2):
        args[extra[i]] = extra[i + 1]
    argv = ["plan"] + [x for kv in args.items() for x in kv]
    assert main(argv) == 2
    assert match in capsys.readouterr().err


# ------------------------------------------------------------- crossed columns, detectable difference, boundary

def _crossed_log(rng, n_seed, n_conf, m, delta, s_seed, s_conf, s_e, k=2):
    """Brute force, written out with numpy: k systems x seeds x configurations x m items, every system with its own
    seed and configuration effects (crossed within the system), item effects shared."""
    shift = np.r_[0.0, np.full(k - 1, delta)]
    a = rng.normal(0, s_seed, (k, n_seed, 1, 1))
    b = rng.normal(0, s_conf, (k, 1, n_conf, 1))
    it = rng.normal(0, 0.1, (1, 1, 1, m))
    y = shift[:, None, None, None] + a + b + it + rng.normal(0, s_e, (k, n_seed, n_conf, m))
    s, r, c, i = np.meshgrid(range(k), range(n_seed), range(n_conf), range(m), indexing="ij")
    return pd.DataFrame({"system": [f"S{v}" for v in s.ravel()], "seed": r.ravel().astype(str),
                         "config": c.ravel().astype(str), "item": i.ravel().astype(str), "score": y.ravel()})


def test_crossed_columns_variance_of_a_system_mean_is_per_column():
    """The variance of a system's mean with seeds x configurations crossed: s_seed^2 / n_seed + s_conf^2 / n_conf +
    s_e^2 / (m N), checked against 20,000 brute-force draws of the system mean (its sample variance within 4 % =
    more than 4 SEs, sqrt(2 / 20000) = 1 % relative); the planner of issue 20 summed the variances over N = n_seed
    n_conf runs, 2.5x too small here."""
    rng = np.random.default_rng(5)
    n_seed, n_conf, m, s1, s2, se = 4, 3, 30, 0.05, 0.04, 0.1
    reps = 20_000
    a = rng.normal(0, s1, (reps, n_seed, 1))
    b = rng.normal(0, s2, (reps, 1, n_conf))
    e = rng.normal(0, se / math.sqrt(m), (reps, n_seed, n_conf))  # a run's mean of m residuals
    brute = float(np.var((a + b + e).mean(axis=(1, 2)), ddof=1))
    V, nu = pw.design_moments([n_seed, n_conf], m, [s1, s2], se)
    assert V == pytest.approx(brute, rel=0.04)
    summed = (s1 ** 2 + s2 ** 2) / (n_seed * n_conf) + se ** 2 / (m * n_seed * n_conf)
    assert summed < 0.5 * brute
    assert 2 <= nu <= 2 * (n_seed + n_conf - 2)   # between one column's df and the sum of both
    # one column: the exact F test's df and the issue-20 closed form
    assert pw.design_moments(3, m, 0.05, se) == pytest.approx(((0.05 ** 2 + se ** 2 / m) / 3, 4.0))


def test_crossed_power_agrees_with_a_brute_force_simulation():
    """2 systems x 4 seeds x 3 configurations x 20 items: the engine's Kenward-Roger test of `score ~ system +
    (1|item) + (1|system:seed) + (1|system:config)` on 150 logs simulated above rejects within 3 Monte-Carlo SEs
    (plus 0.03 for the df approximation) of the planned power; summing the run variances over the 12 runs, the
    old planner's reading, is far outside."""
    n_seed, n_conf, m, s1, s2, se, delta = 4, 3, 20, 0.05, 0.05, 0.1, 0.12
    planned = pw.f_test_power(delta, [n_seed, n_conf], m, [s1, s2], se)
    summed = pw.f_test_power(delta, n_seed * n_conf, m, math.hypot(s1, s2), se)
    rng = np.random.default_rng(11)
    n_sim, rejected = 150, 0
    formula = "score ~ system + (1|item) + (1|system:seed) + (1|system:config)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n_sim):
            fit = mixed.fit(formula, _crossed_log(rng, n_seed, n_conf, m, delta, s1, s2, se))
            rejected += pw.TESTS["kenward-roger"](fit, np.array([[0.0, 1.0]])).p_value <= 0.05
    rate = rejected / n_sim
    se_mc = math.sqrt(planned * (1 - planned) / n_sim)
    assert abs(rate - planned) <= 3 * se_mc + 0.03, (rate, planned)
    assert summed - rate > 0.25, (summed, rate)


def test_minimum_detectable_difference_has_the_target_power():
    for runs, run_sd, k in [(3, 0.05, 2), (5, 0.02, 3), ([4, 3], [0.05, 0.03], 2)]:
        mdd = pw.minimum_detectable_difference(runs, 300, run_sd, 0.1, systems=k)
        assert pw.f_test_power(mdd, runs, 300, run_sd, 0.1, systems=k) == pytest.approx(0.8, abs=1e-9)
        assert pw.f_test_power(0.95 * mdd, runs, 300, run_sd, 0.1, systems=k) < 0.8
    # closed form by hand for one column: lambda solves ncf.sf(crit, 1, 4, lambda) = 0.8; mdd^2 = lambda * 2 V
    from scipy.optimize import brentq
    crit = stats.f.isf(0.05, 1, 4)
    lam = brentq(lambda x: stats.ncf.sf(crit, 1, 4, x) - 0.8, 1e-6, 200)
    V = (0.05 ** 2 + 0.01 / 300) / 3
    assert pw.minimum_detectable_difference(3, 300, 0.05, 0.1) == pytest.approx(math.sqrt(lam * 2 * V), rel=1e-8)


def test_variance_upper_bound_covers_with_its_level():
    """The 80 % upper bound of a variance from SS ~ (s^2 + noise) chi2(df): covers the true s^2 in about 80 % of
    20,000 draws (within 4 SEs), and is the chi-square quantile formula."""
    rng = np.random.default_rng(3)
    s2, noise, df = 0.0025, 0.0005, 4
    ss = (s2 + noise) * rng.chisquare(df, 20_000)
    cover = np.mean([pw.variance_upper_bound(v, df, noise) >= s2 for v in ss])
    assert abs(cover - 0.8) <= 4 * math.sqrt(0.16 / 20_000)
    assert pw.variance_upper_bound(0.01, 4, 0.0) == pytest.approx(0.01 / stats.chi2.ppf(0.2, 4))
    assert pw.variance_upper_bound(1e-6, 4, 0.01) == 0.0


def test_analysis_power_never_rests_on_a_zero_run_variance_unsaid():
    """A log whose REML run variance is 0 (no run effect, 3 runs): summary.json's power says it planned with the
    upper confidence bound, the verdict sentence says so, and no post-hoc power of the observed difference is
    reported; the bound is the formula applied to the run means written out here."""
    from vrs_helpers.book.simulation import evaluation_log
    from vrs_helpers.evaluate.analysis import analyze

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = evaluation_log(3, runs=3, items=200, run_sd=0.0)
        r = analyze(d, "score", "system", "item", replications=["run"], delta=0.03, n_resamples=100)
    col = r.fits.power["columns"]["run"]
    assert col["sd_estimate"] == 0.0 and "upper confidence bound" in col["basis"]
    z = d.groupby(["system", "run"], observed=True)["score"].mean()
    ss = float(((z - z.groupby(level=0, observed=True).transform("mean")) ** 2).sum())
    resid = float(r.fits.comparison_random.model.variance_components["variance"]["Residual"])
    assert col["sd"] ** 2 == pytest.approx(ss / stats.chi2.ppf(0.2, 4) - resid / 200, rel=1e-9)
    assert r.fits.power["planned_with_upper_bound"] == ["run"] and "observed" not in r.fits.power
    said = [v for v in r.verdict if v.startswith("Power")]
    assert said and all("upper confidence bound" in v and "REML estimate of that run variance is 0" in v
                        for v in said)
    mdd = r.fits.power["minimum_detectable_difference"]
    si = r.fits.power["system_item_sd"]   # the model's (1|system:item) share (issue 28), 0 or not
    vc = r.fits.comparison_random.model.variance_components["variance"]
    assert si == pytest.approx(math.sqrt(vc.get("system:item", 0.0)))
    assert pw.f_test_power(mdd, 3, 200, col["sd"], math.sqrt(resid), system_item_sd=si) == pytest.approx(0.8,
                                                                                                        abs=1e-9)


def test_vrs_plan_crossed_columns_and_a_zero_run_sd_said(capsys):
    """`vrs plan --crossed config:SD:LEVELS` plans seeds x configurations per column (the power printed is the
    crossed closed form, checked by the brute-force simulation above); a run SD of 0 is said in a NOTE line."""
    code = main(["plan", "--runs", "4", "--items", "20", "--delta", "0.12", "--run-sd", "0.05", "--residual-sd",
                 "0.1", "--crossed", "config:0.05:3"])
    out = capsys.readouterr().out
    assert code == 0 and "NOTE" not in out
    line = next(ln for ln in out.splitlines() if ln.split()[:1] == ["4"])
    assert float(line.split()[1]) == pytest.approx(pw.f_test_power(0.12, [4, 3], 20, [0.05, 0.05], 0.1), abs=5e-4)
    assert main(["plan", "--items", "300", "--delta", "0.02", "--run-sd", "0", "--residual-sd", "0.1"]) == 0
    assert "NOTE: the run SD is 0" in capsys.readouterr().out
    assert main(["plan", "--items", "300", "--delta", "0.02", "--run-sd", "0.01", "--residual-sd", "0.1",
                 "--crossed", "config:0.03"]) == 2
    assert "NAME:SD:LEVELS" in capsys.readouterr().err


def test_simulated_power_with_system_by_item_variation_agrees_with_the_quasi_f_closed_form():
    """System x item SD 0.1 as large as the residual, run SD 0.005, 2 x 3 runs x 100 items: the engine's
    Kenward-Roger test of the model with (1|system:item) on 200 simulated logs rejects within 3 Monte-Carlo SEs
    (plus 0.03 for the df approximation) of the closed form with the system x item share (design_moments); the
    closed form without that share (the issue-20 planner) promises far more."""
    comps = pw.VarianceComponents(run_sd=0.005, item_sd=0.1, residual_sd=0.1)
    planned = pw.f_test_power(0.035, 3, 100, 0.005, 0.1, system_item_sd=0.1)   # 0.52
    ignored = pw.f_test_power(0.035, 3, 100, 0.005, 0.1)                       # 0.81
    sim = pw.simulated_power(0.035, comps, runs=3, items=100, n_sim=200, seed=4, system_item_sd=0.1)
    assert sim.n_failed == 0 and "system x item" in sim.design
    assert abs(sim.power - planned) <= 3 * math.sqrt(planned * (1 - planned) / 200) + 0.03, (sim.power, planned)
    assert ignored - sim.power > 0.2


def test_simulated_power_of_binary_scores_is_seeded_and_grows_with_the_difference():
    """0/1 scores through the workflow's comparison: the same seed gives the same p-values; a difference of 1.5
    logits with 5 runs of 200 items is detected more often than none (20 logs each; items fixed, as
    `--items fixed`: the GLMM bootstrap with (1|system:item) takes over a minute per log)."""
    comps = pw.VarianceComponents(run_sd=0.2, item_sd=1.0, residual_sd=0.0)
    kw = {"runs": 5, "items": 200, "n_sim": 20, "seed": 3, "family": "binomial", "n_boot": 19, "item_effects": "fixed"}
    a, b = (pw.simulated_power(1.5, comps, **kw) for _ in range(2))
    np.testing.assert_array_equal(a.p_values, b.p_values)
    null = pw.simulated_power(0.0, comps, **kw)
    assert a.power >= 0.8 and null.power < a.power and "0/1 scores" in a.design
    with pytest.raises(pw.PlanningError, match="balanced"):
        pw.simulated_power(0.5, comps, runs=[3, 4], family="binomial")


def test_design_moments_residual_df_counts_the_system_item_term():
    """Issue 39: the residual df of the quasi-F's Satterthwaite df leave out the system x item df when that term is
    in the model. The residual df here: the rows minus the rank of the fixed-effects design of every term (system,
    item, system:run, system:item), counted by numpy."""
    import itertools

    k, n, m, s_run, s_e, s_si = 2, 3, 6, 0.05, 0.1, 0.08
    rows = list(itertools.product(range(k), range(n), range(m)))
    X = np.array([[1.0] + [s == a for a in range(k)] + [i == b for b in range(m)]
                  + [(s, r) == ab for ab in itertools.product(range(k), range(n))]
                  + [(s, i) == ab for ab in itertools.product(range(k), range(m))] for s, r, i in rows], float)
    df_res = len(rows) - np.linalg.matrix_rank(X)
    assert df_res == (k * n * m - 1) - (k - 1) - (m - 1) - k * (n - 1) - (k - 1) * (m - 1)
    noise = s_e ** 2 / m
    E = np.array([s_run ** 2 / n * n + noise, s_si ** 2 / m * n + noise])
    nu = (E.sum() - noise) ** 2 / (E[0] ** 2 / (k * (n - 1)) + E[1] ** 2 / ((k - 1) * (m - 1)) + noise ** 2 / df_res)
    V, got = pw.design_moments(n, m, s_run, s_e, k, s_si)
    assert got == pytest.approx(nu, rel=1e-12)
    assert V == pytest.approx(s_run ** 2 / n + s_si ** 2 / m + s_e ** 2 / (m * n), rel=1e-12)


def test_crossed_runs_power_is_the_paired_t_on_run_means():
    """Issue 39: runs shared by two systems (crossed). Closed form: the per-run differences of the run means are
    n independent N(delta, 2 tau^2), tau^2 = s_run^2 + s_e^2 / m (s_run the system x run SD); the test is the
    paired t on n - 1 df with noncentrality sqrt(n) delta / sqrt(2 tau^2), its power from scipy's noncentral t."""
    from scipy import stats

    n, m, s_run, s_e, delta, alpha = 5, 300, 0.01, 0.1, 0.03, 0.05
    tau2 = s_run ** 2 + s_e ** 2 / m
    nc = math.sqrt(n) * delta / math.sqrt(2 * tau2)
    crit = stats.t.isf(alpha / 2, n - 1)
    want = stats.nct.sf(crit, n - 1, nc) + stats.nct.cdf(-crit, n - 1, nc)
    got = pw.f_test_power(delta, n, m, s_run, s_e, 2, alpha, shared_runs=True)
    assert got == pytest.approx(want, rel=1e-6)
    assert pw.design_moments(n, m, s_run, s_e, 3, shared_runs=True)[1] == 2 * (n - 1)
    assert got < pw.f_test_power(delta, n, m, s_run, s_e, 2, alpha)  # fewer df than nested runs, same V
    mdd = pw.minimum_detectable_difference(n, m, s_run, s_e, 2, alpha, 0.8, shared_runs=True)
    assert pw.f_test_power(mdd, n, m, s_run, s_e, 2, alpha, shared_runs=True) == pytest.approx(0.8, abs=1e-8)
    table = pw.power_table([3, 5], [300], delta, pw.VarianceComponents(s_run, 0.1, s_e), shared_runs=True)
    assert table.table.set_index("runs").loc[5, "power"] == pytest.approx(want, rel=1e-6)
    assert "runs crossed" in table.text() and "(1, n - 1) df" in table.text()
    # vrs plan says which runs model it plans for, the one vrs analyze's default (--runs auto) fits to such labels
    assert table.text().splitlines()[1].startswith("Runs crossed, (1|run) + (1|system:run)")
    nested = pw.power_table([3, 5], [300], delta, pw.VarianceComponents(s_run, 0.1, s_e)).text().splitlines()
    assert nested[1].startswith("Runs nested, (1|system:run)") and "--runs auto" in nested[1]
