"""Response families and link functions of the mixed models, as small classes: a family plugs in at one place.

A generalized linear mixed model (:class:`~vrs_helpers.mixed.models.glmm.GeneralizedLinearMixedModel`) needs of its
family only what is here: the inverse link mu = g^-1(eta) and its derivatives, the variance function V(mu), the
conditional log-likelihood -2 log p(y | mu) with its constant, the response's range, and the deviance residuals;
the book's latent-scale reading of a binary score (chapter 3; :mod:`vrs_helpers.book.binary`) needs the residual
variance of the link's latent threshold model. These are R's ``family`` objects (``binomial(link = "probit")``,
``poisson()``: ``linkinv``, ``mu.eta``, ``variance``, ``dev.resids``) and MixedModels.jl's / GLM.jl's
``Distribution`` + ``Link`` pairs (``Bernoulli()``/``Binomial()`` with ``LogitLink()``, ``ProbitLink()``;
``Poisson()`` with ``LogLink()``). ``gaussian`` with the identity link is the linear mixed model
(:func:`vrs_helpers.mixed.fit`, lme4's ``lmer``), listed so that every family name resolves through :func:`get`.

Adding a family: a :class:`Family` subclass with its links, variance, log-likelihood and response check, and its
entry in :data:`FAMILIES`; a link: a :class:`Link` subclass in :data:`LINKS`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ..structure.errors import MixedModelError

_EPS = np.finfo(float).eps


# ------------------------------------------------------------------------------------------------ links

class Link:
    """A link function g, eta = g(mu): its inverse, d mu / d eta and (d^2 mu / d eta^2) / (d mu / d eta).

    ``latent_residual`` is the variance of the residual of the link's latent threshold model (a binary y is 1 when
    eta + e > 0): pi^2/3 for logit (the standard logistic distribution), 1 for probit (Nakagawa & Schielzeth 2010,
    Biological Reviews 85: 935-956); None where there is no such constant."""

    name = ""
    latent_residual: float | None = None

    def inverse(self, eta):
        raise NotImplementedError

    def mu_eta(self, eta, mu):
        """d mu / d eta at eta (mu = the inverse link at eta)."""
        raise NotImplementedError

    def dlog_mu_eta(self, eta, mu):
        """(d^2 mu / d eta^2) / (d mu / d eta), the slope of log mu'(eta)."""
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return isinstance(other, Link) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("link", self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __str__(self) -> str:
        return self.name


class LogitLink(Link):
    """log(mu / (1 - mu)): R's ``binomial()`` default, GLM.jl's ``LogitLink``."""

    name = "logit"
    latent_residual = math.pi ** 2 / 3.0

    def inverse(self, eta):
        return special.expit(eta)

    def mu_eta(self, eta, mu):
        return mu * (1.0 - mu)

    def dlog_mu_eta(self, eta, mu):
        return 1.0 - 2.0 * mu


class ProbitLink(Link):
    """Phi^-1(mu), the standard normal quantile: R's ``binomial(link = "probit")``, GLM.jl's ``ProbitLink``."""

    name = "probit"
    latent_residual = 1.0

    def inverse(self, eta):
        return special.ndtr(eta)

    def mu_eta(self, eta, mu):
        return np.maximum(np.exp(-0.5 * eta * eta) / math.sqrt(2.0 * math.pi), _EPS)

    def dlog_mu_eta(self, eta, mu):
        return -eta


class LogLink(Link):
    """log(mu): R's ``poisson()`` default, GLM.jl's ``LogLink`` (eta capped at 700 so that exp stays finite)."""

    name = "log"

    def inverse(self, eta):
        return np.exp(np.minimum(eta, 700.0))

    def mu_eta(self, eta, mu):
        return mu

    def dlog_mu_eta(self, eta, mu):
        return np.ones_like(mu)


class IdentityLink(Link):
    """mu = eta: the linear mixed model's (R's ``gaussian()``, GLM.jl's ``IdentityLink``)."""

    name = "identity"

    def inverse(self, eta):
        return eta

    def mu_eta(self, eta, mu):
        return np.ones_like(eta)

    def dlog_mu_eta(self, eta, mu):
        return np.zeros_like(eta)


LINKS: dict[str, type[Link]] = {c.name: c for c in (LogitLink, ProbitLink, LogLink, IdentityLink)}


# ------------------------------------------------------------------------------------------------ families

class Family:
    """A response distribution with its link (R's ``family`` object; MixedModels.jl's distribution + link).

    ``links`` lists the links the family takes, its canonical link first (the default). ``dispersion``: whether the
    model estimates a scale parameter (the residual SD of the gaussian family; binomial and Poisson have none),
    which lme4 and MixedModels.jl count among the parameters of AIC and BIC."""

    name = ""
    links: tuple = ()
    dispersion = False

    def __init__(self, link: str | Link | None = None):
        name = self.links[0] if link is None else (link.name if isinstance(link, Link) else str(link))
        if name not in self.links:
            raise MixedModelError(f"The {self.name} family takes the link(s) {', '.join(self.links)}, not {link!r}.")
        self.link: Link = LINKS[name]()

    @property
    def canonical(self) -> bool:
        """The canonical link: the Fisher weights are the observed ones, and scoring is Newton's method."""
        return self.link.name == self.links[0]

    def __eq__(self, other) -> bool:
        return isinstance(other, Family) and (other.name, other.link) == (self.name, self.link)

    def __hash__(self) -> int:
        return hash((self.name, self.link.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(link={self.link.name!r})"

    def __str__(self) -> str:
        return self.name

    # --- the distribution
    def clip(self, mu):
        """mu kept inside the family's open range (rounding at the ends)."""
        return mu

    def mu(self, eta):
        """The mean at linear predictor eta: the inverse link, kept inside the family's range."""
        return self.clip(self.link.inverse(eta))

    def variance(self, mu):
        """The variance function V(mu) (Var y = phi V(mu) / weight)."""
        raise NotImplementedError

    def dvariance(self, mu):
        """d V / d mu."""
        raise NotImplementedError

    def check_response(self, y) -> None:
        """Raise :class:`MixedModelError` when a response value is outside the family's range."""

    def loglik_constant(self, y, wt):
        """The part of log p(y | mu) per row that does not depend on mu (lme4's logLik includes it)."""
        raise NotImplementedError

    def m2loglik(self, y, wt, mu, const, binary: bool = False):
        """-2 log p(y | mu) per row (``const`` from :meth:`loglik_constant`; ``binary``: every y is 0 or 1)."""
        raise NotImplementedError

    def unit_deviance(self, y, mu):
        """d(y, mu) = 2 (log p(y | y) - log p(y | mu)) per unit of prior weight (R's ``dev.resids`` / weight)."""
        raise NotImplementedError

    def deviance_residuals(self, y, mu, wt=1.0):
        """sign(y - mu) sqrt(wt d(y, mu)) (R's ``residuals(glm, type = "deviance")``)."""
        y, mu = np.asarray(y, dtype=float), np.asarray(mu, dtype=float)
        return np.sign(y - mu) * np.sqrt(np.maximum(wt * self.unit_deviance(y, mu), 0.0))

    # --- what penalized iteratively reweighted least squares needs
    def weights(self, eta, mu, wt):
        """Fisher weights w = wt mu'^2 / V and r / (y - mu) = wt mu' / V, for the score r = wt mu' (y - mu) / V
        (canonical links: wt V and wt)."""
        if self.canonical:
            return self._canonical_weights(mu, wt), wt
        d = self.link.mu_eta(eta, mu)
        v = self.variance(mu)
        return wt * d * d / v, wt * d / v

    def slopes(self, eta, mu, y, wt):
        """The observed weight -dr / d eta and dw / d eta (for the Laplace gradient). With a = mu''/mu' and
        t = mu' V' / V: -dr/d eta = w + wt mu' (y - mu) (t - a) / V and dw/d eta = w (2 a - t); for a canonical
        link a = t, so the observed weight is the Fisher weight w and dw/d eta = w V'."""
        if self.canonical:
            w = self._canonical_weights(mu, wt)
            return w, w * self.dvariance(mu)
        d, v = self.link.mu_eta(eta, mu), self.variance(mu)
        a = self.link.dlog_mu_eta(eta, mu)
        w = wt * d * d / v
        t = d * self.dvariance(mu) / v
        return w + wt * d * (y - mu) * (t - a) / v, -w * (t - 2.0 * a)

    def _canonical_weights(self, mu, wt):
        return wt * self.variance(mu)

    def latent_residual_variance(self) -> float:
        """The residual variance of the latent scale of this family's link (:attr:`Link.latent_residual`)."""
        v = self.link.latent_residual
        if v is None:
            raise MixedModelError(f"The {self.link.name} link of the {self.name} family has no constant latent "
                                  f"residual variance; the latent scale is defined for the logit and probit links.")
        return v


class Binomial(Family):
    """Binomial: y a proportion of ``wt`` trials (0/1 with one trial), V(mu) = mu (1 - mu); links logit (canonical)
    and probit. R's ``binomial()``, MixedModels.jl's ``Bernoulli()`` / ``Binomial()``."""

    name = "binomial"
    links = ("logit", "probit")

    def clip(self, mu):
        return np.clip(mu, _EPS, 1.0 - _EPS)

    def variance(self, mu):
        return mu * (1.0 - mu)

    def dvariance(self, mu):
        return 1.0 - 2.0 * mu

    def _canonical_weights(self, mu, wt):
        return wt * mu * (1.0 - mu)

    def check_response(self, y) -> None:
        if np.any(y < 0) or np.any(y > 1):
            raise MixedModelError("A binomial response must be 0/1, a proportion (with weights = trials) or "
                                  "cbind(successes, failures).")

    def loglik_constant(self, y, wt):
        k = np.round(wt * y)
        return special.gammaln(wt + 1) - special.gammaln(k + 1) - special.gammaln(wt - k + 1)

    def m2loglik(self, y, wt, mu, const, binary: bool = False):
        if binary:  # 0/1 responses: one logarithm per row
            return -2.0 * (wt * np.log(np.where(y > 0.5, mu, 1.0 - mu)) + const)
        return -2.0 * (wt * (y * np.log(mu) + (1.0 - y) * np.log1p(-mu)) + const)

    def unit_deviance(self, y, mu):
        return 2.0 * (special.xlogy(y, y / mu) + special.xlogy(1.0 - y, (1.0 - y) / (1.0 - mu)))


class Poisson(Family):
    """Poisson counts, V(mu) = mu; the log link (canonical). R's ``poisson()``, MixedModels.jl's ``Poisson()``."""

    name = "poisson"
    links = ("log",)

    def clip(self, mu):
        return np.maximum(mu, _EPS)

    def variance(self, mu):
        return mu

    def dvariance(self, mu):
        return np.ones_like(mu)

    def _canonical_weights(self, mu, wt):
        return wt * mu

    def slopes(self, eta, mu, y, wt):
        w = wt * mu  # V' = 1: dw / d eta = w
        return w, w

    def check_response(self, y) -> None:
        if np.any(y < 0) or np.any(y != np.round(y)):
            raise MixedModelError("A Poisson response must be non-negative counts.")

    def loglik_constant(self, y, wt):
        return -wt * special.gammaln(y + 1)

    def m2loglik(self, y, wt, mu, const, binary: bool = False):
        return -2.0 * (wt * (y * np.log(mu) - mu) + const)

    def unit_deviance(self, y, mu):
        return 2.0 * (special.xlogy(y, y / mu) - (y - mu))


class Gaussian(Family):
    """Normal responses with the identity link and a residual variance: the linear mixed model, fitted by
    :func:`vrs_helpers.mixed.fit` (lme4's ``lmer``; MixedModels.jl's ``LinearMixedModel``), not by ``glmer``."""

    name = "gaussian"
    links = ("identity",)
    dispersion = True

    def variance(self, mu):
        return np.ones_like(mu)

    def dvariance(self, mu):
        return np.zeros_like(mu)

    def check_response(self, y) -> None:
        if not np.all(np.isfinite(y)):
            raise MixedModelError("A gaussian response must be finite numbers.")

    def unit_deviance(self, y, mu):
        return (y - mu) ** 2


FAMILIES: dict[str, type[Family]] = {c.name: c for c in (Gaussian, Binomial, Poisson)}


def get(family: str | Family = "binomial", link: str | Link | None = None) -> Family:
    """The family object for a name (case-insensitive: ``"gaussian"``, ``"binomial"``, ``"poisson"``) and a link
    name (None: the family's canonical link). A :class:`Family` passes through (with ``link`` it must match)."""
    if isinstance(family, Family):
        if link is not None and str(link) != family.link.name:
            raise MixedModelError(f"The family {family!r} already has the {family.link.name} link, not {link!r}.")
        return family
    key = str(family).lower()
    if key not in FAMILIES:
        raise MixedModelError(f"family must be one of {', '.join(repr(k) for k in FAMILIES)}; got {family!r}.")
    return FAMILIES[key](link)
