"""Regression: squared and absolute error, Huber, pseudo-Huber, quantile, and the squared
error of K outputs at once."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.objectives.base import Objective, weighted_mean, weighted_quantile


def squared_error_loss(y, f):
    """Half the squared error, so that g = f - y and h = 1."""
    return 0.5 * (f - y) ** 2


def absolute_error_loss(y, f):
    """|y - f|. Its Hessian is 0: trees are grown with unit curvature and the leaves
    are refreshed to the median residual."""
    return jnp.abs(y - f)


def huber_loss(y, f, *, delta=1.0):
    """Quadratic within delta of y, linear beyond (Huber 1964)."""
    r = jnp.abs(y - f)
    return jnp.where(r <= delta, 0.5 * r**2, delta * (r - 0.5 * delta))


def pseudo_huber_loss(y, f, *, delta=1.0):
    """delta^2 (sqrt(1 + (r / delta)^2) - 1): a smooth Huber with positive curvature."""
    r = (y - f) / delta
    return delta**2 * (jnp.sqrt(1.0 + r * r) - 1.0)


def quantile_loss(y, f, *, alpha=0.5):
    """The pinball loss of the alpha-quantile."""
    r = y - f
    return jnp.maximum(alpha * r, (alpha - 1.0) * r)


def multi_squared_error_loss(y, f):
    """Half the squared error summed over K outputs (CatBoost's MultiRMSE)."""
    return 0.5 * jnp.sum((f - y) ** 2)


squared_error = Objective("squared_error", squared_error_loss, init_score=weighted_mean,
                          metric="rmse")
absolute_error = Objective("absolute_error", absolute_error_loss,
                           init_score=weighted_quantile(0.5), curvature="constant",
                           leaf_quantile=0.5, metric="mae")


def _positive(value: float, name: str, family: str) -> None:
    if not value > 0 or not np.isfinite(value):
        raise ValueError(f"{family} {name}={value} must be a positive number.")


@functools.cache  # one loss object per parameter: no recompiles
def huber(delta: float = 1.0) -> Objective:
    """Huber loss; grown with unit curvature (its Hessian is 0 in the tails)."""
    _positive(delta, "delta", "huber")
    def loss(y, f):
        return huber_loss(y, f, delta=delta)

    return Objective(f"huber@{delta:g}", loss, init_score=weighted_quantile(0.5),
                     curvature="constant", metric="mae")


@functools.cache  # one loss object per parameter: no recompiles
def pseudo_huber(delta: float = 1.0) -> Objective:
    _positive(delta, "delta", "pseudo_huber")
    def loss(y, f):
        return pseudo_huber_loss(y, f, delta=delta)

    return Objective(f"pseudo_huber@{delta:g}", loss, init_score=weighted_quantile(0.5),
                     metric="mae")


@functools.cache  # one loss object per parameter: no recompiles
def quantile(alpha: float = 0.5) -> Objective:
    """The alpha-quantile: unit curvature for the structure, leaves refreshed to the
    alpha-quantile of the residuals, so coverage is calibrated."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"quantile alpha={alpha} must lie in (0, 1).")

    def loss(y, f):
        return quantile_loss(y, f, alpha=alpha)

    # The metric takes alpha as the name writes it, to 6 significant digits.
    return Objective(f"quantile@{alpha:g}", loss, init_score=weighted_quantile(alpha),
                     curvature="constant", leaf_quantile=alpha, metric=f"pinball@{alpha:g}")


multi_squared_error = Objective(
    "multi_squared_error", multi_squared_error_loss,
    init_score=lambda y, weight: (jnp.matmul(weight, y, precision=jax.lax.Precision.HIGHEST)
                                  / jnp.sum(weight)),
    y_domain=("a 2-D label array (N, K)", lambda y: y.ndim == 2),
    n_outputs=lambda y: int(np.shape(y)[1]), metric="rmse")
