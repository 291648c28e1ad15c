"""Binary evaluation scores (is the prediction correct?) on the latent scale of a logistic mixed model.

A linear mixed model fitted to 0/1 scores puts its variance components and contrasts on the probability scale,
where the variance of a score is tied to its mean, p (1 - p). A generalized linear mixed model (lme4's ``glmer``,
Bates et al. 2015; :func:`vrs_helpers.mixed.glmer`) reads a binary score as the sign of a latent continuous score:

    correct = 1  if  eta + e > 0,   eta = x' beta + b_item + b_run + ...,   e ~ standard logistic (variance pi^2/3)

which is the same model as P(correct) = logistic(eta). On this latent scale the random-effect variances and the
residual pi^2/3 add up to the variance of the latent score, as the variance components of an LMM add up to the
variance of the scores: the *latent-scale* decomposition of Nakagawa & Schielzeth (2010, "Repeatability for
Gaussian and non-Gaussian data: a practical guide for biologists", Biological Reviews 85: 935-956, the
distribution-specific variance pi^2/3 of the logit link, 1 of the probit link) and of Nakagawa, Johnson &
Schielzeth (2017, J. R. Soc. Interface 14: 20170213); the threshold reading is Snijders & Bosker's (2012,
*Multilevel Analysis*, 2nd ed., section 17.3).

The book's reliability coefficient (Definition 3.2, eq. 3.11/3.12, section 3.3.3) and its decision study then apply
unchanged to the latent components (:func:`latent_variance_components` returns a table that
:func:`vrs_helpers.book.reliability.phi` reads): for ``correct ~ 1 + (1|item) + (1|seed)``,

    phi = s_item^2 / (s_item^2 + s_seed^2 / n_seed + (pi^2/3) / n_seed),

the reliability of an item's mean *latent* score over n_seed runs. It is not the reliability of the observed
proportion correct (on the observed scale the coefficient is lower, Nakagawa & Schielzeth 2010, section 5).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import mixed
from ..errors import VRSError
from ..mixed.likelihood import families
from .reliability import RESIDUAL

FAMILIES = ("gaussian", "binomial")  # the families of the book's workflow (vrs analyze, compare_systems)


class BinaryDataError(VRSError, ValueError):
    """Bad binary (0/1 or successes/trials) evaluation data for a binomial model."""


def _series(values) -> pd.Series:
    if hasattr(values, "compute") and hasattr(values, "dask"):
        values = values.compute()
    return values if isinstance(values, pd.Series) else pd.Series(np.asarray(values).ravel())


def detect_family(values) -> str:
    """``"binomial"`` when every (non-missing) value is 0 or 1 (bool, or numeric 0/1), else ``"gaussian"``.

    ``values``: a pandas/dask Series, an array or a list. A column with a single value (all correct) counts as
    binary; an empty one, strings and any other number make it ``"gaussian"``.
    """
    s = _series(values).dropna()
    if s.empty:
        return "gaussian"
    if pd.api.types.is_bool_dtype(s.dtype) or (s.dtype == object and s.map(type).isin([bool, np.bool_]).all()):
        return "binomial"
    if not pd.api.types.is_numeric_dtype(s.dtype):
        return "gaussian"
    return "binomial" if bool(s.isin([0, 1]).all()) else "gaussian"


def resolve_family(family: str, values) -> tuple[str, str | None]:
    """``family`` checked (``"gaussian"``, ``"binomial"``; ``"auto"``: :func:`detect_family` of ``values``) and a note
    saying what ``"auto"`` chose (None otherwise)."""
    if str(family).lower() == "auto":
        fam = detect_family(values)
        return fam, ("the response is 0/1: fitted as binary (binomial GLMM, logit link, latent scale)"
                     if fam == "binomial" else None)
    try:
        fam = families.get(family).name
    except mixed.MixedModelError:
        fam = None
    if fam not in FAMILIES:
        raise BinaryDataError(f"family must be 'gaussian', 'binomial' or 'auto'; got {family!r}.")
    return fam, None


def binomial_response(data: pd.DataFrame, response: str, trials: str | None = None) -> str:
    """Check a binomial response and return the left-hand side of its glmer formula.

    Without ``trials`` the response must be 0/1 (or True/False) per row; with ``trials`` (a column name) the
    response counts successes out of ``trials`` per row (integers, 0 <= successes <= trials, trials >= 1) and the
    left side is lme4's ``cbind(successes, trials - successes)``. Anything else raises :class:`BinaryDataError`
    saying which rows are wrong.
    """
    for c in [response] + ([trials] if trials is not None else []):
        if c not in data.columns:
            raise BinaryDataError(f"Column {c!r} is not in the data; available: {', '.join(map(str, data.columns))}.")
    y = _series(data[response])
    if y.isna().any():
        raise BinaryDataError(f"The response {response!r} has {int(y.isna().sum())} missing values; drop them first.")
    if not (pd.api.types.is_bool_dtype(y.dtype) or pd.api.types.is_numeric_dtype(y.dtype)):
        raise BinaryDataError(f"A binomial response must be 0/1 or True/False; {response!r} has dtype {y.dtype}.")
    yv = y.to_numpy(float)
    if trials is None:
        bad = ~np.isin(yv, (0.0, 1.0))
        if bad.any():
            example = ", ".join(f"{v:g}" for v in pd.unique(yv[bad])[:3])
            raise BinaryDataError(
                f"family='binomial' needs a 0/1 response per row; {response!r} has {int(bad.sum())} other values "
                f"(e.g. {example}). Use family='gaussian' for continuous scores, or give trials= (a column of "
                "trials per row) when the response counts successes.")
        return response
    n = _series(data[trials])
    if n.isna().any() or not pd.api.types.is_numeric_dtype(n.dtype):
        raise BinaryDataError(f"The trials column {trials!r} must be numeric without missing values.")
    nv = n.to_numpy(float)
    problems = {"trials that are not whole numbers >= 1": (nv < 1) | (nv != np.round(nv)),
                "successes that are not whole numbers": yv != np.round(yv),
                "successes below 0 or above the trials": (yv < 0) | (yv > nv)}
    found = [f"{int(m.sum())} row(s) with {what}" for what, m in problems.items() if m.any()]
    if found:
        raise BinaryDataError(f"Successes {response!r} out of trials {trials!r} are not consistent: "
                              f"{'; '.join(found)}. Each row needs 0 <= successes <= trials, whole numbers.")
    return f"cbind({response}, {trials} - {response})"


def latent_residual_variance(link: str = "logit") -> float:
    """The residual variance of the latent scale: pi^2/3 for the logit link (the variance of the standard logistic
    distribution), 1 for probit (Nakagawa & Schielzeth 2010): the binomial family's link's
    (:attr:`vrs_helpers.mixed.likelihood.families.Link.latent_residual`)."""
    try:
        if link is None:
            raise mixed.MixedModelError("no link")
        return families.get("binomial", link).latent_residual_variance()
    except mixed.MixedModelError:
        raise BinaryDataError(f"link must be 'logit' or 'probit'; got {link!r}.") from None


@dataclass
class LatentVariance:
    """Variance components of a binomial GLMM on the latent scale, with the residual of the link.

    ``variance_components`` has the layout of :attr:`vrs_helpers.mixed.MixedModelResult.variance_components`
    (index: lme4's group names and ``"Residual"``; columns variance, sd, percent), so
    :func:`vrs_helpers.book.reliability.phi` and :func:`~vrs_helpers.book.reliability.decision_study` accept this
    object or
    that table. ``Residual`` is :func:`latent_residual_variance` of the link, not an estimate; with successes out of
    trials it is the residual of a single trial.
    """

    formula: str
    link: str
    variance_components: pd.DataFrame
    residual: float
    model: object = field(repr=False)  # vrs_helpers.mixed.GLMMResult

    def to_frame(self) -> pd.DataFrame:
        return self.variance_components.copy()

    def __repr__(self) -> str:
        parts = ", ".join(f"{k} {v:.4g}" for k, v in self.variance_components["variance"].items())
        return f"LatentVariance({self.formula!r}, {self.link} link: {parts})"


def latent_table(model, link: str = "logit") -> pd.DataFrame:
    """The variance components of a fitted binomial GLMM (:func:`vrs_helpers.mixed.glmer`, random intercepts) with
    the latent residual variance of ``link`` added: variance, sd, percent of the total; index lme4's names."""
    vc = model.varcorr
    var = pd.Series(vc["vcov"].to_numpy(float), index=[str(g) for g in vc["grp"]], dtype=float)
    var[RESIDUAL] = latent_residual_variance(link)
    out = pd.DataFrame({"variance": var, "sd": np.sqrt(var), "percent": 100 * var / var.sum()})
    out.index.name = "component"
    return out


def latent_variance_components(data: pd.DataFrame, response: str, item: str, replications=(),
                               trials: str | None = None, link: str = "logit") -> LatentVariance:
    """Fit ``response ~ 1 + (1|item) + (1|R) + ...`` as a binomial GLMM (Laplace, as ``glmer``) and return its
    variance components on the latent scale plus the residual pi^2/3 (logit) or 1 (probit).

    The binary counterpart of the per-system REML fit of ``vrs analyze``; ``phi(result, item, n={R: n_R})`` is then
    the book's reliability coefficient (Definition 3.2) on the latent scale. ``replications``: columns whose levels
    are the runs (seed, meta-parameter setting), each needing at least two levels. ``trials``: see
    :func:`binomial_response`. Bad input raises :class:`BinaryDataError`.
    """
    if hasattr(data, "compute") and hasattr(data, "dask"):
        data = data.compute()
    replications = [replications] if isinstance(replications, str) else list(replications)
    for c in [item, *replications]:
        if c not in data.columns:
            raise BinaryDataError(f"Column {c!r} is not in the data; available: {', '.join(map(str, data.columns))}.")
    lhs = binomial_response(data, response, trials)
    latent_residual_variance(link)  # an unknown link fails here, before the fit
    for r in replications:
        if data[r].nunique() < 2:
            raise BinaryDataError(f"The replication column {r!r} has a single level: its variance is not estimable; "
                                  "leave it out of replications, or add runs.")
    per_item = (data[trials] if trials is not None else pd.Series(1, index=data.index)).groupby(data[item]).sum()
    if per_item.max() < 2:
        raise BinaryDataError("Every item has a single binary score (one run): in a binomial GLMM the item variance is "
                              "then not identifiable (one Bernoulli draw per item tells only P(correct)). Add runs.")
    formula = f"{lhs} ~ 1 + (1|{item})" + "".join(f" + (1|{r})" for r in replications)
    d = data.assign(**{c: data[c].astype(str) for c in [item, *replications]})
    try:
        fit = mixed.glmer(formula, d, family="binomial", link=link)
    except mixed.MixedModelError as e:
        raise BinaryDataError(f"The binomial GLMM {formula!r} cannot be fitted: {e}") from e
    return LatentVariance(formula, link, latent_table(fit, link), latent_residual_variance(link), fit)
