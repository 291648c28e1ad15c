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
