"""Issue 37: a run that fails, is stopped or killed, or finds its disk full destroys nothing that was there and leaves
nothing behind; two runs never write one folder at once; an analysis file from anywhere is never unpickled.

Every end-to-end case runs `vrs analyze` as a user would (a new process) with a private TMPDIR, and compares the
previous report byte for byte."""

from __future__ import annotations

import errno
import filecmp
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vrs_helpers.app import publish as pub

ARGS = ["--response", "score", "--system", "system", "--item", "item", "--replication", "seed"]


def _scores(path: Path, items: int = 40, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    pd.DataFrame([{"system": s, "seed": r, "item": f"i{i}", "score": rng.normal() + 0.3 * (s == "B")}
                  for s in "AB" for r in range(3) for i in range(items)]).to_csv(path, index=False)
    return path


def _env(tmpdir: Path) -> dict:
    return {**os.environ, "TMPDIR": str(tmpdir)}


def _analyze(data, out, tmpdir, *extra, **kw):
    return subprocess.run([sys.executable, "-m", "vrs_helpers.app.cli", "analyze", str(data), *ARGS,
                           "--n-resamples", "99", "--out", str(out), *extra], capture_output=True, text=True,
                          env=_env(tmpdir), **kw)


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def previous_report(tmp_path_factory):
    """A report made by a successful run: each test copies it as the report a failed run must leave as it was."""
    root = tmp_path_factory.mktemp("previous")
    tmp = root / "tmp"
    tmp.mkdir()
    proc = _analyze(_scores(root / "scores.csv"), root / "report", tmp)
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp.iterdir())
    return root / "report"


def _copy_report(previous_report, dest: Path) -> dict:
    shutil.copytree(previous_report, dest)
    (dest / "my-notes.txt").write_text("a user's own file beside the report")
    return _snapshot(dest)


# ------------------------------------------------------------------------------------------------ publish, unit

def _report_files(folder: Path, kind: str) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    names = ["report.html", "report.ipynb", "summary.json"] if kind == "table" else ["report.html",
                                                                                     "summary.json", "summary.txt"]
    for n in names:
        (folder / n).write_text(f"{kind} {n}")
    if kind == "table":
        (folder / "mathjax").mkdir()
        (folder / "mathjax" / "MathJax.js").write_text("mathjax")
    return {n: folder / n for n in [*names, *(["mathjax"] if kind == "table" else [])]}


def test_publish_swaps_in_the_whole_report_and_keeps_other_files(tmp_path):
    """A logs report written over a score-table report leaves no stale report.ipynb or mathjax/ (issue 37, 8); a
    user's own file in the folder stays; nothing of the staging is left."""
    out = tmp_path / "out"
    pub.publish(_report_files(tmp_path / "w1", "table"), out)
    (out / "mine.csv").write_text("mine")
    pub.publish(_report_files(tmp_path / "w2", "logs"), out)
    assert sorted(p.name for p in out.iterdir()) == ["mine.csv", "report.html", "summary.json", "summary.txt"]
    assert (out / "report.html").read_text() == "logs report.html"


def test_publish_rolls_back_when_a_rename_fails(tmp_path, monkeypatch):
    """All or nothing: when the third rename into place fails, the previous report is back byte for byte."""
    out = tmp_path / "out"
    pub.publish(_report_files(tmp_path / "w1", "table"), out)
    before = _snapshot(out)
    real, calls = os.replace, []

    def failing(src, dst):
        calls.append(dst)
        if Path(dst).parent == out and len([c for c in calls if Path(c).parent == out]) == 3:
            raise OSError(errno.EIO, "I/O error")
        return real(src, dst)

    monkeypatch.setattr(pub.os, "replace", failing)
    with pytest.raises(OSError, match="I/O error"):
        pub.publish(_report_files(tmp_path / "w2", "logs"), out)
    monkeypatch.setattr(pub.os, "replace", real)
    assert _snapshot(out) == before
    assert sorted(p.name for p in out.iterdir()) == sorted(_report_files(tmp_path / "w3", "table"))


def test_publish_on_a_full_disk_touches_nothing(tmp_path, monkeypatch):
    """A disk too full for the new report fails while staging: DiskFullError, the previous report as it was, no
    staging folder left."""
    out = tmp_path / "out"
    pub.publish(_report_files(tmp_path / "w1", "table"), out)
    before = _snapshot(out)

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device", dst)

    monkeypatch.setattr(pub.shutil, "move", full)
    with pytest.raises(pub.DiskFullError, match="the disk is full"):
        pub.publish(_report_files(tmp_path / "w2", "logs"), out)
    assert _snapshot(out) == before and not [p for p in out.iterdir() if p.name.startswith(".")]


def test_disk_full_recognises_tree_copy_errors():
    assert pub.disk_full(OSError(errno.ENOSPC, "x"))
    assert pub.disk_full(shutil.Error([("a", "b", "[Errno 28] No space left on device: 'b'")]))
    assert not pub.disk_full(OSError(errno.EACCES, "x"))
    assert not pub.disk_full(shutil.Error([("a", "b", "[Errno 13] Permission denied")]))


def _dead_pid() -> int:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    return ended.pid


def test_sweep_removes_what_dead_runs_left_and_nothing_else(tmp_path):
    """Work folders, kernel sockets and connection files named after a process that is gone are removed; those of a
    live process, and files that only look alike, stay."""
    dead, alive = _dead_pid(), os.getpid()
    left = [tmp_path / f"vrs-analyze-{dead}-abc", tmp_path / f"vrs-kernel-{dead}-ff-1",
            tmp_path / f"vrs-kernel-{dead}-ff.json"]
    kept = [tmp_path / f"vrs-analyze-{alive}-abc", tmp_path / "vrs-analyze-abcdef", tmp_path / "other-123-x"]
    left[0].mkdir()
    (left[0] / "scores.parquet").write_bytes(b"x" * 1000)
    kept[0].mkdir()
    for p in [*left[1:], *kept[1:]]:
        p.write_text("x")
    assert sorted(pub.sweep_stale(tmp_path)) == sorted(left)
    assert sorted(tmp_path.iterdir()) == sorted(kept)


def test_sweep_debris_puts_back_what_a_killed_swap_set_aside(tmp_path):
    """A run killed between the renames of publish: the previous files it had set aside come back."""
    out = tmp_path / "out"
    out.mkdir()
    dead = _dead_pid()
    aside = out / f".vrs-previous-{dead}-x"
    aside.mkdir()
    (aside / "summary.json").write_text("old")
    (out / f".vrs-staging-{dead}-x").mkdir()
    (out / ".report.html.partial").write_text("half")
    pub.sweep_debris(out)
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]
    assert (out / "summary.json").read_text() == "old"


# ------------------------------------------------------------------------------------------------ the lock

def test_a_second_run_on_the_same_out_is_refused(tmp_path):
    """Issue 37 (9): while a live run holds --out, another exits 2 at once naming it; a lock file left by a process
    that is gone does not block (flock is released with its process)."""
    out = tmp_path / "report"
    data = _scores(tmp_path / "scores.csv")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with pub.lock_out_dir(out):
        started = time.perf_counter()
        proc = _analyze(data, out, tmp)
        assert time.perf_counter() - started < 10
    assert proc.returncode == 2, proc.stderr
    assert "being written by another vrs run" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()   # released by the holder, which had created the folder: nothing left
    holder = subprocess.run([sys.executable, "-c", "import sys; from vrs_helpers.app.publish import lock_out_dir; "
                             "lock_out_dir(sys.argv[1])", str(out)], check=True)   # exits holding it
    assert holder.returncode == 0 and (out / pub.LOCK_NAME).exists()
    with pub.lock_out_dir(out) as lock:
        assert (out / pub.LOCK_NAME).read_text() == str(os.getpid())
        lock.keep_folder()
    assert out.is_dir() and not (out / pub.LOCK_NAME).exists()


# ------------------------------------------------------------------------------------------------ end to end

def _wait_for_lock(out: Path, proc, limit=60.0) -> bool:
    """Wait until the run holds the output folder's lock (it then reads the data and analyses them)."""
    start = time.monotonic()
    lock = out / pub.LOCK_NAME
    while time.monotonic() - start < limit and proc.poll() is None:
        if lock.is_file() and lock.read_text() == str(proc.pid):
            return True
        time.sleep(0.02)
    return False


def _start_analysis(folder: Path, out: Path, tmp: Path, seed: int):
    """`vrs analyze` of 2 systems x 3 runs x 300 items started in the background, returned while it analyses (it
    holds the output folder's lock, and 1 s has passed: it reads the data or fits the models)."""
    data = _scores(folder / "scores.csv", items=300, seed=seed)
    proc = subprocess.Popen([sys.executable, "-m", "vrs_helpers.app.cli", "analyze", str(data), *ARGS,
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(tmp))
    assert _wait_for_lock(out, proc), "the analysis never started"
    time.sleep(1.0)
    return proc


@pytest.mark.parametrize("sig, code, said", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130,
                                                                                     "interrupted")])
def test_a_stopped_run_keeps_the_previous_report_and_leaves_nothing(tmp_path, previous_report, sig, code, said):
    """Issue 37 (7, 8): SIGTERM is handled like Ctrl-C: one line saying the previous report is unchanged (no
    KeyboardInterrupt traceback), exit 128 + the signal, the previous report byte-identical, the private TMPDIR
    empty (no work folder); it stops within 2 s."""
    out = tmp_path / "report"
    before = _copy_report(previous_report, out)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = _start_analysis(tmp_path, out, tmp, seed=1)
    proc.send_signal(sig)
    sent = time.monotonic()
    _, err = proc.communicate(timeout=60)
    # exit status 128 + the signal: the run's own exit, or (issue 50) the signal itself once the stop watchdog ended a
    # clean-up that outlasted its second (the shell reports both as 128 + the signal)
    assert proc.returncode in (code, -sig), err
    assert time.monotonic() - sent < 2.5, time.monotonic() - sent
    assert said in err and "unchanged" in err and "Traceback" not in err
    assert _snapshot(out) == before
    assert not list(tmp.iterdir())


def test_a_killed_run_is_cleaned_up_by_the_next(tmp_path, previous_report):
    """SIGKILL leaves the lock it held (nothing can run then) and a work folder if it was writing the report; the
    next run removes what dead runs left (their process is gone), takes the lock and replaces the report."""
    out = tmp_path / "report"
    before = _copy_report(previous_report, out)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    data = _scores(tmp_path / "scores.csv", items=300, seed=2)
    proc = _start_analysis(tmp_path, out, tmp, seed=2)
    proc.kill()
    proc.communicate()
    after = _snapshot(out)
    assert after.pop(pub.LOCK_NAME) == str(proc.pid).encode()   # nothing can remove it; it blocks nobody
    assert after == before
    (tmp / f"{pub.WORK_PREFIX}{proc.pid}-abc123").mkdir()   # as a run killed while it wrote its report leaves it
    again = _analyze(data, out, tmp)
    assert again.returncode == 0, again.stderr
    assert not list(tmp.iterdir())
    assert (out / "my-notes.txt").exists() and _snapshot(out)["summary.json"] != before["summary.json"]
    assert not (out / pub.LOCK_NAME).exists()


def test_vrs_run_never_unpickles_an_analysis_file(tmp_path):
    """Issue 37 (3): `vrs run 07 -p analysis_file evil.pickle` executed the payload. It is refused before any
    kernel starts (exit 2), and the payload's side effect never happens."""
    ran = tmp_path / "payload-ran"
    evil = tmp_path / "evil.pickle"
    code = f"import pickle, pathlib; pathlib.Path({str(evil)!r}).write_bytes(pickle.dumps(" \
           f"type('P', (), {{'__reduce__': lambda self: (pathlib.Path.touch, (pathlib.Path({str(ran)!r}),))}})()))"
    subprocess.run([sys.executable, "-c", code], check=True)
    (tmp_path / "evil.pickle.pending").write_text(str(os.getpid()))   # a marker naming a live process
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "vrs_helpers.app.cli", "run", "07", "-p", "analysis_file",
                           str(evil), "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=120)
    assert proc.returncode == 2 and "analysis_file" in proc.stderr and "Traceback" not in proc.stderr
    assert time.perf_counter() - started < 30 and not ran.exists()


def test_report_runs_in_one_process_hold_no_more_descriptors(tmp_path):
    """Issues 37 (8), 50 (9): analyses and reports made again and again in one Python process hold no more threads
    and file descriptors after the third than after the first."""
    import gc
    import threading

    from vrs_helpers.app.analyze import write_report
    from vrs_helpers.evaluate.analysis import analyze
    from vrs_helpers.evaluate.tables.spec import AnalysisSpec

    data = _scores(tmp_path / "scores.csv", items=20)

    def run():
        write_report(analyze(AnalysisSpec(str(data), "score", "system", "item", replications=["seed"],
                                          n_resamples=99)), tmp_path / "report")
        gc.collect()
        return len(os.listdir("/proc/self/fd")), threading.active_count()

    first = run()
    run()
    assert run() == first


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    if os.name != "posix" or os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "20m"):
        pytest.skip("a small file system needs `mount -t tmpfs` (root); the unit tests above cover the logic")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path, leave_kb: int) -> None:
    free = shutil.disk_usage(disk).free
    with open(disk / "filler", "wb") as f:
        f.truncate(0)
        os.posix_fallocate(f.fileno(), 0, max(free - leave_kb * 1024, 0))


def test_a_full_disk_for_the_report_changes_nothing(tmp_path, previous_report, small_disk):
    """Issue 37 (2): --out on a nearly full file system: exit 2 "the disk is full" in one line, the previous report
    byte-identical, no .partial, staging folder or work folder left (in --out or the private TMPDIR)."""
    out = small_disk / "report"
    before = _copy_report(previous_report, out)
    _fill(small_disk, leave_kb=60)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = _analyze(_scores(tmp_path / "scores.csv", seed=5), out, tmp)
    assert proc.returncode == 2, proc.stderr
    assert "the disk is full" in proc.stderr and "unchanged" in proc.stderr and "Traceback" not in proc.stderr
    assert _snapshot(out) == before
    assert not [p for p in out.iterdir() if p.name.startswith(".")] and not list(tmp.iterdir())


def test_a_full_temporary_folder_is_a_clear_error(tmp_path, previous_report, small_disk):
    """Issue 37 (8): TMPDIR on a full file system: exit 2 "the disk is full" naming TMPDIR as a way out, the previous
    report byte-identical, nothing left in TMPDIR."""
    out = tmp_path / "report"
    before = _copy_report(previous_report, out)
    _fill(small_disk, leave_kb=64)
    proc = _analyze(_scores(tmp_path / "scores.csv", seed=6), out, small_disk)
    assert proc.returncode == 2, proc.stderr
    assert "the disk is full" in proc.stderr and "TMPDIR" in proc.stderr and "Traceback" not in proc.stderr
    assert _snapshot(out) == before
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]
    assert filecmp.cmp(out / "summary.json", previous_report / "summary.json", shallow=False)
