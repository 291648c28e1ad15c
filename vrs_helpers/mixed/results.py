"""Fitting (optimizing theta), the result object with lme4's quantities, and the likelihood ratio test."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import optimize, stats

from ..outcomes import TestOutcome
from ..threads import blas_limit
from . import ddf as ddf_tests
from . import nested
from .accumulate import accumulate
from .design import SufficientStats, design_rows
from .deviance import BlockDeviance, Deviance, tri_solve
from .errors import SINGULAR_TOL, AliasedFactorsWarning, ConvergenceWarning, MixedModelError, SingularFitWarning
from .formula import FormulaError

# ------------------------------------------------------------------------------------------ the result

def _fmt_table(df: pd.DataFrame) -> str:
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        return df.to_string()


@dataclass
class MixedModelResult:
    """A fitted linear mixed model, with lme4's quantities.

    ``theta`` is lme4's theta (relative covariance factors, named as lme4 names them: ``g.(Intercept)``,
    ``g.x.(Intercept)``, ``g.x``), ``varcorr`` lme4's ``as.data.frame(VarCorr(m))`` (grp, var1, var2, vcov, sdcor).
    ``variance_components`` is, for random-intercept models, a table of variance, sd and percent of the total per
    component (book chapter 3); with random slopes it is ``varcorr``.
    """

    formula: str
    method: str  # "REML" | "ML"
    nobs: int
    ngroups: dict
    theta: pd.Series
    sigma: float
    fixed_effects: pd.DataFrame  # estimate, se, z
    variance_components: pd.DataFrame  # variance, sd, percent; index lme4 names + "Residual" (slopes: varcorr)
    varcorr: pd.DataFrame  # grp, var1, var2, vcov, sdcor (lme4's as.data.frame(VarCorr(m)))
    loglik: float
    deviance: float  # -2 loglik (REML criterion for REML fits)
    singular: bool
    converged: bool
    optimizer_message: str
    n_evaluations: int
    vcov: pd.DataFrame
    ranef: dict  # grouping -> Series of conditional modes (BLUPs); with slopes a DataFrame (levels x coefficients)
    warnings: list[str] = field(default_factory=list)
    stats: SufficientStats | None = field(default=None, repr=False)
    _data: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def n_params(self) -> int:
        """Parameters counted by lme4's logLik df: fixed effects + variance components + residual."""
        return len(self.fixed_effects) + len(self.theta) + 1

    @property
    def aic(self) -> float:
        return self.deviance + 2 * self.n_params

    @property
    def bic(self) -> float:
        return self.deviance + math.log(self.nobs) * self.n_params

    @property
    def reml_criterion(self) -> float | None:
        return self.deviance if self.method == "REML" else None

    def summary(self) -> str:
        vc = self.variance_components.copy()
        lines = [
            f"Linear mixed model fit by {'REML' if self.method == 'REML' else 'maximum likelihood'} "
            "(vrs_helpers.mixed)",
            f"Formula: {self.formula}",
            f"{'REML criterion' if self.method == 'REML' else 'deviance'} = {self.deviance:.4f}; "
            f"logLik = {self.loglik:.4f}; AIC = {self.aic:.4f}; BIC = {self.bic:.4f}",
            f"Observations: {self.nobs}; groups: " + ", ".join(f"{k} {v}" for k, v in self.ngroups.items()),
            "", "Random effects:", _fmt_table(vc if "variance" in vc else self.varcorr), "", "Fixed effects:",
            _fmt_table(self.fixed_effects),
        ]
        if self.singular:
            lines.append("\nboundary (singular) fit: a variance component is estimated as (nearly) zero.")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def __repr__(self) -> str:
        vc = ", ".join(f"{g}{'' if v1 == '(Intercept)' or pd.isna(v1) else '.' + str(v1)}"
                       f"{'' if pd.isna(v2) else '.' + str(v2)}={v:.4g}"
                       for g, v1, v2, v in self.varcorr[["grp", "var1", "var2", "vcov"]].itertuples(index=False))
        return (f"MixedModelResult({self.formula!r}, {self.method}, n={self.nobs}, logLik={self.loglik:.3f}, "
                f"variances: {vc}{', singular' if self.singular else ''})")

    def _repr_html_(self) -> str:
        return ("<pre>" + self.summary().split("Random effects:")[0] + "</pre><b>Random effects</b>"
                + self.variance_components.to_html(float_format=lambda x: f"{x:.6g}")
                + "<b>Fixed effects</b>" + self.fixed_effects.to_html(float_format=lambda x: f"{x:.6g}"))

    def to_frame(self) -> pd.DataFrame:
        """Variance components (variance, sd, percent; random-intercept models) or lme4's VarCorr frame."""
        return self.variance_components.copy()

    # --- fitted values and residuals (need the rows)
    def predict(self, data: pd.DataFrame, include_random: bool = True) -> np.ndarray:
        """Predictions for rows of ``data``: X beta (+ the BLUPs of the random effects, 0 for new levels)."""
        s = self.stats
        X = design_rows(s, data)
        out = X @ self.fixed_effects["estimate"].to_numpy()
        if include_random:
            for t, name in zip(s.terms, s.groups, strict=True):
                g = t.group
                key = data[g[0]] if len(g) == 1 else data[list(g)].astype(str).agg(":".join, axis=1)
                b = self.ranef[name]
                if isinstance(b, pd.Series):
                    out = out + key.map(b).astype(float).fillna(0.0).to_numpy()
                    continue
                for cov, cname in zip(t.covariates, t.covariate_names, strict=True):
                    z = np.ones(len(data))
                    for v in cov:
                        z = z * data[v].to_numpy(dtype=float)
                    out = out + z * key.map(b[cname]).astype(float).fillna(0.0).to_numpy()
        return out

    @property
    def fitted(self) -> np.ndarray:
        if self._data is None:
            raise MixedModelError("Fitted values need the rows; this model was fitted from a stream of chunks. "
                                  "Use result.predict(chunk) on each chunk instead.")
        return self.predict(self._data)

    @property
    def residuals(self) -> np.ndarray:
        return self._data[self.stats.formula.response].to_numpy(dtype=float) - self.fitted

    # --- small-sample F tests of the fixed effects (REML fits; from the sufficient statistics)
    def anova(self, ddf: str = "satterthwaite", type=3) -> pd.DataFrame:  # noqa: A002 - lmerTest's name
        """lmerTest's anova table: an F test of every fixed-effect term's type III (default), II or I hypothesis
        with ``ddf="satterthwaite"`` (lmerTest's default) or ``"kenward-roger"`` (pbkrtest) denominator df:
        :func:`vrs_helpers.mixed.ddf.anova`."""
        return ddf_tests.anova(self, ddf=ddf, type=type)

    def test(self, L, ddf: str = "satterthwaite", term: str = "contrast") -> ddf_tests.FTest:
        """F test of H0: L beta = 0 (L: q x p, or one contrast over ``fixed_effects.index``) with Satterthwaite's or
        Kenward-Roger's denominator df: :func:`vrs_helpers.mixed.ddf.contrast_test`."""
        return ddf_tests.contrast_test(self, L, term=term, ddf=ddf)




# --------------------------------------------------------------------------------------------- fitting

def _aliased_pairs(s: SufficientStats) -> list[tuple[str, str]]:
    pairs = []
    for (k, j), N in s.ZtZ_cross.items():
        if not (s.terms[k].intercept_only and s.terms[j].intercept_only) or s.terms[k].group == s.terms[j].group:
            continue
        nz = N.copy()
        nz.data = (nz.data != 0).astype(float)
        nz.eliminate_zeros()
        if (nz.getnnz(axis=1) == 1).all() and (nz.getnnz(axis=0) == 1).all():
            pairs.append((s.groups[k], s.groups[j]))
    return pairs


def _blas_limit(dev, threads):
    """One BLAS thread where the dense blocks are small (:func:`vrs_helpers.threads.blas_limit`)."""
    return blas_limit(dev.q_o + dev.s.p, threads)


def _nested_in(s: SufficientStats, k: int, j: int) -> bool:
    """Whether every level of term k's grouping lies within one level of term j's (from the Z_k'Z_j counts)."""
    G = s.ZtZ_cross[(k, j)] if k < j else s.ZtZ_cross[(j, k)].T
    G = G.tocsr() if hasattr(G, "tocsr") else G
    return bool((np.diff(G.indptr) <= 1).all())


def _moment_start(s: SufficientStats) -> np.ndarray | None:
    """Starting theta for a random-intercept model from one-way ANOVA moments of the OLS residuals.

    For term k with n_l rows and residual sum R_l per level: between-level SS = sum_l R_l^2 / n_l, the usual
    one-way estimate tau_k = (MSB - MSW) / n0 with n0 = (n - sum n_l^2 / n) / (m - 1) (Searle, Casella & McCulloch
    1992, 3.6), sigma^2 from the smallest within-level mean square. Crossed factors leave these nearly unbiased,
    nested ones inflate the outer factor; either way the start is close enough that the optimizer needs few steps
    (lme4 starts at theta = 1). Everything comes from the sufficient statistics; None when they do not suffice.
    """
    n, p = s.n, s.p
    try:
        beta = np.linalg.lstsq(s.XtX, s.Xty, rcond=None)[0] if p else np.zeros(0)
    except np.linalg.LinAlgError:
        return None
    rss = float(s.yty - 2.0 * beta @ s.Xty + beta @ s.XtX @ beta) if p else float(s.yty)
    if not (np.isfinite(rss) and rss > 0 and n > p + 1):
        return None
    taus, msws = [], []
    for k in range(len(s.terms)):
        nl = s.ZtZ_diag[k][:, 0, 0]
        R = s.Zty[k] - (s.ZtX[k] @ beta if p else 0.0)
        ok = nl > 0
        m = int(ok.sum())
        if m < 2 or n <= m:
            return None
        ssb = float((R[ok] ** 2 / nl[ok]).sum())
        msb = ssb / (m - 1)
        msw = max(rss - ssb, 0.0) / (n - m)
        n0 = (n - float((nl[ok] ** 2).sum()) / n) / (m - 1)
        taus.append(max((msb - msw) / n0, 0.0) if n0 > 0 else 0.0)
        msws.append(msw)
    # a term nested in others (item:rater in item and in rater) carries their variance in its one-way estimate:
    # subtract the corrected estimates of the coarser terms (each of its levels lies in one level of theirs)
    order = sorted(range(len(taus)), key=lambda k: s.sizes[k])
    tau = list(taus)
    for k in order:
        coarser = [j for j in order if s.sizes[j] < s.sizes[k] and _nested_in(s, k, j)]
        tau[k] = max(taus[k] - sum(tau[j] for j in coarser), 0.0)
    taus = tau
    sigma2 = min(msws)
    if not sigma2 > 0:
        sigma2 = rss / (n - p)
    theta = np.sqrt(np.asarray(taus) / sigma2)
    # not exactly 0 (the theta-gradient vanishes there) and within lme4's usual range
    return np.clip(theta, 0.05, 10.0)


def _optimize_intercepts(dev: Deviance, K: int, theta0):
    """L-BFGS-B on the analytic gradient, with escapes from a boundary that traps the theta-gradient at zero."""
    if theta0 is None:
        theta0 = _moment_start(dev.s)
    x0 = np.ones(K) if theta0 is None else np.asarray(theta0, dtype=float)
    bounds = [(0.0, None)] * K
    opts = {"ftol": 1e-13, "gtol": 1e-7, "maxiter": 5000, "maxcor": 20}
    res = optimize.minimize(dev.value_and_grad, x0, jac=True, method="L-BFGS-B", bounds=bounds, options=opts)
    n_eval = int(res.nfev)
    theta, best_f = res.x.copy(), float(res.fun)
    # The theta-gradient is 0 at theta_k = 0 whatever the data say, so a component can be trapped on the boundary.
    # Check the psi = theta^2 gradient there (d deviance / d psi_k): where it is negative the deviance decreases
    # away from 0; move that component off the boundary by a 1-D search and optimize again.
    for _ in range(2 * K):
        g_psi = dev.psi_gradient(theta)
        trapped = [k for k in range(K) if theta[k] <= 1e-8 and g_psi[k] < -1e-6]
        if not trapped:
            break
        start = theta.copy()
        for k in trapped:
            def along(t, k=k, start=start):
                x = start.copy()
                x[k] = t
                return dev(x)
            line = optimize.minimize_scalar(along, bounds=(0.0, max(2.0, 2 * float(start.max()))), method="bounded",
                                            options={"xatol": 1e-6})
            n_eval += int(line.nfev)
            start[k] = line.x
        r2 = optimize.minimize(dev.value_and_grad, start, jac=True, method="L-BFGS-B", bounds=bounds, options=opts)
        n_eval += int(r2.nfev)
        if r2.fun < best_f:
            theta, best_f, res = r2.x.copy(), float(r2.fun), r2
        else:
            break
    theta, best_f, rel_step, ne = _newton_polish(dev, theta, best_f, np.zeros(K), lambda t: np.flatnonzero(t > 0))
    n_eval += ne
    free = theta > 0
    boundary_ok = True
    if (~free).any():
        boundary_ok = bool((dev.psi_gradient(theta)[~free] >= -1e-6 * max(1.0, abs(best_f))).all())
    converged = bool(np.isfinite(best_f)) and rel_step < 2e-3 and boundary_ok
    return theta, best_f, converged, str(res.message) + f" (max relative gradient {rel_step:.2g})", n_eval


def _newton_polish(dev, theta: np.ndarray, best_f: float, lower: np.ndarray, free_of, max_steps: int = 8):
    """Newton steps on the free components with a Hessian from forward differences of the analytic gradient,
    which is also lme4's convergence check (the Newton step H^-1 g, its "relative gradient", must be small).

    L-BFGS-B stops on a relative reduction of the deviance, which on flat directions (tiny variance components)
    leaves theta where the rounding of the run happened to stop it; where the step is not negligible it is taken.
    ``lower`` holds the bounds of theta (0 for a standard deviation, -inf for a correlation term), ``free_of(theta)``
    the indices of the components off the boundary. The Hessian changes little near the
    optimum, so it is reused and recomputed only when a step with the old one fails. Returns (theta, deviance,
    largest Newton step, evaluations).
    """
    rel_step, n_eval = 0.0, 0
    hess, hess_idx, fresh = None, None, False
    for _ in range(max_steps):
        _, grad = dev.value_and_grad(theta)
        idx = free_of(theta)
        if not len(idx):
            break
        if hess is None or not np.array_equal(idx, hess_idx):
            h = 1e-5 * np.maximum(np.abs(theta[idx]), 1e-3)
            hess = np.empty((len(idx), len(idx)))
            for j, (k, hk) in enumerate(zip(idx, h, strict=True)):
                t = theta.copy()
                t[k] += hk
                hess[:, j] = (dev.value_and_grad(t)[1][idx] - grad[idx]) / hk
            n_eval += len(idx)
            hess = 0.5 * (hess + hess.T)
            hess_idx, fresh = idx, True
        try:
            step = np.linalg.solve(hess, grad[idx])
            rel_step = float(np.max(np.abs(step)))
            newton = bool(np.all(np.linalg.eigvalsh(hess) > 0))
        except np.linalg.LinAlgError:
            rel_step, newton = float(np.max(np.abs(grad[idx]))), False
        if not newton or rel_step < 1e-9:
            break
        t = theta.copy()
        t[idx] -= step
        t = np.where(lower == 0, np.maximum(t, 0.0), t)
        f_new, g_new = dev.value_and_grad(t)
        n_eval += 1
        # near the optimum the deviance is flat to its rounding noise (~1e-12 relative, seen on the liver grid of
        # Table 3.4 with variances ~1e-5), while the analytic gradient still points: accept a step within that
        # noise that shrinks the Newton decrement
        decrement = float(grad[idx] @ step)
        decrement_new = float(g_new[idx] @ np.linalg.solve(hess, g_new[idx]))
        if not (f_new <= best_f + 1e-11 * abs(best_f) + 1e-9 and decrement_new < decrement):
            if fresh:
                break
            hess = None  # the reused Hessian was stale: recompute it at theta and try again
            continue
        theta, best_f, fresh = t, float(min(f_new, best_f)), False
    return theta, best_f, rel_step, n_eval


def _canonical(dev: BlockDeviance, theta: np.ndarray) -> np.ndarray:
    """theta with every T_k's diagonal made non-negative by flipping the sign of its column (lme4's convention):
    T_k T_k', and so the deviance, is unchanged."""
    theta = np.asarray(theta, dtype=float).copy()
    for k, (rows, cols) in enumerate(dev.tri):
        part = theta[dev.tslices[k]]
        for c in np.unique(cols):
            if part[(rows == c) & (cols == c)][0] < 0:
                part[cols == c] *= -1.0
        theta[dev.tslices[k]] = part
    return theta


def _optimize_general(dev: BlockDeviance, theta0):
    """Random slopes: L-BFGS-B on the analytic gradient (:meth:`BlockDeviance.gradient`) from lme4's start, without
    bounds, then Newton polishing with the convergence check (:func:`_newton_polish`).

    The deviance depends on T_k only through T_k T_k', so a diagonal element may pass through 0 and the result is
    brought to lme4's form (non-negative diagonal) afterwards. With lme4's bound (diagonal >= 0) a quasi-Newton
    step that lands on the bound stays there: the theta-gradient of a diagonal element at 0 vanishes whatever the
    data say (the variances are squares), and on the Chem97 design every fit began by trapping one variance at 0
    and needed line searches and restarts to leave it. A diagonal element that ends at 0 (a start with zeros, or a
    singular fit) is still searched along and the optimizer restarted where the deviance falls away from 0."""
    x0 = dev.start() if theta0 is None else np.asarray(theta0, dtype=float)
    diag = dev.lower == 0
    free_bounds = np.full(dev.n_theta, -np.inf)
    # L-BFGS-B's last iterations on a relative reduction below ~1e-11 grind on rounding noise (up to 15 of 40
    # evaluations on Chem97); the Newton polish that follows converges from there in one or two steps
    opts = {"ftol": 1e-11, "gtol": 1e-7, "maxiter": 5000, "maxcor": 20}

    def run(x):
        r = optimize.minimize(dev.value_and_grad, x, jac=True, method="L-BFGS-B", options=opts)
        return _canonical(dev, r.x), float(r.fun), r, int(r.nfev)

    theta, best_f, res, n_eval = run(x0)
    for _ in range(len(theta)):
        stuck = np.flatnonzero(diag & (theta <= 1e-6))
        if not len(stuck):
            break
        start, moved = theta.copy(), False
        upper = max(2.0, 2.0 * float(np.abs(theta).max()))
        base = theta.copy()  # each element searched from the point the optimizer stopped at
        for k in stuck:
            def along(v, k=k, base=base):
                x = base.copy()
                x[k] = v
                return dev(x)
            line = optimize.minimize_scalar(along, bounds=(0.0, upper), method="bounded", options={"xatol": 1e-4})
            n_eval += int(line.nfev)
            if line.fun < best_f - 1e-9 * max(1.0, abs(best_f)):
                start[k], moved = float(line.x), True
        if not moved:
            break
        t2, f2, r2, ne = run(start)
        n_eval += ne
        if not f2 < best_f - 1e-9 * max(1.0, abs(best_f)):
            break
        theta, best_f, res = t2, f2, r2
    theta, best_f, rel_step, ne = _newton_polish(dev, theta, best_f, free_bounds,
                                                 lambda t: np.flatnonzero(~diag | (t != 0)))
    theta = _canonical(dev, theta)
    n_eval += ne
    converged = bool(np.isfinite(best_f)) and rel_step < 2e-3
    return theta, best_f, converged, str(res.message) + f" (max relative gradient {rel_step:.2g})", n_eval


def _theta_names(s: SufficientStats, dev) -> list[str]:
    names = []
    for k, t in enumerate(s.terms):
        cn = t.covariate_names
        if isinstance(dev, Deviance):
            names.append(f"{t.group_name}.{cn[0]}")
            continue
        rows, cols = dev.tri[k]
        for rr, c in zip(rows, cols, strict=True):  # lme4 names theta after the grouping (no '.1' suffix)
            names.append(f"{t.group_name}.{cn[rr]}" if rr == c else f"{t.group_name}.{cn[rr]}.{cn[c]}")
    return names


def _covariances(s: SufficientStats, dev, theta: np.ndarray, sigma2: float) -> list[np.ndarray]:
    """Per term the covariance matrix sigma^2 T_k T_k' of its random coefficients."""
    if isinstance(dev, Deviance):
        return [np.array([[theta[k] ** 2 * sigma2]]) for k in range(len(s.terms))]
    return [sigma2 * (T @ T.T) for T in dev.lambdas(theta)]


def _varcorr(s: SufficientStats, covs: list[np.ndarray], sigma2: float) -> pd.DataFrame:
    """lme4's as.data.frame(VarCorr(m)): per term (lme4's order) the variances, then the covariances."""
    rows = []
    for k in s.lme4_order:
        t, cov, g = s.terms[k], covs[k], s.groups[k]
        cn = t.covariate_names
        sd = np.sqrt(np.clip(np.diag(cov), 0, None))
        for i in range(t.r):
            rows.append((g, cn[i], None, float(cov[i, i]), float(sd[i])))
        for i in range(t.r):
            for j in range(i + 1, t.r):
                corr = cov[i, j] / (sd[i] * sd[j]) if sd[i] > 0 and sd[j] > 0 else np.nan
                rows.append((g, cn[i], cn[j], float(cov[i, j]), float(corr)))
    rows.append(("Residual", None, None, sigma2, math.sqrt(sigma2)))
    return pd.DataFrame(rows, columns=["grp", "var1", "var2", "vcov", "sdcor"])


def fit_stats(s: SufficientStats, method: str = "REML", theta0=None, blas_threads="auto") -> MixedModelResult:
    """Fit a model from its sufficient statistics (see :func:`accumulate`).

    ``theta0`` starts the optimizer (internal order: the formula's terms); ``blas_threads``: "auto" (one BLAS
    thread when the dense blocks are small), an int, or None (the BLAS library's default).
    """
    if method not in ("REML", "ML"):
        raise MixedModelError(f"method must be 'REML' or 'ML'; got {method!r}.")
    reml = method == "REML"
    dev = nested.deviance(s, reml)  # Deviance, BlockDeviance, or a nested pair merged (NestedDeviance)
    fit_warnings: list[str] = []
    with _blas_limit(dev, blas_threads):
        if isinstance(dev, Deviance):
            theta, best_f, converged, message, n_eval = _optimize_intercepts(dev, len(s.terms), theta0)
        else:
            theta, best_f, converged, message, n_eval = _optimize_general(dev, theta0)
        value, parts = dev.evaluate(theta)
        if parts is None:
            raise MixedModelError(f"The model {s.formula.text!r} could not be fitted: the deviance is not finite at "
                                  f"the optimum (a perfect fit, or a degenerate design).")
        RX, cbeta, r2 = parts[-3:]
        p, n = s.p, s.n
        sigma2 = r2 / (n - p if reml else n)
        sigma = math.sqrt(sigma2)
        beta = tri_solve(RX, cbeta, lower=False) if p else np.zeros(0)
        RXinv = tri_solve(RX, np.eye(p), lower=False) if p else np.zeros((0, 0))
        V = sigma2 * (RXinv @ RXinv.T)
        modes = dev.conditional_modes(theta, parts, beta)
    if not converged:
        fit_warnings.append(f"the optimizer did not report convergence: {message}")
        warnings.warn(f"Model failed to converge: {message}", ConvergenceWarning, stacklevel=3)
    se = np.sqrt(np.diag(V))
    fe = pd.DataFrame({"estimate": beta, "se": se, "z": beta / se}, index=s.fixed_names)
    fe.index.name = "term"
    ranef = {}
    for k, t in enumerate(s.terms):
        idx = pd.Index(s.levels[k], dtype=object)
        ranef[s.groups[k]] = (pd.Series(modes[k][:, 0], index=idx) if t.intercept_only
                              else pd.DataFrame(modes[k], index=idx, columns=t.covariate_names))
    covs = _covariances(s, dev, theta, sigma2)
    varcorr = _varcorr(s, covs, sigma2)
    if s.intercepts_only:
        var = {g: float(covs[k][0, 0]) for k, g in enumerate(s.groups)}
        var["Residual"] = sigma2
        vc = pd.DataFrame({"variance": pd.Series(var)})
        vc["sd"] = np.sqrt(vc["variance"])
        vc["percent"] = 100 * vc["variance"] / vc["variance"].sum()
        vc.index.name = "component"
    else:
        vc = varcorr
    names = _theta_names(s, dev)
    lower = np.zeros(len(theta)) if isinstance(dev, Deviance) else dev.lower
    on_diag = lower == 0
    singular = bool((theta[on_diag] < SINGULAR_TOL).any())
    if singular:
        shown = [s.groups[k] if isinstance(dev, Deviance) else nm for k, nm in enumerate(names)]
        zero = [nm for nm, th, d in zip(shown, theta, on_diag, strict=True) if d and th < SINGULAR_TOL]
        msg = (f"boundary (singular) fit: the variance of {', '.join(zero)} is estimated as (nearly) zero; the data "
               f"show no variation attributable to it beyond the other terms (lme4: see help('isSingular')).")
        fit_warnings.append(msg)
        warnings.warn(msg, SingularFitWarning, stacklevel=3)
    for a, b in _aliased_pairs(s):
        msg = (f"random factors {a} and {b} are aliased: their levels partition the data identically, so only the "
               f"sum of their variances ({a} + {b}) is identified; the split between them is arbitrary.")
        fit_warnings.append(msg)
        warnings.warn(msg, AliasedFactorsWarning, stacklevel=3)
    # theta in lme4's order and names
    pos = []
    offsets = np.cumsum([0] + [1 if isinstance(dev, Deviance) else len(dev.tri[k][0]) for k in range(len(s.terms))])
    for k in s.lme4_order:
        pos.extend(range(offsets[k], offsets[k + 1]))
    theta_s = pd.Series(theta[pos], index=[names[i] for i in pos])
    return MixedModelResult(
        formula=s.formula.text, method=method, nobs=n,
        ngroups={t.group_name: len(lv) for t, lv in zip(s.terms, s.levels, strict=True)},
        theta=theta_s, sigma=sigma, fixed_effects=fe, variance_components=vc, varcorr=varcorr,
        loglik=-0.5 * value, deviance=value, singular=singular, converged=converged, optimizer_message=message,
        n_evaluations=n_eval, vcov=pd.DataFrame(V, index=s.fixed_names, columns=s.fixed_names), ranef=ranef,
        warnings=fit_warnings, stats=s)


def fit(formula: str, data, method: str = "REML", dropna: bool = False, blas_threads="auto") -> MixedModelResult:
    """Fit a linear mixed model, lme4-style.

    Parameters
    ----------
    formula : str
        lme4 syntax, e.g. ``"ter ~ system * src_length_class + (1|sentence_id)"``,
        ``"score ~ (1|sentence) + (1|rater) + (1|sentence:rater)"``, ``"y ~ days + (1 + days|subject)"``,
        ``"y ~ x + (1|school/class)"``. Random slopes of numeric variables, and of factors in a DataFrame
        (``(f|g)``, ``(0 + f|g)``, ``(f||g)`` as lme4 codes them: :mod:`.factor_slopes`).
    data : DataFrame, iterable of DataFrames, or pyarrow Dataset
        Rows, or chunks of rows with the same columns (streamed once; memory independent of the row count).
    method : "REML" (default; variance components) or "ML" (likelihood ratio tests).
    dropna : drop rows with missing values in the model's columns instead of raising.
    blas_threads : "auto" (one BLAS thread for small dense blocks), an int, or None (library default).
    """
    if isinstance(data, pd.DataFrame):  # random slopes of factors: R's model-matrix columns as numeric slopes
        from .factor_slopes import expand

        formula, data = expand(formula, data)
    try:
        s = accumulate(formula, data, dropna=dropna)
    except FormulaError:
        raise
    result = fit_stats(s, method=method, blas_threads=blas_threads)
    if isinstance(data, pd.DataFrame):
        f = s.formula
        needed = list(dict.fromkeys([f.response] + f.fixed_variables + f.random_variables + f.random_covariates))
        result._data = data[needed].dropna() if dropna else data[needed]
    return result


# ------------------------------------------------------------------------------------ likelihood ratio

@dataclass
class LRTResult(TestOutcome):
    """Generalized likelihood ratio test of nested mixed models (book 4.3, appendix A): chi2 on df degrees of
    freedom (:class:`~vrs_helpers.outcomes.TestOutcome`: ``statistic`` = chi2)."""

    chi2: float
    df: int
    p_value: float
    loglik0: float
    loglik1: float
    refitted_ml: bool
    formula0: str
    formula1: str

    method = "GLRT (chi-square)"

    @property
    def statistic(self) -> float:
        return self.chi2

    def __repr__(self) -> str:
        note = " (REML fits refitted by ML)" if self.refitted_ml else ""
        return f"LRTResult(chi2={self.chi2:.4f}, df={self.df}, p={self.p_value:.4g}{note})"

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"formula": [self.formula0, self.formula1], "logLik": [self.loglik0, self.loglik1],
                             "chi2": [np.nan, self.chi2], "df": [np.nan, self.df],
                             "p_value": [np.nan, self.p_value]}, index=["m0", "m1"])

    def _repr_html_(self) -> str:
        return self.to_frame().to_html(float_format=lambda x: f"{x:.6g}") + (
            "<p><i>REML fits with different fixed effects were refitted by ML, as lme4's anova does.</i></p>"
            if self.refitted_ml else "")


def _random_nested(s0: SufficientStats, s1: SufficientStats) -> bool:
    """Every grouping of s0 is in s1 with at least the same random coefficients, correlated as in s1."""
    def coefs(s):
        out: dict = {}
        for t in s.terms:
            out.setdefault(frozenset(t.group), set()).update(t.covariates)
        return out

    c0, c1 = coefs(s0), coefs(s1)
    return all(g in c1 and cov <= c1[g] for g, cov in c0.items())


def lrt(m0: MixedModelResult, m1: MixedModelResult) -> LRTResult:
    """Likelihood ratio test of m0 (restricted) against m1 (general), as lme4's ``anova(m0, m1)``.

    REML fits whose fixed effects differ are refitted by ML first (REML likelihoods of different fixed effects
    are not comparable). Models on different data or not nested are refused.
    """
    s0, s1 = m0.stats, m1.stats
    if s0 is None or s1 is None:
        raise MixedModelError("lrt needs results of vrs_helpers.mixed.fit.")
    if (s0.formula.response != s1.formula.response or s0.n != s1.n
            or not math.isclose(s0.yty, s1.yty, rel_tol=1e-12) or not math.isclose(s0.ysum, s1.ysum, rel_tol=1e-12,
                                                                                      abs_tol=1e-12)):
        raise MixedModelError("The two models were fitted to different data (response, number of rows or values "
                              "differ); a likelihood ratio test needs the same rows.")
    if m0.n_params > m1.n_params:
        m0, m1 = m1, m0
        s0, s1 = s1, s0
    fe0, fe1 = set(s0.fixed_names), set(s1.fixed_names)
    if not (fe0 <= fe1 and _random_nested(s0, s1)) or m0.n_params == m1.n_params:
        raise MixedModelError(f"The models are not nested: {m0.formula!r} vs {m1.formula!r}. The restricted model's "
                              f"fixed and random terms must be a subset of the general model's.")
    refit = False
    if m0.method == "REML" or m1.method == "REML":
        if fe0 != fe1:
            m0 = fit_stats(s0, "ML") if m0.method == "REML" else m0
            m1 = fit_stats(s1, "ML") if m1.method == "REML" else m1
            refit = True
        elif m0.method != m1.method:
            raise MixedModelError("One model is REML and the other ML; fit both with the same method.")
    chi2 = max(0.0, 2.0 * (m1.loglik - m0.loglik))
    df = m1.n_params - m0.n_params
    return LRTResult(chi2, df, float(stats.chi2.sf(chi2, df)), m0.loglik, m1.loglik, refit, m0.formula, m1.formula)
