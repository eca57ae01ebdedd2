"""jaxgbt.core.search: a level searched a block of features at a time finds the split of
one search over every feature, bit for bit, ties included."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_same_numbers
from numpy.testing import assert_array_equal

import jaxgbt.core.search as search
from jaxgbt.core.split import SplitParams
from jaxgbt.core.tree import grow_depthwise_tree, grow_tree

N_ROWS, N_BINS, DEPTH = 200, 16, 2


def _problem(n_features: int, n_outputs: int = 1):
    """bins u8[F, N] whose features 4 and 5 repeat features 1 and 2 (so that equal gains
    fall in different blocks), a few rows in the missing bin, and gh f32[N, 2K]."""
    rng = np.random.default_rng(0)
    bins = rng.integers(0, N_BINS - 1, (n_features, N_ROWS)).astype(np.uint8)
    bins[4], bins[5] = bins[1], bins[2]
    bins[rng.random((n_features, N_ROWS)) < 0.05] = N_BINS - 1
    signal = bins[1].astype(np.float64) - 0.5 * bins[2] + (bins[6] > 9)
    g = (signal[:, None] - signal.mean() + rng.normal(size=(N_ROWS, n_outputs))) / 4
    h = rng.uniform(0.5, 1.5, (N_ROWS, n_outputs))
    return jnp.asarray(bins), jnp.asarray(np.concatenate([g, h], axis=1), jnp.float32)


PARAMS = SplitParams(*(jnp.float32(v) for v in (1.0, 0.1, 0.0, 2.0)))


def _trees(monkeypatch, block_bytes: int, grow, **kwargs):
    monkeypatch.setattr(search, "SEARCH_BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(search, "FEW_ROWS_SEARCH_BLOCK_BYTES", block_bytes)
    # A new function each time: a jitted function would reuse the trace of another block
    # size (it is read when tracing).
    return jax.jit(lambda b, g: grow(b, g, PARAMS, DEPTH, N_BINS, **kwargs))(*_problem(8))


# Block sizes: one feature per block; 3 features of the deeper level's 2 nodes (8 = 3 +
# 3 + 2, the last block starting a feature early); everything in one block.
BLOCK_BYTES = [1, 3 * 2 * N_BINS * 2 * 4, 2**30]


@pytest.mark.parametrize("grow", [grow_tree, grow_depthwise_tree], ids=["oblivious", "depthwise"])
def test_blocks_of_features_find_the_same_tree(monkeypatch, grow):
    level_allowed = jnp.asarray(np.random.default_rng(1).random((DEPTH, 8)) < 0.8)
    trees = [_trees(monkeypatch, size, grow, level_allowed=level_allowed)[0]
             for size in BLOCK_BYTES]
    assert search.features_per_block(8, 4, N_BINS, 2, sharded=False) == 8
    for tree in trees[:-1]:
        for got, expected in zip(tree, trees[-1], strict=True):
            assert_same_numbers(got, expected)
    assert np.any(np.asarray(trees[-1].gain) > 0)


def test_ties_across_blocks_go_to_the_lowest_feature(monkeypatch):
    # Features 1 and 4 are equal, and 2 and 5: with one feature per block, the block of
    # the lower one must win.
    tree = _trees(monkeypatch, 1, grow_tree)[0]
    assert not np.any(np.isin(np.asarray(tree.feature), [4, 5]))
    assert np.any(np.isin(np.asarray(tree.feature), [1, 2]))


def test_monotone_depthwise_bounds_come_from_the_winning_block(monkeypatch):
    monotone = jnp.asarray([0, 1, -1, 0, 0, 0, 1, 0], jnp.int32)
    one, blocks = (_trees(monkeypatch, size, grow_depthwise_tree, monotone=monotone)
                   for size in (2**30, 1))
    for got, expected in zip(jax.tree.leaves(blocks), jax.tree.leaves(one), strict=True):
        assert_same_numbers(got, expected)


def test_block_size_spreads_features_evenly():
    per_feature = 32 * 256 * 2 * 4
    assert search.features_per_block(28, 32, 256, 2, sharded=False) == 28
    most = search.SEARCH_BLOCK_BYTES // per_feature
    size = search.features_per_block(500, 32, 256, 2, sharded=False)
    assert size <= most and -(-500 // size) == -(-500 // most)
    assert search.features_per_block(500, 32, 256, 2, sharded=True) == 500
    # Few rows on CPU: blocks of FEW_ROWS_SEARCH_BLOCK_BYTES once the histogram is larger
    # than SEARCH_BLOCK_BYTES; narrow histograms stay whole.
    if jax.default_backend() == "cpu":
        few = search.FEW_ROWS_SEARCH_BLOCK_BYTES // per_feature
        size = search.features_per_block(500, 32, 256, 2, sharded=False, n_rows=2048)
        assert size <= few and -(-500 // size) == -(-500 // few)
        assert search.features_per_block(500, 32, 256, 2, sharded=False, n_rows=20_000) == (
            search.features_per_block(500, 32, 256, 2, sharded=False))
        assert search.features_per_block(28, 32, 256, 2, sharded=False, n_rows=2048) == 28
        assert search.features_per_block(20, 32, 256, 6, sharded=False, n_rows=2048) == 20


@pytest.mark.parametrize("grow", [grow_tree, grow_depthwise_tree], ids=["oblivious", "depthwise"])
def test_data_without_missing_values_search_one_direction_to_the_same_tree(monkeypatch, grow):
    # Without missing values the search skips the missing-right candidates (equal to the
    # missing-left ones); forcing both directions must give the same tree, bit for bit.
    import jaxgbt.core.split as split

    monkeypatch.setattr(split, "ONE_DIRECTION_MIN_CELLS", 0)  # these histograms are tiny
    bins, gh = _problem(8)
    bins = jnp.minimum(bins, N_BINS - 2)  # no row in the missing bin
    monotone = jnp.asarray([0, 1, -1, 0, 0, 0, 1, 0], jnp.int32)
    kwargs = dict(monotone=monotone) if grow is grow_depthwise_tree else {}

    def fitted():
        return jax.jit(lambda b, g: grow(b, g, PARAMS, DEPTH, N_BINS, **kwargs))(bins, gh)

    one_direction = fitted()
    monkeypatch.setattr(split, "ONE_DIRECTION_MIN_CELLS", 2**40)  # both directions at once
    both = fitted()
    for got, expected in zip(jax.tree.leaves(one_direction), jax.tree.leaves(both), strict=True):
        assert_same_numbers(got, expected)
    assert np.all(np.asarray(one_direction[0].default_left))


@pytest.mark.parametrize("score_function", ["l2", "cosine"])
@pytest.mark.parametrize("grow", [grow_tree, grow_depthwise_tree], ids=["oblivious", "depthwise"])
def test_missing_directions_searched_in_turn_find_the_same_tree(monkeypatch, grow,
                                                                 score_function):
    # With rows in the missing bin, large searches score missing-left, then missing-right
    # in a loop (one search compiled), and keep the better; small ones score both at
    # once. Both must give the same tree, bit for bit, ties, noise, a constraint and two
    # outputs included.
    import jaxgbt.core.split as split
    from jaxgbt.core.split import ScoreNoise

    bins, gh = _problem(8, n_outputs=2)
    params = PARAMS._replace(noise=ScoreNoise(jax.random.PRNGKey(3), jnp.float32(0.2)))
    monotone = jnp.asarray([0, 1, -1, 0, 0, 0, 1, 0], jnp.int32)
    kwargs = dict(monotone=monotone) if grow is grow_depthwise_tree else {}

    def grown(noise):
        return jax.jit(lambda b, g: grow(b, g, params if noise else PARAMS, DEPTH, N_BINS,
                                         score_function=score_function, **kwargs))(bins, gh)

    for noise in (False, True):
        monkeypatch.setattr(split, "ONE_DIRECTION_MIN_CELLS", 0)
        in_turn = grown(noise)
        monkeypatch.setattr(split, "ONE_DIRECTION_MIN_CELLS", 2**40)
        at_once = grown(noise)
        for got, expected in zip(jax.tree.leaves(in_turn), jax.tree.leaves(at_once),
                                 strict=True):
            assert_same_numbers(got, expected)
        # the data's missing values send some splits' missing rows right
        assert not np.all(np.asarray(at_once[0].default_left))


@pytest.mark.parametrize("grow", [grow_tree, grow_depthwise_tree], ids=["oblivious", "depthwise"])
def test_small_searches_at_one_node_count_find_the_same_tree(monkeypatch, grow):
    # 8 features x 16 bins x 8 nodes is far under SMALL_SEARCH_CELLS: every level
    # searches 8 nodes (one branch to compile) where three sizes were compiled. The tree
    # must be the same, bit for bit, with score noise and a constraint.
    import jaxgbt.core.tree as tree_module
    from jaxgbt.core.split import ScoreNoise

    depth = 4
    assert tree_module.search_sizes(depth) == [2, 2, 4, 8]
    assert tree_module.search_sizes(depth, 8 * N_BINS) == [8] * depth
    assert tree_module.search_sizes(depth, 10**5) == [2, 2, 4, 8]
    params = PARAMS._replace(noise=ScoreNoise(jax.random.PRNGKey(5), jnp.float32(0.3)))
    monotone = jnp.asarray([0, 1, -1, 0, 0, 0, 1, 0], jnp.int32)

    def grown():
        return jax.jit(lambda b, g: grow(b, g, params, depth, N_BINS, monotone=monotone)
                       )(*_problem(8))

    one_size = grown()
    monkeypatch.setattr(tree_module, "SMALL_SEARCH_CELLS", 0)
    three_sizes = grown()
    for got, expected in zip(jax.tree.leaves(one_size), jax.tree.leaves(three_sizes),
                             strict=True):
        assert_same_numbers(got, expected)
    assert np.sum(np.asarray(one_size[0].gain) > 0) >= 3


@pytest.mark.parametrize("grow", [grow_tree, grow_depthwise_tree], ids=["oblivious", "depthwise"])
def test_large_searches_at_an_eighth_size_find_the_same_tree(monkeypatch, grow):
    # Wide or multi-output searches round each level's 2**d nodes up to an eighth of the
    # deepest level's, others to a quarter: the same tree, bit for bit, with score
    # noise, a constraint and two outputs.
    import jaxgbt.core.tree as tree_module
    from jaxgbt.core.split import ScoreNoise

    an_eighth = [4, 4, 4, 8, 16, 32]
    assert tree_module.search_sizes(6, 28 * 256) == [8, 8, 8, 8, 16, 32]
    assert tree_module.search_sizes(6, 180 * 256) == [8, 8, 8, 8, 16, 32]
    assert tree_module.search_sizes(6, 500 * 256) == an_eighth
    assert tree_module.search_sizes(6, 180 * 256, n_outputs=3) == an_eighth
    depth = 5
    params = PARAMS._replace(noise=ScoreNoise(jax.random.PRNGKey(2), jnp.float32(0.3)))
    monotone = jnp.asarray([0, 1, -1, 0, 0, 0, 1, 0], jnp.int32)
    bins, gh = _problem(8, n_outputs=2)
    monkeypatch.setattr(tree_module, "SMALL_SEARCH_CELLS", 0)

    def grown():
        return jax.jit(lambda b, g: grow(b, g, params, depth, N_BINS, monotone=monotone)
                       )(bins, gh)

    three_sizes = grown()
    monkeypatch.setattr(tree_module, "LARGE_SEARCH_WORK", 0)
    four_sizes = grown()
    assert tree_module.search_sizes(depth, 1) == [2, 2, 4, 8, 16]
    for got, expected in zip(jax.tree.leaves(four_sizes), jax.tree.leaves(three_sizes),
                             strict=True):
        assert_same_numbers(got, expected)
    assert np.sum(np.asarray(four_sizes[0].gain) > 0) >= 3


# Each policy once and the noise on and off once: each case compiles two training
# programs, about 7 s of the suite's time a case.
@pytest.mark.parametrize(("grow_policy", "random_strength"),
                         [("oblivious", 1.0), ("depthwise", 0.0)])
def test_few_valued_features_searched_narrower_give_the_same_model(monkeypatch, grow_policy,
                                                                   random_strength):
    # 0/1 and three-valued columns next to continuous ones: the few-valued ones get
    # 4-bin histograms (binning.bin_groups); the model must equal the one whose every
    # feature is searched with 64 bins, bit for bit. Some continuous cells are missing.
    # With score noise a candidate draws the same number at either width; the gains may
    # then round differently (the search compiles to other loops), so the trees must be
    # the same and the numbers equal to float rounding.
    import jaxgbt
    import jaxgbt.data.binning as binning

    rng = np.random.default_rng(3)
    X = np.column_stack([rng.normal(size=(300, 2)), rng.random((300, 9)) < 0.3,
                         rng.integers(0, 3, (300, 1))]).astype(np.float32)
    X[rng.random(300) < 0.1, 0] = np.nan
    y = (X[:, 0] > 0) ^ (X[:, 3] > 0) ^ (X[:, 11] == 2)
    # A 0/1 column with missing cells: its missing-or-not split, repeated in every bin
    # past its values, is one candidate at either width (split.repeated_candidates).
    X[rng.random(300) < 0.2, 4] = np.nan
    thresholds = binning.trimmed(binning.compute_thresholds(X, 64), 64)
    assert binning.bin_groups(thresholds, 300) is None  # too small to be worth a group
    monkeypatch.setattr(binning, "SMALL_DATA_CELLS", 0)
    groups = binning.bin_groups(thresholds, 300)
    assert groups == ((4, tuple(range(2, 12)), None), (64, (0, 1), None))

    def fitted():
        return jaxgbt.fit("logistic", X, y.astype(np.float32), n_trees=3, depth=3, n_bins=64,
                          grow_policy=grow_policy, random_strength=random_strength)

    narrow = fitted()
    monkeypatch.setattr(binning, "MIN_GROUP_SAVING", 2.0)  # every feature at 64 bins
    assert binning.bin_groups(thresholds, 300) is None
    wide = fitted()
    for name in ("feature", "threshold", "default_left", "split_gain", "leaf_value"):
        if random_strength and name in ("split_gain", "leaf_value"):
            np.testing.assert_allclose(getattr(narrow, name), getattr(wide, name), rtol=1e-5,
                                       atol=1e-6)
            continue
        assert_same_numbers(getattr(narrow, name), getattr(wide, name), err_msg=name)
    assert set(np.asarray(narrow.feature).ravel()) & set(range(2, 12))


def test_search_candidates_end_past_the_last_value_bin_only_with_missing_values():
    import jaxgbt.data.binning as binning

    thresholds = np.full((3, 7), np.inf, np.float32)
    thresholds[0, :1] = 0.5  # 0/1: value bins 0 and 1
    thresholds[1, :3] = [0.5, 1.5, 2.5]  # four values
    thresholds[2, :6] = np.arange(6) + 0.5  # seven values
    assert binning.search_candidates(thresholds, [0], 4, False) == 1
    assert binning.search_candidates(thresholds, [0], 4, True) is None  # all 3
    assert binning.search_candidates(thresholds, [0], 8, True) == 3
    assert binning.search_candidates(thresholds, [0, 1], 8, False) == 3
    assert binning.search_candidates(thresholds, [1], 8, True) is None
    assert binning.search_candidates(thresholds, [0, 2], 8, False) is None
    assert binning.search_candidates(thresholds, [0, 2], 16, False) == 7


@pytest.mark.parametrize("grow_policy", ["oblivious", "depthwise", "lossguide"])
def test_candidates_past_every_value_unscored_give_the_same_model(monkeypatch, grow_policy):
    # Dense 0/1 columns (4-bin histograms, one candidate of three), sparse 0/1 columns
    # (their entries' group, one candidate) and four-valued ones (8 bins, three of
    # seven), no value missing, with score noise: scored at fewer candidates and
    # missing-left alone, the trees must be those scored at every candidate in both
    # directions, and the numbers equal to float rounding.
    import jaxgbt
    import jaxgbt.data.binning as binning

    rng = np.random.default_rng(5)
    X = np.column_stack([rng.random((300, 6)) < 0.5, rng.random((300, 16)) < 0.08,
                         rng.integers(0, 4, (300, 3))]).astype(np.float32)
    y = ((X[:, 0] + X[:, 6] + X[:, 7] - X[:, 22] / 2 + rng.normal(size=300) / 2) > 0.5
         ).astype(np.float32)
    monkeypatch.setattr(binning, "SMALL_DATA_CELLS", 0)
    thresholds = binning.compute_thresholds(X, 256)
    thresholds = binning.trimmed(thresholds, binning.bins_needed(thresholds, 256, 300))
    sparse = binning.sparse_group(X, thresholds, (), missing_values=False)
    assert sparse.features == tuple(range(6, 22)) and sparse.n_candidates == 1
    assert binning.bin_groups(thresholds, 300, sparse.features, missing_values=False) == (
        (4, tuple(range(6)), 1), (8, (22, 23, 24), 3))

    def fitted():
        return jaxgbt.fit("logistic", X, y, n_trees=4, depth=3, grow_policy=grow_policy)

    fewer = fitted()
    monkeypatch.setattr(binning, "search_candidates", lambda *args: None)
    every = fitted()
    for name in ("feature", "threshold", "default_left", "leaf_value"):
        assert_same_numbers(getattr(fewer, name), getattr(every, name), err_msg=name)
    np.testing.assert_allclose(fewer.split_gain, every.split_gain, rtol=1e-5, atol=1e-6)
    assert set(np.asarray(fewer.feature).ravel()) & set(range(22))  # 0/1 columns split


@pytest.mark.parametrize("fit_options", [
    dict(grow_policy="oblivious"), dict(grow_policy="depthwise"),
    dict(grow_policy="oblivious", subsample=0.5, objective="softmax")])
def test_sparse_features_summed_from_entry_lists_give_the_same_model(monkeypatch, fit_options):
    # Mostly-zero columns (with a missing value and a count among them) beside dense
    # ones: their histograms are summed from row entry lists, each bin of 0 a node's
    # total less the other bins. The trees must be those of the dense histograms, and
    # the numbers equal to float rounding (the bins of 0 are summed in another order).
    # Without score noise: the sparse group's histograms are as wide as its widest
    # feature (5 bins of counts), the dense 0/1 columns' 4 wide, and a feature with
    # missing values repeats its last split in every empty bin, each with its own draw.
    import jaxgbt
    import jaxgbt.data.binning as binning

    rng = np.random.default_rng(4)
    X = np.column_stack([rng.random((400, 18)) < 0.1, rng.normal(size=(400, 2))]
                        ).astype(np.float32)
    X[:, 3] *= rng.integers(1, 5, 400)
    X[rng.random(400) < 0.05, 5] = np.nan
    score = X[:, 0] + X[:, 1] - X[:, 3] * (X[:, 18] > 0) + 0.5 * X[:, 19]
    options = dict(fit_options)
    objective = options.pop("objective", "logistic")
    y = (score > np.median(score) if objective == "logistic"
         else np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))).astype(np.float32)
    thresholds = binning.trimmed(binning.compute_thresholds(X, 64), 64)
    assert binning.sparse_group(X, thresholds).features == tuple(range(18))

    def fitted():
        return jaxgbt.fit(objective, X, y, n_trees=4, depth=3, n_bins=64, random_strength=0.0,
                          **options)

    from_entries = fitted()
    monkeypatch.setattr(binning, "SPARSE_MIN_FEATURES", 10**6)  # dense histograms
    dense = fitted()
    for name in ("feature", "threshold", "default_left"):
        assert_array_equal(np.asarray(getattr(from_entries, name)),
                           np.asarray(getattr(dense, name)))
    for name in ("split_gain", "leaf_value"):
        np.testing.assert_allclose(getattr(from_entries, name), getattr(dense, name),
                                   rtol=1e-5, atol=1e-6)
    assert np.isin(np.asarray(dense.feature), np.arange(18)).any()  # sparse features split


@pytest.mark.parametrize("fit_options", [
    dict(grow_policy="oblivious"), dict(grow_policy="lossguide"),
    dict(grow_policy="oblivious", subsample=0.5, objective="softmax")])
def test_a_sparse_group_of_0_1_columns_at_three_bins_gives_the_four_bin_model(monkeypatch,
                                                                             fit_options):
    # 0/1 columns (one with a missing value) summed from their entries take 3 bins, two
    # values and the missing bin, where a power of two gave 4: the 4th held no row, so
    # the models are the same bit for bit, score noise included.
    import jaxgbt
    import jaxgbt.data.binning as binning

    rng = np.random.default_rng(5)
    X = np.column_stack([rng.random((400, 20)) < 0.1, rng.normal(size=(400, 2))]
                        ).astype(np.float32)
    X[rng.random(400) < 0.03, 4] = np.nan
    score = X[:, 0] + X[:, 1] - X[:, 3] * (X[:, 20] > 0) + 0.5 * X[:, 21] + (X[:, 4] == 1)
    options = dict(fit_options)
    objective = options.pop("objective", "logistic")
    y = (score > np.median(score) if objective == "logistic"
         else np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))).astype(np.float32)
    thresholds = binning.trimmed(binning.compute_thresholds(X, 256), 256)
    group = binning.sparse_group(X, thresholds)
    assert group.features == tuple(range(20)) and group.n_bins == 3

    def fitted():
        return jaxgbt.fit(objective, X, y, n_trees=8, depth=4, **options)

    three = fitted()
    monkeypatch.setattr(binning, "SPARSE_0_1_BINS", 4)
    assert binning.sparse_group(X, thresholds).n_bins == 4
    four = fitted()
    for name in ("feature", "threshold", "default_left", "leaf_value", "split_gain"):
        assert_array_equal(np.asarray(getattr(three, name)), np.asarray(getattr(four, name)),
                           err_msg=name)
    assert np.isin(np.asarray(three.feature), np.arange(20)).any()  # 0/1 columns split


def _one_hot_data(n_rows: int, seed: int):
    """Two categorical columns one-hot (20 and 12 levels), one level holding counts and
    another a missing value (both still one column of a row at most), beside two
    normal columns; a 0/1 label."""
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(0, 20, n_rows), rng.integers(0, 12, n_rows)])
    X = np.zeros((n_rows, 34), np.float32)
    X[np.arange(n_rows), codes[:, 0]] = 1.0
    X[np.arange(n_rows), 20 + codes[:, 1]] = 1.0
    X[:, 3] *= rng.integers(1, 4, n_rows)
    X[np.flatnonzero(X[:, 25])[:3], 25] = np.nan
    X[:, 32:] = rng.normal(size=(n_rows, 2))
    score = (np.isin(codes[:, 0], [1, 3, 5]) + 0.7 * (codes[:, 1] > 6) + 0.5 * X[:, 32]
             + rng.normal(size=n_rows) / 2)
    return X, (score > np.median(score)).astype(np.float32)


@pytest.mark.parametrize("fit_options", [
    dict(grow_policy="oblivious"), dict(grow_policy="lossguide"),
    dict(grow_policy="oblivious", subsample=0.5, objective="softmax")])
def test_exclusive_features_summed_in_bundles_give_the_entries_model(monkeypatch,
                                                                     fit_options):
    # One-hot columns are mutually exclusive: each categorical's columns are one bundle
    # (one column of bytes), summed as a dense column and read apart. A feature's bins
    # sum the same rows in the same order as its entries do, so the models are equal bit
    # for bit, gains included (score noise on: it ranks the same gains). Depthwise trees
    # build their histograms as oblivious ones do; leaf-wise trees grow theirs leaf by
    # leaf, and sampled trees from the drawn rows, which the bundles read per row.
    import jaxgbt
    import jaxgbt.data.binning as binning

    X, y = _one_hot_data(600, 8)
    options = dict(fit_options)
    objective = options.pop("objective", "logistic")
    if objective == "softmax":
        y = (y + (X[:, 32] > 1)).astype(np.float32)
    monkeypatch.setattr(binning, "BUNDLE_MIN_ROWS", 0)
    thresholds = binning.trimmed(binning.compute_thresholds(X, 64), 64)
    group = binning.sparse_group(X, thresholds)
    assert group.features == tuple(range(32)) and group.n_entries == 1
    assert sorted(group.bundles) == [tuple(range(20)), tuple(range(20, 32))]

    def fitted():
        return jaxgbt.fit(objective, X, y, n_trees=4, depth=3, n_bins=64, **options)

    bundled = fitted()
    monkeypatch.setattr(binning, "BUNDLE_MAX_SHARE", 0.0)  # entry lists
    assert binning.sparse_group(X, thresholds).bundles is None
    from_entries = fitted()
    for name in ("feature", "threshold", "default_left", "split_gain", "leaf_value"):
        assert_same_numbers(getattr(bundled, name), getattr(from_entries, name),
                            err_msg=name)
    assert np.isin(np.asarray(bundled.feature), np.arange(32)).any()  # one-hot columns split


def test_one_hot_columns_too_dense_for_entries_bundled_give_the_dense_model(monkeypatch):
    # 16 categoricals of 3 levels one-hot: each column is not 0 in a third of the rows,
    # too many for entry lists, so they were summed as dense columns; now as 16 bundles.
    # Each bin of 0 is its node's total less the other bins, so the numbers are the
    # dense ones to float rounding, and the trees the same.
    import jaxgbt
    import jaxgbt.data.binning as binning

    rng = np.random.default_rng(6)
    codes = rng.integers(0, 3, (500, 16))
    X = np.zeros((500, 50), np.float32)
    X[np.arange(500)[:, None], 3 * np.arange(16) + codes] = 1.0
    X[:, 48:] = rng.normal(size=(500, 2))
    y = ((codes[:, 0] == 1) + (codes[:, 1] == 2) + X[:, 48] + rng.normal(size=500) / 2
         > 1).astype(np.float32)
    monkeypatch.setattr(binning, "BUNDLE_MIN_ROWS", 0)
    group = binning.sparse_group(X, binning.trimmed(binning.compute_thresholds(X, 64), 64))
    assert group.features == tuple(range(48)) and len(group.bundles) == 16

    def fitted():
        return jaxgbt.fit("logistic", X, y, n_trees=4, depth=3, n_bins=64,
                          random_strength=0.0)

    bundled = fitted()
    monkeypatch.setattr(binning, "BUNDLE_MAX_SHARE", 0.0)
    assert binning.sparse_group(X, binning.trimmed(binning.compute_thresholds(X, 64),
                                                   64)) is None
    dense = fitted()
    for name in ("feature", "threshold", "default_left"):
        assert_array_equal(np.asarray(getattr(bundled, name)), np.asarray(getattr(dense, name)))
    for name in ("split_gain", "leaf_value"):
        np.testing.assert_allclose(getattr(bundled, name), getattr(dense, name), rtol=1e-5,
                                   atol=1e-6)
    assert np.isin(np.asarray(dense.feature), np.arange(48)).any()


@pytest.mark.parametrize("bundled", [False, True])
def test_sparse_features_in_a_sweep_give_each_members_own_fit(monkeypatch, bundled):
    # fit_many runs the members' rounds under one program (vmap); the entries (or the
    # bundles of one-hot columns) are the data's, shared by every member.
    import jaxgbt
    import jaxgbt.data.binning as binning

    rng = np.random.default_rng(4)
    X = np.column_stack([rng.random((300, 18)) < 0.1, rng.normal(size=(300, 2))]
                        ).astype(np.float32)
    y = ((X[:, 0] + X[:, 1] + X[:, 18]) > 0.5).astype(np.float32)
    if bundled:
        monkeypatch.setattr(binning, "BUNDLE_MIN_ROWS", 0)
        X, y = _one_hot_data(300, 4)
    group = binning.sparse_group(X, binning.compute_thresholds(X, 256))
    assert (group.bundles is not None) == bundled
    fit = dict(n_trees=4, depth=3, random_strength=0.0)
    many = jaxgbt.fit_many("logistic", X, y, {"learning_rate": [0.1, 0.3]}, **fit)
    for i, rate in enumerate([0.1, 0.3]):
        one = jaxgbt.fit("logistic", X, y, learning_rate=rate, **fit)
        assert_array_equal(np.asarray(many.feature)[i], np.asarray(one.feature))
        np.testing.assert_allclose(np.asarray(many.leaf_value)[i], one.leaf_value, rtol=1e-6,
                                   atol=1e-7)
