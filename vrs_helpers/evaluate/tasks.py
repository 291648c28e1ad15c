"""The analysis of evaluation logs (issue 29): every task of a harness run, a pooled model over the tasks, the
verdicts adjusted across tasks, and the numbers the harness itself prints beside ours.

A harness run is many benchmarks (tasks). For each task the systems are compared by a test of the mixed model of
book 4.3,

    score ~ system + (1|item) [+ (1|system:item)] [+ (1|system:run)]   against   score ~ 1 + (same random part),

with ``(1|system:item)`` where an item is scored more than once per system (repeats: Inspect epochs; or several
runs) and ``(1|system:run)`` where a system has several runs (seeds, few-shot draws, prompt templates): runs shift
every item together, repeats are independent draws per item (:mod:`vrs_helpers.evaluate.readers.base`). 0/1 scores
are fitted as a logistic GLMM (lme4's ``glmer``, Laplace), other scores as a linear mixed model. The likelihood
ratio test's chi-square on (systems - 1) df (lme4's ``anova(m0, m1)``) is always reported; it is the verdict's test
where no system has several runs (the items carry the replication). Where systems have runs (3-5 seeds), its
chi-square reference rejects too often, and the verdict uses the family's small-sample default of the
runs-random reading (:mod:`vrs_helpers.registry`: Kenward-Roger's F test for continuous scores, the
parametric-bootstrap LRT for 0/1 scores; ``vrs analyze --test`` chooses another). The pooled model adds ``task``
as a fixed effect with items nested in tasks (``(1|task:item)``). The per-task p-values are adjusted across tasks
by Holm (1979; the default) or Benjamini-Hochberg (1995), one table of every task's verdict.

Every number a harness prints (:func:`~vrs_helpers.evaluate.harness_stats.harness_numbers`), Miller's (2024)
clustered errors and paired difference, and McNemar's test sit beside the verdict, each with a sentence on which
variation it ignores (:data:`~vrs_helpers.evaluate.harness_stats.IGNORES`).
"""

from __future__ import annotations

import html
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import mixed
from ..outcomes import p_text
from .harness_stats import IGNORES, harness_numbers, mcnemar_test, miller_errors, miller_inputs, paired_difference
from .scores import InputError
from .spec import AnalysisSpec

ADJUSTMENTS = {"holm": "Holm (1979) step-down, family-wise error rate",
               "bh": "Benjamini-Hochberg (1995) step-up, false discovery rate"}

MIXED_IGNORES = ("nothing of the design it was given: items, system-by-item variation (with repeats or runs) and "
                 "run-to-run variation (with runs) are random effects; it generalizes over items and runs")


METHODS = {"holm": "holm", "bh": "fdr_bh"}   # our names -> statsmodels' multipletests methods


def adjusted(p, method: str = "holm") -> np.ndarray:
    """p-values adjusted across a family of tests by statsmodels' ``multipletests`` (``holm``: Holm's step-down,
    R's ``p.adjust(method = "holm")``; ``bh``: Benjamini-Hochberg's step-up, ``fdr_bh``, R's ``"BH"``). A task
    without a p-value (NaN) is kept out of the family and stays NaN (``multipletests`` itself would return NaN for
    every entry)."""
    method = str(method).lower()
    if method not in ADJUSTMENTS:
        raise InputError(f"adjust must be one of {', '.join(ADJUSTMENTS)}; got {method!r}.")
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method=METHODS[method])[1]
    return out


def task_spec(logs, task: str, metric: str, dropna: bool = False) -> AnalysisSpec:
    """The validated :class:`~vrs_helpers.evaluate.spec.AnalysisSpec` of one task's scores: response ``score``,
    system ``system``, item ``item``, the runs as ``replications=["run"]`` when a system has several, the repeats
    as ``repeats=["repeat"]`` when an item has several scores within a run. Bad data (a constant score, a single
    item, values whose squares overflow) raise :class:`~vrs_helpers.evaluate.scores.InputError` naming the task,
    before any model is fitted."""
    d = logs.table[logs.table["task"] == task]
    if metric not in d.columns:
        raise InputError(f"task {task!r}: no metric {metric!r}.")
    data = d[["system", "run", "repeat", "item", metric]].rename(columns={metric: "score"})
    runs = bool(len(data) and data.groupby("system")["run"].nunique().max() > 1)
    repeats = bool(len(data) and data.groupby(["system", "run", "item"]).size().max() > 1)
    spec = AnalysisSpec(data, response="score", system="system", item="item",
                        replications=["run"] if runs else [], repeats=["repeat"] if repeats else [],
                        dropna=dropna, data_label=f"task {task}")
    try:
        return spec.validated()
    except InputError as exc:
        raise type(exc)(f"task {task!r}, metric {metric!r}: {exc}") from None


def random_part(data: pd.DataFrame, item: str = "item", items: str = "random") -> str:
    """The random effects a task's design identifies: ``(1|item)``, ``(1|system:item)`` when some (system, item)
    has several scores (repeats or runs) and ``items="random"`` (items like these; ``"fixed"``: these items, as
    ``vrs analyze --items``), ``(1|system:run)`` when some system has several runs."""
    if items not in ("random", "fixed"):
        raise InputError(f"items must be 'random' or 'fixed' (items like these, or these items); got {items!r}.")
    terms = [f"(1|{item})"]
    if items == "random" and data.groupby(["system", item]).size().max() > 1:
        terms.append(f"(1|system:{item})")
    if "run" in data.columns and data.groupby("system")["run"].nunique().max() > 1:
        terms.append("(1|system:run)")
    return " + ".join(terms)


def system_lrt(data: pd.DataFrame, family: str, fixed: str = "", item: str = "item", test: str | None = None,
               n_sim: int = 1000, seed: int = 0, items: str = "random") -> dict:
    """The test of the system term: ``score ~ [fixed +] system + random`` against the model without ``system``
    (:func:`random_part`); a logistic GLMM for ``family == "binomial"``, else linear mixed models.

    The chi-square likelihood ratio test (ML fits; the GLMMs' Laplace fits, as lme4's ``anova(m0, m1)``) is always
    computed (``chi2``, ``df``, ``chi2_p_value``). The verdict's test (``method``, ``evidence``, ``p_value``) is
    ``test`` (a test of :mod:`vrs_helpers.registry` that applies to the family) when given; otherwise, where a
    system has several runs (``(1|system:run)``), the family's default small-sample test of the runs-random
    reading (continuous scores: the F test with Kenward-Roger df on the REML fit; 0/1 scores: the
    parametric-bootstrap LRT, ``n_sim`` simulations from the null fit, ``seed``), because with a few runs per
    system the chi-square reference rejects too often; without runs the chi-square LRT (its reference is
    accurate when the items, not a handful of runs, carry the replication). Returns formula, family, chi2, df,
    chi2_p_value, method, evidence, p_value, the outcome's numbers (``test``) and the fit warnings (singular
    fits)."""
    from .. import registry
    from ..book.glrt import Hypothesis

    rand = random_part(data, item, items)
    runs = "(1|system:run)" in rand
    chosen = registry.choose(test, family) if (test is not None or runs) else registry.get("chisq")
    lead = f"{fixed} + " if fixed else ""
    f1, f0 = f"score ~ {lead}system + {rand}", f"score ~ {fixed or '1'} + {rand}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if family == "binomial":
            m1, m0 = mixed.glmer(f1, data), mixed.glmer(f0, data)
        else:
            m1, m0 = mixed.fit(f1, data, method="ML"), mixed.fit(f0, data, method="ML")
        lrt = mixed.lrt(m0, m1)
        outcome = lrt
        if chosen.name != "chisq":
            full = m1 if family == "binomial" else mixed.fit(f1, data)   # the Laplace fit; the REML fit
            names, kept = list(full.fixed_effects.index), set(m0.fixed_effects.index)
            cols = [i for i, n in enumerate(names) if n not in kept]     # the system columns
            L = np.zeros((len(cols), len(names)))
            L[np.arange(len(cols)), cols] = 1.0
            outcome = chosen.run(Hypothesis(f1, f0, full, L, "system", data, lrt, family, n_sim, seed,
                                            extra={"null_fit": m0 if family == "binomial" else None}))
    notes = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, mixed.SingularFitWarning)))
    return {"formula": f1, "family": family, "chi2": float(lrt.chi2), "df": int(lrt.df),
            "chi2_p_value": float(lrt.p_value), "method": outcome.method, "evidence": outcome.evidence(),
            "p_value": float(outcome.p_value), "test": outcome.as_dict(), "notes": notes}


@dataclass
class LogsAnalysis:
    """What :func:`analyze_logs` found: ``description`` (what was read), per-task ``tasks`` (one row per task: the
    verdict), ``pooled`` (task as a fixed effect), ``harness`` (the harness's own numbers, reproduced),
    ``reported`` (the numbers the harness wrote in its files), ``miller``, ``paired`` and ``mcnemar`` tables, the
    ``verdict`` lines and ``notes``."""

    description: dict
    metric: str
    adjust: str
    alpha: float
    tasks: pd.DataFrame
    pooled: dict | None
    harness: pd.DataFrame
    reported: pd.DataFrame
    miller: pd.DataFrame
    paired: pd.DataFrame
    mcnemar: pd.DataFrame
    verdict: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_summary(self) -> dict:
        """summary.json of ``vrs analyze LOGDIR``: every table as a list of records (p-values also as text, so one
        that underflowed reads ``< 1e-300``)."""
        def records(frame):
            return frame.replace({np.nan: None}).to_dict(orient="records")

        return {"kind": "evaluation logs", "read": self.description, "metric": self.metric, "alpha": self.alpha,
                "adjust": {"method": self.adjust, "description": ADJUSTMENTS[self.adjust]},
                "verdict": list(self.verdict), "tasks": records(self.tasks), "pooled": self.pooled,
                "harness": records(self.harness), "reported_by_harness": records(self.reported),
                "miller": records(self.miller), "paired": records(self.paired), "mcnemar": records(self.mcnemar),
                "mixed_model_ignores": MIXED_IGNORES, "notes": list(self.notes)}

    def text(self) -> str:
        """summary.txt: the verdict, the table of tasks and the harness numbers beside ours."""
        cols = [c for c in ("task", "n_items", "random", "method", "evidence", "p_text", "p_adjusted_text",
                            "decision")
                if c in self.tasks.columns]
        parts = [*self.verdict, "", "Every task (" + ADJUSTMENTS[self.adjust] + "):",
                 self.tasks[cols].to_string(index=False)]
        if self.pooled:
            parts.append(f"Pooled over tasks ({self.pooled['formula']}): {self.pooled['method']}, "
                         f"{self.pooled['evidence']}, p = {self.pooled['p_text']}.")
        for title, frame in (("The harness's numbers (reproduced from the per-item logs)", self.harness),
                             ("Miller (2024) error bars", self.miller), ("Paired differences", self.paired),
                             ("McNemar's test", self.mcnemar)):
            if len(frame):
                parts += ["", title + ":", frame.drop(columns=["ignores"], errors="ignore").to_string(index=False)]
        parts += ["", "What each ignores:"] + [f"- {k}: {v}" for k, v in self.ignores().items()]
        parts += [f"Note: {n}" for n in self.notes]
        return "\n".join(parts) + "\n"

    def ignores(self) -> dict:
        """{number: the sentence on the variation it ignores} for the numbers in this analysis."""
        out = {"mixed model (ours)": MIXED_IGNORES}
        for frame in (self.harness, self.miller, self.paired, self.mcnemar):
            if len(frame) and "ignores" in frame.columns:
                name = frame["harness"].iloc[0] if "harness" in frame.columns else (
                    frame["method"].iloc[0] if "method" in frame.columns else "Miller (2024)")
                out[str(name)] = str(frame["ignores"].iloc[0])
        return out

    def html(self) -> str:
        """report.html: the verdict, the table of tasks, the pooled test, the harness's numbers beside ours."""
        esc = html.escape
        fmt = {"float_format": lambda x: f"{x:.6g}", "index": False, "border": 0, "na_rep": ""}
        body = [f"<h1>Evaluation logs: {esc(self.description.get('format', ''))}</h1>",
                "<h2>What was read</h2><pre>" + esc(self.description.get("text", "")) + "</pre>",
                "<h2>Verdict</h2><ul>" + "".join(f"<li>{esc(v)}</li>" for v in self.verdict) + "</ul>",
                f"<h2>Every task</h2><p>{esc(ADJUSTMENTS[self.adjust])} across {len(self.tasks)} task(s).</p>",
                self.tasks.drop(columns=["notes"], errors="ignore").to_html(**fmt)]
        if self.pooled:
            body.append(f"<p>Pooled over tasks ({esc(self.pooled['formula'])}): {esc(self.pooled['method'])}, "
                        f"{esc(self.pooled['evidence'])}, p = {esc(self.pooled['p_text'])}.</p>")
        for title, frame in (("The harness's numbers, reproduced from the per-item logs", self.harness),
                             ("The numbers the harness wrote in its files", self.reported),
                             ("Miller (2024): standard errors and confidence intervals", self.miller),
                             ("Paired differences (Miller 2024, sec. 4.1)", self.paired),
                             ("McNemar's test (exact and mid-p)", self.mcnemar)):
            if len(frame):
                body += [f"<h2>{esc(title)}</h2>", frame.to_html(**fmt)]
        body.append("<h2>Which variation each number ignores</h2><ul>" + "".join(
            f"<li><b>{esc(k)}</b>: {esc(v)}</li>" for k, v in self.ignores().items()) + "</ul>")
        if self.notes:
            body.append("<h2>Notes</h2><ul>" + "".join(f"<li>{esc(n)}</li>" for n in self.notes) + "</ul>")
        return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>vrs analyze: evaluation logs</title>"
                "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}td,th{padding:2px 8px}"
                "</style></head><body>" + "\n".join(body) + "</body></html>\n")


def _task_row(task, spec, alpha, test=None, n_sim=1000, seed=0, items="random") -> tuple[dict, pd.DataFrame]:
    d = spec.table
    family = spec.families["score"]
    row = {"task": task, "family": family, "n_items": spec.design.n_items, "systems": spec.design.n_systems,
           "runs": bool(spec.replications), "repeats": bool(spec.repeats)}
    for s, v in d.groupby("system")["score"].mean().items():
        row[f"mean[{s}]"] = float(v)
    if spec.design.n_systems < 2:
        return {**row, "random": random_part(d, items=items), "chi2": math.nan, "df": None, "p_value": math.nan,
                "notes": "one system: nothing to compare"}, d
    t = system_lrt(d, family, test=test, n_sim=n_sim, seed=seed, items=items)
    return {**row, "random": random_part(d, items=items), "formula": t["formula"], "method": t["method"],
            "evidence": t["evidence"], "chi2": t["chi2"], "df": t["df"], "chi2_p_value": t["chi2_p_value"],
            "p_value": t["p_value"], "notes": "; ".join(t["notes"])}, d


def pooled_test(tables: dict, family: str, test: str | None = None, n_sim: int = 1000, seed: int = 0,
                items: str = "random") -> dict:
    """The pooled model over tasks: ``task`` a fixed effect, items nested in tasks (item ids ``task:item``), the
    system tested as in :func:`system_lrt` with ``fixed="task"``."""
    d = pd.concat([t.assign(task=name) for name, t in tables.items()], ignore_index=True)
    d["item"] = d["task"].astype(str) + ":" + d["item"].astype(str)
    test = system_lrt(d, family, fixed="task", test=test, n_sim=n_sim, seed=seed, items=items)
    test["p_text"] = p_text(test["p_value"])
    test["items_nested_in"] = "task"
    return test


def analyze_logs(logs, metric: str | None = None, adjust: str = "holm", alpha: float = 0.05,
                 cluster: str | None = None, baseline: str | None = None, specs: dict | None = None,
                 dropna: bool = False, test: str | None = None, n_sim: int = 1000,
                 seed: int = 0, items: str = "random") -> LogsAnalysis:
    """Analyse :class:`~vrs_helpers.evaluate.readers.EvalLogs`: per task the mixed-model LRT of the systems
    (:func:`system_lrt` on the validated :func:`task_spec`: with runs, the family's small-sample default test or
    ``test``; ``n_sim`` and ``seed`` for a parametric bootstrap; ``items`` as :func:`random_part`), p-values adjusted
    across tasks (``adjust``: ``holm`` or ``bh``, :func:`adjusted`), the pooled model (:func:`pooled_test`; when
    every task has the metric's family and there are several tasks), and beside them the harness's own numbers
    (:func:`~vrs_helpers.evaluate.harness_stats.harness_numbers`), Miller's errors per system, task and run, the paired
    difference of each system against ``baseline`` (default: the first system) per task, and McNemar's test where each
    of two systems has one run of 0/1 scores per item. ``specs``: the validated task specs when they were built already
    (the CLI validates every task before any analysis)."""
    adjust = str(adjust).lower()
    if adjust not in ADJUSTMENTS:
        raise InputError(f"adjust must be one of {', '.join(ADJUSTMENTS)}; got {adjust!r}.")
    metric = metric or logs.description.primary_metric
    notes = list(logs.description.notes)
    systems = sorted(logs.table["system"].unique())
    base = baseline or systems[0]
    if baseline is not None and baseline not in systems:   # before any fit
        raise InputError(f"baseline {baseline!r} is not a system of the logs; systems: {', '.join(systems)}.")
    specs = specs if specs is not None else validate_tasks(logs, metric, dropna=dropna)[0]
    rows, tables = [], {}
    for task, spec in specs.items():
        row, d = _task_row(task, spec, alpha, test, n_sim, seed, items)
        rows.append(row)
        tables[task] = d
    tasks = pd.DataFrame(rows)
    tasks["p_adjusted"] = adjusted(tasks["p_value"].to_numpy(dtype=float), adjust)
    tasks["p_text"] = tasks["p_value"].map(p_text)
    tasks["p_adjusted_text"] = tasks["p_adjusted"].map(p_text)
    tasks["decision"] = [("" if not np.isfinite(p) else "differ" if p < alpha else "show no significant difference")
                         for p in tasks["p_adjusted"]]
    families = {s.families["score"] for s in specs.values()}
    pooled = None
    if len(specs) > 1 and len(families) == 1 and all(s.design.n_systems > 1 for s in specs.values()):
        pooled = pooled_test(tables, families.pop(), test, n_sim, seed, items)
    elif len(specs) > 1:
        notes.append("no pooled model: the tasks' scores are of different kinds (0/1 and continuous) or a task "
                     "has one system.")
    paired, mcn = [], []
    for task in specs:
        table = logs.table[logs.table["task"] == task]
        present = sorted(table.dropna(subset=[metric])["system"].unique())
        for other in [s for s in present if s != base and base in present]:
            try:
                pd_ = paired_difference(table, other, base, metric=metric, task=task, cluster=cluster)
            except InputError as exc:
                notes.append(f"task {task}: no paired difference of {other} - {base}: {exc}")
                continue
            pr = miller_inputs(table, other, base, metric=metric, task=task)
            paired.append({"task": task, "a": other, "b": base, **pd_.to_frame().iloc[0].to_dict(),
                           "p_text": p_text(pd_.p_value), "omega2": pr["omega2"], "sigma2_a": pr["sigma2_a"],
                           "sigma2_b": pr["sigma2_b"], "ignores": IGNORES["paired"]})
        if len(present) == 2:
            try:
                m = mcnemar_test(table, present[1], present[0], metric=metric, task=task)
            except InputError as exc:
                notes.append(f"task {task}: no McNemar test ({exc})")
            else:
                mcn.append({"task": task, "a": present[1], "b": present[0], **m.to_frame().iloc[0].to_dict(),
                            "ignores": IGNORES["mcnemar"]})
    few = sorted({int(n) for s in specs.values() if s.replications for n in s.design.runs_per_system.values()})
    chi2_verdicts = "method" in tasks.columns and tasks["method"].astype(str).str.startswith("GLRT").any()
    if few and few[0] < 10 and chi2_verdicts:
        notes.append(f"with {few[0]} runs per system the chi-square reference of the LRT is liberal (it treats the "
                     "run variance as known; user guide, 'Error rates of the default tests'): read a p-value near "
                     "alpha with care, and plan more runs (vrs plan).")
    elif few:
        notes.append(f"with {few[0]} run(s) per system the verdicts use a small-sample test of the runs-random "
                     "model (the method in each task's row); the chi-square LRT (chi2, chi2_p_value) is beside it "
                     "for comparison and is liberal with few runs.")
    verdict = _verdict(tasks, pooled, adjust, alpha)
    desc = logs.description.to_dict()
    desc["text"] = logs.describe()
    return LogsAnalysis(description=desc, metric=metric, adjust=adjust, alpha=alpha, tasks=tasks, pooled=pooled,
                        harness=harness_numbers(logs, metric, cluster=cluster), reported=logs.reported.copy(),
                        miller=miller_errors(logs.table[logs.table["task"].isin(list(specs))], metric=metric,
                                             cluster=cluster),
                        paired=pd.DataFrame(paired), mcnemar=pd.DataFrame(mcn), verdict=verdict, notes=notes)


def validate_tasks(logs, metric: str | None = None, dropna: bool = False) -> tuple[dict, list]:
    """Every task's validated spec (:func:`task_spec`), before any analysis: {task: spec}, and notes (tasks without
    the metric, rows dropped). The first bad task raises, naming it."""
    metric = metric or logs.description.primary_metric
    specs, notes = {}, []
    for task in logs.description.tasks:
        if metric not in logs.description.metrics.get(task, []):
            notes.append(f"task {task} has no metric {metric!r}: not analysed (its metrics: "
                         f"{', '.join(logs.description.metrics.get(task, []))}).")
            continue
        specs[task] = task_spec(logs, task, metric, dropna=dropna)
    if not specs:
        raise InputError(f"No task has the metric {metric!r}; metrics per task: "
                         + "; ".join(f"{t}: {', '.join(m)}" for t, m in logs.description.metrics.items()))
    return specs, notes


def _verdict(tasks: pd.DataFrame, pooled, adjust: str, alpha: float) -> list:
    lines = []
    tested = tasks[tasks["p_value"].notna()]
    for _, r in tested.iterrows():
        lines.append(f"Task {r['task']}: the systems {r['decision']} ({r['method']}: {r['evidence']}, p = "
                     f"{r['p_text']}, {adjust}-adjusted p = {r['p_adjusted_text']}; random effects {r['random']}).")
    if len(tested) > 1:
        n = int((tested["decision"] == "differ").sum())
        lines.append(f"{n} of {len(tested)} tasks show a difference at alpha = {alpha:g} after "
                     f"{'Holm' if adjust == 'holm' else 'Benjamini-Hochberg'} adjustment across tasks.")
    if pooled:
        word = "differ" if pooled["p_value"] < alpha else "show no significant difference"
        lines.append(f"Pooled over tasks (task fixed, items nested in tasks): the systems {word} ({pooled['method']}: "
                     f"{pooled['evidence']}, p = {pooled['p_text']}).")
    if not lines:
        lines.append("One system: nothing to compare; the harness's numbers and the error bars are below.")
    return lines

