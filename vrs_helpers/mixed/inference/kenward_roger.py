"""The Kenward-Roger adjusted covariance of the fixed effects and its F test (Kenward & Roger 1997), as pbkrtest
0.5.2 computes them (``vcovAdj``, ``KRmodcomp``, ``Lb_ddf``), from a REML fit's sufficient statistics.

The variance parameters are pbkrtest's: for each random term the elements of the lower triangle of its covariance
matrix, then the residual variance, gamma = (gamma_1, ..., gamma_G), with Sigma = V(y) = sum_i gamma_i G_i linear in
them: G_i = Z_k (I_{m_k} (x) E_i) Z_k' for an element of term k (E_i = e_a e_b' + e_b e_a'; e_a e_a' on the
diagonal), G_G = I. With Phi = (X'Sigma^-1 X)^-1,

    P_i  = -X'Sigma^-1 G_i Sigma^-1 X,        Q_ij = X'Sigma^-1 G_i Sigma^-1 G_j Sigma^-1 X,   R_ij = 0 (linear),
    I_ij = tr(Sigma^-1 G_i Sigma^-1 G_j) - 2 tr(Phi Q_ij) + tr(Phi P_i Phi P_j)   (twice the REML expected
           information),  W = 2 I^-1 (the asymptotic covariance of gamma-hat),
    Phi_A = Phi + 2 Phi [sum_ij W_ij (Q_ij - P_i Phi P_j)] Phi                       (KR eq. 2-4);

for H0: L beta = 0 (L with q rows), Theta = L'(L Phi L')^-1 L, A1 = sum_ij W_ij tr(Theta Phi P_i Phi)
tr(Theta Phi P_j Phi), A2 = sum_ij W_ij tr(Theta Phi P_i Phi Theta Phi P_j Phi), and from them E*, V*, the
denominator df m = 4 + (q + 2) / (q rho - 1) and the scale lambda = m (1 - A2/q) / (m - 2) (KR section 3); the
statistic is F = lambda (L beta)'(L Phi_A L')^-1 (L beta) / q on (q, m) df.

pbkrtest builds Sigma and the G_i as N x N matrices. Here nothing of size N is formed: with V* = Sigma / sigma^2 =
I + Z Lambda Lambda' Z', the term with the most levels ("big", b) is eliminated first, V_b = I + Z_b Psi_b Z_b' being
block diagonal over its levels (V_b^-1 = I + Z_b C Z_b', C = -T_b (T_b' g_l T_b + I)^-1 T_b' per level), then the other
terms (o) by Woodbury: V*^-1 = V_b^-1 - V_b^-1 Z_o R Z_o' V_b^-1, R = Lambda_o (I + Lambda_o' W Lambda_o)^-1 Lambda_o',
W = Z_o'V_b^-1 Z_o. Every block of Z'V*^-1 Z, Z'V*^-1 X and X'V*^-1 X is then a per-level r_b x r_b block, a dense
block of the other terms' size q_o, or the sparse J' = Z_o'V_b^-1 Z_b = Z_o'Z_b (I + C g) - and every trace above
reduces to those (sandwiches J' blockdiag(B) J cost what one deviance evaluation of the engine costs). The
residual's P, Q and traces follow from the others through G_G = (Sigma - sum_{i<G} gamma_i G_i) / sigma^2, so V*^-2
and V*^-3 are never needed. Memory and time follow the levels, not the rows; about eight dense q_o x q_o matrices are
kept, so the test refuses q_o > :data:`DENSE_OTHERS_LIMIT` with a message (the fit itself allows 25,000). Every
model the engine fits from a DataFrame, chunks or a Dask DataFrame qualifies: the statistics hold all of Z'Z, Z'X, X'X.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import linalg, stats

from ... import outcomes
from ..likelihood import nested
from ..likelihood.deviance import BlockDeviance, chol_inverse
from ..structure.errors import MixedModelError


@dataclass
class KRAdjustment:
    """pbkrtest's ``vcovAdj``: the unadjusted and adjusted covariance of beta-hat (Phi, Phi_A), the P_i and
    W = 2 I^-1 over the variance parameters ``names`` (gamma, in lme4's order, the residual last)."""

    names: list[str]
    gamma: np.ndarray
    beta: np.ndarray
    vcov: np.ndarray
    vcov_adjusted: np.ndarray
    P: list[np.ndarray]
    W: np.ndarray
    fixed_names: list[str]

    def to_frame(self) -> pd.DataFrame:
        """The adjusted covariance Phi_A (fixed effects x fixed effects)."""
        return pd.DataFrame(self.vcov_adjusted, index=self.fixed_names, columns=self.fixed_names)

    def __repr__(self) -> str:
        ratio = np.sqrt(np.diag(self.vcov_adjusted) / np.diag(self.vcov))
        return (f"KRAdjustment({len(self.fixed_names)} fixed effects, {len(self.names)} variance parameters; "
                f"adjusted / unadjusted SE: {np.round(ratio, 4)})")


# ----------------------------------------------------------------------------------------- per-level blocks

def _left(e: np.ndarray, M: np.ndarray) -> np.ndarray:
    """(I_m (x) e) M for M with m r rows (level-major)."""
    r = e.shape[0]
    return np.einsum("ab,mbc->mac", e, M.reshape(-1, r, M.shape[1])).reshape(M.shape)


def _per_level(B: np.ndarray, M: np.ndarray) -> np.ndarray:
    """blockdiag(B_1..B_m) M for B (m, r, r) and M with m r rows."""
    m, r, _ = B.shape
    return np.einsum("mab,mbc->mac", B, M.reshape(m, r, -1)).reshape(m * r, -1)


def _diag_blocks(M: np.ndarray, r: int) -> np.ndarray:
    """The r x r diagonal blocks (m, r, r) of an (m r) x (m r) matrix."""
    m = M.shape[0] // r
    M4 = M.reshape(m, r, m, r)
    idx = np.arange(m)
    return M4[idx, :, idx, :]


def _trace_E(e: np.ndarray, M: np.ndarray) -> float:
    """tr((I_m (x) e) M) for a square (m r) x (m r) M."""
    return float((_diag_blocks(M, e.shape[0]) * e.T).sum())


#: levels x coefficients of the random terms other than the largest one up to which the test runs: it keeps about
#: eight dense matrices of that size (10,000: 0.8 GB each), where the fit keeps two.
DENSE_OTHERS_LIMIT = 10_000


class _Structure:
    """Z'V*^-1 Z, Z'V*^-1 X, X'V*^-1 X at the estimate, kept as per-level blocks of the big term, dense blocks of
    the other terms and the sparse J' (module docstring)."""

    def __init__(self, result, view=None):
        s = result.stats if view is None else view.s
        dev = BlockDeviance(s, True)
        if dev.q_o > DENSE_OTHERS_LIMIT:
            names = ", ".join(s.groups[k] for k in dev.others)
            raise MixedModelError(
                f"Kenward-Roger's test keeps dense matrices over the levels of the random terms other than the "
                f"largest ({names}: {dev.q_o} levels x coefficients; the limit is {DENSE_OTHERS_LIMIT}, about "
                f"{8 * dev.q_o ** 2 * 8 / 1e9:.0f} GB here). Use ddf='satterthwaite', which needs only the fit's "
                f"deviance.")
        self.s, self.dev = s, dev
        theta = s.theta_from_lme4(result.theta) if view is None else view.theta
        self.lams = dev.lambdas(theta)
        b = dev.big
        self.b, self.rb = b, dev.r[b]
        g = np.asarray(s.ZtZ_diag[b], dtype=float)  # (m_b, r_b, r_b): z_l'z_l per level (levels first)
        Tb = self.lams[b]
        eye_b = np.eye(self.rb)
        A = Tb.T @ g @ Tb + eye_b
        C = -(Tb @ np.linalg.inv(A) @ Tb.T)  # V_b^-1 = I + Z_b blockdiag(C) Z_b'
        C = 0.5 * (C + np.swapaxes(C, 1, 2))
        self.ICg = eye_b + C @ g  # J' = G_ob blockdiag(I + C g)
        self.D = g + g @ C @ g  # Z_b'V_b^-1 Z_b per level
        self.D = 0.5 * (self.D + np.swapaxes(self.D, 1, 2))
        q_o = dev.q_o
        self.q_o = q_o
        Lo = np.zeros((q_o, q_o))
        for k in dev.others:
            sl = dev.slices[k]
            Lo[sl, sl] = np.kron(np.eye(s.sizes[k]), self.lams[k])
        W = dev.Go - dev.gdg(-C)  # Z_o'V_b^-1 Z_o
        # R = Lo S^-1 Lo' with S = Lo'W Lo + I; random intercepts (Lo diagonal, issue 54: 3,303 levels of a
        # leaderboard's items and runs) by scaling and one inverse instead of dense products with Lo
        diagonal = all(self.lams[k].shape == (1, 1) for k in dev.others)
        lo = np.diag(Lo).copy() if diagonal else None
        S = lo[:, None] * W * lo[None, :] + np.eye(q_o) if diagonal else Lo.T @ W @ Lo + np.eye(q_o)
        try:
            LS = linalg.cholesky(S, lower=True) if q_o else S
        except linalg.LinAlgError:
            raise MixedModelError("the covariance matrix of the data is not positive definite at the estimate; "
                                  "Kenward-Roger's test needs a proper REML fit.") from None
        if diagonal and q_o:
            self.R = lo[:, None] * chol_inverse(LS) * lo[None, :]
        else:
            Rh = linalg.solve_triangular(LS, Lo.T, lower=True).T if q_o else np.zeros((0, 0))
            self.R = Rh @ Rh.T
        self.Mo = np.eye(q_o) - W @ self.R  # Z_o'V*^-1 Z_b = Mo J'
        self.Koo = self.Mo @ W  # Z_o'V*^-1 Z_o = W - W R W
        Fb = s.ZtX[b]
        Fo = np.vstack([s.ZtX[k] for k in dev.others]) if dev.others else np.zeros((0, s.p))
        CFb = _per_level(C, Fb)
        Xb = _per_level(g, CFb) + Fb  # Z_b'V_b^-1 X
        Xo = Fo + dev.Gob @ CFb  # Z_o'V_b^-1 X
        XX = s.XtX + Fb.T @ CFb
        self.KXX = XX - Xo.T @ self.R @ Xo  # X'V*^-1 X
        self.Y = {b: Xb - self.J(self.R @ Xo)}  # Z_k'V*^-1 X per term
        Yo = self.Mo @ Xo
        for k in dev.others:
            self.Y[k] = Yo[dev.slices[k]]

    # J' V and J U
    def Jt(self, V: np.ndarray) -> np.ndarray:
        return np.asarray(self.dev.Gob @ _per_level(self.ICg, V))

    def J(self, U: np.ndarray) -> np.ndarray:
        return _per_level(np.swapaxes(self.ICg, 1, 2), np.asarray(self.dev.Gob.T @ U))

    def sandwich(self, B: np.ndarray) -> np.ndarray:
        """J' blockdiag(B) J for symmetric per-level blocks B (m_b, r_b, r_b): a q_o x q_o matrix."""
        ICg = self.ICg
        Bt = ICg @ B @ np.swapaxes(ICg, 1, 2)
        return self.dev.gdg(0.5 * (Bt + np.swapaxes(Bt, 1, 2)))

    def apply_K(self, k: int, V: np.ndarray) -> dict:
        """Z'V*^-1 Z_k V for V with term k's rows: a dict term -> rows of that term."""
        dev = self.dev
        if k == self.b:
            JtV = self.Jt(V)
            out_b = _per_level(self.D, V) - self.J(self.R @ JtV)
            out_o = self.Mo @ JtV
        else:
            Vo = np.zeros((self.q_o, V.shape[1]))
            Vo[dev.slices[k]] = V
            out_b = self.J(self.Mo.T @ Vo)
            out_o = self.Koo @ Vo
        out = {self.b: out_b}
        for j in dev.others:
            out[j] = out_o[dev.slices[j]]
        return out


def _parameters(s, lams, sigma2: float):
    """pbkrtest's gamma: per random term (lme4's order) the lower triangle of its covariance matrix, column-major
    (as R's lower.tri): (term, E, value, name)."""
    out = []
    for k in s.lme4_order:
        t = s.terms[k]
        r, cn = t.r, t.covariate_names
        cov = sigma2 * (lams[k] @ lams[k].T)
        for c in range(r):
            for rr in range(c, r):
                e = np.zeros((r, r))
                e[rr, c] = e[c, rr] = 1.0
                name = (f"{s.groups[k]}: var({cn[c]})" if rr == c else f"{s.groups[k]}: cov({cn[c]}, {cn[rr]})")
                out.append((k, e, float(cov[rr, c]), name))
    return out


def adjustment(result) -> KRAdjustment:
    """The Kenward-Roger adjusted covariance of the fixed effects of a REML fit (pbkrtest's ``vcovAdj``; module
    docstring), with what the F test needs."""
    s = result.stats
    if s is None:
        raise MixedModelError("Kenward-Roger's test needs a result of vrs_helpers.mixed.fit (with its statistics).")
    if result.method != "REML":
        raise MixedModelError("Kenward-Roger's test is defined for REML fits (pbkrtest refits ML fits by REML); "
                              "refit with method='REML'.")
    if s.p == 0:
        raise MixedModelError("the model has no fixed effects to test.")
    # (1|item) + (1|system:item) merged into one term over the items where that pays (nested.find)
    view = nested.block_view(s, s.theta_from_lme4(result.theta))
    st = _Structure(result, view)
    sigma2 = float(result.sigma) ** 2
    if view is None:
        params = _parameters(s, st.lams, sigma2)
    else:
        params = []
        for j, e, name in view.patterns:
            cov = sigma2 * (st.lams[j] @ st.lams[j].T)
            params.append((j, e, float(cov[np.unravel_index(np.argmax(e), e.shape)]), name))
    nr = len(params)  # random parameters; the residual variance is number nr
    b = st.b
    # per random parameter: P~_i = X'S^-1 G_i S^-1 X, t_i = tr(S^-1 G_i), and E_i Y_k
    EY = [_left(e, st.Y[k]) for k, e, _, _ in params]
    Pt = [st.Y[k].T @ EY[i] / sigma2 ** 2 for i, (k, _, _, _) in enumerate(params)]
    H, N = {}, {}  # J' E_i J and Mo J' E_i J Mo' for parameters of the big term
    for i, (k, e, _, _) in enumerate(params):
        if k == b and st.q_o:
            H[i] = st.sandwich(np.broadcast_to(e, st.D.shape))
            N[i] = st.Mo @ H[i] @ st.Mo.T
    t = np.zeros(nr)
    for i, (k, e, _, _) in enumerate(params):
        if k == b:
            t[i] = float((st.D * e).sum()) - (float((st.R * H[i]).sum()) if st.q_o else 0.0)
        else:
            sl = st.dev.slices[k]
            t[i] = _trace_E(e, st.Koo[sl, sl])
    t /= sigma2
    Kt = np.zeros((nr, nr))
    for i, (k, ei, _, _) in enumerate(params):
        for j in range(i + 1):
            m, ej = params[j][0], params[j][1]
            if k == b and m == b:
                De = st.D @ ej
                v = float((np.swapaxes(st.D @ ei, 1, 2) * De).sum())  # sum_l tr(e_i D_l e_j D_l)
                if st.q_o:
                    B = ei @ De
                    cross = st.sandwich(B + np.swapaxes(B, 1, 2))
                    v += float((st.R @ H[j] * (st.R @ H[i]).T).sum()) - float((st.R * cross).sum())
            elif k == b or m == b:
                big, other = (i, j) if k == b else (j, i)
                sl = st.dev.slices[params[other][0]]
                v = _trace_E(params[other][1], N[big][sl, sl])
            else:
                Kkl = st.Koo[st.dev.slices[k], st.dev.slices[m]]
                v = float((_left(ei, Kkl) * _left(ej, Kkl.T).T).sum())
            Kt[i, j] = Kt[j, i] = v / sigma2 ** 2
    Q = [[None] * (nr + 1) for _ in range(nr + 1)]
    for j, (m, _, _, _) in enumerate(params):
        KV = st.apply_K(m, EY[j])
        for i, (k, _, _, _) in enumerate(params):
            Q[i][j] = EY[i].T @ KV[k] / sigma2 ** 3
    # the residual variance: G_res = (Sigma - sum_i gamma_i G_i) / sigma^2
    gam = np.array([v for _, _, v, _ in params])
    Phi_inv = st.KXX / sigma2
    Pt.append((Phi_inv - sum(g * P for g, P in zip(gam, Pt, strict=False))) / sigma2)
    for i in range(nr):
        Q[i][nr] = (Pt[i] - sum(gam[j] * Q[i][j] for j in range(nr))) / sigma2
        Q[nr][i] = Q[i][nr].T
    Q[nr][nr] = (Pt[nr] - sum(gam[j] * Q[nr][j] for j in range(nr))) / sigma2
    t_res = (s.n - float(gam @ t)) / sigma2
    Kt_res = (t - Kt @ gam) / sigma2
    Kt_rr = (t_res - float(gam @ Kt_res)) / sigma2
    Kt = np.block([[Kt, Kt_res[:, None]], [Kt_res[None, :], np.array([[Kt_rr]])]])
    ng = nr + 1
    try:
        Phi = sigma2 * np.linalg.inv(st.KXX)
    except np.linalg.LinAlgError:
        raise MixedModelError("X'V^-1 X is singular: the fixed effects are not identified.") from None
    Phi = 0.5 * (Phi + Phi.T)
    P = [-x for x in Pt]  # pbkrtest's P_i
    IE2 = np.empty((ng, ng))
    for i in range(ng):
        PhiPi = Phi @ P[i]
        for j in range(i + 1):
            IE2[i, j] = IE2[j, i] = (Kt[i, j] - 2.0 * float((Phi * Q[i][j]).sum())
                                     + float((PhiPi * (P[j] @ Phi)).sum()))
    # pbkrtest: solve unless the smallest |eigenvalue| is below 1e-10, then MASS::ginv (tolerance sqrt(eps))
    if np.min(np.abs(np.linalg.eigvalsh(IE2))) > 1e-10:
        W = 2.0 * np.linalg.inv(IE2)
    else:
        W = 2.0 * np.linalg.pinv(IE2, rcond=math.sqrt(np.finfo(float).eps))
    W = 0.5 * (W + W.T)
    U = np.zeros_like(Phi)
    for i in range(ng):
        for j in range(ng):
            U += W[i, j] * (Q[i][j] - P[i] @ Phi @ P[j])
    PhiA = Phi + 2.0 * Phi @ U @ Phi
    PhiA = 0.5 * (PhiA + PhiA.T)
    names = [nm for _, _, _, nm in params] + ["Residual: var"]
    return KRAdjustment(names, np.r_[gam, sigma2], result.fixed_effects["estimate"].to_numpy(), Phi, PhiA, P, W,
                        list(result.fixed_effects.index))


@dataclass
class KRStatistics(outcomes.FTest):
    """pbkrtest's ``.KR_adjust`` for one L: F = lambda F_unscaled on (num_df, den_df) df and its p; F_unscaled is
    the Wald statistic with the adjusted covariance over q, lambda the scale (KR section 3)."""

    F: float  # noqa: N815
    F_unscaled: float  # noqa: N815
    scale: float
    num_df: int
    den_df: float
    p_value: float
    method = "F test, Kenward-Roger df"

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"F": self.F, "F_unscaled": self.F_unscaled, "scale": self.scale,
                              "num_df": self.num_df, "den_df": self.den_df, "p_value": self.p_value}])

    def __repr__(self) -> str:
        return (f"KRStatistics(F = {self.F:.4g} (lambda = {self.scale:.4g} x {self.F_unscaled:.4g}) on "
                f"({self.num_df}, {self.den_df:.4g}) df, p = {self.p_value:.4g})")


def _div_zero(x, y, tol: float = 1e-14):
    """pbkrtest's ``.divZero``: 1 where both are below ``tol``, else x / y (IEEE: +-inf for y = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.float64(1.0) if abs(x) < tol and abs(y) < tol else np.float64(x) / np.float64(y)


def f_test(adj: KRAdjustment, L: np.ndarray) -> KRStatistics:
    """Kenward-Roger's F test of H0: L beta = 0 from the adjustment (pbkrtest's ``.KR_adjust``: E*, V*, rho, the
    denominator df m and the scale lambda of KR section 3)."""
    L = np.atleast_2d(np.asarray(L, dtype=float))
    Phi = adj.vcov
    q = int(np.linalg.matrix_rank(L))
    Theta = L.T @ np.linalg.solve(L @ Phi @ L.T, L)
    TP = Theta @ Phi
    u = [TP @ Pi @ Phi for Pi in adj.P]
    tr_u = np.array([np.trace(x) for x in u])
    W = adj.W
    A1 = float(tr_u @ W @ tr_u)
    A2 = float(sum(W[i, j] * float((u[i] * u[j].T).sum()) for i in range(len(u)) for j in range(len(u))))
    m, scale = den_df(A1, A2, q)
    Lb = L @ adj.beta
    wald = float(Lb @ np.linalg.solve(L @ adj.vcov_adjusted @ L.T, Lb))
    F_u = wald / q
    F = scale * F_u
    return KRStatistics(F, F_u, scale, q, float(m), float(stats.f.sf(F, q, m)))


def den_df(A1: float, A2: float, q: int) -> tuple[float, float]:
    """Kenward-Roger's denominator df m and scale lambda from pbkrtest's A1, A2 of a hypothesis of rank q."""
    # IEEE arithmetic as in R, where pbkrtest computes it: on balanced designs V2 = 1 - c3 B is 0 (exactly, or to
    # rounding), rho is infinite and m = 4 + (q + 2) / inf = 4 is the exact df k(n - 1) of the ANOVA F test
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        A1, A2, qf = np.float64(A1), np.float64(A2), np.float64(q)
        B = (A1 + 6.0 * A2) / (2.0 * qf)
        g = ((qf + 1) * A1 - (qf + 4) * A2) / ((qf + 2) * A2)
        c1 = g / (3 * qf + 2 * (1 - g))
        c2 = (qf - g) / (3 * qf + 2 * (1 - g))
        c3 = (qf + 2 - g) / (3 * qf + 2 * (1 - g))
        V0 = 1 + c1 * B
        V0 = np.float64(0.0) if abs(V0) < 1e-10 else V0
        V1 = 1 - c2 * B
        V2 = 1 - c3 * B
        if abs(V2) < 1e-12 * max(1.0, abs(c3 * B)):  # 0 up to rounding: R would get 0 or a tiny value -> |rho| huge
            V2 = np.float64(0.0)
        rho = (_div_zero(1 - A2 / qf, V1)) ** 2 * V0 / V2 / qf
        m = float(4 + (qf + 2) / (qf * rho - 1))
    if not (np.isfinite(m) and m > 0):
        raise MixedModelError(f"Kenward-Roger's denominator df are not defined for this contrast (m = {m:.4g}: the "
                              f"variance parameters carry almost no information about it); use ddf='satterthwaite'.")
    scale = 1.0 if abs(m - 2) < 0.01 else m * (1 - A2 / q) / (m - 2)
    return m, scale


def contrast_dfs(adj: KRAdjustment, C) -> np.ndarray:
    """Kenward-Roger's df of the t test of each row c of ``C`` (one contrast: q = 1), as :func:`f_test` gives them
    one by one, from matrix products over all rows at once (issue 54: 5,050 means and contrasts of 100 systems took
    12 ms each). For one row, u_i = c' a_i / (c Phi c') with a_i = c Phi P_i Phi, so tr(u_i) = a_i c' / (c Phi c')
    and sum(u_i * u_j') = tr(u_i) tr(u_j): A1 = A2 = tr(u)' W tr(u)."""
    C = np.atleast_2d(np.asarray(C, dtype=float))
    Phi = adj.vcov
    s = np.einsum("ij,jk,ik->i", C, Phi, C)
    tr_u = np.column_stack([np.einsum("ij,jk,ik->i", C, Phi @ Pi @ Phi, C) for Pi in adj.P]) / s[:, None]
    A = np.einsum("ri,ij,rj->r", tr_u, adj.W, tr_u)
    out = np.empty(len(C))
    for r, a in enumerate(A):
        m, _ = den_df(float(a), float(a), 1)
        out[r] = m
    return out


__all__ = ["KRAdjustment", "KRStatistics", "adjustment", "contrast_dfs", "den_df", "f_test"]
