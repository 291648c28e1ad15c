"""Benchmark `vrs analyze` end to end with many systems (issue 38's speed goals), beside a Python peer in the same
session.

    python benchmarks/many_systems.py [--designs binary3 binary12 continuous50] [--evalstats PATH] [--repeat 1]

Designs (simulated here: item effects, a run effect per system and seed, systems a step apart):
  binary3       0/1 scores, 3 systems x 3 seeds x 200 items (goal: <= 10 s)
  binary12      0/1 scores, 12 systems x 3 seeds x 400 items (goal: < 60 s; 294 s before issue 38)
  binary12-199  the same with --n-sim 199 (the default is 1000 simulations)
  continuous50  continuous scores, 50 systems x 3 seeds x 1,000 items (goal: < 60 s)

Each design is written as one CSV and analysed by `vrs analyze FILE --response score --item item --system system
--replication seed --out DIR` (reading, validation, every reading, the report with papermill and its HTML): the wall
time of the whole command, the best of ``--repeat`` runs. The peer is `evalstats analyze FILE --format long` (PyPI
evalstats 0.3.3, per-model Wilson/bootstrap CIs, simultaneous pairwise CIs, rank bands; no runs-random model, no
report) on the same rows, when ``--evalstats`` names its executable or it is on PATH; install it in a scratch venv
(`python -m venv /tmp/es && /tmp/es/bin/pip install evalstats`), never in the project's. The ratio printed is
ours / peer. Run it on a quiet machine (`flock /tmp/vrs-heavy.lock ...`): both are wall times.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

DESIGNS = {"binary3": (3, 3, 200, True, 10.0), "binary12": (12, 3, 400, True, 60.0),
           "binary12-199": (12, 3, 400, True, 60.0), "continuous50": (50, 3, 1000, False, 60.0)}
EXTRA = {"binary12-199": ["--n-sim", "199"]}  # the bootstrap with 199 simulations (an exact Monte-Carlo test too)


def simulate(systems: int, seeds: int, items: int, binary: bool, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    item = rng.normal(0, 1.0 if binary else 0.1, items)
    parts = []
    for s in range(systems):
        for r in range(seeds):
            eta = 0.3 + 0.05 * s + rng.normal(0, 0.05) + item
            y = (rng.random(items) < 1 / (1 + np.exp(-eta))).astype(int) if binary else eta + rng.normal(0, 0.1,
                                                                                                         items)
            parts.append(pd.DataFrame({"system": f"model{s:02d}", "seed": r, "item": np.arange(items), "score": y}))
    return pd.concat(parts, ignore_index=True)


def _wall(cmd: list[str], repeat: int) -> tuple[float, int, str]:
    best, code, err = float("inf"), 0, ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        best = min(best, time.perf_counter() - t0)
        code, err = r.returncode, r.stderr[-500:]
    return best, code, err


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--evalstats", default=shutil.which("evalstats"), help="the peer's executable (optional)")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    vrs = shutil.which("vrs") or str(Path(sys.executable).parent / "vrs")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in args.designs:
            k, r, n, binary, goal = DESIGNS[name]
            df = simulate(k, r, n, binary)
            path = tmp / f"{name.split('-')[0]}.csv"
            df.to_csv(path, index=False)
            ours, code, err = _wall([vrs, "analyze", str(path), "--response", "score", "--item", "item", "--system",
                                     "system", "--replication", "seed", "--out", str(tmp / f"out-{name}"),
                                     *EXTRA.get(name, [])],
                                    args.repeat)
            if code != 0:
                print(f"{name}: vrs analyze failed (exit {code}): {err}", file=sys.stderr)
                return 1
            row = {"design": name, "rows": len(df), "vrs analyze s": round(ours, 1), "goal s": goal,
                   "met": "yes" if ours <= goal else "no"}
            if args.evalstats:
                peer_path = tmp / f"{name.split('-')[0]}-peer.csv"
                df.rename(columns={"system": "model", "item": "input", "seed": "run"}).to_csv(peer_path,
                                                                                               index=False)
                peer, pcode, _ = _wall([args.evalstats, "analyze", str(peer_path), "--format", "long"],
                                       args.repeat)
                row.update({"evalstats s": round(peer, 1) if pcode == 0 else float("nan"),
                            "ratio ours/peer": round(ours / peer, 2) if pcode == 0 else float("nan")})
            rows.append(row)
            print(row, flush=True)
    print(pd.DataFrame(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
