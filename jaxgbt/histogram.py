"""Gradient histograms over (feature, node, bin) with ``jax.ops.segment_sum``."""

import functools

import jax
import jax.numpy as jnp

# Features summed per step. Within a step each feature is its own segment_sum, written
# out one after another, so the runtime can run them side by side (XLA's CPU runtime
# runs independent ops on its thread pool); steps are a lax.scan, so compile time stays
# bounded for wide data. On 2 CPU cores this measured 1.8x faster than one scan step
# per feature, and 8x faster than one scatter over all (row, feature) pairs.
FEATURES_PER_STEP = 32


def _build_histogram(bins: jax.Array, node: jax.Array, gh: jax.Array, n_nodes: int,
                     n_bins: int) -> jax.Array:
    """Sums of g and h per feature, node and bin (``build_histogram`` for one model).

    Args:
      bins: u8[F, N], feature-major binned data.
      node: i32[N], each row's node at the current level, in [0, n_nodes).
      gh: f32[N, C], the weighted g and h of each row side by side (C = 2K).
      n_nodes: number of nodes the histogram holds (static).
      n_bins: B (static).

    Returns:
      f32[F, n_nodes, B, C].

    Each feature's output (n_nodes * B * C floats) is small enough to stay in cache
    while the rows stream through it.
    """
    n_features, n_rows = bins.shape
    node_offset = node * n_bins

    def features(columns):
        return jnp.stack([
            jax.ops.segment_sum(gh, node_offset + column.astype(jnp.int32),
                                num_segments=n_nodes * n_bins)
            for column in columns
        ])

    if n_features <= FEATURES_PER_STEP:
        hist = features(list(bins))
    else:
        n_steps = -(-n_features // FEATURES_PER_STEP)
        padded = jnp.pad(bins, ((0, n_steps * FEATURES_PER_STEP - n_features), (0, 0)))
        steps = padded.reshape(n_steps, FEATURES_PER_STEP, n_rows)
        _, hist = jax.lax.scan(lambda carry, step: (carry, features(list(step))), None, steps)
        hist = hist.reshape(n_steps * FEATURES_PER_STEP, -1, gh.shape[1])[:n_features]
    return hist.reshape(n_features, n_nodes, n_bins, gh.shape[1])


def build_histogram(bins: jax.Array, node: jax.Array, gh: jax.Array, n_nodes: int,
                    n_bins: int) -> jax.Array:
    """Sums of g and h per feature, node and bin: f32[F, n_nodes, B, C].

    Args as in ``_build_histogram``. Under ``jax.vmap`` over models (``jaxgbt.fit_many``,
    ``jaxgbt.cv``, forests) on CPU, the models' histograms are built one after another.
    """
    return _vmappable_histogram(n_nodes, n_bins)(bins, node, gh)


@functools.cache
def _vmappable_histogram(n_nodes: int, n_bins: int):
    @jax.custom_batching.custom_vmap
    def histogram(bins, node, gh):
        return _build_histogram(bins, node, gh, n_nodes, n_bins)

    @histogram.def_vmap
    def one_model_at_a_time(axis_size, in_batched, *args):
        # XLA's CPU scatter with a batch dimension (what vmap makes of segment_sum) measured
        # 6x slower than one model's scatters after another (8 models, 100k rows, 28
        # features, 32 nodes, 256 bins, 2 cores): each model's histogram stays in cache.
        # Accelerators keep the batched scatter, which they run in parallel.
        if jax.default_backend() != "cpu":
            axes = tuple(0 if batched else None for batched in in_batched)
            return jax.vmap(functools.partial(_build_histogram, n_nodes=n_nodes, n_bins=n_bins),
                            in_axes=axes)(*args), True

        def one(batched_args):
            given = iter(batched_args)
            return histogram(*[next(given) if batched else arg
                               for arg, batched in zip(args, in_batched, strict=True)])

        return jax.lax.map(one, tuple(a for a, b in zip(args, in_batched, strict=True) if b)), True

    return histogram
