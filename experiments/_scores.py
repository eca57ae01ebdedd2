"""Test scores computed by the same code for every library's predictions (so that no
library's own metric decides a comparison): host float64 NumPy functions, and bootstrap
resamples of jaxgbt.metrics for the noise of a paired difference between two models."""

import functools

import jax
import numpy as np

from jaxgbt import metrics


def auc(y, score) -> float:
    """ROC AUC by the Mann-Whitney U statistic; tied scores get their average rank."""
    _, inverse, counts = np.unique(score, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2)[inverse]
    positive = np.asarray(y) == 1
    n_pos, n_neg = positive.sum(), (~positive).sum()
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def logloss(y, p) -> float:
    """Mean binary log loss of P(y = 1), clipped away from 0 and 1."""
    p = np.clip(np.asarray(p, np.float64), 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def rmse(y, prediction) -> float:
    """Root mean squared error."""
    return float(np.sqrt(np.mean((np.asarray(prediction, np.float64) - y) ** 2)))


def multi_logloss(y, p) -> float:
    """Mean multiclass log loss of P(y = k), rows of p over the K classes."""
    p = np.clip(np.asarray(p, np.float64), 1e-15, 1.0)
    return float(-np.mean(np.log(p[np.arange(len(y)), np.asarray(y, np.int64)])))


def accuracy(y, p) -> float:
    """Share of rows whose most probable class (the argmax of a row of p) is the label."""
    return float(np.mean(np.argmax(np.asarray(p), axis=1) == np.asarray(y)))


# Paired bootstrap over test rows -------------------------------------------------------------
#
# A bootstrap resample of the test rows is a vector of multinomial counts, one per row: the
# metric of the resample is the metric with those counts as row weights (every metric of
# jaxgbt.metrics weighs rows so that an integer weight acts as copies of the row). The same
# counts applied to two models' predictions give the paired resampled difference.


def bootstrap_weights(n_rows: int, n_resamples: int, seed, group=None) -> np.ndarray:
    """f32[R, N]: R resamples of N test rows as counts (each row of the result sums to N),
    drawn from ``np.random.default_rng(seed)`` (an int or a sequence of ints);
    with ``group`` (i[N] query ids) whole queries are drawn, each of a query's rows
    carrying the query's count. The first resample is all ones: the test set itself."""
    rng = np.random.default_rng(seed)
    if group is None:
        counts = rng.multinomial(n_rows, np.full(n_rows, 1 / n_rows), size=n_resamples - 1)
    else:
        queries, query_of_row = np.unique(group, return_inverse=True)
        drawn = rng.multinomial(queries.size, np.full(queries.size, 1 / queries.size),
                                size=n_resamples - 1)
        counts = drawn[:, query_of_row]
    return np.concatenate([np.ones((1, n_rows)), counts]).astype(np.float32)


def resampled_scores(metric_name: str, y, prediction, weights: np.ndarray, group=None
                     ) -> np.ndarray:
    """f64[R]: the jaxgbt metric ``metric_name`` (``jaxgbt.metrics.get``) of ``prediction``
    (f[N] or f[N, K]) against ``y`` under each row of ``weights`` (f32[R, N], from
    ``bootstrap_weights``); ``group``: i[N] query ids for a ranking metric."""
    layout = None if group is None else metrics.query_layout(np.asarray(group))
    return np.asarray(_scorer(metric_name)(np.asarray(y), np.asarray(prediction, np.float32),
                                           weights, layout), np.float64)


@functools.cache
def _scorer(metric_name: str):
    """One jitted program per metric (and shapes), so that every library's predictions
    and every split of a dataset reuse it. Resamples are scored 32 at a time: pairwise
    metrics such as the C-index hold O(32 * 256 * N) values at once."""
    metric = metrics.get(metric_name)

    @jax.jit
    def scores(y, prediction, weights, layout):
        extra = {} if layout is None else {"group": layout}
        return jax.lax.map(lambda weight: metric(y, prediction, weight, **extra), weights,
                           batch_size=32)

    return scores


def percentile_interval(samples, level: float = 0.95) -> tuple[float, float]:
    """The central ``level`` interval of bootstrap samples (percentile method)."""
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(np.asarray(samples), [tail, 100 - tail])
    return float(low), float(high)
