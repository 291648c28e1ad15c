"""Simulate the crossed participants x items binary design for the GLMM reference (tests/reference/glmm.R).

Command: .venv/bin/python tests/reference/glmm_data.py   (writes tests/reference/glmm_crossed.csv.gz)
"""

from pathlib import Path

import numpy as np
import pandas as pd


def main() -> None:
    rng = np.random.default_rng(20261124)
    n_part, n_item = 40, 200
    part = rng.normal(0, 0.8, n_part)
    item = rng.normal(0, 1.2, n_item)
    cond_item = np.tile(["a", "b"], n_item // 2)  # condition varies between items
    p, i = np.meshgrid(np.arange(n_part), np.arange(n_item), indexing="ij")
    p, i = p.ravel(), i.ravel()
    eta = 0.4 + 0.6 * (cond_item[i] == "b") + part[p] + item[i]
    correct = (rng.random(len(eta)) < 1 / (1 + np.exp(-eta))).astype(int)
    df = pd.DataFrame({"participant": [f"p{k:02d}" for k in p], "item": [f"i{k:03d}" for k in i],
                       "condition": cond_item[i], "correct": correct})
    df.to_csv(Path(__file__).with_name("glmm_crossed.csv.gz"), index=False)


if __name__ == "__main__":
    main()
