"""jaxgbt.core.split: level gains and the best split against the NumPy reference and by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
from numpy.testing import assert_allclose

from jaxgbt.core.split import (
    SplitParams,
    best_level_split,
    best_node_splits,
    first_argmax,
    level_gains,
    prefix_sums,
)

N_ROWS, N_FEATURES, N_BINS, N_NODES = 300, 5, 16, 4

_gains = jax.jit(level_gains)
_best = jax.jit(best_level_split)


def _params(dtype=jnp.float32, *, l2=1.0, l1=0.0, min_split_gain=0.0, min_child_weight=0.0):
    return SplitParams(l2=jnp.asarray(l2, dtype), l1=jnp.asarray(l1, dtype),
                       min_split_gain=jnp.asarray(min_split_gain, dtype),
                       min_child_weight=jnp.asarray(min_child_weight, dtype))


def _random_hist(n_outputs: int, seed: int = 0, n_nodes: int = N_NODES) -> np.ndarray:
    """f64[F, n, B, 2K] of 300 random rows, the last node empty, about 10% missing."""
    rng = np.random.default_rng(seed)
    bins = rng.integers(0, N_BINS - 1, (N_FEATURES, N_ROWS))
    bins[rng.random((N_FEATURES, N_ROWS)) < 0.1] = N_BINS - 1
    node = rng.integers(0, max(n_nodes - 1, 1), N_ROWS)
    g = rng.normal(size=(N_ROWS, n_outputs)) + 0.3
    h = rng.uniform(0.1, 2.0, (N_ROWS, n_outputs))
    weight = rng.uniform(0.5, 2.0, (N_ROWS, 1))
    gh = np.concatenate([g * weight, h * weight], axis=1)
    return reference.histogram(bins, node, gh, n_nodes, N_BINS)


CASES = {
    "l2": dict(n_outputs=1, l2=1.0),
    "l1_l2_min_child_weight": dict(n_outputs=1, l2=0.5, l1=2.0, min_child_weight=15.0),
    "vector_k2": dict(n_outputs=2, l2=2.0, l1=0.5, min_child_weight=25.0),
    "no_l2": dict(n_outputs=1, l2=0.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_level_gains_match_reference(case):
    settings = dict(CASES[case])
    hist = _random_hist(settings.pop("n_outputs"))
    expected = reference.level_gains(hist, settings["l2"], settings.get("l1", 0.0),
                                      settings.get("min_child_weight", 0.0))
    if settings.get("min_child_weight"):
        unrestricted = reference.level_gains(hist, settings["l2"], settings.get("l1", 0.0), 0.0)
        assert (expected != unrestricted).mean() > 0.1
    gains = _gains(jnp.asarray(hist, jnp.float32), _params(**settings))
    assert gains.shape == (N_FEATURES, N_BINS - 1, 2) and gains.dtype == jnp.float32
    assert_allclose(np.asarray(gains), expected, rtol=1e-5, atol=2e-5)
    with jax.enable_x64(True):
        gains64 = np.asarray(_gains(jnp.asarray(hist), _params(jnp.float64, **settings)))
    assert_allclose(gains64, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n_nodes", [1, 3, 5, 7])
def test_level_gains_of_any_node_count_match_reference(n_nodes):
    # The gains are summed over nodes by halving the node axis; odd counts carry a node
    # over to the next step.
    hist = _random_hist(1, seed=n_nodes, n_nodes=n_nodes)
    expected = reference.level_gains(hist, 1.0, 0.0, 0.0)
    gains = _gains(jnp.asarray(hist, jnp.float32), _params())
    assert gains.shape == (N_FEATURES, N_BINS - 1, 2)
    assert_allclose(np.asarray(gains), expected, rtol=1e-5, atol=2e-5)


def test_first_argmax_is_argmax():
    # Ties to the first entry, the first NaN wins (short rows), -inf and all-equal rows.
    x = np.array([[1.0, 3.0, 3.0, 2.0], [np.nan, 5.0, np.nan, 1.0], [0.0, 0.0, 0.0, 0.0],
                  [-np.inf, -np.inf, -np.inf, -np.inf], [1.0, 2.0, np.nan, 7.0],
                  [-np.inf, -1.0, -np.inf, -1.0]], np.float32)
    got = np.asarray(jax.jit(first_argmax)(jnp.asarray(x)))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [1, 0, 0, 0, 2, 1])
    np.testing.assert_array_equal(got, np.asarray(jnp.argmax(jnp.asarray(x), axis=-1)))
    y = np.random.default_rng(0).integers(0, 4, (3, 50)).astype(np.float32)  # many ties
    np.testing.assert_array_equal(np.asarray(first_argmax(jnp.asarray(y))), y.argmax(axis=-1))
    assert int(first_argmax(jnp.asarray(y.reshape(-1)))) == int(y.reshape(-1).argmax())
    # Rows as long as a depthwise node's candidates (NaN aside: see first_argmax).
    rng = np.random.default_rng(1)
    z = rng.standard_normal((4, 6000)).astype(np.float32)
    z[1, rng.random(6000) < 0.5] = -np.inf
    z[2, 123] = np.inf
    z[3] = np.round(z[3])  # many ties
    np.testing.assert_array_equal(np.asarray(jax.jit(first_argmax)(jnp.asarray(z))),
                                  z.argmax(axis=-1))
    assert int(jax.jit(first_argmax)(jnp.asarray(z[1]))) == int(z[1].argmax())


def _tie_hist() -> np.ndarray:
    """f64[3, 1, 6, 2]: feature 0 weaker; features 1 and 2 equal, best cut after bin 0
    or (bin 1 being empty) after bin 1; no missing values."""
    hist = np.zeros((3, 1, 6, 2))
    hist[0, 0, 0] = [-1.0, 2.0]
    hist[0, 0, 2] = [1.0, 2.0]
    hist[1, 0, 0] = [-4.0, 2.0]
    hist[1, 0, 2] = [4.0, 2.0]
    hist[2] = hist[1]
    return hist


def test_gain_by_hand():
    hist = _tie_hist()
    # l2 = 0: 16/2 + 16/2 - 0/4 = 16;  l1 = 1, l2 = 1: 9/3 + 9/3 - 0 = 6.
    for settings, value in [(dict(l2=0.0), 16.0), (dict(l2=1.0, l1=1.0), 6.0)]:
        gains = np.asarray(_gains(jnp.asarray(hist, jnp.float32), _params(**settings)))
        expected = reference.level_gains(hist, settings["l2"], settings.get("l1", 0.0), 0.0)
        assert expected[1, 0, 0] == value
        assert_allclose(gains, expected, rtol=1e-6)


def test_ties_go_to_lowest_feature_then_bin_then_missing_left():
    hist = _tie_hist()
    gains = reference.level_gains(hist, 1.0, 0.0, 0.0)
    assert gains[1, 0, 0] == gains[1, 0, 1] == gains[1, 1, 0] == gains[2, 0, 0]
    split = _best(jnp.asarray(hist, jnp.float32), _params())
    assert (int(split.feature), int(split.split_bin), bool(split.default_left)) == (1, 0, True)
    assert reference.best_split(gains, 0.0)[:3] == (1, 0, True)


def test_each_nodes_ties_go_to_lowest_feature_then_bin_then_missing_left():
    # A depthwise level: node 0 holds the tie of features 1 and 2 (and of bins 0 and 1),
    # node 1 the same with feature 2 a little stronger; each node picks as argmax would.
    hist = np.concatenate([_tie_hist(), _tie_hist()], axis=1)  # f64[3, 2, 6, 2]
    hist[2, 1, 0] = [-4.5, 2.0]
    hist[2, 1, 2] = [4.5, 2.0]
    split = jax.jit(best_node_splits)(jnp.asarray(hist, jnp.float32), _params(),
                                      jnp.ones((2, 3), bool))
    got = list(zip(np.asarray(split.feature), np.asarray(split.split_bin),
                   np.asarray(split.default_left), strict=True))
    assert got == [(1, 0, True), (2, 0, True)]
    for node in range(2):
        expected = reference.best_split(reference.level_gains(hist[:, node:node + 1], 1.0,
                                                              0.0, 0.0), 0.0)
        assert tuple(expected[:3]) == got[node]


@pytest.mark.parametrize("missing_g, default_left", [(-4.0, True), (4.0, False)])
def test_missing_values_go_to_the_better_side(missing_g, default_left):
    hist = _tie_hist()
    hist[:, 0, -1] = [missing_g, 2.0]
    split = _best(jnp.asarray(hist, jnp.float32), _params())
    expected = reference.best_split(reference.level_gains(hist, 1.0, 0.0, 0.0), 0.0)
    assert bool(split.default_left) == expected.default_left == default_left
    assert (int(split.feature), int(split.split_bin)) == (expected.feature, expected.split_bin)
    assert_allclose(float(split.gain), expected.gain, rtol=1e-6)


def test_min_child_weight_drops_a_node():
    hist = np.zeros((1, 2, 4, 2))
    hist[0, 0] = [[-3.0, 1.0], [3.0, 4.0], [0.0, 0.0], [0.0, 0.0]]  # left child H = 1
    hist[0, 1] = [[-2.0, 2.0], [2.0, 2.0], [0.0, 0.0], [0.0, 0.0]]
    params = _params(l2=0.0, min_child_weight=1.5)
    gains = np.asarray(_gains(jnp.asarray(hist, jnp.float32), params))
    # Only node 1 counts at bin 0: 4/2 + 4/2 - 0 = 4.
    assert_allclose(gains[0, 0], [4.0, 4.0], rtol=1e-6)
    assert_allclose(gains, reference.level_gains(hist, 0.0, 0.0, 1.5), rtol=1e-6)


def test_min_child_weight_counts_hessian_summed_over_outputs():
    hist = np.zeros((1, 1, 3, 4))
    hist[0, 0, 0] = [-1.0, -1.0, 0.8, 0.8]  # each output H < 1.5, their sum >= 1.5
    hist[0, 0, 1] = [1.0, 1.0, 0.8, 0.8]
    gains = np.asarray(_gains(jnp.asarray(hist, jnp.float32), _params(min_child_weight=1.5)))
    expected = reference.level_gains(hist, 1.0, 0.0, 1.5)
    assert expected[0, 0, 0] > 0
    assert_allclose(gains, expected, rtol=1e-6)


@pytest.mark.parametrize("min_split_gain, splits", [(15.9, True), (16.0, False), (100.0, False)])
def test_level_is_pass_through_unless_gain_exceeds_min_split_gain(min_split_gain, splits):
    hist = _tie_hist()
    split = _best(jnp.asarray(hist, jnp.float32), _params(l2=0.0, min_split_gain=min_split_gain))
    got = (int(split.feature), int(split.split_bin), bool(split.default_left), float(split.gain))
    expected = (1, 0, True, 16.0) if splits else (0, 4, True, 0.0)
    assert got == expected
    assert tuple(reference.best_split(reference.level_gains(hist, 0.0, 0.0, 0.0),
                                      min_split_gain)) == expected


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the products of "
                    "accelerators may choose their kernels by shape")
def test_a_rows_prefix_sums_do_not_depend_on_the_rows_summed_with_it():
    # A narrower group's histogram, a shallow level or one node's bins make short
    # products; each row's sums must be the floats it gets within a long product, or
    # the search over narrower groups would not keep the full width's model. (A product
    # of 1 to 50 rows added in another order than a long one on some processors.)
    x = np.random.default_rng(5).normal(size=(400, 255)).astype(np.float32)
    sums = jax.jit(prefix_sums, static_argnums=1)
    long = np.asarray(sums(jnp.asarray(x), 1))
    for n_rows in (1, 3, 17, 50, 51, 257):
        np.testing.assert_array_equal(sums(jnp.asarray(x[-n_rows:]), 1), long[-n_rows:])
    np.testing.assert_array_equal(sums(jnp.asarray(x[:3, :47]), 1), long[:3, :47])


def test_prefix_sums_take_the_block_totals_given_and_ignore_the_last():
    # The split search sums each block of 16 bins from the histogram as it lies and
    # passes the totals in; the sums must be those of totals summed here, and the last
    # block's total (which holds the missing bin there) must not enter any sum.
    x = np.random.default_rng(6).normal(size=(3, 4, 255)).astype(np.float32)
    padded = np.pad(x, [(0, 0), (0, 0), (0, 1)]).reshape(3, 4, 16, 16)
    totals = padded[..., 0]
    for k in range(1, 16):
        totals = totals + padded[..., k]
    totals[..., -1] = 1e6
    sums = jax.jit(prefix_sums, static_argnums=1)
    given = sums(jnp.asarray(x), 2, jnp.asarray(totals))
    np.testing.assert_array_equal(given, sums(jnp.asarray(x), 2))
    wrong = totals.copy()
    wrong[..., 3] += 1.0
    assert not np.array_equal(sums(jnp.asarray(x), 2, jnp.asarray(wrong)), given)


def test_level_gains_of_wide_histograms_match_reference():
    # Past 16 bins the prefix sums go by blocks (four here), their totals summed from
    # the histogram in its own layout; three outputs, missing values, an empty node.
    n_bins = 64
    rng = np.random.default_rng(n_bins)
    n_rows = 600
    bins = rng.integers(0, n_bins - 1, (N_FEATURES, n_rows))
    bins[rng.random((N_FEATURES, n_rows)) < 0.1] = n_bins - 1
    node = rng.integers(0, N_NODES - 1, n_rows)
    gh = np.concatenate([rng.normal(size=(n_rows, 3)), rng.uniform(0.1, 2.0, (n_rows, 3))], 1)
    hist = reference.histogram(bins, node, gh, N_NODES, n_bins)
    expected = reference.level_gains(hist, 1.0, 0.0, 0.0)
    gains = _gains(jnp.asarray(hist, jnp.float32), _params())
    assert gains.shape == (N_FEATURES, n_bins - 1, 2)
    assert_allclose(np.asarray(gains), expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape, axis", [((3, 255, 2), 1), ((40,), 0), ((2, 5, 16), 2),
                                         ((17, 3), 0), ((4, 3, 2), 1), ((6, 8), 1)])
def test_prefix_sums_match_cumulative_sums(shape, axis):
    # Lengths below, at and past one block of 16, and 255 bins (16 blocks, the last
    # short); 3 and 8 are summed by additions.
    x = np.random.default_rng(4).normal(size=shape).astype(np.float32)
    sums = jax.jit(prefix_sums, static_argnums=1)(jnp.asarray(x), axis)
    assert sums.shape == x.shape and sums.dtype == jnp.float32
    assert_allclose(sums, np.cumsum(x.astype(np.float64), axis=axis), rtol=0, atol=2e-5)


@pytest.mark.parametrize(("noisy", "large"), [(False, False), (True, False), (True, True)])
def test_a_search_without_missing_rows_scores_missing_left_alone_to_the_same_candidate(
        monkeypatch, noisy, large):
    # With no row in a missing bin both directions have the same gains and ties go to
    # missing-left, so missing_values=False (missing-left alone, where the two would be
    # scored in one pass, or in turns of a loop when the search is large) finds the same
    # candidate, bit for bit, noise or not.
    import jaxgbt.core.split as split

    cells = N_FEATURES * N_NODES * N_BINS
    # Small: the cells alone below the threshold, times K = 2 at it; large: at it.
    monkeypatch.setattr(split, "ONE_DIRECTION_MIN_CELLS", cells if large else 2 * cells)
    directions = []
    lefts = split._lefts
    monkeypatch.setattr(split, "_lefts",
                        lambda sums, d: directions.append(d) or lefts(sums, d))
    hist = _random_hist(2, seed=3)
    hist[:, :, -1] = 0.0
    params = _params(l2=0.5)
    if noisy:
        params = params._replace(noise=split.ScoreNoise(jax.random.PRNGKey(4), jnp.float32(2.0)))
    features = jnp.arange(N_FEATURES, dtype=jnp.int32)
    counted = jnp.ones(N_FEATURES, bool)

    def best(missing_values):
        return jax.jit(lambda h, p: split.best_level_candidate(
            h, features, counted, p, None, missing_values=missing_values))(
            jnp.asarray(hist, jnp.float32), params)

    both, left = best(True), best(False)
    assert directions == ([1] if large else [2, 1])  # the loop builds its own lefts
    assert int(left.index) == int(both.index) and int(left.index) % 2 == 0
    assert float(left.gain) == float(both.gain)
