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
Feature sampling draws ``colsample_bytree`` of the features per tree and, of those,
``colsample_bylevel`` per level; a level searches only its drawn features. Depthwise
trees can also draw ``colsample_bynode`` of a level's features for each of its nodes
(XGBoost ``colsample_bynode``, LightGBM ``feature_fraction_bynode``, scikit-learn's
random forest ``max_features``).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

ROW_SAMPLING = ("none", "bernoulli", "poisson", "goss")


class SamplingParams(NamedTuple):
    """Sampling rates as traced f32[] scalars, and the round-independent key."""

    key: jax.Array  # u32[2], jax.random.PRNGKey(seed)
    subsample: jax.Array
    colsample_bytree: jax.Array
    colsample_bylevel: jax.Array
    goss_top_rate: jax.Array
    goss_other_rate: jax.Array
    colsample_bynode: jax.Array | float = 1.0


def round_keys(params: SamplingParams, round_index: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Independent keys for the round's row and feature draws."""
    rows, features = jax.random.split(jax.random.fold_in(params.key, round_index))
    return rows, features


def row_multiplier(key: jax.Array, method: str, params: SamplingParams, g: jax.Array
                   ) -> jax.Array | None:
    """f32[N] per-row weight multiplier for the round, or None for no sampling.

    Args:
      g: f32[N, K], the round's gradients (GOSS ranks rows by their norm).
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
        threshold = jnp.sort(magnitude)[::-1][jnp.minimum(n_top, n_rows) - 1]
        top = magnitude >= threshold
        rest_rate = params.goss_other_rate / jnp.maximum(1.0 - params.goss_top_rate, 1e-6)
        drawn = jax.random.bernoulli(key, jnp.clip(rest_rate, 0.0, 1.0), (n_rows,))
        amplify = (1.0 - params.goss_top_rate) / jnp.maximum(params.goss_other_rate, 1e-6)
        return jnp.where(top, 1.0, jnp.where(drawn, amplify, 0.0))
    raise ValueError(f"row sampling {method!r}: use one of {ROW_SAMPLING}.")


def _draw(key: jax.Array, allowed: jax.Array, rate: jax.Array) -> jax.Array:
    """bool[F]: round(rate * n_allowed) (at least 1) of the allowed features, uniformly."""
    n_allowed = jnp.sum(allowed)
    count = jnp.maximum(jnp.round(rate * n_allowed), 1)
    scores = jnp.where(allowed, jax.random.uniform(key, allowed.shape), 2.0)
    rank = jnp.argsort(jnp.argsort(scores))
    return allowed & (rank < count)


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
    keys = jax.random.split(jax.random.fold_in(key, 1), depth * n_nodes)
    keys = keys.reshape((depth, n_nodes) + keys.shape[1:])

    def level(level_keys, mask):
        return jax.vmap(lambda k: _draw(k, mask, params.colsample_bynode))(level_keys)

    return jax.vmap(level)(keys, level_masks)


def sampled_weight(key: jax.Array, method: str, params: SamplingParams, g: jax.Array,
                   weight: jax.Array) -> jax.Array:
    """f32[N, 1]: the round's row weights, ``weight`` f32[N] times the row multiplier."""
    multiplier = row_multiplier(key, method, params, g)
    return (weight if multiplier is None else weight * multiplier)[:, None]


def tree_feature_masks(key: jax.Array, params: SamplingParams, n_features: int, depth: int,
                       grow_policy: str) -> jax.Array:
    """The features one tree may split on: bool[D, F] per level, or for depthwise trees
    bool[D, 2**(D-1), F] per node."""
    allowed = level_feature_masks(key, params, n_features, depth)
    if grow_policy == "depthwise":
        allowed = node_feature_masks(key, params, allowed, 2 ** (depth - 1))
    return allowed
