"""Growing one oblivious tree on binned data, as one function of fixed shapes.

An oblivious (symmetric) tree of depth D asks the same question at every node of a
level, so a row's leaf is the D-bit number of its answers, first level in the high
bit: ``leaf = sum_d right_d * 2**(D - 1 - d)``. Growing a level is one histogram,
one argmax and one update of every row's node id, with no per-node bookkeeping.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxgbt.constraints import allowed_after, enforce_monotone
from jaxgbt.histogram import build_histogram
from jaxgbt.split import SplitParams, best_level_split, leaf_weight


class BinnedTree(NamedTuple):
    """One tree in bin space, as grown (thresholds are looked up afterwards)."""

    feature: jax.Array  # i32[D]
    split_bin: jax.Array  # i32[D]
    default_left: jax.Array  # bool[D]
    gain: jax.Array  # f32[D]
    leaf_value: jax.Array  # f32[L, K], learning rate not yet applied


def goes_right(column: jax.Array, split_bin: jax.Array, default_left: jax.Array,
               missing_bin: int) -> jax.Array:
    """bool[N]: which rows of one binned feature column u8[N] take the right branch."""
    column = column.astype(jnp.int32)
    return jnp.where(column == missing_bin, ~default_left, column > split_bin)


def _search_first_nodes(n_nodes: int, hist: jax.Array, params: SplitParams, allowed):
    return best_level_split(hist[:, :n_nodes], params, allowed)


def _psum(x, axis_name):
    return x if axis_name is None else jax.lax.psum(x, axis_name)


def grow_tree(bins: jax.Array, gh: jax.Array, params: SplitParams, depth: int, n_bins: int,
              axis_name: str | None = None, level_allowed: jax.Array | None = None,
              interaction_sets: jax.Array | None = None,
              monotone: jax.Array | None = None) -> tuple[BinnedTree, jax.Array]:
    """Grows one oblivious tree.

    Args:
      bins: u8[F, N], binned features; bin B - 1 is the missing bin.
      gh: f32[N, 2K], weighted gradients then Hessians of each row.
      params: regularisation (traced scalars).
      depth: D (static).
      n_bins: B (static), the missing bin included.
      axis_name: when rows are split over devices (inside ``shard_map``), the mesh
        axis to sum histograms over; None on one device.
      level_allowed: bool[D, F], the features each level may split on (column
        sampling), or None for all.
      interaction_sets: bool[S, F], feature sets allowed in one tree, or None.
      monotone: i32[F] monotone directions, or None; a constrained feature then splits
        at most one level (see ``constraints``).

    Returns:
      The tree, and each row's leaf id i32[N].

    The levels run in a ``lax.scan`` with histograms sized for the deepest level
    (2**(D-1) nodes), so the histogram code is compiled once whatever the depth; nodes
    not yet in use are empty.
    """
    n_rows = bins.shape[1]
    n_outputs = gh.shape[1] // 2
    n_nodes = 2 ** (depth - 1)

    # Level d has 2**d nodes in use: its split search reads only those (a lax.switch
    # over levels, each branch with its own static slice), which halves the cost of
    # the search summed over a tree.
    searches = [functools.partial(_search_first_nodes, 2**d) for d in range(depth)]

    constrained = interaction_sets is not None or monotone is not None

    def level(carry, inputs):
        node, used = carry
        d, allowed = inputs
        if constrained:
            allowed = allowed & allowed_after(used, interaction_sets, monotone)
        hist = _psum(build_histogram(bins, node, gh, n_nodes, n_bins), axis_name)
        split = jax.lax.switch(d, searches, hist, params, allowed)
        column = jax.lax.dynamic_index_in_dim(bins, split.feature, axis=0, keepdims=False)
        right = goes_right(column, split.split_bin, split.default_left, n_bins - 1)
        used = used.at[split.feature].set(used[split.feature] | (split.gain > 0))
        return (2 * node + right.astype(jnp.int32), used), split

    n_features = bins.shape[0]
    if level_allowed is None:
        level_allowed = jnp.ones((depth, n_features), bool)
    (leaf, _), splits = jax.lax.scan(
        level, (jnp.zeros(n_rows, jnp.int32), jnp.zeros(n_features, bool)),
        (jnp.arange(depth), level_allowed))
    sums = _psum(jax.ops.segment_sum(gh, leaf, num_segments=2**depth), axis_name)
    leaf_value = leaf_weight(sums[:, :n_outputs], sums[:, n_outputs:], params)
    if monotone is not None:
        leaf_value = enforce_monotone(leaf_value, splits.feature, splits.gain > 0, monotone)
    tree = BinnedTree(splits.feature, splits.split_bin, splits.default_left, splits.gain,
                      leaf_value)
    return tree, leaf
