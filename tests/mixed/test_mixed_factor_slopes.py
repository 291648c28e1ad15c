"""Random slopes of factors (``(f|g)``, ``(0 + f|g)``, ``(f||g)``) against lme4 1.1-31 on afex's fhch2010
(13,222 lexical-decision trials, 45 participants x 600 words) and a simulated 3-system evaluation log with
``(1 + system|item) + (1|system:seed)``. Reference: tests/reference/factor_slopes.R (command in its header)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vrs_helpers import mixed
from vrs_helpers.mixed.structure.factor_slopes import expand

REF_DIR = Path(__file__).parent.parent / "reference"
REF = json.loads((REF_DIR / "factor_slopes_lme4.json").read_text())


def _data(name: str) -> pd.DataFrame:
    path = {"fhch2010": "fhch2010.csv.gz", "eval_log": "factor_slopes_eval.csv.gz"}[name]
    d = pd.read_csv(REF_DIR / path)
    for col, levels in REF["levels"][name].items():   # R's level order (not alphabetical for task/stimulus)
        d[col] = pd.Categorical(d[col], categories=levels)
    return d


@pytest.fixture(scope="module")
def fits():
    return {name: mixed.fit(r["formula"], _data(r["data"])) for name, r in REF["fits"].items()}


@pytest.mark.parametrize("name", list(REF["fits"]))
def test_loglik_is_lme4s_optimum(fits, name):
    """REML log-likelihood within 1e-4 of lme4's (the issue's bar is 1e-3; both optimizers stop at gradient
    tolerances far below that on these surfaces)."""
    assert fits[name].loglik == pytest.approx(REF["fits"][name]["logLik"], abs=1e-4)


@pytest.mark.parametrize("name", list(REF["fits"]))
def test_varcorr_names_are_lme4s(fits, name):
    """Same rows with lme4's names: the factor's name pasted to the level (tasklexdec, systemcand); with ``||``
    the correlated level block is the second term ``item.1``. One difference, asserted here: for a formula with
    ``||`` lme4 1.1-31 also renames the grouping ``system:seed`` to ``system.seed``; we keep the name as written."""
    ours = fits[name].varcorr.fillna("")
    theirs = pd.DataFrame(REF["fits"][name]["varcorr"])
    if "||" in REF["fits"][name]["formula"]:
        theirs["grp"] = theirs["grp"].str.replace("system.seed", "system:seed", regex=False)
    assert list(zip(ours.grp, ours.var1, ours.var2, strict=True)) == list(
        zip(theirs.grp, theirs.var1, theirs.var2, strict=True))


@pytest.mark.parametrize("name", [n for n, r in REF["fits"].items() if "||" not in r["formula"]])
def test_variance_components_and_fixed_effects(fits, name):
    """Identified models: VarCorr (co)variances within 1e-4 relative plus 1e-7 absolute, fixed effects within
    1e-5 absolute of lme4's (the log-likelihood surface is flat to ~1e-10 there; these are the optimum's
    coordinates). ``(system||item)`` is over-parameterized (an intercept plus a full block of the three levels):
    only its log-likelihood is determined, tested above."""
    r = REF["fits"][name]
    ours = fits[name].varcorr
    theirs = pd.DataFrame(r["varcorr"])
    np.testing.assert_allclose(ours["vcov"].to_numpy(), theirs["vcov"].to_numpy(), rtol=1e-4, atol=1e-7)
    fe = fits[name].fixed_effects["estimate"]
    for k, v in r["fixef"].items():
        assert fe[k] == pytest.approx(v, abs=1e-5), k


def test_no_intercept_block_equals_reparametrized_slopes(fits):
    """(0 + system|item) and (1 + system|item) are the same model: the level covariance is T C T' with T the
    map from (intercept, contrasts) to levels (closed form), so both fits give one covariance matrix."""
    def cov(m, names):
        v = m.varcorr.fillna("")
        v = v[v.grp == "item"]
        c = pd.DataFrame(0.0, index=names, columns=names)
        for _, row in v.iterrows():
            a, b = row.var1, row.var2 or row.var1
            c.loc[a, b] = c.loc[b, a] = row.vcov
        return c.to_numpy()

    c1 = cov(fits["eval_system_by_item"], ["(Intercept)", "systemcand", "systembig"])
    c0 = cov(fits["eval_no_intercept"], ["systembase", "systemcand", "systembig"])
    T = np.array([[1, 0, 0], [1, 1, 0], [1, 0, 1]], dtype=float)
    np.testing.assert_allclose(T @ c1 @ T.T, c0, rtol=1e-4, atol=1e-8)


def test_expand_codes_r_model_matrix_columns():
    d = pd.DataFrame({"y": [1.0, 2, 3, 4], "f": ["b", "a", "c", "a"], "g": ["u", "u", "v", "v"],
                      "x": [0.1, 0.2, 0.3, 0.4]})
    text, e = expand("y ~ x + (1 + x + f|g)", d)
    assert text == "y ~ x + (1 + x + fb + fc | g)"
    assert e["fb"].tolist() == [1, 0, 0, 0] and e["fc"].tolist() == [0, 0, 1, 0]
    text, e = expand("y ~ 1 + (0 + f|g)", d)
    assert text == "y ~ 1 + (0 + fa + fb + fc | g)"
    text, _ = expand("y ~ x + (f||g) + (1|f)", d)
    assert text == "y ~ x + (1 | g) + (0 + fa + fb + fc | g) + (1 | f)"
    assert expand("y ~ x + (x|g)", d) == ("y ~ x + (x|g)", d)   # no factor slope: untouched


@pytest.mark.parametrize("formula, data_change, message", [
    ("y ~ 1 + (1 + f:x|g)", {}, "interaction"),
    ("y ~ 1 + (1 + f|g)", {"f": ["a"] * 4}, "at least two"),
    ("y ~ 1 + (1 + f|g)", {"fb": [0.0] * 4}, "already have a column 'fb'"),
])
def test_expand_refuses_with_a_message(formula, data_change, message):
    d = pd.DataFrame({"y": [1.0, 2, 3, 4], "f": ["b", "a", "b", "a"], "g": ["u", "u", "v", "v"], "x": [1.0, 2, 3, 4]})
    d = d.assign(**data_change)
    with pytest.raises(mixed.MixedModelError, match=message):
        expand(formula, d)


def test_level_names_that_are_not_identifiers():
    """A level such as "non word" gives the column `fnon word` (lme4's name), quoted in the formula; the fit runs
    and names it as lme4 does."""
    rng = np.random.default_rng(0)
    d = pd.DataFrame({"f": ["a", "non word"] * 200, "g": np.repeat([f"g{i}" for i in range(40)], 10)})
    slope = rng.normal(0, 0.5, 40)
    d["y"] = (d["f"] == "non word") * (1 + np.repeat(slope, 10)) + rng.normal(0, 0.3, 400)
    text, e = expand("y ~ f + (f|g)", d)
    assert text == "y ~ f + (1 + `fnon word` | g)" and e["fnon word"].tolist() == [0, 1] * 200
    vc = mixed.fit("y ~ f + (f|g)", d).varcorr
    assert "fnon word" in set(vc["var1"])


@pytest.mark.parametrize("reference", ["lme4's", "the other"])
def test_numeric_coding_reaches_the_factor_fits_optimum(reference):
    """The fhch2010 model with task and stimulus coded 0/1 by hand is the factor model reparametrized (the same
    column space of the fixed and of each term's random effects; with the other reference level the random
    block is T C T' of lme4's, T invertible), so its REML log-likelihood is lme4's for the factor model, within the
    tolerance of the test above. The two codings send the optimizer along different paths (theta differs)."""
    r = REF["fits"]["fh_factor_slopes"]
    d = _data("fhch2010")
    task_level, stim_level = ("lexdec", "nonword") if reference == "lme4's" else ("naming", "word")
    d["t01"] = (d["task"] == task_level).astype(float)
    d["s01"] = (d["stimulus"] == stim_level).astype(float)
    m = mixed.fit("log_rt ~ t01*s01 + (s01|id) + (t01|item)", d)
    assert m.loglik == pytest.approx(r["logLik"], abs=1e-4)
    assert m.converged
