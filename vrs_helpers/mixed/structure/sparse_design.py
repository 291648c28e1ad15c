"""The fixed-effects design of many rows and many columns as a sparse matrix (issue 54: leaderboards).

A model ``score ~ system + (1|item)`` of 100 systems on 10^6 rows has a treatment-coded X of 10^6 x 100, of which
two entries per row are nonzero (the intercept and the row's system). :func:`~.design.design_rows` builds it dense
(800 MB, and a dense product with the cell map); :func:`sparse_design_rows` builds the same matrix as a CSR matrix
from the rows' cells (the observed combinations of the fixed factors) and the map ``T`` from the cell basis to the
treatment-coded columns: X = W T with W the rows' one-hot cell membership times their monomials.
:func:`use_sparse` says when the GLMM takes that path (:mod:`vrs_helpers.mixed.models.glmm`): many columns on many
rows, where the dense products cost N x p per evaluation of the deviance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import sparse

from .errors import MixedModelError

#: the sparse X is used from this many fixed-effect columns on (12 systems keep the dense path and its numbers)
SPARSE_MIN_COLUMNS = 24
#: ... and from this many rows
SPARSE_MIN_ROWS = 20_000


def use_sparse(rows: int, columns: int) -> bool:
    """Whether a design of ``rows`` x ``columns`` is built sparse."""
    return columns >= SPARSE_MIN_COLUMNS and rows >= SPARSE_MIN_ROWS


def cell_index(cells: pd.DataFrame, data: pd.DataFrame, factors: list) -> np.ndarray:
    """The row of ``cells`` (the observed combinations of the fixed factors) of each row of ``data``."""
    if not factors:
        return np.zeros(len(data), dtype=np.int64)
    key_rows = np.zeros(len(data), dtype=np.int64)
    key_cells = np.zeros(len(cells), dtype=np.int64)
    for f in factors:
        levels = pd.Index(pd.unique(cells[f].astype(object)))
        col = data[f]
        codes = levels.get_indexer(col.astype(object) if not isinstance(col.dtype, pd.CategoricalDtype)
                                   else col.astype(object))
        if (codes < 0).any():
            raise MixedModelError("Some rows have a combination of fixed-effect levels not seen in the fit.")
        key_rows = key_rows * len(levels) + codes
        key_cells = key_cells * len(levels) + levels.get_indexer(cells[f].astype(object))
    idx = pd.Index(key_cells).get_indexer(key_rows)
    if (idx < 0).any():
        raise MixedModelError("Some rows have a combination of fixed-effect levels not seen in the fit.")
    return idx


def sparse_design_rows(s, data: pd.DataFrame) -> sparse.csr_matrix:
    """Treatment-coded X of ``data``'s rows as CSR (the matrix :func:`~.design.design_rows` returns dense)."""
    cells = s.cells.drop(columns="n")
    factors = list(cells.columns)
    monomials = s.monomials
    Mn = len(monomials)
    idx = cell_index(cells, data, factors)
    n = len(data)
    rows = np.repeat(np.arange(n), Mn)
    cols = (idx[:, None] * Mn + np.arange(Mn)[None, :]).ravel()
    vals = np.ones((n, Mn))
    for j, mono in enumerate(monomials):
        for name in mono:
            vals[:, j] *= data[name].to_numpy(dtype=float)
    W = sparse.csr_matrix((vals.ravel(), (rows, cols)), shape=(n, len(cells) * Mn))
    X = (W @ sparse.csr_matrix(np.asarray(s.T, dtype=float))).tocsr()
    X.eliminate_zeros()
    X.sort_indices()
    return X


def scale_rows(X: sparse.csr_matrix, v: np.ndarray) -> sparse.csr_matrix:
    """diag(v) X for a CSR X, by scaling its stored values (scipy's broadcast multiply builds a new pattern)."""
    out = X.copy()
    out.data *= np.repeat(np.asarray(v, dtype=float), np.diff(X.indptr))
    return out


def level_cross(codes: np.ndarray, levels: int, coo: sparse.coo_matrix, w: np.ndarray) -> np.ndarray:
    """Z' diag(w) X for one random-intercept term (``codes``: each row's level; ``coo``: X in COO form): a
    ``levels`` x p dense matrix, summed over X's nonzeros (2 per row for a system factor) instead of its N x p
    entries."""
    p = coo.shape[1]
    key = codes[coo.row] * p + coo.col
    return np.bincount(key, weights=w[coo.row] * coo.data, minlength=levels * p).reshape(levels, p)
