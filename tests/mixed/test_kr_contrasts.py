"""Issue 54: Kenward-Roger df of many contrasts from one matrix pass (kenward_roger.contrast_dfs) against the
one-at-a-time F test (kenward_roger.f_test, checked against pbkrtest in test_mixed_kr.py), on unbalanced and
balanced designs with runs random."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from vrs_helpers import mixed
from vrs_helpers.mixed.inference import kenward_roger


def _data(seed: int, drop: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    k, runs, items = 7, 3, 40
    rows = [(f"s{s}", r, i) for s in range(k) for r in range(runs) for i in range(items)]
    d = pd.DataFrame(rows, columns=["system", "run", "item"])
    run_eff = {(s, r): rng.normal(0, 0.2) for s in range(k) for r in range(runs)}
    d["y"] = (d["system"].str[1:].astype(int) * 0.05 + rng.normal(0, 1, items)[d["item"]]
              + np.array([run_eff[int(s[1:]), r] for s, r in zip(d["system"], d["run"], strict=True)])
              + rng.normal(0, 0.5, len(d)))
    keep = rng.random(len(d)) >= drop
    return d[keep].reset_index(drop=True)


@pytest.mark.parametrize("seed,drop", [(1, 0.0), (2, 0.15)])
def test_contrast_dfs_equal_f_tests(seed, drop):
    m = mixed.fit("y ~ system + (1|item) + (1|system:run)", _data(seed, drop))
    adj = kenward_roger.adjustment(m)
    p = len(m.fixed_effects)
    means = np.column_stack([np.ones(7), np.vstack([np.zeros(p - 1), np.eye(p - 1)])])
    pairs = np.array([means[i] - means[j] for i, j in itertools.combinations(range(7), 2)])
    C = np.vstack([means, pairs])
    one_by_one = np.array([kenward_roger.f_test(adj, c[None]).den_df for c in C])
    np.testing.assert_allclose(kenward_roger.contrast_dfs(adj, C), one_by_one, rtol=1e-9)
