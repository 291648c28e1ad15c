"""Notebook validation does not depend on the last digits of floats (issue 19): the cells tagged
``nbval-check-output`` pass when the notebooks run under another OpenBLAS kernel family, single-threaded, than the
one that produced the committed outputs - `make test` validates them so (its NBVAL_BLAS); and the check is live (an
altered committed output fails it)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import requires_data

ROOT = Path(__file__).resolve().parent.parent
OTHER_BLAS = {"OPENBLAS_CORETYPE": "Prescott", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
NBVAL = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider", "-q"]


def _architectures(env) -> list[str]:
    code = ("import json, numpy, scipy.linalg, threadpoolctl; "
            "print(json.dumps(sorted({i.get('architecture', '') for i in threadpoolctl.threadpool_info() "
            "if i.get('internal_api') == 'openblas'})))")
    return json.loads(subprocess.check_output([sys.executable, "-c", code], env=env, text=True))


def test_the_other_blas_kernel_is_in_effect():
    default = _architectures({k: v for k, v in os.environ.items() if k not in OTHER_BLAS})
    other = _architectures({**os.environ, **OTHER_BLAS})
    assert other and other != default, (default, other)


def test_make_test_validates_the_notebooks_under_the_other_blas_kernel():
    """`make test`'s notebook step (nbval over every workbook) runs with OTHER_BLAS in its environment, so the
    checked outputs are validated under another kernel family than the one that made them (the previous test: that
    kernel is in effect). One run of the notebooks instead of two (this suite ran them a second time, 105 s)."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    setting = next(line for line in lines if line.startswith("NBVAL_BLAS ="))
    assert dict(kv.split("=") for kv in setting.split("=", 1)[1].split()) == OTHER_BLAS
    step = [line.strip() for line in lines if "--nbval-lax" in line and "notebooks" in line]
    assert step and all(s.startswith("$(NBVAL_BLAS) ") for s in step), step


@requires_data
def test_an_altered_checked_output_fails(tmp_path):
    """Control: the comparison is live. One checked cell's committed text is changed in a copy of workbook 03."""
    import nbformat

    src = ROOT / "notebooks" / "03_krippendorff_paradoxes.ipynb"
    nb = nbformat.read(str(src), as_version=4)
    cell = next(c for c in nb.cells if "nbval-check-output" in c.metadata.get("tags", []))
    changed = 0
    for out in cell.outputs:   # a reader's view of a status: "true" becomes "false" in each text the cell shows
        for mime in ("text/plain", "text/html"):
            text = out.get("data", {}).get(mime, "")
            if "true" in text:
                out["data"][mime] = text.replace("true", "false", 1)
                changed += 1
    assert changed, "the first checked cell of workbook 03 shows no status to alter"
    nbformat.write(nb, str(tmp_path / src.name))
    shutil.copyfile(ROOT / "conftest.py", tmp_path / "conftest.py")
    proc = subprocess.run([*NBVAL, str(tmp_path / src.name)], cwd=tmp_path, env=os.environ.copy(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0 and "failed" in proc.stdout, proc.stdout[-3000:]
