"""Dense cross blocks with equal rows computed once (vrs_helpers.mixed.structure.dense_blocks): G blockdiag(D) G', its
adjoint
G_:l' K G_:l and the products G X, G'Y equal the same products with G itself (written out in the test with
numpy), to 1e-12 relative (the sums are the same numbers added in another order)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vrs_helpers.mixed.structure.dense_blocks import DenseBlocks, RowGroups, equal_rows


def _direct(G, D):
    """G blockdiag(D_1..D_m) G' with the block-diagonal matrix built in full."""
    m, r, _ = D.shape
    big = np.zeros((m * r, m * r))
    for lvl in range(m):
        big[lvl * r:(lvl + 1) * r, lvl * r:(lvl + 1) * r] = D[lvl]
    return G @ big @ G.T


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), u=st.integers(1, 5), copies=st.integers(1, 6), r=st.integers(1, 3),
       m=st.integers(1, 12))
def test_grouped_products_equal_direct(seed, u, copies, r, m):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 3, (u, m * r)).astype(float)
    G = rows[rng.integers(0, u, u * copies)]  # q = u * copies rows, at most u distinct
    A = rng.normal(size=(m, r, r))
    D = A @ np.swapaxes(A, 1, 2)
    K = rng.normal(size=(len(G), len(G)))
    K = K + K.T
    blocks = DenseBlocks(G, r)
    np.testing.assert_allclose(blocks(D), _direct(G, D), rtol=1e-12, atol=1e-10)
    direct_adj = np.stack([G[:, lvl * r:(lvl + 1) * r].T @ K @ G[:, lvl * r:(lvl + 1) * r] for lvl in range(m)])
    np.testing.assert_allclose(blocks.adjoint(K, r), direct_adj, rtol=1e-12, atol=1e-10)
    first, inverse = equal_rows(G)
    np.testing.assert_array_equal(G[first[inverse]], G)
    assert len(first) == len({tuple(x) for x in G})
    X, Y = rng.normal(size=(m * r, 2)), rng.normal(size=(len(G), 2))
    g = RowGroups(G[first], inverse)
    np.testing.assert_allclose(g @ X, G @ X, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g.T @ Y, G.T @ Y, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(g.toarray(), G)
