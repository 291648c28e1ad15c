"""The big term's levels' part of Z'V*^-1 [X y] by its products (issue 54: a leaderboard's system:item levels).

In :class:`.deviance.Deviance` the term with the most levels (m_b of them) is eliminated as a diagonal. Its part of
Z'V*^-1 [X y] is a (p+1) x m_b matrix W_b = (Z_b'[X y] - lz_o' Z_o'Z_b) A^-1 (lz_o: the other levels' solution):
for 100 systems x 3,000 items, 101 x 300,000 numbers per gradient. The gradient and the average-information Hessian
need only W_b' c (one combination of its rows), W_b X for a few columns X and the Gram matrix W_b W_b', all of
which follow from the sparse Z_b'[X y] (a system:item level meets the intercept and its own system's column) and the
q_o x q_o sandwich Z_o'Z_b D Z_b'Z_o without forming W_b.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse


def gram(R, d: np.ndarray) -> np.ndarray:
    """R diag(d) R' (dense) for a dense or sparse R."""
    if sparse.issparse(R):
        return (R @ sparse.diags(d) @ R.T).toarray()
    return (R * d) @ R.T


def cross_scaled(BT, R, d: np.ndarray) -> np.ndarray:
    """BT diag(d) R' (dense) for dense or sparse BT and R (the same number of columns)."""
    Rd = R @ sparse.diags(d) if sparse.issparse(R) else R * d
    out = BT @ Rd.T
    return out.toarray() if sparse.issparse(out) else np.asarray(out)


class BigWeighted:
    """W_b = (R - lz_o' BT) diag(invA), (p+1) x m_b, by its products only (module docstring): R = Z_b'[X y] (sparse
    or dense), BT = Z_o'Z_b, lz_o the other levels' solution (q_o x (p+1)), ``bdb(d)`` = BT diag(d) BT', ``times(M,
    X)``: M X for such q_o x q_o matrices (:meth:`.deviance.Deviance.other_times`)."""

    def __init__(self, R, BT, lz_o: np.ndarray, invA: np.ndarray, bdb, times=np.matmul):
        self.R, self.BT, self.lz_o, self.invA, self.bdb, self.times_other = R, BT, lz_o, invA, bdb, times

    def combine(self, c: np.ndarray) -> np.ndarray:
        """W_b' c (m_b) for c of length p+1."""
        out = np.asarray(self.R.T @ c, dtype=float).ravel()
        if self.lz_o.shape[0]:
            out = out - np.asarray(self.BT.T @ (self.lz_o @ c)).ravel()
        return out * self.invA

    def times(self, X: np.ndarray) -> np.ndarray:
        """W_b X ((p+1) x K) for X (m_b x K)."""
        Xa = X * self.invA[:, None]
        out = np.asarray(self.R @ Xa)
        if self.lz_o.shape[0]:
            out = out - self.lz_o.T @ np.asarray(self.BT @ Xa)
        return out

    def gram(self, p: int, bd2b: np.ndarray | None = None) -> np.ndarray:
        """(W_b W_b')[:p, :p] = [R D^2 R' - R D^2 BT' lz_o - lz_o' BT D^2 R' + lz_o' BT D^2 BT' lz_o][:p, :p],
        D = diag(invA); ``bd2b``: BT D^2 BT' if already made."""
        d2 = self.invA * self.invA
        R = self.R[:p]
        out = gram(R, d2)
        if self.lz_o.shape[0]:
            L = self.lz_o[:, :p]
            BR = cross_scaled(self.BT, R, d2)  # q_o x p
            LBR = L.T @ BR
            out = out - LBR - LBR.T + L.T @ self.times_other(self.bdb(d2) if bd2b is None else bd2b, L)
        return out
