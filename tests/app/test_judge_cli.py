"""`vrs analyze --human` / `--human-labels` end to end (issue 43): the corrected verdict opens what the command
prints, the report's verdict box and summary.json["judge"]; a system name with markup is shown as text."""

import json

import numpy as np
import pandas as pd

from vrs_helpers.app import cli

HOSTILE = "B <i>$x$</i>"


def _frame(n_items=150, labelled=30, seed=1):
    rng = np.random.default_rng(seed)
    rows = []
    for k, s in enumerate(["A", HOSTILE]):
        truth = (rng.random(n_items) < 0.6).astype(float)
        judge = np.where(truth == 1, rng.random(n_items) > 0.05, rng.random(n_items) < 0.05 + 0.3 * k)
        rows += [{"system": s, "item": f"i{i}", "judge": float(judge[i]),
                  "human": truth[i] if i < labelled else np.nan} for i in range(n_items)]
    return pd.DataFrame(rows)


def test_vrs_analyze_human_column_and_labels_file(tmp_path, capsys):
    frame = _frame()
    frame.to_csv(tmp_path / "scores.csv", index=False)
    args = ["analyze", str(tmp_path / "scores.csv"), "--response", "judge", "--system", "system", "--item", "item"]
    assert cli.main([*args, "--human", "human", "--out", str(tmp_path / "r1")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("Corrected for the judge with human labels (prediction-powered inference")
    summary = json.loads((tmp_path / "r1" / "summary.json").read_text())
    assert summary["judge"]["labelled_items"] == {"A": 30, HOSTILE: 30}
    assert summary["answer"] == printed[0]
    page = (tmp_path / "r1" / "report.html").read_text(encoding="utf-8")
    first, naive = page.find("Corrected for the judge"), page.find("taken as the truth")
    assert 0 <= first < naive
    assert "<i>$x$</i>" not in page   # the system name is text, never markup
    # the same labels from a separate file give the same summary
    frame.drop(columns="human").to_csv(tmp_path / "judged.csv", index=False)
    frame.dropna(subset=["human"])[["system", "item", "human"]].to_csv(tmp_path / "labels.csv", index=False)
    args[1] = str(tmp_path / "judged.csv")
    assert cli.main([*args, "--human-labels", str(tmp_path / "labels.csv"), "--out", str(tmp_path / "r2")]) == 0
    again = json.loads((tmp_path / "r2" / "summary.json").read_text())
    assert again["judge"]["differences"] == summary["judge"]["differences"]


def test_vrs_plan_human_labels_solve_the_ppi_variance(capsys):
    """The labels printed for 2,000 items are the fewest n with (z_0.975 + z_0.8) sqrt(Var(n)) <= delta, Var(n) =
    sd^2/n (1 - rho^2 N/(N + n)), N = 2000 - n (written out here)."""
    import math

    from scipy import stats

    assert cli.main(["plan", "--items", "2000", "--delta", "0.05", "--human-sd", "0.6", "--judge-corr", "0.8"]) == 0
    row = capsys.readouterr().out.splitlines()[-1].split()
    n, human_only = int(row[1]), int(row[2])
    k = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    need = lambda m: k * math.sqrt(0.36 / m * (1 - 0.64 * (2000 - m) / 2000)) <= 0.05  # noqa: E731
    assert need(n) and not need(n - 1)
    assert human_only == math.ceil(0.36 * k ** 2 / 0.05 ** 2)


def test_vrs_plan_human_labels_bad_values_exit_2(capsys):
    assert cli.main(["plan", "--items", "500", "--delta", "0.05", "--human-sd", "0.6", "--judge-corr", "2"]) == 2
    assert "correlation must lie in [-1, 1]" in capsys.readouterr().err
    assert cli.main(["plan", "--items", "500", "--delta", "0.05", "--human-sd", "0.6"]) == 2
    assert "--judge-corr" in capsys.readouterr().err


def test_human_labels_with_logs_or_bad_numbers_exit_2(tmp_path, capsys):
    (tmp_path / "logs").mkdir()
    assert cli.main(["analyze", str(tmp_path / "logs"), "--human", "human", "--out", str(tmp_path / "r")]) == 2
    assert "correct a judge's scores in a score table" in capsys.readouterr().err
    assert cli.main(["plan", "--items", "500", "--delta", "0.05", "--human-sd", "abc", "--judge-corr", "0.5"]) == 2
    assert "--human-sd must be a number" in capsys.readouterr().err
    assert cli.main(["plan", "--items", "5x", "--delta", "0.05", "--human-sd", "0.5", "--judge-corr", "0.5"]) == 2
    assert "--items must be whole numbers" in capsys.readouterr().err
