"""Evaluation metrics: plain JAX functions ``metric(y, pred, weight=None) -> f32[]``.

A metric reads predictions on the response scale (probabilities, positive means), takes
optional per-row weights (None: all rows weigh 1) and returns a scalar; nothing is jitted
here, so callers jit, vmap or scan over them. Each metric carries ``higher_is_better``,
``name`` and ``needs_group`` as attributes; ``get`` turns a name such as ``"auc"``,
``"ndcg@10"`` or ``"pinball@0.9"`` into the function. Ranking metrics take one more,
keyword-only argument, ``group``: query ids, or a ``QueryLayout`` built on the host.

Dtypes: labels, predictions and weights may be any real dtype. A metric computes in the
float type of ``pred``, at least float32: float32 by default, float64 for float64 inputs
under ``jax.enable_x64``. Dimension names are those of ``core/dtypes.py`` (N rows, K classes),
plus Q queries and G rows in the largest query for the ranking metrics.
"""

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import xlogy
from jax.typing import ArrayLike

from jaxgbt.core.order import order_key
from jaxgbt.objectives.naming import Family, parse

Metric = Callable[..., jax.Array]

# Rows of the event side compared at once by concordance_index: memory is O(chunk * N).
_PAIR_CHUNK = 256

_MSG_TRACED_GROUP = """\
{name}: `group` is a traced array, but the query layout (Q queries padded to G rows) sets
array shapes, so it has to be built on the host. Build it once outside jit and pass it in:

    layout = jaxgbt.evaluation.metrics.query_layout(group_ids)      # numpy, on the host
    jax.jit(metric)(y, pred, group=layout)              # traced, fixed shapes
"""


def _describe(name: str, *, higher_is_better: bool, needs_group: bool = False):
    """Marks a metric function with the facts early stopping and logging read."""

    def mark(fn):
        fn.__dict__.update(name=name, higher_is_better=higher_is_better, needs_group=needs_group)
        return fn

    return mark


# Shared input handling -----------------------------------------------------------------


def _column(a: jax.Array) -> jax.Array:
    # A scalar model's prediction may arrive as (N, 1); it means the same as (N,).
    return a[:, 0] if a.ndim == 2 and a.shape[1] == 1 else a


def _float_dtype(pred: jax.Array) -> Any:
    # At least float32: float16 sums over many rows lose too much. float64 stays float64.
    if jnp.issubdtype(pred.dtype, jnp.floating) and jnp.finfo(pred.dtype).bits >= 32:
        return pred.dtype
    return jnp.dtype(jnp.float32)


def _weights(name: str, weight: ArrayLike | None, n_rows: int, dtype: Any) -> jax.Array:
    if weight is None:
        return jnp.ones(n_rows, dtype)
    weight = _column(jnp.asarray(weight)).astype(dtype)
    if weight.shape != (n_rows,):
        raise ValueError(f"{name}: weight has shape {weight.shape}; it should be ({n_rows},), "
                         "one weight per row, or None for equal weights.")
    return weight


def _inputs(name: str, y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None):
    """y, pred and weight as float arrays of shape (N,), checked at trace time."""
    pred = _column(jnp.asarray(pred))
    dtype = _float_dtype(pred)
    pred = pred.astype(dtype)
    y = _column(jnp.asarray(y)).astype(dtype)
    if pred.ndim != 1 or y.shape != pred.shape:
        raise ValueError(f"{name}: y has shape {y.shape} and pred {pred.shape}; both should be "
                         "(N,), one value per row.")
    return y, pred, _weights(name, weight, pred.shape[0], dtype)


def _mean(values: jax.Array, weight: jax.Array) -> jax.Array:
    return jnp.sum(weight * values) / jnp.sum(weight)


def _tie_bounds(same_as_previous: jax.Array) -> tuple[jax.Array, jax.Array]:
    """[start, end) of the run of equal values each sorted position belongs to.

    Args:
      same_as_previous: bool[..., n - 1], entry j True when sorted item j + 1 ties item j.

    Returns:
      start, end: i32[..., n], so that items start[j] .. end[j] - 1 tie item j.
    """
    shape = same_as_previous.shape[:-1] + (same_as_previous.shape[-1] + 1,)
    n = shape[-1]
    position = lax.broadcasted_iota(jnp.int32, shape, len(shape) - 1)
    edge = jnp.ones(shape[:-1] + (1,), bool)
    first = jnp.concatenate([edge, ~same_as_previous], axis=-1)  # opens a run
    last = jnp.concatenate([~same_as_previous, edge], axis=-1)  # closes a run
    start = lax.cummax(jnp.where(first, position, 0), axis=len(shape) - 1)
    end = lax.cummin(jnp.where(last, position + 1, n), axis=len(shape) - 1, reverse=True)
    return start, end


# Regression ----------------------------------------------------------------------------


@_describe("rmse", higher_is_better=False)
def rmse(y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None = None) -> jax.Array:
    """Root mean squared error, ``sqrt(sum_i w_i (y_i - pred_i)^2 / sum_i w_i)``. Lower is better.

    Args:
      y: f32[N] targets.
      pred: f32[N] predictions.
      weight: f32[N] row weights, or None.

    Returns:
      f32[] the error.

    References:
      ``sklearn.metrics.root_mean_squared_error``; LightGBM's ``rmse`` (``l2_root``).
    """
    y, pred, weight = _inputs("rmse", y, pred, weight)
    return jnp.sqrt(_mean((y - pred) ** 2, weight))


@_describe("mae", higher_is_better=False)
def mae(y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None = None) -> jax.Array:
    """Mean absolute error, ``sum_i w_i |y_i - pred_i| / sum_i w_i``. Lower is better.

    Args:
      y: f32[N] targets.
      pred: f32[N] predictions.
      weight: f32[N] row weights, or None.

    Returns:
      f32[] the error.

    References:
      ``sklearn.metrics.mean_absolute_error``; LightGBM's ``l1``.
    """
    y, pred, weight = _inputs("mae", y, pred, weight)
    return _mean(jnp.abs(y - pred), weight)


# Binary and multiclass classification ---------------------------------------------------


@_describe("logloss", higher_is_better=False)
def logloss(y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None = None) -> jax.Array:
    """Binary cross-entropy of probabilities, weighted mean over rows. Lower is better.

    ``-(y log p + (1 - y) log(1 - p))`` with ``p = clip(pred, eps, 1 - eps)`` and eps the
    machine epsilon of the compute dtype (1.19e-7 in float32), as scikit-learn clips, so
    that a confident wrong prediction costs about 16 (float32) rather than infinity.

    Args:
      y: f32[N] labels in {0, 1} (probabilities in [0, 1] give the soft cross-entropy).
      pred: f32[N] predicted P(y = 1), not margins.
      weight: f32[N] row weights, or None.

    Returns:
      f32[] the mean loss in nats.

    References:
      ``sklearn.metrics.log_loss`` (same clipping); LightGBM's ``binary_logloss``.
    """
    y, pred, weight = _inputs("logloss", y, pred, weight)
    eps = jnp.finfo(pred.dtype).eps
    p = jnp.clip(pred, eps, 1 - eps)
    # log1p(-p) keeps the digits of 1 - p when p is small.
    return _mean(-(y * jnp.log(p) + (1 - y) * jnp.log1p(-p)), weight)


@_describe("auc", higher_is_better=True)
def auc(y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None = None) -> jax.Array:
    """Area under the ROC curve of a binary classifier, weighted, ties counted one half.

    The probability that a random positive scores above a random negative, pairs weighing
    ``w_pos * w_neg`` (so an integer weight acts as that many copies of the row); a tied
    pair counts 1/2, which is the trapezoidal rule on the ROC curve and the average-rank
    (Mann-Whitney) convention. One sort and prefix sums: O(N log N) time, O(N) memory.
    Higher is better; 0.5 is chance.

    Args:
      y: f32[N] labels; rows with ``y > 0`` are positives (LightGBM's rule), others
        negatives.
      pred: f32[N] scores; any monotone transform (margins or probabilities) gives the
        same AUC.
      weight: f32[N] row weights, or None.

    Returns:
      f32[] the AUC in [0, 1]; NaN when y holds one class only (no pairs to compare,
      where scikit-learn raises).

    References:
      Hanley & McNeil (1982), "The meaning and use of the area under a ROC curve";
      ``sklearn.metrics.roc_auc_score`` with ``sample_weight``.
    """
    y, pred, weight = _inputs("auc", y, pred, weight)
    positive = jnp.where(y > 0, weight, 0)
    negative = jnp.where(y > 0, 0, weight)
    # Only the scores are sorted, as integer keys: XLA:CPU sorts one integer array
    # several times faster than floats or several arrays together (docs/benchmarks.md,
    # numbers behind the code). Each row then finds its run of tied scores, [start, end),
    # by binary search.
    key = order_key(pred)
    sorted_key = jnp.sort(key)
    start = jnp.searchsorted(sorted_key, key, side="left")
    end = jnp.searchsorted(sorted_key, key, side="right")
    # below[j]: weight of the negatives whose run starts before position j.
    negative_at = jax.ops.segment_sum(negative, start, num_segments=pred.shape[0])
    below = jnp.concatenate([jnp.zeros(1, negative.dtype), jnp.cumsum(negative_at)])
    # A positive beats the negatives of lower score and half of those tied with it:
    # below[start] + (below[end] - below[start]) / 2.
    wins = 0.5 * (below[start] + below[end])
    return jnp.sum(positive * wins) / (jnp.sum(positive) * jnp.sum(negative))


@_describe("accuracy", higher_is_better=True)
def accuracy(y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None = None) -> jax.Array:
    """Weighted share of rows classified right. Higher is better.

    Binary when pred has shape (N,) (or (N, 1)): the predicted class is ``pred > 0.5``
    (LightGBM's ``binary_error`` threshold), compared with ``y > 0``. Multiclass when pred
    has shape (N, K), K > 1: the predicted class is ``argmax(pred)``, the first on ties.

    Args:
      y: f32[N] labels in {0, 1}, or i32[N] class ids in [0, K) for multiclass.
      pred: f32[N] probabilities P(y = 1), or f32[N, K] class probabilities (or scores).
      weight: f32[N] row weights, or None.

    Returns:
      f32[] the accuracy in [0, 1].

    References:
      ``sklearn.metrics.accuracy_score``; 1 - LightGBM's ``binary_error`` /
      ``multi_error``.
    """
    pred_array = jnp.asarray(pred)
    if pred_array.ndim == 2 and pred_array.shape[1] > 1:
        labels, weight = _class_inputs("accuracy", y, pred_array, weight)
        correct = jnp.argmax(pred_array, axis=1).astype(labels.dtype) == labels
        return _mean(correct.astype(weight.dtype), weight)
    y, pred, weight = _inputs("accuracy", y, pred, weight)
    return _mean(((pred > 0.5) == (y > 0)).astype(pred.dtype), weight)


def _class_inputs(name: str, y: ArrayLike, pred: jax.Array, weight: ArrayLike | None):
    labels = _column(jnp.asarray(y)).astype(jnp.int32)
    if pred.ndim != 2 or labels.shape != pred.shape[:1]:
        raise ValueError(f"{name}: y has shape {labels.shape} and pred {pred.shape}; they "
                         "should be (N,) class ids and (N, K) class probabilities.")
    return labels, _weights(name, weight, pred.shape[0], _float_dtype(pred))


@_describe("multi_logloss", higher_is_better=False)
def multi_logloss(y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None = None) -> jax.Array:
    """Multiclass cross-entropy ``-log p[y]``, weighted mean over rows. Lower is better.

    ``p[y]`` is clipped to ``[eps, 1 - eps]`` (machine epsilon of the compute dtype) as in
    scikit-learn. Rows are not renormalised: pass probabilities that sum to 1 (softmax
    of the margins).

    Args:
      y: i32[N] class ids in [0, K); an id out of range gives NaN.
      pred: f32[N, K] class probabilities.
      weight: f32[N] row weights, or None.

    Returns:
      f32[] the mean loss in nats.

    References:
      ``sklearn.metrics.log_loss``; LightGBM's ``multi_logloss``.
    """
    pred = jnp.asarray(pred)
    labels, weight = _class_inputs("multi_logloss", y, pred, weight)
    pred = pred.astype(weight.dtype)
    eps = jnp.finfo(pred.dtype).eps
    n_classes = pred.shape[1]
    p_true = jnp.take_along_axis(pred, jnp.clip(labels, 0, n_classes - 1)[:, None], axis=1)[:, 0]
    # An id outside [0, K) gives NaN; a negative one would otherwise wrap to the last class.
    p_true = jnp.where((labels >= 0) & (labels < n_classes), p_true, jnp.nan)
    return _mean(-jnp.log(jnp.clip(p_true, eps, 1 - eps)), weight)


# Deviances and quantiles ---------------------------------------------------------------


def _poisson_rows(y: jax.Array, pred: jax.Array) -> jax.Array:
    # xlogy gives 0 for y = 0, the limit of y log(y / pred).
    return 2 * (xlogy(y, y / pred) - y + pred)


def _gamma_rows(y: jax.Array, pred: jax.Array) -> jax.Array:
    # 2 (log(pred / y) + y / pred - 1) with d = y / pred - 1 computed as (y - pred) / pred
    # and log1p: keeps the digits of d when pred is close to y.
    d = (y - pred) / pred
    return 2 * (d - jnp.log1p(d))


def _tweedie_rows(y: jax.Array, pred: jax.Array, power: float) -> jax.Array:
    if power == 0:
        return (y - pred) ** 2
    if power == 1:
        return _poisson_rows(y, pred)
    if power == 2:
        return _gamma_rows(y, pred)
    one, two = 1 - power, 2 - power
    # For power < 0 the y term uses max(y, 0), as scikit-learn does ("extreme stable").
    y_plus = jnp.where(y > 0, y, 0) if power < 0 else y
    return 2 * (y_plus**two / (one * two) - y * pred**one / one + pred**two / two)


@_describe("poisson_deviance", higher_is_better=False)
def poisson_deviance(y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None = None
                     ) -> jax.Array:
    """Mean Poisson deviance ``2 (y log(y / pred) - y + pred)``. Lower is better; 0 is perfect.

    Args:
      y: f32[N] counts, y >= 0.
      pred: f32[N] predicted means, pred > 0 (the response, ``exp`` of a log margin).
      weight: f32[N] row weights, or None.

    Returns:
      f32[] the weighted mean deviance.

    References:
      ``sklearn.metrics.mean_poisson_deviance``; McCullagh & Nelder (1989), Generalized
      Linear Models, 2nd ed., section 2.3.
    """
    y, pred, weight = _inputs("poisson_deviance", y, pred, weight)
    return _mean(_poisson_rows(y, pred), weight)


@_describe("gamma_deviance", higher_is_better=False)
def gamma_deviance(y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None = None
                   ) -> jax.Array:
    """Mean Gamma deviance ``2 (log(pred / y) + y / pred - 1)``. Lower is better; 0 is perfect.

    Args:
      y: f32[N] targets, y > 0.
      pred: f32[N] predicted means, pred > 0.
      weight: f32[N] row weights, or None.

    Returns:
      f32[] the weighted mean deviance.

    References:
      ``sklearn.metrics.mean_gamma_deviance``; McCullagh & Nelder (1989), section 2.3.
    """
    y, pred, weight = _inputs("gamma_deviance", y, pred, weight)
    return _mean(_gamma_rows(y, pred), weight)


@functools.cache
def tweedie_deviance(power: float) -> Metric:
    """The mean Tweedie deviance with this power, as a metric. Lower is better.

    power 0 is the squared error, 1 the Poisson and 2 the Gamma deviance; otherwise
    ``2 (y^(2-p) / ((1-p)(2-p)) - y pred^(1-p) / (1-p) + pred^(2-p) / (2-p))``. The three
    terms nearly cancel where pred is close to y, so in float32 a row's deviance has an
    absolute error of a few eps * y^(2-p); means over many rows are not affected much.

    Args:
      power: a Python float, p <= 0 or p >= 1 (no Tweedie distribution has 0 < p < 1).
        For 1 <= p < 2, y >= 0; for p >= 2, y > 0; pred > 0 always.

    Returns:
      ``metric(y, pred, weight=None) -> f32[]`` named ``tweedie@<power>``; the same
      function object for the same power, so jit caches are shared.

    Raises:
      ValueError: 0 < power < 1.

    References:
      ``sklearn.metrics.mean_tweedie_deviance`` (same formula, case by case);
      Jørgensen (1997), The Theory of Dispersion Models.
    """
    power = float(power)
    if 0 < power < 1:
        raise ValueError(f"tweedie_deviance: power={power} is in (0, 1), where no Tweedie "
                         "distribution exists; use power <= 0 or power >= 1 (1 Poisson, "
                         "2 Gamma, 1 < power < 2 compound Poisson-Gamma).")
    name = f"tweedie@{power:.12g}"

    @_describe(name, higher_is_better=False)
    def tweedie(y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None = None) -> jax.Array:
        y, pred, weight = _inputs(name, y, pred, weight)
        return _mean(_tweedie_rows(y, pred, power), weight)

    tweedie.__doc__ = f"Mean Tweedie deviance with power {power:g}; see tweedie_deviance."
    return tweedie


@functools.cache
def pinball(alpha: float) -> Metric:
    """The mean pinball (quantile) loss at level alpha, as a metric. Lower is better.

    A row costs ``alpha (y - pred)`` when ``y >= pred`` and ``(1 - alpha)(pred - y)``
    otherwise; its weighted mean is smallest when pred is the alpha-quantile of y.
    ``pinball(0.5)`` is half the mean absolute error.

    Args:
      alpha: a Python float in [0, 1], the quantile level.

    Returns:
      ``metric(y, pred, weight=None) -> f32[]`` named ``pinball@<alpha>``; the same
      function object for the same alpha.

    Raises:
      ValueError: alpha outside [0, 1].

    References:
      ``sklearn.metrics.mean_pinball_loss``; Koenker & Bassett (1978), "Regression
      quantiles"; LightGBM's ``quantile`` metric.
    """
    alpha = float(alpha)
    if not 0 <= alpha <= 1:
        raise ValueError(f"pinball: alpha={alpha} is a quantile level and must lie in [0, 1], "
                         "for example 0.9 for the 90th percentile.")
    name = f"pinball@{alpha:.12g}"

    @_describe(name, higher_is_better=False)
    def pinball_loss(y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None = None
                     ) -> jax.Array:
        y, pred, weight = _inputs(name, y, pred, weight)
        diff = y - pred
        # alpha * diff when diff >= 0 and (alpha - 1) * diff below: always the larger one.
        return _mean(jnp.maximum(alpha * diff, (alpha - 1) * diff), weight)

    pinball_loss.__doc__ = f"Mean pinball loss at alpha={alpha:g}; see pinball."
    return pinball_loss


# Ranking -------------------------------------------------------------------------------


class QueryLayout(NamedTuple):
    """Where each query's rows are, padded to the largest query. Built by ``query_layout``.

    A pytree of two arrays: pass it as ``group=`` to a ranking metric under jit or vmap;
    its shapes (Q, G) are fixed, so one compiled metric serves every prediction.

    Attributes:
      index: i32[Q, G], the row of the j-th item of query q (0 in padding).
      mask: bool[Q, G], True for real items, False for padding.
    """

    index: jax.Array
    mask: jax.Array


def query_layout(group: ArrayLike) -> QueryLayout:
    """Builds the padded (Q, G) layout of queries from per-row query ids, on the host.

    Args:
      group: i32[N] query id of each row, the rows of one query contiguous (not the
        per-query sizes that LightGBM's ``group`` takes).

    Returns:
      a QueryLayout with Q = number of queries, G = rows in the largest query.

    Raises:
      ValueError: group is not one id per row, or a query's rows are not contiguous.
    """
    ids = np.asarray(group)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"group has shape {ids.shape}; it should be (N,), the query id of "
                         "each row, with the rows of one query next to each other.")
    starts = np.concatenate([[0], np.flatnonzero(ids[1:] != ids[:-1]) + 1])
    run_ids, counts = np.unique(ids[starts], return_counts=True)
    if len(run_ids) != len(starts):
        split = run_ids[counts > 1][:5].tolist()
        raise ValueError(f"group: the rows of queries {split} are not contiguous; sort the rows "
                         "by query id (a stable sort keeps each query's order) first.")
    sizes = np.diff(np.append(starts, ids.size))
    offset = np.arange(sizes.max())
    mask = offset[None, :] < sizes[:, None]
    index = np.where(mask, starts[:, None] + offset[None, :], 0)
    return QueryLayout(index=jnp.asarray(index, jnp.int32), mask=jnp.asarray(mask))


def _queries(name: str, y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None, group: Any):
    """Labels, predictions f32[Q, G], mask bool[Q, G] and query weights f32[Q]."""
    y, pred, weight = _inputs(name, y, pred, weight)
    if not isinstance(group, QueryLayout):
        try:
            ids = np.asarray(group)
        except jax.errors.TracerArrayConversionError:
            raise TypeError(_MSG_TRACED_GROUP.format(name=name)) from None
        if ids.shape != y.shape:
            raise ValueError(f"{name}: group has shape {ids.shape} and y {y.shape}; give one "
                             "query id per row.")
        group = query_layout(ids)
    index, mask = jnp.asarray(group.index), jnp.asarray(group.mask)
    y_q = jnp.where(mask, y[index], 0)
    size = jnp.sum(mask, axis=1).astype(y.dtype)
    # A query weighs the mean of its row weights, as in LightGBM (Metadata::LoadQueryWeights);
    # give the rows of a query equal weights to set a per-query weight.
    query_weight = jnp.sum(jnp.where(mask, weight[index], 0), axis=1) / jnp.maximum(size, 1)
    return y_q, pred[index], mask, query_weight


def _rank(pred_q: jax.Array, mask: jax.Array, values: jax.Array):
    """Sorts each query best first, padding last, ties in row order (a stable sort).

    Returns the sorted padding flag i32[Q, G], scores f32[Q, G] and values f32[Q, G].
    """
    padding = (~mask).astype(jnp.int32)
    position = lax.broadcasted_iota(jnp.int32, mask.shape, 1)
    padding, neg_score, _, values = lax.sort((padding, -pred_q, position, values), dimension=1,
                                             num_keys=3)
    return padding, -neg_score, values


def _check_k(factory: str, k: int | None) -> int | None:
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"{factory}: k={k!r} is the number of top positions kept; use an "
                         "integer >= 1, or None for all positions.")
    return int(k)


def _cut(top: int | None, size: int) -> jax.Array:
    # bool[G]: positions counted by a metric @k.
    return jnp.arange(size) < (size if top is None else top)


@functools.cache
def ndcg_at(k: int | None = None) -> Metric:
    """NDCG@k averaged over queries, as a ranking metric. Higher is better; 1 is perfect.

    Per query: ``DCG@k / IDCG@k`` with gain ``2^rel - 1`` and discount ``1 / log2(1 + i)``
    at rank i = 1, 2, ...; IDCG@k is the DCG@k of the rows sorted by label. Rows with tied
    predictions share the mean gain of their tie group (the expectation over the orders of
    the ties), as scikit-learn's ``ndcg_score`` does; LightGBM instead keeps the rows' order,
    so the two differ only on ties. A query without a relevant row (IDCG = 0) counts as 1,
    as in LightGBM (scikit-learn counts it as 0). Queries are averaged with weights, a
    query weighing the mean weight of its rows (LightGBM's query weights).

    Vectorised over queries padded to G rows: O(Q G log G) time and O(Q G) memory.

    Args:
      k: the number of top positions, or None for all positions (the name ``"ndcg"``).

    Returns:
      ``metric(y, pred, weight=None, *, group) -> f32[]`` named ``ndcg@<k>``, where y is
      f32[N] relevance grades >= 0, pred f32[N] scores (higher ranks first), weight f32[N]
      row weights or None, and group either i32[N] query ids (rows of a query contiguous;
      the layout is then built on the host with numpy, so group cannot be traced) or a
      ``QueryLayout`` from ``query_layout(group)``, which works under jit and vmap.

    Raises:
      ValueError: k is not a positive integer or None.

    References:
      Järvelin & Kekäläinen (2002), "Cumulated gain-based evaluation of IR techniques";
      Burges et al. (2005) for the 2^rel - 1 gain; McSherry & Najork (2008) for ties;
      ``sklearn.metrics.ndcg_score`` (with y_true = 2^rel - 1); LightGBM's ``ndcg``.
    """
    k = _check_k("ndcg_at", k)
    name = "ndcg" if k is None else f"ndcg@{k}"

    @_describe(name, higher_is_better=True, needs_group=True)
    def ndcg(y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None = None, *,
             group: Any) -> jax.Array:
        labels, pred_q, mask, query_weight = _queries(name, y, pred, weight, group)
        size = mask.shape[1]
        # exp2(rel) - 1: LightGBM's default label_gain for integer grades.
        gain = jnp.where(mask, jnp.exp2(labels) - 1, 0)
        rank = jnp.arange(1, size + 1, dtype=gain.dtype)
        discount = jnp.where(_cut(k, size), 1 / jnp.log2(rank + 1), 0)[None, :]
        padding, score, ranked_gain = _rank(pred_q, mask, gain)
        start, end = _tie_bounds((padding[:, 1:] == padding[:, :-1])
                                 & (score[:, 1:] == score[:, :-1]))
        # Each row takes the mean gain of its tie group (McSherry & Najork), from prefix sums.
        before = jnp.concatenate([jnp.zeros_like(gain[:, :1]), jnp.cumsum(ranked_gain, axis=1)],
                                 axis=1)
        group_gain = (jnp.take_along_axis(before, end, axis=1)
                      - jnp.take_along_axis(before, start, axis=1))
        tied_gain = group_gain / (end - start).astype(gain.dtype)
        dcg = jnp.sum(tied_gain * discount, axis=1)
        ideal = -jnp.sort(-gain, axis=1)  # padding has gain 0, so it sorts among the zeros
        idcg = jnp.sum(ideal * discount, axis=1)
        relevant = idcg > 0
        per_query = jnp.where(relevant, dcg / jnp.where(relevant, idcg, 1), 1)
        return _mean(per_query, query_weight)

    ndcg.__doc__ = f"NDCG{'' if k is None else f'@{k}'} averaged over queries; see ndcg_at."
    return ndcg


@functools.cache
def map_at(k: int | None = None) -> Metric:
    """Mean average precision at k over queries, as a ranking metric. Higher is better.

    A row is relevant when its label is > 0.5. Per query, following LightGBM's ``map@k``:
    ``AP@k = sum over relevant rows at rank i <= k of precision@i / min(n_relevant, k)``.
    A query without relevant rows counts as 1 (LightGBM). Tied predictions keep the rows'
    order (an earlier row ranks first), so unlike NDCG the value can depend on row order
    when predictions tie. Queries are averaged with the mean weight of their rows.

    Args:
      k: the number of top positions, or None for all positions (the name ``"map"``).

    Returns:
      ``metric(y, pred, weight=None, *, group) -> f32[]`` named ``map@<k>``; arguments as
      for ``ndcg_at``.

    Raises:
      ValueError: k is not a positive integer or None.

    References:
      LightGBM ``src/metric/map_metric.hpp`` (``MapMetric::CalMapAtK``); Manning,
      Raghavan & Schütze (2008), Introduction to Information Retrieval, section 8.4.
    """
    k = _check_k("map_at", k)
    name = "map" if k is None else f"map@{k}"

    @_describe(name, higher_is_better=True, needs_group=True)
    def mean_average_precision(y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None = None,
                               *, group: Any) -> jax.Array:
        labels, pred_q, mask, query_weight = _queries(name, y, pred, weight, group)
        size = mask.shape[1]
        relevant = ((labels > 0.5) & mask).astype(labels.dtype)
        _, _, hit = _rank(pred_q, mask, relevant)
        rank = jnp.arange(1, size + 1, dtype=hit.dtype)[None, :]
        precision = jnp.cumsum(hit, axis=1) / rank
        top = _cut(k, size)[None, :]
        found = jnp.sum(jnp.where(top, hit * precision, 0), axis=1)
        n_relevant = jnp.sum(hit, axis=1)
        denominator = n_relevant if k is None else jnp.minimum(n_relevant, k)
        per_query = jnp.where(n_relevant > 0, found / jnp.maximum(denominator, 1), 1)
        return _mean(per_query, query_weight)

    mean_average_precision.__doc__ = (
        f"MAP{'' if k is None else f'@{k}'} averaged over queries; see map_at.")
    return mean_average_precision


# Survival ------------------------------------------------------------------------------


@_describe("concordance_index", higher_is_better=True)
def concordance_index(y: ArrayLike, pred: ArrayLike, weight: ArrayLike | None = None
                      ) -> jax.Array:
    """Harrell's concordance index of risk scores on right-censored times. Higher is better.

    A pair (i, j) is comparable when row i had its event and row j was still at risk then:
    ``t_j > t_i``, or ``t_j == t_i`` with j censored (two events at the same time are not
    comparable). It is concordant when the event row has the higher risk, ``pred_i >
    pred_j``; tied risks count 1/2. C = concordant / comparable, pairs weighing ``w_i w_j``
    (integer weights act as copies). 0.5 is chance, 1 a perfect ordering.

    All N^2 pairs are compared, in chunks of 256 event-side rows so that memory stays
    O(256 N).

    Args:
      y: f32[N, 2], column 0 the time (observed or censored), column 1 the event
        indicator (1 event observed, 0 censored).
      pred: f32[N] risk scores, higher meaning an earlier event (for example a hazard
        ratio or a log-hazard margin; negate predicted survival times).
      weight: f32[N] row weights, or None.

    Returns:
      f32[] the C-index in [0, 1]; NaN when no pair is comparable.

    References:
      Harrell, Califf, Pryor, Lee & Rosati (1982), "Evaluating the yield of medical tests",
      JAMA 247(18); ``lifelines.utils.concordance_index(time, -pred, event)`` and
      ``sksurv.metrics.concordance_index_censored(event, time, pred)`` (same pairs).
    """
    pred = _column(jnp.asarray(pred))
    dtype = _float_dtype(pred)
    pred = pred.astype(dtype)
    y = jnp.asarray(y).astype(dtype)
    n_rows = pred.shape[0]
    if pred.ndim != 1 or y.shape != (n_rows, 2):
        raise ValueError(f"concordance_index: y has shape {y.shape} and pred {pred.shape}; y "
                         "should be (N, 2), columns (time, event indicator), and pred (N,) "
                         "risk scores.")
    time, event = y[:, 0], y[:, 1] > 0
    weight = _weights("concordance_index", weight, n_rows, dtype)

    def pairs_with(row):  # row i (scalars) against every row j
        t_i, e_i, r_i, w_i = row
        # j was at risk when i's event happened: a later time, or the same time censored.
        at_risk = (time > t_i) | ((time == t_i) & ~event)
        pair = jnp.where(e_i & at_risk, w_i * weight, 0)
        agree = jnp.where(r_i > pred, 1.0, jnp.where(r_i == pred, 0.5, 0.0)).astype(dtype)
        return jnp.sum(pair * agree), jnp.sum(pair)

    # Pad the event side to whole chunks with censored, zero-weight rows: they pair with
    # nothing, and lax.map then traces one chunk body with no remainder.
    chunk = min(_PAIR_CHUNK, n_rows)
    pad = (-n_rows) % chunk
    rows = (jnp.pad(time, (0, pad)), jnp.pad(event, (0, pad)), jnp.pad(pred, (0, pad)),
            jnp.pad(weight, (0, pad)))
    agree, pairs = lax.map(pairs_with, rows, batch_size=chunk)
    return jnp.sum(agree) / jnp.sum(pairs)


# Registry ------------------------------------------------------------------------------

METRICS: dict[str, Metric] = {
    fn.name: fn  # type: ignore[attr-defined]
    for fn in (rmse, mae, logloss, auc, accuracy, multi_logloss, poisson_deviance,
               gamma_deviance, concordance_index, ndcg_at(None), map_at(None))
}

# Names with a parameter after "@" (read by the objectives' reader, so that metrics and
# objectives spell and refuse parameters alike).
_FACTORIES: dict[str, Family] = {
    "ndcg": Family(ndcg_at, int, "ndcg@k (k an integer >= 1)"),
    "map": Family(map_at, int, "map@k (k an integer >= 1)"),
    "pinball": Family(pinball, float, "pinball@alpha (alpha in [0, 1])"),
    "tweedie": Family(tweedie_deviance, float, "tweedie@power (power <= 0 or >= 1)"),
}


def _known() -> str:
    return ", ".join([*sorted(METRICS), *(family.form for family in _FACTORIES.values())])


def get(name_or_fn: "str | Metric") -> Metric:
    """The metric function for a name, or a function given as is.

    Args:
      name_or_fn: a name in ``METRICS`` ("rmse", "auc", "ndcg", ...), a name with a
        parameter ("ndcg@10", "map@5", "pinball@0.9", "tweedie@1.5"), or a function
        ``metric(y, pred, weight=None) -> scalar`` (returned unchanged).

    Raises:
      ValueError: an unknown name (the message lists the known names) or a bad parameter
        (the message names the metric and says how to write it).
      TypeError: neither a string nor a callable.
    """
    if isinstance(name_or_fn, str):
        if name_or_fn in METRICS:
            return METRICS[name_or_fn]
        metric = parse(name_or_fn, _FACTORIES, "metric ")
        if metric is not None:
            return metric
        raise ValueError(f"unknown metric {name_or_fn!r}; known metrics: {_known()}; or pass a "
                         "function metric(y, pred, weight=None) -> scalar.")
    if callable(name_or_fn):
        return name_or_fn
    raise TypeError(f"metric must be a name or a function metric(y, pred, weight=None); got "
                    f"{type(name_or_fn).__name__}.")


def higher_is_better(name_or_fn: "str | Metric") -> bool:
    """Whether larger values of the metric are better (for early stopping and model choice).

    Raises:
      ValueError: an unknown name, or a user function without a ``higher_is_better``
        attribute (set one: ``my_metric.higher_is_better = False``).
    """
    fn = get(name_or_fn)
    flag = getattr(fn, "higher_is_better", None)
    if flag is None:
        name = getattr(fn, "__name__", type(fn).__name__)
        raise ValueError(f"metric {name} does not say whether higher is better; set the "
                         f"attribute: {name}.higher_is_better = True (or False).")
    return bool(flag)
