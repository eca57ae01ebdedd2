"""One device call of training: ``train_chunk`` runs ``BoostConfig.rounds_per_chunk``
rounds (``core.round.boost_round``) in a ``lax.scan``.

Rounds at or past ``n_trees`` are skipped by a ``lax.cond``, so a new ``n_trees`` reuses
the compiled chunk, and a model stopped early inside a trace (one ``n_trees`` per model
under ``jax.vmap``) trains no more trees. ``engine.compile`` compiles it,
``engine.sharding`` runs it over a mesh and ``engine.loop`` queues one chunk after
another.
"""

import functools

import jax
import jax.numpy as jnp

from jaxgbt.core.config import BoostConfig
from jaxgbt.core.layout import n_splits
from jaxgbt.core.round import BoostParams, Margins, TrainData, boost_round
from jaxgbt.core.tree import BinnedTree
from jaxgbt.engine.batching import one_model_at_a_time


def _empty_tree(depth: int, n_outputs: int, grow_policy: str = "oblivious") -> BinnedTree:
    n_entries = n_splits(depth, grow_policy)
    zeros = jnp.zeros(n_entries, jnp.int32)
    return BinnedTree(feature=zeros, split_bin=zeros, default_left=jnp.ones(n_entries, bool),
                      gain=jnp.zeros(n_entries, jnp.float32),
                      leaf_value=jnp.zeros((2**depth, n_outputs), jnp.float32),
                      cover=jnp.zeros(2**depth, jnp.float32))


def train_chunk(config: BoostConfig, params: BoostParams, data: TrainData, raw: Margins,
                first_round: jax.Array, n_trees: jax.Array
                ) -> tuple[Margins, tuple[BinnedTree, jax.Array]]:
    """``rounds_per_chunk`` rounds from ``first_round``; rounds >= n_trees are skipped.

    ``raw`` is f32[N, K], or with ``config.ordered`` the ``OrderedMargins`` pair.
    Returns the margins (of the same kind), and the chunk's trees and bad-row counts
    stacked on a leading axis.
    """
    # Under jax.vmap over models (fit_many, cv, forests) on CPU, the models' rounds run
    # one after another (``engine.batching.one_model_at_a_time``). The skip is inside
    # each model's step: with one ``n_trees`` per model (early stopping under vmap) a
    # model that stopped skips its rounds there, where a batched condition outside
    # would run both branches for every model.
    step = one_model_at_a_time(functools.partial(_round_or_skip, config))

    def one_round(raw, round_index):
        return step(params, data, raw, round_index, n_trees)

    rounds = first_round + jnp.arange(config.rounds_per_chunk, dtype=jnp.int32)
    return jax.lax.scan(one_round, raw, rounds)


def _round_or_skip(config: BoostConfig, params: BoostParams, data: TrainData, raw: Margins,
                   round_index: jax.Array, n_trees: jax.Array):
    """One round (``boost_round``) if ``round_index < n_trees``, else the margins as they
    are and an empty tree (zero leaf values, no gain: it predicts 0 and counts for
    nothing in importance)."""
    empty = (_empty_tree(config.depth, config.n_outputs, config.grow_policy),
             jnp.zeros((), jnp.int32))
    return jax.lax.cond(
        round_index < n_trees,
        lambda raw: boost_round(config, params, data, raw, round_index),
        lambda raw: (raw, empty),
        raw,
    )
