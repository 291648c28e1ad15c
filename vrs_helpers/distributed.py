"""Earlier import path of the Dask helpers. They now live beside the jobs they serve:

- :mod:`vrs_helpers.dask_support` - ``connect``, ``require_dask``, the Dask errors;
- :func:`vrs_helpers.mixed.accumulate.accumulate_dask` - mixed-model statistics per partition (``mixed.fit`` of a
  dask DataFrame uses it);
- :func:`vrs_helpers.runner.run_grid_dask` - notebook grids (``vrs batch --dask``);
- :func:`vrs_helpers.significance.resampling_test_dask` - resampling batches on workers;
- ``vrs_helpers.own_analysis.analyze(..., backend=client)`` - ``vrs analyze --dask``.
"""

from .dask_support import (
    INSTALL_HINT,
    DaskConnectionError,
    DaskUnavailableError,
    connect,
    is_dask_dataframe,
    require_dask,
)
from .mixed.accumulate import accumulate_dask
from .runner import finished
from .runner import run_grid_dask as run_grid
from .significance import resampling_test_dask as resampling_test

__all__ = ["INSTALL_HINT", "DaskConnectionError", "DaskUnavailableError", "connect", "is_dask_dataframe",
           "require_dask", "accumulate_dask", "finished", "run_grid", "resampling_test"]
