"""Dense cross blocks between the term with the most levels and the others (:mod:`.deviance`): G blockdiag(D) G'
and its adjoint, with equal rows of G computed once.

In an evaluation log where every run scored the same items once, the cross block of the runs-random model
(system:run levels x the items' merged blocks, :mod:`.nested`) has one distinct row per system: G = P G_u with G_u
the u distinct rows and P (q x u) the indicator of each row's copy, so G D G' = P (G_u D G_u') P',
G_:l' K G_:l = G_u,:l' (P'K P) G_u,:l, G X = P (G_u X) and G'Y = G_u'(P'Y) cost (u / q) of the products with G.
"""

from __future__ import annotations

import numpy as np


def equal_rows(G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, inverse): the index of the first of each set of equal rows of G and, per row, its set; rows are
    grouped by the hash of their bytes and the grouping checked exactly (np.unique(axis=0) sorts whole rows: 100x
    slower; a projection G w is not equal for equal rows, BLAS rounds rows differently)."""
    G = np.ascontiguousarray(G)
    index: dict = {}
    inverse = np.array([index.setdefault(hash(row.tobytes()), len(index)) for row in G], dtype=np.int64)
    first = np.zeros(len(index), dtype=np.int64)
    first[inverse[::-1]] = np.arange(len(G))[::-1]
    if not np.array_equal(G, G[first[inverse]]):  # two different rows with one hash: no grouping
        return np.arange(len(G)), np.arange(len(G))
    return first, inverse


class RowGroups:
    """A dense matrix G = P G_u stored as its distinct rows G_u and the indicator P of each row's copy
    (:func:`equal_rows`): ``G @ X`` and ``G.T @ Y`` read G_u only (the runs-random model's 100 x 3 10^4 block of a
    complete log: 2 rows instead of 100, read several times per evaluation)."""

    def __init__(self, Gu: np.ndarray, inverse: np.ndarray):
        self.Gu, self.inverse = Gu, inverse
        self.shape = (len(inverse), Gu.shape[1])
        self.P = np.zeros((len(inverse), len(Gu)))
        self.P[np.arange(len(inverse)), inverse] = 1.0

    def __matmul__(self, X):
        return (self.Gu @ X)[self.inverse]

    @property
    def T(self):
        return RowGroupsT(self)

    def toarray(self) -> np.ndarray:
        return self.Gu[self.inverse]


class RowGroupsT:
    """The transpose of a :class:`RowGroups` matrix, for ``G.T @ Y``."""

    def __init__(self, g: RowGroups):
        self.g, self.shape = g, g.shape[::-1]

    def __matmul__(self, Y):
        return self.g.Gu.T @ (self.g.P.T @ Y)


class DenseBlocks:
    """G blockdiag(D_1..D_m) G' and its adjoint for a dense G (q x m r, level-major columns), from the r column sets
    G_a = G[:, a::r] stored contiguous: r^2 contiguous elementwise products and r matrix products per call (the
    same products on strided slices of G cost about twice as much: the runs-random model's 100 x 3 10^4 block).

    Rows of G that are equal are computed once: G = P G_u with G_u its u distinct rows and P (q x u) the indicator
    of each row's copy, so G D G' = P (G_u D G_u') P' and G_:l' K G_:l = G_u,:l' (P'K P) G_u,:l. In an evaluation
    log where every run scored the same items once, the rows of the runs of one system are equal (u = the number
    of systems instead of the number of runs): the cost falls by (q / u)^2."""

    def __init__(self, G: np.ndarray, r: int):
        self.r = r
        self.inverse = self.P = self.grouped = None
        first, inverse = equal_rows(G)
        if len(first) < 0.75 * G.shape[0]:
            self.grouped = RowGroups(G[first], inverse)
            G, self.inverse, self.P = self.grouped.Gu, inverse, self.grouped.P
        self.cols = [np.ascontiguousarray(G[:, a::r]) for a in range(r)]

    def __call__(self, D: np.ndarray) -> np.ndarray:
        """D: m x r x r (levels first; for r = 1 also the m diagonal values)."""
        r, cols = self.r, self.cols
        D = np.asarray(D).reshape(-1, r, r)
        out = np.zeros((cols[0].shape[0],) * 2)
        for b in range(r):
            acc = cols[0] * D[:, 0, b]
            for a in range(1, r):
                acc += cols[a] * D[:, a, b]
            out += acc @ cols[b].T
        return out if self.inverse is None else out[np.ix_(self.inverse, self.inverse)]

    def adjoint(self, Kmat: np.ndarray, r: int) -> np.ndarray:
        """Per level l the r x r block G_:l' Kmat G_:l for a symmetric q x q Kmat (m x r x r)."""
        if self.P is not None:
            Kmat = self.P.T @ Kmat @ self.P
        KG = [Kmat @ c for c in self.cols]
        out = np.empty((self.cols[0].shape[1], r, r))
        for a in range(r):
            for b in range(a, r):
                out[:, a, b] = out[:, b, a] = np.einsum("il,il->l", self.cols[a], KG[b])
        return out


__all__ = ["DenseBlocks", "RowGroups", "equal_rows"]
