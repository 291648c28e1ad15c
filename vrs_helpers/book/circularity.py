"""The circularity test (book Definition 2.5 with Proposition 2.1, section 2.4.3).

Step 1 fits a GAM (:mod:`vrs_helpers.book.gam`) for every candidate feature set c (the powerset of the features, or the
correlation-ordered shortcut the book suggests: the nested sets of the 1, 2, ... features most correlated with the
target) and picks c* = argmax D^2 (eq. 2.9), ties broken by the smallest degrees of freedom. As in the authors'
R code, models are ranked by floor(100 D^2) descending, then by complexity (log-likelihood df) ascending, so
"equal D^2" means equal to the percent, as Table 2.5 prints it.

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

import itertools
import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import gam as _gam

MAX_POWERSET = 10   # 1,023 models; beyond that use search="correlation"


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
        return (f"<p><code>{self!r}</code></p><p>Top models</p>" + self.top().to_html(index=False)
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
                     seed: int = 1,
                     progress: bool = False, blas_threads="auto") -> CircularityResult:
    """Run the circularity test of Definition 2.5 on ``df``.

    Parameters: ``features`` the candidate features (numeric ones get s(x, k), binary/categorical ones factor
    terms); ``k`` an int or {feature: k}; ``family`` 'gaussian' (scores, GCV) or 'binomial' (0/1 labels, logit
    link, UBRE; book footnote 14); ``search`` 'powerset' (all 2^p - 1 subsets, at most ``max_powerset`` features) or
    'correlation' (p nested sets). For the Gaussian family all models are fitted from one set of cross-products
    X'X, X'y computed in a single pass over the data. ``progress`` shows a tqdm bar over the models.
    ``blas_threads`` limits BLAS threads in each model's smoothing-parameter search ("auto": one thread below 1,500
    coefficients; see :func:`vrs_helpers.threads.blas_limit`).
    """
    t0 = time.perf_counter()
    if null_measure not in ("q99", "max"):
        raise _gam.GAMError(f"null_measure must be 'q99' or 'max', got {null_measure!r}.")
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
                     "data_fit": math.floor(100 * res.deviance_explained + 1e-9),
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
                             seconds=time.perf_counter() - t0, null_measure=null_measure)


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
                ax.text(0.5, 0.5, f"{f}: not in this model", ha="center", va="center", transform=ax.transAxes,
                        color="0.4")
                ax.set_xticks([])
                ax.set_yticks([])
            else:
                sh = res.shape(f)
                term = res.terms[res.features.index(f)]
                if isinstance(term, _gam.FactorTerm):
                    xs = np.arange(len(sh))
                    ax.errorbar(xs, sh["f"], yerr=2 * sh["se"], fmt="o", color="C0", capsize=3)
                    ax.set_xticks(xs, [str(v) for v in sh["x"]])
                else:
                    ax.plot(sh["x"], sh["f"], color="C0")
                    ax.fill_between(sh["x"], sh["f"] - 2 * sh["se"], sh["f"] + 2 * sh["se"], color="C0", alpha=0.2)
                    x = df[f].to_numpy(dtype=float)
                    if len(x) > rug_max:
                        x = rng.choice(x, rug_max, replace=False)
                    ax.plot(x, np.full(len(x), 0.0), "|", color="k", alpha=0.3, markersize=8,
                            transform=ax.get_xaxis_transform())
                ax.axhline(0, color="0.6", lw=0.8, ls=":")
                ax.set_ylabel(f"f({f})")
                ax.set_xlabel(f)
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
