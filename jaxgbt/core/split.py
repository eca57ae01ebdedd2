"""Split gain, and the choice of an oblivious level's split or of each node's own split.

The gain is XGBoost's loss change (Chen & Guestrin 2016, eq. 7, without the paper's
factor 1/2, as XGBoost and LightGBM compute it) with an L1 term: for gradient and
Hessian sums G, H of a node,

    score(G, H) = T(G)^2 / max(H + l2, 1e-6),  T(G) = sign(G) * max(|G| - l1, 0)
    gain        = score(G_L, H_L) + score(G_R, H_R) - score(G, H)

summed over outputs. An oblivious level applies one (feature, threshold, missing
direction) to every node of the level, so its gain is the sum over nodes; a node whose
left or right child would hold less Hessian than ``min_child_weight`` adds nothing.
The level is split only when that sum exceeds ``max(min_split_gain, 0)`` (so
``min_split_gain`` is XGBoost's ``gamma`` and LightGBM's ``min_gain_to_split``);
otherwise it is a pass-through level that sends every row left, so that trees keep a
fixed shape.
A depthwise tree (``best_node_splits``) picks each node's split from that node's gains
alone, with the same rule per node.
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
    return _sum_outputs(T * T / jnp.maximum(H + params.l2, MIN_DENOMINATOR))


def _sum_outputs(x: jax.Array) -> jax.Array:
    """x summed over its last (output) axis of K, as K - 1 elementwise additions: a
    reduction over a last axis of a few entries made XLA:CPU's loops several times
    slower (docs/benchmarks.md)."""
    total = x[..., 0]
    for k in range(1, x.shape[-1]):
        total = total + x[..., k]
    return total


# Block length of ``prefix_sums``: a bin axis of up to 256 is 16 blocks of 16.
_PREFIX_BLOCK = 16


def prefix_sums(x: jax.Array, axis: int) -> jax.Array:
    """Inclusive cumulative sums of ``x`` along ``axis``, as two small triangular matrix
    products: sums within blocks of ``_PREFIX_BLOCK``, then the totals of the blocks
    before.

    The same sums as ``jnp.cumsum``, which XLA:CPU runs as a slower reduce-window over
    the whole axis (docs/benchmarks.md). Products at full float32 precision, so that
    accelerators do not round them to TF32.
    """
    n = x.shape[axis]
    n_blocks = -(-n // _PREFIX_BLOCK)
    x = jnp.moveaxis(x, axis, -1)
    batch = x.shape[:-1]
    blocks = jnp.pad(x, [(0, 0)] * len(batch) + [(0, n_blocks * _PREFIX_BLOCK - n)])
    blocks = blocks.reshape(*batch, n_blocks, _PREFIX_BLOCK)
    within = jnp.matmul(blocks, jnp.triu(jnp.ones((_PREFIX_BLOCK, _PREFIX_BLOCK), x.dtype)),
                        precision=jax.lax.Precision.HIGHEST)
    before = jnp.matmul(within[..., -1], jnp.triu(jnp.ones((n_blocks, n_blocks), x.dtype), 1),
                        precision=jax.lax.Precision.HIGHEST)
    sums = (within + before[..., None]).reshape(*batch, n_blocks * _PREFIX_BLOCK)[..., :n]
    return jnp.moveaxis(sums, -1, axis)


def _children(hist: jax.Array):
    """(left, right, total) sums of every candidate split of every node.

    Args:
      hist: f32[F, n, B, 2K]; the last bin holds missing values.

    Returns:
      left, right: f32[F, n, B - 1, 2, 2K] for "bin <= b goes left" with missing values
      sent left (index 0 of axis 3) or right (index 1); total: f32[F, n, 1, 1, 2K].
    """
    values, missing = hist[:, :, :-1], hist[:, :, -1:]
    left_without_missing = prefix_sums(values, axis=2)  # [F, n, B-1, 2K]
    total = left_without_missing[:, :, -1:] + missing  # [F, n, 1, 2K]
    left = jnp.stack([left_without_missing + missing, left_without_missing], axis=-2)
    return left, total[..., None, :] - left, total[..., None, :]


def node_gains(hist: jax.Array, params: SplitParams, bounds=None,
               monotone: jax.Array | None = None) -> jax.Array:
    """Gain of every candidate split of every node, each node on its own.

    Args:
      hist: f32[F, n, B, 2K]; the last bin holds missing values.
      bounds: (lower, upper) f32[n, K], the range each node's leaves are held to by
        monotone constraints (depthwise trees), or None.
      monotone: i32[F] of -1/0/+1, with ``bounds``: a candidate on a constrained
        feature whose children's values (clipped to the node's range) are in the wrong
        order is not allowed.

    Returns:
      f32[F, n, B - 1, 2]: the gain of "bin <= b goes left" with missing values sent
      left (index 0 of the last axis) or right (index 1); 0 where a child would hold
      less Hessian than ``min_child_weight`` (or the order is wrong).
    """
    n_outputs = hist.shape[-1] // 2
    left, right, total = _children(hist)

    def parts(sums):
        return sums[..., :n_outputs], sums[..., n_outputs:]

    (GL, HL), (GR, HR), (G, H) = parts(left), parts(right), parts(total)
    gain = _score(GL, HL, params) + _score(GR, HR, params) - _score(G, H, params)
    allowed = ((_sum_outputs(HL) >= params.min_child_weight)
               & (_sum_outputs(HR) >= params.min_child_weight))
    if monotone is not None:
        lower, upper = (b[None, :, None, None, :] for b in bounds)  # [1, n, 1, 1, K]
        w_left = jnp.clip(leaf_weight(GL, HL, params), lower, upper)
        w_right = jnp.clip(leaf_weight(GR, HR, params), lower, upper)
        direction = monotone[:, None, None, None, None]
        ordered = jnp.all((direction == 0) | (direction * (w_right - w_left) >= 0), axis=-1)
        allowed = allowed & ordered
    return jnp.where(allowed, gain, 0.0)


def level_gains(hist: jax.Array, params: SplitParams) -> jax.Array:
    """Gain of every candidate split of one oblivious level: ``node_gains`` summed over
    the level's nodes, f32[F, B - 1, 2]."""
    return jnp.sum(node_gains(hist, params), axis=1)


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
    return _argmax_split(gains.reshape(-1), gains.shape[1], params)


def _argmax_split(flat_gains: jax.Array, n_value_bins: int, params: SplitParams) -> LevelSplit:
    """The split of largest gain in ``flat_gains`` f32[..., F * (B - 1) * 2] (the
    candidates of one level or node, in (feature, bin, missing) order), or the
    pass-through split when it does not beat ``min_split_gain``."""
    best = jnp.argmax(flat_gains, axis=-1)
    gain = jnp.take_along_axis(flat_gains, best[..., None], axis=-1)[..., 0]
    feature, rest = jnp.divmod(best, n_value_bins * 2)
    split_bin, missing_right = jnp.divmod(rest, 2)
    do_split = gain > jnp.maximum(params.min_split_gain, 0.0)
    return LevelSplit(
        feature=jnp.where(do_split, feature, 0).astype(jnp.int32),
        split_bin=jnp.where(do_split, split_bin, n_value_bins - 1).astype(jnp.int32),
        default_left=jnp.where(do_split, missing_right == 0, True),
        gain=jnp.where(do_split, gain, 0.0),
    )


def best_node_splits(hist: jax.Array, params: SplitParams, allowed: jax.Array,
                     bounds=None, monotone: jax.Array | None = None) -> LevelSplit:
    """Each node's own best (feature, bin, missing direction), for depthwise trees.

    Args:
      hist: f32[F, n, B, 2K].
      allowed: bool[n, F], the features each node may split on.
      bounds, monotone: as in ``node_gains``.

    Returns:
      A LevelSplit of arrays of shape [n]. Ties and the pass-through split of a node
      that does not split are as in ``best_level_split``.
    """
    gains = node_gains(hist, params, bounds, monotone)  # [F, n, B-1, 2]
    gains = jnp.where(allowed.T[:, :, None, None], gains, -jnp.inf)
    n_nodes, n_value_bins = gains.shape[1], gains.shape[2]
    return _argmax_split(jnp.moveaxis(gains, 1, 0).reshape(n_nodes, -1), n_value_bins, params)


def chosen_children(hist: jax.Array, split: LevelSplit) -> tuple[jax.Array, jax.Array]:
    """(left, right) f32[n, 2K]: the g and h sums of each node's children under its
    chosen split (``best_node_splits``), read from the histogram f32[F, n, B, 2K]."""
    n_nodes = hist.shape[1]
    node_hist = hist[split.feature, jnp.arange(n_nodes)]  # [n, B, 2K]
    below = prefix_sums(node_hist[:, :-1], axis=1)  # [n, B-1, 2K]
    left = jnp.take_along_axis(below, split.split_bin[:, None, None], axis=1)[:, 0]
    left = left + jnp.where(split.default_left[:, None], node_hist[:, -1], 0.0)
    total = below[:, -1] + node_hist[:, -1]
    return left, total - left
