"""`vrs analyze`: the book's MT data exported to CSV gives Table 4.1's GLRT and Table 4.3's p-values; bad input
exits 2 with a message naming the problem; a failed run leaves a previous report untouched."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import holm_by_hand, requires_data
from vrs_helpers.app import cli
from vrs_helpers.book.data import book_table, load

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
    assert {p.name for p in out.iterdir()} == {"report.html", "report.ipynb", "summary.json", "summary.txt"}
    from vrs_helpers.app.report import external_resources

    assert external_resources((out / "report.html").read_text(encoding="utf-8")) == []  # offline: loads nothing
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


def test_a_failure_while_the_report_is_written_keeps_the_previous_report(tmp_path, capsys, monkeypatch):
    """The report files are made in a private work folder and swapped in at the end: a failure on the way (here the
    notebook's writing) leaves the previous report as it was and no work folder in the temporary folder."""
    from vrs_helpers.evaluate.presentation import notebook

    def broken(result, fragment=None):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(notebook, "report_notebook", broken)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    csv = tmp_path / "s.csv"
    _log(n_items=6).to_csv(csv, index=False)
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.html").write_text("old")
    import tempfile

    tempfile.tempdir = None
    try:
        with pytest.raises(OSError, match="Input/output error"):
            cli.main(["analyze", str(csv), "--response", "score", "--system", "system", "--item", "item",
                      "--replication", "seed", "--n-resamples", "99", "--out", str(out)])
    finally:
        tempfile.tempdir = None
    assert (out / "report.html").read_text() == "old" and sorted(p.name for p in out.iterdir()) == ["report.html"]
    assert list((tmp_path / "tmp").iterdir()) == []


def test_an_error_of_the_analysis_produces_nothing(tmp_path, capsys, monkeypatch):
    """When the analysis itself fails its error is reported (exit 2, no traceback) and nothing is written: a
    previous report is untouched."""
    from vrs_helpers.evaluate import analysis
    from vrs_helpers.evaluate.tables.scores import InputError

    def failing(spec, **kwargs):
        raise InputError("the analysis failed here")

    monkeypatch.setattr(analysis, "analyze", failing)
    csv = tmp_path / "s.csv"
    _log(n_items=6).to_csv(csv, index=False)
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.html").write_text("old")
    code = cli.main(["analyze", str(csv), "--response", "score", "--system", "system", "--item", "item",
                     "--replication", "seed", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "the analysis failed here" in err and "Traceback" not in err
    assert (out / "report.html").read_text() == "old" and sorted(p.name for p in out.iterdir()) == ["report.html"]


def test_an_interruption_while_the_report_is_written_keeps_the_previous_one(tmp_path, capsys, monkeypatch):
    """Ctrl-C after the analysis, while the report is written: exit 130, the previous report as it was."""
    from vrs_helpers.evaluate.presentation import render

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(render, "body", interrupt)
    csv = tmp_path / "s.csv"
    _log(n_items=6).to_csv(csv, index=False)
    out = tmp_path / "report"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    code = cli.main(["analyze", str(csv), "--response", "score", "--system", "system", "--item", "item",
                     "--replication", "seed", "--n-resamples", "99", "--out", str(out)])
    assert code == 130 and "interrupted" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"] and (out / "summary.json").read_text() == "{}"


# ------------------------------------------------------------------------- issue 22: readings, metrics, report

def _log(n_items=40, seeds=3, seed=5):
    """2 systems x seeds x items with run-to-run variation and two metrics (score; error = 1 - score + noise)."""
    rng = np.random.default_rng(seed)
    items = rng.normal(0, 0.1, n_items)
    rows = []
    for system, shift in [("base", 0.0), ("new", 0.03)]:
        for s in range(seeds):
            run = rng.normal(0, 0.02)
            score = 0.5 + shift + run + items + rng.normal(0, 0.05, n_items)
            error = 1 - score + rng.normal(0, 0.05, n_items)
            rows += [{"system": system, "seed": str(s), "item": f"i{i:02d}", "score": a, "error": b}
                     for i, (a, b) in enumerate(zip(score, error, strict=True))]
    return pd.DataFrame(rows)


def test_run_folder_log_report_opens_with_the_answer(tmp_path, capsys):
    """Acceptance (issues 22, 51): `vrs analyze` on a run-folder log writes `aso` and `expected_max` in summary.json
    (two systems: the pair is the comparison), and report.html opens with the answer, then the systems, then the
    readings - each with its test - and no code."""
    df = _log()
    for (system, seed), part in df.groupby(["system", "seed"]):
        folder = tmp_path / "runs" / system / f"seed={seed}"
        folder.mkdir(parents=True)
        part[["item", "score"]].to_csv(folder / "scores.tsv", sep="\t", index=False)
    out = tmp_path / "report"
    code = cli.main(["analyze", str(tmp_path / "runs/{system}/seed={seed}/scores.tsv"), "--response", "score",
                     "--system", "system", "--item", "item", "--replication", "seed", "--out", str(out),
                     "--n-resamples", "199"])
    assert code == 0, capsys.readouterr().err
    s = json.loads((out / "summary.json").read_text())
    assert set(s["aso"]) == {"new"} and s["aso"]["new"]["baseline"] == "base"
    assert {"candidate_better", "baseline_better"} <= set(s["aso"]["new"])
    assert set(s["expected_max"]) == {"base", "new"}
    assert [r["n"] for r in s["expected_max"]["new"]["table"]] == [1, 2, 3]
    page = (out / "report.html").read_text(encoding="utf-8")
    body = page[page.index("<body"):]
    assert body.index("<h1>") < body.index('id="vrs-answer"') < body.index("<table") < body.index("<img")
    readings = body[body.index(">The readings<"):]
    readings = readings[:readings.index("</table>")]
    for reading in ("runs as replications", "runs as a random effect", "paired bootstrap", "ASO on run means"):
        assert reading in readings
    assert "def " not in body and "import " not in body   # no code in the page


def test_two_metrics_give_one_result_each_and_holm_adjusted_verdicts(tmp_path, capsys):
    """Acceptance (issue 22): `vrs analyze ... --response m1 m2` writes one result per metric and the system
    verdicts Holm-adjusted across the metrics, each reading's family separately (recomputed here)."""
    csv = tmp_path / "scores.csv"
    _log().to_csv(csv, index=False)
    out = tmp_path / "report"
    code = cli.main(["analyze", str(csv), "--response", "score", "error", "--lower-is-better", "error",
                     "--system", "system", "--item", "item", "--replication", "seed", "--out", str(out),
                     "--n-resamples", "199"])
    assert code == 0, capsys.readouterr().err
    s = json.loads((out / "summary.json").read_text())
    assert s["responses"] == ["score", "error"] and list(s["metrics"]) == ["score", "error"]
    for m, better in (("score", "higher"), ("error", "lower")):
        one = s["metrics"][m]
        assert one["response"] == m and one["better"] == better
        assert {"glrt", "glrt_replications_random", "aso", "expected_max", "readings", "verdict"} <= set(one)
    fam = s["holm"]["families"]
    for family, p in (("runs_random", [s["metrics"][m]["glrt_replications_random"]["p_value"] for m in s["responses"]]),
                      ("runs_as_replications", [s["metrics"][m]["glrt"]["p_value"] for m in s["responses"]])):
        assert [r["metric"] for r in fam[family]] == ["score", "error"]
        # stated at 4 significant digits for the F test, at 10 for the GLRT
        assert [r["p_holm"] for r in fam[family]] == pytest.approx(holm_by_hand(p), rel=1e-3)
        assert [r["differ"] for r in fam[family]] == [v < 0.05 for v in holm_by_hand(p)]
    assert sum(v.startswith("Holm across the 2 metrics") for v in s["verdict"]) == 2
    page = (out / "report.html").read_text(encoding="utf-8")
    box = page[page.index(">Across the metrics (Holm)<"):]
    box = box[:box.index("</table>")]
    assert ">Holm p<" in box and ">error<" in box and ">score<" in box


def test_binary_log_through_vrs_analyze_matches_glmer(tmp_path, capsys):
    """Issue 21: correct/incorrect scores (tests/reference/glmm_eval.csv.gz: 3 systems x 5 seeds x 300 items) are
    detected as binary and analysed on logistic GLMMs. The GLRT chi-squares of both readings and the one conditional
    on the domain equal glmer's (lme4 1.1-31 run to convergence, tests/reference/glmm_eval.R) within 1e-3, the
    issue's bar; phi is on the latent scale (residual pi^2/3); summary.json names the family."""

    ref_dir = Path(__file__).parent.parent / "reference"
    ref = json.loads((ref_dir / "glmm_eval_lme4.json").read_text())
    out = tmp_path / "report"
    code = cli.main(["analyze", str(ref_dir / "glmm_eval.csv.gz"), "--response", "correct", "--system", "system",
                     "--item", "item", "--replication", "seed", "--property", "domain", "--baseline", "base",
                     "--out", str(out), "--n-resamples", "199", "--items", "fixed", "--n-sim", "19",
                     "--test", "bootstrap"])   # named: the GLMM bootstrap whatever the fit's run variance
    assert code == 0, capsys.readouterr().err
    s = json.loads((out / "summary.json").read_text())
    assert s["family"] == "binomial" and any("0/1" in n for n in s["notes"])
    assert s["glrt"]["chi2"] == pytest.approx(ref["overall"]["converged"]["chisq"], abs=1e-3)
    random = s["glrt_replications_random"]   # --items fixed: the model of the reference (no system x item term)
    assert random["items"] == "fixed" and "system:item" not in random["formula"]
    assert random["lrt"]["chi2"] == pytest.approx(ref["runs_random"]["converged"]["chisq"], abs=1e-3)
    assert random["lrt"]["df"] == ref["runs_random"]["converged"]["df"] == 2
    # the default test of binary scores: the GLMM parametric bootstrap on the same statistic
    assert random["test"].startswith("parametric bootstrap LRT") and random["n_sim"] + random["n_failed"] == 19
    assert random["chi2"] == pytest.approx(ref["runs_random"]["converged"]["chisq"], abs=1e-3)
    assert s["conditional"]["domain"]["chi2"] == pytest.approx(ref["by_domain"]["converged"]["chisq"], abs=1e-3)
    vc = s["variance_components"]["base"]
    # the logistic residual on the latent scale (summary.json: 10 significant digits)
    assert vc["Residual"] == pytest.approx(np.pi ** 2 / 3, rel=1e-9)
    # phi of the base system from its latent variances, n seeds (Definition 3.2, eq. 3.11)
    n = s["reliability"]["base"]["runs"]["seed"]
    expected = vc["item"] / (vc["item"] + (vc["seed"] + vc["Residual"]) / n)
    assert s["reliability"]["base"]["phi"] == pytest.approx(expected, rel=1e-8)
    assert s["power"] is None   # power planning is for continuous scores


@pytest.mark.parametrize("extra, message", [
    (["--test", "kenward-roger"], "tests that apply: bootstrap (default), max-t, chisq"),
    (["--test", "satterthwaite", "--family", "binomial"], "tests that apply: bootstrap (default), max-t, chisq"),
])
def test_a_test_that_does_not_apply_to_binary_scores_exits_2(tmp_path, capsys, extra, message):
    """Issue 28: ``--test kenward-roger`` on 0/1 scores is an error naming the tests that apply, never ignored."""
    rng = np.random.default_rng(3)
    df = pd.DataFrame([{"system": s, "seed": r, "item": i, "correct": int(rng.random() < 0.6)}
                       for s in "AB" for r in range(3) for i in range(20)])
    csv = tmp_path / "s.csv"
    df.to_csv(csv, index=False)
    code = cli.main(["analyze", str(csv), "--response", "correct", "--system", "system", "--item", "item",
                     "--replication", "seed", "--out", str(tmp_path / "report"), *extra])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and repr(extra[1]) in err
    assert not (tmp_path / "report" / "summary.json").exists()
