"""Property-based tests of vrs_helpers.mixed on random small designs, against an independent dense computation.

Designs (hypothesis draws the structure and an integer seed; numpy builds the rows from the seed): 1-3 fixed
factors ``fa, fb, fc`` with 2-4 levels (string levels ``p < q < r < s``, so R's reference level is ``p``), 0-2
numeric covariates ``x1, x2``, up to two two-way interactions written ``u*v`` or ``u:v`` (with both main effects
present: the engine fits hierarchical formulas only) or one three-way ``u*v*w``, 1-3 random intercepts, crossed
(``(1|g1) + (1|g2)``) or nested (``(1|g1) + (1|g1:h2)``), unbalanced level frequencies, missing cells of the
fixed factors, random-effect SDs including 0 (boundary fits), N <= 300 rows.

Properties:

(a) Term order. Every ordering of the fixed terms, and of the variables inside an interaction (``a*b`` vs ``b*a``,
    ``a:x`` vs ``x:a``), is the same model: the same logLik and the same fixed effects by name, where names are
    compared up to the order of the variables inside an interaction (R names ``fa:fb`` columns ``faq:fbr`` and
    ``fb:fa`` columns ``fbr:faq``). Each design is fitted as generated (factors first), fully reversed
    (covariates first: ``y ~ x1 + fa``) and in a random order (random terms shuffled too).
(b) Likelihood. The engine's REML and ML logLik equal a dense N x N computation written here: X from patsy with
    Treatment coding (R's parametrization, which matters: the REML likelihood depends on X through
    log|X'V^-1X|), Z_k 0/1 indicator matrices, V = sigma^2 (I + sum_k theta_k^2 Z_k Z_k'),

        ML:   log N(y; X beta_hat, V)                                  beta_hat the GLS estimate,
        REML: -0.5 [(n-p) log(2 pi) + log|V| + log|X'V^-1X| + r'V^-1r]   r = y - X beta_hat (lme4's REML
              criterion / -2),

    evaluated at the engine's theta and sigma. The engine's fixed effects must be beta_hat and its sigma the
    profiled sigma (sqrt(r'A^-1r / (n-p)) for REML, / n for ML, A = V / sigma^2) at its theta, and its theta
    must be a local maximum of the dense profiled likelihood: moving any theta_k by a small step up or down (only
    up when theta_k is at 0) does not increase it.
(c) Rank. A fixed design that is rank deficient (numpy matrix_rank of the patsy X: an aliased factor, collinear or
    constant covariates, a covariate that is a function of a factor, an empty cell of an interaction) raises
    mixed.MixedModelError; a full-rank one fits.

Tolerances (the reasons, and the differences measured, are next to the constants below): logLik to 1e-7
absolute (1e-9 relative when |logLik| > 100) both between two fits (a) and between engine and dense (b); fixed
effects of two fits to 1e-5 of the largest |beta| (they follow the optimizer's theta at first order), engine vs
dense beta and sigma at the same theta to 1e-8; a theta step of 1e-3 (relative; absolute 1e-4 near 0) may gain
at most 1e-7. Every asserted number comes from the dense computation or a second engine fit, never from the
engine's output compared with itself.

Designs are skipped (hypothesis ``assume``) when a factor or random grouping has a single level, when X is not
clearly of full rank (for (a) and (b); see rank_status), or when X and the Z_k together leave fewer than 3
residual degrees of freedom (the likelihood is then unbounded; see residual_identified). Per run: 120 designs for
(a) (3 fits each), 100 for (b) (REML and ML), 80 + 5 x 15 for (c): 375 designs, about 25 s of CPU.

Runs are deterministic (derandomize=True, no example database). Shrinking is switched off to keep a failing run
short; a failure prints the drawn ``Design`` (rebuild its rows with ``build(design)``) and the formulas.
"""

from __future__ import annotations

import itertools
import math
import re
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import patsy
import pytest
from hypothesis import HealthCheck, Phase, assume, event, given, note, settings
from hypothesis import strategies as st
from scipy import linalg
from threadpoolctl import threadpool_limits

from vrs_helpers import mixed

FACTORS = ("fa", "fb", "fc")
NUMERICS = ("x1", "x2")
LEVELS = "pqrs"

# Tolerances. Measured on 300 designs of this generator with the engine of 2026-11-22: |logLik| up to ~600, theta
# up to ~5; two fits differ by < 3e-12 in logLik and < 5e-10 in beta (relative to the largest |beta|); engine and
# dense differ by < 3e-12 in logLik, < 1e-13 (relative) in sigma and < 3e-13 in beta; no theta step gains.
#
# (a) the logLik of two fits of one model: both optimizers stop within ~1e-6 of the same theta, where the logLik
# is flat (a difference quadratic in the distance, ~1e-10), so 1e-7 (or 1e-9 relative for large |logLik|) is
# tight; a wrong design (the bug this guards against: covariates before factors) moves it by 1e-3 and more.
LOGLIK_ABS, LOGLIK_REL = 1e-7, 1e-9
# (a) beta of two fits: beta moves with theta at first order, so it agrees only to the optimizers' precision.
BETA_TOL_REFIT = 1e-5
# (b) engine vs dense at the same theta and sigma: two exact computations of one number, apart only by rounding
# (Cholesky factors of I + sum theta^2 Z Z' with condition numbers up to ~1e4): logLik to LOGLIK_ABS/LOGLIK_REL
# as above, sigma and beta (relative to the largest |beta|) to 1e-8.
DENSE_TOL = 1e-8
# (b) the local-optimum check: theta_k moves by THETA_STEP * max(theta_k, 0.1). At the optimum a step loses
# ~H h^2 / 2 (H the curvature); a theta off by more than about half a step (5e-4 relative) gains, by ~H h^2, which
# is ~1e-6 or more on these designs (a theta scaled by 1.001 is caught), far above the rounding of the dense
# profiled logLik (~1e-12).
THETA_STEP = 1e-3
PROFILE_TOL = 1e-7
RANK_GRAY = 1e-4  # see rank_status
MIN_RESIDUAL_DF = 3  # see residual_identified
# rank deficiencies made on purpose in (c): fb a relabelling of fa; x2 = 1.5 + 2 x1; x1 constant; x1 a function of
# fa; one cell of a factor x factor interaction emptied
DEFECTS = ("alias", "collinear", "constant", "factor_numeric", "empty_cell")

SETTINGS = dict(derandomize=True, deadline=None, database=None, phases=(Phase.explicit, Phase.generate),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])


# ------------------------------------------------------------------------------------------------ designs

@dataclass(frozen=True)
class Design:
    """The structure of a random design; its rows come from :func:`build` (deterministic in ``seed``)."""

    levels: tuple[int, ...]  # number of levels of fa, fb, fc (as many factors as entries)
    n_numeric: int  # x1, x2
    chunks: tuple[tuple[str, ...], ...]  # fixed-effect chunks: ("fa",), ("fa", "x1") ...
    stars: tuple[bool, ...]  # per chunk: written u*v (main effects and interaction) or u:v
    random: tuple[tuple[str, ...], ...]  # grouping of each random intercept: ("g1",) or ("g1", "h2")
    random_levels: tuple[int, ...]  # levels of the variable each random term introduces (g_k or h_k)
    random_sd: tuple[float, ...]  # true SD of each random intercept (0: a boundary fit is likely)
    n: int  # rows before missing cells are removed
    drop: float  # probability that a cell of the fixed factors is missing
    seed: int
    defect: str = "none"  # (c): none, alias, collinear, constant, factor_numeric, empty_cell

    @property
    def factors(self) -> tuple[str, ...]:
        return FACTORS[:len(self.levels)]

    @property
    def numerics(self) -> tuple[str, ...]:
        return NUMERICS[:self.n_numeric]

    def formula(self, order=None, flips=None, random_order=None) -> str:
        """lme4 formula; ``order`` permutes the chunks, ``flips`` permutes the variables within each chunk."""
        order = range(len(self.chunks)) if order is None else order
        parts = []
        for i in order:
            vs = list(self.chunks[i])
            if flips is not None:
                vs = [vs[j] for j in flips[i]]
            parts.append(("*" if self.stars[i] else ":").join(vs))
        random_order = range(len(self.random)) if random_order is None else random_order
        rand = [f"(1|{':'.join(self.random[k])})" for k in random_order]
        return "y ~ " + " + ".join(parts + rand)

    @property
    def fixed_rhs(self) -> str:
        return self.formula().split("~", 1)[1].split(" + (1|", 1)[0]


@st.composite
def designs(draw, defect: str = "none") -> Design:
    """A design; ``defect`` (one of DEFECTS) makes it rank deficient on purpose (see :func:`build`)."""
    n_fac = draw(st.integers(2 if defect in ("alias", "empty_cell") else 1, 3))
    levels = tuple(draw(st.integers(2, 4)) for _ in range(n_fac))
    n_num = draw(st.integers({"collinear": 2, "constant": 1, "factor_numeric": 1}.get(defect, 0), 2))
    factors, numerics = FACTORS[:n_fac], NUMERICS[:n_num]
    variables = factors + numerics
    chunks: list[tuple[str, ...]] = []
    stars: list[bool] = []
    covered: set[str] = set()
    if len(variables) >= 3 and defect != "empty_cell" and draw(st.integers(0, 5)) == 0:  # three-way, rarely
        triple = tuple(sorted(draw(st.sets(st.sampled_from(variables), min_size=3, max_size=3)), key=variables.index))
        chunks.append(triple)
        stars.append(True)
        covered |= set(triple)
        colons = []
    else:
        pairs = list(itertools.combinations(variables, 2))
        chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=2)) if pairs else []
        if defect == "empty_cell" and not any(set(pair) <= set(factors) for pair in chosen):
            chosen.append(draw(st.sampled_from(list(itertools.combinations(factors, 2)))))
        colons = []
        for pair in chosen:
            if draw(st.booleans()):
                chunks.append(pair)
                stars.append(True)
                covered |= set(pair)
            else:
                colons.append(pair)
    # generated order: factor main effects, star products, covariates, then u:v terms (factors first inside)
    mains = [(v,) for v in variables if v not in covered]
    chunks = [c for c in mains if c[0] in factors] + chunks + [c for c in mains if c[0] in numerics] + colons
    stars = [False] * sum(c[0] in factors for c in mains) + stars + [False] * sum(c[0] in numerics for c in mains)
    stars += [False] * len(colons)
    # random intercepts: the first crossed; later ones crossed (a new g_k) or nested in an earlier g (g:h_k)
    n_rand = draw(st.integers(1, 3))
    random: list[tuple[str, ...]] = [("g1",)]
    random_levels = [draw(st.integers(3, 14))]
    for k in range(2, n_rand + 1):
        crossed = [g for g in random if len(g) == 1]
        if draw(st.booleans()):
            random.append((f"g{k}",))
            random_levels.append(draw(st.integers(2, 10)))
        else:
            random.append((draw(st.sampled_from(crossed))[0], f"h{k}"))
            random_levels.append(draw(st.integers(2, 4)))
    random_sd = tuple(draw(st.sampled_from([0.0, 0.3, 1.0, 2.0])) for _ in random)
    n = draw(st.integers(30, 300))
    drop = draw(st.sampled_from([0.0, 0.1, 0.25])) if n_fac > 1 else 0.0
    seed = draw(st.integers(0, 2**32 - 1))
    return Design(levels, n_num, tuple(chunks), tuple(stars), tuple(random), tuple(random_levels), random_sd, n,
                  drop, seed, defect)


def build(d: Design) -> pd.DataFrame:
    """The rows of a design (deterministic in ``d.seed``); ``assume``s away designs that cannot be fitted."""
    rng = np.random.default_rng(d.seed)
    n = d.n
    df = pd.DataFrame(index=range(n))
    for f, k in zip(d.factors, d.levels, strict=True):  # unbalanced: level frequencies from a Dirichlet
        df[f] = rng.choice([f"{c}" for c in LEVELS[:k]], n, p=rng.dirichlet(np.full(k, 2.0)))
    for x in d.numerics:
        df[x] = rng.normal(rng.normal(0, 2), rng.uniform(0.5, 2), n)
    for g, k in zip(d.random, d.random_levels, strict=True):
        v = g[-1]
        df[v] = rng.choice([f"{v}_{i}" for i in range(k)], n, p=rng.dirichlet(np.full(k, 3.0)))
    # the defects of (c)
    if d.defect == "alias":
        df["fb"] = df["fa"].map({c: LEVELS[len(LEVELS) - 1 - i] for i, c in enumerate(LEVELS)})
    elif d.defect == "collinear":
        df["x2"] = 1.5 + 2.0 * df["x1"]
    elif d.defect == "constant":
        df["x1"] = 2.5
    elif d.defect == "factor_numeric":
        df["x1"] = df["fa"].map({c: float(rng.normal()) for c in LEVELS})
    # missing cells of the fixed factors (then re-added one by one while the design is rank deficient)
    cell = _group_key(df, d.factors)
    cells = sorted(cell.unique())
    dropped = [c for c in cells if rng.random() < d.drop]
    if d.defect == "empty_cell":
        chunk = next(c for c in d.chunks if sum(v in d.factors for v in c) >= 2)
        u, v = [x for x in chunk if x in d.factors][:2]
        pair = df[u] + df[v]
        keep = (pair != pair.iloc[int(rng.integers(n))]).to_numpy()
    else:
        keep = ~cell.isin(dropped).to_numpy()
        if d.defect == "none":
            while dropped and not _full_rank(d, df[keep]):
                dropped.pop(int(rng.integers(len(dropped))))
                keep = ~cell.isin(dropped).to_numpy()
    df = df[keep].reset_index(drop=True)
    # the response: cell means, covariate slopes varying with the first factor, random intercepts, noise
    m = len(df)
    y = rng.normal(0, 1, len(cells))[np.searchsorted(cells, cell[keep].to_numpy())]
    for x in d.numerics:
        slope = dict(zip(LEVELS, rng.normal(0, 1, len(LEVELS)), strict=True))
        y = y + df[x].to_numpy() * df["fa"].map(slope).to_numpy()
    for g, sd in zip(d.random, d.random_sd, strict=True):
        codes, uniq = pd.factorize(_group_key(df, g))
        y = y + rng.normal(0, sd, len(uniq))[codes]
    df["y"] = y + rng.normal(0, 1, m)
    assume(m >= 10)
    for f in d.factors:  # a fixed factor needs two observed levels (else the engine refuses it, rightly)
        assume(df[f].nunique() >= 2)
    for g in d.random:  # every random factor needs two levels, and fewer levels than rows
        assume(2 <= _group_key(df, g).nunique() < m)
    return df


def _group_key(df: pd.DataFrame, group: tuple[str, ...]) -> pd.Series:
    key = df[group[0]].astype(str)
    for v in group[1:]:
        key = key + ":" + df[v].astype(str)
    return key


# --------------------------------------------------------------------------------------- dense computation

_PATSY_LEVEL = re.compile(r"^(\w+)\[T\.(.*)\]$")


def design_matrix(rhs: str, df: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """X by patsy with Treatment coding (R's), and its columns named as R names them (``faq:x1``)."""
    X = patsy.dmatrix(rhs, df, NA_action="raise", return_type="dataframe")
    names = []
    for col in X.columns:
        parts = []
        for part in col.split(":"):
            m = _PATSY_LEVEL.match(part)
            parts.append(m.group(1) + m.group(2) if m else part)
        names.append("(Intercept)" if col == "Intercept" else ":".join(parts))
    return X.to_numpy(dtype=float), names


def _full_rank(d: Design, df: pd.DataFrame) -> bool:
    if len(df) == 0:
        return False
    X, _ = design_matrix(d.fixed_rhs, df)
    return np.linalg.matrix_rank(X) == X.shape[1]


def canonical(name: str) -> str:
    """A column name up to the order of the variables within an interaction: 'fbr:faq' -> 'faq:fbr'."""
    return ":".join(sorted(name.split(":")))


def indicators(d: Design, df: pd.DataFrame) -> list[np.ndarray]:
    """Z_k: the 0/1 matrix of rows x levels of each random grouping."""
    Zs = []
    for g in d.random:
        codes, uniq = pd.factorize(_group_key(df, g))
        Z = np.zeros((len(df), len(uniq)))
        Z[np.arange(len(df)), codes] = 1.0
        Zs.append(Z)
    return Zs


class Dense:
    """The marginal likelihood of y ~ N(X beta, sigma^2 (I + sum_k theta_k^2 Z_k Z_k')) by N x N linear algebra."""

    def __init__(self, d: Design, df: pd.DataFrame):
        self.X, self.names = design_matrix(d.fixed_rhs, df)
        self.y = df["y"].to_numpy(dtype=float)
        self.groups = [":".join(g) for g in d.random]
        self.ZZ = [Z @ Z.T for Z in indicators(d, df)]
        self.n, self.p = self.X.shape
        self._cache: dict[bytes, tuple] = {}

    def parts(self, theta):
        """beta_hat (GLS), r'A^-1 r, log|A|, log|X'A^-1X| for A = V / sigma^2 at ``theta``."""
        key = np.asarray(theta, dtype=float).tobytes()
        if key not in self._cache:
            self._cache[key] = self._parts(theta)
        return self._cache[key]

    def _parts(self, theta):
        A = np.eye(self.n) + sum(t * t * ZZ for t, ZZ in zip(theta, self.ZZ, strict=True))
        L = linalg.cholesky(A, lower=True)
        Xw = linalg.solve_triangular(L, self.X, lower=True)
        yw = linalg.solve_triangular(L, self.y, lower=True)
        Q, R = np.linalg.qr(Xw)
        beta = linalg.solve_triangular(R, Q.T @ yw)
        r = yw - Xw @ beta
        return beta, float(r @ r), 2 * float(np.log(np.diag(L)).sum()), 2 * float(np.log(np.abs(np.diag(R))).sum())

    def loglik(self, theta, sigma: float, reml: bool) -> float:
        """ML: log N(y; X beta_hat, V); REML: -0.5 [(n-p) log 2pi + log|V| + log|X'V^-1X| + r'V^-1r]."""
        _, rss, logdet_a, logdet_x = self.parts(theta)
        n, p, s2 = self.n, self.p, sigma * sigma
        if reml:  # log|V| = n log s2 + log|A|, log|X'V^-1X| = log|X'A^-1X| - p log s2
            return -0.5 * ((n - p) * math.log(2 * math.pi) + (n - p) * math.log(s2) + logdet_a + logdet_x + rss / s2)
        return -0.5 * (n * math.log(2 * math.pi) + n * math.log(s2) + logdet_a + rss / s2)

    def sigma(self, theta, reml: bool) -> float:
        """The sigma maximising the (restricted) likelihood for given theta."""
        _, rss, _, _ = self.parts(theta)
        return math.sqrt(rss / (self.n - self.p if reml else self.n))

    def profiled(self, theta, reml: bool) -> float:
        return self.loglik(theta, self.sigma(theta, reml), reml)


def engine_theta(m, group: str) -> float:
    """The engine's theta of one random intercept (indexed "g" or lme4's "g.(Intercept)")."""
    for key in (group, f"{group}.(Intercept)"):
        if key in m.theta.index:
            return float(m.theta[key])
    raise KeyError(f"no theta for {group!r} in {list(m.theta.index)}")


def fit(formula: str, df: pd.DataFrame, method: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mixed.fit(formula, df, method=method)


def fixed_by_name(m) -> pd.Series:
    fe = m.fixed_effects["estimate"]
    return pd.Series(fe.to_numpy(), index=[canonical(nm) for nm in fe.index]).sort_index()


def rank_status(X: np.ndarray) -> str:
    """The rank of X: "deficient" by numpy's matrix_rank, else "full" or "unclear".

    "unclear": full rank by matrix_rank, but the smallest singular value of X with unit-length columns is below
    RANK_GRAY times the largest, where the engine's own test (QR pivots of the scaled X'X below 1e-10 of the first,
    i.e. ~1e-5 on the singular values of X) may decide either way. Random designs are far from it (the exact
    collinearities of (c) sit at ~1e-16).
    """
    if np.linalg.matrix_rank(X) < X.shape[1]:
        return "deficient"
    sv = np.linalg.svd(X / np.linalg.norm(X, axis=0), compute_uv=False)
    return "full" if sv[-1] > RANK_GRAY * sv[0] else "unclear"


def residual_identified(d: Design, df: pd.DataFrame, X: np.ndarray) -> bool:
    """At least MIN_RESIDUAL_DF rows beyond the rank of [X Z_1 ... Z_K].

    When X and the random effects together can fit y exactly, the likelihood is unbounded (sigma -> 0 while theta
    -> infinity): there is no optimum to find, the engine stops somewhere on the way (and warns that it did not
    converge), and the N x N algebra at theta ~ 1e7 has no accuracy left. A margin of a few rows keeps the
    designs away from that edge.
    """
    return len(df) - np.linalg.matrix_rank(np.hstack([X, *indicators(d, df)])) >= MIN_RESIDUAL_DF


def full_rank_or_skip(d: Design, df: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Skip designs whose X is not clearly of full rank, or whose residual variance is not identified."""
    X, names = design_matrix(d.fixed_rhs, df)
    assume(rank_status(X) == "full")
    assume(residual_identified(d, df, X))
    return X, names


def shuffled_formula(d: Design, data) -> str:
    """The design's formula with its fixed chunks, the variables within them and its random terms in random order."""
    order = data.draw(st.permutations(range(len(d.chunks))), label="order")
    flips = [data.draw(st.permutations(range(len(c))), label=f"flip {i}") for i, c in enumerate(d.chunks)]
    random_order = data.draw(st.permutations(range(len(d.random))), label="random order")
    return d.formula(order, flips, random_order)


# ------------------------------------------------------------------------------------------------ properties

@settings(max_examples=120, **SETTINGS)
@given(d=designs(), method=st.sampled_from(["REML", "ML"]), data=st.data())
def test_term_order_does_not_change_the_fit(d, method, data):
    """(a) Every order of the fixed terms, and of the variables in an interaction, gives the same fit."""
    df = build(d)
    X, names = full_rank_or_skip(d, df)
    k = len(d.chunks)
    reverse = (list(range(k))[::-1], [list(range(len(c)))[::-1] for c in d.chunks])
    formulas = [d.formula(), d.formula(*reverse), shuffled_formula(d, data)]
    fits = [fit(f, df, method) for f in formulas]
    expected_names = sorted(canonical(nm) for nm in names)  # the independent X's columns, R's names
    for f, m in zip(formulas, fits, strict=True):
        note(f"{f}: logLik {m.loglik!r}")
        assert sorted(fixed_by_name(m).index) == expected_names, f
    ll0 = fits[0].loglik
    beta0 = fixed_by_name(fits[0])
    for f, m in zip(formulas[1:], fits[1:], strict=True):
        assert m.loglik == pytest.approx(ll0, abs=LOGLIK_ABS, rel=LOGLIK_REL), (formulas[0], f)
        beta = fixed_by_name(m)
        scale = max(1.0, float(np.abs(beta0).max()))
        np.testing.assert_allclose(beta.to_numpy(), beta0.to_numpy(), rtol=0, atol=BETA_TOL_REFIT * scale,
                                   err_msg=f"{formulas[0]} vs {f}")


@settings(max_examples=100, **SETTINGS)
@given(d=designs(), data=st.data())
def test_loglik_equals_the_dense_marginal_likelihood(d, data):
    """(b) REML and ML logLik, beta and sigma equal the dense computation; theta is a local optimum of it."""
    df = build(d)
    full_rank_or_skip(d, df)
    formula = shuffled_formula(d, data)  # the terms in any order (the dense X does not depend on it)
    fits = {method: fit(formula, df, method) for method in ("REML", "ML")}
    # one BLAS thread for the N x N algebra: 10x faster than two threads competing on a shared machine
    with threadpool_limits(1):
        dense = Dense(d, df)
        for method, m in fits.items():
            reml = method == "REML"
            theta = np.array([engine_theta(m, g) for g in dense.groups])
            note(f"{method}: theta {dict(zip(dense.groups, theta, strict=True))}, sigma {m.sigma!r}, "
                 f"logLik {m.loglik!r}")
            expected = dense.loglik(theta, m.sigma, reml)
            assert m.loglik == pytest.approx(expected, abs=LOGLIK_ABS, rel=LOGLIK_REL), method
            assert m.sigma == pytest.approx(dense.sigma(theta, reml), rel=DENSE_TOL), method
            beta, _, _, _ = dense.parts(theta)
            dense_beta = pd.Series(beta, index=[canonical(nm) for nm in dense.names]).sort_index()
            ours = fixed_by_name(m)
            assert list(ours.index) == list(dense_beta.index), method
            scale = max(1.0, float(np.abs(dense_beta).max()))
            np.testing.assert_allclose(ours.to_numpy(), dense_beta.to_numpy(), rtol=0, atol=DENSE_TOL * scale,
                                       err_msg=method)
            # a local optimum of the dense profiled likelihood
            best = dense.profiled(theta, reml)
            for k, t in enumerate(theta):
                h = THETA_STEP * max(t, 0.1)
                for step in (h, -h) if t > 0 else (h,):
                    moved = theta.copy()
                    moved[k] = max(t + step, 0.0)
                    gain = dense.profiled(moved, reml) - best
                    assert gain <= PROFILE_TOL, (method, dense.groups[k], t, step, gain)


def check_rank(d: Design) -> str:
    """Fit ``d``: MixedModelError when the independent X is rank deficient, a fit when it has full rank."""
    df = build(d)
    X, _ = design_matrix(d.fixed_rhs, df)
    status = rank_status(X)
    assume(status == "deficient" or (status == "full" and residual_identified(d, df, X)))
    note(f"{d.formula()}: rank {np.linalg.matrix_rank(X)} of {X.shape[1]}")
    event(f"defect {d.defect}: {status}")
    if status == "deficient":
        with pytest.raises(mixed.MixedModelError):
            fit(d.formula(), df, "REML")
    else:
        fit(d.formula(), df, "REML")
    return status


@settings(max_examples=80, **SETTINGS)
@given(d=designs())
def test_fixed_design_rank_decides_whether_the_fit_raises(d):
    """(c) Designs as for (a) and (b), mostly full rank: they fit; the few that stay deficient raise."""
    check_rank(d)


@pytest.mark.parametrize("defect", DEFECTS)
@settings(max_examples=15, **SETTINGS)
@given(data=st.data())
def test_rank_deficient_fixed_design_raises(defect, data):
    """(c) Rank deficient on purpose (an aliased factor, collinear covariates...): MixedModelError."""
    d = data.draw(designs(defect=defect), label="design")
    assert check_rank(d) == "deficient"
