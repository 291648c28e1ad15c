"""Issue 50 (2, 9): sizes that exhaust the machine, and stopping. 50,000 systems x 2 items (an id column passed as
--system) held 15.6 GB after 5 minutes and ignored SIGTERM; now the number of systems is checked before any model or
pair is built (exit 2 in seconds, under 1 GB). A stop signal ends a run within two seconds at any stage, also one
busy in a long call into C (the stop watchdog, app/stopping.py). Reports made one after another in one process hold
no more file descriptors than before the first."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vrs_helpers.evaluate import precheck
from vrs_helpers.evaluate.tables.scores import InputError, validate

# run a command and print the largest resident set (KB) of its processes: the kernel's getrusage of the children
MEASURE = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code, file=sys.stderr)")


def _many(path: Path, systems: int = 50_000, items: int = 2) -> Path:
    rng = np.random.default_rng(0)
    pd.DataFrame({"id": np.repeat([f"row{i}" for i in range(systems)], items),
                  "item": np.tile([f"i{i}" for i in range(items)], systems),
                  "score": rng.random(systems * items).round(4)}).to_csv(path, index=False)
    return path


def test_an_id_column_as_system_is_refused_before_any_model(tmp_path):
    """50,000 'systems' of 2 rows: validation (which builds no model, no pair) says what is wrong, in seconds."""
    table = pd.read_csv(_many(tmp_path / "many.csv"))
    started = time.perf_counter()
    with pytest.raises(InputError, match=r"'id' has 50,000 different labels for 100,000 rows \(2\.0 rows per "
                                         r"system\): is --system the right column\?"):
        validate(table, response="score", system="id", item="item")
    assert time.perf_counter() - started < 10


def test_few_systems_with_few_rows_are_still_analysed():
    """The check is about implausible designs only: 3 systems x 2 items is a small analysis, not an error."""
    d = pd.DataFrame({"system": list("AABBCC"), "item": ["i0", "i1"] * 3, "score": [0.1, 0.5, 0.3, 0.2, 0.9, 0.4]})
    _, info = validate(d, response="score", system="system", item="item")
    assert info.n_systems == 3


def test_the_bound_on_systems_is_configurable(monkeypatch):
    rng = np.random.default_rng(1)
    d = pd.DataFrame([{"system": f"s{k}", "item": f"i{i}", "score": rng.random()} for k in range(40) for i in range(5)])
    validate(d, response="score", system="system", item="item")   # 40 <= 500
    monkeypatch.setenv(precheck.ENV_MAX_SYSTEMS, "30")
    with pytest.raises(InputError, match=r"40 systems: the analysis compares every pair of them \(780 pairs\).*"
                                         r"--max-systems N \(or VRS_MAX_SYSTEMS=N\)"):
        validate(d, response="score", system="system", item="item")
    monkeypatch.setenv(precheck.ENV_MAX_SYSTEMS, "many")
    with pytest.raises(InputError, match="must be a whole number"):
        validate(d, response="score", system="system", item="item")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KB (Linux)")
def test_50000_systems_exit_2_fast_and_small(tmp_path):
    """As a user runs it: exit 2, one line saying what to do, no traceback, under 1 GB in every process, in well
    under a minute (before issue 50: 15.6 GB and no answer after 5 minutes), nothing left in TMPDIR, the previous
    report unchanged."""
    data = _many(tmp_path / "many.csv")
    out, tmp = tmp_path / "report", tmp_path / "tmp"
    out.mkdir()
    tmp.mkdir()
    (out / "summary.json").write_text('{"previous": true}')
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-m", "vrs_helpers.app.cli", "analyze",
                           str(data), "--response", "score", "--system", "id", "--item", "item", "--out", str(out)],
                          capture_output=True, text=True, env={**os.environ, "TMPDIR": str(tmp)}, timeout=300)
    seconds = time.perf_counter() - started
    lines = proc.stderr.strip().splitlines()
    rss_kb, code = map(int, lines[-1].split())
    assert code == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[-2].startswith("error: ") and "is --system the right column?" in lines[-2]
    assert rss_kb < 1024 * 1024 and seconds < 60, (rss_kb, seconds)
    assert not list(tmp.iterdir()) and [p.name for p in out.iterdir()] == ["summary.json"]


# ------------------------------------------------------------------------------------------- stopping

BUSY = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from vrs_helpers.app.stopping import Watchdog, handle_termination, on_forced_exit
    mark = Path(sys.argv[1])
    handle_termination()
    guard = Watchdog(lambda signum: f"terminated ({signum}); cleaned up.") if sys.argv[2] == "watchdog" else None
    if guard is not None:
        guard.__enter__()
    mark.write_text("busy")
    info = mark.stat()
    with on_forced_exit(("unlink", str(mark), info.st_dev, info.st_ino)):
        (mark.parent / "ready").write_text("")
        sum(range(10 ** 12))   # one call into C that holds the interpreter's lock for hours: no handler, no thread
""")


@pytest.mark.parametrize("watchdog", [True, False], ids=["with the watchdog", "control: without"])
def test_a_stop_signal_ends_a_run_stuck_in_c_within_two_seconds(tmp_path, watchdog):
    """A process inside one long C call: SIGTERM's Python handler would run only when the call returns (hours
    here). The watchdog ends it within 2 s, runs its clean-ups and prints the message; without it (the control)
    the process is still running 3 s later."""
    mark = tmp_path / "busy"
    proc = subprocess.Popen([sys.executable, "-c", BUSY, str(mark), "watchdog" if watchdog else "none"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=3)
        except subprocess.TimeoutExpired:
            assert not watchdog, "the watchdog did not end the process"
            return
        seconds = time.monotonic() - sent
        assert watchdog, "the control ended without the watchdog: the test cannot tell"
        # ended by SIGTERM itself (its handler was one-shot): the shell's exit status 143, as on the ordinary path
        assert proc.returncode == -signal.SIGTERM and seconds < 2.0, (proc.returncode, seconds)
        assert err.strip() == "terminated (15); cleaned up." and not mark.exists()   # its clean-up done
    finally:
        proc.kill()
        proc.wait()


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("when, delay", [("starting", 0.3), ("starting", 1.0), ("starting", 1.5), ("analysing", 1.0),
                                         ("writing", 0.0)])
def test_sigterm_during_a_heavy_analysis_ends_it_within_two_seconds(tmp_path, when, delay):
    """150 systems x 20 items x 3 runs: SIGTERM while pandas and the analysis are imported and the table is read
    ("starting": that long after the start; a KeyboardInterrupt inside an extension module's import came out as an
    ImportError traceback), while the analysis runs ("analysing": that long after its progress bar appears on a
    terminal - stderr is a pseudo-terminal here - its steps in C and in a worker thread) or while the report is
    written ("writing": its private work folder exists) ends the run within 2 s: exit status 143, one line, the
    previous report byte-identical, nothing left in the private TMPDIR."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    rng = np.random.default_rng(2)
    k, m, r = 150, 20, 3
    pd.DataFrame({"system": np.repeat([f"s{i}" for i in range(k)], m * r), "seed": np.tile(np.repeat(range(r), m), k),
                  "item": np.tile([f"i{i}" for i in range(m)], k * r), "score": rng.normal(size=k * m * r)}).to_csv(
        tmp_path / "scores.csv", index=False)
    out, tmp = tmp_path / "report", tmp_path / "tmp"
    out.mkdir()
    tmp.mkdir()
    (out / "summary.json").write_text('{"previous": true}')
    (out / "report.html").write_text("<p>previous</p>")
    before = _snapshot(out)
    master, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))   # a bar needs columns
    proc = subprocess.Popen([sys.executable, "-m", "vrs_helpers.app.cli", "analyze", str(tmp_path / "scores.csv"),
                             "--response", "score", "--system", "system", "--item", "item", "--replication", "seed",
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=terminal, text=True,
                            env={**os.environ, "TMPDIR": str(tmp)})
    os.close(terminal)
    seen = b""

    def drain(wait: float) -> None:
        nonlocal seen
        while select.select([master], [], [], wait)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:   # the terminal's other end closed
                return
            if not chunk:
                return
            seen += chunk
            wait = 0.0

    try:
        deadline = time.monotonic() + 120
        start = time.monotonic()
        while proc.poll() is None and time.monotonic() < deadline:
            drain(0.02)
            if (when == "starting" and time.monotonic() - start >= delay
                    or when == "analysing" and b"analysis:" in seen
                    or when == "writing" and list(tmp.glob("vrs-analyze-*"))):
                break
        assert proc.poll() is None, proc.communicate()
        if when != "starting":
            time.sleep(delay)
        assert proc.poll() is None, "the run ended before the signal"
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        seconds = time.monotonic() - sent
        drain(0.5)
        err = seen.decode("utf-8", "replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in (143, -signal.SIGTERM) and seconds < 2.5, (proc.returncode, seconds, err)
    assert "Traceback" not in err and err.strip().splitlines()[-1] == (
        f"terminated; the previous report in {out} (if any) is unchanged.")
    assert _snapshot(out) == before
    deadline = time.monotonic() + 5   # a killed kernel's files are gone at once; its process a moment later
    while list(tmp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not list(tmp.iterdir()), list(tmp.iterdir())


# ------------------------------------------------------------------------------------------- file descriptors

def _descriptors() -> int:
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd (Linux)")
def test_reports_in_one_process_hold_no_more_descriptors_than_before(tmp_path, capsys):
    """Issue 50 (9): three `vrs analyze` runs in one Python process (a score table, evaluation logs, a table again)
    held 6 -> 9 -> ... file descriptors: each run's Jupyter client left its event loop open (an epoll and a socket
    pair), kept by the thread that ran the notebook. After gc.collect() the count is the one before the first run;
    so is the number of threads but for tqdm's monitor (one per process, started by the first bar)."""
    from vrs_helpers.app import cli
    from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_lm_eval

    rng = np.random.default_rng(3)
    pd.DataFrame([{"system": s, "seed": r, "item": f"i{i}", "score": rng.normal()} for s in "AB" for r in range(3)
                  for i in range(20)]).to_csv(tmp_path / "scores.csv", index=False)
    write_lm_eval(simulate_binary(seed=3, tasks=("arith",), items=20, runs=2), tmp_path / "logs")
    table = [str(tmp_path / "scores.csv"), "--response", "score", "--system", "system", "--item", "item",
             "--replication", "seed", "--n-resamples", "99", "--out", str(tmp_path / "t")]
    logs = [str(tmp_path / "logs"), "--test", "chisq", "--out", str(tmp_path / "l")]
    start = _descriptors()
    counts = []
    for argv in (table, logs, table, logs):
        assert cli.main(["analyze", *argv]) == 0, capsys.readouterr().err
        counts.append(_descriptors())
    assert counts == [start] * 4, (start, counts)
    assert json.loads((tmp_path / "l" / "summary.json").read_text())["kind"] == "logs"
