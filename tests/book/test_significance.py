"""vrs_helpers.book.significance: the book's worked example, scipy on shared inputs, exact enumeration, type-I error."""

import numpy as np
import pytest
from scipy import stats

from vrs_helpers.book import significance as sg
from vrs_helpers.book.glrt import compare_systems


def test_book_z_test_example():
    # book 4.1: sigma = 50, mu0 = 25, n = 100, mean 15 -> Z = -2, rejected two-sided (1.96) and left-tailed (1.64)
    two = sg.z_test_summary(15, 25, 50, 100)
    assert two.statistic == pytest.approx(-2.0)
    assert two.reject(0.05) and two.p_value == pytest.approx(2 * stats.norm.cdf(-2))
    left = sg.z_test_summary(15, 25, 50, 100, alternative="less")
    assert left.reject(0.05) and left.p_value == pytest.approx(stats.norm.cdf(-2))
    assert abs(stats.norm.ppf(0.025)) == pytest.approx(1.96, abs=5e-3) and abs(stats.norm.ppf(0.05)) == pytest.approx(
        1.64, abs=5e-3)


def test_t_tests_match_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=40), rng.normal(0.3, 1, 40)
    r = sg.paired_t_test(a, b)
    ref = stats.ttest_rel(a, b)
    assert r.statistic == pytest.approx(ref.statistic) and r.p_value == pytest.approx(ref.pvalue)
    assert sg.t_test(a, 0.1, "greater").p_value == pytest.approx(stats.ttest_1samp(a, 0.1,
                                                                                   alternative="greater").pvalue)
    z = sg.paired_z_test(a, b)
    d = a - b
    assert z.statistic == pytest.approx(d.mean() / (d.std(ddof=1) / np.sqrt(len(d))))


def test_exact_enumeration_small_n():
    rng = np.random.default_rng(1)
    a = rng.normal(size=10)
    b = a + rng.normal(0.5, 1, 10)
    exact = sg.permutation_test_exact(a, b)
    # independent enumeration of all 2^10 sign flips of the paired differences
    d = b - a
    signs = np.array([[1 if (m >> i) & 1 else -1 for i in range(10)] for m in range(2**10)])
    dist = (signs * d).mean(axis=1)
    assert exact.p_value == pytest.approx(np.mean(np.abs(dist) >= abs(d.mean()) - 1e-12))
    assert exact.n_resamples == 1024
    approx = sg.permutation_test(a, b, n_resamples=40_000, seed=3)
    assert approx.p_value == pytest.approx(exact.p_value, abs=4 * np.sqrt(exact.p_value * (1 - exact.p_value) / 40_000))


def test_permutation_and_bootstrap_agree_with_scipy():
    rng = np.random.default_rng(2)
    a = rng.normal(size=300)
    b = a + rng.normal(0.08, 1, 300)
    ours = sg.permutation_test(a, b, n_resamples=20_000, seed=4)
    ref = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
                                 permutation_type="samples", n_resamples=100_000, vectorized=True, random_state=5)
    se = np.sqrt(ref.pvalue * (1 - ref.pvalue) * (1 / 20_000 + 1 / 100_000))  # both estimates are Monte Carlo
    assert ours.observed == pytest.approx(a.mean() - b.mean())
    assert ours.p_value == pytest.approx(ref.pvalue, abs=4 * se + 1e-3)
    # bootstrap: the shifted distribution's spread matches scipy's bootstrap standard error of the mean difference
    boot = sg.bootstrap_test(a, b, n_resamples=20_000, seed=6)
    sref = stats.bootstrap((a - b,), np.mean, n_resamples=20_000, random_state=7, method="percentile")
    assert boot.distribution.std() == pytest.approx(sref.standard_error, rel=0.03)
    assert boot.p_value == pytest.approx(2 * stats.norm.sf(abs(boot.observed) / sref.standard_error), abs=0.02)


def test_corpus_level_f1_is_recomputed_from_sums():
    rng = np.random.default_rng(3)
    n = 5000
    y = rng.random(n) < 0.3
    pa, pb = rng.random(n) < 0.5, rng.random(n) < 0.45

    def suff(p):
        return np.column_stack([p & y, p & ~y, ~p & y]).astype(float)

    def f1(p):
        tp, fp, fn = (p & y).sum(), (p & ~y).sum(), (~p & y).sum()
        return 2 * tp / (2 * tp + fp + fn)

    r = sg.permutation_test(suff(pa), suff(pb), "f1", n_resamples=2000, seed=1)
    assert r.observed == pytest.approx(f1(pa) - f1(pb))
    # one resample by hand equals the vectorized formula: swap a random half of the items
    swap = rng.random(n) < 0.5
    a_sw, b_sw = np.where(swap, pb, pa), np.where(swap, pa, pb)
    sums_a = suff(pa).sum(0) + (swap[:, None] * (suff(pb) - suff(pa))).sum(0)
    assert sg.f1_metric(sums_a, n) == pytest.approx(f1(a_sw))
    assert sg.f1_metric(suff(pa).sum(0) + suff(pb).sum(0) - sums_a, n) == pytest.approx(f1(b_sw))
    boot = sg.bootstrap_test(suff(pa), suff(pb), "f1", n_resamples=2000, seed=2)
    assert 0 <= boot.p_value <= 1 and boot.n_resamples == 2000


def test_same_seed_same_numbers():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=200), rng.normal(size=200)
    assert sg.permutation_test(a, b, seed=9).p_value == sg.permutation_test(a, b, seed=9).p_value
    assert sg.bootstrap_test(a, b, seed=9).p_value == sg.bootstrap_test(a, b, seed=9).p_value


def test_type_one_error_under_the_null():
    """2,000 null simulations at alpha = 0.05: the rejection rate lies in [0.03, 0.07] (seeded: deterministic)."""
    rng = np.random.default_rng(11)
    rejections = 0
    for i in range(2000):
        a = rng.normal(size=30)
        b = rng.normal(size=30)
        rejections += sg.permutation_test(a, b, n_resamples=200, seed=i).p_value <= 0.05
    assert 0.03 <= rejections / 2000 <= 0.07


def test_bleu_like_metric():
    # one segment: 4 of 4 unigrams, 3/3 bigrams matched, hypothesis as long as the reference -> 1.0
    sums = np.array([4, 3, 4, 3, 4, 4], dtype=float)
    assert sg.bleu_like_metric(sums, 1) == pytest.approx(1.0)
    short = np.array([2, 1, 2, 1, 2, 4], dtype=float)  # perfect precision, half the length: BP = exp(1 - 2)
    assert sg.bleu_like_metric(short, 1) == pytest.approx(np.exp(-1.0))


def test_multiple_comparisons():
    assert sg.familywise_error_rate(0.05, 3) == pytest.approx(1 - 0.95**3)
    p = [0.01, 0.04, 0.03]
    assert list(sg.adjust_p_values(p, "bonferroni")) == pytest.approx([0.03, 0.12, 0.09])
    assert list(sg.adjust_p_values(p, "holm")) == pytest.approx([0.03, 0.06, 0.06])


def test_bad_input():
    with pytest.raises(sg.SignificanceError, match="one score per item"):
        sg.permutation_test([1, 2, 3], [1, 2])
    with pytest.raises(sg.SignificanceError, match="NaN"):
        sg.paired_t_test([1, np.nan, 3], [1, 2, 3])
    with pytest.raises(sg.SignificanceError, match="positive integer"):
        sg.bootstrap_test([1, 2, 3], [2, 3, 4], n_resamples=0)
    with pytest.raises(sg.SignificanceError, match="numeric"):
        sg.t_test(["a", "b"])
    with pytest.raises(sg.SignificanceError, match="Unknown metric"):
        sg.permutation_test([1, 2], [2, 3], metric="rouge")
    with pytest.raises(sg.SignificanceError, match="alternative"):
        sg.t_test([1, 2, 3], alternative="both")


def _systems_data(seed=0, n=120, slope_diff=0.0, shift=0.0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    s = rng.normal(0, 0.3, n)
    length = rng.integers(3, 60, n)
    rows = []
    for sysname, extra in (("base", 0.0), ("new", shift)):
        for _rep in range(2):
            y = 0.5 + s + 0.01 * length + extra + (slope_diff * length if sysname == "new" else 0) \
                + rng.normal(0, 0.05, n)
            rows.append(pd.DataFrame({"item": np.arange(n).astype(str), "system": sysname, "length": length,
                                      "length_class": np.where(length > 30, "long", "short"), "y": y}))
    return pd.concat(rows, ignore_index=True)


def test_compare_systems_overall_binned_and_continuous():
    from vrs_helpers import mixed

    d = _systems_data(shift=0.03)
    overall = compare_systems(d, "y", "system", "item")
    m1 = mixed.fit("y ~ system + (1|item)", d, method="ML")
    m0 = mixed.fit("y ~ 1 + (1|item)", d, method="ML")
    assert overall.glrt.chi2 == pytest.approx(2 * (m1.loglik - m0.loglik), rel=1e-6)
    assert overall.glrt.p_value < 1e-6
    binned = compare_systems(d, "y", "system", "item", by="length_class")
    assert set(binned.contrasts["length_class"]) == {"long", "short"}
    cont = compare_systems(_systems_data(slope_diff=0.002), "y", "system", "item", covariate="length")
    slopes = cont.slopes.set_index("system")["slope"]
    assert slopes["base"] == pytest.approx(0.01, abs=0.001) and slopes["new"] == pytest.approx(0.012, abs=0.001)
    assert cont.glrt.p_value < 1e-6 and cont.glrt.df == 2


def test_compare_systems_bad_input():
    d = _systems_data()
    with pytest.raises(sg.SignificanceError, match="at least two"):
        compare_systems(d[d.system == "base"], "y", "system", "item")
    with pytest.raises(sg.SignificanceError, match="single level"):
        compare_systems(d.assign(length_class="all"), "y", "system", "item", by="length_class")
    with pytest.raises(sg.SignificanceError, match="not in the data"):
        compare_systems(d, "y", "systems", "item")
    with pytest.raises(sg.SignificanceError, match="numeric"):
        compare_systems(d, "y", "system", "item", covariate="length_class")



@pytest.mark.parametrize("test", [sg.bootstrap_test, sg.permutation_test])
def test_many_statistics_path_equals_few_statistics_path(test):
    """With 4+ statistics per item the resampled sums are BLAS products (bootstrap: count matrix C @ X; permutation:
    unpacked 0/1 swap matrix S @ D); with fewer they are gathered (bootstrap) or read from a 256-entry table per byte
    (permutation). Both use the same seeded draws, so a metric that reads only the first statistic gives the same
    distribution from 1 column as from 5."""
    rng = np.random.default_rng(8)
    a = rng.normal(0.5, 0.2, 700)
    b = a + rng.normal(0.01, 0.05, 700)
    first = lambda sums, n: sums[..., 0] / n  # noqa: E731
    wide_a = np.column_stack([a, rng.normal(size=(700, 4))])
    wide_b = np.column_stack([b, rng.normal(size=(700, 4))])
    narrow = test(a, b, metric=first, n_resamples=500, seed=4)
    wide = test(wide_a, wide_b, metric=first, n_resamples=500, seed=4)
    assert np.allclose(narrow.distribution, wide.distribution, atol=1e-12)
    assert narrow.p_value == wide.p_value


@pytest.mark.parametrize("test", [sg.permutation_test, sg.bootstrap_test])
def test_monte_carlo_p_is_c_plus_one_over_k_plus_one(test):
    """Phipson & Smyth (2010): p = (c + 1) / (K + 1), never 0; the book's c / K is kept beside it."""
    rng = np.random.default_rng(5)
    a = rng.normal(1.0, 0.1, 200)
    b = rng.normal(0.0, 0.1, 200)           # a huge difference: no resample is as extreme
    r = test(a, b, n_resamples=999, seed=1)
    assert r.exceedances == 0 and r.p_value_c_over_K == 0.0 and r.p_value == pytest.approx(1 / 1000)
    a2 = rng.normal(0, 1, 60)
    b2 = a2 + rng.normal(0.1, 1, 60)
    r2 = test(a2, b2, n_resamples=500, seed=2)
    dist = r2.distribution
    c = int(np.sum(np.abs(dist) >= abs(r2.observed) - 1e-12 * max(1, abs(r2.observed))))
    assert r2.exceedances == c and r2.p_value == pytest.approx((c + 1) / 501)
    assert r2.p_value_c_over_K == pytest.approx(c / 500)


def test_exact_test_keeps_the_exact_proportion():
    a = np.array([0.1, 0.4, 0.3, 0.9, 0.2, 0.5])
    b = np.array([0.2, 0.1, 0.3, 0.4, 0.6, 0.1])
    r = sg.permutation_test_exact(a, b)
    assert r.p_value == pytest.approx(np.mean(np.abs(r.distribution) >= abs(r.observed) - 1e-12))
