"""pytest configuration for the notebook validation (`pytest --nbval-lax notebooks`, see the Makefile).

Cells tagged ``nbval-check-output`` are compared with their committed outputs. The scorecard's and ``record()``'s
machine-readable outputs (``application/vnd.vrs.scorecard+json``, ``application/vnd.vrs.scalar+json``) hold the
full floating-point values for ``vrs reproduce`` / ``vrs batch``; their last digits differ between CPUs and BLAS
libraries, so nbval does not compare them. What it compares is what a reader sees: every check's status and its
values at the check's precision (:func:`vrs_helpers.app.scorecard.shown`); the values themselves are checked by the
scorecard's tolerances and the baseline assert of each notebook (``tests/test_nbval_blas.py`` runs the checked
cells under another BLAS kernel).
"""

MACHINE_OUTPUTS = ("application/vnd.vrs.scorecard+json", "application/vnd.vrs.scalar+json")


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        notebook = getattr(item, "parent", None)
        skip = getattr(notebook, "skip_compare", None)
        if skip is not None and not set(MACHINE_OUTPUTS) <= set(skip):
            notebook.skip_compare = tuple(skip) + MACHINE_OUTPUTS
