"""The light input checks of `vrs analyze` (evaluate/precheck.py, issue 42): what they report is what the full read
reports, what they cannot judge passes, and `vrs analyze` answers a typo before its report kernel starts."""

import gzip
import json

import pandas as pd
import pytest

from vrs_helpers.app import cli
from vrs_helpers.evaluate import precheck
from vrs_helpers.evaluate.tables.scores import InputError, load_scores, validate

ROLES = [("response", "score"), ("system", "system"), ("item", "item")]
TABLE = pd.DataFrame({"system": ["A", "A", "B", "B"], "item": [1, 2, 1, 2], "score": [0.1, 0.4, 0.3, 0.5]})


def _full_message(path, roles):
    with pytest.raises(InputError) as full:
        df = load_scores(path)
        validate(df, response=roles[0][1], system=roles[1][1], item=roles[2][1])
    return str(full.value)


@pytest.mark.parametrize("name, write", [
    ("scores.csv", lambda p: TABLE.to_csv(p, index=False)),
    ("scores.tsv", lambda p: TABLE.to_csv(p, index=False, sep="\t")),
    ("semicolons.csv", lambda p: TABLE.to_csv(p, index=False, sep=";")),
    ("scores.csv.gz", lambda p: TABLE.to_csv(p, index=False)),
    ("scores.parquet", lambda p: TABLE.to_parquet(p)),
    ("scores.jsonl", lambda p: TABLE.to_json(p, orient="records", lines=True)),
])
def test_a_misspelt_column_gives_the_full_reads_message(tmp_path, name, write):
    path = tmp_path / name
    write(path)
    precheck.check_table_input(path, ROLES)   # a good table passes
    bad = [("response", "scor"), *ROLES[1:]]
    with pytest.raises(InputError) as quick:
        precheck.check_table_input(path, bad)
    assert str(quick.value) == _full_message(path, bad)
    assert "Did you mean 'score'" in str(quick.value)


def test_a_missing_file_and_a_pattern_without_match_are_the_full_reads_errors(tmp_path):
    for data in (tmp_path / "nofile.csv", str(tmp_path / "runs/{system}/scores.csv")):
        with pytest.raises(InputError) as quick:
            precheck.check_table_input(data, ROLES)
        with pytest.raises(InputError) as full:
            load_scores(data)
        assert str(quick.value) == str(full.value)


def test_a_pattern_checks_its_first_file_with_the_fields_as_columns(tmp_path):
    for s in "AB":
        (tmp_path / s).mkdir()
        TABLE[TABLE.system == s].drop(columns="system").to_csv(tmp_path / s / "scores.csv", index=False)
    pattern = str(tmp_path / "{system}" / "scores.csv")
    precheck.check_table_input(pattern, ROLES)
    with pytest.raises(InputError, match="'seed' is not in the data"):
        precheck.check_table_input(pattern, [*ROLES, ("replication", "seed")])


def test_unreadable_files_and_two_roles_are_reported(tmp_path):
    binary = tmp_path / "scores.csv"
    binary.write_bytes(b"\xff\xfe\x00\x81score\n")   # a UTF-16 byte-order mark: the message the full read gives
    with pytest.raises(InputError, match=r"is UTF-16 text .*not UTF-8\. Save it as CSV \(UTF-8\)"):
        precheck.check_table_input(binary, ROLES)
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"syst\xe8m,seed,item,score\nA,1,i1,0.5\n")   # 'syst' is 4 bytes: the 5th is not UTF-8
    with pytest.raises(InputError, match="line 1, byte 5 of the line: 0xe8 is not UTF-8"):
        precheck.check_table_input(latin, ROLES)
    bad_json = tmp_path / "scores.jsonl"
    bad_json.write_text("{not json\n")
    with pytest.raises(InputError, match="line 1: not valid JSON"):
        precheck.check_table_input(bad_json, ROLES)
    not_parquet = tmp_path / "scores.parquet"
    not_parquet.write_text("a,b\n")
    with pytest.raises(InputError, match="Could not read"):
        precheck.check_table_input(not_parquet, ROLES)
    good = tmp_path / "good.csv"
    TABLE.to_csv(good, index=False)
    with pytest.raises(InputError, match="two roles"):
        precheck.check_table_input(good, [*ROLES, ("replication", "item")])


def test_what_a_header_cannot_tell_passes(tmp_path):
    """Left to the full read: repeated or empty header names (pandas renames them), zip archives, several
    delimiters, a JSON-lines column that only later records have, a folder."""
    (tmp_path / "dup.csv").write_text("score,score,item\n1,2,3\n")
    (tmp_path / "empty.csv").write_text("score,,item\n1,2,3\n")
    (tmp_path / "several.csv").write_text("score;item\tsystem\n1;2\t3\n")
    with gzip.open(tmp_path / "later.jsonl.gz", "wt") as f:
        f.write("{}\n")
    (tmp_path / "later.jsonl").write_text(json.dumps({"score": 1, "item": 1}) + "\n" +
                                          json.dumps({"score": 1, "item": 2, "system": "A"}) + "\n")
    for name in ("dup.csv", "empty.csv", "several.csv", "later.jsonl"):
        precheck.check_table_input(tmp_path / name, ROLES)
    precheck.check_table_input(tmp_path, ROLES)


def test_vrs_analyze_answers_a_typo_before_any_analysis(tmp_path, monkeypatch, capsys):
    import vrs_helpers.evaluate.analysis as analysis

    def no_analysis(*args, **kwargs):
        raise AssertionError("the analysis was started for bad input")

    monkeypatch.setattr(analysis, "analyze", no_analysis)
    monkeypatch.setattr(analysis, "analyze_logs", no_analysis)
    TABLE.to_csv(tmp_path / "scores.csv", index=False)
    out = ["--out", str(tmp_path / "report")]
    cases = [([str(tmp_path / "nofile.csv"), "--response", "score", "--item", "item"], "No file at"),
             ([str(tmp_path / "nofile.csv")], "No file at"),
             ([str(tmp_path / "scores.csv"), "--response", "scor", "--item", "item"], "Did you mean 'score'"),
             ([str(tmp_path / "scores.csv"), "--response", "score", "--item", "item", "--alpha", "5"],
              "alpha must be between 0 and 1"),
             ([str(tmp_path / "scores.csv"), "--response", "score", "--item", "item", "--n-sim", "0"],
              "n_sim must be a positive integer"),
             ([str(tmp_path / "scores.csv"), "--response", "score", "--item", "item", "--test", "chisq"],
              "needs replication columns"),
             ([str(tmp_path), "--dask", "local"], "evaluation logs are read in memory")]
    for args, phrase in cases:
        assert cli.main(["analyze", *args, *out]) == 2
        assert phrase in capsys.readouterr().err
