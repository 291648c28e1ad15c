"""Benchmark: the simultaneous coverage of the leaderboard's rank intervals under a partial null (issue 54).

    python benchmarks/rank_coverage.py [--logs 300] [--designs k100 k20x3] [--out FILE]

The rank interval of system j is [1 + the number of systems significantly better, k - the number significantly
worse] (Mogstad, Romano, Shaikh & Wilhelm 2024, "Inference for ranks"; :func:`vrs_helpers.evaluate.tables.ranking.
rank_intervals`), made from the family-wise pairwise decisions that `vrs analyze` ranks with. Its claim: with
probability at least 1 - alpha, every system's true rank lies in its interval, jointly. A *partial null* tests the
claim where it is hardest to keep: many systems truly tied (any decision between them is an error), many truly
different (decisions that must go the right way).

Designs (abilities on the logit scale in groups of tied systems, item difficulty N(0, 1), P(correct) =
logistic(ability - difficulty + run effect); the simulator is benchmarks/leaderboard.py's):

  k100    100 systems in 20 groups of 5 tied systems, the groups 0.1 apart; one run, 500 items: the logistic GLMM's
          Tukey-adjusted z contrasts (the route of `vrs analyze` for one run of 0/1 scores)
  k20x3   20 systems in 4 groups of 5, the groups 0.3 apart; 3 runs with the labels 0, 1, 2 reused by every system
          (a run effect N(0, 0.05) per system and run), 200 items: the runs-random reading (the linear model of the
          0/1 scores, crossed runs, Kenward-Roger, Tukey) - `vrs analyze --replication run`'s route

For each log: the decisions at alpha = 0.05 (:func:`vrs_helpers.book.glrt.compare_systems` with the arguments
`vrs analyze` passes), the rank intervals, and

  covered      every system's true rank (1 + the number of systems truly better: csranks' convention for ties)
               lies in its interval;
  tie range    every system's interval holds all the ranks its tie group could take (no tied pair separated and no
               pair separated the wrong way: the event family-wise error control is about);
  false        decisions between tied systems or against the true order (counted over the log's pairs);
  power        the share of truly different pairs that are separated.

Reports the joint coverage with its 95 % Clopper-Pearson interval. Writes Markdown to ``--out`` (default
benchmarks/results/rank_coverage.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# name: (systems, groups, gap between groups, runs, items)
DESIGNS = {"k100": (100, 20, 0.1, 1, 500), "k20x3": (20, 4, 0.3, 3, 200)}
ALPHA = 0.05


def simulate(k: int, groups: int, gap: float, runs: int, items: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows (model, run, item, score) and the abilities (groups of k / groups tied systems)."""
    rng = np.random.default_rng(seed)
    ability = np.repeat((np.arange(groups) - (groups - 1) / 2) * gap, k // groups)
    ability = ability[rng.permutation(k)]  # the order of the names says nothing about the ability
    difficulty = rng.normal(0, 1.0, items)
    run_effect = rng.normal(0, 0.05, (k, runs, 1)) if runs > 1 else np.zeros((k, 1, 1))
    eta = ability[:, None, None] - difficulty[None, None, :] + run_effect
    score = (rng.random(eta.shape) < 1 / (1 + np.exp(-eta))).astype(np.int8)
    m, r, j = np.meshgrid(np.arange(k), np.arange(runs), np.arange(items), indexing="ij")
    names = np.char.add("m", np.char.zfill(np.arange(k).astype(str), 3))
    df = pd.DataFrame({"model": names[m.ravel()], "run": r.ravel(), "item": j.ravel(), "score": score.ravel()})
    return df, ability


def one_log(design: str, seed: int) -> dict:
    from vrs_helpers.book.glrt import compare_systems
    from vrs_helpers.evaluate.tables.ranking import decision_intervals, decision_matrix, rank_intervals

    k, groups, gap, runs, items = DESIGNS[design]
    df, ability = simulate(k, groups, gap, runs, items, seed)
    df["model"] = df["model"].astype("category")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if runs > 1:
            df["run"] = df["run"].astype(str)
            comp = compare_systems(df, "score", "model", "item", family="binomial", replications=["run"],
                                   settle_alpha=ALPHA)
        else:
            comp = compare_systems(df.drop(columns="run"), "score", "model", "item", family="binomial")
    m, _ = decision_intervals(comp, "binomial", ALPHA)
    systems = m.iloc[:, 0].astype(str).tolist()
    est = m["probability"] if "probability" in m else m["emmean"]
    differ, _ = decision_matrix(systems, comp.contrasts, ALPHA)
    ranks = rank_intervals(est.to_numpy(float), differ)
    theta = ability[[int(s[1:]) for s in systems]]
    better = (theta[None, :] > theta[:, None]).sum(axis=1)  # systems truly better than each
    worse = (theta[None, :] < theta[:, None]).sum(axis=1)
    true_rank = 1 + better
    low, high = ranks["rank_low"].to_numpy(), ranks["rank_high"].to_numpy()
    covered = bool(((low <= true_rank) & (true_rank <= high)).all())
    tie_range = bool(((low <= 1 + better) & (k - worse <= high)).all())
    iu = np.triu_indices(k, 1)
    sep = differ[iu]
    d_true = np.sign(theta[iu[1]] - theta[iu[0]])
    d_est = np.sign(est.to_numpy(float)[iu[1]] - est.to_numpy(float)[iu[0]])
    false = int((sep & ((d_true == 0) | (d_est != d_true))).sum())
    power = float(sep[d_true != 0].mean()) if (d_true != 0).any() else float("nan")
    return {"covered": covered, "tie_range": tie_range, "false": false, "power": power,
            "route": str(getattr(comp, "adjust", ""))}


def clopper_pearson(x: int, n: int) -> tuple[float, float]:
    lo = stats.beta.ppf(0.025, x, n - x + 1) if x else 0.0
    hi = stats.beta.ppf(0.975, x + 1, n - x) if x < n else 1.0
    return float(lo), float(hi)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", type=int, default=300)
    ap.add_argument("--designs", nargs="*", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "rank_coverage.md"))
    args = ap.parse_args(argv)
    rows = []
    for name in args.designs:
        t0 = time.perf_counter()
        logs = []
        for seed in range(1, args.logs + 1):
            logs.append(one_log(name, seed))
            if seed % 25 == 0:
                print(f"{name}: {seed}/{args.logs} logs, {time.perf_counter() - t0:.0f} s", file=sys.stderr,
                      flush=True)
        n = len(logs)
        cov = sum(g["covered"] for g in logs)
        tie = sum(g["tie_range"] for g in logs)
        k, groups, gap, runs, items = DESIGNS[name]
        lo, hi = clopper_pearson(cov, n)
        tlo, thi = clopper_pearson(tie, n)
        rows.append({"design": name, "systems": k, "tied groups": f"{groups} x {k // groups}", "gap (logit)": gap,
                     "runs": runs, "items": items, "logs": n,
                     "joint coverage": f"{cov / n:.3f} ({lo:.3f}-{hi:.3f})",
                     "tie range covered": f"{tie / n:.3f} ({tlo:.3f}-{thi:.3f})",
                     "false decisions per log": f"{np.mean([g['false'] for g in logs]):.3f}",
                     "power (pairs separated)": f"{np.nanmean([g['power'] for g in logs]):.3f}",
                     "adjustment": ", ".join(sorted({g['route'] for g in logs})),
                     "s": round(time.perf_counter() - t0, 1)})
        print(rows[-1], flush=True)
    text = ["# Rank-interval coverage under a partial null (issue 54)", "",
            f"`python benchmarks/rank_coverage.py {' '.join(argv if argv is not None else sys.argv[1:])}` on "
            f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; alpha = {ALPHA}, "
            "seeds 1..logs; the designs and columns are the script's docstring. The claim is joint coverage >= "
            f"{1 - ALPHA:.2f}.", "", pd.DataFrame(rows).to_markdown(index=False)]
    Path(args.out).write_text("\n".join(text) + "\n")
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
