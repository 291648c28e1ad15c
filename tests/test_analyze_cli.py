"""`vrs analyze`: the book's MT data exported to CSV gives Table 4.1's GLRT and Table 4.3's p-values; bad input
exits 2 with a message naming the problem; a failed run leaves a previous report untouched."""

import json

import nbformat
import numpy as np
import pandas as pd
import pytest

from conftest import requires_data
from vrs_helpers import cli, runner
from vrs_helpers.data import book_table, load

# book Table 4.3 (Tukey p-values per source-length class), as printed; "< 0.0001" means p <= 0.0001
BOOK_43 = {(cls, pair): p for cls, row in book_table("significance_4_3")["table_4_3"].items()
           for pair, p in row.items()}


def _within_printed(printed: str, value: float) -> bool:
    if printed == "< 0.0001":
        return 0 <= value <= 0.0001
    return abs(value - float(printed)) <= 0.5 * 10.0 ** -len(printed.split(".")[1])


@requires_data
def test_book_data_through_vrs_analyze(tmp_path, capsys):
    ter = load("mt_ter")
    x = ter["src_length"].astype(float)
    ter["length_class"] = np.select([x <= 15, x <= 55], ["short", "typical"], "very long")
    csv = tmp_path / "data_ter.csv"
    ter.to_csv(csv, index=False)
    out = tmp_path / "report"
    code = cli.main(["analyze", str(csv), "--response", "ter", "--system", "system", "--item", "sentence_id",
                     "--replication", "replication", "--property", "length_class", "--out", str(out),
                     "--n-resamples", "999"])
    assert code == 0, capsys.readouterr().err
    assert {p.name for p in out.iterdir()} == {"report.html", "report.ipynb", "summary.json", "mathjax"}
    from vrs_helpers.report import external_resources

    assert external_resources((out / "report.html").read_text(encoding="utf-8")) == []  # offline: no CDN
    assert (out / "mathjax" / "MathJax.js").is_file()
    s = json.loads((out / "summary.json").read_text())
    assert s["glrt"]["df"] == 2 and s["glrt"]["p_value"] <= 0.0001          # Table 4.1: "< 0.0001"
    rows = s["conditional_contrasts"]["length_class"]
    assert len(rows) == 9
    for r in rows:
        assert _within_printed(BOOK_43[(r["length_class"], r["contrast"])], r["p_value"]), r
    assert s["verdict"] and "report:" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--response", "scor", "--system", "system", "--item", "item"], "Did you mean 'score'"),
    (["--response", "score", "--system", "system", "--item", "item"], "repeat a (system, run, item)"),
    (["--response", "score", "--system", "system", "--item", "item", "--replication", "seed", "--baseline", "X"],
     "baseline 'X' is not a level"),
])
def test_bad_input_exits_2_and_keeps_the_previous_report(tmp_path, capsys, args, message):
    rng = np.random.default_rng(1)
    df = pd.DataFrame([{"system": s, "seed": r, "item": i, "score": rng.normal()}
                       for s in "AB" for r in range(3) for i in range(10)])
    csv = tmp_path / "s.csv"
    df.to_csv(csv, index=False)
    out = tmp_path / "report"
    out.mkdir()
    (out / "summary.json").write_text('{"previous": true}')
    assert cli.main(["analyze", str(csv), *args, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert (out / "summary.json").read_text() == '{"previous": true}'


def test_missing_file_and_empty_pattern_exit_2(tmp_path, capsys):
    assert cli.main(["analyze", str(tmp_path / "none.csv"), "--response", "y", "--item", "i"]) == 2
    assert "No file" in capsys.readouterr().err
    assert cli.main(["analyze", str(tmp_path / "runs/{system}/s.tsv"), "--response", "y", "--item", "i"]) == 2
    assert "matches no file" in capsys.readouterr().err


def test_failed_notebook_run_keeps_the_previous_report(tmp_path, capsys, monkeypatch):
    params = "\n".join(f"{k} = {v!r}" for k, v in runner.notebook_parameters(runner.analyze_notebook()).items())
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("raise RuntimeError('boom')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    broken = tmp_path / "broken.ipynb"
    nbformat.write(nb, broken)
    monkeypatch.setattr(runner, "analyze_notebook", lambda: broken)
    df = pd.DataFrame({"system": list("AABB"), "item": [1, 2, 1, 2], "score": [0.1, 0.2, 0.3, 0.5]})
    csv = tmp_path / "s.csv"
    df.to_csv(csv, index=False)
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.html").write_text("old")
    code = cli.main(["analyze", str(csv), "--response", "score", "--system", "system", "--item", "item",
                     "--out", str(out)])
    assert code == 1
    err = capsys.readouterr().err
    assert "boom" in err and "untouched" in err
    assert (out / "report.html").read_text() == "old" and sorted(p.name for p in out.iterdir()) == ["report.html"]
