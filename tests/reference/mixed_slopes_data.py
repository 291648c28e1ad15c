"""Simulated data for the random-slope and nested-syntax checks against lme4 (tests/reference/mixed_slopes.R,
tests/mixed/test_mixed_slopes.py).

Command (writes one CSV per data set into DIR, then the lme4 reference values):
    python tests/reference/mixed_slopes_data.py DIR &&
    Rscript tests/reference/mixed_slopes.R DIR > tests/reference/mixed_slopes_lme4.json

Data sets (``make(name)``):
- ``sleep_like``: 24 subjects x days 0-9 x two conditions ``grp`` (A/B, within subject), a correlated random
  intercept and slope in ``x`` (the day) by subject; about 15% of the rows dropped at random (unbalanced).
- ``crossed_slopes``: 40 items x 12 raters (about 10% of the pairs dropped), a continuous ``x`` per row, a 3-level
  item factor ``f``, a by-item random intercept and slope in ``x`` (correlated) and a rater random intercept.
- ``nested``: 12 schools with 2-4 classes each, class labels "c1".."c4" reused across schools (so ``(1|class)`` is
  not ``(1|school:class)``), a numeric ``x``, random intercepts for school and school:class and a small random slope
  in ``x`` by school.
- ``constant_slope``: 20 subjects x 15 rows, a covariate ``z`` with one value per subject (constant within every
  group; a bad random slope), ``x`` varying within subject. Used only for the bad-input tests (no lme4 fit).
"""
import sys
from pathlib import Path

import numpy as np
import pandas as pd

NAMES = ("sleep_like", "crossed_slopes", "nested", "constant_slope")


def _labels(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i + 1:02d}" for i in range(n)]


def _sleep_like(seed: int = 20261201) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n_subj, days = 24, np.arange(10)
    sd0, sd1, rho = 24.0, 6.0, 0.35
    cov = np.array([[sd0**2, rho * sd0 * sd1], [rho * sd0 * sd1, sd1**2]])
    b = rng.multivariate_normal([0.0, 0.0], cov, size=n_subj)
    subj = np.repeat(np.arange(n_subj), 2 * len(days))
    x = np.tile(np.repeat(days, 2), n_subj).astype(float)
    grp = np.tile(["A", "B"], n_subj * len(days))
    y = 250.0 + 10.0 * x + 8.0 * (grp == "B") + b[subj, 0] + b[subj, 1] * x + rng.normal(0.0, 20.0, subj.size)
    keep = rng.uniform(0, 1, subj.size) >= 0.15
    subjects = np.array(_labels("s", n_subj))
    return pd.DataFrame({"subject": subjects[subj], "x": x, "grp": grp, "y": y})[keep].reset_index(drop=True)


def _crossed_slopes(seed: int = 20261202) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n_item, n_rater = 40, 12
    sd0, sd1, rho = 1.0, 0.5, -0.4
    cov = np.array([[sd0**2, rho * sd0 * sd1], [rho * sd0 * sd1, sd1**2]])
    b_item = rng.multivariate_normal([0.0, 0.0], cov, size=n_item)
    b_rater = rng.normal(0.0, 0.7, n_rater)
    item = np.repeat(np.arange(n_item), n_rater)
    rater = np.tile(np.arange(n_rater), n_item)
    f_item = np.array(["a", "b", "c"])[np.arange(n_item) % 3]
    f = f_item[item]
    x = rng.normal(0.0, 1.0, item.size)
    effect = {"a": 0.0, "b": 0.4, "c": -0.3}
    y = (2.0 + np.array([effect[v] for v in f]) + 0.6 * x + b_item[item, 0] + b_item[item, 1] * x + b_rater[rater]
         + rng.normal(0.0, 0.8, item.size))
    keep = rng.uniform(0, 1, item.size) >= 0.10
    return pd.DataFrame({"item": np.array(_labels("i", n_item))[item], "rater": np.array(_labels("r", n_rater))[rater],
                         "f": f, "x": x, "y": y})[keep].reset_index(drop=True)


def _nested(seed: int = 20261203) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n_school = 12
    b_school = rng.normal(0.0, 1.0, n_school)
    s_school = rng.normal(0.0, 0.3, n_school)
    rows = []
    for s in range(n_school):
        for c in range(int(rng.integers(2, 5))):  # 2-4 classes, labels c1.. reused in every school
            b_class = rng.normal(0.0, 0.6)
            m = int(rng.integers(14, 27))
            x = rng.normal(0.0, 1.0, m)
            y = 5.0 + 0.5 * x + b_school[s] + s_school[s] * x + b_class + rng.normal(0.0, 1.0, m)
            rows.append(pd.DataFrame({"school": f"s{s + 1:02d}", "class": f"c{c + 1}", "x": x, "y": y}))
    return pd.concat(rows, ignore_index=True)


def _constant_slope(seed: int = 20261204) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n_subj, per = 20, 15
    subj = np.repeat(np.arange(n_subj), per)
    z = np.round(rng.normal(0.0, 1.0, n_subj), 3)[subj]  # one value per subject
    x = rng.normal(0.0, 1.0, subj.size)
    y = 1.0 + 0.5 * x + 0.3 * z + rng.normal(0.0, 0.8, n_subj)[subj] + rng.normal(0.0, 1.0, subj.size)
    return pd.DataFrame({"subject": np.array(_labels("s", n_subj))[subj], "x": x, "z": z, "y": y})


def make(name: str) -> pd.DataFrame:
    """The simulated data set ``name`` (one of NAMES); deterministic."""
    makers = {"sleep_like": _sleep_like, "crossed_slopes": _crossed_slopes, "nested": _nested,
              "constant_slope": _constant_slope}
    if name not in makers:
        raise KeyError(f"unknown data set {name!r}; one of {NAMES}")
    return makers[name]()


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in NAMES:
        make(name).to_csv(out / f"{name}.csv", index=False, float_format="%.17g")
