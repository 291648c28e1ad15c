"""Benchmark: leaderboard-sized tables (issue 54) through `vrs analyze` end to end, beside evalstats in the same run.

    python benchmarks/leaderboard.py [--designs lb100 lb100x3 cont50] [--evalstats PATH] [--write-only DIR]

Designs (simulated here; model m's ability a_m ~ N(0, 0.5), item j's difficulty b_j ~ N(0, 1), per run a run
effect N(0, 0.05) for binary and N(0, 0.02) for continuous scores):
  lb100     0/1, 100 models x 1 run x 10,000 items (10^6 rows), P(correct) = logistic(a_m - b_j) (goal <= 30 s)
  lb100x3   0/1, 100 models x 3 runs x 3,000 items (9 x 10^5 rows)                            (goal <= 60 s)
  cont50    continuous, 50 models x 3 runs x 1,000 items, a_m/10 - b_j/10 + run + N(0, 0.1)   (goal <= 30 s)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

DESIGNS = {"lb100": (100, 1, 10_000, True, 30.0), "lb100x3": (100, 3, 3_000, True, 60.0),
           "cont50": (50, 3, 1_000, False, 30.0)}


def simulate(models: int, runs: int, items: int, binary: bool, seed: int = 1) -> pd.DataFrame:
    """One row per model, run and item: columns model, run, item, score."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(0, 0.5, models)
    difficulty = rng.normal(0, 1.0, items)
    eta = (ability[:, None, None] - difficulty[None, None, :]
           + rng.normal(0, 0.05 if binary else 0.02, (models, runs, 1)))
    if binary:
        score = (rng.random(eta.shape) < 1 / (1 + np.exp(-eta))).astype(np.int8)
    else:
        score = np.round(eta / 10 + rng.normal(0, 0.1, eta.shape), 6)
    m, r, j = np.meshgrid(np.arange(models), np.arange(runs), np.arange(items), indexing="ij")
    return pd.DataFrame({"model": np.char.add("m", np.char.zfill(m.ravel().astype(str), 3)),
                         "run": r.ravel(), "item": j.ravel(), "score": score.ravel()})
