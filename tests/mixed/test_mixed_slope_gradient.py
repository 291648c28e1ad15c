"""The random-slope deviance's analytic gradient and the pieces behind it
(vrs_helpers.mixed.likelihood.deviance.BlockDeviance,
vrs_helpers.mixed.structure.stacks), each against an independent computation written here: central finite differences
of the
deviance, dense matrix products, numpy's per-matrix factorizations."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_
from scipy import linalg, sparse

from vrs_helpers import mixed
from vrs_helpers.mixed.likelihood import deviance as dv
from vrs_helpers.mixed.structure import stacks


def _design(seed=1, n=1500, n_g=50, n_h=20, n_k=6):
    rng = np.random.default_rng(seed)
    g, h, k = rng.integers(0, n_g, n), rng.integers(0, n_h, n), rng.integers(0, n_k, n)
    x, z = rng.normal(size=n), rng.normal(size=n)
    a_g, b_g, a_h, b_h = (rng.normal(size=m) for m in (n_g, n_g, n_h, n_h))  # independent intercepts and slopes
    y = (0.5 * x + a_g[g] + 0.5 * b_g[g] * x + 0.4 * a_h[h] + 0.3 * b_h[h] * z + 0.3 * rng.normal(size=n_k)[k]
         + rng.normal(size=n))
    return pd.DataFrame({"g": [f"g{i}" for i in g], "h": [f"h{i}" for i in h], "k": [f"k{i}" for i in k],
                         "x": x, "z": z, "y": y})


FORMULAS = [
    "y ~ x + (1 + x|g) + (1|h)",              # slopes on the big term, an intercept on the other
    "y ~ x + (1 + x|g) + (1 + z|h)",          # slopes on both
    "y ~ x + z + (1 + x + z|g) + (1 + z|h) + (1|k)",  # 3 x 3 block, three terms
    "y ~ x + (1 + x|g)",                      # one term: no other block
    "y ~ x + (1|g) + (1 + x + z|h)",          # the slopes on a term other than the big one
    "y ~ x + (1 + x||g) + (1|h)",             # uncorrelated: scalar blocks of one grouping
    "y ~ 0 + (1 + x|g) + (1|h)",              # no fixed effects
]


def _central_differences(dev, theta, h=1e-6):
    return np.array([(dev(theta + e) - dev(theta - e)) / (2 * h) for e in np.eye(len(theta)) * h])


def _points(dev, rng):
    """lme4's start and two random points (diagonal of T positive, off-diagonal of either sign)."""
    out = [dev.start()]
    for _ in range(2):
        t = dev.start() + rng.uniform(-0.5, 0.5, dev.n_theta)
        out.append(np.where(dev.lower == 0, np.abs(t), t))
    return out


@pytest.mark.parametrize("reml", [True, False])
@pytest.mark.parametrize("formula", FORMULAS)
def test_gradient_matches_central_differences(formula, reml):
    """Central differences with h = 1e-6 have truncation error ~h^2 |f'''| and rounding error ~1e-16 |f| / h, about
    1e-7 here (deviances ~5e3) against gradient entries of 1 to 1e3: 1e-5 relative (+1e-4 absolute) is far above
    both and far below any error in a term of the derivative (a missing factor 2 or a transposed block)."""
    s = mixed.accumulate(formula, _design())
    dev = mixed.BlockDeviance(s, reml)
    for theta in _points(dev, np.random.default_rng(0)):
        _, g = dev.value_and_grad(theta)
        np.testing.assert_allclose(g, _central_differences(dev, theta), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("cross", ["pairs", "sparse", "dense"])
def test_gradient_on_each_cross_block_representation(monkeypatch, cross):
    """The big term's cross block to the others is kept dense, sparse with listed pairs, or sparse with scipy's
    products (by its size and density): the gradient is the same function in each, checked against differences on
    a design with 300 x 40 sparsely crossed levels. Tolerances as above."""
    df = _design(seed=2, n=2400, n_g=300, n_h=40)
    s = mixed.accumulate("y ~ x + (1 + x|g) + (1 + z|h)", df)
    if cross == "sparse":
        monkeypatch.setattr(dv._PairSums, "LIMIT", 0)
    if cross == "dense":
        monkeypatch.setattr(dv, "_as_cross", lambda G: G.toarray())
    dev = mixed.BlockDeviance(s, True)
    kind = {"pairs": dv._PairSums, "sparse": type(None), "dense": type(None)}[cross]
    assert sparse.issparse(dev.Gob) == (cross != "dense")
    assert isinstance(dev.gdg, dv._PairSums) == (kind is dv._PairSums)
    for theta in _points(dev, np.random.default_rng(1)):
        _, g = dev.value_and_grad(theta)
        np.testing.assert_allclose(g, _central_differences(dev, theta), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("r", [1, 2, 3])
def test_pair_sums_adjoint_is_the_per_level_sandwich(r):
    """adjoint(K) per level l = G_:l' K G_:l (dense product), including rows with several nonzeros in one level."""
    rng = np.random.default_rng(10 + r)
    m, q = 200, 30
    G = sparse.random(q, m * r, density=0.08, random_state=rng, format="csr")
    G = G + sparse.csr_matrix((np.ones(m * r), (rng.integers(0, q, m).repeat(r), np.arange(m * r))),
                              shape=(q, m * r))  # every level's r columns share one row at least
    K = rng.normal(size=(q, q))
    K = K + K.T
    Gd = G.toarray()
    expected = np.stack([Gd[:, j * r:(j + 1) * r].T @ K @ Gd[:, j * r:(j + 1) * r] for j in range(m)])
    np.testing.assert_allclose(dv._PairSums(G, r).adjoint(K, r), expected, rtol=1e-12, atol=1e-12)
    D = rng.normal(size=(m, r, r))
    D = D @ np.swapaxes(D, 1, 2)
    np.testing.assert_allclose(dv._PairSums(G, r)(D), Gd @ linalg.block_diag(*D) @ Gd.T, rtol=1e-12, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(r=st_.integers(1, 4), c=st_.integers(1, 4), m=st_.integers(1, 50), seed=st_.integers(0, 2**31 - 1))
def test_stacks_equal_numpy_per_level(r, c, m, seed):
    """Levels-last stacks against numpy's per-matrix results (positive definite blocks: B B' + I)."""
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(m, r, r))
    A = B @ np.swapaxes(B, 1, 2) + np.eye(r)
    X, T, U = rng.normal(size=(m, r, c)), rng.normal(size=(c, r)), rng.normal(size=(r, r))
    L = np.linalg.cholesky(A)
    As = stacks.to_levels_last(A)
    np.testing.assert_allclose(stacks.to_levels_first(stacks.cholesky(As)), L, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(stacks.to_levels_first(stacks.lower_inverse(stacks.to_levels_last(L))),
                               np.linalg.inv(L), rtol=1e-9, atol=1e-10)
    Xs = stacks.to_levels_last(X)
    np.testing.assert_allclose(stacks.to_levels_first(stacks.mul(As, Xs)), A @ X, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stacks.mul(As, Xs[:, 0]), (A @ X[:, :, :1])[:, :, 0].T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stacks.to_levels_first(stacks.left(U, Xs)), U @ X, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stacks.to_levels_first(stacks.right(Xs, T)), X @ T, rtol=1e-12, atol=1e-12)


def test_stacks_cholesky_refuses_indefinite_blocks():
    A = np.stack([np.eye(2), np.array([[1.0, 2.0], [2.0, 1.0]])])
    with pytest.raises(np.linalg.LinAlgError):
        stacks.cholesky(stacks.to_levels_last(A))


def test_start_with_zero_variances_reaches_the_optimum():
    """A start with every diagonal element of T at 0 is a stationary point in theta whatever the data say; the fit
    must leave it (line searches along those elements) and reach the optimum found from lme4's start. Both fits
    maximize the same likelihood: within 1e-6 (the optimizer's convergence is ~1e-9 in the deviance here)."""
    s = mixed.accumulate("y ~ x + (1 + x|g) + (1 + z|h)", _design(seed=3))
    default = mixed.fit_stats(s, "REML")
    zeros = mixed.BlockDeviance(s, True).start() * 0.0
    trapped = mixed.fit_stats(s, "REML", theta0=zeros)
    assert trapped.loglik == pytest.approx(default.loglik, abs=1e-6)
    assert (trapped.theta[[n for n in trapped.theta.index if n.count(".") == 1]] >= 0).all()
