"""Growth policies as objects: where a tree keeps its splits, and how a row walks it.

``Oblivious``, ``Depthwise`` and ``Lossguide`` own all that depends on the policy:
split-array length, each level's entries, column-mask shape, which grower of ``tree.py``
runs, leaf re-constraining, and ``leaf_ids``, the one traversal of binned, float and
blocked rows.
Models and configs store the policy's name (static); ``layout(name)`` gives its object.
"""

import abc
import dataclasses
from collections.abc import Callable
from typing import ClassVar

import jax
import jax.numpy as jnp

from jaxgbt.core.config import ScoreFunction
from jaxgbt.core.constraints import enforce_monotone
from jaxgbt.core.split import SplitParams
from jaxgbt.core.tree import (
    BinnedTree,
    goes_right,
    grow_depthwise_tree,
    grow_lossguide_tree,
    grow_tree,
)

# The test of one split: (values of its feature, its other per-split arrays...) -> bool,
# True where a row takes the right branch.
GoesRight = Callable[..., jax.Array]


@dataclasses.dataclass(frozen=True)
class Layout(abc.ABC):
    """What a growth policy decides; subclasses are stateless, hashable, static.

    The traversal ``leaf_ids`` reads split arrays of shape [*S, M] (S: any tree axes,
    none for one tree) and feature-major rows x_t of shape [F, R], and gives leaf ids
    i32[*S, R]. Binned rows, float rows and blocks of rows differ only in the test.
    """

    name: ClassVar[str]
    # The fit argument that draws columns at this layout's finest grain.
    finest_colsample: ClassVar[str]
    # Whether trees grow leaf by leaf, up to ``max_leaves`` (a fit argument for no other).
    leaf_wise: ClassVar[bool] = False

    @abc.abstractmethod
    def n_splits(self, depth: int) -> int:
        """M, the split entries a tree of depth D stores."""

    @abc.abstractmethod
    def depth_of(self, n_split_entries: int) -> int:
        """D from M, the inverse of ``n_splits``."""

    @abc.abstractmethod
    def level_splits(self, level: int) -> slice:
        """The split entries of a level, in node order: one shared by all its nodes, or
        one per node."""

    @abc.abstractmethod
    def feature_mask_shape(self, depth: int, n_features: int) -> tuple[int, ...]:
        """The shape of the bool masks of the features a tree's splits may use."""

    @abc.abstractmethod
    def grow(self, bins: jax.Array, gh: jax.Array, params: SplitParams, depth: int,
             n_bins: int, axis_name: str | None = None, level_allowed: jax.Array | None = None,
             interaction_sets: jax.Array | None = None, monotone: jax.Array | None = None,
             bin_groups=None, sparse_group=None, entries=None, max_leaves: int | None = None,
             score_function: ScoreFunction = "l2", missing_values: bool = True
             ) -> tuple[BinnedTree, jax.Array, tuple | None]:
        """One tree (args as ``tree.grow_tree``, ``level_allowed`` of the shape
        ``feature_mask_shape`` gives; ``max_leaves``, static, read by leaf-wise growth
        alone): (tree, leaf ids i32[N], leaf bounds or None)."""

    @abc.abstractmethod
    def constrain_leaves(self, tree: BinnedTree, leaf_bounds, monotone) -> BinnedTree:
        """The tree with its leaf values made monotone again (after they were refreshed)."""

    @abc.abstractmethod
    def leaf_ids(self, x_t: jax.Array, splits: tuple[jax.Array, ...], depth: int,
                 right: GoesRight) -> jax.Array:
        """i32[*S, R]: the leaf each row reaches in each tree, the first level's answer
        in the high bit of the leaf id.

        Args:
          x_t: [F, R], the rows feature-major.
          splits: the trees' per-split arrays [*S, M], the feature i32 first.
          depth: D (static).
          right: the split test, ``right(values, *other split arrays' entries)``, with the
            values of the split's feature and the entries broadcast against them.
        """

    def leaf_from_bins(self, bins: jax.Array, tree: BinnedTree, n_bins: int) -> jax.Array:
        """i32[N]: each row's leaf in one binned tree, from binned features u8[F, N]
        (bin B - 1 is the missing bin)."""

        def right(column, split_bin, default_left):
            return goes_right(column, split_bin, default_left, n_bins - 1)

        return self.leaf_ids(bins, (tree.feature, tree.split_bin, tree.default_left),
                             self.depth_of(tree.feature.shape[-1]), right)


@dataclasses.dataclass(frozen=True)
class Oblivious(Layout):
    """One split per level, shared by all its nodes (CatBoost's symmetric trees): M = D."""

    name: ClassVar[str] = "oblivious"
    finest_colsample: ClassVar[str] = "colsample_bylevel"

    def n_splits(self, depth: int) -> int:
        return depth

    def depth_of(self, n_split_entries: int) -> int:
        return n_split_entries

    def level_splits(self, level: int) -> slice:
        return slice(level, level + 1)

    def feature_mask_shape(self, depth: int, n_features: int) -> tuple[int, ...]:
        return (depth, n_features)

    def grow(self, bins, gh, params, depth, n_bins, axis_name=None, level_allowed=None,
             interaction_sets=None, monotone=None, bin_groups=None, sparse_group=None,
             entries=None, max_leaves=None, score_function="l2", missing_values=True):
        tree, leaf = grow_tree(bins, gh, params, depth, n_bins, axis_name, level_allowed,
                               interaction_sets, monotone, bin_groups, sparse_group, entries,
                               score_function, missing_values=missing_values)
        return tree, leaf, None

    def constrain_leaves(self, tree, leaf_bounds, monotone):
        if monotone is None:
            return tree
        return tree._replace(leaf_value=enforce_monotone(tree.leaf_value, tree.feature,
                                                         tree.gain > 0, monotone))

    def leaf_ids(self, x_t, splits, depth, right):
        # No answer depends on another, so every level is tested at once: one gather of
        # whole rows of x_t, [*S, D, R], and leaf = sum_d right_d * 2**(D - 1 - d).
        feature, *others = splits
        goes = right(x_t[feature], *(a[..., None] for a in others))  # [*S, D, R]
        place = 2 ** jnp.arange(depth - 1, -1, -1, dtype=jnp.int32)  # first level = high bit
        place = place.reshape((1,) * (goes.ndim - 2) + (depth, 1))
        return jnp.sum(goes.astype(jnp.int32) * place, axis=-2)


@dataclasses.dataclass(frozen=True)
class Depthwise(Layout):
    """One split per node, in heap order (XGBoost's level-wise trees): M = 2**D - 1, node
    j of level d at index 2**d - 1 + j."""

    name: ClassVar[str] = "depthwise"
    finest_colsample: ClassVar[str] = "colsample_bynode"

    def n_splits(self, depth: int) -> int:
        return 2**depth - 1

    def depth_of(self, n_split_entries: int) -> int:
        return (n_split_entries + 1).bit_length() - 1

    def level_splits(self, level: int) -> slice:
        return slice(2**level - 1, 2 ** (level + 1) - 1)

    def feature_mask_shape(self, depth: int, n_features: int) -> tuple[int, ...]:
        return (depth, 2 ** (depth - 1), n_features)

    def grow(self, bins, gh, params, depth, n_bins, axis_name=None, level_allowed=None,
             interaction_sets=None, monotone=None, bin_groups=None, sparse_group=None,
             entries=None, max_leaves=None, score_function="l2", missing_values=True):
        return grow_depthwise_tree(bins, gh, params, depth, n_bins, axis_name, level_allowed,
                                   interaction_sets, monotone, bin_groups, sparse_group,
                                   entries, score_function, missing_values=missing_values)

    def constrain_leaves(self, tree, leaf_bounds, monotone):
        if monotone is None:
            return tree
        return tree._replace(leaf_value=jnp.clip(tree.leaf_value, *leaf_bounds))

    def leaf_ids(self, x_t, splits, depth, right):
        # The first levels (up to ALL_SPLITS_LEVELS) test every split of theirs on its
        # feature's whole row of x_t, tree by tree: a row read at a known place, which
        # XLA:CPU vectorises, where walking node by node gathers four values per row and
        # level. Deeper levels (which would mean thousands of splits) walk the rest.
        # docs/benchmarks.md ("Numbers behind the code") has the measurements.
        top = min(depth, ALL_SPLITS_LEVELS)
        node = _tree_by_tree(lambda tree_splits: _top_node(x_t, tree_splits, top, right),
                             splits, x_t.shape[1:])
        return _walk_levels(x_t, splits, node, range(top, depth), right)


@dataclasses.dataclass(frozen=True)
class Lossguide(Depthwise):
    """Leaf by leaf (LightGBM's best-first growth, XGBoost's ``lossguide``): each split
    goes to the leaf it gains most at, up to ``max_leaves`` leaves and depth D. Stored,
    masked and walked as a depthwise tree whose unsplit nodes pass rows left."""

    name: ClassVar[str] = "lossguide"
    leaf_wise: ClassVar[bool] = True

    def grow(self, bins, gh, params, depth, n_bins, axis_name=None, level_allowed=None,
             interaction_sets=None, monotone=None, bin_groups=None, sparse_group=None,
             entries=None, max_leaves=None, score_function="l2", missing_values=True):
        return grow_lossguide_tree(bins, gh, params, depth, n_bins,
                                   default_max_leaves(depth) if max_leaves is None else max_leaves,
                                   axis_name, level_allowed, interaction_sets, monotone,
                                   bin_groups, sparse_group, entries, score_function,
                                   missing_values=missing_values)


# LightGBM's num_leaves default, within the 2**D leaves of depth D.
MAX_LEAVES = 31


def default_max_leaves(depth: int) -> int:
    """The leaves a leaf-wise tree of depth D grows when ``max_leaves`` is not given."""
    return min(MAX_LEAVES, 2**depth)


# Depthwise trees test every split of their first levels at once (2**6 - 1 = 63 tests a
# row, against 6 levels of gathers). Beyond that the program and its work grow as 2**D:
# at depth 8, 6 levels tested and 2 walked were faster than 7 and 1, and 30x faster
# than all 8 tested (docs/benchmarks.md).
ALL_SPLITS_LEVELS = 6


def _tree_by_tree(one_tree: Callable[[tuple], jax.Array], splits: tuple[jax.Array, ...],
                  rows_shape: tuple[int, ...]) -> jax.Array:
    """i32[*S, R]: ``one_tree`` (one tree's split arrays [M] -> i32[R]) over the tree
    axes S of split arrays [*S, M], one tree after another (``lax.scan``: a tree's row
    reads stay at places known to the compiler, which ``vmap`` would turn into gathers)."""
    tree_axes = splits[0].shape[:-1]
    if not tree_axes:
        return one_tree(splits)
    flat = tuple(a.reshape((-1, a.shape[-1])) for a in splits)
    _, nodes = jax.lax.scan(lambda carry, tree: (carry, one_tree(tree)), None, flat)
    return nodes.reshape(tree_axes + rows_shape)


def _top_node(x_t: jax.Array, splits: tuple[jax.Array, ...], levels: int,
              right: GoesRight) -> jax.Array:
    """i32[R]: the node each row reaches at level ``levels`` (at least 1) of one tree
    (split arrays [M], heap order), from every split above it tested on its whole row.

    Bottom up: a node's offset among its descendants ``levels`` levels down is its
    answer times half their count plus the offset under the child it sends the row to.
    """
    feature, *others = splits
    answers = [right(jax.lax.dynamic_index_in_dim(x_t, feature[entry], 0, keepdims=False),
                     *(a[entry] for a in others))
               for entry in range(2**levels - 1)]
    below = [answer.astype(jnp.int32) for answer in answers[2 ** (levels - 1) - 1:]]
    for level in range(levels - 2, -1, -1):
        first, half = 2**level - 1, 2 ** (levels - 1 - level)
        below = [jnp.where(answers[first + j], half + below[2 * j + 1], below[2 * j])
                 for j in range(2**level)]
    return below[0]


def _walk_levels(x_t: jax.Array, splits: tuple[jax.Array, ...], node: jax.Array,
                 levels: range, right: GoesRight) -> jax.Array:
    """i32[*S, R]: rows walked down ``levels`` from their nodes i32[*S, R] (index within
    the first of those levels): node j of level d reads split 2**d - 1 + j, and its
    children are nodes 2j and 2j + 1 of the level below."""
    feature, *others = splits
    # Index arrays for the tree axes and the rows, broadcast against the nodes.
    trees = tuple(jnp.arange(n).reshape((-1,) + (1,) * (node.ndim - 1 - axis))
                  for axis, n in enumerate(feature.shape[:-1]))
    rows = jnp.arange(x_t.shape[1]).reshape((1,) * (node.ndim - 1) + (-1,))
    for level in levels:
        at = trees + (2**level - 1 + node,)  # each node's split, in its own tree
        goes = right(x_t[feature[at], rows], *(a[at] for a in others))
        node = 2 * node + goes.astype(jnp.int32)
    return node


LAYOUTS: dict[str, Layout] = {"oblivious": Oblivious(), "depthwise": Depthwise(),
                              "lossguide": Lossguide()}
GROW_POLICIES = tuple(LAYOUTS)


def layout(grow_policy: str) -> Layout:
    """The layout of a growth policy's name ("oblivious", "depthwise" or "lossguide")."""
    try:
        return LAYOUTS[grow_policy]
    except KeyError:
        raise ValueError(f"grow_policy={grow_policy!r} is not one of {GROW_POLICIES}.") from None


def n_splits(depth: int, grow_policy: str) -> int:
    """M, the splits a tree of depth D stores: D (oblivious) or 2**D - 1 (depthwise,
    lossguide)."""
    return layout(grow_policy).n_splits(depth)
