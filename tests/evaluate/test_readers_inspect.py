"""vrs_helpers.evaluate.logs.readers on Inspect logs written by inspect_ai itself (an ``inspect_ai.eval`` with the
mockllm provider): the table is what Inspect logged, and the accuracy and standard errors reproduced from it are
the ones Inspect computed and printed."""

import numpy as np
import pandas as pd
import pytest

from vrs_helpers.evaluate.logs.harness_stats import harness_numbers
from vrs_helpers.evaluate.logs.readers import LogFormatError, detect_format, load_eval_logs
from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_inspect

inspect_ai = pytest.importorskip("inspect_ai")


@pytest.fixture(scope="module")
def inspect_logs(tmp_path_factory):
    """Two models x 24 samples x 3 epochs x 2 runs (generation seeds), by inspect_ai.eval with mockllm; one
    model's logs as .eval, the other's as .json."""
    truth = simulate_binary(3, items=24, runs=2, repeats=3, clusters=6)
    out = tmp_path_factory.mktemp("inspect")
    write_inspect(truth[truth["system"] == "model-a"], out, cluster="cluster")
    write_inspect(truth[truth["system"] == "model-b"], out, log_format="json", cluster="cluster")
    return truth, out


def test_inspect_table_is_what_inspect_logged(inspect_logs):
    from inspect_ai.log import read_eval_log

    truth, out = inspect_logs
    logs = load_eval_logs(out, item_fields=["cluster"])
    d = logs.description
    assert d.format == "inspect" and d.systems == ["mockllm/model-a", "mockllm/model-b"]
    assert d.runs == {s: {"arith": 2} for s in d.systems} and d.repeats == {"arith": (3, 3)}
    assert sorted(logs.table["run"].unique()) == ["seed=1", "seed=2"] and "epochs" in d.repeat_source
    assert len(logs.table) == len(truth)
    files = sorted(out.glob("*.eval")) + sorted(out.glob("*.json"))
    assert len(files) == 4
    rows = []
    for f in files:   # the same rows through inspect_ai's own reader
        log = read_eval_log(str(f))
        for s in log.samples:
            rows.append((log.eval.model, f"seed={log.plan.config.seed}", str(s.epoch), str(s.id),
                         1.0 if s.scores["match"].value == "C" else 0.0, s.metadata["cluster"]))
    want = pd.DataFrame(rows, columns=["system", "run", "repeat", "item", "match", "cluster"])
    got = logs.table[["system", "run", "repeat", "item", "match", "cluster"]]
    key = ["system", "run", "repeat", "item"]
    pd.testing.assert_frame_equal(got.sort_values(key).reset_index(drop=True),
                                  want.sort_values(key).reset_index(drop=True))
    # the per-item means over epochs are the table's (epochs are repeats of an item, in whatever order)
    mean_truth = truth.groupby(["system", "run", "item"])["score"].mean().to_numpy()
    mean_got = got.assign(system=got["system"].str.replace("mockllm/", ""), run=got["run"].str[5:]).groupby(
        ["system", "run", "item"])["match"].mean().to_numpy()
    np.testing.assert_array_equal(mean_got, mean_truth)


def test_inspect_numbers_equal_what_inspect_printed(inspect_logs):
    _, out = inspect_logs
    logs = load_eval_logs(out, item_fields=["cluster"])
    rep = logs.reported.pivot_table(index=["system", "run"], columns="statistic", values="value")
    plain = harness_numbers(logs).set_index(["system", "run"])
    clustered = harness_numbers(logs, cluster="cluster").set_index(["system", "run"])
    assert len(rep) == 4
    np.testing.assert_allclose(plain["mean"], rep.loc[plain.index, "accuracy"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(plain["stderr"], rep.loc[plain.index, "stderr"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(clustered["stderr"], rep.loc[plain.index, "stderr(cluster='cluster')"], rtol=0,
                               atol=1e-9)
    assert (clustered["stderr_kind"] == "stderr(cluster='cluster')").all()
    assert all(v == {"reducer": ["mean"], "epochs": 3} for v in logs.settings.values())
    assert logs.design() == {"runs": True, "repeats": True, "replications": ["run"],
                             "random": "(1|item) + (1|system:run) + (1|system:item)", "family": "binomial"}


def test_inspect_bad_logs_and_missing_package(inspect_logs, tmp_path, monkeypatch):
    _, out = inspect_logs
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "2024-01-01T00-00-00_task_x.eval").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(LogFormatError, match=r"task_x\.eval: not a readable Inspect log"):
        load_eval_logs(bad)
    import builtins

    real_import = builtins.__import__

    def no_inspect(name, *args, **kwargs):
        if name.startswith("inspect_ai"):
            raise ImportError("No module named 'inspect_ai'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_inspect)
    with pytest.raises(LogFormatError, match=r"needs the inspect_ai package: pip install 'vrs-workbooks\[inspect\]'"):
        load_eval_logs(out)
    assert detect_format(out) == "inspect"   # detection needs no inspect_ai
