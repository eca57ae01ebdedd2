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

from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxgbt.core.histogram import build_histogram
from jaxgbt.core.split import Best

# Histogram bytes one block may hold: about a core's share of the L2 cache.
SEARCH_BLOCK_BYTES = 2**22


def features_per_block(n_features: int, n_nodes: int, n_bins: int, n_columns: int,
                       sharded: bool) -> int:
    """Features per block: as many as fit ``SEARCH_BLOCK_BYTES`` of histogram, spread
    evenly over the fewest blocks; all of them when rows are split over devices (one
    all-reduce of the level's histogram, not one per block)."""
    if sharded:
        return n_features
    most = max(1, SEARCH_BLOCK_BYTES // (n_nodes * n_bins * n_columns * 4))
    n_blocks = -(-n_features // most)
    return -(-n_features // n_blocks)


def search_level(bins: jax.Array, node: jax.Array, gh: jax.Array, n_nodes: int, n_bins: int,
                 search: Callable[[jax.Array, jax.Array, jax.Array], Best],
                 axis_name: str | None = None) -> Best:
    """The best candidate of one level, over every feature.

    Args:
      bins: u8[F, N], binned features.
      node: i32[N], each row's node, in [0, n_nodes).
      gh: f32[N, 2K], weighted gradients then Hessians.
      n_nodes: nodes the histograms hold (static).
      n_bins: B (static).
      search: ``search(hist, features, counted) -> Best`` for one block: hist
        f32[b, n_nodes, B, 2K] of features ``features`` i32[b]; a feature with
        ``counted`` False belongs to an earlier block and must not win here.
      axis_name: the mesh axis to sum histograms over, or None on one device.

    Returns:
      The winning block's ``Best``.
    """
    n_features = bins.shape[0]
    block = features_per_block(n_features, n_nodes, n_bins, gh.shape[1], axis_name is not None)

    def histogram(columns):
        hist = build_histogram(columns, node, gh, n_nodes, n_bins)
        return hist if axis_name is None else jax.lax.psum(hist, axis_name)

    if block == n_features:
        features = jnp.arange(n_features, dtype=jnp.int32)
        return search(histogram(bins), features, jnp.ones(n_features, bool))

    def one_block(i):
        # The last block starts early enough to end at the last feature; the features
        # it shares with the block before it were searched there.
        first = jnp.minimum(i * block, n_features - block)
        features = first + jnp.arange(block, dtype=jnp.int32)
        columns = jax.lax.dynamic_slice_in_dim(bins, first, block, axis=0)
        return search(histogram(columns), features, features >= i * block)

    bests = jax.lax.map(one_block, jnp.arange(-(-n_features // block)))
    winner = jnp.argmax(bests.gain, axis=0)  # the first block holding the largest gain
    return jax.tree.map(lambda blocks: _pick(blocks, winner), bests)


def _pick(blocks: jax.Array, winner: jax.Array) -> jax.Array:
    """blocks[winner] per entry: blocks [n_blocks, *S, ...], winner i32[*S]."""
    index = winner.reshape((1, *winner.shape) + (1,) * (blocks.ndim - 1 - winner.ndim))
    return jnp.take_along_axis(blocks, index, axis=0)[0]
