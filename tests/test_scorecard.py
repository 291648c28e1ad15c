import math

import nbformat
import pytest

from vrs_helpers.scorecard import SCALAR_MIME, SCORECARD_MIME, Scorecard, compare, extract, printed_tolerance


def test_compare_and_tolerance():
    assert compare(0.095, 0.0952, printed_tolerance(3))
    assert not compare(0.095, 0.0956, printed_tolerance(3))
    assert compare(0.88, 0.875, printed_tolerance(2))  # half-way values match (book rounds half up)
    assert compare(float("nan"), float("nan"), 0)
    assert not compare(0.0, float("nan"), 1.0)


def test_match_states_and_frame():
    card = Scorecard("nb")
    assert card.check("Table 1", "x", 1.0, 1.04, 0.05, show=False).match == "true"
    assert card.check("Table 1", "y", 1.0, 1.2, 0.05, show=False).match == "false"
    assert card.check("Table 1", "z", 1.0, 1.2, 0.05, explanation="book rounds", show=False).match == "explained"
    df = card.to_frame()
    assert list(df["match"]) == ["true", "false", "explained"]
    assert "3 checks" in repr(card)
    with pytest.raises(ValueError):
        card.check("Table 1", "w", 1.0, 1.0, -1.0)


def test_extract_from_notebook_outputs():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    row = {"notebook": "nb", "ref": "Table 3.1", "quantity": "q", "book": 1.0, "ours": None, "tolerance": 0.1,
           "match": "false", "explanation": ""}
    cell.outputs = [nbformat.v4.new_output("display_data", data={SCORECARD_MIME: row, "text/plain": "x"}),
                    nbformat.v4.new_output("display_data", data={SCALAR_MIME: {"name": "s", "value": 2.5}})]
    nb.cells.append(cell)
    rows, scalars = extract(nb)
    assert rows[0]["ref"] == "Table 3.1" and math.isnan(rows[0]["ours"])
    assert scalars["s"] == 2.5 and "Table 3.1: q" in scalars


def test_flush_emits_pending_checks_as_one_list():
    nb = nbformat.v4.new_notebook()
    card = Scorecard("nb")
    card.check("Table 1", "a", 1.0, 1.0, 0.0, show=False)
    card.check("Table 1", "b", 2.0, 2.5, 0.1, show=False)
    captured = []
    import vrs_helpers.scorecard as sc

    original = sc._display
    sc._display = captured.append
    try:
        card.flush(visible=False)
        card.flush()  # nothing pending: emits nothing
    finally:
        sc._display = original
    assert len(captured) == 1 and "2 scorecard checks recorded" in captured[0]["text/plain"]
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("display_data", data=captured[0])]
    nb.cells.append(cell)
    rows, _ = extract(nb)
    assert [r["quantity"] for r in rows] == ["a", "b"] and [r["match"] for r in rows] == ["true", "false"]
