"""Issue 54: summary.json with many systems keeps the pairs among the best-ranked systems (at most 1,225 per
reading) and says so; the sentences never say "p = 0"."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from vrs_helpers.evaluate.presentation.pairs_bound import MAX_SUMMARY_PAIRS, bound_pairs, kept_systems
from vrs_helpers.outcomes import P_FLOOR, p_is


def _summary(k: int) -> dict:
    names = [f"sys {i} vs x" if i == 3 else f"m{i:03d}" for i in range(k)]  # a name holding " vs "
    ranking = [{"system": n} for n in reversed(names)]  # best first: the last names
    pairs = [{"contrast": f"{a} - {b}", "p_value": 0.5} for a, b in itertools.combinations(names, 2)]
    readings = [{"comparison": "all systems", "reading": "GLRT"}] + [
        {"comparison": f"{b} vs {a}", "reading": "Tukey"} for a, b in itertools.combinations(names, 2)]
    return {"systems": names, "ranking": ranking, "contrasts": pairs, "pairs": list(pairs), "readings": readings}


def test_below_the_bound_unchanged():
    s = _summary(50)
    assert bound_pairs(s) is s


def test_above_the_bound_the_best_ranked():
    s = _summary(60)
    out = bound_pairs(s)
    keep = kept_systems(s["ranking"])
    assert keep == [r["system"] for r in s["ranking"][:50]]
    assert len(out["contrasts"]) == len(out["pairs"]) == 1225 <= MAX_SUMMARY_PAIRS
    assert all(set(r["contrast"].split(" - ")) <= set(keep) for r in out["contrasts"])
    assert out["readings"][0]["comparison"] == "all systems"
    assert len(out["readings"]) == 1 + 1225
    assert out["pairs_in_summary"] == {"kept": 1225, "total": 1770, "file": "pairs.csv",
                                       "rule": "the pairs among the 50 best-ranked systems (at most 1225 pairs per "
                                               "reading)"}
    assert len(s["contrasts"]) == 1770  # the input is not changed


@given(st.floats(min_value=0.0, max_value=1.0))
def test_p_is_never_zero(p):
    text = "p " + p_is(p)
    assert text != "p = 0"
    if p < P_FLOOR:
        assert text == f"p < {P_FLOOR:g}"
    else:
        assert text.startswith("p = ") and float(text[4:]) > 0
