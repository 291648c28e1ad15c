"""Every bad input of tests/app/bad_inputs.py (issue 29): `vrs analyze` exits 2 with a message that says what to do,
before any analysis, no traceback, and a previous report in --out stays as it was."""

import os
import tempfile

import pytest
from bad_inputs import CASES, run_case

from vrs_helpers.app import cli


@pytest.mark.parametrize("name, maker, code, phrase", CASES, ids=[c[0] for c in CASES])
def test_bad_input_exits_2_keeps_the_report(tmp_path, capsys, monkeypatch, name, maker, code, phrase):
    if "read-only" in name and not os.path.isdir("/sys"):
        pytest.skip("no /sys on this system")
    monkeypatch.chdir(tmp_path)
    private = tmp_path / "tmp"   # a private TMPDIR: nothing of the run may be left in it (issue 37)
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    args = maker(tmp_path)
    out = tmp_path / "report"
    if "--out" not in args:
        out.mkdir()
        (out / "summary.json").write_text('{"previous": true}')
        args += ["--out", str(out)]
    assert cli.main(["analyze", *args]) == code
    err = capsys.readouterr().err
    assert phrase in err and "Traceback" not in err, err
    if out.exists():
        assert [p.name for p in out.iterdir()] == ["summary.json"]
        assert (out / "summary.json").read_text() == '{"previous": true}'
    assert not list(private.iterdir()), list(private.iterdir())   # no work folder, socket or connection file


def test_a_case_in_a_new_process_has_no_traceback(tmp_path):
    """One case as a user runs it (a new process): exit 2, one line, no traceback."""
    huge = next(maker for name, maker, _, _ in CASES if name == "scores of 1e300")
    code, err, last = run_case(huge, tmp_path)
    assert code == 2 and "Traceback" not in err and last.startswith("error: ")
