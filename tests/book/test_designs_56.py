"""Issue 56: the verdict's second audit. Every expected number is a closed form written here (scipy's t and normal
distributions, the two-way ANOVA mean squares by numpy) or R's (tests/reference/designs_56.R)."""

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from vrs_helpers.book.glrt import compare_systems
from vrs_helpers.book.run_means import run_means_test


def _log(spec: dict, items: int = 20) -> pd.DataFrame:
    """0/1 scores: per system a list of runs (start, count): the run is correct on items start .. start + count - 1
    (labels 0, 1, ... shared by the systems, as users write seeds)."""
    return pd.DataFrame([{"system": s, "run": str(r), "item": f"i{i:03d}", "score": int(a <= i < a + c)}
                         for s, runs in spec.items() for r, (a, c) in enumerate(runs) for i in range(items)])


def _compare(d, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compare_systems(d, "score", "system", "item", replications=["run"], family="binomial", **kw)


def _run_item_ms(d: pd.DataFrame, s: str) -> tuple[float, int]:
    """System s's run x item mean square of the two-way table (runs x items), and its df."""
    y = d[d["system"] == s].pivot(index="run", columns="item", values="score").to_numpy(dtype=float)
    r = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()
    df = (y.shape[0] - 1) * (y.shape[1] - 1)
    return float((r ** 2).sum() / df), df


# --- 1. a zero spread of the run accuracies: a finite F, never a crash -----------------------------------------

#: the issue's null log: per-run accuracies 0.60/0.60/0.55 against 0.80/0.80/0.75, three identical differences
IDENTICAL = {"S0": [(0, 12), (2, 12), (4, 11)], "S1": [(0, 16), (3, 16), (5, 15)]}


def test_identical_per_run_differences_give_the_test_against_the_within_run_noise():
    """The paired t on the per-run differences has a spread of 0 (F = 2.8e31 on main); the p-value is the larger
    of the paired t's (0) and the z-type test of the same difference against the within-run noise, sum_s MS_s /
    (n I) with Satterthwaite's df - computed here from the two-way mean squares."""
    d = _log(IDENTICAL)
    acc = d.groupby(["system", "run"])["score"].mean().unstack()
    assert np.allclose(acc.loc["S1"] - acc.loc["S0"], 0.2)
    c = _compare(d, items="fixed")
    (m0, f0), (m1, f1) = _run_item_ms(d, "S0"), _run_item_ms(d, "S1")
    v = (m0 + m1) / (3 * 20)
    df = v ** 2 / ((m0 / 60) ** 2 / f0 + (m1 / 60) ** 2 / f1)
    t = -0.2 / np.sqrt(v)
    assert c.test.method.startswith("paired t on run means (crossed runs) (at least the within-run noise)")
    assert (c.test.F, c.test.den_df, c.test.p_value) == pytest.approx((t * t, df, 2 * stats.t.sf(abs(t), df)),
                                                                      rel=1e-10)
    assert np.isfinite(c.test.F) and c.test.F < 100


@pytest.mark.parametrize("runs", ["auto", "crossed", "nested"])
@pytest.mark.parametrize("items", ["random", "fixed"])
def test_six_equal_run_accuracies_give_p_1_not_a_zero_division(runs, items):
    """All six run accuracies 0.97 (100 items): the difference is 0, so F = 0 and p = 1 (a ZeroDivisionError on
    main with crossed runs)."""
    d = _log({"S0": [(0, 97), (1, 97), (2, 97)], "S1": [(3, 97), (0, 97), (1, 97)]}, items=100)
    c = _compare(d, runs=runs, items=items)
    assert c.test.F == pytest.approx(0, abs=1e-12) and c.test.p_value == pytest.approx(1)


def test_the_guard_never_lowers_the_run_means_p():
    """On random small 0/1 logs (20 items, 3 runs, labels shared), the default test's p-value where the run-means
    test decides is at least the run-means test's own (noise_floor=False), and its F is finite."""
    rng = np.random.default_rng(56)
    seen = 0
    for _ in range(25):
        d = pd.DataFrame([{"system": f"S{s}", "run": str(r), "item": f"i{i}", "score": int(rng.random() < 0.7)}
                          for s in range(2) for r in range(3) for i in range(20)])
        c = _compare(d, items="fixed")
        if "run means" not in c.test.method:
            continue
        seen += 1
        plain = run_means_test(d.assign(score=d["score"].astype(float)), "score", "system", "item", ["run"],
                               ["S0", "S1"], crossed=True, noise_floor=False)
        assert np.isfinite(c.test.F)
        if plain is not None:
            assert c.test.p_value >= plain.p_value - 1e-12
    assert seen >= 5
