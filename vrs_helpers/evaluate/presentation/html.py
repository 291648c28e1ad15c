"""The report as HTML, a pure function of a :class:`~.result.Result` (:func:`page`, :func:`fragment`).

What a reader wants first comes first: the warnings about the data (above everything they affect), the answer in
one sentence, the leaderboard with its forest plot (two or more systems; per metric and per task the same), the
readings that decide it; everything else - the pairs, the runs, reliability, power, the other readings, the notes,
how to read this - collapsed underneath (``<details>``). No book, workbook or exercise content: a user's report.

The page is one file with its figures inline (PNG) and its style in the head: it loads nothing. Tables use the
page's width and scroll sideways in their own box when the screen is narrower than they are (a phone at 400 px);
the figures keep a readable width there and scroll too. Every value from the data is escaped and kept from
MathJax (:func:`vrs_helpers.literal.html_text`), as is the whole fragment shown in Jupyter.
"""

from __future__ import annotations

import html as _html
import math

from ...literal import html_text
from ...outcomes import p_text
from . import figures

GUIDE = "docs/verdict.md"   # the user guide's page on reading the verdict (vrs docs builds the guide as HTML)
HIDE = ' class="narrow-hide"'   # a column left out on a phone
MAX_TABLE_ROWS = 200         # rows of a details table shown (the rest are in summary.json)

CSS = """
.vrs{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;line-height:1.45;
  max-width:1200px;margin:0 auto;padding:0 12px 40px;overflow-wrap:break-word}
.vrs h1{font-size:1.5em;margin:.6em 0 .1em}
.vrs h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}
.vrs h3{font-size:1.05em;margin:1em 0 .3em}
.vrs .about{color:#57606a;margin:0 0 1em}
.vrs .answer{font-size:1.12em;border-left:5px solid #0969da;background:#f6f8fa;padding:10px 14px;margin:.8em 0}
.vrs .answer.broken{border-left-color:#cf222e;background:#ffebe9}
.vrs .answer ul{margin:.2em 0;padding-left:1.2em}
.vrs .warn{border-left:5px solid #bf8700;background:#fff8c5;padding:8px 14px;margin:.8em 0}
.vrs .warn ul{margin:.2em 0;padding-left:1.2em}
.vrs .scroll{overflow-x:auto;max-width:100%}
.vrs table{border-collapse:collapse;font-size:.9em;width:100%;margin:.3em 0}
.vrs th,.vrs td{padding:3px 8px;border-bottom:1px solid #d0d7de;text-align:left;vertical-align:top}
.vrs th{background:#f6f8fa;white-space:nowrap}
.vrs td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.vrs td.t{overflow-wrap:anywhere;min-width:7em}
.vrs tr.best td{font-weight:600}
.vrs table.board{width:auto;min-width:60%}
.vrs table.board th{white-space:normal;vertical-align:bottom}
.vrs .ci{font-size:.85em;color:#57606a;font-weight:400}
.vrs .fig img{display:block;width:100%;max-width:750px;min-width:520px;height:auto}
.vrs .caption{color:#57606a;font-size:.9em;margin:.2em 0 1em}
.vrs details{margin:.5em 0;border:1px solid #d0d7de;border-radius:6px;padding:.3em .8em}
.vrs summary{cursor:pointer;font-weight:600;padding:.2em 0}
.vrs .yes{color:#1a7f37;font-weight:600}.vrs .no{color:#57606a}
.vrs code{background:#f6f8fa;padding:0 3px;border-radius:3px}
@media (max-width:640px){.vrs th,.vrs td{padding:2px 3px}.vrs td.t{min-width:5em}.vrs .narrow-hide{display:none}
  .vrs{padding:0 6px 30px}.vrs .answer{font-size:1.02em;padding:8px 10px}}
"""


# ------------------------------------------------------------------------------------------ small parts

def num(v, digits: int = 4) -> str:
    """A number at ``digits`` significant digits; empty for None/NaN; text escaped."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            return ""
        return f"{v:.{digits}g}" if isinstance(v, float) else str(v)
    return html_text(v)


def _cell(v, key: str = "") -> str:
    if key.startswith("p_") or key == "p_value" or key == "p":
        return f'<td class="n">{_html.escape(p_text(v)) if isinstance(v, (int, float)) else num(v)}</td>'
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f'<td class="n">{num(v)}</td>'
    if isinstance(v, (list, dict)):
        v = ", ".join(map(str, v)) if isinstance(v, list) else ", ".join(f"{a}: {b}" for a, b in v.items())
    return f'<td class="t">{num(v)}</td>'


def table(rows: list, columns=None, headers: dict | None = None, limit: int = MAX_TABLE_ROWS,
          mark=None) -> str:
    """An HTML table of records (``columns`` in order where present; ``headers``: shown names), every value
    escaped, at most ``limit`` rows (a line says how many more are in summary.json); ``mark(row)`` True gives the
    row the class ``best``."""
    rows = list(rows or [])
    if not rows:
        return "<p>(none)</p>"
    cols = [c for c in (columns or list(rows[0])) if any(c in r for r in rows)]
    names = headers or {}
    head = "".join(f"<th>{html_text(names.get(c, c.replace('_', ' ')))}</th>" for c in cols)
    body = []
    for r in rows[:limit]:
        cls = ' class="best"' if mark is not None and mark(r) else ""
        body.append(f"<tr{cls}>" + "".join(_cell(r.get(c), c) for c in cols) + "</tr>")
    more = (f"<p class=\"caption\">{len(rows) - limit} more row(s) in summary.json.</p>"
            if len(rows) > limit else "")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>' \
        + more


def bullets(lines, cls: str = "") -> str:
    items = "".join(f"<li>{html_text(x)}</li>" for x in lines if x)
    return f'<ul class="{cls}">{items}</ul>' if items else ""


def details(summary: str, body: str, open_: bool = False) -> str:
    if not body:
        return ""
    return (f"<details{' open' if open_ else ''}><summary>{html_text(summary)}</summary>{body}</details>")


def figure(fig, caption: str) -> str:
    alt = _html.escape(caption, quote=True)
    return (f'<div class="fig scroll"><img alt="{alt}" src="data:image/png;base64,{figures.png(fig)}"></div>'
            f'<p class="caption">{html_text(caption)}</p>')


# ------------------------------------------------------------------------------------------ sections

def warnings_box(data: dict) -> str:
    lines = data.get("warnings") or []
    if not lines:
        return ""
    return f'<div class="warn"><b>About the data</b>{bullets(lines)}</div>'


def answer_box(data: dict) -> str:
    answer = data.get("answer")
    if not answer:
        return ""
    broken = " broken" if data.get("broken") else ""
    return f'<div class="answer{broken}" id="vrs-answer">{html_text(answer)}</div>'


def _rank_text(r: dict) -> str:
    lo, hi = r.get("rank_low"), r.get("rank_high")
    if lo is None or hi is None:
        return "-"
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def leaderboard(board: dict | None, runs=None, title: str = "Leaderboard", level: str = "h2") -> str:
    """The leaderboard table (each estimate with its interval under it, so that it stays narrow on a phone) and
    its forest plot."""
    if not board or not board.get("rows"):
        return ""
    rows = board["rows"]
    unit = board.get("unit") or "estimate"
    has_runs = any(r.get("runs") for r in rows)
    lettered = any(r.get("group") for r in rows)  # none beyond 200 systems (ranking.MAX_LETTER_SYSTEMS)
    head = ["rank", "system", f"{unit} [{board.get('interval') or 'interval'}]", "rank interval"]
    head += (["letters"] if lettered else []) + (["runs"] if has_runs else [])
    body = []
    for r in rows:
        cls = ' class="best"' if r.get("rank_low") == 1 else ""
        cells = [f'<td class="n">{num(r.get("rank"))}</td>', f'<td class="t">{html_text(r.get("system"))}</td>',
                 f'<td class="n">{num(r.get("estimate"))}<br><span class="ci">[{num(r.get("ci_low"))}, '
                 f'{num(r.get("ci_high"))}]</span></td>', f'<td class="n">{html_text(_rank_text(r))}</td>']
        cells += [f'<td class="t"><code>{html_text(r.get("group") or "")}</code></td>'] if lettered else []
        cells += [f'<td class="n narrow-hide">{num(r.get("runs"))}</td>'] if has_runs else []
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    out = ((f"<{level}>{html_text(title)}</{level}>" if title else "")
           + '<div class="scroll"><table class="board"><thead><tr>'
           + "".join(f"<th{HIDE if h == 'runs' else ''}>{html_text(h)}</th>" for h in head)
           .replace(" [", "<br>[", 1) + f"</tr></thead><tbody>{''.join(body)}</tbody>"
           "</table></div>")
    method = board.get("method")
    caption = ("Bold: the systems that cannot be separated from the best (rank interval starting at 1). "
               + ("Systems sharing a letter are not separated; t" if lettered else "T")
               + "he rank interval holds the ranks each system can hold" + (f" ({method})." if method else "."))
    out += f'<p class="caption">{html_text(caption)}</p>'
    shown = len(rows)
    cut = f" The {figures.MAX_ROWS} best of {shown} are drawn." if shown > figures.MAX_ROWS else ""
    out += figure(figures.forest(board, runs),
                  f"Each system's {unit} with its {board.get('interval', 'interval')} (bar; blue: not separated "
                  "from the best)" + (", the runs' means (circles)" if runs else "")
                  + (", rank interval and letters at the right." if lettered else ", rank interval at the right.")
                  + cut)
    return out


def readings_table(data: dict) -> str:
    rows = [r for r in data.get("readings") or [] if r.get("comparison") in ("all systems",) or
            " vs " in str(r.get("comparison")) and len(data.get("systems") or []) == 2]
    out = []
    for r in rows:
        differ = r.get("differ")
        decision = ("not estimable" if differ is None else
                    ("dominates" if differ else "does not dominate") if r.get("kind") == "aso" else
                    "differ" if differ else "no difference")
        out.append({"reading": r.get("reading"), "test": r.get("test"), "statistic": r.get("statistic"),
                    "df": r.get("df"), "p_value": r.get("p_value"), "decision": decision})
    return table(out, ["reading", "test", "statistic", "df", "p_value", "decision"], {"p_value": "p"})


def relevant_disagreements(data: dict) -> list:
    """The disagreements between readings on a decision the answer depends on: with two systems, their pair; with
    more, the pairs of the best system (the answer names it and those tied with it)."""
    lines = data.get("disagreements") or []
    systems = [str(s) for s in data.get("systems") or []]
    if len(systems) <= 2:
        return list(lines)
    rows = (data.get("leaderboard") or {}).get("rows") or []
    best = str(rows[0]["system"]) if rows else None
    if best is None:
        return []
    return [x for x in lines if x.split(":", 1)[0].startswith(f"{best} vs ") or x.split(":", 1)[0].endswith(
        f" vs {best}")]


def _reliability(data: dict) -> str:
    rel = data.get("reliability") or {}
    if not rel:
        return ""
    rows = []
    for s, r in rel.items():
        need = r.get("runs_for_phi_0.8") or {}
        rows.append({"system": s, "phi": r.get("phi"), "band": r.get("interpretation"),
                     "levels": ", ".join(f"{k}: {v:g}" for k, v in (r.get("runs") or {}).items()),
                     "levels for phi >= 0.8": ", ".join(f"{k}: {v if v is not None else '> max'}"
                                                        for k, v in need.items())})
    return ("<p>Phi: the reliability of each system's item means over its observed runs (its bands: below .5 poor, "
            ".5-.75 moderate, .75-.9 good, above .9 excellent), and the runs it would need for 0.8.</p>"
            + table(rows))


def _power(data: dict) -> str:
    p = data.get("power") or {}
    if not p:
        return ""
    lines = [f"{p.get('test', '')}."]
    if p.get("minimum_detectable_difference") is not None:
        lines.append(f"Smallest difference detected with power {p.get('target')}: "
                     f"{num(p['minimum_detectable_difference'])}.")
    delta = p.get("delta")
    if delta:
        lines.append(f"For a difference of {num(delta['differences'][0])}: power {num(delta.get('power'))}; runs "
                     f"needed {delta.get('runs_needed')}; items needed {delta.get('items_needed')}.")
    return bullets(lines)


def _aso(data: dict) -> str:
    aso = data.get("aso") or {}
    rows = [{"system": s, "against": a.get("baseline"), "eps_min (system better)":
             a.get("candidate_better", {}).get("eps_min"), "eps_min (baseline better)":
             a.get("baseline_better", {}).get("eps_min"), "winner": a.get("winner") or "neither"}
            for s, a in aso.items()]
    best = []
    for s, e in (data.get("expected_max") or {}).items():
        for r in e.get("table") or []:
            best.append({"system": s, "n runs": r.get("n"), "expected best": r.get("expected"),
                         "low": r.get("ci_low"), "high": r.get("ci_high")})
    body = ""
    if rows:
        body += ("<p>Almost Stochastic Order on the runs' means (deepsig's threshold eps_min &lt; 0.2): a system is "
                 "almost stochastically better when its eps_min is below it.</p>" + table(rows))
    if best:
        body += ("<p>The expected best score of n runs (Dodge et al. 2019) with its bootstrap interval.</p>"
                 + table(best))
    return body


def _conditional(data: dict) -> str:
    cond = data.get("conditional") or {}
    inter = data.get("interaction") or {}
    rows = [{"property": p, "question": "do the systems differ once it is accounted for?",
             "p_value": c.get("p_value")} for p, c in cond.items()]
    rows += [{"property": p, "question": "does the difference depend on it?", "test": t.get("test"),
              "p_value": t.get("p_value")} for p, t in inter.items()]
    return table(rows, ["property", "question", "test", "p_value"], {"p_value": "p"}) if rows else ""


def _judge(data: dict) -> str:
    j = data.get("judge")
    if not j:
        return ""
    rows = []
    for s, d in (j.get("differences") or {}).items():
        for m, e in d.items():
            rows.append({"system": s, "against": j.get("baseline"), "method": m, "difference": e.get("estimate"),
                         "low": e.get("lower"), "high": e.get("upper"), "p_value": e.get("p_value")})
    means = []
    for s, d in (j.get("means") or {}).items():
        for m, e in d.items():
            means.append({"system": s, "method": m, "mean": e.get("estimate"), "low": e.get("lower"),
                          "high": e.get("upper")})
    return ("<h2>The judge corrected by the human labels</h2>" + bullets(j.get("verdict") or [])
            + table(rows, None, {"p_value": "p"}) + details("Corrected means per system", table(means)))


def how_to_read(data: dict) -> str:
    return ("<p>The answer is the test that matches the design: with runs, a mixed model with a random effect per "
            "run (and per system and item), so that it holds for runs and items like these; without runs, the runs "
            "as replications. The leaderboard's intervals are in the family of its decisions: two systems whose "
            "intervals overlap can still differ, read the letters. The other readings ignore some source of "
            "variation, named beside each. The user guide explains every line: its page <i>The verdict and how to "
            f"read it</i> (<code>{_html.escape(GUIDE)}</code>; <code>vrs docs</code> builds the guide as HTML).</p>")


def about(data: dict) -> str:
    d = data.get("data") or {}
    parts = []
    if d.get("label"):
        parts.append(str(d["label"]))
    if d.get("rows") is not None:
        parts.append(f"{d['rows']:,} rows")
    if d.get("n_systems") is not None:
        parts.append(f"{d['n_systems']} system(s)")
    if d.get("items") is not None:
        parts.append(f"{d['items']} items")
    runs = d.get("runs_per_system") or {}
    if runs:
        counts = sorted(set(runs.values()))
        parts.append("runs per system " + (f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"))
    return f'<p class="about">{html_text(" · ".join(parts))}</p>' if parts else ""


def options_table(data: dict) -> str:
    spec = data.get("spec") or {}
    rows = [{"option": k, "value": v if not isinstance(v, list) else ", ".join(map(str, v))}
            for k, v in spec.items() if v not in (None, [], "")]
    return table(rows)


# ------------------------------------------------------------------------------------------ one analysis

def scores_body(data: dict, heading: str = "h2") -> str:
    """The sections of one response's report (after its title)."""
    systems = data.get("systems") or []
    board = data.get("leaderboard") or {}
    out = [leaderboard(board, None if board.get("corrected") else data.get("runs"),
                       "Leaderboard" if len(systems) >= 3 else "The systems", heading)]
    out.append(_judge(data))
    judged = " of the judge's scores as they are" if data.get("judge") else ""
    out.append(f"<{heading}>The readings{judged}</{heading}>" + readings_table(data))
    relevant = relevant_disagreements(data)
    if relevant:
        out.append('<div class="warn"><b>Readings that disagree on the answer</b>' + bullets(relevant) + "</div>")
    verdict = [v for v in data.get("verdict") or [] if v != data.get("answer") and not v.startswith("  ")
               and not v.startswith("Ranking of the")]
    out.append(details("Every reading in words", bullets(verdict)))
    pairs = data.get("pairs") or data.get("contrasts") or []
    if len(systems) >= 3 and pairs:
        cols = [c for c in ("contrast", "estimate", "lower", "upper", "difference", "difference_low",
                            "difference_high", "df", "t", "z", "p_value") if any(c in r for r in pairs)]
        out.append(details(f"Every pair ({len(pairs)})", table(pairs, cols, {"p_value": "adjusted p"})))
    out.append(details("The runs", table(data.get("runs") or [], ["system", "run", "n", "mean", "sd", "ci_low",
                                                                   "ci_high"])))
    out.append(details("Reliability per system", _reliability(data)))
    out.append(details("Power and runs needed", _power(data)))
    out.append(details("Conditional on data properties", _conditional(data)))
    out.append(details("Against the baseline: ASO and the best of n runs" if data.get("aso") else
                       "The best of n runs", _aso(data)))
    other = [d for d in data.get("disagreements") or [] if d not in relevant]
    out.append(details(f"Other disagreements between readings ({len(other)})", bullets(other)))
    notes = list(dict.fromkeys([*(data.get("notes") or []), *(data.get("fit_notes") or [])]))
    out.append(details("Notes", bullets(notes)))
    return "".join(out)


def metrics_body(data: dict) -> str:
    holm = (data.get("holm") or {}).get("families") or {}
    rows = [r for fam in holm.values() for r in fam]
    out = ["<h2>Across the metrics (Holm)</h2>", table(rows, ["reading", "metric", "test", "p_value", "p_holm",
                                                               "differ"], {"p_value": "p", "p_holm": "Holm p"})]
    for m, part in (data.get("metrics") or {}).items():
        inner = answer_box(part) + scores_body(part, "h3")
        out.append(details(f"Metric {m}", inner, open_=True))
    return "".join(out)


