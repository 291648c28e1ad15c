"""vrs_helpers: the tested helper library behind the vrs-workbooks notebooks (Riezler & Hagmann, *Validity,
Reliability, and Significance*).

The front door: the names the README and the user guide (docs/) document are importable from here
(``from vrs_helpers import analyze``) and stay importable when modules move. They load on first use, so
``import vrs_helpers`` is cheap.

Layers, each importing only from the ones below it:

- :mod:`vrs_helpers.app` - the ``vrs`` command, notebook runs, scorecard and report site;
- :mod:`vrs_helpers.evaluate` - your own evaluation results: reading score tables, ``analyze``, power planning;
- :mod:`vrs_helpers.book` - the book's methods, one module each;
- :mod:`vrs_helpers.mixed` - the mixed-model engine and its inference (``mixed.fit``, ``mixed.glmer``);
- :mod:`errors`, :mod:`outcomes` (what every test returns), :mod:`registry` (the significance tests, each
  registered once), :mod:`threads`, :mod:`dask_support`, :mod:`resources` - shared by all.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it (relative to vrs_helpers)
_EXPORTS = {
    # your own evaluation results
    "analyze": "evaluate.analysis",
    "analyze_items": "evaluate.items.analysis",
    "AnalysisSpec": "evaluate.tables.spec",
    "LogsSpec": "evaluate.tables.spec",
    "Result": "evaluate.presentation.result",
    "render": "evaluate.presentation.render",
    "OwnAnalysis": "evaluate.analysis",
    "write_summary": "evaluate.analysis",
    "load_scores": "evaluate.tables.scores",
    "validate": "evaluate.tables.scores",
    "f_test_power": "evaluate.tables.power",
    "runs_needed": "evaluate.tables.power",
    "items_needed": "evaluate.tables.power",
    "power_table": "evaluate.tables.power",
    "simulated_power": "evaluate.tables.power",
    # significance (book chapter 4)
    "compare_systems": "book.glrt",
    "SystemComparison": "book.glrt",
    "z_test": "book.significance",
    "t_test": "book.significance",
    "paired_t_test": "book.significance",
    "paired_z_test": "book.significance",
    "permutation_test": "book.significance",
    "permutation_test_exact": "book.significance",
    "bootstrap_test": "book.significance",
    "adjust_p_values": "book.significance",
    "aso": "book.stochastic_order",
    "multi_aso": "book.stochastic_order",
    "expected_max": "book.stochastic_order",
    "evaluation_log": "book.simulation",
    "rejection_rates": "book.simulation",
    # reliability (book chapter 3)
    "krippendorff_alpha": "book.agreement",
    "scotts_pi": "book.agreement",
    "cohens_kappa": "book.agreement",
    "phi": "book.reliability",
    "decision_study": "book.reliability",
    "smallest_design": "book.reliability",
    "variance_table": "book.reliability",
    "latent_variance_components": "book.binary",
    # validity (book chapter 2)
    "dataset_bias_test": "book.validity",
    "transformation_invariance_test": "book.invariance",
    "circularity_test": "book.circularity",
    "fit_gam": "book.gam",
    # mixed models
    "emmeans": "mixed.models.marginal",
    # the registry of significance tests (vrs_helpers.registry)
    "test_names": "registry",
    "get_test": "registry",
    "choose_test": "registry",
    "default_test": "registry",
    "applicable_tests": "registry",
    "implements": "registry",
    "RegisteredTest": "registry",
    "Hypothesis": "registry",
    "TestChoiceError": "registry",
    # data and shared types
    "load_data": "book.data",
    "book_table": "book.data",
    "TestOutcome": "outcomes",
    "VRSError": "errors",
}
_ALIASES = {"load_data": "load", "test_names": "names", "get_test": "get", "choose_test": "choose",
            "applicable_tests": "applicable"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vrs_helpers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), _ALIASES.get(name, name))
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
