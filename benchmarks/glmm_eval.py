"""Time compare_systems(family="binomial") on the binary evaluation log against lme4's glmer, in one run.

    OPENBLAS_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/glmm_eval.py   (R with lme4 needed for the glmer
    column)

The log: tests/reference/glmm_eval.csv.gz (3 systems x 5 seeds x 300 items, 4,500 rows). Each reading is the GLRT
of compare_systems: overall (runs as replications), runs random ((1|system:seed) in both models), conditional on a
categorical (domain) and on a numeric (length) property. Ours: the whole compare_systems call (both fits, the GLRT,
marginal means, contrasts and slopes). glmer: the two glmer fits with lme4's defaults (Laplace; no emmeans), timed
inside R with system.time, so R's start-up is not counted. Best of 3 wall-clock times each.
"""

import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd

from vrs_helpers.book.glrt import compare_systems

DATA = Path(__file__).resolve().parent.parent / "tests" / "reference" / "glmm_eval.csv.gz"
READINGS = {
    "overall": ({}, "correct ~ 1 + (1|item)", "correct ~ system + (1|item)"),
    "runs_random": ({"replications": ["seed"]}, "correct ~ 1 + (1|item) + (1|system:seed)",
                    "correct ~ system + (1|item) + (1|system:seed)"),
    "by_domain": ({"by": "domain"}, "correct ~ domain + (1|item)", "correct ~ system * domain + (1|item)"),
    "by_length": ({"covariate": "length"}, "correct ~ length + (1|item)", "correct ~ system * length + (1|item)"),
}
REPEATS = 3


def ours(d: pd.DataFrame) -> dict:
    out = {}
    for name, (kw, _, _) in READINGS.items():
        times = []
        for _ in range(REPEATS):
            t = time.perf_counter()
            c = compare_systems(d, "correct", "system", "item", family="binomial", **kw)
            times.append(time.perf_counter() - t)
        out[name] = (min(times), c.glrt.chi2)
    return out


def glmer() -> dict:
    lines = ["suppressPackageStartupMessages(library(lme4))", f"d <- read.csv('{DATA}')",
             "d$system <- factor(d$system); d$item <- factor(d$item); d$seed <- factor(d$seed)",
             "d$domain <- factor(d$domain)"]
    for name, (_, f0, f1) in READINGS.items():
        lines.append(f"s <- sapply(1:{REPEATS}, function(i) system.time({{m0 <<- glmer({f0}, d, family = binomial); "
                     f"m1 <<- glmer({f1}, d, family = binomial)}})[['elapsed']])")
        lines.append(f"cat('{name}', min(s), anova(m0, m1)$Chisq[2], '\\n')")
    res = subprocess.run(["Rscript", "-e", "; ".join(lines)], capture_output=True, text=True, check=True).stdout
    return {w[0]: (float(w[1]), float(w[2])) for w in (line.split() for line in res.strip().splitlines())}


def main() -> None:
    d = pd.read_csv(DATA)
    o = ours(d)
    r = glmer() if shutil.which("Rscript") else {}
    print(f"{'reading':<12} {'ours s':>8} {'glmer s':>8} {'glmer/ours':>10} {'chi2 ours':>11} {'chi2 glmer':>11}")
    for name, (t, chi2) in o.items():
        rt, rchi2 = r.get(name, (float("nan"), float("nan")))
        print(f"{name:<12} {t:8.3f} {rt:8.3f} {rt / t:10.2f} {chi2:11.4f} {rchi2:11.4f}")
    if r:
        total_o, total_r = sum(v[0] for v in o.values()), sum(v[0] for v in r.values())
        print(f"{'total':<12} {total_o:8.3f} {total_r:8.3f} {total_r / total_o:10.2f}")


if __name__ == "__main__":
    main()
