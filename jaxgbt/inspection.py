"""Model inspection that needs predictions: permutation importance.

``permutation_importance`` scores a fitted model on held-out rows with one column's
values shuffled at a time: the drop in the metric is how much the model relies on that
column (scikit-learn's ``sklearn.inspection.permutation_importance``, for a
``Booster``). Every column and repeat is one compiled program: the repeats are vmapped,
the columns run in a ``lax.map``, and no row, tree or column is looped over in Python.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.data import validation as check
from jaxgbt.data.transfer import to_device
from jaxgbt.evaluation import metrics as metrics_module
from jaxgbt.model import Booster


class PermutationImportance(NamedTuple):
    """What ``permutation_importance`` returns.

    Attributes:
      importances_mean: f64[F], the mean drop in the metric over the repeats (positive:
        the model needs the column; about 0: it does not; negative: shuffling it helped).
      importances_std: f64[F], the standard deviation over the repeats.
      importances: f64[F, R], the drop of every repeat.
      baseline: the metric on the rows as given.
      feature_names: the model's column names (``x0, x1, ...`` when it has none).
    """

    importances_mean: np.ndarray
    importances_std: np.ndarray
    importances: np.ndarray
    baseline: float
    feature_names: tuple[str, ...]


def permutation_importance(model: Booster, X, y, metric="auc", n_repeats: int = 5,
                           seed: int = 0, sample_weight=None) -> PermutationImportance:
    """How much the metric drops when a column of X is shuffled, per column.

    Example::

        result = jaxgbt.permutation_importance(model, X_val, y_val, metric="auc")
        result.importances_mean          # f64[F], larger = more important

    Args:
      model: a fitted ``Booster`` (one model; index a stacked one first).
      X: held-out rows (array or DataFrame, as for ``predict``). A categorical column is
        shuffled as a whole, labels and all.
      y: their labels, f32[N].
      metric: a name in ``jaxgbt.metrics`` ("auc", "logloss", "rmse", ...) or a
        function ``metric(y, pred, weight=None)`` with a ``higher_is_better``
        attribute; it reads ``model.predict`` (probabilities for ``logistic``).
      n_repeats: R, shuffles per column.
      seed: the shuffles' seed.
      sample_weight: f32[N] weights for the metric, or None.

    Returns:
      A ``PermutationImportance``; the drop is ``baseline - shuffled`` for metrics where
      higher is better, ``shuffled - baseline`` otherwise, so larger is more important.
    """
    if not isinstance(model, Booster):
        raise TypeError(f"model must be a jaxgbt Booster; got {type(model).__name__}.")
    if model.feature.ndim > 2:
        raise TypeError("permutation_importance explains one model; this Booster stacks "
                        f"{model.feature.shape[0]}: index a member first (model[i]).")
    check.check_int(n_repeats, "n_repeats", 1)
    check.check_int(seed, "seed", 0, 2**32 - 1)
    metric_fn = metrics_module.get(metric)
    sign = 1.0 if metrics_module.higher_is_better(metric_fn) else -1.0
    rows = _raw_rows(model, X)
    n_rows = rows.shape[0]
    labels = jnp.asarray(_check_labels(y, n_rows))
    weight = None
    if sample_weight is not None:
        weight = jnp.asarray(check.check_sample_weight(sample_weight, n_rows))
    baseline, shuffled = _scores(model, rows, labels, weight, jax.random.PRNGKey(seed),
                                 metric_fn, n_repeats)
    baseline = float(baseline)
    drops = sign * (baseline - np.asarray(shuffled, np.float64))  # [F, R]
    return PermutationImportance(drops.mean(axis=1), drops.std(axis=1), drops, baseline,
                                 model.column_names)


def _check_labels(y, n_rows: int) -> np.ndarray:
    """y as f32[N] (or f32[N, ...] for vector or interval labels): numbers, one per row,
    none NaN (a NaN label makes every score NaN). +-inf is allowed: interval labels of
    survival losses are unbounded above."""
    try:
        labels = np.asarray(y, np.float32)
    except (TypeError, ValueError):
        raise TypeError(f"y must hold numbers (one label per row); got "
                        f"{type(y).__name__} of dtype {np.asarray(y).dtype}.") from None
    if labels.ndim == 0 or labels.shape[0] != n_rows:
        count = labels.shape[0] if labels.ndim else 1
        raise ValueError(f"y has {count} labels (shape {labels.shape}) but X has {n_rows} "
                         "rows: pass one label per row.")
    missing = np.isnan(labels).reshape(n_rows, -1).any(axis=1)
    if missing.any():
        raise ValueError(f"y contains {int(missing.sum())} NaN labels (first at row "
                         f"{int(np.argmax(missing))}); the metric would be NaN. Drop those rows.")
    return labels


def _raw_rows(model: Booster, X) -> jax.Array:
    """f32[N, F] on the device: X's columns in the model's order, categorical labels as
    codes (so that shuffling a column shuffles a raw column, as ``predict`` reads it)."""
    if isinstance(X, jax.Array):
        check.check_predict_X(X, model.n_features)
        return X.astype(jnp.float32)
    return to_device(model.read_rows(X), np.float32)


@functools.partial(jax.jit, static_argnames=("metric", "n_repeats"))
def _scores(model: Booster, X: jax.Array, y: jax.Array, weight, key: jax.Array, metric,
            n_repeats: int) -> tuple[jax.Array, jax.Array]:
    """(the metric on X, f32[F, R]: the metric with column f shuffled by permutation r)."""
    n_rows, n_columns = X.shape
    orders = jax.vmap(lambda k: jax.random.permutation(k, n_rows))(
        jax.random.split(key, n_repeats))  # [R, N]

    def score(rows):
        return metric(y, model.predict(rows), weight)

    def one_column(j):
        column = X[:, j]
        return jax.vmap(lambda order: score(X.at[:, j].set(column[order])))(orders)

    return score(X), jax.lax.map(one_column, jnp.arange(n_columns))
