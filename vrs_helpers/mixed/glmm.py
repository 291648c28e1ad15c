"""Generalized linear mixed models as lme4's ``glmer`` fits them (Bates et al. 2015; lme4's ``glmer`` vignette).

    eta = X beta + Z Lambda(theta) u,   u ~ N(0, I),   y | u ~ binomial / Poisson with mean g^{-1}(eta)

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
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import linalg, optimize, special, stats

from ..outcomes import TestOutcome
from ..threads import blas_limit
from .accumulate import accumulate
from .design import design_rows
from .errors import ConvergenceWarning, MixedModelError
from .formula import parse

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

    def slopes(self, eta, mu, y, wt):
        """The observed weight -dr/d eta and dw/d eta, for r = wt mu'(y - mu)/V the score and w = wt mu'^2/V the
        Fisher weight in eta (they agree for the canonical links logit and log)."""
        if self.link == "logit":
            w = wt * mu * (1.0 - mu)
            return w, w * (1.0 - 2.0 * mu)
        if self.link == "log":
            w = wt * mu
            return w, w
        phi, v = self.dmu(eta, mu), self.var(mu)  # probit: mu' = phi(eta), phi' = -eta phi, V' = 1 - 2 mu
        w = wt * phi * phi / v
        t = phi * (1.0 - 2.0 * mu) / v
        return w + wt * phi * (y - mu) * (eta + t) / v, -w * (2.0 * eta + t)

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
    X = design_rows(s, df)
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


# ------------------------------------------------------------------------------------------ the objective

class _Chol:
    """L L' = I + Lambda' Z' W Z Lambda for random intercepts, factored by blocks as the blocked Cholesky of lme4 /
    MixedModels.jl: the first (largest) term's block D is diagonal; the other terms' levels form the dense Schur
    complement S = R - B' D^{-1} B (B the cross block), so no q x q matrix is ever formed."""

    def __init__(self, d, Bd, cf):
        self.d, self.Bd, self.cf = d, Bd, cf  # Bd = D^{-1} B; cf = cho_factor(S) (None for a single term)

    def logdet(self) -> float:
        ld = np.log(self.d).sum()
        return ld if self.cf is None else ld + 2.0 * np.log(np.diag(self.cf[0])).sum()

    def solve(self, g):
        """(L L')^-1 g for a vector or a matrix g."""
        d = self.d if g.ndim == 1 else self.d[:, None]
        if self.cf is None:
            return g / d
        n1 = len(self.d)
        x2 = linalg.cho_solve(self.cf, g[n1:] - self.Bd.T @ g[:n1], check_finite=False)
        return np.concatenate([g[:n1] / d - self.Bd @ x2, x2])


class _GLMM:
    """The Laplace (and adaptive Gauss-Hermite) deviance of a random-intercept GLMM, and the Laplace gradient."""

    def __init__(self, y, wt, X, blocks, fam: _Family):
        self.y, self.wt, self.X, self.fam = y, wt, X, fam
        self.sizes = [len(b[2]) for b in blocks]
        self.codes = [np.asarray(b[1], dtype=np.int64) for b in blocks]
        self.offs = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.cols = [c + o for c, o in zip(self.codes, self.offs[:-1], strict=True)]
        self.K, self.q = len(blocks), int(self.offs[-1])
        self.pairs = {(k, m): self.codes[k] * self.sizes[m] + self.codes[m]
                      for k in range(self.K) for m in range(k + 1, self.K)}
        self.const = fam.constant(y, wt)
        fam.binary = bool(np.all((y == 0) | (y == 1)))
        self.newton = fam.link != "probit"  # canonical link: Fisher scoring is Newton's method (quadratic)
        self.u = np.zeros(self.q)  # conditional modes, warm start of the next evaluation (as glmer)
        self.pred = None  # (theta, beta, u, du/d(theta, beta)) of the last gradient: a linear prediction of u
        self.evals = 0

    def _weights(self, eta, mu):
        """Fisher weights w = wt mu'^2 / V and r / (y - mu) = wt mu' / V (wt mu(1-mu) or wt mu, and wt, for the
        canonical links)."""
        if self.fam.link == "logit":
            return self.wt * mu * (1.0 - mu), self.wt
        if self.fam.link == "log":
            return self.wt * mu, self.wt
        d = self.fam.dmu(eta, mu)
        v = self.fam.var(mu)
        return self.wt * d * d / v, self.wt * d / v

    def _m2ll(self, mu):
        return self.fam.m2loglik(self.y, self.wt, mu, self.const).sum()

    def factor(self, theta, w) -> _Chol:
        """Blocked Cholesky of I + Lambda' Z' diag(w) Z Lambda from weighted level and level-pair counts."""
        sz, th, n1 = self.sizes, theta, self.sizes[0]
        d = 1.0 + th[0] ** 2 * np.bincount(self.codes[0], weights=w, minlength=n1)
        if self.K == 1:
            return _Chol(d, None, None)
        o = self.offs - n1
        R = np.zeros((self.q - n1, self.q - n1))
        for k in range(1, self.K):
            i = np.arange(o[k], o[k + 1])
            R[i, i] = 1.0 + th[k] ** 2 * np.bincount(self.codes[k], weights=w, minlength=sz[k])
            for m in range(k + 1, self.K):
                P = np.bincount(self.pairs[k, m], weights=w, minlength=sz[k] * sz[m]).reshape(sz[k], sz[m])
                R[o[k]:o[k + 1], o[m]:o[m + 1]] = P * (th[k] * th[m])
                R[o[m]:o[m + 1], o[k]:o[k + 1]] = P.T * (th[k] * th[m])
        B = np.hstack([np.bincount(self.pairs[0, k], weights=w, minlength=n1 * sz[k]).reshape(n1, sz[k])
                       * (th[0] * th[k]) for k in range(1, self.K)])
        Bd = B / d[:, None]
        return _Chol(d, Bd, linalg.cho_factor(R - B.T @ Bd, lower=False, check_finite=False))

    def zl(self, theta, u):
        """Z Lambda u: the random part of the linear predictor."""
        out = theta[0] * u[self.cols[0]]
        for k in range(1, self.K):
            out += theta[k] * u[self.cols[k]]
        return out

    def zlt(self, theta, r):
        """Lambda' Z' r."""
        return np.concatenate([theta[k] * np.bincount(c, weights=r, minlength=n)
                               for k, (c, n) in enumerate(zip(self.codes, self.sizes, strict=True))])

    def pirls(self, theta, beta, maxit=100):
        """Conditional modes u at (theta, beta): Newton (Fisher scoring) steps on the penalized log-likelihood from
        the last modes, halving a step until the objective does not increase; stops at a step below 1e-10 or, for a
        canonical link (Newton's method), after a full step below 1e-7 (the next one, quadratically smaller,
        changes nothing the deviance or its gradient can see; probit's scoring converges only linearly).
        Returns u, eta, mu, -2 log p(y|u) + |u|^2, the weights, r / (y - mu) and the factor at u."""
        xb = self.X @ beta
        u = self.u
        if self.pred is not None:  # the modes move with (theta, beta) as du/d(theta, beta) says
            th0, b0, u0, J = self.pred
            u = u0 + J @ np.concatenate([theta - th0, beta - b0])
        eta = xb + self.zl(theta, u)
        mu = self.fam.mu(eta)
        obj = self._m2ll(mu) + u @ u
        mu0 = self.fam.mu(xb)
        obj0 = self._m2ll(mu0)
        if not obj <= obj0:  # u = 0 is better (after a long step of the optimizer): start there
            u, eta, mu, obj = np.zeros(self.q), xb, mu0, obj0
        w, s = self._weights(eta, mu)
        fac = self.factor(theta, w)
        for _ in range(maxit):
            du = fac.solve(self.zlt(theta, s * (self.y - mu)) - u)
            deta = self.zl(theta, du)
            k = 1.0
            for _h in range(40):
                eta_n = eta + k * deta
                mu_n = self.fam.mu(eta_n)
                u_n = u + k * du
                new = self._m2ll(mu_n) + u_n @ u_n
                if new <= obj + 1e-11 * (abs(obj) + 1.0):  # rounding: the objective cannot see tiny steps
                    break
                k *= 0.5
            else:
                break
            u, eta, mu, obj = u_n, eta_n, mu_n, new
            w, s = self._weights(eta, mu)
            fac = self.factor(theta, w)
            step = k * np.abs(du).max(initial=0.0)
            if step < 1e-10 or (k == 1.0 and step < 1e-7 and self.newton):
                break
        return u, eta, mu, obj, w, s, fac

    def laplace(self, theta, beta, grad=False):
        """The Laplace deviance -2 log p(y|u) + |u|^2 + log det(L L') (lme4's ``Laplace()``); with ``grad`` also its
        gradient in (theta, beta), analytic: at the modes the penalized part moves only explicitly (envelope), and
        log det(L L') moves explicitly with theta and through the weights W(eta), eta moving with the modes
        (du/d(theta, beta) from the implicit function theorem on the mode equation Lambda' Z' r = u)."""
        self.evals += 1
        theta, beta = np.asarray(theta, float), np.asarray(beta, float)
        u, eta, mu, obj, w, s, fac = self.pirls(theta, beta)
        self.pred = None
        if np.all(np.isfinite(u)):
            self.u = u
        dev = obj + fac.logdet()
        if not grad:
            return dev
        r = s * (self.y - mu)
        wo, dw = self.fam.slopes(eta, mu, self.y, self.wt)
        Q = self._diag_terms(theta, fac)
        h = sum(t * q for t, q in zip(theta, Q, strict=True))  # z_i' Lambda (L L')^-1 Lambda' z_i
        v = h * dw  # d log det / d eta_i
        hfac = fac
        if self.fam.link == "probit":  # non-canonical: the mode's Hessian has the observed weights
            try:
                hfac = self.factor(theta, wo)
            except linalg.LinAlgError:
                hfac = fac
        rhs = [self.zlt(theta, v)]  # and the right-hand sides of du/d theta_k and du/d beta_j
        for k, c in enumerate(self.cols):
            t = -self.zlt(theta, wo * u[c])
            t[self.offs[k]:self.offs[k + 1]] += np.bincount(self.codes[k], weights=r, minlength=self.sizes[k])
            rhs.append(t)
        rhs += [-self.zlt(theta, wo * x) for x in self.X.T]
        sol = hfac.solve(np.column_stack(rhs))
        b = sol[:, 0]
        if np.all(np.isfinite(sol)):
            self.pred = (theta, beta, u, sol[:, 1:])
        e = -2.0 * r + v - wo * self.zl(theta, b)
        g_theta = [e @ u[c] + r @ b[c] + 2.0 * (w @ q) for c, q in zip(self.cols, Q, strict=True)]
        return dev, np.concatenate([g_theta, self.X.T @ e])

    def _diag_terms(self, theta, fac: _Chol):
        """Per row i and term k: [(L L')^-1 Lambda' z_i] at row i's level of term k, from the blocks of the inverse
        (D^-1 + D^-1 B S^-1 B' D^-1, -D^-1 B S^-1, S^-1) at the level pairs the rows use."""
        c0 = self.codes[0]
        if fac.cf is None:
            return [theta[0] / fac.d[c0]]
        n1 = len(fac.d)
        F = linalg.cho_solve(fac.cf, fac.Bd.T, check_finite=False).T  # D^-1 B S^-1
        Sinv = linalg.cho_solve(fac.cf, np.eye(self.q - n1), check_finite=False)
        p00 = (1.0 / fac.d + (F * fac.Bd).sum(axis=1))[c0]
        loc = [c - n1 for c in self.cols[1:]]
        Q0 = theta[0] * p00
        Qk = []
        for k in range(1, self.K):
            p0k = -F[c0, loc[k - 1]]
            Q0 = Q0 + theta[k] * p0k
            qk = theta[0] * p0k
            for m in range(1, self.K):
                qk = qk + theta[m] * Sinv[loc[k - 1], loc[m - 1]]
            Qk.append(qk)
        return [Q0, *Qk]

    def agq(self, theta, beta, nodes, weights):
        """Adaptive Gauss-Hermite deviance for one scalar random-effect term (the groups are independent)."""
        self.evals += 1
        theta = np.asarray(theta, float)
        u, eta, _, _, _, _, fac = self.pirls(theta, np.asarray(beta, float))
        if np.all(np.isfinite(u)):
            self.u = u
        sd = 1.0 / np.sqrt(fac.d)  # one scalar term: L L' is diagonal
        codes = self.codes[0]  # the group of each row
        base = eta - theta[0] * u[codes]
        uz = u + math.sqrt(2.0) * sd * nodes[:, None]  # nodes x groups
        mu = self.fam.mu(base + theta[0] * uz[:, codes])  # nodes x rows
        ll = -0.5 * self.fam.m2loglik(self.y, self.wt, mu, self.const)
        cell = codes + self.q * np.arange(len(nodes))[:, None]
        vals = (np.bincount(cell.ravel(), weights=ll.ravel(), minlength=self.q * len(nodes)).reshape(len(nodes), -1)
                - 0.5 * uz * uz + (nodes * nodes)[:, None])  # nodes x groups: log f(u) + z^2
        mx = vals.max(axis=0)
        logsum = mx + np.log((weights[:, None] * np.exp(vals - mx)).sum(axis=0))
        # int f(u) du with f = p(y|u) phi(u):  sqrt(2) sd sum_k w_k exp(z_k^2) f(u_hat + sqrt(2) sd z_k)
        logint = logsum + np.log(math.sqrt(2.0) * sd) - 0.5 * math.log(2.0 * math.pi)
        return -2.0 * logint.sum()

    def glm(self):
        """Fixed effects of the GLM without random effects (IRLS with step halving): the start of the fit."""
        X, beta = self.X, np.zeros(self.X.shape[1])
        eta = np.zeros(len(self.y))
        mu = self.fam.mu(eta)
        obj = self._m2ll(mu)
        for _ in range(100):
            w, s = self._weights(eta, mu)
            db = np.linalg.lstsq(X.T @ (X * w[:, None]), X.T @ (s * (self.y - mu)), rcond=None)[0]
            k = 1.0
            for _h in range(40):
                mu_n = self.fam.mu(eta + k * (X @ db))
                new = self._m2ll(mu_n)
                if new <= obj + 1e-11 * (abs(obj) + 1.0):
                    break
                k *= 0.5
            beta, eta, mu, obj = beta + k * db, eta + k * (X @ db), mu_n, new
            if k * np.abs(db).max(initial=0.0) < 1e-10:
                break
        return beta


# ------------------------------------------------------------------------------------------ the result

@dataclass
class GLMMResult:
    """A fitted GLMM with lme4's quantities (``summary(glmer(...))``).

    ``varcorr`` is lme4's ``as.data.frame(VarCorr(m))`` (grp, var1, var2, vcov, sdcor) on the latent scale;
    ``ranef`` the conditional modes ``b = Lambda u`` per grouping; ``deviance`` is ``-2 logLik`` (lme4's
    ``deviance()`` of a glmer fit is instead its deviance-residual form, without the constants of ``logLik``).
    ``stats`` is the fixed-effects design (factor levels, treatment contrasts, covariate means) that
    :func:`vrs_helpers.mixed.marginal.emmeans` needs for marginal means on the link scale.
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
    warnings: list = field(default_factory=list)  # e.g. that the optimizer did not converge
    model: object = field(default=None, repr=False)  # the design (response, trials, X, levels): refits, simulation

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
          weights=None, blas_threads="auto") -> GLMMResult:
    """Fit a GLMM as ``lme4::glmer(formula, data, family = family(link), nAGQ = nagq, weights = weights)``.

    ``formula``: lme4 syntax with random intercepts (``(1|g)``, crossed ``(1|a) + (1|b)``, nested ``(1|a/b)``),
    fixed terms as in :func:`vrs_helpers.mixed.formula.parse` plus ``I(expr)``; binomial responses are 0/1, proportions
    with ``weights`` (trials), or ``cbind(successes, failures)``. ``nagq > 1`` (adaptive Gauss-Hermite) needs a
    single random-intercept term, as in lme4. ``weights`` is a column name or an array. ``blas_threads``: "auto"
    (one BLAS thread while the dense blocks are small, :func:`vrs_helpers.threads.blas_limit`), an int, or None.
    """
    if not isinstance(data, pd.DataFrame):
        raise MixedModelError("glmer needs a pandas DataFrame.")
    fam = _Family(family, link)
    nagq = int(nagq)
    if nagq < 1 or nagq > 100:
        raise MixedModelError(f"nagq must be between 1 and 100, not {nagq}.")
    y, wt, X, names, blocks, response, design = _prepare(formula, data, weights)
    if nagq > 1 and len(blocks) != 1:
        raise MixedModelError("Adaptive Gauss-Hermite quadrature (nagq > 1) needs a single scalar random-effect term "
                              "(lme4 refuses it otherwise); use nagq=1 (Laplace).")
    if fam.family == "binomial" and (np.any(y < 0) or np.any(y > 1)):
        raise MixedModelError("A binomial response must be 0/1, a proportion (with weights = trials) or "
                              "cbind(successes, failures).")
    if fam.family == "poisson" and (np.any(y < 0) or np.any(y != np.round(y))):
        raise MixedModelError("A Poisson response must be non-negative counts.")
    model = _GLMM(y, wt, X, blocks, fam)
    K, p = len(blocks), X.shape[1]
    with blas_limit(model.q - model.sizes[0] + p, blas_threads):
        par, dev, u, H, converged = _optimize(model, nagq)
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
    if not converged or degenerate:
        why = ("the optimizer stopped with a gradient away from 0" if not converged else
               "the Hessian is degenerate in the fixed effects: a standard error is not finite")
        converged = False
        msg = (f"the GLMM {formula!r} did not converge ({why}): its estimates, standard errors and every test "
               f"built on them are unreliable. Check for separation (a system or cell with all-correct or all-wrong "
               f"scores: mixed.check_separation) or simplify the random effects.")
        fit_warnings.append(msg)
        warnings.warn(msg, ConvergenceWarning, stacklevel=2)
    varcorr = pd.DataFrame({"grp": groups, "var1": "(Intercept)", "var2": None, "vcov": theta ** 2,
                            "sdcor": theta})
    return GLMMResult(formula=formula, family=fam.family, link=fam.link, nagq=nagq, nobs=len(y),
                      ngroups={g: len(lv) for g, _, lv in blocks},
                      theta=pd.Series(theta, index=[f"{g}.(Intercept)" for g in groups]), fixed_effects=fe,
                      varcorr=varcorr, loglik=-0.5 * dev, deviance=dev, converged=converged,
                      n_evaluations=model.evals, vcov=pd.DataFrame(cov, index=names, columns=names), ranef=ranef,
                      response=response, stats=design, _key=np.concatenate([y, wt]), warnings=fit_warnings,
                      model=model)


def _optimize(model: _GLMM, nagq: int):
    """The maximum-likelihood (theta, beta) as signed parameters, the deviance and modes there, the Hessian of the
    deviance and whether the optimizer converged."""
    X, y = model.X, model.y
    K, p = model.K, X.shape[1]
    # The optimizer works on gamma = R beta (X = Q R / sqrt(n)): fixed effects on very different scales (age and
    # age^2) otherwise make quasi-Newton steps crawl. theta is left unbounded: the deviance is even in each
    # theta_k (flip theta_k and u_k together), so |theta| is reported and no bound can trap the search at 0.
    Rx = np.linalg.qr(X, mode="r") / math.sqrt(len(y))

    def to_par(g):
        return np.concatenate([g[:K], linalg.solve_triangular(Rx, g[K:], check_finite=False)])

    # Laplace: quasi-Newton with the analytic gradient from theta = 1 and the GLM's beta (glmer's stage 1, the
    # nAGQ = 0 fit, only serves its derivative-free stage 2 with a start and is not needed with a gradient)
    def fg(g):
        f, gr = model.laplace(g[:K], to_par(g)[K:], grad=True)
        return f, np.concatenate([gr[:K], linalg.solve_triangular(Rx, gr[K:], trans="T", check_finite=False)])

    g0 = np.concatenate([np.ones(K), Rx @ model.glm()])
    r = optimize.minimize(fg, g0, jac=True, method="L-BFGS-B",
                          options={"ftol": 1e-13, "gtol": 1e-5, "maxiter": 1000})
    converged = bool(r.success or np.abs(r.jac).max() < 1e-3)
    par = to_par(r.x)
    if nagq == 1:
        def obj(par):
            return model.laplace(par[:K], par[K:])

        def grad(par):
            return model.laplace(par[:K], par[K:], grad=True)[1]

        dev = obj(par)
        u = model.u.copy()
        H = _jacobian(grad, par)
    else:  # adaptive Gauss-Hermite from the Laplace optimum (as glmer's nAGQ > 1 stage 2), derivative-free
        nodes, wts = np.polynomial.hermite.hermgauss(nagq)

        def obj(par):
            return model.agq(par[:K], par[K:], nodes, wts)

        # in coordinates g in which the Laplace Hessian at the Laplace optimum is the identity: the quadrature
        # deviance is close to the Laplace one, so BFGS (which starts from the identity) needs a few steps, with
        # central differences (h = 1e-3 where the curvature is about 1) for the gradient
        HL = _jacobian(lambda q: model.laplace(q[:K], q[K:], grad=True)[1], par)
        try:
            C = np.linalg.cholesky(HL).T  # C'C = HL: D ~ D(par) + |g|^2 / 2
        except np.linalg.LinAlgError:  # not positive definite there: the scaled parameters
            C = np.diag(np.full(K + p, 1e-2))
        par0 = par.copy()

        def obj_g(g):
            return obj(par0 + linalg.solve_triangular(C, g, check_finite=False))

        def jac_g(g, h=1e-3):
            return np.array([(obj_g(g + e) - obj_g(g - e)) / (2 * h) for e in np.eye(K + p) * h])

        r2 = optimize.minimize(obj_g, np.zeros(K + p), jac=jac_g, method="BFGS", options={"gtol": 1e-5})
        r3 = r2
        if not r2.success:
            r3 = optimize.minimize(obj_g, r2.x, method="Nelder-Mead",
                                   options={"xatol": 1e-7, "fatol": 1e-9, "maxfev": 200 * (K + p), "adaptive": True})
        par = par0 + linalg.solve_triangular(C, r3.x if r3.fun <= r2.fun else r2.x, check_finite=False)
        converged = bool(r2.success or r3.success)
        dev = obj(par)
        u = model.u.copy()
        H = _hessian(obj, par)
    return par, dev, u, H, converged


def _jacobian(g, x):
    """Central differences of the analytic gradient: the Hessian of the deviance (glmer's deriv12 differences the
    deviance itself; differencing the gradient needs 2 n instead of 2 n^2 + 1 evaluations)."""
    h = 1e-4 * np.maximum(1.0, np.abs(x))
    H = np.column_stack([(g(x + h[i] * e) - g(x - h[i] * e)) / (2.0 * h[i]) for i, e in enumerate(np.eye(len(x)))])
    return 0.5 * (H + H.T)


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
    freedom (:class:`~vrs_helpers.outcomes.TestOutcome`: ``statistic`` = chi2)."""

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
