"""pytest configuration for the notebook validation (`pytest --nbval-lax notebooks`, see the Makefile).

Cells tagged ``nbval-check-output`` are compared with their committed outputs. The scorecard's and ``record()``'s
machine-readable outputs (``application/vnd.vrs.scorecard+json``, ``application/vnd.vrs.scalar+json``) hold the
full floating-point values for ``vrs reproduce`` / ``vrs batch``; their last digits differ between CPUs and BLAS
libraries, so nbval does not compare them. What it compares is what a reader sees: every check's status and its
values at the check's precision (:func:`vrs_helpers.app.scorecard.shown`); the values themselves are checked by the
scorecard's tolerances and the baseline assert of each notebook (``tests/test_nbval_blas.py`` runs the checked
cells under another BLAS kernel).

A checked text output matches its committed one when the text between numbers is the same and every number is
within one unit of the finer last place of the two (:func:`same_at_printed_precision`): a value printed as
``0.0030413`` may come out as ``0.0030414`` under another BLAS or thread count (its last digit rounds the other
way), ``0.0030420`` or ``0.00305`` fails; integers (counts, degrees of freedom printed as integers) must be equal.
"""

import copy
import re
from decimal import Decimal, DecimalException

MACHINE_OUTPUTS = ("application/vnd.vrs.scorecard+json", "application/vnd.vrs.scalar+json")
# a number standing alone (not a piece of a word, a hex address or a version such as 1.2.3)
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")


def _last_place(token: str) -> Decimal | None:
    """One unit in the last printed place of a number (``'0.0030413'`` -> 1e-7, ``'9.60059e-07'`` -> 1e-12,
    ``'1e-05'`` -> 1e-05); None for an integer."""
    mantissa, _, exponent = token.lower().partition("e")
    if "." not in mantissa and not exponent:
        return None
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return Decimal(1).scaleb(int(exponent or 0) - decimals)


def same_at_printed_precision(expected: str, got: str) -> bool:
    """Whether ``got`` shows what ``expected`` shows: the same text between the numbers, the same integers, and
    every other number within one unit of the finer last place of the two (a value whose rounding went the other
    way on another machine; ``%g`` drops trailing zeros, so ``0.3`` and ``0.299999`` are one unit of ``1e-6``
    apart; an integer against a decimal, ``1`` and ``0.999999``, takes the decimal's unit). Exact decimal
    arithmetic; a number it cannot handle makes the texts differ."""
    if expected == got:
        return True
    if NUMBER.split(expected) != NUMBER.split(got):
        return False
    for a, b in zip(NUMBER.findall(expected), NUMBER.findall(got), strict=True):
        if a == b:
            continue
        try:
            units = [u for u in (_last_place(a), _last_place(b)) if u is not None]
            if not units or abs(Decimal(a) - Decimal(b)) > min(units):
                return False
        except DecimalException:
            return False
    return True


def _text(value):
    """A text output as one string (nbformat may hold it as a list of lines); anything else as it is."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return value


def aligned(test: list, ref: list) -> list:
    """A copy of a cell's new outputs in which every text that shows what its committed output shows
    (:func:`same_at_printed_precision`) is the committed text, so that nbval's comparison passes it; the other
    texts are left as they are for nbval to report."""
    out = copy.deepcopy(test)
    if len(out) != len(ref):
        return out
    for t, r in zip(out, ref, strict=True):
        if t.get("output_type") != r.get("output_type"):
            continue
        if isinstance(_text(t.get("text")), str) and isinstance(_text(r.get("text")), str):
            if same_at_printed_precision(_text(r["text"]), _text(t["text"])):
                t["text"] = r["text"]
        for mime, value in t.get("data", {}).items():
            committed = r.get("data", {}).get(mime)
            if (isinstance(_text(value), str) and isinstance(_text(committed), str)
                    and same_at_printed_precision(_text(committed), _text(value))):
                t["data"][mime] = committed
    return out


def pytest_configure(config):
    """nbval's comparison of a checked cell, on outputs aligned at the printed precision (:func:`aligned`)."""
    try:
        from nbval.plugin import IPyNbCell
    except ImportError:   # nbval not installed: no notebooks are validated
        return
    original = IPyNbCell.compare_outputs
    if getattr(original, "vrs_printed_precision", False):
        return

    def compare_outputs(self, test, ref, skip_compare=None):
        return original(self, aligned(test, ref), ref, skip_compare)

    compare_outputs.vrs_printed_precision = True
    IPyNbCell.compare_outputs = compare_outputs


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        notebook = getattr(item, "parent", None)
        skip = getattr(notebook, "skip_compare", None)
        if skip is not None and not set(MACHINE_OUTPUTS) <= set(skip):
            notebook.skip_compare = tuple(skip) + MACHINE_OUTPUTS
