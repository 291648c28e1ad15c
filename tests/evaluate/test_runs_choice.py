"""vrs analyze's choice of the runs model (issue 39): --runs auto (the default), nested or crossed, said in the answer,
the notes and summary.json; the other model's p beside it. The p-values are pbkrtest's
(tests/reference/designs_39.R)."""

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vrs_helpers.app import cli
from vrs_helpers.evaluate.analysis import analyze
from vrs_helpers.evaluate.tables.scores import InputError
from vrs_helpers.evaluate.tables.spec import AnalysisSpec

REF = Path(__file__).resolve().parents[1] / "reference"
R = json.loads((REF / "designs_39.json").read_text())


def _shared() -> pd.DataFrame:
    return pd.read_csv(REF / "shared_seeds.csv.gz", dtype={"system": str, "seed": str, "item": str})


def _analyze(d, runs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(d, "score", "system", "item", replications=["seed"], runs=runs, n_resamples=99)


def test_shared_seeds_fitted_crossed_and_said():
    a = _analyze(_shared(), "crossed")
    crossed, nested = R["shared_seeds"]["crossed"], R["shared_seeds"]["nested"]
    assert a.fits.comparison_random.runs == "crossed"
    assert a.fits.comparison_random.test.p_value == pytest.approx(crossed["p_value"], rel=1e-5)
    assert "(runs crossed: each run label is shared by the systems)" in a.answer
    assert any(n.startswith("runs crossed (seed)") for n in a.notes)
    s = a.data["glrt_replications_random"]
    assert s["runs"] == "crossed" and "(1|seed)" in s["formula"]
    # the shared-seed variance is positive here: no nested model beside it
    assert crossed["variances"]["seed"] > 0 and not any("with runs nested" in n for n in a.notes)
    assert nested["p_value"] > 0.5 > 0.2 > crossed["p_value"]


def test_shared_labels_under_auto_test_both_runs_models():
    """Issue 56: --runs auto (the default) on labels both systems share tests the crossed and the nested model
    (pbkrtest's p of each, tests/reference/designs_39.R, in the note) and answers with the smaller p adjusted for
    taking the smaller: P(min(P_c, P_n) <= p) without a shared run effect (two_models_p; its closed form checked
    by simulation in tests/book/test_designs_56.py)."""
    from vrs_helpers.book.run_means import two_models_p

    a = _analyze(_shared(), "auto")
    crossed, nested = R["shared_seeds"]["crossed"], R["shared_seeds"]["nested"]
    c = a.fits.comparison_random
    assert c.runs == "crossed" and c.runs_models == ("crossed", "nested")
    want = two_models_p(min(crossed["p_value"], nested["p_value"]), 5, 2)
    assert c.test.p_value == pytest.approx(want, rel=1e-4) and want > crossed["p_value"]
    assert "(run labels shared: crossed and nested runs both tested)" in a.answer
    assert "(runs crossed: the smaller p of both runs models, adjusted)" in a.answer
    note = next(n for n in a.notes if n.startswith("run labels shared by the systems"))
    assert f"p = {crossed['p_value']:.3g}" in note and f"p = {nested['p_value']:.3g}" in note
    assert a.data["glrt_replications_random"]["runs_models"] == ["crossed", "nested"]


def test_nested_runs_on_shared_labels_show_the_crossed_p():
    """--runs nested on shared labels: the note says nested and gives the crossed model's p."""
    a = _analyze(_shared(), "nested")
    assert a.fits.comparison_random.runs == "nested"
    assert a.fits.comparison_random.test.p_value == pytest.approx(R["shared_seeds"]["nested"]["p_value"], rel=1e-5)
    assert any(n.startswith("runs nested (seed)") for n in a.notes)
    beside = f"with runs crossed the same test gives p = {R['shared_seeds']['crossed']['p_value']:.3g}"
    assert any(beside in n for n in a.notes)
    assert "runs crossed" not in a.answer


def test_own_run_labels_are_nested_under_auto():
    d = _shared()
    a = _analyze(d.assign(seed=d["system"] + "-" + d["seed"]), "auto")
    assert a.fits.comparison_random.runs == "nested" and not any("with runs crossed" in n for n in a.notes)


def test_runs_option_is_checked():
    with pytest.raises(InputError, match="runs must be auto, crossed, nested"):
        AnalysisSpec(_shared(), "score", "system", "item", replications=["seed"], runs="shared")
    with pytest.raises(SystemExit) as e:
        cli.main(["analyze", "x.csv", "--response", "score", "--item", "item", "--runs", "shared"])
    assert e.value.code == 2


# --- auto is the default (issue 39): it equals nested where no label is shared, crossed where every label is ---

def _design(rng, systems: int, runs: int, items: int, shared_sd: float) -> pd.DataFrame:
    """A small balanced log: item, shared-run (by label), system x run and residual effects."""
    item, shift = rng.normal(0, 0.1, items), rng.normal(0, shared_sd, runs)
    own = rng.normal(0, 0.03, (systems, runs))
    rows = [{"system": f"S{s}", "seed": str(r), "item": f"i{i}",
             "score": 0.5 + item[i] + shift[r] + own[s, r] + rng.normal(0, 0.1)}
            for s in range(systems) for r in range(runs) for i in range(items)]
    return pd.DataFrame(rows)


def _p(d, **kw) -> float:
    from vrs_helpers.book.glrt import compare_systems

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compare_systems(d, "score", "system", "item", replications=["seed"], contrasts=False, **kw)
    return c.runs, c.test.method, c.test.p_value


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), systems=st.integers(2, 3), runs=st.integers(2, 4),
       items=st.integers(8, 15), shared_sd=st.sampled_from([0.0, 0.05]))
def test_auto_is_nested_on_own_labels_and_crossed_on_shared_ones(seed, systems, runs, items, shared_sd):
    """auto (the default) on labels no two systems share (each system its own: the type-I cells with independent
    runs relabel them so) fits exactly the nested model; on labels every system shares, with three systems exactly
    the crossed one (the same test, the same p: identical floats, the same fit), with two both and the smaller p
    adjusted (issue 56, registry.runs_models)."""
    from vrs_helpers.book.run_means import two_models_p

    d = _design(np.random.default_rng(seed), systems, runs, items, shared_sd)
    own = d.assign(seed=d["system"] + "-" + d["seed"])
    assert _p(own) == _p(own, runs="auto") == _p(own, runs="nested")
    assert _p(own)[0] == "nested"
    if systems > 2:
        assert _p(d) == _p(d, runs="auto") == _p(d, runs="crossed")
        assert _p(d)[0] == "crossed"
        return
    c, n = _p(d, runs="crossed"), _p(d, runs="nested")
    auto = _p(d)
    assert auto[0] == ("crossed" if c[2] <= n[2] else "nested")
    assert auto[2] == pytest.approx(two_models_p(min(c[2], n[2]), runs, 2), rel=1e-12)


def test_the_default_is_auto_everywhere(tmp_path, monkeypatch):
    """compare_systems, analyze, AnalysisSpec and vrs analyze (a score table and a folder of logs) default to runs
    auto; vrs analyze LOGDIR --runs passes the setting to the logs' analysis."""
    import inspect

    from vrs_helpers.book.glrt import compare_systems
    from vrs_helpers.evaluate import analysis
    from vrs_helpers.evaluate.presentation.result import Result

    assert inspect.signature(compare_systems).parameters["runs"].default == "auto"
    assert inspect.signature(analyze).parameters["runs"].default == "auto"
    assert AnalysisSpec(_shared(), "score", "system", "item", replications=["seed"]).validated().runs == "auto"
    seen = []
    empty = {"kind": "scores", "answer": "(not analysed)"}
    monkeypatch.setattr(analysis, "analyze", lambda spec, **k: seen.append(spec.runs) or Result(empty))
    monkeypatch.setattr(analysis, "analyze_logs", lambda spec, *a: seen.append(spec.runs) or Result(empty))
    table = tmp_path / "scores.csv"
    _shared().to_csv(table, index=False)
    logs = Path(__file__).resolve().parents[1] / "fixtures" / "harness_written" / "lm_eval" / "out"
    for argv in (["analyze", str(table), "--response", "score", "--system", "system", "--item", "item",
                  "--replication", "seed"], ["analyze", str(logs)], ["analyze", str(logs), "--runs", "nested"]):
        assert cli.main([*argv, "--out", str(tmp_path / "out")]) == 0
    assert seen == ["auto", "auto", "nested"]


def test_the_default_gives_the_nested_p_where_the_shared_run_variance_is_zero():
    """Shared labels whose shift is exactly zero (every seed's mean over systems and items the same): the crossed
    fit (--runs crossed) puts the shared-run variance at zero, and a note gives the nested model's p beside it - the p
    that compare_systems(runs="nested") gives, itself checked against pbkrtest (test_designs_39)."""
    from vrs_helpers.book.glrt import compare_systems

    d = _shared()
    d["score"] = d["score"] - d.groupby("seed")["score"].transform("mean") + d["score"].mean()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = analyze(d, "score", "system", "item", replications=["seed"], n_resamples=99, runs="crossed")
        nested = compare_systems(d, "score", "system", "item", replications=["seed"], runs="nested",
                                 contrasts=False)
    assert a.fits.comparison_random.runs == "crossed"
    assert float(a.fits.comparison_random.model.variance_components["variance"]["seed"]) <= 1e-10
    want = f"the shared-run variance is estimated as zero: with runs nested the same test gives p = " \
           f"{nested.test.p_value:.3g}"
    assert any(n.startswith(want) for n in a.notes), a.notes


def test_auto_is_nested_on_own_labels_for_0_1_scores_too():
    """0/1 scores with each system's own run labels (the type-I cells' independent runs): auto's test is the nested
    model's (the bootstrap named: the GLMM's parametric-bootstrap LRT), the same p with the same seed."""
    from vrs_helpers.book.simulation import evaluation_log

    d = evaluation_log(3939, systems=2, runs=3, items=60, run_sd=0.35, item_sd=1.0, mean=0.5, family="binomial",
                       run_labels="own").rename(columns={"run": "seed"})
    kw = {"family": "binomial", "n_sim": 19, "seed": 7, "test": "bootstrap"}
    auto, nested = _p(d, **kw), _p(d, runs="nested", **kw)
    assert auto == nested and auto[0] == "nested" and auto[1].startswith("parametric bootstrap")
