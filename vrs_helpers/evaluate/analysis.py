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
- **what NLP users already run** (:mod:`vrs_helpers.evaluate.readings`): Almost Stochastic Order in both directions
on the
  per-run means of each system against the baseline (deepsig's definition and recommended threshold eps_min <
  0.2), the expected best of n runs with a bootstrap interval (Dodge et al. 2019), every reading in one table and
  one sentence per disagreement saying which source of variation each reading ignores;
- **several metrics** (``response=[...]``): each analysed as above, the system verdicts Holm-corrected across the
  metrics (:mod:`vrs_helpers.evaluate.metrics`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import mixed
from ..book.binary import latent_variance_components, resolve_family
from ..book.glrt import compare_systems
from ..book.reliability import phi
from ..book.significance import bootstrap_test, permutation_test, resampling_test_dask
from ..errors import VRSError
from .metrics import MetricsAnalysis, metric_directions
from .readings import aso_readings, disagreements, expected_best_by_system, readings_frame, run_means
from .scores import computed

_SAFE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class AnalysisError(VRSError, ValueError):
    """Bad input for :func:`analyze` (the message names the column or value and what to do)."""


def safe_names(columns) -> dict:
    """Original column name -> a name the formula parser accepts (identifiers kept as they are)."""
    out, used = {}, set()
    for c in columns:
        name = str(c) if _SAFE.match(str(c)) else re.sub(r"\W", "_", str(c)) or "col"
        if not _SAFE.match(name):
            name = "c_" + name
        base, i = name, 1
        while name in used:
            name, i = f"{base}_{i}", i + 1
        used.add(name)
        out[c] = name
    return out


def _test_dict(t) -> dict:
    return {"chi2": float(t.chi2), "df": int(t.df), "p_value": float(t.p_value)}


def _random_dict(test, lrt) -> dict | None:
    """The runs-random reading in summary.json: the test used (by default the F test with Kenward-Roger's df), F,
    both df and its p-value; the chi-square LRT beside it under ``lrt``."""
    if lrt is None:
        return None
    if test is None or test is lrt:
        return {"test": "GLRT (chi-square)", **_test_dict(lrt), "lrt": _test_dict(lrt)}
    if not hasattr(test, "F"):  # the parametric-bootstrap LRT: its p is Monte-Carlo, (c + 1) / (K + 1)
        return {"test": test.method, **_test_dict(test), "n_sim": int(test.n_sim), "seed": int(test.seed),
                "lrt": _test_dict(lrt)}
    # the df (and so the F test's p) are functions of the variance estimates, known to the optimizer's precision
    # (Satterthwaite's also rest on finite-difference derivatives): stated at 4 significant digits, so both backends
    # write the same file (lmerTest and pbkrtest print them with 1-2 decimals)
    return {"test": test.method, "F": float(test.F), "num_df": int(test.num_df),
            "den_df": float(f"{test.den_df:.4g}"), "p_value": float(f"{test.p_value:.4g}"), "lrt": _test_dict(lrt)}


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
    conditional: dict = field(default_factory=dict, repr=False)  # property -> SystemComparison
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
        """Every reading in one table (:func:`vrs_helpers.evaluate.readings.readings_frame`): the verdict box."""
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
            "response": self.response, "system": self.system, "item": self.item,
            "replications": list(self.replications), "properties": list(self.properties),
            "systems": list(map(str, self.systems)), "alpha": self.alpha,
            "glrt": None if self.glrt is None else _test_dict(self.glrt),
            "glrt_replications_random": _random_dict(self.random_test, self.glrt_replications_random),
            "readings_disagree": self.disagree,
            "conditional": {p: _test_dict(c.glrt) for p, c in self.conditional.items()},
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
        }

    def to_frame(self) -> pd.DataFrame:
        """The tests as one table (test, statistic, df, p_value); df of an F test as (numerator, denominator)."""
        def row(name, t):
            df = t.df if not isinstance(t.df, tuple) else f"({t.df[0]}, {t.df[1]:.3g})"
            return {"test": name, "statistic": float(t.statistic), "df": df, "p_value": float(t.p_value)}

        rows = []
        if self.glrt is not None:
            rows.append(row("GLRT, runs as replications", self.glrt))
        if self.random_test is not None and self.random_test is not self.glrt_replications_random:
            rows.append(row(f"{self.random_test.method}, runs as a random effect", self.random_test))
        if self.glrt_replications_random is not None:
            rows.append(row("GLRT chi-square, runs as a random effect (large-sample)",
                            self.glrt_replications_random))
        for p, c in self.conditional.items():
            rows.append(row(f"GLRT, system x {p}", c.glrt))
        return pd.DataFrame(rows, columns=["test", "statistic", "df", "p_value"])

    def __repr__(self) -> str:
        g = "" if self.glrt is None else f", GLRT p={self.glrt.p_value:.3g}"
        r = "" if self.glrt_replications_random is None else \
            f", with run variance p={self.glrt_replications_random.p_value:.3g}"
        return (f"OwnAnalysis({self.response!r} of {len(self.systems)} system(s) over items {self.item!r}, "
                f"replications {self.replications}{g}{r})")


SUMMARY_DIGITS = 10  # significant digits of the floats in summary.json


def _rounded(obj):
    """Floats at SUMMARY_DIGITS significant digits (NaN/inf as null), numpy scalars as Python numbers: the summary
    of the same data is the same file whatever the order in which a backend added its sums."""
    if isinstance(obj, dict):
        return {str(k): _rounded(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_rounded(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return None if not np.isfinite(v) else float(f"{v:.{SUMMARY_DIGITS}g}")
    if obj is None or isinstance(obj, str):
        return obj
    return str(obj)


def summary_json(result: OwnAnalysis) -> str:
    """``summary.json`` of an analysis: :meth:`OwnAnalysis.to_summary` with floats at 10 significant digits."""
    return json.dumps(_rounded(result.to_summary()), indent=2)


def summary_text(result: OwnAnalysis) -> str:
    """``summary.txt``: the tests as a table, the verdict, the disagreements between readings and the notes."""
    return "\n".join([result.to_frame().to_string(index=False), "", *result.verdict, *result.disagreements,
                      *result.notes]) + "\n"


def write_summary(result: OwnAnalysis, path, text_path=None) -> None:
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


def run_table(df, response: str, system: str, replications, level: float = 0.95) -> pd.DataFrame:
    """Per system and run (combination of the replication columns): n, mean, SD and a normal-theory CI of the
    mean — the spread that "best of n seeds" reporting hides. ``df`` may be a pandas or a dask DataFrame."""
    from scipy import stats

    keys = [system, *replications]
    out = computed(df.groupby(keys, observed=True)[response].agg(["count", "mean", "std"])).reset_index()
    out = out.rename(columns={"count": "n", "std": "sd"}).sort_values(keys, kind="stable").reset_index(drop=True)
    half = stats.norm.ppf(0.5 + level / 2) * out["sd"] / np.sqrt(out["n"])
    out["ci_low"], out["ci_high"] = out["mean"] - half, out["mean"] + half
    return out


def verdict_text(p: float, alpha: float) -> str:
    return f"differ (p = {p:.3g} < {alpha:g})" if p < alpha else f"show no significant difference (p = {p:.3g})"


def analyze(data, response, system: str | None, item: str, replications=(), properties=(),
            baseline: str | None = None, alpha: float = 0.05, n_resamples: int = 10_000, seed: int = 0,
            target_phi: float = 0.8, max_runs: int = 1000, backend=None, lower_is_better=False,
            test: str = "kenward-roger", n_sim: int = 1000, family: str = "auto", delta: float | None = None,
            target_power: float = 0.8):
    """Run the analyses of workbook 07 on a validated score table (one row per system, run and item).

    ``system`` may be None (or a column with one level): reliability only. ``replications`` are the columns that
    identify a run within a system (seed, meta-parameters); ``properties`` data properties of the items (numeric:
    slope; otherwise categorical). ``baseline`` is the reference system of the paired tests and of ASO (default:
    the first level). Resampling p-values are (k + 1) / (n + 1) and never 0.

    ``response``: one score column (returns an :class:`OwnAnalysis`) or a list of them (several metrics: each
    analysed, the system verdicts Holm-corrected across them; returns a
    :class:`vrs_helpers.evaluate.metrics.MetricsAnalysis`, a list of one gives the single analysis).
    ``lower_is_better``: True (one response), or the names of the responses for which lower scores are better
    (TER, error rates): ASO and the expected best of n runs need the direction; the two-sided tests do not.

    ``backend``: ``None`` (in memory) or a Dask client, scheduler address or ``"local"`` (a LocalCluster): the
    same analysis with every pass over the rows on the cluster (``data`` a dask DataFrame, a pandas one or a
    Parquet path), for tables larger than memory. Both backends run this one function: the same checks, the same
    summary and verdict; only the sums are added in another order (ASO and the expected maximum are computed on
    the client from the per-run means).

    ``test``: the test of the runs-random reading (:func:`vrs_helpers.book.glrt.compare_systems`):
    ``"kenward-roger"`` (default), ``"satterthwaite"``, ``"bootstrap"`` (the parametric-bootstrap LRT with
    ``n_sim`` simulations, seeded by ``seed``) or ``"chisq"`` (the large-sample GLRT, too liberal with 3-5 runs per
    system).

    ``family``: ``"auto"`` (default: binomial for a 0/1 response, with a note), ``"gaussian"`` or ``"binomial"``
    (correct/incorrect per item: the GLRTs on logistic GLMMs, :func:`vrs_helpers.book.glrt.compare_systems`, the
    runs-random reading by the chi-square GLRT, per-system variance components and phi on the latent scale,
    :func:`vrs_helpers.book.binary.latent_variance_components`).

    ``delta``, ``target_power``: the power planning of the runs-random reading (:func:`add_power`) for the observed
    system difference and, when given, for ``delta`` (in the response's units).
    """
    responses = [response] if isinstance(response, str) else list(response)
    if not responses:
        raise AnalysisError("Give at least one response (score) column.")
    higher = metric_directions(responses, lower_is_better)
    replications = [replications] if isinstance(replications, str) else list(replications)
    properties = [properties] if isinstance(properties, str) else list(properties)
    if not 0 < alpha < 1:
        raise AnalysisError(f"alpha must be between 0 and 1, got {alpha!r}.")
    options = dict(system=system, item=item, replications=replications, properties=properties, baseline=baseline,
                   alpha=alpha, n_resamples=n_resamples, seed=seed, target_phi=target_phi, max_runs=max_runs,
                   test=test, n_sim=n_sim, family=family, delta=delta, target_power=target_power)
    if backend is not None:
        from ..dask_support import connect

        client = connect(backend)
        try:
            return _analyze_metrics(_as_dask(data, client), responses, higher, options, client)
        finally:
            if not hasattr(backend, "submit"):  # a client made here is closed here
                cluster = getattr(client, "cluster", None)
                client.close()
                if cluster is not None:
                    cluster.close()
    return _analyze_metrics(data, responses, higher, options, None)


def _analyze_metrics(data, responses, higher, options: dict, client):
    """Each response analysed with the same ``options`` (keyword arguments of :func:`_analyze`); one response gives
    its :class:`OwnAnalysis`, several a :class:`MetricsAnalysis`."""
    results = {m: _analyze(data, m, client=client, higher_is_better=higher[m], **options) for m in responses}
    if len(responses) == 1:
        return results[responses[0]]
    return MetricsAnalysis.from_results(results, options["alpha"])


def _as_dask(data, client):
    """A dask DataFrame of ``data`` (a dask DataFrame, a pandas DataFrame, or a Parquet file or folder)."""
    import dask.dataframe as dd

    if hasattr(data, "dask"):
        return data
    if isinstance(data, pd.DataFrame):
        return dd.from_pandas(data, npartitions=max(1, len(client.scheduler_info().get("workers", {})) * 2))
    return dd.read_parquet(str(data))


def _analyze(data, response, system, item, replications, properties, baseline, alpha, n_resamples, seed,
             target_phi, max_runs, client, higher_is_better: bool = True, test: str = "kenward-roger",
             n_sim: int = 1000, family: str = "auto", delta: float | None = None,
             target_power: float = 0.8) -> OwnAnalysis:
    lazy = hasattr(data, "dask")
    df = data if lazy else data.copy()
    if system is None:
        system = "_system"
        df = df.assign(**{system: "all"})
    roles = [response, system, item, *replications, *properties]
    missing = [c for c in roles if c not in df.columns]
    if missing:
        raise AnalysisError(f"Column(s) {missing} are not in the data; it has {', '.join(map(str, df.columns))}.")
    if not pd.api.types.is_numeric_dtype(df[response].dtype):
        raise AnalysisError(f"The response {response!r} must be numeric (got {df[response].dtype}).")
    n_missing = int(computed(df[response].isna().sum()))
    if n_missing:
        raise AnalysisError(f"The response {response!r} has {n_missing} missing values; drop "
                            "them first (vrs analyze --dropna).")
    names = safe_names(roles)
    back = {v: k for k, v in names.items()}
    d = df[roles].rename(columns=names)
    for c in [system, item, *replications]:
        d[names[c]] = d[names[c]].astype(str)
    y, sy, it = names[response], names[system], names[item]
    reps = [names[r] for r in replications]
    systems = sorted(computed(d[sy].unique()))
    if baseline is not None:
        if str(baseline) not in systems:
            raise AnalysisError(f"baseline {baseline!r} is not a level of {system!r}; levels: {', '.join(systems)}.")
        systems = [str(baseline)] + [s for s in systems if s != str(baseline)]
    d[sy] = d[sy].astype(pd.CategoricalDtype(systems))
    if lazy:
        d = d.persist()  # the validated columns stay on the workers for the passes below
    runs = run_table(d, y, sy, reps).rename(columns={**back, sy: system})
    runs[system] = runs[system].astype(str)
    result = OwnAnalysis(response, system if system != "_system" else None, item, replications, properties,
                         systems, alpha, runs=runs, higher_is_better=higher_is_better)
    try:
        result.family, family_note = resolve_family(family, d[y])
    except VRSError as e:
        raise AnalysisError(str(e)) from e
    if family_note:
        result.notes.append(family_note)
    fam = {"family": result.family}
    rename_back = lambda frame: frame.rename(columns=back)  # noqa: E731

    # --- significance
    if len(systems) >= 2:
        result.comparison = compare_systems(d, y, sy, it, **fam)
        result.comparison.contrasts = rename_back(result.comparison.contrasts)
        result.comparison.means = rename_back(result.comparison.means)
        estimable = [r for r, o in zip(reps, replications, strict=True)
                     if (computed(d.groupby(sy, observed=True)[r].nunique()) >= 2).any()]
        skipped = [o for r, o in zip(reps, replications, strict=True) if r not in estimable]
        if skipped:
            result.notes.append(f"replication column(s) {skipped} have one level within every system: no run-level "
                                "variance to estimate, left out of the random-effect reading")
        if estimable:
            result.comparison_random = compare_systems(d, y, sy, it, replications=estimable, test=test,
                                                       n_sim=n_sim, seed=seed, **fam)
            result.notes.extend(result.comparison_random.notes)
            fewest = int(result.runs.groupby(system, observed=True).size().min())
            if fewest < 3:
                result.notes.append(
                    f"only {fewest} run(s) for some system: with fewer than 3 runs per system the "
                    "run-to-run variation cannot be separated from the system difference with any reliability; the "
                    "random-effect reading has almost no denominator degrees of freedom. Add runs.")
        for p in properties:
            pn = names[p]
            if pd.api.types.is_numeric_dtype(d[pn].dtype):
                result.conditional[p] = compare_systems(d, y, sy, it, covariate=pn, **fam)
            else:
                result.conditional[p] = compare_systems(d.assign(**{pn: d[pn].astype(str)}), y, sy, it, by=pn,
                                                        **fam)
            c = result.conditional[p]
            c.contrasts = rename_back(c.contrasts)
            c.means = rename_back(c.means)
            if c.slopes is not None:
                c.slopes = rename_back(c.slopes)
        # classic paired tests on per-item means over runs
        means = computed(d.groupby([sy, it], observed=True)[y].mean()).unstack(sy)
        rows = []
        for other in systems[1:]:
            pair = means[[systems[0], other]].dropna()
            a, b = pair[other].to_numpy(), pair[systems[0]].to_numpy()
            for name, kind, fn in [("paired bootstrap", "bootstrap", bootstrap_test),
                                   ("paired permutation", "permutation", permutation_test)]:
                # the same seeded batches on both backends: the same p-value
                r = (resampling_test_dask(kind, a, b, n_resamples=n_resamples, seed=seed, client=client) if lazy
                     else fn(a, b, n_resamples=n_resamples, seed=seed))
                # p = (c + 1) / (K + 1), never 0; the book's c / K beside it
                rows.append({"test": name, "system": other, "baseline": systems[0], "items": len(pair),
                             "difference": r.observed, "p_value": r.p_value,
                             "p_value_c_over_K": r.p_value_c_over_K, "n_resamples": r.n_resamples})
        result.paired = pd.DataFrame(rows)

    # --- reliability per system
    for s in systems:
        part = d[d[sy] == s]
        if computed(part.groupby(it, observed=True)[y].count().max()) < 2:
            result.notes.append(f"system {s} has one score per item (a single run): item and residual variance are "
                                "not separable, so no variance components or phi for it; add runs")
            continue
        levels = {r: int(computed(part[r].nunique())) for r in reps}
        reps_s = [r for r in reps if levels[r] >= 2]
        formula = f"{y} ~ 1 + (1|{it})" + "".join(f" + (1|{r})" for r in reps_s)
        try:
            if result.family == "binomial":  # latent scale: glmer's variances plus the logistic residual pi^2/3
                vc = latent_variance_components(computed(part), y, it, reps_s).variance_components.copy()
            else:
                vc = mixed.fit(formula, part, method="REML").variance_components.copy()
        except VRSError as e:  # reported, the other systems still get their analysis
            result.notes.append(f"variance components of system {s}: {e}")
            continue
        vc.index = [":".join(back.get(n, n) for n in str(c).split(":")) for c in vc.index]
        result.variance_components[s] = vc
        n = {back[r]: float(levels[r]) for r in reps_s}
        ph = phi(vc, item, n=n)
        result.reliability[s] = ph
        if n:
            # decision study (book 3.3.3): phi as the number of levels of one replication column grows, the others
            # held at their observed numbers; the smallest number that reaches target_phi
            study, needed = [], {}
            for f in n:
                needed[f] = None
                for k in range(1, max_runs + 1):
                    value = phi(vc, item, n={**n, f: float(k)}).phi
                    if k <= 50 or (value >= target_phi and needed[f] is None):
                        study.append({"factor": f, "levels": k, "phi": value})
                    if value >= target_phi and needed[f] is None:
                        needed[f] = k
                        if k >= 50:
                            break
                    if k >= 50 and needed[f] is not None:
                        break
            result.decision[s] = pd.DataFrame(study)
            result.runs_needed[s] = needed
        else:
            result.runs_needed[s] = {}

    # --- verdict
    if result.comparison is not None:
        g = result.glrt
        result.verdict.append(f"Runs as replications clustered by item: the systems {verdict_text(g.p_value, alpha)} "
                              f"(GLRT chi2 = {g.chi2:.2f}, df = {g.df}).")
        if result.comparison_random is not None:
            g2, ft = result.glrt_replications_random, result.random_test
            if ft is not None and ft is not g2 and not hasattr(ft, "F"):
                result.verdict.append(
                    f"With a random effect per run, the systems {verdict_text(ft.p_value, alpha)} ({ft.method}: "
                    f"chi2 = {ft.chi2:.2f}, df = {ft.df}, {ft.n_sim} simulations from the null fit; the chi-square "
                    f"GLRT, valid only with many runs, gives p = {g2.p_value:.3g}).")
            elif ft is not None and ft is not g2:
                result.verdict.append(
                    f"With a random effect per run, the systems {verdict_text(ft.p_value, alpha)} ({ft.method}: "
                    f"F = {ft.F:.2f} on ({ft.num_df}, {ft.den_df:.1f}) df; the chi-square GLRT, "
                    f"valid only with many runs, gives chi2 = {g2.chi2:.2f}, df = {g2.df}, p = {g2.p_value:.3g}).")
            else:
                result.verdict.append(f"With a random effect per run, the systems "
                                      f"{verdict_text(g2.p_value, alpha)} (chi2 = {g2.chi2:.2f}, df = {g2.df}).")
            if result.disagree:
                result.verdict.append("WARNING: the two readings disagree. The conclusion hinges on whether the "
                                      "runs are treated as fixed replications or as a sample of possible runs; "
                                      "with few runs and run-to-run variance, report both and add runs.")
        for p, c in result.conditional.items():
            result.verdict.append(f"Conditional on {p}: the system difference "
                                  f"{'depends' if c.glrt.p_value < alpha else 'shows no significant dependence'} "
                                  f"on it (p = {c.glrt.p_value:.3g}, df = {c.glrt.df}).")
    for s, r in result.reliability.items():
        need = result.runs_needed.get(s) or {}
        more = "".join(f"; {k} level(s) of {f} would reach phi >= {target_phi}" if k else
                       f"; no number of levels of {f} up to {max_runs} reaches phi >= {target_phi}"
                       for f, k in need.items())
        result.verdict.append(f"Reliability of {s}: phi = {r.phi:.3f} ({r.interpretation}){more}.")
    if len(systems) < 2:
        result.notes.append("one system: reliability only")
    add_power(result, len(computed(d[it].unique())), delta=delta, target=target_power)
    add_stochastic_order(result, system, seed)
    return result


def add_power(result: OwnAnalysis, items: int, delta: float | None = None, target: float = 0.8) -> OwnAnalysis:
    """Power planning of the runs-random reading (:mod:`vrs_helpers.evaluate.power`; the significance counterpart of the
    decision study, book 3.3.3): from the REML fit of ``response ~ system + (1|item) + (1|system:R)...`` (its run
    variance: the sum of the ``system:R`` components; its residual variance) the power of the F test to detect the
    observed system differences (the fixed effects) with the observed runs per system (the fewest) and ``items``
    items, and the runs per system that reach ``target``; the same for ``delta`` when given (every other system
    ``delta`` from the baseline). Closed form of the balanced design (noncentral F); the verdict says so. Gaussian
    responses only (a note otherwise)."""
    from .power import PlanningError, f_test_power, runs_needed

    comp = result.comparison_random
    if comp is None or comp.model is None:
        return result
    if result.family != "gaussian":
        result.notes.append("power planning is for continuous scores (the noncentral F of the LMM); not computed "
                            "for binary scores")
        return result
    vc = comp.model.variance_components["variance"]
    system_col = comp.formula.split("~")[1].split("+")[0].strip()
    run_var = float(sum(v for k, v in vc.items() if str(k).startswith(f"{system_col}:")))
    # a boundary estimate is 0 up to the optimizer's rounding (1e-28 on one backend, 0 on another): 0 below 1e-12
    # of the residual variance, so both backends plan with the same numbers
    run_var = run_var if run_var > 1e-12 * float(vc["Residual"]) else 0.0
    residual_sd, run_sd = float(np.sqrt(vc["Residual"])), float(np.sqrt(run_var))
    fe = comp.model.fixed_effects["estimate"]
    observed = np.array([0.0] + [float(v) for k, v in fe.items() if k != "(Intercept)"])
    k = len(result.systems)
    runs = int(result.runs.groupby(result.system or "_system", observed=True).size().min())
    out = {"test": "F test of system (runs random), closed form of the balanced design (noncentral F)",
           "run_sd": run_sd, "residual_sd": residual_sd, "items": int(items), "runs_per_system": runs,
           "alpha": result.alpha, "target": target}
    for name, d in [("observed", observed), ("delta", None if delta is None else
                                              np.array([0.0] + [float(delta)] * (k - 1)))]:
        if d is None:
            continue
        try:  # one run per system leaves the F test no denominator df: no power, only the runs needed
            power = f_test_power(d, runs, items, run_sd, residual_sd, k, result.alpha) if runs >= 2 else None
            need = runs_needed(d, items, run_sd, residual_sd, k, result.alpha, target)
        except PlanningError as e:
            result.notes.append(f"power for the {name} difference: {e}")
            continue
        out[name] = {"differences": [float(v) for v in d[1:]], "power": power, "runs_needed": need}
        what = ("the observed difference" if name == "observed"
                else f"a difference of {float(delta):g}")
        more = (f"{need} runs per system would reach power {target:g}" if need is not None else
                f"no number of runs up to 10,000 reaches power {target:g}")
        now = (f"with {runs} runs per system and {items} items the F test detects {what} with probability "
               f"{power:.2f}" if power is not None else f"for {what} with {items} items")
        result.verdict.append(f"Power (closed form, balanced design): {now}; {more}.")
    result.power = out
    return result


def add_stochastic_order(result: OwnAnalysis, system: str, seed: int = 0) -> OwnAnalysis:
    """Add what NLP users already run (:mod:`vrs_helpers.evaluate.readings`) to an analysis: ASO in both directions of
    each system against the baseline and the expected best of n runs per system, on the per-run means of
    ``result.runs`` (small: computed in memory on both backends), then one sentence per disagreement between the
    readings. ``system`` is the system column of ``result.runs``."""
    means = run_means(result.runs, system)
    result.expected_max = expected_best_by_system(means, result.higher_is_better, seed=seed)
    if len(result.systems) >= 2:
        result.aso, notes = aso_readings(means, str(result.systems[0]), result.higher_is_better, seed=seed)
        result.notes.extend(notes)
        at = next((i for i, v in enumerate(result.verdict) if v.startswith("Reliability of")), len(result.verdict))
        result.verdict[at:at] = [a.sentence() for a in result.aso.values()]
    result.disagreements = disagreements(result)
    return result


