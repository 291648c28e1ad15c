"""Test configuration: point the data registry at ../shared/data (never download in tests)."""

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"

if not os.environ.get("VRS_DATA_DIR") and (SHARED_DATA / "SHA256SUMS").is_file():
    os.environ["VRS_DATA_DIR"] = str(SHARED_DATA)


def _data_available() -> bool:
    d = os.environ.get("VRS_DATA_DIR")
    return bool(d) and (Path(d) / "SHA256SUMS").is_file()


requires_data = pytest.mark.skipif(
    not _data_available(),
    reason="real data not available: set VRS_DATA_DIR to a local copy of the data (see README); tests never download",
)


def write_notebook(path: Path, code_cells, params: str = "x = 1") -> Path:
    """A stand-in workbook for runner tests: a cell tagged ``parameters`` (``params``), then ``code_cells``."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    p = nbformat.v4.new_code_cell(params)
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p] + [nbformat.v4.new_code_cell(c) for c in code_cells]
    nbformat.write(nb, str(path))
    return path


def holm_by_hand(p):
    """Holm's step-down adjusted p-values written out (an oracle independent of statsmodels): the i-th smallest
    of k p-values times (k - i + 1), the running maximum over the sorted order, capped at 1."""
    import numpy as np

    p = np.asarray(p, dtype=float)
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order]))
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out


def assert_same_numbers(a, b, rel: float = 1e-8, abs_tol: float = 1e-12, path: str = "$"):
    """Two parsed JSON documents (or nested dicts/lists) agree: the same keys, the same text, booleans and integers,
    and floats within ``rel`` relative (``abs_tol`` absolute near 0).

    Floats computed by another backend, thread count or BLAS build add their sums in another order, so their last
    digits differ (1e-10 relative in a Kenward-Roger F seen between two machines); 1e-8 is two orders above that
    and far below any digit a verdict or a report prints (4 significant digits)."""
    import math

    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{path}: keys differ: {sorted(set(a) ^ set(b))}"
        for k in a:
            assert_same_numbers(a[k], b[k], rel, abs_tol, f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{path}: lengths {len(a)} and {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_numbers(x, y, rel, abs_tol, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool), \
            f"{path}: {a!r} vs {b!r}"
        assert math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol), f"{path}: {a!r} vs {b!r} (rel {rel:g})"
    else:
        assert a == b, f"{path}: {a!r} vs {b!r}"


#: lmerTest/pbkrtest on the book's MT data, Marking vs PostEdit (tests/reference/mt_ter.R)
MT_LMERTEST = json.loads((ROOT / "tests" / "reference" / "mt_ter_lmertest.json").read_text())


@pytest.fixture(scope="session")
def mt_data():
    """The book's MT data (TER per sentence), Marking vs PostEdit: the rows of ``MT_LMERTEST``."""
    from vrs_helpers.book.data import load

    d = load("mt_ter")
    d = d[d["system"].isin(["Marking", "PostEdit"])].copy()
    d["system"] = d["system"].astype(str)
    assert len(d) == MT_LMERTEST["rows"]
    return d
