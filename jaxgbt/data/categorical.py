"""Categorical features: label codes on the host, one-hot columns and ordered target statistics.

A categorical column becomes numeric columns before binning, and an ``Encoder`` kept in
the model does the same at predict time:

* a column with at most ``one_hot_max_size`` categories (a missing value counting as one
  category when training saw it) becomes one 0/1 column per category, so a split on it
  is CatBoost's one-hot split "x == c";
* a larger one becomes M target-statistic columns (by default below ``SMALL_DATA_ROWS``
  rows, one of at most ``ONE_HOT_BESIDE_MAX_SIZE`` categories also keeps its 0/1 columns,
  before its statistics): smoothed shares or means of a label
  over the rows of the row's category, ``(sum of w*t + a * prior) / (sum of w + a)`` with
  ``a = PRIOR_WEIGHT``. Which labels t and priors is ``target_statistic``
  (``statistic_labels``): ``"mean"`` takes the label as it is (one column per class)
  with its weighted mean as the prior (M = 1 for a scalar label); ``"borders"``,
  CatBoost's default statistic, takes the label as classes, 0/1 as it is, a class index
  as one 0/1 column per class, any other label above its median or not, each with the
  priors 0, 0.5 and 1 (M = 3 for a scalar label, 3K for K classes), and its shares
  rounded to ``BORDER_LEVELS`` levels of [0, 1]. By default (``default_statistic``)
  labels of two classes (a 0/1 label) get the mean, any other label borders.

Training rows get *ordered* statistics (Prokhorenkova et al., "CatBoost: unbiased boosting
with categorical features", NeurIPS 2018, section 3.2): for a random permutation of the rows
drawn from ``seed``, row i's statistic sums only the rows of its category that come before
it, so a row's own label never enters its own value (a plain mean would, and would let an
id column memorise the labels). One permutation, not an average of several: averaging
tends to the leave-one-out mean ``(S - y_i) / (n - 1)``, which falls as the row's own label
rises, so trees can read the label back (section 3.2 of the paper; on adult, 4 averaged
permutations gave a test logloss 0.001 to 0.003 worse than 1). Instead, as CatBoost does,
the statistics may be drawn under several orders (``fit_encoder``'s ``orders``), each kept
apart as an ``OrderStatistics``: the trees take turns on them, each order with its own
margins (``core.statistic_orders``). Prediction rows get the
statistic over all training rows; a category training never saw gets the prior; NaN
(missing) is a category of its own, in training and at predict time.

Values: a categorical, string or object column of a DataFrame (pandas, polars or pyarrow,
read by ``data.frames``), or a NumPy object array, holds *labels*: they are mapped to codes
0..C-1 on the host, and the labels are kept in the model so that predict reads the same
labels. Any other categorical column holds *values* compared as float32 (NumPy codes,
integer columns). Dimension names are those of ``core/dtypes.py``; F_enc is the width of
the encoded matrix the trees split on.
"""

import dataclasses
import math
import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.dtypes import FLOAT_DTYPE
from jaxgbt.data import frames, sparse
from jaxgbt.data import validation as check
from jaxgbt.data.transfer import zero_padded_rows

NUMERIC, ONE_HOT, TARGET = "numeric", "one_hot", "target"
# ``one_hot_max_size=None`` picks by the training rows. From SMALL_DATA_ROWS rows up, columns
# of up to 64 categories one-hot: on the accuracy suite's categorical sets (columns of 2 to
# 42 categories) one-hot for every column was better than target statistics of one order
# above 4 categories beyond noise on 4 of 15 rows and worse on none, and on adult (26,000
# training rows, and 6,400 of them) better than statistics under an order per tree; above
# 64 neither accuracy nor the cost of one column per category was measured. Below it,
# CatBoost's mix: columns of two categories one-hot, larger ones target statistics under a
# new order of the rows per tree (``default_statistic_orders``), better than one-hot on
# the suite's sets of 860 to 2,400 training rows (docs/accuracy.md, "Target statistics
# under several orders").
ONE_HOT_MAX_SIZE = 64
SMALL_DATA_ROWS = 5_000
SMALL_DATA_ONE_HOT_MAX_SIZE = 2
# Below SMALL_DATA_ROWS, a column of 3 to this many categories keeps its 0/1 columns
# beside its statistics. A statistic is its category's label mean, so a category whose
# effect averages out over another column (it raises the label in one range of that
# column and lowers it in the other) gets a value near the others' and cannot be split
# out; its 0/1 column can. On a synthetic task of that kind the test accuracy went from
# 0.84 to 0.95 (one-hot alone: 0.95), and on 22 rows of real sets below 5,000 rows the
# scores were level (docs/accuracy.md, "One-hot columns beside the statistics").
ONE_HOT_BESIDE_MAX_SIZE = 8
PRIOR_WEIGHT = 1.0
# ``target_statistic``: the mean label, or the label as classes under three priors,
# CatBoost's "Borders" (one border, the median, for a label that is not 0/1), whose shares
# are rounded to 16 levels as CatBoost's 15 uniform borders of a statistic
# (``CtrBorderCount``) cut them. By default every label but a 0/1 one gets borders: on
# the regression sets and tasks measured (docs/accuracy.md, "Borders: the label as
# classes under three priors") they were better than the mean on 7 of 8 (Wage beyond
# noise), on five multiclass tasks on 3 of 10 rows and worse on none ("Multiclass
# labels with categorical columns"), while on 0/1 labels rounded borders were worse
# than the mean (OJ beyond noise) and unrounded ones 1.6 to 2.3 times as slow for no
# gain beyond noise.
BORDERS, MEAN = "borders", "mean"
TARGET_STATISTICS = (BORDERS, MEAN)
BORDER_PRIORS = (0.0, 0.5, 1.0)
BORDER_LEVELS = 16
# By default the target statistics are drawn under a new order for every tree, up to
# this many orders times training rows: each round moves every order's margins, so a
# round costs P x N more.
STATISTIC_ORDER_CELLS = 2**20


def default_one_hot_beside(one_hot_max_size: int) -> int:
    """The largest column kept one-hot beside its statistics under the default
    ``one_hot_max_size``: ``ONE_HOT_BESIDE_MAX_SIZE`` in the small-data regime (where
    the default is ``SMALL_DATA_ONE_HOT_MAX_SIZE``), else 0 (none)."""
    return ONE_HOT_BESIDE_MAX_SIZE if one_hot_max_size == SMALL_DATA_ONE_HOT_MAX_SIZE else 0


def default_one_hot_max_size(n_rows: int, statistics_possible: bool) -> int:
    """``one_hot_max_size`` for ``fit(one_hot_max_size=None)``: CatBoost's 2 below
    ``SMALL_DATA_ROWS`` training rows where target statistics can be computed and mean
    something (one scalar label per row, on the host: regression, classes, counts; and
    concrete weights), else ``ONE_HOT_MAX_SIZE``. A survival label's (time, event)
    means were measured worse than one-hot (docs/accuracy.md)."""
    small = n_rows < SMALL_DATA_ROWS and statistics_possible
    return SMALL_DATA_ONE_HOT_MAX_SIZE if small else ONE_HOT_MAX_SIZE


def default_statistic_orders(n_rows: int, n_trees: int) -> int:
    """P for ``fit(statistic_orders=None)``: one order per tree, at most the largest
    power of two within ``STATISTIC_ORDER_CELLS // N`` (P is a shape: as a power of two
    it changes only where N doubles, so that nearby row counts share a compiled
    program), at least 1."""
    budget = STATISTIC_ORDER_CELLS // max(n_rows, 1)
    return max(1, min(n_trees, 1 << (budget.bit_length() - 1) if budget else 1))

_MSG_TARGET_NEEDS_LABEL = """\
categorical feature(s) {columns} have more than one_hot_max_size={size} categories, so they \
are encoded by target statistics, which need {need}. {why} Raise one_hot_max_size to at \
least {largest} to encode them one-hot instead."""


class Column(NamedTuple):
    """How one raw column is encoded (hashable, so that it can be a static field).

    Attributes:
      kind: NUMERIC (passed through), ONE_HOT or TARGET.
      n_categories: C, categories seen in training, missing not counted.
      offset: where the column's categories start in ``Encoder.categories``.
      missing: ONE_HOT (and TARGET with ``one_hot``): whether a 0/1 column for missing
        values follows the categories' 0/1 columns.
      stats_offset: TARGET only: where its C + 2 rows start in ``Encoder.stats``.
      one_hot: TARGET only: its 0/1 columns (and the missing one) come first, then its
        statistics (``ONE_HOT_BESIDE_MAX_SIZE``).
    """

    kind: str
    n_categories: int = 0
    offset: int = 0
    missing: bool = False
    stats_offset: int = 0
    one_hot: bool = False

    @property
    def n_one_hot(self) -> int:
        """Its 0/1 columns: the categories' and the missing one."""
        if self.kind == ONE_HOT or (self.kind == TARGET and self.one_hot):
            return self.n_categories + self.missing
        return 0


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Encoder:
    """Maps raw X (N, F) to the encoded matrix (N, F_enc) the trees split on.

    Attributes:
      categories: f32[sum of C]: each categorical column's known values, increasing,
        concatenated (codes 0..C-1 for a labelled column).
      stats: f32[sum over target columns of (C + 2), M]: per target column its
        categories' statistics, then the missing category's, then the prior (unseen).
      columns: one Column per raw column (static).
      labels: per raw column, the tuple of labels whose codes are 0..C-1, or None when
        the column holds values (static).
    """

    categories: jax.Array
    stats: jax.Array
    columns: tuple[Column, ...] = dataclasses.field(metadata=dict(static=True))
    labels: tuple[tuple | None, ...] = dataclasses.field(metadata=dict(static=True))

    @property
    def n_features(self) -> int:
        return len(self.columns)

    @property
    def n_targets(self) -> int:
        return self.stats.shape[-1]

    def width(self, column: Column) -> int:
        if column.kind == ONE_HOT:
            return column.n_one_hot
        return column.n_one_hot + self.n_targets if column.kind == TARGET else 1

    @property
    def n_encoded(self) -> int:
        """F_enc, columns of the encoded matrix."""
        return sum(self.width(column) for column in self.columns)

    def encoded_columns(self, feature: int) -> range:
        """The encoded columns that raw column ``feature`` becomes."""
        start = sum(self.width(column) for column in self.columns[:feature])
        return range(start, start + self.width(self.columns[feature]))

    def statistic_columns(self, feature: int) -> range:
        """The encoded columns of raw column ``feature``'s target statistics (the last
        ``n_targets`` of its columns; empty unless it is a TARGET column)."""
        columns = self.encoded_columns(feature)
        if self.columns[feature].kind != TARGET:
            return columns[:0]
        return columns[len(columns) - self.n_targets:]

    def to_codes(self, X, name: str = "X") -> np.ndarray:
        """Raw X (an array, an object array or a DataFrame, ``data.frames``) as f32[N, F]
        on the host: labelled columns as codes (NaN missing, -1 unseen), other columns as
        they are. Pass the result to ``predict_raw`` under ``jax.jit``."""
        table = frames.read(X, name)
        if table.shape[1] != self.n_features:
            raise ValueError(f"{name} has {table.shape[1]} features but the model was trained "
                             f"on {self.n_features}; pass the same columns, in the same order.")
        out = np.empty(table.shape, FLOAT_DTYPE, order="F")  # written column by column
        for j, labels in enumerate(self.labels):
            out[:, j] = (table.column_numbers(j, name) if labels is None
                         else lookup_codes(table.column_labels(j), labels))
        return out

    def encode(self, X: jax.Array) -> jax.Array:
        """f32[N, F] codes (see ``to_codes``) -> f32[N, F_enc], as one compiled program
        (it runs under jit and vmap as well): eagerly, each categorical column's few
        operations compiled a program each, for every new row count."""
        return _compiled_encode(self, X)

    def _encode(self, X: jax.Array) -> jax.Array:
        blocks, run = [], None  # run: first column of the current stretch of numeric ones
        for j, column in enumerate(self.columns + (Column(ONE_HOT),)):  # a sentinel ends runs
            if column.kind == NUMERIC:
                run = j if run is None else run
                continue
            if run is not None:
                blocks.append(X[:, run:j])
                run = None
            if j == self.n_features:
                break
            x = X[:, j]
            known = self.categories[column.offset:column.offset + column.n_categories]
            if column.n_one_hot:
                hot = x[:, None] == known[None, :]
                if column.missing:
                    hot = jnp.concatenate([hot, jnp.isnan(x)[:, None]], axis=1)
                blocks.append(hot.astype(jnp.float32))
            if column.kind == ONE_HOT:
                continue
            n = column.n_categories
            if n:
                at = jnp.minimum(jnp.searchsorted(known, x), n - 1)
                row = jnp.where(known[at] == x, at, n + 1)
            else:
                row = jnp.full(x.shape, n + 1)
            row = jnp.where(jnp.isnan(x), n, row)  # row n: missing; row n + 1: unseen
            blocks.append(self.stats[column.stats_offset + row])
        return jnp.concatenate(blocks, axis=1)

    def transform(self, X, name: str = "X") -> np.ndarray:
        """Raw X -> f32[N, F_enc] with prediction statistics, on the host."""
        return self.encoded_rows(self.to_codes(X, name))

    def encoded_rows(self, codes: np.ndarray) -> np.ndarray:
        """``encode`` of host codes f32[N, F] -> a new f32[N, F_enc] NumPy array.

        The rows are padded with zeros to a batch size (``transfer.batch_rows``, as a
        prediction's are) and the padding cut from the result: fits and reads of nearby
        row counts then share the compiled encoding. Each row is encoded on its own, so
        the padding changes no value."""
        encoded = self.encode(jax.device_put(zero_padded_rows(codes)))
        return np.array(encoded)[:codes.shape[0]]


_compiled_encode = jax.jit(Encoder._encode)


# Reading X on the host ---------------------------------------------------------------------


class Declared(NamedTuple):
    """What ``read`` found: which columns are categorical, and their labels."""

    categorical: tuple[int, ...]
    labels: tuple[tuple | None, ...]


def read(X, categorical_features, name: str = "X"):
    """Splits X into numbers and categories (host side, before ``check_X``).

    Args:
      X: array of shape (N, F), NumPy object array, or DataFrame (``data.frames``).
      categorical_features: None or "auto" (the DataFrame's CATEGORY columns: pandas
        ``category``, polars ``Categorical``/``Enum``, Arrow ``dictionary``), or a list
        of column indices or DataFrame column names (those, plus the CATEGORY columns).

    Returns:
      ``(X, None)`` untouched for an array without categorical columns, ``(numbers,
      None)`` with numbers f32[N, F] for a DataFrame without them, else ``(codes,
      Declared)`` with codes f32[N, F].
    """
    if isinstance(categorical_features, str) and categorical_features != "auto":
        raise ValueError(f"categorical_features={categorical_features!r}: use None, 'auto', or "
                         "a list of column indices or DataFrame column names.")
    declared = [] if categorical_features in (None, "auto") else categorical_features
    if isinstance(declared, (str, bytes)) or not hasattr(declared, "__iter__"):
        raise TypeError(f"categorical_features must be None, 'auto' or a list of column indices "
                        f"or names; got {categorical_features!r}.")
    declared = list(declared)
    if declared and sparse.is_sparse(X):
        raise ValueError(f"categorical_features={declared!r} cannot be used with a "
                         f"scipy.sparse {name}: categorical columns are read from labels or "
                         "codes of a dense array or a DataFrame. One-hot encode them into "
                         "the sparse matrix instead, or pass a dense X.")
    if not declared and not frames.is_frame(X):
        return X, None  # check_X reads an array without copying it
    table = frames.read(X, name)
    chosen = {j for j, kind in enumerate(table.kinds) if kind == frames.CATEGORY}
    chosen |= {_declared_index(entry, table, name) for entry in declared}
    strings = [table.column_label(j) for j in range(table.shape[1])
               if j not in chosen and not table.numeric[j]]
    if strings:
        raise TypeError(f"{name} must hold numbers; the columns {strings} do not. Declare them "
                        "in categorical_features=[...] or give them a categorical dtype (pandas "
                        "category, polars Categorical or Enum, Arrow dictionary).")
    if not chosen:
        return table.values, None
    out = np.array(table.values)
    labels = []
    for j, column in enumerate(table.labels):
        if j in chosen and column is not None:
            out[:, j], found = factorize(column)
            labels.append(found)
        else:
            labels.append(None)
    return out, Declared(tuple(sorted(chosen)), tuple(labels))


def read_with(encoder: Encoder, X, categorical_features, name: str = "X") -> np.ndarray:
    """X read for a fit that continues a model with categorical columns: f32[N, F] codes
    in the model's labels (``Encoder.to_codes``: unseen labels as -1, as predict reads
    them), so that the new trees see the columns exactly as the model's trees do.

    Args:
      categorical_features: None, "auto", or the model's categorical columns (indices
        or names); a column the model takes as numbers is an error.
    """
    if sparse.is_sparse(X):
        raise ValueError(f"init_model has categorical features, which a scipy.sparse {name} "
                         "cannot hold; pass X as a DataFrame or a dense array, as for "
                         "predict.")
    table = frames.read(X, name)
    if categorical_features not in (None, "auto"):
        if isinstance(categorical_features, (str, bytes)) or not hasattr(
                categorical_features, "__iter__"):
            raise TypeError(f"categorical_features must be None, 'auto' or a list of column "
                            f"indices or names; got {categorical_features!r}.")
        declared = {_declared_index(entry, table, name) for entry in categorical_features}
        numeric = [table.column_label(j) for j in sorted(declared)
                   if encoder.columns[j].kind == NUMERIC]
        if numeric:
            raise ValueError(f"categorical_features names the columns {numeric}, which "
                             "init_model takes as numbers; a continued fit encodes the "
                             "columns as the model does. Leave categorical_features out, or "
                             "give the model's categorical columns.")
    return encoder.to_codes(table, name)


def _declared_index(entry, table: frames.Table, name: str) -> int:
    """The column index of one ``categorical_features`` entry (an index or a name)."""
    if isinstance(entry, str):
        if table.names is None:
            raise ValueError(f"categorical_features names the column {entry!r}, but {name} has "
                             "no column names (it is an array, not a DataFrame); give column "
                             "indices instead.")
        if entry not in table.names:
            raise ValueError(f"categorical_features names the column {entry!r}, which {name} "
                             f"does not have; its columns are {list(table.names)}.")
        return table.names.index(entry)
    if isinstance(entry, numbers.Integral) and not isinstance(entry, bool):
        n_columns = table.shape[1]
        if not 0 <= entry < n_columns:
            raise ValueError(f"categorical_features holds the index {entry}, out of range: "
                             f"{name} has {n_columns} columns, so indices lie in "
                             f"[0, {n_columns - 1}].")
        return int(entry)
    raise TypeError(f"categorical_features entries must be column indices (int) or "
                    f"DataFrame column names (str); got {entry!r}.")


def label_key(value):
    """A label as a JSON-safe Python value: str, int or finite float (others as str)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(float(value)):
        return float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _distinct(values: np.ndarray) -> tuple[list, np.ndarray]:
    """(distinct non-missing keys, index i64[N] into them, -1 for missing)."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - one Python step per value instead
        pd = None
    if pd is not None:
        # Hashing in pandas, then label_key on the few distinct values only.
        index, uniques = pd.factorize(np.asarray(values, dtype=object))
        uniques = list(uniques)
    else:  # pragma: no cover
        index = np.array([-1 if frames.is_missing(v) else 0 for v in values], np.int64)
        uniques = [v for v in values if not frames.is_missing(v)]
        index[index == 0] = np.arange(len(uniques))
    position: dict = {}
    keys: list = []
    remap = np.empty(len(uniques) + 1, np.int64)
    for i, value in enumerate(uniques):
        if frames.is_missing(value):
            remap[i] = -1
            continue
        key = label_key(value)
        at = position.get(key)
        if at is None:
            at = position[key] = len(keys)
            keys.append(key)
        remap[i] = at
    remap[-1] = -1  # index -1 (missing) maps to -1
    return keys, remap[np.asarray(index, np.int64)]


def factorize(values: np.ndarray) -> tuple[np.ndarray, tuple]:
    """Labels -> (codes f32[N] with NaN for missing, the sorted labels)."""
    keys, index = _distinct(values)
    order = sorted(range(len(keys)), key=lambda i: (type(keys[i]).__name__, keys[i]))
    rank = np.empty(len(keys), np.int64)
    rank[order] = np.arange(len(keys))
    codes = np.where(index < 0, np.nan, rank[np.maximum(index, 0)] if keys else 0.0)
    return codes.astype(FLOAT_DTYPE), tuple(keys[i] for i in order)


def lookup_codes(values: np.ndarray, labels: tuple) -> np.ndarray:
    """Labels -> codes f32[N]: position in ``labels``, NaN missing, -1 unseen."""
    keys, index = _distinct(values)
    position = {label: i for i, label in enumerate(labels)}
    mapped = np.array([position.get(key, -1) for key in keys] + [0], FLOAT_DTYPE)
    return np.where(index < 0, np.nan, mapped[index]).astype(FLOAT_DTYPE)


# Fitting the encoder -----------------------------------------------------------------------


def statistic_targets(y, objective, vector_output: bool, n_outputs: int):
    """(f64[N, M] targets of the statistics, None) or (None, why they are unavailable)."""
    if isinstance(y, dict):
        return None, "y is a dict of arrays (a structured label)."
    y = np.asarray(y, np.float64)
    if objective.classification and vector_output:  # per class: P(class k | category)
        return (y[:, None] == np.arange(n_outputs)[None, :]).astype(np.float64), None
    if y.ndim == 1 and not vector_output:
        targets = y[:, None]
    elif y.ndim == 2:
        targets = y
    else:
        return None, f"y has shape {y.shape}."
    if not np.isfinite(targets).all():
        return None, "y holds infinite labels."
    return targets, None


class OrderStatistics(NamedTuple):
    """The training rows' ordered target statistics under the orders after the first.

    Attributes:
      columns: the C encoded columns that hold target statistics (the encoded matrix
        holds their values under the first order).
      values: f32[P - 1, N, C], each further order's values of those columns.
    """

    columns: tuple[int, ...]
    values: np.ndarray

    @property
    def n_orders(self) -> int:
        """P, the first order included."""
        return self.values.shape[0] + 1


def check_target_statistic(value) -> str | None:
    """None (chosen by the label, ``default_statistic``) or one of ``TARGET_STATISTICS``."""
    return None if value is None else check.check_choice(value, "target_statistic",
                                                         TARGET_STATISTICS)


def default_statistic(targets: np.ndarray) -> str:
    """``target_statistic=None``'s choice for f64[N, T] targets (``statistic_targets``):
    the mean for two classes (one or two columns of 0s and 1s: a 0/1 label, a class index
    of two classes), borders for any other label (regression, counts, relevance grades,
    a class index of three or more classes: CatBoost's default for its MultiClass loss
    too)."""
    two_classes = targets.shape[1] <= 2 and np.all((targets == 0) | (targets == 1))
    return MEAN if two_classes else BORDERS


def rounded_shares(values: np.ndarray) -> np.ndarray:
    """Shares in [0, 1] rounded to the middle of their level of ``BORDER_LEVELS`` equal
    levels, in the input's dtype (float32 or float64, where a power of two times a value
    and k + 0.5 over it are exact): the values borders statistics take."""
    levels = np.clip(np.floor(values * BORDER_LEVELS), 0, BORDER_LEVELS - 1)
    return (levels + 0.5) / BORDER_LEVELS


def statistic_labels(targets: np.ndarray, weight: np.ndarray, statistic: str
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The labels the statistics average and their priors: (f64[N, T], f64[Q, T]), Q
    priors for each of the T labels; the statistics' M = Q x T columns are prior-major
    (column q * T + t: label t under prior q).

    Args:
      targets: f64[N, T] from ``statistic_targets``: a scalar label, a label per
        column, or one 0/1 column per class.
      weight: f64[N] sample weights.
      statistic: ``"mean"``: the targets, each with its weighted mean as prior (Q = 1).
        ``"borders"``: each target as a class, a column of 0s and 1s as it is and any
        other as 1 above its median (over every row, unweighted), else 0, under each
        prior of ``BORDER_PRIORS`` (Q = 3). (Their shares are then rounded,
        ``rounded_shares``.)
    """
    if statistic == MEAN:
        return targets, (np.matmul(weight, targets) / weight.sum())[None]
    binary = np.all((targets == 0) | (targets == 1), axis=0)
    classes = np.where(binary, targets, targets > np.median(targets, axis=0)).astype(np.float64)
    priors = np.repeat(np.asarray(BORDER_PRIORS)[:, None], targets.shape[1], axis=1)
    return classes, priors


def fit_encoder(declared: Declared, X: np.ndarray, targets, why_no_targets, weight,
                one_hot_max_size: int, seed: int, orders: int = 1,
                statistic: str | None = None, one_hot_beside: int = 0
                ) -> tuple[Encoder, np.ndarray, OrderStatistics | None]:
    """The Encoder, the training rows' encoded matrix f32[N, F_enc] and, with ``orders``
    above 1 and some column encoded by target statistics, their values under the other
    orders (else None).

    Args:
      declared: from ``read``.
      X: f32[N, F] codes (``declared.X`` after ``check_X``).
      targets: f64[N, M] labels of the statistics, or None (see ``statistic_targets``).
      why_no_targets: the reason targets is None.
      weight: f32[N] sample weights, or a traced array (then no statistics).
      one_hot_max_size: columns with at most this many categories are one-hot.
      seed: seeds the permutations of the ordered statistics.
      orders: P, the random orders of the rows the statistics are computed under; the
        first is the same for every P, so that P = 1 is the one order alone.
      statistic: which statistics, one of ``TARGET_STATISTICS`` (``statistic_labels``),
        or None for ``default_statistic``'s.
      one_hot_beside: columns of target statistics with at most this many categories (a
        missing value counting as one) keep their 0/1 columns too
        (``default_one_hot_beside``).
    """
    n_rows, n_features = X.shape
    codes, known, columns = {}, [], []
    for j in declared.categorical:
        values, codes[j] = np.unique(X[:, j][~np.isnan(X[:, j])], return_inverse=True)
        codes[j] = _with_missing(X[:, j], codes[j], values.size)
        known.append(values)
    sizes = {j: known[i].size + bool(np.isnan(X[:, j]).any())
             for i, j in enumerate(declared.categorical)}
    needs_stats = [j for j in declared.categorical if sizes[j] > one_hot_max_size]
    if needs_stats and (targets is None or check.is_traced(weight)):
        need = "a scalar or per-column numeric label on the host"
        why = why_no_targets if targets is None else (
            "sample_weight is traced (jax.vmap, fit_many, cv), and the statistics are "
            "computed on the host.")
        raise ValueError(_MSG_TARGET_NEEDS_LABEL.format(
            columns=needs_stats, size=one_hot_max_size, need=need, why=why,
            largest=max(sizes[j] for j in needs_stats)))
    weight = np.asarray(weight, np.float64) if needs_stats else None
    prior = None
    if needs_stats:
        statistic = statistic or default_statistic(targets)
        targets, prior = statistic_labels(targets, weight, statistic)
    n_targets = 1 if targets is None else (prior.size if needs_stats else targets.shape[1])
    offset, stats_rows, ordered = 0, [], {}
    rng = np.random.default_rng([seed, 0xCA7])
    # i64[P, N], stacked once rather than by each column's statistics
    permutations = (np.stack([rng.permutation(n_rows) for _ in range(orders)])
                    if needs_stats else None)
    stats_offset = 0
    position = {j: i for i, j in enumerate(declared.categorical)}
    for j in range(n_features):
        if j not in position:
            columns.append(Column(NUMERIC))
            continue
        n = known[position[j]].size
        if j not in needs_stats:
            columns.append(Column(ONE_HOT, n, offset, bool(np.isnan(X[:, j]).any())))
        else:
            beside = sizes[j] <= one_hot_beside
            columns.append(Column(TARGET, n, offset, beside and bool(np.isnan(X[:, j]).any()),
                                  stats_offset, one_hot=beside))
            table, ordered[j] = _target_statistics(codes[j], n, targets, weight, prior,
                                                   permutations)
            if statistic == BORDERS:
                table, ordered[j] = rounded_shares(table), rounded_shares(ordered[j])
            stats_rows.append(table)
            stats_offset += n + 2
        offset += n
    categories = np.concatenate(known) if known else np.empty(0, FLOAT_DTYPE)
    stats = (np.concatenate(stats_rows) if stats_rows
             else np.empty((0, n_targets), np.float64)).astype(FLOAT_DTYPE)
    encoder = Encoder(jnp.asarray(categories, jnp.float32), jnp.asarray(stats),
                      tuple(columns), declared.labels)
    encoded = encoder.encoded_rows(X)
    for j, values in ordered.items():
        encoded[:, encoder.statistic_columns(j)] = values[0]
    if orders == 1 or not ordered:
        return encoder, encoded, None
    columns = tuple(c for j in ordered for c in encoder.statistic_columns(j))
    others = np.concatenate([values[1:] for values in ordered.values()], axis=2)
    return encoder, encoded, OrderStatistics(columns, others)


def _with_missing(x: np.ndarray, present_codes: np.ndarray, n: int) -> np.ndarray:
    """i64[N] category codes, missing as n."""
    codes = np.full(x.shape[0], n, np.int64)
    codes[~np.isnan(x)] = present_codes
    return codes


def _target_statistics(codes, n, targets, weight, prior, permutations):
    """(f64[n + 2, M] prediction table, f32[P, N, M] ordered training values, one
    [N, M] per permutation), M = Q x T for ``targets`` f64[N, T] and ``prior`` f64[Q, T]
    or f64[T] (Q = 1), prior-major (``statistic_labels``).

    Table rows: the n categories, the missing category (code n), the prior (unseen).
    Ordered value of row i: the same smoothing over the rows of its category placed
    before i in the permutation. The sums are taken once per label, whatever the priors.
    """
    prior = np.asarray(prior).reshape(-1, targets.shape[1])  # [Q, T]
    weighted = weight[:, None] * targets  # [N, T]
    sums = np.zeros((n + 1, targets.shape[1]))
    np.add.at(sums, codes, weighted)
    counts = np.bincount(codes, weights=weight, minlength=n + 1)
    table = np.concatenate([_smoothed(sums, counts, prior), prior.reshape(1, -1)])
    return table, _ordered_values(codes, weight, weighted, prior, np.asarray(permutations))


def _smoothed(sums: np.ndarray, counts: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """f64[..., Q x T], prior-major: ``(sums + a * prior) / (counts + a)`` for sums
    f64[..., T], counts f64[...] and each of the Q rows of ``prior`` f64[Q, T]."""
    values = ((sums[..., None, :] + PRIOR_WEIGHT * prior)
              / (counts + PRIOR_WEIGHT)[..., None, None])
    return values.reshape(*values.shape[:-2], -1)


# Permutations x rows whose ordered values are computed at once: a few float64 arrays of
# this many entries (times the label's columns) at a time, whatever the orders.
_ORDERED_BATCH_CELLS = 2**21


def _ordered_values(codes, weight, weighted, prior, permutations) -> np.ndarray:
    """f32[P, N, M]: under each permutation of ``permutations`` i64[P, N], each row's
    smoothed mean labels over the rows of its category placed before it (``weighted``
    f64[N, T] the weighted labels, ``prior`` f64[Q, T], M = Q x T as ``_smoothed``).

    Several permutations at a time, each along its own axis: the same additions in the
    same order as one permutation at a time (a cumulative sum runs along its axis), so
    the same values, without a Python step per permutation (300 of them took 0.28 s of a
    2,000-row fit's 1.3 s, docs/benchmarks.md "Target statistics under several orders").
    """
    n_rows = codes.size
    # By category, then by place in the permutation: every permutation puts the sorted
    # codes in the same order, so the groups start at the same places.
    sorted_codes = np.sort(codes)
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, n_rows]))  # its group's first row
    small_codes = codes.astype(np.uint16 if codes.max(initial=0) < 2**16 else np.int64)
    values = np.empty((len(permutations), n_rows, prior.size), FLOAT_DTYPE)
    step = max(1, _ORDERED_BATCH_CELLS // max(n_rows, 1))
    for lo in range(0, len(permutations), step):
        batch = permutations[lo:lo + step]
        # The rows in the permutation's order, sorted by category keeping that order
        # (a stable sort of small integers: a radix sort).
        order = np.take_along_axis(batch, np.argsort(small_codes[batch], axis=1,
                                                     kind="stable"), axis=1)
        ordered_weight, ordered_weighted = weight[order], weighted[order]  # [p, N], [p, N, T]
        before_sum = np.cumsum(ordered_weighted, axis=1) - ordered_weighted  # exclusive sums
        before_count = np.cumsum(ordered_weight, axis=1) - ordered_weight
        # Subtracting the sums up to the group's first row leaves the group's earlier rows.
        batch_values = _smoothed(before_sum - before_sum[:, first],
                                 before_count - before_count[:, first], prior)
        np.put_along_axis(values[lo:lo + step], order[..., None], batch_values, axis=1)
    return values


def check_one_hot_max_size(value) -> int | None:
    """None (chosen by the rows, ``default_one_hot_max_size``) or an int >= 0."""
    return None if value is None else check.check_int(value, "one_hot_max_size", 0)
