"""jaxgbt.core.histogram.build_histogram against the NumPy reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
from conftest import assert_same_numbers
from numpy.testing import assert_allclose, assert_array_equal

from jaxgbt.core.histogram import build_histogram

N_ROWS, N_FEATURES, N_BINS, N_NODES = 300, 5, 16, 4

_build = jax.jit(build_histogram, static_argnames=("n_nodes", "n_bins"))


def _inputs(n_outputs: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    bins = rng.integers(0, N_BINS, (N_FEATURES, N_ROWS)).astype(np.uint8)
    bins[0] = np.minimum(bins[0], 5)  # bins 6 .. B - 1 of feature 0 stay empty
    node = rng.integers(0, N_NODES - 1, N_ROWS).astype(np.int32)  # node 3 stays empty
    g = rng.normal(size=(N_ROWS, n_outputs))
    h = rng.uniform(0.1, 2.0, (N_ROWS, n_outputs))
    weight = rng.uniform(0.5, 2.0, (N_ROWS, 1))
    return bins, node, np.concatenate([g * weight, h * weight], axis=1)


@pytest.mark.parametrize("n_outputs", [1, 2, 3])
def test_histogram_matches_reference_float32(n_outputs):
    bins, node, gh = _inputs(n_outputs)
    hist = _build(jnp.asarray(bins), jnp.asarray(node), jnp.asarray(gh, jnp.float32),
                  n_nodes=N_NODES, n_bins=N_BINS)
    assert hist.shape == (N_FEATURES, N_NODES, N_BINS, 2 * n_outputs)
    assert hist.dtype == jnp.float32
    expected = reference.histogram(bins, node, gh, N_NODES, N_BINS)
    assert_allclose(np.asarray(hist), expected, rtol=1e-5, atol=1e-5)
    assert_array_equal(np.asarray(hist)[0, :, 6:], 0.0)
    assert_array_equal(np.asarray(hist)[:, 3], 0.0)


def test_histogram_of_an_odd_number_of_rows_counts_the_last_row():
    """An odd N is summed as its first N - 1 rows, then its last row."""
    bins, node, gh = _inputs(n_outputs=1)
    n_rows = N_ROWS - 1
    bins, node, gh = bins[:, :n_rows], node[:n_rows].copy(), gh[:n_rows]
    node[-1] = 3  # the only row of node 3
    hist = np.asarray(_build(jnp.asarray(bins), jnp.asarray(node), jnp.asarray(gh, jnp.float32),
                             n_nodes=N_NODES, n_bins=N_BINS))
    assert_allclose(hist, reference.histogram(bins, node, gh, N_NODES, N_BINS),
                    rtol=1e-5, atol=1e-5)
    for feature in range(N_FEATURES):
        assert_allclose(hist[feature, 3, bins[feature, -1]], gh[-1], rtol=1e-6)
        assert_allclose(hist[feature, 3].sum(axis=0), gh[-1], rtol=1e-6)


def test_histogram_matches_reference_many_features():
    rng = np.random.default_rng(3)
    bins = rng.integers(0, N_BINS, (37, N_ROWS)).astype(np.uint8)
    node = rng.integers(0, N_NODES, N_ROWS).astype(np.int32)
    gh = rng.normal(size=(N_ROWS, 2)).astype(np.float32)
    hist = _build(jnp.asarray(bins), jnp.asarray(node), jnp.asarray(gh), n_nodes=N_NODES,
                  n_bins=N_BINS)
    assert_allclose(np.asarray(hist), reference.histogram(bins, node, gh, N_NODES, N_BINS),
                    rtol=1e-5, atol=1e-5)


def test_histogram_matches_reference_float64():
    bins, node, gh = _inputs(n_outputs=2)
    with jax.enable_x64(True):
        hist = _build(jnp.asarray(bins), jnp.asarray(node), jnp.asarray(gh, jnp.float64),
                      n_nodes=N_NODES, n_bins=N_BINS)
        assert hist.dtype == jnp.float64
        hist = np.asarray(hist)
    assert_allclose(hist, reference.histogram(bins, node, gh, N_NODES, N_BINS),
                    rtol=1e-12, atol=1e-12)


def test_reference_histogram_by_hand():
    bins = np.array([[0, 2, 2, 1], [1, 1, 0, 2]])
    node = np.array([0, 1, 1, 0])
    gh = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])
    hist = reference.histogram(bins, node, gh, 2, 3)
    assert_array_equal(hist[0, 0], [[1, 10], [4, 40], [0, 0]])
    assert_array_equal(hist[0, 1], [[0, 0], [0, 0], [5, 50]])
    assert_array_equal(hist[1, 0], [[0, 0], [1, 10], [4, 40]])
    assert_array_equal(hist[1, 1], [[3, 30], [2, 20], [0, 0]])



@pytest.mark.parametrize("features_in_steps", [False, True])
def test_histogram_over_row_blocks_matches_reference(monkeypatch, features_in_steps):
    # Blocks of at most 64 rows, each of an even number: 300 rows are five blocks of
    # 60; 290 rows: five of 58; 257 rows: five of 52, the last starting 3 rows early;
    # 251 rows: four of 64 (not 63), the last starting 5 rows early. With
    # features_in_steps, the 5 features go in three steps of 2, the last starting a
    # feature early, as 25 features do in two steps of 13.
    import jaxgbt.core.histogram as histogram

    monkeypatch.setattr(histogram, "CPU_ROWS_PER_BLOCK", 64)
    monkeypatch.setattr(histogram, "ONE_SCATTER_MAX_ROWS", 0)
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    monkeypatch.setattr(histogram.os, "cpu_count", lambda: 2)
    if features_in_steps:
        monkeypatch.setattr(histogram, "CPU_MIN_FEATURES_PER_STEP", 2)
        monkeypatch.setattr(histogram, "CPU_MAX_FEATURES_PER_STEP", 2)
        assert histogram.features_per_step(N_FEATURES) == 2
    else:
        assert histogram.features_per_step(N_FEATURES) == N_FEATURES
    bins, node, gh = _inputs(n_outputs=1)
    for n_rows in (300, 290, 257, 251):
        assert histogram.rows_per_block(n_rows) % 2 == 0
        # A new function each time: jax.jit of the same function would reuse a trace made
        # under other settings (block and step sizes are read when tracing).
        build = jax.jit(lambda b, n, g: histogram.build_histogram(b, n, g, N_NODES, N_BINS))
        hist = build(jnp.asarray(bins[:, :n_rows]), jnp.asarray(node[:n_rows]),
                     jnp.asarray(gh[:n_rows], jnp.float32))
        expected = reference.histogram(bins[:, :n_rows], node[:n_rows], gh[:n_rows], N_NODES,
                                       N_BINS)
        assert_allclose(np.asarray(hist), expected, rtol=1e-5, atol=1e-5)


def test_features_per_step_spread_evenly_over_the_steps(monkeypatch):
    # On CPU at least CPU_MIN_FEATURES_PER_STEP (16) a step and at most
    # CPU_MAX_FEATURES_PER_STEP (24), one per core beyond up to MAX_FEATURES_PER_STEP
    # (32), and one per core with the rows sharded over a mesh (each core runs a
    # device); accelerators up to 32. Steps of nearly equal size: 28 features are two
    # steps of 14, not 16 and 12 (the last step, started early, would repeat 4
    # features); 17 one step, not two of 9. Among the step counts in those bounds, the
    # one that repeats the fewest features, the smaller steps on a tie: 180 features
    # ten steps of 18 (nine of 20 repeat none either; eleven of 17 repeat 7), 500
    # twenty-five of 20 (thirty of 17 repeat 10), 2,000 a hundred and twenty-five of 16.
    import jaxgbt.core.histogram as histogram

    backend = "cpu"
    monkeypatch.setattr(jax, "default_backend", lambda: backend)
    monkeypatch.setattr(histogram.os, "cpu_count", lambda: 2)
    widths = (1, 5, 16, 17, 24, 25, 28, 40, 63, 100, 180, 500, 2000)
    assert [histogram.features_per_step(f) for f in widths
            ] == [1, 5, 16, 17, 24, 13, 14, 20, 21, 20, 18, 20, 16]
    for f in widths[5:]:
        step = histogram.features_per_step(f)
        repeated = -(-f // step) * step - f
        assert all(-(-f // other) * other - f >= repeated for other in range(16, 25)), f
    assert [histogram.features_per_step(f, sharded=True) for f in (1, 5, 28)] == [1, 2, 2]
    monkeypatch.setattr(histogram.os, "cpu_count", lambda: 24)
    assert [histogram.features_per_step(f) for f in (28, 63)] == [14, 21]
    monkeypatch.setattr(histogram.os, "cpu_count", lambda: 96)
    assert [histogram.features_per_step(f) for f in (28, 63)] == [28, 32]
    backend = "gpu"
    assert [histogram.features_per_step(f) for f in (5, 40, 63)] == [5, 20, 32]


def test_steps_that_repeat_a_feature_give_the_same_bits_as_steps_that_do_not(monkeypatch):
    # Whatever the step, each feature's sums are its own segment_sum over the same rows
    # in the same order: 5 features in three steps of 2 (the last repeating a feature,
    # whose second sums are dropped) or in one step of 5 give the same bits.
    import jaxgbt.core.histogram as histogram

    monkeypatch.setattr(histogram, "ONE_SCATTER_MAX_ROWS", 0)
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    monkeypatch.setattr(histogram.os, "cpu_count", lambda: 2)
    bins, node, gh = _inputs(n_outputs=2)
    args = (jnp.asarray(bins), jnp.asarray(node), jnp.asarray(gh, jnp.float32))
    hists = []
    for step in (2, 5):
        monkeypatch.setattr(histogram, "CPU_MIN_FEATURES_PER_STEP", step)
        monkeypatch.setattr(histogram, "CPU_MAX_FEATURES_PER_STEP", step)
        assert histogram.features_per_step(N_FEATURES) == step
        hists.append(jax.jit(
            lambda b, n, g: histogram.build_histogram(b, n, g, N_NODES, N_BINS))(*args))
    assert_same_numbers(*hists)


@pytest.mark.parametrize("n_rows", [300, 299])
def test_one_scatter_equals_a_scatter_per_feature_bit_for_bit(monkeypatch, n_rows):
    # Few rows go through one segment_sum over (feature, node, bin); more rows through
    # one per feature. Both add each segment's rows in row order: the same bits.
    import jaxgbt.core.histogram as histogram

    bins, node, gh = _inputs(n_outputs=3)
    args = (jnp.asarray(bins[:, :n_rows]), jnp.asarray(node[:n_rows]),
            jnp.asarray(gh[:n_rows], jnp.float32))
    one = jax.jit(lambda b, n, g: histogram.build_histogram(b, n, g, N_NODES, N_BINS))(*args)
    monkeypatch.setattr(histogram, "ONE_SCATTER_MAX_ROWS", 0)
    per_feature = jax.jit(
        lambda b, n, g: histogram.build_histogram(b, n, g, N_NODES, N_BINS))(*args)
    assert_same_numbers(one, per_feature)


@pytest.mark.parametrize(("n_outputs", "slots", "n_bins"),
                         [(1, False, 8), (2, False, 8), (1, True, 8), (2, True, 8),
                          (1, False, 7), (2, True, 32), (3, True, 8)])
def test_sparse_histogram_matches_reference(n_outputs, slots, n_bins):
    """Features stored as entries (bins other than each feature's bin of 0): the
    histogram equals the dense one, the bins of 0 taken as node totals less the other
    bins. With slots, the rows come through drawn slots (one row twice, one slot unused
    and pointing at a drawn row with g = h = 0, as ``sampling.drawn_rows`` leaves it).
    The other bins are summed by halving up to 16 bins (7: an odd count), by one
    reduction above. Three outputs' six columns are scattered as eight on CPU
    (``padded_columns``) and come back as six."""
    from jaxgbt.core.config import SparseGroup
    from jaxgbt.core.histogram import build_sparse_histogram, padded_columns, with_gradients
    from jaxgbt.data.binning import sparse_entries

    rng = np.random.default_rng(11)
    n_features = 6
    zero_bins = np.array([0, 2, 0, 5, 1, 0])
    bins = np.repeat(zero_bins[:, None], N_ROWS, axis=1).astype(np.uint8)
    other = rng.random((n_features, N_ROWS)) < 0.2
    bins[other] = rng.integers(0, n_bins, other.sum())  # some land in the bin of 0 again
    bins[4, ::17] = n_bins - 1  # missing
    node = rng.integers(0, N_NODES - 1, N_ROWS).astype(np.int32)  # node 3 stays empty
    gh = rng.normal(size=(N_ROWS, 2 * n_outputs))
    group = SparseGroup(features=tuple(range(n_features)), zero_bins=tuple(zero_bins),
                        n_bins=n_bins,
                        n_entries=int((bins != zero_bins[:, None]).sum()) + 5)
    entries = sparse_entries(bins, group)
    assert (entries.features[-5:] == -1).all()  # padding: more counted than found
    expected = reference.histogram(bins, node, gh, N_NODES, n_bins)
    if slots:
        slot_rows = np.concatenate([np.arange(0, N_ROWS, 2), [4, 4]])  # row 4 twice
        slot_gh = gh[slot_rows]
        slot_gh[-1] = 0.0  # an unused slot
        expected = reference.histogram(bins[:, slot_rows], node[slot_rows], slot_gh,
                                       N_NODES, n_bins)
        entries = entries._replace(slot_rows=jnp.asarray(slot_rows, jnp.int32),
                                   row_axis=jnp.zeros((N_ROWS, 0), jnp.int8))
        node, gh = node[slot_rows], slot_gh
    hist = jax.jit(lambda entries, node, gh: build_sparse_histogram(
        with_gradients(entries, gh), node, gh, N_NODES, n_bins, jnp.asarray(zero_bins)))(
        jax.tree.map(jnp.asarray, entries), jnp.asarray(node), jnp.asarray(gh, jnp.float32))
    assert hist.shape == expected.shape
    padded = with_gradients(jax.tree.map(jnp.asarray, entries), jnp.asarray(gh, jnp.float32))
    assert padded.gh.shape == (entries.rows.shape[0], padded_columns(gh.shape[1]))
    assert_allclose(np.asarray(hist), expected, rtol=1e-5, atol=1e-5)
    assert_array_equal(np.asarray(hist)[:, 3], 0.0)


@pytest.mark.parametrize("shape", [(3, 7, 2), (3, 8, 2), (3, 1, 2), (3, 13, 2)])
def test_sum_by_halving_is_the_sum_over_the_axis(shape):
    from jaxgbt.core.split import sum_by_halving

    x = np.random.default_rng(2).normal(size=shape).astype(np.float32)
    summed = np.asarray(sum_by_halving(jnp.asarray(x), 1))
    assert summed.shape == (shape[0], shape[2])
    assert_allclose(summed, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-6)
    # Halving, not a running sum: [a, b, c] is (a + b) + c, [a, b, c, d] (a + c) + (b + d).
    if shape[1] == 8:
        halves = x[:, :4] + x[:, 4:]
        quarters = halves[:, :2] + halves[:, 2:]
        assert_array_equal(summed, quarters[:, 0] + quarters[:, 1])


@pytest.mark.parametrize("length", [1, 2, 5, 8, 13])
def test_reduce_by_halving_with_and_is_all_over_the_axis(length):
    from jaxgbt.core.split import reduce_by_halving

    x = np.random.default_rng(length).random((4, length, 3)) < 0.8
    x[0] = True  # one row all true, so that an AND of all is true somewhere
    got = np.asarray(reduce_by_halving(jnp.asarray(x), 1, jnp.logical_and))
    assert got.dtype == bool and got.shape == (4, 3)
    assert_array_equal(got, x.all(axis=1))
    assert got[0].all()


@pytest.mark.parametrize("n_rows", [300, 299])
def test_smaller_children_holds_each_nodes_smaller_child_in_row_order(n_rows):
    from jaxgbt.core.histogram import smaller_children, smaller_children_slots

    rng = np.random.default_rng(5)
    n_nodes = 8
    # Parent 0: 2 rows left, the rest right; parent 1 all left (its right child empty);
    # parents 2 and 3 a random share each.
    parent = rng.integers(0, 4, n_rows)
    right = rng.random(n_rows) < np.array([0.9, 0.0, 0.3, 0.6])[parent]
    node = (2 * parent + right).astype(np.int32)
    gh = rng.normal(size=(n_rows, 6)).astype(np.float32)
    smaller = jax.jit(smaller_children, static_argnums=2)(jnp.asarray(node), jnp.asarray(gh),
                                                          n_nodes)
    rows_in = np.bincount(node, minlength=n_nodes)
    smaller_right = rows_in[1::2] < rows_in[0::2]
    assert_array_equal(np.asarray(smaller.right), smaller_right)
    expected = np.flatnonzero((node % 2 == 1) == smaller_right[node // 2])
    n_slots = smaller_children_slots(n_rows)
    assert n_slots % 2 == 0 and expected.size <= n_slots <= n_rows
    rows = np.asarray(smaller.rows)
    assert rows.shape == (n_slots,)
    assert_array_equal(rows[:expected.size], expected)  # in row order
    assert_array_equal(rows[expected.size:], np.arange(expected.size, n_slots))
    assert_array_equal(np.asarray(smaller.parent), node[rows] // 2)
    assert_array_equal(np.asarray(smaller.gh)[:expected.size], gh[expected])
    assert_array_equal(np.asarray(smaller.gh)[expected.size:], 0.0)


@pytest.mark.parametrize("n_outputs", [1, 3])
def test_subtracted_histogram_matches_reference(n_outputs):
    """A level's histogram from its parents' (themselves from their parents', as a
    tree's third level is) equals the level's summed directly, bins left empty stay 0."""
    from jaxgbt.core.histogram import smaller_children, subtracted_histogram

    bins, _, gh = _inputs(n_outputs, seed=6)
    rng = np.random.default_rng(7)
    node = np.zeros(N_ROWS, np.int32)
    level = jax.jit(lambda bins, node, gh, parent: subtracted_histogram(
        bins, smaller_children(node, gh, 2 * parent.shape[1]), parent, N_BINS))
    hist = reference.histogram(bins, node, gh, 1, N_BINS)
    for n_nodes in (2, 4, 8):
        node = 2 * node + (rng.random(N_ROWS) < 0.3 + 0.4 * (node % 2))
        got = np.asarray(level(jnp.asarray(bins), jnp.asarray(node), jnp.asarray(gh, jnp.float32),
                               jnp.asarray(hist, jnp.float32)))
        expected = reference.histogram(bins, node, gh, n_nodes, N_BINS)
        assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        assert_array_equal(got[0, :, 6:], 0.0)  # empty in the root: empty in every node
        hist = got.astype(np.float64)


def test_scatter_rows_padded_to_four_floats_on_cpu(monkeypatch):
    import jaxgbt.core.histogram as histogram

    assert [histogram.padded_columns(c) for c in (2, 4, 6, 8, 10, 12, 14)] == (
        [2, 4, 8, 8, 12, 12, 16] if jax.default_backend() == "cpu"
        else [2, 4, 6, 8, 10, 12, 14])
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert [histogram.padded_columns(c) for c in (2, 6, 10)] == [2, 6, 10]
