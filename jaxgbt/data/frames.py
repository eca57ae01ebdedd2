"""X and y read from NumPy arrays and from DataFrames of pandas, polars or pyarrow.

DataFrames are read through narwhals, one code path for every library it knows (pandas,
polars, pyarrow Tables; RecordBatches and other Arrow streams through the Arrow C stream
interface); none of those libraries is a dependency. ``read`` gives a ``Table``: the
column names, an f32[N, F] matrix of the numeric columns and, per non-numeric column,
its labels. Each column has a *kind*, which says how ``data.categorical`` takes it:

* NUMBERS: numeric and boolean columns. Nulls (nullable integers and booleans, Arrow
  nulls) become NaN, a missing value.
* CATEGORY: dictionary-typed columns (pandas ``category``, polars ``Categorical`` and
  ``Enum``, Arrow ``dictionary``): categorical features without being declared.
* LABELS: any other column (strings, objects, dates): categorical when declared in
  ``categorical_features``, else it must hold numbers. Strings are not categorical on
  their own, as in LightGBM and scikit-learn: an id or free-text column by mistake
  is an error naming it rather than a feature.

Labels are object arrays with None for a missing value. Columns are matched by name
(``select_columns``); arrays are read by position.
"""

import collections
import dataclasses

import jax
import numpy as np

from jaxgbt.core.dtypes import FLOAT_DTYPE
from jaxgbt.core.tracing import is_traced

NUMBERS, CATEGORY, LABELS = "numbers", "category", "labels"

def _nw():
    """narwhals, imported on the first DataFrame read: it is a tenth of a second of
    ``import jaxgbt`` that NumPy input never needs."""
    import narwhals.stable.v2 as nw

    return nw


# Plain values: never frames, so they skip narwhals' checks.
_NOT_FRAMES = (np.ndarray, jax.Array, list, tuple, int, float, bool, np.generic)


@dataclasses.dataclass(frozen=True, eq=False)
class Table:
    """X read on the host, column by column.

    Attributes:
      values: f32[N, F], read-only: column j's numbers where ``numeric[j]`` (NaN for a
        missing value), else NaN.
      labels: per column, object[N] of its labels (missing as None; NumPy object arrays
        keep their own missing values) for CATEGORY and LABELS columns, else None.
      kinds: per column NUMBERS, CATEGORY or LABELS.
      numeric: per column, whether ``values`` holds it: NUMBERS columns, and LABELS
        columns whose labels are all numbers or missing.
      names: a DataFrame's column names, or None for an array.
    """

    values: np.ndarray
    labels: tuple[np.ndarray | None, ...]
    kinds: tuple[str, ...]
    numeric: tuple[bool, ...]
    names: tuple | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape

    def column_label(self, j: int):
        """Column j's name, or its index for an array."""
        return j if self.names is None else self.names[j]

    def numbers(self, name: str = "X") -> np.ndarray:
        """The read-only f32[N, F] matrix, when every column holds numbers.

        Raises:
          TypeError: naming the columns that do not.
        """
        other = [self.column_label(j) for j, ok in enumerate(self.numeric) if not ok]
        if other:
            raise TypeError(f"{name} must hold numbers; the columns {other} do not (the "
                            "model has no categorical features there).")
        return self.values

    def column_numbers(self, j: int, name: str = "X") -> np.ndarray:
        """Column j as f32[N] (missing as NaN), or a TypeError naming it."""
        if not self.numeric[j]:
            preview = [str(v) for v in self.labels[j][:3]]
            raise TypeError(f"{name} column {self.column_label(j)!r} must hold numbers (it is "
                            "not a labelled categorical column of the model); got values such "
                            f"as {preview}.")
        return self.values[:, j]

    def column_labels(self, j: int) -> np.ndarray:
        """Column j's labels: object[N], or its numbers (NaN missing) for a NUMBERS column."""
        return self.values[:, j] if self.labels[j] is None else self.labels[j]

    def select(self, order: list[int]) -> "Table":
        """The columns at the positions ``order``."""
        values = self.values[:, order]
        values.flags.writeable = False
        return Table(values, tuple(self.labels[j] for j in order),
                     tuple(self.kinds[j] for j in order),
                     tuple(self.numeric[j] for j in order),
                     None if self.names is None else tuple(self.names[j] for j in order))


def _narwhals(value, name: str = "X", series: bool = False):
    """``value`` as a narwhals DataFrame (or Series, when ``series``), or None when it
    is not one narwhals reads (an array, a list, a tracer)."""
    if isinstance(value, _NOT_FRAMES) or is_traced(value):
        return None
    nw = _nw()
    from narwhals.exceptions import DuplicateError

    try:
        found = nw.from_native(value, eager_only=True, allow_series=series or None,
                               pass_through=True)
        if found is not value:
            return found
        if not series and hasattr(value, "__arrow_c_stream__") and hasattr(value, "schema"):
            # An Arrow table narwhals does not take as is: a RecordBatch, a stream reader.
            return nw.from_arrow(value, backend="pyarrow")
    except DuplicateError as error:
        raise ValueError(_repeated_names_message(value, name, error)) from error
    if isinstance(nw.from_native(value, pass_through=True), nw.LazyFrame):
        raise TypeError(f"{name} is a lazy frame ({type(value).__name__}); collect it into "
                        "a DataFrame first (e.g. .collect()).")
    return None


def _repeated_names_message(value, name: str, error: Exception) -> str:
    # pyarrow's ``columns`` are the column arrays, its names are ``column_names``.
    labels = getattr(value, "column_names", None)
    labels = list(getattr(value, "columns", ()) if labels is None else labels)
    repeated = repeated_labels(tuple(labels)) or str(error)
    return (f"{name} has the repeated column names {repeated}; predict matches columns by "
            "name, so rename them to be distinct.")


def is_frame(X) -> bool:
    """Whether X is a DataFrame narwhals reads, or an already read ``Table``."""
    return isinstance(X, Table) or _narwhals(X) is not None


def column_names(X) -> tuple | None:
    """The column names of a DataFrame or Table, or None for an array (no data is copied).

    Raises:
      ValueError: the DataFrame repeats a name.
    """
    if isinstance(X, Table):
        return X.names
    frame = _narwhals(X)
    return None if frame is None else tuple(frame.columns)


def read(X, name: str = "X") -> Table:
    """X (an array, a DataFrame or a Table) as a Table.

    Raises:
      TypeError: X cannot be read as an array.
      ValueError: X is not 2-D.
    """
    if isinstance(X, Table):
        return X
    frame = _narwhals(X, name)
    if frame is not None:
        return _read_frame(frame)
    try:
        array = np.asarray(X)
    except Exception as error:  # noqa: BLE001 - re-raised with the argument's name
        raise TypeError(f"{name} could not be read as an array: {error}") from error
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {array.shape}.")
    if np.issubdtype(array.dtype, np.number) or array.dtype == bool:
        values = array.astype(FLOAT_DTYPE)
        values.flags.writeable = False
        n_columns = array.shape[1]
        return Table(values, (None,) * n_columns, (NUMBERS,) * n_columns, (True,) * n_columns)
    return _from_labels([np.asarray(array[:, j], dtype=object) for j in range(array.shape[1])],
                        (LABELS,) * array.shape[1], array.shape[0], None)


def _read_frame(frame) -> Table:
    """A narwhals DataFrame as a Table: numbers written straight into the matrix
    (f32[N, F], column-major)."""
    n_rows, n_columns = frame.shape
    # Column-major, so that each column is written contiguously (3 to 10 times faster
    # than into a row-major matrix; pandas' own to_numpy gives column-major too).
    values = np.full((n_rows, n_columns), np.nan, FLOAT_DTYPE, order="F")
    labels, kinds = [], []
    for j, column in enumerate(frame.iter_columns()):
        kind = _kind(column.dtype)
        kinds.append(kind)
        if kind == NUMBERS:
            values[:, j] = _series_numbers(column)
            labels.append(None)
        else:
            labels.append(_series_labels(column))
    return _from_labels(labels, tuple(kinds), n_rows, tuple(frame.columns), values)


def _from_labels(labels: list, kinds: tuple, n_rows: int, names, values=None) -> Table:
    """The Table of columns given as labels (None for NUMBERS columns already in values);
    LABELS columns that hold only numbers are written into the matrix too."""
    if values is None:
        values = np.full((n_rows, len(kinds)), np.nan, FLOAT_DTYPE, order="F")
    numeric = []
    for j, (kind, column) in enumerate(zip(kinds, labels, strict=True)):
        numbers = _labels_as_numbers(column) if kind == LABELS else None
        if kind == LABELS and numbers is not None:
            values[:, j] = numbers
        numeric.append(kind == NUMBERS or (kind == LABELS and numbers is not None))
    values.flags.writeable = False
    return Table(values, tuple(labels), kinds, tuple(numeric), names)


def _kind(dtype) -> str:
    nw = _nw()
    if dtype.is_numeric() or dtype == nw.Boolean:
        return NUMBERS
    if isinstance(dtype, (nw.Categorical, nw.Enum)):
        return CATEGORY
    return LABELS


def _series_numbers(series) -> np.ndarray:
    """A numeric or boolean narwhals Series as NumPy numbers, nulls as NaN."""
    # Float columns give nulls back as NaN. Integers and booleans with nulls come back
    # each library its own way (pandas NA in an object array, a masked value); as
    # Float64 every one of them gives NaN.
    if series.dtype.is_float():
        return series.to_numpy()
    nw = _nw()
    if series.null_count() or isinstance(series.dtype, nw.Decimal):
        series = series.cast(nw.Float64)
    return series.to_numpy()


def _series_labels(series) -> np.ndarray:
    """Any narwhals Series as object[N], nulls as None."""
    labels = np.array(series.to_numpy(), dtype=object)
    # From the null mask, not the values: an Arrow dictionary column converts a null
    # to the label its (undefined) index happens to point at.
    labels[series.is_null().to_numpy()] = None
    return labels


def _labels_as_numbers(labels: np.ndarray) -> np.ndarray | None:
    """f32[N] when every label is a number or missing (an object column of numbers),
    else None."""
    if any(isinstance(v, (str, bytes)) for v in labels):
        return None  # NumPy would parse "7" as 7.0
    try:
        return np.array([np.nan if is_missing(v) else v for v in labels], dtype=FLOAT_DTYPE)
    except (TypeError, ValueError):
        return None


def is_missing(value) -> bool:
    """Whether one label is a missing value: None, NaN, pandas NA or NaT."""
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(np.isnan(value))
    # pandas' NA and NaT, known by type so that pandas need not be imported.
    return type(value).__name__ in ("NAType", "NaTType")


def as_array(value) -> np.ndarray:
    """Labels, weights or ids (an array, a Series, a DataFrame) as a NumPy array.

    A Series keeps its dtype (float with NaN for nulls in a numeric one, object for
    labels); a DataFrame gives its f32[N, F] numbers, or an object array when a column
    holds labels. The caller checks the dtype.
    """
    if isinstance(value, Table):
        return _table_array(value)
    found = _narwhals(value, "value", series=True)
    if found is None:
        return np.asarray(value)
    if isinstance(found, _nw().Series):
        return (_series_numbers(found) if _kind(found.dtype) == NUMBERS
                else _series_labels(found))
    return _table_array(_read_frame(found))


def _table_array(table: Table) -> np.ndarray:
    if all(table.numeric):
        return table.values
    out = table.values.astype(object)
    for j, column in enumerate(table.labels):
        if column is not None and not table.numeric[j]:
            out[:, j] = column
    return out


def select_columns(X, feature_names: tuple[str, ...], name: str = "X"):
    """A DataFrame's (or Table's) columns in the order of ``feature_names``, matched by
    name; X itself when it is an array or already in that order.

    Raises:
      ValueError: X lacks some of the names or has columns the model does not know.
    """
    if isinstance(X, Table):
        columns = X.names
    else:
        frame = _narwhals(X, name)
        columns = None if frame is None else tuple(frame.columns)
    if columns is None or columns == tuple(feature_names):
        return X
    known = set(feature_names)
    missing = [c for c in feature_names if c not in set(columns)]
    unknown = [c for c in columns if c not in known]
    if missing or unknown:
        problems = "; ".join(part for part in (
            f"missing columns {missing}" if missing else "",
            f"unknown columns {unknown}" if unknown else "") if part)
        raise ValueError(f"{name}'s columns do not match the model's feature names ({problems}); "
                         f"pass exactly the columns the model was trained on: "
                         f"{list(feature_names)} (in any order), or an array with them in "
                         "that order.")
    if isinstance(X, Table):
        return X.select([columns.index(c) for c in feature_names])
    return frame.select(list(feature_names)).to_native()


def repeated_labels(labels: tuple) -> list:
    """The labels that occur more than once, sorted."""
    counts = collections.Counter(labels)
    return sorted((label for label, n in counts.items() if n > 1), key=str)
