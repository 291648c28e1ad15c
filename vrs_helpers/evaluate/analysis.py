"""Inferential reproducibility on your own evaluation results (workbook 07, ``vrs analyze``).

Per-item scores of one or more systems over several training runs (random seeds, meta-parameter settings) get the
analyses of the book and of Hagmann, Meier & Riezler, *Towards Inferential Reproducibility of Machine Learning
Research* (ICLR 2023):

- **significance** (book 4.3; paper eq. 3/4): a GLRT of ``response ~ system + (1|item)`` against
  ``response ~ 1 + (1|item)`` (ML), the runs being replications clustered by item; and the same test with a
  random intercept per run of each system, ``+ (1|system:R)`` for every replication column R. The two readings
  can disagree: the first asks whether the systems differ on these runs, the second whether they differ beyond
  run-to-run variation. Both are reported, with a warning when they disagree;
- **conditional on data properties** (paper eq. 6/7): ``response ~ system * P + (1|item)`` against
  ``response ~ P + (1|item)``, a numeric property as a slope, a categorical one per level;
- Tukey-adjusted pairwise contrasts with effect sizes (contrast / residual SD) and the classic paired bootstrap and
  permutation tests (Algorithms 4.1/4.2) on per-item means over runs (they ignore the run variance);
- **reliability** (book 3.3, Definition 3.2): per system, the variance components of
  ``response ~ 1 + (1|item) + (1|R)...`` (REML), the absolute reliability coefficient phi of the item means over
  the observed runs, and a decision study: how many runs would make phi >= 0.8;
- **what NLP users already run** (:mod:`vrs_helpers.evaluate.tables.readings`): Almost Stochastic Order in both
directions
  on the per-run means of each system against the baseline (deepsig's definition and recommended threshold eps_min <
  0.2), the expected best of n runs with a bootstrap interval (Dodge et al. 2019), every reading in one table and
  one sentence per disagreement saying which source of variation each reading ignores;
- **several metrics** (``response=[...]``): each analysed as above, the system verdicts Holm-corrected across the
  metrics (:mod:`vrs_helpers.evaluate.tables.metrics`).

:func:`analyze` runs an :class:`~vrs_helpers.evaluate.tables.spec.AnalysisSpec`, validated once, through the named
steps of
:mod:`vrs_helpers.evaluate.tables.steps`; :class:`OwnAnalysis` holds one response's result and ``to_summary()`` is
``summary.json``, each test stated by its outcome's ``as_dict()`` (:mod:`vrs_helpers.outcomes`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import registry
from .presentation.result import rounded  # noqa: F401 - summary.json's numbers
from .tables.metrics import MetricsAnalysis
from .tables.readings import readings_frame
from .tables.scores import InputError
from .tables.spec import AnalysisSpec, LogsSpec, connected
from .tables.steps import (
    CONCURRENT,
    STEPS,
    prepare,
    run_table,
)  # noqa: F401 - the public names

#: bad input for :func:`analyze` (the message names the column or value and what to do): the one error type of the
#: spec's validation (:class:`vrs_helpers.evaluate.tables.scores.InputError`)
AnalysisError = InputError


def _random_dict(comparison) -> dict | None:
    """The runs-random reading in summary.json: the model (``formula``; ``items``: "random" when it has the
    system-by-item term; ``runs``: "crossed" or "nested", issue 39), the test used (its outcome's ``as_dict()``: by
    default the F test with Kenward-Roger's df, stated at 4 significant digits; for binary scores the
    parametric-bootstrap LRT) under ``test``, the chi-square LRT beside it under ``lrt``."""
    if comparison is None:
        return None
    test, lrt = comparison.test, comparison.glrt
    model = {"formula": comparison.formula, "items": "random" if comparison.system_item else "fixed",
             "runs": getattr(comparison, "runs", "nested"),
             "runs_models": list(getattr(comparison, "runs_models", ()) or [getattr(comparison, "runs", "nested")])}
    if test is None or test is lrt:
        return {"test": registry.get("chisq").method, **lrt.as_dict(), "lrt": lrt.as_dict(), **model}
    return {"test": test.method, **test.as_dict(), "lrt": lrt.as_dict(), **model}


@dataclass
class OwnAnalysis:
    """The result of :func:`analyze`; ``to_summary()`` is the JSON contract of ``vrs analyze`` (summary.json)."""

    response: str
    system: str
    item: str
    replications: list
    properties: list
    systems: list
    alpha: float
    runs: pd.DataFrame = field(repr=False)                    # per system and run: mean, SD, CI of the mean
    comparison: object = field(default=None, repr=False)      # SystemComparison, runs as replications
    comparison_random: object = field(default=None, repr=False)  # SystemComparison with (1|system:R)
    conditional: dict = field(default_factory=dict, repr=False)  # property -> SystemComparison (ICLR eq. 6/7)
    interactions: dict = field(default_factory=dict, repr=False)  # property -> test of system + P vs system * P
    paired: pd.DataFrame | None = field(default=None, repr=False)  # bootstrap / permutation vs the baseline
    variance_components: dict = field(default_factory=dict, repr=False)  # system -> variance table
    reliability: dict = field(default_factory=dict, repr=False)  # system -> PhiResult
    decision: dict = field(default_factory=dict, repr=False)  # system -> decision study frame
    runs_needed: dict = field(default_factory=dict)  # system -> {replication column: levels for phi >= target}
    verdict: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    higher_is_better: bool = True                            # the direction of "better" for ASO and best of n
    aso: dict = field(default_factory=dict, repr=False)      # system -> readings.ASOReading against the baseline
    expected_max: dict = field(default_factory=dict, repr=False)  # system -> readings.ExpectedBest
    disagreements: list = field(default_factory=list)        # one sentence per pair of readings that disagree
    family: str = "gaussian"                                 # "binomial": logistic GLMMs, latent-scale phi
    power: dict = field(default_factory=dict)                # power planning of the runs-random test (add_power)
    answer: str | None = None                                # one sentence: the question answered (steps.answer)
    separated: dict = field(default_factory=dict)            # system -> "all correct" / "all wrong" (binary)
    fit_notes: list = field(default_factory=list)            # boundary estimates, failed simulations, non-convergence
    ranking: pd.DataFrame | None = field(default=None, repr=False)  # k >= 3: one row per system (steps.rank)
    judge: object = field(default=None, repr=False)          # judged.JudgeAnalysis: the judge corrected (--human)
    exact: object = None   # one run, < 30 items: the exact / permutation test that answers (registry.verdict_reading)

    @property
    def glrt(self):
        return None if self.comparison is None else self.comparison.glrt

    @property
    def glrt_replications_random(self):
        return None if self.comparison_random is None else self.comparison_random.glrt

    @property
    def random_test(self):
        """The test of the runs-random reading: the small-sample test chosen by ``analyze(test=...)`` (default the F
        test with Kenward-Roger's df), the chi-square GLRT with ``test="chisq"``, or None."""
        return None if self.comparison_random is None else self.comparison_random.test

    @property
    def readings(self) -> pd.DataFrame:
        """Every reading in one table (:func:`vrs_helpers.evaluate.tables.readings.readings_frame`): the verdict box."""
        return readings_frame(self)

    @property
    def disagree(self) -> bool:
        """True when the two significance readings reach different conclusions at ``alpha`` (the runs-random
        reading by its small-sample test)."""
        if self.glrt is None or self.random_test is None:
            return False
        return (self.glrt.p_value < self.alpha) != (self.random_test.p_value < self.alpha)

    def to_summary(self) -> dict:
        vc = {s: {str(k): float(v) for k, v in t["variance"].items()} for s, t in self.variance_components.items()}
        return {
            "answer": self.answer,
            "response": self.response, "system": self.system, "item": self.item,
            "replications": list(self.replications), "properties": list(self.properties),
            "systems": list(map(str, self.systems)), "alpha": self.alpha,
            "glrt": None if self.glrt is None else self.glrt.as_dict(),
            "exact": None if self.exact is None else {"test": self.exact.method, **self.exact.as_dict()},
            "glrt_replications_random": _random_dict(self.comparison_random),
            "readings_disagree": self.disagree,
            "conditional": {p: c.glrt.as_dict() for p, c in self.conditional.items()},
            "interaction": {p: {"test": t.method, **t.as_dict()} for p, t in self.interactions.items()},
            "conditional_contrasts": {p: (c.slopes if c.slopes is not None else c.contrasts)
                                      .replace({np.nan: None}).to_dict("records")
                                      for p, c in self.conditional.items()},
            "contrasts": ([] if self.comparison is None else
                          self.comparison.contrasts.replace({np.nan: None}).to_dict("records")),
            "paired_resampling": [] if self.paired is None else self.paired.to_dict("records"),
            "variance_components": vc,
            "reliability": {s: {"phi": float(r.phi), "interpretation": r.interpretation,
                                "runs": {k: float(v) for k, v in r.n.items()},
                                "runs_for_phi_0.8": self.runs_needed.get(s)}
                            for s, r in self.reliability.items()},
            "family": self.family,
            "power": self.power or None,
            "better": "higher" if self.higher_is_better else "lower",
            "aso": {s: a.to_dict() for s, a in self.aso.items()},
            "expected_max": {s: e.to_dict() for s, e in self.expected_max.items()},
            "readings": self.readings.drop(columns="kind").to_dict("records"),
            "disagreements": list(self.disagreements),
            "verdict": list(self.verdict), "notes": list(self.notes),
            "separation": dict(self.separated), "fit_notes": list(self.fit_notes),
            "ranking": (None if self.ranking is None else
                        self.ranking.drop(columns=["method", "ci"], errors="ignore").replace(
                            {np.nan: None}).to_dict("records")),
            "ranking_ci": None if self.ranking is None or "ci" not in self.ranking else str(self.ranking["ci"].iloc[0]),
            "ranking_method": None if self.ranking is None else str(self.ranking["method"].iloc[0]),
            "pairs": ([] if self.comparison_random is None else
                      self.comparison_random.contrasts.replace({np.nan: None}).to_dict("records")),
            "judge": None if self.judge is None else self.judge.to_summary(),
        }

    def to_frame(self) -> pd.DataFrame:
        """The tests as one table (test, statistic, df, p_value); df as the test states it (an F test's pair as
        "(numerator, denominator)")."""
        def row(name, t):
            return {"test": name, "statistic": float(t.statistic), "df": t.df_text(), "p_value": float(t.p_value)}

        rows = []
        if self.glrt is not None:
            rows.append(row("GLRT, runs as replications", self.glrt))
        if self.random_test is not None and self.random_test is not self.glrt_replications_random:
            rows.append(row(f"{self.random_test.method}, runs as a random effect", self.random_test))
        if self.glrt_replications_random is not None:
            rows.append(row("GLRT chi-square, runs as a random effect (large-sample)",
                            self.glrt_replications_random))
        for p, c in self.conditional.items():
            rows.append(row(f"GLRT, system and system x {p} vs {p} (eq. 6/7)", c.glrt))
        for p, t in self.interactions.items():
            rows.append(row(f"{t.method}, system + {p} vs system x {p}", t))
        return pd.DataFrame(rows, columns=["test", "statistic", "df", "p_value"])

    def __repr__(self) -> str:
        g = "" if self.glrt is None else f", GLRT p={self.glrt.p_value:.3g}"
        r = "" if self.glrt_replications_random is None else \
            f", with run variance p={self.glrt_replications_random.p_value:.3g}"
        return (f"OwnAnalysis({self.response!r} of {len(self.systems)} system(s) over items {self.item!r}, "
                f"replications {self.replications}{g}{r})")


def summary_json(result) -> str:
    """``summary.json`` of an analysis (a :class:`~vrs_helpers.evaluate.presentation.result.Result`)."""
    return result.to_json()


def summary_text(result) -> str:
    """``summary.txt``: the warnings, the answer, the verdict and the disagreements the answer depends on
    (:func:`vrs_helpers.evaluate.presentation.render.render` as text)."""
    from .presentation.render import render

    return render(result, "summary")


def write_summary(result, path, text_path=None) -> None:
    """Write :func:`summary_json` to ``path`` (and :func:`summary_text` to ``text_path``), each atomically: a
    temporary file beside it, then renamed."""
    import os
    from pathlib import Path

    for target, content in [(path, summary_json(result)), (text_path, summary_text(result) if text_path else None)]:
        if target is None:
            continue
        target = Path(target)
        tmp = target.with_name(f".{target.name}.partial")
        tmp.write_text(content, encoding="utf-8")
        os.replace(tmp, target)


def analyze(data, response=None, system: str | None = None, item: str | None = None, replications=(),
            properties=(), baseline: str | None = None, alpha: float = 0.05, n_resamples: int = 10_000,
            seed: int = 0, target_phi: float = 0.8, max_runs: int = 1000, backend=None, lower_is_better=False,
            test: str | None = None, n_sim: int = 1000, family: str = "auto", delta: float | None = None,
            target_power: float = 0.8, dropna: bool = False, items: str = "random", human: str | None = None,
            human_labels=None, runs: str = "auto"):
    """Run the analyses of workbook 07 on a score table (one row per system, run and item).

    ``analyze(spec)`` runs an :class:`~vrs_helpers.evaluate.tables.spec.AnalysisSpec` (validated here unless it is
    already); ``analyze(data, response, system, item, ...)`` is the short form: it builds the spec from the
    arguments (the names and meanings of the spec's fields) and runs it.

    ``system`` may be None (or a column with one level): reliability only. ``replications`` are the columns that
    identify a run within a system (seed, meta-parameters); ``properties`` data properties of the items (numeric:
    slope; otherwise categorical). ``baseline`` is the reference system of the paired tests and of ASO (default:
    the first level). Resampling p-values are (k + 1) / (n + 1) and never 0.

    ``response``: one score column (returns an :class:`OwnAnalysis`) or a list of them (several metrics: each
    analysed, the system verdicts Holm-corrected across them; returns a
    :class:`vrs_helpers.evaluate.tables.metrics.MetricsAnalysis`, a list of one gives the single analysis).
    ``lower_is_better``: True (one response), or the names of the responses for which lower scores are better
    (TER, error rates): ASO and the expected best of n runs need the direction; the two-sided tests do not.

    ``backend``: ``None`` (in memory) or a Dask client, scheduler address or ``"local"`` (a LocalCluster): the
    same analysis with every pass over the rows on the cluster (``data`` a dask DataFrame, a pandas one or a
    Parquet path), for tables larger than memory. Both backends run the same steps
    (:mod:`vrs_helpers.evaluate.tables.steps`) on the same validated spec: the same checks, the same summary and
    verdict;
    only the sums are added in another order (ASO and the expected maximum are computed on the client from the
    per-run means).

    ``test``: the test of the runs-random reading, a test of :mod:`vrs_helpers.registry` that applies to the
    scores' family (None: the family's default; for continuous scores ``"kenward-roger"``, else
    ``"satterthwaite"``, ``"bootstrap"`` (the parametric-bootstrap LRT with ``n_sim`` simulations, seeded by
    ``seed``) or ``"chisq"`` (the large-sample GLRT, too liberal with 3-5 runs per system); for binary scores
    ``"bootstrap"`` (default: the GLMMs' parametric-bootstrap LRT) or ``"chisq"``).

    ``items``: ``"random"`` (default: when items have several runs per system, the runs-random model has the
    system-by-item term ``(1|system:item)`` and the verdict is about items like these) or ``"fixed"`` (without it:
    these items; :func:`vrs_helpers.book.glrt.compare_systems`).

    ``runs``: ``"auto"`` (default: crossed when every run label is used by two or more systems, else nested),
    ``"nested"`` (every system's runs its own, ``(1|system:R)``) or ``"crossed"`` (a run label - the same seed,
    few-shot draw or prompt - names one run condition shared by the systems: ``(1|R) + (1|system:R)``, the shared
    shift cancels in the difference); the answer says which (:func:`vrs_helpers.book.glrt.runs_layout`).

    ``family``: ``"auto"`` (default: binomial for a 0/1 response, with a note), ``"gaussian"`` or ``"binomial"``
    (correct/incorrect per item: the GLRTs on logistic GLMMs, :func:`vrs_helpers.book.glrt.compare_systems`, the
    runs-random reading by the parametric-bootstrap LRT, per-system variance components and phi on the latent scale,
    :func:`vrs_helpers.book.binary.latent_variance_components`).

    ``human``: the column of human labels on some rows (the response is then a judge's score; issue 43), or
    ``human_labels`` a file of them: the judge-corrected readings (:mod:`vrs_helpers.evaluate.tables.judged`) open the
    verdict and are ``result.judge``.

    ``delta``, ``target_power``: the power planning of the runs-random reading
    (:func:`vrs_helpers.evaluate.tables.steps.plan_power`) for the observed system difference and, when given, for
    ``delta`` (in the response's units). Bad input raises :class:`AnalysisError` (``vrs`` exits 2).
    """
    if isinstance(data, LogsSpec):
        return analyze_logs(data)
    if isinstance(data, AnalysisSpec):
        spec = data
    else:
        spec = AnalysisSpec(data, response, system, item, replications=replications, properties=properties,
                            baseline=baseline, family=family, test=test, items=items, runs=runs, alpha=alpha,
                            n_resamples=n_resamples,
                            n_sim=n_sim, seed=seed, delta=delta, lower_is_better=lower_is_better, dropna=dropna,
                            backend=backend, target_phi=target_phi, max_runs=max_runs, target_power=target_power,
                            human=human, human_labels=human_labels)
    from .presentation.build import metrics_result, scores_result

    with connected(spec.backend) as client:
        spec = spec.validated(client=client)
        results = {r: recorded(analyze_response, spec, r, client) for r in spec.response}
    label = spec.data_label or (str(spec.data) if isinstance(spec.data, (str, os.PathLike)) else "")
    if len(results) == 1:
        return scores_result(next(iter(results.values())), spec, label)
    return metrics_result(MetricsAnalysis.from_results(results, spec.alpha), spec, label)


def analyze_logs(spec, read=None):
    """The analysis of evaluation logs (a :class:`~vrs_helpers.evaluate.tables.spec.LogsSpec`; ``read``: the logs read
    and
    validated already, :func:`vrs_helpers.evaluate.logs.tasks.read_logs`) as a
    :class:`~vrs_helpers.evaluate.presentation.result.Result`: every task tested, adjusted across the tasks, the
    harness's numbers beside ours (:func:`vrs_helpers.evaluate.logs.tasks.analyze_logs`)."""
    import warnings

    from .logs.tasks import run_logs
    from .presentation.build import logs_result

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        analysis = run_logs(spec, read)
    return logs_result(analysis, spec.to_dict(), spec.data_label or spec.logs)


def recorded(step, spec, response, client=None) -> OwnAnalysis:
    """``step(spec, response, client)`` with the warnings its fits raise (a singular fit, a boundary estimate, a
    failed convergence) recorded in the analysis' notes - each message once, in order - instead of shown: they are
    part of the result a reader reads."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = step(spec, response, client)
    for message in dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, UserWarning)):
        note = f"fit: {message}"
        if note not in result.notes:
            result.notes.append(note)
    return result


def analyze_response(spec: AnalysisSpec, response: str, client=None) -> OwnAnalysis:
    """The analysis of one response of a validated spec: :data:`vrs_helpers.evaluate.tables.steps.STEPS` in order (in
    memory, the steps in :data:`~vrs_helpers.evaluate.tables.steps.CONCURRENT` in a thread beside the ones before
    them)."""
    w = prepare(spec, response, client)
    runs = run_table(w.d, w.y, w.sy, w.reps).rename(columns={**w.back, w.sy: w.system})
    runs[w.system] = runs[w.system].astype(str)
    result = OwnAnalysis(response, spec.system, spec.item, list(spec.replications), list(spec.properties),
                         w.systems, spec.alpha, runs=runs, higher_is_better=spec.directions[response],
                         family=w.family)
    if spec.family_notes.get(response):
        result.notes.append(spec.family_notes[response])
    early = [] if w.lazy else [step for step in STEPS if step in CONCURRENT]
    from tqdm import tqdm  # a text bar on stderr when it is a terminal (none in logs, CI and notebook kernels)

    with tqdm(total=len(STEPS), desc="analysis", unit="step", disable=None, leave=False,
              dynamic_ncols=True) as bar:
        if not early:
            for step in STEPS:
                bar.set_postfix_str(step.__name__)
                step(result, w)
                bar.update()
            return result
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(early), thread_name_prefix="vrs-step") as pool:
            started = {step: pool.submit(step, result, w) for step in early}
            for step in STEPS:
                bar.set_postfix_str(step.__name__)
                if step in started:
                    started[step].result()   # its exception, if any, is raised here
                else:
                    step(result, w)
                bar.update()
    return result
