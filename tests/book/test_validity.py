"""vrs_helpers.book.validity: Table 2.1 templates on hand-made pairs, correlations against scipy, MI closed form."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from conftest import requires_data
from vrs_helpers.book import validity as v


def test_templates_on_hand_made_pairs():
    pre = ["The doctor near the actor danced.", "The lawyer saw the judge.", "Nobody ate the cake."]
    hyp = ["The actor danced.", "The judge saw the lawyer.", "Someone ate a pie."]
    f = v.nli_features(pre, hyp)
    assert list(f.columns) == list(v.FEATURES)
    assert f["hyp-is-subseq"].tolist() == [1.0, 0.0, 0.0]  # contiguous subsequence only in the first pair
    assert f["all-in-pre"].tolist() == [1.0, 1.0, 0.0]  # lexical overlap holds for the swapped pair too
    assert f["percent-in-pre"].tolist() == pytest.approx([1.0, 1.0, 1 / 4])  # "ate" of someone/ate/a/pie
    assert f["pre-has-neg"].tolist() == [0.0, 0.0, 1.0] and f["hyp-has-neg"].tolist() == [0.0, 0.0, 0.0]
    # rescaled features lie in [0, 1] with both ends attained
    for col in ("scaled-len-diff", "cos-sim"):
        assert f[col].min() == 0.0 and f[col].max() == 1.0
    # cos-sim before rescaling: pair 2 has identical bags of words (cosine 1), the largest
    assert f["cos-sim"].idxmax() == 1


def test_negation_cues():
    f = v.nli_features(["I don't know.", "He never came.", "It is fine."], ["x y", "a b", "c d"])
    assert f["pre-has-neg"].tolist() == [1.0, 1.0, 0.0]


def test_correlation_and_mutual_information():
    rng = np.random.default_rng(0)
    x = rng.random(500)
    y = (x + rng.normal(0, 0.3, 500) > 0.5).astype(int)
    assert v.correlation(x, y) == pytest.approx(stats.pointbiserialr(y, x)[0])
    assert np.isnan(v.correlation(np.ones(10), np.arange(10)))
    # MI of a variable with itself = its entropy; independent variables: 0
    labels = np.array([0, 0, 1, 1, 2, 2, 2, 2])
    p = np.array([2, 2, 4]) / 8
    assert v.mutual_information(labels, labels) == pytest.approx(-(p * np.log2(p)).sum())
    assert v.mutual_information([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(0.0, abs=1e-12)


def test_dataset_bias_test_detects_a_flipped_correlation():
    rng = np.random.default_rng(1)
    n = 2000
    x1 = rng.random(n)
    y1 = (x1 + rng.normal(0, 0.3, n) > 0.5).astype(float)  # positively correlated in domain
    x2 = rng.random(n)
    y2 = (1 - x2 + rng.normal(0, 0.3, n) > 0.5).astype(float)  # flipped out of domain
    f1 = pd.DataFrame({"feat": x1, "const": np.zeros(n)})
    f2 = pd.DataFrame({"feat": x2, "const": np.zeros(n)})
    res = v.dataset_bias_test(f1, y1, f2, y2, n_boot=500, seed=2).set_index("feature")
    assert res.loc["feat", "r_in_domain"] > 0.5 and res.loc["feat", "r_out_of_domain"] < -0.5
    assert res.loc["feat", "ci_lower"] > 0 and res.loc["feat", "p_fisher"] < 1e-10
    assert res.loc["const", "status"] == "undefined (constant in domain and out of domain)"
    # a second sample from the same process: no bias, the CI covers 0 and Fisher's test does not reject
    x3 = rng.random(n)
    y3 = (x3 + rng.normal(0, 0.3, n) > 0.5).astype(float)
    same = v.dataset_bias_test(f1[["feat"]], y1, pd.DataFrame({"feat": x3}), y3, n_boot=500, seed=4)
    assert same.loc[0, "ci_lower"] <= 0 <= same.loc[0, "ci_upper"] and same.loc[0, "p_fisher"] > 0.05


def test_bad_input():
    with pytest.raises(v.ValidityError, match="premises"):
        v.nli_features(["a"], ["a", "b"])
    with pytest.raises(v.ValidityError, match="NaN"):
        v.correlation([1, np.nan, 3], [0, 1, 0])
    with pytest.raises(v.ValidityError, match="missing out of domain"):
        v.dataset_bias_test(pd.DataFrame({"a": [1, 2, 3]}), [0, 1, 0], pd.DataFrame({"b": [1, 2, 3]}), [0, 1, 0])


@requires_data
def test_mnli_overlap_features_correlate_with_entailment():
    """Book Figure 2.2 (on MNLI): the overlap templates correlate positively with entailment, negation in the
    hypothesis negatively. Checked on the MNLI matched dev set of the registry."""
    from vrs_helpers.book.data import load

    mnli = load("mnli_dev_bert_correct")
    f = v.nli_features(mnli["premise"], mnli["hypothesis"])
    r = v.feature_label_correlations(f, (mnli["gold_label"] == "entailment").astype(float)).set_index("feature")["r"]
    assert r["all-in-pre"] > 0 and r["percent-in-pre"] > 0 and r["hyp-is-subseq"] > 0
    assert r["hyp-has-neg"] < 0


def test_hans_style_pairs_follow_the_heuristics():
    d = v.hans_style_pairs(50, seed=1)
    assert len(d) == 300 and (d["label"] == "entailment").mean() == 0.5
    f = v.nli_features(d["premise"], d["hypothesis"])
    # every hypothesis consists of premise words: the overlap heuristic is constant (book 2.4.1 on HANS)
    assert (f["all-in-pre"] == 1).all() and (f["percent-in-pre"] == 1).all()
    # the subsequence templates keep the hypothesis as a contiguous subsequence for both labels
    sub = f[d["heuristic"] == "subsequence"]
    assert (sub["hyp-is-subseq"] == 1).all()
    assert v.hans_style_pairs(5, seed=2).equals(v.hans_style_pairs(5, seed=2))
