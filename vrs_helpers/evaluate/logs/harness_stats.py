"""The numbers evaluation harnesses print, reproduced from their per-item logs, and what each leaves out (issue 29).

Every number here treats the test items as a sample from a population of items; none of them knows about the
variation between training runs, few-shot seeds or prompt templates (book 4.3: that needs runs as a random effect
in a mixed model). Each function states in its docstring - and each table in its ``ignores`` column - which
variation it does not see.

- :func:`lm_eval_stderr` - lm-evaluation-harness's ``mean_stderr`` (lm_eval/api/metrics.py): sample SD / sqrt(n);
- :func:`inspect_stderr` - Inspect's ``stderr()`` (inspect_ai/scorer/_metrics/std.py): the same CLT standard error
  of the item scores after the epochs are reduced, or clustered with the finite-cluster factor C / (C - 1);
- :func:`clustered_stderr` - Miller (2024, "Adding Error Bars to Evals", arXiv 2411.00640, Appendix A);
- :func:`harness_numbers` - per system, task and run the harness's own mean and standard error from
  :class:`~vrs_helpers.evaluate.logs.readers.EvalLogs`;
- :func:`miller_errors`, :func:`paired_difference` - Miller's standard errors (CLT and clustered) and the paired
  difference of two systems on the same items with its confidence interval (Miller, sec. 2-4);
- :func:`mcnemar` - McNemar's test, exact and mid-p, for two systems with one run of 0/1 scores;
- :func:`miller_items_needed`, :func:`miller_power`, :func:`miller_inputs`, :func:`miller_plan` - planning in
  items and repeats (Miller, sec. 5; ``vrs plan --repeats``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ...outcomes import DiscordantPairsTest, ZTest, p_is
from ..tables.power import PlanningError
from ..tables.scores import InputError

IGNORES = {
    "lm-eval": "the items are a random sample, the run fixed: the variation between seeds, few-shot draws and "
               "prompt templates is not in it (lm-eval issue #2089)",
    "inspect": "the epochs of an item are averaged first, so it sees the variation between items (and the "
               "within-item noise shrunk by the epochs), not the variation between runs",
    "inspect-clustered": "items of one cluster may be correlated, but the variation between runs is not in it",
    "helm": "the spread of the per-trial means over HELM's train trials: run-to-run variation only, the items "
            "treated as fixed (HELM prints the mean and this SD, no standard error)",
    "every-eval-ever": "no harness number: the CLT standard error of the item means, which leaves out the "
                       "variation between runs",
    "miller": "items (or clusters of items) are a random sample; repeats are averaged per item; the variation "
              "between runs is not in it",
    "paired": "pairs the systems on the same items, so item difficulty cancels; repeats and runs are averaged per "
              "item, so the variation between runs is not in it",
    "mcnemar": "conditions on the items of this test set and one run of each system: neither the variation between "
               "runs nor a population of items beyond these is in it",
}


def _values(x) -> np.ndarray:
    v = np.asarray(x, dtype=float)
    if v.ndim != 1 or not np.isfinite(v).all():
        raise InputError("scores must be a 1-d sequence of finite numbers.")
    return v


def lm_eval_stderr(values) -> float:
    """lm-evaluation-harness's standard error of a mean metric (``mean_stderr``: ``sample_stddev(arr) /
    sqrt(len(arr))``, the SD with n - 1), as its results files record it in ``"acc_stderr,none"``; NaN for fewer
    than 2 items (lm-eval writes "N/A"). Ignores: the variation between runs (seeds, prompts)."""
    v = _values(values)
    return float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan


def clustered_stderr(values, clusters, correction: bool = False) -> float:
    """Clustered standard error of the mean (Miller 2024, Appendix A): sqrt(sum_c (sum_{i in c} (s_i - sbar))^2)
    / n, which with one item per cluster is the population SD / sqrt(n). ``correction``: times sqrt(C / (C - 1)),
    the finite-cluster factor Inspect applies (``stderr(cluster=...)``). With fewer than 2 clusters that factor
    divides by C - 1 = 0: the corrected standard error is undefined, NaN with a warning saying so (issue 39; Inspect
    guards the case and returns 0, :func:`inspect_stderr`). Ignores: the variation between runs."""
    v = _values(values)
    c = pd.Series(np.asarray(clusters, dtype=object))
    if len(c) != len(v) or c.isna().any():
        raise InputError("every score needs a cluster id (no missing values), one per score.")
    n_clusters = int(c.nunique())
    if correction and n_clusters < 2:
        warnings.warn(f"the clustered standard error with the finite-cluster factor C / (C - 1) is undefined for "
                      f"{n_clusters} cluster(s) (C - 1 = 0): NaN", RuntimeWarning, stacklevel=2)
        return math.nan
    sums = pd.Series(v - v.mean()).groupby(c.to_numpy(), sort=False).sum().to_numpy()
    var = float(np.sum(sums ** 2)) * (n_clusters / (n_clusters - 1) if correction else 1.0)
    return math.sqrt(var) / len(v)


def inspect_stderr(values, clusters=None) -> float:
    """Inspect's ``stderr()`` of the (epoch-reduced) sample scores: the SD with n - 1 over sqrt(n) (0 for fewer than 2
    scores), or with ``clusters`` the clustered standard error with the finite-cluster factor C / (C - 1)
    (:func:`clustered_stderr`; with one cluster 0, Inspect's guard, where the factor is undefined). Ignores: the
    variation between runs; the epochs only shrink the within-item noise."""
    v = _values(values)
    if clusters is not None:
        if int(pd.Series(np.asarray(clusters, dtype=object)).nunique()) < 2:
            return 0.0  # Inspect's guard (inspect_ai/scorer/_metrics/std.py: cluster_count < 2 returns 0.0)
        return clustered_stderr(v, clusters, correction=True)
    return float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0


_REDUCERS = {"mean": "mean", "median": "median", "max": "max", "mode": lambda s: s.mode().iloc[0]}


def _item_scores(table: pd.DataFrame, metric: str, reducer="mean", extra=()) -> pd.DataFrame:
    """One score per system, task, run and item: the repeats reduced (Inspect's epoch reducer)."""
    keys = ["system", "task", "run", "item"]
    data = table.dropna(subset=[metric])
    out = data.groupby(keys, sort=False)[metric].agg(_REDUCERS[reducer]).rename("score").reset_index()
    reps = data.groupby(keys, sort=False).size().rename("n_repeats").reset_index()
    out = out.merge(reps, on=keys)
    for col in extra:
        first = data.groupby(keys, sort=False)[col].first().rename(col).reset_index()
        out = out.merge(first, on=keys)
    return out


def _metric(logs, metric):
    metric = metric or logs.description.primary_metric
    if metric not in logs.table.columns:
        raise InputError(f"No metric {metric!r} in the logs; metrics: "
                         f"{', '.join(sorted({m for ms in logs.description.metrics.values() for m in ms}))}.")
    return metric


def harness_numbers(logs, metric: str | None = None, cluster: str | None = None) -> pd.DataFrame:
    """Per system, task and run the mean the harness prints and its standard error as that harness defines it,
    from the per-item rows of :class:`~vrs_helpers.evaluate.logs.readers.EvalLogs`:

    - lm-eval: the mean over documents and ``mean_stderr`` (:func:`lm_eval_stderr`), as in ``results_*.json``
      (metrics whose aggregation is not the mean - corpus BLEU, F1, MCC - are left NaN, saying so);
    - Inspect: the epochs of each sample reduced by the log's reducer (mean, median, max, mode), then the mean
      (``accuracy``/``mean``) and ``stderr()`` - clustered on the item column ``cluster`` if given
      (:func:`inspect_stderr`);
    - HELM: the mean over instances per train trial; a row ``run = "all"`` with the mean of the trial means and
      their population SD (``stats.json``'s mean and stddev);
    - Every Eval Ever: no harness number; the mean and CLT standard error of the item means.

    Columns: system, task, run, harness, n_items, n_repeats, mean, stderr, stderr_kind, ignores.
    """
    metric = _metric(logs, metric)
    fmt = logs.description.format
    if cluster is not None and cluster not in logs.table.columns:
        raise InputError(f"No item column {cluster!r} to cluster on; read the logs with item_fields=[{cluster!r}].")
    rows = []
    for (system, task, run), part in logs.table.dropna(subset=[metric]).groupby(["system", "task", "run"],
                                                                                  sort=False):
        setting = logs.settings.get((system, task, run), {})
        reducer = (setting.get("reducer") or ["mean"])[0]
        aggregation = (setting.get("aggregation") or {}).get(metric.split("/")[0], "mean")
        unknown = (f"reducer {reducer!r}" if fmt == "inspect" and reducer not in _REDUCERS else
                   f"aggregation {aggregation!r}" if fmt == "lm-eval" and "mean" not in aggregation else None)
        if unknown:   # the harness's number is not a mean of the item scores: say so, never a wrong number
            rows.append((system, task, run, fmt, part["item"].nunique(), int(part.groupby("item").size().max()),
                         math.nan, math.nan, f"{unknown} not reproduced", IGNORES[fmt]))
            continue
        items = _item_scores(part, metric, reducer if fmt == "inspect" else "mean",
                             extra=[cluster] if cluster else [])
        s = items["score"].to_numpy()
        if fmt == "lm-eval":
            se, kind = lm_eval_stderr(s), "mean_stderr"
        elif fmt == "inspect":
            se = inspect_stderr(s, items[cluster] if cluster else None)
            kind = f"stderr(cluster={cluster!r})" if cluster else "stderr()"
        else:
            se, kind = (lm_eval_stderr(s), "CLT (SD/sqrt(n))") if fmt != "helm" else (math.nan, "none")
        name = "inspect-clustered" if fmt == "inspect" and cluster else fmt
        rows.append((system, task, run, fmt, len(s), int(items["n_repeats"].max()), float(s.mean()), se, kind,
                     IGNORES.get(name, IGNORES["miller"])))
    out = pd.DataFrame(rows, columns=["system", "task", "run", "harness", "n_items", "n_repeats", "mean", "stderr",
                                      "stderr_kind", "ignores"])
    if fmt == "helm":
        extra = []
        for (system, task), g in out.groupby(["system", "task"], sort=False):
            extra.append((system, task, "all", fmt, int(g["n_items"].max()), 1, float(g["mean"].mean()),
                          float(np.std(g["mean"].to_numpy(), ddof=0)), "stddev over train trials", IGNORES["helm"]))
        out = pd.concat([out, pd.DataFrame(extra, columns=out.columns)], ignore_index=True)
    return out


def miller_errors(table: pd.DataFrame, metric: str = "score", cluster: str | None = None,
                  level: float = 0.95) -> pd.DataFrame:
    """Miller's (2024) error bars per system, task and run: the repeats of each item averaged (sec. 3.1), the mean
    over items, its CLT standard error sqrt(Var(s) / n) (sec. 2.1, Var with n - 1) and, with ``cluster`` (an item
    column), the clustered standard error (sec. 2.2 and Appendix A, :func:`clustered_stderr`), and the normal
    ``level`` confidence interval from the larger of the two (the clustered one can be the smaller when the
    clusters' deviations cancel; issue 39). Ignores: the variation between runs."""
    z = stats.norm.ppf(0.5 + level / 2)
    rows = []
    for (system, task, run), items in _item_scores(table, metric, extra=[cluster] if cluster else []).groupby(
            ["system", "task", "run"], sort=False):
        s = items["score"].to_numpy()
        se = float(np.std(s, ddof=1) / math.sqrt(len(s))) if len(s) > 1 else math.nan
        se_c = clustered_stderr(s, items[cluster]) if cluster else math.nan
        use = float(np.nanmax([se, se_c])) if cluster and not (math.isnan(se) and math.isnan(se_c)) else se
        rows.append((system, task, run, len(s), int(items[cluster].nunique()) if cluster else len(s),
                     float(s.mean()), se, se_c, float(s.mean() - z * use), float(s.mean() + z * use),
                     IGNORES["miller"]))
    return pd.DataFrame(rows, columns=["system", "task", "run", "n_items", "n_clusters", "mean", "se_clt",
                                       "se_clustered", "ci_low", "ci_high", "ignores"])


@dataclass(repr=False)
class PairedDifference(ZTest):
    """The paired difference of two systems' mean scores on the same items (Miller 2024, sec. 4.1): the z test of
    mean(d) = 0 for the per-item differences d_i, its standard error and the normal confidence interval."""

    difference: float
    se: float
    ci_low: float
    ci_high: float
    statistic: float
    p_value: float
    n_items: int
    n_clusters: int
    level: float
    method: str
    ignores: str

    def as_dict(self) -> dict:
        return {"difference": float(self.difference), "se": float(self.se), "ci": [float(self.ci_low),
                float(self.ci_high)], "z": float(self.statistic), "p_value": float(self.p_value),
                "n_items": int(self.n_items)}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{k: getattr(self, k) for k in ("difference", "se", "ci_low", "ci_high", "statistic",
                                                            "p_value", "n_items", "n_clusters", "method")}])

    def __repr__(self) -> str:
        return (f"PairedDifference({self.method}: {self.difference:+.4g} (SE {self.se:.3g}, {self.level:.0%} CI "
                f"{self.ci_low:.4g} to {self.ci_high:.4g}), z = {self.statistic:.3g}, p {p_is(self.p_value)}, "
                f"{self.n_items} items)")


def _pair(table, a, b, metric, task, extra=()):
    data = table if task is None else table[table["task"] == task]
    if task is None and data["task"].nunique() > 1:
        raise InputError(f"The table has several tasks ({', '.join(map(str, data['task'].unique()))}); name one.")
    for s in (a, b):
        if s not in set(data["system"]):
            raise InputError(f"No system {s!r}; systems: {', '.join(sorted(map(str, data['system'].unique())))}.")
    items = data.dropna(subset=[metric]).groupby(["system", "item"], sort=False)
    wide = items[metric].mean().unstack("system")[[a, b]]
    if wide.isna().any().any():
        lacking = wide.index[wide.isna().any(axis=1)]
        raise InputError(f"{len(lacking)} item(s) lack a score of {a} or {b} (e.g. {', '.join(map(str, lacking[:5]))})"
                         ": a paired comparison needs both systems on every item.")
    for col in extra:
        wide[col] = items[col].first().unstack("system")[a]
    return wide


def paired_difference(table: pd.DataFrame, a: str, b: str, metric: str = "score", task: str | None = None,
                      cluster: str | None = None, level: float = 0.95) -> PairedDifference:
    """Miller's paired difference of systems ``a`` - ``b`` (sec. 4.1): per item the mean score of each system (its
    repeats and runs averaged), d_i their difference, SE = SD(d) / sqrt(n) (n - 1), or with ``cluster`` the
    clustered SE of the d_i (Appendix A, :func:`clustered_stderr`), z = mean(d) / SE, two-sided normal p, and the
    ``level`` interval mean(d) +- z SE. Ignores: the variation between runs (averaged away per item, never
    estimated)."""
    wide = _pair(table, a, b, metric, task, extra=[cluster] if cluster else [])
    d = (wide[a] - wide[b]).to_numpy(dtype=float)
    if len(d) < 2:
        raise InputError("A paired difference needs at least 2 shared items.")
    se = clustered_stderr(d, wide[cluster]) if cluster else float(np.std(d, ddof=1) / math.sqrt(len(d)))
    mean = float(d.mean())
    z = mean / se if se > 0 else (0.0 if mean == 0 else math.copysign(math.inf, mean))
    q = stats.norm.ppf(0.5 + level / 2)
    return PairedDifference(mean, se, mean - q * se, mean + q * se, z, float(2 * stats.norm.sf(abs(z))), len(d),
                            int(wide[cluster].nunique()) if cluster else len(d), level,
                            "paired difference, clustered SE (Miller 2024)" if cluster else
                            "paired difference (Miller 2024)", IGNORES["paired"])


@dataclass(repr=False)
class McNemarTest(DiscordantPairsTest):
    """McNemar's test of two systems' 0/1 scores on the same items: of the n discordant items, ``n10`` are right
    by the first system only, ``n01`` by the second only; under H0 n10 ~ Binomial(n, 1/2). ``p_value`` is the exact
    two-sided p = min(1, 2 P(X <= min(n10, n01))) (as ``statsmodels.stats.contingency_tables.mcnemar(exact=True)``);
    ``p_mid`` the mid-p = exact p - P(X = min(n10, n01)) (Fagerland, Lydersen & Laake 2013)."""

    n10: int
    n01: int
    p_value: float
    p_mid: float
    n_items: int
    method: str = "McNemar's exact test"
    ignores: str = IGNORES["mcnemar"]

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"n10": self.n10, "n01": self.n01, "p_value": self.p_value, "p_mid": self.p_mid,
                              "n_items": self.n_items, "method": self.method}])

    def __repr__(self) -> str:
        return (f"McNemarTest(n10={self.n10}, n01={self.n01}, exact p = {self.p_value:.4g}, mid-p = "
                f"{self.p_mid:.4g}, {self.n_items} items)")


def mcnemar(a, b) -> McNemarTest:
    """McNemar's test (exact and mid-p) of two aligned 0/1 score vectors (one run of each system on the same
    items). Ignores: the variation between runs and any population of items beyond these."""
    x, y = _values(a), _values(b)
    if len(x) != len(y):
        raise InputError(f"McNemar's test needs the two systems' scores on the same items ({len(x)} vs {len(y)}).")
    if not (np.isin(x, (0.0, 1.0)).all() and np.isin(y, (0.0, 1.0)).all()):
        raise InputError("McNemar's test needs 0/1 scores (correct / incorrect); the scores are not all 0 or 1.")
    n10, n01 = int(np.sum((x == 1) & (y == 0))), int(np.sum((x == 0) & (y == 1)))
    n, k = n10 + n01, min(n10, n01)
    exact = min(1.0, 2 * float(stats.binom.cdf(k, n, 0.5))) if n else 1.0
    mid = min(1.0, 2 * float(stats.binom.cdf(k, n, 0.5)) - float(stats.binom.pmf(k, n, 0.5))) if n else 1.0
    return McNemarTest(n10, n01, exact, mid, len(x))


def mcnemar_test(table: pd.DataFrame, a: str, b: str, metric: str = "score", task: str | None = None) -> McNemarTest:
    """:func:`mcnemar` on a long table: one run and one repeat of each system (the test has no place for more)."""
    data = table if task is None else table[table["task"] == task]
    several = [s for s in (a, b) if data[data["system"] == s][["run", "repeat"]].drop_duplicates().shape[0] > 1]
    if several:
        raise InputError(f"McNemar's test compares one run of each system; {', '.join(several)} has several runs or "
                         "repeats. Select one run, or use the mixed model (runs) / the paired difference (repeats).")
    wide = _pair(data, a, b, metric, task)
    return mcnemar(wide[a], wide[b])


def _whole(name: str, value, low: int, high: int) -> int:
    """A whole number in [low, high], given as a number or as text ('10', '1e3'), else an error saying so."""
    try:
        number = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError, OverflowError):
        number = math.nan
    if not number.is_integer() or not low <= number <= high:
        raise PlanningError(f"{name} must be whole numbers from {low} to {high:,}, got {value!r}.")
    return int(number)


def _k(repeats) -> tuple:
    ka, kb = (repeats, repeats) if np.ndim(repeats) == 0 else tuple(repeats)
    return _whole("repeats", ka, 1, 10**6), _whole("repeats", kb, 1, 10**6)


def _items_count(x: float) -> int:
    """ceil(x) items, or an error when no evaluation could have them (a difference far below the noise)."""
    if not x <= 1e15:
        raise PlanningError(f"more than 10^15 items would be needed ({x:.3g}): the difference delta is far smaller "
                            "than the variation of the scores; give the smallest difference that matters to you.")
    return int(math.ceil(x))


def _variance(omega2, sigma2_a, sigma2_b, repeats) -> float:
    ka, kb = _k(repeats)
    sigma2_b = sigma2_a if sigma2_b is None else sigma2_b
    for name, v in (("omega2", omega2), ("sigma2_a", sigma2_a), ("sigma2_b", sigma2_b)):
        if not (np.isfinite(v) and v >= 0):
            raise PlanningError(f"{name} must be a variance (a number >= 0), got {v!r}.")
    total = omega2 + sigma2_a / ka + sigma2_b / kb
    if total <= 0:
        raise PlanningError("omega2, sigma2_a and sigma2_b are all 0: the scores do not vary.")
    return float(total)


def miller_items_needed(delta: float, omega2: float, sigma2_a: float, sigma2_b: float | None = None, repeats=1,
                        alpha: float = 0.05, power: float = 0.8) -> int:
    """Items needed to detect a difference ``delta`` (in score units: 0.03 = 3 accuracy points) with the paired
    test at two-sided level ``alpha`` and the given ``power`` (Miller 2024, sec. 5):

        n = (z_{1 - alpha/2} + z_{power})^2 (omega2 + sigma2_a / K_a + sigma2_b / K_b) / delta^2,

    ``omega2`` the variance over items of the difference of the two systems' expected item scores, ``sigma2_a``,
    ``sigma2_b`` the mean within-item variance of a single draw (p (1 - p) for 0/1 scores), ``repeats`` K (or
    (K_a, K_b)) draws per item averaged. More repeats shrink only the within-item part: n cannot fall below
    (z + z)^2 omega2 / delta^2. Runs (seeds) are not in this formula: see
    :func:`vrs_helpers.evaluate.tables.power.runs_needed` for runs x items."""
    _check(alpha, power, delta)
    var = _variance(omega2, sigma2_a, sigma2_b, repeats)
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    with np.errstate(over="ignore", divide="ignore"):   # too many items: _items_count says so
        return _items_count(z * z * var / np.float64(delta) ** 2)


def miller_power(n_items: int, delta: float, omega2: float, sigma2_a: float, sigma2_b: float | None = None,
                 repeats=1, alpha: float = 0.05) -> float:
    """Power of the two-sided paired z test of a difference ``delta`` with ``n_items`` items (the normal
    approximation of :func:`miller_items_needed`, both tails counted)."""
    _check(alpha, 0.5, delta)
    n_items = _whole("items", n_items, 1, 10**9)
    se = math.sqrt(_variance(omega2, sigma2_a, sigma2_b, repeats) / n_items)
    q = stats.norm.ppf(1 - alpha / 2)
    return float(stats.norm.sf(q - abs(delta) / se) + stats.norm.cdf(-q - abs(delta) / se))


@dataclass
class MillerPlan:
    """Items x repeats (Miller 2024, sec. 5; :func:`miller_plan`): per number of repeats K the items needed for the
    target power and the power at each given number of items, and the floor no number of repeats goes below."""

    delta: float
    omega2: float
    sigma2_a: float
    sigma2_b: float
    alpha: float
    target: float
    table: pd.DataFrame   # repeats, items_needed, then power at <m> items per given m
    floor: int            # items needed as the repeats grow without bound: (z + z)^2 omega2 / delta^2

    def text(self) -> str:
        """The section ``vrs plan --repeats`` prints."""
        t = self.table.copy()
        return "\n".join([
            "Items x repeats (Miller 2024, sec. 5: paired z test, n = (z_(1-alpha/2) + z_power)^2 (omega2 + "
            "sigma2_a/K + sigma2_b/K) / delta^2)",
            f"delta = {self.delta:g}, omega2 = {self.omega2:g} (items' difference), sigma2 = {self.sigma2_a:g} / "
            f"{self.sigma2_b:g} (one draw within an item), alpha = {self.alpha:g}, power {self.target:g}", "",
            t.to_string(index=False, float_format=lambda v: f"{v:.3f}"), "",
            f"items needed as the repeats grow without bound: {self.floor} (repeats shrink only the within-item "
            "noise; runs - seeds, prompts - are not in this formula: plan them with --run-sd and --residual-sd, "
            "the runs x items planner)"])


def miller_plan(delta: float, omega2: float, sigma2_a: float, sigma2_b: float | None = None, repeats=(1, 2, 5, 10),
                items=(), alpha: float = 0.05, power: float = 0.8) -> MillerPlan:
    """Miller's closed form for items x repeats (:func:`miller_items_needed`, :func:`miller_power`) over a list of
    repeats K: the items needed for ``power`` and, for each of ``items``, the power reached."""
    repeats = [repeats] if np.ndim(repeats) == 0 else list(repeats)
    items = [items] if np.ndim(items) == 0 else list(items)
    if not repeats:
        raise PlanningError("give at least one number of repeats (draws per item).")
    rows = []
    for k in repeats:
        row = {"repeats": _k(k)[0], "items_needed": miller_items_needed(delta, omega2, sigma2_a, sigma2_b, k,
                                                                        alpha, power)}
        for m in items:
            m = _whole("items", m, 1, 10**9)
            row[f"power at {m} items"] = miller_power(m, delta, omega2, sigma2_a, sigma2_b, k, alpha)
        rows.append(row)
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    with np.errstate(over="ignore", divide="ignore"):
        floor = _items_count(z * z * omega2 / np.float64(delta) ** 2) if omega2 > 0 else 1
    return MillerPlan(float(delta), float(omega2), float(sigma2_a), float(sigma2_a if sigma2_b is None else sigma2_b),
                      float(alpha), float(power), pd.DataFrame(rows), floor)


def _check(alpha, power, delta):
    if not 0 < float(alpha) < 1 or not 0 < float(power) < 1:
        raise PlanningError(f"alpha and power must be between 0 and 1, got {alpha!r} and {power!r}.")
    if not np.isfinite(delta) or delta == 0:
        raise PlanningError(f"delta must be a non-zero difference in score units, got {delta!r}.")


def miller_inputs(table: pd.DataFrame, a: str, b: str, metric: str = "score", task: str | None = None) -> dict:
    """The variances :func:`miller_items_needed` needs, estimated from pilot logs of two systems on the same items
    (one run each): ``sigma2_a``, ``sigma2_b`` the mean over items of the within-item variance of the repeats (n - 1),
    ``omega2`` the variance of the per-item mean difference minus sigma2_a / K_a + sigma2_b / K_b (at least 0), and
    the repeats K. Without repeats the within-item variance cannot be told from omega2: sigma2 is then 0 and omega2
    holds both (the planner is right for one repeat, silent about more)."""
    data = table if task is None else table[table["task"] == task]
    wide = _pair(data, a, b, metric, task)
    d = (wide[a] - wide[b]).to_numpy(dtype=float)
    out = {"n_items": len(d)}
    for key, s in (("a", a), ("b", b)):
        g = data[data["system"] == s].dropna(subset=[metric]).groupby("item")[metric]
        k = int(g.size().min())
        out[f"repeats_{key}"] = k
        out[f"sigma2_{key}"] = float(g.var(ddof=1).mean()) if k > 1 else 0.0
    out["omega2"] = max(0.0, float(np.var(d, ddof=1)) - out["sigma2_a"] / out["repeats_a"]
                        - out["sigma2_b"] / out["repeats_b"])
    return out
