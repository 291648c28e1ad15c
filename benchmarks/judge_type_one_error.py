"""Type-I error, coverage and power of the judge corrections of `vrs analyze --human` (issue 43), against the naive
reading of the judge's scores.

    python benchmarks/judge_type_one_error.py [--sims 1000] [--items 2000] [--seed 2043]
        [--out benchmarks/results/judge_type_one_error.csv]

Design: two systems A and B scored on the same --items items; humans labelled the same random 2 %, 5 % or 20 % of
the items for both systems. No true difference between the systems under the null; the judge errs differently for
each system, so its scores differ:

- 0/1 scores: true label Y = 1{a + u_i + e_si > 0}, u_i ~ N(0, 1) an item effect shared by the systems, e_si ~ N(0,
  1), a = 0.3 (P(Y = 1) = Phi(0.3 / sqrt 2) = 0.584); the judge misses 10 % of the positives for both systems and
  calls 5 % of A's negatives but 25 % of B's negatives positive (naive bias of the difference: 0.2 P(Y = 0) = 0.083);
- continuous scores: Y = u_i + e_si, the judge 0.8 Y + b_s + N(0, 0.6^2), b_A = 0, b_B = 0.2 (naive bias 0.2).

Readings of the difference B - A (vrs_helpers.evaluate.tables.judge, each along a stack of --sims simulated data sets in
one call), as `vrs analyze --human` reads them (Student's t): the judge alone (paired t on all items, the judge
taken as the truth), the humans alone (paired t on the labelled items), PPI (lambda 1, Welch df), PPI++ with its
lambda cross-fitted (5 folds of the labelled items) and, for 0/1 scores, MBM with precision and FOR estimated per
system (delta method, eq. 13 without the labels' noise counted twice); beside them, as a reference no `vrs` reading
uses, PPI++ with lambda tuned on the same labels and ppi_py's z interval. Per cell: the rejection rate at alpha =
0.05 under the null with its Monte-Carlo SE (flagged when outside [0.035, 0.065]), the coverage of the 95 % interval
of B's mean (the system whose judge is biased; true mean Phi(a / sqrt 2), resp. 0), and the power under an
alternative in which B's true mean is higher (0/1: a_B = a + 0.3, a difference of 0.080; continuous: + 0.2). Seeds
are fixed (SeedSequence([--seed, cell index])). The table is written to --out (CSV) and beside it as markdown (.md);
the seconds the whole run took go to stderr.

Runs (the last cells): continuous scores, R = 3, 5 or 2 runs per system, 5 % labels (the same items labelled in
every run, each run's output labelled). Run r of system s on item i: Y = u_i + v_si + rho_sr + e_sri (+ 0.2 for B
under the alternative), v_si ~ N(0, 0.5^2) the system x item effect every run shares, rho_sr ~ N(0, RUN_SD^2) the
run effect (SD 0.1; 0 in the third of these cells), e_sri ~ N(0, 0.8^2); the judge 0.8 Y + b_s + w_si + N(0,
0.45^2), w_si ~ N(0, 0.4^2) its error on that item and system in every run. The null is about runs like these (no
difference in expectation over the runs). Readings: PPI on the per-item means over the runs (runs fixed: about these
runs), the humans alone likewise, the naive two-stage test (Welch's t on the run-level PPI estimates), and PPI
composed with the runs-random model (:func:`vrs_helpers.evaluate.tables.judge.ppi_runs_difference`, the verdict's
reading
with runs) and the humans alone in the same model (lambda 0).

0/1 scores with runs (issue 56; the same four (runs, run SD) after them, :func:`simulate_runs_binary`): the latent
0.3 + u_i + v_si + rho_sr + e_sri of the 0/1 cells with a run effect (SD 0.1, 0) and a system x item effect (SD
0.5), the judge's errors drawn per run; the alternative shifts B's latent by 0.3; flagged outside the 0/1 band
[0.025, 0.075].
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

A_BIN, SHIFT_BIN, SHIFT_CONT = 0.3, 0.3, 0.2
FRACTIONS = (0.02, 0.05, 0.20)
RUN_CELLS = ((3, 0.1), (5, 0.1), (3, 0.0), (2, 0.1))   # (runs, run SD) of the last cells
FOLDS = 5


def simulate_runs(rng, sims: int, items: int, runs: int, shift: float, run_sd: float):
    """(truth, judge) of A and (truth, judge) of B with runs (module docstring): arrays (sims, runs, items)."""
    u = rng.normal(size=(sims, 1, items))
    out = []
    for bias, sh in ((0.0, 0.0), (0.2, shift)):
        v, w = rng.normal(0, 0.5, (sims, 1, items)), rng.normal(0, 0.4, (sims, 1, items))
        y = u + v + rng.normal(0, run_sd, (sims, runs, 1)) + sh + rng.normal(0, 0.8, (sims, runs, items))
        out += [y, 0.8 * y + bias + w + rng.normal(0, 0.45, (sims, runs, items))]
    return out


def simulate_runs_binary(rng, sims: int, items: int, runs: int, shift: float, run_sd: float):
    """0/1 scores with runs (issue 56): (truth, judge) of A and of B, arrays (sims, runs, items). Run r of system s
    on item i is correct when 0.3 + u_i + v_si + rho_sr + e_sri > 0 (+ ``shift`` for B): u_i ~ N(0, 1) the item,
    v_si ~ N(0, 0.5^2) the system x item effect every run shares, rho_sr ~ N(0, run_sd^2) the run, e_sri ~ N(0, 1);
    the judge of each run's output misses 10 % of the positives and calls 5 % (A) or 25 % (B) of the negatives
    positive, drawn anew in every run (as the 0/1 cells without runs)."""
    u = rng.normal(size=(sims, 1, items))
    out = []
    for fp, sh in ((0.05, 0.0), (0.25, shift)):
        v = rng.normal(0, 0.5, (sims, 1, items))
        latent = A_BIN + sh + u + v + rng.normal(0, run_sd, (sims, runs, 1)) + rng.normal(size=(sims, runs, items))
        y = (latent > 0).astype(float)
        miss, false_pos = rng.random(y.shape) < 0.10, rng.random(y.shape) < fp
        out += [y, np.where(y == 1, ~miss, false_pos).astype(float)]
    return out


def runs_readings(ya, ja, yb, jb, n: int) -> tuple[dict, dict]:
    """The difference B - A and B's mean by each reading with runs, labelled items the first n."""
    lab, unl = slice(0, n), slice(n, None)
    avg = [x.mean(-2) for x in (ya, yb, ja, jb)]
    t = {"small_sample": True}
    pair = (ya[..., lab], yb[..., lab], ja[..., lab], jb[..., lab], ja[..., unl], jb[..., unl])
    apair = (avg[0][:, lab], avg[1][:, lab], avg[2][:, lab], avg[3][:, lab], avg[2][:, unl], avg[3][:, unl])
    diff = {"judge only": J.classical_mean(avg[3] - avg[2], **t),
            "human only, runs fixed": J.classical_mean(avg[1][:, lab] - avg[0][:, lab], **t),
            "PPI, runs fixed": J.ppi_difference(*apair, lam=1.0, **t),
            "two-stage Welch (run-level PPI)": J.run_level_welch(*pair),
            "human only, runs random": J.ppi_runs_difference(*pair, lam=0.0),
            "PPI, runs random": J.ppi_runs_difference(*pair)}
    b = (yb[..., lab], jb[..., lab], jb[..., unl])
    mean = {"judge only": J.classical_mean(avg[3], **t),
            "human only, runs fixed": J.classical_mean(avg[1][:, lab], **t),
            "PPI, runs fixed": J.ppi_mean(avg[1][:, lab], avg[3][:, lab], avg[3][:, unl], lam=1.0, **t),
            "two-stage Welch (run-level PPI)": None,
            "human only, runs random": J.ppi_runs_mean(*b, lam=0.0),
            "PPI, runs random": J.ppi_runs_mean(*b)}
    return diff, mean


def simulate(rng, sims: int, items: int, binary: bool, shift: float):
    """(truth, judge) for systems A and B: arrays (sims, items) each."""
    u = rng.normal(size=(sims, items))
    ya_lat = u + rng.normal(size=(sims, items))
    yb_lat = u + rng.normal(size=(sims, items))
    if binary:
        ya = (A_BIN + ya_lat > 0).astype(float)
        yb = (A_BIN + shift + yb_lat > 0).astype(float)
        fn = rng.random((2, sims, items)) < 0.10
        fp_a = rng.random((sims, items)) < 0.05
        fp_b = rng.random((sims, items)) < 0.25
        ja = np.where(ya == 1, ~fn[0], fp_a).astype(float)
        jb = np.where(yb == 1, ~fn[1], fp_b).astype(float)
    else:
        ya, yb = ya_lat, yb_lat + shift
        ja = 0.8 * ya + rng.normal(0, 0.6, (sims, items))
        jb = 0.8 * yb + 0.2 + rng.normal(0, 0.6, (sims, items))
    return ya, yb, ja, jb


def readings(ya, yb, ja, jb, n: int, binary: bool) -> dict:
    """The difference B - A by each reading, labelled items the first n (the items are exchangeable): as `vrs
    analyze --human` reads it (t on Welch df), and PPI++'s z interval of ppi_py beside it."""
    lab, unl = slice(0, n), slice(n, None)
    t = {"small_sample": True}
    pair = (ya[:, lab], yb[:, lab], ja[:, lab], jb[:, lab], ja[:, unl], jb[:, unl])
    out = {"judge only": J.classical_mean(jb - ja, **t), "human only": J.classical_mean(yb[:, lab] - ya[:, lab], **t),
           "PPI": J.ppi_difference(*pair, lam=1.0, **t),
           "PPI++ (cross-fit lambda)": J.ppi_crossfit_difference(*pair, folds=FOLDS, **t),
           "reference: PPI++ in-sample lambda, z (ppi_py)": J.ppi_difference(*pair)}
    if binary:
        out["MBM"] = J.mbm_difference(ja, jb, ya[:, lab], yb[:, lab], ja[:, lab], jb[:, lab], **t)
    return out


def means_b(yb, jb, n: int, binary: bool) -> dict:
    """B's mean by each reading (its coverage)."""
    lab, unl = slice(0, n), slice(n, None)
    t = {"small_sample": True}
    out = {"judge only": J.classical_mean(jb, **t), "human only": J.classical_mean(yb[:, lab], **t),
           "PPI": J.ppi_mean(yb[:, lab], jb[:, lab], jb[:, unl], lam=1.0, **t),
           "PPI++ (cross-fit lambda)": J.ppi_crossfit_mean(yb[:, lab], jb[:, lab], jb[:, unl], folds=FOLDS, **t),
           "reference: PPI++ in-sample lambda, z (ppi_py)": J.ppi_mean(yb[:, lab], jb[:, lab], jb[:, unl])}
    if binary:
        out["MBM"] = J.mbm_mean(jb, yb[:, lab], jb[:, lab], **t)
    return out


def runs_cell(null_rng, alt_rng, sims: int, items: int, runs: int, run_sd: float, n: int, chunk: int = 100,
              binary: bool = False) -> dict:
    """{reading: (p under the null, p under the alternative, B's mean under the null)} of a cell with runs, simulated
    in chunks of ``chunk`` data sets (memory); B's mean as a SimpleNamespace of estimate, lower, upper."""
    from types import SimpleNamespace

    parts = {}
    for start in range(0, sims, chunk):
        k = min(chunk, sims - start)
        sim = simulate_runs_binary if binary else simulate_runs
        d0, m0 = runs_readings(*sim(null_rng, k, items, runs, 0.0, run_sd), n)
        d1, _ = runs_readings(*sim(alt_rng, k, items, runs, SHIFT_BIN if binary else SHIFT_CONT, run_sd), n)
        for m in d0:
            got = parts.setdefault(m, {"p0": [], "p1": [], "est": [], "lo": [], "hi": []})
            got["p0"].append(np.asarray(d0[m].p_value))
            got["p1"].append(np.asarray(d1[m].p_value))
            if m0[m] is not None:
                for key, attr in (("est", "estimate"), ("lo", "lower"), ("hi", "upper")):
                    got[key].append(np.asarray(getattr(m0[m], attr)))
    out = {}
    for m, got in parts.items():
        mean = (SimpleNamespace(estimate=np.concatenate(got["est"]), lower=np.concatenate(got["lo"]),
                                upper=np.concatenate(got["hi"])) if got["est"] else None)
        out[m] = (np.concatenate(got["p0"]), np.concatenate(got["p1"]), mean)
    return out


def rate(p) -> tuple[float, int]:
    p = np.asarray(p, dtype=float)
    ok = np.isfinite(p)
    return float(np.mean(p[ok] < 0.05)), int(ok.sum())


def main(argv=None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=2043)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "judge_type_one_error.csv"))
    args = ap.parse_args(argv)
    start = time.perf_counter()
    rows = []
    cells = [(b, f, 1, 0.0) for b in (True, False) for f in FRACTIONS] + [(False, 0.05, r, sd) for r, sd in RUN_CELLS]
    cells += [(True, 0.05, r, sd) for r, sd in RUN_CELLS]   # issue 56: 0/1 scores with runs
    for index, (binary, fraction, runs, run_sd) in enumerate(cells):
        n = int(round(fraction * args.items))
        null_rng, alt_rng = (np.random.default_rng(s) for s in np.random.SeedSequence([args.seed, index]).spawn(2))
        if runs == 1:
            null = simulate(null_rng, args.sims, args.items, binary, 0.0)
            alt = simulate(alt_rng, args.sims, args.items, binary, SHIFT_BIN if binary else SHIFT_CONT)
            diff_null, diff_alt = readings(*null, n, binary), readings(*alt, n, binary)
            mb = means_b(null[1], null[3], n, binary)
            found = {m: (diff_null[m].p_value, diff_alt[m].p_value, mb[m]) for m in diff_null}
        else:
            found = runs_cell(null_rng, alt_rng, args.sims, args.items, runs, run_sd, n, binary=binary)
        # B's true mean: P(latent > 0), the latent's SD sqrt 2 without runs, sqrt(2.25 + run SD^2) with them
        truth_b = (float(stats.norm.cdf(A_BIN / np.sqrt(2 if runs == 1 else 2.25 + run_sd ** 2))) if binary
                   else 0.0)
        kind = (("0/1" if binary else "continuous") if runs == 1 else
                f"{'0/1' if binary else 'continuous'}, {runs} runs (run SD {run_sd:g})")
        for method, (p_null, p_alt, mean) in found.items():
            r, sims = rate(p_null)
            if mean is None:
                coverage = float("nan")
            else:
                cover = np.asarray((mean.lower <= truth_b) & (truth_b <= mean.upper))
                coverage = float(cover[np.isfinite(np.asarray(mean.estimate, dtype=float))].mean())
            rows.append({"scores": kind, "labelled": f"{100 * fraction:g} %",
                         "labels": n, "reading": method, "sims": sims, "null rate": r,
                         "SE": float(np.sqrt(r * (1 - r) / sims)),
                         "band": ("naive" if method == "judge only" else
                                  "ok" if (0.025 <= r <= 0.075 if binary and runs > 1 else 0.035 <= r <= 0.065)
                                  else "OUTSIDE"),
                         "coverage of B's mean": coverage, "power": rate(p_alt)[0]})
    seconds = time.perf_counter() - start
    table = pd.DataFrame(rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    shown = table.assign(**{"null rate (SE)": [f"{r:.3f} ({s:.3f})" for r, s in zip(table["null rate"], table["SE"],
                                                                                     strict=True)],
                            "coverage of B's mean": table["coverage of B's mean"].map("{:.3f}".format),
                            "power": table["power"].map("{:.3f}".format)})
    cols = ["scores", "labelled", "labels", "reading", "sims", "null rate (SE)", "band", "coverage of B's mean",
            "power"]
    md = shown[cols].to_markdown(index=False, colalign=["left"] * 4 + ["right"] * 2 + ["left"] + ["right"] * 2)
    out.with_suffix(".md").write_text(
        md + f"\n\n{args.items} items per system, {args.sims} simulated data sets per cell and hypothesis "
        f"(`python benchmarks/judge_type_one_error.py --sims {args.sims} --items {args.items} --seed {args.seed}`).\n",
        encoding="utf-8")
    print(f"{seconds:.1f} s in all", file=sys.stderr)   # the timing varies: not in the committed table
    return table


if __name__ == "__main__":
    print(main().to_string(index=False))
