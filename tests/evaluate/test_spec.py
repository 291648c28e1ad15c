"""AnalysisSpec (issue 27): the options checked as the spec is built, the data validated once with one set of rules,
the test of the runs-random reading chosen from the registry (a test that does not apply is an error naming those
that do), and the hand-over to workbook 07 (to_dict / from_dict) without a second validation."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from vrs_helpers import registry
from vrs_helpers.app import cli
from vrs_helpers.evaluate.analysis import analyze, summary_json
from vrs_helpers.evaluate.tables import scores as scores_module
from vrs_helpers.evaluate.tables.scores import InputError
from vrs_helpers.evaluate.tables.spec import AnalysisSpec


def _log(binary=False, seeds=3, items=12, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for s in ("base", "new"):
        for r in range(seeds):
            run = rng.normal(0, 0.05)
            for i in range(items):
                y = 0.5 + (0.05 if s == "new" else 0.0) + run + rng.normal(0, 0.1)
                rows.append({"system": s, "seed": str(r), "item": f"i{i}", "y": float(y > 0.5) if binary else y})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("kwargs, match", [
    ({"response": []}, "at least one response"),
    ({"item": ""}, "item column"),
    ({"alpha": 1.5}, "alpha must be between 0 and 1"),
    ({"n_resamples": 0}, "n_resamples must be a positive integer"),
    ({"n_sim": 2.5}, "n_sim must be a positive integer"),
    ({"family": "poisson"}, "family must be auto, gaussian, binomial"),
    ({"test": "wald"}, "unknown test 'wald'; registered tests: kenward-roger"),
    ({"delta": float("inf")}, "delta must be a non-zero number"),
    ({"lower_is_better": ["ter"]}, "not among the responses"),
])
def test_options_are_checked_as_the_spec_is_built(kwargs, match):
    base = dict(data=_log(), response="y", system="system", item="item", replications=["seed"])
    with pytest.raises(Exception, match=match) as info:
        AnalysisSpec(**{**base, **kwargs})
    assert info.value.exit_code == 2   # a VRSError: `vrs analyze` exits 2 with the message


def test_names_are_normalized_once():
    s = AnalysisSpec(_log(), "y", "system", "item", replications="seed", test="KR", delta=0, baseline="")
    assert s.response == ("y",) and s.replications == ("seed",) and s.properties == ()
    assert s.test == "kenward-roger" and s.delta is None and s.baseline is None


def test_the_data_is_validated_once(monkeypatch):
    calls = []
    real = scores_module.validate

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(scores_module, "validate", counting)
    res = analyze(_log(), ["y"], "system", "item", replications=["seed"], n_resamples=99)
    assert len(calls) == 1 and res.fits.family == "gaussian"
    # a spec that is already validated is not validated again (workbook 07 gets it from vrs analyze)
    s = AnalysisSpec(_log(), "y", "system", "item", replications=["seed"], n_resamples=99).validated()
    analyze(s)
    assert len(calls) == 2


def test_the_spec_travels_to_the_workbook_without_a_second_validation(tmp_path, monkeypatch):
    s = AnalysisSpec(_log(), "y", "system", "item", replications=["seed"], n_resamples=99, seed=2,
                     data_label="my log").validated()
    path = tmp_path / "scores.parquet"
    s.table.to_parquet(path)
    d = s.replace(data=str(path), table=None).to_dict()
    assert json.loads(json.dumps(d)) == d and d["tests"] == {"y": "kenward-roger"}
    assert d["families"] == {"y": "gaussian"} and d["design"]["n_systems"] == 2

    def refuse(*args, **kwargs):
        raise AssertionError("validated twice")

    monkeypatch.setattr(scores_module, "validate", refuse)
    again = AnalysisSpec.from_dict(d).validated()
    assert again.is_validated and again.design.design == s.design.design and again.data_label == "my log"
    (tmp_path / "spec.json").write_text(json.dumps(d))
    from_file = AnalysisSpec.from_dict(str(tmp_path / "spec.json")).validated()
    # the same spec gives the same result, from its file or in memory (only the data's path it records differs)
    a, b = json.loads(summary_json(analyze(from_file))), json.loads(summary_json(analyze(s)))
    assert a.pop("spec")["data"] == str(path) and b.pop("spec")["data"] is None
    assert a == b
    with pytest.raises(InputError, match="unknown analysis option"):
        AnalysisSpec.from_dict({**d, "colour": "red"})


def test_the_test_must_apply_to_the_family_and_the_design():
    binary = _log(binary=True)
    s = AnalysisSpec(binary, "y", "system", "item", replications=["seed"]).validated()
    assert s.families == {"y": "binomial"} and s.tests == {"y": registry.default_test("binomial").name}
    with pytest.raises(registry.TestChoiceError, match="'kenward-roger' does not apply to binomial scores; tests "
                                                       "that apply: bootstrap \\(default\\), max-t, chisq"):
        AnalysisSpec(binary, "y", "system", "item", replications=["seed"], test="kenward-roger").validated()
    with pytest.raises(registry.TestChoiceError, match="needs replication columns"):
        AnalysisSpec(_log(), "y", "system", "item", test="satterthwaite").validated(_log(seeds=1))
    assert AnalysisSpec(_log(seeds=1), "y", "system", "item").validated().tests == {"y": None}


def test_vrs_analyze_refuses_a_test_that_does_not_apply(tmp_path, capsys):
    csv = tmp_path / "binary.csv"
    _log(binary=True).to_csv(csv, index=False)
    out = tmp_path / "report"
    code = cli.main(["analyze", str(csv), "--response", "y", "--system", "system", "--item", "item",
                     "--replication", "seed", "--test", "kenward-roger", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "does not apply to binomial scores" in err and "chisq" in err and not out.exists()
    # an alias is the registered test; an unknown name is refused by argparse with the registered choices
    with pytest.raises(SystemExit):
        cli.main(["analyze", str(csv), "--response", "y", "--item", "item", "--test", "wald"])
    assert "kenward-roger" in capsys.readouterr().err


def test_cli_choices_and_help_come_from_the_registry(capsys):
    with pytest.raises(SystemExit):
        cli.main(["analyze", "--help"])
    text = re.sub(r"-\s+", "-", " ".join(capsys.readouterr().out.split()))  # argparse wraps at hyphens
    for t in registry.TESTS:
        assert t.name in text
    assert f"{registry.default_test('gaussian').name} for gaussian" in text


def test_repeats_are_part_of_the_spec():
    """spec.repeats (issue 29): independent draws per item within a run (Inspect epochs) - validated, kept through
    to_dict / from_dict, and analysed (the repeats are rows of their (system, run, item))."""
    d = pd.concat([_log().assign(epoch=str(e)) for e in range(2)], ignore_index=True)
    d["y"] += np.random.default_rng(3).normal(0, 0.05, len(d))
    spec = AnalysisSpec(d, "y", "system", "item", replications=["seed"], repeats="epoch", n_resamples=99)
    assert spec.repeats == ("epoch",)
    v = spec.validated()
    assert "repeats per item 2 over epoch" in v.design.design and len(v.table) == len(d)
    again = AnalysisSpec.from_dict(v.replace(data="x.parquet").to_dict())
    assert again.repeats == ("epoch",) and again.design == v.design
    with pytest.raises(InputError, match="repeat a \\(system, run, item\\)"):
        spec.replace(repeats=()).validated()
    assert analyze(v).fits.glrt.df == 1


def test_options_are_declared_once():
    """Issue 51: every option of the two specs is declared once (vrs_helpers.evaluate.options): each spec field has
    its entry, `vrs analyze --help` lists one flag per option with that entry's help, the CLI builds both specs from
    the parsed arguments with the same names, and the runs and items choices are the engine's."""
    import argparse
    import dataclasses

    from vrs_helpers.book.glrt import ITEMS, RUNS
    from vrs_helpers.evaluate import options
    from vrs_helpers.evaluate.tables.spec import LogsSpec

    assert (options.ITEMS, options.RUNS) == (ITEMS, RUNS)
    for cls in (AnalysisSpec, LogsSpec):
        declared = {f.name for f in dataclasses.fields(cls) if "option" in f.metadata}
        assert declared >= {f.name for f in dataclasses.fields(cls)} - {"data", "logs", "table", "design", "families",
                                                                        "family_notes", "tests"}
    parser = argparse.ArgumentParser()
    options.add_arguments(parser, AnalysisSpec, LogsSpec)
    flags = [a.option_strings[0] for a in parser._actions if a.option_strings and a.option_strings[0] != "-h"]
    assert len(flags) == len(set(flags)) == len(options.spec_options(AnalysisSpec, LogsSpec))
    args = parser.parse_args(["--response", "bleu", "chrf", "--replication", "seed", "--replication", "lr",
                              "--alpha", "0.01", "--runs", "nested", "--adjust", "bh", "--dropna"])
    table = options.spec_arguments(AnalysisSpec, args)
    assert table["response"] == ["bleu", "chrf"] and table["replications"] == ["seed", "lr"]
    assert table["alpha"] == 0.01 and table["runs"] == "nested" and table["dropna"] is True
    logs = options.spec_arguments(LogsSpec, args)
    assert logs["metric"] == ["bleu", "chrf"] and logs["adjust"] == "bh" and "replications" not in logs
    spec = AnalysisSpec(_log(), **{**table, "response": "y", "system": "system", "item": "item",
                                   "replications": ["seed"]})
    assert spec.alpha == 0.01 and spec.runs == "nested"
