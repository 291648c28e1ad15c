"""How ``vrs analyze`` hands the analysis it made to its report's kernel without trusting a file.

The analysis (Python objects: fits, tables, outcomes) crosses from the CLI's process to the report's kernel as a
pickle, and a pickle runs code when it is loaded. So it is loaded only when it is *authenticated*: the CLI makes a
fresh random key per run, gives it to the kernel it starts in that kernel's environment (:data:`KEY_ENV`; it is never
written to a file, a parameter or a notebook), and writes the file as ``HMAC-SHA256(key, body) + body``. The kernel
checks the tag (in constant time) before it unpickles anything. A file anybody else made - or one passed to
``vrs run 07 -p analysis_file ...``, whose kernel has no key - is refused unread (:class:`HandoverError`). The file
must also belong to this user and lie in a folder nobody else can write to (the run's 0700 work folder).

The marker ``<file>.pending`` (the analysis is being made: wait for it) is signed the same way, with the process id
of its maker: a marker written by anyone else, or naming a process that is gone, is not waited for, and the wait has
a time limit (:data:`WAIT_LIMIT_S`). This module imports only the standard library.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from pathlib import Path

from ..errors import VRSError

KEY_ENV = "VRS_ANALYSIS_KEY"   # the kernel's environment variable holding the run's key (hex)
WAIT_LIMIT_S = 6 * 3600.0      # the longest a report waits for an analysis being made
_TAG = 32


class HandoverError(VRSError, ValueError):
    """An analysis file that is not this run's own hand-over (unsigned, altered, another user's, no key)."""


def _key(key: str | bytes | None) -> bytes:
    key = os.environ.get(KEY_ENV) if key is None else key
    if not key:
        raise HandoverError("analysis_file is how `vrs analyze` hands its analysis to its own report and is read only "
                            "there (the run's key is missing); leave analysis_file empty to analyse the data here.")
    return key.encode("ascii") if isinstance(key, str) else key


def sign(body: bytes, key: str | bytes | None = None) -> bytes:
    """``HMAC-SHA256(key, body) + body``."""
    return hmac.new(_key(key), body, hashlib.sha256).digest() + body


def verify(blob: bytes, key: str | bytes | None = None) -> bytes:
    """The body of a :func:`sign` ed blob, or :class:`HandoverError` when its tag does not match the key."""
    expected = hmac.new(_key(key), blob[_TAG:], hashlib.sha256).digest()
    if len(blob) < _TAG or not hmac.compare_digest(blob[:_TAG], expected):
        raise HandoverError("the analysis file is not this run's own hand-over (its signature does not match); it "
                            "was not loaded. Leave analysis_file empty to analyse the data here.")
    return blob[_TAG:]


def write(path, body: bytes, key: str | bytes | None = None) -> None:
    """Write ``body`` signed to ``path`` atomically (a reader never sees a part of it), readable by this user only."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(sign(body, key))
    os.replace(tmp, path)


def read(path, key: str | bytes | None = None) -> bytes:
    """The verified body of a file :func:`write` made: refused unread (:class:`HandoverError`) without the key,
    when the file or its folder is not this user's own, when the folder is writable by others, or when the tag does
    not match."""
    key = _key(key)
    path = Path(path)
    if os.name == "posix":
        st, folder = os.stat(path), os.stat(path.parent)
        if st.st_uid != os.getuid() or folder.st_uid != os.getuid() or folder.st_mode & 0o022:
            raise HandoverError(f"{path} is not in a private folder of this user; it was not loaded. Leave "
                                "analysis_file empty to analyse the data here.")
    return verify(path.read_bytes(), key)


def marker(path) -> Path:
    """The marker file saying that the analysis of ``path`` is being made."""
    path = Path(path)
    return path.with_name(f"{path.name}.pending")


def mark(path, key: str | bytes | None = None) -> Path:
    """Write the signed marker of ``path`` naming this process; returns it (remove it when done or failed)."""
    m = marker(path)
    write(m, str(os.getpid()).encode("ascii"), key)
    return m


def being_made(path, key: str | bytes | None = None) -> bool:
    """Whether a marker signed with the key names a process that still runs."""
    try:
        pid = int(read(marker(path), key).decode("ascii"))
    except (OSError, ValueError, HandoverError):
        return False
    return pid_alive(pid)


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


def wait_for(path, key: str | bytes | None = None, limit_s: float = WAIT_LIMIT_S) -> bool:
    """Wait while the analysis of ``path`` is being made (:func:`being_made`), at most ``limit_s``; whether the file
    exists then."""
    _key(key)
    start = time.monotonic()
    while not Path(path).exists() and being_made(path, key):
        if time.monotonic() - start > limit_s:
            break
        time.sleep(0.01)
    return Path(path).exists()
