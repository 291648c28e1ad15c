"""Tests of the system difference on per-run means, for the designs where the mixed model's F test does not keep
its level or loses power (issue 39): unequal residual variances of the systems with unequal run counts, and a run
variance estimated at zero.

Every run of a *complete* design scores every item once, so the run means ``m_sr`` (system s, run r) are over the
same items and the item effects cancel in their differences. Under ``score = mu_s + a_sr + b_i + g_si + e_sri``
(run, item, system x item and residual effects, each system with its own variances) the mean of system s over its
``n_s`` runs, ``M_s``, has

    Var(M_1 - M_2) = sum_s (sigma2_run,s / n_s + sigma2_res,s / (n_s I)) + (sigma2_si,1 + sigma2_si,2) / I.

- The spread of a system's run means, ``v_s = var_r(m_sr)``, estimates ``sigma2_run,s + sigma2_res,s / I``: the
  first sum is ``sum_s v_s / n_s`` (Welch 1947, "The generalization of 'Student's' problem when several different
  population variances are involved", Biometrika 34: 28-35), or with one pooled ``v`` over the systems
  ``v (1/n_1 + 1/n_2)`` (Student's t on the run means; for k systems the one-way ANOVA F of the run means, exact
  in a balanced design whatever the run variance: the aggregated analysis of a nested design, Searle, Casella &
  McCulloch 1992, Variance Components, section 4.3).
- The system x item part: the per-item differences of the systems' means over runs, ``d_i``, vary from item to item
  with variance ``sigma2_si,1 + sigma2_si,2 + sum_s sigma2_res,s / n_s``; the residual variance of system s is the
  run x item mean square of its rows, ``MS_s`` (df ``(n_s - 1)(I - 1)``). So ``var_i(d_i) / I - sum_s MS_s /
  (n_s I)`` estimates the second term (set to 0 when negative, as REML puts a variance on its boundary).

The estimate ``V`` is a linear combination of independent mean squares; its df are Satterthwaite's (1946,
"An approximate distribution of estimates of variance components", Biometrics Bulletin 2: 110-114):
``V^2 / sum_j (c_j MS_j)^2 / df_j``, and ``t = (M_2 - M_1) / sqrt(V)`` is referred to Student's t on those df
(reported as F = t^2 on (1, df)). Without the system x item term and with the pooled spread this is the exact t
(F) test of the run means.

Welch's df are liberal when the system with fewer runs has the larger variance (the Behrens-Fisher problem has no
exact solution): with 6 and 3 runs and run-mean variances 0.00043 and 0.0039 Welch's t rejects 0.069 of true nulls
at alpha 0.05, the same statistic on Hsu's (1938) conservative df min(n_s) - 1 (Scheffe 1970, "Practical solutions
of the Behrens-Fisher problem", JASA 65: 1501-1508) 0.028 (200,000 simulations, benchmarks/welch_level.py). With
unequal run counts the p-value is therefore the Behrens-Fisher test's (Behrens 1929; Fisher 1935, "The fiducial
argument in statistical inference", Annals of Eugenics 6: 391-398; Fisher & Yates' tables), :func:`behrens_fisher_p`:
the same t referred to the distribution of ``sum_j sqrt(w_j) T_j``, independent Student t's ``T_j`` on each
term's df weighted by its share ``w_j`` of ``V`` (the system x item part one term, on its Satterthwaite df). It is
conservative (Robinson 1976, "Properties of Student's t and of the Behrens-Fisher solution to the two means problem",
Annals of Statistics 4: 963-971): 0.041 in the design above, 0.044 with 10 and 5 runs (20,000 simulations each).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

#: a spread of the run means at most this fraction of the within-run noise is zero (0/1 scores on few items:
#: identical per-run differences; 1e-33 of floating-point rounding gave an F of 2.8e31): run_means_test
ZERO_SPREAD = 1e-8

#: residual variances of two systems differing by more than this factor: the systems are treated as
#: heteroscedastic (the run x item mean squares have (n_s - 1)(I - 1) df, hundreds in a log: the ratio is stable)
HETERO_RATIO = 2.0


def _complete(data: pd.DataFrame, system: str, item: str, runs: list) -> pd.DataFrame | None:
    """The rows as a (system, run, item) table when every run of every system scores every item exactly once (a
    complete design), else None. Adds a ``_run`` column: the run label (the replication columns joined)."""
    d = data[[system, item, *runs]].copy()
    d["_run"] = d[runs].astype(str).agg("\x1f".join, axis=1) if len(runs) > 1 else d[runs[0]].astype(str)
    counts = d.groupby([system, "_run", item], observed=True).size()
    items = d[item].nunique()
    per_run = d.groupby([system, "_run"], observed=True)[item].nunique()
    if counts.max() != 1 or (per_run != items).any() or len(per_run) == 0:
        return None
    return d


def _run_means(data: pd.DataFrame, response: str, system: str, item: str, runs: list, systems=None):
    """``(d, m, order, groups)`` of a complete design (None if not complete): the rows with the run label and the
    score ``y``, the run means ``m`` (system, _run, m), the systems in ``systems``' order (else as they come) and
    each system's run means."""
    d = _complete(data, system, item, runs)
    if d is None:
        return None
    d["y"] = data[response].to_numpy(dtype=float)
    m = d.groupby([system, "_run"], observed=True)["y"].mean().rename("m").reset_index()
    order = list(systems) if systems is not None else list(pd.unique(m[system]))
    return d, m, order, [m.loc[m[system] == s, "m"].to_numpy() for s in order]


def residual_mean_squares(data: pd.DataFrame, response: str, system: str, item: str, runs: list) -> pd.Series | None:
    """Per system the run x item mean square of a complete design (module docstring; None if not complete):
    ``sum (y - m_sr - ybar_si + M_s)^2 / ((n_s - 1)(I - 1))``."""
    d = _complete(data, system, item, runs)
    if d is None:
        return None
    d["y"] = data[response].to_numpy(dtype=float)
    out = {}
    for s, g in d.groupby(system, observed=True):
        n, i = g["_run"].nunique(), g[item].nunique()
        if n < 2 or i < 2:
            return None
        r = g["y"] - g.groupby("_run")["y"].transform("mean") - g.groupby(item)["y"].transform("mean") + g["y"].mean()
        out[s] = float((r ** 2).sum() / ((n - 1) * (i - 1)))
    return pd.Series(out)


def heteroscedastic(ms: pd.Series | None) -> bool:
    """True when the systems' residual variances differ by more than :data:`HETERO_RATIO`."""
    return ms is not None and len(ms) >= 2 and float(ms.max()) > HETERO_RATIO * float(ms.min())


def behrens_fisher_p(t: float, weights, dfs, nodes: int = 1000) -> float:
    """The Behrens-Fisher p-value of a t statistic (module docstring): ``P(|sum_j sqrt(w_j) T_j| >= |t|)`` for
    independent Student t's ``T_j`` on ``dfs[j]`` df and weights ``w_j >= 0`` summing to 1 (each term's share of the
    variance estimate). The largest share's t distribution is used in closed form, the next by the midpoint rule on
    ``nodes`` of its quantiles, any further one on ``nodes // 5``; one term is Student's t exactly."""
    w = np.asarray(weights, dtype=float)
    f = np.asarray(dfs, dtype=float)
    if w.ndim != 1 or w.shape != f.shape or len(w) < 1 or (w < 0).any() or not np.isclose(w.sum(), 1.0):
        raise ValueError("weights must be >= 0, one per df, summing to 1.")
    t = abs(float(t))
    keep = w > 0
    w, f = w[keep], f[keep]
    order = np.argsort(-w)  # the largest share in closed form: the integrand over the others is then smooth
    w, f = w[order], f[order]
    shift = np.zeros(1)
    for j, (wj, fj) in enumerate(zip(w[1:], f[1:], strict=True)):
        m = nodes if j == 0 else max(nodes // 5, 20)
        q = (np.arange(m) + 0.5) / m
        shift = (shift[:, None] + np.sqrt(wj) * stats.t.ppf(q, fj)[None, :]).ravel()
    s = np.sqrt(w[0])
    return float(np.mean(stats.t.sf((t - shift) / s, f[0]) + stats.t.cdf((-t - shift) / s, f[0])))


def _satterthwaite(terms) -> tuple[float, float]:
    """``V = sum_j c_j MS_j`` and its Satterthwaite df (NaN df when V <= 0: no test)."""
    v = float(sum(c * x for c, x, _ in terms))
    den = float(sum((c * x) ** 2 / f for c, x, f in terms))
    return v, (v * v / den if v > 0 and den > 0 else float("nan"))


def _t_test(delta: float, terms) -> tuple[float, float, float] | None:
    """(t, df, two-sided p) of ``delta / sqrt(V)`` on V's Satterthwaite df; None when V is not positive (a spread
    of zero: no t)."""
    v, df = _satterthwaite(terms)
    if not v > 0 or not np.isfinite(df):
        return None
    t = delta / np.sqrt(v)
    return float(t), float(df), float(2 * stats.t.sf(abs(t), df))


def _noise_terms(n, ms, n_items: int) -> list:
    """The run part's terms with each run mean's within-run noise alone, ``MS_s / I`` (MS_s the system's run x
    item mean square, (n_s - 1)(I - 1) df): ``sum_s MS_s / (n_s I)``, what the spread of the run means would show
    with no run-to-run variation (its expectation under a zero run variance; module docstring)."""
    return [(1.0 / (n_s * n_items), float(m), (n_s - 1) * (n_items - 1)) for n_s, m in zip(n, ms, strict=True)]


def run_means_test(data: pd.DataFrame, response: str, system: str, item: str, runs: list, systems=None,
                   welch: bool = False, system_item: bool = False, crossed: bool = False,
                   behrens_fisher: bool = False, noise_floor: bool = True):
    """The test of the system difference on the run means of a complete design (module docstring): for two
    systems Student's (``welch=False``: one pooled spread) or Welch's (``welch=True``: each system its own) t on the
    run means, with the system x item part when ``system_item``, Satterthwaite's df; for three or more systems
    (pooled, no system x item part) the one-way ANOVA F of the run means. Returns a
    :class:`vrs_helpers.mixed.inference.ddf.FTest` (F = t^2 on (1, df) for two systems), or None when the design is not
    complete, a system has fewer than 2 runs, or three or more systems ask for Welch's or the system x item part.
    ``systems``: the order of the systems (the first is the reference).

    ``crossed``: crossed runs (every run label run by every system; else None): the shared run effects cancel in
    the per-run differences ``D_r = m_2r - m_1r``, and for two systems the test is the paired t on them (their
    spread ``var_r(D_r) / n`` in place of the first sum; each system's variances its own, so no pooling), for k
    systems the two-way ANOVA F of the run means, system against system x run on (k - 1)(n - 1) df.

    ``behrens_fisher`` (with ``welch``, two systems): the same t and df, the p-value the Behrens-Fisher test's
    (:func:`behrens_fisher_p`; each system's run-mean term on n_s - 1 df, the system x item part one term on its
    Satterthwaite df) - the default with unequal run counts, where Welch's df are liberal.

    **A zero spread (issue 56).** The spread of the run means estimates the run variance plus each run mean's
    within-run noise ``MS_s / I``; with 0/1 scores on few items it can be 0 (three identical per-run differences,
    or every run accuracy the same): the t is then infinite or 0/0 (an F of 2.8e31, or a ZeroDivisionError). Where
    the spread is zero - at most :data:`ZERO_SPREAD` times the within-run noise - the test is that of the same
    difference against the within-run noise alone (the run part's spread replaced by ``sum_s MS_s / (n_s I)``,
    Satterthwaite's df; for k systems the F against it), what the spread would show without run-to-run variation.
    Anywhere else the run-means test stands as it is: it is exact under normal scores whatever the run variance,
    where the larger of its p and the noise test's (tried first) kept the level, but at a run variance of 0 rejected
    0.013 of true nulls where 0.05 is the aim (400 simulated logs; docs/error-rates.md). ``method`` ends "(zero
    spread: against the within-run noise)" then; ``noise_floor=False``: never (None where the spread is zero)."""
    from ..mixed.inference.ddf import FTest

    got = _run_means(data, response, system, item, runs, systems)
    if got is None:
        return None
    d, m, order, groups = got
    n = np.array([len(g) for g in groups])
    k, n_items = len(groups), d[item].nunique()
    if k < 2 or (n < 2).any():
        return None
    ms_all = residual_mean_squares(data, response, system, item, runs)
    if ms_all is None:
        return None
    ms = [float(ms_all[s]) for s in order]
    means = np.array([g.mean() for g in groups])
    var = np.array([g.var(ddof=1) for g in groups])
    noise_df = float(sum((n_s - 1) * (n_items - 1) for n_s in n))
    noise = sum(m_s / n_items * (n_s - 1) * (n_items - 1) for m_s, n_s in zip(ms, n, strict=True)) / noise_df
    if crossed:
        wide = m.pivot(index="_run", columns=system, values="m")
        if wide.isna().any().any() or wide.shape[1] != k:
            return None
        wide = wide[order]
        n_r = len(wide)
        if k > 2:
            if welch or system_item:
                return None
            resid = wide - wide.mean(axis=0) - wide.mean(axis=1).to_numpy()[:, None] + wide.to_numpy().mean()
            num = float(n_r * np.sum((wide.mean(axis=0).to_numpy() - wide.to_numpy().mean()) ** 2) / (k - 1))
            df2 = (k - 1) * (n_r - 1)
            return _f_at_least_noise(FTest, system, num, float((resid.to_numpy() ** 2).sum() / df2), k, df2, 1,
                                     noise if noise_floor else 0.0, noise_df, "F test on run means (system x run)")
        diff = (wide[order[1]] - wide[order[0]]).to_numpy()
        terms = [(1.0 / n_r, float(diff.var(ddof=1)), n_r - 1)]
    elif k > 2:
        if welch or system_item:
            return None
        grand = m["m"].mean()
        num = float(np.sum(n * (means - grand) ** 2) / (k - 1))
        den = float(np.sum((n - 1) * var) / (n.sum() - k))
        # the within-run noise of a run mean, sum (n_s - 1) MS_s / I pooled; per run, so n_s = 1 in the F's scale
        return _f_at_least_noise(FTest, system, num, den, k, int(n.sum() - k), 1, noise if noise_floor else 0.0,
                                 noise_df, "F test on run means")
    # two systems: V = sum_j c_j MS_j, each MS_j with its df
    if crossed:
        noise_terms = _noise_terms([n_r, n_r], ms, n_items)
    elif welch:
        terms = [(1.0 / n[0], var[0], n[0] - 1), (1.0 / n[1], var[1], n[1] - 1)]
        noise_terms = _noise_terms(n, ms, n_items)
    else:
        pooled = float(np.sum((n - 1) * var) / (n.sum() - 2))
        terms = [(1.0 / n[0] + 1.0 / n[1], pooled, n.sum() - 2)]
        noise_terms = _noise_terms(n, ms, n_items)
    extra = []
    if system_item:
        wide = d.groupby([item, system], observed=True)["y"].mean().unstack(system)[order]
        diff = (wide[order[1]] - wide[order[0]]).to_numpy()
        sd2 = float(diff.var(ddof=1))
        extra = [(1.0 / n_items, sd2, n_items - 1)] + [(-1.0 / (n[j] * n_items), ms[j], (n[j] - 1) * (n_items - 1))
                                                      for j in range(2)]
        if sum(c * v for c, v, _ in extra) <= 0:
            extra = []
    terms = terms + extra
    delta = float(means[1] - means[0])
    name = ("paired t on run means (crossed runs)" if crossed else "Welch's t on run means, Satterthwaite df"
            if welch else "t test on run means") + (" (with the system x item variance)" if extra else "")
    found = _t_test(delta, terms)
    runs_part = sum(c * v for c, v, _ in terms[:len(terms) - len(extra)])
    zero = runs_part <= ZERO_SPREAD * sum(c * v for c, v, _ in noise_terms)
    floor = _t_test(delta, noise_terms + extra) if noise_floor and zero else None
    if found is None and floor is None:
        return None
    if found is not None:
        t, df, p = found
        if behrens_fisher and welch and not crossed:
            part = terms[2:]
            v_hat = sum(c * v for c, v, _ in terms)
            shares = [c * v / v_hat for c, v, _ in terms[:2]]
            dfs = [f for _, _, f in terms[:2]]
            if part:
                e = sum(c * v for c, v, _ in part)
                shares.append(e / v_hat)
                dfs.append(e ** 2 / sum((c * v) ** 2 / f for c, v, f in part))
            p = behrens_fisher_p(float(t), shares, dfs)
            name = name.replace("Welch's t on run means, Satterthwaite df", "Behrens-Fisher test on run means")
    if floor is not None:
        t, df, p = floor
        name = f"{name} (zero spread: against the within-run noise)"
    elif found is None or zero:
        return None
    return FTest(system, float(t * t), 1, float(df), float(p), method=name)


def _f_at_least_noise(FTest, system, num: float, den: float, k: int, df2: int, per: int, noise: float,
                      noise_df: float, name: str):
    """The run-means F ``num / den`` on (k - 1, df2), or, where the spread ``den`` is zero (at most
    :data:`ZERO_SPREAD` times the within-run noise), the F of ``num`` against the within-run noise of the run means,
    ``noise / per`` on (k - 1, noise_df) (:func:`run_means_test`); None when neither applies (``noise`` 0: not
    asked for)."""
    if den > ZERO_SPREAD * noise / per and den > 0:
        f = num / den
        return FTest(system, float(f), k - 1, float(df2), float(stats.f.sf(f, k - 1, df2)), method=name)
    if noise > 0:
        f = num / (noise / per)
        return FTest(system, float(f), k - 1, noise_df, float(stats.f.sf(f, k - 1, noise_df)),
                     method=f"{name} (zero spread: against the within-run noise)")
    return None


def boundary(model, system: str, runs: list, tol: float = 1e-10) -> bool:
    """True when the REML variance of every run term ``(1|system:R)`` of ``model`` is zero (on its boundary)."""
    vc = model.variance_components["variance"]
    top = max(float(vc.max()), 1e-300)
    return all(float(vc.get(f"{system}:{r}", np.inf)) <= tol * top for r in runs)


def choose(data, response: str, system: str, item: str, runs: list, model, system_item: bool,
           layout: str = "nested", seed: int = 0):
    """The run-means test that replaces the mixed model's F test as the default test of a nested-runs comparison
    of continuous scores, and why; ``(None, None)`` to keep the model's test. The rule (issue 39):

    1. two systems whose residual variances differ by more than :data:`HETERO_RATIO` (:func:`heteroscedastic`) in
       a complete design: Welch's t on the run means with Satterthwaite's df (and the system x item part when the
       model's REML variance of that term is positive, as in rule 2; with it at zero the part only adds noise to the
       denominator: 0.030 of true nulls rejected where 0.05 is the aim) - one pooled run and residual variance
       would let the noisier system's few runs pass for many; with unequal run counts its p-value from the
       Behrens-Fisher distribution (:func:`behrens_fisher_p`: Welch's df are liberal there);
    2. a balanced complete design (every system the same number of runs) whose REML variance of every run term is
       zero (:func:`boundary`): the test on the run means (two systems: Student's t, with the system x item part
       when that term's variance is positive; three or more: the one-way ANOVA F, used only when the model has no
       system x item variance) - exact whatever the run variance, where the F test of the fit at the boundary keeps
       the pooled residual and loses power.

    Crossed runs (``layout="crossed"``, every run label run by every system): at the boundary of the system x run
    variance, or with unequal residual variances (two systems), the paired t on the run means (two systems; each
    system's variances its own) or the system x run ANOVA F (three or more, no system x item variance).

    0. (issue 56) Three or more systems whose residual variances differ by more than :data:`HETERO_RATIO`, nested
       or crossed: every pair Welch's t on the run means (each system's own spread), adjusted together by the
       bootstrap max-|t| (:func:`hetero_pairs`); the outcome carries the pairs (``pairs``) that replace the model's
       Tukey contrasts.

    Every run-means test's p-value is at least that of the same difference against the within-run noise
    (:func:`run_means_test`, issue 56). ``seed``: the bootstrap's (rule 0).

    A dask table's columns the rule reads (response, system, item, the runs) are collected first: the rule and its
    tests are sums over the rows, and both backends then choose and report the same test."""
    if hasattr(data, "dask"):
        data = data[[response, system, item, *runs]].compute()
    ms = residual_mean_squares(data, response, system, item, runs)
    if ms is None:
        return None, None
    order = list(ms.index)
    vc = model.variance_components["variance"]
    si_positive = system_item and float(vc.get(f"{system}:{item}", 0.0)) > 1e-10 * max(float(vc.max()), 1e-300)
    if len(ms) >= 3 and heteroscedastic(ms):
        got = hetero_pairs(data, response, system, item, runs, order, system_item=si_positive, seed=seed)
        if got is None:
            return None, None
        pairs, test = got
        test.pairs = pairs
        ratio = float(ms.max() / ms.min())
        return test, (f"unequal variances: the residual variances of the {len(ms)} systems differ by a factor of "
                      f"{ratio:.3g} (> {HETERO_RATIO:g}); every pair is a t test with its own SE, the pairs "
                      f"adjusted together by the {test.method}")
    if layout == "crossed":
        hetero = len(ms) == 2 and heteroscedastic(ms)
        if not (hetero or boundary(model, system, runs)):
            return None, None
        t = run_means_test(data, response, system, item, runs, order, system_item=si_positive or (
            hetero and system_item), crossed=True)
        if t is None:
            return None, None
        why = (f"unequal variances: the residual variances of the systems differ by a factor of "
               f"{float(ms.max() / ms.min()):.3g}" if hetero else
               "run variance at zero: the REML variance of system x run is 0")
        return t, f"{why}; the test is the {t.method}, not the model's F test"
    if len(ms) == 2 and heteroscedastic(ms):
        unequal = _complete(data, system, item, runs).groupby(system, observed=True)["_run"].nunique().nunique() > 1
        t = run_means_test(data, response, system, item, runs, order, welch=True, system_item=si_positive,
                           behrens_fisher=unequal)
        ratio = float(ms.max() / ms.min())
        return t, (f"unequal variances: the residual variances of the systems differ by a factor of {ratio:.3g} "
                   f"(> {HETERO_RATIO:g}); the test is {t.method if t else 'the model F test'}, each system with "
                   "its own run and residual variance")
    n_runs = data.groupby(system, observed=True)[runs].nunique().iloc[:, 0] if len(runs) == 1 else None
    if n_runs is None or n_runs.nunique() != 1 or not boundary(model, system, runs):
        return None, None
    si = si_positive
    t = run_means_test(data, response, system, item, runs, order, welch=False, system_item=si)
    if t is None:
        return None, None
    exact = " (exact whatever the run variance)" if not si else ""
    return t, (f"run variance at zero: the REML variance of the runs is 0 in a balanced design; the test is the "
               f"{t.method}{exact}, not the model's F test at the boundary")


def two_models_p(p_min: float, runs: int, systems: int = 2, nodes: int = 400) -> float:
    """The p-value of "the smaller of the crossed and the nested runs models' p-values" (issue 56: run labels shared
    by the systems, ``--runs auto``): P(min(P_crossed, P_nested) <= p_min) under the null when the runs share no
    effect, the worst case (with a shared run effect the nested model's p only grows, so the rate is lower).

    In a balanced design of ``systems`` systems with ``runs`` run labels and no system x item term both tests are
    F tests of the run means with the same numerator, ``SS_sys / (k - 1)``: the crossed one against the system x run
    mean square on (k - 1)(n - 1) df, the nested one against the pooled within-system run mean square, which adds
    the run labels' mean square, on k(n - 1) df. With ``X_r ~ chi2(n - 1)`` and ``X_sr ~ chi2((k - 1)(n - 1))``
    independent of ``X_sys ~ chi2(k - 1)`` the probability is the expectation over (X_r, X_sr) of
    ``chi2(k - 1).sf((k - 1) min(f_c X_sr / ((k - 1)(n - 1)), f_n (X_r + X_sr) / (k (n - 1))))``, f_c and f_n the
    two F quantiles at ``p_min``: a midpoint rule on ``nodes`` quantiles of each. p_min = 0.0307 gives 0.05 with 2
    systems and 3 runs (0.0331 with 5 runs; 400,000 simulations of the run means agree to 1e-3)."""
    p_min = float(p_min)
    if not np.isfinite(p_min):
        return float("nan")
    if p_min <= 0.0 or p_min >= 1.0:
        return min(max(p_min, 0.0), 1.0)
    k, n = int(systems), int(runs)
    if k < 2 or n < 2:
        raise ValueError("two_models_p needs 2 or more systems and runs.")
    df_c, df_n = (k - 1) * (n - 1), k * (n - 1)
    f_c, f_n = stats.f.isf(p_min, k - 1, df_c), stats.f.isf(p_min, k - 1, df_n)
    q = (np.arange(nodes) + 0.5) / nodes
    x_r = stats.chi2.ppf(q, n - 1)[:, None]
    x_sr = stats.chi2.ppf(q, df_c)[None, :]
    bound = (k - 1) * np.minimum(f_c * x_sr / df_c, f_n * (x_r + x_sr) / df_n)
    return float(min(1.0, max(p_min, float(np.mean(stats.chi2.sf(bound, k - 1))))))


def _unless_zero(spread, noise):
    """``spread``, or the within-run ``noise`` where the spread is zero (:data:`ZERO_SPREAD`)."""
    return np.where(spread <= ZERO_SPREAD * noise, noise, spread)


def hetero_pairs(data: pd.DataFrame, response: str, system: str, item: str, runs: list, systems=None,
                 system_item: bool = False, n_boot: int = 1999, seed: int = 0, alpha: float = 0.05):
    """Three or more systems whose residual variances differ (:func:`heteroscedastic`; issue 56): every pair gets
    its own standard error, as Welch's t for two (Welch 1947; Games & Howell 1976 for many), and the pairs are
    adjusted together by the single-step max-|t| of their joint null distribution, simulated by a parametric
    bootstrap of the run means (Westfall & Young 1993; Krishnamoorthy, Lu & Mathew 2007, "A parametric bootstrap
    approach for ANOVA with unequal variances", Computational Statistics & Data Analysis 51: 5731-5742). One pooled
    variance made the noisier system's pairs pass for precise (family-wise 0.120 of true nulls with 5 systems x 3
    runs, one with 9 times the variance); Games-Howell's studentized range on each pair's Welch df rejected 0.064
    there and 0.120 with 12 systems (3 runs each: each variance on 2 df); the bootstrap max-|t| 0.038 and 0.025
    (3,000 simulations of the run means, 999 bootstrap draws each).

    Pair (a, b) has ``t = (M_a - M_b) / sqrt(v_a / n_a + v_b / n_b + s_ab)``, ``v_s`` system s's spread of its run
    means (its within-run noise ``MS_s / I`` where the spread is zero, :func:`run_means_test`), ``s_ab``
    (``system_item``) the pair's system x item part, ``var_i(d_i) / I - MS_a / (n_a I) - MS_b / (n_b I)`` truncated
    at 0, held fixed in the bootstrap. With run labels shared by the systems the spreads are still each system's
    own: a run effect shared by the systems then inflates them (conservative: 0.003 of true nulls with a shared run
    SD twice the largest own one), where the paired t of the pair's per-run differences with a bootstrap of each
    system's own part, fitted by least squares to the pairs' spreads, rejected 0.075 of the benchmark's nulls with
    independent runs (5 systems, one with 9 times the variance; each own part on 2 df).

    The bootstrap draws ``n_boot`` null sets of run means, each system's from N(0, v_s), and computes the same
    statistics; a pair's adjusted p is (1 + #{max |t*| >= |t|}) / (n_boot + 1) and its simultaneous interval +- q
    SE, q the critical max |t*| at ``alpha`` (the rule of :func:`vrs_helpers.book.glrt.bootstrap_critical`), so
    p < alpha exactly when the interval excludes 0.

    Returns (pairs, outcome) - pairs a DataFrame (a, b, estimate, SE, t, df: each pair's Satterthwaite df,
    p_value, lower, upper) in ``itertools.combinations(systems)`` order, the outcome a ZTest-like test of "some pair
    differs" (its statistic the largest |t|, its p the smallest adjusted p) - or None when the design is not complete
    or a system has fewer than 2 runs."""
    import itertools

    from ..outcomes import ZTest

    got = _run_means(data, response, system, item, runs, systems)
    if got is None:
        return None
    d, m, order, groups = got
    k, n_items = len(order), d[item].nunique()
    ms_all = residual_mean_squares(data, response, system, item, runs)
    n = np.array([len(g) for g in groups])
    if ms_all is None or k < 3 or (n < 2).any():
        return None
    noise = np.array([float(ms_all[s]) for s in order]) / n_items
    pairs = list(itertools.combinations(range(k), 2))
    si = np.zeros(len(pairs))
    if system_item:
        wide_i = d.groupby([item, system], observed=True)["y"].mean().unstack(system)[order].to_numpy()
        si = np.array([max(float((wide_i[:, a] - wide_i[:, b]).var(ddof=1)) / n_items
                           - noise[a] / n[a] - noise[b] / n[b], 0.0) for a, b in pairs])
    ia, ib = np.array([a for a, _ in pairs]), np.array([b for _, b in pairs])
    rng = np.random.default_rng([int(seed), 56])
    means = np.array([g.mean() for g in groups])
    v = _unless_zero(np.array([g.var(ddof=1) for g in groups]), noise)
    est = means[ia] - means[ib]
    se2 = v[ia] / n[ia] + v[ib] / n[ib] + si
    parts = [v[ia] / n[ia], v[ib] / n[ib]]
    dfs = se2 ** 2 / (parts[0] ** 2 / (n[ia] - 1) + parts[1] ** 2 / (n[ib] - 1)
                      + np.where(si > 0, si ** 2 / (n_items - 1), 0.0))
    s_means = np.empty((n_boot, k))
    s_v = np.empty((n_boot, k))
    for s in range(k):
        draw = rng.standard_normal((n_boot, n[s])) * np.sqrt(v[s])
        s_means[:, s], s_v[:, s] = draw.mean(axis=1), _unless_zero(draw.var(axis=1, ddof=1), noise[s])
    s_est = s_means[:, ia] - s_means[:, ib]
    s_se2 = s_v[:, ia] / n[ia] + s_v[:, ib] / n[ib] + si
    t = est / np.sqrt(se2)
    top = np.max(np.abs(s_est) / np.sqrt(s_se2), axis=1)
    p = (1 + (top[None, :] >= np.abs(t)[:, None]).sum(axis=1)) / (n_boot + 1)
    # the critical max |t*|: the (c + 1)-th largest, c the most exceedances with (1 + c) / (n_boot + 1) < alpha
    c = int(np.ceil(alpha * (n_boot + 1))) - 2
    crit = float(np.sort(top)[n_boot - c - 1]) if 0 <= c < n_boot else float("nan")
    se = np.sqrt(se2)
    out = pd.DataFrame({"a": [order[a] for a, _ in pairs], "b": [order[b] for _, b in pairs], "estimate": est,
                        "SE": se, "t": t, "df": dfs, "p_value": p, "lower": est - crit * se, "upper": est + crit * se})
    j = int(np.argmax(np.abs(t)))
    test = ZTest(float(abs(t[j])), float(p[j]), method=f"max-|t| of the pairs, each with its own SE (parametric "
                                                         f"bootstrap, {n_boot} simulations)")
    return out, test
