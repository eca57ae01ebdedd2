"""Monotone and interaction constraints.

Both act inside one tree, on the features its levels may use and on its leaf values:

Interaction constraints (XGBoost's ``interaction_constraints``): sets of features allowed
to appear together. Every level of an oblivious tree lies on every path, so all features
of one tree must belong to one common set; a feature in no set may only appear alone.
While a tree grows, a level may split on the union of the sets that hold every feature
used so far.

Monotone constraints (+1 non-decreasing, -1 non-increasing, 0 free, per feature): a
monotone feature splits at most one level per tree, so along it the tree's leaves pair
up, leaf(bit 0) <-> leaf(bit 1), for every setting of the other levels. After the Newton
step, each pair is made ordered by replacing (a, b) with ((a + min(a, b)) / 2,
(max(a, b) + b) / 2): an ordered pair is unchanged and a violating one becomes its mean.
This map keeps every order already established along another feature's pairs (both
min and max preserve it, and so does their mean), so after one pass over the monotone
features the tree, and a sum of such trees, is monotone in each of them for any input
(NaN, which has no order, goes where the split sends missing values).

Depthwise trees (each node its own split) follow XGBoost instead. Interaction sets hold
along each path from the root. A monotone feature may split any node; a split on it
takes the midpoint m of its two children's values and holds the left subtree's leaves
below m and the right subtree's above (for +1; the other way for -1), on top of the
bounds the node inherited (``split_bounds``), and a candidate whose children are in the
wrong order is not chosen. Two inputs that differ only in a monotone feature part ways
at a split on it, after which every leaf they can reach lies on its side of m.
"""

import jax
import jax.numpy as jnp
import numpy as np


def interaction_sets(sets, n_features: int) -> jax.Array:
    """bool[S, F] membership of each allowed set, plus a singleton set for every feature
    that is in none (it may appear only alone). Built on the host (checked settings):
    eagerly on the device, each small step compiled a program of its own."""
    membership = np.zeros((len(sets), n_features), bool)
    for i, features in enumerate(sets):
        membership[i, np.asarray(list(features), np.int64)] = True
    alone = ~membership.any(axis=0)
    return jax.device_put(np.concatenate([membership, np.eye(n_features, dtype=bool)[alone]]))


def allowed_after(used: jax.Array, sets: jax.Array | None, monotone: jax.Array | None
                  ) -> jax.Array:
    """bool[F]: features the next level may split on, given bool[F] ``used`` so far."""
    allowed = jnp.ones(used.shape, bool)
    if sets is not None:
        holds_all_used = jnp.all(sets | ~used[None, :], axis=1)  # [S]
        allowed = jnp.any(sets & holds_all_used[:, None], axis=0)
    if monotone is not None:
        allowed = allowed & ~(used & (monotone != 0))
    return allowed


def enforce_monotone(leaf_value: jax.Array, feature: jax.Array, split: jax.Array,
                     monotone: jax.Array) -> jax.Array:
    """Leaf values f32[L, K] of one tree made monotone along its constrained levels.

    Args:
      feature: i32[D], each level's feature; split: bool[D], whether the level splits
        (pass-through levels send every row left and are skipped).
      monotone: i32[F] of -1, 0, +1.
    """
    depth = feature.shape[0]
    leaves = jnp.arange(leaf_value.shape[0])

    def one_level(values, d):
        direction = jnp.where(split[d], monotone[feature[d]], 0)
        shift = depth - 1 - d
        bit = (leaves >> shift) & 1
        partner = values[leaves ^ (1 << shift)]
        left = jnp.where(bit[:, None] == 0, values, partner)
        right = jnp.where(bit[:, None] == 0, partner, values)
        # For a decreasing feature, order the pair the other way round.
        low, high = jnp.where(direction < 0, right, left), jnp.where(direction < 0, left, right)
        new_low = 0.5 * (low + jnp.minimum(low, high))
        new_high = 0.5 * (jnp.maximum(low, high) + high)
        new_left = jnp.where(direction < 0, new_high, new_low)
        new_right = jnp.where(direction < 0, new_low, new_high)
        ordered = jnp.where(bit[:, None] == 0, new_left, new_right)
        return jnp.where(direction != 0, ordered, values), None

    values, _ = jax.lax.scan(one_level, leaf_value, jnp.arange(depth))
    return values


def split_bounds(w_left: jax.Array, w_right: jax.Array, bounds, direction: jax.Array):
    """Bounds of the children of the nodes of one depthwise level.

    Args:
      w_left, w_right: f32[n, K], the Newton values of each node's children.
      bounds: (lower, upper) f32[n, K], each node's own bounds.
      direction: i32[n], the monotone direction of each node's split (0: none, or the
        node did not split).

    Returns:
      ((lower, upper) of the left children, (lower, upper) of the right children), each
      f32[n, K]: for +1 the left child's upper bound and the right child's lower bound
      become the midpoint of the children's values clipped to the node's bounds (the
      other way round for -1); otherwise both inherit the node's bounds.
    """
    lower, upper = bounds
    mid = 0.5 * (jnp.clip(w_left, lower, upper) + jnp.clip(w_right, lower, upper))
    up, down = (direction > 0)[:, None], (direction < 0)[:, None]
    left = (jnp.where(down, jnp.maximum(lower, mid), lower),
            jnp.where(up, jnp.minimum(upper, mid), upper))
    right = (jnp.where(up, jnp.maximum(lower, mid), lower),
             jnp.where(down, jnp.minimum(upper, mid), upper))
    return left, right
