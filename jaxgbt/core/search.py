"""One level's split search, built and searched a block of features at a time.

A level's histogram holds F x n x B x 2K floats: at 500 features, 32 nodes and 256 bins,
32 MB, far more than the rows themselves when they are few. Built whole and then
searched, it went through memory several times (zeroed, scattered into, prefix-summed,
scored, reduced). Built and searched one block of features at a time, a block's
histogram stays in cache from its scatter to its argmax, and only the block's best
candidate leaves it (docs/benchmarks.md, "Wide data"). Blocks run one after another in a
``lax.map``; narrow data is one block, with no loop at all.

The blocks' winners are combined by a second argmax over blocks, which keeps the tie
rule of one argmax over every candidate: the lowest feature, then the lowest bin, then
missing-left.
"""

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.histogram import (
    ONE_SCATTER_MAX_ROWS,
    SmallerChildren,
    SparseEntries,
    build_histogram,
    build_sparse_histogram,
    subtracted_histogram,
)
from jaxgbt.core.split import Best, better, rank_of

# Histogram bytes one block may hold. Narrow data stays one block (28 features, 32 nodes,
# 256 bins: 1.8 MB), with no loop; at 500 features, blocks of 1 MiB and 4 MiB searched a
# level equally fast (docs/benchmarks.md, "Wide data").
SEARCH_BLOCK_BYTES = 2**22

# The same for few rows on CPU (one scatter's worth: ``ONE_SCATTER_MAX_ROWS``), where the
# search is most of a level, once the histogram is larger than ``SEARCH_BLOCK_BYTES``. On
# an AMD EPYC without AVX-512 (family 23: 512 KiB of L2 a core, 8 MiB of L3) warm fits
# took 6-22% less time so (median ms a tree at 2,000 x 500 binary 148 -> 139, 2,000 x
# 180 binary 55 -> 47, three classes 197 -> 155); 1 MiB blocks at 20,000 x 180 took 11%
# more, and narrow histograms cut in two (2,000 x 20) 19-54% more, so they keep theirs.
# On the AVX-512 kind, 1 MiB and 4 MiB searched a level of 2,000 x 500 equally fast
# (docs/benchmarks.md, "One name, two processors").
FEW_ROWS_SEARCH_BLOCK_BYTES = 2**20


def features_per_block(n_features: int, n_nodes: int, n_bins: int, n_columns: int,
                       sharded: bool, n_rows: int | None = None) -> int:
    """Features per block: as many as fit ``SEARCH_BLOCK_BYTES`` of histogram (for
    ``n_rows`` up to ``ONE_SCATTER_MAX_ROWS`` on CPU, ``FEW_ROWS_SEARCH_BLOCK_BYTES``
    where the whole is larger than ``SEARCH_BLOCK_BYTES``), spread evenly over the fewest
    blocks; all of them when rows are split over devices (one all-reduce of the level's
    histogram, not one per block)."""
    if sharded:
        return n_features
    per_feature = n_nodes * n_bins * n_columns * 4
    budget = SEARCH_BLOCK_BYTES
    if (n_rows is not None and n_rows <= ONE_SCATTER_MAX_ROWS
            and n_features * per_feature > SEARCH_BLOCK_BYTES
            and jax.default_backend() == "cpu"):
        budget = FEW_ROWS_SEARCH_BLOCK_BYTES
    most = max(1, budget // per_feature)
    n_blocks = -(-n_features // most)
    return -(-n_features // n_blocks)


class FeatureGroup(NamedTuple):
    """Features searched with the same number of bins.

    Attributes:
      columns: u8[F_g, N], their binned columns, the missing bin moved to bin B_g - 1;
        for sparse features, their ``histogram.SparseEntries``.
      n_bins: B_g (static).
      features: their indices among every feature (a static NumPy array), or None for
        every feature in order.
      zero_bins: for sparse features, each one's bin of 0 (a static NumPy array);
        else None.
      n_candidates: the bins a split may end at, the first of the B_g - 1 value bins
        (static; ``data.binning.search_candidates``), or None for all of them. Past
        them a candidate divides a feature's rows as one before it does, or not at
        all; few-valued features in a power-of-two histogram (dense 0/1 columns
        without missing values: 4 bins, one candidate) are scored that much less.
      bundle_slots: for sparse features summed in bundles, where each one's bins lie
        in its bundle's histogram (``SparseGroup.bundle_slots``, static); else None.
    """

    columns: jax.Array | SparseEntries
    n_bins: int
    features: np.ndarray | None
    zero_bins: np.ndarray | None = None
    n_candidates: int | None = None
    bundle_slots: tuple[np.ndarray, int] | None = None


def feature_groups(bins: jax.Array, n_bins: int, bin_groups, sparse_group=None,
                   entries: SparseEntries | None = None) -> list[FeatureGroup]:
    """The groups a tree's levels search: every feature at B, or those of
    ``bin_groups`` (``BoostConfig.bin_groups``: (B_g, feature indices, candidates)
    triples), and the sparse features of ``sparse_group`` (``BoostConfig.sparse_group``),
    whose histograms are summed from their ``entries`` (``TrainData.entries``)."""
    groups = []
    if sparse_group is not None:
        groups.append(FeatureGroup(entries, sparse_group.n_bins,
                                   np.asarray(sparse_group.features, np.int32),
                                   np.asarray(sparse_group.zero_bins, np.int32),
                                   sparse_group.n_candidates,
                                   sparse_group.bundle_slots() if sparse_group.bundles
                                   else None))
    if bin_groups is None and sparse_group is None:
        return [FeatureGroup(bins, n_bins, None)]
    if bin_groups is None:  # the features that are not sparse, at B
        dense = np.setdiff1d(np.arange(bins.shape[0]), sparse_group.features)
        bin_groups = ((n_bins, tuple(int(f) for f in dense), None),) if dense.size else ()
    for width, features, n_candidates in bin_groups:
        if width == n_bins and features == tuple(range(bins.shape[0])):
            groups.append(FeatureGroup(bins, n_bins, None, None, n_candidates))  # no copy
            continue
        indices = np.asarray(features, np.int32)
        columns = jnp.take(bins, indices, axis=0)
        # Value bins below B_g - 1 stay; the missing bin B - 1 becomes B_g - 1.
        groups.append(FeatureGroup(jnp.minimum(columns, width - 1).astype(bins.dtype)
                                   if width < n_bins else columns, width, indices, None,
                                   n_candidates))
    return groups


def search_level(groups: list[FeatureGroup], node: jax.Array, gh: jax.Array, n_nodes: int,
                 search: Callable[[jax.Array, jax.Array, jax.Array], Best],
                 axis_name: str | None = None) -> Best:
    """The best candidate of one level, over every feature.

    Args:
      groups: the features, in groups of one bin count (``feature_groups``).
      node: i32[N], each row's node, in [0, n_nodes).
      gh: f32[N, 2K], weighted gradients then Hessians.
      n_nodes: nodes the histograms hold (static).
      search: ``search(hist, features, counted, n_candidates) -> Best`` for one
        block: hist f32[b, n_nodes, B_g, 2K] of features ``features`` i32[b] (indices
        among every feature), the group's ``n_candidates`` (static); a feature with
        ``counted`` False belongs to an earlier block and must not win here.
      axis_name: the mesh axis to sum histograms over, or None on one device.

    Returns:
      The best ``Best`` over every block of every group: the largest gain, ties to the
      lowest candidate index (as one argmax over every candidate).
    """
    bests = [_search_group(group, node, gh, n_nodes, search, axis_name) for group in groups]
    return functools.reduce(better, bests)


def _search_group(group: FeatureGroup, node: jax.Array, gh: jax.Array, n_nodes: int,
                  search, axis_name) -> Best:
    """The best candidate among one group's features, a block of them at a time."""
    if group.zero_bins is not None:  # sparse features: one block
        hist = build_sparse_histogram(group.columns, node, gh, n_nodes, group.n_bins,
                                      jnp.asarray(group.zero_bins), group.bundle_slots)
        if axis_name is not None:
            hist = jax.lax.psum(hist, axis_name)
        return search(hist, jnp.asarray(group.features),
                      jnp.ones(group.features.size, bool), group.n_candidates)
    n_features, n_bins = group.columns.shape[0], group.n_bins
    block = features_per_block(n_features, n_nodes, n_bins, gh.shape[1], axis_name is not None,
                               gh.shape[0])
    ids = (jnp.arange(n_features, dtype=jnp.int32) if group.features is None
           else jnp.asarray(group.features))

    def histogram(columns):
        hist = build_histogram(columns, node, gh, n_nodes, n_bins, axis_name is not None)
        return hist if axis_name is None else jax.lax.psum(hist, axis_name)

    if block == n_features:
        return search(histogram(group.columns), ids, jnp.ones(n_features, bool),
                      group.n_candidates)

    def one_block(i):
        # The last block starts early enough to end at the last feature; the features
        # it shares with the block before it were searched there.
        first = jnp.minimum(i * block, n_features - block)
        columns = jax.lax.dynamic_slice_in_dim(group.columns, first, block, axis=0)
        return search(histogram(columns), jax.lax.dynamic_slice_in_dim(ids, first, block),
                      first + jnp.arange(block) >= i * block, group.n_candidates)

    bests = jax.lax.map(one_block, jnp.arange(-(-n_features // block)))
    winner = jnp.argmax(rank_of(bests), axis=0)  # the first block holding the largest
    return jax.tree.map(lambda blocks: _pick(blocks, winner), bests)


def search_level_subtracting(groups: list[FeatureGroup], node: jax.Array, gh: jax.Array,
                             n_nodes: int, search, smaller: SmallerChildren,
                             parents: tuple[jax.Array, ...], keep: bool,
                             first_level: jax.Array | bool = False,
                             axis_name: str | None = None
                             ) -> tuple[Best, tuple[jax.Array, ...]]:
    """``search_level`` with the histograms of the level above: each dense group's
    histogram is its smaller children's, summed over their rows alone, and their
    siblings' by subtraction (``histogram.subtracted_histogram``). Under a mesh
    (``axis_name``) every device keeps and subtracts its own rows' histograms, and the
    search sees their sum.

    Args:
      groups, node, gh, n_nodes, search: as ``search_level`` (dense groups only).
      smaller: the level's ``histogram.SmallerChildren``.
      parents: per group, f32[F_g, P, B_g, 2K], the level above's histograms (P node
        slots, at least n_nodes / 2).
      keep: whether to return this level's histograms for the level below (static).
      first_level: bool[] where the level may be a tree's first, True when it is: its
        histograms are then summed over every row (a ``lax.cond``), and ``parents``
        and ``smaller`` unused. False (static) where it never is.
      axis_name: as ``search_level``.

    Returns:
      The best candidate, and per group ``parents`` with this level's histograms in
      its first min(n_nodes, P) node slots (``parents`` as given where not ``keep``).
    """
    bests, kept = [], []
    for group, parent in zip(groups, parents, strict=True):
        best, hist = _search_group_subtracting(group, node, gh, n_nodes, search, smaller,
                                               parent, keep, first_level, axis_name)
        bests.append(best)
        kept.append(hist)
    return functools.reduce(better, bests), tuple(kept)


def _search_group_subtracting(group: FeatureGroup, node, gh, n_nodes: int, search,
                              smaller: SmallerChildren, parent: jax.Array,
                              keep: bool, first_level: jax.Array | bool, axis_name):
    """``_search_group`` with subtraction, returning the kept histograms too."""
    n_features, n_bins = group.columns.shape[0], group.n_bins
    sharded = axis_name is not None
    block = features_per_block(n_features, n_nodes, n_bins, gh.shape[1], sharded, gh.shape[0])
    ids = (jnp.arange(n_features, dtype=jnp.int32) if group.features is None
           else jnp.asarray(group.features))
    n_kept = min(n_nodes, parent.shape[1])

    def histogram(first, columns):
        above = jax.lax.dynamic_slice_in_dim(parent, first, columns.shape[0], axis=0)
        above = above[:, :n_nodes // 2]
        if first_level is False:
            return subtracted_histogram(columns, smaller, above, n_bins, sharded)
        return jax.lax.cond(first_level,
                            lambda c, a: build_histogram(c, node, gh, n_nodes, n_bins, sharded),
                            lambda c, a: subtracted_histogram(c, smaller, a, n_bins, sharded),
                            columns, above)

    def summed(hist):
        return hist if axis_name is None else jax.lax.psum(hist, axis_name)

    def kept_with(kept, first, hist):
        if not keep:
            return kept
        return jax.lax.dynamic_update_slice_in_dim(kept, hist[:, :n_kept].astype(kept.dtype),
                                                   first, axis=0)

    if block == n_features:
        hist = histogram(0, group.columns)
        return (search(summed(hist), ids, jnp.ones(n_features, bool), group.n_candidates),
                kept_with(parent, 0, hist))

    def one_block(kept, i):
        first = jnp.minimum(i * block, n_features - block)
        columns = jax.lax.dynamic_slice_in_dim(group.columns, first, block, axis=0)
        hist = histogram(first, columns)
        best = search(summed(hist), jax.lax.dynamic_slice_in_dim(ids, first, block),
                      first + jnp.arange(block) >= i * block, group.n_candidates)
        return kept_with(kept, first, hist), best

    kept, bests = jax.lax.scan(one_block, parent, jnp.arange(-(-n_features // block)))
    winner = jnp.argmax(rank_of(bests), axis=0)
    return jax.tree.map(lambda blocks: _pick(blocks, winner), bests), kept


def _pick(blocks: jax.Array, winner: jax.Array) -> jax.Array:
    """blocks[winner] per entry: blocks [n_blocks, *S, ...], winner i32[*S]."""
    index = winner.reshape((1, *winner.shape) + (1,) * (blocks.ndim - 1 - winner.ndim))
    return jnp.take_along_axis(blocks, index, axis=0)[0]
