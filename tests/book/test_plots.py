"""The workbooks' figures (vrs_helpers.book.plots): each draws the numbers it is given (read back from the artists),
and every panel has labelled axes or a title a reader can read without the code."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402

from vrs_helpers.book import plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _labelled(fig):
    """Every panel says what it shows: a title, or both axis labels."""
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        assert ax.get_title() or (ax.get_xlabel() and ax.get_ylabel()), ax


def _bar_widths(ax):
    return [p.get_width() for p in ax.patches]


def test_feature_correlations_draws_undefined_as_undefined():
    r_in = pd.DataFrame({"r": [0.11, -0.14], "status": ["ok", "ok"]}, index=["overlap", "negation"])
    r_out = pd.DataFrame({"r": [0.45, np.nan], "status": ["ok", "constant feature"]}, index=["overlap", "negation"])
    fig = plots.feature_correlations({"in domain": r_in, "out of domain": r_out})
    left, right = fig.axes
    assert _bar_widths(left) == [0.11, -0.14] and _bar_widths(right) == [0.45, 0.0]
    assert right.patches[1].get_facecolor() == matplotlib.colors.to_rgba(plots.UNDEFINED)
    assert [t.get_text() for t in right.texts] == ["undefined (constant)"] and not left.texts
    assert (left.get_title(), right.get_title()) == ("in domain", "out of domain")
    _labelled(fig)


def test_grouped_bars_one_bar_per_cell():
    frame = pd.DataFrame({"entailed": [0.07, 0.12], "other": [-0.01, -0.05]}, index=["a", "b"])
    fig = plots.grouped_bars(frame, "correlation", "features vs correctness")
    assert sorted(_bar_widths(fig.axes[0])) == sorted(frame.to_numpy().ravel().tolist())
    _labelled(fig)


def test_leaky_ids_marks_baseline_and_model_without_ids():
    class Result:  # the two fields of InvarianceResult the figure reads
        def __init__(self, baseline, scores):
            self.baseline, self.scores = baseline, scores

    patients = pd.DataFrame({"patient_id": np.arange(50), "malignant": np.arange(50) % 2})
    results = {"id as nominal": Result(0.83, [0.77, 0.76, 0.78]), "f1 as ratio": Result(0.83, [0.83, 0.83, 0.83])}
    fig = plots.leaky_ids(patients, results, without_ids=0.773)
    left, right = fig.axes
    assert len(left.collections[0].get_offsets()) == 50
    assert sum(len(c.get_offsets()) for c in right.collections) == 6
    assert sorted(line.get_xdata()[0] for line in right.lines) == [0.773, 0.83]
    assert [t.get_text() for t in right.get_yticklabels()] == list(results)
    _labelled(fig)


def test_rule_regions_draws_the_thresholds():
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"crea": rng.gamma(2.0, 1.0, 500), "urine": rng.gamma(5.0, 300.0, 500)})
    fig = plots.rule_regions(data, "crea", "urine", {"crea": [1.2, 1.9], "urine": [200, 500]}, title="rule")
    ax = fig.axes[0]
    vertical = [line.get_xdata()[0] for line in ax.lines if line.get_xdata()[0] == line.get_xdata()[1]]
    horizontal = [line.get_ydata()[0] for line in ax.lines if line.get_ydata()[0] == line.get_ydata()[1]]
    assert vertical == [1.2, 1.9] and horizontal == [200, 500]
    assert isinstance(ax.collections[0], PolyCollection) and ax.collections[0].get_array().sum() == 500
    _labelled(fig)


def test_class_shares_stack_to_one():
    gold = pd.Series([0, 0, 1, 1, 1, 2], name="gold class")
    pred = pd.Series([0, 1, 1, 1, 2, 2], name="prediction")
    shares = pd.crosstab(gold, pred, normalize="index")
    fig = plots.class_shares(shares, "predictions by gold class")
    heights = np.zeros(3)
    for p in fig.axes[0].patches:
        heights[round(p.get_x() + p.get_width() / 2)] += p.get_height()
    assert np.allclose(heights, 1.0)
    _labelled(fig)


def test_agreement_curves_one_line_per_prevalence_and_coefficient():
    from vrs_helpers.book.agreement import paradox_grid

    grid = paradox_grid(50, [0.5, 0.9], 10)
    fig = plots.agreement_curves(grid, 50)
    assert len(fig.axes) == 3
    for ax, coef in zip(fig.axes, ["alpha", "pi", "kappa"], strict=True):
        curves = [line for line in ax.lines if line.get_label().startswith("prevalence")]
        assert len(curves) == 2
        first = grid[grid["prevalence"] == 0.5]
        assert np.allclose(curves[0].get_xdata(), 100 * first["percent_agreement"])
        assert np.allclose(curves[0].get_ydata(), first[coef])
    _labelled(fig)


def test_small_multiples_one_panel_per_pair_one_line_per_level():
    data = pd.DataFrame({"mode": np.repeat(["M", "P"], 12), "rater": np.tile(np.repeat(["1", "2"], 6), 2),
                         "sentence": np.tile(np.repeat(["a", "b"], 3), 4), "instantiation": np.tile([0, 1, 2], 8),
                         "score": np.arange(24, dtype=float)})
    fig = plots.small_multiples(data, "mode", "rater", "instantiation", "score", "sentence", title="scores")
    assert len(fig.axes) == 4
    assert all(len(ax.lines) == 2 for ax in fig.axes)
    assert list(fig.axes[3].lines[1].get_ydata()) == [21.0, 22.0, 23.0]   # P, rater 2, sentence b
    _labelled(fig)


def test_decision_studies_grid_and_level_means():
    from vrs_helpers.book.reliability import decision_study, level_means

    vc = pd.Series({"sentence": 0.05, "rater": 0.01, "sentence:rater": 0.02, "Residual": 0.03})
    studies = {(design, kind): decision_study(vc, "sentence", {"rater": [1, 2, 3]}, kind=kind)
               for design in ("A", "B") for kind in ("absolute", "relative")}
    fig = plots.decision_studies(studies, "n_rater", "n_rater", title="decision studies")
    assert len(fig.axes) == 4 and fig.axes[0].get_title() == "A: φ (absolute)"
    assert fig.axes[3].get_title() == "B: E ρ² (relative)"
    data = pd.DataFrame({"lr": [1, 1, 2, 2], "depth": [1, 2, 1, 2], "acc": [0.5, 0.7, 0.6, 0.8]})
    fig = plots.level_means(level_means(data, "acc", ["lr", "depth"]), "accuracy", "per level")
    assert len(fig.axes) == 2 and fig.get_suptitle() == "per level"
    _labelled(fig)


def test_cell_means_draw_estimates_and_intervals():
    means = pd.DataFrame({"cls": ["short", "long"] * 2, "system": ["A", "A", "B", "B"],
                          "emmean": [0.5, 0.6, 0.55, 0.7], "lower": [0.45, 0.52, 0.5, 0.61]})
    fig = plots.cell_means(means, "cls", "system", title="cells")
    bars = [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 2
    line, _, (segments,) = bars[1]
    assert np.allclose(line.get_ydata(), [0.55, 0.7])
    lows = [seg[0][1] for seg in segments.get_segments()]
    assert np.allclose(lows, [0.5, 0.61])      # the interval reaches down to the lower bound
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["A", "B"]
    _labelled(fig)


def test_budget_curve_and_fitted_lines_and_histograms():
    table = pd.DataFrame({"budget": [1, 10, 100], "mean": [0.76, 0.78, 0.79], "lower": [0.75, 0.775, 0.789],
                          "upper": [0.78, 0.786, 0.791]})
    fig = plots.budget_curve(table)
    line = fig.axes[0].containers[0][0]
    assert np.allclose(line.get_xdata(), [1, 10, 100]) and np.allclose(line.get_ydata(), table["mean"])
    _labelled(fig)
    fig = plots.fitted_lines({"A": 0.4, "B": 0.5}, {"A": 0.07, "B": 0.06}, np.log([2, 100]), xlabel="length",
                             ylabel="predicted TER")
    a = fig.axes[0].lines[0]
    assert np.isclose(a.get_xdata()[0], 2) and np.isclose(a.get_ydata()[-1], 0.4 + 0.07 * np.log(100))
    assert fig.axes[0].lines[1].get_label() == "B (slope 0.060)"
    fig = plots.histograms({"x": np.zeros(10), "y": np.ones(20)}, "difference", "two samples", bins=5)
    assert sum(p.get_height() for p in fig.axes[0].patches) == 30
    _labelled(fig)


def test_scores_by_system_three_views():
    rng = np.random.default_rng(1)
    data = pd.DataFrame({"system": np.repeat(["A", "B"], 40), "score": rng.normal(0.5, 0.1, 80),
                         "length": rng.integers(2, 80, 80)})
    data["cls"] = pd.Categorical(np.where(data["length"] <= 15, "short", "long"), categories=["short", "long"])
    fig = plots.scores_by_system(data, "score", "system", ["A", "B"], "length", "cls", score_label="TER",
                                 covariate_label="source length")
    assert len(fig.axes) == 3
    assert sum(len(c.get_offsets()) for c in fig.axes[1].collections) == 80
    assert [t.get_text() for t in fig.axes[2].get_xticklabels()] == ["short", "long"]
    _labelled(fig)


HOSTILE = [r"$\href{javascript:x}{y}$", "$a$ <b>", r"x\$ $$", "_{}^"]   # mathtext fails on the first


def _shown(fig) -> list[str]:
    """Every text of a drawn figure as matplotlib shows it; no text may be read as math (matplotlib's rule: a text
    with an even number of unescaped "$" is mathtext; otherwise "\\$" shows as "$"; a zero-width space shows as
    nothing)."""
    from matplotlib import cbook
    from matplotlib.text import Text

    fig.canvas.draw()   # mathtext that cannot be parsed raises here
    texts = [t.get_text() for t in fig.findobj(Text)]
    assert not [t for t in texts if cbook.is_math_text(t) and not t.startswith("$\\mathdefault{")]  # log ticks
    return [t.replace(r"\$", "$").replace("\u200b", "") for t in texts]


def test_names_from_the_data_are_drawn_as_they_are():
    """Issue 37: labels from the data (systems, levels, features, columns) are drawn literally in every figure."""
    a, b, c, d = HOSTILE
    r = pd.DataFrame({"r": [0.1, -0.2], "status": ["ok", "ok"]}, index=[a, b])
    shown = _shown(plots.feature_correlations({c: r}))
    assert {a, b, c} <= set(shown)
    shown = _shown(plots.grouped_bars(pd.DataFrame({a: [0.1, 0.2], b: [0.3, -0.1]}, index=[c, d]), "r", "t"))
    assert {a, b, c, d} <= set(shown)
    shares = pd.crosstab(pd.Series([a, a, b], name=c), pd.Series([d, b, b], name="p"), normalize="index")
    assert {a, b, d, f"share of the {c}"} <= set(_shown(plots.class_shares(shares, "t")))
    data = pd.DataFrame({"mode": np.repeat([a, b], 6), "rater": np.tile(np.repeat(["1", c], 3), 2),
                         "sentence": d, "instantiation": np.tile([0, 1, 2], 4), "score": np.arange(12.0)})
    shown = _shown(plots.small_multiples(data, "mode", "rater", "instantiation", "score", "sentence"))
    assert f"{a}\nrater {c}" in shown and f"sentence {d}" in shown
    means = pd.DataFrame({c: [a, b] * 2, d: [a, a, b, b], "emmean": [0.5, 0.6, 0.55, 0.7],
                          "lower": [0.45, 0.52, 0.5, 0.61]})
    assert {a, b, c, d} <= set(_shown(plots.cell_means(means, c, d)))
    assert f"{a} (slope 0.070)" in _shown(plots.fitted_lines({a: 0.4}, {a: 0.07}, np.log([2, 100]), xlabel="x",
                                                             ylabel="y"))
    assert {a, b} <= set(_shown(plots.histograms({a: np.zeros(5), b: np.ones(5)}, "d", "t", bins=3)))
    rng = np.random.default_rng(1)
    data = pd.DataFrame({"system": np.repeat([a, b], 20), "score": rng.normal(0.5, 0.1, 40),
                         "length": rng.integers(2, 80, 40)})
    data[c] = np.where(data["length"] <= 15, d, "long")
    assert {a, b, d} <= set(_shown(plots.scores_by_system(data, "score", "system", [a, b], "length", c)))
    from vrs_helpers.book.reliability import decision_study, level_means

    vc = pd.Series({"sentence": 0.05, "rater": 0.01, "sentence:rater": 0.02, "Residual": 0.03})
    studies = {(a, "absolute"): decision_study(vc, "sentence", {"rater": [1, 2]})}
    assert f"{a}: φ (absolute)" in _shown(plots.decision_studies(studies, "n_rater", "n_rater"))
    lv = pd.DataFrame({c: [a, a, b, b], "acc": [0.5, 0.7, 0.6, 0.8], "depth": [1, 2, 1, 2]})
    assert {a, b, c} <= set(_shown(plots.level_means(level_means(lv, "acc", [c, "depth"]), "acc", "t")))
