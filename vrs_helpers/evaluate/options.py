"""Every option of an analysis, declared once: its name, default, help and command-line form.

The fields of :class:`~vrs_helpers.evaluate.tables.spec.AnalysisSpec` (a score table) and of
:class:`~vrs_helpers.evaluate.tables.spec.LogsSpec` (harness logs) take their default and their description from here
(:func:`option`); ``vrs analyze`` builds its command line from those fields (:func:`add_arguments`) and the spec
from the parsed arguments (:func:`spec_arguments`), and the workbooks' ``parameters`` cells name the same fields.
An option the two specs share (``--system``, ``--alpha``, ``--runs``, ...) is one entry; ``--response`` names a
table's score columns and the logs' metrics alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from .. import registry


@dataclass(frozen=True)
class Option:
    """One option: ``name`` (the spec's field), ``default``, ``help``; on the command line ``flag`` (None: not
    there) taking one value, ``"many"`` values (``nargs="+"``), ``"append"`` (repeatable, one value each) or a
    ``"switch"``, of ``type`` with ``choices``; ``dest`` names the parsed argument (default: ``name``)."""

    name: str
    default: object = None
    help: str = ""
    flag: str | None = None
    kind: str = "one"
    type: Callable | None = None   # a converter (argparse's type=)
    choices: tuple | None = None
    metavar: str | None = None
    dest: str | None = None

    @property
    def target(self) -> str:
        return self.dest or self.name

    def argparse_kwargs(self) -> dict:
        kw: dict = {"dest": self.target, "help": self.help or None}
        if self.kind == "switch":
            return {**kw, "action": "store_true"}
        kw["default"] = None if self.kind in ("many", "append") else self.default
        if self.kind == "many":
            kw["nargs"] = "+"
        elif self.kind == "append":
            kw["action"] = "append"
        if self.type is not None:
            kw["type"] = self.type
        if self.choices is not None:
            kw["choices"] = list(self.choices)
        if self.metavar is not None:
            kw["metavar"] = self.metavar
        return kw


def _test_name(text: str) -> str:
    """A --test value: its registered name when it is a name or an alias (argparse then lists the choices)."""
    try:
        return registry.canonical(text)
    except registry.TestChoiceError:
        return text


_test_name.__name__ = "test"   # argparse names the type in its error message

ITEMS = ("random", "fixed")   # as vrs_helpers.book.glrt.ITEMS
RUNS = ("auto", "crossed", "nested")   # as vrs_helpers.book.glrt.RUNS (tests/evaluate/test_spec.py)
ADJUST = ("holm", "bh")

OPTIONS = {o.name: o for o in [
    Option("response", (), "the score column; several (--response bleu chrf comet): each metric analysed, the system "
           "verdicts Holm-corrected across them, summary.json keyed by metric. With evaluation logs: the metric(s) "
           "to analyse, for every task that has them, or task=metric for one task (default: each task's primary "
           "metric as its harness marks it)", "--response", "many", metavar="COL"),
    Option("metric", (), "", "--response", "many", metavar="COL", dest="response"),
    Option("system", None, "the system column (omit for one system: reliability only); with evaluation logs a field "
           "that names the systems (default: the model name)", "--system"),
    Option("item", "", "the test-item column (not needed for evaluation logs)", "--item"),
    Option("replications", (), "a column identifying a run within a system (seed, meta-parameter); repeatable",
           "--replication", "append", metavar="COL"),
    Option("repeats", (), "a column telling independent draws for the same item within a run apart (Inspect epochs, "
           "several sampled answers per question): a (system, run, item) then has one row per repeat; repeatable",
           "--repeat", "append", metavar="COL"),
    Option("properties", (), "a data property of the items (numeric: slope; otherwise per level); repeatable",
           "--property", "append", metavar="COL"),
    Option("baseline", None, "the system the others are compared with (paired tests, ASO; with three or more "
           "systems only when given)", "--baseline"),
    Option("family", "auto", "binomial: 0/1 scores (correct/incorrect) as logistic GLMMs, phi on the latent scale; "
           "auto (default): binomial when every score is 0 or 1, with a note", "--family",
           choices=("auto", *registry.FAMILIES)),
    Option("test", None, registry.help_text(), "--test", type=_test_name, choices=tuple(registry.names())),
    Option("items", "random", "random (default): the runs-random model gets a system-by-item intercept "
           "(1|system:item) when items have several runs per system, and the verdict is about items like these; "
           "fixed: without it, a statement about these items only (liberal when systems and items interact)",
           "--items", choices=ITEMS),
    Option("runs", "auto", "auto (default): crossed when every run label is used by two or more systems, else "
           "nested; nested: each system's runs are its own, (1|system:R); crossed: a run label (the same seed, "
           "few-shot draw or prompt for every system) names one run condition shared by the systems, (1|R) + "
           "(1|system:R), and its shift cancels in the difference. The answer says which", "--runs", choices=RUNS),
    Option("alpha", 0.05, "significance level (default 0.05)", "--alpha", type=float),
    Option("n_resamples", 10_000, "paired bootstrap and permutation resamples (default 10,000)", "--n-resamples",
           type=int),
    Option("n_sim", 1000, "simulations of --test bootstrap (default 1000)", "--n-sim", type=int),
    Option("seed", 0, "seed of every resampling and simulation (default 0)", "--seed", type=int),
    Option("delta", None, "a system difference (in score units) to plan for: power of the runs-random test and runs "
           "per system needed for power 0.8, beside the smallest difference the design detects", "--delta",
           type=float),
    Option("lower_is_better", (), "response(s) for which lower scores are better (TER, error rates): the direction "
           "of the ranking, ASO and the expected best of n runs", "--lower-is-better", "many", metavar="COL"),
    Option("dropna", False, "drop rows with a missing score, or an empty system, item, replication, repeat or "
           "property cell, instead of failing (the report says how many)", "--dropna", "switch"),
    Option("backend", None, "for a Parquet dataset larger than memory: the fits, per-run and per-item tables and "
           "resampling batches on a Dask cluster (scheduler address or 'local'; pip install "
           "'vrs-workbooks[dask]')", "--dask", metavar="ADDRESS", dest="dask"),
    Option("target_phi", 0.8, "the reliability the decision study plans for (default 0.8)", "--target-phi",
           type=float),
    Option("max_runs", 1000, "the most runs the decision study considers (default 1000)", "--max-runs", type=int),
    Option("target_power", 0.8, "the power the planning aims at (default 0.8)", "--target-power", type=float),
    Option("data_label", "", "how the report names the data (vrs analyze: the path you gave)"),
    Option("human", None, "the response is a judge's (LLM judge, classifier) score and COL holds human labels on "
           "some rows (empty elsewhere): the verdict is corrected for the judge (PPI++, PPI, MBM)", "--human",
           metavar="COL"),
    Option("human_labels", None, "human labels in a separate table keyed by item (and system, replication "
           "columns), the label in the column --human (default 'human')", "--human-labels", metavar="FILE"),
    # evaluation logs
    Option("format", "auto", "DATA is a folder of evaluation logs of this format: lm-eval, inspect, helm or "
           "every-eval-ever (default auto: detected; a score table otherwise)", "--format"),
    Option("cluster", None, "evaluation logs: an item field (Inspect sample metadata, lm-eval doc field) to cluster "
           "the standard errors on (Inspect's stderr(cluster=...), Miller's clustered SE)", "--cluster",
           metavar="FIELD"),
    Option("adjust", "holm", "evaluation logs with several tasks: adjust the per-task p-values by Holm (default) or "
           "Benjamini-Hochberg", "--adjust", choices=ADJUST),
]}


def option(name: str):
    """The dataclass field of option ``name``: its default (a tuple for a list option) and, as metadata, the
    :class:`Option` itself."""
    o = OPTIONS[name]
    return dataclasses.field(default=o.default, metadata={"option": o})


def spec_options(*classes) -> list[Option]:
    """The options of the spec classes' fields, each command-line flag once (the first class's entry)."""
    out, seen = [], set()
    for cls in classes:
        for f in dataclasses.fields(cls):
            o = f.metadata.get("option")
            if o is not None and o.flag is not None and o.flag not in seen:
                seen.add(o.flag)
                out.append(o)
    return out


def add_arguments(parser, *classes) -> None:
    """Add the command-line options of the spec classes to an argparse parser."""
    for o in spec_options(*classes):
        parser.add_argument(o.flag, **o.argparse_kwargs())


def spec_arguments(cls, args) -> dict:
    """The keyword arguments of spec class ``cls`` from parsed arguments: every field with a command-line form, a
    list option left out by the user as its default."""
    out = {}
    for f in dataclasses.fields(cls):
        o = f.metadata.get("option")
        if o is None or o.flag is None or not hasattr(args, o.target):
            continue
        value = getattr(args, o.target)
        out[f.name] = o.default if value is None and o.kind in ("many", "append") else value
    return out
