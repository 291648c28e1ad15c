"""The distribution is self-contained: a wheel installed into a fresh virtual environment does the package's main
jobs from any folder, without a checkout (issue 19).

The wheel is built from a copy of the files the build needs (so nothing is written into the checkout) and installed
with ``--no-deps --no-index`` into a new venv. Its dependencies come from this test environment through a path
file: the test is about what the wheel holds (modules, workbooks, book tables, entry point), not about resolving
dependencies from the network. That the checkout is not used is asserted: ``vrs_helpers`` must import from the
venv, and the commands run in an empty temporary folder.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import requires_data

ROOT = Path(__file__).resolve().parent.parent
BUILD_INPUTS = ["pyproject.toml", "README.md", "vrs_helpers", "notebooks", "data/book", "docs"]


def _run(args, cwd, env, timeout=600):
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python, vrs, env) of a fresh venv with the wheel installed, and the wheel's path."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    for rel in BUILD_INPUTS:
        s, d = ROOT / rel, src / rel
        if s.is_dir():
            shutil.copytree(s, d, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.pyc"))
        else:
            d.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(s, d)
    dist = base / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist),
          str(src)], cwd=base, env=os.environ.copy())
    wheels = list(dist.glob("vrs_workbooks-*.whl"))
    assert len(wheels) == 1, wheels
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(subprocess.check_output([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    # the dependencies of this test environment, after the venv's own site-packages (so the wheel wins)
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # the dependencies' data files (nbconvert's templates) are in this environment's share/jupyter
    env["JUPYTER_PATH"] = os.pathsep.join([str(Path(sys.prefix) / "share" / "jupyter"), env.get("JUPYTER_PATH", "")])
    _run([str(py), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheels[0])], cwd=base, env=env)
    return py, env_dir / "bin" / "vrs", env, wheels[0]


def test_wheel_holds_the_workbooks_and_book_tables(installed):
    import zipfile

    names = set(zipfile.ZipFile(installed[3]).namelist())
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        assert f"vrs_helpers/workbooks/{nb.name}" in names
    for table in sorted((ROOT / "data" / "book").glob("*.json")):
        assert f"vrs_helpers/book_tables/{table.name}" in names
    assert "vrs_helpers/book_tables/coverage.csv" in names and "vrs_helpers/workbooks/scorecard_baseline.csv" in names
    for page in sorted((ROOT / "docs").glob("*.md")):   # the user guide, built into the report site
        assert f"vrs_helpers/guide/{page.name}" in names
    assert "vrs_helpers/guide/figures/report-12-systems.png" in names


def test_installed_package_is_not_the_checkout(installed, tmp_path):
    py, _, env, _ = installed
    out = _run([str(py), "-c", "import vrs_helpers, vrs_helpers.resources as r; print(vrs_helpers.__file__); "
                "print(r.workbooks_dir()); print(r.book_dir())"], cwd=tmp_path, env=env).stdout.split()
    venv_dir = str(py.parent.parent)
    assert all(line.startswith(venv_dir) for line in out), out


def test_book_tables_from_the_wheel(installed, tmp_path):
    py, _, env, _ = installed
    code = ("import json; from vrs_helpers.book import data; "
            "names = ['agreement_3_3_1', 'circularity_2_4_3', 'significance_4_3', 'variance_tables_ch3']; "
            "print(json.dumps({n: sorted(data.book_table(n)) for n in names})); print(len(data.coverage()))")
    out = _run([str(py), "-c", code], cwd=tmp_path, env=env).stdout.splitlines()
    tables = json.loads(out[0])
    for name, keys in tables.items():
        assert keys == sorted(json.loads((ROOT / "data" / "book" / f"{name}.json").read_text())), name
    assert int(out[1]) == len(pd.read_csv(ROOT / "data" / "book" / "coverage.csv"))


def test_vrs_workbooks_copies_and_never_overwrites(installed, tmp_path):
    _, vrs, env, _ = installed
    _run([str(vrs), "workbooks", "seminar"], cwd=tmp_path, env=env)
    copied = sorted(p.name for p in (tmp_path / "seminar").glob("*.ipynb"))
    assert copied == sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    mine = tmp_path / "seminar" / "03_krippendorff_paradoxes.ipynb"
    mine.write_text("my answers")
    proc = subprocess.run([str(vrs), "workbooks", "seminar"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "nothing was copied" in proc.stderr and "--force" in proc.stderr
    assert mine.read_text() == "my answers"


@requires_data
def test_vrs_run_by_name_from_the_wheel(installed, tmp_path):
    _, vrs, env, _ = installed
    proc = _run([str(vrs), "run", "03_krippendorff_paradoxes", "--out", "out", "--html", "html"], cwd=tmp_path,
                env=env)
    assert (tmp_path / "out" / "03_krippendorff_paradoxes.ipynb").is_file()
    assert (tmp_path / "html" / "03_krippendorff_paradoxes.html").is_file()
    assert "scorecard checks" in proc.stdout


def test_vrs_analyze_from_the_wheel(installed, tmp_path):
    _, vrs, env, _ = installed
    rng = np.random.default_rng(7)
    item = rng.normal(0, 1, 40)
    rows = [{"system": s, "seed": r, "item": i, "score": item[i] + (0.5 if s == "B" else 0) + rng.normal(0, .3)}
            for s in "AB" for r in range(3) for i in range(40)]
    pd.DataFrame(rows).to_csv(tmp_path / "scores.csv", index=False)
    _run([str(vrs), "analyze", "scores.csv", "--response", "score", "--system", "system", "--item", "item",
          "--replication", "seed", "--n-resamples", "199", "--out", "report"], cwd=tmp_path, env=env)
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["systems"] == ["A", "B"] and summary["glrt"]["df"] == 1
    # a shift of 0.5 over 40 items x 3 runs with residual SD 0.3 (z about 0.5 / (0.3 * sqrt(2 / 120)) = 14):
    # the pipeline ran end to end; the numbers themselves are tested in tests/evaluate/test_analysis.py
    assert summary["glrt"]["p_value"] < 1e-6
    assert (tmp_path / "report" / "report.html").is_file()


def test_vrs_analyze_inspect_logs_from_the_wheel(installed, tmp_path):
    """The wheel declares the ``inspect`` extra (``pip install 'vrs-workbooks[inspect]'`` pulls inspect_ai), and the
    installed ``vrs analyze LOGDIR`` reads ``.eval`` logs with no other option. The extra's dependencies are not
    resolved here (no network: they come from this environment, as every dependency of this test); CI's
    ``make test`` installs the package with its extras from the index."""
    pytest.importorskip("inspect_ai")
    import zipfile

    from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_inspect

    py, vrs, env, wheel = installed
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert "Provides-Extra: inspect" in meta
    assert any(line.startswith("Requires-Dist: inspect_ai") and 'extra == "inspect"' in line
               for line in meta.splitlines())
    logs = tmp_path / "logs"
    write_inspect(simulate_binary(2, items=30, repeats=2), logs)
    assert sorted(p.suffix for p in logs.iterdir()) == [".eval", ".eval"]
    proc = _run([str(vrs), "analyze", "logs", "--out", "report"], cwd=tmp_path, env=env)
    assert "inspect: 2 file(s); 2 system(s)" in proc.stdout and "repeats per item 2" in proc.stdout
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["read"]["format"] == "inspect" and summary["tasks"][0]["random"] == "(1|item) + (1|system:item)"
    assert (tmp_path / "report" / "report.html").is_file()


@requires_data
def test_vrs_reproduce_out_from_the_wheel(installed, tmp_path):
    _, vrs, env, _ = installed
    proc = subprocess.run([str(vrs), "reproduce", "03", "--out", "site", "--defaults-only"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    # exit 0, or 1 only for scorecard regressions against the packaged baseline (none expected)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "site" / "scorecard.csv").is_file() and (tmp_path / "site" / "html" / "index.html").is_file()
    assert (tmp_path / "site" / "html" / "api").is_dir()
    assert (tmp_path / "site" / "html" / "guide" / "verdict.html").is_file()   # from the packaged docs/
