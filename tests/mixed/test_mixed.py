"""vrs_helpers.mixed: gradient, streaming, independent implementations (statsmodels, mixedlm), bad input."""

import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from scipy import linalg, optimize

from vrs_helpers import mixed
from vrs_helpers.mixed.structure.formula import FormulaError, parse


def _crossed(seed=0, n_s=40, n_r=6, n_o=3, drop=0.2, effects=(0.5, 0.1, 0.05, 0.2), sigma=0.3):
    """Sentences x raters x occasions with a system factor, a covariate and missing cells."""
    rng = np.random.default_rng(seed)
    grid = pd.MultiIndex.from_product([range(n_s), range(n_r), range(n_o)], names=["s", "r", "o"]).to_frame(index=False)
    grid = grid[rng.random(len(grid)) > drop].reset_index(drop=True)
    s_eff = rng.normal(0, effects[0], n_s)
    r_eff = rng.normal(0, effects[1], n_r)
    o_eff = rng.normal(0, effects[2], n_o)
    sr_eff = rng.normal(0, effects[3], (n_s, n_r))
    grid["sys"] = rng.choice(["base", "new", "old"], len(grid))
    grid["x"] = rng.normal(size=len(grid))
    grid["y"] = (1.0 + 0.3 * (grid["sys"] == "new") + 0.2 * grid["x"] + s_eff[grid.s] + r_eff[grid.r] + o_eff[grid.o]
                 + sr_eff[grid.s, grid.r] + rng.normal(0, sigma, len(grid)))
    for c in "sro":
        grid[c] = "L" + grid[c].astype(str)
    return grid


def test_formula_parsing():
    f = parse("ter ~ system * src_length_class + (1|sentence_id) + (1 | sentence:rater)")
    assert f.response == "ter" and f.intercept
    assert f.fixed_terms == (("system",), ("src_length_class",), ("system", "src_length_class"))
    assert f.random == (("sentence_id",), ("sentence", "rater"))
    assert f.intercepts_only
    assert parse("y ~ 0 + a + (1|g)").intercept is False
    # lme4's readings (findbars in lme4 1.1-31): (x|g) is (1 + x|g); || splits into one term per coefficient;
    # a/b is b:a then a
    slope = parse("y ~ x + (x|g)").random_terms
    assert slope == parse("y ~ x + (1 + x|g)").random_terms
    assert [(t.covariate_names, t.group_name) for t in slope] == [(["(Intercept)", "x"], "g")]
    assert [str(t) for t in parse("y ~ x + (1 + x||g)").random_terms] == ["(1 | g)", "(0 + x | g)"]
    assert [str(t) for t in parse("y ~ (0 + x|g)").random_terms] == ["(0 + x | g)"]
    assert [t.group_name for t in parse("y ~ x + (1|a/b)").random_terms] == ["b:a", "a"]
    assert [t.group_name for t in parse("y ~ (1|a/b/c)").random_terms] == ["c:b:a", "b:a", "a"]
    assert parse("y ~ x + (1 + x|g)").random_covariates == ["x"]
    for bad, msg in [("y ~ x", "No random term"), ("y x (1|g)", "needs a response"),
                     ("y ~ (1|g) + (1|g)", "appears twice"), ("y ~ (0|g)", "no coefficient"),
                     ("y ~ x + (|g)", "nothing before")]:
        with pytest.raises(FormulaError, match=msg):
            parse(bad)


@pytest.mark.parametrize("reml", [True, False])
def test_analytic_gradient_matches_finite_differences(reml):
    df = _crossed(1)
    s = mixed.accumulate("y ~ sys + x + (1|s) + (1|r) + (1|o) + (1|s:r)", df)
    dev = mixed.Deviance(s, reml)
    for theta in (np.array([1.0, 0.5, 0.2, 0.7]), np.array([2.0, 0.05, 1.5, 0.3])):
        _, g = dev.value_and_grad(theta)
        num = optimize.approx_fprime(theta, dev, 1e-6)
        np.testing.assert_allclose(g, num, rtol=1e-4, atol=1e-3)


def test_chunks_give_the_same_fit_as_one_frame():
    df = _crossed(2)
    f = "y ~ sys * x + (1|s) + (1|r) + (1|s:r)"
    whole = mixed.fit(f, df)
    # shuffle so that levels (of fixed and random factors) first appear in late chunks
    shuffled = df.sort_values(["sys", "r"], ascending=False).reset_index(drop=True)
    chunks = [shuffled.iloc[i:i + 97] for i in range(0, len(shuffled), 97)]
    streamed = mixed.fit(f, iter(chunks))
    assert streamed.loglik == pytest.approx(whole.loglik, abs=1e-8)
    pd.testing.assert_frame_equal(streamed.fixed_effects, whole.fixed_effects, rtol=1e-6)
    pd.testing.assert_frame_equal(streamed.variance_components, whole.variance_components, rtol=1e-6)
    with pytest.raises(mixed.MixedModelError, match="fitted from a stream"):
        streamed.fitted  # noqa: B018


def test_categorical_chunks_with_different_categories():
    df = _crossed(3)
    a, b = df.iloc[:300].copy(), df.iloc[300:].copy()
    a["sys"] = pd.Categorical(a["sys"], categories=sorted(a["sys"].unique()))
    b["sys"] = pd.Categorical(b["sys"], categories=sorted(b["sys"].unique()))
    m = mixed.fit("y ~ sys + (1|s)", [a, b])
    assert list(m.fixed_effects.index) == ["(Intercept)", "sysnew", "sysold"]
    assert m.loglik == pytest.approx(mixed.fit("y ~ sys + (1|s)", df).loglik, abs=1e-8)


def test_against_statsmodels_single_grouping_factor():
    """statsmodels MixedLM is an independent implementation for one grouping factor."""
    rng = np.random.default_rng(4)
    n_g, per = 60, 8
    g = np.repeat(np.arange(n_g), per)
    df = pd.DataFrame({"g": g.astype(str), "sys": rng.choice(["a", "b", "c"], n_g * per),
                       "x": rng.normal(size=n_g * per)})
    df["y"] = 0.5 * (df.sys == "b") - 0.2 * df.x + rng.normal(0, 0.8, n_g)[g] + rng.normal(0, 0.5, len(df))
    for reml in (True, False):
        ours = mixed.fit("y ~ sys + x + (1|g)", df, method="REML" if reml else "ML")
        sm = smf.mixedlm("y ~ sys + x", df, groups=df["g"]).fit(reml=reml, method="lbfgs")
        assert ours.loglik == pytest.approx(sm.llf, abs=1e-4)
        assert ours.variance_components.loc["g", "variance"] == pytest.approx(float(sm.cov_re.iloc[0, 0]), rel=1e-3)
        assert ours.variance_components.loc["Residual", "variance"] == pytest.approx(sm.scale, rel=1e-3)
        np.testing.assert_allclose(ours.fixed_effects["estimate"].to_numpy(), sm.fe_params.to_numpy(), rtol=1e-4)
        np.testing.assert_allclose(ours.fixed_effects["se"].to_numpy(), sm.bse_fe.to_numpy(), rtol=1e-3)
        blups = pd.Series({k: v.iloc[0] for k, v in sm.random_effects.items()})
        np.testing.assert_allclose(ours.ranef["g"][blups.index].to_numpy(), blups.to_numpy(), rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_against_mixedlm_crossed_unbalanced(seed):
    """mixedlm 1.3.0 (an lme4 port) as an oracle on crossed designs with missing cells."""
    mixedlm = pytest.importorskip("mixedlm")
    df = _crossed(seed, n_s=30, drop=0.3)
    f = "y ~ sys + x + (1|s) + (1|r) + (1|o) + (1|s:r)"
    for reml in (True, False):
        ours = mixed.fit(f, df, method="REML" if reml else "ML")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = mixedlm.lmer(f, df, REML=reml)
        ref_ll = float(ref.logLik().value)
        assert ours.loglik >= ref_ll - 1e-4
        if ours.loglik < ref_ll + 1e-5:  # the same optimum: the components agree
            vc = ref.VarCorr().as_dict()
            for g in ("s", "r", "o", "s:r"):
                v_ref = float(vc[g]["(Intercept)"])
                assert ours.variance_components.loc[g, "variance"] == pytest.approx(v_ref, rel=2e-3, abs=1e-7)
            assert ours.sigma == pytest.approx(ref.sigma, rel=1e-4)


def test_results_object():
    df = _crossed(8)
    m = mixed.fit("y ~ sys + x + (1|s) + (1|r)", df)
    assert m.method == "REML" and m.reml_criterion == pytest.approx(-2 * m.loglik)
    assert m.aic == pytest.approx(-2 * m.loglik + 2 * (3 + 1 + 2 + 1))
    assert m.bic == pytest.approx(-2 * m.loglik + np.log(len(df)) * 7)
    vc = m.variance_components
    assert list(vc.columns) == ["variance", "sd", "percent"] and vc["percent"].sum() == pytest.approx(100)
    assert m.ngroups == {"s": 40, "r": 6}
    assert "Random effects" in m.summary() and "sysnew" in repr(m.fixed_effects)
    assert m.to_frame().equals(vc)
    # fitted + residuals reproduce the response; residuals are orthogonal to the fixed design (normal equations
    # of the mixed-model equations hold approximately only, so just check they are centred and small)
    np.testing.assert_allclose(m.fitted + m.residuals, df["y"].to_numpy())
    assert abs(m.residuals.mean()) < 0.05
    # BLUPs sum to ~0 per factor (shrinkage towards the mean)
    assert abs(m.ranef["s"].mean()) < 0.05
    assert "<table" in m._repr_html_()


def test_ml_lrt_on_nested_models_and_refusals():
    df = _crossed(9)
    m1 = mixed.fit("y ~ sys + x + (1|s)", df, method="ML")
    m0 = mixed.fit("y ~ x + (1|s)", df, method="ML")
    r = mixed.lrt(m0, m1)
    assert r.df == 2 and not r.refitted_ml
    assert r.chi2 == pytest.approx(2 * (m1.loglik - m0.loglik))
    assert mixed.lrt(m1, m0).chi2 == pytest.approx(r.chi2)  # order does not matter
    reml = mixed.lrt(mixed.fit("y ~ x + (1|s)", df), mixed.fit("y ~ sys + x + (1|s)", df))
    assert reml.refitted_ml and reml.chi2 == pytest.approx(r.chi2, rel=1e-6)
    with pytest.raises(mixed.MixedModelError, match="not nested"):
        mixed.lrt(mixed.fit("y ~ x + (1|s)", df), mixed.fit("y ~ sys + (1|s)", df))
    with pytest.raises(mixed.MixedModelError, match="different data"):
        mixed.lrt(mixed.fit("y ~ x + (1|s)", df.iloc[:-5]), m1)


def _toy():
    return _crossed(10, n_s=10)


@pytest.mark.parametrize("formula,prepare,message", [
    ("y ~ sys + (1|ss)", None, r"'ss' \(did you mean .*\) not in the data; available columns"),
    ("sys ~ 1 + (1|s)", None, "response 'sys' must be numeric"),
    ("y ~ sys + (1|s)", lambda d: d.assign(y=d.y.where(d.index != 3)), r"1 rows have missing values \(y: 1\)"),
    ("y ~ sys + (1|s)", lambda d: d.assign(s=d.s.where(d.index > 1)), "dropna=True"),
    ("y ~ sys + (1|one)", lambda d: d.assign(one="z"), "random factor 'one' has a single level"),
    ("y ~ one + (1|s)", lambda d: d.assign(one="z"), "fixed-effect factor 'one' has a single level"),
    ("y ~ sys + sys2 + (1|s)", lambda d: d.assign(sys2=d.sys), "rank deficient.*sys2"),
    ("y ~ x + x2 + (1|s)", lambda d: d.assign(x2=2 * d.x), r"rank deficient.*column\(s\) x2"),
    ("y ~ 1 + (1|s)", lambda d: d.head(2), "at least 3"),
    ("y ~ 1 + (1|s)", lambda d: d.head(0), "empty"),
])
def test_bad_input_errors(formula, prepare, message):
    df = _toy()
    if prepare is not None:
        df = prepare(df)
    with pytest.raises(mixed.MixedModelError, match=message):
        mixed.fit(formula, df)


def test_dropna_and_chunk_columns():
    df = _toy()
    d2 = df.assign(y=df.y.where(df.index != 3))
    m = mixed.fit("y ~ sys + (1|s)", d2, dropna=True)
    assert m.nobs == len(df) - 1
    with pytest.raises(mixed.MixedModelError, match="different columns"):
        mixed.fit("y ~ 1 + (1|s)", [df.iloc[:50], df.iloc[50:].rename(columns={"x": "xx"})])
    with pytest.raises(mixed.MixedModelError, match="DataFrame"):
        mixed.fit("y ~ 1 + (1|s)", "not data")


def test_singular_and_aliased_warnings():
    df = _toy()
    df["s_copy"] = df["s"].map(lambda v: v + "_copy")  # same partition of the rows as s
    with pytest.warns(mixed.AliasedFactorsWarning, match="s and s_copy are aliased"):
        m = mixed.fit("y ~ 1 + (1|s) + (1|s_copy) + (1|r)", df)
    total = m.variance_components.loc[["s", "s_copy"], "variance"].sum()
    ref = mixed.fit("y ~ 1 + (1|s) + (1|r)", df).variance_components.loc["s", "variance"]
    assert total == pytest.approx(ref, rel=1e-4)  # only the sum is identified, and it equals the single factor's
    rng = np.random.default_rng(0)
    df["noise_group"] = rng.choice(["a", "b", "c", "d"], len(df))
    with pytest.warns(mixed.SingularFitWarning, match="boundary"):
        sm = mixed.fit("y ~ 1 + (1|s) + (1|noise_group)", df.assign(y=rng.normal(size=len(df)) + df.s.map(
            {f"L{i}": i for i in range(10)})))
    assert sm.singular


def test_fit_from_a_parquet_dataset_in_batches(tmp_path):
    import pyarrow as pa
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    df = _crossed(11)
    for i in range(4):
        pq.write_table(pa.Table.from_pandas(df.iloc[i::4].reset_index(drop=True)), tmp_path / f"part{i}.parquet")
    ds = pads.dataset(str(tmp_path), format="parquet")
    streamed = mixed.fit("y ~ sys + x + (1|s) + (1|r)", ds)
    whole = mixed.fit("y ~ sys + x + (1|s) + (1|r)", df)
    assert streamed.nobs == len(df)
    assert streamed.loglik == pytest.approx(whole.loglik, abs=1e-8)


def test_no_intercept_and_numeric_interaction_names():
    df = _crossed(12)
    m = mixed.fit("y ~ 0 + sys + x + sys:x + (1|s)", df)
    assert list(m.fixed_effects.index) == ["sysbase", "sysnew", "sysold", "x", "sysnew:x", "sysold:x"]
    # the same model as with an intercept, reparametrized: same likelihood
    assert m.loglik == pytest.approx(mixed.fit("y ~ sys * x + (1|s)", df).loglik, abs=1e-6)
    with pytest.raises(FormulaError, match="marginal term"):
        mixed.fit("y ~ sys:x + (1|s)", df)


@pytest.mark.parametrize("reml", [True, False])
def test_block_deviance_equals_intercept_deviance(reml):
    """The general (random-slope) deviance reduces to the random-intercept one: two implementations, same values."""
    df = _crossed(4)
    s = mixed.accumulate("y ~ sys * x + (1|s) + (1|r) + (1|o) + (1|s:r)", df)
    fast, general = mixed.Deviance(s, reml), mixed.BlockDeviance(s, reml)
    rng = np.random.default_rng(0)
    for theta in [np.ones(4), np.array([0.0, 0.3, 1.2, 0.0])] + [rng.uniform(0, 3, 4) for _ in range(5)]:
        assert general(theta) == pytest.approx(fast(theta), rel=1e-12, abs=1e-9)
        _, parts_f = fast.evaluate(theta)
        _, parts_g = general.evaluate(theta)
        beta = np.linalg.solve(parts_f[9], parts_f[10])
        for bf, bg in zip(fast.conditional_modes(theta, parts_f, beta), general.conditional_modes(theta, parts_g, beta),
                          strict=True):
            np.testing.assert_allclose(bg, bf, rtol=1e-9, atol=1e-12)


def test_nested_syntax_is_the_explicit_interaction():
    df = _crossed(5)
    nested = mixed.fit("y ~ sys + (1|s/r)", df)
    explicit = mixed.fit("y ~ sys + (1|r:s) + (1|s)", df)
    assert nested.loglik == pytest.approx(explicit.loglik, abs=1e-9)
    assert list(nested.variance_components.index) == ["r:s", "s", "Residual"]  # lme4's names for (1|s/r)


def test_term_order_does_not_matter():
    """Fixed-term order once broke the cell basis (issue 10): 'x + sys' must equal 'sys + x'."""
    df = _crossed(6)
    ref = mixed.fit("y ~ sys * x + (1|s)", df)
    for f in ("y ~ x + sys + sys:x + (1|s)", "y ~ x * sys + (1|s)", "y ~ x:sys + x + sys + (1|s)"):
        m = mixed.fit(f, df)
        assert m.loglik == pytest.approx(ref.loglik, abs=1e-8)
        a = ref.fixed_effects["estimate"].rename(lambda n: ":".join(sorted(n.split(":"))))
        b = m.fixed_effects["estimate"].rename(lambda n: ":".join(sorted(n.split(":"))))
        pd.testing.assert_series_equal(a.sort_index(), b.sort_index(), rtol=1e-6)


def test_slope_bad_input():
    df = _crossed(7)
    df["z"] = df["s"].map({f"L{i}": float(i) for i in range(40)})  # one value per sentence
    with pytest.raises(mixed.MixedModelError, match="'z'.*constant within every level of 's'"):
        mixed.fit("y ~ z + (1 + z|s)", df)
    with pytest.raises(mixed.MixedModelError, match="'z'.*constant within every level"):
        mixed.fit("y ~ z + (1 + z||s)", df)
    with pytest.raises(mixed.MixedModelError, match="'sys'.*factor"):  # streamed: factor slopes cannot be coded
        mixed.fit("y ~ x + (1 + sys|s)", [df.iloc[:50], df.iloc[50:]])
    df["zero"] = 0.0
    with pytest.raises(mixed.MixedModelError, match="'zero'.*zero in every row"):
        mixed.fit("y ~ x + (0 + zero|s)", df)


@pytest.mark.parametrize("r", [1, 2, 3])
def test_pair_sums_equal_the_sparse_product(r):
    """G blockdiag(D) G' from the listed pairs equals the plain product (random sparse G, random blocks D)."""
    from scipy import sparse

    from vrs_helpers.mixed.likelihood.deviance import _PairSums

    rng = np.random.default_rng(r)
    m, q = 300, 40
    G = sparse.random(q, m * r, density=0.05, random_state=rng, format="csr")
    D = rng.normal(size=(m, r, r))
    D = D @ np.swapaxes(D, 1, 2)  # symmetric blocks, as in the deviance
    dense = G.toarray() @ linalg.block_diag(*D) @ G.toarray().T
    np.testing.assert_allclose(_PairSums(G, r)(D), dense, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("rater_sd", [0.4, 0.0])
def test_two_large_crossed_factors_quasi_newton_path(rater_sd, monkeypatch):
    """Two large crossed random intercepts (a dense block of 300 raters): Newton steps on the average-information
    Hessian from the moment start when the optimum is interior, L-BFGS-B with its boundary escapes when a variance
    is 0; either way the optimum of mixedlm 1.3.0 (an lme4 port) and of our L-BFGS-B path (the Newton start
    disabled)."""
    from vrs_helpers.mixed.likelihood import optimizer

    mixedlm = pytest.importorskip("mixedlm")
    rng = np.random.default_rng(30)
    n_s, n_r, n = 700, 300, 7000
    s, r = rng.integers(0, n_s, n), rng.integers(0, n_r, n)
    y = 1.0 + rng.normal(0, 0.5, n_s)[s] + rng.normal(0, rater_sd, n_r)[r] + rng.normal(0, 1.0, n)
    df = pd.DataFrame({"y": y, "s": [f"s{i}" for i in s], "r": [f"r{i}" for i in r]})
    f = "y ~ 1 + (1|s) + (1|r)"
    ours = mixed.fit(f, df)
    assert ours.optsum.converged
    assert ours.optsum.optimizer.startswith("Newton") == (rater_sd > 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = mixedlm.lmer(f, df, REML=True)
    # mixedlm stops at lme4's default tolerances: ours is at least as high, and within its stopping error
    assert float(ref.logLik().value) - 1e-6 <= ours.loglik <= float(ref.logLik().value) + 1e-3
    monkeypatch.setattr(optimizer, "QUASI_NEWTON_MIN_DENSE", 10**9)
    lbfgs = mixed.fit(f, df)
    assert lbfgs.optsum.optimizer.startswith("L-BFGS-B")
    assert ours.loglik == pytest.approx(lbfgs.loglik, abs=1e-7)
    np.testing.assert_allclose(ours.theta, lbfgs.theta, atol=1e-5)
