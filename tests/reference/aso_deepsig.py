"""Reference values of deepsig 1.2.8's ASO for tests/book/test_stochastic_order.py.

Command (from the repository root, with the dev extras installed):
    python tests/reference/aso_deepsig.py > tests/reference/aso_deepsig.json

Inputs: per-run scores of two systems, 5 and 3 runs, fixed below (drawn once from N(0.80, 0.01) / N(0.805, 0.01)
and rounded: typical accuracies over training seeds), a pair with a clear order, and a 5-run pair whose quantile
functions cross (violation ratio near 0.5: eps_min below 1 in both directions, so both bootstrap bounds are
compared). For each pair and direction: deepsig's violation ratio of the observed scores (deterministic) and
eps_min for 10 seeds (1,000 bootstrap iterations each): their mean and SD give deepsig's value and its Monte-Carlo
spread. The seeds are 1,000 apart: deepsig seeds bootstrap iteration i with ``seed + i``, so seeds 0, 1, 2, ...
would share all but one of their 1,000 resamples (and their SD would not be the Monte-Carlo spread).
"""

import json

import numpy as np
from deepsig import aso
from deepsig.aso import compute_violation_ratio

PAIRS = {
    "five_runs": ([0.8012, 0.7954, 0.8103, 0.8049, 0.7991], [0.8077, 0.8121, 0.7989, 0.8064, 0.8150]),
    "three_runs": ([0.8012, 0.7954, 0.8103], [0.8077, 0.8121, 0.7989]),
    "clear_order": ([0.71, 0.72, 0.70, 0.73, 0.715], [0.80, 0.81, 0.79, 0.805, 0.795]),
    "crossing": ([0.7964, 0.7967, 0.7902, 0.7910, 0.7962], [0.8078, 0.7791, 0.7950, 0.8090, 0.7782]),
}

out = {"deepsig": "1.2.8", "num_bootstrap_iterations": 1000, "dt": 0.005, "seeds": [1000 * k for k in range(10)],
       "pairs": {}}
for name, (a, b) in PAIRS.items():
    entry = {"a": a, "b": b}
    for direction, (x, y) in {"a_over_b": (a, b), "b_over_a": (b, a)}.items():
        eps = [float(aso(x, y, seed=s, show_progress=False)) for s in out["seeds"]]
        entry[direction] = {"violation_ratio": float(compute_violation_ratio(scores_a=np.array(x),
                                                                             scores_b=np.array(y), dt=0.005)),
                            "eps_min": eps, "eps_min_mean": float(np.mean(eps)), "eps_min_sd": float(np.std(eps))}
    out["pairs"][name] = entry
print(json.dumps(out, indent=1))
