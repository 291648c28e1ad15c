"""One renderer: a :class:`~.result.Result` as a report, a pure function of its data, for score tables, several
metrics and harness logs alike. ``vrs analyze`` writes its report.html, summary.txt and console lines with it,
Jupyter displays a result with it (``_repr_html_``), and report.ipynb stores its outputs.

- ``render(result, "page")`` - report.html (:func:`vrs_helpers.evaluate.presentation.html` and
  :mod:`.logs_html`: the warnings about the data, the answer, the leaderboard and its forest plot, the readings,
  the rest collapsed);
- ``render(result, "fragment")`` - the same for Jupyter's display (no page around it);
- ``render(result, "markdown")`` - the answer, the warnings, the leaderboard and the readings in Markdown;
- ``render(result, "text")`` - the console: the warnings, the answer, the leaderboard and the verdict lines (the
  disagreements between readings are in the report and summary.txt). Data printed to a terminal have their
  control characters escaped (:func:`vrs_helpers.literal.console_text`);
- ``render(result, "summary")`` - summary.txt: the same lines and the tables behind them as plain text.
"""

from __future__ import annotations

import html as _html

from ...literal import NO_MATH_CLASS, console_text, html_text, markdown_text
from . import html
from .items_html import how_to_read_items, items_body, items_lines, items_summary_lines
from .logs_html import logs_body

FORMATS = ("page", "fragment", "markdown", "text", "summary")


def render(result, fmt: str = "page") -> str:
    """``result`` (a :class:`~.result.Result` or its data) in ``fmt``: ``"page"``, ``"fragment"``, ``"markdown"``
    or ``"text"``."""
    data = result.data if hasattr(result, "data") else result
    if fmt == "page":
        return page(data)
    if fmt == "fragment":
        return f"<style>{html.CSS}</style>{body(data)}"
    if fmt == "markdown":
        return markdown(data)
    if fmt == "text":
        return text(data)
    if fmt == "summary":
        return summary_text(data)
    raise ValueError(f"fmt must be one of {', '.join(FORMATS)}; got {fmt!r}.")


def title(data: dict) -> str:
    if data.get("kind") == "logs":
        fmt = (data.get("read") or {}).get("format", "")
        return f"Evaluation logs{f' ({fmt})' if fmt else ''}: which model is better?"
    if data.get("kind") == "items":
        what = (data.get("data") or {}).get("response") or ""
        return f"Is the benchmark any good?{f' ({what})' if what else ''}"
    d = data.get("data") or {}
    what = d.get("response") or data.get("response") or ""
    return f"Which system is better{f' on {what}' if what else ''}?"


def body(data: dict) -> str:
    """The report of any result, without the page around it."""
    kind = data.get("kind")
    head = f"<h1>{html_text(title(data))}</h1>" + html.about(data) + html.warnings_box(data) + html.answer_box(data)
    main = (html.scores_body(data) if kind == "scores" else html.metrics_body(data) if kind == "metrics" else
            items_body(data) if kind == "items" else logs_body(data))
    tail = (html.details("How to read this", how_to_read_items() if kind == "items" else html.how_to_read(data))
            + html.details("The options of this analysis", html.options_table(data)))
    return f'<div class="vrs {NO_MATH_CLASS}">{head}{main}{tail}</div>'


def page(data: dict, drawn: str | None = None) -> str:
    """report.html: a standalone page (its style in the head, its figures inline; it loads nothing). ``drawn``: the
    body, when it was drawn already (:func:`page_and_fragment`)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_html.escape(title(data))}</title><style>{html.CSS}</style></head>"
            f"<body>{body(data) if drawn is None else drawn}</body></html>\n")


def page_and_fragment(result) -> tuple[str, str]:
    """``render(result, "page")`` and ``render(result, "fragment")`` with the body (its figures) drawn once."""
    data = result.data if hasattr(result, "data") else result
    drawn = body(data)
    return page(data, drawn), f"<style>{html.CSS}</style>{drawn}"


# ------------------------------------------------------------------------------------------ text and Markdown

def _board_lines(board: dict | None) -> list:
    if not board or not board.get("rows") or len(board["rows"]) < 3:
        return []
    lines = [f"Leaderboard ({board.get('unit', 'estimate')} with its {board.get('interval', 'interval')}; rank "
             "interval; systems sharing a letter are not separated):"]
    for r in board["rows"]:
        span = f"{r['rank_low']}" if r.get("rank_low") == r.get("rank_high") else f"{r['rank_low']}-{r['rank_high']}"
        interval = f"[{html.num(r.get('ci_low'))}, {html.num(r.get('ci_high'))}]"
        lines.append(f"  {r.get('rank')}. {r.get('system')}: {html.num(r.get('estimate'))} {interval}, rank {span}"
                     + (f", group {r.get('group')}" if r.get("group") else ""))
    return lines


def _verdict_lines(data: dict) -> list:
    answer = data.get("answer")
    return [v for v in data.get("verdict") or [] if v != answer and not v.startswith("  ")
            and not v.startswith("Ranking of the")]


def text(data: dict) -> str:
    """The console and summary.txt (every line :func:`vrs_helpers.literal.console_text`)."""
    lines = [f"WARNING: {w}" for w in data.get("warnings") or []]
    if data.get("answer"):
        lines.append(data["answer"])
    if data.get("kind") == "scores":
        lines += _board_lines(data.get("leaderboard"))
        lines += _verdict_lines(data)
    elif data.get("kind") == "metrics":
        lines += [v for v in data.get("verdict") or [] if v.startswith("Holm across")]
        for m, part in (data.get("metrics") or {}).items():
            lines += [f"[{m}] {line}" for line in _board_lines(part.get("leaderboard")) + _verdict_lines(part)]
    elif data.get("kind") == "items":
        lines += items_lines(data)
    else:
        lines += [v for v in data.get("verdict") or [] if v != data.get("answer")]
    return "\n".join(console_text(x) for x in lines) + "\n"


def _text_table(rows: list, columns=None) -> list:
    import pandas as pd

    if not rows:
        return []
    frame = pd.DataFrame(rows)
    cols = [c for c in (columns or list(frame.columns)) if c in frame.columns]
    return frame[cols].to_string(index=False).splitlines()


def summary_text(data: dict) -> str:
    """summary.txt: :func:`text`, then the tables a reader may want in plain text."""
    lines = text(data).splitlines()
    kind = data.get("kind")
    parts = {"": data} if kind == "scores" else (data.get("metrics") or {}) if kind == "metrics" else {}
    for name, part in parts.items():
        tests = [{**r, "p": r.get("p_value")} for r in part.get("readings") or []
                 if r.get("comparison") == "all systems" or len(part.get("systems") or []) == 2]
        if tests:
            lines += ["", f"Readings{f' ({name})' if name else ''}:"]
            lines += _text_table(tests, ["comparison", "reading", "test", "statistic", "df", "p", "differ"])
        lines += [f"Disagreement: {d}" for d in part.get("disagreements") or []]
        lines += [f"Note: {n}" for n in part.get("notes") or []]
    if kind == "items":
        lines += items_summary_lines(data, _text_table)
    if kind == "logs":
        adjust = (data.get("adjust") or {}).get("description", "")
        lines += ["", f"Every task ({adjust}):"]
        lines += _text_table(data.get("tasks") or [], ["task", "metric", "status", "n_items", "method", "evidence",
                                                       "p_text", "p_adjusted_text", "decision"])
        if data.get("one_model_tasks"):
            lines += ["", "Tasks run by one model (nothing compared):",
                      *_text_table(data["one_model_tasks"], ["task", "metric", "system", "n_items", "estimate",
                                                             "ci_low", "ci_high", "logged", "interval"])]
        for title_, key in (("Checked against the logs (ours beside the harness's aggregates)",
                             "checked_against_logs"),
                            ("The harness's numbers (reproduced from the per-item logs)", "harness"),
                            ("Miller (2024) error bars", "miller"), ("Paired differences", "paired"),
                            ("McNemar's test", "mcnemar")):
            rows = [{k: v for k, v in r.items() if k != "ignores"} for r in data.get(key) or []]
            if rows:
                lines += ["", f"{title_}:", *_text_table(rows)]
        ignores = {"mixed model (ours)": data.get("mixed_model_ignores")}
        for key in ("harness", "miller", "paired", "mcnemar"):
            rows = data.get(key) or []
            if rows and rows[0].get("ignores"):
                ignores[str(rows[0].get("harness") or rows[0].get("method") or key)] = rows[0]["ignores"]
        lines += ["", "What each ignores:", *[f"- {k}: {v}" for k, v in ignores.items() if v]]
        lines += [f"Note: {n}" for n in data.get("notes") or []]
    return "\n".join(console_text(x) for x in lines) + "\n"


def _md_table(rows: list, columns: list, headers: dict | None = None) -> str:
    if not rows:
        return ""
    headers = headers or {}
    head = "| " + " | ".join(headers.get(c, c) for c in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body_ = ["| " + " | ".join(markdown_text(html.num(r.get(c)) if isinstance(r.get(c), (int, float)) else
                                             r.get(c) if r.get(c) is not None else "") for c in columns) + " |"
             for r in rows]
    return "\n".join([head, rule, *body_])


def markdown(data: dict) -> str:
    """The answer, the warnings, the leaderboard and the readings in Markdown (names escaped)."""
    out = [f"## {markdown_text(title(data))}"]
    out += [f"> **Warning:** {markdown_text(w)}" for w in data.get("warnings") or []]
    if data.get("answer"):
        out.append(f"**{markdown_text(data['answer'])}**")
    parts = {"": data} if data.get("kind") == "scores" else (data.get("metrics") or {})
    for name, part in parts.items():
        board = part.get("leaderboard") or {}
        if name:
            out.append(f"### {markdown_text(name)}")
        rows = [{**r, "interval": f"[{html.num(r.get('ci_low'))}, {html.num(r.get('ci_high'))}]",
                 "ranks": f"{r.get('rank_low')}-{r.get('rank_high')}"} for r in board.get("rows") or []]
        out.append(_md_table(rows, ["rank", "system", "estimate", "interval", "ranks", "group"],
                             {"estimate": board.get("unit", "estimate")}))
        out += [f"- {markdown_text(v)}" for v in _verdict_lines(part)]
    if data.get("kind") == "items":
        out += [f"- {markdown_text(v)}" for v in items_lines(data)]
    if data.get("kind") == "logs":
        out.append(_md_table(data.get("tasks") or [], ["task", "metric", "method", "p_text", "p_adjusted_text",
                                                      "decision"]))
    return "\n\n".join(x for x in out if x) + "\n"
