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
(:func:`vrs_helpers.mixed.inference.ddf.t_tests`: Kenward-Roger's SEs from pbkrtest's adjusted covariance), t tests, and
Tukey's adjustment on each contrast's df (the studentized range of k means on that contrast's df) or Holm's.

``adjust="mvt"`` is emmeans' and ``multcomp::glht``'s single-step adjustment from the contrasts' own joint
distribution (:mod:`.multiplicity`): exact where Tukey's studentized range is not (unequal SEs or correlations, as
in a GLMM with unequal accuracies), the same where it is. Every contrast gets a ``lower``/``upper`` interval at
``level`` in the same family as its p-value: simultaneous for ``tukey`` and ``mvt`` (p < 1 - level exactly when
the interval excludes 0), Bonferroni's for ``holm`` and ``bonferroni`` (as emmeans' ``confint``), per contrast for
``none``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats

from ...literal import html_text
from ..inference import ddf as small_sample
from ..inference.multiplicity import correlation, single_step
from ..inference.pair_max import PAIRS_FROM, pairs_single_step
from ..structure.design import design_rows
from ..structure.errors import MixedModelError
from .results import MixedModelResult

ADJUSTMENTS = ("tukey", "mvt", "holm", "bonferroni", "none")
MANY_MEANS = 24  # simultaneous intervals of more means use fewer quasi-Monte-Carlo points (simultaneous_means)


@dataclass
class EMMResult:
    """Marginal means and pairwise contrasts (emmeans layout)."""

    factor: str
    by: str | None
    adjust: str
    means: pd.DataFrame  # [by,] factor, emmean, SE, [df,] lower, upper
    contrasts: pd.DataFrame  # [by,] contrast, estimate, SE, z (or df, t), p_value, lower, upper, effect_size
    lmer_df: str = "asymptotic"
    means_rows: np.ndarray | None = None  # the means' rows over the fixed effects (per family k rows, in order)
    means_vcov: np.ndarray | None = None  # the covariance of the means (one family: no ``by``)

    @property
    def contrast_matrix(self) -> np.ndarray | None:
        """The contrasts' rows over the fixed effects, in the table's order (made when asked for: with 1,000
        systems it has 499,500 rows x the fixed effects, issue 54)."""
        if self.means_rows is None:
            return None
        k = len(self.means_rows) if self.by is None else len(self.means_rows) // self.means[self.by].nunique()
        i, j = np.triu_indices(k, 1)
        blocks = [self.means_rows[f * k:(f + 1) * k] for f in range(len(self.means_rows) // k)]
        return np.vstack([L[i] - L[j] for L in blocks])

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


@lru_cache(maxsize=4096)
def _tukey_quantile(level: float, k: int, df: float) -> float:
    """q_{level}(k, df) / sqrt 2, computed once per (level, k, df) in a process (issue 54: the means, the
    contrasts, a restricted family and the ranking's intervals ask for the same values)."""
    return float(stats.studentized_range.ppf(level, k, df) / np.sqrt(2.0))


def tukey_critical(level: float, k: int, dfs) -> np.ndarray:
    """Tukey's critical value in SEs of a difference, q_{level}(k, df) / sqrt 2, for each df in ``dfs``. The
    studentized range's quantile costs ~0.1-0.3 s per df (scipy integrates it), so it is computed once per distinct
    df, and - with more than 8 distinct df (Kenward-Roger gives each contrast its own) - at 8 df spread over their
    range and interpolated in 1/df by a monotone cubic (PCHIP), on which q is smooth: the interpolation error is
    below 1e-6 of q on the ranges seen (tests/mixed/test_mixed_pairwise.py checks it against every df)."""
    from scipy.interpolate import PchipInterpolator

    dfs = np.asarray(dfs, dtype=float)
    out = np.full(dfs.shape, np.nan)
    ok = ~np.isnan(dfs)
    if not ok.any():
        return out
    uniq = np.unique(dfs[ok])
    q = lambda d: _tukey_quantile(float(level), int(k), float(d))  # noqa: E731
    if len(uniq) <= 8:
        table = {d: q(d) for d in uniq}
        out[ok] = [table[d] for d in dfs[ok]]
        return out
    inv = 1.0 / uniq  # 0 for an infinite df
    grid = np.linspace(inv.min(), inv.max(), 8)
    values = [q(1.0 / g if g > 0 else np.inf) for g in grid]
    out[ok] = PchipInterpolator(grid, values)(1.0 / dfs[ok])
    return out


def tukey_sf(z, k: int, dfs, crit=None) -> np.ndarray:
    """Tukey-adjusted p of contrasts with t (or z: df infinite) ``z`` on ``dfs``: P(studentized range of k means on
    df > |z| sqrt 2), as R's ``ptukey(|z| sqrt 2, k, df, lower = FALSE)``. scipy integrates each value (~10-40 ms at a
    finite df), so where one df (to 6 decimals: Kenward-Roger's df of a balanced design differ in the last digits)
    is shared by more than 300 contrasts (50 systems: 1,225) the p-values come from scipy's at ~80-160 nodes over
    their range (every 0.1 of q, and 40 geometric), interpolated as a cubic spline of the normal quantile of p in q,
    smooth there: within 1e-6 of scipy's at every contrast in tests/mixed/test_mixed_pairwise.py. Values within 0.05
    of ``crit`` (the interval's critical value, in the same units as z) are computed directly, so the decision never
    differs from the interval's."""
    from scipy.interpolate import CubicSpline

    q = np.abs(np.asarray(z, dtype=float)) * np.sqrt(2.0)
    dfs = np.broadcast_to(np.asarray(dfs, dtype=float), q.shape)
    crit = np.broadcast_to(np.nan if crit is None else np.asarray(crit, dtype=float), q.shape) * np.sqrt(2.0)
    out = np.full(q.shape, np.nan)
    ok = ~np.isnan(q) & ~np.isnan(dfs)
    direct = ok.copy()
    # one df up to rounding: Kenward-Roger's df of a balanced design's contrasts differ in the last digits
    key = np.where(np.isfinite(dfs), np.round(dfs, 6), dfs)
    for d in np.unique(key[ok]):
        group = ok & np.isfinite(q) & (key == d)
        if group.sum() <= 300:  # few values: each computed
            continue
        lo, hi = float(q[group].min()), float(q[group].max())
        n = int(np.clip(np.ceil((hi - lo) / 0.1), 40, 120))
        nodes = np.unique(np.r_[np.linspace(lo, hi, n), np.geomspace(max(lo, 0.05), max(hi, 0.05), 40)])
        if len(nodes) < 4:
            continue
        d = float(np.median(dfs[group]))
        sf = np.array([stats.studentized_range.sf(x, k, d) for x in nodes])
        pos = sf > 1e-280  # scipy's p underflows to 0 far out: 0 beyond the first such node, exact before it
        if pos.sum() < 4:
            continue
        last, zero = nodes[pos].max(), nodes[~pos & (nodes > nodes[pos].max())].min(initial=np.inf)
        spline = CubicSpline(nodes[pos], stats.norm.isf(np.minimum(sf[pos], 1 - 1e-16)))
        inside = group & (q <= last)
        out[inside] = np.clip(stats.norm.sf(spline(q[inside])), 0.0, 1.0)
        out[group & (q >= zero)] = 0.0
        # near the decision, and between the last positive node and the first zero one: exact
        direct[group] = (np.abs(q[group] - crit[group]) < 0.05 * np.sqrt(2.0)) | ((q[group] > last) &
                                                                                  (q[group] < zero))
    for i in np.flatnonzero(direct):
        out[i] = stats.studentized_range.sf(q[i], k, dfs[i])
    return out


def _adjust(p: np.ndarray, z: np.ndarray, k: int, method: str, df=np.inf, R=None,
            level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Adjusted p-values and the intervals' critical values (in SEs) of one family of contrasts (module docstring)."""
    dfs = np.broadcast_to(np.asarray(df, dtype=float), np.shape(z))
    m = int(np.isfinite(z).sum())
    if method == "mvt":
        # one df for the family, as glht: the smallest contrast df (infinite for z tests)
        ok = np.isfinite(z) & ~np.isnan(dfs)
        out = single_step(z, np.ones_like(z), R, df=float(np.min(dfs[ok])) if ok.any() else np.inf, level=level)
        return out["p_value"], np.full(np.shape(z), out["quantile"])
    if method == "tukey":
        # Tukey HSD: P(studentized range of k means on df degrees of freedom > |z| sqrt 2), each contrast on its own
        # df as emmeans does (df = infinity for z tests)
        crit = tukey_critical(level, k, dfs)
        return tukey_sf(z, k, dfs, crit), crit
    tail = (1 - level) / 2 / (max(m, 1) if method in ("holm", "bonferroni") else 1)
    crit = stats.t.isf(tail, dfs)
    if method == "none":
        return p, crit
    from statsmodels.stats.multitest import multipletests

    ok = np.isfinite(p)
    out = np.full(np.shape(p), np.nan)
    if ok.any():
        out[ok] = multipletests(p[ok], method=method)[1]
    return out, crit


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
    mean_rows, contrast_frames, all_rows, means_vcov = [], [], [], None
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
        all_rows.append(L)
        est = L @ beta
        se = np.sqrt(np.einsum("ij,jk,ik->i", L, V, L))
        means_vcov = L @ V @ L.T if by is None else None
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
        # the pairs (i, j), i < j: by index into the means (no pairs x fixed-effects matrix unless a test needs
        # its rows: 1,000 systems have 499,500 pairs)
        i, j = np.triu_indices(len(L), 1)
        D = (L[i] - L[j]) if lmer_df != "asymptotic" or adjust == "mvt" else None
        if lmer_df == "asymptotic":
            MV = L @ V @ L.T
            c_est = (L @ beta)[i] - (L @ beta)[j] if D is None else D @ beta
            c_se = np.sqrt(np.maximum(np.diag(MV)[i] + np.diag(MV)[j] - 2.0 * MV[i, j], 0.0))
            z = c_est / c_se
            p_raw, c_df = 2 * stats.norm.sf(np.abs(z)), np.full(len(i), np.inf)
        else:
            c_est = D @ beta
            tt = small_sample.t_tests(model, D, lmer_df)
            c_se, c_df, z, p_raw = (tt[c].to_numpy() for c in ("SE", "df", "t", "p_value"))
        R = correlation(D, V) if adjust == "mvt" else None
        del D
        p_adj, crit = _adjust(p_raw, z, len(levels[factor]), adjust, c_df, R, level)
        names = np.asarray([str(x) for x in levels[factor]], dtype=object)
        frame = {by: b} if by else {}
        frame.update({"contrast": names[i] + " - " + names[j], "estimate": c_est, "SE": c_se})
        frame.update({"z": z} if lmer_df == "asymptotic" else {"df": c_df, "t": z})
        frame.update({"p_value": p_adj, "lower": c_est - crit * c_se, "upper": c_est + crit * c_se,
                      "effect_size": c_est / scale})
        contrast_frames.append(pd.DataFrame(frame))
    return EMMResult(factor, by, adjust, pd.DataFrame(mean_rows), pd.concat(contrast_frames, ignore_index=True),
                     lmer_df, np.vstack(all_rows), means_vcov)


def restrict_family(emm: EMMResult, model, excluded, level: float = 0.95) -> EMMResult:
    """``emm`` with the contrasts of the ``excluded`` levels left out of the family: their ``p_value``, ``lower``
    and ``upper`` NaN (not decisions), the others adjusted as their own family - Tukey over the k' levels that
    remain, the single-step max-|z|/t (``mvt``) over their correlation, Holm/Bonferroni over their number. For a
    separated system (all correct or all wrong, :func:`~vrs_helpers.mixed.check_separation`), whose log-odds
    contrasts have no finite estimate (issue 39): its pairs are "not estimable", and the pairs that remain are
    adjusted for themselves only, not for comparisons that were never made (with one pair left, no adjustment).
    One family only (``by`` None): returns ``emm`` unchanged otherwise, or when nothing is excluded."""
    excluded = {str(x) for x in excluded}
    if emm.by is not None or not excluded or emm.means_rows is None:
        return emm
    levels = [str(x) for x in emm.means[emm.factor]]
    pairs = list(itertools.combinations(range(len(levels)), 2))
    keep = np.array([levels[i] not in excluded and levels[j] not in excluded for i, j in pairs], dtype=bool)
    c = emm.contrasts.copy()
    if len(c) != len(pairs):
        raise MixedModelError("the contrasts do not match the marginal means' pairs.")
    stat = c["z" if "z" in c else "t"].to_numpy(dtype=float)
    df = c["df"].to_numpy(dtype=float) if "df" in c else np.full(len(c), np.inf)
    p_raw = 2 * stats.t.sf(np.abs(stat), df)
    for col in ("p_value", "lower", "upper"):
        c[col] = np.nan
    k = len(levels) - len([x for x in levels if x in excluded])
    if keep.any() and k >= 2:
        R = correlation(emm.contrast_matrix[keep], model.vcov.to_numpy()) if emm.adjust == "mvt" else None
        p_adj, crit = _adjust(p_raw[keep], stat[keep], k, emm.adjust, df[keep], R, level)
        est, se = c["estimate"].to_numpy(dtype=float)[keep], c["SE"].to_numpy(dtype=float)[keep]
        c.loc[keep, "p_value"], c.loc[keep, "lower"], c.loc[keep, "upper"] = p_adj, est - crit * se, est + crit * se
    return EMMResult(emm.factor, emm.by, emm.adjust, emm.means, c, emm.lmer_df, emm.means_rows, emm.means_vcov)


def simultaneous_means(emm: EMMResult, level: float = 0.95) -> pd.DataFrame:
    """The marginal means with single-step simultaneous intervals (``multcomp::glht`` on the identity contrasts of
    the means, :mod:`.multiplicity`; one df, the smallest mean df, for t): ``lower``/``upper`` hold all k means
    jointly with probability ``level``. On the link scale; a GLMM's ``probability`` interval is their logistic.
    More than :data:`MANY_MEANS` means are sampled at 2^16 quasi-Monte-Carlo points instead of 2^18 (100 means: a
    point costs 100 normal quantiles; the critical value moves by about 0.005 SE, issue 54)."""
    from scipy.special import expit

    m = emm.means.copy()
    if emm.means_vcov is None:
        raise MixedModelError("simultaneous intervals of the means need one family (no by=).")
    df = float(m["df"].min()) if "df" in m else np.inf
    out = single_step(m["emmean"].to_numpy(float), m["SE"].to_numpy(float), correlation(np.eye(len(m)),
                                                                                         emm.means_vcov),
                      df=df, level=level, points=2 ** 18 if len(m) <= MANY_MEANS else 2 ** 16)
    m["lower"], m["upper"] = out["lower"], out["upper"]
    if "probability" in m:
        m["prob_lower"], m["prob_upper"] = expit(m["lower"]), expit(m["upper"])
    return m


def response_differences(emm: EMMResult, level: float = 0.95) -> pd.DataFrame:
    """A logistic GLMM's pairwise differences of the back-transformed means (accuracy points): estimate, SE by the
    delta method and single-step simultaneous intervals from their joint normal distribution, as ``summary(pairs(
    regrid(emmeans(m, ~ system))), adjust = "mvt", infer = TRUE)``. The test of each pair stays on the logit scale
    (the contrasts' p-values); these intervals say the size of the difference in the reader's units."""
    from scipy.special import expit

    if emm.means_vcov is None:
        raise MixedModelError("differences on the response scale need one family (no by=).")
    eta = emm.means["emmean"].to_numpy(float)
    p = expit(eta)
    G = np.diag(p * (1 - p))  # d p / d eta
    S = G @ emm.means_vcov @ G
    k = len(p)
    i, j = np.triu_indices(k, 1)  # the pairs (i, j), i < j, in the contrasts' order: by index, no pairs x k matrix
    est = p[i] - p[j]
    se = np.sqrt(np.maximum(np.diag(S)[i] + np.diag(S)[j] - 2.0 * S[i, j], 0.0))
    if len(i) > PAIRS_FROM and np.all(np.isfinite(se) & (se > 0)):  # many systems: sampled in k dimensions
        out = pairs_single_step(est, S, level=level)
    else:
        D = np.zeros((len(i), k))
        D[np.arange(len(i)), i], D[np.arange(len(i)), j] = 1.0, -1.0
        out = single_step(est, se, correlation(D, S), level=level)
    return pd.DataFrame({"contrast": emm.contrasts["contrast"].to_numpy(), "difference": est, "difference_SE": se,
                         "difference_low": out["lower"], "difference_high": out["upper"]})
