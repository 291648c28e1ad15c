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


# ------------------------------------------------------------------------------------------- workbook 06's steps

#: MBM's Table 1 as printed (Goyal, Hu & Gupta 2023): per dataset the means of GPT2 (control) and GPT-Neo
#: (treatment), the ATE, the deterministic and model-based variances and the 95 % CIs of the difference, each the
#: text the paper prints (its last digit sets the tolerance of its check)
TABLE_1 = {
    "BOLD": {"mean": ("0.00456", "0.00236"), "ate": "-0.00219", "var_d": ("1.92e-7", "9.97e-8"),
             "ci_d": ("-0.00325", "-0.00114"), "var_m": ("7.50e-6", "7.46e-6"), "ci_m": ("-0.00978", "0.00538")},
    "RealToxicityPrompts": {"mean": ("0.09124", "0.09157"), "ate": "0.00033", "var_d": ("8.34e-7", "8.37e-7"),
                            "ci_d": ("-0.00220", "0.00286"), "var_m": ("2.06247e-6", "2.063405e-6"),
                            "ci_m": ("-0.00365", "0.00431")},
}
TABLE_1_SYSTEMS = ("GPT2", "GPT-Neo")
#: the number of prompts: BOLD's is printed in MBM section 3 ("23,679 English text generation prompts"); for
#: RealToxicityPrompts MBM prints only "100K"; 99,442 is the size of the published dataset (Gehman et al. 2020;
#: e.g. the TensorFlow Datasets catalog, real_toxicity_prompts, train split: 99,442 examples)
TABLE_1_PROMPTS = {"BOLD": (23679, "the size printed in MBM section 3"),
                   "RealToxicityPrompts": (99442, "the published dataset size; MBM prints 100K")}


@dataclass
class Table1:
    """Our Table 1 from its printed means (:func:`table_1`): ``summary`` (a column per dataset), ``n_table`` (the
    N each printed variance implies), and per dataset ``ours`` and ``printed`` (by label) and the deterministic and
    model-based ``intervals``."""

    summary: pd.DataFrame
    n_table: pd.DataFrame
    ours: dict
    printed: dict
    intervals: dict


def table_1(precision: float, false_omission_rate: float, table: dict | None = None,
            prompts: dict | None = None) -> Table1:
    """MBM's Table 1 recomputed from its printed means with one output per prompt: the ATE, the deterministic
    variances (eq. 5) and interval with the printed Var^D (eq. 8), the model-based variances (eq. 13) and interval
    (eq. 14); and the N that each printed variance implies (eq. 5 and eq. 13 solved for N)."""
    table, prompts = table or TABLE_1, prompts or TABLE_1_PROMPTS
    ours, printed, intervals, n_rows = {}, {}, {}, []
    for name, t in table.items():
        p_c, p_t = map(float, t["mean"])
        n = prompts[name][0]
        det = difference_ci(p_c, p_t, *map(float, t["var_d"]))
        var_d = [variance_deterministic(p, n) for p in (p_c, p_t)]
        var_m = [variance_model_based(p, n, precision, false_omission_rate) for p in (p_c, p_t)]
        mod = difference_ci(p_c, p_t, *var_m)
        intervals[name] = det, mod
        s = TABLE_1_SYSTEMS
        ours[name] = {"ATE": det.difference, **{f"Var^D {x}": v for x, v in zip(s, var_d, strict=True)},
                      **{f"Var^M {x}": v for x, v in zip(s, var_m, strict=True)}, "CI^D lower": det.lower,
                      "CI^D upper": det.upper, "CI^M lower": mod.lower, "CI^M upper": mod.upper}
        printed[name] = {"ATE": t["ate"], **{f"Var^D {x}": v for x, v in zip(s, t["var_d"], strict=True)},
                         **{f"Var^M {x}": v for x, v in zip(s, t["var_m"], strict=True)},
                         "CI^D lower": t["ci_d"][0], "CI^D upper": t["ci_d"][1], "CI^M lower": t["ci_m"][0],
                         "CI^M upper": t["ci_m"][1]}
        for x, p, vd, vm in zip(s, (p_c, p_t), t["var_d"], t["var_m"], strict=True):
            p_r = real_positive_rate(p, precision, false_omission_rate)
            n_rows.append({"dataset": name, "system": x, "N used": n,
                           "N implied by printed Var^D (eq. 5)": infer_n(p, float(vd)),
                           "N implied by printed Var^M (eq. 13)": p_r * (1 - p_r) / float(vm) + 1})
    summary = pd.DataFrame({name: {"N (prompts)": prompts[name][0], **values,
                                   "significant (deterministic)": intervals[name][0].significant,
                                   "significant (model-based)": intervals[name][1].significant}
                            for name, values in ours.items()})
    return Table1(summary, pd.DataFrame(n_rows).set_index(["dataset", "system"]), ours, printed, intervals)


def resampling_against_formula(p_control: float, p_treatment: float, n: int, precision: float,
                               false_omission_rate: float, n_draws: int, rng: np.random.Generator,
                               model_based: DifferenceCI) -> tuple[pd.DataFrame, dict]:
    """MBM's correction checked inside a resampling test, on simulated observed labels with the given rates and
    ``n`` outputs per system: the bootstrap of the observed labels, and the bootstrap with the true labels drawn
    given the observed ones in every resample (:func:`resampled_true_rates`), beside eq. 13/14 (``model_based``).
    Returns the table (variance of the difference, 2.5 % and 97.5 % quantiles) and the resampled differences
    (``naive``; ``corrected``; ``shifted``: corrected, centred at the observed difference)."""
    obs_c, obs_t = np.zeros(n, dtype=int), np.zeros(n, dtype=int)
    obs_c[: round(p_control * n)] = 1
    obs_t[: round(p_treatment * n)] = 1
    naive = rng.binomial(n, p_treatment, n_draws) / n - rng.binomial(n, p_control, n_draws) / n
    corrected = (resampled_true_rates(obs_t, precision, false_omission_rate, n_draws, rng)
                 - resampled_true_rates(obs_c, precision, false_omission_rate, n_draws, rng))
    shifted = corrected - corrected.mean() + (p_treatment - p_control)
    table = pd.DataFrame({
        "bootstrap of observed labels": [naive.var(ddof=1), *np.quantile(naive, [0.025, 0.975])],
        "bootstrap + true-label draws": [corrected.var(ddof=1), *np.quantile(shifted, [0.025, 0.975])],
        "MBM eq. 13/14": [model_based.var_control + model_based.var_treatment, model_based.lower,
                          model_based.upper]},
        index=["variance of the difference", "2.5% quantile", "97.5% quantile"])
    return table, {"naive": naive, "corrected": corrected, "shifted": shifted}


def paired_outputs(rng: np.random.Generator, n: int, precision: float, false_omission_rate: float,
                   shared_rate: float = 0.02, control_rate: float = 0.01, treatment_rate: float = 0.005) -> dict:
    """Simulated outputs of two systems on ``n`` shared prompts, a share ``shared_rate`` of which make both
    toxic (plus each system's own rate): the observed labels, their joint distribution, the model-based variances,
    the covariance of MBM eq. 20, and the independent (eq. 14) and paired (eq. 20) intervals of the difference."""
    shared = rng.random(n) < shared_rate
    oc = (shared | (rng.random(n) < control_rate)).astype(int)
    ot = (shared | (rng.random(n) < treatment_rate)).astype(int)
    joint = pd.crosstab(oc, ot, normalize=True).reindex(index=[0, 1], columns=[0, 1], fill_value=0).to_numpy()
    vc = variance_model_based(oc.mean(), n, precision, false_omission_rate)
    vt = variance_model_based(ot.mean(), n, precision, false_omission_rate)
    cov = covariance_paired(joint, precision, false_omission_rate, precision, false_omission_rate, n)
    return {"control": oc, "treatment": ot, "joint": joint, "covariance": cov,
            "independent": difference_ci(oc.mean(), ot.mean(), vc, vt),
            "paired": difference_ci(oc.mean(), ot.mean(), vc, vt, covariance=cov)}


def judge_study(seed: int, n_items: int = 2000, labelled_fraction: float = 0.05, true_rate: float = 0.6,
                miss: float = 0.10, false_positive: dict | None = None) -> pd.DataFrame:
    """A simulated user study of an LLM judge (workbook 06, section 4): systems with the same true rate of correct
    answers, a judge that misses a share ``miss`` of the correct answers of every system but calls a share
    ``false_positive[system]`` of the wrong ones correct, and human labels on the same random
    ``labelled_fraction`` of the items for every system (NaN elsewhere)."""
    rng = np.random.default_rng(seed)
    labelled = rng.permutation(n_items) < round(labelled_fraction * n_items)
    rows = []
    for system, fp in (false_positive or {"A": 0.05, "B": 0.15, "C": 0.30}).items():
        truth = (rng.random(n_items) < true_rate).astype(float)
        judged = np.where(truth == 1, rng.random(n_items) > miss, rng.random(n_items) < fp)
        rows.append(pd.DataFrame({"system": system, "item": np.arange(n_items), "judge": judged.astype(float),
                                  "human": np.where(labelled, truth, np.nan)}))
    return pd.concat(rows, ignore_index=True)
