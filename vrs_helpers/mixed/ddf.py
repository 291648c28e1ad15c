"""Small-sample F tests of fixed effects in a REML fit: Satterthwaite's denominator degrees of freedom, as lmerTest
defines them (Kuznetsova, Brockhoff & Christensen 2017), and Kenward-Roger's (Kenward & Roger 1997, as pbkrtest
computes them: :mod:`.kenward_roger`), both from the sufficient statistics. ``ddf="satterthwaite"`` or
``ddf="kenward-roger"`` in :func:`contrast_test` and :func:`anova`; the default is :mod:`vrs_helpers.registry`'s
(Kenward-Roger, the default test of ``vrs analyze``).

For a contrast matrix L (q x p) of the fixed effects beta, with C(phi) = sigma^2 (X'V(theta)^-1 X)^-1 the covariance
of beta-hat as a function of the variance parameters phi = (theta, sigma) (lme4's relative Cholesky factors and the
residual SD, lmerTest's ``varpar``):

    F = (L beta)' (L C L')^-1 (L beta) / q,
    A = 2 H^-1,   H the Hessian of the REML deviance -2 l_R(theta, sigma) at the estimate,
    for q = 1:  nu = 2 (l'Cl)^2 / (g' A g),   g = d(l'Cl)/d phi;
    for q > 1:  L C L' = P D P', each row m of P'L gets nu_m as above; E = sum_m nu_m / (nu_m - 2) over nu_m > 2,
                denominator df = 2 E / (E - q) (E > q), else the smallest nu_m... as lmerTest's ``get_Fstat_ddf``.

The REML deviance and C are evaluated from the model's cross-products (the engine's :class:`.deviance.Deviance` /
:class:`.deviance.BlockDeviance`), so the test needs no N x N matrix and works for streamed and distributed fits
alike: its cost is a few dozen deviance evaluations. Derivatives are central finite differences with one step of
Richardson extrapolation (lmerTest uses numDeriv's, with more steps). Variance parameters at the
boundary (a diagonal theta of 0: a singular fit) are held at 0, as they carry no information.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from .. import outcomes, registry
from . import kenward_roger, numdiff
from .deviance import BlockDeviance, Deviance, tri_solve
from .errors import MixedModelError

BOUNDARY = 1e-6  # a diagonal theta below this is a boundary estimate (held at 0)
# the denominator-df methods the engine implements; their names, aliases, labels and the default (ddf=None) are
# vrs_helpers.registry's
METHODS = {name: registry.get(name).method for name in ("satterthwaite", "kenward-roger")}


def _method(ddf: str | None) -> str:
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


class _VarparFunctions:
    """The REML deviance and vcov(beta) as functions of phi = (theta, sigma), from a fit's sufficient statistics."""

    def __init__(self, result):
        if result.method != "REML":
            raise MixedModelError("Satterthwaite's df are defined for REML fits (lmerTest); refit with "
                                  "method='REML'.")
        s = result.stats
        self.s = s
        self.dev = Deviance(s, True) if s.intercepts_only else BlockDeviance(s, True)
        self.theta = s.theta_from_lme4(result.theta)
        self.sigma = float(result.sigma)
        lower = np.zeros(len(self.theta)) if isinstance(self.dev, Deviance) else self.dev.lower
        diag = lower == 0
        self.free = np.flatnonzero(~diag | (np.abs(self.theta) > BOUNDARY))  # boundary thetas held at 0

    def _parts(self, theta):
        value, parts = self.dev.evaluate(np.asarray(theta, dtype=float))
        if parts is None or not np.isfinite(value):
            raise MixedModelError("the REML deviance is not finite near the estimate; the small-sample test needs "
                                  "an interior fit.")
        return value, parts[-3:]

    def _full(self, x):
        theta = self.theta.copy()
        theta[self.free] = x[:-1]
        return theta, x[-1]

    def deviance(self, x) -> float:
        """-2 REML log-likelihood at theta (free part) and sigma: the profiled deviance un-profiled in sigma."""
        theta, sigma = self._full(x)
        value, (RX, cbeta, r2) = self._parts(theta)
        dof = self.s.n - self.s.p
        fixed_part = value - dof * (1.0 + math.log(2.0 * math.pi * r2 / dof))  # log|L|^2 + log|RX|^2
        return fixed_part + dof * math.log(2.0 * math.pi * sigma * sigma) + r2 / (sigma * sigma)

    def vcov(self, x) -> np.ndarray:
        theta, sigma = self._full(x)
        _, (RX, _, _) = self._parts(theta)
        p = self.s.p
        RXinv = tri_solve(RX, np.eye(p), lower=False)
        return sigma * sigma * (RXinv @ RXinv.T)

    def point(self) -> np.ndarray:
        return np.r_[self.theta[self.free], self.sigma]


def _steps(x: np.ndarray) -> np.ndarray:
    return numdiff.steps(x, 1e-3, 0.1)


def _hessian(fun, x: np.ndarray) -> np.ndarray:
    """Central differences with one Richardson step (as numDeriv does with more steps)."""
    f0 = fun(x)
    return numdiff.richardson(lambda h: numdiff.hessian(fun, x, h, f0), _steps(x))


def _jacobian(fun, x: np.ndarray) -> np.ndarray:
    """d fun / d x_i for a matrix-valued fun: shape (k, p, p)."""
    return numdiff.richardson(lambda h: numdiff.jacobian(fun, x, h), _steps(x))


def _ddf_one(c: np.ndarray, C: np.ndarray, jac: np.ndarray, A: np.ndarray) -> float:
    g = np.array([c @ J @ c for J in jac])
    var = float(c @ C @ c)
    denom = float(g @ A @ g)
    return 2.0 * var * var / denom if denom > 0 else float("inf")


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


def _satterthwaite(result, L, term: str) -> FTest:
    f = _VarparFunctions(result)
    x0 = f.point()
    C = f.vcov(x0)
    H = _hessian(f.deviance, x0)
    try:
        A = 2.0 * np.linalg.inv(H)
    except np.linalg.LinAlgError:
        raise MixedModelError("the Hessian of the REML deviance is singular at the estimate (an aliased or "
                              "non-identified variance component); Satterthwaite's df are not defined.") from None
    jac = _jacobian(f.vcov, x0)
    beta = result.fixed_effects["estimate"].to_numpy()
    q = L.shape[0]
    LCL = L @ C @ L.T
    Lb = L @ beta
    F = float(Lb @ np.linalg.solve(LCL, Lb) / q)
    if q == 1:
        nu = _ddf_one(L[0], C, jac, A)
    else:  # lmerTest: the eigen-directions of L C L', each with its own df
        evals, P = np.linalg.eigh(LCL)
        rows = P.T @ L
        nus = np.array([_ddf_one(r, C, jac, A) for r in rows])
        E = float(np.sum(nus[nus > 2] / (nus[nus > 2] - 2)))
        nu = 2 * E / (E - q) if E > q else float(np.min(nus))
    p_value = float(stats.f.sf(F, q, nu)) if np.isfinite(nu) else float(stats.chi2.sf(F * q, q))
    return FTest(term, F, q, float(nu), p_value)


def _kenward_roger(adj, L, term: str) -> FTest:
    r = kenward_roger.f_test(adj, L)
    return FTest(term, r.F, r.num_df, r.den_df, r.p_value, METHODS["kenward-roger"])


def contrast_test(result, L, term: str = "contrast", ddf: str | None = None) -> FTest:
    """F test of H0: L beta = 0 for a REML :class:`~vrs_helpers.mixed.MixedModelResult`, with Satterthwaite's
    (``ddf="satterthwaite"``, lmerTest's ``contest``) or Kenward-Roger's (``ddf="kenward-roger"``, pbkrtest's
    ``KRmodcomp``: the Wald F with the adjusted covariance Phi_A, scaled by lambda) denominator degrees of freedom
    (module docstring); ``ddf=None``: the registry's default (:func:`vrs_helpers.registry.ddf_default`,
    Kenward-Roger). ``L``: a (q x p) array or a 1-D contrast over ``result.fixed_effects.index``."""
    method = _method(ddf)
    L = _check_contrast(result, L)
    if method == "kenward-roger":
        return _kenward_roger(kenward_roger.adjustment(result), L, term)
    return _satterthwaite(result, L, term)


def term_columns(result) -> dict:
    """Fixed-effect columns per formula term, as lmerTest's anova groups them (``(Intercept)`` left out)."""
    s = result.stats
    names = list(result.fixed_effects.index)
    levels = {v: [str(x) for x in lv] for v, lv in s.factor_levels.items()}

    def parts_of(name):
        vars_ = []
        for part in name.split(":"):
            hit = None
            for v in s.formula.fixed_variables:
                if part == v or (v in levels and part.startswith(v) and part[len(v):] in levels[v]):
                    hit = v if hit is None or len(v) > len(hit) else hit
            vars_.append(hit)
        return vars_

    out = {}
    for term in s.formula.fixed_terms:
        cols = [i for i, n in enumerate(names) if n != "(Intercept)" and sorted(parts_of(n)) == sorted(term)]
        if cols:
            out[":".join(term)] = cols
    return out


def anova(result, ddf: str | None = None) -> pd.DataFrame:
    """Type III-style F tests of every fixed-effect term (its columns = 0) with Satterthwaite's or Kenward-Roger's
    df (``ddf=None``: the registry's default, Kenward-Roger): one row per term (term, F, num_df, den_df, p_value,
    method), as ``lmerTest::anova(m, ddf = "Satterthwaite")`` / ``anova(m, ddf = "Kenward-Roger")`` for the
    treatment contrasts the engine uses (a term's test with the other terms in the model)."""
    method = _method(ddf)
    _check_result(result)
    p = result.stats.p
    terms = term_columns(result)
    adj = kenward_roger.adjustment(result) if method == "kenward-roger" and terms else None
    rows = []
    for term, cols in terms.items():
        L = np.zeros((len(cols), p))
        L[np.arange(len(cols)), cols] = 1.0
        test = _kenward_roger(adj, L, term) if adj is not None else _satterthwaite(result, L, term)
        rows.append(test.to_frame())
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=["term", "F", "num_df", "den_df", "p_value", "method"])
