"""The cross block's sandwich G blockdiag(D) G' for a fixed sparse G from the pairs of nonzeros each level of the big
term links (:mod:`.deviance`): its cost follows the nonzeros, not q^2 m.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse


class PairSums:
    """G blockdiag(D_1..D_m) G' for a fixed sparse G (q x m r, level-major columns), as one sparse product with D.

    Entry (i, j) is sum_l sum_ab G_i,lr+a (D_l)_ab G_j,lr+b over the big levels l that link i and j. The pairs of
    nonzeros each level's columns hold are listed once (K: unique pairs x m r^2, nnz = sum_l nnz(G_:l)^2 / 2), so
    each evaluation is K @ vec(D) plus a scatter into the dense q x q result: cost follows the nonzeros, not q^2 m.
    """

    LIMIT = 30_000_000  # pairs (about 12 bytes each); beyond that scipy's sparse product is used
    TABLE = 1 << 24  # q^2 up to which the distinct pairs are found with a lookup table (8 bytes per entry)

    @staticmethod
    def pairs(G, r: int = 1) -> int:
        ptr = sparse.csc_matrix(G).indptr[::r].astype(np.int64)
        k = np.diff(ptr)
        return int((k * k).sum())

    def __init__(self, G, r: int = 1):
        Gc = sparse.csc_matrix(G)
        q, mr = Gc.shape
        if r == 1:
            self._intercepts(Gc)
            return
        m = mr // r
        bptr = Gc.indptr[::r].astype(np.int64)  # nonzeros of level l: bptr[l]:bptr[l+1] (its r columns in a row)
        k = np.diff(bptr)
        level = np.repeat(np.arange(m), k)  # per nonzero
        coef = np.repeat(np.arange(mr), np.diff(Gc.indptr)) % r  # per nonzero: its coefficient a
        order = np.lexsort((Gc.indices, level))  # within each level by row
        row, coef, data = Gc.indices[order], coef[order], Gc.data[order]
        # the pairs e1 <= e2 of each level's nonzeros (rows r1 <= r2): a pair of distinct nonzeros in one row
        # stands for both orders (a, b) and (b, a), so it counts twice (D is symmetric)
        after = k[level] - (np.arange(Gc.nnz) - bptr[level])  # nonzeros from this one to the level's end
        e1 = np.repeat(np.arange(Gc.nnz), after)
        e2 = e1 + (np.arange(len(e1)) - np.repeat(np.cumsum(after) - after, after))
        r1, r2 = row[e1], row[e2]
        key = r1.astype(np.int64) * q + r2
        if q * q <= self.TABLE:  # distinct pairs by a lookup table over all q^2 (a sort costs ~20x more)
            uniq = np.flatnonzero(np.bincount(key, minlength=q * q))
            table = np.empty(q * q, dtype=np.int64)
            table[uniq] = np.arange(len(uniq))
            inv = table[key]
        else:
            uniq, inv = np.unique(key, return_inverse=True)
        wcol = level[e1] * (r * r) + coef[e1] * r + coef[e2]
        vals = data[e1] * data[e2]
        vals[(r1 == r2) & (e1 != e2)] *= 2.0
        self.K = sparse.csr_matrix((vals, (inv, wcol)), shape=(len(uniq), m * r * r))
        self.KT = None  # its transpose, row-major (for the gradient's adjoint), made when first needed
        self.upper = uniq  # flat index i q + j (i <= j)
        self.lower = (uniq % q) * q + uniq // q
        self.q = q
        self._weights = None  # per listed pair: its row, its column, 2 off the diagonal (made when first needed)

    def _intercepts(self, Gc) -> None:
        """The pairs for r = 1 without sorting: each level's nonzeros (rows ascending) give its pairs in a column of
        K, so K is built column by column as it is listed (CSC), in 32-bit indices where they fit (on InstEval's
        1,128 x 2,972 block, 1.3 million pairs: a third of the time and memory of the general case)."""
        q, m = Gc.shape
        Gc.sort_indices()
        nnz = Gc.nnz
        ptr = Gc.indptr.astype(np.int64)
        k = np.diff(ptr)
        after = np.repeat(ptr[1:], k) - np.arange(nnz)  # nonzeros from this one to its level's end
        n_pairs = int(after.sum())
        idx = np.int32 if n_pairs < 2 ** 31 else np.int64
        # pair (e1, e2), e1 <= e2, of the nonzeros of one level: e1 repeated, e2 running from e1 to the level's end
        e2 = np.arange(n_pairs, dtype=idx)
        e2 -= np.repeat((np.cumsum(after) - after - np.arange(nnz)).astype(idx), after)
        vals = np.repeat(Gc.data, after)  # data[e1]
        vals *= Gc.data[e2]
        row = Gc.indices.astype(np.int32 if q < 2 ** 31 else np.int64, copy=False)
        kdt = np.int32 if q * q < 2 ** 31 else np.int64
        # row e1 <= row e2 (one nonzero per row and level); built in place: in a process's first fit every fresh
        # array of n_pairs costs about as much as the arithmetic on it
        key = np.repeat(row.astype(kdt) * q, after)
        key += row[e2]
        del e2
        if q * q <= self.TABLE:
            seen = np.zeros(q * q, dtype=bool)
            seen[key] = True
            uniq = np.flatnonzero(seen)
            table = np.empty(q * q, dtype=idx)
            table[uniq] = np.arange(len(uniq), dtype=idx)
            inv = table[key]
        else:
            uniq, inv = np.unique(key, return_inverse=True)
        indptr = np.concatenate([[0], np.cumsum(k * (k + 1) // 2)])
        self.K = sparse.csc_matrix((vals, inv, indptr), shape=(len(uniq), m))
        self.KT = self.K.T  # row-major view of the same arrays
        self.upper = uniq.astype(np.int64)
        self.lower = (self.upper % q) * q + self.upper // q
        self.q = q
        self._weights = None

    def __call__(self, D: np.ndarray) -> np.ndarray:
        vals = self.K @ np.ascontiguousarray(D).reshape(-1)
        out = np.zeros(self.q * self.q)
        out[self.lower] = vals
        out[self.upper] = vals
        return out.reshape(self.q, self.q)

    def inner_lower(self, lower: np.ndarray, D: np.ndarray, lam: np.ndarray) -> float:
        """sum(S * (lam G D G' lam)) for a symmetric S given by its lower triangle ``lower`` (r = 1): the sandwich
        is zero outside the listed pairs, so the sum runs over them alone, without forming the q x q matrix."""
        if self._weights is None:
            rows, cols = self.upper // self.q, self.upper % self.q
            self._weights = (rows, cols, np.where(rows == cols, 1.0, 2.0))
        rows, cols, twice = self._weights
        vals = self.K @ np.ascontiguousarray(D).reshape(-1)
        # element (j, i), j >= i: at j q + i in C order, at i q + j in Fortran order (LAPACK's; no copy)
        picked = lower.ravel(order="F")[self.upper] if lower.flags.f_contiguous else lower.reshape(-1)[self.lower]
        return float((picked * lam[rows] * lam[cols] * twice) @ vals)

    def adjoint(self, Kmat: np.ndarray, r: int) -> np.ndarray:
        """Per level l the r x r block G_:l' Kmat G_:l for a symmetric q x q Kmat (the transpose of the listed
        pairs: the pairs i < j are listed in one order, so half the diagonal pairs plus the transposed blocks)."""
        flat = Kmat.reshape(-1)
        vals = flat[self.upper].copy()
        vals[self.upper // self.q == self.upper % self.q] *= 0.5
        if self.KT is None:
            self.KT = self.K.T.tocsr()
        Y = (self.KT @ vals).reshape(-1, r, r)
        return Y + np.swapaxes(Y, 1, 2)
