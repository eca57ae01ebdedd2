"""Growing one tree on binned data, as one function of fixed shapes.

This module owns the tree in bin space (``BinnedTree``, ``goes_right``) and the three
growers, ``grow_tree`` (oblivious), ``grow_depthwise_tree`` and ``grow_lossguide_tree``
(leaf by leaf, into a depthwise tree's arrays); ``layout.py`` owns the
choice between them and everything else that depends on the growth policy (split-array
lengths, column-mask shapes, the traversal from a row to its leaf).

An oblivious (symmetric) tree of depth D asks the same question at every node of a
level, so a row's leaf is the D-bit number of its answers, first level in the high
bit: ``leaf = sum_d right_d * 2**(D - 1 - d)``. Growing a level is one histogram,
one argmax and one update of every row's node id, with no per-node bookkeeping.

A depthwise tree (XGBoost's level-wise growth) gives every node its own question. It
is grown the same way, level by level over a fixed array of 2**(D - 1) nodes, with one
argmax per node instead of one per level. Its splits are stored in heap order: node j
of level d (j < 2**d) at index 2**d - 1 + j, 2**D - 1 nodes in all, and its children
are nodes 2j and 2j + 1 of level d + 1, so leaf ids are numbered as in oblivious trees.
A node that does not split sends all its rows left, so every tree keeps its shape.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.config import ScoreFunction
from jaxgbt.core.constraints import allowed_after, enforce_monotone, split_bounds
from jaxgbt.core.histogram import smaller_children, with_gradients
from jaxgbt.core.search import (
    FeatureGroup,
    feature_groups,
    search_level,
    search_level_subtracting,
)
from jaxgbt.core.split import (
    Best,
    LevelSplit,
    SplitParams,
    best_level_candidate,
    best_node_candidates,
    leaf_weight,
    rows_per_hessian,
    split_of,
)


class BinnedTree(NamedTuple):
    """One tree in bin space, as grown (thresholds are looked up afterwards).

    The split arrays have one entry per level (oblivious, M = D) or per node in heap
    order (depthwise, M = 2**D - 1).
    """

    feature: jax.Array  # i32[M]
    split_bin: jax.Array  # i32[M]
    default_left: jax.Array  # bool[M]
    gain: jax.Array  # f32[M]
    leaf_value: jax.Array  # f32[L, K], learning rate not yet applied
    # f32[L]: each leaf's cover, the Hessians of the rows the tree was grown on that reach
    # it, weighted and summed over the K outputs (XGBoost's cover; path-dependent
    # TreeSHAP weighs a tree's branches by it). An output of growth, read by no round.
    cover: jax.Array


def leaf_cover(sums: jax.Array, n_outputs: int) -> jax.Array:
    """f32[L]: each leaf's cover from its summed (g, h) f32[L, 2K]: the Hessian sum over
    the K outputs (one cover per leaf, as the K outputs share the tree's branches)."""
    return jnp.sum(sums[:, n_outputs:], axis=1)


def goes_right(column: jax.Array, split_bin: jax.Array, default_left: jax.Array,
               missing_bin: int) -> jax.Array:
    """bool[N]: which rows of one binned feature column u8[N] take the right branch."""
    column = column.astype(jnp.int32)
    return jnp.where(column == missing_bin, ~default_left, column > split_bin)


def _search_level_of(n_nodes: int, n_bins: int, axis_name, widths, score_function,
                     columns, node, gh, params: SplitParams, allowed, *,
                     missing_values: bool = True) -> LevelSplit:
    """The oblivious split of a level whose rows are in its first ``n_nodes`` nodes;
    ``widths`` and ``columns`` are the static and traced halves of ``feature_groups``."""
    params = _with_row_counts(params, node, gh, n_nodes, axis_name)
    best = search_level(_groups(widths, columns), node, gh, n_nodes,
                        lambda hist, features, counted, n_candidates: best_level_candidate(
                            hist, features, counted, params, allowed, n_bins - 1,
                            score_function, missing_values, n_candidates),
                        axis_name)
    return split_of(best, n_bins - 1, params)


def _search_level_subtracting_of(n_nodes: int, n_bins: int, axis_name, widths,
                                 score_function, has_first: bool, keep: bool, columns, node,
                                 gh, params: SplitParams, allowed, parents, level, *,
                                 missing_values: bool = True):
    """``_search_level_of`` with histogram subtraction (``uses_subtraction``): also
    takes the level above's histograms and returns this level's (when ``keep``).
    ``has_first``: the branch also searches a tree's first level, which has no level
    above (static)."""
    params = _with_row_counts(params, node, gh, n_nodes, axis_name)
    best, parents = search_level_subtracting(
        _groups(widths, columns), node, gh, n_nodes,
        lambda hist, features, counted, n_candidates: best_level_candidate(
            hist, features, counted, params, allowed, n_bins - 1, score_function,
            missing_values, n_candidates),
        smaller_children(node, gh, n_nodes), parents, keep,
        level == 0 if has_first else False, axis_name)
    return split_of(best, n_bins - 1, params), parents


def _with_row_counts(params: SplitParams, node, gh, n_nodes: int, axis_name) -> SplitParams:
    """``params`` with the searched nodes' ``rows_per_hessian`` when ``min_data_in_leaf``
    is set (a field of ``SplitParams``, so None leaves the search as it was)."""
    if params.min_data_in_leaf is None:
        return params
    return params._replace(rows_per_hessian=rows_per_hessian(node, gh, n_nodes, axis_name))


def _split_groups(groups):
    """(static (B_g, features, zero bins, candidates, bundle slots) tuples, traced
    columns) of ``feature_groups``: a ``lax.switch`` takes the columns as operands and
    the rest in its branches."""
    return (tuple((g.n_bins, g.features, g.zero_bins, g.n_candidates, g.bundle_slots)
                  for g in groups),
            tuple(g.columns for g in groups))


def _search_cells(widths, n_features: int, axis_name) -> int | None:
    """The (feature, bin) cells a level searches per node, over every group
    (``_split_groups``; features None: all ``n_features``); None when rows are split
    over devices, where every level's histogram is summed across them and one sized to
    its nodes sends fewer bytes (three sizes kept)."""
    if axis_name is not None:
        return None
    return sum(n_bins * (n_features if features is None else features.size)
               for n_bins, features, *_ in widths)


def _groups(widths, columns):
    return [FeatureGroup(c, *static) for static, c in zip(widths, columns, strict=True)]


# (feature, bin) cells per node times the deepest level's nodes, up to which every level
# searches as many nodes as the deepest. Each search size is a branch compiled on its
# own, about 0.2 s each; one size for 1,000 rows x 8 features (65,536 cells at depth 6)
# compiled 0.45 s faster and grew each tree 0.7 ms slower (docs/benchmarks.md,
# "Compile"), so small searches take one.
SMALL_SEARCH_CELLS = 2**16

# The same cells times the deepest level's nodes and the outputs, from which the levels
# round up to an eighth of the deepest level's nodes, not a quarter: one more size.
# Where the search is most of a tree (hundreds of features at a few thousand rows, or
# several outputs), the shallow levels' search of a quarter cost 5-13% of a warm fit;
# every level at its own 2**d saved a few percent more but compiled 0.7-1.2 s longer
# (docs/benchmarks.md, "Wide data").
LARGE_SEARCH_WORK = 2**21


def search_sizes(depth: int, cells: int | None = None, n_outputs: int = 1) -> list[int]:
    """Nodes each level's histogram and split search hold: the level's 2**d nodes,
    rounded up to a quarter of the deepest level's, so that they are compiled for at
    most three sizes (each size is one branch of a ``lax.switch``, compiled
    separately); the shallow levels, which would hold fewer, are cheap either way.

    With ``cells`` (the levels' (feature, bin) cells) and ``cells`` times the deepest
    level's nodes at most ``SMALL_SEARCH_CELLS``, one size: the deepest level's; with
    that product times ``n_outputs`` at least ``LARGE_SEARCH_WORK``, rounded up to an
    eighth of the deepest level's (four sizes)."""
    n_nodes = 2 ** (depth - 1)
    if cells is not None and cells * n_nodes <= SMALL_SEARCH_CELLS:
        return [n_nodes] * depth
    smallest = n_nodes // 4
    if cells is not None and cells * n_nodes * n_outputs >= LARGE_SEARCH_WORK:
        smallest = n_nodes // 8
    return [max(2**d, smallest) for d in range(depth)]


def _level_params(params: SplitParams, level: jax.Array) -> SplitParams:
    """The params a level searches with: with score noise, the tree's key folded with the
    level, so that each level draws its own noise."""
    if params.noise is None:
        return params
    return params._replace(noise=params.noise._replace(
        key=jax.random.fold_in(params.noise.key, level)))


def _psum(x, axis_name):
    return x if axis_name is None else jax.lax.psum(x, axis_name)


# Histogram subtraction (LightGBM's): below the first level only each node's smaller
# child's rows are summed, gathered out of the others, and its sibling's sums are the
# parent's less its own, carried from level to level. It halves the scatter updates,
# but costs a prefix sum and gathers of the smaller children's rows at every level, a
# read of the parents' histograms and a write of the level's (memory, where the
# histograms are large against the rows), and about 0.8 s more compilation. With two
# g/h columns a row it was as slow or slower at every size measured; with six (three
# classes, scattered as rows of eight floats: ``histogram.padded_columns``) it was 4-8%
# faster at 1,000,000 x 28 (122 rows per cell of a depth-6 tree's deepest level), and at
# 200,000 rows (24) 15% slower at 28 features and 4-15% faster at 180 to 500, less than
# its compilation over a fit of 50 trees (docs/benchmarks.md, "Histogram subtraction").
# Under a mesh each device subtracts its own rows' histograms.
SUBTRACTION_MIN_COLUMNS = 6
SUBTRACTION_MIN_ROWS_PER_CELL = 64
SUBTRACTION_MAX_BYTES = 2**28


def can_subtract(widths, sizes: list[int]) -> bool:
    """Whether a tree can be grown with histogram subtraction: over dense features
    (``_split_groups``'s widths: no sparse group), below a first level."""
    return len(sizes) >= 2 and all(zero_bins is None for _, _, zero_bins, *_ in widths)


def uses_subtraction(n_rows: int, widths, n_features: int, n_columns: int,
                     sizes: list[int], n_bins: int) -> bool:
    """Whether ``grow_tree`` grows with histogram subtraction by default: where it can
    (``can_subtract``), on CPU, with at least ``SUBTRACTION_MIN_COLUMNS`` g/h columns
    and ``SUBTRACTION_MIN_ROWS_PER_CELL`` rows per (node, bin) of the deepest level
    (``n_rows``: a device's, under a mesh), and the carried histograms within
    ``SUBTRACTION_MAX_BYTES``. (Not yet measured on accelerators.)"""
    if (not can_subtract(widths, sizes) or jax.default_backend() != "cpu"
            or n_columns < SUBTRACTION_MIN_COLUMNS
            or n_rows < SUBTRACTION_MIN_ROWS_PER_CELL * sizes[-1] * n_bins):
        return False
    carried = sum((n_features if features is None else features.size) * width
                  for width, features, *_ in widths) * (sizes[-1] // 2) * n_columns * 4
    return carried <= SUBTRACTION_MAX_BYTES


def grow_tree(bins: jax.Array, gh: jax.Array, params: SplitParams, depth: int, n_bins: int,
              axis_name: str | None = None, level_allowed: jax.Array | None = None,
              interaction_sets: jax.Array | None = None,
              monotone: jax.Array | None = None,
              bin_groups=None, sparse_group=None, entries=None,
              score_function: ScoreFunction = "l2", subtraction: bool | None = None,
              missing_values: bool = True) -> tuple[BinnedTree, jax.Array]:
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
      bin_groups: features searched with fewer bins (``BoostConfig.bin_groups``), or
        None.
      sparse_group: features whose histograms are summed from their entries
        (``BoostConfig.sparse_group``), or None.
      entries: those entries (``histogram.SparseEntries``), with ``sparse_group``.
      score_function: what candidates are ranked by, "l2" (the gain) or "cosine"
        (``split.cosine_scores``; static).
      subtraction: whether to build the levels' histograms by subtraction where it can
        (``can_subtract``; static); None: where ``uses_subtraction`` finds it pays.
      missing_values: whether a row may sit in a missing bin (``BoostConfig``; static).

    Returns:
      The tree, and each row's leaf id i32[N].

    The levels run in a ``lax.scan``. Level d has 2**d nodes in use: its histogram and
    search hold only those, rounded up to one of three sizes (``search_sizes``: a
    ``lax.switch``, each branch compiled for its size), which halves their cost summed
    over a tree; small searches hold the deepest level's nodes at every level, one
    branch to compile, and large ones round up to an eighth (four branches).

    With histogram subtraction (``uses_subtraction``) the scan also carries the level
    above's histograms, f32[F_g, 2**(D-2), B_g, 2K] per group of features, and each
    level below the first sums only its nodes' smaller children's rows
    (``search.search_level_subtracting``).
    """
    n_features, n_rows = bins.shape
    n_outputs = gh.shape[1] // 2

    widths, columns = _split_groups(feature_groups(
        bins, n_bins, bin_groups, sparse_group, entries and with_gradients(entries, gh)))
    sizes = search_sizes(depth, _search_cells(widths, n_features, axis_name), n_outputs)
    if subtraction is None:
        subtract = uses_subtraction(n_rows, widths, n_features, gh.shape[1], sizes, n_bins)
    else:
        subtract = subtraction and can_subtract(widths, sizes)
    if subtract:
        sizes = [max(size, 2) for size in sizes]  # every node slot has a sibling
    distinct = sorted(set(sizes))
    branch = [distinct.index(size) for size in sizes]
    if subtract:
        # The deepest level's histograms are not kept, unless its size is shared.
        searches = [functools.partial(_search_level_subtracting_of, size, n_bins, axis_name,
                                      widths, score_function, size == sizes[0],
                                      size < sizes[-1] or sizes.count(size) > 1,
                                      missing_values=missing_values)
                    for size in distinct]
        parents = tuple(jnp.zeros((group.shape[0], sizes[-1] // 2, width, gh.shape[1]),
                                  gh.dtype)
                        for (width, *_), group in zip(widths, columns, strict=True))
    else:
        searches = [functools.partial(_search_level_of, size, n_bins, axis_name, widths,
                                      score_function, missing_values=missing_values)
                    for size in distinct]
        parents = ()
    branch = jnp.asarray(branch, jnp.int32)

    constrained = interaction_sets is not None or monotone is not None

    def level(carry, inputs):
        node, used, parents = carry
        d, allowed = inputs
        if constrained:
            allowed = allowed & allowed_after(used, interaction_sets, monotone)
        if subtract:
            split, parents = jax.lax.switch(branch[d], searches, columns, node, gh,
                                            _level_params(params, d), allowed, parents, d)
        else:
            split = jax.lax.switch(branch[d], searches, columns, node, gh,
                                   _level_params(params, d), allowed)
        column = jax.lax.dynamic_index_in_dim(bins, split.feature, axis=0, keepdims=False)
        right = goes_right(column, split.split_bin, split.default_left, n_bins - 1)
        used = used.at[split.feature].set(used[split.feature] | (split.gain > 0))
        return (2 * node + right.astype(jnp.int32), used, parents), split

    if level_allowed is None:
        level_allowed = jnp.ones((depth, n_features), bool)
    (leaf, _, _), splits = jax.lax.scan(
        level, (jnp.zeros(n_rows, jnp.int32), jnp.zeros(n_features, bool), parents),
        (jnp.arange(depth), level_allowed))
    sums = _psum(jax.ops.segment_sum(gh, leaf, num_segments=2**depth), axis_name)
    leaf_value = leaf_weight(sums[:, :n_outputs], sums[:, n_outputs:], params)
    if monotone is not None:
        leaf_value = enforce_monotone(leaf_value, splits.feature, splits.gain > 0, monotone)
    tree = BinnedTree(splits.feature, splits.split_bin, splits.default_left, splits.gain,
                      leaf_value, leaf_cover(sums, n_outputs))
    return tree, leaf


def _search_node_splits_of(n_nodes: int, n_all: int, n_bins: int, axis_name, widths,
                           score_function, columns, node, gh, params: SplitParams, allowed,
                           bounds, monotone, *, missing_values: bool = True):
    """The best split of each of the first ``n_nodes`` nodes (those in use at a level),
    padded with pass-through splits to ``n_all`` nodes, and the g and h sums of each
    node's children under it (f32[n_all, 2K] each, with ``bounds``; else None)."""
    bounds = None if bounds is None else tuple(b[:n_nodes] for b in bounds)
    params = _with_row_counts(params, node, gh, n_nodes, axis_name)
    best = search_level(_groups(widths, columns), node, gh, n_nodes,
                        lambda hist, features, counted, n_candidates: best_node_candidates(
                            hist, features, counted, params, allowed[:n_nodes], bounds,
                            monotone, n_bins - 1, score_function, n_candidates,
                            missing_values),
                        axis_name)
    split = split_of(best, n_bins - 1, params)
    pad = n_all - n_nodes
    children = None
    if bounds is not None:
        children = tuple(jnp.pad(sums, ((0, pad), (0, 0))) for sums in best.extra)
    if pad == 0:
        return split, children
    last_value_bin = n_bins - 2
    return LevelSplit(feature=jnp.pad(split.feature, (0, pad)),
                      split_bin=jnp.pad(split.split_bin, (0, pad), constant_values=last_value_bin),
                      default_left=jnp.pad(split.default_left, (0, pad), constant_values=True),
                      gain=jnp.pad(split.gain, (0, pad))), children


def _heap_order(depth: int) -> np.ndarray:
    """Indices into a [D, 2**(D-1)] per-level node array of the heap-ordered nodes."""
    n_nodes = 2 ** (depth - 1)
    return np.concatenate([d * n_nodes + np.arange(2**d) for d in range(depth)])


def grow_depthwise_tree(bins: jax.Array, gh: jax.Array, params: SplitParams, depth: int,
                        n_bins: int, axis_name: str | None = None,
                        level_allowed: jax.Array | None = None,
                        interaction_sets: jax.Array | None = None,
                        monotone: jax.Array | None = None, bin_groups=None,
                        sparse_group=None, entries=None,
                        score_function: ScoreFunction = "l2", missing_values: bool = True
                        ) -> tuple[BinnedTree, jax.Array, tuple | None]:
    """Grows one depthwise tree (each node its own split), level by level.

    Args are those of ``grow_tree``; here interaction constraints hold along each path
    from the root (XGBoost's rule) and a monotone feature may split any node: its
    split bounds the values of the two subtrees on either side of the midpoint of the
    children's values (``constraints.split_bounds``).

    Returns:
      The tree (split arrays of shape [2**D - 1], heap order), each row's leaf id
      i32[N], and the leaves' (lower, upper) bounds f32[L, K] under monotone
      constraints (None without them): leaf values are clipped to them, and so must be
      any refreshed leaf values.
    """
    n_rows, n_features = bins.shape[1], bins.shape[0]
    n_outputs = gh.shape[1] // 2
    n_nodes = 2 ** (depth - 1)
    widths, columns = _split_groups(feature_groups(
        bins, n_bins, bin_groups, sparse_group, entries and with_gradients(entries, gh)))
    sizes = search_sizes(depth, _search_cells(widths, n_features, axis_name), n_outputs)
    searches = [functools.partial(_search_node_splits_of, size, n_nodes, n_bins, axis_name,
                                  widths, score_function, missing_values=missing_values)
                for size in sorted(set(sizes))]
    branch = jnp.asarray([sorted(set(sizes)).index(size) for size in sizes], jnp.int32)
    # Child c of the level below is side c % 2 of node c // 2.
    children = jnp.arange(2 * n_nodes)
    parent, is_right = children // 2, (children % 2 == 1)[:, None]

    def level(carry, inputs):
        node, used, bounds = carry
        d, level_allowed_d = inputs
        allowed = jnp.broadcast_to(level_allowed_d, (n_nodes, n_features))
        if interaction_sets is not None:
            allowed = allowed & jax.vmap(
                lambda u: allowed_after(u, interaction_sets, None))(used)
        level_bounds = None if bounds is None else (bounds[0][:n_nodes], bounds[1][:n_nodes])
        split, children_sums = jax.lax.switch(branch[d], searches, columns, node, gh,
                                              _level_params(params, d), allowed,
                                              level_bounds, monotone)
        column = jnp.take_along_axis(bins, split.feature[node][None], axis=0)[0]
        right = goes_right(column, split.split_bin[node], split.default_left[node], n_bins - 1)
        # Children inherit their parent's path features and bounds (entries past the
        # level's children read padding nodes and are never used).
        did_split = split.gain > 0
        used = used | (jax.nn.one_hot(split.feature, n_features, dtype=bool)
                       & did_split[:, None])
        if bounds is not None:
            left_sums, right_sums = children_sums
            left_bounds, right_bounds = split_bounds(
                leaf_weight(left_sums[:, :n_outputs], left_sums[:, n_outputs:], params),
                leaf_weight(right_sums[:, :n_outputs], right_sums[:, n_outputs:], params),
                level_bounds, jnp.where(did_split, monotone[split.feature], 0))
            bounds = tuple(jnp.where(is_right, r[parent], lft[parent])
                           for lft, r in zip(left_bounds, right_bounds, strict=True))
        return (2 * node + right.astype(jnp.int32), used[parent[:n_nodes]], bounds), split

    if level_allowed is None:
        level_allowed = jnp.ones((depth, n_features), bool)
    bounds = None
    if monotone is not None:  # one entry per node of the level below, 2**D at the end
        bounds = (jnp.full((2 * n_nodes, n_outputs), -jnp.inf, jnp.float32),
                  jnp.full((2 * n_nodes, n_outputs), jnp.inf, jnp.float32))
    (leaf, _, leaf_bounds), splits = jax.lax.scan(
        level, (jnp.zeros(n_rows, jnp.int32), jnp.zeros((n_nodes, n_features), bool), bounds),
        (jnp.arange(depth), level_allowed))
    heap = _heap_order(depth)
    tree_splits = jax.tree.map(lambda a: a.reshape(-1)[heap], splits)
    sums = _psum(jax.ops.segment_sum(gh, leaf, num_segments=2**depth), axis_name)
    leaf_value = leaf_weight(sums[:, :n_outputs], sums[:, n_outputs:], params)
    if leaf_bounds is not None:
        leaf_value = jnp.clip(leaf_value, *leaf_bounds)
    tree = BinnedTree(tree_splits.feature, tree_splits.split_bin, tree_splits.default_left,
                      tree_splits.gain, leaf_value, leaf_cover(sums, n_outputs))
    return tree, leaf, leaf_bounds


class _LeafwiseState(NamedTuple):
    """What growing a tree leaf by leaf carries from one split to the next. Nodes are
    numbered as a heap from 1: the root is node 1, node h's children are 2h and 2h + 1,
    and node h sits at level floor(log2 h)."""

    node: jax.Array  # i32[N], each row's node
    # i32[N]: the rows grouped by node, each node's rows in row order, and each node's
    # first place in it and number of rows, i32[2**(D+1)]: a node's rows are
    # order[start:start + count], its left child's rows first.
    order: jax.Array
    start: jax.Array
    count: jax.Array
    candidate: LevelSplit  # [2**D] (entry 0 unused): each searched node's best split
    children: tuple | None  # with bounds: the g, h sums f32[2**D, 2K] of each candidate's children
    is_split: jax.Array  # bool[2**D]
    open_gain: jax.Array  # f32[2**D]: the candidate's gain of each leaf that may split, else 0
    used: jax.Array | None  # bool[2**D, F], the features on each node's path (interaction sets)
    bounds: tuple | None  # (lower, upper) f32[2**(D+1), K] of each node (monotone)
    fresh: jax.Array  # i32[]: the first of the two nodes the last split made
    n_split: jax.Array  # i32[]: splits made; max_leaves - 1 once growth has stopped


# A leaf-wise step searches the rows of two leaves. Their histogram summed over all N
# rows (those of other leaves weighing 0) made a tree of L leaves cost L - 1 passes over
# the data: 5.4x LightGBM's time a tree at 200,000 rows and 63 leaves. The rows are kept
# grouped by leaf instead (``_LeafwiseState.order``), and a step reads a window of that
# order holding the pair's rows, the smallest of a few sizes (N, N/4, N/16, ... down to
# this), each size a branch compiled on its own (docs/benchmarks.md, "Leaf-wise trees").
WINDOW_MIN_ROWS = 4096


def window_sizes(n_rows: int) -> list[int]:
    """The window sizes, largest first, a leaf-wise step is compiled for: N, then a
    quarter of the last while that is at least ``WINDOW_MIN_ROWS``."""
    sizes = [n_rows]
    while sizes[-1] // 4 >= WINDOW_MIN_ROWS:
        sizes.append(-(-sizes[-1] // 4))
    return sizes


def _in_window(sizes: list[int], first: jax.Array, count: jax.Array, window):
    """``window(size, offset, rows_in)`` for the smallest of ``sizes`` that holds the
    places [first, first + count) of the row order: offset, the window's first place (it
    ends at N at the latest), and rows_in bool[size], the places in that range."""
    n_rows = sizes[0]

    def branch(size):
        def run(_):
            offset = jnp.minimum(first, n_rows - size)
            place = offset + jnp.arange(size, dtype=jnp.int32)
            return window(size, offset, (place >= first) & (place < first + count))
        return run

    if len(sizes) == 1:
        return branch(n_rows)(None)
    smallest = jnp.sum(jnp.asarray(sizes) >= count) - 1
    return jax.lax.switch(smallest, [branch(size) for size in sizes], None)


def _heap_levels(depth: int) -> np.ndarray:
    """i32[2**(D+1)]: the level of each node numbered from 1 (entry 0 given level 0)."""
    return np.concatenate([[0], np.floor(np.log2(np.arange(1, 2 ** (depth + 1))))]
                          ).astype(np.int32)


def _pair_allowed(level_allowed: jax.Array, level: jax.Array, pair: jax.Array) -> jax.Array:
    """bool[2, F]: the features the two nodes ``pair`` i32[2] of one level may split on,
    from per-level bool[D, F] or per-node bool[D, 2**(D-1), F] masks."""
    at_level = level_allowed[level]
    if at_level.ndim == 1:
        return jnp.broadcast_to(at_level, (2, at_level.shape[0]))
    first = jnp.left_shift(1, level)
    return at_level[jnp.clip(pair - first, 0, at_level.shape[0] - 1)]


def _searched_pair(state: _LeafwiseState, search, columns, gh, params: SplitParams,
                   level_allowed, interaction_sets, monotone, levels,
                   sizes: list[int]) -> _LeafwiseState:
    """The state with the best splits of the two nodes the last split made (both leaves
    of one level; before the first split, the root and the unused entry 0), from the
    window of the row order that holds their rows."""
    pair = state.fresh + jnp.arange(2, dtype=jnp.int32)
    first, n_left = state.start[state.fresh], state.count[state.fresh]
    step_params = _level_params(params, state.n_split)

    def window(size, offset, in_pair):
        if size == gh.shape[0]:  # every row, in row order; those of other leaves weigh 0
            side = state.node - state.fresh
            of_pair = (side == 0) | (side == 1)
            return search(columns, jnp.where(of_pair, side, 0),
                          jnp.where(of_pair[:, None], gh, 0.0), step_params, allowed,
                          bounds, monotone)
        # The left leaf's rows come first, each leaf's in row order: every (node, bin)
        # sum adds its rows in the order a pass over all rows would, the same floats.
        rows = jax.lax.dynamic_slice_in_dim(state.order, offset, size)
        side = (offset + jnp.arange(size, dtype=jnp.int32) >= first + n_left).astype(jnp.int32)
        return search(tuple(jnp.take(c, rows, axis=1) for c in columns),
                      jnp.where(in_pair, side, 0), jnp.where(in_pair[:, None], gh[rows], 0.0),
                      step_params, allowed, bounds, monotone)

    allowed = _pair_allowed(level_allowed, levels[pair[1]], pair)
    if state.used is not None:
        allowed = allowed & jax.vmap(
            lambda u: allowed_after(u, interaction_sets, None))(state.used[pair])
    bounds = None if state.bounds is None else tuple(b[pair] for b in state.bounds)
    split, children = _in_window(sizes, first, n_left + state.count[state.fresh + 1], window)

    def stored(table, values):
        return jax.lax.dynamic_update_slice_in_dim(table, values, state.fresh, axis=0)

    gain = jnp.where(pair > 0, split.gain, 0.0)  # entry 0 is no node
    return state._replace(
        candidate=jax.tree.map(stored, state.candidate, split),
        children=None if children is None else jax.tree.map(stored, state.children, children),
        open_gain=stored(state.open_gain, gain))


def _with_entries(table: jax.Array, index: jax.Array, values: jax.Array) -> jax.Array:
    """``table`` [T, ...] with ``table[index[k]] = values[k]`` for each of a few distinct
    indices i32[K] inside it; an index past the end (the children of a node at the last
    level) changes nothing. Written as K selects, not a scatter that drops updates: XLA:GPU's
    deterministic scatter, batched under vmap, wrote some dropped updates into the table."""
    entry = jnp.arange(table.shape[0], dtype=jnp.int32).reshape((-1,) + (1,) * (table.ndim - 1))
    for k in range(index.shape[0]):
        table = jnp.where(entry == index[k], values[k], table)
    return table


def _partitioned(state: _LeafwiseState, h: jax.Array, do: jax.Array, split: LevelSplit,
                 bins: jax.Array, n_bins: int, sizes: list[int]) -> _LeafwiseState:
    """The state with leaf h's rows moved to its children (when ``do``): their node ids,
    and h's places in the row order split stably, the left child's rows first."""
    first, count = state.start[h], state.count[h]

    def window(size, offset, in_leaf):
        rows = jax.lax.dynamic_slice_in_dim(state.order, offset, size)
        column = jnp.take(jax.lax.dynamic_index_in_dim(bins, split.feature, axis=0,
                                                       keepdims=False), rows)
        right = goes_right(column, split.split_bin, split.default_left, n_bins - 1)
        moved = in_leaf & do
        left_rank = jnp.cumsum(moved & ~right, dtype=jnp.int32) - 1
        right_rank = jnp.cumsum(moved & right, dtype=jnp.int32) - 1
        n_left = left_rank[-1] + 1
        place = jnp.where(right, first + n_left + right_rank, first + left_rank) - offset
        # Every index in bounds and each once (the moved rows' new places are the places
        # they leave): XLA:GPU's deterministic scatter, batched under vmap, wrote some
        # updates meant to be dropped (docs/reliability.md#reproducibility).
        unmoved = jnp.arange(size, dtype=jnp.int32)
        order = rows.at[jnp.where(moved, place, unmoved)].set(rows, unique_indices=True)
        node = state.node.at[rows].set(
            jnp.where(moved, 2 * h + right.astype(jnp.int32), state.node[rows]),
            unique_indices=True)
        return jax.lax.dynamic_update_slice_in_dim(state.order, order, offset, 0), node, n_left

    order, node, n_left = _in_window(sizes, first, count, window)
    children = 2 * h + jnp.arange(2, dtype=jnp.int32)
    n_left = jnp.where(do, n_left, count)
    return state._replace(
        order=order, node=node,
        start=_with_entries(state.start, children, jnp.stack([first, first + n_left])),
        count=_with_entries(state.count, children, jnp.stack([n_left, count - n_left])))


def _split_best_leaf(state: _LeafwiseState, bins: jax.Array, n_bins: int, max_leaves: int,
                     params: SplitParams, monotone, levels, sizes: list[int]
                     ) -> _LeafwiseState:
    """The state after splitting the leaf of the largest gain, or with growth stopped
    when no leaf's split gains anything."""
    h = jnp.argmax(state.open_gain).astype(jnp.int32)  # ties to the lowest node
    do = state.open_gain[h] > 0
    split = jax.tree.map(lambda a: a[h], state.candidate)
    state = _partitioned(state, h, do, split, bins, n_bins, sizes)
    children = 2 * h + jnp.arange(2, dtype=jnp.int32)
    used = state.used
    if used is not None:
        path = used[h].at[split.feature].set(used[h][split.feature] | do)
        used = _with_entries(used, children, jnp.stack([path, path]))
    bounds = state.bounds
    if bounds is not None:
        n_outputs = state.children[0].shape[1] // 2
        left, right_sums = (sums[h][None] for sums in state.children)
        new = split_bounds(
            leaf_weight(left[:, :n_outputs], left[:, n_outputs:], params),
            leaf_weight(right_sums[:, :n_outputs], right_sums[:, n_outputs:], params),
            tuple(b[h][None] for b in bounds),
            jnp.where(do, monotone[split.feature], 0)[None])
        bounds = tuple(_with_entries(b, children, jnp.concatenate([lft, r]))
                       for b, lft, r in zip(bounds, *new, strict=True))
    return state._replace(
        is_split=state.is_split.at[h].set(state.is_split[h] | do),
        open_gain=state.open_gain.at[h].set(0.0), used=used, bounds=bounds,
        fresh=jnp.where(do, 2 * h, state.fresh),
        n_split=jnp.where(do, state.n_split + 1, max_leaves - 1))


def _leaf_bounds(bounds: tuple, is_split: jax.Array, depth: int) -> tuple:
    """(lower, upper) f32[2**D, K] of each leaf of the last level: a node that did not
    split hands its bounds down to its children, level by level."""
    lower, upper = bounds
    for level in range(depth):
        nodes = np.arange(2**level, 2 ** (level + 1))
        keep = ~is_split[nodes][:, None]
        for child in (2 * nodes, 2 * nodes + 1):
            lower = lower.at[child].set(jnp.where(keep, lower[nodes], lower[child]))
            upper = upper.at[child].set(jnp.where(keep, upper[nodes], upper[child]))
    return lower[2**depth:], upper[2**depth:]


def grow_lossguide_tree(bins: jax.Array, gh: jax.Array, params: SplitParams, depth: int,
                        n_bins: int, max_leaves: int, axis_name: str | None = None,
                        level_allowed: jax.Array | None = None,
                        interaction_sets: jax.Array | None = None,
                        monotone: jax.Array | None = None, bin_groups=None,
                        sparse_group=None, entries=None,
                        score_function: ScoreFunction = "l2", missing_values: bool = True
                        ) -> tuple[BinnedTree, jax.Array, tuple | None]:
    """Grows one tree leaf by leaf (LightGBM's best-first growth), into a depthwise
    tree's arrays.

    Each step splits the leaf whose best split gains most, until the tree has
    ``max_leaves`` leaves, no leaf's split gains more than ``min_split_gain``, or every
    leaf that could still split is at level D. A step searches the two leaves the last
    split made: one histogram of their rows, two nodes wide, read from the smallest
    window of the rows grouped by leaf that holds them (``window_sizes``).
    The tree is stored as a depthwise tree of depth D whose nodes that did not split
    pass every row left, so prediction, explanations and files read it as one.

    Args are those of ``grow_depthwise_tree``, with ``max_leaves`` (static, 2 to 2**D).
    Column masks of a level (``level_allowed``) apply to every leaf of it; the masks of
    node j of a level, to the j-th leaf from the left.

    Returns:
      As ``grow_depthwise_tree``: the tree (heap order), leaf ids i32[N] of the last
      level (a leaf at level d < D is its leftmost descendant there), and leaf bounds
      under monotone constraints.
    """
    n_features, n_rows = bins.shape
    n_outputs = gh.shape[1] // 2
    widths, columns = _split_groups(feature_groups(
        bins, n_bins, bin_groups, sparse_group, entries and with_gradients(entries, gh)))
    search = functools.partial(_search_node_splits_of, 2, 2, n_bins, axis_name, widths,
                               score_function, missing_values=missing_values)
    windows = window_sizes(n_rows)
    # Rows split over devices are searched whole: each device would pick a window of its
    # own around the histogram's all-reduce. Sparse entries are listed by row, not taken.
    search_windows = windows if axis_name is None and sparse_group is None else [n_rows]
    levels = jnp.asarray(_heap_levels(depth))
    if level_allowed is None:
        level_allowed = jnp.ones((depth, n_features), bool)
    n_nodes = 2**depth
    no_split = split_of(Best(gain=jnp.zeros(n_nodes, gh.dtype), index=jnp.zeros(n_nodes, jnp.int32),
                             score=None, extra=()), n_bins - 1, params)
    children = bounds = None
    if monotone is not None:
        children = (jnp.zeros((n_nodes, 2 * n_outputs), gh.dtype),) * 2
        bounds = (jnp.full((2 * n_nodes, n_outputs), -jnp.inf, gh.dtype),
                  jnp.full((2 * n_nodes, n_outputs), jnp.inf, gh.dtype))
    # Positions and counts of nodes up to level D (children of level D - 1's leaves);
    # entry 0 (no node) holds no rows, and the root holds them all.
    start = jnp.zeros(2 * n_nodes, jnp.int32)
    count = jnp.zeros(2 * n_nodes, jnp.int32).at[1].set(n_rows)
    state = _LeafwiseState(
        node=jnp.ones(n_rows, jnp.int32), order=jnp.arange(n_rows, dtype=jnp.int32),
        start=start, count=count, candidate=no_split, children=children,
        is_split=jnp.zeros(n_nodes, bool), open_gain=jnp.zeros(n_nodes, gh.dtype),
        used=None if interaction_sets is None else jnp.zeros((n_nodes, n_features), bool),
        bounds=bounds, fresh=jnp.int32(0), n_split=jnp.int32(0))

    def step(state):
        state = jax.lax.cond(
            levels[state.fresh + 1] < depth,
            lambda s: _searched_pair(s, search, columns, gh, params, level_allowed,
                                     interaction_sets, monotone, levels, search_windows),
            lambda s: s, state)
        return _split_best_leaf(state, bins, n_bins, max_leaves, params, monotone, levels,
                                windows)

    state = jax.lax.while_loop(lambda s: s.n_split < max_leaves - 1, step, state)
    # Nodes that did not split (searched or not) pass every row left; entry 0 is no node.
    tree_splits = jax.tree.map(lambda chosen, passing: jnp.where(state.is_split, chosen,
                                                                 passing)[1:],
                               state.candidate, no_split)
    level = levels[state.node]
    leaf = jnp.left_shift(state.node - jnp.left_shift(1, level), depth - level)
    sums = _psum(jax.ops.segment_sum(gh, leaf, num_segments=2**depth), axis_name)
    leaf_value = leaf_weight(sums[:, :n_outputs], sums[:, n_outputs:], params)
    leaf_bounds = None
    if bounds is not None:
        leaf_bounds = _leaf_bounds(state.bounds, state.is_split, depth)
        leaf_value = jnp.clip(leaf_value, *leaf_bounds)
    tree = BinnedTree(tree_splits.feature, tree_splits.split_bin, tree_splits.default_left,
                      tree_splits.gain, leaf_value, leaf_cover(sums, n_outputs))
    return tree, leaf, leaf_bounds
