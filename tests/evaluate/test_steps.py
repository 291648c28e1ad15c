"""evaluate.steps.safe_names: any column names (Unicode letters, markup, TeX) become distinct names the formula
parser accepts (issue 37: a column named '3ú' failed the analysis)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from vrs_helpers.evaluate.steps import safe_names
from vrs_helpers.mixed.formula import parse


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
