"""lm-evaluation-harness logs (``lm_eval --log_samples --output_path OUT``).

The harness writes, per invocation, into ``OUT/<model_name_sanitized>/`` (lm_eval/loggers/evaluation_tracker.py):

- ``results_<date>.json`` - the aggregates (``results[task]["acc,none"]``, ``["acc_stderr,none"]``), the
  configuration (``config``: model, model_args, random_seed, numpy_seed, torch_seed, fewshot_seed; ``n-samples``,
  ``n-shot``) and the model's name (``model_name``);
- ``samples_<task>_<date>.jsonl`` - one line per document and filter: ``doc_id``, ``doc``, ``target``,
  ``arguments``, ``resps``, ``filtered_resps``, ``filter``, ``metrics`` (the names of the metrics), ``doc_hash``,
  ``prompt_hash``, ``target_hash`` and one key per metric (``"acc": 1.0``).

The date ties a samples file to its results file (an ``--output_path`` ending in ``.json`` writes
``<stem>_<date>.json`` and the samples beside it). Each results file is one run (one invocation: its seeds); the
runs of a system are told apart by the seeds where they differ, else by folder, else by date. The item is the
``doc_id``, checked across systems and runs by ``doc_hash`` (``prompt_hash`` may differ - chat templates, few-shot
seeds - which is a note). A metric of a filter other than ``none`` is named ``metric/filter``.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...files import find_files
from ...tables.scores import iter_json_lines
from .base import LogFormat, LogFormatError, ReadResult, dotted, peek_json, read_json, register, relative, score_value

_PACKED = r"(?:\.gz|\.bz2|\.xz)?"   # logs compressed afterwards are read as they are
SAMPLES = re.compile(rf"^samples_(?P<task>.+)_(?P<date>[^_]+)\.jsonl{_PACKED}$")
RESULTS = re.compile(rf"^(?P<stem>.+)_(?P<date>[^_]+)\.json{_PACKED}$")
SEEDS = ("fewshot_seed", "random_seed", "numpy_seed", "torch_seed")
FIXED = {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics", "doc_hash",
         "prompt_hash", "target_hash"}
LAYOUT = ("lm-evaluation-harness output: OUT/<model>/results_<date>.json and samples_<task>_<date>.jsonl "
          "(lm_eval --log_samples --output_path OUT)")


def metric_name(metric: str, filt: str) -> str:
    """The column of a metric under a filter: ``acc`` for the filter ``none``, else ``exact_match/strict-match``."""
    return metric if filt in ("none", None) else f"{metric}/{filt}"


def _detect(root: Path) -> list:
    """The samples files under ``root``, and the results files without any (lm_eval run without --log_samples:
    :func:`_read` refuses them, so that a run is never left out in silence)."""
    if root.is_file():
        return [root] if SAMPLES.match(root.name) or root.name.startswith("results_") else []
    samples = [p for p in find_files(root, "samples_*.jsonl*") if SAMPLES.match(p.name)]
    dated = {(p.parent, SAMPLES.match(p.name)["date"]) for p in samples}
    alone = [p for p in find_files(root, "results_*.json*") if (m := RESULTS.match(p.name))
             and (p.parent, m["date"]) not in dated and '"results"' in peek_json(p)]
    return sorted(samples + alone)


def _results_for(samples: Path, date: str):
    for suffix in ("", ".gz", ".bz2", ".xz"):
        exact = samples.parent / f"results_{date}.json{suffix}"
        if exact.is_file():
            return exact
    others = sorted(p for p in samples.parent.glob(f"*_{date}.json*") if RESULTS.match(p.name))
    return others[0] if others else None


def _without_samples(files: list, root: Path) -> None:
    """Results files among ``files`` (those :func:`_detect` lists only when no samples file shares their date):
    an error naming them and the fix (the per-item scores are in the samples files only)."""
    alone = [p for p in files if not SAMPLES.match(p.name)]
    if alone:
        shown = ", ".join(str(p) for p in alone[:3]) + (f" (and {len(alone) - 3} more)" if len(alone) > 3 else "")
        raise LogFormatError(f"{len(alone)} lm-eval results file(s) without their samples_<task>_<date>.jsonl: "
                             f"{shown}. The per-item scores every test here needs are in the samples files only: "
                             "re-run lm_eval with --log_samples (and the same --output_path), or move the results "
                             "files of those runs out of the folder.")


def _model_name(results: dict, folder: Path, system_field: str | None):
    if system_field:
        value = dotted(results, system_field)
        if value is None:
            raise LogFormatError(f"The results file has no field {system_field!r} to name the system by; top-level "
                                 f"fields: {', '.join(sorted(results))}.")
        return str(value)
    name = results.get("model_name")
    if name:
        return str(name)
    args = dotted(results, "config.model_args")
    if isinstance(args, dict):
        for key in ("peft", "delta", "pretrained", "model", "path", "engine"):
            if key in args:
                return str(args[key])
    if isinstance(args, str):
        for key in ("peft", "delta", "pretrained", "model", "path", "engine"):
            if f"{key}=" in args:
                return args.split(f"{key}=")[1].split(",")[0]
    return folder.name


def _aggregations(results: dict, task: str) -> dict:
    """metric -> its aggregation in the task's config (``metric_list``), as the results file records it."""
    metric_list = ((results.get("configs") or {}).get(task) or {}).get("metric_list")
    out = {}
    for entry in metric_list or []:
        if isinstance(entry, dict) and "metric" in entry:
            out[str(entry["metric"])] = str(entry.get("aggregation", "mean"))
    return out


def _field(rec: dict, name: str):
    """An item field: from the document (``doc["subject"]``), else from the record."""
    doc = rec.get("doc")
    return doc[name] if isinstance(doc, dict) and name in doc else rec.get(name)


def _read(files: list, options: dict) -> ReadResult:
    root = Path(options["root"])
    item_fields = list(options.get("item_fields") or ())
    out = ReadResult(run_source="each lm-eval invocation (results_<date>.json) is one run", run_keys=SEEDS
                     + ("folder", "date"), shared_keys=SEEDS, hash_name="doc_hash", prompt_hash_name="prompt_hash",
                     repeat_source="none: lm-eval logs one (filtered) score per document")
    if root.is_file():
        date = (SAMPLES.match(root.name) or RESULTS.match(root.name))["date"]
        files = sorted(p for p in root.parent.glob(f"samples_*_{date}.jsonl*") if SAMPLES.match(p.name)
                       and SAMPLES.match(p.name)["date"] == date)
        if not files:
            raise LogFormatError(f"{root}: no samples_<task>_{date}.jsonl beside it. The per-item scores are in "
                                 "the samples files only: re-run lm_eval with --log_samples.")
    else:
        _without_samples(files, root)
    skipped: dict = {}
    results_cache: dict = {}
    for path in files:
        m = SAMPLES.match(path.name)
        task, date = m["task"], m["date"]
        rfile = _results_for(path, date)
        if rfile is not None and rfile not in results_cache:
            results_cache[rfile] = read_json(rfile)
            if not isinstance(results_cache[rfile], dict) or "results" not in results_cache[rfile]:
                raise LogFormatError(f"{rfile}: expected an lm-eval results file (a JSON object with 'results', "
                                     "'config', 'n-samples').")
        results = results_cache.get(rfile) or {}
        if rfile is None:
            out.notes.append(f"{relative(path, root)}: no results_{date}.json beside it; the system is named after "
                             "the folder and the seeds are unknown.")
        system = _model_name(results, path.parent, options.get("system"))
        config = results.get("config") or {}
        folder = path.parent.parent if path.parent.name == results.get("model_name_sanitized", path.parent.name) \
            else path.parent
        info = {**{s: config.get(s) for s in SEEDS if s in config}, "folder": relative(folder, root), "date": date}
        docs: dict = {}
        for line, rec in iter_json_lines(path, LogFormatError):
            if "doc_id" not in rec:
                raise LogFormatError(f"{path}, line {line}: no 'doc_id'. Expected an lm-eval sample record (doc_id, "
                                     "doc, target, filter, metrics, doc_hash, and one key per metric).")
            filt = rec.get("filter", "none")
            names = rec.get("metrics")
            if names is None:   # logs from before lm-eval recorded the metric names
                names = [k for k in rec if k not in FIXED and score_value(rec[k]) is not None]
            if not isinstance(names, list):
                raise LogFormatError(f"{path}, line {line}: 'metrics' is {type(names).__name__}, expected the list "
                                     "of metric names.")
            row = docs.setdefault(rec["doc_id"], {
                "system": system, "task": task, "repeat": "1", "item": str(rec["doc_id"]), "_file": str(path),
                "_run_info": info, "_hash": rec.get("doc_hash"), "_prompt": rec.get("prompt_hash"),
                "_fields": {f: _field(rec, f) for f in item_fields}})
            if rec.get("doc_hash") is not None and row["_hash"] not in (None, rec["doc_hash"]):
                raise LogFormatError(f"{path}, line {line}: doc_id {rec['doc_id']} appears with two doc_hash values "
                                     "in one file.")
            for name in names:
                if name not in rec:
                    raise LogFormatError(f"{path}, line {line}: the metric {name!r} is listed in 'metrics' but has "
                                         "no value in the record.")
                value = score_value(rec[name])
                column = metric_name(name, filt)
                if value is None:
                    skipped.setdefault((task, column), type(rec[name]).__name__)
                    continue
                if column in row:
                    raise LogFormatError(f"{path}, line {line}: doc_id {rec['doc_id']} has two records for the "
                                         f"filter {filt!r}.")
                row[column] = value
                if out.primary_metric is None:
                    out.primary_metric = column
                out.task_primary.setdefault(task, column)   # the task's first metric
        out.rows.extend(docs.values())
        out.settings.append({"system": system, "task": task, "_run_info": info,
                             "aggregation": _aggregations(results, task)})
        task_results = (results.get("results") or {}).get(task) or {}
        n = ((results.get("n-samples") or {}).get(task) or {}).get("effective")
        for key, value in task_results.items():
            if "," not in key:
                continue
            name, filt = key.split(",", 1)
            statistic = "value"
            if name.endswith("_stderr"):
                name, statistic = name[: -len("_stderr")], "stderr"
            out.reported.append({"system": system, "task": task, "_run_info": info, "metric": metric_name(name, filt),
                                 "statistic": statistic, "value": value, "source": str(rfile)})
        if n is not None:
            out.reported.append({"system": system, "task": task, "_run_info": info, "metric": "", "statistic": "n",
                                 "value": n, "source": str(rfile)})
    for (task, column), kind in skipped.items():
        out.notes.append(f"task {task}: metric {column} is stored per document as a {kind} (a corpus-level metric "
                         "such as BLEU keeps its arguments per item), not as a score; left out.")
    return out


FORMAT = register(LogFormat(name="lm-eval", layout=LAYOUT, detect=_detect, read=_read))
