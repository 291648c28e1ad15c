"""The sequential rule of the seeded bootstraps (SeededBatches.settled / truncate / run with ``settle_alpha``):
a clearly small or clearly large Monte-Carlo p stops the simulations at the first checkpoint, a p near alpha takes
the whole plan, the decisions agree with the whole plan's, and the numbers do not depend on where batches run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from vrs_helpers import mixed
from vrs_helpers.mixed.resampling import glmm_bootstrap as gb
from vrs_helpers.mixed.resampling.bootstrap import SeededBatches


@dataclass(kw_only=True)
class UniformPlan(SeededBatches):
    """Draws U(0, 1) statistics: with observed = 1 - p the true Monte-Carlo p is exactly p."""

    def draw(self, i: int) -> np.ndarray:
        return self.rng(i).random(self.batches[i][1])


def _plan(p_true: float, seed: int, alpha: float | None = 0.05, n_sim: int = 1000, size: int = 100) -> UniformPlan:
    batches = [(a, min(size, n_sim - a)) for a in range(0, n_sim, size)]
    return UniformPlan(observed=1.0 - p_true, df=1, n_sim=n_sim, seed=seed, batches=batches, settle_alpha=alpha)


def test_checkpoints_are_batch_boundaries_before_the_last():
    assert _plan(0.5, 0).checkpoints() == [2, 5]  # 200 and 500 draws of 1000 in batches of 100
    assert _plan(0.5, 0, size=150).checkpoints() == [2, 4]  # 300 >= 200, 600 >= 500
    assert _plan(0.5, 0, n_sim=199).checkpoints() == []  # no look before the end
    assert _plan(0.5, 0, alpha=None).checkpoints() == []


@pytest.mark.parametrize("p_true", [0.0, 0.5, 0.9])
def test_a_clear_p_stops_at_the_first_checkpoint(p_true):
    res = _plan(p_true, 3).run(workers=1)
    assert res.stopped_early and res.n_planned == 1000 and len(res.reference) == 200
    # the p of the draws it used: (1 + #{T >= t}) / (1 + 200)
    ref = res.reference
    assert res.p_value == pytest.approx((1 + (ref >= 1 - p_true - 1e-7 * (2 - p_true)).sum()) / 201, abs=1e-12)


def test_a_p_at_alpha_takes_the_whole_plan():
    runs = [_plan(0.05, s).run(workers=1) for s in range(20)]
    # at p = alpha the count is binomial(m, alpha): it strays beyond the 0.05 % tails in about 0.1 % of looks
    assert sum(r.stopped_early for r in runs) <= 1
    assert all(len(r.reference) == 1000 for r in runs if not r.stopped_early)


def test_settled_is_the_binomial_tail_rule():
    """At m = 200 draws and alpha = 0.05 a decision is settled when x is in either 0.05 % tail of binomial(200,
    0.05): x <= 1 (P = 4.0e-4) or x >= 22 (P(X >= 22) = 4.8e-4), computed here from the binomial directly."""
    tails = [x for x in range(201) if stats.binom.cdf(x, 200, 0.05) < 5e-4 or stats.binom.sf(x - 1, 200, 0.05) < 5e-4]
    assert [x for x in tails if x < 10] == [0, 1] and min(x for x in tails if x >= 10) == 22
    plan = _plan(0.5, 0)
    for x in range(0, 40):
        ref = np.r_[np.ones(x), np.zeros(200 - x)]  # x draws at least as extreme as observed 0.5
        assert plan.settled(ref) == (x in tails), x


@settings(max_examples=25, deadline=None)
@given(p_true=st.sampled_from([0.0, 0.01, 0.03, 0.05, 0.08, 0.2, 0.6]), seed=st.integers(0, 10_000))
def test_truncating_all_draws_gives_what_run_stops_at(p_true, seed):
    """Dask draws every batch and truncates (SeededBatches.truncate); run() stops: the same draws and p."""
    plan = _plan(p_true, seed)
    ran = plan.run(workers=1)
    every = np.concatenate([plan.draw(i) for i in range(len(plan.batches))])
    cut = plan.finish(plan.truncate(every))
    np.testing.assert_array_equal(ran.reference, cut.reference)
    assert ran.p_value == cut.p_value


def test_early_decisions_agree_with_the_whole_plan():
    """Resampling risk: over 300 seeds at true p on either side of alpha, the decision where the rule stopped equals
    the decision from all 1,000 draws (each look errs with probability of order 1e-3)."""
    disagree = looked = 0
    for p_true in (0.02, 0.1):
        for s in range(150):
            plan = _plan(p_true, 1000 + s)
            every = np.concatenate([plan.draw(i) for i in range(len(plan.batches))])
            cut = plan.finish(plan.truncate(every))
            full = _plan(p_true, 1000 + s, alpha=None).finish(every)
            looked += cut.stopped_early
            disagree += (cut.p_value <= 0.05) != (full.p_value <= 0.05)
    assert disagree <= 1 and looked > 150  # the far p's mostly stop early


def test_forked_workers_stop_at_the_same_draws():
    plan = _plan(0.6, 7)
    one, two = plan.run(workers=1), plan.run(workers=2)
    np.testing.assert_array_equal(one.reference, two.reference)
    assert one.stopped_early and two.stopped_early


def test_glmm_bootstrap_stops_early_with_the_first_batches_numbers():
    """A 3-system 0/1 log under the null: with settle_alpha the GLMM bootstrap (LRT and the pairs' max-T) stops at
    200 of 1,000 simulations, and its LRT p and pairwise p are those of a 200-simulation plan with the same seed and
    batches (batch i's generator depends on i only)."""
    from vrs_helpers.book.simulation import evaluation_log

    rand = "(1|item) + (1|system:run)"
    d = evaluation_log(11, systems=3, runs=3, items=60, family="binomial", mean=0.5, run_sd=0.35, item_sd=1.0)
    m0, m1 = mixed.glmer(f"score ~ 1 + {rand}", d), mixed.glmer(f"score ~ system + {rand}", d)
    D = np.array([[0, 1, 0], [0, 0, 1], [0, -1, 1]], dtype=float)
    seq = mixed.glmm_bootstrap_lrt(m0, m1, n_sim=1000, seed=2, batch_size=100, pairs=D, settle_alpha=0.05)
    fixed = mixed.glmm_bootstrap_lrt(m0, m1, n_sim=200, seed=2, batch_size=100, pairs=D)
    assert fixed.p_value > 0.2  # a clear null: the rule must stop at the first look
    assert seq.stopped_early and len(seq.reference) == 200 and seq.n_planned == 1000
    np.testing.assert_array_equal(seq.reference, fixed.reference)
    np.testing.assert_array_equal(seq.pairwise_p, fixed.pairwise_p)
    with pytest.raises(mixed.MixedModelError, match="settle_alpha"):
        gb.glmm_bootstrap_plan(m0, m1, n_sim=10, settle_alpha=1.5)


def test_compare_systems_says_where_the_bootstrap_stopped():
    """vrs analyze's path: compare_systems with settle_alpha on a clear 3-system 0/1 null log stops at 200 of 1,000
    simulations and a note says so; without settle_alpha all 1,000 are drawn (n_sim 1000 given, no note)."""
    from vrs_helpers.book.glrt import compare_systems
    from vrs_helpers.book.simulation import evaluation_log

    d = evaluation_log(11, systems=3, runs=3, items=60, family="binomial", mean=0.5, run_sd=0.35, item_sd=1.0)
    # the bootstrap named (by default a GLMM run variance at zero, as on this log, takes the linear model)
    c = compare_systems(d, "score", "system", "item", replications=["run"], family="binomial", n_sim=1000, seed=3,
                        settle_alpha=0.05, test="bootstrap")
    assert c.test.stopped_early and len(c.test.reference) == 200 and c.test.p_value > 0.2
    assert any(n.startswith("the bootstrap stopped after 200 of 1000 simulations") and "alpha = 0.05" in n
               for n in c.notes)
