"""The Jupyter kernels the notebook runner executes workbooks in.

- :func:`kernel_manager_class` - the kernel manager :func:`vrs_helpers.app.runner.run_notebook` hands to papermill:
  local IPC sockets instead of TCP on POSIX;
- :class:`PrestartedKernel` - a kernel started ahead of a run in a background thread, with the notebook's modules
  imported, so that the kernel's start (about 2 s) and those imports (about 3 s: pandas, matplotlib, scipy) overlap
  with what the caller does meanwhile: ``vrs analyze`` reads and checks the score table before the report notebook
  can start;
- :func:`report_kernel` - the kernel of ``vrs analyze``'s report, started before anything else;
- :func:`engine_name` - the papermill engine runs use: papermill's nbclient engine writing the executed notebook
  once, at the end of the run;
- :func:`notebook_imports` - the modules a notebook's code cells import at their top level (what to preload).
"""

from __future__ import annotations

import ast
import contextlib
import os
import subprocess
import threading
from pathlib import Path

from .publish import KERNEL_PREFIX, work_dir

ANALYZE_NOTEBOOK = "07_your_evaluation.ipynb"   # the workbook `vrs analyze` runs as its report
LOGS_NOTEBOOK = "09_your_logs.ipynb"   # the workbook `vrs analyze LOGDIR` runs as its report
KERNEL_NAME = "python3"  # resolved by jupyter_client to the interpreter that runs `vrs`, so any venv works
# what nbclient passes to a kernel it starts itself: the IPython history in memory, no sqlite file per run
KERNEL_ARGUMENTS = ["--HistoryManager.hist_file=:memory:"]
IPC_PATH_MAX = 100   # a Unix socket's path has at most 107 bytes (sockaddr_un); ours end in "-N" (the channel)


def _thread_loop():
    """The event loop set for this thread (None if none; asyncio has no public way to ask without making one)."""
    import asyncio

    return getattr(getattr(asyncio.get_event_loop_policy(), "_local", None), "_loop", None)


@contextlib.contextmanager
def closing_event_loop():
    """Within the block, jupyter_core's ``run_sync`` (papermill, nbclient, a kernel's shutdown) may make an event loop
    for this thread and keep it: an epoll and a socket pair (3 file descriptors) left open in every process that runs
    reports one after another (issue 50). At the end a loop made in the block is closed and the thread's previous
    loop (usually none) set again; a loop the caller had is left alone."""
    import asyncio

    before = _thread_loop()
    try:
        yield
    finally:
        made = _thread_loop()
        if made is not None and made is not before and not made.is_running():
            made.close()
            asyncio.set_event_loop(before)


def kernel_manager_class():
    """A kernel manager that talks to the kernel over local IPC sockets instead of TCP: no network ports, and no
    "Kernel is running over TCP without encryption" warning on every run (POSIX only; elsewhere jupyter_client's
    AsyncKernelManager)."""
    from jupyter_client.manager import AsyncKernelManager

    if os.name != "posix":
        return AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            import tempfile
            import uuid

            # a unique socket path per kernel: parallel runs (vrs batch) in one folder must not share sockets;
            # the sockets and the connection file carry this process's id, so that a run killed before it could
            # remove them is swept by the next one (app/publish.sweep_stale)
            base = os.path.join(tempfile.gettempdir(), f"{KERNEL_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}")
            kwargs.setdefault("connection_file", f"{base}.json")
            if len(base) + 3 <= IPC_PATH_MAX:
                kwargs.setdefault("transport", "ipc")
                kwargs.setdefault("ip", base)
            # else a TMPDIR too deep for a socket path (107 bytes on Linux): loopback TCP, jupyter_client's default
            super().__init__(**kwargs)

        async def _async_interrupt_kernel(self):
            # jupyter_client interrupts a kernel before asking it to shut down; a kernel in a message handler then
            # logs "ERROR | KeyboardInterrupt caught in kernel" on the run's stderr although nothing went wrong.
            # A kernel asked to stop after its run is not interrupted (a busy one is still stopped: by a signal
            # after jupyter_client's shutdown wait); interrupts at other times (nbclient's cell timeout) are kept.
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()

    return IPCKernelManager


def notebook_imports(notebook: str | os.PathLike) -> list[str]:
    """The modules the code cells of ``notebook`` import at their top level (``import a.b``, ``from a.b import c``;
    relative imports and cells that do not parse - IPython magics - are skipped), in order, each once."""
    import json

    # the notebook's JSON read directly: nbformat's import (jsonschema) would delay the kernel's start
    with open(notebook, encoding="utf-8") as f:
        cells = json.load(f).get("cells", [])
    found: dict[str, None] = {}
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        try:
            body = ast.parse(source if isinstance(source, str) else "".join(source)).body
        except SyntaxError:
            continue
        for node in body:
            if isinstance(node, ast.Import):
                found.update({a.name: None for a in node.names})
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found[node.module] = None
    return list(found)


_PRELOAD = """import importlib as _vrs_importlib
for _vrs_module in {modules!r}:
    try:
        _vrs_importlib.import_module(_vrs_module)
    except Exception:
        pass
del _vrs_importlib, _vrs_module
"""


class PrestartedKernel:
    """A kernel for :func:`vrs_helpers.app.runner.run_notebook` (its ``kernel`` argument), started now in a
    background thread in the folder ``cwd`` (the notebook's folder: run_notebook checks it), with the modules
    ``preload`` imported into it (silently, without an execution count: the notebook's cells are numbered from 1 as
    in a fresh kernel; a module that fails to import is left to the notebook, which reports it). The notebook's
    namespace is untouched: importing a module binds no name there.

    ``manager()`` waits for the start and returns the kernel manager; ``shutdown()`` stops the kernel (run_notebook
    starts stopping it after the run, in the background: ``shutdown()`` then waits for that; call it yourself when
    the run does not happen). A failed start is raised by ``manager()``."""

    def __init__(self, cwd: str | os.PathLike, preload=(), kernel_name: str = KERNEL_NAME, env: dict | None = None):
        self.cwd = Path(cwd).resolve()
        self.preload = list(preload)
        self.env = dict(env or {})   # added to the kernel's environment (vrs analyze: the hand-over key)
        self._manager = kernel_manager_class()(kernel_name=kernel_name)
        self._error: BaseException | None = None
        self._stopping: threading.Thread | None = None   # the thread that stops the kernel (shutdown)
        self._stop_error: BaseException | None = None
        self._stop_lock = threading.Lock()
        self._clients: list = []   # the clients made of its manager (nbclient's): their channels closed at the stop
        make_client = self._manager.client

        def client(*args, **kwargs):
            made = make_client(*args, **kwargs)
            self._clients.append(made)
            return made

        self._manager.client = client
        self._thread = threading.Thread(target=self._start, name="vrs-prestarted-kernel", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        import asyncio

        try:
            asyncio.run(self._async_start())
        except BaseException as exc:  # noqa: BLE001 - raised by manager(), in the caller's thread
            self._error = exc

    async def _async_start(self) -> None:
        # the kernel's own stderr is not the user's terminal: a kernel stopped while it starts (Ctrl-C, SIGTERM)
        # would print its start-up traceback after "interrupted; the previous report ... is unchanged"; its errors
        # reach the notebook through the kernel protocol, and a failed start raises in manager()
        await self._manager.start_kernel(cwd=str(self.cwd), extra_arguments=list(KERNEL_ARGUMENTS),
                                         env={**os.environ, **self.env}, stderr=subprocess.DEVNULL)

        async def refuse(*args, **kwargs):
            raise RuntimeError("the report's kernel was stopped (the run was interrupted); it is not started again")

        # started once: a run stopped (Ctrl-C, SIGTERM) shuts the kernel down while the report's thread may be
        # entering nbclient, which would start a new kernel in the work folder being removed (its start-up traceback
        # on the terminal, a process left behind)
        self._manager.start_kernel = refuse
        if not self.preload:
            return
        client = self._manager.client()
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=60)
            await client.execute_interactive(_PRELOAD.format(modules=tuple(self.preload)), silent=True,
                                             store_history=False, timeout=300)
        finally:
            client.stop_channels()

    def manager(self):
        """The started kernel's manager (waits for the start and the imports)."""
        self._thread.join()
        if self._error is not None:
            self.shutdown()
            raise RuntimeError(f"the kernel did not start: {self._error}") from self._error
        return self._manager

    def shutdown(self, now: bool = False, wait: bool = True) -> None:
        """Stop the kernel (waits for a start in progress first); a kernel already stopped is left alone.

        ``now``: stop its process at once instead of asking it to shut down (about 0.6 s for a kernel that holds
        10^6 rows): for a kernel whose work is done, nothing of which is kept. ``wait=False``: stop it in a
        background thread and return at once; a later ``shutdown()`` waits for that (and the interpreter waits for
        it at exit: the thread is not a daemon). The kernel is stopped once: a call while it is being stopped
        waits for (or leaves) that stop, whatever its ``now``."""
        with self._stop_lock:
            stopping = self._stopping
            if stopping is None:
                stopping = self._stopping = threading.Thread(target=self._stop, args=(now,), name="vrs-kernel-stop")
                stopping.start()
        if wait:
            stopping.join()
            if self._stop_error is not None:
                error, self._stop_error = self._stop_error, None
                raise error

    def _stop(self, now: bool) -> None:
        from jupyter_core.utils import run_sync

        self._thread.join()
        try:
            if self._manager.has_kernel:
                with closing_event_loop():
                    run_sync(self._manager.shutdown_kernel)(now=now)
        except BaseException as exc:  # noqa: BLE001 - raised by shutdown(), in the caller's thread
            self._stop_error = exc
        finally:
            # a client nbclient made of a manager it does not own keeps its heartbeat thread and sockets open (13
            # file descriptors and a thread per run in a process that runs reports one after another)
            for made in self._clients:
                try:
                    made.stop_channels()
                except Exception:  # noqa: BLE001 - already closed
                    pass
            self._clients.clear()
            try:
                self._manager.context.destroy(linger=0)
            except Exception:  # noqa: BLE001
                pass

    def __enter__(self) -> PrestartedKernel:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


def report_kernel(notebook: str = ANALYZE_NOTEBOOK) -> PrestartedKernel:
    """The kernel of ``vrs analyze``'s report (workbook 07, :data:`ANALYZE_NOTEBOOK`; of evaluation logs workbook 09,
    :data:`LOGS_NOTEBOOK`), started now in a fresh
    temporary folder (the report's work folder, ``kernel.cwd``) with the workbook's modules imported. The CLI
    starts it first, before it imports pandas and reads the data, so that the kernel's start overlaps with
    reading and checking them (:func:`vrs_helpers.app.runner.analyze_report`).

    The kernel gets a fresh random key in its environment (``kernel.handover_key``): the analysis made in this
    process reaches the report signed with it (:mod:`vrs_helpers.evaluate.handover`); it is never written to a file,
    a parameter or a notebook."""
    import secrets

    from ..evaluate.handover import KEY_ENV
    from ..resources import find_workbook

    key = secrets.token_hex(32)
    kernel = PrestartedKernel(work_dir(), preload=notebook_imports(find_workbook(notebook)),
                              env={KEY_ENV: key})
    kernel.handover_key = key
    return kernel


ENGINE = "vrs-nbclient"


def engine_name() -> str:
    """The name of the papermill engine for :func:`vrs_helpers.app.runner.run_notebook` (registered on first call):
    papermill's nbclient engine, except that the executed notebook is written once, when the run ends - also after
    a failure, with the traceback - instead of also before and after every cell (papermill's default: 60 writes of a
    growing notebook for workbook 07, about 0.5 s between its cells on 10^6 rows)."""
    from papermill.engines import NBClientEngine, NotebookExecutionManager, papermill_engines
    from papermill.exceptions import PapermillException

    try:
        papermill_engines.get_engine(ENGINE)
        return ENGINE
    except PapermillException:   # not registered yet
        pass

    class FinalWriteManager(NotebookExecutionManager):
        def save(self, **kwargs):
            if kwargs.get("nb") is not None:
                self.nb = kwargs["nb"]
            if self.end_time is not None:   # set by notebook_complete, which every run reaches (finally)
                super().save()

    class FinalWriteEngine(NBClientEngine):
        @classmethod
        def execute_notebook(cls, nb, kernel_name, output_path=None, progress_bar=True, log_output=False,
                             autosave_cell_every=30, **kwargs):
            manager = FinalWriteManager(nb, output_path=output_path, progress_bar=progress_bar,
                                        log_output=log_output, autosave_cell_every=0)
            manager.notebook_start()
            try:
                cls.execute_managed_notebook(manager, kernel_name, log_output=log_output, **kwargs)
            finally:
                manager.cleanup_pbar()
                manager.notebook_complete()
            return manager.nb

    papermill_engines.register(ENGINE, FinalWriteEngine)
    return ENGINE
