"""grow_policy="lossguide": trees grown leaf by leaf, against the float64 NumPy reference,
against depthwise trees where every leaf may split, and through the paths a model takes
(predict, files, SHAP, soft trees, constraints; fit_many and row sharding are in
test_depthwise.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
from conftest import SMALL, assert_same_numbers, make_regression
from numpy.testing import assert_allclose, assert_array_equal
from test_constraints import _violations
from test_depthwise import _paths, features_and_labels
from test_tree import CASES, DEPTH, N_BINS, _binned_problem, _split_params
from test_tree import _assert_same_tree as assert_same_tree

import jaxgbt
from jaxgbt.core.tree import WINDOW_MIN_ROWS, _with_entries, grow_lossguide_tree, window_sizes
from jaxgbt.data.binning import apply_bins, compute_thresholds

_grow = jax.jit(grow_lossguide_tree,
                static_argnames=("depth", "n_bins", "max_leaves", "axis_name"))
LOSSGUIDE = dict(SMALL, grow_policy="lossguide", max_leaves=5)


def _grown(bins, gh, settings, max_leaves, dtype):
    return _grow(jnp.asarray(bins), jnp.asarray(gh, dtype), _split_params(settings, dtype),
                 depth=DEPTH, n_bins=N_BINS, max_leaves=max_leaves)


@pytest.mark.parametrize("max_leaves", [3, 6])
@pytest.mark.parametrize("case", list(CASES))
def test_grow_lossguide_tree_matches_reference(case, max_leaves):
    settings = dict(CASES[case])
    bins, gh = _binned_problem(settings.pop("n_outputs"))
    gh32 = gh.astype(np.float32)
    expected = reference.grow_lossguide_tree(bins, gh32, DEPTH, N_BINS, max_leaves, **settings)
    if case != "min_split_gain":  # the budget, not the gains, stops these trees
        assert (expected.gain > 0).sum() == max_leaves - 1
        # Not a level-wise tree: some leaf stops above the last level.
        level_wise = reference.grow_depthwise_tree(bins, gh32, DEPTH, N_BINS, **settings)
        assert not np.array_equal(expected.leaf, level_wise.leaf)
    tree, leaf, bounds = _grown(bins, gh32, settings, max_leaves, jnp.float32)
    assert bounds is None and tree.feature.shape == (2**DEPTH - 1,)
    assert_same_tree(tree, leaf, expected, rtol=1e-5, atol=1e-5)


def test_grow_lossguide_tree_matches_reference_float64():
    settings = dict(CASES["l1_l2_weights"])
    bins, gh = _binned_problem(settings.pop("n_outputs"))
    expected = reference.grow_lossguide_tree(bins, gh, DEPTH, N_BINS, 5, **settings)
    with jax.enable_x64(True):
        tree, leaf, _ = jax.tree.map(np.asarray, _grown(bins, gh, settings, 5, jnp.float64))
    assert_same_tree(tree, leaf, expected, rtol=1e-10, atol=1e-12)


def test_every_leaf_allowed_equals_depthwise_with_constraints_and_node_sampling(wavy_data):
    # With 2**D leaves allowed every node that gains splits, as in a depthwise tree, and
    # each split is searched on the same rows with the same masks: the same floats.
    X, y = wavy_data
    kwargs = dict(SMALL, random_strength=0.0, monotone_constraints=[1, -1, 0, 0],
                  interaction_constraints=[[0, 1], [1, 2, 3]], colsample_bynode=0.7,
                  subsample=0.8)
    depthwise = jaxgbt.fit("squared_error", X, y, grow_policy="depthwise", **kwargs)
    lossguide = jaxgbt.fit("squared_error", X, y, grow_policy="lossguide",
                           max_leaves=2 ** SMALL["depth"], **kwargs)
    for name in ("feature", "threshold", "default_left", "split_gain", "leaf_value", "cover"):
        assert_same_numbers(getattr(lossguide, name), getattr(depthwise, name), err_msg=name)


def test_node_tables_take_children_inside_them_and_ignore_those_past_the_end():
    # The children of a node at the last level lie past the tables' end: nothing changes.
    # Batched as fit_many batches it (a member's children inside, another's outside).
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    index = np.array([[2, 3], [6, 7], [4, 5]], np.int32)
    values = -np.arange(1, 13, dtype=np.float32).reshape(3, 2, 2)
    got = jax.jit(jax.vmap(_with_entries, in_axes=(None, 0, 0)))(table, index, values)
    for member in range(3):
        expected = table.copy()
        inside = index[member] < len(table)
        expected[index[member][inside]] = values[member][inside]
        assert_array_equal(np.asarray(got[member]), expected)
    assert not np.array_equal(np.asarray(got[0]), table)
    assert_array_equal(np.asarray(got[1]), table)


def test_leaves_searched_in_windows_of_the_row_order_give_the_same_trees():
    # From 4 x WINDOW_MIN_ROWS rows a step reads its leaves' rows from a window of the
    # rows grouped by leaf, each leaf's in row order: the same sums, the same floats.
    X, y = make_regression(15, n_rows=4 * WINDOW_MIN_ROWS)
    assert window_sizes(len(X)) == [len(X), WINDOW_MIN_ROWS]
    kwargs = dict(SMALL, n_trees=4, depth=5, random_strength=0.0)
    depthwise = jaxgbt.fit("squared_error", X, y, grow_policy="depthwise", **kwargs)
    lossguide = jaxgbt.fit("squared_error", X, y, grow_policy="lossguide", max_leaves=32,
                           **kwargs)
    for name in ("feature", "threshold", "default_left", "split_gain", "leaf_value", "cover"):
        assert_same_numbers(getattr(lossguide, name), getattr(depthwise, name), err_msg=name)


@pytest.fixture(scope="module")
def fitted():
    """A lossguide squared-error model (5 leaves of at most 8) on features with NaN."""
    X, y, _ = features_and_labels()
    model = jaxgbt.fit("squared_error", X, y, n_trees=3, depth=DEPTH, n_bins=N_BINS,
                       learning_rate=0.3, l2=1.0, grow_policy="lossguide", max_leaves=5,
                       random_strength=0.0)  # the reference ranks by gain, without noise
    return X, y, model


def test_fit_first_tree_matches_reference_and_predicts_through_it(fitted):
    X, y, model = fitted
    bins = apply_bins(X, compute_thresholds(X, N_BINS, seed=0))
    g = np.asarray(model.base_score)[0] - y
    gh = np.column_stack([g, np.ones_like(g)]).astype(np.float64)
    expected = reference.grow_lossguide_tree(bins, gh, DEPTH, N_BINS, 5, l2=1.0)
    assert_array_equal(np.asarray(model.feature[0]), expected.feature)
    assert_allclose(np.asarray(model.leaf_value[0]),
                    0.3 * reference.filled_leaf_values(expected, gh), atol=1e-5)
    assert_array_equal(np.asarray(model.leaf_index(X))[:, 0], expected.leaf)
    assert model.grow_policy == "lossguide" and "lossguide" in repr(model)
    assert ((np.asarray(model.split_gain) > 0).sum(axis=1) == 4).all()
    predicted, _ = reference.predict_depthwise(
        X, *(np.asarray(getattr(model, name)) for name in
             ("feature", "threshold", "default_left", "leaf_value", "base_score")))
    assert np.isnan(X).any()
    assert_allclose(np.asarray(model.predict_raw(X)), predicted[:, 0], rtol=1e-5, atol=1e-5)


def test_files_explanations_and_soft_trees_read_the_layout(fitted, tmp_path):
    X, _, model = fitted
    model.save(tmp_path / "m.jaxgbt")
    loaded = jaxgbt.load(tmp_path / "m.jaxgbt")
    assert loaded.grow_policy == "lossguide"
    assert_array_equal(np.asarray(loaded.predict_raw(X)), np.asarray(model.predict_raw(X)))
    assert model.dump()["grow_policy"] == "lossguide"
    values = np.asarray(model.shap_values(X[:20]))
    assert_allclose(values.sum(axis=1) + np.asarray(model.expected_value),
                    np.asarray(model.predict_raw(X[:20])), atol=1e-5)
    soft = jaxgbt.differentiable.soft_predict_raw(model, np.nan_to_num(X, nan=0.37),
                                                  temperature=1e-9)
    assert_allclose(np.asarray(soft), np.asarray(model.predict_raw(np.nan_to_num(X, nan=0.37))),
                    atol=1e-4)


def test_monotone_and_interaction_constraints_hold(wavy_data):
    X, y = wavy_data
    kwargs = dict(SMALL, grow_policy="lossguide", n_trees=40, depth=4, n_bins=64, max_leaves=9)
    rng = np.random.default_rng(1)
    model = jaxgbt.fit("squared_error", X, y, monotone_constraints=[1, -1, 0, 0], **kwargs)
    assert _violations(model, X, 0, +1, rng) == 0
    assert _violations(model, X, 1, -1, rng) == 0
    assert np.mean((np.asarray(model.predict(X)) - y) ** 2) < 0.6 * np.var(y)
    sets = [[0, 1], [1, 2, 3]]
    model = jaxgbt.fit("squared_error", X, y, interaction_constraints=sets, **kwargs)
    for t in range(model.n_trees):
        for used in _paths(model, t):
            assert any(used <= set(s) for s in sets), used


def test_fewer_leaves_fit_less_and_the_budget_is_checked():
    X, y = make_regression(14)
    errors = [float(np.mean((np.asarray(jaxgbt.fit(
        "squared_error", X, y, **dict(LOSSGUIDE, max_leaves=leaves)).predict(X)) - y) ** 2))
        for leaves in (2, 5)]
    assert errors[1] < errors[0]
    with pytest.raises(ValueError, match="max_leaves=5 applies to grow_policy='lossguide'"):
        jaxgbt.fit("squared_error", X, y, max_leaves=5, **SMALL)
    with pytest.raises(ValueError, match="more than a tree of depth=3 can hold"):
        jaxgbt.fit("squared_error", X, y, **dict(LOSSGUIDE, max_leaves=9))
    with pytest.raises(ValueError, match="max_leaves=1 is out of range"):
        jaxgbt.fit("squared_error", X, y, **dict(LOSSGUIDE, max_leaves=1))
    with pytest.raises(TypeError, match="max_leaves must be an integer"):
        jaxgbt.fit("squared_error", X, y, **dict(LOSSGUIDE, max_leaves=4.0))
