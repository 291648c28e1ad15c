"""The mixed-model reading of harness logs with repeats against glmer (issue 29's acceptance case: two models x 240
samples x 3 epochs): the chi-square LRT of `correct ~ model + (1|id) + (1|model:id)` against the model without the
model term, from tests/reference/harness_glmer_lme4.json (command in tests/reference/harness_glmer.R)."""

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

from vrs_helpers import mixed
from vrs_helpers.evaluate.logs.harness_stats import harness_numbers
from vrs_helpers.evaluate.logs.readers import load_eval_logs
from vrs_helpers.evaluate.logs.readers.writers import write_every_eval_ever

REF = Path(__file__).resolve().parents[1] / "reference"


def _table():
    spec = importlib.util.spec_from_file_location("harness_glmer_data", REF / "harness_glmer_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.table()


def test_the_reference_data_are_the_simulation():
    committed = pd.read_csv(REF / "harness_glmer.csv.gz", dtype=str)
    again = _table().astype(str)
    pd.testing.assert_frame_equal(again.reset_index(drop=True), committed.astype(str), check_dtype=False)


def test_logs_with_repeats_give_glmers_lrt(tmp_path):
    """Written as Every Eval Ever logs (epochs in metadata.epoch), read back, and fitted: the LRT equals glmer's at
    convergence within 1e-3 (the acceptance tolerance); each model's accuracy is the table's."""
    ref = json.loads((REF / "harness_glmer_lme4.json").read_text())["converged"]
    t = _table().rename(columns={"model": "system", "id": "item", "epoch": "repeat", "correct": "score"})
    t = t.assign(task="qa", run="1")
    write_every_eval_ever(t, tmp_path)
    logs = load_eval_logs(tmp_path)
    assert logs.description.repeats == {"qa": (3, 3)} and logs.description.items == {"qa": 240}
    d = logs.scores().rename(columns={"system": "model", "item": "id", "score": "correct"})
    m1 = mixed.glmer("correct ~ model + (1|id) + (1|model:id)", d)
    m0 = mixed.glmer("correct ~ 1 + (1|id) + (1|model:id)", d)
    lrt = mixed.lrt(m0, m1)
    assert lrt.df == ref["df"]
    assert lrt.chi2 == pytest.approx(ref["chisq"], abs=1e-3)
    assert m1.loglik == pytest.approx(ref["logLik1"], abs=1e-3) and m0.loglik == pytest.approx(ref["logLik0"], abs=1e-3)
    acc = harness_numbers(logs).set_index("system")["mean"]
    acc_ref = json.loads((REF / "harness_glmer_lme4.json").read_text())["accuracy"]
    assert acc.to_dict() == pytest.approx(acc_ref, abs=1e-12)
