"""Quantile binning on the host: per-feature cut points and the binned matrix.

Each feature gets at most ``n_bins - 1`` value bins, cut at weighted quantiles of its
non-missing values, plus one last bin (index ``n_bins - 1``) that holds NaN. A split
"bin <= b" is stored in the model as the float threshold ``x <= thresholds[f, b]``,
so prediction compares raw floats and never bins; both use the same float32
comparison, so the two always agree.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from jaxgbt.core.config import SparseGroup, bucketed
from jaxgbt.core.dtypes import BIN_DTYPE, FLOAT_DTYPE
from jaxgbt.core.histogram import ENTRY_FEATURE_BLOCK, SparseEntries
from jaxgbt.data import sparse
from jaxgbt.data.transfer import aligned_empty

# Cut points are found on at most this many rows (LightGBM's bin_construct_sample_cnt
# is the same size); binning itself then uses every row.
MAX_BINNING_ROWS = 200_000
# The fewest bins ``bins_needed`` gives: a 0/1 column's two value bins and the missing
# bin, as a power of two.
MIN_TRIMMED_BINS = 4
# The bins of a sparse group of 0/1 columns (``sparse_group``): their two value bins and
# the missing bin, not rounded up to a power of two. The group's histograms are zeroed,
# summed over their bins and searched whole at every level, so a quarter fewer cells
# made 2,000 x 500 0/1 columns of three classes a fifth faster (docs/benchmarks.md,
# "Sparse features"); the bin a power of two adds holds no row and changes no split.
SPARSE_0_1_BINS = 3
# Data of fewer than this many rows x features, and at most this many features, is small:
# a fit's time is mostly compilation. There B is at least ``SMALL_DATA_MIN_BINS``
# (``bins_needed``) and few-valued features get no histograms of their own
# (``bin_groups``), so that small data of one shape, whatever its columns hold, shares
# one program. Neither changes a split (``core.split.repeated_candidates``). Wider data
# keeps both: there the search (features x bins) is what a group narrows, and at 64
# features x 16 bins a depth-6 level's search stays within one compiled size
# (``core.tree.SMALL_SEARCH_CELLS``).
SMALL_DATA_CELLS = 2**16
SMALL_DATA_MAX_FEATURES = 64
SMALL_DATA_MIN_BINS = 16


def is_small_data(n_rows: int, n_features: int) -> bool:
    """Whether N rows of F features are small data (``SMALL_DATA_CELLS``)."""
    return n_features <= SMALL_DATA_MAX_FEATURES and n_rows * n_features < SMALL_DATA_CELLS

# A task of ``apply_bins`` bins this many features of this many rows. It holds a float32
# copy of that block (1 MB) and NumPy's int64 bin indices of one column of it (0.5 MB)
# rather than a transposed copy of the whole matrix, which raised the fit's peak memory
# (docs/benchmarks.md).
_FEATURES_PER_TASK = 4
_ROWS_PER_TASK = 2**16
# A task of ``compute_thresholds`` cuts up to this many features (fewer when there are
# fewer than that per core), from a contiguous copy of their columns (at most 200,000
# rows: 13 MB): a cache line holds 16 float32 values, so reading 16 neighbouring
# columns costs what reading one does.
_CUT_FEATURES_PER_TASK = 16


def _distinct_values(values: np.ndarray, weights: np.ndarray | None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values of one feature f32[U] and the weight on each f64[U]
    (``weights`` None: every row weighs 1, and the weights are counts).

    Without weights a sort and its run lengths give the counts: less than half the time
    of ``np.unique(..., return_inverse=True)``, which also sorts the row positions.
    """
    if weights is None:
        ordered = np.sort(values)
        starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
        counts = np.diff(np.append(starts, ordered.size)).astype(np.float64)
        return ordered[starts], counts
    unique, inverse = np.unique(values, return_inverse=True)
    return unique, np.bincount(inverse, weights=weights, minlength=unique.size)


def _cut_points(values: np.ndarray, weights: np.ndarray | None, n_value_bins: int,
                implicit_zeros: tuple[int, float] = (0, 0.0)) -> np.ndarray:
    """Cut points of one feature: f32[<= n_value_bins - 1], strictly increasing.

    Args:
      values: f32[n], the feature's non-missing values.
      weights: f64[n] or None (every row weighs 1).
      implicit_zeros: (count, weight) of zeros not in ``values``: the entries a sparse
        column does not store (``weight`` unused when ``weights`` is None).

    See ``cut_points_of_distinct``.
    """
    n_zeros, zero_weight = implicit_zeros
    if values.size == 0:  # at most the implicit zeros: one value, no cut
        return np.empty(0, FLOAT_DTYPE)
    unique, mass = _distinct_values(values, weights)
    if n_zeros:
        unique, mass = _with_zeros(unique, mass, n_zeros if weights is None else zero_weight)
    if unique.size > n_value_bins and np.cumsum(mass)[-1] <= 0:
        # all weights zero here: fall back to counts
        counts = _distinct_values(values, None)
        mass = _with_zeros(*counts, n_zeros)[1] if n_zeros else counts[1]
    return cut_points_of_distinct(unique, mass, n_value_bins)


def cut_points_of_distinct(unique: np.ndarray, mass: np.ndarray, n_value_bins: int
                           ) -> np.ndarray:
    """Cut points of one feature from its distinct values: f32[<= n_value_bins - 1].

    Args:
      unique: f32[U], the feature's sorted distinct non-missing values.
      mass: f64[U], the weight on each (a positive total, or counts).

    Between two neighbouring distinct values the cut is their midpoint (or the lower
    value where the midpoint rounds up to the upper one in float32), so unseen values
    between them fall on the nearer side. Processes that train one model together
    (``data.distributed``) merge their distinct values and call this on the merged ones.
    """
    if unique.size <= 1:
        return np.empty(0, FLOAT_DTYPE)
    if unique.size <= n_value_bins:
        lower_index = np.arange(unique.size - 1)
    else:
        cumulative = np.cumsum(mass)
        levels = cumulative[-1] * np.arange(1, n_value_bins) / n_value_bins
        lower_index = np.searchsorted(cumulative, levels, side="left")
        lower_index = np.unique(np.clip(lower_index, 0, unique.size - 2))
    lower = unique[lower_index].astype(np.float64)
    upper = unique[lower_index + 1].astype(np.float64)
    cuts = ((lower + upper) / 2).astype(FLOAT_DTYPE)
    cuts = np.where(cuts >= upper.astype(FLOAT_DTYPE), lower.astype(FLOAT_DTYPE), cuts)
    return np.unique(_outside_flush_band(cuts))


def _with_zeros(unique: np.ndarray, mass: np.ndarray, zero_mass: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """(unique f32[U'], mass f64[U']) with ``zero_mass`` more on the value 0, inserted in
    order when absent: the distinct values of a sparse column with its implicit zeros."""
    at = int(np.searchsorted(unique, 0.0, side="left"))
    mass = mass.astype(np.float64)
    if at < unique.size and unique[at] == 0:
        mass = mass.copy()
        mass[at] += zero_mass
        return unique, mass
    return (np.insert(unique, at, FLOAT_DTYPE(0)), np.insert(mass, at, zero_mass))


# XLA flushes float32 subnormals (0 < |x| < 1.18e-38) to zero on CPU, GPU and TPU, in X
# and in thresholds alike, while NumPy (binning on the host, a user's own evaluation of
# the trees) keeps them. A cut inside that band would send a subnormal value one way on
# the host and the other on the device; at the band's edge, every cut compares a
# subnormal value as it compares 0, so the two agree.
_SMALLEST_NORMAL = np.finfo(FLOAT_DTYPE).tiny


def _outside_flush_band(cuts: np.ndarray) -> np.ndarray:
    """Cuts with |cut| < 1.18e-38 (0 and subnormals) moved to -1.18e-38 (negative ones)
    or +1.18e-38 (the rest); f32[n], still non-decreasing."""
    inside = np.abs(cuts) < _SMALLEST_NORMAL
    edge = np.where(np.signbit(cuts) & (cuts != 0), -_SMALLEST_NORMAL, _SMALLEST_NORMAL)
    return np.where(inside, edge, cuts).astype(FLOAT_DTYPE)


def compute_thresholds(X: np.ndarray, n_bins: int, sample_weight: np.ndarray | None = None,
                       seed: int = 0) -> np.ndarray:
    """Per-feature split thresholds.

    Args:
      X: ndarray of shape (N, F), dtype float32, or a CSC matrix of float32 values
        (``sparse.check_sparse_X``); NaN marks a missing value.
      n_bins: B, bins per feature including the missing-value bin, 3..256.
      sample_weight: ndarray of shape (N,) or None; the quantiles are weighted.
      seed: picks the rows used when N exceeds MAX_BINNING_ROWS.

    Returns:
      ndarray of shape (F, B - 1), dtype float32: ``thresholds[f, b]`` is the upper
      edge of value bin b. Unused bins and the last value bin have +inf.
    """
    n_rows, n_features = X.shape
    n_value_bins = n_bins - 1
    weights = None if sample_weight is None else np.asarray(sample_weight, np.float64)
    if weights is not None and weights.size and np.all(weights == 1.0):
        weights = None  # unit weights are counts: the faster path, the same cuts
    is_sparse = sparse.is_sparse(X)
    if n_rows > MAX_BINNING_ROWS:
        rows = np.sort(np.random.default_rng(seed).choice(n_rows, MAX_BINNING_ROWS, replace=False))
        X = sparse.rows(X, rows) if is_sparse else X[rows]
        weights = None if weights is None else weights[rows]
    thresholds = np.full((n_features, n_value_bins), np.inf, FLOAT_DTYPE)

    n_threads = os.cpu_count() or 1
    per_task = max(1, min(_CUT_FEATURES_PER_TASK, -(-n_features // n_threads)))

    def cut_features(first: int) -> None:
        features = range(first, min(first + per_task, n_features))
        if is_sparse:
            cuts = [_sparse_cut_points(X, f, weights, n_value_bins) for f in features]
        else:  # contiguous copies of the columns: a strided column read a line per value
            block = np.ascontiguousarray(X[:, features.start:features.stop].T)
            few = ({} if weights is not None or n_rows > _FEW_VALUES_MAX_ROWS
                   else _few_valued_cut_points(block, n_value_bins))
            cuts = [few[i] if i in few else _dense_cut_points(column, weights, n_value_bins)
                    for i, column in enumerate(block)]
        for f, feature_cuts in zip(features, cuts, strict=True):
            thresholds[f, : feature_cuts.size] = feature_cuts

    # NumPy's sorts release the GIL: one thread per core.
    tasks = range(0, n_features, per_task)
    with ThreadPoolExecutor(max_workers=min(n_threads, max(len(tasks), 1))) as pool:
        list(pool.map(cut_features, tasks))
    return thresholds


def _dense_cut_points(column: np.ndarray, weights: np.ndarray | None, n_value_bins: int
                      ) -> np.ndarray:
    """``_cut_points`` of one column f32[N]. A column mostly 0 is cut as a sparse column
    is: its other values sorted, its zeros counted (the same cuts, from a sort of a
    fraction of the rows)."""
    not_zero = column != 0  # NaN included
    n_zeros = column.size - int(np.count_nonzero(not_zero))
    if n_zeros <= column.size // 2:
        present = ~np.isnan(column)
        return _cut_points(column[present], None if weights is None else weights[present],
                           n_value_bins)
    rows = np.flatnonzero(not_zero)
    values = column[rows]
    present = ~np.isnan(values)
    if weights is None:
        return _cut_points(values[present], None, n_value_bins, (n_zeros, 0.0))
    zero_weight = weights.sum() - weights[rows].sum()
    return _cut_points(values[present], weights[rows[present]], n_value_bins,
                       (n_zeros, zero_weight))


# Columns whose first rows hold at most this many distinct values (0/1, one-hot and
# other few-valued columns) are tried by ``_few_valued_cut_points``: one sort of them
# all, not about 30 NumPy calls per column (500 0/1 columns: 31 ms of cuts against 7
# at 2,000 rows, 37 against 17 at 20,000). Up to this many rows: from 200,000 a sort of
# every row cost more than sorting a mostly-zero column's other values alone (98
# against 54 ms for 180 columns).
_FEW_VALUES_SAMPLED_ROWS = 256
_FEW_VALUES_SAMPLED_MAX = 8
_FEW_VALUES_MAX_ROWS = 2**15


def _few_valued_cut_points(block: np.ndarray, n_value_bins: int) -> dict[int, np.ndarray]:
    """The cut points of the few-valued columns of ``block`` f32[k, N] (unweighted rows),
    the columns of at most ``n_value_bins`` distinct values besides NaN: {column's index
    in the block: its ``_cut_points``, the same floats}.

    Those cuts are the midpoints of neighbouring distinct values (``cut_points_of_
    distinct``), whatever their counts: found for every such column at once from one
    sort of the columns whose first ``_FEW_VALUES_SAMPLED_ROWS`` rows hold at most
    ``_FEW_VALUES_SAMPLED_MAX`` values. Columns found to hold more values, or whose cuts
    the flush band (``_outside_flush_band``) would merge, are left out (cut one by one).
    """
    sample = np.sort(block[:, :_FEW_VALUES_SAMPLED_ROWS], axis=1)
    sampled = 1 + np.count_nonzero(sample[:, 1:] != sample[:, :-1], axis=1)  # NaN: more
    tried = np.flatnonzero(sampled <= _FEW_VALUES_SAMPLED_MAX)
    if tried.size == 0:
        return {}
    ordered = np.sort(block[tried], axis=1)  # NaN last; -0.0 and 0.0 one value
    starts = ~np.isnan(ordered)
    starts[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]
    n_distinct = np.count_nonzero(starts, axis=1)
    few = n_distinct <= n_value_bins
    if not few.any():
        return {}
    tried, ordered, starts, n_distinct = tried[few], ordered[few], starts[few], n_distinct[few]
    at = np.flatnonzero(starts)
    column, distinct = at // ordered.shape[1], ordered.ravel()[at]
    pair = column[:-1] == column[1:]  # neighbouring distinct values of one column
    lower = distinct[:-1][pair].astype(np.float64)
    upper = distinct[1:][pair].astype(np.float64)
    cuts = ((lower + upper) / 2).astype(FLOAT_DTYPE)
    cuts = np.where(cuts >= upper.astype(FLOAT_DTYPE), lower.astype(FLOAT_DTYPE), cuts)
    cuts = _outside_flush_band(cuts)
    per_column = np.split(cuts, np.cumsum(np.maximum(n_distinct - 1, 0))[:-1])
    return {int(i): c for i, c in zip(tried, per_column, strict=True)
            if np.all(c[1:] > c[:-1])}


def _sparse_cut_points(X, f: int, weights: np.ndarray | None, n_value_bins: int
                       ) -> np.ndarray:
    """``_cut_points`` of column f of a CSC matrix: its stored values and its implicit
    zeros, the same cuts as those of the column densified."""
    rows, values, n_zeros = sparse.column_values(X, f)
    present = ~np.isnan(values)
    if weights is None:
        return _cut_points(values[present], None, n_value_bins, (n_zeros, 0.0))
    zero_weight = weights.sum() - weights[rows].sum() if n_zeros else 0.0
    return _cut_points(values[present], weights[rows[present]], n_value_bins,
                       (n_zeros, zero_weight))


def bins_needed(thresholds: np.ndarray, n_bins: int, n_rows: int | None = None) -> int:
    """B for the histograms: the bins the cut points fill, rounded up to a power of two
    (at least 4, or ``SMALL_DATA_MIN_BINS`` for small data, ``is_small_data``; at most
    ``n_bins``).

    A feature with c finite cut points uses value bins 0..c; the missing bin comes after
    the last value bin in use. Bins past those hold no rows, so dropping them changes no
    split (the candidates they add tie with the feature's last real cut, and ties go to
    the lower bin), while the split search costs per bin: on one-hot or few-valued data
    B goes from 256 to 4. Rounding up keeps the number of compiled programs small.

    Args:
      thresholds: f32[F, n_bins - 1] from ``compute_thresholds``.
      n_bins: the requested B.
      n_rows: N, the training rows, or None for no small-data floor (processes that
        must agree on B, each from its own rows).
    """
    most_cuts = int(np.isfinite(thresholds).sum(axis=1).max(initial=0))
    needed = most_cuts + 2  # value bins 0..most_cuts, then the missing bin
    fewest = MIN_TRIMMED_BINS
    if n_rows is not None and is_small_data(n_rows, thresholds.shape[0]):
        fewest = SMALL_DATA_MIN_BINS
    return min(n_bins, max(fewest, 1 << (needed - 1).bit_length()))


# Features that fill few bins get histograms that narrow (``bin_groups``) when that cuts
# the split search's work (features x bins) by at least this fraction: each group is
# searched by its own compiled code, so a small saving is not worth the compile time.
MIN_GROUP_SAVING = 0.25
# Above this many rows the narrow features' columns, copied out once per tree, cost
# about what their narrower search saves (the histograms' scatters cost per row either
# way), so every feature keeps B bins.
MAX_GROUPED_ROWS = 2**18


def search_candidates(thresholds: np.ndarray, features, n_bins: int,
                      missing_values: bool) -> int | None:
    """The bins a split of some features searched together may end at, the first of
    their histograms' B_g - 1 value bins, or None for all of them.

    A feature with c finite cut points fills value bins 0..c. A split ending at bin
    c - 1 or below divides its values; one ending at bin c sends every value one way,
    which divides the rows only when some are missing (the missing-or-not split); past
    c every candidate repeats one before it (``core.split.repeated_candidates``). The
    count is rounded up to 2**k - 1, so that few-valued features compile to few
    programs whatever their exact counts: 0/1 columns without missing values score one
    candidate of a 4-bin histogram's three.

    Args:
      thresholds: f32[F, B - 1], trimmed (``trimmed``).
      features: the features' indices.
      n_bins: B_g, the bins their histograms hold.
      missing_values: whether a training row may be missing (``BoostConfig``).
    """
    # Every edge below +inf ends a value bin (a -inf edge too, which no fit's data give).
    most_cuts = int((thresholds[np.asarray(features, np.int64)] < np.inf).sum(axis=1)
                    .max(initial=0))
    needed = max(1, most_cuts + int(missing_values))
    rounded = (1 << needed.bit_length()) - 1
    return rounded if rounded < n_bins - 1 else None


def bin_groups(thresholds: np.ndarray, n_rows: int, exclude: tuple[int, ...] = (),
               missing_values: bool = True
               ) -> tuple[tuple[int, tuple[int, ...], int | None], ...] | None:
    """Features whose cut points fill few bins, searched with narrower histograms or
    fewer candidates.

    A feature with c finite cut points needs c + 2 bins (value bins 0..c, then the
    missing bin), rounded up to a power of two as in ``bins_needed``. When one width
    B_g < B splits the features into those that need at most B_g and the rest so that
    the search does at least ``MIN_GROUP_SAVING`` less work, the groups are
    ``((B_g, narrow features, candidates), (B, the others, candidates))`` (up to
    ``MAX_GROUPED_ROWS`` rows); else every feature is one group at B, returned when its
    splits end at fewer than B - 1 bins (``search_candidates``). Otherwise None (every
    feature at B, every candidate), as for small data (``is_small_data``, of the
    densely searched features), whose programs are shared whatever their columns hold.
    The splits are the same either way (``core.search``).

    Args:
      thresholds: f32[F, B - 1], trimmed (``trimmed``).
      n_rows: N, the training rows.
      exclude: features searched elsewhere (``sparse_group``), in no group here.
      missing_values: whether a training row may be missing (``search_candidates``).
    """
    n_bins = thresholds.shape[1] + 1
    kept = np.setdiff1d(np.arange(thresholds.shape[0]), np.asarray(exclude, np.int64))
    if kept.size == 0 or is_small_data(n_rows, kept.size):
        return None
    groups = _narrow_groups(thresholds, kept) if n_rows <= MAX_GROUPED_ROWS else None
    if groups is None:
        candidates = search_candidates(thresholds, kept, n_bins, missing_values)
        return None if candidates is None else (
            (n_bins, tuple(int(f) for f in kept), candidates),)
    return tuple((width, features, search_candidates(thresholds, features, width,
                                                     missing_values))
                 for width, features in groups)


def _narrow_groups(thresholds: np.ndarray, kept: np.ndarray
                   ) -> tuple[tuple[int, tuple[int, ...]], ...] | None:
    """``bin_groups``' two widths (B_g, features) for the features ``kept``, or None
    where no narrower width cuts the search by ``MIN_GROUP_SAVING``."""
    n_bins = thresholds.shape[1] + 1
    if n_bins <= MIN_TRIMMED_BINS:
        return None
    needed = np.isfinite(thresholds[kept]).sum(axis=1) + 2
    full = needed.size * n_bins
    best = None
    width = MIN_TRIMMED_BINS
    while width < n_bins:
        narrow = needed <= width
        cost = int(narrow.sum()) * width + int((~narrow).sum()) * n_bins
        if narrow.any() and not narrow.all() and (best is None or cost < best[0]):
            best = (cost, width, narrow)
        width *= 2
    if best is None or best[0] > (1 - MIN_GROUP_SAVING) * full:
        return None
    _, width, narrow = best
    return ((width, tuple(int(f) for f in kept[narrow])),
            (n_bins, tuple(int(f) for f in kept[~narrow])))


# A feature is sparse when at most this share of its rows are not 0 (NaN counts as not
# 0) ...
SPARSE_MAX_SHARE = 0.25
# ... and the sparse features' histograms are summed from their entries when there are
# at most this share of their rows x features. An entry costs about what a dense row's
# update does (docs/benchmarks.md, "Sparse features"), but it holds 9 bytes, and each
# tree gathers its 8K bytes of g and h, against 1 byte per row and feature in the binned
# matrix: at an eighth, the entries take 2-4 times the binned bytes of their features.
SPARSE_MAX_ENTRY_SHARE = 0.125
# Fewer sparse features than this stay with the dense ones: a group is compiled code of
# its own.
SPARSE_MIN_FEATURES = 16
# The sparse features' histogram is built and searched whole (not in blocks of features,
# as ``core.search`` does the dense ones), so their features x bins are at most this
# many: 128 MB of histogram at 32 nodes and one output (2,000 features x 256 bins).
SPARSE_MAX_CELLS = 2**19
# Rows read per step when counting non-zeros and listing entries (bounded temporaries).
_SPARSE_ROWS_PER_STEP = 2**16
# The entries are as many as the data's values other than 0, and each count compiles a
# training program of its own: two fits of one shape (cross-validation's folds, a grid
# search's refits) compiled twice. Up to ``ENTRY_BUCKET_MAX_ROWS`` rows (where the rows
# are padded to buckets too, ``engine.padding``) the count is rounded up to an eighth
# step between powers of two, padding entries that add into spare segments and leave the
# models as they are; at most an eighth of the entries are padding, each costing what an
# entry does, against a second or more of compilation for each new count.
ENTRY_STEPS_PER_DOUBLING = 8
ENTRY_BUCKET_MIN = 256
ENTRY_BUCKET_MAX_ROWS = 2**16
# Mutually exclusive features (at most one of them not 0 in any row, as one-hot
# columns) are bundled into one column when that leaves at most this share of the
# dense columns' updates (LightGBM's exclusive feature bundling): a row's bundle value
# names the feature and bin it is in, and the bundles' histograms are summed as dense
# columns', then read apart (``histogram.build_sparse_histogram``). A bundled row cost
# 0.6-0.7 of what an entry does from 20,000 rows, and one-hot columns of 2 levels (two
# columns a bundle) were 1.6-1.8 times faster bundled than dense (docs/benchmarks.md,
# "Exclusive features bundled").
BUNDLE_MAX_SHARE = 0.5
# Columns not 0 in up to this share of the rows and of at most this many bins are
# bundled where they can be (one-hot columns of 2 to 8 levels, too dense for entries;
# a column of many values would widen every bundle's slots); without bundles the group
# keeps the columns of ``SPARSE_MAX_SHARE``.
BUNDLE_MAX_COLUMN_SHARE = 0.55
BUNDLE_MAX_BINS = 16
# Bundling is tried from this many rows: below, a bundled row cost as much as an entry
# and the host's search for bundles more than it saved.
BUNDLE_MIN_ROWS = 2**13
# The bundles' row masks (bool[G, N]) are at most this many bytes.
BUNDLE_MAX_MASK_CELLS = 2**26
# Rows the bundles are first sought in, before all of them.
BUNDLE_TRIAL_ROWS = 2**10


def bucket_entries(n_entries: int, n_rows: int) -> int:
    """The entries a sparse group holds for ``n_entries`` values other than 0 in
    ``n_rows`` training rows: ``n_entries`` rounded up to its bucket (see
    ``ENTRY_STEPS_PER_DOUBLING``), or as it is above ``ENTRY_BUCKET_MAX_ROWS`` rows."""
    if n_rows > ENTRY_BUCKET_MAX_ROWS:
        return n_entries
    return bucketed(n_entries, ENTRY_BUCKET_MIN, ENTRY_STEPS_PER_DOUBLING)


def _not_zero_counts(X) -> np.ndarray:
    """i64[F]: the rows of each column that are not 0 (stored entries of sparse X)."""
    if sparse.is_sparse(X):
        return np.diff(X.indptr).astype(np.int64)
    counts = np.zeros(X.shape[1], np.int64)
    for first in range(0, X.shape[0], _SPARSE_ROWS_PER_STEP):
        counts += np.count_nonzero(X[first:first + _SPARSE_ROWS_PER_STEP], axis=0)
    return counts


def sparse_group(X, thresholds: np.ndarray, dense: tuple[int, ...] = (),
                 missing_values: bool = True) -> SparseGroup | None:
    """The features whose histograms are summed from their entries, or None.

    Features with at most ``SPARSE_MAX_SHARE`` of their rows not 0 are sparse (the
    widest of them left out while their features x bins exceed ``SPARSE_MAX_CELLS``);
    they form the group when there are ``SPARSE_MIN_FEATURES`` or more and their values
    other than 0 are at most ``SPARSE_MAX_ENTRY_SHARE`` of their cells, or when they make
    few enough bundles of exclusive features (``exclusive_bundles``, from
    ``BUNDLE_MIN_ROWS`` rows; then features of up to ``BUNDLE_MAX_COLUMN_SHARE`` of their
    rows not 0 and ``BUNDLE_MAX_BINS`` bins are taken first). The splits are those of
    the dense histograms (up to float reassociation in each feature's bin of 0).

    Args:
      X: f32[N, F], or CSC X (``sparse.check_sparse_X``), the training rows.
      thresholds: f32[F, B - 1], trimmed (``trimmed``).
      dense: features kept out of the group whatever their values (target statistics
        whose values differ by order of the rows, while the entries are of one order).
      missing_values: whether a training row may be missing (``search_candidates``).
    """
    n_rows = X.shape[0]
    counts = _not_zero_counts(X)
    counts[list(dense)] = n_rows
    # Bundles first, of columns up to half of whose rows are not 0 (one-hot columns of
    # 2 levels and more), then the sparse columns alone, bundled or as entries.
    tried = None
    few_bins = np.isfinite(thresholds).sum(axis=1) + 2 <= BUNDLE_MAX_BINS
    for candidates, entries in ((few_bins & (counts <= BUNDLE_MAX_COLUMN_SHARE * n_rows), False),
                                (counts <= SPARSE_MAX_SHARE * n_rows, True)):
        features, n_bins = _group_features(thresholds, candidates)
        if features.size < SPARSE_MIN_FEATURES or features.size * n_bins > SPARSE_MAX_CELLS:
            continue
        max_bundles = int(BUNDLE_MAX_SHARE * features.size)
        bundles = None
        # The first rows alone first: features that share one of them share a row of X,
        # so columns that do not bundle (0/1 columns drawn independently) show it cheaply.
        if (n_rows >= BUNDLE_MIN_ROWS and not np.array_equal(features, tried)
                and exclusive_bundles(X, features, counts[features], n_bins, max_bundles,
                                      BUNDLE_TRIAL_ROWS)):
            bundles = exclusive_bundles(X, features, counts[features], n_bins, max_bundles)
        tried = features
        n_entries = int(counts[features].sum())
        if bundles is None and (not entries or
                                n_entries > SPARSE_MAX_ENTRY_SHARE * features.size * n_rows):
            continue
        zero_bins = [int(np.searchsorted(thresholds[f], FLOAT_DTYPE(0), side="left"))
                     for f in features]
        return SparseGroup(features=tuple(int(f) for f in features),
                           zero_bins=tuple(zero_bins), n_bins=n_bins,
                           n_entries=1 if bundles else bucket_entries(n_entries, n_rows),
                           n_candidates=search_candidates(thresholds, features, n_bins,
                                                          missing_values),
                           bundles=bundles)
    return None


def _group_features(thresholds: np.ndarray, candidates: np.ndarray
                    ) -> tuple[np.ndarray, int]:
    """(the features of bool[F] ``candidates`` a group holds, its bins B_s): as many
    bins as the widest needs, a power of two but ``SPARSE_0_1_BINS`` for 0/1 columns,
    the widest left out while the group's features x bins exceed ``SPARSE_MAX_CELLS``."""
    features = np.flatnonzero(candidates)
    needed = np.isfinite(thresholds[features]).sum(axis=1) + 2
    n_bins = min(thresholds.shape[1] + 1,
                 max(MIN_TRIMMED_BINS, 1 << (int(needed.max(initial=2)) - 1).bit_length()))
    while features.size * n_bins > SPARSE_MAX_CELLS and n_bins > MIN_TRIMMED_BINS:
        n_bins //= 2  # the group's histogram is one block: the widest features leave it
        features, needed = features[needed <= n_bins], needed[needed <= n_bins]
    if n_bins == MIN_TRIMMED_BINS and needed.max(initial=2) <= SPARSE_0_1_BINS:
        n_bins = SPARSE_0_1_BINS
    return features, n_bins


def exclusive_bundles(X, features: np.ndarray, counts: np.ndarray, n_bins: int,
                      max_bundles: int, n_rows: int | None = None
                      ) -> tuple[tuple[int, ...], ...] | None:
    """Bundles of mutually exclusive features: in no row is more than one feature of a
    bundle other than 0 (NaN counts as not 0).

    Greedy, as LightGBM's: the features by falling count of rows not 0, each into the
    first bundle it shares no row with and that has room, else into a bundle of its
    own. A bundle holds at most ``255 // n_bins`` features, so that its values (0 for a
    row where each is 0, else 1 + k * n_bins + the bin of its k-th feature) fit a byte.

    Args:
      X: f32[N, F], or CSC X, the training rows.
      features: i32[F_s], the candidate features' indices among X's columns.
      counts: i64[F_s], their rows not 0 (``_not_zero_counts``).
      n_bins: B_s, the bins each feature's histogram holds.
      max_bundles: the most bundles worth having.
      n_rows: bundle the features by X's first ``n_rows`` rows alone (None: every row).

    Returns:
      The bundles, each the ascending positions in ``features`` of its features, or
      None when they would be more than ``max_bundles``.
    """
    capacity = 255 // n_bins
    n_rows = X.shape[0] if n_rows is None else min(n_rows, X.shape[0])
    if (capacity * max_bundles < features.size  # too few, however exclusive
            or max_bundles * n_rows > BUNDLE_MAX_MASK_CELLS):
        return None
    rows_of = _not_zero_rows(X, features, n_rows)
    taken = np.zeros((max_bundles, n_rows), bool)  # the rows each bundle holds
    members: list[list[int]] = []
    for k in np.argsort(-counts, kind="stable"):
        rows = rows_of[k]
        # A few rows first: most bundles a feature does not fit share one of them.
        fits = np.flatnonzero(~taken[:len(members)][:, rows[:16]].any(axis=1))
        for b in fits:
            if len(members[b]) < capacity and not taken[b, rows].any():
                break
        else:
            if len(members) == max_bundles:
                return None
            b = len(members)
            members.append([])
        members[b].append(int(k))
        taken[b, rows] = True
    return tuple(tuple(sorted(m)) for m in members)


def _not_zero_rows(X, features: np.ndarray, n_rows: int) -> list[np.ndarray]:
    """The rows (i32, ascending) among the first ``n_rows`` in which each of
    ``features`` is not 0."""
    if sparse.is_sparse(X):
        rows = [X.indices[X.indptr[f]:X.indptr[f + 1]].astype(np.int32) for f in features]
        return [r[r < n_rows] for r in rows]
    X = X[:n_rows]

    # 16 columns a task: a cache line holds 16 float32 values, so reading 16
    # neighbouring columns costs what reading one does (``_CUT_FEATURES_PER_TASK``).
    def block_rows(first: int) -> list[np.ndarray]:
        block = features[first:first + _CUT_FEATURES_PER_TASK]
        if (np.diff(block) == 1).all():  # neighbours: a slice, not a gather
            block = slice(int(block[0]), int(block[-1]) + 1)
        columns = np.ascontiguousarray(X[:, block].T) != 0
        return [np.flatnonzero(column).astype(np.int32) for column in columns]

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        blocks = pool.map(block_rows, range(0, features.size, _CUT_FEATURES_PER_TASK))
        return [rows for block in blocks for rows in block]


def sparse_entries(binned: np.ndarray, group: SparseGroup) -> SparseEntries:
    """The entries of ``group``'s features: each (row, feature) whose bin is not the
    feature's bin of 0, in ``histogram.SparseEntries``' order, as NumPy arrays.

    Args:
      binned: u8[F, N] from ``apply_bins``.

    Returns:
      ``SparseEntries`` of ``group.n_entries`` entries, the last ones padding (feature
      -1, row 0): values other than 0 that share the bin of 0 make no entry.
    """
    n_rows = binned.shape[1]
    zero_bins = np.asarray(group.zero_bins, BIN_DTYPE)
    columns = np.asarray(group.features)
    if group.bundles:
        return _bundled_entries(binned, group)
    rows, features, bins = [], [], []
    for first in range(0, columns.size, ENTRY_FEATURE_BLOCK):
        block = binned[columns[first:first + ENTRY_FEATURE_BLOCK]]
        for first_row in range(0, n_rows, _SPARSE_ROWS_PER_STEP):
            part = block[:, first_row:first_row + _SPARSE_ROWS_PER_STEP]
            row, feature = np.nonzero((part != zero_bins[first:first + part.shape[0], None]).T)
            rows.append((first_row + row).astype(np.int32))
            features.append((first + feature).astype(np.int32))
            bins.append(np.minimum(part[feature, row], group.n_bins - 1).astype(BIN_DTYPE))
    n_found = sum(map(len, rows))
    if n_found > group.n_entries:
        raise ValueError(f"the binned rows have {n_found} sparse entries, more than the "
                         f"{group.n_entries} counted in X: bin X with the thresholds "
                         "sparse_group saw.")
    pad = group.n_entries - n_found
    return SparseEntries(
        rows=np.concatenate(rows + [np.zeros(pad, np.int32)]),
        features=np.concatenate(features + [np.full(pad, -1, np.int32)]),
        bins=np.concatenate(bins + [np.zeros(pad, BIN_DTYPE)]))


def _bundled_entries(binned: np.ndarray, group: SparseGroup) -> SparseEntries:
    """``SparseEntries`` holding ``group``'s bundles u8[G, N] (``exclusive_bundles``'
    values) and one padding entry."""
    bundles = np.zeros((len(group.bundles), binned.shape[1]), BIN_DTYPE)
    for bundle, positions in zip(bundles, group.bundles, strict=True):
        for slot, position in enumerate(positions):
            column = binned[group.features[position]]
            rows = np.flatnonzero(column != group.zero_bins[position])
            if bundle[rows].any():
                raise ValueError("the binned rows of a bundle's features overlap: bin X with "
                                 "the thresholds sparse_group saw.")
            bundle[rows] = 1 + slot * group.n_bins + np.minimum(column[rows], group.n_bins - 1)
    return SparseEntries(rows=np.zeros(1, np.int32), features=np.full(1, -1, np.int32),
                         bins=np.zeros(1, BIN_DTYPE), bundles=bundles)


def trimmed(thresholds: np.ndarray, n_bins: int) -> np.ndarray:
    """f32[F, n_bins - 1]: the first ``n_bins - 1`` value bins' edges of ``thresholds``
    (``n_bins`` from ``bins_needed``: the edges dropped are all +inf)."""
    return np.ascontiguousarray(thresholds[:, : n_bins - 1])


# From this many rows a column is binned through a table of the bins of its values' top
# 16 bits (``_bin_column``): 4.3-4.7x faster than ``np.searchsorted`` at 16,384 and 65,536
# rows of normal data and 255 edges, for tables that take about 0.1 ms to build (below
# 8,192 rows the search is faster).
_PREFIX_TABLE_MIN_ROWS = 2**14
_PREFIX_SHIFT = 16


def _host_order_key(values: np.ndarray) -> np.ndarray:
    """u32 keys in the order of the float32 ``values`` (not NaN): -0.0 as +0.0 (they
    compare equal), negative values' bits flipped, positive values' sign bit set."""
    bits = (values + FLOAT_DTYPE(0)).view(np.uint32)
    return np.where(bits >> 31, ~bits, bits | np.uint32(0x80000000))


# A long column with few edges below +inf (0/1 and other few-valued columns: the rest of
# their edges are +inf padding) is binned by one comparison of the whole column per
# edge, not through the table, whose building alone takes about 0.1 ms: at 20,000 rows
# and one edge 3.5 us against 150, at 16,384 rows and 16 edges 39 against 134, at
# 200,000 rows and 64 edges 1.0 ms against 2.7. With fewer rows per edge than this, or
# more edges, the comparisons cost more. (Shorter columns are searched: there the
# comparisons' several NumPy calls per column, under two threads, were as slow.)
_COMPARED_ROWS_PER_EDGE = 500
_COMPARED_MAX_EDGES = 64


def _bins_by_comparison(edges: np.ndarray, column: np.ndarray, missing_bin: int
                        ) -> np.ndarray:
    """u8 bins of ``column``: the number of ``edges`` (none +inf or NaN) strictly below
    each value, NaN to ``missing_bin``, counted one edge at a time (``np.searchsorted``'s
    side="left" bins)."""
    bins = np.zeros(column.shape, np.uint8)
    for edge in edges:
        np.add(bins, column > edge, out=bins, casting="unsafe")
    bins[np.isnan(column)] = missing_bin
    return bins


def _bin_column(edges: np.ndarray, column: np.ndarray) -> np.ndarray:
    """``np.searchsorted(edges, column, side="left")`` as u8, NaN (of either sign) to
    ``edges.size``: the number of edges strictly below each value.

    A short column is searched. A long one with few edges below +inf is binned by
    comparisons with each (``_bins_by_comparison``); otherwise each of its values' top
    16 bits of ``_host_order_key`` index a table of how many edges lie below every key
    with those bits; where one edge shares them, the value's key is compared with that
    edge's, and where several do, the value is searched as before. The same bins, bit
    for bit (``tests/test_binning.py``). On normal data with 255 edges about 28% of the
    values share their prefix with one edge and 1% with several: the search, half of the
    binning's time before the comparison, is left with few values (docs/benchmarks.md,
    levers table).
    """
    if column.size < _PREFIX_TABLE_MIN_ROWS:
        return np.searchsorted(edges, column, side="left")
    below_inf = edges[edges < np.inf]
    if below_inf.size <= min(_COMPARED_MAX_EDGES, column.size // _COMPARED_ROWS_PER_EDGE):
        return _bins_by_comparison(below_inf, column, edges.size)
    edge_keys = _host_order_key(edges[~np.isnan(edges)])
    edge_prefixes = edge_keys >> _PREFIX_SHIFT
    edges_at = np.bincount(edge_prefixes, minlength=2 ** (32 - _PREFIX_SHIFT))
    below = np.concatenate([[0], np.cumsum(edges_at)[:-1]]).astype(np.uint8)
    # The key of a prefix's edge where it has exactly one (else the largest key, which
    # no value exceeds), so that such values are binned by one comparison.
    lone_edge = np.full(edges_at.size, np.iinfo(np.uint32).max, np.uint32)
    lone = edges_at[edge_prefixes] == 1
    lone_edge[edge_prefixes[lone]] = edge_keys[lone]
    keys = _host_order_key(column)
    prefix = keys >> _PREFIX_SHIFT
    bins = below[prefix] + (keys > lone_edge[prefix])
    shared = np.flatnonzero(edges_at[prefix] > 1)
    bins[shared] = np.searchsorted(edges, column[shared], side="left")
    bins[np.isnan(column)] = edges.size
    return bins


def apply_bins(X: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Bins X with the thresholds of ``compute_thresholds``.

    Args:
      X: ndarray of shape (N, F), dtype float32, or a CSC matrix of float32 values
        (``sparse.check_sparse_X``; binned column by column, never densified).
      thresholds: ndarray of shape (F, B - 1), dtype float32.

    Returns:
      ndarray of shape (F, N), dtype uint8, feature-major: histogram building scans
      one feature at a time, so each feature's bins are contiguous. It is 64-byte
      aligned, so ``jax.device_put`` on CPU uses it without a copy. Value x goes to
      the first bin b with ``x <= thresholds[f, b]``; NaN goes to bin B - 1.
    """
    n_rows, n_features = X.shape
    binned = aligned_empty((n_features, n_rows), BIN_DTYPE)  # jax.device_put adopts it
    if sparse.is_sparse(X):
        _apply_sparse_bins(X, thresholds, binned)
        return binned

    def bin_block(task: tuple[int, int]) -> None:
        # searchsorted on a contiguous column is twice as fast as on a strided one, so
        # each task copies its block out, transposed, first.
        first_feature, first_row = task
        features = slice(first_feature, min(first_feature + _FEATURES_PER_TASK, n_features))
        rows = slice(first_row, min(first_row + _ROWS_PER_TASK, n_rows))
        columns = np.ascontiguousarray(X[rows, features].T)
        for f, column in zip(range(features.start, features.stop), columns, strict=True):
            # side="left": the number of thresholds strictly below x, i.e. the first bin
            # whose upper edge is >= x. NumPy sorts NaN after +inf, so NaN lands at index
            # B - 1, the missing bin.
            binned[f, rows] = _bin_column(thresholds[f], column)

    # searchsorted releases the GIL: one thread per core halves the time on 2 cores.
    tasks = [(f, r) for f in range(0, n_features, _FEATURES_PER_TASK)
             for r in range(0, n_rows, _ROWS_PER_TASK)]
    with ThreadPoolExecutor(max_workers=max(1, min(os.cpu_count() or 1, len(tasks)))) as pool:
        list(pool.map(bin_block, tasks))
    return binned


def apply_column_bins(values: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Bins P versions of C columns, each with its column's thresholds.

    Args:
      values: f32[P, N, C], version q of column s in ``values[q, :, s]`` (the target
        statistics of C columns under P orders of the rows, ``core.statistic_orders``).
      thresholds: f32[C, B - 1], each column's, as ``apply_bins`` takes them.

    Returns:
      u8[P * C, N], version q of column s at row ``q * C + s``: ``apply_bins`` of each
      version, bit for bit, with one long column per column rather than P short ones.
    """
    n_versions, n_rows, n_columns = values.shape
    binned = np.empty((n_versions, n_columns, n_rows), BIN_DTYPE)
    step = max(1, _ROWS_PER_TASK // max(n_rows, 1))  # versions per task

    def bin_block(task: tuple[int, int]) -> None:
        column, first = task
        versions = slice(first, min(first + step, n_versions))
        block = values[versions, :, column]
        binned[versions, column] = _bin_column(thresholds[column], block.ravel()).reshape(
            block.shape)

    # As in apply_bins: the searches release the GIL, one thread per core.
    tasks = [(s, q) for s in range(n_columns) for q in range(0, n_versions, step)]
    with ThreadPoolExecutor(max_workers=max(1, min(os.cpu_count() or 1, len(tasks)))) as pool:
        list(pool.map(bin_block, tasks))
    return binned.reshape(n_versions * n_columns, n_rows)


def _apply_sparse_bins(X, thresholds: np.ndarray, binned: np.ndarray) -> None:
    """Fills ``binned`` u8[F, N] from CSC X: each column's bin of 0, then its stored
    entries' bins (NaN to the missing bin, as in ``apply_bins``)."""

    def bin_feature(f: int) -> None:
        rows, values, _ = sparse.column_values(X, f)
        binned[f] = np.searchsorted(thresholds[f], FLOAT_DTYPE(0), side="left")
        binned[f, rows] = np.searchsorted(thresholds[f], values, side="left")

    with ThreadPoolExecutor(max_workers=max(1, min(os.cpu_count() or 1,
                                                   X.shape[1]))) as pool:
        list(pool.map(bin_feature, range(X.shape[1])))
