"""Logs the harnesses wrote themselves (tests/fixtures/harness_written, README there: commands and versions), read
with no options: every per-run accuracy and standard error we reproduce equals the harness's own aggregate file
(read here as plain JSON, or by inspect_ai's own reader), 1e-9; every task appears in the task table."""

import json
from pathlib import Path

import pytest

from vrs_helpers.app import cli

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "harness_written"


def _summary(tmp_path, capsys, folder):
    code = cli.main(["analyze", str(folder), "--out", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads((tmp_path / "r" / "summary.json").read_text()), out


def _ours(s):
    return {(r["system"], r["task"]): r for r in s["checked_against_logs"]}


def test_lm_eval_0_4_13(tmp_path, capsys):
    s, out = _summary(tmp_path, capsys, FIX / "lm_eval" / "out")
    rows = s["checked_against_logs"]
    logged = []
    for f in sorted((FIX / "lm_eval" / "out").rglob("results_*.json")):
        r = json.loads(f.read_text())
        seed = r["config"]["random_seed"]
        for task, res in r["results"].items():
            metric = next(k.split(",")[0] for k in res if "," in k and "_stderr" not in k)
            logged.append((r["model_name"], task, seed, res[f"{metric},none"], res[f"{metric}_stderr,none"]))
    assert len(logged) == len(rows) == 12
    for model, task, seed, value, se in logged:
        (row,) = [r for r in rows if r["system"] == model and r["task"] == task and r["run"].endswith(f"={seed}")]
        assert abs(row["ours"] - value) < 1e-9 and abs(row["stderr_ours"] - se) < 1e-9 and row["status"] == "equal"
    assert {r["task"] for r in s["tasks"]} == {"toy_mc", "toy_gen"}
    assert {r["task"]: r["metric"] for r in s["tasks"]} == {"toy_mc": "acc", "toy_gen": "exact_match"}
    assert "WARNING" not in out


def test_inspect_mockllm(tmp_path, capsys):
    pytest.importorskip("inspect_ai")
    from inspect_ai.log import read_eval_log

    s, _ = _summary(tmp_path, capsys, FIX / "inspect" / "logs")
    ours = _ours(s)
    files = sorted((FIX / "inspect" / "logs").glob("*.eval"))
    assert len(files) == len(ours) == 4
    for f in files:
        log = read_eval_log(str(f), header_only=True)
        (score,) = log.results.scores
        row = ours[(log.eval.model, log.eval.task)]
        assert abs(row["ours"] - score.metrics["accuracy"].value) < 1e-9
        assert abs(row["stderr_ours"] - score.metrics["stderr"].value) < 1e-9 and row["status"] == "equal"
    assert {r["task"]: r["metric"] for r in s["tasks"]} == {"yes_no": "includes", "echo": "match"}


def test_every_eval_ever_0_3_0(tmp_path, capsys):
    s, _ = _summary(tmp_path, capsys, FIX / "every_eval_ever" / "data")
    rows = s["checked_against_logs"]
    aggregates = sorted(p for p in (FIX / "every_eval_ever" / "data").rglob("*.json"))
    assert len(aggregates) == len(rows) == 12
    for f in aggregates:
        a = json.loads(f.read_text())
        (res,) = a["evaluation_results"]
        (row,) = [r for r in rows if r["run"] == f"evaluation_id={a['evaluation_id']}"]
        assert abs(row["ours"] - res["score_details"]["score"]) < 1e-9
        assert abs(row["stderr_ours"] - res["score_details"]["uncertainty"]["standard_error"]["value"]) < 1e-9
        assert row["status"] == "equal"
    assert {r["task"] for r in s["tasks"]} == {"toy_mc", "toy_gen"}


def test_helm_0_5_16_simple_model(tmp_path, capsys):
    """crfm-helm's own simple model on two of its simple scenarios, 2 train trials: our mean over trials and the SD
    of the trial means equal stats.json's (its simple model scores 0 everywhere, and there is one model, so no
    task is testable: vrs analyze says why, exit 2)."""
    from vrs_helpers.evaluate.logs.harness_stats import harness_numbers
    from vrs_helpers.evaluate.logs.log_checks import check_against_logs
    from vrs_helpers.evaluate.logs.readers import load_eval_logs

    root = FIX / "helm" / "benchmark_output"
    logs = load_eval_logs(root)
    assert logs.description.task_primary == {"simple_classification": "exact_match", "simple_mcqa": "exact_match"}
    checked = check_against_logs(harness_numbers(logs, "exact_match").assign(metric="exact_match"), logs.reported,
                                 logs.table)
    for f in sorted(root.rglob("stats.json")):
        task = json.loads((f.parent / "run_spec.json").read_text())["name"].split(":")[0]
        (stat,) = [s for s in json.loads(f.read_text()) if s["name"]["name"] == "exact_match"
                   and s["name"].get("split") == "test" and not s["name"].get("perturbation")
                   and not s["name"].get("sub_split")]
        (row,) = checked[(checked["task"] == task) & (checked["run"] == "all")].to_dict(orient="records")
        assert abs(row["ours"] - stat["mean"]) < 1e-9 and abs(row["stderr_ours"] - stat["stddev"]) < 1e-9
        assert row["status"] == "equal"
    code = cli.main(["analyze", str(root), "--out", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert code == 2 and "No task is testable" in err and "constant" in err and "Traceback" not in err
