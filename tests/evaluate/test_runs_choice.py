"""vrs analyze's choice of the runs model (issue 39): --runs nested|crossed|auto, said in the answer, the notes and
summary.json; the other model's p beside it. The p-values are pbkrtest's (tests/reference/designs_39.R)."""

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest

from vrs_helpers.app import cli
from vrs_helpers.evaluate.analysis import analyze
from vrs_helpers.evaluate.scores import InputError
from vrs_helpers.evaluate.spec import AnalysisSpec

REF = Path(__file__).resolve().parents[1] / "reference"
R = json.loads((REF / "designs_39.json").read_text())


def _shared() -> pd.DataFrame:
    return pd.read_csv(REF / "shared_seeds.csv.gz", dtype={"system": str, "seed": str, "item": str})


def _analyze(d, runs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(d, "score", "system", "item", replications=["seed"], runs=runs, n_resamples=99)


@pytest.mark.parametrize("runs", ["auto", "crossed"])
def test_shared_seeds_fitted_crossed_and_said(runs):
    a = _analyze(_shared(), runs)
    crossed, nested = R["shared_seeds"]["crossed"], R["shared_seeds"]["nested"]
    assert a.comparison_random.runs == "crossed"
    assert a.comparison_random.test.p_value == pytest.approx(crossed["p_value"], rel=1e-5)
    assert "(runs crossed: each run label is shared by the systems)" in a.answer
    assert any(n.startswith("runs crossed (seed)") for n in a.notes)
    s = a.to_summary()["glrt_replications_random"]
    assert s["runs"] == "crossed" and "(1|seed)" in s["formula"]
    # the shared-seed variance is positive here: no nested model beside it
    assert crossed["variances"]["seed"] > 0 and not any("with runs nested" in n for n in a.notes)
    assert nested["p_value"] > 0.5 > 0.2 > crossed["p_value"]


def test_nested_runs_on_shared_labels_show_the_crossed_p():
    """--runs nested (the default) on shared labels: the note says nested and gives the crossed model's p."""
    a = _analyze(_shared(), "nested")
    assert a.comparison_random.runs == "nested"
    assert a.comparison_random.test.p_value == pytest.approx(R["shared_seeds"]["nested"]["p_value"], rel=1e-5)
    assert any(n.startswith("runs nested (seed)") for n in a.notes)
    beside = f"with runs crossed the same test gives p = {R['shared_seeds']['crossed']['p_value']:.3g}"
    assert any(beside in n for n in a.notes)
    assert "runs crossed" not in a.answer


def test_own_run_labels_are_nested_under_auto():
    d = _shared()
    a = _analyze(d.assign(seed=d["system"] + "-" + d["seed"]), "auto")
    assert a.comparison_random.runs == "nested" and not any("with runs crossed" in n for n in a.notes)


def test_runs_option_is_checked():
    with pytest.raises(InputError, match="runs must be auto, crossed, nested"):
        AnalysisSpec(_shared(), "score", "system", "item", replications=["seed"], runs="shared")
    with pytest.raises(SystemExit) as e:
        cli.main(["analyze", "x.csv", "--response", "score", "--item", "item", "--runs", "shared"])
    assert e.value.code == 2
