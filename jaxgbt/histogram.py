"""Gradient histograms over (feature, node, bin) with ``jax.ops.segment_sum``."""

import jax
import jax.numpy as jnp


def build_histogram(bins: jax.Array, node: jax.Array, gh: jax.Array, n_nodes: int,
                    n_bins: int) -> jax.Array:
    """Sums of g and h per feature, node and bin.

    Args:
      bins: u8[F, N], feature-major binned data.
      node: i32[N], each row's node at the current level, in [0, n_nodes).
      gh: f32[N, C], the weighted g and h of each row side by side (C = 2K).
      n_nodes: number of nodes the histogram holds (static).
      n_bins: B (static).

    Returns:
      f32[F, n_nodes, B, C].

    One ``segment_sum`` per feature, scanned over features: a feature's output
    (n_nodes * B * C floats) stays in cache while the rows stream through it, which
    measured 4-5x faster on CPU than one scatter over all (row, feature) pairs.
    """
    node_offset = node * n_bins

    def one_feature(carry, column):
        segment = node_offset + column.astype(jnp.int32)
        return carry, jax.ops.segment_sum(gh, segment, num_segments=n_nodes * n_bins)

    _, hist = jax.lax.scan(one_feature, None, bins)
    return hist.reshape(bins.shape[0], n_nodes, n_bins, gh.shape[1])
