"""Issue 54: the max-|T| of all pairs of k means sampled in the k dimensions of the means
(vrs_helpers/mixed/inference/pair_max.py) against the m-dimensional sample of multiplicity.single_step (the path
checked against multcomp) and against Tukey's studentized range where that is exact (equal variances, no
correlation: max |x_i - x_j| / sqrt(2 v) is the range of k independent normals over sqrt 2)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from vrs_helpers.mixed.inference.multiplicity import correlation, single_step
from vrs_helpers.mixed.inference.pair_max import pairs_distribution, pairs_single_step, points_for


def _cov(k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(k, k + 3))
    return B @ B.T / (k + 3) + np.diag(rng.uniform(0.2, 1.0, k))


@pytest.mark.parametrize("k,seed", [(6, 0), (12, 1), (30, 2)])
def test_same_law_as_the_m_dimensional_sample(k, seed):
    S = _cov(k, seed)
    i, j = np.triu_indices(k, 1)
    D = np.zeros((len(i), k))
    D[np.arange(len(i)), i], D[np.arange(len(i)), j] = 1.0, -1.0
    est = np.random.default_rng(seed).normal(0, 0.5, len(i))
    se = np.sqrt(np.einsum("ij,jk,ik->i", D, S, D))
    ref = single_step(est, se, correlation(D, S), level=0.95)
    got = pairs_single_step(est, S, level=0.95)
    assert got["quantile"] == pytest.approx(ref["quantile"], abs=0.01)
    np.testing.assert_allclose(got["SE"], se, rtol=1e-12)
    np.testing.assert_allclose(got["p_value"], ref["p_value"], atol=0.005)


@pytest.mark.parametrize("df", [np.inf, 30.0])
def test_tukey_where_exact(df):
    """Independent means with equal variance: the 0.95 quantile is qtukey(0.95, k, df) / sqrt 2."""
    k = 40
    dist = pairs_distribution(np.eye(k) * 0.7, df=df)
    assert dist.quantile(0.95) == pytest.approx(stats.studentized_range.ppf(0.95, k, df) / np.sqrt(2), abs=0.01)


def test_points_bounded():
    assert points_for(66) == 2 ** 18
    assert points_for(4950) == 2 ** 15
    assert points_for(10 ** 7) == 2 ** 14


def test_tukey_sf_many_z_contrasts():
    """4,950 z contrasts (100 systems, df infinite) share one df: tukey_sf interpolates scipy's studentized range
    there too (issue 54: 4,950 integrations took 0.7-1.7 s); every value within 1e-6 of scipy's, and the same
    decisions at 0.05."""
    from vrs_helpers.mixed.models.marginal import tukey_critical, tukey_sf

    k = 100
    z = np.abs(np.random.default_rng(54).normal(0, 3, k * (k - 1) // 2))
    dfs = np.full(len(z), np.inf)
    got = tukey_sf(z, k, dfs, tukey_critical(0.95, k, dfs))
    want = np.array([stats.studentized_range.sf(x * np.sqrt(2), k, np.inf) for x in z])
    assert np.abs(got - want).max() < 1e-6
    assert ((got < 0.05) == (want < 0.05)).all()
