"""The single-step max-|T| over all pairs of k means, sampled in the k dimensions of the means (issue 54).

:func:`vrs_helpers.mixed.inference.multiplicity.single_step` samples the m contrasts' statistics from their m x m
correlation matrix (its eigenvectors, m^2 memory and an m x rank product per point). For the m = k (k - 1) / 2 pairs
of k means with covariance S the same statistics are T_ij = (x_i - x_j) / s_ij with x ~ N(0, S) (or multivariate t)
and s_ij^2 = S_ii + S_jj - 2 S_ij: the same law of max |T|, sampled from k coordinates per point and m differences
(no m x m matrix; 100 systems: 4,950 pairs, 24.5 million correlations never formed). The number of points is
bounded so that points x m stays at most :data:`WORK` (2^18 points up to 1,144 pairs, 2^15 = 32,768 for 100
systems; at least 2^14): the quantile's quasi-Monte-Carlo error stays below 0.01 SE units there (the test
tests/mixed/test_pair_max.py compares with the m-dimensional sample). Used above :data:`PAIRS_FROM` pairs, so the
families of up to 24 systems keep :func:`~.multiplicity.single_step`'s numbers.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.stats.qmc import Sobol

from .multiplicity import MaxT

#: pair families of more than this many contrasts (25 systems: 300) are sampled in the means' space
PAIRS_FROM = 300
#: points x pairs per family at most (the bound on the number of points)
WORK = 3 * 10 ** 8
BLOCK = 1024
#: points x pairs held at once (single precision: 200 MB): the block of points shrinks for many pairs (1,000
#: systems: 499,500 pairs, 64 points a block)
BLOCK_WORK = 5 * 10 ** 7


def points_for(m: int) -> int:
    """The number of quasi-Monte-Carlo points for a family of ``m`` pairs: 2^18, fewer for large m (module
    docstring), at least 2^14."""
    return int(2 ** int(np.clip(np.floor(np.log2(WORK / max(m, 1))), 14, 18)))


def pairs_distribution(S, df: float = np.inf, points: int | None = None, seed: int = 0) -> MaxT:
    """The null distribution of max over i < j of |x_i - x_j| / s_ij for x ~ N(0, S) (``df`` = inf) or multivariate
    t with ``df``: the single-step family of all pairwise differences of k means with covariance ``S``."""
    S = np.asarray(S, dtype=float)
    k = S.shape[0]
    i, j = np.triu_indices(k, 1)
    m = len(i)
    points = points_for(m) if points is None else int(points)
    var = np.diag(S)[i] + np.diag(S)[j] - 2 * S[i, j]
    inv = 1.0 / np.sqrt(np.clip(var, 1e-300, None))
    w, U = np.linalg.eigh((S + S.T) / 2)
    pos = w > max(1e-12, 1e-10 * float(w.max(initial=0.0)))
    A = U[:, pos] * np.sqrt(w[pos])  # k x r, A A' = S
    r = A.shape[1]
    finite = np.isfinite(df)
    sobol = Sobol(d=r + (1 if finite else 0), scramble=True, seed=np.random.default_rng(seed))
    out = np.empty(points)
    inv32 = inv.astype(np.float32)
    block = 1 << int(np.log2(min(BLOCK, max(16, BLOCK_WORK // max(m, 1)))))  # a power of 2, as Sobol's draws
    for a in range(0, points, block):
        u = np.clip(sobol.random(min(block, points - a)), 1e-16, 1 - 1e-16)
        x = (stats.norm.ppf(u[:, :r]) @ A.T).astype(np.float32)
        d = x[:, i]                        # single precision: the max of 4,950 differences per point, in place
        d -= x[:, j]
        d *= inv32
        mx = np.abs(d, out=d).max(axis=1).astype(float)
        if finite:
            mx = mx / np.sqrt(stats.chi2.ppf(u[:, r], df) / df)
        out[a:a + len(mx)] = mx
    out.sort()
    return MaxT(out, m, float(df))


def pairs_single_step(estimates, S, level: float = 0.95, df: float = np.inf, seed: int = 0) -> dict:
    """:func:`~.multiplicity.single_step` on all pairs i < j of k means with covariance ``S`` (``estimates``: the
    pairs' differences in :func:`numpy.triu_indices` order): ``p_value`` (adjusted), ``lower``/``upper``
    (simultaneous at ``level``), the critical value ``quantile``, ``statistic`` and ``SE``."""
    S = np.asarray(S, dtype=float)
    i, j = np.triu_indices(S.shape[0], 1)
    est = np.asarray(estimates, dtype=float)
    se = np.sqrt(np.clip(np.diag(S)[i] + np.diag(S)[j] - 2 * S[i, j], 0.0, None))
    dist = pairs_distribution(S, df, seed=seed)
    q = dist.quantile(level)
    t = est / se
    return {"p_value": dist.adjusted_p(t), "lower": est - q * se, "upper": est + q * se, "quantile": q,
            "statistic": t, "SE": se}
