"""Estimated marginal means and pairwise contrasts of a fitted mixed model (as R's emmeans: asymptotic z tests, or
t tests with Kenward-Roger's or Satterthwaite's df).

The book's Tables 4.2 and 4.3 were computed with ``emmeans(model, pairwise ~ system | src_length_class,
lmer.df = "asymptotic")`` on an lmerTest REML fit: the marginal mean of each level is the model's prediction
averaged with equal weights over the levels of the other factors in the model (numeric covariates at their mean);
contrasts are differences of marginal means with standard errors from the fixed-effects covariance, z tests
(df = infinity), and Tukey's adjustment within each family (one family per ``by`` level).

With few runs per system the z tests are liberal (issue 28: z = 2.34 where Tukey's critical value on 6 df is
3.07); ``lmer_df="kenward-roger"`` (or ``"satterthwaite"``) gives each mean and contrast of a linear mixed model its
own small-sample df, as ``emmeans(model, pairwise ~ factor, lmer.df = "kenward-roger")`` does
(:func:`vrs_helpers.mixed.ddf.t_tests`: Kenward-Roger's SEs from pbkrtest's adjusted covariance), t tests, and
Tukey's adjustment on each contrast's df (the studentized range of k means on that contrast's df) or Holm's.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ..literal import html_text
from . import ddf as small_sample
from .design import design_rows
from .errors import MixedModelError
from .results import MixedModelResult

ADJUSTMENTS = ("tukey", "holm", "bonferroni", "none")


@dataclass
class EMMResult:
    """Marginal means and pairwise contrasts (emmeans layout)."""

    factor: str
    by: str | None
    adjust: str
    means: pd.DataFrame  # [by,] factor, emmean, SE, [df,] lower, upper
    contrasts: pd.DataFrame  # [by,] contrast, estimate, SE, z (or df, t), p_value, effect_size
    lmer_df: str = "asymptotic"
    contrast_matrix: np.ndarray | None = None  # the contrasts' rows over the fixed effects, in the table's order

    def to_frame(self) -> pd.DataFrame:
        return self.contrasts.copy()

    def __repr__(self) -> str:
        by = f" | {self.by}" if self.by else ""
        with pd.option_context("display.width", 160):
            return (f"EMMResult(pairwise ~ {self.factor}{by}, adjust={self.adjust!r})\n"
                    f"{self.means.to_string(index=False)}\n\n{self.contrasts.to_string(index=False)}")

    def _repr_html_(self) -> str:
        fmt = lambda x: f"{x:.6g}"  # noqa: E731
        tests = "z tests" if self.lmer_df == "asymptotic" else f"t tests, {self.lmer_df} df"
        return (f"<b>Estimated marginal means of {html_text(self.factor)}</b>"
                + self.means.to_html(index=False, float_format=fmt)
                + f"<b>Pairwise contrasts ({html_text(tests)}, {html_text(self.adjust)} adjustment)</b>"
                + self.contrasts.to_html(index=False, float_format=fmt))


def _adjust(p: np.ndarray, z: np.ndarray, k: int, method: str, df=np.inf) -> np.ndarray:
    if method == "none":
        return p
    if method == "tukey":
        # Tukey HSD: P(studentized range of k means on df degrees of freedom > |z| sqrt 2), each contrast on its own
        # df as emmeans does (df = infinity for z tests)
        dfs = np.broadcast_to(np.asarray(df, dtype=float), np.shape(z))
        return np.array([stats.studentized_range.sf(abs(zi) * np.sqrt(2.0), k, d) for zi, d in zip(z, dfs,
                                                                                                   strict=True)])
    from statsmodels.stats.multitest import multipletests

    return multipletests(p, method=method)[1]


def emmeans(model: MixedModelResult, factor: str, by: str | None = None, adjust: str = "tukey",
            level: float = 0.95, sigma: float | None = None, lmer_df: str = "asymptotic") -> EMMResult:
    """Estimated marginal means of ``factor`` (within each level of ``by``) and all pairwise contrasts.

    ``model``: a linear mixed model (:func:`vrs_helpers.mixed.fit`) or a GLMM (:func:`vrs_helpers.mixed.glmer`;
    means and contrasts on the link scale, as emmeans without ``type = "response"``).
    ``effect_size`` is the standardized mean difference used in the ICLR paper: the contrast divided by the
    residual standard deviation ``sigma`` (default the model's; emmeans' ``eff_size(..., sigma = sigma(model))``;
    NaN for a model without one unless given).
    ``lmer_df``: ``"asymptotic"`` (z tests, the book's Tables 4.2/4.3), or for a REML linear mixed model
    ``"kenward-roger"`` / ``"satterthwaite"``: t tests with each mean's and contrast's small-sample df (module
    docstring); the tables then have ``df`` and ``t`` columns instead of ``z``.
    """
    if str(lmer_df).strip().lower() == "asymptotic":
        lmer_df = "asymptotic"
    else:
        lmer_df = small_sample.method_key(lmer_df)
        if not isinstance(model, MixedModelResult):
            raise MixedModelError("small-sample df (lmer_df) are defined for linear mixed models fitted by REML "
                                  "(mixed.fit); a GLMM's contrasts are asymptotic z tests.")
    if adjust not in ADJUSTMENTS:
        raise MixedModelError(f"adjust must be one of {', '.join(ADJUSTMENTS)}; got {adjust!r}.")
    s = model.stats
    levels = s.factor_levels
    for v in [factor] + ([by] if by else []):
        if v not in levels:
            raise MixedModelError(f"{v!r} is not a fixed-effect factor of the model; factors: {', '.join(levels)}.")
    others = [v for v in levels if v not in (factor, by)]
    scale = getattr(model, "sigma", np.nan) if sigma is None else float(sigma)
    beta = model.fixed_effects["estimate"].to_numpy()
    V = model.vcov.to_numpy()
    z_crit = stats.norm.ppf(0.5 + level / 2)
    by_levels = levels[by] if by else [None]
    mean_rows, contrast_rows, contrast_matrix = [], [], []
    for b in by_levels:
        L = []
        for a in levels[factor]:
            grid = pd.DataFrame(list(itertools.product(*[levels[o] for o in others])) or [()], columns=others)
            grid[factor] = a
            if by:
                grid[by] = b
            for v, mean in s.numeric_means.items():
                grid[v] = mean
            try:
                X = design_rows(s, grid)
            except MixedModelError:
                raise MixedModelError(f"The marginal mean of {factor}={a}" + (f" at {by}={b}" if by else "") +
                                      " is not estimable: some combination of levels is never observed.") from None
            L.append(X.mean(axis=0))
        L = np.array(L)
        est = L @ beta
        se = np.sqrt(np.einsum("ij,jk,ik->i", L, V, L))
        dfs = np.full(len(L), np.inf)
        if lmer_df != "asymptotic":
            tt = small_sample.t_tests(model, L, lmer_df)
            se, dfs = tt["SE"].to_numpy(), tt["df"].to_numpy()
        crit = stats.t.ppf(0.5 + level / 2, dfs) if lmer_df != "asymptotic" else np.full(len(L), z_crit)
        for a, e, sd, d, c in zip(levels[factor], est, se, dfs, crit, strict=True):
            row = {by: b} if by else {}
            row.update({factor: a, "emmean": e, "SE": sd})
            if lmer_df != "asymptotic":
                row["df"] = d
            row.update({"lower": e - c * sd, "upper": e + c * sd})
            mean_rows.append(row)
        pairs = list(itertools.combinations(range(len(levels[factor])), 2))
        D = np.array([L[i] - L[j] for i, j in pairs]).reshape(len(pairs), L.shape[1])
        contrast_matrix.append(D)
        c_est = D @ beta
        if lmer_df == "asymptotic":
            c_se = np.sqrt(np.einsum("ij,jk,ik->i", D, V, D))
            z = c_est / c_se
            p_raw, c_df = 2 * stats.norm.sf(np.abs(z)), np.full(len(D), np.inf)
        else:
            tt = small_sample.t_tests(model, D, lmer_df)
            c_se, c_df, z, p_raw = (tt[c].to_numpy() for c in ("SE", "df", "t", "p_value"))
        p_adj = _adjust(p_raw, z, len(levels[factor]), adjust, c_df)
        for (i, j), e, sd, d, zz, pa in zip(pairs, c_est, c_se, c_df, z, p_adj, strict=True):
            row = {by: b} if by else {}
            row.update({"contrast": f"{levels[factor][i]} - {levels[factor][j]}", "estimate": e, "SE": sd})
            row.update({"z": zz} if lmer_df == "asymptotic" else {"df": d, "t": zz})
            row.update({"p_value": pa, "effect_size": e / scale})
            contrast_rows.append(row)
    return EMMResult(factor, by, adjust, pd.DataFrame(mean_rows), pd.DataFrame(contrast_rows), lmer_df,
                     np.vstack(contrast_matrix))
