"""Rasch (1PL) item difficulties of a 0/1 benchmark as a logistic mixed model (issue 55; book chapter 4's GLMMs):

    logit P(model m answers item i correctly) = a_m - d_i,     d_i ~ N(0, sigma_item^2)

fitted by the project's GLMM engine (:func:`vrs_helpers.mixed.glmer`, Laplace): the difficulty of item i is minus
its conditional mode, ``d_i = -b_i`` (positive: harder than the average item, in logits), its standard error the
conditional SD of the mode (lme4's ``ranef(m, condVar = TRUE)``: the Laplace posterior of ``b`` at the estimates,
which ignores the uncertainty of the fixed effects and variance). The models' abilities are

- ``models="random"`` (default): crossed random effects, ``correct ~ 1 + (1|model) + (1|item)`` - fast for any
  number of models (the model effects are one more small block of the blocked Cholesky);
- ``models="fixed"``: one fixed effect per model, ``correct ~ 0 + model + (1|item)`` (lme4's form of the Rasch
  model with random items; slow beyond a few dozen models: every model is a parameter of the optimizer).

With many items per model the two give nearly the same difficulties (the model effects are barely shrunk); both
equal lme4's (tests/reference/items_rasch.R). The runs of a model are repeated answers to the same item: the fit
uses the counts of correct answers per model and item (binomial with that many trials; the same likelihood as
the rows, up to a constant).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import linalg

from ... import mixed
from .matrix import ItemMatrix

MODELS = ("random", "fixed")


@dataclass
class RaschFit:
    """Item difficulties with SEs (``items``: item, difficulty, difficulty_se), model abilities (``models``: model,
    ability), the variance components on the logit scale (``variances``) and the fitted GLMM (``fit``)."""

    items: pd.DataFrame
    models: pd.DataFrame
    variances: dict
    formula: str
    fit: object = field(default=None, repr=False)
    warnings: list = field(default_factory=list)   # the fit's warnings (non-convergence: all-right / all-wrong)


def _cond_var(fit) -> dict:
    """The conditional variances of the random effects b = Lambda u at the estimates: theta^2 times the diagonal of
    (L L')^-1, from the engine's blocked Cholesky at the final PIRLS (lme4's condVar): the first (largest) term's
    block is 1 / d + rows of D^-1 B S^-1 B' D^-1, the others the diagonal of S^-1. NaN where the engine factored
    the model otherwise (a nested pair of terms)."""
    obj = fit.objective
    K = obj.K
    par = np.asarray(fit.optsum.final, float)
    theta, beta = par[:K], par[K:]
    obj.pred = None
    *_, fac = obj.pirls(theta, beta)
    if not hasattr(fac, "d"):
        return {name: np.full(size, np.nan) for name, size in zip(fit.ngroups, obj.sizes, strict=True)}
    if fac.cf is None:
        diag = 1.0 / fac.d
    else:
        s_inv = linalg.cho_solve(fac.cf, np.eye(fac.cf[0].shape[0]), check_finite=False)
        first = 1.0 / fac.d + np.einsum("ij,jk,ik->i", fac.Bd, s_inv, fac.Bd, optimize=True)
        diag = np.concatenate([first, np.diag(s_inv)])
    out = {}
    for k, (name, size) in enumerate(zip(fit.ngroups, obj.sizes, strict=True)):
        lo = int(obj.offs[k])
        out[name] = theta[k] ** 2 * diag[lo:lo + size]
    return out


def rasch(m: ItemMatrix, models: str = "random") -> RaschFit:
    """The Rasch difficulties of a 0/1 :class:`~.matrix.ItemMatrix` (module docstring)."""
    if models not in MODELS:
        raise ValueError(f"models must be one of {', '.join(MODELS)}; got {models!r}.")
    if not m.binary:
        raise ValueError("The Rasch model needs 0/1 scores.")
    cell = m.model * m.n_items + m.item
    size = m.n_models * m.n_items
    trials = np.bincount(cell, minlength=size)
    right = np.bincount(cell, weights=m.score, minlength=size)
    keep = trials > 0
    mm, ii = np.divmod(np.nonzero(keep)[0], m.n_items)
    data = pd.DataFrame({"model": pd.Categorical.from_codes(mm, categories=m.models),
                         "item": pd.Categorical.from_codes(ii, categories=m.items),
                         "share": right[keep] / trials[keep], "trials": trials[keep].astype(float)})
    formula = ("share ~ 1 + (1|model) + (1|item)" if models == "random" and m.n_models >= 2
               else "share ~ 0 + model + (1|item)" if m.n_models >= 2 else "share ~ 1 + (1|item)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = mixed.glmer(formula, data, family="binomial", weights="trials")
    said = list(dict.fromkeys(f"Rasch fit: {w.message}" for w in caught
                              if issubclass(w.category, UserWarning)
                              and not issubclass(w.category, mixed.SingularFitWarning)))
    cv = _cond_var(fit)
    b = fit.ranef["item"].reindex(m.items)
    items = pd.DataFrame({"item": m.items, "difficulty": -b.to_numpy(),
                          "difficulty_se": np.sqrt(pd.Series(cv["item"], index=fit.ranef["item"].index)
                                                   .reindex(m.items).to_numpy())})
    fe = fit.fixed_effects["estimate"]
    if "model" in fit.ranef:
        ability = fe.iloc[0] + fit.ranef["model"].reindex(m.models).to_numpy()
    elif m.n_models >= 2:
        ability = np.array([fe.get(f"model{v}", np.nan) for v in m.models])
    else:
        ability = np.array([fe.iloc[0]])
    variances = {str(g): float(v) for g, v in zip(fit.varcorr["grp"], fit.varcorr["vcov"], strict=True)}
    return RaschFit(items, pd.DataFrame({"model": m.models, "ability": ability}), variances,
                    formula.replace("share", "correct"), fit, said)
