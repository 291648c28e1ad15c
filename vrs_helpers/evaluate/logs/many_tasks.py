"""Many tasks at a glance (issue 40): per task each system's accuracy with a confidence interval, its rank and
letters (:func:`vrs_helpers.evaluate.tables.ranking.ranking_table` on pairwise sign-flip permutation tests of the
per-item
differences, Holm-adjusted within the task), the model x task table behind the heatmap, and across tasks the
rank-based view ML papers use for many data sets (Demsar 2006): the Friedman test of the systems' ranks over tasks
(``scipy.stats.friedmanchisquare``) with the Nemenyi critical difference CD = q_alpha sqrt(k (k + 1) / (6 N)),
q_alpha the studentized range quantile over sqrt(2) (``scipy.stats.studentized_range``), for 5 or more tasks.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy import stats

from ..tables.ranking import ranking_table
from ..tables.small_data import item_means, sign_flip_test

MIN_TASKS_FRIEDMAN = 5


def mean_interval(scores: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Wilson for 0/1 item scores (one score per item), else the t interval of the item means."""
    from statsmodels.stats.proportion import proportion_confint

    n = len(scores)
    if n == 0:
        return math.nan, math.nan
    if np.isin(scores, (0.0, 1.0)).all():
        lo, hi = proportion_confint(int(scores.sum()), n, alpha=1 - level, method="wilson")
        p = float(scores.mean())
        return min(float(lo), p), max(float(hi), p)   # 0 or n correct: rounding may put the bound past p
    if n < 2:
        return math.nan, math.nan
    half = stats.t.ppf(0.5 + level / 2, n - 1) * scores.std(ddof=1) / math.sqrt(n)
    return float(scores.mean() - half), float(scores.mean() + half)


def task_ranking(data: pd.DataFrame, alpha: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """One task's ranking (``data``: system, item, score; runs and repeats averaged per item): per system the mean
    of its item means with a 95 % interval (Wilson for 0/1, else t), and the pairwise sign-flip tests, Holm-adjusted
    (statsmodels), as the contrasts of :func:`~vrs_helpers.evaluate.tables.ranking.ranking_table`."""
    from statsmodels.stats.multitest import multipletests

    wide = item_means(data)
    systems = [str(s) for s in wide.columns]
    est = wide.mean().to_numpy(dtype=float)
    ci = [mean_interval(wide[s].to_numpy(dtype=float)) for s in wide.columns]
    pairs = list(itertools.combinations(range(len(systems)), 2))
    raw = [sign_flip_test((wide.iloc[:, i] - wide.iloc[:, j]).to_numpy(), seed=seed)["p_mid"] for i, j in pairs]
    adj = multipletests(raw, method="holm")[1] if raw else []
    contrasts = pd.DataFrame({"contrast": [f"{systems[i]} - {systems[j]}" for i, j in pairs], "p_value": adj})
    return ranking_table(systems, est, [c[0] for c in ci], [c[1] for c in ci], contrasts, alpha,
                         method="sign-flip permutation tests (mid-p), Holm within the task")


def best_and_tied(table: pd.DataFrame, min_systems: int = 3) -> dict:
    """The best model of a task's ranking (:func:`task_ranking`, best first) and those tied with it - the systems
    whose simultaneous rank interval reaches rank 1 (not separated from the best by the Holm-adjusted pairwise tests)
    - with a sentence in the task's units; {} with fewer than ``min_systems`` systems (two systems: the verdict
    itself says which is ahead)."""
    if table is None or len(table) < min_systems:
        return {}
    rows = table.reset_index(drop=True)
    first = rows.iloc[0]
    tied = [str(r["system"]) for _, r in rows.iloc[1:].iterrows() if int(r["rank_low"]) == 1]
    below = len(rows) - 1 - len(tied)

    def shown(r):
        return f"{r['system']} {r['estimate']:.3g} [{r['ci_low']:.3g}, {r['ci_high']:.3g}]"

    sentence = f"Best: {shown(first)}"
    if tied:
        sentence += "; tied with it: " + ", ".join(shown(r) for _, r in rows.iloc[1:].iterrows()
                                                   if str(r["system"]) in tied)
    sentence += (f"; {below} of the {len(rows)} below it" if below else f"; none of the {len(rows)} is below it")
    sentence += f" ({first['method']}; rank intervals and letters in the leaderboard)."
    return {"best": str(first["system"]), "tied": tied, "below": int(below), "sentence": sentence}


def model_task_table(rankings: dict) -> pd.DataFrame:
    """The model x task table: one row per (task, system) with estimate, interval, rank and letters."""
    rows = []
    for task, table in rankings.items():
        for _, r in table.iterrows():
            rows.append({"task": task, "system": r["system"], "estimate": r["estimate"], "ci_low": r["ci_low"],
                         "ci_high": r["ci_high"], "rank": r["rank"], "group": r["group"]})
    return pd.DataFrame(rows)


def friedman_nemenyi(matrix: pd.DataFrame, alpha: float = 0.05, higher_is_better: bool = True) -> dict | None:
    """Friedman's test of the systems over tasks (``matrix``: tasks x systems, the tasks every system has) and the
    Nemenyi critical difference of the mean ranks (Demsar 2006); None with fewer than :data:`MIN_TASKS_FRIEDMAN`
    tasks or 3 systems (Friedman needs 3)."""
    m = matrix.dropna()
    n, k = m.shape
    if n < MIN_TASKS_FRIEDMAN or k < 3:
        return None
    values = m.to_numpy(dtype=float)
    chi2, p = stats.friedmanchisquare(*[values[:, j] for j in range(k)])
    ranks = stats.rankdata(-values if higher_is_better else values, axis=1)   # 1 = best, ties averaged
    mean_ranks = pd.Series(ranks.mean(axis=0), index=[str(c) for c in m.columns]).sort_values()
    q = float(stats.studentized_range.ppf(1 - alpha, k, np.inf)) / math.sqrt(2)
    cd = q * math.sqrt(k * (k + 1) / (6.0 * n))
    return {"n_tasks": int(n), "n_systems": int(k), "chi2": float(chi2), "p_value": float(p),
            "mean_ranks": mean_ranks.to_dict(), "q_alpha": q, "critical_difference": float(cd), "alpha": alpha}


def cd_diagram(result: dict, ax=None):
    """The critical-difference diagram: the mean ranks on an axis, systems whose mean ranks differ by less than CD
    joined by a bar (labels drawn literally)."""
    import matplotlib.pyplot as plt

    from ...literal import plot_text

    ranks = pd.Series(result["mean_ranks"]).sort_values()
    k = len(ranks)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 1.2 + 0.28 * k))
    y = np.arange(k)[::-1]
    ax.scatter(ranks.to_numpy(), y, color="#0969da", zorder=3)
    ax.set_yticks(y, [plot_text(s) for s in ranks.index])
    cd = result["critical_difference"]
    level = 0
    for i in range(k):   # maximal cliques of consecutive systems within CD
        j = max(jj for jj in range(i, k) if ranks.iloc[jj] - ranks.iloc[i] < cd)
        if j > i and (i == 0 or ranks.iloc[j] - ranks.iloc[i - 1] >= cd):
            ax.plot([ranks.iloc[i], ranks.iloc[j]], [-0.8 - 0.25 * level] * 2, lw=3, color="#cf222e")
            level += 1
    ax.plot([1, 1 + cd], [k - 0.3] * 2, lw=2, color="black")
    ax.annotate(f"CD = {cd:.2f}", xy=(1 + cd / 2, k - 0.15), ha="center", fontsize=8)
    ax.set_xlabel("mean rank over tasks (1 = best)")
    ax.set_ylim(-1.2 - 0.25 * level, k + 0.2)
    ax.grid(axis="x", alpha=0.3)
    return ax


def heatmap(table: pd.DataFrame, ax=None):
    """The model x task heatmap of the estimates, each cell annotated with the estimate and the task's letters."""
    import matplotlib.pyplot as plt

    from ...literal import plot_text

    est = table.pivot(index="system", columns="task", values="estimate")
    grp = table.pivot(index="system", columns="task", values="group")
    if ax is None:
        _, ax = plt.subplots(figsize=(min(12, 2.5 + 1.1 * est.shape[1]), 1.2 + 0.45 * est.shape[0]))
    im = ax.imshow(est.to_numpy(dtype=float), aspect="auto", cmap="viridis")
    ax.set_xticks(range(est.shape[1]), [plot_text(t) for t in est.columns], rotation=30, ha="right")
    ax.set_yticks(range(est.shape[0]), [plot_text(s) for s in est.index])
    for i in range(est.shape[0]):
        for j in range(est.shape[1]):
            v = est.iat[i, j]
            if np.isfinite(v):
                ax.text(j, i, f"{v:.3g}\n{plot_text(grp.iat[i, j])}", ha="center", va="center", fontsize=7,
                        color="white" if v < np.nanmean(est.to_numpy(dtype=float)) else "black")
    ax.figure.colorbar(im, ax=ax, fraction=0.04)
    return ax
