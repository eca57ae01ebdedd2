"""Target statistics under several orders of the rows, each with its own margins
(CatBoost's folds).

A column encoded by ordered target statistics (``data.categorical``) gives row i the
smoothed mean label of the rows of its category *before* i in a random order: the first
rows of each category get noisy values, and a tree grown on one order fits that order's
noise, which every later tree then sees again in its gradients. CatBoost keeps several
orders, each with its own statistics and its own margins: each tree is chosen on one
order's gradients and columns, and then every order's margins move by the tree applied
to that order's own columns, with leaf values set from that order's own rows and
derivatives (Prokhorenkova et al. 2018, section 3.2 and Algorithm 2; CatBoost's
``UpdateLearningFold``). The trees here take turns: round r grows its tree on order
``r mod P`` (``core.round``), and the model keeps the leaf values of the next round's
order, set on statistics that did not choose the splits. The model is an ordinary
Booster: at prediction every row gets the statistics of all training rows.

The binned matrix holds the first order in its F columns and each further order's C
statistic columns after them, u8[F + (P - 1) C, N]: order q >= 1 of statistic column
``statistic_columns[s]`` is row ``F + (q - 1) C + s``. A tree's features are columns
0..F-1; it is applied to order q by renaming its statistic features to that order's
rows (``order_rows``), so no order's matrix is ever copied whole, but the one a round
grows its tree on. The margins are f32[N, P, K], rows first like every other per-row
array (padding and splitting over devices read axis 0).
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.config import BoostConfig
from jaxgbt.core.layout import layout
from jaxgbt.core.tracing import is_traced
from jaxgbt.core.tree import BinnedTree


def n_columns(config: BoostConfig, n_bin_rows: int) -> int:
    """F, the columns trees split on, of a binned matrix of ``n_bin_rows`` rows."""
    return n_bin_rows - (config.statistic_orders - 1) * len(config.statistic_columns)


def order_rows(config: BoostConfig, n_features: int) -> np.ndarray:
    """i32[P, F]: for each order, the row of the binned matrix that holds each of the F
    columns under it (a host constant: the configuration fixes it)."""
    columns = np.asarray(config.statistic_columns, np.int32)
    rows = np.tile(np.arange(n_features, dtype=np.int32), (config.statistic_orders, 1))
    for order in range(1, config.statistic_orders):
        first = n_features + (order - 1) * columns.size
        rows[order, columns] = first + np.arange(columns.size, dtype=np.int32)
    return rows


def order_bins(config: BoostConfig, bins: jax.Array, order: jax.Array) -> jax.Array:
    """u8[F, N]: the F columns under ``order`` (i32[]), from the binned matrix
    u8[F + (P - 1) C, N]: one copy of the columns for the round's tree to grow on."""
    rows = jnp.asarray(order_rows(config, n_columns(config, bins.shape[0])))
    return jnp.take(bins, rows[order], axis=0)


def order_margins(margins: jax.Array, order: jax.Array) -> jax.Array:
    """f32[N, K]: ``order``'s margins, of f32[N, P, K]."""
    return jnp.take(margins, order, axis=1)


def order_leaves(config: BoostConfig, bins: jax.Array, tree: BinnedTree) -> jax.Array:
    """i32[N, P]: the leaf each row reaches under each order's columns.

    Args:
      bins: u8[F + (P - 1) C, N], the binned matrix of every order.
      tree: a tree over the F columns.
    """
    rows = jnp.asarray(order_rows(config, n_columns(config, bins.shape[0])))
    grown = layout(config.grow_policy)

    def leaves(feature_rows):  # i32[N], the tree on one order's columns
        renamed = tree._replace(feature=feature_rows[tree.feature])
        return grown.leaf_from_bins(bins, renamed, config.n_bins)

    return jax.vmap(leaves, out_axes=1)(rows)


def starting_margins(config: BoostConfig, raw):
    """Margins f32[N, K] as every order's starting margins f32[N, P, K]: broadcast in
    the trace when traced, else on the host and put on the device (eagerly, a device
    broadcast would compile a program for every new row count)."""
    shape = (raw.shape[0], config.statistic_orders, raw.shape[1])
    if is_traced(raw):
        return jnp.broadcast_to(raw[:, None, :], shape)
    return jax.device_put(np.broadcast_to(np.asarray(raw)[:, None, :], shape))
