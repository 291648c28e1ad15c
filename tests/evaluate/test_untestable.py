"""The smallest p-value of the small-sample tests (vrs_helpers.evaluate.logs.untestable.smallest_p) against the tests
themselves on the most extreme data (issue 52)."""

import math

import numpy as np
import pandas as pd
import pytest

from vrs_helpers.evaluate.logs.untestable import smallest_p, untestable_reason
from vrs_helpers.evaluate.tables.small_data import small_test


def _long(wide):
    return pd.DataFrame([{"system": f"s{j}", "item": str(i), "score": float(v)}
                         for i, row in enumerate(wide) for j, v in enumerate(row)])


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 8])
def test_two_systems_extreme_data_reach_the_bound(n):
    binary = _long([[0, 1]] * n)                               # every item won by s1: McNemar's extreme
    cont = _long([[0.0, 0.1 * (i + 1)] for i in range(n)])     # distinct positive differences: the sign-flip extreme
    for d in (binary, cont):
        assert small_test(d)["p_value"] == pytest.approx(0.5 ** n, rel=1e-12)
    assert (untestable_reason(n, 2, 0.05) is None) == (0.5 ** n < 0.05)


def test_three_systems_bound_within_monte_carlo_error():
    wide = np.array([[0.0, 0.5, 1.0], [0.1, 0.6, 1.2]])        # 2 items, each ordered alike: the most extreme
    got = small_test(_long(wide))["p_value"]
    want = smallest_p(2, 3)
    assert want == pytest.approx(0.5 / math.factorial(3), rel=1e-12)
    assert abs(got - want) < 4 * math.sqrt(want * (1 - want) / 20000) + 1 / 20001
    assert untestable_reason(2, 3, 0.05) is not None and untestable_reason(3, 3, 0.05) is None


def test_bounds_decrease_with_items():
    for k in (2, 3, 4):
        ps = [smallest_p(n, k) for n in range(1, 10)]
        assert all(a > b for a, b in zip(ps[:-1], ps[1:], strict=True))
