"""HELM run folders: ``benchmark_output/runs/<suite>/<run>/`` with ``per_instance_stats.json`` and
``run_spec.json`` (helm/benchmark/runner.py writes both, and ``stats.json``).

``per_instance_stats.json`` is a list of ``{instance_id, train_trial_index, perturbation?, stats: [{name: {name,
split, ...}, count, sum, sum_squared, min, max, mean, variance, stddev}]}``: one entry per instance and train trial
(HELM's ``num_train_trials``: a new draw of the in-context examples, which shifts every instance together - a run).
The system is ``adapter_spec.model`` of ``run_spec.json``, the task the run spec's name without its ``model=``
(and ``model_deployment=``) arguments; each stat is a metric (its ``mean``). Perturbed instances form a task of their
own (``task [perturbation=NAME]``); stats computed over perturbations (a perturbation in the stat's name) are left
out. The evaluation split (``test``, else the run's split: :func:`evaluation_split`) is the task; the instances of
other splits (``valid``, often a handful) are named in a note and left out. The task's metric is HELM's main
accuracy metric (the first of :data:`PRIMARY` it has), never a bookkeeping stat such as
``num_references``. ``stats.json`` - HELM's own aggregates: per trial the mean over
instances, then the mean (and population SD) over trials - is kept as ``reported``.
"""

from __future__ import annotations

from pathlib import Path

from ...files import find_files
from .base import LogFormat, LogFormatError, ReadResult, dotted, read_json, register, relative, score_value

LAYOUT = ("HELM run folders: benchmark_output/runs/<suite>/<run>/per_instance_stats.json beside run_spec.json "
          "(helm-run)")
PRIMARY = ("exact_match", "quasi_exact_match", "prefix_exact_match", "f1_score", "rouge_l")


def _detect(root: Path) -> list:
    if root.is_file():
        return [root] if root.name == "per_instance_stats.json" else []
    return find_files(root, "per_instance_stats.json")


def task_name(run_spec_name: str) -> str:
    """``mmlu:subject=anatomy,method=multiple_choice_joint,model=openai_gpt2`` ->
    ``mmlu:subject=anatomy,method=multiple_choice_joint`` (the benchmark, whatever the model)."""
    head, _, args = run_spec_name.partition(":")
    kept = [a for a in args.split(",") if a and a.split("=", 1)[0] not in ("model", "model_deployment")]
    return head + (":" + ",".join(kept) if kept else "")


def _splits(entries) -> list:
    return [st.get("name", {}).get("split") for e in entries if isinstance(e, dict)
            for st in e.get("stats") or [] if isinstance(st, dict) and isinstance(st.get("name"), dict)]


def evaluation_split(entries) -> str | None:
    """The split a HELM run is evaluated on: ``test`` where its instances have it, else the split most of its
    stats belong to (a run of ``valid`` only is evaluated on ``valid``)."""
    splits = [sp for sp in _splits(entries) if sp is not None]
    if not splits:
        return None
    if "test" in splits:
        return "test"
    return max(sorted(set(splits)), key=splits.count)


def _spec(folder: Path) -> dict:
    path = folder / "run_spec.json"
    if not path.is_file():
        raise LogFormatError(f"{folder / 'per_instance_stats.json'} has no run_spec.json beside it: HELM writes "
                             "both into a run folder, and the model is named there.")
    spec = read_json(path)
    if not isinstance(spec, dict) or "name" not in spec or "adapter_spec" not in spec:
        raise LogFormatError(f"{path}: expected a HELM run spec (a JSON object with 'name' and 'adapter_spec').")
    return spec


def _read(files: list, options: dict) -> ReadResult:
    root = Path(options["root"])
    out = ReadResult(run_source="HELM train trials (train_trial_index: a new draw of the in-context examples)",
                     run_keys=("train_trial_index", "suite"),
                     shared_keys=("train_trial_index",),   # the seed of the in-context draw: the same for every model
                     repeat_source="none: HELM records one score per instance and train trial")
    left_out = 0
    for path in files:
        folder = path.parent
        spec = _spec(folder)
        system = str(dotted(spec, options["system"]) if options.get("system") else
                     spec["adapter_spec"].get("model") or spec["adapter_spec"].get("model_deployment"))
        if system in ("None", ""):
            raise LogFormatError(f"{folder / 'run_spec.json'}: no adapter_spec.model to name the system by"
                                 + (f" (nor {options['system']!r})" if options.get("system") else "") + ".")
        base_task = task_name(str(spec["name"]))
        suite = relative(folder.parent, root)
        entries = read_json(path)
        if not isinstance(entries, list):
            raise LogFormatError(f"{path}: expected a JSON list of per-instance stats (instance_id, "
                                 "train_trial_index, stats).")
        split = evaluation_split(entries)
        others = sorted({str(sp) for sp in _splits(entries)} - {str(split)})
        if others:
            out.notes.append(f"{base_task} ({system}): the evaluation split {split!r} is the task; the instances of "
                             f"the other split(s) {', '.join(others)} are left out.")
        for k, e in enumerate(entries):
            if not isinstance(e, dict) or "instance_id" not in e or "stats" not in e:
                raise LogFormatError(f"{path}: entry {k} is not a per-instance stat (expected instance_id, "
                                     "train_trial_index, stats).")
            task = base_task
            if e.get("perturbation"):
                task += f" [perturbation={e['perturbation'].get('name')}]"
            trial = e.get("train_trial_index", 0)
            info = {"train_trial_index": trial, "suite": suite}
            rows: dict = {}
            for stat in e["stats"]:
                name = stat.get("name") or {}
                if name.get("perturbation"):
                    left_out += 1
                    continue
                if name.get("split") not in (None, split):
                    continue
                t = task
                value = score_value(stat.get("mean", stat["sum"] / stat["count"] if stat.get("count") else None))
                if value is None:
                    raise LogFormatError(f"{path}: entry {k}, stat {name.get('name')!r}: mean is not a number.")
                row = rows.setdefault(t, {"system": system, "task": t, "repeat": "1", "item": str(e["instance_id"]),
                                          "_file": str(path), "_run_info": info})
                row[str(name.get("name"))] = value
            out.rows.extend(rows.values())
        names = [m for r in out.rows if r["task"] == base_task for m in r if not m.startswith("_")]
        main = next((p for p in PRIMARY if p in names), None)
        if main and base_task not in out.task_primary:
            out.task_primary[base_task] = main
        if out.primary_metric is None:
            out.primary_metric = main
        stats_file = folder / "stats.json"
        if stats_file.is_file():
            for stat in read_json(stats_file):
                name = stat.get("name") or {}
                if name.get("perturbation") or name.get("sub_split") or name.get("split") not in (None, split):
                    continue
                t = base_task
                for statistic in ("mean", "stddev", "count"):
                    if statistic in stat:
                        out.reported.append({"system": system, "task": t, "_run_info": None,
                                             "metric": name.get("name"), "statistic": statistic,
                                             "value": stat[statistic], "source": str(stats_file)})
    if left_out:
        out.notes.append(f"{left_out} per-instance stat(s) computed over perturbations (worst case, robustness) "
                         "left out.")
    return out


FORMAT = register(LogFormat(name="helm", layout=LAYOUT, detect=_detect, read=_read))
