"""random_strength: candidates ranked by CatBoost's noisy score (``core.split.ScoreNoise``),
its scale (``core.round.noise_scale``) and the fit argument."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import SMALL, assert_same_numbers, make_binary
from numpy.testing import assert_array_equal

import jaxgbt
import jaxgbt.core.search as search
import jaxgbt.core.split as split
from jaxgbt.core.histogram import build_histogram
from jaxgbt.core.round import noise_scale
from jaxgbt.core.split import ScoreNoise, SplitParams
from jaxgbt.core.tree import grow_depthwise_tree, grow_tree

N_ROWS, N_BINS, DEPTH = 200, 16, 2
GROWERS = pytest.mark.parametrize("grow", [grow_tree, grow_depthwise_tree],
                                  ids=["oblivious", "depthwise"])


def _problem(n_features: int = 8):
    """bins u8[F, N] with a few missing cells, and gh f32[N, 2] with a signal in
    features 1, 2 and 6."""
    rng = np.random.default_rng(0)
    bins = rng.integers(0, N_BINS - 1, (n_features, N_ROWS)).astype(np.uint8)
    bins[rng.random((n_features, N_ROWS)) < 0.05] = N_BINS - 1
    signal = bins[1].astype(np.float64) - 0.5 * bins[2] + (bins[6] > 9)
    g = (signal - signal.mean() + rng.normal(size=N_ROWS)) / 4
    h = rng.uniform(0.5, 1.5, N_ROWS)
    return jnp.asarray(bins), jnp.asarray(np.column_stack([g, h]), jnp.float32)


def _params(scale=None, min_split_gain=0.0, seed=0, by_feature=False):
    base = SplitParams(*(jnp.float32(v) for v in (1.0, 0.0, min_split_gain, 1.0)))
    if scale is None:
        return base
    return base._replace(noise=ScoreNoise(jax.random.PRNGKey(seed), jnp.float32(scale),
                                          jnp.asarray(by_feature)))


def _grown(grow, params, bins=None, gh=None):
    if bins is None:
        bins, gh = _problem()
    return jax.jit(lambda b, g: grow(b, g, params, DEPTH, N_BINS))(bins, gh)


def _tree(grown):
    return grown[0]


def test_noise_scale_matches_a_float64_reference():
    rng = np.random.default_rng(1)
    g, h = rng.normal(size=(50, 3)), rng.uniform(0.1, 2.0, (50, 3))
    weight = rng.integers(0, 3, (50, 1)).astype(np.float64)
    for strength, n_rows, length in [(1.0, 50.0, 0.0), (2.5, 50.0, 3.0), (1.0, 50.0, 12.0),
                                     (0.7, 1e6, 30.0), (1.0, 10.0, 500.0)]:
        spread = np.sqrt(np.sum(weight * g * g) / np.sum(weight * h))
        expected = strength * spread * n_rows / (n_rows + np.exp(min(length, 80.0)))
        got = noise_scale(jnp.float32(strength), jnp.asarray(g, jnp.float32),
                          jnp.asarray(h, jnp.float32), jnp.asarray(weight, jnp.float32),
                          jnp.float32(n_rows), jnp.float32(length))
        np.testing.assert_allclose(float(got), expected, rtol=2e-5, atol=1e-30)
    # CatBoost's decay: half at model length log N, near 0 well beyond it.
    half = noise_scale(jnp.float32(1.0), jnp.ones((4, 1)), jnp.ones((4, 1)), jnp.ones((4, 1)),
                       jnp.float32(100.0), jnp.float32(np.log(100.0)))
    np.testing.assert_allclose(float(half), 0.5, rtol=1e-5)


@pytest.mark.parametrize("by_feature", [False, True], ids=["candidate", "feature"])
def test_noisy_ranks_match_a_float64_reference(by_feature):
    bins, gh = _problem()
    # Feature 3 fills no row in bins 5 and 6, feature 4 none past bin 3 (its missing
    # cells stay): those candidates divide the rows as the one before them.
    bins = np.asarray(bins).copy()
    bins[3][np.isin(bins[3], (5, 6))] = 4
    bins[4][(bins[4] > 3) & (bins[4] < N_BINS - 1)] = 3
    bins = jnp.asarray(bins)
    params = _params(scale=0.3, min_split_gain=0.05, by_feature=by_feature)
    node = jnp.asarray(np.random.default_rng(2).integers(0, 2, N_ROWS), jnp.int32)
    hist = build_histogram(bins, node, gh, 2, N_BINS)  # [F, 2, B, 2]
    features = jnp.arange(8, dtype=jnp.int32)
    gains, parent, _ = split.level_gains_and_parent(hist, params)  # [F, B-1, 2], [F]
    got = np.asarray(split.candidate_ranks(gains, parent, None, features, params, hist),
                     np.float64)

    H = np.asarray(hist, np.float64)
    totals = H.sum(axis=2)  # [F, n, 2]
    parent_ref = np.sum(totals[..., 0] ** 2 / (totals[..., 1] + 1.0), axis=1)
    np.testing.assert_allclose(np.asarray(parent), parent_ref, rtol=1e-5)
    draws = np.asarray(split.candidate_normals(params.noise.key, features,
                                               jnp.arange(N_BINS - 1, dtype=jnp.uint32)))
    g64 = np.asarray(gains, np.float64)
    score = np.sqrt(np.maximum(g64 + parent_ref[:, None, None], 0))
    expected = score + 0.3 * draws[..., None]
    empty = np.all(H[:, :, :-1] == 0, axis=(1, 3))  # [F, B-1]: no row of either node
    empty[:, 0] = False
    assert empty[3, [5, 6]].all() and empty[4, 4:].all() and empty.sum() == 2 + (N_BINS - 1 - 4)
    ranked = (g64 > 0.05) & ~empty[..., None]
    expected = np.where(ranked, expected, -np.inf)
    assert np.isneginf(expected).any() and np.isfinite(expected).any()
    # The repeated candidates would split: only their mask leaves them out.
    assert (g64[4, 4:, 1] > 0.05).all()
    if by_feature:
        # CatBoost's: each feature's largest noisy score picks its best (in each missing
        # direction), which is ranked by its own score plus one more draw of the feature's.
        key = np.asarray(params.noise.key).astype(np.uint32) ^ np.uint32(0x7F4A7C15)
        fresh = np.asarray(split.candidate_normals(jnp.asarray(key), features,
                                                   jnp.zeros((), jnp.uint32)))
        best = ranked & (expected == expected.max(axis=1, keepdims=True))
        assert np.all(best.sum(axis=1) >= 1)
        expected = np.where(best, score + 0.3 * fresh[:, None, None], -np.inf)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


@pytest.mark.parametrize("by_node", [False, True])
@pytest.mark.parametrize("n_nodes", [4, 5])  # the nodes ANDed by halving, an odd count too
def test_repeated_candidates_are_bins_without_any_sum_of_any_node(by_node, n_nodes):
    # Three outputs (six sums a bin): a bin holding a single nonzero sum, in any column
    # of any node, is not empty; -0.0 is empty.
    hist = np.random.default_rng(8).normal(size=(3, n_nodes, 16, 6)).astype(np.float32)
    hist[:, :, 4:13] = 0.0
    hist[0, 2, 6, 5] = 1.0  # the last Hessian column of node 2
    hist[1, 0, 7, 3] = -2.0  # a Hessian of another output, node 0
    hist[2, 3, 8, 0] = 0.5  # the first gradient, the last node
    hist[0, 1, 9, 2] = -0.0
    got = np.asarray(split.repeated_candidates(jnp.asarray(hist), by_node))
    empty = np.all(hist[:, :, :-1] == 0, axis=(3,) if by_node else (1, 3))
    empty[..., 0] = False
    assert got.shape == empty.shape + (1,)
    np.testing.assert_array_equal(got[..., 0], empty)
    assert not empty[..., 6].all() and not empty[..., 7].all() and empty[..., 9].all()


def test_candidate_normals_are_standard_normal_and_depend_on_key_and_feature_alone():
    key = jax.random.PRNGKey(5)
    features = jnp.arange(400, dtype=jnp.int32)
    cells = jnp.arange(8 * 31, dtype=jnp.uint32).reshape(8, 31)
    draws = np.asarray(split.candidate_normals(key, features, cells), np.float64)
    assert draws.shape == (400, 8, 31) and np.all(np.isfinite(draws))
    flat = np.sort(draws.ravel())
    assert abs(flat.mean()) < 0.02 and abs(flat.var() - 1.0) < 0.02
    # Quantiles of N(0, 1) at 2.5%, 16%, 50%, 84%, 97.5%.
    for q, z in [(0.025, -1.96), (0.16, -0.994), (0.5, 0.0), (0.84, 0.994), (0.975, 1.96)]:
        assert abs(flat[int(q * flat.size)] - z) < 0.03
    # No correlation between neighbouring cells, features or keys.
    assert abs(np.corrcoef(draws[:, :, :-1].ravel(), draws[:, :, 1:].ravel())[0, 1]) < 0.02
    assert abs(np.corrcoef(draws[:-1].ravel(), draws[1:].ravel())[0, 1]) < 0.02
    other = np.asarray(split.candidate_normals(jax.random.fold_in(key, 1), features, cells))
    assert abs(np.corrcoef(draws.ravel(), other.ravel())[0, 1]) < 0.02
    # A feature's draws do not depend on which features are drawn with it.
    some = np.asarray(split.candidate_normals(key, jnp.asarray([7, 300], jnp.int32), cells))
    assert_array_equal(some, draws[[7, 300]].astype(np.float32))


@GROWERS
def test_zero_noise_finds_the_plain_split(grow):
    # The square root keeps the order of the gains: no noise, the same tree.
    plain, quiet = _tree(_grown(grow, _params())), _tree(_grown(grow, _params(scale=0.0)))
    for got, expected in zip(quiet, plain, strict=True):
        assert_same_numbers(got, expected)


@GROWERS
def test_noise_moves_splits_by_seed_and_never_to_one_that_does_not_gain(grow):
    trees = [_tree(_grown(grow, _params(scale=50.0, min_split_gain=0.5, seed=seed)))
             for seed in range(4)]
    plain = _tree(_grown(grow, _params(min_split_gain=0.5)))
    features = {tuple(np.asarray(t.feature).tolist()) for t in trees}
    assert len(features) > 1 and any(
        not np.array_equal(t.feature, plain.feature) for t in trees)
    for tree in trees:
        gain = np.asarray(tree.gain)
        assert np.all((gain == 0) | (gain > 0.5))  # a split, or a pass-through
        assert np.any(gain > 0)


@pytest.mark.parametrize("by_feature", [False, True], ids=["candidate", "feature"])
@GROWERS
def test_noise_does_not_depend_on_how_features_are_blocked(monkeypatch, grow, by_feature):
    trees = []
    for block_bytes in (1, 2**30):  # one feature per block; every feature in one
        monkeypatch.setattr(search, "SEARCH_BLOCK_BYTES", block_bytes)
        monkeypatch.setattr(search, "FEW_ROWS_SEARCH_BLOCK_BYTES", block_bytes)
        trees.append(_tree(_grown(grow, _params(scale=1.0, seed=3, by_feature=by_feature))))
    for got, expected in zip(*trees, strict=True):
        assert_same_numbers(got, expected)


def test_fit_with_random_strength_is_seeded_and_plain_at_zero():
    X, y = make_binary()
    plain = [jaxgbt.fit("logistic", X, y, random_strength=0.0, seed=seed, **SMALL)
             for seed in (0, 1)]
    assert_array_equal(plain[0].leaf_value, plain[1].leaf_value)  # no draw at all
    noisy = [jaxgbt.fit("logistic", X, y, seed=seed, **SMALL) for seed in (0, 0, 1)]
    assert_array_equal(noisy[0].leaf_value, noisy[1].leaf_value)
    assert not np.array_equal(noisy[0].feature, noisy[2].feature)
    assert not np.array_equal(noisy[0].feature, plain[0].feature)
    assert np.all(np.isfinite(noisy[0].leaf_value))


def test_noise_draws_choose_how_noisy_scores_pick_and_are_checked():
    X, y = make_binary()
    by = {draws: jaxgbt.fit("logistic", X, y, noise_draws=draws, **SMALL)
          for draws in ("feature", "candidate")}
    assert_array_equal(jaxgbt.fit("logistic", X, y, **SMALL).leaf_value,
                       by["candidate"].leaf_value)  # the default
    assert not np.array_equal(by["feature"].feature, by["candidate"].feature)
    quiet = {draws: jaxgbt.fit("logistic", X, y, noise_draws=draws, random_strength=0.0,
                               **SMALL) for draws in ("feature", "candidate")}
    assert_array_equal(quiet["feature"].leaf_value, quiet["candidate"].leaf_value)
    with pytest.raises(ValueError, match="noise_draws"):
        jaxgbt.fit("logistic", X, y, noise_draws="bin", **SMALL)


def test_random_strength_is_swept_like_the_other_traced_settings():
    X, y = make_binary()
    models = jaxgbt.fit_many("logistic", X, y, params={"random_strength": [0.5, 2.0]}, **SMALL)
    for i, strength in enumerate((0.5, 2.0)):
        single = jaxgbt.fit("logistic", X, y, random_strength=strength, **SMALL)
        assert_array_equal(models[i].feature, single.feature)
        np.testing.assert_allclose(models[i].leaf_value, single.leaf_value, rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("value", [-1.0, float("nan"), "1"])
def test_bad_random_strength_is_refused_by_name(value):
    X, y = make_binary()
    with pytest.raises((ValueError, TypeError), match="random_strength"):
        jaxgbt.fit("logistic", X, y, random_strength=value, **SMALL)


def test_a_depth_one_depthwise_tree_is_the_oblivious_one_under_either_selection():
    # One node: the depthwise search, which scores the missing directions in turn, must
    # pick as the oblivious one, which scores both at once (the problem has missing rows).
    bins, gh = _problem()
    for by_feature in (False, True):
        for seed in range(4):
            params = _params(scale=3.0, seed=seed, by_feature=by_feature)
            oblivious = jax.jit(grow_tree, static_argnums=(3, 4))(bins, gh, params, 1,
                                                                   N_BINS)[0]
            depthwise = jax.jit(grow_depthwise_tree, static_argnums=(3, 4))(bins, gh, params,
                                                                             1, N_BINS)[0]
            assert_array_equal(oblivious.feature, depthwise.feature)
            assert_array_equal(oblivious.split_bin, depthwise.split_bin)
