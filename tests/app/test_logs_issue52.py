"""Issue 52: real logs, second round - a pooled model that is not identified never ends the run, tasks too small
to test and tasks with one model are described (never a p-value verdict), an Inspect log without samples is named,
an Inspect scorer is its task's metric whatever its name, and 3+ models get the best model and those tied with it.
Every fixture is written here by the harness writers of :mod:`vrs_helpers.evaluate.logs.readers.writers` (lm-eval
files field by field; Inspect logs by ``inspect_ai.eval`` with ``mockllm``)."""

import json

import pandas as pd
import pytest

from vrs_helpers.app import cli
from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_lm_eval


def _run(tmp_path, capsys, folder, *extra):
    code = cli.main(["analyze", str(folder), "--out", str(tmp_path / "r"), *extra])
    out, err = capsys.readouterr()
    summary = tmp_path / "r" / "summary.json"
    return code, out, err, (json.loads(summary.read_text()) if code == 0 else None)


def test_disjoint_model_pairs_skip_the_pooled_model(tmp_path, capsys):
    """gsm8k compares m1 and m2, two other tasks m3 and m4 (the published lm-eval logs of the issue): task + system
    is rank deficient, so no pooled model; every task keeps its verdict, exit 0, the reason in the notes and the
    report."""
    a = simulate_binary(seed=1, systems=("m1", "m2"), tasks=("gsm8k",), items=40, accuracy=(0.5, 0.7))
    b = simulate_binary(seed=2, systems=("m3", "m4"), tasks=("chem", "health"), items=40, accuracy=(0.5, 0.6))
    write_lm_eval(pd.concat([a, b]), tmp_path / "logs")
    code, out, err, s = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 0, err
    assert {r["task"] for r in s["tasks"]} == {"gsm8k", "chem", "health"}
    assert all(r["p_value"] is not None and r["status"] == "analysed" for r in s["tasks"])
    assert s["pooled"] is None
    assert "different systems" in s["pooled_skipped"] and "confounded" in s["pooled_skipped"]
    assert any(n.startswith("no pooled model over the tasks: the tasks compare different systems") for n in s["notes"])
    html = (tmp_path / "r" / "report.html").read_text()
    assert "No pooled model over the tasks" in html
    assert "no pooled model" in out


def test_same_systems_still_pool(tmp_path, capsys):
    t = simulate_binary(seed=3, systems=("m1", "m2"), tasks=("t1", "t2"), items=40)
    write_lm_eval(t, tmp_path / "logs")
    code, _, err, s = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 0, err
    assert s["pooled"] is not None and s["pooled_skipped"] is None


def test_two_items_are_not_testable(tmp_path, capsys):
    """2 items: the exact test's smallest mid-p is 0.25 > alpha (even with every item won by one model): "not
    testable", no p-value verdict, each model's accuracy still in the leaderboard."""
    t = simulate_binary(seed=2, systems=("m1", "m2"), tasks=("tiny",), items=2, accuracy=(0.02, 0.98), item_sd=0,
                        system_item_sd=0)
    write_lm_eval(t, tmp_path / "logs")
    code, out, err, s = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 0, err
    (row,) = s["tasks"]
    assert row["status"].startswith("not testable: 2 items cannot give p < 0.05")
    assert row["p_value"] is None and row["decision"] == row["status"]
    assert "no significant difference" not in out and "p = 0.5" not in out
    board = s["leaderboards"]["tiny"]["rows"]
    means = t.groupby("system")["score"].mean()
    assert {r["system"]: r["estimate"] for r in board} == pytest.approx(means.to_dict(), abs=1e-9)


def test_one_model_per_task_is_described(tmp_path, capsys):
    a = simulate_binary(seed=1, systems=("m1",), tasks=("gsm8k",), items=40, accuracy=(0.5,))
    b = simulate_binary(seed=2, systems=("m2",), tasks=("chem",), items=30, accuracy=(0.6,))
    t = pd.concat([a, b])
    write_lm_eval(t, tmp_path / "logs")
    code, out, err, s = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 0, err
    assert s["answer"].startswith("Nothing is compared: every task was run by one model only")
    from statsmodels.stats.proportion import proportion_confint

    rows = {(r["task"], r["system"]): r for r in s["one_model_tasks"]}
    assert set(rows) == {("gsm8k", "m1"), ("chem", "m2")}
    for (task, system), r in rows.items():
        y = t[(t["task"] == task) & (t["system"] == system)]["score"]
        lo, hi = proportion_confint(int(y.sum()), len(y), method="wilson")
        assert r["estimate"] == pytest.approx(y.mean(), abs=1e-9)   # summary.json keeps 10 digits
        assert (r["ci_low"], r["ci_high"]) == pytest.approx((lo, hi), abs=1e-9)
        assert r["logged"] == pytest.approx(y.mean(), abs=1e-9)     # lm-eval's own acc, read from its results file
    assert "Tasks run by one model: nothing compared" in (tmp_path / "r" / "report.html").read_text()
