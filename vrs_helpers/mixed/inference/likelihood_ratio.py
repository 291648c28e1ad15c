"""The likelihood ratio test of nested mixed models (book 4.3, appendix A), one for linear and generalized linear
mixed models alike: lme4's ``anova(m0, m1)``, MixedModels.jl's ``likelihoodratiotest(m0, m1)``.

    chi2 = 2 (logLik m1 - logLik m0)  on  df = n_params(m1) - n_params(m0)  degrees of freedom

Each model class says when two of its fits are comparable (same rows and response; for GLMMs the same family and
``nagq``), when one is nested in the other, and which fits to compare (linear mixed models fitted by REML whose
fixed effects differ are refitted by ML first, as lme4 does); :func:`lrt` does the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ...outcomes import ChiSquareTest
from ..structure.errors import MixedModelError
from ..structure.model import MixedModel, check_fitted


@dataclass
class LRTResult(ChiSquareTest):
    """A generalized likelihood ratio test of nested mixed models: chi2 on df degrees of freedom and its p-value
    (:class:`~vrs_helpers.outcomes.ChiSquareTest`: ``statistic`` = chi2; ``as_dict()`` is summary.json's ``glrt``),
    the two log-likelihoods and formulas (restricted model first), whether REML fits were refitted by ML, and
    ``method`` (how the likelihoods were computed: "GLRT (chi-square)" for linear mixed models, the Laplace or
    quadrature approximation for GLMMs)."""

    chi2: float
    df: int
    p_value: float
    loglik0: float
    loglik1: float
    refitted_ml: bool
    formula0: str
    formula1: str
    method: str = "GLRT (chi-square)"

    @property
    def formulas(self) -> tuple[str, str]:
        """(restricted, general) formula."""
        return (self.formula0, self.formula1)

    @property
    def logliks(self) -> tuple[float, float]:
        """(restricted, general) log-likelihood."""
        return (self.loglik0, self.loglik1)

    def __repr__(self) -> str:
        note = " (REML fits refitted by ML)" if self.refitted_ml else ""
        return f"LRTResult(chi2={self.chi2:.4f}, df={self.df}, p={self.p_value:.4g}{note})"

    def to_frame(self) -> pd.DataFrame:
        """lme4's anova table: formula and logLik per model, chi2, df and p on the general model's row."""
        return pd.DataFrame({"formula": [self.formula0, self.formula1], "logLik": [self.loglik0, self.loglik1],
                             "chi2": [np.nan, self.chi2], "df": [np.nan, self.df],
                             "p_value": [np.nan, self.p_value]}, index=["m0", "m1"])

    def _repr_html_(self) -> str:
        return self.to_frame().to_html(float_format=lambda x: f"{x:.6g}") + (
            "<p><i>REML fits with different fixed effects were refitted by ML, as lme4's anova does.</i></p>"
            if self.refitted_ml else "")


def lrt(m0: MixedModel, m1: MixedModel) -> LRTResult:
    """Likelihood ratio test of m0 (restricted) against m1 (general), as lme4's ``anova(m0, m1)``: two fitted
    linear mixed models (:func:`vrs_helpers.mixed.fit`) or two GLMMs (:func:`vrs_helpers.mixed.glmer`); the order
    does not matter (the model with fewer parameters is the restricted one).

    REML fits whose fixed effects differ are refitted by ML first (REML likelihoods of different fixed effects
    are not comparable). Models on different data, of different kinds or families, or not nested are refused.
    """
    check_fitted(m0, m1)
    if type(m0) is not type(m1):
        raise MixedModelError(f"A likelihood ratio test compares two models of one kind; got a "
                              f"{type(m0).__name__} and a {type(m1).__name__}.")
    m0._check_comparable(m1)
    if m0.n_params > m1.n_params:
        m0, m1 = m1, m0
    if m0.n_params == m1.n_params or not m0._nested_in(m1):
        raise MixedModelError(f"The models are not nested: {m0.formula!r} vs {m1.formula!r}. The restricted model's "
                              f"fixed and random terms must be a subset of the general model's.")
    m0, m1, refit = m0._comparable_fits(m1)
    chi2 = max(0.0, 2.0 * (m1.loglik - m0.loglik))
    df = m1.n_params - m0.n_params
    return LRTResult(chi2, df, float(stats.chi2.sf(chi2, df)), m0.loglik, m1.loglik, refit, m0.formula, m1.formula,
                     m0.lrt_method)
