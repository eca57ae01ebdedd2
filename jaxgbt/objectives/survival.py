"""Survival: accelerated failure time (interval-censored times, one row at a time) and
Cox proportional hazards (one loss over the whole data set)."""

import functools

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr

from jaxgbt.objectives.base import Objective, is_interval, is_time_event, weighted_mean


def _log_cdf_and_log_sf(distribution: str):
    if distribution == "normal":
        return log_ndtr, lambda z: log_ndtr(-z)
    if distribution == "logistic":
        return jax.nn.log_sigmoid, lambda z: jax.nn.log_sigmoid(-z)
    raise ValueError(f"distribution={distribution!r}: use 'normal' or 'logistic'.")


def _log_pdf(distribution: str, z):
    if distribution == "normal":
        return -0.5 * z * z - 0.5 * jnp.log(2 * jnp.pi)
    return -z - 2.0 * jax.nn.softplus(-z)


def aft_loss_fn(distribution: str = "normal", sigma: float = 1.0):
    """Accelerated failure time negative log-likelihood (XGBoost's survival:aft).

    y_i = (lower, upper) bounds of the event time: equal for an observed event,
    upper = +inf for right censoring. log(time) = f + sigma * Z, Z ~ distribution.
    """
    log_cdf, log_sf = _log_cdf_and_log_sf(distribution)

    def aft_loss(y, f):
        lower, upper = y[0], y[1]
        z_lower = (jnp.log(lower) - f) / sigma
        observed = lower == upper
        censored_right = jnp.isinf(upper)
        safe_upper = jnp.where(censored_right | observed, 2.0 * lower, upper)
        z_upper = (jnp.log(safe_upper) - f) / sigma
        density = -_log_pdf(distribution, z_lower) + jnp.log(sigma * lower)
        survival = -log_sf(z_lower)
        # log(F(b) - F(a)) = log F(b) + log(1 - F(a)/F(b)), both from log-CDFs.
        log_b, log_a = log_cdf(z_upper), log_cdf(z_lower)
        interval = -(log_b + jnp.log1p(-jnp.exp(jnp.minimum(log_a - log_b, -1e-7))))
        return jnp.where(observed, density, jnp.where(censored_right, survival, interval))

    aft_loss.__name__ = f"aft_{distribution}_loss"
    return aft_loss


def _aft_init(y, weight):
    return weighted_mean(jnp.log(y[:, 0]), weight)


def _cumulative_logsumexp(f):
    """log of the running sum of e^f, shifted by max(f) for range. (lax.cumlogsumexp is
    exact for any range but its gradient compiled far slower on CPU; margins spanning
    more than ~80 would underflow here, and are floored to stay finite.)"""
    top = jnp.max(jnp.where(jnp.isfinite(f), f, -jnp.inf))
    return jnp.log(jnp.maximum(jnp.cumsum(jnp.exp(f - top)), 1e-37)) + top


def _tie_run_end(sorted_time):
    """i32[N]: for each position of a sorted time array, the last position holding the
    same time. With ties, every tied row's risk set ends there (Breslow)."""
    n = sorted_time.shape[0]
    is_last = jnp.concatenate([sorted_time[1:] != sorted_time[:-1], jnp.array([True])])
    return jax.lax.cummin(jnp.where(is_last, jnp.arange(n), n), reverse=True)


def cox_loss(y, f, mask):
    """Cox proportional hazards negative log partial likelihood, Breslow ties.

    y: (time, event) per row, f: log hazard ratios, mask: real rows. The risk set of an
    event at time t is every row with time >= t.
    """
    time, event = y[:, 0], y[:, 1] * mask
    f = jnp.where(mask, f, -jnp.inf)
    order = jnp.argsort(-time)  # latest first: risk sets are prefixes
    log_risk = _cumulative_logsumexp(f[order])  # log sum over rows with time >= sorted time
    end = _tie_run_end(time[order])
    log_denominator = log_risk[end]
    return jnp.sum(jnp.where(event[order] > 0, log_denominator - f[order], 0.0))


def _cox_curvature(y, f, mask):
    """The exact Hessian diagonal of ``cox_loss`` in O(N log N):
    h_k = sum over events i with k in R_i of p_ik (1 - p_ik), p_ik = e^{f_k} / S_i."""
    time, event = y[:, 0], y[:, 1] * mask
    f = jnp.where(mask, f, -jnp.inf)
    order = jnp.argsort(-time)
    sorted_time, sorted_f = time[order], f[order]
    log_risk = _cumulative_logsumexp(sorted_f)
    end = _tie_run_end(sorted_time)
    log_s = log_risk[end]
    is_event = event[order] > 0
    # Row k is in event i's risk set when end(i) >= position(k): sums over events whose
    # end is at or after k, a reverse cumulative sum indexed by end position.
    n = f.shape[0]
    first = jax.ops.segment_sum(jnp.where(is_event, jnp.exp(-log_s), 0.0), end, n)
    second = jax.ops.segment_sum(jnp.where(is_event, jnp.exp(-2.0 * log_s), 0.0), end, n)
    first = jnp.cumsum(first[::-1])[::-1]
    second = jnp.cumsum(second[::-1])[::-1]
    h_sorted = jnp.exp(sorted_f) * first - jnp.exp(2.0 * sorted_f) * second
    h = jnp.zeros_like(h_sorted).at[order].set(h_sorted)
    return jnp.where(mask, h, 0.0)


@functools.cache  # one loss object per parameter: no recompiles
def aft(distribution: str = "normal", sigma: float = 1.0) -> Objective:
    """Accelerated failure time model; y of shape (N, 2): (lower, upper) time bounds."""
    if not 0 < sigma < float("inf"):
        raise ValueError(f"aft_{distribution} sigma={sigma} must be a positive number (the "
                         "scale of log time's noise).")
    loss = aft_loss_fn(distribution, sigma)
    return Objective(f"aft_{distribution}@{sigma:g}", loss, link=jnp.exp, init_score=_aft_init,
                     y_domain=("(lower, upper) time bounds with 0 < lower <= upper, lower finite "
                               "(upper = inf for right censoring)", is_interval),
                     y_allows_inf=True)


cox = Objective("cox", cox_loss, link=jnp.exp, init_score=lambda y, weight: jnp.zeros(1),
                y_domain=("(time, event) rows: time > 0, event 0 or 1", is_time_event),
                curvature="fisher", fisher=_cox_curvature, kind="dataset",
                metric="concordance_index")
