"""What NLP users already run on scores over training runs: Almost Stochastic Order and the expected maximum.

- :func:`aso` - Almost Stochastic Order (del Barrio, Cuesta-Albertos & Matrán 2018; Dror, Shlomov & Reichart
  2019), as the deepsig package defines it (Ulmer, Hardmeier & Frellsen 2022): the violation ratio

      eps_W2(F, G) = int_{V_X} (F^-1(t) - G^-1(t))^2 dt / int_0^1 (F^-1(t) - G^-1(t))^2 dt,
      V_X = {t in (0, 1): F^-1(t) < G^-1(t)}

  (F: scores of A, the system suspected better, G: scores of B; the share of the squared quantile distance where A
  is worse), integrated on the grid t = dt, 2 dt, ... < 1 with the empirical quantile functions, and its upper
  confidence bound eps_min = eps - sigma_hat / c * z_{1 - confidence} with c = sqrt(n m / (n + m)) and sigma_hat
  the SD of c (eps* - eps) over bootstrap resamples of both score sets. A is declared better when eps_min < tau;
  deepsig recommends tau = 0.2 (0.5 is the original, weakest threshold). Vectorised: all bootstrap resamples are
  sorted and integrated at once.
- :func:`multi_aso` - every ordered pair of several systems, Bonferroni-adjusted confidence level.
- :func:`expected_max` - the expected maximum of n runs drawn from the observed runs (Dodge et al. 2019, "Show your
  work"), with a bootstrap interval; the book's Algorithm 3.1 is its budgeted cousin.

ASO and the expected maximum use only the per-run scores: they take the run-to-run variation into account but not
the items (data properties), which the mixed-model tests model (book chapter 4, slides on significance).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import VRSError

DEEPSIG_THRESHOLD = 0.2  # deepsig's recommended rejection threshold for eps_min (Ulmer et al. 2022)


class StochasticOrderError(VRSError, ValueError):
    """Bad input for ASO or the expected maximum (the message says which and what is needed)."""


def _scores(x, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    if a.size == 0:
        raise StochasticOrderError(f"{name} is empty: give at least one score per system.")
    if not np.isfinite(a).all():
        raise StochasticOrderError(f"{name} has {int((~np.isfinite(a)).sum())} missing or infinite value(s); drop "
                                   "them first.")
    return a


def _grid(dt: float) -> np.ndarray:
    if not 0 < dt < 1:
        raise StochasticOrderError(f"dt must be between 0 and 1, got {dt!r}.")
    return np.arange(dt, 1, dt)


def _quantile_index(n: int, t: np.ndarray) -> np.ndarray:
    """Index of the empirical quantile F^-1(t) = x_(ceil(n t)) in the sorted sample (0-based, clipped)."""
    return np.clip(np.ceil(n * t).astype(int) - 1, 0, n - 1)


def violation_ratios(sorted_a: np.ndarray, sorted_b: np.ndarray, dt: float) -> np.ndarray:
    """eps_W2 for each row of sorted samples (shape (k, n) and (k, m)); 0.5 where both quantile functions are
    equal everywhere (no distance, no order: deepsig's convention). As deepsig, the first grid point enters the
    distance but not the violation integral."""
    t = _grid(dt)
    f = sorted_a[:, _quantile_index(sorted_a.shape[1], t)]
    g = sorted_b[:, _quantile_index(sorted_b.shape[1], t)]
    diff2 = (g - f) ** 2
    total = diff2.sum(axis=1) * dt
    violated = np.where(f < g, diff2, 0.0)[:, 1:].sum(axis=1) * dt
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total == 0, 0.5, violated / np.where(total == 0, 1.0, total))


@dataclass
class ASOResult:
    """Almost Stochastic Order of A over B (:func:`aso`)."""

    eps_min: float                 # upper confidence bound of the violation ratio: A better when < threshold
    violation_ratio: float         # eps_W2 of the observed scores
    sigma: float                   # bootstrap SD of sqrt(nm/(n+m)) (eps* - eps)
    confidence_level: float        # after the Bonferroni adjustment
    n_a: int
    n_b: int
    num_bootstrap_iterations: int
    threshold: float = DEEPSIG_THRESHOLD
    method: str = "Almost Stochastic Order (deepsig's definition)"
    bootstrap: np.ndarray = field(default=None, repr=False)  # the bootstrapped violation ratios

    @property
    def dominates(self) -> bool:
        """A is almost stochastically better than B at ``threshold``."""
        return bool(self.eps_min < self.threshold)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"eps_min": self.eps_min, "violation_ratio": self.violation_ratio,
                              "threshold": self.threshold, "dominates": self.dominates, "n_a": self.n_a,
                              "n_b": self.n_b, "confidence_level": self.confidence_level,
                              "bootstrap_iterations": self.num_bootstrap_iterations}])

    def __repr__(self) -> str:
        verdict = "A dominates B" if self.dominates else "no almost stochastic dominance of A"
        return (f"ASOResult(eps_min={self.eps_min:.4f}, violation ratio={self.violation_ratio:.4f}; {verdict} at "
                f"tau={self.threshold:g}; {self.n_a} vs {self.n_b} scores)")

    def _repr_html_(self) -> str:
        return self.to_frame().to_html(index=False, float_format=lambda v: f"{v:.4g}")


def aso(scores_a, scores_b, confidence_level: float = 0.95, num_comparisons: int = 1,
        num_bootstrap_iterations: int = 1000, dt: float = 0.005, seed: int | np.random.SeedSequence | None = None,
        threshold: float = DEEPSIG_THRESHOLD) -> ASOResult:
    """Almost Stochastic Order: is A (``scores_a``, higher = better) almost stochastically better than B?

    Returns eps_min, the upper ``confidence_level`` bound of the violation ratio (module docstring); the confidence
    level is raised by Bonferroni for ``num_comparisons`` comparisons, ``confidence + (1 - confidence) / k`` as in
    deepsig. The bootstrap draws both score sets with replacement, ``seed`` seeds a numpy Generator.
    """
    a, b = _scores(scores_a, "scores_a"), _scores(scores_b, "scores_b")
    if not 0 < confidence_level < 1:
        raise StochasticOrderError(f"confidence_level must be between 0 and 1, got {confidence_level!r}.")
    if int(num_comparisons) < 1 or int(num_bootstrap_iterations) < 1:
        raise StochasticOrderError("num_comparisons and num_bootstrap_iterations must be positive integers.")
    level = confidence_level + (1 - confidence_level) / num_comparisons if num_comparisons > 1 else confidence_level
    eps = float(violation_ratios(np.sort(a)[None, :], np.sort(b)[None, :], dt)[0])
    rng = np.random.default_rng(seed)
    k = int(num_bootstrap_iterations)
    boot_a = np.sort(a[rng.integers(0, a.size, (k, a.size))], axis=1)
    boot_b = np.sort(b[rng.integers(0, b.size, (k, b.size))], axis=1)
    samples = violation_ratios(boot_a, boot_b, dt)
    const = np.sqrt(a.size * b.size / (a.size + b.size))
    sigma = float(np.std(const * (samples - eps)))
    eps_min = float(np.clip(eps - sigma / const * stats.norm.ppf(1 - level), 0.0, 1.0))
    return ASOResult(eps_min, eps, sigma, level, a.size, b.size, k, threshold, bootstrap=samples)


def multi_aso(scores: dict, confidence_level: float = 0.95, use_bonferroni: bool = True,
              num_bootstrap_iterations: int = 1000, dt: float = 0.005, seed: int | None = None) -> pd.DataFrame:
    """eps_min of every ordered pair (row system better than column system?) of ``{name: scores}``; Bonferroni
    over the m (m - 1) / 2 pairs as deepsig does (each pair's two directions share one bootstrap). The diagonal
    is 1 (no system is better than itself)."""
    names = list(scores)
    if len(names) < 2:
        raise StochasticOrderError("multi_aso needs at least two systems.")
    k = len(names) * (len(names) - 1) / 2
    level = confidence_level + (1 - confidence_level) / k if use_bonferroni and k > 1 else confidence_level
    out = pd.DataFrame(np.eye(len(names)), index=names, columns=names)
    seeds = np.random.SeedSequence(seed).spawn(int(k)) if seed is not None else [None] * int(k)
    pair = 0
    for i, x in enumerate(names):
        for y in names[i + 1:]:
            r = aso(scores[x], scores[y], confidence_level=level, num_bootstrap_iterations=num_bootstrap_iterations,
                    dt=dt, seed=seeds[pair])
            const = np.sqrt(r.n_a * r.n_b / (r.n_a + r.n_b))
            z = stats.norm.ppf(1 - level)
            out.loc[x, y] = r.eps_min
            out.loc[y, x] = float(np.clip((1 - r.violation_ratio) - r.sigma / const * z, 0.0, 1.0))
            pair += 1
    return out


@dataclass
class ExpectedMax:
    """Expected maximum of n runs (:func:`expected_max`): one row per n."""

    table: pd.DataFrame
    level: float
    runs: int

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def __repr__(self) -> str:
        last = self.table.iloc[-1]
        return (f"ExpectedMax({self.runs} observed runs; E[max of {int(last['n'])}] = {last['expected_max']:.4g} "
                f"[{last['ci_low']:.4g}, {last['ci_high']:.4g}] at {self.level:.0%})")

    def _repr_html_(self) -> str:
        return self.table.to_html(index=False, float_format=lambda v: f"{v:.4g}")


def _expected_max_sorted(v: np.ndarray, n: np.ndarray) -> np.ndarray:
    """E[max of n draws with replacement] for each row of sorted samples v (k, N) and each n: sum_i v_(i)
    ((i / N)^n - ((i - 1) / N)^n) (Dodge et al. 2019, eq. 1 with the empirical CDF)."""
    big_n = v.shape[1]
    i = np.arange(1, big_n + 1)
    w = (i[None, :] / big_n) ** n[:, None] - ((i[None, :] - 1) / big_n) ** n[:, None]   # (len(n), N)
    return v @ w.T                                                                        # (k, len(n))


def expected_max(run_scores, n=None, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> ExpectedMax:
    """The expected best score of n runs, for n = 1 .. N (default: the N observed runs), with a percentile
    bootstrap interval (the runs resampled with replacement): what "best of n seeds" reports on average, and how
    uncertain that is with N runs."""
    v = np.sort(_scores(run_scores, "run_scores"))
    ns = np.arange(1, v.size + 1) if n is None else np.atleast_1d(np.asarray(n, dtype=int))
    if (ns < 1).any():
        raise StochasticOrderError("n must be >= 1.")
    if not 0 < level < 1:
        raise StochasticOrderError(f"level must be between 0 and 1, got {level!r}.")
    point = _expected_max_sorted(v[None, :], ns.astype(float))[0]
    rng = np.random.default_rng(seed)
    boot = np.sort(v[rng.integers(0, v.size, (int(n_boot), v.size))], axis=1)
    dist = _expected_max_sorted(boot, ns.astype(float))
    lo, hi = np.quantile(dist, [(1 - level) / 2, (1 + level) / 2], axis=0)
    table = pd.DataFrame({"n": ns, "expected_max": point, "ci_low": lo, "ci_high": hi})
    return ExpectedMax(table, float(level), int(v.size))
