"""Linear mixed models with crossed random intercepts, fitted from sufficient statistics (no R).

Model (book appendix A; Bates et al. 2015, "Fitting Linear Mixed-Effects Models Using lme4", JSS 67(1)):

    y = X beta + sum_k Z_k b_k + eps,   b_k ~ N(0, sigma_k^2 I),   eps ~ N(0, sigma^2 I)

with relative covariance factor Lambda = diag(theta_k), theta_k = sigma_k / sigma. The profiled deviance (lme4
eq. 34 for ML, eq. 41 for REML) depends on the data only through the cross-products

    Z'Z, Z'X, X'X, Z'y, X'y, y'y, n,

which are sums over rows. :func:`fit` accumulates them in one pass over a DataFrame or an iterable of DataFrame
chunks (memory independent of the number of rows), then optimizes theta with a cost that depends only on the
number of random-effect levels: the largest grouping factor (e.g. sentences) gives a diagonal block of
Lambda'Z'Z Lambda + I, and the Cholesky factor is obtained through the Schur complement of that block.

Fixed effects use treatment contrasts (R's default). To allow levels to first appear in any chunk, rows are
accumulated on a cell basis (one indicator per observed combination of fixed-effect factor levels, times each
numeric monomial) and mapped to the treatment-coded design at the end: X = W T, so X'X = T'W'W T, etc.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import pandas as pd
from scipy import linalg, optimize, stats

from .formula import Formula, FormulaError, parse


class MixedModelError(ValueError):
    """Bad input for a mixed model: the message says what is wrong and what to do."""


class SingularFitWarning(UserWarning):
    """A variance component is estimated on the boundary (zero): lme4's 'boundary (singular) fit'."""


class ConvergenceWarning(UserWarning):
    """The optimizer did not report convergence."""


class AliasedFactorsWarning(UserWarning):
    """Two random factors partition the data identically: only the sum of their variances is identified."""


SINGULAR_TOL = 1e-4  # lme4's isSingular() tolerance on theta


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


@dataclass
class SufficientStats:
    """Cross-products of a mixed model, accumulated over rows (all are sums, so partitions can be merged)."""

    formula: Formula
    n: int
    groups: list[str]  # random grouping names, lme4 style
    levels: list[list]  # level labels per grouping (order of the Z columns)
    ZtZ_diag: list[np.ndarray]  # per grouping: counts per level
    ZtZ_cross: dict  # (k, l) -> dense m_k x m_l counts, k < l
    ZtX: list[np.ndarray]  # per grouping: m_k x p
    Zty: list[np.ndarray]
    XtX: np.ndarray
    Xty: np.ndarray
    yty: float
    ysum: float
    fixed_names: list[str]
    factor_levels: dict  # fixed factor -> ordered levels (reference first)
    numeric_means: dict  # numeric covariate -> mean (for marginal means)
    cells: pd.DataFrame  # observed cells of the fixed factors with counts, and the X row of each cell
    monomials: list  # numeric monomials of the cell basis: () for the indicator, ("x",) for x, ...
    T: np.ndarray  # map from the cell basis (cell * len(monomials) + monomial) to the treatment-coded X

    @property
    def p(self) -> int:
        return self.XtX.shape[0]


def _check_columns(df: pd.DataFrame, needed: list[str]) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        import difflib

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


def accumulate(formula: str | Formula, data, dropna: bool = False) -> SufficientStats:
    """One pass over ``data`` (DataFrame or iterable of DataFrame chunks): the model's cross-products."""
    f = parse(formula) if isinstance(formula, str) else formula
    fixed_vars = f.fixed_variables
    needed = list(dict.fromkeys([f.response] + fixed_vars + f.random_variables))
    kinds: dict[str, bool] | None = None  # variable -> is factor
    columns = None
    n = 0
    ysum = yty = 0.0
    # fixed part on the cell basis
    fixed_factors: list[str] = []
    numerics: list[str] = []
    monomials: list[tuple[str, ...]] = []
    cell_levels: dict[str, _Levels] = {}
    cell_index: dict[tuple, int] = {}
    cell_keys: list[tuple] = []
    WtW = _SparseSum()  # (cell, monomial pair) sums
    Wty = _SparseSum()
    num_sums: dict[str, float] = {}
    grp_levels = [_Levels(f.group_name(g)) for g in f.random]
    var_levels: dict[str, _Levels] = {}
    ZtW = [_SparseSum() for _ in f.random]
    Zy = [_SparseSum() for _ in f.random]
    cross = {(k, j): _SparseSum() for k in range(len(f.random)) for j in range(k + 1, len(f.random))}
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
            for v in f.random_variables:
                var_levels[v] = _Levels(v)
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
        mono_vals = np.ones((m, len(monomials)))
        for v in numerics:
            s = chunk[v]
            if not pd.api.types.is_numeric_dtype(s):
                raise MixedModelError(f"Fixed-effect column {v!r} changed type between chunks.")
            num_sums[v] += float(s.sum())
        for j, mono in enumerate(monomials):
            for v in mono:
                mono_vals[:, j] *= chunk[v].to_numpy(dtype=float)
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
        pair_w = (None if M == 1 else
                  np.column_stack([mono_vals[:, i] * mono_vals[:, j] for i in range(M) for j in range(M)]))
        intercept_only = M == 1  # the only monomial is the indicator: counts need no weight arrays
        WtW.add(cell, None, None if intercept_only else pair_w)
        Wty.add(cell, None, y if intercept_only else mono_vals * y[:, None])
        # random part
        gcodes = []
        var_codes = {v: var_levels[v].encode(chunk[v]) for v in f.random_variables}
        for k, g in enumerate(f.random):
            if len(g) == 1:
                gcodes.append(var_codes[g[0]])
            else:
                joint = pd.Series(list(zip(*(var_codes[v] for v in g), strict=True)), dtype=object)
                gcodes.append(grp_levels[k].encode(joint))
        for k in range(len(f.random)):
            ZtW[k].add(gcodes[k], cell, None if intercept_only else mono_vals)
            Zy[k].add(gcodes[k], None, y)
            for j in range(k + 1, len(f.random)):
                cross[(k, j)].add(gcodes[k], gcodes[j], None)
    if kinds is None or n == 0:
        raise MixedModelError("The data are empty: no rows to fit.")
    if n < 3:
        raise MixedModelError(f"Only {n} observations: a mixed model needs at least 3.")
    # level labels of random groupings
    levels = []
    for k, g in enumerate(f.random):
        if len(g) == 1:
            levels.append(list(var_levels[g[0]].values))
        else:
            levels.append([":".join(str(var_levels[v].values[c]) for v, c in zip(g, key, strict=True))
                           for key in grp_levels[k].values])
    for k, g in enumerate(f.random):
        if len(levels[k]) < 2:
            raise MixedModelError(f"The random factor {f.group_name(g)!r} has a single level "
                                  f"({levels[k][0]!r}): a variance between levels needs at least 2 (lme4 refuses too).")
    sizes = [len(lv) for lv in levels]
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
    ZtW_d = []
    for k in range(len(f.random)):
        mat = np.zeros((sizes[k], w))
        for j in range(Mn):
            mat[:, j::Mn] = ZtW[k].dense(sizes[k], n_cells, j)
        ZtW_d.append(mat)
    Zty_d = [Zy[k].dense(sizes[k], 1)[:, 0] for k in range(len(f.random))]
    cross_d = {kl: acc.dense(sizes[kl[0]], sizes[kl[1]]) for kl, acc in cross.items()}
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
    counts = np.array([WtW_d[c * Mn, c * Mn] for c in range(n_cells)])
    cell_frame["n"] = counts.astype(int)
    ZtZ_diag = [mat[:, 0::Mn].sum(axis=1) for mat in ZtW_d]  # counts per level: the intercept monomial columns
    stats_ = SufficientStats(f, n, [f.group_name(g) for g in f.random], levels, ZtZ_diag, cross_d, ZtX, Zty_d,
                             XtX, Xty, yty, ysum, names, factor_levels,
                             {v: num_sums[v] / n for v in numerics}, cell_frame, monomials, T)
    _check_rank(stats_)
    return stats_


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


# ------------------------------------------------------------------------------------------ the deviance

_potrf = linalg.lapack.get_lapack_funcs("potrf", (np.zeros(1),))
_trtrs = linalg.lapack.get_lapack_funcs("trtrs", (np.zeros(1),))


def _chol(a: np.ndarray, lower: bool) -> np.ndarray:
    """Cholesky factor via LAPACK potrf (the scipy wrapper's overhead dominates for the small blocks here)."""
    c, info = _potrf(a, lower=int(lower), clean=1)
    if info != 0:
        raise linalg.LinAlgError(f"matrix not positive definite (potrf info {info})")
    return c


def _tri(t: np.ndarray, b: np.ndarray, lower: bool, trans: bool = False) -> np.ndarray:
    """Solve t x = b (or t' x = b) for triangular t via LAPACK trtrs."""
    x, info = _trtrs(t, b, lower=int(lower), trans=int(trans))
    if info != 0:
        raise linalg.LinAlgError(f"singular triangular factor (trtrs info {info})")
    return x


class _Deviance:
    """Profiled deviance as a function of theta, from sufficient statistics (lme4 JSS eq. 34 / 41).

    M = Lambda'Z'Z Lambda + I is split into the largest grouping factor ("big", a diagonal block A) and the rest
    ("others", dense, small): M = [[A, Bt], [Bt', Ct]], L = [[sqrt(A), 0], [Bt'/sqrt(A), L_S]] with
    L_S L_S' = S = Ct - Bt' A^-1 Bt. Arrays over the big factor's levels are stored wide (levels last).
    """

    def __init__(self, s: SufficientStats, reml: bool):
        self.s = s
        self.reml = reml
        sizes = [len(lv) for lv in s.levels]
        self.big = int(np.argmax(sizes))
        self.others = [k for k in range(len(sizes)) if k != self.big]
        self.n_big = np.ascontiguousarray(s.ZtZ_diag[self.big], dtype=float)
        offs = np.cumsum([0] + [sizes[k] for k in self.others])
        self.q_o = int(offs[-1])
        self.slices = {k: slice(offs[i], offs[i + 1]) for i, k in enumerate(self.others)}
        BT = np.zeros((self.q_o, sizes[self.big]))  # Z_o'Z_big
        C = np.zeros((self.q_o, self.q_o))  # Z_o'Z_o
        for k in self.others:
            C[self.slices[k], self.slices[k]] = np.diag(s.ZtZ_diag[k])
            a, b = min(k, self.big), max(k, self.big)
            BT[self.slices[k], :] = s.ZtZ_cross[(a, b)].T if a == self.big else s.ZtZ_cross[(a, b)]
        for i, k in enumerate(self.others):
            for j in self.others[i + 1:]:
                a, b = min(k, j), max(k, j)
                blk = s.ZtZ_cross[(a, b)] if a == k else s.ZtZ_cross[(a, b)].T
                C[self.slices[k], self.slices[j]] = blk
                C[self.slices[j], self.slices[k]] = blk.T
        self.BT, self.C = np.ascontiguousarray(BT), C
        self.BT2 = self.BT * self.BT
        self.diagC = np.diag(C).copy()
        p = s.p
        self.RbT = np.ascontiguousarray(np.column_stack([s.ZtX[self.big], s.Zty[self.big]]).T)  # (p+1) x m_b
        self.Ro = (np.vstack([np.column_stack([s.ZtX[k], s.Zty[k]]) for k in self.others])
                   if self.others else np.zeros((0, p + 1)))
        self.MtM = np.block([[s.XtX, s.Xty[:, None]], [s.Xty[None, :], np.array([[s.yty]])]])
        self.lam_index = (np.concatenate([[k] * sizes[k] for k in self.others]).astype(int) if self.others
                          else np.zeros(0, dtype=int))
        self.eye_o = np.eye(self.q_o)
        self.eye_p = np.eye(p)

    def parts(self, theta: np.ndarray):
        p = self.s.p
        tb = theta[self.big]
        A = tb * tb * self.n_big + 1.0
        sqA = np.sqrt(A)
        lam = theta[self.lam_index]
        cbT = (tb * self.RbT) / sqA  # (p+1) x m_b
        if self.q_o:
            BtT = (tb * lam)[:, None] * self.BT  # q_o x m_b
            BtAT = BtT / A
            S = (lam[:, None] * self.C * lam[None, :]) + self.eye_o - BtT @ BtAT.T
            LS = _chol(S, lower=True)
            ro = lam[:, None] * self.Ro
            co = _tri(LS, ro - BtAT @ (tb * self.RbT).T, lower=True)
            logdet = float(np.log(A).sum()) + 2.0 * float(np.log(np.diag(LS)).sum())
        else:
            BtT = np.zeros((0, len(A)))
            LS = np.zeros((0, 0))
            co = np.zeros((0, p + 1))
            logdet = float(np.log(A).sum())
        P = self.MtM - cbT @ cbT.T - co.T @ co
        return A, sqA, lam, BtT, LS, cbT, co, P, logdet

    def __call__(self, theta: np.ndarray) -> float:
        try:
            value = self.evaluate(theta)[0]
        except (linalg.LinAlgError, ValueError, FloatingPointError):
            return np.inf
        return value if np.isfinite(value) else np.inf

    def value_and_grad(self, theta: np.ndarray):
        try:
            value, parts = self.evaluate(theta)
            if parts is None or not np.isfinite(value):
                return np.inf, np.zeros_like(theta)
            return value, self.gradient(theta, parts)
        except (linalg.LinAlgError, ValueError, FloatingPointError):
            return np.inf, np.zeros_like(theta)

    def psi_gradient(self, theta: np.ndarray) -> np.ndarray:
        """Gradient in psi = theta^2 (relative variances); unlike the theta-gradient it is not 0 at theta_k = 0."""
        value, parts = self.evaluate(theta)
        return self.gradient(theta, parts, per_psi=True)

    def evaluate(self, theta):
        s = self.s
        parts = self.parts(theta)
        P, logdet = parts[7], parts[8]
        p = s.p
        if p:
            RX = _chol(P[:p, :p], lower=False)
            cbeta = _tri(RX, P[:p, p], lower=False, trans=True)
            r2 = float(P[p, p] - cbeta @ cbeta)
            logdet_x = 2.0 * float(np.log(np.diag(RX)).sum())
        else:
            RX, cbeta, r2, logdet_x = np.zeros((0, 0)), np.zeros(0), float(P[0, 0]), 0.0
        if not r2 > 0:
            return np.inf, None
        n = s.n
        if self.reml:
            dof = n - p
            dev = logdet + logdet_x + dof * (1.0 + math.log(2.0 * math.pi * r2 / dof))
        else:
            dev = logdet + n * (1.0 + math.log(2.0 * math.pi * r2 / n))
        return dev, parts + (RX, cbeta, r2)

    def gradient(self, theta, parts, per_psi: bool = False) -> np.ndarray:
        """Analytic gradient of the profiled deviance (envelope theorem on the unprofiled -2 log-likelihood).

        With V* = I + Z Lambda Lambda' Z' and dV*/dtheta_k = 2 theta_k Z_k Z_k':
        d/dtheta_k = 2 theta_k [tr(Z_k' V*^-1 Z_k) - tr((X'V*^-1 X)^-1 Q_k'Q_k) (REML only) - |u_k|^2 / sigma^2],
        Q = Z'V*^-1 X, u = Z'V*^-1 (y - X beta). Traces use tr_k(Z'V*^-1 Z) = tr_k(G) - |L^-1 Lambda G_k|_F^2.
        The bracket is the derivative in psi_k = theta_k^2.
        """
        s = self.s
        A, sqA, lam, BtT, LS, cbT, co, P, logdet, RX, cbeta, r2 = parts
        p, n = s.p, s.n
        tb = theta[self.big]
        K = len(theta)
        tr = np.zeros(K)
        xb = (tb * self.n_big) / sqA
        invA = 1.0 / A
        # Z'V*^-1 [X y] = a - G Lambda M^-1 Lambda a, with M^-1 Lambda a = L^-T [cb; co]
        if self.q_o:
            # big block: |L_S^-1 (lam B'/A)|_F^2 = tr(S^-1 H), H = lam (B' A^-2 B) lam
            Sinv = _tri(LS, _tri(LS, self.eye_o, lower=True), lower=True, trans=True)
            H = lam[:, None] * ((self.BT * (invA * invA)) @ self.BT.T) * lam[None, :]
            tr[self.big] = self.n_big.sum() - float(xb @ xb) - float((Sinv * H).sum())
            colsq_b = (tb * tb) * (self.BT2 @ invA)
            xo_o = _tri(LS, lam[:, None] * self.C - BtT @ ((tb * self.BT) * invA).T, lower=True)
            colsq = colsq_b + (xo_o * xo_o).sum(axis=0)
            for k in self.others:
                sl = self.slices[k]
                tr[k] = self.diagC[sl].sum() - colsq[sl].sum()
            zo = _tri(LS, co, lower=True, trans=True)
            zbT = (cbT - zo.T @ (BtT / sqA)) / sqA
            lz_o = lam[:, None] * zo
            lz_bT = tb * zbT
            GbT = self.n_big * lz_bT + lz_o.T @ self.BT
            Go = self.BT @ lz_bT.T + self.C @ lz_o
        else:
            tr[self.big] = self.n_big.sum() - float(xb @ xb)
            lz_bT = tb * (cbT / sqA)
            GbT = self.n_big * lz_bT
            Go = np.zeros((0, p + 1))
        WbT = self.RbT - GbT
        Wo = self.Ro - Go
        beta = _tri(RX, cbeta, lower=False) if p else np.zeros(0)
        ub = WbT[p] - beta @ WbT[:p]
        uo = Wo[:, p] - Wo[:, :p] @ beta
        sigma2 = r2 / (n - p if self.reml else n)
        usq = np.zeros(K)
        usq[self.big] = float(ub @ ub)
        for k in self.others:
            usq[k] = float(uo[self.slices[k]] @ uo[self.slices[k]])
        t2 = np.zeros(K)
        if self.reml and p:
            Rinv = _tri(RX, self.eye_p, lower=False)  # (X'V*^-1X)^-1=Rinv Rinv'
            Qb = Rinv.T @ WbT[:p]
            t2[self.big] = float((Qb * Qb).sum())
            if self.q_o:
                Qo = Wo[:, :p] @ Rinv
                for k in self.others:
                    t2[k] = float((Qo[self.slices[k]] ** 2).sum())
        g_psi = tr - t2 - usq / sigma2
        return g_psi if per_psi else 2.0 * theta * g_psi

    def conditional_modes(self, theta, parts, beta) -> tuple[np.ndarray, np.ndarray]:
        """b = Lambda u with u = L^-T (c_u - R_ZX beta): the BLUPs of the big factor and of the others."""
        A, sqA, lam, BtT, LS, cbT, co, P, logdet = parts[:9]
        p = self.s.p
        d_b = cbT[p] - beta @ cbT[:p]
        d_o = co[:, p] - co[:, :p] @ beta
        u_o = _tri(LS, d_o, lower=True, trans=True) if self.q_o else np.zeros(0)
        u_b = (d_b - u_o @ (BtT / sqA)) / sqA if self.q_o else d_b / sqA
        return theta[self.big] * u_b, lam * u_o


# ------------------------------------------------------------------------------------------ the result

def _fmt_table(df: pd.DataFrame) -> str:
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        return df.to_string()


@dataclass
class MixedModelResult:
    """A fitted linear mixed model (random intercepts), with lme4's quantities."""

    formula: str
    method: str  # "REML" | "ML"
    nobs: int
    ngroups: dict
    theta: pd.Series
    sigma: float
    fixed_effects: pd.DataFrame  # estimate, se, z
    variance_components: pd.DataFrame  # variance, sd, percent; index lme4 names + "Residual"
    loglik: float
    deviance: float  # -2 loglik (REML criterion for REML fits)
    singular: bool
    converged: bool
    optimizer_message: str
    n_evaluations: int
    vcov: pd.DataFrame
    ranef: dict  # grouping -> Series of conditional modes (BLUPs)
    warnings: list[str] = field(default_factory=list)
    stats: SufficientStats | None = field(default=None, repr=False)
    _data: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def n_params(self) -> int:
        """Parameters counted by lme4's logLik df: fixed effects + variance components + residual."""
        return len(self.fixed_effects) + len(self.theta) + 1

    @property
    def aic(self) -> float:
        return self.deviance + 2 * self.n_params

    @property
    def bic(self) -> float:
        return self.deviance + math.log(self.nobs) * self.n_params

    @property
    def reml_criterion(self) -> float | None:
        return self.deviance if self.method == "REML" else None

    def summary(self) -> str:
        vc = self.variance_components.copy()
        lines = [
            f"Linear mixed model fit by {'REML' if self.method == 'REML' else 'maximum likelihood'} "
            "(vrs_helpers.mixed)",
            f"Formula: {self.formula}",
            f"{'REML criterion' if self.method == 'REML' else 'deviance'} = {self.deviance:.4f}; "
            f"logLik = {self.loglik:.4f}; AIC = {self.aic:.4f}; BIC = {self.bic:.4f}",
            f"Observations: {self.nobs}; groups: " + ", ".join(f"{k} {v}" for k, v in self.ngroups.items()),
            "", "Random effects:", _fmt_table(vc), "", "Fixed effects:", _fmt_table(self.fixed_effects),
        ]
        if self.singular:
            lines.append("\nboundary (singular) fit: a variance component is estimated as (nearly) zero.")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def __repr__(self) -> str:
        vc = ", ".join(f"{k}={v:.4g}" for k, v in self.variance_components["variance"].items())
        return (f"MixedModelResult({self.formula!r}, {self.method}, n={self.nobs}, logLik={self.loglik:.3f}, "
                f"variances: {vc}{', singular' if self.singular else ''})")

    def _repr_html_(self) -> str:
        return ("<pre>" + self.summary().split("Random effects:")[0] + "</pre><b>Random effects</b>"
                + self.variance_components.to_html(float_format=lambda x: f"{x:.6g}")
                + "<b>Fixed effects</b>" + self.fixed_effects.to_html(float_format=lambda x: f"{x:.6g}"))

    def to_frame(self) -> pd.DataFrame:
        """Variance components (variance, sd, percent), as lme4's VarCorr with percentages."""
        return self.variance_components.copy()

    # --- fitted values and residuals (need the rows)
    def predict(self, data: pd.DataFrame, include_random: bool = True) -> np.ndarray:
        """Predictions for rows of ``data``: X beta (+ the BLUPs of the random effects, 0 for new levels)."""
        s = self.stats
        f = s.formula
        X = _design_rows(s, data)
        out = X @ self.fixed_effects["estimate"].to_numpy()
        if include_random:
            for g, name in zip(f.random, s.groups, strict=True):
                key = data[g[0]] if len(g) == 1 else data[list(g)].astype(str).agg(":".join, axis=1)
                out = out + key.map(self.ranef[name]).astype(float).fillna(0.0).to_numpy()
        return out

    @property
    def fitted(self) -> np.ndarray:
        if self._data is None:
            raise MixedModelError("Fitted values need the rows; this model was fitted from a stream of chunks. "
                                  "Use result.predict(chunk) on each chunk instead.")
        return self.predict(self._data)

    @property
    def residuals(self) -> np.ndarray:
        return self._data[self.stats.formula.response].to_numpy(dtype=float) - self.fitted


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


# --------------------------------------------------------------------------------------------- fitting

def _aliased_pairs(s: SufficientStats) -> list[tuple[str, str]]:
    pairs = []
    for (k, j), N in s.ZtZ_cross.items():
        nz = N > 0
        if (nz.sum(axis=1) == 1).all() and (nz.sum(axis=0) == 1).all():
            pairs.append((s.groups[k], s.groups[j]))
    return pairs


def fit_stats(s: SufficientStats, method: str = "REML", theta0=None) -> MixedModelResult:
    """Fit a model from its sufficient statistics (see :func:`accumulate`)."""
    if method not in ("REML", "ML"):
        raise MixedModelError(f"method must be 'REML' or 'ML'; got {method!r}.")
    dev = _Deviance(s, reml=(method == "REML"))
    K = len(s.groups)
    x0 = np.ones(K) if theta0 is None else np.asarray(theta0, dtype=float)
    fit_warnings: list[str] = []
    bounds = [(0.0, None)] * K
    opts = {"ftol": 1e-13, "gtol": 1e-7, "maxiter": 5000, "maxcor": 20}
    res = optimize.minimize(dev.value_and_grad, x0, jac=True, method="L-BFGS-B", bounds=bounds, options=opts)
    n_eval = int(res.nfev)
    theta, best_f = res.x.copy(), float(res.fun)
    # The theta-gradient is 0 at theta_k = 0 whatever the data say, so a component can be trapped on the boundary.
    # Check the psi = theta^2 gradient there (d deviance / d psi_k): where it is negative the deviance decreases
    # away from 0; move that component off the boundary by a 1-D search and optimize again.
    for _ in range(2 * K):
        g_psi = dev.psi_gradient(theta)
        trapped = [k for k in range(K) if theta[k] <= 1e-8 and g_psi[k] < -1e-6]
        if not trapped:
            break
        start = theta.copy()
        for k in trapped:
            def along(t, k=k, start=start):
                x = start.copy()
                x[k] = t
                return dev(x)
            line = optimize.minimize_scalar(along, bounds=(0.0, max(2.0, 2 * float(start.max()))), method="bounded",
                                            options={"xatol": 1e-6})
            n_eval += int(line.nfev)
            start[k] = line.x
        r2 = optimize.minimize(dev.value_and_grad, start, jac=True, method="L-BFGS-B", bounds=bounds, options=opts)
        n_eval += int(r2.nfev)
        if r2.fun < best_f:
            theta, best_f, res = r2.x.copy(), float(r2.fun), r2
        else:
            break
    # convergence, as lme4 checks it: the Newton step H^-1 g (the "relative gradient") on the free components must
    # be small; components on the boundary need a non-negative psi-gradient (else the deviance falls off zero)
    _, grad = dev.value_and_grad(theta)
    free = theta > 0
    rel_step = 0.0
    if free.any():
        idx = np.flatnonzero(free)
        h = 1e-5 * np.maximum(theta[idx], 1e-3)
        hess = np.empty((len(idx), len(idx)))
        for j, (k, hk) in enumerate(zip(idx, h, strict=True)):
            t = theta.copy()
            t[k] += hk
            hess[:, j] = (dev.value_and_grad(t)[1][idx] - grad[idx]) / hk
        hess = 0.5 * (hess + hess.T)
        try:
            rel_step = float(np.max(np.abs(np.linalg.solve(hess, grad[idx]))))
        except np.linalg.LinAlgError:
            rel_step = float(np.max(np.abs(grad[idx])))
    boundary_ok = True
    if (~free).any():
        boundary_ok = bool((dev.psi_gradient(theta)[~free] >= -1e-6 * max(1.0, abs(best_f))).all())
    converged = bool(np.isfinite(best_f)) and rel_step < 2e-3 and boundary_ok
    message = str(res.message) + f" (max relative gradient {rel_step:.2g})"
    if not converged:
        fit_warnings.append(f"the optimizer did not report convergence: {message}")
        warnings.warn(f"Model failed to converge: {message}", ConvergenceWarning, stacklevel=3)
    value, parts = dev.evaluate(theta)
    RX, cbeta, r2 = parts[9], parts[10], parts[11]
    p = s.p
    n = s.n
    sigma2 = r2 / (n - p if method == "REML" else n)
    sigma = math.sqrt(sigma2)
    beta = _tri(RX, cbeta, lower=False) if p else np.zeros(0)
    RXinv = _tri(RX, np.eye(p), lower=False) if p else np.zeros((0, 0))
    V = sigma2 * (RXinv @ RXinv.T)
    se = np.sqrt(np.diag(V))
    fe = pd.DataFrame({"estimate": beta, "se": se, "z": beta / se}, index=s.fixed_names)
    fe.index.name = "term"
    b_big, b_o = dev.conditional_modes(theta, parts, beta)
    ranef = {s.groups[dev.big]: pd.Series(b_big, index=pd.Index(s.levels[dev.big], dtype=object))}
    for k in dev.others:
        ranef[s.groups[k]] = pd.Series(b_o[dev.slices[k]], index=pd.Index(s.levels[k], dtype=object))
    # variance components
    var = {g: (theta[k] * sigma) ** 2 for k, g in enumerate(s.groups)}
    var["Residual"] = sigma2
    vc = pd.DataFrame({"variance": pd.Series(var)})
    vc["sd"] = np.sqrt(vc["variance"])
    vc["percent"] = 100 * vc["variance"] / vc["variance"].sum()
    vc.index.name = "component"
    singular = bool((theta < SINGULAR_TOL).any())
    if singular:
        zero = [g for k, g in enumerate(s.groups) if theta[k] < SINGULAR_TOL]
        msg = (f"boundary (singular) fit: the variance of {', '.join(zero)} is estimated as (nearly) zero; the data "
               f"show no variation attributable to it beyond the other terms (lme4: see help('isSingular')).")
        fit_warnings.append(msg)
        warnings.warn(msg, SingularFitWarning, stacklevel=3)
    for a, b in _aliased_pairs(s):
        msg = (f"random factors {a} and {b} are aliased: their levels partition the data identically, so only the "
               f"sum of their variances ({a} + {b}) is identified; the split between them is arbitrary.")
        fit_warnings.append(msg)
        warnings.warn(msg, AliasedFactorsWarning, stacklevel=3)
    loglik = -0.5 * value
    return MixedModelResult(
        formula=s.formula.text, method=method, nobs=n,
        ngroups={g: len(lv) for g, lv in zip(s.groups, s.levels, strict=True)},
        theta=pd.Series(theta, index=s.groups), sigma=sigma, fixed_effects=fe, variance_components=vc,
        loglik=loglik, deviance=value, singular=singular, converged=converged, optimizer_message=message,
        n_evaluations=n_eval, vcov=pd.DataFrame(V, index=s.fixed_names, columns=s.fixed_names), ranef=ranef,
        warnings=fit_warnings, stats=s)


def fit(formula: str, data, method: str = "REML", dropna: bool = False) -> MixedModelResult:
    """Fit a linear mixed model with random intercepts, lme4-style.

    Parameters
    ----------
    formula : str
        lme4 syntax, e.g. ``"ter ~ system * src_length_class + (1|sentence_id)"`` or
        ``"score ~ (1|sentence) + (1|rater) + (1|sentence:rater)"``. Random slopes are rejected.
    data : DataFrame, iterable of DataFrames, or pyarrow Dataset
        Rows, or chunks of rows with the same columns (streamed once; memory independent of the row count).
    method : "REML" (default; variance components) or "ML" (likelihood ratio tests).
    dropna : drop rows with missing values in the model's columns instead of raising.
    """
    try:
        s = accumulate(formula, data, dropna=dropna)
    except FormulaError:
        raise
    result = fit_stats(s, method=method)
    if isinstance(data, pd.DataFrame):
        needed = list(dict.fromkeys([s.formula.response] + s.formula.fixed_variables + s.formula.random_variables))
        result._data = data[needed].dropna() if dropna else data[needed]
    return result


# ------------------------------------------------------------------------------------ likelihood ratio

@dataclass
class LRTResult:
    """Generalized likelihood ratio test of nested mixed models (book 4.3, appendix A)."""

    chi2: float
    df: int
    p_value: float
    loglik0: float
    loglik1: float
    refitted_ml: bool
    formula0: str
    formula1: str

    def __repr__(self) -> str:
        note = " (REML fits refitted by ML)" if self.refitted_ml else ""
        return f"LRTResult(chi2={self.chi2:.4f}, df={self.df}, p={self.p_value:.4g}{note})"

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"formula": [self.formula0, self.formula1], "logLik": [self.loglik0, self.loglik1],
                             "chi2": [np.nan, self.chi2], "df": [np.nan, self.df],
                             "p_value": [np.nan, self.p_value]}, index=["m0", "m1"])

    def _repr_html_(self) -> str:
        return self.to_frame().to_html(float_format=lambda x: f"{x:.6g}") + (
            "<p><i>REML fits with different fixed effects were refitted by ML, as lme4's anova does.</i></p>"
            if self.refitted_ml else "")


def lrt(m0: MixedModelResult, m1: MixedModelResult) -> LRTResult:
    """Likelihood ratio test of m0 (restricted) against m1 (general), as lme4's ``anova(m0, m1)``.

    REML fits whose fixed effects differ are refitted by ML first (REML likelihoods of different fixed effects
    are not comparable). Models on different data or not nested are refused.
    """
    s0, s1 = m0.stats, m1.stats
    if s0 is None or s1 is None:
        raise MixedModelError("lrt needs results of vrs_helpers.mixed.fit.")
    if (s0.formula.response != s1.formula.response or s0.n != s1.n
            or not math.isclose(s0.yty, s1.yty, rel_tol=1e-12) or not math.isclose(s0.ysum, s1.ysum, rel_tol=1e-12,
                                                                                      abs_tol=1e-12)):
        raise MixedModelError("The two models were fitted to different data (response, number of rows or values "
                              "differ); a likelihood ratio test needs the same rows.")
    if m0.n_params > m1.n_params:
        m0, m1 = m1, m0
        s0, s1 = s1, s0
    fe0, fe1 = set(s0.fixed_names), set(s1.fixed_names)
    re0, re1 = set(s0.groups), set(s1.groups)
    if not (fe0 <= fe1 and re0 <= re1) or m0.n_params == m1.n_params:
        raise MixedModelError(f"The models are not nested: {m0.formula!r} vs {m1.formula!r}. The restricted model's "
                              f"fixed and random terms must be a subset of the general model's.")
    refit = False
    if m0.method == "REML" or m1.method == "REML":
        if fe0 != fe1:
            m0 = fit_stats(s0, "ML") if m0.method == "REML" else m0
            m1 = fit_stats(s1, "ML") if m1.method == "REML" else m1
            refit = True
        elif m0.method != m1.method:
            raise MixedModelError("One model is REML and the other ML; fit both with the same method.")
    chi2 = max(0.0, 2.0 * (m1.loglik - m0.loglik))
    df = m1.n_params - m0.n_params
    return LRTResult(chi2, df, float(stats.chi2.sf(chi2, df)), m0.loglik, m1.loglik, refit, m0.formula, m1.formula)
