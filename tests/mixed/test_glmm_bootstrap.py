"""The parametric-bootstrap LRT of GLMMs (vrs_helpers.mixed.resampling.glmm_bootstrap) against pbkrtest 0.5.2's
PBmodcomp on
glmer fits (tests/reference/glmm_pbmodcomp.R: a binary and a successes-of-trials log, 2,000 simulations each), the
batched Laplace deviance and gradient against the engine's (:mod:`vrs_helpers.mixed.models.glmm`, itself checked against
lme4), failed refits counted, seeded batches, separation, and the non-convergence warning of glmer.

Tolerances: p within three combined Monte-Carlo SEs of PBmodcomp's (sqrt(p (1 - p) / K) each, at the pooled p);
the mean of the simulated statistics within three SEs (sqrt(var / K) each); the batched deviance and gradient equal
the engine's to 1e-8 (the PIRLS stopping rule); refits reach glmer's optimum to 1e-6 in the deviance.
"""

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vrs_helpers import mixed
from vrs_helpers.mixed.resampling import glmm_bootstrap as gb
from vrs_helpers.mixed.structure.errors import ConvergenceWarning

REF_DIR = Path(__file__).parent.parent / "reference"
REF = json.loads((REF_DIR / "glmm_pbmodcomp.json").read_text())
_FITS: dict = {}


def _fits(name):
    if name not in _FITS:
        r = REF[name]
        d = pd.read_csv(REF_DIR / r["data"], dtype={"seed": str, "item": str})
        _FITS[name] = (mixed.glmer(r["formula_null"], d), mixed.glmer(r["formula_full"], d))
    return _FITS[name]


def _mc_bound(p_ours, k_ours, p_ref, k_ref):
    p = (p_ours * k_ours + p_ref * k_ref) / (k_ours + k_ref)
    return 3 * math.sqrt(p * (1 - p) / k_ours + p * (1 - p) / k_ref)


@pytest.mark.parametrize("name", ["binary", "trials"])
def test_bootstrap_p_matches_pbmodcomp(name):
    ref = REF[name]
    m0, m1 = _fits(name)
    assert m1.loglik == pytest.approx(ref["logLik_full"], abs=1e-4)  # the same Laplace optima as glmer's
    assert m0.loglik == pytest.approx(ref["logLik_null"], abs=1e-4)
    res = mixed.glmm_bootstrap_lrt(m0, m1, n_sim=1000, seed=1)
    assert res.chi2 == pytest.approx(ref["LRT"], abs=2e-4) and res.df == ref["df"]
    assert res.p_chisq == pytest.approx(ref["p_LRT"], rel=1e-3)
    assert res.n_failed == 0 and res.n_sim == 1000
    assert res.p_value == (1 + res.n_extreme) / 1001
    assert abs(res.p_value - ref["p_PBtest"]) <= _mc_bound(res.p_value, 1000, ref["p_PBtest"], ref["npos"])
    assert abs(res.reference.mean() - ref["ref_mean"]) <= 3 * math.sqrt(ref["ref_var"] / 1000 + ref["ref_var"]
                                                                      / ref["npos"])
    # the bootstrap is more conservative than the chi-square here: the reason it is the default
    assert ref["p_PBtest"] > ref["p_LRT"]


def _point(m, scale):
    return np.concatenate([m.theta.to_numpy(), m.fixed_effects["estimate"].to_numpy()]) * scale


@settings(max_examples=10, deadline=None)
@given(scale=st.floats(0.5, 1.5), which=st.sampled_from([0, 1]), name=st.sampled_from(["binary", "trials"]))
def test_batched_deviance_and_gradient_equal_the_engine(scale, which, name):
    m = _fits(name)[which]
    lap = gb.BatchLaplace(gb.GLMMDesign.of(m))
    x = _point(m, scale)
    K = lap.K
    dev, state = lap.value(x[None, :K], x[None, K:], m.objective.y[None, :], np.zeros((1, lap.d.q)))
    g, _ = lap.gradient(state)
    m.objective.u, m.objective.pred = np.zeros(lap.d.q), None
    d_ref, g_ref = m.objective.laplace(x[:K], x[K:], grad=True)
    const = -2.0 * m.objective.const.sum()  # lme4's deviance has the binomial coefficients; the batched one not
    assert dev[0] + const == pytest.approx(d_ref, abs=1e-8 * abs(d_ref))
    np.testing.assert_allclose(g[0], g_ref, atol=1e-6 * max(1.0, np.abs(g_ref).max()))


def test_poisson_counts_deviance_gradient_and_bootstrap():
    """Poisson (log link): the batched deviance and gradient equal the engine's; the bootstrap runs and is seeded."""
    rng = np.random.default_rng(5)
    s, r, i = np.meshgrid(np.arange(2), np.arange(3), np.arange(100), indexing="ij")
    y = rng.poisson(np.exp(0.5 + rng.normal(0, 0.5, 100)[i] + rng.normal(0, 0.3, (2, 3))[s, r]))
    d = pd.DataFrame({"system": [f"S{k}" for k in s.ravel()], "seed": r.ravel().astype(str),
                      "item": i.ravel().astype(str), "n": y.ravel()})
    m1 = mixed.glmer("n ~ system + (1|item) + (1|system:seed)", d, family="poisson")
    m0 = mixed.glmer("n ~ 1 + (1|item) + (1|system:seed)", d, family="poisson")
    for m in (m0, m1):
        lap = gb.BatchLaplace(gb.GLMMDesign.of(m))
        x = _point(m, 1.1)
        dev, state = lap.value(x[None, :lap.K], x[None, lap.K:], m.objective.y[None, :], np.zeros((1, lap.d.q)))
        g, _ = lap.gradient(state)
        m.objective.u, m.objective.pred = np.zeros(lap.d.q), None
        d_ref, g_ref = m.objective.laplace(x[:lap.K], x[lap.K:], grad=True)
        assert dev[0] - 2.0 * m.objective.const.sum() == pytest.approx(d_ref, abs=1e-8 * abs(d_ref))
        np.testing.assert_allclose(g[0], g_ref, atol=1e-6 * max(1.0, np.abs(g_ref).max()))
    a = mixed.glmm_bootstrap_lrt(m0, m1, n_sim=50, seed=2)
    b = mixed.glmm_bootstrap_lrt(m0, m1, n_sim=50, seed=2)
    assert a.n_failed == 0 and a.p_value == b.p_value
    w = mixed.glmer("n ~ system + (1|item) + (1|system:seed)", d.assign(w=2.0), family="poisson", weights="w")
    with pytest.raises(mixed.MixedModelError, match="prior weights"):
        gb.GLMMDesign.of(w)


@pytest.mark.parametrize("name", ["binary", "trials"])
def test_batched_refits_reach_glmers_optimum(name):
    for m in _fits(name):
        lap = gb.BatchLaplace(gb.GLMMDesign.of(m))
        x_hat = _point(m, 1.0)
        start = _point(m, 1.2)  # away from the optimum
        y = np.repeat(m.objective.y[None, :], 3, axis=0)
        f, x, ok, _ = gb.minimize(lap, y, start, gb._hessian(lap, m.objective.y, x_hat))
        assert ok.all()
        np.testing.assert_allclose(f - 2.0 * m.objective.const.sum(), m.deviance, atol=1e-6)
        np.testing.assert_allclose(np.abs(x[:, :lap.K]), np.broadcast_to(x_hat[:lap.K], (3, lap.K)), atol=2e-3)


def test_same_seed_same_statistics_and_batches_are_independent():
    m0, m1 = _fits("trials")
    a = mixed.glmm_bootstrap_lrt(m0, m1, n_sim=60, seed=3, batch_size=25)
    b = mixed.glmm_bootstrap_lrt(m1, m0, n_sim=60, seed=3, batch_size=25)  # the order does not matter
    np.testing.assert_allclose(a.reference, b.reference, rtol=1e-9, atol=1e-9)
    plan = gb.glmm_bootstrap_plan(m0, m1, n_sim=60, seed=3, batch_size=25)
    np.testing.assert_allclose(plan.draw(2), a.reference[50:], rtol=1e-9, atol=1e-9)
    c = mixed.glmm_bootstrap_lrt(m0, m1, n_sim=60, seed=4, batch_size=25)
    assert not np.allclose(c.reference, a.reference)
    assert a.method == "parametric bootstrap LRT (GLMM, Laplace)" and a.mc_se > 0


def test_failed_refits_are_counted_not_dropped(monkeypatch):
    """A draw whose refit did not converge is left out of p, and counted in n_failed."""
    m0, m1 = _fits("trials")
    real = gb.minimize

    def flaky(lap, y, x0, Hinv0, u0=None, max_iter=gb.MAX_ITER):
        f, x, ok, u = real(lap, y, x0, Hinv0, u0, max_iter)
        ok = ok.copy()
        ok[::4] = False  # every fourth draw "did not converge"
        return f, x, ok, u

    monkeypatch.setattr(gb, "minimize", flaky)
    res = mixed.glmm_bootstrap_lrt(m0, m1, n_sim=40, seed=1, batch_size=40)
    assert res.n_failed == 10 and res.n_sim == 30
    assert np.isnan(res.reference).sum() == 10
    assert res.p_value == (1 + res.n_extreme) / 31
    assert "10 failed" in repr(res)


def test_bad_requests_are_refused():
    m0, m1 = _fits("binary")
    with pytest.raises(mixed.MixedModelError, match="n_sim"):
        mixed.glmm_bootstrap_lrt(m0, m1, n_sim=0)
    other = _fits("trials")[1]
    with pytest.raises(mixed.MixedModelError, match="same rows"):
        mixed.glmm_bootstrap_lrt(m0, other, n_sim=10)
    d = pd.read_csv(REF_DIR / REF["binary"]["data"], dtype={"seed": str, "item": str})
    probit = mixed.glmer(REF["binary"]["formula_full"], d, link="probit")
    with pytest.raises(mixed.MixedModelError, match="canonical"):
        gb.GLMMDesign.of(probit)


def test_check_separation_finds_all_correct_and_all_wrong_groups():
    d = pd.read_csv(REF_DIR / REF["binary"]["data"], dtype={"seed": str, "item": str})
    assert mixed.check_separation(d, "correct", "system").empty
    e = d.copy()
    e.loc[e["system"] == "new", "correct"] = 1
    e.loc[(e["system"] == "base") & (e["seed"] == "s0"), "correct"] = 0
    by_system = mixed.check_separation(e, "correct", "system")
    assert by_system.to_dict("records") == [{"system": "new", "n": 1000, "trials": 1000.0, "successes": 1000.0,
                                             "share": 1.0, "kind": "all correct"}]
    cells = mixed.check_separation(e, "correct", ["system", "seed"])
    assert len(cells) == 5 and set(cells["kind"]) == {"all correct", "all wrong"}
    t = pd.read_csv(REF_DIR / REF["trials"]["data"], dtype={"seed": str, "item": str})
    assert mixed.check_separation(t, ("successes", "failures"), "system").empty
    t.loc[t["system"] == "base", "successes"] = 0
    out = mixed.check_separation(t, ("successes", "failures"), "system")
    assert list(out["system"]) == ["base"] and out["kind"].iloc[0] == "all wrong"
    with pytest.raises(mixed.MixedModelError, match="not in the data"):
        mixed.check_separation(d, "score", "system")
    with pytest.raises(mixed.MixedModelError, match="between 0"):
        mixed.check_separation(d.assign(correct=2), "correct", "system")


def test_a_glmm_that_did_not_converge_says_so(monkeypatch):
    from scipy import optimize

    from vrs_helpers.mixed.models import glmm

    real = optimize.minimize

    def stopped(*args, **kwargs):
        kwargs["options"] = dict(kwargs.get("options", {}), maxiter=1)
        return real(*args, **kwargs)

    monkeypatch.setattr(glmm.optimize, "minimize", stopped)
    d = pd.read_csv(REF_DIR / REF["binary"]["data"], dtype={"seed": str, "item": str})
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        m = mixed.glmer(REF["binary"]["formula_full"], d)
    assert not m.converged and m.warnings and "did not converge" in m.warnings[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monkeypatch.setattr(glmm.optimize, "minimize", real)
        assert mixed.glmer(REF["binary"]["formula_full"], d).warnings == []
    # separation: every score of one system is 1; the optimizer stops on a ridge (log-odds ~ 100) with a
    # degenerate Hessian (no finite standard error): not converged, said, and found by check_separation
    d.loc[d["system"] == "new", "correct"] = 1
    with pytest.warns(ConvergenceWarning, match="degenerate"):
        m = mixed.glmer(REF["binary"]["formula_full"], d)
    assert not m.converged and not np.isfinite(m.fixed_effects.loc["systemnew", "se"])
    assert list(mixed.check_separation(d, "correct", "system")["system"]) == ["new"]


# --- the runs-random model with (1|system:item) (the nested pair eliminated together) and the max-T adjustment of
# the pairwise contrasts (single-step max-T, Westfall & Young 1993, on the bootstrap's own simulations)
RAND = "(1|item) + (1|system:item) + (1|system:run)"
_LOGS: dict = {}


def _log_fits(systems):
    if systems not in _LOGS:
        from vrs_helpers.book.simulation import evaluation_log

        d = evaluation_log(11, systems=systems, runs=3, items=80, family="binomial", mean=0.5, run_sd=0.35,
                           item_sd=1.0, system_item_sd=0.5)
        _LOGS[systems] = (d, mixed.glmer(f"score ~ 1 + {RAND}", d), mixed.glmer(f"score ~ system + {RAND}", d))
    return _LOGS[systems]


def _pairs(m1):
    """Every pairwise difference of the systems' fixed-effect rows (treatment coding: intercept + indicator)."""
    p = len(m1.fixed_effects)
    rows = np.vstack([np.eye(p)[0]] + [np.eye(p)[0] + np.eye(p)[j] for j in range(1, p)])
    return np.array([rows[a] - rows[b] for a in range(p) for b in range(a + 1, p)])


def test_nested_model_batched_deviance_gradient_and_refits_equal_the_engine():
    _, m0, m1 = _log_fits(3)
    for m in (m0, m1):
        lap = gb.BatchLaplace(gb.GLMMDesign.of(m))
        assert lap.blocks.plan is not None and lap.blocks.r == 4  # item with its 3 system:item levels
        x = _point(m, 1.1)
        K = lap.K
        dev, state = lap.value(x[None, :K], x[None, K:], m.objective.y[None, :], np.zeros((1, lap.d.q)))
        g, _ = lap.gradient(state)
        m.objective.u, m.objective.pred = np.zeros(lap.d.q), None
        d_ref, g_ref = m.objective.laplace(x[:K], x[K:], grad=True)
        assert dev[0] - 2.0 * m.objective.const.sum() == pytest.approx(d_ref, abs=1e-8 * abs(d_ref))
        np.testing.assert_allclose(g[0], g_ref, atol=1e-6 * max(1.0, np.abs(g_ref).max()))
        y = np.repeat(m.objective.y[None, :], 2, axis=0)
        f, _, ok, _ = gb.minimize(lap, y, _point(m, 1.2), gb._hessian(lap, m.objective.y, _point(m, 1.0)))
        assert ok.all()
        np.testing.assert_allclose(f - 2.0 * m.objective.const.sum(), m.deviance, atol=1e-6)


def test_pairwise_z_is_the_wald_z_with_the_covariance_given_theta():
    """Against V = (X'WX - X'WZ Lambda (Lambda'Z'WZ Lambda + I)^-1 Lambda'Z'WX)^-1 from one-hot Z, at the fit's
    conditional modes (computed here by Newton's method on the dense penalized objective)."""
    d, _, m1 = _log_fits(3)
    lap = gb.BatchLaplace(gb.GLMMDesign.of(m1))
    x = _point(m1, 1.0)
    D = _pairs(m1)
    z = gb.pairwise_z(lap, m1.objective.y[None, :], x[None, :], D)[0]
    K, obj = lap.K, m1.objective
    theta, beta = x[:K], x[K:]
    ZL = np.hstack([np.eye(n)[c] * t for c, n, t in zip(obj.codes, obj.sizes, theta, strict=True)])
    u = np.zeros(ZL.shape[1])
    for _ in range(50):  # the conditional modes: Newton on -2 log p(y | u) + |u|^2
        mu = 1 / (1 + np.exp(-(obj.X @ beta + ZL @ u)))
        w = obj.wt * mu * (1 - mu)
        step = np.linalg.solve(ZL.T @ (w[:, None] * ZL) + np.eye(len(u)), ZL.T @ (obj.wt * (obj.y - mu)) - u)
        u += step
        if np.abs(step).max() < 1e-12:
            break
    mu = 1 / (1 + np.exp(-(obj.X @ beta + ZL @ u)))
    w = obj.wt * mu * (1 - mu)
    C = ZL.T @ (w[:, None] * obj.X)
    V = np.linalg.inv(obj.X.T @ (w[:, None] * obj.X) - C.T @ np.linalg.solve(ZL.T @ (w[:, None] * ZL)
                                                                             + np.eye(len(u)), C))
    np.testing.assert_allclose(z, (D @ beta) / np.sqrt(np.einsum("ij,jk,ik->i", D, V, D)), rtol=1e-6)
    # close to the Wald z of the Hessian-based covariance (glmer's default) that the contrasts table shows
    se_h = np.sqrt(np.einsum("ij,jk,ik->i", D, m1.vcov.to_numpy(), D))
    np.testing.assert_allclose(np.abs(z), np.abs(D @ beta / se_h), rtol=0.1)


def test_max_t_adjusted_pairwise_p_values():
    _, m0, m1 = _log_fits(3)
    D = _pairs(m1)
    res = mixed.glmm_bootstrap_lrt(m0, m1, n_sim=60, seed=2, batch_size=25, pairs=D)
    again = mixed.glmm_bootstrap_lrt(m0, m1, n_sim=60, seed=2, batch_size=25, pairs=D)
    plain = mixed.glmm_bootstrap_lrt(m0, m1, n_sim=60, seed=2, batch_size=25)
    np.testing.assert_array_equal(res.pairwise_p, again.pairwise_p)  # seeded
    np.testing.assert_allclose(res.reference, plain.reference, rtol=1e-9, atol=1e-9)  # the same LRT draws
    assert plain.pairwise_p is None and res.z_simulated.shape == (60, 3) and res.n_failed == 0
    ok = np.isfinite(res.reference)
    zs, obs = np.abs(res.z_simulated[ok]), np.abs(res.z_pairs)
    # the definition: (1 + #{b: max_j |z*_bj| >= |z_j|}) / (1 + B)
    np.testing.assert_allclose(res.pairwise_p, (1 + (zs.max(axis=1)[None, :] >= obs[:, None]).sum(axis=1))
                               / (1 + ok.sum()))
    own = (1 + (zs >= obs[None, :]).sum(axis=0)) / (1 + ok.sum())  # each pair's own bootstrap p
    assert np.all(res.pairwise_p >= own)
    order = np.argsort(-obs)  # monotone: a larger |z| never gets a larger adjusted p
    assert np.all(np.diff(res.pairwise_p[order]) >= 0)
    # one pair (two systems): the adjustment is the bootstrap of |z| itself
    _, n0, n1 = _log_fits(2)
    two = mixed.glmm_bootstrap_lrt(n0, n1, n_sim=40, seed=3, pairs=_pairs(n1))
    z2 = np.abs(two.z_simulated[np.isfinite(two.reference), 0])
    assert two.pairwise_p[0] == (1 + (z2 >= abs(two.z_pairs[0])).sum()) / (1 + len(z2))
    with pytest.raises(mixed.MixedModelError, match="one column per fixed effect"):
        mixed.glmm_bootstrap_lrt(m0, m1, n_sim=5, pairs=np.ones((1, 2)))


def test_compare_systems_binary_three_systems_uses_the_max_t_adjustment():
    from vrs_helpers.book.glrt import compare_systems

    d, _, _ = _log_fits(3)
    c = compare_systems(d, "score", "system", "item", replications=["run"], family="binomial", n_sim=40, seed=4,
                        test="bootstrap")
    assert c.adjust == "bootstrap max-|z|" and c.system_item
    np.testing.assert_allclose(c.contrasts["p_value"], c.test.pairwise_p)
    np.testing.assert_allclose(np.abs(c.contrasts["z_given_theta"]), np.abs(c.test.z_pairs))
    assert list(c.contrasts["contrast"]) == ["S0 - S1", "S0 - S2", "S1 - S2"]
    assert any("Westfall & Young" in n for n in c.notes)
    two = compare_systems(_log_fits(2)[0], "score", "system", "item", replications=["run"], family="binomial",
                          n_sim=20, seed=4, test="bootstrap")
    assert two.adjust == "tukey" and "z_given_theta" not in two.contrasts
    chisq = compare_systems(d, "score", "system", "item", replications=["run"], family="binomial", test="chisq")
    assert chisq.adjust == "tukey"  # the max-T needs the bootstrap's simulations


def test_workers_give_the_same_numbers():
    """The batches run in forked processes (VRS_WORKERS, local_workers) with their own generators: one process or
    two, the same simulated statistics and pairwise z, in the same order."""
    _, m0, m1 = _log_fits(3)
    plan = gb.glmm_bootstrap_plan(m0, m1, n_sim=40, seed=5, batch_size=10, pairs=_pairs(m1))
    one, two = plan.run(workers=1), plan.run(workers=2)
    np.testing.assert_array_equal(one.reference, two.reference)
    np.testing.assert_array_equal(one.z_simulated, two.z_simulated)


def test_bootstrap_intervals_decide_as_the_adjusted_p():
    """The pairs' intervals use bootstrap_critical: adjusted p < alpha exactly when the interval excludes 0, for
    p = (1 + #{max |z*| >= |z|}) / (1 + B); checked on the bootstrap's own draws at several alphas."""
    from vrs_helpers.book.glrt import bootstrap_critical, compare_systems

    d, _, _ = _log_fits(3)
    c = compare_systems(d, "score", "system", "item", replications=["run"], family="binomial", n_sim=99, seed=4,
                        test="bootstrap")
    test = c.test
    top = test.max_abs_z[np.isfinite(test.max_abs_z)]
    for alpha in (0.05, 0.1, 0.2):
        q = bootstrap_critical(test, alpha)
        grid = np.r_[np.sort(top), np.sort(top) + 1e-6, np.sort(top) - 1e-6]
        p = (1 + (top[None, :] >= grid[:, None] - 1e-7 * (1 + grid[:, None])).sum(axis=1)) / (1 + len(top))
        away = np.abs(grid - q) > 1e-6  # the draws' tolerance band around q itself is left out
        assert np.array_equal((p < alpha)[away], (grid > q)[away]) and (p < alpha).any() and (p >= alpha).any()
    excl = (c.contrasts["lower"] > 0) | (c.contrasts["upper"] < 0)
    assert np.array_equal(excl.to_numpy(), (c.contrasts["p_value"] < 0.05).to_numpy())
    assert np.isnan(bootstrap_critical(mixed.glmm_bootstrap_lrt(*_log_fits(3)[1:], n_sim=10, seed=1), 0.05))


def test_a_separated_system_gives_no_pairwise_z_and_no_crash():
    """Issue 39: three systems, nearly every score correct (the type-I benchmark's separation cell, log 3: S0 and
    S2 all correct). The full model's Schur complement is singular there; the bootstrap used to raise
    LinAlgError. Now the pairs without a z get no adjusted p (NaN), and the max-T reference of a draw is the
    largest |z| among the pairs that have one (the definition, written out here on a hand-made result)."""
    from vrs_helpers.book.glrt import compare_systems
    from vrs_helpers.book.simulation import evaluation_log

    log = evaluation_log(np.random.default_rng(np.random.SeedSequence([2028, 3181753635, 3]).spawn(2)[0]),
                         systems=3, family="binomial", mean=5.0, run_sd=0.35, item_sd=0.5, items=30,
                         run_labels="own")
    share = log.groupby("system", observed=True)["score"].mean()
    assert share["S0"] == 1.0 and share["S2"] == 1.0 and share["S1"] < 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compare_systems(log, "score", "system", "item", replications=["run"], family="binomial", n_sim=19,
                            seed=1)
    assert len(c.contrasts) == 3 and 0 <= c.test.p_value <= 1
    res = gb.GLMMBootstrapResult(chi2=1.0, df=2, p_value=0.5, p_chisq=0.6, n_sim=3, n_extreme=1, n_failed=0, seed=0,
                                 formula0="", formula1="", reference=np.array([0.5, 2.0, 1.0]),
                                 z_pairs=np.array([np.nan, 1.5, -2.5]),
                                 z_simulated=np.array([[np.nan, 1.0, 3.0], [np.nan, np.nan, np.nan],
                                                       [0.5, -2.0, np.nan]]))
    np.testing.assert_array_equal(res.max_abs_z, [3.0, np.nan, 2.0])
    # draws with a max: 3.0 and 2.0; |z| 1.5: both >= -> 3/3; |z| 2.5: one -> 2/3
    np.testing.assert_allclose(res.pairwise_p, [np.nan, 3 / 3, 2 / 3])
