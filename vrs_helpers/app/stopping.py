"""How ``vrs`` stops when it is told to (issues 37 and 50): SIGTERM and SIGHUP (a scheduler's time limit, a closed
terminal) are handled like Ctrl-C, and every one of them is acted on within about two seconds, whatever the run is
doing.

- :func:`handle_termination` / :func:`restore` - SIGTERM and SIGHUP raise :class:`Terminated` in the main thread
  (a ``KeyboardInterrupt``), so that the clean-up of an interruption runs: the report's kernel stopped, the work
  folder removed, the previous report untouched.
- :class:`Watchdog` - Python runs a signal handler only between two bytecodes of the main thread: a run inside one
  long call into C (a linear algebra routine on a large matrix, a parser reading a large file) or waiting for a
  worker thread at its exit would not stop until that call returns, minutes later. The watchdog learns of the
  signal at once (``signal.set_wakeup_fd``: the interpreter's C-level handler writes the signal's number to a
  socket while the main thread is still busy) and gives the ordinary clean-up ``grace`` seconds; a run that has not
  ended by then is ended by the watchdog: its child processes (the report's kernel, Dask's local workers) killed,
  the clean-ups registered with :meth:`Watchdog.on_forced_exit` run (the work folder, the lock), the same one-line
  message printed, and the process exits with 128 + the signal's number. While the previous report is being
  swapped for the new one (:meth:`Watchdog.critical`, a few renames) the watchdog waits for the swap to end, so a
  forced exit never leaves half of each.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time

_ACTIVE: list = []   # the watchdog of the command running in this process (at most one: the main thread's)

STOP_SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None)


class Terminated(KeyboardInterrupt):
    """SIGTERM (or SIGHUP), raised in the main thread like Ctrl-C's KeyboardInterrupt, so that the same clean-up runs
    (the report's kernel stopped, the work folder removed, the previous report untouched)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum, frame):
    raise Terminated(signum)


def handle_termination():
    """Handle SIGTERM and SIGHUP as an interruption (:class:`Terminated`) while a command runs (main thread only).
    Returns what :func:`restore` needs."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, _raise_terminated)
    return previous


def restore(previous) -> None:
    for sig, handler in (previous or {}).items():
        signal.signal(sig, handler)


def stop_message(signum: int, out=None) -> str:
    """The one line a stopped ``vrs`` prints (``out``: the report folder whose previous report is unchanged)."""
    kept = f"; the previous report in {out} (if any) is unchanged" if out else ""
    what = "interrupted" if signum == signal.SIGINT else "terminated"
    return f"{what}{kept}."


def child_processes(pid: int | None = None) -> list[int]:
    """The process ids of the children of ``pid`` (default: this process), from ``/proc`` (Linux; elsewhere
    none are found)."""
    pid = os.getpid() if pid is None else pid
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()   # after "pid (comm) ": state, ppid, ...
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry))
    return found


class Watchdog:
    """Ends the process ``grace`` seconds after a stop signal (SIGINT, SIGTERM, SIGHUP) if it has not ended by
    itself (module docstring). ``message(signum)``: the line to print when it has to. Use as a context manager in
    the main thread; elsewhere, or where ``signal.set_wakeup_fd`` is taken or missing, it does nothing."""

    def __init__(self, message=None, grace: float = 1.0):
        self.message = message or (lambda signum: stop_message(signum))
        self.grace = grace
        self._cleanups: list = []
        self._critical = 0
        self._lock = threading.Lock()
        self._sockets = None
        self._previous_fd = -1
        self._thread = None
        self._closed = False
        self.said = False   # the main thread printed the stop message itself

    def __enter__(self) -> Watchdog:
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "set_wakeup_fd"):
            return self
        _ACTIVE.append(self)
        reader, writer = socket.socketpair()
        writer.setblocking(False)
        try:
            previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        except (ValueError, OSError):
            reader.close()
            writer.close()
            return self
        if previous != -1:   # somebody else's (an event loop's): leave it to them
            signal.set_wakeup_fd(previous)
            reader.close()
            writer.close()
            return self
        self._sockets, self._previous_fd = (reader, writer), previous
        self._thread = threading.Thread(target=self._watch, name="vrs-stop-watchdog", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self._sockets is None:
            return
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(self._previous_fd)
        self._closed = True   # the run is over: a stop signal being handled needs no forced exit any more
        reader, writer = self._sockets
        self._sockets = None
        with contextlib.suppress(OSError):
            writer.shutdown(socket.SHUT_RDWR)
        writer.close()
        if self._thread is not None:
            self._thread.join(timeout=0.2)
        reader.close()

    @contextlib.contextmanager
    def on_forced_exit(self, cleanup):
        """Within the block, ``cleanup()`` runs if the watchdog has to end the process (best effort: errors are
        ignored)."""
        with self._lock:
            self._cleanups.append(cleanup)
        try:
            yield
        finally:
            with self._lock:
                if cleanup in self._cleanups:
                    self._cleanups.remove(cleanup)

    @contextlib.contextmanager
    def critical(self):
        """A section that must not be cut in two (a few renames): a forced exit waits for its end."""
        with self._lock:
            self._critical += 1
        try:
            yield
        finally:
            with self._lock:
                self._critical -= 1

    def _watch(self) -> None:
        sockets = self._sockets
        if sockets is None:
            return
        reader = sockets[0]
        while True:
            try:
                data = reader.recv(64)
            except OSError:
                return
            if not data:
                return   # closed: the run ended
            stops = [b for b in data if b in STOP_SIGNALS]
            if stops:
                self._expire(stops[0])
                return

    def _expire(self, signum: int) -> None:
        deadline = time.monotonic() + self.grace   # the ordinary clean-up's time
        while time.monotonic() < deadline or (self._critical and time.monotonic() < deadline + 30):
            if self._closed:
                return
            time.sleep(0.02)
        if not self._closed:
            self.force(signum)

    def force(self, signum: int) -> None:
        """End the process now: children killed, clean-ups run, the message printed, exit 128 + ``signum``."""
        for pid in child_processes():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with self._lock:
            cleanups = list(reversed(self._cleanups))
        for cleanup in cleanups:
            with contextlib.suppress(Exception):
                cleanup()
        if not self.said:
            with contextlib.suppress(Exception):
                from ..literal import console_text

                os.write(sys.stderr.fileno(), (console_text(self.message(signum)) + "\n").encode("utf-8", "replace"))
        os._exit(128 + signum)


def on_forced_exit(cleanup):
    """:meth:`Watchdog.on_forced_exit` of the running command's watchdog (a block that does nothing without one)."""
    return _ACTIVE[-1].on_forced_exit(cleanup) if _ACTIVE else contextlib.nullcontext()


def critical():
    """:meth:`Watchdog.critical` of the running command's watchdog (a block that does nothing without one)."""
    return _ACTIVE[-1].critical() if _ACTIVE else contextlib.nullcontext()


def said() -> None:
    """The main thread printed the stop message itself: a forced exit does not print it again."""
    for watchdog in _ACTIVE:
        watchdog.said = True
