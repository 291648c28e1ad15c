"""Parametric-bootstrap likelihood ratio test of nested GLMMs (binary or successes-of-trials scores; Poisson counts),
as pbkrtest's ``PBmodcomp`` on glmer fits (Halekoh & Hojsgaard 2014), with batched, warm-started refits.

With few training runs per system the chi-square reference of the GLMM's likelihood ratio statistic is liberal
(issue 28: about 15 % rejections of true nulls with 3 seeds per system). The bootstrap replaces it by the
statistic's distribution under the fitted null model:

1. the observed statistic t = 2 (logLik m1 - logLik m0) of the two Laplace fits (:func:`.glmm.glmer`);
2. K times: new random effects u* ~ N(0, I) and a response y* ~ binomial(trials, expit(X0 beta0 + Z0 Lambda0 u*))
   (Poisson: exp) from m0's estimates, both models refitted to y* (Laplace), T_k = D0(y*) - D1(y*) (the Laplace
   deviances at their optima);
3. p = (1 + #{T_k >= t}) / (1 + K_valid) (Davison & Hinkley 1997, eq. 4.11), its Monte-Carlo SE
   sqrt(p (1 - p) / K_valid). A draw whose refit of either model did not converge is not used - and counted:
   ``n_failed`` in the result, never dropped silently.

The refits are batched: a batch of simulated responses is refitted at once, every array carrying the batch as its
first axis. For each response the Laplace deviance and its analytic gradient in (theta, beta) (as :mod:`.laplace`
computes them: PIRLS for the conditional modes with step halving; log det(L L') from L L' = I + Lambda'Z'WZ Lambda
factored by blocks (:mod:`.laplace_blocks`: the largest term's diagonal - or, when it is nested in another term as
system:item in item, both terms' arrowhead blocks per outer level - and a dense Schur complement on the other terms'
levels) and the gradient by the envelope theorem and the implicit function theorem) are computed for the whole
batch with numpy; PIRLS iterates only the responses whose modes have not converged;
the optimizer is quasi-Newton (BFGS) with the inverse Hessian started at the inverse of the observed fit's
Hessian. Warm starts: m0's refit starts at m0's estimates (the simulation's parameters), m1's at m0's refit (its
extra fixed effects at 0), the conditional modes at each new point predicted from du/d(theta, beta) (as the engine
predicts them). Converged: the Newton decrement g'H^-1 g below :data:`TOL` (deviance units); a refit that does not
get there in :data:`MAX_ITER` iterations, or whose deviance is not finite, has failed.

Pairwise decisions (``pairs``: contrasts D of the full model's fixed effects, e.g. every pair of 3+ systems): each
simulation's full-model refit also gives the Wald z of D beta (:func:`pairwise_z`, the fixed effects' covariance
given theta), and the observed pairs get the single-step max-T adjusted p = (1 + #{k: max_pairs |z*_k| >= |z|}) /
(1 + K_valid) (Westfall & Young 1993, "Resampling-based multiple testing", Algorithm 2.5; here the resampling is
the parametric bootstrap from the null fit, under which all systems are equal): family-wise, calibrated on the
design's own small-sample distribution (the Tukey-adjusted Wald z is liberal with 3 runs per system), at no extra
refits.

Batch i draws from its own generator (``SeedSequence(seed, spawn_key=(i,))``), so the p-value depends on the seed
and the batch size only - not on where the batches run: here, or as Dask tasks (``client=``, as
:mod:`.bootstrap`). Canonical links only (binomial logit, Poisson log) with the Laplace approximation (nAGQ = 1).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, fields
from typing import ClassVar

import numpy as np
from scipy import special

from ...threads import blas_limit
from ..inference.likelihood_ratio import lrt
from ..likelihood.laplace_blocks import LaplaceBlocks
from ..models.glmm import GeneralizedLinearMixedModel
from ..structure import numdiff
from ..structure.errors import MixedModelError
from .bootstrap import BootstrapLRTResult, SeededBatches

BATCH_SIZE = 100  # simulated responses refitted together (fewer where a batch's arrays would exceed ~2e7 numbers)
MAX_ITER = 60  # quasi-Newton iterations per refit
TOL = 1e-6  # Newton decrement g'H^-1 g below which a refit has converged (the deviance to ~5e-7)
CAREFUL = 0.25  # PIRLS steps (in the spherical modes u) longer than this are checked against the objective


@dataclass
class GLMMDesign:
    """One model's design for batched refits: the response's trials ``wt`` (n), X (n x p), per random term the
    level codes of the rows and the number of levels (the largest term first, as glmer orders them), the family."""

    X: np.ndarray
    wt: np.ndarray
    codes: list
    sizes: list
    family: str

    @classmethod
    def of(cls, m: GeneralizedLinearMixedModel) -> GLMMDesign:
        if not isinstance(m, GeneralizedLinearMixedModel) or not m.is_fitted:
            raise MixedModelError("the bootstrap needs GLMMs fitted by vrs_helpers.mixed.glmer (with their design).")
        model = m.objective  # the laplace.GLMMDeviance: response, weights, X, levels
        if m.nagq != 1:
            raise MixedModelError("the GLMM bootstrap refits by the Laplace approximation (nagq = 1), as glmer's "
                                  "default; refit both models with nagq=1.")
        if (m.family.name, m.link) not in (("binomial", "logit"), ("poisson", "log")):
            raise MixedModelError(f"the GLMM bootstrap supports the canonical links (binomial logit, Poisson log), "
                                  f"not {m.family} with the {m.link} link.")
        if m.family.name == "poisson" and np.any(np.asarray(model.wt) != 1.0):
            raise MixedModelError("a Poisson GLMM with prior weights has no distribution to simulate responses from; "
                                  "fit the counts without weights.")
        X = model.X.toarray() if model.coo is not None else model.X  # a sparse X (many systems): dense here
        return cls(np.ascontiguousarray(X, dtype=float), np.asarray(model.wt, dtype=float),
                   [np.asarray(c, dtype=np.int64) for c in model.codes], list(model.sizes), m.family.name)

    @property
    def n(self) -> int:
        return len(self.wt)

    @property
    def q(self) -> int:
        return int(sum(self.sizes))


class BatchLaplace:
    """The Laplace deviance (constants left out) and its gradient for a batch of responses on one design."""

    def __init__(self, d: GLMMDesign):
        self.d = d
        self.K, self.p = len(d.sizes), d.X.shape[1]
        self.blocks = LaplaceBlocks(d.codes, d.sizes)
        self.offs = self.blocks.offs
        self.cols = [c + self.offs[k] for k, c in enumerate(d.codes)]  # position among all levels
        self.binomial = d.family == "binomial"
        self.ones = [bool(np.all(d.X[:, j] == 1.0)) for j in range(self.p)]

    def _bincount(self, k: int, v, j: int | None = None):
        return self.blocks.bincount(k, v, j)

    # --- Z Lambda u and Lambda'Z'r for a batch (B x q modes, B x n row values)
    def zl(self, theta, u):
        out = theta[:, :1] * u[:, self.cols[0]]
        for k in range(1, self.K):
            out += theta[:, k:k + 1] * u[:, self.cols[k]]
        return out

    def zlt(self, theta, r):
        return np.concatenate([theta[:, k:k + 1] * v for k, v in enumerate(self.blocks.level_sums(r))], axis=1)

    # --- the family (canonical links)
    def mu(self, eta):
        if self.binomial:
            return special.expit(eta)
        return np.exp(np.minimum(eta, 700.0))

    def m2ll(self, y, eta, mu):
        """-2 log p(y | mu) without the constant terms, per response: -2 sum wt (y eta - b(eta)), b(eta) = log(1 +
        e^eta) (binomial: max(eta, 0) - log of mu or 1 - mu, whichever is at least 1/2, exact for any eta) or e^eta
        (Poisson)."""
        if self.binomial:
            b = np.maximum(eta, 0.0) - np.log(np.where(eta > 0, mu, 1.0 - mu))
            return -2.0 * ((y * eta - b) @ self.d.wt)
        return -2.0 * ((y * eta - mu) @ self.d.wt)

    def weights(self, mu):
        w = self.d.wt * (mu * (1.0 - mu) if self.binomial else mu)
        return w, (w * (1.0 - 2.0 * mu) if self.binomial else w)  # Fisher weight, its derivative in eta

    # --- L L' = I + Lambda'Z'WZ Lambda by blocks (:mod:`.laplace_blocks`: a nested pair eliminated together)
    def factor(self, theta, w):
        """The blocks of L L' (:class:`.laplace_blocks.Factor`) and the weighted counts per level of each term."""
        return self.blocks.factor(theta, w)

    def logdet(self, fac):
        return self.blocks.logdet(fac)

    def solve(self, fac, g):
        """(L L')^-1 g for g of shape (B, q) or (B, q, c)."""
        return self.blocks.solve(fac, g)

    # --- PIRLS and the Laplace deviance
    def pirls(self, theta, beta, y, u, maxit: int = 50):
        """Conditional modes at (theta, beta) for each response, from the modes u: Newton steps (as
        :meth:`.laplace.GLMMDeviance.pirls`); a step longer than :data:`CAREFUL` is halved until the penalized
        objective does not increase, shorter ones (the quadratic region) are taken as they are. Stops after a full
        step below 1e-3 (the modes are then within ~1e-6, the deviance within ~1e-12: nothing the statistic or the
        optimizer can see).
        Returns (u, eta, mu, penalized objective, factor at u, weighted counts, converged)."""
        xb = beta @ self.d.X.T
        eta = xb + self.zl(theta, u)
        mu = self.mu(eta)
        B = len(y)
        done = np.zeros(B, dtype=bool)
        w, _ = self.weights(mu)
        fac, counts = self.factor(theta, w)
        for _ in range(maxit):
            # only the responses not yet converged are computed (their factor is put back into the batch's)
            act = np.flatnonzero(~done)
            if not len(act):
                break
            full = len(act) == B
            th, ya, ua = theta[act], y[act], u[act]
            du = self.solve(fac if full else fac.take(act), self.zlt(th, self.d.wt * (ya - mu[act])) - ua)
            size = np.abs(du).max(axis=1)
            k = np.ones(len(act))
            careful = np.flatnonzero(~(size <= CAREFUL))
            if len(careful):
                i = careful
                deta = self.zl(th[i], du[i])
                ea = eta[act[i]]
                obj = self.m2ll(ya[i], ea, mu[act[i]]) + (ua[i] * ua[i]).sum(axis=1)
                ki, pending = np.ones(len(i)), np.ones(len(i), dtype=bool)
                for _h in range(40):
                    if not pending.any():
                        break
                    j = np.flatnonzero(pending)
                    eta_n = ea[j] + ki[j, None] * deta[j]
                    u_n = ua[i[j]] + ki[j, None] * du[i[j]]
                    new = self.m2ll(ya[i[j]], eta_n, self.mu(eta_n)) + (u_n * u_n).sum(axis=1)
                    ok = new <= obj[j] + 1e-11 * (np.abs(obj[j]) + 1.0)
                    pending[j[ok]] = False
                    ki[j[~ok]] *= 0.5
                ki[pending] = 0.0  # no decrease: stop there
                k[i] = ki
            ua = ua + k[:, None] * du
            ea = xb[act] + self.zl(th, ua)
            ma = self.mu(ea)
            u[act], eta[act], mu[act] = ua, ea, ma
            step = k * size
            done[act] = (step < 1e-10) | ((k == 1.0) & (step < 1e-3))
            fa, ca = self.factor(th, self.weights(ma)[0])
            if full:
                fac, counts = fa, ca
            else:
                fac.put(act, fa)
                for c, v in zip(counts, ca, strict=True):
                    c[act] = v
        obj = self.m2ll(y, eta, mu) + (u * u).sum(axis=1)
        return u, eta, mu, obj, fac, counts, done & np.isfinite(obj)

    def value(self, theta, beta, y, u):
        """Laplace deviance per response and the state the gradient needs."""
        u, eta, mu, obj, fac, counts, ok = self.pirls(theta, beta, y, u.copy())
        dev = obj + self.logdet(fac)
        ok &= np.isfinite(dev)
        return np.where(ok, dev, np.inf), (theta, y, u, mu, fac, counts)

    def gradient(self, state):
        """The analytic gradient in x = (theta, beta) (:meth:`.laplace.GLMMDeviance.laplace` for canonical links) and
        the derivatives du/dx of the conditional modes (implicit function theorem; they predict the modes at the
        next point)."""
        theta, y, u, mu, fac, counts = state
        w, dw = self.weights(mu)
        r = self.d.wt * (y - mu)
        Q = self._diag_terms(theta, fac)
        h = theta[:, :1] * Q[0]
        for k in range(1, self.K):
            h += theta[:, k:k + 1] * Q[k]
        v = h * dw
        rhs = [self.zlt(theta, v)]
        for k in range(self.K):
            t = -self.zlt(theta, w * u[:, self.cols[k]])
            t[:, self.offs[k]:self.offs[k + 1]] += self._bincount(k, r)
            rhs.append(t)
        for j in range(self.p):  # an all-ones column (the intercept) has the weighted counts as its sums
            rhs.append(-np.concatenate([theta[:, k:k + 1] * counts[k] for k in range(self.K)], axis=1)
                       if self.ones[j] else -self.zlt(theta, w * self.d.X[:, j][None, :]))
        sol = self.solve(fac, np.stack(rhs, axis=2))
        b = sol[:, :, 0]
        e = -2.0 * r + v - w * self.zl(theta, b)
        g_theta = [(e * u[:, c]).sum(axis=1) + (r * b[:, c]).sum(axis=1) + 2.0 * (w * q).sum(axis=1)
                   for c, q in zip(self.cols, Q, strict=True)]
        return np.concatenate([np.column_stack(g_theta), e @ self.d.X], axis=1), sol[:, :, 1:]

    def _diag_terms(self, theta, fac):
        """Per row and term k: [(L L')^-1 Lambda'z_i] at the row's level of term k (B x n each)."""
        return self.blocks.diag_terms(theta, fac)


def _take(state, ok):
    """The rows ``ok`` of a batch's state (theta, y, u, mu, factor, counts)."""
    theta, y, u, mu, fac, counts = state
    return theta[ok], y[ok], u[ok], mu[ok], fac.take(ok), [c[ok] for c in counts]


def minimize(lap: BatchLaplace, y: np.ndarray, x0: np.ndarray, Hinv0: np.ndarray, u0: np.ndarray | None = None,
             max_iter: int = MAX_ITER):
    """Minimize the Laplace deviance of every response of a batch over x = (theta, beta): BFGS from ``x0`` (one
    start, or one per response) with the inverse Hessian started at ``Hinv0``, Armijo backtracking, the conditional
    modes started at ``u0`` (default 0) and at each new point predicted from du/dx. Returns (deviance, x,
    converged, conditional modes) per response."""
    B, K = len(y), lap.K
    x = np.broadcast_to(np.asarray(x0, dtype=float), (B, np.shape(x0)[-1])).copy()
    u0 = np.zeros((B, lap.d.q)) if u0 is None else np.asarray(u0, dtype=float)
    f, state = lap.value(x[:, :K], x[:, K:], y, u0)
    u = state[2]
    g, J = lap.gradient(state)
    Hinv = np.broadcast_to(Hinv0, (B,) + Hinv0.shape).copy()
    active = np.isfinite(f)
    conv = np.zeros(B, dtype=bool)
    for _ in range(max_iter):
        idx = np.flatnonzero(active & ~conv)
        if not len(idx):
            break
        step = -np.einsum("bij,bj->bi", Hinv[idx], g[idx])
        slope = np.einsum("bi,bi->b", g[idx], step)
        small = -slope < TOL
        conv[idx[small]] = True
        idx, step, slope = idx[~small], step[~small], slope[~small]
        if not len(idx):
            break
        bad = slope >= 0  # not a descent direction: restart from the initial inverse Hessian
        if bad.any():
            Hinv[idx[bad]] = Hinv0
            step[bad] = -(g[idx[bad]] @ Hinv0.T)
            slope[bad] = np.einsum("bi,bi->b", g[idx[bad]], step[bad])
        alpha = np.ones(len(idx))
        pending = np.arange(len(idx))
        for _ls in range(30):
            if not len(pending):
                break
            i = idx[pending]
            dx = alpha[pending, None] * step[pending]
            xt = x[i] + dx
            ft, st = lap.value(xt[:, :K], xt[:, K:], y[i], u[i] + (J[i] @ dx[:, :, None])[:, :, 0])
            ok = ft <= f[i] + 1e-4 * alpha[pending] * slope[pending]
            if ok.any():
                j = i[ok]
                gt, Jt = lap.gradient(_take(st, ok))
                s_, yv = dx[ok], gt - g[j]
                sy = np.einsum("bi,bi->b", s_, yv)
                upd = sy > 1e-12
                if upd.any():
                    H, su, yu = Hinv[j[upd]], s_[upd], yv[upd]
                    rho = 1.0 / sy[upd]
                    Hy = np.einsum("bij,bj->bi", H, yu)
                    yHy = np.einsum("bi,bi->b", yu, Hy)
                    Hinv[j[upd]] = (H - rho[:, None, None] * (Hy[:, :, None] * su[:, None, :]
                                                              + su[:, :, None] * Hy[:, None, :])
                                    + (rho * rho * yHy + rho)[:, None, None] * (su[:, :, None] * su[:, None, :]))
                x[j], f[j], g[j], u[j], J[j] = xt[ok], ft[ok], gt, st[2][ok], Jt
            pending = pending[~ok]
            alpha[pending] *= 0.5
        # no decrease along the direction within rounding: a minimum if the decrement is small, else a failure
        stuck = idx[pending]
        if len(stuck):
            dec = np.einsum("bi,bij,bj->b", g[stuck], Hinv[stuck], g[stuck])
            conv[stuck[np.abs(dec) < 1e-5]] = True
            active[stuck[np.abs(dec) >= 1e-5]] = False
    return f, x, conv & np.isfinite(f), u


def _hessian(lap: BatchLaplace, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The inverse of the deviance's Hessian at x for one response (central differences of the analytic gradient
    with :mod:`.numdiff`'s steps, as :mod:`.glmm` takes them; made positive definite): the start of the
    quasi-Newton refits."""
    K = lap.K
    Y = np.asarray(y, dtype=float).reshape(1, -1)

    def gradient(z):
        _, st = lap.value(z[None, :K], z[None, K:], Y, np.zeros((1, lap.d.q)))
        return lap.gradient(st)[0][0]

    H = numdiff.jacobian(gradient, x, numdiff.steps(x, 1e-4, 1.0)).T
    H = 0.5 * (H + H.T)
    lam, V = np.linalg.eigh(H)
    lam = np.maximum(lam, 1e-6 * max(float(lam.max()), 1.0))
    return (V / lam) @ V.T


def pairwise_z(lap: BatchLaplace, y: np.ndarray, x: np.ndarray, D: np.ndarray, u: np.ndarray | None = None):
    """Wald z of the contrasts ``D beta`` (rows of D over the fixed effects) for every response of a batch at its
    (theta, beta) = ``x``, with the fixed effects' covariance given theta: V = (X'WX - X'WZ Lambda (L L')^-1
    Lambda'Z'WX)^-1, W the GLM weights at the conditional modes (the inverse of the Schur complement of the
    penalized system's Hessian; lme4's ``vcov(use.hessian = FALSE)``, MixedModels.jl's GLMM standard errors).
    ``u``: the modes to start PIRLS from (a refit's). NaN where the modes or V are not defined (e.g. a system
    whose scores are all correct: its weights are 0 and the Schur complement singular)."""
    K, p = lap.K, lap.p
    u = np.zeros((len(y), lap.d.q)) if u is None else u
    dev, (theta, _, _, mu, fac, _) = lap.value(x[:, :K], x[:, K:], y, u)
    w, _ = lap.weights(mu)
    X = lap.d.X
    C = np.stack([lap.zlt(theta, w * X[:, j][None, :]) for j in range(p)], axis=2)  # Lambda'Z'WX (B, q, p)
    M = (X.T[None] * w[:, None, :]) @ X - np.swapaxes(C, 1, 2) @ lap.solve(fac, C)
    ok = np.isfinite(dev) & np.isfinite(M).all(axis=(1, 2))
    M[~ok] = np.eye(p)
    try:
        V = np.linalg.inv(M)
    except np.linalg.LinAlgError:  # a separated system (all correct): its GLM weights vanish, M is singular
        V = np.full_like(M, np.nan)
        for b in np.flatnonzero(ok):
            try:
                V[b] = np.linalg.inv(M[b])
            except np.linalg.LinAlgError:
                ok[b] = False
    se = np.sqrt(np.einsum("ij,bjk,ik->bi", D, V, D))
    z = (x[:, K:] @ D.T) / se
    z[~ok] = np.nan
    return z


@dataclass(repr=False)
class GLMMBootstrapResult(BootstrapLRTResult):
    """A GLMM bootstrap LRT (:class:`~vrs_helpers.mixed.resampling.bootstrap.BootstrapLRTResult`) that also calibrated
    the
    pairwise contrasts D beta on the same simulations (``pairs`` given): ``z_pairs`` their observed Wald z (the
    covariance given theta, :func:`pairwise_z`), ``z_simulated`` per simulation (rows) the z of the pairs of its
    full-model refit (NaN where a refit failed). :attr:`pairwise_p` is the single-step max-T adjustment."""

    z_pairs: np.ndarray | None = field(default=None, repr=False)
    z_simulated: np.ndarray | None = field(default=None, repr=False)

    @property
    def max_abs_z(self) -> np.ndarray | None:
        """Per simulation the largest |z| over the pairs whose z is defined (NaN where a refit failed or no pair's
        z is): the max-T reference."""
        if self.z_simulated is None:
            return None
        a = np.abs(self.z_simulated)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a draw with no finite z: NaN
            return np.where(np.isfinite(a).any(axis=1), np.nanmax(np.where(np.isfinite(a), a, -np.inf), axis=1),
                            np.nan)

    @property
    def pairwise_p(self) -> np.ndarray | None:
        """Single-step max-T adjusted p of each pair (Westfall & Young 1993, Algorithm 2.5; here with the
        parametric bootstrap from the null fit, under which every pair is equal): (1 + #{b: max_pairs |z*_b| >=
        |z_j|}) / (1 + B) over the B simulations whose refits converged. Family-wise: under the complete null
        P(some adjusted p <= alpha) <= alpha up to Monte-Carlo error."""
        if self.z_pairs is None or self.z_simulated is None:
            return None
        top = self.max_abs_z
        ref = top[np.isfinite(top) & np.isfinite(self.reference)]
        obs = np.abs(self.z_pairs)
        tol = 1e-7 * (1.0 + obs)  # a draw equal to the observed |z| within the optimizer's tolerance counts
        p = (1 + (ref[None, :] >= (obs - tol)[:, None]).sum(axis=1)) / (1 + len(ref))
        return np.where(np.isfinite(obs), p, np.nan)  # a pair without a z (separation): no p


@dataclass
class GLMMBootstrapPlan(SeededBatches):
    """The seeded batches of :func:`glmm_bootstrap_lrt` (module docstring). ``draw(i)`` refits batch i and returns
    its statistics (NaN where a refit did not converge); ``finish`` the test from all of them in batch order.
    Picklable: it carries the two designs and the null fit's parameters (for Dask tasks: ``run_batches``)."""

    designs: tuple = field(repr=False)  # (null, full) GLMMDesign
    null: tuple = field(repr=False)  # (theta, beta) of m0: the simulation and the start of its refits
    starts: tuple = field(repr=False)  # (x0, Hinv0) per model: the start and the initial inverse Hessian
    embedding: tuple = field(repr=False)  # the null's parameters and modes in the full model's (_embedding)
    pairs: np.ndarray | None = field(default=None, repr=False)  # contrasts D of the full model's fixed effects
    z_pairs: np.ndarray | None = field(default=None, repr=False)  # their observed Wald z (pairwise_z)
    method: ClassVar[str] = "parametric bootstrap LRT (GLMM, Laplace)"

    def simulate(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` responses (proportions of the trials, or counts) from the null fit, with new random effects."""
        d = self.designs[0]
        theta, beta = self.null
        u = rng.standard_normal((size, d.q))
        lap = BatchLaplace(d)
        eta = (d.X @ beta)[None, :] + lap.zl(np.broadcast_to(theta, (size, len(theta))), u)
        mu = lap.mu(eta)
        if d.family == "binomial":
            trials = np.rint(d.wt).astype(np.int64)
            return rng.binomial(np.broadcast_to(trials, mu.shape), mu) / d.wt
        return rng.poisson(mu).astype(float)

    def draw(self, i: int) -> np.ndarray:
        _, size = self.batches[i]
        y = self.simulate(self.rng(i), size)
        dev = []
        lap0, lap1 = BatchLaplace(self.designs[0]), BatchLaplace(self.designs[1])
        with warnings.catch_warnings(), blas_limit(lap1.blocks.q2 + lap1.p):
            warnings.simplefilter("ignore", RuntimeWarning)
            # the null model from its estimates (the simulation's parameters), the full model from the null refit
            # (its extra parameters at 0, or at the full fit's variance), the modes from the null refit's
            x_null, Hinv0 = self.starts[0]
            f, x, ok, u = minimize(lap0, y, x_null, Hinv0)
            dev.append(np.where(ok, f, np.nan))
            x_index, x_default, u_index = self.embedding
            x1 = np.where(x_index >= 0, x[:, np.maximum(x_index, 0)], x_default)
            u1 = np.where(u_index >= 0, u[:, np.maximum(u_index, 0)], 0.0)
            f, x, ok, u = minimize(lap1, y, x1, self.starts[1][1], u1)
            dev.append(np.where(ok, f, np.nan))
            stat = np.maximum(dev[0] - dev[1], 0.0)
            if self.pairs is None:
                return stat
            # the pairwise contrasts' z of the full refit (the max-T reference: their largest |z|)
            z = pairwise_z(lap1, y, x, self.pairs, u)
        return np.column_stack([stat, np.where(np.isfinite(stat)[:, None], z, np.nan)])

    def p_values(self, result) -> np.ndarray:
        """The Monte-Carlo p-values the result decides by: the LRT's and, with ``pairs``, each pair's max-T p."""
        pairs = result.pairwise_p
        return np.concatenate([[result.p_value], [] if pairs is None else pairs]).astype(float)

    def finish(self, reference) -> GLMMBootstrapResult:
        """The test from the simulated statistics in batch order (with ``pairs``: the LRT statistic, then the z of
        each pair)."""
        reference = np.asarray(reference, dtype=float)
        z = None
        if reference.ndim == 2:
            reference, z = reference[:, 0], reference[:, 1:]
        res = super().finish(reference)
        return GLMMBootstrapResult(**{f.name: getattr(res, f.name) for f in fields(BootstrapLRTResult)},
                                   z_pairs=self.z_pairs if z is not None else None, z_simulated=z)


def _level(alpha) -> float | None:
    """``settle_alpha`` checked: None, or a level in (0, 1)."""
    if alpha is None:
        return None
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) or not 0 < float(alpha) < 1:
        raise MixedModelError(f"settle_alpha must be a level in (0, 1) or None, got {alpha!r}.")
    return float(alpha)


def _embedding(m0: GeneralizedLinearMixedModel, m1: GeneralizedLinearMixedModel) -> tuple:
    """Where the full model's parameters x = (theta, beta) and modes u come from in the null model's: per element
    of the full model an index into the null's (-1: none), and the value of the others (a fixed effect 0, an extra
    variance the full fit's theta, at least 0.1: theta = 0 is a stationary point of the deviance)."""
    groups0, names0 = list(m0.ngroups), list(m0.fixed_effects.index)
    x_index, x_default, u_index = [], [], []
    off0 = np.concatenate([[0], np.cumsum(list(m0.ngroups.values()))])
    for g, t in zip(m1.ngroups, m1.theta.to_numpy(), strict=True):
        x_index.append(groups0.index(g) if g in groups0 else -1)
        x_default.append(max(float(t), 0.1))
    for n in m1.fixed_effects.index:
        x_index.append(len(groups0) + names0.index(n) if n in names0 else -1)
        x_default.append(0.0)
    for g, m in m1.ngroups.items():
        j = groups0.index(g) if g in groups0 else -1
        u_index.extend(off0[j] + np.arange(m) if j >= 0 else [-1] * m)
    return np.array(x_index), np.array(x_default), np.array(u_index, dtype=np.int64)


def glmm_bootstrap_plan(m0: GeneralizedLinearMixedModel, m1: GeneralizedLinearMixedModel, n_sim: int = 1000,
                        seed: int = 0, batch_size: int | None = None, pairs=None,
                        settle_alpha: float | None = None) -> GLMMBootstrapPlan:
    """The batches of :func:`glmm_bootstrap_lrt` (see :class:`GLMMBootstrapPlan`)."""
    if isinstance(n_sim, bool) or not isinstance(n_sim, (int, np.integer)) or n_sim < 1:
        raise MixedModelError(f"n_sim must be a positive integer, got {n_sim!r}.")
    test = lrt(m0, m1)  # checks: same rows and family, nested
    m0, m1 = (m0, m1) if m0.n_params <= m1.n_params else (m1, m0)
    designs = (GLMMDesign.of(m0), GLMMDesign.of(m1))
    if designs[0].family == "binomial" and np.any(np.abs(designs[0].wt - np.rint(designs[0].wt)) > 1e-9):
        raise MixedModelError("binomial weights must be whole numbers of trials to simulate responses.")
    starts = []
    for m, d in zip((m0, m1), designs, strict=True):
        x_hat = np.concatenate([m.theta.to_numpy(), m.fixed_effects["estimate"].to_numpy()])
        starts.append((x_hat, _hessian(BatchLaplace(d), np.asarray(m.objective.y, dtype=float), x_hat)))
    if batch_size is None:
        d, blocks = designs[1], LaplaceBlocks(designs[1].codes, designs[1].sizes)
        width = d.n * 12 + blocks.m * blocks.r * max(blocks.q2, 1) * 3 + blocks.q2 ** 2
        batch_size = int(max(5, min(BATCH_SIZE, 20_000_000 // max(width, 1))))
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise MixedModelError(f"batch_size must be a positive integer, got {batch_size!r}.")
    batches = [(a, min(batch_size, n_sim - a)) for a in range(0, int(n_sim), int(batch_size))]
    null = (m0.theta.to_numpy().copy(), m0.fixed_effects["estimate"].to_numpy().copy())
    z_pairs = None
    if pairs is not None:
        pairs = np.atleast_2d(np.asarray(pairs, dtype=float))
        if pairs.shape[1] != designs[1].X.shape[1]:
            raise MixedModelError(f"pairs must have one column per fixed effect of the full model "
                                  f"({designs[1].X.shape[1]}), got {pairs.shape[1]}.")
        y1 = np.asarray(m1.objective.y, dtype=float)[None, :]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            z_pairs = pairwise_z(BatchLaplace(designs[1]), y1, starts[1][0][None, :], pairs)[0]
    return GLMMBootstrapPlan(designs, null, tuple(starts), _embedding(m0, m1), pairs, z_pairs,
                             observed=float(test.chi2),
                             df=int(test.df), n_sim=int(n_sim), seed=int(seed), batches=batches, formula0=m0.formula,
                             formula1=m1.formula, settle_alpha=_level(settle_alpha))


def glmm_bootstrap_lrt(m0: GeneralizedLinearMixedModel, m1: GeneralizedLinearMixedModel, n_sim: int = 1000,
                       seed: int = 0, client=None, batch_size: int | None = None,
                       tasks: int | None = None, progress: bool = False, pairs=None,
                       settle_alpha: float | None = None) -> GLMMBootstrapResult:
    """Parametric-bootstrap likelihood ratio test of nested GLMMs m0 (restricted) and m1 (general), as pbkrtest's
    ``PBmodcomp(m1, m0, nsim = n_sim)`` on glmer fits (module docstring).

    Parameters
    ----------
    m0, m1 : results of :func:`vrs_helpers.mixed.glmer` (Laplace, binomial logit or Poisson log) on the same rows;
        the order does not matter (the model with fewer parameters is the null).
    n_sim : simulated responses K (the Monte-Carlo SE of p is sqrt(p (1 - p) / K): 0.007 at p = 0.05, K = 1000).
    seed : the same seed and batch size give the same p-value, here or on a cluster.
    batch_size : responses refitted together (default 100, fewer for designs with many rows or levels).
    client : None (here), or a Dask client, scheduler address or ``"local"``: groups of batches run as tasks there.
    progress : a text bar over the simulations on stderr when it is a terminal (here only; the numbers do not
        depend on it).
    pairs : optional contrasts D (one row per pair, one column per fixed effect of the full model): each
        simulation's full-model refit also gives the Wald z of D beta, and the result's ``pairwise_p`` are the
        single-step max-T adjusted p-values of the observed pairs (:class:`GLMMBootstrapResult`; no extra refits).
    settle_alpha : a level: the simulations stop after 200 (or 500) of them when every decision at that level -
        the LRT's and each pair's - is already settled
        (:meth:`~vrs_helpers.mixed.resampling.bootstrap.SeededBatches.settled`;
        the result's ``n_planned`` and ``stopped_early`` say so); the same numbers here and on Dask. None: all
        ``n_sim``.

    Returns a :class:`GLMMBootstrapResult` (a :class:`~vrs_helpers.mixed.resampling.bootstrap.BootstrapLRTResult`):
    ``p_value``, ``mc_se``, ``n_sim`` (the draws used), ``n_failed`` (draws whose refit did not converge: not used,
    and reported), ``p_chisq`` (the chi-square p of the same statistic, for comparison); with ``pairs`` also
    ``pairwise_p``, ``z_pairs`` and ``z_simulated``.
    """
    plan = glmm_bootstrap_plan(m0, m1, n_sim, seed, batch_size, pairs, settle_alpha)
    if client is None:
        return plan.run(progress)
    from ...dask_support import require_dask, run_batches

    require_dask()
    return plan.finish(plan.truncate(run_batches(plan, client, tasks, close=isinstance(client, str))))


__all__ = ["BatchLaplace", "GLMMBootstrapPlan", "GLMMBootstrapResult", "GLMMDesign", "glmm_bootstrap_lrt",
           "glmm_bootstrap_plan", "minimize", "pairwise_z"]
