"""min_data_in_leaf: the least rows a child holds for its node's gain to count, estimated
from the Hessian as LightGBM estimates it (``core.split.rows_per_hessian``), against a
float64 reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
from conftest import SMALL, assert_same_model, make_regression
from numpy.testing import assert_array_equal

import jaxgbt
import jaxgbt.core.split as split
from jaxgbt import spec
from jaxgbt.core.split import SplitParams
from jaxgbt.core.tree import grow_depthwise_tree, grow_lossguide_tree, grow_tree
from jaxgbt.datasets import load_lightgbm_binary

N_ROWS, N_BINS, DEPTH = 120, 8, 3


def _problem(seed: int, unit_weights: bool):
    """bins u8[F, N] with some missing cells and gh f32[N, 2] of a squared error: with
    unit weights every H is 1 and the estimated rows are exact; otherwise uneven
    weights make them estimates. A tenth of the rows weigh 0 and must not count."""
    rng = np.random.default_rng(seed)
    bins = rng.integers(0, N_BINS - 1, (5, N_ROWS)).astype(np.uint8)
    bins[rng.random((5, N_ROWS)) < 0.05] = N_BINS - 1
    target = (bins[0] > 3) + 0.5 * bins[1] + rng.normal(size=N_ROWS)
    weight = np.ones(N_ROWS) if unit_weights else rng.uniform(0.2, 2.0, N_ROWS)
    weight[rng.random(N_ROWS) < 0.1] = 0.0
    g = weight * (target.mean() - target)
    return bins, np.column_stack([g, weight]).astype(np.float32)


def _params(min_data_in_leaf=None, l2=1.0):
    return SplitParams(*(jnp.float32(v) for v in (l2, 0.0, 0.0, 0.0)),
                       min_data_in_leaf=None if min_data_in_leaf is None
                       else jnp.float32(min_data_in_leaf))


def _assert_same_splits(tree, leaf, expected):
    assert_array_equal(tree.feature, expected.feature)
    assert_array_equal(tree.split_bin, expected.split_bin)
    assert_array_equal(tree.default_left, expected.default_left)
    assert_array_equal(leaf, expected.leaf)


def test_rows_per_hessian_matches_the_reference():
    rng = np.random.default_rng(0)
    node = rng.integers(0, 5, 300)  # node 4 is left empty below
    node[node == 4] = 3
    gh = rng.uniform(0.1, 2.0, (300, 4)).astype(np.float32)  # two outputs
    gh[rng.random(300) < 0.2, 2:] = 0.0  # rows of weight 0
    got = split.rows_per_hessian(jnp.asarray(node, jnp.int32), jnp.asarray(gh), 5)
    expected = reference.rows_per_hessian(node, gh, 5)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6)
    assert expected[4] == 0.0


@pytest.mark.parametrize("unit_weights", [True, False], ids=["exact", "estimated"])
@pytest.mark.parametrize("min_data_in_leaf", [8, 25])
def test_oblivious_trees_match_the_reference(unit_weights, min_data_in_leaf):
    differs = False
    for seed in range(3):
        bins, gh = _problem(seed, unit_weights)
        tree, leaf = jax.jit(lambda b, g, p: grow_tree(b, g, p, DEPTH, N_BINS))(
            jnp.asarray(bins), jnp.asarray(gh), _params(min_data_in_leaf))
        expected = reference.grow_tree(bins, gh, DEPTH, N_BINS, l2=1.0,
                                       min_data_in_leaf=min_data_in_leaf)
        _assert_same_splits(tree, leaf, expected)
        np.testing.assert_allclose(tree.gain, expected.gain, rtol=1e-4, atol=1e-4)
        free = reference.grow_tree(bins, gh, DEPTH, N_BINS, l2=1.0)
        differs |= not (np.array_equal(free.feature, expected.feature)
                        and np.array_equal(free.split_bin, expected.split_bin))
    assert differs  # the setting changes these trees


@pytest.mark.parametrize("unit_weights", [True, False], ids=["exact", "estimated"])
def test_depthwise_and_lossguide_trees_match_the_reference(unit_weights):
    differs = False
    for seed in range(2):
        bins, gh = _problem(seed, unit_weights)
        args = jnp.asarray(bins), jnp.asarray(gh), _params(12)
        tree, leaf, _ = jax.jit(lambda b, g, p: grow_depthwise_tree(b, g, p, DEPTH, N_BINS))(
            *args)
        expected = reference.grow_depthwise_tree(bins, gh, DEPTH, N_BINS, l2=1.0,
                                                 min_data_in_leaf=12)
        _assert_same_splits(tree, leaf, expected)
        tree, leaf, _ = jax.jit(lambda b, g, p: grow_lossguide_tree(
            b, g, p, DEPTH, N_BINS, max_leaves=5))(*args)
        expected = reference.grow_lossguide_tree(bins, gh, DEPTH, N_BINS, 5, l2=1.0,
                                                 min_data_in_leaf=12)
        _assert_same_splits(tree, leaf, expected)
        free = reference.grow_depthwise_tree(bins, gh, DEPTH, N_BINS, l2=1.0)
        differs |= not np.array_equal(free.split_bin, expected.split_bin)
    assert differs


@pytest.mark.parametrize("grow_policy", ["depthwise", "lossguide"])
def test_real_data_leaves_hold_at_least_min_data_in_leaf_rows(grow_policy):
    # Squared error on unit weights: the estimate is the count, and a node of these
    # policies splits only when both children hold enough rows. Fitted rows are padded
    # to a bucket of row counts at weight 0: those rows must not count.
    X, y, _, _ = load_lightgbm_binary()
    X, y = X[:1000], y[:1000]
    settings = dict(n_trees=6, depth=5, grow_policy=grow_policy, n_bins=32)
    model = jaxgbt.fit("squared_error", X, y, min_data_in_leaf=40, **settings)
    counts = [np.bincount(np.asarray(leaves), minlength=32)
              for leaves in np.asarray(model.leaf_index(X)).T]
    assert min(c[c > 0].min() for c in counts) >= 40
    free = jaxgbt.fit("squared_error", X, y, **settings)
    free_counts = [np.bincount(np.asarray(leaves), minlength=32)
                   for leaves in np.asarray(free.leaf_index(X)).T]
    assert min(c[c > 0].min() for c in free_counts) < 40  # the setting is what holds them


def test_off_by_default_and_at_zero():
    rates = dict.fromkeys(spec.RATES, 0.5)
    params = spec.boost_params(0.1, 1.0, 0.0, 0.0, 1.0, 0.0, 0, rates, 1.0, 1.0)
    assert params.split.min_data_in_leaf is None
    assert spec.boost_params(0.1, 1.0, 0.0, 0.0, 1.0, 0.0, 0, rates, 1.0, 1.0,
                             min_data_in_leaf=0).split.min_data_in_leaf is None
    X, y = make_regression()
    assert_same_model(jaxgbt.fit("squared_error", X, y, **SMALL),
                      jaxgbt.fit("squared_error", X, y, min_data_in_leaf=0, **SMALL))


def test_a_negative_value_is_refused_by_name():
    X, y = make_regression()
    with pytest.raises(ValueError, match="min_data_in_leaf"):
        jaxgbt.fit("squared_error", X, y, min_data_in_leaf=-1, **SMALL)


def test_fit_many_sweeps_it_as_single_fits():
    X, y = make_regression()
    models = jaxgbt.fit_many("squared_error", X, y,
                             params={"min_data_in_leaf": [0.0, 30.0]}, **SMALL)
    for i, value in enumerate((0.0, 30.0)):
        single = jaxgbt.fit("squared_error", X, y, min_data_in_leaf=value, **SMALL)
        np.testing.assert_allclose(np.asarray(models[i].predict(X)),
                                   np.asarray(single.predict(X)), rtol=1e-5, atol=1e-5)
    assert not np.allclose(np.asarray(models[0].predict(X)), np.asarray(models[1].predict(X)))


def test_rows_split_over_devices_count_every_device(regression_data):
    X, y = regression_data
    settings = dict(SMALL, grow_policy="depthwise", min_data_in_leaf=30)
    one = jaxgbt.fit("squared_error", X, y, **settings)
    both = jaxgbt.fit("squared_error", X, y, devices=jax.devices()[:2], **settings)
    assert_array_equal(np.asarray(one.feature), np.asarray(both.feature))
    np.testing.assert_allclose(np.asarray(one.predict(X)), np.asarray(both.predict(X)),
                               rtol=1e-5, atol=1e-5)
