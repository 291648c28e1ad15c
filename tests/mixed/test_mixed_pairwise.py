"""Pairwise contrasts of three systems with small-sample df against emmeans 1.8.4 (tests/reference/pairwise_df.R:
``lmer.df = "kenward-roger"`` through pbkrtest 0.5.2 and ``"satterthwaite"`` through lmerTest 3.1-3, Tukey's and
Holm's adjustments) on a 3 systems x 3 runs x 200 items log, runs random, with and without the system-by-item term.

Tolerance: estimate, SE, df, t and adjusted p to 1e-4 relative (issue 28's bar; measured: 4e-6 at worst, from the
two REML optima, which agree to 1e-10 in the criterion).
"""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from vrs_helpers import mixed
from vrs_helpers.mixed.inference import ddf
from vrs_helpers.mixed.models.marginal import emmeans

REF_DIR = Path(__file__).parent.parent / "reference"
REF = json.loads((REF_DIR / "pairwise_df_emmeans.json").read_text())
DATA = pd.read_csv(REF_DIR / "pairwise_three_systems.csv.gz", dtype={"run": str, "item": str})
_FITS: dict = {}


def _fit(name):
    if name not in _FITS:
        _FITS[name] = mixed.fit(REF["models"][name]["formula"], DATA)
    return _FITS[name]


@pytest.mark.parametrize("name", list(REF["models"]))
@pytest.mark.parametrize("lmer_df", ["kenward-roger", "satterthwaite"])
@pytest.mark.parametrize("adjust", ["tukey", "holm", "none"])
def test_pairwise_contrasts_equal_emmeans(name, lmer_df, adjust):
    m = _fit(name)
    assert m.deviance == pytest.approx(REF["models"][name]["REMLcrit"], abs=1e-6)
    e = emmeans(m, "system", adjust=adjust, lmer_df=lmer_df)
    theirs = pd.DataFrame(REF["models"][name][lmer_df][adjust])
    ours = e.contrasts
    assert list(ours["contrast"]) == list(theirs["contrast"])
    for a, b in [("estimate", "estimate"), ("SE", "SE"), ("df", "df"), ("t", "t.ratio"), ("p_value", "p.value")]:
        np.testing.assert_allclose(ours[a].to_numpy(), theirs[b].to_numpy(), rtol=1e-4, err_msg=a)


@pytest.mark.parametrize("name", list(REF["models"]))
@pytest.mark.parametrize("lmer_df", ["kenward-roger", "satterthwaite"])
def test_marginal_means_equal_emmeans(name, lmer_df):
    e = emmeans(_fit(name), "system", lmer_df=lmer_df)
    theirs = pd.DataFrame(REF["models"][name][lmer_df]["emmeans"])
    for a, b in [("emmean", "emmean"), ("SE", "SE"), ("df", "df"), ("lower", "lower.CL"), ("upper", "upper.CL")]:
        np.testing.assert_allclose(e.means[a].to_numpy(), theirs[b].to_numpy(), rtol=1e-4, err_msg=a)


def test_tukey_on_the_contrasts_df_is_more_conservative_than_z():
    """Issue 28: with 3 runs per system the z contrasts are liberal. On the same contrast, Tukey's p on ~6 df
    exceeds the z test's (the studentized range on finite df has heavier tails), and the 5 % critical value of
    |t| on 6 df, q(0.95; 3, 6) / sqrt 2 = 3.07, is what decides (closed form from scipy's studentized range)."""
    m = _fit("runs_random")
    z = emmeans(m, "system").contrasts
    t = emmeans(m, "system", lmer_df="kenward-roger").contrasts
    assert (t["p_value"].to_numpy() > z["p_value"].to_numpy()).all()
    assert "z" not in t and "t" in t and "df" in t
    crit = stats.studentized_range.ppf(0.95, 3, 6.0) / np.sqrt(2.0)
    assert crit == pytest.approx(3.07, abs=0.005)
    row = t.iloc[0]
    assert (row["p_value"] < 0.05) == (abs(row["t"]) > stats.studentized_range.ppf(0.95, 3, row["df"]) / np.sqrt(2))


def test_t_tests_reuse_the_adjustment_and_bad_requests_are_refused():
    m = _fit("runs_random")
    a = ddf.adjustment(m, "kenward-roger")
    emmeans(m, "system", lmer_df="KR")
    assert ddf.adjustment(m, "kenward-roger") is a
    with pytest.raises(mixed.MixedModelError, match="satterthwaite"):
        emmeans(m, "system", lmer_df="bootstrap")
    binary = DATA.assign(correct=(DATA["score"] > DATA["score"].median()).astype(int))
    g = mixed.glmer("correct ~ system + (1|item)", binary)
    with pytest.raises(mixed.MixedModelError, match="GLMM"):
        emmeans(g, "system", lmer_df="kenward-roger")
    assert "z" in emmeans(g, "system").contrasts  # GLMMs keep the asymptotic z tests


@pytest.mark.parametrize("k, df, scale", [(50, 100.0, 8.0), (30, 6.0, 3.0)])
def test_tukey_p_of_many_contrasts_equal_scipys_at_every_contrast(k, df, scale):
    """With more than 300 contrasts on one df, tukey_sf interpolates scipy's studentized range between nodes: every
    value within 1e-6 of scipy's own (computed here one by one), and exact within 0.05 of the critical value."""
    from scipy import stats

    from vrs_helpers.mixed.models.marginal import tukey_critical, tukey_sf

    rng = np.random.default_rng(k)
    z = rng.normal(0, scale, 320)
    crit = tukey_critical(0.95, k, np.full(320, df))
    z[:3] = crit[0] + np.array([-0.01, 0.001, 0.01])  # at the decision's edge
    dfs = df + rng.uniform(-1e-8, 1e-8, 320)  # one df up to its last digits, as Kenward-Roger's in balanced designs
    ours = tukey_sf(z, k, dfs, crit)
    scipy = np.array([stats.studentized_range.sf(abs(v) * np.sqrt(2), k, d) for v, d in zip(z, dfs, strict=True)])
    np.testing.assert_allclose(ours, scipy, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(ours[:3], scipy[:3])
    assert np.array_equal(ours < 0.05, np.abs(z) > crit)
