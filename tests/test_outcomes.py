"""Every test result shares one base (statistic, df, p_value, method, as_dict, to_frame, reprs), and the CLI maps
the package's error base to a message and its exit code while real bugs raise (issue 19)."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from vrs_helpers import mixed
from vrs_helpers.book import significance as sg
from vrs_helpers.errors import VRSError
from vrs_helpers.outcomes import TestOutcome


def _results():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, 30), rng.normal(0.3, 1, 30)
    d = pd.DataFrame({"y": np.r_[a, b], "s": ["A"] * 30 + ["B"] * 30, "i": [f"i{k}" for k in range(30)] * 2})
    m0 = mixed.fit("y ~ 1 + (1|i)", d, method="ML")
    m1 = mixed.fit("y ~ s + (1|i)", d, method="ML")
    return {"t": sg.t_test(a), "paired t": sg.paired_t_test(a, b), "z": sg.z_test(a, sigma=1.0),
            "permutation": sg.permutation_test(a, b, n_resamples=199, seed=1),
            "bootstrap": sg.bootstrap_test(a, b, n_resamples=199, seed=1), "glrt": mixed.lrt(m0, m1)}, (a, b)


def test_every_result_has_the_shared_fields():
    results, (a, b) = _results()
    for name, r in results.items():
        assert isinstance(r, TestOutcome), name
        row = r.outcome_row()
        assert set(row) == {"method", "statistic", "df", "p_value"} and 0 <= row["p_value"] <= 1, name
        assert r.reject(1.0) and r.outcome_frame().shape == (1, 4) and "<table" in r._repr_html_()
        assert r.as_dict()["p_value"] == r.stated_p and r.method in r.sentence(), name
    # the statistics are the tests' own: scipy's t with n - 1 df, the GLRT's chi2
    t = stats.ttest_1samp(a, 0.0)
    assert results["t"].statistic == pytest.approx(t.statistic) and results["t"].df == len(a) - 1
    assert results["z"].df is None and results["permutation"].df is None
    assert results["glrt"].statistic == results["glrt"].chi2 and results["glrt"].df == 1


def test_cli_maps_vrs_errors_to_their_exit_code(monkeypatch, tmp_path, capsys):
    from vrs_helpers import resources
    from vrs_helpers.app import cli

    class Custom(VRSError):
        exit_code = 3

    def fail(*args, **kwargs):
        raise Custom("what to do")

    monkeypatch.setattr(resources, "copy_workbooks", fail)
    assert cli.main(["workbooks", str(tmp_path / "w")]) == 3
    assert capsys.readouterr().err.strip() == "error: what to do"


def test_cli_lets_a_bug_raise(monkeypatch, tmp_path):
    from vrs_helpers import resources
    from vrs_helpers.app import cli

    def bug(*args, **kwargs):
        raise KeyError("a bug, not bad input")

    monkeypatch.setattr(resources, "copy_workbooks", bug)
    with pytest.raises(KeyError):
        cli.main(["workbooks", str(tmp_path / "w")])
