"""Small-sample F tests of fixed effects in a REML fit: Satterthwaite's denominator degrees of freedom, as lmerTest
defines them (Kuznetsova, Brockhoff & Christensen 2017: :mod:`.satterthwaite`), and Kenward-Roger's (Kenward & Roger
1997, as pbkrtest computes them: :mod:`.kenward_roger`), both from the sufficient statistics.
``ddf="satterthwaite"`` or ``ddf="kenward-roger"`` in :func:`contrast_test`, :func:`anova` and :func:`t_tests`; the
default (``ddf=None``) is :mod:`vrs_helpers.registry`'s (Kenward-Roger, the default test of ``vrs analyze``). The
anova tables of type I, II and III test lmerTest's hypotheses (:mod:`.hypotheses`).

For a contrast matrix L (q x p) of the fixed effects beta, with C the covariance of beta-hat:

- Satterthwaite: F = (L beta)' (L C L')^-1 (L beta) / q, with the df of lmerTest's ``contestMD``
  (:mod:`.satterthwaite`: the Hessian of the REML deviance in the variance parameters, computed once per model);
- Kenward-Roger: the Wald F with pbkrtest's adjusted covariance Phi_A, scaled by lambda, on (q, m) df
  (:mod:`.kenward_roger`).

Both need no N x N matrix and work for streamed and distributed fits alike. The per-model part (Satterthwaite's
Hessian, Kenward-Roger's adjusted covariance) is computed once per fitted model and reused by every contrast and
term tested on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ... import outcomes, registry
from ...threads import blas_limit
from ..structure.errors import MixedModelError
from . import kenward_roger, satterthwaite
from .hypotheses import hypotheses as anova_hypotheses
from .hypotheses import term_columns as hypothesis_columns

# the denominator-df methods the engine implements; their names, aliases, labels and the default (ddf=None) are
# vrs_helpers.registry's
METHODS = {name: registry.get(name).method for name in ("satterthwaite", "kenward-roger")}
_CACHE = "_small_sample_adjustments"  # per result: method -> adjustment (computed once per model)
MANY_CONTRASTS = 50  # t_tests: more contrasts than this get their Kenward-Roger df from one matrix pass (issue 54)


def method_key(ddf: str | None) -> str:
    """The canonical name of a small-sample method ("satterthwaite" or "kenward-roger"; the registry's aliases such
    as "KR" or "Kenward_Roger" accepted; None: the registry's default, :func:`vrs_helpers.registry.ddf_default`);
    anything else is a :class:`MixedModelError`."""
    try:
        key = registry.ddf_default() if ddf is None else registry.canonical(ddf)
    except registry.TestChoiceError:
        key = None
    if key not in METHODS:
        raise MixedModelError(f"ddf must be {' or '.join(map(repr, METHODS))} (default: "
                              f"{registry.ddf_default()!r}); got {ddf!r}.")
    return key


@dataclass
class FTest(outcomes.FTest):
    """An F test of fixed effects with Satterthwaite's or Kenward-Roger's denominator degrees of freedom
    (``method`` names which)."""

    term: str
    F: float  # noqa: N815 - the statistic's name
    num_df: int
    den_df: float
    p_value: float
    method: str = "F test, Satterthwaite df"

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"term": self.term, "F": self.F, "num_df": self.num_df, "den_df": self.den_df,
                              "p_value": self.p_value, "method": self.method}])

    def __repr__(self) -> str:
        return (f"FTest({self.term}: F = {self.F:.4g} on ({self.num_df}, {self.den_df:.4g}) df, "
                f"p = {self.p_value:.4g}; {self.method})")


def _check_result(result) -> None:
    if getattr(result, "stats", None) is None or not hasattr(result, "sigma"):
        raise MixedModelError("the F tests need a linear mixed model fitted by vrs_helpers.mixed.fit (REML), with "
                              "its statistics; GLMMs (mixed.glmer) have no denominator-df F test: use "
                              "mixed.lrt.")
    if result.method != "REML":
        raise MixedModelError("the small-sample F tests (Satterthwaite, Kenward-Roger) are defined for REML fits; "
                              "refit with method='REML'.")


def _check_contrast(result, L) -> np.ndarray:
    _check_result(result)
    L = np.atleast_2d(np.asarray(L, dtype=float))
    p = result.stats.p
    if L.ndim != 2 or L.shape[1] != p or L.shape[0] == 0:
        raise MixedModelError(f"L must have one column per fixed effect ({p}: {list(result.fixed_effects.index)}); "
                              f"got shape {L.shape}.")
    if not np.all(np.isfinite(L)):
        raise MixedModelError("L has missing or infinite entries.")
    if np.linalg.matrix_rank(L) < L.shape[0]:
        raise MixedModelError("the rows of L are linearly dependent; give a full-rank contrast matrix.")
    return L


def adjustment(result, ddf: str | None = None):
    """The per-model part of the test (:func:`.satterthwaite.adjustment` or :func:`.kenward_roger.adjustment`;
    ``ddf=None``: the registry's default), computed once per fitted model and kept with it."""
    method = method_key(ddf)
    _check_result(result)
    cache = result.__dict__.setdefault(_CACHE, {})
    if method not in cache:
        s = result.stats
        widths = sorted(m * t.r for m, t in zip(s.sizes, s.terms, strict=True))
        with blas_limit(sum(widths[:-1]) + s.p):  # one BLAS thread while the dense blocks are small, as the fit
            cache[method] = (kenward_roger.adjustment(result) if method == "kenward-roger"
                             else satterthwaite.adjustment(result))
    return cache[method]


def _test(adj, L, term: str) -> FTest:
    if isinstance(adj, kenward_roger.KRAdjustment):
        r = kenward_roger.f_test(adj, L)
        return FTest(term, r.F, r.num_df, r.den_df, r.p_value, METHODS["kenward-roger"])
    r = satterthwaite.f_test(adj, L)
    return FTest(term, r.F, r.num_df, r.den_df, r.p_value, METHODS["satterthwaite"])


def contrast_test(result, L, term: str = "contrast", ddf: str | None = None) -> FTest:
    """F test of H0: L beta = 0 for a REML :class:`~vrs_helpers.mixed.MixedModelResult`, with Satterthwaite's
    (``ddf="satterthwaite"``, lmerTest's ``contest``) or Kenward-Roger's (``ddf="kenward-roger"``, pbkrtest's
    ``KRmodcomp``: the Wald F with the adjusted covariance Phi_A, scaled by lambda) denominator degrees of freedom
    (module docstring); ``ddf=None``: the registry's default (:func:`vrs_helpers.registry.ddf_default`,
    Kenward-Roger). ``L``: a (q x p) array or a 1-D contrast over ``result.fixed_effects.index``."""
    method = method_key(ddf)
    L = _check_contrast(result, L)
    return _test(adjustment(result, method), L, term)


def term_columns(result) -> dict:
    """Fixed-effect columns per formula term, as lmerTest's anova groups them (``(Intercept)`` left out)."""
    _check_result(result)
    return hypothesis_columns(result)


def anova(result, ddf: str | None = None, type=3) -> pd.DataFrame:  # noqa: A002 - lmerTest's argument name
    """The anova table of a REML fit as ``lmerTest::anova(m, type = type, ddf = ...)``: one F test per fixed-effect
    term (term, F, num_df, den_df, p_value, method) with Satterthwaite's or Kenward-Roger's df (``ddf=None``: the
    registry's default, Kenward-Roger).

    ``type=3`` (default): each term's marginal (type III) hypothesis, the same whatever contrasts code the factors:
    a main effect compares its levels averaged with equal weights over the factors it interacts with, an
    interaction its interaction contrasts; ``type=2``: each term adjusted for every term that does not contain it;
    ``type=1``: sequential, each term adjusted for the terms before it in the formula. The hypothesis matrices are
    :func:`vrs_helpers.mixed.inference.hypotheses.hypotheses` (lmerTest's ``attr(table, "hypotheses")``)."""
    method = method_key(ddf)
    _check_result(result)
    Ls = anova_hypotheses(result, type)
    rows = []
    adj = adjustment(result, method) if Ls else None
    for term, L in Ls.items():
        if L.shape[0] == 0:
            continue
        rows.append(_test(adj, L, term).to_frame())
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=["term", "F", "num_df", "den_df", "p_value", "method"])


def t_tests(result, C, ddf: str | None = None) -> pd.DataFrame:
    """One t test per row c of ``C`` (H0: c'beta = 0) with small-sample df, as emmeans computes them for lmer fits:
    ``ddf="kenward-roger"`` (emmeans' ``lmer.df = "kenward-roger"``: SE from pbkrtest's adjusted covariance Phi_A,
    df from ``pbkrtest::Lb_ddf``) or ``"satterthwaite"`` (the fit's covariance, lmerTest's df). Columns estimate,
    SE, df, t, p_value (two-sided, unadjusted). ``ddf=None``: the registry's default."""
    method = method_key(ddf)
    C = np.atleast_2d(np.asarray(C, dtype=float))
    _check_contrast(result, C[:1])
    adj = adjustment(result, method)
    beta = result.fixed_effects["estimate"].to_numpy()
    if method == "kenward-roger":
        V = adj.vcov_adjusted
        dfs = (kenward_roger.contrast_dfs(adj, C) if len(C) > MANY_CONTRASTS else
               np.array([kenward_roger.f_test(adj, c[None]).den_df for c in C]))
    else:
        V = adj.vcov
        dfs = np.array([adj.df(c) for c in C])
    est = C @ beta
    se = np.sqrt(np.einsum("ij,jk,ik->i", C, V, C))
    t = est / se
    p = 2.0 * stats.t.sf(np.abs(t), dfs)
    return pd.DataFrame({"estimate": est, "SE": se, "df": dfs, "t": t, "p_value": p})
