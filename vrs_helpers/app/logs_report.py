"""``vrs analyze LOGDIR``: evaluation logs (lm-evaluation-harness, Inspect, HELM, Every Eval Ever) read, described,
checked and analysed task by task (:mod:`vrs_helpers.evaluate.tasks`), the report written only when everything
succeeded; and the check of an output folder every ``vrs analyze`` makes before it reads any data."""

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


def write_outputs(files: dict, out_dir) -> None:
    """Write ``{name: text}`` as the report in ``out_dir``: every file first into a private temporary folder, then
    the whole report swapped in (:func:`vrs_helpers.app.publish.publish`: all or nothing; the files of a previous
    report of another kind - a score table's notebook and MathJax copy - are replaced too), so a failure, a full disk
    included (:class:`~vrs_helpers.app.publish.DiskFullError`), leaves a previous report as it was."""
    from .publish import DiskFullError, disk_full, disk_full_error, publish, work_dir

    work = work_dir()
    try:
        for name, text in files.items():
            (work / name).write_text(text, encoding="utf-8")
        publish({name: work / name for name in files}, out_dir)
    except OSError as exc:
        if isinstance(exc, DiskFullError) or not disk_full(exc):
            raise
        raise disk_full_error(exc, out_dir) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


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


def logs_report(logs, specs, skipped, out_dir, *, metric=None, adjust: str = "holm", alpha: float = 0.05,
                cluster: str | None = None, baseline: str | None = None, data_label: str = "",
                test: str | None = None, n_sim: int = 1000, seed: int = 0, items: str = "random") -> dict:
    """Analyse validated logs (:func:`read_logs`) with :func:`~vrs_helpers.evaluate.tasks.analyze_logs` and write
    ``summary.json``, ``summary.txt`` and ``report.html`` into ``out_dir`` (:func:`write_outputs`). Returns the
    summary."""
    from ..evaluate.analysis import rounded
    from ..evaluate.tasks import analyze_logs
    from .logs_html import report_html

    result = analyze_logs(logs, metric=metric, adjust=adjust, alpha=alpha, cluster=cluster, baseline=baseline,
                          specs=specs, test=test, n_sim=n_sim, seed=seed, items=items, skipped=skipped)
    for (task, m), spec in specs.items():
        dropped = spec.design.n_dropped_nan
        if dropped:
            result.notes.append(f"task {task} ({m}): {dropped} rows with a missing score dropped (--dropna).")
    summary = rounded({"data": data_label or str(getattr(logs.description, "files", [""])[0]),
                        **result.to_summary()})
    write_outputs({"summary.json": json.dumps(summary, indent=2), "summary.txt": result.text(),
                   "report.html": report_html(result)}, out_dir)
    return summary
