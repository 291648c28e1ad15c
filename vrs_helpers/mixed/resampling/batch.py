"""Many responses on one design at once: the profiled deviance of a random-intercept model for a batch of
responses, each at its own variance parameters, and a batched optimizer (for the parametric bootstrap).

Model (lme4 JSS eq. 34 / 41; :mod:`.deviance`): X and Z are fixed, only Z'y, X'y and y'y change from one response
to the next. In the relative variances psi_k = theta_k^2 (Psi = diag over the non-largest terms' levels) and with
the largest ("big") term's A = I + psi_big diag(n_big), W = C - psi_big B'A^-1 B (C = Z_o'Z_o, B = Z_big'Z_o),
R~ = Z_o'[X y] - psi_big B'A^-1 Z_big'[X y]:

    log|L|^2 = log|A| + log|I + Psi W|,
    P = [X y]'V*^-1[X y] = [X y]'[X y] - psi_big [X y]'Z_big A^-1 Z_big'[X y] - R~' (I + Psi W)^-1 Psi R~,

which is :class:`.deviance.Deviance` written without square roots of psi (Lambda S^-1 Lambda = (I + Psi W)^-1 Psi,
det S = det(I + Psi W)): the deviance is analytic in psi, so central differences may step just below 0 at the
boundary. B is factored once (its SVD; in a balanced crossed design its rank is 1) and the sums over the big
term's levels are grouped by their row counts (:class:`BatchDeviance`), so one evaluation costs
O(distinct counts x rank^2 + q_o^3) per response, all responses in a few stacked array operations.

:func:`minimize` is a projected Newton method on psi >= 0 with finite-difference derivatives (:mod:`.numdiff`);
it returns, per response, the minimum and whether it converged (a response that did not is refitted by the
engine's optimizer).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse

from ..likelihood.deviance import Deviance
from ..structure import numdiff
from ..structure.design import SufficientStats
from .simulate import ModelView


class BatchDeviance:
    """The profiled deviance of a random-intercept model for a batch of responses (module docstring).

    ``view`` locates the model's F'y columns in the simulated design's draws (:class:`.simulate.ModelView`).
    ``evaluate(psi, y)`` with psi (B x K, the formula's term order) and y from :meth:`responses`.

    A = I + psi_big diag(n_big) depends on a level of the big term only through its row count, so every sum over
    those levels is grouped by the distinct counts once (per batch for the response parts): an evaluation then
    costs O(distinct counts x rank^2 + q_o^3) per response, independent of the number of big levels.
    """

    def __init__(self, view: ModelView, reml: bool = False):
        s: SufficientStats = view.s
        self.s, self.reml, self.view = s, reml, view
        dev = Deviance(s, reml)  # the engine's structure: which term is big, C, B, the level order of the others
        self.big, self.others, self.q_o = dev.big, dev.others, dev.q_o
        self.K = len(s.terms)
        self.n, self.p = s.n, s.p
        self.lam_index = dev.lam_index
        p = s.p
        self.counts, group = np.unique(dev.n_big, return_inverse=True)
        U = len(self.counts)
        self.group = sparse.csr_matrix((np.ones(len(group)), (group, np.arange(len(group)))),
                                       shape=(U, len(group)))  # distinct count x big level
        self.n_per = np.asarray(self.group.sum(axis=1)).ravel()
        ZbX = np.ascontiguousarray(dev.RbT[:p])  # p x m_b
        self.ZbX = ZbX
        self.XX = self._grouped(ZbX, ZbX)  # U x p x p
        self.ZoX = np.ascontiguousarray(dev.Ro[:, :p]) if self.q_o else np.zeros((0, p))
        self.XtX = s.XtX.copy()
        self.C = dev.C
        self.eye = np.eye(self.q_o)
        if self.q_o:
            # Z_o'Z_big = Ur Vr with orthonormal rows Vr: from the eigen-decomposition of the q_o x q_o Gram matrix
            # (directions below 1e-7 of the largest singular value are rounding: their share of H0 is < 1e-14)
            BT = dev.BT
            gram = np.asarray((BT @ BT.T).toarray() if sparse.issparse(BT) else BT @ BT.T)
            lam, U_ = np.linalg.eigh(gram)
            keep = lam > 1e-14 * max(float(lam[-1]), 1e-300)
            self.Ur = U_[:, keep] * np.sqrt(lam[keep])
            self.Vr = np.ascontiguousarray(((U_[:, keep] / np.sqrt(lam[keep])).T @ BT) if not sparse.issparse(BT)
                                           else np.asarray((BT.T @ (U_[:, keep] / np.sqrt(lam[keep]))).T))
            self.VV = self._grouped(self.Vr, self.Vr)  # U x r x r
            self.VX = self._grouped(self.Vr, ZbX)  # U x r x p
            # C diagonal (one other term) and B of low rank: I + Psi W is diagonal plus low rank (Woodbury)
            off = self.C - np.diag(np.diag(self.C))
            self.woodbury = not off.any() and 2 * self.Vr.shape[0] < self.q_o
            self.c_diag = np.diag(self.C).copy()
        # mean rows per level: the scale of each psi (a step of 1e-4 / rows keeps I + psi n positive)
        self.scale = np.array([s.n / max(m, 1) for m in s.sizes], dtype=float)
        self.other_cols = np.concatenate([view.term_cols[k] for k in self.others]) if self.others \
            else np.zeros(0, dtype=np.int64)
        self.big_cols = view.term_cols[self.big]

    def _grouped(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per distinct count u: sum over the big levels l with that count of a_l b_l' (a: i x m, b: j x m)."""
        out = np.empty((len(self.counts), a.shape[0], b.shape[0]))
        for u in range(len(self.counts)):
            idx = self.group.indices[self.group.indptr[u]:self.group.indptr[u + 1]]
            out[u] = a[:, idx] @ b[:, idx].T
        return out

    def responses(self, draws, index=None) -> tuple:
        """The response parts of the draws (rows ``index``) in this model's columns: per distinct count the sums of
        (Z_big'y) x (Z_big'X), (Z_big'y) x Vr and (Z_big'y)^2 over its levels, and Z_o'y, X'y, y'y."""
        F = draws.Fty if index is None else draws.Fty[index]
        yty = draws.yty if index is None else draws.yty[index]
        Zby = F[:, self.big_cols]
        nb, U = len(F), len(self.counts)
        yX = np.empty((nb, U, self.p))
        yV = np.empty((nb, U, self.Vr.shape[0] if self.q_o else 0))
        yy = np.empty((nb, U))
        for u in range(U):
            idx = self.group.indices[self.group.indptr[u]:self.group.indptr[u + 1]]
            z = Zby[:, idx]
            yX[:, u] = z @ self.ZbX[:, idx].T
            if self.q_o:
                yV[:, u] = z @ self.Vr[:, idx].T
            yy[:, u] = np.einsum("bm,bm->b", z, z)
        return yX, yV, yy, F[:, self.other_cols], F[:, self.view.fixed_cols], yty

    def evaluate(self, psi: np.ndarray, y: tuple) -> np.ndarray:
        """Deviance (ML: -2 log L; REML: the REML criterion) per response; inf where it is not defined. Large
        batches are evaluated in chunks of at most about 2e7 numbers per temporary array."""
        psi = np.atleast_2d(psi)
        per = (self.q_o + 1) * (self.q_o + self.p + 1) + len(self.counts) * (self.p + 1) ** 2
        step = max(1, 20_000_000 // per)
        if len(psi) <= step:
            return self._evaluate(psi, y)
        return np.concatenate([self._evaluate(psi[a:a + step], tuple(v[a:a + step] for v in y))
                               for a in range(0, len(psi), step)])

    def _evaluate(self, psi: np.ndarray, y: tuple) -> np.ndarray:
        yX, yV, yy, Zoy, Xty, yty = y
        B, p, n = len(psi), self.p, self.n
        pb = psi[:, self.big]
        A = 1.0 + pb[:, None] * self.counts[None, :]  # B x U
        bad = (A <= 0).any(axis=1)
        A = np.where(A > 0, A, 1.0)
        invA = 1.0 / A
        logdet = np.log(A) @ self.n_per
        XAX = (invA @ self.XX.reshape(len(self.counts), -1)).reshape(B, p, p)
        XAy = np.einsum("bu,bup->bp", invA, yX)
        P11 = self.XtX[None] - pb[:, None, None] * XAX
        P12 = Xty - pb[:, None] * XAy
        P22 = yty - pb * np.einsum("bu,bu->b", invA, yy)
        if self.q_o:
            r = self.Vr.shape[0]
            Kr = (invA @ self.VV.reshape(len(self.counts), -1)).reshape(B, r, r)
            BAX = self.Ur @ (invA @ self.VX.reshape(len(self.counts), -1)).reshape(B, r, p)
            BAy = np.einsum("bu,bur->br", invA, yV) @ self.Ur.T
            po = psi[:, self.lam_index]
            Rt = np.concatenate([self.ZoX[None] - pb[:, None, None] * BAX,
                                 (Zoy - pb[:, None] * BAy)[:, :, None]], axis=2)
            if self.woodbury:
                X, ld, ok = self._woodbury(po, pb[:, None, None] * Kr, po[:, :, None] * Rt)
                bad |= ~ok
            else:
                H0 = self.Ur @ Kr @ self.Ur.T  # Z_o'Z_big A^-1 Z_big'Z_o per response
                M = self.eye[None] + po[:, :, None] * (self.C[None] - pb[:, None, None] * H0)
                sign, ld = np.linalg.slogdet(M)
                bad |= sign <= 0
                M[bad] = self.eye
                X = np.linalg.solve(M, po[:, :, None] * Rt)
            Q = np.swapaxes(Rt, 1, 2) @ X
            Q = 0.5 * (Q + np.swapaxes(Q, 1, 2))
            logdet = logdet + np.where(bad, 0.0, ld)
            P11 = P11 - Q[:, :p, :p]
            P12 = P12 - Q[:, :p, p]
            P22 = P22 - Q[:, p, p]
        if p:
            sign_x, ld_x = np.linalg.slogdet(P11)
            bad |= sign_x <= 0
            P11 = np.where(bad[:, None, None], np.eye(p)[None], P11)
            r2 = P22 - np.einsum("bp,bp->b", P12, np.linalg.solve(P11, P12[:, :, None])[:, :, 0])
        else:
            ld_x, r2 = np.zeros(B), P22
        bad |= ~(r2 > 0)
        r2 = np.where(bad, 1.0, r2)
        if self.reml:
            dof = n - p
            dev = logdet + ld_x + dof * (1.0 + np.log(2.0 * math.pi * r2 / dof))
        else:
            dev = logdet + n * (1.0 + np.log(2.0 * math.pi * r2 / n))
        return np.where(bad, np.inf, dev)


    def _woodbury(self, po, J, rhs):
        """(I + Psi W)^-1 rhs and log det(I + Psi W) for W = diag(c) - Ur J Ur' (J = psi_big Kr, r x r): with
        D = I + Psi diag(c), P = Psi Ur, (D - P J Ur')^-1 = D^-1 + D^-1 P J (I - Ur'D^-1 P J)^-1 Ur'D^-1 and
        det = det D det(I - J Ur'D^-1 P) (push-through identity, matrix determinant lemma): O(q_o r^2)."""
        D = 1.0 + po * self.c_diag[None, :]  # B x q_o
        ok = (D > 0).all(axis=1)
        D = np.where(D > 0, D, 1.0)
        P = po[:, :, None] * self.Ur[None]  # B x q_o x r
        DinvP = P / D[:, :, None]
        UDP = self.Ur.T[None] @ DinvP  # r x r per response: Ur'D^-1 P
        r = J.shape[1]
        inner = np.eye(r)[None] - UDP @ J  # I - Ur'D^-1 P J
        sign, ld_inner = np.linalg.slogdet(inner)
        ok &= sign > 0
        inner = np.where(ok[:, None, None], inner, np.eye(r)[None])
        Dr = rhs / D[:, :, None]
        X = Dr + DinvP @ (J @ np.linalg.solve(inner, self.Ur.T[None] @ Dr))
        return X, np.log(D).sum(axis=1) + np.where(ok, ld_inner, 0.0), ok


def minimize(bd: BatchDeviance, y: tuple, psi0: np.ndarray, max_iter: int = 100, tol: float = 1e-12):
    """Minimize the deviance of every response over psi >= 0 (projected Newton, finite differences).

    Returns (psi, deviance, converged) per response. Converged: the Newton decrement on the free components is
    below ``tol`` times (1 + |deviance|), the components on the boundary have a non-negative gradient, or no step
    along the Newton direction lowers the deviance (the minimum within rounding).
    """
    B = len(y[3])
    K = bd.K
    psi = np.clip(np.broadcast_to(np.asarray(psi0, dtype=float), (B, K)).copy(), 0.0, None)
    f = bd.evaluate(psi, y)
    done = ~np.isfinite(f)
    converged = np.zeros(B, dtype=bool)
    for _ in range(max_iter):
        act = np.flatnonzero(~done)
        if not len(act):
            break
        ya = tuple(v[act] for v in y)
        pa, fa = psi[act], f[act]
        h = 1e-4 * np.maximum(pa, 1.0 / bd.scale[None, :])
        g, H = numdiff.derivatives(lambda x, ya=ya: bd.evaluate(x, ya), pa, h, fa)
        ok = np.isfinite(g).all(axis=1) & np.isfinite(H).all(axis=(1, 2))
        fixed = (pa <= 0) & (g >= 0)
        g_f = np.where(fixed, 0.0, np.where(np.isfinite(g), g, 0.0))
        Hf = np.where(np.isfinite(H), H, 0.0)
        Hf = np.where(fixed[:, :, None] | fixed[:, None, :], 0.0, Hf)
        Hf[:, np.arange(K), np.arange(K)] += fixed  # identity on the fixed components
        lam, V = np.linalg.eigh(Hf)
        floor = 1e-8 * np.maximum(np.abs(lam).max(axis=1, keepdims=True), 1e-300)
        lam = np.maximum(np.abs(lam), floor)
        d = -np.einsum("bij,bj->bi", V, np.einsum("bji,bj->bi", V, g_f) / lam)
        d = np.where(fixed, 0.0, d)
        decrement = -np.einsum("bi,bi->b", g_f, d)
        small = decrement <= tol * (1.0 + np.abs(fa))
        converged[act[ok & small]] = True
        done[act[(ok & small) | ~ok]] = True
        move = np.flatnonzero(ok & ~small)
        if not len(move):
            continue
        t = np.ones(len(move))
        pending = np.arange(len(move))
        ym = tuple(v[move] for v in ya)
        for _ in range(40):
            cand = np.clip(pa[move[pending]] + t[pending, None] * d[move[pending]], 0.0, None)
            fc = bd.evaluate(cand, tuple(v[pending] for v in ym))
            better = fc < fa[move[pending]]
            idx = act[move[pending[better]]]
            psi[idx], f[idx] = cand[better], fc[better]
            pending = pending[~better]
            if not len(pending):
                break
            t[pending] /= 2
        stuck = act[move[pending]]  # no decrease along the direction: a minimum within rounding
        converged[stuck] = True
        done[stuck] = True
    return psi, f, converged
