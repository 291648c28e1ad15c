"""What every hypothesis test of the package returns, whatever its kind (book 4.1: a test statistic, its null
distribution's degrees of freedom where it has them, a p-value, and the method that produced them).

:class:`TestOutcome` is the shared base. Each kind of test is one class here, and code that reads a result asks
the result (``as_dict()``, ``evidence()``, ``df_text()``, ``stated_p``), never its shape:

- :class:`ChiSquareTest` - a statistic referred to the chi-square distribution (the GLRT of book 4.3: ``chi2``,
  ``df``, ``p_value``);
- :class:`FTest` - an F test with denominator degrees of freedom (Satterthwaite, Kenward-Roger: ``F``, ``num_df``,
  ``den_df``, ``p_value``; the df rest on the variance estimates, so p and den_df are stated at 4 significant
  digits);
- :class:`MonteCarloTest` - a parametric-bootstrap test of a chi-square statistic (``chi2``, ``df``, ``p_value`` =
  (c + 1) / (n_sim + 1), ``n_sim``, ``seed``, ``n_failed``);
- :class:`ZTest`, :class:`TTest` - z and t tests (book 4.2);
- :class:`ResamplingTest` - paired bootstrap and permutation tests of a difference (Algorithms 4.1/4.2);
- :class:`DiscordantPairsTest` - McNemar's exact test of paired 0/1 scores.

The result types of the engine and of the book's methods subclass these (e.g. ``mixed.LRTResult`` is a
:class:`ChiSquareTest` with the two log-likelihoods beside it). A subclass may be a dataclass: the classes here are
plain classes, so a dataclass subclass declares its own fields (at least the ones the constructor here takes) and
keeps its positional order; ``method`` may be a field or a class attribute. (A dataclass takes an inherited class
attribute as a field's default: the bases here define no ``method`` attribute, and a subclass must not declare a
field whose name is a property here, such as ``statistic`` of :class:`ChiSquareTest`.)

``as_dict()`` is the outcome's part of ``summary.json`` (``vrs analyze``), at its stated precision, with plain
Python numbers (a JSON round trip gives it back); the reading that holds an outcome names it (``"test"``).
``from_dict`` rebuilds the outcome type from it. ``sentence()`` is one readable sentence naming the method.
"""

from __future__ import annotations

import html
import math
from typing import ClassVar

import pandas as pd

F_DIGITS = 4  # significant digits of an F test's p-value and denominator df (their numerical precision)


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else f"{v:.4g}"
    return str(v)


P_FLOOR = 1e-300   # a p-value below it (or one that underflowed to exactly 0) is written "< 1e-300"


def p_text(p, digits: int = 3) -> str:
    """A p-value as text: ``digits`` significant digits, ``< 1e-300`` when it is below :data:`P_FLOOR` (a chi-square
    or normal tail that underflowed to exactly 0 in double precision is not a p-value of 0), empty when missing."""
    if p is None:
        return ""
    p = float(p)
    if math.isnan(p):
        return ""
    return f"< {P_FLOOR:g}" if p < P_FLOOR else f"{p:.{digits}g}"


def p_is(p, digits: int = 3) -> str:
    """"= 0.0123" or "< 1e-300" (:func:`p_text` after "p "): a sentence never says "p = 0" (issue 54)."""
    text = p_text(p, digits) or "NaN"
    return text if text.startswith("<") else f"= {text}"


def stated(value, digits: int | None) -> float:
    """``value`` as a float at ``digits`` significant digits (all of them for None)."""
    v = float(value)
    return v if digits is None or not math.isfinite(v) else float(f"{v:.{digits}g}")


class TestOutcome:
    """The base of every test result: ``statistic``, ``df`` (None when the null distribution has none), ``p_value``
    and ``method`` (attributes or properties of the subclass), and what is made of them.

    Class attributes a kind of test sets: ``statistic_name`` (how sentences name the statistic) and ``p_digits``
    (significant digits at which the p-value is stated; None: in full)."""

    __test__ = False  # not a pytest test class

    statistic_name: ClassVar[str] = "statistic"
    p_digits: ClassVar[int | None] = None

    # ------------------------------------------------------------------------------------- what every test has

    def reject(self, alpha: float = 0.05) -> bool:
        """True when the test rejects its null hypothesis at level ``alpha`` (p <= alpha)."""
        return bool(self.p_value <= alpha)

    @property
    def stated_p(self) -> float:
        """The p-value as summaries state it: at ``p_digits`` significant digits (an F test's 4), else in full."""
        return stated(self.p_value, self.p_digits)

    def df_text(self) -> str:
        """The degrees of freedom as tables print them ("" when the test has none)."""
        return "" if self.df is None else str(self.df)

    def evidence(self) -> str:
        """The statistic and its df, as a verdict quotes them (e.g. ``chi2 = 5.12, df = 1``)."""
        df = self.df_text()
        return f"{self.statistic_name} = {float(self.statistic):.3g}" + (f", df = {df}" if df else "")

    def sentence(self) -> str:
        """One readable sentence: the method, the statistic, its df and the p-value."""
        return f"{self.method}: {self.evidence()}, p {p_is(self.p_value)}."

    def as_dict(self) -> dict:
        """The outcome in ``summary.json``: its statistic, df and p-value (a kind of test names them its way)."""
        return {"statistic": float(self.statistic), "df": self.df, "p_value": float(self.p_value)}

    @classmethod
    def outcome_type(cls) -> type:
        """The kind of test this class is: the nearest class of this module among its bases (``mixed.LRTResult``
        -> :class:`ChiSquareTest`)."""
        return next(c for c in cls.__mro__ if c.__module__ == __name__ and not c.__name__.startswith("_")
                    and c is not TestOutcome)

    @classmethod
    def from_dict(cls, d: dict) -> TestOutcome:
        """The outcome (of this class's :meth:`outcome_type`) from its :meth:`as_dict`."""
        kind = cls.outcome_type()
        return kind(**{k: d[k] for k in kind._fields})

    # ------------------------------------------------------------------------------------------ presentation

    def outcome_row(self) -> dict:
        """method, statistic, df (None, a number, or an F test's pair), p_value: the row of a table of tests."""
        return {"method": self.method, "statistic": float(self.statistic), "df": self.df,
                "p_value": float(self.p_value)}

    def outcome_frame(self) -> pd.DataFrame:
        return pd.DataFrame([self.outcome_row()])

    def outcome_text(self) -> str:
        return (f"{self.method}: statistic = {_num(float(self.statistic))}, df = {self.df_text() or '-'}, "
                f"p {p_is(self.p_value, 4)}")

    def to_frame(self) -> pd.DataFrame:
        return self.outcome_frame()

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(self.outcome_text())}</p>" + self.to_frame().to_html(
            float_format=lambda x: f"{x:.6g}")


class _Plain(TestOutcome):
    """Constructor, repr and equality from ``_fields`` for the outcome types below (a dataclass subclass brings
    its own)."""

    _fields: ClassVar[tuple] = ()
    _defaults: ClassVar[dict] = {}
    default_method: ClassVar[str] = "test"

    def __init__(self, *args, method: str | None = None, **kwargs):
        names = self._fields
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} positional arguments")
        values = dict(zip(names, args, strict=False))
        for k, v in kwargs.items():
            if k not in names or k in values:
                raise TypeError(f"{type(self).__name__} got an unexpected or repeated argument {k!r}")
            values[k] = v
        missing = [k for k in names if k not in values and k not in self._defaults]
        if missing:
            raise TypeError(f"{type(self).__name__} is missing {', '.join(missing)}")
        for k in names:
            setattr(self, k, values.get(k, self._defaults.get(k)))
        self.method = self.default_method if method is None else method

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields)
        return f"{type(self).__name__}({inner}, method={self.method!r})"

    def __eq__(self, other) -> bool:
        return (type(other) is type(self) and self.method == other.method
                and all(getattr(self, k) == getattr(other, k) for k in self._fields))

    __hash__ = None


class _Chi2(_Plain):
    """A likelihood ratio statistic chi2 on ``df`` degrees of freedom, whatever its reference distribution."""

    statistic_name = "chi2"

    @property
    def statistic(self) -> float:
        return self.chi2


class ChiSquareTest(_Chi2):
    """A statistic referred to the chi-square distribution on ``df`` degrees of freedom (the GLRT, book 4.3:
    chi2 = 2 (logLik m1 - logLik m0)). summary.json: ``{"chi2", "df", "p_value"}``."""

    _fields = ("chi2", "df", "p_value")
    default_method = "chi-square test"

    def evidence(self) -> str:
        return f"chi2 = {float(self.chi2):.2f}, df = {self.df}"

    def as_dict(self) -> dict:
        return {"chi2": float(self.chi2), "df": int(self.df), "p_value": float(self.p_value)}


class FTest(_Plain):
    """An F statistic on (``num_df``, ``den_df``) degrees of freedom, the denominator df estimated
    (Satterthwaite 1946; Kenward & Roger 1997). ``df`` is the pair. The df are functions of the variance estimates,
    known to the optimizer's precision (Satterthwaite's also rest on finite-difference derivatives): p and den_df
    are stated at :data:`F_DIGITS` significant digits (lmerTest and pbkrtest print them with 1-2 decimals), so every
    backend writes the same summary. summary.json: ``{"F", "num_df", "den_df", "p_value"}``."""

    _fields = ("F", "num_df", "den_df", "p_value")
    statistic_name = "F"
    p_digits = F_DIGITS
    default_method = "F test"

    @property
    def statistic(self) -> float:
        return self.F

    @property
    def df(self) -> tuple:
        """(numerator df, denominator df)."""
        return (self.num_df, self.den_df)

    def df_text(self) -> str:
        return f"({self.num_df}, {float(self.den_df):.4g})"

    def evidence(self) -> str:
        return f"F = {float(self.F):.2f} on ({self.num_df}, {float(self.den_df):.1f}) df"

    def as_dict(self) -> dict:
        return {"F": float(self.F), "num_df": int(self.num_df), "den_df": stated(self.den_df, F_DIGITS),
                "p_value": stated(self.p_value, F_DIGITS)}


class MonteCarloTest(_Chi2):
    """A parametric-bootstrap (Monte-Carlo) test of a chi-square statistic: ``p_value`` = (c + 1) / (n_sim + 1),
    c of the ``n_sim`` statistics simulated from the null fit being at least ``chi2`` (Davison & Hinkley 1997,
    4.2; pbkrtest's PBmodcomp), ``n_failed`` simulations that could not be fitted left out; ``df`` is the
    chi-square reference's. summary.json: ``{"chi2", "df", "p_value", "n_sim", "seed", "n_failed"}``."""

    _fields = ("chi2", "df", "p_value", "n_sim", "seed", "n_failed")
    _defaults = {"n_failed": 0}
    default_method = "parametric bootstrap test"

    @property
    def mc_se(self) -> float:
        """Monte-Carlo standard error of the p-value, sqrt(p (1 - p) / n_sim)."""
        return math.sqrt(self.p_value * (1.0 - self.p_value) / self.n_sim)

    def evidence(self) -> str:
        return f"chi2 = {float(self.chi2):.2f}, df = {self.df}, {self.n_sim} simulations from the null fit"

    def as_dict(self) -> dict:
        return {"chi2": float(self.chi2), "df": int(self.df), "p_value": float(self.p_value),
                "n_sim": int(self.n_sim), "seed": int(self.seed), "n_failed": int(self.n_failed or 0)}


class ZTest(_Plain):
    """A z test: the statistic against the standard normal (book 4.2). summary.json: ``{"z", "p_value"}``."""

    _fields = ("statistic", "p_value")
    statistic_name = "z"
    default_method = "z-test"
    df = None

    def as_dict(self) -> dict:
        return {"z": float(self.statistic), "p_value": float(self.p_value)}

    @classmethod
    def from_dict(cls, d: dict) -> ZTest:
        return ZTest(d["z"], d["p_value"])


class TTest(_Plain):
    """A t test: the statistic against Student's t on ``df`` degrees of freedom (book 4.2). summary.json:
    ``{"t", "df", "p_value"}``."""

    _fields = ("statistic", "df", "p_value")
    statistic_name = "t"
    default_method = "t-test"

    def as_dict(self) -> dict:
        return {"t": float(self.statistic), "df": int(self.df), "p_value": float(self.p_value)}

    @classmethod
    def from_dict(cls, d: dict) -> TTest:
        return TTest(d["t"], d["df"], d["p_value"])


class ResamplingTest(_Plain):
    """A paired resampling test (bootstrap or permutation, book Algorithms 4.1/4.2) of the observed difference
    S(A) - S(B): its null distribution is the resampled one (no df); ``p_value`` = (c + 1) / (n_resamples + 1).
    summary.json: ``{"difference", "p_value", "n_resamples"}``."""

    _fields = ("difference", "p_value", "n_resamples")
    statistic_name = "difference"
    default_method = "resampling test"
    df = None

    @property
    def statistic(self) -> float:
        return self.difference

    def as_dict(self) -> dict:
        return {"difference": float(self.statistic), "p_value": float(self.p_value),
                "n_resamples": int(self.n_resamples)}

    @classmethod
    def from_dict(cls, d: dict) -> ResamplingTest:
        return ResamplingTest(d["difference"], d["p_value"], d["n_resamples"])


class DiscordantPairsTest(_Plain):
    """An exact test of paired 0/1 scores on their discordant pairs (McNemar 1947, exact form): ``n10`` items right
    by the first system only, ``n01`` by the second only; under H0 n10 ~ Binomial(n10 + n01, 1/2). The statistic
    is min(n10, n01), with no df; ``p_mid`` the mid-p beside the exact p. summary.json: ``{"n10", "n01",
    "p_value", "p_mid"}``."""

    _fields = ("n10", "n01", "p_value", "p_mid")
    statistic_name = "min(n10, n01)"
    default_method = "exact test of discordant pairs"
    df = None

    @property
    def statistic(self) -> int:
        return min(self.n10, self.n01)

    def evidence(self) -> str:
        return f"n10 = {self.n10}, n01 = {self.n01}"

    def as_dict(self) -> dict:
        return {"n10": int(self.n10), "n01": int(self.n01), "p_value": float(self.p_value),
                "p_mid": float(self.p_mid)}


#: the kinds of test, by the name their summary rows and the registry use
OUTCOME_TYPES = {"chisq": ChiSquareTest, "F": FTest, "monte-carlo": MonteCarloTest, "z": ZTest, "t": TTest,
                 "resampling": ResamplingTest, "discordant-pairs": DiscordantPairsTest}


def check_outcome(outcome) -> None:
    """The contract every test outcome keeps (scikit-learn's ``check_estimator`` is the model; the conformance
    suite, tests/test_conformance.py, runs it over every outcome type and registered test). Raises
    ``AssertionError`` naming the broken rule: a :class:`TestOutcome` with a finite statistic and p in (0, 1];
    ``as_dict()`` of plain JSON values that survive a JSON round trip, holding the p-value as stated
    (:attr:`~TestOutcome.stated_p`) and rebuilding the outcome type (``from_dict``); a non-empty ``sentence()`` that
    names the method; ``df_text()`` and ``evidence()`` as text."""
    import json

    name = type(outcome).__name__
    assert isinstance(outcome, TestOutcome), f"{name} is not a TestOutcome"
    assert isinstance(outcome.method, str) and outcome.method, f"{name}: no method"
    assert math.isfinite(float(outcome.statistic)), f"{name}: statistic {outcome.statistic!r} is not finite"
    p = float(outcome.p_value)
    assert 0 < p <= 1, f"{name}: p = {p!r} is not in (0, 1]"
    d = outcome.as_dict()
    assert isinstance(d, dict) and d, f"{name}: as_dict() is empty"
    assert json.loads(json.dumps(d, allow_nan=False)) == d, f"{name}: as_dict() does not survive a JSON round trip"
    assert d["p_value"] == outcome.stated_p, f"{name}: as_dict() states p as {d['p_value']!r}, not {outcome.stated_p!r}"
    again = type(outcome).from_dict(d)
    rebuilt = again.as_dict()  # a subclass may state more than its outcome type (e.g. the book's c / K)
    assert isinstance(again, type(outcome).outcome_type()) and rebuilt == {k: d[k] for k in rebuilt}, \
        f"{name}: from_dict(as_dict()) does not rebuild the outcome"
    sentence = outcome.sentence()
    assert isinstance(sentence, str) and outcome.method in sentence, f"{name}: sentence() does not name the method"
    assert isinstance(outcome.df_text(), str) and isinstance(outcome.evidence(), str) and outcome.evidence(), \
        f"{name}: df_text() / evidence() are not text"
