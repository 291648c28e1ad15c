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
