"""How reliably a benchmark ranks models (issue 55; book 3.3, generalizability theory): the models are the objects
of measurement, the items (and runs) the facets.

The variance components come from the linear mixed model of the scores (REML, :func:`vrs_helpers.mixed.fit`;
book model 3.13 with models in place of sentences),

    score ~ 1 + (1|model) + (1|item)                                                  one run
          + (1|model:item) + (1|model:run)                                            runs of each model's own
          + (1|run) + (1|item:run)                                                    run labels shared (a seed)

on the score scale (accuracy units for 0/1 scores, so differences below are in accuracy). Reliability and the
decision study are the book's functions (:mod:`vrs_helpers.book.reliability`, reused): φ (Definition 3.2,
eq. 3.11/3.12: every other component divided by the number of items / runs it is averaged over) and the relative
coefficient E ρ² (footnote 9: only the components that interact with the model - what changes a ranking). A
decision study gives the items (at the observed runs) and runs (at the observed items) for φ ≥ 0.8 / 0.9 from the
closed form E(n) = c0 + c1 / n of the error variance in one facet, checked with :func:`~vrs_helpers.book.
reliability.phi` (infinite - None in summary.json - when no number of that facet reaches the target: the other
facet's error alone keeps φ below it; the runs' numbers only when there are runs).

Beside them: the smallest difference between two models' mean scores the benchmark resolves at its size (the
relative error variance of one model's mean is δ; the difference of two models on the same items has variance 2δ:
resolved at α two-sided when larger than z_(1-α/2) sqrt(2δ), detected with 80 % power when larger than
(z_(1-α/2) + z_0.8) sqrt(2δ)); the signal-to-noise ratio of Heineman et al. (2025): the spread of the models'
mean scores (largest minus smallest) over the run-to-run SD of a model's mean score (their relative dispersion
over relative SD: the means cancel; runs here in place of their last checkpoints); and saturation (0/1 scores):
the share of items every one of the top 10 % of models (at least one) answers correctly in every run.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
from scipy import stats

from ... import mixed
from ...book.reliability import decision_study, phi
from .matrix import ItemMatrix

TARGETS = (0.8, 0.9)
ITEM_GRID = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000)
RUN_GRID = (1, 2, 3, 5, 10, 20)


def g_study_formula(m: ItemMatrix) -> str:
    """The G-study model of the module docstring for this design."""
    terms = ["(1|model)", "(1|item)"]
    if m.has_runs:
        if m.runs_shared:
            terms += ["(1|run)"]
        terms += ["(1|model:item)", "(1|model:run)"]
        if m.runs_shared:
            terms += ["(1|item:run)"]
    return "score ~ 1 + " + " + ".join(terms)


def components(m: ItemMatrix) -> tuple[pd.Series, str]:
    """The REML variance components (lme4's names, 'Residual' included) and the formula."""
    formula = g_study_formula(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mixed.SingularFitWarning)
        fit = mixed.fit(formula, m.long(), method="REML")
    return fit.variance_components["variance"].astype(float), formula


def _sizes(vc: pd.Series, n_items: float, n_runs: float) -> dict:
    facets = {f for c in vc.index if c != "Residual" for f in c.split(":") if f != "model"}
    return {f: v for f, v in (("item", n_items), ("run", n_runs)) if f in facets}


def needed(vc: pd.Series, facet: str, target: float, kind: str, n: dict) -> float:
    """The smallest number of ``facet`` levels (the others at ``n``) at which φ (``kind``) reaches ``target``: the
    error variance is c0 + c1 / n_facet; inf when c0 alone keeps φ below the target."""
    if facet not in n:
        return float("nan")
    e1 = phi(vc, "model", n={**n, facet: 1}, kind=kind).error_variance
    e2 = phi(vc, "model", n={**n, facet: 2}, kind=kind).error_variance
    c1 = 2.0 * (e1 - e2)
    c0 = e1 - c1
    s = float(vc["model"])
    if s <= 0:
        return float("inf")
    room = s * (1.0 - target) / target - c0
    if room <= 0:
        return float("inf")
    k = max(1.0, math.ceil(c1 / room - 1e-9))
    while phi(vc, "model", n={**n, facet: k}, kind=kind).phi < target:   # rounding at the boundary
        k += 1
    while k > 1 and phi(vc, "model", n={**n, facet: k - 1}, kind=kind).phi >= target:
        k -= 1
    return float(k)


def signal_to_noise(m: ItemMatrix) -> float | None:
    """Heineman et al.'s (2025) signal-to-noise ratio (module docstring); None without runs or with one model."""
    if not m.has_runs or m.n_models < 2:
        return None
    runs = pd.DataFrame({"model": m.model, "run": m.run, "score": m.score}).groupby(["model", "run"])["score"].mean()
    noise = math.sqrt(float(runs.groupby(level=0).var(ddof=1).mean()))
    means = m.means.mean(axis=1)
    signal = float(means.max() - means.min())
    return None if noise <= 0 else signal / noise


def saturation(m: ItemMatrix, top_share: float = 0.1) -> dict | None:
    """The share of items every one of the top models solves in every run (0/1 scores): {saturation, top_models}."""
    if not m.binary:
        return None
    k = max(1, math.ceil(top_share * m.n_models))
    top = np.argsort(-m.means.mean(axis=1), kind="stable")[:k]
    solved = (m.means[top] >= 1.0).all(axis=0)
    return {"saturation": float(solved.mean()), "top_models": [m.models[j] for j in top]}


def benchmark_reliability(m: ItemMatrix, alpha: float = 0.05, vc: pd.Series | None = None) -> dict | None:
    """The benchmark's reliability for comparing models (module docstring) as JSON values, with the decision study
    table under ``decision_study``; None with fewer than two models."""
    if m.n_models < 2:
        return None
    formula = g_study_formula(m)
    if vc is None:
        vc, formula = components(m)
    n = _sizes(vc, m.n_items, m.n_runs)
    absolute = phi(vc, "model", n=n, kind="absolute")
    relative = phi(vc, "model", n=n, kind="relative")
    out = {"phi": absolute.phi, "relative": relative.phi, "interpretation": absolute.interpretation,
           "formula": formula, "n_items": m.n_items, "n_runs": m.n_runs if m.has_runs else 1,
           "components": [{"component": c, "variance": float(v), "percent": 100 * float(v) / float(vc.sum())}
                          for c, v in vc.items()]}
    for kind, key in (("absolute", "phi"), ("relative", "relative")):
        for t in TARGETS:
            tag = str(int(round(100 * t)))
            out[f"items_needed_{key}_{tag}"] = needed(vc, "item", t, kind, n)
            if "run" in n:
                out[f"runs_needed_{key}_{tag}"] = needed(vc, "run", t, kind, n)
    sd_diff = math.sqrt(2.0 * relative.error_variance)
    z = stats.norm.ppf(1 - alpha / 2)
    out.update({"alpha": alpha, "sd_difference": sd_diff, "smallest_difference": z * sd_diff,
                "smallest_difference_power80": (z + stats.norm.ppf(0.8)) * sd_diff,
                "signal_to_noise": signal_to_noise(m)})
    sat = saturation(m)
    out["saturation"] = None if sat is None else sat["saturation"]
    out["saturation_top_models"] = None if sat is None else sat["top_models"]
    grid = {"item": sorted({*(g for g in ITEM_GRID if g <= 5 * max(m.n_items, 10)), m.n_items})}
    if "run" in n:
        grid["run"] = sorted({*RUN_GRID, int(round(m.n_runs))})
    study = decision_study(vc, "model", grid, kind="absolute")
    study["relative"] = decision_study(vc, "model", grid, kind="relative")["phi"].to_numpy()
    out["decision_study"] = study.drop(columns=["interpretation"]).to_dict("records")
    return out
