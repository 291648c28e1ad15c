"""Generalized additive models with penalized thin-plate regression splines (book 2.4.3 and Appendix A.1).

A GAM models g(mu) = sum_k f_k(x_k) (book eq. 2.3). Numeric features get a penalized thin-plate regression spline
of basis dimension k (Wood 2003; the default smooth ``s(x)`` of R's mgcv), binary and categorical features a
factor term (treatment contrasts), and the smoothing parameters are chosen by generalized cross-validation (GCV,
mgcv's default ``method = "GCV.Cp"``) for the Gaussian family and by UBRE in a penalized IRLS loop (performance
iteration) for the binomial family.

Why our own code: pygam's author states a practical limit of about 10,000 rows (dense QR of the whole model
matrix); the book's data have 80,671 and 106,690 rows, and the circularity test fits every subset of the
candidate features. For the Gaussian family every quantity of a fit is a function of the cross-products
X'X, X'y and y'y (``fit_from_crossproducts``), and every subset model is a sub-block of one set of cross-products,
computed in a single pass over the data. The fits are checked against mgcv (tests/book/test_gam.py) and pygam.

Quantities (as mgcv reports them):
- deviance explained D^2 = 1 - D(mu) / D(mu_0) (book eq. 2.9), D the deviance, mu_0 the intercept-only model;
- effective degrees of freedom edf = tr((X'WX + S_lambda)^-1 X'WX), including the parametric terms;
- ``complexity`` = the degrees of freedom of the log-likelihood, edf + 1 for the Gaussian (the scale), the
  "Complexity" column of book Table 2.5.
"""

from __future__ import annotations

import html
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import linalg, optimize
from scipy.sparse import linalg as sparse_linalg

from ..errors import VRSError
from ..threads import blas_limit
from . import rsample as _rsample
from .smoothing import PLSFit, fit_from_crossproducts, penalized_least_squares, scale_penalties

FAMILIES = ("gaussian", "binomial")
MAX_KNOTS = 2000  # mgcv's default max.knots: a thin-plate basis of a feature with more unique values uses a random
#                   subset of them as knots, drawn as mgcv draws it (set.seed(1); sample(1:nu, 2000) with R's
#                   generator, vrs_helpers.book.rsample), so the subset is mgcv's


class GAMError(VRSError, ValueError):
    """Bad input for a GAM fit."""


class GAMWarning(UserWarning):
    """A GAM fit that worked, but with a caveat the user should know."""


# ----------------------------------------------------------------------------------------------------------------
# Terms
# ----------------------------------------------------------------------------------------------------------------

def _distinct_rows(u: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """(values, inverse, counts): the distinct values of ``u`` with u = values[inverse] and how often each occurs
    when fewer than half the rows are distinct (and there are more than 1,000), else (u, None, ones): a basis that
    is a function of u alone is then evaluated once per distinct value and its rows gathered."""
    if len(u) > 1000:
        uu, inverse, counts = np.unique(u, return_inverse=True, return_counts=True)
        if 2 * len(uu) < len(u):
            return uu, inverse.ravel(), counts.astype(float)
    return u, None, np.ones(len(u))


def _eta_tp(r: np.ndarray) -> np.ndarray:
    """Thin-plate radial basis for d = 1, m = 2: eta(r) = Gamma(-3/2) / (2^4 sqrt(pi)) r^3 = r^3 / 12."""
    return r * r * r * (1.0 / 12.0)


@dataclass
class SmoothTerm:
    """Thin-plate regression spline s(x, k) with a sum-to-zero constraint over the data (mgcv ``bs = "tp"``).

    Construction (Wood 2003, Generalized Additive Models 2nd ed. 5.5.1): the knots are the unique values of x (when
    there are more than ``max_knots``, mgcv's subset of them: the sorted unique values at R's ``set.seed(seed);
    sample(1:nu, max_knots)``, :mod:`vrs_helpers.book.rsample`); E_ij = eta(|x_i - x_j|) over the
    knots is eigen-decomposed and the k - 2 ... k eigenvectors of largest |eigenvalue| U_k kept; with the null space
    T = [1, x] and the constraint T'U_k delta = 0 the function is f(x) = E(x, knots) U_k Z delta + T alpha with
    penalty delta' Z' D_k Z delta. The identifiability constraint sum_i f(x_i) = 0 is absorbed by a QR step, which
    leaves k - 1 coefficients. x is rescaled to [0, 1] first; in one dimension this only rescales the penalty.
    """

    feature: str
    k: int = 10
    max_knots: int = MAX_KNOTS
    seed: int = 1
    # fitted state
    lo: float = field(default=np.nan, repr=False)
    scale: float = field(default=np.nan, repr=False)
    knots: np.ndarray | None = field(default=None, repr=False)
    UZ: np.ndarray | None = field(default=None, repr=False)
    Z: np.ndarray | None = field(default=None, repr=False)
    S: np.ndarray | None = field(default=None, repr=False)
    null_space: np.ndarray | None = field(default=None, repr=False)   # of S: the directions no penalty shrinks
    x_range: tuple = field(default=(np.nan, np.nan), repr=False)

    @property
    def label(self) -> str:
        return f"s({self.feature})"

    def setup(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        ux = np.unique(x)
        if self.k < 3:
            raise GAMError(f"s({self.feature}): the basis dimension k must be at least 3 (got {self.k}).")
        if len(ux) < self.k:
            raise GAMError(
                f"s({self.feature}, k={self.k}): the feature has only {len(ux)} distinct values, fewer than k. "
                f"Use a smaller k (at most {len(ux)}) or treat the feature as a factor.")
        self.x_range = (float(ux[0]), float(ux[-1]))
        self.lo, self.scale = float(ux[0]), float(ux[-1] - ux[0])
        u = (ux - self.lo) / self.scale
        if len(u) > self.max_knots:   # mgcv: uniquecombs(x, ordered = TRUE)[sample(1:nu, max.knots), ] after set.seed
            u = np.sort(u[_rsample.sample(len(u), self.max_knots, seed=self.seed) - 1])
        self.knots = u
        E = _eta_tp(np.abs(u[:, None] - u[None, :]))
        if len(u) >= 10 * self.k:   # Lanczos for the k eigenvalues of largest magnitude (deterministic start)
            w, V = sparse_linalg.eigsh(E, k=self.k, which="LM", v0=np.ones(len(u)))
        else:
            w, V = linalg.eigh(E, driver="evd")
        order = np.argsort(-np.abs(w))[: self.k]
        Dk, Uk = w[order], V[:, order]
        T = np.column_stack([np.ones_like(u), u])
        # constraint T' U_k delta = 0: delta = Zt theta, Zt the null space of (U_k' T)'
        q, _ = np.linalg.qr(Uk.T @ T, mode="complete")
        Zt = q[:, 2:]
        self.UZ = Uk @ Zt
        S_raw = np.zeros((self.k, self.k))
        S_raw[: self.k - 2, : self.k - 2] = Zt.T @ (Dk[:, None] * Zt)
        S_raw = (S_raw + S_raw.T) / 2
        # measurements repeat (a clinical feature of 80,671 rows has a few hundred distinct values): the basis is a
        # function of x alone, so it is built on the distinct values, each weighted by how often it occurs
        rows, inverse, counts = _distinct_rows((x - self.lo) / self.scale)
        Xraw = self._raw_rows(rows)
        colsum = Xraw.sum(axis=0) if inverse is None else counts @ Xraw
        q, _ = np.linalg.qr(colsum[:, None], mode="complete")
        Zc = q[:, 1:]
        # orthonormalize over the data (B = QR): the raw basis has condition numbers ~1e8 at k = 100, which
        # X'X would square; with B R^-1 the cross-products stay well conditioned and the fit is unchanged. With
        # repeated rows, B = P B_u (P gathers the distinct rows, P'P = W their counts): the Householder QR of
        # W^1/2 B_u = Q_w R gives the same R and Q = P W^-1/2 Q_w (Q'Q = Q_w'Q_w = I), at the cost of the
        # distinct rows
        w = np.sqrt(counts)
        Q, R = np.linalg.qr((Xraw @ Zc) * w[:, None])
        sign = np.where(np.diag(R) < 0, -1.0, 1.0)
        Q, R = Q * (sign / w[:, None]), R * sign[:, None]
        Rinv = linalg.solve_triangular(R, np.eye(len(R)))
        self.Z = Zc @ Rinv
        S = self.Z.T @ S_raw @ self.Z
        self.S = (S + S.T) / 2
        ev, V = np.linalg.eigh(self.S)
        self.null_space = V[:, ev <= 1e-9 * max(ev.max(), 1e-300)]   # the unpenalized (linear) directions
        return Q if inverse is None else Q[inverse]

    def _raw(self, x: np.ndarray) -> np.ndarray:
        rows, inverse, _ = _distinct_rows((np.asarray(x, dtype=float) - self.lo) / self.scale)
        raw = self._raw_rows(rows)
        return raw if inverse is None else raw[inverse]

    def _raw_rows(self, u: np.ndarray) -> np.ndarray:
        out = np.empty((len(u), self.k))
        step = max(1, 4_000_000 // max(len(self.knots), 1))
        for s in range(0, len(u), step):
            uu = u[s: s + step]
            out[s: s + step, : self.k - 2] = _eta_tp(np.abs(uu[:, None] - self.knots[None, :])) @ self.UZ
            out[s: s + step, self.k - 2] = 1.0
            out[s: s + step, self.k - 1] = uu
        return out

    def basis(self, x) -> np.ndarray:
        return self._raw(np.asarray(x, dtype=float)) @ self.Z

    @property
    def n_coef(self) -> int:
        return self.k - 1


@dataclass
class FactorTerm:
    """Unpenalized factor term with treatment contrasts (first level = reference), as a factor in an R formula.

    Binary 0/1 features, booleans, strings and categoricals become factor terms."""

    feature: str
    levels: list | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return self.feature

    def setup(self, x) -> np.ndarray:
        s = pd.Series(x)
        lv = list(s.cat.categories) if isinstance(s.dtype, pd.CategoricalDtype) else sorted(pd.unique(s))
        lv = [v for v in lv if (s == v).any()]
        if len(lv) < 2:
            raise GAMError(f"Feature {self.feature!r} has a single level ({lv!r}); it cannot enter a model. "
                           "Drop it from the features.")
        self.levels = lv
        return self.basis(x)

    def basis(self, x) -> np.ndarray:
        s = pd.Series(np.asarray(x, dtype=object))
        return np.column_stack([(s == v).to_numpy(dtype=float) for v in self.levels[1:]])

    @property
    def n_coef(self) -> int:
        return len(self.levels) - 1

    @property
    def S(self) -> None:
        return None


@dataclass
class LinearTerm:
    """Unpenalized linear term b * x (a numeric feature entered parametrically, like ``+ x`` in an R formula)."""

    feature: str
    x_range: tuple = field(default=(np.nan, np.nan), repr=False)

    @property
    def label(self) -> str:
        return self.feature

    def setup(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        self.x_range = (float(x.min()), float(x.max()))
        return self.basis(x)

    def basis(self, x) -> np.ndarray:
        return np.asarray(x, dtype=float)[:, None]

    @property
    def n_coef(self) -> int:
        return 1

    @property
    def S(self) -> None:
        return None


def _is_factor(s: pd.Series) -> bool:
    if isinstance(s.dtype, pd.CategoricalDtype) or s.dtype == bool or s.dtype == object:
        return True
    if pd.api.types.is_string_dtype(s):
        return True
    return s.nunique() <= 2


def make_terms(df: pd.DataFrame, features, k=10, max_knots: int = MAX_KNOTS, seed: int = 1, linear=()) -> list:
    """Terms for ``features``: a factor term for binary/categorical columns, a linear term for those listed in
    ``linear``, else s(x, k). ``k`` is an int or a mapping feature -> k (missing features get 10)."""
    terms = []
    for f in features:
        kk = (k.get(f, 10) if isinstance(k, dict) else int(k))
        if f in linear:
            terms.append(LinearTerm(f))
        elif _is_factor(df[f]):
            terms.append(FactorTerm(f))
        else:
            terms.append(SmoothTerm(f, k=kk, max_knots=max_knots, seed=seed))
    return terms


# ----------------------------------------------------------------------------------------------------------------
# Input checks and design
# ----------------------------------------------------------------------------------------------------------------

def check_frame(df: pd.DataFrame, target: str, features, family: str) -> np.ndarray:
    """Validate data for a GAM; return y as float. Errors say what is wrong and what to do."""
    if family not in FAMILIES:
        raise GAMError(f"Unknown family {family!r}; use one of {FAMILIES}.")
    if not isinstance(df, pd.DataFrame) or len(df) == 0:
        raise GAMError("The data are empty; a GAM needs rows.")
    features = list(features)
    if not features:
        raise GAMError("No features given.")
    missing = [c for c in [target, *features] if c not in df.columns]
    if missing:
        import difflib
        hints = {m: difflib.get_close_matches(m, list(map(str, df.columns)), n=1) for m in missing}
        msg = ", ".join(f"{m!r}" + (f" (did you mean {h[0]!r}?)" if h else "") for m, h in hints.items())
        raise GAMError(f"Column(s) not in the data: {msg}.")
    if len(set(features)) != len(features):
        raise GAMError(f"Duplicate features: {features}.")
    if target in features:
        raise GAMError(f"The target {target!r} is also listed as a feature.")
    y = df[target]
    if not pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y):
        try:
            y = pd.to_numeric(y)
        except (TypeError, ValueError):
            raise GAMError(f"The target {target!r} is not numeric (dtype {df[target].dtype}).") from None
    y = y.to_numpy(dtype=float, na_value=np.nan)
    bad = [c for c in [target, *features] if df[c].isna().any()]
    if bad:
        raise GAMError(f"Missing values (NaN) in {bad}: {', '.join(str(int(df[c].isna().sum())) for c in bad)} rows. "
                       "Drop or impute them first; a GAM cannot use incomplete rows.")
    for f in features:
        s = df[f]
        if not _is_factor(s) and not pd.api.types.is_numeric_dtype(s):
            raise GAMError(f"Feature {f!r} is neither numeric nor categorical (dtype {s.dtype}).")
        if s.nunique() < 2:
            raise GAMError(f"Feature {f!r} is constant ({s.iloc[0]!r}); it cannot have a shape. Drop it.")
    if np.nanstd(y) == 0:
        raise GAMError(f"The target {target!r} is constant; there is no deviance to explain.")
    seen = {}
    for f in features:
        key = pd.util.hash_pandas_object(df[f], index=False).sum()
        for g in seen.get(key, []):
            if df[f].equals(df[g]):
                raise GAMError(f"Features {g!r} and {f!r} are identical columns (confounded); drop one of them.")
        seen.setdefault(key, []).append(f)
    if family == "binomial" and not np.isin(y, (0.0, 1.0)).all():
        vals = np.unique(y[~np.isin(y, (0.0, 1.0))])[:5]
        raise GAMError(f"A binomial target must be 0/1; {target!r} has other values, e.g. {vals.tolist()}. "
                       "Recode it (e.g. relevance > 0) or use family='gaussian'.")
    return y


@dataclass
class Design:
    """Model matrix for an intercept plus terms; ``blocks[i]`` are the columns of ``terms[i]``."""

    terms: list
    X: np.ndarray
    blocks: list

    def columns(self, term_idx) -> np.ndarray:
        return np.concatenate([[0]] + [self.blocks[i] for i in term_idx]).astype(int)


def build_design(df: pd.DataFrame, terms) -> Design:
    parts, blocks, start = [np.ones((len(df), 1))], [], 1
    for t in terms:
        B = t.setup(df[t.feature].to_numpy())
        parts.append(B)
        blocks.append(np.arange(start, start + B.shape[1]))
        start += B.shape[1]
    return Design(list(terms), np.hstack(parts), blocks)


def _unpenalized_directions(design: Design, idx) -> list:
    """Per term (intercept first), the directions in the model's coefficient space that no penalty shrinks: all
    columns of parametric terms, the null space of the penalty (the linear function) of a smooth."""
    cols = list(design.columns(idx))
    p = len(cols)
    pos = {c: i for i, c in enumerate(cols)}
    out = [np.eye(p)[:, [0]]]
    for i in idx:
        t = design.terms[i]
        P = np.zeros((p, len(design.blocks[i])))
        P[[pos[c] for c in design.blocks[i]], np.arange(len(design.blocks[i]))] = 1.0
        if t.S is not None:
            P = P @ t.null_space
        out.append(P)
    return out


def _check_aliasing(G: np.ndarray, design: Design, idx) -> None:
    """Raise if the unpenalized part of a model is rank deficient (confounded features), naming them. Penalized
    directions are identified by their penalty and need no check."""
    parts = _unpenalized_directions(design, idx)

    def rank_ok(P):
        Gu = P.T @ G @ P
        d = np.sqrt(np.clip(np.diag(Gu), 1e-300, None))
        Gu = Gu / d[:, None] / d[None, :]
        return np.linalg.matrix_rank(Gu, tol=1e-10 * len(Gu)) == len(Gu)

    if rank_ok(np.hstack(parts)):
        return
    names, kept = [], [parts[0]]
    for i, P in zip(idx, parts[1:], strict=True):
        if rank_ok(np.hstack(kept + [P])):
            kept.append(P)
        else:
            names.append(design.terms[i].feature)
    raise GAMError(f"The model matrix is rank deficient: feature(s) {', '.join(names) or '(unidentified)'} are "
                   "confounded with the intercept or with features listed before them (e.g. a duplicated or perfectly "
                   "collinear feature). Drop one of each confounded pair.")


# ----------------------------------------------------------------------------------------------------------------
# Result and estimator
# ----------------------------------------------------------------------------------------------------------------

@dataclass
class GAMResult:
    """A fitted GAM. ``deviance_explained`` is D^2 (book eq. 2.9); ``edf`` includes the intercept and parametric
    terms (mgcv ``sum(m$edf)``); ``complexity`` is the log-likelihood df (edf + 1 for the Gaussian scale)."""

    target: str
    family: str
    features: list
    terms: list = field(repr=False)
    coef: np.ndarray = field(repr=False)
    blocks: list = field(repr=False)
    cov: np.ndarray = field(repr=False)
    deviance: float
    null_deviance: float
    edf: float
    edf_terms: dict
    scale: float
    n: int
    criterion: float
    seconds: float
    design_X: np.ndarray | None = field(default=None, repr=False)
    design_cols: np.ndarray | None = field(default=None, repr=False)

    @property
    def deviance_explained(self) -> float:
        return 1.0 - self.deviance / self.null_deviance

    @property
    def complexity(self) -> float:
        return self.edf + (1.0 if self.family == "gaussian" else 0.0)

    def term_values(self, df: pd.DataFrame | None = None) -> pd.DataFrame:
        """f_k(x_k) for every term at the rows of ``df`` (mgcv ``predict(type = "terms")``); without ``df``, at the
        rows the model was fitted on."""
        if df is None:
            X = self.design_X
            return pd.DataFrame({t.label: X[:, self.design_cols[cols]] @ self.coef[cols]
                                 for t, cols in zip(self.terms, self.blocks, strict=True)})
        return pd.DataFrame({t.label: t.basis(df[t.feature].to_numpy()) @ self.coef[cols]
                             for t, cols in zip(self.terms, self.blocks, strict=True)}, index=df.index)

    def shape(self, feature: str, x=None, n_grid: int = 200) -> pd.DataFrame:
        """The feature shape f(x) with a pointwise standard error on a grid (or at ``x``) for plotting."""
        i = [t.feature for t in self.terms].index(feature)
        t, cols = self.terms[i], self.blocks[i]
        if x is None:
            x = (np.asarray(t.levels, dtype=object) if isinstance(t, FactorTerm)
                 else np.linspace(t.x_range[0], t.x_range[1], n_grid))
        B = t.basis(np.asarray(x))   # for a factor, the reference level's row is all zeros: f = 0 there
        fx = B @ self.coef[cols]
        se = np.sqrt(np.einsum("ij,jk,ik->i", B, self.cov[np.ix_(cols, cols)], B))
        return pd.DataFrame({"x": x, "f": fx, "se": se})

    def predict(self, df: pd.DataFrame) -> np.ndarray:
        eta = self.coef[0] + self.term_values(df).sum(axis=1).to_numpy()
        return eta if self.family == "gaussian" else 1 / (1 + np.exp(-eta))

    def to_frame(self) -> pd.DataFrame:
        rows = [{"term": "(Intercept)", "edf": 1.0}]
        rows += [{"term": t.label, "edf": self.edf_terms[t.label]} for t in self.terms]
        return pd.DataFrame(rows)

    def summary(self) -> dict:
        return {"features": "+".join(self.features), "family": self.family, "n": self.n,
                "deviance_explained": self.deviance_explained, "edf": self.edf, "complexity": self.complexity,
                "scale": self.scale, "seconds": self.seconds}

    def __repr__(self) -> str:
        terms = ", ".join(f"{t.label} edf={self.edf_terms[t.label]:.2f}" for t in self.terms)
        return (f"GAMResult({self.target} ~ {' + '.join(t.label for t in self.terms)}, family={self.family}, "
                f"n={self.n}, D2={self.deviance_explained:.4f}, edf={self.edf:.2f}; {terms})")

    def _repr_html_(self) -> str:
        return (f"<p><code>{html.escape(repr(self))}</code></p>"
                + self.to_frame().to_html(index=False, float_format="%.3f"))


def _binomial_deviance(y, mu):
    mu = np.clip(mu, 1e-12, 1 - 1e-12)
    return float(-2 * np.sum(y * np.log(mu) + (1 - y) * np.log(1 - mu)))


def _columns(X: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """X[:, cols] - X itself when cols are all its columns in order (a model with every term: no copy of the
    n x p matrix)."""
    return X if len(cols) == X.shape[1] and np.array_equal(cols, np.arange(X.shape[1])) else X[:, cols]


def fit_design(design: Design, y: np.ndarray, term_idx, family: str = "gaussian", G=None, b=None, yy=None,
               target: str = "y", max_iter: int = 50, tol: float = 1e-8, blas_threads="auto") -> GAMResult:
    """Fit the GAM with the intercept and the terms ``term_idx`` of a design. For the Gaussian family pass the
    full cross-products G, b, yy (of centred y) to fit from their sub-blocks without touching the data.
    ``blas_threads``: BLAS threads inside the smoothing-parameter search (:func:`vrs_helpers.threads.blas_limit`;
    "auto" = one thread below 1,500 coefficients, an int, or None for the library default)."""
    t0 = time.perf_counter()
    cols = design.columns(term_idx)
    n = len(y)
    local = {c: i for i, c in enumerate(cols)}
    penalties = []
    for i in term_idx:
        t = design.terms[i]
        if t.S is not None:
            penalties.append((np.array([local[c] for c in design.blocks[i]]), t.S))
    ybar = float(np.mean(y))
    if family == "gaussian":
        if G is None:
            X = _columns(design.X, cols)
            yc = y - ybar
            Gs, bs, yys = X.T @ X, X.T @ yc, float(yc @ yc)
        else:
            Gs, bs, yys = G[np.ix_(cols, cols)], b[cols], yy
        _check_aliasing(Gs, design, term_idx)
        with blas_limit(len(bs), blas_threads):
            fit = fit_from_crossproducts(Gs, bs, yys, n, penalties, kind="gcv")
        beta = fit.beta.copy()
        beta[0] += ybar
        dev, null = fit.rss, yys
        scale = dev / (n - fit.edf)
        cov = fit.Ainv * scale
        crit = fit.criterion
    else:
        X = _columns(design.X, cols)
        null = _binomial_deviance(y, np.full(n, ybar))
        penalties = scale_penalties(0.25 * (X.T @ X), penalties)
        _check_aliasing(0.25 * (X.T @ X), design, term_idx)

        def pirls(rho, eta, fixed=True):
            """Penalized IRLS; with ``fixed`` at log smoothing parameters rho, else choosing them by UBRE of the
            working model at every step (performance iteration)."""
            mu = 1 / (1 + np.exp(-eta))
            dev_old = np.inf
            for _ in range(max_iter):
                w = np.clip(mu * (1 - mu), 1e-10, None)
                z = eta + (y - mu) / w
                Xw = X * w[:, None]
                Gs, bs, yys = X.T @ Xw, Xw.T @ z, float(z @ (w * z))
                with blas_limit(len(bs), blas_threads):
                    if fixed:
                        Slist = [(c, Sj) for c, Sj in penalties]
                        _, _, Ainv, beta, _, _, edf, AinvS = penalized_least_squares(Gs, bs, yys, Slist, rho)
                        fit = PLSFit(beta, 0.0, edf, 1.0 - np.diag(AinvS), Ainv, rho, 0.0)
                    else:
                        fit = fit_from_crossproducts(Gs, bs, yys, n, penalties, kind="ubre", rho0=rho,
                                                     rescale=False)
                    rho = fit.log_lambda if len(fit.log_lambda) else None
                eta = X @ fit.beta
                mu = 1 / (1 + np.exp(-eta))
                dev = _binomial_deviance(y, mu)
                if abs(dev - dev_old) <= tol * (abs(dev) + 0.1):
                    return fit, dev, eta, mu, True
                dev_old = dev
            return fit, dev, eta, mu, False

        mu0 = (y + 0.5) / 2
        fit, dev, eta, mu, ok = pirls(None, np.log(mu0 / (1 - mu0)), fixed=False)
        if penalties and ok:
            # outer iteration (mgcv's default): minimize UBRE = D(beta)/n - 1 + 2 edf/n of the converged fit
            state = {"eta": eta}

            def ubre(rho):
                f_, d_, e_, _, _ = pirls(rho, state["eta"])
                return d_ / n - 1 + 2 * f_.edf / n

            m = len(penalties)
            res = optimize.minimize(ubre, fit.log_lambda, method="L-BFGS-B", bounds=[(-20.0, 22.0)] * m,
                                    options={"eps": 1e-4, "ftol": 1e-12, "maxiter": 100})
            if res.fun < dev / n - 1 + 2 * fit.edf / n:
                fit, dev, eta, mu, ok = pirls(res.x, eta)
            fit.criterion = dev / n - 1 + 2 * fit.edf / n
        if not ok:
            warnings.warn(f"The binomial GAM did not converge in {max_iter} iterations. Results are approximate.",
                          GAMWarning, stacklevel=2)
        if np.any(mu < 1e-8) or np.any(mu > 1 - 1e-8):
            warnings.warn("Fitted probabilities numerically 0 or 1 occurred: the classes are (nearly) perfectly "
                          "separated by the features, as expected for a deterministic (circular) label. D^2 is "
                          "reliable; coefficients and shapes of the separating terms are not.", GAMWarning,
                          stacklevel=2)
        beta, scale, cov, crit = fit.beta, 1.0, fit.Ainv, fit.criterion
    edf_terms = {}
    for i in term_idx:
        edf_terms[design.terms[i].label] = float(sum(fit.edf_terms[local[c]] for c in design.blocks[i])) \
            if len(fit.edf_terms) else float(len(design.blocks[i]))
    return GAMResult(target=target, family=family, features=[design.terms[i].feature for i in term_idx],
                     terms=[design.terms[i] for i in term_idx], coef=beta,
                     blocks=[np.array([local[c] for c in design.blocks[i]]) for i in term_idx], cov=cov,
                     deviance=float(dev), null_deviance=float(null), edf=float(fit.edf), edf_terms=edf_terms,
                     scale=float(scale), n=n, criterion=float(crit), seconds=time.perf_counter() - t0,
                     design_X=design.X, design_cols=cols)


def fit_gam(df: pd.DataFrame, target: str, features, family: str = "gaussian", k=10, max_knots: int = MAX_KNOTS,
            seed: int = 1, linear=(), blas_threads="auto") -> GAMResult:
    """Fit ``target ~ s(x1) + s(x2) + ...`` (factor terms for binary/categorical features, linear terms for the
    features in ``linear``).

    >>> fit_gam(df, "target", ["bili"], k={"bili": 100}).deviance_explained   # doctest: +SKIP
    """
    y = check_frame(df, target, features, family)
    design = build_design(df, make_terms(df, features, k=k, max_knots=max_knots, seed=seed, linear=linear))
    return fit_design(design, y, list(range(len(design.terms))), family=family, target=target,
                      blas_threads=blas_threads)
