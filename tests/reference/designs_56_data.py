"""Data of issue 56's reference tests (tests/book/test_designs_56.py): simulated or constructed evaluation logs.

    python tests/reference/designs_56_data.py tests/reference
    Rscript tests/reference/designs_56.R tests/reference > tests/reference/designs_56.json

- hetero5.csv.gz: 5 systems x 3 runs (each system its own run labels) x 100 items, S0 with run and residual SDs three
  times the others' (9 times the variance), no difference (evaluation_log, seed 15);
- identical.csv.gz: 0/1 scores of 2 systems x 3 runs (labels 0-2 in both) x 20 items whose per-run accuracies are
  0.60/0.60/0.55 and 0.80/0.80/0.75: three identical per-run differences (issue 56's zero spread).
"""

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from vrs_helpers.book.simulation import evaluation_log  # noqa: E402

#: per system its runs (start, count): run r is correct on items start .. start + count - 1 of 20
IDENTICAL = {"S0": [(0, 12), (2, 12), (4, 11)], "S1": [(0, 16), (3, 16), (5, 15)]}


def identical(spec: dict = IDENTICAL, items: int = 20) -> pd.DataFrame:
    return pd.DataFrame([{"system": s, "seed": str(r), "item": f"i{i:03d}", "score": int(a <= i < a + c)}
                         for s, runs in spec.items() for r, (a, c) in enumerate(runs) for i in range(items)])


def make() -> dict:
    hetero = evaluation_log(15, systems=5, items=100, run_sd=[0.15] + [0.05] * 4, residual_sd=[0.3] + [0.1] * 4,
                            run_labels="own").rename(columns={"run": "seed"})
    return {"hetero5": hetero, "identical": identical()}


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for name, d in make().items():
        d.to_csv(out / f"{name}.csv.gz", index=False, float_format="%.10g")
