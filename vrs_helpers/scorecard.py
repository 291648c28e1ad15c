"""The reproduction scorecard: every published number a notebook checks, with ours beside it.

A notebook creates one :class:`Scorecard` and calls :meth:`Scorecard.check` for each number it reproduces.
Each check is shown inline (a one-row table) and is also emitted as a machine-readable output
(MIME type ``application/vnd.vrs.scorecard+json``) that ``vrs reproduce`` collects from the executed
notebooks into ``build/scorecard.csv`` and ``build/html/index.html``. :func:`record` emits any other scalar
(``application/vnd.vrs.scalar+json``) for ``vrs batch``.

``match`` is ``"true"`` when |ours - book| <= tolerance, ``"explained"`` when it is not but the notebook
gives an explanation (a documented, justified difference), and ``"false"`` otherwise.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import asdict, dataclass, field

import pandas as pd

SCORECARD_MIME = "application/vnd.vrs.scorecard+json"
SCALAR_MIME = "application/vnd.vrs.scalar+json"
COLUMNS = ["notebook", "ref", "quantity", "book", "ours", "tolerance", "match"]


def _fmt(x) -> str:
    if isinstance(x, float):
        if math.isnan(x):
            return "NaN"
        return f"{x:.6g}"
    return str(x)


@dataclass
class Check:
    """One published number and our reproduction of it."""

    notebook: str
    ref: str  # as printed in the source: "Table 3.1", "Section 3.3.1", "ICLR Table 2"
    quantity: str
    book: float
    ours: float
    tolerance: float
    match: str  # "true" | "false" | "explained"
    explanation: str = ""

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(self)])

    def __repr__(self) -> str:
        return (f"[{self.match}] {self.ref} — {self.quantity}: book {_fmt(self.book)}, ours {_fmt(self.ours)} "
                f"(tolerance {_fmt(self.tolerance)})")

    def _repr_html_(self) -> str:
        colour = {"true": "#1a7f37", "explained": "#9a6700", "false": "#cf222e"}[self.match]
        expl = f"<br><i>{html.escape(self.explanation)}</i>" if self.explanation else ""
        return (f"<div style='border-left:4px solid {colour};padding-left:6px'><b>{html.escape(self.ref)}</b> — "
                f"{html.escape(self.quantity)}: book <b>{_fmt(self.book)}</b>, ours <b>{_fmt(self.ours)}</b> "
                f"(tolerance {_fmt(self.tolerance)}) → <span style='color:{colour}'>{self.match}</span>{expl}</div>")


def printed_tolerance(digits: int) -> float:
    """Half a unit of the last printed digit: the tolerance for a number printed with ``digits`` decimals.

    A hair (1e-9 relative) is added so that a value exactly half-way (0.875 printed as 0.88) matches.
    """
    return 0.5 * 10.0 ** (-digits) * (1 + 1e-9)


def tolerance_of(printed: str) -> float:
    """Half a unit of the last digit of a number as printed: "0.00304" -> 5e-6, "12" -> 0.5, "14.2" -> 0.05."""
    text = str(printed).strip()
    digits = len(text.split(".", 1)[1]) if "." in text else 0
    return printed_tolerance(digits)


def compare(book: float, ours: float, tolerance: float) -> bool:
    """True when ``ours`` is within the absolute ``tolerance`` of ``book`` (NaN matches NaN)."""
    book, ours = float(book), float(ours)
    if math.isnan(book) or math.isnan(ours):
        return math.isnan(book) and math.isnan(ours)
    return abs(ours - book) <= tolerance


def _display(bundle: dict) -> None:
    try:
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython ships with every notebook kernel
        return
    display(bundle, raw=True)


@dataclass
class Scorecard:
    """Collects the checks of one notebook and shows each inline.

    >>> card = Scorecard("03_krippendorff_paradoxes")
    >>> c = card.check("Section 3.3.1", "alpha, two raters, 10 items", 0.095, 0.0952, tolerance=5e-4, show=False)
    >>> c.match
    'true'
    """

    notebook: str
    checks: list[Check] = field(default_factory=list)
    _pending: list[Check] = field(default_factory=list, repr=False)

    def check(self, ref: str, quantity: str, book: float, ours: float, tolerance: float, *,
              explanation: str = "", show: bool = True) -> Check:
        """Compare one published number with ours, display the comparison and record it.

        ``tolerance`` is absolute; state in the notebook why it is what it is (usually half a unit of the
        last printed digit). ``explanation`` marks a documented difference: it only changes a failing
        comparison to ``"explained"``.
        """
        if not isinstance(tolerance, (int, float)) or tolerance < 0:
            raise ValueError(f"tolerance must be a non-negative number; got {tolerance!r}.")
        ok = compare(book, ours, tolerance)
        match = "true" if ok else ("explained" if explanation else "false")
        c = Check(self.notebook, ref, quantity, float(book), float(ours), float(tolerance), match, explanation)
        self.checks.append(c)
        if show:
            _display({"text/plain": repr(c), "text/html": c._repr_html_(), SCORECARD_MIME: _payload(c)})
        else:
            self._pending.append(c)
        return c

    def flush(self, visible: bool = True) -> None:
        """Emit the checks made with ``show=False`` since the last flush (so ``vrs reproduce`` collects them),
        as one table, or (``visible=False``) as a one-line summary when the notebook shows them otherwise."""
        if not self._pending:
            return
        rows = [_payload(c) for c in self._pending]
        counts = pd.Series([c.match for c in self._pending]).value_counts().to_dict()
        bundle = {"text/plain": f"{len(rows)} scorecard checks recorded: {counts}", SCORECARD_MIME: rows}
        if visible:
            frame = pd.DataFrame([asdict(c) for c in self._pending])[COLUMNS[1:]]
            bundle["text/html"] = frame.to_html(index=False, float_format=_fmt)
        _display(bundle)
        self._pending = []

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(c) for c in self.checks], columns=COLUMNS + ["explanation"])

    def __repr__(self) -> str:
        counts = self.to_frame()["match"].value_counts().to_dict() if self.checks else {}
        return f"Scorecard({self.notebook!r}, {len(self.checks)} checks, {counts})"

    def _repr_html_(self) -> str:
        return self.to_frame().to_html(index=False, float_format=_fmt)


def _payload(c: Check) -> dict:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(c).items()}


def record(name: str, value: float, show: bool = True) -> float:
    """Emit a named scalar result so that ``vrs batch`` can collect it into its CSV."""
    value = float(value)
    if show:
        _display({"text/plain": f"{name} = {_fmt(value)}", SCALAR_MIME: {"name": name, "value": value}})
    return value


def extract(nb) -> tuple[list[dict], dict]:
    """Scorecard rows and recorded scalars from an executed notebook (an ``nbformat`` node or a path)."""
    if not hasattr(nb, "cells"):
        import nbformat

        nb = nbformat.read(str(nb), as_version=4)
    rows, scalars = [], {}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if SCORECARD_MIME in data:
                payload = data[SCORECARD_MIME]
                payload = json.loads(payload) if isinstance(payload, str) else payload
                for row in (payload if isinstance(payload, list) else [payload]):
                    rows.append({k: (float("nan") if v is None and k in ("book", "ours") else v)
                                 for k, v in dict(row).items()})
                    scalars[f"{row['ref']}: {row['quantity']}"] = rows[-1]["ours"]
            if SCALAR_MIME in data:
                s = data[SCALAR_MIME]
                s = json.loads(s) if isinstance(s, str) else s
                scalars[s["name"]] = s["value"]
    return rows, scalars
