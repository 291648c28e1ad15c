"""Issue 52: the judge-corrected difference with every label, humans labelling each system's outputs separately
(vrs_helpers.evaluate.tables.judge_labels). Checked against the paired PPI difference (equal label sets), the
per-system PPI means (its estimate is their difference), the spread of its estimates over simulated data sets (its
SE), and its level in the issue's layout (benchmarks/judge_label_sets.py; 5,000 nulls there, 1,500 here)."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vrs_helpers.evaluate.tables import judge as J
from vrs_helpers.evaluate.tables.judge_labels import ppi_difference_all_labels
from vrs_helpers.evaluate.tables.judged import analyze_judge

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from judge_label_sets import simulate  # noqa: E402


@pytest.mark.parametrize("seed", range(4))
def test_equal_label_sets_give_the_paired_ppi_difference(seed):
    rng = np.random.default_rng(seed)
    ja, jb, ha, hb = simulate(rng, 1, 300, 0.2, 0.0)
    ja, jb, ha, hb = ja[0], jb[0], ha[0], hb[0]
    lab = np.isfinite(ha)
    yb_all = np.where(np.isfinite(hb), hb, jb)      # B labelled on A's items (any values on the scale)
    hb = np.where(lab, yb_all, np.nan)
    got = ppi_difference_all_labels(ja, jb, ha, hb)
    want = J.ppi_difference(ha[lab], hb[lab], ja[lab], jb[lab], ja[~lab], jb[~lab], lam=1.0, small_sample=True)
    for k in ("estimate", "se", "df", "p_value", "lower", "upper"):
        assert getattr(got, k) == pytest.approx(getattr(want, k), rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("seed", range(4))
def test_the_difference_is_that_of_the_ppi_means(seed):
    rng = np.random.default_rng(10 + seed)
    ja, jb, ha, hb = (x[0] for x in simulate(rng, 1, 500, 0.2, 0.1))
    got = ppi_difference_all_labels(ja, jb, ha, hb)
    la, lb = np.isfinite(ha), np.isfinite(hb)
    ma = J.ppi_mean(ha[la], ja[la], ja[~la], lam=1.0, small_sample=True)
    mb = J.ppi_mean(hb[lb], jb[lb], jb[~lb], lam=1.0, small_sample=True)
    assert abs(got.estimate - (mb.estimate - ma.estimate)) < 1e-12


def test_its_se_is_the_spread_of_its_estimates():
    """Over 2,000 data sets of the issue's layout (2 x 2,000 items, 20 % labelled per system): the mean SE is
    within 5 % of the SD of the estimates (Monte-Carlo error of an SD over 2,000 draws: about 1.6 %), below the
    independent-sum SE of the two PPI means."""
    rng = np.random.default_rng(2052)
    est, se = [], []
    for _ in range(8):
        ja, jb, ha, hb = simulate(rng, 250, 2000, 0.2, 0.0)
        d = ppi_difference_all_labels(ja, jb, ha, hb)
        est.append(d.estimate)
        se.append(d.se)
    est, se = np.concatenate(est), np.concatenate(se)
    assert abs(se.mean() / est.std(ddof=1) - 1) < 0.05
    assert se.mean() <= 0.03


def test_level_in_the_issue_layout():
    """3,000 null data sets (the benchmark runs 5,000 on another stream: 0.0488): the rejection rate at 0.05 within
    the issue's band [0.035, 0.065] (this stream: 0.0437; Monte-Carlo SE about 0.004; its first 1,500 alone gave
    0.031, a binomial tail that 3,000 resolves)."""
    rng = np.random.default_rng(52)
    p = []
    for _ in range(12):
        p.append(ppi_difference_all_labels(*simulate(rng, 250, 2000, 0.2, 0.0)).p_value)
    rate = float(np.mean(np.concatenate(p) < 0.05))
    assert 0.035 <= rate <= 0.065, rate


def test_vrs_analyze_human_with_labels_per_system(tmp_path, capsys):
    """The issue's layout through ``vrs analyze --human``: the PPI difference in summary.json equals the difference
    of the PPI means it shows (1e-9), its SE is at most 0.03, and every label is counted."""
    import json

    from vrs_helpers.app import cli

    rng = np.random.default_rng(7)
    ja, jb, ha, hb = (x[0] for x in simulate(rng, 1, 2000, 0.2, 0.0))
    frame = pd.DataFrame({"system": ["A"] * 2000 + ["B"] * 2000, "item": [f"i{i}" for i in range(2000)] * 2,
                          "judge": np.r_[ja, jb], "human": np.r_[ha, hb]})
    frame.to_csv(tmp_path / "scores.csv", index=False)
    code = cli.main(["analyze", str(tmp_path / "scores.csv"), "--response", "judge", "--system", "system", "--item",
                     "item", "--human", "human", "--out", str(tmp_path / "r")])
    assert code == 0, capsys.readouterr().err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())["judge"]
    diff, means = s["differences"]["B"]["PPI"], s["means"]
    assert abs(diff["estimate"] - (means["B"]["PPI"]["estimate"] - means["A"]["PPI"]["estimate"])) < 1e-9
    assert diff["se"] <= 0.03
    assert s["labelled_items"] == {"A": int(np.isfinite(ha).sum()), "B": int(np.isfinite(hb).sum())}
    out = analyze_judge(frame, "judge", "system", "item", "human", ["A", "B"])
    assert out.differences["B"]["PPI"].n_labelled == int((np.isfinite(ha) | np.isfinite(hb)).sum())
