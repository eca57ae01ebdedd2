"""score_function="cosine": candidates ranked by CatBoost's cosine score
(``core.split.cosine_scores``) instead of their gain, against a float64 reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
from conftest import SMALL, assert_same_numbers, make_binary, make_regression
from numpy.testing import assert_array_equal

import jaxgbt
import jaxgbt.core.search as search
import jaxgbt.core.split as split
import jaxgbt.spec as spec
from jaxgbt.core.histogram import build_histogram
from jaxgbt.core.split import ScoreNoise, SplitParams
from jaxgbt.core.tree import grow_depthwise_tree, grow_lossguide_tree, grow_tree

N_ROWS, N_BINS, DEPTH = 120, 8, 3


def _problem(seed: int = 0, n_features: int = 5):
    """bins u8[F, N] with some missing cells, gh f32[N, 2] of a squared error with
    uneven weights: few rows per leaf, where the cosine and the gain disagree."""
    rng = np.random.default_rng(seed)
    bins = rng.integers(0, N_BINS - 1, (n_features, N_ROWS)).astype(np.uint8)
    bins[rng.random((n_features, N_ROWS)) < 0.05] = N_BINS - 1
    target = (bins[0] > 3) + 0.5 * bins[1] + rng.normal(size=N_ROWS)
    weight = rng.uniform(0.2, 2.0, N_ROWS)
    g = weight * (target.mean() - target)
    return bins, np.column_stack([g, weight]).astype(np.float32)


def _params(l2=3.0, l1=0.0, min_split_gain=0.0, min_child_weight=0.0, noise=None):
    return SplitParams(*(jnp.float32(v) for v in (l2, l1, min_split_gain, min_child_weight)),
                       noise=noise)


def test_level_cosine_scores_match_a_float64_reference():
    bins, gh = _problem()
    node = np.random.default_rng(1).integers(0, 4, N_ROWS)
    hist = build_histogram(jnp.asarray(bins), jnp.asarray(node, jnp.int32), jnp.asarray(gh),
                           4, N_BINS)
    for l1 in (0.0, 0.5):
        _, _, got = split.level_gains_and_parent(hist, _params(l1=l1), cosine=True)
        expected = reference.level_cosine(np.asarray(hist, np.float64), 3.0, l1)
        np.testing.assert_allclose(np.asarray(got), expected, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("settings", [{}, {"min_split_gain": 2.0}, {"min_child_weight": 4.0},
                                      {"l1": 0.5}])
def test_oblivious_cosine_trees_match_the_reference(settings):
    differs = False
    for seed in range(3):
        bins, gh = _problem(seed)
        params = _params(**settings)
        tree, leaf = jax.jit(lambda b, g, p: grow_tree(b, g, p, DEPTH, N_BINS,
                                                       score_function="cosine"))(
            jnp.asarray(bins), jnp.asarray(gh), params)
        kwargs = dict(l2=3.0, l1=settings.get("l1", 0.0),
                      min_split_gain=settings.get("min_split_gain", 0.0),
                      min_child_weight=settings.get("min_child_weight", 0.0))
        expected = reference.grow_tree(bins, gh, DEPTH, N_BINS, score_function="cosine",
                                       **kwargs)
        assert_array_equal(tree.feature, expected.feature)
        assert_array_equal(tree.split_bin, expected.split_bin)
        assert_array_equal(tree.default_left, expected.default_left)
        np.testing.assert_allclose(tree.gain, expected.gain, rtol=1e-4, atol=1e-4)
        assert_array_equal(leaf, expected.leaf)
        by_gain = reference.grow_tree(bins, gh, DEPTH, N_BINS, **kwargs)
        differs |= not np.array_equal(by_gain.split_bin, expected.split_bin) or \
            not np.array_equal(by_gain.feature, expected.feature)
    assert differs  # the problems tell the two scores apart


@pytest.mark.parametrize("score_function", ["l2", "cosine"])
def test_a_negative_min_split_gain_splits_levels_at_a_loss(score_function):
    # A label that bins[0] > 3 decides: after the first split every node is pure, and
    # splitting a pure node only shrinks its leaves (l2 = 3), a negative gain.
    # min_split_gain=0 leaves those levels pass-through; -inf (fit's oblivious default)
    # splits them, as CatBoost does.
    rng = np.random.default_rng(5)
    bins = rng.integers(0, N_BINS - 1, (5, N_ROWS)).astype(np.uint8)
    target = (bins[0] > 3).astype(np.float64)
    gh = np.column_stack([target.mean() - target, np.ones(N_ROWS)]).astype(np.float32)
    grow = jax.jit(lambda b, g, p: grow_tree(b, g, p, DEPTH, N_BINS,
                                             score_function=score_function))
    for floor, splits in ((0.0, 1), (-np.inf, DEPTH), (-1e9, DEPTH)):
        tree, leaf = grow(jnp.asarray(bins), jnp.asarray(gh), _params(min_split_gain=floor))
        expected = reference.grow_tree(bins, gh, DEPTH, N_BINS, l2=3.0,
                                       min_split_gain=floor, score_function=score_function)
        assert int(np.sum(np.asarray(tree.gain) > 0)) == splits
        assert_array_equal(tree.feature, expected.feature)
        assert_array_equal(tree.split_bin, expected.split_bin)
        assert_array_equal(tree.default_left, expected.default_left)
        np.testing.assert_allclose(tree.gain, expected.gain, rtol=1e-4, atol=1e-4)
        assert_array_equal(leaf, expected.leaf)
    # The levels split at a loss record the smallest normal float32 as their gain.
    assert np.all(np.asarray(tree.gain)[1:] == split.MADE_SPLIT_MIN_GAIN)


def test_a_negative_min_split_gain_is_for_oblivious_trees():
    X, y = make_binary(n_rows=64)
    for policy in ("depthwise", "lossguide"):
        with pytest.raises(ValueError, match="negative min_split_gain grows every level"):
            jaxgbt.fit("logistic", X, y, grow_policy=policy, min_split_gain=-1.0, **SMALL)
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="finite number or -inf"):
            jaxgbt.fit("logistic", X, y, min_split_gain=bad, **SMALL)


def test_min_split_gain_defaults_by_grow_policy():
    # Oblivious levels all split (CatBoost's rule); depthwise and leaf-wise nodes split
    # only where they gain, as XGBoost's and LightGBM's do.
    assert spec.min_split_gain(None, "oblivious") == -np.inf
    assert spec.min_split_gain(None, "depthwise") == 0.0
    assert spec.min_split_gain(None, "lossguide") == 0.0
    assert spec.min_split_gain(2.5, "depthwise") == 2.5


def test_depthwise_cosine_trees_match_the_reference():
    differs = False
    for seed in range(3):
        bins, gh = _problem(seed)
        tree, leaf, _ = jax.jit(lambda b, g, p: grow_depthwise_tree(
            b, g, p, DEPTH, N_BINS, score_function="cosine"))(
            jnp.asarray(bins), jnp.asarray(gh), _params())
        expected = reference.grow_depthwise_tree(bins, gh, DEPTH, N_BINS, l2=3.0,
                                                 score_function="cosine")
        assert_array_equal(tree.feature, expected.feature)
        assert_array_equal(tree.split_bin, expected.split_bin)
        assert_array_equal(leaf, expected.leaf)
        by_gain = reference.grow_depthwise_tree(bins, gh, DEPTH, N_BINS, l2=3.0)
        differs |= not np.array_equal(by_gain.split_bin, expected.split_bin)
    assert differs


def test_cosine_ranks_as_the_gain_for_squared_error_without_l2():
    # Each child's H is its row count: the cosine score is sqrt(gain + parent score).
    rng = np.random.default_rng(3)
    bins = jnp.asarray(rng.integers(0, N_BINS - 1, (5, N_ROWS)), jnp.uint8)
    target = (np.asarray(bins[0]) > 3) + rng.normal(size=N_ROWS)
    gh = jnp.asarray(np.column_stack([target.mean() - target, np.ones(N_ROWS)]), jnp.float32)
    params = _params(l2=0.0)
    trees = [jax.jit(lambda b, g, p, s=s: grow_tree(b, g, p, DEPTH, N_BINS,
                                                    score_function=s))(bins, gh, params)[0]
             for s in ("l2", "cosine")]
    assert_array_equal(trees[0].feature, trees[1].feature)
    assert_array_equal(trees[0].split_bin, trees[1].split_bin)


def test_cosine_with_noise_does_not_depend_on_how_features_are_blocked(monkeypatch):
    bins, gh = _problem(n_features=7)
    params = _params(noise=ScoreNoise(jax.random.PRNGKey(4), jnp.float32(0.5)))
    trees = []
    for block_bytes in (1, 2**30):  # one feature per block; every feature in one
        monkeypatch.setattr(search, "SEARCH_BLOCK_BYTES", block_bytes)
        monkeypatch.setattr(search, "FEW_ROWS_SEARCH_BLOCK_BYTES", block_bytes)
        trees.append(grow_tree(jnp.asarray(bins), jnp.asarray(gh), params, DEPTH, N_BINS,
                               score_function="cosine")[0])
    for got, expected in zip(*trees, strict=True):
        assert_same_numbers(got, expected)


def test_lossguide_cosine_tree_with_every_leaf_is_the_depthwise_one():
    bins, gh = _problem(5)
    depthwise = grow_depthwise_tree(jnp.asarray(bins), jnp.asarray(gh), _params(), DEPTH,
                                    N_BINS, score_function="cosine")[0]
    lossguide = grow_lossguide_tree(jnp.asarray(bins), jnp.asarray(gh), _params(), DEPTH,
                                    N_BINS, 2**DEPTH, score_function="cosine")[0]
    for got, expected in zip(lossguide, depthwise, strict=True):
        assert_same_numbers(got, expected)


def test_fit_with_cosine_scores_trains_predicts_and_reloads(tmp_path):
    X, y = make_regression(n_rows=100)  # few rows per leaf: the two scores disagree
    plain = jaxgbt.fit("squared_error", X, y, l2=3.0, score_function="l2", **SMALL)
    model = jaxgbt.fit("squared_error", X, y, l2=3.0, score_function="cosine", **SMALL)
    assert not (np.array_equal(model.feature, plain.feature)
                and np.array_equal(model.threshold, plain.threshold))
    def rmse(m):
        return float(np.sqrt(np.mean((np.asarray(m.predict(X)) - y) ** 2)))

    # Both learn (8 trees at rate 0.1), by about as much.
    assert rmse(model) < 0.9 * float(np.std(y))
    assert abs(rmse(model) - rmse(plain)) < 0.05 * float(np.std(y))
    model.save(tmp_path / "m.jgbt")
    assert_array_equal(jaxgbt.load(tmp_path / "m.jgbt").predict(X), model.predict(X))
    # The gain is still what a split reports: every split of the model gains.
    assert np.all(np.asarray(model.split_gain) >= 0)


def test_cosine_scores_with_fit_many_equal_single_fits():
    X, y = make_binary()
    models = jaxgbt.fit_many("logistic", X, y, params={"l2": [0.5, 4.0]},
                             score_function="cosine", **SMALL)
    for i, l2 in enumerate((0.5, 4.0)):
        single = jaxgbt.fit("logistic", X, y, l2=l2, score_function="cosine", **SMALL)
        assert_array_equal(models[i].feature, single.feature)
        np.testing.assert_allclose(models[i].leaf_value, single.leaf_value, rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("value", ["Cosine", "L2", "", 1])
def test_bad_score_function_is_refused_by_name(value):
    X, y = make_binary()
    with pytest.raises((ValueError, TypeError), match="score_function"):
        jaxgbt.fit("logistic", X, y, score_function=value, **SMALL)
