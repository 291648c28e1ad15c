"""The judge-corrected readings of a score table whose response is a judge's (an LLM judge's or a classifier's) score
and some of whose rows humans also labelled (issue 43; ``vrs analyze --human COL`` or ``--human-labels FILE``).

The unit is the item: per system and item, the judge's score is its mean over the item's rows (runs, repeats) and
the human label the mean of the labels given to them. Per system: the judge-only (naive) mean, the human-only mean,
PPI++ and PPI, and for 0/1 scores MBM's correction with precision and FOR estimated
(:mod:`vrs_helpers.evaluate.tables.judge`), each with its small-sample interval (Student's t; PPI on Welch-Satterthwaite
df). Each system against the baseline: the same readings of the paired per-item
difference, the corrected p-values Holm-adjusted over the systems (statsmodels ``multipletests``) when there are
three or more. The judge against the humans: Krippendorff's alpha (:func:`vrs_helpers.book.agreement.
krippendorff_alpha`, nominal for 0/1 scores, else interval), the confusion matrix (scores with at most 10 values)
and the test of whether the judge's error differs by system.

PPI++'s lambda is cross-fitted (:func:`vrs_helpers.evaluate.tables.judge.ppi_crossfit_mean`, 5 folds of the labelled
items): tuned on the labels it weights it rejected 6.6-7.1 % of true nulls in benchmarks/judge_type_one_error.py.

With runs (``runs``: the replication columns, two or more runs per system) and every run judged on the same items,
humans labelling the same items in every run, the verdict's reading is PPI composed with the runs-random model
(:func:`vrs_helpers.evaluate.tables.judge.ppi_runs_difference`: the item part from the per-item means over the runs,
plus
each system's run variance component); the other readings average the runs within each item and are about these
runs (their intervals lack the run-to-run variation). Where the runs are not so balanced (an item missing from a
run, or labelled in some runs only), the correction cannot be composed with the runs: the verdict says so first and
gives no corrected verdict about runs like these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...outcomes import p_is
from . import judge as J
from . import judge_labels as J_labels
from .scores import InputError

#: the corrected reading that opens the verdict without runs (the other readings follow it): PPI with lambda 1 on
#: Welch's t, the one whose level held in every cell of benchmarks/judge_type_one_error.py; PPI++ (cross-fitted
#: lambda) is reported beside it. With runs the verdict's reading is "PPI, runs random" (JudgeAnalysis.primary)
PRIMARY = "PPI"
MAX_LEVELS = 10   # scores with at most this many distinct values get a confusion matrix
FOLDS = 5         # PPI++'s cross-fitting folds (fewer with fewer than 10 labelled items)
#: every reading on Student's t (Welch df for PPI): the level holds with 40 labels (benchmarks/judge_type_one_error.py)
T = {"small_sample": True}


@dataclass
class JudgeAnalysis:
    """The judge-corrected readings of one response (module docstring); ``to_summary()`` is summary.json's
    ``"judge"``."""

    response: str
    human: str
    systems: list
    alpha: float
    binary: bool
    means: dict = field(default_factory=dict)         # system -> {method: judge.Estimate}
    differences: dict = field(default_factory=dict)   # system -> {method: judge.Estimate} (system - baseline)
    adjusted: dict = field(default_factory=dict)      # system -> Holm-adjusted p of the primary difference
    labelled: dict = field(default_factory=dict)      # system -> labelled items
    items: dict = field(default_factory=dict)         # system -> judged items
    agreement: dict = field(default_factory=dict)
    error_by_system: object = None
    verdict: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    primary: str = PRIMARY                            # the reading of the verdict ("PPI, runs random" with runs)
    runs: dict = field(default_factory=dict)          # system -> runs (with runs)
    runs_status: str = "none"                         # "none", "random" (composed), "not composable"

    def to_summary(self) -> dict:
        return {
            "response": self.response, "human": self.human, "primary": self.primary, "binary": self.binary,
            "runs": dict(self.runs) or None, "runs_model": self.runs_status,
            "baseline": str(self.systems[0]),
            "labelled_items": dict(self.labelled), "judged_items": dict(self.items),
            "means": {s: {m: e.as_dict() for m, e in d.items()} for s, d in self.means.items()},
            "differences": {s: {m: e.as_dict() for m, e in d.items()} for s, d in self.differences.items()},
            "p_holm": dict(self.adjusted) or None,
            "agreement": self.agreement,
            "error_by_system": None if self.error_by_system is None else self.error_by_system.as_dict(),
            "verdict": list(self.verdict), "notes": list(self.notes),
        }

    def frame(self) -> pd.DataFrame:
        """Every reading in one table: system, what (mean or difference), method, estimate, CI and p."""
        rows = []
        for kind, table in (("mean", self.means), ("difference vs " + str(self.systems[0]), self.differences)):
            for s, d in table.items():
                for m, e in d.items():
                    rows.append({"system": s, "what": kind, "method": m, "estimate": e.estimate,
                                 "lower": e.lower, "upper": e.upper,
                                 "p_value": e.p_value if kind != "mean" else np.nan})
        return pd.DataFrame(rows)


def item_table(table: pd.DataFrame, response: str, system: str, item: str, human: str) -> pd.DataFrame:
    """Per system and item: ``judge`` (the mean of the judge's scores over the item's rows) and ``human`` (the mean
    of its labels; NaN where no row was labelled)."""
    g = table.groupby([system, item], observed=True, sort=True)
    out = pd.DataFrame({"judge": g[response].mean(), "human": g[human].mean()}).reset_index()
    out[system] = out[system].astype(str)
    return out


def check_labels(table: pd.DataFrame, response: str, system: str, item: str, human: str, systems) -> None:
    """Bad labels, each an :class:`InputError` that says what to do: labels that are not numbers, outside the
    judge's scale (0/1 for a 0/1 judge, else the range of its scores), a system without labelled rows, or with
    fewer than 2 labelled items or none unlabelled. Items labelled for one system only are used (issue 52:
    :mod:`vrs_helpers.evaluate.tables.judge_labels`)."""
    lab = pd.to_numeric(table[human], errors="coerce")
    bad = table[human].notna() & lab.isna()
    if bad.any():
        first = table.loc[bad, human].iloc[0]
        raise InputError(f"The human labels in {human!r} must be numbers on the judge's scale; {int(bad.sum())} are "
                         f"not (the first: {first!r}). Encode them as the judge's scores are encoded, or leave the "
                         "row empty where no human labelled it.")
    judge = table[response].astype(float)
    lo, hi = float(judge.min()), float(judge.max())
    binary = set(np.unique(judge)) <= {0.0, 1.0}
    given = lab.dropna()
    outside = ~given.isin([0.0, 1.0]) if binary else (given < lo) | (given > hi)
    if outside.any():
        scale = "0 or 1 (the judge's scores are 0/1)" if binary else f"within the judge's range [{lo:g}, {hi:g}]"
        raise InputError(f"{int(outside.sum())} human label(s) in {human!r} lie outside the judge's scale (the "
                         f"first: {given[outside].iloc[0]:g}); labels must be {scale}. Put the labels on the "
                         "judge's scale (e.g. map a 1-5 rating to the judge's 0-1) before the analysis.")
    counts = table.assign(_lab=lab.notna()).groupby(system, observed=True)["_lab"].sum()
    counts.index = counts.index.astype(str)
    for s in systems:
        if int(counts.get(s, 0)) == 0:
            raise InputError(f"No row of system {s!r} has a human label in {human!r}: the correction estimates each "
                             "system's judge error from its own labelled rows. Label a random sample of that "
                             "system's items (30 or more is a good start; vrs plan --judge says how many).")
    items = item_table(table.assign(**{human: lab}), response, system, item, human)
    for s in systems:
        d = items[items[system] == s]
        lab_s = d["human"].notna()
        if lab_s.sum() < 2 or (~lab_s).sum() < 1:
            raise InputError(f"System {s!r} has {int(lab_s.sum())} labelled of {len(d)} items: the correction needs "
                             "at least 2 labelled items and 1 unlabelled one per system. Label more items (or fewer "
                             "than all of them).")


def merge_labels(table: pd.DataFrame, labels: pd.DataFrame, keys: list, human: str) -> pd.DataFrame:
    """``table`` with the column ``human`` from a separate file of labels keyed by ``keys`` (the item, and the
    system and replication columns the file has). Labels of a key that is not in the data, and a key labelled twice,
    are :class:`InputError`."""
    missing = [k for k in keys if k not in labels.columns]
    if missing or human not in labels.columns:
        raise InputError(f"The file of human labels needs the column(s) {', '.join(map(repr, [*missing, human]))}"
                         f" (it has {', '.join(map(repr, labels.columns))}): one row per labelled item (and "
                         "system), the label in the column named by --human (default 'human').")
    if human in table.columns:
        raise InputError(f"The score table already has a column {human!r}: give the labels either there "
                         "(--human) or in a file (--human-labels), and name the file's label column otherwise.")
    lab = labels[[*keys, human]].dropna(subset=[human]).copy()
    for k in keys:
        lab[k] = lab[k].astype(str)
    dup = lab.duplicated(keys)
    if dup.any():
        raise InputError(f"The file of human labels labels {int(dup.sum())} key(s) twice (the first: "
                         f"{tuple(lab.loc[dup, keys].iloc[0])}): give one label per key.")
    known = table[keys].astype(str).drop_duplicates()
    joined = lab.merge(known, on=keys, how="left", indicator=True)
    stray = joined[joined["_merge"] == "left_only"]
    if len(stray):
        raise InputError(f"{len(stray)} human label(s) are for {'/'.join(keys)} not in the data (the first: "
                         f"{tuple(stray[keys].iloc[0])}): check that the file's keys are spelled as in the score "
                         "table, or drop those labels.")
    out = table.copy()
    left = out[keys].astype(str)
    merged = left.merge(lab, on=keys, how="left")
    out[human] = merged[human].to_numpy()
    return out


def run_arrays(table: pd.DataFrame, response: str, system: str, item: str, human: str, runs, s: str, items):
    """System ``s``'s judge scores and labels as (runs, items) arrays (``items`` in that order; a run is a
    combination of the ``runs`` columns, rows of one run and item averaged), and the labelled items' mask; None when
    an item is missing from a run or the runs' labelled items differ (the composition does not apply)."""
    d = table[table[system].astype(str) == s]
    key = d[list(runs)].astype(str).agg("|".join, axis=1)
    d = d.assign(_run=key.to_numpy(), _item=d[item].astype(str).to_numpy())
    g = d.groupby(["_run", "_item"], sort=True)
    j = g[response].mean().unstack("_item").reindex(columns=items)
    h = g[human].mean().unstack("_item").reindex(columns=items)
    if j.isna().to_numpy().any():
        return None
    mask = h.notna().to_numpy()
    if not (mask == mask[0]).all():
        return None
    return j.to_numpy(dtype=float), h.to_numpy(dtype=float), mask[0]


def _with_runs(out: JudgeAnalysis, table, response, system, item, human, runs, level) -> None:
    """The readings composed with the runs-random model (module docstring) into ``out``, or the status that they do
    not apply."""
    counts = {s: int(table.loc[table[system].astype(str) == s, list(runs)].drop_duplicates().shape[0])
              for s in out.systems}
    if max(counts.values()) < 2:
        return
    out.runs = counts
    if min(counts.values()) < 2:   # a system with one run: no run variance of its own to estimate
        out.runs_status = "not composable"
        return
    items = sorted(table[item].astype(str).unique())
    arrays = {s: run_arrays(table, response, system, item, human, runs, s, items) for s in out.systems}
    if any(a is None for a in arrays.values()):
        out.runs_status = "not composable"
        return
    base = out.systems[0]
    for s, (j, h, lab) in arrays.items():
        if lab.sum() < 2 or (~lab).sum() < 2:
            out.runs_status = "not composable"
            return
        out.means[s]["PPI, runs random"] = J.ppi_runs_mean(h[:, lab], j[:, lab], j[:, ~lab], level=level)
        out.means[s]["human only, runs random"] = J.ppi_runs_mean(h[:, lab], j[:, lab], j[:, ~lab], lam=0.0,
                                                                  level=level)
    ja, ha, la = arrays[base]
    for s in out.systems[1:]:
        jb, hb, lb = arrays[s]
        lab = la & lb
        if lab.sum() < 2 or (~lab).sum() < 2:
            out.runs_status = "not composable"
            return
        pair = (ha[:, lab], hb[:, lab], ja[:, lab], jb[:, lab], ja[:, ~lab], jb[:, ~lab])
        out.differences[s]["PPI, runs random"] = J.ppi_runs_difference(*pair, level=level)
        out.differences[s]["human only, runs random"] = J.ppi_runs_difference(*pair, lam=0.0, level=level)
    out.runs_status = "random"
    out.primary = "PPI, runs random"


def analyze_judge(table: pd.DataFrame, response: str, system: str, item: str, human: str, systems: list,
                  alpha: float = 0.05, higher_is_better: bool = True, runs=()) -> JudgeAnalysis:
    """The judge-corrected readings (module docstring) of a validated table; ``systems`` in analysis order, the
    baseline first; ``runs`` the replication columns (the runs-random composition when each system has 2 or more
    runs)."""
    from statsmodels.stats.multitest import multipletests

    from ...book.agreement import krippendorff_alpha

    systems = [str(s) for s in systems]
    check_labels(table, response, system, item, human, systems)
    items = item_table(table, response, system, item, human)
    binary = bool(set(np.unique(items["judge"])) <= {0.0, 1.0} and
                  set(np.unique(items["human"].dropna())) <= {0.0, 1.0})
    level = 1 - alpha
    out = JudgeAnalysis(response, human, systems, alpha, binary)
    wide = {col: items.pivot(index=item, columns=system, values=col) for col in ("judge", "human")}
    for s in systems:
        d = items[items[system] == s]
        lab = d["human"].notna().to_numpy()
        out.labelled[s], out.items[s] = int(lab.sum()), len(d)
        if lab.sum() < 2 or (~lab).sum() < 1:
            raise InputError(f"System {s!r} has {int(lab.sum())} labelled of {len(d)} items: the correction needs "
                             "at least 2 labelled items and 1 unlabelled one per system. Label more items (or fewer "
                             "than all of them).")
        y, yhat, yu = d["human"].to_numpy()[lab], d["judge"].to_numpy()[lab], d["judge"].to_numpy()[~lab]
        m = {"judge only": J.classical_mean(d["judge"], level, method="judge only", **T),
             "human only": J.classical_mean(y, level, method="human only", **T),
             "PPI": J.ppi_mean(y, yhat, yu, lam=1.0, level=level, **T)}
        if len(y) >= 4:
            m["PPI++"] = J.ppi_crossfit_mean(y, yhat, yu, folds=min(FOLDS, len(y) // 2), level=level, **T)
        if binary:
            m["MBM"] = J.mbm_mean(d["judge"], y, yhat, level, **T)
        out.means[s] = m
    base = systems[0]
    for s in systems[1:]:
        both = wide["judge"][[base, s]].dropna()
        hum = wide["human"].reindex(both.index)[[base, s]]
        lab = hum.notna().all(axis=1).to_numpy()
        ja, jb = both[base].to_numpy(), both[s].to_numpy()
        # PPI with every label of each system (issue 52): the difference of the two PPI means shown, its SE over the
        # strata of items (labelled for both, for one, for neither); the paired PPI where the label sets are equal
        every = J_labels.ppi_difference_all_labels(wide["judge"][base], wide["judge"][s], wide["human"][base],
                                                   wide["human"][s], level=level, **T)
        if lab.sum() < 2 or (~lab).sum() < 1:
            out.differences[s] = {"judge only": J.classical_mean(jb - ja, level, method="judge only", **T),
                                  "PPI": every}
            out.notes.append(f"{s} - {base}: {int(lab.sum())} item(s) labelled for both systems, so only PPI (every "
                             "label of each system) and the judge alone give the difference; the humans-only, PPI++ "
                             "and MBM paired differences need 2 or more items labelled for both.")
            continue
        if int(lab.sum()) < min(out.labelled[base], out.labelled[s]):
            out.notes.append(f"{s} - {base}: PPI's difference uses every label ({out.labelled[base]} items of {base}, "
                             f"{out.labelled[s]} of {s}) and equals the difference of the PPI means; the humans-only, "
                             f"PPI++ and MBM differences use the {int(lab.sum())} items labelled for both.")
        ya, yb = hum[base].to_numpy()[lab], hum[s].to_numpy()[lab]
        pair = (ya, yb, ja[lab], jb[lab], ja[~lab], jb[~lab])
        diff = {"judge only": J.classical_mean(jb - ja, level, method="judge only", **T),
                "human only": J.classical_mean(yb - ya, level, method="human only", **T),
                "PPI": every}
        if lab.sum() >= 4:
            diff["PPI++"] = J.ppi_crossfit_difference(*pair, folds=min(FOLDS, int(lab.sum()) // 2), level=level,
                                                      **T)
        if binary:
            diff["MBM"] = J.mbm_difference(np.r_[ja[lab], ja[~lab]], np.r_[jb[lab], jb[~lab]], ya, yb, ja[lab],
                                           jb[lab], level, **T)
        out.differences[s] = diff
    if runs:
        _with_runs(out, table, response, system, item, human, runs, level)
    if len(systems) >= 3:
        ps = [out.differences[s][out.primary].p_value for s in systems[1:]]
        out.adjusted = dict(zip(systems[1:], map(float, multipletests(ps, method="holm")[1]), strict=True))
    labelled = items[items["human"].notna()]
    ratings = np.vstack([labelled["judge"].to_numpy(), labelled["human"].to_numpy()])
    kind = "nominal" if binary else "interval"
    a = krippendorff_alpha(ratings, kind, _warn=False).alpha
    out.agreement = {"krippendorff_alpha": float(a), "level": kind, "units": int(len(labelled)),
                     "correlation": float(np.corrcoef(ratings)[0, 1]) if len(labelled) > 2 else None}
    if labelled["judge"].nunique() <= MAX_LEVELS and labelled["human"].nunique() <= MAX_LEVELS:
        conf = pd.crosstab(labelled["judge"], labelled["human"]).sort_index().sort_index(axis=1)
        out.agreement["confusion"] = {"rows": "judge", "columns": "human",
                                      "labels": [float(v) for v in conf.columns],
                                      "judge_values": [float(v) for v in conf.index],
                                      "counts": conf.to_numpy().astype(int).tolist()}
    errors = {s: (g["judge"] - g["human"]).to_numpy() for s, g in labelled.groupby(system, observed=True)}
    if len(systems) >= 2:
        out.error_by_system = J.judge_error_by_system({s: errors[s] for s in systems})
    out.verdict = verdict_lines(out, higher_is_better)
    return out


def _said(e, alpha, a: str, b: str, higher_is_better: bool, p=None) -> str:
    p = e.p_value if p is None else p
    ci = f"{e.estimate:+.4g}, {100 * e.level:g} % CI [{e.lower:.4g}, {e.upper:.4g}], p {p_is(p)}"
    if p < alpha:
        better = (e.estimate > 0) == higher_is_better
        return f"{b if better else a} is better than {a if better else b} ({ci})"
    return f"no evidence that {a} and {b} differ ({ci})"


def verdict_lines(out: JudgeAnalysis, higher_is_better: bool = True) -> list:
    """The corrected verdict first (``out.primary`` per system against the baseline; with runs that cannot be
    composed, first the sentence that says the correction ignores the run-to-run variation), then the judge-only
    reading, MBM's for 0/1 scores, the judge's agreement and whether its error differs by system, and a warning when
    the naive and the corrected verdicts disagree."""
    base, lines, alpha, primary = out.systems[0], [], out.alpha, out.primary
    n_lab = ", ".join(f"{s} {out.labelled[s]} of {out.items[s]}" for s in out.systems)
    runs = ", ".join(f"{s} {r}" for s, r in out.runs.items())
    if out.runs_status == "not composable":
        lines.append(f"With runs ({runs} runs) the correction ignores the run-to-run variation: a system has "
                     "one run, the runs are not judged on the same items, or humans did not label the same items in "
                     "every run, so the correction cannot be composed with the runs-random model. The corrected "
                     "readings below average the runs within each item and are about these runs only, not a verdict "
                     "about runs like these.")
    fixed_runs = "; the runs averaged within items: about these runs only" if out.runs else ""
    for s, d in out.differences.items():
        adj = out.adjusted.get(s)
        holm = " (Holm-adjusted over the systems)" if adj is not None else ""
        if out.runs_status == "random":
            lines.append(f"Corrected for the judge with human labels and the runs random (prediction-powered "
                         f"inference composed with the runs-random model; {runs} runs, {n_lab} items labelled)"
                         f"{holm}: {_said(d[primary], alpha, base, s, higher_is_better, adj)}.")
            lines.append(f"PPI with the runs averaged within items (about these runs only): "
                         f"{_said(d['PPI'], alpha, base, s, higher_is_better)}.")
        else:
            lead = ("About these runs, corrected" if out.runs_status == "not composable" else "Corrected")
            lines.append(f"{lead} for the judge with human labels (prediction-powered inference, {n_lab} items "
                         f"labelled){holm}: {_said(d[primary], alpha, base, s, higher_is_better, adj)}.")
        if "PPI++" in d:
            tuned = d["PPI++"]
            lines.append(f"PPI++ (lambda {tuned.lam:.2f} tuned for power, cross-fitted{fixed_runs}): "
                         f"{_said(tuned, alpha, base, s, higher_is_better)}.")
    if not out.differences:   # one system: its corrected mean, and the judge's beside it
        for d in out.means.values():
            e, naive = d[primary], d["judge only"]
            how = ("prediction-powered inference composed with the runs-random model" if out.runs_status == "random"
                   else "prediction-powered inference" + fixed_runs.replace(";", ","))
            lines.append(f"Corrected for the judge with human labels ({how}, {n_lab} items "
                         f"labelled): the mean is {e.estimate:.4g} ({100 * e.level:g} % CI [{e.lower:.4g}, "
                         f"{e.upper:.4g}]); the judge's scores taken as the truth give {naive.estimate:.4g} "
                         f"([{naive.lower:.4g}, {naive.upper:.4g}]).")
    for s, d in out.differences.items():
        naive, fixed = d["judge only"], d[primary]
        p_fixed = out.adjusted.get(s, fixed.p_value)
        lines.append(f"The judge's scores taken as the truth (naive): "
                     f"{_said(naive, alpha, base, s, higher_is_better)}.")
        if "MBM" in d:
            lines.append(f"MBM's correction (precision and FOR estimated per system): "
                         f"{_said(d['MBM'], alpha, base, s, higher_is_better)}.")
        if (naive.p_value < alpha) != (p_fixed < alpha) or (
                naive.p_value < alpha and p_fixed < alpha and np.sign(naive.estimate) != np.sign(fixed.estimate)):
            lines.append(f"WARNING: for {s} against {base} the naive reading of the judge's scores and the corrected "
                         "one disagree: the judge's error moves the comparison; report the corrected one.")
    a = out.agreement
    text = f"The judge against the humans on {a['units']} labelled items: Krippendorff's alpha ({a['level']}) = " \
           f"{a['krippendorff_alpha']:.3f}"
    e = out.error_by_system
    if e is not None and np.isfinite(e.p_value):
        bias = ", ".join(f"{s} {v:+.3g}" for s, v in e.bias.items())
        text += (f"; its mean error (judge - human) by system: {bias} (F = {e.statistic:.3g} on {e.df} df, "
                 f"p {p_is(e.p_value)})")
        if e.p_value < alpha:
            text += ": the judge's error differs by system, so the naive comparison is biased"
    lines.append(text + ".")
    return lines
