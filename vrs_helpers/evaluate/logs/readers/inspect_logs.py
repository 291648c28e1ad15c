"""Inspect logs (``inspect eval``): ``.eval`` files (zip archives) and ``.json`` logs, read through
``inspect_ai.log.read_eval_log`` - an optional extra: ``pip install 'vrs-workbooks[inspect]'``.

A log is one evaluation of a task on a model: ``eval.model`` is the system, ``eval.task`` the task; each sample
has an ``id`` (the item), an ``epoch`` (the repeat: Inspect's epochs are independent draws for the same item), a
``metadata`` dict and ``scores`` {scorer: Score(value=...)}. Values are converted as Inspect's default
``value_to_float`` converts them ("C" 1, "I" 0, "P" 0.5, "N" 0, yes/true 1, no/false 0, numbers and numeric
strings as numbers); a dict value gives one metric per key (``scorer/key``). Several logs of one model and task are
runs, told apart by the generation seed where it differs, else by folder, else by file. ``results.scores`` - the
numbers Inspect printed (accuracy, stderr, ...) - are kept as ``reported``; the epoch reducer as a setting.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

from ...files import InputError, check_archive_members, check_inflation, find_files
from .base import LogFormat, LogFormatError, ReadResult, dotted, peek_json, register, relative

LAYOUT = "Inspect logs: *.eval (zip) or *.json written by inspect_ai (inspect eval --log-dir DIR)"
INSTALL = "pip install 'vrs-workbooks[inspect]'"
LOG_SAMPLES = ("Re-run the eval with samples logged (inspect_ai's default): `inspect eval` without "
               "`--no-log-samples` (and without the environment variable INSPECT_EVAL_NO_LOG_SAMPLES or "
               "INSPECT_EVAL_LOG_SAMPLES set), or `inspect_ai.eval(..., log_samples=True)`.")
_JSON_LOG = re.compile(r'^\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:')
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def value_to_float(value):
    """A score value as Inspect's default ``value_to_float()`` converts it; None when it cannot be converted
    (Inspect would print a warning and use 0: here the value is left out, with a note)."""
    if value == "C":
        return 1.0
    if value == "P":
        return 0.5
    if value in ("I", "N"):
        return 0.0
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        low = value.lower()
        if low in ("yes", "true"):
            return 1.0
        if low in ("no", "false"):
            return 0.0
        if _NUMBER.match(low.strip()) and math.isfinite(float(low)):
            return float(low)
    return None


def _detect(root: Path) -> list:
    if root.is_file():
        cands = [root]
    else:
        cands = find_files(root, "*.eval") + find_files(root, "*.json")
    return [p for p in cands if p.suffix == ".eval" or (p.suffix == ".json" and _is_json_log(peek_json(p)))]


def _is_json_log(head: str) -> bool:
    """An Inspect JSON log: ``{"version": N, "status": ...`` as inspect_ai writes it, or (other writers, such as
    the R package vitals, order the keys otherwise) an object whose head has an ``eval`` object naming ``task``,
    ``model`` and ``run_id``."""
    if _JSON_LOG.match(head):
        return True
    return (head.lstrip().startswith("{") and re.search(r'"eval"\s*:\s*\{', head) is not None
            and all(re.search(rf'"{k}"\s*:', head) for k in ("task", "model", "run_id")))


def _reader():
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise LogFormatError(f"Reading Inspect logs needs the inspect_ai package: {INSTALL} (or pip install "
                             "inspect_ai).") from None
    return read_eval_log


def _statistic(name: str, params: dict, reducer) -> str:
    label = name + (f"({', '.join(f'{k}={v!r}' for k, v in sorted(params.items()))})" if params else "")
    return label + (f"[reducer={reducer}]" if reducer not in (None, "mean") else "")


def _read(files: list, options: dict) -> ReadResult:
    read_eval_log = _reader()
    root = Path(options["root"])
    item_fields = list(options.get("item_fields") or ())
    out = ReadResult(run_source="each Inspect log (one eval of a task on a model) is one run", run_keys=(
        "seed", "folder", "file"), shared_keys=("seed",), repeat_source="Inspect epochs (each sample's epoch)",
        prompt_hash_name="the sample's input and target")
    skipped: dict = {}
    headers: list = []   # logs written without samples (issue 52)
    for path in files:
        try:   # bounded before inspect_ai inflates it (issue 50)
            if path.suffix == ".eval":
                check_archive_members(path)
            else:
                check_inflation(path)
        except InputError as exc:
            raise LogFormatError(str(exc)) from None
        try:
            log = read_eval_log(str(path))
        except Exception as exc:  # inspect_ai raises several kinds (zip, JSON, validation)
            raise LogFormatError(f"{path}: not a readable Inspect log ({type(exc).__name__}: {exc}). Expected a "
                                 ".eval or .json log written by inspect_ai.") from None
        spec = log.eval
        system = str(spec.model)
        if options.get("system"):
            value = dotted(spec.model_dump(mode="json"), options["system"].removeprefix("eval."))
            if value is None:
                raise LogFormatError(f"{path}: the log's eval spec has no field {options['system']!r} to name the "
                                     "system by.")
            system = str(value)
        task = str(spec.task)
        seed = next((c.seed for c in (spec.model_generate_config, getattr(log.plan, "config", None))
                     if c is not None and getattr(c, "seed", None) is not None), None)
        info = {"seed": seed, "folder": relative(path.parent, root), "file": path.stem}
        if log.status != "success":
            out.notes.append(f"{relative(path, root)}: the log's status is {log.status!r}; its scored samples are "
                             "read.")
        unscored = 0
        if not log.samples:
            scores = [f"{sc.name} {m.name} = {m.value:.6g}" for sc in (log.results.scores if log.results else [])
                      for m in sc.metrics.values()]
            headers.append(relative(path, root))
            out.notes.append(f"{relative(path, root)}: an Inspect log without its samples (header and results only)"
                             ": only its aggregates" + (f" ({'; '.join(scores[:4])})" if scores else "")
                             + "; the tests need each sample's scores. " + LOG_SAMPLES)
        for sample in log.samples or []:
            if sample.error is not None or not sample.scores:
                unscored += 1
                continue
            row = {"system": system, "task": task, "repeat": str(sample.epoch), "item": str(sample.id),
                   "_file": str(path), "_run_info": info,
                   "_prompt": hashlib.sha256(json.dumps([_text(sample.input), sample.target], default=str)
                                             .encode()).hexdigest(),
                   "_fields": {f: (sample.metadata or {}).get(f) for f in item_fields}}
            for scorer, score in sample.scores.items():
                values = score.value.items() if isinstance(score.value, dict) else [(None, score.value)]
                for key, value in values:
                    column = scorer if key is None else f"{scorer}/{key}"
                    v = value_to_float(value)
                    if v is None:
                        skipped.setdefault((task, column), repr(value)[:40])
                        continue
                    row[column] = v
                    out.primary_metric = out.primary_metric or column
                    out.task_primary.setdefault(task, column)   # the task's first scorer
            out.rows.append(row)
        if unscored:
            out.notes.append(f"{relative(path, root)}: {unscored} sample(s) with an error or without scores left out.")
        config = spec.config
        out.settings.append({"system": system, "task": task, "_run_info": info,
                             "reducer": list(config.epochs_reducer or ["mean"]), "epochs": config.epochs or 1})
        for score in (log.results.scores if log.results else []):
            for metric in score.metrics.values():
                out.reported.append({"system": system, "task": task, "_run_info": info, "metric": score.name,
                                     "statistic": _statistic(metric.name, metric.params or {}, score.reducer),
                                     "value": metric.value, "source": str(path)})
    if headers and not out.rows:
        shown = ", ".join(str(h) for h in headers[:4]) + (f" and {len(headers) - 4} more" if len(headers) > 4 else "")
        raise LogFormatError(f"The Inspect log(s) {shown} hold no samples: inspect_ai wrote only the header and the "
                             "results (its aggregates), as it does when samples are not logged. The tests compare "
                             f"systems item by item and need each sample's scores. {LOG_SAMPLES}")
    for (task, column), example in skipped.items():
        out.notes.append(f"task {task}: values of {column} such as {example} are not scores (no number, C/I/P/N, "
                         "yes/no); left out.")
    return out


def _text(value):
    """A sample's input as text: a string, or the texts of its chat messages."""
    if isinstance(value, str):
        return value
    return [getattr(m, "text", str(m)) for m in value]


FORMAT = register(LogFormat(name="inspect", layout=LAYOUT, detect=_detect, read=_read, extra="inspect"))
