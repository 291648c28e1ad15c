"""Benchmark `vrs analyze` end to end on 10^6 rows: 2 systems x 50 runs (seeds) x 10,000 items, written as a run
folder of 100 TSV files ('runs/{system}/seed={seed}/scores.tsv'), with one numeric data property.

    python benchmarks/analyze.py [--items 10000] [--runs 50] [--skip-lme4]

Prints the wall time of `vrs analyze` (reading the 100 files, validation, workbook 07 with papermill: both GLRTs,
the conditional GLRT, paired bootstrap and permutation tests with 10,000 resamples, per-system variance components,
report HTML) and - when Rscript with lme4 is on PATH - lme4's time for the same five ML fits of the two GLRTs
(reading the same data from one CSV), with the chi2 statistics side by side. Goals: < 60 s (issue 11), < 10 s
(issue 30).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent

R_SCRIPT = r"""
suppressPackageStartupMessages({ library(lme4); library(jsonlite) })
a <- commandArgs(trailingOnly = TRUE)
d <- read.csv(a[1]); d$system <- factor(d$system); d$item <- factor(d$item); d$seed <- factor(d$seed)
t0 <- proc.time()[["elapsed"]]
t1 <- anova(lmer(score ~ 1 + (1|item), d, REML = FALSE), lmer(score ~ system + (1|item), d, REML = FALSE))
t2 <- anova(lmer(score ~ 1 + (1|item) + (1|system:seed), d, REML = FALSE),
            lmer(score ~ system + (1|item) + (1|system:seed), d, REML = FALSE))
el <- proc.time()[["elapsed"]] - t0
writeLines(toJSON(list(seconds = el, chi2 = t1$Chisq[2], chi2_random = t2$Chisq[2]), digits = NA, auto_unbox = TRUE),
           a[2])
"""


def simulate(n_sys=2, n_runs=50, n_items=10_000, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    item_eff = rng.normal(0, 0.1, n_items)
    length = rng.integers(1, 80, n_items)
    parts = []
    for s in range(n_sys):
        for r in range(n_runs):
            y = 0.5 + 0.005 * s + rng.normal(0, 0.01) + item_eff + rng.normal(0, 0.05, n_items)
            parts.append(pd.DataFrame({"system": f"sys{s}", "seed": str(r), "item": np.arange(n_items),
                                       "length": length, "score": y}))
    return pd.concat(parts, ignore_index=True)


def _chi2(reading: dict) -> float:
    """The chi-square statistic of a reading in summary.json: its own, or that of the LRT beside the test it
    reports (the runs-random reading reports the F test by default, the chi-square LRT under "lrt")."""
    for d in (reading, reading.get("lrt") or {}):
        for key in ("chi2", "statistic"):
            if key in d:
                return float(d[key])
    return float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--skip-lme4", action="store_true")
    args = ap.parse_args(argv)
    df = simulate(n_runs=args.runs, n_items=args.items)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for (s, r), part in df.groupby(["system", "seed"]):
            folder = tmp / "runs" / s / f"seed={r}"
            folder.mkdir(parents=True)
            part[["item", "length", "score"]].to_csv(folder / "scores.tsv", sep="\t", index=False)
        vrs = shutil.which("vrs") or str(Path(sys.executable).parent / "vrs")
        cmd = [vrs, "analyze", str(tmp / "runs/{system}/seed={seed}/scores.tsv"), "--response", "score",
               "--system", "system", "--item", "item", "--replication", "seed", "--property", "length",
               "--out", str(tmp / "report")]
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        ours = time.perf_counter() - t
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        summary = json.loads((tmp / "report" / "summary.json").read_text())
        rows = [{"tool": "vrs analyze (end to end)", "rows": len(df), "seconds": round(ours, 1),
                 "GLRT chi2": _chi2(summary["glrt"]),
                 "GLRT chi2, runs random": _chi2(summary["glrt_replications_random"])}]
        if not args.skip_lme4 and shutil.which("Rscript"):
            csv = tmp / "all.csv"
            df.to_csv(csv, index=False)
            script, out = tmp / "b.R", tmp / "r.json"
            script.write_text(R_SCRIPT)
            r = subprocess.run(["Rscript", str(script), str(csv), str(out)], capture_output=True, text=True)
            if r.returncode == 0:
                res = json.loads(out.read_text())
                rows.append({"tool": "lme4: the 4 ML fits of the two GLRTs only", "rows": len(df),
                             "seconds": round(res["seconds"], 1), "GLRT chi2": res["chi2"],
                             "GLRT chi2, runs random": res["chi2_random"]})
            else:
                print(f"lme4 failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
    table = pd.DataFrame(rows)
    if len(table) == 2:
        table["lme4 / ours"] = ["", f"{table['seconds'][1] / table['seconds'][0]:.1f}x"]
    print(table.to_string(index=False))
    print("\ngoal (issue 11): vrs analyze on 10^6 rows in < 60 s:", "met" if ours < 60 else "NOT met")
    print("goal (issue 30): vrs analyze on 10^6 rows, end to end, in < 10 s:", "met" if ours < 10 else "NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
