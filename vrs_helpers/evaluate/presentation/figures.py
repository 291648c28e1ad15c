"""The report's figures, drawn from a :class:`~.result.Result`'s data and nothing else (matplotlib, Agg).

:func:`forest` is the leaderboard as a figure: one row per system, best at the top - its estimate with its interval,
each run's mean as a point, the rank interval and letters at the right - with a fixed height per row, so that the
labels never overlap however many systems there are (up to :data:`MAX_ROWS`; beyond that the best ones, and the
table has all). One colour per role, not per system: the systems the answer cannot separate from the best are blue,
the others grey; no legend to read. Names from the data are drawn literally (:func:`vrs_helpers.literal.plot_text`)
and cut to :data:`LABEL_CHARS` characters.

:func:`png` encodes a figure for the HTML page; :func:`label_overlaps` is the check the tests make on every figure.
"""

from __future__ import annotations

import base64
import io

import numpy as np

ROW_INCHES = 0.28     # height of one system's row
MAX_ROWS = 60         # systems drawn (the best by rank); the table has every one
LABEL_CHARS = 40      # a name longer than this is cut, with an ellipsis
WIDTH = 7.5
BEST, OTHER, RUN = "#0969da", "#8c959f", "#57606a"


def _label(value, limit: int = LABEL_CHARS) -> str:
    from ...literal import plot_text

    text = " ".join(str(value).split())
    return plot_text(text if len(text) <= limit else text[:limit - 1] + "\u2026")


def sized(rows: int):
    """An empty figure of the report's width with room for ``rows`` labelled rows."""
    return _figure(rows)


def _figure(rows: int, extra: float = 0.0):
    """A figure of its own (not pyplot's: nothing global to close) on the Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH, 0.9 + extra + ROW_INCHES * max(rows, 1)), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def forest(board: dict, runs=None, title: str = "", xlabel: str | None = None):
    """The leaderboard ``board`` (a Result's ``leaderboard``: ``rows`` best first with ``system``, ``estimate``,
    ``ci_low``, ``ci_high``, ``rank_low``, ``rank_high``, ``group``; ``unit``, ``interval``) as a forest plot, with
    the run means of ``runs`` (records with ``system`` and ``mean``) as points. Returns the matplotlib Figure."""
    rows = list(board.get("rows") or [])[:MAX_ROWS]
    fig = _figure(len(rows), 0.3 if title else 0.0)
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(len(rows))[::-1].astype(float)
    est = np.array([_num(r.get("estimate")) for r in rows])
    lo = np.array([_num(r.get("ci_low")) for r in rows])
    hi = np.array([_num(r.get("ci_high")) for r in rows])
    best = [r.get("rank_low") == 1 for r in rows]
    colours = [BEST if b else OTHER for b in best]
    for yi, a, b, c in zip(y, lo, hi, colours, strict=True):
        if np.isfinite(a) and np.isfinite(b):
            ax.plot([a, b], [yi, yi], color=c, lw=2.2, solid_capstyle="butt", zorder=2)
    ax.scatter(est, y, marker="D", s=28, c=colours, zorder=3)
    if runs:
        where = {str(r["system"]): yi for r, yi in zip(rows, y, strict=True)}
        pts = [(float(r["mean"]), where[str(r["system"])]) for r in runs
               if str(r.get("system")) in where and r.get("mean") is not None]
        if pts:
            px, py = np.array(pts).T
            ax.scatter(px, py + 0.22, marker="o", s=9, facecolors="none", edgecolors=RUN, linewidths=0.7, zorder=1)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_yticks(y, [_label(r.get("system")) for r in rows], fontsize=9)
    right = ax.twinx()
    right.set_ylim(ax.get_ylim())
    spans = ["-" if r.get("rank_low") is None else str(r.get("rank_low")) if r.get("rank_low") == r.get("rank_high")
             else f"{r.get('rank_low')}-{r.get('rank_high')}" for r in rows]
    right.set_yticks(y, [f"{s:>7}  {_label(r.get('group') or '', 12)}" for s, r in zip(spans, rows, strict=True)],
                     fontsize=8, family="monospace")
    right.tick_params(length=0)
    for a in (ax, right):
        for side in ("top", "right"):
            a.spines[side].set_visible(False)
    unit = board.get("unit") or "estimate"
    ax.set_xlabel(_label(xlabel or f"{unit} with its {board.get('interval', 'interval')}"
                         + ("; circles: the runs" if runs else ""), 100), fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="x", labelsize=8)
    header = "rank   letters"
    right.set_title(header, fontsize=8, loc="right", family="monospace")
    if title:
        ax.set_title(_label(title, 80), fontsize=10, loc="left")
    fig.tight_layout()
    return fig


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def png(fig) -> str:
    """The figure as a base64 PNG."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def label_overlaps(fig) -> list:
    """The pairs of tick labels (of every axis of ``fig``) whose drawn boxes overlap, and the labels that stand
    outside the figure: empty when every label can be read."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    bounds = fig.bbox
    problems = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            labels = [t for t, at in zip(axis.get_ticklabels(), axis.get_ticklocs(), strict=False)
                      if t.get_visible() and t.get_text() and lo - 1e-9 <= at <= hi + 1e-9]   # the drawn ones
            boxes = [t.get_window_extent(renderer) for t in labels]
            for i, (t, b) in enumerate(zip(labels, boxes, strict=True)):
                if b.x0 < bounds.x0 - 1 or b.x1 > bounds.x1 + 1 or b.y0 < bounds.y0 - 1 or b.y1 > bounds.y1 + 1:
                    problems.append(("outside", t.get_text()))
                for u, c in zip(labels[i + 1:], boxes[i + 1:], strict=True):
                    if b.overlaps(c):
                        problems.append((t.get_text(), u.get_text()))
    return problems
