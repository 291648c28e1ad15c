"""Single-step max-T (multcomp::glht's method) against closed forms: one contrast is a two-sided z (t) test, all
pairwise contrasts of independent equal-variance means follow Tukey's studentized range (scipy), and a block of
independent contrasts is Sidak's 1 - (1 - p)^m. Tolerance: the quasi-Monte-Carlo error, bounded by 4 plain
Monte-Carlo SEs sqrt(p (1 - p) / n) at n = 2^18 points (QMC is no worse than plain MC)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from vrs_helpers.mixed.inference.multiplicity import correlation, max_t_distribution, single_step

N = 2 ** 18


def tol(p):
    return 4 * np.sqrt(p * (1 - p) / N) + 1e-5


def pairwise(k):
    D = np.zeros((k * (k - 1) // 2, k))
    for r, (i, j) in enumerate(itertools.combinations(range(k), 2)):
        D[r, i], D[r, j] = 1, -1
    return D


def test_one_contrast_is_the_two_sided_test():
    d = max_t_distribution(np.ones((1, 1)))
    for z in (0.5, 1.96, 2.8):
        want = 2 * stats.norm.sf(z)
        assert abs(d.adjusted_p([z])[0] - want) < tol(want)
    dt = max_t_distribution(np.ones((1, 1)), df=7)
    want = 2 * stats.t.sf(2.1, 7)
    assert abs(dt.adjusted_p([2.1])[0] - want) < tol(want)
    assert abs(d.quantile(0.95) - stats.norm.ppf(0.975)) < 0.01


@pytest.mark.parametrize("k,df", [(3, np.inf), (12, np.inf), (5, 12.0)])
def test_all_pairs_of_independent_means_is_tukey(k, df):
    d = max_t_distribution(correlation(pairwise(k), np.eye(k)), df=df)
    for z in (1.5, 2.5, 3.2):
        want = stats.studentized_range.sf(z * np.sqrt(2), k, df)
        assert abs(d.adjusted_p([z])[0] - want) < tol(want)
    q = stats.studentized_range.ppf(0.95, k, df) / np.sqrt(2)
    assert abs(d.quantile(0.95) - q) < 0.02


def test_independent_contrasts_are_sidak():
    d = max_t_distribution(np.eye(6))
    z = 2.4
    want = 1 - (1 - 2 * stats.norm.sf(z)) ** 6
    assert abs(d.adjusted_p([z])[0] - want) < tol(want)


def test_same_seed_same_numbers_and_nan_contrasts_left_out():
    k = 4
    D = pairwise(k)
    V = np.diag([1.0, 2.0, 0.5, 1.5])
    est = np.array([0.5, 3.0, -1.0, np.nan, 0.2, 1.0])
    se = np.sqrt(np.diag(D @ V @ D.T))
    a = single_step(est, se, correlation(D, V))
    b = single_step(est, se, correlation(D, V))
    assert np.array_equal(a["p_value"], b["p_value"], equal_nan=True)
    assert np.isnan(a["p_value"][3]) and np.isnan(a["lower"][3])
    # five contrasts remain: the family is smaller than six, so p is below that of the full family
    full = single_step(np.nan_to_num(est), se, correlation(D, V))
    assert a["p_value"][1] <= full["p_value"][1]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(3, 6), st.integers(0, 10 ** 6))
def test_decisions_equal_intervals_excluding_zero(k, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(k, k))
    V = A @ A.T + 0.1 * np.eye(k)
    D = pairwise(k)
    se = np.sqrt(np.diag(D @ V @ D.T))
    est = rng.normal(0, 3, len(D)) * se
    out = single_step(est, se, correlation(D, V), points=2 ** 12)
    excl = (out["lower"] > 0) | (out["upper"] < 0)
    # p < alpha exactly when 0 is outside the interval, but where |t| lies between the quantile and the next draw
    # (p = 0.05 exactly there: P(max |T| >= |t|) steps at the draws)
    d = max_t_distribution(correlation(D, V), points=2 ** 12)
    nxt = d.draws[np.minimum(np.searchsorted(d.draws, out["quantile"], side="right"), len(d.draws) - 1)]
    near = (np.abs(out["statistic"]) >= out["quantile"]) & (np.abs(out["statistic"]) <= nxt)
    assert np.array_equal((out["p_value"] < 0.05)[~near], excl[~near])
