"""vrs_helpers.book.model_based_metrics against the MBM paper (Goyal, Hu & Gupta 2023), Table 1 and its equations."""

import math

import numpy as np
import pytest

from vrs_helpers.book import model_based_metrics as mbm

PREC, FOR = 0.8897, 0.22769  # RoBERTa-ToxiGen on ToxiGen (MBM section 3.1)


def test_perfect_metric_model_reduces_to_the_deterministic_variance():
    # MBM appendix A.1: precision 1, FOR 0 -> p_R = p_O and eq. 13 equals eq. 5
    assert mbm.variance_model_based(0.3, 1000, 1.0, 0.0) == pytest.approx(mbm.variance_deterministic(0.3, 1000))


# MBM Table 1 as printed (strings: the printed digits set the precision of each check), and N per dataset: BOLD's
# 23,679 prompts are printed in MBM section 3; for RealToxicityPrompts MBM prints "100K", 99,442 is the size of the
# published dataset (Gehman et al. 2020). Workbook 06 checks the same numbers in its scorecard.
TABLE1 = {
    "BOLD": {"n": 23679, "mean": ("0.00456", "0.00236"), "ate": "-0.00219", "var_d": ("1.92e-7", "9.97e-8"),
             "ci_d": ("-0.00325", "-0.00114"), "var_m": ("7.50e-6", "7.46e-6"), "ci_m": ("-0.00978", "0.00538")},
    "RealToxicityPrompts": {"n": 99442, "mean": ("0.09124", "0.09157"), "ate": "0.00033",
                            "var_d": ("8.34e-7", "8.37e-7"), "ci_d": ("-0.00220", "0.00286"),
                            "var_m": ("2.06247e-6", "2.063405e-6"), "ci_m": ("-0.00365", "0.00431")},
}
# The printed numbers that the printed inputs do not give at their printed precision, each for a reason that follows
# from the printed numbers alone (workbook 06 shows the same findings):
PRINTED_BUT_NOT_DERIVED = {
    ("BOLD", "ATE"),               # 0.00236 - 0.00456 = -0.00220, printed -0.00219
    ("BOLD", "Var^D GPT-Neo"),     # eq. 5 at N = 23,679: 9.944e-8 (9.97e-8 implies N of about 23,616)
    ("BOLD", "CI^D lower"),        # centred at -0.00220 the bound is -0.003259; the printed one fits the ATE -0.00219
    ("RealToxicityPrompts", "Var^M GPT2"),      # eq. 13 gives 2.062478e-6 for the printed 2.06247e-6
    ("RealToxicityPrompts", "Var^M GPT-Neo"),   # eq. 13 gives 2.063409e-6 for the printed 2.063405e-6
}


def _half_unit(printed: str) -> float:
    """Half a unit of the last printed digit ("7.50e-6" -> 5e-9, "-0.00325" -> 5e-6)."""
    mantissa, _, exponent = printed.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 0.5 * 10.0 ** (int(exponent or 0) - decimals)


@pytest.mark.parametrize("name", list(TABLE1))
def test_table_1_at_the_printed_precision(name):
    """Every number of MBM Table 1 from the printed means, precision, FOR and N by the paper's equations, written out
    here (eq. 5, 10, 13; the intervals of eq. 8 with the printed Var^D and of eq. 14 with eq. 13's Var^M, z =
    Phi^-1(0.975)), compared at half a unit of the printed number's last digit. The library gives the same values
    (to 1e-12 relative), every number matches except the five the printed inputs do not determine, and the
    conclusion flips on BOLD."""
    t = TABLE1[name]
    n, z = t["n"], 1.959963984540054
    p_c, p_t = (float(m) for m in t["mean"])
    var_d = [p * (1 - p) / (n - 1) for p in (p_c, p_t)]                                     # eq. 5
    p_real = [p * PREC + (1 - p) * FOR for p in (p_c, p_t)]                                 # eq. 10
    var_m = [r * (1 - r) / (n - 1) for r in p_real]                                         # eq. 13
    ate = p_t - p_c
    half_d = z * math.sqrt(float(t["var_d"][0]) + float(t["var_d"][1]))                     # eq. 8, printed Var^D
    half_m = z * math.sqrt(var_m[0] + var_m[1])                                             # eq. 14
    ours = {"ATE": ate, "Var^D GPT2": var_d[0], "Var^D GPT-Neo": var_d[1], "Var^M GPT2": var_m[0],
            "Var^M GPT-Neo": var_m[1], "CI^D lower": ate - half_d, "CI^D upper": ate + half_d,
            "CI^M lower": ate - half_m, "CI^M upper": ate + half_m}
    printed = {"ATE": t["ate"], "Var^D GPT2": t["var_d"][0], "Var^D GPT-Neo": t["var_d"][1],
               "Var^M GPT2": t["var_m"][0], "Var^M GPT-Neo": t["var_m"][1], "CI^D lower": t["ci_d"][0],
               "CI^D upper": t["ci_d"][1], "CI^M lower": t["ci_m"][0], "CI^M upper": t["ci_m"][1]}
    # the library computes the same numbers
    lib_d = mbm.difference_ci(p_c, p_t, float(t["var_d"][0]), float(t["var_d"][1]))
    lib_m = mbm.difference_ci(p_c, p_t, *(mbm.variance_model_based(p, n, PREC, FOR) for p in (p_c, p_t)))
    library = {"ATE": lib_d.difference, "Var^D GPT2": mbm.variance_deterministic(p_c, n),
               "Var^D GPT-Neo": mbm.variance_deterministic(p_t, n), "Var^M GPT2": lib_m.var_control,
               "Var^M GPT-Neo": lib_m.var_treatment, "CI^D lower": lib_d.lower, "CI^D upper": lib_d.upper,
               "CI^M lower": lib_m.lower, "CI^M upper": lib_m.upper}
    for label, value in ours.items():
        assert library[label] == pytest.approx(value, rel=1e-12, abs=1e-18), label
    missed = {(name, label) for label, value in ours.items() if abs(value - float(printed[label])) > _half_unit(
        printed[label])}
    assert missed == {k for k in PRINTED_BUT_NOT_DERIVED if k[0] == name}
    if name == "BOLD":  # the conclusion flips: the deterministic interval excludes 0, the model-based one does not
        assert lib_d.significant and not lib_m.significant
        assert ours["CI^D upper"] < 0 < ours["CI^M upper"]


@pytest.mark.parametrize("name", list(TABLE1))
def test_printed_model_based_variances_are_within_the_rounding_of_their_inputs(name):
    """The printed Var^M against eq. 13 over every input consistent with the printed ones (means within half a unit
    of their last digit, N inferred by eq. 5 from a Var^D within half a unit of its last digit): the printed value's
    rounding interval must meet that range, so the paper's numbers are consistent with their rounded inputs."""
    t = TABLE1[name]
    for p_s, vd_s, vm_s in zip(t["mean"], t["var_d"], t["var_m"], strict=True):
        p, var_d, var_m = float(p_s), float(vd_s), float(vm_s)
        hp, hd, hm = _half_unit(p_s), _half_unit(vd_s), _half_unit(vm_s)
        candidates = [mbm.variance_model_based(pp, round(mbm.infer_n(pp, vd)), PREC, FOR)
                      for pp in (p - hp, p + hp) for vd in (var_d - hd, var_d + hd)]
        assert min(candidates) <= var_m + hm and max(candidates) >= var_m - hm, (candidates, var_m)


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


def test_resampled_true_rates_have_the_variance_of_eq_13():
    """Mean p_R (eq. 10) and variance p_R (1 - p_R) / N (eq. 13 without Bessel's correction); with a perfect metric
    model the deterministic p_O (1 - p_O) / N. 20,000 draws: the sample variance has a relative SE of about
    sqrt(2 / 20,000) = 1 %, the mean an SE of sqrt(var / 20,000); both are checked at 4 SE."""
    n, positives, draws = 23679, 108, 20_000   # BOLD's GPT2: 108 / 23,679 = 0.00456 observed toxic
    obs = np.zeros(n, dtype=int)
    obs[:positives] = 1
    p_o = positives / n
    rates = mbm.resampled_true_rates(obs, PREC, FOR, draws, rng=3)
    p_r = p_o * PREC + (1 - p_o) * FOR
    var = p_r * (1 - p_r) / n
    assert abs(rates.mean() - p_r) < 4 * math.sqrt(var / draws)
    assert abs(rates.var(ddof=1) / var - 1) < 4 * math.sqrt(2 / draws)
    exact = mbm.resampled_true_rates(obs, 1.0, 0.0, draws, rng=3)
    assert abs(exact.var(ddof=1) / (p_o * (1 - p_o) / n) - 1) < 4 * math.sqrt(2 / draws)
    assert np.array_equal(rates, mbm.resampled_true_rates(obs, PREC, FOR, draws, rng=np.random.default_rng(3)))
    with pytest.raises(mbm.MetricModelError, match="0/1 labels"):
        mbm.resampled_true_rates([0, 2, 1], PREC, FOR, 10)


def test_max_false_omission_rate_against_the_closed_form():
    """With precision 1, p_R = p + (1 - p) FOR and the interval reaches 0 where Var_C + Var_T = (d / z)^2: a
    quadratic in FOR, r (1 - r) = p (1 - p) + (1 - p)(1 - 2p) f - (1 - p)^2 f^2 summed over the two systems."""
    from scipy import stats

    p_c, p_t, n = 0.00456, 0.00236, 23679   # MBM Table 1, BOLD
    z = stats.norm.ppf(0.975)
    coef = np.zeros(3)
    for p in (p_c, p_t):
        coef += [-(1 - p) ** 2, (1 - p) * (1 - 2 * p), p * (1 - p)]
    coef[2] -= (n - 1) * ((p_t - p_c) / z) ** 2
    closed = min(r.real for r in np.roots(coef) if abs(r.imag) < 1e-12 and r.real > 0)
    assert mbm.max_false_omission_rate(p_c, p_t, n) == pytest.approx(closed, abs=1e-10)
    assert mbm.max_false_omission_rate(p_t, p_c, n) == pytest.approx(closed, abs=1e-10)   # the sign of d is free
    # any precision: at the returned FOR the interval's bound is 0, just below it the difference is significant
    f = mbm.max_false_omission_rate(p_c, p_t, n, precision=0.9)
    at = [mbm.difference_ci(p_c, p_t, *(mbm.variance_model_based(p, n, 0.9, x) for p in (p_c, p_t))) for x in
          (f, 0.99 * f)]
    assert abs(at[0].upper) < 1e-12 and at[1].significant
    assert mbm.max_false_omission_rate(0.1, 0.9, 10**6) == math.inf   # never insignificant
    with pytest.raises(mbm.MetricModelError, match="not significant"):
        mbm.max_false_omission_rate(0.0912, 0.0916, 99442)   # RealToxicityPrompts: not even with a perfect model


def test_table1_ranges_of_rounded_inputs_against_the_printed_table():
    """Issue 41 (items 4-7): MBM Table 1 from its printed (rounded) inputs. Closed forms: the ATE's range is the
    difference of the printed means +- two half units; Var^D's is p(1-p)/(N-1) at p +- a half unit. Book values:
    the printed BOLD ATE (-0.00219) and lower CI^D bound (-0.00325) and RealToxicityPrompts' Var^M (2.06247e-6,
    2.063405e-6), which miss the values of the printed inputs at their last digit, lie within half a unit of the
    ranges; BOLD GPT-Neo's Var^D (9.97e-8) does not (its mean and N imply a smaller variance)."""
    h = {"mean": 5e-6, "precision": 5e-5, "false_omission_rate": 5e-6}
    bold = mbm.table1_ranges(0.00456, 0.00236, 23679, 0.8897, 0.22769, 1.92e-7, 9.97e-8,
                             {**h, "var_d_control": 5e-10, "var_d_treatment": 5e-11})
    rtp = mbm.table1_ranges(0.09124, 0.09157, 99442, 0.8897, 0.22769, 8.34e-7, 8.37e-7,
                            {**h, "var_d_control": 5e-10, "var_d_treatment": 5e-10})
    assert bold["ATE"] == pytest.approx((0.00236 - 0.00456 - 1e-5, 0.00236 - 0.00456 + 1e-5), abs=1e-15)
    p = 0.00236
    assert bold["Var^D treatment"] == pytest.approx(((p - 5e-6) * (1 - p + 5e-6) / 23678,
                                                    (p + 5e-6) * (1 - p - 5e-6) / 23678), rel=1e-12)

    def overlaps(rng, printed, half):
        return rng[0] <= printed + half and rng[1] >= printed - half

    assert overlaps(bold["ATE"], -0.00219, 5e-6) and overlaps(bold["CI^D lower"], -0.00325, 5e-6)
    assert overlaps(rtp["Var^M control"], 2.06247e-6, 5e-12)
    assert overlaps(rtp["Var^M treatment"], 2.063405e-6, 5e-13)
    assert not overlaps(bold["Var^D treatment"], 9.97e-8, 5e-11)
    # the point values (printed inputs) miss the first three at their last digit
    assert abs((0.00236 - 0.00456) - -0.00219) > 5e-6
    assert abs(mbm.variance_model_based(0.09124, 99442, 0.8897, 0.22769) - 2.06247e-6) > 5e-12
