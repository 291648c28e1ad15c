"""Issue 50 (1): a shared --out. Whoever can write into the output folder may put anything at the name of its lock
file (.vrs-lock) or of a killed run's leftovers; a run must then neither write nor remove anything but its own
files: a symbolic link is never followed (its target stays byte-identical), a folder, a named pipe, a hard link or
another user's file at the lock's name is refused with exit 2 and a message that says what to do, and nothing the
run did not create is removed.

The end-to-end cases run `vrs analyze` as a user would (a new process, a private TMPDIR)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vrs_helpers.app import publish as pub

ARGS = ["--response", "score", "--system", "system", "--item", "item", "--replication", "seed"]
VICTIM = b"another user's file: it must stay as it is\n"


def _scores(path: Path) -> Path:
    rng = np.random.default_rng(0)
    pd.DataFrame([{"system": s, "seed": r, "item": f"i{i}", "score": rng.normal() + 0.3 * (s == "B")}
                  for s in "AB" for r in range(3) for i in range(20)]).to_csv(path, index=False)
    return path


def _analyze(tmp_path: Path, out: Path, *extra, data=None):
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    data = data or _scores(tmp_path / "scores.csv")
    proc = subprocess.run([sys.executable, "-m", "vrs_helpers.app.cli", "analyze", str(data), *ARGS,
                           "--n-resamples", "99", "--out", str(out), *extra], capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(tmp)}, timeout=300)
    assert not list(tmp.iterdir()), list(tmp.iterdir())   # nothing of the run left in its temporary folder
    return proc


def _previous(out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text('{"previous": true}')
    (out / "report.html").write_text("<p>the previous report</p>")
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and not p.is_symlink()}


def _refused(proc, phrase: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and phrase in proc.stderr, proc.stderr
    last = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(last) == 1 and last[0].startswith("error: ") and "--out" in last[0], proc.stderr


@pytest.mark.parametrize("dangling", [False, True], ids=["link to a file", "dangling link"])
def test_a_symlinked_lock_is_never_followed(tmp_path, dangling):
    """`ln -s VICTIM OUT/.vrs-lock`: before issue 50 the run truncated VICTIM, wrote its process id into it and
    removed the link (a dangling link created a file at its target). Now: exit 2 naming the link, VICTIM
    byte-identical (or still absent), the link and the previous report as they were."""
    victim = tmp_path / "victim.txt"
    if not dangling:
        victim.write_bytes(VICTIM)
    out = tmp_path / "shared"
    before = _previous(out)
    (out / pub.LOCK_NAME).symlink_to(victim)
    proc = _analyze(tmp_path, out)
    _refused(proc, "is a symbolic link")
    if dangling:
        assert not victim.exists()
    else:
        assert victim.read_bytes() == VICTIM
    assert os.readlink(out / pub.LOCK_NAME) == str(victim)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and not p.is_symlink()} == before


def test_a_folder_as_lock_is_an_error_that_says_what_to_do(tmp_path):
    """Before issue 50: IsADirectoryError, a traceback and exit 1. Now exit 2: remove it or use another folder."""
    out = tmp_path / "shared"
    before = _previous(out)
    (out / pub.LOCK_NAME).mkdir()
    (out / pub.LOCK_NAME / "inside").write_text("x")
    proc = _analyze(tmp_path, out)
    _refused(proc, "is a folder, not a lock file")
    assert "rm -r" in proc.stderr and (out / pub.LOCK_NAME / "inside").read_text() == "x"
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_a_fifo_or_a_hard_link_as_lock_is_refused_at_once(tmp_path):
    """A named pipe at the lock's name is not opened for reading (that could wait forever) and refused; a hard link
    to another file (two names) is refused and the file left as it is."""
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / pub.LOCK_NAME)
    done = []
    worker = threading.Thread(target=lambda: done.append(_raises(out)), daemon=True)
    worker.start()
    worker.join(10)
    assert done == ["a named pipe, a device or a socket"], done
    (out / pub.LOCK_NAME).unlink()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    os.link(victim, out / pub.LOCK_NAME)
    assert _raises(out) == "a file with 2 names (a hard link)"
    assert victim.read_bytes() == VICTIM and (out / pub.LOCK_NAME).exists()


def _raises(out: Path) -> str:
    with pytest.raises(pub.OutputBusyError) as err:
        pub.lock_out_dir(out)
    text = str(err.value)
    return text[text.index(" is ") + 4:text.index(", not a lock file")]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to make another user's file")
def test_another_users_lock_file_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / pub.LOCK_NAME).write_bytes(VICTIM)
    os.chown(out / pub.LOCK_NAME, 54321, 54321)
    assert _raises(out) == "a file of another user (uid 54321)"
    assert (out / pub.LOCK_NAME).read_bytes() == VICTIM


def test_release_removes_only_the_file_it_locked(tmp_path):
    """Someone replaces the lock file while the run holds it: the release leaves the replacement alone (it was not
    this run's); the run's own lock file is removed, and a stale one of this user is taken over (issue 37)."""
    out = tmp_path / "out"
    lock = pub.lock_out_dir(out)
    other = tmp_path / "other"
    other.write_bytes(VICTIM)
    os.replace(other, out / pub.LOCK_NAME)
    lock.release()
    assert (out / pub.LOCK_NAME).read_bytes() == VICTIM
    (out / pub.LOCK_NAME).write_text("12345")   # a stale lock file of a killed run of this user
    with pub.lock_out_dir(out) as held:
        assert (out / pub.LOCK_NAME).read_text() == str(os.getpid())
        held.keep_folder()
    assert not (out / pub.LOCK_NAME).exists()


def _dead_pid() -> int:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    return ended.pid


def test_sweeping_a_shared_out_follows_no_link(tmp_path):
    """A killed run's set-aside folder is put back by the next run (issue 37); one that is a link to another user's
    folder must not be: before issue 50 its files were moved into --out. Links and entries of other users stay."""
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "report.html").write_bytes(VICTIM)
    dead = _dead_pid()
    (out / f".vrs-previous-{dead}-x").symlink_to(elsewhere)
    (out / f".vrs-staging-{dead}-y").symlink_to(elsewhere)
    (out / ".notes.partial").symlink_to(elsewhere / "report.html")
    pub.sweep_debris(out)
    assert (elsewhere / "report.html").read_bytes() == VICTIM and not (out / "report.html").exists()
    assert sorted(p.name for p in out.iterdir()) == sorted([f".vrs-previous-{dead}-x", f".vrs-staging-{dead}-y",
                                                            ".notes.partial"])
