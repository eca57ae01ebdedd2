"""Feature importance: split counts and gains per column of X, checked against loops
over the trees."""

import numpy as np
import pytest
from conftest import SMALL, make_regression

import jaxgbt


def _loop_importance(model, kind, raw_of):
    """Importance by walking every split entry in Python."""
    out = np.zeros(model.n_features)
    for tree_features, tree_gains in zip(np.asarray(model.feature), np.asarray(model.split_gain),
                                         strict=True):
        for feature, gain in zip(tree_features, tree_gains, strict=True):
            if gain > 0:
                out[raw_of[feature]] += 1.0 if kind == "split" else float(gain)
    return out


@pytest.fixture(scope="module")
def fitted():
    X, y = make_regression()
    return jaxgbt.fit("squared_error", X, y, **SMALL)


@pytest.mark.parametrize("kind", ["split", "gain"])
def test_importance_matches_a_loop_over_splits(fitted, kind):
    got = fitted.feature_importance(kind)
    assert got.shape == (fitted.n_features,)
    np.testing.assert_allclose(got, _loop_importance(fitted, kind, range(fitted.n_features)),
                               rtol=1e-6)
    assert got[:3].min() > 0  # the columns y depends on are used


def test_depthwise_importance_and_first_trees():
    X, y = make_regression(seed=1)
    model = jaxgbt.fit("squared_error", X, y, grow_policy="depthwise", **SMALL)
    np.testing.assert_allclose(model.feature_importance("split", n_trees=3),
                               _loop_importance(model.first_trees(3), "split", range(4)))


def test_categorical_column_is_credited_once():
    rng = np.random.default_rng(3)
    X, y = make_regression(seed=3)
    X[:, 1] = rng.integers(0, 12, size=len(X))  # a 12-level categorical: target statistics
    y = y + (X[:, 1] % 3).astype(np.float32)
    model = jaxgbt.fit("squared_error", X, y, categorical_features=[1], one_hot_max_size=4,
                       **SMALL)
    raw_of = [raw for raw in range(4) for _ in model.encoder.encoded_columns(raw)]
    got = model.feature_importance("gain")
    assert got.shape == (4,)
    np.testing.assert_allclose(got, _loop_importance(model, "gain", raw_of), rtol=1e-6)
    assert got[1] > 0


def test_stacked_models_and_bad_kind():
    X, y = make_regression()
    many = jaxgbt.fit_many("squared_error", X, y, {"learning_rate": np.array([0.1, 0.3])}, **SMALL)
    stacked = many.feature_importance("split")
    assert stacked.shape == (2, 4)
    np.testing.assert_allclose(stacked[1], many[1].feature_importance("split"))
    with pytest.raises(ValueError, match="importance kind 'weight'"):
        many[0].feature_importance("weight")
