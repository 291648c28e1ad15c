"""Issue 50 (7): names from the data reach the terminal as text. A model named ``A\\x1b[1A\\x1b[2KALL GOOD`` erased
the verdict line above it, ``\\x1b]0;...\\x07`` set the terminal's title, a line feed in a model name split a line
into two that looked like the program's own. Everything ``vrs`` prints goes through one helper
(:mod:`vrs_helpers.app.console`) that writes every C0/C1 control character ``repr``-style: the printed lines hold no
raw control character but the line feeds that end them, and each name is there, escaped."""

from __future__ import annotations

import contextlib
import io
import re
import unicodedata

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from vrs_helpers.app import cli

RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")   # all but the line feed
CONTROLS = [chr(c) for c in [*range(32), *range(127, 160)]] + ["\u202e", "\u2066"]
ATTACKS = ["A\x1b[1A\x1b[2KALL GOOD", "\x1b]0;owned\x07", "two\nlines", "\r\x1b[2Kerased", "bell\x07", "\x9b31m",
           "\u202eevil", "tab\there"]
# any text, with control characters mixed in
HOSTILE = st.lists(st.one_of(st.sampled_from(CONTROLS), st.sampled_from(ATTACKS), st.text(max_size=4)),
                   min_size=1, max_size=6).map("".join)


def _clean(text: str) -> None:
    """No raw control character in ``text`` but line feeds (which end the printed lines)."""
    found = RAW_CONTROL.findall(text)
    assert not found, (found, text[:300])


def _oracle(text: str) -> str:
    """What a line must show, by Unicode's categories (independent of the helper's pattern): each control
    character (Cc) and bidirectional override as ``repr`` writes it, every other character as it is."""
    return "".join(repr(c)[1:-1] if unicodedata.category(c) == "Cc" or c in "\u202a\u202b\u202c\u202d\u202e"
                   "\u2066\u2067\u2068\u2069" else c for c in text)


@given(parts=st.lists(HOSTILE, min_size=1, max_size=5))
@settings(max_examples=300, deadline=None)
def test_every_printed_line_is_free_of_control_characters(parts):
    from vrs_helpers.app.console import say

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        say(*parts)
        say(*parts, err=True)
    for text in (out.getvalue(), err.getvalue()):
        _clean(text)
        assert text.endswith("\n") and text.count("\n") == len(parts)   # one line per part: none split a line
        assert text.splitlines() == [_oracle(part) for part in parts]


@pytest.mark.parametrize("char", CONTROLS)
def test_each_control_character_is_written_as_its_repr(char):
    from vrs_helpers.literal import console_text

    assert console_text(f"a{char}b") == f"a{repr(char)[1:-1]}b"
    assert console_text("plain text: é ∑ 名前") == "plain text: é ∑ 名前"


def test_the_control_sees_raw_controls():
    """Control: the check fails on what print() would have written."""
    with pytest.raises(AssertionError):
        _clean("A\x1b[1A\x1b[2KALL GOOD")


# ------------------------------------------------------------------------------------------- through vrs analyze

def _logs(folder, models, tasks, accuracy=(0.6, 0.7)):
    from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_lm_eval

    write_lm_eval(simulate_binary(seed=3, systems=models, tasks=tasks, items=30, runs=2, run_sd=0.3,
                                  accuracy=accuracy), folder)
    return folder


def _printed(capsys) -> str:
    out, err = capsys.readouterr()
    return out + err


MODEL = HOSTILE.filter(lambda s: s.strip() and "\x00" not in s)
TASK = HOSTILE.map(lambda s: re.sub("[\x00\n/]", "", s)).filter(lambda s: s.strip() and s.strip(".") != "")


@settings(max_examples=5, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(models=st.lists(MODEL, min_size=2, max_size=2, unique_by=lambda s: " ".join(s.casefold().split())),
       task=TASK)
@example(models=["A\x1b[1A\x1b[2KALL GOOD", "\x1b]0;owned\x07B\nsecond line"], task="arith\x1b[31m")
def test_hostile_model_and_task_names_are_escaped_on_the_console(tmp_path_factory, capsys, models, task):
    """`vrs analyze LOGDIR` prints what it read (models, tasks, files) and, for a --baseline that is not a model,
    an error listing the models: every line free of control characters, every model's name in it escaped."""
    folder = tmp_path_factory.mktemp("logs")
    logs = _logs(folder / "logs", models, (task,))
    code = cli.main(["analyze", str(logs), "--baseline", "no such model", "--out", str(folder / "report")])
    printed = _printed(capsys)
    assert code == 2, printed
    _clean(printed)
    for name in models:
        assert _oracle(name) in printed, (name, printed)
    assert _oracle(task) in printed


def test_verdicts_of_hostile_names_are_escaped(tmp_path, capsys):
    """A full run: what was read names the models, the verdict the task; none of them erases, recolours or splits
    a line."""
    models = ["A\x1b[1A\x1b[2KALL GOOD", "\x1b]0;owned\x07B\nsecond line"]
    logs = _logs(tmp_path / "logs", models, ("arith\x1b[31m",), accuracy=(0.2, 0.95))   # a clear difference
    assert cli.main(["analyze", str(logs), "--test", "chisq", "--out", str(tmp_path / "report")]) == 0
    printed = _printed(capsys)
    _clean(printed)
    verdicts = [line for line in printed.splitlines() if line.startswith("Task ")]
    assert verdicts and all(line.startswith("Task arith\\x1b[31m: the systems differ") for line in verdicts), printed
    assert all(_oracle(m) in printed for m in models) and "second line" not in printed.split("\n")


def test_a_score_table_with_hostile_system_names(tmp_path, capsys):
    rng = np.random.default_rng(0)
    systems = ["A\x1b[1A\x1b[2KALL GOOD", "B\r\nInjected: the systems differ"]
    pd.DataFrame([{"system": s, "seed": r, "item": f"i{i}", "score": rng.normal() + k}
                  for k, s in enumerate(systems) for r in range(3) for i in range(20)]).to_csv(
        tmp_path / "scores.csv", index=False)
    code = cli.main(["analyze", str(tmp_path / "scores.csv"), "--response", "score", "--system", "system", "--item",
                     "item", "--replication", "seed", "--n-resamples", "99", "--out", str(tmp_path / "report")])
    printed = _printed(capsys)
    assert code == 0, printed
    _clean(printed)
    assert _oracle(systems[1]) in printed and not any(line.startswith("Injected") for line in
                                                           printed.splitlines())


@pytest.mark.parametrize("argv", [["analyze", "x.csv", "--items", "\x1b[2Jwiped"],
                                  ["analyze", "no\x1b]0;owned\x07such.csv", "--response", "s", "--item", "i"]])
def test_argument_errors_and_file_names_are_escaped(tmp_path, capsys, argv):
    """argparse quotes the bad value; a missing file is named: both escaped."""
    try:
        code = cli.main([*argv, "--out", str(tmp_path / "report")])
    except SystemExit as exc:
        code = exc.code
    printed = _printed(capsys)
    assert code == 2, printed
    _clean(printed)
    assert "\\x1b" in printed
