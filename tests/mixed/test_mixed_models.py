"""The model objects (issue 27): LinearMixedModel and GeneralizedLinearMixedModel on one MixedModel base with an
OptSummary, one likelihood ratio test for both, the families and links (against statsmodels' independent
implementation), the finite differences (against closed forms), the theta order and the level tables.

Tolerances: families against statsmodels' links, variances and deviance residuals and scipy's binomial / Poisson
log-likelihoods at 1e-10 relative (the same closed forms, different code); finite
differences against closed forms at the truncation error of the stated step (central: h^2 |f'''| / 6, about 1e-7
for h = 1e-3 on functions of size 1; forward: h |f''| / 2); quantities of one fit that must be the same number
(final objective and deviance, theta and optsum.final) exactly or to 1e-12.
"""

import math
import pickle

import numpy as np
import pandas as pd
import pytest
import statsmodels.genmod.families as smf
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from vrs_helpers import mixed
from vrs_helpers.mixed.likelihood import families
from vrs_helpers.mixed.structure import numdiff
from vrs_helpers.mixed.structure.design import intern, lower_triangle

# ------------------------------------------------------------------------------------------------ families

SM = {("binomial", "logit"): smf.Binomial(link=smf.links.Logit()),
      ("binomial", "probit"): smf.Binomial(link=smf.links.Probit()),
      ("poisson", "log"): smf.Poisson(link=smf.links.Log())}


def _draw(key, rng, n=200):
    eta = rng.normal(0.0, 1.5, n)
    wt = rng.integers(1, 6, n).astype(float)
    if key[0] == "binomial":
        mu = SM[key].link.inverse(eta)
        y = rng.binomial(wt.astype(int), mu) / wt
    else:
        wt = np.ones(n)
        y = rng.poisson(np.exp(eta)).astype(float)
    return eta, y, wt


@pytest.mark.parametrize("key", list(SM))
def test_families_agree_with_statsmodels(key):
    rng = np.random.default_rng(7)
    fam, sm = families.get(*key), SM[key]
    eta, y, wt = _draw(key, rng)
    mu = fam.mu(eta)
    np.testing.assert_allclose(mu, sm.link.inverse(eta), rtol=1e-12)
    np.testing.assert_allclose(fam.link.mu_eta(eta, mu), sm.link.inverse_deriv(eta), rtol=1e-12)
    np.testing.assert_allclose(fam.link.dlog_mu_eta(eta, mu), sm.link.inverse_deriv2(eta) / sm.link.inverse_deriv(eta),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fam.variance(mu), sm.variance(mu), rtol=1e-12)
    np.testing.assert_allclose(fam.deviance_residuals(y, mu, wt), sm.resid_dev(y, mu, var_weights=wt),
                               rtol=1e-10, atol=1e-12)
    ll = -0.5 * fam.m2loglik(y, wt, mu, fam.loglik_constant(y, wt))  # lme4's: with the binomial coefficient
    ref = (stats.binom.logpmf(np.round(wt * y), wt, mu) if key[0] == "binomial" else stats.poisson.logpmf(y, mu))
    np.testing.assert_allclose(ll, ref, rtol=1e-10)
    if key[0] == "binomial":  # the 0/1 shortcut: one logarithm per row
        yb = (y > 0.5).astype(float)
        ones = np.ones_like(yb)
        np.testing.assert_allclose(fam.m2loglik(yb, ones, mu, fam.loglik_constant(yb, ones), binary=True),
                                   fam.m2loglik(yb, ones, mu, fam.loglik_constant(yb, ones)), rtol=1e-12)


@pytest.mark.parametrize("key", list(SM))
def test_weights_and_their_slopes_are_derivatives_of_the_score(key):
    """Fisher weight w = wt mu'^2 / V, r / (y - mu) = wt mu' / V; the observed weight -dr/d eta and dw/d eta by
    central differences of r and w (h = 1e-6: error ~1e-9 relative)."""
    rng = np.random.default_rng(3)
    fam = families.get(*key)
    eta, y, wt = _draw(key, rng, 50)
    eta = np.clip(eta, -3, 3)

    def fisher(e):
        mu = fam.mu(e)
        return fam.weights(e, mu, wt)

    w, s = fisher(eta)
    mu = fam.mu(eta)
    d, v = fam.link.mu_eta(eta, mu), fam.variance(mu)
    np.testing.assert_allclose(w, wt * d * d / v, rtol=1e-12)
    np.testing.assert_allclose(s, wt * d / v, rtol=1e-12)
    observed, dw = fam.slopes(eta, mu, y, wt)
    h = 1e-6
    r_up, r_dn = fisher(eta + h)[1] * (y - fam.mu(eta + h)), fisher(eta - h)[1] * (y - fam.mu(eta - h))
    np.testing.assert_allclose(observed, -(r_up - r_dn) / (2 * h), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dw, (fisher(eta + h)[0] - fisher(eta - h)[0]) / (2 * h), rtol=1e-6, atol=1e-7)


def test_family_lookup_links_and_latent_residuals():
    assert families.get("Binomial") == families.Binomial() and families.get("binomial").link.name == "logit"
    assert families.get("poisson").canonical and not families.get("binomial", "probit").canonical
    assert families.get("gaussian").dispersion and not families.get("poisson").dispersion
    fam = families.get("binomial", "probit")
    assert families.get(fam) is fam and str(fam) == "binomial"
    # the variance of the standard logistic distribution is pi^2 / 3; of the standard normal, 1
    assert families.get("binomial").latent_residual_variance() == pytest.approx(math.pi ** 2 / 3)
    assert fam.latent_residual_variance() == 1.0
    with pytest.raises(mixed.MixedModelError, match="latent"):
        families.get("poisson").latent_residual_variance()
    with pytest.raises(mixed.MixedModelError, match="family must be one of"):
        families.get("gamma")
    with pytest.raises(mixed.MixedModelError, match="link"):
        families.get("poisson", "logit")
    with pytest.raises(mixed.MixedModelError, match="already has"):
        families.get(fam, "logit")


def test_glmer_refuses_a_family_with_a_scale():
    d = pd.DataFrame({"y": np.arange(20.0), "g": list("ab") * 10})
    with pytest.raises(mixed.MixedModelError, match="mixed.fit"):
        mixed.glmer("y ~ 1 + (1|g)", d, family="gaussian")


# ------------------------------------------------------------------------------------------------ numdiff

def _f(x):
    """f(x) = exp(x0) sin(x1) + x0 x1^2 (the last axis is the variable)."""
    return np.exp(x[..., 0]) * np.sin(x[..., 1]) + x[..., 0] * x[..., 1] ** 2


def _grad(x):
    return np.stack([np.exp(x[..., 0]) * np.sin(x[..., 1]) + x[..., 1] ** 2,
                     np.exp(x[..., 0]) * np.cos(x[..., 1]) + 2 * x[..., 0] * x[..., 1]], axis=-1)


def _hess(x):
    a, b = x[..., 0], x[..., 1]
    e = np.exp(a)
    return np.stack([np.stack([e * np.sin(b), e * np.cos(b) + 2 * b], -1),
                     np.stack([e * np.cos(b) + 2 * b, -e * np.sin(b) + 2 * a], -1)], -2)


@settings(max_examples=30, derandomize=True, deadline=None, database=None)
@given(a=st.floats(-1, 1), b=st.floats(-2, 2))
def test_central_differences_match_the_closed_forms(a, b):
    x = np.array([a, b])
    h = numdiff.steps(x, 1e-3, 1.0)
    g, H = numdiff.derivatives(_f, x, h)
    np.testing.assert_allclose(g, _grad(x), atol=1e-6)
    np.testing.assert_allclose(H, _hess(x), atol=1e-5)
    np.testing.assert_allclose(numdiff.jacobian(_f, x, h), _grad(x), atol=1e-6)
    np.testing.assert_allclose(numdiff.jacobian(_grad, x, h), _hess(x).T, atol=1e-5)
    # Richardson cancels the h^2 term: an order of magnitude closer at the same step
    rich = numdiff.richardson(lambda s: numdiff.hessian(_f, x, s), h)
    np.testing.assert_allclose(rich, _hess(x), atol=1e-7)
    # forward differences of the gradient at one coordinate: error h |f'''| / 2 ~ 1e-3
    fwd = numdiff.jacobian(_grad, x, h, f0=_grad(x), at=[1])
    np.testing.assert_allclose(fwd[0], _hess(x)[1], atol=5e-3)


def test_batched_derivatives_equal_the_single_ones():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (5, 2))
    h = numdiff.steps(X, 1e-3, 0.5)
    g, H = numdiff.derivatives(_f, X, h)
    for i in range(len(X)):
        gi, Hi = numdiff.derivatives(_f, X[i], h[i])
        np.testing.assert_array_equal(g[i], gi)
        np.testing.assert_array_equal(H[i], Hi)


# ------------------------------------------------------------------------------------------------ level tables

def test_intern_keeps_codes_and_appends_new_values_in_order():
    index, values = {}, []
    np.testing.assert_array_equal(intern(index, values, ["b", "a", "b"]), [0, 1, 0])
    np.testing.assert_array_equal(intern(index, values, ["c", "a"]), [2, 1])
    assert values == ["b", "a", "c"] and index == {"b": 0, "a": 1, "c": 2}
    assert len(intern(index, values, [])) == 0


def test_lower_triangle_is_column_major():
    rows, cols = lower_triangle(3)
    assert list(zip(rows, cols, strict=True)) == [(0, 0), (1, 0), (2, 0), (1, 1), (2, 1), (2, 2)]


# ------------------------------------------------------------------------------------------------ model objects

def _data(seed=1, n_big=30, n_small=6, reps=4):
    rng = np.random.default_rng(seed)
    rows = [(f"b{i}", f"s{j}", r) for i in range(n_big) for j in range(n_small) for r in range(reps)
            if rng.random() < 0.8]
    d = pd.DataFrame(rows, columns=["big", "small", "rep"])
    d["x"] = rng.normal(size=len(d))
    d["sys"] = np.where(rng.random(len(d)) < 0.5, "A", "B")
    ub = rng.normal(0, 1.0, n_big)[d["big"].str[1:].astype(int)]
    us = rng.normal(0, 0.7, n_small)[d["small"].str[1:].astype(int)]
    slope = rng.normal(0, 0.5, n_big)[d["big"].str[1:].astype(int)]
    d["y"] = 1.0 + 0.5 * (d["sys"] == "B") + (0.3 + slope) * d["x"] + ub + us + rng.normal(0, 1, len(d))
    d["hit"] = (d["y"] + rng.logistic(size=len(d)) > 1.5).astype(int)
    return d


def test_a_model_is_built_then_fitted_in_place():
    d = _data()
    m = mixed.LinearMixedModel("y ~ sys + x + (1|small) + (1 + x|big)", d)
    assert not m.is_fitted and m.nobs == len(d) and "not fitted" in repr(m)
    with pytest.raises(mixed.MixedModelError, match="not fitted"):
        m.loglik  # noqa: B018
    with pytest.raises(mixed.MixedModelError, match="fit"):
        mixed.lrt(m, m)
    assert m.fit() is m and m.is_fitted
    assert isinstance(m, mixed.MixedModel) and isinstance(m, mixed.MixedModelResult)
    # lme4 orders the terms by decreasing number of levels: big (30) before small (6)
    assert list(m.theta.index) == ["big.(Intercept)", "big.x.(Intercept)", "big.x", "small.(Intercept)"]
    o = m.optsum
    np.testing.assert_array_equal(o.final, m.theta.to_numpy())
    assert o.fmin == pytest.approx(m.deviance, rel=1e-12) and o.converged == m.converged
    assert o.feval == m.n_evaluations and m.optimizer_message == o.message
    np.testing.assert_array_equal(o.lowerbd, [0, -np.inf, 0, 0])
    np.testing.assert_array_equal(o.initial, [1, 0, 1, 1])  # lme4's start for random slopes
    assert "OptSummary" in repr(o)
    # the base's quantities, by their definitions
    assert m.n_params == 3 + 4 + 1 and m.dof_residual == len(d) - 8
    assert m.aic == pytest.approx(-2 * m.loglik + 2 * 8)
    assert m.bic == pytest.approx(-2 * m.loglik + math.log(len(d)) * 8)
    pd.testing.assert_series_equal(m.coef, m.fixed_effects["estimate"])
    pd.testing.assert_series_equal(m.fixef, m.coef)
    # the short forms build the same model
    f = mixed.fit("y ~ sys + x + (1|small) + (1 + x|big)", d)
    assert f.loglik == m.loglik and type(f) is mixed.LinearMixedModel
    assert mixed.fit_stats(m.stats).loglik == m.loglik and mixed.fit_stats(m.stats, "ML").method == "ML"
    # theta in the internal (formula) order and back
    np.testing.assert_array_equal(m.stats.theta_to_lme4(m.stats.theta_from_lme4(m.theta)), m.theta.to_numpy())
    assert m.stats.theta_sizes == [1, 3]
    restored = pickle.loads(pickle.dumps(m))
    assert restored.loglik == m.loglik and restored.optsum.feval == m.optsum.feval


def test_glmm_object_and_one_lrt_for_both_kinds():
    d = _data(2)
    g1 = mixed.GeneralizedLinearMixedModel("hit ~ sys + (1|big) + (1|small)", d, family="binomial")
    assert not g1.is_fitted and g1.link == "logit"
    g1.fit()
    g0 = mixed.glmer("hit ~ 1 + (1|big) + (1|small)", d)
    assert isinstance(g1, mixed.MixedModel) and isinstance(g1, mixed.GLMMResult)
    assert g1.n_params == 2 + 2 and g1.dof_residual == len(d) - 4  # lme4's df: no residual scale
    np.testing.assert_array_equal(np.abs(g1.optsum.final[:2]), g1.theta.to_numpy())
    np.testing.assert_array_equal(g1.optsum.final[2:], g1.coef.to_numpy())
    assert g1.optsum.fmin == g1.deviance and g1.optsum.feval == g1.n_evaluations
    t = mixed.lrt(g1, g0)
    assert type(t) is mixed.LRTResult and t.method == "GLRT (chi-square, Laplace)"
    assert t.chi2 == pytest.approx(2 * (g1.loglik - g0.loglik)) and t.df == 1
    assert t.formulas == (g0.formula, g1.formula) and t.logliks == (g0.loglik, g1.loglik)
    assert t.as_dict() == {"chi2": t.chi2, "df": 1, "p_value": t.p_value}
    lm1, lm0 = mixed.fit("y ~ sys + (1|big) + (1|small)", d), mixed.fit("y ~ 1 + (1|big) + (1|small)", d)
    lt = mixed.lrt(lm0, lm1)
    assert type(lt) is mixed.LRTResult and list(lt.to_frame().columns) == list(t.to_frame().columns)
    assert lt.refitted_ml and lt.method == "GLRT (chi-square)"
    with pytest.raises(mixed.MixedModelError, match="one kind"):
        mixed.lrt(lm0, g1)
    p1 = mixed.glmer("hit ~ sys + (1|big) + (1|small)", d, link="probit")
    with pytest.raises(mixed.MixedModelError, match="same family"):
        mixed.lrt(g0, p1)
    with pytest.raises(mixed.MixedModelError, match="not nested"):
        mixed.lrt(g1, mixed.glmer("hit ~ x + (1|big) + (1|small)", d))
