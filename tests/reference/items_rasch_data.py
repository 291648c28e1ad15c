"""The 0/1 score table of issue 55's item-analysis reference (items_rasch.R): a Rasch benchmark.

Command: PYTHONPATH=. .venv/bin/python tests/reference/items_rasch_data.py   (writes items_rasch.csv.gz)

12 models x 80 items x 2 runs (run labels 0 and 1 shared by every model). Abilities N(0, 1), item difficulties
N(0, 1.5^2); each run draws every answer independently with P(correct) = logistic(ability - difficulty); the
answers of items 0-2 are flipped (mislabelled: the better models get them wrong). Seed 5580.
"""

from pathlib import Path

import numpy as np
import pandas as pd

SEED = 5580
MODELS, ITEMS, RUNS = 12, 80, 2


def table() -> pd.DataFrame:
    rng = np.random.default_rng(SEED)
    ability = rng.normal(0, 1, MODELS)
    difficulty = rng.normal(0, 1.5, ITEMS)
    p = 1 / (1 + np.exp(-(ability[:, None] - difficulty[None, :])))
    y = (rng.random((RUNS, MODELS, ITEMS)) < p[None]).astype(int)
    y[:, :, :3] = 1 - y[:, :, :3]
    r, m, i = np.meshgrid(np.arange(RUNS), np.arange(MODELS), np.arange(ITEMS), indexing="ij")
    return pd.DataFrame({"model": [f"model-{k:02d}" for k in m.ravel()], "item": [f"q{k:03d}" for k in i.ravel()],
                         "run": r.ravel(), "correct": y.ravel()})


if __name__ == "__main__":
    out = Path(__file__).resolve().parent / "items_rasch.csv.gz"
    table().to_csv(out, index=False, compression={"method": "gzip", "mtime": 0})
    print(out)
