"""Write a per-item score table the way each harness writes its logs: test fixtures, the samples of workbook 08,
and a way to try ``vrs analyze`` on harness logs before running a harness.

- :func:`simulate_binary` - 0/1 scores of systems on items over runs and repeats from a logistic mixed model
  (item difficulty, system-by-item and run effects), as a long table (``system, task, run, repeat, item, score``);
- :func:`write_lm_eval` - ``OUT/[seed<run>/]<model>/results_<date>.json`` + ``samples_<task>_<date>.jsonl``, field
  by field as lm-evaluation-harness writes them (lm_eval/loggers/evaluation_tracker.py, lm_eval/evaluator.py);
- :func:`write_inspect` - Inspect logs written by inspect_ai itself: an ``inspect_ai.eval`` of the items with the
  ``mockllm`` provider answering as the table says (so ``results`` hold what Inspect computes and prints);
- :func:`write_helm` - ``benchmark_output/runs/<suite>/<run>/`` with ``run_spec.json``, ``per_instance_stats.json``
  and ``stats.json`` as helm/benchmark/runner.py and metrics/metric.py write them;
- :func:`write_every_eval_ever` - instance-level JSON lines in the Every Eval Ever schema.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit, logit

from ..scores import InputError

KEYS = ["system", "task", "run", "repeat", "item"]


def simulate_binary(seed: int = 0, systems=("model-a", "model-b"), tasks=("arith",), items: int = 40, runs: int = 1,
                    repeats: int = 1, accuracy=(0.6, 0.7), item_sd: float = 1.0, system_item_sd: float = 0.5,
                    run_sd: float = 0.0, clusters: int = 0) -> pd.DataFrame:
    """0/1 scores: P(correct) = expit(logit(accuracy_s) + b_ti + c_sti + a_str) with item effects b ~ N(0,
    item_sd^2), system-by-item effects c ~ N(0, system_item_sd^2), run effects a ~ N(0, run_sd^2) (a run shifts
    every item of a system and task together), and ``repeats`` independent draws per item and run. Runs are
    labelled 1..runs, repeats 1..repeats, items 0..items-1 (as lm-eval's doc ids); ``clusters`` > 0 adds a
    ``cluster`` column (items in consecutive blocks)."""
    rng = np.random.default_rng(seed)
    acc = np.broadcast_to(np.asarray(accuracy, dtype=float), (len(systems),))
    rows = []
    for task in tasks:
        b = rng.normal(0, item_sd, items)
        for s, system in enumerate(systems):
            c = rng.normal(0, system_item_sd, items)
            for r in range(1, runs + 1):
                a = rng.normal(0, run_sd)
                p = expit(logit(acc[s]) + b + c + a)
                for k in range(1, repeats + 1):
                    y = (rng.random(items) < p).astype(float)
                    rows += [(system, task, str(r), str(k), str(i), y[i]) for i in range(items)]
    out = pd.DataFrame(rows, columns=KEYS + ["score"])
    if clusters:
        out["cluster"] = "c" + (out["item"].astype(int) * clusters // items).astype(str)
    return out


def _groups(table: pd.DataFrame, name: str, one_repeat: bool):
    missing = [k for k in KEYS + ["score"] if k not in table.columns]
    if missing:
        raise InputError(f"write_{name}: the table needs columns {KEYS + ['score']}; missing {missing}.")
    if one_repeat and table["repeat"].nunique() > 1:
        raise InputError(f"{name} logs hold one score per item and run; the table has repeats.")
    return table.groupby(["system", "run"], sort=False)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _doc(task: str, item: str, fields: dict) -> dict:
    return {"question": f"{task} question {item}?", "choices": ["no", "yes"], "answer": 1, **fields}


def lm_eval_stderr(arr) -> float:
    """lm-eval's ``mean_stderr`` as lm_eval/api/metrics.py writes it (sample_stddev(arr) / sqrt(len(arr)))."""
    mu = sum(arr) / len(arr)
    return math.sqrt(sum([(x - mu) ** 2 for x in arr]) / (len(arr) - 1)) / math.sqrt(len(arr))


def write_lm_eval(table: pd.DataFrame, out_dir, metric: str = "acc", run_dir: str | None = None) -> list:
    """lm-evaluation-harness output for every system and run: ``out_dir/<run_dir>/<model>/results_<date>.json`` and
    one ``samples_<task>_<date>.jsonl`` per task. ``run_dir`` (a format string with ``{run}`` and ``{system}``)
    defaults to ``seed{run}`` when there are several runs, else nothing (lm-eval's own layout); the run is the
    ``--seed`` of the invocation (all four seeds), few-shot examples differ between seeds (so do prompt hashes).
    Columns beyond the keys and ``score`` become fields of each document. Returns the results files written."""
    written = []
    extra = [c for c in table.columns if c not in KEYS + ["score"]]
    if run_dir is None:
        run_dir = "seed{run}" if table["run"].nunique() > 1 else ""
    for g, ((system, run), part) in enumerate(_groups(table, "lm_eval", one_repeat=True)):
        sanitized = re.sub(r"[\"<>:/|\\?*\[\]]+", "__", system)
        folder = Path(out_dir) / run_dir.format(run=run, system=system) / sanitized
        folder.mkdir(parents=True, exist_ok=True)
        date = f"2024-06-{1 + g % 28:02d}T12-{g // 28 % 60:02d}-00.{g:06d}"
        seed = int(run) if str(run).isdigit() else 1234
        results: dict = {"results": {}, "group_subtasks": {}, "configs": {}, "versions": {}, "n-shot": {},
                         "higher_is_better": {}, "n-samples": {}}
        task_hashes = {}
        for task, rows in part.groupby("task", sort=False):
            rows = rows.sort_values("item", key=lambda s: s.astype(int) if s.str.isdigit().all() else s)
            scores = [float(v) for v in rows["score"]]
            results["results"][task] = {"alias": task, f"{metric},none": sum(scores) / len(scores),
                                        f"{metric}_stderr,none": lm_eval_stderr(scores) if len(scores) > 1 else "N/A"}
            results["group_subtasks"][task] = []
            results["configs"][task] = {"task": task, "output_type": "multiple_choice", "num_fewshot": 2,
                                        "metric_list": [{"metric": metric, "aggregation": "mean",
                                                         "higher_is_better": True}]}
            results["versions"][task] = 1.0
            results["n-shot"][task] = 2
            results["higher_is_better"][task] = {metric: True}
            results["n-samples"][task] = {"original": len(rows), "effective": len(rows)}
            shots = np.random.default_rng(seed).choice(1000, 2, replace=False)
            lines, hashes = [], []
            for _, r in rows.iterrows():
                doc = _doc(task, r["item"], {c: r[c] for c in extra})
                prompt = "".join(f"{task} example {k}? yes\n\n" for k in shots) + doc["question"]
                ll = [-2.0, -0.5] if r["score"] == 1 else [-0.5, -2.0]
                example = {"doc_id": int(r["item"]) if str(r["item"]).isdigit() else r["item"], "doc": doc,
                           "target": "1", "arguments": {f"gen_args_{i}": {"arg_0": prompt, "arg_1": f" {c}"}
                                                        for i, c in enumerate(doc["choices"])},
                           "resps": [[[str(v), "False"]] for v in ll], "filtered_resps": [[str(v), "False"]
                                                                                           for v in ll],
                           "filter": "none", "metrics": [metric],
                           "doc_hash": _sha(json.dumps(doc, indent=2, ensure_ascii=False)),
                           "prompt_hash": _sha(prompt), "target_hash": _sha("1"), metric: float(r["score"])}
                hashes.append(example["doc_hash"] + example["prompt_hash"] + example["target_hash"])
                lines.append(json.dumps(example, ensure_ascii=False))
            task_hashes[task] = _sha("".join(hashes))
            (folder / f"samples_{task}_{date}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        results["config"] = {"model": "hf", "model_args": f"pretrained={system}", "batch_size": 1, "batch_sizes": [],
                             "device": "cpu", "use_cache": None, "limit": None, "bootstrap_iters": 100000,
                             "gen_kwargs": None, "random_seed": seed, "numpy_seed": seed, "torch_seed": seed,
                             "fewshot_seed": seed}
        results.update({"git_hash": "0000000", "date": 1717243200.0 + g, "task_hashes": task_hashes,
                        "model_source": "hf", "model_name": system, "model_name_sanitized": sanitized,
                        "system_instruction": None, "system_instruction_sha": None, "fewshot_as_multiturn": False,
                        "chat_template": None, "chat_template_sha": None, "start_time": 0.0, "end_time": 1.0,
                        "total_evaluation_time_seconds": "1.0"})
        path = folder / f"results_{date}.json"
        path.write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")
        written.append(path)
    return written


def write_inspect(table: pd.DataFrame, out_dir, log_format: str = "eval", cluster: str | None = None,
                  slim: bool = False) -> list:
    """Inspect logs written by ``inspect_ai.eval`` itself, one per system, task and run: the samples are the
    table's items (input ``<task> question <item>?``, target ``yes``, the other columns as sample metadata), the
    epochs its repeats, the model ``mockllm/<system>`` answering ``yes`` where the score is 1 (repeat k of an item
    is its k-th answer), the scorer ``match`` with the metrics accuracy and stderr (and ``stderr(cluster=...)``
    with ``cluster``); the run is the generation seed. ``slim``: the logs rewritten by ``write_eval_log`` without
    the samples' event transcripts (small files to commit; scores, metadata and results unchanged). Returns the
    log files."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.log import read_eval_log, write_eval_log
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import accuracy, match, stderr
    from inspect_ai.solver import generate

    extra = [c for c in table.columns if c not in KEYS + ["score"]]
    written = []
    for (system, task, run), part in table.groupby(["system", "task", "run"], sort=False):
        epochs = part.groupby("item")["repeat"].nunique()
        if epochs.nunique() != 1:
            raise InputError("write_inspect: every item needs the same number of repeats (Inspect epochs).")
        answers = {item: list(g.sort_values("repeat", key=lambda s: s.astype(int))["score"])
                   for item, g in part.groupby("item", sort=False)}
        first = part.drop_duplicates("item")
        samples = [Sample(id=str(r["item"]), input=f"{task} question {r['item']}?", target="yes",
                          metadata={c: r[c] for c in extra}) for _, r in first.iterrows()]
        calls: dict = {}

        def outputs(messages, tools, tool_choice, config, answers=answers, calls=calls, system=system):
            item = messages[-1].text.rsplit(" ", 1)[-1].rstrip("?")
            k = calls[item] = calls.get(item, 0) + 1
            out = ModelOutput.from_content(model=system, content="yes" if answers[item][k - 1] == 1 else "no")
            out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
            return out

        metrics = [accuracy(), stderr()] + ([stderr(cluster=cluster)] if cluster else [])
        spec = Task(dataset=samples, solver=generate(), scorer=match(), metrics=metrics, epochs=int(epochs.iloc[0]),
                    name=task)
        logs = eval(spec, model=get_model(f"mockllm/{system}", custom_outputs=outputs), log_dir=str(out_dir),
                    log_format=log_format, display="none", max_samples=1, max_connections=1,
                    seed=int(run) if str(run).isdigit() else None, score_display=False)
        if logs[0].status != "success":
            raise RuntimeError(f"inspect_ai.eval failed: {logs[0].error}")
        if slim:
            log = read_eval_log(logs[0].location)
            for sample in log.samples:
                sample.events, sample.attachments = [], {}
            write_eval_log(log, logs[0].location)
        written.append(Path(logs[0].location))
    return written


def _stat(name: str, values, split: str = "test") -> dict:
    """A HELM ``Stat`` (helm/benchmark/metrics/statistic.py) of ``values`` as ``asdict_without_nones`` writes it:
    count, sum, sum_squared, min, max, mean, and the population variance and SD."""
    values = [float(v) for v in values]
    n, s, ss = len(values), sum(values), sum(v * v for v in values)
    mean = s / n
    variance = ss / n - mean ** 2
    return {"name": {"name": name, "split": split}, "count": n, "sum": s, "sum_squared": ss, "min": min(values),
            "max": max(values), "mean": mean, "variance": variance, "stddev": math.sqrt(max(variance, 0.0))}


def write_helm(table: pd.DataFrame, out_dir, suite: str = "v1", metric: str = "exact_match") -> list:
    """HELM run folders ``out_dir/benchmark_output/runs/<suite>/<run spec name>/`` per system and task (HELM names
    the folder ``<task>:model=<model>``; here ':' is written '-' so that the folder can be checked out on any file
    system - the reader takes the names from ``run_spec.json``). The runs of the table are HELM's train trials
    (train_trial_index 0, 1, ... in the order of the run labels).
    ``stats.json`` aggregates as HELM does: per trial the mean over instances, then these means merged over
    trials (count = trials). Returns the run folders."""
    folders = []
    _groups(table, "helm", one_repeat=True)
    for (system, task), part in table.groupby(["system", "task"], sort=False):
        name = f"{task}{',' if ':' in task else ':'}model={system.replace('/', '_')}"
        folder = Path(out_dir) / "benchmark_output" / "runs" / suite / name.replace(":", "-")
        folder.mkdir(parents=True, exist_ok=True)
        trials = sorted(part["run"].unique(), key=lambda s: (len(s), s))
        spec = {"name": name, "scenario_spec": {"class_name": f"helm.benchmark.scenarios.{task}.Scenario", "args": {}},
                "adapter_spec": {"method": "generation", "max_train_instances": 5, "num_outputs": 1,
                                 "num_train_trials": len(trials), "num_trials": 1, "model_deployment": system,
                                 "model": system, "temperature": 0.0, "max_tokens": 10},
                "metric_specs": [{"class_name": "helm.benchmark.metrics.basic_metrics.BasicGenerationMetric",
                                  "args": {"names": [metric]}}], "groups": [task]}
        (folder / "run_spec.json").write_text(json.dumps(spec, indent=2))
        entries, trial_means = [], []
        for t, run in enumerate(trials):
            rows = part[part["run"] == run]
            for _, r in rows.iterrows():
                entries.append({"instance_id": f"id{r['item']}", "train_trial_index": t,
                                "stats": [_stat("num_train_instances", [5]), _stat(metric, [r["score"]])]})
            trial_means.append(float(rows["score"].mean()))
        (folder / "per_instance_stats.json").write_text(json.dumps(entries, indent=2))
        stats = [_stat("num_train_instances", [5.0] * len(trials)), _stat(metric, trial_means)]
        (folder / "stats.json").write_text(json.dumps(stats, indent=2))
        folders.append(folder)
    return folders


def write_every_eval_ever(table: pd.DataFrame, out_dir) -> list:
    """Every Eval Ever instance-level files ``out_dir/data/<task>/<developer>/<model>/<uuid>_samples.jsonl``, one
    per system, task and run (the run is the ``evaluation_id``; repeats go to ``metadata.epoch``)."""
    written = []
    many = table["repeat"].nunique() > 1
    for (system, task, run), part in table.groupby(["system", "task", "run"], sort=False):
        developer, _, model = system.rpartition("/")
        evaluation_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"vrs/{system}/{task}/{run}"))
        folder = Path(out_dir) / "data" / task / (developer or "unknown") / model
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for _, r in part.iterrows():
            raw = f"{task} question {r['item']}?"
            answer = "yes" if r["score"] == 1 else "no"
            rec = {"schema_version": "0.3.0", "evaluation_id": evaluation_id, "model_id": system,
                   "evaluation_name": task, "sample_id": str(r["item"]),
                   "sample_hash": _sha(json.dumps({"raw": raw, "reference": ["yes"]}, sort_keys=True,
                                                  separators=(",", ":"))),
                   "interaction_type": "single_turn", "input": {"raw": raw, "reference": ["yes"]},
                   "output": {"raw": [answer]},
                   "answer_attribution": [{"turn_idx": 0, "source": "output.raw", "extracted_value": answer,
                                           "extraction_method": "exact_match", "is_terminal": True}],
                   "evaluation": {"score": float(r["score"]), "is_correct": bool(r["score"] == 1)}}
            if many:
                rec["metadata"] = {"epoch": str(r["repeat"])}
            lines.append(json.dumps(rec))
        path = folder / f"{evaluation_id}_samples.jsonl"
        path.write_text("\n".join(lines) + "\n")
        written.append(path)
    return written
