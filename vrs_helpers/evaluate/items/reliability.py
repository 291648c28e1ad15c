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
(z_(1-α/2) + z_0.8) sqrt(2δ); δ is an average over the models: for 0/1 scores two models near 50 % accuracy,
whose answers vary most, differ by more than it in 6.9 % of 1,000 simulations at α = 0.05 (20 models x 500 items,
one run; 4.7 % with 3 runs; benchmarks/items.py resolution) - a property of the benchmark, not a test of a
pair: ``vrs analyze`` tests a pair); the signal-to-noise ratio of Heineman et al. (2025): the spread of the models'
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


def _cube(m: ItemMatrix) -> np.ndarray | None:
    """The scores as a models x items x runs array when the design is balanced (every model answered every item
    once in each of its R runs; crossed: the same R run labels for every model), else None."""
    R = int(m.counts.max())
    if int(m.counts.min()) != R or len(m.score) != m.n_models * m.n_items * R:
        return None
    runs = pd.DataFrame({"model": m.model, "run": m.run}).drop_duplicates()
    per_model = runs.groupby("model")["run"].size()
    if len(runs) != m.n_models * R or not (per_model == R).all():
        return None
    if m.runs_shared and runs["run"].nunique() != R:
        return None
    position = pd.Series(runs.groupby("model").cumcount().to_numpy(), index=pd.MultiIndex.from_frame(runs))
    slot = position.reindex(pd.MultiIndex.from_arrays([m.model, m.run])).to_numpy() if not m.runs_shared else \
        pd.factorize(m.run, sort=True)[0]
    cube = np.full((m.n_models, m.n_items, R), np.nan)
    cube[m.model, m.item, slot] = m.score
    return None if np.isnan(cube).any() else cube


def _strata(m: ItemMatrix, cube: np.ndarray):
    """Mean squares, their df and expected-mean-square coefficients (strata x components) of a balanced design."""
    nm, ni, nr = cube.shape
    g = cube.mean()
    ym, yi = cube.mean(axis=(1, 2)), cube.mean(axis=(0, 2))
    ymi = cube.mean(axis=2)
    ss = {"m": ni * nr * ((ym - g) ** 2).sum(), "i": nm * nr * ((yi - g) ** 2).sum(),
          "mi": nr * ((ymi - ym[:, None] - yi[None, :] + g) ** 2).sum()}
    df = {"m": nm - 1, "i": ni - 1, "mi": (nm - 1) * (ni - 1)}
    if nr == 1:
        names = ["model", "item", "Residual"]
        coef = {"m": [ni, 0, 1], "i": [0, nm, 1], "mi": [0, 0, 1]}
    elif m.runs_shared:   # m x i x r
        yr, ymr, yir = cube.mean(axis=(0, 1)), cube.mean(axis=1), cube.mean(axis=0)
        ss.update(r=nm * ni * ((yr - g) ** 2).sum(), mr=ni * ((ymr - ym[:, None] - yr[None, :] + g) ** 2).sum(),
                  ir=nm * ((yir - yi[:, None] - yr[None, :] + g) ** 2).sum(),
                  e=((cube - ymi[:, :, None] - ymr[:, None, :] - yir[None] + ym[:, None, None] + yi[None, :, None]
                      + yr[None, None, :] - g) ** 2).sum())
        df.update(r=nr - 1, mr=(nm - 1) * (nr - 1), ir=(ni - 1) * (nr - 1), e=(nm - 1) * (ni - 1) * (nr - 1))
        names = ["model", "item", "run", "model:item", "model:run", "item:run", "Residual"]
        coef = {"m": [ni * nr, 0, 0, nr, ni, 0, 1], "i": [0, nm * nr, 0, nr, 0, nm, 1],
                "r": [0, 0, nm * ni, 0, ni, nm, 1], "mi": [0, 0, 0, nr, 0, 0, 1], "mr": [0, 0, 0, 0, ni, 0, 1],
                "ir": [0, 0, 0, 0, 0, nm, 1], "e": [0, 0, 0, 0, 0, 0, 1]}
    else:                 # i x (r:m): each model's runs its own
        ymr = cube.mean(axis=1)
        ss.update(rm=ni * ((ymr - ym[:, None]) ** 2).sum(),
                  e=((cube - ymi[:, :, None] - ymr[:, None, :] + ym[:, None, None]) ** 2).sum())
        df.update(rm=nm * (nr - 1), e=nm * (ni - 1) * (nr - 1))
        names = ["model", "item", "model:item", "model:run", "Residual"]
        coef = {"m": [ni * nr, 0, nr, ni, 1], "i": [0, nm * nr, nr, 0, 1], "mi": [0, 0, nr, 0, 1],
                "rm": [0, 0, 0, ni, 1], "e": [0, 0, 0, 0, 1]}
    keys = [k for k in coef if df[k] > 0]
    ms = np.array([ss[k] / df[k] for k in keys])
    return names, ms, np.array([df[k] for k in keys], float), np.array([coef[k] for k in keys], float)


def anova_components(m: ItemMatrix) -> pd.Series | None:
    """REML's variance components of the G-study for a balanced design, from its mean squares (Brennan 2001, ch. 3;
    crossed m x i x r, i x (r:m) for each model's own runs, or m x i with one run); None when unbalanced.

    In a balanced design the REML likelihood is that of the independent mean squares, MS_k ~ E_k chi2_df / df with
    E_k = sum_c C_kc sigma_c (their expected mean squares): REML minimizes sum_k df_k (log E_k + MS_k / E_k) over
    sigma >= 0. Where the ANOVA estimates (E_k = MS_k solved) are all non-negative they are that minimum; otherwise
    the bounded minimum is found numerically (a few components; no pass over the rows)."""
    cube = _cube(m)
    if cube is None:
        return None
    names, ms, df, C = _strata(m, cube)
    est, *_ = np.linalg.lstsq(C, ms, rcond=None)
    if (est >= 0).all() and np.allclose(C @ est, ms, rtol=1e-10, atol=1e-14):
        return pd.Series(est, index=names, dtype=float)
    from scipy import optimize

    scale = max(float(ms.max()), 1e-300)

    def f(v):
        e = C @ v
        return float((df * (np.log(e) + (ms / scale) / e)).sum()), C.T @ (df * (1 / e - (ms / scale) / e ** 2))

    start = np.maximum(est / scale, 1e-3 * ms.min() / scale + 1e-12)
    bounds = [(0.0, None)] * (len(names) - 1) + [(1e-12, None)]
    r = optimize.minimize(f, start, jac=True, method="L-BFGS-B", bounds=bounds,
                          options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000})
    return pd.Series(r.x * scale, index=names, dtype=float)


def components(m: ItemMatrix) -> tuple[pd.Series, str]:
    """The REML variance components (lme4's names, 'Residual' included) and the formula: from the mean squares
    where the design is balanced (:func:`anova_components`), else by the engine's REML fit."""
    formula = g_study_formula(m)
    closed = anova_components(m)
    if closed is not None:
        return closed, formula
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
