"""Dask path (vrs_helpers.dask_support and the backends that use it): fits on a LocalCluster equal the local fit of
the same rows; bad partitions,
an unreachable scheduler and a killed worker; `vrs batch --dask`; resampling batches on workers."""

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe", reason="the optional Dask extra is not installed")
distributed = pytest.importorskip("distributed")

from conftest import assert_same_numbers, write_notebook  # noqa: E402
from vrs_helpers import dask_support as vd  # noqa: E402
from vrs_helpers import mixed  # noqa: E402
from vrs_helpers.book.significance import resampling_test_dask  # noqa: E402
from vrs_helpers.mixed.structure.errors import MixedModelError  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       memory_limit="1GB")
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _logs(seed=0, n_items=60, n_configs=8, seeds=3):
    """Per-item scores of systems x configurations x seeds; sorted so that later partitions hold new items and
    configurations (levels first appearing in late partitions)."""
    rng = np.random.default_rng(seed)
    rows = [(s, f"cfg{c}", sd, f"it{i:03d}") for c in range(n_configs) for sd in range(seeds)
            for s in ("base", "new") for i in range(n_items)]
    df = pd.DataFrame(rows, columns=["system", "config", "seed", "item"])
    item_eff = rng.normal(0, 1.0, n_items)
    cfg_eff = rng.normal(0, 0.5, n_configs)
    df["length"] = df["item"].str[-1].astype(int) % 3 + 1.0
    df["score"] = (item_eff[df["item"].str[2:].astype(int)] + cfg_eff[df["config"].str[3:].astype(int)]
                   + 0.3 * (df["system"] == "new") + 0.1 * df["length"] + rng.normal(0, 1, len(df)))
    df = df.sort_values(["item", "config"], kind="stable").reset_index(drop=True)
    df["seed"] = df["seed"].astype(str)
    return df


FORMULAS = ["score ~ system + (1|item) + (1|config)",
            "score ~ system * length + (1|item) + (1|system:config)",
            "score ~ system + (1 + length|config) + (1|item)"]


@pytest.mark.parametrize("formula", FORMULAS)
def test_fit_equals_local_with_late_levels(client, formula):
    df = _logs()
    ddf = dd.from_pandas(df, npartitions=7, sort=False)
    first = ddf.get_partition(0).compute()
    assert df["item"].nunique() > first["item"].nunique()  # levels first appear in later partitions
    for method in ("ML", "REML"):
        local = mixed.fit(formula, df, method=method)
        dist = mixed.fit(formula, ddf, method=method)
        assert dist.loglik == pytest.approx(local.loglik, rel=1e-9)
        assert dist.stats.n == len(df)
        np.testing.assert_allclose(dist.fixed_effects["estimate"], local.fixed_effects["estimate"], rtol=1e-6,
                                   atol=1e-9)
    # the statistics themselves: same levels (first appearance over the partitions in order) and sums
    s_local = mixed.accumulate(formula, df)
    s_dist = mixed.accumulate(formula, ddf)
    assert s_dist.levels == s_local.levels
    np.testing.assert_allclose(s_dist.XtX, s_local.XtX, rtol=1e-12)
    for a, b in zip(s_dist.ZtX, s_local.ZtX, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9)


def test_level_order_does_not_change_the_fit(client):
    """Partitions in another order give other level orders; the likelihood is the same."""
    df = _logs(seed=3)
    shuffled = df.sample(frac=1.0, random_state=1).reset_index(drop=True)
    formula = FORMULAS[0]
    a = mixed.fit(formula, dd.from_pandas(df, npartitions=5, sort=False), method="ML")
    b = mixed.fit(formula, dd.from_pandas(shuffled, npartitions=3, sort=False), method="ML")
    assert a.stats.levels != b.stats.levels
    assert a.loglik == pytest.approx(b.loglik, rel=1e-9)


def test_parquet_dataset_and_analysis_glrt(client, tmp_path):
    df = _logs(seed=5)
    for i, part in enumerate(_split(df, 4)):
        part.to_parquet(tmp_path / f"part{i}.parquet")
    ddf = dd.read_parquet(str(tmp_path))
    m1 = mixed.fit(FORMULAS[0], ddf, method="ML")
    assert m1.loglik == pytest.approx(mixed.fit(FORMULAS[0], df, method="ML").loglik, rel=1e-9)


def test_inconsistent_partitions_name_the_partition(client, tmp_path):
    df = _logs(seed=1)
    parts = _split(df, 3)
    bad = parts[2].assign(score=parts[2]["score"].astype(str))
    for i, part in enumerate([parts[0], parts[1], bad]):
        part.to_parquet(tmp_path / f"part{i}.parquet")
    with pytest.raises(MixedModelError, match=r"partition [12] of [23]: column 'score' has dtype"):
        mixed.fit(FORMULAS[0], dd.read_parquet(str(tmp_path), blocksize=None))
    other = tmp_path / "missing"
    other.mkdir()
    for i, part in enumerate([parts[0], parts[1].drop(columns="config"), parts[2]]):
        part.to_parquet(other / f"part{i}.parquet")
    with pytest.raises(MixedModelError, match=r"partition 1 of [23].*config"):
        mixed.fit(FORMULAS[0], dd.read_parquet(str(other), blocksize=None))


def test_unreachable_scheduler_fails_within_10s():
    start = time.monotonic()
    with pytest.raises(vd.DaskConnectionError, match="No Dask scheduler answers"):
        vd.connect("tcp://127.0.0.1:9", timeout=5)
    assert time.monotonic() - start < 10


def _split(df, k):
    bounds = np.linspace(0, len(df), k + 1).astype(int)
    return [df.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


KILLED_WORKER = """
import os, sys
from pathlib import Path

import dask.dataframe as dd
import distributed
import pandas as pd

sys.path.insert(0, sys.argv[1])
from test_distributed import FORMULAS, _logs, _split
from vrs_helpers import mixed


def killer(i, df, marker):
    # partition i; the first time partition 3 is built, the worker process dies
    if i == 3 and not os.path.exists(marker):
        Path(marker).write_text("killed")
        os._exit(1)
    return df


if __name__ == "__main__":
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       memory_limit="1GB")
    client = distributed.Client(cluster)
    df = _logs(seed=2)
    marker = sys.argv[2]
    ddf = dd.from_map(killer, list(range(6)), _split(df, 6), [marker] * 6, meta=df.iloc[:0], enforce_metadata=False)
    dist = mixed.fit(FORMULAS[0], ddf, method="ML")
    local = mixed.fit(FORMULAS[0], df, method="ML")
    print(repr(dist.loglik), repr(local.loglik))
    client.close()
    cluster.close()
"""


def test_killed_worker_is_recomputed(tmp_path):
    """A worker that dies mid-fit: its partitions are recomputed on a restarted worker and the fit equals the local
    one (1e-9). Run in a process of its own with its own LocalCluster: the workers are that process's children, out
    of reach of whatever signal handling earlier tests left in this one."""
    import subprocess
    import sys as _sys

    script = tmp_path / "killed_worker.py"
    script.write_text(KILLED_WORKER)
    marker = tmp_path / "killed"
    proc = subprocess.run([_sys.executable, str(script), str(Path(__file__).parent), str(marker)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert marker.exists()  # a worker did die mid-fit
    dist, local = (float(v) for v in proc.stdout.split()[-2:])
    assert dist == pytest.approx(local, rel=1e-9)


_write_nb = write_notebook


def test_vrs_batch_on_the_cluster(client, tmp_path, capsys):
    """`vrs batch --dask`: results gathered on the client; a worker killed during a run: the run is executed
    again elsewhere; a failed notebook is an error row; a re-run executes only what did not finish."""
    from vrs_helpers.app.cli import main

    marker = tmp_path / "killed"
    nb = _write_nb(tmp_path / "t.ipynb", [
        "import os\n"
        "if x == 2 and not os.path.exists(marker):\n"
        "    open(marker, 'w').write('x')\n"
        "    os.kill(os.getppid(), 9)  # the kernel's parent: the Dask worker running this task\n",
        "from vrs_helpers.app.scorecard import record\nrecord('x squared', x * x)",
        "assert x != 4, 'x = 4 fails'"], params=f"x = 1\nmarker = {str(marker)!r}")
    grid = tmp_path / "g.yaml"
    grid.write_text(f"notebook: {nb}\nparameters:\n  x: [1, 2, 3, 4]\n")
    out = tmp_path / "b"
    address = client.scheduler.address
    assert main(["batch", str(grid), "--out", str(out), "--dask", address]) == 1  # x = 4 fails
    assert marker.exists()  # a worker died during the run of x = 2
    table = pd.read_csv(out / "results.csv")
    assert table["x squared"].tolist() == [1.0, 4.0, 9.0, 16.0]
    assert table["error"].isna().tolist() == [True, True, True, False]
    assert "x = 4 fails" in table["error"].iloc[3]
    outputs = sorted(out.glob("*.ipynb"))
    assert len(outputs) == 4 and not list(out.glob(".*.partial"))
    # an interrupted batch keeps what finished; a re-run executes only the rest
    stamp = {p.name: p.stat().st_mtime_ns for p in outputs}
    from vrs_helpers.app.runner import run_name

    name = {x: run_name(nb, {"x": x}) for x in (1, 2, 3, 4)}
    (out / name[3]).unlink()
    assert main(["batch", str(grid), "--out", str(out), "--dask", address]) == 1
    after = {p.name: p.stat().st_mtime_ns for p in out.glob("*.ipynb")}
    assert after[name[1]] == stamp[name[1]] and after[name[2]] == stamp[name[2]]
    assert after[name[4]] != stamp[name[4]]  # the failed run is executed again
    assert pd.read_csv(out / "results.csv")["x squared"].tolist() == [1.0, 4.0, 9.0, 16.0]


def test_batch_dask_unreachable_address(tmp_path, capsys):
    from vrs_helpers.app.cli import main

    nb = _write_nb(tmp_path / "t.ipynb", ["y = x"], params="x = 1")
    grid = tmp_path / "g.yaml"
    grid.write_text(f"notebook: {nb}\nparameters:\n  x: [1]\n")
    start = time.monotonic()
    assert main(["batch", str(grid), "--out", str(tmp_path / "b"), "--dask", "tcp://127.0.0.1:9"]) == 2
    assert time.monotonic() - start < 10
    assert "No Dask scheduler answers" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["permutation", "bootstrap"])
@pytest.mark.parametrize("counts", [False, True])
def test_resampling_batches_on_workers_equal_local(client, kind, counts):
    """The same seed gives the same p-value whether the batches run here or on the workers (continuous scores:
    item-wise draws; counts: the pattern path), with several batches per task."""
    from vrs_helpers.book import significance as sg

    rng = np.random.default_rng(11)
    n = 3000
    if counts:
        a, b = rng.integers(0, 3, n).astype(float), rng.integers(0, 3, n).astype(float)
    else:
        a = rng.normal(0.05, 1, n)
        b = a + rng.normal(0.04, 0.5, n)
    local = (sg.permutation_test if kind == "permutation" else sg.bootstrap_test)(a, b, n_resamples=5000, seed=7)
    plan = (sg.permutation_plan if kind == "permutation" else sg.bootstrap_plan)(a, b, n_resamples=5000, seed=7)
    assert len(plan.batches) >= 2
    remote = resampling_test_dask(kind, a, b, n_resamples=5000, seed=7, client=client, tasks=3)
    # the same seeded draws; the workers may add their sums in another order (another thread count): the
    # differences agree to rounding and so does the count of resamples at least as extreme
    np.testing.assert_allclose(remote.distribution, local.distribution, rtol=1e-9, atol=1e-12)
    assert remote.exceedances == local.exceedances and remote.p_value == pytest.approx(local.p_value, rel=1e-12)
    other = resampling_test_dask(kind, a, b, n_resamples=5000, seed=8, client=client)
    assert not np.array_equal(other.distribution, local.distribution)


def test_without_dask_the_option_says_how_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(vd.DaskUnavailableError, match=r"pip install 'vrs-workbooks\[dask\]'"):
        vd.connect("local")


def test_vrs_analyze_dask_equals_the_local_analysis(client, tmp_path, capsys):
    """`vrs analyze PARQUET --dask`: the GLRTs (both readings, conditional), variance components, phi and the
    paired resampling tests equal vrs_helpers.evaluate.analysis.analyze on the same rows."""
    import json

    from vrs_helpers.app.cli import main
    from vrs_helpers.evaluate.analysis import analyze

    df = _logs(seed=4, n_items=40, n_configs=4, seeds=3)
    folder = tmp_path / "logs"
    folder.mkdir()
    for i, part in enumerate(_split(df, 3)):
        part.to_parquet(folder / f"part{i}.parquet")
    local = analyze(df, "score", "system", "item", replications=["config", "seed"], properties=["length"],
                    baseline="base", n_resamples=2000, seed=3).data
    out = tmp_path / "report"
    assert main(["analyze", str(folder), "--response", "score", "--system", "system", "--item", "item",
                 "--replication", "config", "--replication", "seed", "--property", "length", "--baseline", "base",
                 "--n-resamples", "2000", "--seed", "3", "--out", str(out), "--dask", client.scheduler.address]) == 0
    dist = json.loads((out / "summary.json").read_text())
    # the report is the renderer's (issue 51: no kernel, so a cluster's analysis gets one too)
    assert "report: " in capsys.readouterr().out and (out / "report.html").is_file()
    for d, loc in ((dist["glrt"], local["glrt"]), (dist["glrt_replications_random"]["lrt"],
                                                   local["glrt_replications_random"]["lrt"])):
        assert d["chi2"] == pytest.approx(loc["chi2"], rel=1e-6)
        assert d["df"] == loc["df"]
    assert dist["glrt_replications_random"]["den_df"] == pytest.approx(
        local["glrt_replications_random"]["den_df"], rel=1e-5)
    assert dist["conditional"]["length"]["chi2"] == pytest.approx(local["conditional"]["length"]["chi2"], rel=1e-6)
    for s in ("base", "new"):
        for comp, v in local["variance_components"][s].items():
            assert dist["variance_components"][s][comp] == pytest.approx(v, rel=1e-5, abs=1e-10)
        assert dist["reliability"][s]["phi"] == pytest.approx(local["reliability"][s]["phi"], rel=1e-6)
    # summary.json holds floats at 10 significant digits
    assert [r["p_value"] for r in dist["paired_resampling"]] == pytest.approx(
        [r["p_value"] for r in local["paired_resampling"]], rel=1e-9)
    assert dist["verdict"][0] == local["verdict"][0]
    # not a Parquet dataset: a clear error (exit 2)
    csv = tmp_path / "scores.csv"
    df.to_csv(csv, index=False)
    assert main(["analyze", str(csv), "--response", "score", "--system", "system", "--item", "item",
                 "--dask", client.scheduler.address]) == 2
    assert "--dask reads a Parquet dataset" in capsys.readouterr().err


def _analyze_args(path, out, *extra):
    return ["analyze", str(path), "--response", "score", "--system", "system", "--item", "item",
            "--replication", "seed", "--property", "length", "--n-resamples", "500", "--seed", "3", "--out",
            str(out), *extra]


def _bad(df, case):
    if case == "missing_property":
        df.loc[5, "length"] = np.nan
    elif case == "item_missing_for_one_system":
        df = df[~((df["system"] == "new") & (df["item"] == "it007"))]
    elif case == "duplicated_row":
        df = pd.concat([df, df.iloc[[11]]], ignore_index=True)
    return df


@pytest.mark.parametrize("case", ["missing_property", "item_missing_for_one_system", "duplicated_row"])
def test_bad_input_same_exit_code_and_message_on_both_backends(client, tmp_path, capsys, case):
    """One validation for both backends (issue 19): `vrs analyze` and `vrs analyze --dask` reject the same bad
    table with the same exit code and the same message, and leave a previous report untouched."""
    from vrs_helpers.app.cli import main

    df = _bad(_logs(seed=5, n_items=20, n_configs=1, seeds=3).drop(columns="config"), case)
    path = tmp_path / "scores.parquet"
    df.to_parquet(path)
    out = tmp_path / "report"
    out.mkdir()
    (out / "summary.json").write_text('{"previous": true}')
    code_local = main(_analyze_args(path, out))
    err_local = capsys.readouterr().err
    code_dask = main(_analyze_args(path, out, "--dask", client.scheduler.address))
    err_dask = capsys.readouterr().err
    assert code_local == code_dask == 2
    assert err_local == err_dask and err_local.startswith("error: ")
    assert (out / "summary.json").read_text() == '{"previous": true}'


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_clean_input_same_summary_file_on_both_backends(client, tmp_path):
    """The same analysis on both backends: workbook 07 in memory and the cluster write the same summary.json: the
    same keys and text, numbers within 1e-8 relative (the sums are added in another order, so the last digits may
    differ on another machine: never compare the files byte for byte)."""
    from vrs_helpers.app.cli import main

    df = _logs(seed=6, n_items=30, n_configs=1, seeds=3).drop(columns="config")
    folder = tmp_path / "logs"
    folder.mkdir()
    for i, part in enumerate(_split(df, 3)):
        part.to_parquet(folder / f"part{i}.parquet")
    assert main(_analyze_args(folder, tmp_path / "local")) == 0
    assert main(_analyze_args(folder, tmp_path / "dask", "--dask", client.scheduler.address)) == 0
    local = json.loads((tmp_path / "local" / "summary.json").read_text())
    assert_same_numbers(local, json.loads((tmp_path / "dask" / "summary.json").read_text()), rel=1e-8)
    assert local["glrt_replications_random"] and (tmp_path / "local" / "report.html").is_file()
    assert local["aso"] and local["expected_max"]   # issue 22: computed on the client from the run means


def test_parametric_bootstrap_batches_on_workers_equal_local(client):
    """The parametric bootstrap's seeded batches give the same simulated statistics and p-value on the workers as
    here (3 batches in 2 tasks)."""
    d = pd.read_csv(Path(__file__).parent / "reference" / "small_sample_three_seeds.csv.gz",
                    dtype={"system": str, "seed": str, "item": str})
    m1 = mixed.fit("score ~ system + (1|item) + (1|system:seed)", d, method="ML")
    m0 = mixed.fit("score ~ 1 + (1|item) + (1|system:seed)", d, method="ML")
    local = mixed.parametric_bootstrap_lrt(m0, m1, n_sim=300, seed=2, batch_size=100)
    remote = mixed.parametric_bootstrap_lrt(m0, m1, n_sim=300, seed=2, batch_size=100, client=client, tasks=2)
    # the same seeded simulations; refits on the workers may add their sums in another order
    np.testing.assert_allclose(remote.reference, local.reference, rtol=1e-7, atol=1e-9)
    assert remote.p_value == pytest.approx(local.p_value, abs=1 / 301) and remote.n_sim == 300


def test_glmm_bootstrap_batches_on_workers_equal_local(client):
    """The GLMM parametric bootstrap's seeded batches (binary scores) give the same simulated statistics and p-value
    on the workers as here (3 batches in 2 tasks)."""
    d = pd.read_csv(Path(__file__).parent / "reference" / "glmm_pb_trials.csv.gz", dtype={"seed": str, "item": str})
    m1 = mixed.glmer("cbind(successes, failures) ~ system + (1|item) + (1|system:seed)", d)
    m0 = mixed.glmer("cbind(successes, failures) ~ 1 + (1|item) + (1|system:seed)", d)
    local = mixed.glmm_bootstrap_lrt(m0, m1, n_sim=90, seed=2, batch_size=30)
    remote = mixed.glmm_bootstrap_lrt(m0, m1, n_sim=90, seed=2, batch_size=30, client=client, tasks=2)
    np.testing.assert_allclose(remote.reference, local.reference, rtol=1e-7, atol=1e-8)
    assert remote.p_value == pytest.approx(local.p_value, abs=1 / 91) and remote.n_failed == local.n_failed == 0


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_several_metrics_same_summary_on_both_backends(client):
    """Two metrics (issue 22): per-metric results and the Holm-adjusted verdicts give the same summary.json text
    in memory and on the cluster."""
    from vrs_helpers.evaluate.analysis import analyze, summary_json

    df = _logs(seed=7, n_items=20, n_configs=1, seeds=3).drop(columns="config")
    df["error"] = 1 - df["score"] + np.random.default_rng(1).normal(0, 0.5, len(df))
    kw = dict(replications=["seed"], n_resamples=300, seed=4, lower_is_better=["error"])
    local = summary_json(analyze(df, ["score", "error"], "system", "item", **kw))
    dist = summary_json(analyze(df, ["score", "error"], "system", "item", backend=client, **kw))
    assert local == dist
    assert '"holm"' in local and '"runs_random"' in local


def test_a_cluster_left_without_workers_is_an_error_not_a_hang():
    """Every worker gone and none coming back: wait_result raises DaskConnectionError after its grace time instead
    of waiting for ever (a task of 5 s, the only worker stopped after it started)."""
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None)
    c = distributed.Client(cluster)
    try:
        fut = c.submit(time.sleep, 5, pure=False)
        time.sleep(0.5)
        cluster.scale(0)
        start = time.monotonic()
        with pytest.raises(vd.DaskConnectionError, match="no worker for 2 s"):
            vd.wait_result(fut, c, poll=0.5, grace=2)
        assert time.monotonic() - start < 30
        # with a worker the result comes back as future.result() gives it
        cluster.scale(1)
        c.wait_for_workers(1, timeout=30)
        assert vd.wait_result(c.submit(sum, [1, 2, 3]), c, poll=0.5, grace=2) == 6
    finally:
        c.close()
        cluster.close()
