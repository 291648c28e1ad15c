"""Binary evaluation data: compare_systems(family="binomial") and latent-scale variance components against glmer.

Reference: tests/reference/glmm_eval_lme4.json, written by tests/reference/glmm_eval.R (command in that file and in
its ``_produced_by``) on the simulated log tests/reference/glmm_eval.csv.gz (glmm_eval_data.py).

glmer's defaults stop PIRLS at tolPwrss = 1e-7, which on these data lowers the Laplace log-likelihood by up to 5e-3
at the same parameters; the R script therefore also fits every model with PIRLS converged (tolPwrss = 1e-12,
"converged"). Tolerances:
- GLRT chi-square within 1e-3 of the converged glmer's (the issue's acceptance bar), log-likelihoods within 1e-4
  (both optimizers stop at deviance changes of about 1e-7; the values agree to about 1e-6);
- ours at least as high as glmer with its defaults (minus 1e-6 for rounding);
- contrasts, slopes and fixed effects within 1e-3 absolute (estimates at the same optimum agree to about 1e-4);
  standard errors within 0.3 % relative (finite-difference Hessians of the deviance in both programs, as in
  tests/mixed/test_mixed_glmm.py); p-values within 2 % relative (they follow the z ratios, which agree to 0.1 %);
- variance components within 1e-3 relative (theta agrees to about 1e-5 at a shared optimum).
"""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vrs_helpers.book import binary, reliability
from vrs_helpers.book.binary import BinaryDataError, detect_family, latent_variance_components
from vrs_helpers.book.glrt import compare_systems
from vrs_helpers.book.significance import SignificanceError
from vrs_helpers.errors import VRSError
from vrs_helpers.outcomes import TestOutcome

REF = Path(__file__).parent.parent / "reference"
R = json.loads((REF / "glmm_eval_lme4.json").read_text())
# runs random: the reference's model (no system-by-item term) and its chi-square GLRT (the default test of binary
# scores is the parametric bootstrap, tests/book/test_glrt.py)
READINGS = {"overall": {}, "runs_random": {"replications": ["seed"], "items": "fixed", "test": "chisq",
                                           "runs": "nested"},
            "by_domain": {"by": "domain"},
            "by_length": {"covariate": "length"}}


@pytest.fixture(scope="module")
def log():
    return pd.read_csv(REF / "glmm_eval.csv.gz")


@pytest.fixture(scope="module")
def comparisons(log):
    return {}


def _comparison(comparisons, log, reading):
    if reading not in comparisons:
        comparisons[reading] = compare_systems(log, "correct", "system", "item", family="binomial",
                                                  **READINGS[reading])
    return comparisons[reading]


@pytest.mark.parametrize("reading", list(READINGS))
def test_glrt_matches_glmer(comparisons, log, reading):
    c = _comparison(comparisons, log, reading)
    ref, default = R[reading]["converged"], R[reading]["default"]
    assert c.family == "binomial"
    assert c.glrt.df == ref["df"]
    assert c.glrt.chi2 == pytest.approx(ref["chisq"], abs=1e-3)
    assert c.glrt.p_value == pytest.approx(ref["p"], rel=1e-3)
    assert c.glrt.logliks[0] == pytest.approx(ref["logLik0"], abs=1e-4)
    assert c.glrt.logliks[1] == pytest.approx(ref["logLik1"], abs=1e-4)
    assert c.glrt.logliks[0] >= default["logLik0"] - 1e-6 and c.glrt.logliks[1] >= default["logLik1"] - 1e-6
    fe = c.model.fixed_effects["estimate"]
    assert list(fe.index) == list(ref["fixef"])
    np.testing.assert_allclose(fe.to_numpy(), list(ref["fixef"].values()), atol=1e-3)
    np.testing.assert_allclose(c.model.varcorr["vcov"], np.atleast_1d(ref["vcov"]), rtol=1e-3)
    assert isinstance(c.glrt, TestOutcome) and c.glrt.statistic == c.glrt.chi2
    assert "Laplace" in c.glrt.method


def test_runs_random_reading_says_it_is_a_chi_square_test(comparisons, log):
    c = _comparison(comparisons, log, "runs_random")
    assert c.f_test is None and c.test is c.glrt
    assert "chi-square" in c.glrt.method and "large-sample" in c.glrt.method
    assert any("parametric-bootstrap LRT (the default) keeps its level" in n for n in c.notes)
    assert "(1|system:seed)" in c.formula and "(1|system:seed)" in c.null_formula


def _check_contrasts(ours: pd.DataFrame, ref: pd.DataFrame):
    assert list(ours["contrast"]) == list(ref["contrast"])
    np.testing.assert_allclose(ours["estimate"], ref["estimate"], atol=1e-3)
    np.testing.assert_allclose(ours["SE"], ref["SE"], rtol=3e-3)
    np.testing.assert_allclose(ours["z"], ref["z.ratio"], rtol=3e-3)
    np.testing.assert_allclose(ours["p_value"], ref["p.value"], rtol=2e-2)


@pytest.mark.parametrize("adjust,key", [("tukey", "contrasts"), ("holm", "contrasts_holm")])
def test_contrasts_match_emmeans_on_the_logit_scale(comparisons, log, adjust, key):
    c = _comparison(comparisons, log, "overall")
    from vrs_helpers.mixed.models.marginal import emmeans

    ours = c.contrasts if adjust == "tukey" else emmeans(c.model, "system", adjust="holm").contrasts
    _check_contrasts(ours, pd.DataFrame(R[key]))
    # odds ratios and the latent-scale effect size are fixed transformations of the log odds ratio
    np.testing.assert_allclose(c.contrasts["odds_ratio"], np.exp(c.contrasts["estimate"]), rtol=1e-12)
    np.testing.assert_allclose(c.contrasts["effect_size"], c.contrasts["estimate"] * math.sqrt(3) / math.pi,
                               rtol=1e-12)
    np.testing.assert_allclose(c.means["probability"], 1 / (1 + np.exp(-c.means["emmean"])), rtol=1e-12)


def test_conditional_contrasts_and_slopes_match_emmeans(comparisons, log):
    by = _comparison(comparisons, log, "by_domain")
    ref = pd.DataFrame(R["by_domain_contrasts"])
    ours = by.contrasts.sort_values(["domain"], kind="stable").reset_index(drop=True)
    assert list(ours["domain"]) == list(ref["domain"])
    _check_contrasts(ours, ref)
    cov = _comparison(comparisons, log, "by_length")
    slopes = cov.slopes.set_index("system")
    ref = pd.DataFrame(R["length_slopes"]).set_index("system")
    np.testing.assert_allclose(slopes.loc[ref.index, "slope"], ref["slope"], atol=1e-5)  # slopes are ~1e-2
    np.testing.assert_allclose(slopes.loc[ref.index, "SE"], ref["SE"], rtol=3e-3)


def test_successes_out_of_trials_give_the_same_glrt(log):
    """Bernoulli rows with the same linear predictor aggregate to a binomial count: pooling the seeds per system and
    item changes each log-likelihood only by the binomial coefficients, which are the same in both models, so the
    GLRT chi-square of the runs-as-replications reading is glmer's on the 0/1 rows."""
    agg = log.groupby(["system", "item"], as_index=False).agg(hits=("correct", "sum"), n=("correct", "size"))
    c = compare_systems(agg, "hits", "system", "item", family="binomial", trials="n")
    assert c.formula == "cbind(hits, n - hits) ~ system + (1|item)"
    assert c.glrt.chi2 == pytest.approx(R["overall"]["converged"]["chisq"], abs=1e-3)


def test_latent_variance_components_and_phi(log):
    ref = R["variance_base"]
    base = log[log["system"] == "base"]
    lv = latent_variance_components(base, "correct", "item", ["seed"])
    assert lv.model.loglik == pytest.approx(ref["logLik"], abs=1e-4)
    vc = lv.variance_components["variance"]
    assert list(vc.index) == ["item", "seed", "Residual"]
    np.testing.assert_allclose(vc[["item", "seed"]], ref["vcov"], rtol=1e-3)
    assert vc["Residual"] == math.pi ** 2 / 3
    assert lv.variance_components["percent"].sum() == pytest.approx(100)
    # phi (Definition 3.2, eq. 3.11/3.12) from glmer's variances, written out: item over item + (seed + pi^2/3)/n
    v_item, v_seed = ref["vcov"]
    for n in (1, 5, 20):
        expected = v_item / (v_item + (v_seed + math.pi ** 2 / 3) / n)
        assert reliability.phi(lv, "item", n={"seed": n}).phi == pytest.approx(expected, rel=1e-3)
    study = reliability.decision_study(lv, "item", {"seed": [1, 5, 20]})
    np.testing.assert_allclose(study["phi"], [v_item / (v_item + (v_seed + math.pi ** 2 / 3) / n) for n in (1, 5, 20)],
                               rtol=1e-3)
    assert "Residual" in repr(lv) and lv.to_frame().shape == (3, 3)


def test_latent_residual_by_link():
    assert binary.latent_residual_variance("logit") == pytest.approx(3.289868133696453)  # pi^2 / 3
    assert binary.latent_residual_variance("probit") == 1.0
    with pytest.raises(BinaryDataError, match="logit"):
        binary.latent_residual_variance("cloglog")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 1), min_size=1, max_size=40), st.sampled_from(["int", "float", "bool"]))
def test_detect_family_binary(values, kind):
    arr = np.array(values, dtype={"int": int, "float": float, "bool": bool}[kind])
    assert detect_family(arr) == "binomial"
    assert detect_family(pd.Series(arr)) == "binomial"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 1), max_size=40),
       st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: v not in (0.0, 1.0)))
def test_detect_family_other_values(values, other):
    assert detect_family(np.array(values + [other], dtype=float)) == "gaussian"


def test_detect_family_edges():
    assert detect_family(pd.Series([1, 0, np.nan])) == "binomial"  # missing values are not evidence
    assert detect_family([True, False, None]) == "binomial"
    assert detect_family(["1", "0"]) == "gaussian"
    assert detect_family([]) == "gaussian"


def test_family_auto_notes_its_choice(log):
    small = log[log["item"].isin(sorted(log["item"].unique())[:60])]
    c = compare_systems(small, "correct", "system", "item", family="auto")
    assert c.family == "binomial" and any("0/1" in n for n in c.notes)
    g = compare_systems(small.assign(score=small["correct"] + 0.5 * (small["length"] % 3)), "score", "system",
                           "item", family="auto")
    assert g.family == "gaussian" and g.notes == []


def test_bad_binary_input(log):
    d = log[log["item"].isin(sorted(log["item"].unique())[:40])].copy()
    with pytest.raises(BinaryDataError, match="0/1 response"):
        compare_systems(d.assign(correct=d["correct"] * 0.5), "correct", "system", "item", family="binomial")
    agg = d.groupby(["system", "item"], as_index=False).agg(hits=("correct", "sum"), n=("correct", "size"))
    with pytest.raises(BinaryDataError, match="above the trials"):
        compare_systems(agg.assign(hits=agg["n"] + 1), "hits", "system", "item", family="binomial", trials="n")
    with pytest.raises(BinaryDataError, match="not whole numbers"):
        compare_systems(agg.assign(n=agg["n"] + 0.5), "hits", "system", "item", family="binomial", trials="n")
    with pytest.raises(BinaryDataError, match="not in the data"):
        compare_systems(agg, "hits", "system", "item", family="binomial", trials="trials")
    with pytest.raises(BinaryDataError, match="missing"):
        compare_systems(d.assign(correct=d["correct"].where(d.index > 0)), "correct", "system", "item",
                           family="binomial")
    with pytest.raises(BinaryDataError, match="family must be"):
        compare_systems(d, "correct", "system", "item", family="poisson")
    with pytest.raises(SignificanceError, match="trials= is for binomial"):
        compare_systems(agg, "hits", "system", "item", trials="n")
    with pytest.raises(BinaryDataError, match="single level"):
        latent_variance_components(d[d["seed"] == "s0"], "correct", "item", ["seed"])
    with pytest.raises(BinaryDataError, match="0/1"):
        latent_variance_components(d.assign(correct=2), "correct", "item")
    one_run = d[(d["seed"] == "s0") & (d["system"] == "base")]
    with pytest.raises(BinaryDataError, match="not identifiable"):
        latent_variance_components(one_run, "correct", "item")
    assert issubclass(BinaryDataError, VRSError)
