"""Issue 54: `vrs analyze` with more than 50 systems writes pairs.csv beside summary.json, whose pairs are bounded
(the pairs among the 50 best-ranked systems), and says p < 1e-300, never p = 0."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from vrs_helpers.app import cli
from vrs_helpers.literal import read_back


def test_many_systems_write_pairs_csv(tmp_path):
    rng = np.random.default_rng(54)
    k, items = 52, 30
    item = rng.normal(0, 1, items)
    rows = [{"system": f"s{s:02d}", "item": i, "score": 0.02 * s + item[i] + rng.normal(0, 0.3)}
            for s in range(k) for i in range(items)]
    data = tmp_path / "scores.csv"
    pd.DataFrame(rows).to_csv(data, index=False)
    out = tmp_path / "out"
    assert cli.main(["analyze", str(data), "--response", "score", "--system", "system", "--item", "item",
                     "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    total = k * (k - 1) // 2
    assert summary["pairs_in_summary"]["total"] == total
    assert summary["pairs_in_summary"]["kept"] == len(summary["contrasts"]) == 50 * 49 // 2
    best = {r["system"] for r in summary["ranking"][:50]}
    assert all(set(c["contrast"].split(" - ")) <= best for c in summary["contrasts"])
    pairs = read_back(pd.read_csv(out / "pairs.csv"))
    assert len(pairs) == total and set(pairs["reading"]) == {"runs as replications"}
    for text in ((out / "summary.txt").read_text(), summary["answer"]):
        assert re.search(r"p = 0(?![.\d])", text) is None   # never "p = 0" (P_FLOOR, issue 54)
