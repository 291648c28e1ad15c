"""Simulated evaluation log for the factor random-slope checks against lme4 (tests/reference/factor_slopes.R,
tests/mixed/test_mixed_factor_slopes.py).

Command (from the repository root; writes the CSV, then lme4's fits of it and of afex's fhch2010):
    python tests/reference/factor_slopes_data.py tests/reference/factor_slopes_eval.csv.gz &&
    Rscript tests/reference/factor_slopes.R tests/reference > tests/reference/factor_slopes_lme4.json

``eval_log``: 3 systems (base, cand, big) x 4 seeds x 150 items, unbalanced (about 8 % of the rows dropped), a
system effect that varies by item (correlated across systems) and a run effect per system:seed.
"""
import sys

import numpy as np
import pandas as pd


def make() -> pd.DataFrame:
    rng = np.random.default_rng(20261124)
    systems, seeds, items = ["base", "cand", "big"], 4, 150
    cov = np.array([[0.04, 0.01, 0.012], [0.01, 0.02, 0.004], [0.012, 0.004, 0.03]])
    item_eff = rng.multivariate_normal(np.zeros(3), cov, items)   # per item: intercept, cand and big deviations
    rows = []
    for s_idx, s in enumerate(systems):
        for seed in range(seeds):
            run = rng.normal(0, 0.03)
            for i in range(items):
                slope = 0.0 if s_idx == 0 else item_eff[i, s_idx]
                score = 0.6 + [0, 0.02, 0.05][s_idx] + item_eff[i, 0] + slope + run + rng.normal(0, 0.08)
                rows.append({"system": s, "seed": f"s{seed}", "item": f"i{i:03d}", "score": round(score, 6)})
    df = pd.DataFrame(rows)
    keep = rng.random(len(df)) > 0.08
    return df[keep].reset_index(drop=True)


if __name__ == "__main__":
    make().to_csv(sys.argv[1], index=False)
