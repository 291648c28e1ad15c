"""Simulated data for the small-data GAM checks against mgcv (tests/reference/gam_small.R) and pygam.

Run ``python tests/reference/gam_small_data.py /tmp/gam_small.csv`` to write the CSV the R script reads."""
import sys

import numpy as np
import pandas as pd


def make(n: int = 600, seed: int = 20261122) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1 = rng.uniform(0, 1, n)
    x2 = rng.normal(0, 1, n)
    x3 = rng.uniform(-2, 2, n)
    y = np.sin(2 * np.pi * x1) + 0.5 * x2 + rng.normal(0, 0.4, n)
    eta = 2 * np.sin(2 * np.pi * x1) + x2
    yb = (rng.uniform(0, 1, n) < 1 / (1 + np.exp(-eta))).astype(float)
    return pd.DataFrame({"x1": x1, "x2": x2, "x3": x3, "y": y, "yb": yb})


if __name__ == "__main__":
    make().to_csv(sys.argv[1], index=False, float_format="%.17g")
