"""Several metrics in one analysis (``vrs analyze DATA --response bleu chrf comet``, workbook 07).

Each metric gets the whole analysis of :func:`vrs_helpers.evaluate.analysis.analyze`. Testing the same systems on k
metrics makes k verdicts; the system verdicts are corrected for them with Holm's step-down procedure (Holm 1979;
:func:`vrs_helpers.book.significance.adjust_p_values`), which controls the family-wise error rate over the k metrics.
Each reading is one family, corrected separately:

- ``runs_random``: the p-values of the runs-random reading's test (the small-sample F test of ``response ~ system +
  (1|item) + (1|system:R)``), one per metric;
- ``runs_as_replications``: the p-values of the GLRT with the runs as replications, one per metric.

The per-metric results (conditional tests, contrasts, paired tests, ASO, reliability) are reported as they are,
uncorrected; ASO's eps_min is not a p-value (its confidence level is Bonferroni-adjusted over the systems compared
with the baseline within a metric, as deepsig's ``num_comparisons``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ...book.significance import adjust_p_values
from ...errors import VRSError
from ...outcomes import p_is, p_text, stated

# family -> (the reading's name, the test of an analysis it corrects)
HOLM_FAMILIES = {
    "runs_random": ("runs as a random effect", lambda r: r.random_test),
    "runs_as_replications": ("runs as replications", lambda r: r.glrt),
}


class MetricsError(VRSError, ValueError):
    """Bad metric options (the message names the metric and what to do)."""


def metric_directions(responses, lower_is_better=False) -> dict:
    """{response: True if higher scores are better}. ``lower_is_better``: a bool for every response, or the names
    of the responses for which lower is better (each must be one of the responses)."""
    if isinstance(lower_is_better, bool):
        return {m: not lower_is_better for m in responses}
    lower = [lower_is_better] if isinstance(lower_is_better, str) else list(lower_is_better or [])
    unknown = [m for m in lower if m not in responses]
    if unknown:
        raise MetricsError(f"lower-is-better metric(s) {unknown} are not among the responses "
                           f"({', '.join(map(str, responses))}); name response columns.")
    if len(set(responses)) != len(responses):
        raise MetricsError(f"a response is given twice: {list(responses)}; name each metric once.")
    return {m: m not in lower for m in responses}


def holm_table(results: dict, alpha: float) -> pd.DataFrame:
    """Holm-adjusted p-values of each family (:data:`HOLM_FAMILIES`) across the metrics of ``{metric: analysis}``:
    one row per family and metric (family, reading, metric, test, p_value, p_holm, differ). An F test's p-value
    enters at the 4 significant digits the summary states (its numerical precision), and its adjusted value is
    stated at 4 as well; metrics without the family's test (e.g. no replication column) are left out of it."""
    rows = []
    for family, (reading, get) in HOLM_FAMILIES.items():
        tests = {m: get(r) for m, r in results.items() if get(r) is not None}
        if not tests:
            continue
        p = [t.stated_p for t in tests.values()]
        adjusted = adjust_p_values(p, "holm")
        for (m, t), pv, ph in zip(tests.items(), p, adjusted, strict=True):
            ph = stated(ph, t.p_digits)  # at the precision its test states p
            rows.append({"family": family, "reading": reading, "metric": m, "test": t.method, "p_value": pv,
                         "p_holm": ph, "differ": bool(ph < alpha)})
    return pd.DataFrame(rows, columns=["family", "reading", "metric", "test", "p_value", "p_holm", "differ"])


def holm_verdict(table: pd.DataFrame, n_metrics: int) -> list[str]:
    """One line per family: each metric's verdict after Holm's correction."""
    out = []
    for _, part in table.groupby("family", sort=False):
        parts = [f"{r['metric']} {'differ' if r['differ'] else 'no significant difference'} (p {p_is(r['p_value'])}, "
                 f"Holm {p_text(r['p_holm'])})" for _, r in part.iterrows()]
        out.append(f"Holm across the {n_metrics} metrics, {part['reading'].iloc[0]} ({part['test'].iloc[0]}): "
                   + "; ".join(parts) + ".")
    return out


@dataclass
class MetricsAnalysis:
    """:func:`vrs_helpers.evaluate.analysis.analyze` of several metrics: one analysis per metric and the Holm-corrected
    system verdicts across them; ``to_summary()`` is summary.json keyed by metric."""

    results: dict                      # metric -> OwnAnalysis
    alpha: float
    holm: pd.DataFrame = field(repr=False)
    verdict: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @classmethod
    def from_results(cls, results: dict, alpha: float) -> MetricsAnalysis:
        table = holm_table(results, alpha)
        verdict = holm_verdict(table, len(results))
        verdict += [f"[{m}] {line}" for m, r in results.items() for line in r.verdict]
        notes = [f"[{m}] {n}" for m, r in results.items() for n in r.notes]
        return cls(dict(results), float(alpha), table, verdict, notes)

    @property
    def responses(self) -> list:
        return list(self.results)

    @property
    def disagreements(self) -> list:
        return [f"[{m}] {s}" for m, r in self.results.items() for s in r.disagreements]

    @property
    def readings(self) -> pd.DataFrame:
        """Every metric's readings (``metric`` first) with the Holm-adjusted p-value of the two corrected
        readings in ``p_holm`` (empty for the others)."""
        frames = []
        for m, r in self.results.items():
            f = r.readings
            f.insert(0, "metric", m)
            frames.append(f)
        out = pd.concat(frames, ignore_index=True)
        kind = {"runs_random": "random", "runs_as_replications": "replications"}
        holm = {(r["metric"], kind[r["family"]]): r["p_holm"] for _, r in self.holm.iterrows()}
        omnibus = out["comparison"] == out.groupby("metric")["comparison"].transform("first")
        out["p_holm"] = [holm.get((m, k)) if o else None for m, k, o in zip(out["metric"], out["kind"], omnibus,
                                                                           strict=True)]
        return out

    def to_frame(self) -> pd.DataFrame:
        return pd.concat([r.to_frame().assign(metric=m) for m, r in self.results.items()], ignore_index=True)[
            ["metric", "test", "statistic", "df", "p_value"]]

    def to_summary(self) -> dict:
        families = {f: part.drop(columns=["family"]).to_dict("records")
                    for f, part in self.holm.groupby("family", sort=False)}
        return {"responses": self.responses, "metrics": {m: r.to_summary() for m, r in self.results.items()},
                "holm": {"method": "Holm", "alpha": self.alpha, "n_metrics": len(self.results),
                         "families": families,
                         "corrected": "the system test of each reading, each family corrected separately across "
                                      "the metrics"},
                "verdict": list(self.verdict), "disagreements": self.disagreements, "notes": list(self.notes)}

    def __repr__(self) -> str:
        return f"MetricsAnalysis({self.responses}, alpha={self.alpha:g}; {len(self.holm)} Holm-adjusted verdicts)"
