"""The optimizer of a linear mixed model: theta minimizing the profiled REML/ML deviance (lme4 JSS eq. 34/41).

Random intercepts (:class:`.deviance.Deviance`): L-BFGS-B with bounds theta >= 0 on the analytic gradient, from
one-way ANOVA moments of the OLS residuals (:func:`moment_start`; lme4 starts at theta = 1), with escapes from a
boundary that traps the theta-gradient at zero; with a few terms whose every evaluation factors a large dense block,
Newton steps on the average-information Hessian (:mod:`.information`) from the moment start first, or for a nested
pair merged into blocks (:mod:`.nested`) BFGS from a finite-difference Hessian at the moment start
(:func:`_quasi_newton`: InstEval 11 -> 6 -> 3 evaluations). Random slopes (:class:`.deviance.BlockDeviance`): unbounded
L-BFGS-B from lme4's start, brought to lme4's form (non-negative diagonal) afterwards. Both end with Newton steps on
a Hessian from forward differences of the gradient, which is also the convergence check (lme4's relative
gradient). :func:`optimize` returns theta (the engine's internal order: the formula's terms) and the
:class:`~vrs_helpers.mixed.structure.model.OptSummary` (theta there in lme4's order, as the model reports it).
"""

from __future__ import annotations

import numpy as np
from scipy import optimize as scipy_optimize

from ..structure import numdiff
from ..structure.design import SufficientStats
from ..structure.model import OptSummary
from . import information
from .deviance import BlockDeviance, Deviance

INTERCEPT_OPTIONS = {"ftol": 1e-12, "gtol": 1e-7, "maxiter": 5000, "maxcor": 20}
# L-BFGS-B's last iterations on a relative reduction below ~1e-11 grind on rounding noise (up to 15 of 40
# evaluations on Chem97); the Newton polish that follows converges from there in one or two steps
SLOPE_OPTIONS = {"ftol": 1e-11, "gtol": 1e-7, "maxiter": 5000, "maxcor": 20}
NEWTON_STEP_TOL = 2e-3  # converged: the largest Newton step (lme4's relative gradient) is below this
_QN_NAME = "BFGS (analytic gradient, finite-difference Hessian at the start)"
_AI_NAME = "Newton (analytic gradient, average-information Hessian)"
QUASI_NEWTON_MIN_DENSE = 256  # levels of the dense block from which an evaluation is a dense factorization
QUASI_NEWTON_MAX_TERMS = 3  # its Hessian at the start costs one gradient per term
QUASI_NEWTON_STEP_TOL = 1e-8  # stop when the largest step in theta is below this
QUASI_NEWTON_BOUNDARY = 1e-3  # a step below this leaves the search to L-BFGS-B and its boundary escapes
QUASI_NEWTON_DECREMENT = 1e-7  # or when the predicted decrease g'H^-1 g of the deviance is below this (absolute)


def optimize(dev, theta0=None) -> tuple[np.ndarray, OptSummary]:
    """theta at the minimum of ``dev`` (a :class:`.deviance.Deviance` or :class:`.deviance.BlockDeviance`) from
    ``theta0`` (internal order; None: the default start), and what the optimizer did."""
    s = dev.s
    if isinstance(dev, Deviance):
        x0 = moment_start(s) if theta0 is None else theta0
        x0 = np.ones(len(s.terms)) if x0 is None else np.asarray(x0, dtype=float)
        theta, best_f, converged, message, n_eval = _optimize_intercepts(dev, x0)
        lower, opts = np.zeros(len(theta)), INTERCEPT_OPTIONS
        name = "L-BFGS-B (bounded, analytic gradient) + Newton"
        if message.startswith(("BFGS", "Newton")):
            name = _QN_NAME if message.startswith("BFGS") else _AI_NAME
            opts = {"step": QUASI_NEWTON_STEP_TOL, "decrement": QUASI_NEWTON_DECREMENT}
    else:
        x0 = dev.start() if theta0 is None else np.asarray(theta0, dtype=float)
        qn = None
        if s.intercepts_only and dev.n_theta <= QUASI_NEWTON_MAX_TERMS:
            # random intercepts whose nested pair is merged into blocks (:mod:`.nested`): every evaluation is a
            # sandwich over all the blocks, and L-BFGS-B from lme4's start takes ~40 of them
            start = moment_start(s) if theta0 is None else x0
            qn = _quasi_newton(dev, start) if start is not None and np.all(start > 0) else None
        if qn is not None and qn[4]:
            x0 = start
            theta, best_f, rel_step, n_eval, _ = qn
            converged, message = True, f"BFGS from a finite-difference Hessian (last step {rel_step:.2g})"
            name, opts = _QN_NAME, {"step": QUASI_NEWTON_STEP_TOL, "decrement": QUASI_NEWTON_DECREMENT}
        else:
            go_on = x0
            if qn is not None and np.isfinite(qn[1]):  # go on from where the quasi-Newton search stopped
                x0, go_on = start, qn[0]
            theta, best_f, converged, message, n_eval = _optimize_general(dev, go_on)
            n_eval += qn[3] if qn is not None else 0
            name, opts = "L-BFGS-B (analytic gradient) + Newton", SLOPE_OPTIONS
        lower = dev.lower
    if name.startswith("L-BFGS-B"):
        opts = {**opts, "newton_step": NEWTON_STEP_TOL}
    summary = OptSummary(name, s.theta_to_lme4(x0), s.theta_to_lme4(theta), float(best_f), int(n_eval),
                         bool(converged), message, opts,
                         s.theta_to_lme4(lower))
    return theta, summary


def _nested_in(s: SufficientStats, k: int, j: int) -> bool:
    """Whether every level of term k's grouping lies within one level of term j's (from the Z_k'Z_j counts)."""
    G = s.ZtZ_cross[(k, j)] if k < j else s.ZtZ_cross[(j, k)].T
    G = G.tocsr() if hasattr(G, "tocsr") else G
    return bool((np.diff(G.indptr) <= 1).all())


def moment_start(s: SufficientStats) -> np.ndarray | None:
    """Starting theta for a random-intercept model from one-way ANOVA moments of the OLS residuals.

    For term k with n_l rows and residual sum R_l per level: between-level SS = sum_l R_l^2 / n_l, the usual
    one-way estimate tau_k = (MSB - MSW) / n0 with n0 = (n - sum n_l^2 / n) / (m - 1) (Searle, Casella & McCulloch
    1992, 3.6), sigma^2 from the smallest within-level mean square. Crossed factors leave these nearly unbiased,
    nested ones inflate the outer factor; either way the start is close enough that the optimizer needs few steps
    (lme4 starts at theta = 1). Everything comes from the sufficient statistics; None when they do not suffice.
    """
    n, p = s.n, s.p
    try:
        beta = np.linalg.lstsq(s.XtX, s.Xty, rcond=None)[0] if p else np.zeros(0)
    except np.linalg.LinAlgError:
        return None
    rss = float(s.yty - 2.0 * beta @ s.Xty + beta @ s.XtX @ beta) if p else float(s.yty)
    if not (np.isfinite(rss) and rss > 0 and n > p + 1):
        return None
    taus, msws = [], []
    for k in range(len(s.terms)):
        nl = s.ZtZ_diag[k][:, 0, 0]
        R = s.Zty[k] - (s.ZtX[k] @ beta if p else 0.0)
        ok = nl > 0
        m = int(ok.sum())
        if m < 2 or n <= m:
            return None
        ssb = float((R[ok] ** 2 / nl[ok]).sum())
        msb = ssb / (m - 1)
        msw = max(rss - ssb, 0.0) / (n - m)
        n0 = (n - float((nl[ok] ** 2).sum()) / n) / (m - 1)
        taus.append(max((msb - msw) / n0, 0.0) if n0 > 0 else 0.0)
        msws.append(msw)
    # a term nested in others (item:rater in item and in rater) carries their variance in its one-way estimate:
    # subtract the corrected estimates of the coarser terms (each of its levels lies in one level of theirs)
    order = sorted(range(len(taus)), key=lambda k: s.sizes[k])
    tau = list(taus)
    for k in order:
        coarser = [j for j in order if s.sizes[j] < s.sizes[k] and _nested_in(s, k, j)]
        tau[k] = max(taus[k] - sum(tau[j] for j in coarser), 0.0)
    taus = tau
    sigma2 = min(msws)
    if not sigma2 > 0:
        sigma2 = rss / (n - p)
    theta = np.sqrt(np.asarray(taus) / sigma2)
    # not exactly 0 (the theta-gradient vanishes there) and within lme4's usual range
    return np.clip(theta, 0.05, 10.0)


def _quasi_newton(dev, x0: np.ndarray, max_iter: int = 30):
    """Newton steps with step halving for a few terms whose every evaluation factors a large dense block (InstEval:
    1,128 lecturers), where L-BFGS-B, which starts from a scaled identity, spends most of its ~10 evaluations
    learning the curvature (Nocedal & Wright 2006, ch. 6). Random intercepts (:class:`.deviance.Deviance`): the
    average-information Hessian at every point (:mod:`.information`; K solves, no evaluation: InstEval 6 -> 3
    evaluations); otherwise BFGS from a Hessian by forward differences of the analytic gradient at ``x0`` (K
    evaluations). Returns (theta, deviance, largest last step, evaluations, done); done is False when it failed or
    headed for the boundary theta_k = 0, and theta is then the best point reached (the caller goes on from there
    with L-BFGS-B and its boundary escapes)."""
    f, g = dev.value_and_grad(x0)
    if not np.isfinite(f):
        return x0, f, np.inf, 1, False
    theta, n_eval = x0.copy(), 1
    scoring = isinstance(dev, Deviance)
    if scoring:
        hess = _information(dev, theta)
        if hess is None:
            return theta, f, np.inf, n_eval, False
    else:
        h = numdiff.steps(theta, 1e-5, 1e-3)
        hess = numdiff.jacobian(lambda t: dev.value_and_grad(t)[1], theta, h, f0=g).T
        hess = 0.5 * (hess + hess.T)
        n_eval += len(theta)
    for _ in range(max_iter):
        try:
            if not np.all(np.linalg.eigvalsh(hess) > 0):
                return theta, f, np.inf, n_eval, False
            step = np.linalg.solve(hess, g)
        except np.linalg.LinAlgError:
            return theta, f, np.inf, n_eval, False
        rel_step = float(np.max(np.abs(step)))
        if rel_step < QUASI_NEWTON_STEP_TOL or float(g @ step) < QUASI_NEWTON_DECREMENT:
            return theta, f, rel_step, n_eval, True
        for _halving in range(8):
            t = theta - step
            if np.any(t < QUASI_NEWTON_BOUNDARY):  # heading for theta_k = 0, where the theta-gradient vanishes
                return theta, f, np.inf, n_eval, False
            f_new, g_new = dev.value_and_grad(t)
            n_eval += 1
            if f_new <= f + 1e-12 * abs(f):
                break
            step = 0.5 * step
        else:
            return theta, f, np.inf, n_eval, False
        s_k, y_k = t - theta, g_new - g
        theta, f, g = t, f_new, g_new
        sy = float(s_k @ y_k)
        if scoring:
            hess = _information(dev, theta)
            if hess is None:
                return theta, f, np.inf, n_eval, False
        elif sy > 1e-12 * float(np.linalg.norm(s_k) * np.linalg.norm(y_k)):  # BFGS update (curvature condition)
            hs = hess @ s_k
            hess = hess + np.outer(y_k, y_k) / sy - np.outer(hs, hs) / float(s_k @ hs)
        if float(np.max(np.abs(s_k))) < QUASI_NEWTON_STEP_TOL:
            return theta, f, float(np.max(np.abs(s_k))), n_eval, True
    return theta, f, np.inf, n_eval, False


def _information(dev: Deviance, theta: np.ndarray) -> np.ndarray | None:
    """The average-information Hessian in theta (:func:`.information.theta_hessian`), or None where it cannot be
    made (the caller then leaves the search to L-BFGS-B)."""
    try:
        hess = information.theta_hessian(dev, theta)
    except (np.linalg.LinAlgError, ValueError, FloatingPointError):
        return None
    return hess if np.all(np.isfinite(hess)) else None


def _optimize_intercepts(dev: Deviance, x0: np.ndarray):
    """L-BFGS-B on the analytic gradient, with escapes from a boundary that traps the theta-gradient at zero; for a
    few terms with a large dense block, Newton steps on the average-information Hessian first
    (:func:`_quasi_newton`)."""
    K = len(x0)
    if K <= QUASI_NEWTON_MAX_TERMS and dev.q_o >= QUASI_NEWTON_MIN_DENSE and np.all(x0 > 0):
        theta, best_f, rel_step, n_qn, done = _quasi_newton(dev, np.asarray(x0, dtype=float))
        if done:
            return theta, best_f, True, f"Newton, average-information Hessian (last step {rel_step:.2g})", n_qn
        if np.isfinite(best_f):
            x0 = theta
    else:
        n_qn = 0
    bounds = [(0.0, None)] * K
    opts = INTERCEPT_OPTIONS
    res = scipy_optimize.minimize(dev.value_and_grad, x0, jac=True, method="L-BFGS-B", bounds=bounds, options=opts)
    n_eval = n_qn + int(res.nfev)
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
            line = scipy_optimize.minimize_scalar(along, bounds=(0.0, max(2.0, 2 * float(start.max()))),
                                                  method="bounded", options={"xatol": 1e-6})
            n_eval += int(line.nfev)
            start[k] = line.x
        r2 = scipy_optimize.minimize(dev.value_and_grad, start, jac=True, method="L-BFGS-B", bounds=bounds,
                                     options=opts)
        n_eval += int(r2.nfev)
        if r2.fun < best_f:
            theta, best_f, res = r2.x.copy(), float(r2.fun), r2
        else:
            break
    theta, best_f, rel_step, ne = _newton_polish(dev, theta, best_f, np.zeros(K), lambda t: np.flatnonzero(t > 0))
    n_eval += ne
    free = theta > 0
    boundary_ok = True
    if (~free).any():
        boundary_ok = bool((dev.psi_gradient(theta)[~free] >= -1e-6 * max(1.0, abs(best_f))).all())
    converged = bool(np.isfinite(best_f)) and rel_step < NEWTON_STEP_TOL and boundary_ok
    return theta, best_f, converged, str(res.message) + f" (max relative gradient {rel_step:.2g})", n_eval


def _newton_polish(dev, theta: np.ndarray, best_f: float, lower: np.ndarray, free_of, max_steps: int = 8):
    """Newton steps on the free components with a Hessian from forward differences of the analytic gradient,
    which is also lme4's convergence check (the Newton step H^-1 g, its "relative gradient", must be small).

    L-BFGS-B stops on a relative reduction of the deviance, which on flat directions (tiny variance components)
    leaves theta where the rounding of the run happened to stop it; where the step is not negligible it is taken.
    ``lower`` holds the bounds of theta (0 for a standard deviation, -inf for a correlation term), ``free_of(theta)``
    the indices of the components off the boundary. The Hessian changes little near the
    optimum, so it is reused and recomputed only when a step with the old one fails. Returns (theta, deviance,
    largest Newton step, evaluations).
    """
    rel_step, n_eval = 0.0, 0
    hess, hess_idx, fresh = None, None, False
    for _ in range(max_steps):
        _, grad = dev.value_and_grad(theta)
        idx = free_of(theta)
        if not len(idx):
            break
        if hess is None or not np.array_equal(idx, hess_idx):
            h = np.zeros(len(theta))
            h[idx] = numdiff.steps(theta[idx], 1e-5, 1e-3)
            hess = numdiff.jacobian(lambda t, idx=idx: dev.value_and_grad(t)[1][idx], theta, h, f0=grad[idx],
                                    at=idx).T
            n_eval += len(idx)
            hess = 0.5 * (hess + hess.T)
            hess_idx, fresh = idx, True
        try:
            step = np.linalg.solve(hess, grad[idx])
            rel_step = float(np.max(np.abs(step)))
            newton = bool(np.all(np.linalg.eigvalsh(hess) > 0))
        except np.linalg.LinAlgError:
            rel_step, newton = float(np.max(np.abs(grad[idx]))), False
        if not newton or rel_step < 1e-9:
            break
        t = theta.copy()
        t[idx] -= step
        t = np.where(lower == 0, np.maximum(t, 0.0), t)
        f_new, g_new = dev.value_and_grad(t)
        n_eval += 1
        # near the optimum the deviance is flat to its rounding noise (~1e-12 relative, seen on the liver grid of
        # Table 3.4 with variances ~1e-5), while the analytic gradient still points: accept a step within that
        # noise that shrinks the Newton decrement
        decrement = float(grad[idx] @ step)
        decrement_new = float(g_new[idx] @ np.linalg.solve(hess, g_new[idx]))
        if not (f_new <= best_f + 1e-11 * abs(best_f) + 1e-9 and decrement_new < decrement):
            if fresh:
                break
            hess = None  # the reused Hessian was stale: recompute it at theta and try again
            continue
        theta, best_f, fresh = t, float(min(f_new, best_f)), False
    return theta, best_f, rel_step, n_eval


def _canonical(dev: BlockDeviance, theta: np.ndarray) -> np.ndarray:
    """theta with every T_k's diagonal made non-negative by flipping the sign of its column (lme4's convention):
    T_k T_k', and so the deviance, is unchanged."""
    theta = np.asarray(theta, dtype=float).copy()
    for k, (rows, cols) in enumerate(dev.tri):
        part = theta[dev.tslices[k]]
        for c in np.unique(cols):
            if part[(rows == c) & (cols == c)][0] < 0:
                part[cols == c] *= -1.0
        theta[dev.tslices[k]] = part
    return theta


def _optimize_general(dev: BlockDeviance, x0: np.ndarray):
    """Random slopes: L-BFGS-B on the analytic gradient (:meth:`BlockDeviance.gradient`) from lme4's start, without
    bounds, then Newton polishing with the convergence check (:func:`_newton_polish`).

    The deviance depends on T_k only through T_k T_k', so a diagonal element may pass through 0 and the result is
    brought to lme4's form (non-negative diagonal) afterwards. With lme4's bound (diagonal >= 0) a quasi-Newton
    step that lands on the bound stays there: the theta-gradient of a diagonal element at 0 vanishes whatever the
    data say (the variances are squares), and on the Chem97 design every fit began by trapping one variance at 0
    and needed line searches and restarts to leave it. A diagonal element that ends at 0 (a start with zeros, or a
    singular fit) is still searched along and the optimizer restarted where the deviance falls away from 0."""
    diag = dev.lower == 0
    free_bounds = np.full(dev.n_theta, -np.inf)
    opts = SLOPE_OPTIONS

    def run(x):
        r = scipy_optimize.minimize(dev.value_and_grad, x, jac=True, method="L-BFGS-B", options=opts)
        return _canonical(dev, r.x), float(r.fun), r, int(r.nfev)

    theta, best_f, res, n_eval = run(x0)
    for _ in range(len(theta)):
        stuck = np.flatnonzero(diag & (theta <= 1e-6))
        if not len(stuck):
            break
        start, moved = theta.copy(), False
        upper = max(2.0, 2.0 * float(np.abs(theta).max()))
        base = theta.copy()  # each element searched from the point the optimizer stopped at
        for k in stuck:
            def along(v, k=k, base=base):
                x = base.copy()
                x[k] = v
                return dev(x)
            line = scipy_optimize.minimize_scalar(along, bounds=(0.0, upper), method="bounded",
                                                  options={"xatol": 1e-4})
            n_eval += int(line.nfev)
            if line.fun < best_f - 1e-9 * max(1.0, abs(best_f)):
                start[k], moved = float(line.x), True
        if not moved:
            break
        t2, f2, r2, ne = run(start)
        n_eval += ne
        if not f2 < best_f - 1e-9 * max(1.0, abs(best_f)):
            break
        theta, best_f, res = t2, f2, r2
    theta, best_f, rel_step, ne = _newton_polish(dev, theta, best_f, free_bounds,
                                                 lambda t: np.flatnonzero(~diag | (t != 0)))
    theta = _canonical(dev, theta)
    n_eval += ne
    converged = bool(np.isfinite(best_f)) and rel_step < NEWTON_STEP_TOL
    return theta, best_f, converged, str(res.message) + f" (max relative gradient {rel_step:.2g})", n_eval

