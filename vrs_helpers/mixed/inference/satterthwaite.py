"""Satterthwaite's denominator degrees of freedom for tests of fixed effects in a REML fit, as lmerTest 3.1
computes them (Kuznetsova, Brockhoff & Christensen 2017, section 3; its ``contest1D`` and ``contestMD``), with the
derivatives of the variance parameters computed once per model from the sufficient statistics.

With phi = (theta, sigma) (lme4's relative Cholesky factors and the residual SD, lmerTest's ``varpar``),
C(phi) = sigma^2 (X'V(theta)^-1 X)^-1 the covariance of beta-hat, H the Hessian of the REML deviance
f(theta, sigma) = -2 l_R at the estimate and A = 2 H^+ (lmerTest: the pseudo-inverse over eigenvalues above 1e-8):

    one contrast c:   t = c'beta / sqrt(c'Cc),   nu = 2 (c'Cc)^2 / (g'A g),   g_i = c' (dC/dphi_i) c;
    q contrasts L:    L C L' = P D P' (eigenvalues d_m > sqrt(eps) d_1 kept: q' of them), F = sum_m (P'L beta)_m^2
                      / d_m / q'; each row m of P'L gets nu_m as above; the denominator df are nu_1 for q' = 1, their
                      mean when they agree to 1e-8, 2 if some nu_m <= 2, else 2E / (E - q'), E = sum nu_m/(nu_m - 2).

Computed once per model (:func:`adjustment`) and reused for every contrast and term:

- H from the profiled REML deviance D(theta) = f(theta, sigma-hat(theta)), sigma-hat^2 = r^2(theta) / (n - p), whose
  analytic gradient the engine has (:mod:`.deviance`): H_theta,theta = D'' + r^2' r^2'^T / ((n - p) sigma^4),
  H_theta,sigma = -2 r^2' / sigma^3, H_sigma,sigma = 4 (n - p) / sigma^2 (sigma at sigma-hat; D' = f_theta along
  sigma-hat(theta) as f_sigma = 0 there). D'' and r^2' = d r^2 / d theta are central differences of the gradient and
  of r^2 at theta +- h e_k;
- dC/dtheta_k from C at the same points, dC/dsigma = 2 C / sigma.

That is 2 K evaluations of the deviance and its gradient for K free variance parameters (lmerTest differentiates
f numerically, with numDeriv's Richardson steps, about 8 K^2 evaluations), and no N x N matrix. Variance
parameters at the boundary (a diagonal theta below 1e-6: a singular fit) are held at 0, as they carry no
information (their rows of H are 0 off the diagonal, and dC/dtheta_k = 0 there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ...threads import blas_limit
from ..likelihood import nested
from ..likelihood.deviance import Deviance, tri_solve
from ..structure import numdiff
from ..structure.errors import MixedModelError

BOUNDARY = 1e-6  # a diagonal theta below this is a boundary estimate (held at 0)
STEP = 1e-4  # relative step of the central differences
EIGEN_TOL = 1e-8  # lmerTest: eigenvalues of H above this are inverted (pseudo-inverse)


@dataclass
class SatterthwaiteAdjustment:
    """What Satterthwaite's df need, computed once per model (:func:`adjustment`): the variance parameters phi
    (``names``, ``varpar``: the free thetas in lme4's names, then sigma), the fixed effects ``beta`` and their
    covariance ``vcov`` C, ``jacobian`` dC/dphi_i (one p x p matrix per parameter), ``hessian`` H of the REML
    deviance in phi and ``vcov_varpar`` A = 2 H^+ (lmerTest's ``vcov_varpar``)."""

    names: list
    varpar: np.ndarray
    beta: np.ndarray
    vcov: np.ndarray
    jacobian: np.ndarray
    hessian: np.ndarray
    vcov_varpar: np.ndarray
    fixed_names: list

    def df(self, c) -> float:
        """Satterthwaite's df of one contrast c (lmerTest's ``contest1D``): 2 (c'Cc)^2 / (g'A g)."""
        c = np.asarray(c, dtype=float)
        var = float(c @ self.vcov @ c)
        g = np.einsum("i,kij,j->k", c, self.jacobian, c)
        denom = float(g @ self.vcov_varpar @ g)
        return 2.0 * var * var / denom if denom > 0 else math.inf

    def to_frame(self) -> pd.DataFrame:
        """The asymptotic covariance A of the variance parameters (phi x phi)."""
        return pd.DataFrame(self.vcov_varpar, index=self.names, columns=self.names)

    def __repr__(self) -> str:
        se = np.sqrt(np.clip(np.diag(self.vcov_varpar), 0, None))
        body = ", ".join(f"{n} = {v:.4g} (SE {s:.2g})" for n, v, s in zip(self.names, self.varpar, se, strict=True))
        return f"SatterthwaiteAdjustment({body})"


def _diagonal(s, dev) -> np.ndarray:
    """Per theta element (internal order): whether it is a diagonal element of its term's relative factor."""
    return np.ones(len(s.terms), dtype=bool) if isinstance(dev, Deviance) else dev.lower == 0


def adjustment(result) -> SatterthwaiteAdjustment:
    """The Hessian of the REML deviance in (theta, sigma), its pseudo-inverse and dC/dphi of a REML fit
    (module docstring), from the fit's sufficient statistics."""
    s = getattr(result, "stats", None)
    if s is None or not hasattr(result, "sigma"):
        raise MixedModelError("Satterthwaite's df need a linear mixed model fitted by vrs_helpers.mixed.fit (with its "
                              "statistics).")
    if result.method != "REML":
        raise MixedModelError("Satterthwaite's df are defined for REML fits (lmerTest); refit with method='REML'.")
    if s.p == 0:
        raise MixedModelError("the model has no fixed effects to test.")
    dev = nested.deviance(s, True)
    diag = _diagonal(s, dev)
    theta = s.theta_from_lme4(result.theta)
    names_internal = np.empty(len(theta), dtype=object)
    names_internal[s.theta_positions()] = [str(nm) for nm in result.theta.index]
    free = np.flatnonzero(~diag | (np.abs(theta) > BOUNDARY))
    sigma = float(result.sigma)
    dof = s.n - s.p

    K, p = len(free), s.p

    def at(th) -> np.ndarray:
        """(the deviance's gradient in the free thetas, r^2, (RX'RX)^-1), flattened into one vector."""
        value, parts = dev.evaluate(np.asarray(th, dtype=float))
        if parts is None or not np.isfinite(value):
            raise MixedModelError("the REML deviance is not finite near the estimate; Satterthwaite's df need an "
                                  "interior fit.")
        RX, r2 = parts[-3], parts[-1]
        RXinv = tri_solve(RX, np.eye(p), lower=False)
        return np.concatenate([dev.gradient(np.asarray(th, dtype=float), parts)[free], [r2],
                               (RXinv @ RXinv.T).ravel()])

    with blas_limit(dev.q_o + p):  # one BLAS thread while the dense blocks are small, as the fit
        W0 = at(theta)[K + 1:].reshape(p, p)
        # central differences in each free theta (numdiff.jacobian): row j is d/d theta_free[j]
        J = numdiff.jacobian(at, theta, numdiff.steps(theta, STEP, 0.1), at=free)
    D2, dr2, dW = J[:, :K].T, J[:, K], J[:, K + 1:].reshape(K, p, p)
    D2 = 0.5 * (D2 + D2.T)
    H = np.empty((K + 1, K + 1))
    H[:K, :K] = D2 + np.outer(dr2, dr2) / (dof * sigma ** 4)
    H[:K, K] = H[K, :K] = -2.0 * dr2 / sigma ** 3
    H[K, K] = 4.0 * dof / sigma ** 2
    evals, V = np.linalg.eigh(H)
    pos = evals > EIGEN_TOL
    A = 2.0 * (V[:, pos] / evals[pos]) @ V[:, pos].T
    C = sigma * sigma * W0
    jac = np.concatenate([sigma * sigma * dW, (2.0 * C / sigma)[None]], axis=0)
    names = [names_internal[k] for k in free] + ["sigma"]
    return SatterthwaiteAdjustment(names, np.r_[theta[free], sigma], result.fixed_effects["estimate"].to_numpy(),
                                   result.vcov.to_numpy(), jac, H, A, list(result.fixed_effects.index))


def fstat_ddf(nu: np.ndarray, tol: float = 1e-8) -> float:
    """lmerTest's ``get_Fstat_ddf``: the denominator df of an F statistic from the df of its q t statistics."""
    nu = np.asarray(nu, dtype=float)
    if len(nu) == 1:
        return float(nu[0])
    if np.all(np.abs(np.diff(nu)) < tol):
        return float(nu.mean())
    if np.any(nu <= 2):
        return 2.0
    E = float(np.sum(nu / (nu - 2)))
    return 2.0 * E / (E - len(nu))


@dataclass
class SatterthwaiteF:
    """F = (L beta)'(L C L')^-1 (L beta) / q on (q, ddf) degrees of freedom and its p-value (lmerTest's
    ``contestMD``; q the rank of L C L')."""

    F: float  # noqa: N815 - the statistic's name
    num_df: int
    den_df: float
    p_value: float


def f_test(adj: SatterthwaiteAdjustment, L) -> SatterthwaiteF:
    """Satterthwaite's F test of H0: L beta = 0 (module docstring; lmerTest's ``contestMD`` / ``contest1D``)."""
    L = np.atleast_2d(np.asarray(L, dtype=float))
    if L.shape[0] == 1:
        c = L[0]
        est = float(c @ adj.beta)
        var = float(c @ adj.vcov @ c)
        F, q, nu = est * est / var, 1, adj.df(c)
    else:
        VL = L @ adj.vcov @ L.T
        d, P = np.linalg.eigh(0.5 * (VL + VL.T))
        d, P = d[::-1], P[:, ::-1]  # decreasing, as R's eigen
        q = int(np.sum(d > max(math.sqrt(np.finfo(float).eps) * d[0], 0.0)))
        if q == 0:
            raise MixedModelError("the contrast has no estimable direction (L C L' = 0).")
        PtL = (P.T @ L)[:q]
        t2 = (PtL @ adj.beta) ** 2 / d[:q]
        F = float(t2.sum() / q)
        nu = fstat_ddf(np.array([adj.df(r) for r in PtL]))
    p = float(stats.f.sf(F, q, nu)) if np.isfinite(nu) else float(stats.chi2.sf(F * q, q))
    return SatterthwaiteF(float(F), q, float(nu), p)


__all__ = ["SatterthwaiteAdjustment", "SatterthwaiteF", "adjustment", "f_test", "fstat_ddf"]
