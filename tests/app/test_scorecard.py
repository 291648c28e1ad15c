import math

import nbformat
import pandas as pd
import pytest

from vrs_helpers.app.scorecard import (
    COLUMNS,
    SCALAR_MIME,
    SCORECARD_MIME,
    Scorecard,
    ScorecardError,
    accept_baseline,
    compare,
    extract,
    load_baseline,
    printed_tolerance,
)


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
    # an explanation alone does not excuse a mismatch: it needs a second reference that ours matches
    assert card.check("Table 1", "z", 1.0, 1.2, 0.05, explanation="book rounds", show=False).match == "false"
    assert card.check("Table 1", "u", 1.0, 1.2, 0.05, alternative="lme4", alternative_value=1.23,
                      explanation="the book used another optimizer", show=False).match == "explained"
    assert card.check("Table 1", "v", 1.0, 1.2, 0.05, alternative="lme4", alternative_value=1.3,
                      explanation="the book used another optimizer", show=False).match == "false"
    assert card.check("Table 1", "w", 1.5, 1.46, printed="1.5", show=False).match == "true"  # tolerance 0.05
    df = card.to_frame()
    assert list(df["match"]) == ["true", "false", "false", "explained", "false", "true"]
    assert df.loc[3, "alternative"] == "lme4" and df.loc[3, "alternative_value"] == 1.23
    assert "6 checks" in repr(card)


@pytest.mark.parametrize("kwargs,msg", [
    ({"book": 1.0, "ours": 1.0, "tolerance": -1.0}, "non-negative"),
    ({"book": 0.02, "ours": 0.0, "tolerance": 0.5}, "exceeds the value"),  # Table 3.1's zero rows had +-0.5
    ({"book": 0.0, "ours": 1e-9, "tolerance": 0.5}, "prints 0"),
    ({"book": 1.0, "ours": 1.0}, "printed"),
    ({"book": 1.0, "ours": 1.0, "tolerance": 0.1, "alternative": "lme4"}, "needs its value"),
])
def test_tolerances_that_cannot_fail_are_refused(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        Scorecard("nb").check("Table 1", "q", show=False, **kwargs)


def test_zero_checked_against_an_alternative_with_a_tight_tolerance():
    card = Scorecard("nb")
    c = card.check("Table 3.1", "rater: variance", 0.0, 3e-12, 1e-9, alternative="lme4 (singular fit)",
                   alternative_value=0.0, show=False)
    assert c.match == "true"
    assert card.check("Table 3.1", "rater: variance", 0.0, 0.002, 1e-9, alternative="lme4",
                      alternative_value=0.0, show=False).match == "false"


def test_regressions_against_a_baseline(tmp_path):
    card = Scorecard("nb", analysis="liver, gold")
    card.check("T", "a", 1.0, 1.0, 0.1, show=False)  # true, was true
    card.check("T", "b", 1.0, 2.0, 0.1, show=False)  # false, was false: a known finding, not a regression
    card.check("T", "c", 1.0, 2.0, 0.1, show=False)  # false, was true: regression
    card.check("T", "d", 1.0, 2.0, 0.1, show=False)  # false and new: regression
    card.check("T", "e", 1.0, 1.0, 0.1, show=False)  # true, was false: an improvement
    base = pd.DataFrame({"notebook": "nb", "analysis": "liver, gold", "ref": "T", "quantity": list("abce"),
                         "book": 1.0, "match": ["true", "false", "true", "false"]})
    bad = card.regressions(base)
    assert list(bad["quantity"]) == ["c", "d"]
    # another analysis of the same notebook is a different row
    other = Scorecard("nb", analysis="kidney, gold")
    other.check("T", "a", 1.0, 2.0, 0.1, show=False)
    assert list(other.regressions(base)["quantity"]) == ["a"]
    # accept: the file keeps the rows of analyses not run
    accept_baseline(base, tmp_path)
    accept_baseline(other.to_frame(), tmp_path)
    saved = load_baseline(tmp_path / "scorecard_baseline.csv")
    assert sorted(set(saved["analysis"])) == ["kidney, gold", "liver, gold"] and len(saved) == 5
    assert not len(other.regressions(tmp_path / "scorecard_baseline.csv"))
    # an analysis with no checks at all (a parameter set the book prints nothing for) has no regressions
    assert not len(Scorecard("nb", analysis="nothing").regressions(tmp_path / "scorecard_baseline.csv"))


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
    assert scalars == {"s": 2.5}  # scorecard rows are checks, not recorded scalars (vrs batch: checks.csv)


def test_flush_emits_pending_checks_as_one_list():
    nb = nbformat.v4.new_notebook()
    card = Scorecard("nb")
    card.check("Table 1", "a", 1.0, 1.0, 0.0, show=False)
    card.check("Table 1", "b", 2.0, 2.5, 0.1, show=False)
    captured = []
    import vrs_helpers.app.scorecard as sc

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


def test_check_p_reads_the_printed_form():
    card = Scorecard("nb")
    below = card.check_p("Table 4.2", "A - B: p", "< 0.0001", 3e-8, show=False)
    assert below.match == "true" and below.book == 0.00005 and below.tolerance == 0.00005
    assert "(printed '< 0.0001')" in below.quantity
    assert card.check_p("Table 4.2", "A - B: p", "< 0.0001", 0.0002, show=False).match == "false"
    exact = card.check_p("Table 4.3", "p", "0.2683", 0.26834, show=False)
    assert exact.match == "true" and exact.tolerance == pytest.approx(5e-5)
    assert card.check_p("Table 4.3", "p", "0.2683", 0.26836, show=False).match == "false"


def test_explained_needs_the_reference_to_miss_the_book_too():
    """A second reference that matches ours but also the book does not explain our miss (issue 23): the book's
    number is reachable, so the row is false. Tolerance 5e-9 (the printed precision of 3.18e-06)."""
    from vrs_helpers.app.scorecard import Scorecard

    card = Scorecard("t")
    # Table 3.4's learning_rate: book 3.18e-06, ours 3.18603e-06, lme4 3.18463e-06 (within 5e-9 of the book)
    row = card.check("Table 3.4", "learning_rate", 3.18e-06, 3.18603e-06, printed="3.18e-06",
                     alternative="lme4", alternative_value=3.18463e-06, explanation="flat surface", show=False)
    assert row.match == "false"
    # a reference that misses the book as ours does explains it
    row = card.check("Table 3.11", "encoder_dropout", 9.78e-05, 9.78701e-05, printed="9.78e-05",
                     alternative="lme4", alternative_value=9.78698e-05, explanation="the book truncates", show=False)
    assert row.match == "explained"
    # a reference that misses ours is no explanation either
    row = card.check("T", "q", 1.0, 1.2, printed="1.0", alternative="lme4", alternative_value=1.5,
                     explanation="x", show=False)
    assert row.match == "false"


def test_tolerance_of_percentages_is_the_fraction_tolerance():
    from vrs_helpers.app.scorecard import tolerance_of

    assert tolerance_of("76.6%") == pytest.approx(0.0005, rel=1e-8)   # 76.6 % checked as 0.766 +- 0.0005
    assert tolerance_of("80 %") == pytest.approx(0.005, rel=1e-8)
    assert tolerance_of("-0.00325") == pytest.approx(5e-6, rel=1e-8)


def test_check_variance_table_rows_and_statuses():
    """Two printed rows: one reproduced, one missed where the reference misses the book as ours does (explained);
    a printed 0 checked with the tight tolerance against the reference."""
    from vrs_helpers.app.scorecard import Scorecard, check_variance_table

    ours = pd.DataFrame({"variance": [0.020, 0.0, 0.08], "percent": [20.0, 0.0, 80.0]},
                        index=["item", "seed", "Residual"])
    book = [{"component": "item", "label": "item", "variance": "0.020", "percent": "20.0"},
            {"component": "seed", "label": "seed", "variance": "0", "percent": "0"},
            {"component": "Residual", "label": "residual", "variance": "0.07", "percent": "80.0"}]
    ref = {"variance": {"item": 0.0200001, "seed": 1e-9, "Residual": 0.0800002},
           "percent": {"item": 20.0, "seed": 0.0, "Residual": 80.0}}
    card = Scorecard("t")
    table = check_variance_table(card, "Table X", ours, book, ref, "lme4 1.1-31",
                                 {("Residual", "variance"): "the book's typo"})
    assert list(table["component"]) == ["item", "seed", "residual"]
    assert list(table["variance match"]) == ["true", "true", "explained"]
    assert list(table["percent match"]) == ["true", "true", "true"]
    assert "lme4 variance" in table.columns and len(card.checks) == 6


def test_percent_resolution_of_the_authors_code():
    """Issue 41 (items 3, 14): mt_reliability_model.Rmd's ICC() rounds a share to 4 decimals (a percent to 2) and
    the printout drops trailing zeros: a printed "0.1" is 0.10 +- 0.005 (0.114 misses it), a printed "0" is
    0.00 +- 0.005 (0.0013 meets it); a percent printed with fewer digits than the resolution ("81.9") keeps its
    printed tolerance. Without ``percent_decimals`` the printed digits rule ("0.1" +- 0.05; "0" at 1e-4)."""
    from vrs_helpers.app.scorecard import Scorecard, check_variance_table

    ours = pd.DataFrame({"variance": [0.09, 1.1e-4, 1.3e-6], "percent": [81.94, 0.114, 0.0013]},
                        index=["s", "enc", "seed"])
    book = [{"component": "s", "label": "s", "variance": "0.09", "percent": "81.9"},
            {"component": "enc", "label": "enc", "variance": "0.00011", "percent": "0.1"},
            {"component": "seed", "label": "seed", "variance": "0.0000013", "percent": "0"}]
    ref = {"variance": {"s": 0.09, "enc": 1.1e-4, "seed": 1.3e-6}, "percent": {"s": 81.94, "enc": 0.114,
                                                                               "seed": 0.0013}}
    by_res = check_variance_table(Scorecard("t"), "T", ours, book, ref, "lme4 1.1-31", percent_decimals=2)
    assert list(by_res["percent match"]) == ["true", "false", "true"]
    card = Scorecard("t")
    printed = check_variance_table(card, "T", ours, book, ref, "lme4 1.1-31")
    assert list(printed["percent match"]) == ["true", "true", "false"]
    tolerances = {c.quantity: c.tolerance for c in card.checks}
    assert tolerances["enc: percent"] == pytest.approx(0.05) and tolerances["seed: percent"] == 1e-4


def test_check_interval_states_the_interval_in_the_row():
    """Issue 41 (item 13): a D2 the authors print with floor() ("95") stands for [95, 96): 94.79 misses it, 95.7
    meets it; the row holds the midpoint and half the width and its quantity says what the printed number means."""
    from vrs_helpers.app.scorecard import Scorecard, ScorecardError

    card = Scorecard("t")
    miss = card.check_interval("Section 2.4.3", "D2 (%)", "95", 95, 96, 94.79, meaning="floor(): [95, 96)",
                               show=False)
    hit = card.check_interval("Section 2.4.3", "D2 (%)", "95", 95, 96, 95.7, meaning="floor(): [95, 96)",
                              show=False)
    assert (miss.match, hit.match) == ("false", "true")
    assert miss.book == 95.5 and miss.tolerance == pytest.approx(0.5)
    assert miss.quantity == "D2 (%) (printed '95', interval check: floor(): [95, 96))"
    with pytest.raises(ScorecardError, match="low <= high"):
        card.check_interval("S", "q", "1", 2, 1, 1.5, meaning="m")


def test_rounding_tolerance_is_the_overlap_of_two_intervals():
    """Issue 41 (items 4-7): a number computed from rounded inputs. MBM Table 1's BOLD ATE: the printed means 0.00236
    and 0.00456 (+- 5e-6 each) give -0.00220, anywhere in [-0.00221, -0.00219] before rounding; the printed -0.00219
    stands for [-0.002195, -0.002185]: the intervals overlap, so the row is true (a fixed last-digit tolerance says
    false). A printed value beyond the range's reach stays false."""
    from vrs_helpers.app.scorecard import Scorecard, ScorecardError, rounding_tolerance

    ours, low, high = 0.00236 - 0.00456, 0.00236 - 0.00456 - 1e-5, 0.00236 - 0.00456 + 1e-5
    tol = rounding_tolerance("-0.00219", ours, low, high)
    assert tol == pytest.approx(5e-6 + 1e-5)   # ours lies below the book: widened by high - ours
    card = Scorecard("t")
    assert card.check("MBM Table 1", "ATE", -0.00219, ours, tol, show=False).match == "true"
    assert card.check("MBM Table 1", "ATE", -0.00219, ours, printed="-0.00219", show=False).match == "false"
    far = rounding_tolerance("-0.00215", ours, low, high)
    assert card.check("MBM Table 1", "ATE", -0.00215, ours, far, show=False).match == "false"
    assert rounding_tolerance("-0.00225", ours, low, high) == pytest.approx(5e-6 + 1e-5)   # above: ours - low
    with pytest.raises(ScorecardError, match="rounding range"):
        rounding_tolerance("1", 2.0, 0.0, 1.0)


def test_reference_rows_are_a_kind_apart():
    """Ours against another implementation is a reference row (issue 23): true or false, never explained, counted
    apart; a book row may not name another implementation as its source."""
    card = Scorecard("nb")
    book = card.check("Section 2.4.3", "D2 (%)", 62, 64.80, printed="62", alternative="mgcv 1.8-41",
                      alternative_value=64.8019, explanation="training vs test data", show=False)
    ref = card.check_reference("Section 2.4.3 (mgcv, test set)", "D2 (%)", 64.8019, 64.8043, 0.01, show=False)
    miss = card.check_reference("Section 2.4.3 (mgcv, test set)", "D2 (%) k", 94.4286, 94.4124, 0.01,
                                explanation="random knot subsets", show=False)
    assert (book.kind, book.match) == ("book", "explained")
    assert (ref.kind, ref.match) == ("reference", "true") and (miss.kind, miss.match) == ("reference", "false")
    df = card.to_frame()
    assert list(df.columns) == COLUMNS and list(df["kind"]) == ["book", "reference", "reference"]
    assert card.counts() == {"book": {"explained": 1}, "reference": {"true": 1, "false": 1}}
    assert "book {'explained': 1}; reference {'true': 1, 'false': 1}" in repr(card)
    shown = card.table()
    assert list(shown.columns)[0] == "kind" and list(shown["kind"]) == ["book", "reference", "reference"]
    assert list(card.table(kind="book")["quantity"]) == ["D2 (%)"] and "kind" not in card.table(kind="book")
    for bad in ("Figure 3.5 (lme4/emmeans, partial grid)", "Section 2.4.3 (mgcv, test set)"):
        with pytest.raises(ValueError, match="kind='reference'"):
            card.check(bad, "q", 1.0, 1.0, 1e-6, show=False)
    with pytest.raises(ValueError, match="takes no alternative"):
        card.check("T (lme4)", "q", 1.0, 1.0, 1e-6, kind="reference", alternative="x", alternative_value=1.0,
                   explanation="y", show=False)
    with pytest.raises(ValueError, match="names the implementation"):
        card.check_reference("Table 3.4", "q", 1.0, 1.0, 1e-6, show=False)
    with pytest.raises(ValueError, match="kind must be"):
        card.check("T", "q", 1.0, 1.0, 1e-6, kind="paper", show=False)


def test_a_tolerance_may_not_exceed_the_printed_precision():
    card = Scorecard("nb")
    assert card.check("T", "q", 62, 62.4, 0.5, printed="62", show=False).match == "true"
    with pytest.raises(ValueError, match="exceeds the printed precision"):
        card.check("T", "q", 0.517, 0.5175, 0.005, printed="0.517", show=False)


def test_a_vanished_row_is_a_regression(tmp_path):
    """A row the baseline records for this notebook and analysis that the run no longer has (a check removed or
    renamed) is reported; rows of other notebooks and analyses are not."""
    base = pd.DataFrame({"notebook": ["nb", "nb", "nb", "other"], "analysis": ["", "", "b", ""],
                         "ref": "T", "quantity": ["a", "gone", "x", "y"], "book": [1.0, 2.0, 3.0, 4.0],
                         "match": ["true", "explained", "true", "false"]})
    card = Scorecard("nb")
    card.check("T", "a", 1.0, 1.0, 0.1, show=False)
    bad = card.regressions(base, vanished=True)
    assert list(bad["quantity"]) == ["gone"] and list(bad["match"]) == ["vanished"]
    assert list(bad["baseline"]) == ["explained"] and list(bad["kind"]) == ["book"]
    # inside a notebook (which cannot tell its defaults from other parameters) only on request
    assert not len(card.regressions(base))
    # a card without any row reports every committed row of its notebook and analysis
    assert list(Scorecard("nb", analysis="b").regressions(base, vanished=True)["quantity"]) == ["x"]
    # the module function: the scope defaults to the (notebook, analysis) pairs of the rows
    from vrs_helpers.app.scorecard import regressions

    assert list(regressions(card.to_frame(), base)["quantity"]) == ["gone"]
    assert not len(regressions(card.to_frame(), base, scope=[]))
    # accepting the run drops the vanished row and records the kind
    accept_baseline(base, tmp_path)
    accept_baseline(card.to_frame(), tmp_path)
    saved = load_baseline(tmp_path / "scorecard_baseline.csv")
    assert list(saved.columns) == ["notebook", "analysis", "ref", "quantity", "kind", "book", "match"]
    assert "gone" not in set(saved["quantity"])
    assert not len(card.regressions(tmp_path / "scorecard_baseline.csv", vanished=True))


def test_an_unidentified_row_is_not_explained_by_one_optimizers_split():
    """Table 3.9: two aliased factors, only their sum is identified. lme4's split is one optimizer's, not a
    reference, so the row is checked against the book alone and is false with the reason (issue 23, item 5)."""
    from vrs_helpers.app.scorecard import check_variance_table

    ours = pd.DataFrame({"variance": [0.000126, 0.000127, 0.09], "percent": [0.104, 0.115, 81.9]},
                        index=["enc", "ddh", "Residual"])
    book = [{"component": "enc", "label": "enc", "variance": "0.000108", "percent": "0.10"},
            {"component": "ddh", "label": "ddh", "variance": "0.000145", "percent": "0.13"}]
    ref = {"variance": {"enc": 0.000128, "ddh": 0.000125}, "percent": {"enc": 0.116, "ddh": 0.113}}
    card = Scorecard("t")
    # with lme4's split as the second reference the row would be explained ...
    check_variance_table(card, "Table 3.9", ours, book, ref, "lme4 1.1-31", {("ddh", "percent"): "flat surface"})
    assert [c for c in card.checks if c.quantity == "ddh: percent"][0].match == "explained"
    # ... but the split is not identified: no reference
    card = Scorecard("t")
    table = check_variance_table(card, "Table 3.9", ours, book, ref, "lme4 1.1-31",
                                 {("ddh", "percent"): "flat surface"},
                                 unidentified={("ddh", "percent"): "only the sum is identified"})
    row = [c for c in card.checks if c.quantity == "ddh: percent"][0]
    assert row.match == "false" and row.alternative == "" and row.explanation == "only the sum is identified"
    assert list(table["percent match"]) == ["true", "false"]


def test_the_committed_notebooks_follow_the_rules():
    """The scorecard rows in the committed notebooks' outputs (the default analysis of each workbook): every
    explained row is a book row whose second reference matches ours and misses the book; no book row names another
    implementation; reference rows are true or false; and the rows are those of notebooks/scorecard_baseline.csv
    (kind and status), so the committed outputs are current."""
    from pathlib import Path

    from vrs_helpers.app.scorecard import IMPLEMENTATIONS

    root = Path(__file__).resolve().parent.parent.parent / "notebooks"
    base = load_baseline(root / "scorecard_baseline.csv").set_index(["notebook", "analysis", "ref", "quantity"])
    n, seen = 0, set()
    for path in sorted(root.glob("0*.ipynb")):
        rows, _ = extract(path)
        for r in rows:
            n += 1
            seen.add(r["notebook"])
            kind, match = r.get("kind", "book"), r["match"]
            if match == "explained":
                assert kind == "book" and r["alternative"], r
                assert abs(r["alternative_value"] - r["ours"]) <= r["tolerance"], r
                assert abs(r["alternative_value"] - r["book"]) > r["tolerance"], r
            if kind == "book":
                assert not any(name in r["ref"].lower() for name in IMPLEMENTATIONS), r
            else:
                assert match in ("true", "false") and not r["alternative"], r
            committed = base.loc[(r["notebook"], r.get("analysis") or "", r["ref"], r["quantity"])]
            assert (committed["kind"], committed["match"]) == (kind, match), (path.name, r["quantity"])
    assert n == base.index.get_level_values("notebook").isin(seen).sum()   # and no committed row is missing


def test_regressions_without_a_baseline_file(tmp_path):
    """A notebook run where no baseline lies beside it (vrs analyze runs workbook 07 from a temporary folder): no
    regressions, with or without the check for vanished rows, and no error on an empty card."""
    from vrs_helpers.app.scorecard import Scorecard

    card = Scorecard("07_your_evaluation")
    missing = tmp_path / "no_baseline.csv"
    assert len(card.regressions(missing)) == 0 and len(card.regressions(missing, vanished=True)) == 0
    card.check("Table 9.9", "a value", 1.0, 1.0, tolerance=0.0)
    assert len(card.regressions(missing)) == 0


def _captured(fn):
    """What a scorecard call displays (the MIME bundles), without a notebook."""
    import vrs_helpers.app.scorecard as sc

    captured, original = [], sc._display
    sc._display = captured.append
    try:
        fn()
    finally:
        sc._display = original
    return captured


def test_check_table_makes_the_same_rows_as_single_checks():
    """A table of (quantity, book value, ours) gives the rows that one check per row gives: printed precision,
    explicit tolerances, alternatives, p-value bounds, reference rows, and NaN cells as the defaults."""
    rows = pd.DataFrame([
        {"ref": "Table 1", "quantity": "a", "printed": "0.095", "ours": 0.0952},
        {"ref": "Table 1", "quantity": "b", "book": 4.4, "printed": "4.4", "ours": 4.42105},
        {"ref": "Table 1", "quantity": "c", "book": 0.766, "printed": "76.6%", "ours": 23 / 30,
         "alternative": "exact 23/30", "alternative_value": 23 / 30, "explanation": "the book adds rounded values"},
        {"ref": "Table 1", "quantity": "d", "book": 1.0, "tolerance": 0.0, "ours": 0.0},
        {"ref": "Table 4.2", "quantity": "A - B: p", "printed": "< 0.0001", "ours": 3e-8},
        {"ref": "Section 2 (mgcv)", "quantity": "D2", "book": 39.7235, "tolerance": 0.01, "ours": 39.7236,
         "kind": "reference"},
        {"ref": "Table 1", "quantity": "undefined", "book": float("nan"), "tolerance": 0.0, "ours": float("nan")},
    ], index=list("abcdefg"))
    table, single = Scorecard("nb"), Scorecard("nb")
    made = table.check_table(rows, show=False)
    single.check("Table 1", "a", 0.095, 0.0952, printed="0.095", show=False)
    single.check("Table 1", "b", 4.4, 4.42105, printed="4.4", show=False)
    single.check("Table 1", "c", 0.766, 23 / 30, printed="76.6%", alternative="exact 23/30",
                 alternative_value=23 / 30, explanation="the book adds rounded values", show=False)
    single.check("Table 1", "d", 1.0, 0.0, tolerance=0.0, show=False)
    single.check_p("Table 4.2", "A - B: p", "< 0.0001", 3e-8, show=False)
    single.check_reference("Section 2 (mgcv)", "D2", 39.7235, 39.7236, 0.01, show=False)
    single.check("Table 1", "undefined", float("nan"), float("nan"), tolerance=0.0, show=False)
    pd.testing.assert_frame_equal(table.to_frame(), single.to_frame())
    assert list(made.index) == list("abcdefg")
    # the statuses follow from the numbers: 0.0952 within 5e-4 of 0.095; 4.42105 misses 4.4 by more than 0.05;
    # 23/30 misses 0.766 by 6.7e-4 > 5e-4 but matches the exact value, which misses the book: explained
    assert list(made["match"]) == ["true", "true", "explained", "false", "true", "true", "true"]
    assert made.loc["e", "quantity"] == "A - B: p (printed '< 0.0001')"


def test_check_table_refuses_unknown_and_missing_columns():
    card = Scorecard("nb")
    with pytest.raises(ScorecardError, match="unknown: \\['explaination'\\]"):
        card.check_table([{"ref": "T", "quantity": "q", "book": 1.0, "ours": 1.0, "tolerance": 0.0,
                           "explaination": "typo"}])
    with pytest.raises(ScorecardError, match="missing: \\['ours'\\]"):
        card.check_table([{"ref": "T", "quantity": "q", "book": 1.0, "tolerance": 0.0}])
    with pytest.raises(ScorecardError, match="give the number as printed"):
        card.check_table([{"ref": "T", "quantity": "q", "book": 1.0, "ours": 1.0}])
    assert card.checks == []


def test_check_table_shows_one_table_that_vrs_reproduce_collects():
    card = Scorecard("nb")
    shown = _captured(lambda: card.check_table([{"ref": "T", "quantity": "q", "printed": "12", "ours": 12.4},
                                                {"ref": "T", "quantity": "r", "printed": "12", "ours": 12.6}]))
    assert len(shown) == 1 and "2 scorecard checks recorded" in shown[0]["text/plain"]
    assert [r["match"] for r in shown[0][SCORECARD_MIME]] == ["true", "false"]


def test_finish_shows_the_card_and_fails_on_a_regression(tmp_path):
    card = Scorecard("nb")
    card.check("T", "kept", 1.0, 1.0, tolerance=0.0, show=False)
    card.check("T", "lost", 2.0, 2.5, tolerance=0.1, show=False)
    card.check_reference("T (lme4)", "ref", 1.0, 1.0, 1e-6, show=False)
    recorded = card.to_frame()   # the committed statuses: "lost" is a known finding, not a regression
    shown = _captured(lambda: card.finish(recorded))
    texts = [b["text/plain"] for b in shown]
    assert len(shown) == 4 and "Not plain matches" in texts[1] and "reference row" in texts[1]
    assert "lost" in texts[2] and "kept" not in texts[2]
    assert texts[3] == "3 checks: book rows {'true': 1, 'false': 1}; reference rows {'true': 1}"
    base = card.to_frame().assign(match="true")   # a baseline in which every row was true
    with pytest.raises(ScorecardError, match="worse than the committed baseline.*lost"):
        _captured(lambda: card.finish(base))
    clean = Scorecard("nb")
    clean.check("T", "kept", 1.0, 1.0, tolerance=0.0, show=False)
    assert [b["text/plain"] for b in _captured(lambda: clean.finish(tmp_path / "none.csv"))] == [
        repr(clean.table()), "1 checks: book rows {'true': 1}"]


def test_says_holds_the_prose_to_the_computation():
    """Issue 53: a number the Markdown states is checked at its printed precision (a percentage as a fraction,
    thousands separators ignored); every drifted number is named."""
    from vrs_helpers.app.scorecard import says

    says(("0.095", 0.0952), ("60%", 0.6), ("9,815", 9815), ("76.6 %", 0.7662), ("-0.071", -0.0714),
         ("−0.14", -0.1368), ("4.8e-12", 4.77e-12), ("0.80", 0.8004))
    with pytest.raises(ScorecardError, match=r"0\.095 \(computed: 0\.0962\); 60% \(computed: 0\.62\)"):
        says(("0.095", 0.0962), ("60%", 0.62), ("12", 12.4))
    with pytest.raises(ScorecardError, match="0.80"):
        says(("0.80", 0.806))
