"""Responses simulated from a linear mixed model, drawn as their sufficient statistics (no rows needed).

For a fixed design F = [Z X] (n x (q + p), the columns of :class:`.design.SufficientStats`: the random terms'
columns level-major, then the fixed effects) and a response

    y = F u + e,    u = (b, beta),  b ~ N(0, blockdiag Sigma_k) per level of each term,  e ~ N(0, sigma^2 I_n),

the engine needs only F'y and y'y (the design parts Z'Z, Z'X, X'X do not change). Given u they are

    F'y = G u + w,          w = F'e ~ N(0, sigma^2 G),   G = F'F,
    y'y = u'G u + 2 u'w + e'e,  e'e = w'G^+ w + e'(I - P_F) e,

and e'(I - P_F) e ~ sigma^2 chi^2_{n - rank(G)} is independent of w (Cochran's theorem). With any M of full column
rank such that M M' = G, drawing xi ~ N(0, I_rank) gives w = sigma M xi and w'G^+ w = sigma^2 |xi|^2, so the pair
(F'y, y'y) is drawn exactly, at a cost that follows the number of levels, not the number of rows.

M is built blockwise as the engine's deviance is (:mod:`.deviance`): the term with the most columns (``big``)
has a block-diagonal D (one r x r block per level); with B = F_o'Z_big for the other columns o,

    M = [[D^{1/2},      0 ],
         [B D^{+1/2},   R ]],   R R' = S = F_o'F_o - B D^+ B'  (the Schur complement, dense, eigen-factored),

where D^{1/2} and D^{+1/2} keep only D's positive eigen-directions per level, so M has full column rank.

Used by the parametric bootstrap (:mod:`.bootstrap`) and the power simulations
(:mod:`vrs_helpers.evaluate.tables.power`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy import sparse

from ..structure.design import SufficientStats
from ..structure.errors import MixedModelError

EIGEN_TOL = 1e-10  # eigenvalues below this times the largest are treated as 0 (rank of a Gram matrix)


def term_offsets(s: SufficientStats) -> np.ndarray:
    """Start of each random term's columns in F = [Z X]; the last entry is q (where X starts)."""
    return np.cumsum([0] + [m * t.r for m, t in zip(s.sizes, s.terms, strict=True)])


def term_columns(s: SufficientStats) -> list[np.ndarray]:
    """Per random term an (m_k x r_k) array of its columns in F (level-major, as the engine orders Z)."""
    off = term_offsets(s)
    return [off[k] + np.arange(m * t.r).reshape(m, t.r) for k, (m, t) in enumerate(zip(s.sizes, s.terms,
                                                                                          strict=True))]


def gram(s: SufficientStats) -> sparse.csr_matrix:
    """G = F'F for F = [Z X] as a sparse matrix (from Z'Z's blocks, Z'X and X'X)."""
    K = len(s.terms)
    blocks = [[None] * (K + 1) for _ in range(K + 1)]
    for k in range(K):
        D = s.ZtZ_diag[k]
        m, r, _ = D.shape
        blocks[k][k] = sparse.bsr_matrix((D, np.arange(m), np.arange(m + 1)), shape=(m * r, m * r)).tocsr()
        for j in range(k + 1, K):
            blocks[k][j] = s.ZtZ_cross[(k, j)].tocsr()
            blocks[j][k] = s.ZtZ_cross[(k, j)].T.tocsr()
        blocks[k][K] = sparse.csr_matrix(s.ZtX[k])
        blocks[K][k] = sparse.csr_matrix(s.ZtX[k].T)
    blocks[K][K] = sparse.csr_matrix(s.XtX)
    return sparse.bmat(blocks, format="csr")


def embedding(small: SufficientStats, big: SufficientStats) -> tuple[list[np.ndarray], np.ndarray]:
    """The columns of model ``small``'s F inside model ``big``'s F, for nested models on the same rows.

    Returns (per random term of ``small`` an (m_k x r_k) array of column indices in ``big``'s F, the indices of
    ``small``'s fixed effects in ``big``'s F). A column of ``small`` is the column of ``big`` with the same grouping,
    random covariate and level, or the fixed effect of the same name; a column without a counterpart means the
    models are not nested (MixedModelError)."""
    cols_big = term_columns(big)
    out = []
    for t, levels in zip(small.terms, small.levels, strict=True):
        cols = np.empty((len(levels), t.r), dtype=np.int64)
        for c, cov in enumerate(t.covariates):
            hit = next(((j, u.covariates.index(cov)) for j, u in enumerate(big.terms)
                        if u.group == t.group and cov in u.covariates), None)
            if hit is None:
                raise MixedModelError(f"The random term {t} of the restricted model has no counterpart in the general "
                                      f"model; the models are not nested.")
            j, cj = hit
            where = {lv: i for i, lv in enumerate(big.levels[j])}
            try:
                idx = np.array([where[lv] for lv in levels], dtype=np.int64)
            except KeyError:
                raise MixedModelError("The two models were fitted to different rows (a level of "
                                      f"{t.group_name} is missing from the general model).") from None
            cols[:, c] = cols_big[j][idx, cj]
        out.append(cols)
    q = int(term_offsets(big)[-1])
    missing = [n for n in small.fixed_names if n not in big.fixed_names]
    if missing:
        raise MixedModelError(f"Fixed effect(s) {', '.join(missing)} of the restricted model are not in the general "
                              f"model; the models are not nested.")
    fixed = np.array([q + big.fixed_names.index(n) for n in small.fixed_names], dtype=np.int64)
    return out, fixed


def _psd_factors(D: np.ndarray):
    """Per r x r block of D (m x r x r): (V L^{1/2}, V L^{-1/2}) over the positive eigen-directions, and their count."""
    m, r, _ = D.shape
    if r == 1:
        d = D[:, 0, 0]
        keep = d > EIGEN_TOL * max(float(d.max(initial=0.0)), 1e-300)
        sq = np.sqrt(np.where(keep, d, 1.0))
        half, inv_half = np.where(keep, sq, 0.0), np.where(keep, 1.0 / sq, 0.0)
        return half[:, None, None], inv_half[:, None, None], keep[:, None]
    lam, V = np.linalg.eigh(D)
    top = float(lam.max(initial=0.0))
    keep = lam > EIGEN_TOL * max(top, 1e-300)
    lam_safe = np.where(keep, lam, 1.0)
    half = V * np.where(keep, np.sqrt(lam_safe), 0.0)[:, None, :]
    inv_half = V * np.where(keep, 1.0 / np.sqrt(lam_safe), 0.0)[:, None, :]
    return half, inv_half, keep


def _blockdiag_columns(A: np.ndarray, keep: np.ndarray) -> sparse.csr_matrix:
    """Block-diagonal (m r) x (kept columns) sparse matrix from m x r x r blocks, keeping the flagged columns."""
    m, r, _ = A.shape
    full = sparse.bsr_matrix((A, np.arange(m), np.arange(m + 1)), shape=(m * r, m * r)).tocsc()
    return full[:, np.flatnonzero(keep.reshape(-1))].tocsr()


@dataclass
class ResponseDraws:
    """Sufficient statistics of simulated responses on one design: ``Fty`` (size x (q + p), F'y per draw, F's
    columns as :func:`term_columns` and then X) and ``yty`` (y'y per draw)."""

    Fty: np.ndarray
    yty: np.ndarray

    def __len__(self) -> int:
        return len(self.yty)


class ResponseSimulator:
    """Draws (F'y, y'y) of y = F u + e for the fixed design of ``s`` (module docstring), exactly and without rows.

    ``draw(rng, size, fixed, random, sigma)``: ``fixed`` is a vector of F's length holding the fixed part of u
    (beta at the X columns, usually 0 elsewhere); ``random`` a list of (columns, covariance) pairs: an (m x r) array
    of F's columns (one row per level) and the r x r covariance of that term's coefficients, drawn per level;
    ``sigma`` the residual SD.
    """

    def __init__(self, s: SufficientStats):
        self.s = s
        G = gram(s)
        K = len(s.terms)
        widths = [m * t.r for m, t in zip(s.sizes, s.terms, strict=True)]
        self.size = int(sum(widths)) + s.p
        big = max(range(K), key=lambda k: widths[k])
        cols = term_columns(s)
        self.big_cols = cols[big].reshape(-1)
        self.other_cols = np.setdiff1d(np.arange(self.size), self.big_cols)  # other terms' columns, then X
        half, inv_half, keep = _psd_factors(s.ZtZ_diag[big])
        self.E = _blockdiag_columns(half, keep)  # D^{1/2}: (m_b r_b) x dim_b
        Dinv_half = _blockdiag_columns(inv_half, keep)
        Gc = G.tocsc()
        self.D = Gc[:, self.big_cols][self.big_cols, :].tocsr()  # Z_big'Z_big (block diagonal)
        B = Gc[:, self.big_cols][self.other_cols, :].tocsr()  # F_o'Z_big
        dense = B.nnz > 0.25 * B.shape[0] * max(B.shape[1], 1)
        self.B = B.toarray() if dense else B
        Bh = (Dinv_half.T @ self.B.T).T if dense else (B @ Dinv_half).tocsr()
        self.Bh = np.ascontiguousarray(Bh) if dense else Bh
        self.C = Gc[:, self.other_cols][self.other_cols, :].toarray()
        BhBh = Bh @ Bh.T
        S = self.C - (BhBh.toarray() if sparse.issparse(BhBh) else BhBh)
        lam, U = np.linalg.eigh(0.5 * (S + S.T))
        keep_s = lam > EIGEN_TOL * max(float(np.abs(self.C).max(initial=0.0)), 1e-300)
        self.R = U[:, keep_s] * np.sqrt(lam[keep_s])
        self.dim_big = self.E.shape[1]
        self.rank = self.dim_big + self.R.shape[1]
        if self.rank > s.n:
            raise MixedModelError("The design has more independent columns than rows; it cannot be simulated.")

    def gram_times(self, u: np.ndarray) -> np.ndarray:
        """G u for u with F's rows, blockwise: [[D, B'], [B, C]] over (big term, the other columns)."""
        ub, uo = u[self.big_cols], u[self.other_cols]
        out = np.empty_like(u)
        out[self.big_cols] = self.D @ ub + self.B.T @ uo
        out[self.other_cols] = self.B @ ub + self.C @ uo
        return out

    def draw(self, rng: np.random.Generator, size: int, fixed: np.ndarray, random: list, sigma: float
             ) -> ResponseDraws:
        """``size`` draws of (F'y, y'y); the generator is used in a fixed order (random effects term by term,
        then the noise), so the same generator state gives the same draws."""
        u = np.repeat(np.asarray(fixed, dtype=float)[:, None], size, axis=1)  # (q + p) x size
        for cols, cov in random:
            cov = np.atleast_2d(np.asarray(cov, dtype=float))
            m, r = cols.shape
            z = rng.standard_normal((size, m, r))
            if r == 1:
                b = z[:, :, 0] * np.sqrt(max(float(cov[0, 0]), 0.0))
            else:
                lam, V = np.linalg.eigh(cov)
                b = (z @ (V * np.sqrt(np.clip(lam, 0.0, None))).T).reshape(size, -1)  # size x (m r)
            u[cols.reshape(-1)] += b.T  # a term's columns are distinct
        xi_b = rng.standard_normal((self.dim_big, size))
        xi_o = rng.standard_normal((self.R.shape[1], size))
        df = self.s.n - self.rank
        rest = rng.chisquare(df, size) if df > 0 else np.zeros(size)
        w = np.empty((self.size, size))
        w[self.big_cols] = self.E @ xi_b
        w[self.other_cols] = self.Bh @ xi_b + self.R @ xi_o
        w *= sigma
        Gu = self.gram_times(u)
        Fty = Gu + w
        yty = (np.einsum("ij,ij->j", u, Gu) + 2.0 * np.einsum("ij,ij->j", u, w)
               + sigma * sigma * (np.einsum("ij,ij->j", xi_b, xi_b) + np.einsum("ij,ij->j", xi_o, xi_o) + rest))
        return ResponseDraws(np.ascontiguousarray(Fty.T), yty)


class ModelView:
    """One model's sufficient statistics from draws on a (possibly larger) design: ``stats(draws, j)`` is model
    ``s``'s :class:`.design.SufficientStats` for draw j, with F'y taken at the columns of ``s`` inside the
    simulated design (:func:`embedding`; for the simulated design itself, its own columns)."""

    def __init__(self, s: SufficientStats, outer: SufficientStats | None = None):
        self.s = s
        if outer is None or outer is s:
            self.term_cols = [c.reshape(-1) for c in term_columns(s)]
            q = int(term_offsets(s)[-1])
            self.fixed_cols = q + np.arange(s.p)
        else:
            cols, self.fixed_cols = embedding(s, outer)
            self.term_cols = [c.reshape(-1) for c in cols]
        # 1'y: the sum over the levels of a random intercept, else the intercept column of X
        self.ysum_cols = None
        for k, t in enumerate(s.terms):
            if () in t.covariates:
                c = t.covariates.index(())
                self.ysum_cols = self.term_cols[k].reshape(-1, t.r)[:, c]
                break
        if self.ysum_cols is None and "(Intercept)" in s.fixed_names:
            self.ysum_cols = self.fixed_cols[[s.fixed_names.index("(Intercept)")]]

    def stats(self, draws: ResponseDraws, j: int) -> SufficientStats:
        row = draws.Fty[j]
        ysum = float(row[self.ysum_cols].sum()) if self.ysum_cols is not None else float("nan")
        return replace(self.s, Zty=[row[c] for c in self.term_cols], Xty=row[self.fixed_cols],
                       yty=float(draws.yty[j]), ysum=ysum)


def null_parameters(m, s_outer: SufficientStats | None = None):
    """(fixed, random, sigma) of :meth:`ResponseSimulator.draw` from a fitted model ``m`` (its fixed effects, the
    covariances sigma^2 T_k T_k' of its random terms, its residual SD), placed in the columns of ``s_outer``'s F
    (default: ``m``'s own design)."""
    s = m.stats
    outer = s if s_outer is None else s_outer
    if s_outer is None or s_outer is s:
        cols = term_columns(s)
        fixed_idx = int(term_offsets(s)[-1]) + np.arange(s.p)
    else:
        cols, fixed_idx = embedding(s, outer)
    size = int(term_offsets(outer)[-1]) + outer.p
    fixed = np.zeros(size)
    fixed[fixed_idx] = m.fixed_effects["estimate"].to_numpy()
    sigma = float(m.sigma)
    covs = [sigma * sigma * (T @ T.T) for T in s.relative_factors(s.theta_from_lme4(m.theta))]
    return fixed, list(zip(cols, covs, strict=True)), sigma
