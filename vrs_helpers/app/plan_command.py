"""``vrs plan``: the power of the test of a system difference and the runs (or human labels, or items x repeats)
it needs, from variance components, before any run exists (:mod:`vrs_helpers.evaluate.tables.power`,
:func:`vrs_helpers.evaluate.logs.harness_stats.miller_plan`,
:func:`vrs_helpers.evaluate.tables.judge.judge_plan_text`)."""

from __future__ import annotations

from .console import say


def _plan_repeats(args) -> None:
    """``vrs plan --repeats``: Miller's items x repeats closed form (evaluate/harness_stats.miller_plan)."""
    from ..evaluate.logs.harness_stats import miller_plan
    from ..evaluate.tables.power import PlanningError

    if args.item_diff_sd is None or args.within_sd is None:
        raise PlanningError("--repeats plans items x repeats (Miller 2024): give --item-diff-sd (SD over items of "
                            "the difference of the systems' expected item scores) and --within-sd (SD of one draw "
                            "within an item; sqrt(p (1 - p)) for 0/1 scores of accuracy p).")
    sd = {}
    for k in ("item_diff_sd", "within_sd", "delta", "alpha", "target"):   # numbers whose squares stay finite
        text = getattr(args, k)
        try:
            sd[k] = float(text)
        except (TypeError, ValueError):
            raise PlanningError(f"--{k.replace('_', '-')} must be a number, got {text!r}.") from None
        if not abs(sd[k]) <= 1e100:
            raise PlanningError(f"--{k.replace('_', '-')} must be a finite number no larger than 1e100 in size, got "
                                f"{text!r}.")
    say(*miller_plan(sd["delta"], sd["item_diff_sd"] ** 2, sd["within_sd"] ** 2, repeats=list(args.repeats),
                     items=list(args.items or []), alpha=sd["alpha"], power=sd["target"]).text().splitlines())


def cmd_plan(args) -> int:
    from ..evaluate.tables.power import PlanningError, VarianceComponents, power_table

    if args.human_sd is not None or args.judge_corr is not None:   # human labels for a judge (issue 43)
        from ..evaluate.tables.judge import judge_plan_text

        if args.human_sd is None or args.judge_corr is None:
            raise PlanningError("planning human labels for a judge needs --human-sd (SD of the per-item human "
                                "difference of the two systems) and --judge-corr (its correlation with the judge's).")
        say(*judge_plan_text(args.items, args.human_sd, args.judge_corr, args.delta, alpha=args.alpha,
                             power=args.target, half_width=args.half_width, sd_judge=args.judge_sd).splitlines())
        return 0

    if args.repeats:
        _plan_repeats(args)
        if args.run_sd is None:
            return 0
        say("")
    if args.run_sd is None or args.residual_sd is None:
        raise PlanningError("give --run-sd and --residual-sd (runs x items), or --repeats with --item-diff-sd and "
                            "--within-sd (items x repeats).")

    # the values reach the planner as typed: it checks them and says what is allowed (PlanningError, exit 2)
    crossed = {}
    for spec in args.crossed or []:  # NAME:SD:LEVELS (issue 28: crossed replication columns planned per column)
        parts = spec.rsplit(":", 2)
        if len(parts) != 3:
            raise PlanningError(f"--crossed takes NAME:SD:LEVELS (e.g. config:0.03:2), got {spec!r}.")
        crossed[parts[0]] = (parts[1], parts[2])
    table = power_table(args.runs, args.items, args.delta,
                        VarianceComponents(args.run_sd, args.item_sd, args.residual_sd),
                        systems=args.systems, alpha=args.alpha, target=args.target, crossed=crossed,
                        system_item_sd=args.system_item_sd, shared_runs=args.shared_runs)
    say(*table.text().splitlines())
    return 0
