"""``vrs analyze LOGDIR``: evaluation logs (lm-evaluation-harness, Inspect, HELM, Every Eval Ever) read, described,
checked and analysed task by task (:mod:`vrs_helpers.evaluate.tasks`), the report - workbook 09 run with papermill
on them - written only when everything succeeded; and the check of an output folder every ``vrs analyze`` makes
before it reads any data."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from ..errors import VRSError


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


def read_logs(path, fmt: str = "auto", system: str | None = None, cluster: str | None = None, metric=None,
              dropna: bool = False, echo=None):
    """The logs at ``path`` read (:func:`~vrs_helpers.evaluate.readers.load_eval_logs`) and every task validated
    with its own metric (:func:`~vrs_helpers.evaluate.tasks.validate_tasks`) before any analysis: (logs, specs,
    skipped). ``echo``: called with the account of what was read before the tasks are validated (so a run that
    fails validation still says what it read)."""
    from ..evaluate.readers import load_eval_logs
    from ..evaluate.tasks import validate_tasks

    logs = load_eval_logs(path, format=fmt, system=system, item_fields=[cluster] if cluster else ())
    if echo is not None:
        echo(logs)
    specs, skipped = validate_tasks(logs, metric, dropna=dropna)
    return logs, specs, skipped


OPTIONS = ("logs_dir", "log_format", "system", "cluster", "metric", "dropna", "adjust", "alpha", "baseline", "test",
           "n_sim", "seed", "items", "runs")   # workbook 09's parameters that make its analysis (read, analyse_logs)


def analyse_logs(logs, specs, skipped, *, metric=None, adjust: str = "holm", alpha: float = 0.05,
                 cluster: str | None = None, baseline: str | None = None, test: str | None = None, n_sim: int = 1000,
                 seed: int = 0, items: str = "random", runs: str = "auto"):
    """:func:`~vrs_helpers.evaluate.tasks.analyze_logs` of validated logs (:func:`read_logs`), with a note per task
    whose rows with a missing score were dropped (``--dropna``)."""
    from ..evaluate.tasks import analyze_logs

    result = analyze_logs(logs, metric=metric, adjust=adjust, alpha=alpha, cluster=cluster, baseline=baseline,
                          specs=specs, test=test, n_sim=n_sim, seed=seed, items=items, skipped=skipped, runs=runs)
    for (task, m), spec in specs.items():
        dropped = spec.design.n_dropped_nan
        if dropped:
            result.notes.append(f"task {task} ({m}): {dropped} rows with a missing score dropped (--dropna).")
    return result


def _identity(options: dict) -> str:
    return json.dumps({k: options.get(k) for k in OPTIONS}, sort_keys=True, default=str)


def example_logs(start=None) -> Path:
    """The logs workbook 09 reads without ``logs_dir``: the committed Inspect sample of ``examples/harness_logs/``
    (found from ``start``, default the working folder, upwards), or its lm-eval sample when inspect_ai is not
    installed; outside a checkout the same sample written afresh into a temporary folder (workbook 08's samples,
    :func:`~vrs_helpers.evaluate.readers.writers.write_samples`)."""
    import importlib.util

    from ..evaluate.readers.writers import write_samples

    layout = "inspect" if importlib.util.find_spec("inspect_ai") is not None else "lm_eval"
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "examples" / "harness_logs" / layout).is_dir():
            return folder / "examples" / "harness_logs" / layout
    return write_samples(tempfile.mkdtemp(prefix="vrs-harness-logs-"), [layout])[layout]


def logs_analysis(logs_dir, *, log_format: str = "auto", system=None, cluster=None, metric=None, dropna=False,
                  analysis_file: str = "", **options):
    """The analysis workbook 09 reports: read, validated and analysed here (:func:`read_logs`,
    :func:`analyse_logs`), or, with ``analysis_file``, the one ``vrs analyze LOGDIR`` made of these very options
    and handed to this kernel signed with its key (:mod:`vrs_helpers.evaluate.handover`: a file that is not this
    run's own hand-over is refused unread; one made with other options is an error). Without ``logs_dir``:
    :func:`example_logs`."""
    if analysis_file:
        import pickle

        from ..evaluate import handover
        from ..evaluate.analysis import AnalysisError

        ident, result = pickle.loads(handover.read(analysis_file))   # authenticated before it is unpickled
        wanted = _identity({"logs_dir": logs_dir, "log_format": log_format, "system": system, "cluster": cluster,
                            "metric": metric, "dropna": dropna, **options})
        if ident != wanted:
            raise AnalysisError(f"{analysis_file} holds the analysis of other logs or options; leave analysis_file "
                                "empty to analyse these.")
        return result
    logs, specs, skipped = read_logs(logs_dir or example_logs(), fmt=log_format, system=system, cluster=cluster,
                                     metric=metric, dropna=dropna)
    return analyse_logs(logs, specs, skipped, metric=metric, cluster=cluster, **options)


def logs_summary(result, data_label: str, summary_path: str = "") -> dict:
    """summary.json of a logs analysis (rounded as a score table's); with ``summary_path`` also written there, and
    the plain-text summary beside it (``summary.txt``)."""
    from ..evaluate.analysis import rounded

    summary = rounded({"data": data_label, **result.to_summary()})
    if summary_path:
        path = Path(summary_path)
        path.write_text(json.dumps(summary, indent=2), encoding="utf-8")
        path.with_name("summary.txt").write_text(result.text(), encoding="utf-8")
    return summary


def logs_report(logs, specs, skipped, out_dir, *, logs_dir, log_format: str = "auto", system: str | None = None,
                dropna: bool = False, metric=None, adjust: str = "holm", alpha: float = 0.05,
                cluster: str | None = None, baseline: str | None = None, data_label: str = "",
                test: str | None = None, n_sim: int = 1000, seed: int = 0, items: str = "random",
                runs: str = "auto", show_code: bool = False, kernel=None) -> dict:
    """Analyse validated logs (:func:`read_logs` of ``logs_dir`` with ``log_format``, ``system``, ``cluster``,
    ``metric``, ``dropna``) with :func:`analyse_logs`, and run workbook 09
    (:data:`~vrs_helpers.app.kernel.LOGS_NOTEBOOK`) with papermill on the same logs and options as the report:
    ``report.ipynb``, its page ``report.html`` (without the code unless ``show_code``), and ``summary.json`` and
    ``summary.txt`` (:func:`logs_summary`). The analysis reaches the
    workbook's kernel (``kernel``: :func:`~vrs_helpers.app.kernel.report_kernel` started ahead, else one is started
    here) signed with the kernel's key, as a score table's reaches workbook 07. Everything is made in the kernel's
    private folder and swapped into ``out_dir`` only when all of it succeeded
    (:func:`vrs_helpers.app.publish.publish`); a workbook that failed in a cell keeps that folder (its error names
    the executed copy). Returns the summary."""
    import pickle

    from ..evaluate import handover
    from ..resources import find_workbook
    from .kernel import LOGS_NOTEBOOK, report_kernel
    from .publish import DiskFullError, disk_full, disk_full_error, publish
    from .report import MATHJAX_DIR, copy_mathjax, mathjax_current, notebook_page
    from .runner import NotebookError, prepare_page, run_notebook

    out = Path(out_dir)
    kernel = kernel if kernel is not None else report_kernel(LOGS_NOTEBOOK)
    work = kernel.cwd
    options = {"logs_dir": str(Path(logs_dir) if Path(logs_dir).is_absolute() else Path.cwd() / logs_dir),
               "log_format": log_format, "system": system, "cluster": cluster, "metric": metric, "dropna": dropna,
               "adjust": adjust, "alpha": alpha, "baseline": baseline, "test": test, "n_sim": n_sim, "seed": seed,
               "items": items, "runs": runs}
    keep_work, page = False, None
    try:
        result = analyse_logs(logs, specs, skipped, metric=metric, adjust=adjust, alpha=alpha, cluster=cluster,
                              baseline=baseline, test=test, n_sim=n_sim, seed=seed, items=items, runs=runs)
        label = data_label or str(getattr(logs.description, "files", [""])[0])
        handover.write(work / "analysis.pickle", pickle.dumps((_identity(options), result),
                                                              protocol=pickle.HIGHEST_PROTOCOL),
                       kernel.handover_key)
        page = prepare_page(work, out, exclude_input=not show_code)
        source = work / "workbook.ipynb"
        shutil.copyfile(find_workbook(LOGS_NOTEBOOK), source)
        try:
            run = run_notebook(source, {**options, "data_label": label, "summary_path": str(work / "summary.json"),
                                        "analysis_file": str(work / "analysis.pickle")},
                               out_dir=work, html_dir=None, output_name="report.ipynb", kernel=kernel)
        except NotebookError as exc:
            page.join()
            shutil.rmtree(work / MATHJAX_DIR, ignore_errors=True)
            keep_work = "No space left on device" not in str(exc)
            if not keep_work:
                raise disk_full_error(OSError(28, "No space left on device"), out_dir) from None
            raise NotebookError(f"{exc}. The previous report in {out_dir} (if any) is untouched.") from exc
        page.join()
        (work / "analysis.pickle").unlink()
        (work / "report.html").write_text(notebook_page(run.output, exclude_input=not show_code), encoding="utf-8")
        summary = json.loads((work / "summary.json").read_text(encoding="utf-8"))   # written by the workbook
        produced = {name: work / name for name in ("report.html", "report.ipynb", "summary.json", "summary.txt")}
        keep = ()
        if mathjax_current(out):   # report.html loads MathJax from ./mathjax (no CDN)
            keep = (MATHJAX_DIR,)
        else:   # copied while the notebook ran (else now)
            produced[MATHJAX_DIR] = copy_mathjax(work)
        publish(produced, out, keep=keep)
    except (OSError, shutil.Error) as exc:   # a full disk anywhere on the way: said so, the previous report kept
        if isinstance(exc, DiskFullError) or not disk_full(exc):
            raise
        raise disk_full_error(exc, out_dir) from None
    finally:
        if page is not None:
            page.join()   # its MathJax copy goes into the work folder: done before that is removed
        kernel.shutdown()
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)
    return summary
