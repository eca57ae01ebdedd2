"""Leaves no training row reaches (``core.leaves.fill_empty_leaves``): each takes the
cover-weighted mean of the leaf values under its deepest ancestor that rows reached,
against a float64 reference, and in a fit's trees."""

import jax
import numpy as np
import reference
from conftest import N_FEATURES, make_regression

import jaxgbt
from jaxgbt.core.leaves import fill_empty_leaves


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
