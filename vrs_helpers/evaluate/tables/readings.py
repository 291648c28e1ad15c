"""The readings of one system comparison side by side (``vrs analyze``, workbook 07), and why they can disagree.

What NLP users already run on scores over training runs, beside the mixed-model tests of the book (4.3) and of
Hagmann, Meier & Riezler (ICLR 2023):

- :func:`aso_readings` - Almost Stochastic Order (:func:`vrs_helpers.book.stochastic_order.aso`, deepsig's definition)
  in both directions on the per-run means of each system against the baseline. A system is declared better when
  eps_min < 0.2, the threshold deepsig's README recommends ("we recommend to check eps_min < 0.2 and record
  eps_min alongside experimental results"; 0.5 is the original, weakest one). The confidence level is
  Bonferroni-adjusted for the number of systems compared with the baseline, as deepsig's ``num_comparisons``;
- :func:`expected_best` - the expected best score of n runs (Dodge et al. 2019, "Show your work") per system, with
  a bootstrap interval: what "best of n seeds" reports on average;
- :func:`readings_frame` - one row per reading: its test, statistic, df, p-value (eps_min for ASO) and decision;
- :func:`disagreements` - one sentence per pair of readings that reach different decisions, saying which source of
  variation each ignores (:data:`IGNORES`);
- :func:`verdict_html` - the verdict box that opens the report.

The book's point (slides on significance): tests on run scores (ASO, best of n) take the meta-parameter and seed
variation into account but ignore the data (items and their properties); tests on per-item means (paired
bootstrap and permutation, Algorithms 4.1/4.2) and the GLRT with the runs as replications ignore the run-to-run
variation; the mixed model with a random effect per run models both. Everything here is a function of an
analysis result (:class:`vrs_helpers.evaluate.analysis.OwnAnalysis`, read through its attributes); nothing is printed.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...book.stochastic_order import DEEPSIG_THRESHOLD, ASOResult, aso, expected_max
from ...literal import NO_MATH_CLASS
from ...outcomes import p_text

ASO_CONFIDENCE = 0.95        # deepsig's default confidence level
ASO_ITERATIONS = 1000        # deepsig's default number of bootstrap iterations
EXPECTED_MAX_LEVEL = 0.95
EXPECTED_MAX_BOOT = 2000

# reading -> (how the sentences name it, which sources of variation it models and which it ignores)
IGNORES = {
    "replications": ("the GLRT with the runs as replications",
                     "ignores the run-to-run variance and the system-by-item variation (it treats the runs as fixed "
                     "replications)"),
    "random": ("the test with a random effect per run",
               "models the item and the run-to-run variation (and, with items random, the system-by-item one)"),
    "paired": ("the paired bootstrap and permutation tests",
               "ignore the run-to-run variance (they average the runs of each item first)"),
    "aso": ("ASO on the run means",
            "ignores the item variation and the data properties (it reduces each run to its mean over the items)"),
}


# ------------------------------------------------------------------------------------------------ ASO

@dataclass
class ASOReading:
    """ASO of ``candidate`` against ``baseline`` on their per-run means, in both directions."""

    candidate: str
    baseline: str
    better: str                     # "higher" or "lower" scores are better (lower: the scores are negated for ASO)
    candidate_better: ASOResult     # eps_min of "the candidate is almost stochastically better"
    baseline_better: ASOResult      # eps_min of "the baseline is almost stochastically better"
    num_comparisons: int = 1

    @property
    def threshold(self) -> float:
        return self.candidate_better.threshold

    @property
    def winner(self) -> str | None:
        """The system found almost stochastically better (eps_min < threshold), or None."""
        if self.candidate_better.dominates:
            return self.candidate
        return self.baseline if self.baseline_better.dominates else None

    def to_dict(self) -> dict:
        def one(r: ASOResult) -> dict:
            return {"eps_min": r.eps_min, "violation_ratio": r.violation_ratio, "dominates": r.dominates}

        return {"candidate": self.candidate, "baseline": self.baseline, "better": self.better,
                "threshold": self.threshold, "confidence_level": self.candidate_better.confidence_level,
                "num_comparisons": self.num_comparisons, "bootstrap_iterations":
                    self.candidate_better.num_bootstrap_iterations,
                "runs": {self.candidate: self.candidate_better.n_a, self.baseline: self.candidate_better.n_b},
                "candidate_better": one(self.candidate_better), "baseline_better": one(self.baseline_better),
                "winner": self.winner}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"direction": f"{a} better than {b}", "eps_min": r.eps_min,
                              "violation_ratio": r.violation_ratio, "dominates": r.dominates}
                             for a, b, r in [(self.candidate, self.baseline, self.candidate_better),
                                             (self.baseline, self.candidate, self.baseline_better)]])

    def sentence(self) -> str:
        c, b = self.candidate_better, self.baseline_better
        found = (f"{self.winner} is almost stochastically better" if self.winner else
                 "neither system is almost stochastically better")
        return (f"ASO on the run means ({c.n_a} vs {c.n_b} runs, deepsig's threshold eps_min < {self.threshold:g}): "
                f"{found} (eps_min = {c.eps_min:.3f} for {self.candidate} over {self.baseline}, "
                f"{b.eps_min:.3f} the other way).")

    def __repr__(self) -> str:
        return (f"ASOReading({self.candidate} vs {self.baseline}: eps_min {self.candidate_better.eps_min:.3f} / "
                f"{self.baseline_better.eps_min:.3f}, winner {self.winner})")


def run_means(runs: pd.DataFrame, system: str) -> dict:
    """{system: array of its per-run means} from a run table (:func:`vrs_helpers.evaluate.tables.steps.run_table`)."""
    return {str(s): part["mean"].to_numpy(dtype=float) for s, part in runs.groupby(system, sort=False, observed=True)}


def aso_readings(means: dict, baseline: str, higher_is_better: bool = True, seed: int = 0,
                 threshold: float = DEEPSIG_THRESHOLD, min_runs: int = 2) -> tuple[dict, list]:
    """ASO in both directions of every other system against ``baseline`` on the per-run means ``{system:
    array}``; returns ({candidate: :class:`ASOReading`}, notes). Systems with fewer than ``min_runs`` runs (and
    all of them when the baseline has fewer) are left out with a note: with one run ASO compares a single number
    with a distribution. The confidence level is Bonferroni-adjusted for the number of candidates
    (deepsig's ``num_comparisons``); each ASO call gets its own seed, spawned from ``seed``."""
    sign = 1.0 if higher_is_better else -1.0
    candidates = [s for s in means if s != baseline]
    few = {s: len(v) for s, v in means.items() if len(v) < min_runs}
    notes = []
    if few:
        notes.append(f"ASO needs at least {min_runs} runs of each system compared; "
                     + ", ".join(f"{s} has {n}" for s, n in few.items())
                     + (": no ASO reading" if baseline in few else ": left out of the ASO readings"))
    if baseline in few:
        return {}, notes
    candidates = [s for s in candidates if s not in few]
    seeds = np.random.SeedSequence(seed).spawn(2 * len(candidates))
    out = {}
    for i, s in enumerate(candidates):
        a, b = sign * means[s], sign * means[baseline]
        kw = dict(confidence_level=ASO_CONFIDENCE, num_comparisons=max(1, len(candidates)),
                  num_bootstrap_iterations=ASO_ITERATIONS, threshold=threshold)
        out[s] = ASOReading(s, baseline, "higher" if higher_is_better else "lower",
                            aso(a, b, seed=seeds[2 * i], **kw), aso(b, a, seed=seeds[2 * i + 1], **kw),
                            max(1, len(candidates)))
    return out, notes


# ----------------------------------------------------------------------------------------- expected best of n

@dataclass
class ExpectedBest:
    """The expected best score of n runs of one system, n = 1 .. the observed runs (Dodge et al. 2019)."""

    system: str
    best: str                 # "max" (higher is better) or "min"
    table: pd.DataFrame       # n, expected, ci_low, ci_high
    level: float
    runs: int = field(default=0)

    def to_dict(self) -> dict:
        return {"best": self.best, "runs": self.runs, "level": self.level,
                "table": self.table.to_dict("records")}

    def to_frame(self) -> pd.DataFrame:
        return self.table.assign(system=self.system)[["system", *self.table.columns]]

    def __repr__(self) -> str:
        last = self.table.iloc[-1]
        return (f"ExpectedBest({self.system}: E[{self.best} of {int(last['n'])} runs] = {last['expected']:.4g} "
                f"[{last['ci_low']:.4g}, {last['ci_high']:.4g}])")


def expected_best(values, system: str, higher_is_better: bool = True, level: float = EXPECTED_MAX_LEVEL,
                  n_boot: int = EXPECTED_MAX_BOOT, seed: int = 0) -> ExpectedBest:
    """:func:`vrs_helpers.book.stochastic_order.expected_max` of the run scores (of their negatives when lower is
    better: the expected minimum), for n = 1 .. the number of runs, with its percentile bootstrap interval."""
    sign = 1.0 if higher_is_better else -1.0
    t = expected_max(sign * np.asarray(values, dtype=float), level=level, n_boot=n_boot, seed=seed).to_frame()
    lo, hi = (t["ci_low"], t["ci_high"]) if higher_is_better else (-t["ci_high"], -t["ci_low"])
    table = pd.DataFrame({"n": t["n"].astype(int), "expected": sign * t["expected_max"], "ci_low": lo,
                          "ci_high": hi})
    return ExpectedBest(system, "max" if higher_is_better else "min", table, float(level), len(np.ravel(values)))


def expected_best_by_system(means: dict, higher_is_better: bool = True, seed: int = 0) -> dict:
    """{system: :class:`ExpectedBest`} for every system (a system with one run gets its run's score)."""
    seeds = np.random.SeedSequence(seed).spawn(max(1, len(means)))
    return {s: expected_best(v, s, higher_is_better, seed=seeds[i]) for i, (s, v) in enumerate(means.items())}


# ------------------------------------------------------------------------------------------------ readings

def reliability_sentence(system, r, needed: dict, target: float, max_runs: int) -> str:
    """One system's phi in words that agree with its numbers: the observed levels it rests on, its band (Koo & Li),
    whether it reaches ``target``, and the levels of each replication column that would (``needed``)."""
    levels = ", ".join(f"{v:g} level(s) of {f}" for f, v in r.n.items())
    on = f" with {levels}" if levels else ""
    reached = r.phi >= target
    where = (f"reaching the target {target:g}" if reached else f"below the target {target:g}")
    more = ""
    if not reached:
        more = "".join(f"; {k} level(s) of {f} would reach it" if k else
                       f"; no number of levels of {f} up to {max_runs} reaches it" for f, k in needed.items())
    return f"Reliability of {system}: phi = {r.phi:.3f}{on} ({r.interpretation} on Koo & Li's bands, {where}){more}."



def _row(comparison, kind, reading, test, statistic, df, p, criterion, differ) -> dict:
    return {"comparison": comparison, "kind": kind, "reading": reading, "test": test,
            "statistic": None if statistic is None else float(statistic), "df": df,
            "p_value": None if p is None else float(p), "criterion": criterion,
            "differ": None if differ is None else bool(differ)}


def _contrast(frame: pd.DataFrame, a: str, b: str, index: dict | None = None):
    """The row of contrast a - b (or b - a) of a Tukey table, or None. ``index`` (:func:`_contrast_index` of
    ``frame``) finds it without a scan of the table (k (k - 1) / 2 pairs: 4,950 scans of 4,950 rows for 100
    systems, issue 54)."""
    if frame is None or "contrast" not in frame:
        return None
    if index is not None:
        rows, hits = index
        found = hits.get(f"{a} - {b}", []) + (hits.get(f"{b} - {a}", []) if a != b else [])
        return rows[found[0]] if len(found) == 1 and "p_value" in frame else None
    hit = frame[frame["contrast"].isin([f"{a} - {b}", f"{b} - {a}"])]
    if "p_value" not in hit or len(hit) != 1:
        return None
    return hit.iloc[0]


def _contrast_index(frame: pd.DataFrame | None):
    """The rows of a contrast table as dicts and the positions of each label: :func:`_contrast`'s lookup."""
    if frame is None or "contrast" not in frame:
        return None
    hits: dict = {}
    for i, c in enumerate(frame["contrast"].astype(str)):
        hits.setdefault(c, []).append(i)
    return frame.to_dict("records"), hits


def readings_frame(result) -> pd.DataFrame:
    """One row per reading of an analysis: ``comparison`` (all systems, or a system vs the baseline), ``kind``
    (replications, random, conditional, paired, aso), ``reading``, ``test``, ``statistic``, ``df``, ``p_value``
    (None for ASO, whose statistic is eps_min), ``criterion`` and ``differ``. With two systems the mixed-model
    tests compare the pair; with more, each system's pair readings use the Tukey-adjusted contrasts of both
    models (z tests)."""
    alpha, systems = result.alpha, [str(s) for s in result.systems]
    rows = []
    crit = f"p < {alpha:g}"
    everyone = "all systems" if len(systems) > 2 else f"{systems[-1]} vs {systems[0]}" if len(systems) == 2 else ""
    if result.glrt is not None:
        g = result.glrt
        rows.append(_row(everyone, "replications", "runs as replications", g.method, g.statistic, g.df_text(),
                         g.p_value, crit, g.p_value < alpha))
    e = getattr(result, "exact", None)
    if e is not None:
        rows.append(_row(everyone, "exact", "exact test on the items (one run, few items)", e.method, e.statistic,
                         "", e.p_value, crit, e.p_value < alpha))
    t = result.random_test
    if t is not None:
        p = t.stated_p
        rows.append(_row(everyone, "random", "runs as a random effect", t.method, t.statistic, t.df_text(), p, crit,
                         p < alpha))
    for prop, c in result.conditional.items():
        rows.append(_row("all systems", "conditional", f"the systems differ once {prop} is accounted for",
                         c.glrt.method, c.glrt.statistic, c.glrt.df_text(), c.glrt.p_value, crit,
                         c.glrt.p_value < alpha))
        t = getattr(result, "interactions", {}).get(prop)
        if t is not None:
            rows.append(_row("all systems", "interaction", f"the difference depends on {prop}", t.method,
                             t.statistic, t.df_text(), t.p_value, crit, t.p_value < alpha))
    base = systems[0] if systems else ""
    index = {id(c): _contrast_index(c.contrasts) for c in (result.comparison, result.comparison_random)
             if c is not None}
    for cand in systems[1:]:
        pair = f"{cand} vs {base}"
        if len(systems) > 2:
            rows += _pairwise_rows(result, base, cand, crit, index)
        if result.paired is not None and len(result.paired):
            for _, r in result.paired[result.paired["system"].astype(str) == cand].iterrows():
                rows.append(_row(pair, "paired", f"{r['test']} on per-item means", f"{r['test']} (difference)",
                                 r["difference"], "", r["p_value"], crit, r["p_value"] < alpha))
        a = result.aso.get(cand) if result.aso else None
        if a is not None:
            for x, y, res in [(cand, base, a.candidate_better), (base, cand, a.baseline_better)]:
                rows.append(_row(pair, "aso", f"ASO on run means: {x} better than {y}", "ASO (eps_min)",
                                 res.eps_min, "", None, f"eps_min < {res.threshold:g}", res.dominates))
    for i, a in enumerate(systems[1:], 1):  # the pairs without the baseline: the family's other contrasts
        for b in systems[i + 1:]:
            rows += _pairwise_rows(result, a, b, crit, index)
    return pd.DataFrame(rows, columns=["comparison", "kind", "reading", "test", "statistic", "df", "p_value",
                                       "criterion", "differ"])


def _pairwise_rows(result, a: str, b: str, crit: str, index: dict | None = None) -> list:
    """The rows of pair ``b vs a`` from the Tukey-adjusted contrasts of both mixed-model readings: z tests with the
    runs as replications (the book's Tables 4.2/4.3), t tests on Kenward-Roger (or Satterthwaite) df with the runs
    random (Tukey on those df, as emmeans with ``lmer.df``). Each decision is family-wise: the adjusted p of all
    k (k - 1) / 2 contrasts at alpha (a separated system's pairs are not estimable and out of the family, issue 39:
    the k' systems left form it)."""
    rows = []
    for kind, reading, comp in [("replications", "runs as replications", result.comparison),
                                ("random", "runs as a random effect", result.comparison_random)]:
        r = _contrast(None if comp is None else comp.contrasts, a, b, (index or {}).get(id(comp)))
        if r is None:
            continue
        adjust = getattr(comp, "adjust", "tukey")
        adjusted = ("contrast decided by the bootstrap LRT of the pair (the separated systems left out)"
                    if adjust == "bootstrap LRT of the pair" else f"{adjust.capitalize()}-adjusted contrast")
        if "t" in r and "df" in r:
            test, stat, df = f"{adjusted} (t, {_df_name(comp)} df)", r["t"], f"{r['df']:.4g}"
        else:
            test, stat, df = f"{adjusted} (z)", r["z"], ""
        p = float(r["p_value"])
        if not np.isfinite(p):   # a separated system: the contrast was not computed - no decision either way
            why = ", ".join(f"{s} {result.separated[s]}" for s in (a, b) if s in getattr(result, "separated", {}))
            rows.append(_row(f"{b} vs {a}", kind, reading, test, None, df, None,
                             f"not estimable ({why})" if why else "not estimable", None))
            continue
        rows.append(_row(f"{b} vs {a}", kind, reading, test, stat, df, p, crit, p < result.alpha))
    return rows


def _df_name(comp) -> str:
    test = comp.test
    return "Satterthwaite" if "Satterthwaite" in str(getattr(test, "method", "")) else "Kenward-Roger"


def _evidence(rows: pd.DataFrame) -> str:
    if rows["kind"].iloc[0] == "aso":
        parts = [f"eps_min = {v:.3f} for {r.split(': ', 1)[-1].split(' than ')[0]}"
                 for r, v in zip(rows["reading"], rows["statistic"], strict=True)]
        return ", ".join(parts) + f"; threshold {rows['criterion'].iloc[0].split('< ')[-1]}"
    return "p " + " and ".join(_p_is(p) for p in rows["p_value"])


def _p_is(p) -> str:
    """'= 0.0123', or '< 1e-300' below the floor (:func:`vrs_helpers.outcomes.p_text`): never "p = 0"."""
    text = p_text(p)
    return text if text.startswith("<") else f"= {text}"


def disagreements(result, frame: pd.DataFrame | None = None) -> list[str]:
    """One sentence per pair of readings of a system against the baseline that reach different decisions, saying
    which source of variation each one ignores (:data:`IGNORES`). The paired bootstrap and permutation tests count
    as one reading while they agree."""
    frame = readings_frame(result) if frame is None else frame
    out = []
    pairs = frame[~frame["kind"].isin(["conditional", "interaction"]) & (frame["comparison"] != "all systems")]
    # a contrast not estimable decides nothing. Which comparisons have a sentence at all is found by one grouping
    # of the decisions (499,500 pairs of 1,000 systems: a group per pair and reading would take a minute); only
    # their rows are then grouped for the sentences
    kept = pairs[pairs["differ"].notna()]
    if kept.empty:
        return out
    flags = kept.assign(differ=kept["differ"].astype(bool)).groupby(["comparison", "kind"], sort=False)["differ"]
    wide = flags.any().unstack("kind")
    wide = wide[[k for k in IGNORES if k in wide.columns]].astype(float)
    split = wide.max(axis=1) != wide.min(axis=1)
    if "paired" in wide.columns:
        split |= flags.nunique().unstack("kind")["paired"].reindex(wide.index).fillna(1) > 1
    said = set(wide.index[split.to_numpy()])
    kept = kept[kept["comparison"].isin(said)]
    decided = dict(list(kept.groupby(["comparison", "kind"], sort=False)))
    for comparison in [c for c in pd.unique(pairs["comparison"]) if c in said]:
        decisions = {}
        for kind in IGNORES:
            rows = decided.get((comparison, kind))
            if rows is None or not len(rows):
                continue
            if kind == "paired" and rows["differ"].nunique() > 1:
                out.append(f"{comparison}: the paired bootstrap ({_evidence(rows.iloc[[0]])}) and permutation test "
                           f"({_evidence(rows.iloc[[1]])}) see the same per-item means and differ only in how they "
                           "simulate the null: p is close to alpha.")
            decisions[kind] = (bool(rows["differ"].any()), rows)
        kinds = list(decisions)
        for i, x in enumerate(kinds):
            for y in kinds[i + 1:]:
                (dx, ex), (dy, ey) = decisions[x], decisions[y]
                if dx == dy:
                    continue
                yes, no = (x, y) if dx else (y, x)
                ev = {x: _evidence(ex), y: _evidence(ey)}  # only where two readings disagree (4,950 pairs)
                plural = {"paired"}
                out.append(f"{comparison}: {IGNORES[yes][0]} find{'' if yes in plural else 's'} a difference "
                           f"({ev[yes]}), {IGNORES[no][0]} do{'' if no in plural else 'es'} not ({ev[no]}): the "
                           f"former {IGNORES[yes][1]}, the latter {IGNORES[no][1]}.")
    return out


# ------------------------------------------------------------------------------------------------ the verdict box

def _fmt(v, digits=4) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return ""
    return f"{v:.{digits}g}" if isinstance(v, (float, np.floating)) else html.escape(str(v))


def verdict_html(frame: pd.DataFrame, lines=(), title: str = "Verdict", caption: str = "",
                 ranking: pd.DataFrame | None = None) -> str:
    """The report's verdict box: every reading with its test, statistic, df, p-value (eps_min for ASO) and
    decision in one table (a ``metric`` and a ``p_holm`` column when the frame has them), then ``lines`` (the
    disagreement sentences, warnings). Plain HTML with inline styles: it reads the same offline and in a
    notebook. Every text is escaped, and the box is kept from MathJax (:mod:`vrs_helpers.literal`): names from the
    data are shown as they are.

    ``ranking`` (three or more systems, :func:`vrs_helpers.evaluate.tables.ranking.ranking_table`): the table keeps the
    readings of all systems at once, and the pairs are summed up by the ranking, one row per system (estimate and
    CI, rank interval, letters), so the box has at most k + 10 rows however many pairs there are."""
    if ranking is not None and "comparison" in frame:
        frame = frame[frame["comparison"] == "all systems"]
    cols = [c for c in ["metric", "comparison", "reading", "test", "statistic", "df", "p_value", "p_holm",
                        "criterion"] if c in frame.columns]
    head = "".join(f"<th style='text-align:left;padding:2px 8px'>{html.escape(c.replace('_', ' '))}</th>"
                   for c in cols + ["decision"])
    body = []
    for _, r in frame.iterrows():
        undecided = r["differ"] is None or (isinstance(r["differ"], float) and np.isnan(r["differ"]))
        colour = "#1a7f37" if not undecided and r["differ"] else "#57606a"
        cells = "".join("<td style='padding:2px 8px'>"
                        + (("" if pd.isna(r[c]) else p_text(r[c], 4)) if c in ("p_value", "p_holm") else _fmt(r[c]))
                        + "</td>" for c in cols)
        if undecided:   # a contrast that was not computed (a separated system): no decision either way
            decision = "not estimable"
        elif r.get("kind") == "aso":
            decision = "dominates" if r["differ"] else "does not dominate"
        else:
            decision = "differ" if r["differ"] else "no difference"
        body.append(f"<tr>{cells}<td style='padding:2px 8px;color:{colour};font-weight:bold'>{decision}</td></tr>")
    rank_rows = ""
    if ranking is not None and len(ranking):
        th = "".join(f"<th style='text-align:left;padding:2px 8px'>{h}</th>"
                     for h in ("rank", "system", "estimate", "95 % CI", "rank interval", "group"))
        trs = "".join(
            f"<tr><td style='padding:2px 8px'>{int(r.rank)}</td><td style='padding:2px 8px'>"
            f"{html.escape(str(r.system))}</td><td style='padding:2px 8px'>{_fmt(r.estimate)}</td>"
            "<td style='padding:2px 8px'>"
            f"[{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]</td><td style='padding:2px 8px'>{int(r.rank_low)}"
            + ("" if r.rank_low == r.rank_high else f"-{int(r.rank_high)}")
            + f"</td><td style='padding:2px 8px;font-family:monospace'>{html.escape(str(r.group))}</td></tr>"
            for r in ranking.itertuples())
        method = html.escape(str(ranking["method"].iloc[0])) if "method" in ranking else ""
        rank_rows = (f"<p style='margin:8px 0 4px 0;font-size:13px'><b>Ranking</b> ({method}; systems sharing a "
                     "letter are not separated; every pair in summary.json)</p>"
                     f"<table style='border-collapse:collapse;font-size:13px'><thead><tr>{th}</tr></thead>"
                     f"<tbody>{trs}</tbody></table>")
    items = "".join(f"<li>{html.escape(str(s))}</li>" for s in lines)
    return (f"<div id='vrs-verdict' class='{NO_MATH_CLASS}' style='border:2px solid #0969da;border-radius:6px;"
            f"padding:10px 14px;background:#f6f8fa;font-family:sans-serif'>"
            f"<h2 style='margin:0 0 6px 0'>{html.escape(title)}</h2>"
            + (f"<p style='margin:0 0 6px 0'>{html.escape(caption)}</p>" if caption else "")
            + f"<table style='border-collapse:collapse;font-size:13px'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>" + rank_rows
            + (f"<ul style='margin:8px 0 0 0;font-size:13px'>{items}</ul>" if items else "") + "</div>")
