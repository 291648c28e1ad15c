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
    client = client if client is not None else _default_client()
    own = client is None or isinstance(client, str)  # a client made here is closed here
    c = connect(client if client is not None else "local")
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


# ------------------------------------------------------------------------------------------- vrs analyze

def analyze_dask(source, *, response: str, system: str | None, item: str, replications=(), properties=(),
                 baseline: str | None = None, out_dir="vrs-report", dropna: bool = False, alpha: float = 0.05,
                 n_resamples: int = 10_000, seed: int = 0, address="local", target_phi: float = 0.8,
                 max_runs: int = 1000) -> dict:
    """``vrs analyze DATA --dask ADDRESS``: workbook 07's tests on a Parquet dataset larger than memory.

    On the cluster: every mixed-model fit (both GLRT readings, the conditional GLRTs, the per-system variance
    components), the per-run table and the per-item means of each system (one pass each). On the client: the
    optimizer (on the merged statistics), contrasts, phi and the decision study, and the paired resampling tests
    (on the per-item means: one row per item; their batches run on the workers). Not produced: the notebook report
    (report.html / report.ipynb, whose figures need the rows in memory). Writes ``out_dir/summary.json`` (the keys
    of workbook 07's summary, plus ``"dask"``) and ``out_dir/summary.txt`` (the tables and the verdict).
    """
    import json

    import pandas as pd

    from . import mixed
    from .own_analysis import OwnAnalysis, _safe_names, _verdict
    from .own_data import InputError, _suggest
    from .reliability import phi
    from .significance import compare_systems

    require_dask()
    import dask.dataframe as dd

    path = Path(str(source))
    is_parquet = path.is_dir() or path.suffix.lower() in (".parquet", ".pq")
    if not path.exists() or not is_parquet:
        raise InputError(f"--dask reads a Parquet dataset (a .parquet file or a folder of them); got {source!r}. "
                         "Convert the table once (pandas.DataFrame.to_parquet) or run without --dask.")
    if not 0 < float(alpha) < 1:
        raise InputError(f"alpha must be between 0 and 1, got {alpha!r}.")
    replications = [replications] if isinstance(replications, str) else list(replications or [])
    properties = [properties] if isinstance(properties, str) else list(properties or [])
    client = connect(address)
    own = not hasattr(address, "submit")
    try:
        ddf = dd.read_parquet(str(path))
        roles = [("response", response), ("system", system), ("item", item)]
        roles += [("replication", r) for r in replications] + [("property", p) for p in properties]
        cols = list(ddf.columns)
        for role, c in roles:
            if c is not None and c not in cols:
                raise InputError(f"The {role} column {c!r} is not in the data.{_suggest(c, cols)} Columns: "
                                 f"{', '.join(map(str, cols))}.")
        used = list(dict.fromkeys(c for _, c in roles if c is not None))
        if not pd.api.types.is_numeric_dtype(ddf[response].dtype):
            raise InputError(f"The response {response!r} must be numeric (it has dtype {ddf[response].dtype}).")
        d = ddf[used]
        if dropna:
            d = d.dropna()
        names = _safe_names(used)
        back = {v: k for k, v in names.items()}
        d = d.rename(columns=names)
        if system is None:
            d = d.assign(_system="all")
            sy = "_system"
        else:
            sy = names[system]
        y, it = names[response], names[item]
        reps = [names[r] for r in replications]
        for c in [sy, it, *reps]:
            d[c] = d[c].astype(str)
        systems = sorted(d[sy].unique().compute())
        if baseline is not None:
            if str(baseline) not in systems:
                raise InputError(f"baseline {baseline!r} is not a level of {system!r}; levels: "
                                 f"{', '.join(systems)}.")
            systems = [str(baseline)] + [s for s in systems if s != str(baseline)]
        d[sy] = d[sy].astype(pd.CategoricalDtype(systems))
        d = d.persist()  # the validated columns stay on the workers for the fits below
        runs = d.groupby([sy, *reps], observed=True)[y].agg(["count", "mean", "std"]).compute().reset_index()
        runs = runs.rename(columns={**back, sy: system or "system", "count": "n", "std": "sd"})
        result = OwnAnalysis(response, system, item, replications, properties, systems, alpha, runs=runs)
        rename_back = lambda frame: frame.rename(columns=back)  # noqa: E731
        if len(systems) >= 2:
            result.comparison = compare_systems(d, y, sy, it)
            result.comparison.contrasts = rename_back(result.comparison.contrasts)
            estimable = [r for r in reps if (d.groupby(sy, observed=True)[r].nunique().compute() >= 2).any()]
            skipped = [back[r] for r in reps if r not in estimable]
            if skipped:
                result.notes.append(f"replication column(s) {skipped} have one level within every system: no "
                                    "run-level variance to estimate, left out of the random-effect reading")
            if estimable:
                result.comparison_random = compare_systems(d, y, sy, it, replications=estimable)
            for p in properties:
                pn = names[p]
                if pd.api.types.is_numeric_dtype(d[pn].dtype):
                    result.conditional[p] = compare_systems(d, y, sy, it, covariate=pn)
                else:
                    result.conditional[p] = compare_systems(d.assign(**{pn: d[pn].astype(str)}), y, sy, it,
                                                            by=pn)
                c = result.conditional[p]
                c.contrasts = rename_back(c.contrasts)
                if c.slopes is not None:
                    c.slopes = rename_back(c.slopes)
            means = d.groupby([sy, it], observed=True)[y].mean().compute().unstack(sy)
            rows = []
            for other in systems[1:]:
                pair = means[[systems[0], other]].dropna()
                a, b = pair[other].to_numpy(), pair[systems[0]].to_numpy()
                for name, kind in [("paired bootstrap", "bootstrap"), ("paired permutation", "permutation")]:
                    r = resampling_test(kind, a, b, n_resamples=n_resamples, seed=seed, client=client)
                    rows.append({"test": name, "system": other, "baseline": systems[0], "items": len(pair),
                                 "difference": r.observed, "p_value": r.p_value,
                                 "p_value_c_over_K": r.p_value_c_over_K, "n_resamples": r.n_resamples})
            result.paired = pd.DataFrame(rows)
        for s in systems:
            part = d[d[sy] == s]
            counts = part.groupby(it, observed=True)[y].count().max().compute()
            if counts < 2:
                result.notes.append(f"system {s} has one score per item (a single run): no variance components")
                continue
            levels = {r: int(part[r].nunique().compute()) for r in reps}
            reps_s = [r for r in reps if levels[r] >= 2]
            formula = f"{y} ~ 1 + (1|{it})" + "".join(f" + (1|{r})" for r in reps_s)
            try:
                fit = mixed.fit(formula, part, method="REML")
            except Exception as e:  # noqa: BLE001 - reported, the other systems still get their analysis
                result.notes.append(f"variance components of system {s}: {e}")
                continue
            vc = fit.variance_components.copy()
            vc.index = [":".join(back.get(n, n) for n in str(c).split(":")) for c in vc.index]
            result.variance_components[s] = vc
            n = {back[r]: float(levels[r]) for r in reps_s}
            result.reliability[s] = phi(vc, item, n=n)
            needed = {}
            for f in n:
                needed[f] = next((k for k in range(1, max_runs + 1)
                                  if phi(vc, item, n={**n, f: float(k)}).phi >= target_phi), None)
            result.runs_needed[s] = needed
    finally:
        if own:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()
    if result.comparison is not None:
        g = result.glrt
        result.verdict.append(f"Runs as replications clustered by item: the systems {_verdict(g.p_value, alpha)} "
                              f"(GLRT chi2 = {g.chi2:.2f}, df = {g.df}).")
        if result.comparison_random is not None:
            g2 = result.glrt_replications_random
            result.verdict.append(f"With a random effect per run, the systems {_verdict(g2.p_value, alpha)} "
                                  f"(chi2 = {g2.chi2:.2f}, df = {g2.df}).")
            if result.disagree:
                result.verdict.append("WARNING: the two readings disagree. The conclusion hinges on whether the "
                                      "runs are treated as fixed replications or as a sample of possible runs; "
                                      "with few runs and run-to-run variance, report both and add runs.")
        for p, c in result.conditional.items():
            result.verdict.append(f"Conditional on {p}: the system difference "
                                  f"{'depends' if c.glrt.p_value < alpha else 'shows no significant dependence'} "
                                  f"on it (p = {c.glrt.p_value:.3g}, df = {c.glrt.df}).")
    for s, r in result.reliability.items():
        more = "".join(f"; {k} level(s) of {f} would reach phi >= {target_phi}" if k else
                       f"; no number of levels of {f} up to {max_runs} reaches phi >= {target_phi}"
                       for f, k in (result.runs_needed.get(s) or {}).items())
        result.verdict.append(f"Reliability of {s}: phi = {r.phi:.3f} ({r.interpretation}){more}.")
    summary = result.to_summary()
    summary["dask"] = {"address": str(address), "local": "optimizer, contrasts, phi, decision study; no notebook "
                       "report (report.html needs the rows in memory)"}
    summary = json.loads(json.dumps(summary, default=lambda v: v.item() if hasattr(v, "item") else str(v)))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join([result.to_frame().to_string(index=False), "", *result.verdict, *result.notes]) + "\n"
    for name, content in [("summary.json", json.dumps(summary, indent=2)), ("summary.txt", text)]:
        _write_atomic(out / name, content.encode())
    return summary
