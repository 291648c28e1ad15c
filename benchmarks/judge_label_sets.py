"""Level, SE and power of the judge-corrected difference when humans label each system's outputs separately
(issue 52; :func:`vrs_helpers.evaluate.tables.judge_labels.ppi_difference_all_labels`, the PPI reading of
``vrs analyze --human``).

    python benchmarks/judge_label_sets.py [--sims 5000] [--items 2000] [--share 0.2] [--seed 52]
        [--out benchmarks/results/judge_label_sets.csv]

Design (the layout of issue 52): two systems A and B judged on the same --items items; humans label a random
--share of A's outputs and, independently, a random --share of B's (about share^2 of the items are labelled for
both: 80 of 2,000 at 20 %). 0/1 scores: true label Y = 1{a + u_i + e_si > 0}, u_i ~ N(0, 1) an item effect shared
by the systems, e_si ~ N(0, 1), a = 0.43 (P(Y = 1) = Phi(0.43 / sqrt 2) = 0.62, the issue's means); the judge
misses 5 % of the positives of both systems and calls 5 % of A's negatives but 15 % of B's positive (so the judge
alone is biased by 0.1 P(Y = 0) = 0.038). Under the null the systems do not differ; under the alternative B's
latent is shifted by 0.15 (a difference of about 0.04).

Per data set: the difference B - A with every label (its estimate equals the difference of the two per-system PPI
means to 1e-12, checked on every data set), its SE beside the independent-sum SE sqrt(SE_A^2 + SE_B^2) of the two
PPI means, and the rejection at alpha = 0.05 (Student's t on Welch-Satterthwaite df). Beside it the paired PPI
difference on the items labelled for both (the reading before issue 52). Seeds are fixed (SeedSequence([--seed,
cell])). Writes --out (CSV) and a .md beside it; the seconds to stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vrs_helpers.evaluate.tables import judge as J  # noqa: E402
from vrs_helpers.evaluate.tables.judge_labels import ppi_difference_all_labels  # noqa: E402

A_LAT, SHIFT = 0.43, 0.15


def simulate(rng, sims: int, items: int, share: float, shift: float):
    """(judge_a, judge_b, human_a, human_b): arrays (sims, items), NaN where the system's item was not labelled."""
    u = rng.normal(size=(sims, items))
    ya = (A_LAT + u + rng.normal(size=(sims, items)) > 0).astype(float)
    yb = (A_LAT + shift + u + rng.normal(size=(sims, items)) > 0).astype(float)
    miss = rng.random((2, sims, items)) < 0.05
    ja = np.where(ya == 1, ~miss[0], rng.random((sims, items)) < 0.05).astype(float)
    jb = np.where(yb == 1, ~miss[1], rng.random((sims, items)) < 0.15).astype(float)
    la, lb = rng.random((2, sims, items)) < share
    return ja, jb, np.where(la, ya, np.nan), np.where(lb, yb, np.nan)


def per_system(judge, human):
    """The PPI mean of each data set (lambda 1, small-sample), one at a time (label counts differ)."""
    out = []
    for f, y in zip(judge, human, strict=True):
        lab = np.isfinite(y)
        out.append(J.ppi_mean(y[lab], f[lab], f[~lab], lam=1.0, small_sample=True))
    return out


def paired(ja, jb, ha, hb):
    """The paired PPI difference on the items labelled for both (the reading before issue 52)."""
    est, p = [], []
    for fa, fb, ya, yb in zip(ja, jb, ha, hb, strict=True):
        lab = np.isfinite(ya) & np.isfinite(yb)
        e = J.ppi_difference(ya[lab], yb[lab], fa[lab], fb[lab], fa[~lab], fb[~lab], lam=1.0, small_sample=True)
        est.append(e.estimate)
        p.append(e.p_value)
    return np.array(est), np.array(p)


def cell(rng, sims: int, items: int, share: float, shift: float, chunk: int = 250) -> dict:
    rej, se, ind, gap, rej_paired, both, n_lab, est = [], [], [], [], [], [], [], []
    for start in range(0, sims, chunk):
        k = min(chunk, sims - start)
        ja, jb, ha, hb = simulate(rng, k, items, share, shift)
        d = ppi_difference_all_labels(ja, jb, ha, hb, small_sample=True)
        ma, mb = per_system(ja, ha), per_system(jb, hb)
        shown = np.array([b.estimate - a.estimate for a, b in zip(ma, mb, strict=True)])
        gap.append(np.abs(d.estimate - shown).max())
        ind.append(np.hypot([a.se for a in ma], [b.se for b in mb]))
        se.append(d.se)
        est.append(d.estimate)
        rej.append(d.p_value < 0.05)
        _, pp = paired(ja, jb, ha, hb)
        rej_paired.append(pp < 0.05)
        both.append((np.isfinite(ha) & np.isfinite(hb)).sum(-1))
        n_lab.append(np.isfinite(ha).sum(-1) + np.isfinite(hb).sum(-1))
    rej, se, ind, est = map(np.concatenate, (rej, se, ind, est))
    rate = float(rej.mean())
    return {"sims": sims, "items": items, "share": share, "shift": shift, "rejection_rate": rate,
            "mc_se": float(np.sqrt(rate * (1 - rate) / sims)),
            "rejection_rate_paired_only": float(np.concatenate(rej_paired).mean()),
            "mean_se": float(se.mean()), "sd_of_estimates": float(est.std(ddof=1)),
            "mean_independent_sum_se": float(ind.mean()), "max_gap_to_shown_means": float(max(gap)),
            "labelled_for_both": float(np.concatenate(both).mean()), "labelled": float(np.concatenate(n_lab).mean())}


def main(argv=None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=5000)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--share", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=52)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "judge_label_sets.csv"))
    args = ap.parse_args(argv)
    t0 = time.time()
    rows = []
    for k, (name, shift) in enumerate((("null", 0.0), ("alternative", SHIFT))):
        rng = np.random.default_rng(np.random.SeedSequence([args.seed, k]))
        rows.append({"cell": name, **cell(rng, args.sims, args.items, args.share, shift)})
    frame = pd.DataFrame(rows)
    null = frame.iloc[0]
    lo, hi = stats.binom.ppf([0.0005, 0.9995], args.sims, 0.05) / args.sims
    frame["flag"] = ["" if r["cell"] != "null" or 0.035 <= r["rejection_rate"] <= 0.065 else "OUTSIDE [0.035, 0.065]"
                     for _, r in frame.iterrows()]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out, index=False)
    out.with_suffix(".md").write_text(frame.to_markdown(index=False, floatfmt=".4g") + "\n")
    print(frame.to_string(index=False))
    print(f"null rejection {null['rejection_rate']:.4f} (binomial 99.9 % range at 0.05: [{lo:.4f}, {hi:.4f}])")
    print(f"{time.time() - t0:.1f} s", file=sys.stderr)
    return frame


if __name__ == "__main__":
    main()
