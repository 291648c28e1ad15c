"""Benchmark: a crossed mixed model on 10^8 evaluation-log rows, on a Dask LocalCluster and by local streaming.

    python benchmarks/scale.py [--rows 100000000] [--items 10000] [--seeds 20] [--dir DIR] [--keep]

Writes a Parquet dataset of ``rows`` = items x configurations x seeds rows (one file per 5 configurations, row
groups of 250,000 rows; columns: system (4 levels, dictionary), config, seed, item (int32), score (float32)); a
configuration belongs to one system, so every file brings new configuration levels. Fits

    score ~ system + (1|item) + (1|config)      (ML)

(a) on a ``LocalCluster`` of 2 worker processes with 1 GB memory limit each (``mixed.fit(formula,
dd.read_parquet(DIR))``) and (b) by local streaming in one process (``mixed.fit(formula, pyarrow.dataset)``).
Prints one table: wall time (cluster start excluded), rows/s, peak RSS per worker (sampled every 0.25 s) or of the
process, logLik of both (they must agree to 1e-9 relative), and the size of the merged statistics. The dataset is
removed afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FORMULA = "score ~ system + (1|item) + (1|config)"
CONFIGS_PER_FILE = 5


def write_dataset(folder: Path, items: int, configs: int, seeds: int, seed: int = 0) -> int:
    """The Parquet files; returns their total size in bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    item_eff = rng.normal(0, 1.0, items).astype(np.float32)
    cfg_eff = rng.normal(0, 0.5, configs).astype(np.float32)
    systems = np.array(["A", "B", "C", "D"])
    folder.mkdir(parents=True, exist_ok=True)
    for f, c0 in enumerate(range(0, configs, CONFIGS_PER_FILE)):
        cs = np.arange(c0, min(c0 + CONFIGS_PER_FILE, configs), dtype=np.int32)
        n = len(cs) * seeds * items
        config = np.repeat(cs, seeds * items)
        seed_col = np.tile(np.repeat(np.arange(seeds, dtype=np.int32), items), len(cs))
        item = np.tile(np.arange(items, dtype=np.int32), len(cs) * seeds)
        sys_code = (config % 4).astype(np.int8)
        score = (item_eff[item] + cfg_eff[config] + 0.1 * sys_code
                 + rng.standard_normal(n, dtype=np.float32)).astype(np.float32)
        table = pa.table({"system": pa.DictionaryArray.from_arrays(pa.array(sys_code), pa.array(systems)),
                          "config": config, "seed": seed_col, "item": item, "score": score})
        pq.write_table(table, folder / f"part-{f:04d}.parquet", row_group_size=250_000)
    return sum(p.stat().st_size for p in folder.glob("*.parquet"))


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def run_dask(folder: Path, workers: int, memory: str) -> dict:
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from vrs_helpers import mixed

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory,
                           dashboard_address=None)
    client = Client(cluster)
    peaks: dict = {}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            try:
                for addr, v in client.run(_rss).items():
                    peaks[addr] = max(peaks.get(addr, 0), v)
            except Exception:  # noqa: BLE001 - a worker restarting between samples
                pass
            stop.wait(0.25)

    thread = threading.Thread(target=sample, daemon=True)
    try:
        ddf = dd.read_parquet(str(folder))
        thread.start()
        t0 = time.perf_counter()
        stats = mixed.accumulate(FORMULA, ddf)
        t_acc = time.perf_counter() - t0
        m = mixed.fit_stats(stats, method="ML")
        wall = time.perf_counter() - t0
    finally:
        stop.set()
        thread.join(5)
        client.close()
        cluster.close()
    size = sum(a.nbytes for a in [stats.XtX, *stats.ZtX, *stats.Zty, *stats.ZtZ_diag]) + sum(
        b.data.nbytes + b.indices.nbytes + b.indptr.nbytes for b in stats.ZtZ_cross.values())
    return {"path": f"Dask LocalCluster ({workers} workers, {memory} each)", "rows": stats.n, "wall_s": wall,
            "accumulate_s": t_acc, "peak_mb": [round(v / 2**20) for v in peaks.values()], "loglik": m.loglik,
            "levels": dict(zip(stats.groups, stats.sizes, strict=True)),
            "cross_nonzeros": int(sum(b.nnz for b in stats.ZtZ_cross.values())), "stats_mb": size / 2**20}


def run_local(folder: Path) -> dict:
    import pyarrow.dataset as pads

    from vrs_helpers import mixed

    t0 = time.perf_counter()
    stats = mixed.accumulate(FORMULA, pads.dataset(str(folder), format="parquet"))
    t_acc = time.perf_counter() - t0
    m = mixed.fit_stats(stats, method="ML")
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    return {"path": "local streaming (1 process)", "rows": stats.n, "wall_s": wall, "accumulate_s": t_acc,
            "peak_mb": [round(peak)], "loglik": m.loglik}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e8)
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory", default="1GB")
    ap.add_argument("--dir", default=None, help="where to write the dataset (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the dataset")
    ap.add_argument("--local-only", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.local_only:  # child process: the local path with its own peak memory
        print(json.dumps(run_local(Path(args.local_only))))
        return 0
    configs = max(2, int(round(args.rows / (args.items * args.seeds))))
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="vrs-scale-", dir=str(ROOT / "build")
                                                                 if (ROOT / "build").is_dir() else None))
    folder = base / "logs"
    try:
        t0 = time.perf_counter()
        nbytes = write_dataset(folder, args.items, configs, args.seeds)
        n = args.items * configs * args.seeds
        print(f"wrote {n:,} rows ({configs} configurations x {args.seeds} seeds x {args.items} items) in "
              f"{len(list(folder.glob('*.parquet')))} files, {nbytes / 2**30:.2f} GB, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        dist = run_dask(folder, args.workers, args.memory)
        print(json.dumps(dist), flush=True)
        out = subprocess.run([sys.executable, __file__, "--local-only", str(folder)], capture_output=True,
                             text=True, check=True)
        local = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps(local), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(base if not args.dir else folder, ignore_errors=True)
    rel = abs(dist["loglik"] - local["loglik"]) / abs(local["loglik"])
    table = pd.DataFrame([{"path": r["path"], "rows": f"{r['rows']:,}", "wall time (s)": round(r["wall_s"], 1),
                           "of which accumulation (s)": round(r["accumulate_s"], 1),
                           "rows/s": f"{r['rows'] / r['wall_s']:,.0f}",
                           "peak memory per worker (MB)": ", ".join(map(str, r["peak_mb"])),
                           "logLik": f"{r['loglik']:.6f}"} for r in (dist, local)])
    print()
    print(table.to_markdown(index=False, disable_numparse=True) if _has_tabulate() else table.to_string(index=False))
    print(f"\nlogLik relative difference: {rel:.2e}; levels {dist['levels']}; Z'Z cross block "
          f"{dist['cross_nonzeros']:,} nonzeros; merged statistics {dist['stats_mb']:.0f} MB")
    return 0 if rel < 1e-9 else 1


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401

        return True
    except ImportError:
        return False


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
