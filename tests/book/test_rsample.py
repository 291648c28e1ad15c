"""vrs_helpers.book.rsample against R's own draws (tests/reference/r_sample.R, R 4.2.2: the command and the values are
in tests/reference/r_sample.json): set.seed(s); runif(5) and set.seed(s); sample(1:nu, size) exactly, for the nu of
mgcv's knot choice (max.knots = 2000) and small cases. Issue 41, item 8."""

import json
from pathlib import Path

import numpy as np
import pytest

from vrs_helpers.book import rsample

REF = json.loads((Path(__file__).resolve().parent.parent / "reference" / "r_sample.json").read_text())


def test_runif_is_r_runif():
    assert np.array_equal(rsample.runif(5, seed=1), np.array(REF["runif_seed1"]))   # every bit of R's doubles


@pytest.mark.parametrize("case", REF["cases"], ids=lambda c: f"nu{c['nu']}-size{c['size']}-seed{c['seed']}")
def test_sample_is_r_sample(case):
    """Exactly R's indices, in R's order (R >= 3.6, sample.kind 'Rejection'; nu = 65,536 needs 16 bits, drawn from two
    uniforms as R's rbits does, 65,537 needs 17)."""
    drawn = rsample.sample(case["nu"], case["size"], seed=case["seed"])
    assert drawn.tolist() == case["sample"]


def test_sample_refuses_what_r_does_otherwise():
    with pytest.raises(ValueError):
        rsample.sample(5, 6)
    with pytest.raises(ValueError, match="hash"):
        rsample.sample(20_000_000, 10)
