"""vrs_helpers.evaluate.tables.judged: the judge-corrected readings of a score table, against ppi_py applied directly to
the same per-item values (test-only reference), Holm written out, and the checks of the labels."""

import numpy as np
import pandas as pd
import pytest

from vrs_helpers.evaluate.analysis import analyze
from vrs_helpers.evaluate.tables import judged
from vrs_helpers.evaluate.tables.scores import InputError

ppi_py = pytest.importorskip("ppi_py")


def _table(systems=("A", "B"), n_items=300, labelled=40, runs=1, seed=0, binary=True):
    """Judge scores with a system-dependent error (B's judge says 1 more often), human labels on the first
    ``labelled`` items; with ``runs`` > 1 a row per run (the judge redrawn per run, the human label on every run)."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, s in enumerate(systems):
        truth = (rng.random(n_items) < 0.6).astype(float) if binary else rng.normal(3, 1, n_items)
        for r in range(runs):
            if binary:
                fp = 0.05 + 0.3 * k
                judge = np.where(truth == 1, rng.random(n_items) > 0.05, rng.random(n_items) < fp).astype(float)
            else:
                judge = np.clip(truth + 0.3 * k + rng.normal(0, 0.5, n_items), -10, 10)
            for i in range(n_items):
                rows.append({"system": s, "seed": r, "item": f"i{i:03d}", "judge": judge[i],
                             "human": truth[i] if i < labelled else np.nan})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("binary", [True, False])
def test_difference_is_ppi_py_estimate_with_the_welch_t_interval(binary):
    """The table's PPI difference: ppi_py's point estimate (lambda 1) on the per-item differences (1e-9), its
    interval the small-sample one written out here (variances with divisor n - 1, Welch-Satterthwaite df, Student's
    t); its PPI++ the cross-fitted lambda written out here (5 folds, item i of the labelled ones in fold i mod 5)."""
    from scipy import stats

    t = _table(binary=binary)
    out = judged.analyze_judge(t, "judge", "system", "item", "human", ["A", "B"])
    w = t.pivot(index="item", columns="system", values="judge")
    h = t.pivot(index="item", columns="system", values="human")
    lab = h.notna().all(axis=1)
    y, yhat = (h["B"] - h["A"])[lab].to_numpy(), (w["B"] - w["A"])[lab].to_numpy()
    yu = (w["B"] - w["A"])[~lab].to_numpy()
    d = out.differences["B"]["PPI"]
    assert d.estimate == pytest.approx(float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, yhat, yu, lam=1))),
                                       abs=1e-9)
    lam = 1.0
    vu, vr = np.var(lam * yu, ddof=1) / len(yu), np.var(y - lam * yhat, ddof=1) / len(y)
    df = (vu + vr) ** 2 / (vu ** 2 / (len(yu) - 1) + vr ** 2 / (len(y) - 1))
    half = stats.t.ppf(0.975, df) * np.sqrt(vu + vr)
    assert (d.lower, d.upper) == pytest.approx((d.estimate - half, d.estimate + half), abs=1e-12)
    fold = np.arange(len(y)) % 5
    lams = []
    for k in range(5):
        a, b = y[fold != k], yhat[fold != k]
        lams.append(np.clip(np.cov(a, b)[0, 1] / ((1 + len(y) / len(yu)) * np.var(b, ddof=1)), 0, 1))
    lam_i = np.array(lams)[fold]
    tuned = out.differences["B"]["PPI++"]
    assert tuned.estimate == pytest.approx(np.mean(y + lam_i * (yu.mean() - yhat)), abs=1e-12)
    assert tuned.lam == pytest.approx(lam_i.mean(), abs=1e-12)
    m = out.means["B"]["PPI"]
    point = ppi_py.ppi_mean_pointestimate(h["B"][lab].to_numpy(), w["B"][lab].to_numpy(), w["B"][~lab].to_numpy(),
                                          lam=1)
    assert m.estimate == pytest.approx(float(np.squeeze(point)), abs=1e-9)
    assert ("MBM" in out.differences["B"]) == binary
    assert out.verdict[0].startswith("Corrected for the judge")


def test_runs_are_averaged_within_items():
    t = _table(runs=3, n_items=100, labelled=20)
    out = judged.analyze_judge(t, "judge", "system", "item", "human", ["A", "B"])
    per_item = t.groupby(["system", "item"])["judge"].mean()
    assert out.means["A"]["judge only"].estimate == pytest.approx(per_item["A"].mean())
    assert out.items == {"A": 100, "B": 100} and out.labelled == {"A": 20, "B": 20}
    assert not out.binary   # the per-item means over runs are not 0/1: no MBM
    assert "MBM" not in out.means["A"]


def test_three_systems_holm_written_out():
    t = _table(systems=("A", "B", "C"))
    out = judged.analyze_judge(t, "judge", "system", "item", "human", ["A", "B", "C"])
    p = np.array([out.differences[s]["PPI"].p_value for s in ("B", "C")])
    order = np.argsort(p)
    holm = np.empty(2)
    holm[order] = np.minimum(1, np.maximum.accumulate(p[order] * np.array([2, 1])))
    assert [out.adjusted["B"], out.adjusted["C"]] == pytest.approx(list(holm))


def test_naive_verdict_wrong_corrected_right_on_a_judge_that_favours_b():
    """No true difference (the same label rate); the judge says 1 far more often for B: the naive reading finds a
    difference, the corrected one does not, and the verdict warns."""
    t = _table(n_items=2000, labelled=200, seed=5)
    out = judged.analyze_judge(t, "judge", "system", "item", "human", ["A", "B"])
    assert out.differences["B"]["judge only"].p_value < 1e-4
    assert out.differences["B"]["PPI"].p_value > 0.05
    assert any(line.startswith("WARNING") for line in out.verdict)
    assert out.error_by_system.p_value < 0.05 and out.error_by_system.bias["B"] > out.error_by_system.bias["A"]


def test_confusion_and_alpha_on_the_labelled_items():
    t = _table()
    out = judged.analyze_judge(t, "judge", "system", "item", "human", ["A", "B"])
    lab = t.dropna(subset=["human"])
    conf = out.agreement["confusion"]["counts"]
    assert conf == [[int(((lab.judge == a) & (lab.human == b)).sum()) for b in (0, 1)] for a in (0, 1)]
    krippendorff = pytest.importorskip("krippendorff")
    ref = krippendorff.alpha(np.vstack([lab.judge, lab.human]), level_of_measurement="nominal")
    assert out.agreement["krippendorff_alpha"] == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("change, phrase", [
    (lambda t: t.assign(human=t.human * 3), "outside the judge's scale"),
    (lambda t: t.assign(human=np.where(t.system == "B", np.nan, t.human)), "No row of system 'B'"),
    (lambda t: t.assign(human=np.where(t.item == "i000", t.human, np.nan)), "has 1 labelled of"),
    (lambda t: t.assign(human=t.human.astype(object).where(t.human.isna(), "yes")), "must be numbers"),
])
def test_bad_labels_say_what_to_do(change, phrase):
    t = change(_table())
    with pytest.raises(InputError, match=phrase):
        judged.analyze_judge(t, "judge", "system", "item", "human", ["A", "B"])


def test_merge_labels_from_a_file_and_its_errors():
    t = _table(n_items=50, labelled=10)
    labels = t.dropna(subset=["human"])[["system", "item", "human"]]
    merged = judged.merge_labels(t.drop(columns="human"), labels, ["item", "system"], "human")
    pd.testing.assert_series_equal(merged["human"], t["human"], check_names=False)
    with pytest.raises(InputError, match="not in the data"):
        judged.merge_labels(t.drop(columns="human"), labels.assign(item="zz" + labels["item"]), ["item", "system"],
                            "human")
    with pytest.raises(InputError, match="twice"):
        judged.merge_labels(t.drop(columns="human"), pd.concat([labels, labels]), ["item", "system"], "human")
    with pytest.raises(InputError, match="already has a column"):
        judged.merge_labels(t, labels, ["item", "system"], "human")


def test_analyze_with_human_puts_the_corrected_verdict_first_and_in_the_summary():
    t = _table(n_items=200, labelled=40)
    result = analyze(_spec(t))
    s = result.data
    assert result.verdict[0].startswith("Corrected for the judge") and s["answer"] == result.verdict[0]
    ours = result.fits.judge.differences["B"]["PPI"].p_value
    assert s["judge"]["differences"]["B"]["PPI"]["p_value"] == pytest.approx(ours, rel=1e-9)
    assert any("judge's scores as they are" in line for line in result.verdict)


def _spec(t):
    from vrs_helpers.evaluate.tables.spec import AnalysisSpec

    return AnalysisSpec(t.drop(columns="seed"), response="judge", system="system", item="item", human="human",
                        n_resamples=200)


def test_spec_refuses_several_responses_with_human():
    from vrs_helpers.evaluate.tables.spec import AnalysisSpec

    with pytest.raises(InputError, match="one response"):
        AnalysisSpec(_table(), response=["judge", "human"], system="system", item="item", human="human")


def test_one_system_states_its_corrected_mean():
    t = _table(systems=("A",))
    out = judged.analyze_judge(t.assign(system="all"), "judge", "system", "item", "human", ["all"])
    ppi = out.means["all"]["PPI"]
    assert out.verdict[0].startswith("Corrected for the judge") and f"{ppi.estimate:.4g}" in out.verdict[0]
    assert out.error_by_system is None and not out.differences


def test_a_labels_file_without_the_system_column_is_refused(tmp_path):
    from vrs_helpers.evaluate.tables.spec import AnalysisSpec

    t = _table(n_items=50, labelled=10).drop(columns="seed")
    t.dropna(subset=["human"])[["item", "human"]].drop_duplicates("item").to_csv(tmp_path / "l.csv", index=False)
    spec = AnalysisSpec(t.drop(columns="human"), response="judge", system="system", item="item",
                        human_labels=str(tmp_path / "l.csv"))
    with pytest.raises(InputError, match="needs the system column 'system'"):
        spec.validated()


def _runs_table(runs=3, n_items=60, labelled=12, seed=1):
    """Continuous judge scores with runs: each run's output has its own truth (a run effect and noise around the
    system's item values), labelled on the first ``labelled`` items in every run."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, s in enumerate(("A", "B")):
        base = rng.normal(3, 1, n_items)
        for r in range(runs):
            truth = base + rng.normal(0, 0.3) + rng.normal(0, 0.5, n_items)
            judge = truth + 0.3 * k + rng.normal(0, 0.4, n_items)
            for i in range(n_items):
                rows.append({"system": s, "seed": r, "item": f"i{i:03d}", "judge": judge[i],
                             "human": truth[i] if i < labelled else np.nan})
    return pd.DataFrame(rows)


def test_balanced_runs_open_the_verdict_with_ppi_composed_with_the_runs():
    """With runs the verdict's reading is judge.ppi_runs_difference on the (runs, items) arrays, built here with
    numpy from the rows (1e-12), and the readings averaged over the runs are marked as about these runs."""
    from vrs_helpers.evaluate.tables import judge

    t = _runs_table()
    out = judged.analyze_judge(t, "judge", "system", "item", "human", ["A", "B"], runs=["seed"])
    assert out.runs_status == "random" and out.primary == "PPI, runs random" and out.runs == {"A": 3, "B": 3}
    arr = {}
    for s in ("A", "B"):
        d = t[t["system"] == s].sort_values(["seed", "item"])
        arr[s] = (d["judge"].to_numpy().reshape(3, 60), d["human"].to_numpy().reshape(3, 60))
    (ja, ha), (jb, hb) = arr["A"], arr["B"]
    ref = judge.ppi_runs_difference(ha[:, :12], hb[:, :12], ja[:, :12], jb[:, :12], ja[:, 12:], jb[:, 12:])
    got = out.differences["B"]["PPI, runs random"]
    assert (got.estimate, got.se, got.df) == pytest.approx((ref.estimate, ref.se, ref.df), abs=1e-12)
    assert out.verdict[0].startswith("Corrected for the judge with human labels and the runs random")
    assert "about these runs only" in out.verdict[1]
    assert out.to_summary()["runs_model"] == "random"


def test_unbalanced_runs_say_first_that_the_correction_ignores_them():
    t = _runs_table()
    t = t.drop(index=t.index[(t["system"] == "A") & (t["seed"] == 1) & (t["item"] == "i030")])
    out = judged.analyze_judge(t, "judge", "system", "item", "human", ["A", "B"], runs=["seed"])
    assert out.runs_status == "not composable" and out.primary == "PPI"
    assert "ignores the run-to-run variation" in out.verdict[0]
    assert out.verdict[1].startswith("About these runs, corrected")
    assert "PPI, runs random" not in out.differences["B"]


def test_analyze_with_runs_answers_with_the_runs_random_reading():
    from vrs_helpers.evaluate.tables.spec import AnalysisSpec

    t = _runs_table()
    result = analyze(AnalysisSpec(t, response="judge", system="system", item="item", human="human",
                                  replications=["seed"], n_resamples=200))
    s = result.data
    assert s["judge"]["primary"] == "PPI, runs random"
    assert s["answer"].startswith("Corrected for the judge with human labels and the runs random")


def test_a_system_with_one_run_among_systems_with_runs_is_not_composable():
    t = _runs_table()
    t = t[(t["system"] == "B") | (t["seed"] == 0)]
    out = judged.analyze_judge(t, "judge", "system", "item", "human", ["A", "B"], runs=["seed"])
    assert out.runs == {"A": 1, "B": 3} and out.runs_status == "not composable"
    assert "ignores the run-to-run variation" in out.verdict[0]
