"""Kenward-Roger F tests of fixed effects (vrs_helpers.mixed.inference.kenward_roger, ddf="kenward-roger").

(a) pbkrtest 0.5.2 (through lmerTest 3.1-3's anova and pbkrtest's KRmodcomp; tests/reference/small_sample.R and
    kenward_roger.R): F, NumDF, DenDF and p to 1e-4 relative (issue 20's bar; the remaining differences come from
    the two optimizers stopping at slightly different REML optima: logLik agrees to ~1e-9, F to ~1e-5), and the
    adjusted covariance Phi_A;
(b) an independent dense N x N computation written here, a transcription of pbkrtest's vcovAdj / .KR_adjust with
    Sigma, the G_i, P_i, Q_ij and the traces built from indicator matrices, on random small designs (hypothesis):
    crossed, nested, correlated and uncorrelated random slopes, unbalanced;
(c) the closed form on balanced designs: with 2 systems x n runs x m items, score ~ system + (1|item) +
    (1|system:run) and an interior REML fit, Kenward-Roger's F is MS_system / MS_run(system) on (1, 2(n - 1)) df.
    One such design has 10^5 rows, where any N x N matrix (80 GB) would not fit in memory.
"""

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, assume, given, note, settings
from hypothesis import strategies as st
from scipy import stats

from vrs_helpers import mixed
from vrs_helpers.book.simulation import evaluation_log
from vrs_helpers.mixed.inference import ddf, kenward_roger

REF_DIR = Path(__file__).parent.parent / "reference"
SMALL = json.loads((REF_DIR / "small_sample_lmertest.json").read_text())
KR = json.loads((REF_DIR / "kenward_roger_pbkrtest.json").read_text())
FILES = {"three_seeds": ("small_sample_three_seeds.csv.gz", ["system", "seed", "item"]),
         "unbalanced": ("small_sample_unbalanced.csv.gz", ["system", "seed", "item"]),
         "machines": ("machines.csv.gz", ["Worker", "Machine"]),
         "sleepstudy_intercept": ("sleepstudy.csv.gz", ["Subject"]),
         "sleepstudy_slopes": ("sleepstudy.csv.gz", ["Subject"]),
         "sleepstudy_unbalanced": ("kr_sleepstudy_unbalanced.csv.gz", ["Subject"]),
         "machines_nested_unbalanced": ("kr_machines_unbalanced.csv.gz", ["Worker", "Machine"]),
         "slopes_interaction": ("kr_slopes.csv.gz", ["system", "seed", "item"]),
         "slopes_uncorrelated": ("kr_slopes.csv.gz", ["system", "seed", "item"])}
REL = 1e-4  # issue 20: F, df and p to 1e-4 relative of lmerTest / pbkrtest


def _data(name):
    path, factors = FILES[name]
    return pd.read_csv(REF_DIR / path, dtype={f: str for f in factors})


def _fit(name, formula, data=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mixed.fit(formula, _data(name) if data is None else data)


# ------------------------------------------------------------------------------------- (a) against pbkrtest

@pytest.mark.parametrize("name", [n for n, m in SMALL["models"].items() if "Kenward-Roger" in m])
def test_anova_equals_pbkrtest(name):
    ref = SMALL["models"][name]
    m = _fit(name, ref["formula"])
    assert m.loglik == pytest.approx(ref["logLik"], abs=1e-6)  # the same REML optimum
    ours = m.anova(ddf="kenward-roger").set_index("term")
    theirs = ref["Kenward-Roger"]
    assert set(ours.index) == set(theirs)
    for term, r in theirs.items():
        assert ours.loc[term, "F"] == pytest.approx(r["F"], rel=REL)
        assert ours.loc[term, "num_df"] == r["NumDF"]
        assert ours.loc[term, "den_df"] == pytest.approx(r["DenDF"], rel=REL)
        assert ours.loc[term, "p_value"] == pytest.approx(r["p"], rel=REL)
        assert ours.loc[term, "method"] == "F test, Kenward-Roger df"


@pytest.mark.parametrize("name", list(KR["models"]))
def test_contrasts_and_adjusted_vcov_equal_pbkrtest(name):
    """Explicit L (term-wise, a single contrast, rows mixing terms) on unbalanced designs with random slopes, nested
    terms and a fixed interaction: pbkrtest's KRmodcomp (F, unscaled F, scale lambda, df, p) and vcovAdj; lmerTest's
    Satterthwaite F for the last L of each model (one or two rows, across terms)."""
    ref = KR["models"][name]
    m = _fit(name, ref["formula"])
    assert m.nobs == ref["nobs"]
    assert m.loglik == pytest.approx(ref["logLik"], abs=1e-6)
    names = list(m.fixed_effects.index)
    assert names == list(ref["fixef"])
    adj = kenward_roger.adjustment(m)
    theirs = np.array(ref["vcov_adjusted"])
    scale = np.sqrt(np.outer(np.diag(theirs), np.diag(theirs)))  # entries relative to their SEs' product
    assert np.max(np.abs(adj.vcov_adjusted - theirs) / scale) < REL
    for test, r in ref["tests"].items():
        L = np.array([[row.get(n, 0.0) for n in names] for row in r["L"]])
        k = kenward_roger.f_test(adj, L)
        assert (k.num_df, k.den_df, k.F, k.F_unscaled, k.scale, k.p_value) == (
            r["KR"]["NumDF"], pytest.approx(r["KR"]["DenDF"], rel=REL), pytest.approx(r["KR"]["F"], rel=REL),
            pytest.approx(r["KR"]["F_unscaled"], rel=REL), pytest.approx(r["KR"]["scale"], rel=REL),
            pytest.approx(r["KR"]["p"], rel=REL)), test
        t = m.test(L, ddf="kenward-roger", term=test)
        # the same computation; m.test runs it under one BLAS thread (ddf.adjustment), this call under the
        # library's default: the products' summation order may differ in the last bits (1e-12)
        assert (t.F, t.den_df, t.p_value) == (pytest.approx(k.F, rel=1e-12), pytest.approx(k.den_df, rel=1e-12),
                                              pytest.approx(k.p_value, rel=1e-12))
        if test != list(ref["tests"])[-1]:
            continue  # Satterthwaite's numerical Hessian takes seconds per contrast: the last L of each model
        s = m.test(L, ddf="satterthwaite")
        assert (s.num_df, s.den_df, s.F, s.p_value) == (
            r["Satterthwaite"]["NumDF"], pytest.approx(r["Satterthwaite"]["DenDF"], rel=REL),
            pytest.approx(r["Satterthwaite"]["F"], rel=REL), pytest.approx(r["Satterthwaite"]["p"], rel=REL)), test


# ---------------------------------------------------------------------------- (b) a dense N x N computation

def dense_kr(X, Gs, gamma, beta, L):
    """pbkrtest 0.5.2's vcovAdj_internal and .KR_adjust, transcribed with dense numpy matrices (N x N)."""
    Sigma = sum(g * G for g, G in zip(gamma, Gs, strict=True))
    Si = np.linalg.inv(Sigma)
    Phi = np.linalg.inv(X.T @ Si @ X)
    n = len(Gs)
    TT = Si @ X
    HH = [G @ Si for G in Gs]
    OO = [H @ X for H in HH]
    PP = [-(Oi.T @ TT) for Oi in OO]
    QQ = [[OO[i].T @ Si @ OO[j] for j in range(n)] for i in range(n)]
    IE2 = np.array([[np.sum(HH[i].T * HH[j]) - 2 * np.sum(Phi * QQ[i][j]) + np.sum((Phi @ PP[i]) * (PP[j] @ Phi))
                     for j in range(n)] for i in range(n)])
    if np.min(np.abs(np.linalg.eigvals(IE2))) > 1e-10:
        WW = 2 * np.linalg.inv(IE2)
    else:
        WW = 2 * np.linalg.pinv(IE2, rcond=math.sqrt(np.finfo(float).eps))
    UU = sum(WW[i, j] * (QQ[i][j] - PP[i] @ Phi @ PP[j]) for i in range(n) for j in range(n))
    PhiA = Phi + 2 * Phi @ UU @ Phi
    Theta = L.T @ np.linalg.solve(L @ Phi @ L.T, L)
    u = [Theta @ Phi @ P @ Phi for P in PP]
    A1 = sum(WW[i, j] * np.trace(u[i]) * np.trace(u[j]) for i in range(n) for j in range(n))
    A2 = sum(WW[i, j] * np.sum(u[i] * u[j].T) for i in range(n) for j in range(n))
    q = np.linalg.matrix_rank(L)
    B = (A1 + 6 * A2) / (2 * q)
    g = ((q + 1) * A1 - (q + 4) * A2) / ((q + 2) * A2)
    d = 3 * q + 2 * (1 - g)
    c1, c2, c3 = g / d, (q - g) / d, (q + 2 - g) / d
    rho = ((1 - A2 / q) / (1 - c2 * B)) ** 2 * (1 + c1 * B) / (1 - c3 * B) / q
    df2 = 4 + (q + 2) / (q * rho - 1)
    scale = 1.0 if abs(df2 - 2) < 0.01 else df2 * (1 - A2 / q) / (df2 - 2)
    Lb = L @ beta
    F = scale * float(Lb @ np.linalg.solve(L @ PhiA @ L.T, Lb)) / q
    return PhiA, F, df2, stats.f.sf(F, q, df2)


KINDS = {  # formula; grouping column of each random group name
    "crossed": "y ~ f + x + (1|a) + (1|b)",
    "nested": "y ~ f + x + (1|a/b)",
    "slopes": "y ~ f + x + (1 + x|a) + (1|b)",
    "uncorrelated": "y ~ x + f + (x||a) + (1|b)",
}


def _design(kind, n_a, n_b, reps, sd, drop, seed):
    rng = np.random.default_rng(seed)
    a = np.repeat(np.arange(n_a), n_b * reps)
    b = np.tile(np.repeat(np.arange(n_b), reps), n_a)
    d = pd.DataFrame({"a": [f"a{i}" for i in a],
                      "b": [f"b{i}" for i in (b if kind != "nested" else a * n_b + b)]})
    d["f"] = rng.choice(["p", "q", "r"], len(d))
    d["x"] = np.round(rng.normal(0, 1, len(d)), 3)
    ua, ub, sa = rng.normal(0, sd[0], n_a * n_b), rng.normal(0, sd[1], n_a * n_b), rng.normal(0, sd[2], n_a)
    codes_a, codes_b = pd.factorize(d["a"])[0], pd.factorize(d["b"])[0]
    d["y"] = (1.0 + 0.3 * (d["f"] == "q") + 0.2 * d["x"] + ua[codes_a] + ub[codes_b] + sa[codes_a] * d["x"]
              + rng.normal(0, 1, len(d)))
    return d[rng.random(len(d)) > drop].reset_index(drop=True)


def _dense_parts(m, d):
    """X (treatment coding, R's column names and order), the G_i of pbkrtest's parameters and their values, from
    the rows and the fit's VarCorr table (grp, var1, var2, vcov) only."""
    cols = {"(Intercept)": np.ones(len(d)), "x": d["x"].to_numpy(float)}
    for lev in sorted(d["f"].unique())[1:]:
        cols[f"f{lev}"] = (d["f"] == lev).to_numpy(float)
    X = np.column_stack([cols[n] for n in m.fixed_effects.index])

    def z(grp, var):
        col = grp.split(".")[0]
        key = d[col] if ":" not in col else d[col.split(":")[0]] + ":" + d[col.split(":")[1]]
        Z = pd.get_dummies(key).to_numpy(float)
        return Z if var == "(Intercept)" else Z * d[var].to_numpy(float)[:, None]

    Gs, gamma = [], []
    for grp, v1, v2, vc in m.varcorr[["grp", "var1", "var2", "vcov"]].itertuples(index=False):
        if grp == "Residual":
            Gs.append(np.eye(len(d)))
        elif v2 is None or pd.isna(v2):
            Gs.append(z(grp, v1) @ z(grp, v1).T)
        else:
            Gs.append(z(grp, v1) @ z(grp, v2).T + z(grp, v2) @ z(grp, v1).T)
        gamma.append(vc)
    return X, Gs, gamma


SETTINGS = dict(derandomize=True, deadline=None, database=None, phases=(Phase.explicit, Phase.generate),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
# Tolerance of (b): the engine and the dense transcription evaluate one formula at the same variance parameters;
# they differ by rounding only (measured < 1e-13 relative on 29 designs of this generator), so 1e-9 relative.
DENSE_REL = 1e-9


@settings(max_examples=25, **SETTINGS)
@given(kind=st.sampled_from(list(KINDS)), n_a=st.integers(3, 7), n_b=st.integers(2, 5), reps=st.integers(2, 4),
       sd=st.tuples(*[st.sampled_from([0.0, 0.5, 1.5])] * 3), drop=st.sampled_from([0.0, 0.2, 0.4]),
       seed=st.integers(0, 2**31))
def test_equals_a_dense_computation(kind, n_a, n_b, reps, sd, drop, seed):
    d = _design(kind, n_a, n_b, reps, sd, drop, seed)
    assume(d["a"].nunique() >= 3 and d["b"].nunique() >= 2 and d["f"].nunique() == 3 and 40 <= len(d) <= 300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            m = mixed.fit(KINDS[kind], d)
        except mixed.MixedModelError:
            assume(False)
    note(f"{KINDS[kind]}, n={len(d)}, theta={m.theta.round(4).to_dict()}")
    X, Gs, gamma = _dense_parts(m, d)
    beta = m.fixed_effects["estimate"].to_numpy()
    rng = np.random.default_rng(seed)
    Ls = [np.eye(X.shape[1])[cols] for cols in ddf.term_columns(m).values()] + [rng.normal(size=(2, X.shape[1]))]
    adj = kenward_roger.adjustment(m)
    for L in Ls:
        PhiA, F, df2, p = dense_kr(X, Gs, gamma, beta, L)
        scale = np.sqrt(np.outer(np.diag(PhiA), np.diag(PhiA)))
        assert np.max(np.abs(adj.vcov_adjusted - PhiA) / scale) < DENSE_REL
        t = kenward_roger.f_test(adj, L)
        assert (t.F, t.den_df, t.p_value) == (pytest.approx(F, rel=DENSE_REL), pytest.approx(df2, rel=DENSE_REL),
                                              pytest.approx(p, rel=DENSE_REL, abs=1e-12))


# ----------------------------------------------------------------------------- (c) balanced: the exact F test

def _anova_f(d, n, m):
    """MS_system / MS_run(system) from the cell means (2 systems, n runs each, m items)."""
    run_means = d.groupby(["system", "run"], observed=True)["score"].mean()
    sys_means = d.groupby("system", observed=True)["score"].mean()
    grand = d["score"].mean()
    ms_sys = m * n * float(((sys_means - grand) ** 2).sum()) / 1
    dev = run_means - sys_means.reindex(run_means.index.get_level_values("system")).to_numpy()
    ms_run = m * float((dev ** 2).sum()) / (2 * (n - 1))
    return ms_sys / ms_run


# Tolerance: KR's F and df are exact here at the REML optimum; the optimizer's theta is within ~1e-6 of it, and
# F follows theta at first order (sigma^2 + m sigma_run^2 is what F divides by), so 1e-5 relative.
BALANCED_REL = 1e-5


@settings(max_examples=12, **SETTINGS)
@given(n=st.integers(2, 6), m=st.integers(5, 40), delta=st.sampled_from([0.0, 0.05]), seed=st.integers(0, 2**31))
def test_balanced_design_gives_the_exact_f_test(n, m, delta, seed):
    d = evaluation_log(seed, systems=2, runs=n, items=m, delta=delta, run_sd=0.1, item_sd=0.1, residual_sd=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = mixed.fit("score ~ system + (1|item) + (1|system:run)", d)
    assume(fit.theta["system:run.(Intercept)"] > 1e-2)  # an interior fit: REML = ANOVA estimates
    t = fit.test([0.0, 1.0], ddf="kenward-roger")
    assert t.den_df == pytest.approx(2 * (n - 1), rel=BALANCED_REL)
    assert t.F == pytest.approx(_anova_f(d, n, m), rel=BALANCED_REL)
    assert t.p_value == pytest.approx(stats.f.sf(_anova_f(d, n, m), 1, 2 * (n - 1)), rel=BALANCED_REL)


def test_balanced_design_where_v2_vanishes():
    """On balanced designs KR's V2 = 1 - c3 B is 0 up to rounding (A1 = A2 = 2 / (k (n - 1))), so rho is infinite
    and m = 4 + (q + 2) / inf: R's IEEE arithmetic gives pbkrtest the exact df k (n - 1) = 4. The first 40 seeds of
    this design (2 systems x 3 runs x 20 items) include logs where V2 is exactly 0 (seed 14 on this machine, where a
    division by zero once made the test fail); every interior fit gives the exact F test."""
    for seed in range(40):
        d = evaluation_log(seed, runs=3, items=20, delta=0.12)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = mixed.fit("score ~ system + (1|item) + (1|system:run)", d)
        if fit.theta["system:run.(Intercept)"] <= 1e-2:
            continue
        t = fit.test([0.0, 1.0], ddf="kenward-roger")
        assert t.den_df == pytest.approx(4, rel=BALANCED_REL)
        assert t.F == pytest.approx(_anova_f(d, 3, 20), rel=BALANCED_REL)


def test_a_hundred_thousand_rows_without_n_by_n_matrices():
    """10^5 rows (2 systems x 20 runs x 2,500 items): an N x N matrix would take 80 GB; the test runs on the
    sufficient statistics and is exact here: F = MS_system / MS_run(system) on (1, 38) df."""
    n, m = 20, 2500
    d = evaluation_log(5, systems=2, runs=n, items=m, delta=0.03, run_sd=0.05, item_sd=0.1, residual_sd=0.1)
    fit = mixed.fit("score ~ system + (1|item) + (1|system:run)", d)
    assert fit.theta["system:run.(Intercept)"] > 1e-2
    t = fit.anova(ddf="kenward-roger").iloc[0]
    assert t["den_df"] == pytest.approx(38, rel=BALANCED_REL)
    assert t["F"] == pytest.approx(_anova_f(d, n, m), rel=BALANCED_REL)


def test_invariant_to_the_parametrization_of_random_slopes():
    """(1 + system|item) and (0 + system|item) are one model in two parametrizations of the item covariance
    matrix; pbkrtest's gamma differ by a linear map, under which Phi_A, lambda and m are invariant (W transforms
    inversely to the P_i and Q_ij). The two fits' optima agree to ~1e-9 in logLik, so 1e-5 relative."""
    ref = json.loads((REF_DIR / "factor_slopes_lme4.json").read_text())
    d = pd.read_csv(REF_DIR / "factor_slopes_eval.csv.gz")
    for col, levels in ref["levels"]["eval_log"].items():
        d[col] = pd.Categorical(d[col], categories=levels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = mixed.fit("score ~ system + (1 + system|item) + (1|system:seed)", d).anova(ddf="kenward-roger")
        b = mixed.fit("score ~ system + (0 + system|item) + (1|system:seed)", d).anova(ddf="kenward-roger")
    assert a["num_df"].iloc[0] == b["num_df"].iloc[0] == 2
    np.testing.assert_allclose(a[["F", "den_df", "p_value"]], b[["F", "den_df", "p_value"]], rtol=1e-5)


# ------------------------------------------------------------------------------------------------- the API

def test_api_methods_defaults_and_errors():
    ref = SMALL["models"]["unbalanced"]
    m = _fit("unbalanced", ref["formula"])
    pd.testing.assert_frame_equal(m.anova(ddf="kenward-roger"), ddf.anova(m, ddf="kenward-roger"))
    # the default ddf is the registry's default test, Kenward-Roger (was Satterthwaite before issue 27)
    pd.testing.assert_frame_equal(m.anova(), ddf.anova(m, ddf="kenward-roger"))
    assert m.anova()["method"].iloc[0] == "F test, Kenward-Roger df"
    assert m.anova(ddf="satterthwaite")["method"].iloc[0] == "F test, Satterthwaite df"
    t = ddf.contrast_test(m, [[0, 1, 0], [0, 0, 1]], "system", ddf="kenward-roger")
    assert t.method == "F test, Kenward-Roger df" and t.term == "system"
    assert m.test([[0, 1, 0], [0, 0, 1]], ddf="KR").F == t.F  # an alias
    assert "Kenward-Roger" in repr(t) and t.outcome_row()["df"] == (2, t.den_df)
    with pytest.raises(mixed.MixedModelError, match="satterthwaite' or 'kenward-roger"):
        m.test([0, 1, 0], ddf="containment")
    with pytest.raises(mixed.MixedModelError, match="one column per fixed effect"):
        m.test([0, 1], ddf="kenward-roger")
    with pytest.raises(mixed.MixedModelError, match="linearly dependent"):
        m.test([[0, 1, 0], [0, 2, 0]], ddf="kenward-roger")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ml = mixed.fit(ref["formula"], _data("unbalanced"), method="ML")
    with pytest.raises(mixed.MixedModelError, match="REML"):
        ml.test([0, 1, 0], ddf="kenward-roger")
    with pytest.raises(mixed.MixedModelError, match="REML"):
        ddf.anova(ml, ddf="kenward-roger")
    cbpp = pd.read_csv(REF_DIR / "glmm_cbpp.csv.gz", dtype={"herd": str, "period": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        glmm = mixed.glmer("cbind(incidence, size - incidence) ~ period + (1|herd)", cbpp, family="binomial")
    with pytest.raises(mixed.MixedModelError, match="mixed.lrt"):
        ddf.anova(glmm, ddf="kenward-roger")


def test_too_many_levels_in_the_other_terms_are_refused(monkeypatch):
    """The dense blocks over the non-largest terms' levels are bounded; past the bound a clear error, not an
    out-of-memory crash (the bound lowered here to the 6 system:seed levels of the three-seeds log)."""
    m = _fit("three_seeds", SMALL["models"]["three_seeds"]["formula"])
    monkeypatch.setattr(kenward_roger, "DENSE_OTHERS_LIMIT", 5)
    with pytest.raises(mixed.MixedModelError, match="system:seed: 6 levels x coefficients.*satterthwaite"):
        m.test([0, 1], ddf="kenward-roger")
    monkeypatch.setattr(kenward_roger, "DENSE_OTHERS_LIMIT", 6)
    assert m.test([0, 1], ddf="kenward-roger").den_df == pytest.approx(4, rel=REL)


def test_streamed_fit_gives_the_same_test():
    """Kenward-Roger needs only the sufficient statistics: a fit from chunks gives the same F and df."""
    d = _data("slopes_interaction")
    formula = KR["models"]["slopes_interaction"]["formula"]
    a = _fit("slopes_interaction", formula).anova(ddf="kenward-roger")
    b = _fit("slopes_interaction", formula, data=[d.iloc[:150], d.iloc[150:]]).anova(ddf="kenward-roger")
    # two optimizer runs from the same start on statistics summed in another order: theta agrees to ~1e-8
    np.testing.assert_allclose(a[["F", "den_df", "p_value"]], b[["F", "den_df", "p_value"]], rtol=1e-5)
