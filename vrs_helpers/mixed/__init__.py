"""Linear mixed models fitted from sufficient statistics, without R (book appendix A; lme4, Bates et al. 2015).

    y = X beta + Z b + eps,   b ~ N(0, sigma^2 Lambda Lambda'),   eps ~ N(0, sigma^2 I)

Random intercepts for any number of crossed or nested grouping factors, random slopes (``(1 + x|g)`` with lme4's
lower-triangular theta, ``(0 + x|g)``, ``(1 + x||g)``; factors as lme4 codes them) and ``(1|a/b)``. Stages:

- :mod:`.design` - the model's design: treatment contrasts, levels, the :class:`SufficientStats` Z'Z, Z'X, X'X, Z'y,
  X'y, y'y;
- :mod:`.accumulate` - one pass over the rows (DataFrame, chunks, pyarrow Dataset, dask DataFrame) into mergeable
  :class:`PartialStats`, keyed by level labels (a dask DataFrame: one per partition on its cluster);
- :mod:`.factor_slopes` - random slopes of factors coded as lme4 codes them;
- :mod:`.deviance` - the profiled REML/ML deviance (lme4 JSS eq. 34/41) with a blocked, sparse Cholesky
  (:mod:`.dense_blocks`: its dense cross blocks, equal rows computed once; :mod:`.pair_sums`: its sparse ones);
  :mod:`.information` - the average-information Hessian of the random-intercept deviance (the optimizer's Newton
  steps);
- :mod:`.model` - the :class:`MixedModel` base of the model objects (MixedModels.jl's) and their :class:`OptSummary`;
- :mod:`.results` - the linear mixed model, :class:`LinearMixedModel` (lme4's lmer), fitted by :mod:`.optimizer`;
  :func:`fit` and :func:`fit_stats` build and fit one;
- :mod:`.glmm` - generalized linear mixed models, :class:`GeneralizedLinearMixedModel` (lme4's glmer; families
  and links in :mod:`.families`, the Laplace / quadrature deviance in :mod:`.laplace`); :func:`glmer`;
- :mod:`.likelihood_ratio` - one likelihood ratio test for both: :func:`lrt`, :class:`LRTResult`;
- :mod:`.ddf` - small-sample F tests of fixed effects with Satterthwaite's (:mod:`.satterthwaite`) or
  Kenward-Roger's (:mod:`.kenward_roger`) denominator df (``result.anova(type=..., ddf=...)``: lmerTest's type I, II
  and III hypotheses, :mod:`.hypotheses`; ``result.test(L, ddf=...)``); :mod:`.nested` merges nested random
  intercepts ((1|item) + (1|system:item)) into one term for the fit and both tests;
- :mod:`.glmm_bootstrap` - the GLMMs' parametric-bootstrap LRT (PBmodcomp): :func:`glmm_bootstrap_lrt`;
  :mod:`.separation` - all-correct / all-wrong groups: :func:`check_separation`;
- :mod:`.simulate`, :mod:`.batch`, :mod:`.bootstrap` - responses simulated as sufficient statistics, batched refits
  and the parametric-bootstrap LRT (pbkrtest's PBmodcomp): :func:`parametric_bootstrap_lrt`;
- :mod:`.shared` - one accumulation shared by the models of one data set that differ in their fixed effects, and
  their fits kept: :class:`ModelCache`, :func:`restrict`;
- :mod:`.numdiff` - the finite differences every numerical derivative of the engine uses.
"""

from .inference.likelihood_ratio import LRTResult, lrt
from .likelihood import families
from .likelihood.deviance import BlockDeviance, Deviance
from .models.glmm import GeneralizedLinearMixedModel, GLMMResult, glmer
from .models.results import LinearMixedModel, MixedModelResult, fit, fit_stats
from .models.separation import check_separation
from .models.shared import ModelCache, restrict
from .resampling.bootstrap import BootstrapLRTResult, parametric_bootstrap_lrt
from .resampling.glmm_bootstrap import glmm_bootstrap_lrt
from .structure.accumulate import PartialStats, accumulate, accumulate_dask, merge_all
from .structure.design import SufficientStats, design_rows
from .structure.errors import (
    SINGULAR_TOL,
    AliasedFactorsWarning,
    ConvergenceWarning,
    MixedModelError,
    SingularFitWarning,
)
from .structure.model import MixedModel, OptSummary

__all__ = ["fit", "fit_stats", "accumulate", "accumulate_dask", "lrt", "MixedModel", "LinearMixedModel",
           "GeneralizedLinearMixedModel", "OptSummary", "MixedModelResult", "LRTResult", "families",
           "SufficientStats", "MixedModelError", "SingularFitWarning", "ConvergenceWarning", "AliasedFactorsWarning",
           "SINGULAR_TOL", "Deviance", "BlockDeviance", "design_rows", "PartialStats", "merge_all",
           "glmer", "GLMMResult", "parametric_bootstrap_lrt", "BootstrapLRTResult", "glmm_bootstrap_lrt",
           "check_separation", "ModelCache", "restrict"]
