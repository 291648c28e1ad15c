"""What every hypothesis test of the package returns, whatever its kind (book 4.1: a test statistic, its null
distribution's degrees of freedom where it has them, a p-value, and the method that produced them).

:class:`TestOutcome` is the shared base of the z/t tests, the resampling tests, the likelihood ratio tests and the
small-sample F tests: ``statistic``, ``df``, ``p_value``, ``method``, :meth:`~TestOutcome.as_dict` (the row that
``summary.json``, the report and the scorecard use), ``to_frame()``, a readable repr and an HTML repr.
"""

from __future__ import annotations

import html
import math

import pandas as pd


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else f"{v:.4g}"
    if isinstance(v, tuple):
        return "(" + ", ".join(_num(x) for x in v) + ")"
    return str(v)


class TestOutcome:
    """Mixin for test results: subclasses provide ``statistic``, ``df`` (None, a number, or a (num, den) pair for
    F tests), ``p_value`` and ``method`` as attributes or properties."""

    __test__ = False  # not a pytest test class

    def reject(self, alpha: float = 0.05) -> bool:
        """True when the test rejects its null hypothesis at level ``alpha`` (p <= alpha)."""
        return bool(self.p_value <= alpha)

    def as_dict(self) -> dict:
        """method, statistic, df (a pair: numerator and denominator df), p_value."""
        return {"method": self.method, "statistic": float(self.statistic), "df": getattr(self, "df", None),
                "p_value": float(self.p_value)}

    def outcome_frame(self) -> pd.DataFrame:
        return pd.DataFrame([self.as_dict()])

    def outcome_text(self) -> str:
        return (f"{self.method}: statistic = {_num(float(self.statistic))}, df = {_num(getattr(self, 'df', None))}, "
                f"p = {_num(float(self.p_value))}")

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(self.outcome_text())}</p>" + self.to_frame().to_html(
            float_format=lambda x: f"{x:.6g}")
