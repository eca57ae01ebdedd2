"""Leaf values other than the diagonal Newton step of ``split.leaf_weight``.

Once a tree's structure is grown, its leaves can be set by a better model of the loss:

- ``newton_full``: the Newton step with the full K x K Hessian summed over the leaf, for
  vector outputs whose outputs interact (softmax).
- ``newton_from``: a further Newton step from leaf values already set, on derivatives
  taken at the margins those values lead to (CatBoost's ``leaf_estimation_iterations``):
  where the curvature changes along the step (logistic, softmax, Poisson), a few steps
  reach the leaf's regularised minimum, which one step only approaches.
- ``quantile_leaves``: the weighted alpha-quantile of the residuals y - f in each leaf,
  which minimises absolute error (alpha = 0.5) or the pinball loss exactly; the Newton
  step cannot, as their Hessian is 0 (this is the leaf refresh of LightGBM's L1 and
  quantile objectives and of scikit-learn's absolute error loss).

Whatever sets them, ``fill_empty_leaves`` then gives the leaves no training row reached
a value from their ancestors, and with ``leaf_shrinkage`` ``shrink_leaves`` pulls each
leaf towards its ancestors' means.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.order import from_unsigned_order_key, unsigned_order_key
from jaxgbt.core.split import (
    MIN_DENOMINATOR,
    SplitParams,
    held_step,
    leaf_weight,
    soft_threshold,
)

# Relative gap between two float32 sums of the same weights added in other orders.
_SUM_ORDER_TOLERANCE = 1e-6


def newton_full(G: jax.Array, H: jax.Array, params: SplitParams) -> jax.Array:
    """Leaf values -(H + l2 I)^-1 T_l1(G).

    Args:
      G: f32[L, K] gradient sums.
      H: f32[L, K, K] Hessian sums.

    Returns:
      f32[L, K]. The system is regularised by l2 and, so that an empty leaf or a
      singular Hessian (softmax's rows sum to 0) stays solvable, by MIN_DENOMINATOR.
      With ``max_delta_step``, each value is held to [-max_delta_step,
      max_delta_step] (``split.held_step``).
    """
    n_outputs = G.shape[-1]
    eye = jnp.eye(n_outputs, dtype=H.dtype)[None]
    system = H + (params.l2 + MIN_DENOMINATOR) * eye
    return held_step(-jnp.linalg.solve(system, soft_threshold(G, params.l1)[..., None])[..., 0],
                     params)


def newton_from(value: jax.Array, G: jax.Array, H: jax.Array, params: SplitParams
                ) -> jax.Array:
    """The leaf values after one Newton step from ``value``, on the gradient and
    Hessian sums taken at margins moved by ``value``.

    The step minimises the loss's second-order model around ``value`` plus the
    regularisers of the leaf value w (l1 |w| + l2 w^2 / 2): with Hv the Hessian times
    ``value``, w = -(H + l2)^-1 T_l1(G - Hv), which at value = 0 is the ordinary Newton
    leaf (``split.leaf_weight`` or ``newton_full``).

    Args:
      value: f32[L, K], the leaf values the derivatives were taken after.
      G: f32[L, K] gradient sums.
      H: f32[L, K] diagonal Hessian sums, or f32[L, K, K] full ones.

    Returns:
      f32[L, K].
    """
    if H.ndim == 2:
        return leaf_weight(G - H * value, H, params)
    Hv = jnp.einsum("lij,lj->li", H, value, precision=jax.lax.Precision.HIGHEST)
    return newton_full(G - Hv, H, params)


def quantile_leaves(residual: jax.Array, weight: jax.Array, leaf: jax.Array, n_leaves: int,
                    alpha: float) -> jax.Array:
    """Weighted alpha-quantile of the residuals in each leaf.

    Args:
      residual: f32[N], y - f at the margins the tree was grown on.
      weight: f32[N], sample weights (rows of weight 0 are ignored).
      leaf: i32[N], each row's leaf.
      n_leaves: L (static).
      alpha: the quantile level in (0, 1) (static).

    Returns:
      f32[L]: the smallest residual r of each leaf with (weight of residuals <= r)
      >= alpha * (leaf weight); 0 for a leaf without weight.

    Found bit by bit on the residuals' integer keys (``order.unsigned_order_key``), for every
    leaf at once: the largest key v with (weight of residuals below v) < alpha * (leaf
    weight) is that quantile. 32 passes of a comparison and a weighted count per leaf
    over N rows, instead of sorting the rows by leaf and residual (slower on XLA:CPU,
    docs/benchmarks.md).
    """
    leaf_weight = jax.ops.segment_sum(weight, leaf, num_segments=n_leaves)
    # A small tolerance: the counts below sum the leaf's weights in another order.
    target = alpha * leaf_weight * (1 - _SUM_ORDER_TOLERANCE)
    key = unsigned_order_key(residual)
    n_bits = 8 * residual.dtype.itemsize

    def next_bit(i, found):
        candidate = found | jnp.left_shift(jnp.array(1, key.dtype),
                                           jnp.array(n_bits - 1, key.dtype) - i.astype(key.dtype))
        below = jax.ops.segment_sum(jnp.where(key < candidate[leaf], weight, 0.0), leaf,
                                    num_segments=n_leaves)
        return jnp.where(below < target, candidate, found)

    found = jax.lax.fori_loop(0, n_bits, next_bit, jnp.zeros(n_leaves, key.dtype))
    value = from_unsigned_order_key(found, residual.dtype)
    return jnp.where(leaf_weight > 0, value, 0.0)


def fill_empty_leaves(leaf_value: jax.Array, cover: jax.Array) -> jax.Array:
    """Leaf values with each empty leaf's set to its nearest non-empty ancestor's mean.

    A level of an oblivious tree splits every node, so a node whose rows all lie on one
    side of the level's threshold gets an empty child, and at depth 6 on a few hundred
    rows many of the 64 leaves are empty. The Newton step gives such a leaf 0, so a new
    row that reaches it gets nothing from the tree, though its path up to the split that
    emptied the leaf is as well supported as any. XGBoost and LightGBM never make the
    split, and the row would get the node's value; here it gets the mean of the leaf
    values under its deepest ancestor that some training row reached, weighted by the
    leaves' covers (the ancestor's expected value, as TreeSHAP takes it). The rows a
    tree was grown on never reach an empty leaf, so their margins are unchanged; rows
    left out of the tree's sample, and the margins of other target-statistic orders, do
    (docs/training.md). Depthwise and leaf-wise trees have empty leaves only under
    nodes that did not split, which send every row the same way, so no row reaches them.

    Args:
      leaf_value: f32[L, K], L = 2**D leaves in path order (leaf l's ancestor at depth d
        is node l >> (D - d) of that depth), as every growth policy numbers them.
      cover: f32[L], each leaf's Hessian summed over the rows that reach it (weighted;
        ``tree.leaf_cover``); 0 marks an empty leaf.

    Returns:
      f32[L, K]: the leaves of positive cover keep their values bit for bit. A leaf
      with no such ancestor (a tree no row of positive weight reached) keeps its own.
    """
    if cover.shape[0] == 1:
        return leaf_value
    path = _ancestor_sums(leaf_value, cover)
    # Covers only shrink down a path, so the reached ancestors are the first ones.
    deepest = jnp.sum(path[:, :, 0] > 0, axis=1) - 1  # -1: no row reached the tree
    node = jnp.take_along_axis(path, jnp.maximum(deepest, 0)[:, None, None], axis=1)[:, 0]
    mean = node[:, 1:] / jnp.where(node[:, :1] > 0, node[:, :1], 1.0)
    return jnp.where(((cover > 0) | (deepest < 0))[:, None], leaf_value, mean)


def shrink_leaves(leaf_value: jax.Array, rows: jax.Array, strength: jax.Array) -> jax.Array:
    """Hierarchical shrinkage (Agarwal et al., ICML 2022) of a tree's leaf values.

    Each node's mean is the row-weighted mean of the leaf values under it; a leaf's value
    becomes its root's mean plus each step of its path from a node's mean to its
    child's, divided by 1 + ``strength`` / (the node's rows). Refinements made on few
    rows shrink the most; at strength 0 the leaves keep their values (up to rounding).
    A step into a node no row reached adds nothing, so an empty leaf gets its deepest
    reached ancestor's shrunk mean.

    Args:
      leaf_value: f32[L, K], in path order (``fill_empty_leaves``).
      rows: f32[L], each leaf's training rows of positive weight.
      strength: f32[], lambda >= 0, in rows.

    Returns:
      f32[L, K]; a tree no row reached keeps its values.
    """
    if rows.shape[0] == 1:
        return leaf_value
    path = _ancestor_sums(leaf_value, rows)
    node_rows = jnp.concatenate([path[:, :, 0], rows[:, None]], axis=1)  # [L, D + 1]
    mean = jnp.concatenate([path[:, :, 1:] / jnp.maximum(path[:, :, :1], 1.0),
                            leaf_value[:, None, :]], axis=1)  # [L, D + 1, K]
    step = jnp.where(node_rows[:, 1:, None] > 0, mean[:, 1:] - mean[:, :-1], 0.0)
    divisor = 1.0 + strength / jnp.maximum(node_rows[:, :-1, None], 1.0)
    shrunk = mean[:, 0] + jnp.sum(step / divisor, axis=1)
    return jnp.where((node_rows[:, :1] > 0), shrunk, leaf_value)


def _ancestor_sums(leaf_value: jax.Array, weight: jax.Array) -> jax.Array:
    """f32[L, D, 1 + K]: for each leaf, its ancestors' (summed ``weight`` f32[L], summed
    ``weight`` times ``leaf_value`` f32[L, K]) over the leaves under them, root first.

    Every node's sums are one product with the constant node-by-leaf matrix: the tree is
    small, and one operation a tree compiled in less time than a reduction per level
    (docs/benchmarks.md, "Empty leaves filled: the cost")."""
    under, ancestors = _ancestry(weight.shape[0].bit_length() - 1)
    sums = jnp.dot(jnp.asarray(under, weight.dtype),
                   jnp.concatenate([weight[:, None], leaf_value * weight[:, None]], axis=1),
                   precision=jax.lax.Precision.HIGHEST)  # [2**D - 1, 1 + K]
    return sums[ancestors]


@functools.cache
def _ancestry(depth: int) -> tuple[np.ndarray, np.ndarray]:
    """(f32[2**D - 1, L]: 1 where leaf l lies under node n, the nodes of depths 0 to D - 1
    in heap order (node j of depth d is row 2**d - 1 + j); i32[L, D]: each leaf's
    ancestor at each depth, as rows of the first)."""
    leaves = np.arange(2**depth)
    ancestors = np.stack([2**d - 1 + (leaves >> (depth - d)) for d in range(depth)], axis=1)
    under = np.zeros((2**depth - 1, 2**depth), np.float32)
    under[ancestors, leaves[:, None]] = 1.0
    return under, ancestors.astype(np.int32)
