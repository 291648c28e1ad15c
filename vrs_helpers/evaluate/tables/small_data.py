"""Few items (issue 40): the verdict of a task with fewer than :data:`SMALL_ITEMS` items comes from an exact or
permutation test, not from the chi-square reference of a likelihood ratio test (which needs many items), and each
model's accuracy gets small-sample intervals beside the CLT standard error a harness prints.

- :func:`sign_flip_test` - two systems, the per-item differences of their mean scores (over runs and repeats):
  the sign-flip permutation test of mean difference 0, two-sided, with the mid-p (Lancaster 1961): the
  permutation distribution is enumerated exactly (for 0/1 scores of one run it is the binomial distribution of
  the discordant pairs, so the test is McNemar's exact mid-p test, Fagerland, Lydersen & Laake 2013); above
  :data:`EXACT_MAX` non-zero differences it is sampled (``n_perm`` draws, seeded).
- :func:`label_permutation_test` - three or more systems: the system labels permuted within each item (the
  statistic: the variance of the system means), sampled.
- :func:`accuracy_intervals` - Wilson and Clopper-Pearson (statsmodels' ``proportion_confint``) and the Bayesian
  beta-binomial interval of Bowyer et al. (ICML 2025: a uniform Beta(1, 1) prior on the accuracy, the
  equal-tailed posterior interval of Beta(k + 1, n - k + 1)) for 0/1 scores; the CLT interval beside them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from ...registry import SMALL_ITEMS  # noqa: F401 - fewer items than this (and one run): an exact test decides

EXACT_MAX = 18        # up to this many non-zero differences the sign-flip distribution is enumerated

SMALL_IGNORES = ("the run-to-run variation and any population of items beyond these (it conditions on the items "
                 "and treats each item's mean over runs and repeats as one observation)")


def item_means(data: pd.DataFrame, response: str = "score") -> pd.DataFrame:
    """items x systems: each system's mean score per item (over runs and repeats); only items every system has."""
    wide = data.groupby(["item", "system"])[response].mean().unstack("system")
    return wide.dropna()


def sign_flip_test(diff, n_perm: int = 20000, seed: int = 0) -> dict:
    """The two-sided sign-flip permutation test of a zero mean of the per-item differences ``diff``: p (the
    permutation p-value, P(|S| >= |s|)), mid-p (P(|S| > |s|) + P(|S| = |s|) / 2, the verdict's) and whether the
    distribution was enumerated (``exact``). For differences in {-1, 0, 1} (0/1 scores, one run) the closed form:
    McNemar's exact test on the discordant pairs."""
    d = np.asarray(diff, dtype=float)
    d = d[np.isfinite(d)]
    nz = d[np.abs(d) > 1e-12]
    n = len(nz)
    if n == 0:
        return {"p_value": 1.0, "p_mid": 1.0, "exact": True, "n_nonzero": 0, "n_perm": 0}
    obs = abs(nz.sum())
    tol = 1e-9 * max(1.0, np.abs(nz).sum())
    if np.all(np.isin(nz, (-1.0, 1.0))):
        k = int(min((nz > 0).sum(), (nz < 0).sum()))
        cdf, pmf = float(stats.binom.cdf(k, n, 0.5)), float(stats.binom.pmf(k, n, 0.5))
        return {"p_value": min(1.0, 2 * cdf), "p_mid": min(1.0, 2 * cdf - pmf), "exact": True, "n_nonzero": n,
                "n_perm": 0}
    if n <= EXACT_MAX:
        signs = ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1) * 2 - 1
        s = np.abs(signs @ nz)
        exact, draws = True, 0
    else:
        rng = np.random.default_rng(seed)
        signs = rng.choice((-1.0, 1.0), size=(n_perm, n))
        s = np.abs(signs @ nz)
        exact, draws = False, n_perm
    ge = float(np.mean(s >= obs - tol))
    eq = float(np.mean(np.abs(s - obs) <= tol))
    if not exact:   # the observed arrangement counted once (Phipson & Smyth 2010)
        ge = (ge * n_perm + 1) / (n_perm + 1)
        eq = (eq * n_perm + 1) / (n_perm + 1)
    return {"p_value": ge, "p_mid": ge - eq / 2, "exact": exact, "n_nonzero": n, "n_perm": draws}


def label_permutation_test(wide: pd.DataFrame, n_perm: int = 20000, seed: int = 0) -> dict:
    """Three or more systems on the same items (``wide``: items x systems): the system labels permuted within each
    item, statistic the variance of the system means; p = (c + 1) / (n_perm + 1), mid-p with ties halved."""
    x = wide.to_numpy(dtype=float)
    obs = float(np.var(x.mean(axis=0)))
    rng = np.random.default_rng(seed)
    idx = np.argsort(rng.random((n_perm, *x.shape)), axis=2)
    perm = np.take_along_axis(np.broadcast_to(x, (n_perm, *x.shape)), idx, axis=2)
    s = np.var(perm.mean(axis=1), axis=1)
    tol = 1e-9 * max(1.0, abs(obs))
    ge = (float(np.sum(s >= obs - tol)) + 1) / (n_perm + 1)
    eq = (float(np.sum(np.abs(s - obs) <= tol)) + 1) / (n_perm + 1)
    return {"p_value": ge, "p_mid": ge - eq / 2, "exact": False, "n_perm": n_perm}


def small_test(data: pd.DataFrame, n_perm: int = 20000, seed: int = 0) -> dict:
    """The verdict's test of a task with few items (``data``: system, item, score; runs and repeats averaged per
    item): :func:`sign_flip_test` for two systems (named "exact McNemar (mid-p)" for 0/1 scores of one run),
    :func:`label_permutation_test` for more. Returns method, evidence, p_value (the mid-p), p_conservative."""
    wide = item_means(data)
    systems = list(wide.columns)
    one_run = bool(data.groupby(["system", "item"]).size().max() == 1)
    binary = bool(data["score"].isin((0.0, 1.0)).all())
    if len(systems) == 2:
        diff = (wide[systems[1]] - wide[systems[0]]).to_numpy()
        t = sign_flip_test(diff, n_perm=n_perm, seed=seed)
        if binary and one_run:
            n10, n01 = int((diff > 0).sum()), int((diff < 0).sum())
            method = "exact McNemar test (mid-p)"
            evidence = f"{n10} vs {n01} discordant items of {len(diff)}"
        else:
            method = "sign-flip permutation test (mid-p" + (", exact)" if t["exact"] else
                                                             f", {t['n_perm']} draws)")
            evidence = f"mean difference {round(float(np.mean(diff)), 12):.4g} over {len(diff)} items"
    else:
        t = label_permutation_test(wide, n_perm=n_perm, seed=seed)
        method = f"within-item label permutation test (mid-p, {n_perm} draws)"
        evidence = f"{len(systems)} systems on {len(wide)} items"
    return {"method": method, "evidence": evidence, "p_value": float(t["p_mid"]),
            "p_conservative": float(t["p_value"]), "n_items": int(len(wide))}


def accuracy_intervals(k: int, n: int, level: float = 0.95) -> dict:
    """Intervals for an accuracy of ``k`` correct of ``n``: CLT (the harness's mean +- z * SD/sqrt(n), SD with
    n - 1 as lm-eval's ``mean_stderr``), Wilson, Clopper-Pearson (statsmodels ``proportion_confint``) and Bowyer
    et al.'s Bayesian beta-binomial interval (Beta(1, 1) prior; equal-tailed posterior quantiles)."""
    from statsmodels.stats.proportion import proportion_confint

    alpha = 1 - level
    p = k / n if n else math.nan
    se = math.sqrt(p * (1 - p) / (n - 1)) if n > 1 else math.nan
    z = float(stats.norm.ppf(1 - alpha / 2))
    wl, wh = proportion_confint(k, n, alpha=alpha, method="wilson")
    cl, ch = proportion_confint(k, n, alpha=alpha, method="beta")
    bl, bh = stats.beta.ppf([alpha / 2, 1 - alpha / 2], k + 1, n - k + 1)
    return {"n": n, "correct": k, "accuracy": p, "clt_stderr": se, "clt_low": p - z * se, "clt_high": p + z * se,
            "wilson_low": float(wl), "wilson_high": float(wh), "clopper_pearson_low": float(cl),
            "clopper_pearson_high": float(ch), "bayes_low": float(bl), "bayes_high": float(bh)}


def interval_table(table: pd.DataFrame, metric: str, level: float = 0.95) -> pd.DataFrame:
    """Per system, task and run of 0/1 scores with one repeat per item: :func:`accuracy_intervals`."""
    rows = []
    data = table.dropna(subset=[metric])
    for (system, task, run), g in data.groupby(["system", "task", "run"], sort=False):
        s = g[metric].to_numpy(dtype=float)
        if not np.isin(s, (0.0, 1.0)).all() or g.groupby("item").size().max() > 1:
            continue
        rows.append({"system": system, "task": task, "run": run, "metric": metric,
                     **accuracy_intervals(int(s.sum()), len(s), level)})
    return pd.DataFrame(rows)
