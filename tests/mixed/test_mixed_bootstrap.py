"""The parametric-bootstrap LRT (vrs_helpers.mixed.resampling.bootstrap) and what it is built on: responses drawn as
sufficient
statistics (mixed.simulate) and batched refits (mixed.batch).

References: pbkrtest 0.5.2's PBmodcomp on the issue-20 three-seeds log and an unbalanced 3-system log
(tests/reference/small_sample.R); the moments of Gaussian quadratic forms (closed forms computed from explicit
design matrices built here from the rows); the engine's own deviance and optimizer for the batched ones."""

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vrs_helpers import mixed
from vrs_helpers.mixed.likelihood.deviance import Deviance
from vrs_helpers.mixed.resampling.batch import BatchDeviance, minimize
from vrs_helpers.mixed.resampling.bootstrap import bootstrap_plan, internal_theta
from vrs_helpers.mixed.resampling.simulate import ModelView, ResponseSimulator, gram, null_parameters

REF_DIR = Path(__file__).parent.parent / "reference"
REF = json.loads((REF_DIR / "small_sample_lmertest.json").read_text())
FULL = "score ~ system + (1|item) + (1|system:seed)"
NULL = "score ~ 1 + (1|item) + (1|system:seed)"


def _log(name):
    return pd.read_csv(REF_DIR / f"small_sample_{name}.csv.gz", dtype={"system": str, "seed": str, "item": str})


def _fits(d, method="ML"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mixed.fit(NULL, d, method=method), mixed.fit(FULL, d, method=method)


# ------------------------------------------------------------------------ responses as sufficient statistics

def _small_design():
    """An unbalanced crossed design with a random slope: 2 systems x 2-3 runs x 6 items, some rows dropped."""
    rng = np.random.default_rng(3)
    rows = [(s, f"r{r}", f"i{i}") for s, runs in (("A", 2), ("B", 3)) for r in range(runs) for i in range(6)]
    d = pd.DataFrame(rows, columns=["system", "run", "item"])
    d = d[rng.random(len(d)) > 0.15].reset_index(drop=True)
    d["x"] = rng.normal(0, 1, len(d))
    d["score"] = rng.normal(0, 1, len(d))
    return d


def _explicit_design(d, s):
    """F = [Z X] built from the rows (level-major Z in the order of s.levels), independently of the engine."""
    cols = []
    for t, levels in zip(s.terms, s.levels, strict=True):
        key = d[list(t.group)].astype(str).agg(":".join, axis=1).to_numpy()
        for lv in levels:
            ind = (key == str(lv)).astype(float)
            for cov in t.covariates:
                z = ind.copy()
                for v in cov:
                    z = z * d[v].to_numpy(dtype=float)
                cols.append(z)
    X = np.column_stack([np.ones(len(d)), (d["system"] == "B").to_numpy(float), d["x"].to_numpy(float)])
    return np.column_stack(cols + [X])


def test_simulated_statistics_have_the_moments_of_the_model():
    """(F'y, y'y) drawn without rows have the moments of y ~ N(mu, V), mu = X beta, V = Z Sigma Z' + sigma^2 I:
    E F'y = F'mu, Cov F'y = F'VF, E y'y = tr V + mu'mu, Var y'y = 2 tr V^2 + 4 mu'V mu, Cov(F'y, y'y) = 2 F'V mu.
    40,000 draws; means within 5 Monte-Carlo SEs, (co)variances within 5 % of their scale (the sampling error of
    a variance is sqrt(2 / N) = 0.7 % relative; of the fourth-moment quantities a few times that)."""
    d = _small_design()
    s = mixed.accumulate("score ~ system + x + (1 + x|item) + (1|system:run)", d)
    F = _explicit_design(d, s)
    np.testing.assert_allclose(F.T @ F, gram(s).toarray(), atol=1e-9)
    q = F.shape[1] - s.p
    beta = np.array([0.5, 0.3, -0.2])
    Sigma_item = np.array([[0.4, 0.1], [0.1, 0.2]])
    sigma = 0.7
    cols = [np.arange(q)[: 2 * 6].reshape(6, 2), np.arange(q)[2 * 6:].reshape(-1, 1)]
    assert [c.shape for c in cols] == [(len(lv), t.r) for lv, t in zip(s.levels, s.terms, strict=True)]
    fixed = np.r_[np.zeros(q), beta]
    random = [(cols[0], Sigma_item), (cols[1], np.array([[0.3]]))]
    # closed forms
    Z = F[:, :q]
    G = np.zeros((q, q))
    G[:12, :12] = np.kron(np.eye(6), Sigma_item)
    G[12:, 12:] = 0.3 * np.eye(q - 12)
    V = Z @ G @ Z.T + sigma ** 2 * np.eye(len(d))
    mu = F[:, q:] @ beta
    N = 40_000
    sim = ResponseSimulator(s)
    draws = sim.draw(np.random.default_rng(5), N, fixed, random, sigma)
    Fy, yy = draws.Fty, draws.yty
    mean_F, cov_F = F.T @ mu, F.T @ V @ F
    se = np.sqrt(np.diag(cov_F) / N)
    assert np.all(np.abs(Fy.mean(axis=0) - mean_F) <= 5 * se)
    scale = np.sqrt(np.outer(np.diag(cov_F), np.diag(cov_F)))
    assert np.max(np.abs(np.cov(Fy.T) - cov_F) / scale) < 0.05
    e_yy = np.trace(V) + mu @ mu
    var_yy = 2 * np.trace(V @ V) + 4 * mu @ V @ mu
    assert abs(yy.mean() - e_yy) <= 5 * math.sqrt(var_yy / N)
    assert yy.var() == pytest.approx(var_yy, rel=0.05)
    cov_Fy_yy = ((Fy - Fy.mean(axis=0)) * (yy - yy.mean())[:, None]).mean(axis=0)
    assert np.max(np.abs(cov_Fy_yy - 2 * F.T @ V @ mu) / np.sqrt(np.diag(cov_F) * var_yy)) < 0.05


def test_a_model_inside_a_larger_design_sees_its_own_columns():
    """The null model's statistics taken from draws on the general model's design equal those of the same
    response accumulated for the null formula (the embedding of columns by grouping, covariate and level)."""
    d = _log("unbalanced")
    m0, m1 = _fits(d)
    sim = ResponseSimulator(m1.stats)
    fixed, random, sigma = null_parameters(m0, m1.stats)
    draws = sim.draw(np.random.default_rng(1), 3, fixed, random, sigma)
    v0, v1 = ModelView(m0.stats, m1.stats), ModelView(m1.stats)
    for j in range(3):
        s0, s1 = v0.stats(draws, j), v1.stats(draws, j)
        assert s0.yty == s1.yty and s0.ysum == pytest.approx(s1.Xty[0], rel=1e-12)
        assert s0.Xty[0] == pytest.approx(s1.Xty[0], rel=1e-12)   # the intercept column: 1'y
        for k0, t in enumerate(m0.stats.terms):
            k1 = next(k for k, u in enumerate(m1.stats.terms) if u.group == t.group)
            assert m0.stats.levels[k0] == m1.stats.levels[k1]
            np.testing.assert_array_equal(s0.Zty[k0], s1.Zty[k1])


def test_non_nested_models_are_refused():
    d = _log("three_seeds")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = mixed.fit("score ~ system + (1|item)", d, method="ML")
        b = mixed.fit("score ~ 1 + (1|item) + (1|system:seed)", d, method="ML")
    with pytest.raises(mixed.MixedModelError, match="not nested"):
        mixed.parametric_bootstrap_lrt(a, b, n_sim=10)
    m0, m1 = _fits(d)
    for bad in (0, -5, 2.5, True):
        with pytest.raises(mixed.MixedModelError, match="n_sim"):
            mixed.parametric_bootstrap_lrt(m0, m1, n_sim=bad)


# ------------------------------------------------------------------------------------------- batched refits

@pytest.mark.parametrize("name, null, full", [
    ("unbalanced", NULL, FULL),   # 12 seeds of full rank against the items: the dense path
    ("three_seeds", NULL, FULL),   # balanced: seeds x items of rank 1, diagonal C: the Woodbury path
    ("unbalanced", "score ~ 1 + (1|item)", "score ~ system + (1|item)"),   # one random term
])
def test_batched_deviance_equals_the_engine(name, null, full):
    """At any psi (inside, and with a component on the boundary) the batched profiled deviance of each response
    equals the engine's Deviance on that response's statistics (ML and REML), to rounding."""
    d = _log(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m0, m1 = mixed.fit(null, d, method="ML"), mixed.fit(full, d, method="ML")
    sim = ResponseSimulator(m1.stats)
    draws = sim.draw(np.random.default_rng(2), 12, *null_parameters(m0, m1.stats))
    rng = np.random.default_rng(3)
    K = len(m1.stats.terms)
    for reml in (False, True):
        for view in (ModelView(m0.stats, m1.stats), ModelView(m1.stats)):
            bd = BatchDeviance(view, reml=reml)
            psi = rng.uniform(0.0, 2.0, (12, K))
            psi[:4, -1] = 0.0
            psi[4:6, 0] = 0.0
            ours = bd.evaluate(psi, bd.responses(draws))
            engine = np.array([Deviance(view.stats(draws, j), reml)(np.sqrt(psi[j])) for j in range(12)])
            np.testing.assert_allclose(ours, engine, rtol=1e-11)


def test_batched_optimum_equals_the_engine_fit():
    """The batched projected Newton reaches the engine's ML optimum (deviance within 1e-6, far below what moves a
    bootstrap count: the statistics are compared with the observed one at O(1) differences)."""
    d = _log("three_seeds")
    m0, m1 = _fits(d)
    sim = ResponseSimulator(m1.stats)
    draws = sim.draw(np.random.default_rng(4), 40, *null_parameters(m0, m1.stats))
    for m, view in ((m0, ModelView(m0.stats, m1.stats)), (m1, ModelView(m1.stats))):
        bd = BatchDeviance(view)
        psi, dev, ok = minimize(bd, bd.responses(draws), internal_theta(m) ** 2)
        assert ok.all()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            engine = np.array([mixed.fit_stats(view.stats(draws, j), "ML").deviance for j in range(40)])
        np.testing.assert_allclose(dev, engine, rtol=0, atol=1e-6)
        assert (psi >= 0).all()


# ----------------------------------------------------------------------------------------- the bootstrap test

def _mc_bound(p_ours, k_ours, p_ref, k_ref):
    """Three standard errors of the difference of two independent Monte-Carlo p-values: sqrt(p (1 - p) / K) each,
    combined, at the pooled p."""
    p = (p_ours * k_ours + p_ref * k_ref) / (k_ours + k_ref)
    return 3 * math.sqrt(p * (1 - p) / k_ours + p * (1 - p) / k_ref)


@pytest.mark.parametrize("name, key", [("three_seeds", "pbmodcomp"), ("unbalanced", "pbmodcomp_unbalanced")])
def test_bootstrap_p_matches_pbmodcomp(name, key):
    """Our p and PBmodcomp's (2,000 simulations each) agree within three combined Monte-Carlo SEs; so does the
    mean of the simulated statistics (SE sqrt(var / K) each, PBmodcomp's variance). The observed statistic and its
    chi-square p equal lme4's (ML fits) to 1e-6."""
    ref = REF[key]
    m0, m1 = _fits(_log(name))
    res = mixed.parametric_bootstrap_lrt(m0, m1, n_sim=2000, seed=1)
    assert res.chi2 == pytest.approx(ref["LRT"], rel=1e-6)
    assert res.p_chisq == pytest.approx(ref["p_LRT"], rel=1e-6)
    assert res.n_failed == 0 and res.n_sim == 2000
    assert abs(res.p_value - ref["p_PBtest"]) <= _mc_bound(res.p_value, res.n_sim, ref["p_PBtest"], ref["npos"])
    assert abs(res.reference.mean() - ref["ref_mean"]) <= 3 * math.sqrt(2 * ref["ref_var"] / 2000)
    assert res.p_value == (1 + res.n_extreme) / 2001
    assert res.mc_se == pytest.approx(math.sqrt(res.p_value * (1 - res.p_value) / 2000))


def test_same_seed_same_p_and_batches_are_independent():
    """The same seed gives the same reference distribution; each batch depends only on its own generator (a batch
    drawn alone equals its slice of the full run), so the batches can run anywhere; another seed differs."""
    m0, m1 = _fits(_log("three_seeds"))
    a = mixed.parametric_bootstrap_lrt(m0, m1, n_sim=250, seed=3, batch_size=100)
    b = mixed.parametric_bootstrap_lrt(m1, m0, n_sim=250, seed=3, batch_size=100)   # order does not matter
    # same seed, same simulated responses; refits may run in threads that add sums in another order: agreement to
    # rounding, not to the bit
    np.testing.assert_allclose(a.reference, b.reference, rtol=1e-9, atol=1e-12)
    assert a.n_extreme == b.n_extreme and a.formula0 == NULL
    plan = bootstrap_plan(m0, m1, n_sim=250, seed=3, batch_size=100)
    np.testing.assert_allclose(plan.draw(2), a.reference[200:], rtol=1e-9, atol=1e-12)
    c = mixed.parametric_bootstrap_lrt(m0, m1, n_sim=250, seed=4, batch_size=100)
    assert not np.array_equal(c.reference, a.reference)


def test_batched_and_engine_refits_give_the_same_statistics():
    """A batch refitted by the engine's optimizer one response at a time (the path of random-slope models) gives
    the same statistics as the batched refits (1e-5 absolute: both optimizers stop within ~1e-6 of the optimum)."""
    m0, m1 = _fits(_log("unbalanced"))
    plan = bootstrap_plan(m0, m1, n_sim=30, seed=5, batch_size=30)
    engine = bootstrap_plan(m0, m1, n_sim=30, seed=5, batch_size=30)
    engine.batched = False
    np.testing.assert_allclose(plan.draw(0), engine.draw(0), rtol=0, atol=1e-5)


def test_reml_fits_are_refitted_by_ml_and_results_read_well():
    m0, m1 = _fits(_log("three_seeds"), method="REML")
    res = mixed.parametric_bootstrap_lrt(m0, m1, n_sim=50, seed=1)
    assert res.chi2 == pytest.approx(REF["pbmodcomp"]["LRT"], rel=1e-6)
    assert res.df == 1 and res.method == "parametric bootstrap LRT"
    assert "50 simulations" in repr(res) and res.statistic == res.chi2
    assert res.outcome_row() == {"method": "parametric bootstrap LRT", "statistic": res.chi2, "df": 1,
                             "p_value": res.p_value}   # the shared row of every test result
    frame = res.to_frame()
    assert list(frame.columns[:4]) == ["test", "chi2", "df", "p_value"] and frame["n_sim"].iloc[0] == 50


def test_random_slopes_go_through_the_engine():
    """sleepstudy with correlated random slopes: the refits take the engine's general optimizer; the observed
    statistic is lme4's (the ML deviances of the two fits) and the simulated ones are finite and positive."""
    d = pd.read_csv(REF_DIR / "sleepstudy.csv.gz", dtype={"Subject": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m1 = mixed.fit("Reaction ~ Days + (Days|Subject)", d, method="ML")
        m0 = mixed.fit("Reaction ~ 1 + (Days|Subject)", d, method="ML")
    res = mixed.parametric_bootstrap_lrt(m0, m1, n_sim=8, seed=0)
    assert res.chi2 == pytest.approx(2 * (m1.loglik - m0.loglik), rel=1e-9)
    assert np.isfinite(res.reference).all() and (res.reference >= 0).all()
    assert res.p_value == pytest.approx(1 / 9)   # Days is a strong effect: no simulated statistic comes near


def test_progress_bar_counts_the_simulations_and_changes_no_number(capsys, monkeypatch):
    """``progress=True``: a bar over the simulations on stderr when it is a terminal (here forced on by tqdm's
    ``disable=None`` path: stderr is patched to claim a terminal), counting up to n_sim; the reference is the same as
    without it, and without ``progress`` nothing is written."""
    import sys

    m0, m1 = _fits(_log("three_seeds"))
    quiet = mixed.parametric_bootstrap_lrt(m0, m1, n_sim=120, seed=5, batch_size=50)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    shown = mixed.parametric_bootstrap_lrt(m0, m1, n_sim=120, seed=5, batch_size=50, progress=True)
    np.testing.assert_allclose(shown.reference, quiet.reference, rtol=1e-9, atol=1e-12)
    err = capsys.readouterr().err
    assert "parametric bootstrap LRT" in err and "/120 [" in err and "sim/s" in err
    mixed.parametric_bootstrap_lrt(m0, m1, n_sim=120, seed=5, batch_size=50)
    assert capsys.readouterr().err == ""
