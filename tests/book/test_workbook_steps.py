"""The steps the book workbooks call (issue 53: one helper per code cell), on small data whose answers are known
here: by hand, from a closed form, or from the functions the steps compose."""

import numpy as np
import pandas as pd
import pytest

from vrs_helpers.book import agreement as ag
from vrs_helpers.book import circularity as circ
from vrs_helpers.book import model_based_metrics as mbm
from vrs_helpers.book import mt_systems
from vrs_helpers.book import validity as v


def test_agreement_tables():
    x = np.array([[1, 1, 0, 0], [0, 1, 1, 0]], dtype=float)
    frame = ag.ratings_frame(x)
    assert list(frame.index) == ["A", "B"] and list(frame.columns) == [1, 2, 3, 4] and frame.loc["B", 3] == 1
    both = ag.ratings_frame(x, x[::-1], names=["one", "two"])
    assert both.loc[("two", "A")].tolist() == [0, 1, 1, 0]
    coefficients = ag.coefficients(x).set_index("coefficient")["value"]
    assert coefficients["percent agreement"] == 0.5                      # items 2 and 4 agree
    assert coefficients["Scott's pi"] == pytest.approx(round(ag.scotts_pi(*x), 4))
    res = ag.krippendorff_alpha(x)
    beside = ag.coincidences_beside(res, {"o00": 2, "o01": 2, "o11": 2, "e00": 1.71, "e01": 2.29, "e11": 1.71})
    assert list(beside.columns.get_level_values(0).unique()) == ["book o_ck", "ours o_ck", "book e_ck", "ours e_ck"]
    # o_ck counts both orders: 2 disagreeing units give o01 = 2, the agreeing 0-0 and 1-1 units 2 each
    assert beside["ours o_ck"].to_numpy().tolist() == [[2, 2], [2, 2]]
    with pytest.warns(ag.UndefinedAgreementWarning):
        assert np.isnan(ag.krippendorff_alpha(np.zeros((2, 4))).alpha)
    quiet = ag.alphas_quietly(np.zeros((2, 4)), x)
    assert np.isnan(quiet[0].alpha) and quiet[1].alpha == res.alpha


def test_alpha_under_chance_is_seeded_and_at_disagreements_picks_rows():
    design = {"raters": 3, "units": 10, "scale": 4, "missing_share": 0.1}
    a1, null1 = ag.alpha_under_chance(design, n_sets=5, seed=3)
    a2, null2 = ag.alpha_under_chance(design, n_sets=5, seed=3)
    pd.testing.assert_series_equal(a1, a2)
    pd.testing.assert_frame_equal(null1, null2)
    first = ag.random_ratings(np.random.default_rng(3), **design)
    assert a1["nominal"] == ag.krippendorff_alpha(first, "nominal").alpha   # the first draw of the same generator
    table = ag.against_chance(a1, null1)
    assert table.loc["(alpha - mean) / SD", "ratio"] == pytest.approx(
        round((a1["ratio"] - null1["ratio"].mean()) / null1["ratio"].std(), 4))
    grid = ag.paradox_grid(20, [0.5, 0.9], 6)
    rows = ag.at_disagreements(grid, 2)
    assert list(rows.index) == [0.5, 0.9] and (rows["disagreements"] == 2).all()


def test_validity_steps():
    bias = pd.DataFrame({"feature": ["a", "b", "c"], "ci_lower": [0.1, -0.2, np.nan], "ci_upper": [0.3, 0.1, np.nan],
                         "status": ["ok", "ok", "constant"]})
    assert v.with_verdict(bias)["biased (CI excludes 0)"].tolist() == ["yes", "no", "undefined"]
    pairs = pd.DataFrame({"premise": ["the cat sat", "a dog ran", "the cat sat"],
                          "hypothesis": ["the cat", "no dog", "a bird flew"],
                          "gold_label": ["entailment", "contradiction", "neutral"]})
    features, y = v.entailment_features(pairs)
    assert y.tolist() == [1.0, 0.0, 0.0] and features.equals(v.nli_features(pairs["premise"], pairs["hypothesis"]))
    rng = np.random.default_rng(0)
    f = pd.DataFrame({"x": rng.normal(size=40), "z": rng.normal(size=40)})
    entailed, n_correct = np.tile([1, 0], 20), rng.integers(0, 101, 40)
    side = v.correctness_correlations(f, entailed, n_correct)
    on, off = entailed == 1, entailed == 0
    assert side.loc["x", "entailed pairs"] == pytest.approx(np.corrcoef(f["x"][on], n_correct[on])[0, 1])
    assert side.loc["z", "non-entailed pairs"] == pytest.approx(np.corrcoef(f["z"][off], n_correct[off])[0, 1])


def test_table_2_2_refuses_inconsistent_routes():
    pairs = pd.DataFrame({"gold_label": ["entailment", "neutral"], "n_correct": [90, 60]})
    cells = {c: [0.5, 0.7] for c in v.HANS_CELLS}
    runs = pd.DataFrame({"MNLI dev acc.": [0.7, 0.8], "Overall accuracy": [0.5, 0.7], **cells})
    table, numbers = v.table_2_2(pairs, runs)
    assert numbers["mnli"] == pytest.approx(0.75) and numbers["hans"] == pytest.approx(0.6)
    assert numbers["binary_upper"] == pytest.approx(1 - 10 / 200)   # only errors on entailed pairs stay errors
    assert table.loc["HANS test", "runs that round to the book's value"] == 0
    assert table.loc["ANLI test", "public data"] == "not public"
    with pytest.raises(ValueError, match="disagree"):
        v.table_2_2(pairs, runs.assign(**{"MNLI dev acc.": [0.9, 0.9]}))
    with pytest.raises(ValueError, match="six cells"):
        v.table_2_2(pairs, runs.assign(**{"Overall accuracy": [0.4, 0.7]}))


def test_length_classes_and_kidney_cells():
    ter = pd.DataFrame({"system": pd.Categorical(["A", "A", "B", "C"]), "src_length": [15, 16, 55, 56],
                        "ter": [0.1, 0.2, 0.3, 0.4], "sentence_id": [1, 2, 3, 4]})
    out = mt_systems.with_length_classes(ter, ["A", "B"], [15, 55])
    assert out["src_length_class"].tolist() == ["short", "typical", "typical"]   # upper bounds inclusive
    assert list(out["system"].cat.categories) == ["A", "B"]
    df = pd.DataFrame({"crea": [1.0, 5.0, 5.0, 2.5, 0.5], "urine24": [100, 100, 900, 900, 900]})
    cells, shares = circ.kidney_cells(df, {"crea": [1.2, 4.9], "urine24": [200, 500]})
    assert shares["high"] == 2 and shares["share_high_low"] == 0.5           # of crea > 4.9, one has urine <= 500
    assert shares["region"] == 2 and shares["region_share"] == pytest.approx(0.4)   # crea > 1.2 and urine > 500
    assert int(cells.to_numpy().sum()) == len(df)


def test_model_based_metric_steps():
    t1 = mbm.table_1(0.8897, 0.22769)
    for name, t in mbm.TABLE_1.items():
        p_c, p_t = map(float, t["mean"])
        assert t1.ours[name]["ATE"] == pytest.approx(p_t - p_c)
        n = mbm.TABLE_1_PROMPTS[name][0]
        assert t1.ours[name]["Var^D GPT2"] == pytest.approx(p_c * (1 - p_c) / (n - 1))
        assert t1.n_table.loc[(name, "GPT2"), "N implied by printed Var^D (eq. 5)"] == pytest.approx(
            p_c * (1 - p_c) / float(t["var_d"][0]) + 1)
    assert t1.summary.loc["significant (deterministic)", "BOLD"] and not t1.summary.loc["significant (model-based)",
                                                                                         "BOLD"]
    study = mbm.judge_study(1, n_items=200, labelled_fraction=0.1)
    assert len(study) == 600 and set(study["system"]) == {"A", "B", "C"}
    labelled = study.groupby("system")["human"].apply(lambda h: h.notna().to_numpy())
    assert all(labelled.iloc[0].sum() == 20 and (labelled.iloc[0] == m).all() for m in labelled)   # same items
    pairs = mbm.paired_outputs(np.random.default_rng(0), 5000, 0.9, 0.2)
    assert pairs["joint"].sum() == pytest.approx(1) and pairs["covariance"] > 0
    assert pairs["paired"].upper - pairs["paired"].lower < pairs["independent"].upper - pairs["independent"].lower
