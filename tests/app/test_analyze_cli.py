"""`vrs analyze`: the book's MT data exported to CSV gives Table 4.1's GLRT and Table 4.3's p-values; bad input
exits 2 with a message naming the problem; a failed run leaves a previous report untouched."""

import json
import re
import time
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest

from conftest import holm_by_hand, requires_data
from vrs_helpers.app import cli, runner
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
    assert {p.name for p in out.iterdir()} == {"report.html", "report.ipynb", "summary.json", "mathjax"}
    from vrs_helpers.app.report import external_resources

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
    failed = Path(re.search(r"executed copy with the traceback: (\S+?)\)", err).group(1))
    assert failed.is_file() and not (failed.parent / "mathjax").exists()   # the failed run's folder: its notebook


def test_an_error_of_the_analysis_stops_the_started_report_and_produces_nothing(tmp_path, capsys, monkeypatch):
    """The report starts beside the analysis and waits for it; when the analysis itself fails, its error is the one
    reported (not the report's), the report's kernel is stopped, the work folder is removed and a previous report
    is untouched."""
    from vrs_helpers.evaluate import analysis
    from vrs_helpers.evaluate.scores import InputError

    kernels, works = [], []
    real = runner.analyze_report

    def spy(spec, **kwargs):
        kernels.append(kwargs["kernel"])
        works.append(kwargs["kernel"].cwd)
        return real(spec, **kwargs)

    def failing(spec, path, key):
        time.sleep(1.0)   # the report is under way meanwhile
        raise InputError("the analysis failed here")

    monkeypatch.setattr(runner, "analyze_report", spy)
    monkeypatch.setattr(analysis, "save_analysis", failing)
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
    assert len(kernels) == 1
    assert not kernels[0].manager().has_kernel and not works[0].exists()


def test_an_interruption_after_the_analysis_stops_the_report_at_once(tmp_path, monkeypatch):
    """Ctrl-C while the report runs (here: raised where the page's preparation starts, after the analysis was
    saved) stops the report's kernel at once instead of waiting for the notebook to end; the interruption is what
    is raised and the work folder is removed. The notebook's run is replaced by one that lasts until its kernel is
    being stopped."""
    from vrs_helpers.evaluate.spec import AnalysisSpec

    seen = {}

    def long_run(source, params, *, kernel, **kwargs):
        seen["kernel"], seen["work"] = kernel, kernel.cwd
        deadline = time.monotonic() + 120
        while kernel._stopping is None and time.monotonic() < deadline:
            time.sleep(0.05)
        raise runner.NotebookError("the report's kernel was stopped")

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_notebook", long_run)
    monkeypatch.setattr(runner, "prepare_page", interrupt)
    spec = AnalysisSpec(_log(n_items=6), "score", "system", "item", replications=["seed"], n_resamples=99)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        runner.analyze_report(spec, out_dir=tmp_path / "report")
    assert time.monotonic() - started < 60
    seen["kernel"].shutdown()
    assert not seen["kernel"].manager().has_kernel and not seen["work"].exists()
    assert not (tmp_path / "report").exists()


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


CODE = '<div class="jp-CodeMirrorEditor'   # a code cell's input in nbconvert's lab template (not its CSS)


def _first_screen(page: str) -> str:
    """The page's body up to the verdict box."""
    body = page[page.index("<body"):]
    return body[:body.index("vrs-verdict")]


def test_run_folder_log_report_opens_with_the_verdict_and_no_code(tmp_path, capsys):
    """Acceptance (issue 22): `vrs analyze` on a run-folder log writes `aso` and `expected_max` in summary.json,
    and report.html opens with the verdict table: its first output precedes any code, and there is no code."""
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
    first = _first_screen(page)
    assert "jp-OutputArea" in first and CODE not in page and "<img" not in first
    assert len(re.sub(r"<[^>]+>|\s+", " ", first[first.rfind("</h1>"):]).strip()) < 400  # the title, a sentence
    assert first.index("jp-OutputArea") > first.rfind("jp-RenderedMarkdown")   # no output before the title
    box = page[page.index("vrs-verdict"):]
    box = box[:box.index("</div>")]
    for reading in ("runs as replications", "runs as a random effect", "paired bootstrap", "ASO on run means"):
        assert reading in box
    assert "<img" in page[page.index("vrs-verdict"):]  # the figures follow
    executed = nbformat.read(str(out / "report.ipynb"), as_version=4)
    assert not any({"exercise", "solution"} & set(c.metadata.get("tags", [])) for c in executed.cells)
    # the same notebook exported with its code: the code is what --show-code keeps
    from vrs_helpers.app.report import notebook_page

    assert CODE in notebook_page(executed, exclude_input=False)


@pytest.mark.parametrize("flag, shown", [([], False), (["--show-code"], True)])
def test_show_code_reaches_the_export(tmp_path, capsys, monkeypatch, flag, shown):
    """--show-code keeps the code cells' inputs in report.html; without it the page has the outputs only. The
    notebook's run is replaced by an executed notebook with one code cell (what is tested is the export)."""

    def fake(source, params, *, out_dir, output_name, **kwargs):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1", execution_count=1, outputs=[])])
        out = Path(out_dir) / output_name
        nbformat.write(nb, str(out))
        Path(params["summary_path"]).write_text("{}")
        kwargs["kernel"].shutdown()
        return runner.RunResult("report", out, None, params)

    monkeypatch.setattr(runner, "run_notebook", fake)
    csv = tmp_path / "s.csv"
    _log(n_items=5).to_csv(csv, index=False)
    assert cli.main(["analyze", str(csv), "--response", "score", "--system", "system", "--item", "item",
                     "--replication", "seed", "--out", str(tmp_path / "r"), *flag]) == 0, capsys.readouterr().err
    page = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert (CODE in page) is shown and ("x = 1" in page or "x</span>" in page) is shown
    assert (tmp_path / "r" / "mathjax" / "MathJax.js").is_file()


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
    box = page[page.index("vrs-verdict"):]
    box = box[:box.index("</table>")]
    assert ">p holm<" in box and ">error<" in box and ">score<" in box


def test_binary_log_through_vrs_analyze_matches_glmer(tmp_path, capsys):
    """Issue 21: correct/incorrect scores (tests/reference/glmm_eval.csv.gz: 3 systems x 5 seeds x 300 items) are
    detected as binary and analysed on logistic GLMMs. The GLRT chi-squares of both readings and the one conditional
    on the domain equal glmer's (lme4 1.1-31 run to convergence, tests/reference/glmm_eval.R) within 1e-3, the
    issue's bar; phi is on the latent scale (residual pi^2/3); summary.json names the family."""
    from pathlib import Path

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
