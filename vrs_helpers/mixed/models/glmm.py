"""Generalized linear mixed models: :class:`GeneralizedLinearMixedModel` (lme4's ``glmer``, MixedModels.jl's
``GeneralizedLinearMixedModel``; Bates et al. 2015; lme4's ``glmer`` vignette) and :func:`glmer`.

    eta = X beta + Z Lambda(theta) u,   u ~ N(0, I),   y | u ~ binomial / Poisson with mean g^{-1}(eta)

The family and its link are objects of :mod:`.families`; the deviance is :class:`.laplace.GLMMDeviance`.

Random intercepts for any number of crossed or nested grouping factors. The integral over ``u`` is approximated

- by the Laplace approximation (``nagq=1``): penalized iteratively reweighted least squares (PIRLS) finds the
  conditional modes ``u``; the objective is ``-2 log p(y|u) + |u|^2 + log det(L L')`` with
  ``L L' = Lambda' Z' W Z Lambda + I`` (lme4's ``Laplace()``; the conditional log-likelihood includes the binomial
  coefficients and ``log y!``, so ``logLik`` is lme4's);
- by adaptive Gauss-Hermite quadrature (``nagq > 1``) for a single scalar random-effect term, centred at the
  conditional modes with the PIRLS curvature, group by group.

The maximum is glmer's (its stage 2 over (theta, beta) jointly), found differently: ``L L'`` is factored by blocks
(the largest term's block diagonal, a dense Schur complement on the other levels, as lme4's / MixedModels.jl's
blocked Cholesky), the Laplace deviance has an analytic gradient (the envelope theorem at the modes; log det moving
with theta and, through the weights, with the modes, whose derivatives come from the implicit function theorem),
and L-BFGS starts from theta = 1 and the GLM's beta, without glmer's derivative-free stage 1 (``nAGQ = 0``). PIRLS
starts each evaluation from the modes predicted by those derivatives. Quadrature (``nagq > 1``) is then optimized
from the Laplace optimum by BFGS on finite differences, in coordinates whitened by the Laplace Hessian. Standard
errors of the fixed effects from the Hessian of the deviance (lme4's default ``use.hessian = TRUE``): central
differences of the analytic gradient (Laplace) or of the deviance (quadrature, as lme4's deriv12); Wald z tests.
The variance components are on the latent (link) scale (book chapter 3 reads them as shares of variance there,
with the logistic residual pi^2/3).
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pandas as pd
from scipy import linalg, optimize, stats

from ...threads import blas_limit
from ..likelihood import families, laplace_hessian
from ..likelihood.laplace import GLMMDeviance
from ..structure import numdiff
from ..structure.accumulate import accumulate
from ..structure.design import design_rows
from ..structure.errors import ConvergenceWarning, MixedModelError
from ..structure.formula import parse
from ..structure.model import MixedModel, OptSummary
from ..structure.sparse_design import sparse_design_rows, use_sparse

_CBIND = re.compile(r"^\s*cbind\s*\(([^,]+),([^)]+)\)\s*$")
_IFUN = re.compile(r"\bI\(([^()]*(?:\([^()]*\))?[^()]*)\)")

LAPLACE_OPTIONS = {"ftol": 1e-13, "gtol": 1e-5, "maxiter": 1000}


# ------------------------------------------------------------------------------------------ model set-up

def prepare(formula: str, data: pd.DataFrame, weights):
    """Response (proportions), prior weights (trials), X with lme4's column names, the terms (name, codes, levels),
    the response's name and the fixed-effects design (SufficientStats: levels, contrasts, covariate means)."""
    if not isinstance(formula, str) or "~" not in formula:
        raise MixedModelError(f"A formula needs '~', like 'correct ~ condition + (1|item)'; got {formula!r}.")
    df = data.copy()
    lhs, rhs = formula.split("~", 1)
    renamed = {}
    for k, expr in enumerate(dict.fromkeys(_IFUN.findall(rhs))):
        name = f"__glmm_I{k}__"
        try:
            df[name] = df.eval(expr.replace("^", "**"))
        except Exception as e:  # noqa: BLE001 - any pandas evaluation error
            raise MixedModelError(f"Cannot evaluate I({expr}) on the data: {e}") from e
        rhs = rhs.replace(f"I({expr})", name)
        renamed[name] = f"I({expr.strip()})"
    wt = None if weights is None else np.asarray(df[weights] if isinstance(weights, str) else weights, float)
    m = _CBIND.match(lhs)
    if m:
        succ, fail = (np.asarray(df.eval(s.strip()), float) for s in m.groups())
        trials = succ + fail
        if np.any(trials <= 0):
            raise MixedModelError("cbind(successes, failures) needs at least one trial in every row.")
        y = succ / trials
        wt = trials if wt is None else wt * trials
        response_name = lhs.strip()
    else:
        response_name = lhs.strip().strip("`")
        if response_name not in df:
            raise MixedModelError(f"The response {response_name!r} is not a column of the data.")
        y = df[response_name].to_numpy(float)
    if wt is None:
        wt = np.ones(len(df))
    tmp = "__glmm_response__"
    df[tmp] = y
    f = parse(f"{tmp} ~{rhs}")
    if not f.intercepts_only:
        raise MixedModelError("GLMMs are fitted with random intercepts only (crossed or nested, e.g. (1|a) + (1|b) "
                              "or (1|a/b)); random slopes are not implemented yet: fit them with lme4's glmer.")
    needed = list(dict.fromkeys(f.fixed_variables + f.random_variables))
    bad = df[needed + [tmp]].isna().any(axis=1).to_numpy() | ~np.isfinite(wt)
    if bad.any():
        raise MixedModelError(f"{int(bad.sum())} rows have missing values in the model's variables; drop them first.")
    s = accumulate(f, df)
    X = sparse_design_rows(s, df) if use_sparse(len(df), len(s.fixed_names)) else design_rows(s, df)
    blocks = []
    for t in f.random_terms:
        g = t.group
        key = df[g[0]]
        if len(g) > 1:  # the interaction's levels "a:b", built column-wise
            key = key.astype(str)
            for v in g[1:]:
                key = key + ":" + df[v].astype(str)
        codes, levels = pd.factorize(key, sort=True)
        blocks.append((":".join(g), codes, [str(v) for v in levels]))
    # lme4 orders the terms by decreasing number of levels (stable)
    blocks = [blocks[k] for k in sorted(range(len(blocks)), key=lambda k: -len(blocks[k][2]))]
    names = list(s.fixed_names)
    for tmp_name, label in renamed.items():
        names = [nm.replace(tmp_name, label) for nm in names]
    return y, wt, X, names, blocks, response_name, s


# ------------------------------------------------------------------------------------------ the model

def _check_nagq(nagq) -> int:
    nagq = int(nagq)
    if nagq < 1 or nagq > 100:
        raise MixedModelError(f"nagq must be between 1 and 100, not {nagq}.")
    return nagq


class GeneralizedLinearMixedModel(MixedModel):
    """A generalized linear mixed model with random intercepts (lme4's ``glmer``; MixedModels.jl's
    ``GeneralizedLinearMixedModel``), fitted by the Laplace approximation or adaptive Gauss-Hermite quadrature.

    ``GeneralizedLinearMixedModel(formula, data, family="binomial", link=None, weights=None)`` reads the response,
    the designs and the family (:func:`.families.get`: a name or a :class:`~.families.Family`); :meth:`fit`
    (``nagq``) sets lme4's quantities: ``theta``, ``fixed_effects`` (estimate, se, z, p: Wald z tests),
    ``vcov``, ``varcorr`` (lme4's ``as.data.frame(VarCorr(m))`` on the latent scale), ``ranef`` (the conditional
    modes ``b = Lambda u`` per grouping), ``loglik``, ``deviance`` (``-2 logLik``; lme4's ``deviance()`` of a
    glmer fit is instead its deviance-residual form, without the constants of ``logLik``), ``nagq``, ``warnings``
    (a fit that did not converge says so there, with ``converged`` False: lme4's checkConv) and ``optsum``.
    ``objective`` is the model's deviance function (:class:`.laplace.GLMMDeviance`: response, weights, X, levels;
    PIRLS, Laplace, quadrature; the GLMM bootstrap refits from it). ``stats`` is the fixed-effects design (factor
    levels, treatment contrasts, covariate means) that :func:`vrs_helpers.mixed.models.marginal.emmeans` needs for
    marginal
    means on the link scale.
    """

    _FITTED = MixedModel._FITTED + ("nagq", "warnings")

    def __init__(self, formula: str, data: pd.DataFrame, family: str | families.Family = "binomial",
                 link: str | None = None, weights=None):
        if not isinstance(data, pd.DataFrame):
            raise MixedModelError("glmer needs a pandas DataFrame.")
        fam = families.get(family, link)
        if fam.dispersion:
            raise MixedModelError(f"The {fam.name} family estimates a residual scale: that is a linear mixed model, "
                                  f"fitted by vrs_helpers.mixed.fit (lme4's lmer); glmer fits "
                                  f"{' and '.join(n for n, c in families.FAMILIES.items() if not c.dispersion)}.")
        y, wt, X, names, blocks, response, design = prepare(formula, data, weights)
        self._blocks = blocks
        fam.check_response(y)
        self.formula, self.family, self.response, self.stats = formula, fam, response, design
        self.nobs = len(y)
        self.ngroups = {g: len(lv) for g, _, lv in blocks}
        self._names = names
        self._key = np.concatenate([y, wt])
        self.objective = GLMMDeviance(y, wt, X, blocks, fam)

    @property
    def link(self) -> str:
        """The name of the family's link (lme4's ``family(m)$link``)."""
        return self.family.link.name

    def fit(self, nagq: int = 1, blas_threads="auto") -> GeneralizedLinearMixedModel:
        """Maximize the Laplace (``nagq=1``) or adaptive Gauss-Hermite (``nagq > 1``, a single random-intercept
        term, as in lme4) likelihood over (theta, beta) and set the fitted quantities; returns the model.
        ``blas_threads``: "auto" (one BLAS thread while the dense blocks are small), an int, or None."""
        nagq = _check_nagq(nagq)
        blocks, names, model = self._blocks, self._names, self.objective
        if nagq > 1 and len(blocks) != 1:
            raise MixedModelError("Adaptive Gauss-Hermite quadrature (nagq > 1) needs a single scalar random-effect "
                                  "term (lme4 refuses it otherwise); use nagq=1 (Laplace).")
        K, p = len(blocks), model.X.shape[1]
        with blas_limit(model.q - model.sizes[0] + p, blas_threads):
            par, dev, u, H, optsum = _optimize(model, nagq)
        theta, beta = par[:K], par[K:]
        try:
            cov = 2.0 * np.linalg.inv(H)[K:, K:]
        except np.linalg.LinAlgError:
            cov = np.full((p, p), np.nan)
        se = np.sqrt(np.diag(cov))
        z = beta / se
        fe = pd.DataFrame({"estimate": beta, "se": se, "z": z, "p": 2 * stats.norm.sf(np.abs(z))}, index=names)
        groups = [b[0] for b in blocks]
        ranef, off = {}, 0
        for (g, _, levels), th in zip(blocks, theta, strict=True):
            ranef[g] = pd.Series(th * u[off:off + len(levels)], index=levels, name="(Intercept)")
            off += len(levels)
        theta = np.abs(theta)
        fit_warnings = []
        # lme4's checkConv: a gradient away from 0, or a Hessian that is degenerate in the fixed effects (a standard
        # error that is not a positive number: an estimate running off along a ridge, as under separation)
        degenerate = not np.all(np.isfinite(se) & (se > 0))
        if not optsum.converged or degenerate:
            why = ("the optimizer stopped with a gradient away from 0" if not optsum.converged else
                   "the Hessian is degenerate in the fixed effects: a standard error is not finite")
            if optsum.converged:
                optsum.converged, optsum.message = False, f"{optsum.message}; {why}"
            msg = (f"the GLMM {self.formula!r} did not converge ({why}): its estimates, standard errors and every "
                   f"test built on them are unreliable. Check for separation (a system or cell with all-correct or "
                   f"all-wrong scores: mixed.check_separation) or simplify the random effects.")
            fit_warnings.append(msg)
            warnings.warn(msg, ConvergenceWarning, stacklevel=3)
        self.nagq = nagq
        self.theta = pd.Series(theta, index=[f"{g}.(Intercept)" for g in groups])
        self.fixed_effects = fe
        self.varcorr = pd.DataFrame({"grp": groups, "var1": "(Intercept)", "var2": None, "vcov": theta ** 2,
                                     "sdcor": theta})
        self.loglik = -0.5 * dev
        self.deviance = dev
        self.vcov = pd.DataFrame(cov, index=names, columns=names)
        self.ranef = ranef
        self.optsum = optsum
        self.warnings = fit_warnings
        return self

    def to_frame(self) -> pd.DataFrame:
        """Fixed effects (estimate, se, z, p) and variance components (variance) in one table."""
        fe = self.fixed_effects.assign(kind="fixed")
        vc = pd.DataFrame({"estimate": self.varcorr["vcov"].to_numpy(), "se": np.nan, "z": np.nan, "p": np.nan,
                           "kind": "variance"}, index=[f"var({g})" for g in self.varcorr["grp"]])
        return pd.concat([fe, vc])

    def __repr__(self) -> str:
        if not self.is_fitted:
            return f"{type(self).__name__}({self.formula!r}, not fitted)"
        method = "Laplace" if self.nagq == 1 else f"adaptive Gauss-Hermite, nAGQ = {self.nagq}"
        lines = [f"GLMM ({self.family}, {self.link} link; {method}): {self.formula}",
                 f"  n = {self.nobs}, groups: " + ", ".join(f"{k} {v}" for k, v in self.ngroups.items()),
                 f"  logLik {self.loglik:.4f}, AIC {self.aic:.2f}, BIC {self.bic:.2f}, deviance {self.deviance:.4f}",
                 "  random effects (latent scale):"]
        for _, r in self.varcorr.iterrows():
            lines.append(f"    {r['grp']:<20} {r['var1']:<12} variance {r['vcov']:.6g}  sd {r['sdcor']:.6g}")
        lines.append("  fixed effects:")
        lines += ["    " + s for s in self.fixed_effects.to_string(float_format=lambda v: f"{v:.6g}").split("\n")]
        if not self.converged:
            lines.append("  WARNING: the optimizer did not report convergence.")
        return "\n".join(lines)

    # --- likelihood ratio tests (:func:`vrs_helpers.mixed.inference.likelihood_ratio.lrt`)
    @property
    def lrt_method(self) -> str:
        return ("GLRT (chi-square, Laplace)" if self.nagq == 1
                else f"GLRT (chi-square, adaptive Gauss-Hermite, nAGQ = {self.nagq})")

    def _check_comparable(self, other: GeneralizedLinearMixedModel) -> None:
        if self.nobs != other.nobs or self.family != other.family or not np.array_equal(self._key, other._key):
            raise MixedModelError("The two GLMMs must be fitted to the same rows and response with the same family.")
        if self.nagq != other.nagq:
            raise MixedModelError("Compare fits with the same nagq.")

    def _nested_in(self, general: GeneralizedLinearMixedModel) -> bool:
        return (set(self.fixed_effects.index) <= set(general.fixed_effects.index)
                and set(self.ngroups) <= set(general.ngroups))

    def _comparable_fits(self, general):
        return self, general, False


GLMMResult = GeneralizedLinearMixedModel  # the name of the fitted model before it became an object of its own


def glmer(formula: str, data: pd.DataFrame, family: str = "binomial", link: str | None = None, nagq: int = 1,
          weights=None, blas_threads="auto") -> GeneralizedLinearMixedModel:
    """Fit a GLMM as ``lme4::glmer(formula, data, family = family(link), nAGQ = nagq, weights = weights)``:
    ``GeneralizedLinearMixedModel(formula, data, family, link, weights).fit(nagq, blas_threads)``.

    ``formula``: lme4 syntax with random intercepts (``(1|g)``, crossed ``(1|a) + (1|b)``, nested ``(1|a/b)``),
    fixed terms as in :func:`vrs_helpers.mixed.structure.formula.parse` plus ``I(expr)``; binomial responses are 0/1,
    proportions
    with ``weights`` (trials), or ``cbind(successes, failures)``. ``family``: "binomial" (links "logit", "probit") or
    "poisson" ("log"), or a :mod:`.families` object. ``nagq > 1`` (adaptive Gauss-Hermite) needs a single
    random-intercept term, as in lme4. ``weights`` is a column name or an array. ``blas_threads``: "auto" (one BLAS
    thread while the dense blocks are small, :func:`vrs_helpers.threads.blas_limit`), an int, or None.
    """
    if not isinstance(data, pd.DataFrame):
        raise MixedModelError("glmer needs a pandas DataFrame.")
    families.get(family, link)
    _check_nagq(nagq)
    return GeneralizedLinearMixedModel(formula, data, family, link, weights).fit(nagq, blas_threads)


def _optimize(model: GLMMDeviance, nagq: int):
    """The maximum-likelihood (theta, beta) as signed parameters, the deviance and modes there, the Hessian of the
    deviance and the :class:`~vrs_helpers.mixed.structure.model.OptSummary`."""
    X, y = model.X, model.y
    K, p = model.K, X.shape[1]
    # The optimizer works on gamma = R beta (X = Q R / sqrt(n)): fixed effects on very different scales (age and
    # age^2) otherwise make quasi-Newton steps crawl. theta is left unbounded: the deviance is even in each
    # theta_k (flip theta_k and u_k together), so |theta| is reported and no bound can trap the search at 0.
    if model.coo is None:
        Rx = np.linalg.qr(X, mode="r") / math.sqrt(len(y))
    else:  # a sparse X (many systems): R from the Cholesky factor of X'X, the same up to the signs of its rows
        Rx = np.linalg.cholesky((X.T @ X).toarray()).T / math.sqrt(len(y))

    def to_par(g):
        return np.concatenate([g[:K], linalg.solve_triangular(Rx, g[K:], check_finite=False)])

    # Laplace: quasi-Newton with the analytic gradient from theta = 1 and the GLM's beta (glmer's stage 1, the
    # nAGQ = 0 fit, only serves its derivative-free stage 2 with a start and is not needed with a gradient)
    def fg(g):
        f, gr = model.laplace(g[:K], to_par(g)[K:], grad=True)
        return f, np.concatenate([gr[:K], linalg.solve_triangular(Rx, gr[K:], trans="T", check_finite=False)])

    g0 = np.concatenate([np.ones(K), Rx @ model.glm()])
    r = optimize.minimize(fg, g0, jac=True, method="L-BFGS-B", options=LAPLACE_OPTIONS)
    converged = bool(r.success or np.abs(r.jac).max() < 1e-3)
    par = to_par(r.x)
    optimizer, message, tolerances = "L-BFGS-B (Laplace, analytic gradient)", str(r.message), dict(LAPLACE_OPTIONS)
    if nagq == 1:
        def obj(par):
            return model.laplace(par[:K], par[K:])

        def grad(par):
            return model.laplace(par[:K], par[K:], grad=True)[1]

        dev = obj(par)
        u = model.u.copy()
        H = _laplace_hessian(model, grad, par)
    else:  # adaptive Gauss-Hermite from the Laplace optimum (as glmer's nAGQ > 1 stage 2), derivative-free
        nodes, wts = np.polynomial.hermite.hermgauss(nagq)

        def obj(par):
            return model.agq(par[:K], par[K:], nodes, wts)

        # in coordinates g in which the Laplace Hessian at the Laplace optimum is the identity: the quadrature
        # deviance is close to the Laplace one, so BFGS (which starts from the identity) needs a few steps, with
        # central differences (h = 1e-3 where the curvature is about 1) for the gradient
        HL = _hessian_of_gradient(lambda q: model.laplace(q[:K], q[K:], grad=True)[1], par)
        try:
            C = np.linalg.cholesky(HL).T  # C'C = HL: D ~ D(par) + |g|^2 / 2
        except np.linalg.LinAlgError:  # not positive definite there: the scaled parameters
            C = np.diag(np.full(K + p, 1e-2))
        par0 = par.copy()

        def obj_g(g):
            return obj(par0 + linalg.solve_triangular(C, g, check_finite=False))

        def jac_g(g):
            return numdiff.jacobian(obj_g, g, 1e-3)

        r2 = optimize.minimize(obj_g, np.zeros(K + p), jac=jac_g, method="BFGS", options={"gtol": 1e-5})
        r3 = r2
        if not r2.success:
            r3 = optimize.minimize(obj_g, r2.x, method="Nelder-Mead",
                                   options={"xatol": 1e-7, "fatol": 1e-9, "maxfev": 200 * (K + p), "adaptive": True})
        par = par0 + linalg.solve_triangular(C, r3.x if r3.fun <= r2.fun else r2.x, check_finite=False)
        converged = bool(r2.success or r3.success)
        optimizer = "L-BFGS-B (Laplace) + BFGS (quadrature, central differences)" + (
            " + Nelder-Mead" if r3 is not r2 else "")
        message = str(r3.message if r3.fun <= r2.fun else r2.message)
        tolerances = {**LAPLACE_OPTIONS, "bfgs_gtol": 1e-5}
        dev = obj(par)
        u = model.u.copy()
        H = numdiff.hessian(obj, par, numdiff.steps(par, 1e-4, 1.0))
    optsum = OptSummary(optimizer, to_par(g0), par.copy(), float(dev), int(model.evals), converged, message,
                        tolerances, np.full(K + p, -np.inf))
    return par, dev, u, H, optsum


def _laplace_hessian(model: GLMMDeviance, grad, x):
    """The Hessian of the Laplace deviance at ``x`` = (theta, beta): with a sparse X (many systems) and one term of
    a canonical link, the beta block in closed form (:mod:`..likelihood.laplace_hessian`) and the theta columns by
    central differences of the gradient; otherwise every column by central differences."""
    K = model.K
    if model.coo is None or not laplace_hessian.applies(model):
        return _hessian_of_gradient(grad, x)
    block = laplace_hessian.beta_block(model, x[:K], x[K:])
    cols = numdiff.jacobian(grad, x, numdiff.steps(x, 1e-4, 1.0), at=range(K))  # K x (K + p)
    H = np.zeros((len(x), len(x)))
    H[:K, :], H[:, :K] = cols, cols.T
    H[:K, :K] = 0.5 * (cols[:, :K] + cols[:, :K].T)
    H[K:, K:] = block
    return H


def _hessian_of_gradient(grad, x):
    """Central differences of the analytic gradient: the Hessian of the deviance (glmer's deriv12 differences the
    deviance itself; differencing the gradient needs 2 n instead of 2 n^2 + 1 evaluations)."""
    H = numdiff.jacobian(grad, x, numdiff.steps(x, 1e-4, 1.0)).T
    return 0.5 * (H + H.T)


