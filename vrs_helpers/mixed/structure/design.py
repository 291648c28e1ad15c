"""The design of a linear mixed model and its sufficient statistics: Z'Z, Z'X, X'X, Z'y, X'y, y'y.

The profiled deviance (Bates et al. 2015, lme4 JSS eq. 34 / 41) depends on the data only through these sums, so
:func:`.accumulate.accumulate` reads a DataFrame, an iterable of DataFrame chunks or a pyarrow Dataset once,
with memory that follows the number of levels, not rows.

Fixed effects use treatment contrasts (R's default). To allow levels to first appear in any chunk, rows are
accumulated on a cell basis (one indicator per observed combination of fixed-effect factor levels, times each
numeric monomial) and mapped to the treatment-coded design at the end: X = W T, so X'X = T'W'W T, etc.

Random terms: term k with grouping factor g_k (m_k levels) and r_k coefficients per level (1 for a random
intercept; 2 for ``(1 + x|g)``) has Z columns ordered level-major (level i, coefficient c -> column i r_k + c), as
lme4's Z. Its diagonal block of Z'Z is block diagonal (m_k blocks of r_k x r_k); the cross blocks between terms
are kept sparse (each row links one level of each factor).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import linalg

from .errors import MixedModelError
from .formula import Formula, FormulaError, RandomTerm

# --------------------------------------------------------------------------------------- accumulation

def intern(index: dict, values: list, keys) -> np.ndarray:
    """The codes of ``keys`` in a growing table of distinct values (``index``: value -> code, ``values`` by code):
    known keys keep their code, new ones are appended in the order given. Every level table of the engine (grouping
    levels, fixed-factor cells, the labels merged from another partition) grows through this function."""
    if not index:   # the first keys (distinct): their codes in order, the table built at C speed
        values.extend(keys)
        index.update(zip(values, range(len(values)), strict=True))
        if len(index) == len(values):
            return np.arange(len(values), dtype=np.int64)
        index.clear()   # repeated keys: one at a time below
        values.clear()
    mapping = np.empty(len(keys), dtype=np.int64)
    for i, u in enumerate(keys):
        code = index.get(u)
        if code is None:
            code = index[u] = len(values)
            values.append(u)
        mapping[i] = code
    return mapping


class Levels:
    """Global codes for the values of one grouping variable, in order of first appearance."""

    def __init__(self, name: str):
        self.name = name
        self.index: dict = {}
        self.values: list = []
        self.categories: list | None = None  # pandas categories order, when every chunk is categorical

    def encode(self, s: pd.Series) -> np.ndarray:
        if isinstance(s.dtype, pd.CategoricalDtype):
            cats = s.cat.categories.to_numpy(dtype=object)
            if self.categories is None and not self.values:
                self.categories = list(cats)
            elif self.categories is not None:
                known = set(self.categories)
                self.categories += [c for c in cats if c not in known]
            codes = s.cat.codes.to_numpy()
            # unused categories are not levels of the model (R's droplevels); counting is O(rows), sorting is not
            used = (np.flatnonzero(np.bincount(codes, minlength=len(cats))) if len(codes) and codes.min() >= 0
                    else np.unique(codes))
            remap = np.full(len(cats), -1, dtype=np.int64)
            remap[used] = np.arange(len(used))
            local, uniques = remap[codes], cats[used]
        else:
            self.categories = None if self.values else self.categories
            local, uniques = pd.factorize(s, sort=False)
            uniques = np.asarray(uniques, dtype=object)
        return intern(self.index, self.values, uniques)[local]

    def encode_joint(self, codes: list[np.ndarray]) -> np.ndarray:
        """Global codes of the tuples (codes[0][i], codes[1][i], ...) of per-variable codes (an interaction
        grouping such as system:item): the tuples are packed into one int64 key per row, so only the distinct ones
        become Python tuples (10^6 rows: one factorize of integers instead of hashing 10^6 tuples)."""
        bases = [int(c.max()) + 1 if len(c) else 1 for c in codes]
        if float(np.prod(np.asarray(bases, dtype=float))) >= 2.0 ** 62:
            return self.encode(pd.Series(list(zip(*codes, strict=True)), dtype=object))
        self.categories = None if self.values else self.categories
        key = np.zeros(len(codes[0]), dtype=np.int64)
        for c, b in zip(codes, bases, strict=True):
            key *= b
            key += c
        local, uniq = pd.factorize(key, sort=False)
        parts = []
        for b in reversed(bases):
            parts.append(uniq % b)
            uniq = uniq // b
        uniques = np.empty(len(parts[0]), dtype=object)
        uniques[:] = list(zip(*reversed(parts), strict=True))
        return intern(self.index, self.values, uniques)[local]

    def order(self) -> list:
        """R's level order: the categorical's categories if the data were categorical, else sorted values."""
        if self.categories is not None:
            return [c for c in self.categories if c in self.index]
        try:
            return sorted(self.values)
        except TypeError:
            return sorted(self.values, key=str)


class SparseSum:
    """Sums of weight columns over (row, col) integer keys, accumulated chunk by chunk.

    Keys are small dense codes, so the sums are kept in a dense array that grows as new levels appear (memory
    follows the number of levels, not rows); very large key spaces fall back to sorted sparse keys.
    """

    DENSE_LIMIT = 20_000_000  # cells of the dense array (x number of weight columns)
    SPARSE_RATIO = 16  # a first chunk with more cells than this many times its rows starts with sorted keys

    def __init__(self):
        self.dense_arr: np.ndarray | None = None  # shape (ncols_w, nrow, ncol)
        self.keys = np.empty(0, dtype=np.int64)
        self.vals: np.ndarray | None = None
        self.sparse = False

    def add(self, rows: np.ndarray, cols: np.ndarray | None, weights: np.ndarray | None):
        """Add weights (None: counts; 1-D or rows x k) at keys (rows, cols); cols None means column 0."""
        k = 1 if weights is None or weights.ndim == 1 else weights.shape[1]
        nr = int(rows.max()) + 1 if len(rows) else 0
        nc = int(cols.max()) + 1 if cols is not None and len(cols) else 1
        if not self.sparse and self.dense_arr is None and cols is not None and nr * nc > self.SPARSE_RATIO * len(rows):
            # a table of two large factors that few rows fill (each row links one pair): sorted keys from the start,
            # not a dense array of mostly zeros to fill, add and scan for nonzeros (the same sums, in the same order)
            self.sparse = True
        if not self.sparse:
            cur = self.dense_arr
            nr = max(nr, cur.shape[1] if cur is not None else 0)
            nc = max(nc, cur.shape[2] if cur is not None else 0)
            if nr * nc * k <= self.DENSE_LIMIT:
                if cur is None or cur.shape[1:] != (nr, nc):
                    grown = np.zeros((k, nr, nc))
                    if cur is not None:
                        grown[:, :cur.shape[1], :cur.shape[2]] = cur
                    self.dense_arr = cur = grown
                flat = rows if cols is None else rows * nc + cols
                for j in range(k):
                    w = weights if weights is None or weights.ndim == 1 else weights[:, j]
                    cur[j] += np.bincount(flat, weights=w, minlength=nr * nc).reshape(nr, nc)
                return
            self._to_sparse()
        cols = np.zeros(len(rows), dtype=np.int64) if cols is None else cols
        key = rows.astype(np.int64) * (1 << 31) + cols.astype(np.int64)
        w = np.ones((len(rows), 1)) if weights is None else (weights[:, None] if weights.ndim == 1 else weights)
        keys = np.concatenate([self.keys, key])
        vals = np.concatenate([self.vals, w]) if self.vals is not None else w
        uniq, inv = np.unique(keys, return_inverse=True)
        self.keys = uniq
        self.vals = np.column_stack([np.bincount(inv, weights=vals[:, j], minlength=len(uniq))
                                     for j in range(w.shape[1])])

    def _to_sparse(self):
        self.sparse = True
        if self.dense_arr is not None:
            r, c = np.nonzero(np.any(self.dense_arr != 0, axis=0))
            self.keys = r.astype(np.int64) * (1 << 31) + c
            self.vals = self.dense_arr[:, r, c].T
            self.dense_arr = None

    def dense(self, nrow: int, ncol: int, j: int = 0) -> np.ndarray:
        out = np.zeros((nrow, ncol))
        if self.sparse:
            if len(self.keys):
                out[self.keys // (1 << 31), self.keys % (1 << 31)] = self.vals[:, j]
        elif self.dense_arr is not None:
            a = self.dense_arr[j]
            out[:a.shape[0], :a.shape[1]] = a
        return out


    def nonzeros(self, j: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, cols, values) of the nonzero sums of weight column j."""
        if self.sparse:
            if not len(self.keys):
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
            vals = self.vals[:, j]
            nz = vals != 0
            return self.keys[nz] // (1 << 31), self.keys[nz] % (1 << 31), vals[nz]
        if self.dense_arr is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
        a = self.dense_arr[j]
        r, c = np.nonzero(a)
        return r, c, a[r, c]


@dataclass
class SufficientStats:
    """Cross-products of a mixed model, accumulated over rows (all are sums, so partitions can be merged).

    Random-effect arrays are per term, in the formula's order (``terms``); ``lme4_order`` lists the terms in the
    order lme4 reports them (by number of levels, decreasing), under the names ``groups``.
    """

    formula: Formula
    n: int
    terms: list[RandomTerm]
    groups: list[str]  # lme4's name of each term's grouping (made unique as VarCorr does: g, g.1)
    levels: list[list]  # level labels per term (order of the Z columns)
    ZtZ_diag: list[np.ndarray]  # per term: m_k x r_k x r_k sums of z z' per level
    ZtZ_cross: dict  # (k, l) -> scipy.sparse CSR (m_k r_k) x (m_l r_l), k < l
    ZtX: list[np.ndarray]  # per term: (m_k r_k) x p
    Zty: list[np.ndarray]  # per term: m_k r_k
    XtX: np.ndarray
    Xty: np.ndarray
    yty: float
    ysum: float
    fixed_names: list[str]
    factor_levels: dict  # fixed factor -> ordered levels (reference first)
    numeric_means: dict  # numeric covariate -> mean (for marginal means)
    cells: pd.DataFrame  # observed cells of the fixed factors with counts
    monomials: list  # numeric monomials of the cell basis: () for the indicator, ("x",) for x, ...
    T: np.ndarray  # map from the cell basis (cell * len(monomials) + monomial) to the treatment-coded X
    lme4_order: list[int]

    @property
    def p(self) -> int:
        return self.XtX.shape[0]

    @property
    def sizes(self) -> list[int]:
        """Number of levels of each term's grouping factor."""
        return [len(lv) for lv in self.levels]

    @property
    def intercepts_only(self) -> bool:
        return all(t.intercept_only for t in self.terms)

    # --- theta: per term the lower triangle of its relative covariance factor T_k, column-major (lme4's theta).
    # The engine keeps the terms in the formula's order ("internal"); lme4 reports them in ``lme4_order``.
    @property
    def theta_sizes(self) -> list[int]:
        """Elements of theta per term (formula order): r_k (r_k + 1) / 2."""
        return [t.r * (t.r + 1) // 2 for t in self.terms]

    def theta_positions(self) -> np.ndarray:
        """Internal positions of lme4's theta: ``theta_lme4 = theta_internal[theta_positions()]``."""
        offsets = np.cumsum([0] + self.theta_sizes)
        return np.concatenate([np.arange(offsets[k], offsets[k + 1]) for k in self.lme4_order]).astype(np.int64)

    def theta_to_lme4(self, theta) -> np.ndarray:
        """theta (or anything laid out like it) from the internal order to lme4's."""
        return np.asarray(theta)[self.theta_positions()]

    def theta_from_lme4(self, theta) -> np.ndarray:
        """theta from lme4's order (a fitted model's ``theta``) to the internal order."""
        pos = self.theta_positions()
        out = np.empty(len(pos))
        out[pos] = np.asarray(theta, dtype=float)
        return out

    def relative_factors(self, theta) -> list[np.ndarray]:
        """Per term (formula order) the lower-triangular T_k of an internal-order theta."""
        out, start = [], 0
        for t in self.terms:
            rows, cols = lower_triangle(t.r)
            T = np.zeros((t.r, t.r))
            T[rows, cols] = np.asarray(theta, dtype=float)[start:start + len(rows)]
            out.append(T)
            start += len(rows)
        return out

    def counts(self, k: int) -> np.ndarray:
        """Rows per level of term k's grouping factor (needs an intercept in some term of that grouping)."""
        t = self.terms[k]
        if () in t.covariates:
            c = t.covariates.index(())
            return self.ZtZ_diag[k][:, c, c]
        for j, u in enumerate(self.terms):
            if u.group == t.group and () in u.covariates:
                c = u.covariates.index(())
                return self.ZtZ_diag[j][:, c, c]
        return None


def lower_triangle(r: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of the lower triangle of an r x r matrix in column-major order: lme4's order of theta."""
    rows = [rr for c in range(r) for rr in range(c, r)]
    cols = [c for c in range(r) for _ in range(c, r)]
    return np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)


def check_columns(df: pd.DataFrame, needed: list[str]) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        hints = []
        for m in missing:
            close = difflib.get_close_matches(m, [str(c) for c in df.columns], n=1)
            hints.append(f"{m!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise MixedModelError(f"Column(s) {', '.join(hints)} not in the data; available columns: "
                              f"{', '.join(map(str, df.columns))}.")


def is_factor(s: pd.Series) -> bool:
    return (isinstance(s.dtype, pd.CategoricalDtype) or s.dtype == object or pd.api.types.is_string_dtype(s.dtype)
            or pd.api.types.is_bool_dtype(s.dtype))


def lme4_order(sizes: list[int]) -> list[int]:
    """lme4's mkReTrms: terms reordered by decreasing number of levels (rev(order(nl))) unless already so."""
    if any(b > a for a, b in zip(sizes, sizes[1:], strict=False)):
        return list(reversed(sorted(range(len(sizes)), key=lambda k: sizes[k])))
    return list(range(len(sizes)))


def unique_names(names: list[str]) -> list[str]:
    """R's make.unique: the second 'g' becomes 'g.1', the third 'g.2'."""
    seen: dict[str, int] = {}
    out = []
    for nm in names:
        if nm in seen:
            seen[nm] += 1
            out.append(f"{nm}.{seen[nm]}")
        else:
            seen[nm] = 0
            out.append(nm)
    return out


def monomial_values(chunk: pd.DataFrame, monos) -> np.ndarray:
    """Rows x len(monos) values of the monomials (() is 1)."""
    out = np.ones((len(chunk), len(monos)))
    for j, mono in enumerate(monos):
        for v in mono:
            out[:, j] *= chunk[v].to_numpy(dtype=float)
    return out


def row_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise outer products: rows x (ka kb), column i kb + j = a_i b_j."""
    return (a[:, :, None] * b[:, None, :]).reshape(len(a), -1)


def check_slopes(terms: list[RandomTerm], distinct, dlevels, moments) -> None:
    """A slope variable constant within every level of its grouping (with an intercept there) is not identified."""
    for (gi, v), acc in moments.items():
        g = distinct[gi]
        mg = len(dlevels[gi])
        cnt, s1, s2 = (acc.dense(mg, 1, j)[:, 0] for j in range(3))
        total = cnt.sum()
        mean = s1.sum() / total
        spread = max(s2.sum() / total - mean * mean, 0.0)
        name = Formula.group_name(g)
        term = next(t for t in terms if t.group == g and v in t.variables)
        if s2.sum() == 0:
            raise MixedModelError(f"The random slope variable {v!r} in {term} is zero in every row: its slope cannot "
                                  f"be estimated. Remove it from the random term.")
        has_intercept = any(t.group == g and () in t.covariates for t in terms)
        if not has_intercept:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            within = np.where(cnt > 0, s2 / cnt - (s1 / np.maximum(cnt, 1)) ** 2, 0.0)
        if float(np.max(within)) <= 1e-10 * max(spread, mean * mean, 1e-300):
            raise MixedModelError(
                f"The random slope variable {v!r} in {term} is constant within every level of {name!r}: a slope "
                f"varying by {name} cannot be told apart from the random intercept (lme4 gives a singular or failed "
                f"fit). Keep {v!r} as a fixed effect and drop it from the random term, e.g. (1|{name}).")
def treatment_design(f: Formula, factors, numerics, monomials, factor_levels, cells: pd.DataFrame):
    """Column names (R style) and the map T from the cell basis to the treatment-coded design."""
    Mn = len(monomials)
    n_cells = len(cells)
    names: list[str] = []
    cols: list[np.ndarray] = []
    present = {frozenset(t) for t in f.fixed_terms}
    if f.intercept:
        names.append("(Intercept)")
        col = np.zeros(n_cells * Mn)
        col[np.arange(n_cells) * Mn + monomials.index(())] = 1.0
        cols.append(col)
    first_full = not f.intercept
    for term in f.fixed_terms:
        facs = [v for v in term if v in factors]
        mono = tuple(v for v in term if v not in factors)
        j = monomials.index(mono)
        # contrasts: a factor gets full dummy coding when the term without it is absent (R's rule)
        coding = []
        for v in facs:
            rest = frozenset(term) - {v}
            if rest and rest not in present:
                raise FormulaError(f"Term {':'.join(term)} needs its marginal term {':'.join(sorted(rest))} in the "
                                   f"formula (non-hierarchical formulas are not supported).")
            full = not rest and first_full  # without an intercept, R codes the first factor in full
            first_full = first_full and not full
            coding.append((v, factor_levels[v] if full else factor_levels[v][1:]))
        combos = [()]
        for _, lv in coding:  # first factor varies fastest, as in R's model.matrix
            combos = [c + (x,) for x in lv for c in combos]
        position = {v: i for i, (v, _) in enumerate(coding)}
        for combo in combos:
            # R names the column after the term's variables in their order: systemMarking:src_length_classtypical
            label = ":".join(f"{v}{combo[position[v]]}" if v in position else v for v in term)
            col = np.zeros(n_cells * Mn)
            ind = np.ones(n_cells, dtype=bool)
            for (v, _), x in zip(coding, combo, strict=True):
                ind &= (cells[v] == x).to_numpy()
            col[np.flatnonzero(ind) * Mn + j] = 1.0
            names.append(label)
            cols.append(col)
    T = np.column_stack(cols) if cols else np.zeros((n_cells * Mn, 0))
    return names, T


def check_rank(s: SufficientStats) -> None:
    if s.p == 0:
        return
    XtX = s.XtX
    d = np.sqrt(np.clip(np.diag(XtX), 0, None))
    zero = [s.fixed_names[i] for i in np.flatnonzero(d == 0)]
    if zero:
        raise MixedModelError(f"Fixed-effect column(s) {', '.join(zero)} are all zero: that combination of levels "
                              f"is never observed. Remove the interaction or the empty level.")
    scaled = XtX / np.outer(d, d)
    _, r, piv = linalg.qr(scaled, pivoting=True)
    diag = np.abs(np.diag(r))
    rank = int((diag > 1e-10 * diag[0]).sum())
    if rank < s.p:
        dropped = [s.fixed_names[i] for i in piv[rank:]]
        raise MixedModelError(
            f"The fixed-effects design is rank deficient (rank {rank} of {s.p}): column(s) {', '.join(dropped)} "
            f"are linear combinations of the others (confounded). Remove one of the confounded terms.")


def design_rows(s: SufficientStats, data: pd.DataFrame) -> np.ndarray:
    """Treatment-coded X for given rows (factors must use levels seen in the fit)."""
    cells = s.cells.drop(columns="n")
    factors = list(cells.columns)
    monomials = s.monomials
    Mn = len(monomials)
    n_cells = len(cells)
    if factors:
        key = pd.MultiIndex.from_frame(cells)
        rows = pd.MultiIndex.from_frame(data[factors].astype(object))
        idx = key.get_indexer(rows)
        if (idx < 0).any():
            raise MixedModelError("Some rows have a combination of fixed-effect levels not seen in the fit.")
    else:
        idx = np.zeros(len(data), dtype=int)
    W = np.zeros((len(data), n_cells * Mn))
    for j, mono in enumerate(monomials):
        v = np.ones(len(data))
        for name in mono:
            v = v * data[name].to_numpy(dtype=float)
        W[np.arange(len(data)), idx * Mn + j] = v
    return W @ s.T


