"""From an analysis to its :class:`~.result.Result`: the data a reader needs, in the order a reader needs it.

- :func:`scores_result` - one response of a score table (:class:`vrs_helpers.evaluate.analysis.OwnAnalysis`);
- :func:`metrics_result` - several responses, Holm across them
(:class:`vrs_helpers.evaluate.tables.metrics.MetricsAnalysis`);
- :func:`logs_result` - harness logs task by task (:class:`vrs_helpers.evaluate.logs.tasks.LogsAnalysis`).

Each adds to the analysis' own summary what its report shows first: the warnings about the data
(:func:`table_warnings`, :func:`logs_warnings`), an answer whose first sentence says when it rests on data that look
broken, and the leaderboard - every system with its estimate, interval, rank interval and letters, best first.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...outcomes import p_is
from .pairs_bound import bound_pairs
from .result import SCHEMA, Result, records, rounded

MAX_NAMED = 3   # broken runs named in a sentence (the rest counted)


# ------------------------------------------------------------------------------------------ checks of the data

def identical_runs(table: pd.DataFrame, response: str, system: str, item: str, runs) -> list[tuple]:
    """[(system, run, earlier run)] for every run of a system whose scores equal an earlier run's on every item (the
    same items, the same scores): a copied run, or a conversion that wrote one run's records for another. ``runs``:
    the replication columns (none: nothing to compare). One pass over the rows: each run's (item, score) rows are
    hashed and their hashes summed (a sum does not depend on the rows' order), so two runs with the same rows have
    the same sum and count; runs whose sums agree are then compared row by row."""
    runs = list(runs)
    if not runs or not len(table):
        return []
    keys = [system, *runs]
    rows = pd.DataFrame({"item": table[item].to_numpy(), "score": np.round(table[response].to_numpy(float), 12)})
    hashed = pd.DataFrame({"h": pd.util.hash_pandas_object(rows, index=False).to_numpy(), "n": 1})
    for k in keys:
        hashed[k] = table[k].to_numpy()
    sums = hashed.groupby(keys, observed=True, sort=True).agg(h=("h", "sum"), n=("n", "sum"))
    out = []
    for s, part in sums.groupby(level=0, observed=True, sort=False):
        seen = {}
        for key, (h, n) in zip(part.index, part[["h", "n"]].itertuples(index=False), strict=True):
            label = ", ".join(str(v) for v in key[1:])
            first = seen.get((h, n))
            if first is None:
                seen[(h, n)] = (label, key)
            elif _same_rows(table, keys, first[1], key, item, response):
                out.append((str(s), label, first[0]))
    return out


def _same_rows(table: pd.DataFrame, keys: list, a: tuple, b: tuple, item: str, response: str) -> bool:
    def rows(key):
        mask = np.logical_and.reduce([(table[k] == v).to_numpy() for k, v in zip(keys, key, strict=True)])
        part = table.loc[mask, [item, response]]
        return sorted(zip(part[item].astype(str), np.round(part[response].to_numpy(float), 12), strict=True))

    return rows(a) == rows(b)


def _named(pairs: list[tuple]) -> str:
    shown = [f"run {r} of {s} equals its run {first}" for s, r, first in pairs[:MAX_NAMED]]
    more = f" and {len(pairs) - MAX_NAMED} more" if len(pairs) > MAX_NAMED else ""
    return "; ".join(shown) + more


def table_warnings(spec, response: str) -> tuple[list, list]:
    """(warnings about a score table, the problems the verdict rests on): rows dropped (``--dropna``), runs that
    are identical item for item (a copied run: the runs-random reading counts it as an independent run, so its
    verdict is too sure), too few rows per system for the number of systems (a column of ids given as the system)."""
    warnings, broken = [], []
    design = spec.design
    if design is None:
        return warnings, broken
    dropped = int(design.n_dropped_nan or 0) + int(design.n_dropped_keys or 0)
    if dropped:
        warnings.append(f"{dropped} of {design.n_rows + dropped} rows were dropped (a missing score or label, "
                        "--dropna): the analysis uses the rest.")
    table = spec.table
    if table is not None and not hasattr(table, "dask") and spec.replications and spec.system:
        copies = identical_runs(table, response, spec.system, spec.item, spec.replications)
        if copies:
            text = (f"{len(copies)} run(s) are identical item for item to another run of the same system "
                    f"({_named(copies)}): copied runs? The runs-random reading counts each as an independent run.")
            warnings.append(text)
            broken.append(text)
    if design.n_systems >= 3 and design.n_rows < 3 * design.n_systems:
        warnings.append(f"{design.n_systems} systems with {design.n_rows} rows ({design.n_rows / design.n_systems:.2g} "
                        f"per system): is {spec.system!r} the system column?")
    return warnings, broken


def logs_warnings(checked: pd.DataFrame) -> tuple[list, list]:
    """(warnings, broken) from the check of our numbers against the logged ones
    (:func:`vrs_helpers.evaluate.logs.log_checks.check_against_logs`): identical runs with different logged aggregates
    (the per-item records of one run written for another: the verdict rests on broken records), a percent scale,
    trimmed samples, other differences - each kind once, with the places it was found."""
    warnings, broken = [], []
    if checked is None or not len(checked) or "status" not in checked:
        return warnings, broken
    bad = checked[checked["status"].astype(str).str.startswith("differs")]
    kinds = {"identical runs": [], "percent scale": [], "trimmed samples": [], "other": []}
    for _, r in bad.iterrows():
        status = str(r["status"])
        kind = next((k for k in kinds if k != "other" and status.startswith(f"differs: {k}")), "other")
        kinds[kind].append(r)

    def where(rows):
        shown = [f"{r['system']}, task {r['task']}, run {r['run']}" for r in rows[:MAX_NAMED]]
        return "; ".join(shown) + (f" and {len(rows) - MAX_NAMED} more" if len(rows) > MAX_NAMED else "")

    if kinds["identical runs"]:
        groups = {}
        for r in kinds["identical runs"]:
            groups.setdefault((str(r["system"]), str(r["task"])), []).append(str(r["run"]))
        named = [f"runs {', '.join(runs)} of {system} in task {task}" for (system, task), runs in groups.items()]
        shown = "; ".join(named[:MAX_NAMED]) + (f" and {len(named) - MAX_NAMED} more" if len(named) > MAX_NAMED else "")
        text = (f"The logs look broken: {shown} have the same score on every item but different logged aggregates: "
                "the per-item records of one run were written for another, so the per-item scores are not those of "
                "the runs.")
        warnings.append(text)
        broken.append(text)
    if kinds["percent scale"]:
        warnings.append(f"The logged aggregates are on a percent scale (100 times the mean of the items) for "
                        f"{where(kinds['percent scale'])}: the analysis uses the per-item scores (0-1).")
    if kinds["trimmed samples"]:
        warnings.append(f"The harness counted more items than the per-item records hold for "
                        f"{where(kinds['trimmed samples'])}: the samples were trimmed or lost; the analysis uses the "
                        "items that are there.")
    if kinds["other"]:
        warnings.append(f"Our mean differs from the logged one for {where(kinds['other'])} (the table 'Checked "
                        "against the logs' has the numbers).")
    return warnings, broken


def with_broken(answer: str | None, broken: list) -> str | None:
    """The answer, opened by what it rests on when the data look broken."""
    if not broken:
        return answer
    first = broken[0].rstrip(".")
    lead = first if first.startswith("The logs look broken") else f"The data look broken: {first[0].lower()}{first[1:]}"
    return f"{lead}; the verdict below rests on them and may be wrong. {answer or ''}".strip()


# ------------------------------------------------------------------------------------------ one score table

def _describe(spec, label: str, response: str) -> dict:
    d = spec.design
    if d is None:
        return {"label": label}
    return {"label": label, "response": response, "rows": d.n_rows, "items": d.n_items, "n_systems": d.n_systems,
            "systems": [str(s) for s in d.systems], "replications": dict(d.replications),
            "runs_per_system": {str(k): v for k, v in d.runs_per_system.items()},
            "dropped_missing": d.n_dropped_nan, "dropped_keys": d.n_dropped_keys, "design": d.design}


def spec_options(spec) -> dict:
    """The spec's options as JSON (what re-runs it: the data as a path when it was one), without the table."""
    out = {}
    for name in ("response", "system", "item", "replications", "repeats", "properties", "baseline", "family", "test",
                 "items", "runs", "alpha", "n_resamples", "n_sim", "seed", "delta", "lower_is_better", "dropna",
                 "target_phi", "max_runs", "target_power", "human", "human_labels"):
        value = getattr(spec, name, None)
        out[name] = list(value) if isinstance(value, tuple) else value
    data = getattr(spec, "data", None)
    out["data"] = str(data) if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") else None
    return out


def _runs_table(own) -> list:
    runs = own.runs
    system = own.system or "_system"
    reps = [c for c in own.replications if c in runs.columns]
    out = pd.DataFrame({"system": runs[system].astype(str)})
    out["run"] = (runs[reps].astype(str).agg(", ".join, axis=1) if reps else "")
    for c in ("n", "mean", "sd", "ci_low", "ci_high"):
        if c in runs:
            out[c] = runs[c].to_numpy()
    return records(out)


def _judge_board(own) -> dict | None:
    """With human labels the leaderboard is the corrected one: each system's mean by the verdict's reading (PPI)
    with its interval. Two systems: the rank interval and letters from the corrected difference; more: the
    comparisons are against the baseline only (the judge table), so no rank interval or letters are claimed."""
    j = own.judge
    primary = j.primary
    rows = []
    for s in (str(x) for x in j.systems):
        e = (j.means.get(s) or {}).get(primary) or (j.means.get(s) or {}).get("PPI")
        if e is not None:
            rows.append({"system": s, "estimate": e.estimate, "ci_low": e.lower, "ci_high": e.upper})
    if len(rows) < 2:
        return None
    sign = 1.0 if own.higher_is_better else -1.0
    rows.sort(key=lambda r: -sign * r["estimate"])
    for i, r in enumerate(rows, 1):
        r["rank"] = i
    base = str(j.systems[0])
    if len(rows) == 2:
        other = next(r["system"] for r in rows if r["system"] != base)
        d = (j.differences.get(other) or {}).get(primary)
        differ = d is not None and d.p_value < own.alpha
        for i, r in enumerate(rows, 1):
            r.update(rank_low=i if differ else 1, rank_high=i if differ else 2, group="ab"[i - 1] if differ else "a")
        method = f"{primary} difference"
    else:
        for r in rows:
            r.update(rank_low=None, rank_high=None, group="")
        method = f"{primary} means; the comparisons are against the baseline {base} (the judge's table)"
    unit = "accuracy" if own.family == "binomial" else f"mean {own.response}"
    return {"unit": f"{unit}, corrected for the judge", "interval": f"{100 * (1 - own.alpha):g} % CI",
            "method": method, "rows": records(pd.DataFrame(rows)), "higher_is_better": bool(own.higher_is_better),
            "corrected": True}


def _leaderboard(own) -> dict | None:
    """Every system with its estimate and interval, rank interval and letters, best first: the ranking (three or
    more systems), or the pair's means from the design's model; with human labels the corrected means
    (:func:`_judge_board`)."""
    from ..tables.ranking import ranking_table

    if getattr(own, "judge", None) is not None:
        board = _judge_board(own)
        if board is not None:
            return board

    unit = "accuracy" if own.family == "binomial" else f"mean {own.response}"
    table = own.ranking
    if table is None:
        comp = own.comparison_random if own.comparison_random is not None else own.comparison
        if comp is None or len(own.systems) != 2 or "contrast" not in comp.contrasts:
            return None
        m = comp.means
        est, lo, hi = (("probability", "prob_lower", "prob_upper") if "probability" in m else
                       ("emmean", "lower", "upper"))
        if not {est, lo, hi} <= set(m.columns):
            return None
        table = ranking_table(m.iloc[:, 0].astype(str).tolist(), m[est], m[lo], m[hi], comp.contrasts, own.alpha,
                              higher_is_better=own.higher_is_better, method=comp.test.method if comp.test else "")
        table["ci"] = "per system"
    runs = own.runs.groupby((own.system or "_system"), observed=True).size()
    rows = table.drop(columns=["method", "ci"], errors="ignore").assign(
        runs=table["system"].map(lambda s: int(runs.get(s, 0))))
    level = f"{100 * (1 - own.alpha):g} %"
    simultaneous = "ci" in table and str(table["ci"].iloc[0]) == "simultaneous"
    return {"unit": unit, "interval": f"simultaneous {level} CI" if simultaneous else f"{level} CI",
            "method": str(table["method"].iloc[0]) if "method" in table else "", "rows": records(rows),
            "higher_is_better": bool(own.higher_is_better)}


def scores_data(own, spec, label: str = "") -> dict:
    """The data of one response's :class:`~.result.Result` (not yet rounded)."""
    warnings, broken = table_warnings(spec, own.response)
    summary = own.to_summary()
    summary.update({
        "schema": SCHEMA, "kind": "scores",
        "answer": with_broken(summary.get("answer"), broken),
        "warnings": warnings, "broken": bool(broken),
        "data": _describe(spec, label, own.response), "spec": spec_options(spec),
        "baseline": spec.baseline, "runs": _runs_table(own), "leaderboard": _leaderboard(own),
        "n_disagreements": len(own.disagreements),
    })
    return bound_pairs(summary)


def scores_result(own, spec, label: str = "") -> Result:
    """The :class:`~.result.Result` of one response (``fits``: the analysis itself)."""
    return Result(rounded(scores_data(own, spec, label)), fits=own)


# ------------------------------------------------------------------------------------------ several metrics

def metrics_result(analysis, spec, label: str = "") -> Result:
    """The :class:`~.result.Result` of several responses: each metric's part as :func:`scores_data`, the Holm
    table across them, an answer per metric."""
    parts = {m: scores_data(r, spec, label) for m, r in analysis.results.items()}
    summary = analysis.to_summary()
    warnings = list(dict.fromkeys(w for p in parts.values() for w in p["warnings"]))
    broken = [w for p in parts.values() for w in p["warnings"] if p["broken"]][:1]
    families = summary["holm"]["families"]
    family = "runs_random" if families.get("runs_random") else "runs_as_replications"
    decided = {row["metric"]: row for row in families.get(family, [])}
    lines = []
    for m, p in parts.items():
        row, k = decided.get(m), len(p.get("systems") or [])
        what = "the two systems" if k == 2 else f"the {k} systems"
        if row is None:
            lines.append(f"{m}: no comparison")
            continue
        said = f"{what} differ" if row["differ"] else f"no evidence that {what} differ"
        best = (p.get("leaderboard") or {}).get("rows") or []
        if row["differ"] and best:
            tied = [r["system"] for r in best[1:] if r.get("rank_low") == 1]
            said += f", best {best[0]['system']}" + (f" (tied: {', '.join(map(str, tied))})" if tied else "")
        lines.append(f"{m}: {said} (p {p_is(row['p_value'])}, Holm-adjusted p {p_is(row['p_holm'])})")
    reading = "runs as a random effect" if family == "runs_random" else "runs as replications"
    answer = f"Across the {len(parts)} metrics ({reading}, Holm-adjusted): " + "; ".join(lines) + "."
    summary.update({"schema": SCHEMA, "kind": "metrics", "metrics": parts,
                    "answer": with_broken(answer, broken), "warnings": warnings, "broken": bool(broken),
                    "data": {**_describe(spec, label, ", ".join(parts))}, "spec": spec_options(spec),
                    "baseline": spec.baseline})
    return Result(rounded(summary), fits=analysis)


# ------------------------------------------------------------------------------------------ harness logs

def _task_leaderboards(analysis) -> dict:
    out = {}
    for task, table in analysis.rankings.items():
        if table is None or not len(table):
            continue
        rows = table.drop(columns=["method", "ci"], errors="ignore")
        out[str(task)] = {"unit": "mean score", "interval": "95 % CI (Wilson for 0/1 scores, else t)",
                          "method": str(table["method"].iloc[0]) if "method" in table else "", "rows": records(rows),
                          "higher_is_better": True}
    return out


def _logs_answer(analysis) -> str:
    tested = analysis.tasks[analysis.tasks["p_value"].notna()] if len(analysis.tasks) else analysis.tasks
    lines = [v for v in analysis.verdict if v.startswith("Task ")]
    if len(tested) == 1 and lines:
        return lines[0]
    if len(tested) > 1:
        n = int((tested["decision"] == "differ").sum())
        word = "Holm" if analysis.adjust == "holm" else "Benjamini-Hochberg"
        out = (f"The systems differ in {n} of {len(tested)} tasks at alpha = {analysis.alpha:g} after {word} "
               "adjustment across the tasks")
        if analysis.pooled:
            word = "differ" if analysis.pooled["p_value"] < analysis.alpha else "show no significant difference"
            out += (f"; pooled over the tasks they {word} ({analysis.pooled['method']}: {analysis.pooled['evidence']}, "
                    f"p = {analysis.pooled['p_text']})")
        elif getattr(analysis, "pooled_skipped", None):
            out += "; no pooled model over the tasks (the reason is in the notes)"
        if "best" in tested.columns and tested["best"].notna().any():   # 3+ systems (issue 52)
            out += "; best per task: " + "; ".join(
                f"{r['task']}: {r['best']}" + (f" (tied with it: {r['tied_with_best']})" if r.get("tied_with_best")
                                              else "") for _, r in tested.iterrows() if r.get("best"))
        across = getattr(analysis, "across", None)
        if across:
            out += f"; across the tasks: {across['best']}" + (f" (tied with it: {', '.join(across['tied'])})"
                                                             if across["tied"] else "")
        return out + "."
    if len(getattr(analysis, "single", ())) and analysis.verdict:   # one model per task: described (issue 52)
        return analysis.verdict[0]
    return lines[0] if lines else "No task could be tested."


def logs_result(analysis, options: dict | None = None, label: str = "") -> Result:
    """The :class:`~.result.Result` of harness logs: the analysis' summary, the warnings from the check against the
    logs, an answer across the tasks, and every task's leaderboard."""
    summary = analysis.to_summary()
    warnings, broken = logs_warnings(analysis.checked)
    summary.update({"schema": SCHEMA, "kind": "logs", "data": {"label": label or str(analysis.description.get(
        "files", [""])[0] if analysis.description.get("files") else "")},
        "answer": with_broken(_logs_answer(analysis), broken), "warnings": warnings, "broken": bool(broken),
        "spec": dict(options or {}), "leaderboards": _task_leaderboards(analysis),
        "baseline": (options or {}).get("baseline")})
    return Result(rounded(summary), fits=analysis)
