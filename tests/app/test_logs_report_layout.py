"""The logs report (issues 40, 51): the answer first, then every task's verdict, each task's leaderboard with its
forest plot, the critical-difference diagram with 5 or more tasks; each "what it ignores" sentence once; hostile
names escaped; measured in headless Chromium at 1,300 px (tools/check_report.py), nothing wider than the page. The
Friedman statistic and the Nemenyi critical difference are checked against scipy and Demsar's (2006) table."""

import importlib.util
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from vrs_helpers.app import cli
from vrs_helpers.evaluate.logs.many_tasks import friedman_nemenyi
from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_every_eval_ever

TOOLS = Path(__file__).resolve().parents[2] / "tools"
HOSTILE = "<b>evil$x$</b>"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("six")
    t = simulate_binary(3, systems=("acme/base-7b", "acme/tuned-7b", HOSTILE,
                                    "other/model-with-a-very-long-name-indeed-13b"),
                        tasks=tuple(f"task_{i}" for i in range(6)), items=40, accuracy=(0.5, 0.7, 0.6, 0.55))
    write_every_eval_ever(t, tmp / "eee")
    assert cli.main(["analyze", str(tmp / "eee"), "--out", str(tmp / "r")]) == 0
    return tmp / "r", t


def test_report_structure(report):
    out, _ = report
    page = (out / "report.html").read_text()
    assert page.index("<h1>") < page.index('id="vrs-answer"') < page.index("<table") < page.index("<img")
    # a forest plot per task, the one across the tasks (the same 4 models on every task; issue 52), the CD diagram
    assert page.count("<img") == 6 + 1 + 1
    assert HOSTILE not in page and "&lt;b&gt;evil$x$&lt;/b&gt;" in page
    s = json.loads((out / "summary.json").read_text())
    assert {"tasks", "pooled", "harness", "miller", "paired", "mcnemar", "read", "verdict", "leaderboards"} <= set(s)
    assert len(s["model_by_task"]) == 6 * 4 and len(s["leaderboards"]) == 6 + 1
    assert "all tasks (items pooled)" in s["leaderboards"] and s["best_across_tasks"]["best"]
    ignores = page[page.index("Which variation each number ignores"):]
    items = ignores[:ignores.index("</ul>")].split("<li>")[1:]
    assert len(items) == len(set(items)) >= 2


def test_friedman_and_nemenyi_match_scipy_and_demsar():
    rng = np.random.default_rng(4)
    m = pd.DataFrame(rng.random((8, 4)), columns=list("abcd"))
    f = friedman_nemenyi(m)
    chi2, p = stats.friedmanchisquare(*[m[c] for c in m])
    assert f["chi2"] == pytest.approx(chi2) and f["p_value"] == pytest.approx(p)
    # Demsar (2006), Table 5(a): q_0.05 for k = 4 classifiers is 2.569; CD = q sqrt(k (k + 1) / (6 N))
    assert f["q_alpha"] == pytest.approx(2.569, abs=1e-3)
    assert f["critical_difference"] == pytest.approx(2.569 * math.sqrt(4 * 5 / (6 * 8)), abs=1e-3)
    ranks = (-m).rank(axis=1).mean()
    assert f["mean_ranks"] == pytest.approx(ranks.to_dict())
    assert friedman_nemenyi(m.iloc[:4]) is None   # fewer than 5 tasks


@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium not installed")
def test_nothing_is_wider_than_the_page_at_1300_px(report):
    out, _ = report
    spec = importlib.util.spec_from_file_location("check_report", TOOLS / "check_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    m = module.measure(out / "report.html", shutil.which("chromium"), 1300)
    assert m["window"] == 1300 and module.problems(m) == [], m
