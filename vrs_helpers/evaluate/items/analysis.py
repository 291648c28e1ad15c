"""``analyze_items()``: is the benchmark any good? (issue 55) - its items' statistics and flags, the Rasch
difficulties, and its reliability for comparing models, as one :class:`~vrs_helpers.evaluate.presentation.result.
Result` of kind ``"items"`` drawn by the same renderer as ``analyze()`` (``vrs items`` writes its report).

Inputs as ``vrs analyze``'s: a score table (one row per model, item and run: ``response``, ``system``, ``item``,
``replications``; read and checked by the score table's reader and checks) or a folder of evaluation logs
(lm-eval, Inspect, HELM, Every Eval Ever: each task with its own metric, items named ``task/item`` when there are
several tasks, Inspect's epochs and the runs as repeated answers).

``summary.json`` holds ``items`` (one row per item: ``item``, ``p_value``, ``difficulty`` and ``difficulty_se``
(Rasch, logits; 0/1 scores), ``discrimination`` and ``discrimination_se`` (0/1 scores of ten or more models: the
2PL slope by marginal maximum likelihood, :mod:`.twopl`, with ``difficulty_2pl`` and its SE beside it; otherwise
the item-rest correlation and its SE (1 - r^2) / sqrt(n - 1), classical test theory's discrimination index; the
top-level ``discrimination`` says which), ``item_rest``, ``flip_rate``, ``flags``) and
``reliability`` (``phi``, ``relative``, the items and runs needed for 0.8 / 0.9, the smallest resolved
difference, signal-to-noise, saturation, the variance components and the decision study), and ``subset``: a
smaller benchmark that keeps the ranking (:mod:`.subset`), its cross-validated error per size.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd

from ..files import InputError
from ..presentation.result import SCHEMA, Result, records, rounded
from .matrix import ItemMatrix, item_matrix
from .rasch import MODELS, rasch
from .reliability import benchmark_reliability
from .statistics import FLAGS, item_statistics
from .subset import chosen_items, cross_validate
from .twopl import MIN_MODELS, twopl

MAX_NAMED = 10   # flagged item ids named in the answer (all of them are in the table and summary.json)


def _table_long(data, response, system, item, replications, dropna: bool) -> tuple[pd.DataFrame, list]:
    """A score table read and checked as ``vrs analyze`` reads it, as the long table model, item, run, score."""
    from ..tables.scores import load_scores, validate

    raw = data if isinstance(data, pd.DataFrame) else load_scores(data)
    clean, info = validate(raw, response=[response], system=system, item=item,
                           replications=list(replications), properties=[], dropna=dropna, repeats=[])
    notes = [f"{info.n_dropped_nan} rows with a missing score dropped (dropna)."] if info.n_dropped_nan else []
    run = "0"
    for k, col in enumerate(replications):   # column by column (a row-wise join is slow on millions of rows)
        run = clean[col].astype(str) if k == 0 else run + "/" + clean[col].astype(str)
    long = pd.DataFrame({"model": clean[system].astype(str) if system else "all", "item": clean[item].astype(str),
                         "run": run, "score": pd.to_numeric(clean[response])})
    return long, notes


def _logs_long(path, format: str, system: str | None, metric) -> tuple[pd.DataFrame, list, str]:
    """Harness logs as the long table: every task with its chosen metric (its first), runs and repeats as runs."""
    from ..logs.readers import load_eval_logs
    from ..logs.task_metrics import choose_metrics

    logs = load_eval_logs(path, format=format, system=system)
    chosen, skipped = choose_metrics(logs.description, metric)
    parts, used = [], []
    for task, metrics in chosen.items():
        m = metrics[0]
        d = logs.table[logs.table["task"] == task]
        parts.append(pd.DataFrame({"model": d["system"].astype(str),
                                   "item": (f"{task}/" if len(chosen) > 1 else "") + d["item"].astype(str),
                                   "run": d["run"].astype(str) + "/" + d["repeat"].astype(str),
                                   "score": d[m].to_numpy(float)}))
        used.append(f"{task} ({m})")
    notes = [f"Task {e['task']}: not analysed ({e['reason']})." for e in skipped]
    notes += [str(n) for n in logs.description.notes]
    long = pd.concat(parts, ignore_index=True)
    if long["score"].isna().any():
        raise InputError(f"{int(long['score'].isna().sum())} answers in the logs have no score for the chosen "
                         "metric: choose another with --response METRIC.")
    return long, notes, "; ".join(used)


def _items_rows(stats: pd.DataFrame, fit, two, n: int) -> pd.DataFrame:
    r = stats["item_rest"].to_numpy(float)
    if two is not None:
        out = stats.merge(two.items.rename(columns={"difficulty": "difficulty_2pl",
                                                    "difficulty_se": "difficulty_2pl_se"}), on="item", how="left")
    else:
        out = stats.assign(discrimination=r, discrimination_se=(1 - r * r) / math.sqrt(max(n - 1, 1)),
                           difficulty_2pl=np.nan, difficulty_2pl_se=np.nan)
    if fit is not None:
        out = out.merge(fit.items, on="item", how="left")
    else:
        out = out.assign(difficulty=np.nan, difficulty_se=np.nan)
    cols = ["item", "p_value", "difficulty", "difficulty_se", "discrimination", "discrimination_se",
            "difficulty_2pl", "difficulty_2pl_se", "item_rest", "p_negative", "sd", "flip_rate", "flags"]
    return out[cols]


def _answer(m: ItemMatrix, rel: dict | None, flagged: dict) -> str:
    parts = []
    if rel is not None:
        parts.append(f"For comparing these {m.n_models} models the benchmark's reliability is φ = {rel['phi']:.3f} "
                     f"({rel['interpretation']}; relative E ρ² = {rel['relative']:.3f}) at {m.n_items} items; "
                     f"two models' mean scores are resolved when they differ by more than "
                     f"{rel['smallest_difference']:.3g} (α = {rel['alpha']:g}).")
    else:
        parts.append(f"One model: its {m.n_items} items are described (difficulty across runs); the reliability "
                     "for comparing models needs two or more models.")
    neg = flagged.get("negative_discrimination") or []
    if neg:
        shown = ", ".join(neg[:MAX_NAMED]) + (f" and {len(neg) - MAX_NAMED} more" if len(neg) > MAX_NAMED else "")
        parts.append(f"{len(neg)} item(s) have negative discrimination (the better models get them wrong: read "
                     f"them, they may be mislabelled): {shown}.")
    none = flagged.get("no_information") or []
    if none:
        parts.append(f"{len(none)} item(s) carry no information (every model scores the same).")
    return " ".join(parts)


def analyze_items(data, response: str | None = None, system: str | None = None, item: str | None = None,
                  replications=(), *, format: str = "auto", metric=None, models: str = "random",
                  alpha: float = 0.05, flag_alpha: float = 0.05, dropna: bool = False,
                  data_label: str | None = None) -> Result:
    """The item analysis of a benchmark (module docstring) as a :class:`Result` of kind ``"items"``.

    ``data``: a score table (DataFrame, CSV/TSV/Parquet/JSON-lines file or run-folder pattern; name its columns
    with ``response``, ``item``, ``system`` and ``replications``) or a folder of evaluation logs (``response`` and
    ``item`` left out; ``format`` to name it; ``metric``: the metric to use, default each task's accuracy-like
    one). ``models``: ``"random"`` (crossed model and item effects) or ``"fixed"`` (lme4's ``0 + model``) in the
    Rasch fit (:mod:`.rasch`). ``alpha``: of the smallest resolved difference; ``flag_alpha``: the false discovery
    rate of the ``negative_discrimination`` flags. Bad input raises :class:`~vrs_helpers.evaluate.files.InputError`
    (``vrs items`` exits 2)."""
    if models not in MODELS:
        raise InputError(f"models must be one of {', '.join(MODELS)}; got {models!r}.")
    for name, v in (("alpha", alpha), ("flag_alpha", flag_alpha)):
        if not (isinstance(v, (int, float)) and 0 < v < 1):
            raise InputError(f"{name} must be a number between 0 and 1; got {v!r}.")
    label = data_label or (str(data) if isinstance(data, (str, os.PathLike)) else "score table")
    metric_used = response
    if response is None and item is None and not isinstance(data, pd.DataFrame):
        long, notes, metric_used = _logs_long(data, format, system, metric)
    else:
        if not response or not item:
            raise InputError("A score table needs its columns named: response (the score) and item (and system, "
                             "replications for the runs); or give a folder of evaluation logs.")
        long, notes = _table_long(data, response, system, item, replications, dropna)
    m = item_matrix(long)
    if m.dropped_items:
        notes.append(f"{m.dropped_items} item(s) not answered by every model were left out.")
    stats, who = item_statistics(m, flag_alpha)
    fit = rasch(m, models) if m.binary else None
    if fit is not None:
        notes += fit.warnings
    else:
        notes.append("Scores are not 0/1: no Rasch difficulties (the p-value is the item's mean score).")
    two = twopl(m) if m.binary and m.n_models >= MIN_MODELS else None
    if two is not None and not two.converged:
        notes.append(f"2PL: EM stopped after {two.iterations} iterations without converging.")
    if two is not None and two.runaway:
        notes.append(f"2PL: {two.runaway} item(s) separate the models (almost) perfectly: their slopes have no finite "
                     "estimate (shown at the bound, without an SE).")
    rows = _items_rows(stats, fit, two, who["n"])
    rel = benchmark_reliability(m, alpha)
    flagged = {f: [r["item"] for r in rows[["item", "flags"]].to_dict("records") if f in r["flags"]] for f in FLAGS}
    model_rows = pd.DataFrame({"model": m.models, "mean": m.means.mean(axis=1),
                               "runs": [int(v) for v in np.bincount(m.model, minlength=m.n_models) // m.n_items]})
    if fit is not None:
        model_rows = model_rows.merge(fit.models, on="model", how="left")
    model_rows = model_rows.sort_values("mean", ascending=False, kind="stable")
    subset_rows = cross_validate(m)
    good = [r["n_items"] for r in subset_rows if r["method"] == "stratified" and r["spearman"] >= 0.95]
    subset = None if not subset_rows else {
        "rows": subset_rows, "n_recommended": good[0] if good else None,
        "chosen": records(chosen_items(m, good[0])) if good else [],
        "method": "stratified: difficulty strata, the most discriminating item of each, weighted by stratum size; "
                  "information: the 2PL's most informative items, the full score predicted from the ability; 5-fold "
                  "cross-validation over models (random: the baseline)"}
    data_out = {
        "schema": SCHEMA, "kind": "items",
        "data": {"label": label, "response": metric_used, "rows": int(len(m.score)), "n_systems": m.n_models,
                 "items": m.n_items, "runs": m.n_runs if m.has_runs else 1, "binary": m.binary,
                 "respondents": who["unit"], "dropped_items": m.dropped_items},
        "answer": _answer(m, rel, flagged), "warnings": [], "notes": notes,
        "items": records(rows), "models": records(model_rows),
        "flagged": {f: v for f, v in flagged.items()}, "reliability": rel, "subset": subset,
        "rasch": None if fit is None else {"formula": fit.formula, "variances": fit.variances,
                                          "scale": "logit; difficulty = minus the item's conditional mode"},
        "discrimination": ("2PL slope (marginal maximum likelihood; " + two.se_method + ")" if two is not None
                           else "item-rest correlation"),
        "spec": {"response": metric_used, "system": system, "item": item, "replications": list(replications),
                 "models": models, "alpha": alpha, "flag_alpha": flag_alpha},
    }
    return Result(rounded(data_out), fits={"matrix": m, "rasch": fit, "twopl": two, "statistics": stats})
