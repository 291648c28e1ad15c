"""evaluate.steps.safe_names: any column names (Unicode letters, markup, TeX) become distinct names the formula
parser accepts (issue 37: a column named '3ú' failed the analysis); the answer's pointer to the power planning."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from vrs_helpers.evaluate.tables.steps import safe_names
from vrs_helpers.mixed.structure.formula import parse


@given(st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=6, unique=True))
@settings(max_examples=300, deadline=None)
def test_safe_names_parse_and_stay_distinct(columns):
    names = safe_names(columns)
    assert list(names) == columns
    assert len(set(names.values())) == len(columns)
    first = names[columns[0]]
    f = parse(f"{first} ~ {' + '.join(names.values())} + (1|{first})")
    assert f.response == first and f.random_terms[0].group == (first,)


def test_non_ascii_letters_control():
    """'3ú' (a Unicode word character, not an ASCII one) is the case that failed."""
    assert safe_names(["3ú", "é"]) == {"3ú": "c_3_", "é": "_"}


def test_names_with_a_colon_get_the_reliability_of_plain_names():
    """Issue 37: a replication column named 'run:a' (a ':' is also how an interaction component is named) failed
    phi ('Unknown facet(s)'); renamed, the same data give the same phi, levels needed and decision study, under
    the original names."""
    import pandas as pd
    import pytest

    from vrs_helpers.evaluate.analysis import analyze

    ref = __import__("pathlib").Path(__file__).parent.parent / "reference"
    df = pd.read_csv(ref / "own_analysis_two.csv.gz", dtype={"lr": str})
    names = {"seed": "run:a", "item": "ítem:<b>"}
    plain = analyze(df, "score", "system", "item", replications=["seed"], n_resamples=99, items="fixed")
    odd = analyze(df.rename(columns=names), "score", "system", names["item"], replications=[names["seed"]],
                  n_resamples=99, items="fixed")
    assert set(odd.fits.reliability) == set(plain.fits.reliability) and plain.fits.reliability
    for s, p in plain.fits.reliability.items():
        q = odd.fits.reliability[s]
        assert q.phi == pytest.approx(p.phi, rel=1e-9) and q.object == names["item"]
        assert q.n == {names["seed"]: p.n["seed"]}
        assert list(q.terms["component"]) == [names.get(c, c) for c in p.terms["component"]]
        assert odd.fits.runs_needed[s] == {names["seed"]: plain.fits.runs_needed[s]["seed"]}
        assert list(odd.fits.decision[s]["factor"].unique()) == [names["seed"]]
        phis = plain.fits.decision[s]["phi"].to_numpy()
        assert odd.fits.decision[s]["phi"].to_numpy() == pytest.approx(phis, rel=1e-9)
        assert set(odd.fits.variance_components[s].index) == {names["item"], names["seed"], "Residual"}


def test_the_answer_points_to_the_power_planning_only_when_there_is_one():
    """Issue 40 (6): with 0/1 scores there is no power planning (``power`` is empty), so a 'no evidence' answer must
    not send the reader to it; with continuous scores it does."""
    import warnings

    from vrs_helpers.evaluate.analysis import analyze

    rng = np.random.default_rng(6)
    rows = [{"system": s, "seed": r, "item": i, "y": int(rng.random() < 0.6), "z": rng.normal()}
            for s in ("A", "B") for r in range(3) for i in range(40)]
    d = pd.DataFrame(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        binary = analyze(d, "y", "system", "item", replications=["seed"], n_resamples=99, n_sim=19)
        cont = analyze(d, "z", "system", "item", replications=["seed"], n_resamples=99)
    assert not binary.fits.power and "no evidence" in binary.answer and "power planning" not in binary.answer
    assert cont.fits.power and "no evidence" in cont.answer and "(see the power planning)" in cont.answer
