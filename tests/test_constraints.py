import jax.numpy as jnp
import numpy as np
import pytest
from conftest import SMALL, count_compilations

import jaxgbt
from jaxgbt.core.constraints import enforce_monotone, interaction_sets


def _violations(model, X, feature, direction, rng, n_pairs=10_000):
    rows = X[rng.integers(0, len(X), n_pairs)].copy()
    low = rng.normal(size=n_pairs).astype(np.float32) * 2
    high = low + np.abs(rng.normal(size=n_pairs)).astype(np.float32)
    a, b = rows.copy(), rows.copy()
    a[:, feature], b[:, feature] = low, high
    diff = np.asarray(model.predict(b)) - np.asarray(model.predict(a))
    return int(np.sum(direction * diff < -1e-6))


def test_monotone_constraints_hold_on_random_pairs_and_a_grid(wavy_data):
    X, y = wavy_data
    free = jaxgbt.fit("squared_error", X, y, **dict(SMALL, n_trees=60, depth=4, n_bins=64))
    rng = np.random.default_rng(0)
    assert _violations(free, X, 0, +1, rng) > 0  # the constraint has work to do
    model = jaxgbt.fit("squared_error", X, y, monotone_constraints=[1, -1, 0, 0],
                       **dict(SMALL, n_trees=60, depth=4, n_bins=64))
    rng = np.random.default_rng(1)
    assert _violations(model, X, 0, +1, rng) == 0
    assert _violations(model, X, 1, -1, rng) == 0
    grid = np.repeat(X[:50], 200, axis=0)
    grid[:, 0] = np.tile(np.linspace(-4, 4, 200, dtype=np.float32), 50)
    curves = np.asarray(model.predict(grid)).reshape(50, 200)
    assert np.all(np.diff(curves, axis=1) >= -1e-6)
    # Still a useful model.
    assert np.mean((np.asarray(model.predict(X)) - y) ** 2) < 0.6 * np.var(y)


def test_a_monotone_feature_splits_at_most_one_level_per_tree(wavy_data):
    X, y = wavy_data
    model = jaxgbt.fit("squared_error", X, y, monotone_constraints={0: 1},
                       **dict(SMALL, n_trees=20, depth=4))
    splits = np.asarray(model.split_gain) > 0
    per_tree = np.sum((np.asarray(model.feature) == 0) & splits, axis=1)
    assert per_tree.max() <= 1 and per_tree.sum() > 0


def test_enforce_monotone_orders_pairs_and_keeps_ordered_ones():
    values = jnp.array([[3.0], [1.0], [0.0], [5.0]])  # depth 2: leaves (b0 b1)
    out = enforce_monotone(values, jnp.array([0, 1]), jnp.array([True, True]),
                           jnp.array([0, 1]))  # level 1's feature increasing
    np.testing.assert_allclose(out[:, 0], [2.0, 2.0, 0.0, 5.0])
    out = enforce_monotone(values, jnp.array([0, 1]), jnp.array([True, True]),
                           jnp.array([-1, 0]))  # level 0's feature decreasing
    np.testing.assert_allclose(out[:, 0], [3.0, 3.0, 0.0, 3.0])


def test_interaction_constraints_keep_each_tree_within_one_set(wavy_data):
    X, y = wavy_data
    sets = [[0, 1], [2, 3]]
    model = jaxgbt.fit("squared_error", X, y, interaction_constraints=sets,
                       **dict(SMALL, n_trees=30, depth=4))
    splits = np.asarray(model.split_gain) > 0
    features = np.asarray(model.feature)
    for t in range(model.n_trees):
        used = set(features[t][splits[t]].tolist())
        assert any(used <= set(s) for s in sets), used
    # Without constraints, trees mix the sets.
    free = jaxgbt.fit("squared_error", X, y, **dict(SMALL, n_trees=30, depth=4))
    mixed = [set(np.asarray(free.feature)[t][np.asarray(free.split_gain)[t] > 0].tolist())
             for t in range(free.n_trees)]
    assert any(not any(m <= set(s) for s in sets) for m in mixed)


def test_interaction_sets_add_a_singleton_for_each_feature_in_no_set():
    compiled, stop = count_compilations()
    try:
        sets = np.asarray(interaction_sets([[0, 2], [2, 3], []], 5))
    finally:
        stop()
    np.testing.assert_array_equal(sets, [[1, 0, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 0, 0],
                                         [0, 1, 0, 0, 0], [0, 0, 0, 0, 1]])
    assert sets.dtype == bool
    assert compiled == []  # built on the host: no program per small step


def test_features_in_no_set_appear_alone(wavy_data):
    X, y = wavy_data
    model = jaxgbt.fit("squared_error", X, y, interaction_constraints=[[0, 1]],
                       **dict(SMALL, n_trees=20, depth=3))
    splits = np.asarray(model.split_gain) > 0
    for t in range(model.n_trees):
        used = set(np.asarray(model.feature)[t][splits[t]].tolist())
        assert used <= {0, 1} or len(used) == 1


@pytest.mark.parametrize("arguments, error, pattern", [
    (dict(monotone_constraints=[1, 0]), ValueError, "2 entries but X has 4"),
    (dict(monotone_constraints=[2, 0, 0, 0]), ValueError, "only -1, 0 and \\+1"),
    (dict(monotone_constraints={7: 1}), ValueError, "monotone_constraints key=7"),
    (dict(interaction_constraints=[0, 1]), TypeError, "list of lists"),
    (dict(interaction_constraints=[[0, 9]]), ValueError, "interaction_constraints entry=9"),
])
def test_bad_constraints(wavy_data, arguments, error, pattern):
    X, y = wavy_data
    with pytest.raises(error, match=pattern):
        jaxgbt.fit("squared_error", X, y, **arguments, **SMALL)
