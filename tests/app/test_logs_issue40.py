"""Issue 40's defects, each a test that fails on the main branch before it: tasks with differently named metrics
are each analysed with their own (and a task not analysed is a console line), a degenerate task is "not testable"
while the run goes on, HELM's evaluation split is the task and never a bookkeeping stat its metric, Every Eval
Ever's results of one evaluation are metrics of one task, our aggregates are checked against the logged ones (percent
scale, trimmed samples, identical runs), a 3-item task is decided by an exact test, and item ids sort as numbers.
Every expected number is computed here from the simulated table (an independent computation) or in closed form."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from vrs_helpers.app import cli
from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_every_eval_ever, write_helm, write_lm_eval


def _run(capsys, *args):
    code = cli.main(["analyze", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def _helm_two_metrics(tmp_path):
    a = simulate_binary(1, tasks=("boolq",), items=40, accuracy=(0.5, 0.8))
    b = simulate_binary(2, tasks=("squad",), items=40, accuracy=(0.5, 0.8))
    write_helm(a, tmp_path, metric="exact_match")
    write_helm(b, tmp_path, metric="f1_score")
    return a, b


def test_each_task_is_analysed_with_its_own_metric(tmp_path, capsys):   # defect 1
    a, b = _helm_two_metrics(tmp_path)
    code, out, err = _run(capsys, tmp_path / "benchmark_output", "--out", tmp_path / "r")
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    rows = {r["task"]: r for r in s["tasks"]}
    assert rows["boolq"]["metric"] == "exact_match" and rows["squad"]["metric"] == "f1_score"
    assert rows["squad"]["status"] == "analysed" and np.isfinite(rows["squad"]["p_value"])
    for task, truth in (("boolq", a), ("squad", b)):   # each task's means are its own metric's
        for system, part in truth.groupby("system"):
            assert rows[task][f"mean[{system}]"] == pytest.approx(part["score"].mean(), abs=1e-9)
    assert "Analysed: boolq (exact_match); squad (f1_score)." in out


def test_response_names_a_metric_per_task_and_a_task_without_it_is_a_console_line(tmp_path, capsys):
    _helm_two_metrics(tmp_path)
    code, out, err = _run(capsys, tmp_path / "benchmark_output", "--out", tmp_path / "r", "--response",
                          "exact_match")
    assert code == 0, err
    assert "Task squad: not analysed: it has no metric exact_match" in out
    assert "Primary metric: f1_score" not in out
    code, out, err = _run(capsys, tmp_path / "benchmark_output", "--out", tmp_path / "r2", "--response",
                          "squad=num_train_instances", "boolq=exact_match")
    assert code == 0, err
    s = json.loads((tmp_path / "r2" / "summary.json").read_text())
    assert {r["task"]: r["metric"] for r in s["tasks"]} == {"boolq": "exact_match", "squad": "num_train_instances"}
    assert "Task squad (num_train_instances): not testable:" in out
    code, out, err = _run(capsys, tmp_path / "benchmark_output", "--out", tmp_path / "r3", "--response",
                          "squad=acc")
    assert code == 2 and "task 'squad' has no metric 'acc'; its metrics:" in err and "Traceback" not in err


def test_a_constant_task_is_not_testable_and_the_run_goes_on(tmp_path, capsys):   # defect 2
    truth = simulate_binary(4, tasks=("good", "allright"), items=40)
    truth.loc[truth["task"] == "allright", "score"] = 1.0
    write_every_eval_ever(truth, tmp_path / "eee")
    code, out, err = _run(capsys, tmp_path / "eee", "--out", tmp_path / "r")
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    rows = {(r["task"], r["metric"]): r for r in s["tasks"]}
    assert rows[("allright", "score")]["status"].startswith("not testable: ")
    assert "constant" in rows[("allright", "score")]["status"]
    assert rows[("good", "score")]["status"] == "analysed"
    assert "Task allright (score): not testable:" in out
    # Holm over the one task tested: its adjusted p equals its p
    assert rows[("good", "score")]["p_adjusted"] == pytest.approx(rows[("good", "score")]["p_value"])
    # nothing testable: exit 2, each reason named
    only = truth[truth["task"] == "allright"]
    write_every_eval_ever(only, tmp_path / "bad")
    code, out, err = _run(capsys, tmp_path / "bad", "--out", tmp_path / "r2")
    assert code == 2 and "No task is testable" in err and "constant" in err
    assert "Read " in out   # what was read is said before the error (defect 5)


def _helm_splits(tmp_path):
    """A HELM run whose test split has 30 instances and whose valid split has one instance scored 0, plus the
    bookkeeping stat num_references (2 for every instance)."""
    truth = simulate_binary(7, tasks=("mmlu",), items=30, accuracy=(0.4, 0.8))
    (_folder, *_), = [write_helm(truth, tmp_path)]
    for run in Path(tmp_path, "benchmark_output", "runs").glob("*/*"):
        stats_ = json.loads((run / "per_instance_stats.json").read_text())
        for e in stats_:
            e["stats"].append({"name": {"name": "num_references", "split": "test"}, "count": 1, "sum": 2,
                               "sum_squared": 4, "min": 2, "max": 2, "mean": 2, "variance": 0, "stddev": 0})
        stats_.append({"instance_id": "valid-1", "train_trial_index": 0, "stats": [
            {"name": {"name": "exact_match", "split": "valid"}, "count": 1, "sum": 0, "sum_squared": 0, "min": 0,
             "max": 0, "mean": 0, "variance": 0, "stddev": 0}]})
        (run / "per_instance_stats.json").write_text(json.dumps(stats_))
    return truth


def test_helm_evaluation_split_is_the_task(tmp_path, capsys):   # defects 2 and 6 (HELM)
    truth = _helm_splits(tmp_path)
    code, out, err = _run(capsys, tmp_path / "benchmark_output", "--out", tmp_path / "r")
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert [r["task"] for r in s["tasks"]] == ["mmlu"] and s["tasks"][0]["metric"] == "exact_match"
    assert s["tasks"][0]["n_items"] == 30
    assert any("valid" in n and "left out" in n for n in s["read"]["notes"])
    for system, part in truth.groupby("system"):
        assert s["tasks"][0][f"mean[{system}]"] == pytest.approx(part["score"].mean(), abs=1e-9)


def test_a_helm_scenario_without_an_accuracy_metric_asks_for_response(tmp_path, capsys):
    truth = simulate_binary(8, tasks=("count",), items=20)
    write_helm(truth, tmp_path, metric="num_references")
    code, out, err = _run(capsys, tmp_path / "benchmark_output", "--out", tmp_path / "r")
    assert code == 2 and "no accuracy-like metric (its metrics: num_train_instances, num_references)" in err
    assert "--response 'count=METRIC'" in err


def test_a_3_item_task_is_decided_by_the_exact_mcnemar_test(tmp_path, capsys):   # defect 4
    truth = simulate_binary(3, tasks=("t1", "t2"), items=3)
    for t in ("t1", "t2"):   # model-b right on every item, model-a wrong on every item
        truth.loc[(truth["task"] == t), "score"] = (truth.loc[truth["task"] == t, "system"] == "model-b") * 1.0
    write_every_eval_ever(truth, tmp_path / "eee")
    code, out, err = _run(capsys, tmp_path / "eee", "--out", tmp_path / "r", "--response", "score")
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    for row in s["tasks"]:
        # 3 discordant items all one way: McNemar's exact mid-p = 2 P(X <= 0) - P(X = 0), X ~ Bin(3, 1/2) = 0.125,
        # the smallest 3 items can give: above alpha, so the task is not testable (issue 52), never a p-value verdict
        smallest = 2 * stats.binom.cdf(0, 3, 0.5) - stats.binom.pmf(0, 3, 0.5)
        assert smallest == pytest.approx(0.125)
        assert row["status"].startswith("not testable: 3 items cannot give p < 0.05") and row["p_value"] is None
        assert row["decision"] == row["status"]
    # pooled: 6 items, all discordant one way: mid-p = 2 * 0.5**6 - 0.5**6
    assert s["pooled"]["p_value"] == pytest.approx(0.5 ** 6) and s["pooled"]["method"].startswith("exact McNemar")


def test_eee_results_of_one_evaluation_are_metrics_of_one_task(tmp_path, capsys):   # defect 6 (EEE)
    truth = simulate_binary(9, tasks=("hellaswag",), items=40)
    write_every_eval_ever(truth, tmp_path / "eee")
    files = sorted((tmp_path / "eee").rglob("*.jsonl"))
    for f in files:   # the converter links each item to two results: acc and acc_norm
        recs = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
        out = []
        for r in recs:
            out += [{**r, "evaluation_result_id": "acc"}, {**r, "evaluation_result_id": "acc_norm"}]
        f.write_text("".join(json.dumps(r) + "\n" for r in out))
    code, out, err = _run(capsys, tmp_path / "eee", "--out", tmp_path / "r")
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["read"]["tasks"] == ["hellaswag"]
    assert s["tasks"][0]["n_items"] == 40


def _lm_eval_logged(tmp_path, edit):
    truth = simulate_binary(12, tasks=("arc",), items=40, runs=2, run_sd=0.3)
    write_lm_eval(truth, tmp_path / "lm")
    for f in sorted((tmp_path / "lm").rglob("results_*.json")):
        r = json.loads(f.read_text())
        edit(f, r)
        f.write_text(json.dumps(r))
    return truth


def test_percent_scaled_aggregates_are_named(tmp_path, capsys):   # defect 3
    def percent(_, r):
        r["results"]["arc"]["acc,none"] *= 100
    _lm_eval_logged(tmp_path, percent)
    code, out, err = _run(capsys, tmp_path / "lm", "--out", tmp_path / "r")
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert all(r["status"].startswith("differs: percent scale") for r in s["checked_against_logs"])
    assert "WARNING:" in out and "percent scale" in out


def test_trimmed_samples_are_named(tmp_path, capsys):
    def trimmed(_, r):
        r["n-samples"]["arc"]["effective"] = 100
        r["results"]["arc"]["acc,none"] += 0.05
    _lm_eval_logged(tmp_path, trimmed)
    code, out, err = _run(capsys, tmp_path / "lm", "--out", tmp_path / "r")
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert all("trimmed samples (the harness counted 100 items; the per-item records hold 40)" in r["status"]
               for r in s["checked_against_logs"])


def test_equal_aggregates_pass(tmp_path, capsys):
    _lm_eval_logged(tmp_path, lambda f, r: None)
    code, out, err = _run(capsys, tmp_path / "lm", "--out", tmp_path / "r")
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert code == 0 and {r["status"] for r in s["checked_against_logs"]} == {"equal"} and "WARNING" not in out


def test_identical_runs_with_differing_aggregates_are_named(tmp_path, capsys):
    truth = simulate_binary(12, tasks=("arc",), items=40, runs=2)
    first = truth[truth["run"] == truth["run"].min()]
    copy = pd.concat([first, first.assign(run=truth["run"].max())], ignore_index=True)   # run 2 = run 1's items
    write_lm_eval(copy, tmp_path / "lm")
    for k, f in enumerate(sorted((tmp_path / "lm").rglob("results_*.json"))):
        r = json.loads(f.read_text())
        r["results"]["arc"]["acc,none"] += 0.1 * k   # but the aggregates differ
        f.write_text(json.dumps(r))
    code, out, err = _run(capsys, tmp_path / "lm", "--out", tmp_path / "r")
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert any("identical runs" in r["status"] for r in s["checked_against_logs"])


def test_missing_items_are_listed_in_numeric_order():   # defect 5
    from vrs_helpers.evaluate.tables.scores import InputError, validate

    d = pd.DataFrame([{"system": s, "item": str(i), "score": float(i % 2)} for s in "AB" for i in range(12)
                      if not (s == "B" and i in (3, 4, 10))])
    with pytest.raises(InputError, match=r"e\.g\. 3, 4, 10\)"):
        validate(d, response="score", system="system", item="item")


FIX = Path(__file__).resolve().parents[1] / "fixtures" / "harness_written"


def test_an_inspect_log_without_samples_is_named_as_such(tmp_path, capsys):   # defect 5
    pytest.importorskip("inspect_ai")
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(sorted((FIX / "inspect" / "logs").glob("*.eval"))[0]))
    log.samples = None
    write_eval_log(log, str(tmp_path / "logs" / "header.json"), format="json")
    code, out, err = _run(capsys, tmp_path / "logs", "--out", tmp_path / "r")
    assert code == 2 and "hold no samples" in err and "not an Inspect log" not in err
    # keys in another order (other writers, e.g. the R package vitals): still an Inspect log
    d = json.loads((tmp_path / "logs" / "header.json").read_text())
    d = {"eval": d.pop("eval"), **d}
    (tmp_path / "logs" / "header.json").write_text(json.dumps(d, indent=2))
    code, out, err = _run(capsys, tmp_path / "logs", "--out", tmp_path / "r")
    assert code == 2 and "hold no samples" in err and "--no-log-samples" in err


def test_systems_on_disjoint_tasks_are_named_per_task(tmp_path, capsys):   # defect 5
    a = simulate_binary(5, systems=("model-a",), tasks=("t1",), items=40, accuracy=(0.6,))
    b = simulate_binary(6, systems=("model-b",), tasks=("t2",), items=40, accuracy=(0.6,))
    write_every_eval_ever(pd.concat([a, b], ignore_index=True), tmp_path / "eee")
    code, out, err = _run(capsys, tmp_path / "eee", "--out", tmp_path / "r")   # issue 52: described, exit 0
    assert code == 0, err
    assert "Task t1 (score): not testable: one system (model-a)" in out
    assert "Task t2 (score): not testable: one system (model-b)" in out and "Read " in out
    assert "Nothing is compared" in out


def test_response_with_two_metrics_analyses_each_task_that_has_one(tmp_path, capsys):   # defect 6 (lm-eval)
    _helm_two_metrics(tmp_path)
    code, out, err = _run(capsys, tmp_path / "benchmark_output", "--out", tmp_path / "r", "--response",
                          "exact_match", "f1_score")
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert {r["task"]: r["metric"] for r in s["tasks"]} == {"boolq": "exact_match", "squad": "f1_score"}
    assert all(r["status"] == "analysed" for r in s["tasks"])


def test_a_task_whose_systems_lack_items_is_analysed_on_the_shared_items(tmp_path, capsys):   # defect 5
    truth = simulate_binary(13, tasks=("t",), items=40)
    drop = (truth["system"] == "model-b") & truth["item"].isin(["3", "4", "10"])
    write_every_eval_ever(truth[~drop], tmp_path / "eee")
    code, out, err = _run(capsys, tmp_path / "eee", "--out", tmp_path / "r")
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["tasks"][0]["n_items"] == 37
    assert ("task t: not every system has every item (model-b lacks 3: 3, 4, 10); it is analysed on the items "
            "every system has.") in s["read"]["notes"]
    shared = truth[~truth["item"].isin(["3", "4", "10"])]
    for system, part in shared.groupby("system"):
        assert s["tasks"][0][f"mean[{system}]"] == pytest.approx(part["score"].mean(), abs=1e-9)
