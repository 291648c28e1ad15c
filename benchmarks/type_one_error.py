"""Type-I error and power of the tests of `vrs analyze` with few training runs per system (issue 20).

    python benchmarks/type_one_error.py [--sims 2000] [--items 100 1000] [--runs 3 5 10]

Design (simulation.evaluation_log): two systems, `runs` runs each, the same `items` items; run SD 0.05, item SD 0.1,
residual SD 0.1. Under the null the systems do not differ; under the alternative they differ by half the run SD
(0.025). For each cell the rejection rate at alpha = 0.05 of

- "F (Satterthwaite)": the runs-random reading's default test (score ~ system + (1|item) + (1|system:run), REML,
  lmerTest's F test with Satterthwaite df: vrs_helpers.mixed.ddf);
- "chi-square LRT, runs random": the GLRT of the same model against score ~ 1 + (1|item) + (1|system:run) (ML);
- "GLRT, runs as replications": the book's and the ICLR paper's reading, score ~ system + (1|item) (a test of
  these runs, not of the runs a system could have had: it is not expected to keep alpha here);

with its Monte-Carlo standard error sqrt(r (1 - r) / sims). Prints one table; seeds are fixed (same output on this
machine for the same arguments).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vrs_helpers import mixed  # noqa: E402
from vrs_helpers.mixed.ddf import contrast_test  # noqa: E402
from vrs_helpers.simulation import evaluation_log, rejection_rates  # noqa: E402
from vrs_helpers.threads import blas_limit  # noqa: E402

RANDOM = "(1|item) + (1|system:run)"


def tests():
    def f_test(d):
        m = mixed.fit(f"score ~ system + {RANDOM}", d)
        return contrast_test(m, [0.0, 1.0]).p_value

    def lrt(d):
        m1 = mixed.fit(f"score ~ system + {RANDOM}", d, method="ML")
        m0 = mixed.fit(f"score ~ 1 + {RANDOM}", d, method="ML")
        return mixed.lrt(m0, m1).p_value

    def replications(d):
        m1 = mixed.fit("score ~ system + (1|item)", d, method="ML")
        m0 = mixed.fit("score ~ 1 + (1|item)", d, method="ML")
        return mixed.lrt(m0, m1).p_value

    return {"F (Satterthwaite)": f_test, "chi-square LRT, runs random": lrt, "GLRT, runs as replications": replications}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--items", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--runs", type=int, nargs="+", default=[3, 5, 10])
    ap.add_argument("--power-sims", type=int, default=None, help="simulations under the alternative (default: --sims)")
    args = ap.parse_args(argv)
    rows = []
    warnings.simplefilter("ignore")
    with blas_limit(1):
        for items in args.items:
            for runs in args.runs:
                for scenario, delta, sims in (("null", 0.0, args.sims),
                                              ("delta = run SD / 2", 0.025, args.power_sims or args.sims)):
                    t0 = time.perf_counter()
                    res = rejection_rates(lambda rng, r=runs, i=items, dl=delta: evaluation_log(
                        rng, systems=2, runs=r, items=i, delta=dl, run_sd=0.05, item_sd=0.1, residual_sd=0.1),
                        tests(), n_sim=sims, alpha=0.05, seed=1000 * items + runs + (0 if delta == 0 else 7))
                    secs = time.perf_counter() - t0
                    for _, r in res.to_frame().iterrows():
                        rows.append({"items": items, "runs per system": runs, "scenario": scenario,
                                     "test": r["test"], "rate": round(r["rate"], 4), "MC SE": round(r["mc_se"], 4),
                                     "sims": int(r["simulations"]), "seconds": round(secs, 1)})
                    print(f"items {items}, runs {runs}, {scenario}: {secs:.0f} s", file=sys.stderr, flush=True)
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_rows", None):
        print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
