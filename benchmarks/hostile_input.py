"""Measure how `vrs analyze` meets hostile input (issue 50): each case as a user runs it (a new process, a private
TMPDIR, a previous report in --out), with its exit code, wall time, largest resident set (``/usr/bin/time -v``; the
kernel's ``wait4`` where a signal is sent), the message, whether the previous report is byte-identical and the
TMPDIR empty, and - for the cases that take a moment - how long after SIGTERM the process was gone.

    python benchmarks/hostile_input.py [--only NAME ...] [--keep DIR]

The bombs are made of gzip members written many times (a gzip file may be a sequence of members), so that 4.4 GB of
rows take seconds to write, not minutes. Goals: exit 2 (or 0 with a named warning) and one line saying what to do,
no traceback, at most 1 GB resident for the bombs and the 50,000-system table, SIGTERM acted on within 2 s.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ["--response", "score", "--system", "system", "--item", "item", "--replication", "seed"]
GB = 1 << 30


def _rows(n_items: int = 20, systems: str = "AB", seeds: int = 3) -> bytes:
    import numpy as np

    rng = np.random.default_rng(0)
    lines = ["system,seed,item,score"] + [f"{s},{r},i{i},{rng.normal() + 0.3 * (s == 'B'):.6f}"
                                          for s in systems for r in range(seeds) for i in range(n_items)]
    return ("\n".join(lines) + "\n").encode()


def _members(path: Path, head: bytes, body: bytes, times: int, tail: bytes = b"") -> None:
    """A gzip file: ``head``, then ``body`` ``times`` times, then ``tail``, as concatenated members."""
    packed = gzip.compress(body, compresslevel=9)
    with open(path, "wb") as out:
        out.write(gzip.compress(head))
        for _ in range(times):
            out.write(packed)
        if tail:
            out.write(gzip.compress(tail))


def _bomb_csv_gz(folder: Path) -> list:
    body = b"".join(b"A,%d,i%d,0.5\nB,%d,i%d,0.7\n" % (r, i, r, i) for r in range(3) for i in range(600))
    times = int(4.4e9 // len(body))
    _members(folder / "scores.csv.gz", b"system,seed,item,score\n", body, times)
    return [str(folder / "scores.csv.gz"), *TABLE]


def _bomb_zip(folder: Path) -> list:
    chunk = b"".join(b"A,%d,i%d,0.5\nB,%d,i%d,0.7\n" % (r, i, r, i) for r in range(3) for i in range(600)) * 60
    with zipfile.ZipFile(folder / "scores.csv.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open("scores.csv", "w", force_zip64=True) as member:
            member.write(b"system,seed,item,score\n")
            for _ in range(int(4.4e9 // len(chunk))):
                member.write(chunk)
    return [str(folder / "scores.csv.zip"), *TABLE]


def _lm_eval(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT))
    from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_lm_eval

    logs = folder / "logs"
    write_lm_eval(simulate_binary(seed=3, tasks=("arith", "logic"), items=20, runs=3), logs)
    return logs


def _bomb_samples_line(folder: Path) -> list:
    logs = _lm_eval(folder)
    samples = sorted(logs.glob("*/model-a/samples_arith_*.jsonl"))[0]
    _members(samples.with_name(samples.name + ".gz"), samples.read_bytes() + b'{"doc_id": 99, "doc": "',
             b"x" * (64 << 20), 64, b'"}\n')   # one line of 4 GiB
    samples.unlink()
    return [str(logs)]


def _bomb_nul(folder: Path) -> list:
    _members(folder / "scores.csv.gz", b"", b"\0" * (64 << 20), 64)   # 4 GiB of NUL bytes
    return [str(folder / "scores.csv.gz"), *TABLE]


def _many(n: int):
    def make(folder: Path) -> list:
        lines = ["id,item,score"] + [f"row{s},i{i},{(s * 7 + i) % 100 / 100}" for s in range(n) for i in range(2)]
        (folder / "many.csv").write_text("\n".join(lines) + "\n")
        return [str(folder / "many.csv"), "--response", "score", "--system", "id", "--item", "item"]
    return make


def _symlinked_lock(folder: Path) -> list:
    (folder / "scores.csv").write_bytes(_rows())
    (folder / "victim.txt").write_text("precious\n")
    (folder / "report" / ".vrs-lock").symlink_to(folder / "victim.txt")
    return [str(folder / "scores.csv"), *TABLE]


def _folder_lock(folder: Path) -> list:
    (folder / "scores.csv").write_bytes(_rows())
    (folder / "report" / ".vrs-lock").mkdir()
    return [str(folder / "scores.csv"), *TABLE]


def _unreadable_logs(folder: Path) -> list:
    """lm-eval logs of 2 models x 2 tasks x 3 runs whose run folder seed3 is a dangling link (4 of 12 samples files
    unreachable), with a named pipe, a link to /dev/zero and a chain of 50 links named as samples files, and links
    to / and /proc inside."""
    logs = _lm_eval(folder)
    moved = folder / "moved"
    moved.mkdir()
    os.replace(logs / "seed3", moved / "seed3")
    (logs / "seed3").symlink_to("/mnt/not-mounted/seed3")
    os.mkfifo(logs / "seed1" / "model-a" / "samples_extra_2099-01-01T00-00-00.000000.jsonl")
    (logs / "seed1" / "model-b" / "samples_extra_2099-01-02T00-00-00.000000.jsonl").symlink_to("/dev/zero")
    (folder / "chain0").write_text("{}\n")
    for i in range(1, 51):
        (folder / f"chain{i}").symlink_to(folder / f"chain{i - 1}")
    (logs / "seed2" / "model-a" / "samples_extra_2099-01-03T00-00-00.000000.jsonl").symlink_to(folder / "chain50")
    (logs / "root").symlink_to("/")
    (logs / "proc").symlink_to("/proc")
    return [str(logs), "--test", "chisq"]


def _corrupt(suffix: str):
    def make(folder: Path) -> list:
        import bz2
        import lzma

        data = bytearray({".xz": lzma.compress, ".gz": gzip.compress, ".bz2": bz2.compress}[suffix](_rows(200)))
        data[len(data) // 2:len(data) // 2 + 16] = b"\xa5" * 16
        (folder / f"scores.csv{suffix}").write_bytes(bytes(data))
        return [str(folder / f"scores.csv{suffix}"), *TABLE]
    return make


def _deep_json(folder: Path) -> list:
    (folder / "scores.jsonl").write_text('{"system": "A", "seed": 0, "item": "i0", "score": ' + "[" * 100_000
                                         + "]" * 100_000 + "}\n")
    return [str(folder / "scores.jsonl"), *TABLE]


def _heavy(folder: Path) -> list:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(2)
    k, m, r = 150, 20, 3
    pd.DataFrame({"system": np.repeat([f"s{i}" for i in range(k)], m * r), "seed": np.tile(np.repeat(range(r), m), k),
                  "item": np.tile([f"i{i}" for i in range(m)], k * r), "score": rng.normal(size=k * m * r)}).to_csv(
        folder / "scores.csv", index=False)
    return [str(folder / "scores.csv"), *TABLE]


# name, maker, seconds after the start to send SIGTERM in a second run (None: no such run)
CASES = [
    ("symlinked lock (.vrs-lock -> a victim file)", _symlinked_lock, None),
    ("lock that is a folder", _folder_lock, None),
    ("50,000 systems x 2 items (id column as --system)", _many(50_000), 1.0),
    ("5,000 systems x 2 items", _many(5_000), 1.0),
    (".csv.gz holding 4.4 GB of rows", _bomb_csv_gz, 1.0),
    (".zip holding 4.4 GB of rows", _bomb_zip, None),
    ("lm-eval samples_*.jsonl.gz with a 4 GiB line", _bomb_samples_line, 1.5),
    (".csv.gz of 4 GiB of NUL bytes", _bomb_nul, None),
    ("lm-eval logs: dangling link, FIFO, /dev/zero, links to / and /proc", _unreadable_logs, None),
    ("corrupt .csv.xz", _corrupt(".xz"), None),
    ("corrupt .csv.gz", _corrupt(".gz"), None),
    ("corrupt .csv.bz2", _corrupt(".bz2"), None),
    ("JSON line nested 100,000 levels", _deep_json, None),
    ("150 systems x 20 items x 3 runs (plausible; SIGTERM mid-analysis)", _heavy, 8.0),
]


def _previous(out: Path) -> dict:
    out.mkdir(exist_ok=True)
    (out / "summary.json").write_text('{"previous": true}')
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and not p.is_symlink()}


def _run(folder: Path, argv: list, env: dict) -> dict:
    timer = ["/usr/bin/time", "-v"] if Path("/usr/bin/time").exists() else []
    started = time.perf_counter()
    proc = subprocess.run([*timer, sys.executable, "-m", "vrs_helpers.app.cli", "analyze", *argv], capture_output=True,
                          text=True, env=env, cwd=folder)
    seconds = time.perf_counter() - started
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    err = re.split(r"\n\s*Command being timed:", proc.stderr)[0] if timer else proc.stderr
    return {"exit": proc.returncode, "seconds": round(seconds, 2), "max_rss_mb": round(int(rss.group(1)) / 1024)
            if rss else None, "traceback": "Traceback" in err, "stderr": err, "stdout": proc.stdout}


def _signal(folder: Path, argv: list, env: dict, after: float) -> dict:
    proc = subprocess.Popen([sys.executable, "-m", "vrs_helpers.app.cli", "analyze", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=folder)
    time.sleep(after)
    if proc.poll() is not None:
        proc.communicate()
        return {"sigterm": "ended before the signal"}
    sent = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    _, status, usage = os.wait4(proc.pid, 0)
    gone = time.perf_counter() - sent
    err = proc.stderr.read().decode("utf-8", "replace")
    code = os.waitstatus_to_exitcode(status)
    return {"sigterm_seconds": round(gone, 2), "sigterm_exit": 128 - code if code < 0 else code,
            "sigterm_rss_mb": round(usage.ru_maxrss / 1024), "sigterm_said": err.strip().splitlines()[-1:]}


def markdown(rows: list) -> str:
    """The measurements as a Markdown table (benchmarks/results/hostile_input.md)."""
    out = ["| case | exit | seconds | max RSS (MB) | SIGTERM: gone after (s), exit | previous report unchanged, "
           "TMPDIR empty | message (start) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        stop = (f"{r['sigterm_seconds']:.2f}, {r['sigterm_exit']}" if "sigterm_seconds" in r else "-")
        kept = "new report (exit 0)" if r.get("exit") == 0 else "yes" if r.get("previous_report_unchanged") else "NO"
        empty = all(r.get(k, True) for k in ("tmpdir_empty", "tmpdir_empty_after_sigterm"))
        message = re.sub(r"/tmp/\S+?/case\d+/", "", r.get("message") or "")[:110].replace("|", "/")
        out.append(f"| {r['case']} | {r.get('exit', '-')} | {r.get('seconds', '-')} | "
                   f"{r.get('max_rss_mb') or r.get('sigterm_rss_mb')} | {stop} | {kept}, {'yes' if empty else 'NO'} | "
                   f"{message} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="run the cases whose name contains one of these words")
    ap.add_argument("--keep", default=None, help="make the inputs in this folder (kept) instead of a temporary one")
    args = ap.parse_args(argv)
    env0 = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    base = Path(args.keep or tempfile.mkdtemp(prefix="vrs-hostile-"))
    rows = []
    try:
        for i, (name, maker, after) in enumerate(CASES):
            if args.only and not any(w.lower() in name.lower() for w in args.only):
                continue
            folder = base / f"case{i}"
            shutil.rmtree(folder, ignore_errors=True)
            (folder / "report").mkdir(parents=True)
            tmp = folder / "tmp"
            tmp.mkdir()
            before = _previous(folder / "report")
            made = time.perf_counter()
            case_argv = maker(folder) + ["--out", str(folder / "report")]
            made = time.perf_counter() - made
            env = {**env0, "TMPDIR": str(tmp)}
            if maker is _heavy:   # a plausible analysis of minutes: only stopped, not run to its end
                rows.append({"case": name, "input_seconds": round(made, 1), **_signal(folder, case_argv, env, after)})
                deadline = time.monotonic() + 5
                while list(tmp.iterdir()) and time.monotonic() < deadline:
                    time.sleep(0.1)
                rows[-1]["tmpdir_empty_after_sigterm"] = not list(tmp.iterdir())
                rows[-1]["previous_report_unchanged"] = (folder / "report" / "summary.json").read_bytes() == \
                    before["summary.json"]
                print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
                continue
            row = {"case": name, "input_seconds": round(made, 1), **_run(folder, case_argv, env)}
            after_report = {p.name: p.read_bytes() for p in (folder / "report").iterdir()
                            if p.is_file() and not p.is_symlink()}
            row["previous_report_unchanged"] = all(after_report.get(k) == v for k, v in before.items())
            if row["exit"] == 0:   # a new report replaced it, by design: its summary.json must carry the warnings
                notes = json.loads(after_report["summary.json"]).get("notes", [])
                row["summary_json_warnings"] = sum(str(n).startswith("WARNING:") for n in notes)
            row["tmpdir_empty"] = not list(tmp.iterdir())
            if (folder / "victim.txt").exists():
                row["victim_unchanged"] = (folder / "victim.txt").read_text() == "precious\n"
            lines = [ln for ln in row.pop("stderr").splitlines() if ln.strip()]
            out_lines = row.pop("stdout").splitlines()
            row["message"] = next((ln for ln in lines if ln.startswith("error: ")), None) or \
                "; ".join(ln for ln in out_lines if ln.startswith("WARNING:"))[:600]
            if after is not None:
                shutil.rmtree(tmp)
                tmp.mkdir()
                row.update(_signal(folder, case_argv, env, after))
                deadline = time.monotonic() + 5
                while list(tmp.iterdir()) and time.monotonic() < deadline:
                    time.sleep(0.1)
                row["tmpdir_empty_after_sigterm"] = not list(tmp.iterdir())
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    bad = [r["case"] for r in rows if r.get("traceback") or (r.get("exit", 2) not in (0, 2))
           or (r.get("max_rss_mb") or 0) > 1024 or r.get("sigterm_seconds", 0) > 2.0
           or (not r["previous_report_unchanged"] and r.get("exit") != 0) or r.get("summary_json_warnings") == 0
           or not r.get("tmpdir_empty", True)
           or r.get("tmpdir_empty_after_sigterm") is False or r.get("victim_unchanged") is False]
    print("\n" + markdown(rows))
    print(f"\n{len(rows)} cases; goals (exit 2 or 0 with a warning, no traceback, <= 1 GB, SIGTERM <= 2 s, previous "
          f"report unchanged, TMPDIR empty):", "met" if not bad else f"NOT met by {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
