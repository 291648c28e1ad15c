"""What the ranking of many systems promises (issue 38): family-wise error of its pairwise decisions and the
coverage of its simultaneous rank intervals, by simulation, on the workflow's own comparison.

    python benchmarks/ranking_error.py [--sims 1000] [--binary-sims 300] [--cells ...] [--workers 2]
        [--out benchmarks/results/ranking_error.csv] [--seed 3838]

Each simulated log (vrs_helpers.book.simulation.evaluation_log, the base design of benchmarks/type_one_error.py:
3 runs per system, run SD 0.05, item SD 0.1, residual SD 0.1; 0/1 scores with intercept 0.5, run SD 0.35 and item
SD 1 on the logit scale) is analysed as `vrs analyze --runs nested` does for the runs-random reading:
`compare_systems(..., replications=["run"], runs="nested")` (independent runs: the labels 0, 1, 2 of these logs are
shared by name only; the default `--runs auto` would fit them as crossed, and the results were measured with nested
runs) with its default test and family-wise pairwise decisions (continuous scores: Tukey on
Kenward-Roger df; 0/1 scores of 12 systems: the same on the linear mixed model of the scores, the default beyond
5 systems - rows measured before that default, with the Wald z adjusted by the maximum |z| over the parametric
bootstrap's 199 simulations, are kept in the table as such - or with ``--test max-t`` the single-step max-|z| of
multcomp::glht from the GLMM's covariance), then
`vrs_helpers.evaluate.tables.ranking.rank_intervals` on those decisions. Per cell:

- ``fwer``: the rate at which some pair of *equal* systems is declared different (global null: any pair; partial
  null: any pair among the equal six), with its Monte-Carlo SE; the band is [0.035, 0.065] (0/1: [0.025, 0.075])
  under the global null, and at most 0.065 under the partial null, where a single-step procedure (Tukey, max-T)
  keeps the family-wise error below alpha by construction - conservatively, since it adjusts for all 66 pairs
  while only the 15 among the equal six can be false discoveries;
- ``rank miss``: the rate at which some system's rank interval excludes its true rank (1 + the number of truly
  better systems; tied systems share it): the simultaneous coverage the rank intervals promise (Mogstad et al.
  2024) is 1 - rank miss >= 0.95;
- ``power``: under the partial null, the share of the 36 pairs (equal, better) declared different, and the rate at
  which every one of them is.

Cells: "12 systems, 0/1" (100 items) under the global null (all systems equal), with the default test (the
linear model), with ``--test bootstrap`` (the default before issue 38's linear model; measured as "12 systems, 0/1"
then) and with ``--test max-t``; "6 equal + 6 better" (continuous,
100 items, the better six by 0.25, about 1.6 times the minimum detectable difference of two systems in this
design); "3 systems, 0/1, S2 all correct" (issue 39's separation: S0 = S1 at the 0/1 design, S2 12 logits
higher, all correct in 99.7 % of logs; its pairs are not estimable and left out of the family, so the
family-wise error is that of S0 - S1, compared without S2 by the bootstrap LRT; band [0.025, 0.075]). The
continuous 12-system global null is the "12 systems" row of benchmarks/type_one_error.py (1,000 logs):
under the global null every true rank is 1 and a rank interval misses it exactly when some pair is declared
different, so there the rank-interval miss rate is the family-wise error.
Seeds are fixed per cell and simulation, so a cell's numbers do not depend on the workers.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vrs_helpers.book.glrt import compare_systems  # noqa: E402
from vrs_helpers.book.simulation import evaluation_log  # noqa: E402
from vrs_helpers.errors import VRSError  # noqa: E402
from vrs_helpers.evaluate.tables.ranking import decision_matrix, rank_intervals  # noqa: E402
from vrs_helpers.threads import blas_limit  # noqa: E402

ALPHA = 0.05
BAND = {"gaussian": (0.035, 0.065), "binomial": (0.025, 0.075)}
BASE = {"systems": 12, "runs": 3, "items": 300, "run_sd": 0.05, "item_sd": 0.1, "residual_sd": 0.1,
        "family": "gaussian", "mean": 0.0}
BINARY = {"family": "binomial", "mean": 0.5, "run_sd": 0.35, "item_sd": 1.0, "items": 100}
CELLS = {
    "12 systems, 0/1": {**BINARY, "delta": np.zeros(12)},
    "12 systems, 0/1, --test bootstrap": {**BINARY, "delta": np.zeros(12), "test": "bootstrap"},
    "12 systems, 0/1, --test max-t": {**BINARY, "delta": np.zeros(12), "test": "max-t"},
    "6 equal + 6 better": {"items": 100, "delta": np.r_[np.zeros(6), np.full(6, 0.25)], "partial": True},
    # issue 39 (4): a separated system among three - S2 all correct (12 logits above the others: an error in 0.3 %
    # of logs), S0 = S1 at the 0/1 base design; S2's pairs are not estimable, S0 - S1 is the family
    "3 systems, 0/1, S2 all correct": {**BINARY, "systems": 3, "delta": np.array([0.0, 0.0, 12.0]),
                                        "separated": True},
}


def _one(cell: str, i: int, seed: int) -> dict:
    d = {**BASE, **CELLS[cell]}
    delta = d.pop("delta")
    test = d.pop("test", None)
    d.pop("partial", None)
    d.pop("separated", None)
    rng = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(cell.encode()), i]))
    log = evaluation_log(rng, delta=delta, **d)
    try:
        c = compare_systems(log, "score", "system", "item", replications=["run"], family=d["family"], n_sim=199,
                            seed=int(rng.integers(2 ** 31)), test=test, runs="nested")
    except (VRSError, np.linalg.LinAlgError):
        return {"i": i, "failed": True}
    systems = [f"S{s}" for s in range(len(delta))]
    est = c.means.set_index(c.means.columns[0]).loc[systems, "emmean"].to_numpy(float)
    differ, _ = decision_matrix(systems, c.contrasts, ALPHA)
    equal = np.equal.outer(delta, delta)
    np.fill_diagonal(equal, False)
    ranks = rank_intervals(est, differ)
    true_rank = 1 + (delta[None, :] > delta[:, None]).sum(axis=1)
    miss = bool(((true_rank < ranks["rank_low"].to_numpy()) | (true_rank > ranks["rank_high"].to_numpy())).any())
    between = ~np.equal.outer(delta, delta)
    found = differ[between]
    return {"i": i, "failed": False, "false": bool((differ & equal).any()), "miss": miss,
            "power": float(found.mean()) if between.any() else np.nan,
            "all": bool(found.all()) if between.any() else np.nan,
            "method": c.test.method if len(delta) < 3 else (
                "Tukey-adjusted t on small-sample df" if "df" in c.contrasts else
                "bootstrap LRT of the pair left (a separated system's pairs not estimable)"
                if c.adjust == "bootstrap LRT of the pair" else f"single-step max-|z| ({c.adjust})")}


def _job(args) -> tuple[list, float]:
    cell, indices, seed = args
    t0 = time.process_time()
    with warnings.catch_warnings(), blas_limit(1):
        warnings.simplefilter("ignore")
        rows = [_one(cell, i, seed) for i in indices]
    return rows, time.process_time() - t0


def _rate(x) -> tuple[float, float]:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    r = float(x.mean()) if len(x) else float("nan")
    return r, float(np.sqrt(r * (1 - r) / max(len(x), 1)))


def run_cell(cell: str, sims: int, seed: int, pool, chunk: int = 10) -> dict:
    jobs = [(cell, range(a, min(a + chunk, sims)), seed) for a in range(0, sims, chunk)]
    results = list(pool.map(_job, jobs)) if pool is not None else [_job(j) for j in jobs]
    rows = pd.DataFrame([r for rs, _ in results for r in rs])
    ok = rows[~rows["failed"]]
    family = {**BASE, **CELLS[cell]}["family"]
    fwer, fse = _rate(ok["false"])
    miss, mse = _rate(ok["miss"])
    lo, hi = BAND[family]
    if CELLS[cell].get("partial"):  # family-wise control promises <= alpha; single-step is conservative here
        lo = 0.0
    power = float(ok["power"].mean()) if ok["power"].notna().any() else np.nan
    every, _ = _rate(ok["all"]) if ok["all"].notna().any() else (np.nan, np.nan)
    if CELLS[cell].get("separated"):  # the separated system's pairs are not decisions: no power to report
        power = every = np.nan
    return {"cell": cell, "family": family, "decisions": "; ".join(sorted(ok["method"].unique())), "sims": sims,
            "failed": int(rows["failed"].sum()), "fwer": fwer, "fwer SE": fse,
            "band": "ok" if lo <= fwer <= hi else "FLAG", "rank miss": miss, "rank miss SE": mse,
            "power (pairs found)": power, "power (all found)": every,
            "CPU s": round(sum(c for _, c in results), 1)}


def markdown(table: pd.DataFrame) -> str:
    lines = ["| cell | decisions | sims | family-wise error (SE) | band | rank interval misses (SE) | "
             "power: pairs found, all found |", "|:--|:--|--:|--:|:--|--:|--:|"]
    for _, r in table.iterrows():
        test = str(r["decisions"]).replace("|", "\\|")
        power = "" if pd.isna(r["power (pairs found)"]) else \
            f"{r['power (pairs found)']:.3f}, {r['power (all found)']:.3f}"
        lines.append(f"| {r['cell']} | {test} | {int(r['sims'])} | {r['fwer']:.3f} ({r['fwer SE']:.3f}) | "
                     f"{r['band']} | {r['rank miss']:.3f} ({r['rank miss SE']:.3f}) | {power} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sims", type=int, default=1000, help="simulated logs per continuous cell (default 1000)")
    ap.add_argument("--binary-sims", type=int, default=300, help="simulated logs per 0/1 cell (default 300)")
    ap.add_argument("--cells", nargs="+", default=list(CELLS), metavar="CELL")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="benchmarks/results/ranking_error.csv")
    ap.add_argument("--seed", type=int, default=3838)
    args = ap.parse_args(argv)
    unknown = [c for c in args.cells if c not in CELLS]
    if unknown:
        ap.error(f"unknown cell(s) {unknown}; the cells: {', '.join(map(repr, CELLS))}")
    out = Path(args.out)
    done = pd.read_csv(out) if out.exists() else pd.DataFrame()
    pool = ProcessPoolExecutor(args.workers) if args.workers > 1 else None
    try:
        for cell in args.cells:
            sims = args.binary_sims if {**BASE, **CELLS[cell]}["family"] == "binomial" else args.sims
            if len(done) and len(have := done[done["cell"] == cell]) and int(have["sims"].iloc[0]) >= sims:
                continue
            row = run_cell(cell, sims, args.seed, pool)
            done = pd.concat([done[done["cell"] != cell] if len(done) else done, pd.DataFrame([row])],
                             ignore_index=True)
            order = {c: i for i, c in enumerate(CELLS)}
            done = done.sort_values("cell", key=lambda s: s.map(order)).reset_index(drop=True)
            out.parent.mkdir(parents=True, exist_ok=True)
            for path, text in ((out, done.to_csv(index=False)), (out.with_suffix(".md"), markdown(done))):
                tmp = path.with_suffix(path.suffix + ".tmp")
                tmp.write_text(text)
                os.replace(tmp, path)
            print(markdown(done[done["cell"] == cell]).splitlines()[-1], flush=True)
    finally:
        if pool is not None:
            pool.shutdown()
    print(markdown(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
