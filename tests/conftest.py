"""Test configuration: point the data registry at ../shared/data (never download in tests)."""

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
