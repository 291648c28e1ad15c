"""Issue 54: the ranking of many systems. compact_letters with bitset columns against the array implementation it
replaced (kept here verbatim as the reference, which tests/evaluate/test_ranking.py checked against multcompView's
letters), on random decision matrices - interval-shaped ones, as real rankings give, and arbitrary ones; and its
time at k = 100."""

from __future__ import annotations

import time

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vrs_helpers.evaluate.tables import ranking


def _absorb_reference(cols):
    changed = True
    while changed:
        changed = False
        for a in range(len(cols) - 1):
            for b in range(a + 1, len(cols)):
                if not (cols[b] & ~cols[a]).any():
                    del cols[b]
                    changed = True
                    break
                if not (cols[a] & ~cols[b]).any():
                    del cols[a]
                    changed = True
                    break
            if changed:
                break
    return cols


def _letters_reference(names, differ):
    k = len(names)
    cols = [np.ones(k, dtype=bool)]
    for j in range(k):
        for i in range(j + 1, k):
            if not differ[i, j] or not any(c[i] and c[j] for c in cols):
                continue
            copies = []
            for c in cols:
                if c[i] and c[j]:
                    copy = c.copy()
                    copy[j] = False
                    copies.append(copy)
                    c[i] = False
            cols = _absorb_reference(cols + copies)
    m = ranking._sort_columns(np.column_stack(cols))
    labels = ranking._letter_names(m.shape[1])
    return {names[r]: "".join(labels[c] for c in range(m.shape[1]) if m[r, c]) for r in range(k)}


def _interval_decisions(rng, k):
    """Sorted estimates with a common threshold: systems farther apart than ``gap`` differ."""
    est = np.sort(rng.normal(0, 1, k))[::-1]
    gap = rng.uniform(0.1, 2.0)
    return np.abs(est[:, None] - est[None, :]) > gap


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10 ** 6), k=st.integers(2, 18), shaped=st.booleans())
def test_same_letters_as_the_reference(seed, k, shaped):
    rng = np.random.default_rng(seed)
    if shaped:
        differ = _interval_decisions(rng, k)
    else:
        upper = np.triu(rng.random((k, k)) < rng.uniform(0.1, 0.9), 1)
        differ = upper | upper.T
    names = [f"s{i}" for i in range(k)]
    assert ranking.compact_letters(names, differ) == _letters_reference(names, differ.copy())


def test_hundred_systems_in_a_second():
    rng = np.random.default_rng(54)
    differ = _interval_decisions(rng, 100)
    names = [f"m{i:03d}" for i in range(100)]
    t0 = time.perf_counter()
    got = ranking.compact_letters(names, differ)
    assert time.perf_counter() - t0 < 2.0   # 13 s with the array columns (10^6-row leaderboard, issue 54)
    share = np.array([[bool(set(got[a]) & set(got[b])) for b in names] for a in names])
    assert not (share & differ).any()                   # no separated pair shares a letter
    assert (share | differ | np.eye(100, dtype=bool)).all()  # every pair not separated does


def test_estimates_equal_up_to_rounding_are_tied():
    """Two systems with the same counts of correct answers have one maximum-likelihood estimate; an optimizer finds
    it to ~1e-12, and the ranks must not depend on that last digit."""
    est = np.array([0.5, 0.3 + 1e-13, 0.3, 0.1])
    r = ranking.rank_intervals(est, np.zeros((4, 4), dtype=bool))
    assert r["rank"].tolist() == [1, 2, 2, 4]
