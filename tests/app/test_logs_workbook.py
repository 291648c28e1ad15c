"""Issue 40: the report of ``vrs analyze LOGDIR`` is workbook 09 run with papermill on the user's logs (the same
machinery as a score table's workbook 07), its analysis handed to the workbook's kernel signed with that kernel's key;
a file that is not that hand-over is refused before anything is unpickled."""

import json
import os
import pickle
from pathlib import Path

import nbformat
import pytest

from vrs_helpers.app import cli
from vrs_helpers.app.logs_report import OPTIONS, _identity, logs_analysis
from vrs_helpers.evaluate import handover
from vrs_helpers.evaluate.analysis import AnalysisError

ROOT = Path(__file__).resolve().parents[2]
WORKBOOK = ROOT / "notebooks" / "09_your_logs.ipynb"
INSPECT = ROOT / "examples" / "harness_logs" / "inspect"


def test_the_logs_report_is_workbook_09_run_on_the_logs(tmp_path, capsys):
    out = tmp_path / "report"
    assert cli.main(["analyze", str(INSPECT), "--out", str(out)]) == 0
    assert "notebook: " in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["mathjax", "report.html", "report.ipynb", "summary.json",
                                                     "summary.txt"]
    run = nbformat.read(str(out / "report.ipynb"), as_version=4)
    own = nbformat.read(str(WORKBOOK), as_version=4)
    injected = [c for c in run.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and f"logs_dir = {json.dumps(str(INSPECT))}" in injected[0].source
    assert "analysis_file = " in injected[0].source   # the hand-over, not a second analysis
    assert [c.source for c in run.cells if c not in injected] == [c.source for c in own.cells]
    assert not any(o.get("output_type") == "error" for c in run.cells for o in c.get("outputs", []))
    page = (out / "report.html").read_text()
    assert page.index("<h1>") < page.index('<div class="verdict">') < page.index("<figure>")
    assert "def " not in page and "logs_analysis(" not in page   # the code is left out of the page
    summary = json.loads((out / "summary.json").read_text())
    assert summary["data"] == str(INSPECT)
    assert {"tasks", "pooled", "harness", "miller", "paired", "mcnemar", "read", "verdict",
            "checked_against_logs"} <= set(summary)
    assert summary["verdict"][0] in page.replace("&#x27;", "'")


class _Planted:
    """Unpickling this writes a file: the proof that a pickle was loaded."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (Path(self.path).write_text, ("unpickled",))


def _options(**changed):
    return {**{k: None for k in OPTIONS}, "logs_dir": str(INSPECT), "log_format": "auto", "dropna": False,
            "adjust": "holm", "alpha": 0.05, "n_sim": 1000, "seed": 0, "items": "random", **changed}


def _analysis(path, options):
    kwargs = dict(options)
    return logs_analysis(kwargs.pop("logs_dir"), analysis_file=str(path), **kwargs)


@pytest.mark.parametrize("key_in_kernel", [None, "another key"])
def test_an_analysis_file_that_is_not_this_runs_hand_over_is_not_unpickled(tmp_path, monkeypatch, key_in_kernel):
    proof = tmp_path / "proof.txt"
    path = tmp_path / "analysis.pickle"
    handover.write(path, pickle.dumps((_identity(_options()), _Planted(proof))), "the maker's key")
    monkeypatch.delenv(handover.KEY_ENV, raising=False)
    if key_in_kernel:
        monkeypatch.setenv(handover.KEY_ENV, key_in_kernel)
    with pytest.raises(handover.HandoverError):
        _analysis(path, _options())
    path.write_bytes(pickle.dumps((_identity(_options()), _Planted(proof))))   # not signed at all
    with pytest.raises(handover.HandoverError):
        _analysis(path, _options())
    assert not proof.exists()


def test_the_hand_over_is_read_only_for_its_own_options(tmp_path, monkeypatch):
    os.chmod(tmp_path, 0o700)
    path = tmp_path / "analysis.pickle"
    monkeypatch.setenv(handover.KEY_ENV, "k" * 64)
    handover.write(path, pickle.dumps((_identity(_options()), {"made": "by vrs analyze"})), "k" * 64)
    assert _analysis(path, _options()) == {"made": "by vrs analyze"}
    with pytest.raises(AnalysisError, match="other logs or options"):
        _analysis(path, _options(adjust="bh"))
