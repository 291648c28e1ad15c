"""Type I, II and III anova tables against lmerTest 3.1-3 (tests/reference/anova_types.R): lmerTest's ham (three
factors, all interactions), afex's obk.long (three factors, unbalanced between-subject cells) and md_12.1 (two
factors), a simulated unbalanced A x B x C design and a model with a covariate, its interaction and random slopes.

Tolerances: the hypothesis matrices to 1e-6 absolute (lmerTest rounds them to 7 significant digits with
``zapsmall``); F, both df and p to 1e-4 relative (issue 28's bar; lmerTest's derivatives are numerical, ours central
differences of the analytic gradient, so much closer agreement is not expected - measured: 2e-6 at worst).
Type III is compared with R's treatment-coded AND sum-coded fits (lmerTest's type III does not depend on the coding;
R's two fits agree to 6e-8). Types I and II are compared with R's treatment-coded fit, the coding the engine uses:
lmerTest's own sum-coded type I/II tables of the covariate model differ from its treatment-coded ones by up to 7e-4
(its Doolittle factor zeroes entries below 1e-6).
"""

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vrs_helpers import mixed
from vrs_helpers.mixed.inference import ddf, hypotheses, satterthwaite

REF_DIR = Path(__file__).parent.parent / "reference"
REF = json.loads((REF_DIR / "anova_types_lmertest.json").read_text())
FACTORS = {"ham": ["Consumer", "Product", "Information", "Gender"],
           "obk_long": ["id", "treatment", "gender", "phase", "hour"],
           "md_12_1": ["id", "angle", "noise"], "sim_three_way": ["g", "A", "B", "C"],
           "sim_covariate": ["g", "A", "B", "C"], "sim_covariate_three_way": ["g", "A", "B", "C"],
           "sim_no_intercept": ["g", "A", "B", "C"]}
_FITS: dict = {}


def _fit(name):
    if name not in _FITS:
        r = REF["models"][name]
        d = pd.read_csv(REF_DIR / r["data"], dtype={f: str for f in FACTORS[name]})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _FITS[name] = mixed.fit(r["formula"], d)
    return _FITS[name]


@pytest.mark.parametrize("name", list(REF["models"]))
@pytest.mark.parametrize("type_", [1, 2, 3])
def test_hypotheses_are_lmertests(name, type_):
    m = _fit(name)
    ours = hypotheses.hypotheses(m, type_)
    theirs = REF["models"][name]["treatment"][f"type{type_}_hypotheses"]
    assert list(ours) == list(theirs)
    for term, r in theirs.items():
        assert r["cols"] == list(m.fixed_effects.index)
        np.testing.assert_allclose(ours[term], np.array(r["values"]), atol=1e-6, err_msg=term)


@pytest.mark.parametrize("name", list(REF["models"]))
@pytest.mark.parametrize("ddf_", ["Satterthwaite", "Kenward-Roger"])
@pytest.mark.parametrize("type_", [1, 2, 3])
def test_anova_table_equals_lmertest(name, ddf_, type_):
    m = _fit(name)
    r = REF["models"][name]
    assert m.deviance == pytest.approx(r["treatment"]["REMLcrit"], abs=1e-6)  # the same REML optimum
    ours = m.anova(ddf=ddf_.lower(), type=type_).set_index("term")
    codings = ("treatment", "sum") if type_ == 3 else ("treatment",)
    for coding in codings:
        theirs = r[coding][f"type{type_}_{ddf_}"]
        assert list(ours.index) == list(theirs)
        for term, t in theirs.items():
            assert ours.loc[term, "num_df"] == t["NumDF"]
            assert ours.loc[term, "F"] == pytest.approx(t["F"], rel=1e-4), (coding, term)
            assert ours.loc[term, "den_df"] == pytest.approx(t["DenDF"], rel=1e-4), (coding, term)
            assert ours.loc[term, "p_value"] == pytest.approx(t["p"], rel=1e-4), (coding, term)


def test_type_three_is_not_the_treatment_coded_columns():
    """Issue 28's finding on ham: the test of a main effect's own (treatment-coded) columns is a simple effect at the
    reference levels (F = 1.43 here), lmerTest's type III main effect another hypothesis (F = 3.82, p = 0.011)."""
    m = _fit("ham")
    cols = hypotheses.term_columns(m)["Product"]
    simple = ddf.contrast_test(m, np.eye(len(m.fixed_effects))[cols], ddf="satterthwaite")
    t3 = m.anova(ddf="satterthwaite").set_index("term").loc["Product"]
    assert t3["F"] == pytest.approx(REF["models"]["ham"]["treatment"]["type3_Satterthwaite"]["Product"]["F"], rel=1e-4)
    assert abs(simple.F - t3["F"]) > 1.0


def test_type_names_and_bad_types():
    m = _fit("md_12_1")
    pd.testing.assert_frame_equal(m.anova(type="III"), m.anova(type=3))
    pd.testing.assert_frame_equal(m.anova(type="I"), m.anova(type=1))
    with pytest.raises(mixed.MixedModelError, match="type must be 1, 2 or 3"):
        m.anova(type=4)


def test_the_variance_parameter_derivatives_are_computed_once_per_model(monkeypatch):
    """Issue 30: Satterthwaite's Hessian once per model, reused by every term and contrast."""
    calls = []
    real = satterthwaite.adjustment
    monkeypatch.setattr(satterthwaite, "adjustment", lambda r: calls.append(1) or real(r))
    r = REF["models"]["sim_three_way"]
    d = pd.read_csv(REF_DIR / r["data"], dtype={f: str for f in FACTORS["sim_three_way"]})
    m = mixed.fit(r["formula"], d)
    m.anova(type=3, ddf="satterthwaite")
    m.anova(type=1, ddf="satterthwaite")
    ddf.contrast_test(m, np.eye(len(m.fixed_effects))[1], ddf="satterthwaite")
    assert len(calls) == 1


def _design(seed, n_groups, drop):
    """An unbalanced A (3) x B (2) design with random group intercepts, rows dropped at random."""
    rng = np.random.default_rng(seed)
    rows = [(f"g{g}", a, b) for g in range(n_groups) for a in ("a1", "a2", "a3") for b in ("b1", "b2")
            for _ in range(2)]
    d = pd.DataFrame(rows, columns=["g", "A", "B"])
    ge = rng.normal(0, 0.5, n_groups)
    d["y"] = (d["A"].map({"a1": 0.0, "a2": 0.3, "a3": -0.2}) + (d["B"] == "b2") * 0.2
              + ((d["A"] == "a2") & (d["B"] == "b2")) * 0.4 + ge[d["g"].str[1:].astype(int)]
              + rng.normal(0, 1.0, len(d)))
    return d[rng.random(len(d)) > drop].reset_index(drop=True)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_groups=st.integers(5, 9), drop=st.floats(0.0, 0.3),
       ref_a=st.sampled_from(["a1", "a2", "a3"]), ref_b=st.sampled_from(["b1", "b2"]))
def test_type_three_does_not_depend_on_the_reference_levels(seed, n_groups, drop, ref_a, ref_b):
    """Type III hypotheses are marginal: with other reference levels (other treatment contrasts) every row of the
    table is the same, while the treatment-coded columns test other simple effects. To 1e-5 relative: the
    hypotheses are rounded to 7 significant digits as lmerTest rounds them (zapsmall: 1/3 -> 0.3333333); F also
    to 1e-6 absolute, where F is near 0 (hypothesis found F = 0.0031 differing by 3e-8 between the two codings:
    the fits of the two parametrizations stop at the optimizer's tolerance, not at the same bits)."""
    d = _design(seed, n_groups, drop)
    e = d.copy()
    e["A"] = pd.Categorical(e["A"], categories=[ref_a] + [x for x in ("a1", "a2", "a3") if x != ref_a])
    e["B"] = pd.Categorical(e["B"], categories=[ref_b] + [x for x in ("b1", "b2") if x != ref_b])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m1 = mixed.fit("y ~ A * B + (1|g)", d)
        m2 = mixed.fit("y ~ A * B + (1|g)", e)
    if m1.singular or m2.singular:
        return  # boundary fits hold the group variance at 0; the table is still invariant but the df are 2-point
    a1 = m1.anova(type=3, ddf="kenward-roger").set_index("term")
    a2 = m2.anova(type=3, ddf="kenward-roger").set_index("term")
    for term in ("A", "B", "A:B"):
        assert a1.loc[term, "F"] == pytest.approx(a2.loc[term, "F"], rel=1e-5, abs=1e-6)
        assert a1.loc[term, "den_df"] == pytest.approx(a2.loc[term, "den_df"], rel=1e-5)
