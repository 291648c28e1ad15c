"""Several tasks of evaluation logs (evaluate/tasks.py): Holm and Benjamini-Hochberg by statsmodels, the per-task
LRT against fits written out here, the small-sample default where systems have runs, the pooled model's design, bad
tasks named before any fit, and p-values that underflow written as "< 1e-300"."""

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests

from vrs_helpers import mixed
from vrs_helpers.book.glrt import compare_systems
from vrs_helpers.evaluate.analysis import analyze, rounded
from vrs_helpers.evaluate.logs.readers import load_eval_logs
from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_every_eval_ever
from vrs_helpers.evaluate.logs.tasks import adjusted, analyze_logs, random_part, system_lrt, validate_tasks
from vrs_helpers.evaluate.tables.scores import InputError
from vrs_helpers.evaluate.tables.steps import verdict_text
from vrs_helpers.mixed.inference.ddf import contrast_test
from vrs_helpers.outcomes import p_text
from vrs_helpers.registry import SMALL_ITEMS, TestChoiceError, verdict_reading

REFERENCE = Path(__file__).resolve().parent.parent / "reference"


@settings(max_examples=30, deadline=None)   # statsmodels' multipletests costs ~20 ms a call here
@given(st.lists(st.one_of(st.floats(0, 1), st.just(float("nan"))), min_size=1, max_size=12))
def test_adjustments_are_statsmodels_multipletests_on_the_tasks_with_a_p_value(p):
    p = np.asarray(p, dtype=float)
    ok = np.isfinite(p)
    for ours, theirs in (("holm", "holm"), ("bh", "fdr_bh")):
        out = adjusted(p, ours)
        assert np.isnan(out[~ok]).all()
        if ok.any():
            np.testing.assert_allclose(out[ok], multipletests(p[ok], method=theirs)[1], rtol=1e-12, atol=1e-15)


def test_adjustments_match_r_p_adjust():
    # R: p.adjust(p, "holm") and p.adjust(p, "BH")
    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205]
    np.testing.assert_allclose(adjusted(p, "holm"), [0.008, 0.056] + [0.234] * 6, rtol=1e-12)
    np.testing.assert_allclose(adjusted(p, "bh"), [0.008, 0.032, 0.0672, 0.0672, 0.0672, 0.08, 0.0845714285714286,
                                                   0.205], rtol=1e-12)


def test_adjustment_keeps_missing_p_values_out_of_the_family():
    out = adjusted([0.01, np.nan, 0.04], "holm")
    assert np.isnan(out[1]) and out[0] == pytest.approx(0.02) and out[2] == pytest.approx(0.04)
    assert np.isnan(adjusted([np.nan, np.nan], "bh")).all()
    with pytest.raises(InputError, match="holm, bh"):
        adjusted([0.1], "bonferroni")


def test_underflowed_p_values_are_written_below_1e_300():
    assert p_text(0.0) == "< 1e-300" and p_text(1e-320) == "< 1e-300" and p_text(0.01234) == "0.0123"
    assert p_text(float("nan")) == "" and p_text(None) == ""
    assert rounded({"p_value": 0.0, "chi2": 5000.0}) == {"p_value": 0.0, "chi2": 5000.0, "p_value_text": "< 1e-300"}
    assert "p_value_text" not in rounded({"p_value": 0.5})
    assert verdict_text(0.0, 0.05) == "differ (p < 1e-300)"
    assert verdict_text(0.01, 0.05) == "differ (p = 0.01 < 0.05)"


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    truth = simulate_binary(21, tasks=("a", "b", "c"), items=40, runs=1, repeats=2, accuracy=(0.55, 0.7))
    out = tmp_path_factory.mktemp("eee")
    write_every_eval_ever(truth, out)
    return load_eval_logs(out)


def test_each_task_is_the_lrt_of_its_own_glmm(logs):
    a = analyze_logs(logs)
    assert list(a.tasks["task"]) == ["a", "b", "c"]
    for _, row in a.tasks.iterrows():
        d = logs.scores(task=row["task"])
        assert random_part(d) == "(1|item) + (1|system:item)" == row["random"]
        m1 = mixed.glmer("score ~ system + (1|item) + (1|system:item)", d)
        m0 = mixed.glmer("score ~ 1 + (1|item) + (1|system:item)", d)
        assert row["chi2"] == pytest.approx(2 * (m1.loglik - m0.loglik), abs=1e-6) and row["df"] == 1
    np.testing.assert_allclose(a.tasks["p_adjusted"], multipletests(a.tasks["p_value"], method="holm")[1])
    # the pooled model: task fixed, items nested in tasks
    d = pd.concat([logs.scores(task=t) for t in "abc"], ignore_index=True)
    d["item"] = d["task"] + ":" + d["item"]
    m1 = mixed.glmer("score ~ task + system + (1|item) + (1|system:item)", d)
    m0 = mixed.glmer("score ~ task + (1|item) + (1|system:item)", d)
    assert a.pooled["chi2"] == pytest.approx(2 * (m1.loglik - m0.loglik), abs=1e-6)
    assert len(a.verdict) == 5 and "Pooled over tasks" in a.verdict[-1]
    s = a.to_summary()
    assert {"tasks", "pooled", "harness", "miller", "paired", "mcnemar", "read"} <= set(s)


def test_gaussian_scores_are_compared_by_ml_fits():
    rng = np.random.default_rng(2)
    d = pd.DataFrame([{"system": s, "run": str(r), "item": f"i{i}", "score": rng.normal() + (s == "B")}
                      for s in "AB" for r in range(3) for i in range(15)])
    # run labels 0-2 in both systems: --runs auto (the default) reads them as shared, crossed runs
    assert system_lrt(d, "gaussian", test="chisq")["formula"] == \
        "score ~ system + (1|item) + (1|system:item) + (1|run) + (1|system:run)"
    test = system_lrt(d, "gaussian", runs="nested")
    f = "score ~ system + (1|item) + (1|system:item) + (1|system:run)"
    assert test["formula"] == f
    m1, m0 = mixed.fit(f, d, method="ML"), mixed.fit(f.replace("system +", "1 +"), d, method="ML")
    assert test["chi2"] == pytest.approx(2 * (m1.loglik - m0.loglik), abs=1e-6)
    # with runs the verdict is the runs-random reading's default test, exactly as compare_systems makes it for a
    # score table (issue 56), the chi-square LRT beside it; --test chisq makes the LRT the verdict again
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = compare_systems(d, "score", "system", "item", replications=["run"], runs="nested").test
    assert test["method"] == table.method and test["p_value"] == pytest.approx(table.p_value, rel=1e-12)
    kr = contrast_test(mixed.fit(f, d), np.array([[0.0, 1.0]]), "system", ddf="kenward-roger")
    named = system_lrt(d, "gaussian", test="kenward-roger", runs="nested")   # --test kenward-roger: the model's F
    assert named["method"] == kr.method and named["p_value"] == pytest.approx(kr.p_value, rel=1e-9)
    assert named["test"]["den_df"] == pytest.approx(kr.den_df, rel=1e-3)
    assert test["chi2_p_value"] != test["p_value"]
    chisq = system_lrt(d, "gaussian", test="chisq", runs="nested")
    assert chisq["p_value"] == chisq["chi2_p_value"] == pytest.approx(test["chi2_p_value"], rel=1e-12)
    # items fixed: no system-by-item term (these items)
    fixed = system_lrt(d, "gaussian", items="fixed", runs="nested")
    assert fixed["formula"] == "score ~ system + (1|item) + (1|system:run)"
    with pytest.raises(TestChoiceError, match="bootstrap"):
        system_lrt(d.assign(score=(d["score"] > 0.5).astype(float)), "binomial", test="kenward-roger")


def test_0_1_scores_with_runs_are_decided_by_the_linear_model_as_pbkrtest():
    """3 seeds per system, 0/1 scores, no test named: the Kenward-Roger F of the linear mixed model of the scores
    decides, as vrs analyze's runs-random reading; on the committed 12-system log it is pbkrtest's KRmodcomp of
    tests/reference/ranking_binary_lmm.R (lme4 1.1-31, pbkrtest 0.5.2; crossed seeds): F to 1e-5, p to 1e-4. The
    chi-square LRT of the GLMMs stays beside it."""
    import json

    ref = json.loads((REFERENCE / "ranking_binary_lmm.json").read_text())["kenward_roger"]
    d = pd.read_csv(REFERENCE / "ranking_binary.csv.gz").rename(columns={"seed": "run"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = system_lrt(d, "binomial")
    assert out["formula"] == "score ~ system + (1|item) + (1|system:item) + (1|run) + (1|system:run)"
    assert out["method"] == "F test, Kenward-Roger df (linear model of the 0/1 scores)"
    assert out["test"]["F"] == pytest.approx(ref["F"], rel=1e-5)
    assert out["p_value"] == pytest.approx(ref["p_value"], rel=1e-4)
    assert out["df"] == 11 and np.isfinite(out["chi2"])


def test_0_1_scores_with_runs_and_test_bootstrap_are_decided_by_the_parametric_bootstrap():
    """3 runs per system, ``test="bootstrap"``: the GLMMs' bootstrap LRT decides; its observed statistic is the
    chi-square LRT's."""
    d = simulate_binary(3, items=25, runs=3, run_sd=0.4)
    out = system_lrt(d, "binomial", test="bootstrap", n_sim=49, seed=5)
    assert out["method"].startswith("parametric bootstrap") and out["test"]["n_sim"] == 49
    assert out["test"]["chi2"] == pytest.approx(out["chi2"], rel=1e-9)
    # p = (c + 1) / (n_sim + 1) with c counted out of 49
    assert round(out["p_value"] * 50) == pytest.approx(out["p_value"] * 50, abs=1e-9)
    assert out["p_value"] == system_lrt(d, "binomial", test="bootstrap", n_sim=49, seed=5)["p_value"]   # seeded


def test_a_degenerate_task_is_named_before_any_fit_and_not_testable(tmp_path):
    truth = simulate_binary(4, tasks=("good", "allright"), items=20)
    truth.loc[truth["task"] == "allright", "score"] = 1.0
    write_every_eval_ever(truth, tmp_path)
    specs, skipped = validate_tasks(load_eval_logs(tmp_path))
    assert ("good", "score") in specs and ("allright", "score") not in specs
    assert any(e["task"] == "allright" and e["status"].startswith("not testable") and "constant" in e["status"]
               for e in skipped)


def test_missing_scores_within_a_task_need_dropna(tmp_path):
    truth = simulate_binary(6, tasks=("t",), items=20)
    write_every_eval_ever(truth, tmp_path)
    logs = load_eval_logs(tmp_path)
    logs.table.loc[logs.table["item"] == "3", logs.description.primary_metric] = np.nan   # item 3 failed
    with pytest.raises(InputError, match="task 't'.*2 missing value.*--dropna"):
        validate_tasks(logs)
    specs, _ = validate_tasks(logs, dropna=True)
    assert specs[("t", "score")].design.n_dropped_nan == 2 and specs[("t", "score")].design.n_items == 19


# --- issue 56: one rule for tables and logs ---------------------------------------------------------------------

def test_the_rule_of_tables_and_logs():
    """registry.verdict_reading: a named test; runs decide by the runs-random reading whatever the items; one run
    and fewer than 30 items by the exact test; else the GLRT."""
    assert SMALL_ITEMS == 30
    assert verdict_reading(True, 20, "bootstrap") == verdict_reading(False, 500, "chisq") == "named"
    assert verdict_reading(True, 5) == verdict_reading(True, 300) == "runs-random"
    assert verdict_reading(False, 29) == "exact" and verdict_reading(False, 30) == "glrt"


@pytest.mark.parametrize("runs", [3, 1])
def test_the_same_rows_as_a_table_and_as_logs_give_the_same_test_and_p(tmp_path, runs):
    """0/1 scores of 20 items (fewer than 30), with 3 runs (logs: a sign-flip test on item means on main, the
    table the linear model) and with one run: the task's verdict and vrs analyze's answer on the same rows name the
    same test and p (1e-12)."""
    write_every_eval_ever(simulate_binary(56, items=20, runs=runs, run_sd=0.3), tmp_path)
    logs = load_eval_logs(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = analyze_logs(logs).tasks.iloc[0]
        d = logs.scores(task=row["task"])[["system", "run", "item", "score"]]
        a = analyze(d, "score", "system", "item", replications=["run"] if runs > 1 else [], n_resamples=99)
    t = a.fits.random_test if runs > 1 else a.fits.exact
    assert row["method"] == t.method and row["p_value"] == pytest.approx(t.p_value, rel=1e-12, abs=1e-15)
    assert t.method.startswith("F test, Kenward-Roger df" if runs > 1 else "exact McNemar test (mid-p)")
    assert f"p = {t.p_value:.3g}" in a.answer
