"""Penalized least squares from cross-products, smoothing parameters by GCV / UBRE (the fitting core of
:mod:`vrs_helpers.book.gam`).

For cross-products G = X'WX, b = X'Wz, yy = z'Wz of n rows and penalties S_j on column blocks, the coefficients
beta = (G + sum_j lambda_j S_j)^-1 b, the residual sum of squares and the effective degrees of freedom
edf = tr((G + S_lambda)^-1 G) are functions of lambda alone (Wood, *Generalized Additive Models*, 2nd ed., 6.2);
the smoothing parameters minimize the GCV score n RSS / (n - edf)^2 (mgcv's ``method = "GCV.Cp"``) or, with a
known scale, UBRE.

The search starts on a grid: the best common log lambda, then one coordinate-wise sweep (:func:`_coordinate_sweep`)
over the same grid for each smooth in turn. A candidate of the sweep differs from a base point only in one block's
lambda, a low-rank change of G + S_lambda, so its score follows from the base's inverse by the Woodbury identity
at the cost of the block's size; a candidate whose score comes out as good as the best so far, or within
:data:`SWEEP_RECHECK` of it, is evaluated in full and decides as the full evaluation does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg, optimize
from scipy.linalg import lapack

EXACT_FIT = 1e-10   # RSS / TSS below which a Gaussian fit counts as an exact reconstruction of the target
SWEEP_RECHECK = 1e-8  # a sweep candidate whose updated score is within this (log score) of the best is recomputed


@dataclass
class PLSFit:
    beta: np.ndarray
    rss: float
    edf: float
    edf_terms: np.ndarray
    Ainv: np.ndarray
    log_lambda: np.ndarray
    criterion: float


def _spd_inverse(A: np.ndarray) -> np.ndarray:
    """Inverse of a symmetric positive definite matrix from its Cholesky factor (LAPACK potrf + potri: 2/3 of the
    flops of solving against the identity). Raises LinAlgError when A is not positive definite."""
    c, info = lapack.dpotrf(A, lower=0, clean=1)
    if info != 0:
        raise linalg.LinAlgError(f"matrix not positive definite (potrf info {info})")
    inv, info = lapack.dpotri(c, lower=0)
    if info != 0:
        raise linalg.LinAlgError(f"matrix singular (potri info {info})")
    upper = np.triu(inv)
    return upper + np.triu(upper, 1).T


def penalized_least_squares(G, b, yy, Slist, rho, products: list | None = None):
    """Penalized least squares (Wood 2017, ch. 4) from the cross-products G = X'X, b = X'y, yy = y'y at log
    smoothing parameters rho; Slist holds (columns, S_j) blocks. ``products``: a list that
    receives the non-zero columns A^-1[:, cols_j] S_j of each block (the gradient reuses them)."""
    lam = np.exp(rho)
    S = np.zeros_like(G)
    for lam_j, (cols, Sj) in zip(lam, Slist, strict=True):
        S[np.ix_(cols, cols)] += lam_j * Sj
    A = G + S
    try:
        Ainv = _spd_inverse(A)
    except linalg.LinAlgError:
        Ainv = _spd_inverse(A + np.eye(len(A)) * 1e-10 * np.trace(A) / len(A))
    beta = Ainv @ b
    Sb = S @ beta
    rss = max(float(yy - beta @ b - beta @ Sb), 0.0)
    AinvS = np.zeros_like(G)
    for lam_j, (cols, Sj) in zip(lam, Slist, strict=True):
        Mj = Ainv[:, cols] @ Sj
        AinvS[:, cols] += lam_j * Mj
        if products is not None:
            products.append(Mj)
    edf = len(b) - float(np.trace(AinvS))
    return lam, S, Ainv, beta, Sb, rss, edf, AinvS


def _log_score(n, rss, edf, kind) -> float:
    """What the smoothing-parameter search compares: log GCV (``kind="gcv"``) or UBRE with scale 1."""
    if kind == "gcv":
        return math.log(max(n * rss / (n - edf) ** 2, 1e-300))
    return rss / n - 1.0 + 2.0 * edf / n


def _criterion(G, b, yy, n, Slist, rho, kind, scale=1.0):
    """GCV (``kind="gcv"``) or UBRE score at log smoothing parameters rho and its gradient."""
    products = []
    lam, S, Ainv, beta, Sb, rss, edf, AinvS = penalized_least_squares(G, b, yy, Slist, rho, products)
    grad_rss = np.empty(len(rho))
    grad_edf = np.empty(len(rho))
    AinvSb = Ainv @ Sb
    for j, (lam_j, (cols, Sj)) in enumerate(zip(lam, Slist, strict=True)):
        grad_rss[j] = 2 * lam_j * float(AinvSb[cols] @ (Sj @ beta[cols]))
        Mj = products[j]                            # the non-zero columns of A^-1 S_j
        tr1 = float(np.trace(Mj[cols, :]))
        tr2 = float(np.sum(Mj.T * AinvS[cols, :]))
        grad_edf[j] = -lam_j * (tr1 - tr2)
    if kind == "gcv":
        denom = n - edf
        V = n * rss / denom ** 2
        gV = n * grad_rss / denom ** 2 + 2 * n * rss * grad_edf / denom ** 3
    else:  # UBRE with known scale
        V = rss / n - scale + 2 * scale * edf / n
        gV = grad_rss / n + 2 * scale * grad_edf / n
    return V, gV


def _coordinate_sweep(G, b, yy, n, Slist, rho0, best, grid, kind, value) -> np.ndarray:
    """One coordinate-wise sweep of ``grid`` from ``rho0`` (score ``best``): for each block j in turn, every grid
    value of rho_j is tried with the others at the current point, and a better score moves the point there.

    For block j the base is the current point with rho_j at the smallest grid value, evaluated in full (it is the
    first candidate). With S_j = T T', B its matrix G + S, the other candidates add delta = lambda - lambda_base >= 0
    times E_j T T' E_j' (a positive update of rank <= k_j): by the Woodbury identity A^-1 = B^-1 - Y M Y' with
    Y = B^-1 E_j T, K = T' E_j' B^-1 E_j T, M = delta (I + delta K)^-1, and
    beta = beta_B - Y M T' beta_B[j], tr(A^-1 S) = tr(B^-1 S_B) + delta tr K - tr(M (Y' S_B Y + delta K^2)). A
    candidate whose updated score is not clearly worse than the best (by :data:`SWEEP_RECHECK`) is evaluated in
    full (``value``) and decides with that value, so the sweep moves as one that evaluated every candidate in
    full, up to candidates whose scores tie within about 1e-8. Returns the point reached."""
    p = len(b)
    rho0 = np.array(rho0, dtype=float)
    for j, (cols, Sj) in enumerate(Slist):
        w, Q = np.linalg.eigh(Sj)
        keep = w > 1e-12 * max(float(w.max()), 1e-300)
        T = Q[:, keep] * np.sqrt(w[keep])
        base = rho0.copy()
        base[j] = grid[0]
        lam, S, Ainv, beta, _, rss, edf, _ = penalized_least_squares(G, b, yy, Slist, base)
        Y = Ainv[:, cols] @ T
        K = T.T @ Y[cols]
        K = (K + K.T) / 2
        KK = K @ K
        P = Y.T @ (S @ Y)
        Tbeta = T.T @ beta[cols]
        tr_base, tr_K, eye = p - edf, float(np.trace(K)), np.eye(len(K))
        for r in grid:
            if r == rho0[j]:   # the current point: its value is best already
                continue
            trial = rho0.copy()
            trial[j] = r
            if r == grid[0]:
                v = _log_score(n, rss, edf, kind)   # the base, evaluated in full above
            else:
                delta = math.exp(r) - lam[j]
                try:
                    M = delta * linalg.solve(eye + delta * K, eye, assume_a="pos")
                    beta_r = beta - Y @ (M @ Tbeta)
                    Sb = S @ beta_r
                    Sb[cols] += delta * (Sj @ beta_r[cols])
                    rss_r = max(float(yy - beta_r @ b - beta_r @ Sb), 0.0)
                    edf_r = p - (tr_base + delta * tr_K - float(np.sum(M * (P + delta * KK))))
                    v = _log_score(n, rss_r, edf_r, kind)
                except (linalg.LinAlgError, ValueError, ZeroDivisionError):
                    v = -np.inf
                if not v >= best + SWEEP_RECHECK * max(1.0, abs(best)):   # as good, close, or NaN: in full
                    v = value(trial)
            if v < best:
                best, rho0 = v, trial
    return rho0


def scale_penalties(G, penalties):
    """Each penalty block S_j scaled to the Frobenius norm of its columns' block of X'X (mgcv's initial scaling),
    so that one grid of log smoothing parameters suits every smooth; (columns, scaled S_j) pairs."""
    out = []
    for cols, Sj in penalties:
        normX = np.linalg.norm(G[np.ix_(cols, cols)])
        normS = np.linalg.norm(Sj)
        out.append((np.asarray(cols), Sj * (normX / normS if normS > 0 else 1.0)))
    return out


def fit_from_crossproducts(G, b, yy, n, penalties, kind: str = "gcv", rho0=None, bounds=(-20.0, 22.0),
                           rescale: bool = True) -> PLSFit:
    """Penalized least squares for cross-products G = X'WX, b = X'Wz, yy = z'Wz of n rows.

    ``penalties`` is a list of (columns, S_j) pairs; smoothing parameters lambda_j = exp(rho_j) minimize the GCV
    score n RSS / (n - edf)^2 (``kind="gcv"``) or UBRE RSS/n - 1 + 2 edf/n (``kind="ubre"``, known scale 1), with
    analytic gradients (L-BFGS-B). Penalties are rescaled internally like mgcv's so rho = 0 is a sensible start."""
    p = len(b)
    Slist = scale_penalties(G, penalties) if rescale else [(np.asarray(c), Sj) for c, Sj in penalties]
    if not Slist:
        c = linalg.cho_factor(G)
        Ainv = linalg.cho_solve(c, np.eye(p))
        beta = Ainv @ b
        rss = max(float(yy - beta @ b), 0.0)
        crit = n * rss / (n - p) ** 2 if kind == "gcv" else rss / n - 1 + 2 * p / n
        return PLSFit(beta, rss, float(p), np.array([]), Ainv, np.array([]), crit)
    m = len(Slist)

    def f(rho):
        V, g = _criterion(G, b, yy, n, Slist, rho, kind)
        if kind == "gcv":
            V = max(V, 1e-300)
            return math.log(V), g / V
        return V, g

    def value(rho):   # f without the gradient (the grid and the polish compare values only)
        _, _, _, _, _, rss, edf, _ = penalized_least_squares(G, b, yy, Slist, rho)
        return _log_score(n, rss, edf, kind)

    if rho0 is None:
        # GCV/UBRE surfaces have flat regions (a smooth that is linear at lambda -> infinity): start from the best
        # common rho on a grid, then one coordinate-wise grid sweep, before the gradient search
        grid = np.arange(-12.0, 21.0, 4.0)
        vals = [value(np.full(m, r)) for r in grid]
        rho0 = np.full(m, grid[int(np.argmin(vals))])
        if m > 1:
            rho0 = _coordinate_sweep(G, b, yy, n, Slist, rho0, min(vals), grid, kind, value)
    opts = {"maxiter": 200, "ftol": 1e-12, "gtol": 1e-8}
    res = optimize.minimize(f, rho0, jac=True, method="L-BFGS-B", bounds=[bounds] * m, options=opts)
    # polish: would maximal smoothing of some terms do better (flat directions the gradient cannot see)?
    trial = res.x.copy()
    v_trial = value(trial)
    for j in range(m):
        cand = trial.copy()
        cand[j] = bounds[1]
        v_cand = value(cand)
        if v_cand < v_trial - 1e-12 * abs(res.fun):
            trial, v_trial = cand, v_cand
    if not np.array_equal(trial, res.x):
        res2 = optimize.minimize(f, trial, jac=True, method="L-BFGS-B", bounds=[bounds] * m, options=opts)
        if res2.fun < res.fun:
            res = res2
    rho = res.x
    lam, S, Ainv, beta, Sb, rss, edf, AinvS = penalized_least_squares(G, b, yy, Slist, rho)
    if kind == "gcv" and rss <= EXACT_FIT * yy:
        # Exact reconstruction (D^2 = 100 %): the GCV score is 0 for every lambda that keeps the fit exact, so it
        # cannot choose. Take the least complex model of equal fit: maximal smoothing of every term that the exact
        # fit does not need (their shapes are 0 anyway). This is the tie-break of Definition 2.5, step 1.
        for j in range(m):
            trial = rho.copy()
            trial[j] = bounds[1]
            if penalized_least_squares(G, b, yy, Slist, trial)[5] <= EXACT_FIT * yy:
                rho = trial
        lam, S, Ainv, beta, Sb, rss, edf, AinvS = penalized_least_squares(G, b, yy, Slist, rho)
    edf_diag = 1.0 - np.diag(AinvS)
    crit = value(rho)
    return PLSFit(beta, rss, edf, edf_diag, Ainv, rho, float(math.exp(crit) if kind == "gcv" else crit))
