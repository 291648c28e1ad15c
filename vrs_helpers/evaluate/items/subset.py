"""A smaller benchmark that keeps the ranking (issue 55; after tinyBenchmarks' anchor points, Polo et al. 2024):
``n`` items chosen to stand for the whole, the models' full scores estimated from them, and how well that works
estimated by cross-validation over models.

Choice (on the training models only): the items are sorted by their share correct and cut into ``n`` strata of
equal size (stratified by difficulty); from each stratum the item with the largest item-rest correlation is
taken (the most discriminating of its difficulty). A model's full score is estimated by the stratified mean:
each chosen item's score weighted by its stratum's share of the items. ``information`` (0/1 scores): the 2PL
(:mod:`.twopl`) fitted to the training models, the ``n`` items with the most Fisher information at their
abilities (sum of a^2 p (1 - p)); a held-out model's ability is estimated from its answers to those items alone
(the posterior mode under N(0, 1), by Newton) and its full score predicted as the mean over all items of the 2PL's
probability at that ability (the IRT estimate of tinyBenchmarks and metabench). ``random``: ``n`` items drawn at
random, their plain mean (the baseline every choice must beat).

Cross-validation: the models are split into ``folds`` folds; the items are chosen on the other folds and the
held-out models' full scores estimated; over all held-out estimates, the root mean squared error against the full
score (in score units: accuracy for 0/1), the largest error, and the rank correlations (Spearman, Kendall) of the
estimates with the full scores.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from .matrix import ItemMatrix
from .statistics import item_rest
from .twopl import RUNAWAY, fit_2pl

METHODS = ("stratified", "information", "random")
MIN_MODELS = 10


def choose(scores: np.ndarray, n: int, method: str = "stratified", rng=None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` item columns of a models x items matrix of scores and their weights (summing to 1)."""
    k = scores.shape[1]
    n = min(n, k)
    if method == "random":
        rng = rng or np.random.default_rng(0)
        return np.sort(rng.choice(k, n, replace=False)), np.full(n, 1.0 / n)
    order = np.argsort(scores.mean(axis=0), kind="stable")
    r = np.nan_to_num(item_rest(scores), nan=-2.0)
    chosen, weights = [], []
    for part in np.array_split(order, n):
        chosen.append(part[np.argmax(r[part])])
        weights.append(len(part) / k)
    return np.asarray(chosen), np.asarray(weights)


def _map_ability(k, n, a, c, steps: int = 50) -> np.ndarray:
    """Each model's ability from its answers (right ``k`` of ``n``) to items with 2PL parameters (a, c): the
    posterior mode under N(0, 1) by Newton's method, all models at once (continuous: no quadrature grid)."""
    theta = np.zeros(k.shape[0])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(np.outer(theta, a) + c)))
        grad = ((k - n * p) * a).sum(1) - theta
        hess = (n * p * (1 - p) * a * a).sum(1) + 1.0
        step = np.clip(grad / hess, -1.0, 1.0)
        theta += step
        if np.abs(step).max(initial=0) < 1e-8:
            break
    return theta


def _irt_fold(k, n, train, test, sizes) -> dict:
    """The information choice and the IRT estimates of the held-out models' full scores for every size:
    {size: estimates of the test models}."""
    kt, nt = k[train], n[train]
    share = kt.sum(0) / nt.sum(0)
    use = (share > 0) & (share < 1)
    a = np.zeros(k.shape[1])
    c = np.log(np.clip(share, 1e-3, 1 - 1e-3) / (1 - np.clip(share, 1e-3, 1 - 1e-3)))
    au, cu, _, _, _, x, post = fit_2pl(kt[:, use], nt[:, use])
    a[use], c[use] = au, cu
    theta = post @ x
    p = 1 / (1 + np.exp(-(np.outer(theta, a) + c)))
    info = np.where(np.abs(a) < RUNAWAY, (a * a * (p * (1 - p))).sum(0), -1.0)   # no runaway slopes
    order = np.argsort(-info, kind="stable")
    out = {}
    for size in sizes:
        cols = order[:size]
        theta_t = _map_ability(k[np.ix_(test, cols)], n[np.ix_(test, cols)], a[cols], c[cols])
        out[size] = (1 / (1 + np.exp(-(np.outer(theta_t, a) + c)))).mean(axis=1)
    return out


def cross_validate(m: ItemMatrix, sizes=None, folds: int = 5, seed: int = 0, random_draws: int = 5) -> list:
    """Per subset size and method: rmse, max_error, spearman, kendall (module docstring); [] with fewer than
    :data:`MIN_MODELS` models or items."""
    if m.n_models < MIN_MODELS or m.n_items < 20:
        return []
    scores = m.means
    full = scores.mean(axis=1)
    sizes = sorted({s for s in (sizes or (10, 25, 50, 100, 200, 500)) if s < m.n_items})
    rng = np.random.default_rng(seed)
    fold = rng.permutation(m.n_models) % folds
    irt = {}
    if m.binary:
        k = m.means * m.counts
        for f in range(folds):
            irt[f] = _irt_fold(k, m.counts.astype(float), fold != f, fold == f, sizes)
    rows = []
    for n in sizes:
        for method in METHODS:
            if method == "information" and not irt:
                continue
            draws = 1 if method != "random" else random_draws
            errs, rho, tau = [], [], []
            for d in range(draws):
                est = np.empty(m.n_models)
                for f in range(folds):
                    train, test = fold != f, fold == f
                    if method == "information":
                        est[test] = irt[f][n]
                        continue
                    cols, w = choose(scores[train], n, method, np.random.default_rng([seed, n, d, f]))
                    est[test] = scores[np.ix_(test, cols)] @ w
                errs.append(est - full)
                rho.append(stats.spearmanr(est, full).statistic)
                tau.append(stats.kendalltau(est, full).statistic)
            e = np.concatenate(errs)
            rows.append({"n_items": n, "method": method, "rmse": float(np.sqrt(np.mean(e ** 2))),
                         "max_error": float(np.abs(e).max()), "spearman": float(np.nanmean(rho)),
                         "kendall": float(np.nanmean(tau))})
    return rows


def chosen_items(m: ItemMatrix, n: int) -> pd.DataFrame:
    """The ``n`` items chosen on all models (stratified), with their weights."""
    cols, w = choose(m.means, n, "stratified")
    return pd.DataFrame({"item": [m.items[c] for c in cols], "weight": w})
