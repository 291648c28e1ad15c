"""The smoothing-parameter search of the GAMs (vrs_helpers.book.smoothing): the coordinate sweep with Woodbury
updates moves exactly as a sweep that evaluates every candidate in full, written out here with numpy's solve."""

import math

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from vrs_helpers.book import smoothing


def _problem(seed: int, blocks: int, n: int = 300):
    """Random cross-products of an intercept and ``blocks`` penalized blocks (each a second-difference penalty of
    rank k - 2, as a thin-plate smooth's), with a response that depends on some of them."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, 9, blocks)
    X = np.column_stack([np.ones(n)] + [rng.normal(size=(n, k)) @ np.diag(rng.uniform(0.2, 3, k)) for k in sizes])
    y = X @ (rng.normal(size=X.shape[1]) * rng.integers(0, 2, X.shape[1])) + rng.normal(0, rng.uniform(0.3, 3), n)
    yc = y - y.mean()
    G, b, yy = X.T @ X, X.T @ yc, float(yc @ yc)
    penalties, start = [], 1
    for k in sizes:
        D = np.diff(np.eye(k), 2, axis=0)
        penalties.append((np.arange(start, start + k), D.T @ D))
        start += k
    return G, b, yy, n, smoothing.scale_penalties(G, penalties)


def _score_by_hand(G, b, yy, n, Slist, rho, kind):
    """log GCV (or UBRE) at rho, solved directly: A = G + sum exp(rho_j) S_j, beta = A^-1 b, edf = tr(A^-1 G)."""
    A = G.copy()
    for r, (cols, Sj) in zip(rho, Slist, strict=True):
        A[np.ix_(cols, cols)] += math.exp(r) * Sj
    beta = np.linalg.solve(A, b)
    rss = yy - 2 * beta @ b + beta @ G @ beta
    edf = float(np.trace(np.linalg.solve(A, G)))
    return math.log(n * rss / (n - edf) ** 2) if kind == "gcv" else rss / n - 1 + 2 * edf / n


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10_000), blocks=st.integers(2, 5), kind=st.sampled_from(["gcv", "ubre"]))
@example(seed=2608, blocks=2, kind="gcv")
@example(seed=3223, blocks=2, kind="gcv")
def test_sweep_moves_as_the_full_sweep(seed, blocks, kind):
    G, b, yy, n, Slist = _problem(seed, blocks)
    grid = np.arange(-12.0, 21.0, 4.0)
    score = lambda rho: _score_by_hand(G, b, yy, n, Slist, rho, kind)  # noqa: E731
    start_vals = [score(np.full(blocks, r)) for r in grid]
    rho0 = np.full(blocks, grid[int(np.argmin(start_vals))])
    # the full sweep, every candidate evaluated
    best, ref = min(start_vals), rho0.copy()
    for j in range(blocks):
        for r in grid:
            if r == ref[j]:
                continue
            trial = ref.copy()
            trial[j] = r
            v = score(trial)
            if v < best:
                best, ref = v, trial
    calls = []

    def value(rho):
        calls.append(rho.copy())
        return score(rho)

    got = smoothing._coordinate_sweep(G, b, yy, n, Slist, rho0, min(start_vals), grid, kind, value)
    # the same point, or one whose score ties with it: a block at lambda = e^16 or e^20 is penalized to its null
    # space either way, and the two scores differ by O(1/lambda) ~ e^-16 = 1.1e-7 relative or less; the Woodbury
    # update (lambda ratios up to e^32) orders such candidates by its rounding, which the sweep does not resolve
    # (hypothesis found seed 2608: 1.7e-9 apart; seed 3223: 2.3e-8).
    # At 1e-6 the test still fails a sweep that stops at a point worse than the full sweep's by more than that.
    assert np.array_equal(got, ref) or abs(score(got) - score(ref)) <= 1e-6 * max(1.0, abs(score(ref))), (got, ref)
    assert len(calls) <= blocks * (len(grid) - 1)   # never more full evaluations than the full sweep


def test_sweep_updates_agree_with_full_evaluations():
    """The updated scores are the scores: every candidate recomputed in full (SWEEP_RECHECK = inf) and none
    (= -inf, the updates decide alone) reach the same point on a problem with many blocks."""
    G, b, yy, n, Slist = _problem(7, 6)
    grid = np.arange(-12.0, 21.0, 4.0)
    score = lambda rho: _score_by_hand(G, b, yy, n, Slist, rho, "gcv")  # noqa: E731
    rho0 = np.zeros(6)
    points = []
    for recheck in (math.inf, -math.inf):
        old = smoothing.SWEEP_RECHECK
        smoothing.SWEEP_RECHECK = recheck
        try:
            points.append(smoothing._coordinate_sweep(G, b, yy, n, Slist, rho0, score(rho0), grid, "gcv", score))
        finally:
            smoothing.SWEEP_RECHECK = old
    assert np.array_equal(points[0], points[1])
