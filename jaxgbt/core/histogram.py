"""Gradient histograms over (feature, node, bin) with ``jax.ops.segment_sum``."""

import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.split import sum_by_halving

# Features summed per step of a ``lax.scan`` over features. Within a step each feature
# is its own segment_sum, and XLA:CPU's runtime runs a step's scatters side by side on
# its thread pool only when the step holds enough of them: with two features a step
# (one per core on 2 cores), fits of 20,000 to 1,000,000 rows kept 1.3-1.5 of the 2
# cores busy; with 14 to 16, 1.6-1.9, and took 7-30% less time; 8 a step gained
# nothing (docs/benchmarks.md, "Sixteen features a step"). Steps of 9 and 10 (17 and 20
# features spread over two) were 14-25% slower than one step of all of them, steps of 12
# as fast as one of 24, and one step of 28 5-12% slower than two of 14 ("Steps of 16
# to 24 features"). Each scatter's segment ids are an int32 array of a
# block of rows that XLA materializes, so a step holds up to 1 MB of them per feature
# (CPU_ROWS_PER_BLOCK rows); before the row blocks, steps of all 28 features held 112 MB
# at 1,000,000 rows.
# Every scatter of a step is compiled on its own, so the step also bounds the program.
# Few rows go through one scatter instead (ONE_SCATTER_MAX_ROWS). Accelerators run one
# scatter at a time whatever the step.
MAX_FEATURES_PER_STEP = 32
CPU_MIN_FEATURES_PER_STEP = 16
CPU_MAX_FEATURES_PER_STEP = 24


def features_per_step(n_features: int, sharded: bool = False) -> int:
    """Features one step of the histogram's scan sums, for the default backend.

    On CPU, every step holds at least ``CPU_MIN_FEATURES_PER_STEP`` features (or one per
    core, where there are more cores, up to ``MAX_FEATURES_PER_STEP``) unless there are
    fewer, and at most ``CPU_MAX_FEATURES_PER_STEP`` (or that per-core count), in as many
    steps as divide the features most evenly: 17 to 24 features are one step, 28 two of
    14, 180 ten of 18 (not eleven of 17, whose last step would sum 7 features again:
    docs/benchmarks.md, "Steps that divide the features"), 500 twenty-five of 20. With
    the rows ``sharded`` over a mesh of CPU devices every core already runs a device's program,
    and a step holds one feature per core (1,000,000 x 28 rows on two devices: 0.079 s
    per tree so, 0.084 with 14 a step); accelerators take up to
    ``MAX_FEATURES_PER_STEP``. The features are spread evenly over the steps, so that
    the last step repeats as few features as it can."""
    n_features = max(n_features, 1)
    if jax.default_backend() != "cpu":
        n_steps = -(-n_features // MAX_FEATURES_PER_STEP)
    elif sharded:
        n_steps = -(-n_features // min(os.cpu_count() or 1, MAX_FEATURES_PER_STEP))
    else:
        least = max(CPU_MIN_FEATURES_PER_STEP, min(os.cpu_count() or 1, MAX_FEATURES_PER_STEP))
        most = max(CPU_MAX_FEATURES_PER_STEP, least)
        # From the fewest steps of at most `most` features to the most of at least
        # `least`, the count whose last step repeats the fewest features (ties: the
        # smaller steps, which compile faster).
        fewest = -(-n_features // most)
        n_steps = min(range(fewest, max(fewest, n_features // least) + 1),
                      key=lambda n: (n * -(-n_features // n) - n_features, -n))
    return -(-n_features // n_steps)


# On CPU the rows are summed in blocks of at most this many, every feature of a block
# before the next block: each feature's scatter reads the block's g/h and node ids again,
# and for a block this size (3 MB, and 1 MB of segment ids per feature of a step) they
# are still in the cache; over all rows at once they come from memory
# (docs/benchmarks.md).
CPU_ROWS_PER_BLOCK = 2**18


def rows_per_block(n_rows: int) -> int:
    """Rows summed per block: N, or on CPU N split evenly into blocks of at most
    ``CPU_ROWS_PER_BLOCK``, each of an even number of rows (see ``build_histogram``)."""
    if jax.default_backend() != "cpu" or n_rows <= CPU_ROWS_PER_BLOCK:
        return n_rows
    n_blocks = -(-n_rows // CPU_ROWS_PER_BLOCK)
    block = -(-n_rows // n_blocks)
    return block + block % 2


# Up to this many rows, every feature's sums are one segment_sum over (feature, node,
# bin) segments: the per-feature scatters' fixed costs outweighed their running side by
# side on the CPU's cores, and the one scatter compiles in a fraction of the time of F
# unrolled ones (docs/benchmarks.md, "Wide data"). The sums are the same, in the same
# row order.
ONE_SCATTER_MAX_ROWS = 4096


def _one_scatter(bins: jax.Array, node: jax.Array, gh: jax.Array, n_nodes: int,
                 n_bins: int) -> jax.Array:
    """f32[F, n_nodes * B, C]: every feature's sums as one segment_sum (few rows)."""
    n_features, n_rows = bins.shape
    n_segments = n_nodes * n_bins
    segment = ((jnp.arange(n_features, dtype=jnp.int32) * n_segments)[:, None]
               + (node * n_bins)[None, :] + bins.astype(jnp.int32))
    data = jnp.broadcast_to(gh[None], (n_features, n_rows, gh.shape[1]))
    sums = jax.ops.segment_sum(data.reshape(-1, gh.shape[1]), segment.reshape(-1),
                               num_segments=n_features * n_segments)
    return sums.reshape(n_features, n_segments, gh.shape[1])


def _add_block(hist: jax.Array, bins: jax.Array, first_row, node_offset: jax.Array,
               gh: jax.Array, step: int) -> jax.Array:
    """``hist`` plus the sums of g and h of one block of rows, per feature and segment.

    Args:
      hist: f32[F, S, C], the sums so far (S = n_nodes * B segments).
      bins: u8[F, N], all rows' binned features; the block is rows
        [first_row, first_row + R), read in place (no copy of the block's bins).
      first_row: i32[] or int, the block's first row.
      node_offset: i32[R], each row's node times B (its first segment).
      gh: f32[R, C], the weighted g and h of the block's rows (C = 2K).
      step: features per step (``features_per_step``; static).

    Returns:
      f32[F, S, C].

    Features go in steps of ``step``: within a step each feature is its own
    segment_sum, and each feature's output (S * C floats) is small enough to stay in
    cache while the rows stream through it.
    """
    n_features = bins.shape[0]
    n_segments = hist.shape[1]
    n_rows = node_offset.shape[0]

    def sums(columns):
        return jnp.stack([
            jax.ops.segment_sum(gh, node_offset + column.astype(jnp.int32),
                                num_segments=n_segments)
            for column in columns
        ])

    n_steps = -(-n_features // step)
    if n_steps == 1:
        return hist + sums(list(jax.lax.dynamic_slice_in_dim(bins, first_row, n_rows, axis=1)))

    def one_step(hist, i):
        # The last step starts early enough to stay inside the features; the features it
        # shares with the step before were added there, so here they add nothing.
        first = jnp.minimum(i * step, n_features - step)
        columns = jax.lax.dynamic_slice(bins, (first, first_row), (step, n_rows))
        added = jnp.where((first + jnp.arange(step) < i * step)[:, None, None], 0.0,
                          sums(list(columns)))
        so_far = jax.lax.dynamic_slice_in_dim(hist, first, step, axis=0)
        return jax.lax.dynamic_update_slice_in_dim(hist, so_far + added, first, axis=0), None

    hist, _ = jax.lax.scan(one_step, hist, jnp.arange(n_steps))
    return hist


def padded_columns(n_columns: int) -> int:
    """The g/h columns each scatter update carries: on CPU more than two are padded
    with zeros to a multiple of four. XLA:CPU's scatter updated rows of 8 or 12 floats
    faster than rows of 6 or 10 (0.84-1.2 against 1.3 ns per (row, feature) at 200,000
    rows: docs/benchmarks.md, "Scatter rows of four floats")."""
    if jax.default_backend() != "cpu" or n_columns <= 2:
        return n_columns
    return -(-n_columns // 4) * 4


def build_histogram(bins: jax.Array, node: jax.Array, gh: jax.Array, n_nodes: int,
                    n_bins: int, sharded: bool = False) -> jax.Array:
    """Sums of g and h per feature, node and bin.

    Args:
      bins: u8[F, N], feature-major binned data.
      node: i32[N], each row's node at the current level, in [0, n_nodes).
      gh: f32[N, C], the weighted g and h of each row side by side (C = 2K).
      n_nodes: number of nodes the histogram holds (static).
      n_bins: B (static).
      sharded: whether the rows are split over a mesh of devices (``features_per_step``;
        static).

    Returns:
      f32[F, n_nodes, B, C].

    Up to ``ONE_SCATTER_MAX_ROWS`` rows, one segment_sum over every feature. Beyond, the
    rows are summed in blocks (``rows_per_block``), each added to the running sums in
    place. Under ``jax.vmap`` over models on CPU this is not batched: the boosting
    round around it runs one model after another (``engine.batching.one_model_at_a_time``).

    On CPU each row's g and h are added as ``padded_columns(C)`` floats, zeros after C.

    Sums over an odd number of rows were slower per row than over an even one on
    XLA:CPU (docs/benchmarks.md). So blocks are even, and an odd N is summed as its first
    N - 1 rows and then its last row: the same additions in the same order.
    """
    n_features, n_rows = bins.shape
    n_columns = gh.shape[1]
    padded = padded_columns(n_columns)
    if padded != n_columns:
        gh = jnp.pad(gh, ((0, 0), (0, padded - n_columns)))
        return build_histogram(bins, node, gh, n_nodes, n_bins, sharded)[..., :n_columns]
    if n_rows <= ONE_SCATTER_MAX_ROWS:
        return _one_scatter(bins, node, gh, n_nodes, n_bins).reshape(
            n_features, n_nodes, n_bins, n_columns)
    empty = jnp.zeros((n_features, n_nodes * n_bins, n_columns), gh.dtype)
    block = rows_per_block(n_rows)
    step = features_per_step(n_features, sharded)
    if block == n_rows and n_rows % 2 == 1 and n_rows > 1:
        hist = _add_block(empty, bins, 0, node[:-1] * n_bins, gh[:-1], step)
        last_segment = node[-1] * n_bins + bins[:, -1].astype(jnp.int32)
        hist = hist.at[jnp.arange(n_features), last_segment].add(gh[-1])
    elif block == n_rows:
        hist = _add_block(empty, bins, 0, node * n_bins, gh, step)
    else:
        def one_block(hist, i):
            # The last block starts early enough to end at the last row; the rows it
            # shares with the block before it count there, so here their g and h are 0.
            first = jnp.minimum(i * block, n_rows - block)
            counted = first + jnp.arange(block) < i * block
            block_gh = jnp.where(counted[:, None], 0.0,
                                 jax.lax.dynamic_slice_in_dim(gh, first, block)).astype(gh.dtype)
            offset = jax.lax.dynamic_slice_in_dim(node, first, block) * n_bins
            return _add_block(hist, bins, first, offset, block_gh, step), None

        hist, _ = jax.lax.scan(one_block, empty, jnp.arange(-(-n_rows // block)))
    return hist.reshape(n_features, n_nodes, n_bins, n_columns)


class SmallerChildren(NamedTuple):
    """The rows of every node's smaller child at one level, in row order, for histogram
    subtraction (LightGBM's: the smaller child's histogram is summed, its sibling's is
    its parent's less it).

    Attributes:
      rows: i32[R], the row in each slot; R = ``smaller_children_slots(N)``. Slot j past
        the rows of the smaller children holds row j, with g and h 0 (rows spread over
        the histogram's cells: all in one cell they would be a chain of dependent
        additions).
      parent: i32[R], each slot's row's node at the level above.
      gh: f32[R, C], each slot's row's g and h (0 in the slots past the smaller
        children's rows).
      right: bool[P], whether parent p's smaller child is its right one (P = n_nodes / 2).
    """

    rows: jax.Array
    parent: jax.Array
    gh: jax.Array
    right: jax.Array


def smaller_children_slots(n_rows: int) -> int:
    """R: slots enough for the rows of every node's smaller child (a smaller child holds
    at most half its parent's rows, so all of them at most N / 2), rounded up to an
    even number (``build_histogram`` sums even counts faster)."""
    half = n_rows // 2
    return min(n_rows, half + half % 2)


def smaller_children(node: jax.Array, gh: jax.Array, n_nodes: int) -> SmallerChildren:
    """Each node's smaller child's rows, gathered into ``smaller_children_slots(N)`` slots.

    Args:
      node: i32[N], each row's node at this level, in [0, n_nodes): node 2p and 2p + 1
        are the children of node p of the level above.
      gh: f32[N, C], each row's weighted g and h.
      n_nodes: the level's node slots (static, even).

    The rows keep their order: a bin's sums over them add the same values in the same
    order as the parent's sums over the same rows did.
    """
    n_rows = node.shape[0]
    n_slots = smaller_children_slots(n_rows)
    rows_in = jax.ops.segment_sum(jnp.ones(n_rows, jnp.int32), node, num_segments=n_nodes)
    right = rows_in[1::2] < rows_in[0::2]
    in_smaller = (node % 2 == 1) == right[node // 2]
    # An associative scan: XLA:CPU's cumsum was 2.6x slower over 200,000 rows.
    position = jax.lax.associative_scan(jnp.add, in_smaller.astype(jnp.int32)) - 1
    # Rows not in a smaller child all go to one spare slot, cut off after.
    slot = jnp.where(in_smaller, position, n_slots)
    rows = jnp.arange(n_slots + 1, dtype=jnp.int32).at[slot].set(
        jnp.arange(n_rows, dtype=jnp.int32), mode="promise_in_bounds")[:n_slots]
    used = jnp.arange(n_slots) <= position[-1]
    return SmallerChildren(rows, node[rows] // 2,
                           jnp.where(used[:, None], gh[rows], 0.0).astype(gh.dtype), right)


def subtracted_histogram(bins: jax.Array, smaller: SmallerChildren, parent_hist: jax.Array,
                         n_bins: int, sharded: bool = False) -> jax.Array:
    """A level's sums of g and h from its parents': the smaller children's summed,
    their siblings' their parent's less theirs.

    Args:
      bins: u8[F, N], feature-major binned data (all rows).
      smaller: the level's ``SmallerChildren``.
      parent_hist: f32[F, P, B, C], the level above's sums (``build_histogram``'s).
      n_bins: B (static).
      sharded: as ``build_histogram`` (static). Under a mesh each device subtracts
        its own rows' sums, its smaller children chosen by its own rows.

    Returns:
      f32[F, 2P, B, C], ``build_histogram`` of the level's 2P nodes up to float
      rounding. A bin with no rows in a node is 0 wherever it had none in the parent
      either; where its parent's rows all went to the smaller child, it holds the
      rounding of a difference (when the parent's sums were themselves a difference or
      added in other blocks of rows), which no gain notices.
    """
    n_parents = parent_hist.shape[1]
    columns = jnp.take(bins, smaller.rows, axis=1)
    small = build_histogram(columns, smaller.parent, smaller.gh, n_parents, n_bins, sharded)
    sibling = parent_hist - small
    right = smaller.right[None, :, None, None]
    left_child = jnp.where(right, sibling, small)
    right_child = jnp.where(right, small, sibling)
    return jnp.stack([left_child, right_child], axis=2).reshape(
        bins.shape[0], 2 * n_parents, n_bins, parent_hist.shape[-1])


class SparseEntries(NamedTuple):
    """The (row, feature) pairs of sparse features whose bin is not the feature's bin
    of 0, feature by feature in blocks of ``ENTRY_FEATURE_BLOCK``
    (``data.binning.sparse_entries``).

    Attributes:
      rows: i32[E], each entry's row.
      features: i32[E], its feature's index within the sparse group; -1 for the padding
        entries at the end (E is fixed before binning, from X's non-zeros).
      bins: u8[E], its bin (the missing bin moved to the group's last bin).
      slot_rows: i32[S] or None: when a tree is grown on S drawn row slots
        (``sampling.drawn_rows``), each slot's row.
      row_axis: [N, 0] with ``slot_rows``: no values, its shape gives the rows N.
      gh: f32[E, C'] or None: each entry's row's g and h in the tree being grown
        (``with_gradients``), read once per tree rather than once per level, C' =
        ``padded_columns(C)`` with zeros after C; with ``bundles``, f32[N, C], each
        row's.
      bundles: u8[G, N] or None: the group's features bundled (``SparseGroup.bundles``),
        each row's value in each bundle (``data.binning.exclusive_bundles``); the
        entries are then one padding entry.
    """

    rows: jax.Array
    features: jax.Array
    bins: jax.Array
    slot_rows: jax.Array | None = None
    row_axis: jax.Array | None = None
    gh: jax.Array | None = None
    bundles: jax.Array | None = None


def with_gradients(entries: SparseEntries, gh: jax.Array) -> SparseEntries:
    """``entries`` with each entry's g and h, from ``gh`` f32[N, C] (or f32[S, C] of the
    slots of ``entries.slot_rows``: a row drawn into several slots adds them up)."""
    if entries.slot_rows is not None:
        gh = jax.ops.segment_sum(gh, entries.slot_rows, num_segments=entries.row_axis.shape[0])
    if entries.bundles is not None:
        return entries._replace(gh=gh)
    # Each entry's row of g and h padded as build_histogram pads its rows (six columns
    # to eight: a scatter adds rows of a multiple of four floats faster), once a tree.
    padded = padded_columns(gh.shape[1])
    return entries._replace(gh=jnp.pad(gh, ((0, 0), (0, padded - gh.shape[1])))[entries.rows])


# Entries are ordered by (feature // ENTRY_FEATURE_BLOCK, row, feature): the additions
# of a stretch of entries go to the histograms of a few features, which stay in cache,
# and follow no single feature's rows, which would add one after another into the same
# few (node, bin) cells at the first levels (docs/benchmarks.md, "Sparse features").
ENTRY_FEATURE_BLOCK = 8
# Sparse histograms of up to this many bins sum each node's bins by halving
# (``split.sum_by_halving``); wider ones compiled longer that way and ran no faster.
_HALVING_MAX_BINS = 16
# Padding entries go to one of this many spare segments, by position: all of them into
# one would be a chain of dependent additions.
_SPARE_SEGMENTS = 256


def build_sparse_histogram(entries: SparseEntries, node: jax.Array, gh: jax.Array,
                           n_nodes: int, n_bins: int, zero_bins: jax.Array,
                           bundle_slots: tuple[np.ndarray, int] | None = None) -> jax.Array:
    """Sums of g and h per feature, node and bin of features stored as entries.

    Most rows of a sparse feature sit in one bin (the bin of 0). Only the other rows
    are summed, one ``segment_sum`` over every entry; each feature's bin of 0 is then
    its node's total less its other bins (LightGBM's most-frequent-bin rule), so the
    work is the entries', not F x N.

    Args:
      entries: the group's ``SparseEntries``, with their g and h (``with_gradients``).
      node: i32[N] (or i32[S] of the slots of ``entries.slot_rows``: a row drawn into
        several slots is in the same node in each), each row's node at the current
        level, in [0, n_nodes).
      gh: f32[N, C] (or f32[S, C]), the weighted g and h of each row (C = 2K).
      n_nodes, n_bins: the histogram's nodes and bins (static).
      zero_bins: i32[F_s], each feature's bin of 0.
      bundle_slots: with ``entries.bundles``, ``SparseGroup.bundle_slots()`` (static).

    Returns:
      f32[F_s, n_nodes, B, C], equal to ``build_histogram`` of the dense columns up to
      float reassociation.

    Bundled features (``entries.bundles``) are summed as dense columns, one per bundle,
    and each feature's bins read from its bundle's: the same rows in the same order as
    its entries, so the same sums.
    """
    totals = jax.ops.segment_sum(gh, node, num_segments=n_nodes)  # [n_nodes, C]
    if entries.slot_rows is not None:  # from the drawn slots back to the rows
        node = jnp.zeros(entries.row_axis.shape[0], node.dtype).at[entries.slot_rows].set(node)
    if entries.bundles is not None:
        return _with_zero_bins(_unbundled(entries, node, n_nodes, n_bins, *bundle_slots),
                               totals, zero_bins)
    n_features = zero_bins.shape[0]
    n_segments = n_features * n_nodes * n_bins
    # An entry's segment is its offset, which is the same at every level (XLA computes
    # it once a tree, outside the levels' loop), plus its row's node times B: a level
    # reads two i32 an entry.
    # Padding entries' offsets start past the histogram, and their nodes' terms keep
    # them there, in spare segments sliced off below.
    spare = n_segments + jnp.arange(entries.rows.shape[0], dtype=jnp.int32) % _SPARE_SEGMENTS
    offset = jnp.where(entries.features >= 0,
                       entries.features * (n_nodes * n_bins) + entries.bins.astype(jnp.int32),
                       spare)
    segment = offset + node[entries.rows] * n_bins
    hist = jax.ops.segment_sum(entries.gh, segment,
                               num_segments=n_segments + _SPARE_SEGMENTS + n_nodes * n_bins)
    hist = hist[:n_segments, :gh.shape[1]].reshape(n_features, n_nodes, n_bins, gh.shape[1])
    return _with_zero_bins(hist, totals, zero_bins)


def _unbundled(entries: SparseEntries, node: jax.Array, n_nodes: int, n_bins: int,
               slots: np.ndarray, width: int) -> jax.Array:
    """f32[F_s, n_nodes, B_s, C]: the bundled features' sums, their bins of 0 empty."""
    bundled = build_histogram(entries.bundles, node, entries.gh, n_nodes, width)
    by_bin = jnp.moveaxis(bundled, 1, 0).reshape(n_nodes, -1, bundled.shape[-1])  # [n, G W, C]
    read = jnp.take(by_bin, jnp.asarray(slots[:, None] + np.arange(n_bins)), axis=1)
    return jnp.moveaxis(read, 0, 1)  # [F_s, n, B_s, C]


def _with_zero_bins(hist: jax.Array, totals: jax.Array, zero_bins: jax.Array) -> jax.Array:
    """``hist`` f32[F_s, n, B_s, C] with each feature's bin of 0 (empty in ``hist``) set to
    its node's ``totals`` f32[n, C] less its other bins."""
    n_bins = hist.shape[2]
    # As one reduction, XLA:CPU summed 4 bins by a library call: 0.34 ms a level of
    # 20,000 rows x 500 0/1 columns, half the scatter's time; by halving, 0.03 ms
    # (docs/benchmarks.md, "Sparse features").
    summed = (sum_by_halving(hist, 2) if n_bins <= _HALVING_MAX_BINS
              else jnp.sum(hist, axis=2))
    others = summed - jnp.take_along_axis(hist, zero_bins[:, None, None, None], axis=2)[:, :, 0]
    is_zero_bin = (jnp.arange(n_bins)[None, :] == zero_bins[:, None])[:, None, :, None]
    return jnp.where(is_zero_bin, (totals[None] - others)[:, :, None, :], hist)
