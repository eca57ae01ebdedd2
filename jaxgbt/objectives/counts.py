"""Counts and positive targets, all with a log link: Poisson, gamma and Tweedie."""

import functools

import jax.numpy as jnp

from jaxgbt.objectives.base import Objective, is_nonnegative, is_positive, weighted_mean


def _log_weighted_mean(y, weight):
    # log of the mean: the start of every log-link objective; floored so that an all-zero
    # count column still starts at a finite margin.
    return jnp.log(jnp.maximum(weighted_mean(y, weight), 1e-9))


def poisson_loss(y, f):
    """Poisson negative log-likelihood with log link, up to a constant in y."""
    return jnp.exp(f) - y * f


def gamma_loss(y, f):
    """Gamma negative log-likelihood with log link (unit shape), up to a constant."""
    return y * jnp.exp(-f) + f


def _gamma_fisher(y, f):
    # E[y e^{-f}] = 1 when E[y] = e^f: the expected curvature is constant.
    del y, f
    return jnp.float32(1.0)


def tweedie_loss(y, f, *, power=1.5):
    """Tweedie negative log-likelihood with log link, 1 < power < 2 (compound
    Poisson-gamma: zeros and positive amounts)."""
    return (-y * jnp.exp((1.0 - power) * f) / (1.0 - power)
            + jnp.exp((2.0 - power) * f) / (2.0 - power))


def _tweedie_fisher(power):
    def fisher(y, f):
        del y
        return jnp.exp((2.0 - power) * f)

    return fisher


poisson = Objective("poisson", poisson_loss, link=jnp.exp, init_score=_log_weighted_mean,
                    y_domain=("non-negative counts", is_nonnegative),
                    fisher=lambda y, f: jnp.exp(f), metric="poisson_deviance")
gamma = Objective("gamma", gamma_loss, link=jnp.exp, init_score=_log_weighted_mean,
                  y_domain=("positive values", is_positive), fisher=_gamma_fisher,
                  metric="gamma_deviance")


@functools.cache  # one loss object per parameter: no recompiles
def tweedie(power: float = 1.5) -> Objective:
    if not 1.0 < power < 2.0:
        raise ValueError(f"tweedie power={power} must lie in (1, 2).")

    def loss(y, f):
        return tweedie_loss(y, f, power=power)

    # The metric takes the power as the name writes it, to 6 significant digits.
    return Objective(f"tweedie@{power:g}", loss, link=jnp.exp, init_score=_log_weighted_mean,
                     y_domain=("non-negative values", is_nonnegative),
                     fisher=_tweedie_fisher(power), metric=f"tweedie@{power:g}")
