"""Warnings shown as notes in a workbook: what a fit says about itself (a singular fit, aliased factors, a boundary
estimate) is part of the analysis a reader reads, so it appears as plain text under the cell, in the words of the
warning, instead of a red stderr box in the published page."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def notes(prefix: str = "note: ") -> Iterator[list]:
    """Collect the warnings raised inside the block (every one, also repeats) and show them, when the block ends,
    as one plain-text output with a line each (``note: boundary (singular) fit: ...``). Yields the list of the
    caught warnings (``warnings.WarningMessage``), for a block that wants to look at them. An exception inside the
    block propagates; the notes caught until then are still shown."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield caught
        finally:
            if caught:
                _display({"text/plain": "\n".join(f"{prefix}{w.message}" for w in caught)})


def _display(bundle: dict) -> None:
    try:
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython ships with every notebook kernel
        return
    display(bundle, raw=True)
