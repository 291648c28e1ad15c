"""Satterthwaite F tests of fixed effects against lmerTest 3.1-3 (tests/reference/small_sample.R: the issue's
3-seeds-per-system log, an unbalanced 3-system log, nlme's Machines, lme4's sleepstudy with random intercepts and
with correlated random slopes). F, both df and p to 1e-4 relative (issue 20's bar; lmerTest's own derivatives are
numerical, so agreement much closer than that is not expected)."""

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vrs_helpers import mixed
from vrs_helpers.mixed.inference import ddf

REF_DIR = Path(__file__).parent.parent / "reference"
REF = json.loads((REF_DIR / "small_sample_lmertest.json").read_text())
FILES = {"three_seeds": ("small_sample_three_seeds.csv.gz", ["system", "seed", "item"]),
         "unbalanced": ("small_sample_unbalanced.csv.gz", ["system", "seed", "item"]),
         "machines": ("machines.csv.gz", ["Worker", "Machine"]),
         "sleepstudy_intercept": ("sleepstudy.csv.gz", ["Subject"]),
         "sleepstudy_slopes": ("sleepstudy.csv.gz", ["Subject"])}


def _fit(name):
    path, factors = FILES[name]
    d = pd.read_csv(REF_DIR / path, dtype={f: str for f in factors})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mixed.fit(REF["models"][name]["formula"], d)


@pytest.mark.parametrize("name", list(REF["models"]))
def test_satterthwaite_anova_equals_lmertest(name):
    m = _fit(name)
    assert m.loglik == pytest.approx(REF["models"][name]["logLik"], abs=1e-6)   # the same REML optimum
    ours = ddf.anova(m, ddf="satterthwaite").set_index("term")
    theirs = REF["models"][name]["Satterthwaite"]
    assert set(ours.index) == set(theirs)
    for term, r in theirs.items():
        assert ours.loc[term, "F"] == pytest.approx(r["F"], rel=1e-4)
        assert ours.loc[term, "num_df"] == r["NumDF"]
        assert ours.loc[term, "den_df"] == pytest.approx(r["DenDF"], rel=1e-4)
        assert ours.loc[term, "p_value"] == pytest.approx(r["p"], rel=1e-4)


def test_three_seeds_is_not_significant_where_the_chi_square_lrt_is():
    """Issue 20's design: 2 systems x 3 seeds, a true difference of half the run SD. lmerTest: F on (1, 4.0) df,
    p = 0.12; pbkrtest's parametric bootstrap (2,000 simulations) p = 0.13; the chi-square LRT p = 0.046."""
    m = _fit("three_seeds")
    t = ddf.contrast_test(m, [0.0, 1.0], "system", ddf="satterthwaite")
    assert t.p_value > 0.05 and t.den_df == pytest.approx(4.0, rel=1e-4)
    assert REF["pbmodcomp"]["p_PBtest"] > 0.05 and REF["pbmodcomp"]["p_LRT"] < 0.05
    assert t.df == (1, t.den_df) and t.as_dict()["num_df"] == 1 and t.statistic == t.F


def test_a_one_row_contrast_equals_the_squared_t():
    """For one contrast, F = (l'beta)^2 / l'Cl, the square of the Wald t with the fit's vcov (closed form)."""
    m = _fit("unbalanced")
    c = np.array([0.0, 1.0, -1.0])
    t = ddf.contrast_test(m, c, ddf="satterthwaite")
    beta, C = m.fixed_effects["estimate"].to_numpy(), m.vcov.to_numpy()
    assert t.F == pytest.approx(float(c @ beta) ** 2 / float(c @ C @ c), rel=1e-9)


def test_bad_contrasts_and_ml_fits_are_refused():
    m = _fit("unbalanced")
    with pytest.raises(mixed.MixedModelError, match="one column per fixed effect"):
        ddf.contrast_test(m, [1.0, 0.0])
    with pytest.raises(mixed.MixedModelError, match="linearly dependent"):
        ddf.contrast_test(m, [[0, 1, 0], [0, 2, 0]])
    path, factors = FILES["unbalanced"]
    d = pd.read_csv(REF_DIR / path, dtype={f: str for f in factors})
    with pytest.raises(mixed.MixedModelError, match="REML"):
        ddf.contrast_test(mixed.fit(REF["models"]["unbalanced"]["formula"], d, method="ML"), [0, 1, 0])


def test_streamed_fit_gives_the_same_test():
    """The test needs only the sufficient statistics: a fit from chunks gives the same F and df."""
    path, factors = FILES["unbalanced"]
    d = pd.read_csv(REF_DIR / path, dtype={f: str for f in factors})
    formula = REF["models"]["unbalanced"]["formula"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = ddf.anova(mixed.fit(formula, d), ddf="satterthwaite")
        b = ddf.anova(mixed.fit(formula, [d.iloc[:500], d.iloc[500:]]), ddf="satterthwaite")
    assert a["F"].iloc[0] == pytest.approx(b["F"].iloc[0], rel=1e-8)
    assert a["den_df"].iloc[0] == pytest.approx(b["den_df"].iloc[0], rel=1e-5)
