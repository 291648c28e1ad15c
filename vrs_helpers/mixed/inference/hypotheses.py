"""The hypotheses of the type I, II and III anova tables of a linear mixed model, as lmerTest 3.1 defines them
(Kuznetsova, Brockhoff & Christensen 2017, section 5; lmerTest's ``get_contrasts_type1``,
``get_contrasts_type2_unfolded`` and ``get_contrasts_type3``), for the treatment-coded fixed effects the engine fits.

Each table row tests one formula term: H0: L beta = 0 for a term's hypothesis matrix L (rows: the term's
contrasts, columns: the fixed effects ``result.fixed_effects.index``). The F tests with Satterthwaite's or
Kenward-Roger's denominator df are :func:`vrs_helpers.mixed.inference.ddf.anova` (``result.anova(type=..., ddf=...)``).

- **Type III** (the default, lmerTest's ``anova(m)``): the marginal hypothesis of every term, which does not depend
  on the contrasts used to code the factors. With rdX the over-parametrized design (an intercept and, per term, an
  indicator column for every combination of its factors' levels, times its numeric variables: R's
  ``model.matrix(~ 0 + term)``), the matrix L0 = (X^+ rdX)' writes every rdX column in the treatment-coded columns.
  Going from the highest-order terms down, the columns of L0 that belong to a term are replaced by their residuals
  after regression (over L0's rows) on the columns of the terms that contain it (a term contains another when it has
  all of its variables and more, and the same numeric variables). A term's hypothesis is then its columns of L0 at
  the rows of X's own columns. For factors this is the classical type III hypothesis: a main effect compares the
  factor's levels averaged with equal weights over the levels of the factors it interacts with; an interaction
  tests the interaction contrasts of the cell means. Numeric covariates enter as they are (not centred), as in R:
  a factor's type III test in a model with ``factor:x`` is its effect at x = 0.
- **Type II** (``type=2``): terms contained in no other term are tested by their own columns (marginal); every other
  term by lmerTest's type II contrast: the columns are reordered to (unrelated terms, the term, the terms containing
  it) and the term's rows of the Doolittle factor of the reordered X'X (the term adjusted for everything except the
  terms containing it).
- **Type I** (``type=1``): sequential tests, the term's rows of the Doolittle factor of X'X in the formula's order
  (each term adjusted for the terms before it).

With a single term (or a single column) every type is type I, as in lmerTest. Types I and II depend on the data's
balance through X'X (the model's sufficient statistics); type III only on the design's cells.
"""

from __future__ import annotations

import math

import numpy as np

from ..structure.errors import MixedModelError

TYPES = (1, 2, 3)


def _type(type_) -> int:
    key = str(type_).strip().upper()
    key = {"I": "1", "II": "2", "III": "3"}.get(key, key)
    if key not in ("1", "2", "3"):
        raise MixedModelError(f"type must be 1, 2 or 3 (or 'I', 'II', 'III'); got {type_!r}.")
    return int(key)


def zapsmall(x: np.ndarray, digits: int = 7) -> np.ndarray:
    """R's ``zapsmall``: round to ``digits`` significant digits relative to the largest absolute entry."""
    x = np.asarray(x, dtype=float)
    mx = float(np.nanmax(np.abs(x))) if x.size else 0.0
    nd = max(0, digits - math.ceil(math.log10(mx))) if mx > 0 else digits
    return np.round(x, nd)


def doolittle(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """The unit lower-triangular L of lmerTest's ``doolittle(x)`` (x = L U), entries below ``eps`` set to 0."""
    n = x.shape[0]
    L = np.eye(n)
    U = np.zeros((n, n))
    for i in range(n):
        U[i, :] = x[i, :] - L[i, :i] @ U[:i, :]
        if i + 1 < n:
            col = x[i + 1:, i] - L[i + 1:, :i] @ U[:i, i]
            L[i + 1:, i] = 0.0 if abs(U[i, i]) < eps else col / U[i, i]
    L[np.abs(L) < eps] = 0.0
    return L


class _Design:
    """The model's terms, the columns of X each one owns, and the cell basis of :mod:`.design` (X = W T)."""

    def __init__(self, s):
        f = s.formula
        self.s = s
        self.terms = [tuple(t) for t in f.fixed_terms]
        self.labels = [":".join(t) for t in self.terms]
        self.factors = dict(s.factor_levels)
        self.numerics = {t: tuple(v for v in t if v not in self.factors) for t in self.terms}
        names = list(s.fixed_names)
        # R's coding (design.treatment_design): a factor is coded in full only as the first single-factor term of a
        # model without intercept; every other factor drops its reference level
        assign, pos, first_full = [], 0, not f.intercept
        if f.intercept:
            assign.append(-1)
            pos = 1
        self.cols = {}
        for k, term in enumerate(self.terms):
            facs = [v for v in term if v in self.factors]
            full = first_full and len(term) == 1 and len(facs) == 1
            first_full = first_full and not full
            width = math.prod(len(self.factors[v]) - (0 if full else 1) for v in facs)
            self.cols[self.labels[k]] = list(range(pos, pos + width))
            assign += [k] * width
            pos += width
        if pos != len(names):
            raise MixedModelError(f"cannot map the {len(names)} fixed-effect columns to the formula's terms "
                                  f"({pos} expected); the anova table needs the engine's treatment-coded design.")
        self.names = names
        self.contains = {}
        for a, ta in zip(self.labels, self.terms, strict=True):
            self.contains[a] = [b for b, tb in zip(self.labels, self.terms, strict=True)
                                if set(ta) < set(tb) and set(self.numerics[ta]) == set(self.numerics[tb])]

    def rdx(self) -> tuple[np.ndarray, list[str]]:
        """The over-parametrized design rdX in the cell basis (cells x monomials rows), with R's column names."""
        s = self.s
        cells, monos = s.cells, s.monomials
        Mn, nc = len(monos), len(cells)
        cols, names = [], []
        if s.formula.intercept:
            c = np.zeros(nc * Mn)
            c[np.arange(nc) * Mn + monos.index(())] = 1.0
            cols.append(c)
            names.append("(Intercept)")
        for term in self.terms:
            facs = [v for v in term if v in self.factors]
            j = monos.index(tuple(v for v in term if v not in self.factors))
            combos = [()]
            for v in facs:  # the first factor varies fastest, as in R's model.matrix
                combos = [c + (x,) for x in self.factors[v] for c in combos]
            where = {v: i for i, v in enumerate(facs)}
            for combo in combos:
                ind = np.ones(nc, dtype=bool)
                for v, x in zip(facs, combo, strict=True):
                    ind &= (cells[v] == x).to_numpy()
                c = np.zeros(nc * Mn)
                c[np.flatnonzero(ind) * Mn + j] = 1.0
                cols.append(c)
                names.append(":".join(f"{v}{combo[where[v]]}" if v in where else v for v in term))
        return np.column_stack(cols), names


def _type1(d: _Design, XtX: np.ndarray) -> dict:
    L = doolittle(XtX).T
    return {t: L[d.cols[t]] for t in d.labels}


def _type2(d: _Design, XtX: np.ndarray) -> dict:
    p = XtX.shape[0]
    out = {}
    for t in d.labels:
        if not d.contains[t]:
            out[t] = np.eye(p)[d.cols[t]]
            continue
        own = d.cols[t]
        tail = own + [c for u in d.contains[t] for c in d.cols[u]]
        order = [c for c in range(p) if c not in set(tail)] + tail
        Lc = doolittle(XtX[np.ix_(order, order)]).T
        rows = [order.index(c) for c in own]
        back = np.argsort(order)  # column j of X sits at position back[j] of the reordered matrix
        out[t] = Lc[np.ix_(rows, back)]
    return out


def _type3(d: _Design) -> dict:
    s = d.s
    rd, rd_names = d.rdx()
    T = s.T
    # L0' = X^+ rdX; X = W T and rdX = W T_rd with T_rd = T C exactly for the hierarchical formulas the engine fits
    C, *_ = np.linalg.lstsq(T, rd, rcond=None)
    scale = max(1.0, float(np.abs(rd).max()))
    if np.abs(T @ C - rd).max() > 1e-9 * scale:
        raise MixedModelError("the type III hypotheses are not defined for this design: a column of the "
                              "over-parametrized design is not a combination of the fitted columns.")
    L = zapsmall(C.T)  # rdX columns x X columns
    by_degree = sorted(range(len(d.terms)), key=lambda k: -len(d.terms[k]))  # stable: ties keep formula order
    for k in by_degree:
        t = d.labels[k]
        if not d.contains[t]:
            continue
        others = [c for u in d.contains[t] for c in d.cols[u]]
        Xo, Y = L[:, others], L[:, d.cols[t]]
        coef, *_ = np.linalg.lstsq(Xo, Y, rcond=None)
        L[:, d.cols[t]] = zapsmall(Y - Xo @ coef)
    where = {nm: i for i, nm in enumerate(rd_names)}
    missing = [nm for nm in d.names if nm not in where]
    if missing:
        raise MixedModelError(f"the type III hypotheses cannot be matched to the columns {missing}.")
    L = L[[where[nm] for nm in d.names]]  # rows: the columns of X
    out = {}
    for t in d.labels:
        Lt = L[:, d.cols[t]].T
        out[t] = Lt[np.abs(Lt).sum(axis=1) > 1e-8]
    return out


def hypotheses(result, type=3) -> dict:  # noqa: A002 - lmerTest's argument name
    """The hypothesis matrix L of every fixed-effect term for the anova table of ``type`` 1, 2 or 3 (module
    docstring): a dict term label (``"A"``, ``"A:B"``) -> array (rows: contrasts, columns: the fixed effects in the
    order of ``result.fixed_effects.index``). These are lmerTest's ``attr(anova(m, type = type), "hypotheses")``
    for the treatment-coded fit."""
    typ = _type(type)
    s = getattr(result, "stats", None)
    if s is None or not hasattr(s, "cells"):
        raise MixedModelError("the anova hypotheses need a model fitted by vrs_helpers.mixed.fit (with its "
                              "statistics).")
    d = _Design(s)
    if not d.labels:
        return {}
    XtX = np.asarray(s.XtX, dtype=float)
    if s.p <= 1 or len(d.labels) <= 1 or typ == 1:
        return _type1(d, XtX) if s.p > 1 else {d.labels[0]: np.ones((1, 1))}
    return _type2(d, XtX) if typ == 2 else _type3(d)


def term_columns(result) -> dict:
    """The fixed-effect columns (positions in ``result.fixed_effects.index``) of every formula term, intercept left
    out: R's ``assign`` attribute, as lmerTest groups the columns."""
    return {t: list(c) for t, c in _Design(result.stats).cols.items() if c}


__all__ = ["TYPES", "doolittle", "hypotheses", "term_columns", "zapsmall"]
