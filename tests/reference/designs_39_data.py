"""Data of issue 39's reference tests (tests/book/test_designs_39.py): simulated evaluation logs
(vrs_helpers.book.simulation.evaluation_log, fixed seeds) of the designs the verdict got wrong.

    python tests/reference/designs_39_data.py tests/reference
    Rscript tests/reference/designs_39.R tests/reference > tests/reference/designs_39.json

- shared_seeds.csv.gz: 2 systems x 5 seeds x 60 items; every seed shifts both systems alike (SD 0.05), the run
  variation of the difference is small (SD 0.01), system x item SD 0.02, residual SD 0.1, a difference of 0.03;
- shared_seeds3.csv.gz: 3 systems x 4 seeds x 40 items, the same effects, differences 0 and 0.05;
- unequal_variances.csv.gz: 2 systems, 6 and 3 runs, run SDs 0.02 and 0.06, residual SDs 0.1 and 0.3, 100 items;
- boundary.csv.gz, boundary_si.csv.gz: 2 systems x 4 runs x 100 items, no run variance, a difference of 0.02: the
  REML run variance is 0 (in boundary_si.csv.gz the system x item variance estimate is positive).
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from vrs_helpers.book.simulation import evaluation_log  # noqa: E402


def make() -> dict:
    shared = dict(shared_run_sd=0.05, run_sd=0.01, system_item_sd=0.02)
    two = evaluation_log(np.random.default_rng(3901), runs=5, items=60, delta=0.03, **shared)
    three = evaluation_log(np.random.default_rng(3902), systems=3, runs=4, items=40, delta=[0, 0, 0.05], **shared)
    hetero = evaluation_log(np.random.default_rng(3903), runs=[6, 3], items=100, run_sd=[0.02, 0.06],
                            residual_sd=[0.1, 0.3], delta=0.05)
    at_zero = {name: evaluation_log(np.random.default_rng(seed), runs=4, items=100, run_sd=0.0, delta=0.02)
               for name, seed in (("boundary", 3906), ("boundary_si", 3910))}
    return {"shared_seeds": two, "shared_seeds3": three, "unequal_variances": hetero, **at_zero}


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for name, d in make().items():
        d.rename(columns={"run": "seed"}).to_csv(out / f"{name}.csv.gz", index=False, float_format="%.10g")
