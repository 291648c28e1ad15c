"""The data registry: every shared file registered with its hash, tidy frames, clear errors."""

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from conftest import requires_data
from vrs_helpers.app.cli import main
from vrs_helpers.book import data


def _data_dir() -> Path:
    """The local data copy the tests use: VRS_DATA_DIR (conftest sets it to ../shared/data when that exists)."""
    return Path(os.environ["VRS_DATA_DIR"])


def _sha256sums():
    lines = (_data_dir() / "SHA256SUMS").read_text().split("\n")
    return {p.removeprefix("./"): h for h, p in (ln.split(maxsplit=1) for ln in lines if ln.strip())}


@requires_data
def test_registry_covers_every_file_with_its_hash():
    sums = _sha256sums()
    registered = {f.path: f.sha256 for f in data.REGISTRY.values()}
    assert registered == sums


def test_every_entry_has_provenance():
    for f in data.REGISTRY.values():
        assert f.upstream.startswith("https://raw.githubusercontent.com/")
        assert data.EMPIRICAL_METHODS_COMMIT in f.upstream or data.HANS_COMMIT in f.upstream
        assert f.licence in ("Apache-2.0", "MIT") and f.used_for and len(f.sha256) == 64


# rows as documented in the data folder's README.md (VRS_DATA_DIR/README.md)
@requires_data
@pytest.mark.parametrize("name,rows", [
    ("mt_annotation", 300), ("mt_grid_partial", 56214), ("mt_grid_full", 337284), ("mt_ter", 7287),
    ("liver_grid", 12150), ("liver_sofa_test", 80671), ("kidney_sofa_test", 80671), ("ir_test", 106690),
    ("mnli_dev_bert_correct", 9815), ("bert_runs_accuracy", 100),
])
def test_load_rows(name, rows):
    assert len(data.load(name)) == rows


@requires_data
def test_load_is_tidy():
    ann = data.load("mt_annotation")
    assert {"mode", "occasion", "sentence", "rater", "score"} <= set(ann.columns)
    assert isinstance(ann["rater"].dtype, pd.CategoricalDtype)
    assert pd.api.types.is_float_dtype(ann["score"])
    assert ann.groupby("mode", observed=True).size().to_dict() == {"Marking": 150, "Post Edit": 150}
    pred = data.load("liver_pred_test_circ")
    assert list(pred.columns) == ["prediction"] and pd.api.types.is_float_dtype(pred["prediction"])
    mnli = data.load("mnli_dev_bert_correct")
    assert set(mnli["gold_label"].cat.categories) == {"entailment", "neutral", "contradiction"}
    assert mnli["n_correct"].between(0, 100).all()
    runs = data.load("bert_runs_accuracy")
    assert runs["run"].tolist() == list(range(100))


def test_unknown_name_lists_known_ones():
    with pytest.raises(data.DataError, match="Unknown dataset 'mt_anotation'.*Did you mean 'mt_annotation'.*Known"):
        data.load("mt_anotation")


def test_missing_file_offline_names_dataset_url_and_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("VRS_DATA_DIR", str(tmp_path))
    with pytest.raises(data.DataError) as err:
        data.load("mt_ter")
    msg = str(err.value)
    assert "'mt_ter'" in msg and "VRS_DATA_DIR" in msg and "raw.githubusercontent.com/StatNLP" in msg
    monkeypatch.delenv("VRS_DATA_DIR")
    monkeypatch.setenv("VRS_CACHE_DIR", str(tmp_path))
    with pytest.raises(data.DataError, match="vrs data fetch mt_ter"):
        data.load("mt_ter", download=False)


@requires_data
def test_corrupted_copy_is_refused(tmp_path, monkeypatch):
    entry = data.info("mt_annotation")
    target = tmp_path / entry.path
    target.parent.mkdir(parents=True)
    shutil.copy(_data_dir() / entry.path, target)
    raw = bytearray(target.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    target.write_bytes(bytes(raw))
    monkeypatch.setenv("VRS_DATA_DIR", str(tmp_path))
    with pytest.raises(data.DataError, match="Refusing to load 'mt_annotation'.*SHA256"):
        data.load("mt_annotation")
    table = data.verify()
    assert table.set_index("name").loc["mt_annotation", "status"] == "mismatch"


def test_unreadable_file_is_reported(tmp_path, monkeypatch):
    bad = tmp_path / "empirical_methods" / "x.rds"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not an rds file")
    entry = data.DataFile("broken", "empirical_methods/x.rds", "https://example.invalid/x.rds",
                          data.sha256_of(bad), "MIT", "test", "rds")
    monkeypatch.setitem(data.REGISTRY, "broken", entry)
    monkeypatch.setenv("VRS_DATA_DIR", str(tmp_path))
    with pytest.raises(data.DataError, match="Could not read dataset 'broken'"):
        data.load("broken")


@requires_data
def test_cli_verify_all_present(capsys):
    assert main(["data", "verify"]) == 0
    out = capsys.readouterr().out
    assert f"{len(_sha256sums())} of {len(_sha256sums())} files present and intact" in out


def test_cli_verify_fails_when_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VRS_DATA_DIR", str(tmp_path))
    assert main(["data", "verify"]) == 1
    assert "0 of" in capsys.readouterr().out


def test_book_table():
    t = data.book_table("agreement_3_3_1")
    assert t["examples"]["krippendorff_10_items"]["printed"]["alpha"] == 0.095
    with pytest.raises(data.DataError, match="known: agreement_3_3_1"):
        data.book_table("nope")
