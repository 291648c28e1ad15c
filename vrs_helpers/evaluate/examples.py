"""The example data of workbook 07 (your own results), ready to analyse like your own:

- :func:`mt_example` - the book's MT example (section 4.3): TER per sentence of three systems (Baseline, Marking,
  PostEdit) over the replications the authors ran, with the source-length classes of Table 4.3;
- :func:`binary_example` - a log of correct/incorrect scores with runs (the book has none): two systems x 3 seeds x 300
  items simulated from a logistic mixed model (:func:`vrs_helpers.book.simulation.evaluation_log`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

LENGTH_BINS = (15, 55)   # the authors' code: short <= 15 < typical <= 55 < very long (source tokens)
LENGTH_CLASSES = ("short", "typical", "very long")


def mt_example(download: bool = True) -> pd.DataFrame:
    """The book's MT data (registry ``mt_ter``) with the column ``src_length_class`` of Table 4.3."""
    from ..book.data import load

    ter = load("mt_ter", download=download)
    x = ter["src_length"].astype(float)
    ter["src_length_class"] = np.select([x <= LENGTH_BINS[0], x <= LENGTH_BINS[1]], list(LENGTH_CLASSES[:2]),
                                        LENGTH_CLASSES[2])
    return ter


def binary_example(seed: int = 0, difference: float = 0.0, runs: int = 3, items: int = 300) -> pd.DataFrame:
    """Correct/incorrect scores of two systems (S0, S1) over ``runs`` seeds and ``items`` items: run SD 0.35 and
    item SD 1 on the logit scale, S1 better by ``difference`` logits, a mean accuracy of about 0.6."""
    from ..book.simulation import evaluation_log

    return evaluation_log(seed, systems=2, runs=runs, items=items, delta=difference, run_sd=0.35, item_sd=1.0,
                          mean=0.5, family="binomial")
