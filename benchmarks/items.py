"""Benchmark of the item analysis (issue 55): time of 100 models x 10,000 items, and the planted mislabelled items.

    python benchmarks/items.py timing [--models 100] [--items 10000] [--runs 1]
    python benchmarks/items.py resolution [--models 20] [--items 500] [--runs 1] [--reps 1000]
    python benchmarks/items.py planted [--models 100] [--items 2000] [--reps 20] [--share 0.02] [--sd-ability 1.5]
                                      [--guessing 0.0]

``timing``: a 0/1 Rasch benchmark (abilities N(0, 1), difficulties N(0, 1.5^2)) of ``models x items`` answers
(``runs`` each) analysed by :func:`vrs_helpers.evaluate.items.analysis.analyze_items` from a DataFrame: the wall
time of the whole analysis (matrix, item statistics, Rasch GLMM, REML components, decision study, the Result) and
of its parts (the 2PL included). Goal: <= 60 s for 100 x 10,000 on this machine (issue 55).

``resolution``: the type-I error of the smallest resolved difference: ``reps`` Rasch benchmarks in which the first
two models have the same ability (0; the others N(0, 1.5^2)); the share in which their mean scores differ by more
than the reported ``smallest_difference`` (alpha 0.05).

``planted``: ``reps`` simulated benchmarks of the same kind with the answers of ``share`` of the items flipped (a
mislabelled item: the right answer scored wrong and vice versa); the share of the planted items flagged
``negative_discrimination`` (goal >= 90 %), the share of the clean items flagged (false-flag rate) and the share
of the flagged items that are clean (false discovery proportion; goal <= 5 %), each pooled over the repetitions.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rasch_table(seed: int, models: int, items: int, runs: int = 1, flipped: float = 0.0,
                sd_ability: float = 1.0, sd_difficulty: float = 1.5, guessing: float = 0.0):
    """A long 0/1 table (model, item, run, correct) and the ids of the flipped items; ``guessing``: a share of the
    other items answered at random (P = 0.3 for every model: no discrimination at all, the flag's null)."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(0, sd_ability, models)
    difficulty = rng.normal(0, sd_difficulty, items)
    p = 1 / (1 + np.exp(-(ability[:, None] - difficulty[None, :])))
    order = rng.permutation(items)
    planted = order[:int(round(flipped * items))]
    guess = order[len(planted):len(planted) + int(round(guessing * items))]
    p[:, guess] = 0.3
    y = (rng.random((runs, models, items)) < p[None]).astype(np.int8)
    y[:, :, planted] = 1 - y[:, :, planted]
    r, m, i = np.meshgrid(np.arange(runs), np.arange(models), np.arange(items), indexing="ij")
    table = pd.DataFrame({"model": pd.Categorical.from_codes(m.ravel(), [f"m{k:03d}" for k in range(models)]),
                          "item": pd.Categorical.from_codes(i.ravel(), [f"i{k:05d}" for k in range(items)]),
                          "run": r.ravel(), "correct": y.ravel()})
    return table, {f"i{k:05d}" for k in planted}


def timing(args) -> dict:
    from vrs_helpers.evaluate.items.analysis import analyze_items
    from vrs_helpers.evaluate.items.matrix import item_matrix
    from vrs_helpers.evaluate.items.rasch import rasch
    from vrs_helpers.evaluate.items.reliability import benchmark_reliability
    from vrs_helpers.evaluate.items.statistics import item_statistics
    from vrs_helpers.evaluate.items.twopl import twopl

    table, _ = rasch_table(55, args.models, args.items, args.runs)
    t0 = time.perf_counter()
    result = analyze_items(table, response="correct", system="model", item="item",
                           replications=["run"] if args.runs > 1 else ())
    total = time.perf_counter() - t0
    parts = {}
    long = table.rename(columns={"correct": "score"})
    t = time.perf_counter()
    m = item_matrix(long)
    parts["matrix"] = time.perf_counter() - t
    for name, fn in (("statistics", lambda: item_statistics(m)), ("rasch", lambda: rasch(m)),
                     ("twopl", lambda: twopl(m)), ("reliability", lambda: benchmark_reliability(m))):
        t = time.perf_counter()
        fn()
        parts[name] = time.perf_counter() - t
    rel = result.data["reliability"]
    return {"models": args.models, "items": args.items, "runs": args.runs, "rows": len(table),
            "seconds_total": round(total, 2), "seconds_parts": {k: round(v, 2) for k, v in parts.items()},
            "phi": rel["phi"], "relative": rel["relative"]}


def planted(args) -> dict:
    from vrs_helpers.evaluate.items.analysis import analyze_items

    found = n_planted = false = n_clean = flagged = 0
    for rep in range(args.reps):
        table, truth = rasch_table(1000 + rep, args.models, args.items, args.runs, flipped=args.share,
                                   sd_ability=args.sd_ability, guessing=args.guessing)
        result = analyze_items(table, response="correct", system="model", item="item",
                               replications=["run"] if args.runs > 1 else ())
        flags = set(result.data["flagged"]["negative_discrimination"])
        found += len(flags & truth)
        n_planted += len(truth)
        false += len(flags - truth)
        n_clean += args.items - len(truth)
        flagged += len(flags)
    return {"models": args.models, "items": args.items, "runs": args.runs, "share": args.share, "reps": args.reps,
            "sd_ability": args.sd_ability, "sd_difficulty": 1.5, "guessing": args.guessing,
            "planted": n_planted, "found": found, "recall": found / n_planted, "false_flags": false,
            "false_flag_rate": false / n_clean, "false_discovery": false / max(flagged, 1)}


def resolution(args) -> dict:
    from vrs_helpers.evaluate.items.matrix import item_matrix
    from vrs_helpers.evaluate.items.reliability import benchmark_reliability

    hits = 0
    for rep in range(args.reps):
        rng = np.random.default_rng(5500 + rep)
        a = rng.normal(0, args.sd_ability, args.models)
        a[:2] = 0.0
        d = rng.normal(0, 1.5, args.items)
        p = 1 / (1 + np.exp(-(a[:, None] - d[None, :])))
        y = (rng.random((args.runs, args.models, args.items)) < p[None]).astype(float)
        r, m, i = np.meshgrid(np.arange(args.runs), np.arange(args.models), np.arange(args.items), indexing="ij")
        mat = item_matrix(pd.DataFrame({"model": m.ravel(), "item": i.ravel(), "run": r.ravel(), "score": y.ravel()}))
        rel = benchmark_reliability(mat)
        hits += abs(mat.means[0].mean() - mat.means[1].mean()) > rel["smallest_difference"]
    return {"models": args.models, "items": args.items, "runs": args.runs, "reps": args.reps,
            "sd_ability": args.sd_ability, "rejection_rate": hits / args.reps,
            "mc_se": float(np.sqrt(0.05 * 0.95 / args.reps))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["timing", "planted", "resolution"])
    ap.add_argument("--models", type=int, default=None)
    ap.add_argument("--items", type=int, default=None)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--share", type=float, default=0.02)
    ap.add_argument("--sd-ability", type=float, default=1.5, dest="sd_ability",
                    help="SD of the models' abilities in logits (default 1.5: accuracies from about 20 to 85 %%)")
    ap.add_argument("--guessing", type=float, default=0.0,
                    help="share of items answered at random by every model (no discrimination)")
    args = ap.parse_args(argv)
    if args.what == "timing":
        args.models, args.items = args.models or 100, args.items or 10_000
        out = timing(args)
    elif args.what == "resolution":
        args.models, args.items = args.models or 20, args.items or 500
        out = resolution(args)
    else:
        args.models, args.items = args.models or 100, args.items or 2000
        out = planted(args)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
