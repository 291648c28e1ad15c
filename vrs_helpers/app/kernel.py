"""The Jupyter kernels the notebook runner executes workbooks in (``vrs run``, ``vrs reproduce``, ``vrs batch``;
``vrs analyze`` starts none unless ``--execute``).

- :func:`kernel_manager_class` - the kernel manager :func:`vrs_helpers.app.runner.run_notebook` hands to papermill:
  local IPC sockets instead of TCP on POSIX;
- :func:`engine_name` - the papermill engine runs use: papermill's nbclient engine writing the executed notebook
  once, at the end of the run;
- :func:`closing_event_loop` - the event loop a run made for its thread, closed when the run ends.
"""

from __future__ import annotations

import contextlib
import os

from .publish import KERNEL_PREFIX

KERNEL_NAME = "python3"  # resolved by jupyter_client to the interpreter that runs `vrs`, so any venv works
# what a kernel started by nbclient gets: the IPython history in memory, no sqlite file per run
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
