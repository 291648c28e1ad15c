"""One pass over the rows: the cross-products Z'Z, Z'X, X'X, Z'y, X'y, y'y of a linear mixed model.

The profiled deviance (Bates et al. 2015, lme4 JSS eq. 34 / 41) depends on the data only through these sums, so
:func:`accumulate` reads a DataFrame, an iterable of DataFrame chunks or a pyarrow Dataset once, with memory that
follows the number of levels, not rows.

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
from typing import Iterable

import numpy as np
import pandas as pd
from scipy import linalg, sparse

from ..formula import Formula, FormulaError, RandomTerm, parse
from .errors import MixedModelError

# --------------------------------------------------------------------------------------- accumulation

class _Levels:
    """Global codes for the values of one grouping variable, in order of first appearance."""

    def __init__(self, name: str):
        self.name = name
        self.index: dict = {}
        self.values: list = []
        self.categories: list | None = None  # pandas categories order, when every chunk is categorical

    def encode(self, s: pd.Series) -> np.ndarray:
        if isinstance(s.dtype, pd.CategoricalDtype):
            cats = list(s.cat.categories)
            if self.categories is None and not self.values:
                self.categories = cats
            elif self.categories is not None:
                self.categories += [c for c in cats if c not in set(self.categories)]
            codes = s.cat.codes.to_numpy()
            used = np.unique(codes)  # unused categories are not levels of the model (R's droplevels)
            remap = np.full(len(cats), -1, dtype=np.int64)
            remap[used] = np.arange(len(used))
            local, uniques = remap[codes], np.asarray(cats, dtype=object)[used]
        else:
            self.categories = None if self.values else self.categories
            local, uniques = pd.factorize(s, sort=False)
            uniques = np.asarray(uniques, dtype=object)
        mapping = np.empty(len(uniques), dtype=np.int64)
        for i, u in enumerate(uniques):
            code = self.index.get(u)
            if code is None:
                code = len(self.values)
                self.index[u] = code
                self.values.append(u)
            mapping[i] = code
        return mapping[local]

    def order(self) -> list:
        """R's level order: the categorical's categories if the data were categorical, else sorted values."""
        if self.categories is not None:
            return [c for c in self.categories if c in self.index]
        try:
            return sorted(self.values)
        except TypeError:
            return sorted(self.values, key=str)


class _SparseSum:
    """Sums of weight columns over (row, col) integer keys, accumulated chunk by chunk.

    Keys are small dense codes, so the sums are kept in a dense array that grows as new levels appear (memory
    follows the number of levels, not rows); very large key spaces fall back to sorted sparse keys.
    """

    DENSE_LIMIT = 20_000_000  # cells of the dense array (x number of weight columns)

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


def _check_columns(df: pd.DataFrame, needed: list[str]) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        hints = []
        for m in missing:
            close = difflib.get_close_matches(m, [str(c) for c in df.columns], n=1)
            hints.append(f"{m!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise MixedModelError(f"Column(s) {', '.join(hints)} not in the data; available columns: "
                              f"{', '.join(map(str, df.columns))}.")


def _is_factor(s: pd.Series) -> bool:
    return (isinstance(s.dtype, pd.CategoricalDtype) or s.dtype == object or pd.api.types.is_string_dtype(s.dtype)
            or pd.api.types.is_bool_dtype(s.dtype))


def _chunks(data) -> Iterable[pd.DataFrame]:
    if isinstance(data, pd.DataFrame):
        yield data
        return
    try:
        import pyarrow.dataset as pads

        if isinstance(data, pads.Dataset):
            for batch in data.to_batches():
                yield batch.to_pandas()
            return
    except ImportError:  # pragma: no cover
        pass
    if isinstance(data, (str, bytes)) or not hasattr(data, "__iter__"):
        raise MixedModelError(f"data must be a DataFrame or an iterable of DataFrame chunks; "
                              f"got {type(data).__name__}.")
    for chunk in data:
        if not isinstance(chunk, pd.DataFrame):
            raise MixedModelError(f"Every chunk must be a DataFrame; got {type(chunk).__name__}.")
        yield chunk


def _lme4_order(sizes: list[int]) -> list[int]:
    """lme4's mkReTrms: terms reordered by decreasing number of levels (rev(order(nl))) unless already so."""
    if any(b > a for a, b in zip(sizes, sizes[1:], strict=False)):
        return list(reversed(sorted(range(len(sizes)), key=lambda k: sizes[k])))
    return list(range(len(sizes)))


def _unique_names(names: list[str]) -> list[str]:
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


def _products(chunk: pd.DataFrame, monos) -> np.ndarray:
    """Rows x len(monos) values of the monomials (() is 1)."""
    out = np.ones((len(chunk), len(monos)))
    for j, mono in enumerate(monos):
        for v in mono:
            out[:, j] *= chunk[v].to_numpy(dtype=float)
    return out


def _pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise outer products: rows x (ka kb), column i kb + j = a_i b_j."""
    return (a[:, :, None] * b[:, None, :]).reshape(len(a), -1)


def accumulate(formula: str | Formula, data, dropna: bool = False) -> SufficientStats:
    """One pass over ``data`` (DataFrame, iterable of DataFrame chunks, pyarrow Dataset): the model's cross-products.

    A ``dask.dataframe.DataFrame`` is accumulated on its cluster, one partition per task
    (:func:`vrs_helpers.distributed.accumulate_dask`; needs ``pip install 'vrs-workbooks[dask]'``)."""
    from ..distributed import accumulate_dask, is_dask_dataframe

    if is_dask_dataframe(data):
        return accumulate_dask(formula, data, dropna=dropna)
    f = parse(formula) if isinstance(formula, str) else formula
    fixed_vars = f.fixed_variables
    slope_vars = f.random_covariates
    needed = list(dict.fromkeys([f.response] + fixed_vars + f.random_variables + slope_vars))
    terms = list(f.random_terms)
    K = len(terms)
    kinds: dict[str, bool] | None = None  # fixed variable -> is factor
    columns = None
    n = 0
    ysum = yty = 0.0
    fixed_factors: list[str] = []
    numerics: list[str] = []
    monomials: list[tuple[str, ...]] = []
    cell_levels: dict[str, _Levels] = {}
    cell_index: dict[tuple, int] = {}
    cell_keys: list[tuple] = []
    WtW = _SparseSum()  # (cell, monomial pair) sums
    Wty = _SparseSum()
    num_sums: dict[str, float] = {}
    distinct = list(dict.fromkeys(t.group for t in terms))  # groupings (terms may share one)
    gidx = [distinct.index(t.group) for t in terms]
    grp_levels = [_Levels(Formula.group_name(g)) for g in distinct]
    var_levels = {v: _Levels(v) for v in f.random_variables}
    diag = [_SparseSum() for _ in terms]  # only for terms with slopes (intercepts: counts from ZtW)
    ZtW = [_SparseSum() for _ in terms]
    Zy = [_SparseSum() for _ in terms]
    cross = {(k, j): _SparseSum() for k in range(K) for j in range(k + 1, K)}
    # per grouping and slope variable: sums of 1, z, z^2 per level (to report a slope constant within groups)
    moments = {(gidx[k], v): _SparseSum() for k, t in enumerate(terms) for v in t.variables}
    for chunk in _chunks(data):
        if columns is None:
            columns = list(chunk.columns)
            _check_columns(chunk, needed)
        elif list(chunk.columns) != columns:
            raise MixedModelError(f"Chunks have different columns: the first has {columns}, a later one "
                                  f"{list(chunk.columns)}. Every chunk must have the same columns.")
        if len(chunk) == 0:
            continue
        missing = {c: chunk[c].isna().to_numpy() for c in needed}  # per column: no copy of the chunk
        counts = {c: int(v.sum()) for c, v in missing.items()}
        if any(counts.values()):
            nan_rows = np.logical_or.reduce(list(missing.values()))
            if not dropna:
                detail = ", ".join(f"{c}: {k}" for c, k in counts.items() if k)
                raise MixedModelError(f"{int(nan_rows.sum())} rows have missing values ({detail}). Drop them first "
                                      f"or call fit(..., dropna=True) to drop them.")
            chunk = chunk.loc[~nan_rows, needed]
            if len(chunk) == 0:
                continue
        del missing
        if kinds is None:
            kinds = {v: _is_factor(chunk[v]) for v in fixed_vars}
            fixed_factors = [v for v in fixed_vars if kinds[v]]
            numerics = [v for v in fixed_vars if not kinds[v]]
            # the indicator monomial () comes first whatever the term order: counts are read from it
            monomials = [()] + [mo for mo in dict.fromkeys(tuple(v for v in t if not kinds[v])
                                                           for t in f.fixed_terms) if mo != ()]
            cell_levels = {v: _Levels(v) for v in fixed_factors}
            num_sums = {v: 0.0 for v in numerics}
            for t in terms:
                for v in t.variables:
                    if _is_factor(chunk[v]):
                        raise MixedModelError(
                            f"The random slope variable {v!r} in {t} is a factor ({chunk[v].dtype}); random slopes "
                            f"are fitted for numeric variables only. For a factor, use a random intercept of the "
                            f"interaction, (1|{t.group_name}:{v}), or code {v!r} numerically.")
        y = chunk[f.response]
        if not pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y):
            raise MixedModelError(f"The response {f.response!r} must be numeric; it has dtype {y.dtype}.")
        y = y.to_numpy(dtype=float)
        if not np.isfinite(y).all():
            raise MixedModelError(f"The response {f.response!r} has infinite values.")
        m = len(y)
        n += m
        ysum += float(y.sum())
        yty += float(y @ y)
        # fixed part
        for v in numerics + slope_vars:
            if not pd.api.types.is_numeric_dtype(chunk[v]) or _is_factor(chunk[v]):
                raise MixedModelError(f"Column {v!r} changed type between chunks (numeric in the first chunk, "
                                      f"{chunk[v].dtype} in a later one).")
        for v in numerics:
            num_sums[v] += float(chunk[v].sum())
        mono_vals = _products(chunk, monomials)
        if fixed_factors:
            codes = np.column_stack([cell_levels[v].encode(chunk[v]) for v in fixed_factors])
            radix = [int(codes[:, j].max()) + 1 for j in range(codes.shape[1])]
            joint = codes[:, 0].copy()
            for j in range(1, codes.shape[1]):  # one integer key per row: mixed radix over the chunk's codes
                joint = joint * radix[j] + codes[:, j]
            inv, keys = pd.factorize(joint)
            uniq = np.empty((len(keys), codes.shape[1]), dtype=np.int64)
            rest = np.asarray(keys, dtype=np.int64)
            for j in range(codes.shape[1] - 1, 0, -1):  # decode the keys back into per-factor codes
                rest, uniq[:, j] = np.divmod(rest, radix[j])
            uniq[:, 0] = rest
            ids = np.empty(len(uniq), dtype=np.int64)
            for i, row in enumerate(map(tuple, uniq)):
                if row not in cell_index:
                    cell_index[row] = len(cell_keys)
                    cell_keys.append(row)
                ids[i] = cell_index[row]
            cell = ids[inv]
        else:
            if not cell_keys:
                cell_index[()] = 0
                cell_keys.append(())
            cell = np.zeros(m, dtype=np.int64)
        M = len(monomials)
        intercept_only = M == 1  # the only monomial is the indicator: counts need no weight arrays
        WtW.add(cell, None, None if intercept_only else _pairs(mono_vals, mono_vals))
        Wty.add(cell, None, y if intercept_only else mono_vals * y[:, None])
        # random part
        var_codes = {v: var_levels[v].encode(chunk[v]) for v in f.random_variables}
        gcodes_d = []
        for i, g in enumerate(distinct):
            if len(g) == 1:
                gcodes_d.append(var_codes[g[0]])
            else:
                joint = pd.Series(list(zip(*(var_codes[v] for v in g), strict=True)), dtype=object)
                gcodes_d.append(grp_levels[i].encode(joint))
        gcodes = [gcodes_d[gidx[k]] for k in range(K)]
        zvals = [None if t.intercept_only else _products(chunk, t.covariates) for t in terms]
        for k in range(K):
            z = zvals[k]
            if z is None:
                ZtW[k].add(gcodes[k], cell, None if intercept_only else mono_vals)
                Zy[k].add(gcodes[k], None, y)
            else:
                diag[k].add(gcodes[k], None, _pairs(z, z))
                ZtW[k].add(gcodes[k], cell, _pairs(z, mono_vals))
                Zy[k].add(gcodes[k], None, z * y[:, None])
            for j in range(k + 1, K):
                zj = zvals[j]
                w = None if z is None and zj is None else _pairs(np.ones((m, 1)) if z is None else z,
                                                                 np.ones((m, 1)) if zj is None else zj)
                if gidx[j] == gidx[k]:  # same grouping: only level pairs (i, i)
                    cross[(k, j)].add(gcodes[k], None, w)
                else:
                    cross[(k, j)].add(gcodes[k], gcodes[j], w)
        for (gi, v), acc in moments.items():
            x = chunk[v].to_numpy(dtype=float)
            acc.add(gcodes_d[gi], None, np.column_stack([np.ones(m), x, x * x]))
    if kinds is None or n == 0:
        raise MixedModelError("The data are empty: no rows to fit.")
    if n < 3:
        raise MixedModelError(f"Only {n} observations: a mixed model needs at least 3.")
    # level labels of the groupings
    dlevels = []
    for i, g in enumerate(distinct):
        if len(g) == 1:
            dlevels.append(list(var_levels[g[0]].values))
        else:
            dlevels.append([":".join(str(var_levels[v].values[c]) for v, c in zip(g, key, strict=True))
                            for key in grp_levels[i].values])
        if len(dlevels[i]) < 2:
            raise MixedModelError(f"The random factor {Formula.group_name(g)!r} has a single level "
                                  f"({dlevels[i][0]!r}): a variance between levels needs at least 2 (lme4 refuses "
                                  f"too).")
    levels = [dlevels[gidx[k]] for k in range(K)]
    sizes = [len(lv) for lv in levels]
    _check_slopes(terms, distinct, dlevels, moments)
    Mn = len(monomials)
    n_cells = len(cell_keys)
    w = n_cells * Mn  # cell basis column index: cell * Mn + monomial
    WtW_d = np.zeros((w, w))
    Wty_d = np.zeros(w)
    pair_sums = np.column_stack([WtW.dense(n_cells, 1, j)[:, 0] for j in range(Mn * Mn)])  # cells x Mn^2
    mono_sums = np.column_stack([Wty.dense(n_cells, 1, j)[:, 0] for j in range(Mn)])  # cells x Mn
    for c in range(n_cells):
        WtW_d[c * Mn:(c + 1) * Mn, c * Mn:(c + 1) * Mn] = pair_sums[c].reshape(Mn, Mn)
        Wty_d[c * Mn:(c + 1) * Mn] = mono_sums[c]
    ZtW_d, Zty_d, ZtZ_diag = [], [], []
    for k, t in enumerate(terms):
        r, mk = t.r, sizes[k]
        mat = np.zeros((mk, r, n_cells, Mn))
        for c in range(r):
            for j in range(Mn):
                mat[:, c, :, j] = ZtW[k].dense(mk, n_cells, c * Mn + j)
        ZtW_d.append(mat.reshape(mk * r, w))
        Zty_d.append(np.column_stack([Zy[k].dense(mk, 1, c)[:, 0] for c in range(r)]).reshape(-1))
        if t.intercept_only:  # counts per level: the intercept monomial columns
            ZtZ_diag.append(mat[:, 0, :, 0].sum(axis=1).reshape(mk, 1, 1))
        else:
            ZtZ_diag.append(np.stack([diag[k].dense(mk, 1, j)[:, 0] for j in range(r * r)], axis=1).reshape(mk, r, r))
    ZtZ_cross = {}
    for (k, j), acc in cross.items():
        rk, rj = terms[k].r, terms[j].r
        rows, cols, vals = [], [], []
        for a in range(rk):
            for b in range(rj):
                i1, i2, v = acc.nonzeros(a * rj + b)
                if gidx[j] == gidx[k]:
                    i2 = i1
                rows.append(i1 * rk + a)
                cols.append(i2 * rj + b)
                vals.append(v)
        ZtZ_cross[(k, j)] = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                              shape=(sizes[k] * rk, sizes[j] * rj))
    # the design: treatment contrasts on the observed cells
    factor_levels = {v: cell_levels[v].order() for v in fixed_factors}
    for v, lv in factor_levels.items():
        if len(lv) < 2:
            raise MixedModelError(f"The fixed-effect factor {v!r} has a single level ({lv[0]!r}): it has no "
                                  f"contrast to estimate; remove it from the formula.")
    cell_frame = pd.DataFrame([[cell_levels[v].values[c] for v, c in zip(fixed_factors, key, strict=True)]
                               for key in cell_keys], columns=fixed_factors)
    names, T = _treatment_design(f, fixed_factors, numerics, monomials, factor_levels, cell_frame)
    XtX = T.T @ WtW_d @ T
    Xty = T.T @ Wty_d
    ZtX = [mat @ T for mat in ZtW_d]
    cell_frame["n"] = np.array([WtW_d[c * Mn, c * Mn] for c in range(n_cells)]).astype(int)
    order = _lme4_order(sizes)
    names_lme4 = _unique_names([terms[k].group_name for k in order])
    groups = [""] * K
    for pos, k in enumerate(order):
        groups[k] = names_lme4[pos]
    stats_ = SufficientStats(f, n, terms, groups, levels, ZtZ_diag, ZtZ_cross, ZtX, Zty_d, XtX, Xty, yty, ysum,
                             names, factor_levels, {v: num_sums[v] / n for v in numerics}, cell_frame, monomials, T,
                             order)
    _check_rank(stats_)
    return stats_


def _check_slopes(terms: list[RandomTerm], distinct, dlevels, moments) -> None:
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
def _treatment_design(f: Formula, factors, numerics, monomials, factor_levels, cells: pd.DataFrame):
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


def _check_rank(s: SufficientStats) -> None:
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


def _design_rows(s: SufficientStats, data: pd.DataFrame) -> np.ndarray:
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


