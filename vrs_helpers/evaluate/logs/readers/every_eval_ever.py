"""Every Eval Ever instance-level logs: JSON lines in the ``instance_level_eval`` schema
(github.com/evaleval/every_eval_ever, ``instance_level_eval.schema.json``), one object per item, usually
``<uuid>_samples.jsonl`` beside an aggregate ``<uuid>.json``.

Required fields per line: ``schema_version``, ``evaluation_id``, ``model_id``, ``evaluation_name``,
``sample_id``, ``interaction_type``, ``input``, ``answer_attribution``, ``evaluation`` (``score``, ``is_correct``).
The system is ``model_id``, the task ``evaluation_name`` (where one evaluation links its items to several aggregate
results - ``evaluation_result_id`` acc and acc_norm - each result is a metric ``score/<result>`` of the one task),
the item ``sample_id`` (checked across systems by ``sample_hash`` where present), the run ``evaluation_id``
(several evaluations of one model and task are runs),
the repeat ``metadata.epoch`` where the converter kept it (Inspect epochs), else 1. Metrics: ``score``
(``evaluation.score``) and ``is_correct`` (0/1). The aggregate ``<uuid>.json`` beside a samples file (its
``evaluation_results``: score, standard error, number of samples) is kept as ``reported``.
"""

from __future__ import annotations

from pathlib import Path

from ...files import base_suffix, find_files
from ...tables.scores import iter_json_lines
from .base import LogFormat, LogFormatError, ReadResult, dotted, first_json_line, read_json, register, score_value

LAYOUT = "Every Eval Ever instance-level JSON lines (*_samples.jsonl: model_id, evaluation_name, sample_id, evaluation)"
REQUIRED = ("evaluation_id", "model_id", "evaluation_name", "sample_id", "evaluation")


def _is_eee(path: Path) -> bool:
    first = first_json_line(path)
    return isinstance(first, dict) and "schema_version" in first and all(k in first for k in REQUIRED)


def _detect(root: Path) -> list:
    cands = [root] if root.is_file() else find_files(root, "*.jsonl*")
    return sorted(p for p in cands if base_suffix(p) == ".jsonl" and _is_eee(p))


def _read(files: list, options: dict) -> ReadResult:
    item_fields = list(options.get("item_fields") or ())
    out = ReadResult(run_source="each evaluation_id is one run", run_keys=("evaluation_id",),
                     repeat_source="metadata.epoch where the converter kept it (Inspect epochs), else none",
                     hash_name="sample_hash", primary_metric="score")
    raw = []
    for path in files:
        for line, rec in iter_json_lines(path, LogFormatError):
            missing = [k for k in REQUIRED if k not in rec]
            if missing:
                raise LogFormatError(f"{path}, line {line}: no {', '.join(missing)}. Expected an Every Eval Ever "
                                     "instance record (model_id, evaluation_name, sample_id, evaluation.score, ...).")
            evaluation = rec["evaluation"] if isinstance(rec["evaluation"], dict) else {}
            score = score_value(evaluation.get("score"))
            correct = evaluation.get("is_correct")
            if score is None or (correct is not None and not isinstance(correct, bool)):
                raise LogFormatError(f"{path}, line {line}: evaluation.score must be a number and "
                                     "evaluation.is_correct true or false.")
            system = str(dotted(rec, options["system"])) if options.get("system") else str(rec["model_id"])
            meta = rec.get("metadata") or {}
            raw.append((rec, {
                "system": system, "task": str(rec["evaluation_name"]), "repeat": str(meta.get("epoch", "1")),
                "item": str(rec["sample_id"]), "_file": f"{path}, line {line}",
                "_run_info": {"evaluation_id": rec["evaluation_id"]}, "_hash": rec.get("sample_hash") or None,
                "_fields": {f: meta.get(f, rec.get(f)) for f in item_fields},
                "score": score, "is_correct": float(correct) if correct is not None else float("nan")}))
    results: dict = {}
    for rec, row in raw:
        if rec.get("evaluation_result_id") is not None:
            results.setdefault((row["system"], row["task"], rec["evaluation_id"]), set()).add(
                rec["evaluation_result_id"])
    merged: dict = {}
    for rec, row in raw:   # one evaluation linked to several results (acc, acc_norm): metrics of one task
        if len(results.get((row["system"], row["task"], rec["evaluation_id"]), ())) > 1:
            rid = rec["evaluation_result_id"]
            key = (row["system"], row["task"], rec["evaluation_id"], row["repeat"], row["item"])
            target = merged.get(key)
            if target is None:
                target = merged[key] = {k: v for k, v in row.items() if k not in ("score", "is_correct")}
                out.rows.append(target)
            target[f"score/{rid}"] = row["score"]
            target[f"is_correct/{rid}"] = row["is_correct"]
            continue
        out.rows.append(row)
    if merged:
        out.notes.append("items linked to several results of one evaluation (evaluation_result_id): each result is "
                         "a metric (score/<result>) of the one task, not a task.")
    _aggregates(files, out, {(r["system"], r["task"].split("/")[0], str(r["_run_info"]["evaluation_id"])): r["system"]
                             for r in out.rows}, bool(merged))
    return out


def _aggregates(files: list, out: ReadResult, known: dict, several: bool) -> None:
    """The aggregate ``<uuid>.json`` beside each ``<uuid>_samples.jsonl`` (the schema's ``evaluation_results``:
    ``score_details.score``, ``uncertainty.standard_error.value``, ``num_samples``) as ``reported``; fields it does
    not know are ignored, an aggregate without ``evaluation_results`` is a note."""
    for path in files:
        agg = path.with_name(path.name.split("_samples.jsonl")[0] + ".json")
        if agg == path or not agg.is_file():
            continue
        data = read_json(agg)
        if not isinstance(data, dict) or not isinstance(data.get("evaluation_results"), list):
            out.notes.append(f"{agg}: not an Every Eval Ever aggregate (no evaluation_results); not compared.")
            continue
        eid = str(data.get("evaluation_id"))
        model = str(dotted(data, "model_info.id") or "")
        for res in data["evaluation_results"]:
            if not isinstance(res, dict):
                continue
            task = str(res.get("evaluation_name"))
            system = known.get((model, task, eid))
            if system is None:
                continue
            metric = f"score/{res.get('evaluation_result_id')}" if several else "score"
            details = res.get("score_details") or {}
            unc = details.get("uncertainty") or {}
            for statistic, value in (("value", details.get("score")),
                                     ("stderr", dotted(unc, "standard_error.value")),
                                     ("n", unc.get("num_samples"))):
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out.reported.append({"system": system, "task": task,
                                         "_run_info": {"evaluation_id": data.get("evaluation_id")},
                                         "metric": metric if statistic != "n" else "", "statistic": statistic,
                                         "value": value, "source": str(agg)})


FORMAT = register(LogFormat(name="every-eval-ever", layout=LAYOUT, detect=_detect, read=_read))
