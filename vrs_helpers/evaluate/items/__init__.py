"""Is the benchmark any good? The item analysis of a benchmark (issue 55): :func:`analyze_items` (``vrs items``).

- :mod:`.matrix` - the long score table as a models x items (x runs) response matrix;
- :mod:`.statistics` - each item's share correct, item-rest correlation and flags (no information, negative
  discrimination, flips across runs);
- :mod:`.rasch` - Rasch (1PL) difficulties with SEs as a logistic GLMM of the project's engine (lme4's glmer);
- :mod:`.reliability` - the benchmark's reliability for comparing models (φ, the relative coefficient, the decision
  study of the book's chapter 3), the smallest resolved difference, signal-to-noise and saturation;
- :mod:`.analysis` - all of it as a :class:`~vrs_helpers.evaluate.presentation.result.Result` of kind ``"items"``.
"""

from .analysis import analyze_items

__all__ = ["analyze_items"]
