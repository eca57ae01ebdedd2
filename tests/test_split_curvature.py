"""``split_curvature="weight"``: the split search sums each row's weight in place of its
Hessian (CatBoost's first-order search); the leaves still take the Newton step."""

from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np
import pytest
import reference
from conftest import MODEL_ARRAYS, make_binary, make_regression

import jaxgbt
from jaxgbt import spec
from jaxgbt.core.config import BoostConfig
from jaxgbt.core.layout import Oblivious
from jaxgbt.core.round import TrainData, boost_round
from jaxgbt.data.binning import apply_bins, compute_thresholds
from jaxgbt.data.categorical import NUMERIC, ONE_HOT, TARGET, Column
from jaxgbt.objectives import resolve

DEPTH, N_BINS, L2, LEARNING_RATE = 3, 16, 1.0, 0.5


def _logistic_round(split_curvature: str):
    """One logistic round from margins that differ by row, so the Hessians p (1 - p)
    differ by row too; rows weighted unequally. Returns its tree, bins, g, h and w."""
    X, y = make_binary(seed=4)
    weight = np.linspace(0.5, 2.0, len(y), dtype=np.float32)
    bins = apply_bins(X, compute_thresholds(X, N_BINS, weight, 0))
    config = BoostConfig(loss=resolve("logistic").loss, depth=DEPTH, n_bins=N_BINS,
                         split_curvature=split_curvature)
    rates = dict(subsample=1.0, goss_top_rate=0.2, goss_other_rate=0.1,
                 colsample_bytree=1.0, colsample_bylevel=1.0, colsample_bynode=1.0)
    params = spec.boost_params(LEARNING_RATE, L2, 0.0, 0.0, 0.0, 0.0, 0, rates,
                               random_strength=0.0, bagging_temperature=1.0)
    data = TrainData(bins=jnp.asarray(bins), y=jnp.asarray(y.astype(np.float32)),
                     weight=jnp.asarray(weight))
    margin = (3.0 * X[:, 1] - 2.0 * X[:, 2]).astype(np.float32)[:, None]
    _, (tree, _) = boost_round(config, params, data, jnp.asarray(margin), jnp.int32(0))
    p = 1.0 / (1.0 + np.exp(-margin[:, 0].astype(np.float64)))
    g, h = p - y, p * (1.0 - p)
    return tree, bins, g, h, weight.astype(np.float64)


def test_a_search_by_weights_grows_the_reference_tree_of_the_gradients_with_newton_leaves():
    tree, bins, g, h, w = _logistic_round("weight")
    searched = np.stack([g * w, w], axis=1)  # each row's weight as its curvature
    newton = np.stack([g * w, h * w], axis=1)
    expected = reference.grow_tree(bins, searched, DEPTH, N_BINS, l2=L2)
    np.testing.assert_array_equal(tree.feature, expected.feature)
    np.testing.assert_array_equal(tree.split_bin, expected.split_bin)
    np.testing.assert_array_equal(tree.default_left, expected.default_left)
    np.testing.assert_allclose(tree.gain, expected.gain, rtol=1e-4)
    leaf = np.asarray(Oblivious().leaf_from_bins(jnp.asarray(bins), tree, N_BINS))
    np.testing.assert_array_equal(leaf, expected.leaf)
    # The leaves: the Newton step of the true Hessians, and the covers theirs as well.
    covers = reference.leaf_covers(newton, leaf, 2**DEPTH)
    values = reference.fill_empty_leaves(
        reference.leaf_values(newton, leaf, 2**DEPTH, L2, 0.0), covers)
    np.testing.assert_allclose(tree.leaf_value, LEARNING_RATE * values, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tree.cover, covers, rtol=1e-5)
    # The Hessian search, on the same round, chooses another structure here.
    by_hessian = reference.grow_tree(bins, newton, DEPTH, N_BINS, l2=L2)
    assert (list(by_hessian.feature) != list(expected.feature)
            or list(by_hessian.split_bin) != list(expected.split_bin))


def test_the_hessian_search_is_the_default_and_grows_the_newton_reference_tree():
    tree, bins, g, h, w = _logistic_round("hessian")
    expected = reference.grow_tree(bins, np.stack([g * w, h * w], axis=1), DEPTH, N_BINS,
                                   l2=L2)
    np.testing.assert_array_equal(tree.feature, expected.feature)
    np.testing.assert_array_equal(tree.split_bin, expected.split_bin)
    assert BoostConfig(loss=resolve("logistic").loss, depth=1, n_bins=2).split_curvature == (
        "hessian")


def test_squared_error_searches_alike_either_way_and_softmax_does_not():
    X, y = make_regression(seed=5)
    by = {c: jaxgbt.fit("squared_error", X, y, n_trees=8, depth=3, n_bins=N_BINS,
                        split_curvature=c) for c in ("hessian", "weight")}
    # Squared error's Hessian is the row's weight: the same trees, the leaves summed anew.
    np.testing.assert_array_equal(by["hessian"].feature, by["weight"].feature)
    np.testing.assert_allclose(by["hessian"].predict(X), by["weight"].predict(X),
                               rtol=1e-5, atol=1e-5)
    labels = (np.digitize(y, np.quantile(y, [0.33, 0.66]))).astype(np.int32)
    by = {c: jaxgbt.fit("softmax", X, labels, n_trees=8, depth=3, n_bins=N_BINS,
                        split_curvature=c) for c in ("hessian", "weight")}
    assert not np.allclose(by["hessian"].predict(X), by["weight"].predict(X), atol=1e-4)


def test_bad_split_curvatures_are_refused_before_training():
    X, y = make_binary(seed=1)
    with pytest.raises(ValueError, match="split_curvature='unit' is not allowed"):
        jaxgbt.fit("logistic", X, y, n_trees=2, split_curvature="unit")
    with pytest.raises(ValueError, match="needs grow_policy='oblivious'"):
        jaxgbt.fit("logistic", X, y, n_trees=2, split_curvature="weight",
                   grow_policy="depthwise", monotone_constraints={0: 1})


def test_in_catboosts_regime_the_search_defaults_to_catboosts():
    with_statistics = SimpleNamespace(columns=(Column(NUMERIC), Column(TARGET, 6)))
    one_hot_only = SimpleNamespace(columns=(Column(NUMERIC), Column(ONE_HOT, 2)))
    unset = dict(split_curvature=None, score_function=None, l2=None)

    classes, values = np.array([0.0, 1.0, 1.0]), np.array([0.5, 2.0, 1.0])

    def chosen(encoder, grow_policy="oblivious", n_rows=4_999, distributed=False,
               monotone_constraints=None, y=classes, kind="row", vector_output=False,
               **given):
        return spec.search_defaults({**unset, **given}, encoder, y, kind, vector_output,
                                    grow_policy, n_rows, distributed, monotone_constraints)

    catboost = dict(split_curvature="weight", score_function="cosine", l2=3.0)
    newton = dict(split_curvature="hessian", score_function="l2", l2=1.0)
    assert chosen(with_statistics) == catboost
    assert chosen(with_statistics, n_rows=5_000) == newton  # large data
    assert chosen(with_statistics, distributed=True) == newton
    assert chosen(with_statistics, "depthwise") == catboost
    assert chosen(with_statistics, "lossguide") == catboost
    # Depthwise and leaf-wise trees bound their leaves under monotone constraints by the
    # search's values, so they search by Hessians there; oblivious trees need not.
    assert chosen(with_statistics, "depthwise", monotone_constraints={0: 1}) == newton
    assert chosen(with_statistics, "lossguide", monotone_constraints={0: 1}) == newton
    assert chosen(with_statistics, monotone_constraints={0: 1}) == catboost
    assert chosen(one_hot_only) == newton
    assert chosen(None) == newton
    # Labels that are values (regression, counts) take it on few rows without statistics,
    # read from the labels: neither 0/1 labels nor a class index per row of a vector output.
    assert chosen(None, y=values) == catboost
    assert chosen(one_hot_only, y=values) == catboost
    assert chosen(None, y=np.stack([values, classes], axis=1)) == catboost
    assert chosen(None, y=np.array([0.0, 2.0, 1.0]), vector_output=True) == newton
    assert chosen(None, y=np.stack([classes, classes], axis=1)) == newton
    assert chosen(None, y=values, kind="group") == newton  # ranking
    assert chosen(None, y=values, kind="dataset") == newton  # Cox
    assert chosen(None, y={"count": values, "exposure": np.ones(3)}) == catboost
    assert chosen(None, y={"hit": classes, "exposure": np.ones(3)}) == newton
    assert chosen(None, y=values, n_rows=5_000) == newton
    assert chosen(None, y=values, distributed=True) == newton
    assert chosen(None, "depthwise", y=values, monotone_constraints={0: 1}) == newton
    # A value given is used as given, in the regime or out of it.
    assert chosen(with_statistics, l2=0.5) == {**catboost, "l2": 0.5}
    assert chosen(None, "depthwise", split_curvature="weight") == {**newton,
                                                                 "split_curvature": "weight"}


def test_a_fit_with_a_column_of_target_statistics_takes_catboosts_search():
    X, y = make_binary(seed=2)
    X = X.copy()
    X[:, 0] = np.random.default_rng(0).integers(0, 6, len(y))  # six categories: statistics
    common = dict(n_trees=6, depth=3, n_bins=N_BINS, categorical_features=[0])
    default = jaxgbt.fit("logistic", X, y, **common)
    catboost = jaxgbt.fit("logistic", X, y, split_curvature="weight",
                          score_function="cosine", l2=3.0, **common)
    newton = jaxgbt.fit("logistic", X, y, split_curvature="hessian", score_function="l2",
                        l2=1.0, **common)
    assert [c.kind for c in default.encoder.columns][0] == TARGET
    for name in MODEL_ARRAYS:
        np.testing.assert_array_equal(getattr(default, name), getattr(catboost, name))
    assert not np.allclose(default.predict(X), newton.predict(X), atol=1e-6)


def test_a_small_fit_whose_labels_are_values_takes_catboosts_search():
    X, y = make_regression(seed=2)
    counts = np.random.default_rng(1).poisson(np.exp(0.5 * y)).astype(np.float32)
    common = dict(n_trees=6, depth=3, n_bins=N_BINS)
    catboost = dict(split_curvature="weight", score_function="cosine", l2=3.0)
    newton = dict(split_curvature="hessian", score_function="l2", l2=1.0)
    default = jaxgbt.fit("poisson", X, counts, **common)
    for name in MODEL_ARRAYS:
        np.testing.assert_array_equal(
            getattr(default, name), getattr(jaxgbt.fit("poisson", X, counts, **catboost,
                                                       **common), name))
    assert not np.allclose(default.predict(X),
                           jaxgbt.fit("poisson", X, counts, **newton, **common).predict(X),
                           atol=1e-6)
    # Classes on the same rows, with no column of statistics, keep the Newton search.
    labels = (y > np.median(y)).astype(np.float32)
    classes = jaxgbt.fit("logistic", X, labels, **common)
    np.testing.assert_array_equal(
        classes.leaf_value, jaxgbt.fit("logistic", X, labels, **newton, **common).leaf_value)
