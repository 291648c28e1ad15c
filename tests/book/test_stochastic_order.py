"""ASO against deepsig 1.2.8 (values recorded by tests/reference/aso_deepsig.py) and closed forms; the expected
maximum against its closed form and brute-force enumeration."""

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vrs_helpers.book.stochastic_order import aso, expected_max, multi_aso, violation_ratios
from vrs_helpers.errors import VRSError

REF = json.loads((Path(__file__).parent.parent / "reference" / "aso_deepsig.json").read_text())
PAIRS = [(name, d) for name in REF["pairs"] for d in ("a_over_b", "b_over_a")]


def _args(name, direction):
    p = REF["pairs"][name]
    return (p["a"], p["b"]) if direction == "a_over_b" else (p["b"], p["a"])


@pytest.mark.parametrize("name, direction", PAIRS)
def test_violation_ratio_equals_deepsig(name, direction):
    """Deterministic part: the same grid, quantile functions and integral as deepsig (to rounding)."""
    r = aso(*_args(name, direction), seed=0, num_bootstrap_iterations=10)
    assert r.violation_ratio == pytest.approx(REF["pairs"][name][direction]["violation_ratio"], abs=1e-12)


@pytest.mark.parametrize("name, direction", PAIRS)
def test_eps_min_within_monte_carlo_error_of_deepsig(name, direction):
    """eps_min is a bootstrap quantity: ours (mean of 20 seeds) within 0.03 of deepsig's mean over 10 seeds (the
    issue's bar). Seed-to-seed SDs recorded for deepsig: up to 0.013 on these inputs (ours: up to 0.023), so the
    Monte-Carlo SE of the difference of the two means is below 0.007; deepsig's mean on the 3-run pair is 0.013
    above the exact bootstrap value (test below; its iterations, seeded seed + i, are not independent draws)."""
    ref = REF["pairs"][name][direction]
    ours = np.mean([aso(*_args(name, direction), seed=s).eps_min for s in range(20)])
    assert abs(ours - ref["eps_min_mean"]) < 0.03, (ours, ref["eps_min_mean"], ref["eps_min_sd"])


def test_bootstrap_equals_the_exact_bootstrap_on_three_runs():
    """With 3 runs per system there are 27 x 27 equally likely resample pairs: the infinite-bootstrap sigma and so
    eps_min are exact sums over them (violation ratios written out here, not with our function). Our eps_min over 20
    seeds of 1,000 iterations averages within 4 Monte-Carlo SEs of it (SE from the 20 values)."""
    from scipy import stats

    b, a = np.asarray(REF["pairs"]["three_runs"]["a"]), np.asarray(REF["pairs"]["three_runs"]["b"])
    t = np.arange(0.005, 1, 0.005)
    q = np.clip(np.ceil(3 * t).astype(int) - 1, 0, 2)

    def ratio(x, y):
        f, g = np.sort(x)[q], np.sort(y)[q]
        return float(np.sum(np.where(f < g, (g - f) ** 2, 0.0)[1:]) / np.sum((g - f) ** 2))

    eps = ratio(a, b)
    draws = [ratio(a[list(i)], b[list(j)]) for i in itertools.product(range(3), repeat=3)
             for j in itertools.product(range(3), repeat=3)]
    c = np.sqrt(3 * 3 / 6)
    exact = eps - np.std(c * (np.asarray(draws) - eps)) / c * stats.norm.ppf(0.05)
    ours = np.array([aso(a, b, seed=s).eps_min for s in range(20)])
    assert abs(ours.mean() - exact) < 4 * ours.std(ddof=1) / np.sqrt(len(ours)), (ours.mean(), exact)


def test_clear_order():
    """B's scores all above A's: every quantile of A is below B's, so the violation ratio of B over A is 0 and of A
    over B is 1 minus the share of the first grid point, which deepsig leaves out of the violation integral
    (closed form from the quantile functions)."""
    a, b = REF["pairs"]["clear_order"]["a"], REF["pairs"]["clear_order"]["b"]
    t = np.arange(0.005, 1, 0.005)
    f = np.sort(a)[np.clip(np.ceil(5 * t).astype(int) - 1, 0, 4)]
    g = np.sort(b)[np.clip(np.ceil(5 * t).astype(int) - 1, 0, 4)]
    d2 = (g - f) ** 2
    assert aso(a, b, seed=1).violation_ratio == pytest.approx(1 - d2[0] / d2.sum(), abs=1e-12)
    assert aso(b, a, seed=1).violation_ratio == 0.0
    assert aso(b, a, seed=1).dominates and not aso(a, b, seed=1).dominates


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=1, max_size=12), st.lists(st.floats(-5, 5), min_size=1, max_size=12))
def test_violation_ratios_sum_to_one(a, b):
    """eps(A, B) + eps(B, A) = 1 up to the first grid point, which deepsig leaves out of the violation integral
    (so the sum is 1 minus at most that point's share); equal quantile functions give 0.5 each."""
    a, b = np.sort(a)[None, :], np.sort(b)[None, :]
    ab, ba = violation_ratios(a, b, 0.005)[0], violation_ratios(b, a, 0.005)[0]
    t = np.arange(0.005, 1, 0.005)
    f = a[0, np.clip(np.ceil(a.shape[1] * t).astype(int) - 1, 0, a.shape[1] - 1)]
    g = b[0, np.clip(np.ceil(b.shape[1] * t).astype(int) - 1, 0, b.shape[1] - 1)]
    total = ((f - g) ** 2).sum()
    if total == 0:
        assert ab == ba == 0.5
    else:
        first = (f[0] - g[0]) ** 2 / total
        assert 1 - first - 1e-9 <= ab + ba <= 1 + 1e-9


def test_bonferroni_raises_the_confidence_level():
    a, b = _args("five_runs", "a_over_b")
    one, three = aso(a, b, seed=0), aso(a, b, seed=0, num_comparisons=3)
    assert three.confidence_level == pytest.approx(0.95 + 0.05 / 3)
    assert three.eps_min >= one.eps_min  # same bootstrap (same seed), a larger z


def test_multi_aso_matrix():
    """Each pair's reverse direction is deepsig's symmetric form: 1 - eps(x, y) - sigma / c z at the same
    Bonferroni level (3 pairs: 0.95 + 0.05 / 3)."""
    from scipy import stats

    p = REF["pairs"]["clear_order"]
    scores = {"A": p["a"], "B": p["b"], "C": [x + 1 for x in p["b"]]}
    m = multi_aso(scores, seed=0)
    assert list(m.index) == ["A", "B", "C"] and (np.diag(m) == 1).all()
    z = stats.norm.ppf(1 - (0.95 + 0.05 / 3))
    for x, y in [("A", "B"), ("A", "C"), ("B", "C")]:
        r = aso(scores[x], scores[y], confidence_level=0.95 + 0.05 / 3, seed=1)
        c = np.sqrt(r.n_a * r.n_b / (r.n_a + r.n_b))
        if r.sigma == 0:   # a total order: no bootstrap variation, both entries are closed forms
            assert m.loc[x, y] == pytest.approx(r.violation_ratio, abs=1e-12)
            assert m.loc[y, x] == pytest.approx(1 - r.violation_ratio - r.sigma / c * z, abs=1e-12)
    assert m.loc["C", "A"] < 0.2 < m.loc["A", "C"]


@pytest.mark.parametrize("a, b, message", [([], [1.0], "empty"), ([np.nan, 1.0], [1.0], "missing")])
def test_bad_input(a, b, message):
    with pytest.raises(VRSError, match=message):
        aso(a, b)


def test_expected_max_closed_form_and_enumeration():
    """E[max of n draws with replacement from N runs]: n = 1 is the mean, n -> infinity the maximum, and for small
    N and n the formula equals brute-force enumeration of all N^n draws."""
    runs = [0.3, 0.9, 0.5, 0.7]
    e = expected_max(runs, n=[1, 2, 3, 200], n_boot=200).to_frame().set_index("n")["expected_max"]
    assert e[1] == pytest.approx(np.mean(runs))
    assert e[200] == pytest.approx(max(runs), abs=1e-12 + (3 / 4) ** 200)
    for n in (2, 3):
        brute = np.mean([max(d) for d in itertools.product(runs, repeat=n)])
        assert e[n] == pytest.approx(brute, abs=1e-12)


def test_expected_max_interval_contains_the_point():
    r = expected_max(np.random.default_rng(0).normal(0.8, 0.01, 5), seed=1)
    t = r.to_frame()
    assert list(t["n"]) == [1, 2, 3, 4, 5]
    assert (t["ci_low"] <= t["expected_max"] + 1e-12).all() and (t["expected_max"] <= t["ci_high"] + 1e-12).all()
    assert t["expected_max"].is_monotonic_increasing
