"""Power and sample-size planning for comparing systems across training runs: how many runs per system (and test
items) a difference needs to be detected by the small-sample F test (issue 20).

This is the significance counterpart of the decision study (book 3.3.3, Figure 3.3): where the decision study
asks how the reliability coefficient phi changes with the numbers of levels of the facets, the planner asks how the
power of the test of the system difference changes with the numbers of runs n and items m, from the same variance
components (run SD, item SD, residual SD: values the user gives, or those of a fitted model).

Design (:func:`vrs_helpers.book.simulation.evaluation_log`): k systems, n runs each, the same m items, one score per
system, run and item, analysed as ``score ~ system + (1|item) + (1|system:run)``:

    y_sri = mu + delta_s + a_sr + b_i + e_sri,  a_sr ~ N(0, s_run^2), b_i ~ N(0, s_item^2), e_sri ~ N(0, s_e^2).

**Closed form (balanced designs).** The mean of run (s, r) over the items is
z_sr = mu + delta_s + a_sr + bbar + ebar_sr, where bbar, the mean item effect, is the same for every run and
cancels from every comparison of runs. So the run means are a one-way layout with k groups of n and independent
errors a_sr + ebar_sr ~ N(0, tau^2), tau^2 = s_run^2 + s_e^2 / m. Its F statistic,

    F = [n sum_s (zbar_s - zbar)^2 / (k - 1)] / [sum_s sum_r (z_sr - zbar_s)^2 / (k (n - 1))]
      = MS_system / MS_run(system)     (the ANOVA of the full layout; the factor m cancels),

is the ratio of independent chi-squares: F ~ F'(k - 1, k (n - 1), lambda), noncentral with

    lambda = n sum_s (delta_s - deltabar)^2 / tau^2 = n m sum_s (delta_s - deltabar)^2 / (s_e^2 + m s_run^2),

and the power at level alpha is P(F'(k-1, k(n-1), lambda) > F_{1-alpha}(k-1, k(n-1))). In this balanced design,
when the REML estimate of the run variance is inside its range (MS_run(system) > MS_residual), the Satterthwaite
and Kenward-Roger F tests of ``system`` are exactly this F test (same F, denominator df k (n - 1)); when it is on
the boundary they pool the run and residual variation and differ. The item SD does not enter. As m grows, lambda
tends to n sum_s (delta_s - deltabar)^2 / s_run^2: more items cannot make up for too few runs.

**Simulation (any design).** :func:`simulated_power` draws responses on the design (balanced by default, or the
rows of an existing log, e.g. with missing items) as sufficient statistics
(:mod:`vrs_helpers.mixed.resampling.simulate`),
fits each by REML with the engine and applies the small-sample test (a registered test, Kenward-Roger's F by
default); the power is the rejection rate with its Monte-Carlo standard error sqrt(power (1 - power) / n_sim).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from ... import registry
from ...book.reliability import components
from ...errors import VRSError
from ...literal import html_text


class PlanningError(VRSError, ValueError):
    """Bad arguments for a power or sample-size computation (the message says which and what is allowed)."""


FORMULA = "score ~ system + (1|item) + (1|system:run)"


def _number(name: str, value, low: float = 0.0, strict: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise PlanningError(f"{name} must be a number, got {value!r}.") from None
    if not math.isfinite(v) or abs(v) > 1e100:   # squares and products of 1e150 overflow double precision
        raise PlanningError(f"{name} must be a finite number no larger than 1e100 in size (use units in which the "
                            f"scores are moderate numbers), got {value!r}.")
    if v < low or (strict and v == low):
        raise PlanningError(f"{name} must be {'>' if strict else '>='} {low:g}, got {value!r}.")
    return v


#: what a plan may ask for (power_table, vrs plan): beyond these a number is a typo, not a design
MAX_RUNS, MAX_ITEMS, MAX_SYSTEMS = 100_000, 10**9, 10_000


def _count(name: str, value, low: int, high: float = math.inf) -> int:
    """A whole number in [low, high] (given as a number or as text: '10', '1e3'), else an error saying so."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
        whole = number.is_integer()
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole or not low <= number <= high:
        most = f" (and at most {high:,})" if high < math.inf else ""
        raise PlanningError(f"{name} must be an integer >= {low}{most}, got {value!r}.")
    return int(number)


def _check_alpha(alpha) -> float:
    a = _number("alpha", alpha)
    if not 0 < a < 1:
        raise PlanningError(f"alpha must be between 0 and 1, got {alpha!r}.")
    return a


def _shifts(delta, systems: int) -> np.ndarray:
    """Per-system means relative to the first system: a scalar delta for systems 2..k (as evaluation_log)."""
    d = np.asarray(delta, dtype=float)
    if d.ndim == 0:
        if not math.isfinite(float(d)):
            raise PlanningError(f"delta must be a finite number, got {delta!r}.")
        return np.r_[0.0, np.full(systems - 1, float(d))]
    if d.shape != (systems,) or not np.isfinite(d).all():
        raise PlanningError(f"delta must be a number or one finite value per system ({systems}), got {delta!r}.")
    return d


@dataclass(frozen=True)
class VarianceComponents:
    """The standard deviations the planner needs: between runs of a system, between items, residual."""

    run_sd: float
    item_sd: float
    residual_sd: float

    def __post_init__(self):
        for name, label in (("run_sd", "run SD"), ("item_sd", "item SD"), ("residual_sd", "residual SD")):
            object.__setattr__(self, name, _number(label, getattr(self, name)))
        if self.run_sd == 0 and self.residual_sd == 0:
            raise PlanningError("run SD and residual SD are both 0: every run would give the same mean; give the "
                                "variation of your runs.")

    @classmethod
    def from_fit(cls, source, run: str, item: str = "item") -> VarianceComponents:
        """From a fitted model (:func:`vrs_helpers.mixed.fit`), its ``variance_components`` table, a mapping
        component -> variance (lme4 names, with ``Residual``), or a mapping system -> such a table (the per-system
        tables of ``vrs analyze``: their variances are averaged, the joint model's common run variance).
        ``run``: the run component's name (``system:seed`` in a joint fit, ``seed`` in a per-system table)."""
        if isinstance(source, Mapping) and source and all(
                hasattr(v, "variance_components") or isinstance(v, (pd.DataFrame, Mapping)) for v in source.values()):
            parts = [cls.from_fit(v, run, item) for v in source.values()]
            return cls(*(math.sqrt(float(np.mean([getattr(p, a) ** 2 for p in parts])))
                         for a in ("run_sd", "item_sd", "residual_sd")))
        s = components(source, PlanningError)
        missing = [c for c in (run, item) if c not in s.index]
        if missing:
            raise PlanningError(f"Component(s) {', '.join(map(repr, missing))} not in the variance components "
                                f"({', '.join(map(str, s.index))}); name the run component with run=.")
        return cls(math.sqrt(s[run]), math.sqrt(s[item]), math.sqrt(s["Residual"]))


def _levels_and_sds(runs, run_sd) -> tuple[np.ndarray, np.ndarray]:
    """Per crossed replication column its number of levels per system and its SD: scalars for one column (runs of
    a system), or one value per column (e.g. seeds x configurations)."""
    n = [runs] if np.ndim(runs) == 0 else list(runs)
    sd = [run_sd] if np.ndim(run_sd) == 0 else list(run_sd)
    if len(n) != len(sd) or not n:
        raise PlanningError(f"give one number of levels per replication column and one SD per column: got "
                            f"{len(n)} numbers of levels ({runs!r}) and {len(sd)} SDs ({run_sd!r}).")
    label = "runs" if len(n) == 1 else "levels of each replication column"
    return (np.array([_count(label, v, 1) for v in n], dtype=float),
            np.array([_number("run SD", v) for v in sd], dtype=float))


def design_moments(runs, items: int, run_sd, residual_sd: float, systems: int = 2, system_item_sd: float = 0.0,
                   shared_runs: bool = False) -> tuple[float, float]:
    """(V, den_df): the variance of one system's mean over its runs and items, and the denominator df of the F test
    of the system difference, in the balanced design with crossed replication columns (module docstring).

    V = sum_c s_c^2 / n_c + s_si^2 / m + s_e^2 / (m N), N = prod_c n_c runs per system. With one column and no
    system x item variance the F test is exact, den_df = k (n - 1). Otherwise the mean square of the system term is
    tested against a sum of mean squares with the same expectation under H0 (each column's, the system x item
    one's, minus the residual's as often as it is counted twice), as Satterthwaite (1946) and the quasi-F do, with
    df nu = (sum_j E_j - (J - 1) E_R)^2 / (sum_j E_j^2 / df_j + (J - 1)^2 E_R^2 / df_R) from the expected mean
    squares E_j = N v_j + s_e^2 / m (v_j the term's share of V; df_c = k (n_c - 1), df_si = (k - 1)(m - 1)); the
    Satterthwaite and Kenward-Roger F tests of the fitted model estimate the same df.

    ``shared_runs``: crossed runs (issue 39), every run label shared by the systems, ``(1|run) + (1|system:run)``;
    ``run_sd`` is then the SD of the system x run effects (what the shared run effect leaves of a run's shift: the
    shared part cancels in every system difference and does not enter). V is the same; the system is tested
    against the system x run mean square, df (k - 1)(n - 1) instead of k (n - 1) (two systems: the paired t test of
    the per-run differences of the run means, n - 1 df). The residual df do not change (the run and system x run
    terms together take the k (n - 1) df of the nested runs)."""
    k = _count("systems", systems, 2)
    m = _count("items", items, 1)
    n, sd = _levels_and_sds(runs, run_sd)
    s_e2 = _number("residual SD", residual_sd) ** 2
    s_si2 = _number("system x item SD", system_item_sd) ** 2
    N = float(np.prod(n))
    shares = list(sd ** 2 / n)
    dfs = list((k - 1 if shared_runs else k) * (n - 1))
    if s_si2 > 0:
        shares.append(s_si2 / m)
        dfs.append((k - 1) * (m - 1))
    V = float(sum(shares) + s_e2 / (m * N))
    if V == 0:
        raise PlanningError("run SD and residual SD are both 0; give the variation of your runs.")
    if len(shares) == 1:
        return V, float(dfs[0])
    if min(dfs) <= 0:
        raise PlanningError("each crossed replication column needs at least 2 levels (and the system x item term "
                            "2 items) to be tested against.")
    noise = s_e2 / m
    E = np.array(shares) * N + noise
    J = len(E)
    # the residual df: every df of the k N m rows but the mean's, the systems', the items', the runs' (per column)
    # and, when it is in the model, the system x item term's (issue 39: it was left in the residual)
    df_res = max(k * N * m - m - k * (1 + float(np.sum(n - 1))) + 1 - ((k - 1) * (m - 1) if s_si2 > 0 else 0), 1.0)
    num = (E.sum() - (J - 1) * noise) ** 2
    den = float(np.sum(E ** 2 / np.array(dfs))) + (J - 1) ** 2 * noise ** 2 / df_res
    return V, float(num / den) if den > 0 else math.inf


def noncentrality(delta, runs, items: int, run_sd, residual_sd: float, systems: int = 2,
                  system_item_sd: float = 0.0) -> float:
    """lambda = sum_s (delta_s - deltabar)^2 / V (:func:`design_moments`); with one replication column
    n m sum_s (delta_s - deltabar)^2 / (s_e^2 + m s_run^2) (module docstring)."""
    systems = _count("systems", systems, 2)
    d = _shifts(delta, systems)
    V, _ = design_moments(runs, items, run_sd, residual_sd, systems, system_item_sd)
    return float(np.sum((d - d.mean()) ** 2) / V)


def _power_at(lam: float, d1: float, d2: float, alpha: float) -> float:
    crit = stats.f.isf(alpha, d1, d2)
    return float(stats.ncf.sf(crit, d1, d2, lam)) if lam > 0 else alpha


def f_test_power(delta, runs, items: int, run_sd, residual_sd: float, systems: int = 2, alpha: float = 0.05,
                 system_item_sd: float = 0.0, shared_runs: bool = False) -> float:
    """Power of the F test of the system difference in the balanced design: P(F'(k-1, nu, lambda) >
    F_{1-alpha}(k-1, nu)), nu = k(n-1) with one replication column (module docstring; several crossed columns
    ``runs=[n_1, n_2]``, ``run_sd=[s_1, s_2]`` and a system x item SD: :func:`design_moments`). Needs at least 2
    runs per system (else no df for the runs). ``shared_runs``: crossed runs (:func:`design_moments`)."""
    alpha = _check_alpha(alpha)
    n, _ = _levels_and_sds(runs, run_sd)
    if len(n) == 1:
        _count("runs", runs if np.ndim(runs) == 0 else n[0], 2)
    k = _count("systems", systems, 2)
    d = _shifts(delta, k)
    V, nu = design_moments(runs, items, run_sd, residual_sd, k, system_item_sd, shared_runs)
    return _power_at(float(np.sum((d - d.mean()) ** 2) / V), k - 1, nu, alpha)


def power_limit(delta, runs, run_sd, systems: int = 2, alpha: float = 0.05, system_item_sd: float = 0.0,
                shared_runs: bool = False) -> float:
    """The power with n runs as the number of items grows without bound (lambda -> n sum (delta - deltabar)^2 /
    s_run^2 with one column): no number of items gives more."""
    alpha = _check_alpha(alpha)
    n, sd = _levels_and_sds(runs, run_sd)
    if len(n) == 1:
        _count("runs", n[0], 2)
    k = _count("systems", systems, 2)
    d = _shifts(delta, k)
    ss = float(np.sum((d - d.mean()) ** 2))
    if ss == 0:
        return alpha
    if not np.any(sd > 0):
        return 1.0
    # m -> infinity: the residual's and the system x item term's shares vanish (checked at 10^9 items)
    V, nu = design_moments(runs, 10 ** 12, sd if len(sd) > 1 else float(sd[0]), 0.0, k, shared_runs=shared_runs)
    return _power_at(ss / V, k - 1, nu, alpha)


def _check_effect(delta, systems, target):
    d = _shifts(delta, systems)
    if np.allclose(d, d.mean()):
        raise PlanningError("delta is 0 (all systems equal): there is no difference to detect; give the smallest "
                            "difference that matters to you.")
    return _check_target(target)


def _check_target(target) -> float:
    t = _number("target", target)
    if not 0 < t < 1:
        raise PlanningError(f"target power must be between 0 and 1, got {target!r}.")
    return t


def _with_levels(runs, column: int, n: int):
    if np.ndim(runs) == 0:
        return n
    out = list(runs)
    out[column] = n
    return out


def _first(ok, lo: int, hi: int, limit: int) -> int | None:
    """The smallest x in (lo, limit] with ok(x), ok increasing; ok(lo) is False: doubling from hi, then bisection."""
    while not ok(hi):
        if hi >= limit:
            return None
        hi = min(2 * hi, limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def runs_needed(delta, items: int, run_sd, residual_sd: float, systems: int = 2, alpha: float = 0.05,
                target: float = 0.8, max_runs: int = 10_000, runs=None, column: int = 0,
                system_item_sd: float = 0.0, shared_runs: bool = False) -> int | None:
    """The smallest number of runs per system n >= 2 whose power (:func:`f_test_power`) reaches ``target`` with
    ``items`` items; None if no n up to ``max_runs`` does. The power increases with n (lambda grows linearly and
    the critical value falls), so the first n reaching the target is found by doubling and bisection.

    Crossed replication columns: ``run_sd`` one SD per column, ``runs`` the numbers of levels of the others
    (held fixed) and ``column`` the one whose levels are searched."""
    target = _check_effect(delta, systems, target)
    max_runs = _count("max_runs", max_runs, 2)
    if np.ndim(run_sd) == 0:
        runs = 2
    elif runs is None or len(runs) != len(run_sd):
        raise PlanningError("with several replication columns give runs= (the levels of each) and column=.")

    def ok(n):
        return n >= 2 and f_test_power(delta, _with_levels(runs, column, n), items, run_sd, residual_sd, systems,
                                       alpha, system_item_sd, shared_runs) >= target

    return _first(ok, 1, 2, max_runs)


def items_needed(delta, runs, run_sd, residual_sd: float, systems: int = 2, alpha: float = 0.05,
                 target: float = 0.8, max_items: int = 10_000_000, system_item_sd: float = 0.0,
                 shared_runs: bool = False) -> int | None:
    """The smallest number of items m whose power with ``runs`` runs per system reaches ``target``; None if even
    infinitely many items do not (:func:`power_limit` below the target) or none up to ``max_items`` does."""
    target = _check_effect(delta, systems, target)
    max_items = _count("max_items", max_items, 1)
    if power_limit(delta, runs, run_sd, systems, alpha, shared_runs=shared_runs) < target:
        return None

    def ok(m):
        return m >= 1 and f_test_power(delta, runs, m, run_sd, residual_sd, systems, alpha, system_item_sd,
                                       shared_runs) >= target

    return _first(ok, 0, 1, max_items)


def minimum_detectable_difference(runs, items: int, run_sd, residual_sd: float, systems: int = 2,
                                  alpha: float = 0.05, target: float = 0.8, system_item_sd: float = 0.0,
                                  shared_runs: bool = False) -> float:
    """The smallest difference delta the design detects with power ``target`` (0.8): systems 2..k each delta from
    the first (as :func:`f_test_power` reads a scalar delta). The power is a function of lambda = delta^2
    sum_s (u_s - ubar)^2 / V (u the pattern for delta = 1), increasing in lambda: solve power(lambda) = target for
    lambda and return sqrt(lambda V / sum (u - ubar)^2). The prospective answer to "what can this design see",
    in place of post-hoc "observed power", which is a function of the p-value only (Hoenig & Heisey 2001,
    The American Statistician 55: 19-24)."""
    from scipy.optimize import brentq

    alpha, target = _check_alpha(alpha), _check_target(target)
    if target <= alpha:
        raise PlanningError(f"target power must exceed alpha ({alpha:g}), got {target!r}.")
    k = _count("systems", systems, 2)
    n, _ = _levels_and_sds(runs, run_sd)
    if len(n) == 1:
        _count("runs", n[0], 2)
    V, nu = design_moments(runs, items, run_sd, residual_sd, k, system_item_sd, shared_runs)
    u = _shifts(1.0, k)
    hi = 1.0
    while _power_at(hi, k - 1, nu, alpha) < target:
        hi *= 2
    lam = brentq(lambda x: _power_at(x, k - 1, nu, alpha) - target, 0.0, hi, xtol=1e-12, rtol=1e-12)
    return float(math.sqrt(lam * V / np.sum((u - u.mean()) ** 2)))


def variance_upper_bound(ss: float, df: float, noise: float = 0.0, level: float = 0.8) -> float:
    """One-sided ``level`` upper confidence bound of a variance component from its sum of squares: the mean square
    SS/df estimates s^2 + noise (``noise``: the residual's share of the same mean square), and SS / (s^2 + noise)
    ~ chi-square(df), so s^2 <= SS / chi2_{1-level}(df) - noise with probability ``level`` (0 when negative).

    For planning from a pilot estimate that is 0 on the boundary of its range: power from a zero run variance
    promises too much; planning with an upper bound (Browne 1995, Statistics in Medicine 14: 1933-1940: the 80 %
    bound, so that the planned power is reached with probability about 0.8) does not."""
    df = _number("df", df, strict=True)
    level = _number("level", level)
    if not 0 < level < 1:
        raise PlanningError(f"level must be between 0 and 1, got {level!r}.")
    return max(float(_number("SS", ss) / stats.chi2.ppf(1 - level, df) - _number("noise", noise)), 0.0)


def _crossed(crossed) -> dict:
    """{name: (sd, levels)} of replication columns crossed with the runs (held at their levels)."""
    out = {}
    for name, value in dict(crossed or {}).items():
        try:
            sd, levels = value
        except (TypeError, ValueError):
            raise PlanningError(f"crossed column {name!r}: give (SD, levels), got {value!r}.") from None
        out[str(name)] = (_number(f"SD of {name}", sd), _count(f"levels of {name}", levels, 2, MAX_RUNS))
    return out


@dataclass
class PowerTable:
    """Power of the F test by runs per system and items (closed form, balanced design), the minimum detectable
    difference of each design and the runs needed for the target power for each number of items
    (:func:`power_table`)."""

    delta: object
    components: VarianceComponents
    systems: int
    alpha: float
    target: float
    table: pd.DataFrame = field(repr=False)  # runs, items, lambda, num_df, den_df, power, mdd
    needed: pd.DataFrame = field(repr=False)  # items, runs_needed
    crossed: dict = field(default_factory=dict)  # name -> (sd, levels): columns crossed with the runs
    system_item_sd: float = 0.0
    shared_runs: bool = False  # crossed runs: run labels shared by the systems (design_moments)

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def wide(self, value: str = "power") -> pd.DataFrame:
        """Power (or ``value="mdd"``, the minimum detectable difference) with runs as rows and items as columns."""
        return self.table.pivot(index="runs", columns="items", values=value)

    def __repr__(self) -> str:
        need = ", ".join(f"{int(r['items'])} items: {'none' if pd.isna(r['runs_needed']) else int(r['runs_needed'])}"
                         for _, r in self.needed.iterrows())
        return (f"PowerTable(delta={self.delta}, {self.systems} systems, alpha={self.alpha:g}; runs needed for "
                f"power {self.target:g}: {need})")

    def warnings(self) -> list[str]:
        """What the table rests on that the reader must know: a run SD of 0."""
        zero = [n for n, v in [("run", self.components.run_sd)] + [(n, v[0]) for n, v in self.crossed.items()]
                if v == 0]
        return [f"NOTE: the {n} SD is 0: this power assumes that the {n}s never differ, which no set of training "
                "runs shows (an estimate of 0 from a few runs is a boundary estimate). Plan with an upper bound, "
                "e.g. the 80 % upper confidence bound of a pilot's estimate (vrs_helpers.evaluate.tables.power."
                "variance_upper_bound), or the SD you expect." for n in zero]

    def text(self) -> str:
        """The table as the ``vrs plan`` command prints it: power by runs (rows) and items (columns), the limit as
        the items grow, the minimum detectable difference and the runs needed for the target per number of
        items."""
        c = self.components
        sds, levels = self._columns(None)
        wide = self.wide()
        wide.columns = [f"{m} items" for m in wide.columns]
        wide["items -> inf"] = [power_limit(self.delta, self._columns(n)[1], sds, self.systems, self.alpha,
                                            shared_runs=self.shared_runs) for n in wide.index]
        wide.index.name = "runs per system"
        mdd = self.wide("mdd")
        mdd.columns = [f"{m} items" for m in mdd.columns]
        mdd.index.name = "runs per system"
        more = "".join(f", {n} SD = {sd:g} ({lv} levels, crossed with the runs)"
                       for n, (sd, lv) in self.crossed.items())
        si = f", system x item SD = {self.system_item_sd:g}" if self.system_item_sd else ""
        runs_df = f"{self.systems} (n - 1)" if not self.shared_runs else (
            "n - 1" if self.systems == 2 else f"{self.systems - 1} (n - 1)")
        df_text = (f"({self.systems - 1}, {runs_df}) df" if not self.crossed and not si else
                   f"{self.systems - 1} and Satterthwaite's df")
        if self.shared_runs:
            df_text += "; runs crossed: run labels shared by the systems, the run SD that of system x run"
            model = ("Runs crossed, (1|run) + (1|system:run): the same run labels (seeds, few-shot draws) for every "
                     "system, as vrs analyze fits them by default (--runs auto) when every label is shared")
        else:
            model = ("Runs nested, (1|system:run): each system's runs its own, as vrs analyze fits them by default "
                     "(--runs auto) when the systems share no run labels; --shared-runs plans shared ones")
        lines = [f"Power of the F test of the system difference (closed form, balanced design: noncentral F on "
                 f"{df_text})", model,
                 f"{self.systems} systems, delta = {self.delta}, run SD = {c.run_sd:g}{more}{si}, item SD = "
                 f"{c.item_sd:g}, residual SD = {c.residual_sd:g}, alpha = {self.alpha:g}", *self.warnings(), "",
                 wide.to_string(float_format=lambda v: f"{v:.3f}"), "",
                 f"Minimum detectable difference (power {self.target:g}; every other system that far from the "
                 "first):", mdd.to_string(float_format=lambda v: f"{v:.4g}"), ""]
        for _, r in self.needed.iterrows():
            n = r["runs_needed"]
            lines.append(f"runs per system needed for power {self.target:g} with {int(r['items'])} items: "
                         + ("more than 10000" if pd.isna(n) else str(int(n))))
        return "\n".join(lines)

    def _columns(self, runs):
        """(SDs, levels) in the planner's form: scalars for the runs alone, lists with crossed columns."""
        if not self.crossed:
            return self.components.run_sd, runs
        return ([self.components.run_sd] + [v[0] for v in self.crossed.values()],
                [runs] + [v[1] for v in self.crossed.values()])

    def _repr_html_(self) -> str:
        return (f"<p>Power of the F test (k = {self.systems} systems, alpha = {self.alpha:g}, delta = "
                f"{html_text(self.delta)})</p>" + "".join(f"<p>{html_text(w)}</p>" for w in self.warnings())
                + self.wide().to_html(float_format=lambda v: f"{v:.3f}")
                + f"<p>Minimum detectable difference (power {self.target:g})</p>"
                + self.wide("mdd").to_html(float_format=lambda v: f"{v:.4g}")
                + self.needed.to_html(index=False, float_format=lambda v: f"{v:.3f}"))


def power_table(runs, items, delta, components: VarianceComponents, systems: int = 2, alpha: float = 0.05,
                target: float = 0.8, crossed=None, system_item_sd: float = 0.0, shared_runs: bool = False
                ) -> PowerTable:
    """The closed-form power and minimum detectable difference for every combination of ``runs`` (per system)
    and ``items``, and for each number of items the runs needed for ``target`` (None: more than 10,000, or never
    when the power limit over items is below the target). ``crossed``: {name: (SD, levels)} of replication
    columns crossed with the runs (e.g. configurations x seeds), held at their levels; ``system_item_sd``: the
    SD of system x item effects; ``shared_runs``: crossed runs, run labels shared by the systems, the run SD that
    of the system x run effects (:func:`design_moments`)."""
    runs = [runs] if np.ndim(runs) == 0 else list(runs)
    items = [items] if np.ndim(items) == 0 else list(items)
    if not runs or not items:
        raise PlanningError("give at least one number of runs and one number of items.")
    runs = [_count("runs per system", n, 2, MAX_RUNS) for n in runs]
    items = [_count("items", m, 1, MAX_ITEMS) for m in items]
    k = _count("systems", systems, 2, MAX_SYSTEMS)
    alpha = _check_alpha(alpha)
    delta = float(_number("delta", delta, low=-math.inf)) if np.ndim(delta) == 0 else np.asarray(delta, float)
    target = _check_effect(delta, k, target)
    si = _number("system x item SD", system_item_sd)
    c = components
    out = PowerTable(delta, c, k, alpha, target, pd.DataFrame(), pd.DataFrame(), _crossed(crossed), si,
                     bool(shared_runs))
    sh = out.shared_runs
    sds, _ = out._columns(None)
    rows = []
    for m in items:
        for n in runs:
            lv = out._columns(n)[1]
            V, nu = design_moments(lv, m, sds, c.residual_sd, k, si, sh)
            rows.append({"runs": n, "items": m, "lambda": noncentrality(delta, lv, m, sds, c.residual_sd, k, si),
                         "num_df": k - 1, "den_df": nu,
                         "power": f_test_power(delta, lv, m, sds, c.residual_sd, k, alpha, si, sh),
                         "mdd": minimum_detectable_difference(lv, m, sds, c.residual_sd, k, alpha, target, si, sh)})
    needed = [{"items": m, "runs_needed": runs_needed(delta, m, sds, c.residual_sd, k, alpha, target,
                                                      runs=out._columns(2)[1] if out.crossed else None,
                                                      system_item_sd=si, shared_runs=sh)}
              for m in items]
    out.table = pd.DataFrame(rows)
    out.needed = pd.DataFrame(needed).astype({"runs_needed": "Int64"})
    return out


# ----------------------------------------------------------------------------------------------- simulation

def _planned(name: str) -> Callable:
    """(REML fit, L) -> the outcome of the registered test ``name`` (:mod:`vrs_helpers.registry`)."""
    from ...book import glrt  # noqa: F401 - registers the tests' implementations
    from ...registry import Hypothesis, get

    test = get(name)

    def run(result, L):
        return test.run(Hypothesis(result.formula, "", result, L, "system"))

    run.__name__ = name
    return run


#: the tests the planner simulates, by name: (REML result, contrast matrix) -> a TestOutcome (the registry's tests
#: that need only a REML fit and L)
TESTS: dict[str, Callable] = {t.name: _planned(t.name) for t in registry.TESTS if t.planning}


def _test_function(test) -> tuple[Callable, str]:
    """The planner's test: a function (REML fit, L) -> outcome, or a registered test's name (None: the default
    gaussian test); any other name is an error naming those that apply."""
    if callable(test):
        return test, getattr(test, "__name__", "custom test")
    try:
        name = registry.choose(test, "gaussian", planning=True).name
    except registry.TestChoiceError as e:
        usable = ", ".join(t.name for t in registry.applicable("gaussian", planning=True))
        raise PlanningError(f"test must be a test the planner can simulate ({usable}) or a function (REML fit, L) "
                            f"-> test result: {e}") from None
    return TESTS[name], name


@dataclass
class SimulatedPower:
    """Power by simulation (:func:`simulated_power`): the rejection rate, its Monte-Carlo SE and the p-values."""

    power: float
    mc_se: float
    n_sim: int
    n_failed: int
    alpha: float
    test: str
    design: str
    p_values: np.ndarray = field(repr=False)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"design": self.design, "test": self.test, "power": self.power, "mc_se": self.mc_se,
                              "n_sim": self.n_sim, "n_failed": self.n_failed, "alpha": self.alpha}])

    def __repr__(self) -> str:
        return (f"SimulatedPower({self.power:.3f} +- {self.mc_se:.3f} (MC SE), {self.n_sim} simulations, "
                f"{self.test}; {self.design})")


def _design_rows(systems: int, runs, items: int, crossed: dict) -> pd.DataFrame:
    runs = [runs] * systems if np.ndim(runs) == 0 else list(runs)
    if len(runs) != systems:
        raise PlanningError(f"runs must be a number or one number per system ({systems}), got {runs!r}.")
    frames = []
    for s, n in enumerate(runs):
        n = _count("runs", n, 2)
        axes = [np.arange(n)] + [np.arange(lv) for _, lv in crossed.values()] + [np.arange(items)]
        grid = np.meshgrid(*axes, indexing="ij")
        cols = {"system": f"S{s}", "run": grid[0].ravel().astype(str)}
        cols.update({name: grid[j + 1].ravel().astype(str) for j, name in enumerate(crossed)})
        cols["item"] = grid[-1].ravel().astype(str)
        frames.append(pd.DataFrame(cols))
    return pd.concat(frames, ignore_index=True)


def simulated_power(delta, components: VarianceComponents, runs=3, items: int = 100, systems: int = 2,
                    alpha: float = 0.05, n_sim: int = 500, seed: int = 0, test=None,
                    design: pd.DataFrame | None = None, batch_size: int = 50, system_item_sd: float = 0.0,
                    crossed=None, family: str = "gaussian", n_boot: int = 199,
                    item_effects: str = "random") -> SimulatedPower:
    """Power of the small-sample test by simulation through the engine (module docstring), for the designs the
    closed form does not cover exactly: unbalanced, k > 2 systems, crossed replication columns, system x item
    variation, 0/1 scores.

    ``runs``: runs per system (a number, or one per system: an unbalanced design); or ``design``: the rows of a
    log (columns ``system``, ``run``, ``item``; the run labels within a system), e.g. with missing items - then
    ``runs``/``items``/``systems`` are taken from it, ``delta`` per system follows the sorted system labels.
    ``crossed``: {name: (SD, levels)} of replication columns crossed with the runs (a random intercept per system
    and level each); ``system_item_sd``: the SD of system x item effects, modelled by ``(1|system:item)`` (with
    more than one run per system and item, as the workflow does). ``test``: a registered test the planner can
    simulate (:mod:`vrs_helpers.registry`: "kenward-roger", the default, or "satterthwaite") or a function (REML
    fit, L) -> test result. Seeded: batch i of ``batch_size`` simulations draws from child i of
    SeedSequence(seed).

    ``family="binomial"``: 0/1 scores of the logistic GLMM (``delta`` and the SDs on the logit scale, the
    intercept ``components.residual_sd`` is not used: 0), balanced, one replication column; every simulated log
    goes through the workflow's comparison with its default test for 0/1 scores (``n_boot`` bootstrap samples
    where it is a bootstrap), :func:`vrs_helpers.book.simulation.workflow_p_values`; for k > 2 systems the
    family-wise pairwise decision; ``item_effects``: the comparison's ``items`` ("random", its default: with
    ``(1|system:item)``; "fixed": these items).
    """
    from ...mixed import accumulate, fit_stats
    from ...mixed.resampling.simulate import ModelView, ResponseSimulator, term_columns, term_offsets
    from ...threads import blas_limit

    alpha = _check_alpha(alpha)
    n_sim = _count("n_sim", n_sim, 1)
    c = components
    si = _number("system x item SD", system_item_sd)
    crossed = _crossed(crossed)
    if family == "binomial":
        return _simulated_binomial(delta, c, runs, items, systems, alpha, n_sim, seed, si, n_boot, crossed, design,
                                   item_effects)
    if family != "gaussian":
        raise PlanningError(f"family must be 'gaussian' or 'binomial', got {family!r}.")
    fn, name = _test_function(test)
    if design is None:
        k = _count("systems", systems, 2)
        rows = _design_rows(k, runs, _count("items", items, 1), crossed)
        label = f"{k} systems x {runs} runs x {items} items" + "".join(f" x {lv} {n}" for n, (_, lv)
                                                                      in crossed.items())
    else:
        missing = [v for v in ("system", "run", "item", *crossed) if v not in design.columns]
        if missing:
            raise PlanningError(f"design needs the columns system, run, item and the crossed ones; missing "
                                f"{', '.join(missing)}.")
        rows = design[["system", "run", *crossed, "item"]].astype(str)
        k = rows["system"].nunique()
        label = f"given design: {len(rows)} rows, {k} systems"
    if si:
        label += f", system x item SD {si:g}"
    formula = FORMULA + "".join(f" + (1|system:{n})" for n in crossed) + (" + (1|system:item)" if si else "")
    s = accumulate(formula, rows.assign(score=0.0))
    levels = s.factor_levels["system"]
    shifts = _shifts(delta, len(levels))
    p = s.p
    q = int(term_offsets(s)[-1])
    fixed = np.zeros(q + p)
    fixed[q + np.arange(p)] = np.r_[0.0, shifts[1:] - shifts[0]]  # treatment coding: intercept, then vs S0
    cols = term_columns(s)
    sds = {("item",): c.item_sd, ("system", "run"): c.run_sd, ("system", "item"): si,
           **{("system", n): v[0] for n, v in crossed.items()}}
    random = [(cols[j], np.array([[sds[tuple(t.group)] ** 2]])) for j, t in enumerate(s.terms)]
    L = np.zeros((p - 1, p))
    L[np.arange(p - 1), np.arange(1, p)] = 1.0
    sim = ResponseSimulator(s)
    pvals = np.full(n_sim, np.nan)
    view = ModelView(s)
    with warnings.catch_warnings(), blas_limit(1):
        warnings.simplefilter("ignore")
        for b, start in enumerate(range(0, n_sim, batch_size)):
            size = min(batch_size, n_sim - start)
            draws = sim.draw(np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(b,))), size, fixed,
                             random, c.residual_sd)
            for j in range(size):
                try:
                    pvals[start + j] = float(fn(fit_stats(view.stats(draws, j), "REML", blas_threads=None), L).p_value)
                except (VRSError, np.linalg.LinAlgError, ValueError):
                    pass
    return _simulated(pvals, alpha, name, label)


def _simulated(pvals: np.ndarray, alpha: float, name: str, label: str) -> SimulatedPower:
    valid = pvals[np.isfinite(pvals)]
    if not len(valid):
        raise PlanningError("no simulated data set could be fitted and tested.")
    power = float(np.mean(valid <= alpha))
    return SimulatedPower(power, math.sqrt(power * (1 - power) / len(valid)), len(valid), len(pvals) - len(valid),
                          alpha, name, label, pvals)


def _simulated_binomial(delta, c, runs, items, systems, alpha, n_sim, seed, si, n_boot, crossed, design,
                        item_effects):
    """0/1 scores: logs of :func:`~vrs_helpers.book.simulation.evaluation_log` through the workflow's comparison."""
    from ...book.simulation import evaluation_log, workflow_p_values

    if crossed or design is not None or np.ndim(runs) != 0:
        raise PlanningError("simulated power of 0/1 scores is for balanced designs with one replication column "
                            "(runs= a number); give no design= or crossed=.")
    k, n, m = _count("systems", systems, 2), _count("runs", runs, 2), _count("items", items, 1)
    shifts = _shifts(delta, k)
    pvals = np.full(n_sim, np.nan)
    name = "default test"
    for i, child in enumerate(np.random.SeedSequence(seed).spawn(n_sim)):
        rng = np.random.default_rng(child)
        log = evaluation_log(rng, systems=k, runs=n, items=m, delta=shifts - shifts[0], run_sd=c.run_sd,
                             item_sd=c.item_sd, system_item_sd=si, family="binomial", run_labels="own")
        out = workflow_p_values(log, family="binomial", n_sim=n_boot, seed=int(rng.integers(2**31)),
                                items=item_effects)
        pvals[i] = out["default"]
        name = out["method"] if out["method"] != "failed" else name
    label = f"{k} systems x {n} runs x {m} items, 0/1 scores" + (f", system x item SD {si:g}" if si else "")
    return _simulated(pvals, alpha, name, label)
