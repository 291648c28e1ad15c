"""The profiled deviance of a linear mixed model as a function of theta (lme4 JSS eq. 34 for ML, eq. 41 for REML).

Model (book appendix A; Bates et al. 2015): y = X beta + Z b + eps, b = Lambda_theta u, u ~ N(0, sigma^2 I),
eps ~ N(0, sigma^2 I). Everything below needs only the sufficient statistics of :mod:`.accumulate`.

M = Lambda'Z'Z Lambda + I is split as MixedModels.jl does (Bates, "MixedModels.jl", blocked Cholesky): the term
with the most levels ("big") gives a block-diagonal block A (m_b blocks of r_b x r_b; diagonal for a random
intercept); the other terms a dense block C; the cross block B between them is kept sparse. Then
L = [[L_A, 0], [B L_A^-T, L_S]] with L_S L_S' = S = C - B A^-1 B', so one evaluation costs about nnz(B) (times
the block size) for B A^-1 B' plus a dense Cholesky of the other terms' levels - never the big factor's.

Two implementations share that structure:
- :class:`Deviance` for random intercepts only, with an analytic gradient (the book's models; fast path);
- :class:`BlockDeviance` for any random terms (random slopes with lme4's lower-triangular theta), also with an
  analytic gradient (:meth:`BlockDeviance.gradient`); its per-level r x r blocks of the big term are stacks with
  the levels last (:mod:`.stacks`). On random-intercept models both give the same deviance (tested).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg, sparse

from ..structure import stacks as st
from ..structure.dense_blocks import DenseBlocks as _DenseBlocks
from ..structure.design import SufficientStats, lower_triangle
from ..structure.errors import MixedModelError
from ..structure.pair_sums import PairSums as _PairSums
from .big_levels import BigWeighted, cross_scaled, gram
from .diagonal_first import MIN_LEVELS as _DIAG_MIN_LEVELS
from .diagonal_first import DiagonalFirst

_potrf = linalg.lapack.get_lapack_funcs("potrf", (np.zeros(1),))
_potri = linalg.lapack.get_lapack_funcs("potri", (np.zeros(1),))
_trtrs = linalg.lapack.get_lapack_funcs("trtrs", (np.zeros(1),))

#: dense blocks up to this size keep Z_o'Z_b A^-1 Z_b'Z_o beside S for the gradient (a second q_o^2 array)
KEEP_SANDWICH_LEVELS = 8_000
DENSE_OTHERS_LIMIT = 25_000  # levels x coefficients of the non-largest terms factored densely (25k^2 doubles = 5 GB)


def _chol(a: np.ndarray, lower: bool) -> np.ndarray:
    """Cholesky factor via LAPACK potrf (the scipy wrapper's overhead dominates for the small blocks here)."""
    c, info = _potrf(a, lower=int(lower), clean=1)
    if info != 0:
        raise linalg.LinAlgError(f"matrix not positive definite (potrf info {info})")
    return c


def _chol_in_place(S: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor of a symmetric, C-ordered S, written over S (S' is S in Fortran order: LAPACK
    factors it without a copy; the factor is Fortran-ordered, as :func:`_chol` returns it)."""
    c, info = _potrf(S.T, lower=1, clean=1, overwrite_a=1)
    if info != 0:
        raise linalg.LinAlgError(f"matrix not positive definite (potrf info {info})")
    return c


def tri_solve(t: np.ndarray, b: np.ndarray, lower: bool, trans: bool = False) -> np.ndarray:
    """Solve t x = b (or t' x = b) for triangular t via LAPACK trtrs (or a :class:`.diagonal_first.DiagonalFirst`
    factor, lower)."""
    if isinstance(t, DiagonalFirst):
        return t.solve(b, trans=trans)
    x, info = _trtrs(t, b, lower=int(lower), trans=int(trans))
    if info != 0:
        raise linalg.LinAlgError(f"singular triangular factor (trtrs info {info})")
    return x


def _chol_inverse_lower(L: np.ndarray) -> np.ndarray:
    """The lower triangle of S^-1 (zeros above the diagonal) from the lower Cholesky factor L of S (LAPACK potri,
    without the copy into the upper triangle that :func:`chol_inverse` makes)."""
    inv, info = _potri(L, lower=1)
    if info != 0:
        raise linalg.LinAlgError(f"singular Cholesky factor (potri info {info})")
    return inv


def _symmetric_inner(lower: np.ndarray, H: np.ndarray) -> float:
    """sum(S * H) for symmetric S given by its lower triangle ``lower`` (zeros above) and symmetric H: the strictly
    lower part counts twice."""
    return 2.0 * float(np.vdot(lower, H)) - float(np.diag(lower) @ np.diag(H))


def chol_inverse(L: np.ndarray) -> np.ndarray:
    """S^-1 from the lower Cholesky factor L of S (LAPACK potri: a third of the cost of two triangular solves)."""
    inv, info = _potri(L, lower=1)
    if info != 0:
        raise linalg.LinAlgError(f"singular Cholesky factor (potri info {info})")
    inv = np.tril(inv)
    return inv + np.tril(inv, -1).T


def _as_cross(G: sparse.spmatrix) -> np.ndarray | sparse.csr_matrix:
    """Keep a cross block sparse unless it is tiny or dense enough that BLAS wins.

    A dense G diag(d) G' costs q^2 m flops; the listed pairs (:class:`_PairSums`) cost about nnz(G)^2 / m. In a
    nested or sparsely crossed design (items x raters with item:rater the largest term: two nonzeros per column)
    the pairs are thousands of times fewer.
    """
    size = G.shape[0] * G.shape[1]
    if size <= 20_000 or G.nnz > 0.25 * size:
        return G.toarray()
    return sparse.csr_matrix(G)


def _sandwich(G, d: np.ndarray) -> np.ndarray:
    """G diag(d) G' as a dense array, for dense or sparse G (cost follows nnz for sparse G)."""
    if sparse.issparse(G):
        return (G @ sparse.diags(d) @ G.T).toarray()
    return (G * d) @ G.T


def _sandwich_blocks(G, D: np.ndarray) -> np.ndarray:
    """G blockdiag(D_1..D_m) G' as a dense array; D is m x r x r, G has m r columns (level-major)."""
    m, r, _ = D.shape
    if r == 1:
        return _sandwich(G, D[:, 0, 0])
    if sparse.issparse(G):
        Dm = sparse.bsr_matrix((D, np.arange(m), np.arange(m + 1)), shape=(m * r, m * r))
        return (G @ Dm @ G.T).toarray()
    # G blockdiag(D): r^2 elementwise products of q x m slices (numpy's einsum loops over this ~10x slower)
    G3 = G.reshape(G.shape[0], m, r)
    GD = np.empty_like(G3)
    for j in range(r):
        acc = G3[:, :, 0] * D[:, 0, j]
        for i in range(1, r):
            acc += G3[:, :, i] * D[:, i, j]
        GD[:, :, j] = acc
    return GD.reshape(G.shape[0], m * r) @ G.T


def _cross(s: SufficientStats, k: int, j: int):
    """Z_k'Z_j from the stored upper blocks (sparse)."""
    return s.ZtZ_cross[(k, j)] if k < j else s.ZtZ_cross[(j, k)].T


def _fill_other_crosses(s: SufficientStats, others: list[int], slices: dict, M: np.ndarray) -> None:
    """Write the cross blocks Z_k'Z_j between the non-largest terms into the dense matrix M (both triangles)."""
    for i, k in enumerate(others):
        for j in others[i + 1:]:
            blk = _cross(s, k, j).toarray()
            M[slices[k], slices[j]] = blk
            M[slices[j], slices[k]] = blk.T


def _check_size(q_o: int, names: list[str]) -> None:
    if q_o > DENSE_OTHERS_LIMIT:
        raise MixedModelError(
            f"The random terms other than the largest one ({', '.join(names)}) have {q_o} levels x coefficients in "
            f"total; their block is factored densely ({q_o}^2 x 8 bytes = {q_o * q_o * 8 / 1e9:.1f} GB). This engine "
            f"fits one very large grouping factor plus others up to {DENSE_OTHERS_LIMIT} levels in total.")


def _profiled(s: SufficientStats, P: np.ndarray, logdet: float, reml: bool):
    """The profiled deviance from P = [X y]'V*^-1[X y] (as cross-products) and log|L|^2: (dev, RX, cbeta, r2)."""
    p, n = s.p, s.n
    if p:
        RX = _chol(P[:p, :p], lower=False)
        cbeta = tri_solve(RX, P[:p, p], lower=False, trans=True)
        r2 = float(P[p, p] - cbeta @ cbeta)
        logdet_x = 2.0 * float(np.log(np.diag(RX)).sum())
    else:
        RX, cbeta, r2, logdet_x = np.zeros((0, 0)), np.zeros(0), float(P[0, 0]), 0.0
    if not r2 > 0:
        return np.inf, RX, cbeta, r2
    if reml:
        dof = n - p
        dev = logdet + logdet_x + dof * (1.0 + math.log(2.0 * math.pi * r2 / dof))
    else:
        dev = logdet + n * (1.0 + math.log(2.0 * math.pi * r2 / n))
    return dev, RX, cbeta, r2


def _last_evaluation(dev, theta, compute):
    """``compute(theta)``, or the result for the same theta the last call made (the fit evaluates the optimizer's
    last point again for its estimates: one dense factorization less; the parts are not changed by their users)."""
    theta = np.asarray(theta, dtype=float)
    key = theta.tobytes()
    last = dev.__dict__.pop("_last", None)
    if last is not None and last[0] == key:
        dev._last = last
        return last[1]
    del last  # the old parts go before the new ones are made (less memory at its peak)
    out = compute(theta)
    dev._last = (key, out)
    return out


def _diagonal_term(s: SufficientStats, big: int, others: list[int]) -> int | None:
    """The other term whose block of the dense matrix S is diagonal - every level of the largest term lies in one
    of its levels (nested) and no row holds two of its levels (an intercept) - with the most levels, if it has at
    least :data:`.diagonal_first.MIN_LEVELS` (:mod:`.diagonal_first`), else None."""
    best = None
    for k in others:
        if s.sizes[k] < _DIAG_MIN_LEVELS or (best is not None and s.sizes[k] <= s.sizes[best]):
            continue
        G = sparse.csc_matrix(_cross(s, k, big))  # levels of k x levels of the largest term
        if (np.diff(G.indptr) <= 1).all():
            best = k
    return best


class Deviance:
    """Profiled deviance of a random-intercept model, with its analytic gradient.

    Lambda = diag(theta_k) per grouping factor. A = theta_b^2 diag(n_b) + I is diagonal; B = Lambda_o Z_o'Z_b
    theta_b; S = Lambda_o C Lambda_o + I - theta_b^2 Lambda_o (Z_o'Z_b A^-1 Z_b'Z_o) Lambda_o. Arrays over the big
    factor's levels are stored wide (levels last).
    """

    def __init__(self, s: SufficientStats, reml: bool):
        if not s.intercepts_only:
            raise MixedModelError("Deviance fits random intercepts only; use BlockDeviance.")
        self.s = s
        self.reml = reml
        sizes = s.sizes
        self.big = int(np.argmax(sizes))
        self.others = [k for k in range(len(sizes)) if k != self.big]
        # a term whose block of S is diagonal goes first and is eliminated before the dense factorization
        self.diagonal_first = _diagonal_term(s, self.big, self.others)
        if self.diagonal_first is not None:
            self.others.remove(self.diagonal_first)
            self.others.insert(0, self.diagonal_first)
        self.n_diag = sizes[self.diagonal_first] if self.diagonal_first is not None else 0
        self.n_big = np.ascontiguousarray(s.ZtZ_diag[self.big][:, 0, 0], dtype=float)
        offs = np.cumsum([0] + [sizes[k] for k in self.others])
        self.q_o = int(offs[-1])
        _check_size(self.q_o, [s.groups[k] for k in self.others])
        self.slices = {k: slice(offs[i], offs[i + 1]) for i, k in enumerate(self.others)}
        blocks_b = [_cross(s, k, self.big) for k in self.others]
        # Z_o'Z_o: with one other term its diagonal (the dense matrix is made when first asked for: :attr:`C`)
        self.diagC = (np.concatenate([s.ZtZ_diag[k][:, 0, 0] for k in self.others]).astype(float) if self.others
                      else np.zeros(0))
        self._C = None
        if len(self.others) > 1:
            self._C = self.C
            _fill_other_crosses(s, self.others, self.slices, self._C)
        # Z_o'Z_big: sparse when large (each row of the data links one level of each factor)
        self.BT = (_as_cross(sparse.vstack(blocks_b, format="csr")) if self.others
                   else np.zeros((0, sizes[self.big])))
        self.BT2 = self.BT.multiply(self.BT).tocsr() if sparse.issparse(self.BT) else self.BT * self.BT
        self.bdb = (_PairSums(self.BT) if sparse.issparse(self.BT) and _PairSums.pairs(self.BT) <= _PairSums.LIMIT
                    else _DenseBlocks(self.BT, 1) if not sparse.issparse(self.BT)
                    else lambda d: _sandwich(self.BT, d))  # B diag(d) B'
        p = s.p
        self.RbT = np.ascontiguousarray(np.column_stack([s.ZtX[self.big], s.Zty[self.big]]).T)  # (p+1) x m_b
        # the same, sparse where it is (a system:item level meets the intercept and its own system's column): the
        # per-evaluation products over the big levels then cost its nonzeros, not (p+1) m_b (issue 54)
        self.Rb = (sparse.csr_matrix(self.RbT) if np.count_nonzero(self.RbT) < 0.25 * self.RbT.size
                   else self.RbT)
        self.Ro = (np.vstack([np.column_stack([s.ZtX[k], s.Zty[k]]) for k in self.others])
                   if self.others else np.zeros((0, p + 1)))
        self.MtM = np.block([[s.XtX, s.Xty[:, None]], [s.Xty[None, :], np.array([[s.yty]])]])
        self.lam_index = (np.concatenate([[k] * sizes[k] for k in self.others]).astype(int) if self.others
                          else np.zeros(0, dtype=int))
        self.eye_p = np.eye(p)
        self._memo: dict = {}

    @property
    def C(self) -> np.ndarray:
        """Z_o'Z_o as a dense q_o x q_o array."""
        if self._C is not None:
            return self._C
        C = np.zeros((self.q_o, self.q_o))
        C[np.diag_indices_from(C)] = self.diagC
        return C

    def other_times(self, M: np.ndarray, x: np.ndarray) -> np.ndarray:
        """M x for a symmetric q_o x q_o M over the other levels whose leading block is diagonal where S's is
        (:attr:`diagonal_first`: C, Z_o'Z_b D Z_b'Z_o): n1 q2 k work for that block instead of n1^2 k."""
        n1 = self.n_diag
        if not n1:
            return M @ x
        out = np.empty((M.shape[0], x.shape[1]))
        out[:n1] = np.diag(M)[:n1, None] * x[:n1] + M[:n1, n1:] @ x[n1:]
        out[n1:] = M[n1:, :n1] @ x[:n1] + M[n1:, n1:] @ x[n1:]
        return out

    def C_times(self, x: np.ndarray) -> np.ndarray:
        """Z_o'Z_o x for a q_o x k array x (with one other term a scaling by its diagonal: the same numbers; sparse
        where Z_o'Z_o is: items x runs of a leaderboard)."""
        if self._C is None:
            return self.diagC[:, None] * x
        if self.n_diag:
            return self.other_times(self._C, x)
        if "_C_sparse" not in self.__dict__:
            self._C_sparse = (sparse.csr_matrix(self._C) if np.count_nonzero(self._C) < 0.25 * self._C.size
                              else None)
        return (self._C if self._C_sparse is None else self._C_sparse) @ x

    def parts(self, theta: np.ndarray):
        p = self.s.p
        tb = theta[self.big]
        A = tb * tb * self.n_big + 1.0
        sqA = np.sqrt(A)
        lam = theta[self.lam_index]
        invA = 1.0 / A
        if self.q_o:
            # S = lam (C - tb^2 Z_o'Z_b A^-1 Z_b'Z_o) lam + I, built and factored in one q_o^2 array: a fresh one
            # costs about as much as the factorization in a process's first fit (its pages are new)
            # H1 = Z_o'Z_b A^-1 Z_b'Z_o is kept for the gradient's solves where it is small enough to keep twice
            H1 = self.bdb(invA)
            if self.q_o <= KEEP_SANDWICH_LEVELS:
                S = H1 * (-(tb * tb))
            else:
                S, H1 = H1, None
                S *= -(tb * tb)
            if self._C is None:
                S[np.diag_indices_from(S)] += self.diagC
            else:
                S += self._C
            S *= lam[:, None]
            S *= lam[None, :]
            S[np.diag_indices_from(S)] += 1.0
            if self.n_diag:
                LS = DiagonalFirst(S, self.n_diag)
                half_logdet = LS.log_diagonal_sum()
            else:
                LS = _chol_in_place(S)
                half_logdet = float(np.log(np.diag(LS)).sum())
            BRA = cross_scaled(self.BT, self.Rb, invA)  # Z_o'Z_b A^-1 Z_b'[X y]: q_o x (p+1)
            co = tri_solve(LS, lam[:, None] * (self.Ro - (tb * tb) * BRA), lower=True)
            logdet = float(np.log(A).sum()) + 2.0 * half_logdet
        else:
            LS, BRA, H1 = np.zeros((0, 0)), np.zeros((0, p + 1)), None
            co = np.zeros((0, p + 1))
            logdet = float(np.log(A).sum())
        # c_b c_b' with c_b = tb A^-1/2 Z_b'[X y] (never formed: (p+1) x m_b)
        P = self.MtM - (tb * tb) * gram(self.Rb, invA) - co.T @ co
        return A, sqA, lam, BRA, LS, H1, co, P, logdet

    def __call__(self, theta: np.ndarray) -> float:
        try:
            value = self.evaluate(theta)[0]
        except (linalg.LinAlgError, ValueError, FloatingPointError):
            return np.inf
        return value if np.isfinite(value) else np.inf

    def _value_psi(self, theta: np.ndarray):
        """(deviance, psi-gradient) at theta, remembered for the last few points: the optimizer, the boundary check
        and the Newton polish ask for the same point more than once, and on large designs one gradient costs an
        inverse of the dense block (:func:`chol_inverse`)."""
        theta = np.asarray(theta, dtype=float)
        key = theta.tobytes()
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        try:
            value, parts = self.evaluate(theta)
            if parts is None or not np.isfinite(value):
                out = (np.inf, None)
            else:
                out = (value, self.gradient(theta, parts, per_psi=True))
        except (linalg.LinAlgError, ValueError, FloatingPointError):
            out = (np.inf, None)
        if len(self._memo) >= 8:
            self._memo.pop(next(iter(self._memo)))
        self._memo[key] = out
        return out

    def value_and_grad(self, theta: np.ndarray):
        value, g_psi = self._value_psi(theta)
        if g_psi is None:
            return np.inf, np.zeros_like(np.asarray(theta, dtype=float))
        return value, 2.0 * np.asarray(theta, dtype=float) * g_psi

    def psi_gradient(self, theta: np.ndarray) -> np.ndarray:
        """Gradient in psi = theta^2 (relative variances); unlike the theta-gradient it is not 0 at theta_k = 0."""
        value, g_psi = self._value_psi(theta)
        if g_psi is None:
            raise MixedModelError("the deviance is not finite at this theta")
        return g_psi

    def evaluate(self, theta):
        return _last_evaluation(self, theta, self._evaluate)

    def _evaluate(self, theta):
        parts = self.parts(theta)
        dev, RX, cbeta, r2 = _profiled(self.s, parts[7], parts[8], self.reml)
        if not np.isfinite(dev):
            return np.inf, None
        return dev, parts + (RX, cbeta, r2)

    def gradient(self, theta, parts, per_psi: bool = False) -> np.ndarray:
        """Analytic gradient of the profiled deviance (envelope theorem on the unprofiled -2 log-likelihood).

        With V* = I + Z Lambda Lambda' Z' and dV*/dtheta_k = 2 theta_k Z_k Z_k':
        d/dtheta_k = 2 theta_k [tr(Z_k' V*^-1 Z_k) - tr((X'V*^-1 X)^-1 Q_k'Q_k) (REML only) - |u_k|^2 / sigma^2],
        Q = Z'V*^-1 X, u = Z'V*^-1 (y - X beta). Traces use tr_k(Z'V*^-1 Z) = tr_k(G) - |L^-1 Lambda G_k|_F^2.
        The bracket is the derivative in psi_k = theta_k^2.
        """
        s = self.s
        A, sqA, lam, BRA, LS, H1, co, P, logdet, RX, cbeta, r2 = parts
        p = s.p
        tb = theta[self.big]
        K = len(theta)
        tr = np.zeros(K)
        xb = (tb * self.n_big) / sqA
        invA = 1.0 / A
        # Z'V*^-1 [X y] = a - G Lambda M^-1 Lambda a, with M^-1 Lambda a = L^-T [cb; co]
        if self.q_o:
            # big block: |L_S^-1 (lam B'/A)|_F^2 = tr(S^-1 H), H = lam (B' A^-2 B) lam
            # its lower triangle: tr(S^-1 H) needs no more (with a diagonal first block H's is diagonal too: of S^-1's
            # only the diagonal, :mod:`.diagonal_first`)
            Sinv = (LS.inverse_lower(first_block_diagonal_only=True) if isinstance(LS, DiagonalFirst)
                    else _chol_inverse_lower(LS))
            diag_Sinv = np.diag(Sinv).copy()
            # B A^-2 B': made once where REML's W_b gram needs it too (:meth:`BigWeighted.gram`)
            H2 = self.bdb(invA * invA) if (self.reml and p) or not isinstance(self.bdb, _PairSums) else None
            if H2 is None:
                tr_SH = self.bdb.inner_lower(Sinv, invA * invA, lam)
            else:
                H = H2 * lam[:, None]
                H *= lam[None, :]
                tr_SH = _symmetric_inner(Sinv, H)
                del H
            tr[self.big] = self.n_big.sum() - float(xb @ xb) - tr_SH
            colsq_b = (tb * tb) * (self.BT2 @ invA)
            # |L_S^-1 lam W e_j|^2 with S = lam W lam + I: (S - 2I + S^-1)_jj / lam_j^2 (no solve); for the columns
            # of a term near the boundary (lam_j <= 1e-3) the division loses precision: solved for those columns only
            if isinstance(LS, DiagonalFirst):
                dS = LS.row_squares()
            else:
                S = LS @ LS.T if self.q_o < 64 else None
                dS = np.einsum("ij,ij->i", LS, LS) if S is None else np.diag(S)
            near = lam <= 1e-3
            safe = np.where(near, 1.0, lam)
            colsq = colsq_b + np.where(near, 0.0, (dS - 2.0 + diag_Sinv) / (safe * safe))
            if near.any():
                cols = np.flatnonzero(near)
                W_cols = self.C[:, cols] - (tb * tb) * (self.bdb(invA) if H1 is None else H1)[:, cols]
                xo_o = tri_solve(LS, np.ascontiguousarray(lam[:, None] * W_cols), lower=True)
                colsq[cols] += (xo_o * xo_o).sum(axis=0)
            for k in self.others:
                sl = self.slices[k]
                tr[k] = self.diagC[sl].sum() - colsq[sl].sum()
        else:
            tr[self.big] = self.n_big.sum() - float(xb @ xb)
            H2 = None
        Wb, Wo, ub, uo, beta, sigma2 = self.weighted_residuals(theta, parts)
        usq = np.zeros(K)
        usq[self.big] = float(ub @ ub)
        for k in self.others:
            usq[k] = float(uo[self.slices[k]] @ uo[self.slices[k]])
        t2 = np.zeros(K)
        if self.reml and p:
            Rinv = tri_solve(RX, self.eye_p, lower=False)  # (X'V*^-1X)^-1=Rinv Rinv'
            t2[self.big] = float((Wb.gram(p, H2) * (Rinv @ Rinv.T)).sum())  # |Rinv' W_b[:p]|_F^2
            if self.q_o:
                Qo = Wo[:, :p] @ Rinv
                for k in self.others:
                    t2[k] = float((Qo[self.slices[k]] ** 2).sum())
        g_psi = tr - t2 - usq / sigma2
        return g_psi if per_psi else 2.0 * theta * g_psi

    def weighted_residuals(self, theta, parts):
        """Z'V*^-1 [X y] as (Wb: the big levels' part, (p+1) x m_b, as a :class:`BigWeighted` that is never
        formed; Wo: q_o x (p+1)), u = Z'V*^-1 (y - X beta) as (ub, uo), beta and sigma^2: Z'V*^-1 = Z' - G Lambda
        M^-1 Lambda Z' with M^-1 Lambda Z'[X y] = L^-T [cb; co]. With lz_o = Lambda_o x_o (the other levels'
        solution), the big levels' part is W_b = (Z_b'[X y] - lz_o' Z_o'Z_b) A^-1 (its G-term cancels to that)."""
        A, sqA, lam, BRA, LS, H1, co, P, logdet, RX, cbeta, r2 = parts
        p, n, tb = self.s.p, self.s.n, theta[self.big]
        invA = 1.0 / A
        if self.q_o:
            lz_o = lam[:, None] * tri_solve(LS, co, lower=True, trans=True)
            # Z_o'Z_b lz_b with lz_b = tb^2 A^-1 (Z_b'[X y] - Z_b'Z_o lz_o)
            Go = (tb * tb) * (BRA - self.other_times(self.bdb(invA) if H1 is None else H1, lz_o)) + self.C_times(lz_o)
        else:
            lz_o, Go = np.zeros((0, p + 1)), np.zeros((0, p + 1))
        Wb = BigWeighted(self.Rb, self.BT, lz_o, invA, self.bdb, self.other_times)
        Wo = self.Ro - Go
        beta = tri_solve(RX, cbeta, lower=False) if p else np.zeros(0)
        c = np.append(-beta, 1.0)
        return Wb, Wo, Wb.combine(c), Wo @ c, beta, r2 / (n - p if self.reml else n)

    def conditional_modes(self, theta, parts, beta) -> list[np.ndarray]:
        """b = Lambda u with u = L^-T (c_u - R_ZX beta): the BLUPs per term (m_k x 1 arrays)."""
        A, sqA, lam, BRA, LS, _, co, P, logdet = parts[:9]
        p = self.s.p
        tb = theta[self.big]
        d_b = tb * (self.Rb.T @ np.append(-beta, 1.0)) / sqA  # c_b' [-beta; 1], c_b = tb A^-1/2 Z_b'[X y]
        d_o = co[:, p] - co[:, :p] @ beta
        u_o = tri_solve(LS, d_o, lower=True, trans=True) if self.q_o else np.zeros(0)
        u_b = (d_b - tb * (self.BT.T @ (lam * u_o)) / sqA) / sqA if self.q_o else d_b / sqA
        out = [None] * len(theta)
        out[self.big] = (tb * u_b)[:, None]
        b_o = lam * u_o
        for k in self.others:
            out[k] = b_o[self.slices[k]][:, None]
        return out


class BlockDeviance:
    """Profiled deviance for any random terms: term k has Lambda_k = I_{m_k} (x) T_k with T_k lower triangular
    (r_k x r_k), parametrized by its lower triangle in column-major order, as lme4's theta."""

    #: what the deviance keeps of the data (not of the method): made once per statistics object and shared by the
    #: deviances of its REML and ML fits and Kenward-Roger's test (none of them changes these arrays)
    _DATA = ("r", "tri", "tslices", "n_theta", "lower", "big", "others", "q_o", "slices", "Gb", "Go", "Gob", "gdg",
             "Rb", "eye_b", "Ro", "MtM", "eye_o")

    def __init__(self, s: SufficientStats, reml: bool):
        self.s = s
        self.reml = reml
        self._memo: dict = {}
        made = s.__dict__.get("_block_deviance")
        if made is not None:
            self.__dict__.update(made)
            return
        self._build(s)
        s._block_deviance = {k: self.__dict__[k] for k in self._DATA}

    def _build(self, s: SufficientStats) -> None:
        sizes = s.sizes
        self.r = [t.r for t in s.terms]
        K = len(sizes)
        self.tri = []  # per term: (rows, cols) of the lower triangle, column-major (lme4's theta order)
        self.tslices = []
        start = 0
        lower = []
        for k in range(K):
            rows, cols = lower_triangle(self.r[k])
            self.tri.append((rows, cols))
            self.tslices.append(slice(start, start + len(rows)))
            start += len(rows)
            lower += [0.0 if rr == c else -np.inf for rr, c in zip(rows, cols, strict=True)]
        self.n_theta = start
        self.lower = np.array(lower)
        self.big = max(range(K), key=lambda k: (sizes[k], self.r[k]))
        self.others = [k for k in range(K) if k != self.big]
        widths = [sizes[k] * self.r[k] for k in range(K)]
        offs = np.cumsum([0] + [widths[k] for k in self.others])
        self.q_o = int(offs[-1])
        _check_size(self.q_o, [s.groups[k] for k in self.others])
        self.slices = {k: slice(offs[i], offs[i + 1]) for i, k in enumerate(self.others)}
        self.Gb = st.to_levels_last(s.ZtZ_diag[self.big])  # r_b x r_b x m_b: Z_b'Z_b per level (levels last)
        Go = np.zeros((self.q_o, self.q_o))
        blocks_b = []
        for k in self.others:
            mk, rk = sizes[k], self.r[k]
            idx = np.arange(mk)[:, None, None] * rk
            sl = self.slices[k]
            rr = sl.start + (idx + np.arange(rk)[None, :, None])
            cc = sl.start + (idx + np.arange(rk)[None, None, :])
            Go[rr, cc] = s.ZtZ_diag[k]
            blocks_b.append(_cross(s, k, self.big))
        _fill_other_crosses(s, self.others, self.slices, Go)
        self.Go = Go
        self.Gob = (_as_cross(sparse.vstack(blocks_b, format="csr")) if self.others
                    else np.zeros((0, widths[self.big])))
        rb = self.r[self.big]
        if sparse.issparse(self.Gob) and _PairSums.pairs(self.Gob, rb) <= _PairSums.LIMIT:
            self.gdg = _PairSums(self.Gob, rb)  # G_ob blockdiag(D) G_ob'
        else:
            self.gdg = (lambda D: _sandwich_blocks(self.Gob, D)) if sparse.issparse(self.Gob) else _DenseBlocks(
                self.Gob, rb)
            if getattr(self.gdg, "grouped", None) is not None:
                self.Gob = self.gdg.grouped  # equal rows stored once: its products read the distinct rows
        p = s.p
        rb = self.r[self.big]
        self.Rb = st.to_levels_last(np.column_stack([s.ZtX[self.big], s.Zty[self.big]]).reshape(
            sizes[self.big], rb, p + 1))  # r_b x (p+1) x m_b: Z_b'[X y] per level
        self.eye_b = st.eye(rb, sizes[self.big])
        self.Ro = (np.vstack([np.column_stack([s.ZtX[k], s.Zty[k]]) for k in self.others])
                   if self.others else np.zeros((0, p + 1)))
        self.MtM = np.block([[s.XtX, s.Xty[:, None]], [s.Xty[None, :], np.array([[s.yty]])]])
        self.eye_o = np.eye(self.q_o)

    def start(self) -> np.ndarray:
        """lme4's starting value: identity T_k (1 on the diagonal, 0 below)."""
        x = np.zeros(self.n_theta)
        for k in range(len(self.r)):
            rows, cols = self.tri[k]
            x[self.tslices[k]] = (rows == cols).astype(float)
        return x

    def lambdas(self, theta: np.ndarray) -> list[np.ndarray]:
        out = []
        for k, rk in enumerate(self.r):
            T = np.zeros((rk, rk))
            rows, cols = self.tri[k]
            T[rows, cols] = theta[self.tslices[k]]
            out.append(T)
        return out

    def _apply(self, X: np.ndarray, lams, transpose: bool) -> np.ndarray:
        """(blockdiag over the other terms of I (x) T_k) X, or with T_k' when transpose; X has q_o rows."""
        out = np.empty_like(X)
        for k in self.others:
            sl = self.slices[k]
            T = lams[k].T if transpose else lams[k]
            rk = self.r[k]
            if rk == 1:
                out[sl] = T[0, 0] * X[sl]
            else:
                blk = X[sl].reshape(-1, rk, X.shape[1])
                out[sl] = (T @ blk).reshape(-1, X.shape[1])
        return out

    def evaluate(self, theta: np.ndarray):
        """(deviance, parts) at theta; the big term's per-level blocks are stacks, levels last (:mod:`.stacks`)."""
        return _last_evaluation(self, theta, self._evaluate)

    def _evaluate(self, theta: np.ndarray):
        lams = self.lambdas(theta)
        Tb = lams[self.big]
        A = st.left(Tb.T, st.right(self.Gb, Tb)) + self.eye_b  # T_b' G_l T_b + I per level
        LA = st.cholesky(A)
        LAinv = st.lower_inverse(LA)
        logdet = 2.0 * float(np.log(np.diagonal(LA)).sum())
        TRb = st.left(Tb.T, self.Rb)  # T_b' R_b per level, r_b x (p+1) x m_b
        cb = st.mul(LAinv, TRb)
        Ainv = st.mul(st.transpose(LAinv), LAinv)
        if self.q_o:
            D = st.left(Tb, st.right(Ainv, Tb.T))  # T_b A_l^-1 T_b' per level
            W = self.Go - self.gdg(st.to_levels_first(D))
            LW = self._apply(W, lams, True)  # Lambda_o' W
            S = self._apply(LW.T, lams, True).T + self.eye_o
            LS = _chol(S, lower=True)
            ub = st.to_levels_first(st.left(Tb, st.mul(Ainv, TRb))).reshape(-1, TRb.shape[1])  # Lambda_b A^-1 T_b'R_b
            co = tri_solve(LS, self._apply(self.Ro - self.Gob @ ub, lams, True), lower=True)
            logdet += 2.0 * float(np.log(np.diag(LS)).sum())
        else:
            D = LW = None
            LS = np.zeros((0, 0))
            co = np.zeros((0, self.Rb.shape[1]))
        P = self.MtM - np.tensordot(cb, cb, axes=([0, 2], [0, 2])) - co.T @ co
        dev, RX, cbeta, r2 = _profiled(self.s, P, logdet, self.reml)
        if not np.isfinite(dev):
            return np.inf, None
        return dev, (lams, LA, LAinv, LS, cb, co, (Ainv, D, LW), RX, cbeta, r2)

    def __call__(self, theta: np.ndarray) -> float:
        try:
            value = self.evaluate(np.asarray(theta, dtype=float))[0]
        except (linalg.LinAlgError, np.linalg.LinAlgError, ValueError, FloatingPointError):
            return np.inf
        return value if np.isfinite(value) else np.inf

    def value_and_grad(self, theta: np.ndarray):
        """(deviance, analytic gradient) at theta, remembered for the last few points (the optimizer, the boundary
        search and the Newton polish ask for the same point more than once); (inf, 0) where it is not finite."""
        theta = np.asarray(theta, dtype=float)
        key = theta.tobytes()
        hit = self._memo.get(key)
        if hit is None:
            try:
                value, parts = self.evaluate(theta)
                hit = (value, self.gradient(theta, parts)) if parts is not None else (np.inf, None)
            except (linalg.LinAlgError, np.linalg.LinAlgError, ValueError, FloatingPointError):
                hit = (np.inf, None)
            if len(self._memo) >= 8:
                self._memo.pop(next(iter(self._memo)))
            self._memo[key] = hit
        value, grad = hit
        return (value, grad.copy()) if grad is not None else (np.inf, np.zeros_like(theta))

    def _solve_full(self, lams, LAinv, LS, cb, co):
        """x = M^-1 Lambda'Z'[X y] from the forward solves c = L^-1 Lambda'Z'[X y] (M = L L'), per block; with
        Lambda_o x_o and G_bo Lambda_o x_o (r_b x (p+1) x m_b) for the products that follow."""
        Tb = lams[self.big]
        if not self.q_o:
            c = cb.shape[1]
            return st.mul(st.transpose(LAinv), cb), np.zeros((0, c)), np.zeros((0, c)), np.zeros_like(cb)
        rb, c, m = cb.shape
        x_o = tri_solve(LS, co, lower=True, trans=True)
        lx_o = self._apply(x_o, lams, False)
        gx_o = st.to_levels_last(np.asarray(self.Gob.T @ lx_o).reshape(m, rb, c))  # G_bo Lambda_o x_o
        x_b = st.mul(st.transpose(LAinv), cb - st.mul(LAinv, st.left(Tb.T, gx_o)))
        return x_b, x_o, lx_o, gx_o

    def _big_sandwich(self, Kmat: np.ndarray) -> np.ndarray:
        """Per level l of the big term the r_b x r_b block G_ob,l' Kmat G_ob,l (Kmat symmetric, q_o x q_o)."""
        rb = self.r[self.big]
        if isinstance(self.gdg, (_PairSums, _DenseBlocks)):
            return self.gdg.adjoint(Kmat, rb)
        if sparse.issparse(self.Gob):
            KG = np.asarray((self.Gob.T @ Kmat)).reshape(-1, rb, self.q_o)  # m_b x r_b x q_o
            Gt = self.Gob.T.tocsr()
            out = np.empty((KG.shape[0], rb, rb))
            for a in range(rb):
                Ga = Gt[a::rb]
                for b in range(rb):
                    out[:, a, b] = np.asarray(Ga.multiply(KG[:, b, :]).sum(axis=1)).ravel()
            return out
        q, mr = self.Gob.shape
        G3 = self.Gob.reshape(q, mr // rb, rb)
        KG3 = (Kmat @ self.Gob).reshape(q, mr // rb, rb)
        out = np.empty((mr // rb, rb, rb))
        for a in range(rb):
            for b in range(a, rb):
                out[:, a, b] = out[:, b, a] = np.einsum("il,il->l", G3[:, :, a], KG3[:, :, b])
        return out

    def gradient(self, theta: np.ndarray, parts) -> np.ndarray:
        """Analytic gradient of the profiled deviance in lme4's theta (envelope theorem, as :meth:`Deviance.gradient`).

        With M = Lambda'Z'Z Lambda + I and dLambda = I (x) E_rc for the element (r, c) of T_k:
        - d log|M| = 2 tr(M^-1 Lambda'Z'Z dLambda) = 2 sum_l [M^-1 Lambda'Z'Z]_(l c),(l r): for the big term per level
          A_l^-1 T_b'G_l + A_l^-1 T_b' G_ob,l' K G_ob,l (D_l G_l - I) with K = Lambda_o S^-1 Lambda_o'; for the
          other terms the diagonal blocks of S^-1 Lambda_o' W (W = G_o - G_ob D G_ob', as in the deviance);
        - d r^2 = -2 sum_l (Z'e)_(l r) u_(l c), e and u the penalized least-squares residual and spherical modes;
        - REML: d log|X'V*^-1 X| = -2 sum_l [Q Omega^-1 Psi']_(l c),(l r) with Q = M^-1 Lambda'Z'X,
          Psi = Z'V*^-1 X = Z'X - Z'Z Lambda Q, Omega = X'V*^-1 X = RX'RX.
        The profiled deviance adds log|M| (+ log|Omega|) + nu log r^2 (nu = n, or n - p for REML).
        """
        lams, LA, LAinv, LS, cb, co, (Ainv, D, LW), RX, cbeta, r2 = parts
        s = self.s
        p, n = s.p, s.n
        big, Tb = self.big, lams[self.big]
        rb, _, m = cb.shape
        x_b, x_o, lx_o, gx_o = self._solve_full(lams, LAinv, LS, cb, co)
        lx_b = st.left(Tb, x_b)  # Lambda_b x_b, r_b x (p+1) x m_b
        Psi_b = self.Rb - st.mul(self.Gb, lx_b) - gx_o  # Z_b'[X y] - (Z'Z Lambda x)_b
        beta = tri_solve(RX, cbeta, lower=False) if p else np.zeros(0)
        nu = n - p if self.reml else n
        u_b = x_b[:, p] - np.tensordot(beta, x_b[:, :p], axes=(0, 1))  # r_b x m_b
        e_b = Psi_b[:, p] - np.tensordot(beta, Psi_b[:, :p], axes=(0, 1))
        mats = [None] * len(self.r)  # per term the r x r matrix of d deviance / d T_k[r, c]
        mats[big] = (-2.0 * nu / r2) * (e_b @ u_b.T)
        F_b = st.mul(Ainv, st.left(Tb.T, self.Gb))  # A_l^-1 T_b' G_l
        if self.q_o:
            Sinv = chol_inverse(LS)
            Kmat = self._apply(self._apply(Sinv, lams, False).T, lams, False)  # Lambda_o S^-1 Lambda_o'
            X = st.to_levels_last(self._big_sandwich(Kmat))
            F_b = F_b + st.mul(Ainv, st.left(Tb.T, st.mul(X, st.mul(D, self.Gb) - self.eye_b)))
            Psi_o = self.Ro - self.Gob @ st.to_levels_first(lx_b).reshape(m * rb, -1) - self.Go @ lx_o
            u_o = x_o[:, p] - x_o[:, :p] @ beta
            e_o = Psi_o[:, p] - Psi_o[:, :p] @ beta
            for k in self.others:
                sl, rk = self.slices[k], self.r[k]
                Fk = np.empty((rk, rk))
                for a in range(rk):
                    rows = Sinv[sl][a::rk]
                    for b in range(rk):
                        Fk[a, b] = float(np.einsum("it,ti->", rows, LW[:, sl][:, b::rk]))
                ek, uk = e_o[sl].reshape(-1, rk), u_o[sl].reshape(-1, rk)
                mats[k] = 2.0 * Fk.T - (2.0 * nu / r2) * (ek.T @ uk)
        mats[big] = mats[big] + 2.0 * F_b.sum(axis=2).T
        if self.reml and p:
            RXinv = tri_solve(RX, np.eye(p), lower=False)  # Omega^-1 = RXinv RXinv'
            Qt_b = np.einsum("rpm,pa->ram", x_b[:, :p], RXinv, optimize=True)
            Pt_b = np.einsum("rpm,pa->ram", Psi_b[:, :p], RXinv, optimize=True)
            mats[big] = mats[big] - 2.0 * np.tensordot(Pt_b, Qt_b, axes=([1, 2], [1, 2]))
            if self.q_o:
                Qt_o, Pt_o = x_o[:, :p] @ RXinv, Psi_o[:, :p] @ RXinv
                for k in self.others:
                    sl, rk = self.slices[k], self.r[k]
                    mats[k] = mats[k] - 2.0 * np.einsum("lra,lca->rc", Pt_o[sl].reshape(-1, rk, p),
                                                        Qt_o[sl].reshape(-1, rk, p))
        g = np.empty(self.n_theta)
        for k, (rows, cols) in enumerate(self.tri):
            g[self.tslices[k]] = mats[k][rows, cols]
        return g

    def conditional_modes(self, theta, parts, beta) -> list[np.ndarray]:
        """b = Lambda u, L'u = c - R_ZX beta: per term an m_k x r_k array of BLUPs."""
        lams, LA, LAinv, LS, cb, co = parts[:6]
        p = self.s.p
        rb, _, m = cb.shape
        d_b = cb[:, p] - np.tensordot(beta, cb[:, :p], axes=(0, 1))  # r_b x m_b
        d_o = co[:, p] - co[:, :p] @ beta
        out = [None] * len(self.r)
        Tb = lams[self.big]
        if self.q_o:
            u_o = tri_solve(LS, d_o, lower=True, trans=True)
            b_o = self._apply(u_o[:, None], lams, False)[:, 0]
            v = np.asarray(self.Gob.T @ b_o).reshape(m, rb).T  # G_bo Lambda_o u_o
            d_b = d_b - st.mul(LAinv, Tb.T @ v)
            for k in self.others:
                out[k] = b_o[self.slices[k]].reshape(-1, self.r[k])
        u_b = st.mul(st.transpose(LAinv), d_b)  # L_A^-T d_b
        out[self.big] = (Tb @ u_b).T
        return out
