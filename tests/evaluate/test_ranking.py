"""The ranking of many systems (issue 38): rank intervals from the decisions as defined by Mogstad et al. (2024), the
compact letter display against its defining property and against R's multcompView, the best set."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vrs_helpers.evaluate.tables import ranking

REF = Path(__file__).parent.parent / "reference"


@st.composite
def decisions(draw, max_k=9):
    k = draw(st.integers(min_value=1, max_value=max_k))
    est = draw(st.lists(st.integers(min_value=-5, max_value=5), min_size=k, max_size=k))
    bits = draw(st.lists(st.booleans(), min_size=k * (k - 1) // 2, max_size=k * (k - 1) // 2))
    differ = np.zeros((k, k), dtype=bool)
    for (i, j), b in zip(itertools.combinations(range(k), 2), bits, strict=True):
        differ[i, j] = differ[j, i] = b
    return np.array(est, dtype=float), differ


@settings(max_examples=300, deadline=None)
@given(decisions(), st.booleans())
def test_rank_intervals_follow_from_the_decisions(case, higher):
    """Property, by direct counting: lower end 1 + #significantly better, upper end k - #significantly worse; the
    interval contains the point rank; a system separated from every other has a one-point interval."""
    est, differ = case
    k = len(est)
    got = ranking.rank_intervals(est, differ, higher_is_better=higher)
    s = est if higher else -est
    for i in range(k):
        better = sum(1 for j in range(k) if differ[i, j] and s[j] > s[i])
        worse = sum(1 for j in range(k) if differ[i, j] and s[j] < s[i])
        assert got["rank_low"][i] == 1 + better and got["rank_high"][i] == k - worse
        assert got["rank"][i] == 1 + sum(1 for j in range(k) if s[j] > s[i])
        assert got["rank_low"][i] <= got["rank"][i] <= got["rank_high"][i]
        if differ[i].sum() == k - 1 and len(set(s)) == k:
            assert got["rank_low"][i] == got["rank_high"][i]


@settings(max_examples=400, deadline=None)
@given(decisions(max_k=10))
def test_letters_represent_exactly_the_decisions(case):
    """Property (the definition of a letter display): two systems share a letter if and only if no decision
    separates them; every system has at least one letter; no two letter columns are nested (absorbed)."""
    _, differ = case
    k = len(differ)
    names = [f"s{i}" for i in range(k)]
    letters = ranking.compact_letters(names, differ)
    for i, j in itertools.combinations(range(k), 2):
        share = bool(set(letters[names[i]]) & set(letters[names[j]]))
        assert share == (not differ[i, j]), (i, j, letters)
    assert all(letters[n] for n in names)


def test_letters_equal_multcompview():
    """The letters equal R's multcompView::multcompLetters (0.1-8) on the same decisions, column order included
    (tests/reference/ranking_letters.R made the cases: random decision matrices of 3-12 systems)."""
    ref = json.loads((REF / "ranking_letters.json").read_text())
    assert len(ref["cases"]) >= 30
    for case in ref["cases"]:
        names = case["names"]
        differ = np.array(case["differ"], dtype=bool)
        assert ranking.compact_letters(names, differ) == dict(zip(names, case["letters"], strict=True)), names


def test_letter_names_continue_past_the_alphabet():
    """multcompView's naming: a..z, A..Z, then the last letter '.' as a prefix (53 columns end in '.a')."""
    names = ranking._letter_names(53)
    assert names[:3] == ["a", "b", "c"] and names[25:27] == ["z", "A"] and names[51] == "Z" and names[52] == ".a"
    assert len(set(ranking._letter_names(120))) == 120


def test_best_set_and_sentence():
    """Three systems: A best, B not separated from A, C worse than both; the sentence names them."""
    contrasts = pd.DataFrame({"contrast": ["A - B", "A - C", "B - C"], "p_value": [0.4, 0.001, 0.01]})
    table = ranking.ranking_table(["A", "B", "C"], [0.9, 0.8, 0.5], [0.8, 0.7, 0.4], [1.0, 0.9, 0.6], contrasts,
                                  0.05, method="test")
    assert table["system"].tolist() == ["A", "B", "C"]
    assert table["rank_low"].tolist() == [1, 1, 3] and table["rank_high"].tolist() == [2, 2, 3]
    assert table["group"].tolist() == ["a", "a", "b"]
    sentence = ranking.ranking_sentence(table, contrasts, 0.05)
    assert sentence.startswith("A has the best estimate, and B cannot be separated from it")
    assert sentence.endswith("; C is significantly worse than A.")
    lower = ranking.ranking_table(["A", "B", "C"], [0.9, 0.8, 0.5], [0.8, 0.7, 0.4], [1.0, 0.9, 0.6], contrasts,
                                  0.05, higher_is_better=False)
    assert lower["system"].tolist() == ["C", "B", "A"] and lower["rank_low"].tolist() == [1, 2, 2]


def test_the_answer_names_at_most_twelve_tied_systems():
    """40 systems: s00 best, s01..s29 not separated from it, s30..s39 worse than every one of those: the sentence
    names the 12 best estimates after s00, counts the other 17, and counts the 10 worse."""
    import itertools

    names = [f"s{i:02d}" for i in range(40)]
    est = np.linspace(0.9, 0.5, 40)
    rows = [(f"{a} - {b}", 0.001 if (int(a[1:]) < 30) != (int(b[1:]) < 30) else 0.5)
            for a, b in itertools.combinations(names, 2)]
    contrasts = pd.DataFrame(rows, columns=["contrast", "p_value"])
    table = ranking.ranking_table(names, est, est - 0.1, est + 0.1, contrasts, 0.05)
    sentence = ranking.ranking_sentence(table, contrasts, 0.05)
    assert sentence.startswith("s00 has the best estimate, and " + ", ".join(names[1:13]) + " and 17 more")
    assert "s13" not in sentence
    assert sentence.endswith("the other 10 of the 40 systems are significantly worse than s00.")


def test_a_contrast_not_computed_is_no_decision():
    """A separated system's contrasts are NaN: they separate nothing (and are not 'no difference' as a decision:
    the p matrix keeps NaN)."""
    contrasts = pd.DataFrame({"contrast": ["A - B", "A - C", "B - C"], "p_value": [np.nan, 0.001, np.nan]})
    differ, p = ranking.decision_matrix(["A", "B", "C"], contrasts, 0.05)
    assert differ.sum() == 2 and differ[0, 2] and np.isnan(p[0, 1]) and np.isnan(p[1, 2])


@pytest.mark.parametrize("names", [["a - b", "a", "b - c"], ["x", "y", "z"]])
def test_decision_matrix_reads_pairs_in_order_when_names_are_ambiguous(names):
    """Names containing ' - ' make contrast labels ambiguous: the pairs are then read in the order the contrasts
    are made (i < j, row by row)."""
    labels = [f"{a} - {b}" for a, b in itertools.combinations(names, 2)]
    contrasts = pd.DataFrame({"contrast": labels, "p_value": [0.01, 0.5, 0.02]})
    differ, _ = ranking.decision_matrix(names, contrasts, 0.05)
    assert differ[0, 1] and not differ[0, 2] and differ[1, 2]


def test_twelve_systems_rank_as_emmeans_and_multcompview_say():
    """Issue 38 acceptance: on a 12-system continuous log (tests/reference/ranking_data.py) the ranking's pairwise
    decisions are emmeans' Tukey-adjusted KR contrasts of the same model (p within 1e-4: the two fits' stopping
    error, as in tests/mixed/test_mixed_pairwise.py), its estimates emmeans' marginal means (1e-6) with emmeans'
    simultaneous (adjust = "mvt") intervals (2e-3: our quasi-Monte-Carlo quantile of max |t| is within 0.01 of
    mvtnorm's, times SEs of 0.09), each pair's Tukey interval emmeans' (1e-4), its letters multcompView's on
    emmeans' p-values, and each rank interval the one those decisions define."""
    import warnings

    from vrs_helpers.evaluate.analysis import analyze
    from vrs_helpers.evaluate.tables.ranking import rank_intervals

    ref = json.loads((REF / "ranking_twelve_emmeans.json").read_text())
    data = pd.read_csv(REF / "ranking_twelve.csv.gz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = analyze(data, "score", "system", "item", replications=["seed"], n_resamples=99,
                    runs="nested")   # the reference's model: each system's seeds its own
    table = a.fits.ranking.set_index("system")
    emm = {r["system"]: r for r in ref["emmeans"]}
    sim = {r["system"]: r for r in ref["means_mvt"]}
    for s, row in table.iterrows():
        assert row["estimate"] == pytest.approx(emm[s]["emmean"], abs=1e-6)
        assert row["ci_low"] == pytest.approx(sim[s]["lower.CL"], abs=2e-3)
        assert row["ci_high"] == pytest.approx(sim[s]["upper.CL"], abs=2e-3)
    ours = {r["contrast"]: r["p_value"] for r in a.data["pairs"]}
    rows = {r["contrast"]: r for r in a.data["pairs"]}
    for r in ref["tukey"]:
        assert rows[r["contrast"]]["lower"] == pytest.approx(r["lower.CL"], abs=1e-4)
        assert rows[r["contrast"]]["upper"] == pytest.approx(r["upper.CL"], abs=1e-4)
        assert ours[r["contrast"]] == pytest.approx(r["p.value"], abs=1e-4), r["contrast"]
        assert (ours[r["contrast"]] < 0.05) == (r["p.value"] < 0.05)
    assert a.fits.ranking["system"].tolist() == ref["order"]
    assert table["group"].to_dict() == ref["letters"]
    names = ref["order"]
    differ = np.zeros((12, 12), dtype=bool)
    index = {n: i for i, n in enumerate(names)}
    for r in ref["tukey"]:
        i, j = (index[x] for x in r["contrast"].split(" - "))
        differ[i, j] = differ[j, i] = r["p.value"] < 0.05
    expected = rank_intervals([emm[n]["emmean"] for n in names], differ)
    assert a.fits.ranking["rank_low"].tolist() == expected["rank_low"].tolist()
    assert a.fits.ranking["rank_high"].tolist() == expected["rank_high"].tolist()


def test_twelve_binary_systems_rank_as_glht_and_emmeans_say():
    """Issue 38 acceptance, 0/1 scores: 12 systems x 3 seeds on tests/reference/ranking_binary.csv.gz with
    ``test="max-t"``, the single-step max-|z| of the GLMM's contrasts (no refits; not the default, which calibrates
    the same max-|z| by the parametric bootstrap, because with 3 runs per system the GLMM's ML run variance is biased
    down and glht's reading rejects too often: benchmarks/ranking_error.py). Against multcomp::glht single-step and
    emmeans (tests/reference/ranking_binary.R): every pairwise decision equal; adjusted p within 0.02 and the
    intervals within 2 % of their half-width, because the Wald SEs differ by up to 1 % between the two
    finite-difference Hessians of the Laplace deviance (lme4's deriv12 and ours, the tolerance of
    tests/mixed/test_mixed_glmm.py, se_rel 0.02) and mvtnorm's and our quasi-Monte-Carlo errors are ~1e-3; the
    accuracies within 1e-3 (the two optimizers' stopping error on the logit scale is 5e-4)."""
    import warnings

    from vrs_helpers.evaluate.analysis import analyze

    ref = json.loads((REF / "ranking_binary.json").read_text())
    data = pd.read_csv(REF / "ranking_binary.csv.gz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = analyze(data, "score", "system", "item", replications=["seed"], n_resamples=99, test="max-t")
    assert a.fits.comparison_random.test.method.startswith("single-step max-|z|")
    pairs = {r["contrast"]: r for r in a.data["pairs"]}
    for r in ref["glht"]:
        hi, lo = r["contrast"].split(" - ")  # glht: later level first
        ours = pairs[f"{lo} - {hi}"]
        assert (ours["p_value"] < 0.05) == (r["p.value"] < 0.05), r["contrast"]
        assert ours["p_value"] == pytest.approx(r["p.value"], abs=0.02)
        half = (r["upper"] - r["lower"]) / 2
        assert -ours["upper"] == pytest.approx(r["lower"], abs=0.02 * half + 2e-3)
        assert -ours["lower"] == pytest.approx(r["upper"], abs=0.02 * half + 2e-3)
    for r in ref["differences_mvt"]:  # accuracy points, simultaneous
        ours = pairs[r["contrast"]]
        assert ours["difference"] == pytest.approx(r["estimate"], abs=1e-3)
        half = (r["asymp.UCL"] - r["asymp.LCL"]) / 2
        assert ours["difference_low"] == pytest.approx(r["asymp.LCL"], abs=0.02 * half + 1e-3)
        assert ours["difference_high"] == pytest.approx(r["asymp.UCL"], abs=0.02 * half + 1e-3)
    table = a.fits.ranking.set_index("system")
    from scipy.special import expit

    for r, m in zip(ref["emmeans"], ref["means_mvt"], strict=True):
        row = table.loc[r["system"]]
        assert row["estimate"] == pytest.approx(r["prob"], abs=1e-3)
        half = (m["asymp.UCL"] - m["asymp.LCL"]) / 2
        lo = expit(m["asymp.LCL"] - 0.02 * half - 2e-3), expit(m["asymp.LCL"] + 0.02 * half + 2e-3)
        assert lo[0] <= row["ci_low"] <= lo[1]
    assert a.data["ranking_ci"] == "simultaneous"


def test_twelve_binary_systems_by_default_rank_as_emmeans_on_the_linear_model():
    """Issue 38, 0/1 scores: the default runs-random reading is the linear mixed model of the 0/1 scores
    (glrt._linear_probability). On tests/reference/ranking_binary.csv.gz (12
    systems x 3 shared seeds: runs crossed) its KR F test equals pbkrtest's KRmodcomp (1e-4: the two REML fits'
    stopping error), its pairwise decisions emmeans' Tukey-adjusted KR contrasts (p within 1e-4, every decision
    equal), its estimates the emmeans (accuracies, 1e-6) and its letters multcompView's
    (tests/reference/ranking_binary_lmm.R)."""
    import warnings

    from vrs_helpers.evaluate.analysis import analyze

    ref = json.loads((REF / "ranking_binary_lmm.json").read_text())
    data = pd.read_csv(REF / "ranking_binary.csv.gz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = analyze(data, "score", "system", "item", replications=["seed"], n_resamples=99)
    test = a.fits.comparison_random.test
    assert "linear model of the 0/1 scores" in test.method
    kr = ref["kenward_roger"]
    assert (test.F, test.den_df) == pytest.approx((kr["F"], kr["den_df"]), rel=1e-4)
    assert test.p_value == pytest.approx(kr["p_value"], rel=1e-3, abs=1e-12)
    pairs = {r["contrast"]: r for r in a.data["pairs"]}
    for r in ref["tukey"]:
        ours = pairs[r["contrast"]]
        assert ours["p_value"] == pytest.approx(r["p.value"], abs=1e-4), r["contrast"]
        assert (ours["p_value"] < 0.05) == (r["p.value"] < 0.05)
    table = a.fits.ranking.set_index("system")
    for r in ref["emmeans"]:
        assert table.loc[r["system"], "estimate"] == pytest.approx(r["emmean"], abs=1e-6)
    assert a.fits.ranking["system"].tolist()[:1] == ref["order"][:1]
    assert table["group"].to_dict() == ref["letters"]
