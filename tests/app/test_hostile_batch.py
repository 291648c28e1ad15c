"""Issue 50 (5, 8): `vrs batch` over hostile parameter values. Values "a b", "a/b" and "a_b" (and values differing
after 150 characters) got one output notebook for three combinations, and results.csv pointed all three rows at it;
now every combination's file name carries a hash of its full parameter set, and a grid that lists a combination
twice is an error before anything runs. Values such as ``=HYPERLINK(...)`` and ``@SUM(...)`` went into results.csv
as they were - a formula to the spreadsheet that opens it; now every CSV the tool writes prefixes a text cell that
starts with = + - @ tab or carriage return with ' (OWASP's rule), while numbers - negative ones too - stay numbers."""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import write_notebook
from vrs_helpers.app import runner
from vrs_helpers.app.cli import main

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def test_names_differ_where_the_parameters_differ():
    values = ["a b", "a/b", "a_b", "a\\b", "a:b", "x" * 150 + "1", "x" * 150 + "2", 1, 1.0, True, "1"]
    names = [runner.run_name("nb.ipynb", {"v": v}) for v in values]
    assert len(set(names)) == len(values), names
    assert all(n.startswith("nb__v-") and n.endswith(".ipynb") and "/" not in n and len(n) < 200 for n in names)
    digest = [runner.run_name("nb.ipynb", p).rsplit("-", 1)[1] for p in ({"a": 1, "b": 2}, {"b": 2, "a": 1})]
    assert digest[0] == digest[1]   # the hash is of the set, not of the order


@given(st.dictionaries(st.text(max_size=8), st.one_of(st.text(max_size=200), st.integers(), st.floats(
    allow_nan=False), st.booleans()), max_size=3), st.dictionaries(st.text(max_size=8), st.text(max_size=200),
                                                                  max_size=3))
@settings(max_examples=300, deadline=None)
def test_different_parameter_sets_never_share_a_name(a, b):
    if a != b or any(type(a[k]) is not type(b[k]) for k in a):
        assert runner.run_name("n.ipynb", a) != runner.run_name("n.ipynb", b)


def test_a_combination_listed_twice_is_an_error():
    combos = [{"x": 1}, {"x": 2}, {"x": 1}]
    with pytest.raises(runner.ParameterError, match=r"lists the combination \{'x': 1\} twice"):
        runner.check_unique_names(combos, [runner.run_name("n", c) for c in combos], "grid.yaml")
    with pytest.raises(runner.ParameterError, match="the same output name"):   # a collision, forced
        runner.check_unique_names([{"x": 1}, {"x": 2}], ["same.ipynb", "same.ipynb"], "grid.yaml")


# ------------------------------------------------------------------------------------------- spreadsheet cells

@given(st.text(max_size=30))
@settings(max_examples=500)
def test_a_text_cell_never_starts_a_formula(text):
    from vrs_helpers.literal import spreadsheet_cell, spreadsheet_value

    cell = spreadsheet_cell(text)
    number = text.strip() == text and _is_number(text)
    if text.startswith(FORMULA_STARTS) and not number:
        assert cell == "'" + text
    else:
        assert cell == text
    assert spreadsheet_value(cell) == text


def _is_number(text: str) -> bool:
    """A number as a spreadsheet reads one: digits, a sign, a point, an exponent (not inf, nan or 1_000)."""
    try:
        float(text)
    except ValueError:
        return False
    return bool(text) and set(text) <= set("0123456789+-.eE")


@pytest.mark.parametrize("value", [-1.5, -3, 0.0, float("-inf"), True, None])
def test_numbers_stay_numbers(value):
    from vrs_helpers.literal import spreadsheet_cell

    assert spreadsheet_cell(value) is value or spreadsheet_cell(value) == value


def test_a_frame_keeps_numeric_columns_and_escapes_text_and_names():
    from vrs_helpers.literal import read_back, spreadsheet_frame

    frame = pd.DataFrame({"=cmd": ["=1+1", "ok"], "delta": [-0.5, 2.0], "n": [-3, 4], "label": ["-0.07", "-x"]})
    safe = spreadsheet_frame(frame)
    assert list(safe.columns) == ["'=cmd", "delta", "n", "label"]
    assert safe["'=cmd"].tolist() == ["'=1+1", "ok"]
    assert safe["delta"].tolist() == [-0.5, 2.0] and safe["n"].tolist() == [-3, 4]
    assert safe["label"].tolist() == ["-0.07", "'-x"]   # a number written as text is a number to a spreadsheet too
    assert read_back(safe).to_dict("list") == frame.to_dict("list")


def test_batch_writes_distinct_notebooks_and_safe_cells(tmp_path, capsys):
    """End to end: five values that one name held before, and formulas, through `vrs batch`."""
    nb = write_notebook(tmp_path / "t.ipynb", ["from vrs_helpers.app.scorecard import record\n"
                                               "record('length', len(x))\nrecord('minus', -2.5)"],
                        params="x = 'a'\ny = 1.0")
    values = ["a b", "a/b", "a_b", '=HYPERLINK("http://evil.example","click")', "@SUM(1+1)*cmd|' /C calc'!A0"]
    grid = tmp_path / "g.yaml"
    grid.write_text(f"notebook: {nb}\nparameters:\n  x: {json.dumps(values)}\n  y: [-1.5]\n")   # JSON is YAML
    assert main(["batch", str(grid), "--out", str(tmp_path / "b"), "--workers", "2"]) == 0, capsys.readouterr().err
    notebooks = sorted(p.name for p in (tmp_path / "b").glob("*.ipynb"))
    assert len(notebooks) == 5
    with open(tmp_path / "b" / "results.csv", newline="", encoding="utf-8") as handle:
        raw = list(csv.DictReader(handle))
    assert sorted(r["notebook_output"] for r in raw) == notebooks   # each row its own notebook
    assert [r["x"] for r in raw] == ["a b", "a/b", "a_b", "'" + values[3], "'" + values[4]]
    assert [float(r["length"]) for r in raw] == [len(v) for v in values]   # each notebook ran with its own value
    assert {r["y"] for r in raw} == {"-1.5"} and {r["minus"] for r in raw} == {"-2.5"}   # numbers, unprefixed
    table = pd.read_csv(tmp_path / "b" / "results.csv")
    assert table["y"].dtype == float and table["minus"].tolist() == [-2.5] * 5
    for cell in (c for row in raw for c in row.values()):
        assert not (cell.startswith(FORMULA_STARTS) and not _is_number(cell)), cell
