"""The judge-corrected difference of two systems whose outputs humans labelled on different items (issue 52).

The usual layout: humans label a random part of each system's outputs, chosen per system, so few items are
labelled for both (2 x 2,000 items with 20 % labelled per system: about 80 of the 800 labelled items). The paired
PPI difference (:func:`vrs_helpers.evaluate.tables.judge.ppi_difference`) uses only the items labelled for both and
throws the other labels away; its estimate then differs from the difference of the per-system PPI means shown
beside it. This module uses every label: the estimate is the difference of the per-system PPI estimates (lambda 1,
Angelopoulos et al. 2023),

    theta_s = mean over U_s of f_s  +  mean over L_s of (y_s - f_s),

(``L_s`` the items labelled for system s, ``U_s`` its other judged items, ``f`` the judge's score, ``y`` the human
label), so it equals the difference of the means shown to rounding. Its variance is that of a sum over independent
items: D = theta_b - theta_a = sum_i a_i with a_i = c_b(i) - c_a(i), where item i contributes c_s(i) = f_s(i) / |U_s|
if unlabelled for s, (y_s(i) - f_s(i)) / |L_s| if labelled for s, 0 if s has no score on it. The items fall into
strata by their state for the two systems (labelled for both, for a only, for b only, for neither; judged by one
only); within a stratum c of n_c items the a_i are exchangeable draws, so

    Var(D) = sum_c n_c Var_c(a),      Var_c with divisor n_c - 1,

on Welch-Satterthwaite df (sum_c v_c)^2 / sum_c v_c^2 / (n_c - 1), v_c = n_c Var_c(a) (a stratum of one item:
its a_i^2, an upper estimate of its second moment). With the same items labelled for both systems the strata are
"both" and "neither" and this is exactly the paired PPI difference with the small-sample reading (Welch's t of the
two parts); with one system it is :func:`~vrs_helpers.evaluate.tables.judge.ppi_mean`'s variance. The items shared
unlabelled bring the covariance of the judge's scores of the two systems (their f_b - f_a in one a_i); items
labelled for one system only bring that system's rectifier against the other's judge score.
benchmarks/judge_label_sets.py measures its level in the layout above.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from .judge import Estimate, JudgeError

#: a stratum: (state for a, state for b), each 0 no score, 1 judged not labelled, 2 labelled
STATES = [(sa, sb) for sa in range(3) for sb in range(3) if (sa, sb) != (0, 0)]


def contributions(judge, human) -> tuple[np.ndarray, np.ndarray]:
    """(c, state): each item's contribution to the system's PPI mean (module docstring) and its state (0 no score,
    1 judged, 2 labelled). ``judge``, ``human``: arrays (..., items), NaN where the system has no score / no label."""
    f = np.asarray(judge, dtype=float)
    y = np.asarray(human, dtype=float)
    if f.shape != y.shape:
        raise JudgeError(f"judge scores and labels differ in shape: {f.shape} and {y.shape}.")
    judged = np.isfinite(f)
    labelled = judged & np.isfinite(y)
    unl = judged & ~labelled
    n_l = labelled.sum(-1, keepdims=True)
    n_u = unl.sum(-1, keepdims=True)
    if np.any(n_l < 2) or np.any(n_u < 1):
        raise JudgeError("PPI needs at least 2 labelled items and 1 unlabelled one per system.")
    c = np.where(labelled, (np.where(labelled, y, 0.0) - np.where(judged, f, 0.0)) / n_l,
                 np.where(unl, np.where(judged, f, 0.0) / n_u, 0.0))
    state = judged.astype(int) + labelled.astype(int)
    return c, state


def ppi_difference_all_labels(judge_a, judge_b, human_a, human_b, level: float = 0.95,
                              small_sample: bool = True) -> Estimate:
    """System b minus system a by PPI (lambda 1) with every label of each system (module docstring): the difference
    of the two PPI means, its SE from the strata of items, Student's t on Welch-Satterthwaite df
    (``small_sample``; else the z interval). Arrays (..., items) aligned by item (NaN: no score / no label); a
    leading axis is a batch of data sets."""
    ca, sa = contributions(judge_a, human_a)
    cb, sb = contributions(judge_b, human_b)
    a = cb - ca
    est = a.sum(-1)
    var = np.zeros(est.shape)
    den = np.zeros(est.shape)
    for s_a, s_b in STATES:
        m = (sa == s_a) & (sb == s_b)
        n = m.sum(-1)
        if not np.any(n):
            continue
        nn = np.maximum(n, 1)
        mean = np.where(m, a, 0.0).sum(-1) / nn
        ss = np.where(m, (a - mean[..., None]) ** 2, 0.0).sum(-1)
        one = np.where(m, a ** 2, 0.0).sum(-1)   # a stratum of one item: a_i^2
        ddof = 1 if small_sample else 0
        v_c = np.where(n >= 2, n * ss / np.maximum(n - ddof, 1), np.where(n == 1, one, 0.0))
        var = var + v_c
        den = den + np.where(n >= 2, v_c ** 2 / np.maximum(n - 1, 1), 0.0)
    se = np.sqrt(var)
    df = None
    if small_sample:
        df = np.where(den > 0, var ** 2 / np.where(den > 0, den, 1.0), np.isfinite(a).sum(-1) - 1.0)
    n_lab = ((sa == 2) | (sb == 2)).sum(-1)
    n_unl = ((sa != 2) & (sb != 2) & ((sa > 0) | (sb > 0))).sum(-1)
    if not 0.0 < float(level) < 1.0:
        raise JudgeError(f"level must lie strictly between 0 and 1; got {level!r}.")
    # the interval and p-value as judge.Estimate's other readings make them (the SE floored at 1e-16 for p)
    ref = stats.norm if df is None else stats.t(df)
    q = ref.ppf(0.5 + float(level) / 2)
    p = 2 * ref.sf(np.abs(est) / np.maximum(se, 1e-16))

    def scalar(v, kind=float):
        return kind(v) if np.ndim(v) == 0 else v

    return Estimate("PPI difference (every label)", scalar(est), scalar(se), scalar(est - q * se),
                    scalar(est + q * se), scalar(p), float(level), scalar(n_lab, int), scalar(n_unl, int), 1.0,
                    None if df is None else scalar(df))
