"""Few items (evaluate/small_data.py): the sign-flip test against full enumeration written out here and, for 0/1
scores, against McNemar's exact mid-p in closed form (binomial); the intervals against statsmodels' formulas written
out (Wilson's closed form, Clopper-Pearson's beta quantiles) and the Beta(k + 1, n - k + 1) posterior; the metric
choice of each task (evaluate/task_metrics.py)."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from vrs_helpers.evaluate.logs.log_checks import rounding_tolerance
from vrs_helpers.evaluate.logs.readers.writers import simulate_binary
from vrs_helpers.evaluate.logs.task_metrics import accuracy_like, choose_metrics
from vrs_helpers.evaluate.tables.scores import InputError
from vrs_helpers.evaluate.tables.small_data import accuracy_intervals, sign_flip_test, small_test


def test_sign_flip_is_the_full_enumeration():
    d = np.array([0.3, -0.1, 0.7, 0.25, 1.2, -0.4, 0.05, 0.9])
    sums = np.array([abs(np.dot(s, d)) for s in itertools.product((-1, 1), repeat=len(d))])
    obs = abs(d.sum())
    ge, eq = np.mean(sums >= obs - 1e-12), np.mean(np.isclose(sums, obs))
    t = sign_flip_test(d)
    assert t["exact"] and t["p_value"] == pytest.approx(ge) and t["p_mid"] == pytest.approx(ge - eq / 2)


@pytest.mark.parametrize("n10,n01", [(3, 0), (5, 1), (2, 2), (0, 7), (9, 4)])
def test_0_1_differences_give_mcnemars_exact_mid_p(n10, n01):
    d = np.array([1.0] * n10 + [-1.0] * n01 + [0.0] * 4)
    n, k = n10 + n01, min(n10, n01)
    t = sign_flip_test(d)
    assert t["p_value"] == pytest.approx(min(1, 2 * stats.binom.cdf(k, n, 0.5)))
    assert t["p_mid"] == pytest.approx(min(1, 2 * stats.binom.cdf(k, n, 0.5) - stats.binom.pmf(k, n, 0.5)))


def test_type_one_error_of_the_small_data_verdict():
    """2 systems x 1 run x 20 items, 0/1, no difference: the rejection rate at 0.05 in [0.02, 0.065] (3,000
    simulations: Monte-Carlo SE about 0.0035; benchmarks/small_data.py runs more)."""
    hits = sum(small_test(simulate_binary(s, items=20, accuracy=(0.6, 0.6)))["p_value"] < 0.05
               for s in range(3000))
    assert 0.02 <= hits / 3000 <= 0.065


def test_intervals_match_their_closed_forms():
    k, n, z = 7, 9, stats.norm.ppf(0.975)
    out = accuracy_intervals(k, n)
    p = k / n
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n
                                                                                      + z * z / (4 * n * n))
    assert out["wilson_low"] == pytest.approx(centre - half) and out["wilson_high"] == pytest.approx(centre + half)
    assert out["clopper_pearson_low"] == pytest.approx(stats.beta.ppf(0.025, k, n - k + 1))
    assert out["clopper_pearson_high"] == pytest.approx(stats.beta.ppf(0.975, k + 1, n - k))
    assert out["bayes_low"] == pytest.approx(stats.beta.ppf(0.025, k + 1, n - k + 1))
    assert out["clt_stderr"] == pytest.approx(np.std([1] * k + [0] * (n - k), ddof=1) / math.sqrt(n))


def test_accuracy_like_metrics_and_bookkeeping():
    for m in ("acc", "acc_norm", "exact_match/strict-match", "exact_match,custom-extract", "f1_score", "choice",
              "match/accuracy", "is_correct", "score", "quasi_exact_match", "includes", "model_graded_qa"):
        assert accuracy_like(m), m
    for m in ("num_references", "num_prompt_tokens", "inference_runtime", "num_train_instances", "batch_size",
              "acc_stderr", "logprob", "finish_reason_length", "max_prob"):
        assert not accuracy_like(m), m


class _Desc:
    def __init__(self, metrics, primary=None, task_primary=None):
        self.tasks, self.metrics = list(metrics), metrics
        self.primary_metric, self.task_primary = primary, task_primary or {}


def test_choose_metrics_per_task():
    d = _Desc({"gsm8k": ["exact_match/strict-match", "exact_match/flexible-extract"],
               "mmlu_pro": ["exact_match/custom-extract"], "count": ["num_references"]},
              primary="exact_match/strict-match")
    chosen, skipped = choose_metrics(d)
    assert chosen == {"gsm8k": ["exact_match/strict-match"], "mmlu_pro": ["exact_match/custom-extract"]}
    assert skipped[0]["task"] == "count" and "no accuracy-like metric" in skipped[0]["reason"]
    chosen, skipped = choose_metrics(d, ["exact_match/strict-match", "exact_match/custom-extract"])
    assert chosen == {"gsm8k": ["exact_match/strict-match"], "mmlu_pro": ["exact_match/custom-extract"]}
    chosen, _ = choose_metrics(d, ["gsm8k=exact_match/flexible-extract", "exact_match/custom-extract"])
    assert chosen["gsm8k"] == ["exact_match/flexible-extract"]
    with pytest.raises(InputError, match="no task 'gsm'"):
        choose_metrics(d, ["gsm=acc"])
    with pytest.raises(InputError, match="No task has the metric 'bleu'"):
        choose_metrics(d, "bleu")


def test_rounding_tolerance():
    assert rounding_tolerance(0.5962) == pytest.approx(0.00005)
    assert rounding_tolerance(0.596153846153846) == 1e-9
    assert rounding_tolerance(float("nan")) == 0.0


def test_small_test_three_systems_is_a_label_permutation():
    d = pd.DataFrame([{"system": s, "item": str(i), "score": float(i % 3 == k)} for k, s in enumerate("abc")
                      for i in range(9)])
    t = small_test(d, n_perm=999, seed=1)
    assert t["method"].startswith("within-item label permutation") and 0 < t["p_value"] <= 1
