"""Classification: logistic (binary cross-entropy), softmax (multiclass), AdaBoost's
exponential loss and the focal loss."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.objectives.base import (
    Objective,
    is_binary,
    is_class_label,
    is_probability,
    weighted_mean,
)


def _log_odds(y, weight):
    # The log-odds of the weighted mean label, clipped away from 0 and 1 so that a
    # label column with one class still starts at a finite margin.
    p = jnp.clip(weighted_mean(y, weight), 1e-6, 1.0 - 1e-6)
    return jnp.log(p) - jnp.log1p(-p)


def logistic_loss(y, f):
    """Binary cross-entropy on the margin, y in {0, 1} (or a probability)."""
    # log(1 + e^f) - y f written with logaddexp: no overflow for large |f|.
    return jnp.logaddexp(0.0, f) - y * f


def softmax_loss(y, f):
    """Multiclass cross-entropy: y a class index, f the K class margins."""
    return jax.nn.logsumexp(f) - f[y.astype(jnp.int32)]


def exponential_loss(y, f):
    """AdaBoost's exponential loss, y in {0, 1} (mapped to -1/+1)."""
    return jnp.exp(-(2.0 * y - 1.0) * f)


def _half_log_odds(y, weight):
    return 0.5 * _log_odds(y, weight)


def _sigmoid_of_twice(f):
    # AdaBoost's margin is half the log-odds: P(y = 1) = 1 / (1 + e^{-2f}).
    return jax.nn.sigmoid(2.0 * f)


def focal_loss(y, f, *, gamma=2.0):
    """Focal loss (Lin et al. 2017) on the margin: cross-entropy down-weighted on
    well-classified rows by (1 - p_t)^gamma. Written with log-sigmoids for stability."""
    log_p, log_not_p = jax.nn.log_sigmoid(f), jax.nn.log_sigmoid(-f)
    p, not_p = jnp.exp(log_p), jnp.exp(log_not_p)
    return -(y * not_p**gamma * log_p + (1.0 - y) * p**gamma * log_not_p)


logistic = Objective(
    "logistic", logistic_loss, link=jax.nn.sigmoid, init_score=_log_odds,
    y_domain=("labels in [0, 1] (0/1 classes or probabilities)", is_probability),
    classification=True, metric="logloss")


def _n_classes(y) -> int:
    return int(np.max(np.asarray(y))) + 1


def _log_class_frequencies(y, weight):
    # The loss-minimising constant of softmax: log class frequencies (centred), with
    # absent classes floored so the start stays finite.
    n_classes = int(np.max(np.asarray(y))) + 1
    counts = jax.ops.segment_sum(weight, y.astype(jnp.int32), num_segments=n_classes)
    log_frequency = jnp.log(jnp.maximum(counts / jnp.sum(weight), 1e-6))
    return log_frequency - jnp.mean(log_frequency)


softmax = Objective(
    "softmax", softmax_loss, link=jax.nn.softmax, init_score=_log_class_frequencies,
    y_domain=("class indices 0, 1, ..., K - 1", is_class_label), n_outputs=_n_classes,
    classification=True, min_classes=2, metric="multi_logloss")
exponential = Objective(
    "exponential", exponential_loss, link=_sigmoid_of_twice, init_score=_half_log_odds,
    y_domain=("0/1 labels", is_binary), classification=True, metric="logloss")


@functools.cache  # one loss object per parameter: no recompiles
def focal(gamma: float = 2.0) -> Objective:
    if not gamma >= 0 or not np.isfinite(gamma):
        raise ValueError(f"focal gamma={gamma} must be a number >= 0.")
    def loss(y, f):
        return focal_loss(y, f, gamma=gamma)

    return Objective(f"focal@{gamma:g}", loss, link=jax.nn.sigmoid, init_score=_log_odds,
                     y_domain=("0/1 labels", is_binary), classification=True,
                     metric="logloss")
