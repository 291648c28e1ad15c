"""Errors and warnings of the mixed-model engine."""
from ...errors import VRSError


class MixedModelError(VRSError, ValueError):
    """Bad input for a mixed model: the message says what is wrong and what to do."""


class SingularFitWarning(UserWarning):
    """A variance component is estimated on the boundary (zero): lme4's 'boundary (singular) fit'."""


class ConvergenceWarning(UserWarning):
    """The optimizer did not report convergence."""


class AliasedFactorsWarning(UserWarning):
    """Two random factors partition the data identically: only the sum of their variances is identified."""


SINGULAR_TOL = 1e-4  # lme4's isSingular() tolerance on theta
