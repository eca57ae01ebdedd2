"""Built-in objectives: plain JAX losses plus the facts boosting needs.

An objective is a loss written as a user would write it, together with its inverse
link (margin -> prediction), its constant start, the labels it accepts and its
default curvature. Built-ins take the same path as user losses: jaxgbt differentiates
them with ``jax.grad``; nothing is special-cased.

Three shapes of loss:

- per row, ``loss(y_i, f_i) -> scalar``: ``f_i`` has shape () or, for vector outputs,
  (K,); ``y_i`` is one row of ``y`` (a scalar, a vector, or a dict of them);
- per group (``kind="group"``, ranking), ``loss(y_q, f_q, mask_q) -> scalar`` over one
  query's rows padded to a fixed size M, ``mask_q`` marking real rows;
- per data set (``kind="dataset"``, Cox), the group form over all rows at once.
"""

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

Loss = Callable[..., jax.Array]
Link = Callable[[jax.Array], jax.Array]


class Objective(NamedTuple):
    """A loss and what comes with it.

    Attributes:
      name: name used in saved models and messages.
      loss: the loss (see the module docstring for its three forms).
      link: inverse link applied by ``Booster.predict`` to raw margins, or None for
        the identity.
      init_score: ``init_score(y, weight) -> f32[K]`` giving the constant start, or
        None to find it by Newton steps on the loss itself.
      y_domain: (description, host check ``y -> bool``) of the allowed labels, or None
        for any finite label.
      curvature: default curvature, one of ``_derivatives.CURVATURES``.
      fisher: the objective's own curvature for ``curvature="fisher"``: the expected
        Hessian of one row (``fisher(y_i, f_i)``), or for group/data-set losses a
        closed-form Hessian diagonal (``fisher(y_q, f_q, mask_q) -> f32[M]``).
      leaf_quantile: when set, leaves are refreshed to this weighted quantile of the
        residuals y - f (absolute error, quantile), see ``jaxgbt.core.leaves``.
      n_outputs: ``n_outputs(y) -> K`` for vector-output objectives, else None.
      kind: "row", "group" or "dataset".
      y_allows_inf: labels may be +inf (right-censored AFT upper bounds).
    """

    name: str
    loss: Loss
    link: Link | None = None
    init_score: Callable[[Any, jax.Array], jax.Array] | None = None
    y_domain: tuple[str, Callable[[Any], bool]] | None = None
    curvature: str = "exact"
    fisher: Callable | None = None
    leaf_quantile: float | None = None
    n_outputs: Callable[[Any], int] | None = None
    kind: str = "row"
    y_allows_inf: bool = False


# ---------------------------------------------------------------------------------------
# Constant starts and label checks shared by several objectives.


def _weighted_mean(y, weight):
    return jnp.atleast_1d(jnp.sum(weight * y) / jnp.sum(weight))


def _weighted_quantile(alpha: float):
    def init(y, weight):
        order = jnp.argsort(y)
        cumulative = jnp.cumsum(weight[order])
        position = jnp.searchsorted(cumulative, alpha * cumulative[-1])
        return jnp.atleast_1d(y[order][jnp.clip(position, 0, y.shape[0] - 1)])

    return init


def _log_weighted_mean(y, weight):
    # log of the mean: the start of every log-link objective; floored so that an all-zero
    # count column still starts at a finite margin.
    return jnp.log(jnp.maximum(_weighted_mean(y, weight), 1e-9))


def _log_odds(y, weight):
    # The log-odds of the weighted mean label, clipped away from 0 and 1 so that a
    # label column with one class still starts at a finite margin.
    p = jnp.clip(_weighted_mean(y, weight), 1e-6, 1.0 - 1e-6)
    return jnp.log(p) - jnp.log1p(-p)


def _is_probability(y) -> bool:
    return bool(((y >= 0) & (y <= 1)).all())


def _is_binary(y) -> bool:
    return bool(np.isin(y, (0, 1)).all())


def _is_nonnegative(y) -> bool:
    return bool((y >= 0).all())


def _is_positive(y) -> bool:
    return bool((y > 0).all())


def _is_class_label(y) -> bool:
    return y.ndim == 1 and bool(((y >= 0) & (y == np.round(y))).all())


def _is_interval(y) -> bool:
    return (y.ndim == 2 and y.shape[1] == 2 and bool((y[:, 0] > 0).all())
            and bool(np.isfinite(y[:, 0]).all())
            and bool((y[:, 1] >= y[:, 0]).all()))


def _is_time_event(y) -> bool:
    return (y.ndim == 2 and y.shape[1] == 2 and bool((y[:, 0] > 0).all())
            and bool(np.isin(y[:, 1], (0, 1)).all()))


# ---------------------------------------------------------------------------------------
# Regression.


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


# ---------------------------------------------------------------------------------------
# Classification.


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


# ---------------------------------------------------------------------------------------
# Counts and positive targets (log link).


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


# ---------------------------------------------------------------------------------------
# Survival.


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
    return _weighted_mean(jnp.log(y[:, 0]), weight)


def _cumulative_logsumexp(f):
    """log of the running sum of e^f, shifted by max(f) for range. (lax.cumlogsumexp is
    exact for any range but its gradient compiled 12x slower on CPU; margins spanning
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


# ---------------------------------------------------------------------------------------
# Ranking (one query's rows, padded to M with a mask).


def _pair_mask(y, mask):
    both = mask[:, None] & mask[None, :]
    return both & (y[:, None] > y[None, :])


def pairwise_logistic_loss(y, f, mask):
    """RankNet: logistic loss on every pair (i, j) of the query with y_i > y_j."""
    pairs = _pair_mask(y, mask)
    return jnp.sum(jnp.where(pairs, jnp.logaddexp(0.0, -(f[:, None] - f[None, :])), 0.0))


def _pair_curvature(pair_weight, f):
    """The Hessian diagonal of sum_ij w_ij log(1 + e^-(f_i - f_j)) with w held constant:
    row k gets w_ij s_ij (1 - s_ij), s_ij = sigmoid(f_i - f_j), from every pair it is in.
    Autodiff's diagonal takes M Hessian-vector products per query (M x the gradient's
    cost); this is one pass (100,000 rows in queries of 50: 0.6-0.7 s per tree against
    ~0.03)."""
    s = jax.nn.sigmoid(f[:, None] - f[None, :])
    c = pair_weight * s * (1.0 - s)
    return jnp.sum(c, axis=1) + jnp.sum(c, axis=0)


def _pairwise_logistic_curvature(y, f, mask):
    return _pair_curvature(_pair_mask(y, mask).astype(f.dtype), f)


def _dcg_discount(f, mask):
    # Rank of each row by descending score (0 = top); padding rows rank last.
    score = jnp.where(mask, f, -jnp.inf)
    rank = jnp.argsort(jnp.argsort(-score))
    return 1.0 / jnp.log2(rank + 2.0)


def _lambdarank_weights(y, f, mask):
    """f32[M, M]: |delta NDCG| of swapping i and j in the current ranking, for the pairs
    with y_i > y_j (0 elsewhere), held constant (stop_gradient)."""
    gain = jnp.where(mask, 2.0**y - 1.0, 0.0)
    discount = jax.lax.stop_gradient(_dcg_discount(f, mask))
    ideal = jnp.sort(gain)[::-1]
    max_dcg = jnp.sum(ideal / jnp.log2(jnp.arange(gain.shape[0]) + 2.0))
    delta = jnp.abs((gain[:, None] - gain[None, :]) * (discount[:, None] - discount[None, :]))
    delta = delta / jnp.maximum(max_dcg, 1e-9)
    return jnp.where(_pair_mask(y, mask), delta, 0.0)


def lambdarank_ndcg_loss(y, f, mask):
    """LambdaRank for NDCG (Burges 2010): pairwise logistic losses weighted by
    |delta NDCG| of swapping the pair in the current ranking. The weights are held
    constant (stop_gradient), so autodiff gives exactly the lambda gradients."""
    pair_loss = jnp.logaddexp(0.0, -(f[:, None] - f[None, :]))
    return jnp.sum(_lambdarank_weights(y, f, mask) * pair_loss)


def _lambdarank_ndcg_curvature(y, f, mask):
    return _pair_curvature(_lambdarank_weights(y, f, mask), f)


def listwise_softmax_loss(y, f, mask):
    """ListNet-style cross-entropy between the query's gain distribution
    (2^y - 1, normalised) and the softmax of its scores."""
    gain = jnp.where(mask, 2.0**y - 1.0, 0.0)
    target = gain / jnp.maximum(jnp.sum(gain), 1e-9)
    log_p = jax.nn.log_softmax(jnp.where(mask, f, -jnp.inf))
    return -jnp.sum(jnp.where(mask, target * log_p, 0.0))


# ---------------------------------------------------------------------------------------
# The built-in objectives.

squared_error = Objective("squared_error", squared_error_loss, init_score=_weighted_mean)
absolute_error = Objective("absolute_error", absolute_error_loss,
                           init_score=_weighted_quantile(0.5), curvature="constant",
                           leaf_quantile=0.5)
logistic = Objective(
    "logistic", logistic_loss, link=jax.nn.sigmoid, init_score=_log_odds,
    y_domain=("labels in [0, 1] (0/1 classes or probabilities)", _is_probability))


def _positive(value: float, name: str, family: str) -> None:
    if not value > 0 or not np.isfinite(value):
        raise ValueError(f"{family} {name}={value} must be a positive number.")


@functools.cache  # one loss object per parameter: no recompiles
def huber(delta: float = 1.0) -> Objective:
    """Huber loss; grown with unit curvature (its Hessian is 0 in the tails)."""
    _positive(delta, "delta", "huber")
    def loss(y, f):
        return huber_loss(y, f, delta=delta)

    return Objective(f"huber@{delta:g}", loss, init_score=_weighted_quantile(0.5),
                     curvature="constant")


@functools.cache  # one loss object per parameter: no recompiles
def pseudo_huber(delta: float = 1.0) -> Objective:
    _positive(delta, "delta", "pseudo_huber")
    def loss(y, f):
        return pseudo_huber_loss(y, f, delta=delta)

    return Objective(f"pseudo_huber@{delta:g}", loss, init_score=_weighted_quantile(0.5))


@functools.cache  # one loss object per parameter: no recompiles
def quantile(alpha: float = 0.5) -> Objective:
    """The alpha-quantile: unit curvature for the structure, leaves refreshed to the
    alpha-quantile of the residuals, so coverage is calibrated."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"quantile alpha={alpha} must lie in (0, 1).")

    def loss(y, f):
        return quantile_loss(y, f, alpha=alpha)

    return Objective(f"quantile@{alpha:g}", loss, init_score=_weighted_quantile(alpha),
                     curvature="constant", leaf_quantile=alpha)


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
    y_domain=("class indices 0, 1, ..., K - 1", _is_class_label), n_outputs=_n_classes)
multi_squared_error = Objective(
    "multi_squared_error", multi_squared_error_loss,
    init_score=lambda y, weight: (weight @ y) / jnp.sum(weight),
    y_domain=("a 2-D label array (N, K)", lambda y: y.ndim == 2),
    n_outputs=lambda y: int(np.shape(y)[1]))
poisson = Objective("poisson", poisson_loss, link=jnp.exp, init_score=_log_weighted_mean,
                    y_domain=("non-negative counts", _is_nonnegative),
                    fisher=lambda y, f: jnp.exp(f))
gamma = Objective("gamma", gamma_loss, link=jnp.exp, init_score=_log_weighted_mean,
                  y_domain=("positive values", _is_positive), fisher=_gamma_fisher)


@functools.cache  # one loss object per parameter: no recompiles
def tweedie(power: float = 1.5) -> Objective:
    if not 1.0 < power < 2.0:
        raise ValueError(f"tweedie power={power} must lie in (1, 2).")

    def loss(y, f):
        return tweedie_loss(y, f, power=power)

    return Objective(f"tweedie@{power:g}", loss, link=jnp.exp, init_score=_log_weighted_mean,
                     y_domain=("non-negative values", _is_nonnegative),
                     fisher=_tweedie_fisher(power))


exponential = Objective(
    "exponential", exponential_loss, link=_sigmoid_of_twice, init_score=_half_log_odds,
    y_domain=("0/1 labels", _is_binary))


@functools.cache  # one loss object per parameter: no recompiles
def focal(gamma: float = 2.0) -> Objective:
    if not gamma >= 0 or not np.isfinite(gamma):
        raise ValueError(f"focal gamma={gamma} must be a number >= 0.")
    def loss(y, f):
        return focal_loss(y, f, gamma=gamma)

    return Objective(f"focal@{gamma:g}", loss, link=jax.nn.sigmoid, init_score=_log_odds,
                     y_domain=("0/1 labels", _is_binary))


@functools.cache  # one loss object per parameter: no recompiles
def aft(distribution: str = "normal", sigma: float = 1.0) -> Objective:
    """Accelerated failure time model; y of shape (N, 2): (lower, upper) time bounds."""
    loss = aft_loss_fn(distribution, sigma)
    return Objective(f"aft_{distribution}@{sigma:g}", loss, link=jnp.exp, init_score=_aft_init,
                     y_domain=("(lower, upper) time bounds with 0 < lower <= upper, lower finite "
                               "(upper = inf for right censoring)", _is_interval),
                     y_allows_inf=True)


cox = Objective("cox", cox_loss, link=jnp.exp, init_score=lambda y, weight: jnp.zeros(1),
                y_domain=("(time, event) rows: time > 0, event 0 or 1", _is_time_event),
                curvature="fisher", fisher=_cox_curvature, kind="dataset")
pairwise_logistic = Objective("pairwise_logistic", pairwise_logistic_loss,
                              init_score=lambda y, weight: jnp.zeros(1), kind="group",
                              curvature="fisher", fisher=_pairwise_logistic_curvature)
lambdarank_ndcg = Objective("lambdarank_ndcg", lambdarank_ndcg_loss,
                            init_score=lambda y, weight: jnp.zeros(1), kind="group",
                            curvature="fisher", fisher=_lambdarank_ndcg_curvature)
listwise_softmax = Objective("listwise_softmax", listwise_softmax_loss,
                             init_score=lambda y, weight: jnp.zeros(1), kind="group")

# Built-ins by name; parametrised ones with their defaults ("quantile" is the median).
BUILTIN: dict[str, Objective] = {obj.name: obj for obj in (
    squared_error, absolute_error, logistic, softmax, multi_squared_error, poisson, gamma,
    exponential, cox, pairwise_logistic, lambdarank_ndcg, listwise_softmax)}
_FACTORIES = {"huber": huber, "pseudo_huber": pseudo_huber, "quantile": quantile,
              "tweedie": tweedie, "focal": focal, "aft": None}


def _parametrised(name: str) -> Objective | None:
    """'quantile@0.9', 'tweedie@1.2', 'aft_logistic@1.5' and the bare family names."""
    base, _, value = name.partition("@")
    if base.startswith("aft"):
        distribution = base.partition("_")[2] or "normal"
        return aft(distribution, float(value) if value else 1.0)
    factory = _FACTORIES.get(base)
    if factory is None:
        return None
    return factory(float(value)) if value else factory()


def resolve(loss: "str | Objective | Loss", link: Link | None = None) -> Objective:
    """Turns what a user passed as ``loss`` into an Objective.

    Args:
      loss: a built-in name (``"logistic"``, ``"quantile@0.9"``...), an Objective, or a
        function ``loss(y, f)`` (or ``loss(y_q, f_q, mask_q)`` with ``group=``).
      link: an inverse link for a custom loss (replaces a built-in's when given).

    Raises:
      ValueError: an unknown name or a bad parameter in a name.
      TypeError: something that is neither a name, an Objective nor a callable.
    """
    if isinstance(loss, str):
        try:
            objective = BUILTIN.get(loss) or _parametrised(loss)
        except ValueError as error:
            raise ValueError(f"loss={loss!r}: {error}") from error
        if objective is None:
            known = ", ".join(sorted(BUILTIN) + [f"{name}@VALUE" for name in _FACTORIES])
            raise ValueError(f"loss={loss!r} is not a built-in objective; use one of {known} "
                             "or pass a function loss(y, f) -> scalar.")
    elif isinstance(loss, Objective):
        objective = loss
    elif callable(loss):
        name = getattr(loss, "__name__", type(loss).__name__)
        objective = Objective(name=f"custom:{name}", loss=loss)
    else:
        raise TypeError(f"loss must be a built-in name, a jaxgbt Objective or a function "
                        f"loss(y, f) -> scalar; got {type(loss).__name__}.")
    if link is not None:
        if not callable(link):
            raise TypeError("link must be a function of the raw margin; "
                            f"got {type(link).__name__}.")
        objective = objective._replace(link=link)
    return objective


def by_name(name: str) -> Objective | None:
    """The built-in objective of a saved model's objective name, or None."""
    try:
        return BUILTIN.get(name) or _parametrised(name)
    except ValueError:
        return None

