"""One device call of training: ``train_chunk`` runs ``BoostConfig.rounds_per_chunk``
rounds (``core.round.boost_round``) in a ``lax.scan``.

Rounds at or past ``n_trees`` are skipped by a ``lax.cond``, so a new ``n_trees`` reuses
the compiled chunk. ``engine.compile`` compiles it, ``engine.sharding`` runs it over a
mesh and ``engine.loop`` queues one chunk after another.
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
    empty = (_empty_tree(config.depth, config.n_outputs, config.grow_policy),
             jnp.zeros((), jnp.int32))

    # Under jax.vmap over models (fit_many, cv, forests) on CPU, the models' rounds run
    # one after another (``engine.batching.one_model_at_a_time``).
    step = one_model_at_a_time(functools.partial(boost_round, config))

    def one_round(raw, round_index):
        return jax.lax.cond(
            round_index < n_trees,
            lambda raw: step(params, data, raw, round_index),
            lambda raw: (raw, empty),
            raw,
        )

    rounds = first_round + jnp.arange(config.rounds_per_chunk, dtype=jnp.int32)
    return jax.lax.scan(one_round, raw, rounds)
