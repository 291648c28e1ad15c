"""Issue 52: real logs, second round - a pooled model that is not identified never ends the run, tasks too small
to test and tasks with one model are described (never a p-value verdict), an Inspect log without samples is named,
an Inspect scorer is its task's metric whatever its name, and 3+ models get the best model and those tied with it.
Every fixture is written here by the harness writers of :mod:`vrs_helpers.evaluate.logs.readers.writers` (lm-eval
files field by field; Inspect logs by ``inspect_ai.eval`` with ``mockllm``)."""

import json

import pandas as pd
import pytest

from vrs_helpers.app import cli
from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_lm_eval


def _run(tmp_path, capsys, folder, *extra):
    code = cli.main(["analyze", str(folder), "--out", str(tmp_path / "r"), *extra])
    out, err = capsys.readouterr()
    summary = tmp_path / "r" / "summary.json"
    return code, out, err, (json.loads(summary.read_text()) if code == 0 else None)


def test_disjoint_model_pairs_skip_the_pooled_model(tmp_path, capsys):
    """gsm8k compares m1 and m2, two other tasks m3 and m4 (the published lm-eval logs of the issue): task + system
    is rank deficient, so no pooled model; every task keeps its verdict, exit 0, the reason in the notes and the
    report."""
    a = simulate_binary(seed=1, systems=("m1", "m2"), tasks=("gsm8k",), items=40, accuracy=(0.5, 0.7))
    b = simulate_binary(seed=2, systems=("m3", "m4"), tasks=("chem", "health"), items=40, accuracy=(0.5, 0.6))
    write_lm_eval(pd.concat([a, b]), tmp_path / "logs")
    code, out, err, s = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 0, err
    assert {r["task"] for r in s["tasks"]} == {"gsm8k", "chem", "health"}
    assert all(r["p_value"] is not None and r["status"] == "analysed" for r in s["tasks"])
    assert s["pooled"] is None
    assert "different systems" in s["pooled_skipped"] and "confounded" in s["pooled_skipped"]
    assert any(n.startswith("no pooled model over the tasks: the tasks compare different systems") for n in s["notes"])
    html = (tmp_path / "r" / "report.html").read_text()
    assert "No pooled model over all the tasks" in html
    assert "no pooled model" in out
    # chem and health compare the same two models: pooled among themselves
    (group,) = s["pooled_groups"]
    assert group["tasks"] == ["chem", "health"] and group["systems"] == ["m3", "m4"]
    assert group["formula"].startswith("score ~ task + system") and group["df"] == 1
    assert "Pooled over chem, health (the tasks comparing m3, m4" in out


def test_same_systems_still_pool(tmp_path, capsys):
    t = simulate_binary(seed=3, systems=("m1", "m2"), tasks=("t1", "t2"), items=40)
    write_lm_eval(t, tmp_path / "logs")
    code, _, err, s = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 0, err
    assert s["pooled"] is not None and s["pooled_skipped"] is None


def test_two_items_are_not_testable(tmp_path, capsys):
    """2 items: the exact test's smallest mid-p is 0.25 > alpha (even with every item won by one model): "not
    testable", no p-value verdict, each model's accuracy still in the leaderboard."""
    t = simulate_binary(seed=2, systems=("m1", "m2"), tasks=("tiny",), items=2, accuracy=(0.02, 0.98), item_sd=0,
                        system_item_sd=0)
    write_lm_eval(t, tmp_path / "logs")
    code, out, err, s = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 0, err
    (row,) = s["tasks"]
    assert row["status"].startswith("not testable: 2 items cannot give p < 0.05")
    assert row["p_value"] is None and row["decision"] == row["status"]
    assert "no significant difference" not in out and "p = 0.5" not in out
    assert "Each model: m2 1 [0.342, 1]; m1 0 [0, 0.658]." in out   # Wilson 95 % of 2/2 and 0/2
    board = s["leaderboards"]["tiny"]["rows"]
    means = t.groupby("system")["score"].mean()
    assert {r["system"]: r["estimate"] for r in board} == pytest.approx(means.to_dict(), abs=1e-9)


def test_one_model_per_task_is_described(tmp_path, capsys):
    a = simulate_binary(seed=1, systems=("m1",), tasks=("gsm8k",), items=40, accuracy=(0.5,))
    b = simulate_binary(seed=2, systems=("m2",), tasks=("chem",), items=30, accuracy=(0.6,))
    t = pd.concat([a, b])
    write_lm_eval(t, tmp_path / "logs")
    code, out, err, s = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 0, err
    assert s["answer"].startswith("Nothing is compared: every task was run by one model only")
    from statsmodels.stats.proportion import proportion_confint

    rows = {(r["task"], r["system"]): r for r in s["one_model_tasks"]}
    assert set(rows) == {("gsm8k", "m1"), ("chem", "m2")}
    for (task, system), r in rows.items():
        y = t[(t["task"] == task) & (t["system"] == system)]["score"]
        lo, hi = proportion_confint(int(y.sum()), len(y), method="wilson")
        assert r["estimate"] == pytest.approx(y.mean(), abs=1e-9)   # summary.json keeps 10 digits
        assert (r["ci_low"], r["ci_high"]) == pytest.approx((lo, hi), abs=1e-9)
        assert r["logged"] == pytest.approx(y.mean(), abs=1e-9)     # lm-eval's own acc, read from its results file
    assert "Tasks run by one model: nothing compared" in (tmp_path / "r" / "report.html").read_text()


def _mock_inspect(folder, answers: dict, task: str, scorer=None, log_samples: bool = True, epochs: int = 1,
                  seed: int | None = None):
    """One Inspect log per model written by ``inspect_ai.eval`` with ``mockllm`` (``answers``: model -> the answer
    per item, 'yes' is right), scorer ``match()`` unless given."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    logs = []
    for model, said in answers.items():
        def outputs(messages, tools, tool_choice, config, said=said, model=model):
            item = int(messages[-1].text.split()[1].rstrip("?"))
            out = ModelOutput.from_content(model=model, content="yes" if said[item] else "no")
            out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
            return out

        samples = [Sample(id=str(i), input=f"q {i}?", target="yes") for i in range(len(said))]
        out = eval(Task(dataset=samples, solver=generate(), scorer=scorer() if scorer else match(), name=task,
                        epochs=epochs), model=get_model(f"mockllm/{model}", custom_outputs=outputs),
                   log_dir=str(folder), display="none", log_samples=log_samples, score_display=False,
                   max_samples=1, max_connections=1, seed=seed)
        assert out[0].status == "success"
        logs.append(out[0].location)
    return logs


def test_inspect_log_without_samples_says_how_to_log_them(tmp_path, capsys):
    pytest.importorskip("inspect_ai")
    _mock_inspect(tmp_path / "logs", {"a": [1, 0, 1, 1], "b": [0, 0, 1, 1]}, "toy", log_samples=False)
    code, out, err, _ = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 2
    assert "hold no samples" in err and "--no-log-samples" in err and "log_samples=True" in err
    assert "Traceback" not in err and "No evaluation logs of a known format" not in err
    assert not (tmp_path / "r" / "summary.json").exists()


def test_inspect_scorer_of_any_name_and_the_best_model(tmp_path, capsys):
    """The starsim layout: 5 models x 2 runs (seeds), one scorer ``starsim_scorer`` of 0/1 values. Analysed with no
    --response; the answer names the best model and the one tied with it. 30 items: m-a right on items 0-26, m-b
    on 0-25 (one item apart: tied), m-c on 0-14, m-d on 0-13, m-e on 0-4 (each at least 11 items below m-a: the
    exact sign test's p = 2 * 0.5^11 < 0.001 before Holm's factor 4)."""
    pytest.importorskip("inspect_ai")
    from inspect_ai.scorer import Score, accuracy, scorer, stderr

    @scorer(metrics=[accuracy(), stderr()])
    def starsim_scorer():
        async def score(state, target):
            return Score(value=1 if state.output.completion == "yes" else 0)
        return score

    right = {"m-a": 27, "m-b": 26, "m-c": 15, "m-d": 14, "m-e": 5}
    for seed in (1, 2):
        answers = {m: [int(i < k + (seed == 2 and m == "m-c")) for i in range(30)] for m, k in right.items()}
        _mock_inspect(tmp_path / "logs" / f"seed{seed}", answers, "starsim_benchmark", scorer=starsim_scorer,
                      seed=seed)
    code, out, err, s = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 0, err
    (row,) = s["tasks"]
    assert row["metric"] == "starsim_scorer" and row["status"] == "analysed" and row["systems"] == 5
    assert row["best"] == "mockllm/m-a" and row["tied_with_best"] == "mockllm/m-b"
    assert "Best: mockllm/m-a 0.9 " in s["answer"] and "tied with it: mockllm/m-b 0.867" in s["answer"]
    assert "3 of the 5 below it" in s["answer"]


def test_fits_that_fail_never_end_the_run(tmp_path, capsys, monkeypatch):
    """lm-eval 0.4.13's own logs ended with "X'V^-1 X is singular: the fixed effects are not identified." (exit 2):
    a task's fit or the pooled fit that raises such an error is named in its row or note, the others stand."""
    from vrs_helpers.evaluate.logs import tasks
    from vrs_helpers.mixed import MixedModelError

    real = tasks.system_lrt

    def failing(data, family, fixed="", **kw):
        if fixed == "task" or set(data["item"].astype(str)) == {str(i) for i in range(31)}:
            raise MixedModelError("X'V^-1 X is singular: the fixed effects are not identified.")
        return real(data, family, fixed=fixed, **kw)

    monkeypatch.setattr(tasks, "system_lrt", failing)
    a = simulate_binary(seed=4, systems=("m1", "m2"), tasks=("t1",), items=40)
    b = simulate_binary(seed=5, systems=("m1", "m2"), tasks=("t2",), items=31)
    c = simulate_binary(seed=6, systems=("m1", "m2"), tasks=("t3",), items=35)
    write_lm_eval(pd.concat([a, b, c]), tmp_path / "logs")
    code, out, err, s = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 0, err
    rows = {r["task"]: r for r in s["tasks"]}
    assert rows["t1"]["p_value"] is not None and rows["t3"]["p_value"] is not None
    assert rows["t2"]["status"].startswith("not testable: its mixed model could not be fitted (X'V^-1 X is singular")
    assert s["pooled"] is None and s["pooled_skipped"].startswith("the pooled model could not be fitted (X'V^-1 X")


def test_a_baseline_only_when_given(tmp_path, capsys):
    """3 models: no paired differences against the alphabetically first model unless --baseline names one."""
    t = simulate_binary(seed=8, systems=("alpha", "beta", "gamma"), tasks=("t1",), items=40,
                        accuracy=(0.5, 0.6, 0.7))
    write_lm_eval(t, tmp_path / "logs")
    code, _, err, s = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 0, err
    assert s["paired"] == [] and any(n.startswith("no paired differences against a baseline in t1") for n in s["notes"])
    assert s["tasks"][0]["best"] in {"alpha", "beta", "gamma"}
    code, _, err, s = _run(tmp_path, capsys, tmp_path / "logs", "--baseline", "beta")
    assert code == 0, err
    assert {(r["a"], r["b"]) for r in s["paired"]} == {("alpha", "beta"), ("gamma", "beta")}


def test_the_best_model_across_tasks(tmp_path, capsys):
    """3 models on 2 tasks (the same models on both): the best across the tasks is the highest mean over the items
    of both tasks, its leaderboard is in the report's leaderboards, and the heatmap's tasks stay the tasks."""
    t = simulate_binary(seed=9, systems=("alpha", "beta", "gamma"), tasks=("t1", "t2"), items=60,
                        accuracy=(0.3, 0.75, 0.8))
    write_lm_eval(t, tmp_path / "logs")
    code, _, err, s = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 0, err
    means = t.groupby("system")["score"].mean()
    across = s["best_across_tasks"]
    assert across["best"] == means.idxmax() and "alpha" not in across["tied"]
    board = {r["system"]: r["estimate"] for r in s["leaderboards"]["all tasks (items pooled)"]["rows"]}
    assert board == pytest.approx(means.to_dict(), abs=1e-9)
    assert {r["task"] for r in s["model_by_task"]} == {"t1", "t2"}
    assert f"across the tasks: {across['best']}" in s["answer"]


def test_a_pooled_model_of_too_few_items_is_not_testable(tmp_path, capsys):
    """2 tasks x 2 items: the pooled exact test of 4 items cannot give p < 0.05 (smallest mid-p 0.5^4 = 0.0625)."""
    t = simulate_binary(seed=2, systems=("m1", "m2"), tasks=("a", "b"), items=2, accuracy=(0.02, 0.98), item_sd=0,
                        system_item_sd=0)
    write_lm_eval(t, tmp_path / "logs")
    code, out, err, s = _run(tmp_path, capsys, tmp_path / "logs")
    assert code == 0, err
    assert s["pooled"] is None and s["pooled_skipped"].startswith("not testable: the 4 items cannot give p < 0.05")
    assert all(r["p_value"] is None for r in s["tasks"])
