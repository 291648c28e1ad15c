"""Type-I error and power of the tests of `vrs analyze` with few training runs per system (issue 20), and the
time of a parametric bootstrap on a 10^6-row log.

    python benchmarks/type_one_error.py [--sims 2000] [--items 100 1000] [--runs 3 5 10] [--test satterthwaite]
        [--pb-datasets 200] [--pb-sims 199] [--big-sims 1000] [--skip-big]

Design (simulation.evaluation_log): two systems, `runs` runs each, the same `items` items; run SD 0.05, item SD 0.1,
residual SD 0.1. Under the null the systems do not differ; under the alternative they differ by `--delta` (default
half the run SD, 0.025). For each cell the rejection rate at alpha = 0.05 of

- "F (<test>)": the runs-random reading's small-sample test (score ~ system + (1|item) + (1|system:run), REML, the
  F test of `system` with `--test` denominator df: vrs_helpers.evaluate.power.TESTS, Satterthwaite now; Kenward-Roger
  plugs
  in there);
- "chi-square LRT, runs random": the GLRT of the same model against score ~ 1 + (1|item) + (1|system:run) (ML);
- "parametric bootstrap LRT": the same statistic against its distribution under the fitted null
  (mixed.parametric_bootstrap_lrt) with `--pb-sims` simulations per data set (199: (199 + 1) x 0.05 is an integer,
  so the Monte-Carlo test has level 0.05 exactly), on the first `--pb-datasets` simulated data sets of the cell
  only (it refits both models `--pb-sims` times per data set);
- "GLRT, runs as replications": the book's and the ICLR paper's reading, score ~ system + (1|item) (a test of
  these runs, not of the runs a system could have had: it is not expected to keep alpha here);

with its Monte-Carlo standard error sqrt(r (1 - r) / sims). Then, unless --skip-big, the time of a `--big-sims`
parametric bootstrap on a 2-system x 50-run x 10^4-item log (10^6 rows), beside its peer in the same run: the same
bootstrap refitting each simulated response with the engine's optimizer one at a time (`--peer-sims` of them,
extrapolated linearly to `--big-sims`; the extrapolation is printed as such). Seeds are fixed (same output on this
machine for the same arguments).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vrs_helpers import mixed  # noqa: E402
from vrs_helpers.book.simulation import evaluation_log, rejection_rates  # noqa: E402
from vrs_helpers.evaluate.power import TESTS  # noqa: E402
from vrs_helpers.mixed.bootstrap import bootstrap_plan  # noqa: E402
from vrs_helpers.threads import blas_limit  # noqa: E402

RANDOM = "(1|item) + (1|system:run)"
FULL, NULL = f"score ~ system + {RANDOM}", f"score ~ 1 + {RANDOM}"


def tests(test: str):
    small_sample = TESTS[test]

    def f_test(d):
        m = mixed.fit(FULL, d)
        return small_sample(m, np.array([[0.0, 1.0]])).p_value

    def lrt(d):
        return mixed.lrt(mixed.fit(NULL, d, method="ML"), mixed.fit(FULL, d, method="ML")).p_value

    def replications(d):
        m1 = mixed.fit("score ~ system + (1|item)", d, method="ML")
        m0 = mixed.fit("score ~ 1 + (1|item)", d, method="ML")
        return mixed.lrt(m0, m1).p_value

    return {f"F ({test})": f_test, "chi-square LRT, runs random": lrt, "GLRT, runs as replications": replications}


def bootstrap_test(n_sim: int):
    def pb(d):
        m0, m1 = mixed.fit(NULL, d, method="ML"), mixed.fit(FULL, d, method="ML")
        return mixed.parametric_bootstrap_lrt(m0, m1, n_sim=n_sim, seed=0).p_value

    return {"parametric bootstrap LRT": pb}


def rows_of(res, items, runs, scenario, secs, note=""):
    out = []
    for _, r in res.to_frame().iterrows():
        out.append({"items": items, "runs per system": runs, "scenario": scenario, "test": r["test"] + note,
                    "rate": round(r["rate"], 4), "MC SE": round(r["mc_se"], 4), "sims": int(r["simulations"]),
                    "seconds": round(secs, 1)})
    return out


def big_bootstrap(n_sim: int, peer_sims: int, runs: int = 50, items: int = 10_000) -> list[str]:
    """Time a parametric bootstrap on a 2 x runs x items log, and its peer (engine refits one by one)."""
    t0 = time.perf_counter()
    d = evaluation_log(0, systems=2, runs=runs, items=items, delta=0.0)
    t_log = time.perf_counter() - t0
    t0 = time.perf_counter()
    m1, m0 = mixed.fit(FULL, d, method="ML"), mixed.fit(NULL, d, method="ML")
    t_fit = time.perf_counter() - t0
    rows = len(d)
    del d
    t0 = time.perf_counter()
    res = mixed.parametric_bootstrap_lrt(m0, m1, n_sim=n_sim, seed=0)
    t_pb = time.perf_counter() - t0
    plan = bootstrap_plan(m0, m1, n_sim=peer_sims, seed=0, batch_size=peer_sims)
    plan.batched = False
    t0 = time.perf_counter()
    peer = plan.run()
    t_peer = time.perf_counter() - t0
    per_sim = t_peer / peer_sims
    same = bootstrap_plan(m0, m1, n_sim=peer_sims, seed=0, batch_size=peer_sims).run()  # the same draws, batched
    gap = float(np.max(np.abs(same.reference - peer.reference)))
    return [f"parametric bootstrap on a {rows:,}-row log (2 systems x {runs} runs x {items:,} items):",
            f"  simulate the log {t_log:.1f} s; fit both models (ML) {t_fit:.1f} s",
            f"  {n_sim} simulations, batched refits: {t_pb:.1f} s ({1000 * t_pb / n_sim:.1f} ms per simulation); "
            f"{res}",
            f"  peer, engine refits one by one: {peer_sims} simulations {t_peer:.1f} s ({1000 * per_sim:.0f} ms per "
            f"simulation; extrapolated to {n_sim}: {per_sim * n_sim:.0f} s, not measured)",
            f"  ratio per simulation, engine one by one / batched: {per_sim / (t_pb / n_sim):.1f}; the two give the "
            f"same statistics on the same {peer_sims} draws within {gap:.1e}"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sims", type=int, default=2000, help="simulated data sets per cell (default 2000)")
    ap.add_argument("--items", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--runs", type=int, nargs="+", default=[3, 5, 10])
    ap.add_argument("--power-sims", type=int, default=None, help="data sets under the alternative (default: --sims)")
    ap.add_argument("--delta", type=float, default=0.025, help="system difference of the alternative (0.025)")
    ap.add_argument("--test", choices=sorted(TESTS), default="kenward-roger", help="denominator df of the F test")
    ap.add_argument("--pb-datasets", type=int, default=200,
                    help="data sets per cell that also get the parametric bootstrap (default 200; 0: none)")
    ap.add_argument("--pb-sims", type=int, default=199, help="bootstrap simulations per data set (default 199)")
    ap.add_argument("--big-sims", type=int, default=1000, help="simulations of the 10^6-row bootstrap (1000)")
    ap.add_argument("--peer-sims", type=int, default=10, help="simulations of its one-by-one peer (10)")
    ap.add_argument("--skip-big", action="store_true", help="leave out the 10^6-row bootstrap")
    args = ap.parse_args(argv)
    rows = []
    warnings.simplefilter("ignore")
    from tqdm import tqdm  # a text bar (tqdm.auto warns in a kernel without ipywidgets)

    scenarios = (("null", 0.0, args.sims), (f"delta = {args.delta:g}", args.delta, args.power_sims or args.sims))
    cells = [(items, runs, *sc) for items in args.items for runs in args.runs for sc in scenarios]
    # one bar over the cells and one over each cell's simulations, on stderr when it is a terminal
    with blas_limit(1), tqdm(total=len(cells), desc="type-I cells", unit="cell", disable=None) as bar:
        for items, runs, scenario, delta, sims in cells:
            seed = 1000 * items + runs + (0 if delta == 0 else 7)
            label = f"items {items}, runs {runs}, {scenario}"

            def simulate(rng, r=runs, i=items, dl=delta):
                return evaluation_log(rng, systems=2, runs=r, items=i, delta=dl, run_sd=0.05, item_sd=0.1,
                                      residual_sd=0.1)

            t0 = time.perf_counter()
            res = rejection_rates(simulate, tests(args.test), n_sim=sims, alpha=0.05, seed=seed,
                                  progress=label)
            rows += rows_of(res, items, runs, scenario, time.perf_counter() - t0)
            n_pb = min(args.pb_datasets, sims)
            if n_pb > 0:  # the first n_pb data sets of the cell (the same generators)
                t0 = time.perf_counter()
                res = rejection_rates(simulate, bootstrap_test(args.pb_sims), n_sim=n_pb, alpha=0.05,
                                      seed=seed, progress=f"{label}, bootstrap")
                rows += rows_of(res, items, runs, scenario, time.perf_counter() - t0,
                                f" ({args.pb_sims} sims)")
            bar.update()
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_rows", None):
        print(table.to_string(index=False))
    if not args.skip_big:
        print()
        print("\n".join(big_bootstrap(args.big_sims, args.peer_sims)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
