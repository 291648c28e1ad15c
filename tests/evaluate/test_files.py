"""Files as users hand them over (issue 37): run and log folders that are links, compressed tables and logs,
files that are not UTF-8 text, lm-eval results without their samples."""

import bz2
import gzip
import lzma
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vrs_helpers.evaluate.files import find_files
from vrs_helpers.evaluate.logs.readers import LogFormatError, load_eval_logs
from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_every_eval_ever, write_lm_eval
from vrs_helpers.evaluate.tables.scores import InputError, load_scores

needs_links = pytest.mark.skipif(os.name == "nt", reason="symbolic links need privileges on Windows")


def _table(n_item=10):
    rng = np.random.default_rng(1)
    return pd.DataFrame([{"system": s, "seed": str(r), "item": f"i{i}", "score": float(rng.normal())}
                         for s in ("A", "B") for r in range(3) for i in range(n_item)])


# ------------------------------------------------------------------------------------------- links to folders

@needs_links
def test_find_files_follows_links_to_folders_and_ends_loops(tmp_path):
    (tmp_path / "store" / "deep").mkdir(parents=True)
    (tmp_path / "store" / "deep" / "b.log").write_text("b")
    (tmp_path / "store" / "a.log").write_text("a")
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "real" / "c.log").write_text("c")
    (root / "real" / "c.txt").write_text("not a log")
    os.symlink(tmp_path / "store", root / "linked")            # a run folder that is a link
    os.symlink(root, root / "real" / "up")                     # a loop: back to the root
    os.symlink(tmp_path / "nowhere", root / "broken")          # a broken link
    os.symlink(tmp_path / "store" / "a.log", root / "file.log")   # a link to a file
    got = find_files(root, "*.log")
    want = [root / "file.log", root / "linked" / "a.log", root / "linked" / "deep" / "b.log",
            root / "real" / "c.log"]
    assert got == sorted(want)
    assert set(find_files(root)) == set(want) | {root / "real" / "c.txt"}


@needs_links
def test_log_folders_that_are_links_are_read(tmp_path):
    """lm-eval runs of which all but one are links to folders elsewhere: every file is read, as from the real
    folder (Path.rglob skipped the links: 4 of 12 files were read, in silence), and a loop does not hang."""
    real = tmp_path / "real"
    write_lm_eval(simulate_binary(seed=3, tasks=("arith", "logic"), items=20, runs=3), real)
    runs = sorted(p for p in real.iterdir())
    assert [p.name for p in runs] == ["seed1", "seed2", "seed3"]
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copytree(runs[0], logs / runs[0].name)
    for run in runs[1:]:
        os.symlink(run, logs / run.name)
    os.symlink(logs, logs / "loop")
    want, got = load_eval_logs(real), load_eval_logs(logs)
    assert len(got.description.files) == 2 * 3 * 2 == len(want.description.files)   # systems x runs x tasks
    assert got.description.runs == want.description.runs == {s: {"arith": 3, "logic": 3}
                                                             for s in ("model-a", "model-b")}
    key = ["system", "task", "run", "item"]
    pd.testing.assert_frame_equal(got.table.sort_values(key).reset_index(drop=True),
                                  want.table.sort_values(key).reset_index(drop=True))


@needs_links
def test_a_run_folder_pattern_reads_runs_that_are_links(tmp_path):
    df = _table()
    store = tmp_path / "store"
    for (s, r), part in df.groupby(["system", "seed"]):
        (store / s / f"seed={r}").mkdir(parents=True)
        part[["item", "score"]].to_csv(store / s / f"seed={r}" / "scores.tsv", sep="\t", index=False)
    (tmp_path / "runs").mkdir()
    os.symlink(store / "A", tmp_path / "runs" / "A")
    shutil.copytree(store / "B", tmp_path / "runs" / "B")
    got = load_scores(str(tmp_path / "runs/{system}/seed={seed}/scores.tsv"))
    assert len(got) == len(df) and sorted(got["system"].astype(str).unique()) == ["A", "B"]


# ------------------------------------------------------------------------------------------- compressed files

def _compress(path: Path, kind: str) -> Path:
    data = path.read_bytes()
    out = path.with_name(path.name + kind)
    if kind == ".zip":
        with zipfile.ZipFile(out, "w") as z:
            z.writestr(path.name, data)
    else:
        out.write_bytes({".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[kind](data))
    path.unlink()
    return out


@pytest.mark.parametrize("kind", [".gz", ".bz2", ".xz", ".zip"])
@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".tsv", ".txt"])
def test_compressed_score_tables_are_read(tmp_path, suffix, kind):
    df = _table()
    path = tmp_path / f"scores{suffix}"
    if suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    elif suffix == ".txt":
        path.write_text("\n".join(repr(v) for v in df["score"]) + "\n")
    else:
        df.to_csv(path, sep="\t" if suffix == ".tsv" else ",", index=False)
    got = load_scores(_compress(path, kind))
    if suffix == ".txt":   # a plain score file: one score per line, the item its line number
        assert got["score"].tolist() == df["score"].tolist() and got["item"].tolist() == list(range(1, 61))
        return
    got["seed"] = got["seed"].astype(str)
    pd.testing.assert_frame_equal(got[df.columns], df, check_dtype=False)


def test_a_zip_of_several_files_is_named(tmp_path):
    with zipfile.ZipFile(tmp_path / "scores.csv.zip", "w") as z:
        z.writestr("a.csv", "x\n1\n")
        z.writestr("b.csv", "x\n2\n")
    with pytest.raises(InputError, match="zip archive of 2 files.*Unpack it"):
        load_scores(tmp_path / "scores.csv.zip")


def test_compressed_logs_are_read(tmp_path):
    write_lm_eval(simulate_binary(seed=3, tasks=("arith",), items=20, runs=1), tmp_path / "plain")
    shutil.copytree(tmp_path / "plain", tmp_path / "packed")
    for p in [p for p in (tmp_path / "packed").rglob("*") if p.suffix in (".json", ".jsonl")]:
        _compress(p, ".gz")
    want, got = load_eval_logs(tmp_path / "plain"), load_eval_logs(tmp_path / "packed")
    assert len(got.description.files) == 2
    pd.testing.assert_frame_equal(got.table, want.table)
    pd.testing.assert_frame_equal(got.reported.drop(columns="source"), want.reported.drop(columns="source"))
    write_every_eval_ever(simulate_binary(seed=4, items=10), tmp_path / "eee")
    for p in list((tmp_path / "eee").rglob("*.jsonl")):
        _compress(p, ".gz")
    eee = load_eval_logs(tmp_path / "eee")
    assert eee.description.format == "every-eval-ever" and eee.description.items == {"arith": 10}


# ------------------------------------------------------------------------------------------- not UTF-8 text

def test_a_latin1_csv_names_the_line_and_byte(tmp_path):
    path = tmp_path / "scores.csv"
    lines = ["system,item,score", "A,i1,0.5", "A,i2,0.25", "Syst\xe8me,i1,0.75"]   # è at line 4, byte 5
    path.write_bytes("\n".join(lines).encode("latin-1") + b"\n")
    with pytest.raises(InputError, match="line 4, byte 5 of the line: 0xe8 is not UTF-8.*'è'.*Save it as UTF-8"):
        load_scores(path)
    with pytest.raises(InputError, match="line 4, byte 5"):
        load_scores(_compress(path, ".gz"))


def test_latin1_json_lines_and_plain_scores_name_the_line(tmp_path):
    (tmp_path / "s.jsonl").write_bytes(b'{"a": 1}\n{"a": 2, "b": "\xe9"}\n')   # é: byte 16 of line 2
    with pytest.raises(InputError, match="line 2, byte 16 of the line: 0xe9"):
        load_scores(tmp_path / "s.jsonl")
    (tmp_path / "s.txt").write_bytes(b"0.5\n\xb50.25\n")
    with pytest.raises(InputError, match="line 2, byte 1 of the line: 0xb5"):
        load_scores(tmp_path / "s.txt")


@pytest.mark.parametrize("name, head, phrase", [
    ("scores.xlsx", b"PK\x03\x04\x14\x00", "is a spreadsheet \\(.xlsx\\).*Save it as CSV \\(UTF-8\\)"),
    ("scores.ods", b"PK\x03\x04\x14\x00", "is a spreadsheet \\(.ods\\)"),
    ("scores.xls", b"\xd0\xcf\x11\xe0\xa1\xb1", "is a spreadsheet \\(.xls\\)"),
    ("scores.csv", b"PK\x03\x04\x14\x00", "spreadsheet \\(Excel's file format\\).*CSV \\(UTF-8\\)"),  # renamed
    ("scores.csv", "system,item,score\nA,i1,0.5\n".encode("utf-16"), "UTF-16.*CSV \\(UTF-8\\)"),
])
def test_spreadsheets_and_utf16_say_save_as_utf8_csv(tmp_path, name, head, phrase):
    (tmp_path / name).write_bytes(head + b"\x00" * 64)
    with pytest.raises(InputError, match=phrase):
        load_scores(tmp_path / name)


def test_not_utf8_logs_name_the_line(tmp_path):
    write_lm_eval(simulate_binary(seed=3, tasks=("arith",), items=20, runs=1), tmp_path)
    samples = sorted(tmp_path.glob("model-a/samples_*.jsonl"))[0]
    samples.write_bytes(samples.read_bytes() + b'{"doc_id": "\xff"}\n')
    with pytest.raises(LogFormatError, match="line 21, byte 13 of the line: 0xff is not UTF-8"):
        load_eval_logs(tmp_path)


# ------------------------------------------------------------------------------------------- lm-eval without samples

def test_lm_eval_results_without_samples_say_log_samples(tmp_path):
    """A run written without --log_samples has a results file and no samples: an error naming it and the fix (it was
    left out in silence), whether beside runs with samples or alone."""
    write_lm_eval(simulate_binary(seed=3, tasks=("arith",), items=20, runs=1), tmp_path)
    for p in tmp_path.glob("model-b/samples_*.jsonl"):
        p.unlink()
    results_b = sorted(tmp_path.glob("model-b/results_*.json"))
    assert len(results_b) == 1
    with pytest.raises(LogFormatError, match=f"1 lm-eval results file.*{results_b[0].name}.*--log_samples"):
        load_eval_logs(tmp_path)
    for p in tmp_path.glob("model-a/samples_*.jsonl"):
        p.unlink()
    with pytest.raises(LogFormatError, match="2 lm-eval results file.*--log_samples"):
        load_eval_logs(tmp_path)
    with pytest.raises(LogFormatError, match="no samples_<task>_.*re-run lm_eval with --log_samples"):
        load_eval_logs(results_b[0])


@pytest.mark.parametrize("name, text", [("s.csv", "system,item,score\nA,i1,0.5\n"), ("s.jsonl", '{"a": 1}\n'),
                                        ("s.txt", "0.5\n0.7\n")])
def test_a_utf8_byte_order_mark_is_read_as_utf8(tmp_path, name, text):
    """Excel's 'CSV UTF-8' - what the messages above advise - starts with a byte-order mark: read as UTF-8."""
    (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + text.encode())
    got = load_scores(tmp_path / name)
    columns = {"s.csv": ["system", "item", "score"], "s.jsonl": ["a"], "s.txt": ["item", "score"]}
    assert list(got.columns) == columns[name]
    assert got.iloc[0, -1] == {"s.csv": 0.5, "s.jsonl": 1, "s.txt": 0.5}[name]
