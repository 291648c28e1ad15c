"""Data of the boundary-trap regression test (tests/mixed/test_mixed_slopes.py::test_not_trapped_at_zero_variances).

    python tests/reference/boundary_trap_data.py tests/reference/boundary_trap.csv.gz
    Rscript tests/reference/boundary_trap.R tests/reference/boundary_trap.csv.gz \
        > tests/reference/boundary_trap_lme4.json

y ~ x + (x||run) + (1|item) on these rows once stopped at all variances 0 (a stationary point of theta whatever the
data say) when fitted from one DataFrame, and at lme4's optimum when fitted from chunks.
"""

import sys

import numpy as np
import pandas as pd


def make(n=2400, seed=1):
    """The rows of tests/mixed/test_mixed_partial.py's _data (same generator and draws)."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"sys": rng.choice(["a", "b", "c"], n), "len": rng.choice(["s", "l"], n),
                       "item": rng.integers(0, 150, n), "run": rng.integers(0, 6, n).astype(str),
                       "x": rng.normal(size=n)})
    df["y"] = rng.normal(size=n) + 0.3 * df.x + 0.5 * (df.sys == "b") + 0.1 * (df.item % 7) + 0.2 * df.x * (
        df.item % 3)
    return df.sort_values("item", kind="stable").reset_index(drop=True)


if __name__ == "__main__":
    make().to_csv(sys.argv[1], index=False)
