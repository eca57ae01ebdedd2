"""Training rows read in chunks, for data whose float matrix does not fit in memory.

A ``ChunkedData`` is a source of row chunks that can be read more than once: a function
returning a fresh iterator of ``(X_chunk, y_chunk[, weight_chunk])``, or Parquet files
read one row group at a time. ``fit`` reads it twice (XGBoost's external memory,
LightGBM's two-round loading):

1. ``read_chunked``: every chunk's labels and weights are kept (f32[N] each), and each
   column's values go into a mergeable summary (``ColumnSummary``); the float rows are
   then dropped.
2. ``ChunkedDataset.binned``: the cut points come from the summaries, and each chunk is
   binned into one preallocated u8[F, N] matrix (N x F bytes, a quarter of the float32
   rows), in memory or memory-mapped in ``cache_dir``.

Training then runs on the binned matrix as for any fit. The summaries are exact while a
column has at most ``SUMMARY_SIZE`` distinct values: the cut points are then those
``fit`` finds on the concatenated rows (when those are at most
``binning.MAX_BINNING_ROWS``: beyond, ``fit`` cuts a sample of rows, while the summary
sees every row). A column with more distinct values is summarised within a stated
error (``ColumnSummary``).
"""

import dataclasses
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import jax
import numpy as np

from jaxgbt.core.dtypes import BIN_DTYPE, FLOAT_DTYPE
from jaxgbt.data import frames
from jaxgbt.data import validation as check
from jaxgbt.data.binning import apply_bins, bins_needed, cut_points_of_distinct, trimmed
from jaxgbt.data.dataset import Dataset, group_layout
from jaxgbt.data.transfer import aligned_empty

# Entries a column's summary keeps once its distinct values outnumber them. Each
# compression moves at most 1 / SUMMARY_SIZE of the column's weight past a kept value
# (``_compressed``), and a summary of N rows is compressed at most about
# log2(N / SUMMARY_SIZE) + 1 times over (``ColumnSummary.add``): at 10M rows any value's
# weighted rank is within 3e-4 of the exact one, a tenth of the 1/255 between two cuts
# of 256 bins, and below the ~1e-3 spread of a quantile of the 200,000 rows ``fit``
# samples for its cuts.
SUMMARY_SIZE = 2**15


class Summary(NamedTuple):
    """A column's distinct values with the weight and the count of rows on each.

    Attributes:
      value: f32[U], sorted, distinct, no NaN.
      mass: f64[U], the summed weight of the rows at (or, once compressed, just below
        and at) each value.
      count: f64[U], the same in rows.
    """

    value: np.ndarray
    mass: np.ndarray
    count: np.ndarray


def summarise(values: np.ndarray, weights: np.ndarray | None) -> Summary:
    """The exact Summary of one chunk's column.

    Args:
      values: f32[n], NaN for missing (left out).
      weights: f64[n], or None (every row weighs 1).
    """
    present = ~np.isnan(values)
    unique, inverse = np.unique(values[present], return_inverse=True)
    count = np.bincount(inverse, minlength=unique.size).astype(np.float64)
    mass = count if weights is None else np.bincount(
        inverse, weights=weights[present], minlength=unique.size)
    return Summary(unique.astype(FLOAT_DTYPE), mass, count)


def merged(parts: Sequence[Summary]) -> Summary:
    """One Summary of several columns' rows together: equal values' masses added."""
    parts = [p for p in parts if p.value.size]
    if len(parts) <= 1:
        return parts[0] if parts else Summary(np.empty(0, FLOAT_DTYPE), np.empty(0),
                                              np.empty(0))
    value = np.concatenate([p.value for p in parts])
    order = np.argsort(value, kind="stable")
    value = value[order]
    starts = np.flatnonzero(np.r_[True, value[1:] != value[:-1]])
    return Summary(value[starts],
                   np.add.reduceat(np.concatenate([p.mass for p in parts])[order], starts),
                   np.add.reduceat(np.concatenate([p.count for p in parts])[order], starts))


def _compressed(summary: Summary, size: int) -> Summary:
    """At most about ``2 * size`` entries of ``summary`` (itself when it has at most
    ``size``), as a mergeable summary with a bounded rank error.

    The kept values are the first at or past each multiple of 1/size of the total mass
    (and of the total count), and the last one. The rows between two kept values move up
    onto the upper one, so the weight at or below any value x drops by less than
    1/size of the total and never grows: summing summaries sums these errors, and a
    compression adds one more.
    """
    if summary.value.size <= size:
        return summary
    keep = np.zeros(summary.value.size, bool)
    keep[-1] = True
    for weights in (summary.mass, summary.count):
        cumulative = np.cumsum(weights)
        if cumulative[-1] > 0:
            level = np.floor(cumulative * (size / cumulative[-1]))
            keep[np.flatnonzero(np.diff(np.r_[-1.0, level]) > 0)] = True
    kept = np.flatnonzero(keep)

    def moved_up(weights: np.ndarray) -> np.ndarray:
        return np.diff(np.r_[0.0, np.cumsum(weights)[kept]])

    return Summary(summary.value[kept], moved_up(summary.mass), moved_up(summary.count))


@dataclasses.dataclass
class ColumnSummary:
    """A mergeable summary of one column over chunks: exact while the column has at
    most ``size`` distinct values, else within a relative rank error of
    (levels + 1) / size, levels <= log2(N / size) + 1.

    Chunks are merged exactly into ``pending``; when it outgrows ``size`` it is
    compressed and carried into ``levels`` as in a binary counter (two summaries of one
    level merge and compress into the next), so each row's weight passes through few
    compressions, however many chunks there are.
    """

    size: int = SUMMARY_SIZE
    pending: Summary | None = None
    levels: list = dataclasses.field(default_factory=list)

    def add(self, part: Summary) -> None:
        self.pending = part if self.pending is None else merged([self.pending, part])
        if self.pending.value.size <= self.size:
            return
        carry, self.pending = _compressed(self.pending, self.size), None
        for level, held in enumerate(self.levels):
            if held is None:
                self.levels[level] = carry
                return
            carry = _compressed(merged([held, carry]), self.size)
            self.levels[level] = None
        self.levels.append(carry)

    def result(self) -> Summary:
        """The Summary of every row added."""
        return merged([s for s in [self.pending, *self.levels] if s is not None])


def cut_points(summary: Summary, n_value_bins: int) -> np.ndarray:
    """f32[<= n_value_bins - 1]: the cuts ``binning.compute_thresholds`` makes of the
    rows ``summary`` holds (falling back to counts when every row weighs 0)."""
    mass = summary.mass
    if summary.value.size > n_value_bins and mass.sum() <= 0:
        mass = summary.count
    return cut_points_of_distinct(summary.value, mass, n_value_bins)


@dataclasses.dataclass(frozen=True)
class ChunkedData:
    """Rows for ``jaxgbt.fit`` given in chunks, read twice (cut points, then bins).

    Pass it as X with ``y=None``. Only number columns are taken (categorical columns
    are refused for now); labels are one number per row (a column with ``label=``).

    Attributes:
      chunks: a function of no arguments returning a fresh iterable of chunks, each
        ``(X_chunk, y_chunk)`` or ``(X_chunk, y_chunk, weight_chunk)``: X_chunk an
        array of shape (n, F) or a DataFrame (pandas, polars, pyarrow) of number
        columns, y_chunk shape (n,), weight_chunk shape (n,). Each call must give the
        same rows in the same order.
      feature_names: the F column names, or None (a DataFrame chunk's columns).
      cache_dir: None to keep the binned matrix in memory, or a directory in which it
        is memory-mapped (a file deleted when the fit's arrays are).
      description: how the source is shown in messages.
    """

    chunks: Callable[[], Iterable]
    feature_names: tuple[str, ...] | None = None
    cache_dir: str | os.PathLike | None = None
    description: str = "chunks"

    @classmethod
    def from_parquet(cls, paths, *, label: str, weight: str | None = None,
                     columns: Sequence[str] | None = None,
                     cache_dir: str | os.PathLike | None = None) -> "ChunkedData":
        """Parquet files read one row group at a time (pyarrow).

        Args:
          paths: a file or a list of files with the same columns.
          label: the label column's name.
          weight: the sample-weight column's name, or None.
          columns: the feature columns, or None for every other column.
          cache_dir: as for ``ChunkedData``.
        """
        paths = [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else [
            os.fspath(p) for p in paths]
        if not paths:
            raise ValueError("ChunkedData.from_parquet needs at least one file; got none.")
        features = _named_columns(_parquet_names(paths[0]), label, weight, columns, paths[0])
        return cls(lambda: _parquet_chunks(paths, features, label, weight), features,
                   cache_dir, f"Parquet files {paths[:3]}{' ...' if len(paths) > 3 else ''}")


    @classmethod
    def from_frames(cls, frames_of: Callable[[], Iterable], *, label: str,
                    weight: str | None = None, columns: Sequence[str] | None = None,
                    cache_dir: str | os.PathLike | None = None,
                    description: str = "DataFrame chunks") -> "ChunkedData":
        """DataFrame chunks that hold their label (and weight) as columns.

        For sources that yield whole frames: a Ray Dataset's
        ``lambda: dataset.iter_batches(batch_format="pandas")``, database cursors,
        CSV files read with ``pandas.read_csv(..., chunksize=...)``.

        Args:
          frames_of: a function of no arguments returning a fresh iterable of
            DataFrames (pandas, polars or pyarrow), each with the feature columns and
            the label (and weight) column; every call gives the same rows in order.
          label: the label column's name.
          weight: the sample-weight column's name, or None.
          columns: the feature columns, or None for every column but the label and
            the weight (in the first frame's order; every frame must have them).
          cache_dir: as for ``ChunkedData``.
          description: how the source is shown in messages.
        """
        if not callable(frames_of):
            raise TypeError("ChunkedData.from_frames takes a function returning an iterable "
                            f"of DataFrames (so the frames can be read twice); got "
                            f"{type(frames_of).__name__}.")
        features = None if columns is None else tuple(columns)
        return cls(lambda: _frame_chunks(frames_of(), features, label, weight, description),
                   features, cache_dir, description)

    @classmethod
    def from_dask(cls, frame, *, label: str, weight: str | None = None,
                  columns: Sequence[str] | None = None,
                  cache_dir: str | os.PathLike | None = None) -> "ChunkedData":
        """A Dask DataFrame, read one partition at a time (``frame.partitions[i]``
        computed, in order), so at most one partition is in memory.

        Args:
          frame: a ``dask.dataframe.DataFrame``.
          label, weight, columns, cache_dir: as for ``from_frames``.
        """
        names = [str(c) for c in getattr(frame, "columns", ())]
        if not hasattr(frame, "npartitions") or not hasattr(frame, "partitions"):
            raise TypeError("ChunkedData.from_dask takes a dask.dataframe.DataFrame; got "
                            f"{type(frame).__name__}.")
        features = _named_columns(names, label, weight, columns, "the Dask DataFrame")
        return cls.from_frames(
            lambda: (frame.partitions[i].compute() for i in range(frame.npartitions)),
            label=label, weight=weight, columns=features, cache_dir=cache_dir,
            description=f"a Dask DataFrame of {frame.npartitions} partitions")


def _named_columns(names: Sequence[str], label: str, weight: str | None,
                   columns: Sequence[str] | None, where: str) -> tuple[str, ...]:
    """The feature columns of a source with columns ``names``: ``columns``, or every
    column but the label and the weight. Raises ValueError naming what is missing."""
    for name, what in ((label, "label"), (weight, "weight")):
        if name is not None and name not in names:
            raise ValueError(f"{what}={name!r} is not a column of {where}; its columns are "
                             f"{list(names)}.")
    features = tuple(c for c in names if c not in (label, weight)) if columns is None \
        else tuple(columns)
    missing = [c for c in features if c not in names]
    if missing or not features:
        raise ValueError(f"columns {missing} are not in {where} (or no feature column is "
                         f"left); its columns are {list(names)}.")
    return features


def _frame_chunks(frames_iterable: Iterable, features: tuple[str, ...] | None, label: str,
                  weight: str | None, description: str) -> Iterator[tuple]:
    """(X narwhals-native frame, y, weight or None) per DataFrame of ``frames_iterable``."""
    import narwhals.stable.v2 as nw

    for i, native in enumerate(frames_iterable):
        try:
            frame = nw.from_native(native, eager_only=True)
        except TypeError:
            raise TypeError(f"chunk {i} of {description} must be a DataFrame (pandas, polars "
                            f"or pyarrow); got {type(native).__name__}.") from None
        wanted = _named_columns([str(c) for c in frame.columns], label, weight, features,
                                f"chunk {i} of {description}")
        y = frame.get_column(label).to_numpy()
        w = None if weight is None else frame.get_column(weight).to_numpy()
        yield frame.select(list(wanted)).to_native(), y, w


def _parquet_names(path: str) -> list[str]:
    import pyarrow.parquet as pq

    return list(pq.ParquetFile(path).schema_arrow.names)


def _parquet_chunks(paths: list[str], features: tuple[str, ...], label: str,
                    weight: str | None) -> Iterator[tuple]:
    """(X pyarrow Table, y f32[n], weight f32[n] or None) per row group of each file."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    def numbers(column, name: str, path: str) -> np.ndarray:
        kind = column.type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                or pa.types.is_boolean(kind)):
            raise TypeError(f"column {name!r} of {path} has type {kind}; it must hold "
                            "numbers.")
        return pc.cast(column, pa.float32()).to_numpy(zero_copy_only=False)

    for path in paths:
        file = pq.ParquetFile(path)
        for group in range(file.num_row_groups):
            table = file.read_row_group(group, columns=[*features, label] + (
                [weight] if weight is not None else []))
            y = numbers(table.column(label), label, path)
            w = None if weight is None else numbers(table.column(weight), weight, path)
            yield table.select(list(features)), y, w


def _chunk_parts(i: int, chunk, description: str) -> tuple:
    """(X, y, weight or None) of chunk i, unchecked."""
    if not isinstance(chunk, (tuple, list)) or len(chunk) not in (2, 3):
        length = f" of length {len(chunk)}" if isinstance(chunk, (tuple, list)) else ""
        raise TypeError(f"chunk {i} of {description} must be a tuple (X_chunk, y_chunk) or "
                        f"(X_chunk, y_chunk, weight_chunk); got {type(chunk).__name__}"
                        f"{length}.")
    return chunk[0], chunk[1], chunk[2] if len(chunk) == 3 else None


def _chunk_X(i: int, X, description: str) -> tuple[np.ndarray, tuple | None]:
    """(f32[n, F] read-only, column names or None) of chunk i's X, its numbers checked."""
    name = f"chunk {i} X of {description}"
    table = frames.read(X, name)
    kinds = [table.column_label(j) for j, kind in enumerate(table.kinds)
             if kind != frames.NUMBERS]
    if kinds:
        raise TypeError(f"{name} has non-number columns {kinds}; chunked data takes number "
                        "columns only (categorical columns are not supported from chunks "
                        "yet: encode them as numbers first).")
    values = table.values
    if values.ndim != 2 or values.shape[1] == 0:
        raise ValueError(f"{name} must be 2-D with at least one column; got {values.shape}.")
    if np.isinf(values).any():
        rows, cols = np.nonzero(np.isinf(values))
        raise ValueError(f"{name} contains {rows.size} infinite values (first at row "
                         f"{rows[0]} of the chunk, column {cols[0]}); use NaN for missing.")
    return values, table.names


def _chunk_vector(i: int, values, n_rows: int, what: str, description: str) -> np.ndarray:
    """Chunk i's labels or weights as f32[n], finite."""
    name = f"chunk {i} {what} of {description}"
    try:
        array = np.asarray(frames.as_array(values), dtype=FLOAT_DTYPE)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must hold numbers: {error}") from None
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.shape != (n_rows,):
        raise ValueError(f"{name} has shape {array.shape}; it needs ({n_rows},), one value "
                         "per row of the chunk's X.")
    # Infinite labels are left to ``check_y`` (a censored survival label may be +inf).
    bad = np.flatnonzero(np.isnan(array) if what == "y" else ~np.isfinite(array))
    if bad.size:
        raise ValueError(f"{name} has {bad.size} NaN{'' if what == 'y' else ' or infinite'} "
                         f"values (first at row {bad[0]} of the chunk); drop those rows or "
                         "fill them.")
    if what == "weights" and (array < 0).any():
        raise ValueError(f"{name} has negative values; weights must be >= 0.")
    return array


def _iterate(data: ChunkedData) -> Iterator:
    try:
        return iter(data.chunks())
    except TypeError as error:
        raise TypeError(f"ChunkedData.chunks must be a function returning an iterable of "
                        f"chunks; calling it failed: {error}") from None


@dataclasses.dataclass(frozen=True)
class ChunkedDataset(Dataset):
    """A ``Dataset`` whose rows stay in their source until binned: X is None.

    Attributes (besides ``Dataset``'s):
      source: the ``ChunkedData`` read a second time by ``binned``.
      summaries: one ``Summary`` per column, of every row.
      chunk_rows: the rows of each chunk, in order.
    """

    source: ChunkedData | None = None
    summaries: tuple[Summary, ...] = ()
    chunk_rows: tuple[int, ...] = ()

    @property
    def n_rows(self) -> int:
        return sum(self.chunk_rows)

    @property
    def n_columns(self) -> int:
        return len(self.summaries)

    @property
    def n_features(self) -> int:
        return len(self.summaries)

    def encoded(self, objective, vector_output: bool, n_outputs: int, one_hot_max_size,
                seed, init_model=None, statistic_orders: int = 1,
                target_statistic: str | None = None) -> "ChunkedDataset":
        return self  # number columns only: nothing to encode

    def sparse_group(self, thresholds: np.ndarray, missing_values: bool = True) -> None:
        """None: the rows are not held to count their non-zeros (dense histograms)."""
        return None

    def may_hold_missing(self) -> bool:
        """True: the rows are not held to look for NaN."""
        return True

    def thresholds(self, n_bins: int, seed) -> np.ndarray:
        """f32[F, B - 1], B from ``binning.bins_needed``: the cuts of the summaries."""
        thresholds = np.full((self.n_columns, n_bins - 1), np.inf, FLOAT_DTYPE)
        for f, summary in enumerate(self.summaries):
            cuts = cut_points(summary, n_bins - 1)
            thresholds[f, :cuts.size] = cuts
        return trimmed(thresholds, bins_needed(thresholds, n_bins))

    def binned(self, thresholds: np.ndarray) -> jax.Array:
        """u8[F, N] on the device: the source read again, chunk by chunk, into one
        matrix (memory-mapped in ``source.cache_dir`` when one is given)."""
        bins = _binned_matrix((self.n_columns, self.n_rows), self.source.cache_dir)
        start, description = 0, self.source.description
        n_chunks = len(self.chunk_rows)
        for i, chunk in enumerate(_iterate(self.source)):
            X, _, _ = _chunk_parts(i, chunk, description)
            X, _ = _chunk_X(i, X, description)
            if i >= n_chunks or X.shape != (self.chunk_rows[i], self.n_columns):
                raise ValueError(
                    f"{description} gave other rows when read again (chunk {i}: shape "
                    f"{X.shape}, first read "
                    f"{(self.chunk_rows[i], self.n_columns) if i < n_chunks else 'none'}); "
                    "ChunkedData.chunks must return the same chunks on every call.")
            bins[:, start:start + X.shape[0]] = apply_bins(X, thresholds)
            start += X.shape[0]
        if start != self.n_rows:
            raise ValueError(f"{description} gave {start} rows when read again but "
                             f"{self.n_rows} the first time; ChunkedData.chunks must return "
                             "the same chunks on every call.")
        return jax.device_put(bins)


def _binned_matrix(shape: tuple[int, int], cache_dir) -> np.ndarray:
    """An uninitialised u8 matrix, 64-byte aligned: in memory, or mapped from a new file
    in ``cache_dir`` (unlinked at once where the system allows: it is freed with the
    last array that maps it)."""
    if cache_dir is None:
        return aligned_empty(shape, BIN_DTYPE)
    if not os.path.isdir(cache_dir):
        raise ValueError(f"cache_dir={os.fspath(cache_dir)!r} is not a directory; create it "
                         "or pass cache_dir=None to keep the binned rows in memory.")
    with tempfile.NamedTemporaryFile(dir=cache_dir, prefix="jaxgbt-bins-", suffix=".u8",
                                     delete=False) as file:
        path = file.name
    matrix = np.memmap(path, dtype=BIN_DTYPE, mode="w+", shape=shape)
    try:
        os.unlink(path)  # the mapping keeps the data; nothing is left behind on disk
    except OSError:
        pass  # Windows cannot unlink a mapped file: it stays in cache_dir
    return matrix


def read_chunked(source: ChunkedData, y, *, sample_weight, group, categorical_features,
                 objective, kind: str, feature_names=None, n_outputs=None,
                 init_model=None, distributed: bool = False) -> ChunkedDataset:
    """Pass 1 over ``source``: labels, weights and each column's summary.

    Raises:
      ValueError, TypeError: an argument chunked data does not take, or a bad chunk
        (named by its index).
    """
    refused = [(y is not None, "y (the labels come with each chunk: pass y=None)"),
               (sample_weight is not None, "sample_weight (give weights with each chunk)"),
               (group is not None or kind == "group", "group losses (query ids)"),
               (categorical_features is not None, "categorical_features (number columns "
                                                  "only)"),
               (init_model is not None, "init_model (it predicts from the float rows, "
                                        "which are not kept)"),
               (distributed is not False, "distributed=True")]
    for refuse, what in refused:
        if refuse:
            raise ValueError(f"fit with X=ChunkedData does not take {what}.")
    if not isinstance(n_outputs, (type(None), int)):
        raise TypeError(f"n_outputs must be an int or None; got {n_outputs!r}.")
    labels, weights, columns, chunk_rows, names = _first_pass(source)
    names = check.check_feature_names(feature_names or source.feature_names, names,
                                      len(columns))
    y = check.check_y(np.concatenate(labels), sum(chunk_rows), objective,
                      n_outputs=n_outputs, kind=kind)
    weight = check.check_sample_weight(None if weights is None else np.concatenate(weights),
                                       sum(chunk_rows))
    group_index, group_mask = group_layout(kind, None, sum(chunk_rows))
    return ChunkedDataset(None, y, weight, group_index, group_mask, None, None, names,
                          source=source, summaries=tuple(c.result() for c in columns),
                          chunk_rows=tuple(chunk_rows))


def _first_pass(source: ChunkedData):
    """(labels per chunk, weights per chunk or None, a ColumnSummary per column, rows
    per chunk, the first chunk's column names)."""
    if not isinstance(source, ChunkedData):
        raise TypeError(f"expected a ChunkedData; got {type(source).__name__}.")
    description = source.description
    labels, weights, columns, chunk_rows, names = [], [], None, [], None
    weighted = None  # whether chunk 0 came with weights
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for i, chunk in enumerate(_iterate(source)):
            X, y, w = _chunk_parts(i, chunk, description)
            X, chunk_names = _chunk_X(i, X, description)
            if columns is None:
                columns, names = [ColumnSummary() for _ in range(X.shape[1])], chunk_names
            elif X.shape[1] != len(columns) or chunk_names != names:
                raise ValueError(f"chunk {i} X of {description} has {X.shape[1]} columns "
                                 f"{list(chunk_names or [])} but chunk 0 had {len(columns)} "
                                 f"{list(names or [])}; every chunk needs the same columns.")
            weighted = (w is not None) if weighted is None else weighted
            if (w is not None) != weighted:
                raise ValueError(f"chunk {i} of {description} "
                                 f"{'has' if w is not None else 'lacks'} weights but chunk 0 "
                                 f"{'did not' if w is not None else 'did'}; give weights "
                                 "with every chunk or with none.")
            labels.append(_chunk_vector(i, y, X.shape[0], "y", description))
            w = None if w is None else _chunk_vector(i, w, X.shape[0], "weights",
                                                     description)
            if w is not None:
                weights.append(w)
            w64 = None if w is None or np.all(w == 1.0) else w.astype(np.float64)
            parts = pool.map(summarise, X.T, [w64] * X.shape[1])  # a column per task
            for column, part in zip(columns, parts, strict=True):
                column.add(part)
            chunk_rows.append(X.shape[0])
    if sum(chunk_rows) < 2:
        raise ValueError(f"{description} gave {sum(chunk_rows)} rows in {len(chunk_rows)} "
                         "chunks; boosting needs at least 2 rows.")
    return labels, weights or None, columns, chunk_rows, names
