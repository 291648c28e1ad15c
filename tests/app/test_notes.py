"""app.notes: warnings inside the block become one plain-text output, nothing reaches stderr."""

import warnings

import pytest

import vrs_helpers.app.notes as notes_module
from vrs_helpers.app.notes import notes


@pytest.fixture
def shown(monkeypatch):
    captured = []
    monkeypatch.setattr(notes_module, "_display", captured.append)
    return captured


def test_warnings_become_one_note_each(shown, capsys):
    with notes() as caught:
        warnings.warn("boundary (singular) fit: the variance of rater is zero", UserWarning, stacklevel=1)
        warnings.warn("boundary (singular) fit: the variance of rater is zero", UserWarning, stacklevel=1)  # a repeat
        warnings.warn("random factors a and b are aliased", RuntimeWarning, stacklevel=1)
    assert len(caught) == 3
    assert shown == [{"text/plain": "note: boundary (singular) fit: the variance of rater is zero\n"
                                    "note: boundary (singular) fit: the variance of rater is zero\n"
                                    "note: random factors a and b are aliased"}]
    assert capsys.readouterr().err == ""


def test_no_warning_no_output_and_errors_propagate(shown):
    with notes():
        pass
    assert shown == []
    with pytest.raises(ValueError, match="bad"), notes(prefix="* "):
        warnings.warn("before the error", stacklevel=1)
        raise ValueError("bad")
    assert shown == [{"text/plain": "* before the error"}]
    # outside the block warnings behave as before
    with pytest.warns(UserWarning, match="outside"):
        warnings.warn("outside", stacklevel=1)
