"""The training data of one fit, read and checked once on the host.

``Dataset.read`` takes what the user passed (arrays or a DataFrame, read by ``frames``;
labels, weights, query ids) and checks it; ``Dataset.encoded`` replaces categorical columns by the
columns the trees split on; ``Dataset.binned`` gives the bin edges and the binned
matrix. ``read_eval_set`` does the same for a validation set, with the training
encoder. Nothing the caller passed is modified (``validation``).
"""

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.config import SparseGroup
from jaxgbt.core.dtypes import BIN_DTYPE
from jaxgbt.core.histogram import SparseEntries
from jaxgbt.data import categorical, frames, sparse
from jaxgbt.data import validation as check
from jaxgbt.data.binning import (
    apply_bins,
    apply_column_bins,
    bins_needed,
    compute_thresholds,
    sparse_entries,
    sparse_group,
    trimmed,
)
from jaxgbt.data.transfer import aligned_empty

_EVAL_SET_KEYS = ("X", "y", "sample_weight", "group", "name")
# Rows ``Dataset.may_hold_missing`` tests for NaN at a time (a 2 MB mask at 32 columns).
_NAN_SCAN_ROWS = 2**16


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Checked training rows.

    Attributes:
      X: read-only f32[N, F] (f32[N, F_enc] once encoded): the columns trees split on.
      y: labels with rows on axis 0 (an array or a dict of arrays), checked against
        the objective's domain.
      weight: f32[N] sample weights (a tracer under ``vmap`` over weights).
      group_index: i32[Q, M], the rows of each query (group losses), else None.
      group_mask: bool[Q, M], which entries of ``group_index`` are rows, else None.
      declared: the categorical columns declared or found (``categorical.read``), or
        None when there are none.
      encoder: the fitted ``categorical.Encoder`` once encoded, else None.
      feature_names: the names of the F raw columns (a DataFrame's or ``feature_names=``),
        or None.
      order_statistics: the target-statistic columns' values under further orders of
        the rows (``categorical.OrderStatistics``), or None.
    """

    X: np.ndarray
    y: Any
    weight: Any
    group_index: jax.Array | None
    group_mask: jax.Array | None
    declared: Any = None
    encoder: categorical.Encoder | None = None
    feature_names: tuple[str, ...] | None = None
    order_statistics: categorical.OrderStatistics | None = None

    @property
    def n_rows(self) -> int:
        return self.X.shape[0]

    @property
    def n_columns(self) -> int:
        """The columns trees split on (F, or F_enc once encoded)."""
        return self.X.shape[1]

    @property
    def n_features(self) -> int:
        """F of the raw X (the encoder's input width once encoded)."""
        return self.X.shape[1] if self.encoder is None else self.encoder.n_features

    @property
    def n_bin_rows(self) -> int:
        """The rows of the binned matrix (``binned``): a row per column, and one per
        target-statistic column and further order."""
        extra = self.order_statistics
        return self.n_columns + (0 if extra is None else extra.values.shape[0] * len(extra.columns))

    def may_hold_missing(self) -> bool:
        """Whether a row may fall in a missing bin: whether X holds a NaN (a missing
        categorical label is a category of its own, never NaN once encoded). Read in
        blocks of rows, so that no copy of X is made."""
        if sparse.is_sparse(self.X):
            return bool(np.isnan(self.X.data).any())
        return any(bool(np.isnan(self.X[first:first + _NAN_SCAN_ROWS]).any())
                   for first in range(0, self.n_rows, _NAN_SCAN_ROWS))

    @classmethod
    def read(cls, X, y, *, sample_weight, group, categorical_features, objective,
             kind: str, feature_names=None, n_outputs=None, continued=None) -> "Dataset":
        """Checks the training inputs.

        Args:
          kind: the loss's ("row", "group", "dataset").
          feature_names: None or F names (``check.check_feature_names``).
          n_outputs: fit's ``n_outputs`` argument (``check.check_y``).
          continued: the model an ``init_model`` fit continues, or None. A DataFrame's
            columns are matched to its ``feature_names``, and with categorical features
            X is read as its encoder's codes (``categorical.read_with``).
        """
        column_order = getattr(continued, "feature_names", None)
        encoder = getattr(continued, "encoder", None)
        if column_order is not None:
            X = frames.select_columns(X, column_order)
        columns = frames.column_names(X)
        if encoder is None:
            X, declared = categorical.read(X, categorical_features)
        else:
            X, declared = categorical.read_with(encoder, X, categorical_features), None
        X = check.check_X(X)
        names = check.check_feature_names(feature_names, columns, X.shape[1])
        y = check.check_y(y, X.shape[0], objective, n_outputs=n_outputs, kind=kind)
        weight = (sample_weight if check.is_traced(sample_weight)
                  else check.check_sample_weight(sample_weight, X.shape[0]))
        group_index, group_mask = group_layout(kind, group, X.shape[0])
        return cls(X, y, weight, group_index, group_mask, declared, feature_names=names)

    def encoded(self, objective, vector_output: bool, n_outputs: int, one_hot_max_size,
                seed, init_model=None, statistic_orders: int = 1,
                target_statistic: str | None = None) -> "Dataset":
        """The rows with categorical columns encoded (``categorical.fit_encoder``).

        Args:
          one_hot_max_size: an int, or None for ``categorical.default_one_hot_max_size``
            (and then ``categorical.default_one_hot_beside``'s 0/1 columns beside the
            statistics of small columns).
          statistic_orders: P, the orders of the rows target statistics are drawn under.
          target_statistic: which statistics (``categorical.statistic_labels``), None
            for the label's default (``categorical.default_statistic``).
          init_model: the model this fit continues, or None. Its encoder, when it has
            one, encodes the rows (read as its codes by ``read``): its trees' thresholds
            hold for its statistics only, so they are not fitted again on these rows.
        """
        categorical.check_one_hot_max_size(one_hot_max_size)
        continued = getattr(init_model, "encoder", None)
        if continued is not None:
            return dataclasses.replace(self, X=continued.encoded_rows(self.X),
                                       encoder=continued)
        if init_model is not None and self.declared is not None:
            raise ValueError("init_model has no categorical features but X has categorical "
                             "columns; continue it with the columns it was trained on, as "
                             "numbers.")
        if self.declared is None:
            return self
        targets, why = categorical.statistic_targets(self.y, objective, vector_output,
                                                     n_outputs)
        beside = 0
        if one_hot_max_size is None:
            scalar_label = not isinstance(self.y, dict) and np.ndim(self.y) == 1
            one_hot_max_size = categorical.default_one_hot_max_size(
                self.n_rows, scalar_label and targets is not None
                and not check.is_traced(self.weight))
            beside = categorical.default_one_hot_beside(one_hot_max_size)
        # A traced seed (vmap over seeds) cannot draw host permutations: they use seed 0.
        encoder, X, others = categorical.fit_encoder(
            self.declared, self.X, targets, why, self.weight, one_hot_max_size,
            0 if check.is_traced(seed) else seed, statistic_orders, target_statistic,
            beside)
        return dataclasses.replace(self, X=X, encoder=encoder, order_statistics=others)

    def thresholds(self, n_bins: int, seed) -> np.ndarray:
        """f32[F, B - 1]: the bin edges, with B from ``binning.bins_needed`` (at most
        ``n_bins``: fewer when no feature fills them).

        Weighted quantiles when the weights are concrete; under ``vmap`` over weights
        or seeds the edges are unweighted, and a traced seed samples with seed 0.
        """
        weight = None if check.is_traced(self.weight) else self.weight
        thresholds = compute_thresholds(self.X, n_bins, weight,
                                        0 if check.is_traced(seed) else seed)
        return trimmed(thresholds, bins_needed(thresholds, n_bins, self.n_rows))

    def binned(self, thresholds: np.ndarray) -> jax.Array:
        """u8[F, N] on the device: the rows binned with ``thresholds``; with
        ``order_statistics`` u8[F + (P - 1) C, N], each further order's C statistic
        columns after the F (``core.statistic_orders``), binned with their columns' cuts."""
        bins = apply_bins(self.X, thresholds)
        extra = self.order_statistics
        if extra is not None:
            n_orders, n_rows, n_columns = extra.values.shape
            joined = aligned_empty((bins.shape[0] + n_orders * n_columns, n_rows), BIN_DTYPE)
            joined[:bins.shape[0]] = bins
            joined[bins.shape[0]:] = apply_column_bins(extra.values,
                                                       thresholds[list(extra.columns)])
            bins = joined
        # device_put adopts the (aligned) binned matrix on CPU: no second copy of it.
        return jax.device_put(bins)

    def sparse_group(self, thresholds: np.ndarray, missing_values: bool = True
                     ) -> SparseGroup | None:
        """The features whose histograms are summed from their entries
        (``binning.sparse_group``; ``missing_values``: ``may_hold_missing``), or None:
        never a target-statistic column of several orders."""
        extra = self.order_statistics
        return sparse_group(self.X, thresholds, () if extra is None else extra.columns,
                            missing_values)

    @staticmethod
    def entries(bins: jax.Array, group: SparseGroup) -> SparseEntries:
        """``group``'s ``SparseEntries`` on the device (``binning.sparse_entries``), from
        the binned rows u8[F, N]."""
        return jax.device_put(sparse_entries(np.asarray(bins), group))


def read_shared_X(X, name: str = "X"):
    """X read once for many fits (``fit_many``, ``cv``, forests), each of which reads
    the result again without a copy.

    Returns:
      a ``frames.Table`` for a DataFrame or an array of labels (its names and labels
      kept, so that categorical columns stay categorical), else X checked by
      ``check.check_X``: read-only f32[N, F].
    """
    if frames.is_frame(X) or (isinstance(X, np.ndarray) and X.dtype.kind in "OSU"):
        return frames.read(X, name)
    return check.check_X(X, name)


def group_layout(kind: str, group, n_rows: int):
    """(index i32[Q, M], mask bool[Q, M]) of the rows of each group, or (None, None).

    A "dataset" loss sees all rows as one group; a "group" loss one query per group,
    from ``group`` (query ids, each query's rows contiguous).
    """
    if kind == "row":
        return None, None
    if kind == "dataset":
        return jnp.arange(n_rows, dtype=jnp.int32)[None], jnp.ones((1, n_rows), bool)
    ids = check.check_group(group, n_rows)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    sizes = np.diff(np.r_[starts, n_rows])
    positions = np.arange(n_rows) - np.repeat(starts, sizes)
    index = np.zeros((starts.size, sizes.max()), np.int32)
    mask = np.zeros(index.shape, bool)
    query = np.repeat(np.arange(starts.size), sizes)
    index[query, positions] = np.arange(n_rows)
    mask[query, positions] = True
    return jnp.asarray(index), jnp.asarray(mask)


@dataclasses.dataclass(frozen=True)
class EvalRows:
    """One checked validation set, before binning.

    Attributes:
      name: its name in history keys ("<name>:<metric>").
      X: read-only f32[Nv, F] (encoded like the training rows).
      y: checked labels.
      weight: f32[Nv] (a tracer under ``vmap``: ``jaxgbt.cv``'s fold masks).
      group: checked query ids i32[Nv], or None.
    """

    name: str
    X: np.ndarray
    y: Any
    weight: Any
    group: np.ndarray | None


def read_eval_set(i: int, entry, *, encoder, n_features: int, objective, kind: str,
                  traced: bool, feature_names=None, n_outputs=None,
                  n_classes=None) -> EvalRows:
    """Checks ``eval_set[i]``: ``(X, y)``, ``(X, y, sample_weight)`` or a dict with keys
    X, y and optionally sample_weight, group, name.

    Args:
      traced: the fit runs under ``vmap``/``jit``.
      feature_names: the training columns' names: a DataFrame's columns are matched by
        them, in any order; None reads columns by position.
      n_outputs, n_classes: as for ``check.check_y``.
    """
    if isinstance(entry, dict):
        unknown = set(entry) - set(_EVAL_SET_KEYS)
        if unknown or not {"X", "y"} <= set(entry):
            raise ValueError(f"eval_set[{i}] must have keys X and y (and optionally "
                             f"sample_weight, group, name); got {sorted(entry)}.")
        fields = entry
    elif isinstance(entry, (tuple, list)) and len(entry) in (2, 3):
        fields = dict(zip(("X", "y", "sample_weight"), entry, strict=False))
    else:
        raise TypeError(f"eval_set[{i}] must be (X, y), (X, y, sample_weight) or a dict; "
                        f"got {type(entry).__name__}.")
    name = str(fields.get("name", f"valid_{i}"))
    X_val = fields["X"]
    if feature_names is not None:
        X_val = frames.select_columns(X_val, feature_names, f"eval_set[{i}] X")
    X_val = (check.check_X(X_val, f"eval_set[{i}] X") if encoder is None
             else encoder.transform(X_val, f"eval_set[{i}] X"))
    if X_val.shape[1] != n_features:
        raise ValueError(f"eval_set[{i}] X has {X_val.shape[1]} features but X has "
                         f"{n_features}; pass the same columns.")
    y_val = check.check_y(fields["y"], X_val.shape[0], objective, n_outputs=n_outputs,
                          kind=kind, n_classes=n_classes, name=f"eval_set[{i}] y")
    w_val = fields.get("sample_weight")
    if check.is_traced(w_val):  # under vmap (jaxgbt.cv: one 0/1 mask per fold)
        if w_val.shape != (X_val.shape[0],):
            raise ValueError(f"eval_set[{i}] sample_weight has shape {w_val.shape}; it "
                             f"needs ({X_val.shape[0]},), one weight per row.")
        if not traced:
            raise ValueError(f"eval_set[{i}] sample_weight is traced but the fit is not: "
                             "vmap the training parameters or weights along with it.")
    else:
        try:
            w_val = check.check_sample_weight(w_val, X_val.shape[0])
        except (TypeError, ValueError) as error:
            raise type(error)(f"eval_set[{i}]: {error}") from None
    group = None
    if kind == "group" or fields.get("group") is not None:
        group = check.check_group(fields.get("group"), X_val.shape[0])
    return EvalRows(name, X_val, y_val, w_val, group)
