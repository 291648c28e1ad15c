"""vrs_helpers.book.agreement against the book (section 3.3.1), closed forms and independent implementations."""

import warnings

import krippendorff
import numpy as np
import pandas as pd
import pytest
from statsmodels.stats import inter_rater

from vrs_helpers.book import agreement as ag

# Section 3.3.1 rating tables (typed in from the book; data/book/agreement_3_3_1.json holds the same tables)
EX1 = np.array([[1, 1, 0, 0, 0, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 1, 0, 1, 0, 0]], dtype=float)
EX2 = np.array([[0, 0, 0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 0, 0, 1]], dtype=float)
EX3 = np.array([[0, 0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0, 1]], dtype=float)
EX4 = np.array([[0] * 8, [0] * 7 + [1]], dtype=float)
EX5 = np.zeros((2, 8))


def test_book_example_alpha_0_095_with_coincidences():
    r = ag.krippendorff_alpha(EX1)
    # book: alpha = 1 - 4/4.421 = 0.095; exact closed form 1 - (n-1) o01 / (n0 n1) = 1 - 19*4/84
    assert r.alpha == pytest.approx(1 - 19 * 4 / 84, abs=1e-12)
    assert round(r.alpha, 3) == 0.095
    assert r.observed.to_numpy().tolist() == [[10, 4], [4, 2]]  # book's o_ck with n0 = 14, n1 = 6
    assert r.expected.loc[0, 0] == pytest.approx(14 * 13 / 19)  # 9.6 in the book
    assert r.expected.loc[1, 1] == pytest.approx(6 * 5 / 19)  # 1.6
    assert r.expected.loc[0, 1] == pytest.approx(14 * 6 / 19)  # 4.421
    assert round(r.expected.loc[0, 1], 3) == 4.421
    assert ag.percent_agreement(*EX1) == pytest.approx(0.6)


def test_book_example_negative_alpha():
    r = ag.krippendorff_alpha(EX2)
    assert round(r.alpha, 2) == -0.07  # 1 - 2/1.87
    assert r.expected.loc[0, 1] == pytest.approx(14 * 2 / 15)  # 1.87
    assert round(r.expected.loc[0, 0], 2) == 12.13 and round(r.expected.loc[1, 1], 2) == 0.13
    assert ag.percent_agreement(*EX2) == 0.75


def test_book_examples_one_zero_undefined():
    assert ag.krippendorff_alpha(EX3).alpha == 1.0
    assert ag.krippendorff_alpha(EX4).alpha == pytest.approx(0.0, abs=1e-12)
    assert round(ag.percent_agreement(*EX4), 2) == 0.88
    with pytest.warns(ag.UndefinedAgreementWarning, match="reports alpha = 0 by convention"):
        r = ag.krippendorff_alpha(EX5)
    assert np.isnan(r.alpha)
    assert ag.percent_agreement(*EX5) == 1.0


def test_pi_and_kappa_closed_form_and_statsmodels():
    # Example 1: p_o = 0.6; marginals A: 0.8/0.2, B: 0.6/0.4
    assert ag.cohens_kappa(*EX1) == pytest.approx((0.6 - (0.8 * 0.6 + 0.2 * 0.4)) / (1 - 0.56))
    assert ag.scotts_pi(*EX1) == pytest.approx((0.6 - (0.7**2 + 0.3**2)) / (1 - 0.58))
    rng = np.random.default_rng(1)
    for _ in range(20):
        a, b = rng.integers(0, 4, 50), rng.integers(0, 4, 50)
        table = pd.crosstab(a, b).reindex(index=range(4), columns=range(4), fill_value=0).to_numpy()
        assert ag.cohens_kappa(a, b) == pytest.approx(inter_rater.cohens_kappa(table).kappa, abs=1e-12)
        counts, _ = inter_rater.aggregate_raters(np.column_stack([a, b]))
        assert ag.scotts_pi(a, b) == pytest.approx(inter_rater.fleiss_kappa(counts, method="fleiss"), abs=1e-12)


@pytest.mark.parametrize("level", ag.LEVELS)
def test_matches_krippendorff_package_with_missing_values(level):
    rng = np.random.default_rng(7)
    for trial in range(25):
        n_raters, n_units = rng.integers(2, 7), rng.integers(5, 60)
        x = rng.integers(1, rng.integers(3, 9), size=(n_raters, n_units)).astype(float)
        x[rng.random(x.shape) < 0.3] = np.nan
        if (np.sum(~np.isnan(x), axis=0) >= 2).sum() < 2 or len(np.unique(x[~np.isnan(x)])) < 2:
            continue
        ours = ag.krippendorff_alpha(x, level).alpha
        ref = krippendorff.alpha(reliability_data=x, level_of_measurement=level)
        assert abs(ours - ref) < 1e-9, (trial, ours, ref)


def test_nominal_strings_and_long_format():
    x = np.array([["a", "b", "a", None], ["a", "b", "b", "c"], [None, "b", "a", "c"]], dtype=object)
    codes = np.array([[0, 1, 0, np.nan], [0, 1, 1, 2], [np.nan, 1, 0, 2]])
    assert ag.krippendorff_alpha(x).alpha == pytest.approx(ag.krippendorff_alpha(codes).alpha)
    long = pd.DataFrame([(r, u, v) for r in range(3) for u in range(4) if (v := x[r, u]) is not None],
                        columns=["rater", "unit", "label"])
    assert ag.krippendorff_alpha_long(long, "unit", "rater", "label").alpha == pytest.approx(
        ag.krippendorff_alpha(codes).alpha)


def test_bad_input_errors():
    with pytest.raises(ValueError, match="non-empty"):
        ag.krippendorff_alpha(np.empty((2, 0)))
    with pytest.raises(ValueError, match="Only one unit"):
        ag.krippendorff_alpha([[1, np.nan, 2], [1, 3, np.nan]])
    with pytest.raises(ValueError, match="Unknown level"):
        ag.krippendorff_alpha(EX1, level="cardinal")
    with pytest.raises(TypeError, match="interval data must be numeric"):
        ag.krippendorff_alpha([["low", "high"], ["low", "low"]], level="interval")
    with pytest.raises(ValueError, match="2-D"):
        ag.krippendorff_alpha([1, 2, 3])
    with pytest.raises(KeyError, match="raterx"):
        ag.krippendorff_alpha_long(pd.DataFrame({"u": [1], "r": [1], "v": [1]}), "u", "raterx", "v")


def test_paradox_table_and_grid():
    t = ag.two_rater_table(10, 0.5, 4, split=0.5)
    assert ag.percent_agreement(*t) == 0.6
    assert (t[0] != t[1]).sum() == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grid = ag.paradox_grid(20, [0.5, 0.9], 5)
    assert len(grid) == 12
    # at the same percent agreement, a higher prevalence gives a lower alpha (the paradox)
    k2 = grid[grid.disagreements == 2].set_index("prevalence")
    assert k2.loc[0.9, "alpha"] < k2.loc[0.5, "alpha"]
    with pytest.raises(ValueError):
        ag.two_rater_table(10, 0.5, 11)


def test_coincidence_summary_holds_every_number_of_the_book_tables():
    """Section 3.3.1's first table: o00 = 10, o01 = 4, o11 = 2 (n0 = 14, n1 = 6, n = 20); the urn model's
    e_ck = n_c (n_k - [c = k]) / (n - 1); alpha = 1 - o01 / e01; chance agreement (e00 + e11) / n."""
    s = ag.coincidence_summary(EX1)
    assert set(s) == {"o00", "o01", "o11", "e00", "e01", "e11", "alpha", "percent_agreement", "chance_agreement"}
    assert (s["o00"], s["o01"], s["o11"]) == (10, 4, 2)
    assert s["e00"] == pytest.approx(14 * 13 / 19, abs=1e-12) and s["e11"] == pytest.approx(6 * 5 / 19, abs=1e-12)
    assert s["e01"] == pytest.approx(14 * 6 / 19, abs=1e-12)
    assert s["alpha"] == pytest.approx(1 - 4 / (14 * 6 / 19), abs=1e-12)
    assert s["percent_agreement"] == 0.6
    assert s["chance_agreement"] == pytest.approx((14 * 13 + 6 * 5) / 19 / 20, abs=1e-12)   # 0.56 in the book
    # the negative alpha: chance agreement exactly (14*13/15 + 2*1/15) / 16 = 23/30, above the observed 0.75
    neg = ag.coincidence_summary(EX2)
    assert neg["chance_agreement"] == pytest.approx(23 / 30, abs=1e-12) and neg["percent_agreement"] == 0.75
    # no variation: alpha is 0/0, stated as NaN without a warning; the coincidences of the one category remain
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flat = ag.coincidence_summary(EX5)
    assert np.isnan(flat["alpha"]) and flat["o00"] == 16 and flat["percent_agreement"] == 1.0
    assert "o01" not in flat


def test_random_ratings_design_and_seed():
    a = ag.random_ratings(7, raters=4, units=2000, scale=5, missing_share=0.2)
    b = ag.random_ratings(np.random.default_rng(7), raters=4, units=2000, scale=5, missing_share=0.2)
    assert a.shape == (4, 2000) and np.array_equal(a, b, equal_nan=True)
    seen = a[~np.isnan(a)]
    assert set(np.unique(seen)) == {1.0, 2.0, 3.0, 4.0, 5.0}
    # the missing share is binomial(8000, 0.2): within 4 standard deviations, sqrt(0.2 * 0.8 / 8000) = 0.0045
    assert abs(np.isnan(a).mean() - 0.2) < 4 * 0.0045
    # no agreement beyond chance: alpha of a large random table is near 0 (its SD here is about 0.01)
    assert abs(ag.krippendorff_alpha(a).alpha) < 0.05
    assert not np.isnan(ag.random_ratings(1, 2, 10, 3)).any()
    with pytest.raises(ag.AgreementError, match="missing_share"):
        ag.random_ratings(1, 2, 10, 3, missing_share=1.0)
    with pytest.raises(ag.AgreementError, match="at least 2 raters"):
        ag.random_ratings(1, 1, 10, 3)
