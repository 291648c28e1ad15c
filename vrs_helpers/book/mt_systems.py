"""The three MT systems of chapter 4 (Kreutzer et al. 2020): the data and the steps of workbook 05.

Each function is one step of the chapter's comparison - the data with source-length classes (section 4.3.2), the
two designs of Table 4.1, the resampling tests of Algorithms 4.1 and 4.2 on the same pairs, the configuration
averages of a meta-parameter grid, and the simulation of type-I error and power - so that the workbook's cells
each call one of them. Nothing is printed.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
from scipy import stats

from . import significance as sg
from . import simulation

LENGTH_CLASSES = ["short", "typical", "very long"]


def with_length_classes(ter: pd.DataFrame, systems: list[str], bins: list[int]) -> pd.DataFrame:
    """The rows of ``systems`` with the source length in classes (book 4.3.2): short up to ``bins[0]`` words,
    typical up to ``bins[1]``, very long above, as in the authors' code."""
    out = ter[ter["system"].isin(systems)].copy()
    out["system"] = out["system"].cat.remove_unused_categories()
    out["src_length_class"] = pd.Categorical(
        np.select([out["src_length"] <= bins[0], out["src_length"] <= bins[1]], LENGTH_CLASSES[:2],
                  LENGTH_CLASSES[2]), categories=LENGTH_CLASSES)
    return out


def table_4_1(ter: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Table 4.1: (a) the replications averaged per sentence and system, linear models (4.9) vs (4.7), with the F
    test the authors' code reports and the GLRT of the same models; (b) the LMM (4.10) vs (4.11) with a random
    intercept per sentence (REML fits; the GLRT refits by ML, as lme4's anova does). Returns the table and its
    parts: ``lm`` (statsmodels OLS of (a)), ``f_p``, ``lr_p``, ``lmm`` (the fit of (4.10)), ``glrt``."""
    import statsmodels.formula.api as smf

    from .. import mixed

    avg = ter.groupby(["sentence_id", "system"], observed=True)["ter"].mean().reset_index()
    lm1, lm0 = smf.ols("ter ~ system", avg).fit(), smf.ols("ter ~ 1", avg).fit()
    f_p = float(lm1.f_pvalue)
    lr_p = float(stats.chi2.sf(2 * (lm1.llf - lm0.llf), 2))
    m1 = mixed.fit("ter ~ system + (1|sentence_id)", ter)
    glrt = mixed.lrt(mixed.fit("ter ~ 1 + (1|sentence_id)", ter), m1)
    table = pd.DataFrame({
        "design": ["average replications", "group replications at sentence level"],
        "general / restricted": ["(4.9) / (4.7)", "(4.10) / (4.11)"],
        "residual SD": [np.sqrt(lm1.scale), m1.sigma],
        "p (F test of the lm; GLRT for the LMM)": [f_p, glrt.p_value],
        "p (GLRT)": [lr_p, glrt.p_value]})
    return table, {"lm": lm1, "f_p": f_p, "lr_p": lr_p, "lmm": m1, "glrt": glrt}


def resampling_tests(ter: pd.DataFrame, systems: list[str], n_resamples: int = 10_000,
                     seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """Every pair of systems on the per-sentence mean TER (each system's replications averaged): the permutation
    test (Algorithm 4.2), the bootstrap test (Algorithm 4.1) and the paired t test, with Holm's adjustment of the
    permutation p-values across the pairs. Returns the table and the permutation results by pair."""
    per_sentence = ter.pivot_table(index="sentence_id", columns="system", values="ter", aggfunc="mean",
                                   observed=True)
    rows, perms = [], {}
    for i, a_name in enumerate(systems):
        for b_name in systems[i + 1:]:
            a, b = per_sentence[a_name].to_numpy(), per_sentence[b_name].to_numpy()
            pair = f"{a_name} - {b_name}"
            perms[pair] = perm = sg.permutation_test(a, b, n_resamples=n_resamples, seed=seed)
            boot = sg.bootstrap_test(a, b, n_resamples=n_resamples, seed=seed)
            rows.append({"pair": pair, "difference": perm.observed, "permutation p": perm.p_value,
                         "bootstrap p": boot.p_value, "paired t p": sg.paired_t_test(a, b).p_value})
    table = pd.DataFrame(rows)
    table["permutation p (Holm)"] = sg.adjust_p_values(table["permutation p"], "holm")
    return table, perms


def configuration_average_tests(grid: pd.DataFrame, n_resamples: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """The classic alternative on a meta-parameter grid: every sentence's TER averaged over the configurations of
    each ``delta_scheme``, and a permutation test of the two schemes within each length class."""
    avg = grid.pivot_table(index=["sentence_id", "src_length_class"], columns="delta_scheme", values="ter",
                           aggfunc="mean", observed=True).reset_index()
    schemes = [c for c in avg.columns if c not in ("sentence_id", "src_length_class")]
    rows = []
    for cls, g in avg.groupby("src_length_class", observed=True):
        pt = sg.permutation_test(g[schemes[0]].to_numpy(), g[schemes[1]].to_numpy(), n_resamples=n_resamples,
                                 seed=seed)
        rows.append({"src_length_class": cls, "sentences": len(g), "difference of means": pt.observed,
                     "permutation p (configurations averaged)": pt.p_value})
    return pd.DataFrame(rows)


def grids_side_by_side(partial_grid: pd.DataFrame, partial_result, full_grid: pd.DataFrame,
                       full_result) -> pd.DataFrame:
    """The scheme contrasts per length class of ``compare_systems`` on the partial and the full grid, one below
    the other."""
    side = pd.concat([partial_result.contrasts.assign(grid=f"partial ({len(partial_grid):,} rows)"),
                      full_result.contrasts.assign(grid=f"full ({len(full_grid):,} rows)")], ignore_index=True)
    return side[["grid", "src_length_class", "contrast", "estimate", "SE", "z", "p_value"]]


def rejection_table(fit, sentences: int, planted_effect: float, n_sim: int, n_boot: int, alpha: float = 0.05,
                    seed: int = 0, progress: bool = False) -> pd.DataFrame:
    """Type-I error and power by simulation: test sets of ``sentences`` sentences with the sentence and residual
    variances of the LMM ``fit``, a baseline and three replications of a second system
    (:func:`simulation.baseline_and_replications`), with no difference and with ``planted_effect``; the rejection
    rates at ``alpha`` of the GLRT, Kenward-Roger's F, the parametric-bootstrap LRT (``n_boot`` simulations) and
    the permutation test, each from ``n_sim`` simulated data sets, with the Monte Carlo SE of the GLRT's rate."""
    vc = fit.variance_components["variance"]
    design = {"items": sentences, "item_sd": np.sqrt(vc["sentence_id"]), "residual_sd": np.sqrt(vc["Residual"])}
    tests = {"GLRT": simulation.glrt_p_value, "Kenward-Roger F": simulation.kenward_roger_p_value,
             "parametric bootstrap": partial(simulation.bootstrap_p_value, n_sim=n_boot),
             "permutation": simulation.permutation_p_value}
    rows = []
    for i, (scenario, effect) in enumerate([("null (no difference)", 0.0),
                                            (f"planted difference {planted_effect}", planted_effect)]):
        simulate = partial(simulation.baseline_and_replications, delta=-effect, **design)   # the other: lower TER
        rates = simulation.rejection_rates(simulate, tests, n_sim=n_sim, alpha=alpha, seed=seed + i,
                                           progress=scenario if progress else False).to_frame().set_index("test")
        rows.append({"scenario": scenario, **{f"{t} rejection rate": rates.loc[t, "rate"] for t in tests},
                     "Monte Carlo SE (GLRT)": rates.loc["GLRT", "mc_se"], "simulations": n_sim})
    return pd.DataFrame(rows).set_index("scenario")
