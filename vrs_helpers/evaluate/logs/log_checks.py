"""Our numbers checked against the logs (issue 40): per system, task, run and metric the mean (and standard error)
we reproduce from the per-item records beside the one the harness wrote in its own aggregate file, with a status:

- ``equal`` - within the logged value's printed rounding (half a unit of its last decimal; 1e-9 at full
  precision);
- ``differs: percent scale`` - the logged value is 100 times ours (a converter or harness that writes percent);
- ``differs: trimmed samples`` - the harness counted more items than the per-item records hold (lm-eval's
  ``n-samples``, HELM's ``count``): the samples were trimmed or lost;
- ``differs: identical runs`` - two runs with the same score on every item whose logged aggregates differ: the
  per-item records of one run were written for another (a broken conversion);
- ``differs`` - none of these;
- ``not logged`` - the harness wrote no aggregate for it (Every Eval Ever's instance files).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .task_metrics import base_name

MEAN_STATS = ("value", "mean", "accuracy")
COLUMNS = ["system", "task", "run", "metric", "n_items", "n_logged", "ours", "logged", "stderr_ours",
           "stderr_logged", "status"]


def rounding_tolerance(value: float) -> float:
    """Half a unit of the last printed decimal of ``value`` (as Python prints the float); 1e-9 when it is printed
    with 10 or more decimals (full precision)."""
    if not np.isfinite(value):
        return 0.0
    text = repr(float(value))
    if "e" in text:
        return 1e-9
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 1e-9 if decimals >= 10 else max(1e-9, 0.5 * 10.0 ** -decimals)


def _logged(reported: pd.DataFrame, system, task, run, metric, kind) -> float:
    r = reported[(reported["system"] == system) & (reported["task"] == task) & (reported["run"] == run)]
    if kind == "n":
        v = r[r["statistic"].isin(["n", "count"])]["value"]
        return float(v.max()) if len(v) else math.nan
    exact = r[r["metric"].astype(str) == metric]   # the metric itself first (lm-eval: metric/filter)
    r = exact if len(exact) else r[r["metric"].astype(str).isin({base_name(metric), metric.split("/")[0]})]
    stat = r["statistic"].astype(str)
    if kind == "mean":
        v = r[stat.isin(MEAN_STATS) | stat.str.startswith("accuracy") | stat.str.startswith("mean")]["value"]
    else:
        v = r[stat.str.startswith("stderr") | (stat == "stddev")]["value"]   # HELM: SD over train trials
    return float(v.iloc[0]) if len(v) else math.nan


def check_against_logs(harness: pd.DataFrame, reported: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """The table of our reproduced aggregates beside the logged ones (``harness``: rows of
    :func:`~vrs_helpers.evaluate.logs.harness_stats.harness_numbers` with a ``metric`` column; ``reported``: the
    :class:`~vrs_helpers.evaluate.logs.readers.EvalLogs`' ``reported``; ``table``: the long table, for identical
    runs). Columns :data:`COLUMNS`."""
    rows = []
    for _, h in harness.iterrows():
        ours, se = float(h["mean"]), float(h["stderr"])
        logged = _logged(reported, h["system"], h["task"], h["run"], h["metric"], "mean")
        se_logged = _logged(reported, h["system"], h["task"], h["run"], h["metric"], "stderr")
        n_logged = _logged(reported, h["system"], h["task"], h["run"], h["metric"], "n")
        if not np.isfinite(logged):
            status = "not logged"
        elif abs(ours - logged) <= rounding_tolerance(logged):
            status = "equal"
        elif abs(ours * 100 - logged) <= max(rounding_tolerance(logged), 1e-7):
            status = "differs: percent scale (the log's value is 100 times the mean of its items)"
        elif np.isfinite(n_logged) and n_logged > h["n_items"]:
            status = (f"differs: trimmed samples (the harness counted {int(n_logged)} items; the per-item "
                      f"records hold {int(h['n_items'])})")
        else:
            status = "differs"
        rows.append({"system": h["system"], "task": h["task"], "run": h["run"], "metric": h["metric"],
                     "n_items": int(h["n_items"]), "n_logged": n_logged, "ours": ours, "logged": logged,
                     "stderr_ours": se, "stderr_logged": se_logged, "status": status})
    out = pd.DataFrame(rows, columns=COLUMNS)
    return _identical_runs(out, table)


def _identical_runs(out: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    for (system, task, metric), g in out.groupby(["system", "task", "metric"], sort=False):
        if len(g) < 2 or metric not in table.columns:
            continue
        part = table[(table["system"] == system) & (table["task"] == task)].dropna(subset=[metric])
        vectors = {run: tuple(r.sort_values(["item", "repeat"])[metric]) + tuple(r.sort_values(["item", "repeat"])
                   ["item"]) for run, r in part.groupby("run")}
        for i, a in g.iterrows():
            twins = [b["run"] for _, b in g.iterrows() if b["run"] != a["run"]
                     and vectors.get(b["run"]) == vectors.get(a["run"]) and np.isfinite(a["logged"])
                     and np.isfinite(b["logged"]) and abs(a["logged"] - b["logged"]) > rounding_tolerance(a["logged"])]
            if twins:
                out.loc[i, "status"] = (f"differs: identical runs (the same score on every item as run "
                                        f"{twins[0]}, but another logged aggregate: the per-item records of one run "
                                        "were written for another?)")
    return out


def warnings_of(checked: pd.DataFrame) -> list:
    """One console line per row whose status is not ``equal`` / ``not logged``."""
    bad = checked[checked["status"].astype(str).str.startswith("differs")]
    return [f"WARNING: {r['system']}, task {r['task']}, run {r['run']}, {r['metric']}: ours {r['ours']:.6g}, logged "
            f"{r['logged']:.6g}: {r['status']}." for _, r in bad.iterrows()]
