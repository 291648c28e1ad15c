"""Parametric-bootstrap likelihood ratio test of nested linear mixed models, as pbkrtest's ``PBmodcomp``
(Halekoh & Hojsgaard 2014), from the sufficient statistics.

The chi-square reference distribution of the likelihood ratio statistic (book 4.3, appendix A) is an asymptotic
result; with 3 to 5 training runs per system the runs-random GLRT rejects a true null far more often than alpha
(issue 20). The parametric bootstrap replaces the chi-square by the statistic's distribution under the fitted null
model:

1. fit the restricted model m0 and the general model m1 by maximum likelihood (REML fits are refitted by ML), the
   observed statistic t = 2 (logLik m1 - logLik m0);
2. K times: draw a response from m0's fit (its fixed effects, its random-effect covariances, its residual SD) on
   the same design, refit both models by ML, T_k = 2 (logLik m1 - logLik m0);
3. p = (1 + #{T_k >= t}) / (1 + K) (Davison & Hinkley 1997, eq. 4.11: the observed data count as one draw, so p
   is never 0 and the test keeps its level exactly for every K).

PBmodcomp counts #{T_k > t} among the T_k > 0 only and divides by 1 + their number; for a fixed-effect test the
two agree but for draws where a fit fails. The Monte-Carlo standard error of p is sqrt(p (1 - p) / K).

The draws are made as their sufficient statistics (:mod:`.simulate`: exact, no rows, cost independent of the number
of rows); random-intercept models are refitted for a whole batch of draws at once (:mod:`.batch`), other models
(random slopes) one by one by the engine's optimizer. Draws come in batches of ``batch_size``, batch i from its own
generator (``SeedSequence(seed, spawn_key=(i,))``), so the p-value depends only on the seed and the batch size -
not on where the batches run: here, or as tasks on a Dask cluster (``client=``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy import stats

from ...outcomes import MonteCarloTest
from ...threads import blas_limit
from ..inference.likelihood_ratio import lrt
from ..models.results import LinearMixedModel, MixedModelResult, fit_stats
from ..structure.design import SufficientStats
from ..structure.errors import MixedModelError
from .batch import BatchDeviance, minimize
from .simulate import ModelView, ResponseSimulator, null_parameters

BATCH_SIZE = 500  # simulations per batch (fewer for designs with very many levels: batch_size_for)


def batch_size_for(s: SufficientStats) -> int:
    """The default batch size: 500 simulations, fewer where a batch's (levels x simulations) arrays would exceed
    about 2e7 numbers (160 MB). It depends on the design only, so the same seed gives the same p anywhere."""
    width = int(sum(m * t.r for m, t in zip(s.sizes, s.terms, strict=True))) + s.p
    return int(max(10, min(BATCH_SIZE, 20_000_000 // max(width, 1))))


@dataclass
class BootstrapLRTResult(MonteCarloTest):
    """A parametric-bootstrap likelihood ratio test (:func:`parametric_bootstrap_lrt`).

    ``chi2``: the observed statistic 2 (logLik m1 - logLik m0) of the ML fits; ``p_value`` = (1 + n_extreme) /
    (1 + n_sim) over the simulations that could be fitted; ``p_chisq`` the chi-square p-value of the same statistic
    on ``df`` degrees of freedom, for comparison; ``reference`` the simulated statistics (NaN where a fit failed).
    """

    chi2: float
    df: int
    p_value: float
    p_chisq: float
    n_sim: int
    n_extreme: int
    n_failed: int
    seed: int
    formula0: str
    formula1: str
    reference: np.ndarray = field(repr=False)
    method: str = "parametric bootstrap LRT"
    n_planned: int | None = None  # the simulations planned, where the test stopped before them (SeededBatches)

    @property
    def stopped_early(self) -> bool:
        """Whether the sequential rule (:meth:`SeededBatches.settled`) ended the simulations before the plan."""
        return self.n_planned is not None and len(self.reference) < self.n_planned

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"test": self.method, "chi2": self.chi2, "df": self.df, "p_value": self.p_value,
                              "mc_se": self.mc_se, "n_sim": self.n_sim, "n_failed": self.n_failed,
                              "p_chisq": self.p_chisq}])

    def __repr__(self) -> str:
        failed = f", {self.n_failed} failed" if self.n_failed else ""
        return (f"BootstrapLRTResult(chi2={self.chi2:.4f}, df={self.df}, p={self.p_value:.4g} "
                f"(MC SE {self.mc_se:.2g}, {self.n_sim} simulations{failed}); chi-square p={self.p_chisq:.4g})")


def _ml(m: MixedModelResult) -> MixedModelResult:
    if not isinstance(m, LinearMixedModel):
        raise MixedModelError("The parametric bootstrap needs linear mixed models fitted by vrs_helpers.mixed.fit / "
                              "fit_stats.")
    if m.method == "ML":
        return m
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_stats(m.stats, "ML")


def internal_theta(m: MixedModelResult) -> np.ndarray:
    """theta in the engine's internal order (the formula's terms) from a fitted model's lme4 order."""
    return m.stats.theta_from_lme4(m.theta)


def local_workers(batches: int) -> int:
    """Processes for the batches of a bootstrap on this machine: the ``VRS_WORKERS`` environment variable
    if set, else the CPUs this process may use (at most 4), never more than the batches; 1 where forking is not
    safe or possible: not the main thread, a process of a pool already (a benchmark's or ``vrs batch``'s worker:
    no pools within pools), not Linux (macOS's system libraries are not fork-safe, and Windows cannot fork). The
    workers compute only (numpy and the engine), and the numbers do not depend on how many there are (each batch
    has its own generator: tests/mixed/test_glmm_bootstrap.py)."""
    import multiprocessing
    import os
    import sys
    import threading

    if threading.current_thread() is not threading.main_thread() or multiprocessing.parent_process() is not None \
            or not sys.platform.startswith("linux"):
        return 1
    env = os.environ.get("VRS_WORKERS", "").strip()
    try:
        n = int(env) if env else min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else
                                     (os.cpu_count() or 1))
    except ValueError:
        n = 1
    return max(1, min(n, batches))


_ADOPTED: list = []  # the plan a forked worker runs (set once per worker process by _adopt)


def _stop(pool) -> None:
    """End a pool of forked workers now, their batches in flight unfinished: they compute only (no files, no
    shared state), and their draws are not used."""
    pool.shutdown(wait=False, cancel_futures=True)
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
        return
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        proc.terminate()


def _adopt(plan) -> None:
    """A worker's start: the plan it runs, and the signal handlers of a plain process (the parent's - ``vrs``
    turns SIGTERM into an exception - would print a traceback in every worker when the pool ends); Ctrl-C is the
    parent's to handle."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _ADOPTED[:] = [plan]


def _draw_adopted(i: int):
    return _ADOPTED[0].draw(i)


@dataclass(kw_only=True)
class SeededBatches:
    """What a seeded plan of parametric-bootstrap batches shares (this module's and :mod:`.glmm_bootstrap`'s): the
    observed statistic and its df, ``n_sim`` draws in ``batches`` of (start, size), the ``seed``, the two formulas;
    batch i's generator, running every batch here and the test from all draws. A subclass adds ``draw(i)`` (the
    simulated statistics of batch i, NaN where a refit failed) and names its ``method``."""

    observed: float
    df: int
    n_sim: int
    seed: int
    batches: list = field(repr=False)
    formula0: str = ""
    formula1: str = ""
    settle_alpha: float | None = None  # a level: stop once every decision at it is settled (settled); None: all
    method: ClassVar[str] = "parametric bootstrap LRT"
    #: the draws after which the sequential rule looks (at the first batch boundary at or beyond each)
    CHECKPOINTS: ClassVar[tuple] = (200, 500)
    #: the binomial error allowed per look and decision: P(a draw count this far from alpha's | p = alpha)
    SETTLE_RISK: ClassVar[float] = 0.001

    def checkpoints(self) -> list[int]:
        """The numbers of batches after which :meth:`run` looks whether every decision is settled: the first batch
        boundary at or beyond each of :attr:`CHECKPOINTS` draws, before the last batch; none without
        ``settle_alpha``. They depend on the plan only, so the draws used do not depend on where batches run."""
        if self.settle_alpha is None:
            return []
        ends = np.cumsum([size for _, size in self.batches])
        out: list[int] = []
        for c in self.CHECKPOINTS:
            j = int(np.searchsorted(ends, c)) + 1  # batches up to the first end >= c
            if j < len(ends) and (not out or j > out[-1]):
                out.append(j)
        return out

    def p_values(self, result) -> np.ndarray:
        """The Monte-Carlo p-values a result decides by (here the LRT's; a subclass adds its pairs')."""
        return np.array([result.p_value], dtype=float)

    def settled(self, reference) -> bool:
        """Whether every decision at ``settle_alpha`` from these draws would stand with all of the plan's: for each
        Monte-Carlo p = (1 + x) / (1 + m) (x draws at least as extreme of m), x is further from what p = alpha gives
        than binomial(m, alpha) strays with probability :attr:`SETTLE_RISK` (either tail) - a curtailed Monte-Carlo
        test in the manner of Davison & Hinkley (1997, sec. 4.2.5) and Fay, Kim & Hachey (2007, truncated
        sequential boundaries): a clearly small or clearly large p needs no more draws; p-values near alpha take
        the whole plan. NaN p-values (a contrast not estimated) do not count."""
        res = self.finish(reference)
        p = self.p_values(res)
        p = p[np.isfinite(p)]
        m = res.n_sim
        if not len(p) or m < 1:
            return False
        x = np.rint(p * (1 + m) - 1)
        a = float(self.settle_alpha)
        low = stats.binom.cdf(x, m, a) < self.SETTLE_RISK / 2  # far fewer exceedances than at p = alpha
        high = stats.binom.sf(x - 1, m, a) < self.SETTLE_RISK / 2  # far more
        return bool(np.all(low | high))

    def truncate(self, reference) -> np.ndarray:
        """The draws the sequential rule uses out of all of the plan's (batch order): up to the first checkpoint
        where :meth:`settled`, else all. Drawing every batch (a Dask cluster) and truncating gives the numbers of
        :meth:`run`, which stops there."""
        reference = np.asarray(reference, dtype=float)
        ends = np.cumsum([size for _, size in self.batches])
        for j in self.checkpoints():
            if self.settled(reference[:ends[j - 1]]):
                return reference[:ends[j - 1]]
        return reference

    def rng(self, i: int) -> np.random.Generator:
        """The generator of batch i: child i of SeedSequence(seed), independent of where the batch runs."""
        return np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(i,)))

    def run(self, progress: bool = False, workers: int | None = None) -> BootstrapLRTResult:
        """All batches on this machine, one after the other or - ``workers`` > 1 (None: :func:`local_workers`) - in
        that many forked processes, each batch with its own generator, so the numbers do not depend on where or in
        which order the batches run. ``progress``: a text bar over the simulations on stderr when it is a terminal
        (none in logs, CI and notebook kernels)."""
        from tqdm import tqdm  # a text bar: tqdm.auto warns in a kernel without ipywidgets

        workers = local_workers(len(self.batches)) if workers is None else max(1, min(int(workers),
                                                                                      len(self.batches)))
        draws = []
        looks = set(self.checkpoints())

        def done(i: int) -> bool:  # after batch i: a checkpoint where every decision is settled
            return i + 1 in looks and self.settled(np.concatenate(draws))

        with tqdm(total=self.n_sim, desc=self.method, unit="sim", disable=None if progress else True,
                  leave=False, dynamic_ncols=True) as bar:
            if workers > 1:
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                # fork: the workers inherit the plan (initargs are not pickled) and get only batch numbers; a
                # worker that dies (out of memory) is a BrokenProcessPool here, not a hang
                with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                         initializer=_adopt, initargs=(self,)) as pool:
                    # at most one batch per worker in flight, so that a stop waits for none of them
                    futures = {i: pool.submit(_draw_adopted, i) for i in range(min(workers, len(self.batches)))}
                    for i, (_, size) in enumerate(self.batches):
                        draws.append(futures.pop(i).result())
                        bar.update(size)
                        if done(i):
                            _stop(pool)
                            break
                        if i + workers < len(self.batches):
                            futures[i + workers] = pool.submit(_draw_adopted, i + workers)
            else:
                for i, (_, size) in enumerate(self.batches):
                    draws.append(self.draw(i))
                    bar.update(size)
                    if done(i):
                        break
        return self.finish(np.concatenate(draws))

    def finish(self, reference) -> BootstrapLRTResult:
        """The test from the simulated statistics in batch order (NaN: a draw that could not be refitted, counted
        in ``n_failed`` and left out of p): p = (1 + n_extreme) / (1 + valid draws)."""
        reference = np.asarray(reference, dtype=float)
        ends = np.cumsum([size for _, size in self.batches]) if self.batches else np.array([self.n_sim])
        if len(reference) not in ends or (len(reference) < self.n_sim and self.settle_alpha is None):
            raise MixedModelError(f"{len(reference)} simulated statistics for a plan of {self.n_sim}.")
        valid = reference[np.isfinite(reference)]
        if not len(valid):
            raise MixedModelError("No simulated response could be fitted; the bootstrap has no reference "
                                  "distribution (for a GLMM, check for separation: mixed.check_separation).")
        # a draw equal to the observed statistic within the optimizer's tolerance counts as at least as extreme
        n_extreme = int((valid >= self.observed - 1e-7 * (1.0 + abs(self.observed))).sum())
        p = (1 + n_extreme) / (1 + len(valid))
        return BootstrapLRTResult(self.observed, self.df, p, float(stats.chi2.sf(self.observed, self.df)),
                                  len(valid), n_extreme, int(len(reference) - len(valid)), self.seed, self.formula0,
                                  self.formula1, reference, method=self.method,
                                  n_planned=int(self.n_sim) if len(reference) < self.n_sim else None)


@dataclass
class BootstrapPlan(SeededBatches):
    """The seeded batches of a parametric bootstrap (see the module docstring). ``draw(i)`` returns the simulated
    statistics of batch i (NaN where a fit failed); ``finish`` the test from all of them in batch order. Picklable:
    it carries the two models' sufficient statistics and the null parameters, and builds its simulator where it
    runs."""

    s0: SufficientStats = field(repr=False)
    s1: SufficientStats = field(repr=False)
    theta0: list = field(repr=False)  # starting theta (internal order) of m0 and m1
    null: tuple = field(repr=False)  # (fixed, random, sigma) of m0's ML fit in m1's columns
    batched: bool = True  # False: every refit by the engine's optimizer (slower; the reference in the tests)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_cache", None)
        return state

    def _parts(self):
        cache = self.__dict__.get("_cache")
        if cache is None:
            sim = ResponseSimulator(self.s1)
            views = [ModelView(self.s0, self.s1), ModelView(self.s1)]
            batch = [BatchDeviance(v) if v.s.intercepts_only and self.batched else None for v in views]
            cache = self.__dict__["_cache"] = (sim, views, batch)
        return cache

    def draw(self, i: int) -> np.ndarray:
        _, size = self.batches[i]
        fixed, random, sigma = self.null
        with blas_limit(max(s.p + sum(s.sizes) - max(s.sizes) for s in (self.s0, self.s1))):
            sim, views, batch = self._parts()
            draws = sim.draw(self.rng(i), size, fixed, random, sigma)
            dev = [self._deviances(j, views[j], batch[j], draws) for j in (0, 1)]
        return np.maximum(dev[0] - dev[1], 0.0)

    def _deviances(self, j: int, view: ModelView, bd: BatchDeviance | None, draws) -> np.ndarray:
        """ML deviance of model j for every draw: batched where the model has random intercepts only, the engine's
        optimizer for the rest (and for draws where the batched optimizer did not converge)."""
        out = np.full(len(draws), np.nan)
        todo = np.arange(len(draws))
        theta0 = self.theta0[j]
        if bd is not None:
            _, dev, ok = minimize(bd, bd.responses(draws), theta0 ** 2)
            out[ok] = dev[ok]
            todo = np.flatnonzero(~ok)
        for k in todo:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out[k] = fit_stats(view.stats(draws, k), "ML", theta0=theta0, blas_threads=None).deviance
            except (MixedModelError, np.linalg.LinAlgError, ValueError):
                out[k] = np.nan
        return out


def bootstrap_plan(m0: MixedModelResult, m1: MixedModelResult, n_sim: int = 1000, seed: int = 0,
                   batch_size: int | None = None) -> BootstrapPlan:
    """The batches of :func:`parametric_bootstrap_lrt` (see :class:`BootstrapPlan`)."""
    if isinstance(n_sim, bool) or not isinstance(n_sim, (int, np.integer)) or n_sim < 1:
        raise MixedModelError(f"n_sim must be a positive integer, got {n_sim!r}.")
    m0, m1 = (m0, m1) if m0.n_params <= m1.n_params else (m1, m0)
    m0, m1 = _ml(m0), _ml(m1)
    test = lrt(m0, m1)  # checks: same data, nested
    null = null_parameters(m0, m1.stats)
    batch_size = batch_size_for(m1.stats) if batch_size is None else batch_size
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise MixedModelError(f"batch_size must be a positive integer, got {batch_size!r}.")
    batches = [(a, min(batch_size, n_sim - a)) for a in range(0, int(n_sim), int(batch_size))]
    return BootstrapPlan(m0.stats, m1.stats, [internal_theta(m0), internal_theta(m1)], null, observed=test.chi2,
                         df=test.df, n_sim=int(n_sim), seed=int(seed), batches=batches, formula0=m0.formula,
                         formula1=m1.formula)


def parametric_bootstrap_lrt(m0: MixedModelResult, m1: MixedModelResult, n_sim: int = 1000, seed: int = 0,
                             client=None, batch_size: int | None = None, tasks: int | None = None,
                             progress: bool = False) -> BootstrapLRTResult:
    """Parametric-bootstrap likelihood ratio test of the nested models m0 (restricted) and m1 (general), as
    pbkrtest's ``PBmodcomp(m1, m0, nsim = n_sim)`` (module docstring).

    Parameters
    ----------
    m0, m1 : results of :func:`vrs_helpers.mixed.fit` on the same rows (REML fits are refitted by ML; the order
        does not matter: the model with fewer parameters is the null).
    n_sim : number of simulated responses K (the Monte-Carlo SE of p is sqrt(p (1 - p) / K): 0.007 at p = 0.05
        and K = 1000).
    seed : the same seed (and ``batch_size``) gives the same p-value, here or on a cluster.
    batch_size : simulations per batch (default :func:`batch_size_for`: 500, fewer for designs with very many
        levels); the draws depend on it, so a different batch size gives another (equally valid) p-value.
    client : None (here), or a Dask client, scheduler address or ``"local"`` (a LocalCluster of processes, closed
        afterwards): groups of consecutive batches (``tasks``, default two per worker) run as tasks there.
    progress : a text bar over the simulations on stderr when it is a terminal (here only; the numbers do not
        depend on it).
    """
    plan = bootstrap_plan(m0, m1, n_sim, seed, batch_size)
    if client is None:
        return plan.run(progress)
    from ...dask_support import require_dask, run_batches

    require_dask()
    return plan.finish(plan.truncate(run_batches(plan, client, tasks, close=isinstance(client, str))))
