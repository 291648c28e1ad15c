"""Issue 51: ``vrs analyze`` writes report.html, report.ipynb, summary.json and summary.txt from one result by one
renderer, without starting a notebook kernel; report.ipynb's code cell re-runs the analysis through the public API
with the run's options written in as data, and executing it reproduces the renderer's answer and tables."""

import ast
import json
import re
import shutil
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from vrs_helpers.app import cli
from vrs_helpers.app.analyze import executed
from vrs_helpers.evaluate.presentation.notebook import analysis_code
from vrs_helpers.evaluate.presentation.result import Result

ROOT = Path(__file__).resolve().parents[2]
SCORES = ROOT / "examples" / "scores.csv"
LOGS = ROOT / "examples" / "harness_logs" / "lm_eval"
TABLE_ARGS = ["--response", "score", "--system", "system", "--item", "item", "--replication", "seed",
              "--n-resamples", "99"]


@pytest.fixture
def no_kernel(monkeypatch):
    """Any start of a Jupyter kernel fails the test."""
    import jupyter_client.manager as manager

    def refuse(*args, **kwargs):
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(manager.KernelManager, "start_kernel", refuse)
    monkeypatch.setattr(manager.AsyncKernelManager, "start_kernel", refuse)


def _shown(html: str) -> dict:
    """What a reader reads in a rendered report: the answer, and the text of every table cell, in order."""
    def text(fragment):
        return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)).strip()

    answer = re.search(r'id="vrs-answer">(.*?)</div>', html, re.S)
    cells = [text(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", html, re.S)]
    return {"answer": text(answer.group(1)) if answer else None, "cells": cells}


@pytest.mark.parametrize("kind", ["table", "logs"])
def test_vrs_analyze_writes_the_report_without_a_kernel(kind, tmp_path, capsys, no_kernel):
    out = tmp_path / "report"
    argv = [str(SCORES), *TABLE_ARGS] if kind == "table" else [str(LOGS)]
    assert cli.main(["analyze", *argv, "--out", str(out)]) == 0
    console = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.ipynb", "summary.json", "summary.txt"]
    result = Result.from_json(out / "summary.json")
    assert result.answer in console and (out / "summary.txt").read_text().count(result.answer) == 1
    page = (out / "report.html").read_text()
    assert _shown(page)["answer"] == result.answer
    nb = nbformat.read(str(out / "report.ipynb"), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code) == 1 and code[0].source == analysis_code(result)
    stored = code[0].outputs[0]["data"]["text/html"]
    assert _shown(stored) == _shown(page)   # the notebook's output is the renderer's, as the page


@pytest.mark.parametrize("kind", ["table", "logs"])
def test_executing_report_ipynb_reproduces_the_answer_and_the_tables(kind, tmp_path):
    """The notebook's code runs the analysis again through the public API (from anywhere: the data's path is
    absolute) and displays the same answer and the same table cells as the renderer stored."""
    out = tmp_path / "report"
    argv = [str(SCORES), *TABLE_ARGS] if kind == "table" else [str(LOGS)]
    assert cli.main(["analyze", *argv, "--out", str(out)]) == 0
    nb = nbformat.read(str(out / "report.ipynb"), as_version=4)
    stored = nb.cells[1].outputs[0]["data"]["text/html"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = executed(nb, str(elsewhere)).cells[1].outputs
    html = next(o["data"]["text/html"] for o in again if "text/html" in o.get("data", {}))
    assert _shown(html) == _shown(stored)


def test_execute_runs_the_notebook_before_it_is_written(tmp_path):
    out = tmp_path / "report"
    assert cli.main(["analyze", str(SCORES), *TABLE_ARGS, "--out", str(out), "--execute"]) == 0
    nb = nbformat.read(str(out / "report.ipynb"), as_version=4)
    assert nb.cells[1].outputs and nb.cells[1].execution_count == 1
    assert "metadata" in nb and nb.cells[1].outputs[-1]["output_type"] == "execute_result"


HOSTILE = ["'''", '"""', "a\tb", "x'); import os; os.system('echo pwned'); ('", "\\", "{0}", "$x$", "</script>"]


@pytest.mark.parametrize("name", HOSTILE)
def test_names_in_the_options_never_become_code(name, tmp_path, no_kernel):
    """The run's options reach the code cell as one string literal: the cell parses to an import, three
    assignments/expressions and no other call than the spec's and the analysis'; the literal holds the names."""
    d = pd.read_csv(SCORES).rename(columns={"score": name})
    data = tmp_path / "t.csv"
    d.to_csv(data, index=False)
    out = tmp_path / "report"
    assert cli.main(["analyze", str(data), "--response", name, "--system", "system", "--item", "item",
                     "--replication", "seed", "--n-resamples", "99", "--out", str(out)]) == 0
    code = nbformat.read(str(out / "report.ipynb"), as_version=4).cells[1].source
    tree = ast.parse(code)
    calls = [ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert calls == ["AnalysisSpec.from_dict", "analyze"]
    literal = next(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    assert json.loads(literal)["response"] == [name]


def test_a_result_renders_without_optional_parts():
    """A result with only its kind and answer still renders in every format (a renderer never assumes a section)."""
    from vrs_helpers.evaluate.presentation.render import FORMATS, render

    for kind in ("scores", "metrics", "logs"):
        r = Result({"kind": kind, "answer": "nothing"})
        for fmt in FORMATS:
            assert "nothing" in render(r, fmt)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium not installed")
def test_the_report_reads_at_1300_and_400_px(tmp_path):
    """A 12-system report in headless Chromium (tools/check_report.py): at 1,300 and at 400 px the answer is the
    first thing after the title, the leaderboard's table comes before any figure, nothing widens the page - also
    with the input's path a long word without a break (the page once scrolled on a checkout deeper than ours)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_report", ROOT / "tools" / "check_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "r12"
    deep = tmp_path / ("a_folder_name_without_any_break_" * 4)
    deep.mkdir()
    data = deep / "ranking_binary_scores_of_twelve_systems.csv.gz"
    shutil.copyfile(ROOT / "tests" / "reference" / "ranking_binary.csv.gz", data)
    assert cli.main(["analyze", str(data), *TABLE_ARGS, "--out", str(out)]) == 0
    for width in (1300, 400):
        m = module.measure(out / "report.html", shutil.which("chromium"), width)
        assert m["window"] == width and module.problems(m) == [], m
        assert m["order"][:5] == ["h1", "vrs-answer", "h2", "table", "img"]


def test_logs_whose_runs_are_identical_get_a_verdict_that_says_so_first(tmp_path, capsys):
    """Issue 51: runs with the same score on every item but different logged aggregates (one run's records written
    for another) - the answer's first sentence names the problem, above everything, in the report and the console."""
    from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_lm_eval

    t = simulate_binary(1, systems=("m-a", "m-b"), tasks=("arith",), items=40, runs=3, run_sd=0.3)
    write_lm_eval(t, tmp_path / "logs")
    first, second = (next((tmp_path / "logs" / f"seed{r}" / "m-a").glob("samples_*.jsonl")) for r in (1, 2))
    second.write_text(first.read_text())   # seed 2's records are seed 1's; its results file keeps its own mean
    out = tmp_path / "report"
    assert cli.main(["analyze", str(tmp_path / "logs"), "--out", str(out)]) == 0
    console = capsys.readouterr().out
    result = Result.from_json(out / "summary.json")
    first_sentence = result.answer.split(": the per-item records")[0]
    assert first_sentence == ("The logs look broken: runs fewshot_seed=1, fewshot_seed=2 of m-a in task arith have "
                              "the same score on every item but different logged aggregates") and result.data["broken"]
    page = (out / "report.html").read_text()
    assert page.index('class="warn"') < page.index('id="vrs-answer"') < page.index("<table")
    assert 'class="answer broken"' in page
    assert console.index("WARNING: The logs look broken") < console.index(result.answer)
