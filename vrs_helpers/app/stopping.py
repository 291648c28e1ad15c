"""How ``vrs`` stops when it is told to (issues 37 and 50): SIGTERM and SIGHUP (a scheduler's time limit, a closed
terminal) are handled like Ctrl-C, and every one of them is acted on within about two seconds, whatever the run is
doing.

- :func:`handle_termination` / :func:`restore` - SIGTERM and SIGHUP raise :class:`Terminated` in the main thread
  (a ``KeyboardInterrupt``), so that the clean-up of an interruption runs: the report's kernel stopped, the work
  folder removed, the previous report untouched.
- :class:`Watchdog` - Python runs a signal handler only between two bytecodes of the main thread: a run inside one
  long call into C (a parser reading a large file, a sort of millions of labels, a linear algebra routine) or
  waiting for a worker thread at its exit would not stop until that call returns, minutes later - and a call into C
  that holds the interpreter's lock leaves no other thread of the process able to act either. So the watchdog is a
  small process of its own: the interpreter's C-level handler writes the signal's number into a pipe
  (``signal.set_wakeup_fd``) while the main thread is still busy, the watchdog reads it at once and gives the
  ordinary clean-up ``grace`` seconds (1 s). A run that has not ended by then is ended by the watchdog: the process
  stopped, its child processes (the report's kernel, Dask's local workers) killed, the clean-ups registered with
  :func:`on_forced_exit` done (the work folder and kernel files in the temporary folder, the run's lock file), the
  same one-line message printed, and the process ended by the signal itself (exit status 128 + its number: its
  Python handler is one-shot at the C level, ``SA_RESETHAND``). While the previous report is being swapped for the
  new one (:func:`critical`, a few renames) the watchdog waits for the swap to end, so a forced exit never leaves
  half of each.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading

from ..literal import console_text

_ACTIVE: list = []   # the watchdog of the command running in this process (at most one: the main thread's)

STOP_SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None)
STOPPED = frozenset(128 + int(s) for s in STOP_SIGNALS)   # the exit codes of a command that was stopped


class Terminated(KeyboardInterrupt):
    """SIGTERM (or SIGHUP), raised in the main thread like Ctrl-C's KeyboardInterrupt, so that the same clean-up runs
    (the report's kernel stopped, the work folder removed, the previous report untouched)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


_RECEIVED: list = []   # the stop signals the running command received (its main thread's handlers record them)


def _raise_terminated(signum, frame):
    _RECEIVED.append(signum)
    raise Terminated(signum)


def _raise_interrupt(signum, frame):
    _RECEIVED.append(signum)
    raise KeyboardInterrupt


def received_signal() -> int | None:
    """The first stop signal the running command received (None: none): an error raised after it is most likely the
    interruption itself, turned into another exception on its way (a KeyboardInterrupt inside the import of an
    extension module comes out as an ImportError)."""
    return _RECEIVED[0] if _RECEIVED else None


def handle_termination():
    """Handle SIGTERM and SIGHUP as an interruption (:class:`Terminated`) while a command runs, and record SIGINT
    (main thread only). Returns what :func:`restore` needs."""
    if threading.current_thread() is not threading.main_thread():
        return None
    _RECEIVED.clear()
    previous = {}
    for name, handler in (("SIGTERM", _raise_terminated), ("SIGHUP", _raise_terminated),
                          ("SIGINT", _raise_interrupt)):
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, handler)
    previous["unraisablehook"] = sys.unraisablehook
    sys.unraisablehook = _quiet_interruption(sys.unraisablehook)
    return previous


def _quiet_interruption(hook):
    """``sys.unraisablehook`` that does not print the interruption itself when it is raised where Python can only
    ignore it (a weak reference's callback inside an import, a ``__del__``): the run is stopping anyway - by its
    own clean-up or, the interruption swallowed, by the watchdog a second later - and a traceback would be noise."""

    def quiet(unraisable):
        if _RECEIVED and isinstance(unraisable.exc_value, KeyboardInterrupt):
            return
        hook(unraisable)

    return quiet


def restore(previous) -> None:
    previous = dict(previous or {})
    hook = previous.pop("unraisablehook", None)
    if hook is not None:
        sys.unraisablehook = hook
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def stop_message(signum: int, out=None) -> str:
    """The one line a stopped ``vrs`` prints (``out``: the report folder whose previous report is unchanged)."""
    kept = f"; the previous report in {out} (if any) is unchanged" if out else ""
    what = "interrupted" if signum == signal.SIGINT else "terminated"
    return f"{what}{kept}."


# The watchdog: a small process of its own (the standard library only), so that it acts while this process is inside
# a call into C that holds the interpreter's lock (a thread of this process could not run then). Its arguments: this
# process's id, the grace in seconds, the file descriptors of the wake-up pipe and of the control pipe.
_HELPER = r"""
import json, os, select, shutil, signal, stat, sys, time
parent, grace, wake, control = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
stops = {int(s) for s in sys.argv[5].split(",")}
actions, critical, said, signum, deadline, pending = {}, 0, False, None, None, b""

def children(pid):
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    text = handle.read().decode("ascii", "replace")
            except OSError:
                continue
            fields = text[text.rfind(")") + 2:].split()
            if len(fields) > 1 and fields[1] == str(pid):
                found.append(int(entry))
    return found

def clean(kind, *args):
    if kind == "unlink":
        path, dev, ino = args
        info = os.lstat(path)
        if (info.st_dev, info.st_ino) == (dev, ino):
            os.unlink(path)
    elif kind == "rmdir":
        for path in args:
            os.rmdir(path)
    elif kind == "sweep":
        folder, prefixes, pid, uid = args
        for entry in os.scandir(folder):
            if any(entry.name.startswith(f"{p}{pid}-") for p in prefixes):
                info = entry.stat(follow_symlinks=False)
                if uid is not None and info.st_uid != uid:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)

def state(pid):   # (state letter, start time) of a process, or None when it is gone
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().decode("ascii", "replace").rsplit(") ", 1)[1].split()
        return fields[0], fields[19]
    except (OSError, IndexError):
        return None

def after_exit():   # it ended by itself after the signal: once it is gone, its children still alive (a kernel
    # still starting) are killed and its files in the temporary folder removed (a thread may have written one late)
    limit = time.monotonic() + 10
    while time.monotonic() < limit and (state(parent) or ("Z",))[0] not in "ZX":
        time.sleep(0.02)
    for pid, started in kids.items():
        if (state(pid) or (None, None))[1] == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    time.sleep(0.05)
    for step in sweeps:
        try:
            clean(*step)
        except Exception:
            pass

def force():
    try:
        os.kill(parent, signal.SIGSTOP)   # it writes nothing more while its clean-up is done here
    except OSError:
        return
    for pid in children(parent):
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for action in list(actions.values())[::-1]:
        for step in action:
            try:
                clean(*step)
            except Exception:
                pass
    if not said and messages.get(signum):
        try:
            os.write(2, messages[signum].encode("utf-8", "replace"))
        except OSError:
            pass
    try:   # its handler was reset by the first signal (SA_RESETHAND): the same signal now ends it as it would have
        os.kill(parent, signum)
        os.kill(parent, signal.SIGCONT)
        for _ in range(50):
            time.sleep(0.01)
            if (state(parent) or ("Z",))[0] in "ZX":
                return
        os.kill(parent, signal.SIGKILL)
    except Exception:
        pass

messages, kids, sweeps = {}, {}, []
while True:
    wait = 1.0 if signum is None else max(0.0, min(0.02, deadline - time.monotonic()))
    ready = select.select([wake, control], [], [], wait)[0]
    if wake in ready:
        data = os.read(wake, 64)
        got = [b for b in data if b in stops]
        if got and signum is None:
            signum, deadline = got[0], time.monotonic() + grace
    if control in ready:
        data = os.read(control, 65536)
        if not data:   # the command ended (or its process is gone)
            if signum is not None:
                after_exit()
            sys.exit(0)
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            kind, _, rest = line.decode("utf-8", "replace").partition(" ")
            if kind == "add":
                key, _, spec = rest.partition(" ")
                actions[key] = [tuple(step) for step in json.loads(spec)]
                sweeps += [step for step in actions[key] if step[0] == "sweep" and step not in sweeps]
            elif kind == "del":
                actions.pop(rest, None)
            elif kind == "critical":
                critical += int(rest)
            elif kind == "said":
                said = True
            elif kind == "message":
                number, _, text = rest.partition(" ")
                messages[int(number)] = json.loads(text)
    if signum is not None:   # its children, to be killed if it ends by itself and leaves them running
        kids.update({pid: started for pid in children(parent) if pid != os.getpid()
                     for started in [(state(pid) or (None, None))[1]] if started})
    if signum is not None and time.monotonic() >= deadline and (critical <= 0 or time.monotonic() > deadline + 30):
        force()
        sys.exit(0)
"""


def _reset_on_delivery(signums) -> bool:
    """Make each of ``signums``' handlers (Python's, installed before) one-shot at the C level (``SA_RESETHAND``,
    glibc's ``sysv_signal``): the first signal runs Python's handler as before, a second one - the watchdog's, or the
    user's - ends the process the way the signal does by default (SIGTERM: exit status 143). False where this cannot
    be done (the watchdog then ends the process with SIGKILL)."""
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        install, one_shot = libc.signal, libc.sysv_signal
    except (OSError, AttributeError):
        return False
    for function in (install, one_shot):
        function.restype, function.argtypes = ctypes.c_void_p, [ctypes.c_int, ctypes.c_void_p]
    error = (1 << (8 * ctypes.sizeof(ctypes.c_void_p))) - 1   # SIG_ERR
    ok = True
    for signum in signums:
        current = install(int(signum), 1)   # SIG_IGN for an instant, to learn the address of Python's handler
        if current in (None, 0, 1, error):
            install(int(signum), current if current not in (None, error) else 0)
            ok = False
        elif one_shot(int(signum), current) == error:
            install(int(signum), current)
            ok = False
    return ok


def _close_in_child() -> None:
    """After a fork (a worker of a process pool), the child does not report its signals to the parent's watchdog."""
    for watchdog in _ACTIVE:
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(-1)
        for fd in watchdog.fds:
            with contextlib.suppress(OSError):
                os.close(fd)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


class Watchdog:
    """Ends the process ``grace`` seconds after a stop signal (SIGINT, SIGTERM, SIGHUP) if it has not ended by
    itself (module docstring): a helper process learns of the signal from the interpreter's wake-up pipe, and then
    stops this process, kills its children (the report's kernel), does the clean-ups registered with
    :meth:`on_forced_exit`, prints ``message(signum)`` and ends it with the signal (exit status 128 + its number).
    Use as a context manager in the main thread; elsewhere, or where the wake-up pipe is taken, it does nothing."""

    def __init__(self, message=None, grace: float = 1.0):
        self.message = message or (lambda signum: stop_message(signum))
        self.grace = grace
        self.fds: list[int] = []
        self._control = None
        self._helper = None
        self._keys = 0

    def __enter__(self) -> Watchdog:
        if (threading.current_thread() is not threading.main_thread() or not hasattr(signal, "set_wakeup_fd")
                or os.name != "posix"):
            return self
        import subprocess

        wake_r, wake_w = os.pipe()
        control_r, control_w = os.pipe()
        os.set_blocking(wake_w, False)
        try:
            previous = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        except (ValueError, OSError):
            previous = None
        if previous != -1:   # somebody else's (an event loop's): leave it to them
            if previous is not None:
                signal.set_wakeup_fd(previous)
            for fd in (wake_r, wake_w, control_r, control_w):
                os.close(fd)
            return self
        try:
            self._helper = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _HELPER, str(os.getpid()), str(self.grace), str(wake_r),
                 str(control_r), ",".join(str(int(s)) for s in STOP_SIGNALS)],
                pass_fds=(wake_r, control_r), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        except OSError:
            signal.set_wakeup_fd(-1)
            for fd in (wake_r, wake_w, control_r, control_w):
                os.close(fd)
            return self
        os.close(wake_r)
        os.close(control_r)
        self.fds = [wake_w, control_w]
        self._control = control_w
        _reset_on_delivery(STOP_SIGNALS)
        _ACTIVE.append(self)
        for signum in STOP_SIGNALS:
            self._send(f"message {int(signum)} {json.dumps(console_text(self.message(signum)) + chr(10))}")
        return self

    def __exit__(self, *exc) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self._helper is None:
            return
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(-1)
        for signum in STOP_SIGNALS:   # the handlers as Python installs them again (not one-shot)
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signum, signal.getsignal(signum))
        for fd in self.fds:   # the helper sees the control pipe close and exits (after a stop: once we are gone)
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds, self._control = [], None
        self._helper.poll()   # it exits by itself (no wait: it may still be starting); reaped by subprocess later
        self._helper = None

    def _send(self, line: str) -> None:
        if self._control is not None:
            with contextlib.suppress(OSError):
                os.write(self._control, (line + "\n").encode("utf-8"))

    @contextlib.contextmanager
    def on_forced_exit(self, *actions):
        """Within the block, the helper does ``actions`` if it has to end the process: ``("unlink", path, dev,
        ino)`` - remove ``path`` if it is still that file; ``("rmdir", path, ...)`` - remove these empty folders, in
        order; ``("sweep", folder, prefixes, pid, uid)`` - remove the entries of ``folder`` named ``PREFIX<pid>-...``
        and owned by ``uid``."""
        self._keys += 1
        key = str(self._keys)
        self._send(f"add {key} {json.dumps([list(a) for a in actions])}")
        try:
            yield
        finally:
            self._send(f"del {key}")

    @contextlib.contextmanager
    def critical(self):
        """A section that must not be cut in two (a few renames): a forced exit waits for its end."""
        self._send("critical 1")
        try:
            yield
        finally:
            self._send("critical -1")

    def said(self) -> None:
        self._send("said")


def on_forced_exit(*actions):
    """:meth:`Watchdog.on_forced_exit` of the running command's watchdog (a block that does nothing without one)."""
    return _ACTIVE[-1].on_forced_exit(*actions) if _ACTIVE else contextlib.nullcontext()


def critical():
    """:meth:`Watchdog.critical` of the running command's watchdog (a block that does nothing without one)."""
    return _ACTIVE[-1].critical() if _ACTIVE else contextlib.nullcontext()


def said() -> None:
    """The main thread printed the stop message itself: a forced exit does not print it again."""
    for watchdog in _ACTIVE:
        watchdog.said()
