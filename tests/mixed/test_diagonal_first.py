"""The dense block's factor with a diagonal first block (mixed/likelihood/diagonal_first.py, issue 54).

Checked against numpy's dense Cholesky and inverse of the same matrix (the factor with a positive diagonal is
unique), and the leaderboard model's deviance, gradient, average-information Hessian and fit against the engine's
dense path on the same statistics (the dense path is the one the R references check)."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vrs_helpers import mixed
from vrs_helpers.mixed.likelihood import deviance as dv
from vrs_helpers.mixed.likelihood.diagonal_first import DiagonalFirst
from vrs_helpers.mixed.likelihood.information import psi_information


def _matrix(seed: int, n1: int, n2: int) -> np.ndarray:
    """A symmetric positive definite matrix whose leading n1 x n1 block is diagonal."""
    rng = np.random.default_rng(seed)
    d = rng.uniform(0.5, 5.0, n1)
    E = rng.normal(0, 1, (n1, n2))
    A = rng.normal(0, 1, (n2, n2))
    F = E.T @ (E / d[:, None]) + A @ A.T + 0.1 * np.eye(n2)
    return np.block([[np.diag(d), E], [E.T, F]])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40), st.integers(0, 12))
def test_the_factor_is_the_cholesky_factor(seed, n1, n2):
    S = _matrix(seed, n1, n2)
    L = np.linalg.cholesky(S)
    f = DiagonalFirst(S.copy(), n1)
    rng = np.random.default_rng(seed + 1)
    b = rng.normal(0, 1, (n1 + n2, 3))
    # 1e-9: the same factor up to rounding (S's condition number stays below about 1e4 here)
    np.testing.assert_allclose(f.solve(b), np.linalg.solve(L, b), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(f.solve(b, trans=True), np.linalg.solve(L.T, b), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(f.solve(b[:, 0]), np.linalg.solve(L, b[:, 0]), rtol=1e-9, atol=1e-9)
    assert f.log_diagonal_sum() == pytest.approx(0.5 * np.linalg.slogdet(S)[1], rel=1e-10, abs=1e-10)
    np.testing.assert_allclose(f.row_squares(), np.diag(S), rtol=1e-10)
    inv = np.linalg.inv(S)
    np.testing.assert_allclose(f.inverse_lower(), np.tril(inv), rtol=1e-8, atol=1e-10)
    part = np.tril(inv)
    part[:n1, :n1] = np.diag(np.diag(inv)[:n1])
    np.testing.assert_allclose(f.inverse_lower(first_block_diagonal_only=True), part, rtol=1e-8, atol=1e-10)


def test_a_matrix_that_is_not_positive_definite_is_refused():
    S = _matrix(1, 5, 3)
    S[6, 6] = -10.0
    with pytest.raises(np.linalg.LinAlgError):
        DiagonalFirst(S, 5)


def _leaderboard(seed: int = 3, systems: int = 12, runs: int = 3, items: int = 260) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ability = rng.normal(0, 0.5, systems)
    difficulty = rng.normal(0, 1, items)
    eta = (ability[:, None, None] - difficulty[None, None, :] + rng.normal(0, 0.1, (systems, runs, 1))
           + rng.normal(0, 0.3, (systems, 1, items)))
    score = (rng.random(eta.shape) < 1 / (1 + np.exp(-eta))).astype(float)
    s, r, i = np.meshgrid(np.arange(systems), np.arange(runs), np.arange(items), indexing="ij")
    return pd.DataFrame({"system": [f"s{v:02d}" for v in s.ravel()], "run": r.ravel().astype(str),
                         "item": i.ravel().astype(str), "y": score.ravel()})


FORMULA = "y ~ system + (1|item) + (1|system:item) + (1|run) + (1|system:run)"


@pytest.mark.parametrize("reml", [True, False])
def test_the_leaderboard_deviance_equals_the_dense_path(reml, monkeypatch):
    s = mixed.accumulate(FORMULA, _leaderboard())
    fast = dv.Deviance(s, reml)
    assert fast.diagonal_first is not None and s.groups[fast.diagonal_first] == "item"
    monkeypatch.setattr(dv, "_DIAG_MIN_LEVELS", 10 ** 9)
    dense = dv.Deviance(s, reml)
    assert dense.diagonal_first is None
    for theta in (np.array([0.3, 0.5, 0.1, 0.2]), np.array([1e-4, 0.8, 0.0, 0.05])):
        v1, g1 = fast.value_and_grad(theta)
        v2, g2 = dense.value_and_grad(theta)
        assert v1 == pytest.approx(v2, rel=1e-11)
        np.testing.assert_allclose(g1, g2, rtol=1e-7, atol=1e-8)
        if theta.min() > 0:
            np.testing.assert_allclose(psi_information(fast, theta), psi_information(dense, theta), rtol=1e-7,
                                       atol=1e-8)


def test_the_leaderboard_fit_equals_the_dense_path(monkeypatch):
    d = _leaderboard(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = mixed.fit(FORMULA, d)
        monkeypatch.setattr(dv, "_DIAG_MIN_LEVELS", 10 ** 9)
        dense = mixed.fit(FORMULA, d)
    np.testing.assert_allclose(np.asarray(fast.theta), np.asarray(dense.theta), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(fast.fixef, dtype=float), np.asarray(dense.fixef, dtype=float),
                               rtol=1e-8, atol=1e-9)
    assert fast.loglik == pytest.approx(dense.loglik, rel=1e-10)
