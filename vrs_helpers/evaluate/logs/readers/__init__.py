"""Evaluation logs users already have, read into one long table (issue 29): lm-evaluation-harness, Inspect, HELM
and Every Eval Ever instance-level logs.

One public entry, :func:`load_eval_logs`; each format is a module that registers itself once
(:func:`~.base.register`: name, detector, reader), so a new format plugs in at one place:

- :mod:`.lm_eval` - ``OUT/<model>/results_<date>.json`` + ``samples_<task>_<date>.jsonl``;
- :mod:`.inspect_logs` - ``*.eval`` / ``*.json`` Inspect logs (optional extra ``inspect``);
- :mod:`.helm` - ``benchmark_output/runs/<suite>/<run>/per_instance_stats.json`` + ``run_spec.json``;
- :mod:`.every_eval_ever` - ``*_samples.jsonl`` in the instance-level schema.
"""

from __future__ import annotations

from pathlib import Path

from ...files import find_files, one_walk, walk
from ...tables.scores import InputError, match_pattern
from . import every_eval_ever, helm, inspect_logs, lm_eval  # noqa: F401  (each registers its format)
from .base import FORMATS, KEYS, EvalLogs, LogDescription, LogFormatError, ReadResult, assemble

ALIASES = {"lm_eval": "lm-eval", "lm-evaluation-harness": "lm-eval", "lmeval": "lm-eval", "inspect_ai": "inspect",
           "eee": "every-eval-ever", "every_eval_ever": "every-eval-ever"}

__all__ = ["load_eval_logs", "detect_format", "sniff_format", "EvalLogs", "LogDescription", "LogFormatError",
           "FORMATS", "KEYS"]


def _roots(path) -> list:
    text = str(path)
    matches = match_pattern(text)
    roots = [(Path(p), fields) for p, fields in matches] if matches else [(Path(text), {})]
    for root, _ in roots:
        if not root.exists():
            raise InputError(f"No file or folder at {root}. Give the folder the harness wrote its logs into (or one "
                             "log file), or a pattern such as 'runs/{system}/seed={seed}/'.")
    return roots


def _unknown(roots) -> str:
    seen = []
    for root, _ in roots:
        seen += [root] if root.is_file() else find_files(root)[:6]
    return ", ".join(str(p) for p in seen[:6]) or "nothing"


def detect_format(path) -> str:
    """The registered format of the logs at ``path`` (a folder, a log file, or a run-folder pattern). No logs of a
    known format, or logs of several formats in one folder, are errors naming the files and the layouts
    expected."""
    roots = _roots(path)
    with one_walk():   # each folder searched once for the four detectors
        found = {name: [f for root, _ in roots for f in fmt.detect(root)] for name, fmt in FORMATS.items()}
    found = {name: files for name, files in found.items() if files}
    if not found:
        layouts = "; ".join(f"{name}: {fmt.layout}" for name, fmt in FORMATS.items())
        raise LogFormatError(f"No evaluation logs of a known format at {path} (it holds {_unknown(roots)}). "
                             f"Expected one of: {layouts}")
    if len(found) > 1:
        desc = "; ".join(f"{name}: {len(files)} file(s), e.g. {files[0]}" for name, files in found.items())
        raise LogFormatError(f"{path} holds logs of several formats ({desc}). Read one format at a time: put them "
                             "in separate folders, or name the format (format=..., vrs analyze --format).")
    return next(iter(found))


def sniff_format(path) -> str | None:
    """The format of the evaluation logs at ``path``, or None when it holds none of a known format (a score table,
    a missing path): for ``vrs analyze DATA`` to choose between a score table and logs. Logs of several formats
    in one folder are still an error (:func:`detect_format`)."""
    try:
        return detect_format(path)
    except LogFormatError as exc:
        if "several formats" in str(exc):
            raise
        return None
    except InputError:
        return None


def load_eval_logs(path, format: str = "auto", *, system: str | None = None, item_fields=(),
                   metrics=None) -> EvalLogs:
    """Read the evaluation logs at ``path`` into an :class:`~.base.EvalLogs`: ``.table`` (one row per system,
    task, run, repeat and item - columns ``system``, ``task``, ``run``, ``repeat``, ``item``, then one float column
    per metric, then the ``item_fields``), ``.description`` (systems, tasks, runs, repeats, items, metrics, notes;
    ``.describe()`` as text), ``.reported`` (the numbers the harness wrote itself: system, task, run, metric,
    statistic, value, source) and ``.settings`` (per system, task and run: e.g. Inspect's epoch reducer).

    ``path``: a folder of logs, one log file, or a pattern with named fields whose matches are folders (or files),
    e.g. ``runs/{system}/seed={seed}/``: ``{system}`` names the system, every other field identifies the run.
    ``format``: ``"auto"`` (detected: :func:`detect_format`) or one of ``lm-eval``, ``inspect``, ``helm``,
    ``every-eval-ever``. ``system``: a field of the log to name systems by instead of the model name (dotted, e.g.
    ``config.model_args`` for lm-eval, ``model_args.path`` for Inspect's eval spec, ``adapter_spec.model_deployment``
    for HELM, ``metadata.variant`` for Every Eval Ever). ``item_fields``: per-item fields to keep as columns (an
    Inspect sample's metadata key, an lm-eval document's field) - a cluster id for clustered standard errors, a
    subject. ``metrics``: keep only these metric columns.

    Bad input raises :class:`~.base.LogFormatError` (a :class:`~vrs_helpers.errors.VRSError`, exit 2): the
    message names the file, the line where there is one, and what was expected. Files and folders under ``path``
    that cannot be read (dangling links, link loops, named pipes, devices, folders that may not be listed, special
    file systems; :func:`vrs_helpers.evaluate.files.walk`) are never left out in silence: each is a note starting
    with ``WARNING:`` in ``.description.notes`` (the console and summary.json show them).
    """
    with one_walk():   # the detectors and the warnings read one search of each folder
        return _load_eval_logs(path, format, system, item_fields, metrics)


def _load_eval_logs(path, format, system, item_fields, metrics) -> EvalLogs:
    roots = _roots(path)
    name = ALIASES.get(format, format)
    if name == "auto":
        name = detect_format(path)
    if name not in FORMATS:
        raise InputError(f"Unknown log format {format!r}; known: auto, {', '.join(FORMATS)}.")
    fmt = FORMATS[name]
    fields = list(roots[0][1])
    run_fields = [f for f in fields if f != "system"]
    merged = ReadResult()
    for root, _ in roots:
        if root.is_dir():
            searched = walk(root)
            merged.notes += [n for n in searched.warnings() + searched.notes if n not in merged.notes]
    all_files: list = []
    for root, values in roots:
        files = fmt.detect(root)
        if not files:
            raise LogFormatError(f"No {name} logs at {root} (it holds {_unknown([(root, {})])}). Expected "
                                 f"{fmt.layout}.")
        part = fmt.read(files, {"root": root, "system": system, "item_fields": list(item_fields or ())})
        for entry in part.rows + part.reported + part.settings:
            if "system" in values:
                entry["system"] = values["system"]
            if entry.get("_run_info") is not None and run_fields:
                entry["_run_info"] = {**entry["_run_info"], **{f: values[f] for f in run_fields}}
        all_files += files
        merged.rows += part.rows
        merged.reported += part.reported
        merged.settings += part.settings
        merged.notes += [n for n in part.notes if n not in merged.notes]
        merged.task_primary = {**part.task_primary, **merged.task_primary}
        for attr in ("primary_metric", "run_source", "repeat_source", "run_keys", "shared_keys", "hash_name",
                     "prompt_hash_name"):
            if not getattr(merged, attr):
                setattr(merged, attr, getattr(part, attr))
    if run_fields:
        merged.run_source = f"the pattern's field(s) {', '.join(run_fields)}; within them, " + merged.run_source
    return assemble(name, all_files, merged, metrics_wanted=metrics, run_keys=run_fields)
