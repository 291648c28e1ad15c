"""Simulate a binary evaluation log (per-item correct/incorrect) for the GLMM reference (tests/reference/glmm_eval.R).

Command: .venv/bin/python tests/reference/glmm_eval_data.py   (writes tests/reference/glmm_eval.csv.gz)

3 systems x 5 seeds x 300 items = 4,500 rows. On the logit scale: intercept 0.6, item difficulty SD 1.3, run
(system:seed) SD 0.2, system effects 0 / 0.25 / 0.45; the third system gains a further 0.5 on "web" items and the
second loses 0.012 per unit of item length (centred at 30): conditional effects for the by= and covariate= GLRTs.
"""

from pathlib import Path

import numpy as np
import pandas as pd


def simulate(seed: int = 20261125) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n_item, n_seed = 300, 5
    difficulty = rng.normal(0.0, 1.3, n_item)
    domain = rng.choice(["news", "web", "speech"], n_item)
    length = rng.integers(5, 60, n_item)
    rows = []
    for k, (name, effect) in enumerate([("base", 0.0), ("large", 0.25), ("tuned", 0.45)]):
        for s in range(n_seed):
            run = rng.normal(0.0, 0.3)
            eta = (0.6 + effect + run + difficulty + (k == 2) * 0.5 * (domain == "web")
                   - (k == 1) * 0.012 * (length - 30))
            correct = (rng.random(n_item) < 1.0 / (1.0 + np.exp(-eta))).astype(int)
            rows.append(pd.DataFrame({"system": name, "seed": f"s{s}", "item": [f"q{i:03d}" for i in range(n_item)],
                                      "domain": domain, "length": length, "correct": correct}))
    return pd.concat(rows, ignore_index=True)


if __name__ == "__main__":
    simulate().to_csv(Path(__file__).with_name("glmm_eval.csv.gz"), index=False,
                    compression={"method": "gzip", "mtime": 0})  # byte-identical on every run
