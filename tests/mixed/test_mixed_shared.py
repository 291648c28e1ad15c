"""One accumulation shared by the models of one data set (vrs_helpers.mixed.models.shared): the statistics of a model
restricted from a wider model's equal those of a pass over the rows for the model itself, and the cache's fits
equal mixed.fit's.

Reference: the model's own accumulation (mixed.accumulate), whose sums are the same numbers added in another order
(cells of the wider model merged): 1e-12 relative on the cross-products; fits to 1e-9 relative in the
log-likelihood (the optimizer sees the same function up to that rounding), estimates to 1e-5 relative (the
optimizer's stopping tolerance moves theta, and so beta, by that much)."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vrs_helpers import mixed
from vrs_helpers.mixed.models.shared import restrict


def _data(n=1800, seed=3, levels=("a", "b", "c")):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"sys": rng.choice(list(levels), n), "grp": rng.choice(["s", "m", "l"], n),
                       "item": rng.integers(0, 90, n), "run": rng.integers(0, 5, n).astype(str),
                       "x": rng.normal(size=n), "z": rng.uniform(1, 3, n)})
    run_effect = {(s, r): rng.normal(0, 0.5) for s in levels for r in map(str, range(5))}
    df["y"] = (rng.normal(size=n) + 0.3 * df.x + 0.5 * (df.sys == "b") + rng.normal(0, 0.7, 90)[df.item]
               + [run_effect[k] for k in zip(df.sys, df.run, strict=True)] + 0.1 * df.z * (df.grp == "l"))
    return df


R = "(1|item) + (1|sys:run)"
WIDE = f"y ~ sys * x + grp * z + {R}"
NARROW = [f"y ~ 1 + {R}", f"y ~ sys + {R}", f"y ~ x + {R}", f"y ~ sys + x + {R}", f"y ~ sys * x + {R}",
          f"y ~ grp + {R}", f"y ~ grp * z + {R}", f"y ~ sys + grp + z + {R}", f"y ~ 0 + x + {R}"]


def _same_stats(a, b):
    assert a.fixed_names == b.fixed_names and a.n == b.n and a.levels == b.levels
    assert a.factor_levels == b.factor_levels and a.monomials == b.monomials
    assert a.numeric_means == pytest.approx(b.numeric_means, rel=1e-12)
    pd.testing.assert_frame_equal(a.cells.reset_index(drop=True), b.cells.reset_index(drop=True), check_dtype=False)
    np.testing.assert_array_equal(a.T, b.T)
    np.testing.assert_allclose(a.XtX, b.XtX, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(a.Xty, b.Xty, rtol=1e-12, atol=1e-9)
    for u, v in zip(a.ZtX, b.ZtX, strict=True):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("formula", NARROW)
def test_restricted_statistics_equal_own_pass(formula):
    df = _data()
    wide = mixed.accumulate(WIDE, df)
    own = mixed.accumulate(formula, df)
    _same_stats(restrict(wide, formula), own)
    # the model fitted from them is the model fitted from its rows (rows of other cells: X beta per row)
    fit = mixed.fit_stats(restrict(wide, formula), "ML")
    assert fit.loglik == pytest.approx(mixed.fit(formula, df, method="ML").loglik, rel=1e-9)
    rows = df.sample(20, random_state=1)
    np.testing.assert_allclose(mixed.design_rows(restrict(wide, formula), rows), mixed.design_rows(own, rows),
                               rtol=1e-12)


@pytest.mark.parametrize("formula", [f"y ~ 0 + sys + {R}",  # full dummy coding: sysa is not a column of WIDE
                                     "y ~ sys + (1|item)",  # another random part
                                     f"x ~ sys + {R}",  # another response
                                     f"y ~ sys + run + {R}"])  # a variable WIDE does not have
def test_refused_when_not_a_submodel(formula):
    assert restrict(mixed.accumulate(WIDE, _data()), formula) is None


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), k=st.integers(2, 4), terms=st.sets(st.sampled_from(["sys", "x", "sys:x", "z"]),
                                                                      max_size=4))
def test_cache_fits_equal_mixed_fit(seed, k, terms):
    """Any hierarchical fixed part under the planned wider model: the cache's REML and ML fits are mixed.fit's."""
    if "sys:x" in terms:
        terms |= {"sys", "x"}
    df = _data(n=600, seed=seed, levels=tuple("abcd"[:k]))
    formula = f"y ~ {' + '.join(['1', *sorted(terms)])} + {R}"
    cache = mixed.ModelCache(df).plan(f"y ~ sys * x + z + {R}")
    for method in ("REML", "ML"):
        ours, ref = cache.fit(formula, method), mixed.fit(formula, df, method=method)
        assert list(ours.fixed_effects.index) == list(ref.fixed_effects.index)
        assert ours.loglik == pytest.approx(ref.loglik, rel=1e-9)
        np.testing.assert_allclose(ours.fixed_effects["estimate"], ref.fixed_effects["estimate"], rtol=1e-5,
                                   atol=1e-7)
    assert cache.fit(formula, "ML") is cache.fit(formula, "REML").ml_fit()  # one ML fit, shared
    assert len(cache._stats) == 1  # one pass over the rows for every model


def test_lrt_of_cached_fits_equals_lrt_of_own_fits():
    df = _data()
    cache = mixed.ModelCache(df).plan(f"y ~ sys * x + {R}")
    ours = mixed.lrt(cache.fit(f"y ~ 1 + {R}", "ML"), cache.fit(f"y ~ sys + {R}"))
    ref = mixed.lrt(mixed.fit(f"y ~ 1 + {R}", df), mixed.fit(f"y ~ sys + {R}", df))
    assert ours.refitted_ml and ref.refitted_ml
    assert ours.chi2 == pytest.approx(ref.chi2, rel=1e-6, abs=1e-7) and ours.df == ref.df
    np.testing.assert_allclose(cache.fit(f"y ~ sys + {R}").residuals, mixed.fit(f"y ~ sys + {R}", df).residuals,
                               rtol=1e-6, atol=1e-8)
