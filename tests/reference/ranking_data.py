"""Data of tests/reference/ranking_twelve.R (issue 38): 12 systems x 3 seeds x 40 items of continuous scores with item,
system-by-item and run variation; the system means step by 0.08 residual SDs, so some pairs are separated and some
are not. Command (from the repository root): python tests/reference/ranking_data.py"""

from pathlib import Path

import numpy as np
import pandas as pd


def twelve_systems(seed: int = 38) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    systems, seeds, items = 12, 3, 40
    item = rng.normal(0, 0.5, items)
    rows = []
    for s in range(systems):
        sxi = rng.normal(0, 0.15, items)
        for r in range(seeds):
            run = rng.normal(0, 0.05)
            for i in range(items):
                rows.append({"system": f"m{s:02d}", "seed": f"r{r}", "item": f"i{i:02d}",
                             "score": 0.08 * s + item[i] + sxi[i] + run + rng.normal(0, 0.3)})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    twelve_systems().to_csv(Path(__file__).with_name("ranking_twelve.csv.gz"), index=False)
