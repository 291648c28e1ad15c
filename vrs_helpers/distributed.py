"""Beyond one machine: mixed-model statistics, notebook grids and resampling batches on a Dask cluster.

Optional: ``pip install 'vrs-workbooks[dask]'`` (``dask[dataframe]`` and ``distributed``). Nothing here imports
Dask at module level, so the rest of the package works without it.

- :func:`accumulate_dask` - ``mixed.fit(formula, ddf)`` with a ``dask.dataframe.DataFrame``: one
  :class:`~vrs_helpers.mixed.partial.PartialStats` per partition on the workers, merged in a tree in partition
  order (deterministic: the same rows give the same level order and sums as a local pass over the partitions in
  order), finalized on the client. Workers that die are replaced and their tasks recomputed by the scheduler.
- :func:`run_grid` - ``vrs batch GRID --dask ADDRESS``: each notebook execution is a task (papermill on a
  worker); the executed notebook comes back to the client, which writes it atomically as soon as it arrives, so
  an interrupted batch keeps its finished runs and a re-run skips them.
- :func:`resampling_test` - the batches of a bootstrap or permutation test mapped to workers; the p-value equals
  the local one for the same seed (the batches are seeded independently of where they run).
- :func:`connect` - a client for an address, ``"local"`` (a LocalCluster) or an existing client; an address that
  does not answer is an error within ``timeout`` seconds.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

INSTALL_HINT = "pip install 'vrs-workbooks[dask]'"


class DaskUnavailableError(ImportError):
    """Dask is not installed; the message says how to install it."""


class DaskConnectionError(ConnectionError):
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


def _identity(x):
    return x


def _default_client():
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


# ------------------------------------------------------------------------------------------- mixed models

def _partition_partial(df, formula: str, dropna: bool, label: str, kinds: dict):
    """Partial statistics of one partition, after checking its columns against the dataset's schema."""
    from .mixed.errors import MixedModelError
    from .mixed.partial import column_kind, partial

    missing = [c for c in kinds if c not in df.columns]
    if missing:
        raise MixedModelError(f"{label} has no column(s) {missing} (its columns: {list(df.columns)}); every "
                              f"partition must have the dataset's columns.")
    for c, kind in kinds.items():
        if column_kind(df[c]) != kind:
            raise MixedModelError(f"{label}: column {c!r} has dtype {df[c].dtype} ({column_kind(df[c])}) but is "
                                  f"{kind} in the dataset's schema; every partition must give a column the same "
                                  f"type. Cast it before fitting (e.g. ddf[{c!r}].astype(...)).")
    return partial(formula, df, dropna=dropna, label=label)


def _merge(*parts):
    from .mixed.partial import merge_all

    return merge_all(list(parts))


def _describe(df) -> tuple[list, dict]:
    from .mixed.partial import column_kind

    return list(df.columns), {c: f"{df[c].dtype} ({column_kind(df[c])})" for c in df.columns}


def _diagnose(ddf, needed: list[str], client=None) -> str | None:
    """Which partition cannot be read or differs from the first in its columns or column kinds (error path)."""
    import dask

    parts = ddf.to_delayed()
    tasks = [dask.delayed(_describe)(p) for p in parts]
    desc: list = []
    if client is not None:
        from distributed import wait

        futures = client.compute(tasks)
        wait(futures)
        desc = [f.exception() if f.status == "error" else f.result() for f in futures]
    else:
        for t in tasks:
            try:
                desc.append(t.compute())
            except Exception as exc:  # noqa: BLE001 - reported with the partition's number
                desc.append(exc)
    n = len(parts)
    for i, d in enumerate(desc):
        if isinstance(d, BaseException):
            return f"partition {i} of {n} cannot be read with the dataset's columns ({type(d).__name__}: {d})"
    cols0, kinds0 = desc[0]
    for i, (cols, kinds) in enumerate(desc):
        lost = [c for c in needed if c in cols0 and c not in cols]
        if lost:
            return f"partition {i} of {n} has no column(s) {lost} (partition 0 has them)"
        for c in needed:
            if c in kinds and c in kinds0 and kinds[c].split(" ")[-1] != kinds0[c].split(" ")[-1]:
                return f"partition {i} of {n}: column {c!r} is {kinds[c]}, in partition 0 {kinds0[c]}"
    return None


def accumulate_dask(formula, ddf, dropna: bool = False, split_every: int = 4, client=None):
    """The :class:`~vrs_helpers.mixed.SufficientStats` of a dask DataFrame, computed on the cluster.

    Per partition a :class:`~vrs_helpers.mixed.partial.PartialStats` (keyed by level labels), merged
    ``split_every`` at a time in partition order, finalized on the client: the result equals
    ``mixed.accumulate`` over the partitions in order up to floating-point summation. Uses ``client`` or the
    default client (else dask's local scheduler). Only the model's columns are read (projection).
    """
    require_dask()
    import dask

    from .formula import parse
    from .mixed.accumulate import _check_columns
    from .mixed.errors import MixedModelError
    from .mixed.partial import column_kind

    f = parse(formula) if isinstance(formula, str) else formula
    needed = list(dict.fromkeys([f.response] + f.fixed_variables + f.random_variables + f.random_covariates))
    meta = ddf._meta
    _check_columns(meta, needed)
    kinds = {c: column_kind(meta[c]) for c in needed}
    parts = ddf[needed].to_delayed()
    npart = len(parts)
    text = formula if isinstance(formula, str) else f
    level = [dask.delayed(_partition_partial, pure=True)(p, text, dropna, f"partition {i} of {npart}", kinds)
             for i, p in enumerate(parts)]
    split_every = max(2, int(split_every))
    while len(level) > 1:  # deterministic tree: consecutive groups, merged left to right
        level = [dask.delayed(_merge, pure=True)(*level[i:i + split_every]) if len(level[i:i + split_every]) > 1
                 else level[i] for i in range(0, len(level), split_every)]
    client = client or _default_client()
    try:
        merged = client.compute(level[0]).result() if client is not None else level[0].compute()
    except MixedModelError:
        raise
    except (KeyError, ValueError, TypeError) as exc:
        where = _diagnose(ddf, needed, client)
        if where:
            raise MixedModelError(f"Inconsistent partitions: {where}. Every partition must have the same columns "
                                  f"with the same types.") from exc
        raise
    return merged.finalize()


# ------------------------------------------------------------------------------------------- notebook grids

def _run_remote(notebook: str, source: bytes, params: dict, output_name: str) -> dict:
    """On a worker: execute the notebook with papermill in a scratch folder; return the executed notebook."""
    import tempfile

    from .runner import run_notebook

    with tempfile.TemporaryDirectory(prefix="vrs-batch-") as tmp:
        nb = Path(notebook)
        if not nb.is_file():  # no shared file system: run the copy sent by the client
            nb = Path(tmp) / Path(notebook).name
            nb.write_bytes(source)
        res = run_notebook(nb, params, out_dir=Path(tmp) / "out", html_dir=None, output_name=output_name,
                           raise_on_error=False)
        data = res.output.read_bytes() if res.output.exists() else b""
    return {"notebook": res.notebook, "parameters": res.parameters, "scorecard": res.scorecard,
            "scalars": res.scalars, "error": res.error, "ipynb": data}


def finished(path: Path) -> bool:
    """An executed notebook that ran through: it exists, reads, and no cell has an error output."""
    if not path.is_file():
        return False
    try:
        import nbformat

        nb = nbformat.read(str(path), as_version=4)
    except Exception:  # noqa: BLE001 - an unreadable (partial) file is not a finished run
        return False
    return not any(o.get("output_type") == "error" for c in nb.cells for o in c.get("outputs", []))


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def run_grid(notebook: str | os.PathLike, combos: list[dict], out_dir: str | os.PathLike, output_names: list[str],
             address="local", retries: int = 2, progress: bool = True) -> list:
    """Execute ``notebook`` once per parameter combination as tasks on a Dask cluster (see the module docstring).

    ``output_names[i]`` is the file of combination i in ``out_dir``. Runs whose output already exists and ran
    through are not executed again (their results are read from the file). A task that raises (a lost worker, a
    kernel that died) is retried ``retries`` times; a notebook that fails in a cell is recorded as an error (its
    executed copy written, as ``vrs batch`` does) and executed again on the next run. Returns the
    :class:`~vrs_helpers.runner.RunResult` s in the order of ``combos``.
    """
    from tqdm.auto import tqdm

    from .runner import RunResult
    from .scorecard import extract

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    nb = Path(notebook)
    results: list = [None] * len(combos)
    todo = []
    for i, (c, name) in enumerate(zip(combos, output_names, strict=True)):
        path = out / name
        if finished(path):
            rows, scalars = extract(path)
            results[i] = RunResult(nb.name, path, None, c, rows, scalars, "")
        else:
            todo.append(i)
    if not todo:
        return results
    client = connect(address)
    own = not hasattr(address, "submit")
    try:
        from concurrent.futures import CancelledError

        from distributed import as_completed

        source = nb.read_bytes()
        src = client.submit(_identity, source, pure=False)  # not scattered: recomputable when its worker dies
        tries = {i: 0 for i in todo}

        def submit(i):
            return client.submit(_run_remote, str(nb.resolve()), src, combos[i], output_names[i], retries=retries,
                                 pure=False, key=f"vrs-batch-{output_names[i]}-{uuid.uuid4().hex}")

        futures = {submit(i): i for i in todo}
        pending = as_completed(list(futures))
        with tqdm(total=len(todo), desc="combinations", disable=not progress) as bar:
            for fut in pending:
                i = futures.pop(fut)
                try:
                    r = fut.result()
                except CancelledError:  # lost by the scheduler (e.g. with its worker): submitted again
                    tries[i] += 1
                    if tries[i] > retries:
                        raise
                    new = submit(i)
                    futures[new] = i
                    pending.add(new)
                    continue
                path = out / output_names[i]
                if r["ipynb"]:
                    _write_atomic(path, r["ipynb"])
                results[i] = RunResult(r["notebook"], path, None, r["parameters"], r["scorecard"], r["scalars"],
                                       r["error"])
                bar.update()
    finally:
        if own:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None and address in (None, "", "local"):
                cluster.close()
    return results


# ------------------------------------------------------------------------------------------- resampling

def _draw_batches(plan, indices: list[int]):
    import numpy as np

    return np.concatenate([plan.draw(i) for i in indices])


def resampling_test(kind: str, a, b, metric="mean", n_resamples: int = 10_000, seed: int = 0,
                    alternative: str = "two-sided", client=None, tasks: int | None = None):
    """A ``"permutation"`` or ``"bootstrap"`` test whose seeded batches run as tasks on a Dask cluster.

    The plan (:func:`~vrs_helpers.significance.permutation_plan` / ``bootstrap_plan``) is sent to the workers
    once; ``tasks`` groups of consecutive batches (default: two per worker) are drawn there and concatenated on the
    client in batch order, so the p-value equals :func:`~vrs_helpers.significance.permutation_test` /
    ``bootstrap_test`` for the same seed. ``client``: a Client, an address or "local" (default: the current
    client).
    """
    from .significance import SignificanceError, bootstrap_plan, permutation_plan

    if kind not in ("permutation", "bootstrap"):
        raise SignificanceError(f"kind must be 'permutation' or 'bootstrap', got {kind!r}.")
    plan = (permutation_plan if kind == "permutation" else bootstrap_plan)(a, b, metric, n_resamples, seed,
                                                                          alternative)
    require_dask()
    own = client is None and _default_client() is None
    c = connect("local") if own else connect(client or _default_client())
    try:
        nb = len(plan.batches)
        tasks = max(1, min(nb, tasks or 2 * max(1, len(c.scheduler_info().get("workers", {})))))
        bounds = [round(j * nb / tasks) for j in range(tasks + 1)]
        groups = [list(range(bounds[j], bounds[j + 1])) for j in range(tasks) if bounds[j + 1] > bounds[j]]
        remote = c.submit(_identity, plan, pure=False)  # not scattered: recomputable when its worker dies
        futures = c.map(_draw_batches, [remote] * len(groups), groups, pure=False, retries=2)
        import numpy as np

        dist = np.concatenate(c.gather(futures))
    finally:
        if own:
            cluster = getattr(c, "cluster", None)
            c.close()
            if cluster is not None:
                cluster.close()
    return plan.finish(dist)
