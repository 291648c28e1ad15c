"""Data of tests/reference/ranking_twelve.R and ranking_binary.R (issue 38): 12 systems x 3 seeds x 40 items of
continuous scores with item,
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




def twelve_binary(seed: int = 3812) -> pd.DataFrame:
    """12 systems x 3 seeds x 100 items of 0/1 scores (tests/reference/ranking_binary.R): logit item SD 1, system x
    item SD 0.3, run SD 0.1; the systems' logits step by 0.15, so near neighbours are not separated and far ones
    are."""
    rng = np.random.default_rng(seed)
    systems, seeds, items = 12, 3, 100
    item = rng.normal(0.3, 1.0, items)
    rows = []
    for s in range(systems):
        sxi = rng.normal(0, 0.3, items)
        for r in range(seeds):
            run = rng.normal(0, 0.1)
            eta = 0.15 * s + item + sxi + run
            y = (rng.random(items) < 1 / (1 + np.exp(-eta))).astype(int)
            rows += [{"system": f"m{s:02d}", "seed": f"r{r}", "item": f"i{i:03d}", "score": int(v)}
                     for i, v in enumerate(y)]
    return pd.DataFrame(rows)


if __name__ == "__main__":
    twelve_systems().to_csv(Path(__file__).with_name("ranking_twelve.csv.gz"), index=False)
    twelve_binary().to_csv(Path(__file__).with_name("ranking_binary.csv.gz"), index=False)
