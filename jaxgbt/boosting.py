"""The boosting loop: rounds of (g, h) -> tree -> margin update, on device.

``train`` is the only place rounds are looped. Rounds run in compiled chunks of
``BoostConfig.rounds_per_chunk`` (a ``lax.scan``); the host only queues chunks, it
never waits for one, so there is no host round-trip per tree or per level.
"""

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxgbt._derivatives import grad_hess
from jaxgbt.config import BoostConfig
from jaxgbt.split import SplitParams
from jaxgbt.tree import BinnedTree, grow_tree


class BoostParams(NamedTuple):
    """Hyperparameters as traced f32[] scalars (sweepable with ``vmap``)."""

    learning_rate: jax.Array
    split: SplitParams


class TrainData(NamedTuple):
    """What every round reads.

    Attributes:
      bins: u8[F, N], feature-major binned features.
      y: labels with rows on axis 0 (an array or a pytree of arrays).
      weight: f32[N] sample weights (0 for padding rows).
    """

    bins: jax.Array
    y: Any
    weight: jax.Array


def _empty_tree(depth: int, n_outputs: int) -> BinnedTree:
    zeros = jnp.zeros(depth, jnp.int32)
    return BinnedTree(feature=zeros, split_bin=zeros, default_left=jnp.ones(depth, bool),
                      gain=jnp.zeros(depth, jnp.float32),
                      leaf_value=jnp.zeros((2**depth, n_outputs), jnp.float32))


def boost_round(config: BoostConfig, params: BoostParams, data: TrainData, raw: jax.Array,
                round_index: jax.Array) -> tuple[jax.Array, BinnedTree]:
    """One round: gradients at the current margins, a tree, the updated margins.

    Args:
      raw: f32[N, K], current margins.
      round_index: i32[], the round (for a learning-rate schedule).

    Returns:
      The new margins f32[N, K] and the tree, its leaf values already scaled by the
      learning rate.
    """
    g, h = grad_hess(config.loss, config.vector_output)(data.y, raw)
    weight = data.weight[:, None]
    gh = jnp.concatenate([g * weight, h * weight], axis=1)
    tree, leaf = grow_tree(data.bins, gh, params.split, config.depth, config.n_bins,
                           config.axis_name)
    if config.learning_rate_schedule is None:
        learning_rate = params.learning_rate
    else:
        learning_rate = jnp.asarray(config.learning_rate_schedule(round_index), jnp.float32)
    tree = tree._replace(leaf_value=learning_rate * tree.leaf_value)
    return raw + tree.leaf_value[leaf], tree


def train_chunk(config: BoostConfig, params: BoostParams, data: TrainData, raw: jax.Array,
                first_round: jax.Array, n_trees: jax.Array) -> tuple[jax.Array, BinnedTree]:
    """``rounds_per_chunk`` rounds from ``first_round``; rounds >= n_trees are skipped.

    Returns the margins f32[N, K] and the chunk's trees stacked on a leading axis.
    """
    empty = _empty_tree(config.depth, config.n_outputs)

    def one_round(raw, round_index):
        return jax.lax.cond(
            round_index < n_trees,
            lambda raw: boost_round(config, params, data, raw, round_index),
            lambda raw: (raw, empty),
            raw,
        )

    rounds = first_round + jnp.arange(config.rounds_per_chunk, dtype=jnp.int32)
    return jax.lax.scan(one_round, raw, rounds)


@functools.partial(jax.jit, static_argnames=("config", "mesh"))
def _compiled_chunk(config, mesh, params, data, raw, first_round, n_trees):
    if mesh is None:
        return train_chunk(config, params, data, raw, first_round, n_trees)
    rows = P(config.axis_name)
    data_specs = TrainData(bins=P(None, config.axis_name),
                           y=jax.tree.map(lambda _: rows, data.y), weight=rows)
    sharded = jax.shard_map(functools.partial(train_chunk, config), mesh=mesh,
                            in_specs=(P(), data_specs, rows, P(), P()), out_specs=(rows, P()),
                            check_vma=False)
    return sharded(params, data, raw, first_round, n_trees)


def _pad_rows(data: TrainData, n_pad: int, missing_bin: int) -> TrainData:
    """Appends n_pad rows of weight 0 (missing features, the first row's label)."""
    if n_pad == 0:
        return data
    bins = jnp.pad(data.bins, ((0, 0), (0, n_pad)), constant_values=missing_bin)
    y = jax.tree.map(lambda a: jnp.concatenate([a, jnp.repeat(a[:1], n_pad, axis=0)]), data.y)
    weight = jnp.pad(data.weight, (0, n_pad))
    return TrainData(bins, y, weight)


def train(config: BoostConfig, params: BoostParams, data: TrainData, base_score: jax.Array,
          n_trees: int, mesh: Mesh | None = None) -> tuple[BinnedTree, jax.Array]:
    """Boosts ``n_trees`` rounds.

    Args:
      base_score: f32[K], the starting margin of every row.
      n_trees: T (not static: a new value reuses the compiled chunk).
      mesh: a one-axis mesh named ``config.axis_name`` to split rows over, or None.

    Returns:
      The trees stacked on a leading axis of length T, and the final training margins
      f32[N, K].
    """
    n_rows = data.weight.shape[0]
    if mesh is not None:
        n_devices = mesh.devices.size
        data = _pad_rows(data, -n_rows % n_devices, config.n_bins - 1)
        rows = NamedSharding(mesh, P(config.axis_name))
        feature_rows = NamedSharding(mesh, P(None, config.axis_name))
        data = TrainData(bins=jax.device_put(data.bins, feature_rows),
                         y=jax.device_put(data.y, rows), weight=jax.device_put(data.weight, rows))
    raw = jnp.broadcast_to(base_score, (data.weight.shape[0], config.n_outputs))
    chunks = []
    n_trees_array = jnp.asarray(n_trees, jnp.int32)
    for first_round in range(0, max(n_trees, 1), config.rounds_per_chunk):
        raw, trees = _compiled_chunk(config, mesh, params, data, raw,
                                     jnp.asarray(first_round, jnp.int32), n_trees_array)
        chunks.append(trees)
    trees = jax.tree.map(lambda *parts: jnp.concatenate(parts)[:n_trees], *chunks)
    return trees, raw[:n_rows]
