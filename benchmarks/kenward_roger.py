"""Benchmark: Kenward-Roger and Satterthwaite F tests of a REML fit on a 10^6-row evaluation log (issue 20:
Kenward-Roger must finish in under 30 s), and beside lmerTest / pbkrtest on small logs.

    python benchmarks/kenward_roger.py [--runs 50] [--items 10000] [--r-items 50 100] [--r-runs 5] [--skip-r]

Large log: ``simulation.evaluation_log`` (seed 20) with 2 systems x ``runs`` runs x ``items`` items (default
10^6 rows; run SD 0.05, item SD 0.1, residual SD 0.1, a difference of 0.01 between the systems), fitted as
``score ~ system + (1|item) + (1|system:run)`` by REML. Timed: the fit (accumulation of the statistics and the
optimization), the Kenward-Roger test of the system term (``ddf.contrast_test(fit, [0, 1],
ddf="kenward-roger")``: the adjusted covariance and the df, from the sufficient statistics) and the Satterthwaite
test (``ddf="satterthwaite"``). Peak resident memory of the process is printed (an N x N matrix of 10^6 rows
would take 8 TB).

Small logs (2 systems x ``r_runs`` x each ``r_items``), when ``Rscript`` with lmerTest and pbkrtest is on PATH:
the same model in R, timed inside R (``lmerTest::lmer``, which also computes the derivatives its Satterthwaite test
uses; ``anova(m, ddf = "Satterthwaite")``; ``anova(m, ddf = "Kenward-Roger")``, which calls pbkrtest with its N x N
matrices), and ours on the same rows, with the ratio R / ours and both F tests' df for comparison. Wall times on a
shared machine vary by tens of percent between runs; the ratios are measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vrs_helpers import mixed  # noqa: E402
from vrs_helpers.book.simulation import evaluation_log  # noqa: E402
from vrs_helpers.mixed.inference import ddf  # noqa: E402

FORMULA = "score ~ system + (1|item) + (1|system:run)"

R_CODE = r"""
suppressMessages({library(lmerTest); library(pbkrtest); library(jsonlite)})
d <- read.csv(commandArgs(TRUE)[1])
for (v in c("system", "run", "item")) d[[v]] <- factor(d[[v]])
t0 <- proc.time()[["elapsed"]]
m <- lmer(score ~ system + (1|item) + (1|system:run), data = d, REML = TRUE)
t1 <- proc.time()[["elapsed"]]
s <- anova(m, ddf = "Satterthwaite")
t2 <- proc.time()[["elapsed"]]
k <- anova(m, ddf = "Kenward-Roger")
t3 <- proc.time()[["elapsed"]]
cat(toJSON(list(fit = t1 - t0, sat = t2 - t1, kr = t3 - t2, sat_df = s[1, "DenDF"], kr_df = k[1, "DenDF"],
                kr_F = k[1, "F value"]), auto_unbox = TRUE, digits = NA))
"""


def _time(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def ours(d: pd.DataFrame) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m, t_fit = _time(lambda: mixed.fit(FORMULA, d))
    kr, t_kr = _time(lambda: ddf.contrast_test(m, [0.0, 1.0], "system", ddf="kenward-roger"))
    sat, t_sat = _time(lambda: ddf.contrast_test(m, [0.0, 1.0], "system", ddf="satterthwaite"))
    return {"fit": t_fit, "kr": t_kr, "sat": t_sat, "kr_F": kr.F, "kr_df": kr.den_df, "kr_p": kr.p_value,
            "sat_df": sat.den_df}


def in_r(d: pd.DataFrame) -> dict | None:
    with tempfile.TemporaryDirectory() as tmp:
        csv, script = Path(tmp) / "log.csv", Path(tmp) / "kr.R"
        d.to_csv(csv, index=False)
        script.write_text(R_CODE)
        r = subprocess.run(["Rscript", str(script), str(csv)], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"R failed: {r.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=50, help="runs per system of the large log")
    ap.add_argument("--items", type=int, default=10_000, help="items of the large log")
    ap.add_argument("--r-runs", type=int, default=5, help="runs per system of the small logs")
    ap.add_argument("--r-items", type=int, nargs="*", default=[50, 100], help="items of each small log")
    ap.add_argument("--skip-r", action="store_true")
    args = ap.parse_args(argv)

    d, t_sim = _time(lambda: evaluation_log(20, systems=2, runs=args.runs, items=args.items, delta=0.01))
    o = ours(d)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2  # KB -> GB (Linux)
    print(f"Large log: {len(d):,} rows (2 systems x {args.runs} runs x {args.items:,} items), {FORMULA}, REML")
    print(pd.DataFrame([
        {"step": "simulate", "seconds": round(t_sim, 2), "result": ""},
        {"step": "fit (accumulate + optimize)", "seconds": round(o["fit"], 2), "result": ""},
        {"step": "Kenward-Roger F test", "seconds": round(o["kr"], 2),
         "result": f"F = {o['kr_F']:.4g} on (1, {o['kr_df']:.6g}) df, p = {o['kr_p']:.4g}"},
        {"step": "Satterthwaite F test", "seconds": round(o["sat"], 2), "result": f"den df = {o['sat_df']:.6g}"},
    ]).to_string(index=False))
    print(f"Peak resident memory of the process: {rss:.2f} GB. Kenward-Roger under 30 s: {o['kr'] < 30}.")

    if args.skip_r or not shutil.which("Rscript"):
        print("\nlmerTest / pbkrtest: skipped (--skip-r or no Rscript on PATH).")
        return 0
    rows = []
    for items in args.r_items:
        small = evaluation_log(21, systems=2, runs=args.r_runs, items=items, delta=0.01)
        r = in_r(small)
        if r is None:
            continue
        a = ours(small)
        rows.append({"rows": len(small),
                     "R fit (lmerTest::lmer) s": round(r["fit"], 3), "ours fit s": round(a["fit"], 3),
                     "R Satterthwaite s": round(r["sat"], 3), "ours Satterthwaite s": round(a["sat"], 3),
                     "R fit + Satterthwaite / ours": round((r["fit"] + r["sat"]) / (a["fit"] + a["sat"]), 2),
                     "R Kenward-Roger (pbkrtest) s": round(r["kr"], 3), "ours Kenward-Roger s": round(a["kr"], 3),
                     "R KR / ours KR": round(r["kr"] / a["kr"], 1),
                     "KR df R": round(r["kr_df"], 6), "KR df ours": round(a["kr_df"], 6),
                     "KR F R": round(r["kr_F"], 6), "KR F ours": round(a["kr_F"], 6)})
    if rows:
        print(f"\nSmall logs (2 systems x {args.r_runs} runs x items), the same model, timed in the same run:")
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            print(pd.DataFrame(rows).T.to_string(header=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
