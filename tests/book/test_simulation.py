"""vrs_helpers.book.simulation: simulated evaluation logs with the stated variance structure; rejection rates with their
Monte-Carlo standard errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from vrs_helpers.book.simulation import evaluation_log, rejection_rates
from vrs_helpers.errors import VRSError


@settings(max_examples=25, deadline=None)
@given(systems=st.integers(1, 4), runs=st.integers(1, 5), items=st.integers(1, 30), seed=st.integers(0, 2**31))
def test_log_shape_and_balance(systems, runs, items, seed):
    d = evaluation_log(seed, systems=systems, runs=runs, items=items)
    assert len(d) == systems * runs * items
    assert (d.groupby(["system", "run", "item"], observed=True).size() == 1).all()
    assert d["item"].nunique() == items and d["system"].nunique() == systems


def test_log_variance_structure_by_moments():
    """With one huge design the ANOVA moments recover the stated SDs (independent closed forms: the variance of
    run means within a system is run_sd^2 + residual_sd^2 / items (items shared, item effects cancel in
    differences); the within-run variance of item-centred scores estimates residual_sd^2)."""
    d = evaluation_log(1, systems=2, runs=400, items=200, delta=0.3, run_sd=0.2, item_sd=0.5, residual_sd=0.1)
    run_means = d.groupby(["system", "run"], observed=True)["score"].mean()
    gap = run_means["S1"].mean() - run_means["S0"].mean()
    assert gap == pytest.approx(0.3, abs=4 * 0.2 * np.sqrt(2 / 400))
    var_runs = run_means.groupby(level=0).var().mean()
    assert var_runs == pytest.approx(0.2**2 + 0.1**2 / 200, rel=0.15)   # 400 runs: SE of a variance ~ 7 %
    centred = d["score"] - d.groupby(["system", "run"], observed=True)["score"].transform("mean")
    item_means = centred.groupby(d["item"]).transform("mean")
    assert (centred - item_means).var() == pytest.approx(0.1**2, rel=0.02)


def test_uniform_p_values_reject_at_alpha():
    """A test whose p-value is uniform under the null rejects with probability alpha exactly: the estimate lies
    within 4 Monte-Carlo SEs of alpha, and the SE is sqrt(alpha (1 - alpha) / n)."""
    r = rejection_rates(lambda rng: rng.uniform(), {"uniform": lambda u: u}, n_sim=4000, alpha=0.05, seed=3)
    f = r.to_frame().iloc[0]
    assert abs(f["rate"] - 0.05) < 4 * np.sqrt(0.05 * 0.95 / 4000)
    assert f["mc_se"] == pytest.approx(np.sqrt(f["rate"] * (1 - f["rate"]) / 4000))


def test_t_test_type_one_error_and_power_against_closed_form():
    """One-sample t test on n = 10 normal values: rejection rate alpha under the null; under a shift of 1 SD its
    power is the noncentral t tail (scipy.stats.nct, independent of the simulation)."""
    n = 10

    def t_p(x):
        return stats.ttest_1samp(x, 0.0).pvalue

    null = rejection_rates(lambda rng: rng.normal(0, 1, n), {"t": t_p}, n_sim=3000, seed=1).to_frame().iloc[0]
    assert abs(null["rate"] - 0.05) < 4 * null["mc_se"] + 1e-12
    alt = rejection_rates(lambda rng: rng.normal(1, 1, n), {"t": t_p}, n_sim=3000, seed=2).to_frame().iloc[0]
    crit = stats.t.ppf(0.975, n - 1)
    power = stats.nct.sf(crit, n - 1, np.sqrt(n)) + stats.nct.cdf(-crit, n - 1, np.sqrt(n))
    assert abs(alt["rate"] - power) < 4 * np.sqrt(power * (1 - power) / 3000)


def test_same_seed_same_rates_and_nan_left_out():
    sim = lambda rng: rng.uniform()  # noqa: E731
    tests = {"u": lambda u: u, "half_nan": lambda u: np.nan if u > 0.5 else u}
    a = rejection_rates(sim, tests, n_sim=200, seed=9)
    b = rejection_rates(sim, tests, n_sim=200, seed=9)
    assert a.p_values.equals(b.p_values)
    f = a.to_frame().set_index("test")
    assert f.loc["half_nan", "simulations"] == (a.p_values["u"] <= 0.5).sum()


@pytest.mark.parametrize("kwargs, message", [
    ({"alpha": 0}, "alpha"), ({"n_sim": 0}, "n_sim"), ({"tests": {}}, "at least one test")])
def test_bad_arguments(kwargs, message):
    args = {"simulate": lambda rng: 0.0, "tests": {"x": lambda d: 0.5}, "n_sim": 5, **kwargs}
    with pytest.raises(VRSError, match=message):
        rejection_rates(**args)


def test_bad_log_arguments():
    with pytest.raises(VRSError, match="delta"):
        evaluation_log(0, systems=3, delta=[0.1, 0.2])
    with pytest.raises(VRSError, match=">= 1"):
        evaluation_log(0, runs=0)


def test_baseline_and_replications_design_and_moments():
    """Each item: one baseline score, `replications` scores of the other system, sharing the item effect. By
    moments over 20,000 items: Var(baseline) = item_sd^2 + residual_sd^2, Cov(baseline, replication) = item_sd^2,
    mean(replication - baseline) = delta (4 standard errors)."""
    from vrs_helpers.book.simulation import baseline_and_replications

    s = baseline_and_replications(5, items=20_000, item_sd=0.1, residual_sd=0.05, delta=-0.015, replications=3)
    assert s.baseline.shape == (20_000,) and s.replications.shape == (20_000, 3)
    n = 20_000
    assert abs(s.baseline.var() - 0.0125) < 4 * 0.0125 * np.sqrt(2 / n)
    assert abs(np.cov(s.baseline, s.replications[:, 0])[0, 1] - 0.01) < 4 * 0.0125 / np.sqrt(n)
    diff = s.replications.mean(axis=1) - s.baseline
    assert abs(diff.mean() + 0.015) < 4 * diff.std() / np.sqrt(n)
    data = s.data
    assert list(data.columns) == ["system", "item", "score"] and len(data) == 4 * n
    assert data.groupby("system").size().to_dict() == {"B": n, "T": 3 * n}
    again = baseline_and_replications(np.random.default_rng(5), items=20_000, delta=-0.015)
    assert np.array_equal(again.baseline, s.baseline) and again.seed == s.seed
    with pytest.raises(VRSError, match="items must be"):
        baseline_and_replications(0, items=1)


@pytest.mark.filterwarnings("ignore::statsmodels.tools.sm_exceptions.ConvergenceWarning")
def test_glrt_p_value_is_statsmodels_likelihood_ratio():
    """The GLRT p-value against an independent ML fit of the same two models (statsmodels MixedLM): the deviance
    difference within 1e-5 (both optimizers converge on this well-determined problem)."""
    import statsmodels.formula.api as smf

    from vrs_helpers.book.simulation import baseline_and_replications, glrt_p_value

    s = baseline_and_replications(11, items=60, item_sd=0.1, residual_sd=0.05, delta=-0.02)
    d = s.data
    full = smf.mixedlm("score ~ system", d, groups=d["item"]).fit(reml=False)
    null = smf.mixedlm("score ~ 1", d, groups=d["item"]).fit(reml=False)
    lr = 2 * (full.llf - null.llf)
    assert abs(stats.chi2.isf(glrt_p_value(s), 1) - lr) < 1e-5


def test_glrt_and_permutation_hold_alpha_under_the_null():
    """100 simulated null data sets: both tests reject at most alpha + 4 Monte-Carlo SE, sqrt(0.05 * 0.95 / 100);
    with a large planted difference both reject nearly always."""
    from vrs_helpers.book.simulation import baseline_and_replications, glrt_p_value, permutation_p_value

    tests = {"GLRT": glrt_p_value, "permutation": permutation_p_value}
    null = rejection_rates(lambda rng: baseline_and_replications(rng, items=40), tests, n_sim=100, seed=3)
    assert (null.rates <= 0.05 + 4 * np.sqrt(0.05 * 0.95 / 100)).all()
    big = rejection_rates(lambda rng: baseline_and_replications(rng, items=40, delta=0.05), tests, n_sim=20, seed=4)
    assert (big.rates >= 0.95).all()
    s = baseline_and_replications(2, items=30)
    from vrs_helpers.book.significance import permutation_test

    assert permutation_p_value(s, 200) == permutation_test(s.baseline, s.replications.mean(axis=1),
                                                           n_resamples=200, seed=s.seed).p_value


def test_system_by_item_variance_by_moments():
    """The (1|system:item) part: the system x item mean square of the per-(system, item) means over R runs,
    sum of the doubly centred means^2 / ((k - 1)(m - 1)), estimates system_item_sd^2 + residual_sd^2 / R
    (run and item effects cancel in the double centring); with 3 systems x 2000 items its SE is ~3 %."""
    R, m = 4, 2000
    d = evaluation_log(2, systems=3, runs=R, items=m, run_sd=0.3, item_sd=0.5, residual_sd=0.2,
                       system_item_sd=0.15)
    cell = d.groupby(["system", "item"], observed=True)["score"].mean().unstack("item").to_numpy()
    dc = cell - cell.mean(axis=0, keepdims=True) - cell.mean(axis=1, keepdims=True) + cell.mean()
    ms = (dc ** 2).sum() / ((3 - 1) * (m - 1))
    assert ms == pytest.approx(0.15 ** 2 + 0.2 ** 2 / R, rel=0.12)
    # the runs of one system share g_si: the within-(system, item) variance over runs is residual + nothing else
    centred = d["score"] - d.groupby(["system", "run"], observed=True)["score"].transform("mean")
    within = centred - centred.groupby([d["system"], d["item"]], observed=True).transform("mean")
    assert (within ** 2).sum() / (3 * m * (R - 1) - 3 * (R - 1)) == pytest.approx(0.2 ** 2, rel=0.05)


def test_binary_scores_have_the_logistic_mean():
    """0/1 scores with eta = mean + delta_s + a_sr + b_i + g_si: the rate of S1 - the mean of logistic(eta) over
    eta ~ N(mean + delta, run_sd^2 + item_sd^2 + si^2), by Gauss-Hermite quadrature (independent of the draws) -
    within 4 binomial SEs (with 200 runs x 300 items the run and item draws add to the SE: 4 SEs of the
    run/item-level spread, computed here)."""
    runs, items, mu, dl, s_run, s_item, s_si = 200, 300, 0.4, 0.5, 0.3, 0.6, 0.2
    d = evaluation_log(4, systems=2, runs=runs, items=items, mean=mu, delta=dl, run_sd=s_run, item_sd=s_item,
                       system_item_sd=s_si, family="binomial")
    assert set(d["score"].unique()) <= {0.0, 1.0}
    x, w = np.polynomial.hermite_e.hermegauss(80)
    sd = np.sqrt(s_run ** 2 + s_item ** 2 + s_si ** 2)
    expected = float(np.sum(w / (1 + np.exp(-(mu + dl + sd * x)))) / np.sqrt(2 * np.pi))
    rate = d.loc[d["system"] == "S1", "score"].mean()
    # the item and system-item effects are shared by all runs: var of the rate ~ slope^2 (s_item^2 + s_si^2) / items
    slope = expected * (1 - expected)
    se = np.sqrt(slope ** 2 * ((s_item ** 2 + s_si ** 2) / items + s_run ** 2 / runs) + 0.25 / (runs * items))
    assert abs(rate - expected) < 4 * se
    none = evaluation_log(5, runs=50, items=400, mean=-1.0, run_sd=0, item_sd=0, family="binomial")
    p = 1 / (1 + np.exp(1.0))
    assert abs(none["score"].mean() - p) < 4 * np.sqrt(p * (1 - p) / len(none))


def test_missing_rows_and_the_first_version_draws():
    """missing = 0.1 drops round(0.1 x rows) distinct rows; with the default arguments the log is the first
    version's: item effects, run effects, then the noise, from the same generator (written out here)."""
    full = evaluation_log(7, systems=3, runs=3, items=100)
    part = evaluation_log(7, systems=3, runs=3, items=100, missing=0.1)
    assert len(part) == 900 - 90
    merged = part.merge(full, on=["system", "run", "item"], suffixes=("", "_full"))
    assert len(merged) == 810 and np.allclose(merged["score"], merged["score_full"])
    rng = np.random.default_rng(7)
    item, run = rng.normal(0, 0.1, 100), rng.normal(0, 0.05, (3, 3))
    y = np.array([0.0, 0.0, 0.0])[:, None, None] + run[:, :, None] + item + rng.normal(0, 0.1, (3, 3, 100))
    np.testing.assert_array_equal(full["score"].to_numpy(), y.ravel())
    with pytest.raises(VRSError, match="missing"):
        evaluation_log(0, missing=1.0)
    with pytest.raises(VRSError, match="family"):
        evaluation_log(0, family="poisson")


def test_kenward_roger_p_value_is_the_within_item_t_test():
    """Every item has one baseline score and R scores of the other system: the system effect is estimated within
    items only, d = mean_i (mean of the R scores - baseline score), with variance sigma^2 (1 + 1/R) / m, and sigma^2
    by the within-item residual mean square on 4m - m - 1 df; Kenward-Roger's F is that t squared on those df
    (balanced: exact), computed here with numpy."""
    from vrs_helpers.book.simulation import baseline_and_replications, kenward_roger_p_value

    s = baseline_and_replications(3, items=40, item_sd=0.2, residual_sd=0.05, delta=0.01, replications=3)
    m, R = s.replications.shape
    y = np.column_stack([s.baseline, s.replications])            # m x (1 + R)
    d = (s.replications.mean(axis=1) - s.baseline).mean()
    fitted = y.mean(axis=1, keepdims=True) + np.r_[-R, np.ones(R)][None, :] * d / (1 + R)
    df = m * (1 + R) - m - 1
    sigma2 = ((y - fitted) ** 2).sum() / df
    t = d / np.sqrt(sigma2 * (1 + 1 / R) / m)
    assert kenward_roger_p_value(s) == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-6)


def test_bootstrap_p_value_agrees_with_the_exact_test_within_monte_carlo_error():
    """On one simulated test set the parametric-bootstrap LRT's p (999 simulations) lies within 3 Monte-Carlo SEs
    of the exact within-item t test's p (Kenward-Roger, previous test), and is seeded with the data set."""
    from vrs_helpers.book.simulation import baseline_and_replications, bootstrap_p_value, kenward_roger_p_value

    s = baseline_and_replications(8, items=60, item_sd=0.1, residual_sd=0.05, delta=0.012)
    exact = kenward_roger_p_value(s)
    pb = bootstrap_p_value(s, n_sim=999)
    assert 0.01 < exact < 0.5
    assert abs(pb - exact) <= 3 * np.sqrt(exact * (1 - exact) / 999) + 1 / 1000
    assert bootstrap_p_value(s, n_sim=99) == bootstrap_p_value(s, n_sim=99)


def test_workflow_p_values_are_the_comparisons_own():
    """workflow_p_values is compare_systems(replications=["run"]) as `vrs analyze` calls it: with two systems its
    test's p, with three the smallest adjusted pairwise p (the family-wise decision), the chi-square GLRT beside.
    Its runs model is auto: each system's own run labels give the nested model, labels shared by every system the
    crossed one with three systems and both models (the smaller p adjusted) with two (issue 56)."""
    import warnings

    from vrs_helpers.book.glrt import compare_systems
    from vrs_helpers.book.simulation import workflow_p_values

    for k in (2, 3):
        for labels, runs in (("own", ("nested",)), ("shared", ("crossed", "nested") if k == 2 else ("crossed",))):
            d = evaluation_log(11, systems=k, runs=3, items=60, delta=0.02, run_labels=labels)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                c = compare_systems(d, "score", "system", "item", replications=["run"])
            assert (c.runs_models or (c.runs,)) == runs
            out = workflow_p_values(d)
            expected = c.test.p_value if k == 2 else c.contrasts["p_value"].min()
            assert out["default"] == pytest.approx(expected, rel=1e-9)
            assert out["chisq"] == pytest.approx(c.glrt.p_value, rel=1e-9)
    bad = evaluation_log(1, runs=1, items=20)   # one run per system: the comparison refuses it
    assert np.isnan(workflow_p_values(bad)["default"])
