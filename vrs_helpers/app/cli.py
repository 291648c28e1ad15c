"""The ``vrs`` command: data registry, notebook runner, reproduction report, parameter grids."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import VRSError
from .console import ArgumentParser, error, say
from .plan_command import cmd_plan
from .stopping import STOPPED, Terminated, Watchdog, handle_termination, received_signal, restore, said, stop_message


def _parse_value(text: str):
    """Parameter values from the command line are YAML scalars: 0.5 -> float, 10 -> int, true -> bool."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _cmd_data(args) -> int:
    import pandas as pd

    from ..book import data

    if args.action == "list":
        table = data.to_frame()[["name", "path", "licence", "used_for"]]
        with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 60):
            say(*table.to_string(index=False).splitlines())
        return 0
    if args.action == "fetch":
        names = args.names or data.names(include_text=True)
        for n in names:
            say(f"{n}: {data.path(n, download=True)}")
        return 0
    # verify
    table = data.verify(download=False)
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 80):
        say(*table[["name", "status", "path"]].to_string(index=False).splitlines())
    bad = table[table["status"] != "ok"]
    for _, row in bad[bad["status"] == "mismatch"].iterrows():
        say("", f"{row['name']}: {row['detail']}", err=True)
    if (bad["status"] == "missing").any():
        where = f"{data.ENV_DATA_DIR}={data.data_dir()}" if data.data_dir() else f"the cache {data.cache_dir()}"
        say("", f"{int((bad['status'] == 'missing').sum())} files missing from {where}: run `vrs data fetch` with "
            f"internet access, or set {data.ENV_DATA_DIR} to a local copy of the data.", err=True)
    say("", f"{len(table) - len(bad)} of {len(table)} files present and intact.")
    return 1 if len(bad) else 0


def _scorecard_table(rows) -> str:
    """The scorecard rows of a run as a short aligned table (counts first)."""
    import pandas as pd

    if not rows:
        return "no scorecard checks"
    t = pd.DataFrame(rows)
    if "kind" not in t.columns:
        t["kind"] = "book"
    t["kind"] = t["kind"].fillna("book")
    counts = "; ".join(f"{kind} rows: " + ", ".join(f"{v} {k}" for k, v in g["match"].value_counts().items())
                       for kind, g in t.groupby("kind", sort=True))
    t["quantity"] = t["quantity"].astype(str).str.slice(0, 60)
    fmt = lambda v: "" if v is None or (isinstance(v, float) and v != v) else f"{v:.6g}" if isinstance(  # noqa: E731
        v, (int, float)) else str(v)
    t["book"], t["ours"] = t["book"].map(fmt), t["ours"].map(fmt)
    lines = t[["kind", "match", "ref", "quantity", "book", "ours"]].to_string(index=False, max_colwidth=60)
    return f"{len(t)} scorecard checks ({counts})\n" + lines


def _run_inplace(args) -> int:
    """Re-execute a notebook with its defaults and replace the source only if the run succeeded and no scorecard
    row regressed (a failed run leaves the committed notebook as it was)."""
    import os
    import shutil
    import tempfile

    from .runner import NotebookError, run_notebook

    src = Path(args.notebook)
    tmp = tempfile.mkdtemp(prefix="vrs-inplace-")   # kept when the run fails: the error names the executed copy
    try:
        res = run_notebook(src, {}, out_dir=tmp, html_dir=args.html, output_name=src.name, progress=True,
                           exclude_input=args.no_input)
    except NotebookError as exc:
        error(f"{exc}; {src} is unchanged.")
        return 1
    try:
        say(f"html: {res.html}", *_scorecard_table(res.scorecard).splitlines())
        if _report_regressions(res.scorecard, src.parent, vanished=True):
            say(f"{src} is unchanged (scorecard regressions).", err=True)
            return 1
        partial = src.with_name(f".{src.name}.partial")
        shutil.copyfile(res.output, partial)
        os.replace(partial, src)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    say(f"executed: {src}")
    return 0


def _cmd_run(args) -> int:
    from .runner import NotebookError, ParameterError, run_name, run_notebook

    params = {name: _parse_value(value) for name, value in (args.param or [])}
    if args.inplace and params:
        error("--inplace stores the executed notebook as the committed one; it takes no -p parameters (the "
              "committed notebook shows the defaults, which reproduce the book).")
        return 2
    from ..resources import find_workbook

    args.notebook = str(find_workbook(args.notebook))  # a path, or a workbook's name / number
    if args.inplace:
        return _run_inplace(args)
    if str(args.out).endswith(".ipynb"):
        out_dir, name = Path(args.out).parent, Path(args.out).name
    else:   # runs with different parameters do not overwrite each other
        out_dir, name = args.out, (run_name(args.notebook, params) if params else None)
    try:
        res = run_notebook(args.notebook, params, out_dir=out_dir, html_dir=args.html, output_name=name,
                           progress=True, exclude_input=args.no_input)
    except ParameterError as exc:
        error(exc)
        return 2
    except NotebookError as exc:
        error(exc)
        return 1
    say(f"executed: {res.output}", f"html: {res.html}", *_scorecard_table(res.scorecard).splitlines())
    # with parameters the run is not the committed analysis: fewer rows may apply, so none counts as vanished
    return 1 if _report_regressions(res.scorecard, Path(args.notebook).parent, vanished=not params) else 0


def _report_regressions(rows, folder: Path, vanished: bool = True) -> int:
    """Print the rows whose status is worse than in the committed baseline, and (``vanished``) the committed rows
    of the run notebooks and analyses that the run no longer has; return how many."""
    import pandas as pd

    from .scorecard import BASELINE, COLUMNS, regressions

    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows],
                                                                      columns=COLUMNS)
    if not len(frame):
        return 0
    bad = regressions(frame, folder / BASELINE, scope=None if vanished else [])
    for _, r in bad.iterrows():
        was = r["baseline"] if isinstance(r["baseline"], str) else "not in the baseline"
        if r["match"] == "vanished":
            say(f"regression: {r['notebook']} {r['analysis']} {r['ref']} {r['quantity']}: vanished from the run "
                f"(was {was} in the baseline)", err=True)
            continue
        say(f"regression: {r['notebook']} {r['analysis']} {r['ref']} {r['quantity']}: {r['match']} (was {was}); "
            f"book {r['book']}, ours {r['ours']}", err=True)
    return len(bad)


def _cmd_reproduce(args) -> int:
    from ..resources import find_workbook, workbooks_dir
    from .publish import check_out_dir
    from .runner import notebooks_in, reproduce

    check_out_dir(args.build, hint="Give another folder with --build (or --out): it is created if missing, and the "
                                   "executed notebooks, scorecard.csv and html/ are written into it.")
    args.folder = args.folder or str(workbooks_dir())
    nbs = [find_workbook(n) for n in args.notebooks] if args.notebooks else notebooks_in(args.folder)
    if not nbs:
        error(f"no notebooks found in {args.folder}")
        return 1
    results, card = reproduce(nbs, build_dir=args.build, defaults_only=args.defaults_only, workers=args.workers)
    from .report import headline

    failed = [r for r in results if r.error]
    say(f"{len(results)} notebook runs, {len(failed)} failed; scorecard: {headline(card)}")
    say(f"report: {Path(args.build) / 'html' / 'index.html'}; scorecard: {Path(args.build) / 'scorecard.csv'}")
    for r in failed:
        error(r.error)
    folder = Path(args.folder) if not args.notebooks else nbs[0].parent
    if args.accept:
        from .scorecard import accept_baseline

        path = accept_baseline(card, folder)
        say(f"baseline updated: {path}")
        return 1 if failed else 0
    n_bad = _report_regressions(card, folder)
    if n_bad:
        say(f"{n_bad} scorecard rows are worse than the committed baseline ({folder / 'scorecard_baseline.csv'}); "
            f"if the change is intended and explained, run `vrs reproduce --accept`.", err=True)
    return 1 if failed or n_bad else 0


def _cmd_workbooks(args) -> int:
    from ..resources import copy_workbooks
    from .student import StudentError, seminar

    try:   # --students: DIR/students and DIR/solutions in one step
        lines = seminar(args.dir, force=args.force) if args.students else None
    except StudentError as exc:
        error(exc)
        return 2
    if lines is None:
        written = copy_workbooks(args.dir, force=args.force)
        lines = [f"{len(written)} files in {Path(args.dir).resolve()}:", *(f"  {p.name}" for p in written),
                 f"Open them with: jupyter lab {args.dir}   (a seminar's copies: vrs workbooks DIR --students)"]
    say(lines)
    return 0


def _cmd_docs(args) -> int:
    from .guide import GUIDE_DIR, build_guide
    from .report import build_api_docs, copy_mathjax

    out = build_api_docs(args.out)
    say(f"API reference: {out / 'index.html'}")
    site = Path(args.out).parent   # the guide beside the API, as in the report site, with its MathJax
    copy_mathjax(site)
    say(f"user guide: {build_guide(site / GUIDE_DIR)}")
    return 0


def _cmd_batch(args) -> int:
    from .publish import check_out_dir
    from .runner import batch

    if args.out is not None:
        check_out_dir(args.out, hint="Give another folder with --out: it is created if missing, and the executed "
                                     "notebooks, results.csv and checks.csv are written into it.")
    results, table = batch(args.grid, out_dir=args.out, workers=args.workers, dask=args.dask)
    from .runner import batch_checks

    failed = [r for r in results if r.error]
    out = results[0].output.parent if results else args.out
    scalars = list(dict.fromkeys(k for r in results for k in r.scalars))
    checks = batch_checks(results).drop_duplicates(["notebook", "analysis", "ref", "quantity"])
    say(f"{len(results)} combinations, {len(failed)} failed; in {out}:",
        f"  results.csv: the parameters and {len(scalars)} recorded results per combination"
        f"{' (' + ', '.join(scalars[:6]) + (', ...' if len(scalars) > 6 else '') + ')' if scalars else ''}",
        f"  checks.csv: {len(checks)} scorecard checks per combination, {int(checks['constant'].sum())} of them "
        f"the same in every combination")
    for r in failed:
        error(f"{r.error} (parameters {r.parameters})")
    return 1 if failed else 0


def _cmd_student(args) -> int:
    from .student import StudentError, write_student_copies

    try:
        written = write_student_copies(args.notebooks, args.out, placeholder=not args.no_placeholder)
    except StudentError as exc:
        error(exc)
        return 2
    for path in written:
        say(f"student copy: {path}")
    return 0


def skip_slow_optional_imports() -> None:
    """Keep jsonschema from importing the optional ``rfc3987_syntax`` in this process.

    nbformat, papermill and nbconvert import jsonschema, which imports rfc3987-syntax at import time when it is
    installed (jupyter-events requires ``jsonschema[format-nongpl]``), and rfc3987-syntax builds an Earley parser of
    the IRI grammar on import: about 2 s in every process that reads a notebook. No notebook schema checks the IRI
    formats, so ``vrs`` (this process and the workers it forks; not the kernels, not your own Python) blocks that
    import before anything loads jsonschema; jsonschema then leaves out its "iri" format checkers."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)


def main(argv: list[str] | None = None) -> int:
    skip_slow_optional_imports()
    parser = ArgumentParser(prog="vrs", description="vrs-workbooks: reproduce and extend the book "
                                     "'Validity, Reliability, and Significance' in Python.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("data", help="the registry of real data files")
    p.add_argument("action", choices=["list", "fetch", "verify"])
    p.add_argument("names", nargs="*", help="datasets to fetch (default: all)")
    p.set_defaults(func=_cmd_data)

    p = sub.add_parser("run", help="execute one notebook with papermill and export HTML")
    p.add_argument("notebook", help="a notebook file, or a workbook by name or number (03_krippendorff_paradoxes, 03)")
    p.add_argument("-p", "--param", nargs=2, action="append", metavar=("NAME", "VALUE"),
                   help="set a parameter (value parsed as YAML: 0.5, 10, true, [1, 2], text)")
    p.add_argument("--out", default="build/notebooks",
                   help="folder for the executed notebook (named after the notebook and its -p parameters, so runs "
                        "do not overwrite each other), or a file name ending in .ipynb")
    p.add_argument("--html", default="build/html", help="folder for the HTML export")
    p.add_argument("--inplace", action="store_true",
                   help="write the executed notebook (volatile metadata stripped) back over the source, "
                        "to commit it with its outputs")
    p.add_argument("--no-input", action="store_true",
                   help="leave the code cells' inputs out of the HTML export (a report: Markdown and outputs only)")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("reproduce", help="execute all notebooks and build build/html/index.html with the scorecard")
    p.add_argument("notebooks", nargs="*", help="notebooks (files, or workbooks by name or number) to run "
                   "(default: all in --folder)")
    p.add_argument("--folder", default=None, help="folder of the workbooks (default: notebooks/ of a checkout, "
                   "else the installed package's workbooks)")
    p.add_argument("--accept", action="store_true",
                   help="record this run's scorecard statuses as the new baseline (notebooks/scorecard_baseline.csv)")
    p.add_argument("--build", "--out", dest="build", default="build",
                   help="output folder: executed notebooks, scorecard.csv, html/ (default: build)")
    p.add_argument("--defaults-only", action="store_true",
                   help="run each notebook once with its default parameters, not every analysis it lists in its "
                        "metadata (e.g. the 7 dataset x target runs of the circularity workbook)")
    p.add_argument("--workers", type=int, default=None,
                   help="notebook runs at a time, each in its own kernel (default: one per core)")
    p.set_defaults(func=_cmd_reproduce)

    p = sub.add_parser("workbooks", help="copy the workbooks (with their exercises) into a folder to open in "
                       "JupyterLab", description="Copy every workbook and the scorecard baseline into DIR: the way "
                       "a seminar participant starts (jupyter lab DIR). Existing files are never overwritten "
                       "without --force.")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--force", action="store_true", help="overwrite workbooks already in DIR")
    p.add_argument("--students", action="store_true", help="a seminar's copies: DIR/students (no solutions, no "
                   "scorecard checks, public exercise checks kept) and DIR/solutions (the workbooks as they are)")
    p.set_defaults(func=_cmd_workbooks)

    p = sub.add_parser("docs", help="the API reference from the docstrings (pdoc) and the user guide (docs/*.md, "
                       "into guide/ beside it), as in the report site")
    p.add_argument("--out", default="build/html/api", help="output folder (default build/html/api)")
    p.set_defaults(func=_cmd_docs)

    from .analyze import add_parser as add_analyze

    add_analyze(sub)

    from .items import add_parser as add_items

    add_items(sub)

    p = sub.add_parser("plan", help="power of the test of a system difference and the runs per system it needs, "
                       "from variance components (before any run exists)",
                       description="Power of the F test of `score ~ system + (1|item) + (1|system:run)` (nested runs; "
                       "with --shared-runs crossed runs, + (1|run)) for a difference DELTA between systems with n "
                       "runs per system and m items (closed form for the balanced design: noncentral F), and the "
                       "runs per system needed for --target power. vrs analyze fits crossed runs by default (--runs "
                       "auto) when every run label is shared by the systems, else nested runs.")
    p.add_argument("--runs", nargs="+", default=["3", "5", "10"], metavar="N", help="runs per system (default 3 5 10)")
    p.add_argument("--items", nargs="+", required=True, metavar="M", help="test items (one or several)")
    p.add_argument("--delta", required=True, help="the difference between systems to detect (score units)")
    p.add_argument("--run-sd", default=None, help="SD of a system's score between training runs")
    p.add_argument("--item-sd", default="0", help="SD between items (does not enter the balanced closed form)")
    p.add_argument("--residual-sd", default=None, help="residual SD of a score")
    p.add_argument("--repeats", nargs="+", metavar="K", default=None,
                   help="also plan items x repeats (draws per item, Inspect epochs) by Miller's (2024) closed form "
                        "for these numbers of repeats; needs --item-diff-sd and --within-sd")
    p.add_argument("--item-diff-sd", default=None, help="--repeats: SD over items of the difference of the two "
                   "systems' expected item scores (sqrt of Miller's omega2)")
    p.add_argument("--within-sd", default=None, help="--repeats: SD of one draw within an item (sqrt(p (1 - p)) for "
                   "0/1 scores)")
    p.add_argument("--systems", default="2", help="number of systems (default 2)")
    p.add_argument("--target", default="0.8", help="target power (default 0.8)")
    p.add_argument("--alpha", default="0.05", help="significance level (default 0.05)")
    p.add_argument("--crossed", action="append", metavar="NAME:SD:LEVELS",
                   help="another replication column crossed with the runs (e.g. config:0.03:2), its own SD and "
                        "levels per system; repeatable")
    p.add_argument("--system-item-sd", default="0", help="SD of system x item effects (default 0)")
    p.add_argument("--human-sd", default=None, help="the human labels a judge needs (PPI++): SD of the per-item "
                   "human difference of the two systems; with --judge-corr")
    p.add_argument("--judge-corr", default=None, help="correlation of the judge's per-item difference with the "
                   "humans' (its agreement)")
    p.add_argument("--half-width", default=None, help="with --human-sd: also the labels for this CI half-width")
    p.add_argument("--judge-sd", default=None, help="with --human-sd: SD of the judge's per-item difference; adds "
                   "the labels PPI with lambda 1 (the verdict's reading) needs")
    p.add_argument("--shared-runs", action="store_true",
                   help="runs crossed (as vrs analyze fits shared run labels by default): the same run labels (seeds, "
                        "few-shot draws) for every system; --run-sd is then the SD of the system x run effects (a "
                        "shift shared by all systems cancels) and the test has (k - 1)(n - 1) df")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("batch", help="run one notebook over a parameter grid (YAML) in parallel")
    p.add_argument("grid")
    p.add_argument("--out", default=None, help="output folder (default build/batch/<grid name>)")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: number of cores)")
    p.add_argument("--dask", default=None, metavar="ADDRESS",
                   help="run the executions as tasks on a Dask cluster: a scheduler address (tcp://host:8786) or "
                        "'local'; finished runs are kept and skipped on a re-run (pip install 'vrs-workbooks[dask]')")
    p.set_defaults(func=_cmd_batch)

    p = sub.add_parser("student", help="student copies of workbooks: solution cells removed, outputs cleared",
                       description="Write a copy of each NOTEBOOK to --out without its cells tagged 'solution', with "
                       "all outputs cleared and an empty 'answer' cell after each cell tagged 'exercise'.")
    p.add_argument("notebooks", nargs="+", metavar="NOTEBOOK")
    p.add_argument("--out", default="build/student", help="output folder (default: build/student); never a "
                   "source notebook's folder")
    p.add_argument("--no-placeholder", action="store_true", help="no empty answer cell after each exercise")
    p.set_defaults(func=_cmd_student)

    args = parser.parse_args(argv)
    out = getattr(args, "out", None) if args.command in ("analyze", "items") else None
    previous = handle_termination()
    try:   # a stop signal ends the command within seconds, however busy it is (app/stopping)
        with Watchdog(lambda signum: stop_message(signum, out)):
            code = _run_command(args, out)
    finally:
        restore(previous)
    if argv is None and code in STOPPED:   # run as `vrs` and stopped, cleaned up: no wait for threads still busy
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _run_command(args, out) -> int:
    """Run the command; what the user can fix is one line and an exit code, anything else a bug (a traceback)."""
    try:
        return args.func(args)
    except BaseException as exc:
        # Ctrl-C or SIGTERM, cleaned up on the way here - also when the interruption surfaced as another error (a
        # KeyboardInterrupt inside an extension module's import comes out as an ImportError)
        signum = received_signal() or (exc.signum if isinstance(exc, Terminated) else
                                       2 if isinstance(exc, KeyboardInterrupt) else None)
        if signum is not None:
            say(stop_message(signum, out), err=True)
            said()
            return 128 + signum
        if isinstance(exc, VRSError):
            error(exc)
            return exc.exit_code
        if isinstance(exc, OSError):   # a full disk or temporary folder is the user's to fix, not a bug
            from .publish import disk_full, disk_full_error

            if disk_full(exc):
                error(disk_full_error(exc, out).strerror)
                return 2
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
