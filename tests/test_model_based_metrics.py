"""vrs_helpers.model_based_metrics against the MBM paper (Goyal, Hu & Gupta 2023), Table 1 and its equations."""

import numpy as np
import pytest

from vrs_helpers import model_based_metrics as mbm

PREC, FOR = 0.8897, 0.22769  # RoBERTa-ToxiGen on ToxiGen (MBM section 3.1)


def _sig3(x):
    return float(f"{x:.3g}")


def test_perfect_metric_model_reduces_to_the_deterministic_variance():
    # MBM appendix A.1: precision 1, FOR 0 -> p_R = p_O and eq. 13 equals eq. 5
    assert mbm.variance_model_based(0.3, 1000, 1.0, 0.0) == pytest.approx(mbm.variance_deterministic(0.3, 1000))


@pytest.mark.parametrize("name,p_c,p_t,var_dc,var_dt,ci_d,var_mc,var_mt,ci_m", [
    ("BOLD", 0.00456, 0.00236, 1.92e-7, 9.97e-8, (-0.00325, -0.00114), 7.50e-6, 7.46e-6, (-0.00978, 0.00538)),
    ("RealToxicityPrompts", 0.09124, 0.09157, 8.34e-7, 8.37e-7, (-0.00220, 0.00286), 2.06247e-6, 2.063405e-6,
     (-0.00365, 0.00431)),
])
def test_table_1(name, p_c, p_t, var_dc, var_dt, ci_d, var_mc, var_mt, ci_m):
    # the paper does not print N after filtering: infer it from the published deterministic variance (eq. 5)
    n_c, n_t = round(mbm.infer_n(p_c, var_dc)), round(mbm.infer_n(p_t, var_dt))
    vm_c = mbm.variance_model_based(p_c, n_c, PREC, FOR)
    vm_t = mbm.variance_model_based(p_t, n_t, PREC, FOR)
    # The printed means and variances are rounded; the rounding propagates into the inferred N (0.2% for BOLD's
    # 0.00236). So check by interval arithmetic: the printed model-based variance's rounding interval must meet the
    # range of eq. 13 over all inputs consistent with the printed ones.
    for p, var_d, var_m in ((p_c, var_dc, var_mc), (p_t, var_dt, var_mt)):
        half_p = 0.5 * 10 ** (np.floor(np.log10(p)) - 2)
        half_d = 0.5 * 10 ** (np.floor(np.log10(var_d)) - 2)
        candidates = [mbm.variance_model_based(pp, round(mbm.infer_n(pp, vd)), PREC, FOR)
                      for pp in (p - half_p, p + half_p) for vd in (var_d - half_d, var_d + half_d)]
        digits = len(f"{var_m:.10g}".split("e")[0].replace(".", "").lstrip("0"))  # printed significant digits
        half_m = 0.5 * 10 ** (np.floor(np.log10(var_m)) - digits + 1)
        assert min(candidates) <= var_m + half_m and max(candidates) >= var_m - half_m, (candidates, var_m)
    assert abs(vm_c - var_mc) / var_mc < 0.005 and abs(vm_t - var_mt) / var_mt < 0.005
    det = mbm.difference_ci(p_c, p_t, var_dc, var_dt)
    mod = mbm.difference_ci(p_c, p_t, vm_c, vm_t)
    for ours, printed in ((det.lower, ci_d[0]), (det.upper, ci_d[1]), (mod.lower, ci_m[0]), (mod.upper, ci_m[1])):
        assert abs(round(ours, 5) - printed) <= 1.01e-5
    if name == "BOLD":  # the conclusion flips
        assert det.significant and not mod.significant


def test_paired_covariance_and_multiclass():
    # independent outputs: the joint table is the product of the marginals -> covariance 0
    joint = np.outer([0.7, 0.3], [0.6, 0.4])
    assert mbm.covariance_paired(joint, PREC, FOR, PREC, FOR, 1000) == pytest.approx(0.0, abs=1e-15)
    # identical outputs of a perfect metric: covariance = variance
    same = np.array([[0.7, 0.0], [0.0, 0.3]])
    assert mbm.covariance_paired(same, 1.0, 0.0, 1.0, 0.0, 1000) == pytest.approx(0.3 * 0.7 / 999)
    dist = mbm.real_class_distribution([0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]])
    assert dist == pytest.approx([0.55, 0.45])
    # binary case of A.2 equals eq. 10
    assert mbm.real_class_distribution([0.7, 0.3], [[1 - FOR, FOR], [1 - PREC, PREC]])[1] == pytest.approx(
        mbm.real_positive_rate(0.3, PREC, FOR))


def test_simulated_true_labels_have_the_real_rate():
    obs = (np.random.default_rng(0).random(5000) < 0.2).astype(int)
    draws = mbm.simulate_true_labels(obs, PREC, FOR, 400, seed=1)
    assert draws.mean() == pytest.approx(mbm.real_positive_rate(obs.mean(), PREC, FOR), abs=2e-3)


def test_bad_input():
    with pytest.raises(mbm.MetricModelError, match="probability"):
        mbm.real_positive_rate(1.2, PREC, FOR)
    with pytest.raises(mbm.MetricModelError, match="N must be"):
        mbm.variance_deterministic(0.3, 1)
    with pytest.raises(mbm.MetricModelError, match="2 x 2"):
        mbm.covariance_paired([[1.0]], PREC, FOR, PREC, FOR, 10)
