"""``vrs items``: is the benchmark any good? (issue 55) Item statistics, flagged items, Rasch difficulties and the
benchmark's reliability for comparing models (:func:`vrs_helpers.evaluate.items.analysis.analyze_items`), written as
report.html, summary.json and summary.txt by the same renderer as ``vrs analyze`` (its result is of kind
``"items"``). Inputs as ``vrs analyze``'s: a score table with its columns named, or a folder of evaluation logs.
The report is made in a private work folder and swapped into ``--out`` only when all of it succeeded.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .console import say

REPORT = ("report.html", "summary.json", "summary.txt")
MODELS = ("random", "fixed")   # as vrs_helpers.evaluate.items.rasch.MODELS (not imported: `vrs --help` stays fast)
SHARED = ("response", "system", "item", "replications", "format", "alpha", "dropna")


def write_items_report(result, out_dir) -> dict:
    """Write ``result``'s report.html, summary.json and summary.txt into ``out_dir``, all or nothing."""
    from ..evaluate.presentation.render import page_and_fragment, render
    from .publish import DiskFullError, disk_full, disk_full_error, publish, work_dir

    work = work_dir()
    try:
        try:
            result.write(work / "summary.json")
            (work / "summary.txt").write_text(render(result, "summary"), encoding="utf-8")
            (work / "report.html").write_text(page_and_fragment(result)[0], encoding="utf-8")
            publish({name: work / name for name in REPORT}, out_dir)
        except (OSError, shutil.Error) as exc:
            if isinstance(exc, DiskFullError) or not disk_full(exc):
                raise
            raise disk_full_error(exc, out_dir) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {name: Path(out_dir) / name for name in REPORT}


def cmd_items(args) -> int:
    from ..evaluate.files import InputError
    from ..evaluate.precheck import fraction, no_file
    from .analyze import input_bounds, quiet_fit_warnings
    from .publish import check_out_dir, lock_out_dir

    check_out_dir(args.out)
    fraction("alpha", args.alpha)
    fraction("flag_alpha", args.flag_alpha)
    responses = list(args.response or [])
    if len(responses) > 1:
        raise InputError(f"vrs items analyses one score: give one --response, not {len(responses)}.")
    table = bool(args.item)
    if table and not responses:
        raise InputError("A score table needs its score column: --response COL (and --item COL, --system COL, "
                         "--replication COL for the runs).")
    if not Path(args.data).exists():
        raise InputError(no_file(args.data))
    args.max_systems = None
    with input_bounds(args), lock_out_dir(args.out) as lock:
        quiet_fit_warnings()
        from ..evaluate.items.analysis import analyze_items
        from ..evaluate.presentation.render import render

        result = analyze_items(str(Path(args.data).expanduser().absolute()),
                               response=responses[0] if table else None,
                               system=args.system, item=args.item or None, replications=args.replications or (),
                               format=args.format, metric=responses or None, models=args.models, alpha=args.alpha,
                               flag_alpha=args.flag_alpha, dropna=args.dropna, data_label=str(args.data))
        files = write_items_report(result, args.out)
        lock.keep_folder()
    say(render(result, "text").splitlines())
    say(f"report: {files['report.html']}; summary: {files['summary.json']}, {files['summary.txt']}")
    return 0


def add_parser(sub) -> None:
    """The ``items`` subcommand: the data options of ``vrs analyze`` it shares (one entry each in
    :data:`vrs_helpers.evaluate.options.OPTIONS`), then its own."""
    from ..evaluate.options import OPTIONS

    p = sub.add_parser("items", help="is the benchmark any good? item statistics, flagged items (negative "
                       "discrimination, no information, flips across runs), Rasch difficulties and the benchmark's "
                       "reliability for comparing models; writes report.html and summary.json",
                       description="Per-item scores of models (and runs): DATA is a score table (name its columns "
                       "with --response, --item, --system, --replication) or a folder of evaluation logs "
                       "(lm-evaluation-harness, Inspect, HELM, Every Eval Ever).")
    p.add_argument("data")
    own_help = {"response": "the score column (one: 0/1 or continuous); with evaluation logs the metric to use "
                            "(default: each task's primary metric)",
                "system": "the model column (the objects of measurement; omit for one model: its items across its "
                          "runs); with evaluation logs a field that names the models (default: the model name)",
                "alpha": "the level at which the smallest resolved difference between two models is stated "
                         "(default 0.05)"}
    for name in SHARED:
        o = OPTIONS[name]
        kw = o.argparse_kwargs()
        kw["help"] = own_help.get(name, kw.get("help"))
        p.add_argument(o.flag, **kw)
    p.add_argument("--models", default="random", choices=list(MODELS),
                   help="the models in the Rasch fit: random (default; crossed model and item effects, fast) or "
                        "fixed (lme4's correct ~ 0 + model + (1|item); slow beyond a few dozen models)")
    p.add_argument("--flag-alpha", type=float, default=0.05, dest="flag_alpha",
                   help="false discovery rate of the negative-discrimination flags (Benjamini-Hochberg; default 0.05)")
    p.add_argument("--max-input-bytes", default=None, metavar="SIZE",
                   help="the bound on a compressed input file's decompressed size (default 1G; also "
                        "VRS_MAX_INPUT_BYTES)")
    p.add_argument("--out", default="vrs-items", help="output folder (default: vrs-items)")
    p.set_defaults(func=cmd_items)
