"""The transformation invariance test (book 2.4.2, Definition 2.3).

Stevens' scales of measurement permit transformations that leave what a feature *means* unchanged: one-to-one
substitutions for a nominal feature, strictly increasing maps for an ordinal one, positive affine maps a x + b for an
interval feature and positive scalings a x for a ratio feature. A model trained on a valid representation must make
the same predictions after such a transformation (retrained on the transformed data). If a permissible
transformation changes the predictions - e.g. permuting patient IDs destroys their predictive power - the feature
carries information its scale does not license: an illegitimate, leaking feature (the KDD Cup 2008 example of
Rosset et al. 2009, book Figure 2.6).

:func:`transformation_invariance_test` applies random permissible transformations to one feature, retrains a model
from a factory (any scikit-learn style estimator: ``fit``/``predict``), and reports how predictions and a metric
change over repetitions. :func:`simulate_leaky_patient_ids` builds *simulated* data in the spirit of that example.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from ..errors import VRSError

SCALES = ("nominal", "ordinal", "interval", "ratio")


class InvarianceError(VRSError, ValueError):
    """Bad input for the transformation invariance test."""


def permissible_transform(values, scale: str, rng: np.random.Generator) -> Callable:
    """A random permissible transformation T of ``scale`` (Definition 2.3), fitted on ``values`` (all values the
    feature takes, training and test) and returned as a function.

    nominal: a random one-to-one substitution of the distinct values (a permutation of them); ordinal: a random
    strictly increasing map (the distinct values in order get cumulative sums of random positive gaps); interval:
    a x + b, a log-uniform in [0.1, 10], b normal with the feature's SD times 10; ratio: a x with such an a.
    """
    if scale not in SCALES:
        raise InvarianceError(f"Unknown scale {scale!r}; use one of {SCALES}.")
    v = pd.Series(values)
    if scale == "nominal":
        uniq = pd.unique(v)
        mapping = dict(zip(uniq, rng.permutation(uniq), strict=True))
        return lambda x: pd.Series(x).map(mapping).to_numpy()
    x = pd.to_numeric(v, errors="coerce").to_numpy(dtype=float)
    if np.isnan(x).any():
        raise InvarianceError(f"A {scale} feature must be numeric without NaN.")
    if scale == "ordinal":
        uniq = np.unique(x)
        new = np.cumsum(rng.exponential(1.0, len(uniq)))
        return lambda z: np.interp(np.asarray(z, dtype=float), uniq, new)
    a = float(np.exp(rng.uniform(np.log(0.1), np.log(10.0))))
    if scale == "ratio":
        return lambda z: a * np.asarray(z, dtype=float)
    b = float(rng.normal(0, 10 * (np.std(x) or 1.0)))
    return lambda z: a * np.asarray(z, dtype=float) + b


@dataclass
class InvarianceResult:
    """Outcome of :func:`transformation_invariance_test`: the metric of the model on the original representation,
    the metric and the share of changed test predictions for every transformed repetition."""

    feature: str
    scale: str
    metric_name: str
    baseline: float
    scores: np.ndarray = field(repr=False)
    changed: np.ndarray = field(repr=False)

    @property
    def is_invariant(self) -> bool:
        """True when no repetition changed any prediction (Definition 2.3)."""
        return bool(np.all(self.changed == 0))

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"repetition": np.arange(1, len(self.scores) + 1), self.metric_name: self.scores,
                             "share_of_predictions_changed": self.changed})

    def summary(self) -> dict:
        return {"feature": self.feature, "scale": self.scale, f"{self.metric_name} original": self.baseline,
                f"{self.metric_name} transformed (mean)": float(np.mean(self.scores)),
                f"{self.metric_name} transformed (min)": float(np.min(self.scores)),
                f"{self.metric_name} transformed (max)": float(np.max(self.scores)),
                "predictions changed (mean share)": float(np.mean(self.changed)),
                "invariant": self.is_invariant}

    def __repr__(self) -> str:
        return (f"InvarianceResult({self.feature!r} as {self.scale}: {self.metric_name} {self.baseline:.4f} -> "
                f"{np.mean(self.scores):.4f} on average over {len(self.scores)} transformations, "
                f"{100 * np.mean(self.changed):.1f} % of predictions changed; "
                f"{'invariant' if self.is_invariant else 'NOT invariant'})")

    def _repr_html_(self) -> str:
        return f"<p><code>{html.escape(repr(self))}</code></p>" + pd.DataFrame([self.summary()]).to_html(index=False)


def _accuracy(y_true, y_pred) -> float:
    return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))


def transformation_invariance_test(model_factory: Callable, X_train: pd.DataFrame, y_train, X_test: pd.DataFrame,
                                   y_test, feature: str, scale: str, n_repetitions: int = 20, metric=None,
                                   metric_name: str = "accuracy", predict: str = "predict", atol: float = 1e-6,
                                   seed: int = 0) -> InvarianceResult:
    """Definition 2.3: retrain ``model_factory()`` after random permissible transformations of ``feature``.

    ``model_factory`` returns a fresh unfitted estimator (e.g. ``lambda: DecisionTreeClassifier(random_state=0)``);
    ``metric(y_true, prediction)`` scores the test predictions (default accuracy); ``predict`` names the method that
    gives them (``"predict_proba"`` uses the probability of the last class, e.g. for an AUC). The same random
    transformation is applied to training and test data. Numeric predictions count as changed when they differ by
    more than ``atol`` (default 1e-6: floating-point rounding of transformed split thresholds is not a change).
    """
    if not isinstance(X_train, pd.DataFrame) or not isinstance(X_test, pd.DataFrame):
        raise InvarianceError("X_train and X_test must be DataFrames (the feature is addressed by name).")
    for X, name in ((X_train, "X_train"), (X_test, "X_test")):
        if feature not in X.columns:
            raise InvarianceError(f"Feature {feature!r} is not a column of {name}; columns: {list(X.columns)}.")
        if len(X) == 0:
            raise InvarianceError(f"{name} is empty.")
    if len(X_train) != len(y_train) or len(X_test) != len(y_test):
        raise InvarianceError("Features and labels differ in length.")
    if n_repetitions < 1:
        raise InvarianceError("n_repetitions must be at least 1.")
    metric = metric or _accuracy
    rng = np.random.default_rng(seed)

    def run(Xtr, Xte):
        model = model_factory()
        model.fit(Xtr, y_train)
        out = getattr(model, predict)(Xte)
        out = np.asarray(out)
        return out[:, -1] if out.ndim == 2 else out

    base_pred = run(X_train, X_test)
    baseline = float(metric(y_test, base_pred))
    all_values = pd.concat([X_train[feature], X_test[feature]], ignore_index=True)
    scores, changed = [], []
    for _ in range(n_repetitions):
        T = permissible_transform(all_values, scale, rng)
        Xtr, Xte = X_train.copy(), X_test.copy()
        Xtr[feature] = T(X_train[feature].to_numpy())
        Xte[feature] = T(X_test[feature].to_numpy())
        pred = run(Xtr, Xte)
        scores.append(float(metric(y_test, pred)))
        if np.issubdtype(np.asarray(pred).dtype, np.number):
            changed.append(float(np.mean(np.abs(pred.astype(float) - base_pred.astype(float)) > atol)))
        else:
            changed.append(float(np.mean(pred != base_pred)))
    return InvarianceResult(feature, scale, metric_name, baseline, np.array(scores), np.array(changed))


def simulate_leaky_patient_ids(n_patients: int = 4000, seed: int = 0) -> pd.DataFrame:
    """**Simulated** data in the spirit of the KDD Cup 2008 leak (Rosset et al. 2009, book Figure 2.6): patient IDs
    come in five ranges of consecutive numbers (as if compiled from different institutions) and the share of
    malignant cases depends on the range - high in the first (IDs up to 20,000) and the fourth (4,000,000-4,870,000)
    - while three genuine clinical features carry a weaker signal. Columns: patient_id, f1, f2, f3, malignant.
    """
    if n_patients < 50:
        raise InvarianceError("Simulate at least 50 patients.")
    rng = np.random.default_rng(seed)
    ranges = [(0, 20_000, 0.60), (20_000, 1_000_000, 0.05), (1_000_000, 4_000_000, 0.08),
              (4_000_000, 4_870_000, 0.55), (4_870_000, 6_000_000, 0.06)]
    which = rng.integers(0, len(ranges), n_patients)
    ids = np.array([rng.integers(ranges[w][0], ranges[w][1]) for w in which])
    prior = np.array([ranges[w][2] for w in which])
    malignant = (rng.uniform(0, 1, n_patients) < prior).astype(int)
    signal = 0.8 * malignant
    f = rng.normal(0, 1, (n_patients, 3)) + signal[:, None] * np.array([1.0, 0.6, 0.3])
    return pd.DataFrame({"patient_id": ids, "f1": f[:, 0], "f2": f[:, 1], "f3": f[:, 2], "malignant": malignant})


LEAK_CHECKS = (("patient_id", "nominal"), ("patient_id", "ordinal"), ("f1", "interval"), ("f1", "ratio"))
LEAK_COLUMNS = ["patient_id", "f1", "f2", "f3"]


def depth5_tree():
    """The model of the leaky-ID demonstration (book 2.4.2): a depth-5 decision tree (scikit-learn), seed 0."""
    from sklearn.tree import DecisionTreeClassifier

    return DecisionTreeClassifier(max_depth=5, random_state=0)


def split_patients(patients: pd.DataFrame, train_share: float = 0.75) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The first ``train_share`` of the patients for training, the rest for testing."""
    cut = int(train_share * len(patients))
    return patients.iloc[:cut], patients.iloc[cut:]


def leaky_id_checks(train: pd.DataFrame, test: pd.DataFrame, n_repetitions: int = 10, seed: int = 0):
    """The transformation invariance test (:func:`transformation_invariance_test`) of the depth-5 tree for the
    patient IDs as nominal and as ordinal and for ``f1`` as interval and ratio, and the accuracy of the same tree
    without the IDs. Returns (results by "feature as scale", their summaries, accuracy without IDs)."""
    cols, y = LEAK_COLUMNS, "malignant"
    results = {f"{f} as {s}": transformation_invariance_test(depth5_tree, train[cols], train[y], test[cols], test[y],
                                                             f, s, n_repetitions=n_repetitions, seed=seed)
               for f, s in LEAK_CHECKS}
    without_ids = depth5_tree().fit(train[cols[1:]], train[y]).score(test[cols[1:]], test[y])
    summaries = pd.DataFrame([r.summary() for r in results.values()], index=list(results))
    return results, summaries, without_ids
