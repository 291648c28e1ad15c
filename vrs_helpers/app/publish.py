"""How ``vrs analyze`` writes its report: all or nothing, one run at a time, and nothing left behind.

- :func:`lock_out_dir` - a lock file in the output folder: a second run writing the same ``--out`` while the first
  still runs is refused (exit 2) instead of the last writer silently winning;
- :func:`publish` - the new report files staged inside the output folder (the same file system, so a full disk fails
  the copy before any old file is touched), then swapped in by renames; the previous report files are moved aside
  and removed only when every new file is in place, and put back when a rename fails;
- :func:`disk_full` / :class:`DiskFullError` - "no space left on device" anywhere in a run becomes one clear error
  (exit 2) instead of a traceback;
- :func:`work_dir` and :func:`sweep_stale` - the temporary work folders, kernel sockets and connection files of a
  run carry its process id in their names, so a run killed without a chance to clean up (SIGKILL, a power cut) is
  swept by the next run once its process is gone.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from ..errors import VRSError
from .stopping import critical

# every file a report of `vrs analyze` can consist of (score table: report.ipynb, report.html, summary.json and
# mathjax/; logs: report.html, summary.json, summary.txt): a new report replaces all of them, so a logs report
# written over a score-table report leaves no stale notebook or MathJax copy behind
REPORT_FILES = ("report.html", "report.ipynb", "summary.json", "summary.txt", "mathjax",   # mathjax/: older reports
                "pairs.csv")  # many systems: every pair (issue 54); an older report's goes with it
LOCK_NAME = ".vrs-lock"
WORK_PREFIX = "vrs-analyze-"
KERNEL_PREFIX = "vrs-kernel-"
_STAGE = ".vrs-staging-"
_OLD = ".vrs-previous-"
_OWNED = re.compile(rf"^(?:{WORK_PREFIX}|{KERNEL_PREFIX})(\d+)-")


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs (on POSIX; elsewhere every process is taken to run)."""
    if pid <= 0:
        return False
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # another user's process: it runs
        return True
    return True


class DiskFullError(VRSError, OSError):
    """The disk (of the output folder or of the temporary folder) is full: exit 2, the previous report unchanged."""

    def __str__(self) -> str:
        return str(self.strerror)


class OutputBusyError(VRSError, ValueError):
    """Another live ``vrs`` run is writing the same output folder: exit 2."""


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (an ``OSError``, or ``shutil.Error`` collecting the errors of a tree copy) says that a disk or
    quota is full."""
    codes = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
    if isinstance(exc, shutil.Error):
        return any("No space left on device" in str(e) or "Disk quota exceeded" in str(e)
                   for e in (exc.args[0] if exc.args and isinstance(exc.args[0], list) else [exc]))
    return isinstance(exc, OSError) and exc.errno in codes


def disk_full_error(exc: BaseException, out_dir=None, where=None) -> DiskFullError:
    """The user's error for a full disk: where (``where``, else the file the error names), and what to do."""
    where = where or getattr(exc, "filename2", None) or getattr(exc, "filename", None)
    place = f" (writing {where})" if where else ""
    kept = f" The previous report in {out_dir} (if any) is unchanged." if out_dir is not None else ""
    return DiskFullError(errno.ENOSPC, f"the disk is full{place}: free some space, or write the report elsewhere "
                         f"with --out and the temporary files elsewhere with TMPDIR=/a/larger/disk.{kept}")


def work_dir() -> Path:
    """A new private (0700) work folder in the temporary folder, named after this process
    (``vrs-analyze-<pid>-...``: :func:`sweep_stale` removes it once the process is gone)."""
    return Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-"))


def sweep_stale(tmpdir=None) -> list[Path]:
    """Remove the work folders, kernel sockets and connection files that runs of ``vrs`` left in the temporary
    folder when they were killed: those named after a process that no longer runs and owned by this user. Returns
    what was removed (best effort: what cannot be removed is left)."""
    folder = Path(tmpdir or tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    uid = os.getuid() if hasattr(os, "getuid") else None
    for entry in entries:
        match = _OWNED.match(entry.name)
        if match is None or pid_alive(int(match.group(1))):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if uid is not None and st.st_uid != uid:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


def own_temporary_files() -> tuple:
    """The stop watchdog's action (:func:`vrs_helpers.app.stopping.on_forced_exit`) that removes this process's work
    folders, kernel sockets and connection files from the temporary folder."""
    return ("sweep", tempfile.gettempdir(), [WORK_PREFIX, KERNEL_PREFIX], os.getpid(),
            os.getuid() if hasattr(os, "getuid") else None)


class OutputLock:
    """The lock of an output folder, held while a run writes it (:func:`lock_out_dir`). ``release()`` removes the
    lock file - only the very file this run locked, never what another process put at its name - and, when this run
    created the folder and nothing else was put there, the folder."""

    def __init__(self, out: Path, fd: int | None, created: list[Path]):
        self.out, self._fd, self._created = out, fd, created
        self._id = None
        if fd is not None:
            info = os.fstat(fd)
            self._id = (info.st_dev, info.st_ino)

    def release(self) -> None:
        if self._fd is None:
            return
        path = self.out / LOCK_NAME
        try:
            info = os.lstat(path)
            if (info.st_dev, info.st_ino) == self._id:   # still our file (not one swapped in meanwhile)
                path.unlink()
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None
        for folder in reversed(self._created):   # made for this run and still empty: a failed run leaves no folder
            try:
                folder.rmdir()
            except OSError:
                break

    def forced_exit_actions(self) -> list:
        """What the stop watchdog does for this lock if it has to end the run (:func:`vrs_helpers.app.stopping.
        on_forced_exit`): remove the lock file if it is still this one, and the folders this run created if empty."""
        if self._fd is None:
            return []
        return [("unlink", str(self.out / LOCK_NAME), *self._id), ("rmdir", *map(str, reversed(self._created)))]

    def keep_folder(self) -> None:
        """The run succeeded: the folders it created stay."""
        self._created = []

    def __enter__(self) -> OutputLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _lock_refused(out: Path, what: str) -> OutputBusyError:
    return OutputBusyError(f"--out {out}: its lock file {out / LOCK_NAME} is {what}, not a lock file of a vrs run; "
                           "the run did not touch it. If it is yours and no vrs run is writing the folder, remove it "
                           f"(rm -r {out / LOCK_NAME}); else give another folder with --out.")


def _open_lock(path: Path, out: Path) -> int | None:
    """Open the lock file ``path`` without following a link and without blocking on a named pipe (issue 50):
    created new (``O_EXCL``: a dangling link at its name is never followed to create a file elsewhere), or an
    existing one that is a regular file of this user with no other name (a hard link). Anything else there - a
    symbolic link, a folder, a named pipe, another user's file - is refused and left as it is
    (:class:`OutputBusyError`). None: the file vanished between two calls (try again)."""
    import errno

    nofollow = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | nofollow, 0o600)
    except FileExistsError:
        pass
    try:
        fd = os.open(path, os.O_RDWR | nofollow)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise _lock_refused(out, f"a symbolic link (to {os.readlink(path)})") from None
        if exc.errno == errno.EISDIR or os.path.isdir(path):
            raise _lock_refused(out, "a folder") from None
        raise
    info = os.fstat(fd)
    uid = os.getuid() if hasattr(os, "getuid") else info.st_uid
    problem = ("a named pipe, a device or a socket" if not stat.S_ISREG(info.st_mode) else
               f"a file of another user (uid {info.st_uid})" if info.st_uid != uid else
               f"a file with {info.st_nlink} names (a hard link)" if info.st_nlink != 1 else None)
    if problem is not None:
        os.close(fd)
        raise _lock_refused(out, problem)
    return fd


def lock_out_dir(out_dir) -> OutputLock:
    """Take the lock file ``out_dir/.vrs-lock`` (``fcntl.flock``: released by the system when the process ends,
    however it ends), creating ``out_dir`` if needed. Raises :class:`OutputBusyError` while another live run holds
    it, and when the name holds anything but a lock file (:func:`_open_lock`): a shared ``--out`` cannot make the
    run write or remove another file. Elsewhere than on POSIX no lock is taken."""
    out = Path(out_dir)
    created = [p for p in reversed([out, *out.parents]) if not p.exists()]
    out.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:   # pragma: no cover - not POSIX
        return OutputLock(out, None, created)
    path = out / LOCK_NAME
    try:
        while True:
            fd = _open_lock(path, out)
            if fd is None:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                try:
                    holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
                finally:
                    os.close(fd)
                raise OutputBusyError(f"--out {out} is being written by another vrs run (process {holder}); wait "
                                      "for it to finish, or give another folder with --out.") from None
            try:
                info = os.lstat(path)   # not a lock file its holder removed (or someone replaced) meanwhile
                same = (info.st_dev, info.st_ino) == (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
    except BaseException:
        for folder in reversed(created):   # refused: the folders made for this run go again
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode("ascii"))
    return OutputLock(out, fd, created)


def publish(files: dict, out_dir, keep: tuple = ()) -> None:
    """Replace the report in ``out_dir`` by ``files`` (``{name in out_dir: source file or folder}``, the sources moved:
    they are the run's work files), all or nothing.

    Every source is first moved into a staging folder inside ``out_dir`` (same file system: a disk too full for the
    new report fails here, with nothing of the previous report touched; :class:`DiskFullError`). Then the previous
    report's files (:data:`REPORT_FILES` and the names in ``files``) are moved aside, except those named in ``keep``
    (e.g. a current MathJax copy the new report uses), the staged files are renamed into place, and the previous
    ones removed. A failed rename puts the previous files back. Other files in ``out_dir`` are left alone."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f"{_STAGE}{os.getpid()}-", dir=out))
    old = out / f"{_OLD}{os.getpid()}-{stage.name.rsplit('-', 1)[-1]}"
    try:
        try:
            for name, src in files.items():
                shutil.move(os.fspath(src), os.fspath(stage / name))
        except (OSError, shutil.Error) as exc:
            if disk_full(exc):
                raise disk_full_error(exc, out, where=out) from None
            raise
        replaced = [n for n in dict.fromkeys([*REPORT_FILES, *files])
                    if n not in keep and os.path.lexists(out / n)]
        old.mkdir()
        moved_old, moved_new = [], []
        with critical():   # a stop signal's forced exit waits for the swap (app/stopping)
            _swap(out, old, stage, files, replaced, moved_old, moved_new)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def _swap(out: Path, old: Path, stage: Path, files: dict, replaced: list, moved_old: list, moved_new: list) -> None:
    """The renames of :func:`publish`: the previous files aside, the new ones in; rolled back when one fails."""
    try:
        for name in replaced:
            os.replace(out / name, old / name)
            moved_old.append(name)
        for name in files:
            os.replace(stage / name, out / name)
            moved_new.append(name)
    except BaseException:   # roll back: the previous report as it was
        for name in moved_new:
            _remove(out / name)
        for name in moved_old:
            os.replace(old / name, out / name)
        raise


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def sweep_debris(out_dir) -> None:
    """Clean up after a run that was killed while it wrote ``out_dir`` (its process no longer runs): its staging
    folder is removed; from its set-aside folder the previous report files missing in ``out_dir`` are put back (it
    was killed between the renames of :func:`publish`), the rest removed; old ``.*.partial`` files are removed. Only
    what such a run can have made is touched: real folders and files of this user, never a link or another user's
    entry (in a shared ``--out`` those stay as they are)."""
    out = Path(out_dir)
    if not out.is_dir():
        return
    uid = os.getuid() if hasattr(os, "getuid") else None
    for entry in out.iterdir():
        try:
            info = entry.lstat()
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode) or (uid is not None and info.st_uid != uid):
            continue
        m = re.match(rf"^({re.escape(_STAGE)}|{re.escape(_OLD)})(\d+)-", entry.name)
        if m and stat.S_ISDIR(info.st_mode) and not pid_alive(int(m.group(2))):
            if m.group(1) == _OLD:
                for child in entry.iterdir():
                    if not os.path.lexists(out / child.name):
                        os.replace(child, out / child.name)
            _remove(entry)
        elif entry.name.startswith(".") and entry.name.endswith(".partial") and stat.S_ISREG(info.st_mode):
            _remove(entry)


class OutputFolderError(VRSError, ValueError):
    """An output folder that cannot take the report (an existing file, an unwritable place): exit 2."""


def check_out_dir(out_dir, hint: str | None = None) -> Path:
    """Check, before any analysis, that the report can be written to ``out_dir``: not an existing file, under no
    file, creatable and writable (a probe file is written and removed; folders created for the probe are removed
    again, so a later failure leaves nothing behind). Raises :class:`OutputFolderError` saying what to do (``hint``:
    the last sentence, for another command than ``vrs analyze``)."""
    out = Path(out_dir)
    hint = hint or ("Give another folder with --out (it is created if missing; only the report files in it are "
                    "replaced).")
    if out.exists() and not out.is_dir():
        raise OutputFolderError(f"--out {out} is an existing file, not a folder. {hint}")
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise OutputFolderError(f"--out {out}: {existing} is a file, so no folder can be made under it. {hint}")
    created = []
    try:
        for parent in reversed([out, *out.parents]):
            if not parent.exists():
                parent.mkdir()
                created.append(parent)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".vrs-write-test-"):
            pass
    except OSError as exc:
        raise OutputFolderError(f"--out {out}: the report cannot be written there ({exc.strerror or exc}). "
                                f"{hint}") from None
    finally:
        for folder in reversed(created):
            try:
                folder.rmdir()
            except OSError:
                pass
    return out
