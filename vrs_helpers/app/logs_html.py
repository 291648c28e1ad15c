"""The sections of the report of ``vrs analyze LOGDIR`` (issue 40), which workbook 09 shows on the user's logs
(its page is report.html; :func:`report_html` puts them on one standalone page): the verdict box first (one line
per task, the across-task answer), then the figures (per-task forest plots, the model x task heatmap, the
critical-difference diagram with 5 or more tasks), the numbers the harness logged beside ours with the status
column, the task table, the small-sample intervals, and each "what it ignores" sentence once. Every value from the
logs is escaped (:func:`vrs_helpers.literal.html_text`; figure labels :func:`~vrs_helpers.literal.plot_text`);
tables have a fixed layout at the page's width (long names wrap), so nothing overflows the page sideways
(``tools/check_logs_report.py`` measures it in headless Chromium at 1,300 px)."""

from __future__ import annotations

import base64
import html
import io
import math

import numpy as np
import pandas as pd

from ..literal import html_text

MAX_FOREST = 24   # forest plots drawn (the rest are in the table)

CSS = """body{font-family:sans-serif;max-width:70em;margin:1.5em auto;padding:0 1em;line-height:1.4}
.verdict{border:2px solid #0969da;border-radius:6px;padding:.5em 1em;background:#f6f8fa}
.verdict li{margin:.2em 0}
table{border-collapse:collapse;table-layout:fixed;width:100%;font-size:.85em}
td,th{padding:2px 6px;border-bottom:1px solid #d0d7de;overflow-wrap:anywhere;word-break:break-word;
vertical-align:top;text-align:left}
img{max-width:100%;height:auto}
pre{white-space:pre-wrap;overflow-wrap:anywhere}
.differs{color:#cf222e;font-weight:bold}"""
# the same rules where the page's own style sheet (nbconvert's JupyterLab template) sets them for every table
SCOPED_CSS = """.vrs-logs table{border-collapse:collapse;table-layout:fixed;width:100%;font-size:.85em;margin:0}
.vrs-logs table td,.vrs-logs table th{padding:2px 6px;border-bottom:1px solid #d0d7de;overflow-wrap:anywhere;
word-break:break-word;vertical-align:top;text-align:left;max-width:none;white-space:normal}
.vrs-logs pre{white-space:pre-wrap;overflow-wrap:anywhere}
.vrs-logs table tr.differs td{color:#cf222e;font-weight:bold}"""


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}"
    return str(v)


def table_html(frame: pd.DataFrame, columns=None, status: str | None = None) -> str:
    """A table of ``frame`` (``columns``, in order, where present), every cell escaped; rows whose ``status`` column
    starts with "differs" marked."""
    if frame is None or not len(frame):
        return "<p>(none)</p>"
    cols = [c for c in (columns or list(frame.columns)) if c in frame.columns]
    head = "".join(f"<th>{html_text(c)}</th>" for c in cols)
    rows = []
    for _, r in frame.iterrows():
        mark = ' class="differs"' if status and str(r.get(status, "")).startswith("differs") else ""
        rows.append(f"<tr{mark}>" + "".join(f"<td>{html_text(_fmt(r[c]))}</td>" for c in cols) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def figures(result) -> list:
    """[(caption, base64 PNG)]: the per-task forest plots (one figure), the heatmap, the CD diagram."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from ..evaluate.many_tasks import cd_diagram, heatmap
    from ..evaluate.ranking import forest_plot
    from ..literal import plot_text

    out = []
    tasks = list(result.rankings.items())[:MAX_FOREST]
    if tasks:
        heights = [0.9 + 0.32 * len(t) for _, t in tasks]
        fig, axes = plt.subplots(len(tasks), 1, figsize=(8, sum(heights) + 0.4 * len(tasks)), squeeze=False,
                                 gridspec_kw={"height_ratios": heights})
        for ax, (task, table) in zip(axes[:, 0], tasks, strict=True):
            forest_plot(table, ax=ax, xlabel="mean score (95 % interval: Wilson for 0/1, else t)")
            ax.set_title(plot_text(task), fontsize=10, loc="left")
        fig.tight_layout()
        out.append(("Per task: each system's mean score with its 95 % interval, its rank (interval) and letters "
                    "(systems sharing a letter are not separated: sign-flip tests, Holm within the task)"
                    + (f"; the first {MAX_FOREST} tasks" if len(result.rankings) > MAX_FOREST else ""), _png(fig)))
    if len(result.grid) and result.grid["task"].nunique() > 1:
        ax = heatmap(result.grid)
        out.append(("Model x task: mean score and the task's letters", _png(ax.figure)))
    if result.friedman:
        ax = cd_diagram(result.friedman)
        out.append((f"Mean ranks over {result.friedman['n_tasks']} tasks; systems joined by a bar are within the "
                    f"Nemenyi critical difference ({result.friedman['critical_difference']:.3g})", _png(ax.figure)))
    return out


def report_parts(result) -> dict:
    """The sections of the report of a :class:`~vrs_helpers.evaluate.tasks.LogsAnalysis`, in order, as HTML:
    ``head`` (the page's style, the title and the verdict box), ``figures``, ``checked``, ``tasks``, ``intervals``,
    ``harness`` (the harness's numbers, Miller's, the paired differences, McNemar), ``ignores`` (each "what it
    ignores" sentence once) and ``read`` (what was read, the notes). Workbook 09 shows them one cell each; every
    part is one ``div`` of class ``vrs-logs``."""
    from ..evaluate.tasks import ADJUSTMENTS

    desc = result.description
    parts = {"head": [f"<style>{CSS}\n{SCOPED_CSS}</style>",
                      f"<h1>Evaluation logs: {html_text(desc.get('format', ''))}</h1>",
                      '<div class="verdict"><h2>Verdict</h2><ul>'
                      + "".join(f"<li>{html_text(v)}</li>" for v in result.verdict) + "</ul></div>"]}
    parts["figures"] = [f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{png}">'
                        f"<figcaption>{html_text(caption)}</figcaption></figure>" for caption, png in figures(result)]
    parts["checked"] = [
        "<h2>Checked against the logs</h2><p>Our mean and standard error reproduced from the per-item records "
        "beside the ones the harness wrote (status: equal within the logged value's rounding, or how it "
        "differs).</p>",
        table_html(result.checked, ["system", "task", "run", "metric", "n_items", "ours", "logged",
                                    "stderr_ours", "stderr_logged", "status"], status="status")]
    tasks = [f"<h2>Every task</h2><p>{html_text(ADJUSTMENTS[result.adjust])} across the tasks tested.</p>",
             table_html(result.tasks, ["task", "metric", "status", "n_items", "systems", "method", "evidence",
                                       "p_text", "p_adjusted_text", "decision"])]
    if result.pooled:
        tasks.append(f"<p>Pooled over tasks ({html_text(result.pooled['formula'])}): "
                     f"{html_text(result.pooled['method'])}, {html_text(result.pooled['evidence'])}, p = "
                     f"{html_text(result.pooled['p_text'])}.</p>")
    if len(result.grid):
        tasks += ["<h2>Model x task</h2>", table_html(result.grid)]
    parts["tasks"] = tasks
    parts["intervals"] = [] if not len(result.intervals) else [
        "<h2>Small-sample intervals of each accuracy</h2><p>95 %: the CLT interval the harness's standard "
        "error implies, Wilson, Clopper-Pearson, and the Bayesian beta-binomial interval (Bowyer et al., "
        "ICML 2025: uniform prior).</p>",
        table_html(result.intervals, ["system", "task", "run", "n", "accuracy", "clt_low", "clt_high",
                                      "wilson_low", "wilson_high", "clopper_pearson_low",
                                      "clopper_pearson_high", "bayes_low", "bayes_high"])]
    harness = []
    for title, frame in (("The harness's numbers, reproduced from the per-item logs", result.harness),
                         ("Miller (2024): standard errors and confidence intervals", result.miller),
                         ("Paired differences (Miller 2024, sec. 4.1)", result.paired),
                         ("McNemar's test (exact and mid-p)", result.mcnemar)):
        if len(frame):
            harness += [f"<h2>{html_text(title)}</h2>", table_html(frame.drop(columns=["ignores"], errors="ignore"))]
    parts["harness"] = harness
    parts["ignores"] = ["<h2>Which variation each number ignores</h2><ul>" + "".join(
        f"<li><b>{html_text(k)}</b>: {html_text(v)}</li>" for k, v in result.ignores().items()) + "</ul>"]
    read = ["<h2>What was read</h2><pre>" + html_text(desc.get("text", "")) + "</pre>"]
    if result.notes:
        read.append("<h2>Notes</h2><ul>" + "".join(f"<li>{html_text(n)}</li>" for n in result.notes) + "</ul>")
    parts["read"] = read
    return {name: '<div class="vrs-logs">' + "\n".join(body) + "</div>" if body else ""
            for name, body in parts.items()}


def report_html(result) -> str:
    """The report as one standalone page (:func:`report_parts` in order); ``vrs analyze LOGDIR`` writes workbook
    09's page instead, which shows the same parts."""
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>vrs analyze: evaluation logs</title>"
            "</head><body>" + "\n".join(p for p in report_parts(result).values() if p) + "</body></html>\n")
