"""Simulated evaluation logs for the small-sample F tests against lmerTest / pbkrtest
(tests/reference/small_sample.R, tests/mixed/test_mixed_ddf.py).

Command (from the repository root; writes the CSVs, then R's values):
    python tests/reference/small_sample_data.py tests/reference &&
    Rscript tests/reference/small_sample.R tests/reference > tests/reference/small_sample_lmertest.json

- ``three_seeds``: 2 systems x 3 seeds x 400 items, a true difference of half the run SD (run SD 0.05, item SD 0.1,
  residual SD 0.1): the design of issue 20.
- ``unbalanced``: 3 systems with 3, 4 and 5 seeds x 150 items, about 10 % of the rows dropped.
"""
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def three_seeds() -> pd.DataFrame:
    rng = np.random.default_rng(20)
    items = rng.normal(0, 0.1, 400)
    rows = []
    for s, shift in [("base", 0.0), ("new", 0.025)]:
        for seed in range(3):
            run = rng.normal(0, 0.05)
            y = 0.5 + shift + run + items + rng.normal(0, 0.1, 400)
            rows += [{"system": s, "seed": f"s{seed}", "item": f"i{i:03d}", "score": round(v, 8)}
                     for i, v in enumerate(y)]
    return pd.DataFrame(rows)


def unbalanced() -> pd.DataFrame:
    rng = np.random.default_rng(21)
    items = rng.normal(0, 0.2, 150)
    rows = []
    for s, shift, seeds in [("a", 0.0, 3), ("b", 0.03, 4), ("c", 0.06, 5)]:
        for seed in range(seeds):
            run = rng.normal(0, 0.04)
            y = 0.4 + shift + run + items + rng.normal(0, 0.15, 150)
            rows += [{"system": s, "seed": f"s{seed}", "item": f"i{i:03d}", "score": round(v, 8)}
                     for i, v in enumerate(y)]
    df = pd.DataFrame(rows)
    return df[rng.random(len(df)) > 0.1].reset_index(drop=True)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    three_seeds().to_csv(out / "small_sample_three_seeds.csv.gz", index=False)
    unbalanced().to_csv(out / "small_sample_unbalanced.csv.gz", index=False)
