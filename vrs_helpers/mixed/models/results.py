"""The linear mixed model: :class:`LinearMixedModel` (lme4's ``lmer``, MixedModels.jl's ``LinearMixedModel``).

    y = X beta + Z b + eps,   b ~ N(0, sigma^2 Lambda(theta) Lambda(theta)'),   eps ~ N(0, sigma^2 I)

A model is built from a formula and data - one pass over the rows into its sufficient statistics
(:func:`.accumulate.accumulate`: a DataFrame, chunks, a pyarrow Dataset or a dask DataFrame) - and fitted in place
by minimizing the profiled REML or ML deviance over theta (:mod:`.optimizer`, :mod:`.deviance`); the fitted model
carries lme4's quantities. :func:`fit` and :func:`fit_stats` build and fit one in a call.
"""

from __future__ import annotations

import html
import math
import warnings

import numpy as np
import pandas as pd

from ...threads import blas_limit
from ..inference import ddf as ddf_tests
from ..likelihood import families, nested
from ..likelihood.deviance import BlockDeviance, Deviance, tri_solve
from ..likelihood.optimizer import moment_start, optimize
from ..structure.accumulate import accumulate
from ..structure.design import SufficientStats, design_rows
from ..structure.errors import (
    SINGULAR_TOL,
    AliasedFactorsWarning,
    ConvergenceWarning,
    MixedModelError,
    SingularFitWarning,
)
from ..structure.factor_slopes import expand
from ..structure.model import MixedModel, check_fitted

METHODS = ("REML", "ML")


def _fmt_table(df: pd.DataFrame) -> str:
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        return df.to_string()


class LinearMixedModel(MixedModel):
    """A linear mixed model (lme4's ``lmer``; MixedModels.jl's ``LinearMixedModel``), fitted by REML or ML.

    ``LinearMixedModel(formula, data, method="REML")`` reads the data once into the model's sufficient statistics
    (``stats``); :meth:`fit` optimizes theta and sets lme4's quantities: ``theta`` (relative covariance factors,
    named as lme4 names them: ``g.(Intercept)``, ``g.x.(Intercept)``, ``g.x``), ``sigma``, ``fixed_effects``
    (estimate, se, z), ``vcov``, ``varcorr`` (lme4's ``as.data.frame(VarCorr(m))``: grp, var1, var2, vcov, sdcor),
    ``variance_components`` (random-intercept models: variance, sd and percent of the total per component, book
    chapter 3; with random slopes ``varcorr``), ``ranef`` (conditional modes per grouping), ``loglik``,
    ``deviance`` (-2 logLik; the REML criterion of a REML fit), ``singular``, ``warnings`` and ``optsum``
    (:class:`~vrs_helpers.mixed.structure.model.OptSummary`). ``data`` may be rows (a DataFrame: fitted values,
    residuals
    and factor slopes need them), chunks of rows, a pyarrow Dataset or a dask DataFrame.
    """

    family = families.Gaussian()
    _FITTED = MixedModel._FITTED + ("sigma", "variance_components", "singular", "warnings")

    def __init__(self, formula: str, data=None, method: str = "REML", dropna: bool = False, *,
                 stats: SufficientStats | None = None):
        if method not in METHODS:
            raise MixedModelError(f"method must be 'REML' or 'ML'; got {method!r}.")
        self._data = None
        if stats is None:
            if data is None:
                raise MixedModelError("A linear mixed model needs data: rows, chunks of rows or a Dataset.")
            if isinstance(data, pd.DataFrame):  # random slopes of factors: R's model-matrix columns as slopes
                formula, data = expand(formula, data)
            stats = accumulate(formula, data, dropna=dropna)
            if isinstance(data, pd.DataFrame):
                f = stats.formula
                needed = list(dict.fromkeys([f.response] + f.fixed_variables + f.random_variables
                                            + f.random_covariates))
                self._data = data[needed].dropna() if dropna else data[needed]
        self.stats = stats
        self.method = method
        self.formula = stats.formula.text
        self.nobs = stats.n
        self.ngroups = {t.group_name: len(lv) for t, lv in zip(stats.terms, stats.levels, strict=True)}

    @classmethod
    def from_stats(cls, s: SufficientStats, method: str = "REML") -> LinearMixedModel:
        """The model of given sufficient statistics (:func:`.accumulate.accumulate`), not fitted yet."""
        return cls(s.formula.text, method=method, stats=s)

    def deviance_function(self) -> Deviance | BlockDeviance | nested.NestedDeviance:
        """The profiled deviance of theta (REML criterion or -2 log-likelihood): :class:`.deviance.Deviance` for
        random intercepts, :class:`.deviance.BlockDeviance` otherwise, or with a random intercept nested in another
        merged into one term over the outer levels (:class:`.nested.NestedDeviance`, ``(1|item) +
        (1|system:item)``): :func:`.nested.deviance`."""
        return nested.deviance(self.stats, self.method == "REML")

    def fit(self, theta0=None, blas_threads="auto") -> LinearMixedModel:
        """Minimize the profiled deviance over theta and set the fitted quantities (MixedModels.jl's ``fit!``).

        ``theta0`` starts the optimizer (internal order: the formula's terms); ``blas_threads``: "auto" (one BLAS
        thread when the dense blocks are small), an int, or None (the BLAS library's default). Returns the model.
        """
        s, method = self.stats, self.method
        reml = method == "REML"
        dev = self.deviance_function()
        fit_warnings: list[str] = []
        with blas_limit(dev.q_o + s.p, blas_threads):  # one BLAS thread where the dense blocks are small
            theta, optsum = optimize(dev, theta0)
            value, parts = dev.evaluate(theta)
            if parts is None:
                raise MixedModelError(f"The model {s.formula.text!r} could not be fitted: the deviance is not finite "
                                      f"at the optimum (a perfect fit, or a degenerate design).")
            RX, cbeta, r2 = parts[-3:]
            p, n = s.p, s.n
            sigma2 = r2 / (n - p if reml else n)
            sigma = math.sqrt(sigma2)
            beta = tri_solve(RX, cbeta, lower=False) if p else np.zeros(0)
            RXinv = tri_solve(RX, np.eye(p), lower=False) if p else np.zeros((0, 0))
            V = sigma2 * (RXinv @ RXinv.T)
            modes = dev.conditional_modes(theta, parts, beta)
        if not optsum.converged:
            fit_warnings.append(f"the optimizer did not report convergence: {optsum.message}")
            warnings.warn(f"Model failed to converge: {optsum.message}", ConvergenceWarning, stacklevel=3)
        se = np.sqrt(np.diag(V))
        fe = pd.DataFrame({"estimate": beta, "se": se, "z": beta / se}, index=s.fixed_names)
        fe.index.name = "term"
        ranef = {}
        for k, t in enumerate(s.terms):
            idx = pd.Index(s.levels[k], dtype=object)
            ranef[s.groups[k]] = (pd.Series(modes[k][:, 0], index=idx) if t.intercept_only
                                  else pd.DataFrame(modes[k], index=idx, columns=t.covariate_names))
        covs = _covariances(s, dev, theta, sigma2)
        varcorr = _varcorr(s, covs, sigma2)
        if s.intercepts_only:
            var = {g: float(covs[k][0, 0]) for k, g in enumerate(s.groups)}
            var["Residual"] = sigma2
            vc = pd.DataFrame({"variance": pd.Series(var)})
            vc["sd"] = np.sqrt(vc["variance"])
            vc["percent"] = 100 * vc["variance"] / vc["variance"].sum()
            vc.index.name = "component"
        else:
            vc = varcorr
        names = _theta_names(s, dev)
        lower = np.zeros(len(theta)) if isinstance(dev, Deviance) else dev.lower
        on_diag = lower == 0
        singular = bool((theta[on_diag] < SINGULAR_TOL).any())
        if singular:
            shown = [s.groups[k] if isinstance(dev, Deviance) else nm for k, nm in enumerate(names)]
            zero = [nm for nm, th, d in zip(shown, theta, on_diag, strict=True) if d and th < SINGULAR_TOL]
            msg = (f"boundary (singular) fit: the variance of {', '.join(zero)} is estimated as (nearly) zero; the "
                   f"data show no variation attributable to it beyond the other terms (lme4: see "
                   f"help('isSingular')).")
            fit_warnings.append(msg)
            warnings.warn(msg, SingularFitWarning, stacklevel=3)
        for a, b in _aliased_pairs(s):
            msg = (f"random factors {a} and {b} are aliased: their levels partition the data identically, so only "
                   f"the sum of their variances ({a} + {b}) is identified; the split between them is arbitrary.")
            fit_warnings.append(msg)
            warnings.warn(msg, AliasedFactorsWarning, stacklevel=3)
        pos = s.theta_positions()  # theta in lme4's order and names
        self.theta = pd.Series(theta[pos], index=[names[i] for i in pos])
        self.sigma = sigma
        self.fixed_effects = fe
        self.variance_components = vc
        self.varcorr = varcorr
        self.loglik = -0.5 * value
        self.deviance = value
        self.singular = singular
        self.vcov = pd.DataFrame(V, index=s.fixed_names, columns=s.fixed_names)
        self.ranef = ranef
        self.warnings = fit_warnings
        self.optsum = optsum
        return self

    @property
    def reml_criterion(self) -> float | None:
        return self.deviance if self.method == "REML" else None

    def summary(self) -> str:
        vc = self.variance_components.copy()
        lines = [
            f"Linear mixed model fit by {'REML' if self.method == 'REML' else 'maximum likelihood'} "
            "(vrs_helpers.mixed)",
            f"Formula: {self.formula}",
            f"{'REML criterion' if self.method == 'REML' else 'deviance'} = {self.deviance:.4f}; "
            f"logLik = {self.loglik:.4f}; AIC = {self.aic:.4f}; BIC = {self.bic:.4f}",
            f"Observations: {self.nobs}; groups: " + ", ".join(f"{k} {v}" for k, v in self.ngroups.items()),
            "", "Random effects:", _fmt_table(vc if "variance" in vc else self.varcorr), "", "Fixed effects:",
            _fmt_table(self.fixed_effects),
        ]
        if self.singular:
            lines.append("\nboundary (singular) fit: a variance component is estimated as (nearly) zero.")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def __repr__(self) -> str:
        if not self.is_fitted:
            return f"{type(self).__name__}({self.formula!r}, not fitted)"
        vc = ", ".join(f"{g}{'' if v1 == '(Intercept)' or pd.isna(v1) else '.' + str(v1)}"
                       f"{'' if pd.isna(v2) else '.' + str(v2)}={v:.4g}"
                       for g, v1, v2, v in self.varcorr[["grp", "var1", "var2", "vcov"]].itertuples(index=False))
        return (f"LinearMixedModel({self.formula!r}, {self.method}, n={self.nobs}, logLik={self.loglik:.3f}, "
                f"variances: {vc}{', singular' if self.singular else ''})")

    def _repr_html_(self) -> str:
        return ("<pre>" + html.escape(self.summary().split("Random effects:")[0]) + "</pre><b>Random effects</b>"
                + self.variance_components.to_html(float_format=lambda x: f"{x:.6g}")
                + "<b>Fixed effects</b>" + self.fixed_effects.to_html(float_format=lambda x: f"{x:.6g}"))

    def to_frame(self) -> pd.DataFrame:
        """Variance components (variance, sd, percent; random-intercept models) or lme4's VarCorr frame."""
        return self.variance_components.copy()

    # --- fitted values and residuals (need the rows)
    def predict(self, data: pd.DataFrame, include_random: bool = True) -> np.ndarray:
        """Predictions for rows of ``data``: X beta (+ the BLUPs of the random effects, 0 for new levels)."""
        s = self.stats
        X = design_rows(s, data)
        out = X @ self.fixed_effects["estimate"].to_numpy()
        if include_random:
            for t, name in zip(s.terms, s.groups, strict=True):
                g = t.group
                key = data[g[0]] if len(g) == 1 else data[list(g)].astype(str).agg(":".join, axis=1)
                b = self.ranef[name]
                if isinstance(b, pd.Series):
                    out = out + key.map(b).astype(float).fillna(0.0).to_numpy()
                    continue
                for cov, cname in zip(t.covariates, t.covariate_names, strict=True):
                    z = np.ones(len(data))
                    for v in cov:
                        z = z * data[v].to_numpy(dtype=float)
                    out = out + z * key.map(b[cname]).astype(float).fillna(0.0).to_numpy()
        return out

    @property
    def fitted(self) -> np.ndarray:
        check_fitted(self)
        if self._data is None:
            raise MixedModelError("Fitted values need the rows; this model was fitted from a stream of chunks. "
                                  "Use result.predict(chunk) on each chunk instead.")
        return self.predict(self._data)

    @property
    def residuals(self) -> np.ndarray:
        return self._data[self.stats.formula.response].to_numpy(dtype=float) - self.fitted

    # --- small-sample F tests of the fixed effects (REML fits; from the sufficient statistics)
    def anova(self, ddf: str | None = None, type=3) -> pd.DataFrame:  # noqa: A002 - lmerTest's name
        """lmerTest's anova table: an F test of every fixed-effect term's type III (default), II or I hypothesis
        with ``ddf="satterthwaite"`` (lmerTest's default) or ``"kenward-roger"`` (pbkrtest) denominator df; None:
        the registry's default (Kenward-Roger, as ``vrs analyze``): :func:`vrs_helpers.mixed.inference.ddf.anova`."""
        return ddf_tests.anova(self, ddf=ddf, type=type)

    def test(self, L, ddf: str | None = None, term: str = "contrast") -> ddf_tests.FTest:
        """F test of H0: L beta = 0 (L: q x p, or one contrast over ``fixed_effects.index``) with Satterthwaite's or
        Kenward-Roger's denominator df: :func:`vrs_helpers.mixed.inference.ddf.contrast_test`."""
        return ddf_tests.contrast_test(self, L, term=term, ddf=ddf)


    # --- likelihood ratio tests (:func:`vrs_helpers.mixed.inference.likelihood_ratio.lrt`)
    lrt_method = "GLRT (chi-square)"

    def ml_fit(self) -> LinearMixedModel:
        """The model fitted by ML: itself for an ML fit, else its statistics refitted by ML once and kept (lme4's
        anova refits REML fits; the tests of one comparison share the refit)."""
        if self.method == "ML":
            return self
        if self.__dict__.get("_ml") is None:
            self._ml = fit_stats(self.stats, "ML", theta0=warm_start(self.stats, self))
        return self._ml

    def _check_comparable(self, other: LinearMixedModel) -> None:
        s0, s1 = self.stats, other.stats
        if (s0.formula.response != s1.formula.response or s0.n != s1.n
                or not math.isclose(s0.yty, s1.yty, rel_tol=1e-12)
                or not math.isclose(s0.ysum, s1.ysum, rel_tol=1e-12, abs_tol=1e-12)):
            raise MixedModelError("The two models were fitted to different data (response, number of rows or values "
                                  "differ); a likelihood ratio test needs the same rows.")

    def _nested_in(self, general: LinearMixedModel) -> bool:
        """The fixed effects are a subset of the general model's, and every grouping is there with at least the
        same random coefficients, correlated as there."""
        def coefs(s):
            out: dict = {}
            for t in s.terms:
                out.setdefault(frozenset(t.group), set()).update(t.covariates)
            return out

        c0, c1 = coefs(self.stats), coefs(general.stats)
        return (set(self.stats.fixed_names) <= set(general.stats.fixed_names)
                and all(g in c1 and cov <= c1[g] for g, cov in c0.items()))

    def _comparable_fits(self, general: LinearMixedModel) -> tuple[LinearMixedModel, LinearMixedModel, bool]:
        """REML fits whose fixed effects differ refitted by ML (their REML likelihoods are not comparable), as
        lme4's anova does; and whether that happened."""
        m0, m1 = self, general
        if m0.method == "REML" or m1.method == "REML":
            if set(m0.stats.fixed_names) != set(m1.stats.fixed_names):
                return m0.ml_fit(), m1.ml_fit(), True
            if m0.method != m1.method:
                raise MixedModelError("One model is REML and the other ML; fit both with the same method.")
        return m0, m1, False


MixedModelResult = LinearMixedModel  # the name of the fitted model before it became an object of its own


def _aliased_pairs(s: SufficientStats) -> list[tuple[str, str]]:
    pairs = []
    for (k, j), N in s.ZtZ_cross.items():
        if not (s.terms[k].intercept_only and s.terms[j].intercept_only) or s.terms[k].group == s.terms[j].group:
            continue
        nz = N.copy()
        nz.data = (nz.data != 0).astype(float)
        nz.eliminate_zeros()
        if (nz.getnnz(axis=1) == 1).all() and (nz.getnnz(axis=0) == 1).all():
            pairs.append((s.groups[k], s.groups[j]))
    return pairs


def _theta_names(s: SufficientStats, dev) -> list[str]:
    names = []
    for k, t in enumerate(s.terms):
        cn = t.covariate_names
        if isinstance(dev, Deviance):
            names.append(f"{t.group_name}.{cn[0]}")
            continue
        rows, cols = dev.tri[k]
        for rr, c in zip(rows, cols, strict=True):  # lme4 names theta after the grouping (no '.1' suffix)
            names.append(f"{t.group_name}.{cn[rr]}" if rr == c else f"{t.group_name}.{cn[rr]}.{cn[c]}")
    return names


def _covariances(s: SufficientStats, dev, theta: np.ndarray, sigma2: float) -> list[np.ndarray]:
    """Per term the covariance matrix sigma^2 T_k T_k' of its random coefficients."""
    if isinstance(dev, Deviance):
        return [np.array([[theta[k] ** 2 * sigma2]]) for k in range(len(s.terms))]
    return [sigma2 * (T @ T.T) for T in dev.lambdas(theta)]


def _varcorr(s: SufficientStats, covs: list[np.ndarray], sigma2: float) -> pd.DataFrame:
    """lme4's as.data.frame(VarCorr(m)): per term (lme4's order) the variances, then the covariances."""
    rows = []
    for k in s.lme4_order:
        t, cov, g = s.terms[k], covs[k], s.groups[k]
        cn = t.covariate_names
        sd = np.sqrt(np.clip(np.diag(cov), 0, None))
        for i in range(t.r):
            rows.append((g, cn[i], None, float(cov[i, i]), float(sd[i])))
        for i in range(t.r):
            for j in range(i + 1, t.r):
                corr = cov[i, j] / (sd[i] * sd[j]) if sd[i] > 0 and sd[j] > 0 else np.nan
                rows.append((g, cn[i], cn[j], float(cov[i, j]), float(corr)))
    rows.append(("Residual", None, None, sigma2, math.sqrt(sigma2)))
    return pd.DataFrame(rows, columns=["grp", "var1", "var2", "vcov", "sdcor"])


def warm_start(s: SufficientStats, fitted) -> np.ndarray | None:
    """A start for fitting ``s``'s model (random intercepts) from the estimates of ``fitted``, a fit with the same
    random terms (the REML fit an ML refit follows, as lme4's ``refitML`` starts from the REML theta; the full model
    a null model drops a fixed term of): its theta, the default start where that is on the boundary (from 0 the
    optimizer's theta-gradient is 0). None (the default start) for other models."""
    if fitted is None or not s.intercepts_only or list(fitted.stats.groups) != list(s.groups):
        return None
    theta = s.theta_from_lme4(np.asarray(fitted.theta, dtype=float))
    default = moment_start(s)
    default = np.ones(len(theta)) if default is None else default
    return np.where(theta > 1e-4, theta, default)


def fit_stats(s: SufficientStats, method: str = "REML", theta0=None, blas_threads="auto") -> LinearMixedModel:
    """Fit a model from its sufficient statistics (see :func:`accumulate`): ``LinearMixedModel.from_stats(s,
    method).fit(theta0, blas_threads)``."""
    return LinearMixedModel.from_stats(s, method).fit(theta0=theta0, blas_threads=blas_threads)


def fit(formula: str, data, method: str = "REML", dropna: bool = False, blas_threads="auto") -> LinearMixedModel:
    """Fit a linear mixed model, lme4-style: ``LinearMixedModel(formula, data, method, dropna).fit()``.

    Parameters
    ----------
    formula : str
        lme4 syntax, e.g. ``"ter ~ system * src_length_class + (1|sentence_id)"``,
        ``"score ~ (1|sentence) + (1|rater) + (1|sentence:rater)"``, ``"y ~ days + (1 + days|subject)"``,
        ``"y ~ x + (1|school/class)"``. Random slopes of numeric variables, and of factors in a DataFrame
        (``(f|g)``, ``(0 + f|g)``, ``(f||g)`` as lme4 codes them: :mod:`.factor_slopes`).
    data : DataFrame, iterable of DataFrames, pyarrow Dataset or dask DataFrame
        Rows, or chunks of rows with the same columns (streamed once; memory independent of the row count).
    method : "REML" (default; variance components) or "ML" (likelihood ratio tests).
    dropna : drop rows with missing values in the model's columns instead of raising.
    blas_threads : "auto" (one BLAS thread for small dense blocks), an int, or None (library default).
    """
    return LinearMixedModel(formula, data, method=method, dropna=dropna).fit(blas_threads=blas_threads)
