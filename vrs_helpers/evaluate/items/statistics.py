"""Classical item statistics of a benchmark (issue 55): each item's p-value (share correct, or mean score), its
item-rest correlation (how well the item separates the better models from the worse), and flags.

The respondents are the models (each model's mean over its runs of an item); with fewer than three models, its
runs (every model-run pair), so that the 100 seeds of one model can be analysed too. The item-rest correlation of
item i is the Pearson correlation, over the respondents, of their score on i with their mean over the other items
(the corrected item-total correlation; for 0/1 scores the point-biserial). Flags:

- ``no_information``: every respondent got the same score on the item (all right or all wrong): it cannot separate
  any two models;
- ``negative_discrimination``: the item-rest correlation is below 0 and significantly so: the one-sided t test of
  the correlation (n - 2 df), the items' p-values adjusted by Benjamini & Hochberg (1995) at ``flag_alpha``
  (default 0.05) in the conditional form of Zhao, Small & Su (2019, JASA, "Multiple testing when many p-values
  are uniformly conservative"): a good item's correlation is positive, so its p-value sits near 1 and plain BH
  over all items would be needlessly strict; only the items with p <= TAU = 0.5 (a negative correlation) enter,
  with p / TAU, BH over them. The false discovery rate stays at ``flag_alpha`` when items with no discrimination
  at all (pure guessing: the null's boundary) are many (benchmarks/items.py measures both). Such items are
  answered correctly by the worse models and wrongly by the better ones: likely mislabelled or ambiguous, worth
  reading;
- ``flips_across_runs`` (0/1 scores with runs): the item's result differs between the runs of at least half of the
  models (``flip_rate``: the share of models whose runs disagree on it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from .matrix import ItemMatrix

FLAGS = ("no_information", "negative_discrimination", "flips_across_runs")
FLIP_SHARE = 0.5
TAU = 0.5   # the selection threshold of the conditional BH (Zhao, Small & Su 2019)


def respondents(m: ItemMatrix) -> tuple[np.ndarray, str]:
    """The respondents x items matrix of scores the correlations use, and what a respondent is."""
    if m.n_models >= 3 or not m.has_runs:
        return m.means, "model"
    n_runs = len(m.runs)
    codes, uniq = pd.factorize(m.model * n_runs + m.run, sort=True)
    size = len(uniq) * m.n_items
    cell = codes * m.n_items + m.item
    cnt = np.bincount(cell, minlength=size).reshape(len(uniq), m.n_items)
    out = np.bincount(cell, weights=m.score, minlength=size).reshape(len(uniq), m.n_items)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = out / cnt
    miss = cnt == 0   # a run without an item: its model's mean of the item
    if miss.any():
        rows, cols = np.nonzero(miss)
        out[rows, cols] = m.means[np.asarray(uniq)[rows] // n_runs, cols]
    return out, "run"


def item_rest(scores: np.ndarray) -> np.ndarray:
    """The item-rest correlation of every column of a respondents x items matrix (NaN for a constant item or a
    constant rest score), in O(respondents x items)."""
    n, k = scores.shape
    rest = (scores.sum(axis=1, keepdims=True) - scores) / max(k - 1, 1)
    x = scores - scores.mean(axis=0)
    r = rest - rest.mean(axis=0)
    sxx, srr = (x * x).sum(axis=0), (r * r).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (x * r).sum(axis=0) / np.sqrt(sxx * srr)
    out[(sxx <= 1e-12 * n) | (srr <= 1e-12 * n)] = np.nan
    return np.clip(out, -1.0, 1.0)


def negative_p(r: np.ndarray, n: int) -> np.ndarray:
    """One-sided p-values of H0: rho >= 0 against rho < 0 (the t test of a correlation on n - 2 df)."""
    if n < 4:
        return np.full(r.shape, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = r * np.sqrt((n - 2) / np.maximum(1.0 - r * r, 1e-300))
    return stats.t.cdf(t, n - 2)


def bh_reject(p: np.ndarray, alpha: float, tau: float = 1.0) -> np.ndarray:
    """Benjamini-Hochberg's step-up rejections at ``alpha`` (NaN never rejected); ``tau`` < 1: conditional BH (Zhao,
    Small & Su 2019), BH on p / tau over the p-values <= tau only."""
    p = np.where(np.asarray(p, float) <= tau, np.asarray(p, float) / tau, np.nan)
    ok = np.isfinite(p)
    out = np.zeros(p.shape, dtype=bool)
    if not ok.any():
        return out
    from statsmodels.stats.multitest import multipletests

    out[ok] = multipletests(p[ok], alpha=alpha, method="fdr_bh")[0]
    return out


def flip_rates(m: ItemMatrix) -> np.ndarray | None:
    """The share of models whose runs disagree on each item (0/1 scores with runs), else None."""
    if not (m.binary and m.has_runs):
        return None
    mixed = (m.means > 0) & (m.means < 1)          # a cell mean strictly between 0 and 1: its runs disagree
    return mixed.mean(axis=0)


def item_statistics(m: ItemMatrix, flag_alpha: float = 0.05) -> tuple[pd.DataFrame, dict]:
    """One row per item: ``item``, ``p_value`` (share correct or mean score over every row), ``sd`` (over the
    respondents), ``item_rest`` (correlation), ``p_negative`` (one-sided p of a negative correlation),
    ``flip_rate`` (0/1 with runs), ``flags`` (a list of :data:`FLAGS`); and {what a respondent is, how many}."""
    scores, unit = respondents(m)
    n = scores.shape[0]
    r = item_rest(scores)
    p_neg = negative_p(r, n)
    negative = bh_reject(p_neg, flag_alpha, TAU) & (r < 0)
    share = np.bincount(m.item, weights=m.score, minlength=m.n_items) / np.bincount(m.item, minlength=m.n_items)
    lo = np.array([np.inf] * m.n_items)
    hi = -lo
    np.minimum.at(lo, m.item, m.score)
    np.maximum.at(hi, m.item, m.score)
    no_info = lo == hi
    flips = flip_rates(m)
    flags = []
    for k in range(m.n_items):
        f = []
        if no_info[k]:
            f.append("no_information")
        if negative[k]:
            f.append("negative_discrimination")
        if flips is not None and flips[k] >= FLIP_SHARE and flips[k] > 0:
            f.append("flips_across_runs")
        flags.append(f)
    table = pd.DataFrame({"item": m.items, "p_value": share, "sd": scores.std(axis=0, ddof=1) if n > 1 else np.nan,
                          "item_rest": r, "p_negative": p_neg,
                          "flip_rate": flips if flips is not None else np.nan, "flags": flags})
    return table, {"unit": unit, "n": int(n)}
