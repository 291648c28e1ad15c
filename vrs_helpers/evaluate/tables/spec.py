"""The analysis of your evaluation results, specified once: :class:`AnalysisSpec` (``vrs analyze``, workbook 07,
:func:`vrs_helpers.evaluate.analysis.analyze`).

A spec names the data and the role of each column (responses, system, item, the replication columns that identify
a run, data properties), the tests and their options. It is built by the CLI or the Python API, checked as it is
built (option values: :meth:`AnalysisSpec.__post_init__`), and validated against the data ONCE
(:meth:`AnalysisSpec.validated`): the score table's checks (:func:`vrs_helpers.evaluate.tables.scores.validate`, with
the
one rule on replication columns of :func:`vrs_helpers.book.glrt.replication_problem`), the baseline, each
response's family, and the test of the runs-random reading (:mod:`vrs_helpers.registry`: a test that does not
apply is an error naming those that do). The validated spec carries the clean table and its design; every step of
the analysis reads it, on the local and the Dask backend alike. ``to_dict()`` / ``from_dict()`` hand it to
workbook 07 as papermill parameters (the validated table as a Parquet file), so the notebook does not validate
again.
"""

from __future__ import annotations

import dataclasses
import json
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ... import registry
from ...registry import TestChoiceError
from ..files import InputError
from ..options import ITEMS, RUNS, option
from ..precheck import count as _count
from ..precheck import fraction as _fraction
from ..precheck import names as _names

if TYPE_CHECKING:
    from .scores import DataSummary

# pandas, the score table's checks and the metrics are imported where they are used: `vrs --help` builds its
# options from the specs' fields and should not wait for them

FAMILY_CHOICES = ("auto", *registry.FAMILIES)


@dataclass(frozen=True, eq=False)
class AnalysisSpec:
    """What to analyse and how (module docstring). Column names as in the data; ``response`` one name or a list
    (several metrics, Holm across them); ``system`` None for one system (reliability only); ``replications`` the
    columns that identify a run within a system (runs: seeds, meta-parameters); ``repeats`` the columns that tell
    independent draws for the same item within a run apart (Inspect epochs: a (system, run, item) then has several
    rows); ``test`` None: each family's default test (:mod:`vrs_helpers.registry`);
    ``items``: ``"random"`` (the runs-random model has ``(1|system:item)`` when items have several runs per
    system: items like these) or ``"fixed"`` (these items; :func:`vrs_helpers.book.glrt.compare_systems`);
    ``runs``: ``"auto"`` (default: crossed when every run label is used by two or more systems, else nested;
    :func:`vrs_helpers.book.glrt.runs_layout`), ``"nested"`` (each system's runs its own, ``(1|system:R)``) or
    ``"crossed"`` (a run label names one run condition for every system, ``(1|R) + (1|system:R)``);
    ``lower_is_better`` True (every response) or the responses for which lower is better; ``backend`` None (in
    memory) or a Dask client, scheduler address or ``"local"``."""

    data: object = field(default=None, repr=False)  # a table can be large: data_label names it
    response: tuple = option("response")
    system: str | None = option("system")
    item: str = option("item")
    replications: tuple = option("replications")
    repeats: tuple = option("repeats")
    properties: tuple = option("properties")
    baseline: str | None = option("baseline")
    family: str = option("family")
    test: str | None = option("test")
    items: str = option("items")
    runs: str = option("runs")
    alpha: float = option("alpha")
    n_resamples: int = option("n_resamples")
    n_sim: int = option("n_sim")
    seed: int = option("seed")
    delta: float | None = option("delta")
    lower_is_better: object = option("lower_is_better")
    dropna: bool = option("dropna")
    backend: object = option("backend")
    target_phi: float = option("target_phi")
    max_runs: int = option("max_runs")
    target_power: float = option("target_power")
    data_label: str = option("data_label")
    human: str | None = option("human")          # the column of human labels (issue 43): the response is a judge's
    human_labels: str | None = option("human_labels")   # or a file of them keyed by item (and system, runs)
    # set by validated(): the clean table, its design, and per response the family, its note and the test
    table: object = field(default=None, repr=False)
    design: DataSummary | None = field(default=None, repr=False)
    families: dict = field(default_factory=dict)
    family_notes: dict = field(default_factory=dict, repr=False)
    tests: dict = field(default_factory=dict)

    def __post_init__(self):
        """The option values, checked before any data is read (the same rules for the CLI and the Python API)."""
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 - frozen: normalized once, here
        put("response", _names(self.response, "response"))
        if not self.response:
            raise InputError("Give at least one response (score) column.")
        for name in ("replications", "repeats", "properties"):
            put(name, _names(getattr(self, name), name))
        put("system", self.system or None)
        if not self.item:
            raise InputError("Give the item column (the test items every system was scored on).")
        put("baseline", None if self.baseline in (None, "") else str(self.baseline))
        put("alpha", _fraction("alpha", self.alpha))
        put("target_phi", _fraction("target_phi", self.target_phi))
        put("target_power", _fraction("target_power", self.target_power))
        for name in ("n_resamples", "n_sim", "max_runs"):
            put(name, _count(name, getattr(self, name)))
        put("seed", int(self.seed))
        put("human_labels", str(self.human_labels) if self.human_labels not in (None, "") else None)
        put("human", self.human or ("human" if self.human_labels else None))
        if self.human is not None and len(self.response) != 1:
            raise InputError(f"--human corrects one judge's score; give one response (the judge's score column), "
                             f"got {len(self.response)}.")
        family = str(self.family or "auto").lower()
        if family not in FAMILY_CHOICES:
            raise InputError(f"family must be {', '.join(FAMILY_CHOICES)}; got {self.family!r}.")
        put("family", family)
        items = str(self.items or "random").strip().lower()
        if items not in ITEMS:
            raise InputError(f"items must be {' or '.join(ITEMS)} (items like these, or these items); got "
                             f"{self.items!r}.")
        put("items", items)
        runs = str(self.runs or "auto").strip().lower()
        if runs not in RUNS:
            raise InputError(f"runs must be {', '.join(RUNS)} (run labels shared by the systems, or each system's "
                             f"own); got {self.runs!r}.")
        put("runs", runs)
        if self.test not in (None, ""):
            put("test", registry.canonical(self.test))  # unknown: an error naming the registered tests
        else:
            put("test", None)
        if self.delta in (None, "") or (isinstance(self.delta, (int, float)) and self.delta == 0):
            put("delta", None)
        else:
            try:
                d = float(self.delta)
            except (TypeError, ValueError):
                d = math.nan
            if not math.isfinite(d):
                raise InputError(f"delta must be a non-zero number (a system difference in score units); got "
                                 f"{self.delta!r}.")
            put("delta", d)
        lower = self.lower_is_better
        if not isinstance(lower, bool):
            lower = _names(lower, "lower_is_better")
        put("lower_is_better", lower)
        self.directions  # noqa: B018 - unknown metrics are refused here

    # ------------------------------------------------------------------------------------------ derived

    @property
    def directions(self) -> dict:
        """{response: True if higher scores are better}."""
        from .metrics import MetricsError, metric_directions

        try:
            return metric_directions(list(self.response), self.lower_is_better if isinstance(
                self.lower_is_better, bool) else list(self.lower_is_better))
        except MetricsError as e:
            raise InputError(str(e)) from None

    @property
    def is_validated(self) -> bool:
        return self.design is not None

    @property
    def runs_random(self) -> bool:
        """True when the analysis has a runs-random reading (replication columns and two or more systems)."""
        return bool(self.replications) and self.design is not None and self.design.n_systems >= 2

    def replace(self, **changes) -> AnalysisSpec:
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------------------------------ validation

    def validated(self, data=None, client=None) -> AnalysisSpec:
        """The spec checked against its data, once: a new spec with the clean table (``table``), its design
        (``design``, a :class:`~vrs_helpers.evaluate.tables.scores.DataSummary`) and, per response, the family and the
        test (``families``, ``tests``). ``data`` replaces the spec's source; ``client``: the Dask client of
        ``backend`` (the table is then a dask DataFrame). A spec that is already validated is returned as it is
        (its table loaded from its Parquet file when it came through :meth:`from_dict`)."""
        import pandas as pd

        from .scores import computed, load_scores, validate

        if self.is_validated:
            if self.table is not None:
                return self
            return self.replace(table=pd.read_parquet(str(self.data)))
        source = self.data if data is None else data
        if source is None or (isinstance(source, str) and not source.strip()):
            raise InputError("Give the data: a score table (DataFrame), a file or a run-folder pattern.")
        lazy = hasattr(source, "dask") or self.backend is not None or client is not None
        raw = _dask_table(source, client) if lazy else load_scores(source)
        if self.human is not None and lazy:
            raise InputError("The judge correction (--human, --human-labels) works in memory: leave --dask out.")
        if self.human_labels is not None:
            from .judged import merge_labels

            labels = load_scores(self.human_labels)
            if self.system and self.system not in labels.columns:
                raise InputError(f"The file of human labels needs the system column {self.system!r} (it has "
                                 f"{', '.join(map(repr, labels.columns))}): a label is a human's reading of one "
                                 "system's output, one row per system and labelled item.")
            keys = [c for c in (self.system, *self.replications, *self.repeats) if c and c in labels.columns]
            raw = merge_labels(raw, labels, [self.item, *keys], self.human)
        if self.baseline is not None and self.system in raw.columns:
            levels = sorted(map(str, computed(raw[self.system].dropna().astype(str).unique())))
            if self.baseline not in levels:
                raise InputError(f"baseline {self.baseline!r} is not a level of {self.system!r}; levels: "
                                 f"{', '.join(levels)}.")
        clean, info = validate(raw, response=list(self.response), system=self.system, item=self.item,
                               replications=list(self.replications), properties=list(self.properties),
                               dropna=self.dropna, repeats=list(self.repeats), human=self.human)
        if self.human is not None:
            from .judged import check_labels

            labelled = clean if self.system else clean.assign(_system="all")
            systems = [str(s) for s in info.systems]
            base = self.baseline if self.baseline is not None else systems[0]
            check_labels(labelled, self.response[0], self.system or "_system", self.item, self.human,
                         [base] + [s for s in systems if s != base])
        families, notes, tests = {}, {}, {}
        from ...book.binary import resolve_family

        for r in self.response:
            families[r], notes[r] = resolve_family(self.family, clean[r])
            tests[r] = self._test_for(families[r], info)
        return self.replace(data=source, table=clean, design=info, families=families, family_notes=notes,
                            tests=tests)

    def _test_for(self, family: str, info: DataSummary) -> str | None:
        """The registered test of the runs-random reading of a response of ``family`` (None without one)."""
        if not self.replications or info.n_systems < 2:
            if self.test is not None:
                raise TestChoiceError(
                    f"test {self.test!r} chooses the test of the runs-random reading, which needs replication "
                    f"columns (the runs) and two or more systems; this analysis has "
                    f"{len(self.replications)} replication column(s) and {info.n_systems} system(s). Leave the "
                    "test out, or give the replication columns.")
            return None
        return registry.choose(self.test, family, systems=info.n_systems).name

    # ------------------------------------------------------------------------------------------ hand-over

    def to_dict(self) -> dict:
        """The spec as plain JSON values (papermill parameters of workbook 07). A validated spec's table must have
        been written to a file named by ``data`` (the runner writes it as Parquet); the backend is not passed."""
        if self.table is not None and not isinstance(self.data, str):
            raise InputError("to_dict needs the data as a file path: write the validated table to Parquet and "
                             "replace(data=path) first.")
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name not in ("table", "backend", "design")}
        for k in ("response", "replications", "repeats", "properties"):
            out[k] = list(out[k])
        if not isinstance(out["lower_is_better"], bool):
            out["lower_is_better"] = list(out["lower_is_better"])
        out["data"] = None if self.data is None else str(self.data)
        out["design"] = None if self.design is None else dataclasses.asdict(self.design)
        return json.loads(json.dumps(out))

    @classmethod
    def from_dict(cls, d: dict) -> AnalysisSpec:
        """The spec of :meth:`to_dict` (a dict, or a JSON string or file path holding one)."""
        if isinstance(d, str):
            from pathlib import Path

            text = Path(d).read_text(encoding="utf-8") if not d.lstrip().startswith("{") else d
            d = json.loads(text)
        d = dict(d)
        design = d.pop("design", None)
        known = {f.name for f in dataclasses.fields(cls)} - {"table", "backend", "design"}
        unknown = sorted(set(d) - known)
        if unknown:
            raise InputError(f"unknown analysis option(s) {unknown}; options: {', '.join(sorted(known))}.")
        spec = cls(**d)
        if not design:
            return spec
        from .scores import DataSummary

        return spec.replace(design=DataSummary(**design))


def _dask_table(source, client):
    """A dask DataFrame of ``source``: a dask DataFrame, a pandas one, or a Parquet file or folder."""
    import pandas as pd

    from ...dask_support import require_dask

    require_dask()
    import dask.dataframe as dd

    if hasattr(source, "dask"):
        return source
    if isinstance(source, pd.DataFrame):
        workers = len(client.scheduler_info().get("workers", {})) if client is not None else 1
        return dd.from_pandas(source, npartitions=max(1, workers * 2))
    from pathlib import Path

    path = Path(str(source))
    if not path.exists() or not (path.is_dir() or path.suffix.lower() in (".parquet", ".pq")):
        raise InputError(f"--dask reads a Parquet dataset (a .parquet file or a folder of them); got {source!r}. "
                         "Convert the table once (pandas.DataFrame.to_parquet) or run without --dask.")
    return dd.read_parquet(str(path))


@contextmanager
def connected(backend):
    """The Dask client of ``backend`` (None: no client), closed on exit when it was made here (an address or
    ``"local"``; a client given stays open)."""
    if backend is None:
        yield None
        return
    from ...dask_support import connect

    client = connect(backend)
    try:
        yield client
    finally:
        if not hasattr(backend, "submit"):
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()


@dataclass(frozen=True, eq=False)
class LogsSpec:
    """What to analyse in a folder of evaluation logs (lm-evaluation-harness, Inspect, HELM, Every Eval Ever) and
    how: beside :class:`AnalysisSpec`, which names a score table's columns, a logs spec names the logs and the few
    choices the logs leave open (``vrs analyze LOGDIR``; :func:`vrs_helpers.evaluate.analysis.analyze`).

    ``logs`` a folder, one log file or a run-folder pattern; ``format`` ``"auto"`` (detected) or a reader's name;
    ``system`` a field of the logs that names the systems (None: the model name); ``cluster`` an item field to
    cluster standard errors on; ``metric`` None (each task's primary metric), metrics, or ``task=metric`` entries;
    ``adjust`` ``"holm"`` or ``"bh"`` across the tasks; the rest as :class:`AnalysisSpec`."""

    logs: str = ""
    format: str = option("format")
    system: str | None = option("system")
    cluster: str | None = option("cluster")
    metric: tuple = option("metric")
    dropna: bool = option("dropna")
    adjust: str = option("adjust")
    alpha: float = option("alpha")
    baseline: str | None = option("baseline")
    test: str | None = option("test")
    n_sim: int = option("n_sim")
    seed: int = option("seed")
    items: str = option("items")
    runs: str = option("runs")
    data_label: str = option("data_label")

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 - frozen: normalized once, here
        if not str(self.logs or "").strip():
            raise InputError("Give the logs: a folder of evaluation logs, one log file or a run-folder pattern.")
        put("logs", str(self.logs))
        put("metric", _names(self.metric, "metric"))
        put("alpha", _fraction("alpha", self.alpha))
        put("n_sim", _count("n_sim", self.n_sim))
        put("seed", int(self.seed))
        put("baseline", None if self.baseline in (None, "") else str(self.baseline))
        put("system", self.system or None)
        put("cluster", self.cluster or None)
        adjust = str(self.adjust or "holm").strip().lower()
        if adjust not in ("holm", "bh"):
            raise InputError(f"adjust must be holm or bh; got {self.adjust!r}.")
        put("adjust", adjust)
        items = str(self.items or "random").strip().lower()
        if items not in ITEMS:
            raise InputError(f"items must be {' or '.join(ITEMS)}; got {self.items!r}.")
        put("items", items)
        runs = str(self.runs or "auto").strip().lower()
        if runs not in RUNS:
            raise InputError(f"runs must be {', '.join(RUNS)}; got {self.runs!r}.")
        put("runs", runs)
        put("test", registry.canonical(self.test) if self.test not in (None, "") else None)

    def replace(self, **changes) -> LogsSpec:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """The options as JSON values (report.ipynb writes them into its code cell)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["metric"] = list(out["metric"])
        return json.loads(json.dumps(out))

    @classmethod
    def from_dict(cls, d) -> LogsSpec:
        """The spec of :meth:`to_dict` (a dict or a JSON string)."""
        d = json.loads(d) if isinstance(d, str) else dict(d)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise InputError(f"unknown logs option(s) {unknown}; options: {', '.join(sorted(known))}.")
        return cls(**d)
