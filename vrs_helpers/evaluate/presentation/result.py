"""The result of an analysis as one object: what ``analyze()`` returns, ``summary.json`` is, and the renderer
(:mod:`.render`) draws - for a score table, several metrics and harness logs alike.

A :class:`Result` is data: ``result.data`` holds only JSON values (strings, numbers, booleans, None, lists and
dicts), floats at 10 significant digits, so ``Result.from_json(result.to_json()) == result`` exactly and
``summary.json`` is its dump. Everything a reader sees - the answer, the warnings about the data, the leaderboard,
the readings, the figures - is a function of ``data`` (:func:`vrs_helpers.evaluate.presentation.render.render`), so
a report drawn from a loaded ``summary.json`` is the report of the run that wrote it; nothing is pickled and no
notebook kernel is needed to make it.

``result.fits`` is the live analysis behind the numbers (the fitted models, for a user who wants to look further in
the process that ran it): not serialized, not compared, None after :meth:`Result.from_json`.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...outcomes import P_FLOOR, p_text

SCHEMA = "vrs-analysis/2"
KINDS = ("scores", "metrics", "logs", "items")
SUMMARY_DIGITS = 10  # significant digits of the floats in summary.json


def rounded(obj):
    """``obj`` as JSON values: floats at :data:`SUMMARY_DIGITS` significant digits (NaN and infinities as None), numpy
    scalars as Python numbers, tuples as lists, anything else as its text: the summary of the same data is the same
    file whatever the order in which a backend added its sums. A p-value (key ``p_...``) below 1e-300 (one that
    underflowed to 0) gets a ``..._text`` sibling ``"< 1e-300"``."""
    if isinstance(obj, dict):
        out = {str(k): rounded(v) for k, v in obj.items()}
        for k in [k for k in out if k.startswith("p_") and isinstance(out[k], float) and out[k] < P_FLOOR]:
            out.setdefault(f"{k}_text", p_text(out[k]))   # underflowed: "< 1e-300", not a p-value of 0
        return out
    if isinstance(obj, (list, tuple)):
        return [rounded(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return None if not math.isfinite(v) else float(f"{v:.{SUMMARY_DIGITS}g}")
    if obj is None or isinstance(obj, str):
        return obj
    if obj is pd.NA or obj is pd.NaT:
        return None
    return str(obj)


def records(frame: pd.DataFrame | None) -> list:
    """A table as a list of JSON records (NaN as None); an empty list for None."""
    if frame is None or not len(frame):
        return []
    return rounded(frame.astype(object).where(frame.notna(), None).to_dict("records"))


@dataclass(frozen=True, eq=False)
class Result:
    """One analysis (module docstring): ``data`` (JSON values; its ``"kind"`` is ``"scores"``, ``"metrics"`` or
    ``"logs"``) and ``fits`` (the live analysis, in the process that made it)."""

    data: dict
    fits: object = field(default=None, repr=False)

    def __post_init__(self):
        kind = self.data.get("kind") if isinstance(self.data, dict) else None
        if kind not in KINDS:
            raise ValueError(f"a Result's data names its kind ({', '.join(KINDS)}); got {kind!r}.")

    def __eq__(self, other) -> bool:
        return isinstance(other, Result) and self.data == other.data

    __hash__ = None

    # ------------------------------------------------------------------------------------------ JSON

    def to_json(self, indent: int | None = 2) -> str:
        """``summary.json``: the data as JSON text (NaN is never written: it is None in the data)."""
        return json.dumps(self.data, indent=indent, ensure_ascii=False, allow_nan=False)

    @classmethod
    def from_json(cls, source) -> Result:
        """The result of :meth:`to_json` (JSON text, or the path of a ``summary.json``)."""
        text = source
        if isinstance(source, os.PathLike) or (isinstance(source, str) and not source.lstrip().startswith("{")):
            text = Path(source).read_text(encoding="utf-8")
        return cls(json.loads(text))

    def write(self, path) -> Path:
        """Write :meth:`to_json` to ``path`` atomically (a temporary file beside it, then renamed)."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.partial")
        tmp.write_text(self.to_json(), encoding="utf-8")
        os.replace(tmp, path)
        return path

    # ------------------------------------------------------------------------------------------ reading it

    @property
    def kind(self) -> str:
        return self.data["kind"]

    @property
    def answer(self) -> str | None:
        """The question answered in one sentence (the first thing a report says)."""
        return self.data.get("answer")

    @property
    def warnings(self) -> list:
        """Warnings about the data (identical runs, dropped rows, a percent scale, ...): above the verdict."""
        return list(self.data.get("warnings") or [])

    @property
    def verdict(self) -> list:
        return list(self.data.get("verdict") or [])

    @property
    def notes(self) -> list:
        return list(self.data.get("notes") or [])

    @property
    def disagreements(self) -> list:
        return list(self.data.get("disagreements") or [])

    def table(self, name: str) -> pd.DataFrame:
        """A table of the data (a list of records under ``name``) as a DataFrame; empty when there is none."""
        rows = self.data.get(name)
        return pd.DataFrame(rows) if isinstance(rows, list) and rows else pd.DataFrame()

    @property
    def ranking(self) -> pd.DataFrame | None:
        """Three or more systems: one row per system, best first (estimate, CI, rank interval, letters)."""
        rows = self.data.get("ranking")
        return pd.DataFrame(rows) if rows else None

    @property
    def leaderboard(self) -> pd.DataFrame:
        """Every system (two or more) with its estimate and interval, rank interval and letters, best first."""
        board = self.data.get("leaderboard") or {}
        return pd.DataFrame(board.get("rows") or [])

    @property
    def parts(self) -> dict:
        """The parts of a result of several metrics or tasks, each a :class:`Result` of kind ``"scores"``:
        {metric: result} or {task: result}; {} for a single analysis."""
        parts = self.data.get("parts") or {}
        return {name: Result(part) for name, part in parts.items()}

    def __getitem__(self, name: str) -> Result:
        parts = self.parts
        if name not in parts:
            raise KeyError(f"{name!r} is not a metric or task of this result; it has {', '.join(parts) or 'none'}.")
        return parts[name]

    # ------------------------------------------------------------------------------------------ shown

    def _repr_html_(self) -> str:
        from .render import render

        return render(self, "fragment")

    def _repr_markdown_(self) -> str:
        from .render import render

        return render(self, "markdown")

    def __str__(self) -> str:
        from .render import render

        return render(self, "text")

    def __repr__(self) -> str:
        answer = self.answer or ""
        return f"Result({self.kind}: {answer[:120]}{'...' if len(answer) > 120 else ''})"
