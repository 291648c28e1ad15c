"""Linear mixed models fitted from sufficient statistics, without R (book appendix A; lme4, Bates et al. 2015).

    y = X beta + Z b + eps,   b ~ N(0, sigma^2 Lambda Lambda'),   eps ~ N(0, sigma^2 I)

Random intercepts for any number of crossed or nested grouping factors, random slopes for numeric variables
(``(1 + x|g)`` with lme4's lower-triangular theta, ``(0 + x|g)``, ``(1 + x||g)``) and ``(1|a/b)``. Stages:

- :mod:`.accumulate` - one pass over the rows (DataFrame, chunks, pyarrow Dataset) for Z'Z, Z'X, X'X, Z'y, X'y, y'y;
- :mod:`.partial` - the same sums per partition, keyed by level labels and merged in any tree (a dask DataFrame is
  fitted this way on its cluster: ``vrs_helpers.distributed``);
- :mod:`.deviance` - the profiled REML/ML deviance (lme4 JSS eq. 34/41) with a blocked, sparse Cholesky;
- :mod:`.results` - the optimizer, the result object (lme4's quantities) and the likelihood ratio test.
"""

from .accumulate import SufficientStats, _design_rows, accumulate
from .deviance import _BlockDeviance, _Deviance
from .errors import SINGULAR_TOL, AliasedFactorsWarning, ConvergenceWarning, MixedModelError, SingularFitWarning
from .partial import PartialStats, merge_all
from .results import LRTResult, MixedModelResult, fit, fit_stats, lrt

__all__ = ["fit", "fit_stats", "accumulate", "lrt", "MixedModelResult", "LRTResult", "SufficientStats",
           "MixedModelError", "SingularFitWarning", "ConvergenceWarning", "AliasedFactorsWarning", "SINGULAR_TOL",
           "_Deviance", "_BlockDeviance", "_design_rows", "PartialStats", "merge_all"]
