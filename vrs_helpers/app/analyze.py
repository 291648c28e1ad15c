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
from .console import say

DASK_TABLE_ONLY = ("--dask analyses a Parquet score table on a cluster; evaluation logs are read in memory: leave "
                   "--dask out")
REPORT = ("report.html", "report.ipynb", "summary.json", "summary.txt")


def write_report(result, out_dir, *, execute: bool = False) -> dict:
    """Write ``result``'s report files into ``out_dir`` (all or nothing): summary.json, summary.txt, report.html and
    report.ipynb (executed in a kernel first with ``execute``). Returns {name: path}."""
    import nbformat

    from ..evaluate.presentation.notebook import report_notebook
    from ..evaluate.presentation.pairs_bound import PAIRS_FILE, pairs_frame
    from ..evaluate.presentation.render import page_and_fragment, render
    from ..literal import to_csv
    from .publish import DiskFullError, disk_full, disk_full_error, publish, work_dir

    out = Path(out_dir)
    work = work_dir()
    try:
        try:
            result.write(work / "summary.json")
            (work / "summary.txt").write_text(render(result, "summary"), encoding="utf-8")
            page, fragment = page_and_fragment(result)
            (work / "report.html").write_text(page, encoding="utf-8")
            nb = report_notebook(result, fragment)
            if execute:
                nb = executed(nb, str(work))
            nbformat.write(nb, str(work / "report.ipynb"))
            files = {name: work / name for name in REPORT}
            bounded = isinstance(result.data, dict) and result.data.get("pairs_in_summary")
            if bounded and pairs_frame(result.fits) is not None:  # many systems: every pair in pairs.csv (issue 54)
                to_csv(pairs_frame(result.fits), work / PAIRS_FILE)
                files[PAIRS_FILE] = work / PAIRS_FILE
            publish(files, out)
        except (OSError, shutil.Error) as exc:   # a full disk anywhere on the way: said so, the previous report kept
            if isinstance(exc, DiskFullError) or not disk_full(exc):
                raise
            raise disk_full_error(exc, out_dir) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {name: out / name for name in files}


def executed(nb, cwd: str, timeout: int = 3600):
    """``nb`` executed in a fresh kernel (nbclient, the runs' kernel manager and arguments) in folder ``cwd``; a
    failing cell raises."""
    from nbclient import NotebookClient

    from .kernel import KERNEL_ARGUMENTS, KERNEL_NAME, closing_event_loop, kernel_manager_class

    client = NotebookClient(nb, timeout=timeout, kernel_name=KERNEL_NAME, kernel_manager_class=kernel_manager_class(),
                            extra_arguments=KERNEL_ARGUMENTS, resources={"metadata": {"path": cwd}})
    with closing_event_loop():
        client.execute()
    return nb


def cmd_analyze(args) -> int:
    with input_bounds(args):   # --max-input-bytes, --max-systems: for this run
        return _analyze_bounded(args)


def input_bounds(args):
    """The bounds given on the command line, in the environment of the run (the readers and checks read them there:
    ``VRS_MAX_INPUT_BYTES``, ``VRS_MAX_SYSTEMS``; a kernel of ``--execute`` inherits them), restored after it."""
    import contextlib
    import os

    from ..evaluate.files import ENV_MAX_INPUT_BYTES, InputError, parse_size
    from ..evaluate.precheck import ENV_MAX_SYSTEMS

    values = {}
    if args.max_input_bytes is not None:
        values[ENV_MAX_INPUT_BYTES] = str(parse_size(args.max_input_bytes))
    if args.max_systems is not None:
        if args.max_systems < 2:
            raise InputError(f"--max-systems must be at least 2, got {args.max_systems}.")
        values[ENV_MAX_SYSTEMS] = str(args.max_systems)

    @contextlib.contextmanager
    def environment():
        before = {k: os.environ.get(k) for k in values}
        os.environ.update(values)
        try:
            yield
        finally:
            for k, v in before.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    return environment()


def _analyze_bounded(args) -> int:
    from ..evaluate.files import one_walk
    from .publish import check_out_dir, lock_out_dir, own_temporary_files, sweep_debris, sweep_stale
    from .stopping import on_forced_exit

    check_out_dir(args.out)   # before anything is read: a bad --out never costs an analysis
    check_input(args)   # a typo answered at once, before the analysis is imported
    sweep_stale()   # what runs killed before they could clean up left in the temporary folder
    with lock_out_dir(args.out) as lock, on_forced_exit(*lock.forced_exit_actions(), own_temporary_files()):
        sweep_debris(args.out)   # one run at a time writes a folder; a stop ends it within seconds (app/stopping)
        quiet_fit_warnings()
        with one_walk():   # a log folder is searched once, for the detection and for the read
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
    if args.test is not None and not args.replications:
        raise registry.TestChoiceError(f"--test {args.test} chooses the test of the runs-random reading, which "
                                       "needs replication columns (the runs): give them with --replication COL, or "
                                       "leave --test out.")
    precheck.fraction("alpha", args.alpha)
    precheck.count("n_resamples", args.n_resamples)
    precheck.count("n_sim", args.n_sim)
    if args.dask is not None:
        return   # a Parquet dataset read on the cluster
    roles = [("response", r) for r in args.response] + [("system", args.system), ("item", args.item)]
    roles += [("replication", c) for c in args.replications or []] + [("repeat", c) for c in args.repeats or []]
    roles += [("property", c) for c in args.properties or []]
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
    from ..evaluate.logs.readers import sniff_format

    return (args.format != "auto" or sniff_format(args.data) is not None
            or (Path(args.data).is_dir() and not args.response))


def _absolute(data: str) -> str:
    """The data's path as the report notebook re-reads it from anywhere (a pattern keeps its fields)."""
    return str(Path(data).expanduser().absolute())


def _analyze(args) -> int:
    from ..evaluate.analysis import analyze
    from ..evaluate.options import spec_arguments
    from ..evaluate.presentation.render import render
    from ..evaluate.tables.scores import InputError
    from ..evaluate.tables.spec import AnalysisSpec

    if _is_logs(args):
        return _analyze_logs(args)
    if not args.response or not args.item:
        raise InputError(name_the_columns(args.data))
    # the spec checks the options as it is built, and is validated against the data once (analyze)
    spec = AnalysisSpec(args.data if args.dask is not None else _absolute(args.data),
                        **spec_arguments(AnalysisSpec, args), data_label=str(args.data))
    result = analyze(spec)
    files = write_report(result, args.out, execute=args.execute)
    say(render(result, "text").splitlines())
    say(f"report: {files['report.html']}; notebook: {files['report.ipynb']}; summary: {files['summary.json']}")
    return 0


def _analyze_logs(args) -> int:
    """``vrs analyze LOGDIR``: read and describe the logs, validate every task, then analyse them and write the
    report."""
    from ..evaluate.analysis import analyze_logs
    from ..evaluate.logs.tasks import read_logs
    from ..evaluate.options import spec_arguments
    from ..evaluate.presentation.render import render
    from ..evaluate.tables.scores import InputError
    from ..evaluate.tables.spec import LogsSpec

    if args.dask is not None:
        raise InputError(DASK_TABLE_ONLY + ".")
    spec = LogsSpec(_absolute(args.data), **spec_arguments(LogsSpec, args), data_label=str(args.data))
    read = read_logs(spec, echo=lambda lg: say(f"Read {args.data}:", lg.description.lines(), flush=True))
    say(analysed_lines(read[1], read[2]), flush=True)
    result = analyze_logs(spec, read)
    files = write_report(result, args.out, execute=args.execute)
    say(render(result, "text").splitlines())
    say(f"report: {files['report.html']}; notebook: {files['report.ipynb']}; summary: {files['summary.json']}, "
        f"{files['summary.txt']}")
    return 0


def analysed_lines(specs, skipped) -> list:
    """The metric each task is analysed with, and one line per task not analysed (its reason)."""
    from ..evaluate.logs.tasks import skipped_lines

    per = {}
    for task, m in specs:
        per.setdefault(task, []).append(m)
    lines = ["Analysed: " + "; ".join(f"{t} ({', '.join(ms)})" for t, ms in per.items()) + "."] if per else [
        "Analysed: no task has two models to compare; each model's scores are described."]
    return lines + skipped_lines(skipped)


def add_parser(sub) -> None:
    """The ``analyze`` subcommand: its analysis options are the fields of the two specs
    (:mod:`vrs_helpers.evaluate.options`), then the report's own (``--out``, ``--execute``)."""
    from ..evaluate.options import add_arguments
    from ..evaluate.tables.spec import AnalysisSpec, LogsSpec

    p = sub.add_parser("analyze", help="analyse your own evaluation results: the answer, the leaderboard, "
                       "significance across runs, conditional on data properties, reliability; writes report.html, "
                       "report.ipynb and summary.json",
                       description="Per-item scores of systems over training runs: one row per system, run and "
                       "item. DATA is a CSV, TSV, Parquet or JSON-lines file, or a run-folder pattern with named "
                       "fields such as 'runs/{system}/seed={seed}/scores.tsv' (quote it); or a folder of "
                       "evaluation logs (lm-evaluation-harness, Inspect, HELM, Every Eval Ever), read without "
                       "further options.")
    p.add_argument("data")
    add_arguments(p, AnalysisSpec, LogsSpec)
    p.add_argument("--max-input-bytes", default=None, metavar="SIZE",
                   help="the bound on a compressed input file's decompressed size (default 1G; e.g. 4G, 500M; also "
                        "the environment variable VRS_MAX_INPUT_BYTES): a file that inflates beyond it is refused")
    p.add_argument("--max-systems", type=int, default=None, metavar="N",
                   help="the most systems one analysis compares (default 500; also VRS_MAX_SYSTEMS): every pair is "
                        "compared, so memory and time grow with the square of their number")
    p.add_argument("--out", default="vrs-report", help="output folder (default: vrs-report)")
    p.add_argument("--execute", action="store_true",
                   help="execute report.ipynb in a Jupyter kernel before it is written (its outputs then come from "
                        "the kernel's run of the analysis; without it they are the same renderer's, written directly)")
    p.set_defaults(func=cmd_analyze)
