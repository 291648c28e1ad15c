"""Benchmark the circularity search (book Definition 2.5) of vrs_helpers.book.circularity against R's mgcv and pygam.

    python benchmarks/circularity.py [--skip-r] [--skip-pygam] [--mgcv-kidney]

For the liver SOFA data (80,671 rows; bili k=100 and four k=10 smooths), the kidney SOFA data (80,671 rows; crea
k=150, urine24 k=125 and four k=10 smooths: 63 GAMs) and the patent data (106,690 rows; two smooths and three
citation factors) it times the full powerset search over the candidate features with our code - with
``blas_threads="auto"`` (one BLAS thread inside the smoothing-parameter search) and with the BLAS library's
default threads - and, when Rscript with mgcv is on PATH, mgcv `gam()` fitting the same models (GCV, thin-plate
smooths, same k) in one R process, and prints the ratio and the largest |D^2 difference| over the models. The last
row times workbook 02's largest single GAM (the kidney teacher's student on 43 clinical features, about 640
coefficients) in both thread settings. pygam cannot select smoothing parameters at this size in reasonable time
(its grid search refits the dense model for every lambda combination), so it is timed for ONE fit of the
all-features liver model at a fixed lambda, to show the scale. R is never a dependency: without Rscript that column
says "skipped".
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if not os.environ.get("VRS_DATA_DIR") and (ROOT.parent / "shared" / "data" / "SHA256SUMS").is_file():
    os.environ["VRS_DATA_DIR"] = str(ROOT.parent / "shared" / "data")

from vrs_helpers.book import circularity, data  # noqa: E402

CASES = {
    "liver": ("liver_sofa_test", "target", ["bili", "asat", "quinr", "thrombo", "alat"], {"bili": 100}),
    "kidney": ("kidney_sofa_test", "target", ["crea", "urine24", "artph", "bun", "temp", "lactate"],
               {"crea": 150, "urine24": 125}),
    "patent": ("ir_test", "relevance", ["score_neural", "score_tfIdf", "cited_inventor", "cited_examiner",
                                        "cited_family"], {}),
}

R_SCRIPT = r"""
suppressPackageStartupMessages({ library(mgcv); library(jsonlite) })
args <- commandArgs(trailingOnly = TRUE)
d <- as.data.frame(readRDS(args[1])); formulas <- fromJSON(args[2]); out <- args[3]
invisible(gam(y ~ s(x), data = data.frame(x = seq(0, 1, length.out = 200), y = sin(1:200))))
t0 <- proc.time()[["elapsed"]]
d2 <- sapply(formulas, function(f) summary(gam(as.formula(f), data = d))$dev.expl)
el <- proc.time()[["elapsed"]] - t0
res <- list(seconds = el, d2 = unname(d2), mgcv = as.character(packageVersion("mgcv")))
writeLines(toJSON(res, digits = 10, auto_unbox = TRUE), out)
"""


def _formula(target, feats, k, factors):
    terms = [f if f in factors else (f"s({f}, k = {k[f]})" if f in k else f"s({f})") for f in feats]
    return f"{target} ~ " + " + ".join(terms)


def run_mgcv(name, target, feats, k, factors, subsets):
    if shutil.which("Rscript") is None:
        return None
    forms = [_formula(target, s, k, factors) for s in subsets]
    with tempfile.TemporaryDirectory() as tmp:
        script, fjson, out = Path(tmp, "b.R"), Path(tmp, "f.json"), Path(tmp, "o.json")
        script.write_text(R_SCRIPT)
        fjson.write_text(json.dumps(forms))
        proc = subprocess.run(["Rscript", str(script), str(data.path(name)), str(fjson), str(out)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"  mgcv failed: {proc.stderr.strip()[:300]}", file=sys.stderr)
            return None
        return json.loads(out.read_text())


def run_pygam_one_fit(df, target, feats):
    try:
        from pygam import LinearGAM, s
    except ImportError:
        return None
    X = df[feats].to_numpy(dtype=float)
    terms = s(0, n_splines=10)
    for i in range(1, len(feats)):
        terms = terms + s(i, n_splines=10)
    t = time.perf_counter()
    LinearGAM(terms, lam=0.6).fit(X, df[target].to_numpy(dtype=float))
    return time.perf_counter() - t


def _threads() -> int:
    from threadpoolctl import threadpool_info

    return max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"), default=1)


def student_row() -> dict:
    """One fit of the largest GAM of workbook 02: the kidney teacher's student on all 43 clinical features
    (crea k=125, urine24 k=150, 40 smooths of k=10, dopamine linear; 80,671 rows, about 640 coefficients)."""
    from vrs_helpers.book import gam

    df = data.load("kidney_sofa_test")
    clinical = [c for c in df.columns if c not in ("target", "sofa_circ", "sofa_nocirc", "noradrenaline")]
    k = {f: {"urine24": 150, "crea": 125}.get(f, 10) for f in clinical}
    times = {}
    for label, threads in [("auto", "auto"), ("default", None)]:
        t = time.perf_counter()
        fit = gam.fit_gam(df, "sofa_circ", clinical, k=k, linear=["dopamine"], blas_threads=threads)
        times[label] = time.perf_counter() - t
    return {"dataset": "kidney student (1 GAM)", "rows": len(df), "models": 1, "ours_s": round(times["auto"], 1),
            f"ours {_threads()} BLAS threads_s": round(times["default"], 1), "mgcv_s": "not run",
            "max|dD2| vs mgcv": f"D2 {100 * fit.deviance_explained:.2f} % (mgcv 93.04 %)"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-r", action="store_true")
    ap.add_argument("--skip-pygam", action="store_true")
    ap.add_argument("--mgcv-kidney", action="store_true",
                    help="also time mgcv on the kidney search (63 GAMs with k=150/125: over 15 min in mgcv here)")
    args = ap.parse_args(argv)
    rows = []
    for case, (name, target, feats, k) in CASES.items():
        df = data.load(name)
        t = time.perf_counter()
        res = circularity.circularity_test(df, target, feats, k=k)   # blas_threads="auto": 1 thread here
        ours = time.perf_counter() - t
        t = time.perf_counter()
        circularity.circularity_test(df, target, feats, k=k, blas_threads=None)
        ours_default = time.perf_counter() - t
        subsets = [list(c) for r in range(1, len(feats) + 1) for c in itertools.combinations(feats, r)]
        factors = {f for f in feats if df[f].nunique() <= 2 or not pd.api.types.is_numeric_dtype(df[f])}
        skip_r = args.skip_r or (case == "kidney" and not args.mgcv_kidney)
        mg = None if skip_r else run_mgcv(name, target, feats, k, factors, subsets)
        row = {"dataset": case, "rows": len(df), "models": len(res.models), "ours_s": round(ours, 1),
               f"ours {_threads()} BLAS threads_s": round(ours_default, 1),
               "mgcv_s": "skipped", "mgcv/ours": "", "max|dD2| vs mgcv": "", "pygam one fit_s": ""}
        if mg is not None:
            ours_d2 = {frozenset(f): d for f, d in zip(res.models["features"], res.models["deviance_explained"],
                                                       strict=True)}
            diffs = [abs(ours_d2[frozenset(s)] - d) for s, d in zip(subsets, mg["d2"], strict=True)]
            row.update({"mgcv_s": round(mg["seconds"], 1), "mgcv/ours": round(mg["seconds"] / ours, 1),
                        "max|dD2| vs mgcv": f"{max(diffs):.2g}"})
        if case == "liver" and not args.skip_pygam:
            pg = run_pygam_one_fit(df, target, feats)
            row["pygam one fit_s"] = "skipped" if pg is None else round(pg, 1)
        rows.append(row)
        print(f"{case}: {row}", flush=True)
    rows.append(student_row())
    print(f"student: {rows[-1]}", flush=True)
    print()
    print(pd.DataFrame(rows).fillna("").to_string(index=False))
    print("\nours: full powerset search (31 or 63 GAMs with GCV) incl. basis construction and one pass for X'X, with "
          "blas_threads='auto' (one BLAS thread in the smoothing-parameter search) and with the library's default "
          "threads; mgcv: gam() on the same formulas in one R process; pygam: one fixed-lambda fit of the 5-feature "
          "liver model.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
