"""Many systems: summary.json holds the pairs up to a bound, the rest in pairs.csv beside it (issue 54).

k systems have k (k - 1) / 2 pairwise contrasts (100 systems: 4,950 per reading, a 3.6 MB summary.json with the
readings' rows of each pair). Up to :data:`MAX_SUMMARY_PAIRS` (all pairs of 50 systems) every pair stays in
summary.json, as before. Above it, ``contrasts``, ``pairs`` (the runs-random reading's) and the pairs' ``readings``
rows keep the pairs among the best-ranked systems - the first ones of the leaderboard, as many as have at most
:data:`MAX_SUMMARY_PAIRS` pairs among them - and ``pairs_in_summary`` says so: how many were kept of how many, by
which rule, and the file with all of them (``pairs.csv``: every pair of both readings, one row per reading and
pair, written by ``vrs analyze`` beside summary.json through :func:`vrs_helpers.literal.to_csv`). The ranking, its
rank intervals and letters, and the best-and-tied set rest on all pairs' decisions, whatever is kept.
"""

from __future__ import annotations

import pandas as pd

#: pairs kept in summary.json per reading (the pairs of 50 systems)
MAX_SUMMARY_PAIRS = 1225
PAIRS_FILE = "pairs.csv"


def kept_systems(ranking_rows: list, limit: int = MAX_SUMMARY_PAIRS) -> list[str]:
    """The first systems of the leaderboard with at most ``limit`` pairs among them."""
    names = [str(r["system"]) for r in ranking_rows]
    n = 1
    while n < len(names) and (n + 1) * n // 2 <= limit:
        n += 1
    return names[:n]


def bound_pairs(summary: dict, limit: int = MAX_SUMMARY_PAIRS) -> dict:
    """``summary`` (one response's summary.json data) with its pairs bounded (module docstring); unchanged when no
    reading has more than ``limit`` pairs or there is no ranking."""
    contrasts, pairs = summary.get("contrasts") or [], summary.get("pairs") or []
    ranking = summary.get("ranking") or []
    total = max(len(contrasts), len(pairs))
    if total <= limit or not ranking:
        return summary
    keep = kept_systems(ranking, limit)
    labels = {f"{a} - {b}" for a in keep for b in keep if a != b}
    compared = {f"{a} vs {b}" for a in keep for b in keep if a != b}
    out = dict(summary)
    out["contrasts"] = [r for r in contrasts if str(r.get("contrast")) in labels]
    out["pairs"] = [r for r in pairs if str(r.get("contrast")) in labels]
    systems = {str(s) for s in summary.get("systems") or []}
    out["readings"] = [r for r in summary.get("readings") or []
                       if str(r.get("comparison")) in compared or not _is_pair(str(r.get("comparison")), systems)]
    out["pairs_in_summary"] = {
        "kept": max(len(out["contrasts"]), len(out["pairs"])), "total": total,
        "rule": f"the pairs among the {len(keep)} best-ranked systems (at most {limit} pairs per reading)",
        "file": PAIRS_FILE}
    return out


def _is_pair(comparison: str, systems: set) -> bool:
    """Whether a readings row compares two systems ("b vs a")."""
    parts = comparison.split(" vs ")
    return len(parts) >= 2 and any(" vs ".join(parts[:i]) in systems and " vs ".join(parts[i:]) in systems
                                   for i in range(1, len(parts)))


def pairs_frame(own) -> pd.DataFrame | None:
    """Every pair of both readings of an analysis (:class:`vrs_helpers.evaluate.analysis.OwnAnalysis`), one row per
    reading and pair: the content of pairs.csv."""
    parts = []
    for reading, comp in [("runs as replications", own.comparison), ("runs as a random effect",
                                                                      own.comparison_random)]:
        if comp is not None and "contrast" in comp.contrasts:
            parts.append(comp.contrasts.assign(reading=reading))
    if not parts:
        return None
    frame = pd.concat(parts, ignore_index=True)
    return frame[["reading", *[c for c in frame.columns if c != "reading"]]]
