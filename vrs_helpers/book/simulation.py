"""Type-I error and power of tests by simulation (book 4.1: the significance level is the probability of rejecting a
true null hypothesis; power the probability of rejecting a false one).

- :func:`evaluation_log` - a simulated per-item score table of systems over training runs with the variance
  structure of the book's models: ``score = mu_s + run_{s,r} + item_i + e``, all normal.
- :func:`baseline_and_replications` - a simulated test set of two systems: one baseline score and several
  replications (training runs) of the other system per item, ``score = item_i + e`` (+ ``delta`` for the other
  system); :func:`glrt_p_value` and :func:`permutation_p_value` test it as book chapter 4 does.
- :func:`rejection_rates` - how often each of several tests rejects at ``alpha`` over ``n_sim`` simulated data sets,
  with the Monte-Carlo standard error sqrt(r (1 - r) / n_sim) of each rate. Every simulation draws from its own
  generator spawned from ``seed`` (numpy SeedSequence), so the result does not depend on the order of evaluation
  and a subset of simulations can be re-run alone.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import VRSError
from ..mixed import SingularFitWarning, fit, lrt
from .significance import permutation_test


class SimulationError(VRSError, ValueError):
    """Bad arguments for a simulation (the message says which and what is allowed)."""


def evaluation_log(rng: np.random.Generator | int, systems: int = 2, runs=3, items: int = 300,
                   delta: float | np.ndarray = 0.0, run_sd=0.05, item_sd: float = 0.1,
                   residual_sd=0.1, mean: float = 0.0, system_item_sd: float = 0.0,
                   family: str = "gaussian", missing: float = 0.0, shared_run_sd: float = 0.0,
                   run_labels: str = "shared", residual_df: float | None = None,
                   item_share: float = 1.0) -> pd.DataFrame:
    """One simulated evaluation log: ``systems`` systems (``S0``, ``S1``, ...), ``runs`` training runs each and the
    same ``items`` test items, one row per system, run and item.

    ``delta`` is the difference of each system to ``S0`` (a scalar: ``S1`` and later differ by ``delta``; or one
    value per system). The run effects are N(0, run_sd^2) per system and run (the ``(1|system:run)`` term), the item
    effects N(0, item_sd^2) shared by all systems (``(1|item)``), the system x item effects N(0, system_item_sd^2)
    per system and item, shared by that system's runs (``(1|system:item)``: items that favour one system), the
    residuals N(0, residual_sd^2):

        eta_sri = mean + delta_s + a_sr + b_i + g_si,   score = eta_sri + e_sri (gaussian).

    ``family="binomial"``: 0/1 scores, score ~ Bernoulli(logistic(eta_sri)) (the logistic GLMM; ``mean``, the SDs
    and ``delta`` on the logit scale; ``residual_sd`` is not used). ``missing``: the fraction of rows dropped,
    round(missing x rows) of them chosen at random (missing at random). With the default arguments the draws are
    those of the first version of this function (same seed, same log).

    Designs of issue 39: ``runs``, ``run_sd`` and ``residual_sd`` may be one value per system (unequal run counts,
    heteroscedastic systems; system s keeps its first runs[s] runs); ``shared_run_sd``: a run effect N(0,
    shared_run_sd^2) per run label shared by every system (the same seed or few-shot draw shifting all systems
    alike, the ``(1|run)`` term of crossed runs), drawn after everything else; ``run_labels``: ``"shared"`` (run
    labels 0, 1, ... in every system, default) or ``"own"`` (``S0-0``, ``S1-0``, ...: every run a system's own).

    Issue 56: ``residual_df``, heavy-tailed residuals: Student's t on that many df (> 2) scaled to SD
    ``residual_sd`` (gaussian scores; None, the default: normal); ``item_share`` < 1: items not shared, each
    system keeps its own random round(item_share x items) of the items in every run (drawn last).
    """
    rng = np.random.default_rng(rng)
    if systems < 1 or np.min(runs) < 1 or items < 1:
        raise SimulationError(f"systems, runs and items must be >= 1, got {systems}, {runs}, {items}.")
    if min(np.min(run_sd), item_sd, np.min(residual_sd), system_item_sd, shared_run_sd) < 0:
        raise SimulationError("standard deviations must be >= 0.")
    if family not in ("gaussian", "binomial"):
        raise SimulationError(f"family must be 'gaussian' or 'binomial', got {family!r}.")
    if not 0 <= missing < 1:
        raise SimulationError(f"missing must be a fraction in [0, 1), got {missing!r}.")
    shift = np.asarray(delta, dtype=float)
    if shift.ndim == 0:
        shift = np.r_[0.0, np.full(systems - 1, float(shift))]
    if shift.shape != (systems,):
        raise SimulationError(f"delta must be a scalar or one value per system ({systems}), got shape {shift.shape}.")
    per_runs = np.broadcast_to(np.asarray(runs, dtype=int), (systems,))
    run_sd = np.broadcast_to(np.asarray(run_sd, dtype=float), (systems,))[:, None]
    residual_sd = np.broadcast_to(np.asarray(residual_sd, dtype=float), (systems,))[:, None, None]
    runs = int(per_runs.max())
    item_effect = rng.normal(0.0, item_sd, items)
    run_effect = rng.normal(0.0, 1.0, (systems, runs)) * run_sd
    eta = mean + shift[:, None, None] + run_effect[:, :, None] + item_effect[None, None, :]
    if residual_df is not None and not residual_df > 2:
        raise SimulationError(f"residual_df must be > 2 (a finite variance), got {residual_df!r}.")
    if family == "gaussian" and residual_df is None:
        score = eta + rng.normal(0.0, 1.0, (systems, runs, items)) * residual_sd
    elif family == "gaussian":
        t = rng.standard_t(residual_df, (systems, runs, items)) * np.sqrt((residual_df - 2) / residual_df)
        score = eta + t * residual_sd
    if system_item_sd > 0:
        si = rng.normal(0.0, system_item_sd, (systems, 1, items))
        eta = eta + si
        if family == "gaussian":
            score = score + si
    if family == "binomial":
        score = (rng.uniform(size=eta.shape) < 1.0 / (1.0 + np.exp(-eta))).astype(float)
    if shared_run_sd > 0:
        if family == "binomial":
            raise SimulationError("shared_run_sd is for gaussian scores.")
        score = score + rng.normal(0.0, shared_run_sd, runs)[None, :, None]
    if run_labels not in ("shared", "own"):
        raise SimulationError(f"run_labels must be 'shared' or 'own', got {run_labels!r}.")
    s, r, i = np.meshgrid(np.arange(systems), np.arange(runs), np.arange(items), indexing="ij")
    run = r.ravel().astype(str)
    if run_labels == "own":
        run = np.char.add(np.char.add(np.array([f"S{k}" for k in s.ravel()]), "-"), run)
    out = pd.DataFrame({"system": pd.Categorical([f"S{k}" for k in s.ravel()],
                                                 categories=[f"S{k}" for k in range(systems)]),
                        "run": run, "item": i.ravel().astype(str), "score": score.ravel()})
    keep = (r < per_runs[s]).ravel()
    if not keep.all():
        out = out[keep].reset_index(drop=True)
    drop = int(round(missing * len(out)))
    if drop:
        out = out.drop(index=rng.choice(len(out), drop, replace=False)).reset_index(drop=True)
    if not 0 < item_share <= 1:
        raise SimulationError(f"item_share must be a fraction in (0, 1], got {item_share!r}.")
    if item_share < 1:
        keep_items = {f"S{k}": set(rng.choice(items, int(round(item_share * items)), replace=False).astype(str))
                      for k in range(systems)}
        mask = [i in keep_items[str(sy)] for sy, i in zip(out["system"], out["item"], strict=True)]
        out = out[np.asarray(mask)].reset_index(drop=True)
    return out


@dataclass
class RejectionRates:
    """Rejection rates of several tests over the same simulated data sets (:func:`rejection_rates`)."""

    alpha: float
    n_sim: int
    p_values: pd.DataFrame = field(repr=False)  # one row per simulation, one column per test

    @property
    def rates(self) -> pd.Series:
        return (self.p_values <= self.alpha).mean()

    def to_frame(self) -> pd.DataFrame:
        """test, rejections, simulations, rate and its Monte-Carlo SE, and a 95 % normal interval of the rate."""
        valid = self.p_values.notna().sum()
        rej = (self.p_values <= self.alpha).sum()
        rate = rej / valid
        se = np.sqrt(rate * (1 - rate) / valid)
        return pd.DataFrame({"test": self.p_values.columns, "rejections": rej.to_numpy(),
                             "simulations": valid.to_numpy(), "rate": rate.to_numpy(), "mc_se": se.to_numpy(),
                             "ci_low": (rate - 1.96 * se).clip(lower=0).to_numpy(),
                             "ci_high": (rate + 1.96 * se).clip(upper=1).to_numpy()})

    def __repr__(self) -> str:
        body = ", ".join(f"{k}: {v:.3f}" for k, v in self.rates.items())
        return f"RejectionRates(alpha={self.alpha:g}, n_sim={self.n_sim}; {body})"

    def _repr_html_(self) -> str:
        return self.to_frame().to_html(index=False, float_format=lambda v: f"{v:.4g}")


def rejection_rates(simulate: Callable[[np.random.Generator], object],
                    tests: Mapping[str, Callable[[object], float]], n_sim: int = 1000, alpha: float = 0.05,
                    seed: int = 0, progress: bool | str = False) -> RejectionRates:
    """Simulate ``n_sim`` data sets with ``simulate(rng)`` and apply every test (``name -> data -> p-value``).

    Under a true null hypothesis the rate estimates the type-I error (a valid test: at most ``alpha``, within
    Monte-Carlo error); under an alternative it estimates the power. A test may return NaN (it could not be
    computed on that data set): that simulation is left out of its rate and ``simulations`` says how many counted.
    """
    if not 0 < alpha < 1:
        raise SimulationError(f"alpha must be between 0 and 1, got {alpha!r}.")
    if int(n_sim) < 1:
        raise SimulationError(f"n_sim must be a positive integer, got {n_sim!r}.")
    if not tests:
        raise SimulationError("give at least one test (name -> function of the data returning a p-value).")
    from tqdm import tqdm  # a text bar: tqdm.auto warns in a kernel without ipywidgets

    children = np.random.SeedSequence(seed).spawn(int(n_sim))
    rows = []
    desc = progress if isinstance(progress, str) else "simulations"
    # a bar on stderr when asked for and stderr is a terminal (tqdm's disable=None): never in logs or tests
    for child in tqdm(children, desc=desc, unit="sim", disable=None if progress else True, leave=False):
        data = simulate(np.random.default_rng(child))
        rows.append({name: float(fn(data)) for name, fn in tests.items()})
    return RejectionRates(float(alpha), int(n_sim), pd.DataFrame(rows, columns=list(tests)))


@dataclass
class ReplicatedComparison:
    """One simulated test set of :func:`baseline_and_replications`."""

    baseline: np.ndarray      # one score per item
    replications: np.ndarray  # items x replications: the other system's scores
    seed: int                 # for a resampling test of this data set, drawn with it

    @property
    def data(self) -> pd.DataFrame:
        """The long table a mixed model reads: ``system`` ("B" the baseline, "T" the other), ``item``, ``score``."""
        items, reps = self.replications.shape
        return pd.DataFrame({"system": np.repeat(["B", "T"], [items, reps * items]),
                             "item": np.concatenate([np.arange(items), np.repeat(np.arange(items), reps)]),
                             "score": np.concatenate([self.baseline, self.replications.ravel()])})


def baseline_and_replications(rng: np.random.Generator | int, items: int = 150, item_sd: float = 0.1,
                              residual_sd: float = 0.05, delta: float = 0.0, replications: int = 3,
                              mean: float = 0.6) -> ReplicatedComparison:
    """A simulated test set like those of book chapter 4: every item has a score of a baseline system and
    ``replications`` scores of another system (e.g. three training runs), all with the item's effect:
    ``item_i ~ N(mean, item_sd^2)``, baseline ``item_i + e``, other ``item_i + delta + e``, ``e ~ N(0, residual_sd^2)``
    independent. ``delta = 0`` simulates a true null hypothesis (type-I error), ``delta != 0`` an effect (power)."""
    if items < 2 or replications < 1:
        raise SimulationError(f"items must be >= 2 and replications >= 1, got {items}, {replications}.")
    if min(item_sd, residual_sd) < 0:
        raise SimulationError("standard deviations must be >= 0.")
    rng = np.random.default_rng(rng)
    item = rng.normal(mean, item_sd, items)
    base = item + rng.normal(0, residual_sd, items)
    other = item[:, None] + delta + rng.normal(0, residual_sd, (items, replications))
    return ReplicatedComparison(base, other, int(rng.integers(2**31)))


def glrt_p_value(sample: ReplicatedComparison) -> float:
    """The GLRT of a system difference on one simulated test set (book 4.3): ML fits of ``score ~ system +
    (1|item)`` against ``score ~ 1 + (1|item)``. A singular fit (the item variance estimated as 0, which happens in
    simulations with few items) is an estimate like any other here and is not reported."""
    data = sample.data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularFitWarning)
        null = fit("score ~ 1 + (1|item)", data, method="ML")
        full = fit("score ~ system + (1|item)", data, method="ML")
    return lrt(null, full).p_value


def kenward_roger_p_value(sample: ReplicatedComparison) -> float:
    """The F test of the system difference with Kenward-Roger's df on the REML fit of ``score ~ system +
    (1|item)`` (pbkrtest's ``KRmodcomp``): the small-sample counterpart of :func:`glrt_p_value` on the same model."""
    from ..mixed.inference.ddf import contrast_test

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularFitWarning)
        full = fit("score ~ system + (1|item)", sample.data, method="REML")
    return contrast_test(full, np.array([[0.0, 1.0]]), "system", ddf="kenward-roger").p_value


def bootstrap_p_value(sample: ReplicatedComparison, n_sim: int = 199) -> float:
    """The parametric-bootstrap likelihood ratio test (pbkrtest's ``PBmodcomp``) of the models of
    :func:`glrt_p_value`: the statistic against ``n_sim`` simulations from the null fit, with the resampling seed
    drawn with the data set (199: (199 + 1) x 0.05 is an integer, so the Monte-Carlo test has level 0.05)."""
    from ..mixed import parametric_bootstrap_lrt

    data = sample.data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularFitWarning)
        null = fit("score ~ 1 + (1|item)", data, method="ML")
        full = fit("score ~ system + (1|item)", data, method="ML")
        return parametric_bootstrap_lrt(null, full, n_sim=n_sim, seed=sample.seed).p_value


def permutation_p_value(sample: ReplicatedComparison, n_resamples: int = 500) -> float:
    """The paired permutation test (book Algorithm 4.2) of the baseline against the mean of the other system's
    replications per item, with the resampling seed drawn with the data set."""
    return permutation_test(sample.baseline, sample.replications.mean(axis=1), n_resamples=n_resamples,
                            seed=sample.seed).p_value


def workflow_p_values(data: pd.DataFrame, family: str = "gaussian", n_sim: int = 199, seed: int = 0,
                      response: str = "score", system: str = "system", item: str = "item",
                      run: str = "run", items: str = "random", runs: str = "auto", test: str | None = None) -> dict:
    """The p-values of the workflow's own comparison on one log: exactly what ``vrs analyze`` runs for the
    runs-random reading, :func:`vrs_helpers.book.glrt.compare_systems` with ``replications=[run]`` and its
    default test for the family (``n_sim`` simulations and ``seed`` where that test is a bootstrap); ``items`` as
    ``vrs analyze --items`` (default "random": items like these, ``(1|system:item)`` where identifiable), ``runs``
    as ``vrs analyze --runs`` (default "auto": crossed runs when every run label is used by every system, else
    nested, :func:`vrs_helpers.book.glrt.runs_layout`).

    - ``default``: with two systems the p-value of that test (``comparison.test``); with three or more the
      family-wise p-value of its pairwise decisions, the smallest adjusted p of the pairwise contrasts, so that
      "some pair of systems differs" is declared exactly when ``default <= alpha``;
    - ``chisq``: the chi-square likelihood ratio test of the same models (``comparison.glrt``, all systems at once).
    - ``omnibus``: the p-value of the default test of all systems at once (``comparison.test``; with two systems
      ``default``), the test ``vrs analyze``'s answer reports.

    - ``method``: how the default test is named (the outcome's ``method``).

    ``test``: a registered test named instead of the default (``vrs analyze --test``; the benchmarks' comparisons).

    0/1 scores with a separated system (all correct or all wrong, :func:`vrs_helpers.mixed.check_separation`): its
    pairs are "not estimable" as in ``vrs analyze`` (no decision), so they are left out of ``default``; a log with no
    estimable pair declares no difference (``default`` 1).

    A log the comparison refuses (an error of the package) or cannot fit gives NaN for both, counted apart by
    :class:`RejectionRates` (its ``simulations`` column)."""
    from .glrt import OWN_SE, compare_systems

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = compare_systems(data, response, system, item, replications=[run], family=family, n_sim=n_sim,
                                seed=seed, items=items, runs=runs, test=test)
    except (VRSError, np.linalg.LinAlgError):
        return {"default": float("nan"), "chisq": float("nan"), "omnibus": float("nan"), "method": "failed"}
    k = data[system].nunique()
    pairwise = pairwise_p_values(c) if k > 2 else None
    if pairwise is not None and family == "binomial":
        pairwise = _blank_separated(data, response, system, c, pairwise)
    if pairwise is None:
        default = float(c.test.p_value)
    else:  # no estimable pair: none is declared different
        default = float(np.nanmin(pairwise)) if np.isfinite(pairwise).any() else 1.0
    small = "df" in c.contrasts.columns
    adjusted = ("bootstrap LRT of the pair left" if c.adjust == "bootstrap LRT of the pair" else
                "own SEs, bootstrap max-|t| adjusted" if c.adjust == OWN_SE else
                "bootstrap max-|z| adjusted" if c.adjust.startswith("bootstrap") else
                f"{c.adjust.capitalize()}-adjusted")
    method = (c.test.method if pairwise is None else
              f"pairwise {'t on small-sample df' if small else 'Wald z'}, {adjusted}: any pair differs")
    return {"default": default, "chisq": float(c.glrt.p_value), "omnibus": float(c.test.p_value), "method": method}


def _blank_separated(data, response: str, system: str, comparison, p: np.ndarray) -> np.ndarray:
    """``p`` with NaN for the pairs of a separated system (as ``vrs analyze`` reports them: not estimable)."""
    from ..mixed import check_separation

    sep = {str(s) for s in check_separation(data, response, system)[system]}
    if not sep or comparison.family != "binomial":  # the linear model of 0/1 scores estimates them
        return p
    hit = comparison.contrasts["contrast"].map(lambda c: any(s.strip() in sep for s in str(c).split(" - ")))
    return np.where(hit.to_numpy(dtype=bool), np.nan, p)


def pairwise_p_values(comparison) -> np.ndarray:
    """The adjusted p-values of a comparison's pairwise decisions (its ``contrasts``: every pair of systems, the
    adjustment of :func:`~vrs_helpers.book.glrt.compare_systems`)."""
    return comparison.contrasts["p_value"].to_numpy(dtype=float)
