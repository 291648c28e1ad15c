"""Execute workbooks reproducibly (papermill), export HTML, build the reproduction report, run grids."""

from __future__ import annotations

import itertools
import os
import re
import time
import uuid
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..errors import VRSError
from ..literal import console_text, read_back, to_csv
from .kernel import KERNEL_NAME, closing_event_loop, engine_name, kernel_manager_class
from .scorecard import COLUMNS, extract


class NotebookError(VRSError, RuntimeError):
    """A notebook failed to execute; the message names the notebook and the cell (``vrs`` exits 1)."""

    exit_code = 1


@dataclass
class RunResult:
    notebook: str
    output: Path
    html: Path | None
    parameters: dict
    scorecard: list[dict] = field(default_factory=list)
    scalars: dict = field(default_factory=dict)
    error: str = ""
    seconds: float = float("nan")  # wall-clock run time (execution and export)

    def __repr__(self) -> str:
        state = f"error: {self.error.splitlines()[0]}" if self.error else f"{len(self.scorecard)} checks"
        return f"RunResult({self.notebook!r}, {state})"


def _failure_message(name: str, exc: Exception) -> str:
    cell = getattr(exc, "exec_count", None)
    ename = getattr(exc, "ename", type(exc).__name__)
    evalue = getattr(exc, "evalue", str(exc))
    where = f"cell [{cell}]" if cell is not None else "an unnumbered cell"
    return f"notebook {name} failed in {where}: {ename}: {evalue}"


_PROGRESS = re.compile(r"\d+/\d+ \[[0-9:<]+|it/s\]|s/it\]")


def _progress_output(output) -> bool:
    """A progress bar on stderr (tqdm writes its bars, with timings, there), or what is left of one: the blank line
    or carriage returns of a bar that cleared itself (``leave=False``) or closed."""
    if output.get("output_type") != "stream" or output.get("name") != "stderr":
        return False
    text = output.get("text", "")
    return not text.strip() or bool(_PROGRESS.search(text))


def strip_volatile(nb) -> None:
    """Remove what changes from run to run without changing results: papermill timings, execution metadata, and
    progress bars with what is left of them (:func:`_progress_output`)."""
    nb.metadata.pop("papermill", None)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if cell.get("outputs"):
            cell.outputs = [o for o in cell.outputs if not _progress_output(o)]


def export_html(nb_path: Path, html_dir: Path, exclude_input: bool = False) -> Path:
    """Export an executed notebook to HTML that loads nothing from the internet (MathJax copied beside it,
    :func:`vrs_helpers.app.report.export_page`); ``exclude_input``: without the code (``vrs run --no-input``)."""
    from .report import export_page

    return export_page(nb_path, html_dir, exclude_input=exclude_input)


class ParameterError(VRSError, ValueError):
    """A parameter a notebook does not have, or a value of the wrong type (raised before anything runs)."""


def notebook_parameters(notebook: str | os.PathLike) -> dict:
    """The names and default values of a notebook's ``parameters`` cell (values that are not Python literals are
    reported as ``...``: their type is not checked)."""
    import ast

    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    cell = next((c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])), None)
    if cell is None:
        return {}
    out = {}
    for node in ast.parse(cell.source).body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    try:
                        out[t.id] = ast.literal_eval(node.value)
                    except (ValueError, SyntaxError):
                        out[t.id] = ...
    return out


def _type_name(value) -> str:
    return {bool: "true/false", int: "an integer", float: "a number", str: "text", list: "a list",
            dict: "a mapping"}.get(type(value), type(value).__name__)


def check_parameters(notebook: str | os.PathLike, parameters: dict) -> None:
    """Raise :class:`ParameterError` if a parameter is not in the notebook's ``parameters`` cell (with a
    did-you-mean) or its value does not have the type of the default (an integer is accepted for a number)."""
    import difflib

    defaults = notebook_parameters(notebook)
    name = Path(notebook).name
    for key, value in (parameters or {}).items():
        if key not in defaults:
            close = difflib.get_close_matches(key, list(defaults), n=1, cutoff=0.6)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ParameterError(f"{name} has no parameter {key!r}.{hint} Its parameters: {', '.join(defaults)}.")
        default = defaults[key]
        if default is ... or default is None or value is None:
            continue
        ok = (isinstance(value, bool) if isinstance(default, bool) else
              isinstance(value, int) and not isinstance(value, bool) if isinstance(default, int) else
              isinstance(value, (int, float)) and not isinstance(value, bool) if isinstance(default, float) else
              isinstance(value, type(default)))
        if not ok:
            raise ParameterError(f"{name}: parameter {key!r} must be {_type_name(default)} like its default "
                                 f"{default!r}; got {value!r} ({_type_name(value)}).")


def cell_progress_options(name: str, progress: bool | dict = True) -> dict | bool:
    """papermill's ``progress_bar`` argument for a per-cell bar named after the notebook: ``False`` for none; the
    bar disables itself when stderr is not a terminal (``disable=None``) and disappears when done (``leave=False``),
    so logs and CI output hold no bar. A dict overrides these tqdm options (e.g. ``position``, ``file``)."""
    if progress is False or progress is None:
        return False
    options = {"desc": console_text(name), "unit": "cell", "disable": None, "leave": False, "dynamic_ncols": True}
    if isinstance(progress, dict):
        options.update(progress)
    return options


def run_notebook(notebook: str | os.PathLike, parameters: dict | None = None, *,
                 out_dir: str | os.PathLike = "build/notebooks", html_dir: str | os.PathLike | None = "build/html",
                 output_name: str | None = None,
                 kernel_name: str = KERNEL_NAME, raise_on_error: bool = True,
                 progress: bool | dict = False, exclude_input: bool = False) -> RunResult:
    """Execute ``notebook`` with papermill (parameters injected after the ``parameters`` cell).

    The executed copy goes to ``out_dir``, an HTML export to ``html_dir``. The notebook runs with its own folder
    as working directory. A failure raises :class:`NotebookError` naming the notebook and the cell (the executed
    copy with the traceback is still written).

    ``progress=True`` shows a per-cell progress bar on stderr when stderr is a terminal (never in logs, CI or
    tests: tqdm disables itself elsewhere); a dict gives the bar's tqdm options (:func:`cell_progress_options`).
    ``exclude_input``: the HTML export without the code cells' inputs (the executed notebook keeps them).
    """
    return _run_notebook(notebook, parameters, out_dir, html_dir, output_name, kernel_name, raise_on_error,
                         progress, exclude_input)


def _run_notebook(notebook, parameters, out_dir, html_dir, output_name, kernel_name, raise_on_error, progress,
                  exclude_input) -> RunResult:
    import papermill as pm

    src = Path(notebook)
    if not src.is_file():
        raise ParameterError(f"No notebook at {src}.")
    parameters = dict(parameters or {})
    check_parameters(src, parameters)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / (output_name or src.name)
    error = ""
    started = time.perf_counter()
    try:
        with closing_event_loop():   # nbclient's loop for this thread: closed, not kept (3 descriptors a run)
            pm.execute_notebook(str(src), str(out), parameters=parameters, kernel_name=kernel_name,
                                engine_name=engine_name(), cwd=str(src.parent.resolve()), log_output=False,
                                progress_bar=cell_progress_options(src.name, progress),
                                kernel_manager_class=kernel_manager_class())
    except Exception as exc:  # papermill wraps kernel errors in PapermillExecutionError
        error = _failure_message(src.name, exc)
        if raise_on_error:
            raise NotebookError(error + f" (executed copy with the traceback: {out})") from exc
    if out.exists():
        import nbformat

        executed = nbformat.read(str(out), as_version=4)
        strip_volatile(executed)
        nbformat.write(executed, str(out))
    html_path = (export_html(out, Path(html_dir), exclude_input=exclude_input)
                 if html_dir is not None and out.exists() else None)
    rows, scalars = extract(out) if out.exists() else ([], {})
    return RunResult(src.name, out, html_path, parameters, rows, scalars, error,
                     seconds=time.perf_counter() - started)


def notebooks_in(folder: str | os.PathLike | None = None) -> list[Path]:
    """The workbooks in ``folder`` in order (names starting with two digits); default: the workbooks of this
    installation (:func:`vrs_helpers.resources.workbooks_dir`)."""
    from ..resources import workbooks

    return workbooks(folder)


def reproduce_runs(notebook: str | os.PathLike) -> list[dict]:
    """The parameter sets ``vrs reproduce`` runs a notebook with: ``metadata.vrs.reproduce_runs`` (a list of
    {parameter: value}) when a workbook covers several of the book's analyses, else one run with the defaults."""
    import nbformat

    meta = nbformat.read(str(notebook), as_version=4).metadata.get("vrs", {})
    runs = meta.get("reproduce_runs")
    return [dict(r) for r in runs] if runs else [{}]


def reproduce_jobs(notebooks: list[Path], defaults_only: bool = False) -> list[tuple[Path, dict, str | None]]:
    """The runs of ``vrs reproduce`` in report order: (notebook, parameters, output name or None for the notebook's
    own name), one per analysis a workbook lists (:func:`reproduce_runs`) unless ``defaults_only``."""
    jobs = []
    for nb in notebooks:
        for params in ([{}] if defaults_only else reproduce_runs(nb)):
            jobs.append((Path(nb), params, f"{Path(nb).stem}__{slug(params)}.ipynb" if params else None))
    return jobs


RUN_SECONDS = "run_seconds.csv"  # in the build folder: each run's wall time, the order of the next run's queue


def _queue_order(jobs: list, build: Path) -> list[int]:
    """Indices of ``jobs`` in the order to start them: longest first by the previous run's times
    (``build/run_seconds.csv``; the greedy schedule that keeps both cores busy to the end), runs without a time in
    report order ahead of them (so a new workbook is not left for last)."""
    try:
        known = read_back(pd.read_csv(build / RUN_SECONDS)).set_index("output")["seconds"].to_dict()
    except (OSError, ValueError, KeyError, pd.errors.ParserError):
        known = {}
    names = [name or nb.name for nb, _, name in jobs]
    unknown = [i for i, n in enumerate(names) if n not in known]
    timed = sorted((i for i, n in enumerate(names) if n in known), key=lambda i: -float(known[names[i]]))
    return unknown + timed


def _reproduce_one(notebook: str, params: dict, out_dir: str, output_name: str | None,
                   blas_threads: int | None, html_dir: str, api: bool) -> RunResult:
    """One run of ``vrs reproduce`` in a worker process, with its page of the report site
    (:func:`vrs_helpers.app.report.site_page`); ``blas_threads`` caps the kernel's BLAS threads (inherited through
    the environment) so that parallel runs share the cores instead of oversubscribing them."""
    from .report import site_page

    if blas_threads is not None:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(blas_threads)
    result = run_notebook(notebook, params, out_dir=out_dir, html_dir=None, output_name=output_name,
                          raise_on_error=False)
    site_page(result, html_dir, api)
    return result


def reproduce(notebooks: list[Path] | None = None, build_dir: str | os.PathLike = "build",
              progress: bool = True, defaults_only: bool = False, api: bool = True,
              workers: int | None = None) -> tuple[list[RunResult], pd.DataFrame]:
    """Execute all workbooks, then write ``build/scorecard.csv`` and the report site ``build/html/``
    (:func:`vrs_helpers.app.report.build_site`: ``index.html``, the notebook pages with MathJax served locally and,
    with ``api``, the API reference in ``api/``).

    A workbook that covers several of the book's analyses lists them in its metadata (:func:`reproduce_runs`) and
    is run once per analysis, unless ``defaults_only``. The runs are independent: ``workers`` of them (default: one
    per core) execute at a time, each in its own kernel with its share of the cores' BLAS threads, longest first by
    the previous run's times (``build/run_seconds.csv``). The results, the scorecard and the report keep the
    notebooks' order, whatever order the runs finish in. ``progress``: one bar over the runs on stderr when it is a
    terminal.

    Every notebook is run even when an earlier one fails; failures are reported in the index and in the
    returned results (``RunResult.error``). Each run's page is exported by its worker, and the API reference is
    written meanwhile (a thread of this process, which otherwise only waits).
    """
    import threading

    from tqdm import tqdm  # a text bar: no TqdmWarning in a kernel without ipywidgets

    from .report import API_DIR, build_api_docs, build_site, copy_mathjax

    build = Path(build_dir)
    notebooks = notebooks if notebooks is not None else notebooks_in()
    jobs = reproduce_jobs(notebooks, defaults_only)
    cores = os.cpu_count() or 1
    workers = max(1, min(int(workers or cores), len(jobs) or 1))
    threads = max(1, cores // workers) if workers > 1 else None
    out_dir, html_dir = build / "notebooks", build / "html"
    html_dir.mkdir(parents=True, exist_ok=True)
    copy_mathjax(html_dir)  # once, before the workers export pages beside it (two copies at once would collide)
    api_error: list[BaseException] = []
    api_dir = (html_dir / API_DIR).resolve()   # absolute: papermill changes the process' folder while it runs

    def api_docs():
        try:
            build_api_docs(api_dir)
        except BaseException as exc:  # noqa: BLE001 - raised below, in this thread
            api_error.append(exc)

    docs = threading.Thread(target=api_docs, daemon=True) if api else None
    results: list[RunResult | None] = [None] * len(jobs)
    with tqdm(total=len(jobs), desc="vrs reproduce", unit="run", disable=None if progress else True,
              dynamic_ncols=True) as bar:
        if workers == 1:
            if docs is not None:
                docs.start()
            for i in _queue_order(jobs, build):
                nb, params, name = jobs[i]
                bar.set_postfix_str(console_text(name or nb.name))
                results[i] = _reproduce_one(str(nb), params, str(out_dir), name, None, str(html_dir), api)
                bar.update()
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = {pool.submit(_reproduce_one, str(jobs[i][0]), jobs[i][1], str(out_dir), jobs[i][2],
                                       threads, str(html_dir), api): i for i in _queue_order(jobs, build)}
                if docs is not None:  # after the workers are forked: no thread is copied into them
                    docs.start()
                for fut in as_completed(futures):
                    i = futures[fut]
                    results[i] = fut.result()
                    bar.set_postfix_str(console_text(results[i].output.name))
                    bar.update()
    if docs is not None:
        docs.join()
        if api_error:
            raise api_error[0]
    card = pd.DataFrame([{c: row.get(c) for c in COLUMNS} for r in results for row in r.scorecard], columns=COLUMNS)
    build.mkdir(parents=True, exist_ok=True)
    to_csv(card, build / "scorecard.csv")
    to_csv(pd.DataFrame([{"output": r.output.name, "notebook": r.notebook, "parameters": slug(r.parameters),
                          "seconds": round(r.seconds, 2), "error": r.error} for r in results]), build / RUN_SECONDS)
    build_site(results, card, html_dir, api=api, pages=False, api_built=True)
    return results, card


# --------------------------------------------------------------------------------------------------- batch

def expand_grid(grid: dict) -> list[dict]:
    """Cartesian product of a {name: [values]} mapping (a scalar counts as a one-element list)."""
    if not grid:
        return [{}]
    keys = list(grid)
    lists = [v if isinstance(v, list) else [v] for v in grid.values()]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*lists)]


def slug(params: dict) -> str:
    text = "__".join(f"{k}-{v}" for k, v in params.items())
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)[:150] or "default"


def run_name(notebook, params: dict) -> str:
    """The file name of a run of ``notebook`` with ``params`` (``vrs batch``, ``vrs run -p``): the notebook's name,
    the parameters as far as a file name shows them (:func:`slug`, which maps ``"a b"``, ``"a/b"`` and ``"a_b"`` to
    one text and cuts long values), and a hash of the full parameter set (the first 10 hex digits of the SHA-256 of
    its JSON, keys sorted), so that different parameters never share a file (issue 50)."""
    import hashlib
    import json

    canonical = json.dumps(params, sort_keys=True, ensure_ascii=False, default=repr)
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:10]
    return f"{Path(notebook).stem[:80]}__{slug(params)[:100]}-{digest}.ipynb"


def check_unique_names(combos: list[dict], names: list[str], where) -> None:
    """Every combination of a grid has its own output file: a combination listed twice (a value repeated in a list)
    or, against all odds, two whose names collide is an error before anything runs."""
    seen: dict = {}
    for combo, name in zip(combos, names, strict=True):
        if name in seen:
            other = seen[name]
            why = ("lists the combination {} twice (a value repeated in a parameter's list?): give each value once"
                   .format(combo) if other == combo else
                   f"gives the combinations {other} and {combo} the same output name {name!r}: rename a value")
            raise ParameterError(f"{where}: the grid {why}.")
        seen[name] = combo


def _batch_one(notebook: str, params: dict, out_dir: str) -> RunResult:
    return run_notebook(notebook, params, out_dir=out_dir, html_dir=None, output_name=run_name(notebook, params),
                        raise_on_error=False)


def load_grid(path: str | os.PathLike) -> dict:
    """Read and check a grid file: ``notebook`` (path, relative to the file), ``parameters`` ({name: [values]})."""
    from .grid import check_grid, read_grid

    p = Path(path)
    spec = read_grid(p)   # a mapping of plain YAML values; a careless file is an error naming the line
    if "notebook" not in spec:
        raise ParameterError(f"{p}: the grid file needs a 'notebook' entry (path of the notebook to run).")
    nb = Path(spec["notebook"])
    if not nb.is_absolute():
        nb = (p.parent / nb).resolve()
    if not nb.is_file():
        raise ParameterError(f"{p}: notebook {spec['notebook']!r} not found (looked at {nb}).")
    params = spec.get("parameters") or {}
    if not isinstance(params, dict):
        raise ParameterError(f"{p}: 'parameters' must map each parameter name to a list of values.")
    exclude = spec.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(e, dict) for e in exclude):
        raise ParameterError(f"{p}: 'exclude' must be a list of {{parameter: value}} combinations to leave out.")
    check_grid(p, nb, params, exclude)
    return {"notebook": nb, "parameters": params, "output": spec.get("output"), "exclude": exclude}


def batch_checks(results: list[RunResult]) -> pd.DataFrame:
    """The scorecard rows of a batch, kept apart from its results: one row per combination and check, the
    combination's parameters first, then the scorecard columns, then ``constant``: whether the check's ``ours``
    and ``match`` are the same in every combination that has it (a book check that the grid does not touch)."""
    params = list(dict.fromkeys(k for r in results for k in r.parameters))
    rows = [{**{k: r.parameters.get(k) for k in params}, **{c: row.get(c) for c in COLUMNS}}
            for r in results for row in r.scorecard]
    table = pd.DataFrame(rows, columns=params + COLUMNS)
    if not len(table):
        return table.assign(constant=pd.Series(dtype=bool))
    key = ["notebook", "analysis", "ref", "quantity"]
    ours = table["ours"].map(lambda v: "nan" if v is None or (isinstance(v, float) and v != v) else repr(v))
    same = table.assign(_ours=ours).groupby(key, dropna=False)[["_ours", "match"]].transform("nunique")
    table["constant"] = (same["_ours"] <= 1) & (same["match"] <= 1)
    return table


def batch(grid_file: str | os.PathLike, out_dir: str | os.PathLike | None = None, workers: int | None = None,
          progress: bool = True, dask=None) -> tuple[list[RunResult], pd.DataFrame]:
    """Run one notebook over the cartesian product of a parameter grid, in parallel worker processes; the
    combinations listed under ``exclude`` in the grid file are left out.

    Writes one executed notebook per combination, ``results.csv`` (parameters + the headline scalars the notebook
    :func:`~vrs_helpers.app.scorecard.record` s, one row per combination) and ``checks.csv`` (the scorecard rows, see
    :func:`batch_checks`) into ``out_dir`` (default ``build/batch/<grid name>``). ``dask`` (a scheduler address,
    ``"local"`` or a ``distributed.Client``) runs the executions as tasks on a Dask cluster instead
    (:func:`run_grid_dask`: failed tasks retried, finished runs kept and skipped on a re-run).
    """
    from tqdm import tqdm  # a text bar: no TqdmWarning in a kernel without ipywidgets

    spec = load_grid(grid_file)
    combos = expand_grid(spec["parameters"])
    excluded = spec.get("exclude") or []
    combos = [c for c in combos if not any(all(c.get(k) == v for k, v in ex.items()) for ex in excluded)]
    for c in combos:   # the whole grid is checked before anything runs
        try:
            check_parameters(spec["notebook"], c)
        except ParameterError as exc:
            raise ParameterError(f"{grid_file}: {exc}") from None
    names = [run_name(spec["notebook"], c) for c in combos]
    check_unique_names(combos, names, grid_file)
    out = Path(out_dir or spec.get("output") or Path("build") / "batch" / Path(grid_file).stem)
    out.mkdir(parents=True, exist_ok=True)
    workers = workers or os.cpu_count() or 1
    results: list[RunResult | None] = [None] * len(combos)
    if dask is not None:  # tasks on a Dask cluster (address, "local" or a Client); finished runs are skipped
        results = run_grid_dask(spec["notebook"], combos, out, names, address=dask, progress=progress)
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(combos))) as pool:
            futures = {pool.submit(_batch_one, str(spec["notebook"]), c, str(out)): i
                       for i, c in enumerate(combos)}
            for fut in tqdm(as_completed(futures), total=len(futures), desc="combinations", disable=not progress):
                results[futures[fut]] = fut.result()
    table = pd.DataFrame([{**r.parameters, **r.scalars, "notebook_output": r.output.name, "error": r.error}
                          for r in results])
    to_csv(table, out / "results.csv")   # parameter values may look like formulas: written as text (literal)
    to_csv(batch_checks(results), out / "checks.csv")
    return results, table


# ------------------------------------------------------------------------------------------- grids on Dask

def _run_remote(notebook: str, source: bytes, params: dict, output_name: str) -> dict:
    """On a worker: execute the notebook with papermill in a scratch folder; return the executed notebook."""
    import tempfile

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


def run_grid_dask(notebook: str | os.PathLike, combos: list[dict], out_dir: str | os.PathLike, output_names: list[str],
             address="local", retries: int = 2, progress: bool = True) -> list:
    """Execute ``notebook`` once per parameter combination as tasks on a Dask cluster (see the module docstring).

    ``output_names[i]`` is the file of combination i in ``out_dir``. Runs whose output already exists and ran
    through are not executed again (their results are read from the file). A task that raises (a lost worker, a
    kernel that died) is retried ``retries`` times; a notebook that fails in a cell is recorded as an error (its
    executed copy written, as ``vrs batch`` does) and executed again on the next run. Returns the
    :class:`~vrs_helpers.app.runner.RunResult` s in the order of ``combos``.
    """
    from tqdm import tqdm  # a text bar: no TqdmWarning in a kernel without ipywidgets

    from ..dask_support import connect, identity

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
        src = client.submit(identity, source, pure=False)  # not scattered: recomputable when its worker dies
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
