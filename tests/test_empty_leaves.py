"""Leaves no training row reaches (``core.leaves.fill_empty_leaves``): each takes the
cover-weighted mean of the leaf values under its deepest ancestor that rows reached; and
leaves shrunk towards their ancestors (``shrink_leaves``, ``leaf_shrinkage``): against
float64 references, and in a fit's trees."""

import jax
import numpy as np
import reference
from conftest import N_FEATURES, make_regression

import jaxgbt
from jaxgbt.core.leaves import fill_empty_leaves, shrink_leaves


def test_empty_leaves_take_their_deepest_reached_ancestors_mean():
    rng = np.random.default_rng(0)
    depth, n_outputs = 4, 2
    value = rng.normal(size=(2**depth, n_outputs)).astype(np.float32)
    cover = rng.uniform(0.5, 2.0, 2**depth).astype(np.float32)
    cover[[1, 4, 5, 6, 7, 12, 13, 14, 15]] = 0  # a sibling, a whole subtree, deeper ones
    filled = np.asarray(jax.jit(fill_empty_leaves)(value, cover))
    np.testing.assert_allclose(filled, reference.fill_empty_leaves(value, cover), rtol=1e-6)
    np.testing.assert_array_equal(filled[cover > 0], value[cover > 0])  # bit for bit
    # Leaf 1's sibling 0 was reached: its value; leaves 4-7 share node 1 of depth 1 (leaves
    # 0-7), whose reached leaves are 0, 2 and 3.
    np.testing.assert_array_equal(filled[1], value[0])
    expected = (cover[[0, 2, 3], None] * value[[0, 2, 3]]).sum(0) / cover[[0, 2, 3]].sum()
    np.testing.assert_allclose(filled[4:8], np.broadcast_to(expected, (4, n_outputs)),
                               rtol=1e-6)
    # A tree no row reached keeps its values.
    np.testing.assert_array_equal(fill_empty_leaves(value, np.zeros_like(cover)), value)


def test_an_oblivious_fits_empty_leaves_predict_their_ancestors_mean():
    # 60 rows and depth 5: most of an oblivious tree's 32 leaves are empty. (Depthwise and
    # leaf-wise trees have empty leaves only under nodes that did not split, which send
    # every row the same way.)
    X, y = make_regression(1, 60)
    model = jaxgbt.fit("squared_error", X, y, n_trees=4, depth=5)
    value, cover = np.asarray(model.leaf_value), np.asarray(model.cover)
    reached = cover > 0
    assert (~reached).any() and reached.any()
    for t in range(value.shape[0]):
        np.testing.assert_allclose(value[t], reference.fill_empty_leaves(value[t], cover[t]),
                                   rtol=1e-5, atol=1e-7)
    assert np.abs(value[~reached]).min() > 0
    # New rows do reach an oblivious tree's empty leaves.
    rows = np.random.default_rng(2).normal(size=(400, N_FEATURES)).astype(np.float32)
    leaves = np.asarray(model.leaf_index(rows))  # i32[rows, T]
    assert (~reached[np.arange(value.shape[0]), leaves]).any()


def test_shrunk_leaves_equal_the_float64_reference():
    rng = np.random.default_rng(1)
    depth, n_outputs = 4, 2
    value = rng.normal(size=(2**depth, n_outputs)).astype(np.float32)
    rows = rng.integers(1, 30, 2**depth).astype(np.float32)
    rows[[1, 4, 5, 6, 7]] = 0
    shrink = jax.jit(shrink_leaves)
    for strength in (0.0, 10.0, 1000.0):
        shrunk = np.asarray(shrink(value, rows, np.float32(strength)))
        np.testing.assert_allclose(shrunk, reference.shrink_leaves(value, rows, strength),
                                   rtol=1e-5, atol=1e-6)
    # At 0 the reached leaves keep their values; far above every node's rows they all
    # tend to the root's mean.
    reached = rows > 0
    np.testing.assert_allclose(np.asarray(shrink(value, rows, np.float32(0)))[reached],
                               value[reached], rtol=1e-5, atol=1e-6)
    root = (rows[:, None] * value).sum(0) / rows.sum()
    far = np.asarray(shrink(value, rows, np.float32(1e9)))
    np.testing.assert_allclose(far, np.broadcast_to(root, far.shape), rtol=1e-4, atol=1e-6)


def test_leaf_shrinkage_shrinks_the_grown_trees_leaves():
    X, y = make_regression(1, 60)
    settings = dict(n_trees=1, depth=5, learning_rate=0.5)
    plain = jaxgbt.fit("squared_error", X, y, **settings)
    shrunk = jaxgbt.fit("squared_error", X, y, leaf_shrinkage=20.0, **settings)
    np.testing.assert_array_equal(np.asarray(shrunk.feature), np.asarray(plain.feature))
    leaf = np.asarray(plain.leaf_index(X))[:, 0]
    rows = np.bincount(leaf, minlength=32).astype(np.float64)
    expected = 0.5 * reference.shrink_leaves(np.asarray(plain.leaf_value[0]) / 0.5, rows, 20.0)
    np.testing.assert_allclose(np.asarray(shrunk.leaf_value[0]), expected, rtol=1e-4,
                               atol=1e-6)
    assert not np.allclose(np.asarray(shrunk.leaf_value[0]), np.asarray(plain.leaf_value[0]),
                           atol=1e-3)
