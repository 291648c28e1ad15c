"""L L' = I + Lambda'Z'WZ Lambda by blocks with a nested pair eliminated together
(vrs_helpers.mixed.likelihood.laplace_blocks),
against the dense matrix built here from one-hot Z (an independent computation): log det, solves, the diagonal
terms of the Laplace gradient and the weighted counts, on random designs - a nested pair with unequal numbers of
inner levels per outer level (padded slots), with 0, 1 or 2 other crossed terms, and crossed designs without a
nested pair (the largest term alone on the diagonal). The engine's GLMM deviance with the nested path equals its
dense blocked Cholesky.

Tolerance: 1e-9 relative - both sides are exact linear algebra on matrices with condition numbers below ~1e4 here.
"""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vrs_helpers.mixed.likelihood import families
from vrs_helpers.mixed.likelihood.laplace import GLMMDeviance
from vrs_helpers.mixed.likelihood.laplace_blocks import LaplaceBlocks, find_nested
from vrs_helpers.mixed.models.glmm import prepare


def _design(rng, nested: bool, others: int):
    """Per-term level codes (every level used) and sizes: [inner, outer, others...] when nested (the inner term
    has the most levels), else crossed terms."""
    n = int(rng.integers(80, 200))
    codes = []
    if nested:
        m_out = int(rng.integers(3, 9))
        per = rng.integers(1, 5, m_out)  # inner levels per outer level: unequal, so slots are padded
        parent = np.repeat(np.arange(m_out), per)
        inner = np.concatenate([np.arange(len(parent)), rng.integers(0, len(parent), n - len(parent))])
        codes += [inner, parent[inner]]
    else:
        codes += [np.concatenate([np.arange(40), rng.integers(0, 40, n - 40)])]
        codes += [np.concatenate([np.arange(5), rng.integers(0, 5, n - 5)])]
    n = len(codes[0])
    for _ in range(others):
        m = int(rng.integers(2, 7))
        codes.append(np.concatenate([np.arange(m), rng.integers(0, m, n - m)]))
    perm = rng.permutation(n)
    codes = [c[perm] for c in codes]
    return codes, [int(c.max()) + 1 for c in codes]


def _dense(codes, sizes, theta, w):
    """L L' = I + Lambda'Z'WZ Lambda from one-hot Z, and Lambda'z_i per row (q x n)."""
    n = len(codes[0])
    Z = np.hstack([np.eye(m)[c] for c, m in zip(codes, sizes, strict=True)])  # n x q
    lam = np.concatenate([np.full(m, t) for m, t in zip(sizes, theta, strict=True)])
    ZL = Z * lam[None, :]
    return np.eye(Z.shape[1]) + ZL.T @ (w[:, None] * ZL), ZL.T, n


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**31 - 1), nested=st.booleans(), others=st.integers(0, 2))
def test_blocks_equal_the_dense_matrix(seed, nested, others):
    rng = np.random.default_rng(seed)
    codes, sizes = _design(rng, nested, others)
    blocks = LaplaceBlocks(codes, sizes)
    assert (blocks.plan is not None) == nested
    B = 3
    theta = rng.uniform(0.2, 1.5, (B, len(sizes)))
    w = rng.uniform(0.05, 0.25, (B, len(codes[0])))
    fac, counts = blocks.factor(theta, w)
    ld = blocks.logdet(fac)
    q = int(sum(sizes))
    g = rng.normal(size=(B, q))
    G = rng.normal(size=(B, q, 3))
    x, X = blocks.solve(fac, g), blocks.solve(fac, G)
    Q = blocks.diag_terms(theta, fac)
    offs = np.concatenate([[0], np.cumsum(sizes)])
    for b in range(B):
        A, ZLt, n = _dense(codes, sizes, theta[b], w[b])
        assert ld[b] == pytest.approx(np.linalg.slogdet(A)[1], rel=1e-9)
        np.testing.assert_allclose(x[b], np.linalg.solve(A, g[b]), rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(X[b], np.linalg.solve(A, G[b]), rtol=1e-9, atol=1e-11)
        Ainv_zl = np.linalg.solve(A, ZLt)  # q x n: (L L')^-1 Lambda'z_i
        for k, c in enumerate(codes):
            np.testing.assert_allclose(Q[k][b], Ainv_zl[offs[k] + c, np.arange(n)], rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(counts[k][b], np.bincount(c, weights=w[b], minlength=sizes[k]), rtol=1e-12)
    sums = blocks.level_sums(w)
    for k, c in enumerate(codes):
        np.testing.assert_allclose(sums[k][0], np.bincount(c, weights=w[0], minlength=sizes[k]), rtol=1e-12)


def test_find_nested():
    inner = np.array([0, 1, 2, 3, 4, 0, 3])
    outer = np.array([0, 0, 1, 1, 2, 0, 1])  # inner levels 0, 1 in 0; 2, 3 in 1; 4 in 2
    plan = find_nested([inner, outer], [5, 3])
    assert plan.inner == 0 and plan.outer == 1 and plan.r == 3
    np.testing.assert_array_equal(plan.parent, [0, 0, 1, 1, 2])
    np.testing.assert_array_equal(plan.slot, [1, 2, 1, 2, 1])
    # an inner level in two outer levels: crossed, not nested
    assert find_nested([inner, np.array([0, 0, 1, 1, 2, 1, 1])], [5, 3]) is None
    assert find_nested([inner], [5]) is None
    # padding would more than double the big part (one outer level with many inner levels): not merged
    many = np.arange(20)
    assert find_nested([many, np.where(many < 17, 0, many - 16)], [20, 4]) is None


@settings(max_examples=10, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**31 - 1), fam=st.sampled_from([("binomial", "logit"), ("binomial", "probit"),
                                                              ("poisson", "log")]))
def test_glmm_deviance_nested_path_equals_the_blocked_cholesky(seed, fam):
    """The engine's Laplace deviance and gradient with (1|item) + (1|system:item) eliminated together equal those
    of its dense blocked Cholesky (the path every other model takes) at random (theta, beta)."""
    rng = np.random.default_rng(seed)
    items = int(rng.integers(10, 40))
    s, r, i = np.meshgrid(np.arange(3), np.arange(2), np.arange(items), indexing="ij")
    eta = 0.2 + rng.normal(0, 0.8, items)[i] + rng.normal(0, 0.5, (3, items))[s, i]
    y = rng.binomial(1, 1 / (1 + np.exp(-eta))) if fam[0] == "binomial" else rng.poisson(np.exp(eta))
    d = pd.DataFrame({"system": s.ravel().astype(str), "run": r.ravel().astype(str), "item": i.ravel().astype(str),
                      "y": y.ravel()})
    y_, wt, X, _, blocks, *_ = prepare("y ~ system + (1|item) + (1|system:item) + (1|system:run)", d, None)
    merged = GLMMDeviance(y_, wt, X, blocks, families.get(*fam))
    dense = GLMMDeviance(y_, wt, X, blocks, families.get(*fam))
    assert merged.nested is not None
    dense.nested = None
    K = len(blocks)
    par = np.concatenate([rng.uniform(0.2, 1.5, K), merged.glm() + rng.normal(0, 0.2, X.shape[1])])
    d1, g1 = merged.laplace(par[:K], par[K:], grad=True)
    d2, g2 = dense.laplace(par[:K], par[K:], grad=True)
    assert d1 == pytest.approx(d2, rel=1e-10)
    np.testing.assert_allclose(g1, g2, rtol=1e-7, atol=1e-8)
