"""Time the crossed binary GLMM (40 participants x 200 items) with ours and lme4's glmer in one run.

    OPENBLAS_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/glmm.py   (R with lme4 needed for the glmer row)

Best of 5 wall-clock times each; glmer is timed inside R (system.time), so R's start-up is not counted.
"""

import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd

from vrs_helpers.mixed import glmer

DATA = Path(__file__).resolve().parent.parent / "tests" / "reference" / "glmm_crossed.csv.gz"
FORMULA = "correct ~ condition + (1|participant) + (1|item)"


def main() -> None:
    d = pd.read_csv(DATA)
    ours = []
    for _ in range(5):
        t = time.perf_counter()
        m = glmer(FORMULA, d)
        ours.append(time.perf_counter() - t)
    print(f"ours : {min(ours):.3f} s  logLik {m.loglik:.6f}")
    if shutil.which("Rscript"):
        code = (f"suppressPackageStartupMessages(library(lme4)); d <- read.csv('{DATA}'); "
                f"s <- sapply(1:5, function(i) system.time(m <<- glmer({FORMULA}, d, family = binomial))[['elapsed']]);"
                " cat(sprintf('glmer: %.3f s  logLik %.6f\\n', min(s), as.numeric(logLik(m))))")
        out = subprocess.run(["Rscript", "-e", code], capture_output=True, text=True, check=True).stdout
        print(out.strip())
        r = float(out.split()[1])
        print(f"speed-up: {r / min(ours):.1f}x")


if __name__ == "__main__":
    main()
