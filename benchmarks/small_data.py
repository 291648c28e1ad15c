"""Type-I error of the small-data verdict of `vrs analyze LOGDIR` (issue 40): a task with fewer than 30 items is
decided by the exact McNemar mid-p test (0/1 scores, one run) or the sign-flip permutation test
(vrs_helpers.evaluate.tables.small_data.small_test, exactly what the task's row calls).

    python benchmarks/small_data.py [--sims 20000] [--seed 40] [--out benchmarks/results/small_data.md]

Cell: 2 systems x 1 run x 20 items, 0/1 scores, no system difference: P(correct) = expit(logit(0.6) + b_i + c_si),
item effects b ~ N(0, item_sd^2), system-by-item effects c ~ N(0, 0.5^2) (vrs_helpers.evaluate.logs.readers.writers.
simulate_binary), item_sd 0.5, 1 and 2; plus a continuous cell (normal scores, item SD 1, residual SD 1) for the
sign-flip permutation test. Reported: the rejection rate at alpha 0.05 with its Monte-Carlo SE; the acceptance
range of issue 40 is [0.02, 0.065].
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from vrs_helpers.evaluate.logs.readers.writers import simulate_binary
from vrs_helpers.evaluate.tables.small_data import small_test


def rejection_rate(make, sims: int, seed: int) -> tuple[float, float]:
    rng = np.random.SeedSequence(seed)
    hits = 0
    for child in rng.spawn(sims):
        d = make(int(child.generate_state(1)[0]))
        hits += small_test(d, n_perm=2000, seed=0)["p_value"] < 0.05
    r = hits / sims
    return r, math.sqrt(r * (1 - r) / sims)


def binary(item_sd):
    return lambda s: simulate_binary(s, items=20, accuracy=(0.6, 0.6), item_sd=item_sd)


def continuous(s):
    rng = np.random.default_rng(s)
    item = rng.normal(size=20)
    return pd.DataFrame([{"system": sys, "run": "1", "item": str(i), "score": item[i] + rng.normal()}
                         for sys in ("a", "b") for i in range(20)])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sims", type=int, default=20000)
    p.add_argument("--seed", type=int, default=40)
    p.add_argument("--out", default="benchmarks/results/small_data.md")
    a = p.parse_args(argv)
    rows = []
    cells = [(f"0/1, item SD {sd}", binary(sd), a.sims) for sd in (0.5, 1.0, 2.0)]
    cells.append(("continuous, sign-flip", continuous, max(500, a.sims // 20)))
    for name, make, sims in cells:
        t = time.time()
        r, se = rejection_rate(make, sims, a.seed)
        rows.append(f"| {name} | {sims} | {r:.4f} | {se:.4f} | {'yes' if 0.02 <= r <= 0.065 else 'NO'} | "
                    f"{time.time() - t:.0f} s |")
        print(rows[-1], flush=True)
    text = ("# Small-data verdict: type-I error at alpha 0.05 (2 systems x 1 run x 20 items)\n\n"
            f"`python benchmarks/small_data.py --sims {a.sims} --seed {a.seed}`\n\n"
            "| cell | simulations | rejection rate | MC SE | in [0.02, 0.065] | time |\n|---|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n")
    Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
