"""Issue 50 (3, 4, 6): hostile or broken input files. A compressed file is read within a bound on its decompressed
size (a bomb is an error saying how to raise the bound, in constant memory); a damaged archive or a JSON line nested
100,000 levels deep is an error naming the file, never a traceback; files of a log folder that cannot be read -
dangling links, link loops and chains, named pipes, devices - and folders not searched (special file systems, a link
to /) are warnings naming each, never left out in silence."""

from __future__ import annotations

import gzip
import lzma
import os
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vrs_helpers.evaluate import files
from vrs_helpers.evaluate.logs.readers import LogFormatError, load_eval_logs
from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_lm_eval
from vrs_helpers.evaluate.tables.scores import InputError, load_scores

needs_posix = pytest.mark.skipif(os.name != "posix", reason="links, named pipes and devices of POSIX")


def _table(rows: int = 2000) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"system": np.tile(["A", "B"], rows // 2), "item": np.repeat([f"i{i}" for i in
                         range(rows // 2)], 2), "score": rng.random(rows).round(6)})


# ------------------------------------------------------------------------------------------- sizes

@pytest.mark.parametrize("text, size", [("1073741824", 1 << 30), ("1G", 1 << 30), ("1GiB", 1 << 30), ("4gb", 4 << 30),
                                        ("500M", 500 << 20), ("1.5G", 3 << 29), ("64k", 64 << 10), ("2e9", 2 * 10**9)])
def test_sizes_are_read_as_bytes(text, size):
    assert files.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "-1G", "0", "lots", "1X", "1 G B"])
def test_a_bad_size_says_the_form(text):
    with pytest.raises(InputError, match="a size must be a positive number of bytes"):
        files.parse_size(text)


# ------------------------------------------------------------------------------------------- decompression bounds

@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zip"])
def test_a_file_that_inflates_beyond_the_bound_is_refused_and_the_bound_can_be_raised(tmp_path, monkeypatch,
                                                                                        suffix):
    """A table of 1.3 MB in every compression: refused under a bound of 1M with a message that says how to raise
    it (before issue 50 there was no bound: a 4.4 GB bomb ran out of memory); read once the bound is raised."""
    text = _table(60_000).to_csv(index=False).encode()
    path = tmp_path / f"scores.csv{suffix}"
    if suffix == ".zip":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("scores.csv", text)
    else:
        path.write_bytes({".gz": gzip.compress, ".bz2": __import__("bz2").compress, ".xz": lzma.compress}[suffix](text))
    monkeypatch.setenv("VRS_MAX_INPUT_BYTES", "1M")
    with pytest.raises(InputError, match=r"inflates beyond 1 MiB.*--max-input-bytes SIZE.*VRS_MAX_INPUT_BYTES"):
        load_scores(path)
    monkeypatch.setenv("VRS_MAX_INPUT_BYTES", "2M")
    assert len(load_scores(path)) == 60_000


def test_a_bomb_is_refused_in_constant_memory_and_at_once(tmp_path):
    """137 MiB of rows in a 21 KB .xz (6,800-fold): refused by the ratio bound after 64 MiB, well under a second and
    without holding the text (the stream is read in 1 MiB pieces); the size bound alone would allow it."""
    import tracemalloc

    squeeze = lzma.LZMACompressor(preset=1)
    parts = [squeeze.compress(b"system,item,score\n")] + [squeeze.compress(b"A,i0,0.5\n" * (1 << 17))
                                                          for _ in range(120)]
    path = tmp_path / "scores.csv.xz"
    path.write_bytes(b"".join(parts) + squeeze.flush())
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(InputError, match="more than 1000 times its compressed size"):
        load_scores(path)
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert seconds < 10 and peak < 32 << 20, (seconds, peak)


def test_a_zip_member_larger_than_the_bound_is_refused_unread(tmp_path, monkeypatch):
    """A zip archive records its member's size: beyond the bound, refused before a byte is inflated."""
    path = tmp_path / "scores.csv.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("scores.csv", b"system,item,score\n" + b"A,i0,0.5\n" * 300_000)
    monkeypatch.setenv("VRS_MAX_INPUT_BYTES", "1M")
    with pytest.raises(InputError, match="inflates beyond 1 MiB"):
        files.open_binary(path).close()


def test_a_gzip_of_nul_bytes_is_binary_data_not_a_traceback(tmp_path):
    """Before issue 50: a csv.Error traceback from the header check (and the run went on)."""
    path = tmp_path / "scores.csv.gz"
    path.write_bytes(gzip.compress(b"\0" * (8 << 20)))
    with pytest.raises(InputError, match="holds binary data \\(a NUL byte at byte 1 of its decompressed text\\)"):
        load_scores(path)
    from vrs_helpers.evaluate.precheck import check_table_input

    check_table_input(path, [("response", "score")])   # the header check leaves it to the read: no csv.Error


def test_a_samples_file_with_a_gigantic_line_is_refused(tmp_path, monkeypatch):
    """An lm-eval samples file whose line is longer than 1/16 of the bound: an error naming the file and line
    (before issue 50: the line was read whole, 4 GB, MemoryError)."""
    write_lm_eval(simulate_binary(seed=3, tasks=("arith",), items=20, runs=1), tmp_path / "logs")
    samples = sorted((tmp_path / "logs").glob("model-a/samples_*.jsonl"))[0]
    huge = '{"doc_id": 99, "doc": "' + "x" * (1 << 20) + '"}\n'
    samples.with_name(samples.name + ".gz").write_bytes(gzip.compress((samples.read_text() + huge).encode()))
    samples.unlink()
    monkeypatch.setenv("VRS_MAX_INPUT_BYTES", "4M")   # lines up to 256 KiB
    with pytest.raises(LogFormatError, match=r"samples_arith.*\.jsonl\.gz, line 21: longer than 256 KiB"):
        load_eval_logs(tmp_path / "logs")


# ------------------------------------------------------------------------------------------- damaged files

def _damage(data: bytes, at: float = 0.5, n: int = 16) -> bytes:
    data = bytearray(data)
    k = int(len(data) * at)
    data[k:k + n] = b"\xa5" * n
    return bytes(data)


@pytest.mark.parametrize("suffix", [".xz", ".gz", ".bz2"])
def test_a_damaged_archive_is_an_error_naming_it(tmp_path, suffix):
    """Before issue 50: LZMAError (xz) and zlib.error tracebacks."""
    import bz2

    compress = {".xz": lzma.compress, ".gz": gzip.compress, ".bz2": bz2.compress}[suffix]
    path = tmp_path / f"scores.csv{suffix}"
    path.write_bytes(_damage(compress(_table().to_csv(index=False).encode())))
    with pytest.raises(InputError, match=rf"scores\.csv\{suffix} is not a readable \{suffix} file.*damaged or cut"):
        load_scores(path)


def test_a_damaged_zip_is_an_error_naming_it(tmp_path):
    path = tmp_path / "scores.csv.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("scores.csv", _table().to_csv(index=False))
    path.write_bytes(_damage(path.read_bytes(), at=0.3, n=40))
    with pytest.raises(InputError, match=r"scores\.csv\.zip is not a readable \.zip file"):
        load_scores(path)


def test_a_truncated_gzip_is_an_error_naming_it(tmp_path):
    path = tmp_path / "scores.jsonl.gz"
    data = gzip.compress(_table().to_json(orient="records", lines=True).encode())
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"scores\.jsonl\.gz is not a readable \.gz file"):
        load_scores(path)


def test_a_corrupt_samples_file_is_an_error_naming_it_also_in_detection(tmp_path):
    """A corrupt samples_*.jsonl.xz: format detection (which peeks into every .jsonl* file) raised LZMAError;
    now detection passes over it and the read names it."""
    write_lm_eval(simulate_binary(seed=3, tasks=("arith",), items=20, runs=1), tmp_path / "logs")
    samples = sorted((tmp_path / "logs").glob("model-a/samples_*.jsonl"))[0]
    samples.with_name(samples.name + ".xz").write_bytes(_damage(lzma.compress(samples.read_bytes())))
    samples.unlink()
    with pytest.raises(LogFormatError, match=r"samples_arith_.*\.jsonl\.xz is not a readable \.xz file"):
        load_eval_logs(tmp_path / "logs")


@pytest.mark.parametrize("name", ["scores.jsonl", "logs"])
def test_json_nested_100000_levels_is_an_error_naming_the_line(tmp_path, name):
    """json.loads raised RecursionError (a traceback) on a line nested 100,000 levels deep."""
    deep = "[" * 100_000 + "]" * 100_000
    if name == "scores.jsonl":
        path = tmp_path / name
        path.write_text('{"system": "A", "item": "i0", "score": 0.5}\n{"system": ' + deep + "}\n")
        with pytest.raises(InputError, match=r"scores\.jsonl, line 2: JSON nested deeper than the parser follows"):
            load_scores(path)
        return
    write_lm_eval(simulate_binary(seed=3, tasks=("arith",), items=20, runs=1), tmp_path / "logs")
    samples = sorted((tmp_path / "logs").glob("model-a/samples_*.jsonl"))[0]
    samples.write_text(samples.read_text() + '{"doc_id": ' + deep + "}\n")
    with pytest.raises(LogFormatError, match="line 21: JSON nested deeper than the parser follows"):
        load_eval_logs(tmp_path / "logs")


# ------------------------------------------------------------------------------------------- the search of a folder

def _hostile_logs(tmp_path: Path) -> tuple[Path, dict]:
    """lm-eval logs of 2 models x 2 tasks x 3 runs (12 samples files) of which 5 cannot be read: run folder seed3
    a dangling link (4 files), in seed2 the logic samples a named pipe (model-a) and a link to /dev/zero
    (model-b)... and a link to / and to /proc inside the folder. Returns the folder and what must be named."""
    logs = tmp_path / "logs"
    write_lm_eval(simulate_binary(seed=3, tasks=("arith", "logic"), items=20, runs=3), logs)
    (tmp_path / "moved").mkdir()
    os.replace(logs / "seed3", tmp_path / "moved" / "seed3")
    (logs / "seed3").symlink_to("/mnt/not-mounted/seed3")
    fifo = sorted((logs / "seed2" / "model-a").glob("samples_logic_*"))[0]
    fifo.unlink()
    os.mkfifo(fifo)
    zero = sorted((logs / "seed2" / "model-b").glob("samples_logic_*"))[0]
    zero.unlink()
    zero.symlink_to("/dev/zero")
    chain = tmp_path / "chain0"
    chain.write_text("{}\n")
    for i in range(1, 51):   # a chain of 50 links: more than the system follows
        (tmp_path / f"chain{i}").symlink_to(tmp_path / f"chain{i - 1}")
    (logs / "seed1" / "model-a" / "samples_logic_2099-01-01T00-00-00.000000.jsonl").symlink_to(tmp_path / "chain50")
    (logs / "root").symlink_to("/")
    if os.path.isdir("/proc/self"):
        (logs / "proc").symlink_to("/proc")
    named = {"seed3": "a link to /mnt/not-mounted/seed3, which does not exist", fifo.name: "a named pipe (FIFO)",
             zero.name: "a link to /dev/zero, a device", "samples_logic_2099": "a link that loops, or a chain"}
    return logs, named


@needs_posix
def test_unreadable_log_files_are_named_never_skipped_in_silence(tmp_path):
    """Before issue 50: 'lm-eval: 8 file(s)' of 12, exit 0, and not a word; a link to / or /proc was walked for
    minutes. Now every file or folder that cannot be read is a WARNING naming it, the special file system and the
    link to / are not searched (and said so), and the search ends in seconds."""
    logs, named = _hostile_logs(tmp_path)
    started = time.perf_counter()
    searched = files.walk(logs)
    assert time.perf_counter() - started < 10
    warnings = "\n".join(searched.warnings())
    for name, why in named.items():
        assert any(name in line and why in line for line in searched.warnings()), (name, warnings)
    if (logs / "proc").exists():
        assert "the special file system proc" in warnings
    assert any("a link to /, a folder that holds" in n for n in searched.notes), searched.notes
    read = load_eval_logs(logs)
    assert len(read.description.files) == 6   # 12 written, seed3 (4) and 2 of seed2 unreadable
    described = read.describe()
    for name in named:
        assert any(line.startswith("WARNING: skipped") and name in line for line in described.splitlines()), name
    assert sum(n.startswith("WARNING:") for n in read.description.to_dict()["notes"]) == len(searched.skipped)


def test_the_search_is_bounded_in_folders_and_time(tmp_path):
    root = tmp_path / "deep"
    for i in range(30):
        (root / f"d{i}" / "x").mkdir(parents=True)
        (root / f"d{i}" / "x" / "samples_a.jsonl").write_text("{}\n")
    few = files.walk(root, max_folders=5)
    assert len(few.files) < 30 and "the search stopped after more than 5 folders" in few.warnings()[-1]
    quick = files.walk(root, max_seconds=0.0)
    assert quick.files == [] and "the search stopped after more than 0 s" in quick.warnings()[-1]
    assert len(files.find_files(root, "samples_*.jsonl")) == 30 and files.walk(root).skipped == []


@pytest.mark.skipif(not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat("/tmp").st_dev,
                    reason="needs /dev/shm on another file system than the temporary folder")
def test_entering_another_file_system_is_said(tmp_path):
    import tempfile

    with tempfile.TemporaryDirectory(dir="/dev/shm") as elsewhere:
        (Path(elsewhere) / "samples_a.jsonl").write_text("{}\n")
        root = tmp_path / "logs"
        root.mkdir()
        (root / "run1").symlink_to(elsewhere)
        searched = files.walk(root)
        assert [p.name for p in searched.files] == ["samples_a.jsonl"]
        assert any("on another file system" in n and "run1" in n for n in searched.notes), searched.notes


def test_an_inspect_log_archive_that_inflates_beyond_the_bound_is_refused(tmp_path, monkeypatch):
    """An Inspect .eval log is a zip archive read by inspect_ai: the sizes its members record are checked first."""
    path = tmp_path / "logs" / "2024-01-01_task_abc.eval"
    path.parent.mkdir()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", b"{}")
        archive.writestr("samples/1_epoch_1.json", b" " * (3 << 20))
    monkeypatch.setenv("VRS_MAX_INPUT_BYTES", "2M")
    with pytest.raises(LogFormatError, match=r"\.eval inflates beyond 2 MiB"):
        load_eval_logs(path.parent, format="inspect")


def test_a_bad_bound_on_the_command_line_is_an_error(tmp_path, capsys):
    from vrs_helpers.app import cli

    path = tmp_path / "scores.csv"
    _table().to_csv(path, index=False)
    for option, value, phrase in (("--max-input-bytes", "lots", "a size must be a positive number of bytes"),
                                  ("--max-systems", "1", "--max-systems must be at least 2")):
        code = cli.main(["analyze", str(path), "--response", "score", "--system", "system", "--item", "item", option,
                         value, "--out", str(tmp_path / "report")])
        err = capsys.readouterr().err
        assert code == 2 and phrase in err and "Traceback" not in err, err
    assert not (tmp_path / "report").exists()
