"""Chance-corrected agreement coefficients: Krippendorff's alpha, Scott's pi, Cohen's kappa (book 3.3.1).

All three have the form (observed agreement - chance agreement) / (n - chance agreement); they differ in the
model of chance: Scott's pi and Cohen's kappa sample *with* replacement (from the ratings pooled over raters,
resp. from each rater's own distribution), Krippendorff's alpha samples *without* replacement from the pooled
ratings (the urn model of book 3.3.1). Alpha is computed from the coincidence matrix:

    o_ck = sum over units u of (number of c-k pairs in u) / (m_u - 1)
    e_ck = n_c (n_k - [c == k]) / (n - 1)
    alpha = 1 - D_o / D_e = 1 - sum o_ck d_ck / sum e_ck d_ck

with the difference function d_ck of the level of measurement (Krippendorff 2004, ch. 11).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import VRSError
from ..literal import html_text


class AgreementError(VRSError, ValueError, TypeError):
    """Bad ratings or arguments for an agreement coefficient (the message says what to fix)."""


LEVELS = ("nominal", "ordinal", "interval", "ratio")


class UndefinedAgreementWarning(RuntimeWarning):
    """Expected disagreement is zero: the coefficient is 0/0."""


@dataclass
class AlphaResult:
    """Krippendorff's alpha with its ingredients (book 3.3.1)."""

    alpha: float
    level: str
    observed_disagreement: float  # D_o = sum o_ck d_ck / n
    expected_disagreement: float  # D_e = sum e_ck d_ck / n
    observed: pd.DataFrame  # coincidence matrix o_ck
    expected: pd.DataFrame  # expected coincidences e_ck
    n_pairable: int  # n: number of pairable values
    n_units: int  # units with at least two ratings

    def __float__(self) -> float:
        return float(self.alpha)

    def __repr__(self) -> str:
        return (f"AlphaResult(alpha={self.alpha:.4f}, level={self.level!r}, D_o={self.observed_disagreement:.4g}, "
                f"D_e={self.expected_disagreement:.4g}, n={self.n_pairable}, units={self.n_units})")

    def _repr_html_(self) -> str:
        return (f"<p><b>Krippendorff's alpha ({html_text(self.level)})</b> = {self.alpha:.4f} "
                f"(D<sub>o</sub> = {self.observed_disagreement:.4g}, D<sub>e</sub> = {self.expected_disagreement:.4g}, "
                f"n = {self.n_pairable} pairable values in {self.n_units} units)</p>"
                + "<p>Observed coincidences</p>" + self.observed.to_html()
                + "<p>Expected coincidences</p>" + self.expected.round(4).to_html())

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"alpha": self.alpha, "level": self.level, "D_o": self.observed_disagreement,
                              "D_e": self.expected_disagreement, "n_pairable": self.n_pairable,
                              "n_units": self.n_units}])


def _as_matrix(ratings, level: str) -> tuple[np.ndarray, np.ndarray]:
    """Raters x units array -> (codes: index into values, NaN for missing; sorted distinct values)."""
    if level not in LEVELS:
        raise AgreementError(f"Unknown level of measurement {level!r}; use one of {', '.join(LEVELS)}.")
    if isinstance(ratings, pd.DataFrame):
        ratings = ratings.to_numpy()
    arr = np.asarray(ratings, dtype=object)
    if arr.ndim == 1:
        raise AgreementError("ratings must be a 2-D raters x units array (one row per rater); got a 1-D array.")
    if arr.ndim != 2 or arr.size == 0:
        raise AgreementError(f"ratings must be a non-empty raters x units array; got shape {arr.shape}.")
    missing = np.vectorize(lambda v: v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA,
                           otypes=[bool])(arr)
    present = arr[~missing]
    if present.size == 0:
        raise AgreementError("ratings contain no values (every entry is missing).")
    is_number = np.vectorize(lambda v: isinstance(v, (int, float, np.number)) and not isinstance(v, bool),
                             otypes=[bool])(present)
    if not is_number.all():
        if level != "nominal":
            bad = present[~is_number][:3]
            raise AgreementError(f"{level} data must be numeric; found non-numeric ratings such as {list(bad)!r}. "
                            f"Use level='nominal' for categories, or map them to numbers first.")
        # nominal categories of any type: code them as integers in sorted order of their string form
        labels = sorted(set(present.tolist()), key=str)
        code = {v: i for i, v in enumerate(labels)}
        out = np.full(arr.shape, np.nan)
        out[~missing] = [code[v] for v in present]
        return out, np.asarray(labels, dtype=object)
    numbers = present.astype(float)
    if not np.isfinite(numbers).all():
        raise AgreementError("ratings contain infinite values.")
    values = np.unique(numbers)
    out = np.full(arr.shape, np.nan)
    out[~missing] = np.searchsorted(values, numbers)
    return out, values


def _difference(values: np.ndarray, n_c: np.ndarray, level: str) -> np.ndarray:
    """Squared difference function d_ck for the level of measurement (Krippendorff 2004, 11.3)."""
    v = values.astype(float)
    if level == "nominal":
        return 1.0 - np.eye(len(v))
    if level == "interval":
        return (v[:, None] - v[None, :]) ** 2
    if level == "ratio":
        s = v[:, None] + v[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            d = ((v[:, None] - v[None, :]) / s) ** 2
        return np.nan_to_num(d)  # 0/0 when both values are 0: no difference
    # ordinal: (sum_{g=c}^{k} n_g - (n_c + n_k)/2)^2
    cum = np.concatenate([[0.0], np.cumsum(n_c)])
    i, j = np.meshgrid(np.arange(len(v)), np.arange(len(v)), indexing="ij")
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    return (cum[hi + 1] - cum[lo] - (n_c[i] + n_c[j]) / 2.0) ** 2


def coincidences(ratings, level: str = "nominal") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Observed and expected coincidence matrices (o_ck, e_ck) of book 3.3.1, as DataFrames."""
    res = krippendorff_alpha(ratings, level=level, _warn=False)
    return res.observed, res.expected


def krippendorff_alpha(ratings, level: str = "nominal", *, _warn: bool = True) -> AlphaResult:
    """Krippendorff's alpha for any number of raters, missing ratings and four levels of measurement.

    Parameters
    ----------
    ratings : array-like, raters x units
        One row per rater, one column per unit (the layout of the ``krippendorff`` package's
        ``reliability_data``); NaN or None marks a missing rating. Nominal ratings may be strings.
    level : {"nominal", "ordinal", "interval", "ratio"}

    Returns
    -------
    AlphaResult
        ``alpha`` is NaN when the expected disagreement is 0 (no variation in the ratings): alpha is then 0/0.
        A warning explains that Krippendorff (2004) reports 0 by convention (book 3.3.1).
    """
    codes, values = _as_matrix(ratings, level)
    n_values = len(values)
    # per-unit value counts: units x values
    counts = np.zeros((codes.shape[1], n_values))
    rated = ~np.isnan(codes)
    unit_idx = np.broadcast_to(np.arange(codes.shape[1]), codes.shape)[rated]
    np.add.at(counts, (unit_idx, codes[rated].astype(int)), 1.0)
    m_u = counts.sum(axis=1)
    pairable = m_u >= 2
    if pairable.sum() == 0:
        raise AgreementError("No unit has two or more ratings: alpha needs pairable values (at least two ratings "
                         "of the same unit).")
    if pairable.sum() < 2:
        raise AgreementError("Only one unit has two or more ratings: agreement across units cannot be assessed; "
                         "alpha needs at least two rated units.")
    c = counts[pairable]
    w = 1.0 / (m_u[pairable] - 1.0)
    o = (c * w[:, None]).T @ c - np.diag((c * w[:, None]).sum(axis=0))
    n_c = o.sum(axis=1)
    n = n_c.sum()
    e = (np.outer(n_c, n_c) - np.diag(n_c)) / (n - 1.0)
    d = _difference(values if level != "nominal" else np.arange(n_values), n_c, level)
    d_o = float((o * d).sum() / n)
    d_e = float((e * d).sum() / n)
    if d_e == 0.0:
        alpha = float("nan")
        if _warn:
            warnings.warn(
                "Alpha is undefined (0/0): the ratings show no variation, so the expected disagreement is 0. "
                "Krippendorff (2004) reports alpha = 0 by convention in this case although observed agreement "
                "may be 100% (book 3.3.1); this function returns NaN so that the case cannot pass unnoticed.",
                UndefinedAgreementWarning, stacklevel=2)
    else:
        alpha = 1.0 - d_o / d_e
    labels = list(values)
    labels = [int(v) if isinstance(v, float) and float(v).is_integer() else v for v in labels]
    return AlphaResult(alpha, level, d_o, d_e,
                       pd.DataFrame(o, index=labels, columns=labels),
                       pd.DataFrame(e, index=labels, columns=labels),
                       int(round(n)), int(pairable.sum()))


def krippendorff_alpha_long(data: pd.DataFrame, unit: str, rater: str, value: str,
                            level: str = "nominal") -> AlphaResult:
    """Krippendorff's alpha from a long table with one row per (unit, rater) rating."""
    for col in (unit, rater, value):
        if col not in data.columns:
            raise KeyError(f"Column {col!r} not found; available columns: {', '.join(map(str, data.columns))}.")
    dup = data.duplicated([unit, rater])
    if dup.any():
        raise AgreementError(f"{int(dup.sum())} rows repeat a (unit, rater) pair; alpha needs at most one rating per "
                         f"rater and unit. Aggregate or add the replication to the unit first.")
    wide = data.pivot(index=rater, columns=unit, values=value)
    return krippendorff_alpha(wide.to_numpy(dtype=object), level=level)


def _two_raters(a, b) -> tuple[np.ndarray, np.ndarray]:
    a = pd.Series(np.asarray(a, dtype=object))
    b = pd.Series(np.asarray(b, dtype=object))
    if len(a) != len(b):
        raise AgreementError(f"The two raters rated different numbers of units ({len(a)} vs {len(b)}).")
    keep = a.notna() & b.notna()
    if keep.sum() == 0:
        raise AgreementError("No unit was rated by both raters.")
    return a[keep].to_numpy(), b[keep].to_numpy()


def percent_agreement(a, b) -> float:
    """Share of units (rated by both) on which two raters give the same rating."""
    a, b = _two_raters(a, b)
    return float(np.mean(a == b))


def _chance_corrected(a, b, pooled: bool) -> float:
    a, b = _two_raters(a, b)
    cats = sorted(set(a.tolist()) | set(b.tolist()), key=str)
    pa = np.array([np.mean(a == c) for c in cats])
    pb = np.array([np.mean(b == c) for c in cats])
    p_o = float(np.mean(a == b))
    p_e = float((((pa + pb) / 2) ** 2).sum()) if pooled else float((pa * pb).sum())
    if p_e == 1.0:
        warnings.warn("The coefficient is undefined (0/0): both raters used a single category, so chance "
                      "agreement is 1. Returning NaN.", UndefinedAgreementWarning, stacklevel=3)
        return float("nan")
    return (p_o - p_e) / (1.0 - p_e)


def scotts_pi(a, b) -> float:
    """Scott's pi for two raters on a nominal scale: chance from the pooled ratings, with replacement."""
    return _chance_corrected(a, b, pooled=True)


def cohens_kappa(a, b) -> float:
    """Cohen's kappa for two raters on a nominal scale: chance from each rater's own distribution."""
    return _chance_corrected(a, b, pooled=False)


def two_rater_table(n_units: int, prevalence: float, disagreements: int, split: float = 0.5) -> np.ndarray:
    """A 2 x n binary rating table with given prevalence of 1s and a number of disagreements.

    Rater A and B agree on all but ``disagreements`` units. Of the agreed units, a share ``prevalence`` (rounded)
    are rated 1 by both; of the disagreements, a share ``split`` is (A=1, B=0), the rest (A=0, B=1).
    Used to explore the paradoxes of chance-corrected agreement (book 3.3.1).
    """
    if not 0 <= disagreements <= n_units:
        raise AgreementError(f"disagreements must be between 0 and n_units={n_units}; got {disagreements}.")
    if not 0.0 <= prevalence <= 1.0 or not 0.0 <= split <= 1.0:
        raise AgreementError("prevalence and split must lie in [0, 1].")
    agree = n_units - disagreements
    ones = int(round(prevalence * agree))
    a_only = int(round(split * disagreements))
    a = [1] * ones + [0] * (agree - ones) + [1] * a_only + [0] * (disagreements - a_only)
    b = [1] * ones + [0] * (agree - ones) + [0] * a_only + [1] * (disagreements - a_only)
    return np.array([a, b], dtype=float)


def paradox_grid(n_units: int, prevalences, max_disagreements: int, split: float = 0.5) -> pd.DataFrame:
    """Alpha, pi, kappa and percent agreement for two-rater binary tables over prevalence x disagreements."""
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedAgreementWarning)
        for p in prevalences:
            for k in range(0, max_disagreements + 1):
                t = two_rater_table(n_units, p, k, split)
                rows.append({"prevalence": p, "disagreements": k,
                             "percent_agreement": percent_agreement(t[0], t[1]),
                             "alpha": krippendorff_alpha(t, "nominal", _warn=False).alpha,
                             "pi": scotts_pi(t[0], t[1]), "kappa": cohens_kappa(t[0], t[1])})
    return pd.DataFrame(rows)


def coincidence_summary(ratings, level: str = "nominal") -> dict:
    """Every number of the book's two-rater tables (3.3.1) for one rating table: the observed and expected
    coincidences ``o{c}{k}``, ``e{c}{k}`` for each pair of categories c <= k (``o00``, ``o01``, ``o11``, ... for
    0/1 ratings), ``alpha``, ``percent_agreement`` (two raters: the share of units rated alike) and
    ``chance_agreement``, the urn model's expected agreement (e_00 + e_11 + ...) / n.

    ``alpha`` is NaN (without a warning) when the ratings show no variation: the summary states it, it does not
    conclude from it (:func:`krippendorff_alpha` warns)."""
    res = krippendorff_alpha(ratings, level=level, _warn=False)
    cats = list(res.observed.index)
    out = {}
    for name, table in (("o", res.observed), ("e", res.expected)):
        for i, c in enumerate(cats):
            for k in cats[i:]:
                out[f"{name}{c}{k}"] = float(table.loc[c, k])
    matrix = np.asarray(ratings, dtype=object)
    out["alpha"] = res.alpha
    out["percent_agreement"] = percent_agreement(matrix[0], matrix[1]) if len(matrix) == 2 else float("nan")
    out["chance_agreement"] = float(np.trace(res.expected.to_numpy()) / res.n_pairable)
    return out


def random_ratings(rng: np.random.Generator | int, raters: int, units: int, scale: int,
                   missing_share: float = 0.0) -> np.ndarray:
    """Ratings drawn uniformly from 1..``scale`` by ``raters`` raters for ``units`` units (raters x units, the
    layout of :func:`krippendorff_alpha`), each rating missing (NaN) with probability ``missing_share``: data
    without any agreement beyond chance, to see how far alpha scatters around 0 for a design."""
    if raters < 2 or units < 2 or scale < 2:
        raise AgreementError(f"random ratings need at least 2 raters, 2 units and a scale of 2; got {raters}, "
                             f"{units}, {scale}.")
    if not 0.0 <= missing_share < 1.0:
        raise AgreementError(f"missing_share must lie in [0, 1); got {missing_share!r}.")
    rng = np.random.default_rng(rng)
    r = rng.integers(1, scale + 1, size=(raters, units)).astype(float)
    r[rng.random(r.shape) < missing_share] = np.nan
    return r


# ----------------------------------------------------------------------------------- workbook 03's tables (3.3.1)

def example_ratings(examples: dict) -> dict[str, np.ndarray]:
    """The rating tables of section 3.3.1 (``book_table("agreement_3_3_1")["examples"]``) as arrays of two rows
    (raters A and B)."""
    return {name: np.array([ex["ratings"]["A"], ex["ratings"]["B"]], dtype=float) for name, ex in examples.items()}


def ratings_frame(*tables: np.ndarray, names: list[str] | None = None) -> pd.DataFrame:
    """Two-rater tables as the book prints them: a row per rater (A, B), a column per item; several tables one
    below the other, labelled with ``names``."""
    frames = [pd.DataFrame(np.asarray(t).astype(int), index=["A", "B"], columns=range(1, np.shape(t)[1] + 1))
              for t in tables]
    if len(frames) == 1:
        return frames[0]
    return pd.concat(frames, keys=names or range(len(frames)))


def coincidences_beside(result: AlphaResult, printed: dict | None = None, decimals: int = 3) -> pd.DataFrame:
    """Our observed and expected coincidences of a 0/1 table, beside the book's (``printed``: its ``o00``, ``o01``,
    ``o11``, ``e00``, ``e01``, ``e11``) when given; expected values rounded to ``decimals``."""
    parts = {}
    if printed is not None:
        parts["book o_ck"] = pd.DataFrame([[printed["o00"], printed["o01"]], [printed["o01"], printed["o11"]]])
    parts["ours o_ck"] = result.observed
    if printed is not None:
        parts["book e_ck"] = pd.DataFrame([[printed["e00"], printed["e01"]], [printed["e01"], printed["e11"]]])
    parts["ours e_ck"] = result.expected.round(decimals)
    return pd.concat(parts, axis=1)


def coefficients(table: np.ndarray) -> pd.DataFrame:
    """Percent agreement, Krippendorff's α (nominal), Scott's π and Cohen's κ of a two-rater table."""
    a, b = table
    return pd.DataFrame({"coefficient": ["percent agreement", "Krippendorff's alpha", "Scott's pi", "Cohen's kappa"],
                         "value": [percent_agreement(a, b), krippendorff_alpha(table).alpha, scotts_pi(a, b),
                                   cohens_kappa(a, b)]}).round(4)


def alphas_quietly(*tables: np.ndarray) -> list[AlphaResult]:
    """α of each table, without the warning for a table without variation (its α is NaN, 0/0): for a notebook
    that says so in its text."""
    return [krippendorff_alpha(t, _warn=False) for t in tables]


def at_disagreements(grid: pd.DataFrame, k: int, decimals: int = 3) -> pd.DataFrame:
    """The rows of :func:`paradox_grid` with ``k`` disagreements, one per prevalence."""
    return grid[grid["disagreements"] == k].round(decimals).set_index("prevalence")


def alpha_under_chance(design: dict, n_sets: int = 200, seed: int = 0) -> tuple[pd.Series, pd.DataFrame]:
    """α at every level of measurement for one set of random ratings (:func:`random_ratings` with ``design``), and
    for ``n_sets`` more of the same design (the same generator, drawn after the first): what chance alone gives."""
    rng = np.random.default_rng(seed)
    first = random_ratings(rng, **design)
    alphas = pd.Series({level: krippendorff_alpha(first, level).alpha for level in LEVELS})
    null = pd.DataFrame([{level: krippendorff_alpha(r, level).alpha for level in LEVELS}
                         for r in (random_ratings(rng, **design) for _ in range(n_sets))])
    return alphas, null


def against_chance(alphas: pd.Series, null: pd.DataFrame, decimals: int = 4) -> pd.DataFrame:
    """α of one data set beside the mean and SD of α over random data sets, and its distance from that mean in
    SDs (:func:`alpha_under_chance`)."""
    z = (alphas - null.mean()) / null.std()
    return pd.DataFrame({"alpha": alphas, f"mean of {len(null)} random data sets": null.mean(), "SD": null.std(),
                         "(alpha - mean) / SD": z}).T.round(decimals)
