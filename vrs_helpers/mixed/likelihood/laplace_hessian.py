"""The fixed-effects block of the Laplace deviance's Hessian in closed form, for one random-intercept term and a
canonical link (issue 54: a leaderboard's ``correct ~ system + (1|item)`` with 100 systems).

:func:`vrs_helpers.mixed.models.glmm` takes the Hessian of the Laplace deviance D(theta, beta) (lme4's
``use.hessian = TRUE``) by central differences of its analytic gradient: 2 (K + p) evaluations of the deviance and
its gradient, each a pass over the N rows (202 passes over 10^6 rows for 100 systems). With one term (the items,
levels a, D_a = 1 + theta^2 sum_{i in a} w_i) and a canonical link (w = wt V(mu), w' = dw/d eta = w V',
w'' = w (V'^2 + V V'')) the beta block is exact in closed form. With J = du/d beta = -theta D^-1 Z'WX (the implicit
function theorem on the mode equation u_a = theta sum_{i in a} wt_i (y_i - mu_i)) and g_i = x_i + theta J_a(i) (the
total derivative of eta_i in beta):

- the penalized part min_u (-2 log p(y|u) + |u|^2) (the envelope theorem): 2 (X'WX - theta^2 (Z'WX)' D^-1 Z'WX);
- log det(L L') = sum_a log D_a, with d^2 u_a / d beta^2 = -theta sum_{i in a} w'_i g_i g_i' / D_a:

      sum_a [ -(theta^2 / D_a)^2 V_a V_a' + (theta^2 / D_a) sum_{i in a} w''_i g_i g_i'
              - (theta^2 / D_a)^2 (sum_{i in a} w'_i) sum_{i in a} w'_i g_i g_i' ],   V_a = sum_{i in a} w'_i g_i,

each sum over the rows of a level expanded in X'diag(.)X, Z'diag(.)X and J (q x p): O(N + q p^2) instead of
O(N (K + p)) per evaluation. The columns of theta stay central differences of the gradient (2 K evaluations), so the
whole Hessian is the one of central differences up to their O(h^2) error (tests/mixed/test_laplace_hessian.py
compares the two).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from ..structure.sparse_design import level_cross, scale_rows

#: V'' of the canonical families whose beta block is in closed form
_SECOND_VARIANCE = {"binomial": lambda mu: -2.0 * np.ones_like(mu), "poisson": np.zeros_like}


def applies(model) -> bool:
    """Whether :func:`beta_block` applies to a :class:`~.laplace.GLMMDeviance`: one term, a canonical link of the
    binomial or Poisson family, no nested pair."""
    return (model.K == 1 and model.nested is None and model.fam.canonical
            and model.fam.name in _SECOND_VARIANCE)


def _xtdx(X, v) -> np.ndarray:
    """X' diag(v) X (X dense or sparse)."""
    if sparse.issparse(X):
        return (X.T @ scale_rows(X, v)).toarray()
    return X.T @ (X * v[:, None])


def _ztx(model, v) -> np.ndarray:
    """Z' diag(v) X (levels x p)."""
    if model.coo is not None:
        return level_cross(model.codes[0], model.sizes[0], model.coo, v)
    codes, q = model.codes[0], model.sizes[0]
    return np.column_stack([np.bincount(codes, weights=v * x, minlength=q) for x in model.X.T])


def beta_block(model, theta, beta) -> np.ndarray:
    """The p x p block of the Laplace deviance's Hessian in the fixed effects at (theta, beta) (module docstring)."""
    theta, beta = np.asarray(theta, float), np.asarray(beta, float)
    _, _, mu, _, _, _, _ = model.pirls(theta, beta)
    model.pred = None
    fam, codes, q = model.fam, model.codes[0], model.sizes[0]
    var = fam.variance(mu)
    w = model.wt * var
    w1 = w * fam.dvariance(mu)
    w2 = w * (fam.dvariance(mu) ** 2 + var * _SECOND_VARIANCE[fam.name](mu))
    th = float(theta[0])
    D = 1.0 + th * th * np.bincount(codes, weights=w, minlength=q)
    C = _ztx(model, w)                      # Z'WX
    J = -th * C / D[:, None]                # du / d beta
    penalized = 2.0 * (_xtdx(model.X, w) + th * C.T @ J)
    c1 = th * th / D                        # theta^2 / D_a
    s1 = np.bincount(codes, weights=w1, minlength=q)
    s2 = np.bincount(codes, weights=w2, minlength=q)
    C1, C2 = _ztx(model, w1), _ztx(model, w2)

    def gg(cw, level_coef, Ck, sk):
        """sum_a level_coef_a sum_{i in a} cw_i g_i g_i' for row weights cw (Ck = Z' diag(cw) X, sk = Z' cw)."""
        cross = (Ck * level_coef[:, None]).T @ J
        return (_xtdx(model.X, cw * level_coef[codes]) + th * (cross + cross.T)
                + th * th * (J * (level_coef * sk)[:, None]).T @ J)

    V = C1 + th * s1[:, None] * J
    c3 = c1 * c1 * s1
    logdet = -(V * (c1 * c1)[:, None]).T @ V + gg(w2, c1, C2, s2) - gg(w1, c3, C1, s1)
    H = penalized + logdet
    return 0.5 * (H + H.T)
