"""Simulated evaluation logs with planted effects for tests/evaluate/test_analysis.py (lme4 reference:
own_analysis.R -> own_analysis_lme4.json).

    python tests/reference/own_analysis_data.py      # writes own_analysis_{two,three}.csv.gz here

two:   2 systems x 5 seeds x 300 items; system effect 0.02, run SD 0.02, item SD 0.1, residual SD 0.05; the
       difference grows with item length (0.0005 per unit) and differs between 3 domains.
three: 3 systems x 3 seeds x 2 learning rates x 120 items; effects 0 / 0.01 / 0.04, seed SD 0.01, lr SD 0.02.
"""

from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent


def two(seed=101):
    rng = np.random.default_rng(seed)
    n_item = 300
    items = pd.DataFrame({"item": [f"s{i:03d}" for i in range(n_item)], "length": rng.integers(3, 60, n_item),
                          "domain": rng.choice(["news", "web", "speech"], n_item)})
    item_eff = rng.normal(0, 0.1, n_item)
    dom = items["domain"].map({"news": 0.0, "web": 0.01, "speech": -0.01}).to_numpy()
    rows = []
    for s, name in enumerate(["base", "new"]):
        for r in range(5):
            run = rng.normal(0, 0.02)
            y = (0.5 + 0.02 * s + s * 0.0005 * (items["length"].to_numpy() - 30) + s * dom + run + item_eff
                 + rng.normal(0, 0.05, n_item))
            rows.append(items.assign(system=name, seed=f"seed{r}", score=y))
    return pd.concat(rows, ignore_index=True)[["system", "seed", "item", "length", "domain", "score"]]


def three(seed=202):
    rng = np.random.default_rng(seed)
    n_item = 120
    item_eff = rng.normal(0, 0.1, n_item)
    rows = []
    for name, eff in [("A", 0.0), ("B", 0.01), ("C", 0.04)]:
        lr_eff = rng.normal(0, 0.02, 2)
        for r in range(3):
            seed_eff = rng.normal(0, 0.01)
            for j, lr in enumerate(["1e-4", "3e-4"]):
                y = 0.3 + eff + lr_eff[j] + seed_eff + item_eff + rng.normal(0, 0.04, n_item)
                rows.append(pd.DataFrame({"system": name, "seed": f"r{r}", "lr": lr,
                                          "item": [f"i{i}" for i in range(n_item)], "score": y}))
    return pd.concat(rows, ignore_index=True)


if __name__ == "__main__":
    two().to_csv(HERE / "own_analysis_two.csv.gz", index=False, float_format="%.10g")
    three().to_csv(HERE / "own_analysis_three.csv.gz", index=False, float_format="%.10g")
