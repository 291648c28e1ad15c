"""Single-step simultaneous inference for a family of contrasts from their joint (multivariate normal or t)
distribution: ``multcomp::glht(..., test = adjusted("single-step"))`` and emmeans' ``adjust = "mvt"`` (Hothorn,
Bretz & Westfall 2008, "Simultaneous inference in general parametric models", Biometrical Journal 50(3): 346-363).

For m contrasts with estimates c_j, standard errors s_j and correlation matrix R (from the fixed effects'
covariance: R = S^-1 D V D' S^-1), the statistics T_j = c_j / s_j are, under the null, jointly N(0, R) (Wald z) or
multivariate t with ``df`` degrees of freedom. The single-step adjusted p-value of contrast j is

    p_j = P(max_i |T_i| >= |t_j|),

and the simultaneous (1 - alpha) intervals are c_j -/+ q s_j with q the (1 - alpha) quantile of max_i |T_i|: every
contrast's interval holds its true value with probability 1 - alpha jointly, and p_j < alpha exactly when 0 is
outside contrast j's interval (below the sample's resolution 1/points, p_j is Bonferroni's bound, which the exact p
approaches as it goes to 0, capped at 1/points so that p stays monotone in |t|). mvtnorm integrates the rectangle
{|T_i| < q for all i} by Genz & Bretz's randomized quasi-Monte Carlo; here the same quasi-Monte-Carlo idea gives the
whole distribution of max |T| at once (one sample serves every p_j and q): a scrambled Sobol sequence
(scipy.stats.qmc) mapped to N(0, R) through R's eigenvectors, which also covers the singular R of all pairwise
contrasts (rank k - 1 for k means), and for ``df`` < inf one more coordinate for the chi-square divisor. With 2^18
points the Monte-Carlo error of p_j is about 1e-3 or less (mvtnorm's default ``abseps``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.stats import qmc

CHUNK = 4096  # points per block: bounds the memory of a block to CHUNK x m floats


@dataclass(frozen=True)
class MaxT:
    """The null distribution of max_i |T_i| as a sorted sample (``draws``), with the family's ``size`` and ``df``."""

    draws: np.ndarray
    size: int
    df: float

    def adjusted_p(self, t) -> np.ndarray:
        """Single-step adjusted p-values P(max |T| >= |t_j|) (module docstring)."""
        t = np.abs(np.asarray(t, dtype=float))
        out = np.full(t.shape, np.nan)
        ok = np.isfinite(t)
        n = len(self.draws)
        out[ok] = (n - np.searchsorted(self.draws, t[ok], side="left")) / n
        # beyond every draw: Bonferroni's bound m P(|T| >= t), which the exact p approaches from below as p -> 0
        # (the events |T_i| >= t become disjoint), instead of a p of 0
        far = ok & (out == 0)
        out[far] = np.minimum(1.0 / n, self.size * 2 * stats.t.sf(t[far], self.df))
        return out

    def quantile(self, level: float = 0.95) -> float:
        """The critical value q with P(max |T| <= q) = ``level``: the simultaneous intervals' half-width in SEs."""
        return float(np.quantile(self.draws, level, method="inverted_cdf"))


def correlation(D, V) -> np.ndarray:
    """The correlation matrix of the contrasts D beta for beta with covariance V."""
    D, V = np.atleast_2d(np.asarray(D, dtype=float)), np.asarray(V, dtype=float)
    C = D @ V @ D.T
    s = np.sqrt(np.clip(np.diag(C), 0.0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        R = C / np.outer(s, s)
    return R


def max_t_distribution(R, df: float = np.inf, points: int = 2 ** 18, seed: int = 0) -> MaxT:
    """The null distribution of max_i |T_i| for T ~ N(0, R) (``df`` = inf) or multivariate t (module docstring).

    ``R``: m x m correlation matrix, possibly singular (rows with NaN - a contrast that was not computed - are left
    out of the family). ``points``: quasi-Monte-Carlo points (a power of 2); ``seed``: the scrambling's seed, so the
    same call gives the same numbers."""
    R = np.atleast_2d(np.asarray(R, dtype=float))
    keep = np.isfinite(np.diag(R))
    R = R[np.ix_(keep, keep)]
    m = R.shape[0]
    if m == 0:
        return MaxT(np.array([0.0]), 0, float(df))
    R = np.where(np.isfinite(R), R, 0.0)
    w, U = np.linalg.eigh((R + R.T) / 2)
    pos = w > max(1e-10, 1e-10 * float(w.max(initial=0.0)))
    A = U[:, pos] * np.sqrt(w[pos])  # m x r, A A' = R
    r = A.shape[1]
    finite_df = np.isfinite(df)
    sobol = qmc.Sobol(d=r + (1 if finite_df else 0), scramble=True, seed=np.random.default_rng(seed))
    out = np.empty(points)
    for a in range(0, points, CHUNK):  # successive blocks of one Sobol sequence (the same points as one call)
        block = np.clip(sobol.random(min(CHUNK, points - a)), 1e-16, 1 - 1e-16)
        z = stats.norm.ppf(block[:, :r]) @ A.T
        mx = np.abs(z).max(axis=1)
        if finite_df:
            mx = mx / np.sqrt(stats.chi2.ppf(block[:, r], df) / df)
        out[a:a + CHUNK] = mx
    out.sort()
    return MaxT(out, m, float(df))


def single_step(estimates, se, R, df: float = np.inf, level: float = 0.95, points: int = 2 ** 18,
                seed: int = 0) -> dict:
    """``multcomp::glht``'s single-step test and simultaneous intervals of a family of contrasts: ``p_value``
    (adjusted), ``lower``/``upper`` (simultaneous at ``level``) and the critical value ``quantile`` (module
    docstring). Contrasts with a NaN estimate or SE are left out of the family and get NaN."""
    est = np.asarray(estimates, dtype=float)
    se = np.asarray(se, dtype=float)
    ok = np.isfinite(est) & np.isfinite(se) & (se > 0)
    R = np.atleast_2d(np.asarray(R, dtype=float)).copy()
    R[~ok, :] = np.nan
    R[:, ~ok] = np.nan
    dist = max_t_distribution(R, df, points, seed)
    q = dist.quantile(level)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(ok, est / se, np.nan)
    return {"p_value": dist.adjusted_p(t), "lower": np.where(ok, est - q * se, np.nan),
            "upper": np.where(ok, est + q * se, np.nan), "quantile": q, "statistic": t}
