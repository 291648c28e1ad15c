"""vrs_helpers.evaluate.tables.readings and own_metrics through own_analysis.analyze: ASO and the expected best of n
runs on
the
per-run means (checked against brute-force enumeration, the quantile-function integral and a sign flip), one
sentence per disagreement, the verdict box, and Holm's correction across metrics recomputed in the test."""

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import holm_by_hand
from vrs_helpers.errors import VRSError
from vrs_helpers.evaluate.analysis import analyze, summary_json
from vrs_helpers.evaluate.tables.readings import IGNORES, verdict_html

REF = Path(__file__).parent.parent / "reference"


@pytest.fixture(scope="module")
def three_seeds():
    """Issue 20's log: 2 systems x 3 seeds x 400 items, a true difference of half the run SD."""
    return pd.read_csv(REF / "small_sample_three_seeds.csv.gz", dtype={"seed": str})


@pytest.fixture(scope="module")
def result(three_seeds):
    return analyze(three_seeds, "score", "system", "item", replications=["seed"], n_resamples=999, seed=2)


def _violation_ratio(a, b, dt=0.005):
    """deepsig's eps_W2 of A over B from the empirical quantile functions on the grid t = dt, 2 dt, ... < 1 (the
    first grid point enters the distance, not the violation integral), written out independently."""
    t = np.arange(dt, 1, dt)
    f = np.sort(a)[np.clip(np.ceil(len(a) * t).astype(int) - 1, 0, len(a) - 1)]
    g = np.sort(b)[np.clip(np.ceil(len(b) * t).astype(int) - 1, 0, len(b) - 1)]
    d2 = (g - f) ** 2
    return float(np.sum(np.where(f < g, d2, 0.0)[1:]) / np.sum(d2))


def test_aso_on_the_run_means_both_directions(three_seeds, result):
    means = three_seeds.groupby(["system", "seed"])["score"].mean()
    new, base = means["new"].to_numpy(), means["base"].to_numpy()
    s = json.loads(summary_json(result))["aso"]
    assert list(s) == ["new"]
    a = s["new"]
    assert a["baseline"] == "base" and a["threshold"] == 0.2 and a["runs"] == {"new": 3, "base": 3}
    # summary.json holds 10 significant digits
    assert a["candidate_better"]["violation_ratio"] == pytest.approx(_violation_ratio(new, base), abs=1e-9)
    assert a["baseline_better"]["violation_ratio"] == pytest.approx(_violation_ratio(base, new), abs=1e-9)
    for d in ("candidate_better", "baseline_better"):   # eps_min is an upper bound of the violation ratio
        assert a[d]["violation_ratio"] - 1e-9 <= a[d]["eps_min"] <= 1
        assert a[d]["dominates"] == (a[d]["eps_min"] < 0.2)
    # issue 22: on this log ASO declares the new system better while the runs-random F test does not
    assert a["candidate_better"]["dominates"] and a["winner"] == "new"


def test_expected_best_equals_enumeration(three_seeds, result):
    """E[best of n of the N runs drawn with replacement] = the mean over all N^n draws (brute force)."""
    means = three_seeds.groupby(["system", "seed"])["score"].mean()
    s = json.loads(summary_json(result))["expected_max"]
    assert set(s) == {"base", "new"}
    for system, entry in s.items():
        v = means[system].to_numpy()
        assert entry["best"] == "max" and entry["runs"] == 3
        brute = [np.mean([max(d) for d in itertools.product(v, repeat=n)]) for n in (1, 2, 3)]
        assert [r["expected"] for r in entry["table"]] == pytest.approx(brute, abs=1e-9)
        for r in entry["table"]:   # a percentile interval of resampled runs lies within the observed runs
            assert v.min() - 1e-9 <= r["ci_low"] <= r["expected"] + 1e-9 <= r["ci_high"] + 2e-9 <= v.max() + 3e-9


def test_lower_is_better_is_the_same_comparison_mirrored(three_seeds, result):
    """Negated scores with lower_is_better=True: the same ASO eps_min (the same seeds, the same order) and the
    expected minimum equal to minus the expected maximum; the two-sided tests unchanged."""
    flipped = three_seeds.assign(score=-three_seeds["score"])
    r = analyze(flipped, "score", "system", "item", replications=["seed"], n_resamples=999, seed=2,
                lower_is_better=True)
    assert r.fits.aso["new"].candidate_better.eps_min == pytest.approx(result.fits.aso["new"].candidate_better.eps_min,
                                                                  abs=1e-12)
    assert r.fits.aso["new"].baseline_better.eps_min == pytest.approx(result.fits.aso["new"].baseline_better.eps_min,
                                                                 abs=1e-12)
    for s in ("base", "new"):
        mine, theirs = r.fits.expected_max[s].table, result.fits.expected_max[s].table
        assert r.fits.expected_max[s].best == "min"
        assert np.allclose(mine["expected"], -theirs["expected"], atol=1e-12)
        assert np.allclose(mine["ci_low"], -theirs["ci_high"], atol=1e-12)
    assert r.fits.glrt.p_value == pytest.approx(result.fits.glrt.p_value, rel=1e-9)


def test_one_sentence_per_disagreeing_pair_of_readings(result):
    frame = result.fits.readings
    decisions = {k: bool(part["differ"].any()) for k, part in frame.groupby("kind") if k != "conditional"}
    assert set(decisions) == {"replications", "random", "paired", "aso"}
    pairs = [(x, y) for x, y in itertools.combinations(IGNORES, 2) if decisions[x] != decisions[y]]
    assert len(result.disagreements) == len(pairs) > 0
    # the runs-random F test (p = 0.121, lmerTest) is the one reading that finds no difference here
    assert decisions == {"replications": True, "random": False, "paired": True, "aso": True}
    aso_line = next(s for s in result.disagreements if s.startswith("new vs base: ASO"))
    assert "ignores the item variation" in aso_line and "models the item and the run-to-run" in aso_line
    assert all("ignore" in s or "models both" in s for s in result.disagreements)
    s = json.loads(summary_json(result))
    assert s["disagreements"] == result.disagreements and len(s["readings"]) == len(frame)


def test_verdict_box_lists_every_reading(result):
    page = verdict_html(result.fits.readings, result.disagreements, caption="Data: test")
    assert page.startswith("<div id='vrs-verdict'") and page.count("<tr>") == len(result.fits.readings) + 1
    for test in result.fits.readings["test"]:
        assert test.split(" (")[0].replace("'", "&#x27;") in page
    assert "eps_min &lt; 0.2" in page and "Kenward-Roger" in page


def test_one_run_of_the_baseline_gives_no_aso_and_says_why(three_seeds):
    one = three_seeds[(three_seeds["system"] == "new") | (three_seeds["seed"] == "s0")]
    r = analyze(one, "score", "system", "item", replications=["seed"], n_resamples=99)
    assert r.fits.aso == {} and any("ASO needs at least 2 runs" in n and "base has 1" in n for n in r.notes)
    assert r.fits.expected_max["base"].table["n"].tolist() == [1]


def test_several_metrics_holm_across_them(three_seeds):
    rng = np.random.default_rng(3)
    d = three_seeds.assign(noisy=three_seeds["score"] + rng.normal(0, 0.3, len(three_seeds)),
                           error=1 - three_seeds["score"])
    r = analyze(d, ["score", "noisy", "error"], "system", "item", replications=["seed"], n_resamples=199,
                lower_is_better=["error"])
    s = json.loads(summary_json(r))
    assert s["responses"] == ["score", "noisy", "error"] and set(s["metrics"]) == {"score", "noisy", "error"}
    assert s["metrics"]["error"]["better"] == "lower" and s["metrics"]["score"]["better"] == "higher"
    for m in s["metrics"].values():
        assert {"aso", "expected_max", "glrt", "glrt_replications_random"} <= set(m)
    fam = s["holm"]["families"]
    assert set(fam) == {"runs_random", "runs_as_replications"}
    random_p = [s["metrics"][m]["glrt_replications_random"]["p_value"] for m in s["responses"]]
    glrt_p = [s["metrics"][m]["glrt"]["p_value"] for m in s["responses"]]
    assert [row["p_value"] for row in fam["runs_random"]] == pytest.approx(random_p, rel=1e-9)
    # an F test's p is stated at 4 significant digits, so is its Holm value
    assert [row["p_holm"] for row in fam["runs_random"]] == pytest.approx(holm_by_hand(random_p), rel=1e-3)
    assert [row["p_holm"] for row in fam["runs_as_replications"]] == pytest.approx(holm_by_hand(glrt_p), rel=1e-9)
    for rows in fam.values():
        assert [row["differ"] for row in rows] == [row["p_holm"] < 0.05 for row in rows]
    assert any(v.startswith("Holm across the 3 metrics, runs as a random effect") for v in s["verdict"])
    # 1 - score mirrors score: the same ASO verdict with lower is better
    assert s["metrics"]["error"]["aso"]["new"]["winner"] == s["metrics"]["score"]["aso"]["new"]["winner"] == "new"


def test_metric_options_are_checked(three_seeds):
    with pytest.raises(VRSError, match="not among the responses"):
        analyze(three_seeds, ["score"], "system", "item", lower_is_better=["ter"])
    one = analyze(three_seeds, ["score"], "system", "item", replications=["seed"], n_resamples=99)
    assert "metrics" not in one.data and "aso" in one.data   # one metric: the single layout


def test_three_systems_pairwise_readings_use_small_sample_df():
    """Issue 28: with three systems every pair gets a row of the runs-random reading (t on Kenward-Roger df,
    Tukey-adjusted on those df) and the family-wise decision is one sentence; the balanced subset of the emmeans
    reference log (tests/reference/pairwise_df.R's data, the items every system has) is analysed, and each row's t,
    df and p are the contrast's own, its decision p < alpha."""
    d = pd.read_csv(REF / "pairwise_three_systems.csv.gz")
    counts = d.groupby("item")["score"].count()
    d = d[d["item"].isin(counts[counts == counts.max()].index)]
    r = analyze(d, "score", "system", "item", replications=["run"], n_resamples=99)
    c = r.fits.comparison_random.contrasts.set_index("contrast")
    rows = r.fits.readings[r.fits.readings["kind"] == "random"].iloc[1:]  # the first row: the F test of all systems
    assert sorted(rows["comparison"]) == ["B vs A", "C vs A", "C vs B"]
    for _, row in rows.iterrows():
        b, a = row["comparison"].split(" vs ")
        ref = c.loc[f"{a} - {b}"]
        assert row["test"] == "Tukey-adjusted contrast (t, Kenward-Roger df)"
        assert row["statistic"] == ref["t"] and row["p_value"] == ref["p_value"]
        assert float(row["df"]) == pytest.approx(ref["df"], rel=1e-3)
        assert row["differ"] == (ref["p_value"] < r.fits.alpha)
    line = next(v for v in r.verdict if v.startswith("Pairwise, runs random"))
    assert f"{int((c['p_value'] < r.fits.alpha).sum())} of 3 pairs differ" in line and "family-wise" in line


def test_a_separated_system_among_three_is_not_estimable_never_no_difference():
    """Issue 39 (4): with S2 all correct among three systems its contrasts are not computed; the pairwise sentence
    says "not estimable (S2 all correct)" for them and counts them apart, the readings table leaves their decision
    empty (None, not False), and no disagreement sentence quotes p = nan."""
    import warnings

    from vrs_helpers.evaluate.analysis import analyze

    rng = np.random.default_rng(3)
    d = pd.DataFrame([{"system": f"S{s}", "seed": r, "item": i,
                       "score": 1 if s == 2 else int(rng.random() < 0.6)}
                      for s in range(3) for r in range(3) for i in range(60)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = analyze(d, "score", "system", "item", replications=["seed"], n_resamples=99, n_sim=19)
    line = next(v for v in a.verdict if v.startswith("Pairwise, runs random"))
    assert "S0 - S2: not estimable (S2 all correct)" in line and "S1 - S2: not estimable (S2 all correct)" in line
    assert "2 not estimable" in line and "S0 - S2: no difference" not in line and "nan" not in line
    readings = a.fits.readings
    s2 = readings[readings["comparison"].str.contains("S2") & readings["kind"].isin(["replications", "random"])]
    assert len(s2) and s2["differ"].isna().all() and s2["criterion"].str.startswith("not estimable").all()
    assert not any("nan" in s for s in a.disagreements)
    # every number of a not-estimable pair is blank, its intervals in accuracy points too (issue 38's columns)
    pairs = pd.DataFrame(a.data["pairs"]).set_index("contrast")
    blank = [c for c in ("lower", "upper", "difference", "difference_low", "difference_high", "SE_given_theta")
             if c in pairs]
    assert len(blank) >= 5 and pairs.loc[["S0 - S2", "S1 - S2"], blank].isna().all().all()
    assert pairs.loc["S0 - S1", ["difference", "p_value"]].notna().all()
    # the pair left is compared without S2, its own family (the bootstrap LRT of S0 and S1), and a note says so
    assert any("compared without S2" in n for n in a.notes)
