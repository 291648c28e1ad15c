"""nbval compares a checked cell's numbers at the precision they are printed with (the root ``conftest.py``): a
value whose last printed digit rounds the other way on another CPU, BLAS or thread count passes; any other change of
a number, of an integer or of the text between the numbers fails."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from conftest import requires_data

ROOT = Path(__file__).resolve().parent.parent
NBVAL = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider", "-q"]


def _root_conftest():
    spec = importlib.util.spec_from_file_location("vrs_root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


same = _root_conftest().same_at_printed_precision
values = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(values, st.integers(min_value=1, max_value=9), st.integers(min_value=-1, max_value=1))
def test_a_last_digit_rounded_the_other_way_passes(x, decimals, step):
    """The same value printed on another machine: at most one unit in its last printed place away."""
    unit = 10.0 ** -decimals
    shown = f"{x:.{decimals}f}"
    other = f"{float(shown) + step * unit:.{decimals}f}"
    assert same(f"<td>{shown}</td> p = 0.05", f"<td>{other}</td> p = 0.05")


@given(values, st.integers(min_value=1, max_value=9), st.integers(min_value=2, max_value=1000))
def test_a_number_two_or_more_units_away_fails(x, decimals, units):
    unit = 10.0 ** -decimals
    shown = f"{x:.{decimals}f}"
    other = f"{float(shown) + units * unit:.{decimals}f}"
    assert not same(f"estimate {shown}", f"estimate {other}")


@given(st.floats(min_value=1e-300, max_value=1e-5), st.integers(min_value=1, max_value=6))
def test_scientific_notation_is_compared_in_its_last_place(x, digits):
    shown = f"{x:.{digits}e}"
    exponent = int(shown.split("e")[1])
    unit = 10.0 ** (exponent - digits)
    far = f"{float(shown) + 3 * unit:.{digits}e}"
    assume(int(far.split("e")[1]) == exponent)   # crossing a power of ten changes the printed precision
    assert same(shown, f"{float(shown) + unit:.{digits}e}")
    assert not same(shown, far)


@pytest.mark.parametrize("expected, got", [
    ("0.3", "0.299999"),         # %g drops trailing zeros: 0.300000 and 0.299999 are one unit of 1e-6 apart
    ("1", "0.999999"),           # %g printed the rounded value as a whole number
    ("9.99e-06", "1e-05"),
    ("<td>-0.0714</td>", "<td>-0.0715</td>"),
])
def test_the_finer_printed_place_sets_the_unit(expected, got):
    assert same(expected, got) and same(got, expected)


@pytest.mark.parametrize("expected, got", [
    ("df = 98", "df = 97"),                     # integers are exact
    ("status true", "status false"),            # text is exact
    ("0.0030413 (true)", "0.0030413 (false)"),
    ("a 0.5 b", "a 0.5 b 0.1"),                 # another number
    ("0.5", "-0.5"),
    ("0.0030413", "0.00305"),                   # the coarser print does not widen the tolerance
    ("0.0030413", "0.004"),
    ("0.5", "0.41"),
    ("1.2.3", "1.3.3"),                         # a version, not a number
    ("at 0x7f5e88420690>", "at 0x7f5e88420790>"),   # a hex address is text
    ("5e1000000", "6e1000000"),                 # beyond decimal arithmetic: different, not an error
])
def test_integers_text_and_signs_are_exact(expected, got):
    assert not same(expected, got)


@requires_data
def test_nbval_passes_a_last_digit_rounded_the_other_way_and_fails_a_changed_value(tmp_path):
    """Live, in a copy of workbook 03: one checked cell's committed 12.1333 is made 12.1334 (the computed value
    rounding the other way: passes), another's 0.09524 is made 0.09534 (ten units off: fails) - one failure."""
    import nbformat

    src = ROOT / "notebooks" / "03_krippendorff_paradoxes.ipynb"
    nb = nbformat.read(str(src), as_version=4)
    checked = [c for c in nb.cells if "nbval-check-output" in c.metadata.get("tags", [])]

    def alter(cell, old, new):
        for out in cell.outputs:
            html = out.get("data", {}).get("text/html", "")
            if f">{old}<" in html:
                out["data"]["text/html"] = html.replace(f">{old}<", f">{new}<", 1)
                return
        raise AssertionError(f"no {old} in the checked cell's HTML")

    def first_with(value):
        """The first checked cell showing the value (the scorecard's last cell shows it again)."""
        return next(c for c in checked if any(f">{value}<" in o.get("data", {}).get("text/html", "")
                                             for o in c.outputs))

    alter(first_with("12.1333"), "12.1333", "12.1334")
    alter(first_with("0.09524"), "0.09524", "0.09534")
    nbformat.write(nb, str(tmp_path / src.name))
    shutil.copyfile(ROOT / "conftest.py", tmp_path / "conftest.py")
    proc = subprocess.run([*NBVAL, str(tmp_path / src.name)], cwd=tmp_path, env=os.environ.copy(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0 and "1 failed" in proc.stdout, proc.stdout[-3000:]
    assert "0.09534" in proc.stdout and "12.1334" not in proc.stdout, proc.stdout[-3000:]
