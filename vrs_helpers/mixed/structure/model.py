"""What the mixed-model objects share: the :class:`MixedModel` base and the optimizer's :class:`OptSummary`.

As in MixedModels.jl (Bates et al.), a model is an object built from a formula and data and then fitted in place:
:class:`~vrs_helpers.mixed.models.results.LinearMixedModel` (lme4's ``lmer``, MixedModels.jl's ``LinearMixedModel``) and
:class:`~vrs_helpers.mixed.models.glmm.GeneralizedLinearMixedModel` (lme4's ``glmer``, MixedModels.jl's
``GeneralizedLinearMixedModel``) are both :class:`MixedModel` s, with the same names for the same quantities:
``loglik``, ``deviance``, ``aic``, ``bic``, ``n_params``, ``nobs``, ``dof_residual``, ``coef`` / ``fixef``,
``vcov``, ``varcorr``, ``theta`` and ``optsum``. :func:`vrs_helpers.mixed.fit` and :func:`vrs_helpers.mixed.glmer`
build and fit one in a call, as ``fit(MixedModel, formula, data)`` does in Julia.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .errors import MixedModelError


@dataclass
class OptSummary:
    """What the optimizer did (MixedModels.jl's ``OptSummary``; lme4's ``m@optinfo``).

    ``initial`` and ``final`` are the optimized parameters at the start and at the end: theta in lme4's order (the
    order of the model's ``theta``) for a linear mixed model; (theta, beta) for a GLMM, whose theta is optimized
    without sign (the deviance is even in each theta_k; the model reports |theta|). ``lowerbd`` are their lower
    bounds (-inf: none), ``fmin`` the objective at ``final`` (the deviance the optimizer minimized: the REML
    criterion or -2 log-likelihood), ``feval`` the number of objective evaluations (with gradient), ``converged``
    and ``message`` the optimizer's verdict and report, ``tolerances`` the stopping rules used.
    """

    optimizer: str
    initial: np.ndarray
    final: np.ndarray
    fmin: float
    feval: int
    converged: bool
    message: str
    tolerances: dict = field(default_factory=dict)
    lowerbd: np.ndarray | None = None

    def __repr__(self) -> str:
        def vec(x):
            return "[" + ", ".join(f"{v:.6g}" for v in np.asarray(x, dtype=float)) + "]"

        tol = ", ".join(f"{k} = {v:g}" for k, v in self.tolerances.items())
        return "\n".join([
            f"OptSummary ({self.optimizer})",
            f"  initial parameters: {vec(self.initial)}",
            f"  final parameters:   {vec(self.final)}",
            f"  lower bounds:       {vec(self.lowerbd) if self.lowerbd is not None else '-'}",
            f"  tolerances:         {tol or '-'}",
            f"  evaluations: {self.feval}; final objective: {self.fmin:.8g}; "
            f"{'converged' if self.converged else 'NOT converged'}: {self.message}"])


class MixedModel:
    """A mixed model: formula, data, ``fit()`` and, once fitted, lme4's / MixedModels.jl's quantities.

    Subclasses set ``formula``, ``nobs`` and ``family`` (a :class:`~vrs_helpers.mixed.likelihood.families.Family`) when
    built;
    ``fit()`` sets ``theta`` (lme4's names and order), ``fixed_effects`` (estimate, se, z, ...), ``vcov``,
    ``varcorr`` (lme4's ``as.data.frame(VarCorr(m))``), ``ranef``, ``loglik``, ``deviance`` and ``optsum``.
    Reading one of those before the fit raises :class:`~vrs_helpers.mixed.structure.errors.MixedModelError`.
    """

    #: set by fit(); read before it, they raise a MixedModelError saying so
    _FITTED = ("theta", "fixed_effects", "vcov", "varcorr", "ranef", "loglik", "deviance", "optsum")

    formula: str
    nobs: int

    def __getattr__(self, name: str):
        if name in type(self)._FITTED:
            formula = self.__dict__.get("formula", "")
            raise MixedModelError(f"The model {formula!r} is not fitted yet: call its fit() first (or build and fit "
                                  f"it in one call with vrs_helpers.mixed.fit / glmer).")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def fit(self, *args, **kwargs) -> MixedModel:
        """Fit the model in place and return it (MixedModels.jl's ``fit!``)."""
        raise NotImplementedError

    @property
    def is_fitted(self) -> bool:
        return "optsum" in self.__dict__

    # --- counts (lme4's logLik df; StatsAPI's dof, nobs, dof_residual)
    @property
    def n_params(self) -> int:
        """Parameters counted by lme4's ``logLik`` df (MixedModels.jl's ``dof``): fixed effects, variance
        parameters theta and, where the family has one, the residual scale."""
        return len(self.fixed_effects) + len(self.theta) + int(self.family.dispersion)

    @property
    def dof_residual(self) -> int:
        """nobs - n_params (MixedModels.jl's ``dof_residual``)."""
        return self.nobs - self.n_params

    # --- likelihood-based criteria
    @property
    def aic(self) -> float:
        """-2 logLik + 2 n_params."""
        return -2.0 * self.loglik + 2 * self.n_params

    @property
    def bic(self) -> float:
        """-2 logLik + log(nobs) n_params."""
        return -2.0 * self.loglik + math.log(self.nobs) * self.n_params

    # --- fixed effects
    @property
    def coef(self) -> pd.Series:
        """The fixed-effects estimates, named (lme4's ``fixef``; MixedModels.jl's ``coef``)."""
        return self.fixed_effects["estimate"].copy()

    @property
    def fixef(self) -> pd.Series:
        """The fixed-effects estimates (as :attr:`coef`: the fixed-effects model matrix has full rank)."""
        return self.coef

    # --- the optimizer's verdict (kept under the names the results had before OptSummary)
    @property
    def converged(self) -> bool:
        return self.optsum.converged

    @property
    def n_evaluations(self) -> int:
        return self.optsum.feval

    @property
    def optimizer_message(self) -> str:
        return self.optsum.message


def check_fitted(*models) -> None:
    """Raise a :class:`MixedModelError` naming the first model in ``models`` that is not a fitted mixed model."""
    for m in models:
        if not isinstance(m, MixedModel):
            raise MixedModelError(f"Expected a fitted mixed model (vrs_helpers.mixed.fit or glmer), got "
                                  f"{type(m).__name__}.")
        if not m.is_fitted:
            m.optsum  # noqa: B018 - raises the not-fitted error
