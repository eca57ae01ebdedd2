"""Ordered boosting (``fit(..., boosting="ordered")``): CatBoost's cure for the
prediction shift, for small data.

In plain boosting the gradient of row i at round t is taken at a margin that was fitted
to row i's own label in rounds 1..t-1, so on the training rows the gradients are smaller
than they would be on new rows, and trees chase noise that looks like signal. Ordered
boosting (Prokhorenkova et al. 2018, "CatBoost: unbiased boosting with categorical
features", Section 4 and Algorithm 1) draws one random order sigma of the training rows
and keeps, next to the model's margins, *ordered* margins: row i's ordered margin only
ever used the rows before i in sigma. Every round:

1. g and h are taken at the ordered margins, and the tree's structure is grown from them;
2. the model's leaf values are the usual Newton step from all rows' g and h at the model's
   own margins (the paper's "leaf values of the final model are calculated by the standard
   gradient boosting procedure"), so the model is an ordinary Booster;
3. row i's ordered margin moves by the learning rate times the Newton value of its leaf
   computed from only the rows before i in sigma that share its leaf (``prefix_leaf_values``).

The first rows of sigma thus stay near the starting margin. CatBoost keeps supporting
models only for prefixes of lengths 2**j and several permutations; here every row has its
exact prefix (per-leaf running sums in sigma's order, ``leaf_prefix_sums``) and there is
one permutation, drawn from ``seed``.

This module holds the ordered margins, the order and the prefix sums; the round itself is
``jaxgbt.core.round.boost_round`` with its ``ORDERED`` strategy.
"""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxgbt.core.split import SplitParams, leaf_weight

BOOSTING_TYPES = ("plain", "ordered")

# The permutation's key is fold_in(PRNGKey(seed), this): round t's draws use
# fold_in(PRNGKey(seed), t) (``sampling.round_keys``) with t far below it.
_PERMUTATION_STREAM = 0x6F726472


class OrderedMargins(NamedTuple):
    """The margins ordered boosting carries from round to round.

    Attributes:
      model: f32[N, K], the model's margins on the training rows (what ``predict_raw``
        gives on them).
      ordered: f32[N, K], each row's margin from the rows before it in sigma.
    """

    model: jax.Array
    ordered: jax.Array


def row_order(key: jax.Array, n_rows: int) -> jax.Array:
    """i32[N]: the fit's random order sigma of the training rows (entry p is the row at
    place p), a permutation of 0..N-1.

    Args:
      key: u32[2], ``jax.random.PRNGKey(seed)`` (``SamplingParams.key``); traced under
        ``vmap`` over seeds.
      n_rows: N (static).
    """
    key = jax.random.fold_in(key, _PERMUTATION_STREAM)
    return jax.random.permutation(key, n_rows).astype(jnp.int32)


# Compiled once per N: ``fit`` draws the order with it before training (eagerly, each
# op of the shuffle would compile on its own).
compiled_row_order = jax.jit(row_order, static_argnames="n_rows")


def block_size(n_leaves: int) -> int:
    """S, rows per block of ``leaf_prefix_sums``: about 4 sqrt(L), a power of two in
    [32, 256]. It balances the work within blocks (N S) against the per-leaf block totals
    (N L / S); below about L = 1024 it beats the alternative, a sort by (leaf, place) and
    a segmented scan (docs/benchmarks.md)."""
    return min(max(2 ** round(math.log2(4 * math.sqrt(n_leaves))), 32), 256)


def leaf_prefix_sums(values: jax.Array, leaf: jax.Array, n_leaves: int,
                     block: int | None = None) -> jax.Array:
    """Running sums over the earlier rows of the same leaf, rows taken in the given order.

    Args:
      values: f32[N, C], one row per place of the order.
      leaf: i32[N], each place's leaf, in [0, L).
      n_leaves: L (static).
      block: S (static), rows per block; default ``block_size(L)``.

    Returns:
      f32[N, C]: entry p is the sum of ``values[q]`` over q < p with ``leaf[q] == leaf[p]``
      (0 for the first row of a leaf). Computed without a sort: the rows are cut into
      blocks of S; the sums of the blocks before p's come from per-leaf block totals
      (a segment sum and a cumulative sum over blocks), those within p's block from a
      masked S x S product. Each sum adds only rows of one leaf, so a small sum keeps its
      float32 precision (a running sum over all rows minus another would lose it).
    """
    block = block_size(n_leaves) if block is None else block
    n_rows, n_columns = values.shape
    pad = -n_rows % block  # padding rows come last: they precede no real row
    values = jnp.pad(values, ((0, pad), (0, 0)))
    leaf = jnp.pad(leaf, (0, pad))
    n_blocks = values.shape[0] // block
    block_of = jnp.arange(n_blocks * block) // block
    totals = jax.ops.segment_sum(values, block_of * n_leaves + leaf,
                                 num_segments=n_blocks * n_leaves)
    totals = totals.reshape(n_blocks, n_leaves, n_columns)
    before_block = jnp.cumsum(totals, axis=0) - totals  # [n_blocks, L, C]
    blocked_leaf = leaf.reshape(n_blocks, block)
    place = jnp.arange(block)
    earlier_same_leaf = ((blocked_leaf[:, :, None] == blocked_leaf[:, None, :])
                         & (place[None, :, None] > place[None, None, :]))  # [n_blocks, S, S]
    # HIGHEST: accelerators would otherwise multiply float32 in TF32 or bfloat16.
    within = jnp.einsum("bpq,bqc->bpc", earlier_same_leaf.astype(values.dtype),
                        values.reshape(n_blocks, block, n_columns),
                        precision=jax.lax.Precision.HIGHEST)
    sums = before_block[block_of, leaf] + within.reshape(-1, n_columns)
    return sums[:n_rows]


def prefix_leaf_values(gh: jax.Array, leaf: jax.Array, order: jax.Array, n_leaves: int,
                       params: SplitParams, block: int | None = None) -> jax.Array:
    """Each row's Newton leaf value from the rows before it in sigma that share its leaf.

    Args:
      gh: f32[N, 2K], weighted gradients then Hessians of each row.
      leaf: i32[N], each row's leaf.
      order: i32[N], sigma (``row_order``): entry p is the row at place p.
      n_leaves: L (static).
      params: l2 and l1, as in ``split.leaf_weight``.
      block: rows per block of ``leaf_prefix_sums`` (static); default for L.

    Returns:
      f32[N, K]: ``leaf_weight(G_i, H_i)`` with G_i, H_i the sums of gh over the rows
      that share row i's leaf and come before it in sigma; 0 for the first row of a leaf.
    """
    n_outputs = gh.shape[1] // 2
    in_order = leaf_prefix_sums(gh[order], leaf[order], n_leaves, block)
    sums = jnp.zeros_like(gh).at[order].set(in_order)  # back to row order
    return leaf_weight(sums[:, :n_outputs], sums[:, n_outputs:], params)
