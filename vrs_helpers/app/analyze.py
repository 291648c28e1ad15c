"""``vrs analyze``: a score table or a folder of evaluation logs analysed, and its report written.

The analysis runs here, in this process (:func:`vrs_helpers.evaluate.analysis.analyze`); its result is one
:class:`~vrs_helpers.evaluate.presentation.result.Result`, and everything written comes from it by the one renderer
(:func:`~vrs_helpers.evaluate.presentation.render.render`): ``summary.json`` (the result itself), ``report.html``,
``summary.txt``, the console, and ``report.ipynb`` - whose code cell re-runs the analysis through the public API
with the run's options and whose stored outputs are the renderer's. No notebook kernel is started unless
``--execute`` asks for report.ipynb to be executed.

Everything is made in a private work folder and swapped into ``--out`` only when all of it succeeded
(:func:`vrs_helpers.app.publish.publish`): a failed or interrupted run leaves a previous report as it was.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .. import registry

DASK_TABLE_ONLY = ("--dask analyses a Parquet score table on a cluster; evaluation logs are read in memory: leave "
                   "--dask out")
REPORT = ("report.html", "report.ipynb", "summary.json", "summary.txt")


def write_report(result, out_dir, *, execute: bool = False) -> dict:
    """Write ``result``'s report files into ``out_dir`` (all or nothing): summary.json, summary.txt, report.html and
    report.ipynb (executed in a kernel first with ``execute``). Returns {name: path}."""
    import nbformat

    from ..evaluate.presentation.notebook import executed, report_notebook
    from ..evaluate.presentation.render import render
    from .publish import DiskFullError, disk_full, disk_full_error, publish, work_dir

    out = Path(out_dir)
    work = work_dir()
    try:
        try:
            result.write(work / "summary.json")
            (work / "summary.txt").write_text(render(result, "summary"), encoding="utf-8")
            (work / "report.html").write_text(render(result, "page"), encoding="utf-8")
            nb = report_notebook(result)
            if execute:
                nb = executed(nb, str(work))
            nbformat.write(nb, str(work / "report.ipynb"))
            publish({name: work / name for name in REPORT}, out)
        except (OSError, shutil.Error) as exc:   # a full disk anywhere on the way: said so, the previous report kept
            if isinstance(exc, DiskFullError) or not disk_full(exc):
                raise
            raise disk_full_error(exc, out_dir) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {name: out / name for name in REPORT}


def cmd_analyze(args) -> int:
    from .publish import check_out_dir, lock_out_dir, sweep_debris, sweep_stale

    check_out_dir(args.out)   # before anything is read: a bad --out never costs an analysis
    check_input(args)   # a typo answered at once, before the analysis is imported
    sweep_stale()   # what runs killed before they could clean up left in the temporary folder
    with lock_out_dir(args.out) as lock:   # one run at a time writes a folder
        sweep_debris(args.out)
        quiet_fit_warnings()
        code = _analyze(args)
        lock.keep_folder()
    return code


def quiet_fit_warnings() -> None:
    """The fits' warnings never reach the console of ``vrs analyze``: the analysis records them in its notes."""
    import warnings

    warnings.filterwarnings("ignore", category=UserWarning, module=r"vrs_helpers(\.|$)")


def name_the_columns(data) -> str:
    return (f"{data} is a score table (no evaluation logs of a known format were found in it): name its columns "
            "with --response COL and --item COL (and --system, --replication), or give a folder of lm-eval, Inspect, "
            "HELM or Every Eval Ever logs (--format to name it).")


def check_input(args) -> None:
    """What can be checked without pandas (:mod:`vrs_helpers.evaluate.precheck`, well under a second): the data path
    exists (unless a log format is named), and a score table's option values and its header's columns."""
    if args.format != "auto":
        return
    from ..evaluate import precheck

    if not (args.response and args.item):   # evaluation logs, or a table whose columns are not named yet
        if args.human is not None or args.human_labels is not None:
            raise precheck.InputError("--human and --human-labels correct a judge's scores in a score table: name "
                                      "its columns with --response COL (the judge's score) and --item COL (and "
                                      "--system); evaluation logs are not read with human labels.")
        if not precheck.match_pattern(args.data) and not Path(args.data).exists():
            raise precheck.InputError(precheck.no_file(args.data))
        if args.dask is not None:
            raise precheck.InputError(DASK_TABLE_ONLY + " (a score table: name its columns with --response COL "
                                      "and --item COL).")
        if Path(args.data).is_file() and precheck.TABLE_SUFFIXES.get(precheck.table_suffix(Path(args.data))) in (
                ",", "\t", "parquet"):   # no harness writes its logs as CSV, TSV or Parquet
            raise precheck.InputError(name_the_columns(args.data))
        return
    if args.test is not None and not args.replication:
        raise registry.TestChoiceError(f"--test {args.test} chooses the test of the runs-random reading, which "
                                       "needs replication columns (the runs): give them with --replication COL, or "
                                       "leave --test out.")
    precheck.fraction("alpha", args.alpha)
    precheck.count("n_resamples", args.n_resamples)
    precheck.count("n_sim", args.n_sim)
    if args.dask is not None:
        return   # a Parquet dataset read on the cluster
    roles = [("response", r) for r in args.response] + [("system", args.system), ("item", args.item)]
    roles += [("replication", c) for c in args.replication or []] + [("repeat", c) for c in args.repeat or []]
    roles += [("property", c) for c in args.property or []]
    if args.human_labels is not None:
        if not Path(args.human_labels).is_file():
            raise precheck.InputError(f"No file of human labels at {args.human_labels}. Give a CSV/TSV/Parquet/"
                                      "JSON-lines table with one row per labelled item: the item column (and the "
                                      "system column), and the label in the column named by --human (default "
                                      "'human').")
    elif args.human is not None:
        roles += [("human label", args.human)]
    precheck.check_table_input(args.data, roles)


def _is_logs(args) -> bool:
    """A format given or detected; a folder without one is read as logs (whose error names its files) unless
    score-table columns are named (a folder of Parquet parts, e.g. for --dask)."""
    from ..evaluate.readers import sniff_format

    return (args.format != "auto" or sniff_format(args.data) is not None
            or (Path(args.data).is_dir() and not args.response))


def _absolute(data: str) -> str:
    """The data's path as the report notebook re-reads it from anywhere (a pattern keeps its fields)."""
    return str(Path(data).expanduser().absolute())


def _analyze(args) -> int:
    from ..evaluate.analysis import analyze
    from ..evaluate.presentation.render import render
    from ..evaluate.scores import InputError
    from ..evaluate.spec import AnalysisSpec

    if _is_logs(args):
        return _analyze_logs(args)
    if not args.response or not args.item:
        raise InputError(name_the_columns(args.data))
    # the spec checks the options as it is built, and is validated against the data once (analyze)
    spec = AnalysisSpec(args.data if args.dask is not None else _absolute(args.data), response=args.response,
                        system=args.system, item=args.item, replications=args.replication or [],
                        repeats=args.repeat or [], properties=args.property or [], baseline=args.baseline,
                        family=args.family, test=args.test, items=args.items, runs=args.runs, alpha=args.alpha,
                        n_resamples=args.n_resamples, n_sim=args.n_sim, seed=args.seed, delta=args.delta,
                        lower_is_better=args.lower_is_better or [], dropna=args.dropna, backend=args.dask,
                        data_label=str(args.data), human=args.human, human_labels=args.human_labels)
    result = analyze(spec)
    files = write_report(result, args.out, execute=args.execute)
    print(render(result, "text"), end="")
    print(f"report: {files['report.html']}; notebook: {files['report.ipynb']}; summary: {files['summary.json']}")
    return 0


def _analyze_logs(args) -> int:
    """``vrs analyze LOGDIR``: read and describe the logs, validate every task, then analyse them and write the
    report."""
    from ..evaluate.analysis import analyze_logs
    from ..evaluate.presentation.render import printable, render
    from ..evaluate.scores import InputError
    from ..evaluate.spec import LogsSpec
    from ..evaluate.tasks import read_logs

    if args.dask is not None:
        raise InputError(DASK_TABLE_ONLY + ".")
    spec = LogsSpec(_absolute(args.data), format=args.format, system=args.system, cluster=args.cluster,
                    metric=list(args.response or []), dropna=args.dropna, adjust=args.adjust, alpha=args.alpha,
                    baseline=args.baseline, test=args.test, n_sim=args.n_sim, seed=args.seed, items=args.items,
                    runs=args.runs, data_label=str(args.data))
    read = read_logs(spec, echo=lambda lg: print("\n".join(
        printable(line) for line in [f"Read {args.data}:", *lg.describe().splitlines()]), flush=True))
    print("\n".join(printable(line) for line in analysed_lines(read[1], read[2]).splitlines()), flush=True)
    result = analyze_logs(spec, read)
    files = write_report(result, args.out, execute=args.execute)
    print(render(result, "text"), end="")
    print(f"report: {files['report.html']}; notebook: {files['report.ipynb']}; summary: {files['summary.json']}, "
          f"{files['summary.txt']}")
    return 0


def analysed_lines(specs, skipped) -> str:
    """The metric each task is analysed with, and one line per task not analysed (its reason)."""
    from ..evaluate.tasks import skipped_lines

    per = {}
    for task, m in specs:
        per.setdefault(task, []).append(m)
    lines = ["Analysed: " + "; ".join(f"{t} ({', '.join(ms)})" for t, ms in per.items()) + "."]
    return "\n".join(lines + skipped_lines(skipped))


def test_name(text: str) -> str:
    """A --test value: its registered name when it is a name or an alias (argparse then lists the choices)."""
    try:
        return registry.canonical(text)
    except registry.TestChoiceError:
        return text


def add_parser(sub) -> None:
    """The ``analyze`` subcommand's options."""
    p = sub.add_parser("analyze", help="analyse your own evaluation results (workbook 07): significance across "
                       "runs, conditional on data properties, reliability; writes report.html and summary.json",
                       description="Per-item scores of systems over training runs: one row per system, run and "
                       "item. DATA is a CSV, TSV, Parquet or JSON-lines file, or a run-folder pattern with named "
                       "fields such as 'runs/{system}/seed={seed}/scores.tsv' (quote it); or a folder of "
                       "evaluation logs (lm-evaluation-harness, Inspect, HELM, Every Eval Ever), read without "
                       "further options.")
    p.add_argument("data")
    p.add_argument("--response", nargs="+", metavar="COL",
                   help="the score column; several (--response bleu chrf comet): each metric analysed, the system "
                        "verdicts Holm-corrected across them, summary.json keyed by metric. With evaluation logs: "
                        "the metric(s) to analyse, for every task that has them, or task=metric for one task "
                        "(default: each task's primary metric as its harness marks it)")
    p.add_argument("--format", default="auto",
                   help="DATA is a folder of evaluation logs of this format: lm-eval, inspect, helm or "
                        "every-eval-ever (default auto: detected; a score table otherwise)")
    p.add_argument("--adjust", default="holm", choices=["holm", "bh"],
                   help="evaluation logs with several tasks: adjust the per-task p-values by Holm (default) or "
                        "Benjamini-Hochberg")
    p.add_argument("--cluster", default=None, metavar="FIELD",
                   help="evaluation logs: an item field (Inspect sample metadata, lm-eval doc field) to cluster the "
                        "standard errors on (Inspect's stderr(cluster=...), Miller's clustered SE)")
    p.add_argument("--lower-is-better", nargs="+", metavar="COL", default=None,
                   help="response(s) for which lower scores are better (TER, error rates): the direction of ASO and "
                        "of the expected best of n runs")
    p.add_argument("--system", default=None, help="the system column (omit for one system: reliability only)")
    p.add_argument("--item", default=None, help="the test-item column (not needed for evaluation logs)")
    p.add_argument("--replication", action="append", metavar="COL",
                   help="a column identifying a run within a system (seed, meta-parameter); repeatable")
    p.add_argument("--repeat", action="append", metavar="COL",
                   help="a column telling independent draws for the same item within a run apart (Inspect epochs, "
                        "several sampled answers per question): a (system, run, item) then has one row per repeat; "
                        "repeatable")
    p.add_argument("--property", action="append", metavar="COL",
                   help="a data property of the items (numeric: slope; otherwise per level); repeatable")
    p.add_argument("--baseline", default=None, help="the reference system of the paired tests")
    p.add_argument("--human", default=None, metavar="COL",
                   help="the response is a judge's (LLM judge, classifier) score and COL holds human labels on some "
                        "rows (empty elsewhere): the verdict is corrected for the judge (PPI++, PPI, MBM)")
    p.add_argument("--human-labels", default=None, metavar="FILE",
                   help="human labels in a separate table keyed by item (and system, replication columns), the "
                        "label in the column --human (default 'human')")
    p.add_argument("--out", default="vrs-report", help="output folder (default: vrs-report)")
    p.add_argument("--dropna", action="store_true",
                   help="drop rows with a missing score, or an empty system, item, replication, repeat or property "
                        "cell, instead of failing (the report says how many)")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--n-resamples", type=int, default=10_000)
    p.add_argument("--test", default=None, type=test_name, choices=registry.names(), help=registry.help_text())
    p.add_argument("--items", default="random", choices=["random", "fixed"],
                   help="random (default): the runs-random model gets a system-by-item intercept (1|system:item) "
                        "when items have several runs per system, and the verdict is about items like these; "
                        "fixed: without it, a statement about these items only (liberal when systems and items "
                        "interact)")
    p.add_argument("--runs", default="auto", choices=["auto", "nested", "crossed"],
                   help="auto (default): crossed when every run label is used by two or more systems, else nested; "
                        "nested: each system's runs are its own, (1|system:R); crossed: a run label (the same seed, "
                        "few-shot draw or prompt for every system) names one run condition shared by the systems, "
                        "(1|R) + (1|system:R), and its shift cancels in the difference. The answer says which")
    p.add_argument("--n-sim", type=int, default=1000, help="simulations of --test bootstrap (default 1000; the "
                   "default test of binary scores)")
    p.add_argument("--family", default="auto", choices=["auto", *registry.FAMILIES],
                   help="binomial: 0/1 scores (correct/incorrect) as logistic GLMMs, phi on the latent scale; auto "
                        "(default): binomial when every score is 0 or 1, with a note")
    p.add_argument("--delta", type=float, default=None,
                   help="a system difference (in score units) to plan for: power of the runs-random test and runs "
                        "per system needed for power 0.8, beside the smallest difference the design detects")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--execute", action="store_true",
                   help="execute report.ipynb in a Jupyter kernel before it is written (its outputs then come from "
                        "the kernel's run of the analysis; without it they are the same renderer's, written directly)")
    p.add_argument("--dask", default=None, metavar="ADDRESS",
                   help="for a Parquet dataset larger than memory: the fits, per-run and per-item tables and "
                        "resampling batches on a Dask cluster (scheduler address or 'local'); writes summary.json "
                        "and summary.txt, no notebook report (pip install 'vrs-workbooks[dask]')")
    p.set_defaults(func=cmd_analyze)
