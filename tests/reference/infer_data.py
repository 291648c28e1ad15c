"""Simulated data for the R references of issue 28 (type I/II/III anova tables, pairwise contrasts with small-sample
df, the parametric-bootstrap LRT of a GLMM): tests/reference/anova_types.R, pairwise_df.R, glmm_pbmodcomp.R.

Command (from the repository root; writes the CSVs that the R scripts read):
    python tests/reference/infer_data.py tests/reference

- ``anova_factorial.csv.gz``: factors A (3 levels), B (2), C (2), a numeric covariate x (mean 1, not centred) and 24
  groups g, one row per group and A x B x C cell, 12 % of the rows dropped (unbalanced), with main effects, two- and
  three-way interactions, random intercepts and random x slopes per group.
- ``pairwise_three_systems.csv.gz``: 3 systems x 3 runs x 200 items (continuous score, run SD 0.03, item SD 0.1,
  system-by-item SD 0.05, residual SD 0.1, system shifts 0, 0.02, 0.05), 5 % of the rows dropped.
- ``glmm_pb_binary.csv.gz``: 0/1 scores of 2 systems x 4 seeds x 250 items (logit scale: item SD 1, seed SD 0.35,
  system difference 0.25); ``glmm_pb_trials.csv.gz``: successes of 8 trials per system, seed and item (2 systems x
  3 seeds x 120 items, item SD 0.8, seed SD 0.3, difference 0.15).
"""
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def anova_factorial() -> pd.DataFrame:
    rng = np.random.default_rng(2801)
    A, B, C = ["a1", "a2", "a3"], ["b1", "b2"], ["c1", "c2"]
    ga = rng.normal(0, 0.8, 24)
    gx = rng.normal(0, 0.3, 24)
    eff_a = {"a1": 0.0, "a2": 0.4, "a3": -0.2}
    eff_b = {"b1": 0.0, "b2": 0.3}
    eff_c = {"c1": 0.0, "c2": -0.25}
    rows = []
    for g in range(24):
        for a in A:
            for b in B:
                for c in C:
                    x = rng.normal(1.0, 1.0)
                    y = (1.0 + eff_a[a] + eff_b[b] + eff_c[c] + (0.5 if (a, b) == ("a2", "b2") else 0.0)
                         + (-0.4 if (b, c) == ("b2", "c2") else 0.0) + (0.6 if (a, b, c) == ("a3", "b2", "c2") else 0.0)
                         + (0.5 + (0.3 if a == "a2" else 0.0)) * x + ga[g] + gx[g] * x + rng.normal(0, 0.7))
                    rows.append({"g": f"g{g:02d}", "A": a, "B": b, "C": c, "x": round(x, 6), "y": round(y, 6)})
    df = pd.DataFrame(rows)
    return df[rng.random(len(df)) > 0.12].reset_index(drop=True)


def pairwise_three_systems() -> pd.DataFrame:
    rng = np.random.default_rng(2802)
    items = rng.normal(0, 0.1, 200)
    rows = []
    for s, shift in [("A", 0.0), ("B", 0.02), ("C", 0.05)]:
        si = rng.normal(0, 0.05, 200)
        for run in range(3):
            r = rng.normal(0, 0.03)
            y = 0.5 + shift + r + items + si + rng.normal(0, 0.1, 200)
            rows += [{"system": s, "run": f"r{run}", "item": f"i{i:03d}", "score": round(v, 8)}
                     for i, v in enumerate(y)]
    df = pd.DataFrame(rows)
    return df[rng.random(len(df)) > 0.05].reset_index(drop=True)


def glmm_log(seed: int, seeds: int, items: int, item_sd: float, seed_sd: float, mean: float, shift: float,
             trials: int | None = None) -> pd.DataFrame:
    """Scores of systems base and new: 0/1 (``trials`` None: column ``correct``) or successes of ``trials``."""
    rng = np.random.default_rng(seed)
    item = rng.normal(0, item_sd, items)
    rows = []
    for s, d in [("base", 0.0), ("new", shift)]:
        for sd in range(seeds):
            p = 1.0 / (1.0 + np.exp(-(mean + d + rng.normal(0, seed_sd) + item)))
            if trials is None:
                y = (rng.random(items) < p).astype(int)
                rows += [{"system": s, "seed": f"s{sd}", "item": f"i{i:03d}", "correct": int(v)}
                         for i, v in enumerate(y)]
            else:
                k = rng.binomial(trials, p)
                rows += [{"system": s, "seed": f"s{sd}", "item": f"i{i:03d}", "successes": int(v),
                          "failures": int(trials - v)} for i, v in enumerate(k)]
    return pd.DataFrame(rows)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    anova_factorial().to_csv(out / "anova_factorial.csv.gz", index=False)
    pairwise_three_systems().to_csv(out / "pairwise_three_systems.csv.gz", index=False)
    glmm_log(2803, 4, 250, 1.0, 0.35, 0.4, 0.25).to_csv(out / "glmm_pb_binary.csv.gz", index=False)
    glmm_log(2804, 3, 120, 0.8, 0.3, 0.2, 0.15, trials=8).to_csv(out / "glmm_pb_trials.csv.gz", index=False)
