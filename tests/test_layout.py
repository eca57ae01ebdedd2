"""jaxgbt.core.layout: split-array sizes, and the one traversal (binned rows, float rows,
blocked prediction) against a plain NumPy float64 walk of random trees of both policies."""

import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_array_equal

from jaxgbt import model as model_module
from jaxgbt import objectives
from jaxgbt.core.config import GrowPolicy
from jaxgbt.core.layout import (
    GROW_POLICIES,
    LAYOUTS,
    Depthwise,
    Lossguide,
    Oblivious,
    layout,
    n_splits,
)
from jaxgbt.core.tree import BinnedTree
from jaxgbt.model import Booster

N_FEATURES, N_BINS, DEPTH, N_TREES = 5, 8, 4, 11
# Past _BLOCK_ROWS * _PARALLEL_BLOCKS rows prediction runs in blocks, two side by side,
# and its last step overlaps the one before it: three steps and an odd tail.
N_ROWS = 2 * model_module._BLOCK_ROWS * model_module._PARALLEL_BLOCKS + 123


def _walk(n_rows: int, right_at, depth: int, grow_policy: str) -> np.ndarray:
    """i64[N]: each row's leaf, ``right_at(entry) -> bool[N]`` giving the answer of the
    split stored at that entry. Oblivious: the D answers as bits, first level highest;
    depthwise: descend the heap (children of i at 2i + 1 and 2i + 2) to a leaf."""
    if grow_policy == "oblivious":
        return sum(right_at(d).astype(np.int64) * 2 ** (depth - 1 - d) for d in range(depth))
    heap = np.zeros(n_rows, np.int64)
    for _ in range(depth):
        right = np.zeros(n_rows, bool)
        for entry in np.unique(heap):
            rows = heap == entry
            right[rows] = right_at(entry)[rows]
        heap = 2 * heap + 1 + right
    return heap - (2**depth - 1)


def _random_splits(rng, n_trees: int, grow_policy: str):
    """feature i32[T, M], float threshold f32[T, M] (some infinite), split bin i32[T, M]
    and default_left bool[T, M] of random trees."""
    shape = (n_trees, n_splits(DEPTH, grow_policy))
    feature = rng.integers(0, N_FEATURES, shape).astype(np.int32)
    threshold = rng.normal(size=shape).astype(np.float32)
    threshold[rng.random(shape) < 0.1] = np.inf  # an unused edge: every value goes left
    split_bin = rng.integers(0, N_BINS - 1, shape).astype(np.int32)
    default_left = rng.random(shape) < 0.5
    return feature, threshold, split_bin, default_left


def _float_rows(rng, n_rows: int) -> np.ndarray:
    X = rng.normal(size=(n_rows, N_FEATURES)).astype(np.float32)
    X[rng.random(X.shape) < 0.15] = np.nan
    return X


def _float_walk(X, feature, threshold, default_left, grow_policy) -> np.ndarray:
    """i64[N, T]: leaves of float rows, compared in float64 (x <= threshold goes left)."""
    X64 = X.astype(np.float64)

    def tree_leaves(t):
        def right_at(entry):
            x = X64[:, feature[t, entry]]
            return np.where(np.isnan(x), ~default_left[t, entry],
                            ~(x <= np.float64(threshold[t, entry])))

        return _walk(X.shape[0], right_at, DEPTH, grow_policy)

    return np.stack([tree_leaves(t) for t in range(feature.shape[0])], axis=1)


def _booster(feature, threshold, default_left, leaf_value, grow_policy) -> Booster:
    n_outputs = leaf_value.shape[-1]
    return Booster(feature=jnp.asarray(feature), threshold=jnp.asarray(threshold),
                   default_left=jnp.asarray(default_left),
                   split_gain=jnp.ones(feature.shape, jnp.float32),
                   leaf_value=jnp.asarray(leaf_value, jnp.float32),
                   base_score=jnp.zeros(n_outputs, jnp.float32),
                   objective=objectives.resolve("squared_error"), n_features=N_FEATURES,
                   vector_output=n_outputs > 1, grow_policy=grow_policy)


@pytest.mark.parametrize("grow_policy", GROW_POLICIES)
def test_n_splits_and_depth_of_are_inverse(grow_policy):
    tree_layout = layout(grow_policy)
    for depth in range(1, 17):
        entries = tree_layout.n_splits(depth)
        assert entries == n_splits(depth, grow_policy)
        assert entries == (depth if grow_policy == "oblivious" else 2**depth - 1)
        assert tree_layout.depth_of(entries) == depth


def test_layouts_are_static_values_named_by_their_policy():
    assert tuple(LAYOUTS) == GROW_POLICIES == ("oblivious", "depthwise", "lossguide")
    assert isinstance(layout("oblivious"), Oblivious)
    assert isinstance(layout("depthwise"), Depthwise)
    # Leaf-wise trees are stored, masked and walked as depthwise ones; only growth differs.
    assert isinstance(layout("lossguide"), Lossguide) and isinstance(layout("lossguide"), Depthwise)
    assert layout("lossguide").leaf_wise and not layout("depthwise").leaf_wise
    assert Lossguide() != Depthwise()
    for name in GROW_POLICIES:
        assert layout(name).name == name
        assert layout(name) == type(layout(name))()
        assert hash(layout(name)) == hash(type(layout(name))())
    assert Oblivious() != Depthwise()
    with pytest.raises(ValueError, match="grow_policy='leafwise'"):
        layout("leafwise")


@pytest.mark.parametrize("grow_policy", GROW_POLICIES)
def test_level_splits_partition_the_entries_in_level_order(grow_policy):
    # The soft model weighs each level's entries: one shared by the level's nodes
    # (oblivious) or one per node in heap order (depthwise), together every entry once.
    tree_layout = layout(grow_policy)
    entries = np.arange(tree_layout.n_splits(DEPTH))
    per_level = [entries[tree_layout.level_splits(level)] for level in range(DEPTH)]
    assert_array_equal(np.concatenate(per_level), entries)
    widths = [len(level_entries) for level_entries in per_level]
    assert widths == ([1] * DEPTH if grow_policy == "oblivious"
                      else [2**level for level in range(DEPTH)])


@pytest.mark.parametrize("grow_policy", GROW_POLICIES)
def test_leaf_from_bins_matches_walk_with_missing_bin(grow_policy):
    rng = np.random.default_rng(1)
    feature, _, split_bin, default_left = _random_splits(rng, 1, grow_policy)
    bins = rng.integers(0, N_BINS, (N_FEATURES, 2000)).astype(np.uint8)
    bins[rng.random(bins.shape) < 0.2] = N_BINS - 1  # the missing bin
    tree = BinnedTree(jnp.asarray(feature[0]), jnp.asarray(split_bin[0]),
                      jnp.asarray(default_left[0]), jnp.zeros(feature.shape[1]),
                      jnp.zeros((2**DEPTH, 1)), jnp.zeros(2**DEPTH))

    leaf = jax.jit(layout(grow_policy).leaf_from_bins, static_argnums=2)(
        jnp.asarray(bins), tree, N_BINS)

    def right_at(entry):
        column = bins[feature[0, entry]].astype(np.int64)
        return np.where(column == N_BINS - 1, ~default_left[0, entry],
                        column > split_bin[0, entry])

    assert leaf.dtype == jnp.int32 and leaf.shape == (2000,)
    assert_array_equal(np.asarray(leaf), _walk(2000, right_at, DEPTH, grow_policy))


@pytest.mark.parametrize("grow_policy", GROW_POLICIES)
def test_leaf_index_matches_walk_of_float_rows_with_nan(grow_policy):
    rng = np.random.default_rng(2)
    feature, threshold, _, default_left = _random_splits(rng, N_TREES, grow_policy)
    X = _float_rows(rng, N_ROWS)
    model = _booster(feature, threshold, default_left,
                     np.zeros((N_TREES, 2**DEPTH, 1), np.float32), grow_policy)

    leaves = model.leaf_index(X)

    assert leaves.dtype == jnp.int32 and leaves.shape == (N_ROWS, N_TREES)
    assert_array_equal(np.asarray(leaves),
                       _float_walk(X, feature, threshold, default_left, grow_policy))


@pytest.mark.parametrize("grow_policy", GROW_POLICIES)
def test_blocked_predict_reaches_the_walked_leaves(grow_policy):
    # Output t of tree t holds its leaf ids as values (exact in float32), so the sums
    # of the blocked prediction are each row's leaf in every tree.
    rng = np.random.default_rng(3)
    feature, threshold, _, default_left = _random_splits(rng, N_TREES, grow_policy)
    X = _float_rows(rng, N_ROWS)
    leaf_value = np.zeros((N_TREES, 2**DEPTH, N_TREES), np.float32)
    for t in range(N_TREES):
        leaf_value[t, :, t] = np.arange(2**DEPTH)
    model = _booster(feature, threshold, default_left, leaf_value, grow_policy)

    raw = np.asarray(model.predict_raw(X))

    expected = _float_walk(X, feature, threshold, default_left, grow_policy)
    assert_array_equal(raw, expected.astype(np.float32))


@pytest.mark.parametrize("grow_policy", GROW_POLICIES)
def test_leaf_ids_of_a_block_of_trees_matches_walk(grow_policy):
    # The call the blocked path makes: S trees at once on feature-major rows.
    rng = np.random.default_rng(4)
    feature, threshold, _, default_left = _random_splits(rng, 8, grow_policy)
    X = _float_rows(rng, 500)

    leaves = jax.jit(lambda x_t, *splits: layout(grow_policy).leaf_ids(
        x_t, splits, DEPTH, model_module._goes_right))(
        jnp.asarray(X.T), jnp.asarray(feature), jnp.asarray(threshold),
        jnp.asarray(default_left))

    assert leaves.shape == (8, 500)
    assert_array_equal(np.asarray(leaves).T,
                       _float_walk(X, feature, threshold, default_left, grow_policy))



@pytest.mark.parametrize("all_splits_levels", [1, 2, DEPTH])
def test_depthwise_leaf_ids_tested_at_once_then_walked_match_walk(monkeypatch,
                                                                  all_splits_levels):
    # Depthwise trees test every split of their first levels at once and walk the rest
    # (trees deeper than ALL_SPLITS_LEVELS); any cut between the two gives the same
    # leaves, for trees stacked on two axes too.
    from jaxgbt.core import layout as layout_module
    monkeypatch.setattr(layout_module, "ALL_SPLITS_LEVELS", all_splits_levels)
    rng = np.random.default_rng(5)
    feature, threshold, _, default_left = _random_splits(rng, 6, "depthwise")
    X = _float_rows(rng, 300)
    splits = tuple(jnp.asarray(a).reshape((2, 3, -1)) for a in (feature, threshold,
                                                                 default_left))

    leaves = jax.jit(lambda x_t, *splits: Depthwise().leaf_ids(
        x_t, splits, DEPTH, model_module._goes_right))(jnp.asarray(X.T), *splits)

    assert leaves.shape == (2, 3, 300)
    assert_array_equal(np.asarray(leaves).reshape(6, 300).T,
                       _float_walk(X, feature, threshold, default_left, "depthwise"))

def test_the_layouts_are_the_grow_policies_fit_accepts():
    assert typing.get_args(GrowPolicy) == GROW_POLICIES
