"""jaxgbt.core.tree.grow_tree and a fitted model's predictions against the NumPy reference."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
from conftest import two_devices
from numpy.testing import assert_allclose, assert_array_equal

import jaxgbt
from jaxgbt.core.split import SplitParams
from jaxgbt.core.tree import grow_tree
from jaxgbt.data.binning import apply_bins, compute_thresholds

N_ROWS, N_FEATURES, N_BINS, DEPTH = 300, 5, 16, 3

_grow = jax.jit(grow_tree, static_argnames=("depth", "n_bins", "axis_name", "bin_groups"))


def _features(seed: int = 0) -> np.ndarray:
    """f32[N, F] with about 10% NaN in features 0 and 3."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_ROWS, N_FEATURES)).astype(np.float32)
    X[rng.random(N_ROWS) < 0.1, 0] = np.nan
    X[rng.random(N_ROWS) < 0.1, 3] = np.nan
    return X


def _binned_problem(n_outputs: int, seed: int = 0):
    """Binned features u8[F, N] and weighted gh f64[N, 2K] whose g depends on X."""
    X = _features(seed)
    rng = np.random.default_rng(seed + 1)
    bins = apply_bins(X, compute_thresholds(X, N_BINS))
    x = np.nan_to_num(X.astype(np.float64), nan=1.5)
    signal = np.column_stack([x[:, 0] + np.sin(2 * x[:, 1]), x[:, 3] * x[:, 2]])[:, :n_outputs]
    g = signal + 0.5 * rng.normal(size=(N_ROWS, n_outputs))
    h = rng.uniform(0.2, 1.5, (N_ROWS, n_outputs))
    weight = rng.uniform(0.5, 2.0, (N_ROWS, 1))
    return bins, np.concatenate([g * weight, h * weight], axis=1)


CASES = {
    "l1_l2_weights": dict(n_outputs=1, l2=1.0, l1=0.5),
    "min_child_weight": dict(n_outputs=1, l2=0.3, l1=0.1, min_child_weight=20.0),
    "min_split_gain": dict(n_outputs=1, l2=1.0, l1=0.5, min_split_gain=100.0),
    "vector_k2": dict(n_outputs=2, l2=2.0, l1=0.3),
}


def _split_params(settings: dict, dtype) -> SplitParams:
    return SplitParams(l2=jnp.asarray(settings["l2"], dtype),
                       l1=jnp.asarray(settings.get("l1", 0.0), dtype),
                       min_split_gain=jnp.asarray(settings.get("min_split_gain", 0.0), dtype),
                       min_child_weight=jnp.asarray(settings.get("min_child_weight", 0.0), dtype))


def _check_case_is_active(case: str, bins, gh, settings, tree) -> None:
    """The setting a case is named after changes the reference tree."""
    if case == "min_child_weight":
        free = reference.grow_tree(bins, gh, DEPTH, N_BINS, l2=settings["l2"], l1=settings["l1"])
        assert not np.array_equal(free.split_bin, tree.split_bin)
    if case == "min_split_gain":
        assert tree.gain[0] > 0 and tree.gain[-1] == 0
        last = (tree.feature[-1], tree.split_bin[-1], tree.default_left[-1])
        assert last == (0, N_BINS - 2, True)
    if case == "vector_k2":
        assert tree.leaf_value.shape == (2**DEPTH, 2)


def _assert_same_tree(got, leaf, expected, *, rtol, atol) -> None:
    assert_array_equal(np.asarray(got.feature), expected.feature)
    assert_array_equal(np.asarray(got.split_bin), expected.split_bin)
    assert_array_equal(np.asarray(got.default_left), expected.default_left)
    assert_array_equal(np.asarray(leaf), expected.leaf)
    assert_allclose(np.asarray(got.gain), expected.gain, rtol=rtol, atol=atol)
    assert_allclose(np.asarray(got.leaf_value), expected.leaf_value, rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", list(CASES))
def test_grow_tree_matches_reference_float32(case):
    settings = dict(CASES[case])
    bins, gh = _binned_problem(settings.pop("n_outputs"))
    gh32 = gh.astype(np.float32)
    expected = reference.grow_tree(bins, gh32, DEPTH, N_BINS, **settings)
    _check_case_is_active(case, bins, gh32, settings, expected)
    tree, leaf = _grow(jnp.asarray(bins), jnp.asarray(gh32), _split_params(settings, jnp.float32),
                       depth=DEPTH, n_bins=N_BINS)
    assert tree.leaf_value.dtype == jnp.float32
    _assert_same_tree(tree, leaf, expected, rtol=1e-5, atol=1e-5)


_grow_by_subtraction = jax.jit(
    functools.partial(grow_tree, subtraction=True),
    static_argnames=("depth", "n_bins", "axis_name", "bin_groups"))


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("subtraction", [False, True])
def test_grow_tree_matches_reference_float64(case, subtraction):
    """Also with the histograms of the levels below the first by subtraction."""
    settings = dict(CASES[case])
    bins, gh = _binned_problem(settings.pop("n_outputs"))
    expected = reference.grow_tree(bins, gh, DEPTH, N_BINS, **settings)
    grow = _grow_by_subtraction if subtraction else _grow
    with jax.enable_x64(True):
        tree, leaf = grow(jnp.asarray(bins), jnp.asarray(gh, jnp.float64),
                          _split_params(settings, jnp.float64), depth=DEPTH, n_bins=N_BINS)
        assert tree.leaf_value.dtype == jnp.float64
        tree, leaf = jax.tree.map(np.asarray, (tree, leaf))
    _assert_same_tree(tree, leaf, expected, rtol=1e-10, atol=1e-12)


FIT_SETTINGS = dict(l2=1.0, l1=0.5, min_child_weight=1.0)


@pytest.fixture(scope="module")
def fitted():
    """A 3-tree squared-error model on float features with NaN, weights, l1 and l2."""
    X = _features(seed=3)
    rng = np.random.default_rng(4)
    x = np.nan_to_num(X, nan=0.0)
    y = (2 * x[:, 0] - x[:, 1] * x[:, 2] + 0.3 * rng.normal(size=N_ROWS)).astype(np.float32)
    weight = rng.uniform(0.5, 2.0, N_ROWS).astype(np.float32)
    model = jaxgbt.fit("squared_error", X, y, n_trees=3, depth=DEPTH, n_bins=N_BINS,
                       learning_rate=0.3, sample_weight=weight, **FIT_SETTINGS,
                       random_strength=0.0)  # the reference ranks by gain, without noise
    table = compute_thresholds(X, N_BINS, weight, seed=0)
    return X, y, weight, model, table


def _split_bins(model, table: np.ndarray) -> np.ndarray:
    """i64[T, D]: the bin whose upper edge is each stored threshold (the first, for +inf)."""
    feature, threshold = np.asarray(model.feature), np.asarray(model.threshold)
    split_bin = np.zeros(feature.shape, np.int64)
    for t, d in np.ndindex(feature.shape):
        matches = np.flatnonzero(table[feature[t, d]] == threshold[t, d])
        assert matches.size > 0, f"threshold {threshold[t, d]} is not a cut of its feature"
        split_bin[t, d] = matches[0]
    return split_bin


def test_fit_first_tree_matches_reference(fitted):
    X, y, weight, model, table = fitted
    base = np.asarray(model.base_score)
    assert_allclose(base, [np.sum(weight * y, dtype=np.float64) / weight.sum()], rtol=1e-6)
    g = (base[0] - y) * weight  # float32, as boosting computes it
    gh = np.column_stack([g, weight]).astype(np.float64)
    expected = reference.grow_tree(apply_bins(X, table), gh, DEPTH, N_BINS, **FIT_SETTINGS,
                                   min_split_gain=-np.inf)  # fit's oblivious default
    assert_array_equal(np.asarray(model.feature[0]), expected.feature)
    assert_array_equal(_split_bins(model, table)[0], expected.split_bin)
    assert_array_equal(np.asarray(model.default_left[0]), expected.default_left)
    assert_allclose(np.asarray(model.split_gain[0]), expected.gain, rtol=1e-5)
    assert_allclose(np.asarray(model.leaf_value[0]),
                    0.3 * reference.filled_leaf_values(expected, gh), atol=1e-5)


def test_predict_on_floats_equals_predict_on_training_bins(fitted):
    X, _, _, model, table = fitted
    split_bin = _split_bins(model, table)
    feature, default_left = np.asarray(model.feature), np.asarray(model.default_left)
    # Training rows, then rows exactly on, just above and just below every used threshold.
    used = np.asarray(model.threshold)
    X_edges = np.tile(np.nanmedian(X, axis=0), (3 * used.size, 1)).astype(np.float32)
    for j, (t, d) in enumerate(np.ndindex(used.shape)):
        for k, value in enumerate([used[t, d], np.nextafter(used[t, d], np.float32(np.inf)),
                                   np.nextafter(used[t, d], np.float32(-np.inf))]):
            X_edges[3 * j + k, feature[t, d]] = value if np.isfinite(value) else 0.0
    X_all = np.concatenate([X, X_edges])
    leaves = np.asarray(model.leaf_index(X_all))
    from_bins = reference.route_binned(apply_bins(X_all, table), feature, split_bin, default_left,
                                       N_BINS)
    assert_array_equal(leaves, from_bins)
    raw, from_floats = reference.predict(X_all, feature, used, default_left,
                                         np.asarray(model.leaf_value), np.asarray(model.base_score))
    assert_array_equal(leaves, from_floats)
    assert_allclose(np.asarray(model.predict_raw(X_all)), raw[:, 0], rtol=1e-6, atol=1e-6)


def test_predict_in_row_blocks_equals_predict_per_small_batch(fitted):
    # Past jaxgbt.model._BLOCK_ROWS rows, prediction runs in blocks (two side by side);
    # the padded tail and the blocks must give each row what a small batch gives it.
    from jaxgbt import model as model_module

    X, _, _, model, _ = fitted
    n_rows = 2 * model_module._BLOCK_ROWS * model_module._PARALLEL_BLOCKS + 123
    X_big = np.tile(X, (-(-n_rows // len(X)), 1))[:n_rows]
    expected = np.concatenate([np.asarray(model.predict_raw(X_big[i:i + 5000]))
                               for i in range(0, n_rows, 5000)])
    assert_array_equal(np.asarray(model.predict_raw(X_big)), expected)


def test_grow_tree_with_subtraction_grows_the_same_deep_trees():
    """Depth 6 over 20 features of 256 bins: the levels' histograms come in three node
    counts (``search_sizes``), kept and read across them; two groups of bins, three
    outputs and missing values. The trees are those grown without subtraction."""
    rng = np.random.default_rng(8)
    n_rows, n_features, n_bins = 1000, 20, 256
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    bins = apply_bins(X, compute_thresholds(X, n_bins))
    bins[:4] = np.where(bins[:4] == n_bins - 1, 15, np.minimum(bins[:4], 14))
    x = np.nan_to_num(X, nan=0.5)
    g = np.column_stack([x[:, 0] - x[:, 5], x[:, 6] * x[:, 7], np.sin(x[:, 8])])
    gh = np.concatenate([g + 0.3 * rng.normal(size=g.shape),
                         rng.uniform(0.2, 1.0, g.shape)], axis=1).astype(np.float32)
    groups = ((16, (0, 1, 2, 3), None), (n_bins, tuple(range(4, n_features)), None))
    params = _split_params(dict(l2=1.0), jnp.float32)
    args = (jnp.asarray(bins), jnp.asarray(gh), params)
    with_subtraction = _grow_by_subtraction(*args, depth=6, n_bins=n_bins, bin_groups=groups)
    without = _grow(*args, depth=6, n_bins=n_bins, bin_groups=groups)
    (tree, leaf), (expected, expected_leaf) = with_subtraction, without
    assert_array_equal(np.asarray(leaf), np.asarray(expected_leaf))
    for field in ("feature", "split_bin", "default_left"):
        assert_array_equal(np.asarray(getattr(tree, field)), np.asarray(getattr(expected, field)))
    assert_allclose(np.asarray(tree.gain), np.asarray(expected.gain), rtol=1e-4)
    assert_allclose(np.asarray(tree.leaf_value), np.asarray(expected.leaf_value), rtol=1e-6)
    assert (np.asarray(tree.gain) > 0).all()  # every level splits


@two_devices
def test_grow_tree_with_subtraction_under_a_mesh_grows_the_same_trees():
    """Rows split over two devices, each subtracting its own rows' histograms (its own
    smaller children): the same tree as without subtraction."""
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    bins, gh = _binned_problem(n_outputs=2, seed=5)
    gh[:N_ROWS // 2, :2] *= 0.01  # the first device's rows alone would split elsewhere
    mesh = Mesh(np.asarray(jax.devices()[:2]), ("rows",))
    params = _split_params(dict(l2=1.0), jnp.float32)

    def grown(subtraction):
        grow = functools.partial(grow_tree, depth=5, n_bins=N_BINS, axis_name="rows",
                                 subtraction=subtraction)
        return jax.jit(jax.shard_map(
            lambda b, g: grow(b, g, params), mesh=mesh, in_specs=(P(None, "rows"), P("rows")),
            out_specs=(P(), P("rows")), check_vma=False))(jnp.asarray(bins),
                                                         jnp.asarray(gh, jnp.float32))

    (tree, leaf), (expected, expected_leaf) = grown(True), grown(False)
    assert_array_equal(np.asarray(leaf), np.asarray(expected_leaf))
    for field in ("feature", "split_bin", "default_left"):
        assert_array_equal(np.asarray(getattr(tree, field)), np.asarray(getattr(expected, field)))
    assert_allclose(np.asarray(tree.leaf_value), np.asarray(expected.leaf_value), rtol=1e-6)
    assert (np.asarray(tree.gain) > 0).all()


def test_uses_subtraction_for_many_rows_and_outputs():
    from jaxgbt.core.tree import search_sizes, uses_subtraction

    sizes = search_sizes(6)
    widths = ((256, None, None, None),)
    sparse = ((16, np.arange(3), np.zeros(3, np.int32), None),) + widths
    enough = 64 * 32 * 256
    # Measured on CPU only: off on accelerators.
    assert uses_subtraction(enough, widths, 28, 6, sizes, 256) == (
        jax.default_backend() == "cpu")
    assert not uses_subtraction(enough - 1, widths, 28, 6, sizes, 256)
    assert not uses_subtraction(enough, widths, 28, 2, sizes, 256)  # binary
    assert not uses_subtraction(enough, sparse, 28, 6, sizes, 256)
    assert not uses_subtraction(enough, widths, 28, 6, search_sizes(1), 256)
    # 20,000 features: 20,000 x 16 x 256 x 6 floats carried is beyond the budget.
    assert not uses_subtraction(enough, widths, 20_000, 6, sizes, 256)
