"""The harness readers mark which runs are shared by the systems (issue 39): a run is labelled by the seed the log
records (lm-eval's fewshot/random/numpy/torch seeds, Inspect's generation seed, HELM's train_trial_index), so the
same seed for two models is one label and --runs auto (the default) fits crossed runs; runs told apart only by a
folder, a file, a date or an evaluation id are each system's own (their labels carry the system), so auto keeps
them nested. The "Read ..." account says which. Logs: tests/fixtures/harness_written/ (written by the harnesses
themselves), examples/harness_logs/ and logs written here by inspect_ai itself (readers.writers)."""

import json
import shutil
import warnings
from pathlib import Path

import pytest

from vrs_helpers.evaluate.logs.readers import load_eval_logs
from vrs_helpers.evaluate.logs.readers.base import label_runs
from vrs_helpers.evaluate.logs.tasks import analyze_logs

ROOT = Path(__file__).resolve().parents[2]
WRITTEN = ROOT / "tests" / "fixtures" / "harness_written"
EXAMPLES = ROOT / "examples" / "harness_logs"


def _labels(logs) -> dict:
    return {(t, s): sorted(g["run"].unique()) for (t, s), g in logs.table.groupby(["task", "system"])}


def _analyses(logs, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {runs: analyze_logs(logs, n_sim=19, runs=runs, **kw) for runs in ("auto", "nested", "crossed")}


def test_lm_eval_seeds_of_their_own_stay_nested():
    """The committed lm-eval 0.4.13 logs ran model a with --seed 1, 2, 3 and model b with 11, 12, 13 (make.sh): the
    runs are labelled by the seed, no label is shared, and auto gives the nested model's test in every task."""
    logs = load_eval_logs(WRITTEN / "lm_eval" / "out")
    for (_, system), labels in _labels(logs).items():
        seeds = (1, 2, 3) if system.endswith("dummy-a") else (11, 12, 13)
        assert labels == [f"fewshot_seed={s}" for s in seeds]
    assert "no task has every label shared by the systems (nested runs under --runs auto)" in \
        logs.description.run_source
    a = _analyses(logs)
    for _, row in a["auto"].tasks.iterrows():
        assert row["random"].endswith("(1|system:run)") and "(1|run)" not in row["random"].split(" + ")
    cols = ["task", "random", "formula", "chi2", "chi2_p_value"]
    assert a["auto"].tasks[cols].equals(a["nested"].tasks[cols])
    assert "(1|run)" in a["crossed"].tasks["random"].iloc[0].split(" + ")


def test_lm_eval_the_same_seed_for_every_model_is_crossed(tmp_path):
    """The same lm-eval logs with model b's config seeds set to model a's (1, 2, 3: the values of the fields
    lm-eval wrote, nothing added): every label is shared, auto fits (1|run) + (1|system:run), and says so."""
    out = shutil.copytree(WRITTEN / "lm_eval" / "out", tmp_path / "out")
    for path in out.glob("seed*/acme__dummy-b/results_*.json"):
        results = json.loads(path.read_text())
        seed = int(path.parent.parent.name.removeprefix("seed"))
        assert results["config"]["fewshot_seed"] == seed + 10
        for key in ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed"):
            results["config"][key] = seed
        path.write_text(json.dumps(results))
    logs = load_eval_logs(out)
    assert set(map(tuple, _labels(logs).values())) == {("fewshot_seed=1", "fewshot_seed=2", "fewshot_seed=3")}
    assert "every label is shared by the systems (crossed runs under --runs auto)" in logs.description.run_source
    a = _analyses(logs)
    assert all(r.endswith("(1|run) + (1|system:run)") for r in a["auto"].tasks["random"])
    assert a["auto"].tasks["formula"].equals(a["crossed"].tasks["formula"])
    assert a["auto"].tasks["chi2"].equals(a["crossed"].tasks["chi2"])
    assert all("(1|run)" not in r.split(" + ") for r in a["nested"].tasks["random"])
    assert any(n.startswith("runs crossed in toy_mc, toy_gen") or n.startswith("runs crossed in toy_gen, toy_mc")
               for n in a["auto"].notes)
    assert not any(n.startswith("runs crossed") for n in a["nested"].notes)


def test_every_eval_ever_runs_are_each_systems_own():
    """Every Eval Ever records an evaluation id per run and no seed: each system's runs are its own."""
    logs = load_eval_logs(WRITTEN / "every_eval_ever" / "data")
    for (task, system), labels in _labels(logs).items():
        assert len(labels) == 3 and all(label.startswith(f"evaluation_id={task}/{system}/") for label in labels)
    assert "nothing in the logs says a run is shared by the systems" in logs.description.run_source


def test_helm_train_trials_are_labelled_by_their_index():
    """HELM draws the in-context examples of train trial i with seed i for every model: the label is the index."""
    logs = load_eval_logs(WRITTEN / "helm" / "benchmark_output")
    assert set(map(tuple, _labels(logs).values())) == {("train_trial_index=0", "train_trial_index=1")}
    examples = load_eval_logs(EXAMPLES / "helm")
    assert "every label is shared by the systems (crossed runs under --runs auto)" in examples.description.run_source


def test_runs_told_apart_by_folder_only_are_each_systems_own():
    """Two systems whose runs differ only in their folder (out/run1/<model>, out/run2/<model>): the labels carry
    the system; the same rows with a seed key that tells the runs apart keep the bare seed label."""
    def rows(key):
        return [{"system": s, "task": "t", "item": "0", "_run_info": {key: f"run{r}", "date": f"{s}{r}"}}
                for s in ("a", "b") for r in (1, 2)]

    by_folder = rows("folder")
    assert label_runs(by_folder, preferred=["folder"], shared=["seed"]) == ["folder"]
    assert [r["run"] for r in by_folder] == ["a: folder=run1", "a: folder=run2", "b: folder=run1", "b: folder=run2"]
    by_seed = rows("seed")
    assert label_runs(by_seed, preferred=["seed"], shared=["seed"]) == ["seed"]
    assert [r["run"] for r in by_seed] == ["seed=run1", "seed=run2"] * 2
    by_date = rows("folder")   # labels no two systems share are left as they are
    assert label_runs(by_date, preferred=["date"], shared=["seed"]) == ["date"]
    assert [r["run"] for r in by_date] == ["date=a1", "date=a2", "date=b1", "date=b2"]


def test_inspect_generation_seeds(tmp_path):
    """Logs written by inspect_ai itself (readers.writers.write_inspect): runs 1-3 with generation seeds 1-3 for
    both models are shared labels; runs without a seed (told apart by the log file) are each model's own."""
    pytest.importorskip("inspect_ai")
    from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_inspect

    table = simulate_binary(seed=39, items=12, runs=3, run_sd=0.3)
    write_inspect(table, tmp_path / "seeded", slim=True)
    logs = load_eval_logs(tmp_path / "seeded")
    assert set(map(tuple, _labels(logs).values())) == {("seed=1", "seed=2", "seed=3")}
    assert "every label is shared by the systems" in logs.description.run_source
    write_inspect(table.assign(run="r" + table["run"]), tmp_path / "unseeded", slim=True)
    unseeded = load_eval_logs(tmp_path / "unseeded")
    labels = _labels(unseeded)
    assert all(len(v) == 3 and all(label.startswith("file=") for label in v) for v in labels.values())
    assert not set.intersection(*(set(v) for v in labels.values()))   # each log file is one system's
    assert "nothing in the logs says a run is shared by the systems" in unseeded.description.run_source


def test_lm_eval_runs_with_the_default_seed_told_apart_by_folder_are_each_models_own(tmp_path):
    """lm-eval logs whose invocations all used the same seeds (1234: runs a, b, c written into out/runa, runb, runc):
    only the folder tells the runs apart, and out/runa of model-a has nothing to do with out/runa of model-b as far
    as the logs say: the labels carry the model, and auto fits nested runs."""
    from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_lm_eval

    table = simulate_binary(seed=3, items=30, runs=3)
    write_lm_eval(table.assign(run=table["run"].map({"1": "a", "2": "b", "3": "c"})), tmp_path / "out",
                  run_dir="run{run}")
    logs = load_eval_logs(tmp_path / "out")
    for (_, system), labels in _labels(logs).items():
        assert labels == [f"{system}: folder=run{r}" for r in "abc"]
    assert "nothing in the logs says a run is shared by the systems" in logs.description.run_source
    a = _analyses(logs)
    assert a["auto"].tasks["random"].iloc[0] == "(1|item) + (1|system:item) + (1|system:run)"


def test_a_field_of_the_run_pattern_is_a_shared_label(tmp_path):
    """Logs found by a pattern ('out/{system}/seed={seed}/'): the pattern's field labels the runs, the same value for
    every system is the same label (you named it), crossed under auto."""
    from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_lm_eval

    table = simulate_binary(seed=4, items=30, runs=3)
    write_lm_eval(table, tmp_path / "out", run_dir="{system}/seed={run}")
    logs = load_eval_logs(str(tmp_path / "out" / "{system}" / "seed={seed}"))
    assert set(map(tuple, _labels(logs).values())) == {("seed=1", "seed=2", "seed=3")}
    assert "every label is shared by the systems (crossed runs under --runs auto)" in logs.description.run_source
