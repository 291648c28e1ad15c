"""One accumulation shared by the fits of one data set: the models of a comparison differ in their fixed effects
only (``y ~ system + (1|item)`` against ``y ~ 1 + (1|item)``, the same with a data property ``system * P`` and
``P``), and every one of them is a sum over the same rows.

Under treatment contrasts a fixed-effects column is named after what it holds (``(Intercept)``, ``systemB``,
``length``, ``systemB:length``), so a model whose column names are among a wider model's has X = X_wide S for the
selection S of those columns, and its statistics follow from the wider model's without reading the rows again:
X'X = S'X_wide'X_wide S, Z'X = Z'X_wide S, X'y = S'X_wide'y, with the same Z'Z, Z'y and y'y (:func:`restrict`; the
cells of the fixed factors and the map T of :mod:`.design` rebuilt for the model's own factors).
:class:`ModelCache` accumulates each random part once - the union of the fixed parts it was told to expect
(:meth:`ModelCache.plan`) - and keeps every fit it made, so readings that need the same model share it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..structure.accumulate import accumulate
from ..structure.design import SufficientStats, check_rank, treatment_design
from ..structure.errors import MixedModelError
from ..structure.formula import Formula, FormulaError, parse


def restrict(s: SufficientStats, formula: str | Formula) -> SufficientStats | None:
    """The statistics of ``formula`` from those of a wider model ``s`` of the same rows (module docstring): same
    response and random terms, every fixed-effects column of ``formula`` a column of ``s``. None when it is not
    such a model (then accumulate it from the rows)."""
    f = parse(formula) if isinstance(formula, str) else formula
    wide = s.formula
    if f.response != wide.response or f.random_terms != wide.random_terms:
        return None
    factors = [v for v in f.fixed_variables if v in s.factor_levels]
    numerics = [v for v in f.fixed_variables if v not in s.factor_levels]
    if any(v not in s.numeric_means for v in numerics):
        return None  # a variable the wider model does not have
    monomials = [()] + [mo for mo in dict.fromkeys(tuple(v for v in t if v not in factors) for t in f.fixed_terms)
                        if mo != ()]
    if factors:  # the wider model's cells merged (their first-appearance order is the rows')
        cells = s.cells.groupby(factors, sort=False, observed=True)["n"].sum().reset_index()
    else:
        cells = pd.DataFrame({"n": [int(s.cells["n"].sum())]})
    factor_levels = {v: s.factor_levels[v] for v in factors}
    try:
        names, T = treatment_design(f, factors, numerics, monomials, factor_levels, cells.drop(columns="n"))
    except FormulaError:
        return None
    position = {name: i for i, name in enumerate(s.fixed_names)}
    if any(name not in position for name in names):
        return None
    idx = np.array([position[name] for name in names], dtype=np.int64)
    out = replace(s, formula=f, ZtX=[z[:, idx] for z in s.ZtX], XtX=s.XtX[np.ix_(idx, idx)], Xty=s.Xty[idx],
                  fixed_names=names, factor_levels=factor_levels,
                  numeric_means={v: s.numeric_means[v] for v in numerics}, cells=cells, monomials=monomials, T=T)
    check_rank(out)
    return out


def _union(formulas: list[Formula]) -> str:
    """The formula whose fixed part holds every fixed term of ``formulas`` (same response and random terms)."""
    f0 = formulas[0]
    terms = list(dict.fromkeys(t for f in formulas for t in f.fixed_terms))
    fixed = " + ".join(["1" if any(f.intercept for f in formulas) else "0"] + [":".join(t) for t in terms])
    return f"{f0.response} ~ {fixed} + " + " + ".join(str(t) for t in f0.random_terms)


class ModelCache:
    """Linear mixed models of one data set (a DataFrame, chunks, a dask DataFrame), fitted from shared
    accumulations (module docstring): ``cache.fit(formula, method)`` is ``mixed.fit(formula, data, method)``, up to
    the order in which the sums were added. Fits are kept: asking twice for a model gives the same fit.
    ``plan(formula, ...)`` names models still to come, so the first accumulation of their random part already holds
    their columns. Models with random slopes are fitted from their own rows (factor slopes are coded from them)."""

    def __init__(self, data):
        self.data = data
        self._planned: list[Formula] = []
        self._stats: list[SufficientStats] = []
        self._fits: dict = {}

    def plan(self, *formulas: str) -> ModelCache:
        """Formulas whose fixed columns the accumulation of their random part should hold (returns self)."""
        self._planned += [parse(f) for f in formulas]
        return self

    def stats(self, formula: str) -> SufficientStats:
        """The model's sufficient statistics: from an accumulation made for this random part when it holds the
        model's columns, else one pass over the rows for the model and every planned one of its random part."""
        f = parse(formula)
        for s in self._stats:
            out = restrict(s, f)
            if out is not None:
                return out
        same = [g for g in self._planned if g.response == f.response and g.random_terms == f.random_terms]
        if same:
            try:
                wide = accumulate(_union([f, *same]), self.data)
            except (MixedModelError, FormulaError):  # a planned column the rows cannot give: the model alone
                wide = None
            out = restrict(wide, f) if wide is not None else None
            if out is not None:
                self._stats.append(wide)
                return out
        s = accumulate(f, self.data)
        self._stats.append(s)
        return s

    def fit(self, formula: str, method: str = "REML", start=None):
        """The fitted :class:`~vrs_helpers.mixed.LinearMixedModel` of ``formula`` by ``method`` (kept). ``start``: a
        fit with the same random terms whose estimates start the optimizer (:func:`.results.warm_start`)."""
        from .results import LinearMixedModel, warm_start

        key = (formula, method)
        if key not in self._fits:
            reml, ml = self._fits.get((formula, "REML")), self._fits.get((formula, "ML"))
            if method == "ML" and reml is not None:
                self._fits[key] = reml.ml_fit()  # the refit lme4's anova makes, shared
            elif not parse(formula).intercepts_only:
                self._fits[key] = LinearMixedModel(formula, self.data, method=method).fit()
            else:
                done = reml if reml is not None else ml
                stats = done.stats if done is not None else self.stats(formula)
                model = LinearMixedModel.from_stats(stats, method)
                model._data = _rows(self.data, stats.formula)
                self._fits[key] = model.fit(theta0=warm_start(stats, start))
            if method == "REML" and ml is not None:
                self._fits[key]._ml = ml
        return self._fits[key]


def _rows(data, f: Formula):
    """The model's columns of in-memory rows (fitted values and residuals need them), as LinearMixedModel keeps
    them; None for chunks or a dask DataFrame."""
    if not isinstance(data, pd.DataFrame):
        return None
    return data[list(dict.fromkeys([f.response] + f.fixed_variables + f.random_variables + f.random_covariates))]


__all__ = ["ModelCache", "restrict"]
