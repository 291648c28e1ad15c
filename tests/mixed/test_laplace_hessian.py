"""Issue 54: the GLMM of many systems on many rows - a sparse X and the Laplace Hessian's beta block in closed form.

The closed form (vrs_helpers/mixed/likelihood/laplace_hessian.py) is checked against the independent computation
that the dense path uses: central differences of the analytic gradient (glmm._hessian_of_gradient); the sparse X
against the dense design_rows; the whole fit (sparse X + closed-form block) against the dense fit (the path that the
lme4 reference tests check) on the same rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vrs_helpers.mixed.likelihood import laplace_hessian
from vrs_helpers.mixed.models import glmm
from vrs_helpers.mixed.structure import sparse_design
from vrs_helpers.mixed.structure.design import design_rows


def _table(seed: int, k: int, n: int, family: str, runs: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a, b = rng.normal(0, 0.5, k), rng.normal(0, 1, n)
    eta = np.repeat(a[:, None] - b[None, :], runs, axis=0)
    y = ((rng.random(eta.shape) < 1 / (1 + np.exp(-eta))).astype(float) if family == "binomial"
         else rng.poisson(np.exp(eta / 2)).astype(float))
    return pd.DataFrame({"s": np.repeat([f"s{i:02d}" for i in range(k)], n * runs),
                         "it": np.tile(np.arange(n), k * runs), "y": y.ravel()})


@pytest.fixture
def force_sparse(monkeypatch):
    monkeypatch.setattr(sparse_design, "SPARSE_MIN_ROWS", 0)
    monkeypatch.setattr(sparse_design, "SPARSE_MIN_COLUMNS", 0)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(2, 7), n=st.integers(20, 60),
       family=st.sampled_from(["binomial", "poisson"]), runs=st.integers(1, 2))
def test_beta_block_equals_central_differences(seed, k, n, family, runs):
    """The closed-form beta block is the Hessian that central differences of the analytic gradient give (to their
    O(h^2) error: 1e-6 of the block's largest entry), at the optimum and away from it."""
    m = glmm.GeneralizedLinearMixedModel("y ~ s + (1|it)", _table(seed, k, n, family, runs), family=family)
    d = m.objective
    assert laplace_hessian.applies(d)
    rng = np.random.default_rng(seed)
    par = np.concatenate([[rng.uniform(0.3, 1.5)], d.glm() + rng.normal(0, 0.1, d.X.shape[1])])

    def grad(x):
        return d.laplace(x[:1], x[1:], grad=True)[1]

    fd = glmm._hessian_of_gradient(grad, par)[1:, 1:]
    closed = laplace_hessian.beta_block(d, par[:1], par[1:])
    assert np.abs(closed - fd).max() <= 1e-6 * np.abs(fd).max()


def test_sparse_design_equals_dense(force_sparse):
    df = _table(1, 5, 30, "binomial").assign(x=lambda t: np.linspace(0, 1, len(t)))
    f = glmm.parse("y ~ s * x + (1|it)")
    s = glmm.accumulate(f, df)
    dense = design_rows(s, df)
    sp = sparse_design.sparse_design_rows(s, df)
    assert sp.shape == dense.shape
    np.testing.assert_allclose(sp.toarray(), dense, rtol=0, atol=1e-12)


@pytest.mark.parametrize("family", ["binomial", "poisson"])
def test_sparse_fit_equals_dense_fit(family, monkeypatch):
    """The same model on the same rows, fitted by the dense path (the lme4 reference tests' path) and by the sparse
    one: the same estimates, SEs and log-likelihood (1e-6 relative: the optimizer's tolerance)."""
    df = _table(7, 12, 80, family, runs=2)
    dense = glmm.glmer("y ~ s + (1|it)", df, family=family)
    monkeypatch.setattr(sparse_design, "SPARSE_MIN_ROWS", 0)
    monkeypatch.setattr(sparse_design, "SPARSE_MIN_COLUMNS", 0)
    sp = glmm.glmer("y ~ s + (1|it)", df, family=family)
    assert sp.objective.coo is not None and dense.objective.coo is None
    np.testing.assert_allclose(sp.fixed_effects[["estimate", "se"]].to_numpy(),
                               dense.fixed_effects[["estimate", "se"]].to_numpy(), rtol=1e-5, atol=1e-7)
    assert sp.loglik == pytest.approx(dense.loglik, rel=1e-9)
