"""The analysis of evaluation logs (issue 29): every task of a harness run, a pooled model over the tasks, the
verdicts adjusted across tasks, and the numbers the harness itself prints beside ours.

A harness run is many benchmarks (tasks). For each task the systems are compared by a test of the mixed model of
book 4.3,

    score ~ system + (1|item) [+ (1|system:item)] [+ [(1|run) +] (1|system:run)]   against   score ~ 1 + (same),

with ``(1|system:item)`` where an item is scored more than once per system (repeats: Inspect epochs; or several
runs) and ``(1|system:run)`` where a system has several runs (seeds, few-shot draws, prompt templates): runs shift
every item together, repeats are independent draws per item (:mod:`vrs_helpers.evaluate.logs.readers.base`). Where every
run label of a task is used by two or more systems (the same seed the log records for every model), ``--runs auto``
(the default) adds ``(1|run)``: crossed runs, whose shared shift cancels in the system difference (issue 39;
:func:`vrs_helpers.book.glrt.runs_layout`); the readers give runs that nothing in the log says are shared each
system's own labels, so those stay nested. 0/1 scores
are fitted as a logistic GLMM (lme4's ``glmer``, Laplace), other scores as a linear mixed model. The likelihood
ratio test's chi-square on (systems - 1) df (lme4's ``anova(m0, m1)``) is always reported; it is the verdict's test
where no system has several runs (the items carry the replication). Where systems have runs (3-5 seeds), its
chi-square reference rejects too often, and the verdict uses the family's small-sample default of the
runs-random reading exactly as ``vrs analyze`` makes it for a score table (:func:`vrs_helpers.registry.
verdict_reading`, issue 56: the same rows give the same test and p; Kenward-Roger's F test for continuous scores, the
tests on run means at the boundary of the run variance or with unequal variances, for 0/1 scores the same tests on
the linear mixed model of the scores - a separated system keeps the GLMMs' parametric-bootstrap LRT; ``vrs analyze
--test`` chooses another; benchmarks/type_one_error.py --tasks-path measures its level). The pooled model adds
``task`` as a fixed effect with items nested in tasks (``(1|task:item)``). The per-task p-values are adjusted across
tasks by Holm (1979; the default) or Benjamini-Hochberg (1995), one table of every task's verdict.

Each task is analysed with its own metric (:mod:`vrs_helpers.evaluate.logs.task_metrics`); a task that cannot be tested
(constant, one item, one system) is a row "not testable: <reason>" and the run goes on. A task with one run and
fewer than 30 items is decided by an exact or permutation test (:mod:`vrs_helpers.evaluate.tables.small_data`), the
LRT's
chi-square beside it; with runs the runs-random reading decides whatever the items (the rule of
:func:`vrs_helpers.registry.verdict_reading`, the same for score tables). Our aggregates are checked against the
logged ones (:mod:`vrs_helpers.evaluate.logs.log_checks`), and each task's systems are ranked
(:mod:`vrs_helpers.evaluate.logs.many_tasks`: forest plots, the model x task heatmap, Friedman and Nemenyi over 5 or
more
tasks).

Every number a harness prints (:func:`~vrs_helpers.evaluate.logs.harness_stats.harness_numbers`), Miller's (2024)
clustered errors and paired difference, and McNemar's test sit beside the verdict, each with a sentence on which
variation it ignores (:data:`~vrs_helpers.evaluate.logs.harness_stats.IGNORES`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ... import mixed
from ...errors import VRSError
from ...outcomes import p_text
from ...registry import verdict_reading
from ..tables.scores import InputError
from ..tables.small_data import SMALL_IGNORES, SMALL_ITEMS, interval_table, small_test
from ..tables.spec import AnalysisSpec
from .harness_stats import IGNORES, harness_numbers, mcnemar_test, miller_errors, miller_inputs, paired_difference
from .log_checks import check_against_logs
from .many_tasks import best_and_tied, friedman_nemenyi, model_task_table, task_ranking
from .task_metrics import choose_metrics
from .untestable import nothing_compared, single_system_table, untestable_reason

ADJUSTMENTS = {"holm": "Holm (1979) step-down, family-wise error rate",
               "bh": "Benjamini-Hochberg (1995) step-up, false discovery rate"}

MIXED_IGNORES = ("nothing of the design it was given: items, system-by-item variation (with repeats or runs) and "
                 "run-to-run variation (with runs) are random effects; it generalizes over items and runs")


ACROSS = "all tasks (items pooled)"   # the leaderboard across the tasks (issue 52)
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
    """The validated :class:`~vrs_helpers.evaluate.tables.spec.AnalysisSpec` of one task's scores: response ``score``,
    system ``system``, item ``item``, the runs as ``replications=["run"]`` when a system has several, the repeats
    as ``repeats=["repeat"]`` when an item has several scores within a run. Bad data (a constant score, a single
    item, values whose squares overflow) raise :class:`~vrs_helpers.evaluate.tables.scores.InputError` naming the task,
    before any model is fitted."""
    d = logs.table[logs.table["task"] == task]
    if metric not in d.columns:
        raise InputError(f"task {task!r}: no metric {metric!r}.")
    data = d[["system", "run", "repeat", "item", metric]].rename(columns={metric: "score"})
    shared = set.intersection(*[set(g["item"]) for _, g in data.groupby("system")]) if len(data) else set()
    if len(data) and len(shared) < data["item"].nunique():
        data = data[data["item"].isin(shared)]   # the items every system has (the reader's note names the rest)
    runs = bool(len(data) and data.groupby("system")["run"].nunique().max() > 1)
    repeats = bool(len(data) and data.groupby(["system", "run", "item"]).size().max() > 1)
    spec = AnalysisSpec(data, response="score", system="system", item="item",
                        replications=["run"] if runs else [], repeats=["repeat"] if repeats else [],
                        dropna=dropna, data_label=f"task {task}")
    try:
        return spec.validated()
    except InputError as exc:
        raise type(exc)(f"task {task!r}, metric {metric!r}: {exc}") from None


def random_part(data: pd.DataFrame, item: str = "item", items: str = "random", runs: str = "auto") -> str:
    """The random effects a task's design identifies: ``(1|item)``, ``(1|system:item)`` when some (system, item)
    has several scores (repeats or runs) and ``items="random"`` (items like these; ``"fixed"``: these items, as
    ``vrs analyze --items``), ``(1|system:run)`` when some system has several runs, and ``(1|run)`` before it when
    the runs are crossed (``runs``: ``"auto"``, crossed when every run label is used by two or more systems;
    ``"crossed"``; ``"nested"``; :func:`vrs_helpers.book.glrt.runs_layout`)."""
    from ...book.glrt import runs_layout

    if items not in ("random", "fixed"):
        raise InputError(f"items must be 'random' or 'fixed' (items like these, or these items); got {items!r}.")
    terms = [f"(1|{item})"]
    if items == "random" and data.groupby(["system", item]).size().max() > 1:
        terms.append(f"(1|system:{item})")
    if "run" in data.columns and data.groupby("system")["run"].nunique().max() > 1:
        if runs_layout(data, "system", ["run"], runs) == "crossed":
            terms.append("(1|run)")
        terms.append("(1|system:run)")
    return " + ".join(terms)


def system_lrt(data: pd.DataFrame, family: str, fixed: str = "", item: str = "item", test: str | None = None,
               n_sim: int = 1000, seed: int = 0, items: str = "random", runs: str = "auto",
               settle_alpha: float | None = None) -> dict:
    """The test of the system term: ``score ~ [fixed +] system + random`` against the model without ``system``
    (:func:`random_part`); a logistic GLMM for ``family == "binomial"``, else linear mixed models.

    The chi-square likelihood ratio test (ML fits; the GLMMs' Laplace fits, as lme4's ``anova(m0, m1)``) is always
    computed (``chi2``, ``df``, ``chi2_p_value``). The verdict's test (``method``, ``evidence``, ``p_value``) is
    ``test`` (a test of :mod:`vrs_helpers.registry` that applies to the family) when given; otherwise, where a
    system has several runs (``(1|system:run)``), the runs-random reading's default test exactly as ``vrs analyze``
    makes it for a score table (:func:`vrs_helpers.registry.verdict_reading`; issue 56: the same rows, the same
    test and p): :func:`vrs_helpers.book.glrt.compare_systems` with the runs as replications - Kenward-Roger's F,
    the tests on run means where the run variance is at zero or the variances differ, the linear model of 0/1
    scores (a separated system: the GLMMs' parametric-bootstrap LRT, ``n_sim`` simulations, ``seed``,
    ``settle_alpha``); the pooled model (``fixed``) the family's small-sample test on its REML fit (continuous:
    Kenward-Roger; 0/1: the same F test on the linear model of the scores). With a few runs per system the
    chi-square reference rejects too often; without runs it is the verdict (its reference is accurate when the
    items, not a handful of runs, carry the replication). Returns formula, family, chi2, df, chi2_p_value, method,
    evidence, p_value, the outcome's numbers (``test``) and the fit warnings (singular fits)."""
    from ... import registry
    from ...book.glrt import Hypothesis, compare_systems

    rand = random_part(data, item, items, runs)
    has_runs = "(1|system:run)" in rand
    # 0/1 scores with runs, no test named, no separated system: the linear mixed model of the scores decides, as in
    # vrs analyze's runs-random reading (vrs_helpers.book.glrt._linear_probability; issue 39's type-I cells)
    linear = (family == "binomial" and has_runs and test is None
              and mixed.check_separation(data, "score", "system").empty)
    chosen = (registry.choose(None, "gaussian") if linear else
              registry.choose(test, family) if (test is not None or has_runs) else registry.get("chisq"))
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
        failed = None
        if has_runs and test is None and not fixed:
            # the table's runs-random reading, the same call (vrs_helpers.evaluate.tables.steps.significance); where its
            # fit is degenerate (e.g. two systems with the same score on every item in every run: no residual
            # variation) the chi-square LRT stays the verdict, and a note says why
            try:
                outcome = compare_systems(data, "score", "system", item, replications=["run"], family=family,
                                          n_sim=n_sim, seed=seed, items=items, runs=runs, contrasts=False,
                                          settle_alpha=settle_alpha).test
            except VRSError as exc:
                failed = (f"the runs-random test could not be computed ({exc}); the verdict is the chi-square "
                          "LRT")
        elif chosen.name != "chisq":
            as_float = data.assign(score=pd.to_numeric(data["score"]).astype(float)) if linear else data
            # the Laplace fit; the REML fit (of the 0/1 scores themselves when linear)
            full = m1 if family == "binomial" and not linear else mixed.fit(f1, as_float)
            names, kept = list(full.fixed_effects.index), set(m0.fixed_effects.index)
            cols = [i for i, n in enumerate(names) if n not in kept]     # the system columns
            L = np.zeros((len(cols), len(names)))
            L[np.arange(len(cols)), cols] = 1.0
            outcome = chosen.run(Hypothesis(f1, f0, full, L, "system", as_float, None if linear else lrt,
                                            "gaussian" if linear else family, n_sim, seed,
                                            extra={"null_fit": m0 if family == "binomial" and not linear else None}))
            if linear:
                outcome.method = f"{outcome.method} (linear model of the 0/1 scores)"
    notes = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, mixed.SingularFitWarning)))
    notes += [failed] if failed else []
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
    checked: pd.DataFrame = field(default_factory=pd.DataFrame)     # ours beside the logged aggregates
    intervals: pd.DataFrame = field(default_factory=pd.DataFrame)   # small-sample intervals of each accuracy
    task_metrics: dict = field(default_factory=dict)                # task -> the metrics it was analysed with
    rankings: dict = field(default_factory=dict)                    # task -> its ranking table (forest plot)
    grid: pd.DataFrame = field(default_factory=pd.DataFrame)        # model x task: estimate, CI, rank, letters
    friedman: dict | None = None                                    # Friedman / Nemenyi over >= 5 tasks
    pooled_skipped: str | None = None                               # why there is no pooled model (issue 52)
    single: pd.DataFrame = field(default_factory=pd.DataFrame)     # tasks run by one model: described
    across: dict = field(default_factory=dict)                      # the best model across the tasks (3+ models)
    pooled_groups: list = field(default_factory=list)               # pooled over tasks comparing the same systems

    def to_summary(self) -> dict:
        """summary.json of ``vrs analyze LOGDIR``: every table as a list of records (p-values also as text, so one
        that underflowed reads ``< 1e-300``)."""
        def records(frame):
            return frame.replace({np.nan: None}).to_dict(orient="records")

        return {"kind": "evaluation logs", "read": self.description, "metric": self.metric, "alpha": self.alpha,
                "adjust": {"method": self.adjust, "description": ADJUSTMENTS[self.adjust]},
                "verdict": list(self.verdict), "tasks": records(self.tasks), "pooled": self.pooled,
                "pooled_skipped": self.pooled_skipped, "one_model_tasks": records(self.single),
                "best_across_tasks": dict(self.across) or None, "pooled_groups": list(self.pooled_groups),
                "harness": records(self.harness), "reported_by_harness": records(self.reported),
                "miller": records(self.miller), "paired": records(self.paired), "mcnemar": records(self.mcnemar),
                "mixed_model_ignores": MIXED_IGNORES, "notes": list(self.notes),
                "checked_against_logs": records(self.checked), "intervals": records(self.intervals),
                "task_metrics": dict(self.task_metrics), "model_by_task": records(self.grid),
                "friedman": self.friedman}

    def text(self) -> str:
        """summary.txt: the verdict, the table of tasks and the harness numbers beside ours."""
        cols = [c for c in ("task", "metric", "status", "n_items", "method", "evidence", "p_text",
                            "p_adjusted_text", "decision")
                if c in self.tasks.columns]
        parts = [*self.verdict, "", "Every task (" + ADJUSTMENTS[self.adjust] + "):",
                 self.tasks[cols].to_string(index=False)]
        if self.pooled:
            parts.append(f"Pooled over tasks ({self.pooled['formula']}): {self.pooled['method']}, "
                         f"{self.pooled['evidence']}, p = {self.pooled['p_text']}.")
        for title, frame in (("Checked against the logs (ours beside the harness's aggregates)", self.checked),
                             ("The harness's numbers (reproduced from the per-item logs)", self.harness),
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
        if "method" in self.tasks.columns and self.tasks["method"].astype(str).str.contains(
                "permutation|McNemar").any():
            out["exact / permutation test (tasks with few items)"] = SMALL_IGNORES
        for frame in (self.harness, self.miller, self.paired, self.mcnemar):
            if len(frame) and "ignores" in frame.columns:
                name = frame["harness"].iloc[0] if "harness" in frame.columns else (
                    frame["method"].iloc[0] if "method" in frame.columns else "Miller (2024)")
                out[str(name)] = str(frame["ignores"].iloc[0])
        return out


def _task_row(task, metric, spec, alpha, test=None, n_sim=1000, seed=0, items="random",
              runs="auto") -> tuple[dict, pd.DataFrame]:
    d = spec.table
    family = spec.families["score"]
    row = {"task": task, "metric": metric, "status": "analysed", "family": family, "n_items": spec.design.n_items,
           "systems": spec.design.n_systems, "runs": bool(spec.replications), "repeats": bool(spec.repeats)}
    for s, v in d.groupby("system")["score"].mean().items():
        row[f"mean[{s}]"] = float(v)
    # the one rule of tables and logs (vrs_helpers.registry.verdict_reading): with runs the runs-random reading
    # whatever the items; one run and few items: an exact test (the chi-square LRT only beside it)
    small = verdict_reading(bool(spec.replications), spec.design.n_items, test) == "exact"
    too_few = untestable_reason(spec.design.n_items, spec.design.n_systems, alpha) if small else None
    if too_few:   # no data could give p < alpha: described, never a p-value verdict (issue 52)
        return {**row, "status": f"not testable: {too_few}", "random": "", "formula": "", "method": "",
                "evidence": "", "p_value": math.nan, "notes": too_few}, d
    t = system_lrt(d, family, test="chisq" if small else test, n_sim=n_sim, seed=seed, items=items, runs=runs,
                   settle_alpha=alpha)
    out = {**row, "random": random_part(d, items=items, runs=runs), "formula": t["formula"], "method": t["method"],
           "evidence": t["evidence"], "chi2": t["chi2"], "df": t["df"], "chi2_p_value": t["chi2_p_value"],
           "p_value": t["p_value"], "notes": "; ".join(t["notes"])}
    if small:   # few items: an exact or permutation test decides
        exact = small_test(d, seed=seed)
        out.update(method=exact["method"], evidence=exact["evidence"], p_value=exact["p_value"],
                   notes="; ".join(filter(None, [out["notes"], f"{spec.design.n_items} items (< {SMALL_ITEMS}): "
                                                 "the chi-square reference of the LRT does not hold; the verdict is "
                                                 f"the {exact['method']} (the LRT's chi2 beside it)"])))
    return out, d


def pooling_obstacle(tables: dict, families: set) -> str | None:
    """Why the pooled model over the tasks (``tables``: {(task, metric): its validated rows}) is not identified,
    or None when it is: the tasks' scores must be of one kind (0/1 or continuous), and every task must compare the
    same systems - where tasks compare different systems (lm-eval logs of gsm8k for two models and of three MMLU
    subjects for two others) the system effect is confounded with the task effect (the design ``task + system`` is
    rank deficient), and no pooled comparison of the systems exists."""
    if len(families) > 1:
        return "the tasks' scores are of different kinds (0/1 and continuous)"
    systems = {(k[0] if isinstance(k, tuple) else k): tuple(sorted(map(str, d["system"].unique())))
               for k, d in tables.items()}
    if len(set(systems.values())) > 1:
        shown = "; ".join(f"{t}: {', '.join(s)}" for t, s in list(systems.items())[:6])
        more = f"; and {len(systems) - 6} more" if len(systems) > 6 else ""
        return ("the tasks compare different systems (" + shown + more + "), so a system effect pooled over them is "
                "confounded with the task effect (not identified); the pooled model needs the same systems on every "
                "task")
    return None


def pooled_by_systems(tables: dict, specs: dict, test, n_sim, seed, items, runs, notes: list) -> list:
    """Where the tasks compare different systems, the pooled model of each group of 2 or more tasks that compare
    the same systems with scores of one kind (identified within the group; :func:`pooled_test`): [{tasks, systems,
    **pooled_test}]; a group whose fit fails is a note."""
    groups: dict = {}
    for k, d in tables.items():
        key = (tuple(sorted(map(str, d["system"].unique()))), specs[k].families["score"])
        groups.setdefault(key, []).append(k)
    out = []
    for (systems, family), keys in groups.items():
        if len(keys) < 2:
            continue
        names = [k[0] for k in keys]
        try:
            r = pooled_test({k: tables[k] for k in keys}, family, test, n_sim, seed, items, runs)
        except (mixed.MixedModelError, np.linalg.LinAlgError) as exc:
            notes.append(f"no pooled model over {', '.join(names)} either: {exc}")
            continue
        out.append({"tasks": names, "systems": list(systems), **r})
    return out


def pooled_test(tables: dict, family: str, test: str | None = None, n_sim: int = 1000, seed: int = 0,
                items: str = "random", runs: str = "auto") -> dict:
    """The pooled model over tasks: ``task`` a fixed effect, items nested in tasks (item ids ``task:item``), the
    system tested as in :func:`system_lrt` with ``fixed="task"``. With one run and fewer than
    :data:`~vrs_helpers.evaluate.tables.small_data.SMALL_ITEMS` items in all, the verdict is the exact or permutation
    test
    of :func:`~vrs_helpers.evaluate.tables.small_data.small_test` on the items of every task."""
    d = pd.concat([t.assign(task=name if isinstance(name, str) else name[0]) for name, t in tables.items()],
                  ignore_index=True)
    d["item"] = d["task"].astype(str) + ":" + d["item"].astype(str)
    several = bool(d.groupby("system")["run"].nunique().max() > 1) if "run" in d.columns else False
    small = verdict_reading(several, d["item"].nunique(), test) == "exact"
    out = system_lrt(d, family, fixed="task", test="chisq" if small else test, n_sim=n_sim, seed=seed, items=items,
                     runs=runs)
    if small:
        exact = small_test(d, seed=seed)
        out.update(method=exact["method"], evidence=exact["evidence"], p_value=exact["p_value"])
    out["p_text"] = p_text(out["p_value"])
    out["items_nested_in"] = "task"
    return out


def _not_analysed(skipped) -> list:
    return [{"task": e["task"], "metric": e.get("metric", ""), "status": e["status"], "decision": e["status"],
             "notes": e["reason"], "p_value": math.nan,
             **({"n_items": int(e["table"]["item"].nunique()), "systems": int(e["table"]["system"].nunique())}
                if e.get("table") is not None else {})} for e in skipped]


def analyze_logs(logs, metric=None, adjust: str = "holm", alpha: float = 0.05,
                 cluster: str | None = None, baseline: str | None = None, specs: dict | None = None,
                 dropna: bool = False, test: str | None = None, n_sim: int = 1000,
                 seed: int = 0, items: str = "random", skipped: list | None = None,
                 runs: str = "auto") -> LogsAnalysis:
    """Analyse :class:`~vrs_helpers.evaluate.logs.readers.EvalLogs`, every task with its own metric
    (:func:`~vrs_helpers.evaluate.logs.task_metrics.choose_metrics`; ``metric``: None, a metric, or a list of metrics
    and
    ``task=metric`` entries): per task the mixed-model LRT of the systems (:func:`system_lrt` on the validated
    :func:`task_spec`: with runs, the family's small-sample default test or ``test``; ``n_sim`` and ``seed`` for a
    parametric bootstrap; ``items`` and ``runs`` as :func:`random_part`; with fewer than 30 items the exact or
    permutation test of :mod:`~vrs_helpers.evaluate.tables.small_data`), p-values adjusted across the tasks tested
    (``adjust``:
    ``holm`` or ``bh``, :func:`adjusted`), the pooled model (:func:`pooled_test`; when every task has the same family
    and there are several tasks), a row for every task not analysed or not testable, and beside them the harness's own
    numbers (:func:`~vrs_helpers.evaluate.logs.harness_stats.harness_numbers`) checked against the logged ones
    (:func:`~vrs_helpers.evaluate.logs.log_checks.check_against_logs`), small-sample intervals of each accuracy,
    Miller's
    errors per system, task and run, the paired difference of each system against ``baseline`` (default: the first
    system) per task, and McNemar's test where each of two systems has one run of 0/1 scores per item. ``specs`` and
    ``skipped``: :func:`validate_tasks`' result when it was built already (the CLI validates every task before any
    analysis)."""
    adjust = str(adjust).lower()
    if adjust not in ADJUSTMENTS:
        raise InputError(f"adjust must be one of {', '.join(ADJUSTMENTS)}; got {adjust!r}.")
    from ...book.glrt import RUNS

    runs = str(runs or "auto").strip().lower()
    if runs not in RUNS:
        raise InputError(f"runs must be {', '.join(RUNS)} (run labels shared by the systems, or each system's own); "
                         f"got {runs!r}.")
    notes = list(logs.description.notes)
    systems = sorted(logs.table["system"].unique())
    base = baseline or systems[0]
    if baseline is not None and baseline not in systems:   # before any fit
        raise InputError(f"baseline {baseline!r} is not a system of the logs; systems: {', '.join(systems)}.")
    if specs is None:
        specs, skipped = validate_tasks(logs, metric, dropna=dropna)
    skipped = list(skipped or [])
    rows, tables = [], {}
    for (task, m), spec in specs.items():
        try:
            row, d = _task_row(task, m, spec, alpha, test, n_sim, seed, items, runs)
        except (mixed.MixedModelError, np.linalg.LinAlgError) as exc:   # a fit that fails never ends the run
            reason = f"its mixed model could not be fitted ({exc})"
            skipped.append({"task": task, "metric": m, "reason": reason, "status": f"not testable: {reason}"})
            continue
        rows.append(row)
        tables[(task, m)] = d
    crossed = list(dict.fromkeys(r["task"] for r in rows if "(1|run)" in r["random"].split(" + ")))
    if crossed:
        notes.append(f"runs crossed in {', '.join(crossed)}: every run label (the same seed for every system) is "
                     "shared by the systems, (1|run) + (1|system:run); a shift shared by all systems cancels in the "
                     "difference (--runs nested fits each system's runs as its own)")
    tasks = pd.DataFrame(rows + _not_analysed(skipped))
    tasks["p_adjusted"] = adjusted(tasks["p_value"].to_numpy(dtype=float), adjust)
    tasks["p_text"] = tasks["p_value"].map(p_text)
    tasks["p_adjusted_text"] = tasks["p_adjusted"].map(p_text)
    status = tasks["status"].fillna("").astype(str).tolist()
    tasks["decision"] = [(d if not np.isfinite(p) else "differ" if p < alpha else "show no significant difference")
                         for p, d in zip(tasks["p_adjusted"], status, strict=True)]
    firsts = {}
    for (task, m) in specs:   # the pooled model: the first metric of each task
        firsts.setdefault(task, (task, m))
    firsts = {t: k for t, k in firsts.items() if k in tables}   # the tasks tested
    pooled, pooled_skipped, groups = None, None, []
    if len(firsts) > 1:
        pooled_skipped = pooling_obstacle({k: tables[k] for k in firsts.values()},
                                          {specs[k].families["score"] for k in firsts.values()})
        if pooled_skipped is None:   # few items in all and one run: the exact test must be able to reach alpha
            n_all = sum(tables[k]["item"].nunique() for k in firsts.values())
            k_sys = tables[next(iter(firsts.values()))]["system"].nunique()
            runs_any = any(bool(specs[k].replications) for k in firsts.values())
            few = verdict_reading(runs_any, n_all, test) == "exact" and untestable_reason(n_all, k_sys, alpha)
            pooled_skipped = f"not testable: the {few}" if few else None
        if pooled_skipped is None:
            try:
                pooled = pooled_test({k: tables[k] for k in firsts.values()}, specs[next(iter(firsts.values()))]
                                     .families["score"], test, n_sim, seed, items, runs)
            except (mixed.MixedModelError, np.linalg.LinAlgError) as exc:   # the user gave no terms (issue 52)
                pooled_skipped = f"the pooled model could not be fitted ({exc})"
        if pooled_skipped:
            notes.append(f"no pooled model over the tasks: {pooled_skipped}; every task's verdict above stands on "
                         "its own.")
        if pooled_skipped and pooled_skipped.startswith("the tasks compare different systems"):
            groups = pooled_by_systems({k: tables[k] for k in firsts.values()}, specs, test, n_sim, seed, items, runs,
                                       notes)
    unpaired: list = []   # tasks of 3+ models without --baseline: no paired differences against the first model
    singles = {(e["task"], e["metric"]): e["table"] for e in skipped if e.get("table") is not None}
    single = single_system_table(singles, logs.reported) if singles else pd.DataFrame()
    paired, mcn, harness, intervals = [], [], [], []
    for (task, m) in [*specs, *singles]:
        table = logs.table[logs.table["task"] == task]
        sub = replace(logs, table=table)
        harness.append(harness_numbers(sub, m, cluster=cluster).assign(metric=m))
        intervals.append(interval_table(table, m))
        if (task, m) in singles:
            continue
        present = sorted(table.dropna(subset=[m])["system"].unique())
        if baseline is None and len(present) > 2:   # 3+ models: a baseline only when given (issue 52)
            unpaired.append(task)
            present_pairs = []
        else:
            present_pairs = [s for s in present if s != base and base in present]
        for other in present_pairs:
            try:
                pd_ = paired_difference(table, other, base, metric=m, task=task, cluster=cluster)
            except InputError as exc:
                notes.append(f"task {task}: no paired difference of {other} - {base}: {exc}")
                continue
            pr = miller_inputs(table, other, base, metric=m, task=task)
            paired.append({"task": task, "metric": m, "a": other, "b": base, **pd_.to_frame().iloc[0].to_dict(),
                           "p_text": p_text(pd_.p_value), "omega2": pr["omega2"], "sigma2_a": pr["sigma2_a"],
                           "sigma2_b": pr["sigma2_b"], "ignores": IGNORES["paired"]})
        if len(present) == 2:
            try:
                mc = mcnemar_test(table, present[1], present[0], metric=m, task=task)
            except InputError as exc:
                notes.append(f"task {task}: no McNemar test ({exc})")
            else:
                mcn.append({"task": task, "metric": m, "a": present[1], "b": present[0],
                            **mc.to_frame().iloc[0].to_dict(), "ignores": IGNORES["mcnemar"]})
    if unpaired:
        notes.append(f"no paired differences against a baseline in {', '.join(dict.fromkeys(unpaired))} (3 or more "
                     "models, no --baseline): every pair is compared in the task's leaderboard; --baseline NAME adds "
                     "each model's paired difference from NAME.")
    harness = pd.concat(harness, ignore_index=True) if harness else pd.DataFrame()
    checked = check_against_logs(harness, logs.reported, logs.table) if len(harness) else pd.DataFrame()
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
    rankings, best = {}, {}
    several = len({t for t, _ in specs}) < len(specs)
    for (task, m), d in tables.items():
        rankings[f"{task} ({m})" if several else task] = task_ranking(d, alpha, seed)
        best[(task, m)] = best_and_tied(rankings[f"{task} ({m})" if several else task])
        board = rankings[f"{task} ({m})" if several else task]
        best[(task, m)]["each"] = "; ".join(f"{r['system']} {r['estimate']:.3g} [{r['ci_low']:.3g}, "
                                            f"{r['ci_high']:.3g}]" for _, r in board.iterrows())
    if any(v.get("best") for v in best.values()):   # 3+ systems: the best model and those tied with it
        tasks["best"] = [best.get((t, m), {}).get("best") for t, m in zip(tasks["task"], tasks["metric"],
                                                                          strict=True)]
        tasks["tied_with_best"] = [", ".join(best.get((t, m), {}).get("tied", [])) or None
                                   for t, m in zip(tasks["task"], tasks["metric"], strict=True)]
    verdict = _verdict(tasks, pooled, adjust, alpha, best)
    for g in groups:   # tasks comparing the same systems, pooled among themselves (issue 52)
        word = "differ" if g["p_value"] < alpha else "show no significant difference"
        verdict.append(f"Pooled over {', '.join(g['tasks'])} (the tasks comparing {', '.join(g['systems'])}; task "
                       f"fixed, items nested in tasks): the systems {word} ({g['method']}: {g['evidence']}, p = "
                       f"{g['p_text']}).")
    if len(single) and not any(np.isfinite(r["p_value"]) for r in rows):
        verdict.insert(0, nothing_compared(single))
    grid = model_task_table(rankings)
    friedman = friedman_nemenyi(grid.pivot(index="task", columns="system", values="estimate"), alpha) \
        if len(grid) else None
    if friedman:
        word = "the systems' ranks differ" if friedman["p_value"] < alpha else "no evidence that the ranks differ"
        verdict.append(f"Across {friedman['n_tasks']} tasks by rank (Friedman, Demsar 2006): {word} (chi2 = "
                       f"{friedman['chi2']:.3g}, p = {p_text(friedman['p_value'])}); Nemenyi critical difference "
                       f"of the mean ranks {friedman['critical_difference']:.3g}.")
    across = {}
    if pooled is not None and len(firsts) > 1:   # the same systems on every task: the best across them (issue 52)
        items = pd.concat([tables[k].assign(item=f"{k[0]}:" + tables[k]["item"].astype(str)) for k in firsts.values()],
                          ignore_index=True)
        board = task_ranking(items, alpha, seed)
        across = best_and_tied(board)
        if across:
            rankings[ACROSS] = board
            across["sentence"] = across["sentence"].replace("Holm within the task", "Holm over the pairs")
            verdict.append(f"Across the {len(firsts)} tasks (their items pooled, each item once): {across['sentence']}")
    desc = logs.description.to_dict()
    desc["text"] = logs.describe()
    metrics = list(dict.fromkeys(m for _, m in [*specs, *singles]))
    miller = pd.concat([miller_errors(logs.table[logs.table["task"] == t], metric=m, cluster=cluster).assign(metric=m)
                        for t, m in [*specs, *singles]], ignore_index=True) if specs or singles else pd.DataFrame()
    return LogsAnalysis(description=desc, metric=metrics[0] if len(metrics) == 1 else ", ".join(metrics),
                        adjust=adjust, alpha=alpha, tasks=tasks, pooled=pooled, harness=harness,
                        reported=logs.reported.copy(), miller=miller, paired=pd.DataFrame(paired),
                        mcnemar=pd.DataFrame(mcn), verdict=verdict, notes=notes, checked=checked,
                        intervals=pd.concat(intervals, ignore_index=True) if intervals else pd.DataFrame(),
                        task_metrics={t: [mm for tt, mm in specs if tt == t] for t, _ in specs},
                        rankings=rankings, grid=grid, friedman=friedman, pooled_skipped=pooled_skipped,
                        single=single, across=across, pooled_groups=groups)


def read_logs(spec, echo=None):
    """The logs of a :class:`~vrs_helpers.evaluate.tables.spec.LogsSpec` read
    (:func:`~vrs_helpers.evaluate.logs.readers.
    load_eval_logs`) and every task validated with its own metric (:func:`validate_tasks`) before any analysis:
    (logs, specs, skipped). ``echo``: called with the logs before the tasks are validated (so a run that fails
    validation still says what it read). The baseline must be a system of the logs."""
    from .readers import load_eval_logs

    logs = load_eval_logs(spec.logs, format=spec.format, system=spec.system,
                          item_fields=[spec.cluster] if spec.cluster else ())
    if echo is not None:
        echo(logs)
    if spec.baseline is not None and spec.baseline not in logs.description.systems:
        raise InputError(f"--baseline {spec.baseline!r} is not a system of the logs; systems: "
                         f"{', '.join(logs.description.systems)}.")
    found, skipped = validate_tasks(logs, list(spec.metric) or None, dropna=spec.dropna)
    return logs, found, skipped


def run_logs(spec, read=None) -> LogsAnalysis:
    """:func:`analyze_logs` of a :class:`~vrs_helpers.evaluate.tables.spec.LogsSpec` (``read``: :func:`read_logs`'
    result
    when the logs were read already), with a note per task whose rows with a missing score were dropped."""
    logs, found, skipped = read if read is not None else read_logs(spec)
    result = analyze_logs(logs, metric=list(spec.metric) or None, adjust=spec.adjust, alpha=spec.alpha,
                          cluster=spec.cluster, baseline=spec.baseline, specs=found, test=spec.test,
                          n_sim=spec.n_sim, seed=spec.seed, items=spec.items, skipped=skipped, runs=spec.runs)
    for (task, m), s in found.items():
        if s.design.n_dropped_nan:
            result.notes.append(f"task {task} ({m}): {s.design.n_dropped_nan} rows with a missing score dropped "
                                "(--dropna).")
    return result


DEGENERATE = ("constant", "single item", "single value", "no rows", "one item", "nothing to compare")


def validate_tasks(logs, metric=None, dropna: bool = False) -> tuple[dict, list]:
    """Every task's validated spec (:func:`task_spec`) with its own metric
    (:func:`~vrs_helpers.evaluate.logs.task_metrics.choose_metrics`), before any analysis: ({(task, metric): spec},
    [{task, metric, status, reason}] of the tasks not analysed - no such metric, no accuracy-like metric - or not
    testable - a constant score, a single item, a single system). Missing scores (without ``dropna``) raise, naming
    the task; so does a run in which no task is testable."""
    chosen, skipped = choose_metrics(logs.description, metric)
    skipped = [{**e, "status": "not analysed: " + e["reason"]} for e in skipped]
    specs = {}
    for task, metrics in chosen.items():
        for m in metrics:
            try:
                spec = task_spec(logs, task, m, dropna=dropna)
            except InputError as exc:
                if "missing value" in str(exc) or not any(w in str(exc) for w in DEGENERATE):
                    raise
                reason = str(exc).split(": ", 1)[1] if str(exc).startswith("task ") else str(exc)
                skipped.append({"task": task, "metric": m, "reason": reason, "status": f"not testable: {reason}"})
                continue
            if spec.design.n_systems < 2:
                only = ", ".join(sorted(spec.table["system"].unique()))
                reason = f"one system ({only}): nothing to compare"
                skipped.append({"task": task, "metric": m, "reason": reason, "status": f"not testable: {reason}",
                                "table": spec.table})
                continue
            specs[(task, m)] = spec
    if not specs and not any("table" in e for e in skipped):   # one model per task: described (issue 52)
        raise InputError("No task is testable: " + "; ".join(f"task {e['task']!r}: {e['status']}" for e in skipped)
                         + ".")
    return specs, skipped


def skipped_lines(skipped) -> list:
    """One console line per task not analysed or not testable."""
    return [f"Task {e['task']}" + (f" ({e['metric']})" if e.get("metric") else "") + f": {e['status']}."
            for e in skipped]


def _verdict(tasks: pd.DataFrame, pooled, adjust: str, alpha: float, best: dict | None = None) -> list:
    lines = []
    tested = tasks[tasks["p_value"].notna()]
    several = tested["task"].duplicated(keep=False)
    for (_, r), dup in zip(tested.iterrows(), several, strict=True):
        label = f"Task {r['task']}" + (f" ({r['metric']})" if dup else "")
        model = "" if ("permutation" in str(r["method"]) or "McNemar" in str(r["method"])) else \
            f"; random effects {r['random']}"
        ranked = (best or {}).get((r["task"], r["metric"]), {}).get("sentence", "")
        lines.append(f"{label}: the systems {r['decision']} ({r['method']}: {r['evidence']}, p = "
                     f"{r['p_text']}, {adjust}-adjusted p = {r['p_adjusted_text']}{model})."
                     + (f" {ranked}" if ranked else ""))
    if len(tested) > 1:
        n = int((tested["decision"] == "differ").sum())
        lines.append(f"{n} of {len(tested)} tests show a difference at alpha = {alpha:g} after "
                     f"{'Holm' if adjust == 'holm' else 'Benjamini-Hochberg'} adjustment across tasks.")
    if pooled:
        word = "differ" if pooled["p_value"] < alpha else "show no significant difference"
        lines.append(f"Pooled over tasks (task fixed, items nested in tasks): the systems {word} ({pooled['method']}: "
                     f"{pooled['evidence']}, p = {pooled['p_text']}).")
    for _, r in tasks[tasks["p_value"].isna()].iterrows():
        each = (best or {}).get((r["task"], r["metric"]), {}).get("each", "")
        lines.append(f"Task {r['task']}" + (f" ({r['metric']})" if r.get("metric") else "") + f": {r['status']}."
                     + (f" Each model: {each}." if each else ""))
    return lines
