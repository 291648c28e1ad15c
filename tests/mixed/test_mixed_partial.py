"""Mergeable sufficient statistics (vrs_helpers.mixed.structure.accumulate): partials of partitions merged in any tree
give the
statistics of one pass over the same rows (no Dask needed)."""

import numpy as np
import pandas as pd
import pytest

from vrs_helpers import mixed
from vrs_helpers.mixed.structure.accumulate import PartialStats, merge_all, partial
from vrs_helpers.mixed.structure.errors import MixedModelError


def _data(n=2400, seed=1):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"sys": rng.choice(["a", "b", "c"], n), "len": rng.choice(["s", "l"], n),
                       "item": rng.integers(0, 150, n), "run": rng.integers(0, 6, n).astype(str),
                       "x": rng.normal(size=n)})
    df["y"] = rng.normal(size=n) + 0.3 * df.x + 0.5 * (df.sys == "b") + 0.1 * (df.item % 7) + 0.2 * df.x * (
        df.item % 3)
    df = df.sort_values("item", kind="stable").reset_index(drop=True)  # items first appear in late chunks
    df["len"] = pd.Categorical(df["len"], categories=["s", "l"])
    return df


FORMULAS = ["y ~ sys * len + (1|item) + (1|run)", "y ~ sys + x + (1 + x|item) + (1|run)",
            "y ~ sys + (1|item) + (1|item:run)", "y ~ x + (x||run) + (1|item)", "y ~ 1 + (1|run/item)"]


@pytest.mark.parametrize("formula", FORMULAS)
def test_merged_partials_equal_one_pass(formula):
    df = _data()
    chunks = [df.iloc[i:i + 400] for i in range(0, len(df), 400)]
    one_pass = mixed.accumulate(formula, chunks)
    parts = [partial(formula, c, label=f"chunk {i}") for i, c in enumerate(chunks)]
    for merged in (merge_all(parts), merge_all([merge_all(parts[:2]), merge_all(parts[2:5]), parts[5]]),
                   parts[0].merge(parts[1]).merge(merge_all(parts[2:]))):
        s = merged.finalize()
        assert s.levels == one_pass.levels and s.fixed_names == one_pass.fixed_names
        assert s.factor_levels == one_pass.factor_levels and s.n == one_pass.n
        np.testing.assert_allclose(s.XtX, one_pass.XtX, rtol=1e-12)
        np.testing.assert_allclose(s.Xty, one_pass.Xty, rtol=1e-12)
        for a, b in zip(s.ZtX + s.Zty + s.ZtZ_diag, one_pass.ZtX + one_pass.Zty + one_pass.ZtZ_diag, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9)
        for k in s.ZtZ_cross:
            assert abs(s.ZtZ_cross[k] - one_pass.ZtZ_cross[k]).max() < 1e-9
    assert parts[0].n == 400 and sum(p.n for p in parts) == len(df)  # merging changed no partial
    ml = mixed.fit_stats(merge_all(parts).finalize(), "ML")
    # the local streaming fit of the same chunks and the fit of the whole DataFrame (for y ~ x + (x||run) + (1|item)
    # the latter once stopped at all variances 0: tests/mixed/test_mixed_slopes.py::test_not_trapped_at_zero_variances)
    assert ml.loglik == pytest.approx(mixed.fit(formula, chunks, method="ML").loglik, rel=1e-9)
    assert ml.loglik == pytest.approx(mixed.fit(formula, df, method="ML").loglik, rel=1e-9)


def test_empty_partials_and_type_conflicts():
    df = _data()
    f = FORMULAS[0]
    empty = PartialStats(f, label="partition 0")
    merged = merge_all([empty, partial(f, df), PartialStats(f)])
    assert merged.finalize().n == len(df)
    bad = df.iloc[:10].assign(sys=1.0)
    with pytest.raises(MixedModelError, match=r"'sys' is a factor in partition 1 but numeric in partition 2"):
        partial(f, df, label="partition 1").merge(partial(f, bad, label="partition 2"))
    with pytest.raises(MixedModelError, match=r"'len'.*\(partition 3\)"):
        partial(f, df.drop(columns="len"), label="partition 3")
