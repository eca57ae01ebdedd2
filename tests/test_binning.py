"""jaxgbt.data.binning against the NumPy reference and hand-computed cut points."""

import numpy as np
import pytest
import reference
from numpy.testing import assert_array_equal

from jaxgbt.data import binning
from jaxgbt.data.binning import apply_bins, bins_needed, compute_thresholds, trimmed

N_BINS = 16


def _mixed_features(seed: int = 0, n_rows: int = 300) -> np.ndarray:
    """f32[N, 5]: continuous (quantile cuts), few distinct values (midpoint cuts),
    constant, heavy duplicates, and about 10% NaN in the first two columns."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([
        rng.normal(size=n_rows),
        rng.integers(0, 6, n_rows).astype(float) * 0.7,
        np.full(n_rows, 3.25),
        np.round(rng.exponential(size=n_rows), 1),
        rng.uniform(-5, 5, n_rows),
    ]).astype(np.float32)
    X[rng.random(n_rows) < 0.1, 0] = np.nan
    X[rng.random(n_rows) < 0.1, 1] = np.nan
    return X


@pytest.mark.parametrize("weighted", [False, True])
def test_thresholds_match_reference(weighted):
    X = _mixed_features()
    weight = np.random.default_rng(1).uniform(0.1, 3.0, X.shape[0]).astype(np.float32)
    w = weight if weighted else None
    table = compute_thresholds(X, N_BINS, w)
    assert table.shape == (5, N_BINS - 1) and table.dtype == np.float32
    assert_array_equal(table, reference.thresholds(X, N_BINS, w))
    # Quantile features use every cut they may (B - 2); the last value bin stays +inf.
    assert np.isfinite(table[4]).sum() == N_BINS - 2
    assert np.isposinf(table[:, -1]).all()


@pytest.mark.parametrize("weighted", [False, True])
def test_thresholds_of_columns_mostly_zero_match_reference(weighted):
    # Their other values are sorted and their zeros counted, as for a sparse column;
    # one column has more distinct values than bins and both signs of zero.
    X = _sparse_columns(n_rows=600)
    X[::3, 4] = np.random.default_rng(2).normal(size=200)
    X[1::50, 4] = -0.0
    weight = np.random.default_rng(1).uniform(0.1, 3.0, X.shape[0]).astype(np.float32)
    w = weight if weighted else None
    assert_array_equal(compute_thresholds(X, N_BINS, w), reference.thresholds(X, N_BINS, w))


def test_unit_weights_take_the_count_path_and_match_reference():
    # Heavy ties (both signs of zero among them) and more distinct values than bins:
    # the unweighted path counts runs of a sorted column instead of np.unique.
    rng = np.random.default_rng(3)
    X = np.column_stack([np.round(rng.normal(size=2000), 2),
                         rng.choice([-0.0, 0.0, 1.5, 2.0], 2000)]).astype(np.float32)
    X[rng.random(2000) < 0.05, 0] = np.nan
    expected = reference.thresholds(X, 64)
    assert_array_equal(compute_thresholds(X, 64), expected)
    assert_array_equal(compute_thresholds(X, 64, np.ones(2000, np.float32)), expected)


def test_few_distinct_values_cut_at_midpoints():
    # B - 1 = 4 distinct values: every gap is cut, although quantiles would cut only 0 | 1.
    X = np.array([[0.0]] * 10 + [[1.0], [2.0], [5.0], [2.0], [np.nan]], np.float32)
    table = compute_thresholds(X, 5)
    assert_array_equal(table[0], [0.5, 1.5, 3.5, np.inf])
    assert_array_equal(apply_bins(X, table)[0, 9:], [0, 1, 2, 3, 2, 4])
    assert_array_equal(table, reference.thresholds(X, 5))


def test_few_valued_columns_are_cut_together_as_one_by_one(monkeypatch):
    # Columns of up to 8 values, among them both signs of zero, subnormals, infinities,
    # adjacent floats whose midpoint rounds up, one value, NaN; a continuous column and a
    # mostly-zero one of more values than bins. Those cut together must get the cuts of
    # the column-by-column path and of the float64 reference; the others are left to
    # that path: more values in the first rows than sampled, more than bins, or cuts
    # the flush band merges (subnormals 1 and 2 x 1e-40 both cut at 1.18e-38).
    # (``_FEW_VALUES_SAMPLED_MAX`` 0 tries none.)
    rng = np.random.default_rng(4)
    n_rows, tiny = 3000, np.float32(1e-40)
    lower = np.float32(1.0) + np.float32(2.0**-23)
    values = [[0.0, 1.0], [-0.0, 0.0, 2.0], [-tiny, 0.0, tiny], [lower, np.nextafter(
        lower, np.float32(2.0))], [-np.inf, 3.0, np.inf], [5.0], [0.0, tiny, 2 * tiny, 1.0],
        list(range(8)), list(range(9)), [np.nan, 1.0, 2.0]]
    columns = [rng.choice(np.array(v, np.float32), n_rows) for v in values]
    columns += [rng.normal(size=n_rows),
                np.where(rng.random(n_rows) < 0.2, rng.normal(size=n_rows), 0.0)]
    columns[3][0], columns[3][1] = lower, np.nextafter(lower, np.float32(2.0))  # both there
    block = np.stack(columns).astype(np.float32)
    few = binning._few_valued_cut_points(block, N_BINS - 1)
    assert sorted(few) == [0, 1, 2, 3, 4, 5, 7]
    for i, cuts in few.items():
        assert cuts.dtype == np.float32
        assert_array_equal(cuts, binning._dense_cut_points(block[i], None, N_BINS - 1))
    # Two values in the first rows and more than bins after them: tried, none found.
    more = np.concatenate([np.zeros(256), np.arange(N_BINS)]).astype(np.float32)
    assert binning._few_valued_cut_points(more[None], N_BINS - 1) == {}
    X = block.T.copy()
    together = compute_thresholds(X, N_BINS)
    monkeypatch.setattr(binning, "_FEW_VALUES_SAMPLED_MAX", 0)  # every column alone
    assert_array_equal(together, compute_thresholds(X, N_BINS))
    ordinary = [0, 1, 3, 5, 7, 8, 9, 10, 11]  # the float64 reference has no flush band
    assert_array_equal(together[ordinary], reference.thresholds(X[:, ordinary], N_BINS))


def test_adjacent_float32_values_get_separate_bins():
    lower = np.float32(1.0) + np.float32(2.0**-23)  # odd last bit: the midpoint rounds up
    upper = np.nextafter(lower, np.float32(2.0))
    assert np.float32((np.float64(lower) + np.float64(upper)) / 2) == upper
    X = np.array([[lower], [upper]], np.float32)
    table = compute_thresholds(X, 4)
    assert table[0, 0] == lower
    assert_array_equal(apply_bins(X, table)[0], [0, 1])


def test_constant_feature_gets_no_cut():
    X = np.column_stack([np.full(50, 7.5), np.linspace(0, 1, 50)]).astype(np.float32)
    X[::7, 0] = np.nan
    table = compute_thresholds(X, N_BINS)
    assert np.isposinf(table[0]).all()
    bins = apply_bins(X, table)[0]
    assert_array_equal(bins, np.where(np.isnan(X[:, 0]), N_BINS - 1, 0))


def test_weights_shift_quantiles():
    X = np.arange(1000, dtype=np.float32)[:, None]
    assert_array_equal(compute_thresholds(X, 5)[0], [249.5, 499.5, 749.5, np.inf])
    # Weight 3 above 500: mass 2000, levels 500, 1000, 1500 are reached at 499, 666, 833.
    weight = np.where(X[:, 0] >= 500, 3.0, 1.0).astype(np.float32)
    table = compute_thresholds(X, 5, weight)
    assert_array_equal(table[0], [499.5, 666.5, 833.5, np.inf])
    assert_array_equal(table, reference.thresholds(X, 5, weight))


def test_apply_bins_first_bin_with_x_at_most_threshold():
    X = _mixed_features(seed=2)
    table = compute_thresholds(X, N_BINS)
    # Rows exactly on a cut, one float32 step on either side of it, and NaN.
    cuts = table[:, :4]
    X_edges = np.concatenate([
        X,
        cuts.T,
        np.nextafter(cuts, np.float32(np.inf)).T,
        np.nextafter(cuts, np.float32(-np.inf)).T,
        np.full((1, 5), np.nan, np.float32),
    ]).astype(np.float32)
    X_edges[np.isinf(X_edges)] = 0.0
    bins = apply_bins(X_edges, table)
    assert bins.shape == (5, X_edges.shape[0]) and bins.dtype == np.uint8
    assert_array_equal(bins, reference.apply_bins(X_edges, table))
    assert_array_equal(bins[:, -1], N_BINS - 1)
    on_cut = bins[:, X.shape[0]: X.shape[0] + 4]
    assert_array_equal(on_cut[[0, 1, 3, 4]], np.tile(np.arange(4), (4, 1)))


def test_apply_bins_in_blocks_of_rows_and_features(monkeypatch):
    # Blocks that split the rows (the last one short) and the features (5 = 2 + 2 + 1).
    import jaxgbt.data.binning as binning

    monkeypatch.setattr(binning, "_ROWS_PER_TASK", 7)
    monkeypatch.setattr(binning, "_FEATURES_PER_TASK", 2)
    X = _mixed_features(seed=5, n_rows=60)
    table = compute_thresholds(X, N_BINS)
    assert_array_equal(apply_bins(X, table), reference.apply_bins(X, table))


@pytest.mark.parametrize("rows_per_task", [2**16, 50])
def test_column_bins_of_several_versions_equal_each_versions_apply_bins(monkeypatch,
                                                                         rows_per_task):
    # Target statistics under several orders: version q of column s, binned with column
    # s's thresholds, lands at row q * C + s, as apply_bins puts it. With 50 rows per
    # task each task bins a slice of the versions.
    monkeypatch.setattr(binning, "_ROWS_PER_TASK", rows_per_task)
    rng = np.random.default_rng(4)
    values = rng.random((5, 40, 3)).astype(np.float32)  # [P, N, C]
    thresholds = np.stack([compute_thresholds(values[0][:, [s]], 8)[0] for s in range(3)])
    got = binning.apply_column_bins(values, thresholds)
    assert got.shape == (15, 40) and got.dtype == np.uint8
    for q in range(5):
        assert_array_equal(got[3 * q:3 * q + 3], apply_bins(values[q], thresholds))
    assert len(np.unique(got)) > 3


def test_bins_needed_counts_the_fullest_feature_and_rounds_up():
    X = np.zeros((64, 3), np.float32)
    X[:, 1] = np.arange(64) % 2  # two values: one cut
    X[:, 2] = np.arange(64) % 6  # six values: five cuts
    thresholds = compute_thresholds(X, 256)
    assert bins_needed(thresholds, 256) == 8  # value bins 0..5, the missing bin: 7 -> 8
    assert bins_needed(thresholds[:, :1], 256) == 4  # the fewest
    assert bins_needed(thresholds, 6) == 6  # never above the bins asked for
    # Small data (rows x features under SMALL_DATA_CELLS): at least 16 bins, so that
    # small sets of one shape share a program; never above the bins asked for.
    assert bins_needed(thresholds, 256, n_rows=64) == 16
    assert bins_needed(thresholds, 8, n_rows=64) == 8
    assert bins_needed(thresholds, 256, n_rows=2**16) == 8
    wide = np.repeat(thresholds, 22, axis=0)  # 66 features: not small, whatever the rows
    assert bins_needed(wide, 256, n_rows=64) == 8
    continuous = compute_thresholds(np.linspace(0, 1, 1000, dtype=np.float32)[:, None], 256)
    assert bins_needed(continuous, 256) == 256
    assert np.isinf(trimmed(thresholds, 8)[:, 6:]).all()


@pytest.mark.parametrize("random_strength", [0.0, 1.0])
@pytest.mark.parametrize("grow_policy", ["oblivious", "depthwise"])
def test_few_valued_data_train_the_same_model_on_narrower_histograms(grow_policy,
                                                                     random_strength,
                                                                     monkeypatch):
    import jaxgbt
    from jaxgbt.data import binning, dataset

    rng = np.random.default_rng(5)
    X = rng.integers(0, 5, size=(256, 4)).astype(np.float32)
    X[::9, 2] = np.nan
    y = (X[:, 0] - X[:, 1] * (X[:, 3] > 2) + rng.normal(size=256)).astype(np.float32)
    # With score noise too: a wider histogram has more candidates (the empty bins past
    # a feature's values, which with missing values repeat its missing-or-not split),
    # but a repeated candidate is not ranked and a candidate draws the same number at
    # any width.
    fit = dict(n_trees=6, depth=3, grow_policy=grow_policy, random_strength=random_strength)
    monkeypatch.setattr(binning, "SMALL_DATA_MIN_BINS", 4)
    chosen = []

    def needed(thresholds, n_bins, n_rows):
        chosen.append(binning.bins_needed(thresholds, n_bins, n_rows))
        return chosen[-1]

    monkeypatch.setattr(dataset, "bins_needed", needed)
    narrow = jaxgbt.fit("squared_error", X, y, **fit)
    assert chosen == [8]
    monkeypatch.setattr(dataset, "bins_needed", lambda thresholds, n_bins, n_rows: n_bins)
    full = jaxgbt.fit("squared_error", X, y, **fit)
    # The same trees and leaves; the gains equal to float rounding: up to 8 bins the
    # search's prefix sums are additions, past 8 products of blocks of 16, whose kernel
    # may add in another order. A gain is a difference of scores (the children's less the
    # parent's), so its rounding is that of the largest score, not of the gain.
    for name in ("feature", "threshold", "default_left", "leaf_value"):
        assert_array_equal(np.asarray(getattr(narrow, name)), np.asarray(getattr(full, name)))
    np.testing.assert_allclose(narrow.split_gain, full.split_gain, rtol=1e-6,
                               atol=1e-6 * float(np.abs(full.split_gain).max()))


def test_subnormal_values_route_alike_on_host_and_device():
    # XLA flushes subnormal floats to 0; NumPy does not. Cuts are kept out of the
    # subnormal band, so the trees evaluated in NumPy on the raw values (float64
    # reference) give what predict gives on the device.
    import jaxgbt

    tiny = np.finfo(np.float32).tiny
    rng = np.random.default_rng(9)
    levels = np.array([-3, -2, -1, 0, 1, 2, 3], np.float32) * (tiny / 8)  # subnormals and 0
    X = np.column_stack([rng.choice(levels, 400), rng.normal(size=400)]).astype(np.float32)
    X[::10, 0] = rng.choice([-2 * tiny, 2 * tiny, 1e-3, -1e-3], 40)  # some normal values
    y = (np.sign(X[:, 0]) + 0.1 * X[:, 1]).astype(np.float32)
    cuts = compute_thresholds(X, 16)[0]
    assert not ((np.abs(cuts) < tiny) & (cuts != 0)).any() and not (cuts == 0).any()
    model = jaxgbt.fit("squared_error", X, y, n_trees=4, depth=3, n_bins=16)
    expected, _ = reference.predict(X, *(np.asarray(getattr(model, name)) for name in
                                         ("feature", "threshold", "default_left", "leaf_value",
                                          "base_score")))
    np.testing.assert_allclose(np.asarray(model.predict_raw(X)), expected[:, 0], atol=1e-5)


def _sparse_columns(seed: int = 0, n_rows: int = 400) -> np.ndarray:
    """f32[N, 20]: 18 columns that are mostly 0 (0/1, small counts, one with NaN, one
    with values below 0), then a continuous column and a column that is 0 half the time."""
    rng = np.random.default_rng(seed)
    X = (rng.random((n_rows, 20)) < 0.08).astype(np.float32)
    X[:, 5] *= rng.integers(1, 4, n_rows)
    X[:, 6] *= -rng.integers(1, 3, n_rows)
    X[rng.random(n_rows) < 0.05, 7] = np.nan
    X[:, 18] = rng.normal(size=n_rows)
    X[:, 19] = rng.random(n_rows) < 0.5
    return X


def test_sparse_group_takes_the_columns_that_are_mostly_zero():
    from jaxgbt.data import binning

    X = _sparse_columns()
    thresholds = trimmed(compute_thresholds(X, 64), 64)
    group = binning.sparse_group(X, thresholds)
    assert group.features == tuple(range(18))
    # The values other than 0, rounded up to their bucket (fits of one shape share a
    # program): 616 to 640.
    assert group.n_entries == binning.bucket_entries(int(np.count_nonzero(X[:, :18])), 400)
    assert group.n_entries == 640
    # The bin of 0: after the cuts below 0 (column 6 is 0, -1 or -2).
    assert group.zero_bins[6] == 2 and group.zero_bins[0] == 0
    assert group.n_bins == 8  # values 0..3 of column 5: bins 0..3, the missing bin: 5 -> 8
    # As a CSC matrix: the same group.
    import scipy.sparse

    from jaxgbt.data.sparse import check_sparse_X
    assert binning.sparse_group(check_sparse_X(scipy.sparse.csr_matrix(X)), thresholds) == group
    # Fewer than SPARSE_MIN_FEATURES sparse columns, or too many values other than 0: none.
    assert binning.sparse_group(X[:, 10:], thresholds[10:]) is None
    crowded = X.copy()
    crowded[:, :18][np.random.default_rng(2).random((400, 18)) < 0.6] = 1.0
    crowded[:100] = 0.0  # each column still 0 in a quarter of the rows or more ...
    assert (np.count_nonzero(crowded[:, :18], axis=0) > 0.25 * 400).all()
    assert binning.sparse_group(crowded, thresholds) is None  # ... but no longer sparse


def test_sparse_entries_list_each_rows_bins_other_than_zero():
    from jaxgbt.core.histogram import ENTRY_FEATURE_BLOCK
    from jaxgbt.data import binning

    X = _sparse_columns(seed=1)
    thresholds = trimmed(compute_thresholds(X, 64), 64)
    group = binning.sparse_group(X, thresholds)
    binned = apply_bins(X, thresholds)
    entries = binning.sparse_entries(binned, group)
    assert entries.rows.shape == entries.features.shape == (group.n_entries,)
    columns = binned[list(group.features)]
    feature, row = np.nonzero(columns != np.asarray(group.zero_bins)[:, None])
    order = np.lexsort((feature, row, feature // ENTRY_FEATURE_BLOCK))
    n = feature.size
    assert_array_equal(entries.features[:n], feature[order])
    assert_array_equal(entries.rows[:n], row[order])
    assert_array_equal(entries.bins[:n], np.minimum(columns[feature, row][order],
                                                    group.n_bins - 1))
    # Padding after them: the bucket's (``bucket_entries``), nothing sharing the bin of 0.
    assert_array_equal(entries.features[n:], -1)
    assert n == int(np.count_nonzero(X[:, :18])) < group.n_entries
    missing = entries.features == 7
    assert_array_equal(entries.bins[missing] == group.n_bins - 1,
                       np.isnan(X[entries.rows[missing], 7]))  # the missing bin, last


def test_exclusive_bundles_share_no_row_and_fit_a_byte():
    # Three one-hot blocks (6, 5 and 4 levels), a NaN standing in a row of the first,
    # and a column that overlaps the second block: it cannot join that bundle.
    import scipy.sparse

    from jaxgbt.data import binning

    rng = np.random.default_rng(2)
    n_rows = 500
    X = np.zeros((n_rows, 16), np.float32)
    for first, levels in ((0, 6), (6, 5), (11, 4)):
        X[np.arange(n_rows), first + rng.integers(0, levels, n_rows)] = 1.0
    X[np.flatnonzero(X[:, 2])[0], 2] = np.nan
    X[:, 15] = (X[:, 7] > 0) & (rng.random(n_rows) < 0.5)
    features = np.arange(16)
    counts = np.count_nonzero(X, axis=0)
    bundles = binning.exclusive_bundles(X, features, counts, 4, 16)
    assert sorted(map(sorted, bundles)) == [list(range(6)), list(range(6, 11)),
                                           list(range(11, 15)), [15]]
    assert binning.exclusive_bundles(scipy.sparse.csc_matrix(X), features, counts, 4,
                                     16) == bundles  # the stored entries of CSC X
    for bundle in bundles:  # at most one feature of a bundle is not 0 in a row
        assert (np.count_nonzero(X[:, list(bundle)], axis=1) <= 1).all()
    # 64 bins a feature: 3 of them fill a bundle's 255 values, so each block takes two
    # bundles, and the last column, exclusive of all but column 7, joins one of them.
    wide = binning.exclusive_bundles(X, features, counts, 64, 16)
    assert max(map(len, wide)) == 3 and len(wide) == 6
    assert binning.exclusive_bundles(X, features, counts, 4, 3) is None  # 4 are needed


def test_bundled_entries_name_each_rows_feature_and_bin():
    from jaxgbt.data import binning

    rng = np.random.default_rng(3)
    X = np.zeros((400, 24), np.float32)
    X[np.arange(400), rng.integers(0, 24, 400)] = rng.integers(1, 3, 400)  # 1s and 2s
    thresholds = trimmed(compute_thresholds(X, 64), 64)
    binning_rows = binning.BUNDLE_MIN_ROWS
    try:
        binning.BUNDLE_MIN_ROWS = 0
        group = binning.sparse_group(X, thresholds)
    finally:
        binning.BUNDLE_MIN_ROWS = binning_rows
    assert group.bundles == (tuple(range(24)),) and group.n_bins == 4
    binned = apply_bins(X, thresholds)
    entries = binning.sparse_entries(binned, group)
    (values,) = entries.bundles
    feature = np.argmax(X != 0, axis=1)
    assert_array_equal(values, 1 + feature * 4 + binned[feature, np.arange(400)])
    slots, width = group.bundle_slots()
    assert width == 1 + 24 * 4
    assert_array_equal(slots, 1 + 4 * np.arange(24))


def test_sparse_group_leaves_out_its_widest_features_past_its_cells(monkeypatch):
    # The group's histogram is one block: past SPARSE_MAX_CELLS features x bins, the
    # features that need the most bins stay with the dense ones.
    from jaxgbt.data import binning

    X = _sparse_columns()
    X[::7, 10] = np.linspace(1, 2, X[::7].shape[0])  # many values: 64 bins
    thresholds = trimmed(compute_thresholds(X, 64), 64)
    assert binning.sparse_group(X, thresholds).n_bins == 64
    monkeypatch.setattr(binning, "SPARSE_MAX_CELLS", 18 * 8)
    group = binning.sparse_group(X, thresholds)
    assert group.n_bins == 8 and group.features == tuple(f for f in range(18) if f != 10)
    monkeypatch.setattr(binning, "SPARSE_MAX_CELLS", 17 * 4 - 1)  # column 5 needs 8 bins
    group = binning.sparse_group(X, thresholds)
    assert group.n_bins == 4 and group.features == tuple(f for f in range(18) if f not in (5, 10))
    monkeypatch.setattr(binning, "SPARSE_MAX_CELLS", 16 * 4 - 1)  # too few even at 4 bins
    assert binning.sparse_group(X, thresholds) is None


def test_long_columns_are_binned_through_the_prefix_table_as_by_searchsorted():
    # Values on and next to the edges, both zeros, infinities, NaN of either sign,
    # subnormals and repeated edges: the table of 16-bit prefixes must give the bins
    # np.searchsorted gives, NaN to the missing bin.
    rng = np.random.default_rng(0)
    n_rows = 2 * binning._PREFIX_TABLE_MIN_ROWS
    tiny = np.float32(1e-40)  # subnormal
    for trial in range(6):
        edges = np.sort(np.concatenate([
            rng.normal(size=200), [-0.0, 0.0, tiny, -tiny, 1.0, 1.0]]).astype(np.float32))
        edges = np.concatenate([edges, np.full(255 - edges.size, np.inf, np.float32)])
        picks = [rng.normal(scale=10.0 ** (trial - 2), size=n_rows // 2),
                 rng.choice(edges[np.isfinite(edges)], n_rows // 4),
                 np.nextafter(rng.choice(edges[:200], n_rows // 8), np.float32(np.inf)),
                 rng.choice(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, tiny,
                                      -tiny], np.float32), n_rows // 8)]
        column = rng.permutation(np.concatenate(picks).astype(np.float32))
        assert np.sum(np.signbit(column) & np.isnan(column)) > 0
        got = binning._bin_column(edges, column)
        expected = np.searchsorted(edges, column, side="left")
        assert_array_equal(got, expected)
        assert np.all(got[np.isnan(column)] == edges.size)


@pytest.mark.parametrize("n_rows, max_edges", [(5_000, 64), (40_000, 64), (40_000, 3)])
def test_long_columns_of_few_edges_are_binned_by_comparisons_as_by_searchsorted(
        monkeypatch, n_rows, max_edges):
    # One to five edges below the +inf padding (0/1 and few-valued columns), among them
    # both zeros, a subnormal and a repeated edge; values on the edges, beside them,
    # infinities and NaN of either sign: the comparisons must give np.searchsorted's bins
    # where they are taken, and be taken only in long columns, up to the most edges.
    monkeypatch.setattr(binning, "_COMPARED_MAX_EDGES", max_edges)
    compared = []
    by_comparison = binning._bins_by_comparison
    monkeypatch.setattr(binning, "_bins_by_comparison",
                        lambda *args: compared.append(args[0].size) or by_comparison(*args))
    rng = np.random.default_rng(n_rows)
    tiny = np.float32(1e-40)
    candidates = np.array([-0.0, 0.0, tiny, -tiny, 1.0, 1.0, 0.5, -2.0], np.float32)
    for n_edges in range(1, 6):
        edges = np.sort(rng.choice(candidates, n_edges, replace=False))
        edges = np.concatenate([edges, np.full(7 - n_edges, np.inf, np.float32)])
        picks = np.concatenate([candidates, np.nextafter(candidates, np.float32(np.inf)),
                                np.nextafter(candidates, np.float32(-np.inf)),
                                np.array([np.inf, -np.inf, np.nan, -np.nan], np.float32)])
        column = rng.choice(picks, n_rows).astype(np.float32)
        got = binning._bin_column(edges, column)
        assert_array_equal(got, np.searchsorted(edges, column, side="left"))
        assert np.all(got[np.isnan(column)] == edges.size)
    long = n_rows >= binning._PREFIX_TABLE_MIN_ROWS
    assert compared == [k for k in range(1, 6) if long and k <= max_edges]


def test_values_beside_an_edge_alone_in_its_prefix_are_binned_by_one_comparison():
    # 255 distinct finite edges (no +inf padding, so the last bin is 255) spread over
    # several magnitudes: most sit alone in their 16-bit prefix, where a value is binned
    # by comparing it with that edge. Values on each edge and one float below and above
    # it must get np.searchsorted's bins, the largest value bin 255 included.
    rng = np.random.default_rng(1)
    edges = np.unique(np.concatenate([rng.normal(size=120), rng.normal(scale=1e3, size=120),
                                      rng.uniform(-1e-3, 1e-3, size=15)]).astype(np.float32))
    assert edges.size == 255
    keys = binning._host_order_key(edges) >> binning._PREFIX_SHIFT
    counts = np.bincount(keys, minlength=2 ** (32 - binning._PREFIX_SHIFT))
    assert (counts[keys] == 1).mean() > 0.5 and (counts[keys] > 1).any()
    beside = np.concatenate([edges, np.nextafter(edges, np.float32(-np.inf)),
                             np.nextafter(edges, np.float32(np.inf)), [edges[-1] * 2]])
    column = rng.permutation(np.tile(beside, -(-binning._PREFIX_TABLE_MIN_ROWS // beside.size)))
    got = binning._bin_column(edges, column.astype(np.float32))
    assert_array_equal(got, np.searchsorted(edges, column, side="left"))
    assert got.max() == 255
