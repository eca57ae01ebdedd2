"""Split gain and the choice of one oblivious level's split.

The gain is XGBoost's (Chen & Guestrin 2016, eq. 7) with an L1 term: for gradient
and Hessian sums G, H of a node,

    score(G, H) = T(G)^2 / max(H + l2, 1e-6),  T(G) = sign(G) * max(|G| - l1, 0)
    gain        = (score(G_L, H_L) + score(G_R, H_R) - score(G, H)) / 2

summed over outputs. An oblivious level applies one (feature, threshold, missing
direction) to every node of the level, so its gain is the sum over nodes; a node whose
left or right child would hold less Hessian than ``min_child_weight`` adds nothing.
The level is split only when that sum exceeds ``max(min_split_gain, 0)``; otherwise it is a
pass-through level that sends every row left, so that trees keep a fixed shape.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

# Floor of the denominator H + l2. With l2 = 0 and a loss whose Hessian vanishes
# (absolute error, a saturated logistic) H + l2 can be 0; the floor keeps leaf values
# and gains finite. It is far below any H that a row of unit weight produces.
MIN_DENOMINATOR = 1e-6


class SplitParams(NamedTuple):
    """Regularisation, as traced f32[] scalars so that they can be swept under vmap."""

    l2: jax.Array
    l1: jax.Array
    min_split_gain: jax.Array
    min_child_weight: jax.Array


class LevelSplit(NamedTuple):
    """One level of an oblivious tree, in bin space."""

    feature: jax.Array  # i32[]
    split_bin: jax.Array  # i32[]: rows with bin <= split_bin go left
    default_left: jax.Array  # bool[]: where missing values go
    gain: jax.Array  # f32[]


def soft_threshold(G: jax.Array, l1: jax.Array) -> jax.Array:
    """T(G) = sign(G) * max(|G| - l1, 0), the L1 shrinkage of a gradient sum."""
    return jnp.sign(G) * jnp.maximum(jnp.abs(G) - l1, 0.0)


def leaf_weight(G: jax.Array, H: jax.Array, params: SplitParams) -> jax.Array:
    """Newton leaf value -T(G) / (H + l2), elementwise; finite for any H >= 0."""
    return -soft_threshold(G, params.l1) / jnp.maximum(H + params.l2, MIN_DENOMINATOR)


def _score(G: jax.Array, H: jax.Array, params: SplitParams) -> jax.Array:
    """T(G)^2 / (H + l2), summed over the last (output) axis."""
    T = soft_threshold(G, params.l1)
    return jnp.sum(T * T / jnp.maximum(H + params.l2, MIN_DENOMINATOR), axis=-1)


def level_gains(hist: jax.Array, params: SplitParams) -> jax.Array:
    """Gain of every candidate split of one level.

    Args:
      hist: f32[F, n_nodes, B, 2K]; the last bin holds missing values.

    Returns:
      f32[F, B - 1, 2]: the gain of "bin <= b goes left" with missing values sent
      left (index 0 of the last axis) or right (index 1), summed over nodes.
    """
    n_outputs = hist.shape[-1] // 2
    values, missing = hist[:, :, :-1], hist[:, :, -1:]
    left_without_missing = jnp.cumsum(values, axis=2)  # [F, n, B-1, 2K]
    total = left_without_missing[:, :, -1:] + missing  # [F, n, 1, 2K]
    left = jnp.stack([left_without_missing + missing, left_without_missing], axis=-2)
    right = total[..., None, :] - left  # [F, n, B-1, 2, 2K]

    def parts(sums):
        return sums[..., :n_outputs], sums[..., n_outputs:]

    (GL, HL), (GR, HR), (G, H) = parts(left), parts(right), parts(total[..., None, :])
    gain = 0.5 * (_score(GL, HL, params) + _score(GR, HR, params) - _score(G, H, params))
    allowed = ((jnp.sum(HL, -1) >= params.min_child_weight)
               & (jnp.sum(HR, -1) >= params.min_child_weight))
    return jnp.sum(jnp.where(allowed, gain, 0.0), axis=1)


def best_level_split(hist: jax.Array, params: SplitParams,
                     allowed: jax.Array | None = None) -> LevelSplit:
    """The (feature, bin, missing direction) of largest summed gain.

    ``allowed`` (bool[F]) restricts the search to some features (column sampling).

    Ties go to the lowest feature, then the lowest bin, then missing-left. When no
    candidate beats ``min_split_gain`` the result is the pass-through split (feature
    0, the last value bin, missing left), which sends every row left. A gain equal to
    ``min_split_gain`` does not split.
    """
    gains = level_gains(hist, params)
    if allowed is not None:
        gains = jnp.where(allowed[:, None, None], gains, -jnp.inf)
    n_features, n_value_bins, _ = gains.shape
    best = jnp.argmax(gains.reshape(-1))
    feature, rest = jnp.divmod(best, n_value_bins * 2)
    split_bin, missing_right = jnp.divmod(rest, 2)
    gain = gains.reshape(-1)[best]
    do_split = gain > jnp.maximum(params.min_split_gain, 0.0)
    return LevelSplit(
        feature=jnp.where(do_split, feature, 0).astype(jnp.int32),
        split_bin=jnp.where(do_split, split_bin, n_value_bins - 1).astype(jnp.int32),
        default_left=jnp.where(do_split, missing_right == 0, True),
        gain=jnp.where(do_split, gain, 0.0),
    )
