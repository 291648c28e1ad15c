"""vrs_helpers.book.invariance: Definition 2.3 (transformation invariance test)."""

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.tree import DecisionTreeClassifier

from vrs_helpers.book import invariance as inv


def test_permissible_transforms_respect_their_scale():
    rng = np.random.default_rng(0)
    x = np.array([3.0, 1.0, 2.0, 2.0, 10.0, 7.5])
    T = inv.permissible_transform(x, "nominal", rng)
    y = T(x)
    assert sorted(set(y)) == sorted(set(x))                     # a permutation of the values ...
    assert len(set(zip(x, y, strict=True))) == len(set(x))       # ... that is one-to-one
    y = inv.permissible_transform(x, "ordinal", rng)(x)
    assert (np.sign(np.subtract.outer(y, y)) == np.sign(np.subtract.outer(x, x))).all()   # strictly increasing
    y = inv.permissible_transform(x, "interval", rng)(x)
    a, b = np.polyfit(x, y, 1)
    assert a > 0 and np.allclose(a * x + b, y)
    y = inv.permissible_transform(x, "ratio", rng)(x)
    assert np.allclose(y / x, y[0] / x[0]) and y[0] / x[0] > 0
    with pytest.raises(inv.InvarianceError, match="Unknown scale"):
        inv.permissible_transform(x, "absolute", rng)


def test_leaky_ids_are_not_invariant_but_genuine_features_are():
    d = inv.simulate_leaky_patient_ids(3000, seed=1)
    tr, te = d.iloc[:2200], d.iloc[2200:]
    cols = ["patient_id", "f1", "f2", "f3"]
    tree = lambda: DecisionTreeClassifier(max_depth=5, random_state=0)  # noqa: E731
    ids = inv.transformation_invariance_test(tree, tr[cols], tr.malignant, te[cols], te.malignant, "patient_id",
                                             "nominal", n_repetitions=8, seed=0)
    assert not ids.is_invariant
    assert ids.scores.mean() < ids.baseline - 0.03       # permuting IDs destroys predictive power
    f1 = inv.transformation_invariance_test(tree, tr[cols], tr.malignant, te[cols], te.malignant, "f1",
                                            "interval", n_repetitions=8, seed=0)
    assert f1.is_invariant and np.allclose(f1.scores, f1.baseline)   # trees only use the order of f1
    again = inv.transformation_invariance_test(tree, tr[cols], tr.malignant, te[cols], te.malignant, "patient_id",
                                               "nominal", n_repetitions=8, seed=0)
    assert np.array_equal(again.scores, ids.scores)      # seeded
    assert list(ids.to_frame().columns) == ["repetition", "accuracy", "share_of_predictions_changed"]
    assert "NOT invariant" in repr(ids)


def test_linear_model_is_invariant_to_affine_but_not_to_monotone_maps():
    rng = np.random.default_rng(2)
    X = pd.DataFrame({"x": rng.uniform(1, 5, 200)})
    y = 2 * X["x"] + rng.normal(0, 0.1, 200)
    from sklearn.metrics import mean_squared_error
    r = inv.transformation_invariance_test(LinearRegression, X[:150], y[:150], X[150:], y[150:], "x", "interval",
                                           n_repetitions=5, metric=mean_squared_error, metric_name="mse")
    assert r.is_invariant
    r = inv.transformation_invariance_test(LinearRegression, X[:150], y[:150], X[150:], y[150:], "x", "ordinal",
                                           n_repetitions=5, metric=mean_squared_error, metric_name="mse")
    assert not r.is_invariant   # a linear model treats x as interval-scaled: an ordinal feature would be misused


def test_bad_input():
    X = pd.DataFrame({"a": [1, 2, 3]})
    with pytest.raises(inv.InvarianceError, match="not a column"):
        inv.transformation_invariance_test(LinearRegression, X, [1, 2, 3], X, [1, 2, 3], "b", "ratio")
    with pytest.raises(inv.InvarianceError, match="differ in length"):
        inv.transformation_invariance_test(LinearRegression, X, [1, 2], X, [1, 2, 3], "a", "ratio")
    with pytest.raises(inv.InvarianceError, match="n_repetitions"):
        inv.transformation_invariance_test(LinearRegression, X, [1, 2, 3], X, [1, 2, 3], "a", "ratio",
                                           n_repetitions=0)
    with pytest.raises(inv.InvarianceError, match="numeric"):
        inv.permissible_transform(["a", "b"], "ordinal", np.random.default_rng(0))
