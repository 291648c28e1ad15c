"""A benchmark as a response matrix: models x items (x runs) of scores, from a long score table (issue 55).

The item analysis reads one row per model, item and run (a run: a seed, a few-shot draw; absent for a single run)
with a score (0/1 or continuous). :class:`ItemMatrix` holds the codes, the scores and the cell means (models x
items, each model's mean over its runs of each item): every item statistic is a function of these. Only items
every model answered are kept (a model's total over a different item set is not comparable); the others are
counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..files import InputError


@dataclass
class ItemMatrix:
    """The codes of every row (``model``, ``item``, ``run``: integers into the label lists), the ``score`` of every
    row, the labels, the cell means ``means`` (models x items) and the number of runs per cell ``counts``."""

    models: list
    items: list
    runs: list
    model: np.ndarray = field(repr=False)
    item: np.ndarray = field(repr=False)
    run: np.ndarray = field(repr=False)
    score: np.ndarray = field(repr=False)
    means: np.ndarray = field(repr=False)
    counts: np.ndarray = field(repr=False)
    binary: bool = True
    dropped_items: int = 0

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_runs(self) -> float:
        """The number of runs of a cell (their harmonic mean when cells differ)."""
        return float(len(self.counts.ravel()) / np.sum(1.0 / self.counts))

    @property
    def has_runs(self) -> bool:
        return bool(self.counts.max() > 1)

    @property
    def runs_shared(self) -> bool:
        """Every run label is used by two or more models (a seed shared by the models: crossed runs)."""
        if not self.has_runs or self.n_models < 2:
            return False
        used = pd.Series(self.model).groupby(self.run).nunique()
        return bool((used >= 2).all())

    def long(self) -> pd.DataFrame:
        """The rows as a table with the columns ``model``, ``item``, ``run`` (labels as text) and ``score``."""
        return pd.DataFrame({"model": np.asarray(self.models, dtype=object)[self.model],
                             "item": np.asarray(self.items, dtype=object)[self.item],
                             "run": np.asarray(self.runs, dtype=object)[self.run], "score": self.score})


def item_matrix(data: pd.DataFrame, score: str = "score", model: str = "model", item: str = "item",
                run: str | None = "run") -> ItemMatrix:
    """The :class:`ItemMatrix` of a long table (column names as given; ``run`` None or absent: one run). Raises
    :class:`~vrs_helpers.evaluate.files.InputError` for a missing column, a non-numeric or missing score, fewer
    than two items, or no item that every model answered."""
    for role, col in (("score", score), ("model", model), ("item", item)):
        if col not in data.columns:
            raise InputError(f"The {role} column {col!r} is not in the data; its columns: "
                             f"{', '.join(map(str, data.columns))}.")
    y = pd.to_numeric(data[score], errors="coerce").to_numpy(float)
    if not np.isfinite(y).all():
        raise InputError(f"The score column {score!r} has {int((~np.isfinite(y)).sum())} missing or non-numeric "
                         "values: every row needs a finite number (0/1 or a continuous score).")
    m_codes, models = pd.factorize(data[model].astype(str), sort=True)
    i_all, items_all = pd.factorize(data[item].astype(str), sort=True)
    if run is not None and run in data.columns:
        r_codes, runs = pd.factorize(data[run].astype(str), sort=True)
    else:
        r_codes, runs = np.zeros(len(data), dtype=np.int64), pd.Index(["0"])
    n_models = len(models)
    answered = pd.Series(m_codes).groupby(i_all).nunique().reindex(range(len(items_all)), fill_value=0).to_numpy()
    keep_item = answered == n_models
    dropped = int((~keep_item).sum())
    if keep_item.sum() < 2:
        raise InputError(f"{int(keep_item.sum())} item(s) were answered by every one of the {n_models} models: an "
                         "item analysis needs two or more items that every model answered.")
    rows = keep_item[i_all]
    new_code = np.cumsum(keep_item) - 1
    i_codes = new_code[i_all[rows]]
    m_codes, r_codes, y = m_codes[rows], r_codes[rows], y[rows]
    items = [str(v) for v, k in zip(items_all, keep_item, strict=True) if k]
    n_items = len(items)
    cell = m_codes * n_items + i_codes
    counts = np.bincount(cell, minlength=n_models * n_items).reshape(n_models, n_items)
    sums = np.bincount(cell, weights=y, minlength=n_models * n_items).reshape(n_models, n_items)
    binary = bool(np.all((y == 0) | (y == 1)))
    return ItemMatrix([str(v) for v in models], items, [str(v) for v in runs], m_codes.astype(np.int64),
                      i_codes.astype(np.int64), r_codes.astype(np.int64), y, sums / counts, counts, binary, dropped)
