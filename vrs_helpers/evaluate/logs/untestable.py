"""Tasks that cannot be tested, described instead (issue 52).

- **Too few items for the exact test.** A task with one run and fewer than
  :data:`~vrs_helpers.registry.SMALL_ITEMS` items is decided by the exact or permutation test of
  :func:`~vrs_helpers.evaluate.tables.small_data.small_test` (mid-p). Its smallest attainable p-value depends on
  the number of items n alone: for two systems the sign-flip mid-p of n non-zero differences all of one sign is
  2 (1/2)^n - (1/2)^n = (1/2)^n (McNemar's exact mid-p with every discordant pair on one side); for k >= 3
  systems the within-item label permutation puts probability (k!)^(1 - n) on the arrangements as extreme as the
  most extreme one (the k! relabellings that permute every item alike leave the statistic unchanged), whose mid-p
  is half of that. Where this is not below alpha no data can give a difference, and the task is "not testable: n
  items cannot give p < alpha" - never a p-value verdict - with each model's accuracy and interval still shown.
- **One model per task** (HELM or Every Eval Ever folders where each scenario ran one model): nothing is
  compared; each model's accuracy per task is described with its small-sample interval (Wilson for 0/1 item
  scores, else t; :func:`vrs_helpers.evaluate.logs.many_tasks.mean_interval`) beside the harness's own aggregate.
"""

from __future__ import annotations

import math

import pandas as pd

from ...outcomes import p_text
from ..tables.small_data import item_means


def smallest_p(n_items: int, n_systems: int) -> float:
    """The smallest mid-p the small-sample test of :func:`~vrs_helpers.evaluate.tables.small_data.small_test` can
    give with ``n_items`` items and ``n_systems`` systems (module docstring)."""
    n, k = int(n_items), int(n_systems)
    if n < 1 or k < 2:
        return 1.0
    if k == 2:
        return 0.5 ** n
    return 0.5 * math.exp((1 - n) * math.lgamma(k + 1))


def untestable_reason(n_items: int, n_systems: int, alpha: float) -> str | None:
    """"<n> items cannot give p < alpha ..." when the exact test cannot reach ``alpha``; else None."""
    low = smallest_p(n_items, n_systems)
    if low < alpha:
        return None
    return (f"{n_items} items cannot give p < {alpha:g} (the smallest p-value the exact test of {n_systems} systems "
            f"can give with {n_items} items is {p_text(low)}); each model's accuracy is shown, nothing is decided")


def single_system_table(tables: dict, reported: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per task and model (``tables``: {(task, metric): rows of system, item, score}), the mean of the item means
    (over runs and repeats) with its 95 % interval, the number of items, and the harness's logged mean where it
    logged one value for the model and task (one run)."""
    from .many_tasks import mean_interval

    rows = []
    for (task, metric), d in tables.items():
        wide = item_means(d)
        for system in wide.columns:
            x = wide[system].to_numpy(dtype=float)
            lo, hi = mean_interval(x)
            logged = math.nan
            if reported is not None and len(reported):
                r = reported[(reported["system"] == system) & (reported["task"] == task)
                             & (reported["metric"].astype(str).isin({metric, metric.split("/")[0],
                                                                     metric.split(",")[0]}))]
                stat = r["statistic"].astype(str)
                v = r[stat.isin(("value", "mean", "accuracy")) | stat.str.startswith("accuracy")]["value"]
                if len(v) == 1:
                    logged = float(v.iloc[0])
            rows.append({"task": task, "metric": metric, "system": str(system), "n_items": int(len(x)),
                         "estimate": float(x.mean()) if len(x) else math.nan, "ci_low": lo, "ci_high": hi,
                         "logged": logged,
                         "interval": "Wilson 95 %" if set(x.tolist()) <= {0.0, 1.0} else "t 95 %"})
    return pd.DataFrame(rows)


def nothing_compared(frame: pd.DataFrame, limit: int = 12) -> str:
    """The answer when no task has two models: what is there, in accuracy points, and that nothing is compared."""
    parts = [f"{r['task']}: {r['system']} {r['estimate']:.3g} [{r['ci_low']:.3g}, {r['ci_high']:.3g}]"
             for _, r in frame.head(limit).iterrows()]
    more = f"; and {len(frame) - limit} more" if len(frame) > limit else ""
    return ("Nothing is compared: every task was run by one model only, so no test of a difference exists. Each "
            "model's mean score per task with its 95 % interval: " + "; ".join(parts) + more + ".")
