"""The average-information Hessian of the random-intercept deviance (vrs_helpers.mixed.likelihood.information) against
its
definition computed with dense n x n matrices (Gilmour, Thompson & Cullis 1995): with V = sigma^2 (I + sum_k psi_k
Z_k Z_k'), P = V^-1 - V^-1 X (X'V^-1 X)^-1 X'V^-1, V_k = sigma^2 Z_k Z_k' and V_s = V / sigma^2,

    AI_kl = y'P V_k P V_l P y,  AI_ks = y'P V_k P V_s P y,  AI_ss = y'P V_s P V_s P y,

profiled over sigma^2 by the Schur complement AI_pp - AI_ps AI_sp / AI_ss at sigma^2 = y'P*y / (n - p) (REML) or
/ n (ML). Everything here is the textbook formula on explicit matrices; the module computes it from the sufficient
statistics and the blocked factor. Agreement to 1e-8 relative (rounding of two different orders of arithmetic)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vrs_helpers import mixed
from vrs_helpers.mixed.likelihood.information import psi_information, theta_hessian
from vrs_helpers.mixed.structure import numdiff


def _indicator(codes: np.ndarray) -> np.ndarray:
    return (codes[:, None] == np.unique(codes)[None, :]).astype(float)


def _dense_ai(df: pd.DataFrame, groups: list[str], fixed: list[str], theta: np.ndarray, reml: bool) -> np.ndarray:
    n = len(df)
    y = df["y"].to_numpy()
    X = np.column_stack([np.ones(n)] + [df[c].to_numpy() for c in fixed])
    Zs = [_indicator(df[g].to_numpy()) for g in groups]
    Vstar = np.eye(n) + sum(t * t * Z @ Z.T for t, Z in zip(theta, Zs, strict=True))
    Vi = np.linalg.inv(Vstar)
    Pstar = Vi - Vi @ X @ np.linalg.solve(X.T @ Vi @ X, X.T @ Vi)
    sigma2 = float(y @ Pstar @ y) / (n - X.shape[1] if reml else n)
    P = Pstar / sigma2
    Vd = [sigma2 * Z @ Z.T for Z in Zs] + [Vstar]  # dV/dpsi_k, dV/dsigma^2
    Py = P @ y
    w = [Vk @ Py for Vk in Vd]
    AI = np.array([[wi @ P @ wj for wj in w] for wi in w])
    K = len(groups)
    return AI[:K, :K] - np.outer(AI[:K, K], AI[K, :K]) / AI[K, K]


def _data(seed: int, n: int, sizes: tuple[int, ...], sds: tuple[float, ...]) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x": rng.normal(size=n)})
    y = 1.0 + 0.5 * df["x"].to_numpy() + rng.normal(size=n)
    for i, (m, sd) in enumerate(zip(sizes, sds, strict=True)):
        codes = np.concatenate([np.arange(m), rng.integers(0, m, n - m)])  # every level present
        rng.shuffle(codes)
        df[f"g{i}"] = [f"l{c}" for c in codes]
        y += rng.normal(0, sd, m)[codes]
    df["y"] = y
    return df


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), k=st.integers(1, 3), reml=st.booleans(), with_x=st.booleans(),
       scale=st.floats(0.3, 2.0))
def test_average_information_equals_its_dense_definition(seed, k, reml, with_x, scale):
    sizes = (23, 9, 5)[:k]
    df = _data(seed, 150, sizes, (0.8, 0.5, 0.3)[:k])
    groups = [f"g{i}" for i in range(k)]
    formula = "y ~ " + ("x" if with_x else "1") + "".join(f" + (1|{g})" for g in groups)
    model = mixed.LinearMixedModel(formula, df, method="REML" if reml else "ML")
    dev = model.deviance_function()
    theta = scale * np.linspace(0.4, 1.1, k)
    expected = _dense_ai(df, groups, ["x"] if with_x else [], theta, reml)
    # the deviance orders its terms as the formula does
    np.testing.assert_allclose(psi_information(dev, theta), expected, rtol=1e-8, atol=1e-10 * np.abs(expected).max())


def test_average_information_near_the_finite_difference_hessian_at_the_optimum():
    """At the optimum the psi-gradient is 0 and the AI Hessian differs from the observed one by a term of mean zero:
    on 3,000 rows in 300 x 100 crossed levels within 10 % (a loose bound: the difference is O(1/sqrt(levels)))."""
    df = _data(3, 3000, (300, 100), (0.6, 0.4))
    model = mixed.fit("y ~ x + (1|g0) + (1|g1)", df)
    dev = model.deviance_function()
    theta = np.array([model.theta[f"{g}.(Intercept)"] for g in ("g0", "g1")])  # the formula's order
    f, g = dev.value_and_grad(theta)
    h = numdiff.steps(theta, 1e-5, 1e-3)
    fd = numdiff.jacobian(lambda t: dev.value_and_grad(t)[1], theta, h, f0=g).T
    ai = theta_hessian(dev, theta)
    np.testing.assert_allclose(np.diag(ai), np.diag(fd), rtol=0.1)
    assert abs(ai[0, 1] - fd[0, 1]) <= 0.1 * np.sqrt(fd[0, 0] * fd[1, 1])


@pytest.mark.parametrize("method", ["REML", "ML"])
def test_newton_on_the_average_information_reaches_the_lbfgsb_optimum(method, monkeypatch):
    """Two large crossed factors (a 300-level dense block): the Newton path stops where L-BFGS-B + Newton polish (the
    path without it) stops, to the optimizers' tolerances."""
    from vrs_helpers.mixed.likelihood import optimizer

    df = _data(5, 6000, (700, 300), (0.5, 0.3))
    f = "y ~ x + (1|g0) + (1|g1)"
    ours = mixed.fit(f, df, method=method)
    assert ours.optsum.optimizer.startswith("Newton") and ours.optsum.converged
    monkeypatch.setattr(optimizer, "QUASI_NEWTON_MIN_DENSE", 10**9)
    ref = mixed.fit(f, df, method=method)
    assert ref.optsum.optimizer.startswith("L-BFGS-B")
    assert ours.loglik == pytest.approx(ref.loglik, abs=1e-7)
    np.testing.assert_allclose(ours.theta, ref.theta, atol=1e-5)
