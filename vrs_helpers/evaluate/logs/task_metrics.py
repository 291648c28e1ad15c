"""Which metric each task of a harness run is analysed with (issue 40).

A harness run holds tasks whose metrics have different names (lm-eval ``gsm8k``: ``exact_match/strict-match``
beside ``mmlu_pro``: ``exact_match/custom-extract``; two Inspect tasks with different scorers; a HELM scenario
with ``exact_match`` and one with ``f1_score``). Every task gets its own metric:

- ``--response task=metric`` names the metric of one task; ``--response metric [metric ...]`` names metrics for
  every task that has them (a task with several of them is analysed once per metric: several responses of one
  task, never several tasks);
- otherwise the task's primary metric as its harness marks it (lm-eval: the task's first metric; Inspect: the
  task's first scorer; HELM: its main accuracy metric), when it is accuracy-like (:func:`accuracy_like`); else
  the first accuracy-like metric of the task (an Inspect task's first scorer whatever its name: Inspect's metrics
  are computed over the scorer's values); never a bookkeeping statistic (HELM's ``num_references``,
  ``num_prompt_tokens``, ``inference_runtime``, ...);
- a task with no accuracy-like metric, or without the metric named, is not analysed, with its reason (the CLI
  prints it; the task table lists it).
"""

from __future__ import annotations

import re

from ..tables.scores import InputError

BOOKKEEPING = re.compile(
    r"^(num_|n_|count|batch_size|inference|training_|finish_reason|logprob|max_prob|prompt_truncated|predicted_|"
    r"perplexity|bits_per|byte|total_|estimated_|input_|output_|reasoning_|tokens|latency|cost)|"
    r"(_stderr|_tokens|_length|_runtime|_time|_count)$")
ACCURACY = re.compile(
    r"(^|[_\-./ ])(acc|accuracy|exact_match|em|f1|f1_score|correct|is_correct|score|pass|match|mc\d|rouge\w*|"
    r"bleu\w*|chrf\w*|mean|win_rate|judge\w*|includes|choice|model_graded\w*|grade\w*)($|[_\-./@ ,\[])",
    re.IGNORECASE)


def base_name(metric: str) -> str:
    """``exact_match/strict-match`` -> ``exact_match``; ``choice/accuracy`` -> ``choice`` (a filter or a scorer's
    key after the first slash)."""
    return str(metric).split("/")[0].split(",")[0].split("[")[0]


def accuracy_like(metric: str) -> bool:
    """A metric that scores an answer (accuracy, exact match, F1, a scorer's value), not a count of tokens or
    references or a run time."""
    name = str(metric)
    parts = [name, base_name(name)] + name.split("/")[1:]
    if BOOKKEEPING.search(base_name(name)):
        return False
    return any(ACCURACY.search(p) for p in parts)


def parse_response(response) -> tuple[list, dict]:
    """``--response`` entries: (metrics for every task, {task: [metrics]}) from ``metric`` and ``task=metric``."""
    if response is None:
        return [], {}
    entries = [response] if isinstance(response, str) else list(response)
    common, per_task = [], {}
    for e in entries:
        e = str(e)
        if "=" in e:
            task, _, metric = e.rpartition("=")
            if not task or not metric:
                raise InputError(f"--response {e!r}: expected a metric or task=metric.")
            per_task.setdefault(task, []).append(metric)
        else:
            common.append(e)
    return common, per_task


def choose_metrics(description, response=None) -> tuple[dict, list]:
    """({task: [metrics]} of the tasks analysed, [{task, metric, reason}] of those not analysed) for a
    :class:`~vrs_helpers.evaluate.logs.readers.LogDescription`; ``response``: None, a metric, or a list of metrics and
    ``task=metric`` entries. A task or metric named that the logs do not have is an error listing what they
    have; so is a run in which no task can be analysed."""
    tasks = list(description.tasks)
    metrics = {t: list(description.metrics.get(t, [])) for t in tasks}
    common, per_task = parse_response(response)
    for task, wanted in per_task.items():
        if task not in metrics:
            raise InputError(f"--response {task}=...: no task {task!r} in the logs; tasks: {', '.join(tasks)}.")
        missing = [m for m in wanted if m not in metrics[task]]
        if missing:
            raise InputError(f"--response {task}={missing[0]}: task {task!r} has no metric {missing[0]!r}; its "
                             f"metrics: {', '.join(metrics[task])}.")
    if common and not any(m in metrics[t] for t in tasks if t not in per_task for m in common):
        if not per_task:
            raise InputError(f"No task has the metric {' or '.join(map(repr, common))}; metrics per task: "
                             + "; ".join(f"{t}: {', '.join(m)}" for t, m in metrics.items()) + ".")
    chosen, skipped = {}, []
    task_primary = getattr(description, "task_primary", None) or {}
    for task in tasks:
        have = metrics[task]
        if task in per_task:
            chosen[task] = list(dict.fromkeys(per_task[task]))
        elif common:
            found = [m for m in common if m in have]
            if found:
                chosen[task] = found
            else:
                skipped.append({"task": task, "metric": "", "reason": f"it has no metric {' or '.join(common)} "
                                f"(its metrics: {', '.join(have)}); name one with --response '{task}=METRIC'"})
        else:
            pick = _default(task_primary.get(task), description.primary_metric, have,
                            scorer_is_metric=getattr(description, "format", "") == "inspect")
            if pick:
                chosen[task] = [pick]
            else:
                skipped.append({"task": task, "metric": "", "reason": "no accuracy-like metric (its metrics: "
                                f"{', '.join(have)}); name one with --response '{task}=METRIC'"})
    if not chosen:
        raise InputError("No task can be analysed: " + "; ".join(f"task {s['task']}: {s['reason']}"
                                                                   for s in skipped) + ".")
    return chosen, skipped


def _default(task_primary, primary, have, scorer_is_metric: bool = False) -> str | None:
    """The task's primary metric when accuracy-like, else its first accuracy-like metric. ``scorer_is_metric``
    (Inspect, issue 52): every metric column is a scorer's values, over which Inspect computes its metrics
    (accuracy, stderr, ...), so the task's first scorer is its metric whatever its name (``starsim_scorer``)."""
    if scorer_is_metric and task_primary in have and not BOOKKEEPING.search(str(task_primary).split("/")[-1]):
        return task_primary
    for cand in (task_primary, primary):
        if cand in have and accuracy_like(cand):
            return cand
    return next((m for m in have if accuracy_like(m)), None)
