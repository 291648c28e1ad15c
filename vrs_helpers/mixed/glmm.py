"""Generalized linear mixed models as lme4's ``glmer`` fits them (Bates et al. 2015; lme4's ``glmer`` vignette).

    eta = X beta + Z Lambda(theta) u,   u ~ N(0, I),   y | u ~ binomial / Poisson with mean g^{-1}(eta)

Random intercepts for any number of crossed or nested grouping factors. The integral over ``u`` is approximated

- by the Laplace approximation (``nagq=1``): penalized iteratively reweighted least squares (PIRLS) finds the
  conditional modes ``u``; the objective is ``-2 log p(y|u) + |u|^2 + log det(L L')`` with
  ``L L' = Lambda' Z' W Z Lambda + I`` (lme4's ``Laplace()``; the conditional log-likelihood includes the binomial
  coefficients and ``log y!``, so ``logLik`` is lme4's);
- by adaptive Gauss-Hermite quadrature (``nagq > 1``) for a single scalar random-effect term, centred at the
  conditional modes with the PIRLS curvature, group by group.

Optimization as ``glmer``: stage 1 over theta with beta inside PIRLS (lme4's ``nAGQ = 0``), stage 2 over
(theta, beta). Standard errors of the fixed effects from the finite-difference Hessian of the stage-2 objective
(lme4's default ``use.hessian = TRUE``), Wald z tests. The variance components are on the latent (link) scale
(book chapter 3 reads them as shares of variance there, with the logistic residual pi^2/3).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import linalg, optimize, sparse, special, stats

from ..formula import parse
from ..results import TestOutcome
from .accumulate import accumulate
from .design import design_rows
from .errors import MixedModelError

_CBIND = re.compile(r"^\s*cbind\s*\(([^,]+),([^)]+)\)\s*$")
_IFUN = re.compile(r"\bI\(([^()]*(?:\([^()]*\))?[^()]*)\)")


# ------------------------------------------------------------------------------------------ families

class _Family:
    """Binomial (logit, probit) or Poisson (log): inverse link, d mu / d eta, variance, -2 log p(y | mu)."""

    def __init__(self, family: str, link: str | None):
        family = str(family).lower()
        if family not in ("binomial", "poisson"):
            raise MixedModelError(f"family must be 'binomial' or 'poisson', not {family!r}.")
        link = link or ("logit" if family == "binomial" else "log")
        ok = {"binomial": ("logit", "probit"), "poisson": ("log",)}[family]
        if link not in ok:
            raise MixedModelError(f"The {family} family takes the link(s) {', '.join(ok)}, not {link!r}.")
        self.family, self.link = family, link

    def mu(self, eta):
        if self.link == "logit":
            mu = special.expit(eta)
        elif self.link == "probit":
            mu = special.ndtr(eta)
        else:
            mu = np.exp(np.minimum(eta, 700.0))
        eps = np.finfo(float).eps
        return np.clip(mu, eps, 1.0 - eps) if self.family == "binomial" else np.maximum(mu, eps)

    def dmu(self, eta, mu):
        if self.link == "logit":
            return mu * (1.0 - mu)
        if self.link == "probit":
            return np.maximum(np.exp(-0.5 * eta * eta) / math.sqrt(2.0 * math.pi), np.finfo(float).eps)
        return mu

    def var(self, mu):
        return mu * (1.0 - mu) if self.family == "binomial" else mu

    def m2loglik(self, y, wt, mu, const):
        """-2 log p(y | mu) per row (binomial: y a proportion of wt trials; constant terms precomputed)."""
        if self.family == "binomial":
            if self.binary:  # 0/1 responses: one logarithm per row
                return -2.0 * (wt * np.log(np.where(y > 0.5, mu, 1.0 - mu)) + const)
            return -2.0 * (wt * (y * np.log(mu) + (1.0 - y) * np.log1p(-mu)) + const)
        return -2.0 * (wt * (y * np.log(mu) - mu) + const)

    binary = False

    def constant(self, y, wt):
        """log binomial coefficient / -log y! per row (lme4's logLik includes them)."""
        if self.family == "binomial":
            k = np.round(wt * y)
            return special.gammaln(wt + 1) - special.gammaln(k + 1) - special.gammaln(wt - k + 1)
        return -wt * special.gammaln(y + 1)


# ------------------------------------------------------------------------------------------ model set-up

def _prepare(formula: str, data: pd.DataFrame, weights):
    """Response (proportions), prior weights (trials), X with lme4's column names, Z (sparse), term names/levels,
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
    X = design_rows(s, df)
    blocks = []
    for t in f.random_terms:
        g = t.group
        key = df[g[0]]
        if len(g) > 1:  # "a:b" labels, joined column by column (a row-wise join costs seconds per 10^4 rows)
            key = key.astype(str).str.cat([df[c].astype(str) for c in g[1:]], sep=":")
        codes, levels = pd.factorize(key, sort=True)
        blocks.append((":".join(g), codes, [str(v) for v in levels]))
    # lme4 orders the terms by decreasing number of levels (stable)
    blocks = [blocks[k] for k in sorted(range(len(blocks)), key=lambda k: -len(blocks[k][2]))]
    cols, off = [], 0
    for _, codes, levels in blocks:
        cols.append(codes + off)
        off += len(levels)
    n = len(df)
    Z = sparse.csr_matrix((np.ones(n * len(blocks)), np.column_stack(cols).ravel(),
                           np.arange(0, n * len(blocks) + 1, len(blocks))), shape=(n, off))
    names = list(s.fixed_names)
    for tmp_name, label in renamed.items():
        names = [nm.replace(tmp_name, label) for nm in names]
    return y, wt, X, names, Z, blocks, response_name, s


# ------------------------------------------------------------------------------------------ the objective

class _GLMM:
    def __init__(self, y, wt, X, Z, blocks, fam: _Family):
        self.y, self.wt, self.X, self.Z, self.fam = y, wt, X, Z, fam
        self.sizes = [len(b[2]) for b in blocks]
        self.codes = [np.asarray(b[1], dtype=np.int64) for b in blocks]
        offs = np.concatenate([[0], np.cumsum(self.sizes)])
        self.cols = [c + o for c, o in zip(self.codes, offs[:-1], strict=True)]
        self.rep = np.repeat(np.arange(len(blocks)), self.sizes)
        self.q = Z.shape[1]
        self.const = fam.constant(y, wt)
        fam.binary = bool(np.all((y == 0) | (y == 1)))
        self.u = np.zeros(self.q)
        self.evals = 0
        self.beta_pirls = None

    def _weights(self, eta, mu):
        d = self.fam.dmu(eta, mu)
        v = self.fam.var(mu)
        return self.wt * d * d / v, self.wt * d / v

    def _cross(self, theta, w):
        """L L' = Lambda' Z' W Z Lambda + I for random intercepts, from weighted level counts (dense q x q)."""
        A = np.zeros((self.q, self.q))
        offs = np.concatenate([[0], np.cumsum(self.sizes)])
        for k in range(len(self.sizes)):
            ck, nk = self.codes[k], self.sizes[k]
            sl = slice(offs[k], offs[k + 1])
            A[sl, sl] = np.diag(np.bincount(ck, weights=w, minlength=nk) * theta[k] ** 2)
            for j in range(k + 1, len(self.sizes)):
                nj = self.sizes[j]
                B = np.bincount(ck * nj + self.codes[j], weights=w, minlength=nk * nj).reshape(nk, nj)
                A[sl, offs[j]:offs[j + 1]] = B * (theta[k] * theta[j])
        A[np.diag_indices(self.q)] += 1.0
        return A

    def _factor(self, A):
        """Solve with and log-determinant of L L' using that the first term's block is diagonal (Schur complement
        on the remaining levels, as the blocked Cholesky of lme4 / MixedModels.jl does)."""
        n1 = self.sizes[0]
        d = np.diag(A)[:n1].copy()
        if n1 == self.q:
            return d, None, None, np.log(d).sum()
        B = A[:n1, n1:]
        S = A[n1:, n1:] + np.triu(A[n1:, n1:], 1).T - B.T @ (B / d[:, None])
        cf = linalg.cho_factor(S, lower=False, check_finite=False)
        return d, B, cf, np.log(d).sum() + 2.0 * np.log(np.diag(cf[0])).sum()

    @staticmethod
    def _solve(fac, g):
        d, B, cf, _ = fac
        if B is None:
            return g / (d if g.ndim == 1 else d[:, None])
        n1 = len(d)
        dd = d if g.ndim == 1 else d[:, None]
        g1 = g[:n1] / dd
        x2 = linalg.cho_solve(cf, g[n1:] - B.T @ g1, check_finite=False)
        return np.concatenate([g1 - (B @ x2) / dd, x2])

    def _zl(self, theta, u):
        """Z Lambda u: the random part of the linear predictor."""
        out = np.zeros(len(self.y))
        for k, c in enumerate(self.cols):
            out += theta[k] * u[c]
        return out

    def _zlt(self, theta, r):
        """Lambda' Z' r (r a vector, or a matrix with one column per right-hand side)."""
        if r.ndim == 1:
            return np.concatenate([theta[k] * np.bincount(c, weights=r, minlength=n)
                                   for k, (c, n) in enumerate(zip(self.codes, self.sizes, strict=True))])
        return np.column_stack([self._zlt(theta, r[:, j]) for j in range(r.shape[1])])

    def pirls(self, theta, beta, u0, joint=False, maxit=100):
        """Conditional modes u (and beta when ``joint``): Fisher scoring on the penalized log-likelihood with step
        halving, until the step is below 1e-10. Returns u, beta, -2 log p(y|u), log det(L L'), the matrix L L' and
        the linear predictor."""
        X = self.X
        p = X.shape[1]
        u, b = u0.copy(), beta.copy()
        xb = X @ b

        def objective(u, xb):
            eta = xb + self._zl(theta, u)
            mu = self.fam.mu(eta)
            return self.fam.m2loglik(self.y, self.wt, mu, self.const).sum() + u @ u, eta, mu

        obj, eta, mu = objective(u, xb)
        w, s = self._weights(eta, mu)
        A = self._cross(theta, w)
        fac = self._factor(A)
        for _ in range(maxit):
            r = s * (self.y - mu)  # score of log p(y|u) with respect to eta
            gu = self._zlt(theta, r) - u
            if joint:
                C = self._zlt(theta, X * w[:, None])
                AiC = self._solve(fac, C)  # block elimination of u: the Schur complement for beta is p x p
                Aig = self._solve(fac, gu)
                db = np.linalg.solve(X.T @ (X * w[:, None]) - C.T @ AiC, X.T @ r - C.T @ Aig)
                du = Aig - AiC @ db
                xdb = X @ db
            else:
                du, db, xdb = self._solve(fac, gu), np.zeros(p), np.zeros(len(self.y))
            k = 1.0
            for _h in range(40):
                new, eta_n, mu_n = objective(u + k * du, xb + k * xdb)
                if new <= obj + 1e-11 * (abs(obj) + 1.0):  # rounding: the objective cannot see tiny steps
                    break
                k *= 0.5
            else:
                break
            u, b, xb = u + k * du, b + k * db, xb + k * xdb
            step = max(np.abs(k * du).max(initial=0.0), np.abs(k * db).max(initial=0.0))
            obj, eta, mu = new, eta_n, mu_n
            w, s = self._weights(eta, mu)
            A = self._cross(theta, w)
            fac = self._factor(A)
            if step < 1e-10:
                break
        return u, b, obj - u @ u, fac[3], A, eta

    def laplace(self, theta, beta, joint=False):
        self.evals += 1
        u, b, m2ll, ldL2, *_ = self.pirls(np.asarray(theta, float), np.asarray(beta, float), self.u, joint=joint)
        if np.all(np.isfinite(u)):
            self.u = u
        self.beta_pirls = b
        return m2ll + u @ u + ldL2

    def agq(self, theta, beta, nodes, weights):
        """Adaptive Gauss-Hermite deviance for one scalar random-effect term (the groups are independent)."""
        self.evals += 1
        theta = np.asarray(theta, float)
        u, _, _, _, A, eta = self.pirls(theta, np.asarray(beta, float), self.u)
        if np.all(np.isfinite(u)):
            self.u = u
        sd = 1.0 / np.sqrt(np.diag(A))  # one scalar term: L L' is diagonal
        codes = self.codes[0]  # the group of each row
        base = eta - theta[0] * u[codes]
        vals = []
        for z in nodes:
            uz = u + math.sqrt(2.0) * sd * z
            mu = self.fam.mu(base + theta[0] * uz[codes])
            ll = -0.5 * self.fam.m2loglik(self.y, self.wt, mu, self.const)
            vals.append(np.bincount(codes, weights=ll, minlength=self.q) - 0.5 * uz * uz + z * z)
        vals = np.array(vals)  # nodes x groups: log f(u) + z^2
        mx = vals.max(axis=0)
        logsum = mx + np.log((weights[:, None] * np.exp(vals - mx)).sum(axis=0))
        # int f(u) du with f = p(y|u) phi(u):  sqrt(2) sd sum_k w_k exp(z_k^2) f(u_hat + sqrt(2) sd z_k)
        logint = logsum + np.log(math.sqrt(2.0) * sd) - 0.5 * math.log(2.0 * math.pi)
        return -2.0 * logint.sum()


# ------------------------------------------------------------------------------------------ the result

@dataclass
class GLMMResult:
    """A fitted GLMM with lme4's quantities (``summary(glmer(...))``).

    ``varcorr`` is lme4's ``as.data.frame(VarCorr(m))`` (grp, var1, var2, vcov, sdcor) on the latent scale;
    ``ranef`` the conditional modes ``b = Lambda u`` per grouping; ``deviance`` is ``-2 logLik`` (lme4's
    ``deviance()`` of a glmer fit is instead its deviance-residual form, without the constants of ``logLik``).
    ``stats`` is the fixed-effects design (factor levels, treatment contrasts, covariate means) that
    :func:`vrs_helpers.marginal.emmeans` needs for marginal means on the link scale.
    """

    formula: str
    family: str
    link: str
    nagq: int
    nobs: int
    ngroups: dict
    theta: pd.Series
    fixed_effects: pd.DataFrame  # estimate, se, z, p
    varcorr: pd.DataFrame
    loglik: float
    deviance: float
    converged: bool
    n_evaluations: int
    vcov: pd.DataFrame
    ranef: dict
    response: str = ""
    stats: object = field(default=None, repr=False)  # SufficientStats of the fixed-effects design
    _key: np.ndarray | None = field(default=None, repr=False)

    @property
    def n_params(self) -> int:
        """Parameters counted by lme4's logLik df: fixed effects + variance components."""
        return len(self.fixed_effects) + len(self.theta)

    @property
    def aic(self) -> float:
        return -2.0 * self.loglik + 2.0 * self.n_params

    @property
    def bic(self) -> float:
        return -2.0 * self.loglik + math.log(self.nobs) * self.n_params

    def to_frame(self) -> pd.DataFrame:
        """Fixed effects (estimate, se, z, p) and variance components (variance) in one table."""
        fe = self.fixed_effects.assign(kind="fixed")
        vc = pd.DataFrame({"estimate": self.varcorr["vcov"].to_numpy(), "se": np.nan, "z": np.nan, "p": np.nan,
                           "kind": "variance"}, index=[f"var({g})" for g in self.varcorr["grp"]])
        return pd.concat([fe, vc])

    def __repr__(self) -> str:
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


# ------------------------------------------------------------------------------------------ fitting

def glmer(formula: str, data: pd.DataFrame, family: str = "binomial", link: str | None = None, nagq: int = 1,
          weights=None) -> GLMMResult:
    """Fit a GLMM as ``lme4::glmer(formula, data, family = family(link), nAGQ = nagq, weights = weights)``.

    ``formula``: lme4 syntax with random intercepts (``(1|g)``, crossed ``(1|a) + (1|b)``, nested ``(1|a/b)``),
    fixed terms as in :func:`vrs_helpers.formula.parse` plus ``I(expr)``; binomial responses are 0/1, proportions
    with ``weights`` (trials), or ``cbind(successes, failures)``. ``nagq > 1`` (adaptive Gauss-Hermite) needs a
    single random-intercept term, as in lme4. ``weights`` is a column name or an array.
    """
    if not isinstance(data, pd.DataFrame):
        raise MixedModelError("glmer needs a pandas DataFrame.")
    fam = _Family(family, link)
    nagq = int(nagq)
    if nagq < 1 or nagq > 100:
        raise MixedModelError(f"nagq must be between 1 and 100, not {nagq}.")
    y, wt, X, names, Z, blocks, response, design = _prepare(formula, data, weights)
    if nagq > 1 and len(blocks) != 1:
        raise MixedModelError("Adaptive Gauss-Hermite quadrature (nagq > 1) needs a single scalar random-effect term "
                              "(lme4 refuses it otherwise); use nagq=1 (Laplace).")
    if fam.family == "binomial" and (np.any(y < 0) or np.any(y > 1)):
        raise MixedModelError("A binomial response must be 0/1, a proportion (with weights = trials) or "
                              "cbind(successes, failures).")
    if fam.family == "poisson" and (np.any(y < 0) or np.any(y != np.round(y))):
        raise MixedModelError("A Poisson response must be non-negative counts.")
    model = _GLMM(y, wt, X, Z, blocks, fam)
    K, p = len(blocks), X.shape[1]
    # the GLM without random effects (theta = 0 in the joint PIRLS) for starting values of beta
    _, beta0, *_ = model.pirls(np.zeros(K), np.zeros(p), np.zeros(model.q), joint=True)

    def stage1(th):  # lme4's nAGQ = 0: beta inside PIRLS (warm-started at the last beta)
        return model.laplace(th, beta0 if model.beta_pirls is None else model.beta_pirls, joint=True)

    # derivative-free, as glmer's bobyqa: theta = 0 is a stationary point of the deviance (it is even in theta)
    r1 = optimize.minimize(stage1, np.ones(K), method="Nelder-Mead", bounds=[(0, None)] * K,
                           options={"xatol": 1e-4, "fatol": 1e-6, "maxfev": 20 * K})  # a start for stage 2
    model.laplace(r1.x, beta0, joint=True)
    start = np.concatenate([r1.x, model.beta_pirls])
    if nagq == 1:
        def obj(par):
            return model.laplace(par[:K], par[K:])
    else:
        nodes, wts = np.polynomial.hermite.hermgauss(nagq)

        def obj(par):
            return model.agq(par[:K], par[K:], nodes, wts)
    bounds = [(0, None)] * K + [(None, None)] * p
    # the optimizer works on gamma = R beta (X = Q R / sqrt(n)): fixed effects on very different scales (age and
    # age^2) otherwise make the quasi-Newton steps crawl
    Rx = np.linalg.qr(X, mode="r") / math.sqrt(len(y))

    def to_par(g):
        return np.concatenate([g[:K], linalg.solve_triangular(Rx, g[K:], check_finite=False)])

    def obj_g(g):
        return obj(to_par(g))

    g0 = np.concatenate([start[:K], Rx @ start[K:]])
    r2 = optimize.minimize(obj_g, g0, method="L-BFGS-B", bounds=bounds,
                           options={"ftol": 1e-12, "gtol": 1e-7, "maxiter": 2000})
    r3 = r2
    if not r2.success or np.any(r2.x[:K] == 0):  # a stationary point at theta = 0 needs a derivative-free check
        r3 = optimize.minimize(obj_g, r2.x, method="Nelder-Mead", bounds=bounds,
                               options={"xatol": 1e-7, "fatol": 1e-9, "maxfev": 200 * (K + p), "adaptive": True})
    par = to_par(r3.x if r3.fun <= r2.fun else r2.x)
    dev = obj(par)
    theta, beta = par[:K], par[K:]
    u = model.u.copy()
    H = _hessian(obj, par)
    try:
        cov = 2.0 * np.linalg.inv(H)[K:, K:]
    except np.linalg.LinAlgError:
        cov = np.full((p, p), np.nan)
    se = np.sqrt(np.diag(cov))
    z = beta / se
    fe = pd.DataFrame({"estimate": beta, "se": se, "z": z, "p": 2 * stats.norm.sf(np.abs(z))}, index=names)
    groups = [b[0] for b in blocks]
    varcorr = pd.DataFrame({"grp": groups, "var1": "(Intercept)", "var2": None, "vcov": theta ** 2,
                            "sdcor": theta})
    ranef, off = {}, 0
    for (g, _, levels), th in zip(blocks, theta, strict=True):
        ranef[g] = pd.Series(th * u[off:off + len(levels)], index=levels, name="(Intercept)")
        off += len(levels)
    return GLMMResult(formula=formula, family=fam.family, link=fam.link, nagq=nagq, nobs=len(y),
                      ngroups={g: len(lv) for g, _, lv in blocks},
                      theta=pd.Series(theta, index=[f"{g}.(Intercept)" for g in groups]), fixed_effects=fe,
                      varcorr=varcorr, loglik=-0.5 * dev, deviance=dev, converged=bool(r2.success or r3.success),
                      n_evaluations=model.evals, vcov=pd.DataFrame(cov, index=names, columns=names), ranef=ranef,
                      response=response, stats=design, _key=np.concatenate([y, wt]))


def _hessian(f, x):
    """Central finite-difference Hessian of the deviance (as lme4's deriv12, which glmer uses for vcov)."""
    n = len(x)
    h = 1e-4 * np.maximum(1.0, np.abs(x))
    H = np.zeros((n, n))
    f0 = f(x)
    for i in range(n):
        ei = np.zeros(n)
        ei[i] = h[i]
        H[i, i] = (f(x + ei) - 2 * f0 + f(x - ei)) / h[i] ** 2
        for j in range(i):
            ej = np.zeros(n)
            ej[j] = h[j]
            H[i, j] = H[j, i] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)) / (4 * h[i] * h[j])
    return H


@dataclass
class GLMMLRTResult(TestOutcome):
    """Generalized likelihood ratio test between nested GLMMs, as lme4's ``anova(m0, m1)``: chi2 on df degrees of
    freedom (:class:`~vrs_helpers.results.TestOutcome`: ``statistic`` = chi2)."""

    formulas: tuple
    logliks: tuple
    df: int
    chi2: float
    p_value: float
    method: str = "GLRT (chi-square, Laplace)"

    @property
    def statistic(self) -> float:
        return self.chi2

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"formula": list(self.formulas), "logLik": list(self.logliks),
                             "Chisq": [np.nan, self.chi2], "Df": [np.nan, self.df],
                             "Pr(>Chisq)": [np.nan, self.p_value]})

    def __repr__(self) -> str:
        return (f"GLRT {self.formulas[0]!r} vs {self.formulas[1]!r}: chi2 = {self.chi2:.4f}, df = {self.df}, "
                f"p = {self.p_value:.4g}")


def glmm_lrt(m0: GLMMResult, m1: GLMMResult) -> GLMMLRTResult:
    """Likelihood ratio test of nested GLMMs: chi-square on the difference in parameters (lme4's anova)."""
    if (m0.nobs != m1.nobs or m0.family != m1.family or m0.link != m1.link or m0._key is None or m1._key is None
            or not np.array_equal(m0._key, m1._key)):
        raise MixedModelError("The two GLMMs must be fitted to the same rows and response with the same family.")
    if m0.nagq != m1.nagq:
        raise MixedModelError("Compare fits with the same nagq.")
    if m0.n_params > m1.n_params:
        m0, m1 = m1, m0
    df = m1.n_params - m0.n_params
    if df == 0 or not set(m0.fixed_effects.index) <= set(m1.fixed_effects.index) \
            or not set(m0.ngroups) <= set(m1.ngroups):
        raise MixedModelError(f"The models are not nested: {m0.formula!r} vs {m1.formula!r}.")
    chi2 = max(0.0, 2.0 * (m1.loglik - m0.loglik))
    method = ("GLRT (chi-square, Laplace)" if m0.nagq == 1
              else f"GLRT (chi-square, adaptive Gauss-Hermite, nAGQ = {m0.nagq})")
    return GLMMLRTResult((m0.formula, m1.formula), (m0.loglik, m1.loglik), df, chi2, float(stats.chi2.sf(chi2, df)),
                         method)
