"""Host data shared between the processes of one fit (``fit(distributed=True)``).

Each process reads only its own rows. What every process must see the same of all rows
is built here from small all-gathers over JAX's distributed runtime
(``jax.experimental.multihost_utils.process_allgather``), in process order, so that
every process computes it identically:

- the cut points: each process summarises each column exactly (its sorted distinct
  non-missing values, with their summed weight and count), the summaries are gathered
  and merged, and every process cuts the merged summary as one process would cut the
  concatenated rows (``binning.cut_points_of_distinct``);
- the categorical columns' levels and encoder (``encoded_everywhere``: labels merged,
  the encoder fitted to every row's codes and labels as on one process);
- the labels and weights, for the starting margin (a median or class frequencies need
  all of them), and the validation sets, which every process then scores whole;
- for a ranking loss, that no query has rows in two processes (``check_queries_apart``);
- that the processes passed the same settings where those must agree (``check_settings_agree``:
  ``init_model``, checkpoints, ``base_margin``), one digest of what each process trains on
  for a checkpoint's fingerprint (``agreed_digest``), and what process 0 alone reads from
  a checkpoint (``from_first_process``).

The summaries are exact while a process holds at most ``SKETCH_POINTS_PER_BIN`` x B
distinct values of a column; above, it sends a weighted quantile summary of that column
(``_sketched``: at most 2 x 16 points per bin), so what is exchanged for the cuts is
bounded by the bins, not the rows.
"""

import dataclasses
import hashlib
import json
from collections.abc import Sequence

import jax
import numpy as np
from jax.experimental import multihost_utils

from jaxgbt.core.dtypes import FLOAT_DTYPE
from jaxgbt.data import categorical
from jaxgbt.data import validation as check
from jaxgbt.data.binning import bins_needed, trimmed
from jaxgbt.data.chunks import Summary, cut_points, summarise
from jaxgbt.data.dataset import Dataset, read_eval_set


def _exchanged(exchange, array: np.ndarray) -> np.ndarray:
    """``exchange(array)`` (a ``multihost_utils`` collective) as a NumPy array, a failed
    exchange raised as an error that says what probably happened."""
    try:
        return np.asarray(exchange(array))
    except jax.errors.JaxRuntimeError as error:
        raise RuntimeError(
            "distributed=True: the processes of this run could not exchange their data; "
            "another process has probably failed or exited (see its output), or not every "
            f"process called fit with distributed=True. JAX said: {error}") from error


def _all_gathered(array: np.ndarray) -> np.ndarray:
    """[P, ...]: ``array`` of each process (the same shape on all), in process order."""
    return _exchanged(multihost_utils.process_allgather, array)


def _gathered(values: np.ndarray) -> np.ndarray:
    """i32[P, ...]: a small integer array of each process, stacked in process order."""
    return _all_gathered(np.asarray(values, np.int32))


def _from_first(array: np.ndarray) -> np.ndarray:
    """``array`` of process 0 on every process (the same shape and dtype on all)."""
    return _exchanged(multihost_utils.broadcast_one_to_all, array)


def from_first_process(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Process 0's ``arrays`` on every process, exactly.

    Args:
      arrays: arrays of the same shapes and dtypes on every process; only process 0's
        values are read (the others may pass zeros of those shapes).

    Returns:
      Process 0's arrays, bit for bit. Their bytes travel as one u8 vector, which the
      broadcast (a sum with zeros from the other processes) keeps exact in any dtype:
      a float sum would turn -0.0 into 0.0.
    """
    arrays = [np.ascontiguousarray(a) for a in arrays]
    packed = np.concatenate([a.reshape(-1).view(np.uint8) for a in arrays]
                            + [np.zeros((0,), np.uint8)])
    received = _from_first(packed) if jax.process_count() > 1 else packed
    out, start = [], 0
    for a in arrays:
        out.append(received[start:start + a.nbytes].view(a.dtype).reshape(a.shape).copy())
        start += a.nbytes
    return out


def _gathered_digests(digests: Sequence[str]) -> np.ndarray:
    """u8[P, 64 x len(digests)]: each process's hex digests, in process order."""
    mine = np.frombuffer("".join(digests).encode(), np.uint8)[None]
    return gather_rows([mine])[0]


def agreed_digest(local: str) -> str:
    """One SHA-256 hex digest of every process's ``local`` digest, in process order.

    Each process hashes what it trains on (its binned rows, labels, weights); the
    result, the same on every process, then changes when any process's rows change,
    when rows move between processes, or when the number of processes changes.
    """
    everyone = _gathered_digests([local])
    return hashlib.sha256(everyone.tobytes() + b"processes=%d" % everyone.shape[0]).hexdigest()


def check_settings_agree(settings: dict[str, str]) -> None:
    """Raises, on every process alike, when the processes passed different settings.

    Args:
      settings: {argument name: a SHA-256 hex digest of this process's value}, the
        same names in the same order on every process.

    One small all-gather for all of them; the error names the first that differs.
    """
    names = list(settings)
    everyone = _gathered_digests([settings[name] for name in names])
    for i, name in enumerate(names):
        column = everyone[:, 64 * i:64 * (i + 1)]
        differ = np.flatnonzero((column != column[0]).any(axis=1))
        if differ.size:
            raise ValueError(
                f"distributed=True: the processes passed different {name} (process 0 and "
                f"process {int(differ[0])} differ); every process must pass the same "
                f"{name}, each with its own rows.")


def process_row_counts(n_rows: int) -> np.ndarray:
    """i64[P]: every process's number of training rows, in process order."""
    return _gathered(np.asarray([n_rows])).reshape(-1).astype(np.int64)


def check_agree(value: int, what: str) -> None:
    """Raises, on every process alike, when the processes hold different ``value``s
    (a column count, an output count): they would train different models."""
    seen = _gathered(np.asarray([value])).reshape(-1)
    if (seen != seen[0]).any():
        by_process = ", ".join(f"process {p}: {int(v)}" for p, v in enumerate(seen))
        raise ValueError(f"distributed=True: the processes have different {what} "
                         f"({by_process}); every process must pass the same columns and "
                         "settings, each with its own rows.")


def gather_rows(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Every process's rows of ``arrays``, concatenated in process order.

    Args:
      arrays: arrays of one process with the same number of rows n_p on axis 0 (any
        dtypes; the trailing shapes must agree across processes).

    Returns:
      The arrays with sum(n_p) rows, the same on every process.

    Each row's bytes are packed into one u8 matrix, so one all-gather moves all arrays
    in their own dtypes (float64 would otherwise be cast to float32 by JAX without x64).
    """
    arrays = [np.ascontiguousarray(a) for a in arrays]
    n_rows = arrays[0].shape[0]
    as_bytes = [a.reshape(n_rows, -1).view(np.uint8) if a.size else
                np.zeros((n_rows, a.dtype.itemsize * int(np.prod(a.shape[1:]))), np.uint8)
                for a in arrays]
    packed = np.concatenate(as_bytes, axis=1)
    sizes = _gathered(np.asarray([n_rows, packed.shape[1]]))
    if (sizes[:, 1] != sizes[0, 1]).any():
        raise ValueError("distributed=True: the processes' rows have different shapes or "
                         "dtypes (bytes per row: " + ", ".join(map(str, sizes[:, 1])) + "); "
                         "pass the same columns and label shapes on every process.")
    longest = max(1, int(sizes[:, 0].max()))
    padded = np.zeros((longest, packed.shape[1]), np.uint8)
    padded[:n_rows] = packed
    everyone = _all_gathered(padded)
    rows = np.concatenate([everyone[p, :n] for p, n in enumerate(sizes[:, 0])])
    out, start = [], 0
    for a, b in zip(arrays, as_bytes, strict=True):
        width = b.shape[1]
        part = np.ascontiguousarray(rows[:, start:start + width])
        out.append(part.view(a.dtype).reshape(rows.shape[0], *a.shape[1:]))
        start += width
    return out


# A column with more distinct values on a process than this many per bin is sent as a
# quantile summary of 2 x that many points per bin (``_sketched``) instead of exactly:
# a cut is then off by about 1/16 of a bin's mass at most (docs/distributed.md).
SKETCH_POINTS_PER_BIN = 16


def _column_summaries(X: np.ndarray, weight: np.ndarray | None, max_points: int):
    """Each column's distinct non-missing values, flattened over the columns.

    Args:
      X: f32[N_p, F], NaN missing.
      weight: f64[N_p], or None for unit weights.
      max_points: G; a column with more distinct values is summarised by ``_sketched``.

    Returns:
      (feature i32[S], value f32[S], mass f64[S], count f64[S]): S entries, one per
      distinct value of each column (NaN left out), with the summed weight and the count
      of its rows; or, for a column of more than G distinct values, its sketch.
    """
    parts = []
    for f in range(X.shape[1]):
        unique, mass, count = summarise(X[:, f], weight)  # the chunked reader's, exact
        if unique.size > max_points:
            unique, mass, count = _sketched(unique, mass, count, max_points)
        parts.append((np.full(unique.size, f, np.int32), unique.astype(FLOAT_DTYPE),
                      mass, count))
    return tuple(np.concatenate(p) for p in zip(*parts, strict=True))


def _sketched(unique: np.ndarray, mass: np.ndarray, count: np.ndarray, n_chunks: int):
    """A weighted quantile summary of one column: (value, mass, count) of <= 2G points.

    Args:
      unique: f32[U] sorted distinct values; mass, count: f64[U] their weight and rows.
      n_chunks: G < U.

    The sorted values are cut into G runs of about equal mass (a run starts where the
    mass before it crosses a multiple of total / G; one heavy value stays whole). Each
    run becomes two points, its smallest and its largest value, each carrying half the
    run's mass and count (a run of one value, one point with all of it): the mass at or
    below each run's end is exact, and within a run off by at most half the run. A cut
    found from the merged points is then off by at most about one run of each process
    (half from the points' mass, half from the coarser gaps between them): 1/G of the
    total, plus twice the heaviest value's mass where a value outweighs a run.
    """
    by = mass if mass.sum() > 0 else count  # all weights 0: chunk by rows
    before = np.cumsum(by) - by
    chunk = np.minimum((n_chunks * before / by.sum()).astype(np.int64), n_chunks - 1)
    starts = np.flatnonzero(np.r_[True, chunk[1:] != chunk[:-1]])
    ends = np.r_[starts[1:], unique.size] - 1
    run_mass, run_count = np.add.reduceat(mass, starts), np.add.reduceat(count, starts)
    two = starts != ends  # runs of more than one value: half at each end
    value = np.concatenate([unique[ends], unique[starts[two]]])
    share = np.where(two, 0.5, 1.0)
    order = np.argsort(value, kind="stable")
    return (value[order],
            np.concatenate([run_mass * share, run_mass[two] / 2])[order],
            np.concatenate([run_count * share, run_count[two] / 2])[order])


def thresholds_of_summaries(summaries, n_features: int, n_bins: int) -> np.ndarray:
    """f32[F, B - 1] cut points of gathered column summaries (``_column_summaries`` of
    every process, concatenated): each column's points merged (equal values summed) and
    cut as one process cuts its distinct values; +inf where a column needs fewer."""
    feature, value, mass, count = summaries
    thresholds = np.full((n_features, n_bins - 1), np.inf, FLOAT_DTYPE)
    for f in range(n_features):
        mine = feature == f
        unique, inverse = np.unique(value[mine], return_inverse=True)
        merged = Summary(unique, *(np.bincount(inverse, weights=w[mine], minlength=unique.size)
                                   for w in (mass, count)))
        cuts = cut_points(merged, n_bins - 1)  # with the chunked reader's fall back to counts
        thresholds[f, :cuts.size] = cuts
    return thresholds


def merged_thresholds(X: np.ndarray, weight, n_bins: int) -> np.ndarray:
    """f32[F, B - 1]: the bin edges of all processes' rows, the same on every process.

    Args:
      X: f32[N_p, F], this process's rows (NaN missing).
      weight: f32[N_p] sample weights (traced weights are refused by ``fit`` earlier).
      n_bins: the requested B; the result is trimmed by ``binning.bins_needed``.

    While no process holds more than G = ``SKETCH_POINTS_PER_BIN`` x B distinct values
    of a column, its cuts equal ``Dataset.thresholds`` on the concatenated rows up to
    the order in which float weights are summed (exact for counts and for weights that
    sum exactly), with every row used (one process cuts at most ``MAX_BINNING_ROWS``
    sampled rows). Above, that process sends a summary of at most 2G points
    (``_sketched``), and the mass below each cut is off by at most about 1/G of the
    total (1/16 of a bin) plus twice the mass of the column's heaviest single value.
    """
    n_features = X.shape[1]
    check_agree(n_features, "numbers of columns in X")
    weights = None if weight is None else np.asarray(weight, np.float64)
    if weights is not None and np.all(weights == 1.0):
        weights = None  # unit weights are counts, as on one process
    summaries = _column_summaries(X, weights, SKETCH_POINTS_PER_BIN * n_bins)
    thresholds = thresholds_of_summaries(gather_rows(summaries), n_features, n_bins)
    return trimmed(thresholds, bins_needed(thresholds, n_bins))


def check_queries_apart(group: np.ndarray, name: str = "group") -> None:
    """Raises, on every process alike, when a query id has rows in two processes.

    Args:
      group: i64[N_p], this process's checked query ids (``validation.check_group``).
      name: the argument they came from, for the message.

    A group loss is computed per query on the device holding its rows, so each query's
    rows must all be passed by one process.
    """
    ids = np.unique(group)
    ids, owner = gather_rows([ids, np.full(ids.shape, jax.process_index(), np.int64)])
    order = np.argsort(ids, kind="stable")
    ids, owner = ids[order], owner[order]
    shared = np.flatnonzero(ids[1:] == ids[:-1])
    if shared.size:
        query = int(ids[shared[0]])
        processes = sorted(set(owner[ids == query].tolist()))
        raise ValueError(
            f"distributed=True: query id {query} of {name} has rows in processes "
            f"{', '.join(map(str, processes))} ({shared.size} shared query id(s) in all); "
            "a ranking loss needs each query's rows in one process: split the rows by query "
            "(e.g. by query id modulo the number of processes).")


def _merged_labels(labels: tuple) -> tuple:
    """The sorted union of every process's labels of one column (as
    ``categorical.factorize`` sorts them), the same on every process."""
    mine = np.frombuffer(json.dumps(list(labels)).encode(), np.uint8)
    lengths = _gathered(np.asarray([mine.size])).reshape(-1)
    everyone = gather_rows([mine])[0].tobytes()
    union, start = set(), 0
    for length in lengths:
        union.update(json.loads(everyone[start:start + length].decode()))
        start += int(length)
    return tuple(sorted(union, key=lambda key: (type(key).__name__, key)))


def merged_declared(declared: categorical.Declared, X: np.ndarray
                    ) -> tuple[categorical.Declared, np.ndarray]:
    """The categorical columns with labels merged across processes.

    Args:
      declared: this process's (``categorical.read``): labelled columns hold codes into
        its own sorted labels.
      X: f32[N_p, F] this process's codes and numbers.

    Returns:
      (declared with every labelled column's labels the union of all processes', X with
      those columns' codes into the union): the codes one process gives the
      concatenated rows. Each process must declare the same columns.
    """
    check_agree(len(declared.categorical), "numbers of categorical columns")
    agree = _gathered(np.asarray(declared.categorical)).reshape(jax.process_count(), -1)
    if (agree != agree[0]).any():
        raise ValueError("distributed=True: the processes declare different categorical "
                         f"columns ({agree.tolist()}); declare the same ones on every "
                         "process (a DataFrame column must have a categorical dtype on all).")
    X, labels = np.array(X), list(declared.labels)
    for j in declared.categorical:
        labelled = _gathered(np.asarray([labels[j] is not None])).reshape(-1)
        if labelled.any() != labelled.all():
            raise ValueError(f"distributed=True: categorical column {j} holds labels "
                             "(strings) on some processes and numbers on others; pass the "
                             "same kind of column everywhere.")
        if labels[j] is None:
            continue
        merged = _merged_labels(labels[j])
        position = {label: i for i, label in enumerate(merged)}
        remap = np.array([position[label] for label in labels[j]] + [0], FLOAT_DTYPE)
        present = ~np.isnan(X[:, j])
        X[present, j] = remap[X[present, j].astype(np.int64)]
        labels[j] = merged
    return declared._replace(labels=tuple(labels)), X


def encoded_everywhere(data: Dataset, objective, vector_output: bool, n_outputs: int,
                       one_hot_max_size, seed: int,
                       target_statistic: str | None = None) -> Dataset:
    """``Dataset.encoded`` over every process's rows: this process's rows encoded
    f32[N_p, F_enc] by an Encoder that is the same on every process.

    The categorical columns, the statistics' targets and the weights of all rows are
    gathered (numeric columns are not), and every process fits the encoder to them as
    one process fits the concatenated rows: the same levels, the same one-hot or
    target-statistic choice, the same prediction statistics and, with the same seed,
    the same permutation of all N rows for the ordered statistics, of which each
    process keeps its own rows'. Exactly one process's encoding, for
    O(N x (categorical columns + targets)) exchanged once.
    """
    if data.declared is None:
        return data
    if categorical.check_one_hot_max_size(one_hot_max_size) is None:
        one_hot_max_size = categorical.ONE_HOT_MAX_SIZE  # large data: see its comment
    targets, why = categorical.statistic_targets(data.y, objective, vector_output, n_outputs)
    declared, X = merged_declared(data.declared, data.X)
    weight = data.weight
    columns = list(declared.categorical)
    n_rows = X.shape[0]
    counts = _gathered(np.asarray([n_rows])).reshape(-1)
    first = int(counts[:jax.process_index()].sum())
    has_targets = _gathered(np.asarray([targets is not None])).reshape(-1)
    if has_targets.any() != has_targets.all():
        raise ValueError("distributed=True: the processes' labels differ in kind (target "
                         "statistics could be computed on some and not on others).")
    parts = [X[:, columns], np.asarray(weight, np.float64)]
    if targets is not None:
        parts.append(np.asarray(targets, np.float64))
    gathered = gather_rows(parts)
    all_X = np.zeros((gathered[0].shape[0], X.shape[1]), FLOAT_DTYPE)
    all_X[:, columns] = gathered[0]
    all_targets = gathered[2] if targets is not None else None
    encoder, all_encoded, _ = categorical.fit_encoder(declared, all_X, all_targets, why,
                                                      gathered[1], one_hot_max_size, seed,
                                                      statistic=target_statistic)
    encoded = encoder.encoded_rows(np.asarray(X, FLOAT_DTYPE))
    for j in columns:  # the categorical columns' encoded values of this process's rows
        at = list(encoder.encoded_columns(j))
        encoded[:, at] = all_encoded[first:first + n_rows, at]
    return dataclasses.replace(data, X=encoded, encoder=encoder)


def gathered_labels(y, weight) -> tuple:
    """(y, weight) of all processes' rows in process order: labels an array or a dict
    of arrays with rows on axis 0, weight f32[N_p]."""
    leaves, treedef = jax.tree.flatten(y)
    *leaves, weight = gather_rows([np.asarray(a) for a in leaves] + [np.asarray(weight)])
    return jax.tree.unflatten(treedef, leaves), weight


def gathered_eval_sets(eval_set, margins=None, **read_args) -> tuple:
    """Each validation set with every process's rows, as dicts ``fit`` reads again.

    Args:
      eval_set: this process's validation sets, as ``fit`` takes them.
      margins: None, or one starting margin per set for this process's rows of it
        (``fit``'s ``eval_base_margin``: f32[N_i] or f32[N_i, K]).
      read_args: ``read_eval_set``'s keyword arguments (the training columns, encoder,
        objective, ``n_outputs`` K of a vector-output loss or None, ``n_classes`` K),
        to check each process's part before it is sent.

    Returns:
      (the sets with every process's rows, their margins f32[N_i_all, K] or None).
      Every process then scores the whole sets itself: the same metrics, in the same
      order of summation, so early stopping stops every process at the same round.
    """
    if not eval_set:
        return eval_set, margins
    gathered, gathered_margins = [], None if margins is None else []
    for i, entry in enumerate(eval_set):
        rows = read_eval_set(i, entry, **read_args)
        leaves, treedef = jax.tree.flatten(rows.y)
        columns = dict(X=rows.X, sample_weight=np.asarray(rows.weight))
        if rows.group is not None:  # the queries' rows stay together once concatenated
            check_queries_apart(rows.group, f"eval_set[{i}] group")
            columns["group"] = np.asarray(rows.group, np.int64)
        if margins is not None:  # checked against this process's rows before it is sent
            columns["margin"] = check.check_base_margin(
                margins[i], rows.X.shape[0], read_args["n_classes"],
                read_args["n_outputs"] is not None, f"eval_base_margin[{i}]")
        *leaves, everyone = _gathered_columns([np.asarray(a) for a in leaves], columns)
        if margins is not None:
            gathered_margins.append(everyone.pop("margin"))
        gathered.append(dict(everyone, y=jax.tree.unflatten(treedef, leaves), name=rows.name))
    return gathered, gathered_margins


def _gathered_columns(leaves: list[np.ndarray], columns: dict) -> list:
    """``gather_rows`` of label leaves and named columns: the leaves, then the dict."""
    out = gather_rows([*leaves, *columns.values()])
    return [*out[:len(leaves)], dict(zip(columns, out[len(leaves):], strict=True))]


def check_supported(distributed, *, devices, weight) -> None:
    """Refuses, before any collective, what ``fit(distributed=True)`` does not do yet."""
    if distributed is not True:
        raise TypeError(f"distributed must be True or False; got {distributed!r}.")
    refused = [
        (devices is not None, "devices= (the rows are split over every process's devices: "
                              "drop devices=)"),
        (check.is_traced(weight), "jax.vmap or jax.jit around fit"),
    ]
    for refuse, what in refused:
        if refuse:
            raise ValueError(f"distributed=True does not take {what}.")
