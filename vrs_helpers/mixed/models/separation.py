"""Separation in correct/incorrect (and successes-of-trials) scores: a group whose scores are all correct or all
wrong.

When every score of a system (or of a cell of the design, e.g. a system at one level of a condition) is 1, or every
one is 0, the maximum-likelihood estimate of its log-odds is infinite (complete separation, Albert & Anderson 1984):
a logistic GLMM's optimizer stops somewhere along a ridge, so the system's fixed effect (e.g. -100 log-odds), its
standard error, z and p, the variance components it drives and any share of variance built on them (the book's phi
on the latent scale) are numbers without meaning (issue 28). :func:`check_separation` finds such groups before a
model is fitted, so a workflow can say so and not report those quantities.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..structure.errors import MixedModelError


def check_separation(data: pd.DataFrame, response, by, trials=None) -> pd.DataFrame:
    """The groups of ``data`` (the levels of ``by``: a column, or a list of columns for cells) whose scores are all
    correct or all wrong; an empty frame when there are none.

    ``response``: a column of 0/1 scores (or proportions correct, with ``trials`` a column of trial counts or a
    number), or a pair of columns (successes, failures), as in ``cbind(successes, failures)``. Returns one row per
    separated group: the ``by`` columns, ``n`` (rows), ``trials``, ``successes``, ``share`` (successes / trials) and
    ``kind`` ("all correct" or "all wrong")."""
    if not isinstance(data, pd.DataFrame):
        raise MixedModelError("check_separation needs a pandas DataFrame.")
    by = [by] if isinstance(by, str) else list(by)
    cols = list(response) if isinstance(response, (tuple, list)) else [response]
    missing = [c for c in by + cols + ([trials] if isinstance(trials, str) else []) if c not in data.columns]
    if missing:
        raise MixedModelError(f"column(s) {', '.join(map(repr, missing))} not in the data; columns: "
                              f"{', '.join(map(str, data.columns))}.")
    if len(cols) == 2:
        succ = data[cols[0]].to_numpy(dtype=float)
        tri = succ + data[cols[1]].to_numpy(dtype=float)
    elif len(cols) == 1:
        y = data[cols[0]].to_numpy(dtype=float)
        tri = (np.ones(len(data)) if trials is None else
               data[trials].to_numpy(dtype=float) if isinstance(trials, str) else np.broadcast_to(
                   np.asarray(trials, dtype=float), y.shape).astype(float))
        succ = y * tri
    else:
        raise MixedModelError("response must be a column name or a pair (successes, failures).")
    if np.isnan(succ).any() or np.isnan(tri).any():
        raise MixedModelError("the scores have missing values; drop those rows first.")
    if (succ < 0).any() or (succ > tri + 1e-9).any():
        raise MixedModelError("scores must lie between 0 and the number of trials (0/1, or proportions in [0, 1]).")
    frame = data[by].copy()
    frame["__succ"], frame["__trials"] = succ, tri
    g = frame.groupby(by, observed=True, sort=True)
    out = g.agg(n=("__succ", "size"), trials=("__trials", "sum"), successes=("__succ", "sum")).reset_index()
    out["share"] = out["successes"] / out["trials"]
    tol = 1e-9 * np.maximum(out["trials"].to_numpy(), 1.0)
    all_correct = np.abs(out["successes"] - out["trials"]).to_numpy() <= tol
    all_wrong = out["successes"].abs().to_numpy() <= tol
    out["kind"] = np.where(all_correct, "all correct", "all wrong")
    return out[all_correct | all_wrong].reset_index(drop=True)


__all__ = ["check_separation"]
