"""The reproduction scorecard: every published number a notebook checks, with ours beside it.

A notebook creates one :class:`Scorecard` and calls :meth:`Scorecard.check` for each number it reproduces.
Each check is shown inline (a one-row table) and is also emitted as a machine-readable output
(MIME type ``application/vnd.vrs.scorecard+json``) that ``vrs reproduce`` collects from the executed
notebooks into ``build/scorecard.csv`` and ``build/html/index.html``. :func:`record` emits any other scalar
(``application/vnd.vrs.scalar+json``) for ``vrs batch``.

``match`` is

- ``"true"`` when |ours - book| <= tolerance, the tolerance being the book's printed precision (half a unit of its
  last printed digit, :func:`tolerance_of`), never more than the value itself;
- ``"explained"`` when it is not, but the row names a second reference on the same public data (an lme4, mgcv or
  emmeans value, an exact recomputation, a figure the paper prints elsewhere) whose value ours matches within the
  same tolerance *and* which misses the book as ours does, and says why the book differs;
- ``"false"`` otherwise. A ``false`` row is a finding (a published number the public data does not reproduce),
  shown with the notebook's reasoning. What fails a run is a *regression*: a row whose status is worse than in the
  committed baseline (``notebooks/scorecard_baseline.csv``), or a committed row that vanished, see
  :func:`regressions`.

Rows are of two kinds (``kind``), kept apart wherever they are counted or shown:

- ``"book"``: a number printed in the book or a paper (``book`` is that number). The reproduction counts are book
  rows only. A book row's ``ref`` names where the number is printed, never another implementation.
- ``"reference"``: ours against another implementation (lme4, mgcv, emmeans) on the same data; ``book`` holds the
  reference's value, read from a committed reference file (never typed into a notebook), ``ref`` names the
  implementation. A reference row is ``true`` or ``false``; nothing explains it.

Definitional constants (a critical value of the normal distribution, 0.05 / 3) are not rows: a notebook asserts
them.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from ..errors import VRSError
from ..literal import read_back, to_csv


class ScorecardError(VRSError, ValueError):
    """A check that cannot be made as asked (a tolerance beyond the printed precision, a missing reference)."""


SCORECARD_MIME = "application/vnd.vrs.scorecard+json"
SCALAR_MIME = "application/vnd.vrs.scalar+json"
COLUMNS = ["notebook", "analysis", "kind", "ref", "quantity", "book", "ours", "tolerance", "match", "alternative",
           "alternative_value", "explanation"]
KEY = ["notebook", "analysis", "ref", "quantity"]
KINDS = ("book", "reference")
#: names of other implementations: a row whose ``ref`` names one is a reference row, not a book row
IMPLEMENTATIONS = ("lme4", "mgcv", "emmeans", "lmertest", "pbkrtest", "afex", "statsmodels", "pygam", "deepsig")
BASELINE = "scorecard_baseline.csv"  # beside the notebooks
#: the columns of a check table (:meth:`Scorecard.check_table`)
_TABLE_COLUMNS = ("ref", "quantity", "book", "ours", "printed", "tolerance", "alternative", "alternative_value",
                  "explanation", "kind")
FINDINGS_LEGEND = ("**Not plain matches.** *explained*: a second reference on the same data matches ours, misses "
                   "the book as well, and the book differs for the reason given; *false*: not reproduced from the "
                   "public data.")
FINDINGS_LEGEND_REFERENCE = (" A reference row (kind `reference`) is *false* when ours differs from the other "
                             "implementation.")
_RANK = {"false": 0, "explained": 1, "true": 2}


def _empty(value) -> bool:
    """An empty cell of a check table: None, NaN or blank text."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return isinstance(value, str) and not value.strip()


def _fmt(x) -> str:
    if isinstance(x, float):
        if math.isnan(x):
            return "NaN"
        return f"{x:.6g}"
    return str(x)


def shown(value, tolerance) -> str:
    """A value as the scorecard shows it: two digits beyond the precision of the check (the decimals of its
    tolerance), at most 6 significant digits; exact checks (tolerance 0) at 6 significant digits.

    Shown values never carry the last digits of a float, which differ between CPUs and BLAS libraries: notebook
    outputs checked by nbval stay the same on every machine. The full value is in the check's data (``ours``)."""
    try:
        v, tol = float(value), float(tolerance)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(v):
        return "NaN"
    if v == 0 or not tol > 0 or math.isnan(tol):
        return _fmt(v)
    decimals = round(-math.log10(2 * tol)) + 2
    sig = decimals + math.floor(math.log10(abs(v))) + 1
    return f"{v:.{min(6, max(1, sig))}g}"


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
    alternative: str = ""  # a second reference on the same data, e.g. "lme4 1.1-31 (REML)"
    alternative_value: float = float("nan")
    analysis: str = ""  # which of the notebook's analyses (parameters), when it has several
    kind: str = "book"  # "book": a published number; "reference": ours against another implementation

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(self)])[COLUMNS]

    def __repr__(self) -> str:
        alt = (f"; {self.alternative} {shown(self.alternative_value, self.tolerance)}" if self.alternative else "")
        what = "book" if self.kind == "book" else "reference"
        return (f"[{self.match}] {self.ref} — {self.quantity}: {what} {_fmt(self.book)}, ours "
                f"{shown(self.ours, self.tolerance)} (tolerance {_fmt(self.tolerance)}{alt})")

    def _repr_html_(self) -> str:
        colour = {"true": "#1a7f37", "explained": "#9a6700", "false": "#cf222e"}[self.match]
        alt = (f"; {html.escape(self.alternative)} <b>{shown(self.alternative_value, self.tolerance)}</b>"
               if self.alternative else "")
        expl = f"<br><i>{html.escape(self.explanation)}</i>" if self.explanation else ""
        what = "book" if self.kind == "book" else "reference"
        return (f"<div style='border-left:4px solid {colour};padding-left:6px'><b>{html.escape(self.ref)}</b> — "
                f"{html.escape(self.quantity)}: {what} <b>{_fmt(self.book)}</b>, ours "
                f"<b>{shown(self.ours, self.tolerance)}</b> "
                f"(tolerance {_fmt(self.tolerance)}{alt}) → <span style='color:{colour}'>{self.match}</span>{expl}"
                f"</div>")


def printed_tolerance(digits: int) -> float:
    """Half a unit of the last printed digit: the tolerance for a number printed with ``digits`` decimals.

    A hair (1e-9 relative) is added so that a value exactly half-way (0.875 printed as 0.88) matches.
    """
    return 0.5 * 10.0 ** (-digits) * (1 + 1e-9)


def tolerance_of(printed: str) -> float:
    """Half a unit of the last digit of a number as printed: "0.00304" -> 5e-6, "12" -> 0.5, "14.2" -> 0.05,
    "2.06247e-6" -> 5e-12; a percentage is compared as a fraction: "76.6%" -> 5e-4 (for 0.766)."""
    text = str(printed).strip().lower()
    if text.endswith("%"):
        return tolerance_of(text[:-1].strip()) / 100
    mantissa, _, exponent = text.partition("e")
    digits = len(mantissa.split(".", 1)[1]) if "." in mantissa else 0
    return printed_tolerance(digits - (int(exponent) if exponent else 0))


def rounding_tolerance(printed: str, ours: float, low: float, high: float) -> float:
    """The tolerance of an interval check for a number computed from printed (rounded) inputs: the book's value
    stands for printed +- half a unit of its last digit, ours for [``low``, ``high``], the range the rounding of the
    printed inputs allows it; the two agree when these intervals overlap. As a tolerance on |ours - book|: the
    printed precision widened by how far the inputs' rounding moves ours towards the book (``ours - low`` when ours
    lies above the book, ``high - ours`` when below), so the check is exactly the overlap."""
    book, ours, low, high = float(printed), float(ours), float(low), float(high)
    if not low <= ours <= high:
        raise ScorecardError(f"ours ({ours:g}) must lie in its rounding range [{low:g}, {high:g}].")
    return tolerance_of(printed) + (ours - low if ours >= book else high - ours)


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
    """Collects the checks of one notebook (one analysis of it) and shows each inline.

    >>> card = Scorecard("03_krippendorff_paradoxes")
    >>> card.check("Section 3.3.1", "alpha, two raters, 10 items", 0.095, 0.0952, printed="0.095", show=False).match
    'true'
    """

    notebook: str
    analysis: str = ""
    checks: list[Check] = field(default_factory=list)
    _pending: list[Check] = field(default_factory=list, repr=False)

    def check(self, ref: str, quantity: str, book: float, ours: float, tolerance: float | None = None, *,
              printed: str | None = None, alternative: str = "", alternative_value: float | None = None,
              explanation: str = "", kind: str = "book", show: bool = True) -> Check:
        """Compare one published number (or, ``kind="reference"``, another implementation's value) with ours,
        display the comparison and record it.

        The tolerance is absolute: half a unit of the last printed digit (give the number as ``printed`` text, or
        the ``tolerance`` itself with a reason in the notebook; given both, the tolerance may not exceed the printed
        precision). It may not exceed the value itself; a book value of 0 needs an ``alternative`` reference (e.g.
        lme4's estimate) and a tight tolerance. A mismatch is ``explained`` only when ``alternative`` /
        ``alternative_value`` name a second reference on the same data that ours matches within the tolerance *and*
        that misses the book too, and ``explanation`` says why the book differs; otherwise ``false``.

        ``kind="reference"``: ``book`` is the value of the implementation ``ref`` names (lme4, mgcv, emmeans),
        read from a committed reference file; the tolerance is a numerical one, given explicitly; the row is
        ``true`` or ``false`` (an ``explanation`` may say why it is false), never ``explained``. A book row whose
        ``ref`` names another implementation is refused: it is a reference row.
        """
        if kind not in KINDS:
            raise ScorecardError(f"{ref} / {quantity}: kind must be one of {KINDS}; got {kind!r}.")
        named = [name for name in IMPLEMENTATIONS if name in str(ref).lower()]
        if kind == "book" and named:
            raise ScorecardError(f"{ref} / {quantity}: a book row's ref names where the number is printed; {ref!r} "
                                 f"names another implementation ({named[0]}): check it with kind='reference'.")
        if kind == "reference" and not named:
            raise ScorecardError(f"{ref} / {quantity}: a reference row's ref names the implementation it compares "
                                 f"with (one of {', '.join(IMPLEMENTATIONS)}), e.g. 'Figure 3.5 (lme4/emmeans)'.")
        if kind == "reference" and (alternative or alternative_value is not None):
            raise ScorecardError(f"{ref} / {quantity}: a reference row compares ours with the reference itself; it "
                                 "takes no alternative (and cannot be explained).")
        if tolerance is None:
            if printed is None:
                raise ScorecardError(f"{ref} / {quantity}: give the number as printed (printed='0.0123') or a "
                                     "tolerance.")
            tolerance = tolerance_of(printed)
        if not isinstance(tolerance, (int, float)) or not tolerance >= 0:
            raise ScorecardError(f"tolerance must be a non-negative number; got {tolerance!r}.")
        if printed is not None and tolerance > tolerance_of(printed):
            raise ScorecardError(f"{ref} / {quantity}: tolerance {tolerance:g} exceeds the printed precision of "
                                 f"{printed!r} ({tolerance_of(printed):g}).")
        book, ours = float(book), float(ours)
        if not math.isnan(book) and kind == "book":
            if book != 0 and tolerance > abs(book):
                raise ScorecardError(f"{ref} / {quantity}: tolerance {tolerance:g} exceeds the value itself "
                                     f"({book:g}); use the printed precision.")
            if book == 0 and tolerance > 0 and (not alternative or alternative_value is None):
                raise ScorecardError(f"{ref} / {quantity}: the book prints 0; check it against an alternative "
                                     "reference (alternative=..., alternative_value=...) with a tight tolerance.")
        alt_value = float("nan") if alternative_value is None else float(alternative_value)
        if alternative and alternative_value is None:
            raise ScorecardError(f"{ref} / {quantity}: an alternative reference needs its value (alternative_value=).")
        if compare(book, ours, tolerance):
            match = "true"
        elif (alternative and explanation and compare(alt_value, ours, tolerance)
              and not compare(alt_value, book, tolerance)):
            # explained only when the second reference reproduces ours AND misses the book too: a reference that
            # matches the book shows that the book's number is reachable, so our miss is a finding (false)
            match = "explained"
        else:
            match = "false"
        c = Check(self.notebook, ref, quantity, book, ours, float(tolerance), match, explanation, alternative,
                  alt_value, self.analysis, kind)
        self.checks.append(c)
        if show:
            _display({"text/plain": repr(c), "text/html": c._repr_html_(), SCORECARD_MIME: _payload(c)})
        else:
            self._pending.append(c)
        return c

    def check_reference(self, ref: str, quantity: str, reference: float, ours: float, tolerance: float, *,
                        explanation: str = "", show: bool = True) -> Check:
        """A reference row: ours against another implementation's value on the same data (``ref`` names it, e.g.
        "Section 2.4.3 (mgcv, test set)"), within a numerical ``tolerance`` stated in the notebook."""
        return self.check(ref, quantity, reference, ours, tolerance, explanation=explanation, kind="reference",
                          show=show)

    def check_p(self, ref: str, quantity: str, printed: str, ours: float, **kwargs) -> Check:
        """Check a p-value as the book prints it: a number (tolerance half a unit of its last digit) or a bound
        "< x" (checked as x/2 +- x/2, i.e. 0 <= p <= x; the quantity says so)."""
        text = str(printed).strip()
        if text.startswith("<"):
            bound = float(text[1:])
            return self.check(ref, f"{quantity} (printed '{text}')", bound / 2, ours, tolerance=bound / 2, **kwargs)
        return self.check(ref, quantity, float(text), ours, printed=text, **kwargs)

    def check_interval(self, ref: str, quantity: str, printed: str, low: float, high: float, ours: float, *,
                       meaning: str, **kwargs) -> Check:
        """Check ours against the interval [``low``, ``high``] that a printed number stands for, when that is not
        the printed value +- half a unit of its last digit: a value the authors' code truncates with ``floor()``
        ("95" is [95, 96)), or a printed number computed from printed inputs whose own rounding moves the result.
        As :meth:`check_p` does for a bound, the row holds the interval's midpoint with half its width as the
        tolerance, and its quantity says what the printed number means (``meaning``, fixed text, e.g. "floor():
        [95, 96)"), so the interval is stated in the row."""
        low, high = float(low), float(high)
        if not high >= low:
            raise ScorecardError(f"{ref} / {quantity}: an interval needs low <= high; got [{low:g}, {high:g}].")
        return self.check(ref, f"{quantity} (printed '{str(printed).strip()}', interval check: {meaning})",
                          (low + high) / 2, ours, tolerance=(high - low) / 2 * (1 + 1e-9), **kwargs)

    def check_table(self, rows, *, show: bool = True) -> pd.DataFrame:
        """Check a table of published numbers (or reference values) against ours: one :meth:`check` per row, the
        rows shown together as one table. Returns the checks made (the columns of :meth:`to_frame`, ``match`` among
        them), indexed like ``rows``.

        ``rows``: a DataFrame (or a list of dicts) with the columns ``ref``, ``quantity``, ``book`` and ``ours`` and
        optionally those of :meth:`check`: ``printed`` (the number as printed: its tolerance is half a unit of the
        last digit; a p-value printed as a bound, "< 0.0001", is checked as 0 <= p <= 0.0001, :meth:`check_p`, and
        ``book`` may then be left empty), ``tolerance``, ``alternative``, ``alternative_value``, ``explanation``
        and ``kind``. An empty cell (NaN, None, "") is the default of :meth:`check`. Other columns are refused, so
        a misspelt one cannot be ignored silently; the index is free (e.g. the example each row belongs to).

        ``show=False``: the checks wait for the next :meth:`flush`.
        """
        frame = pd.DataFrame(rows) if not isinstance(rows, pd.DataFrame) else rows
        unknown = [c for c in frame.columns if c not in _TABLE_COLUMNS]
        missing = [c for c in ("ref", "quantity", "ours") if c not in frame.columns]
        if "book" not in frame.columns and "printed" not in frame.columns:
            missing.append("book")
        if unknown or missing:
            raise ScorecardError(f"a check table has the columns {', '.join(_TABLE_COLUMNS)} (ref, quantity, book "
                                 f"or printed, and ours required); unknown: {unknown or 'none'}, missing: "
                                 f"{missing or 'none'}.")
        made = []
        for row in frame.to_dict("records"):
            cell = {k: v for k, v in row.items() if not _empty(v)}
            ref, quantity, ours = cell.pop("ref"), cell.pop("quantity"), cell.pop("ours", float("nan"))
            printed = cell.get("printed")
            if printed is not None and str(printed).strip().startswith("<"):
                extra = {k: v for k, v in cell.items() if k not in ("printed", "book")}
                made.append(self.check_p(ref, quantity, str(printed), ours, show=False, **extra))
                continue
            book = cell.pop("book", None)
            if book is None:
                book = float(printed) if printed is not None else float("nan")
            if printed is not None:
                cell["printed"] = str(printed)
            made.append(self.check(ref, quantity, book, ours, show=False, **cell))
        if show:
            self.flush()
        return pd.DataFrame([asdict(c) for c in made], columns=COLUMNS, index=frame.index)

    def finish(self, baseline: str | Path | pd.DataFrame = BASELINE) -> None:
        """A workbook's last cell: every row of the card, then the rows that are not plain matches with their
        reasons, and the counts; raises :class:`ScorecardError` when a row is worse than in the committed
        baseline (:meth:`regressions`), which fails the run (and CI). The display is the same on every machine."""
        _display({"text/plain": repr(self.table()), "text/html": self.table().to_html(index=False)})
        findings = self.table(findings=True)
        if len(findings):
            legend = FINDINGS_LEGEND + (FINDINGS_LEGEND_REFERENCE if any(c.kind == "reference" for c in self.checks)
                                        else "")
            _display({"text/markdown": legend, "text/plain": legend})
            _display({"text/plain": repr(findings), "text/html": findings.to_html(index=False)})
        worse = self.regressions(baseline)
        if len(worse):
            raise ScorecardError("scorecard rows worse than the committed baseline: "
                                 f"{worse[['ref', 'quantity', 'match', 'baseline']].to_dict('records')}")
        counts = "; ".join(f"{kind} rows {c}" for kind, c in self.counts().items())
        _display({"text/plain": f"{len(self.checks)} checks: {counts or 'none'}"})

    def flush(self, visible: bool = True) -> None:
        """Emit the checks made with ``show=False`` since the last flush (so ``vrs reproduce`` collects them),
        as one table, or (``visible=False``) as a one-line summary when the notebook shows them otherwise."""
        if not self._pending:
            return
        rows = [_payload(c) for c in self._pending]
        bundle = {"text/plain": f"{len(rows)} scorecard checks recorded: {_counts_text(self._pending)}",
                  SCORECARD_MIME: rows}
        if visible:
            bundle["text/html"] = _shown_frame(self._pending, findings=True).to_html(index=False)
        _display(bundle)
        self._pending = []

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(c) for c in self.checks], columns=COLUMNS)

    def table(self, findings: bool = False, kind: str | None = None) -> pd.DataFrame:
        """The checks as shown to a reader (strings: values at the check's precision, :func:`shown`): ref,
        quantity, book, ours, tolerance, match; ``findings=True``: only the rows that are not plain matches, with
        the alternative reference and the explanation; ``kind``: only the book or only the reference rows. When
        the rows shown include reference rows, a first column ``kind`` tells them apart (for those rows ``book``
        is the reference's value). Its display is the same on every machine (nbval-safe)."""
        if kind is not None and kind not in KINDS:
            raise ScorecardError(f"kind must be one of {KINDS} or None; got {kind!r}.")
        rows = [c for c in self.checks if (kind is None or c.kind == kind) and not (findings and c.match == "true")]
        return _shown_frame(rows, findings)

    def counts(self) -> dict:
        """{kind: {status: count}} of the card's rows, book rows first."""
        return _counts(self.checks)

    def regressions(self, baseline: str | Path | pd.DataFrame = BASELINE, vanished: bool = False) -> pd.DataFrame:
        """This card's rows whose status is worse than in the committed baseline (see :func:`regressions`).

        A notebook cannot tell whether it runs the analysis the baseline records (its defaults) or another one (own
        data, other parameters, where fewer book rows apply), so rows that vanished are reported only with
        ``vanished=True``; ``vrs reproduce``, ``vrs run`` without parameters and the tests check them."""
        return regressions(self.to_frame(), baseline, scope=[(self.notebook, self.analysis)] if vanished else [])

    def __repr__(self) -> str:
        return f"Scorecard({self.notebook!r}, {len(self.checks)} checks, {_counts_text(self.checks)})"

    def _repr_html_(self) -> str:
        return self.table().to_html(index=False)


def check_variance_table(card: Scorecard, ref: str, components: pd.DataFrame, book_rows: list[dict],
                         reference: dict, reference_name: str, book_differs: dict | None = None,
                         unidentified: dict | None = None, percent_decimals: int | None = None) -> pd.DataFrame:
    """Check a printed variance-component table (book chapter 3: variance and percent per component) against ours,
    with a second reference fit of the same data (e.g. lme4's) on every row; returns the table beside them.

    ``components``: our variance components (index: component; columns ``variance``, ``percent``); ``book_rows``:
    the printed rows ({component, label, variance, percent} as printed text or numbers); ``reference``: {"variance":
    {component: value}, "percent": {...}}. Tolerance: half a unit of the book's last printed digit; a value the book
    prints as 0 is checked with a tight tolerance (1e-6 of the total variance; 1e-4 percentage points) against the
    reference. A row that misses the book is ``explained`` only when ours matches the reference, the reference
    misses the book too, and ``book_differs[(component, "variance" | "percent")]`` says why.

    ``unidentified[(component, what)]``: rows whose value the data do not identify (two aliased factors, whose
    split is wherever an optimizer stops): the reference's value is one optimizer's split, not a reference, so the
    row is checked against the book alone (``true`` or ``false``) with the reason as its explanation.

    ``percent_decimals``: the decimals to which the authors' code rounds the percent column before printing it (the
    ICC() of ``mt_reliability_model.Rmd`` rounds shares to 4 decimals, i.e. percents to 2; the G-study summary of
    ``mt_reliability_data_annotation.Rmd`` rounds percents to 1). The printout shows 3 significant digits and drops
    trailing zeros ("0.1" is 0.10, "0" is 0.00, but "81.9" is 81.89 at 3 digits), so a percent's tolerance is half a
    unit of the coarser of that resolution and the third significant digit (never more than the printed digits
    allow), and a printed 0 means less than half a unit of the resolution (checked against the reference).
    """
    book_differs = book_differs or {}
    unidentified = unidentified or {}
    total = components["variance"].sum()
    rows = []
    for r in book_rows:
        comp = r["component"]
        v, pct = components.loc[comp, "variance"], components.loc[comp, "percent"]
        rows.append({"component": r["label"], "book variance": r["variance"], "our variance": v,
                     f"{reference_name.split(' ')[0]} variance": reference["variance"][comp],
                     "book %": r["percent"], "our %": pct,
                     f"{reference_name.split(' ')[0]} %": reference["percent"][comp]})
        for what, printed, value in (("variance", r["variance"], v), ("percent", r["percent"], pct)):
            zero = float(printed) == 0
            free = (comp, what) in unidentified
            if zero:
                tol = 1e-6 * total if what == "variance" else (
                    1e-4 if percent_decimals is None else printed_tolerance(percent_decimals))
            elif what == "percent" and percent_decimals is not None:
                third = 2 - math.floor(math.log10(abs(float(printed))))   # decimals of the 3rd significant digit
                tol = min(tolerance_of(str(printed)), printed_tolerance(min(percent_decimals, third)))
            else:
                tol = None
            c = card.check(ref, f"{r['label']}: {what}", float(printed), value, tol,
                           printed=None if zero else str(printed), alternative="" if free else reference_name,
                           alternative_value=None if free else reference[what][comp],
                           explanation=unidentified[(comp, what)] if free else book_differs.get((comp, what), ""),
                           show=False)
            rows[-1][f"{what} match"] = c.match
    card.flush(visible=False)  # the rows go to the reproduction scorecard; the returned table shows them
    return pd.DataFrame(rows)


def _counts(checks) -> dict:
    out: dict = {}
    for c in checks:
        out.setdefault(c.kind, {})
        out[c.kind][c.match] = out[c.kind].get(c.match, 0) + 1
    return {k: out[k] for k in sorted(out, key=KINDS.index)}


def _counts_text(checks) -> str:
    """Status counts of some checks: ``{'true': 3, 'false': 1}`` for book rows only (as before there were two kinds),
    ``book {...}; reference {...}`` when there are reference rows."""
    counts = _counts(checks)
    if set(counts) <= {"book"}:
        return str(counts.get("book", {}))
    return "; ".join(f"{k} {v}" for k, v in counts.items())


def _shown_frame(checks, findings: bool) -> pd.DataFrame:
    cols = ["ref", "quantity", "book", "ours", "tolerance", "match"]
    if any(c.kind != "book" for c in checks):
        cols = ["kind"] + cols
    if findings:
        cols += ["alternative", "alternative_value", "explanation"]
    rows = [{"kind": c.kind, "ref": c.ref, "quantity": c.quantity, "book": _fmt(c.book),
             "ours": shown(c.ours, c.tolerance),
             "tolerance": _fmt(c.tolerance), "match": c.match, "alternative": c.alternative,
             "alternative_value": shown(c.alternative_value, c.tolerance) if c.alternative else "",
             "explanation": c.explanation} for c in checks]
    return pd.DataFrame(rows, columns=cols)


def load_baseline(path: str | Path | pd.DataFrame = BASELINE) -> pd.DataFrame:
    """The committed statuses (``notebooks/scorecard_baseline.csv``); empty when there is none. A baseline
    written before rows had a kind holds book rows."""
    if isinstance(path, pd.DataFrame):
        base = path.copy()
    else:
        p = Path(path)
        if not p.is_file():
            return pd.DataFrame(columns=KEY + ["kind", "book", "match"])
        base = read_back(pd.read_csv(p, dtype=str, keep_default_na=False))
    if "kind" not in base.columns:
        base["kind"] = "book"
    return base


def regressions(rows: pd.DataFrame, baseline: str | Path | pd.DataFrame = BASELINE,
                scope: list[tuple[str, str]] | None = None) -> pd.DataFrame:
    """Rows whose status is worse than the baseline's (true > explained > false), new rows that are false, and
    rows of the baseline that vanished: a committed row of a notebook and analysis in ``scope`` (default: the
    (notebook, analysis) pairs of ``rows``; ``[]``: none) that ``rows`` no longer has. A vanished row has ``match``
    "vanished". Give a scope only for runs of the analyses the baseline records (the notebooks' defaults, or the
    analyses ``vrs reproduce`` runs): with other parameters fewer rows may apply.

    An honest ``false`` that the baseline already records is not a regression: it is a finding, listed in the
    notebook with its reason. An improvement is not a regression either (update the baseline to keep it). A row
    that is renamed or removed on purpose is accepted by updating the baseline too (``vrs reproduce --accept``).
    """
    base = load_baseline(baseline)
    rows = rows.copy()
    for c in KEY:
        rows[c] = rows[c].fillna("").astype(str)
    merged = rows.merge(base[KEY + ["match"]].rename(columns={"match": "baseline"}), on=KEY, how="left")
    now = merged["match"].map(_RANK).astype(float)   # float also when there are no rows (an analysis with no check)
    before = merged["baseline"].map(_RANK).astype(float)
    worse = before.notna() & (now < before)
    new_false = before.isna() & (merged["match"] == "false")
    bad = merged[worse | new_false]
    pairs = set(zip(rows["notebook"], rows["analysis"], strict=True)) if scope is None else {
        (str(nb), str(an or "")) for nb, an in scope}
    in_scope = [(nb, an) in pairs for nb, an in zip(base["notebook"], base["analysis"], strict=True)]
    present = set(map(tuple, rows[KEY].itertuples(index=False, name=None)))
    vanished = base[pd.Series(in_scope, index=base.index, dtype=bool)]  # a boolean mask also when base is empty
    vanished = vanished[[tuple(k) not in present for k in vanished[KEY].itertuples(index=False, name=None)]]
    if len(vanished):
        gone = vanished[KEY].assign(kind=vanished["kind"], book=pd.to_numeric(vanished["book"], errors="coerce"),
                                    match="vanished", baseline=vanished["match"])
        bad = pd.concat([bad, gone], ignore_index=True) if len(bad) else gone.reset_index(drop=True)
    return bad


def accept_baseline(rows: pd.DataFrame, folder: str | Path = ".") -> Path:
    """Record the statuses of ``rows`` in ``folder/scorecard_baseline.csv``, keeping rows of analyses not run."""
    path = Path(folder) / BASELINE
    new = rows.assign(kind=rows["kind"] if "kind" in rows.columns else "book")[KEY + ["kind", "book", "match"]].copy()
    for c in KEY:
        new[c] = new[c].fillna("").astype(str)
    old = load_baseline(path)
    if len(old):
        runs = set(zip(new["notebook"], new["analysis"], strict=True))
        keep = [(nb, an) not in runs for nb, an in zip(old["notebook"], old["analysis"], strict=True)]
        new = pd.concat([old[keep][KEY + ["kind", "book", "match"]], new], ignore_index=True)
    to_csv(new, path)
    return path


def _payload(c: Check) -> dict:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(c).items()}


def record(name: str, value: float, show: bool = True) -> float:
    """Emit a named scalar result so that ``vrs batch`` can collect it into its CSV."""
    value = float(value)
    if show:
        _display({"text/plain": f"{name} = {_fmt(value)}", SCALAR_MIME: {"name": name, "value": value}})
    return value


def extract(nb) -> tuple[list[dict], dict]:
    """Scorecard rows and recorded scalars from an executed notebook (an ``nbformat`` node or a path).

    The scalars are only what the notebook :func:`record` s (its headline results, which its parameters change);
    scorecard rows are checks of the book's numbers and stay in the rows."""
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
                    row = {k: (float("nan") if v is None and k in ("book", "ours", "alternative_value") else v)
                           for k, v in dict(row).items()}
                    row.setdefault("kind", "book")   # outputs written before rows had a kind hold book rows
                    rows.append(row)
            if SCALAR_MIME in data:
                s = data[SCALAR_MIME]
                s = json.loads(s) if isinstance(s, str) else s
                scalars[s["name"]] = s["value"]
    return rows, scalars


def says(*pairs: tuple) -> None:
    """Assert what the prose of a workbook states: each pair is (the number as the Markdown prints it, the value the
    notebook computed), e.g. ``says(("0.095", res.alpha), ("60%", agreement), ("9,815", len(mnli)))``; the value
    must round to the printed number (within half a unit of its last digit, :func:`tolerance_of`; a percentage is
    compared as a fraction, thousands separators are ignored). Raises :class:`ScorecardError` naming every number
    that drifted, so a Markdown cell cannot say what the computation no longer gives. Used in cells tagged
    ``check``: run by ``vrs reproduce``, nbval and CI, not in a student's copy."""
    wrong = []
    for printed, value in pairs:
        text = str(printed).replace(",", "").replace(" ", "").replace("−", "-")
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        if not compare(number, float(value), tolerance_of(text)):
            wrong.append(f"{printed} (computed: {float(value):.6g})")
    if wrong:
        raise ScorecardError("the prose states numbers the computation no longer gives: " + "; ".join(wrong))
