"""`vrs plan --repeats`: Miller's (2024, sec. 5) items x repeats closed form, by hand here, beside the runs x items
planner."""

import math

import pytest
from scipy import stats

from vrs_helpers.app import cli
from vrs_helpers.evaluate.logs.harness_stats import miller_plan


def _by_hand(delta, omega2, sigma2, k, alpha=0.05, power=0.8):
    z = stats.norm.isf(alpha / 2) + stats.norm.isf(1 - power)
    return math.ceil(z ** 2 * (omega2 + 2 * sigma2 / k) / delta ** 2)


def test_items_needed_per_repeats_and_the_floor():
    plan = miller_plan(0.03, 0.09, 0.2025, repeats=[1, 3, 10], items=[500])
    assert list(plan.table["items_needed"]) == [_by_hand(0.03, 0.09, 0.2025, k) for k in (1, 3, 10)]
    z = stats.norm.isf(0.025) + stats.norm.isf(0.2)
    assert plan.floor == math.ceil(z ** 2 * 0.09 / 0.03 ** 2)
    # power at n items: the normal tail of the paired z test at delta / SE, SE^2 = (omega2 + 2 sigma2 / K) / n
    se = math.sqrt((0.09 + 2 * 0.2025 / 3) / 500)
    expected = stats.norm.sf(stats.norm.isf(0.025) - 0.03 / se) + stats.norm.cdf(-stats.norm.isf(0.025) - 0.03 / se)
    assert plan.table.loc[1, "power at 500 items"] == pytest.approx(expected, rel=1e-12)
    # at the items it says are needed, the power reaches the target
    for _, row in plan.table.iterrows():
        reached = miller_plan(0.03, 0.09, 0.2025, repeats=[row["repeats"]], items=[row["items_needed"]]).table
        assert reached.iloc[0, -1] >= 0.8


def test_vrs_plan_prints_both_planners(capsys):
    assert cli.main(["plan", "--items", "200", "--delta", "0.03", "--repeats", "1", "3", "--item-diff-sd", "0.3",
                     "--within-sd", "0.45", "--run-sd", "0.01", "--residual-sd", "0.45"]) == 0
    out = capsys.readouterr().out
    assert "Items x repeats (Miller 2024" in out and "runs per system needed for power 0.8" in out
    assert f"{_by_hand(0.03, 0.09, 0.2025, 3)}" in out


@pytest.mark.parametrize("args, phrase", [
    (["--repeats", "2"], "--item-diff-sd"),
    ([], "give --run-sd and --residual-sd"),
    (["--repeats", "0", "--item-diff-sd", "0.3", "--within-sd", "0.4"], "repeats must be whole numbers"),
])
def test_vrs_plan_bad_repeat_options_exit_2(capsys, args, phrase):
    assert cli.main(["plan", "--items", "200", "--delta", "0.03", *args]) == 2
    assert phrase in capsys.readouterr().err
