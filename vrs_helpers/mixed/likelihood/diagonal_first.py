"""The Cholesky factor of the dense block when its first term's block is diagonal (issue 54: leaderboards with runs).

In the runs-random model of a leaderboard, ``score ~ system + (1|item) + (1|system:item) + (1|run) +
(1|system:run)``, :class:`.deviance.Deviance` eliminates the term with the most levels (system:item) as a diagonal
and factors the other terms' levels densely: S = Lambda_o (Z_o'Z_o - theta_b^2 Z_o'Z_b A^-1 Z_b'Z_o) Lambda_o + I
over items, system:runs and runs - 3,303 levels for 100 systems x 3 runs x 3,000 items, a 3,303^3 / 3 Cholesky and
a 2 x 3,303^3 / 3 inverse per evaluation. But every level of the largest term lies in one item (system:item is
nested in item) and no row holds two items, so S's item block is diagonal: S = [[D, E], [E', F]], D diagonal. Then

    L_S = [[D^1/2, 0], [E'D^-1/2, L_2]],   L_2 L_2' = F - E'D^-1 E,
    S^-1 = [[D^-1 + D^-1 E F_2^-1 E'D^-1, -D^-1 E F_2^-1], [-F_2^-1 E'D^-1, F_2^-1]]   (F_2 = L_2 L_2')

(the Schur complement of a diagonal block, MixedModels.jl's blocked Cholesky with one more diagonal block): the
factorization costs n_1 q_2^2 instead of (n_1 + q_2)^3 / 3 (q_2 = 303 levels left here), the same numbers up to
rounding. :class:`DiagonalFirst` is that factor; :func:`.deviance.tri_solve` and the gradient's inverse accept it
where they accept the dense factor.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

_potrf = linalg.lapack.get_lapack_funcs("potrf", (np.zeros(1),))
_potri = linalg.lapack.get_lapack_funcs("potri", (np.zeros(1),))
_trtrs = linalg.lapack.get_lapack_funcs("trtrs", (np.zeros(1),))

#: levels of the first dense term from which its diagonal block is eliminated first (below, one dense factor is as
#: fast)
MIN_LEVELS = 200


class DiagonalFirst:
    """The lower Cholesky factor of a symmetric S whose leading ``n1`` x ``n1`` block is diagonal (module
    docstring)."""

    def __init__(self, S: np.ndarray, n1: int):
        self.n1 = int(n1)
        self.shape = S.shape
        d = np.ascontiguousarray(np.diag(S)[:n1], dtype=float)
        if not (d > 0).all():
            raise linalg.LinAlgError("matrix not positive definite (a diagonal block entry is not positive)")
        self.sd = np.sqrt(d)
        self.W = S[n1:, :n1] / self.sd[None, :]  # E'D^-1/2, q2 x n1
        F2 = S[n1:, n1:] - self.W @ self.W.T
        L2, info = _potrf(F2, lower=1, clean=1) if len(F2) else (F2, 0)
        if info != 0:
            raise linalg.LinAlgError(f"matrix not positive definite (potrf info {info})")
        self.L2 = L2

    def log_diagonal_sum(self) -> float:
        """sum(log diag L_S) (half the log determinant of S)."""
        return float(np.log(self.sd).sum() + np.log(np.diag(self.L2)).sum())

    def row_squares(self) -> np.ndarray:
        """The row sums of squares of L_S: diag(L_S L_S') = diag(S)."""
        return np.concatenate([self.sd * self.sd, (self.W * self.W).sum(axis=1) + (self.L2 * self.L2).sum(axis=1)])

    def solve(self, b: np.ndarray, trans: bool = False) -> np.ndarray:
        """L_S x = b (or L_S' x = b) for a vector or a matrix b."""
        n1, vec = self.n1, b.ndim == 1
        b = b[:, None] if vec else b
        x = np.empty(b.shape, dtype=float)
        if not trans:
            x[:n1] = b[:n1] / self.sd[:, None]
            x[n1:] = _tri(self.L2, b[n1:] - self.W @ x[:n1], trans=False)
        else:
            x[n1:] = _tri(self.L2, b[n1:], trans=True)
            x[:n1] = (b[:n1] - self.W.T @ x[n1:]) / self.sd[:, None]
        return x[:, 0] if vec else x

    def inverse_lower(self, first_block_diagonal_only: bool = False) -> np.ndarray:
        """The lower triangle of S^-1 (zeros above the diagonal), as a dense array. ``first_block_diagonal_only``:
        of its leading n1 x n1 block only the diagonal (the rest zeros: n1 q2 work instead of n1^2 q2), for the
        gradient's tr(S^-1 H) where H's leading block is diagonal too (the same nesting makes it so)."""
        n1, q = self.n1, self.shape[0]
        F2inv, info = _potri(self.L2, lower=1) if len(self.L2) else (self.L2, 0)
        if info != 0:
            raise linalg.LinAlgError(f"singular Cholesky factor (potri info {info})")
        F2inv = np.tril(F2inv) + np.tril(F2inv, -1).T
        G = self.W / self.sd[None, :]  # E'D^-1, q2 x n1
        FG = F2inv @ G
        out = np.zeros((q, q))
        if first_block_diagonal_only:
            out[np.arange(n1), np.arange(n1)] = np.einsum("ij,ij->j", G, FG) + 1.0 / (self.sd * self.sd)
        else:
            top = G.T @ FG
            top[np.diag_indices(n1)] += 1.0 / (self.sd * self.sd)
            out[:n1, :n1] = np.tril(top)
        out[n1:, :n1] = -FG
        out[n1:, n1:] = np.tril(F2inv)
        return out


def _tri(L: np.ndarray, b: np.ndarray, trans: bool) -> np.ndarray:
    if not len(L):
        return np.zeros(b.shape)
    x, info = _trtrs(L, b, lower=1, trans=int(trans))
    if info != 0:
        raise linalg.LinAlgError(f"singular triangular factor (trtrs info {info})")
    return x
