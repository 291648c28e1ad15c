"""When the metric is itself a model: an LLM judge's or a classifier's scores corrected with a few human labels
(issue 43).

Every item of every system is scored by the judge (``yhat``); humans labelled a random subset of the items (``y``).
The estimators here, all pure functions of arrays, compute along the LAST axis, so that a stack of simulated data
sets (``shape (reps, n)``) is estimated in one call (``benchmarks/judge_type_one_error.py``):

- :func:`ppi_mean` - prediction-powered inference for a mean (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023,
  *Science* 382, eq. for the mean: theta = mean(yhat_unlabelled) + mean(y - yhat), the "rectifier") and PPI++'s
  power-tuned version (Angelopoulos, Duchi & Zrnic 2023, arXiv:2311.01453, Example 6.1 / eq. 6: lambda =
  Cov(y, yhat) / ((1 + n/N) Var(yhat)), clipped to [0, 1]; lambda = 1 is PPI, lambda = 0 the human labels alone).
  Its estimate, standard error, z interval and p-value equal ``ppi_py``'s ``ppi_mean_pointestimate`` /
  ``ppi_mean_ci`` / ``ppi_mean_pval`` (the reference implementation; tests/evaluate/test_judge.py). The paired
  difference of two systems on the same items is the PPI mean of the per-item differences;
- :func:`mbm_mean` / :func:`mbm_difference` - MBM's correction of a binary metric (Goyal, Hu & Gupta 2023, eq. 10:
  p_R = p_O precision + (1 - p_O) FOR; eq. 13 its variance; appendix A.3 eq. 20 the paired covariance) with the
  precision and the false omission rate ESTIMATED on the labelled subset and that estimation uncertainty added by the
  delta method (MBM treats them as known): p_R's error is, to first order, the labelled mean of e = y - g(yhat),
  g(1) = precision, g(0) = FOR, so its variance is sum(e^2) / n^2 = p_O^2 prec (1 - prec) / n_1 + (1 - p_O)^2 FOR (1 -
  FOR) / n_0 (p_O, n_1, n_0 of the labelled subset), and the covariance of two systems' errors sum(e_a e_b) / (n_a
  n_b) over the items labelled for both;
- :func:`classical_mean` - the naive judge-only reading (the judge taken as the truth) and the human-only reading
  (the labelled subset alone): the same z interval on one sample;
- :func:`judge_error_by_system` - does the judge's error (yhat - y on the labelled items) differ by system? The
  one-way ANOVA F test of the system x judge-error interaction (a judge that favours one system is the case no
  correction of the pooled judge can fix);
- :func:`ppi_labels_needed` - the closed form of PPI++'s variance for planning: with human-label SD sigma, judge-human
  correlation rho, n labels and N unlabelled items, Var = sigma^2 / n * (1 - rho^2 N / (N + n)) (the variance at
  the optimal lambda of PPI++ eq. 6).

Variances are those of the references: PPI's uses numpy's ``std`` (divisor n, as ``ppi_py``); MBM's eq. 13 divides
by N - 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..errors import VRSError


class JudgeError(VRSError, ValueError):
    """Bad input for a judge correction (``vrs`` exits 2)."""


@dataclass(frozen=True)
class Estimate:
    """A mean (or a difference of means) with its standard error, z interval at ``level`` and two-sided p-value
    against ``null``. Fields are floats, or arrays of the leading shape of a batch of data sets."""

    method: str
    estimate: object
    se: object
    lower: object
    upper: object
    p_value: object
    level: float
    n_labelled: object = None
    n_unlabelled: object = None
    lam: object = None
    df: object = None          # Student's t df of the small-sample reading (None: the z interval)

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("method", "estimate", "se", "lower", "upper", "p_value", "level",
                                              "n_labelled", "n_unlabelled", "lam", "df")}
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in out.items() if v is not None}


def _z(level: float) -> float:
    if not 0.0 < float(level) < 1.0:
        raise JudgeError(f"level must lie strictly between 0 and 1; got {level!r}.")
    return float(stats.norm.ppf(0.5 + float(level) / 2))


def _estimate(method, est, se, level, null, df=None, **extra) -> Estimate:
    """z interval and two-sided p-value (``ppi_py``'s ``_zconfint_generic`` / ``rectified_p_value``: the SE floored
    at 1e-16 for the p-value); with ``df`` (the small-sample reading) Student's t on those df instead."""
    est, se = np.asarray(est, dtype=float), np.asarray(se, dtype=float)
    if df is None:
        z = _z(level)
        p = 2 * stats.norm.sf(np.abs(est - null) / np.maximum(se, 1e-16))
    else:
        _z(level)   # the level's check
        z = stats.t.ppf(0.5 + float(level) / 2, df)
        p = 2 * stats.t.sf(np.abs(est - null) / np.maximum(se, 1e-16), df)
    scalar = lambda a: float(a) if np.ndim(a) == 0 else a  # noqa: E731
    return Estimate(method, scalar(est), scalar(se), scalar(est - z * se), scalar(est + z * se), scalar(p),
                    float(level), **{k: scalar(v) if v is not None and not isinstance(v, int) else v
                                     for k, v in extra.items()}, df=None if df is None else scalar(np.asarray(df)))


def welch_df(var_a, n_a, var_b, n_b):
    """Welch-Satterthwaite df of a sum of two independent means' variances var_a / n_a + var_b / n_b (Welch 1947),
    the sample variances with divisor n - 1: (v_a + v_b)^2 / (v_a^2 / (n_a - 1) + v_b^2 / (n_b - 1)), v = var / n.
    Where both are 0 the df are those of the larger sample."""
    va, vb = np.asarray(var_a, dtype=float) / n_a, np.asarray(var_b, dtype=float) / n_b
    den = va ** 2 / max(n_a - 1, 1) + vb ** 2 / max(n_b - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, (va + vb) ** 2 / np.where(den > 0, den, 1.0), float(max(n_a, n_b) - 1))


def _arrays(y, yhat, yhat_unlabelled):
    y, yhat, yu = (np.asarray(a, dtype=float) for a in (y, yhat, yhat_unlabelled))
    if y.shape != yhat.shape:
        raise JudgeError(f"the human labels and the judge's scores of the labelled items differ in shape: {y.shape} "
                         f"and {yhat.shape}.")
    if y.shape[-1] < 2:
        raise JudgeError(f"PPI needs at least 2 labelled items; got {y.shape[-1]}. Label more items.")
    if yu.shape[-1] < 1:
        raise JudgeError("PPI needs at least one item the humans did not label.")
    if not (np.isfinite(y).all() and np.isfinite(yhat).all() and np.isfinite(yu).all()):
        raise JudgeError("labels and judge scores must be finite numbers.")
    return y, yhat, yu


def power_tuned_lambda(y, yhat, yhat_unlabelled, clip: bool = True):
    """PPI++'s lambda for a mean (Angelopoulos, Duchi & Zrnic 2023, eq. 6 with the identity Hessian):
    Cov(y, yhat) / ((1 + n/N) Var(yhat over labelled and unlabelled items)), the covariance with divisor n, the
    variance with divisor n + N - 1 (as ``ppi_py``'s ``_calc_lam_glm``), clipped to [0, 1] (``ppi_py`` clips for the
    estimate and the interval, not for its p-value)."""
    y, yhat, yu = _arrays(y, yhat, yhat_unlabelled)
    n, big_n = y.shape[-1], yu.shape[-1]
    cov = ((y - y.mean(-1, keepdims=True)) * (yhat - yhat.mean(-1, keepdims=True))).mean(-1)
    var = np.concatenate([yhat, yu], axis=-1).var(-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(var > 0, cov / ((1 + n / big_n) * np.where(var > 0, var, 1.0)), 0.0)
    lam = np.clip(lam, 0.0, 1.0) if clip else lam
    return float(lam) if np.ndim(lam) == 0 else lam


def ppi_mean(y, yhat, yhat_unlabelled, lam=None, level: float = 0.95, null: float = 0.0,
             small_sample: bool = False) -> Estimate:
    """The prediction-powered mean (PPI, Angelopoulos et al. 2023; PPI++ with ``lam=None``): lam mean(yhat_u) +
    mean(y - lam yhat), SE sqrt(Var(lam yhat_u) / N + Var(y - lam yhat) / n) (divisor n: numpy's ``std``, as
    ``ppi_py``), the z interval at ``level`` and the two-sided p-value against ``null``. ``y``, ``yhat``: human
    labels and judge scores of the n labelled items; ``yhat_unlabelled``: the judge's scores of the N other items.
    ``lam``: None (PPI++: :func:`power_tuned_lambda`), 1 (PPI) or any number (0: the human labels alone).

    ``small_sample``: the variances with divisor n - 1 and Student's t on Welch-Satterthwaite df
    (:func:`welch_df`) instead of the z interval: with lambda 0 it is the one-sample t test of the labels, with
    lambda 1 Welch's test of mean(yhat_u) against mean(yhat - y); it keeps the level with 40 labels where the z
    interval rejects 6-7 % (benchmarks/judge_type_one_error.py). ``vrs analyze --human`` uses it; the default is
    ``ppi_py``'s z interval."""
    y, yhat, yu = _arrays(y, yhat, yhat_unlabelled)
    n, big_n = y.shape[-1], yu.shape[-1]
    if lam is None:
        lam = power_tuned_lambda(y, yhat, yu)
        method = "PPI++"
    else:
        method = "PPI" if np.all(np.asarray(lam) == 1) else "PPI (fixed lambda)"
    lam_b = np.asarray(lam, dtype=float)[..., None]
    rect = y - lam_b * yhat
    est = (lam_b * yu).mean(-1) + rect.mean(-1)
    ddof = 1 if small_sample else 0
    v_u, v_r = (lam_b * yu).var(-1, ddof=ddof if big_n > 1 else 0), rect.var(-1, ddof=ddof)
    se = np.sqrt(v_u / big_n + v_r / n)
    df = welch_df(v_u, big_n, v_r, n) if small_sample else None
    return _estimate(method, est, se, level, null, df=df, n_labelled=n, n_unlabelled=big_n, lam=lam)


def ppi_difference(y_a, y_b, yhat_a, yhat_b, yhat_a_unlabelled, yhat_b_unlabelled, lam=None,
                   level: float = 0.95, small_sample: bool = False) -> Estimate:
    """System b minus system a on the same items: :func:`ppi_mean` of the per-item differences (labels y_b - y_a on
    the items labelled for both, judge scores yhat_b - yhat_a; the other items' judge differences unlabelled), the
    p-value against no difference."""
    a = [np.asarray(v, dtype=float) for v in (y_a, yhat_a, yhat_a_unlabelled)]
    b = [np.asarray(v, dtype=float) for v in (y_b, yhat_b, yhat_b_unlabelled)]
    if any(x.shape != z.shape for x, z in zip(a, b, strict=True)):
        raise JudgeError("the paired difference needs both systems' judge scores on the same items and both "
                         "systems' human labels on the same labelled items.")
    out = ppi_mean(b[0] - a[0], b[1] - a[1], b[2] - a[2], lam=lam, level=level, small_sample=small_sample)
    return Estimate(out.method + " paired difference", out.estimate, out.se, out.lower, out.upper, out.p_value,
                    out.level, out.n_labelled, out.n_unlabelled, out.lam, out.df)


def classical_mean(x, level: float = 0.95, null: float = 0.0, method: str = "classical",
                   small_sample: bool = False) -> Estimate:
    """The mean of one sample with the z interval, SE = std / sqrt(n) (divisor n, as ``ppi_py``'s
    ``classical_mean_ci``): the judge-only reading (``x`` the judge's scores of every item, the judge taken as the
    truth) or the human-only one (``x`` the labels). ``small_sample``: the one-sample t test (divisor n - 1, n - 1
    df)."""
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    if n < 2:
        raise JudgeError(f"a mean with an interval needs at least 2 values; got {n}.")
    return _estimate(method, x.mean(-1), x.std(-1, ddof=int(small_sample)) / np.sqrt(n), level, null,
                     df=n - 1 if small_sample else None, n_labelled=n)


# ------------------------------------------------------------------------------------------------ MBM

@dataclass(frozen=True)
class MBMParts:
    """MBM's ingredients for one system: observed positive rate p_O (all N items), precision and FOR (labelled
    items), p_R (eq. 10), Var^M (eq. 13, precision and FOR known), the estimation variance (delta method) and the
    labelled residuals e = y - g(yhat) (for the paired covariance)."""

    p_observed: object
    precision: object
    false_omission_rate: object
    p_real: object
    var_model: object
    var_estimation: object
    n: int
    residuals: np.ndarray


def _binary(x, what: str) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if not np.isin(x, (0.0, 1.0)).all():
        raise JudgeError(f"MBM's correction is for a binary metric: the {what} must be 0 or 1.")
    return x


def mbm_parts(judge_all, y, yhat) -> MBMParts:
    """MBM eq. 10 and 13 for one system, precision = mean(y | yhat = 1) and FOR = mean(y | yhat = 0) on the labelled
    items (NaN when the judge gave no positive, or no negative, label there), p_O over all N judged items, and the
    delta-method variance of p_R due to estimating precision and FOR (module docstring)."""
    o, y, yhat = _binary(judge_all, "judge's scores"), _binary(y, "human labels"), _binary(yhat, "judge's scores")
    if y.shape != yhat.shape or y.shape[-1] < 2:
        raise JudgeError("MBM needs the labels and judge scores of at least 2 labelled items, of the same shape.")
    big_n, n = o.shape[-1], y.shape[-1]
    n1 = yhat.sum(-1)
    n0 = n - n1
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = (y * yhat).sum(-1) / n1
        fo_rate = (y * (1 - yhat)).sum(-1) / n0
    p_o = o.mean(-1)
    p_r = p_o * precision + (1 - p_o) * fo_rate                                    # eq. 10
    var_model = p_r * (1 - p_r) / (big_n - 1)                                      # eq. 13
    g = np.where(yhat == 1, precision[..., None] if np.ndim(precision) else precision,
                 fo_rate[..., None] if np.ndim(fo_rate) else fo_rate)
    resid = y - g
    var_est = (resid ** 2).sum(-1) / n ** 2                                        # delta method
    return MBMParts(p_o, precision, fo_rate, p_r, var_model, var_est, n, resid)


def mbm_mean(judge_all, y, yhat, level: float = 0.95, estimated: bool = True, small_sample: bool = False) -> Estimate:
    """MBM's corrected rate of one system (eq. 10) with the variance of eq. 13 plus, when ``estimated``, the
    delta-method variance of estimating precision and FOR on the labelled items (:func:`mbm_parts`); the p-value is
    against 0 (of no use for a rate; the difference is tested by :func:`mbm_difference`)."""
    m = mbm_parts(judge_all, y, yhat)
    var = m.var_model + (m.var_estimation if estimated else 0.0)
    return _estimate("MBM, precision and FOR estimated" if estimated else "MBM (eq. 13)", m.p_real, np.sqrt(var),
                     level, 0.0, df=m.n - 1 if small_sample else None, n_labelled=m.n,
                     n_unlabelled=np.shape(judge_all)[-1])


def mbm_difference(judge_a, judge_b, y_a, y_b, yhat_a, yhat_b, level: float = 0.95,
                   estimated: bool = True, small_sample: bool = False) -> Estimate:
    """System b minus system a, both judged on the same N items and labelled on the same n items: p_R,b - p_R,a with
    Var = Var_a + Var_b - 2 Cov, Var per eq. 13, Cov per eq. 20 (the observed joint distribution of the two systems'
    judge labels over the N items; :func:`vrs_helpers.book.model_based_metrics.covariance_paired` written out along
    the last axis), and with ``estimated`` the delta-method terms of estimating each system's precision and FOR:
    sum(e_a^2)/n^2 + sum(e_b^2)/n^2 - 2 sum(e_a e_b)/n^2. ``small_sample``: Student's t on n - 1 df (n labelled
    items) instead of z."""
    oa, ob = _binary(judge_a, "judge's scores"), _binary(judge_b, "judge's scores")
    if oa.shape != ob.shape or np.shape(y_a) != np.shape(y_b):
        raise JudgeError("the paired difference needs both systems judged on the same items and labelled on the same "
                         "items.")
    a, b = mbm_parts(oa, y_a, yhat_a), mbm_parts(ob, y_b, yhat_b)
    big_n = oa.shape[-1]
    # eq. 20: (sum_xy P(R_a=1|x) P(R_b=1|y) P(x, y) - p_R,a p_R,b) / (N - 1), P(x, y) the joint of the judge labels
    pa = lambda x: np.where(x == 1, _col(a.precision), _col(a.false_omission_rate))  # noqa: E731
    pb = lambda x: np.where(x == 1, _col(b.precision), _col(b.false_omission_rate))  # noqa: E731
    both = (pa(oa) * pb(ob)).mean(-1)
    cov_model = (both - a.p_real * b.p_real) / (big_n - 1)
    var = a.var_model + b.var_model - 2 * cov_model
    if estimated:
        n = a.n
        var = var + ((a.residuals - b.residuals) ** 2).sum(-1) / n ** 2
    name = "MBM paired difference, precision and FOR estimated" if estimated else "MBM paired difference (eq. 20)"
    return _estimate(name, b.p_real - a.p_real, np.sqrt(np.maximum(var, 0.0)), level, 0.0,
                     df=a.n - 1 if small_sample else None, n_labelled=a.n, n_unlabelled=big_n)


def _col(v):
    return v[..., None] if np.ndim(v) else v


# ------------------------------------------------------------------------------------------------ agreement

@dataclass(frozen=True)
class ErrorBySystem:
    """The one-way ANOVA of the judge's error (judge minus human on the labelled items) by system: F, its df, the
    p-value, and per system the mean error (the judge's bias) and the number of labelled items."""

    statistic: float
    df: tuple
    p_value: float
    bias: dict
    n: dict

    def as_dict(self) -> dict:
        return {"test": "one-way ANOVA F of judge - human by system", "statistic": self.statistic,
                "df": list(self.df), "p_value": self.p_value, "bias": dict(self.bias), "n": dict(self.n)}


def judge_error_by_system(errors: dict) -> ErrorBySystem:
    """The system x judge-error interaction: does the mean of judge - human differ between systems? ``errors``:
    {system: array of judge - human on its labelled items}. F = (SS_between / (k - 1)) / (SS_within / (n - k))
    (one-way ANOVA; for 0/1 scores the errors are -1, 0, 1). A judge whose bias differs by system moves the naive
    system difference; the corrections remove a bias they estimate per system, at the cost of the labels' variance.
    F is NaN (p NaN) when every error equals its system's mean."""
    groups = {str(k): np.asarray(v, dtype=float) for k, v in errors.items()}
    if len(groups) < 2 or any(len(v) < 1 for v in groups.values()):
        raise JudgeError("the judge's error by system needs two or more systems, each with labelled items.")
    allv = np.concatenate(list(groups.values()))
    k, n = len(groups), len(allv)
    if n - k < 1:
        raise JudgeError("the judge's error by system needs more labelled items than systems.")
    ss_b = sum(len(v) * (v.mean() - allv.mean()) ** 2 for v in groups.values())
    ss_w = sum(((v - v.mean()) ** 2).sum() for v in groups.values())
    with np.errstate(divide="ignore", invalid="ignore"):
        f = (ss_b / (k - 1)) / (ss_w / (n - k)) if ss_w > 0 else (np.inf if ss_b > 0 else np.nan)
    p = float(stats.f.sf(f, k - 1, n - k)) if np.isfinite(f) else (0.0 if f == np.inf else float("nan"))
    return ErrorBySystem(float(f), (k - 1, n - k), p, {s: float(v.mean()) for s, v in groups.items()},
                         {s: len(v) for s, v in groups.items()})


# ------------------------------------------------------------------------------------------------ planning

def ppi_variance(sd_human: float, correlation: float, n_labelled, n_unlabelled) -> np.ndarray:
    """The large-sample variance of PPI++'s mean at its optimal lambda: sd^2 / n (1 - rho^2 N / (N + n)), ``sd``
    the SD of the human labels (of the per-item differences, for a paired difference), ``rho`` the judge-human
    correlation, n labelled and N unlabelled items. rho = 0 gives the human-only sd^2 / n; N -> infinity gives
    sd^2 (1 - rho^2) / n."""
    sd, rho = float(sd_human), float(correlation)
    if not (sd > 0 and np.isfinite(sd)):
        raise JudgeError(f"the SD of the human labels must be a positive number; got {sd_human!r}.")
    if not -1.0 <= rho <= 1.0:
        raise JudgeError(f"the judge-human correlation must lie in [-1, 1]; got {correlation!r}.")
    n, big_n = np.asarray(n_labelled, dtype=float), np.asarray(n_unlabelled, dtype=float)
    return sd ** 2 / n * (1 - rho ** 2 * big_n / (big_n + n))


def ppi_variance_fixed(sd_human: float, correlation: float, sd_judge: float, n_labelled, n_unlabelled,
                       lam: float = 1.0) -> np.ndarray:
    """The variance of PPI's mean with a fixed lambda (1: PPI, Angelopoulos et al. 2023): lam^2 sd_f^2 / N +
    (sd^2 - 2 lam rho sd sd_f + lam^2 sd_f^2) / n, ``sd_judge`` the SD of the judge's scores (of its per-item
    differences). It is at least :func:`ppi_variance` (PPI++ tunes lambda to minimize it)."""
    sf = float(sd_judge)
    if not (sf >= 0 and np.isfinite(sf)):
        raise JudgeError(f"the SD of the judge's scores must be a non-negative number; got {sd_judge!r}.")
    ppi_variance(sd_human, correlation, 1, 1)   # the checks of sd and rho
    sd, rho, lam = float(sd_human), float(correlation), float(lam)
    n, big_n = np.asarray(n_labelled, dtype=float), np.asarray(n_unlabelled, dtype=float)
    return lam ** 2 * sf ** 2 / big_n + (sd ** 2 - 2 * lam * rho * sd * sf + lam ** 2 * sf ** 2) / n


def ppi_labels_needed(n_items: int, sd_human: float, correlation: float, half_width: float | None = None,
                      delta: float | None = None, level: float = 0.95, power: float = 0.8,
                      sd_judge: float | None = None) -> dict:
    """How many of ``n_items`` items humans must label (the rest judged only) for PPI++ to reach a CI half-width
    ``half_width`` (z sqrt(Var) <= half_width) or, with ``delta``, a two-sided test at 1 - ``level`` with
    ``power`` against a difference ``delta`` (|delta| / sqrt(Var) >= z_(1 - alpha/2) + z_power), Var from
    :func:`ppi_variance` with n labelled and N = n_items - n unlabelled (with ``sd_judge``: PPI's fixed lambda 1,
    :func:`ppi_variance_fixed`). Returns {"labels": n or None when even labelling every item is not enough,
    "human_only": the labels needed without the judge (rho = 0, no upper bound), "variance_at_labels": Var at that
    n}."""
    big = int(n_items)
    if big < 3:
        raise JudgeError(f"the number of items must be at least 3; got {n_items!r}.")
    z = _z(level)
    if (half_width is None) == (delta is None):
        raise JudgeError("give a target CI half-width or a difference delta to detect (one of them).")
    if half_width is not None:
        if not half_width > 0:
            raise JudgeError(f"the CI half-width must be positive; got {half_width!r}.")
        target = (float(half_width) / z) ** 2
    else:
        if not 0.0 < float(power) < 1.0 or not float(delta) != 0:
            raise JudgeError("power must lie in (0, 1) and delta must be non-zero.")
        target = (abs(float(delta)) / (z + stats.norm.ppf(float(power)))) ** 2
    n = np.arange(2, big)
    var = (ppi_variance(sd_human, correlation, n, big - n) if sd_judge is None else
           ppi_variance_fixed(sd_human, correlation, sd_judge, n, big - n))
    ok = np.flatnonzero(var <= target)
    labels = int(n[ok[0]]) if len(ok) else None
    human_only = int(np.ceil(float(sd_human) ** 2 / target))
    return {"labels": labels, "human_only": human_only,
            "variance_at_labels": None if labels is None else float(var[ok[0]]), "target_variance": target}


def judge_plan_text(items, sd_human, correlation, delta, alpha: float = 0.05, power: float = 0.8,
                    half_width: float | None = None, sd_judge=None) -> str:
    """``vrs plan --human-sd``: per number of items, the human labels PPI++ needs (:func:`ppi_labels_needed`) for
    ``power`` against ``delta`` at ``alpha`` (and for a CI half-width, when given), beside the labels without the
    judge. ``sd_human``: SD of the per-item human difference of the two systems (of a label, for one system's
    mean); ``correlation``: of the judge's per-item difference with the humans' (their agreement); ``sd_judge``
    (optional): SD of the judge's per-item difference, for the labels of PPI with lambda 1 (the verdict's reading)
    beside PPI++'s."""
    def number(name, v):
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise JudgeError(f"--{name} must be a number, got {v!r}.") from None
        if not np.isfinite(x):
            raise JudgeError(f"--{name} must be a finite number, got {v!r}.")
        return x

    sd, rho, d = number("human-sd", sd_human), number("judge-corr", correlation), number("delta", delta)
    a, pw = number("alpha", alpha), number("target", power)
    hw = None if half_width is None else number("half-width", half_width)
    sf = None if sd_judge is None else number("judge-sd", sd_judge)
    if not 0 < a < 1:
        raise JudgeError(f"--alpha must lie in (0, 1), got {alpha!r}.")
    lines = [f"Human labels for PPI++ (Angelopoulos, Duchi & Zrnic 2023), Var = sd^2/n (1 - rho^2 N/(N + n)): "
             f"sd {sd:g}, judge-human correlation {rho:g}, delta {d:g}, alpha {a:g}, power {pw:g}"
             + (f"; CI half-width {hw:g}" if hw is not None else "") + ".",
             f"{'items':>8} {'labels (power)':>15} {'human only':>11}" + (f" {'labels (CI)':>12}" if hw else "")
             + (f" {'PPI (power)':>15}" if sf is not None else "")]
    for m in items:
        try:
            big = int(float(m))
        except (TypeError, ValueError, OverflowError):
            raise JudgeError(f"--items must be whole numbers, got {m!r}.") from None
        p = ppi_labels_needed(big, sd, rho, delta=d, level=1 - a, power=pw)
        row = f"{big:>8} {p['labels'] if p['labels'] else 'all: not enough':>15} {p['human_only']:>11}"
        if hw is not None:
            c = ppi_labels_needed(big, sd, rho, half_width=hw, level=1 - a)
            row += f" {c['labels'] if c['labels'] else 'not enough':>12}"
        if sf is not None:
            f = ppi_labels_needed(big, sd, rho, delta=d, level=1 - a, power=pw, sd_judge=sf)
            row += f" {f['labels'] if f['labels'] else 'all: not enough':>15}"
        lines.append(row)
    return "\n".join(lines)
