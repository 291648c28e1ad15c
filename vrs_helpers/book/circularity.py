"""The circularity test (book Definition 2.5 with Proposition 2.1, section 2.4.3).

Step 1 fits a GAM (:mod:`vrs_helpers.book.gam`) for every candidate feature set c (the powerset of the features, or the
correlation-ordered shortcut the book suggests: the nested sets of the 1, 2, ... features most correlated with the
target) and picks c* = argmax D^2 (eq. 2.9), ties broken by the smallest degrees of freedom. As in the authors'
R code, models are ranked by D^2 in whole percent descending, then by complexity (log-likelihood df) ascending, so
"equal D^2" means equal to the percent, as Table 2.5 prints it. The whole percent is ``round(100 D^2)`` in the
authors' circularity searches (``ir_circularity.Rmd``, ``liver_circularity.Rmd``, ``kidney_circularity.Rmd``) and
``floor(100 D^2)`` in their distillation searches (``liver_distillation.Rmd``, ``ir_distillation.Rmd``): ``rank``
chooses, and :data:`AUTHORS_SEARCH` records which each analysis of section 2.4.3 uses.

Step 2 checks nullification (Proposition 2.1): every other feature, added to the model with c*, must get a
constant-zero shape. We measure a shape by |f_j(x_ij)| over the data rows: its 99th percentile (default,
``null_measure="q99"``) or its maximum (``"max"``), relative to the standard deviation of the response (Gaussian) or
of the fitted linear predictor (binomial, logit scale). A feature counts as nullified when that relative size is at
most ``null_threshold`` (default 0.1: the feature moves (almost) no prediction by more than a tenth of the
response's SD). The 99th percentile is the default because a penalized spline can swing where only a handful of
rows lie (the sparse regions the book points out in its rug plots), which no typical prediction uses; both numbers
are always reported, and the same numbers for the model *without* c* show how much the feature contributes when the
circular features are absent.

The verdict is "circular" when D^2(c*) >= ``d2_threshold`` (default 0.9, "close to 1") and every other feature is
nullified; "partial" when D^2 is close to 1 but some feature keeps a non-zero shape; otherwise "not circular".
"""

from __future__ import annotations

import html
import itertools
import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..literal import plot_text
from . import gam as _gam

MAX_POWERSET = 10   # 1,023 models; beyond that use search="correlation"
#: the authors' search of each analysis of section 2.4.3 (dataset, target): how its R Markdown rounds D2 for the
#: ranking, and the file. Every one of these searches uses mgcv's default basis size (s(x), k = 10); the tuned sizes
#: (k = 100 for bili, 150/125 for crea/urine24) are only in the models fitted after the search. The kidney teacher
#: has no search in kidney_distillation.Rmd: it follows liver_distillation.Rmd's.
AUTHORS_SEARCH = {("patent", "gold"): ("round", "ir_circularity.Rmd"),
                  ("liver", "gold"): ("round", "liver_circularity.Rmd"),
                  ("kidney", "gold"): ("round", "kidney_circularity.Rmd"),
                  ("liver", "teacher_circ"): ("floor", "liver_distillation.Rmd"),
                  ("kidney", "teacher_circ"): ("floor", "liver_distillation.Rmd (kidney_distillation.Rmd has none)")}
#: the D2 values the authors' R code prints with floor() (the titles of the nullification figures: ir_circularity.Rmd
#: dev_selected / dev_nocirc / dev_withcirc, kidney_circularity.Rmd dev_nocirc / dev_withcirc): a printed 95 stands
#: for [95, 96). The other D2 values are printed with round() (liver_circularity.Rmd, the distillation Rmds).
FLOOR_PRINTED = {("patent", "gold"): ("d2_circular", "d2_without", "d2_all"),
                 ("kidney", "gold"): ("d2_without", "d2_all")}


@dataclass
class CircularityResult:
    """Outcome of :func:`circularity_test`. ``models`` lists every model visited (Table 2.5 layout),
    ``nullification`` one row per feature outside c*, ``fits`` the GAMs 'circular' (c*), 'without' (the other
    features) and 'all'."""

    target: str
    family: str
    features: list
    search: str
    models: pd.DataFrame = field(repr=False)
    circular_features: tuple
    deviance_explained: float
    complexity: float
    nullification: pd.DataFrame = field(repr=False)
    verdict: str
    correlations: pd.Series = field(repr=False)
    fits: dict = field(repr=False)
    d2_threshold: float
    null_threshold: float
    seconds: float
    null_measure: str = "q99"
    rank: str = "floor"   # how D2 was cut to whole percent for the ranking: "floor" or "round"

    @property
    def is_circular(self) -> bool:
        return self.verdict == "circular"

    def top(self, n: int = 5) -> pd.DataFrame:
        """The first ``n`` models in the book's Table 2.5 layout (Rank, Included Features, D^2 in %, Complexity)."""
        t = self.models.head(n)
        return pd.DataFrame({"Rank": t["rank"].to_numpy(),
                             "Included Features": ["{" + ", ".join(f) + "}" for f in t["features"]],
                             "D2 (%)": (100 * t["deviance_explained"]).round(2).to_numpy(),
                             "Complexity": t["complexity"].round(2).to_numpy()})

    def to_frame(self) -> pd.DataFrame:
        return self.models

    def __repr__(self) -> str:
        return (f"CircularityResult({self.target} ~ {self.features}, family={self.family}, search={self.search}, "
                f"{len(self.models)} models: c* = {{{', '.join(self.circular_features)}}}, "
                f"D2 = {100 * self.deviance_explained:.2f} %, complexity = {self.complexity:.2f}; "
                f"verdict: {self.verdict})")

    def _repr_html_(self) -> str:
        return (f"<p><code>{html.escape(repr(self))}</code></p><p>Top models</p>" + self.top().to_html(index=False)
                + "<p>Nullification</p>" + self.nullification.to_html(index=False, float_format="%.4g"))


def top_correlated(df: pd.DataFrame, target: str, candidates, n: int = 5) -> list:
    """The ``n`` candidate features with the largest |Pearson r| with the target (constant columns skipped); the
    book's way to choose candidates for the distillation experiments (section 2.4.3)."""
    y = pd.to_numeric(df[target]).to_numpy(dtype=float)
    r = {}
    for c in candidates:
        x = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)
        ok = ~np.isnan(x)
        if np.nanstd(x) > 0:
            r[c] = abs(np.corrcoef(x[ok], y[ok])[0, 1])
    return list(pd.Series(r).sort_values(ascending=False).index[:n])


def _correlations(df, target, features, y):
    out = {}
    for f in features:
        x = df[f]
        if _gam._is_factor(x):
            codes = pd.Categorical(x).codes.astype(float)
            x = codes if len(np.unique(codes)) == 2 else None
        else:
            x = x.to_numpy(dtype=float)
        out[f] = float(np.corrcoef(x, y)[0, 1]) if x is not None else np.nan
    return pd.Series(out, name="r")


def _candidate_sets(features, corr, search, max_powerset):
    p = len(features)
    if search == "powerset":
        if p > max_powerset:
            raise _gam.GAMError(
                f"{p} candidate features give {2 ** p - 1:,} models, more than the powerset limit of "
                f"{2 ** max_powerset - 1:,} ({max_powerset} features). Use search='correlation' (the nested sets of "
                f"the features most correlated with the target, book 2.4.3), or fewer features.")
        return [c for r in range(1, p + 1) for c in itertools.combinations(range(p), r)]
    if search == "correlation":
        order = np.argsort(-np.abs(corr.to_numpy()), kind="stable")
        return [tuple(sorted(order[: r])) for r in range(1, p + 1)]
    raise _gam.GAMError(f"Unknown search {search!r}; use 'powerset' or 'correlation'.")


def _shape_size(res: _gam.GAMResult, feature: str):
    tv = res.term_values()
    lab = [t.label for t in res.terms if t.feature == feature][0]
    a = np.abs(tv[lab].to_numpy())
    return float(a.max()), float(np.quantile(a, 0.99))


def circularity_test(df: pd.DataFrame, target: str, features, family: str = "gaussian", k=10,
                     search: str = "powerset", max_powerset: int = MAX_POWERSET, d2_threshold: float = 0.9,
                     null_threshold: float = 0.1, null_measure: str = "q99", max_knots: int = _gam.MAX_KNOTS,
                     seed: int = 1, rank: str = "floor",
                     progress: bool = False, blas_threads="auto") -> CircularityResult:
    """Run the circularity test of Definition 2.5 on ``df``.

    Parameters: ``features`` the candidate features (numeric ones get s(x, k), binary/categorical ones factor
    terms); ``k`` an int or {feature: k}; ``family`` 'gaussian' (scores, GCV) or 'binomial' (0/1 labels, logit
    link, UBRE; book footnote 14); ``search`` 'powerset' (all 2^p - 1 subsets, at most ``max_powerset`` features) or
    'correlation' (p nested sets). For the Gaussian family all models are fitted from one set of cross-products
    X'X, X'y computed in a single pass over the data. ``rank``: "floor" or "round", how D2 is cut to whole percent
    for the ranking (see :data:`AUTHORS_SEARCH`). ``progress`` shows a tqdm bar over the models.
    ``blas_threads`` limits BLAS threads in each model's smoothing-parameter search ("auto": one thread below 1,500
    coefficients; see :func:`vrs_helpers.threads.blas_limit`).
    """
    t0 = time.perf_counter()
    if null_measure not in ("q99", "max"):
        raise _gam.GAMError(f"null_measure must be 'q99' or 'max', got {null_measure!r}.")
    if rank not in ("floor", "round"):
        raise _gam.GAMError(f"rank must be 'floor' or 'round' (how the authors' R code cuts D2), got {rank!r}.")
    # R's round() rounds half to even, as Python's does
    whole = (lambda v: math.floor(v + 1e-9)) if rank == "floor" else round
    features = list(features)
    y = _gam.check_frame(df, target, features, family)
    terms = _gam.make_terms(df, features, k=k, max_knots=max_knots, seed=seed)
    design = _gam.build_design(df, terms)
    corr = _correlations(df, target, features, y)
    sets = _candidate_sets(features, corr, search, max_powerset)
    G = b = yy = None
    if family == "gaussian":
        yc = y - y.mean()
        G = design.X.T @ design.X
        b = design.X.T @ yc
        yy = float(yc @ yc)
    it = sets
    if progress:
        from tqdm import tqdm  # plain text bar: works in notebooks without ipywidgets
        it = tqdm(sets, desc=f"circularity search ({len(sets)} GAMs)", unit="model", mininterval=10)
    fits, rows = {}, []
    for c in it:
        res = _gam.fit_design(design, y, list(c), family=family, G=G, b=b, yy=yy, target=target,
                              blas_threads=blas_threads)
        fits[c] = res
        rows.append({"features": tuple(features[i] for i in c), "n_features": len(c),
                     "deviance_explained": res.deviance_explained,
                     "data_fit": whole(100 * res.deviance_explained),
                     "edf": res.edf, "complexity": res.complexity, "seconds": res.seconds})
    models = pd.DataFrame(rows).sort_values(["data_fit", "complexity"], ascending=[False, True], kind="stable")
    models.insert(0, "rank", np.arange(1, len(models) + 1))
    models = models.reset_index(drop=True)
    best = models.iloc[0]
    c_star = tuple(best["features"])
    idx_star = tuple(sorted(features.index(f) for f in c_star))
    others = [f for f in features if f not in c_star]
    idx_all = tuple(range(len(features)))
    idx_without = tuple(features.index(f) for f in others)
    get = lambda c: fits.get(c) or _gam.fit_design(design, y, list(c), family=family, G=G, b=b, yy=yy,
                                                   target=target, blas_threads=blas_threads)
    out_fits = {"circular": get(idx_star), "all": get(idx_all)}
    if others:
        out_fits["without"] = get(idx_without)
    if family == "gaussian":
        ref_sd = float(np.std(y, ddof=1))
    else:
        eta = out_fits["all"].coef[0] + out_fits["all"].term_values().sum(axis=1).to_numpy()
        ref_sd = float(np.std(eta, ddof=1))
    nrows = []
    for f in others:
        m0, q0 = _shape_size(out_fits["without"], f)
        m1, q1 = _shape_size(out_fits["all"], f)
        nrows.append({"feature": f, "max_abs_f_without": m0, "q99_abs_f_without": q0, "max_abs_f_with": m1,
                      "q99_abs_f_with": q1, "relative_max_with": m1 / ref_sd, "relative_q99_with": q1 / ref_sd,
                      "nullified": (q1 if null_measure == "q99" else m1) / ref_sd <= null_threshold})
    null = pd.DataFrame(nrows, columns=["feature", "max_abs_f_without", "q99_abs_f_without", "max_abs_f_with",
                                        "q99_abs_f_with", "relative_max_with", "relative_q99_with", "nullified"])
    d2 = float(best["deviance_explained"])
    if d2 < d2_threshold:
        verdict = "not circular"
    elif not others:
        verdict = "undetermined (c* contains every feature: nothing left to nullify)"
    elif bool(null["nullified"].all()):
        verdict = "circular"
    else:
        verdict = "partial"
    return CircularityResult(target=target, family=family, features=features, search=search, models=models,
                             circular_features=c_star, deviance_explained=d2, complexity=float(best["complexity"]),
                             nullification=null, verdict=verdict, correlations=corr, fits=out_fits,
                             d2_threshold=d2_threshold, null_threshold=null_threshold,
                             seconds=time.perf_counter() - t0, null_measure=null_measure, rank=rank)


def plot_shapes(result: CircularityResult, df: pd.DataFrame, features=None, rug_max: int = 4000, seed: int = 0,
                height: float = 2.2, same_scale: bool = True):
    """Feature shapes side by side (book Figures 2.7-2.21): left the GAM without the circular features c*, right
    the GAM with all features, one row per feature (c* first); rug marks show where the data are. With
    ``same_scale`` both panels of a row share the y axis, so a nullified shape shows as the flat line it is; the
    corner label gives max |f| over the data in every panel. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt

    c_star = list(result.circular_features)
    feats = list(features) if features is not None else c_star + [f for f in result.features if f not in c_star]
    fig, axes = plt.subplots(len(feats), 2, figsize=(9, height * len(feats)), squeeze=False)
    rng = np.random.default_rng(seed)
    cols = [("without", "without circular features"), ("all", "with circular features")]
    for r, f in enumerate(feats):
        for c, (key, title) in enumerate(cols):
            ax = axes[r, c]
            res = result.fits.get(key)
            if res is None or f not in res.features:
                ax.text(0.5, 0.5, plot_text(f"{f}: not in this model"), ha="center", va="center",
                        transform=ax.transAxes, color="0.4")
                ax.set_xticks([])
                ax.set_yticks([])
            else:
                sh = res.shape(f)
                term = res.terms[res.features.index(f)]
                if isinstance(term, _gam.FactorTerm):
                    xs = np.arange(len(sh))
                    ax.errorbar(xs, sh["f"], yerr=2 * sh["se"], fmt="o", color="C0", capsize=3)
                    ax.set_xticks(xs, [plot_text(v) for v in sh["x"]])
                else:
                    ax.plot(sh["x"], sh["f"], color="C0")
                    ax.fill_between(sh["x"], sh["f"] - 2 * sh["se"], sh["f"] + 2 * sh["se"], color="C0", alpha=0.2)
                    x = df[f].to_numpy(dtype=float)
                    if len(x) > rug_max:
                        x = rng.choice(x, rug_max, replace=False)
                    ax.plot(x, np.full(len(x), 0.0), "|", color="k", alpha=0.3, markersize=8,
                            transform=ax.get_xaxis_transform())
                ax.axhline(0, color="0.6", lw=0.8, ls=":")
                ax.set_ylabel(plot_text(f"f({f})"))
                ax.set_xlabel(plot_text(f))
                lab = res.terms[res.features.index(f)].label
                mx = float(np.abs(res.term_values()[lab]).max())
                ax.text(0.98, 0.95, f"max |f| = {mx:.3g}", ha="right", va="top", transform=ax.transAxes,
                        fontsize=8, color="0.3")
            if r == 0:
                d2 = result.fits[key].deviance_explained if key in result.fits else np.nan
                ax.set_title(f"{title}\nD² = {100 * d2:.1f} %", fontsize=10)
        if same_scale:
            live = [a for a in axes[r] if a.has_data()]
            if len(live) == 2:
                lo = min(a.get_ylim()[0] for a in live)
                hi = max(a.get_ylim()[1] for a in live)
                for a in live:
                    a.set_ylim(lo, hi)
    fig.tight_layout()
    return fig


#: the second reference of the book rows of section 2.4.3: mgcv's fits of the same specifications on the same
#: (test) data, the "mgcv" entries of data/book/circularity_2_4_3.json
MGCV = "mgcv 1.8-41, same test data"
MGCV_REF = "Section 2.4.3 (mgcv, test set)"
#: reference rows, ours against mgcv's D2 of the same model on the same data, within 0.01 percentage points (1e-4
#: of D2): the basis construction and the criterion (GCV) are mgcv's, and where the two optimizers stop on the flat
#: GCV surface moves D2 by less than that (tests/book/test_gam.py). A feature with more distinct values than a basis
#: takes as knots (gam.MAX_KNOTS, mgcv's max.knots) gets mgcv's own subset (R's set.seed(1); sample(), rsample)
D2_REFERENCE_TOLERANCE = 0.01
_TRAIN_TEST = "the book fitted on the training set (not published); mgcv on the same test data gives {mg}"


@dataclass
class BookComparison:
    """The book's numbers of one analysis of section 2.4.3 beside ours (:func:`book_comparison`)."""

    rows: pd.DataFrame  # a check table: ref, quantity, book or printed, ours, tolerance, ... (Scorecard.check_table)
    fits: dict = field(repr=False)  # the GAMs fitted for the comparison beyond the search's, by name


def _knots_note(df: pd.DataFrame, features, ours: float, reference: float) -> str:
    """The reason beside a reference row that misses mgcv: by how much, and where a basis takes a subset of the
    values as knots, that the subset is mgcv's (so the knots are not the reason)."""
    many = {f: int(df[f].nunique()) for f in features if df[f].nunique() > _gam.MAX_KNOTS}
    note = f"ours differs from mgcv's D2 by {ours - reference:+.3f} percentage points"
    if many:
        note += ("; " + ", ".join(f"{f} has {n:,} distinct values" for f, n in many.items())
                 + f": {'its basis takes' if len(many) == 1 else 'their bases take'} mgcv's subset of "
                 f"{_gam.MAX_KNOTS:,} of them as knots (R's set.seed(1); sample(1:nu, {_gam.MAX_KNOTS}))")
    return note


def _d2_rows(df, quantity: str, book_value, ours: float, mgcv_value: float, features, floor: bool = False,
             reason: str | None = None) -> list[dict]:
    """A printed D2 (whole percent, mgcv's value on the same data the second reference) and, apart, the reference
    row: ours against mgcv's D2. ``floor``: the authors' code printed it with floor(), so "95" stands for [95, 96)
    (an interval check, stated in the quantity as the scorecard's ``check_interval`` does); else with round()."""
    off = abs(ours - mgcv_value) > D2_REFERENCE_TOLERANCE
    book = {"book": float(book_value), "printed": str(book_value)}
    if floor:
        book = {"book": float(book_value) + 0.5, "tolerance": 0.5 * (1 + 1e-9)}
        quantity_book = (f"{quantity} (printed '{book_value}', interval check: floor(): [{book_value}, "
                         f"{int(book_value) + 1}))")
    else:
        quantity_book = quantity
    return [{"ref": "Section 2.4.3", "quantity": quantity_book, **book,
             "ours": ours, "alternative": MGCV, "alternative_value": mgcv_value,
             "explanation": reason if reason is not None else _TRAIN_TEST.format(mg=f"{mgcv_value:.2f} %")},
            {"ref": MGCV_REF, "quantity": quantity, "book": mgcv_value, "ours": ours, "kind": "reference",
             "tolerance": D2_REFERENCE_TOLERANCE,
             "explanation": _knots_note(df, features, ours, mgcv_value) if off else ""}]


def book_comparison(df: pd.DataFrame, response: str, result: CircularityResult, spec: dict, k=None,
                    basis_size: int = 10, students: dict | None = None,
                    null_threshold: float = 0.1, authors_search: CircularityResult | None = None,
                    authors_rmd: str = "", floor_printed=(), reasons: dict | None = None) -> BookComparison:
    """The numbers the book prints for one analysis of section 2.4.3, beside ours, as a check table.

    ``spec`` is the analysis' entry of ``data/book/circularity_2_4_3.json``: the rule's features (``circular``),
    the book's values (``book``: D2 of the model with the rule's features only, without them and with all features,
    and whether the other features are nullified), mgcv's fits of the same specifications on the same test data
    (``mgcv``), and where the book prints more: the list of features its text names (``text_features``), the search
    table (``table_2_5``), shapes it draws as constant zero (``zero_shapes``), the basis sizes of the authors'
    all-features model (``k_all_mgcv``). An analysis the book prints no numbers for (``{}``) has no rows.

    The models without and with the rule's features are the search's (``result.fits``) or, for a teacher's
    predictions, the ``students`` fitted on all clinical features (``{"without circular": ..., "all": ...}``), as
    in the book. ``k``: basis sizes by feature (others ``basis_size``). Every D2 row has a reference row beside it:
    ours against mgcv's D2 of the same model (:data:`D2_REFERENCE_TOLERANCE`).

    ``authors_search``: the search as the authors' R Markdown runs it (``authors_rmd``: default basis sizes, its
    rounding of D2, :data:`AUTHORS_SEARCH`); the c* row is its c* (``result``'s, with the tuned basis sizes, is named
    in the reason when they differ). ``floor_printed``: the D2 keys ("d2_circular", "d2_without", "d2_all") the
    authors' code prints with floor() (:data:`FLOOR_PRINTED`). ``reasons``: {quantity: reason} for book rows whose
    reason the notebook computes (it replaces the default reason).
    """
    k = dict(k or {})
    reasons = dict(reasons or {})
    size = {f: k.get(f, basis_size) for f in set(result.features) | set(spec.get("circular", ()))}
    if "book" not in spec:
        return BookComparison(pd.DataFrame(columns=["ref", "quantity", "book", "ours"]), {})
    book, mg, rule = spec["book"], spec["mgcv"], list(spec["circular"])
    rows, fits = [], {}
    searched = authors_search if authors_search is not None else result
    is_rule = set(searched.circular_features) == set(rule)
    star = lambda r: "{" + ", ".join(r.circular_features) + "}"   # noqa: E731
    how = (f"the authors' search ({authors_rmd}: mgcv's default k = 10, D2 cut by {searched.rank}(100 D2)) on the "
           "test data" if authors_search is not None else "on the test data the search")
    tuned = (f"; with the tuned basis sizes our search above finds {star(result)}" if authors_search is not None
             and set(result.circular_features) != set(searched.circular_features) else "")
    rows.append({"ref": "Section 2.4.3", "quantity": "c* = the label-defining features (1 = yes)", "book": 1.0,
                 "ours": float(is_rule), "tolerance": 0.0,
                 "explanation": "" if is_rule else f"{how} ranks c* = {star(searched)} first, D2 = "
                 f"{100 * searched.deviance_explained:.2f} % (the book{'' if students else ', on its training data'}"
                 f": {{{', '.join(rule)}}})" + tuned})
    fits["circular"] = _gam.fit_gam(df, response, rule, k={f: size[f] for f in rule})
    if students:
        without, everything = students.get("without circular"), students.get("all")
        others = list(students["without circular"].features) if "without circular" in students else []
    else:
        without, everything = result.fits.get("without"), result.fits["all"]
        others = [f for f in result.features if f not in rule]
        if "k_all_mgcv" in spec:   # the authors' all-features model swaps the basis sizes of the rule's features
            everything = fits["all, the authors' basis sizes"] = _gam.fit_gam(
                df, response, result.features, k={f: spec["k_all_mgcv"].get(f, size[f]) for f in result.features})
    for key, quantity, printed, fit, reference, used in [
            ("d2_circular", "D2 (%) of the model with the rule's features only", book["d2_circular"],
             fits["circular"], mg["d2_circular"], rule),
            ("d2_without", "D2 (%) without the rule's features", book["d2_without"], without, mg["d2_without"], others),
            ("d2_all", "D2 (%) with all features", book["d2_all"], everything, mg["d2_all"], rule + others)]:
        if fit is not None:   # the authors' distillation Rmds fit the students on the published test file
            default = (f"the authors fitted the students on the same test file; mgcv gives {reference:.2f} %"
                       if students else None)
            rows += _d2_rows(df, quantity, printed, 100 * fit.deviance_explained, reference, used,
                             floor=key in floor_printed, reason=reasons.get(quantity, default))
    nullified = bool(result.nullification["nullified"].all())
    rows.append({"ref": "Section 2.4.3", "quantity": "every other feature nullified with c* (1 = yes)",
                 "book": float(book["nullified"]), "ours": float(nullified), "tolerance": 0.0,
                 "explanation": "" if nullified else "on the test set the other shapes shrink but not below the "
                 f"threshold ({null_threshold} x SD of the response; the nullification table above)" + (
                     f"; mgcv's largest max |f| with c* is {max(mg['max_abs_f_with'].values()):.2f} "
                     f"(SD {df[response].std():.2f})" if "max_abs_f_with" in mg else "")})
    if "text_features" in spec:   # the list the book's text names, where it differs from the authors' code
        text = list(spec["text_features"])
        swap = (f"{', '.join(f for f in text if f not in result.features)} for "
                f"{', '.join(f for f in result.features if f not in text)}")
        sizes = {f: k.get(f, basis_size) for f in text}
        without_text = [f for f in text if f not in rule]
        fits["without, the text's list"] = _gam.fit_gam(df, response, without_text, k=sizes)
        fits["all, the text's list"] = _gam.fit_gam(df, response, text, k=sizes)
        rows += _d2_rows(df, f"D2 (%) without the rule's features, the text's list ({swap})", book["d2_without"],
                         100 * fits["without, the text's list"].deviance_explained, mg["d2_without_text_features"],
                         without_text)
        rows += _d2_rows(df, f"D2 (%) with all features, the text's list ({swap})", book["d2_all"],
                         100 * fits["all, the text's list"].deviance_explained, mg["d2_all_text_features"], text)
    for printed in spec.get("table_2_5", []):
        rows += _table_2_5_rows(result, printed, mg)
    if "zero_shapes" in spec:   # the book draws the other features' shapes as constant zero
        shown = result.nullification.set_index("feature")
        for f, v in mg["max_abs_f_with"].items():
            rows.append({"ref": spec["zero_shapes"]["ref"], "ours": float(shown.loc[f, "max_abs_f_with"]),
                         "quantity": f"max |f({f})| with {spec['zero_shapes']['with']} (constant zero)", "book": 0.0,
                         "tolerance": 1e-6, "alternative": MGCV, "alternative_value": v})
    return BookComparison(pd.DataFrame(rows), fits)


def _table_2_5_rows(result: CircularityResult, printed: dict, mg: dict) -> list[dict]:
    """One row of the book's Table 2.5 (rank, features, D2 in whole percent, complexity as printed) against the
    same feature set in our search."""
    names = ", ".join(printed["features"])
    hit = result.models[result.models["features"].map(frozenset) == frozenset(printed["features"])].iloc[0]
    ref = f"Table 2.5, rank {printed['rank']}"
    rows = [{"ref": ref, "quantity": f"D2 (%) of {{{names}}}", "book": float(printed["d2"]),
             "printed": str(printed["d2"]), "ours": 100 * hit["deviance_explained"],
             "explanation": _TRAIN_TEST.format(mg="the same ranking")}]
    if printed["rank"] == 1:
        rows.append({"ref": ref, "quantity": "rank of this model in our search", "book": 1.0,
                     "ours": float(hit["rank"]), "tolerance": 0.0})
    exact = ("with D2 = 100 % the GCV score is 0 for every smoothing parameter that keeps the fit exact, so it cannot "
             f"choose: mgcv stops anywhere ({mg['complexity_all']:.2f} for rank 4 on the test set), we take the least "
             "complex exact model (Definition 2.5's tie-break)")
    rows.append({"ref": ref, "quantity": f"complexity of {{{names}}}", "book": float(printed["complexity"]),
                 "printed": printed["complexity"], "ours": hit["complexity"],
                 "explanation": exact if printed["d2"] == 100 else "training vs test data: on the test set this model "
                 f"has D2 = {100 * hit['deviance_explained']:.1f} %"})
    return rows


# ------------------------------------------------------------------------------------ workbook 02's steps (2.4.3)

DATASETS = {"patent": ("ir_test", "relevance"), "liver": ("liver_sofa_test", "target"),
            "kidney": ("kidney_sofa_test", "target")}
TARGETS = {"gold": None, "teacher_circ": "sofa_circ", "teacher_nocirc": "sofa_nocirc"}
NOT_CLINICAL = ("target", "sofa_circ", "sofa_nocirc", "queryId", "documentId", "relevance")


@dataclass
class Analysis:
    """One analysis of workbook 02: a dataset's published test set, the response (gold label or a teacher's
    prediction), the book's entry for the gold labels and for this target (``spec``: the book's numbers, mgcv's
    fits, the authors' basis sizes ``sizes``)."""

    dataset: str
    target: str
    registry_name: str
    gold_column: str
    response: str
    df: pd.DataFrame
    gold: dict
    spec: dict
    sizes: dict

    @property
    def rule(self) -> list[str]:
        """The features of the rule that defines the gold label (Tables 2.3, 2.6, 2.7)."""
        return list(self.gold["circular"])

    @property
    def clinical(self) -> list[str]:
        """The input features (every column but labels, predictions and ids)."""
        return [c for c in self.df.columns if c not in NOT_CLINICAL]

    def summary(self) -> pd.Series:
        return pd.Series({"data": self.registry_name, "rows": len(self.df), "columns": self.df.shape[1],
                          "response": self.response})


def load_analysis(dataset: str, target: str) -> Analysis:
    """The data and the book's numbers of one analysis (``dataset`` patent / liver / kidney, ``target`` gold /
    teacher_circ / teacher_nocirc); the patent teachers' predictions are not published (a clear error)."""
    from .data import book_table, load

    if dataset not in DATASETS:
        raise _gam.GAMError(f"dataset must be one of {list(DATASETS)}, got {dataset!r}.")
    if target not in TARGETS:
        raise _gam.GAMError(f"target must be one of {list(TARGETS)}, got {target!r}.")
    if dataset == "patent" and target != "gold":
        raise _gam.GAMError("The patent teachers' predictions (book Figures 2.15-2.17) are not published: the "
                               "teachers must be trained on ir_trainset.rds, which is missing from the authors' "
                               "repository. Use target='gold'.")
    book = book_table("circularity_2_4_3")
    registry_name, gold_column = DATASETS[dataset]
    gold, spec = book[dataset]["gold"], book[dataset].get(target, {})
    return Analysis(dataset, target, registry_name, gold_column, gold_column if target == "gold" else TARGETS[target],
                    load(registry_name), gold, spec, (spec or gold).get("k", {}))


def rule_ranges(a: Analysis) -> pd.DataFrame:
    """Per label value, the range of the rule's features and the number of rows: the steps of the step function
    the test should find (for a categorical rule: the label's range per rule value)."""
    df, rule = a.df, a.rule
    if all(df[f].dtype.kind in "fi" for f in rule):
        ranges = df.groupby(a.response)[rule].agg(["min", "max"]).round(2)
        ranges[("rows", "")] = df.groupby(a.response).size()
        return ranges
    return df.groupby(rule, observed=True)[a.response].agg(["min", "max", "count"])


def kidney_cells(df: pd.DataFrame, cuts: dict) -> tuple[pd.DataFrame, dict]:
    """Figure 2.13's counts: creatinine bands x urine bands at Table 2.7's thresholds, and the shares the text
    reads from them (``share_high_low``: of the points with creatinine above the last threshold, the share with
    urine at most the last urine threshold; ``region_share``: the share of points where creatinine alone sets a
    score > 0)."""
    cells = pd.crosstab(pd.cut(df["crea"], [-np.inf, *cuts["crea"], np.inf]).rename("creatinine"),
                        pd.cut(df["urine24"], [-np.inf, *cuts["urine24"], np.inf]))
    high, low_urine = df["crea"] > cuts["crea"][-1], df["urine24"] <= cuts["urine24"][-1]
    region = (df["crea"] > cuts["crea"][0]) & ~low_urine
    return cells, {"high": int(high.sum()), "share_high_low": float((high & low_urine).sum() / high.sum()),
                   "region": int(region.sum()), "region_share": float(region.mean())}


def teacher_classes(a: Analysis) -> tuple[pd.DataFrame, pd.Series]:
    """A teacher's predictions within each gold class (shares per row), and the share correct per gold class
    with the overall accuracy ("all"), in percent."""
    df = a.df
    gold_cls, pred_cls = (s.astype("Int64") if bool((s.dropna() % 1 == 0).all()) else s
                          for s in (df[a.gold_column], df[a.response]))
    classes = pd.crosstab(gold_cls, pred_cls, normalize="index")
    classes.index.name, classes.columns.name = "gold class", f"teacher prediction ({a.response})"
    correct = df[a.response] == df[a.gold_column]
    per_class = 100 * correct.groupby(df[a.gold_column]).mean()
    return classes, pd.concat([per_class, pd.Series({"all": 100 * float(correct.mean())})]).rename("correct (%)")


def candidates_for(a: Analysis, features: str = "", basis_size: int = 10) -> tuple[list[str], dict, pd.DataFrame]:
    """The candidate features of the search: ``features`` (comma-separated) when given, the book's for the gold
    labels, else the five clinical measurements most correlated with the teacher's prediction (Definition 2.5's
    remark); their basis sizes (the authors' where given, else ``basis_size``) and a table of their Pearson r with
    the response and k."""
    df = a.df
    if features.strip():
        candidates = [f.strip() for f in features.split(",") if f.strip()]
    elif a.target == "gold":
        candidates = list(a.gold["features"])
    else:
        candidates = top_correlated(df, a.response, a.clinical, n=5)
    k = {**a.gold.get("k", {}), **a.sizes}
    k = {f: k.get(f, basis_size) for f in candidates}
    r = pd.Series({f: np.corrcoef(pd.to_numeric(df[f]).astype(float) if df[f].dtype.kind in "fi"
                                  else pd.Categorical(df[f]).codes, df[a.response].astype(float))[0, 1]
                   for f in candidates}, name="Pearson r with " + a.response)
    return candidates, k, pd.DataFrame({"r": r.round(3), "basis size k": pd.Series(k)})


def verdict_table(result: CircularityResult) -> pd.Series:
    """The test's verdict with c*, its D² (%) and complexity, and the D² (%) of the models without c* and with all
    features."""
    out = {"verdict": result.verdict, "c*": ", ".join(result.circular_features),
           "D2 (%) of c*": round(100 * result.deviance_explained, 2), "complexity of c*": round(result.complexity, 2)}
    if "without" in result.fits:
        out["D2 (%) without c*"] = round(100 * result.fits["without"].deviance_explained, 2)
        out["D2 (%) with all features"] = round(100 * result.fits["all"].deviance_explained, 2)
    return pd.Series(out, name="circularity test")


def all_feature_students(a: Analysis, basis_size: int = 10) -> tuple[dict, pd.DataFrame]:
    """Students of a teacher with all clinical measurements (book 2.4.3): without the rule's features and with
    them (identical ``noradrenaline`` dropped, two-valued ``dopamine`` linear, as in the authors' code), and the
    99th percentile of |f| of each non-rule feature in both, the largest first."""
    pool = [c for c in a.clinical if c not in a.rule and c != "noradrenaline"]
    students = {name: _gam.fit_gam(a.df, a.response, feats, k={f: a.sizes.get(f, basis_size) for f in feats},
                                   linear=["dopamine"])
                for name, feats in [("without circular", pool), ("all", a.rule + pool)]}
    q = pd.DataFrame({nm: s.term_values().abs().quantile(0.99) for nm, s in students.items()})
    q.index = q.index.str.replace(r"^s\((.*)\)$", r"\1", regex=True)
    q = q.loc[[f for f in pool if f in q.index]]
    return students, q.sort_values("without circular", ascending=False)
