"""Mergeable partial sufficient statistics: :class:`PartialStats`, :func:`partial`, :func:`merge_all`.

They live in :mod:`.accumulate` (the one accumulation code path); this module keeps their earlier import path.
"""

from .accumulate import PartialStats, column_kind, merge_all, partial

__all__ = ["PartialStats", "partial", "merge_all", "column_kind"]
