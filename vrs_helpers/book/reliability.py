"""Reliability from variance components (book 3.3.2-3.3.3): phi, decision studies, meta-parameter importance.

The reliability coefficient (Definition 3.2) relates the variance of the objects of measurement (e.g. test
sentences), sigma_s^2, to the error variance sigma_Delta^2: every other variance component, each divided by the
sample sizes n_f of the facets it involves apart from the object (eq. 3.11), the residual by the product of all:

    phi = sigma_s^2 / (sigma_s^2 + sigma_Delta^2)                                                     (3.12)

With n_f = 1 for every facet, phi is the share of the objects' variance in the total variance (ICC, eq. 3.10).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd

from ..errors import VRSError
from ..literal import html_text, plot_text


class ReliabilityError(VRSError, ValueError):
    """Bad variance components or arguments for phi or a decision study."""


RESIDUAL = "Residual"

KOO_LI_BANDS = ((0.5, "poor"), (0.75, "moderate"), (0.9, "good"), (math.inf, "excellent"))


def koo_li(value: float) -> str:
    """Interpretation of a reliability coefficient after Koo & Li (2016), as in the ICLR paper:
    < .5 poor, .5-.75 moderate, .75-.9 good, > .9 excellent."""
    if value is None or not np.isfinite(value):
        return "undefined"
    for upper, label in KOO_LI_BANDS:
        if value < upper:
            return label
    return "excellent"  # pragma: no cover


def components(source, error: type[Exception] = ReliabilityError) -> pd.Series:
    """Variance components as a Series indexed by lme4 names (incl. 'Residual') from a fit, frame or mapping; bad
    input raises ``error`` (the caller's own error type: the power planner's is a PlanningError)."""
    if hasattr(source, "variance_components"):
        source = source.variance_components
    if isinstance(source, pd.DataFrame):
        if "variance" not in source.columns:
            raise error("A variance-component table needs a 'variance' column.")
        source = source["variance"]
    s = pd.Series(source, dtype=float)
    if RESIDUAL not in s.index:
        raise error(f"The variance components need a '{RESIDUAL}' entry; got {', '.join(map(str, s.index))}.")
    if s.isna().any() or (s < 0).any():
        raise error("Variance components must be non-negative numbers.")
    return s


def variance_table(source, order: list[str] | None = None, labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Component, variance and percent of total, in the layout of the book's Tables 3.1-3.12."""
    s = components(source)
    if order is not None:
        missing = [o for o in order if o not in s.index]
        if missing:
            raise KeyError(f"Components {missing} are not in the model; it has {', '.join(s.index)}.")
        s = s[order + [c for c in s.index if c not in order]]
    out = pd.DataFrame({"component": [labels.get(c, c) if labels else c for c in s.index],
                        "variance": s.to_numpy(), "percent": 100 * s.to_numpy() / s.sum()})
    return out


def _facets_of(component: str, obj: str) -> list[str]:
    return [f for f in component.split(":") if f != obj]


@dataclass
class PhiResult:
    """A reliability coefficient with its error-variance terms (which component, divided by what)."""

    phi: float
    kind: str  # "absolute" (Phi, Definition 3.2) or "relative" (E rho^2, footnote 9)
    object: str
    n: dict
    substantial: float
    error_variance: float
    terms: pd.DataFrame = field(repr=False)  # component, variance, divisor, contribution

    @property
    def interpretation(self) -> str:
        return koo_li(self.phi)

    def __float__(self) -> float:
        return float(self.phi)

    def __repr__(self) -> str:
        n = ", ".join(f"n_{k}={v:g}" for k, v in self.n.items())
        return (f"PhiResult({self.kind} phi={self.phi:.4f} [{self.interpretation}], object={self.object!r}"
                f"{', ' + n if n else ''})")

    def _repr_html_(self) -> str:
        return (f"<p><b>{html_text(self.kind)} reliability coefficient φ = {self.phi:.4f}</b> "
                f"({html_text(self.interpretation)}, Koo &amp; Li); σ²<sub>{html_text(self.object)}</sub> = "
                f"{self.substantial:.4g}, σ²<sub>Δ</sub> = "
                f"{self.error_variance:.4g}</p>" + self.terms.to_html(index=False, float_format=lambda x: f"{x:.4g}"))

    def to_frame(self) -> pd.DataFrame:
        return self.terms.copy()


def phi(source, object: str, n: Mapping[str, float] | None = None, kind: str = "absolute",
        include: list[str] | None = None) -> PhiResult:
    """Reliability coefficient phi of Definition 3.2 (``kind="absolute"``, Brennan's Phi, eq. 3.11/3.12) or the
    relative coefficient E rho^2 (``kind="relative"``, footnote 9: only components that interact with the object).

    Parameters
    ----------
    source : a fitted model (vrs_helpers.mixed), its variance-component table, or a mapping component -> variance
        with lme4 names (``sentence``, ``rater``, ``sentence:rater``, ``Residual``).
    object : the object-of-measurement factor (e.g. ``"sentence"``).
    n : facet sample sizes n_f (default 1 for each facet): each component is divided by the product of the n_f of
        the facets it involves apart from the object; the residual by the product over all facets.
    include : components to count as error variance (default: all). Definition 3.2 lets the user choose.
    """
    if kind not in ("absolute", "relative"):
        raise ReliabilityError(f"kind must be 'absolute' or 'relative'; got {kind!r}.")
    s = components(source)
    if object not in s.index:
        raise ReliabilityError(f"The object of measurement {object!r} is not a component of the model "
                         f"({', '.join(s.index)}); fit a model with (1|{object}).")
    facets = list(dict.fromkeys(f for c in s.index if c not in (object, RESIDUAL) for f in _facets_of(c, object)))
    n = dict(n or {})
    unknown = [f for f in n if f not in facets]
    if unknown:
        raise ReliabilityError(f"Unknown facet(s) {unknown}; the model's facets are {facets or 'none'}.")
    for f, v in n.items():
        if not (isinstance(v, (int, float, np.integer, np.floating)) and v >= 1):
            raise ReliabilityError(f"Sample size n_{f} must be a number >= 1; got {v!r}.")
    sizes = {f: float(n.get(f, 1)) for f in facets}
    rows = []
    for comp, var in s.items():
        if comp == object:
            continue
        if include is not None and comp not in include and comp != RESIDUAL:
            continue
        involved = facets if comp == RESIDUAL else _facets_of(comp, object)
        interacts = comp == RESIDUAL or object in comp.split(":")
        if kind == "relative" and not interacts:
            continue
        divisor = float(np.prod([sizes[f] for f in involved])) if involved else 1.0
        rows.append({"component": comp, "variance": var, "divisor": divisor, "contribution": var / divisor})
    terms = pd.DataFrame(rows, columns=["component", "variance", "divisor", "contribution"])
    err = float(terms["contribution"].sum())
    sub = float(s[object])
    value = sub / (sub + err) if sub + err > 0 else float("nan")
    return PhiResult(value, kind, object, {f: sizes[f] for f in facets if f in n}, sub, err, terms)


def phi_intra_rater(source, object: str, rater: str, instantiation: str) -> float:
    """Intra-rater reliability, eq. (3.18): (s + s:r) / (s + s:r + r:i + residual)."""
    s = components(source)
    get = lambda a, b=None: float(s.get(a if b is None else _name(s, a, b), 0.0))  # noqa: E731
    num = get(object) + get(object, rater)
    return num / (num + get(rater, instantiation) + get(RESIDUAL))


def phi_inter_rater(source, object: str, rater: str, instantiation: str) -> float:
    """Inter-rater reliability, eq. (3.19): (s + s:i) / (s + s:i + s:r + residual)."""
    s = components(source)
    get = lambda a, b=None: float(s.get(a if b is None else _name(s, a, b), 0.0))  # noqa: E731
    num = get(object) + get(object, instantiation)
    return num / (num + get(object, rater) + get(RESIDUAL))


def _name(s: pd.Series, a: str, b: str) -> str:
    """The lme4 name of the a:b interaction in either order."""
    return f"{a}:{b}" if f"{a}:{b}" in s.index else f"{b}:{a}"


def decision_study(source, object: str, sizes: Mapping[str, list], kind: str = "absolute") -> pd.DataFrame:
    """phi over a grid of facet sample sizes (a D-study in Brennan's terms; Figure 3.3): one row per design."""
    facets = list(sizes)
    grids = [list(v) for v in sizes.values()]
    rows = []
    for combo in (np.array(np.meshgrid(*grids, indexing="ij")).reshape(len(facets), -1).T if facets else [[]]):
        n = dict(zip(facets, (float(v) for v in combo), strict=True))
        res = phi(source, object, n=n, kind=kind)
        rows.append({**{f"n_{f}": int(v) if float(v).is_integer() else v for f, v in n.items()}, "phi": res.phi,
                     "interpretation": res.interpretation})
    return pd.DataFrame(rows)


def smallest_design(study: pd.DataFrame, target: float = 0.8) -> pd.Series | None:
    """The design of a decision study with the fewest measurements (product of the n_f) reaching ``target``;
    ties go to the higher phi. None when no design in the grid reaches the target."""
    ncols = [c for c in study.columns if c.startswith("n_")]
    ok = study[study["phi"] >= target].copy()
    if ok.empty:
        return None
    ok["measurements"] = ok[ncols].prod(axis=1)
    return ok.sort_values(["measurements", "phi"], ascending=[True, False]).iloc[0]


def _design_rows(study: pd.DataFrame, sizes: Mapping[str, float]) -> pd.DataFrame:
    unknown = [f for f in sizes if f"n_{f}" not in study.columns]
    if unknown:
        facets = [c.removeprefix("n_") for c in study.columns if c.startswith("n_")]
        raise ReliabilityError(f"Unknown facet(s) {unknown}; the decision study varies {facets or 'none'}.")
    keep = np.ones(len(study), dtype=bool)
    for f, v in sizes.items():
        keep &= (study[f"n_{f}"] == v).to_numpy()
    return study[keep]


def design_phi(study: pd.DataFrame, **sizes: float) -> float:
    """phi of one design of a decision study (:func:`decision_study`), named by its facet sizes:
    ``design_phi(study, rater=2, instantiation=2)``. Every facet the study varies must be given."""
    rows = _design_rows(study, sizes)
    if len(rows) != 1:
        raise ReliabilityError(f"{len(rows)} designs of the study have {sizes}; name one size for every facet it "
                               f"varies ({', '.join(c for c in study.columns if c.startswith('n_'))}) from its grid.")
    return float(rows["phi"].iloc[0])


def smallest_n(study: pd.DataFrame, facet: str, target: float = 0.8, **fixed: float) -> float:
    """The smallest sample size of ``facet`` at which phi reaches ``target`` (phi >= target) in a decision study,
    with the other facets at ``fixed`` sizes: ``smallest_n(study, "rater", 0.8, instantiation=1)``. NaN when no
    design of the study's grid reaches it (a larger grid, or the closed form, may)."""
    if f"n_{facet}" not in study.columns:
        raise ReliabilityError(f"The decision study does not vary {facet!r}.")
    rows = _design_rows(study, fixed)
    ok = rows[rows["phi"] >= target]
    return float(ok[f"n_{facet}"].min()) if len(ok) else float("nan")


def plot_decision_study(study: pd.DataFrame, x: str, line: str, ax=None, target: float | None = 0.8, title=None):
    """phi against one facet's sample size, one line per sample size of another (book Figure 3.3)."""
    import matplotlib.pyplot as plt

    ax = ax or plt.gca()
    for value, g in study.groupby(line):
        ax.plot(g[x], g["phi"], marker="o", ms=3, label=plot_text(f"{line.removeprefix('n_')} = {value}"))
    if target is not None:
        ax.axhline(target, color="grey", ls="--", lw=0.8)
    ax.set_xlabel(plot_text(f"number of {x.removeprefix('n_')}s ({x})"))
    ax.set_ylabel("reliability coefficient φ")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


def level_means(data: pd.DataFrame, response: str, factors: list[str]) -> pd.DataFrame:
    """Mean and standard deviation of the response for every level of every factor (book Figure 3.4)."""
    rows = []
    for f in factors:
        if f not in data.columns:
            raise KeyError(f"Column {f!r} not in the data.")
        g = data.groupby(f, observed=True)[response]
        for level, mean, sd, cnt in zip(g.mean().index, g.mean(), g.std(), g.size(), strict=True):
            rows.append({"factor": f, "level": level, "mean": mean, "sd": sd, "n": cnt})
    return pd.DataFrame(rows)


def plot_level_means(means: pd.DataFrame, axes=None, ylabel: str = "score"):
    """One panel per factor: the mean +- SD of the response per level (book Figure 3.4)."""
    import matplotlib.pyplot as plt

    factors = list(dict.fromkeys(means["factor"]))
    if axes is None:
        fig, axes = plt.subplots(1, len(factors), figsize=(2.4 * len(factors), 3.2), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, f in zip(axes, factors, strict=True):
        g = means[means["factor"] == f]
        ax.errorbar(range(len(g)), g["mean"], yerr=g["sd"], fmt="o", capsize=3)
        ax.set_xticks(range(len(g)), [plot_text(v) for v in g["level"]], rotation=45, fontsize=8)
        ax.set_title(plot_text(f), fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    return axes


@dataclass
class BudgetCI:
    """Bootstrap mean and confidence interval of the expected maximum score under a search budget (Alg. 3.1)."""

    table: pd.DataFrame  # budget, mean, sd, lower, upper
    n_boot: int
    level: float
    seed: int

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def __repr__(self) -> str:
        return f"BudgetCI({len(self.table)} budgets, {self.n_boot} resamples, level {self.level}, seed {self.seed})"

    def _repr_html_(self) -> str:
        return self.table.to_html(index=False, float_format=lambda x: f"{x:.4g}")


def expected_max_ci(scores, budgets=None, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> BudgetCI:
    """Algorithm 3.1: for each budget B, draw B scores with replacement K = n_boot times, take the maximum; the
    mean and SD of the maxima give the interval mean +- z SD (the standard method, eq. 3.2).

    Beware: the maximum is a non-smooth statistic whose bootstrap is inconsistent at the boundary of the support
    (the book's discussion of 3.3.2): as B approaches M, the maxima pile up on the sample maximum and the interval
    shrinks to a point that says nothing about a new search.
    """
    u = np.asarray(scores, dtype=float)
    if u.ndim != 1 or len(u) == 0 or not np.isfinite(u).all():
        raise ReliabilityError("scores must be a non-empty 1-D array of finite numbers.")
    budgets = list(range(1, len(u) + 1)) if budgets is None else [int(b) for b in budgets]
    if any(b < 1 for b in budgets):
        raise ReliabilityError("budgets must be >= 1.")
    from scipy import stats

    z = stats.norm.ppf(0.5 + level / 2)
    rng = np.random.default_rng(seed)
    rows = []
    for b in budgets:
        maxima = u[rng.integers(0, len(u), size=(n_boot, b))].max(axis=1)
        m, sd = float(maxima.mean()), float(maxima.std(ddof=1))
        rows.append({"budget": b, "mean": m, "sd": sd, "lower": m - z * sd, "upper": m + z * sd})
    return BudgetCI(pd.DataFrame(rows), n_boot, level, seed)


def substantial_variance_check(data, response: str, object: str, method: str = "REML"):
    """The substantial variance check of model (3.15), Y = mu + nu_s + eps (Proposition 3.1): in a crossed,
    balanced design the object's variance is estimated without modelling the facets.

    Returns ``(model, phi)`` with phi = sigma_s^2 / (sigma_s^2 + sigma_residual^2).
    """
    from .. import mixed

    model = mixed.fit(f"{response} ~ (1|{object})", data, method=method)
    return model, phi(model, object)


def meta_parameter_importance(data, response: str, factors: list[str], object: str | None = None,
                              method: str = "REML"):
    """Random-effects-only model over a grid of configurations (model 3.14; with ``object``, model 3.16):
    one random intercept per meta-parameter. Returns ``(model, table)`` with the variance components sorted by
    size (book Tables 3.4, 3.9, 3.11)."""
    from .. import mixed

    if not factors:
        raise ReliabilityError("Name at least one meta-parameter column in factors.")
    terms = ([object] if object else []) + list(factors)
    model = mixed.fit(f"{response} ~ " + " + ".join(f"(1|{t})" for t in terms), data, method=method)
    table = variance_table(model).sort_values("variance", ascending=False, kind="stable").reset_index(drop=True)
    return model, table


G_STUDY_MT = ("score ~ (1|sentence) + (1|rater) + (1|instantiation) + (1|sentence:rater)"
              " + (1|sentence:instantiation) + (1|rater:instantiation)")


def alpha_and_phi(annotation: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Krippendorff's α (interval; a unit per sentence x instantiation, a coder per rater) beside φ (one rater and
    instantiation; averaged over 3 raters) for each annotation mode of the MT data (book 3.3.3, 3.4), and the
    variance components in percent of the total. Both G-study fits are singular (as in lme4); the warning is
    not shown."""
    import warnings

    from .. import mixed
    from .agreement import krippendorff_alpha_long

    data = annotation.rename(columns={"occasion": "instantiation"})
    side_by_side, shares = {}, {}
    for mode, d in data.groupby("mode", observed=True):
        d = d.assign(unit=d["sentence"].astype(str) + "/" + d["instantiation"].astype(str))
        alpha = krippendorff_alpha_long(d, unit="unit", rater="rater", value="score", level="interval").alpha
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mixed.SingularFitWarning)
            m = mixed.fit(G_STUDY_MT, d)
        side_by_side[mode] = {"Krippendorff's alpha (interval)": alpha,
                              "phi (1 rater, 1 instantiation)": phi(m, "sentence").phi,
                              "phi, averaged over 3 raters": phi(m, "sentence", n={"rater": 3}).phi}
        shares[mode] = m.variance_components["percent"]
    return pd.DataFrame(side_by_side), pd.DataFrame(shares)


# ------------------------------------------------------------------------------- workbook 04's steps (3.3.2-3.3.3)

MT_MODES = ("Marking", "Post Edit")
NMT_META = ["learning_rate", "seed", "encoder_dropout", "decoder_dropout", "decoder_dropout_hidden"]
LIVER_META = ["dropout", "hidden_size_max", "hidden_number", "learning_rate", "batch_size", "random_seed"]


def g_studies(annotation: pd.DataFrame) -> dict:
    """The G-study model (3.13) of the MT annotation data for each mode: random intercepts for sentences, raters,
    instantiations and their two-way interactions (both fits are singular, as in lme4)."""
    from .. import mixed

    data = annotation.rename(columns={"occasion": "instantiation"})
    return {mode: mixed.fit(G_STUDY_MT, data[data["mode"] == mode]) for mode in MT_MODES}


def components_side_by_side(models: dict, column: str = "percent") -> pd.DataFrame:
    """One column of each model's variance components (default: percent of the total), a column per model."""
    return pd.DataFrame({name: m.variance_components[column] for name, m in models.items()})


def decision_studies(models: dict, max_raters: int, max_instantiations: int) -> dict:
    """The decision study (eq. 3.11) of each G-study for 1..max_raters raters x 1..max_instantiations
    instantiations, absolute φ and the relative coefficient E ρ² (footnote 9): {(mode, kind): study}."""
    grid = {"rater": range(1, max_raters + 1), "instantiation": range(1, max_instantiations + 1)}
    return {(mode, kind): decision_study(m, "sentence", grid, kind=kind)
            for mode, m in models.items() for kind in ("absolute", "relative")}


def smallest_designs(studies: dict, target: float = 0.8) -> pd.DataFrame:
    """The smallest design (fewest ratings per sentence) of each decision study reaching ``target``."""
    return pd.DataFrame({f"{mode}, {kind}": smallest_design(s, target) for (mode, kind), s in studies.items()}).T


def rater_reliability(models: dict) -> pd.DataFrame:
    """φ of one rating with its Koo & Li reading, intra- and inter-rater reliability (eq. 3.18, 3.19), per mode."""
    return pd.DataFrame({mode: {"phi (1 rater, 1 instantiation)": phi(m, "sentence").phi,
                                "Koo & Li": phi(m, "sentence").interpretation,
                                "intra-rater (3.18)": phi_intra_rater(m, "sentence", "rater", "instantiation"),
                                "inter-rater (3.19)": phi_inter_rater(m, "sentence", "rater", "instantiation")}
                         for mode, m in models.items()})


def nmt_grids(delta_scheme: str) -> tuple[dict, pd.DataFrame]:
    """The partial and the full meta-parameter grid of the NMT model (book 3.3.3) for one ``delta_scheme``, and
    their sizes (rows = sentences x configurations)."""
    from .data import load

    grids, sizes = {}, {}
    for name in ("partial", "full"):
        d = load(f"mt_grid_{name}")
        grids[name] = d[d["delta_scheme"] == delta_scheme].reset_index(drop=True)
        n_sent = grids[name]["sentence_id"].nunique()
        sizes[name] = {"rows": len(grids[name]), "sentences": n_sent, "configurations": len(grids[name]) // n_sent}
    return grids, pd.DataFrame(sizes).T


def grid_fits(grids: dict) -> dict:
    """For each grid, the substantial variance check (model 3.15: sentences only) and the full decomposition
    (model 3.16: sentences and the meta-parameters of ``NMT_META``): {(grid, "check" | "full"): fit}."""
    fits = {}
    for name, g in grids.items():
        fits[(name, "check")] = substantial_variance_check(g, "ter", "sentence_id")[0]
        fits[(name, "full")] = meta_parameter_importance(g, "ter", NMT_META, "sentence_id")[0]
    return fits


def grid_phis(fits: dict) -> pd.DataFrame:
    """φ for the sentences with its Koo & Li reading and the REML log-likelihood of every grid fit."""
    return pd.DataFrame({f"{g} grid, {k}": {"phi (sentences)": phi(f, "sentence_id").phi,
                                            "Koo & Li": phi(f, "sentence_id").interpretation, "REML logLik": f.loglik}
                         for (g, k), f in fits.items()})


def delta_scheme_contrasts() -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    """Model (3.17) on both delta schemes of each grid: TER ~ length class x scheme + (1|sentence). Returns the
    contrasts of the schemes per length class (both grids), the GLRT of the interaction per grid, and the cell
    means of the partial grid (Figure 3.5)."""
    from .. import mixed
    from ..mixed.models.marginal import emmeans
    from .data import load

    rows, glrts, means = [], {}, None
    for grid_name in ("partial", "full"):
        both = load(f"mt_grid_{grid_name}")
        inter = mixed.fit("ter ~ src_length_class * delta_scheme + (1|sentence_id)", both)
        null = mixed.fit("ter ~ src_length_class + delta_scheme + (1|sentence_id)", both, method="ML")
        cells = emmeans(inter, "delta_scheme", by="src_length_class")
        glrts[grid_name] = mixed.lrt(null, inter)
        rows.append(cells.contrasts.assign(grid=f"{grid_name} ({len(both):,} rows)"))
        if grid_name == "partial":
            means = cells.means
    contrasts = pd.concat(rows, ignore_index=True)
    return contrasts[["grid", "src_length_class", "contrast", "estimate", "SE", "z", "p_value", "effect_size"]], \
        glrts, means


def hans_subcases(runs: pd.DataFrame) -> pd.DataFrame:
    """The 30 HANS subcase accuracies of every BERT run (McCoy et al.) in long form, with the heuristic and the
    label of each subcase."""
    sub_cols = [c for c in runs.columns if c[:3] in ("ln_", "le_", "sn_", "se_", "cn_", "ce_")]
    long = runs.melt(id_vars="run", value_vars=sub_cols, var_name="subcase", value_name="accuracy")
    long["heuristic"] = long["subcase"].str[0].map({"l": "lexical overlap", "s": "subsequence", "c": "constituent"})
    long["label"] = long["subcase"].str[1].map({"e": "entailed", "n": "non-entailed"})
    long["run"] = long["run"].astype(str)
    return long


def seed_components(long: pd.DataFrame) -> pd.DataFrame:
    """Within each heuristic and label, accuracy ~ (1|subcase) + (1|run): the seed variance shared by a run's
    subcases, the subcase x seed residual and the subcase variance, with the mean accuracy."""
    from .. import mixed

    rows = []
    for (heur, label), g in long.groupby(["heuristic", "label"]):
        vc = mixed.fit("accuracy ~ (1|subcase) + (1|run)", g).variance_components["variance"]
        rows.append({"heuristic": heur, "label": label, "mean accuracy": g["accuracy"].mean(),
                     "seed variance (run)": vc["run"], "subcase x seed (residual)": vc["Residual"],
                     "subcase variance": vc["subcase"]})
    return pd.DataFrame(rows).sort_values("subcase x seed (residual)", ascending=False)
