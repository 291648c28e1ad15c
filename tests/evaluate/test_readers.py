"""vrs_helpers.evaluate.logs.readers: evaluation logs in each harness's own layout (written by the tests as the harness
writes them; Inspect logs by inspect_ai itself), read into one long table; every bad log named with file and line."""

import hashlib
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vrs_helpers.evaluate.logs.harness_stats import harness_numbers
from vrs_helpers.evaluate.logs.readers import (
    FORMATS,
    KEYS,
    LogFormatError,
    detect_format,
    load_eval_logs,
    sniff_format,
)
from vrs_helpers.evaluate.logs.readers.helm import task_name
from vrs_helpers.evaluate.logs.readers.writers import (
    simulate_binary,
    write_every_eval_ever,
    write_helm,
    write_lm_eval,
    write_samples,
)
from vrs_helpers.evaluate.tables.scores import InputError


def _sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _by_hand_stderr(xs):
    """lm-eval's mean_stderr written out: sqrt(sum (x - mean)^2 / (n - 1)) / sqrt(n)."""
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs))


def test_formats_are_registered_once():
    assert set(FORMATS) == {"lm-eval", "inspect", "helm", "every-eval-ever"}
    assert FORMATS["inspect"].extra == "inspect"


# ---------------------------------------------------------------- lm-evaluation-harness

@pytest.fixture(scope="module")
def lm_logs(tmp_path_factory):
    """2 models x 3 seeds x 2 tasks, each seed a separate lm_eval invocation with its own --output_path."""
    truth = simulate_binary(7, tasks=("arith", "logic_qa"), items=25, runs=3, run_sd=0.4)
    out = tmp_path_factory.mktemp("lm") / "out"
    write_lm_eval(truth, out)
    return truth, out


def test_lm_eval_files_follow_the_harness_layout(lm_logs):
    """File names as lm_eval/utils.py parses them (task between the first and the last '_'); sample records with
    exactly the keys evaluator.py writes; doc_hash = sha256 of json.dumps(doc, indent=2)."""
    _, out = lm_logs
    samples = sorted(out.rglob("samples_*.jsonl"))
    results = sorted(out.rglob("results_*.json"))
    assert len(samples) == 2 * 3 * 2 and len(results) == 2 * 3
    for f in samples:
        name = f.name
        assert name[name.find("_") + 1: name.rfind("_")] in ("arith", "logic_qa")
        assert (f.parent / f"results_{name[name.rfind('_') + 1:].replace('.jsonl', '')}.json").is_file()
        rec = json.loads(f.read_text().splitlines()[0])
        assert set(rec) == {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics",
                            "doc_hash", "prompt_hash", "target_hash", "acc"}
        assert rec["doc_hash"] == _sha(json.dumps(rec["doc"], indent=2, ensure_ascii=False))
        assert rec["prompt_hash"] == _sha(rec["arguments"]["gen_args_0"]["arg_0"])
    res = json.loads(results[0].read_text())
    assert {"results", "configs", "n-samples", "config", "model_name", "model_name_sanitized"} <= set(res)
    assert {"acc,none", "acc_stderr,none"} <= set(res["results"]["arith"])


def test_lm_eval_two_models_three_seeds_two_tasks(lm_logs):
    truth, out = lm_logs
    logs = load_eval_logs(out)
    d = logs.description
    assert d.format == "lm-eval" and d.systems == ["model-a", "model-b"] and d.tasks == ["arith", "logic_qa"]
    assert d.runs == {s: {"arith": 3, "logic_qa": 3} for s in d.systems}
    assert d.repeats == {"arith": (1, 1), "logic_qa": (1, 1)} and d.items == {"arith": 25, "logic_qa": 25}
    assert d.metrics == {"arith": ["acc"], "logic_qa": ["acc"]} and d.primary_metric == "acc"
    text = logs.describe()
    assert "2 system(s)" in text and "runs per system 3" in text and "fewshot_seed" in text
    assert any("prompt_hash differs" in n for n in d.notes)   # few-shot seeds change the prompts, not the docs
    assert list(logs.table.columns[:5]) == KEYS
    # every score where it was written: the run label carries the seed
    got = logs.table.assign(run=logs.table["run"].str.extract(r"fewshot_seed=(\d+)")[0])
    merged = got.merge(truth, on=["system", "task", "run", "item"], validate="one_to_one")
    assert len(merged) == len(truth) and (merged["acc"] == merged["score"]).all()


def test_lm_eval_numbers_equal_the_results_files(lm_logs):
    """Per task and run the accuracy and acc_stderr from the per-item rows equal the results files' (written the
    way lm-eval writes them) and the formula of lm_eval/api/metrics.py written out here."""
    _, out = lm_logs
    logs = load_eval_logs(out)
    ours = harness_numbers(logs)
    assert len(ours) == 2 * 2 * 3 and (ours["stderr_kind"] == "mean_stderr").all()
    rep = logs.reported.pivot_table(index=["system", "task", "run"], columns="statistic", values="value",
                                    aggfunc="first")
    both = ours.set_index(["system", "task", "run"]).join(rep.rename(columns={"stderr": "stderr_file"}))
    assert len(both) == 12 and both[["value", "stderr_file"]].notna().all().all()
    np.testing.assert_allclose(both["mean"], both["value"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(both["stderr"], both["stderr_file"], rtol=0, atol=1e-12)
    for (system, task, run), part in logs.table.groupby(["system", "task", "run"]):
        hand = _by_hand_stderr(list(part["acc"]))
        assert abs(both.loc[(system, task, run), "stderr"] - hand) < 1e-12
    assert (both["n"] == 25).all()


def test_lm_eval_run_pattern_names_systems_and_runs(lm_logs, tmp_path):
    truth, _ = lm_logs
    for (system, run), part in truth.groupby(["system", "run"]):
        write_lm_eval(part, tmp_path / "runs" / system.upper() / f"seed={run}")
    logs = load_eval_logs(str(tmp_path / "runs/{system}/seed={seed}/"))
    assert logs.description.systems == ["MODEL-A", "MODEL-B"]
    assert sorted(logs.table["run"].unique()) == ["seed=1", "seed=2", "seed=3"]
    assert "pattern" in logs.description.run_source
    assert len(logs.table) == len(truth)


def _write_gsm8k_like(folder, model="org/model-x", date="2024-07-01T10-00-00.000001", filters=True,
                      results=True, n=4, aggregation="mean"):
    """Samples as lm-eval writes them for a generation task with two filters and a corpus-level metric."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n):
        doc = {"question": f"What is {i} + 1?", "answer": str(i + 1)}
        prompt = f"Q: {doc['question']}\nA:"
        for filt in (["strict-match", "flexible-extract"] if filters else ["none"]):
            lines.append({"doc_id": i, "doc": doc, "target": str(i + 1),
                          "arguments": {"gen_args_0": {"arg_0": prompt, "arg_1": {"until": ["\n"]}}},
                          "resps": [[f" {i + 1}"]], "filtered_resps": [f"{i + 1}"], "filter": filt,
                          "metrics": ["exact_match", "bleu"], "doc_hash": _sha(json.dumps(doc, indent=2)),
                          "prompt_hash": _sha(prompt), "target_hash": _sha(str(i + 1)),
                          "exact_match": float((i + (filt == "strict-match")) % 2), "bleu": [[str(i + 1)], f"{i}"]})
    (folder / f"samples_gsm8k_{date}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    if results:
        res = {"results": {"gsm8k": {"alias": "gsm8k", "exact_match,strict-match": 0.5,
                                     "exact_match_stderr,strict-match": 0.2886751345948129}},
               "n-samples": {"gsm8k": {"original": 1319, "effective": n}},
               "configs": {"gsm8k": {"metric_list": [{"metric": "exact_match", "aggregation": aggregation}]}},
               "config": {"model": "vllm", "model_args": f"pretrained={model},dtype=auto", "random_seed": 0,
                          "numpy_seed": 1234, "torch_seed": 1234, "fewshot_seed": 1234},
               "model_name": model, "model_name_sanitized": model.replace("/", "__")}
        (folder / f"results_{date}.json").write_text(json.dumps(res, indent=2))


def test_lm_eval_filters_corpus_metrics_and_missing_results(tmp_path):
    _write_gsm8k_like(tmp_path / "out" / "org__model-x")
    logs = load_eval_logs(tmp_path / "out")
    assert logs.description.systems == ["org/model-x"]
    assert logs.description.metrics["gsm8k"] == ["exact_match/strict-match", "exact_match/flexible-extract"]
    assert any("bleu" in n and "corpus-level" in n for n in logs.description.notes)
    assert list(logs.table["exact_match/strict-match"]) == [1.0, 0.0, 1.0, 0.0]
    rep = logs.reported.set_index("statistic")
    assert rep.loc["value", "metric"] == "exact_match/strict-match" and rep.loc["n", "value"] == 4
    ours = harness_numbers(logs, "exact_match/strict-match")
    assert ours["mean"].iloc[0] == 0.5 and abs(ours["stderr"].iloc[0] - _by_hand_stderr([1, 0, 1, 0])) < 1e-12
    _write_gsm8k_like(tmp_path / "mcc" / "org__model-x", aggregation="matthews_corrcoef")
    other = harness_numbers(load_eval_logs(tmp_path / "mcc"), "exact_match/strict-match")
    assert np.isnan(other["mean"].iloc[0]) and "'matthews_corrcoef' not reproduced" in other["stderr_kind"].iloc[0]
    # without results file: the system is the folder's name, with a note
    _write_gsm8k_like(tmp_path / "bare" / "my-model", filters=False, results=False)
    bare = load_eval_logs(tmp_path / "bare")
    assert bare.description.systems == ["my-model"] and bare.description.metrics["gsm8k"] == ["exact_match"]
    assert any("no results_" in n for n in bare.description.notes)
    # a results file given directly reads its samples
    one = load_eval_logs(next((tmp_path / "out").rglob("results_*.json")))
    assert len(one.table) == 4
    # item fields from the documents; one no document has is a note, not a column of NAs
    fields = load_eval_logs(tmp_path / "out", item_fields=["question", "subject"])
    assert fields.table["question"].iloc[0] == "What is 0 + 1?" and "subject" not in fields.table.columns
    assert any("no item has a field 'subject'" in n for n in fields.description.notes)
    # the system from a field the user names
    named = load_eval_logs(tmp_path / "out", system="config.model")
    assert named.description.systems == ["vllm"]
    with pytest.raises(LogFormatError, match="no field 'config.nothing'"):
        load_eval_logs(tmp_path / "out", system="config.nothing")


def test_lm_eval_doc_hash_differs_between_systems_is_an_error(lm_logs, tmp_path):
    _, out = lm_logs
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    f = sorted((copy / "seed2" / "model-b").glob("samples_logic_qa_*.jsonl"))[0]
    lines = f.read_text().splitlines()
    rec = json.loads(lines[3])
    rec["doc_hash"] = _sha("another version of the data set")
    lines[3] = json.dumps(rec)
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(LogFormatError, match=r"1 item\(s\) have a different doc_hash.*task 'logic_qa' item '3'"
                                             r".*model-b.*Evaluate every system on the same version"):
        load_eval_logs(copy)


def test_lm_eval_malformed_records_name_file_and_line(tmp_path):
    _write_gsm8k_like(tmp_path / "a" / "org__model-x", filters=False)
    f = next((tmp_path / "a").rglob("samples_*.jsonl"))
    lines = f.read_text().splitlines()
    f.write_text("\n".join(lines[:2] + ['{"doc_id": 2, "doc": {'] + lines[3:]) + "\n")
    with pytest.raises(LogFormatError, match=r"samples_gsm8k_.*\.jsonl, line 3: not valid JSON"):
        load_eval_logs(tmp_path / "a")
    f.write_text("\n".join(lines[:1] + ['{"doc": {}, "acc": 1.0}'] + lines[2:]) + "\n")
    with pytest.raises(LogFormatError, match=r"line 2: no 'doc_id'.*Expected an lm-eval sample record"):
        load_eval_logs(tmp_path / "a")
    f.write_text("\n".join(lines[:1] + ["[1, 2]"] + lines[2:]) + "\n")
    with pytest.raises(LogFormatError, match=r"line 2: a JSON list, not an object"):
        load_eval_logs(tmp_path / "a")
    f.write_text("\n".join(lines + lines[-1:]) + "\n")
    with pytest.raises(LogFormatError, match=r"doc_id 3 has two records for the filter 'none'"):
        load_eval_logs(tmp_path / "a")
    f.write_text("\n".join(lines) + "\n")
    r = next((tmp_path / "a").rglob("results_*.json"))
    r.write_text('{"results": {\n  "gsm8k": ,\n}')
    with pytest.raises(LogFormatError, match=r"results_.*\.json, line 2: not valid JSON"):
        load_eval_logs(tmp_path / "a")


# ---------------------------------------------------------------- detection and bad folders

def test_detection_mixed_empty_and_forced(lm_logs, tmp_path):
    truth, out = lm_logs
    assert detect_format(out) == sniff_format(out) == "lm-eval"
    table = tmp_path / "scores.csv"
    truth.to_csv(table, index=False)
    assert sniff_format(table) is None and sniff_format(tmp_path / "missing") is None
    mixed = tmp_path / "mixed"
    shutil.copytree(out / "seed1", mixed / "lm")
    write_every_eval_ever(truth[truth["run"] == "1"], mixed / "eee")
    with pytest.raises(LogFormatError, match=r"several formats \(.*lm-eval: 4 file\(s\).*--format") as err:
        load_eval_logs(mixed)
    with pytest.raises(LogFormatError, match="several formats"):
        sniff_format(mixed)
    assert "every-eval-ever: 4 file(s)" in str(err.value)
    assert load_eval_logs(mixed, format="every-eval-ever").description.format == "every-eval-ever"
    assert load_eval_logs(mixed, format="lm_eval").description.format == "lm-eval"   # an alias
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("nothing here")
    with pytest.raises(LogFormatError, match=r"No evaluation logs of a known format.*notes\.txt") as err:
        load_eval_logs(empty)
    assert all(f" {name}: " in str(err.value) for name in FORMATS)
    assert "\n" not in str(err.value)   # one line (issue 50: the console escapes line breaks in messages)
    with pytest.raises(LogFormatError, match=r"No helm logs at .*per_instance_stats\.json"):
        load_eval_logs(mixed, format="helm")
    with pytest.raises(InputError, match="Unknown log format 'csv'"):
        load_eval_logs(mixed, format="csv")
    with pytest.raises(InputError, match="No file or folder at"):
        load_eval_logs(tmp_path / "missing")
    logs = load_eval_logs(out)
    with pytest.raises(InputError, match="No metric 'f1'.*acc"):
        logs.scores("f1")
    assert logs.design("arith") == {"runs": True, "repeats": False, "replications": ["run"],
                                    "random": "(1|item) + (1|system:run)", "family": "binomial"}
    with pytest.raises(InputError, match="several tasks"):
        logs.design()
    s = logs.scores(task="arith")
    assert list(s.columns) == KEYS + ["score"] and set(s["task"]) == {"arith"} and len(s) == 2 * 3 * 25


# ---------------------------------------------------------------- HELM

@pytest.fixture(scope="module")
def helm_logs(tmp_path_factory):
    truth = simulate_binary(11, systems=("openai/gpt2", "eleutherai/pythia-1b"), tasks=("mmlu:subject=anatomy",),
                            items=30, runs=3, run_sd=0.5)
    out = tmp_path_factory.mktemp("helm")
    write_helm(truth, out)
    return truth, out


def test_helm_two_models_three_trials(helm_logs):
    truth, out = helm_logs
    logs = load_eval_logs(out / "benchmark_output")
    d = logs.description
    assert d.format == "helm" and d.systems == ["eleutherai/pythia-1b", "openai/gpt2"]
    assert d.tasks == ["mmlu:subject=anatomy"] and d.primary_metric == "exact_match"
    assert d.runs == {s: {"mmlu:subject=anatomy": 3} for s in d.systems}
    assert sorted(logs.table["run"].unique()) == ["train_trial_index=0", "train_trial_index=1", "train_trial_index=2"]
    ours = harness_numbers(logs).set_index(["system", "run"])
    for (system, run), part in truth.groupby(["system", "run"]):   # each model's mean exact_match per trial
        assert abs(ours.loc[(system, f"train_trial_index={int(run) - 1}"), "mean"] - part["score"].mean()) < 1e-12
    # HELM's stats.json: the mean of the trial means and their population SD
    rep = logs.reported[logs.reported["metric"] == "exact_match"].pivot_table(
        index="system", columns="statistic", values="value")
    for system in d.systems:
        means = truth[truth["system"] == system].groupby("run")["score"].mean()
        assert abs(ours.loc[(system, "all"), "mean"] - rep.loc[system, "mean"]) < 1e-12
        assert abs(ours.loc[(system, "all"), "stderr"] - rep.loc[system, "stddev"]) < 1e-12
        assert abs(rep.loc[system, "stddev"] - float(np.std(means, ddof=0))) < 1e-12


def test_helm_task_names_perturbations_and_errors(helm_logs, tmp_path):
    assert task_name("mmlu:subject=philosophy,method=multiple_choice_joint,model=openai_gpt2") == \
        "mmlu:subject=philosophy,method=multiple_choice_joint"
    assert task_name("narrative_qa:model=openai_gpt2,model_deployment=huggingface_gpt2") == "narrative_qa"
    _, out = helm_logs
    copy = tmp_path / "bo"
    shutil.copytree(out, copy)
    stats_file = next(copy.rglob("per_instance_stats.json"))
    entries = json.loads(stats_file.read_text())
    extra = dict(entries[0], perturbation={"name": "typos", "robustness": True})
    worst = {"name": {"name": "exact_match", "split": "test", "perturbation": {"name": "robustness",
                                                                                "computed_on": "worst"}},
             "count": 1, "sum": 0, "mean": 0.0}
    entries[0] = dict(entries[0], stats=entries[0]["stats"] + [worst])
    stats_file.write_text(json.dumps(entries + [extra]))
    logs = load_eval_logs(copy)
    assert "mmlu:subject=anatomy [perturbation=typos]" in logs.description.tasks
    assert any("computed over perturbations" in n for n in logs.description.notes)
    (stats_file.parent / "run_spec.json").unlink()
    with pytest.raises(LogFormatError, match="has no run_spec.json beside it"):
        load_eval_logs(copy)
    stats_file.write_text("[\n {\"instance_id\": 1}\n]")
    (stats_file.parent / "run_spec.json").write_text(json.dumps({"name": "x:model=m", "adapter_spec": {"model": "m"}}))
    with pytest.raises(LogFormatError, match=r"entry 0 is not a per-instance stat"):
        load_eval_logs(copy)


# ---------------------------------------------------------------- Every Eval Ever

def test_every_eval_ever_runs_repeats_and_hashes(tmp_path):
    truth = simulate_binary(5, systems=("meta/llama-3", "mistral/mistral-7b"), items=15, runs=2, repeats=2)
    write_every_eval_ever(truth, tmp_path / "eee")
    logs = load_eval_logs(tmp_path / "eee")
    d = logs.description
    assert d.format == "every-eval-ever" and d.systems == ["meta/llama-3", "mistral/mistral-7b"]
    assert d.runs == {s: {"arith": 2} for s in d.systems} and d.repeats == {"arith": (2, 2)}
    assert d.metrics == {"arith": ["score", "is_correct"]}
    assert len(logs.table) == len(truth)
    got = logs.table.groupby(["system", "item", "repeat"])["score"].sum()
    want = truth.groupby(["system", "item", "repeat"])["score"].sum()
    pd.testing.assert_series_equal(got, want, check_names=False)
    f = sorted((tmp_path / "eee").rglob("*_samples.jsonl"))[-1]
    lines = f.read_text().splitlines()
    rec = json.loads(lines[4])
    rec["sample_hash"] = _sha("changed")
    f.write_text("\n".join(lines[:4] + [json.dumps(rec)] + lines[5:]) + "\n")
    with pytest.raises(LogFormatError, match=r"different sample_hash.*task 'arith' item '4'"):
        load_eval_logs(tmp_path / "eee")
    del rec["model_id"]
    f.write_text("\n".join(lines[:4] + [json.dumps(rec)] + lines[5:]) + "\n")
    with pytest.raises(LogFormatError, match=r"_samples\.jsonl, line 5: no model_id"):
        load_eval_logs(tmp_path / "eee", format="every-eval-ever")


# ---------------------------------------------------------------- the committed samples of workbook 08

SAMPLES = Path(__file__).resolve().parents[2] / "examples" / "harness_logs"


@pytest.mark.parametrize("name,fmt,runs,repeats", [("lm_eval", "lm-eval", 3, 1), ("helm", "helm", 3, 1),
                                                    ("every_eval_ever", "every-eval-ever", 1, 2)])
def test_committed_samples_are_read_and_regenerate(name, fmt, runs, repeats, tmp_path):
    """The committed sample of each layout reads without options, and make_samples.py writes the same logs again
    (compared as read: the same rows, the harness's numbers within 1e-12)."""
    committed = load_eval_logs(SAMPLES / name)
    d = committed.description
    assert d.format == fmt and d.systems == ["acme/base-7b", "acme/tuned-7b"]
    assert {n for v in d.runs.values() for n in v.values()} == {runs}
    assert {r for r in d.repeats.values()} == {(repeats, repeats)}
    write_samples(tmp_path, [name])
    again = load_eval_logs(tmp_path / name)
    pd.testing.assert_frame_equal(again.table, committed.table)
    pd.testing.assert_frame_equal(again.reported.drop(columns="source"), committed.reported.drop(columns="source"),
                                  check_exact=False, rtol=0, atol=1e-12)


def test_committed_inspect_sample_is_read():
    pytest.importorskip("inspect_ai")
    logs = load_eval_logs(SAMPLES / "inspect", item_fields=["cluster"])
    d = logs.description
    assert d.format == "inspect" and d.systems == ["mockllm/acme/base-7b", "mockllm/acme/tuned-7b"]
    assert d.repeats == {"yes_no": (3, 3)} and d.items == {"yes_no": 30}
    ours = harness_numbers(logs, cluster="cluster").set_index("system")
    rep = logs.reported.pivot_table(index="system", columns="statistic", values="value")
    np.testing.assert_allclose(ours["stderr"], rep.loc[ours.index, "stderr(cluster='cluster')"], rtol=0, atol=1e-9)
