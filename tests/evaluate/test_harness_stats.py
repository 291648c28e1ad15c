"""vrs_helpers.evaluate.logs.harness_stats against the harnesses' own code and independent computations: McNemar against
statsmodels and by hand, Inspect's standard errors against inspect_ai's metric functions, lm-eval's against the
formula of lm_eval/api/metrics.py written out, Miller's clustered SE against its double sum, and the items x
repeats planner against a simulation of the paired test."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from vrs_helpers.evaluate.logs.harness_stats import (
    IGNORES,
    clustered_stderr,
    inspect_stderr,
    lm_eval_stderr,
    mcnemar,
    mcnemar_test,
    miller_errors,
    miller_inputs,
    miller_items_needed,
    miller_power,
    paired_difference,
)
from vrs_helpers.evaluate.logs.readers.writers import simulate_binary
from vrs_helpers.evaluate.tables.power import PlanningError
from vrs_helpers.evaluate.tables.scores import InputError

binary = st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0]), st.sampled_from([0.0, 1.0])), min_size=1, max_size=80))
def test_mcnemar_matches_statsmodels_and_the_binomial_by_hand(pairs):
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    a, b = np.array(pairs).T
    res = mcnemar(a, b)
    n11 = int(np.sum((a == 1) & (b == 1)))
    n00 = int(np.sum((a == 0) & (b == 0)))
    sm = sm_mcnemar([[n11, res.n10], [res.n01, n00]], exact=True)
    assert res.statistic == sm.statistic
    assert abs(res.p_value - sm.pvalue) < 1e-12
    # mid-p by hand: 2 (P(X < k) + P(X = k) / 2), X ~ Binomial(n, 1/2), k = min(n10, n01)
    n, k = res.n10 + res.n01, min(res.n10, res.n01)
    below = sum(math.comb(n, i) for i in range(k)) / 2 ** n
    mid = min(1.0, 2 * (below + math.comb(n, k) / 2 ** n / 2)) if n else 1.0
    assert abs(res.p_mid - mid) < 1e-12
    assert res.p_mid <= res.p_value


def test_mcnemar_worked_example():
    """n10 = 3, n01 = 9: P(X <= 3) = (1 + 12 + 66 + 220) / 4096 for X ~ Bin(12, 1/2), so p = 598/4096; mid-p =
    2 (79/4096 + 220/8192) = 378/4096."""
    a = np.array([1] * 3 + [0] * 9 + [1] * 5 + [0] * 4, dtype=float)
    b = np.array([0] * 3 + [1] * 9 + [1] * 5 + [0] * 4, dtype=float)
    res = mcnemar(a, b)
    assert (res.n10, res.n01, res.n_items) == (3, 9, 21)
    assert res.p_value == pytest.approx(598 / 4096, abs=1e-15)
    assert res.p_mid == pytest.approx(378 / 4096, abs=1e-15)
    assert res.as_dict() == {"n10": 3, "n01": 9, "p_value": res.p_value, "p_mid": res.p_mid}
    assert "runs" in res.ignores and "mid-p" in repr(res)


def test_mcnemar_on_a_table_and_bad_input():
    t = simulate_binary(1, items=50)
    res = mcnemar_test(t, "model-a", "model-b")
    wide = t.pivot(index="item", columns="system", values="score")
    assert res.n10 == int(((wide["model-a"] == 1) & (wide["model-b"] == 0)).sum())
    with pytest.raises(InputError, match="one run of each system"):
        mcnemar_test(simulate_binary(1, items=10, runs=2), "model-a", "model-b")
    with pytest.raises(InputError, match="0/1 scores"):
        mcnemar([0.5, 1.0], [1.0, 0.0])
    with pytest.raises(InputError, match="same items"):
        mcnemar([1.0], [1.0, 0.0])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=50))
def test_lm_eval_stderr_is_the_formula_of_lm_eval(xs):
    mu = sum(xs) / len(xs)
    hand = math.sqrt(sum((x - mu) ** 2 for x in xs) / (len(xs) - 1)) / math.sqrt(len(xs))
    assert lm_eval_stderr(xs) == pytest.approx(hand, rel=1e-9, abs=1e-12)
    assert math.isnan(lm_eval_stderr(xs[:1]))


def _inspect_scores(values, clusters=None):
    from inspect_ai.scorer import SampleScore, Score

    return [SampleScore(score=Score(value=v), sample_id=i,
                        sample_metadata=None if clusters is None else {"grp": clusters[i]})
            for i, v in enumerate(values)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0, 0.5, 1 / 3, 2 / 3]), st.integers(0, 5)), min_size=1,
                max_size=40))
def test_inspect_stderr_is_what_inspect_computes(data):
    """Inspect's own metric functions on the same (epoch-reduced) scores: stderr() and stderr(cluster=...)."""
    pytest.importorskip("inspect_ai")
    from inspect_ai.scorer import stderr

    values = [v for v, _ in data]
    clusters = [f"c{c}" for _, c in data]
    plain = stderr()(_inspect_scores(values))
    clustered = stderr(cluster="grp")(_inspect_scores(values, clusters))
    assert inspect_stderr(values) == pytest.approx(plain, rel=1e-12, abs=1e-15)
    assert inspect_stderr(values, clusters) == pytest.approx(clustered, rel=1e-12, abs=1e-15)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1, allow_nan=False), st.integers(0, 4)), min_size=1, max_size=40))
def test_clustered_stderr_is_millers_double_sum(data):
    """Miller (2024, eq. in sec. 2.2): SE^2 = Var_pop(s)/n + (1/n^2) sum_c sum_{i != j in c} (s_i - m)(s_j - m)."""
    s = np.array([v for v, _ in data])
    c = np.array([k for _, k in data])
    n, m = len(s), s.mean()
    cross = sum((s[i] - m) * (s[j] - m) for i in range(n) for j in range(n) if i != j and c[i] == c[j])
    hand2 = np.sum((s - m) ** 2) / n ** 2 + cross / n ** 2   # compared as variances: a true 0 may round to 1e-17
    assert clustered_stderr(s, c) ** 2 == pytest.approx(hand2, rel=1e-9, abs=1e-14)
    C = len(set(c))
    if C > 1:
        assert clustered_stderr(s, c, correction=True) ** 2 == pytest.approx(hand2 * C / (C - 1), rel=1e-9,
                                                                               abs=1e-14)
    else:  # C / (C - 1) is undefined for one cluster: NaN, and a warning says so (issue 39)
        with pytest.warns(RuntimeWarning, match="undefined"):
            assert math.isnan(clustered_stderr(s, c, correction=True))
        assert inspect_stderr(s, c) == 0.0  # Inspect's guard
    # one item per cluster: the population SD over sqrt(n)
    assert clustered_stderr(s, np.arange(n)) == pytest.approx(np.std(s) / math.sqrt(n), rel=1e-9, abs=1e-12)


def test_miller_errors_and_paired_difference_by_hand():
    t = simulate_binary(4, items=30, repeats=3, clusters=5)
    err = miller_errors(t, cluster="cluster").set_index("system")
    for system, part in t.groupby("system"):
        means = part.groupby("item")["score"].mean()
        assert err.loc[system, "mean"] == pytest.approx(means.mean(), abs=1e-12)
        assert err.loc[system, "se_clt"] == pytest.approx(means.std(ddof=1) / math.sqrt(len(means)), abs=1e-12)
        assert err.loc[system, "n_clusters"] == 5
        # the CI from the larger of the two standard errors (the docstring; issue 39: it used the clustered one)
        half = 1.959963984540054 * max(err.loc[system, "se_clt"], err.loc[system, "se_clustered"])
        assert err.loc[system, "ci_high"] - err.loc[system, "mean"] == pytest.approx(half, abs=1e-12)
    res = paired_difference(t, "model-b", "model-a")
    wide = t.groupby(["item", "system"])["score"].mean().unstack()
    d = wide["model-b"] - wide["model-a"]
    se = d.std(ddof=1) / math.sqrt(len(d))
    assert res.difference == pytest.approx(d.mean(), abs=1e-12) and res.se == pytest.approx(se, abs=1e-12)
    assert res.statistic == pytest.approx(d.mean() / se, abs=1e-12)
    assert res.p_value == pytest.approx(2 * stats.norm.sf(abs(d.mean() / se)), abs=1e-12)
    assert res.ci_low == pytest.approx(d.mean() - 1.959963984540054 * se, abs=1e-12)
    assert res.ignores == IGNORES["paired"] and res.df is None and res.reject(1.0)
    cl = paired_difference(t, "model-b", "model-a", cluster="cluster")
    cid = t.drop_duplicates("item").set_index("item")["cluster"].loc[d.index]
    assert cl.se == pytest.approx(clustered_stderr(d.to_numpy(), cid.to_numpy()), abs=1e-12)
    assert cl.n_clusters == 5 and "clustered" in cl.method
    with pytest.raises(InputError, match=r"1 item\(s\) lack a score of model-b or model-a \(e.g. 3\)"):
        paired_difference(t[~((t["system"] == "model-a") & (t["item"] == "3"))], "model-b", "model-a")
    with pytest.raises(InputError, match="No system 'model-c'"):
        paired_difference(t, "model-c", "model-a")


def test_millers_planner_closed_form_and_limits():
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    n = miller_items_needed(0.03, omega2=0.04, sigma2_a=0.2, sigma2_b=0.15, repeats=(2, 3))
    assert n == math.ceil(z ** 2 * (0.04 + 0.2 / 2 + 0.15 / 3) / 0.03 ** 2)
    # more repeats never below the item-level floor (z + z)^2 omega2 / delta^2
    floor = z ** 2 * 0.04 / 0.03 ** 2
    needs = [miller_items_needed(0.03, 0.04, 0.2, repeats=k) for k in (1, 2, 5, 50, 10_000)]
    assert needs == sorted(needs, reverse=True) and needs[-1] >= floor
    assert miller_power(n, 0.03, 0.04, 0.2, 0.15, repeats=(2, 3)) >= 0.8
    for bad in (dict(delta=0.0), dict(alpha=1.5), dict(repeats=0), dict(omega2=-1.0)):
        kw = dict(delta=0.03, omega2=0.04, sigma2_a=0.2, repeats=1) | bad
        with pytest.raises(PlanningError):
            miller_items_needed(**kw)


def test_millers_planner_against_a_simulation():
    """At the planned number of items the paired z test rejects in about 80% of simulated evaluations (items drawn
    afresh, K draws per item): 4000 simulations, Monte-Carlo SE 0.0063; the closed form's normal approximation
    adds about 0.005; tolerance 0.03."""
    rng = np.random.default_rng(2024)
    delta, k = 0.05, 3

    def items(n):
        pa = rng.uniform(0.4, 0.9, n)
        pb = pa - delta + rng.uniform(-0.1, 0.1, n)
        return pa, pb

    big_a, big_b = items(2_000_000)
    omega2 = float(np.var(big_a - big_b))
    s2a, s2b = float(np.mean(big_a * (1 - big_a))), float(np.mean(big_b * (1 - big_b)))
    n = miller_items_needed(delta, omega2, s2a, s2b, repeats=k)
    n_sim = 4000
    pa, pb = items(n * n_sim)
    d = (rng.binomial(k, pa) - rng.binomial(k, pb)).reshape(n_sim, n) / k
    z = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
    rate = float(np.mean(np.abs(z) > stats.norm.ppf(0.975)))
    assert abs(rate - 0.8) < 0.03, (n, rate)
    assert abs(miller_power(n, delta, omega2, s2a, s2b, repeats=k) - 0.8) < 0.01


def test_miller_inputs_recover_the_variances():
    """A large pilot with 4 repeats: the within-item variance p (1 - p) and omega2 come back within their sampling
    error (3000 items; tolerances 10% of the value)."""
    rng = np.random.default_rng(5)
    n, k = 3000, 4
    pa = rng.uniform(0.3, 0.9, n)
    pb = np.clip(pa + rng.normal(0, 0.15, n), 0.05, 0.95)
    rows = [(s, "t", "1", str(r + 1), str(i), float(rng.random() < p[i]))
            for s, p in (("A", pa), ("B", pb)) for i in range(n) for r in range(k)]
    table = pd.DataFrame(rows, columns=["system", "task", "run", "repeat", "item", "score"])
    got = miller_inputs(table, "A", "B")
    assert got["repeats_a"] == got["repeats_b"] == k and got["n_items"] == n
    assert got["sigma2_a"] == pytest.approx(np.mean(pa * (1 - pa)), rel=0.1)
    assert got["omega2"] == pytest.approx(np.var(pa - pb), rel=0.1)
