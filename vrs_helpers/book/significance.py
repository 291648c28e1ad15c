"""Significance tests for evaluation scores (book chapter 4): parametric, bootstrap and permutation tests.

Resampling tests work on per-item *sufficient statistics*: a 1-D array of sentence-level scores (the metric is
their mean), or a 2-D array items x k of per-item counts (true positives, false positives, ...; n-gram matches
and lengths) together with a corpus-level metric that maps the summed counts to a score (F1, a BLEU-like score).
The metric is recomputed on every resample from the resampled sums, so corpus-level metrics are tested
correctly. All resamples are vectorized and seeded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import VRSError
from ..outcomes import ResamplingTest, TestOutcome, TTest, ZTest

ALTERNATIVES = ("two-sided", "less", "greater")


class SignificanceError(VRSError, ValueError):
    """Bad input for a significance test."""


@dataclass(repr=False)
class TestResult(TestOutcome):
    """A z or t test: statistic, p-value, estimate (:class:`ZTestResult`, :class:`TTestResult`)."""

    method: str
    statistic: float
    p_value: float
    alternative: str
    estimate: float
    n: int

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([self.__dict__])

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.method}: statistic={self.statistic:.4g}, p={self.p_value:.4g}, "
                f"{self.alternative}, estimate={self.estimate:.4g}, n={self.n})")


class ZTestResult(TestResult, ZTest):
    """A z test (:class:`~vrs_helpers.outcomes.ZTest`): no df."""


class TTestResult(TestResult, TTest):
    """A t test (:class:`~vrs_helpers.outcomes.TTest`) on n - 1 degrees of freedom."""

    @property
    def df(self) -> int:
        """Degrees of freedom of the t distribution (n - 1)."""
        return self.n - 1


def _p_from_z(z: float, alternative: str) -> float:
    if alternative == "two-sided":
        return float(2 * stats.norm.sf(abs(z)))
    if alternative == "less":
        return float(stats.norm.cdf(z))
    return float(stats.norm.sf(z))


def _check_alternative(alternative: str) -> None:
    if alternative not in ALTERNATIVES:
        raise SignificanceError(f"alternative must be one of {', '.join(ALTERNATIVES)}; got {alternative!r}.")


def _scores(x, name: str = "scores") -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        raise SignificanceError(f"{name} must be numeric; got dtype {arr.dtype}.")
    arr = arr.astype(float)
    if arr.size == 0:
        raise SignificanceError(f"{name} are empty.")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise SignificanceError(f"{name} contain {int(bad.sum())} NaN or infinite values; remove or impute them "
                                f"first (a test on silently dropped items would compare different items).")
    return arr


def z_test_summary(mean: float, mu0: float, sigma: float, n: int, alternative: str = "two-sided") -> TestResult:
    """Z-test from summary statistics with known sigma (book 4.1: x = 15, mu0 = 25, sigma = 50, n = 100 gives
    Z = -2)."""
    _check_alternative(alternative)
    if sigma <= 0 or n < 1:
        raise SignificanceError("sigma must be positive and n at least 1.")
    z = (mean - mu0) / (sigma / np.sqrt(n))
    return ZTestResult("z-test", float(z), _p_from_z(z, alternative), alternative, float(mean - mu0), int(n))


def z_test(x, mu0: float = 0.0, sigma: float | None = None, alternative: str = "two-sided") -> TestResult:
    """One-sample z-test of the mean of sentence-level scores (sigma estimated from the data when not given)."""
    x = _scores(x)
    if len(x) < 2 and sigma is None:
        raise SignificanceError("Estimating sigma needs at least two scores.")
    s = float(np.std(x, ddof=1)) if sigma is None else float(sigma)
    return z_test_summary(float(x.mean()), mu0, s, len(x), alternative)


def t_test(x, mu0: float = 0.0, alternative: str = "two-sided") -> TestResult:
    """One-sample t-test of the mean of sentence-level scores."""
    _check_alternative(alternative)
    x = _scores(x)
    r = stats.ttest_1samp(x, mu0, alternative=alternative)
    return TTestResult("t-test", float(r.statistic), float(r.pvalue), alternative, float(x.mean() - mu0), len(x))


def _paired(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = _scores(a, "scores of system A"), _scores(b, "scores of system B")
    if a.shape != b.shape:
        raise SignificanceError(f"Paired tests need one score per item for both systems; got shapes {a.shape} and "
                                f"{b.shape}.")
    return a, b


def paired_z_test(a, b, alternative: str = "two-sided") -> TestResult:
    """Paired z-test on per-item differences a - b."""
    a, b = _paired(a, b)
    r = z_test(a - b, 0.0, None, alternative)
    r.method = "paired z-test"
    return r


def paired_t_test(a, b, alternative: str = "two-sided") -> TestResult:
    """Paired t-test on per-item differences a - b."""
    a, b = _paired(a, b)
    r = t_test(a - b, 0.0, alternative)
    r.method = "paired t-test"
    return r


# ------------------------------------------------------------------------------------------- resampling

def mean_metric(sums: np.ndarray, n: int) -> np.ndarray:
    """Sentence-level metric: the mean of per-item scores (sums has one column)."""
    return sums[..., 0] / n


def f1_metric(sums: np.ndarray, n: int) -> np.ndarray:
    """Corpus-level F1 from summed (true positives, false positives, false negatives)."""
    tp, fp, fn = sums[..., 0], sums[..., 1], sums[..., 2]
    denom = 2 * tp + fp + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 2 * tp / denom, 0.0)


def bleu_like_metric(sums: np.ndarray, n: int) -> np.ndarray:
    """A BLEU-like corpus score from summed statistics: columns = matches_1..matches_K, totals_1..totals_K,
    hypothesis length, reference length (K = (k - 2) / 2): geometric mean of n-gram precisions times brevity
    penalty (Papineni et al. 2002; no smoothing)."""
    k = (sums.shape[-1] - 2) // 2
    matches, totals = sums[..., :k], sums[..., k:2 * k]
    hyp, ref = sums[..., 2 * k], sums[..., 2 * k + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = np.where((matches > 0) & (totals > 0), np.log(np.maximum(matches, 1e-300) / np.maximum(totals, 1)),
                        -np.inf).mean(axis=-1)
        bp = np.where(hyp < ref, 1 - ref / np.maximum(hyp, 1e-300), 0.0)
        return np.exp(logp + bp)


METRICS: dict[str, Callable] = {"mean": mean_metric, "f1": f1_metric, "bleu": bleu_like_metric}


@dataclass
class ResamplingResult(ResamplingTest):
    """A paired resampling test: observed difference S(A) - S(B), p-value, the resampled differences.

    For the Monte Carlo tests (``permutation_test``, ``bootstrap_test``) ``p_value`` is (c + 1) / (K + 1), c of the
    K resampled differences being at least as extreme as the observed one: the observed data count as one of the
    resamples, so p is never 0 and the test keeps its level (Phipson & Smyth 2010). The book's Algorithms 4.1/4.2
    print c / K, kept as ``p_value_c_over_K``. The exact test's p-value is the exact proportion.
    """

    method: str
    observed: float
    p_value: float
    n_resamples: int
    alternative: str
    seed: int
    distribution: np.ndarray = field(repr=False)
    exceedances: int | None = None   # c: resamples at least as extreme as the observed difference

    @property
    def statistic(self) -> float:
        """The observed difference S(A) - S(B) (its null distribution is the resampled one: no df)."""
        return self.observed

    @property
    def df(self) -> None:
        return None

    @property
    def p_value_c_over_K(self) -> float:  # noqa: N802 - the book's notation
        """The book's c / K (Algorithms 4.1, 4.2); 0 when no resample is as extreme."""
        return self.p_value if self.exceedances is None else self.exceedances / self.n_resamples

    def as_dict(self) -> dict:
        """difference, p_value, the book's p_value_c_over_K, n_resamples (summary.json's paired rows)."""
        return {"difference": float(self.observed), "p_value": float(self.p_value),
                "p_value_c_over_K": float(self.p_value_c_over_K), "n_resamples": int(self.n_resamples)}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{k: v for k, v in self.__dict__.items() if k != "distribution"}])

    def __repr__(self) -> str:
        return (f"ResamplingResult({self.method}: observed={self.observed:.5g}, p={self.p_value:.4g}, "
                f"{self.n_resamples} resamples, {self.alternative}, seed {self.seed})")

    def plot(self, ax=None, bins: int = 60):
        """Histogram of the resampled differences with the observed one."""
        import matplotlib.pyplot as plt

        ax = ax or plt.gca()
        ax.hist(self.distribution, bins=bins, color="#8fb3d9", edgecolor="white")
        ax.axvline(self.observed, color="#cf222e", label=f"observed {self.observed:.4g}")
        if self.alternative == "two-sided":
            ax.axvline(-self.observed, color="#cf222e", ls="--")
        ax.set_xlabel("difference S(A) - S(B) under resampling")
        ax.set_title(f"{self.method}: p = {self.p_value:.4g}")
        ax.legend()
        return ax


def _prepare(a, b, metric):
    a, b = _paired(a, b)
    if a.ndim == 1:
        a, b = a[:, None], b[:, None]
    if a.ndim != 2:
        raise SignificanceError("Per-item statistics must be 1-D (scores) or 2-D (items x statistics).")
    fn = METRICS.get(metric) if isinstance(metric, str) else metric
    if fn is None:
        raise SignificanceError(f"Unknown metric {metric!r}; use one of {', '.join(METRICS)} or a function of the "
                                f"summed statistics.")
    return a, b, fn


def _check_resamples(n_resamples: int) -> None:
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise SignificanceError(f"n_resamples must be a positive integer; got {n_resamples!r}.")


def _exceed(dist: np.ndarray, observed: float, alternative: str) -> int:
    """How many resampled differences are at least as extreme as the observed one."""
    eps = 1e-12 * max(1.0, abs(observed))  # ties up to rounding count as "as extreme"
    if alternative == "two-sided":
        return int(np.sum(np.abs(dist) >= abs(observed) - eps))
    if alternative == "greater":
        return int(np.sum(dist >= observed - eps))
    return int(np.sum(dist <= observed + eps))


def _tail(dist: np.ndarray, observed: float, alternative: str) -> float:
    """The exact proportion of resamples at least as extreme (for the exact test over all 2^N swaps)."""
    return _exceed(dist, observed, alternative) / len(dist)


def _monte_carlo(method, observed, dist, alternative, n_resamples, seed, shown=None) -> ResamplingResult:
    c = _exceed(dist, observed, alternative)
    return ResamplingResult(method, observed, (c + 1) / (n_resamples + 1), n_resamples, alternative, seed,
                            dist if shown is None else shown, exceedances=c)


def _patterns(rows: np.ndarray, limit: int = 4096):
    """Unique rows and their counts, or None when there are more than ``limit`` distinct rows or too few repeats
    to pay off (drawing a binomial/multinomial count per pattern costs about as much as 32 random bits per item)."""
    limit = min(limit, len(rows) // 32)
    for j in range(rows.shape[1]):   # cheap exit for continuous scores: one column alone has too many values
        if len(np.unique(rows[: 4 * limit, j])) > limit:
            return None
    if limit < 1:
        return None
    uniq, counts = np.unique(rows, axis=0, return_counts=True)
    return (uniq, counts) if len(uniq) <= limit else None


def _batch_rng(seed: int, i: int) -> np.random.Generator:
    """The generator of resampling batch i: SeedSequence(seed).spawn(...)[i], independent of where it runs."""
    return np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed, spawn_key=(i,))))


def _spans(n_resamples: int, batch: int) -> list[tuple[int, int]]:
    return [(s, min(batch, n_resamples - s)) for s in range(0, n_resamples, batch)]


@dataclass
class ResamplingPlan:
    """A Monte Carlo resampling test split into seeded batches (``batches``: (start, size) of each).

    Batch i draws from its own generator (``SeedSequence(seed)`` child i) and depends on nothing else, so the
    batches can run anywhere - threads, processes, the workers of a cluster (``vrs_helpers.distributed``) - and
    ``finish`` of the concatenated batches gives the same p-value as :func:`permutation_test` /
    :func:`bootstrap_test` for the same seed. ``draw(i)`` returns the resampled differences of batch i (for the
    bootstrap before centring: the shift uses the mean over all batches, applied in ``finish``).
    """

    kind: str  # "permutation" or "bootstrap"
    observed: float
    n_resamples: int
    seed: int
    alternative: str
    batches: list = field(repr=False)
    data: dict = field(repr=False)

    def draw(self, i: int) -> np.ndarray:
        fn = _permutation_batch if self.kind == "permutation" else _bootstrap_batch
        return fn(self, i)

    def finish(self, dist: np.ndarray) -> ResamplingResult:
        dist = np.asarray(dist, dtype=float)
        if len(dist) != self.n_resamples:
            raise SignificanceError(f"{len(dist)} resampled differences for a plan of {self.n_resamples}.")
        if self.kind == "permutation":
            return _monte_carlo("permutation test", self.observed, dist, self.alternative, self.n_resamples,
                                self.seed)
        return _monte_carlo("bootstrap test (shift method)", self.observed, dist - dist.mean(), self.alternative,
                            self.n_resamples, self.seed)

    def run(self, threads: int | None = None) -> ResamplingResult:
        """All batches here (in threads: numpy releases the GIL in the drawing and the sums)."""
        import os
        from concurrent.futures import ThreadPoolExecutor

        workers = min(len(self.batches), threads or os.cpu_count() or 1)
        if workers > 1 and self.data.get("threads", False):
            with ThreadPoolExecutor(max_workers=workers) as pool:
                parts = list(pool.map(self.draw, range(len(self.batches))))
        else:
            parts = [self.draw(i) for i in range(len(self.batches))]
        return self.finish(np.concatenate(parts))


def permutation_plan(a, b, metric="mean", n_resamples: int = 10_000, seed: int = 0,
                     alternative: str = "two-sided") -> ResamplingPlan:
    """The batches of :func:`permutation_test` (see :class:`ResamplingPlan`)."""
    _check_alternative(alternative)
    _check_resamples(n_resamples)
    a, b, fn = _prepare(a, b, metric)
    n = a.shape[0]
    total_a, total_b = a.sum(axis=0), b.sum(axis=0)
    observed = float(fn(total_a, n) - fn(total_b, n))
    diff = b - a
    diff = diff[np.any(diff != 0, axis=1)]
    pats = _patterns(diff) if len(diff) else (np.zeros((1, a.shape[1])), np.zeros(1, dtype=int))
    data = {"fn": fn, "n": n, "total_a": total_a, "total_b": total_b}
    if pats is not None:
        values, counts = pats
        data.update(mode="patterns", values=values, counts=counts)
        batch = 4096
    else:
        m, k = diff.shape
        groups = (m + 7) // 8
        padded = np.zeros((groups * 8, k))
        padded[:m] = diff
        data.update(mode="bits", k=k, groups=groups, padded=padded)
        if k < 4:
            bits = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(float)  # 256 x 8
            table = np.einsum("bj,gjk->gbk", bits, padded.reshape(groups, 8, k))  # groups x 256 x k
            data["table"] = np.ascontiguousarray(table.transpose(1, 0, 2).reshape(256, groups * k))
        # one batch size for every k: the draws do not depend on how many statistics an item has
        batch = max(1, min(256, 2**24 // max(groups, 1)))
    return ResamplingPlan("permutation", observed, n_resamples, seed, alternative, _spans(n_resamples, batch), data)


def _permutation_batch(plan: ResamplingPlan, i: int) -> np.ndarray:
    d = plan.data
    fn, n, total_a, total_b = d["fn"], d["n"], d["total_a"], d["total_b"]
    _, r = plan.batches[i]
    rng = _batch_rng(plan.seed, i)
    if d["mode"] == "patterns":
        moved = rng.binomial(d["counts"], 0.5, size=(r, len(d["counts"]))).astype(float) @ d["values"]
    else:
        k, groups = d["k"], d["groups"]
        byte = rng.integers(0, 256, size=(r, groups), dtype=np.uint8)
        cols = np.arange(groups)
        if k == 1:
            moved = d["table"][byte, cols].sum(axis=1)[:, None]
        elif k >= 4:   # many statistics: unpack the same bits into a 0/1 matrix and let BLAS sum (S @ D)
            step = max(1, 2**18 // (8 * groups))  # rows of the 0/1 matrix at a time (memory)
            moved = np.vstack([np.unpackbits(byte[j:j + step], axis=1, bitorder="little").astype(float)
                               @ d["padded"] for j in range(0, r, step)])
        else:
            moved = d["table"].reshape(256, groups, k)[byte, cols].sum(axis=1)
    return fn(total_a + moved, n) - fn(total_b - moved, n)


def permutation_test(a, b, metric="mean", n_resamples: int = 10_000, seed: int = 0,
                     alternative: str = "two-sided") -> ResamplingResult:
    """Approximate randomization test (Algorithm 4.2): swap the outputs of A and B on each item with
    probability 1/2, recompute the metric difference from the swapped sums, count |Delta S_r| >= |Delta S_0|.

    ``a``, ``b``: per-item scores (1-D) or per-item statistics (items x k); ``metric``: "mean", "f1", "bleu" or a
    function ``f(sums, n)`` vectorized over leading axes.

    Swapping item i moves ``b_i - a_i`` from B's sums to A's. Items with equal outputs move nothing and are
    skipped. When the remaining differences take few distinct values (counts such as true/false positives), the
    number of swapped items of each value is drawn as Binomial(m, 1/2) — the same distribution as swapping item by
    item. Otherwise swaps are random bits applied eight items at a time through a table of the 256 partial sums.
    Resamples are drawn in batches, each from its own seeded generator (:func:`permutation_plan`: the batches
    can run on a cluster with the same result).
    """
    return permutation_plan(a, b, metric, n_resamples, seed, alternative).run(threads=1)


def permutation_test_exact(a, b, metric="mean", alternative: str = "two-sided") -> ResamplingResult:
    """The exact randomization test: all 2^N swaps (N <= 20)."""
    _check_alternative(alternative)
    a, b, fn = _prepare(a, b, metric)
    n = a.shape[0]
    if n > 20:
        raise SignificanceError(f"Exact enumeration of 2^{n} swaps is too large; use permutation_test.")
    total_a, total_b = a.sum(axis=0), b.sum(axis=0)
    observed = float(fn(total_a, n) - fn(total_b, n))
    masks = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(float)
    moved = masks @ (b - a)
    dist = fn(total_a + moved, n) - fn(total_b - moved, n)
    return ResamplingResult("exact permutation test", observed, _tail(dist, observed, alternative), 2**n,
                            alternative, -1, dist)


def bootstrap_plan(a, b, metric="mean", n_resamples: int = 10_000, seed: int = 0,
                   alternative: str = "two-sided") -> ResamplingPlan:
    """The batches of :func:`bootstrap_test` (see :class:`ResamplingPlan`)."""
    _check_alternative(alternative)
    _check_resamples(n_resamples)
    a, b, fn = _prepare(a, b, metric)
    n, k = a.shape
    observed = float(fn(a.sum(axis=0), n) - fn(b.sum(axis=0), n))
    ab = np.hstack([a, b])
    pats = _patterns(ab)
    data = {"fn": fn, "n": n, "k": k}
    if pats is not None:
        values, counts = pats
        data.update(mode="patterns", values=values, p=counts / counts.sum())
        batch = 4096
    else:
        linear = fn is mean_metric  # the difference of means only needs the per-item differences
        X = np.ascontiguousarray((a - b) if linear else ab, dtype=float)
        data.update(mode="items", linear=linear, X=X, threads=True)
        batch = max(1, min(n_resamples, 2**20 // n))
    return ResamplingPlan("bootstrap", observed, n_resamples, seed, alternative, _spans(n_resamples, batch), data)


def _bootstrap_batch(plan: ResamplingPlan, i: int) -> np.ndarray:
    """Resampled differences of batch i (not yet centred). Items: with few columns the drawn rows are gathered
    and summed; with many (corpus metrics with several statistics) the draws become a count matrix C (resamples x
    items) and the sums are C @ X."""
    d = plan.data
    fn, n, k = d["fn"], d["n"], d["k"]
    _, r = plan.batches[i]
    rng = _batch_rng(plan.seed, i)
    if d["mode"] == "patterns":
        sums = rng.multinomial(n, d["p"], size=r).astype(float) @ d["values"]
        return fn(sums[:, :k], n) - fn(sums[:, k:], n)
    X = d["X"]
    m = X.shape[1]
    idx_type = np.int32 if r * n < 2**31 else np.int64
    idx = rng.integers(0, n, size=(r, n), dtype=idx_type)
    if m >= 4:
        idx += (np.arange(r, dtype=idx_type) * n)[:, None]
        sums = np.bincount(idx.ravel(), minlength=r * n).reshape(r, n).astype(float) @ X
    else:
        sums = np.column_stack([X[:, j][idx].sum(axis=1) for j in range(m)])
    return sums[:, 0] / n if d["linear"] else fn(sums[:, :k], n) - fn(sums[:, k:], n)


def bootstrap_test(a, b, metric="mean", n_resamples: int = 10_000, seed: int = 0,
                   alternative: str = "two-sided") -> ResamplingResult:
    """Paired bootstrap test with the shift method (Algorithm 4.1): resample items with replacement, recompute
    Delta S_k, centre the distribution at its mean, count |Delta S_k - mean| >= |Delta S_0|.

    When the per-item pairs (a_i, b_i) take few distinct values (counts), the number of draws of each value is
    Multinomial(N, m_j / N) — the distribution of drawing items with replacement — so the cost does not grow
    with N. Otherwise items are drawn one by one. Resamples are drawn in batches, each from its own seeded
    generator (:func:`bootstrap_plan`), in parallel threads here or on the workers of a cluster, with the same
    result.
    """
    return bootstrap_plan(a, b, metric, n_resamples, seed, alternative).run()


# ----------------------------------------------------------------------------------- multiple comparisons

def familywise_error_rate(alpha: float, k: int) -> float:
    """Per-experiment error rate of k independent tests at level alpha: 1 - (1 - alpha)^k."""
    return 1.0 - (1.0 - alpha) ** k


def adjust_p_values(p_values, method: str = "holm") -> np.ndarray:
    """Adjust p-values for multiple comparisons: 'bonferroni', 'holm' (statsmodels), or 'none'."""
    p = _scores(p_values, "p-values")
    if method == "none":
        return p
    if method not in ("bonferroni", "holm"):
        raise SignificanceError(f"method must be 'bonferroni', 'holm' or 'none'; got {method!r}.")
    from statsmodels.stats.multitest import multipletests

    return multipletests(p, method=method)[1]


# ------------------------------------------------------------------------------------------- resampling on Dask

def resampling_test_dask(kind: str, a, b, metric="mean", n_resamples: int = 10_000, seed: int = 0,
                    alternative: str = "two-sided", client=None, tasks: int | None = None):
    """A ``"permutation"`` or ``"bootstrap"`` test whose seeded batches run as tasks on a Dask cluster.

    The plan (:func:`~vrs_helpers.book.significance.permutation_plan` / ``bootstrap_plan``) is sent to the workers
    once; ``tasks`` groups of consecutive batches (default: two per worker) are drawn there and concatenated on the
    client in batch order, so the p-value equals :func:`~vrs_helpers.book.significance.permutation_test` /
    ``bootstrap_test`` for the same seed. ``client``: a Client, an address or "local" (default: the current
    client).
    """
    from ..dask_support import default_client, require_dask, run_batches

    if kind not in ("permutation", "bootstrap"):
        raise SignificanceError(f"kind must be 'permutation' or 'bootstrap', got {kind!r}.")
    plan = (permutation_plan if kind == "permutation" else bootstrap_plan)(a, b, metric, n_resamples, seed,
                                                                          alternative)
    require_dask()
    client = client if client is not None else default_client()
    own = client is None or isinstance(client, str)  # a client made here is closed here
    return plan.finish(run_batches(plan, client if client is not None else "local", tasks, close=own))
