"""Benchmark the small-sample tests of issue 28 on this machine: Kenward-Roger and Satterthwaite on a 10^6-row log
with and without the system-by-item term, and the GLMM parametric bootstrap.

    python benchmarks/small_sample_tests.py [--runs 50] [--items 10000] [--n-sim 1000] [--skip-lmm] [--skip-glmm]

1. Continuous scores: 2 systems x ``runs`` runs x ``items`` items (default 10^6 rows; item SD 0.1, system-by-item SD
   0.1, run SD 0.02, residual SD 0.1), fitted by REML as ``score ~ system + (1|item) + (1|system:item) +
   (1|system:run)`` (2 x 10^4 system:item levels) and as ``score ~ system + (1|item) + (1|system:run)``. Timed, one
   run each: accumulating the statistics, the fit, the Kenward-Roger and the Satterthwaite F test of the system
   term (each test computes its per-model part: issue 28's goal < 10 s each, Satterthwaite < 3 s).
2. Binary scores: 2 systems x 5 seeds x 500 items (logit scale: item SD 1, seed SD 0.35, no difference), the
   parametric-bootstrap LRT of ``correct ~ system + (1|item) + (1|system:seed)`` against ``~ 1 + ...`` with
   ``n_sim`` simulations (issue 28's goal: 1,000 in < 30 s), and the two glmer fits.
Wall times on a shared machine vary by tens of percent between runs.
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
from vrs_helpers.book.simulation import evaluation_log  # noqa: E402
from vrs_helpers.mixed.inference import ddf  # noqa: E402

FORMULAS = ["score ~ system + (1|item) + (1|system:item) + (1|system:run)",
            "score ~ system + (1|item) + (1|system:run)"]


def _time(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def continuous_log(runs: int, items: int, seed: int = 28) -> pd.DataFrame:
    d = evaluation_log(seed, systems=2, runs=runs, items=items, run_sd=0.02, item_sd=0.1, residual_sd=0.1)
    si = np.random.default_rng(seed + 1).normal(0.0, 0.1, (2, items))
    d["score"] += si[d["system"].cat.codes.to_numpy(), d["item"].astype(int).to_numpy()]
    return d


def binary_log(seed: int = 28) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    item, run = rng.normal(0, 1.0, 500), rng.normal(0, 0.35, (2, 5))
    s, r, i = np.meshgrid(np.arange(2), np.arange(5), np.arange(500), indexing="ij")
    p = 1.0 / (1.0 + np.exp(-(0.3 + item[i] + run[s, r])))
    return pd.DataFrame({"system": [f"S{k}" for k in s.ravel()], "seed": r.ravel().astype(str),
                         "item": i.ravel().astype(str), "correct": (rng.random(p.shape) < p).astype(int).ravel()})


def lmm(runs: int, items: int) -> list[dict]:
    d, _ = _time(lambda: continuous_log(runs, items))
    rows = []
    for f in FORMULAS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s, t_acc = _time(lambda f=f: mixed.accumulate(f, d))
            m, t_fit = _time(lambda s=s: mixed.fit_stats(s))
        kr, t_kr = _time(lambda m=m: ddf.contrast_test(m, [0.0, 1.0], "system", ddf="kenward-roger"))
        sat, t_sat = _time(lambda m=m: ddf.contrast_test(m, [0.0, 1.0], "system", ddf="satterthwaite"))
        rows.append({"model": f, "rows": len(d), "accumulate s": round(t_acc, 2), "fit s": round(t_fit, 2),
                     "Kenward-Roger s": round(t_kr, 2), "Satterthwaite s": round(t_sat, 2),
                     "KR F (df)": f"{kr.F:.4g} (1, {kr.den_df:.5g})", "Satterthwaite df": f"{sat.den_df:.5g}"})
    return rows


def glmm(n_sim: int) -> dict:
    d = binary_log()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (m1, m0), t_fit = _time(lambda: (mixed.glmer("correct ~ system + (1|item) + (1|system:seed)", d),
                                          mixed.glmer("correct ~ 1 + (1|item) + (1|system:seed)", d)))
    res, t_pb = _time(lambda: mixed.glmm_bootstrap_lrt(m0, m1, n_sim=n_sim, seed=1))
    return {"rows": len(d), "glmer fits s": round(t_fit, 2), "simulations": n_sim, "bootstrap s": round(t_pb, 2),
            "p (MC SE)": f"{res.p_value:.4g} ({res.mc_se:.2g})", "chi-square p": f"{res.p_chisq:.4g}",
            "failed": res.n_failed}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--n-sim", type=int, default=1000)
    ap.add_argument("--skip-lmm", action="store_true")
    ap.add_argument("--skip-glmm", action="store_true")
    args = ap.parse_args(argv)
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_colwidth", 80):
        if not args.skip_lmm:
            print(pd.DataFrame(lmm(args.runs, args.items)).to_string(index=False))
        if not args.skip_glmm:
            print(pd.DataFrame([glmm(args.n_sim)]).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
