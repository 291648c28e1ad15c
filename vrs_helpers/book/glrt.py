"""The GLRT of system differences on a mixed model (book 4.3; Hagmann, Meier & Riezler, ICLR 2023, eq. 3-7):
:func:`compare_systems` fits ``response ~ system + (1|item)`` (optionally conditional on a data property, with runs
as a random effect, or as a logistic GLMM for binary scores) and tests the system terms; :class:`SystemComparison`
holds the test, the marginal means and the contrasts.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import registry
from ..outcomes import ChiSquareTest, ZTest, p_is
from ..registry import Hypothesis, implements
from .significance import SignificanceError


@dataclass
class SystemComparison:
    """GLRT of system differences on a mixed model with a random item intercept (book 4.3, ICLR eq. 3-7).

    ``family`` is ``"gaussian"`` (LMM) or ``"binomial"`` (logistic GLMM: ``glrt`` the
    :class:`~vrs_helpers.mixed.LRTResult` of the GLMMs, means, contrasts and slopes on the logit scale); ``notes``
    say how the test was made where the reader needs to know (the GLMM has no small-sample F test).
    """

    formula: str
    null_formula: str
    glrt: object  # vrs_helpers.mixed.LRTResult (of the LMMs or of the GLMMs)
    means: pd.DataFrame
    contrasts: pd.DataFrame
    slopes: pd.DataFrame | None = None  # per-system slope of a continuous property (ICLR eq. 6/7)
    model: object = field(default=None, repr=False)
    f_test: object = None  # with replications: the registered test of the system term unless it is the GLRT
    family: str = "gaussian"
    notes: list = field(default_factory=list)
    system_item: bool = False  # the models have (1|system:item): the verdict is about items like these
    adjust: str = "tukey"  # how the contrasts' p-values are adjusted (the pairwise decisions' family-wise error)
    runs: str = "nested"  # "crossed": shared run labels, (1|R) + (1|system:R); "nested": (1|system:R); "" none
    emm: object = field(default=None, repr=False)  # the mixed.marginal.EMMResult the means and contrasts came from
    # the bootstrap that adjusted the pairs when it is not ``f_test`` (a separated system: the others compared apart)
    pairs_test: object = field(default=None, repr=False)
    # issue 56: ("crossed", "nested") where both runs models were tested (run labels shared, two systems, --runs
    # auto) and the verdict's p is the smaller adjusted (registry.runs_models); ``runs`` is then the smaller p's
    runs_models: tuple = ()

    @property
    def test(self):
        """The test a verdict should use: the registered test chosen for the runs-random reading (few runs: the
        chi-square GLRT is too liberal), else the GLRT."""
        return self.f_test if self.f_test is not None else self.glrt

    def to_frame(self) -> pd.DataFrame:
        return self.contrasts.copy()

    def __repr__(self) -> str:
        extra = f"; {self.f_test!r}" if self.f_test is not None else ""
        fam = f", {self.family}" if self.family != "gaussian" else ""
        return f"SystemComparison({self.formula!r} vs {self.null_formula!r}{fam}: {self.glrt!r}{extra})"


def _computed(x):
    """The value of a lazy (Dask) result, computed; anything else as it is."""
    return x.compute() if hasattr(x, "compute") and hasattr(x, "dask") else x


def replication_problem(column: str, levels, system: str) -> str | None:
    """The one rule on replication columns (``vrs analyze``'s validation and :func:`compare_systems` alike): a
    column with a single level within every system leaves the run-level variance (1|system:R) not estimable.
    ``levels``: its number of levels per system (a Series indexed by system). The message, or None."""
    levels = pd.Series(levels)
    if len(levels) and (levels < 2).all():
        counts = ", ".join(f"{s}: {int(n)}" for s, n in levels.items())
        return (f"The replication column {column!r} has a single level within every system ({counts}): the "
                f"run-level variance (1|{system}:{column}) is not estimable. Drop it from the replications, or add "
                "runs.")
    return None


def compare_systems(data: pd.DataFrame, response: str, system: str, item: str, by: str | None = None,
                    covariate: str | None = None, adjust: str = "tukey", replications=(), family: str = "gaussian",
                    trials: str | None = None, test: str | None = None, n_sim: int = 1000,
                    seed: int = 0, items: str = "random", models=None, runs: str = "auto",
                    contrasts: bool = True, settle_alpha: float | None = None) -> SystemComparison:
    """Do systems differ — overall, within the levels of a binned data property (``by``), or in their slope over
    a continuous property (``covariate``)? Fits the LMM with a random intercept per test item (sentence) by REML
    for the contrasts and tests the system terms with a GLRT on ML refits.

    Replications (random seeds, meta-parameter configurations) of a system are, by default, simply more rows
    clustered by item (the ICLR 2023 paper's eq. 3/4 and 6/7): they inform the residual and item variances instead
    of being averaged away. With ``replications=[R, ...]`` every replication column also gets a random intercept
    per run of each system, ``(1|system:R)``, in both models: the runs are then a sample of the runs a system could
    have had, and the test asks whether the systems differ beyond run-to-run variation. The two readings can
    disagree (few runs, large run variance); report both.

    ``items``: ``"random"`` (default) or ``"fixed"``, for the runs-random reading. A system is good at some items
    and bad at others; when some system x item cell holds more than one run, that variation is identifiable and,
    with ``items="random"``, the models get a system-by-item intercept ``(1|system:item)``, the maximal random
    structure of the design (Barr, Levy, Scheepers & Tily 2013, "Random effects structure for confirmatory
    hypothesis testing: keep it maximal", J. Memory and Language 68: 255-278): ``score ~ system + (1|item) +
    (1|system:item) + (1|system:R)``, and the test generalizes to *items like these*. Without it (``"fixed"``) the
    system effect is tested against the run and residual variation only: a statement about *these items*, which
    rejects too often when systems and items interact (issue 28: p = 0.035 without the term, 0.284 with it on the
    book's MT data). The runs-as-replications GLRT (no ``replications``) is the book's reading and has neither.

    ``test`` chooses the test of the runs-random reading (``replications`` given, no ``by``/``covariate``), the
    result's ``test``: a test of :mod:`vrs_helpers.registry` that applies to the family (None: the family's
    default). For continuous scores ``"kenward-roger"`` (default: the F test with Kenward & Roger's (1997) adjusted
    covariance and denominator df, as pbkrtest; exact for balanced designs), ``"satterthwaite"`` (lmerTest's F
    test), ``"bootstrap"`` (the parametric-bootstrap LRT, ``n_sim`` simulations from the null fit, ``seed``) or
    ``"chisq"`` (the large-sample chi-square GLRT, which rejects too often with 3-5 runs per system; kept for
    comparison). A test that does not apply to the family raises :class:`vrs_helpers.registry.TestChoiceError`.
    The chi-square GLRT is always in ``glrt``.

    The contrasts of the runs-random reading of continuous scores are t tests with the test's small-sample df
    (Kenward-Roger's, or Satterthwaite's with that test), Tukey-adjusted on those df as ``emmeans(model, pairwise ~
    system, lmer.df = "kenward-roger")``; the other readings' are z tests (the book's Tables 4.2/4.3).

    ``data`` may be a ``dask.dataframe.DataFrame``: the fits then run on its cluster (``vrs_helpers.distributed``).

    ``family="binomial"`` is for binary scores (correct/incorrect per item; or successes out of ``trials`` per row, a
    column name): the same models as logistic GLMMs fitted by the Laplace approximation (:func:`mixed.glmer`, as
    lme4's ``glmer``), the GLRTs as chi-square tests on their log-likelihoods (ML, as ``anova(m0, m1)``). With
    replications there is no small-sample F test for a GLMM (Satterthwaite and Kenward-Roger are LMM methods):
    without ``test`` the runs-random reading (no ``by``/``covariate``) is then the linear mixed model of the 0/1
    scores with the continuous scores' default test (:func:`_linear_probability`: accuracies, valid whatever the run
    variance; the returned comparison's ``family`` is "gaussian"), except for a separated system or ``trials``;
    ``test="bootstrap"`` (the registered default of the family, used there) is the parametric-bootstrap LRT on the
    GLMMs (:func:`vrs_helpers.mixed.glmm_bootstrap_lrt`, pbkrtest's ``PBmodcomp``; ``n_sim`` simulations,
    ``seed``); the chi-square GLRT (``test="chisq"``) is liberal with few runs per system, and a note says so.
    Marginal means, contrasts and slopes are on the logit scale: contrasts are log odds ratios with Wald z tests
    and the same Tukey/Holm adjustment, ``odds_ratio`` = exp(estimate) beside them, ``effect_size`` = log odds ratio /
    (pi/sqrt 3), the latent-scale standardized difference (Chinn 2000, Statistics in Medicine 19: 3127-3131); the
    means carry ``probability`` = logistic(emmean) and its interval. ``family="auto"`` picks binomial for a 0/1
    response (:func:`vrs_helpers.book.binary.detect_family`) and notes it. The GLMM is fitted in memory (a dask
    DataFrame is collected first).

    ``contrasts=False`` (continuous scores): the test alone, without the marginal means and pairwise contrasts (their
    small-sample df cost as much as the test with many systems); ``means`` and ``contrasts`` are then empty, and with
    replications and an F test (Kenward-Roger, Satterthwaite) ``glrt`` is None (its ML refits are not made).

    ``models``: a :class:`vrs_helpers.mixed.ModelCache` of ``data`` whose accumulations and fits the linear mixed
    models share with other readings of the same data (None: one for this call, shared by its models).

    ``runs``: how the runs of the systems relate (:func:`runs_layout`). ``"nested"``: every system's runs
    are its own, ``(1|system:R)``. ``"crossed"``: a run label (a seed, a few-shot draw, a prompt template) names
    the same run condition for every system and may shift all systems alike, ``(1|R) + (1|system:R)``: the shared
    shift cancels in the system difference and is not put into its denominator (issue 39: with a shared seed
    effect the nested model's power at a difference of 0.03 was 0.03). ``"auto"`` (default): crossed when every label
    of every replication column is used by at least two systems (:func:`runs_shared`), else nested (runs whose
    labels no two systems share are each system's own: the nested model). The result's
    ``runs`` says which model was fitted.

    ``settle_alpha``: the level of the decisions (``vrs analyze``'s alpha). Given, a bootstrap test of binary
    scores stops after 200 (or 500) of its ``n_sim`` simulations when every decision at that level - the test's and
    each pair's - is already settled (:meth:`vrs_helpers.mixed.resampling.bootstrap.SeededBatches.settled`), and a note
    says
    so; None: all ``n_sim``.
    """
    q = _question(data, response, system, item, by, covariate, replications, family, trials, test, runs)
    route = registry.comparison_route(
        q.family, q.runs_random, q.test_named, q.chosen.outcome == "F",
        registry.runs_models(runs, q.layout == "crossed", q.n_sys), trials is not None,
        separated=q.family == "binomial" and q.runs_random and test is None and trials is None
        and not _no_separation(q))
    if route == "both-runs-models":
        return _both_runs_models(q.data, response, system, item, q.replications, test, n_sim, seed, items, models,
                                 contrasts, q.notes)
    rand, crossed = random_part(q.data, system, item, q.replications, items,
                                shared=q.replications if q.layout == "crossed" else ())
    formula, null = comparison_formulas(q.lhs, system, by, covariate, rand)
    if route == "linear-probability":
        return _linear_probability(q.data, response, system, item, q.replications, n_sim, seed, items, runs,
                                   contrasts, q.notes)
    full, null_fit, glrt = _fit(q, formula, null, models, contrasts)
    emm, separated = _binomial_means(q, full, adjust) if q.family == "binomial" else (None, [])
    f_test = _runs_random_test(q, formula, null, full, null_fit, glrt, emm, separated, crossed, n_sim, seed,
                               settle_alpha) if q.runs_random else None
    if q.family == "binomial":
        out = _binomial_comparison(full, glrt, formula, null, system, covariate, q.notes, emm, f_test)
        out.system_item, out.emm, out.adjust = crossed, emm, emm.adjust
        out.runs = q.layout
        _bootstrap_pairs(out, f_test)
        if (separated and q.replications and q.chosen.name == "bootstrap"
                and getattr(f_test, "pairwise_p", None) is None):
            _pairs_without(out, q.data, separated, response, system, item, q.replications, n_sim, seed, items,
                           q.layout, settle_alpha)
        return out
    return _contrasts(q, formula, null, full, glrt, f_test, crossed, adjust, contrasts)


@dataclass
class _Question:
    """What :func:`compare_systems` was asked, checked: the data (collected for a binomial GLMM), the response's
    left-hand side, the family resolved, the test chosen from the registry, the runs model, the notes so far."""

    data: object
    response: str
    lhs: str
    system: str
    item: str
    by: str | None
    covariate: str | None
    replications: list
    family: str
    trials: str | None
    chosen: object
    n_sys: int
    layout: str
    notes: list
    test_named: bool = False

    @property
    def runs_random(self) -> bool:
        """The runs-random reading: replications, no data property."""
        return bool(self.replications) and self.by is None and self.covariate is None


def _question(data, response, system, item, by, covariate, replications, family, trials, test, runs) -> _Question:
    """Stage 1 of :func:`compare_systems`: the arguments checked against the data (an error says what to give)."""
    from .binary import binomial_response, resolve_family

    if by is not None and covariate is not None:
        raise SignificanceError("Give either a binned property (by) or a continuous one (covariate), not both.")
    replications = [replications] if isinstance(replications, str) else list(replications)
    needed = [c for c in (response, system, item, by, covariate, *replications) if c is not None]
    missing = [c for c in needed if c not in data.columns]
    if missing:
        raise SignificanceError(f"Column(s) {missing} not in the data; available: {', '.join(map(str, data.columns))}.")
    n_sys = _computed(data[system].nunique())
    if n_sys < 2:
        raise SignificanceError(f"Comparing systems needs at least two; column {system!r} has {n_sys}.")
    if by is not None and _computed(data[by].nunique()) < 2:
        raise SignificanceError(f"The data property {by!r} has a single level: there is nothing to condition on.")
    if covariate is not None and not pd.api.types.is_numeric_dtype(data[covariate]):
        raise SignificanceError(f"The covariate {covariate!r} must be numeric; use by= for a binned property.")
    family, family_note = resolve_family(family, data[response])
    chosen = registry.choose(test, family, systems=n_sys)  # a test that does not apply is an error naming those that do
    if test is not None and (not replications or by is not None or covariate is not None):
        raise registry.TestChoiceError(f"test={test!r} chooses the test of the runs-random reading: give "
                                       "replications (and no by/covariate), or leave test out.")
    notes = [family_note] if family_note else []
    if trials is not None and family != "binomial":
        raise SignificanceError("trials= is for binomial responses (successes out of trials); give family='binomial'.")
    lhs = response
    if family == "binomial":
        data = _computed(data)
        lhs = binomial_response(data, response, trials)
    for r in replications:
        problem = replication_problem(r, _computed(data.groupby(system, observed=True)[r].nunique()), system)
        if problem:
            raise SignificanceError(problem)
    layout = runs_layout(data, system, replications, runs)
    return _Question(data, response, lhs, system, item, by, covariate, replications, family, trials, chosen, n_sys,
                     layout, notes, test_named=test is not None)


def _no_separation(q: _Question) -> bool:
    """No system separated (all correct or all wrong): 0/1 scores' linear model applies (a separated system keeps
    the GLMM, where its contrasts are "not estimable", issue 39)."""
    from .. import mixed

    return mixed.check_separation(q.data, q.response, q.system).empty


def comparison_formulas(lhs: str, system: str, by: str | None, covariate: str | None, rand: str) -> tuple[str, str]:
    """Stage 2: the full and the null model's formulas - the system terms overall, within the levels of ``by`` or
    as slopes over ``covariate``, on the random part ``rand`` (:func:`random_part`)."""
    if by is not None:
        return f"{lhs} ~ {system} * {by} + {rand}", f"{lhs} ~ {by} + {rand}"
    if covariate is not None:
        return f"{lhs} ~ {system} * {covariate} + {rand}", f"{lhs} ~ {covariate} + {rand}"
    return f"{lhs} ~ {system} + {rand}", f"{lhs} ~ 1 + {rand}"


def _fit(q: _Question, formula: str, null: str, models, contrasts: bool):
    """Stage 3: the full model (REML for a linear one), the null's fit where a test needs it, and the chi-square
    GLRT (None where the test alone by an F test needs no ML refits)."""
    from .. import mixed

    if q.family == "binomial":
        full = mixed.glmer(formula, q.data, family="binomial")
        null_fit = mixed.glmer(null, q.data, family="binomial")
        glrt = mixed.lrt(null_fit, full)
        if q.replications and q.chosen.name == "chisq":
            glrt.method = "GLRT (chi-square, Laplace; runs random, large-sample)"
            q.notes.append("binomial GLMM with runs as a random effect tested by the large-sample chi-square GLRT: "
                           "with few runs per system it rejects more often than alpha; the parametric-bootstrap LRT "
                           "(the default) keeps its level")
        return full, null_fit, glrt
    models = mixed.ModelCache(q.data) if models is None else models
    full = models.fit(formula)
    # the null's REML fit would only be refitted by ML. The test alone (contrasts=False) by an F test needs no
    # GLRT: its two ML refits are the largest part of the cost with many systems (None: not computed)
    glrt = None if not contrasts and q.replications and q.chosen.outcome == "F" else mixed.lrt(
        models.fit(null, "ML", start=full), full)
    return full, None, glrt


def _binomial_means(q: _Question, full, adjust: str):
    """Stage 4 of a GLMM: the marginal means and contrasts on the logit scale, and the separated systems (their
    pairs are not estimable: out of the family, the others adjusted for themselves)."""
    from .. import mixed
    from ..mixed.models.marginal import emmeans, restrict_family
    from .binary import latent_residual_variance

    # the single-step max-|z| test adjusts the contrasts as glht does (its own family: adjust="mvt")
    emm = emmeans(full, q.system, by=q.by, adjust="mvt" if q.chosen.name == "max-t" and q.replications else adjust,
                  sigma=math.sqrt(latent_residual_variance("logit")))
    separated = []
    if q.by is None and q.n_sys > 2 and q.trials is None:
        separated = [str(x) for x in mixed.check_separation(q.data, q.response, q.system)[q.system]]
        emm = restrict_family(emm, full, separated)
    return emm, separated


def _runs_random_test(q: _Question, formula, null, full, null_fit, glrt, emm, separated, crossed, n_sim, seed,
                      settle_alpha):
    """Stage 5, runs as a random effect: the chosen small-sample test (with 3-5 runs per system the chi-square
    GLRT rejects far more often than alpha: benchmarks/type_one_error.py), or the test on the run means that
    :func:`vrs_helpers.book.run_means.choose` puts in its place; None where the GLRT is the test. Binary scores
    with 3+ systems: the bootstrap also calibrates the pairwise contrasts (max-T over its simulations)."""
    pairs = emm.contrast_matrix if emm is not None and q.n_sys > 2 and not separated else None
    outcome = q.chosen.run(Hypothesis(formula, null, full, system_contrast(full), q.system, q.data, glrt, q.family,
                                      n_sim, seed, extra={"null_fit": null_fit, "pairs": pairs, "emm": emm,
                                                          "settle_alpha": settle_alpha}))
    if getattr(outcome, "stopped_early", False):
        from ..mixed.resampling.bootstrap import SeededBatches

        q.notes.append(f"the bootstrap stopped after {len(outcome.reference)} of {outcome.n_planned} simulations: "
                       f"every decision at alpha = {settle_alpha:g} was settled (its Monte-Carlo p further from "
                       f"alpha than {100 * (1 - SeededBatches.SETTLE_RISK):.1f} % of binomial draws at p = alpha "
                       "would be; Davison & Hinkley 1997, 4.2.5)")
    f_test = None if outcome is glrt else outcome
    if q.family == "gaussian" and not q.test_named and f_test is not None:
        from .run_means import choose

        means_test, why = choose(q.data, q.response, q.system, q.item, q.replications, full, crossed, q.layout,
                                 seed)
        if means_test is not None:
            q.notes.append(f"{why}; the model's {f_test.method} gives p {p_is(f_test.p_value)}")
            f_test = means_test
    return f_test


def _contrasts(q: _Question, formula, null, full, glrt, f_test, crossed, adjust, contrasts) -> SystemComparison:
    """Stage 6 of a linear model: the marginal means and pairwise contrasts. The runs-random reading's are t tests
    on small-sample df, Tukey on those df (emmeans with lmer.df = "kenward-roger"); the book's readings keep the z
    tests of Tables 4.2/4.3; unequal variances among 3+ systems: each pair its own SE (issue 56)."""
    from ..mixed.models.marginal import emmeans

    lmer_df = "asymptotic" if not q.runs_random else (
        q.chosen.name if q.chosen.name in ("kenward-roger", "satterthwaite") else registry.ddf_default())
    if not contrasts:  # the test alone (a second runs model beside the verdict's): no means, no pairs
        return SystemComparison(formula, null, glrt, pd.DataFrame(), pd.DataFrame(), None, full, f_test,
                                notes=q.notes, system_item=crossed, adjust=adjust, runs=q.layout)
    emm = emmeans(full, q.system, by=q.by, adjust=adjust, lmer_df=lmer_df)
    if getattr(f_test, "pairs", None) is not None:
        emm = _own_se_pairs(emm, f_test.pairs, q.system)
    slopes = None if q.covariate is None else _slopes(full, q.system, q.covariate)
    return SystemComparison(formula, null, glrt, emm.means, emm.contrasts, slopes, full, f_test, notes=q.notes,
                            system_item=crossed, adjust=emm.adjust, emm=emm, runs=q.layout)


def _own_se_pairs(emm, pairs: pd.DataFrame, system: str):
    """The model's contrasts replaced by :func:`vrs_helpers.book.run_means.hetero_pairs`' (each pair its own SE,
    the bootstrap max-|t| adjustment), matched by the contrast's label ``a - b`` (the sign flipped where the model
    has ``b - a``)."""
    from dataclasses import replace

    c = emm.contrasts.copy()
    found = {f"{a} - {b}": r for r, (a, b) in enumerate(zip(pairs["a"].astype(str), pairs["b"].astype(str),
                                                                strict=True))}
    found.update({f"{b} - {a}": -1 - r for r, (a, b) in enumerate(zip(pairs["a"].astype(str),
                                                                          pairs["b"].astype(str), strict=True))})
    for i, label in enumerate(c["contrast"].astype(str)):
        r = found.get(label)
        if r is None:
            continue
        sign, row = (1.0, pairs.iloc[r]) if r >= 0 else (-1.0, pairs.iloc[-1 - r])
        lo, hi = sign * row["lower"], sign * row["upper"]
        for col, v in (("estimate", sign * row["estimate"]), ("SE", row["SE"]), ("t", sign * row["t"]),
                       ("df", row["df"]), ("p_value", row["p_value"]), ("lower", min(lo, hi)),
                       ("upper", max(lo, hi))):
            if col in c.columns:
                c.iat[i, c.columns.get_loc(col)] = v
    return replace(emm, contrasts=c, adjust=OWN_SE)


ITEMS = ("random", "fixed")  # compare_systems(items=...): items like these (1|system:item), or these items

def _linear_probability(data, response: str, system: str, item: str, replications, n_sim: int, seed: int,
                        items: str, layout: str, contrasts: bool, notes: list) -> SystemComparison:
    """The default runs-random reading of 0/1 scores: the linear mixed model of the scores themselves (the linear
    probability model), ``score ~ system + (1|item) (+ (1|system:item)) + runs``, with the continuous scores'
    default test - Kenward-Roger's F, or the test on the run means where the run variance is at zero or the
    systems' variances differ (:func:`vrs_helpers.book.run_means.choose`) - and Tukey on Kenward-Roger df for the
    pairs: estimates, contrasts and intervals are accuracies and differences in accuracy points. In a balanced
    complete design its F and t tests are those of the per-run accuracies (Searle, Casella & McCulloch 1992, 4.3),
    valid whatever the run variance when a run's accuracy over hundreds of items is near normal.

    Why not the GLMM's parametric bootstrap (``test="bootstrap"``, still there when named): it draws from the
    GLMM's maximum-likelihood run variance, which with 3 runs per system is often estimated near zero; with extreme
    item difficulty it rejected 0.127 of true nulls (0.087 when only the fits at zero were replaced), and its refits
    of a k-system GLMM cost minutes (316 s for 12 systems x 3 seeds x 400 items). benchmarks/type_one_error.py
    measures this default in every 0/1 cell. A separated system (all correct or all wrong) keeps the GLMM, whose
    contrasts of it are "not estimable", and so do successes out of ``trials``."""
    d = data.assign(**{response: pd.to_numeric(data[response]).astype(float)})
    out = compare_systems(d, response, system, item, replications=replications, family="gaussian", n_sim=n_sim,
                          seed=seed, items=items, runs=layout, contrasts=contrasts)
    out.notes[:0] = notes + ["0/1 scores with runs random: the runs-random reading is the linear mixed model of the "
                             "0/1 scores (estimates and differences in accuracy points; its F and t tests are those "
                             "of the per-run accuracies in a balanced design, valid whatever the run variance; the "
                             "GLMM's parametric bootstrap, --test bootstrap, draws from a run variance that 3 runs "
                             "often estimate near zero)"]
    if out.f_test is not None:
        out.f_test.method = f"{out.f_test.method} (linear model of the 0/1 scores)"
    return out


RUNS = ("auto", "crossed", "nested")  # compare_systems(runs=...)
OWN_SE = "bootstrap max-|t|, own SEs"  # the pairs' adjustment with unequal variances among 3+ systems (issue 56)


def _both_runs_models(data, response, system, item, replications, test, n_sim, seed, items, models, contrasts,
                      notes) -> SystemComparison:
    """Run labels shared by two systems under ``--runs auto`` (:func:`vrs_helpers.registry.runs_models`): the
    comparison with crossed runs and with nested runs, each with its default test; the one with the smaller p is
    returned, its test's p replaced by the smaller p adjusted for taking the smaller
    (:func:`vrs_helpers.book.run_means.two_models_p`), a note giving both."""
    from dataclasses import replace

    from .run_means import two_models_p

    kw = {"replications": replications, "family": "gaussian", "test": test, "n_sim": n_sim, "seed": seed,
          "items": items, "models": models, "contrasts": contrasts}
    both = {r: compare_systems(data, response, system, item, runs=r, **kw) for r in ("crossed", "nested")}
    p = {r: float(c.test.p_value) for r, c in both.items()}
    method = {r: c.test.method for r, c in both.items()}
    win = "crossed" if p["crossed"] <= p["nested"] else "nested"
    out = both[win]
    labels = int(len(_computed(data[list(replications)].drop_duplicates())))
    adjusted = two_models_p(min(p.values()), labels, 2)
    out.f_test = replace(out.test, p_value=adjusted,
                         method=f"{out.test.method} (runs {win}: the smaller p of both runs models, adjusted)")
    out.runs_models = ("crossed", "nested")
    out.notes[:0] = notes + [
        f"run labels shared by the systems: they may name one run condition of both (crossed runs) or each system's "
        f"own runs (nested); both models tested: crossed {method['crossed']}, p {p_is(p['crossed'])}; "
        f"nested {method['nested']}, p {p_is(p['nested'])}; the verdict's p {p_is(adjusted)} is the "
        f"smaller adjusted for taking the smaller (its null distribution without a shared run effect, {labels} "
        "runs). What that costs in docs/error-rates.md's simulations of 2 systems: 0.070 of power against the "
        "nested model when the runs share no effect (3 runs: 0.700 against 0.770) and 0.050 against the crossed "
        "model when they do (5 runs: 0.843 against 0.893); --runs crossed or --runs nested tests one model"]
    return out


def runs_shared(data, system: str, column: str) -> bool:
    """True when every label of the replication column ``column`` is used by at least two systems: the same seed
    (few-shot draw, prompt template, configuration) was run for several systems, so a run label may name one run
    condition shared by them (crossed runs) rather than a run of one system (nested runs)."""
    per_label = _computed(data.groupby(column, observed=True)[system].nunique())
    return bool(len(per_label)) and bool((per_label >= 2).all())


def runs_layout(data, system: str, replications=(), runs: str = "auto") -> str:
    """The runs model :func:`compare_systems` fits: ``""`` without replications; ``"crossed"`` or ``"nested"`` as
    asked; for ``"auto"`` crossed when every replication column's labels are shared (:func:`runs_shared`), else
    nested. A rule on the labels alone, fixed before any fit, so the test chosen does not depend on the scores."""
    runs = str(runs or "auto").strip().lower()
    if runs not in RUNS:
        raise SignificanceError(f"runs must be one of {', '.join(RUNS)} (run labels shared by the systems, or each "
                                f"system's own); got {runs!r}.")
    if not replications:
        return ""
    if runs == "auto":
        return "crossed" if all(runs_shared(data, system, r) for r in replications) else "nested"
    return runs


def random_part(data, system: str, item: str, replications=(), items: str = "random",
                shared=()) -> tuple[str, bool]:
    """The random terms of the models: ``(1|item)``, with runs random ``(1|system:R)`` per replication column (and
    ``(1|R)`` before it for each column in ``shared``: crossed runs, :func:`runs_layout`) and, with
    ``items="random"`` where identifiable, ``(1|system:item)`` (:func:`system_item_replicated`); and whether the
    system-by-item term is in."""
    if items not in ITEMS:
        raise SignificanceError(f"items must be one of {', '.join(ITEMS)} (items like these, or these items); "
                                f"got {items!r}.")
    crossed = bool(replications) and items == "random" and system_item_replicated(data, system, item)
    return " + ".join([f"(1|{item})"] + ([f"(1|{system}:{item})"] if crossed else [])
                      + [f"(1|{r})" for r in shared] + [f"(1|{system}:{r})" for r in replications]), crossed


def interaction_test(data, response: str, system: str, item: str, prop: str, replications=(),
                     family: str = "gaussian", items: str = "random", ddf: str | None = None, models=None):
    """Does the system difference depend on the data property ``prop``? ``response ~ system + P`` against
    ``response ~ system * P`` (the same random terms as :func:`compare_systems`: a numeric P as a slope, a
    categorical one per level). This is not the ICLR paper's eq. 6/7 test (``system * P`` vs ``P``, which drops the
    system main effect and the interaction together and asks whether the systems differ once P is accounted for):
    it drops only the interaction.

    With ``replications`` (runs random) and continuous scores: the F test of the interaction columns on the REML
    fit with Kenward-Roger's (default; ``ddf="satterthwaite"``) small-sample df; otherwise the chi-square GLRT of
    the two fits (ML; the GLMMs' Laplace fits for binary scores). Returns the test's outcome. ``models``: as in
    :func:`compare_systems`."""
    from .. import mixed
    from ..mixed.inference.ddf import contrast_test
    from .binary import binomial_response

    data = _computed(data) if family == "binomial" else data
    lhs = binomial_response(data, response, None) if family == "binomial" else response
    rand, _ = random_part(data, system, item, list(replications), items)
    formula, reduced = f"{lhs} ~ {system} * {prop} + {rand}", f"{lhs} ~ {system} + {prop} + {rand}"
    if family == "binomial":
        return mixed.lrt(mixed.glmer(reduced, data, family="binomial"), mixed.glmer(formula, data,
                                                                                    family="binomial"))
    models = mixed.ModelCache(data) if models is None else models
    full = models.fit(formula)
    if replications:
        names = list(full.fixed_effects.index)
        cols = [i for i, n in enumerate(names) if ":" in n]
        L = np.zeros((len(cols), len(names)))
        L[np.arange(len(cols)), cols] = 1.0
        return contrast_test(full, L, f"{system}:{prop}", ddf=ddf or registry.ddf_default())
    return mixed.lrt(models.fit(reduced, "ML"), full)


def system_item_replicated(data, system: str, item: str) -> bool:
    """True when some system x item cell holds more than one row (more than one run): the system-by-item variance
    is then separable from the residual, and the runs-random models get ``(1|system:item)`` (Barr et al. 2013)."""
    return bool(_computed(data.groupby([system, item], observed=True).size().max()) > 1)


def system_contrast(full) -> np.ndarray:
    """L of H0 that every system term is 0. For a linear mixed model ``y ~ system + ...`` with one fixed term, the
    type-III hypothesis of that term (:func:`vrs_helpers.mixed.inference.hypotheses.hypotheses`, lmerTest's ``anova(m)``
    basis), so that ``test="satterthwaite"`` gives the df of ``anova(m)`` (issue 39: the dummy-column basis gave
    lmerTest's ``contestMD`` df, 4.4264 where ``anova(m)`` says 4.4305; the F and Kenward-Roger's df do not depend
    on the basis); otherwise one row per non-intercept fixed effect."""
    if getattr(full, "stats", None) is not None and hasattr(full, "sigma"):
        from ..mixed.inference.hypotheses import hypotheses

        try:
            Ls = {t: L for t, L in hypotheses(full, 3).items() if L.shape[0]}
        except Exception:  # noqa: BLE001 - a model the hypotheses do not cover keeps the dummy columns
            Ls = {}
        if len(Ls) == 1:
            return np.asarray(next(iter(Ls.values())), dtype=float)
    names = list(full.fixed_effects.index)
    cols = [i for i, n in enumerate(names) if n != "(Intercept)"]
    L = np.zeros((len(cols), len(names)))
    L[np.arange(len(cols)), cols] = 1.0
    return L


# ------------------------------------------------------------------ the registered tests' implementations
# (vrs_helpers.registry: each a function of a Hypothesis, on the engine's functions)

@implements("kenward-roger")
def kenward_roger_test(h: Hypothesis):
    """The F test of ``h.L`` with Kenward-Roger's adjusted covariance and df on the REML fit (pbkrtest)."""
    from ..mixed.inference.ddf import contrast_test

    return contrast_test(h.full, h.L, h.term, ddf="kenward-roger")


@implements("satterthwaite")
def satterthwaite_test(h: Hypothesis):
    """The F test of ``h.L`` with Satterthwaite's df on the REML fit (lmerTest)."""
    from ..mixed.inference.ddf import contrast_test

    return contrast_test(h.full, h.L, h.term, ddf="satterthwaite")


@implements("bootstrap")
def bootstrap_lrt_test(h: Hypothesis):
    """The parametric-bootstrap LRT (pbkrtest's PBmodcomp), ``h.n_sim`` simulations from the null fit, seeded: of
    the LMMs' ML fits, or of binary scores' GLMMs (Laplace; :func:`vrs_helpers.mixed.glmm_bootstrap_lrt`)."""
    from .. import mixed

    if h.family == "binomial":
        m0 = h.extra.get("null_fit")
        m0 = mixed.glmer(h.null_formula, h.data, family="binomial") if m0 is None else m0
        # progress: a text bar only when stderr is a terminal (the CLI), never in logs or kernels
        return mixed.glmm_bootstrap_lrt(m0, h.full, n_sim=h.n_sim, seed=h.seed, pairs=h.extra.get("pairs"),
                                        progress=True, settle_alpha=h.extra.get("settle_alpha"))
    m0, m1 = mixed.fit(h.null_formula, h.data, method="ML"), mixed.fit(h.formula, h.data, method="ML")
    return mixed.parametric_bootstrap_lrt(m0, m1, n_sim=h.n_sim, seed=h.seed)


@implements("max-t")
def max_t_test(h: Hypothesis) -> ZTest:
    """The single-step max-|z| test (Hothorn, Bretz & Westfall 2008; ``multcomp::glht(m, mcp(system = "Tukey"))``
    with ``adjusted("single-step")``): the systems differ when the largest |z| of the pairwise contrasts of the
    GLMM's marginal means exceeds its critical value from their joint normal distribution; p = the smallest
    single-step adjusted p-value. No refits: one fit of the full model
    (:mod:`vrs_helpers.mixed.inference.multiplicity`)."""
    from ..mixed.models.marginal import emmeans

    emm = h.extra.get("emm")
    if emm is None or emm.adjust != "mvt":
        emm = emmeans(h.full, h.term, adjust="mvt")
    c = emm.contrasts
    z = c["z"].to_numpy(dtype=float)
    ok = np.isfinite(z) & np.isfinite(c["p_value"].to_numpy(dtype=float))  # a separated system's pairs: not in it
    if not ok.any():
        raise SignificanceError("no pairwise contrast of the systems could be estimated: every pair has a system whose "
                                "scores are all correct or all wrong (separation); leave --test out for the default "
                                "test.")
    j = int(np.nanargmax(np.where(ok, np.abs(z), np.nan)))
    return ZTest(float(np.abs(z[j])), float(c["p_value"].iloc[j]), method=registry.get("max-t").method)


@implements("chisq")
def chisq_test(h: Hypothesis) -> ChiSquareTest:
    """The chi-square GLRT (ML fits; the GLMM's Laplace log-likelihoods): ``h.glrt`` when given."""
    from .. import mixed

    if h.glrt is not None:
        return h.glrt
    if h.family == "binomial":
        return mixed.lrt(mixed.glmer(h.null_formula, h.data, family="binomial"), h.full)
    return mixed.lrt(mixed.fit(h.null_formula, h.data, method="ML"), h.full)


def _slopes(full, system: str, covariate: str) -> pd.DataFrame:
    """Per-system slope of a continuous property with its SE and z (ICLR eq. 6/7): the covariate's coefficient plus
    the system's interaction coefficient."""
    fe = full.fixed_effects["estimate"]
    V = full.vcov
    rows = []
    for level in full.stats.factor_levels[system]:
        names = [covariate] + ([f"{system}{level}:{covariate}"] if f"{system}{level}:{covariate}" in fe.index
                               else [])
        est = float(fe[names].sum())
        se = float(np.sqrt(V.loc[names, names].to_numpy().sum()))
        rows.append({system: level, "slope": est, "SE": se, "z": est / se})
    return pd.DataFrame(rows)


def _bootstrap_pairs(out: SystemComparison, test) -> None:
    """Binary scores, 3+ systems, the bootstrap test: the contrasts' p-values become the single-step max-T
    adjustment calibrated on the bootstrap's own simulations (Westfall & Young 1993; the Tukey-adjusted Wald z is
    liberal with 3 runs per system, issue 28), ``z_given_theta`` the |z| it compares (the covariance given theta)."""
    p = getattr(test, "pairwise_p", None)
    if p is None:
        return
    # the simultaneous intervals of the same family: +- the bootstrap's critical value (bootstrap_critical) in SEs
    # given theta (the SEs the compared |z| used), so that p < 0.05 exactly when the interval excludes 0
    z, p_all = np.asarray(test.z_pairs, dtype=float), np.asarray(p, dtype=float)
    est = out.contrasts["estimate"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.where(z != 0, np.abs(est / z), out.contrasts["SE"].to_numpy(dtype=float))
    q = bootstrap_critical(test, 0.05)
    out.contrasts = out.contrasts.assign(z_given_theta=z, SE_given_theta=se, p_value=p_all,
                                         lower=est - q * se, upper=est + q * se)
    out.adjust = "bootstrap max-|z|"
    out.notes.append(f"pairwise contrasts: Wald z (logit scale), p adjusted by the bootstrap max-|z| over the "
                     f"{test.n_sim} simulations of the bootstrap test (single-step max-T, Westfall & Young 1993; "
                     f"|z| with the fixed effects' covariance given the variance parameters)")


def _pairs_without(out: SystemComparison, data, separated, response, system, item, replications, n_sim, seed,
                   items, runs, settle_alpha) -> None:
    """Binary scores with runs, the bootstrap test, a separated system among 3+: the pairs of the other systems are
    compared by the same test on the data without the separated systems (their own family: the bootstrap's null
    fit and its max-|z| are those of the systems compared, not drawn from a null that pools an all-correct system
    into the others' mean and inflates the run variance). Their rows of ``out.contrasts`` are replaced (two systems
    left: the pair's p is that comparison's bootstrap LRT); the separated system's pairs stay not estimable."""
    keep = ~data[system].astype(str).isin(set(separated))
    rest = [str(x) for x in out.means[system] if str(x) not in set(separated)]
    if len(rest) < 2:
        return
    sub = compare_systems(data[keep.to_numpy()].reset_index(drop=True), response, system, item,
                          replications=replications, family="binomial", test="bootstrap", n_sim=n_sim, seed=seed,
                          items=items, runs=runs, settle_alpha=settle_alpha)
    rows = sub.contrasts.copy()
    if len(rest) == 2:  # the bootstrap LRT decides the pair; it has no interval (its Wald interval would disagree)
        rows["p_value"] = float(sub.test.p_value)
        rows["lower"] = rows["upper"] = np.nan
    levels = [str(x) for x in out.means[system]]
    sub_levels = [str(x) for x in sub.means[system]]
    where = {pair: r for r, pair in enumerate(itertools.combinations(sub_levels, 2))}
    c = out.contrasts.copy()
    for col in rows.columns.difference(c.columns):  # the bootstrap's z_given_theta, SE_given_theta
        c[col] = np.nan
    for r, pair in enumerate(itertools.combinations(levels, 2)):
        if pair in where:
            src = rows.iloc[where[pair]]
            for col in c.columns.intersection(rows.columns).difference(["contrast"]):
                c.iat[r, c.columns.get_loc(col)] = src[col]
    out.contrasts = c
    out.adjust = sub.adjust if len(rest) > 2 else "bootstrap LRT of the pair"
    out.pairs_test = sub.f_test  # the bootstrap whose critical |z| the pairs' intervals use (ranking)
    out.notes.append(f"separation: the pairs of {', '.join(rest)} are compared without {', '.join(separated)} "
                     f"(all correct or all wrong, not estimable): {sub.test.method}"
                     + (f", p {p_is(sub.test.p_value)}" if len(rest) == 2 else f"; {sub.adjust}-adjusted"))


def bootstrap_critical(test, alpha: float) -> float:
    """The critical |z| of the bootstrap's single-step max-|z| at ``alpha``: the value q with adjusted p < alpha
    exactly when |z| > q, for p = (1 + #{b: max |z*_b| >= |z|}) / (1 + B) (:attr:`~vrs_helpers.mixed.
    glmm_bootstrap.GLMMBootstrapResult.pairwise_p`): the (c + 1)-th largest of the B simulated maxima, c the most
    exceedances with (1 + c) / (1 + B) < alpha. NaN without simulated pairs or with too few simulations."""
    top = getattr(test, "max_abs_z", None)
    if top is None:
        return float("nan")
    top = np.sort(np.asarray(top, dtype=float)[np.isfinite(top) & np.isfinite(test.reference)])
    B = len(top)
    c = int(np.ceil(alpha * (B + 1))) - 2
    if c < 0 or B - c - 1 < 0:
        return float("nan")
    return float(top[B - c - 1])


def _binomial_comparison(full, test, formula, null, system, covariate, notes, emm, f_test=None) -> SystemComparison:
    """The logistic GLMM's comparison: means with probabilities, contrasts with odds ratios (logit scale)."""
    from scipy.special import expit

    means = emm.means.assign(probability=expit(emm.means["emmean"]), prob_lower=expit(emm.means["lower"]),
                             prob_upper=expit(emm.means["upper"]))
    contrasts = emm.contrasts.assign(odds_ratio=np.exp(emm.contrasts["estimate"]))
    slopes = None if covariate is None else _slopes(full, system, covariate)
    return SystemComparison(formula, null, test, means, contrasts, slopes, full, f_test, family="binomial",
                            notes=notes)
