"""The deviance of a random-intercept GLMM: penalized iteratively reweighted least squares (PIRLS) for the
conditional modes, the Laplace approximation with its analytic gradient, and adaptive Gauss-Hermite quadrature
(lme4's ``pirls`` / ``Laplace()`` / ``nAGQ``; MixedModels.jl's ``pirls!`` and ``deviance(m, nAGQ)``).

    eta = X beta + Z Lambda(theta) u,   u ~ N(0, I),   y | u from the family (:mod:`.families`) with mean g^-1(eta)

The Laplace deviance is ``-2 log p(y|u) + |u|^2 + log det(L L')`` at the conditional modes u, with
``L L' = Lambda' Z' W Z Lambda + I`` factored by blocks (:class:`BlockedCholesky`); the conditional log-likelihood
includes the binomial coefficients and ``log y!``, so it is lme4's ``logLik``. Its gradient in (theta, beta) is
analytic: at the modes the penalized part moves only explicitly (the envelope theorem), and log det moves
explicitly with theta and, through the weights, with the modes, whose derivatives come from the implicit function
theorem. Quadrature (one scalar term) centres the nodes at the modes with the PIRLS curvature, group by group.
The family enters only through its object: the inverse link, the weights and their slopes, -2 log p(y | mu).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg, sparse

from ..structure.sparse_design import level_cross, scale_rows
from .families import Family
from .laplace_blocks import LaplaceBlocks, find_nested


class BlockedCholesky:
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


class NestedCholesky:
    """L L' with a nested pair of terms eliminated together (:mod:`.laplace_blocks`, a batch of one): the interface
    of :class:`BlockedCholesky`."""

    def __init__(self, blocks: LaplaceBlocks, theta, w):
        self.blocks = blocks
        self.fac, _ = blocks.factor(np.asarray(theta, float)[None], np.asarray(w, float)[None])
        if not np.isfinite(self.logdet()):
            raise linalg.LinAlgError("L L' is not positive definite")

    def logdet(self) -> float:
        return float(self.blocks.logdet(self.fac)[0])

    def solve(self, g):
        return self.blocks.solve(self.fac, g[None])[0]


class GLMMDeviance:
    """The Laplace (and adaptive Gauss-Hermite) deviance of a random-intercept GLMM, and the Laplace gradient.

    ``y`` (proportions for the binomial family), prior weights ``wt``, the fixed-effects matrix ``X``, ``blocks``
    (per random term: name, level code of each row, level labels; lme4's order) and the family object. It keeps the
    last conditional modes as the start of the next PIRLS (as glmer does) and counts its evaluations (``evals``)."""

    def __init__(self, y, wt, X, blocks, fam: Family):
        self.y, self.wt, self.X, self.fam = y, wt, X, fam
        # a sparse X (many systems on many rows, :mod:`..structure.sparse_design`): its COO form for Z' W X
        self.coo = X.tocoo() if sparse.issparse(X) else None
        self.sizes = [len(b[2]) for b in blocks]
        self.codes = [np.asarray(b[1], dtype=np.int64) for b in blocks]
        self.offs = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.cols = [c + o for c, o in zip(self.codes, self.offs[:-1], strict=True)]
        self.K, self.q = len(blocks), int(self.offs[-1])
        self.pairs = {(k, m): self.codes[k] * self.sizes[m] + self.codes[m]
                      for k in range(self.K) for m in range(k + 1, self.K)}
        self.const = fam.loglik_constant(y, wt)
        self.binary = bool(np.all((y == 0) | (y == 1)))
        self.newton = fam.canonical  # canonical link: Fisher scoring is Newton's method (quadratic)
        self.u = np.zeros(self.q)  # conditional modes, warm start of the next evaluation (as glmer)
        self.pred = None  # (theta, beta, u, du/d(theta, beta)) of the last gradient: a linear prediction of u
        # the largest term nested in another (system:item in item): both eliminated together (:mod:`.laplace_blocks`)
        self.nested = LaplaceBlocks(self.codes, self.sizes) if find_nested(self.codes, self.sizes) else None
        self.evals = 0

    def _weights(self, eta, mu):
        """Fisher weights w and r / (y - mu) (:meth:`.families.Family.weights`)."""
        return self.fam.weights(eta, mu, self.wt)

    def _m2ll(self, mu):
        return self.fam.m2loglik(self.y, self.wt, mu, self.const, self.binary).sum()

    def factor(self, theta, w) -> BlockedCholesky | NestedCholesky:
        """Blocked Cholesky of I + Lambda' Z' diag(w) Z Lambda from weighted level and level-pair counts (with a
        nested pair: :class:`NestedCholesky`)."""
        if self.nested is not None:
            return NestedCholesky(self.nested, theta, w)
        sz, th, n1 = self.sizes, theta, self.sizes[0]
        d = 1.0 + th[0] ** 2 * np.bincount(self.codes[0], weights=w, minlength=n1)
        if self.K == 1:
            return BlockedCholesky(d, None, None)
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
        return BlockedCholesky(d, Bd, linalg.cho_factor(R - B.T @ Bd, lower=False, check_finite=False))

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
        if not self.fam.canonical:  # the mode's Hessian has the observed weights
            try:
                hfac = self.factor(theta, wo)
            except linalg.LinAlgError:
                hfac = fac
        rhs = [self.zlt(theta, v)]  # and the right-hand sides of du/d theta_k and du/d beta_j
        for k, c in enumerate(self.cols):
            t = -self.zlt(theta, wo * u[c])
            t[self.offs[k]:self.offs[k + 1]] += np.bincount(self.codes[k], weights=r, minlength=self.sizes[k])
            rhs.append(t)
        rhs += self._zlt_x(theta, wo)
        sol = hfac.solve(np.column_stack(rhs))
        b = sol[:, 0]
        if np.all(np.isfinite(sol)):
            self.pred = (theta, beta, u, sol[:, 1:])
        e = -2.0 * r + v - wo * self.zl(theta, b)
        g_theta = [e @ u[c] + r @ b[c] + 2.0 * (w @ q) for c, q in zip(self.cols, Q, strict=True)]
        return dev, np.concatenate([g_theta, self.X.T @ e])

    def _zlt_x(self, theta, w) -> list:
        """The columns of Lambda' Z' diag(w) X, one per fixed effect (sparse X: from its nonzeros only)."""
        if self.coo is None:
            return [-self.zlt(theta, w * x) for x in self.X.T]
        M = np.vstack([theta[k] * level_cross(c, n, self.coo, w)
                       for k, (c, n) in enumerate(zip(self.codes, self.sizes, strict=True))])
        return list(-M.T)

    def _diag_terms(self, theta, fac: BlockedCholesky):
        """Per row i and term k: [(L L')^-1 Lambda' z_i] at row i's level of term k, from the blocks of the inverse
        (D^-1 + D^-1 B S^-1 B' D^-1, -D^-1 B S^-1, S^-1) at the level pairs the rows use."""
        if isinstance(fac, NestedCholesky):
            return [q[0] for q in fac.blocks.diag_terms(np.asarray(theta, float)[None], fac.fac)]
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
        ll = -0.5 * self.fam.m2loglik(self.y, self.wt, mu, self.const, self.binary)
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
            XtWX = (X.T @ scale_rows(X, w)).toarray() if self.coo is not None else X.T @ (X * w[:, None])
            db = np.linalg.lstsq(XtWX, X.T @ (s * (self.y - mu)), rcond=None)[0]
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
