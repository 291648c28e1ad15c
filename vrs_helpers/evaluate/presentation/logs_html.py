"""The body of a harness-logs report (:func:`logs_body`), from a :class:`~.result.Result` of kind ``"logs"``: every
task's verdict in one table, per task the leaderboard and its forest plot, the model x task table, then - collapsed
- the harness's own numbers checked against ours, Miller's errors, paired differences, McNemar, the small-sample
intervals, what was read and the notes."""

from __future__ import annotations

from ...literal import html_text
from . import figures
from .html import bullets, details, figure, leaderboard, table

OPEN_TASKS = 6   # up to this many tasks, each task's leaderboard is open; beyond, collapsed


def _tasks(data: dict) -> str:
    rows = data.get("tasks") or []
    cols = ["task", "metric", "n_items", "systems", "method", "evidence", "p_text", "p_adjusted_text", "decision"]
    adjust = (data.get("adjust") or {}).get("description", "")
    return ("<h2>Every task</h2>" + table(rows, cols, {"p_text": "p", "p_adjusted_text": "adjusted p",
                                                       "n_items": "items"})
            + (f'<p class="caption">{html_text(adjust)} across the tasks tested.</p>' if adjust else ""))


def _pooled(data: dict) -> str:
    p = data.get("pooled")
    if not p:
        why = data.get("pooled_skipped")
        groups = "".join(f"<p>Pooled over {html_text(', '.join(g.get('tasks', [])))} (the tasks comparing "
                         f"{html_text(', '.join(g.get('systems', [])))}): {html_text(g.get('method', ''))}, "
                         f"{html_text(g.get('evidence', ''))}, p = {html_text(g.get('p_text', ''))}.</p>"
                         for g in data.get("pooled_groups") or [])
        return (f"<p>No pooled model over all the tasks: {html_text(why)}.</p>" if why else "") + groups
    return (f"<p>Pooled over the tasks ({html_text(p.get('formula', ''))}): {html_text(p.get('method', ''))}, "
            f"{html_text(p.get('evidence', ''))}, p = {html_text(p.get('p_text', ''))}.</p>")


def _single(data: dict) -> str:
    """Tasks run by one model (issue 52): each model's mean score with its interval beside the harness's."""
    rows = data.get("one_model_tasks") or []
    if not rows:
        return ""
    return ("<h2>Tasks run by one model: nothing compared</h2>"
            + table(rows, ["task", "metric", "system", "n_items", "estimate", "ci_low", "ci_high", "logged",
                           "interval"], {"n_items": "items", "logged": "harness's value"}))


def _boards(data: dict) -> str:
    boards = data.get("leaderboards") or {}
    out = []
    for task, board in boards.items():
        inner = leaderboard(board, None, "", "h3")
        out.append(details(f"Task {task}: leaderboard", inner, open_=len(boards) <= OPEN_TASKS))
    return "<h2>Per task</h2>" + "".join(out) if out else ""


def _across(data: dict) -> str:
    """Five or more tasks: Friedman's test of the systems' ranks over the tasks and the critical-difference
    diagram (Demsar 2006)."""
    f = data.get("friedman")
    if not f:
        return ""
    from ..logs.many_tasks import cd_diagram

    fig = figures.sized(len(f.get("mean_ranks") or {}) + 2)
    cd_diagram(f, ax=fig.add_subplot(1, 1, 1))
    fig.tight_layout()
    return ("<h2>Across the tasks</h2>" + figure(fig, f"Mean ranks over {f.get('n_tasks')} tasks (1 = best); "
                                                 "systems joined by a bar are within the Nemenyi critical difference "
                                                 f"({f.get('critical_difference', float('nan')):.3g})."))


def _grid(data: dict) -> str:
    grid = data.get("model_by_task") or []
    if not grid or len({r.get("task") for r in grid}) < 2:
        return ""
    return details("Model x task", table(grid), open_=True)


def _harness(data: dict) -> str:
    out = [details("Checked against the logs (ours beside the harness's aggregates)",
                   table(data.get("checked_against_logs") or [],
                         ["system", "task", "run", "metric", "n_items", "ours", "logged", "stderr_ours",
                          "stderr_logged", "status"]))]
    for title, key in (("The harness's numbers, reproduced from the per-item logs", "harness"),
                       ("Miller (2024): standard errors and intervals", "miller"),
                       ("Paired differences (Miller 2024, sec. 4.1)", "paired"),
                       ("McNemar's test (exact and mid-p)", "mcnemar"),
                       ("Small-sample intervals of each accuracy", "intervals")):
        rows = [{k: v for k, v in r.items() if k != "ignores"} for r in data.get(key) or []]
        out.append(details(title, table(rows)))
    ignores = {"mixed model (ours)": data.get("mixed_model_ignores")}
    for key in ("harness", "miller", "paired", "mcnemar"):
        rows = data.get(key) or []
        if rows and rows[0].get("ignores"):
            name = rows[0].get("harness") or rows[0].get("method") or key
            ignores[str(name)] = rows[0]["ignores"]
    out.append(details("Which variation each number ignores",
                       bullets(f"{k}: {v}" for k, v in ignores.items() if v)))
    return "".join(out)


def logs_body(data: dict) -> str:
    read = data.get("read") or {}
    verdict = [v for v in data.get("verdict") or [] if v != data.get("answer")]
    return ("".join([_tasks(data), _pooled(data), _single(data), _boards(data), _across(data), _grid(data),
                     details("Every verdict in words", bullets(verdict)), _harness(data),
                     details("What was read", f"<pre>{html_text(read.get('text', ''))}</pre>"),
                     details("Notes", bullets(data.get("notes") or []))]))
