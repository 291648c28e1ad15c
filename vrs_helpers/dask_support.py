"""The optional Dask dependency: import check, clients, and what every Dask path of the package shares.

``pip install 'vrs-workbooks[dask]'`` (``dask[dataframe]`` and ``distributed``). Nothing here imports Dask at module
level, so the rest of the package works without it. The Dask paths live beside the jobs they serve:
:func:`vrs_helpers.mixed.structure.accumulate.accumulate_dask` (mixed-model statistics per partition),
:func:`vrs_helpers.book.significance.resampling_test_dask` (resampling batches on workers),
:func:`vrs_helpers.app.runner.run_grid_dask` (notebook grids), and ``vrs_helpers.evaluate.analysis.analyze(...,
backend=client)`` (``vrs analyze --dask``).
"""

from __future__ import annotations

from .errors import VRSError

INSTALL_HINT = "pip install 'vrs-workbooks[dask]'"


class DaskUnavailableError(VRSError, ImportError):
    """Dask is not installed; the message says how to install it."""


class DaskConnectionError(VRSError, ConnectionError):
    """No Dask scheduler answers at the address."""


def require_dask() -> None:
    """Raise :class:`DaskUnavailableError` (with the install command) unless dask.dataframe and distributed import."""
    try:
        import dask.dataframe  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as exc:
        raise DaskUnavailableError(f"Dask is not installed ({exc}). Install the optional extra: {INSTALL_HINT}") \
            from None


def is_dask_dataframe(obj) -> bool:
    """True for a ``dask.dataframe.DataFrame`` (checked without importing dask)."""
    mod = type(obj).__module__ or ""
    return mod.startswith("dask.") and hasattr(obj, "npartitions") and hasattr(obj, "to_delayed") \
        and hasattr(obj, "columns")


def connect(address="local", timeout: float = 8, n_workers: int | None = None, memory_limit="auto"):
    """A ``distributed.Client``: ``"local"`` starts a LocalCluster (processes), a string is a scheduler address
    (``tcp://host:8786``), a Client is returned as it is. An address that does not answer raises
    :class:`DaskConnectionError` after ``timeout`` seconds."""
    require_dask()
    from distributed import Client, LocalCluster

    if isinstance(address, Client):
        return address
    if address in (None, "", "local"):
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                               memory_limit=memory_limit)
        return Client(cluster)
    try:
        return Client(str(address), timeout=timeout)
    except (OSError, TimeoutError) as exc:
        raise DaskConnectionError(
            f"No Dask scheduler answers at {address!r} within {timeout:g} s ({exc}). Start one (`dask scheduler`, "
            f"dask_jobqueue.SLURMCluster, dask_kubernetes.KubeCluster) and pass its address, or use 'local'.") \
            from None


def identity(x):
    """Return x (a task that ships a value to a worker without scattering it)."""
    return x


def default_client():
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


NO_WORKERS_GRACE = 120.0   # seconds a computation waits on a cluster without a worker before it gives up


def wait_result(future, client, poll: float = 5.0, grace: float = NO_WORKERS_GRACE):
    """``future.result()``, except that a cluster left with no worker at all for ``grace`` seconds (every worker
    died and none came back: a scheduler's time limit, memory, a nanny that could not restart one) raises
    :class:`DaskConnectionError` saying so, instead of waiting for ever. A worker that dies while others live is
    Dask's to handle: its tasks are recomputed elsewhere."""
    import time

    from distributed import TimeoutError as DaskTimeout

    without = None
    while True:
        try:
            return future.result(timeout=poll)
        except (DaskTimeout, TimeoutError):
            if len(client.scheduler_info().get("workers", {})):
                without = None
                continue
            without = time.monotonic() if without is None else without
            if time.monotonic() - without > grace:
                raise DaskConnectionError(
                    f"The Dask cluster at {client.scheduler.address} has had no worker for {grace:g} s: every worker "
                    "died or was stopped and none came back. Restart the workers (or the cluster) and run again; "
                    "workers that run out of memory need more memory each or smaller partitions.") from None


def draw_batches(plan, indices):
    """On a worker: the draws of the batches ``indices`` of a seeded plan (``plan.draw(i)``), concatenated."""
    import numpy as np

    return np.concatenate([plan.draw(i) for i in indices])


def run_batches(plan, client, tasks: int | None = None, close: bool = False):
    """Every batch of a seeded resampling plan (``plan.batches``, ``plan.draw(i)``: the permutation and bootstrap
    tests of :mod:`vrs_helpers.book.significance`, the parametric bootstrap of
    :mod:`vrs_helpers.mixed.resampling.bootstrap`) drawn
    as tasks on a Dask cluster and concatenated on the client in batch order, so the draws equal drawing them here.

    The plan is sent to the workers once (not scattered: recomputable when its worker dies); ``tasks`` groups of
    consecutive batches (default two per worker) are drawn there, each retried twice. ``client``: a Client or an
    address (``connect``); ``close``: close that client (and its cluster) afterwards."""
    import numpy as np

    c = connect(client)
    try:
        nb = len(plan.batches)
        tasks = max(1, min(nb, tasks or 2 * max(1, len(c.scheduler_info().get("workers", {})))))
        bounds = [round(j * nb / tasks) for j in range(tasks + 1)]
        groups = [list(range(bounds[j], bounds[j + 1])) for j in range(tasks) if bounds[j + 1] > bounds[j]]
        remote = c.submit(identity, plan, pure=False)
        futures = c.map(draw_batches, [remote] * len(groups), groups, pure=False, retries=2)
        return np.concatenate(c.gather(futures))
    finally:
        if close:
            cluster = getattr(c, "cluster", None)
            c.close()
            if cluster is not None:
                cluster.close()
