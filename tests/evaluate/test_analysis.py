"""vrs_helpers.evaluate.analysis: workbook 07's analyses against lme4 on simulated logs with planted effects.

Reference: tests/reference/own_analysis_lme4.json, made by `Rscript tests/reference/own_analysis.R tests/reference`
(R 4.2.2, lme4 1.1-31) on own_analysis_{two,three}.csv.gz (tests/reference/own_analysis_data.py). Tolerances: the
chi2 statistics are differences of two maximized log-likelihoods; ours and lme4's optima agree to ~1e-6 in logLik
on such designs (tests/mixed/test_mixed_reference.py), so chi2 within 1e-4 absolute; p-values relative 1e-3; variance
components relative 1e-3 (flat REML surfaces move the 4th digit), absolute 1e-7 for components lme4 puts on the
boundary (1e-12).
"""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vrs_helpers.evaluate.analysis import AnalysisError, analyze

REF = Path(__file__).parent.parent / "reference"
LME4 = json.loads((REF / "own_analysis_lme4.json").read_text())


def _load(name):
    df = pd.read_csv(REF / f"own_analysis_{name}.csv.gz", dtype={"lr": str})
    return df


def _same_test(ours: dict, ref: dict):
    assert ours["df"] == ref["df"]
    assert ours["chi2"] == pytest.approx(ref["chi2"], abs=1e-4)
    assert ours["p_value"] == pytest.approx(ref["p_value"], rel=1e-3)


def _same_components(ours: dict, ref: dict):
    assert set(ours) == set(ref)
    for k, v in ref.items():
        if v < 1e-8:
            assert ours[k] == pytest.approx(v, abs=1e-7), k
        else:
            assert ours[k] == pytest.approx(v, rel=1e-3), k


@pytest.fixture(scope="module")
def two():
    # items="fixed": the runs-random model of the lme4 reference (no system-by-item term)
    return analyze(_load("two"), "score", "system", "item", replications=["seed"], properties=["length", "domain"],
                   baseline="base", n_resamples=999, seed=1, items="fixed")


def test_two_systems_against_lme4(two):
    s, ref = two.data, LME4["two"]
    _same_test(s["glrt"], ref["glrt"])
    _same_test(s["glrt_replications_random"]["lrt"], ref["glrt_replications_random"])
    for p in ("length", "domain"):
        _same_test(s["conditional"][p], ref["conditional"][p])
    for system in ("base", "new"):
        _same_components(s["variance_components"][system], ref["variance_components"][system])


def test_two_systems_readings_disagree_and_say_so(two):
    # planted: a real difference of 0.02 but run SD 0.02 over 5 seeds: significant as replications, not beyond runs
    assert two.fits.glrt.p_value < 0.05 < two.fits.glrt_replications_random.p_value
    assert two.fits.disagree and any(v.startswith("WARNING") for v in two.verdict)
    assert two.data["readings_disagree"] is True


def test_phi_and_decision_study_follow_definition_3_2(two):
    vc = two.fits.variance_components["base"]["variance"]  # full precision (summary.json keeps 10 digits)
    n = 5
    phi = vc["item"] / (vc["item"] + vc["seed"] / n + vc["Residual"] / n)   # absolute phi, item scores over 5 runs
    assert two.fits.reliability["base"].phi == pytest.approx(phi, rel=1e-12)
    need = two.fits.runs_needed["base"]["seed"]
    at = lambda k: vc["item"] / (vc["item"] + (vc["seed"] + vc["Residual"]) / k)  # noqa: E731
    assert at(need) >= 0.8 and (need == 1 or at(need - 1) < 0.8)


def test_paired_resampling_p_never_zero(two):
    paired = two.fits.paired
    assert set(paired["test"]) == {"paired bootstrap", "paired permutation"}
    assert (paired["p_value"] > 0).all()
    k = paired["n_resamples"].to_numpy()
    assert np.allclose(paired["p_value"], (np.round(paired["p_value_c_over_K"] * k) + 1) / (k + 1))
    # the observed difference is the mean over items of the per-item run means
    d = _load("two").groupby(["system", "item"])["score"].mean().unstack("system")
    assert paired["difference"].iloc[0] == pytest.approx(float((d["new"] - d["base"]).mean()), rel=1e-12)


def test_three_systems_two_replication_columns_against_lme4():
    res = analyze(_load("three"), "score", "system", "item", replications=["seed", "lr"], n_resamples=199)
    s, ref = res.data, LME4["three"]
    _same_test(s["glrt"], ref["glrt"])
    _same_test(s["glrt_replications_random"]["lrt"], ref["glrt_replications_random"])
    for system in ("A", "B", "C"):
        _same_components(s["variance_components"][system], ref["variance_components"][system])
    assert len(res.fits.comparison.contrasts) == 3   # Tukey: all pairs of 3 systems


def test_awkward_column_names_are_mapped_back():
    df = _load("two").rename(columns={"score": "BLEU score", "seed": "random-seed", "item": "sentence id"})
    res = analyze(df, "BLEU score", "system", "sentence id", replications=["random-seed"], n_resamples=99,
                  items="fixed")
    s = res.data
    _same_test(s["glrt_replications_random"]["lrt"], LME4["two"]["glrt_replications_random"])
    assert set(s["variance_components"]["base"]) == {"sentence id", "random-seed", "Residual"}


def test_one_system_is_reliability_only():
    df = _load("two")
    res = analyze(df[df["system"] == "base"], "score", None, "item", replications=["seed"])
    s = res.data
    assert s["glrt"] is None and s["glrt_replications_random"] is None
    _same_components(s["variance_components"]["all"], LME4["two"]["variance_components"]["base"])


def test_bad_input_is_named():
    df = _load("two")
    with pytest.raises(AnalysisError, match="scor"):
        analyze(df, "scor", "system", "item")
    with pytest.raises(AnalysisError, match="baseline"):
        analyze(df, "score", "system", "item", baseline="nope")
    with pytest.raises(AnalysisError, match="missing"):
        analyze(df.assign(score=df["score"].where(df.index != 3)), "score", "system", "item")


def test_a_single_run_gives_no_variance_components():
    # one score per item: item and residual variance are confounded (any split fits), so none is reported
    df = _load("two")
    one = df[(df["system"] == "new") | (df["seed"] == "seed0")]
    res = analyze(one, "score", "system", "item", replications=["seed"], n_resamples=99)
    assert "base" not in res.fits.variance_components and "new" in res.fits.variance_components
    assert any("not separable" in n for n in res.notes)


def test_three_seeds_random_reading_uses_the_small_sample_test():
    """Issue 20's log (2 systems x 3 seeds, a true difference of half the run SD): the chi-square LRT of the
    runs-random model says p = 0.046, pbkrtest's Kenward-Roger and lmerTest's Satterthwaite F tests p = 0.121 on
    (1, 4.0) df (tests/reference/small_sample_lmertest.json). The verdict and summary.json use Kenward-Roger by
    default, Satterthwaite on request."""
    ref = json.loads((REF / "small_sample_lmertest.json").read_text())["models"]["three_seeds"]
    d = pd.read_csv(REF / "small_sample_three_seeds.csv.gz", dtype={"seed": str})
    for test, name, method in [("kenward-roger", "Kenward-Roger", "F test, Kenward-Roger df"),
                               ("satterthwaite", "Satterthwaite", "F test, Satterthwaite df")]:
        r = analyze(d, "score", "system", "item", replications=["seed"], n_resamples=199, items="fixed", runs="nested",
                    **({} if test == "kenward-roger" else {"test": test}))
        s = r.data["glrt_replications_random"]
        assert s["test"] == method and s["num_df"] == 1
        # summary.json states the df and the F test's p at 4 significant digits; the test object in full
        assert s["den_df"] == pytest.approx(ref[name]["system"]["DenDF"], rel=5e-4)
        assert s["p_value"] == pytest.approx(ref[name]["system"]["p"], rel=5e-4) and s["p_value"] > 0.05
        assert r.fits.random_test.F == pytest.approx(ref[name]["system"]["F"], rel=1e-4)
        assert r.fits.random_test.den_df == pytest.approx(ref[name]["system"]["DenDF"], rel=1e-4)
        assert r.fits.random_test.p_value == pytest.approx(ref[name]["system"]["p"], rel=1e-4)
        assert s["lrt"]["p_value"] < 0.05   # the large-sample LRT would have said "differ"
        line = next(v for v in r.verdict if v.startswith("With a random effect per run"))
        assert "show no significant difference" in line and name in line
    # the parametric bootstrap: pbkrtest's PBmodcomp (2,000 simulations) p = 0.130 (MC SE 0.0075); 999 of ours have
    # MC SE 0.011, so four combined SEs are 0.05
    boot = analyze(d, "score", "system", "item", replications=["seed"], n_resamples=199, test="bootstrap", n_sim=999,
                   items="fixed", runs="nested")
    sb = boot.data["glrt_replications_random"]
    assert sb["test"] == "parametric bootstrap LRT" and sb["n_sim"] == 999
    ref_pb = json.loads((REF / "small_sample_lmertest.json").read_text())["pbmodcomp"]["p_PBtest"]
    assert sb["p_value"] == pytest.approx(ref_pb, abs=0.05)
    assert ref_pb > 0.05 and "show no significant difference" in boot.verdict[2] and "simulations" in boot.verdict[2]
    assert boot.verdict[0] == boot.answer   # the answer first, then the book's reading, then this one
    chisq = analyze(d, "score", "system", "item", replications=["seed"], n_resamples=199, test="chisq",
                    items="fixed")
    assert chisq.data["glrt_replications_random"]["test"] == "GLRT (chi-square)"
    assert chisq.fits.random_test.p_value < 0.05
    assert any("fewer than 3 runs" in n for n in r.notes) is False   # 3 runs: no such note


def test_conditional_reading_asks_both_questions():
    """Issue 28: per data property, the paper's eq. 6/7 joint test (system and system x P against P: df (k - 1) L
    for L levels) worded "the systems differ once P is accounted for", and the interaction test (system + P
    against system x P) worded "the difference depends on P". With runs random the interaction's test is the F test
    of the interaction on the runs-random model with Kenward-Roger df: the engine's type III table of that model
    (checked against lmerTest in tests/mixed/test_mixed_anova.py) gives the same F and df, numerator
    (k - 1)(L - 1)."""
    from vrs_helpers import mixed

    df = _load("two")
    res = analyze(df, "score", "system", "item", replications=["seed"], properties=["domain"], baseline="base",
                  n_resamples=99)
    levels = df["domain"].nunique()
    joint, inter = res.fits.conditional["domain"].glrt, res.fits.interactions["domain"]
    assert joint.df == levels and inter.num_df == levels - 1
    m = mixed.fit(f"score ~ system * domain + {res.fits.comparison_random.formula.split(' + ', 1)[1]}",
                  df.assign(system=pd.Categorical(df["system"], ["base", "new"])))
    row = m.anova(type=3, ddf="kenward-roger").set_index("term").loc["system:domain"]
    assert inter.statistic == pytest.approx(row["F"], rel=1e-6)
    assert inter.den_df == pytest.approx(row["den_df"], rel=1e-6)
    said = [v for v in res.verdict if "domain" in v]
    assert "once domain is accounted for" in said[0] and "depends on domain" in said[1]
    assert res.data["interaction"]["domain"]["num_df"] == levels - 1


def test_answer_opens_the_verdict_with_the_test_of_the_design():
    """summary.json's ``answer``: one sentence with the runs-random test (pbkrtest's Kenward-Roger p = 0.121 on
    the three-seeds log, tests/reference/small_sample_lmertest.json), first in the verdict."""
    ref = json.loads((REF / "small_sample_lmertest.json").read_text())["models"]["three_seeds"]
    d = pd.read_csv(REF / "small_sample_three_seeds.csv.gz", dtype={"seed": str})
    r = analyze(d, "score", "system", "item", replications=["seed"], n_resamples=99, items="fixed", runs="nested")
    s = r.data
    assert s["answer"] == r.verdict[0]
    assert s["answer"].startswith("Across runs, on these items: no evidence that base and new differ")
    assert f"p = {ref['Kenward-Roger']['system']['p']:.3g}" in s["answer"] and "3 run(s) per system" in s["answer"]


def test_a_system_that_is_always_correct_is_separated_and_not_reported_as_numbers():
    """Issue 28: all-correct scores have infinite log-odds: a note, no variance components or phi for that system,
    its log-odds contrasts null in summary.json (counts in the note: 3 seeds x 40 items = 120 of 120)."""
    from vrs_helpers.evaluate.analysis import summary_json

    rng = np.random.default_rng(1)
    rows = [{"system": s, "seed": r, "item": f"i{i}", "correct": 1 if s == "perfect" else int(rng.random() < 0.6)}
            for s in ("base", "perfect") for r in range(3) for i in range(40)]
    r = analyze(pd.DataFrame(rows), "correct", "system", "item", replications=["seed"], n_resamples=99, n_sim=19)
    s = json.loads(summary_json(r))
    assert s["separation"] == {"perfect": "all correct"}
    assert any("system perfect is correct (120 of 120)" in n for n in s["notes"])
    assert set(s["variance_components"]) == {"base"} and "perfect" not in s["reliability"]
    assert all(c["estimate"] is None and c["p_value"] is None for c in s["contrasts"])


def test_vrs_analyze_applies_the_default_rule_of_compare_systems():
    """Issue 39's rules reach `vrs analyze`: without --test its runs-random reading is compare_systems' default (on
    this log, run SD 0, the t test on the run means), not the family's default test passed by name (which switched
    the rule off); a test named with --test is run as named."""
    import warnings

    from vrs_helpers.book.glrt import compare_systems
    from vrs_helpers.book.simulation import evaluation_log

    log = evaluation_log(np.random.default_rng(1), systems=2, runs=3, items=300, run_sd=0.0, item_sd=0.1,
                         residual_sd=0.1, run_labels="own")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compare_systems(log, "score", "system", "item", replications=["run"])
        r = analyze(log, "score", "system", "item", replications=["run"], n_resamples=99)
        named = analyze(log, "score", "system", "item", replications=["run"], n_resamples=99, test="kenward-roger")
    assert c.test.method.startswith("t test on run means")
    assert r.fits.comparison_random.test.method == c.test.method
    assert r.fits.comparison_random.test.p_value == pytest.approx(c.test.p_value, rel=1e-9)
    assert named.fits.comparison_random.test.method == "F test, Kenward-Roger df"
