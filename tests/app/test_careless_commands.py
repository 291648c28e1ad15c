"""Careless arguments to `vrs plan`, `vrs reproduce` and `vrs batch` (issue 37): exit 2 and one line that says what
to do, never a traceback, before any work."""

import pytest

from vrs_helpers.app.cli import main

PLAN = ["plan", "--items", "500", "--delta", "0.03", "--run-sd", "0.02", "--residual-sd", "0.3"]
REPEATS = ["plan", "--items", "500", "--delta", "0.03", "--item-diff-sd", "0.3", "--within-sd", "0.45"]


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("extra, phrase", [
    (["--runs", "1e9"], "runs per system must be an integer >= 2 (and at most 100,000), got '1e9'"),
    (["--runs", "1e400"], "runs per system must be an integer >= 2"),
    (["--runs", "3.5"], "runs per system must be an integer"),
    (["--items", "1e10"], "items must be an integer >= 1 (and at most 1,000,000,000)"),
    (["--systems", "1e6"], "systems must be an integer >= 2 (and at most 10,000)"),
    (["--crossed", "config:0.1:1e9"], "levels of config must be an integer >= 2 (and at most 100,000)"),
    (["--residual-sd", "1e300"], "residual SD must be a finite number no larger than 1e100"),
    (["--delta", "1e400"], "delta must be a finite number"),
    (["--item-sd", "inf"], "item SD must be a finite number"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_plan_out_of_bounds_exits_2(capsys, extra, phrase):
    assert main(PLAN + extra) == 2
    assert phrase in _one_error_line(capsys)


@pytest.mark.parametrize("extra, phrase", [
    (["--repeats", "1e9"], "repeats must be whole numbers from 1 to 1,000,000, got '1e9'"),
    (["--repeats", "3", "--items", "1e12"], "items must be whole numbers from 1 to 1,000,000,000"),
    (["--repeats", "3", "--within-sd", "1e300"], "--within-sd must be a finite number no larger than 1e100"),
    (["--repeats", "3", "--delta", "1e-300"], "more than 10^15 items would be needed"),
    (["--repeats", "3", "--delta", "x"], "--delta must be a number, got 'x'"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_plan_repeats_out_of_bounds_exits_2(capsys, extra, phrase):
    assert main(REPEATS + extra) == 2
    assert phrase in _one_error_line(capsys)


def test_plan_reads_numbers_in_exponent_form(capsys):
    """1e3 is 1000 (YAML would read '1e3' as text): the same plan either way, and large sane values are planned."""
    assert main(PLAN + ["--runs", "1000", "--systems", "5"]) == 0
    plain = capsys.readouterr().out
    assert main(PLAN + ["--runs", "1e3", "--systems", "5e0"]) == 0
    assert capsys.readouterr().out == plain
    assert main(REPEATS + ["--repeats", "10"]) == 0
    plain = capsys.readouterr().out
    assert main(REPEATS + ["--repeats", "1e1"]) == 0
    assert capsys.readouterr().out == plain


@pytest.mark.parametrize("command", [["reproduce", "--out"], ["reproduce", "--build"], ["batch", "g.yaml", "--out"]])
@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_an_output_folder_that_is_a_file_exits_2(tmp_path, capsys, monkeypatch, command, where):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").write_text("a file")
    out = "taken" if where == "a file" else "taken/build"
    assert main([*command, out]) == 2
    err = _one_error_line(capsys)
    assert ("is an existing file" if where == "a file" else "taken is a file") in err
    assert "Give another folder with --" in err
    assert (tmp_path / "taken").read_text() == "a file"
