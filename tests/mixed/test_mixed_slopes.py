"""vrs_helpers.mixed with random slopes and nested syntax, against R's lme4 1.1-31 on small simulated data.

Data: tests/reference/mixed_slopes_data.py, ``make(name)`` (numpy default_rng with fixed seeds; regenerated here).
Reference values: tests/reference/mixed_slopes_lme4.json, from tests/reference/mixed_slopes.R (lme4::lmer with
optimizer "bobyqa"); command at the top of both files. ``data_checks`` in the JSON (row count, sums of x and y) tie
the regenerated data to the data lme4 saw.

Models: ``(1 + x|subject)`` and ``(x|subject)`` (REML, ML), ``(0 + x|subject)`` (ML), ``(1 + x||subject)`` (REML,
ML), ``(1|subject)`` (ML, for the likelihood ratio tests), crossed ``(1 + x|item) + (1|rater)`` (REML, ML) and a
singular ``(1 + x|item) + (0 + x|rater)``, ``(1|school/class)``, ``(1|school) + (1|school:class)``,
``(1 + x|school) + (1|school:class)`` and ``(1|school) + (1|class)`` with class labels reused across schools.

Tolerances and why:
- log-likelihood: within 1e-4 absolute, or ours higher by at most 1e-2. Both engines maximize the same profiled
  likelihood; bobyqa stops on a tolerance in theta, so lme4 can stop slightly short of the optimum (then ours is
  higher), but a gap above 1e-2 would mean a different model or a different likelihood. For these fits lme4's
  bobyqa, nloptwrap and Nelder_Mead agree within 1e-7, so lme4 is at the optimum here and the comparisons below
  apply to every fit (the singular one too, see below).
- variances and covariances (``varcorr`` vcov, and sdcor: standard deviations and correlations): relative 1e-3,
  absolute 1e-6 near 0. The likelihood is flat in these directions: a change of 1e-4 in log-likelihood allows
  relative changes of the order of 1e-3 in the components (more with few groups, as the 12 schools here).
- theta (relative covariance factors): relative 1e-3, absolute 1e-5, for the same reason.
- sigma: relative 1e-3 (it is the Residual row's sdcor).
- fixed effects: relative 1e-4 (absolute 1e-8). Given theta they are a generalized least squares solution, so they
  move much less than the components; SEs relative 1e-3, as they scale with sigma and the variance components.
- Where lme4 reports a singular fit (a component on the boundary), the boundary component is where an optimizer
  stops near 0 (lme4: theta 9.4e-8, ours 0): the absolute tolerances (theta 1e-5, variances 1e-6) cover it, and every
  other component is compared as in a regular fit.

Names and orders are lme4's: theta is compared by name (``subject.(Intercept)``, ``subject.x.(Intercept)``,
``subject.x``), varcorr rows by the key (grp, var1, var2), not by position. lme4 orders the random-effect terms by
decreasing number of levels of their grouping factor (``school:class`` before ``school``, whatever the formula's
order); ``(1|school/class)`` becomes grp ``class:school`` (the inner factor first) and ``school``; ``(1 + x||subject)``
gives grp ``subject`` and ``subject.1`` in varcorr but theta names ``subject.(Intercept)`` and ``subject.x``.

The engine's random slopes were written after these tests (API contract: ``mixed.fit``, ``m.loglik``, ``m.sigma``,
``m.fixed_effects``, ``m.theta``, ``m.varcorr``, ``mixed.lrt``, ``mixed.MixedModelError``).
"""

import functools
import importlib.util
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vrs_helpers import mixed

REF = Path(__file__).resolve().parent.parent / "reference"
LME4 = json.loads((REF / "mixed_slopes_lme4.json").read_text())
FITS = LME4["fits"]
LRTS = LME4["lrt"]

LOGLIK_BELOW = 1e-4  # ours may be lower than lme4's by at most this
LOGLIK_ABOVE = 1e-2  # ours may be higher (lme4 stopped short) by at most this
VC_REL, VC_ABS = 1e-3, 1e-6
THETA_REL, THETA_ABS = 1e-3, 1e-5
FE_REL, FE_ABS = 1e-4, 1e-8
SE_REL = 1e-3


def _load_generator():
    spec = importlib.util.spec_from_file_location("mixed_slopes_data", REF / "mixed_slopes_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _load_generator()


@functools.cache
def _data_cached(name: str) -> pd.DataFrame:
    return GEN.make(name)


def _data(name: str) -> pd.DataFrame:
    return _data_cached(name).copy()


@functools.cache
def _fit(key: str):
    ref = FITS[key]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # singular-fit warnings: the singular case is expected
        return mixed.fit(ref["formula"], _data(ref["data"]), method=ref["method"])


def _fit_formula(data_name: str, formula: str, method: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mixed.fit(formula, _data(data_name), method=method)


def _key(grp, var1, var2) -> tuple:
    def norm(v):
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            return None
        return str(v)

    return (str(grp), norm(var1), norm(var2))


def _ref_varcorr(ref) -> dict:
    return {_key(r["grp"], r["var1"], r["var2"]): r for r in ref["varcorr"]}


def _our_varcorr(m) -> dict:
    vc = m.varcorr
    assert {"grp", "var1", "var2", "vcov", "sdcor"} <= set(vc.columns)
    out = {}
    for row in vc.itertuples(index=False):
        k = _key(row.grp, row.var1, row.var2)
        assert k not in out, f"duplicate varcorr row {k}"
        out[k] = {"vcov": float(row.vcov), "sdcor": float(row.sdcor)}
    return out


def _close(ours: float, ref: float, rel: float, abs_: float) -> bool:
    return math.isclose(ours, ref, rel_tol=rel, abs_tol=abs_)




# --- the reference itself -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(LME4["data_checks"]))
def test_generator_reproduces_lme4_data(name):
    d, chk = _data(name), LME4["data_checks"][name]
    assert len(d) == chk["n_rows"]
    assert 300 <= len(d) <= 2000
    assert math.isclose(d["x"].sum(), chk["sum_x"], rel_tol=1e-12, abs_tol=1e-9)
    assert math.isclose(d["y"].sum(), chk["sum_y"], rel_tol=1e-12, abs_tol=1e-9)
    for key, ref in FITS.items():
        if ref["data"] == name:
            assert ref["n_rows"] == len(d), key


def test_reference_is_consistent():
    """(x|g) is (1 + x|g); (1|school/class) is (1|school) + (1|school:class) with other names."""
    for a, b in [("sleep_corr_reml", "sleep_corr_implicit_reml"), ("sleep_corr_ml", "sleep_corr_implicit_ml"),
                 ("nested_slash_reml", "nested_explicit_reml")]:
        fa, fb = FITS[a], FITS[b]
        assert fa["logLik"] == fb["logLik"]
        assert fa["theta"]["values"] == fb["theta"]["values"]
        assert fa["fixed_effects"] == fb["fixed_effects"]
    assert FITS["nested_slash_reml"]["ngrps"] == {"class:school": 42, "school": 12}
    assert FITS["nested_explicit_reml"]["ngrps"] == {"school:class": 42, "school": 12}
    assert FITS["nested_wrong_class_reml"]["ngrps"] == {"school": 12, "class": 4}
    assert FITS["nested_wrong_class_reml"]["logLik"] < FITS["nested_explicit_reml"]["logLik"] - 1
    assert [k for k, v in FITS.items() if v["singular"]] == ["crossed_rater_slope_singular_reml"]
    for v in FITS.values():  # lme4's only message: the boundary note of the singular fit
        assert v["optimizer_warnings"] == []
        boundary = ["boundary (singular) fit: see help('isSingular')"]
        assert v["convergence_messages"] == (boundary if v["singular"] else [])


# --- every fit against lme4 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", list(FITS))
def test_loglik(key):
    ref, m = FITS[key], _fit(key)
    diff = float(m.loglik) - ref["logLik"]
    assert -LOGLIK_BELOW <= diff <= LOGLIK_ABOVE, (
        f"{ref['formula']} ({ref['method']}): logLik {m.loglik!r} vs lme4 {ref['logLik']!r} (ours - lme4 = {diff:.3g})")


@pytest.mark.parametrize("key", list(FITS))
def test_fixed_effects(key):
    ref, m = FITS[key], _fit(key)
    fe = m.fixed_effects
    names = ref["fixed_effects"]["names"]
    assert sorted(fe.index) == sorted(names)
    for name, est, se in zip(names, ref["fixed_effects"]["estimate"], ref["fixed_effects"]["se"], strict=True):
        assert _close(float(fe.loc[name, "estimate"]), est, FE_REL, FE_ABS), (name, fe.loc[name, "estimate"], est)
        assert _close(float(fe.loc[name, "se"]), se, SE_REL, 0.0), (name, fe.loc[name, "se"], se)


@pytest.mark.parametrize("key", list(FITS))
def test_theta(key):
    ref, m = FITS[key], _fit(key)
    theta = m.theta
    assert isinstance(theta, pd.Series)
    assert sorted(theta.index) == sorted(ref["theta"]["names"])
    for name, value in zip(ref["theta"]["names"], ref["theta"]["values"], strict=True):
        assert _close(float(theta[name]), value, THETA_REL, THETA_ABS), (name, theta[name], value)


@pytest.mark.parametrize("key", list(FITS))
def test_varcorr(key):
    ref, m = FITS[key], _fit(key)
    ours, theirs = _our_varcorr(m), _ref_varcorr(ref)
    assert sorted(ours, key=repr) == sorted(theirs, key=repr)
    for k, r in theirs.items():
        assert _close(ours[k]["vcov"], r["vcov"], VC_REL, VC_ABS), (k, ours[k]["vcov"], r["vcov"])
        assert _close(ours[k]["sdcor"], r["sdcor"], VC_REL, VC_ABS), (k, ours[k]["sdcor"], r["sdcor"])


@pytest.mark.parametrize("key", list(FITS))
def test_sigma(key):
    ref, m = FITS[key], _fit(key)
    assert _close(float(m.sigma), ref["sigma"], VC_REL, 0.0)


# --- syntax: (x|g) = (1 + x|g), (1|a/b) = (1|a) + (1|a:b), || -------------------------------------------------------


@pytest.mark.parametrize("method", ["REML", "ML"])
def test_implicit_intercept_same_fit(method):
    suffix = method.lower()
    a, b = _fit(f"sleep_corr_{suffix}"), _fit(f"sleep_corr_implicit_{suffix}")
    assert math.isclose(a.loglik, b.loglik, rel_tol=0, abs_tol=1e-8)
    pd.testing.assert_series_equal(a.theta.sort_index(), b.theta.sort_index(), rtol=1e-6, atol=1e-9)


def test_nested_slash_same_fit_and_lme4_names():
    slash, explicit = _fit("nested_slash_reml"), _fit("nested_explicit_reml")
    assert math.isclose(slash.loglik, explicit.loglik, rel_tol=0, abs_tol=1e-8)
    ref = FITS["nested_slash_reml"]
    assert set(slash.varcorr["grp"]) == {r["grp"] for r in ref["varcorr"]} == {"class:school", "school", "Residual"}
    assert sorted(slash.theta.index) == sorted(ref["theta"]["names"])
    assert set(explicit.varcorr["grp"]) == {"school:class", "school", "Residual"}


def test_reused_class_labels_are_not_nested():
    """(1|class) pools the classes "c1" of all schools: another model (lme4: 4 groups, logLik lower by ~19)."""
    wrong, nested = _fit("nested_wrong_class_reml"), _fit("nested_explicit_reml")
    assert wrong.loglik < nested.loglik - 1


def test_uncorrelated_names():
    m, ref = _fit("sleep_uncorr_reml"), FITS["sleep_uncorr_reml"]
    assert sorted(m.theta.index) == ["subject.(Intercept)", "subject.x"] == sorted(ref["theta"]["names"])
    assert set(_our_varcorr(m)) == {("subject", "(Intercept)", None), ("subject.1", "x", None),
                                    ("Residual", None, None)}


# --- likelihood ratio tests -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", list(LRTS))
def test_lrt(key):
    ref = LRTS[key]
    m0, m1 = _fit(ref["m0"]), _fit(ref["m1"])
    r = mixed.lrt(m0, m1)
    assert r.df == ref["Df"]
    # chi2 = 2 (logLik1 - logLik0); each logLik is within 1e-4 of lme4's
    assert math.isclose(r.chi2, ref["Chisq"], rel_tol=1e-6, abs_tol=4 * LOGLIK_BELOW)
    assert math.isclose(r.p_value, ref["p_value"], rel_tol=1e-2)


def test_lrt_counts_covariance_parameters():
    r = mixed.lrt(_fit("sleep_intercept_ml"), _fit("sleep_corr_ml"))
    assert r.df == 2  # (1 + x|subject): 3 variance-covariance parameters; (1|subject): 1
    assert r.chi2 > 0 and 0 <= r.p_value < 1e-40


# --- bad input ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("term", ["(1 + baseline | subject)", "(baseline | subject)", "(1 + baseline || subject)"])
def test_slope_constant_within_groups_raises(term):
    # z takes one value per subject; renamed so that the match on the name is specific
    df = _data("constant_slope").rename(columns={"z": "baseline"})
    assert df.groupby("subject")["baseline"].nunique().max() == 1
    with pytest.raises(mixed.MixedModelError, match=r"\bbaseline\b"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mixed.fit(f"y ~ x + baseline + {term}", df, method="REML")


def test_slope_varying_within_groups_fits():
    """Control for the test above: the same data with a slope in x, which varies within subjects."""
    m = _fit_formula("constant_slope", "y ~ x + z + (1 + x | subject)", "REML")
    assert np.isfinite(m.loglik)


@pytest.mark.parametrize("term", ["(1 + grp | subject)", "(0 + grp | subject)"])
def test_factor_slope_of_streamed_data_raises(term):
    """Factor slopes are coded from a DataFrame (tests/mixed/test_mixed_factor_slopes.py); streamed chunks cannot be
    coded before their levels are known, so they are refused with a message naming the variable."""
    df = _data("sleep_like")
    assert not pd.api.types.is_numeric_dtype(df["grp"])  # strings (object or pandas' str dtype)
    # mixed.MixedModelError or vrs_helpers.mixed.structure.formula.FormulaError
    with pytest.raises(ValueError, match=r"\bgrp\b"):
        mixed.fit(f"y ~ x + grp + {term}", [df.iloc[:100], df.iloc[100:]], method="REML")


@pytest.mark.parametrize("method", ["ML", "REML"])
def test_not_trapped_at_zero_variances(method):
    """All variances 0 is a stationary point in theta whatever the data say; this design once stopped there from a
    DataFrame (and at lme4's optimum from chunks). lme4 1.1-31's fit recorded by tests/reference/boundary_trap.R."""
    ref = json.loads((REF / "boundary_trap_lme4.json").read_text())[method]
    df = pd.read_csv(REF / "boundary_trap.csv.gz", dtype={"run": str, "item": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = mixed.fit("y ~ x + (x||run) + (1|item)", df, method=method)
        chunked = mixed.fit("y ~ x + (x||run) + (1|item)", [df.iloc[i:i + 400] for i in range(0, len(df), 400)],
                            method=method)
    for m in (whole, chunked):
        assert m.loglik == pytest.approx(ref["logLik"], abs=1e-6)   # lme4's optimum (ours at least as high)
        for name, value in ref["theta"].items():
            assert m.theta[name] == pytest.approx(value, abs=1e-4), name
