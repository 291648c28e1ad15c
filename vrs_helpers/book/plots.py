"""The workbooks' figures: each draws one of the book's figures (or a figure beside one) from the results the
book's methods return, with labels a reader can read without the code, and returns the matplotlib figure.

The figures of a single method live beside it (:func:`vrs_helpers.book.circularity.plot_shapes`,
:func:`vrs_helpers.book.reliability.plot_decision_study`, ``ResamplingResult.plot``); this module holds the figures
that combine data and results the way a workbook shows them. matplotlib is imported when a figure is drawn.
Every label that comes from the data (a feature, level, system or column name) is drawn as its characters
(:func:`vrs_helpers.literal.plot_text`: a "$" in it starts no math); a title or axis label given by the caller is
drawn as given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..literal import plot_text

#: the colours of the book's systems and classes, in order
COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")
UNDEFINED = "#bbbbbb"


def _pyplot():
    import matplotlib.pyplot as plt

    return plt


def _literal_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its row and column labels and their names through :func:`plot_text` (pandas draws them as
    tick labels, legend entries and axis labels)."""
    out = frame.rename(index=plot_text, columns=plot_text)
    out.index.names = [None if n is None else plot_text(n) for n in frame.index.names]
    out.columns.names = [None if n is None else plot_text(n) for n in frame.columns.names]
    return out


def _levels(values: pd.Series) -> list:
    """The levels of a column in their order: a categorical's categories, else the values in order of appearance."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        return list(values.cat.categories)
    return list(pd.unique(values))


def feature_correlations(panels: Mapping[str, pd.DataFrame], title: str = "Feature-label correlations"):
    """Correlation of each feature with the label, one panel per dataset (book Figures 2.2 and 2.3).

    ``panels``: title -> the frame of :func:`vrs_helpers.book.validity.feature_label_correlations` indexed by
    feature (columns ``r`` and ``status``). A correlation that is undefined (a constant feature or label, status
    other than "ok") is drawn as an empty grey bar labelled "undefined (constant)", never as 0."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 3.8), sharey=True, squeeze=False)
    for ax, (name, r) in zip(axes[0], panels.items(), strict=True):
        values = r["r"].fillna(0.0)
        defined = r["status"] == "ok"
        colours = [(COLOURS[0] if x >= 0 else COLOURS[1]) if ok else UNDEFINED for x, ok in
                   zip(values, defined, strict=True)]
        ax.barh([plot_text(f) for f in r.index], values, color=colours)
        for i, ok in enumerate(defined):
            if not ok:
                ax.text(0.005, i, "undefined (constant)", va="center", fontsize=8, color="#555555")
        ax.axvline(0, color="black", lw=0.8)
        ax.set_title(plot_text(name))
        ax.set_xlabel("correlation with the label")
        ax.grid(alpha=0.3, axis="x")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def grouped_bars(frame: pd.DataFrame, xlabel: str, title: str):
    """Horizontal bars, one group per row of ``frame`` and one bar per column (e.g. a correlation per feature in
    two subsets of the data), with the zero line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.25 * len(frame) * max(1, frame.shape[1]) + 1.8))
    _literal_frame(frame).plot.barh(ax=ax, color=list(COLOURS[:frame.shape[1]]))
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return fig


def leaky_ids(patients: pd.DataFrame, results: Mapping[str, object], without_ids: float, seed: int = 0):
    """Left: the labels against the patient IDs (book Figure 2.6, here on simulated data); right: the test accuracy
    after every random permissible transformation of each check of :func:`transformation_invariance_test`, with the
    untransformed accuracy and that of the same model without the IDs.

    ``patients``: columns ``patient_id`` and ``malignant``; ``results``: check name -> ``InvarianceResult``."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
    jitter = np.random.default_rng(seed).uniform(-0.15, 0.15, len(patients))
    left.scatter(patients["patient_id"] + 1, patients["malignant"] + jitter, s=4, alpha=0.3, c=patients["malignant"],
                 cmap="coolwarm")
    left.set_xscale("log")
    left.set_yticks([0, 1], ["benign", "malignant"])
    left.set_xlabel("patient ID (log scale)")
    left.set_title("labels against patient IDs (cf. Figure 2.6)", fontsize=10)
    names = list(results)
    for i, name in enumerate(names, start=1):
        scores = np.asarray(results[name].scores)
        right.scatter(scores, i + np.random.default_rng(i).uniform(-0.12, 0.12, len(scores)), s=14, alpha=0.7)
    right.set_yticks(range(1, len(names) + 1), [plot_text(n) for n in names])
    right.axvline(results[names[0]].baseline, color="C3", ls="--", label="untransformed")
    right.axvline(without_ids, color="0.4", ls=":", label="model without patient_id")
    repetitions = len(results[names[0]].scores)
    right.set_xlabel(f"test accuracy after {repetitions} random permissible transformations")
    right.set_title("the model retrained after each transformation", fontsize=10)
    right.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def rule_regions(data: pd.DataFrame, x: str, y: str, thresholds: Mapping[str, Sequence[float]], *,
                 xlabel: str | None = None, ylabel: str | None = None, title: str = "", quantile: float = 0.999,
                 ylog: bool = True):
    """The joint distribution of the two features of a labelling rule with the rule's thresholds (book Figure
    2.13): a hexbin of the counts (log colour scale), both features clipped at their ``quantile`` so that a few
    extreme values do not squeeze the picture; dashed lines at ``thresholds[x]`` and ``thresholds[y]``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lim_x, lim_y = data[x].quantile(quantile), data[y].quantile(quantile)
    low_y = 10 if ylog else None
    hb = ax.hexbin(data[x].clip(upper=lim_x), data[y].clip(lower=low_y, upper=lim_y), gridsize=70, bins="log",
                   yscale="log" if ylog else "linear", mincnt=1, cmap="viridis")
    fig.colorbar(hb, ax=ax, label="data points (log scale)")
    for c in thresholds.get(x, ()):
        ax.axvline(c, color="tab:red", lw=0.8, ls="--")
    for c in thresholds.get(y, ()):
        ax.axhline(c, color="tab:orange", lw=0.8, ls="--")
    ax.set(xlabel=xlabel or plot_text(f"{x} (clipped at the {100 * quantile:g}th percentile)"),
           ylabel=ylabel or plot_text(f"{y} ({'log scale, ' if ylog else ''}clipped at the {100 * quantile:g}th "
                                      "percentile)"),
           title=title)
    fig.tight_layout()
    return fig


def class_shares(shares: pd.DataFrame, title: str, legend_title: str = "predicted"):
    """Stacked bars: for every row (e.g. a gold class) the shares of the columns (e.g. the predicted classes),
    as in book Figures 2.18 and 2.20. ``shares``: rows summing to 1 (``pd.crosstab(..., normalize="index")``)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    _literal_frame(shares).plot.bar(stacked=True, ax=ax, colormap="viridis", width=0.8)
    ax.tick_params(axis="x", rotation=0)
    ax.set(ylabel=plot_text(f"share of the {shares.index.name or 'row'}"), title=title)
    ax.legend(title=legend_title, bbox_to_anchor=(1.01, 1), loc="upper left")
    fig.tight_layout()
    return fig


def agreement_curves(grid: pd.DataFrame, n_units: int):
    """Krippendorff's α, Scott's π and Cohen's κ against percent agreement, one line per prevalence (the paradox
    grid of :func:`vrs_helpers.book.agreement.paradox_grid`; book section 3.3.1)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), sharey=True)
    for ax, coef, title in zip(axes, ["alpha", "pi", "kappa"], ["Krippendorff's α", "Scott's π", "Cohen's κ"],
                               strict=True):
        for prevalence, g in grid.groupby("prevalence"):
            ax.plot(100 * g["percent_agreement"], g[coef], marker="o", ms=3, label=f"prevalence {prevalence:g}")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_title(title)
        ax.set_xlabel("percent agreement (%)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("coefficient")
    axes[0].legend(title=f"{n_units} units, 2 raters", fontsize=8)
    fig.suptitle("Chance-corrected agreement against percent agreement")
    fig.tight_layout()
    return fig


def small_multiples(data: pd.DataFrame, row: str, col: str, x: str, y: str, line: str, *, ylabel: str | None = None,
                    title: str = ""):
    """One panel per (``row``, ``col``) level pair, one line per level of ``line``: ``y`` against ``x`` (book
    Figure 3.2: the scores of every rater per sentence across the instantiations, one row per annotation mode)."""
    plt = _pyplot()
    rows, cols = _levels(data[row]), _levels(data[col])
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(1.7 * len(cols), 2.75 * len(rows)), sharex=True,
                             sharey=True, squeeze=False)
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i, j]
            sub = data[(data[row] == r) & (data[col] == c)]
            for level, g in sub.groupby(line, observed=True):
                ax.plot(g[x].astype(int), g[y], marker="o", ms=3, label=plot_text(f"{line} {level}"))
            ax.set_title(plot_text(f"{r}\n{col} {c}"), fontsize=8)
            ax.set_xticks(sorted(pd.unique(data[x].astype(int))))
            ax.grid(alpha=0.3)
        axes[i, 0].set_ylabel(ylabel or plot_text(y))
    for ax in axes[-1]:
        ax.set_xlabel(plot_text(x))
    axes[0, -1].legend(fontsize=7, loc="upper right")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def decision_studies(studies: Mapping[tuple[str, str], pd.DataFrame], x: str, line: str, target: float | None = 0.8,
                     title: str = ""):
    """A grid of decision studies (book Figure 3.3): ``studies`` maps (design, kind) -> the frame of
    :func:`vrs_helpers.book.reliability.decision_study`; one column per design, one row per kind ("absolute": φ,
    "relative": E ρ²), each panel φ against ``x`` with one line per value of ``line``."""
    from .reliability import plot_decision_study

    plt = _pyplot()
    designs = list(dict.fromkeys(d for d, _ in studies))
    kinds = list(dict.fromkeys(k for _, k in studies))
    fig, axes = plt.subplots(len(kinds), len(designs), figsize=(5.5 * len(designs), 3.75 * len(kinds)), sharex=True,
                             squeeze=False)
    names = {"absolute": "φ (absolute)", "relative": "E ρ² (relative)"}
    for (design, kind), study in studies.items():
        ax = axes[kinds.index(kind), designs.index(design)]
        plot_decision_study(study, x, line, ax=ax, target=target, title=f"{plot_text(design)}: {names.get(kind, kind)}")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def level_means(means: pd.DataFrame, ylabel: str, title: str):
    """Mean ± SD of the response per level of every factor, one panel per factor (book Figure 3.4; the frame of
    :func:`vrs_helpers.book.reliability.level_means`)."""
    from .reliability import plot_level_means

    axes = plot_level_means(means, ylabel=ylabel)
    fig = axes[0].figure
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def cell_means(means: pd.DataFrame, x: str, group: str, *, estimate: str = "emmean", lower: str = "lower",
               xlabel: str | None = None, ylabel: str = "estimated mean (95% CI)", title: str = ""):
    """Estimated marginal means with their confidence intervals: ``x`` on the axis, one line per level of
    ``group`` (book Figures 3.5 and 4.7; the ``means`` of :func:`vrs_helpers.mixed.models.marginal.emmeans` with
    ``by``).
    The lines are offset a little sideways so that their intervals do not hide each other."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    levels = list(pd.unique(means[x]))
    groups = list(pd.unique(means[group]))
    offsets = np.linspace(-0.05, 0.05, len(groups)) if len(groups) > 1 else [0.0]
    for offset, g in zip(offsets, groups, strict=True):
        m = means[means[group] == g].set_index(x).loc[levels]
        ax.errorbar(np.arange(len(levels)) + offset, m[estimate], yerr=m[estimate] - m[lower], marker="o", capsize=3,
                    label=plot_text(g))
    ax.set_xticks(range(len(levels)), [plot_text(v) for v in levels])
    ax.set_xlabel(xlabel or plot_text(x))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(title=plot_text(group))
    fig.tight_layout()
    return fig


def budget_curve(table: pd.DataFrame, level: float = 0.95, title: str = "Expected best score under a budget"):
    """The bootstrap mean of the best score among B configurations with its interval, against B on a log scale
    (book Algorithm 3.1; the ``table`` of :func:`vrs_helpers.book.reliability.expected_max_ci`)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.errorbar(table["budget"], table["mean"], yerr=[table["mean"] - table["lower"], table["upper"] - table["mean"]],
                marker="o", capsize=3)
    ax.set_xscale("log")
    ax.set_xlabel("search budget B (configurations tried)")
    ax.set_ylabel(f"expected best score ({100 * level:g}% CI)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def scores_by_system(data: pd.DataFrame, score: str, system: str, systems: Sequence[str], covariate: str,
                     classes: str, *, score_label: str | None = None, covariate_label: str | None = None):
    """Three views of per-item scores of several systems (book Figures 4.4-4.6): the scores by system (box
    plots), the scores against a continuous data property (log scale), and the scores by system within each class
    of that property."""
    plt = _pyplot()
    score_label = score_label or plot_text(score)
    covariate_label = covariate_label or plot_text(covariate)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    colours = dict(zip(systems, COLOURS, strict=False))
    axes[0].boxplot([data.loc[data[system] == s, score] for s in systems], tick_labels=[plot_text(s) for s in systems])
    axes[0].set_title(f"Figure 4.4: {score_label} by system")
    axes[0].set_ylabel(score_label)
    for s in systems:
        d = data[data[system] == s]
        axes[1].scatter(d[covariate], d[score], s=4, alpha=0.25, color=colours[s], label=plot_text(s))
    axes[1].set_xscale("log")
    axes[1].set_xlabel(f"{covariate_label} (log scale)")
    axes[1].set_ylabel(score_label)
    axes[1].set_title(f"Figure 4.5: {score_label} against {covariate_label}")
    axes[1].legend(markerscale=4)
    levels = _levels(data[classes])
    ticks = []
    for i, c in enumerate(levels):
        start = i * (len(systems) + 1)
        for j, s in enumerate(systems):
            axes[2].boxplot([data.loc[(data[system] == s) & (data[classes] == c), score]], positions=[start + j],
                            widths=0.7, patch_artist=True, boxprops={"facecolor": colours[s]})
        ticks.append(start + (len(systems) - 1) / 2)
    axes[2].set_xticks(ticks, [plot_text(c) for c in levels])
    axes[2].set_xlabel(plot_text(classes.replace("_", " ")))
    axes[2].set_ylabel(score_label)
    axes[2].set_title(f"Figure 4.6: {score_label} by "
                      + plot_text(f"{classes.replace('_', ' ')} ({', '.join(map(str, systems))})"))
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def fitted_lines(intercepts: Mapping[str, float], slopes: Mapping[str, float], covariate: Sequence[float], *,
                 xlabel: str, ylabel: str, title: str = "", log_x: bool = True):
    """One fitted line a + b x per system over the range of ``covariate`` (x is the covariate on the model's scale;
    with ``log_x`` the model's covariate is the log of the axis values, as for log source length), with each
    system's slope in the legend."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    grid = np.linspace(np.min(covariate), np.max(covariate), 50)
    for s, a in intercepts.items():
        b = slopes[s]
        ax.plot(np.exp(grid) if log_x else grid, a + b * grid, label=plot_text(f"{s} (slope {b:.3f})"))
    if log_x:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def histograms(samples: Mapping[str, Sequence[float]], xlabel: str, title: str, bins: int = 50):
    """Overlaid histograms of several samples (e.g. resampling distributions of one difference under two
    procedures), with the zero line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for (name, values), alpha in zip(samples.items(), (0.7, 0.6, 0.5, 0.4), strict=False):
        ax.hist(np.asarray(values), bins=bins, alpha=alpha, label=plot_text(name))
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("resamples")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


def system_lines(result, systems: Sequence[str], covariate: Sequence[float], *, xlabel: str, ylabel: str,
                 title: str = "", log_x: bool = True):
    """:func:`fitted_lines` of a ``compare_systems`` result with a covariate: each system's intercept (the
    model's intercept plus the system's main effect) and slope."""
    fe = result.model.fixed_effects["estimate"]
    slopes = result.slopes.set_index("system")["slope"]
    return fitted_lines({s: fe["(Intercept)"] + fe.get(f"system{s}", 0.0) for s in systems}, slopes, covariate,
                        xlabel=xlabel, ylabel=ylabel, title=title, log_x=log_x)
