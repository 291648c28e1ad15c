"""Benchmark: leaderboard-sized tables (issue 54) through `vrs analyze` end to end, beside evalstats in the same run,
and the family-wise error of the k = 100 ranking under the global null.

    python benchmarks/leaderboard.py [--designs lb100 lb100x3 cont50] [--fwer-logs 100] [--out FILE]

Designs (simulated here: model m's ability a_m ~ N(0, 0.5), item j's difficulty b_j ~ N(0, 1); per model and run a
run effect N(0, 0.05) (0/1) or N(0, 0.02) (continuous)):
  lb100     0/1, 100 models x 1 run x 10,000 items (10^6 rows), P(correct) = logistic(a_m - b_j + run)  (goal 30 s)
  lb100x3   0/1, 100 models x 3 runs x 3,000 items (9 x 10^5 rows)                                     (goal 60 s)
  cont50    continuous, 50 models x 3 runs x 1,000 items, (a_m - b_j + run) / 10 + N(0, 0.1)            (goal 30 s)

Each design is one CSV analysed by `vrs analyze FILE --response score --item item --system model [--replication
run] --out DIR` (reading, validation, every reading, the report): wall time and peak RSS (``/usr/bin/time``) of the
whole command. The peer is `evalstats analyze FILE --format long` (PyPI evalstats 0.3.3: per-model CIs,
simultaneous pairwise CIs, rank bands) on the same rows (columns model, input, run, score), its time and its
failure (exit code and the last line of its error) recorded as they are. Both run one after the other under the
same load; the machine's load average (1 min) before and after each command is written beside it: the machine is
shared, so the times are upper bounds of a quiet machine's.

``--fwer-logs N``: the family-wise error of the decisions that `vrs analyze` ranks with (the logistic GLMM's
Tukey-adjusted z contrasts, :func:`vrs_helpers.book.glrt.compare_systems`) for k = 100 systems of equal ability on
500 items (N logs, seeds 1..N): the share of logs in which any of the 4,950 pairs is declared different at alpha =
0.05, with its 95 % Clopper-Pearson interval.

Writes the table (Markdown) to ``--out`` (default benchmarks/results/leaderboard.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
DESIGNS = {"lb100": (100, 1, 10_000, True, 30.0), "lb100x3": (100, 3, 3_000, True, 60.0),
           "cont50": (50, 3, 1_000, False, 30.0)}
TIMEOUT = 900  # seconds per command (--timeout)


def simulate(models: int, runs: int, items: int, binary: bool, seed: int = 1, spread: float = 0.5,
             run_sd: float | None = None) -> pd.DataFrame:
    """One row per model, run and item: columns model, run, item, score (module docstring). ``spread``: the SD of
    the models' abilities; ``run_sd``: the SD of the run effect (default 0.05 for 0/1, 0.02 for continuous scores;
    with one run it is a per-model effect, so the global null has ``spread`` = ``run_sd`` = 0)."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(0, spread, models)
    difficulty = rng.normal(0, 1.0, items)
    run_sd = (0.05 if binary else 0.02) if run_sd is None else run_sd
    eta = ability[:, None, None] - difficulty[None, None, :] + rng.normal(0, run_sd, (models, runs, 1))
    if binary:
        score = (rng.random(eta.shape) < 1 / (1 + np.exp(-eta))).astype(np.int8)
    else:
        score = np.round(eta / 10 + rng.normal(0, 0.1, eta.shape), 6)
    m, r, j = np.meshgrid(np.arange(models), np.arange(runs), np.arange(items), indexing="ij")
    return pd.DataFrame({"model": np.char.add("m", np.char.zfill(m.ravel().astype(str), 3)),
                         "run": r.ravel(), "item": j.ravel(), "score": score.ravel()})


def timed(cmd: list[str], timeout: float | None = None) -> dict:
    """Wall time, peak RSS (MB, /usr/bin/time), exit code, the error's last line, the load before and after."""
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    timer = ["/usr/bin/time", "-f", "MAXRSS %M %U %S"] if Path("/usr/bin/time").exists() else []
    # its own process group: a command stopped at the timeout takes its children with it (SIGTERM, then SIGKILL)
    proc = subprocess.Popen(timer + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout or TIMEOUT)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=10)
                break
        code, err = "timeout", ""
    wall = time.perf_counter() - t0
    rss = [ln for ln in err.splitlines() if ln.startswith("MAXRSS ")]
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("MAXRSS", "Command exited"))]
    cpu = round(float(rss[-1].split()[2]) + float(rss[-1].split()[3]), 1) if rss else None
    return {"s": round(wall, 1), "cpu_s": cpu, "rss_mb": round(int(rss[-1].split()[1]) / 1024) if rss else None,
            "code": code,
            "error": (lines[-1][:160] if lines and code != 0 else ""), "load": f"{load0:.1f}/{os.getloadavg()[0]:.1f}"}


def fwer(logs: int, k: int = 100, items: int = 500, alpha: float = 0.05) -> dict:
    """The family-wise error of the k-system decisions under the global null (module docstring)."""
    sys.path.insert(0, str(ROOT))
    import warnings

    from scipy import stats

    from vrs_helpers.book.glrt import compare_systems

    hits, t0 = 0, time.perf_counter()
    for seed in range(1, logs + 1):
        df = simulate(k, 1, items, True, seed=seed, spread=0.0, run_sd=0.0).drop(columns="run")
        df["model"] = df["model"].astype("category")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            comp = compare_systems(df, "score", "model", "item", family="binomial")
        p = comp.contrasts["p_value"].to_numpy(float)
        hits += bool(np.nanmin(p) < alpha)
    lo = stats.beta.ppf(0.025, hits, logs - hits + 1) if hits else 0.0
    hi = stats.beta.ppf(0.975, hits + 1, logs - hits) if hits < logs else 1.0
    return {"logs": logs, "rejections": hits, "fwer": hits / logs, "ci": (lo, hi),
            "s": round(time.perf_counter() - t0, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--designs", nargs="*", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--evalstats", default=shutil.which("evalstats") or str(Path(sys.executable).parent /
                                                                               "evalstats"))
    ap.add_argument("--fwer-logs", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds per command before it is stopped")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "leaderboard.md"))
    args = ap.parse_args(argv)
    vrs = str(Path(sys.executable).parent / "vrs")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in args.designs:
            k, r, n, binary, goal = DESIGNS[name]
            df = simulate(k, r, n, binary)
            if r == 1:
                df = df.drop(columns="run")
            path = tmp / f"{name}.csv"
            df.to_csv(path, index=False)
            ours = timed([vrs, "analyze", str(path), "--response", "score", "--item", "item", "--system", "model",
                          *(["--replication", "run"] if r > 1 else []), "--out", str(tmp / f"out-{name}")],
                         args.timeout)
            row = {"design": name, "rows": len(df), "goal s": goal, "vrs s": ours["s"], "vrs CPU s": ours["cpu_s"],
                   "vrs MB": ours["rss_mb"],
                   "vrs exit": ours["code"], "vrs load": ours["load"], "met": "yes" if ours["code"] == 0 and
                   ours["s"] <= goal else "no"}
            if Path(args.evalstats).exists():
                peer_path = tmp / f"{name}-peer.csv"
                df.rename(columns={"item": "input"}).to_csv(peer_path, index=False)
                peer = timed([args.evalstats, "analyze", str(peer_path), "--format", "long"], args.timeout)
                row.update({"evalstats s": peer["s"], "evalstats CPU s": peer["cpu_s"], "evalstats MB": peer["rss_mb"],
                            "evalstats exit": peer["code"],
                            "evalstats error": peer["error"], "evalstats load": peer["load"]})
            rows.append(row)
            print(row, flush=True)
    lines = ["# Leaderboard scale (issue 54)", "",
             f"`python benchmarks/leaderboard.py {' '.join(argv if argv is not None else sys.argv[1:])}` on "
             f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. The machine is shared "
             "with other engineers' jobs: the load average (1 min) before/after each command is in the 'load' "
             "columns, and the wall times are those under that load, not a quiet machine's; 'CPU s' (user + system "
             "time of the command, /usr/bin/time) is closer to what a quiet machine's wall time would be for the "
             "single-threaded parts.", ""]
    if rows:
        lines.append(pd.DataFrame(rows).to_markdown(index=False))
    if args.fwer_logs:
        f = fwer(args.fwer_logs)
        print(f, flush=True)
        lines += ["", f"Family-wise error, k = 100 systems of equal ability, 500 items, one run, alpha = 0.05 "
                  f"(logistic GLMM, Tukey-adjusted z contrasts): {f['rejections']} of {f['logs']} logs with any "
                  f"pair declared different = {f['fwer']:.3f} (95 % CI {f['ci'][0]:.3f} to {f['ci'][1]:.3f}); "
                  f"{f['s']} s."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
