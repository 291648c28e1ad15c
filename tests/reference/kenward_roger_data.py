"""A simulated, unbalanced evaluation log with a numeric item covariate and random slopes, for the Kenward-Roger
reference values of tests/mixed/test_mixed_kr.py (tests/reference/kenward_roger.R).

Command (from the repository root; writes the CSV, then R's values):
    python tests/reference/kenward_roger_data.py tests/reference &&
    Rscript tests/reference/kenward_roger.R tests/reference > tests/reference/kenward_roger_pbkrtest.json

``kr_slopes``: 3 systems with 3, 4 and 3 seeds x 40 items; ``len`` (the item's centred source length / 10) shifts the
score with a slope that differs per system and per seed (seed slope SD 0.03); item SD 0.1, seed SD 0.05, residual
SD 0.1; about 15 % of the rows dropped.
"""
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def slopes() -> pd.DataFrame:
    rng = np.random.default_rng(22)
    n_items = 40
    items = rng.normal(0, 0.1, n_items)
    length = np.round(rng.normal(0, 1, n_items), 3)
    rows = []
    for s, shift, slope, seeds in [("a", 0.0, 0.02, 3), ("b", 0.04, 0.0, 4), ("c", 0.02, -0.03, 3)]:
        for seed in range(seeds):
            run, run_slope = rng.normal(0, 0.05), rng.normal(0, 0.03)
            y = 0.5 + shift + run + (slope + run_slope) * length + items + rng.normal(0, 0.1, n_items)
            rows += [{"system": s, "seed": f"s{seed}", "item": f"i{i:02d}", "len": length[i], "score": round(v, 8)}
                     for i, v in enumerate(y)]
    df = pd.DataFrame(rows)
    return df[rng.random(len(df)) > 0.15].reset_index(drop=True)


if __name__ == "__main__":
    slopes().to_csv(Path(sys.argv[1]) / "kr_slopes.csv.gz", index=False)
