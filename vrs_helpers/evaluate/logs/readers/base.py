"""What every evaluation-log reader shares: the registry of formats, the long table and its description, the
checks of item identity (hashes), and the labels of runs.

The long table has one row per system, task, run, repeat and item, and one column per metric:

- ``system`` - the model (or a field the user names);
- ``task`` - the benchmark;
- ``run`` - a replication that shifts every item together: a training or sampling seed, a few-shot seed, a
  prompt template, a configuration of a grid; each harness invocation (each results file / log) is one run;
- ``repeat`` - an independent draw for the same item within a run (Inspect epochs, several samples per
  question); ``"1"`` where the log has one score per item and run;
- ``item`` - the document / sample / instance id;
- the metric columns (floats; NaN where a task does not have that metric).

Runs and repeats are kept apart (issue 29): repeats identify the system-by-item variation, runs the run-to-run
variation; a repeat is nested in its run.

A run label is shared by the systems only where the log says the run condition is the same for every system
(issue 39): a seed the harness records (lm-eval's ``random_seed``, ``numpy_seed``, ``torch_seed``,
``fewshot_seed``; Inspect's generation ``seed``; HELM's ``train_trial_index``, the seed of its in-context draw) or
a field of the user's run pattern. Runs told apart only by a folder, a file, a date or an evaluation id are each
system's own: their labels then carry the system, so ``--runs auto`` fits them as nested runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...files import open_text, read_text
from ...tables.scores import InputError, natural_key

KEYS = ["system", "task", "run", "repeat", "item"]


class LogFormatError(InputError):
    """An evaluation log that cannot be read: the message names the file (and line) and what was expected."""


@dataclass(frozen=True)
class LogFormat:
    """One registered log format: ``detect(root)`` lists the files of this format under a folder (or the file
    itself), cheaply, without parsing them in full; ``read(files, options)`` returns a :class:`ReadResult`."""

    name: str
    layout: str                                   # what the files look like (used in error messages)
    detect: Callable[[Path], list]
    read: Callable[[list, dict], ReadResult]
    extra: str | None = None                      # the pip extra it needs, if any


FORMATS: dict[str, LogFormat] = {}


def register(fmt: LogFormat) -> LogFormat:
    """Register a log format (once, by name): :func:`vrs_helpers.evaluate.logs.readers.load_eval_logs` detects it."""
    if fmt.name in FORMATS:
        raise ValueError(f"log format {fmt.name!r} is registered twice")
    FORMATS[fmt.name] = fmt
    return fmt


@dataclass
class ReadResult:
    """What a reader returns: rows (dicts with the :data:`KEYS`, metric values, and private keys ``_file``,
    ``_run_info`` (a dict of what identifies the run: seeds, folder, date) and optionally ``_hash`` / ``_prompt``),
    the numbers the harness itself reported, notes, and the primary metric."""

    rows: list = field(default_factory=list)
    reported: list = field(default_factory=list)   # dicts: system, task, _run_info, metric, statistic, value, source
    notes: list = field(default_factory=list)
    primary_metric: str | None = None
    run_source: str = ""
    repeat_source: str = ""
    run_keys: tuple = ()                           # _run_info keys to label runs by, in order of preference
    shared_keys: tuple = ()                        # run_keys that name a run condition shared by the systems (seeds)
    hash_name: str = ""                            # the name of ``_hash`` in the log (doc_hash, sample_hash)
    prompt_hash_name: str = ""                     # the name of ``_prompt`` (differences are a note)
    settings: list = field(default_factory=list)   # dicts: system, task, _run_info, + harness settings
    task_primary: dict = field(default_factory=dict)   # task -> its primary metric, where the harness marks one


@dataclass
class LogDescription:
    """What :func:`~vrs_helpers.evaluate.logs.readers.load_eval_logs` found: the design of the logs."""

    format: str
    files: list
    systems: list
    tasks: list
    runs: dict           # system -> {task: number of runs}
    repeats: dict        # task -> (min, max) repeats per item and run
    items: dict          # task -> number of items
    metrics: dict        # task -> metric columns with values
    primary_metric: str | None
    run_source: str
    repeat_source: str
    notes: list = field(default_factory=list)
    task_primary: dict = field(default_factory=dict)   # task -> its primary metric (the harness's, else its first)

    def to_dict(self) -> dict:
        return {"format": self.format, "files": [str(f) for f in self.files], "systems": self.systems,
                "tasks": self.tasks, "runs": self.runs, "repeats": {k: list(v) for k, v in self.repeats.items()},
                "items": self.items, "metrics": self.metrics, "primary_metric": self.primary_metric,
                "run_source": self.run_source, "repeat_source": self.repeat_source, "notes": list(self.notes),
                "task_primary": dict(self.task_primary)}

    def describe(self) -> str:
        """A readable account: what was read and how it is laid out, before any analysis."""
        return "\n".join(self.lines())

    def lines(self) -> list:
        """:meth:`describe` as its lines (a name with a line break in it stays in its line: the console escapes
        it); a note that is a warning (files of the logs that could not be read) starts with ``WARNING:``."""
        lines = [f"{self.format}: {len(self.files)} file(s); {len(self.systems)} system(s): "
                 f"{', '.join(self.systems)}; {len(self.tasks)} task(s)."]
        for task in self.tasks:
            runs = sorted({v.get(task, 0) for v in self.runs.values()} - {0})
            lo, hi = self.repeats[task]
            rep = f"{lo}" if lo == hi else f"{lo}-{hi}"
            lines.append(f"  {task}: {self.items[task]} items; runs per system {_span(runs)}; repeats per item "
                         f"{rep}; metrics {', '.join(self.metrics[task])}")
        lines.append(f"Runs (shift every item together): {self.run_source}.")
        lines.append(f"Repeats (independent draws per item): {self.repeat_source}.")
        primaries = {self.task_primary.get(t) or self.primary_metric for t in self.tasks} - {None}
        if len(primaries) == 1:
            lines.append(f"Primary metric: {primaries.pop()}.")
        elif primaries:
            lines.append("Primary metric per task: " + "; ".join(
                f"{t}: {self.task_primary.get(t) or self.primary_metric}" for t in self.tasks) + ".")
        lines += [n if str(n).startswith("WARNING:") else f"Note: {n}" for n in self.notes]
        return lines

    def __repr__(self) -> str:
        return self.describe()


def _span(values) -> str:
    if not values:
        return "0"
    return str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"


@dataclass
class EvalLogs:
    """The long table of an evaluation's logs (:data:`KEYS` plus one column per metric), its
    :class:`LogDescription`, and the numbers the harness reported itself (``reported``: system, task, run,
    metric, statistic, value, source)."""

    table: pd.DataFrame
    description: LogDescription
    reported: pd.DataFrame
    settings: dict = field(default_factory=dict)   # (system, task, run) -> harness settings (Inspect reducer)

    def describe(self) -> str:
        return self.description.describe()

    def __repr__(self) -> str:
        return self.describe()

    def scores(self, metric: str | None = None, task: str | None = None) -> pd.DataFrame:
        """One metric as a score table for :func:`vrs_helpers.evaluate.tables.scores.validate`: columns ``system``,
        ``task``, ``run``, ``repeat``, ``item``, ``score`` (rows of tasks without the metric dropped); ``task``
        restricts to one task. Default metric: the primary metric."""
        metric = metric or self.description.primary_metric
        metrics = sorted({m for ms in self.description.metrics.values() for m in ms})
        if metric not in self.table.columns:
            raise InputError(f"No metric {metric!r} in the logs; metrics: {', '.join(metrics)}.")
        out = self.table[KEYS + [metric]].rename(columns={metric: "score"})
        if task is not None:
            if task not in self.description.tasks:
                raise InputError(f"No task {task!r} in the logs; tasks: {', '.join(self.description.tasks)}.")
            out = out[out["task"] == task]
        return out.dropna(subset=["score"]).reset_index(drop=True)

    def design(self, task: str | None = None, metric: str | None = None) -> dict:
        """The design of one task's scores for the mixed model (book 4.3): ``runs`` - some system has several
        runs; ``repeats`` - some item has several scores within a run; ``replications`` - ``["run"]`` with runs
        (the column :func:`~vrs_helpers.evaluate.tables.scores.validate` needs); ``random`` - the random effects,
        ``(1|item)`` plus ``(1|system:run)`` with runs and ``(1|system:item)`` with repeats; ``family`` -
        ``binomial`` for 0/1 scores, else ``gaussian``. ``task`` may be omitted when there is one."""
        if task is None and len(self.description.tasks) > 1:
            raise InputError(f"The logs hold several tasks ({', '.join(self.description.tasks)}); name one.")
        d = self.scores(metric, task=task or self.description.tasks[0])
        runs = bool(d.groupby("system")["run"].nunique().max() > 1)
        repeats = bool(d.groupby(["system", "run", "item"]).size().max() > 1)
        random = "(1|item)" + (" + (1|system:run)" if runs else "") + (" + (1|system:item)" if repeats else "")
        return {"runs": runs, "repeats": repeats, "replications": ["run"] if runs else [], "random": random,
                "family": "binomial" if d["score"].isin((0.0, 1.0)).all() else "gaussian"}


def read_json(path: Path):
    """A whole JSON file, or an error naming the file, the line and what was expected."""
    try:
        text = read_text(path)   # decompressed by its suffix; not UTF-8: where, and what to do
    except InputError as exc:
        raise LogFormatError(str(exc)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LogFormatError(f"{path}, line {exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno}).") \
            from None
    except RecursionError:
        raise LogFormatError(f"{path}: JSON nested deeper than the parser follows (about 1,000 levels): not an "
                             "evaluation log. Check the file (a damaged or hostile log?).") from None


def peek_json(path: Path, size: int = 4096) -> str:
    """The first ``size`` characters of a text file ('' when it cannot be read): detection looks at this only."""
    try:
        with open_text(path, errors="replace") as handle:
            return handle.read(size)
    except (OSError, EOFError, InputError):
        return ""


def first_json_line(path: Path):
    """The first non-empty line of a file parsed as JSON, or None (detection only: errors come at reading)."""
    try:
        with open_text(path, errors="replace") as handle:
            for line in iter(lambda: handle.readline(16 << 20), ""):   # a first line of gigabytes is no log
                if line.strip():
                    return json.loads(line)
    except (OSError, EOFError, InputError, json.JSONDecodeError, RecursionError):
        return None   # a damaged or hostile file is not detected; reading it says what is wrong with it
    return None


def score_value(value):
    """A per-item metric value as a float: numbers and booleans as such; None and NaN as NaN; anything else
    (lists, dicts: corpus-level metrics such as BLEU store their arguments per item) as None = not a score."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if value is None:
        return math.nan
    return None


def dotted(record, path: str):
    """``record['a']['b']`` for ``path='a.b'`` (None when a key is missing)."""
    cur = record
    for key in path.split("."):
        if isinstance(cur, dict) and key in cur:
            cur = cur[key]
        else:
            return None
    return cur


def _frozen(info) -> str:
    return json.dumps(info, sort_keys=True, default=str)


def label_runs(rows: list, reported: list = (), preferred: Sequence[str] = (), shared: Sequence[str] = ()) -> list:
    """Fill ``row['run']`` from ``row['_run_info']`` (a dict; the rows of one log share it): within each (system,
    task), the runs are the distinct ``_run_info`` dicts. Their labels are built from the fewest keys whose values
    tell the runs of every (system, task) apart, the ``preferred`` keys first (pattern fields, seeds), so labels
    read ``seed=1`` or ``folder=out_s2``; when no (system, task) has several runs, every run is ``"1"``.
    ``reported`` entries (the harness's own numbers, with ``system``, ``task`` and ``_run_info``) get the same
    labels (``_run_info`` None: a number over all runs, labelled ``all``); those of a run without rows are
    dropped. Returns the keys the labels are made of.

    ``shared``: the keys whose values name one run condition for every system (a seed the log records). When the
    labels are made of other keys too (a folder, a date) and some label would be used by two systems, every label
    is prefixed by its system (``model-a: folder=out_s2``): nothing in the log says those runs are shared, so
    ``--runs auto`` fits them as each system's own (nested)."""
    infos: dict = {}
    for r in rows:
        infos.setdefault((r["system"], r["task"]), {}).setdefault(_frozen(r["_run_info"]), r["_run_info"])
    varying: list = []
    for runs in infos.values():
        if len(runs) > 1:
            values = list(runs.values())
            for k in sorted({k for v in values for k in v}):
                if len({_frozen(v.get(k)) for v in values}) > 1 and k not in varying:
                    varying.append(k)
    order = [k for k in preferred if k in varying] + [k for k in varying if k not in preferred]
    chosen: list = []
    for k in order:   # the fewest keys that tell the runs of every group apart
        chosen.append(k)
        if all(len({tuple(_frozen(v.get(c)) for c in chosen) for v in runs.values()}) == len(runs)
               for runs in infos.values()):
            break
    labels = {(key, frozen): ("1" if not chosen else ",".join(f"{c}={info.get(c)}" for c in chosen))
              for key, runs in infos.items() for frozen, info in runs.items()}
    if chosen and not set(chosen) <= set(shared):
        users: dict = {}
        for (system, task), label in {(key, label) for (key, _), label in labels.items()}:
            users.setdefault((task, label), set()).add(system)
        if any(len(v) > 1 for v in users.values()):
            labels = {(key, frozen): f"{key[0]}: {label}" for (key, frozen), label in labels.items()}
    for r in rows:
        r["run"] = labels[((r["system"], r["task"]), _frozen(r["_run_info"]))]
    kept = []
    for e in reported:
        label = "all" if e["_run_info"] is None and (e["system"], e["task"]) in infos else \
            labels.get(((e["system"], e["task"]), _frozen(e["_run_info"])))
        if label is not None:
            kept.append({**{k: v for k, v in e.items() if k != "_run_info"}, "run": label})
    if isinstance(reported, list):
        reported[:] = kept
    return chosen


def _shared_account(chosen, shared, frame: pd.DataFrame) -> str:
    """What the run labels say about runs shared by the systems, and so what ``--runs auto`` fits: crossed runs
    in a task where every run label is used by two or more systems, else nested."""
    if not chosen:
        return ""
    if not set(chosen) <= set(shared):
        return ("; nothing in the logs says a run is shared by the systems, so each system's runs are its own "
                "(labelled with the system; nested runs under --runs auto)")
    per_task = {t: bool((g.groupby("run")["system"].nunique() >= 2).all()) for t, g in frame.groupby("task", sort=False)
                if g.groupby("system")["run"].nunique().max() > 1}
    crossed = [t for t, v in per_task.items() if v]
    said = f"; the same {', '.join(chosen)} is the same run label for every system"
    if len(crossed) == len(per_task):
        return said + " and every label is shared by the systems (crossed runs under --runs auto)"
    if not crossed:
        return said + "; no task has every label shared by the systems (nested runs under --runs auto)"
    return said + f"; every label shared (crossed runs under --runs auto) in {', '.join(crossed)}, else nested"


def check_hashes(rows: list, what: str, note_only: bool = False, notes: list | None = None) -> int:
    """Items are the same across systems and runs where the log records a hash of the item: the same (task, item)
    with two different hashes is an error naming the first few (or, with ``note_only``, a note). ``what``: the
    hash's name in the log (``doc_hash``). Rows carry it as ``_hash`` (or ``_prompt`` for note-only checks).
    Returns the number of items checked."""
    key = "_prompt" if note_only else "_hash"
    seen: dict = {}
    clashes: list = []
    for r in rows:
        h = r.get(key)
        if h is None:
            continue
        k = (r["task"], r["item"])
        first = seen.setdefault(k, (h, r["system"], r["_file"]))
        if first[0] != h and (not clashes or clashes[-1][0] != k):
            clashes.append((k, first, (h, r["system"], r["_file"])))
    if clashes:
        unique = {c[0]: c for c in clashes}
        if note_only:
            tasks = sorted({k[0] for k in unique})
            notes.append(f"{what} differs between systems or runs for {len(unique)} item(s) of "
                         f"{', '.join(tasks)} (chat templates or few-shot seeds differ; the items themselves are "
                         "the same).")
        else:
            shown = list(unique.values())[:3]
            desc = "; ".join(f"task {t!r} item {i!r}: {a[0][:12]}... in {a[1]} ({a[2]}) but {b[0][:12]}... in "
                             f"{b[1]} ({b[2]})" for (t, i), a, b in shown)
            raise LogFormatError(f"{len(unique)} item(s) have a different {what} in different logs, so the same "
                                 f"id names different items: {desc}. Evaluate every system on the same version of "
                                 "the data set, or drop the items that differ.")
    return len(seen)


def assemble(fmt: str, files: list, result: ReadResult, metrics_wanted=None, run_keys=()) -> EvalLogs:
    """The :class:`EvalLogs` of a reader's rows: runs labelled (:func:`label_runs`), item hashes checked
    (:func:`check_hashes`), duplicate (system, task, run, repeat, item) rows an error naming the files; metric
    columns in the order first seen, then the item fields the user asked for (``_fields``)."""
    rows = result.rows
    shared = list(run_keys) + list(result.shared_keys)
    if rows:
        reported, settings = list(result.reported), list(result.settings)
        chosen = label_runs(rows, reported, preferred=list(run_keys) + list(result.run_keys), shared=shared)
        label_runs(rows, settings, preferred=list(run_keys) + list(result.run_keys), shared=shared)
        if result.hash_name:
            check_hashes(rows, result.hash_name)
        if result.prompt_hash_name:
            check_hashes(rows, result.prompt_hash_name, note_only=True, notes=result.notes)
    if not rows:
        raise LogFormatError(f"The {fmt} logs ({', '.join(str(f) for f in files[:3])}"
                             f"{', ...' if len(files) > 3 else ''}) hold no scored items."
                             + "".join(f" {n}" for n in result.notes[:3]))
    metric_cols: list = []
    for r in rows:
        for k in r:
            if k not in KEYS and not k.startswith("_") and k not in metric_cols:
                metric_cols.append(k)
    if not metric_cols:
        raise LogFormatError(f"The {fmt} logs ({files[0]}{', ...' if len(files) > 1 else ''}) hold no numeric scores: "
                             + "; ".join(result.notes[:3]))
    if metrics_wanted:
        missing = [m for m in metrics_wanted if m not in metric_cols]
        if missing:
            raise InputError(f"No metric {', '.join(map(repr, missing))} in the {fmt} logs; metrics: "
                             f"{', '.join(metric_cols)}.")
        metric_cols = list(metrics_wanted)
    frame = pd.DataFrame.from_records(rows, columns=KEYS + metric_cols + ["_file"])
    for k in KEYS:
        frame[k] = frame[k].astype(str)
    field_names = list(dict.fromkeys(k for r in rows for k in (r.get("_fields") or {})))
    for name in field_names:   # item fields the user asked for (a cluster id, a subject): strings, NA if absent
        column = name if name not in frame.columns else f"field_{name}"
        values = [(r.get("_fields") or {}).get(name) for r in rows]
        if all(v is None for v in values):
            result.notes.append(f"no item has a field {name!r}; no column {column!r}.")
            continue
        frame[column] = pd.Series([None if v is None else str(v) for v in values], index=frame.index)
    for m in metric_cols:
        frame[m] = pd.to_numeric(frame[m], errors="coerce").astype(float)
    dup = frame.duplicated(KEYS, keep=False)
    if dup.any():
        first = frame[dup].sort_values(KEYS).head(2)
        where = " and ".join(sorted(set(first["_file"])))
        row = {k: first.iloc[0][k] for k in KEYS}
        raise LogFormatError(f"{int(dup.sum())} rows repeat a (system, task, run, repeat, item), e.g. {row} in "
                             f"{where}: the same log is read twice, or two logs of one run overlap. Remove the "
                             "copy, or give the runs as a pattern (runs/{system}/seed={seed}/).")
    frame = frame.drop(columns="_file")
    frame = frame.dropna(subset=metric_cols, how="all").reset_index(drop=True)
    systems = sorted(frame["system"].unique())
    tasks = list(dict.fromkeys(frame["task"]))
    runs = {s: {t: int(g["run"].nunique()) for t, g in frame[frame["system"] == s].groupby("task", sort=False)}
            for s in systems}
    per = frame.groupby(["system", "task", "run", "item"], sort=False).size().groupby(level="task", sort=False)
    repeats = {t: (int(v.min()), int(v.max())) for t, v in per}
    items = {t: int(g["item"].nunique()) for t, g in frame.groupby("task", sort=False)}
    metrics = {t: [m for m in metric_cols if g[m].notna().any()] for t, g in frame.groupby("task", sort=False)}
    notes = list(result.notes)
    for t in tasks:
        sets = {s: set(g["item"]) for s, g in frame[frame["task"] == t].groupby("system")}
        union = set().union(*sets.values())
        lacking = {s: sorted(union - v, key=natural_key) for s, v in sets.items() if union - v}
        if lacking:
            notes.append(f"task {t}: not every system has every item ("
                         + "; ".join(f"{s} lacks {len(n)}: {', '.join(n[:5])}{', ...' if len(n) > 5 else ''}"
                                     for s, n in lacking.items())
                         + "); it is analysed on the items every system has.")
    task_primary = {}
    for r in rows:   # the harness's primary metric of each task, else the first metric its rows carry
        t = str(r["task"])
        if t not in task_primary and t in metrics:
            given = result.task_primary.get(r["task"])
            task_primary[t] = given if given in metrics[t] else next(
                (k for k in r if k in metrics[t]), metrics[t][0] if metrics[t] else None)
    primary = result.primary_metric if result.primary_metric in metric_cols else (metric_cols[0] if metric_cols
                                                                                   else None)
    desc = LogDescription(format=fmt, files=[str(f) for f in files], systems=systems, tasks=tasks, runs=runs,
                          repeats=repeats, items=items, metrics=metrics, primary_metric=primary,
                          run_source=(result.run_source or "one run per log")
                          + (f"; told apart by {', '.join(chosen)}" if chosen else "; one run per system and task")
                          + _shared_account(chosen, shared, frame),
                          repeat_source=result.repeat_source or "none (one score per item and run)", notes=notes,
                          task_primary=task_primary)
    reported = pd.DataFrame(reported, columns=["system", "task", "run", "metric", "statistic", "value", "source"])
    reported["value"] = pd.to_numeric(reported["value"], errors="coerce").astype(float)
    settings = {(e["system"], e["task"], e["run"]): {k: v for k, v in e.items() if k not in ("system", "task", "run")}
                for e in settings}
    return EvalLogs(table=frame, description=desc, reported=reported, settings=settings)


def relative(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` when it is inside it (for labels and messages)."""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


def finite_or_nan(x) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v if np.isfinite(v) else math.nan
