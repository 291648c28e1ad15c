"""The steps of one response's analysis (:func:`vrs_helpers.evaluate.analysis.analyze`), each small and named:

- :func:`significance` - the GLRT with the runs as replications and the runs-random reading with its registered
  test (book 4.3; ICLR 2023 eq. 3/4; :func:`vrs_helpers.book.glrt.compare_systems`);
- :func:`conditional` - the GLRT conditional on each data property (ICLR eq. 6/7);
- :func:`paired` - the paired bootstrap and permutation tests on per-item means (Algorithms 4.1/4.2);
- :func:`reliability` - per system the variance components, phi and the decision study (book 3.3,
  :func:`vrs_helpers.book.reliability.decision_study`);
- :func:`verdict` - one sentence per reading;
- :func:`power` - power planning of the runs-random test (:mod:`vrs_helpers.evaluate.tables.power`);
- :func:`stochastic_order` - ASO and the expected best of n runs (:mod:`vrs_helpers.evaluate.tables.readings`).

Each step is a function ``step(result, work)`` that adds to the analysis ``result``
(:class:`~vrs_helpers.evaluate.analysis.OwnAnalysis`) from :class:`Work`: the validated table of one response with
formula-safe column names and the spec (:class:`~vrs_helpers.evaluate.tables.spec.AnalysisSpec`), the same on the local
and the Dask backend.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ... import mixed
from ...book.binary import latent_variance_components
from ...book.glrt import OWN_SE, compare_systems, interaction_test, random_part, runs_layout, runs_shared
from ...book.reliability import decision_study, phi
from ...book.significance import bootstrap_test, permutation_test, resampling_test_dask
from ...errors import VRSError
from ...outcomes import P_FLOOR, p_text
from .ranking import MAX_LETTER_SYSTEMS, decision_intervals, pairwise_sentence, ranking_sentence, ranking_table
from .readings import aso_readings, disagreements, expected_best_by_system, reliability_sentence, run_means
from .scores import computed

_SAFE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
STUDY_LEVELS = 50  # the decision study's table lists 1..50 levels (and the first number reaching the target)


def safe_names(columns) -> dict:
    """Original column name -> a name the formula parser accepts (ASCII identifiers kept as they are; any other
    character, a non-ASCII letter too, becomes "_")."""
    out, used = {}, set()
    for c in columns:
        name = str(c) if _SAFE.match(str(c)) else re.sub(r"[^A-Za-z0-9_]", "_", str(c)) or "col"
        if not _SAFE.match(name):
            name = "c_" + name
        base, i = name, 1
        while name in used:
            name, i = f"{base}_{i}", i + 1
        used.add(name)
        out[c] = name
    return out


def run_table(df, response: str, system: str, replications, level: float = 0.95) -> pd.DataFrame:
    """Per system and run (combination of the replication columns): n, mean, SD and a normal-theory CI of the
    mean — the spread that "best of n seeds" reporting hides. ``df`` may be a pandas or a dask DataFrame."""
    from scipy import stats

    keys = [system, *replications]
    out = computed(df.groupby(keys, observed=True)[response].agg(["count", "mean", "std"])).reset_index()
    out = out.rename(columns={"count": "n", "std": "sd"}).sort_values(keys, kind="stable").reset_index(drop=True)
    half = stats.norm.ppf(0.5 + level / 2) * out["sd"] / np.sqrt(out["n"])
    out["ci_low"], out["ci_high"] = out["mean"] - half, out["mean"] + half
    return out


def verdict_text(p: float, alpha: float) -> str:
    if p < alpha:
        return f"differ (p {_p(p)})" if p < P_FLOOR else f"differ (p {_p(p)} < {alpha:g})"
    return f"show no significant difference (p {_p(p)})"


def _p(p) -> str:
    """'= 0.0123', or '< 1e-300' for a p-value that underflowed (:func:`vrs_helpers.outcomes.p_text`)."""
    text = p_text(p)
    return text if text.startswith("<") else f"= {text}"


@dataclass
class Work:
    """One response of a validated spec, ready for the steps: the table ``d`` with formula-safe names (``y``,
    ``sy``, ``it``, ``reps``; ``back`` maps them to the original names), the systems in analysis order (the
    baseline first), the response's family and registered test, and the Dask client (None in memory)."""

    spec: object
    response: str
    d: object
    y: str
    sy: str
    it: str
    reps: list
    names: dict
    back: dict
    systems: list
    family: str
    test: str | None
    client: object = None
    models: object = None  # mixed.ModelCache of d: the readings' linear mixed models from shared accumulations

    @property
    def lazy(self) -> bool:
        return hasattr(self.d, "dask")

    @property
    def system(self) -> str:
        """The system column's original name ("_system" for one system without a column)."""
        return self.spec.system or "_system"

    def rename_back(self, frame: pd.DataFrame) -> pd.DataFrame:
        return frame.rename(columns=self.back)


def prepare(spec, response: str, client=None) -> Work:
    """The :class:`Work` of ``response`` from a validated spec (no checks: the spec was validated once)."""
    table = spec.table
    system = spec.system or "_system"
    if spec.system is None:
        table = table.assign(**{system: "all"})
    roles = [response, system, spec.item, *spec.replications, *spec.properties]
    names = safe_names(roles)
    back = {v: k for k, v in names.items()}
    d = table[roles].rename(columns=names)
    sy = names[system]
    systems = sorted(computed(d[sy].unique()))
    if spec.baseline is not None:
        systems = [spec.baseline] + [s for s in systems if s != spec.baseline]
    d[sy] = d[sy].astype(pd.CategoricalDtype(systems))
    if hasattr(d, "dask"):
        d = d.persist()  # the validated columns stay on the workers for the passes below
    w = Work(spec, response, d, names[response], sy, names[spec.item], [names[r] for r in spec.replications],
             names, back, systems, spec.families[response], spec.tests.get(response), client)
    w.models = mixed.ModelCache(d)
    if w.family == "gaussian" and len(systems) >= 2:
        w.models.plan(*_planned(w))
    return w


def _planned(w: Work) -> list[str]:
    """The widest linear mixed models of the readings on ``w.d`` (per numeric data property the system-by-property
    models with runs as replications and with runs random): every model of :func:`significance` and
    :func:`conditional` on ``w.d`` has its fixed columns among theirs, so each random part is accumulated once."""
    shared = w.reps if runs_layout(w.d, w.sy, w.reps, w.spec.runs) == "crossed" else ()
    parts = [random_part(w.d, w.sy, w.it)[0]] + ([random_part(w.d, w.sy, w.it, w.reps, w.spec.items, shared)[0]]
                                                 if w.reps else [])
    numeric = [w.names[p] for p in w.spec.properties if pd.api.types.is_numeric_dtype(w.d[w.names[p]].dtype)]
    return [f"{w.y} ~ {w.sy}" + "".join(f" * {pn}" for pn in numeric[:1]) + "".join(f" + {w.sy} * {pn}"
                                                                                    for pn in numeric[1:])
            + f" + {rand}" for rand in parts]


# ------------------------------------------------------------------------------------------------- the steps

def separation(result, w: Work) -> None:
    """Binary scores: the systems whose scores are all correct or all wrong (:func:`vrs_helpers.mixed.
    check_separation`, before any fit). Their log-odds are infinite (Albert & Anderson 1984), so a note says so and
    their variance components, phi and log-odds contrasts are not reported as numbers (:func:`significance`,
    :func:`reliability`)."""
    if w.family != "binomial":
        return
    sep = mixed.check_separation(computed(w.d), w.y, w.sy)
    for _, r in sep.iterrows():
        result.separated[str(r[w.sy])] = r["kind"]
        result.notes.append(f"separation: every score of system {r[w.sy]} is {r['kind'].split()[-1]} "
                            f"({int(r['successes'])} of {int(r['trials'])}); its log-odds are infinite, so its "
                            "variance components, phi and log-odds contrasts are not reported as numbers")


def _fit_notes(result, comp, back=None) -> None:
    """Notes on what a result rests on: a bootstrap's failed simulations (counted), a zero (boundary) run
    variance (its term in the data's own column names: ``back`` maps the model's names to them), a fit that did
    not converge."""
    t = comp.test
    if getattr(t, "n_failed", 0):
        result.notes.append(f"{t.method}: {t.n_failed} simulation(s) whose refit did not converge were not used "
                            f"(p from {t.n_sim})")
    model = comp.model
    if model is not None and hasattr(model, "variance_components"):
        vc = model.variance_components["variance"]
        zero = [":".join((back or {}).get(part, part) for part in str(k).split(":")) for k, v in vc.items()
                if k != "Residual" and float(v) <= 1e-10 * max(float(vc.max()), 1e-300)]
        if zero:
            means = "run means" in str(getattr(t, "method", ""))
            result.notes.append(f"boundary estimate: the variance of {', '.join(zero)} is estimated as zero in the "
                                "runs-random model; " + ("the test on run means does not rest on that estimate"
                                                         if means else "the test treats that source of variation "
                                                         "as absent"))
    if getattr(model, "converged", True) is False:
        result.notes.append("the runs-random model's fit did not converge; its test is not reliable")
    result.fit_notes = [n for n in result.notes if n.startswith(("boundary", "the runs-random model's fit"))
                        or "simulation(s)" in n]


def significance(result, w: Work) -> None:
    """Both readings of the runs (book 4.3; ICLR eq. 3/4): the GLRT with the runs as replications clustered by
    item, and with a random intercept per run of each system tested by the spec's registered test."""
    if len(w.systems) < 2:
        return
    fam = {"family": w.family, "models": w.models}
    result.comparison = compare_systems(w.d, w.y, w.sy, w.it, **fam)
    result.comparison.contrasts = w.rename_back(result.comparison.contrasts)
    result.comparison.means = w.rename_back(result.comparison.means)
    _blank_separated(result, result.comparison)
    if not w.reps:
        _exact(result, w)
        return
    # the user's test (None: the default rule of compare_systems, which may choose a test on the run means or the
    # linear model of 0/1 scores; w.test is the family's default by name, which would switch that rule off)
    result.comparison_random = compare_systems(w.d, w.y, w.sy, w.it, replications=w.reps, test=w.spec.test,
                                               n_sim=w.spec.n_sim, seed=w.spec.seed, items=w.spec.items,
                                               runs=w.spec.runs, settle_alpha=w.spec.alpha, **fam)
    result.notes.extend(result.comparison_random.notes)
    _runs_notes(result, w)
    _fit_notes(result, result.comparison_random, w.back)
    _blank_separated(result, result.comparison_random)
    fewest = int(result.runs.groupby(w.system, observed=True).size().min())
    if fewest < 3:
        result.notes.append(
            f"only {fewest} run(s) for some system: with fewer than 3 runs per system the run-to-run variation "
            "cannot be separated from the system difference with any reliability; the random-effect reading has "
            "almost no denominator degrees of freedom. Add runs.")


def _exact(result, w: Work) -> None:
    """One run and fewer than :data:`~vrs_helpers.registry.SMALL_ITEMS` items (the rule of tables and logs,
    :func:`vrs_helpers.registry.verdict_reading`): the exact or permutation test on the items decides
    (:func:`vrs_helpers.evaluate.tables.small_data.small_test`, as for a task of harness logs), the GLRT beside it."""
    from ...outcomes import ResamplingTest
    from ...registry import verdict_reading
    from .small_data import SMALL_ITEMS, item_means, small_test

    n_items = int(computed(w.d[w.it].nunique()))
    if verdict_reading(False, n_items, w.spec.test) != "exact":
        return
    d = computed(w.d[[w.sy, w.it, w.y]]).rename(columns={w.sy: "system", w.it: "item", w.y: "score"})
    d["system"] = d["system"].astype(str)
    got = small_test(d, seed=w.spec.seed)
    wide = item_means(d)[[str(s) for s in w.systems]]
    diff = float((wide.iloc[:, -1] - wide.iloc[:, 0]).mean()) if wide.shape[1] == 2 else float("nan")
    result.exact = ResamplingTest(diff if wide.shape[1] == 2 else float(np.var(wide.mean(axis=0))),
                                  got["p_value"], 0, method=got["method"])
    result.notes.append(f"{n_items} items (< {SMALL_ITEMS}) and one run: the chi-square reference of the GLRT does "
                        f"not hold; the answer is the {got['method']} on the items ({got['evidence']}), the GLRT "
                        "beside it (the same rule as for harness logs)")


def _runs_notes(result, w: Work) -> None:
    """Which runs model the runs-random reading fitted (issue 39), and the other one beside it where the data leave
    the choice open: run labels shared by the systems fitted as nested runs (a shared seed's shift then sits in the
    denominator), or crossed runs whose shared-run variance is estimated as zero."""
    comp = result.comparison_random
    names = ", ".join(w.back.get(r, r) for r in w.reps)
    if len(getattr(comp, "runs_models", ())) == 2:   # both models tested (issue 56): compare_systems' note says so
        return
    if comp.runs == "crossed":
        result.notes.append(f"runs crossed ({names}): every run label is one run condition shared by the systems, "
                            f"(1|{names}) + (1|system:{names}); a shift shared by all systems cancels in the "
                            "difference")
        other = "nested"
    else:
        result.notes.append(f"runs nested ({names}): every system's runs are its own, (1|system:{names})")
        if not all(runs_shared(w.d, w.sy, r) for r in w.reps):
            return
        other = "crossed"
    if w.family != "gaussian":
        return
    vc = comp.model.variance_components["variance"] if comp.model is not None else None
    if other == "nested" and vc is not None and not all(float(vc.get(r, 0.0)) <= 1e-10 for r in w.reps):
        return
    try:
        alt = compare_systems(w.d, w.y, w.sy, w.it, replications=w.reps, test=w.spec.test, n_sim=w.spec.n_sim,
                              seed=w.spec.seed, items=w.spec.items, runs=other, family=w.family, models=w.models,
                              contrasts=False)
    except VRSError:
        return
    why = ("the shared-run variance is estimated as zero" if other == "nested" else
           "every run label is used by two or more systems")
    result.notes.append(f"{why}: with runs {other} the same test gives p {_p(alt.test.p_value)} "
                        f"({alt.test.method}); --runs {other} makes it the verdict's test")


def _blank_separated(result, comp) -> None:
    """The log-odds contrasts of a separated system as NaN (not numbers: the estimate sits on a ridge). The linear
    model of 0/1 scores (its ``family`` gaussian) estimates them: kept."""
    if not result.separated or comp is None or "contrast" not in comp.contrasts or comp.family != "binomial":
        return
    hit = comp.contrasts["contrast"].map(lambda c: any(p.strip() in result.separated for p in str(c).split(" - ")))
    cols = [c for c in ("estimate", "SE", "z", "t", "df", "p_value", "lower", "upper", "effect_size", "odds_ratio",
                        "z_given_theta", "SE_given_theta", "difference", "difference_SE", "difference_low",
                        "difference_high")
            if c in comp.contrasts]
    comp.contrasts.loc[hit, cols] = np.nan


def conditional(result, w: Work) -> None:
    """For each data property P two questions, each with its own test: "do the systems differ once P is accounted
    for?" - ``response ~ system * P + (1|item)`` against ``response ~ P + (1|item)`` (ICLR eq. 6/7: the system main
    effect and the interaction together) - and "does the system difference depend on P?" - ``system + P`` against
    ``system * P`` (:func:`vrs_helpers.book.glrt.interaction_test`; with runs random the small-sample F test of the
    interaction on the runs-random model). A numeric property as a slope, a categorical one per level."""
    if len(w.systems) < 2:
        return
    for p in w.spec.properties:
        pn = w.names[p]
        numeric = pd.api.types.is_numeric_dtype(w.d[pn].dtype)
        d = w.d if numeric else w.d.assign(**{pn: w.d[pn].astype(str)})
        models = w.models if numeric else mixed.ModelCache(d)  # the binned property's models share theirs
        if numeric:
            c = compare_systems(w.d, w.y, w.sy, w.it, covariate=pn, family=w.family, models=models)
        else:
            c = compare_systems(d, w.y, w.sy, w.it, by=pn, family=w.family, models=models)
        ddf = w.test if w.test in ("kenward-roger", "satterthwaite") else None
        try:
            result.interactions[p] = interaction_test(d, w.y, w.sy, w.it, pn, w.reps, w.family, w.spec.items, ddf,
                                                      models=models)
        except VRSError as e:  # reported; the joint test still stands
            result.notes.append(f"the interaction test of system x {p}: {e}")
        c.contrasts, c.means = w.rename_back(c.contrasts), w.rename_back(c.means)
        if c.slopes is not None:
            c.slopes = w.rename_back(c.slopes)
        result.conditional[p] = c


def against_baseline(w: Work) -> bool:
    """Whether the readings against a baseline (the paired tests, ASO) are made: two systems (the pair itself), or
    three or more with ``baseline`` given."""
    return len(w.systems) == 2 or (len(w.systems) > 2 and w.spec.baseline is not None)


def paired(result, w: Work) -> None:
    """The classic paired bootstrap and permutation tests (Algorithms 4.1/4.2) of every system against the
    baseline on per-item means over runs; p = (c + 1) / (K + 1), never 0, the book's c / K beside it. With three or
    more systems only when a baseline is given (:func:`against_baseline`): a comparison with the first system by
    name answers nobody's question."""
    if not against_baseline(w):
        return
    means = computed(w.d.groupby([w.sy, w.it], observed=True)[w.y].mean()).unstack(w.sy)
    rows = []
    base = w.systems[0]
    for other in w.systems[1:]:
        pair = means[[base, other]].dropna()
        a, b = pair[other].to_numpy(), pair[base].to_numpy()
        for name, kind, fn in [("paired bootstrap", "bootstrap", bootstrap_test),
                               ("paired permutation", "permutation", permutation_test)]:
            # the same seeded batches on both backends: the same p-value
            r = (resampling_test_dask(kind, a, b, n_resamples=w.spec.n_resamples, seed=w.spec.seed, client=w.client)
                 if w.lazy else fn(a, b, n_resamples=w.spec.n_resamples, seed=w.spec.seed))
            rows.append({"test": name, "system": other, "baseline": base, "items": len(pair), **r.as_dict()})
    result.paired = pd.DataFrame(rows)


def _decision(vc, item: str, n: dict, factor: str, target: float, max_runs: int) -> tuple[pd.DataFrame, int | None]:
    """The decision study of one replication column (book 3.3.3): phi as its number of levels grows, the others
    held at their observed numbers (:func:`~vrs_helpers.book.reliability.decision_study`), for 1..50 levels, and
    the smallest number up to ``max_runs`` that reaches ``target`` (phi grows with the levels: bisection)."""
    def study(levels):
        s = decision_study(vc, item, {**{f: [v] for f, v in n.items()}, factor: list(levels)})
        return pd.DataFrame({"factor": factor, "levels": s[f"n_{factor}"].astype(int), "phi": s["phi"]})

    table = study(range(1, min(STUDY_LEVELS, max_runs) + 1))
    hit = table[table["phi"] >= target]
    if len(hit):
        return table, int(hit["levels"].iloc[0])
    lo, hi = len(table), max_runs  # phi(lo) < target
    if hi <= lo or study([hi])["phi"].iloc[0] < target:
        return table, None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if study([mid])["phi"].iloc[0] >= target else (mid, hi)
    return pd.concat([table, study([hi])], ignore_index=True), hi


def reliability(result, w: Work) -> None:
    """Per system: the variance components of ``response ~ 1 + (1|item) + (1|R)...`` (REML; binary scores on the
    latent scale), the absolute reliability coefficient phi of the item means over the observed runs (Definition
    3.2) and, per replication column, the decision study and the levels that reach phi >= ``target_phi``."""
    spec = w.spec
    for s in w.systems:
        if str(s) in result.separated:
            continue  # all correct or all wrong: no variance components or phi (separation)
        part = w.d[w.d[w.sy] == s]
        if computed(part.groupby(w.it, observed=True)[w.y].count().max()) < 2:
            result.notes.append(f"system {s} has one score per item (a single run): item and residual variance are "
                                "not separable, so no variance components or phi for it; add runs")
            continue
        levels = {r: int(computed(part[r].nunique())) for r in w.reps}
        reps_s = [r for r in w.reps if levels[r] >= 2]
        formula = f"{w.y} ~ 1 + (1|{w.it})" + "".join(f" + (1|{r})" for r in reps_s)
        try:
            if w.family == "binomial":  # latent scale: glmer's variances plus the logistic residual pi^2/3
                vc = latent_variance_components(computed(part), w.y, w.it, reps_s).variance_components.copy()
            else:
                vc = mixed.fit(formula, part, method="REML").variance_components.copy()
        except VRSError as e:  # reported, the other systems still get their analysis
            result.notes.append(f"variance components of system {s}: {e}")
            continue
        # phi and the decision studies read the components by the formula's names (":" joins the factors of an
        # interaction; an original column name may hold a ":" itself), the results carry the original names
        def original(component):
            return ":".join(w.back.get(n, n) for n in str(component).split(":"))

        n = {r: float(levels[r]) for r in reps_s}
        ph = phi(vc, w.it, n=n)
        result.reliability[s] = replace(ph, object=spec.item, n={w.back[r]: v for r, v in ph.n.items()},
                                        terms=ph.terms.assign(component=ph.terms["component"].map(original)))
        needed, studies = {}, []
        for r in n:
            table, needed[w.back[r]] = _decision(vc, w.it, n, r, spec.target_phi, spec.max_runs)
            studies.append(table.assign(factor=w.back[r]))
        vc.index = [original(c) for c in vc.index]
        result.variance_components[s] = vc
        if studies:
            result.decision[s] = pd.concat(studies, ignore_index=True)
        result.runs_needed[s] = needed


def verdict(result, w: Work) -> None:
    """One sentence per reading: both readings of the runs (their tests' own evidence), the conditional tests and
    the reliability of each system."""
    alpha, spec = result.alpha, w.spec
    if result.comparison is not None:
        g = result.glrt
        result.verdict.append(f"Runs as replications clustered by item: the systems "
                              f"{verdict_text(g.p_value, alpha)} (GLRT {g.evidence()}); it ignores the run-to-run "
                              "variation and the variation of the system difference from item to item.")
        if result.comparison_random is not None:
            g2, t = result.glrt_replications_random, result.random_test
            what = ("With a random effect per run and per system x item (items like these)"
                    if result.comparison_random.system_item else "With a random effect per run")
            if t is g2:
                result.verdict.append(f"{what}, the systems {verdict_text(g2.p_value, alpha)} ({g2.evidence()}).")
            else:
                result.verdict.append(
                    f"{what}, the systems {verdict_text(t.p_value, alpha)} ({t.method}: "
                    f"{t.evidence()}; the chi-square GLRT, valid only with many runs, gives {g2.evidence()}, "
                    f"p {_p(g2.p_value)}).")
            pairwise = pairwise_sentence(result)
            if pairwise and (result.ranking is None or len(result.systems) <= MAX_SYSTEM_LINES):
                result.verdict.append(pairwise)
            result.verdict.extend(ranking_lines(result))
            if result.disagree:
                result.verdict.append("WARNING: the two readings disagree. The conclusion hinges on whether the "
                                      "runs are treated as fixed replications or as a sample of possible runs; "
                                      "with few runs and run-to-run variance, report both and add runs.")
        for p, c in result.conditional.items():
            g = c.glrt
            result.verdict.append(
                f"Conditional on {p} (ICLR eq. 6/7: system and system x {p} against {p} alone, GLRT {g.evidence()}, "
                f"p {_p(g.p_value)}): "
                + (f"the systems differ once {p} is accounted for." if g.p_value < alpha else
                   f"no evidence that the systems differ once {p} is accounted for."))
            t = result.interactions.get(p)
            if t is not None:
                result.verdict.append(
                    f"Interaction with {p} (system + {p} against system x {p}, {t.method}: {t.evidence()}, "
                    f"p {_p(t.p_value)}): "
                    + (f"the difference between the systems depends on {p}." if t.p_value < alpha else
                       f"no evidence that the difference between the systems depends on {p}."))
    if len(result.reliability) > MAX_SYSTEM_LINES:   # many systems: one line, the details in summary.json
        result.verdict.append("Reliability (phi per system; summary.json 'reliability' has the runs each needs for "
                              f"phi >= {spec.target_phi}): " + ", ".join(
                                  f"{s} {r.phi:.3f} ({r.interpretation})" for s, r in result.reliability.items()) + ".")
        return
    for s, r in result.reliability.items():
        result.verdict.append(reliability_sentence(s, r, result.runs_needed.get(s) or {}, spec.target_phi,
                                                   spec.max_runs))
    if len(w.systems) < 2:
        result.notes.append("one system: reliability only")


MAX_SYSTEM_LINES = 4   # beyond 4 systems ASO and reliability take one verdict line each, not one per system


def rank(result, w: Work) -> None:
    """Three or more systems: the ranking (:mod:`vrs_helpers.evaluate.tables.ranking`) from the design's model - the
    runs-random model when there are runs, else the runs-as-replications one - with its family-wise pairwise
    decisions: per system the estimate (for 0/1 scores the accuracy at the model's typical item, the logistic of
    the marginal mean of the logits on which the decisions are made) with its 95 % interval, the rank, the
    simultaneous rank interval and the letters. Every interval is at level 1 - alpha and in the family of the
    decisions (:func:`vrs_helpers.evaluate.tables.ranking.decision_intervals`)."""
    comp = result.comparison_random if result.comparison_random is not None else result.comparison
    if comp is None or len(w.systems) < 3 or "contrast" not in comp.contrasts:
        return
    m, kind = decision_intervals(comp, result.family, result.alpha)
    est, lo, hi = (("probability", "prob_lower", "prob_upper") if "probability" in m else ("emmean", "lower", "upper"))
    systems = m.iloc[:, 0].astype(str).tolist()
    small = "df" in comp.contrasts and "t" in comp.contrasts
    adjust = str(getattr(comp, "adjust", ""))
    how = ("t tests with each pair's own SE, single-step max-|t| over a parametric bootstrap" if adjust == OWN_SE else
           "Tukey-adjusted t tests on small-sample df" if small else
           "the bootstrap LRT of the one pair left" if adjust == "bootstrap LRT of the pair" else
           "single-step max-|z| over the parametric bootstrap" if adjust.startswith("bootstrap") else
           "single-step max-|z| from the joint normal of the contrasts (multcomp::glht)" if adjust == "mvt" else
           "Tukey-adjusted Wald z tests on the logit scale" if result.family == "binomial" else
           "Tukey-adjusted Wald z tests")
    _blank_separated(result, comp)
    result.ranking = ranking_table(systems, m[est], m[lo], m[hi], comp.contrasts, result.alpha,
                                   higher_is_better=result.higher_is_better, method=how)
    result.ranking["ci"] = kind
    if len(systems) > MAX_LETTER_SYSTEMS:
        result.notes.append(f"no letters for {len(systems)} systems (they are drawn for up to {MAX_LETTER_SYSTEMS}: "
                            "the letter display grows faster than the pairs); the rank intervals and the pairs "
                            "(pairs.csv) carry the same decisions")


def ranking_lines(result) -> list[str]:
    """The ranking in the verdict: one line per system, after one line that answers which is best."""
    table = getattr(result, "ranking", None)
    if table is None:
        return []
    comp = result.comparison_random if result.comparison_random is not None else result.comparison
    scale = "accuracy" if result.family == "binomial" else "mean"
    c = comp.contrasts
    found = int((c["p_value"] < result.alpha).sum())
    pct = f"{100 * (1 - result.alpha):g} %"
    ci = f"simultaneous {pct} CI" if str(table["ci"].iloc[0]) == "simultaneous" else f"{pct} CI"
    lines = [f"Ranking of the {len(table)} systems ({table['method'].iloc[0]}: {found} of {len(c)} pairs differ at "
             f"family-wise alpha = {result.alpha:g}, each pair in summary.json 'pairs'; {scale} with its {ci}; "
             "rank interval: the ranks each system can hold; systems sharing a letter are not separated):"]
    for r in table.itertuples():
        span = f"{r.rank_low}" if r.rank_low == r.rank_high else f"{r.rank_low}-{r.rank_high}"
        sep = result.separated.get(r.system) if comp.family == "binomial" else None
        gap = f" (its contrasts are not estimable: {sep}; its rank interval and letters are not decisions)" \
            if sep else ""
        lines.append(f"  {r.rank}. {r.system}: {r.estimate:.4g} [{r.ci_low:.4g}, {r.ci_high:.4g}], "
                     f"rank {span}" + (f", group {r.group}" if r.group else "") + gap)
    return lines


def power(result, w: Work) -> None:
    """Power planning of the runs-random reading (:func:`plan_power`) with the table's items."""
    plan_power(result, len(computed(w.d[w.it].unique())), delta=w.spec.delta, target=w.spec.target_power,
               columns=dict(zip(w.reps, w.spec.replications, strict=True)), item=w.it)


BOUND_LEVEL = 0.8  # the upper confidence bound a boundary (zero) run variance is replaced by (Browne 1995)


def _column_plan(result, vc, system_col: str, safe: str, name: str, items: int, n_runs: int, level: float) -> dict:
    """One replication column's planning values: its levels per system (the fewest), its REML variance and, when
    that is 0 on the boundary, the ``level`` upper confidence bound from the spread of the column's level means
    within each system (:func:`~vrs_helpers.evaluate.tables.power.variance_upper_bound`)."""
    from .power import variance_upper_bound

    sys_name = result.system or "_system"
    runs = result.runs
    levels = runs.groupby(sys_name, observed=True)[name].nunique()
    est = float(vc.get(f"{system_col}:{safe}", 0.0))
    # a boundary estimate is 0 up to the optimizer's rounding (1e-28 on one backend, 0 on another): 0 below 1e-12
    # of the residual variance, so both backends plan with the same numbers
    est = est if est > 1e-12 * float(vc["Residual"]) else 0.0
    out = {"levels": int(levels.min()), "sd_estimate": math.sqrt(est), "sd": math.sqrt(est), "basis": "REML estimate"}
    if est > 0:
        return out
    means = runs.groupby([sys_name, name], observed=True)["mean"].mean()
    dev = means - means.groupby(level=0, observed=True).transform("mean")
    df = float((levels - 1).sum())
    if df < 1:
        return out
    per_level = n_runs / max(out["levels"], 1)  # runs averaged in one level's mean
    bound = variance_upper_bound(float((dev ** 2).sum()), df, float(vc["Residual"]) / items / per_level, level)
    itself = "" if bound > 0 else ", itself 0: the runs vary no more than the residual noise explains"
    out.update(sd=math.sqrt(bound), basis=f"{level:.0%} upper confidence bound (the REML estimate is 0, on the "
                                          f"boundary; {df:g} df{itself})", df=df)
    return out


def plan_power(result, items: int, delta: float | None = None, target: float = 0.8, columns: dict | None = None,
               item: str | None = None, level: float = BOUND_LEVEL):
    """Power planning of the runs-random reading (:mod:`vrs_helpers.evaluate.tables.power`; the significance counterpart
    of the decision study, book 3.3.3) from the REML fit of ``response ~ system + (1|item) (+ (1|system:item))
    + (1|system:R)...``: per replication column R (``columns``: formula name -> the log's name) its own variance
    and number of levels (crossed columns planned as crossed), the system x item variance when the model has it,
    the residual variance and ``items``:

    - the minimum detectable difference: the smallest difference the F test detects with power ``target`` with
      the observed runs (post-hoc "observed power" from the observed difference is not reported: it is a function
      of the p-value, Hoenig & Heisey 2001);
    - for ``delta`` (every other system ``delta`` from the baseline), when given: its power, the levels of each
      column and the items needed for ``target``.

    A run variance estimated as 0 (on the boundary, usual with 3-5 runs) is replaced by its ``level`` upper
    confidence bound, and the verdict and ``power["columns"]`` say so. Closed form of the balanced design
    (noncentral F); gaussian responses only (a note otherwise: simulate with
    :func:`~vrs_helpers.evaluate.tables.power.simulated_power`)."""
    from .power import PlanningError, f_test_power, items_needed, minimum_detectable_difference, runs_needed

    comp = result.comparison_random
    if comp is None or comp.model is None:
        return result
    if result.family != "gaussian":
        result.notes.append("closed-form power planning is for continuous scores (the noncentral F of the LMM); "
                            "for binary scores simulate it: vrs_helpers.evaluate.tables.power.simulated_power("
                            "family='binomial')")
        return result
    vc = comp.model.variance_components["variance"]
    system_col = comp.formula.split("~")[1].split("+")[0].strip()
    if columns is None:
        columns = {r: r for r in result.replications}
    n_runs = int(result.runs.groupby(result.system or "_system", observed=True).size().min())
    plans = {name: _column_plan(result, vc, system_col, safe, name, items, n_runs, level)
             for safe, name in columns.items()}
    residual_sd = float(np.sqrt(vc["Residual"]))
    if item is None:  # the first random term is the item's (compare_systems' formula)
        item = comp.formula.split("(1|")[1].split(")")[0].strip()
    si_sd = float(np.sqrt(vc.get(f"{system_col}:{item}", 0.0)))
    n = [p["levels"] for p in plans.values()]
    sds = [p["sd"] for p in plans.values()]
    runs, run_sd = (n[0], sds[0]) if len(n) == 1 else (n, sds)
    k = len(result.systems)
    bounded = [c for c, p in plans.items() if p["basis"] != "REML estimate"]
    out = {"test": "F test of system (runs random), closed form of the balanced design (noncentral F; with "
                   "crossed replication columns or a system x item variance Satterthwaite's df from the expected "
                   "mean squares)",
           "columns": plans, "run_sd": sds[0], "residual_sd": residual_sd, "system_item_sd": si_sd,
           "items": int(items), "runs_per_system": int(np.prod(n)), "alpha": result.alpha, "target": target,
           "planned_with_upper_bound": bounded}
    design = (f"{n[0]} runs per system" if len(n) == 1 else
              " x ".join(f"{v} levels of {c}" for c, v in zip(plans, n, strict=True)) + " per system")
    said = ""
    if bounded:
        said = (" Planned with the " + "; ".join(f"{plans[c]['basis'].split(' (')[0]} of the {c} SD "
                                                  f"({plans[c]['sd']:.3g})" for c in bounded)
                + (": the REML estimate of that run variance is 0" if len(bounded) == 1 else
                   ": the REML estimates of those run variances are 0")
                + ", a boundary estimate from few runs, and power computed from a zero run variance would promise "
                  "more than the runs can deliver.")
        result.notes.append("power planning:" + said)
    whom = "the two systems" if k == 2 else "each other system and the baseline"
    if min(n) < 2:  # no df for the runs of some system: what a design with 3 levels of each column would detect
        try:
            three = [3] * len(n)
            mdd3 = minimum_detectable_difference(three[0] if len(n) == 1 else three, items, run_sd, residual_sd, k,
                                                 result.alpha, target, si_sd)
        except PlanningError as e:
            result.notes.append(f"minimum detectable difference: {e}")
        else:
            out["minimum_detectable_difference_3_levels"] = mdd3
            result.verdict.append(
                f"Power (closed form, balanced design): some system has a single level of "
                f"{' / '.join(c for c, v in zip(plans, n, strict=True) if v < 2)}, so the runs-random test has "
                f"nothing to measure run-to-run variation of that system by; with 3 per system and {items} items "
                f"the smallest difference between {whom} the F test would detect with probability {target:g} is "
                f"{mdd3:.4g}.{said}")
    try:
        if min(n) < 2:
            raise PlanningError("one run per system leaves the F test no denominator df")
        out["minimum_detectable_difference"] = minimum_detectable_difference(runs, items, run_sd, residual_sd, k,
                                                                             result.alpha, target, si_sd)
        result.verdict.append(
            f"Power (closed form, balanced design): with {design} and {items} items the smallest difference "
            f"between {whom} that the F test detects with probability {target:g} is "
            f"{out['minimum_detectable_difference']:.4g}.{said}")
    except PlanningError as e:
        result.notes.append(f"minimum detectable difference: {e}")
    if delta is not None:
        d = np.array([0.0] + [float(delta)] * (k - 1))
        try:
            pw = f_test_power(d, runs, items, run_sd, residual_sd, k, result.alpha, si_sd) if min(n) >= 2 else None
            need = {c: runs_needed(d, items, sds if len(n) > 1 else sds[0], residual_sd, k, result.alpha, target,
                                   runs=n if len(n) > 1 else None, column=j, system_item_sd=si_sd)
                    for j, c in enumerate(plans)}
            m_need = items_needed(d, runs, run_sd, residual_sd, k, result.alpha, target, system_item_sd=si_sd) \
                if min(n) >= 2 else None
        except PlanningError as e:
            result.notes.append(f"power for a difference of {float(delta):g}: {e}")
        else:
            first = next(iter(need.values()))
            out["delta"] = {"differences": [float(v) for v in d[1:]], "power": pw, "runs_needed": first,
                            "levels_needed": need, "items_needed": m_need}
            now = (f"with {design} and {items} items the F test detects a difference of {float(delta):g} with "
                   f"probability {pw:.2f}" if pw is not None else f"for a difference of {float(delta):g}")
            more = "; ".join(f"{v} levels of {c}" if v is not None else f"no number of levels of {c} up to 10,000"
                             for c, v in need.items())
            items_txt = (f"{m_need} items" if m_need is not None else
                         "no number of items (more items cannot make up for too few runs)")
            result.verdict.append(f"Power (closed form, balanced design): {now}; power {target:g} needs {more} "
                                  f"(the others as they are), or with these runs {items_txt}.{said}")
    result.power = out
    return result


def stochastic_order(result, w: Work) -> None:
    """What NLP users already run (:mod:`vrs_helpers.evaluate.tables.readings`): ASO in both directions of each system
    against the baseline and the expected best of n runs per system, on the per-run means of ``result.runs``
    (small: computed in memory on both backends), then one sentence per disagreement between the readings."""
    seed = w.spec.seed
    means = run_means(result.runs, w.system)
    result.expected_max = expected_best_by_system(means, result.higher_is_better, seed=seed)
    if against_baseline(w):
        result.aso, notes = aso_readings(means, str(result.systems[0]), result.higher_is_better, seed=seed)
        result.notes.extend(notes)
        at = next((i for i, v in enumerate(result.verdict) if v.startswith("Reliability")), len(result.verdict))
        result.verdict[at:at] = ([a.sentence() for a in result.aso.values()]
                                 if len(result.aso) < MAX_SYSTEM_LINES else [_aso_line(result)])
    result.disagreements = disagreements(result)


def _aso_line(result) -> str:
    """ASO of many systems against the baseline in one sentence: who is almost stochastically better, worse, neither."""
    base = str(result.systems[0])
    groups = {"better": [], "worse": [], "neither": []}
    for s, a in result.aso.items():
        groups["better" if a.winner == s else "worse" if a.winner == base else "neither"].append(str(s))
    first = next(iter(result.aso.values()))
    said = "; ".join(f"{k}: {', '.join(v)}" for k, v in groups.items() if v)
    return (f"ASO on the run means against {base} ({first.candidate_better.n_a} vs {first.candidate_better.n_b} runs, "
            f"deepsig's threshold eps_min < {first.threshold:g}; each system in summary.json 'aso'): almost "
            f"stochastically {said}.")


def answer(result, w: Work) -> None:
    """One bottom line (``summary.json`` ``answer``; the verdict's first sentence): the user's question answered by
    the test that matches the design - the runs-random reading when there are runs (items like these with the
    system-by-item term), else the runs-as-replications GLRT."""
    result.answer = answer_sentence(result)
    if result.answer:
        result.verdict.insert(0, result.answer)


def answer_sentence(result) -> str | None:
    comp = result.comparison_random if result.comparison_random is not None else result.comparison
    if comp is None:
        return None
    exact = getattr(result, "exact", None) if result.comparison_random is None else None
    t = exact if exact is not None else comp.test
    if exact is not None:
        scope = "On these items (one run, fewer than 30 items: an exact test on the items)"
    elif result.comparison_random is None:
        scope = "On these runs and items (the runs as replications; no run-to-run variation in the test)"
    elif comp.system_item:
        scope = "Across runs and items like these"
    else:
        scope = "Across runs, on these items"
    if len(getattr(comp, "runs_models", ())) == 2:
        scope += " (run labels shared: crossed and nested runs both tested)"
    elif getattr(comp, "runs", "") == "crossed":
        scope += " (runs crossed: each run label is shared by the systems)"
    evidence = f"{t.method}: {t.evidence()}, p {_p(t.p_value)}"
    means = result.runs.groupby(result.system or "_system", observed=True)["mean"].mean()
    runs = int(result.runs.groupby(result.system or "_system", observed=True).size().min())
    systems = [str(s) for s in result.systems]
    if t.p_value < result.alpha:
        if len(systems) == 2:
            a, b = systems[1], systems[0]
            better = (means[a] > means[b]) == bool(result.higher_is_better)
            x, y = (a, b) if better else (b, a)
            return f"{scope}, {x} is better than {y}: {evidence}."
        table = getattr(result, "ranking", None)
        if table is not None:
            return (f"{scope}, the {len(systems)} systems differ: {evidence}. "
                    + ranking_sentence(table, comp.contrasts, result.alpha, result.higher_is_better))
        return f"{scope}, the {len(systems)} systems differ: {evidence}; the pairwise decisions follow."
    what = " and ".join(systems) if len(systems) == 2 else f"the {len(systems)} systems"
    pointer = " (see the power planning)" if getattr(result, "power", None) else ""
    return (f"{scope}: no evidence that {what} differ ({evidence}); with {runs} run(s) per system a small "
            f"difference can go undetected{pointer}.")


def judge(result, w: Work) -> None:
    """With human labels (``spec.human``; issue 43): the judge-corrected readings
    (:func:`vrs_helpers.evaluate.tables.judged.analyze_judge`) open the verdict, and the answer is the corrected one;
    the
    readings of the judge's scores as they are follow, under a line that says so."""
    if w.spec.human is None:
        return
    from .judged import analyze_judge

    table = w.spec.table if w.spec.system else w.spec.table.assign(_system="all")
    result.judge = analyze_judge(table, w.response, w.system, w.spec.item, w.spec.human, w.systems,
                                 alpha=result.alpha, higher_is_better=result.higher_is_better,
                                 runs=list(w.spec.replications))
    lines = list(result.judge.verdict)
    if result.verdict:
        lines.append("The readings below analyse the judge's scores as they are (the judge taken as the truth; the "
                     "runs-random reading is the one with run-to-run variation):")
    result.verdict[:0] = lines
    if len(result.judge.differences):
        result.answer = lines[0]


#: the steps of one response's analysis, in order
STEPS = (separation, significance, rank, conditional, paired, reliability, verdict, power, stochastic_order, answer,
         judge)
#: steps that read only the prepared data and write only their own part of the result (the resampling tests, numpy
#: work that releases the GIL): in memory they run in a thread beside the steps before them (the model fits), and
#: the analysis waits for them where they stand in STEPS; their numbers do not depend on it (seeded batches)
CONCURRENT = (paired,)
