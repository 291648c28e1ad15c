"""Many systems: a ranking with honest ties instead of a wall of pairs (issue 38).

From the estimates of k systems and the family-wise decisions of their k (k - 1) / 2 pairwise contrasts (the
design's own model: Tukey on small-sample df, or single-step max-T):

- :func:`rank_intervals` - the rank of each estimate and its *simultaneous rank interval* (Mogstad, Romano, Shaikh &
  Wilhelm 2024, "Inference for ranks", the R package ``csranks``): lower end 1 + the number of systems significantly
  better, upper end k - the number significantly worse. With simultaneous pairwise decisions at family-wise level
  alpha, every system's true rank lies in its interval with probability at least 1 - alpha, jointly;
- :func:`compact_letters` - the compact letter display (Piepho 2004, "An algorithm for a letter-based representation
  of all-pairwise comparisons", J. Comput. Graph. Stat. 13(2): the insert-absorb algorithm without the sweeping
  step, with the columns ordered as R's ``multcompView::multcompLetters`` orders them): systems that share a letter
  are not separated, systems that share none are;
- :func:`best_set` - the best system and the systems not separated from it;
- :func:`ranking_table` / :func:`ranking_sentence` - one row per system and the answer for k >= 3;
- :func:`decision_intervals` - the intervals of the estimates and of every pair in the family of the decisions.
"""

from __future__ import annotations

import string

import numpy as np
import pandas as pd

from ...book.glrt import OWN_SE
from ...outcomes import p_is

#: systems tied with the best named in the answer (the best estimates first; the rest counted: 1,000 systems can
#: leave hundreds tied)
MAX_TIED_NAMED = 12
#: the most systems that get compact letters: the insert-absorb display grows faster than the pairs (1,000 systems
#: with many separations: 11 minutes); beyond it the rank intervals and the pairs carry the same decisions
MAX_LETTER_SYSTEMS = 200
LETTERS = tuple(string.ascii_lowercase + string.ascii_uppercase + ".")


def decision_matrix(systems, contrasts: pd.DataFrame, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """``(differ, p)``: the k x k symmetric matrices of the family-wise decisions (adjusted p < ``alpha``) and the
    adjusted p-values of the pairwise ``contrasts`` (rows named ``"A - B"``, columns ``p_value``), in the order of
    ``systems``. A contrast that was not computed (NaN: a separated system) is not a decision: ``differ`` False, p
    NaN."""
    names = [str(s) for s in systems]
    k = len(names)
    index = {}
    for i in range(k):
        for j in range(k):
            if i != j:
                index.setdefault(f"{names[i]} - {names[j]}", []).append((i, j))
    p = np.full((k, k), np.nan)
    labels = contrasts["contrast"].astype(str).tolist()
    ambiguous = any(len(index.get(c, [])) != 1 for c in labels) or len(labels) != k * (k - 1) // 2
    pairs = ([(i, j) for i in range(k) for j in range(i + 1, k)] if ambiguous else [index[c][0] for c in labels])
    for (i, j), value in zip(pairs, contrasts["p_value"].to_numpy(dtype=float), strict=True):
        p[i, j] = p[j, i] = value
    differ = np.nan_to_num(p, nan=1.0) < alpha
    np.fill_diagonal(differ, False)
    return differ, p


def rank_intervals(estimates, differ, higher_is_better: bool = True) -> pd.DataFrame:
    """Rank (1 = best; tied estimates - equal to 1e-9 relative - share the best of their ranks) and simultaneous rank
    interval of each system.

    ``estimates``: k numbers; ``differ``: k x k symmetric booleans, the family-wise decisions. ``rank_low`` = 1 + the
    number of systems significantly better, ``rank_high`` = k - the number significantly worse (Mogstad et al.
    2024)."""
    est = np.asarray(estimates, dtype=float)
    sign = 1.0 if higher_is_better else -1.0
    s = sign * est
    differ = np.asarray(differ, dtype=bool)
    # estimates equal up to the optimizer's rounding (1e-9 relative: systems with the same counts of correct
    # answers have one maximum-likelihood estimate, found to ~1e-12) are tied
    tol = 1e-9 * max(1.0, float(np.nanmax(np.abs(s), initial=0.0)))
    above = s[None, :] > s[:, None] + tol   # above[i, j]: j's estimate is better than i's
    better = differ & above                 # j significantly better than i
    worse = differ & above.T                # j significantly worse than i
    k = len(est)
    return pd.DataFrame({"rank": 1 + above.sum(axis=1), "rank_low": 1 + better.sum(axis=1),
                         "rank_high": k - worse.sum(axis=1)})


def _absorb(cols: list[int]) -> list[int]:
    """The columns (bitsets of systems) that no other column contains, each set once at its first position, in
    their order: what dropping every column contained in another (first such pair in column order, then again from
    the start, until none is) leaves - a column contained in another goes, of two equal ones the later goes - in one
    pass over the pairs of Python integers instead of repeated scans of boolean arrays (issue 54: 100 systems)."""
    out = []
    for a, c in enumerate(cols):
        if not any(b != a and not c & ~d and (c != d or b < a) for b, d in enumerate(cols)):
            out.append(c)
    return out


def _first_true(col: np.ndarray) -> float:
    hit = np.flatnonzero(col)
    return float(hit[0]) if len(hit) else np.inf


def _sort_columns(m: np.ndarray) -> np.ndarray:
    """Columns ordered by their first system; columns that start at the same system ordered, pair by pair, by the
    same rule on the systems below it (multcompView's order)."""
    if m.shape[1] == 0:
        return m
    order = sorted(range(m.shape[1]), key=lambda c: _first_true(m[:, c]))
    m = m[:, order].copy()
    first = [_first_true(m[:, c]) for c in range(m.shape[1])]
    for i in range(m.shape[1] - 1):
        if first[i] == first[i + 1] and np.isfinite(first[i]):
            rows = slice(int(first[i]) + 1, m.shape[0])
            m[rows, i:i + 2] = _sort_columns(m[rows, i:i + 2])
    return m


def _letter_names(n: int, letters=LETTERS) -> list[str]:
    """``n`` column names: the letters, then the last letter as a prefix of the others ("." "a" -> ".a"), as
    multcompView names them."""
    if n < len(letters):
        return list(letters[:n])
    again = tuple(letters[-1] + x for x in letters[:-1]) + (letters[-1],)
    return list(letters[:-1]) + _letter_names(n - len(letters) + 1, again)


def compact_letters(systems, differ) -> dict[str, str]:
    """The compact letter display of the decisions ``differ`` (k x k symmetric booleans, in the order of
    ``systems``): ``{system: letters}``. Every pair that no decision separates shares a letter, and no separated
    pair does (Piepho 2004, insert-absorb: for each separated pair, in multcompView's order, every column holding
    both is split in two - one without each of them - and columns contained in others are dropped)."""
    names = [str(s) for s in systems]
    k = len(names)
    differ = np.asarray(differ, dtype=bool)
    cols = [(1 << k) - 1]                   # columns as bitsets: bit r holds system r
    for j in range(k):                      # the pairs in multcompView's order: (j, i) for i > j, j ascending
        bj = 1 << j
        for i in np.flatnonzero(differ[j + 1:, j]) + j + 1:
            both = bj | (1 << int(i))
            if not any(c & both == both for c in cols):
                continue
            copies = []
            for n, c in enumerate(cols):
                if c & both == both:
                    copies.append(c & ~bj)      # the appended copy leaves out the first of the pair
                    cols[n] = c & ~(1 << int(i))  # the column in place leaves out the second
            cols = _absorb(cols + copies)
    cols = [np.array([(c >> r) & 1 for r in range(k)], dtype=bool) for c in cols]
    m = _sort_columns(np.column_stack(cols))
    labels = _letter_names(m.shape[1])
    return {names[r]: "".join(labels[c] for c in range(m.shape[1]) if m[r, c]) for r in range(k)}


def best_set(systems, estimates, differ, higher_is_better: bool = True) -> tuple[str, list[str], list[str]]:
    """``(best, tied, below)``: the system with the best estimate, the others not separated from it, and those
    significantly worse than it."""
    names = [str(s) for s in systems]
    est = np.asarray(estimates, dtype=float) * (1.0 if higher_is_better else -1.0)
    b = int(np.nanargmax(est))
    differ = np.asarray(differ, dtype=bool)
    tied = [names[j] for j in np.argsort(-est, kind="stable") if j != b and not differ[b, j]]
    below = [names[j] for j in np.argsort(-est, kind="stable") if j != b and differ[b, j]]
    return names[b], tied, below


def ranking_table(systems, estimates, ci_low, ci_high, contrasts: pd.DataFrame, alpha: float,
                  higher_is_better: bool = True, method: str = "") -> pd.DataFrame:
    """One row per system, best first: estimate with its CI, rank, simultaneous rank interval, letters (systems
    sharing a letter are not separated at family-wise ``alpha``) and ``method`` (how the decisions were made)."""
    names = [str(s) for s in systems]
    differ, _ = decision_matrix(names, contrasts, alpha)
    ranks = rank_intervals(estimates, differ, higher_is_better)
    order = np.argsort(ranks["rank"].to_numpy(), kind="stable")
    sub = differ[np.ix_(order, order)]
    letters = compact_letters([names[i] for i in order], sub) if len(names) <= MAX_LETTER_SYSTEMS else None
    table = pd.DataFrame({"system": names, "estimate": np.asarray(estimates, dtype=float),
                          "ci_low": np.asarray(ci_low, dtype=float), "ci_high": np.asarray(ci_high, dtype=float),
                          **{c: ranks[c].to_numpy() for c in ranks}})
    table = table.iloc[order].reset_index(drop=True)
    table["group"] = table["system"].map(letters) if letters is not None else ""
    table["method"] = method
    return table


def ranking_sentence(table: pd.DataFrame, contrasts: pd.DataFrame, alpha: float,
                     higher_is_better: bool = True) -> str:
    """The answer for k >= 3: the best system, the systems it cannot be separated from, how many are worse."""
    names = table["system"].tolist()
    differ, _ = decision_matrix(names, contrasts, alpha)
    best, tied, below = best_set(names, table["estimate"].to_numpy(), differ, higher_is_better)
    k = len(names)
    if not below:
        return (f"No system is separated from the best estimate ({best}) at family-wise alpha = {alpha:g}: all {k} "
                "are tied with it.")
    if not tied:
        return (f"{best} is the best of the {k} systems: each of the other {len(below)} is significantly worse "
                f"(family-wise alpha = {alpha:g}).")
    rest = (f"{below[0]} is significantly worse than {best}" if len(below) == 1 else
            f"the other {len(below)} of the {k} systems are significantly worse than {best}")
    named = (", ".join(tied) if len(tied) <= MAX_TIED_NAMED else
             f"{', '.join(tied[:MAX_TIED_NAMED])} and {len(tied) - MAX_TIED_NAMED} more (the leaderboard's rank "
             "intervals that reach 1)")
    return (f"{best} has the best estimate, and {named} cannot be separated from it at family-wise alpha = "
            f"{alpha:g}; {rest}.")


def _family_size(pairs: int) -> int:
    """The number of systems k whose k (k - 1) / 2 pairs are ``pairs`` (the systems left in a family that a
    separated system left: all pairs among them)."""
    return int(round((1 + np.sqrt(1 + 8 * pairs)) / 2))


def decision_intervals(comp, family: str, alpha: float) -> tuple[pd.DataFrame, str]:
    """The means of a comparison (:class:`vrs_helpers.book.glrt.SystemComparison`) with their intervals and what
    kind they are (``"simultaneous"`` or ``"per system"``), and every pair's interval (``lower``, ``upper``;
    for 0/1 scores also the difference in accuracy points, ``difference*``, :func:`vrs_helpers.mixed.models.marginal.
    response_differences`) at level 1 - alpha, in the family of the decisions: Tukey on the contrasts' df or the
    single-step max-|z| (``mvt``) - there p < alpha exactly when the interval excludes 0 - with the means' intervals
    simultaneous over the k means (:func:`~vrs_helpers.mixed.models.marginal.simultaneous_means`); with the bootstrap's
    max-|z| the pairs' intervals use the bootstrap's own critical value (the same rule as its adjusted p) and the
    means keep their per-system Wald intervals (the Wald covariance is what the bootstrap corrects: its
    simultaneous intervals would claim too much)."""
    from scipy import stats

    from ...book.glrt import bootstrap_critical
    from ...mixed.inference.multiplicity import correlation, single_step
    from ...mixed.models.marginal import response_differences, simultaneous_means, tukey_critical

    level = 1.0 - alpha
    emm = getattr(comp, "emm", None)
    m = comp.means
    if emm is None or emm.means_vcov is None:
        return m, "per system"
    c = comp.contrasts
    adjust = str(getattr(comp, "adjust", ""))
    est, se = c["estimate"].to_numpy(float), c["SE"].to_numpy(float)
    # the family's systems: those in a pair with a decision (a separated system's pairs are out of it, issue 39)
    decided = c.loc[np.isfinite(c["p_value"].to_numpy(float)), "contrast"] if "p_value" in c else c["contrast"]
    k = len(m) if len(decided) == len(c) else max(2, _family_size(len(decided)))
    if adjust.startswith("bootstrap"):
        pairs_test = getattr(comp, "pairs_test", None)
        crit = np.full(len(c), bootstrap_critical(comp.f_test if pairs_test is None else pairs_test, alpha))
        se = c["SE_given_theta"].to_numpy(float) if "SE_given_theta" in c else se
        kind = "per system"
        z = stats.t.isf(alpha / 2, m["df"]) if "df" in m else stats.norm.isf(alpha / 2)
        m = m.assign(lower=m["emmean"] - z * m["SE"], upper=m["emmean"] + z * m["SE"])
        if "probability" in m:
            from scipy.special import expit

            m = m.assign(prob_lower=expit(m["lower"]), prob_upper=expit(m["upper"]))
    elif adjust == "mvt":
        dfs = c["df"].to_numpy(float) if "df" in c else np.full(len(c), np.inf)
        ok = np.isfinite(est) & np.isfinite(dfs)
        df = float(np.min(dfs[ok])) if ok.any() else np.inf
        crit = np.full(len(c), single_step(est, se, correlation(emm.contrast_matrix, comp.model.vcov.to_numpy()),
                                           df=df, level=level)["quantile"])
        kind = "simultaneous"
    else:  # Tukey: the studentized range on each contrast's df
        dfs = c["df"].to_numpy(float) if "df" in c else np.full(len(c), np.inf)
        crit = tukey_critical(level, k, dfs)
        kind = "simultaneous"
    c = c.assign(lower=est - crit * se, upper=est + crit * se)
    if kind == "simultaneous":
        sim = simultaneous_means(emm, level)
        m = m.assign(lower=sim["lower"].to_numpy(), upper=sim["upper"].to_numpy())
        if "probability" in m:
            from scipy.special import expit

            m = m.assign(prob_lower=expit(m["lower"]), prob_upper=expit(m["upper"]))
    if family == "binomial" and "probability" in m:  # logit-scale contrasts (the linear model's are accuracies)
        diffs = response_differences(emm, level)
        if adjust.startswith("bootstrap"):  # the bootstrap's critical value, as the logit-scale pairs
            d_se = diffs["difference_SE"].to_numpy(float)
            diffs = diffs.assign(difference_low=diffs["difference"] - crit * d_se,
                                 difference_high=diffs["difference"] + crit * d_se)
        c = c.drop(columns=[x for x in diffs.columns if x != "contrast" and x in c]).merge(
            diffs, on="contrast", how="left", validate="one_to_one")
    comp.contrasts = c
    return m, kind


def forest_plot(table: pd.DataFrame, ax=None, xlabel: str = "estimate"):
    """The ranking as a forest plot: each system's estimate with its 95 % CI, best at the top, its rank interval and
    letters at the right (labels from the data drawn literally, :func:`vrs_helpers.literal.plot_text`). Returns
    the axes."""
    import matplotlib.pyplot as plt

    from ...literal import plot_text

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.9 + 0.32 * len(table)))
    y = np.arange(len(table))[::-1]
    est = table["estimate"].to_numpy(dtype=float)
    lo, hi = table["ci_low"].to_numpy(dtype=float), table["ci_high"].to_numpy(dtype=float)
    ax.errorbar(est, y, xerr=[np.nan_to_num(est - lo), np.nan_to_num(hi - est)], fmt="o", ms=4, capsize=2,
                color="#0969da")
    ax.set_yticks(y, [plot_text(s) for s in table["system"]])
    span = [f"{a}" if a == b else f"{a}-{b}" for a, b in zip(table["rank_low"], table["rank_high"], strict=True)]
    for yi, text in zip(y, [f"rank {s}   {plot_text(g)}" for s, g in zip(span, table["group"], strict=True)],
                        strict=True):
        ax.annotate(text, xy=(1.01, yi), xycoords=("axes fraction", "data"), va="center", fontsize=8,
                    family="monospace")
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    return ax


def pairwise_sentence(result) -> str | None:
    """With three or more systems, the family-wise decision of the runs-random reading: every pairwise contrast
    with its small-sample df, Tukey-adjusted on those df (emmeans, ``lmer.df = "kenward-roger"``), at ``alpha`` for
    the whole family of k (k - 1) / 2 contrasts."""
    comp = result.comparison_random
    if comp is None or len(result.systems) < 3 or "contrast" not in comp.contrasts:
        return None
    c = comp.contrasts
    small = "df" in c and "t" in c

    def said(r) -> str:
        if not np.isfinite(r["p_value"]):   # a separated system (issue 39): no decision, not "no difference"
            why = [f"{s} {result.separated[s]}" for s in map(str.strip, str(r["contrast"]).split(" - "))
                   if s in result.separated]
            return f"{r['contrast']}: not estimable" + (f" ({', '.join(why)})" if why else "")
        return (f"{r['contrast']}: {'differ' if r['p_value'] < result.alpha else 'no difference'} "
                + (f"(t = {r['t']:.3g} on {r['df']:.3g} df, adjusted p {p_is(r['p_value'])})" if small else
                   f"(z = {r['z']:.3g}, adjusted p {p_is(r['p_value'])})"))

    parts = [said(r) for _, r in c.iterrows()]
    missing = int((~np.isfinite(c["p_value"].to_numpy(dtype=float))).sum())
    own = getattr(comp, "adjust", "") == OWN_SE
    how = ("t tests each with its own SE (unequal variances), adjusted by the maximum |t| over a parametric "
           "bootstrap of the run means" if own else
           "t tests on small-sample df, Tukey-adjusted on those df" if small else
           "the pair of the two systems left compared by the GLMMs' parametric-bootstrap LRT without the separated "
           "systems" if getattr(comp, "adjust", "") == "bootstrap LRT of the pair" else
           "Wald z tests on the logit scale, adjusted by the maximum |z| over the parametric bootstrap's simulations "
           "(single-step max-T, Westfall & Young 1993)" if getattr(comp, "adjust", "").startswith("bootstrap") else
           "Wald z tests on the logit scale, Tukey-adjusted (no small-sample df for a GLMM)")
    found = int((c["p_value"] < result.alpha).sum())
    listed = "; ".join(parts) if len(c) <= MAX_LISTED_PAIRS else "every pair is in summary.json ('pairs')"
    gaps = f", {missing} not estimable" if missing else ""
    return (f"Pairwise, runs random ({how}; family-wise alpha = {result.alpha:g} over {len(c)} contrasts): "
            f"{found} of {len(c)} pairs differ{gaps} - " + listed + ".")


MAX_LISTED_PAIRS = 6   # up to 4 systems the pairwise decisions are listed in the verdict; beyond, the ranking
