"""Significance for metrics measured by an imperfect classifier (Goyal, Hu & Gupta 2023, "Faithful Model
Evaluation for Model-Based Metrics"; cited as MBM).

A binary metric model M labels each output (e.g. toxic / not toxic). With observed positive rate p_O, precision
P(R=1|O=1) and false omission rate P(R=1|O=0) of M, the real positive rate is (MBM eq. 10)

    p_R = p_O * precision + (1 - p_O) * FOR,

and the variance of the measured mean, with Bessel's correction (eq. 13), is p_R (1 - p_R) / (N - 1). For two
independent systems the variance of the difference is the sum (eq. 14); for paired outputs (the same prompts) the
covariance of appendix A.3 (eq. 18-20) is subtracted twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import VRSError


class MetricModelError(VRSError, ValueError):
    """Bad input for a model-based-metric computation."""


def _rate(x: float, name: str) -> float:
    x = float(x)
    if not 0.0 <= x <= 1.0 or not np.isfinite(x):
        raise MetricModelError(f"{name} must be a probability in [0, 1]; got {x!r}.")
    return x


def _n(n) -> int:
    if not float(n).is_integer() or n < 2:
        raise MetricModelError(f"N must be an integer >= 2; got {n!r}.")
    return int(n)


def real_positive_rate(p_observed: float, precision: float, false_omission_rate: float) -> float:
    """MBM eq. (10): p_R = p_O * precision + (1 - p_O) * FOR."""
    p = _rate(p_observed, "p_observed")
    return p * _rate(precision, "precision") + (1 - p) * _rate(false_omission_rate, "false_omission_rate")


def variance_deterministic(p_observed: float, n: int) -> float:
    """Variance of a mean of N binary scores with Bessel's correction (MBM eq. 5): p (1 - p) / (N - 1)."""
    p = _rate(p_observed, "p_observed")
    return p * (1 - p) / (_n(n) - 1)


def variance_model_based(p_observed: float, n: int, precision: float, false_omission_rate: float) -> float:
    """MBM eq. (13): p_R (1 - p_R) / (N - 1) with p_R from eq. (10)."""
    p_r = real_positive_rate(p_observed, precision, false_omission_rate)
    return p_r * (1 - p_r) / (_n(n) - 1)


def infer_n(p_observed: float, variance: float) -> float:
    """The sample size implied by a published deterministic variance: N = p (1 - p) / Var + 1 (inverting eq. 5)."""
    p = _rate(p_observed, "p_observed")
    if variance <= 0:
        raise MetricModelError("The variance must be positive.")
    return p * (1 - p) / variance + 1


def covariance_paired(joint_observed, precision_c: float, for_c: float, precision_t: float, for_t: float,
                      n: int) -> float:
    """Covariance of the two measured means for paired outputs (MBM appendix A.3, eq. 20).

    ``joint_observed``: 2 x 2 array of P(f_C^O = x, f_T^O = y), x, y in {0, 1} (rows: control, columns: treatment).
    """
    joint = np.asarray(joint_observed, dtype=float)
    if joint.shape != (2, 2) or (joint < 0).any() or not np.isclose(joint.sum(), 1.0):
        raise MetricModelError("joint_observed must be a 2 x 2 table of probabilities summing to 1.")
    pr_c = np.array([_rate(for_c, "for_c"), _rate(precision_c, "precision_c")])  # P(R=1 | O=x), x = 0, 1
    pr_t = np.array([_rate(for_t, "for_t"), _rate(precision_t, "precision_t")])
    both = float((pr_c[:, None] * pr_t[None, :] * joint).sum())
    p_c = float(joint.sum(axis=1) @ pr_c)
    p_t = float(joint.sum(axis=0) @ pr_t)
    return (both - p_c * p_t) / (_n(n) - 1)


def real_class_distribution(observed_rates, confusion) -> np.ndarray:
    """Multi-class extension (MBM appendix A.2): P(R = j) = sum_i P(O = i) P(R = j | O = i).

    ``confusion[i, j]`` = P(R = j | O = i), estimated on the metric model's test data (rows sum to 1).
    """
    p = np.asarray(observed_rates, dtype=float)
    c = np.asarray(confusion, dtype=float)
    if c.ndim != 2 or c.shape[0] != len(p) or not np.allclose(c.sum(axis=1), 1.0):
        raise MetricModelError("confusion must be a K x K' matrix of P(R=j | O=i) with rows summing to 1.")
    if (p < 0).any() or not np.isclose(p.sum(), 1.0):
        raise MetricModelError("observed_rates must be probabilities summing to 1.")
    return p @ c


@dataclass
class DifferenceCI:
    """Confidence interval of a difference of two measured rates (MBM eq. 8 / 14)."""

    difference: float
    var_control: float
    var_treatment: float
    covariance: float
    lower: float
    upper: float
    level: float

    @property
    def significant(self) -> bool:
        return not (self.lower <= 0.0 <= self.upper)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([self.__dict__ | {"significant": self.significant}])

    def __repr__(self) -> str:
        return (f"DifferenceCI(diff={self.difference:.5f}, {100 * self.level:g}% CI ({self.lower:.5f}, "
                f"{self.upper:.5f}), {'significant' if self.significant else 'not significant'})")


def difference_ci(mean_control: float, mean_treatment: float, var_control: float, var_treatment: float,
                  covariance: float = 0.0, level: float = 0.95) -> DifferenceCI:
    """CI of mean_treatment - mean_control with Var(d) = Var_C + Var_T - 2 Cov (independent systems: Cov = 0)."""
    var = var_control + var_treatment - 2 * covariance
    if var < 0:
        raise MetricModelError("The variance of the difference is negative: check the covariance.")
    z = stats.norm.ppf(0.5 + level / 2)
    d = mean_treatment - mean_control
    half = z * np.sqrt(var)
    return DifferenceCI(d, var_control, var_treatment, covariance, d - half, d + half, level)


def simulate_true_labels(observed, precision: float, false_omission_rate: float, n_draws: int, seed: int = 0):
    """Draw plausible true labels given observed binary labels: R ~ Bernoulli(precision) where O = 1 and
    Bernoulli(FOR) where O = 0. Returns an n_draws x N array (for resampling tests under metric-model error)."""
    o = np.asarray(observed)
    if not np.isin(o, (0, 1)).all():
        raise MetricModelError("observed labels must be 0 or 1.")
    rng = np.random.default_rng(seed)
    p = np.where(o == 1, _rate(precision, "precision"), _rate(false_omission_rate, "false_omission_rate"))
    return (rng.random((n_draws, len(o))) < p).astype(np.int8)


def resampled_true_rates(observed, precision: float, false_omission_rate: float, n_draws: int,
                         rng: np.random.Generator | int = 0) -> np.ndarray:
    """The variance of eq. (13) by resampling (MBM section 3): bootstrap the N outputs, then draw each resampled
    output's true label given its observed one (R ~ Bernoulli(precision) where O = 1, Bernoulli(FOR) where O = 0).
    Returns ``n_draws`` true positive rates. Their mean is p_R (eq. 10) and their variance p_R (1 - p_R) / N, eq.
    (13) without Bessel's correction; resampling the observed labels alone gives the deterministic p_O (1 - p_O) / N.

    Only the number of observed positives of a resample matters, so it is drawn as Binomial(N, p_O) and the true
    positives as Binomial(k, precision) + Binomial(N - k, FOR)."""
    o = np.asarray(observed)
    if o.ndim != 1 or len(o) < 2 or not np.isin(o, (0, 1)).all():
        raise MetricModelError("observed must be a sequence of at least two 0/1 labels.")
    if int(n_draws) < 1:
        raise MetricModelError(f"n_draws must be a positive integer; got {n_draws!r}.")
    rng = np.random.default_rng(rng)
    n = len(o)
    k = rng.binomial(n, float(o.mean()), size=int(n_draws))
    true = (rng.binomial(k, _rate(precision, "precision"))
            + rng.binomial(n - k, _rate(false_omission_rate, "false_omission_rate")))
    return true / n


def max_false_omission_rate(mean_control: float, mean_treatment: float, n: int, precision: float = 1.0,
                            level: float = 0.95) -> float:
    """How good must the metric model be? The false omission rate at which the model-based interval of the
    difference (eq. 13/14, N outputs per system, independent systems) first reaches 0: below it the difference is
    significant at ``level``. ``math.inf`` when no FOR in [0, 1] makes it insignificant.

    Raises :class:`MetricModelError` when the difference is not significant even for a perfect model (FOR 0)."""
    from scipy.optimize import brentq

    n = _n(n)
    z = stats.norm.ppf(0.5 + level / 2)
    d = abs(float(mean_treatment) - float(mean_control))

    def margin(fo: float) -> float:   # |d| minus the half-width of the interval: > 0 while significant
        var = sum(variance_model_based(p, n, precision, fo) for p in (mean_control, mean_treatment))
        return d - z * np.sqrt(var)

    if margin(0.0) <= 0:
        raise MetricModelError(f"the difference {d:g} is not significant at level {level:g} even for a metric model "
                               f"without false omissions (precision {precision:g}).")
    grid = np.linspace(0.0, 1.0, 1001)
    values = np.array([margin(f) for f in grid])
    crossed = np.flatnonzero(values <= 0)
    if not len(crossed):
        return float("inf")
    i = int(crossed[0])
    return float(brentq(margin, grid[i - 1], grid[i], xtol=1e-14))


def rounding_range(function, values, half_units) -> tuple[float, float]:
    """The smallest and largest value of ``function(*inputs)`` when each input may lie anywhere within the rounding
    of its printed value (``values[i] +- half_units[i]``): the minimum and maximum over the corners of that box,
    which are the extremes for a function monotone in each input (every number of MBM Table 1 is: a difference of
    means, p(1 - p) / (N - 1) for p < 1/2, eq. 13 for p_R < 1/2, the bounds of eq. 8 / 14)."""
    import itertools

    values = [float(v) for v in values]
    half_units = [float(h) for h in half_units]
    if len(values) != len(half_units) or any(h < 0 for h in half_units):
        raise MetricModelError("rounding_range needs one non-negative half unit per input.")
    out = [float(function(*(v + s * h for v, s, h in zip(values, signs, half_units, strict=True))))
           for signs in itertools.product((-1.0, 1.0), repeat=len(values))]
    return min(out), max(out)


def table1_ranges(mean_control: float, mean_treatment: float, n: int, precision: float, false_omission_rate: float,
                  var_d_control: float, var_d_treatment: float, half_units: dict, level: float = 0.95) -> dict:
    """The range each number of MBM Table 1 can take when its printed inputs are rounded: {name: (low, high)} for
    "ATE", "Var^D control" / "treatment" (eq. 5), "Var^M control" / "treatment" (eq. 13), "CI^D lower" / "upper"
    (eq. 8 with the printed Var^D, as the paper computes it) and "CI^M lower" / "upper" (eq. 14). ``half_units``: half
    a unit of the last printed digit of each input, keys ``mean`` (both means), ``precision``,
    ``false_omission_rate``, ``var_d_control``, ``var_d_treatment``. N is not rounded."""
    n = _n(n)
    h_mean, h_p, h_f = half_units["mean"], half_units["precision"], half_units["false_omission_rate"]
    means, h_means = (mean_control, mean_treatment), (h_mean, h_mean)
    out = {"ATE": rounding_range(lambda c, t: t - c, means, h_means)}
    for role, p in zip(("control", "treatment"), means, strict=True):
        out[f"Var^D {role}"] = rounding_range(lambda q: variance_deterministic(q, n), (p,), (h_mean,))
        out[f"Var^M {role}"] = rounding_range(lambda q, a, b: variance_model_based(q, n, a, b),
                                              (p, precision, false_omission_rate), (h_mean, h_p, h_f))
    det = (*means, var_d_control, var_d_treatment), (*h_means, half_units["var_d_control"],
                                                     half_units["var_d_treatment"])
    mod = (*means, precision, false_omission_rate), (*h_means, h_p, h_f)
    for side in ("lower", "upper"):
        out[f"CI^D {side}"] = rounding_range(
            lambda c, t, vc, vt, side=side: getattr(difference_ci(c, t, vc, vt, level=level), side), *det)
        out[f"CI^M {side}"] = rounding_range(
            lambda c, t, a, b, side=side: getattr(difference_ci(c, t, variance_model_based(c, n, a, b),
                                                     variance_model_based(t, n, a, b), level=level), side), *mod)
    return out
