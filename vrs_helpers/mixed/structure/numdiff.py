"""Finite differences: the engine's one place for numerical derivatives (gradients, Jacobians, Hessians).

Central differences with per-coordinate steps ``h`` (error O(h^2)), forward differences from a known value (O(h)),
and one step of Richardson extrapolation (Richardson 1911; numDeriv's ``method = "Richardson"`` takes more steps):

    f'(x)   ~ (f(x + h) - f(x - h)) / 2h,
    f''(x)  ~ (f(x + h) - 2 f(x) + f(x - h)) / h^2,
    d2f / dx_i dx_j ~ (f(x + h_i + h_j) - f(x + h_i - h_j) - f(x - h_i + h_j) + f(x - h_i - h_j)) / 4 h_i h_j,
    Richardson: (4 D(h/2) - D(h)) / 3 cancels the h^2 term of a central difference D(h).

The variables are the last axis of ``x``; leading axes are a batch (one problem per row, as the parametric
bootstrap's batched optimizer uses them), so one code serves one point and many. Users: Satterthwaite's
denominator df (:mod:`.satterthwaite`: the variance-parameter Hessian from differences of the deviance's gradient),
the GLMM Hessians of :mod:`.glmm` (lme4's ``deriv12``) and the start of the GLMM bootstrap's refits
(:mod:`.glmm_bootstrap`), the Newton polish of :mod:`.optimizer` and the batched optimizer of :mod:`.batch`.
"""

from __future__ import annotations

import numpy as np


def steps(x, rel: float, floor: float) -> np.ndarray:
    """Steps ``rel * max(|x|, floor)``: relative to the variable, with a floor near 0."""
    return rel * np.maximum(np.abs(x), floor)


def _unit(x: np.ndarray, h: np.ndarray, i: int) -> np.ndarray:
    e = np.zeros(np.broadcast_shapes(np.shape(x), np.shape(h)))
    e[..., i] = h[..., i]
    return e


def jacobian(f, x, h, f0=None, at=None) -> np.ndarray:
    """d f / d x_i for i in ``at`` (default: every variable), stacked on the first axis (shape (len(at), *f's
    shape)). Central differences with steps ``h``; forward differences from ``f0 = f(x)`` when it is given.
    For a scalar ``f`` this is its gradient."""
    x, h = np.asarray(x, dtype=float), np.asarray(h, dtype=float)
    h = np.broadcast_to(h, x.shape)
    out = []
    for i in range(x.shape[-1]) if at is None else at:
        e = _unit(x, h, i)
        if f0 is None:
            out.append((f(x + e) - f(x - e)) / (2 * h[..., i]))
        else:
            out.append((f(x + e) - f0) / h[..., i])
    return np.array(out)


def derivatives(f, x, h, f0=None) -> tuple[np.ndarray, np.ndarray]:
    """Central-difference gradient and Hessian of a scalar ``f`` at ``x`` (module docstring), shapes (..., k) and
    (..., k, k) for x of shape (..., k) and ``f`` returning shape (...). ``f0``: f(x) if already known. The
    function is evaluated variable by variable (x + h_i, x - h_i, then the corners with the earlier variables)."""
    x, h = np.asarray(x, dtype=float), np.asarray(h, dtype=float)
    h = np.broadcast_to(h, x.shape)
    k = x.shape[-1]
    f0 = f(x) if f0 is None else f0
    g = np.zeros(x.shape)
    H = np.zeros(x.shape + (k,))
    for i in range(k):
        ei = _unit(x, h, i)
        plus, minus = f(x + ei), f(x - ei)
        g[..., i] = (plus - minus) / (2 * h[..., i])
        H[..., i, i] = (plus - 2 * f0 + minus) / h[..., i] ** 2
        for j in range(i):
            ej = _unit(x, h, j)
            H[..., i, j] = H[..., j, i] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej)
                                           + f(x - ei - ej)) / (4 * h[..., i] * h[..., j])
    return g, H


def hessian(f, x, h, f0=None) -> np.ndarray:
    """Central-difference Hessian of a scalar ``f`` (:func:`derivatives`)."""
    return derivatives(f, x, h, f0)[1]


def richardson(estimate, h):
    """One Richardson step on a central-difference ``estimate(h)``: (4 estimate(h/2) - estimate(h)) / 3."""
    h = np.asarray(h, dtype=float)
    return (4.0 * estimate(h / 2) - estimate(h)) / 3.0
