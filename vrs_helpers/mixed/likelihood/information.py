"""The average-information Hessian of the random-intercept deviance (:class:`.deviance.Deviance`): Gilmour, Thompson
& Cullis (1995, Biometrics 51, 1440-1450), from a few solves with the factor the evaluation has already made.

With V = sigma^2 V*, V* = I + sum_k psi_k Z_k Z_k' (psi_k = theta_k^2), P the REML projection (V^-1 less its X
part; with beta profiled the ML deviance has the same quadratic form), P y = e / sigma^2 (e = y - X beta - Z b) and
c = Z'e (u of :meth:`.deviance.Deviance.gradient`), the second derivatives of the deviance -2 l(sigma^2, psi) are

    d2 / dpsi_k dpsi_l     ~ y'P V_k P V_l P y = c_k' Z_k'P Z_l c_l  (V_k = dV/dpsi_k = sigma^2 Z_k Z_k': the average
                             of the observed and the expected information, which differ by a term of mean zero)
    d2 / dpsi_k dsigma^2   = |c_k|^2 / sigma^4,    d2 / d(sigma^2)^2 = r^2 / sigma^6  (exact at the profiled sigma^2)

with sigma^2 Z'P Z = Z'V*^-1 Z - Q (X'V*^-1 X)^-1 Q', Q = Z'V*^-1 X and Z'V*^-1 Z = G - G Lambda M^-1 Lambda G
(G = Z'Z, M = Lambda G Lambda + I, solved with the blocked factor: A diagonal, L_S dense). Profiling sigma^2 out is
the Schur complement of its row; in theta = sqrt(psi) the Hessian is 4 theta_k theta_l H_kl + 2 delta_kl g_k (g
the psi-gradient). Near the optimum it agrees with the Hessian from differences of the gradient to a few per cent
(InstEval), at the cost of K solves instead of K evaluations, each a dense factorization and inversion.
"""

from __future__ import annotations

import numpy as np

from .deviance import Deviance, tri_solve


def _gram_columns(dev: Deviance, theta: np.ndarray, parts, xb: np.ndarray, xo: np.ndarray):
    """Z'V*^-1 Z x for the columns x = [xb; xo] (big levels; other levels): y - G Lambda M^-1 Lambda y, y = G x."""
    A, lam, LS = parts[0], parts[2], parts[4]
    tb = theta[dev.big]
    yb = dev.n_big[:, None] * xb + dev.BT.T @ xo
    yo = dev.BT @ xb + dev.C_times(xo)
    wb, wo = tb * yb, lam[:, None] * yo
    # M z = w with M = [[A, M_bo], [M_ob, M_oo]], M_ob = lam Z_o'Z_b tb, S = M_oo - M_ob A^-1 M_bo = L_S L_S'
    rhs = wo - lam[:, None] * (dev.BT @ (tb * wb / A[:, None]))
    zo = tri_solve(LS, tri_solve(LS, rhs, lower=True), lower=True, trans=True) if dev.q_o else rhs
    zb = (wb - tb * (dev.BT.T @ (lam[:, None] * zo))) / A[:, None]
    lzb, lzo = tb * zb, lam[:, None] * zo
    return yb - (dev.n_big[:, None] * lzb + dev.BT.T @ lzo), yo - (dev.BT @ lzb + dev.C_times(lzo))


def psi_information(dev: Deviance, theta: np.ndarray) -> np.ndarray:
    """The average-information Hessian of the profiled deviance in psi = theta^2 at ``theta`` (K x K)."""
    theta = np.asarray(theta, dtype=float)
    value, parts = dev.evaluate(theta)
    if parts is None:
        raise ValueError("the deviance is not finite at this theta")
    RX, r2 = parts[9], parts[11]
    Wb, Wo, ub, uo, beta, sigma2 = dev.weighted_residuals(theta, parts)
    p, K = dev.s.p, len(theta)
    cb, co = np.zeros((len(ub), K)), np.zeros((len(uo), K))  # column k: c restricted to term k
    cb[:, dev.big] = ub
    for k in dev.others:
        co[dev.slices[k], k] = uo[dev.slices[k]]
    rb, ro = _gram_columns(dev, theta, parts, cb, co)
    T = cb.T @ rb + co.T @ ro  # c_k' Z_k'V*^-1 Z_l c_l
    if p:
        Qc = tri_solve(RX, Wb.times(cb)[:p] + Wo[:, :p].T @ co, lower=False, trans=True)  # RX^-T Q'c
        T = T - Qc.T @ Qc
    csq = (cb * cb).sum(axis=0) + (co * co).sum(axis=0)
    cross = csq / sigma2 ** 2
    H = 0.5 * (T + T.T) / sigma2 - np.outer(cross, cross) / (r2 / sigma2 ** 3)
    return H


def theta_hessian(dev: Deviance, theta: np.ndarray) -> np.ndarray:
    """The average-information Hessian in theta: 4 theta theta' * H_psi + 2 diag(g_psi); where that is not positive
    definite (far from the optimum, a negative psi-gradient), its first part alone (positive definite for theta > 0,
    a Gauss-Newton step in psi)."""
    theta = np.asarray(theta, dtype=float)
    H = 4.0 * np.outer(theta, theta) * psi_information(dev, theta)
    full = H + np.diag(2.0 * dev.psi_gradient(theta))
    return full if np.all(np.linalg.eigvalsh(full) > 0) else H
