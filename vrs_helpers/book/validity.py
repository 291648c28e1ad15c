"""Validity (book 2.4.1): NLI feature templates (Table 2.1) and the dataset bias test (Definition 2.2).

The dataset bias test compares the correlation of a feature with the label across domains. The book leaves
"substantially differs" to a user threshold; :func:`dataset_bias_test` adds a number to it: a bootstrap confidence
interval for the difference of the two correlations and Fisher's z test of equal correlations.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import VRSError

# Negation cues (our own list, in the spirit of the NLTK sentiment utility the book cites): whole words and the
# clitic n't, matched case-insensitively after tokenization.

NEGATION_WORDS = frozenset("""
no not never none nobody nothing nowhere noone neither nor cannot without
dont doesnt didnt isnt arent wasnt werent hasnt havent hadnt wont wouldnt cant couldnt shouldnt mustnt aint
""".split())
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
FEATURES = ("hyp-is-subseq", "all-in-pre", "percent-in-pre", "scaled-len-diff", "cos-sim", "pre-has-neg",
            "hyp-has-neg")


class ValidityError(VRSError, ValueError):
    """Bad input for a validity test."""


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; punctuation is dropped, clitics stay attached ("don't")."""
    if not isinstance(text, str):
        raise ValidityError(f"Expected text, got {type(text).__name__}: {text!r}.")
    return _TOKEN.findall(text.lower())


def _has_negation(tokens: list[str]) -> bool:
    return any(t in NEGATION_WORDS or t.endswith("n't") or t.replace("'", "") in NEGATION_WORDS for t in tokens)


def _is_contiguous_subsequence(short: list[str], long: list[str]) -> bool:
    n = len(short)
    if n == 0 or n > len(long):
        return False
    return any(long[i:i + n] == short for i in range(len(long) - n + 1))


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = np.min(x), np.max(x)
    return np.zeros_like(x) if hi == lo else (x - lo) / (hi - lo)


def nli_features(premises, hypotheses) -> pd.DataFrame:
    """The seven feature templates of book Table 2.1 for premise/hypothesis pairs.

    hyp-is-subseq: the hypothesis is a contiguous subsequence of the premise (McCoy et al.'s subsequence heuristic);
    all-in-pre: every hypothesis word occurs in the premise; percent-in-pre: share of hypothesis tokens that occur in
    the premise; scaled-len-diff: log(len pre) - log(len hyp), min-max rescaled over the data (book footnote 9);
    cos-sim: cosine similarity of bag-of-words counts, min-max rescaled; pre-has-neg / hyp-has-neg: a negation cue.
    """
    pre = list(premises)
    hyp = list(hypotheses)
    if len(pre) != len(hyp):
        raise ValidityError(f"Got {len(pre)} premises but {len(hyp)} hypotheses.")
    if not pre:
        raise ValidityError("No sentence pairs.")
    rows = []
    for p, h in zip(pre, hyp, strict=True):
        tp, th = tokenize(p), tokenize(h)
        sp = set(tp)
        cp, ch = Counter(tp), Counter(th)
        dot = sum(cnt * cp[w] for w, cnt in ch.items())
        norm = np.sqrt(sum(v * v for v in cp.values()) * sum(v * v for v in ch.values()))
        rows.append((float(_is_contiguous_subsequence(th, tp)), float(bool(th) and all(w in sp for w in th)),
                     sum(w in sp for w in th) / len(th) if th else 0.0,
                     np.log(max(len(tp), 1)) - np.log(max(len(th), 1)),
                     dot / norm if norm > 0 else 0.0,
                     float(_has_negation(tp)), float(_has_negation(th))))
    df = pd.DataFrame(rows, columns=list(FEATURES))
    df["scaled-len-diff"] = _minmax(df["scaled-len-diff"].to_numpy())
    df["cos-sim"] = _minmax(df["cos-sim"].to_numpy())
    return df


def _clean_xy(x, y):
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValidityError(f"feature and label need the same length; got {x.shape} and {y.shape}.")
    if len(x) < 3:
        raise ValidityError("A correlation needs at least 3 pairs.")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValidityError("feature and label must not contain NaN or infinite values.")
    return x, y


def correlation(x, y) -> float:
    """Pearson sample correlation of Definition 2.2 (point-biserial for a binary label); NaN when either variable
    is constant (the correlation is 0/0, "undefined (constant)", never a silent 0)."""
    x, y = _clean_xy(x, y)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def mutual_information(x, y, base: float = 2.0) -> float:
    """Mutual information of two discrete variables (book footnote 11, for multi-class labels), in bits."""
    x = pd.Series(np.asarray(x)).astype(str)
    y = pd.Series(np.asarray(y)).astype(str)
    if len(x) != len(y) or len(x) == 0:
        raise ValidityError("x and y need the same, non-zero length.")
    joint = pd.crosstab(x, y, normalize=True).to_numpy()
    px, py = joint.sum(axis=1, keepdims=True), joint.sum(axis=0, keepdims=True)
    nz = joint > 0
    return float((joint[nz] * np.log(joint[nz] / (px @ py)[nz])).sum() / np.log(base))


def feature_label_correlations(features: pd.DataFrame, labels) -> pd.DataFrame:
    """Correlation of every feature with the label; constant features are reported as undefined."""
    y = np.asarray(labels, dtype=float)
    rows = []
    for name in features.columns:
        r = correlation(features[name].to_numpy(), y)
        rows.append({"feature": name, "r": r, "status": "undefined (constant)" if np.isnan(r) else "ok",
                     "n": len(y)})
    return pd.DataFrame(rows)


def dataset_bias_test(features_id: pd.DataFrame, labels_id, features_ood: pd.DataFrame, labels_ood,
                      n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Definition 2.2 with a number attached: per feature, the in-domain and out-of-domain correlations, their
    difference, a bootstrap percentile CI of the difference (resampling pairs within each domain), and Fisher's
    z test of equal correlations. A feature that is constant in a domain gets "undefined (constant)"."""
    missing = [c for c in features_id.columns if c not in features_ood.columns]
    if missing:
        raise ValidityError(f"Features {missing} are missing out of domain.")
    if n_boot < 1:
        raise ValidityError("n_boot must be at least 1.")
    rng = np.random.default_rng(seed)
    y1, y2 = np.asarray(labels_id, dtype=float), np.asarray(labels_ood, dtype=float)
    i1 = rng.integers(0, len(y1), size=(n_boot, len(y1)))
    i2 = rng.integers(0, len(y2), size=(n_boot, len(y2)))
    alpha = 1 - level
    rows = []
    for name in features_id.columns:
        x1, x2 = features_id[name].to_numpy(float), features_ood[name].to_numpy(float)
        r1, r2 = correlation(x1, y1), correlation(x2, y2)
        row = {"feature": name, "r_in_domain": r1, "r_out_of_domain": r2, "difference": r1 - r2}
        if np.isnan(r1) or np.isnan(r2):
            which = " and ".join(d for d, r in (("in domain", r1), ("out of domain", r2)) if np.isnan(r))
            row.update({"ci_lower": np.nan, "ci_upper": np.nan, "p_fisher": np.nan,
                        "status": f"undefined (constant {which})"})
        else:
            b1 = _rowwise_corr(x1[i1], y1[i1])
            b2 = _rowwise_corr(x2[i2], y2[i2])
            d = b1 - b2
            d = d[np.isfinite(d)]
            z = (np.arctanh(np.clip(r1, -0.999999, 0.999999)) - np.arctanh(np.clip(r2, -0.999999, 0.999999))) \
                / np.sqrt(1 / (len(y1) - 3) + 1 / (len(y2) - 3))
            row.update({"ci_lower": float(np.quantile(d, alpha / 2)), "ci_upper": float(np.quantile(d, 1 - alpha / 2)),
                        "p_fisher": float(2 * stats.norm.sf(abs(z))), "status": "ok"})
        rows.append(row)
    return pd.DataFrame(rows)


def _rowwise_corr(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    den = np.sqrt((xc * xc).sum(axis=1) * (yc * yc).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (xc * yc).sum(axis=1) / den


# ------------------------------------------------------------------------ HANS-style out-of-domain pairs

_NOUNS = ["doctor", "lawyer", "artist", "student", "senator", "judge", "banker", "author", "actor", "secretary",
          "manager", "professor", "athlete", "scientist", "tourist"]
_VERBS = ["saw", "helped", "called", "advised", "recommended", "supported", "believed", "thanked", "introduced",
          "contacted"]
_INTRANS = ["danced", "slept", "waited", "resigned", "shouted", "arrived", "left", "smiled"]
_PREPS = ["near", "behind", "beside", "next to"]


def hans_style_pairs(n_per_template: int = 500, seed: int = 0) -> pd.DataFrame:
    """Generated NLI pairs in the style of HANS (McCoy et al. 2019): for each of the three syntactic heuristics
    (lexical overlap, subsequence, constituent) one template whose hypothesis is entailed and one whose hypothesis
    is not, so that the heuristic is right on half of the pairs and wrong on the other half.

    These are **generated** pairs following the paper's description, not the HANS data set (which the registry lists
    for download; it is not in this environment). Templates (N nouns, V transitive and I intransitive verbs):
    lexical overlap: "The N1 and the N2 V the N3." => "The N2 V the N3." (entailed) / "The N1 V the N2." =>
    "The N2 V the N1." (not); subsequence: "The N1 V the N2 P the N3." => "The N1 V the N2." (entailed) /
    "The N1 V the N2 I." => "The N1 V the N2." (not: NP/S); constituent: "Since the N1 I, the N2 I2." =>
    "The N1 I." (entailed) / "If the N1 I, the N2 I2." => "The N1 I." (not).
    """
    if n_per_template < 1:
        raise ValidityError("n_per_template must be at least 1.")
    rng = np.random.default_rng(seed)
    rows = []

    def nouns(k):
        return [str(x) for x in rng.choice(_NOUNS, size=k, replace=False)]

    for _ in range(n_per_template):
        n1, n2, n3 = nouns(3)
        v = str(rng.choice(_VERBS))
        i1, i2 = (str(x) for x in rng.choice(_INTRANS, size=2, replace=False))
        p = str(rng.choice(_PREPS))
        rows += [
            ("lexical overlap", "entailment", f"The {n1} and the {n2} {v} the {n3}.", f"The {n2} {v} the {n3}."),
            ("lexical overlap", "non-entailment", f"The {n1} {v} the {n2}.", f"The {n2} {v} the {n1}."),
            ("subsequence", "entailment", f"The {n1} {v} the {n2} {p} the {n3}.", f"The {n1} {v} the {n2}."),
            ("subsequence", "non-entailment", f"The {n1} believed the {n2} {i1}.", f"The {n1} believed the {n2}."),
            ("constituent", "entailment", f"Since the {n1} {i1}, the {n2} {i2}.", f"The {n1} {i1}."),
            ("constituent", "non-entailment", f"If the {n1} {i1}, the {n2} {i2}.", f"The {n1} {i1}."),
        ]
    return pd.DataFrame(rows, columns=["heuristic", "label", "premise", "hypothesis"])


# -------------------------------------------------------------------------------------- workbook 01's steps (2.4.1)

OVERLAP_TEMPLATES = ["hyp-is-subseq", "all-in-pre", "percent-in-pre"]   # the lexical-overlap templates of Table 2.1
HANS_CELLS = ["Lexical (entailed)", "Subseq (entailed)", "Constituent (entailed)", "Lexical (nonent)",
              "Subseq (nonent)", "Constituent (nonent)"]
TABLE_2_2 = {"MNLI train": 0.98, "MNLI test": 0.91, "HANS test": 0.54, "ANLI test": 0.58}   # the book's one model


def entailment_features(pairs: pd.DataFrame, label: str = "gold_label") -> tuple[pd.DataFrame, np.ndarray]:
    """The templates of Table 2.1 of premise-hypothesis pairs (:func:`nli_features`) and the 0/1 label
    "entailment" (column ``label``)."""
    return (nli_features(pairs["premise"], pairs["hypothesis"]),
            (pairs[label] == "entailment").astype(float).to_numpy())


def with_verdict(bias: pd.DataFrame) -> pd.DataFrame:
    """:func:`dataset_bias_test`'s table with a column "biased (CI excludes 0)": yes / no, *undefined* where a
    correlation does not exist in one domain."""
    excludes = (bias["ci_lower"] > 0) | (bias["ci_upper"] < 0)
    return bias.assign(**{"biased (CI excludes 0)": [("yes" if e else "no") if s == "ok" else "undefined"
                                                      for e, s in zip(excludes, bias["status"], strict=True)]})


def feature_means(groups: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The mean of every template in each group of pairs (a column per group)."""
    return pd.DataFrame({name: f.mean() for name, f in groups.items()})


def correctness_correlations(features: pd.DataFrame, entailed, n_correct, runs: int = 100) -> pd.DataFrame:
    """Each template's correlation with the share of ``runs`` models that got a pair right, on the entailed and on
    the other pairs (book Figures 2.4, 2.5)."""
    share, entailed = np.asarray(n_correct) / runs, np.asarray(entailed) == 1
    def r(rows):
        return feature_label_correlations(features[rows], share[rows]).set_index("feature")["r"]

    return pd.DataFrame({"entailed pairs": r(entailed), "non-entailed pairs": r(~entailed)})


def table_2_2(pairs: pd.DataFrame, runs: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The book's Table 2.2 (one BERT model) beside the public data (100 BERT runs, McCoy et al.): the mean, min
    and max run and how many runs round to the book's value; and the numbers behind it: the three-way accuracy on
    MNLI dev from the per-pair counts (``mnli``; it equals the runs' mean), the runs' mean HANS accuracy (the mean of
    the six heuristic-by-label cells), and the upper bound of the binary (entailment vs not) accuracy on MNLI dev
    that the counts allow (``binary_upper``: every error on a non-entailed pair could be a neutral/contradiction
    swap, which the binary mapping forgives)."""
    entailed = (pairs["gold_label"] == "entailment").to_numpy()
    mnli = pairs["n_correct"].sum() / (100 * len(pairs))
    if abs(mnli - runs["MNLI dev acc."].mean()) > 1e-6:
        raise ValueError("the per-pair counts and the per-run accuracies on MNLI dev disagree.")
    if not np.allclose(runs[HANS_CELLS].mean(axis=1), runs["Overall accuracy"], atol=1e-6):
        raise ValueError("a run's HANS accuracy is not the mean of its six cells.")
    numbers = {"mnli": mnli, "hans": runs["Overall accuracy"].mean(),
               "binary_upper": 1 - (100 - pairs.loc[entailed, "n_correct"]).sum() / (100 * len(pairs))}
    public = {"MNLI test": runs["MNLI dev acc."], "HANS test": runs["Overall accuracy"]}
    table = pd.DataFrame({
        "book (one model)": TABLE_2_2,
        "public data": {"MNLI test": "MNLI dev, 9,815 pairs", "HANS test": "HANS, 30,000 pairs"},
        "mean of 100 runs": {k: s.mean() for k, s in public.items()},
        "min run": {k: s.min() for k, s in public.items()},
        "max run": {k: s.max() for k, s in public.items()},
        "runs that round to the book's value": {k: int((s.round(2) == TABLE_2_2[k]).sum()) for k, s in public.items()},
    }).fillna({"public data": "not public"})
    return table, numbers
