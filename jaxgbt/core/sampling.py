"""Random row and feature sampling per round, from JAX PRNG keys.

Every random choice of round t uses ``jax.random.fold_in(key, t)``, with the key made
from ``fit(seed=...)``: the same seed gives the same model, and a resumed or chunked fit
draws exactly what an uninterrupted one draws. The rates are traced arrays, so they can
be swept under ``vmap`` like any other hyperparameter; only the method is static.

Row sampling multiplies each row's weight for the round:
  bernoulli  keep a row with probability ``subsample`` (XGBoost ``subsample``,
             LightGBM ``bagging_fraction``)
  poisson    a Poisson(``subsample``) count per row: the bootstrap, as in random
             forests when ``subsample = 1``
  goss       LightGBM's gradient-based one-side sampling: keep the ``goss_top_rate``
             rows of largest |g|, and of the rest a ``goss_other_rate`` fraction,
             weighted up by (1 - top) / other
  bayesian   CatBoost's Bayesian bootstrap: a weight (-log u)^``bagging_temperature``
             per row, u uniform on (0, 1): at temperature 1 the Exp(1) weights of
             Rubin's Bayesian bootstrap, at 0 every row at weight 1; every row is kept
  mvs        CatBoost's minimal variance sampling (its default bootstrap on CPU): row i
             is kept with probability p_i = min(1, r_i / mu) and weighted up by 1 / p_i,
             r_i = sqrt(|w_i g_i|^2 + lambda), mu such that the p_i sum to ``subsample``
             times the rows of positive weight, lambda the square of the mean |w_i g_i|
             (CatBoost's ``mvs_reg`` on its first round): rows of large gradients are
             kept, the others thinned with their weight raised, so sums of g and h keep
             their expectation with less variance than a uniform draw
A round that samples rows by ``bernoulli`` or ``poisson`` grows its tree on the drawn
rows alone when the rate is known on the host: they are gathered into a fixed number of
slots (``sample_capacity``, a bound on how many rows a round draws) and every histogram
of the tree reads only those. The tree is the one grown on all rows with the undrawn
rows at weight 0 (the same sums, in the same order); only the margins are then updated
for all rows. GOSS keeps every row tied at its magnitude threshold, so how many rows it
keeps has no bound below N, and it grows on all rows.

Feature sampling draws ``colsample_bytree`` of the features per tree and, of those,
``colsample_bylevel`` per level; a level searches only its drawn features. Depthwise
trees can also draw ``colsample_bynode`` of a level's features for each of its nodes
(XGBoost ``colsample_bynode``, LightGBM ``feature_fraction_bynode``, scikit-learn's
random forest ``max_features``).
"""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.layout import layout
from jaxgbt.core.order import kth_largest
from jaxgbt.core.tracing import is_traced

ROW_SAMPLING = ("none", "bernoulli", "poisson", "goss", "bayesian", "mvs")


# GOSS's rates as divisors are at least this: a top rate of 1 or an other rate of 0
# leaves no rows to draw, and the division must stay finite.
_MIN_RATE = 1e-6
# Per-node feature draws use fold_in(tree key, this), apart from the per-level draws.
_NODE_STREAM = 1

class SamplingParams(NamedTuple):
    """Sampling rates as traced f32[] scalars, and the round-independent key."""

    key: jax.Array  # u32[2], jax.random.PRNGKey(seed)
    subsample: jax.Array
    colsample_bytree: jax.Array
    colsample_bylevel: jax.Array
    goss_top_rate: jax.Array
    goss_other_rate: jax.Array
    colsample_bynode: jax.Array | float = 1.0
    bagging_temperature: jax.Array | float = 1.0


def seed_key(seed) -> jax.Array:
    """u32[2]: ``jax.random.PRNGKey(seed)`` for a seed in [0, 2**32), built on the host
    when the seed is concrete (the key of such a seed is the pair (0, seed)): PRNGKey
    compiles a program of its own, once in every process, which a fit would otherwise
    wait for. A traced seed (a sweep's) goes through PRNGKey."""
    if is_traced(seed):
        return jax.random.PRNGKey(seed)
    return jnp.asarray(np.array([0, int(seed)], np.uint32))


def round_keys(params: SamplingParams, round_index: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Independent keys for the round's row and feature draws."""
    rows, features = jax.random.split(jax.random.fold_in(params.key, round_index))
    return rows, features


def row_multiplier(key: jax.Array, method: str, params: SamplingParams, g: jax.Array,
                   weight: jax.Array | None = None) -> jax.Array | None:
    """f32[N] per-row weight multiplier for the round, or None for no sampling.

    Args:
      g: f32[N, K], the round's gradients (GOSS and MVS rank rows by their norm).
      weight: f32[N], the rows' weights (MVS: rows of weight 0, padding among them, are
        never drawn nor counted); None weighs every row 1.
    """
    n_rows = g.shape[0]
    if method == "none":
        return None
    if method == "bernoulli":
        return jax.random.bernoulli(key, params.subsample, (n_rows,)).astype(jnp.float32)
    if method == "poisson":
        return jax.random.poisson(key, params.subsample, (n_rows,)).astype(jnp.float32)
    if method == "goss":
        magnitude = jnp.sqrt(jnp.sum(g * g, axis=1))
        n_top = jnp.maximum(jnp.round(params.goss_top_rate * n_rows), 1).astype(jnp.int32)
        # The n_top-th largest magnitude: rows at or above it are kept as they are.
        threshold = kth_largest(magnitude, jnp.minimum(n_top, n_rows))
        top = magnitude >= threshold
        rest_rate = params.goss_other_rate / jnp.maximum(1.0 - params.goss_top_rate, _MIN_RATE)
        drawn = jax.random.bernoulli(key, jnp.clip(rest_rate, 0.0, 1.0), (n_rows,))
        amplify = (1.0 - params.goss_top_rate) / jnp.maximum(params.goss_other_rate, _MIN_RATE)
        return jnp.where(top, 1.0, jnp.where(drawn, amplify, 0.0))
    if method == "bayesian":
        # u in [tiny, 1): -log u is finite, and 0 only at u = 1, never drawn.
        u = jax.random.uniform(key, (n_rows,), minval=jnp.finfo(jnp.float32).tiny)
        return jnp.power(-jnp.log(u), params.bagging_temperature)
    if method == "mvs":
        return _minimal_variance_multiplier(key, params.subsample, g, weight)
    raise ValueError(f"row sampling {method!r}: use one of {ROW_SAMPLING}.")


# Lanes of ``row_sum``: the rows are added in row order within each of this many lanes.
_SUM_LANES = 128


def row_sum(values: jax.Array) -> jax.Array:
    """f32[]: the sum of ``values`` f32[N], with the same bits when zero rows are appended
    (a fit padded to its row bucket keeps the unpadded fit's model): row i goes to lane
    i % 128, each lane adds its rows in row order, then the 128 lane totals are added."""
    lanes = jnp.pad(values, (0, -values.shape[0] % _SUM_LANES)).reshape(-1, _SUM_LANES)
    return jnp.sum(jnp.sum(lanes, axis=0))


# Halvings of the interval that holds MVS's threshold: after 24 the threshold is known
# to 2**-24 of the first interval's width, float32's resolution.
_MVS_HALVINGS = 24


def mvs_threshold(importance: jax.Array, expected: jax.Array) -> jax.Array:
    """f32[]: mu with sum_i min(1, importance_i / mu) = ``expected`` (to float32), or
    just below it: the smallest mu found whose expected sample is at most ``expected``.

    Args:
      importance: f32[N] >= 0; rows at 0 are never drawn.
      expected: f32[] > 0, the expected sample size (at most the count of positive
        importances; at or above it every positive row is kept, p = 1).
    """
    tiny = jnp.finfo(jnp.float32).tiny
    # sum min(1, r / mu) <= sum r / mu, which is `expected` at mu = sum r / expected.
    high = jnp.maximum(row_sum(importance) / expected, tiny)

    def halve(_, bounds):
        low, high = bounds
        middle = 0.5 * (low + high)
        too_many = row_sum(jnp.minimum(1.0, importance / jnp.maximum(middle, tiny))) > expected
        return jnp.where(too_many, middle, low), jnp.where(too_many, high, middle)

    return jax.lax.fori_loop(0, _MVS_HALVINGS, halve, (jnp.float32(0.0), high))[1]


def _minimal_variance_multiplier(key: jax.Array, rate: jax.Array, g: jax.Array,
                                 weight: jax.Array | None) -> jax.Array:
    """f32[N]: MVS's per-row multiplier (``ROW_SAMPLING``), 1 / p_i for a kept row, else 0."""
    if weight is None:
        weight = jnp.ones(g.shape[0], g.dtype)
    counted = weight > 0
    norm = jnp.sqrt(jnp.sum(jnp.square(weight[:, None] * g), axis=1))
    n_counted = jnp.maximum(jnp.sum(counted, dtype=jnp.int32).astype(jnp.float32), 1.0)
    regulariser = jnp.square(row_sum(jnp.where(counted, norm, 0.0)) / n_counted)
    importance = jnp.where(counted, jnp.sqrt(jnp.square(norm) + regulariser), 0.0)
    threshold = mvs_threshold(importance, jnp.clip(rate, 0.0, 1.0) * n_counted)
    probability = jnp.minimum(1.0, importance / threshold)
    u = jax.random.uniform(key, (g.shape[0],))
    kept = counted & (u < probability)
    multiplier = jnp.where(kept, 1.0 / jnp.where(kept, probability, 1.0), 0.0)
    # At a rate of 1 every row is kept at weight 1 exactly (not at mu's float32 rounding).
    return jnp.where(rate >= 1.0, counted.astype(jnp.float32), multiplier)


# A round's drawn rows are gathered only when at most this fraction of the rows could be
# drawn: the gather costs a fraction of a level's histogram and pays at rates up to about
# this one, not above (docs/benchmarks.md).
GATHER_AT_MOST = 0.7

# Slots for the drawn rows: this many standard deviations above the expected count.
# A round draws more rows than that with probability below 1e-15; its rows past the
# last slot then count with weight 0 that round (a smaller sample, nothing else).
CAPACITY_SIGMAS = 8.0

# Capacities are rounded up to a multiple of N / CAPACITY_STEPS, so that nearby rates
# share one compiled program.
CAPACITY_STEPS = 32


def sample_capacity(method: str, subsample, n_rows: int) -> int | None:
    """The row slots a sampled round grows its tree on, or None to grow on all rows.

    Args:
      method: the row sampling method (``ROW_SAMPLING``).
      subsample: the rate, a Python float or a traced array (then None: the bound
        must be known when the program is compiled).
      n_rows: N.

    A row is drawn with probability p = ``subsample`` (bernoulli) or
    1 - exp(-``subsample``) (poisson, a count of at least one); the count is binomial,
    and the capacity is its mean plus ``CAPACITY_SIGMAS`` standard deviations, rounded
    up to a step of N / ``CAPACITY_STEPS``. None when that is more than
    ``GATHER_AT_MOST`` of the rows.
    """
    if method not in ("bernoulli", "poisson") or is_traced(subsample):
        return None
    rate = float(subsample)
    p = rate if method == "bernoulli" else -math.expm1(-rate)
    p = min(max(p, 0.0), 1.0)
    bound = p * n_rows + CAPACITY_SIGMAS * math.sqrt(n_rows * p * (1.0 - p)) + CAPACITY_SIGMAS
    step = max(1, -(-n_rows // CAPACITY_STEPS))
    capacity = min(n_rows, step * math.ceil(bound / step))
    return capacity if capacity <= GATHER_AT_MOST * n_rows else None


def drawn_rows(drawn: jax.Array, capacity: int) -> tuple[jax.Array, jax.Array]:
    """The drawn rows gathered into ``capacity`` slots, in row order.

    Args:
      drawn: bool[N], the rows a round drew.
      capacity: M, from ``sample_capacity``.

    Returns:
      (rows i32[M], in_use bool[M]): slot i holds row ``rows[i]``; slots past the
      drawn rows hold distinct rows (spread over the histogram's bins, not all on one)
      and are not in use, and so are any drawn rows past slot M - 1.
    """
    n_rows = drawn.shape[0]
    # An associative scan: jnp.cumsum lowers to a slower reduce-window on CPU.
    position = jax.lax.associative_scan(jnp.add, drawn.astype(jnp.int32)) - 1
    # Rows not drawn (and any past the last slot) go to a spare slot M, dropped after:
    # a scatter in bounds is several times faster than one that drops indices.
    slot = jnp.where(drawn & (position < capacity), position, capacity)
    rows = (jnp.arange(capacity + 1, dtype=jnp.int32) % n_rows).at[slot].set(
        jnp.arange(n_rows, dtype=jnp.int32))
    # The drawn rows fill the first slots.
    in_use = jnp.arange(capacity) < jnp.sum(drawn, dtype=jnp.int32)
    return rows[:capacity], in_use


def _draw(key: jax.Array, allowed: jax.Array, rate: jax.Array) -> jax.Array:
    """bool[F]: round(rate * n_allowed) (at least 1) of the allowed features, uniformly."""
    n_allowed = jnp.sum(allowed)
    count = jnp.maximum(jnp.round(rate * n_allowed), 1)
    scores = jnp.where(allowed, jax.random.uniform(key, allowed.shape), 2.0)
    # The features of the `count` smallest scores (ties to the lower index): one sort and
    # a scatter of its order, where the second argsort of each feature's rank was as
    # slow as the first.
    order = jnp.argsort(scores)
    first = jnp.zeros(allowed.shape, bool).at[order].set(
        jnp.arange(allowed.shape[0]) < count, unique_indices=True)
    return allowed & first


def level_feature_masks(key: jax.Array, params: SamplingParams, n_features: int,
                        depth: int) -> jax.Array:
    """bool[D, F]: the features each level of one tree may split on."""
    tree_key, level_key = jax.random.split(key)
    tree = _draw(tree_key, jnp.ones(n_features, bool), params.colsample_bytree)
    return jax.vmap(lambda k: _draw(k, tree, params.colsample_bylevel))(
        jax.random.split(level_key, depth))


def node_feature_masks(key: jax.Array, params: SamplingParams, level_masks: jax.Array,
                       n_nodes: int) -> jax.Array:
    """bool[D, n_nodes, F]: the features each node of a depthwise tree may split on,
    ``colsample_bynode`` of its level's features bool[D, F] (``level_feature_masks``,
    whose draws these leave unchanged)."""
    depth = level_masks.shape[0]
    keys = jax.random.split(jax.random.fold_in(key, _NODE_STREAM), depth * n_nodes)
    keys = keys.reshape((depth, n_nodes) + keys.shape[1:])

    def level(level_keys, mask):
        return jax.vmap(lambda k: _draw(k, mask, params.colsample_bynode))(level_keys)

    return jax.vmap(level)(keys, level_masks)


def sampled_weight(key: jax.Array, method: str, params: SamplingParams, g: jax.Array,
                   weight: jax.Array) -> jax.Array:
    """f32[N, 1]: the round's row weights, ``weight`` f32[N] times the row multiplier."""
    multiplier = row_multiplier(key, method, params, g, weight)
    return (weight if multiplier is None else weight * multiplier)[:, None]


def tree_feature_masks(key: jax.Array, params: SamplingParams, n_features: int, depth: int,
                       grow_policy: str) -> jax.Array:
    """The features one tree may split on, in the shape its layout asks for: bool[D, F]
    per level, or for depthwise trees bool[D, 2**(D-1), F] per node."""
    shape = layout(grow_policy).feature_mask_shape(depth, n_features)
    allowed = level_feature_masks(key, params, n_features, depth)
    if allowed.shape == shape:
        return allowed
    # One draw per node, each within its level's draw.
    return node_feature_masks(key, params, allowed, shape[1])
