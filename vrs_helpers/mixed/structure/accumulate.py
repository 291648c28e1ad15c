"""One pass over the rows, as mergeable partial sums: the cross-products of :mod:`.design` for a linear mixed model.

:func:`accumulate` folds the chunks of a DataFrame, an iterable of DataFrame chunks or a pyarrow Dataset into one
:class:`PartialStats` and finalizes it: one accumulation code path for a single machine and for a cluster, where
:func:`accumulate_dask` computes one :class:`PartialStats` per partition of a dask DataFrame on the workers and
merges them in a deterministic tree (``pip install 'vrs-workbooks[dask]'``).

A :class:`PartialStats` holds the sums of some rows (a partition, a few chunks) with *local* level codes and the
level labels they stand for. :meth:`PartialStats.merge` aligns two partials by label (levels may first appear in
any partition) and adds their sums; it is associative, and merging partials in partition order reproduces the level
order (first appearance) of a single pass over the same rows, so :meth:`PartialStats.finalize` gives the same
:class:`.SufficientStats` for the same rows however they were split, up to the order of floating-point summation.
"""

from __future__ import annotations

import copy
from typing import Iterable

import numpy as np
import pandas as pd
from scipy import sparse

from ...dask_support import default_client, is_dask_dataframe, require_dask, wait_result
from .design import (
    Levels,
    SparseSum,
    SufficientStats,
    check_columns,
    check_rank,
    check_slopes,
    intern,
    is_factor,
    lme4_order,
    monomial_values,
    row_pairs,
    treatment_design,
    unique_names,
)
from .errors import MixedModelError
from .formula import Formula, parse


def column_kind(s: pd.Series) -> str:
    """'factor' or 'numeric': how the engine reads a column (the only dtype difference that matters)."""
    return "factor" if is_factor(s) else "numeric"


def _entries(acc: SparseSum) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, cols, values rows x k) of every key with a nonzero sum in any weight column."""
    if acc.sparse:
        if not len(acc.keys):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros((0, 1))
        keep = np.any(acc.vals != 0, axis=1)
        return acc.keys[keep] // (1 << 31), acc.keys[keep] % (1 << 31), acc.vals[keep]
    if acc.dense_arr is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros((0, 1))
    r, c = np.nonzero(np.any(acc.dense_arr != 0, axis=0))
    return r.astype(np.int64), c.astype(np.int64), acc.dense_arr[:, r, c].T


def _add_remapped(dst: SparseSum, src: SparseSum, row_map: np.ndarray, col_map: np.ndarray | None) -> None:
    rows, cols, vals = _entries(src)
    if not len(rows):
        return
    dst.add(row_map[rows], None if col_map is None else col_map[cols], vals)


def _merge_levels(dst: Levels, src: Levels) -> np.ndarray:
    """Add src's labels to dst (new ones after dst's, in src's order); returns src code -> dst code.

    The categorical order follows the rule of ``Levels.encode`` for a sequence of chunks: categories of the
    earlier rows first, new categories appended, and none once any rows were not categorical."""
    if not src.values:
        return np.zeros(0, dtype=np.int64)
    if not dst.values:
        dst.categories = None if src.categories is None else list(src.categories)
    elif dst.categories is None or src.categories is None:
        dst.categories = None
    else:
        known = set(dst.categories)
        dst.categories = dst.categories + [c for c in src.categories if c not in known]
    return intern(dst.index, dst.values, src.values)


def _merge_keys(dst_index: dict, dst_keys: list, src_keys: list, maps: list[np.ndarray]) -> np.ndarray:
    """Tuples of per-variable codes (cells, interaction groupings) re-coded with ``maps`` and added to dst."""
    return intern(dst_index, dst_keys, [tuple(int(m[c]) for m, c in zip(maps, key, strict=True)) for key in src_keys])


class PartialStats:
    """Sums of a mixed model's cross-products over some rows, with their level labels (see the module docstring).

    ``PartialStats(formula).add(chunk)`` for each chunk, ``a.merge(b)`` for two partials (a's rows first),
    ``finalize()`` for the :class:`.SufficientStats` that ``fit_stats`` fits. ``label`` names where the rows came
    from (e.g. "partition 3") in error messages.
    """

    def __init__(self, formula: str | Formula, dropna: bool = False, label: str | None = None):
        f = parse(formula) if isinstance(formula, str) else formula
        self.formula = f
        self.dropna = dropna
        self.label = label
        self.needed = list(dict.fromkeys([f.response] + f.fixed_variables + f.random_variables
                                         + f.random_covariates))
        self.terms = list(f.random_terms)
        K = len(self.terms)
        self.kinds: dict[str, bool] | None = None  # fixed variable -> is factor
        self.kinds_from: str | None = None  # label of the rows that set kinds
        self.n = 0
        self.ysum = self.yty = 0.0
        self.fixed_factors: list[str] = []
        self.numerics: list[str] = []
        self.monomials: list[tuple[str, ...]] = []
        self.cell_levels: dict[str, Levels] = {}
        self.cell_index: dict[tuple, int] = {}
        self.cell_keys: list[tuple] = []
        self.WtW = SparseSum()
        self.Wty = SparseSum()
        self.num_sums: dict[str, float] = {}
        self.distinct = list(dict.fromkeys(t.group for t in self.terms))
        self.gidx = [self.distinct.index(t.group) for t in self.terms]
        self.grp_levels = [Levels(Formula.group_name(g)) for g in self.distinct]
        self.var_levels = {v: Levels(v) for v in f.random_variables}
        self.diag = [SparseSum() for _ in self.terms]
        self.ZtW = [SparseSum() for _ in self.terms]
        self.Zy = [SparseSum() for _ in self.terms]
        self.cross = {(k, j): SparseSum() for k in range(K) for j in range(k + 1, K)}
        self.moments = {(self.gidx[k], v): SparseSum() for k, t in enumerate(self.terms) for v in t.variables}

    def __repr__(self) -> str:
        return (f"PartialStats(n={self.n}, "
                f"levels={[len(self._group_values(i)) for i in range(len(self.distinct))]}, "
                f"cells={len(self.cell_keys)})")

    def _where(self) -> str:
        return f" ({self.label})" if self.label else ""

    # ------------------------------------------------------------------------------------------ rows
    def add(self, chunk: pd.DataFrame) -> PartialStats:
        """Add the rows of one DataFrame chunk (in place); returns self."""
        f, terms, K = self.formula, self.terms, len(self.terms)
        if not isinstance(chunk, pd.DataFrame):
            raise MixedModelError(f"Every chunk must be a DataFrame; got {type(chunk).__name__}{self._where()}.")
        try:
            check_columns(chunk, self.needed)
        except MixedModelError as e:
            raise MixedModelError(f"{e}{self._where()}") from None
        if len(chunk) == 0:
            return self
        needed = self.needed
        missing = {c: chunk[c].isna().to_numpy() for c in needed}
        counts = {c: int(v.sum()) for c, v in missing.items()}
        if any(counts.values()):
            nan_rows = np.logical_or.reduce(list(missing.values()))
            if not self.dropna:
                detail = ", ".join(f"{c}: {k}" for c, k in counts.items() if k)
                raise MixedModelError(f"{int(nan_rows.sum())} rows have missing values ({detail}){self._where()}. "
                                      f"Drop them first or call fit(..., dropna=True) to drop them.")
            chunk = chunk.loc[~nan_rows, needed]
            if len(chunk) == 0:
                return self
        del missing
        kinds = {v: is_factor(chunk[v]) for v in f.fixed_variables}
        if self.kinds is None:
            self._set_kinds(kinds, self.label)
            for t in terms:
                for v in t.variables:
                    if is_factor(chunk[v]):
                        raise MixedModelError(
                            f"The random slope variable {v!r} in {t} is a factor ({chunk[v].dtype}){self._where()}; "
                            f"factor slopes are coded from an in-memory DataFrame (mixed.fit(formula, df), as lme4 "
                            f"codes them), not from streamed chunks, whose levels are not known in advance. Code "
                            f"{v!r} as numeric 0/1 columns, or use a random intercept of the interaction, "
                            f"(1|{t.group_name}:{v}).")
        else:
            self._check_kinds(kinds, self.label)
        y = chunk[f.response]
        if not pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y):
            raise MixedModelError(f"The response {f.response!r} must be numeric; it has dtype {y.dtype}"
                                  f"{self._where()}.")
        y = y.to_numpy(dtype=float)
        if not np.isfinite(y).all():
            raise MixedModelError(f"The response {f.response!r} has infinite values{self._where()}.")
        m = len(y)
        self.n += m
        self.ysum += float(y.sum())
        self.yty += float(y @ y)
        for v in self.numerics + f.random_covariates:
            if not pd.api.types.is_numeric_dtype(chunk[v]) or is_factor(chunk[v]):
                raise MixedModelError(f"Column {v!r} is numeric in {self.kinds_from or 'the first rows'} but "
                                      f"{chunk[v].dtype}{self._where()}.")
        for v in self.numerics:
            self.num_sums[v] += float(chunk[v].sum())
        mono_vals = monomial_values(chunk, self.monomials)
        if self.fixed_factors:
            codes = np.column_stack([self.cell_levels[v].encode(chunk[v]) for v in self.fixed_factors])
            radix = [int(codes[:, j].max()) + 1 for j in range(codes.shape[1])]
            joint = codes[:, 0].copy()
            for j in range(1, codes.shape[1]):
                joint = joint * radix[j] + codes[:, j]
            inv, keys = pd.factorize(joint)
            uniq = np.empty((len(keys), codes.shape[1]), dtype=np.int64)
            rest = np.asarray(keys, dtype=np.int64)
            for j in range(codes.shape[1] - 1, 0, -1):
                rest, uniq[:, j] = np.divmod(rest, radix[j])
            uniq[:, 0] = rest
            cell = intern(self.cell_index, self.cell_keys, list(map(tuple, uniq.tolist())))[inv]
        else:
            if not self.cell_keys:
                self.cell_index[()] = 0
                self.cell_keys.append(())
            cell = np.zeros(m, dtype=np.int64)
        intercept_only = len(self.monomials) == 1
        self.WtW.add(cell, None, None if intercept_only else row_pairs(mono_vals, mono_vals))
        self.Wty.add(cell, None, y if intercept_only else mono_vals * y[:, None])
        var_codes = {v: self.var_levels[v].encode(chunk[v]) for v in f.random_variables}
        gcodes_d = []
        for i, g in enumerate(self.distinct):
            if len(g) == 1:
                gcodes_d.append(var_codes[g[0]])
            else:
                gcodes_d.append(self.grp_levels[i].encode_joint([var_codes[v] for v in g]))
        gcodes = [gcodes_d[self.gidx[k]] for k in range(K)]
        zvals = [None if t.intercept_only else monomial_values(chunk, t.covariates) for t in terms]
        for k in range(K):
            z = zvals[k]
            if z is None:
                self.ZtW[k].add(gcodes[k], cell, None if intercept_only else mono_vals)
                self.Zy[k].add(gcodes[k], None, y)
            else:
                self.diag[k].add(gcodes[k], None, row_pairs(z, z))
                self.ZtW[k].add(gcodes[k], cell, row_pairs(z, mono_vals))
                self.Zy[k].add(gcodes[k], None, z * y[:, None])
            for j in range(k + 1, K):
                zj = zvals[j]
                w = None if z is None and zj is None else row_pairs(np.ones((m, 1)) if z is None else z,
                                                                 np.ones((m, 1)) if zj is None else zj)
                if self.gidx[j] == self.gidx[k]:
                    self.cross[(k, j)].add(gcodes[k], None, w)
                else:
                    self.cross[(k, j)].add(gcodes[k], gcodes[j], w)
        for (gi, v), acc in self.moments.items():
            x = chunk[v].to_numpy(dtype=float)
            acc.add(gcodes_d[gi], None, np.column_stack([np.ones(m), x, x * x]))
        return self

    def _set_kinds(self, kinds: dict, label: str | None) -> None:
        f = self.formula
        self.kinds = dict(kinds)
        self.kinds_from = label
        self.fixed_factors = [v for v in f.fixed_variables if kinds[v]]
        self.numerics = [v for v in f.fixed_variables if not kinds[v]]
        # the indicator monomial () comes first whatever the term order: counts are read from it
        self.monomials = [()] + [mo for mo in dict.fromkeys(tuple(v for v in t if not kinds[v])
                                                            for t in f.fixed_terms) if mo != ()]
        self.cell_levels = {v: Levels(v) for v in self.fixed_factors}
        self.num_sums = {v: 0.0 for v in self.numerics}

    def _check_kinds(self, kinds: dict, label: str | None) -> None:
        for v, factor_now in kinds.items():
            if factor_now != self.kinds[v]:
                was = "a factor" if self.kinds[v] else "numeric"
                now = "a factor" if factor_now else "numeric"
                raise MixedModelError(
                    f"Column {v!r} is {was} in {self.kinds_from or 'the first rows'} but {now} in "
                    f"{label or 'later rows'}: every partition must give a column the same type. Cast it "
                    f"(e.g. .astype(str) for a factor) before fitting.")

    # ------------------------------------------------------------------------------------------ merge
    def _group_values(self, i: int) -> list:
        g = self.distinct[i]
        return self.var_levels[g[0]].values if len(g) == 1 else self.grp_levels[i].values

    def merge(self, other: PartialStats) -> PartialStats:
        """A new partial with the rows of self followed by the rows of other (neither is changed)."""
        if other.formula != self.formula:
            raise MixedModelError("Partial statistics of different formulas cannot be merged.")
        if self.kinds is None:
            out = copy.deepcopy(other)
        else:
            out = copy.deepcopy(self)
            out._absorb(other)
        out.label = self.label if self.label == other.label else None
        return out

    def _absorb(self, other: PartialStats) -> None:
        """Add other's rows after self's, in place."""
        out = self
        if other.kinds is None:
            return
        out._check_kinds(other.kinds, other.kinds_from)
        out.n += other.n
        out.ysum += other.ysum
        out.yty += other.yty
        for v in out.numerics:
            out.num_sums[v] += other.num_sums[v]
        fmaps = [_merge_levels(out.cell_levels[v], other.cell_levels[v]) for v in out.fixed_factors]
        cmap = _merge_keys(out.cell_index, out.cell_keys, other.cell_keys, fmaps)
        vmaps = {v: _merge_levels(out.var_levels[v], other.var_levels[v]) for v in self.formula.random_variables}
        gmaps = []
        for i, g in enumerate(out.distinct):
            if len(g) == 1:
                gmaps.append(vmaps[g[0]])
            else:
                keys = other.grp_levels[i].values
                out.grp_levels[i].categories = None
                gmaps.append(_merge_keys(out.grp_levels[i].index, out.grp_levels[i].values, keys,
                                         [vmaps[v] for v in g]))
        _add_remapped(out.WtW, other.WtW, cmap, None)
        _add_remapped(out.Wty, other.Wty, cmap, None)
        for k in range(len(out.terms)):
            gm = gmaps[out.gidx[k]]
            _add_remapped(out.ZtW[k], other.ZtW[k], gm, cmap)
            _add_remapped(out.Zy[k], other.Zy[k], gm, None)
            _add_remapped(out.diag[k], other.diag[k], gm, None)
        for (k, j), acc in other.cross.items():
            same = out.gidx[j] == out.gidx[k]
            _add_remapped(out.cross[(k, j)], acc, gmaps[out.gidx[k]], None if same else gmaps[out.gidx[j]])
        for (gi, v), acc in other.moments.items():
            _add_remapped(out.moments[(gi, v)], acc, gmaps[gi], None)

    # ------------------------------------------------------------------------------------------ finalize
    def finalize(self) -> SufficientStats:
        """The model's :class:`.SufficientStats` (as :func:`.accumulate.accumulate` returns for the same rows)."""
        f, terms, K = self.formula, self.terms, len(self.terms)
        n = self.n
        if self.kinds is None or n == 0:
            raise MixedModelError("The data are empty: no rows to fit.")
        if n < 3:
            raise MixedModelError(f"Only {n} observations: a mixed model needs at least 3.")
        distinct, gidx = self.distinct, self.gidx
        dlevels = []
        for i, g in enumerate(distinct):
            if len(g) == 1:
                dlevels.append(list(self.var_levels[g[0]].values))
            else:
                dlevels.append([":".join(str(self.var_levels[v].values[c]) for v, c in zip(g, key, strict=True))
                                for key in self.grp_levels[i].values])
            if len(dlevels[i]) < 2:
                raise MixedModelError(f"The random factor {Formula.group_name(g)!r} has a single level "
                                      f"({dlevels[i][0]!r}): a variance between levels needs at least 2 (lme4 "
                                      f"refuses too).")
        levels = [dlevels[gidx[k]] for k in range(K)]
        sizes = [len(lv) for lv in levels]
        check_slopes(terms, distinct, dlevels, self.moments)
        monomials = self.monomials
        Mn = len(monomials)
        n_cells = len(self.cell_keys)
        w = n_cells * Mn
        WtW_d = np.zeros((w, w))
        Wty_d = np.zeros(w)
        pair_sums = np.column_stack([self.WtW.dense(n_cells, 1, j)[:, 0] for j in range(Mn * Mn)])
        mono_sums = np.column_stack([self.Wty.dense(n_cells, 1, j)[:, 0] for j in range(Mn)])
        for c in range(n_cells):
            WtW_d[c * Mn:(c + 1) * Mn, c * Mn:(c + 1) * Mn] = pair_sums[c].reshape(Mn, Mn)
            Wty_d[c * Mn:(c + 1) * Mn] = mono_sums[c]
        ZtW_d, Zty_d, ZtZ_diag = [], [], []
        for k, t in enumerate(terms):
            r, mk = t.r, sizes[k]
            mat = np.zeros((mk, r, n_cells, Mn))
            for c in range(r):
                for j in range(Mn):
                    mat[:, c, :, j] = self.ZtW[k].dense(mk, n_cells, c * Mn + j)
            ZtW_d.append(mat.reshape(mk * r, w))
            Zty_d.append(np.column_stack([self.Zy[k].dense(mk, 1, c)[:, 0] for c in range(r)]).reshape(-1))
            if t.intercept_only:
                ZtZ_diag.append(mat[:, 0, :, 0].sum(axis=1).reshape(mk, 1, 1))
            else:
                ZtZ_diag.append(np.stack([self.diag[k].dense(mk, 1, j)[:, 0] for j in range(r * r)],
                                         axis=1).reshape(mk, r, r))
        ZtZ_cross = {}
        for (k, j), acc in self.cross.items():
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
            ZtZ_cross[(k, j)] = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows),
                                                                          np.concatenate(cols))),
                                                  shape=(sizes[k] * rk, sizes[j] * rj))
        fixed_factors = self.fixed_factors
        factor_levels = {v: self.cell_levels[v].order() for v in fixed_factors}
        for v, lv in factor_levels.items():
            if len(lv) < 2:
                raise MixedModelError(f"The fixed-effect factor {v!r} has a single level ({lv[0]!r}): it has no "
                                      f"contrast to estimate; remove it from the formula.")
        cell_frame = pd.DataFrame([[self.cell_levels[v].values[c] for v, c in zip(fixed_factors, key, strict=True)]
                                   for key in self.cell_keys], columns=fixed_factors)
        names, T = treatment_design(f, fixed_factors, self.numerics, monomials, factor_levels, cell_frame)
        XtX = T.T @ WtW_d @ T
        Xty = T.T @ Wty_d
        ZtX = [mat @ T for mat in ZtW_d]
        cell_frame["n"] = np.array([WtW_d[c * Mn, c * Mn] for c in range(n_cells)]).astype(int)
        order = lme4_order(sizes)
        names_lme4 = unique_names([terms[k].group_name for k in order])
        groups = [""] * K
        for pos, k in enumerate(order):
            groups[k] = names_lme4[pos]
        s = SufficientStats(f, n, terms, groups, levels, ZtZ_diag, ZtZ_cross, ZtX, Zty_d, XtX, Xty, self.yty,
                            self.ysum, names, factor_levels, {v: self.num_sums[v] / n for v in self.numerics},
                            cell_frame, monomials, T, order)
        check_rank(s)
        return s


def partial(formula: str | Formula, data: pd.DataFrame, dropna: bool = False, label: str | None = None
            ) -> PartialStats:
    """The partial statistics of one DataFrame (e.g. a partition), labelled for error messages."""
    return PartialStats(formula, dropna=dropna, label=label).add(data)


def merge_all(parts: list[PartialStats]) -> PartialStats:
    """Merge partials left to right (their rows in list order)."""
    if not parts:
        raise MixedModelError("No partial statistics to merge.")
    out = copy.deepcopy(parts[0])
    for p in parts[1:]:
        if out.kinds is None:
            out = copy.deepcopy(p)
        else:
            out._absorb(p)
    out.label = None
    return out


def chunks_of(data) -> Iterable[pd.DataFrame]:
    """The DataFrame chunks of ``data``: a DataFrame, a pyarrow Dataset (its record batches) or an iterable of
    DataFrames."""
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
    yield from data


def accumulate(formula: str | Formula, data, dropna: bool = False) -> SufficientStats:
    """One pass over ``data`` (DataFrame, iterable of DataFrame chunks, pyarrow Dataset, dask DataFrame): the
    model's cross-products, by folding every chunk into one :class:`PartialStats` (a dask DataFrame: one per
    partition on its cluster, :func:`accumulate_dask`)."""
    if is_dask_dataframe(data):
        return accumulate_dask(formula, data, dropna=dropna)
    acc = PartialStats(formula, dropna=dropna)
    columns = None
    for chunk in chunks_of(data):
        if not isinstance(chunk, pd.DataFrame):
            raise MixedModelError(f"Every chunk must be a DataFrame; got {type(chunk).__name__}.")
        if columns is None:
            columns = list(chunk.columns)
        elif list(chunk.columns) != columns:
            raise MixedModelError(f"Chunks have different columns: the first has {columns}, a later one "
                                  f"{list(chunk.columns)}. Every chunk must have the same columns.")
        acc.add(chunk)
    return acc.finalize()


# ------------------------------------------------------------------------------------------- Dask partitions

def _partition_partial(df, formula: str, dropna: bool, label: str, kinds: dict):
    """Partial statistics of one partition, after checking its columns against the dataset's schema."""
    missing = [c for c in kinds if c not in df.columns]
    if missing:
        raise MixedModelError(f"{label} has no column(s) {missing} (its columns: {list(df.columns)}); every "
                              f"partition must have the dataset's columns.")
    for c, kind in kinds.items():
        if column_kind(df[c]) != kind:
            raise MixedModelError(f"{label}: column {c!r} has dtype {df[c].dtype} ({column_kind(df[c])}) but is "
                                  f"{kind} in the dataset's schema; every partition must give a column the same "
                                  f"type. Cast it before fitting (e.g. ddf[{c!r}].astype(...)).")
    return partial(formula, df, dropna=dropna, label=label)


def _merge(*parts):
    return merge_all(list(parts))


def _describe(df) -> tuple[list, dict]:
    return list(df.columns), {c: f"{df[c].dtype} ({column_kind(df[c])})" for c in df.columns}


def _diagnose(ddf, needed: list[str], client=None) -> str | None:
    """Which partition cannot be read or differs from the first in its columns or column kinds (error path)."""
    import dask

    parts = ddf.to_delayed()
    tasks = [dask.delayed(_describe)(p) for p in parts]
    desc: list = []
    if client is not None:
        from distributed import wait

        futures = client.compute(tasks)
        wait(futures)
        desc = [f.exception() if f.status == "error" else f.result() for f in futures]
    else:
        for t in tasks:
            try:
                desc.append(t.compute())
            except Exception as exc:  # noqa: BLE001 - reported with the partition's number
                desc.append(exc)
    n = len(parts)
    for i, d in enumerate(desc):
        if isinstance(d, BaseException):
            return f"partition {i} of {n} cannot be read with the dataset's columns ({type(d).__name__}: {d})"
    cols0, kinds0 = desc[0]
    for i, (cols, kinds) in enumerate(desc):
        lost = [c for c in needed if c in cols0 and c not in cols]
        if lost:
            return f"partition {i} of {n} has no column(s) {lost} (partition 0 has them)"
        for c in needed:
            if c in kinds and c in kinds0 and kinds[c].split(" ")[-1] != kinds0[c].split(" ")[-1]:
                return f"partition {i} of {n}: column {c!r} is {kinds[c]}, in partition 0 {kinds0[c]}"
    return None


def accumulate_dask(formula, ddf, dropna: bool = False, split_every: int = 4, client=None):
    """The :class:`~vrs_helpers.mixed.SufficientStats` of a dask DataFrame, computed on the cluster.

    Per partition a :class:`~vrs_helpers.mixed.partial.PartialStats` (keyed by level labels), merged
    ``split_every`` at a time in partition order, finalized on the client: the result equals
    ``mixed.accumulate`` over the partitions in order up to floating-point summation. Uses ``client`` or the
    default client (else dask's local scheduler). Only the model's columns are read (projection).
    """
    require_dask()
    import dask

    f = parse(formula) if isinstance(formula, str) else formula
    needed = list(dict.fromkeys([f.response] + f.fixed_variables + f.random_variables + f.random_covariates))
    meta = ddf._meta
    check_columns(meta, needed)
    kinds = {c: column_kind(meta[c]) for c in needed}
    parts = ddf[needed].to_delayed()
    npart = len(parts)
    text = formula if isinstance(formula, str) else f
    level = [dask.delayed(_partition_partial, pure=True)(p, text, dropna, f"partition {i} of {npart}", kinds)
             for i, p in enumerate(parts)]
    split_every = max(2, int(split_every))
    while len(level) > 1:  # deterministic tree: consecutive groups, merged left to right
        level = [dask.delayed(_merge, pure=True)(*level[i:i + split_every]) if len(level[i:i + split_every]) > 1
                 else level[i] for i in range(0, len(level), split_every)]
    client = client or default_client()
    try:
        merged = wait_result(client.compute(level[0]), client) if client is not None else level[0].compute()
    except MixedModelError:
        raise
    except (KeyError, ValueError, TypeError) as exc:
        where = _diagnose(ddf, needed, client)
        if where:
            raise MixedModelError(f"Inconsistent partitions: {where}. Every partition must have the same columns "
                                  f"with the same types.") from exc
        raise
    return merged.finalize()
